"""The estimation core on a problem small enough to solve by hand: a linear least-squares problem with
one equality constraint, built from terms of every kind; the one solver must reach the KKT solution."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from fg_sysid.estimation import LevenbergMarquardt, Problem, Residual, SolverOptions, Term, theta_dependent
from fg_sysid.factors.manifold import ConfigurationSpace

N = 6


def _space():
    model = pin.Model()
    model.addJoint(0, pin.JointModelPX(), pin.SE3.Identity(), "slider")
    return ConfigurationSpace(model)


def _problem(y, sigma_c=1.0):
    """x_k = (q, v, a) ∈ R³; θ ∈ R¹. Terms: q_k ≈ y_k (knot), v_k ≈ θ (knot-θ), q_{k+1} − q_k − v_k ≈ 0
    (pair), θ ≈ 0 with std 10 (θ prior), a_k ≈ 0 (knot prior) and q_0 = 0 (constraint)."""
    p = Problem(_space(), (("q", 1), ("v", 1), ("a", 1)), 1)

    def enc(ev, jac):
        J = np.zeros((ev.q.shape[0], 1, 3))
        J[:, 0, 0] = 1.0
        return Residual(ev.q - ev.rows(y), J if jac else None)

    @theta_dependent
    def vel(ev, jac):
        n = ev.q.shape[0]
        J = np.zeros((n, 1, 3))
        J[:, 0, 1] = 1.0
        return Residual(ev.v - ev.theta[0], J if jac else None, Jt=-np.ones((n, 1, 1)) if jac else None)

    def step(ev, jac):
        J0 = np.zeros((ev.q.shape[0] - 1, 1, 3))
        J0[:, 0, 0], J0[:, 0, 1] = -1.0, -1.0
        J1 = np.zeros_like(J0)
        J1[:, 0, 0] = 1.0
        return Residual(ev.q[1:] - ev.q[:-1] - ev.v[:-1], J0 if jac else None, J1 if jac else None)

    def acc(ev, jac):
        J = np.zeros((ev.q.shape[0], 1, 3))
        J[:, 0, 2] = 1.0
        return Residual(ev.a, J if jac else None)

    def prior(ev, jac):
        return Residual(ev.theta.copy(), Jt=np.eye(1) if jac else None, w=0.1)

    def anchor(ev, jac):
        J = np.zeros((ev.q.shape[0], 1, 3))
        J[:, 0, 0] = 1.0
        mask = np.zeros((N, 1))
        mask[0] = 1.0
        return Residual(ev.q.copy(), J if jac else None, w=ev.rows(mask))

    for t in (Term("enc", "knot", "measurement", enc), Term("vel", "knot", "measurement", vel),
              Term("step", "pair", "measurement", step), Term("acc", "knot", "prior", acc),
              Term("prior", "theta", "prior", prior),
              Term("anchor", "knot", "constraint", anchor, sigma=sigma_c)):
        p.add(t)
    return p


def _kkt(y):
    """Dense solution of the same least squares with q_0 = 0 exactly (variables q, v, θ; a = 0)."""
    nvar = 2 * N + 1
    rows, rhs = [], []
    for k in range(N):
        e = np.zeros(nvar)
        e[k] = 1.0
        rows.append(e)
        rhs.append(y[k, 0])
        e = np.zeros(nvar)
        e[N + k], e[-1] = 1.0, -1.0
        rows.append(e)
        rhs.append(0.0)
    for k in range(N - 1):
        e = np.zeros(nvar)
        e[k + 1], e[k], e[N + k] = 1.0, -1.0, -1.0
        rows.append(e)
        rhs.append(0.0)
    e = np.zeros(nvar)
    e[-1] = 0.1
    rows.append(e)
    rhs.append(0.0)
    A, b = np.array(rows), np.array(rhs)
    C = np.zeros((1, nvar))
    C[0, 0] = 1.0
    K = np.block([[A.T @ A, C.T], [C, np.zeros((1, 1))]])
    sol = np.linalg.solve(K, np.concatenate([A.T @ b, [0.0]]))
    return sol[:N], sol[N:2 * N], sol[2 * N]  # sol[-1] is the multiplier


@pytest.mark.parametrize("strategy", ["line-search", "trust-region"])
def test_solver_reaches_the_kkt_solution(strategy):
    y = np.linspace(0.3, 1.8, N)[:, None] + 0.05 * np.random.default_rng(0).standard_normal((N, 1))
    p = _problem(y)
    x0 = (np.zeros((N, 1)), np.zeros((N, 1)), np.ones((N, 1)))
    lm = LevenbergMarquardt(SolverOptions(strategy, tol=1e-14, max_iterations=50))
    x, theta, _, _ = lm.run(p, x0, np.zeros(1))
    assert abs(x[0][0, 0]) > 1e-3  # a soft constraint (σ_c = 1) is not met ...
    x, theta, _, viol, rounds = lm.augmented_lagrangian(p, x, theta, rounds=30, constraint_tol=1e-9)
    assert abs(viol["anchor"]).max() <= 1e-9 and rounds >= 1  # ... the augmented Lagrangian meets it
    q, v, th = _kkt(y)
    np.testing.assert_allclose(x[0][:, 0], q, atol=1e-7)
    np.testing.assert_allclose(x[1][:, 0], v, atol=1e-7)
    np.testing.assert_allclose(theta[0], th, atol=1e-7)
    np.testing.assert_allclose(x[2], 0.0, atol=1e-9)


def test_linearize_sorts_terms_by_what_they_touch_and_whitens_by_role():
    y = np.ones((N, 1))
    p = _problem(y, sigma_c=0.5)
    x = (np.full((N, 1), 2.0), np.zeros((N, 1)), np.zeros((N, 1)))
    g = p.linearize(x, np.array([3.0]))
    assert len(g.knot) == 3 and len(g.knot_theta) == 1 and len(g.pair) == 1
    anchor_J, anchor_r = g.knot[2]
    assert anchor_r[0, 0] == pytest.approx(2.0 / 0.5) and np.all(anchor_r[1:] == 0)  # mask and σ_c
    p.constraints.shift["anchor"] = np.full((N, 1), 1.0)
    p.constraints.scale = 0.1
    assert p.linearize(x, np.array([3.0])).knot[2][1][0, 0] == pytest.approx((2.0 + 1.0) / 0.05)
    assert np.allclose(g.prior_r, [0.3]) and np.allclose(g.prior_w, [0.1])
    frozen = p.linearize(x, np.array([3.0]), freeze_theta=True)
    assert np.all(frozen.knot_theta[0][1] == 0) and np.all(frozen.prior_r == 0)
    assert p.violations(x, np.array([3.0])).keys() == {"anchor"}


def test_terms_validate_their_declaration():
    with pytest.raises(ValueError, match="role"):
        Term("t", "knot", "wish", lambda ev, jac: None)
    with pytest.raises(ValueError, match="touches"):
        Term("t", "triple", "prior", lambda ev, jac: None)
    with pytest.raises(ValueError, match="sigma"):
        Term("t", "knot", "constraint", lambda ev, jac: None)
