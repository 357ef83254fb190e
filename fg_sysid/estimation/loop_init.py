"""Initial trajectory and initial parameters of the loop smoother (issue 11, accuracy).

Two defects made the `JointSmoother` on a looped robot end far above the noise floor even on an exact
in-class log (B1 leg with a four-bar knee: held-out knee-motor error 3.6 % against a 0.62 % floor, every
viscous coefficient at its 1e-4 floor; measurements in docs/benchmarks.md, "Closed loops: loop smoother
accuracy"):

1. **Initial parameters.** The start was paper 000's constraint-elimination least squares in the
   physical layout. Its inertias are not physically consistent (a fixed-base leg leaves many inertial
   directions unseen; the LS only has a tiny ridge), and projecting each body onto the consistent set
   breaks the cancellations that made the LS predict well: on the B1 leg the projected start has a
   2 kg·m² hip inertia, an inverse-dynamics cost of 1e16, and the first Levenberg–Marquardt steps threw
   the exp-positive viscous coefficients to their floor, where d(cost)/d(log fv) = fv · d(cost)/d(fv)
   vanishes — they never came back. `map_parameters` fits the **same regression** (u = Gᵀ W p, paper 000
   eqs. 27–29) **in the smoother's own parameterization** θ (physically consistent by construction:
   log-Cholesky inertias, exp-positive friction and armature), with the smoother's prior on θ as the
   regularizer (MAP least squares, Gauss–Newton with Levenberg damping): unseen directions stay at the
   prior mean, seen ones follow the data.
2. **Initial trajectory and process noise.** A looped robot skips the tree least-squares baseline that
   picks the Savitzky–Golay window by cross-validation, so the 50 ms default window was used: on a
   σ = 0.01 rad log its accelerations are noise (RMS 22 rad/s² where the motion has 2–5), and the
   process noise (0.3 × that RMS per step) let the acceleration states absorb the torque rows.
   `initial_trajectory` uses the constraint-elimination pipeline's states instead (paper 000 Sec. V-B:
   zero-phase Butterworth on the actuated encoders and velocities, 4th-order central differences,
   passive joints from the closures), which also closes the loops in the initial states.

Units: SI (rad, rad/s, rad/s², N·m); joint order = the robot's (fixed base: velocity coordinates).
"""

from __future__ import annotations

import numpy as np

from ..datasets.log import Log
from .loop_baseline import (
    DEFAULT_CUTOFF_HZ,
    LoopBaselineError,
    LoopStates,
    constrained_regressor,
    loop_states,
)

#: Gauss–Newton iterations of `map_parameters` and its relative cost tolerance
MAP_ITERATIONS = 50
MAP_TOL = 1e-10
#: at most this many samples in the initial regression (every stride-th of the filtered ones)
MAX_ROWS = 2000


def states(smoother, log: Log) -> LoopStates:
    """The constraint-elimination pipeline's states of ``log`` (`loop_baseline.loop_states`, Butterworth
    ``DEFAULT_CUTOFF_HZ``), computed once per fit and kept on the smoother (``_loop_states``)."""
    st = getattr(smoother, "_loop_states", None)
    if st is None or st.t.shape[0] != log.n_samples:
        st = loop_states(smoother.robot, log, DEFAULT_CUTOFF_HZ)
        smoother._loop_states = st
    return st


