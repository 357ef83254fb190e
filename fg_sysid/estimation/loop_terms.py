"""Closed kinematic loops in the estimation core (issue 11): terms, knot block λ and the smoother hooks.

A looped robot (``robot.loops``; `fg_sysid.robots.loops`) is estimated on its spanning tree with, per
knot, the closure forces λ_k as an extra knot-state block ``"loop_lam"`` (one component per closure row,
like the contact forces of the floating smoother) and these terms (paper 004 eqs. 16–21):

* ``loop_position`` — φ(q_k) = 0 (constraint, σ_c ``sigma_position`` [m | rad]);
* ``loop_velocity`` / ``loop_acceleration`` — G v_k = 0, G a_k + Ġ v_k = 0 (constraints): together with
  the position level they make the state consistent without any Baumgarte term at the solution;
* ``inverse_dynamics`` — actuated rows of M a + h + A a + τ_f − Gᵀλ − τ̂ against the logged joint-side
  efforts (measurement, 1/σ_τ); ``passive_dynamics`` — the same rows of passive joints = 0 (constraint);
* ``loop_force_prior`` — a wide prior λ ≈ 0 (std ``sigma_lam``) that only fixes closure-force
  components no row determines (the out-of-plane row of a ``point3d`` closure of a planar linkage).

Unencoded joints get zero encoder weight; their states come from the closures. Motor-side armature and
friction act on the actuated joint's coordinate of the tree (the tree's armature and friction
parameters of that joint), so the closure reflects them to the driven joint through the transmission
Jacobian automatically (paper 004 Fig. 13 d); `motor_parameters` reports them on the motor side with
the gear ratio N (I_m = A / N², f_m = f / N). Passive joints have no rotor: their armature is held at
~0 by the prior (`adjust_prior`).

`JointSmoother` calls `prepare_log`, `finish_problem`, `kinematic_init`, `init_forces`,
`id_residual` and `finalize` behind ``if robot.loops`` (fixed-base tree robots are unchanged).

Friction through the linkage (issue 11, B1 knee): passive pins whose friction the log cannot separate
from a motor's are held at their URDF value (`PASSIVE_FRICTION`, decided in `initial_parameters`), and
the effort rows near velocity reversals are down-weighted by the friction law's error there
(`STICK_WEIGHTS`, `loop_init.stick_sigma`); `summary_extras` reports what the torques determine
(`loop_identifiability`).
"""

from __future__ import annotations

import warnings
import weakref

import numpy as np
import pandas as pd

from ..datasets.log import Log
from ..factors.loops import LoopClosures
from ..robots.loops import actuation_of, encoded_mask, gear_ratios, passive_mask
from . import terms
from .noise import highfreq_noise_std
from .problem import Problem, Residual, Term, theta_dependent

#: default σ_c of the constraints (SI units) at augmented-Lagrangian scale 1
SIGMA_POSITION = 1e-5  # m | rad
SIGMA_VELOCITY = 1e-4  # m/s | rad/s
SIGMA_ACCELERATION = 1e-2  # m/s² | rad/s²
SIGMA_PASSIVE = 1e-3  # N·m
#: tolerance the final augmented-Lagrangian rounds drive the constraints to (SI units)
CONSTRAINT_TOL = 1e-9
#: name of the closure-force knot-state block
BLOCK = "loop_lam"


def closures(robot) -> LoopClosures:
    return LoopClosures(robot.model, robot.loops)


def extra_blocks(robot) -> tuple:
    """The knot-state block of the closure forces: ((BLOCK, rows of all closures),) (its own name: the
    floating smoother's contact forces are ``"lam"``)."""
    return ((BLOCK, int(sum(c.rows for c in robot.loops))),)


def block_index(problem: Problem) -> int:
    """Position of the closure-force block in the knot-state tuple x."""
    return [n for n, _ in problem.blocks].index(BLOCK)


