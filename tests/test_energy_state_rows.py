"""Energy rows with the input work from the states (issue 12, session 8): W(x) = τ̂_kᵀ (q_{k+1} ⊖ q_k) or
τ̂_kᵀ ½h (v_k + v_{k+1}).

Oracles: central differences for the Jacobians (also on a free-flyer, where ⊖ is Pinocchio's difference);
the work–energy balance at the true states and parameters of a simulated Z1 (efforts held zero-order over
each 500 Hz sample, seed outside the Table I study's 0–49); Monte-Carlo effort noise for the whitening;
the inverse-dynamics rows at the truth for the overlap (double counting) of the two kinds of rows.
"""

from __future__ import annotations

import warnings

import numpy as np
import pinocchio as pin
import pytest
from jacobian_check import central_diff

from fg_sysid.datasets.simulate import simulate, truth_arrays
from fg_sysid.estimation.smoother import JointSmoother
from fg_sysid.factors.energy import (
    DEFAULT_WORK_FORM,
    EnergyResidual,
    knot_interval_efforts,
    state_work,
    state_work_std,
)
from fg_sysid.factors.inverse_dynamics import InverseDynamicsResidual
from fg_sysid.factors.manifold import ConfigurationSpace
from fg_sysid.layout import ParameterLayout
from fg_sysid.robots import load_robot

SIGMA = 0.01


@pytest.fixture(scope="module")
def z1_truth():
    """A 4 s Z1 log at 500 Hz (σ = 0.01 on q, v, τ; truth tanh width 0.02 rad/s, seed 7002), the true θ
    (layout with the truth's width) and ``ΔE + W_f`` per sample interval at the true states."""
    robot = load_robot("z1")
    sim = simulate(robot, 4.0, 500.0, SIGMA, 7002, friction_velocity_scale=0.02)
    tr = truth_arrays(sim.truth, robot)
    lay = ParameterLayout.create(robot, "exponential-eigenvalue", "coulomb-viscous", 0.02)
    p = np.concatenate([tr["inertial"].ravel(), np.c_[tr["fc"], tr["fv"]].ravel(), tr["armature"]])
    th = lay.to_theta(p)
    T = sim.truth_log
    r0 = EnergyResidual(lay).evaluate(T.q, T.v, T.t, th, np.zeros(T.t.size - 1), jacobians=False).r
    return robot, sim, lay, th, r0


@pytest.mark.parametrize("name", ["z1", "b1"])
@pytest.mark.parametrize("form", ["state-q", "state-v"])
def test_state_work_jacobians_match_central_differences(name, form):
    robot = load_robot(name)
    space = ConfigurationSpace(robot.model)
    rng = np.random.default_rng(3)
    n, nv, iv = 5, robot.nv, robot.joint_index_v()
    q0 = np.repeat(pin.neutral(robot.model)[None, :], n, axis=0)
    q = space.integrate(q0, 0.3 * rng.standard_normal((n, nv)))
    v = rng.standard_normal((n, nv))
    t = np.cumsum(np.full(n, 0.002))
    tau = rng.standard_normal((n - 1, len(iv)))
    W, Jq0, Jq1, Jv0, Jv1 = state_work(space, q, v, t, tau, iv, form)
    assert np.abs(W).max() > 0
    for k in range(n - 1):
        def fq0(d, k=k):
            qq = q.copy()
            qq[k] = space.integrate(q[k:k + 1], d[None, :])[0]
            return state_work(space, qq, v, t, tau, iv, form, jacobians=False)[0][k]

        def fq1(d, k=k):
            qq = q.copy()
            qq[k + 1] = space.integrate(q[k + 1:k + 2], d[None, :])[0]
            return state_work(space, qq, v, t, tau, iv, form, jacobians=False)[0][k]

        def fv(d, k=k, i=0):
            vv = v.copy()
            vv[k + i] += d
            return state_work(space, q, vv, t, tau, iv, form, jacobians=False)[0][k]

        zero = np.zeros(nv)
        np.testing.assert_allclose(central_diff(fq0, zero), Jq0[k], atol=1e-8)
        np.testing.assert_allclose(central_diff(fq1, zero), Jq1[k], atol=1e-8)
        np.testing.assert_allclose(central_diff(fv, zero), Jv0[k], atol=1e-8)
        np.testing.assert_allclose(central_diff(lambda d, k=k: fv(d, k, 1), zero), Jv1[k], atol=1e-8)


