"""The native fixed-lag online estimator (`estimation.online`): its window equals the batch smoother's
solution, its marginal prior is the exact Schur complement, cached elimination equals a full one, it
predicts held-out efforts as well as the batch smoother (in-class), follows a parameter step with
forgetting, rejects bad samples and keeps its memory bounded."""

import warnings

import numpy as np
import pytest
from online_helpers import feed, one_blas_thread  # noqa: F401 (one_blas_thread: autouse fixture)

from fg_sysid.datasets.simulate import simulate
from fg_sysid.estimation.online import OnlineEstimator
from fg_sysid.estimation.smoother import EstimationError, JointSmoother
from fg_sysid.factors.inverse_dynamics import InverseDynamicsResidual
from fg_sysid.prediction import heldout_report
from fg_sysid.robots import load_robot

RATE = 100.0  # Hz: samples and knots (short, fast tests)


@pytest.fixture(scope="module")
def z1():
    return load_robot("z1")


@pytest.fixture(scope="module")
def z1_logs(z1):
    train = simulate(z1, 6.0, RATE, 0.01, 0)
    held = simulate(z1, 3.0, RATE, 0.0, 1, truth=train.truth)
    return train, held


@pytest.fixture(scope="module")
def z1_online(z1, z1_logs):
    """1 s lag over a 6 s in-class log (2 s warm-up)."""
    est = OnlineEstimator(z1, lag=1.0, knot_rate=RATE, warmup=2.0)
    feed(est, z1_logs[0].log)
    return est