# ---------------------------------------------------------------------------------------------- log
def project_configurations(L: LoopClosures, q_meas: np.ndarray, w_meas: np.ndarray, q_start=None,
                           iterations: int = 20, penalty: float = 1e6) -> np.ndarray:
    """Per sample, the configuration closest to the measured one (weights ``w_meas`` (nv,), 0 for
    unencoded joints) that closes the loops: Gauss–Newton on [w (q − q̂); √penalty φ(q)], warm-started
    from the previous sample (the first from ``q_start`` or q̂ with unencoded joints at 0)."""
    q_meas = np.asarray(q_meas, float)
    n, nv = q_meas.shape
    out = np.empty_like(q_meas)
    q = np.where(np.isfinite(q_meas[0]), q_meas[0], 0.0) if q_start is None else np.asarray(q_start, float)
    qm = np.where(np.isfinite(q_meas), q_meas, 0.0)
    W = np.diag(w_meas)
    sp = np.sqrt(penalty)
    for k in range(n):
        for _ in range(iterations):
            phi, J = L.position(q[None])
            A = np.vstack([W, sp * J[0]])
            b = np.concatenate([W @ (q - qm[k]), sp * phi[0]])
            dq = np.linalg.lstsq(A, -b, rcond=None)[0]
            q = q + dq
            if np.abs(dq).max() < 1e-12:
                break
        out[k] = q
    return out


def prepare_log(robot, log: Log, project_all: bool = False) -> Log:
    """The log with the unencoded joints' positions filled in from the closures (for the initial
    trajectory; the encoders term gives them zero weight). Velocity columns of unencoded joints, if any,
    are filled by differencing. ``project_all``: every joint's position replaced by the closest
    configuration that closes the loops (held-out prediction: consistent states)."""
    enc = encoded_mask(robot)
    if enc.all() and not project_all:
        return log
    L = closures(robot)
    # weights 1/σ of each encoder's high-frequency noise (0 for unencoded joints)
    sigma = np.nan_to_num(highfreq_noise_std(np.where(enc[None], log.q, 0.0)), nan=1e-3)
    w = np.where(enc, 1.0 / np.maximum(sigma, 1e-6), 0.0)
    qp = project_configurations(L, np.where(enc[None], log.q, np.nan), w)
    q = qp if project_all else np.where(enc[None], log.q, qp)
    v = log.v
    if v is not None:
        v = np.where(enc[None], v, np.gradient(qp, log.t, axis=0))
    import dataclasses

    return dataclasses.replace(log, q=q, v=v)


def setup(smoother, log: Log) -> Log:
    """Smoother hook at the start of a looped fit: option checks, the closures (``smoother._loops``) and
    the log with the unencoded joints filled in (`prepare_log`)."""
    from .solver import EstimationError

    if smoother.solver != "structured":
        raise EstimationError(f"solver {smoother.solver!r}: looped robots need the structured solver (the "
                              "augmented-Lagrangian rounds make the closure rows too stiff for GTSAM's QR, "
                              "which reports an indeterminate system)")
    if getattr(smoother, "dynamics", "inverse") != "inverse":
        raise EstimationError("looped robots need the inverse-dynamics formulation (dynamics='inverse'): "
                              "the closure forces enter as Gᵀλ in its rows")
    smoother._loops = closures(smoother.robot)
    smoother._loop_stick_sigma = None  # set by `initial_parameters` (issue 11, knee)
    looped_process_fraction(smoother)  # issue 11 (knee fv)
    return prepare_log(smoother.robot, log)


#: process-noise fraction of a looped fixed-base fit (issue 11, knee fv): σ_pv = fraction · RMS(a) · h per
#: knot step, used when the smoother has its class default (0.3, the historic value) and no
#: ``sigma_process``; None (default): the smoother's own value. Measured (docs/benchmarks.md, "B1 knee: the
#: viscous friction fv"): at 0.1 the accelerations absorb less of what the effort rows say — on the MuJoCo
#: B1 leg (500 Hz) the knee motor's fv posterior std halves and the held-out knee error drops on seeds
#: 0–2 — but the planar four-bar gets worse (MuJoCo 0.92 → 0.95 %, floor 0.94 %; the in-class 250 Hz
#: four-bar of tests/test_loops_identify.py 1.03–1.21 → 1.04–1.52 × its floor), so it is not the default.
PROCESS_FRACTION = None


