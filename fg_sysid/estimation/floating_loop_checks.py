"""Floating looped robots: effort-saturation windows and the fixed-state regression (issue 11, floating).

Two tools that separate what a floating looped fit gets wrong (docs/loops-floating.md, "Why the fit
left the truth"):

* **Saturation windows** (`floating_loops.saturation_window`, re-exported here). A log in which an
  actuated effort reaches its effort limit (URDF ``effort``) is a log where the robot is not driven by
  the model's dynamics alone: on the B1 step-in-place log the FR four-bar ran into its toggle range,
  the knee motor sat at its 140 N·m limit for 76 ms and MuJoCo's accelerations reached 4e4 rad/s² — a
  jam no smooth state trajectory sampled at 500 Hz can represent. `FloatingBaseSmoother` on a looped
  robot leaves the knots within ``SATURATION_WINDOW_S`` of such samples out of the effort rows and the
  initial least squares and weights their measured contact forces 100× down (`floating_loops.
  finish_problem`, `floating_loops.projected_system`); states, contact and closure forces there are
  still estimated (kinematics, base wrench, closures, encoders).
* **Fixed-state regression** (`fixed_state_system`, `map_fit`): the looped floating inverse dynamics at
  *given* states — the estimator's model with the state estimation taken out. Per sample, with W(q, v, a)
  the regressor of the full generalized forces (`loop_baseline.full_regressor`: π per body, (fc, fv) per
  joint, armature per joint; SI units, Pinocchio conventions) and G the closure's dependent map
  (v = G v_ind, v_ind = base twist + actuated joints; `ClosureKinematics.dependent_map`):

      with forces:     Gᵀ W p = Gᵀ (S τ + Σ_f J_fᵀ f_f)            (base and actuated rows; paper 000 eq. 23)
      without forces:  Nᵀ W p = Nᵀ S τ,  N = G · null(J_c G)       (contact forces eliminated, eq. 23 with
                                                                    the stance feet as constraints)

  with J_f the world-aligned Jacobian of foot f's contact point (frame origin − radius·ẑ) and J_c the
  stacked J_f of the stance feet. Closure forces drop out of both (Gᵀ Gφᵀ = 0).

Units: SI (m, rad, s, kg, N, N·m).
"""

from __future__ import annotations

import numpy as np

from .floating_loops import SATURATION_LEVEL, SATURATION_WINDOW_S, saturation_window  # noqa: F401


def fixed_state_system(robot, q, v, a, tau, forces=None, stance=None, velocity_scale: float = 0.05):
    """Stacked rows ``A p = b`` of the looped floating inverse dynamics at the given states (module
    docstring). ``q`` (N, nq), ``v``, ``a`` (N, nv) Pinocchio states on the closures; ``tau`` (N, n_joints)
    joint-side efforts (passive joints 0 or NaN); ``forces`` (N, n_feet, 3) world contact forces on the
    feet (`robot.contact_frames` order) → the "with forces" rows (base + actuated, nv − m per sample);
    else ``stance`` (N, n_feet) bool → the contact-eliminated rows. Parameters in the physical layout
    of `loop_baseline.parameter_names`."""
    from ..floating_validation import _contact_jacobians
    from ..robots.loop_kinematics import ClosureKinematics
    from ..robots.loops import actuation_of
    from .loop_baseline import full_regressor

    if (forces is None) == (stance is None):
        raise ValueError("give exactly one of forces (with-forces rows) or stance (contact-eliminated rows)")
    q, v, a = (np.atleast_2d(np.asarray(x, float)) for x in (q, v, a))
    tau = np.nan_to_num(np.atleast_2d(np.asarray(tau, float)))
    names = list(robot.joint_names)
    iv = np.asarray(robot.joint_index_v(), int)
    passive = [int(iv[names.index(j)]) for j in actuation_of(robot).passive]
    ck = ClosureKinematics(robot.model, robot.loops)
    model = robot.model
    data = model.createData()
    fids = [model.getFrameId(f) for f in robot.contact_frames]
    radius = float(getattr(robot, "contact_radius", 0.0) or 0.0)
    A, b = [], []
    for k in range(q.shape[0]):
        W = full_regressor(robot, q[k], v[k], a[k], velocity_scale)
        G, _ = ck.dependent_map(q[k], passive)
        gen = np.zeros(robot.nv)
        gen[iv] = tau[k]
        Jf = _contact_jacobians(model, data, q[k], fids, radius)  # contact points o_f − radius·ẑ
        if forces is not None:
            F = np.asarray(forces, float)[k]
            gen = gen + sum(J.T @ F[i] for i, J in enumerate(Jf))
            N = G
        else:
            Js = [J for J, s in zip(Jf, np.asarray(stance, bool)[k], strict=True) if s]
            N = G
            if Js:
                C = np.vstack(Js) @ G
                _, sv, Vt = np.linalg.svd(C)
                r = int(np.sum(sv > 1e-9 * max(sv[0], 1e-300)))
                N = G @ Vt[r:].T
        A.append(N.T @ W)
        b.append(N.T @ gen)
    return np.vstack(A), np.concatenate(b)


