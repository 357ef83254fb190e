"""Momentum regressors and the windowed momentum-balance residual (paper 002 eqs. 7–13)."""

import numpy as np
import pinocchio as pin
import pytest
from jacobian_check import central_diff

from fg_sysid.factors.momentum import (
    momentum_regressors,
    momentum_regressors_batch,
    momentum_window_residual,
    quadrature_weights,
    window_balance,
    window_bounds,
)
from fg_sysid.payload.bounds import logcholesky_hessian_contraction
from fg_sysid.robots import load_robot


@pytest.fixture(scope="module")
def panda():
    robot = load_robot("panda")
    model = robot.model.copy()
    model.armature = np.zeros(model.nv)
    return robot, model, model.createData()


def _mass_matrix(model, data, q):
    H = pin.crba(model, data, q)
    return np.triu(H) + np.triu(H, 1).T


def test_momentum_regressor_identities(panda):
    """W_m π = H(q)v (CRBA) and W_c π = C(q,v)ᵀv − g(q) (Pinocchio's Coriolis matrix), random states and π."""
    robot, model, data = panda
    rng = np.random.default_rng(0)
    for _ in range(5):
        q, v = rng.uniform(-1.5, 1.5, 7), rng.uniform(-2, 2, 7)
        pi = robot.nominal_inertial_parameters() * rng.uniform(0.7, 1.3, (7, 1))
        m = robot.pinocchio_model_with(pi)
        m.armature = np.zeros(7)
        d = m.createData()
        Wm, Wc = momentum_regressors(model, data, q, v)
        H = _mass_matrix(m, d, q)
        C = pin.computeCoriolisMatrix(m, d, q, v)
        g = pin.computeGeneralizedGravity(m, d, q)
        np.testing.assert_allclose(Wm @ pi.ravel(), H @ v, atol=1e-12)
        np.testing.assert_allclose(Wc @ pi.ravel(), C.T @ v - g, atol=1e-11)
        assert np.abs(C.T @ v).max() > 0.1  # the Coriolis part is exercised, not only gravity


def test_momentum_rate_matches_finite_difference(panda):
    """dp/dt by central differences along q(t), v(t) = W_c π + τ − τ_f − Ia∘a (τ: RNEA + Ia∘a + τ_f)."""
    robot, model, data = panda
    rng = np.random.default_rng(1)
    pi = robot.nominal_inertial_parameters().ravel()
    Ia = rng.uniform(0.05, 0.3, 7)
    fc, fv = rng.uniform(0.1, 1, 7), rng.uniform(0.05, 0.2, 7)
    m = robot.pinocchio_model_with(pi.reshape(7, 10))
    m.armature = np.zeros(7)
    d = m.createData()
    q, v, a = rng.uniform(-1, 1, 7), rng.uniform(-1.5, 1.5, 7), rng.uniform(-3, 3, 7)
    tau = pin.rnea(m, d, q, v, a) + Ia * a + fc * np.sign(v) + fv * v

    def p_total(s):  # p = (H + Ia) v along the motion q(t+s), v(t+s)
        qs, vs = q + s * v + 0.5 * s * s * a, v + s * a
        return _mass_matrix(m, d, qs) @ vs + Ia * vs

    eps = 1e-5
    pdot = (p_total(eps) - p_total(-eps)) / (2 * eps)
    _, Wc = momentum_regressors(model, data, q, v)
    # momentum with the rotors, (H + Ia)v: its rate is Wc π − τ_f + τ (the Ia∘a of eq. 12 moved into p)
    np.testing.assert_allclose(pdot, Wc @ pi - fc * np.sign(v) - fv * v + tau, atol=1e-6)

    # and the rigid part alone: d/dt(Hv) = Wc π + τ − τ_f − Ia∘a  (paper 002 eqs. 8, 12)
    def p_rigid(s):
        qs, vs = q + s * v + 0.5 * s * s * a, v + s * a
        return _mass_matrix(m, d, qs) @ vs
    pdot_r = (p_rigid(eps) - p_rigid(-eps)) / (2 * eps)
    np.testing.assert_allclose(pdot_r, Wc @ pi + tau - fc * np.sign(v) - fv * v - Ia * a, atol=1e-6)


def test_quadrature_weights_nonuniform():
    t = np.cumsum(np.r_[0.0, np.random.default_rng(2).uniform(0.5e-3, 1.5e-3, 40)])
    f = 1 + 2 * t + 3 * t**2
    exact = (t[-1] - t[0]) + (t[-1] ** 2 - t[0] ** 2) + (t[-1] ** 3 - t[0] ** 3)
    np.testing.assert_allclose(quadrature_weights(t, "trapezoid") @ f, exact, rtol=1e-5)
    # left rectangle is exact for a zero-order-hold signal
    np.testing.assert_allclose(quadrature_weights(t, "euler") @ f, np.sum(f[:-1] * np.diff(t)), rtol=1e-14)
    with pytest.raises(ValueError, match="quadrature rule"):
        quadrature_weights(t, "simpson")
    np.testing.assert_array_equal(window_bounds(11, 5), [[0, 5], [5, 10]])