def looped_process_fraction(smoother) -> float:
    """Apply `PROCESS_FRACTION` to ``smoother`` (a looped `JointSmoother` at the start of its fit) when its
    ``process_fraction`` is the class default and ``sigma_process`` is unset; returns the fraction used."""
    import inspect

    default = inspect.signature(type(smoother).__init__).parameters["process_fraction"].default
    if (PROCESS_FRACTION is not None and getattr(smoother, "sigma_process", None) is None
            and smoother.process_fraction == default and PROCESS_FRACTION != default):
        smoother._log(f"looped robot: process-noise fraction {default:g} → {PROCESS_FRACTION:g} of the RMS "
                      "acceleration per step (loop_terms.PROCESS_FRACTION)")
        smoother.process_fraction = PROCESS_FRACTION
    return smoother.process_fraction


# ---------------------------------------------------------------------------------------------- terms
def initial_parameters(smoother, log: Log):
    """Initial physical parameters (smoother layout) of a looped robot: paper 000's constraint-elimination
    regression fitted in the smoother's parameterization with its prior (`loop_init.initial_parameters`:
    physically consistent; the physical-layout least squares projected body by body was not), or None
    (prior mean, with a note) when it cannot run on this log."""
    from . import loop_init

    layout = smoother.layout_
    if PASSIVE_FRICTION == "collinear" and passive_mask(smoother.robot).any():  # issue 11 (knee)
        try:
            decide_passive_friction(smoother, loop_init.states(smoother, log))
        except (ValueError, np.linalg.LinAlgError) as e:
            smoother._log(f"passive friction: constraint-elimination states unavailable ({e}); all estimated")
    mean = None if smoother.prior_mean is None else smoother._from_baseline_layout(smoother.prior_mean)
    theta_bar, theta_std = adjust_prior(smoother.robot, layout,
                                        *layout.prior(smoother.prior_relative, mean_physical=mean))
    p = loop_init.initial_parameters(smoother, log, theta_bar, theta_std)
    if STICK_WEIGHTS:  # issue 11 (knee): friction-law error near velocity reversals, `loop_init.stick_sigma`
        smoother._loop_stick_sigma = loop_init.stick_sigma(smoother, log, p)
    return p


def loop_kinematics(problem: Problem, L: LoopClosures, sigma_position=SIGMA_POSITION,
                    sigma_velocity=SIGMA_VELOCITY, sigma_acceleration=SIGMA_ACCELERATION) -> list:
    """Closure constraints at position, velocity and acceleration level (knot terms)."""
    nv = L.nv

    def state_J(n, m, parts):
        return problem.state_jacobian(n, m, parts)

    def position(ev, jac):
        r, Jq = L.position(ev.q, jac)
        return Residual(r, None if Jq is None else state_J(r.shape[0], r.shape[1], {"q": Jq}))

    def motion(ev):
        return ev.cached("loop_motion", lambda: L.motion(ev.q, ev.v, ev.a, ev.jacobians))

    def velocity(ev, jac):
        mo = motion(ev)
        if not jac:
            return Residual(mo.cv)
        return Residual(mo.cv, state_J(*mo.cv.shape, {"q": mo.cv_q, "v": mo.cv_v}))

    def acceleration(ev, jac):
        mo = motion(ev)
        if not jac:
            return Residual(mo.ca)
        return Residual(mo.ca, state_J(*mo.ca.shape, {"q": mo.ca_q, "v": mo.ca_v, "a": mo.ca_a}))

    del nv
    return [Term("loop_position", "knot", "constraint", position, sigma=sigma_position),
            Term("loop_velocity", "knot", "constraint", velocity, sigma=sigma_velocity),
            Term("loop_acceleration", "knot", "constraint", acceleration, sigma=sigma_acceleration)]


