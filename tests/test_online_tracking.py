"""Tracking a changing robot online (issue 13): the CUSUM change detector (`online_change`) fires on a
step change and not on a stationary log, its covariance reset scales exactly the θ information of the
marginal prior, re-anchoring the prior at the oldest knot is an exact change of variables (the window's
marginal prior stays the dense Schur complement), and the top's Levenberg–Marquardt no longer freezes θ
far from its optimum (the poor-warm-up bias)."""

import numpy as np
import pytest
from online_helpers import one_blas_thread, stream  # noqa: F401 (one_blas_thread: autouse fixture)

from fg_sysid.datasets.payload_change import simulate_payload_change
from fg_sysid.datasets.simulate import simulate
from fg_sysid.estimation.online import OnlineEstimator
from fg_sysid.estimation.online_change import CusumDetector
from fg_sysid.robots import load_robot

RATE = 100.0  # Hz: samples and knots (short, fast tests)
FAST = {"relearn": 1.0}  # relearning (refines of the growing window) for 1 s only: short tests


def feed(est, log, chunk=5, start=0, stop=None):
    """The events of every update while ``log[start:stop]`` is fed in chunks."""
    return [e for out in stream(est, log, chunk, start, stop) for e in out.events]


def dense_schur(G, k):
    A, B, C = G[:k, :k], G[:k, k:], G[k:, k:]
    return C - B.T @ np.linalg.solve(A, B)


@pytest.fixture(scope="module")
def z1():
    return load_robot("z1")


# ---------------------------------------------------------------------------------------------- detector
def test_cusum_alarms_on_a_variance_step_only():
    """χ²_6 residual sums: 60 s stationary at 100 Hz → no alarm; the residual std × 3 from t = 30 s → an
    alarm within 0.1 s whose change-time estimate is within 0.1 s of the step."""
    rng = np.random.default_rng(0)
    m, n = 6, 6000
    t = np.arange(n) / RATE
    s = rng.chisquare(m, n) * 0.3  # any reference level: calibrated on the first second
    det = CusumDetector()
    assert det.update(t, s, m) is None
    assert det.alarms == 0 and abs(det.reference - 0.3) < 0.05
    s2 = s.copy()
    s2[3000:] *= 9.0
    det = CusumDetector()
    ev = det.update(t, s2, m)
    assert ev is not None
    assert 30.0 <= ev.t <= 30.1, ev
    assert abs(ev.t_change - 30.0) <= 0.1, ev
    assert ev.ratio > 4.0 and ev.statistic > ev.threshold
    # one outlier knot (y capped) cannot raise an alarm alone
    s3 = s.copy()
    s3[3000] *= 1e6
    assert CusumDetector().update(t, s3, m) is None
    with pytest.raises(ValueError, match="ratio"):
        CusumDetector(ratio=1.0)


@pytest.fixture(scope="module")
def payload_logs(z1):
    """A 6 s Z1 log whose last link picks up 1 kg at t = 4 s, and the same robot without the change."""
    pc = simulate_payload_change(z1, 6.0, RATE, 0.01, 1, change_time=4.0, mass=1.0, offset=(0.05, 0.0, 0.0))
    still = simulate(z1, 6.0, RATE, 0.01, 1)
    return pc, still


def test_detector_fires_after_a_payload_change_and_not_without(z1, payload_logs):
    pc, still = payload_logs
    est = OnlineEstimator(z1, lag=1.0, knot_rate=RATE, warmup=2.0, change_detection=FAST)
    events = feed(est, pc.log)
    assert events, "no change detected after a 1 kg payload change"
    first = events[0]
    assert 4.0 - 0.2 <= first.t <= 4.5, first  # a few knots after the change (the smoothing delay)
    assert 3.7 <= first.t_change <= 4.05, first
    assert first.reset == pytest.approx(0.001) and first.marginalized > 0
    assert est.result().extras["online"]["changes_detected"] == len(events)
    est2 = OnlineEstimator(z1, lag=1.0, knot_rate=RATE, warmup=2.0, change_detection=FAST)
    assert feed(est2, still.log) == [], "false alarm on a log without a change"
    assert est2.detector_.reference is not None  # it was calibrated and watching


