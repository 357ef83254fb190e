"""The O(N) structured solver agrees with a dense solve and with GTSAM's elimination."""

import numpy as np
import pytest

from fg_sysid.estimation.linear_solver import (
    LinearizedGraph,
    SingularSystemError,
    StructuredSolver,
    default_threads,
    resolve_threads,
    solve_gtsam,
    solve_structured,
)


def random_graph(N=12, nx=6, nt=9, seed=0):
    rng = np.random.default_rng(seed)
    g = LinearizedGraph(N, nx, nt)
    g.knot.append((rng.standard_normal((N, 3, nx)), rng.standard_normal((N, 3))))
    g.knot_theta.append((rng.standard_normal((N, 2, nx)), rng.standard_normal((N, 2, nt)),
                         rng.standard_normal((N, 2))))
    g.pair.append((rng.standard_normal((N - 1, 4, nx)), rng.standard_normal((N - 1, 4, nx)),
                   rng.standard_normal((N - 1, 4))))
    g.prior_w = rng.uniform(0.5, 2.0, nt)
    g.prior_r = rng.standard_normal(nt)
    return g


def dense(g):
    """The same least-squares problem as one dense Jacobian (rows) and residual."""
    N, nx = g.n_knots, g.nx
    n = N * nx + g.ntheta
    rows, res = [], []

    def add(blocks, r):
        M = np.zeros((r.size, n))
        for col, J in blocks:
            M[:, col:col + J.shape[1]] = J
        rows.append(M)
        res.append(r)

    for J, r in g.knot:
        for k in range(N):
            add([(k * nx, J[k])], r[k])
    for Jx, Jt, r in g.knot_theta:
        for k in range(N):
            add([(k * nx, Jx[k]), (N * nx, Jt[k])], r[k])
    for J0, J1, r in g.pair:
        for k in range(N - 1):
            add([(k * nx, J0[k]), ((k + 1) * nx, J1[k])], r[k])
    for k, J0, J1, Jt, r in g.pair_theta:
        add([(k * nx, J0), ((k + 1) * nx, J1), (N * nx, Jt)], r)
    add([(N * nx, np.diag(g.prior_w))], g.prior_r)
    return np.vstack(rows), np.concatenate(res)