def loop_dynamics(problem: Problem, id_residual, L: LoopClosures, tau_meas, w_act, actuated, passive,
                  sigma_passive=SIGMA_PASSIVE) -> list:
    """Inverse dynamics with the closure forces, r = M a + h + A a + τ_f − G(q)ᵀλ − τ̂ (paper 004 eq. 21,
    `factors.loops.LoopClosures.generalized_force`), evaluated once per linearization: the actuated rows
    (velocity indices ``actuated``) are a measurement with weights ``w_act`` (N, n_act) = mask/σ_τ, the
    passive rows (``passive``) a constraint r = 0 (their τ̂ is 0), σ_c ``sigma_passive`` [N·m]."""
    act, pas = np.asarray(actuated, int), np.asarray(passive, int)

    ib = block_index(problem)

    def full(ev):
        def compute():
            lam = ev.x[ib]
            tc, dtc_dq, dtc_dl = L.generalized_force(ev.q, lam, ev.jacobians)
            lin = id_residual.evaluate(ev.q, ev.v, ev.a, ev.rows(tau_meas), ev.theta, ev.jacobians,
                                       external=tc)
            if not ev.jacobians:
                return lin.r, None, None
            n, nv = lin.r.shape
            J = problem.state_jacobian(n, nv, {"q": lin.Jq - dtc_dq, "v": lin.Jv, "a": lin.Ja,
                                               BLOCK: -dtc_dl})
            return lin.r, J, lin.Jtheta
        return ev.cached("loop_id", compute)

    @theta_dependent
    def actuated_rows(ev, jac):
        r, J, Jt = full(ev)
        if not jac:
            return Residual(r[:, act], w=ev.rows(w_act))
        return Residual(r[:, act], J[:, act], Jt=Jt[:, act], w=ev.rows(w_act))

    @theta_dependent
    def passive_rows(ev, jac):
        r, J, Jt = full(ev)
        if not jac:
            return Residual(r[:, pas])
        return Residual(r[:, pas], J[:, pas], Jt=Jt[:, pas])

    out = [Term("inverse_dynamics", "knot", "measurement", actuated_rows)]
    if pas.size:
        out.append(Term("passive_dynamics", "knot", "constraint", passive_rows, sigma=sigma_passive))
    return out


def force_prior(problem: Problem, sigma_lam: float) -> Term:
    """Wide prior λ ≈ 0 [N | N·m] (std ``sigma_lam``): fixes only components no row determines."""
    sl = problem.slices[BLOCK]
    n_lam = sl.stop - sl.start
    ib = block_index(problem)

    def evaluate(ev, jac):
        lam = ev.x[ib]
        J = None
        if jac:
            J = np.zeros((lam.shape[0], n_lam, problem.nx))
            J[:, :, sl] = np.eye(n_lam)
        return Residual(lam, J, w=1.0 / sigma_lam)

    return Term("loop_force_prior", "knot", "prior", evaluate, constant=True)


def force_scale(robot) -> float:
    """Std of the λ prior: 100 × the robot's weight [N] (wide: a bias below 1e-4 of typical forces)."""
    m = float(sum(robot.model.inertias[j].mass for j in range(1, robot.model.njoints)))
    return 100.0 * 9.81 * max(m, 0.1)


# ------------------------------------------------------------------------------------------ smoother hooks
#: which passive joints' friction `adjust_prior` holds at its URDF value (issue 11, B1 knee): "collinear"
#: (default) those whose friction the training log cannot separate from an actuated joint's — on the B1
#: four-bar the rod pin's and the motor's friction are collinear in the torques (data correlation −0.999
#: for fc, −1.000 for fv: `loop_identifiability`), so only their reflected sum is determined and it is
#: given to the motor (the drive's effective friction); "all"; "none" (every pin estimated, as before).
#: The decision is made on the constraint-elimination states in `initial_parameters` (fixed-base smoother
#: with init="ls-sg"); without it (other inits, the floating smoother) "collinear" fixes nothing.
PASSIVE_FRICTION = "collinear"
#: per fit (keyed by its layout): {passive joint: reason} decided by `initial_parameters`
_FIXED_PINS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def fixed_passive_friction(robot, layout) -> dict:
    """{passive joint: reason} whose friction `adjust_prior` holds at its URDF value (`PASSIVE_FRICTION`)."""
    if PASSIVE_FRICTION == "none":
        return {}
    act = actuation_of(robot)
    if PASSIVE_FRICTION == "all":
        return {j: "PASSIVE_FRICTION = 'all'" for j in robot.joint_names if j in act.passive}
    if PASSIVE_FRICTION != "collinear":
        raise ValueError(f"PASSIVE_FRICTION must be 'collinear', 'all' or 'none', not {PASSIVE_FRICTION!r}")
    return dict(_FIXED_PINS.get(layout, {}))


