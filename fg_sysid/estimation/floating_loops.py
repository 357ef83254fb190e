"""Closed kinematic loops on the floating base (issue 11): the `FloatingBaseSmoother`'s loop terms.

A looped free-flyer (``robot.loops``, e.g. the catalog ``b1_fourbar``: B1 with four-bar knees) is
estimated on its spanning tree like the fixed-base looped robots (`loop_terms`), with the same closure
residuals (`factors.loops.LoopClosures`) and the same knot block ``"loop_lam"`` of closure forces λ_L,
placed after the contact forces ``"lam"`` (the contact terms keep ``x[3]``; the loop block's index comes
from `loop_terms.block_index`). Per knot (paper 004 eqs. 16–21, eq. 21 with contacts):

    r = M a + h + A a + τ_f − Σ_f J_fᵀ λ_f − G(q)ᵀ λ_L − S τ̂          (N, nv)

* rows of the actuated joints against the logged joint-side efforts (``inverse_dynamics``, measurement);
* the six base rows = 0 (``base_wrench``, constraint: Newton–Euler of the whole robot, closure forces
  are internal — their base columns of Gᵀλ_L cancel exactly for closures between two bodies of the
  robot; the closure Jacobian G includes the base columns);
* rows of the passive joints (calf pins, rods) = 0 (``passive_dynamics``, constraint);
* φ(q) = 0, G v = 0, G a + Ġ v = 0 (``loop_position`` / ``loop_velocity`` / ``loop_acceleration``,
  constraints, `loop_terms.loop_kinematics`), so no Baumgarte term is needed at the solution;
* a wide prior λ_L ≈ 0 (`loop_terms.force_prior`) for components no row determines.

The position-level closure rows carry the weight ``POSITION_WEIGHT`` (their values in units of
1/POSITION_WEIGHT m): the floating smoother's augmented Lagrangian drives every constraint to its one
``constraint_tol`` (1e-6 in SI units by default), which then means 1e-6 / POSITION_WEIGHT = 1e-8 m for
the closures. ``summary.json`` → ``loops`` reports every closure residual in SI units.

Unencoded joints (the rods) get zero encoder weight; their log columns are filled by projecting each
sample onto the closures (`prepare_log`: `loop_terms.project_configurations` — Gauss–Newton, warm-started
along the log — on the joint coordinates through `JointSpaceClosures`) for the initial trajectory only.
Passive joints have no rotor (`loop_terms.adjust_prior`).

`FloatingBaseSmoother` calls `prepare_log`, `encoder_weights`, `extra_blocks`, `finish_problem`,
`init_forces`, `id_residual` and `summary_extras` behind ``if robot.loops``.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..datasets.log import Log
from ..robots.loops import encoded_mask, passive_mask
from . import loop_terms
from .noise import highfreq_noise_std
from .problem import Problem, Residual, Term, theta_dependent

#: weight of the position-level closure rows (see the module docstring): AL tolerance 1e-6 → 1e-8 m
POSITION_WEIGHT = 100.0
#: σ_c of the loop constraints at augmented-Lagrangian scale 1 (SI units), matched to the floating
#: smoother's contact constraints (`FloatingBaseSmoother.SIGMA_CONSTRAINT`: its augmented Lagrangian
#: starts at scale 1e-2; the fixed-base values, 100× stiffer there, made every inner step fail)
SIGMA_POSITION = 1e-4  # m (contact_height)
SIGMA_VELOCITY = 2e-3  # m/s (contact_velocity)
SIGMA_ACCELERATION = 0.05  # m/s² (contact_acceleration)
SIGMA_PASSIVE = 0.05  # N·m (base_wrench)
#: constraint terms of the loops and their units (summary.json)
CONSTRAINT_UNITS = {
    "loop_position": "m | rad",
    "loop_velocity": "m/s | rad/s",
    "loop_acceleration": "m/s² | rad/s²",
    "passive_dynamics": "N·m | N",
}


def extra_blocks(robot) -> tuple:
    """The closure-force knot block, after the contact forces (`loop_terms.extra_blocks`)."""
    return loop_terms.extra_blocks(robot)


def n_rows(robot) -> int:
    """Closure rows m (size of the ``loop_lam`` block)."""
    return int(sum(c.rows for c in robot.loops))


# ---------------------------------------------------------------------------------------------- log
class JointSpaceClosures:
    """The closures of a floating robot as functions of the joint coordinates alone: ``position(q_j)``
    embeds q_j (N, n_joints) in the neutral configuration (base at the origin, identity orientation) and
    returns φ (N, m) and ∂φ/∂q_j (N, m, n_joints). A closure between two bodies of the robot does not
    depend on the base pose, and 1-DoF joints' coordinates are additive, so `loop_terms.
    project_configurations` (the fixed-base projection) applies unchanged to the joint coordinates."""

    def __init__(self, L, robot):
        self.L = L
        self.iq = np.asarray(robot.joint_index_q(), int)
        self.iv = np.asarray(robot.joint_index_v(), int)
        self.neutral = np.asarray(robot.neutral(), float)

    def position(self, q_joints, jacobians: bool = True):
        q_joints = np.atleast_2d(np.asarray(q_joints, float))
        full = np.tile(self.neutral, (q_joints.shape[0], 1))
        full[:, self.iq] = q_joints
        phi, J = self.L.position(full, jacobians)
        return phi, None if J is None else J[:, :, self.iv]


def prepare_log(smoother, log: Log) -> Log:
    """Option checks and the log with the unencoded joints' positions (and velocities) filled in from the
    closures (initial trajectory only; the encoder term gives them zero weight). Sets ``smoother._loops``."""
    from .solver import EstimationError

    robot = smoother.robot
    if getattr(smoother, "impacts", False):
        raise EstimationError("impacts=True is not available for looped robots (the reset map has no "
                              "closure impulses)")
    if getattr(smoother, "energy", False):
        raise EstimationError("energy observations are not available for looped robots")
    smoother._loops = loop_terms.closures(robot)
    smoother._saturated = saturated_samples(robot, log)
    enc = encoded_mask(robot)
    if enc.all():
        return log
    q = np.asarray(log.q, float)
    sigma = np.nan_to_num(highfreq_noise_std(np.where(enc[None], q, 0.0)), nan=1e-3)
    w = np.where(enc, 1.0 / np.maximum(sigma, 1e-6), 0.0)
    qp = loop_terms.project_configurations(JointSpaceClosures(smoother._loops, robot),
                                           np.where(enc[None], q, np.nan), w)
    q = np.where(enc[None], q, qp)
    v = log.v
    if v is not None:
        v = np.where(enc[None], v, np.gradient(qp, log.t, axis=0))
    return dataclasses.replace(log, q=q, v=v)


def encoder_weights(robot, w: np.ndarray) -> np.ndarray:
    """Encoder / velocity weights (nv,) with zeros on the unencoded joints."""
    w = np.array(w, float)
    iv = np.asarray(robot.joint_index_v(), int)
    w[iv[~encoded_mask(robot)]] = 0.0
    return w


# ---------------------------------------------------------------------------------------------- terms
def _full_residual(smoother, problem: Problem, ev, tau_meas):
    """(r, Jx, Jθ) of the floating inverse dynamics with contacts and closure forces (module docstring),
    cached per linearization."""
    L = smoother._loops
    ib = loop_terms.block_index(problem)
    sl = problem.slices[loop_terms.BLOCK]

    def compute():
        r, Jx, Jt = smoother.id_factor(ev.q, ev.v, ev.a, ev.x[3], ev.theta, ev.rows(tau_meas), ev.jacobians)
        tc, dtc_dq, dtc_dl = L.generalized_force(ev.q, ev.x[ib], ev.jacobians)
        r = r - tc
        if ev.jacobians:
            Jx = Jx.copy()
            Jx[:, :, problem.slices["q"]] -= dtc_dq
            Jx[:, :, sl] -= dtc_dl
        return r, Jx, Jt

    return ev.cached("floating_loop_id", compute)


def loop_dynamics(smoother, problem: Problem, tau_meas, w_joint, sigma_base: float) -> list:
    """The floating inverse dynamics with closure forces as three terms sharing one evaluation:
    actuated joint rows (measurement, ``w_joint`` (N, n_joints) = mask/σ_τ, zero on passive joints),
    base rows (constraint ``base_wrench``, σ_c ``sigma_base`` [N | N·m]) and passive joint rows
    (constraint ``passive_dynamics``, σ_c `SIGMA_PASSIVE`)."""
    robot = smoother.robot
    iv = np.asarray(robot.joint_index_v(), int)
    pas = passive_mask(robot)
    act_v, pas_v = iv[~pas], iv[pas]
    w_act = np.asarray(w_joint, float)[:, ~pas]

    def rows(idx, weights=None):
        @theta_dependent
        def evaluate(ev, jac):
            r, Jx, Jt = _full_residual(smoother, problem, ev, tau_meas)
            w = None if weights is None else ev.rows(weights)
            if not jac:
                return Residual(r[:, idx], w=w)
            return Residual(r[:, idx], Jx[:, idx], Jt=Jt[:, idx], w=w)
        return evaluate

    out = [Term("inverse_dynamics", "knot", "measurement", rows(act_v, w_act)),
           Term("base_wrench", "knot", "constraint", rows(np.arange(6)), sigma=sigma_base)]
    if pas_v.size:
        out.append(Term("passive_dynamics", "knot", "constraint", rows(pas_v), sigma=SIGMA_PASSIVE))
    return out


def _weighted(term: Term, weight: float) -> Term:
    """``term`` with its rows (and Jacobians) multiplied by ``weight``: values and σ_c in units of 1/weight
    (the augmented-Lagrangian shifts accumulate the scaled values, consistently)."""

    def evaluate(ev, jac):
        res = term.evaluate(ev, jac)
        return dataclasses.replace(res, r=res.r * weight, J=None if res.J is None else res.J * weight)

    return Term(term.name, term.touches, term.role, evaluate, sigma=term.sigma * weight,
                constant=term.constant)


#: relative effort level counted as saturated (|τ| ≥ this × the effort limit)
SATURATION_LEVEL = 0.99
#: half-width [s] of the window around saturated samples left out of the effort and force rows
SATURATION_WINDOW_S = 0.1


def saturated_entries(tau, limits, level: float = SATURATION_LEVEL) -> np.ndarray:
    """(N, n) bool: |τ| ≥ ``level`` × limit. ``tau`` (N, n) [N·m | N] (NaN = not measured: never
    saturated), ``limits`` (n,) (inf or ≤ 0: no limit, never saturated)."""
    tau = np.atleast_2d(np.asarray(tau, float))
    lim = np.asarray(limits, float)
    ok = np.isfinite(lim) & (lim > 0)
    with np.errstate(invalid="ignore"):
        return (np.abs(np.nan_to_num(tau)) >= level * np.where(ok, lim, np.inf)) & ok


def saturated_joints(robot, tau) -> list[str]:
    """Names of the joints of ``robot`` whose efforts ``tau`` (N, n_joints) [N·m | N] reach
    `SATURATION_LEVEL` × their URDF effort limit somewhere (`saturated_entries`; for messages)."""
    sat = saturated_entries(tau, robot.effort_limits())
    return [j for j, c in zip(robot.joint_names, sat.any(axis=0), strict=True) if c]


def saturation_window(t, tau, limits, level: float = SATURATION_LEVEL,
                      window_s: float = SATURATION_WINDOW_S) -> np.ndarray:
    """Samples within ``window_s`` [s] of a sample where some effort is saturated.

    ``t`` (N,) [s], ``tau`` (N, n) efforts [N·m | N] (NaN = not measured: never saturated), ``limits``
    (n,) effort limits (inf or ≤ 0: no limit). Returns a bool mask (N,): True = inside a window."""
    t = np.asarray(t, float)
    tau = np.atleast_2d(np.asarray(tau, float))
    lim = np.asarray(limits, float)
    if tau.shape != (t.size, lim.size):
        raise ValueError(f"tau must be (N={t.size}, {lim.size}), got {tau.shape}")
    ts = t[saturated_entries(tau, lim, level).any(axis=1)]
    if ts.size == 0:
        return np.zeros(t.size, bool)
    # distance from each sample to its nearest saturated sample (t increasing), O(N log n_sat)
    k = np.searchsorted(ts, t)
    before, after = ts[np.clip(k - 1, 0, ts.size - 1)], ts[np.clip(k, 0, ts.size - 1)]
    near = np.minimum(np.abs(t - before), np.abs(after - t))
    return near <= window_s + 1e-9  # (sample times on a grid: round-off)


#: weight of the measured contact forces at knots in saturation windows (σ_f × 100: the forces there are
#: anchored loosely, so that the knot blocks and the posterior covariance stay regular, and do not pull θ)
SATURATED_FORCE_WEIGHT = 0.01


def saturated_samples(robot, log: Log) -> np.ndarray:
    """Samples (N,) within `SATURATION_WINDOW_S` of an actuated effort at its effort
    limit (`saturation_window`; the robot's URDF ``effort`` limits); warns when
    there are any. Their knots are left out of the effort rows and their measured forces weighted
    `SATURATED_FORCE_WEIGHT` (a jam or an actuator at its current limit is not the model's dynamics:
    docs/loops-floating.md)."""
    import warnings

    tau = np.asarray(log.tau, float)
    lim = np.asarray(robot.effort_limits(), float)
    if tau.ndim != 2 or tau.shape[1] != lim.size:
        return np.zeros(np.asarray(log.t).size, bool)
    out = saturation_window(log.t, tau, lim)
    if out.any():
        n_sat, joints = int(saturated_entries(tau, lim).any(axis=1).sum()), saturated_joints(robot, tau)
        warnings.warn(f"efforts at {SATURATION_LEVEL:g} x their effort limit in {n_sat} "
                      f"samples (joints {joints}): the knots within {SATURATION_WINDOW_S:g} s "
                      f"({100 * out.mean():.1f} % of the log) are left out of the effort rows (measured "
                      f"forces weighted {SATURATED_FORCE_WEIGHT:g})", stacklevel=4)
    return out


def saturation_knots(smoother) -> np.ndarray:
    """Knots (N_knots,) kept in the effort rows (and at full measured-force weight): False in saturation
    windows (`saturated_samples`, mapped through the knots' sample indices)."""
    idx = np.asarray(smoother._idx, int)
    sat = getattr(smoother, "_saturated", None)
    if sat is None or sat.size <= idx.max(initial=0):
        return np.ones(idx.size, bool)
    return ~sat[idx]


def _knot_masked(term: Term, keep: np.ndarray, floor: float = 0.0) -> Term:
    """``term`` (a knot term) with its row weights multiplied by ``floor`` at the knots where ``keep``
    (N_knots,) is False (0: rows left out)."""
    scale = np.where(np.asarray(keep, bool), 1.0, float(floor))[:, None]

    def evaluate(ev, jac):
        res = term.evaluate(ev, jac)
        m = np.asarray(ev.rows(scale), float)  # (N_eval, 1)
        w = m if res.w is None else np.asarray(res.w, float) * m
        return dataclasses.replace(res, w=w)

    return Term(term.name, term.touches, term.role, evaluate, sigma=term.sigma, constant=term.constant)


def finish_problem(problem: Problem, smoother, noise) -> Problem:
    """Turn the floating tree term set into the looped one: the inverse dynamics (joint rows, base
    rows) replaced by `loop_dynamics`, closure constraints (position rows weighted, module docstring)
    and the λ_L prior added. Encoder weights of unencoded joints are zeroed by `encoder_weights`."""
    robot = smoother.robot
    iv = np.asarray(robot.joint_index_v(), int)
    old = [t.name for t in problem.terms]
    problem.terms = [t for t in problem.terms if t.name not in ("inverse_dynamics", "base_wrench")]
    wt = np.where(np.isfinite(noise.tau), 1.0 / np.asarray(noise.tau, float), 0.0)
    keep = saturation_knots(smoother)
    if not keep.any():  # every knot in a saturation window: no effort rows would be left
        from .solver import EstimationError

        joints = saturated_joints(robot, smoother._taum[:, iv])
        raise EstimationError(
            f"every knot lies within {SATURATION_WINDOW_S:g} s of an effort at {SATURATION_LEVEL:g} x its "
            f"effort limit (joints {joints}): no effort rows are left to identify "
            "the parameters; use a log where the actuators stay below their limits (e.g. a slower gait)")
    smoother._tau_mask[~keep] = False  # effort rows left out in the saturation windows (_finish, IRLS)
    w_joint = smoother._tau_mask[:, iv] * wt[None, :]
    sigma_base = smoother.SIGMA_CONSTRAINT["base_wrench"]
    for t in loop_dynamics(smoother, problem, smoother._taum, w_joint, sigma_base):
        problem.add(t)
    for t in loop_terms.loop_kinematics(problem, smoother._loops, SIGMA_POSITION, SIGMA_VELOCITY,
                                        SIGMA_ACCELERATION):
        problem.add(_weighted(t, POSITION_WEIGHT) if t.name == "loop_position" else t)
    problem.add(loop_terms.force_prior(problem, loop_terms.force_scale(robot)))
    if not keep.all():  # measured contact forces left out in the saturation windows too
        problem.terms = [_knot_masked(t, keep, SATURATED_FORCE_WEIGHT) if t.name == "measured_forces" else t
                         for t in problem.terms]
    assert "inverse_dynamics" in old and "base_wrench" in old
    return problem


def init_forces(smoother, x, theta) -> tuple:
    """Initial knot states with the closure-force block: λ_L by weighted least squares on the inverse-
    dynamics rows at the initial states, θ and contact forces (actuated rows 1/σ_τ, passive rows
    1/σ_passive, base rows 1/σ_base; the λ prior as damping). Returns (q, v, a, λ_c, λ_L)."""
    robot = smoother.robot
    q, v, a, lam = x[:4]
    L = smoother._loops
    r0 = smoother.id_factor(q, v, a, lam, theta, smoother._taum, jacobians=False)[0]  # λ_L = 0
    G = L.motion(q, v, a, True).cv_v  # (N, m, nv)
    iv = np.asarray(robot.joint_index_v(), int)
    pas = passive_mask(robot)
    w = np.zeros(robot.nv)
    w[:6] = 1.0 / smoother.SIGMA_CONSTRAINT["base_wrench"]
    tau_sigma = np.asarray(smoother.noise_.tau, float)
    w[iv] = np.where(pas, 1.0 / SIGMA_PASSIVE, np.where(np.isfinite(tau_sigma), 1.0 / tau_sigma, 0.0))
    W = np.broadcast_to(w, r0.shape)
    GW = G * (W ** 2)[:, None, :]
    H = GW @ np.transpose(G, (0, 2, 1)) + np.eye(L.m)[None] / loop_terms.force_scale(robot) ** 2
    lam_l = np.linalg.solve(H, np.einsum("nmv,nv->nm", GW, r0)[..., None])[..., 0]
    return (q, v, a, lam, lam_l)


def project_states(smoother, x) -> tuple:
    """Initial states on the closures: q by a few Gauss–Newton steps on φ(q) = 0 over the passive joints'
    coordinates (the actuated ones and the base held), v and a by the minimum-norm corrections
    v ← v − G⁺(G v), a ← a − G⁺(G a + Ġ v) (so the stages start from consistent kinematics)."""
    robot, L = smoother.robot, smoother._loops
    q, v, a = (np.array(y, float) for y in x[:3])
    iv = np.asarray(robot.joint_index_v(), int)
    cols = iv[passive_mask(robot)]
    space = smoother._space
    for _ in range(5):
        phi, J = L.position(q)
        dq = np.zeros((q.shape[0], robot.nv))
        dq[:, cols] = -np.einsum("nvm,nm->nv", np.linalg.pinv(J[:, :, cols]), phi)
        q = space.integrate(q, dq)
        if np.abs(phi).max() < 1e-12:
            break
    mo = L.motion(q, v, a, True)
    Gp = np.linalg.pinv(mo.cv_v[:, :, cols])
    v[:, cols] -= np.einsum("nvm,nm->nv", Gp, mo.cv)
    mo = L.motion(q, v, a, True)
    a[:, cols] -= np.einsum("nvm,nm->nv", Gp, mo.ca)
    return (q, v, a) + tuple(x[3:])


def id_residual(smoother, x, theta) -> np.ndarray:
    """Full inverse-dynamics residual (N, nv) with contacts and closure forces (module docstring); zero
    at the knots left out in effort-saturation windows (`saturation_knots`: the IRLS effort stds and
    ``summary.json``'s residual statistics exclude them)."""
    ib = [n for n, _ in smoother.problem_.blocks].index(loop_terms.BLOCK)
    r = smoother.id_factor(*x[:4], theta, smoother._taum, jacobians=False)[0]
    r = r - smoother._loops.generalized_force(x[0], x[ib], False)[0]
    return r * saturation_knots(smoother)[:, None]  # knots in saturation windows: left out (zeros)


def residuals_si(viol: dict) -> dict:
    """Worst constraint residual per term in SI units (the weighted position rows unscaled)."""
    out = {k: float(np.abs(v).max()) if np.size(v) else 0.0 for k, v in viol.items()}
    if "loop_position" in out:
        out["loop_position"] /= POSITION_WEIGHT
    return out


def summary_extras(smoother, x, theta, cov=None) -> dict:
    """``summary.json`` → ``loops``: closures, actuation, worst residual of every loop constraint (SI),
    the position tolerance, the motor-side parameters of the actuated joints and, with the posterior
    covariance ``cov`` of θ, the motor / passive-joint friction collinearity (`friction_collinearity`)."""
    from ..robots.loops import actuation_of

    viol = residuals_si(smoother.problem_.violations(x, theta, names=tuple(CONSTRAINT_UNITS)))
    tol = float(smoother.constraint_tol)
    motor = loop_terms.motor_parameters(smoother.robot, smoother.layout_.to_physical(theta), smoother.layout_)
    ok = bool(viol) and all(v <= (tol / POSITION_WEIGHT if k == "loop_position" else tol)
                            for k, v in viol.items())
    return {"loops": {
        "closures": [c.to_dict() for c in smoother.robot.loops],
        "actuation": actuation_of(smoother.robot).to_dict(),
        "constraint_residual_max": viol, "units": {k: CONSTRAINT_UNITS[k] for k in viol},
        "tolerance": {"loop_position": tol / POSITION_WEIGHT, "others": tol}, "satisfied": ok,
        "motor_parameters": motor.to_dict(orient="records"),
        **({} if cov is None else {"friction_collinearity": friction_collinearity(smoother, x, theta, cov)}),
        **({} if cov is None else _friction_reports(smoother, x, theta, cov)),  # issue 11 (floating knee)
    }}


def _friction_reports(smoother, x, theta, cov) -> dict:
    """``loops.friction_law_check``, ``loops.posterior_determination`` and ``loops.weakly_determined``
    (`floating_knee`); a report, never a failure of the fit."""
    from . import floating_knee

    try:
        law = floating_knee.friction_law_check(smoother, x, theta, id_residual(smoother, x, theta),
                                               saturation_knots(smoother))
        return {"friction_law_check": law, **floating_knee.posterior_check(smoother, theta, cov, law)}
    except (ValueError, np.linalg.LinAlgError) as e:
        smoother._log(f"floating loop friction reports not computed ({e})")
        return {}


def transmission_ratios(L, robot, q: np.ndarray) -> np.ndarray:
    """dq_j/dq_i (N, n_passive, n_actuated) on the closures at configurations q (N, nq): the passive
    joints' velocities per unit actuated-joint velocity, the other actuated joints and the base held
    (v_p = −Φ_p⁺ Φ_i e_i, Φ = ∂φ/∂q the closure Jacobian; paper 000 eq. 21)."""
    iv = np.asarray(robot.joint_index_v(), int)
    pas = passive_mask(robot)
    _, J = L.position(q)
    Jp, Ja = J[:, :, iv[pas]], J[:, :, iv[~pas]]
    return -np.linalg.pinv(Jp) @ Ja


def regressor_cosines(v_motor, v_passive, ratio, velocity_scale: float) -> dict:
    """Collinearity of a motor's and a passive joint's friction in the motor's row, from the motion alone
    (no parameter values): the cosine between the regressor columns of the motor's friction and of the
    passive joint's friction reflected through ``ratio`` J(t) = dq_p/dq_m (v_p = J v_m on the closure):
    Coulomb tanh(v_m/v_s) vs J tanh(v_p/v_s), viscous v_m vs J v_p. With normalized columns the Fisher
    information of the pair has eigenvalues 1 ± cos: ``1 − |cos|`` (``weak_information``) is the relative
    information along the split (motor − passive), the direction the efforts hardly see."""
    v_m, v_p, J = (np.asarray(a, float) for a in (v_motor, v_passive, ratio))
    out = {}
    for kind, cm, cp in (("fc", np.tanh(v_m / velocity_scale), J * np.tanh(v_p / velocity_scale)),
                         ("fv", v_m, J * v_p)):
        den = float(np.linalg.norm(cm) * np.linalg.norm(cp))
        c = float(cm @ cp / den) if den > 0 else float("nan")
        out[kind] = c
        out[f"{kind}_weak_information"] = 1.0 - abs(c)
    return out


def friction_collinearity(smoother, x, theta, cov, stride: int = 10) -> list[dict]:
    """Motor vs passive-joint friction through a linkage (issue 11): per actuated joint that drives
    passive joints (|dq_j/dq_i| > 1e-3, e.g. a knee motor and its calf pin and rod), the posterior
    correlation of its friction with the passive joints' friction, and the identifiable reflected sums.

    With v_j = J_ji v_i along the log (J from `transmission_ratios`, mean over the knots, every
    ``stride``-th), the passive joints' friction reaches the motor row through Jᵀ as
    fc_i + Σ_j |J_ji| fc_j (Coulomb, tanh(v_j/v_s) ≈ sign(J_ji) tanh(v_i/v_s)) and fv_i + Σ_j J_ji² fv_j
    (viscous): the efforts determine these sums, not the split (a near-singular direction of the Fisher
    information when J varies little). Reported per motor: ``ratio`` (mean J of the passive joint with the
    largest |J|, ``passive``: the encoded one if any, i.e. the calf), ``correlation`` of the physical fc (fv)
    of the motor and that passive joint (``fc_all``/``fv_all``: with each coupled passive joint),
    posterior ``estimate``/``std`` of the motor's fc, fv and of the sums (delta method through the layout,
    ``cov`` = posterior covariance of θ), ``prior_std`` of the motor's fc, fv, and ``weak_direction``:
    per friction kind, the unit vector (motor, passive joints) of the largest posterior variance of the
    physical friction block and its std. ``regressor_cosine`` (`regressor_cosines`, along the smoothed
    trajectory): the same collinearity from the motion alone — meaningful also where a parameter sits at
    its floor (there the exp parameterization's dp/dθ ≈ 0 makes the posterior equal the prior and the
    correlation ≈ 0)."""
    robot, layout = smoother.robot, smoother.layout_
    pas = passive_mask(robot)
    names = list(robot.joint_names)
    act_j, pas_j = [j for j in range(len(names)) if not pas[j]], [j for j in range(len(names)) if pas[j]]
    if not pas_j:
        return []
    sel = slice(None, None, max(int(stride), 1))
    R = transmission_ratios(smoother._loops, robot, np.asarray(x[0])[sel])  # (K, n_p, n_a)
    ratio = R.mean(axis=0)
    v = np.asarray(x[1])[sel][:, np.asarray(robot.joint_index_v(), int)]  # joint velocities (K, n)
    vs = float(getattr(smoother, "friction_velocity_scale", 0.05) or 0.05)
    pnames = list(layout.names)
    Jl = layout.jacobian(theta)
    P = Jl @ np.asarray(cov, float) @ Jl.T
    p = layout.to_physical(theta)
    prior_std = getattr(smoother, "_theta_std", None)
    Pp = None if prior_std is None else (Jl * np.asarray(prior_std, float)[None]) @ (Jl * np.asarray(
        prior_std, float)[None]).T
    enc = encoded_mask(robot)
    out = []
    for a, i in enumerate(act_j):
        coupled = [(b, j) for b, j in enumerate(pas_j) if abs(ratio[b, a]) > 1e-3]
        if not coupled:
            continue
        pick = [(b, j) for b, j in coupled if enc[j]] or coupled  # the encoded one (the calf), if any
        b0, j0 = max(pick, key=lambda bj: abs(ratio[bj[0], a]))
        row = {"motor": names[i], "passive": names[j0], "ratio": float(ratio[b0, a]),
               "coupled": {names[j]: float(ratio[b, a]) for b, j in coupled},
               "correlation": {}, "estimate": {}, "std": {}, "prior_std": {}, "weak_direction": {},
               "regressor_cosine": regressor_cosines(v[:, i], v[:, j0], R[:, b0, a], vs)}
        for kind, power in (("fc", 1), ("fv", 2)):
            im = f"{names[i]}.{kind}"
            if im not in pnames:
                continue
            idx = [pnames.index(im)] + [pnames.index(f"{names[j]}.{kind}") for _, j in coupled]
            w = np.array([1.0] + [abs(ratio[b, a]) ** power for b, _ in coupled])
            C = P[np.ix_(idx, idx)]
            sd = np.sqrt(np.clip(np.diag(C), 0, None))
            corr = C / np.maximum(np.outer(sd, sd), 1e-300)
            row["correlation"][kind] = float(corr[0, 1 + [j for _, j in coupled].index(j0)])
            row["correlation"][f"{kind}_all"] = {names[j]: float(corr[0, 1 + c]) for c, (_, j) in
                                                 enumerate(coupled)}
            row["estimate"][kind], row["std"][kind] = float(p[idx[0]]), float(sd[0])
            row["estimate"][f"{kind}_sum"] = float(w @ p[idx])
            row["std"][f"{kind}_sum"] = float(np.sqrt(max(w @ C @ w, 0.0)))
            if Pp is not None:
                row["prior_std"][kind] = float(np.sqrt(max(Pp[idx[0], idx[0]], 0.0)))
            if not np.all(np.isfinite(C)):  # a report, never a failure of the fit
                row["weak_direction"][kind] = None
                continue
            evals, evecs = np.linalg.eigh(0.5 * (C + C.T))
            vec = evecs[:, -1] * np.sign(evecs[0, -1] or 1.0)
            row["weak_direction"][kind] = {"vector": vec.tolist(), "std": float(np.sqrt(max(evals[-1], 0)))}
        out.append(row)
    return out


# ---------------------------------------------------------------------------------------------- initial θ
def projected_system(smoother, log: Log, qfull: np.ndarray, stride: int = 4):
    """Stacked force-free rows ``A p = b`` for the least-squares initial θ of a looped free-flyer (the
    decoupled floating-base least squares of `floating_baseline.projected_system`, with the closure
    forces eliminated too): SG states on the manifold (every ``stride``-th sample), projected onto the
    closures (`project_states`), and per sample the rows Nᵀ[Y, S tanh(v/v_s), S v, S a] p = Nᵀ S τ with N
    an orthonormal basis of the null space of the stacked stance-foot Jacobians (3 LWA linear rows each)
    and the closure Jacobian G — so neither the contact forces nor the closure forces λ_L appear (paper
    000's constraint elimination, eq. 23, on a floating base). Passive joints' efforts are 0. Parameter
    order: the raw physical layout (10 per body, (fc, fv) per joint, armature per joint)."""
    import pinocchio as pin
    from scipy.signal import savgol_coeffs

    from .floating_baseline import JC_RANK_RTOL, _odd_window, manifold_sg_states

    robot = smoother.robot
    model = robot.model.copy()
    model.armature[:] = 0.0
    data = model.createData()
    t = np.asarray(log.t, float)
    dt = float(np.median(np.diff(t)))
    order = 3
    w = _odd_window(smoother.sg_window_s, dt, order, t.size)
    rows, qs, vs, as_ = manifold_sg_states(model, qfull, dt, w, order)
    sel = np.arange(0, rows.size, max(int(stride), 1))
    sat = getattr(smoother, "_saturated", None)
    if sat is not None and sat.shape[0] == t.size:  # effort-saturation windows left out
        sel = sel[~sat[rows[sel]]]
    rows, qs, vs, as_ = rows[sel], qs[sel], vs[sel], as_[sel]
    qs, vs, as_ = project_states(smoother, (qs, vs, as_))
    tau = np.nan_to_num(np.asarray(log.tau, float))
    c0, h = savgol_coeffs(w, order, deriv=0, use="dot"), w // 2
    tau_f = np.stack([c0 @ tau[k - h:k + h + 1] for k in rows])
    G = smoother._loops.motion(qs, vs, as_, True).cv_v
    flags = np.stack([np.asarray(log.contacts[f], bool)[rows] for f in smoother.feet_], axis=1)
    fids = [model.getFrameId(f) for f in smoother.feet_]
    iv = np.asarray(robot.joint_index_v(), int)
    n, nb10 = robot.n_joints, 10 * robot.n_bodies
    S = np.zeros((model.nv, n))
    S[iv, np.arange(n)] = 1.0
    j = np.arange(n)
    A_rows, b_rows = [], []
    for k in range(rows.size):
        pin.computeJointJacobians(model, data, qs[k])
        pin.updateFramePlacements(model, data)
        Jc = [pin.getFrameJacobian(model, data, f, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)[:3]
              for f, c in zip(fids, flags[k], strict=True) if c]
        C = np.vstack(Jc + [G[k]])
        _, sv, Vt = np.linalg.svd(C, full_matrices=True)
        r = int(np.sum(sv > JC_RANK_RTOL * max(sv[0], 1e-300)))
        Nk = Vt[r:].T
        if Nk.shape[1] == 0:
            continue
        full = np.zeros((model.nv, nb10 + 3 * n))
        full[:, :nb10] = pin.computeJointTorqueRegressor(model, data, qs[k], vs[k], as_[k])
        full[iv, nb10 + 2 * j] = np.tanh(vs[k, iv] / smoother.friction_velocity_scale)
        full[iv, nb10 + 2 * j + 1] = vs[k, iv]
        full[iv, nb10 + 2 * n + j] = as_[k, iv]
        A_rows.append(Nk.T @ full)
        b_rows.append(Nk.T @ (S @ tau_f[k]))
    if not A_rows:
        raise ValueError("no sample has a non-trivial force-free projection")
    return np.vstack(A_rows), np.concatenate(b_rows)


def fix_passive(robot, layout, p: np.ndarray) -> np.ndarray:
    """Physical parameters p with the passive joints' armature at the layout's floor (no rotor; the prior
    of `loop_terms.adjust_prior` holds it there, so the initial θ must start there too)."""
    p = np.array(p, float)
    idx = np.arange(layout.s_armature.start, layout.s_armature.stop)[passive_mask(robot)]
    p[idx] = layout.armature.FLOOR
    return p
