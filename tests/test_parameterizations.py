"""Tests for fg_sysid.parameterizations: round trips, analytic Jacobians vs finite differences."""

from __future__ import annotations

import warnings

import numpy as np
import pinocchio as pin
import pytest
from jacobian_check import central_diff

from fg_sysid.parameterizations import (
    MASS_FLOOR,
    CoulombViscous,
    CoulombViscousLead,
    CoulombViscousScale,
    ExponentialEigenvalue,
    InertiaParameterization,
    LogCholesky,
    PositiveScalar,
    Raw,
    SoftDry,
    Stribeck6,
    check_physical_consistency,
    friction_model,
    inertia_parameterization,
    so3_exp,
    so3_left_jacobian,
    so3_right_jacobian,
    warn_if_inconsistent,
)
from fg_sysid.robots import load_robot

PARAMS = [ExponentialEigenvalue(), LogCholesky(), Raw()]
ROBOTS = ["z1", "panda", "double_pendulum"]




def assert_jac_close(J, Jn, rtol=1e-6):
    scale = max(np.abs(Jn).max(), 1e-12)
    err = np.abs(J - Jn).max() / scale
    assert err < rtol, f"analytic vs FD Jacobian relative error {err:.3g}"


def random_consistent_pi(rng, n):
    """Random strictly consistent bodies: m in [0.1, 10] kg, |c| <= 0.5 m, random L > 0 and rotation."""
    out = []
    for _ in range(n):
        m = np.exp(rng.uniform(np.log(0.1), np.log(10)))
        c = rng.uniform(-0.5, 0.5, 3)
        L = m * np.exp(rng.uniform(np.log(1e-4), np.log(1e-1), 3))
        R = so3_exp(rng.normal(size=3) * 2)
        Sigma = R @ np.diag(L) @ R.T + m * np.outer(c, c)  # second moment about origin
        I = np.trace(Sigma) * np.eye(3) - Sigma
        out.append([m, *(m * c), I[0, 0], I[0, 1], I[1, 1], I[0, 2], I[1, 2], I[2, 2]])
    return np.array(out)


def pin_random_consistent(n):
    """pin.Inertia.Random() samples that are physically consistent (~10 % of them are, see below)."""
    out = []
    while len(out) < n:
        p = pin.Inertia.Random().toDynamicParameters()
        if not check_physical_consistency(p[None], ["r"]):
            out.append(p)
    return np.array(out)


def rel_err(a, b):
    return np.abs(a - b).max() / max(np.abs(b).max(), 1e-300)


@pytest.fixture(scope="module")
def urdf_priors():
    out = {}
    for r in ROBOTS:
        robot = load_robot(r)
        out[r] = (robot.nominal_inertial_parameters(), robot.body_names, robot)
    return out


# ---------------------------------------------------------------- factory, hashing
def test_factory_and_hashable():
    assert isinstance(inertia_parameterization("ee"), ExponentialEigenvalue)
    assert inertia_parameterization("exponential-eigenvalue") == ExponentialEigenvalue()
    assert isinstance(inertia_parameterization("log-cholesky"), LogCholesky)
    assert isinstance(inertia_parameterization("raw"), Raw)
    assert len({ExponentialEigenvalue(), ExponentialEigenvalue(), LogCholesky(), Raw()}) == 3
    assert ExponentialEigenvalue() != LogCholesky()
    for p in PARAMS:
        assert isinstance(p, InertiaParameterization) and p.name in (
            "exponential-eigenvalue", "log-cholesky", "raw")
    with pytest.raises(ValueError, match="log-cholesky"):
        inertia_parameterization("cholesky")
    assert isinstance(friction_model("coulomb-viscous", velocity_scale=0.1), CoulombViscous)
    assert friction_model("coulomb-viscous", velocity_scale=0.1).velocity_scale == 0.1
    assert isinstance(friction_model("stribeck6"), Stribeck6)
    cvs = friction_model("coulomb-viscous-scale", velocity_scale=0.02)
    assert isinstance(cvs, CoulombViscousScale) and cvs.default_physical(0.0, 0.0)[2] == 0.02
    assert hash(CoulombViscous()) == hash(CoulombViscous(0.05))
    with pytest.raises(ValueError, match="stribeck6"):
        friction_model("lugre")