def decide_passive_friction(smoother, states) -> dict:
    """Record, for this fit, the passive joints whose friction is collinear with an actuated joint's on
    the closed ``states`` (`loop_init.states`: `loop_identifiability.collinear_passive_friction`, effort
    noise by `highfreq_noise_std` of the logged actuated efforts); returns {joint: reason}."""
    from . import loop_identifiability

    robot = smoother.robot
    k = np.flatnonzero(states.keep)
    sig = np.ones(robot.n_joints)
    sig[~passive_mask(robot)] = np.maximum(np.nan_to_num(highfreq_noise_std(states.tau_raw), nan=1.0), 1e-6)
    try:
        pins = loop_identifiability.collinear_passive_friction(
            robot, states.q[k], states.v[k], states.a[k], sig,
            velocity_scale=float(smoother.friction_velocity_scale or 0.05))
    except (ValueError, np.linalg.LinAlgError) as e:
        smoother._log(f"passive friction: collinearity not computed ({e}); all estimated")
        pins = {}
    _FIXED_PINS[smoother.layout_] = pins
    for j, why in pins.items():
        smoother._log(f"passive friction of {j} held at its URDF value: {why}")
    return pins

#: effort rows near velocity reversals down-weighted by the friction law's error there
#: (`loop_init.stick_sigma`, set in `initial_parameters`); False: every row 1/σ_τ (as before)
STICK_WEIGHTS = True


def stick_factor(smoother, noise, act_v) -> np.ndarray:
    """Weight factor (N_knots, n_actuated) of the effort rows: σ_τ / √(σ_τ² + σ_stick²) with the
    smoother's ``_loop_stick_sigma`` (`loop_init.stick_sigma`), 1 where there is none."""
    s = getattr(smoother, "_loop_stick_sigma", None)
    if s is None or not STICK_WEIGHTS:
        return np.ones((smoother._taum.shape[0], len(act_v)))
    iv = smoother.robot.joint_index_v()
    sig = np.zeros(smoother.robot.nv)
    sig[iv] = np.asarray(noise.tau, float)
    st = sig[act_v][None, :]
    return st / np.sqrt(st ** 2 + s ** 2)


def adjust_prior(robot, layout, theta_bar, theta_std):
    """Passive joints have no rotor: armature prior mean at the floor (1e-9 kg·m²) with a tight std. The
    friction of the passive joints in `fixed_passive_friction` (`PASSIVE_FRICTION`: by default those the
    log cannot separate from an actuated joint's) is held at its URDF <dynamics> value (std 1e-6 in θ;
    values below 1e-3 × the prior's floors are raised to that); the other pins' friction stays free.
    (Pinning every pin's friction was tried before the loop initialization was fixed and made the B1 knee
    worse, 2.86 → 3.96 % held-out; re-measured with the fixed initialization: docs/benchmarks.md, "B1 knee:
    friction through the linkage".)"""
    pas = passive_mask(robot)
    if not pas.any():
        return theta_bar, theta_std
    theta_bar, theta_std = theta_bar.copy(), theta_std.copy()
    idx = np.arange(layout.s_armature.start, layout.s_armature.stop)[pas]
    theta_bar[idx] = layout.armature.to_theta(np.full(idx.size, layout.armature.FLOOR))
    theta_std[idx] = 1e-6
    fixed = fixed_passive_friction(robot, layout)  # issue 11 (knee): see `PASSIVE_FRICTION`
    if fixed:
        kf = layout.kf
        fr = np.arange(layout.s_friction.start, layout.s_friction.stop).reshape(layout.nj, kf)
        sfx = list(layout.friction.suffixes)
        urdf = {"fc": np.asarray(robot.urdf_friction, float), "fv": np.asarray(robot.urdf_damping, float)}
        for j in [robot.joint_names.index(n) for n in fixed]:
            if "fc" in sfx and "fv" in sfx:  # the URDF <dynamics> value (0 for a frictionless pin), not
                phys = layout.friction.to_physical(theta_bar[fr[j]])  # the prior's floor (1e-3 N·m)
                for s_ in ("fc", "fv"):
                    phys[sfx.index(s_)] = max(float(urdf[s_][j]), 1e-3 * getattr(
                        layout.friction, f"{s_.upper()}_FLOOR", 1e-3))
                theta_bar[fr[j]] = layout.friction.to_theta(phys)
            theta_std[fr[j]] = 1e-6
    return theta_bar, theta_std


