"""The O(N) structured solver agrees with a dense solve and with GTSAM's elimination."""

import numpy as np
import pytest

from fg_sysid.estimation.linear_solver import (
    LinearizedGraph,
    SingularSystemError,
    StructuredSolver,
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