def _window_data(robot, model, rng, h=12):
    t = np.cumsum(np.r_[0.0, rng.uniform(0.8e-3, 1.2e-3, h)])  # non-uniform time stamps
    q = rng.uniform(-1, 1, 7) + np.outer(t, rng.uniform(-1, 1, 7))
    v = rng.uniform(0.2, 1.0, (h + 1, 7)) * rng.choice([-1, 1], 7)  # away from 0: sign(v) is smooth
    tau = rng.uniform(-5, 5, (h + 1, 7))
    return t, q, v, tau


@pytest.mark.parametrize("rule", ["euler", "trapezoid"])
def test_window_residual_jacobians(panda, rule):
    """Analytic Jacobians of the windowed balance against central differences (π, Ia, fc, fv, τ, v, q_end)."""
    robot, model, data = panda
    rng = np.random.default_rng(3)
    t, q, v, tau = _window_data(robot, model, rng)
    pi = robot.nominal_inertial_parameters().ravel()
    Ia, fc, fv = rng.uniform(0.05, 0.3, 7), rng.uniform(0.1, 1, 7), rng.uniform(0.05, 0.2, 7)

    def res(**kw):
        args = {"t": t, "q": q, "v": v, "tau": tau, "pi": pi, "armature": Ia, "fc": fc, "fv": fv} | kw
        return momentum_window_residual(model, data, rule=rule, jacobians=False, **args)[0]

    r, J = momentum_window_residual(model, data, t, q, v, tau, pi, Ia, fc, fv, rule=rule)
    np.testing.assert_allclose(r, res())
    for name, x in (("pi", pi), ("armature", Ia), ("fc", fc), ("fv", fv)):
        num = central_diff(lambda z, name=name: res(**{name: z}), x)
        np.testing.assert_allclose(J[name], num, atol=1e-6, err_msg=name)
    num = central_diff(lambda z: res(tau=z.reshape(tau.shape)), tau.ravel()).reshape(7, *tau.shape)
    np.testing.assert_allclose(J["tau"], num, atol=1e-8)
    num = central_diff(lambda z: res(v=z.reshape(v.shape)), v.ravel()).reshape(7, *v.shape)
    np.testing.assert_allclose(J["v"], num, atol=1e-5)
    if rule == "euler":  # the integrand has zero weight at the end sample: ∂r/∂q_end = ∂p_end/∂q exactly
        def at_end(z):
            qq = q.copy()
            qq[-1] = z
            return res(q=qq)
        np.testing.assert_allclose(J["q_end_momentum"], central_diff(at_end, q[-1]), atol=1e-6)


def test_window_balance_matches_residual(panda):
    """`window_balance` stacks the same balance as `momentum_window_residual` (A π + … − T = r)."""
    robot, model, data = panda
    rng = np.random.default_rng(4)
    t, q, v, tau = _window_data(robot, model, rng, h=20)
    pi = robot.nominal_inertial_parameters().ravel()
    Ia, fc, fv = rng.uniform(0.05, 0.3, 7), rng.uniform(0.1, 1, 7), rng.uniform(0.05, 0.2, 7)
    wb = window_balance(t, q, v, tau, model, h=10)
    assert wb.A.shape == (2, 7, 70)
    for k, (s, e) in enumerate(wb.win):
        sl = slice(s, e + 1)
        r, _ = momentum_window_residual(model, data, t[sl], q[sl], v[sl], tau[sl], pi, Ia, fc, fv,
                                        jacobians=False)
        np.testing.assert_allclose(wb.A[k] @ pi + Ia * wb.dv[k] + fc * wb.Fc[k] + fv * wb.Fv[k] - wb.T[k], r,
                                   atol=1e-10)
    Wm, Wc = momentum_regressors_batch(model, q, v)
    assert Wm.shape == (21, 7, 70)


def test_balance_holds_on_simulated_motion(panda):
    """On a finely integrated closed-loop run the windowed balance holds to a small fraction of ∫τ dt."""
    from fg_sysid.payload.problem import RobotPrior
    from fg_sysid.payload.simulate import random_motion, simulate_payload_run

    robot, model, data = panda
    prior = RobotPrior.from_robot(robot, fv=0.1, armature=0.2)
    rng = np.random.default_rng(5)
    run = simulate_payload_run(robot, prior, None, random_motion(robot, rng, duration=1.0), duration=0.4,
                               rate=1000, substeps=4, rng=rng)
    wb = window_balance(run.t, run.q, run.v, run.tau, model, h=50, rule="trapezoid", tau_rule="euler")
    pred = (np.einsum("kab,b->ka", wb.A, run.pi.ravel()) + run.armature * wb.dv + run.fc * wb.Fc
            + run.fv * wb.Fv)
    err = np.abs(pred - wb.T).max()
    assert err < 1e-3 * np.abs(wb.T).max(), err
    # Coulomb friction in the simulator is tanh-smoothed; the model's sign(v) is the limit: fc is small here
    assert np.abs(wb.T).max() > 0.1


def test_logcholesky_hessian_contraction():
    """Σ g_i ∇²P_i(η) (paper 002 eq. 43 residual term) against central differences of Pinocchio's Jacobian."""
    rng = np.random.default_rng(6)
    for _ in range(3):
        eta = rng.normal(0, 0.5, 10)
        g = rng.normal(0, 1, 10)
        num = central_diff(lambda e, g=g: g @ pin.LogCholeskyParameters(e).calculateJacobian(), eta)
        np.testing.assert_allclose(logcholesky_hessian_contraction(eta, g), num, atol=1e-6)
