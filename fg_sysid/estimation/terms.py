"""The factor terms of the estimation core (`problem.Term`), built from the plain residual functions of
`fg_sysid.factors` (the single source of residuals and analytic Jacobians).

Every builder returns a `Term` for a `Problem` whose knot state starts with (q, v, a) — the factor
functions' (δq, δv, δa) columns — optionally followed by more blocks (contact forces λ). Weights are
whitening factors 1/σ in the residual's units (rows where a factor does not apply get weight 0).

Fixed base (paper 004 eq. 1): `encoders`, `velocities`, `inverse_dynamics`, `integration`,
`parameter_prior`. Floating base adds `imu_gyro`, `imu_accelerometer`, `contact_motion` (velocity and
acceleration constraints), `contact_height` (pair constraint), `swing_force`, `contact_force_terms`
(measured force, unilateral, friction cone), `floating_dynamics` (joint rows as measurements, base rows
as a constraint), `parameter_rows` (total mass, symmetry) and `impact_maps`.
"""

from __future__ import annotations

import numpy as np

from ..factors.contact import contact_motion_residuals
from ..factors.contact_forces import (
    friction_cone_residual,
    measured_force_residual,
    unilateral_residual,
    world_forces,
)
from ..factors.imu import accelerometer_residual, gyro_residual
from ..factors.kinematics import encoder_residual, integration_residual, velocity_residual
from .problem import Problem, Residual, Term, theta_dependent


def _pad(problem: Problem, J):
    """Factor Jacobians on (δq, δv, δa[, ...]) → the problem's full knot-state width."""
    if J is None or J.shape[-1] == problem.nx:
        return J
    out = np.zeros(J.shape[:-1] + (problem.nx,))
    out[..., : J.shape[-1]] = J
    return out


# ---------------------------------------------------------------------------------------------- kinematics
def encoder_rows(problem: Problem, q_meas):
    """Cached r = q ⊖ q̂ (N, nv) and its padded Jacobian (shared by `encoders` and `base_anchor`)."""

    def compute(ev):
        return ev.cached("encoders", lambda: _encoder(problem, ev, q_meas))

    return compute


def _encoder(problem, ev, q_meas):
    r, J = encoder_residual(problem.space, ev.q, ev.rows(q_meas), ev.jacobians)
    return r, _pad(problem, J)


def encoders(problem: Problem, q_meas, w, name: str = "encoders") -> Term:
    """Encoders (and a logged base pose, on its rows): r = q ⊖ q̂ [rad | m], weights ``w`` (nv,) or (N, nv)."""
    rows = encoder_rows(problem, q_meas)

    def evaluate(ev, jac):
        r, J = rows(ev)
        return Residual(r, J, w=ev.rows(w))

    return Term(name, "knot", "measurement", evaluate, constant=problem.space.is_vector_space)


def velocities(problem: Problem, v_meas, w) -> Term:
    """Velocity measurements r = v − v̂ [rad/s | m/s] (tachometers / logged joint velocities)."""

    def evaluate(ev, jac):
        r, J = velocity_residual(ev.v, ev.rows(v_meas), jac)
        return Residual(r, _pad(problem, J), w=w)

    return Term("velocities", "knot", "measurement", evaluate, constant=True)


def pseudo_accelerations(problem: Problem, a_ref, w) -> Term:
    """Weak pseudo-measurement a ≈ a_ref (kinematic initialization in place of the dynamics)."""
    nv = a_ref.shape[1]

    def evaluate(ev, jac):
        J = None
        if jac:
            J = np.zeros((ev.a.shape[0], nv, problem.nx))
            J[:, :, problem.slices["a"]] = np.eye(nv)
        return Residual(ev.a - ev.rows(a_ref), J, w=w)

    return Term("pseudo_accelerations", "knot", "prior", evaluate, constant=True)


