"""Work–energy residual (paper 004 eq. 63): identity on simulated motion, Jacobians vs central differences."""

import numpy as np
import pinocchio as pin
import pytest
from jacobian_check import central_diff

from fg_sysid.factors.energy import (
    EnergyResidual,
    input_work,
    input_work_std,
    interval_windows,
    stance_constant_windows,
)
from fg_sysid.layout import ParameterLayout
from fg_sysid.robots import load_robot


def _simulate(robot, layout, p, T=0.4, rate=1000.0, sub=10, seed=0):
    """Fine RK4 (``sub`` steps per sample, on the manifold) of (M + diag(arm)) a + h + τ_f = τ(t) with
    smooth efforts τ(t); the true model carries ``p``. Returns t, q, v, τ at the samples."""
    rng = np.random.default_rng(seed)
    m = robot.model.copy()
    inertial, fr, arm = layout.split(p)
    robot.write_inertias(m, inertial)
    m.armature = np.zeros(m.nv)
    iv = robot.joint_index_v()
    m.armature[iv] = arm
    d = m.createData()
    vs = layout.friction.velocity_scale
    amp = rng.uniform(0.5, 2.0, robot.n_joints) * np.maximum(np.abs(
        pin.computeGeneralizedGravity(m, d, pin.neutral(m))[iv]), 1.0)
    w = rng.uniform(3.0, 9.0, robot.n_joints)
    ph = rng.uniform(0, 2 * np.pi, robot.n_joints)
    g0 = pin.computeGeneralizedGravity(m, d, pin.neutral(m))[iv]

    def tau_of(t):
        return g0 + amp * np.sin(w * t + ph)

    def acc(q, v, t):
        full = np.zeros(m.nv)
        vj = v[iv]
        full[iv] = tau_of(t) - (fr[:, 0] * np.tanh(vj / vs) + fr[:, 1] * vj)
        return pin.aba(m, d, q, v, full).copy()

    n = int(round(T * rate)) + 1
    h = 1.0 / rate / sub
    q = pin.neutral(m)
    if robot.floating_base:
        q[:3] = (0.0, 0.0, 1.0)
    v = np.zeros(m.nv)
    v[iv] = 0.3 * rng.standard_normal(robot.n_joints)
    Q, V, TAU = np.empty((n, m.nq)), np.empty((n, m.nv)), np.empty((n, robot.n_joints))
    t = 0.0
    for k in range(n):
        Q[k], V[k], TAU[k] = q, v, tau_of(t)
        for _ in range(sub):
            k1v, k1q = acc(q, v, t), v
            k2q = v + 0.5 * h * k1v
            k2v = acc(pin.integrate(m, q, 0.5 * h * k1q), k2q, t + 0.5 * h)
            k3q = v + 0.5 * h * k2v
            k3v = acc(pin.integrate(m, q, 0.5 * h * k2q), k3q, t + 0.5 * h)
            k4q = v + h * k3v
            k4v = acc(pin.integrate(m, q, h * k3q), k4q, t + h)
            q = pin.integrate(m, q, h / 6 * (k1q + 2 * k2q + 2 * k3q + k4q))
            v = v + h / 6 * (k1v + 2 * k2v + 2 * k3v + k4v)
            t += h
    return np.arange(n) / rate, Q, V, TAU


def _true_physical(layout, rng):
    p = layout.nominal_physical()
    _, fr, arm = layout.split(p)
    nb = 10 * layout.nb
    p[nb:nb + 2 * layout.nj:2] = rng.uniform(0.2, 1.0, layout.nj)   # fc [N·m]
    p[nb + 1:nb + 2 * layout.nj:2] = rng.uniform(0.1, 0.5, layout.nj)  # fv [N·m·s/rad]
    p[layout.s_armature] = rng.uniform(0.01, 0.05, layout.nj)
    return p


