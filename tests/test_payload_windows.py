"""Short LP windows and row generation (issue 16: mass width ≤ 0.4 kg in every trial).

Identities: windows of k·h samples are exactly the sums of k windows of h samples (`coarsened`), so the LP
feasible set of the fine rows is a subset of the coarse one's; row generation returns the full LP's
optimum. Results that could fail: finer windows shrink the mass width by a stated factor on RK4 data with
θ_r drawn in its box (out of the estimator's class), and the truth stays inside under uniform noise and
under noise at the bound with the sign of the LS mass sensitivity.
"""

import numpy as np
import pytest

from fg_sysid.payload import NoiseBounds, PayloadError, PayloadProblem, RobotPrior, compute_bounds
from fg_sysid.payload.bounds import estimate, lp_bounds
from fg_sysid.payload.online import DEFAULT_H, run_online
from fg_sysid.payload.simulate import random_motion, simulate_payload_run, standard_payloads, torque_noise
from fg_sysid.robots import load_robot

RATE = 500.0


@pytest.fixture(scope="module")
def setup():
    robot = load_robot("panda")
    prior = RobotPrior.from_robot(robot, fv=0.1, armature=np.array([0.3, 0.3, 0.3, 0.3, 0.1, 0.1, 0.1]))
    rng = np.random.default_rng(21)
    payload = standard_payloads()[4]  # the heaviest (3.63 kg): width > 0.4 kg with 50-sample windows
    run = simulate_payload_run(robot, prior, payload, random_motion(robot, rng, duration=3.0), duration=3.0,
                               rate=RATE, substeps=2, robot_rel=0.05, rng=rng)
    return robot, prior, run, rng


def _prob(robot, prior, run, tau, h):
    prob = PayloadProblem(robot, prior, NoiseBounds(), h=h)
    prob.add(run.t, run.q, run.v, tau)
    return prob


def test_coarsened_windows_equal_the_long_windows(setup):
    robot, prior, run, rng = setup
    tau = run.tau + torque_noise(run.tau, 0.025, rng=rng)
    fine, coarse = _prob(robot, prior, run, tau, 5), _prob(robot, prior, run, tau, 25)
    merged = fine.coarsened(5)
    assert merged.h == 25 and merged.n_windows == coarse.n_windows
    for name in ("Y", "R", "T", "d"):
        a, b = getattr(merged, name), getattr(coarse, name)
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12 * np.abs(b).max(), err_msg=name)
    te = np.abs(run.theta_e)
    merged.theta_e_abs = coarse.theta_e_abs = te
    # the quadrature margin is a per-interval estimate: the fine windows use one-sided second differences
    # at their inner ends, so the sums differ slightly there (a few %), nowhere else
    np.testing.assert_allclose(merged.quadrature_d(), coarse.quadrature_d(), rtol=0.05)
    with pytest.raises(PayloadError, match="coarsening factor"):
        fine.coarsened(0)


def test_row_generation_equals_the_full_lp(setup):
    robot, prior, run, rng = setup
    tau = run.tau + torque_noise(run.tau, 0.025, rng=rng)
    prob = _prob(robot, prior, run, tau, 10)
    prob.theta_e_abs = 2 * np.abs(estimate(prob)[0])
    lo_f, hi_f, info_f = lp_bounds(prob, method="full")
    lo_r, hi_r, info_r = lp_bounds(prob, method="rows")
    assert info_r["lp_method"] == "rows" and info_f["lp_method"] == "full"
    assert info_r["lp_rows_used"] < 0.5 * info_f["lp_rows_used"]
    w = hi_f - lo_f
    np.testing.assert_allclose(lo_r, lo_f, atol=1e-5 * w.max(), rtol=0)
    np.testing.assert_allclose(hi_r, hi_f, atol=1e-5 * w.max(), rtol=0)
    with pytest.raises(PayloadError, match="unknown LP method"):
        lp_bounds(prob, method="simplex")


def _sign_of_mass_sensitivity(prob, n, nv):
    w2 = 1 / prob.d ** 2
    G = np.linalg.solve((prob.Y * w2[:, None]).T @ prob.Y, (prob.Y * w2[:, None]).T)
    sign = np.zeros((n, nv))
    for k in range(prob.n_windows):
        sign[k * prob.h:(k + 1) * prob.h] = np.sign(G[0, k * nv:(k + 1) * nv])
    return sign


def test_short_windows_shrink_the_lp_set_and_keep_the_truth(setup):
    robot, prior, run, rng = setup
    assert DEFAULT_H["lp"] == 10 and DEFAULT_H["verified"] == 50
    uniform = run.tau + torque_noise(run.tau, 0.025, rng=rng)
    sign = _sign_of_mass_sensitivity(_prob(robot, prior, run, uniform, 50), len(run.t), robot.nv)
    worst = run.tau + torque_noise(run.tau, 0.025, sign=sign)
    for kind, tau in (("uniform", uniform), ("worst-case", worst)):
        long_ = compute_bounds(_prob(robot, prior, run, tau, 50), "lp")[0]
        short = compute_bounds(_prob(robot, prior, run, tau, 10), "lp")[0]
        assert short.contains(run.theta_e).all(), (kind, short.table(run.theta_e))
        assert long_.contains(run.theta_e).all(), kind
        # the fine set is a subset of the coarse one (padding tolerance aside) ...
        tol = 1e-6 * long_.width
        assert np.all(short.lower >= long_.lower - tol) and np.all(short.upper <= long_.upper + tol), kind
        if kind == "uniform":  # ... and much smaller when the noise is not at its bound everywhere
            assert short.width[0] < 0.8 * long_.width[0], (short.width[0], long_.width[0])
    # the online identifier uses the short windows by default
    ident = run_online(robot, prior, NoiseBounds(), run.t, run.q, run.v, uniform, chunk=1.5)
    assert ident.problem.h == 10 and ident.current.contains(run.theta_e).all()
    assert ident.current.info["lp_method"] == "rows"
    assert (ident.history_frame()["update_cpu_s"] > 0).all()