def integration(problem: Problem, h, w, keep=None, whitener=None) -> Term:
    """Integration between consecutive knots on the manifold (paper 004 eq. 1b; `integration_residual`):
    weights ``w`` (2nv,) = 1/(process σ_q, σ_v); ``keep`` (N−1,) 0/1 drops intervals (impacts);
    ``whitener`` (N−1, 2nv, 2nv) replaces the diagonal weights (projected process noise, eqs. 36–37)."""

    if whitener is not None:
        w = None if keep is None else keep[:, None]
    elif keep is not None:
        w = keep[:, None] * np.asarray(w, float)[None, :]

    def evaluate(ev, jac):
        pl = integration_residual(problem.space, ev.q, ev.v, ev.a, ev.intervals(h), jac)
        ww = ev.intervals(w) if np.ndim(w) == 2 else w
        return Residual(pl.r, _pad(problem, pl.J0), _pad(problem, pl.J1), w=ww, W=ev.intervals(whitener))

    return Term("integration", "pair", "measurement", evaluate,
                constant=problem.space.is_vector_space and whitener is None)


# ---------------------------------------------------------------------------------------------- dynamics
def inverse_dynamics(problem: Problem, id_residual, tau_meas, w) -> Term:
    """Inverse dynamics vs measured efforts (paper 004 eq. 2, fixed base): ``id_residual`` an
    `InverseDynamicsResidual`; ``w`` (N, nv) = mask / σ_τ (0 where an effort is not measured)."""

    @theta_dependent
    def evaluate(ev, jac):
        lin = id_residual.evaluate(ev.q, ev.v, ev.a, ev.rows(tau_meas), ev.theta, jac)
        if not jac:
            return Residual(lin.r, w=ev.rows(w))
        J = problem.state_jacobian(lin.r.shape[0], lin.r.shape[1], {"q": lin.Jq, "v": lin.Jv, "a": lin.Ja})
        return Residual(lin.r, J, Jt=lin.Jtheta, w=ev.rows(w), owned=True)  # made for this call

    return Term("inverse_dynamics", "knot", "measurement", evaluate)


def forward_dynamics(problem: Problem, fd_residual, tau_meas, w) -> Term:
    """The forward-dynamics formulation (paper 004 Fig. 10): r = a_fd(q, v, τ̂; θ) − a [rad/s² | m/s²]
    (`factors.forward_dynamics`), ``w`` (nv,) = 1/σ_a; replaces `inverse_dynamics` in a fixed-base problem."""
    nv = problem.space.model.nv

    @theta_dependent
    def evaluate(ev, jac):
        lin = fd_residual.evaluate(ev.q, ev.v, ev.a, ev.rows(tau_meas), ev.theta, jac)
        if not jac:
            return Residual(lin.r, w=w)
        minus_eye = np.broadcast_to(-np.eye(nv), lin.Jq.shape)
        J = problem.state_jacobian(lin.r.shape[0], nv, {"q": lin.Jq, "v": lin.Jv, "a": minus_eye})
        return Residual(lin.r, J, Jt=lin.Jtheta, w=w)

    return Term("forward_dynamics", "knot", "measurement", evaluate)


def floating_dynamics(problem: Problem, id_fn, tau_meas, w_joint, sigma_base: float, actuated) -> tuple:
    """Inverse dynamics with contact forces on a free-flyer: ``id_fn(q, v, a, lam, θ, τ̂, jacobians)`` →
    (r, Jx, Jθ) (N, nv) evaluated once per linearization and shared by two terms — the actuated joint
    rows against the measured efforts (``w_joint`` (N, n_act) = mask/σ_τ) and the six unactuated base
    rows as a constraint (Newton–Euler of the whole robot, σ_c ``sigma_base`` [N | N·m])."""
    act = np.asarray(actuated, int)

    def full(ev):
        return ev.cached("floating_id", lambda: id_fn(ev.q, ev.v, ev.a, ev.x[3], ev.theta, ev.rows(tau_meas),
                                                       ev.jacobians))

    @theta_dependent
    def joints(ev, jac):
        r, Jx, Jt = full(ev)
        if not jac:
            return Residual(r[:, act], w=ev.rows(w_joint))
        return Residual(r[:, act], Jx[:, act], Jt=Jt[:, act], w=ev.rows(w_joint))

    @theta_dependent
    def base(ev, jac):
        r, Jx, Jt = full(ev)
        if not jac:
            return Residual(r[:, :6])
        return Residual(r[:, :6], Jx[:, :6], Jt=Jt[:, :6])

    return (Term("inverse_dynamics", "knot", "measurement", joints),
            Term("base_wrench", "knot", "constraint", base, sigma=sigma_base))