def finish_problem(problem: Problem, smoother, noise) -> Problem:
    """Turn the tree term set of `JointSmoother._build_problem` into the looped one (module docstring):
    zero encoder/velocity weights of unencoded joints, the loop inverse-dynamics rows in place of the
    tree's, closure constraints and the λ prior."""
    robot = smoother.robot
    nv = robot.nv
    iv = robot.joint_index_v()
    enc = encoded_mask(robot)
    pas = passive_mask(robot)
    L = smoother._loops
    old = {t.name: t for t in problem.terms}
    replaced = ("encoders", "velocities", "inverse_dynamics", "forward_dynamics", "energy")
    keep = [t for t in problem.terms if t.name not in replaced]
    if "energy" in old:
        warnings.warn("energy observations are not available for looped robots: left out", stacklevel=3)
    problem.terms = []
    wq = np.zeros(nv)
    wq[iv] = np.where(enc, 1.0 / noise.q, 0.0)
    problem.add(terms.encoders(problem, smoother._qm, wq))
    if "velocities" in old:
        wv = np.zeros(nv)
        wv[iv] = np.where(enc, 1.0 / noise.v, 0.0)
        problem.add(terms.velocities(problem, smoother._vm, wv))
    act_v, pas_v = iv[~pas], iv[pas]
    wt = np.zeros(nv)
    wt[iv] = 1.0 / noise.tau
    w_act = (smoother._tau_mask * wt[None, :])[:, act_v]
    w_act = w_act * stick_factor(smoother, noise, act_v)  # issue 11 (knee): `loop_init.stick_sigma`
    for t in loop_dynamics(problem, smoother._id, L, smoother._taum, w_act, act_v, pas_v):
        problem.add(t)
    for t in keep:
        problem.add(t)
    for t in loop_kinematics(problem, L):
        problem.add(t)
    problem.add(force_prior(problem, force_scale(robot)))
    return problem


def init_forces(smoother, x, theta) -> tuple:
    """λ_k by weighted least squares on the inverse-dynamics rows at the current states and θ (actuated
    rows 1/σ_τ, passive rows 1/σ_c), with the λ prior as damping; returns x with the new λ block."""
    robot = smoother.robot
    q, v, a = x[:3]
    L = smoother._loops
    r0 = smoother._id.evaluate(q, v, a, smoother._taum, theta, jacobians=False).r  # (N, nv), λ = 0
    G = L.motion(q, v, a, True).cv_v  # (N, m, nv)
    iv = robot.joint_index_v()
    pas = passive_mask(robot)
    w = np.zeros(robot.nv)
    w[iv] = np.where(pas, 1.0 / SIGMA_PASSIVE, 1.0 / np.asarray(smoother.noise_.tau, float))
    W = smoother._tau_mask * w[None] if not pas.any() else np.where(
        np.isin(np.arange(robot.nv), iv[pas])[None], w[None], smoother._tau_mask * w[None])
    GW = G * (W ** 2)[:, None, :]
    H = GW @ np.transpose(G, (0, 2, 1)) + np.eye(L.m)[None] / force_scale(robot) ** 2
    lam = np.linalg.solve(H, np.einsum("nmv,nv->nm", GW, r0)[..., None])[..., 0]
    return (q, v, a, lam)