@pytest.fixture(scope="module")
def z1_batch(z1, z1_logs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return JointSmoother(z1).fit(z1_logs[0].log)


def dense_schur(G, k):
    """Schur complement of the symmetric G over its first k rows/columns."""
    A, B, C = G[:k, :k], G[:k, k:], G[k:, k:]
    return C - B.T @ np.linalg.solve(A, B)


# ---------------------------------------------------------------------------------------------- exactness
def test_window_without_marginalization_takes_the_batch_gauss_newton_step(z1):
    """Lag longer than the log: after relinearizing every knot at the online estimate, the window's
    Gauss–Newton step (θ from the first top iteration, δx by back substitution with p linearized) equals
    the batch smoother's O(N) step on the same knots, noise levels and linearization point."""
    from fg_sysid.estimation.linear_solver import solve_structured

    sim = simulate(z1, 2.0, RATE, 0.01, 3)
    est = OnlineEstimator(z1, lag=10.0, knot_rate=RATE, warmup=1.0)
    feed(est, sim.log)
    c = est._chain
    assert c.marginalized == 0 and c.n == sim.log.n_samples
    est.refine(iterations=1)
    c.relinearize(list(range(c.n)))  # every knot at the current (x̂, θ): δx = 0, θ̄_j = θ
    theta0 = c.theta.copy()
    x0 = c.states(slice(0, c.n))
    noise = est.smoother_.noise_
    h = float(np.median(np.diff(sim.log.t)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sm = JointSmoother(z1, sigma_q=noise.q, sigma_v=noise.v, sigma_tau=noise.tau,
                           sigma_process=noise.process_v / h, reweight_rounds=0,
                           max_iterations=1).fit(sim.log)
    step = solve_structured(sm.problem_.linearize(x0, theta0), 0.0)
    # the window's first top iteration (Gauss–Newton on θ, undamped) and its back substitution
    T = c.theta_information()
    nt = c.nt
    p, J = c.pmap(theta0)
    r, Jr = c._theta_rows(theta0)
    H = J.T @ T[:nt, :nt] @ J + Jr.T @ Jr
    dtheta = -np.linalg.solve(H, J.T @ (T[:nt, :nt] @ p + T[:nt, -1]) + Jr.T @ r)
    scale = np.max(np.abs(step.dtheta))
    assert scale > 1e-6  # a real step, not a converged point
    assert np.max(np.abs(dtheta - step.dtheta)) < 1e-7 * max(scale, 1.0), np.max(np.abs(dtheta - step.dtheta))
    c.back_substitute(p=p + J @ dtheta)
    dx = c.dx[c.o:c.o + c.n]
    assert np.max(np.abs(dx - step.dx)) < 1e-7 * max(np.max(np.abs(step.dx)), 1.0)
    # and the θ covariance equals the batch's inverse Schur complement at that point
    cov_b = np.linalg.inv(step.schur)
    d = np.sqrt(np.diag(cov_b))
    assert np.max(np.abs(np.linalg.inv(H) - cov_b) / np.outer(d, d)) < 1e-6


def test_marginal_prior_is_the_dense_schur_complement(z1, z1_logs):
    est = OnlineEstimator(z1, lag=0.3, knot_rate=RATE, warmup=1.0)
    feed(est, z1_logs[0].log, stop=160)
    c = est._chain
    assert c.marginalized > 0  # the window already carries a marginal prior
    G = c.dense_system()
    expected = dense_schur(G, c.nx)  # over δx_0
    c.marginalize_oldest()
    got = c.dense_system()
    assert got.shape == expected.shape
    err = np.max(np.abs(got - expected)) / np.max(np.abs(expected))
    assert err < 1e-9, err


def test_cached_elimination_equals_full_and_dense(z1, z1_online):
    c = z1_online._chain
    cached = c.theta_information().copy()
    # dense: Schur complement of the whole window system over every δx
    dense = dense_schur(c.dense_system(), c.n * c.nx)
    assert np.max(np.abs(cached - dense)) / np.max(np.abs(dense)) < 1e-9
    # full re-elimination from the prior
    c.restart = 0
    c.Tvalid[c.o + 1:] = False
    full = c.theta_information()
    assert np.max(np.abs(cached - full)) / np.max(np.abs(full)) < 1e-9
    # back substitution solves the dense system
    c.solve(max_iterations=0)
    G = c.dense_system()
    N = c.n * c.nx
    p1 = np.append(c.pmap(c.theta)[0], 1.0)
    dx = -np.linalg.solve(G[:N, :N], G[:N, N:] @ p1)
    assert np.allclose(c.dx[c.o:c.o + c.n].ravel(), dx, rtol=1e-6, atol=1e-9)


# ---------------------------------------------------------------------------------------------- accuracy
def test_online_heldout_error_within_batch(z1, z1_logs, z1_online, z1_batch):
    train, held = z1_logs
    sm = z1_batch
    batch = heldout_report(sm.result_, z1, held.log)["overall"]
    res = z1_online.result()
    online = heldout_report(res, z1, held.log)["overall"]
    # the model.json writer takes the online result like the batch's
    from fg_sysid.validation import model_spec, predict_efforts

    spec = model_spec(res, z1, "z1")
    assert spec["method"] == "online"
    t = held.truth_log
    assert np.allclose(predict_efforts(spec, z1, t.q, t.v, held.truth_acceleration),
                       predict_efforts(res, z1, t.q, t.v, held.truth_acceleration))
    warm = heldout_report(z1_online.smoother_.result_, z1, held.log)["overall"]
    # in-class (the simulator's model class); measured: online ≈ 0.95–1.05 × batch, warm-up alone ≈ 3×
    assert online <= 1.2 * batch, (online, batch)
    assert online < 0.7 * warm, (online, warm)


def _nees(res, truth, k=None):
    """NEES of the physical estimate (tanh widths left out: the truth has none) against the truth, in
    the ``k`` best-determined directions of its covariance (all when None)."""
    layout = res.layout
    keep = np.array([not n.endswith(".vs") for n in layout.names])
    p_true = np.array([truth["parameters"][n] for n, kp in zip(layout.names, keep, strict=True) if kp])
    J = layout.jacobian(res.theta)[keep]
    w, V = np.linalg.eigh(J @ res.theta_cov @ J.T)
    k = len(w) if k is None else k
    z = (V[:, :k].T @ (res.estimate[keep] - p_true)) / np.sqrt(w[:k])
    return float(z @ z)


def test_theta_covariance_matches_the_batch_calibration(z1, z1_logs, z1_online, z1_batch):
    """In-class log: the online θ covariance is as consistent with the actual error as the batch smoother's
    on the same log. (Both are overconfident here — NEES ≈ 30–50 × its degrees of freedom in the 20
    best-determined directions, measured; the online one within 0.5–2 × the batch's.)"""
    truth = z1_logs[0].truth
    online, batch = z1_online.result(), z1_batch.result_
    for k in (None, 20):
        ratio = _nees(online, truth, k) / _nees(batch, truth, k)
        assert 0.5 < ratio < 2.0, (k, ratio)
    # and the posterior stds of the identified parameters agree with the batch's within a factor 2
    ident = batch.std_ratio < 0.2
    r = online.std[ident] / batch.std[ident]
    assert ident.sum() > 10 and 0.5 < np.median(r) < 2.0, np.median(r)


# ---------------------------------------------------------------------------------------------- forgetting
def _payload_log(z1, layout, sim, t_change, dm):
    """Efforts of ``sim`` with ``dm`` kg added at the last body's frame origin from ``t_change`` on (a
    payload change: Δτ = Y(q, v, a) Δπ, exact in the regressor)."""
    idr = InverseDynamicsResidual(layout)
    p0 = layout.nominal_physical()
    p1 = p0.copy()
    p1[layout.names.index(f"{z1.body_names[-1]}.m")] += dm
    t = sim.truth_log
    dtau = (idr.predict(t.q, t.v, sim.truth_acceleration, layout.to_theta(p1))
            - idr.predict(t.q, t.v, sim.truth_acceleration, layout.to_theta(p0)))
    tau = np.array(sim.log.tau, float)
    after = sim.log.t >= t_change
    tau[after] += dtau[after]
    from fg_sysid.datasets.log import Log

    return Log(sim.log.t, sim.log.q, sim.log.v, tau, sim.log.joint_names, source="payload change")


def test_forgetting_follows_a_payload_step(z1):
    from fg_sysid.layout import ParameterLayout

    sim = simulate(z1, 6.0, RATE, 0.005, 4)
    layout = ParameterLayout.create(z1, "log-cholesky", "coulomb-viscous-scale", 0.05)
    m_idx = layout.names.index(f"{z1.body_names[-1]}.m")
    log = _payload_log(z1, layout, sim, 3.0, 1.0)
    masses = {}
    for forgetting in (None, 0.5):
        # forgetting alone: the change detector (tests/test_online_tracking.py) off
        est = OnlineEstimator(z1, lag=0.5, knot_rate=RATE, warmup=2.0, forgetting=forgetting,
                              change_detection=False)
        feed(est, log, stop=int(2.9 * RATE))
        before = est.result().estimate[m_idx]
        feed(est, log, start=int(2.9 * RATE))
        masses[forgetting] = (before, est.result().estimate[m_idx])
    b0, a0 = masses[None]
    b1, a1 = masses[0.5]
    # with forgetting the estimate follows most of the +1 kg step; without, much less of it
    assert a1 - b1 > 0.6, masses
    assert (a1 - b1) > 1.5 * (a0 - b0), masses


# ---------------------------------------------------------------------------------------------- bad streams
def test_bad_samples_are_rejected_and_the_run_continues(z1, z1_logs):
    log = z1_logs[0].log
    est = OnlineEstimator(z1, lag=0.5, knot_rate=RATE, warmup=1.0)
    out = est.update(log.slice(0, 5))
    assert not out.ready and out.theta is None and out.states["t"].size == 0  # warm-up
    with pytest.raises(EstimationError, match="warm-up"):
        est.result()
    feed(est, log, start=5, stop=150)
    theta_before = est.theta_.copy()
    t_last = float(log.t[149])
    j0 = z1.joint_names[0]
    bad_q = log.slice(150, 151)
    q = np.array(bad_q.q)
    q[0, 0] = np.nan
    out = est.update({"t": bad_q.t, "q": q, "v": bad_q.v, "tau": bad_q.tau})
    assert out.rejected == [f"sample at t={log.t[150]:.6f} s rejected: NaN/inf in q[{j0}]"]
    assert np.array_equal(out.theta, theta_before)  # nothing published is lost
    # repeated and out-of-order times
    s = log.slice(149, 150)
    out = est.update({"t": s.t, "q": s.q, "v": s.v, "tau": s.tau})
    assert len(out.rejected) == 1 and "repeated" in out.rejected[0] and f"t={t_last:.6f}" in out.rejected[0]
    s = log.slice(100, 101)
    out = est.update({"t": s.t, "q": s.q, "v": s.v, "tau": s.tau})
    assert "out of order" in out.rejected[0]
    # NaN effort in a measured column inside a good chunk: only that sample goes
    s = log.slice(150, 160)
    tau = np.array(s.tau)
    tau[3, 2] = np.nan
    out = est.update({"t": s.t, "q": s.q, "v": s.v, "tau": tau})
    assert out.rejected == [f"sample at t={s.t[3]:.6f} s rejected: NaN/inf in tau[{z1.joint_names[2]}]"]
    assert out.states["t"].size == 9 and np.all(np.isfinite(out.theta))
    # a gap restarts the chain with the θ marginal; the run goes on
    out = est.update(log.slice(250, 255))
    assert any("gap" in m and "restarts" in m for m in out.rejected)
    out = feed(est, log, start=255, stop=350)
    assert out.ready and np.all(np.isfinite(out.theta)) and out.t == pytest.approx(log.t[349])
    with pytest.raises(ValueError, match="columns"):
        est.update({"t": [99.0], "q": np.zeros((1, 3)), "tau": np.zeros((1, 3))})


def test_memory_is_bounded_and_floating_base_is_refused(z1, z1_logs):
    log = z1_logs[0].log
    # without the change detector: its relearning span (4 s) would size the buffers beyond this log
    est = OnlineEstimator(z1, lag=0.2, knot_rate=RATE, warmup=1.0, change_detection=False)
    feed(est, log, stop=200)
    c = est._chain
    shapes = {k: v.shape for k, v in vars(c).items() if isinstance(v, np.ndarray)}
    feed(est, log, start=200)
    assert {k: v.shape for k, v in vars(c).items() if isinstance(v, np.ndarray)} == shapes
    assert c.cap < 200 and c.n <= int(0.2 * RATE) + 2  # 400 knots streamed through a smaller buffer
    assert est._qm.shape[0] == c.cap
    table = est.stats_.table()
    assert len(table) == len(est.stats_.latency) and table["knots_in_window"].max() <= int(0.2 * RATE) + 2
    with pytest.raises(EstimationError, match="floating base"):
        OnlineEstimator(load_robot("b1"))