def parameter_prior(theta_bar, theta_std) -> Term:
    """Gaussian prior on θ (in the parameterization's unconstrained coordinates): r = θ − θ̄, w = 1/σ."""
    n = np.size(theta_bar)

    def evaluate(ev, jac):
        return Residual(ev.theta - theta_bar, Jt=np.eye(n) if jac else None, w=1.0 / theta_std)

    return Term("parameter_prior", "theta", "prior", evaluate)


def lead_tie(layout, sigma: float) -> Term | None:
    """One friction lead T for every joint (issue 9, session 10): rows T_{j+1} − T_j [s] with std ``sigma``
    between consecutive joints of a lead law (`SoftDry`, `CoulombViscousLead`; T is a θ coordinate
    itself). MuJoCo's soft constraints share one solref by default, and one T pools the reversals of every
    joint; None when the layout has no lead or a single joint."""
    sfx = list(layout.friction.suffixes)
    if "lead" not in sfx or layout.nj < 2:
        return None
    idx = layout.s_friction.start + layout.kf * np.arange(layout.nj) + sfx.index("lead")
    D = np.zeros((layout.nj - 1, layout.n))
    D[np.arange(layout.nj - 1), idx[1:]] = 1.0
    D[np.arange(layout.nj - 1), idx[:-1]] = -1.0

    def fn(theta, jac):
        return D @ theta, (D if jac else None)

    return theta_rows("friction_lead_tie", fn, np.full(layout.nj - 1, float(sigma)), hard=False)


def theta_rows(name: str, fn, sigma, hard: bool) -> Term:
    """A θ-only row set ``fn(θ, jacobians) -> (r, J)`` (total mass, symmetry): a constraint with σ_c
    ``sigma`` when ``hard``, else a prior with std ``sigma``."""

    def evaluate(ev, jac):
        r, J = fn(ev.theta, jac)
        if hard:
            return Residual(r, Jt=J)
        return Residual(r, Jt=J, w=1.0 / np.asarray(sigma, float))

    return Term(name, "theta", "constraint" if hard else "prior", evaluate, sigma=sigma if hard else None)


# ---------------------------------------------------------------------------------------------- floating base
def imu_gyro(problem: Problem, model, data, frame_id, gyro, sigma) -> Term:
    """Gyro [rad/s] at the IMU frame (`factors.imu.gyro_residual`)."""

    def evaluate(ev, jac):
        r, J = gyro_residual(model, data, frame_id, ev.q, ev.v, ev.rows(gyro), jac)
        return Residual(r, _pad(problem, J), w=1.0 / sigma)

    return Term("imu_gyro", "knot", "measurement", evaluate)


def imu_accelerometer(problem: Problem, model, data, frame_id, acc, sigma) -> Term:
    """Accelerometer specific force [m/s²] with gravity and lever arm (`factors.imu`)."""

    def evaluate(ev, jac):
        r, J = accelerometer_residual(model, data, frame_id, ev.q, ev.v, ev.a, ev.rows(acc), jac)
        return Residual(r, _pad(problem, J), w=1.0 / sigma)

    return Term("imu_accelerometer", "knot", "measurement", evaluate)


def contact_motion(problem: Problem, model, data, frame_ids, offset, mask, sigma_v: float,
                   sigma_a: float) -> tuple:
    """Stance contact points do not move (rolling without slipping; `factors.contact`): velocity
    [m/s] and acceleration [m/s²] constraints on the knots where ``mask`` (N, n_feet) is set. One
    kinematics pass per knot for all feet, shared by both terms."""
    m3 = np.repeat(np.asarray(mask, float), 3, axis=1)  # (N, 3 nf)

    def rows(ev):
        return ev.cached("contact_motion", lambda: contact_motion_residuals(
            model, data, frame_ids, ev.q, ev.v, ev.a, ev.jacobians, offset))

    def flat(r, J):
        n, nf = r.shape[:2]
        r = r.reshape(n, 3 * nf)
        return r, None if J is None else _pad(problem, J.reshape(n, 3 * nf, -1))

    def vel(ev, jac):
        rv, Jv, _, _ = rows(ev)
        r, J = flat(rv, Jv)
        return Residual(r, J, w=ev.rows(m3))

    def acc(ev, jac):
        _, _, ra, Ja = rows(ev)
        r, J = flat(ra, Ja)
        return Residual(r, J, w=ev.rows(m3))

    return (Term("contact_acceleration", "knot", "constraint", acc, sigma=sigma_a),
            Term("contact_velocity", "knot", "constraint", vel, sigma=sigma_v))