def kinematic_init(smoother, x, noise, iterations: int = 4) -> tuple:
    """Initial states consistent with the integration factors **and the closures**: the smoother's
    linear kinematic initialization (encoders, integration, pseudo-accelerations) plus the closure
    constraints, a few Gauss–Newton steps (the closures are nonlinear), then λ by `init_forces`."""
    q, v, a = x
    a_ref = a.copy()
    wa = 1.0 / np.maximum(np.sqrt(np.mean(a_ref ** 2, axis=0)), 1e-3)
    kin = smoother._build_problem(noise)
    kin.terms = [t for t in kin.terms if t.name not in ("inverse_dynamics", "passive_dynamics",
                                                        "parameter_prior", "energy", "loop_force_prior")]
    kin.add(force_prior(kin, 1.0))  # λ is re-initialized by `init_forces`: here it only stays put
    kin.add(terms.pseudo_accelerations(kin, a_ref, wa))
    lam = np.zeros((q.shape[0], kin.slices[BLOCK].stop - kin.slices[BLOCK].start))
    xs = (q, v, a, lam)
    for _ in range(iterations):
        step = smoother._lm.linear_solve(kin.linearize(xs, smoother._theta_bar, freeze_theta=True), 0.0)
        xs = kin.retract(xs, step.dx)
    return xs


def id_residual(smoother, x, theta) -> np.ndarray:
    """Full inverse-dynamics residual (N, nv) with the closure forces: M a + h + A a + τ_f − Gᵀλ − τ̂."""
    tc = smoother._loops.generalized_force(x[0], x[block_index(smoother.problem_)], False)[0]
    return smoother._id.evaluate(*x[:3], smoother._taum, theta, jacobians=False, external=tc).r


def finalize(smoother, x, theta) -> tuple:
    """Augmented-Lagrangian rounds that drive the closures and the passive rows to `CONSTRAINT_TOL`;
    stores the worst violation per constraint term in ``smoother.constraints_``."""
    lm = smoother._lm
    x, theta, hist, viol, rounds = lm.augmented_lagrangian(smoother.problem_, x, theta, rounds=30,
                                                           constraint_tol=CONSTRAINT_TOL)
    smoother.constraints_ = {k: float(np.abs(v).max()) if np.size(v) else 0.0 for k, v in viol.items()}
    smoother.constraints_["rounds"] = int(rounds)
    return x, theta, hist


def motor_parameters(robot, p: np.ndarray, layout) -> pd.DataFrame:
    """Motor-side rotor inertia and friction of the actuated joints from the joint-side estimates p:
    I_m = A / N² [kg·m²], fc_m = fc / N [N·m], fv_m = fv / N² [N·m·s/rad] (joint torque = N · motor torque,
    motor speed = N · joint speed)."""
    _, pf, pa = layout.split(p)
    N = gear_ratios(robot)
    act = actuation_of(robot)
    rows = []
    sfx = list(layout.friction.suffixes)
    for j, name in enumerate(robot.joint_names):
        if name in act.passive:
            continue
        row = {"joint": name, "gear_ratio": N[j], "armature_joint": pa[j],
               "armature_motor": pa[j] / N[j] ** 2}
        if "fc" in sfx:
            row["fc_motor"] = pf[j][sfx.index("fc")] / N[j]
        if "fv" in sfx:
            row["fv_motor"] = pf[j][sfx.index("fv")] / N[j] ** 2
        rows.append(row)
    return pd.DataFrame(rows)


