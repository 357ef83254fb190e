"""The O(N) structured solver agrees with a dense solve and with GTSAM's elimination."""

import numpy as np
import pytest

from fg_sysid.estimation.linear_solver import (
    LinearizedGraph,
    SingularSystemError,
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