def contact_height(problem: Problem, height_fn, pair_mask, sigma: float) -> Term:
    """A stance foot keeps its height between consecutive stance knots [m] (holonomic for a sphere on a
    plane); ``height_fn(q, jacobians)`` → (z (N, nf), Jz (N, nf, nv) or None)."""
    pm = np.asarray(pair_mask, float)

    def evaluate(ev, jac):
        z, Jz = height_fn(ev.q, jac)
        r = z[1:] - z[:-1]
        if not jac:
            return Residual(r, w=ev.intervals(pm))
        J = np.zeros(Jz.shape[:2] + (problem.nx,))
        J[:, :, problem.slices["q"]] = Jz
        return Residual(r, -J[:-1], J[1:], w=ev.intervals(pm))

    return Term("contact_height", "pair", "constraint", evaluate, sigma=sigma)


def swing_force(problem: Problem, w) -> Term:
    """A foot in swing carries no force: r = λ [N] where ``w`` (N, 3 nf) = swing / σ."""
    sl = problem.slices["lam"]
    n_lam = sl.stop - sl.start

    def evaluate(ev, jac):
        lam = ev.x[3]
        J = None
        if jac:
            J = np.zeros((lam.shape[0], n_lam, problem.nx))
            J[:, :, sl] = np.eye(n_lam)
        return Residual(lam, J, w=ev.rows(w))

    return Term("swing_force", "knot", "prior", evaluate)


def contact_force_terms(problem: Problem, model, data, frame_ids, f_meas, sigma_force, mu, stance,
                        sigma_cone) -> list:
    """Measured contact forces (world axes, N) and soft unilateral / friction-cone hinges on stance
    forces (`factors.contact_forces`); world forces R_f λ_f computed once per foot and shared."""
    nf = len(frame_ids)
    lam_sl = problem.slices["lam"]

    def world(ev, i):
        return ev.cached(("world_force", i), lambda: world_forces(
            model, data, frame_ids[i], ev.q, ev.x[3][:, 3 * i: 3 * i + 3], ev.jacobians))

    def stacked(ev, jac, fn):
        rs, Js = [], []
        for i in range(nf):
            r, Jq, Jl = fn(ev, i, jac)
            rs.append(r)
            if jac:
                J = np.zeros((r.shape[0], r.shape[1], problem.nx))
                J[:, :, problem.slices["q"]] = Jq
                J[:, :, lam_sl.start + 3 * i: lam_sl.start + 3 * i + 3] = Jl
                Js.append(J)
        return np.concatenate(rs, axis=1), (np.concatenate(Js, axis=1) if jac else None)

    terms = []
    if f_meas is not None:
        def measured(ev, jac):
            r, J = stacked(ev, jac, lambda ev, i, jac: measured_force_residual(
                model, data, frame_ids[i], ev.q, ev.x[3][:, 3 * i: 3 * i + 3], ev.rows(f_meas)[:, i], jac,
                world=world(ev, i)))
            return Residual(r, J, w=1.0 / sigma_force)

        terms.append(Term("measured_forces", "knot", "measurement", measured))
    if mu is not None:
        ws = np.asarray(stance, float) / sigma_cone  # (N, nf): one row per foot

        def unilateral(ev, jac):
            r, J = stacked(ev, jac, lambda ev, i, jac: unilateral_residual(
                model, data, frame_ids[i], ev.q, ev.x[3][:, 3 * i: 3 * i + 3], jacobians=jac,
                world=world(ev, i)))
            return Residual(r, J, w=ev.rows(ws))

        def cone(ev, jac):
            r, J = stacked(ev, jac, lambda ev, i, jac: friction_cone_residual(
                model, data, frame_ids[i], ev.q, ev.x[3][:, 3 * i: 3 * i + 3], mu, jacobians=jac,
                world=world(ev, i)))
            return Residual(r, J, w=ev.rows(ws))

        terms += [Term("unilateral", "knot", "prior", unilateral),
                  Term("friction_cone", "knot", "prior", cone)]
    return terms