def initial_trajectory(smoother, log: Log, fallback: tuple) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(q, v, a) of every joint at every sample (N, n_joints) [rad, rad/s, rad/s²] for the smoother's
    initial states and its process-noise level (module docstring, item 2): the filtered actuated
    encoders, the passive joints from the closures (so the loops are closed), v = G v_a, a = G a_a + γ.
    ``fallback`` (the Savitzky–Golay states) when the pipeline cannot run on this log (an actuated
    joint's effort missing)."""
    try:
        st = states(smoother, log)
    except (LoopBaselineError, ValueError, np.linalg.LinAlgError) as e:
        smoother._log(f"initial trajectory: constraint-elimination states unavailable ({e})")
        return fallback
    smoother._log(f"initial trajectory: constraint-elimination states (Butterworth {DEFAULT_CUTOFF_HZ:g} Hz, "
                  "passive joints from the closures)")
    robot = smoother.robot
    iq, iv = robot.joint_index_q(), robot.joint_index_v()
    return st.q[:, iq].copy(), st.v[:, iv].copy(), st.a[:, iv].copy()


def _base_selection(layout) -> np.ndarray:
    """Indices of the smoother layout's physical vector that make the regression's layout
    (π per body, (fc, fv) per joint, armature per joint), or None for other friction models."""
    sfx = list(layout.friction.suffixes)
    if "fc" not in sfx or "fv" not in sfx or layout.kf > 3:
        return None
    nb10, kf = 10 * layout.nb, layout.kf
    fr = [nb10 + kf * j + sfx.index(s) for j in range(layout.nj) for s in ("fc", "fv")]
    arm = list(range(layout.s_armature.start, layout.s_armature.stop))
    return np.array(list(range(nb10)) + fr + arm, int)


def map_parameters(layout, W: np.ndarray, u: np.ndarray, theta_bar: np.ndarray, theta_std: np.ndarray,
                   theta0: np.ndarray | None = None, reweight: int = 2):
    """MAP least squares of the constraint-eliminated regression in the smoother's parameterization.

    Minimizes ½ Σ_k ‖w ⊙ (u_k − W_k S p(θ))‖² + ½ ‖(θ − θ̄) / σ_θ‖² by Gauss–Newton with Levenberg
    damping, where p(θ) = ``layout.to_physical`` and S selects the regression's layout
    (`_base_selection`). ``W`` (K, n_a, n_p) is the stacked Gᵀ W of paper 000 eqs. 27–28 (its friction
    columns use the prior mean of the tanh width), ``u`` (K, n_a) the actuated efforts [N·m]. Row weights
    w per actuated joint: Gautier's two steps (1 / effort RMS, then ``reweight`` − 1 times 1 / residual
    RMS; with ``theta0`` given, 1 / its residual RMS from the start). Returns (θ, info) or
    (None, reason) when the layout's friction model has no (fc, fv) columns.
    """
    sel = _base_selection(layout)
    if sel is None:
        return None, f"friction model {layout.friction.name!r} has no (fc, fv) regression columns"
    theta_bar = np.asarray(theta_bar, float)
    theta_std = np.asarray(theta_std, float)
    th = theta_bar.copy() if theta0 is None else np.asarray(theta0, float).copy()
    K, na, _ = W.shape
    A = W.reshape(K * na, -1)
    b = np.asarray(u, float).reshape(-1)
    # row weights: 1 / residual RMS of the start (with a start at the prior mean, 1 / effort RMS first:
    # weights that small let the prior pull the exp-positive coefficients to their floors)
    r0 = np.asarray(u, float) - (A @ layout.to_physical(th)[sel]).reshape(K, na)
    w = 1.0 / np.maximum(np.sqrt(np.mean((r0 if theta0 is not None else np.asarray(u, float)) ** 2, axis=0)),
                         1e-9)
    info = {"iterations": 0, "weights": []}
    for _ in range(max(int(reweight), 1)):
        wr = np.tile(w, K)
        info["weights"].append(w.tolist())

        def cost(t, wr=wr):
            r = wr * (b - A @ layout.to_physical(t)[sel])
            z = (t - theta_bar) / theta_std
            return 0.5 * float(r @ r + z @ z)

        c = cost(th)
        mu = 1e-6
        for _it in range(MAP_ITERATIONS):
            p = layout.to_physical(th)
            J = (A @ layout.jacobian(th)[sel]) * wr[:, None]  # d(W S p)/dθ, weighted
            r = wr * (b - A @ p[sel])
            z = (th - theta_bar) / theta_std
            H = J.T @ J + np.diag(1.0 / theta_std ** 2)
            g = J.T @ r - z / theta_std
            accepted = False
            while mu < 1e12:
                step = np.linalg.solve(H + mu * np.diag(np.diag(H)), g)
                c_new = cost(th + step)
                if np.isfinite(c_new) and c_new < c:
                    accepted = True
                    break
                mu *= 10.0
            info["iterations"] += 1
            if not accepted:
                break
            rel = (c - c_new) / max(c, 1e-300)
            th, c, mu = th + step, c_new, max(mu / 10.0, 1e-12)
            if rel < MAP_TOL:
                break
        res = (b - A @ layout.to_physical(th)[sel]).reshape(K, na)
        w = 1.0 / np.maximum(np.sqrt(np.mean(res ** 2, axis=0)), 1e-9)
    info["residual_rms"] = np.sqrt(np.mean(res ** 2, axis=0)).tolist()
    info["cost"] = c
    return th, info


def linear_start(layout, W: np.ndarray, u: np.ndarray, theta_bar: np.ndarray, theta_std: np.ndarray,
                 passive: np.ndarray) -> np.ndarray:
    """Start of `map_parameters`: the linear least squares of the regression in the physical layout with
    the smoother's inertial prior linearized at its mean (ridge Σ_p⁻¹, Σ_p = J diag(σ_θ²) Jᵀ per body,
    J = dp/dθ), friction and armature of the actuated joints free (tiny ridge), passive joints' at the
    prior mean; Gautier's two-step row weights. Unseen inertial directions stay at the (consistent) prior
    mean, so the result is close to consistent; `layout.to_theta_projected` projects what is not. (A
    start at the prior mean does not work: the exp-positive fv starts at its floor 1e-4 N·m·s/rad where
    d p / d θ = p, and the Gauss–Newton steps of `map_parameters` stall there.)"""
    sel = _base_selection(layout)
    nb = layout.nb
    p_bar = layout.to_physical(theta_bar)
    pb = p_bar[sel]
    K, na, n_p = W.shape
    A = W.reshape(K * na, n_p)
    Jb = layout.jacobian(theta_bar)
    R = np.zeros((n_p, n_p))  # prior precision in the regression's layout
    for i in range(nb):
        s_ = slice(10 * i, 10 * i + 10)
        Ji = Jb[s_, s_]
        R[s_, s_] = np.linalg.pinv(Ji @ np.diag(theta_std[s_] ** 2) @ Ji.T)
    free = np.ones(n_p, bool)
    fixed = np.concatenate([np.repeat(passive, 2), passive])  # friction (fc, fv), armature
    free[10 * nb:] = ~fixed
    uu = np.asarray(u, float)
    w = 1.0 / np.maximum(np.sqrt(np.mean(uu ** 2, axis=0)), 1e-9)
    x = pb.copy()
    for _ in range(2):
        wr = np.tile(w, K)
        Af = A[:, free] * wr[:, None]
        rhs = wr * (uu.reshape(-1) - A[:, ~free] @ pb[~free])
        Rf = R[np.ix_(free, free)]
        scale = np.maximum(np.linalg.norm(Af, axis=0), 1e-12)
        H = Af.T @ Af + Rf + 1e-10 * np.diag(scale ** 2)
        x[free] = np.linalg.solve(H, Af.T @ rhs + Rf @ pb[free])
        res = uu - (A @ x).reshape(K, na)
        w = 1.0 / np.maximum(np.sqrt(np.mean(res ** 2, axis=0)), 1e-9)
    p = p_bar.copy()
    p[sel] = x
    th, _ = layout.to_theta_projected(p, p_bar)
    return th


def initial_parameters(smoother, log: Log, theta_bar: np.ndarray, theta_std: np.ndarray,
                       stride: int | None = None):
    """Initial θ of a looped robot (module docstring, item 1): `map_parameters` on the
    constraint-elimination rows of ``log`` (every ``stride``-th sample away from the filter edges; default
    at most `MAX_ROWS` samples: the rows are filtered, neighbours carry little new information) with
    the smoother's prior (``theta_bar``, ``theta_std``: `loop_terms.initial_parameters` passes the looped
    prior), or None (prior mean) when the regression cannot be formed on this log."""
    from ..robots.loops import passive_mask

    robot, layout = smoother.robot, smoother.layout_
    try:
        st = states(smoother, log)
    except (LoopBaselineError, ValueError, np.linalg.LinAlgError) as e:
        smoother._log(f"initial θ: constraint-elimination states unavailable ({e}); prior mean")
        return None
    rows = np.flatnonzero(st.keep)
    stride = max(1, -(-rows.size // MAX_ROWS)) if stride is None else max(1, int(stride))
    rows = rows[::stride]
    W = constrained_regressor(robot, st, rows,
                              smoother.friction_velocity_scale)
    theta0 = linear_start(layout, W, st.tau[rows], theta_bar, theta_std, passive_mask(robot))
    theta, info = map_parameters(layout, W, st.tau[rows], theta_bar, theta_std, theta0=theta0, reweight=1)
    if theta is None:
        smoother._log(f"initial θ: {info}; prior mean")
        return None
    smoother._log(f"initial θ: constraint-elimination regression in θ with the prior (MAP, "
                  f"{info['iterations']} Gauss–Newton iterations, residual RMS "
                  f"{np.round(info['residual_rms'], 4).tolist()} N·m)")
    smoother.loop_init_ = info
    return layout.to_physical(theta)




def stick_sigma(smoother, log: Log, p: np.ndarray | None) -> np.ndarray | None:
    """Per knot and actuated joint (N_knots, n_actuated) [N·m]: the std of the friction law's error in its
    transition region, reflected to the motor rows (issue 11, B1 knee, out of class).

    Dry friction with stiction (MuJoCo ``frictionloss``, real gearboxes) takes any value in ±fc while a
    joint sticks or reverses; fc·tanh(v/vs) cannot follow it. Those samples sit at velocity reversals,
    where the acceleration is largest, so unweighted they bias the armature (+105 % on the B1 knee, seed
    1) and with it the held-out torque. Each joint j contributes δ_j = fc_j · (1 − tanh²(v_j / (k·vs_j)))
    (k = `arm_stick.STICK_WIDTH_FACTOR`: ≈ fc at rest, < 0.1 fc beyond 4 vs) and the actuated row a sees
    σ_stick,a = ‖(G_ja δ_j)_j‖ (independent joints; v = G v_a, u = Gᵀ τ: paper 000 eqs. 19, 23).
    `loop_terms.finish_problem` adds it in quadrature to σ_τ of the effort rows. States: the
    constraint-elimination pipeline's (`states`); fc, vs: the initial parameters ``p`` (physical, smoother
    layout). None when ``p`` is None, the friction model has no fc, or the states are unavailable."""
    from ..robots.loop_kinematics import ClosureKinematics
    from ..robots.loops import passive_mask
    from .arm_stick import stick_sigma as joint_stick_sigma

    if p is None:
        return None
    layout, robot = smoother.layout_, smoother.robot
    if "fc" not in layout.friction.suffixes:
        return None
    try:
        st = states(smoother, log)
    except (LoopBaselineError, ValueError, np.linalg.LinAlgError):
        return None
    iv = np.asarray(robot.joint_index_v(), int)
    pas = passive_mask(robot)
    ck = ClosureKinematics(robot.model, robot.loops)
    idx = np.arange(0, log.n_samples, max(int(smoother.knot_stride), 1))
    delta = joint_stick_sigma(layout, np.asarray(p, float), st.v[idx][:, iv],
                              smoother.friction_velocity_scale)  # (knots, n_joints)
    out = np.zeros((idx.size, int((~pas).sum())))
    try:
        for r, k in enumerate(idx):
            G, cols = ck.actuated_map(st.q[k], iv[pas], iv[~pas])
            Ga = G[iv][:, cols]  # (n_joints, n_actuated)
            out[r] = np.sqrt(np.sum((Ga * delta[r][:, None]) ** 2, axis=0))
    except (ValueError, np.linalg.LinAlgError) as e:  # e.g. more closure rows than passive joints
        smoother._log(f"stick-phase weights not computed ({e}); effort rows 1/σ_τ")
        return None
    return out