def test_detector_off_and_bad_options(z1):
    assert OnlineEstimator(z1, change_detection=False).detector_ is None
    with pytest.raises(ValueError, match="reset"):
        OnlineEstimator(z1, change_detection={"reset": 1.5})
    with pytest.raises(ValueError, match="threshold"):
        OnlineEstimator(z1, change_detection={"threshold": -1})
    with pytest.raises(ValueError, match="reanchor_period"):
        OnlineEstimator(z1, reanchor_period=0.0)


# ---------------------------------------------------------------------------------------------- prior algebra
@pytest.fixture()
def chain(z1):
    sim = simulate(z1, 2.0, RATE, 0.01, 3)
    est = OnlineEstimator(z1, lag=0.3, knot_rate=RATE, warmup=1.0, change_detection=False)
    feed(est, sim.log, stop=160)
    c = est._chain
    assert c.marginalized > 0 and c.frozen_upto >= 0
    return est, c


def prior_block(c):
    """The marginal prior on (δx_0, p, 1) as one dense matrix (its share of `dense_system`)."""
    nx, nt = c.nx, c.nt
    F, T = c.prior()
    G = np.zeros((nx + nt + 1, nx + nt + 1))
    G[:nx] = F
    G[nx:, :nx] = F[:, nx:].T
    G[nx:, nx:] = T
    return G


def test_covariance_reset_scales_the_whole_prior_exactly(chain):
    """`scale_prior(α)`: the prior's information (x rows and θ block, forgetting offset included) is α
    times the old one, the rest of the window is untouched, and the re-eliminated θ information equals
    the dense Schur complement of the new window system (1e-9)."""
    est, c = chain
    nx, nt, n = c.nx, c.nt, c.n
    P0 = prior_block(c)
    G0 = c.dense_system()
    c.scale_prior(0.01)
    P1 = prior_block(c)
    assert np.max(np.abs(P1 - 0.01 * P0)) / np.max(np.abs(P0)) < 1e-12
    G1 = c.dense_system()
    idx = np.r_[0:nx, n * nx:n * nx + nt + 1]  # δx_0, p, 1: where the prior lives
    dG = G0 - G1
    dG[np.ix_(idx, idx)] -= 0.99 * P0
    assert np.max(np.abs(dG)) / np.max(np.abs(G0)) < 1e-12
    info = c.theta_information()
    dense = dense_schur(G1, n * nx)
    assert np.max(np.abs(info - dense)) / np.max(np.abs(dense)) < 1e-9
    with pytest.raises(ValueError):
        c.scale_prior(2.0)


def test_reanchoring_without_a_linearization_change_keeps_the_exact_schur_prior(chain):
    """d = 0 and θ̄ = θ at the oldest knot: re-anchoring is the identity (the window system to 1e-9), and
    the next marginal prior is still the dense Schur complement (1e-9)."""
    est, c = chain
    p = c.o
    c.dx[p] = 0.0
    c.theta = c.thbar[p].copy()
    G0 = c.dense_system()
    d = c.reanchor_prior()
    assert np.all(d == 0)
    G1 = c.dense_system()
    assert np.max(np.abs(G1 - G0)) / np.max(np.abs(G0)) < 1e-9
    expected = dense_schur(G1, c.nx)
    c.marginalize_oldest()
    got = c.dense_system()
    assert np.max(np.abs(got - expected)) / np.max(np.abs(expected)) < 1e-9