# ---------------------------------------------------------------- round trips pi -> theta -> pi
@pytest.mark.parametrize("param", PARAMS, ids=lambda p: p.name)
def test_round_trip_random(param):
    rng = np.random.default_rng(1)
    pis = np.vstack([random_consistent_pi(rng, 40), pin_random_consistent(10)])
    for p in pis:
        th = param.to_theta(p)
        assert th.shape == (10,) and np.all(np.isfinite(th))
        assert rel_err(param.to_physical(th), p) < 1e-9
    # batch versions agree with single-body ones
    th = param.to_theta_batch(pis)
    assert np.allclose(param.to_physical_batch(th), pis, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("param", PARAMS, ids=lambda p: p.name)
@pytest.mark.parametrize("robot", ROBOTS)
def test_round_trip_urdf(param, robot, urdf_priors):
    pis, names, _ = urdf_priors[robot]
    for name, p in zip(names, pis, strict=True):
        back = param.to_physical(param.to_theta(p))
        assert rel_err(back, p) < 1e-9, f"{robot}/{name}: round trip error {rel_err(back, p):.3g}"


def test_theta_round_trip_ee_lc():
    """theta -> pi -> theta -> pi is stable (theta itself is not unique for EE)."""
    rng = np.random.default_rng(2)
    for param in (ExponentialEigenvalue(), LogCholesky()):
        for _ in range(20):
            th = rng.normal(size=10)
            p = param.to_physical(th)
            th2 = param.to_theta(p)
            assert rel_err(param.to_physical(th2), p) < 1e-9
        if isinstance(param, LogCholesky):  # the Cholesky factor is unique
            assert np.allclose(th2, th, atol=1e-8)


@pytest.mark.parametrize("param", [ExponentialEigenvalue(), LogCholesky()], ids=lambda p: p.name)
def test_boundary_and_inconsistent_bodies_are_clamped(param):
    """Point masses, rods, zero mass and pin.Inertia.Random() outliers -> finite theta, consistent pi."""
    point = np.array([2.0, 0.2, -0.4, 0.6, 0, 0, 0, 0, 0, 0])
    point[4:] = pin.Inertia(2.0, np.array([0.1, -0.2, 0.3]), np.zeros((3, 3))).toDynamicParameters()[4:]
    rod = pin.Inertia(1.0, np.zeros(3), np.diag([1e-2, 1e-2, 0.0])).toDynamicParameters()
    zero = np.zeros(10)
    rng_pin = [pin.Inertia.Random().toDynamicParameters() for _ in range(20)]
    for p in [point, rod, zero, *rng_pin]:
        th = param.to_theta(p)
        assert np.all(np.isfinite(th))
        back = param.to_physical(th)
        assert check_physical_consistency(back[None], ["b"]) == []
    # the clamp on a boundary body is tiny
    assert rel_err(param.to_physical(param.to_theta(rod)), rod) < 1e-6
    assert rel_err(param.to_physical(param.to_theta(point)), point) < 1e-6
    assert param.to_physical(param.to_theta(zero))[0] == pytest.approx(MASS_FLOOR)


def test_pin_random_inertia_is_mostly_inconsistent():
    """Surprise worth knowing: pin.Inertia.Random() usually violates the triangle inequality."""
    pis = np.array([pin.Inertia.Random().toDynamicParameters() for _ in range(200)])
    msgs = check_physical_consistency(pis, [f"r{i}" for i in range(200)])
    assert len(msgs) > 50
    assert all("triangle" in m for m in msgs)


# ---------------------------------------------------------------- Jacobians
@pytest.mark.parametrize("param", PARAMS, ids=lambda p: p.name)
def test_inertia_jacobian_fd(param):
    rng = np.random.default_rng(3)
    thetas = rng.normal(size=(12, 10))
    thetas[0, 4:7] = 0.0  # identity rotation
    thetas[1, 4:7] = [1e-3, -2e-3, 5e-4]  # Taylor branch of Exp / J_r
    thetas[2, 4:7] = np.array([0.3, -0.9, 2.5]) / np.linalg.norm([0.3, -0.9, 2.5]) * 3.1  # near pi
    for th in thetas:
        assert_jac_close(param.jacobian(th), central_diff(param.to_physical, th))
    Jb = param.jacobian_batch(thetas)
    assert Jb.shape == (12, 10, 10)
    for th, J in zip(thetas, Jb, strict=True):
        assert np.allclose(J, param.jacobian(th))
    assert np.allclose(param.to_physical_batch(thetas), [param.to_physical(t) for t in thetas])


def test_eq50_right_not_left_jacobian():
    """dR/dw_i = R [J_r(w) e_i]x (used); the paper's eq. 50 with J_l(w) fails finite differences."""
    rng = np.random.default_rng(4)
    w = rng.normal(size=3)
    R = so3_exp(w)
    dR = central_diff(so3_exp, w)  # (3, 3, 3): last axis = w_i
    Jr, Jl = so3_right_jacobian(w), so3_left_jacobian(w)
    from fg_sysid.parameterizations import _skew

    for i in range(3):
        assert np.allclose(R @ _skew(Jr[:, i]), dR[:, :, i], atol=1e-8)
        assert np.allclose(_skew(Jl[:, i]) @ R, dR[:, :, i], atol=1e-8)
    err_left = max(np.abs(R @ _skew(Jl[:, i]) - dR[:, :, i]).max() for i in range(3))
    assert err_left > 1e-3
    assert np.allclose(so3_right_jacobian(w), np.asarray(pin.Jexp3(w)), atol=1e-12)
    assert np.allclose(R, pin.exp3(w), atol=1e-12)


def test_log_cholesky_theta_order_matches_pinocchio():
    """theta = (alpha, d1, d2, d3, s12, s23, s13, t1, t2, t3): m = exp(2 alpha), h = m t."""
    th = np.array([0.3, 0.1, -0.2, 0.4, 0.5, -0.6, 0.7, 0.11, -0.12, 0.13])
    p = LogCholesky().to_physical(th)
    assert p[0] == pytest.approx(np.exp(0.6))
    assert np.allclose(p[1:4], np.exp(0.6) * th[7:10])
    a, d1, d2, d3, s12, s23, s13, t1, t2, t3 = th
    U = np.exp(a) * np.array([[np.exp(d1), s12, s13, t1], [0, np.exp(d2), s23, t2],
                              [0, 0, np.exp(d3), t3], [0, 0, 0, 1]])
    assert np.allclose(U @ U.T, pin.PseudoInertia.FromDynamicParameters(p).toMatrix())


# ---------------------------------------------------------------- every theta is consistent
@pytest.mark.parametrize("param", [ExponentialEigenvalue(), LogCholesky()], ids=lambda p: p.name)
def test_every_theta_consistent(param):
    rng = np.random.default_rng(5)
    thetas = rng.normal(size=(200, 10)) * 1.5
    pis = param.to_physical_batch(thetas)
    assert check_physical_consistency(pis, [f"b{i}" for i in range(len(pis))]) == []


def test_raw_can_be_inconsistent():
    p = np.array([-1.0, 0, 0, 0, 1, 0, 1, 0, 0, 1])
    assert np.array_equal(Raw().to_physical(Raw().to_theta(p)), p)
    assert np.array_equal(Raw().jacobian(p), np.eye(10))
    assert check_physical_consistency(p[None], ["x"]) != []


# ---------------------------------------------------------------- consistency checker
def test_check_flags_each_violation_with_body_name():
    good = pin.Inertia(1.0, np.array([0.1, 0.0, 0.0]), np.diag([0.02, 0.03, 0.04])).toDynamicParameters()
    neg_mass = good.copy()
    neg_mass[0] = -0.1
    not_psd = pin.Inertia(1.0, np.zeros(3), np.diag([0.02, 0.03, 0.04])).toDynamicParameters()
    not_psd[4] = -1e-3  # I_xx < 0
    triangle = pin.Inertia(1.0, np.zeros(3), np.diag([0.01, 0.01, 0.05])).toDynamicParameters()
    nan = good.copy()
    nan[6] = np.nan
    names = ["good", "link3", "link2", "link4", "link5"]
    msgs = check_physical_consistency(np.array([good, neg_mass, not_psd, triangle, nan]), names)
    assert len(msgs) == 4
    assert msgs[0].startswith("link3:") and "mass" in msgs[0] and "-0.1" in msgs[0]
    assert msgs[1].startswith("link2:") and "not PSD" in msgs[1]
    assert msgs[2].startswith("link4:") and "triangle" in msgs[2]
    assert msgs[3].startswith("link5:") and "non-finite" in msgs[3]
    assert not any(m.startswith("good") for m in msgs)
    # boundary bodies (rod, point mass) are consistent
    rod = pin.Inertia(1.0, np.array([0.3, 0.2, 0.1]), np.diag([1e-2, 1e-2, 0.0])).toDynamicParameters()
    lamina = pin.Inertia(1.0, np.zeros(3), np.diag([1e-2, 2e-2, 3e-2])).toDynamicParameters()
    assert check_physical_consistency(np.array([rod, lamina]), ["rod", "lamina"]) == []
    with pytest.raises(ValueError):
        check_physical_consistency(np.array([good]), ["a", "b"])
    with pytest.warns(UserWarning, match="link4"):
        out = warn_if_inconsistent(np.array([good, triangle]), ["good", "link4"], what="test prior")
    assert len(out) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert warn_if_inconsistent(good[None], ["good"]) == []


@pytest.mark.parametrize("robot", ROBOTS)
def test_urdf_priors_consistency(robot, urdf_priors):
    """Recorded: the z1, panda and double_pendulum URDF priors are all physically consistent."""
    pis, names, _ = urdf_priors[robot]
    msgs = check_physical_consistency(pis, names)
    assert msgs == [], msgs
    # perturbing one body to be inconsistent is reported under that body's name
    bad = pis.copy()
    bad[-1, 0] = -1.0
    msgs = check_physical_consistency(bad, names)
    assert len(msgs) == 1 and msgs[0].startswith(names[-1] + ":")


# ---------------------------------------------------------------- friction
FRICTION = [CoulombViscous(), CoulombViscous(velocity_scale=0.2), Stribeck6(), CoulombViscousScale()]


@pytest.mark.parametrize("model", FRICTION, ids=lambda m: f"{m.name}")
def test_friction_jacobians_fd(model):
    rng = np.random.default_rng(6)
    v = np.concatenate([rng.normal(size=20) * 0.3, [0.0, 1e-3, -2.0, 5.0]])
    for _ in range(5):
        th = rng.normal(size=model.n_params)
        assert_jac_close(model.jacobian(th), central_diff(model.to_physical, th))
        tau, dv, dth = model.torque(v, th)
        assert tau.shape == v.shape and dv.shape == v.shape and dth.shape == (v.size, model.n_params)
        # d tau / d theta
        assert_jac_close(dth, central_diff(lambda t: model.torque(v, t)[0], th))
        # d tau / d v (elementwise)
        h = 1e-6
        dv_fd = (model.torque(v + h, th)[0] - model.torque(v - h, th)[0]) / (2 * h)
        assert_jac_close(dv, dv_fd)
        # phys -> theta -> phys
        phys = model.to_physical(th)
        assert rel_err(model.to_physical(model.to_theta(phys)), phys) < 1e-9
        # odd in v and dissipative
        assert np.allclose(model.torque(-v, th)[0], -tau, atol=1e-14)
        assert np.all(tau * v >= 0)
    assert len(model.suffixes) == model.n_params


def test_soft_dry_jacobians_fd_and_mujoco_limits():
    """Soft-dry law (MuJoCo frictionloss): derivatives w.r.t. v, a and θ by central differences away from the
    band's kinks, the stick band (linear, slope fc/vs in v + T a) and the sliding limits ±fc + fv v."""
    rng = np.random.default_rng(8)
    for it in range(10):
        model = (SoftDry(), CoulombViscousLead())[it % 2]
        phys = np.array([rng.uniform(0.1, 2), rng.uniform(0.01, 0.3), rng.uniform(0.005, 0.05),
                         rng.uniform(-0.02, 0.02)])
        th = model.to_theta(phys)
        assert rel_err(model.to_physical(th), phys) < 1e-12
        v = rng.normal(size=200) * 0.05
        a = rng.normal(size=200) * 2.0
        u = (v + phys[3] * a) / phys[2]
        keep = np.abs(np.abs(u) - 1) > 1e-3  # central differences straddle no kink
        v, a = v[keep], a[keep]
        tau, dv, da, dth = model.torque_acc(v, a, th)
        def f(dv_=0.0, da_=0.0, t=th, m=model, v=v, a=a):
            return m.torque_acc(v + dv_, a + da_, t)[0]

        assert_jac_close(dth, central_diff(lambda t: f(t=t), th))
        h = 1e-8
        assert_jac_close(dv, (f(dv_=h) - f(dv_=-h)) / (2 * h))
        assert_jac_close(da, (f(da_=h) - f(da_=-h)) / (2 * h))
        fc, fv, vs, lead = phys
        s = np.clip if model.shape == "clip" else (lambda x, lo, hi: np.tanh(x))
        ref = fc * s((v + lead * a) / vs, -1, 1) + fv * v
        np.testing.assert_allclose(tau, ref, rtol=1e-12, atol=1e-12)
        assert np.all(np.abs(tau - fv * v) <= fc * (1 + 1e-12))  # |dry part| <= fc: a bound, not a law
    assert model.uses_acceleration and len(model.suffixes) == model.n_params == 4
    with pytest.raises(ValueError, match="acceleration"):
        model.torque(np.zeros(3), model.to_theta(model.default_physical(1.0, 0.1)))
    d = model.default_physical(0.0, 0.0)
    assert np.all(d[:3] > 0) and d[3] == 0 and model.valid(d) and np.all(np.isfinite(model.to_theta(d)))
    assert model.prior_std(1.5)[3] == SoftDry.LEAD_PRIOR_STD and not model.valid([1.0, 0.1, -0.01, 0.0])
    with pytest.raises(ValueError, match="shape"):
        SoftDry(shape="sign")
    # velocity-only laws report a zero acceleration derivative through the same call
    cv = CoulombViscousScale()
    th = cv.to_theta(cv.default_physical(1.0, 0.1))
    assert np.all(cv.torque_acc(np.ones(3), np.ones(3), th)[2] == 0)


def test_stribeck_gamma_order_and_peak():
    rng = np.random.default_rng(7)
    model = Stribeck6()
    for th in rng.normal(size=(500, 6)) * 4:
        g = model.to_physical(th)
        assert np.all(g > 0) and g[1] >= g[2]
    assert model.suffixes == ("g0", "g1", "g2", "g3", "g4", "g5")
    # prior: stiction peak above the Coulomb level, decaying to it (the printed eq. 56 sign would dip)
    g = model.default_physical(2.0, 0.1)
    assert np.allclose(g[[3, 5]], [2.0, 0.1]) and g[1] > g[2]
    th = model.to_theta(g)
    assert np.allclose(model.to_physical(th), g)
    v = np.linspace(1e-3, 3, 3000)
    tau = model.torque(v, th)[0] - g[5] * v
    assert tau.max() > g[3] * 1.05  # stiction peak
    assert tau[-1] == pytest.approx(g[3], rel=1e-3)  # decays to Coulomb
    printed = -g[0] * (np.tanh(g[1] * v) - np.tanh(g[2] * v)) + g[3] * np.tanh(g[4] * v)
    assert printed.max() <= g[3] + 1e-12  # printed sign: never above the Coulomb level
    # g2/g1 -> clamp when phys has g2 >= g1
    bad = g.copy()
    bad[2] = bad[1] * 2
    assert model.to_physical(model.to_theta(bad))[2] < model.to_physical(model.to_theta(bad))[1]


def test_coulomb_viscous_limit_and_defaults():
    model = CoulombViscous(velocity_scale=0.05)
    th = model.to_theta(np.array([1.5, 0.2]))
    v = np.array([-3.0, -1.0, 1.0, 2.0, 5.0])
    tau = model.torque(v, th)[0]
    assert np.allclose(tau, 1.5 * np.sign(v) + 0.2 * v, rtol=1e-7)
    assert model.suffixes == ("fc", "fv")
    assert np.allclose(model.default_physical(1.0, 2.0), [1.0, 2.0])
    d = model.default_physical(0.0, 0.0)
    assert np.all(d > 0) and np.all(np.isfinite(model.to_theta(d)))
    d6 = Stribeck6().default_physical(0.0, 0.0)
    assert np.all(d6 > 0) and np.all(np.isfinite(Stribeck6().to_theta(d6)))
    with pytest.raises(ValueError):
        CoulombViscous(velocity_scale=0.0)


def test_friction_defaults_from_urdf(urdf_priors):
    for r in ROBOTS:
        robot = urdf_priors[r][2]
        for model in (CoulombViscous(), Stribeck6()):
            for f, d in zip(robot.urdf_friction, robot.urdf_damping, strict=True):
                phys = model.default_physical(f, d)
                assert np.all(phys > 0) and np.all(np.isfinite(model.to_theta(phys)))


def test_positive_scalar():
    ps = PositiveScalar()
    assert ps.suffixes == ("armature",)
    th = np.array([-3.0, 0.0, 1.2])
    assert np.allclose(ps.to_physical(th), np.exp(th))
    assert np.allclose(ps.jacobian(th), np.diag(central_diff(ps.to_physical, th)), rtol=1e-8)
    assert np.allclose(ps.to_theta(ps.to_physical(th)), th)
    assert np.all(np.isfinite(ps.to_theta(np.array([0.0, -1.0]))))
    assert ps.to_physical(ps.to_theta(0.0)) == pytest.approx(ps.FLOOR)


@pytest.mark.parametrize("inertia", ["log-cholesky", "exponential-eigenvalue", "raw"])
def test_layout_retract_through_physical_parameters(inertia):
    """`ParameterLayout.retract` (issue 9, session 12): π + J δπ and a + J δa exactly where valid, the
    Gauss–Newton direction as its tangent, θ + δθ for friction and for blocks that would leave the valid
    set."""
    from fg_sysid.layout import ParameterLayout

    # (the UR10's URDF bodies lie well inside the consistent set; the Panda's are near-rods at its edge)
    layout = ParameterLayout.create(load_robot("ur10"), inertia, "stribeck6")
    rng = np.random.default_rng(3)
    theta = layout.to_theta(layout.nominal_physical())
    assert np.array_equal(layout.retract(theta, np.zeros(layout.n)), theta)  # untouched blocks stay
    d = 0.01 * rng.standard_normal(layout.n)  # (0.1 in log-Cholesky coordinates leaves the valid set)
    out = layout.retract(theta, d)
    p, p_new = layout.to_physical(theta), layout.to_physical(out)
    lin = p + layout.jacobian(theta) @ d
    physical = (layout.s_inertial, layout.s_armature) if inertia == "log-cholesky" else (layout.s_armature,)
    for s in physical:  # exact along the physical line
        np.testing.assert_allclose(p_new[s], lin[s], rtol=1e-8, atol=1e-12)
    np.testing.assert_array_equal(out[layout.s_friction], (theta + d)[layout.s_friction])
    if inertia != "log-cholesky":  # raw: linear already; exponential-eigenvalue: several θ per body
        np.testing.assert_array_equal(out[layout.s_inertial], (theta + d)[layout.s_inertial])
    # tangent: the curve leaves θ along δθ (second-order difference from θ + t δθ)
    gaps = [np.max(np.abs(layout.retract(theta, t * d) - (theta + t * d))) for t in (1e-2, 1e-3)]
    assert gaps[1] < 0.02 * gaps[0] + 1e-12
    # a step whose straight line leaves the valid set keeps θ + δθ for that block (a body whose I_xx would
    # turn negative, an armature a(1 − 3) < 0); θ + δθ is still a consistent body
    big = np.zeros(layout.n)
    big[layout.s_armature.start] = -3.0
    if inertia == "log-cholesky":
        J0 = layout.jacobian(theta)[:10, :10]
        big[:10] = np.linalg.solve(J0, np.r_[0.0, 0.0, 0.0, 0.0, -2.0 * p[4], np.zeros(5)])  # I_xx → −I_xx
        assert check_physical_consistency((p[:10] + J0 @ big[:10])[None], ["b0"])  # the line leaves the set
    out = layout.retract(theta, big)
    np.testing.assert_allclose(out, theta + big, rtol=0, atol=1e-12)
    assert np.all(np.isfinite(layout.to_physical(out)))