def map_fit(A, b, p_bar, p_std, sigma_rows: float, lower=None) -> tuple[np.ndarray, np.ndarray]:
    """MAP linear least squares: rows ``A p = b`` with std ``sigma_rows`` and the prior p ~ N(p_bar,
    diag p_std²), optional lower bounds (``lower``, −inf = none; scipy ``lsq_linear``). Returns (p, the
    posterior covariance of the unbounded problem, (AᵀA/σ² + P⁻¹)⁻¹)."""
    from scipy.optimize import lsq_linear

    p_bar, p_std = np.asarray(p_bar, float), np.asarray(p_std, float)
    M = np.vstack([np.asarray(A, float) / sigma_rows, np.diag(1.0 / p_std)])
    rhs = np.concatenate([np.asarray(b, float) / sigma_rows, p_bar / p_std])
    lo = np.full(p_bar.size, -np.inf) if lower is None else np.asarray(lower, float)
    Q, R = np.linalg.qr(M)  # the same bounded problem on the square factor (fast active-set solve)
    p = lsq_linear(R, Q.T @ rhs, bounds=(lo, np.full(p_bar.size, np.inf)), method="bvls").x
    Ri = np.linalg.pinv(R)
    return p, Ri @ Ri.T


def mass_split(robot, cov, names) -> dict:
    """Base vs legs in a posterior covariance ``cov`` of the physical layout (``names``): std of the base
    mass, of the legs' total mass and of the total mass [kg], and the correlation of base and legs."""
    im = [i for i, n in enumerate(names) if n.endswith(".m")]
    base = im[0]
    legs = im[1:]
    e_b = np.zeros(len(names))
    e_b[base] = 1.0
    e_l = np.zeros(len(names))
    e_l[legs] = 1.0
    sb = float(np.sqrt(e_b @ cov @ e_b))
    sl = float(np.sqrt(e_l @ cov @ e_l))
    st = float(np.sqrt((e_b + e_l) @ cov @ (e_b + e_l)))
    return {"base_mass_std": sb, "legs_mass_std": sl, "total_mass_std": st,
            "corr_base_legs": float(e_b @ cov @ e_l / max(sb * sl, 1e-300))}


def stick_row_factor(robot, q, v, p, sigma_rows: float, velocity_scale: float = 0.05) -> np.ndarray:
    """Row factor (rows of `fixed_state_system` with forces,) of the stick-phase rule (`arm_stick`,
    issue 9 / 11): per sample and row i of Gᵀ W p = Gᵀ(S τ + Σ Jᵀ f) (base and actuated coordinates),
    σ_stick,i = ‖(G_ji δ_j)_j‖ with δ_j = fc_j (1 − tanh²(v_j / (2 v_s))) (`arm_stick.stick_delta`, fc from
    the physical vector ``p`` in `loop_baseline.parameter_names` order) and the factor
    σ / √(σ² + σ_stick²) (``sigma_rows`` = σ [N·m | N]); base rows get 1 (no joint friction reaches them)."""
    from ..robots.loop_kinematics import ClosureKinematics
    from ..robots.loops import actuation_of
    from .arm_stick import stick_delta
    from .loop_baseline import parameter_names

    q, v = np.atleast_2d(np.asarray(q, float)), np.atleast_2d(np.asarray(v, float))
    names = list(robot.joint_names)
    iv = np.asarray(robot.joint_index_v(), int)
    pn = parameter_names(robot)
    fc = np.asarray(p, float)[[pn.index(f"{j}.fc") for j in names]]
    delta = stick_delta(fc, v[:, iv], velocity_scale)  # (N, n_joints)
    passive = [int(iv[names.index(j)]) for j in actuation_of(robot).passive]
    ck = ClosureKinematics(robot.model, robot.loops)
    out = []
    for k in range(q.shape[0]):
        G, _ = ck.dependent_map(q[k], passive)
        s = np.sqrt(np.sum((G[iv] * delta[k][:, None]) ** 2, axis=0))
        out.append(sigma_rows / np.sqrt(sigma_rows ** 2 + s ** 2))
    return np.concatenate(out)