def test_reanchoring_is_an_exact_change_of_variables(chain):
    """d ≠ 0: the prior's Gaussian in δx'_0 = δx_0 − d equals the old one at every (x_0, p) (a quadratic
    form check at random points), and the new linearization point is the old estimate."""
    est, c = chain
    nx, nt = c.nx, c.nt
    p = c.o
    rng = np.random.default_rng(1)
    c.dx[p] = rng.normal(scale=1e-3, size=nx)
    d = c.dx[p].copy()
    x_hat = c.estimate(p)

    def prior_value(F, T, dx, pp):
        z = np.concatenate([dx, pp, [1.0]])
        G = np.zeros((nx + nt + 1, nx + nt + 1))
        G[:nx] = F
        G[nx:, :nx] = F[:, nx:].T
        G[nx:, nx:] = T
        return z @ G @ z

    F0, T0 = c.F[p].copy(), c.T[p].copy()
    got_d = c.reanchor_prior()
    assert np.allclose(got_d, d)
    for _ in range(3):
        dxp, pp = rng.normal(size=nx) * 1e-2, rng.normal(size=nt)
        old = prior_value(F0, T0, dxp + d, pp)
        new = prior_value(c.F[p], c.T[p], dxp, pp)
        assert abs(new - old) <= 1e-9 * max(abs(old), 1.0)
    for a, b in zip((c.xq[p], c.xv[p], c.xa[p]), x_hat, strict=True):
        assert np.allclose(a, b)
    assert np.all(c.dx[p] == 0)
    c.solve(max_iterations=5)  # still solvable after relinearizing the oldest knot
    assert np.all(np.isfinite(c.theta))


def test_refine_relinearizes_the_oldest_knot_by_reanchoring(chain):
    est, c = chain
    n0 = est.reanchored_
    est.refine(1)
    assert est.reanchored_ == n0 + 1
    assert np.all(np.isfinite(est.theta_))


# ---------------------------------------------------------------------------------------------- top solve
def test_top_solve_leaves_a_poor_start_and_reaches_the_optimum(chain):
    """θ started far from the window's optimum (every log-mass coordinate +1, ≈ e² × the masses): the
    top's Levenberg–Marquardt with carried damping and step halving reaches the optimum's cost in a few
    updates' worth of iterations (before, 8 fresh damping trials per update all failed and θ stayed)."""
    est, c = chain
    c.solve(max_iterations=200)
    theta_opt = c.theta.copy()
    T = c.theta_information()

    def cost(th):
        p = c.layout.to_physical(th)
        r, _ = c._theta_rows(th, False)
        return 0.5 * float(p @ T[:-1, :-1] @ p + 2 * T[:-1, -1] @ p + T[-1, -1] + r @ r)

    f_opt = cost(theta_opt)
    bad = theta_opt.copy()
    masses = [i for i, n in enumerate(est.layout_.names) if n.endswith(".m")]
    th_idx = [i for i in range(c.nt) if np.any(np.abs(est.layout_.jacobian(theta_opt)[masses, i]) > 1e-9)]
    bad[th_idx] += 0.5
    c.theta = bad.copy()
    c.top_lambda = 0.0
    f_bad = cost(bad)
    for _ in range(30):  # 30 updates of 2 iterations
        c.solve(max_iterations=2)
    f_end = cost(c.theta)
    assert f_bad - f_opt > 1e3  # a real detour
    assert f_end - f_opt < 1e-3 * (f_bad - f_opt), (f_bad, f_end, f_opt)


def test_replay_logs_the_change_with_its_statistic(z1, payload_logs):
    """Through `fg-sysid online`'s engine: the alarm is a ``change`` event row naming the CUSUM statistic,
    counted in the summary; no change row on the log without a change (seen above: no alarm)."""
    from fg_sysid.estimation.online_gate import QualityGate
    from fg_sysid.estimation.online_replay import make_estimator, replay
    from fg_sysid.estimation.online_stream import Stream

    pc, _ = payload_logs
    est = make_estimator("fixed-lag", z1, lag=1.0, knot_rate=RATE, forgetting=None, warmup=2.0)
    est.detector_, est.relearn = OnlineEstimator(z1, change_detection=FAST).detector_, FAST["relearn"]
    gate = QualityGate(z1, "z1", sg_window=0.2)
    res = replay(Stream.from_log(pc.log, z1), est, gate, chunk=5, record_period=0.5)
    rows = res.events[res.events["decision"] == "change"]
    assert len(rows) == res.counts["changes_detected"] >= 1
    assert rows["reason"].str.contains("CUSUM").all()
    assert 3.8 <= float(rows["t"].iloc[0]) <= 4.5