@pytest.mark.parametrize("name", ["double_pendulum", "z1", "b1"])
def test_energy_change_equals_work_minus_dissipation(name):
    """Identity oracle: with the true parameters the residual vanishes (to the quadrature error), and a
    wrong friction or mass leaves a residual orders of magnitude larger."""
    robot = load_robot(name)
    layout = ParameterLayout.create(robot, "exponential-eigenvalue")
    p = _true_physical(layout, np.random.default_rng(1))
    t, q, v, tau = _simulate(robot, layout, p, T=0.3 if name == "b1" else 0.4, sub=5 if name == "b1" else 10)
    iv = robot.joint_index_v()
    L = 50
    starts = interval_windows(t.size, L)
    # tau_of(t) varies continuously between samples: the trapezoid rule, not the (default) held effort
    W = input_work(t, v[:, iv], tau, t[starts], t[starts + L], quadrature="trapezoid")
    res = EnergyResidual(layout)
    theta = layout.to_theta(p)
    r = res.evaluate(q, v, t, theta, W, starts, L, jacobians=False).r
    scale = np.abs(W).max()
    assert scale > 0.01  # J: the motion does real work
    # trapezoid error of the friction power where v crosses zero (tanh width 0.05 rad/s) dominates
    assert np.abs(r).max() < 5e-4 * scale, (np.abs(r).max(), scale)
    # friction doubled: the dissipation is wrong by W_f, far above the quadrature error
    p_bad = p.copy()
    p_bad[layout.s_friction] *= 2.0
    r_bad = res.evaluate(q, v, t, layout.to_theta(p_bad), W, starts, L, jacobians=False).r
    assert np.abs(r_bad).max() > 100 * np.abs(r).max()
    # every body 20 % heavier: the kinetic and potential energy changes are wrong
    p_m = p.copy()
    p_m[layout.s_inertial] *= 1.2
    r_m = res.evaluate(q, v, t, layout.to_theta(p_m), W, starts, L, jacobians=False).r
    assert np.abs(r_m).max() > 100 * np.abs(r).max()


@pytest.mark.parametrize("name", ["z1", "panda", "b1"])
def test_energy_jacobians_central_differences(name):
    robot = load_robot(name)
    layout = ParameterLayout.create(robot, "exponential-eigenvalue")
    rng = np.random.default_rng(3)
    th0, std = layout.prior()
    theta = th0 + 0.2 * std * rng.standard_normal(layout.n)
    m = robot.model
    N, L = 6, 2
    q = np.array([pin.integrate(m, pin.neutral(m), 0.5 * rng.standard_normal(m.nv)) for _ in range(N)])
    v = rng.standard_normal((N, m.nv))
    t = np.cumsum(rng.uniform(0.005, 0.02, N))
    starts = np.array([0, 1, 3])
    work = rng.standard_normal(3)
    res = EnergyResidual(layout)
    lin = res.evaluate(q, v, t, theta, work, starts, L)

    def r_of(qq=q, vv=v, th=theta):
        return res.evaluate(qq, vv, t, th, work, starts, L, jacobians=False).r

    num = central_diff(lambda x: r_of(th=x), theta)
    assert np.allclose(lin.Jtheta, num, rtol=1e-5, atol=1e-6 * np.abs(num).max())
    for k in range(N):
        def fq(dq, k=k):
            qq = q.copy()
            qq[k] = pin.integrate(m, q[k], dq)
            return r_of(qq=qq)

        def fv(dv, k=k):
            vv = v.copy()
            vv[k] = v[k] + dv
            return r_of(vv=vv)

        nq_ = central_diff(fq, np.zeros(m.nv))
        nv_ = central_diff(fv, np.zeros(m.nv))
        aq = np.zeros((starts.size, m.nv))
        av = np.zeros((starts.size, m.nv))
        for w, s in enumerate(starts):
            if k == s:
                aq[w] += lin.Jq_a[w]
            if k == s + L:
                aq[w] += lin.Jq_b[w]
            if s <= k <= s + L:
                av[w] += lin.Jv[w, k - s]
        tol = 1e-6 * max(np.abs(nq_).max(), 1.0)
        assert np.allclose(aq, nq_, atol=tol), (k, np.abs(aq - nq_).max())
        assert np.allclose(av, nv_, atol=tol), (k, np.abs(av - nv_).max())