def test_state_work_closes_the_balance_and_whitens_to_one(z1_truth):
    """At the true states: with the noise-free efforts the row is zero to 1 % of its σ (held efforts: the
    work is exactly τ_kᵀΔq); with the logged efforts the whitened rows have RMS 1, uncorrelated neighbours,
    and sums of 50 rows whiten to 1 too (no shared samples: no long-run correction needed)."""
    robot, sim, lay, th, r0 = z1_truth
    T, L = sim.truth_log, sim.log
    space, iv, t = ConfigurationSpace(robot.model), robot.joint_index_v(), T.t
    tau_k = knot_interval_efforts(t, L.tau, t, robot.joint_names)
    sigma = state_work_std(t, L.v, SIGMA)
    for form in ("state-q", "state-v"):
        exact = r0 - state_work(space, T.q, T.v, t, T.tau[:-1], iv, form, jacobians=False)[0]
        assert np.sqrt(np.mean((exact / sigma) ** 2)) < 0.01, form
        z = (r0 - state_work(space, T.q, T.v, t, tau_k, iv, form, jacobians=False)[0]) / sigma
        assert 0.95 < np.sqrt(np.mean(z ** 2)) < 1.05, form
        assert abs(np.corrcoef(z[:-1], z[1:])[0, 1]) < 0.08, form
        sums = z[: (z.size // 50) * 50].reshape(-1, 50)
        s50 = np.sqrt(np.mean(np.sum(sums * sigma[: sums.size].reshape(-1, 50), 1) ** 2
                              / np.sum(sigma[: sums.size].reshape(-1, 50) ** 2, 1)))
        assert 0.8 < s50 < 1.25, form
    # the measured-velocity trapezoid would be a worse whitening for the state σ (velocity noise ignored)
    v_meas_work = np.einsum("kj,kj->k", tau_k, 0.5 * np.diff(t)[:, None] * (L.v[:-1] + L.v[1:]))
    assert np.sqrt(np.mean(((r0 - v_meas_work) / sigma) ** 2)) > 3.0


def test_energy_rows_are_the_id_rows_projected_on_the_motion(z1_truth):
    """Double counting: at the truth, the state-q energy row equals Δq_kᵀ r_ID,k (r_ID = ID(x_k) − τ̂_k, the
    inverse-dynamics rows of knot k) to 1 % of its σ — the energy row carries no effort noise of its own."""
    robot, sim, lay, th, r0 = z1_truth
    T, L = sim.truth_log, sim.log
    space, iv, t = ConfigurationSpace(robot.model), robot.joint_index_v(), T.t
    tau_k = knot_interval_efforts(t, L.tau, t, robot.joint_names)
    r_e = r0 - state_work(space, T.q, T.v, t, tau_k, iv, "state-q", jacobians=False)[0]
    r_id = InverseDynamicsResidual(lay).evaluate(T.q, T.v, sim.truth_acceleration, L.tau, th, False).r
    proj = np.einsum("kj,kj->k", np.diff(T.q, axis=0), r_id[:-1])
    sigma = state_work_std(t, L.v, SIGMA)
    assert np.corrcoef(r_e, proj)[0, 1] > 0.999
    assert np.sqrt(np.mean(((r_e - proj) / sigma) ** 2)) < 0.01


def test_knot_interval_efforts_need_a_knot_per_sample():
    t = np.arange(10) * 0.002
    tau = np.ones((10, 2))
    np.testing.assert_array_equal(knot_interval_efforts(t, tau, t[::1], ["a", "b"]), tau[:-1])
    with pytest.raises(ValueError, match="knot at every log sample"):
        knot_interval_efforts(t, tau, t[::2], ["a", "b"])
    tau[3, 1] = np.nan
    with pytest.raises(ValueError, match=r"\['b'\]"):
        knot_interval_efforts(t, tau, t, ["a", "b"])


def test_smoother_energy_rows_use_the_states_by_default():
    """`JointSmoother(energy=True)` on a serial arm: the default rows are the state-q form (their residual
    does not move when only the logged velocities change); with knots every 2 samples the state form,
    asked for, warns and keeps the measured work."""
    assert DEFAULT_WORK_FORM == "state-q"
    robot = load_robot("z1")
    log = simulate(robot, 0.3, 500, SIGMA, 7003, friction_velocity_scale=0.02).log
    from dataclasses import replace

    def energy_rows(lg, **kw):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sm = JointSmoother(robot, energy=True, max_iterations=1, **kw).fit(lg)
        term = sm.problem_.term("energy")
        from fg_sysid.estimation.problem import Evaluation

        x = sm.states_
        return term.evaluate(Evaluation(sm.problem_, x, sm.result_.theta, False), False).r.ravel(), sm, x

    r_a, sm, x = energy_rows(log)
    shifted = replace(log, v=np.asarray(log.v) + 0.05)  # biased tachometers: the measured work would change
    term = sm._energy_term(sm.problem_, sm.noise_)
    from fg_sysid.estimation.problem import Evaluation

    sm._energy_log = (sm._energy_log[0], np.asarray(shifted.v, float), *sm._energy_log[2:])
    term_b = sm._energy_term(sm.problem_, sm.noise_)
    ev = Evaluation(sm.problem_, x, sm.result_.theta, False)
    np.testing.assert_allclose(term.evaluate(ev, False).r, term_b.evaluate(ev, False).r, rtol=0, atol=0)
    assert np.allclose(r_a, term.evaluate(ev, False).r.ravel())
    sm.energy_work = "measured"
    r_meas = sm._energy_term(sm.problem_, sm.noise_).evaluate(ev, False).r
    assert np.abs(r_meas - term_b.evaluate(ev, False).r).max() > 1e-4
    sm2 = JointSmoother(robot, energy=True, max_iterations=1, knot_stride=2)
    sm2.energy_work = "state-q"  # since issue 12 session 9 the default at stride > 1 is the measured work
    with pytest.warns(UserWarning, match="knot at every log sample"):
        sm2.fit(log)


def test_smoother_energy_rows_whiten_to_one_at_the_truth():
    """The smoother's own energy term (default state-q rows, σ from the effort noise level it uses, here the
    sensor's, given) evaluated at the true states and parameters of a 2 s Z1 log (seed 7004): whitened RMS
    ≈ 1. (Estimated from the log, the smoother's σ_τ is the effort rows' level, model error included.)"""
    from fg_sysid.estimation.problem import Evaluation

    robot = load_robot("z1")
    sim = simulate(robot, 2.0, 500.0, SIGMA, 7004, friction_velocity_scale=0.02)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sm = JointSmoother(robot, inertia="exponential-eigenvalue", friction="coulomb-viscous",
                           friction_velocity_scale=0.02, energy=True, max_iterations=1,
                           sigma_tau=SIGMA, sigma_v=SIGMA, sigma_q=SIGMA).fit(sim.log)
    tr = truth_arrays(sim.truth, robot)
    p = np.concatenate([tr["inertial"].ravel(), np.c_[tr["fc"], tr["fv"]].ravel(), tr["armature"]])
    th = sm.layout_.to_theta(p)
    T = sim.truth_log
    assert np.allclose(sm.knot_times_, T.t)
    x = (T.q, T.v, sim.truth_acceleration)
    ev = Evaluation(sm.problem_, x, th, False)
    term = sm.problem_.term("energy")
    z = sm.problem_.whitened(term, term.evaluate(ev, False), ev).r.ravel()
    assert z.size == T.t.size - 1
    assert 0.9 < np.sqrt(np.mean(z ** 2)) < 1.1
