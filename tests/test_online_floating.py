"""The fixed-lag online estimator on a floating base (`estimation.online_floating`, MuJoCo B1): its window
takes the batch floating-base smoother's Gauss–Newton step, its marginal prior is the exact Schur
complement, its end-of-log θ predicts held-out efforts like the batch fit, bad samples are rejected with a
message, and ``fg-sysid online --robot b1`` runs."""

import copy
import warnings

import numpy as np
import pytest

from fg_sysid.datasets.mujoco_sim import draw_truth, simulate_stance, to_log
from fg_sysid.estimation.floating_smoother import FloatingBaseSmoother, full_configuration
from fg_sysid.estimation.online_floating import FloatingOnlineEstimator
from fg_sysid.floating_validation import floating_heldout_report
from fg_sysid.robots import load_robot

RATE = 500.0  # Hz: log rate of the MuJoCo sims
KNOTS = 100.0  # Hz: knot rate of the tests (stride 5: short, fast tests)
#: warm-up / batch options shared by the online and batch fits (a few iterations: fast tests)
OPTS = dict(contact_radius=0.02, use_forces=False, max_iterations=8, reweight_rounds=0)


def feed(est, log, chunk=5, start=0, stop=None):
    stop = log.n_samples if stop is None else stop
    out = None
    for i in range(start, stop, chunk):
        out = est.update(log.slice(i, min(i + chunk, stop)))
    return out


@pytest.fixture(scope="module", autouse=True)
def one_blas_thread():
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield


@pytest.fixture(scope="module")
def b1():
    return load_robot("b1")


@pytest.fixture(scope="module")
def b1_logs(b1):
    """Training sway (2.4 s, σ = 0.005) and a held-out sway of another amplitude, same drawn truth."""
    drawn = draw_truth(b1, 0)
    common = dict(inertial=drawn["inertial"], friction=(drawn["fc"], drawn["fv"]), armature=drawn["armature"])
    train = simulate_stance(b1, 2.4, RATE, seed=0, noise=0.005, motion="sway", **common)
    held = simulate_stance(b1, 1.5, RATE, seed=1000, noise=0.005, motion="sway", sway_amplitude=0.14, **common)
    return to_log(train), to_log(held)


def dense_schur(G, k):
    A, B, C = G[:k, :k], G[:k, k:], G[k:, k:]
    return C - B.T @ np.linalg.solve(A, B)


def batch_problem(est, log, robot):
    """The batch smoother's term set (`FloatingBaseSmoother._build_problem`) on the window's knots, its
    per-knot arrays built here from the log (not from the online buffers)."""
    c = est._chain
    t = c.t[c.o:c.o + c.n]
    idx = np.searchsorted(log.t, t)
    assert np.array_equal(log.t[idx], t)
    n, nv, iv = idx.size, robot.nv, robot.joint_index_v()
    sm = copy.copy(est.smoother_)
    sm._qm = full_configuration(log, robot)[idx]
    sm._vm = np.zeros((n, nv))
    sm._vm[:, iv] = log.v[idx]
    sm._taum = np.zeros((n, nv))
    sm._taum[:, iv] = log.tau[idx]
    sm._tau_mask = np.ones((n, nv), bool)
    sm._h = np.diff(t)
    flags = np.stack([log.contacts[f][idx] for f in sm.feet_], axis=1)
    sm._flags, sm._cflags, sm._stance_pairs = flags, flags, flags[1:] & flags[:-1]
    sm._gyro, sm._acc, sm._fmeas = log.imu_gyro[idx], log.imu_acc[idx], None
    sm._impulse_slot = np.zeros_like(flags)
    sm._impacts, sm._smooth_interval, sm._force_mask = [], np.ones(n - 1), None
    sm._proj_whitener = None
    return sm._build_problem(sm.noise_)


# ---------------------------------------------------------------------------------------------- exactness
def test_window_without_marginalization_takes_the_batch_gauss_newton_step(b1, b1_logs):
    """Lag longer than the log: at a common linearization point the window's Gauss–Newton step (θ from the
    undamped top iteration, δx by back substitution) equals the batch floating smoother's O(N) step on the
    same knots (contacts, IMU, base pose, constraints as penalties at scale 1)."""
    from fg_sysid.estimation.linear_solver import solve_structured

    log = b1_logs[0]
    est = FloatingOnlineEstimator(b1, lag=10.0, knot_rate=KNOTS, warmup=0.4, smoother_options=OPTS)
    feed(est, log, stop=int(0.7 * RATE))
    c = est._chain
    assert c.marginalized == 0 and c.n > 30
    est.refine(iterations=1)
    c.relinearize(list(range(c.n)))  # every knot at the current (x̂, θ): δx = 0, θ̄_j = θ
    theta0 = c.theta.copy()
    x0 = c.states(slice(0, c.n))
    problem = batch_problem(est, log, b1)
    assert problem.constraints.scale == 1.0 and not problem.constraints.shift
    step = solve_structured(problem.linearize(x0, theta0), 0.0)
    T = c.theta_information()
    nt = c.nt
    p, J = c.pmap(theta0)
    r, Jr = c._theta_rows(theta0)
    H = J.T @ T[:nt, :nt] @ J + Jr.T @ Jr
    dtheta = -np.linalg.solve(H, J.T @ (T[:nt, :nt] @ p + T[:nt, -1]) + Jr.T @ r)
    scale = np.max(np.abs(step.dtheta))
    assert scale > 1e-6  # a real step
    assert np.max(np.abs(dtheta - step.dtheta)) < 1e-6 * max(scale, 1.0), np.max(np.abs(dtheta - step.dtheta))
    c.back_substitute(p=p + J @ dtheta)
    dx = c.dx[c.o:c.o + c.n]
    assert np.max(np.abs(dx - step.dx)) < 1e-6 * max(np.max(np.abs(step.dx)), 1.0)
    # the same cost at the linearization point (every row, including the live contact weights)
    G = c.dense_system()
    z = np.zeros(G.shape[0])
    z[c.n * c.nx:-1], z[-1] = p, 1.0
    assert 0.5 * float(z @ G @ z) + 0.5 * float(r @ r) == pytest.approx(problem.cost(x0, theta0), rel=1e-8)


def test_marginal_prior_is_the_dense_schur_complement(b1, b1_logs):
    est = FloatingOnlineEstimator(b1, lag=0.1, knot_rate=KNOTS, warmup=0.4, smoother_options=OPTS)
    feed(est, b1_logs[0], stop=int(0.7 * RATE))
    c = est._chain
    assert c.marginalized > 0 and c.nx == 3 * b1.nv + 12  # (δq, δv, δa, λ of four feet)
    G = c.dense_system()
    expected = dense_schur(G, c.nx)
    c.marginalize_oldest()
    got = c.dense_system()
    err = np.max(np.abs(got - expected)) / np.max(np.abs(expected))
    assert err < 1e-9, err
    # the cached elimination equals the dense Schur complement over every state of the window
    cached = c.theta_information()
    dense = dense_schur(c.dense_system(), c.n * c.nx)
    assert np.max(np.abs(cached - dense)) / np.max(np.abs(dense)) < 1e-9