def summary_extras(smoother, theta) -> dict:
    """``summary.json`` entries of a looped fit: worst constraint residual per term (SI units), the
    tolerance, and the motor-side parameters of the actuated joints."""
    c = dict(getattr(smoother, "constraints_", {}))
    rounds = c.pop("rounds", 0)
    motor = motor_parameters(smoother.robot, smoother.layout_.to_physical(theta), smoother.layout_)
    return {"loops": {
        "closures": [cl.to_dict() for cl in smoother.robot.loops],
        "actuation": actuation_of(smoother.robot).to_dict(),
        "constraint_residual_max": c, "tolerance": CONSTRAINT_TOL, "rounds": rounds,
        "satisfied": bool(c) and max(c.values()) <= CONSTRAINT_TOL,
        "motor_parameters": motor.to_dict(orient="records"),
        "friction_identifiability": friction_identifiability(smoother, theta),  # issue 11 (knee)
    }}


def friction_identifiability(smoother, theta) -> list:
    """``loops.friction_identifiability`` of a fixed-base looped fit (`loop_identifiability.summary_records`
    at the fit's states and effort noise), [] when it cannot be computed (a note in the log)."""
    from . import loop_identifiability

    x = getattr(smoother, "states_", None)
    if x is None or smoother.robot.floating_base:
        return []
    lay = smoother.layout_
    est = dict(zip(lay.names, lay.to_physical(theta), strict=True))
    vs = float(getattr(smoother, "friction_velocity_scale", 0.05) or 0.05)
    try:
        return loop_identifiability.summary_records(smoother.robot, x[0], x[1], x[2],
                                                    np.asarray(smoother.noise_.tau, float), est,
                                                    fixed_passive_friction(smoother.robot, lay), vs)
    except (ValueError, np.linalg.LinAlgError, KeyError) as e:
        smoother._log(f"friction identifiability not computed: {e}")
        return []


def predict_torque(robot, layout, theta, q, v, a) -> np.ndarray:
    """Joint-side efforts of the actuated joints (N, n_actuated) that the looped model predicts at states
    (q, v, a) of the tree: b = M a + h + A a + τ_f, closure forces λ from the passive rows
    (G_pᵀ λ = b_p, minimum norm), τ_act = b_act − (Gᵀλ)_act (paper 004 eq. 21 with S = actuated rows)."""
    from ..factors.inverse_dynamics import InverseDynamicsResidual

    q, v, a = (np.atleast_2d(np.asarray(x, float)) for x in (q, v, a))
    b = InverseDynamicsResidual(layout).predict(q, v, a, theta)
    iv = robot.joint_index_v()
    pas = passive_mask(robot)
    act_v, pas_v = iv[~pas], iv[pas]
    G = closures(robot).motion(q, v, a, True).cv_v  # (N, m, nv)
    lam = np.zeros((q.shape[0], G.shape[1]))
    if pas_v.size:
        lam = np.einsum("nmp,np->nm", np.linalg.pinv(np.transpose(G[:, :, pas_v], (0, 2, 1))), b[:, pas_v])
    return b[:, act_v] - np.einsum("nmv,nm->nv", G, lam)[:, act_v]


def model_efforts(spec: dict, robot, q, v, a) -> np.ndarray:
    """Efforts (N, n_joints) a looped ``model.json`` dict predicts at joint states (q, v, a) (N, n_joints):
    actuated joints by `predict_torque`, NaN for passive joints (no effort by design)."""
    from ..layout import ParameterLayout

    lay = spec["layout"]
    vs = float(lay.get("friction_velocity_scale") or 0.05)
    layout = ParameterLayout.create(robot, lay["inertia_parameterization"], lay["friction_model"], vs)
    names = lay["names"]
    p = np.array([spec["physical"][n] for n in names], float) if isinstance(spec.get("physical"), dict) \
        else np.asarray(spec["physical"], float)
    theta = np.asarray(lay["theta"], float) if lay.get("theta") is not None else layout.to_theta(p)
    iv = robot.joint_index_v()
    Q = np.tile(robot.neutral(), (np.shape(q)[0], 1))
    Q[:, robot.joint_index_q()] = q
    V, A = np.zeros((Q.shape[0], robot.nv)), np.zeros((Q.shape[0], robot.nv))
    V[:, iv], A[:, iv] = v, a
    pas = passive_mask(robot)
    out = np.full((Q.shape[0], robot.n_joints), np.nan)
    out[:, ~pas] = predict_torque(robot, layout, theta, Q, V, A)
    return out