def test_regressor_rows_match_residual():
    """A · p (linear rows of the baseline) equals E(x_b) − E(x_a) + W_f of the residual."""
    robot = load_robot("z1")
    layout = ParameterLayout.create(robot, "exponential-eigenvalue")
    rng = np.random.default_rng(4)
    p = _true_physical(layout, rng)
    q = 0.5 * rng.standard_normal((7, robot.nq))
    v = rng.standard_normal((7, robot.nv))
    t = np.linspace(0, 0.06, 7)
    starts = np.array([0, 3])
    res = EnergyResidual(layout)
    A = res.regressor_rows(q, v, t, starts, 3)
    r = res.evaluate(q, v, t, layout.to_theta(p), np.zeros(2), starts, 3, jacobians=False).r
    assert np.allclose(A @ p, r, rtol=1e-10, atol=1e-10)


def test_input_work_noise_formula_matches_monte_carlo():
    rng = np.random.default_rng(5)
    n = 201
    t = np.linspace(0, 0.2, n)
    v = np.column_stack([np.sin(10 * t), 2 * np.cos(7 * t)])
    tau = np.column_stack([3 + np.cos(5 * t), -1 + 0 * t])
    sv, st = 0.05, 0.2
    ta, tb = np.array([0.0, 0.1]), np.array([0.1, 0.2])
    W0 = input_work(t, v, tau, ta, tb, quadrature="trapezoid")
    draws = np.array([input_work(t, v + sv * rng.standard_normal(v.shape), tau + st * rng.standard_normal(
        tau.shape), ta, tb, quadrature="trapezoid") for _ in range(3000)])
    pred = input_work_std(t, v, tau, ta, tb, sv, st, quadrature="trapezoid", long_run=False)
    assert np.allclose(draws.mean(0), W0, atol=4 * pred / np.sqrt(3000))
    assert np.allclose(draws.std(0), pred, rtol=0.08)


def test_missing_effort_is_a_clear_error():
    t = np.linspace(0, 1, 11)
    tau = np.ones((11, 2))
    tau[3, 1] = np.nan
    with pytest.raises(ValueError, match=r"joint\(s\) \['j2'\]"):
        input_work(t, np.ones((11, 2)), tau, [0.0], [1.0], joint_names=["j1", "j2"])


def test_stance_constant_windows_drop_contact_switches():
    contacts = np.array([[1, 1], [1, 1], [1, 0], [1, 0], [1, 0], [1, 1]], bool)
    starts = interval_windows(6, 2, stride=1)  # 0..3
    assert list(stance_constant_windows(starts, 2, contacts)) == [2]


def test_gtsam_energy_factor_jacobians():
    import gtsam

    from fg_sysid.factors.gtsam_energy import energy_factor
    from fg_sysid.factors.gtsam_factors import check_factor_jacobians
    from fg_sysid.factors.keys import THETA, state

    robot = load_robot("z1")
    layout = ParameterLayout.create(robot, "exponential-eigenvalue")
    rng = np.random.default_rng(7)
    th0, std = layout.prior()
    f = energy_factor(EnergyResidual(layout), 3, 4, 0.10, 0.12, 0.05, 0.01)
    values = gtsam.Values()
    values.insert(state(3), rng.standard_normal(3 * robot.nv))
    values.insert(state(4), rng.standard_normal(3 * robot.nv))
    values.insert(THETA, th0 + 0.1 * std * rng.standard_normal(layout.n))
    check_factor_jacobians(f, values, tol=1e-5, rtol=1e-5)
    assert f.dim() == 1 and f.error(values) > 0
    with pytest.raises(ValueError, match="t1 must be > t0"):
        energy_factor(EnergyResidual(layout), 3, 4, 0.12, 0.12, 0.05, 0.01)