@pytest.mark.parametrize("lam", [0.0, 0.3])
def test_structured_matches_dense_and_gtsam(lam):
    g = random_graph()
    J, r = dense(g)
    H = J.T @ J
    H_d = H + lam * np.diag(np.diag(H))
    delta = np.linalg.solve(H_d, -J.T @ r)
    st = solve_structured(g, lam)
    N, nx = g.n_knots, g.nx
    np.testing.assert_allclose(st.dx.ravel(), delta[:N * nx], rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(st.dtheta, delta[N * nx:], rtol=1e-8, atol=1e-10)
    # predicted decrease of the undamped quadratic model
    pred = -(J.T @ r) @ delta - 0.5 * delta @ H @ delta
    assert st.predicted_decrease == pytest.approx(pred, rel=1e-8)
    gt = solve_gtsam(g, lam)
    np.testing.assert_allclose(gt.dx, st.dx, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(gt.dtheta, st.dtheta, rtol=1e-7, atol=1e-9)
    if lam == 0:  # Schur complement inverse = marginal covariance of θ
        cov = np.linalg.inv(H)[N * nx:, N * nx:]
        np.testing.assert_allclose(np.linalg.inv(st.schur), cov, rtol=1e-8, atol=1e-12)
    assert g.cost() == pytest.approx(0.5 * r @ r)


def test_unobservable_knot_is_reported():
    g = random_graph(N=5)
    g.knot.clear()
    g.knot_theta.clear()
    g.pair.clear()
    g.knot.append((np.zeros((5, 1, g.nx)), np.zeros((5, 1))))
    with pytest.raises(SingularSystemError, match="knot 0"):
        solve_structured(g)


@pytest.mark.parametrize("lam", [0.0, 0.2])
def test_further_right_hand_sides_share_the_factorization(lam):
    """`StructuredSolver.solve(rhs=…)`: the solutions for other residuals of the same Jacobian equal
    separate dense solves; `LinearizedGraph.gradient` is Jᵀ r."""
    g = random_graph(N=15, nx=5, nt=7, seed=3)
    J, r = dense(g)
    H = J.T @ J
    H_d = H + lam * np.diag(np.diag(H))
    rng = np.random.default_rng(4)
    others = []
    for _ in range(3):  # the same Jacobians, other residuals
        h = random_graph(N=15, nx=5, nt=7, seed=3)
        h.knot = [(Jk, rng.standard_normal(rk.shape)) for Jk, rk in h.knot]
        h.knot_theta = [(Jx, Jt, rng.standard_normal(rk.shape)) for Jx, Jt, rk in h.knot_theta]
        h.pair = [(J0, J1, rng.standard_normal(rk.shape)) for J0, J1, rk in h.pair]
        h.prior_r = rng.standard_normal(h.prior_r.shape)
        others.append(h)
    gx, gt = g.gradient()
    np.testing.assert_allclose(np.concatenate([gx.ravel(), gt]), J.T @ r, rtol=1e-12, atol=1e-12)
    step = StructuredSolver().solve(g, lam, rhs=[h.gradient() for h in others])
    assert len(step.extra) == 3
    N, nx = g.n_knots, g.nx
    for h, (dx, dth) in zip([g] + others, [(step.dx, step.dtheta)] + step.extra, strict=True):
        Jh, rh = dense(h)
        np.testing.assert_array_equal(Jh, J)
        delta = np.linalg.solve(H_d, -J.T @ rh)
        np.testing.assert_allclose(dx.ravel(), delta[:N * nx], rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(dth, delta[N * nx:], rtol=1e-8, atol=1e-10)


def test_compiled_elimination_matches_blas_loop_on_a_long_chain():
    """The compiled per-knot loops (`block_kernels`) against the LAPACK/BLAS formulation they replaced,
    on a chain long enough for rounding to accumulate (300 knots, 18 states, 40 border columns)."""
    from fg_sysid.estimation.block_kernels import blas_backward, blas_forward, block_backward, block_forward

    N, nx, ncol = 300, 18, 18 + 40 + 1
    rng = np.random.default_rng(5)
    A0 = 0.1 * rng.standard_normal((N, nx, ncol))
    for k in range(N):
        M = rng.standard_normal((nx, nx))
        A0[k, :, :nx] = M @ M.T / nx + 6 * np.eye(nx)
    B0 = 0.1 * rng.standard_normal((N - 1, nx, nx))
    A, B, L = A0.copy(), B0.copy(), np.empty((N, nx, nx))
    assert blas_forward(A, B, L) == -1  # the reference: potrf, trsm, gemm per knot
    A2, B2, L2 = A0.copy(), B0.copy(), np.empty((N, nx, nx))
    assert block_forward(A2, np.empty((N, nx, 0)), B2, L2) == -1
    np.testing.assert_allclose(A2, A, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(L2, L, rtol=1e-10, atol=1e-12)
    c = A[:, :, -1].copy()
    dx_ref = np.empty((N, nx))
    blas_backward(A, L, c, dx_ref)
    dx = np.empty((N, nx))
    block_backward(A2, L2, c, dx)
    np.testing.assert_allclose(dx, dx_ref, rtol=1e-10, atol=1e-12)
    A0[7, 3, 3] = -1.0  # an indefinite block is reported by its knot
    assert block_forward(A0.copy(), np.empty((N, nx, 0)), B0.copy(), np.empty((N, nx, nx))) == 7
    assert blas_forward(A0.copy(), B0.copy(), np.empty((N, nx, nx))) == 7


@pytest.mark.parametrize("N", [40, 41])
@pytest.mark.parametrize("lam", [0.0, 0.3])
def test_two_threads_solve_the_same_system(N, lam, monkeypatch):
    """``StructuredSolver(threads=2)``: the knots eliminated from both ends at once (meeting at the middle
    knot) and the normal equations accumulated in two halves give the dense solution — step, predicted
    decrease, Schur complement, further right-hand sides — with a pair factor on θ across the middle."""
    monkeypatch.setattr(StructuredSolver, "MIN_SPLIT_KNOTS", 2)  # split these short chains
    monkeypatch.setattr(LinearizedGraph, "CHUNK", 4)  # several chunks per half
    g = random_graph(N=N, nx=5, nt=7, seed=8)
    rng = np.random.default_rng(9)
    k = N // 2 - 1  # joins the two halves' knots
    g.pair_theta.append((k, rng.standard_normal((3, 5)), rng.standard_normal((3, 5)),
                         rng.standard_normal((3, 7)), rng.standard_normal(3)))
    J, r = dense(g)
    H = J.T @ J
    H_d = H + lam * np.diag(np.diag(H))
    delta = np.linalg.solve(H_d, -J.T @ r)
    other = random_graph(N=N, nx=5, nt=7, seed=8)
    other.pair_theta = g.pair_theta
    other.knot = [(Jk, rng.standard_normal(rk.shape)) for Jk, rk in other.knot]
    Jo, ro = dense(other)
    np.testing.assert_array_equal(Jo, J)
    delta_o = np.linalg.solve(H_d, -J.T @ ro)
    steps = [StructuredSolver(threads=t).solve(g, lam, rhs=[other.gradient()]) for t in (2, 1)]
    for st in steps:
        np.testing.assert_allclose(st.dx.ravel(), delta[:N * 5], rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(st.dtheta, delta[N * 5:], rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(st.extra[0][0].ravel(), delta_o[:N * 5], rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(st.extra[0][1], delta_o[N * 5:], rtol=1e-8, atol=1e-10)
        pred = -(J.T @ r) @ delta - 0.5 * delta @ H @ delta
        assert st.predicted_decrease == pytest.approx(pred, rel=1e-8)
    np.testing.assert_allclose(steps[0].schur, steps[1].schur, rtol=1e-10)
    # the normal equations' halves, also with a Gram cache being filled and then used
    for cache in (None, {}):
        g.gram_cache = cache
        one = g.normal_equations(threads=1)
        for _ in range(2 if cache is not None else 1):
            two = g.normal_equations(threads=2)
            for a, b in zip(one, two, strict=True):
                np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12)


def test_two_threads_report_the_unobservable_knot(monkeypatch):
    """A knot without factors in the second half (eliminated backward in time) is named."""
    monkeypatch.setattr(StructuredSolver, "MIN_SPLIT_KNOTS", 2)
    g = random_graph(N=30, nx=4, nt=5, seed=2)
    g.pair.clear()
    for J, _ in g.knot:
        J[23] = 0.0
    for Jx, _, _ in g.knot_theta:
        Jx[23] = 0.0
    with pytest.raises(SingularSystemError, match="knot 23"):
        StructuredSolver(threads=2).solve(g)


def test_threads_resolution(monkeypatch):
    """n_jobs: None / −1 = up to 2 cores (1 within `default_threads(1)`, as a study's runs), 1 and 2 as
    given, anything else refused."""
    import os

    from fg_sysid.estimation import linear_solver

    monkeypatch.setattr(linear_solver, "_DEFAULT_THREADS", None)  # as outside the tests' conftest setting

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert resolve_threads(None) == resolve_threads(-1) == min(2, cores)
    assert resolve_threads(1) == 1 and resolve_threads(2) == 2
    with default_threads(1):
        assert resolve_threads(None) == 1
        assert resolve_threads(2) == 2
    assert resolve_threads(None) == min(2, cores)
    with pytest.raises(ValueError, match="n_jobs"):
        resolve_threads(4)
    with pytest.raises(ValueError, match="threads"):
        StructuredSolver(threads=3)