def impact_maps(fn) -> Term:
    """Reset maps at touchdowns (paper 004 eqs. 7–11): ``fn(ev, jacobians)`` → whitened rows
    [(k, J0, J1, Jθ, r)]."""

    @theta_dependent
    def evaluate(ev, jac):
        rows = fn(ev, jac)
        if not rows:
            return Residual([], k=[], J=[], J1=[], Jt=[])
        k, J0, J1, Jt, r = zip(*rows, strict=True)
        return Residual(list(r), list(J0), list(J1), list(Jt), k=list(k))

    return Term("impact_maps", "pair_theta", "measurement", evaluate)


def energy(problem: Problem, energy_residual, t_knots, work, sigma_work, state_work=None) -> Term:
    """Work–energy observation per knot interval (paper 004 eq. 63, `factors.energy.EnergyResidual`):
    E(x_{k+1}) − E(x_k) + ∫ vᵀτ_f dt − Ŵ_k [J] with Ŵ_k the measured input work between the two knots
    (`factors.energy.input_work`) and its std ``sigma_work`` (N−1,) [J] (`input_work_std`). A pair term that
    depends on θ (sparse pair-θ rows of the elimination). ``state_work``: None, or a function
    ``(ev, t_knots, jacobians) -> (W, W_q0, W_q1, W_v0, W_v1)`` of the interval's states whose value is
    subtracted as well (the input work from the states, `energy_state_work`)."""
    t_knots = np.asarray(t_knots, float)
    w = 1.0 / np.asarray(sigma_work, float)

    @theta_dependent
    def evaluate(ev, jac):
        tk = t_knots if ev.idx is None else t_knots[ev.idx]
        lin = energy_residual.evaluate(ev.q, ev.v, tk, ev.theta, ev.intervals(work), jacobians=jac)
        W = None if state_work is None else state_work(ev, tk, jac)
        r = (lin.r if W is None else lin.r - W[0])[:, None]
        ww = ev.intervals(w)[:, None]
        if not jac:
            return Residual(r, w=ww)
        n = r.shape[0]
        J0, J1 = np.zeros((n, 1, problem.nx)), np.zeros((n, 1, problem.nx))
        J0[:, 0, problem.slices["q"]], J0[:, 0, problem.slices["v"]] = lin.Jq_a, lin.Jv[:, 0]
        J1[:, 0, problem.slices["q"]], J1[:, 0, problem.slices["v"]] = lin.Jq_b, lin.Jv[:, -1]
        if W is not None:
            J0[:, 0, problem.slices["q"]] -= W[1]
            J1[:, 0, problem.slices["q"]] -= W[2]
            J0[:, 0, problem.slices["v"]] -= W[3]
            J1[:, 0, problem.slices["v"]] -= W[4]
        return Residual(r, J0, J1, Jt=lin.Jtheta[:, None, :], w=ww)

    return Term("energy", "pair", "measurement", evaluate)


def energy_state_work(problem: Problem, energy_residual, t_knots, tau_k, iv, sigma_work,
                      form: str = "state-q") -> Term:
    """Work–energy observation per knot interval with the input work a function of the states (issue 12,
    session 8): E(x_{k+1}) − E(x_k) + ∫ vᵀτ_f dt − τ̂_kᵀ d_k(x) [J], d_k = q_{k+1} ⊖ q_k (``form="state-q"``)
    or ½h (v_k + v_{k+1}) (``"state-v"``), τ̂_k (K−1, n_joints) the effort held over the interval
    (`factors.energy.knot_interval_efforts`), ``iv`` its velocity columns, ``sigma_work`` (K−1,) [J] the
    std from the effort noise (`factors.energy.state_work_std`). `energy` with no measured work."""
    from ..factors.energy import state_work

    tau_k = np.asarray(tau_k, float)

    def work_of_states(ev, tk, jac):
        return state_work(problem.space, ev.q, ev.v, tk, ev.intervals(tau_k), iv, form, jac)

    return energy(problem, energy_residual, t_knots, np.zeros(np.asarray(t_knots).size - 1), sigma_work,
                  state_work=work_of_states)
