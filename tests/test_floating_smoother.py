"""FloatingBaseSmoother: Jacobians of every factor block vs central differences, the stance null-space
identity behind the total-mass limitation, and end to end on short MuJoCo logs (constraints to 1e-6,
base orientation, physical consistency, total-mass and symmetry constraints, projected process noise)."""

import numpy as np
import pinocchio as pin
import pytest

from fg_sysid.datasets.mujoco_sim import draw_truth, simulate_stance, to_log
from fg_sysid.estimation.floating_smoother import FloatingBaseSmoother
from fg_sysid.estimation.metrics import base_pose_errors
from fg_sysid.robots import load_robot

FEET = ("FL_foot", "FR_foot", "RL_foot", "RR_foot")


@pytest.fixture(scope="module")
def b1():
    return load_robot("b1")


@pytest.mark.parametrize("radius", [0.0, 0.02])
def test_id_contact_jacobians_match_central_differences(b1, radius):
    sm = FloatingBaseSmoother(b1, FEET, contact_radius=radius).setup()
    rng = np.random.default_rng(3)
    nv, n = b1.nv, 2
    q = np.array([pin.integrate(b1.model, b1.neutral(), 0.3 * rng.standard_normal(nv)) for _ in range(n)])
    v, a = rng.standard_normal((n, nv)), rng.standard_normal((n, nv))
    lam = 50.0 * rng.standard_normal((n, 3 * len(FEET)))
    theta = sm.layout_.prior(0.7)[0] + 0.05 * rng.standard_normal(sm.layout_.n)
    tau = rng.standard_normal((n, nv))
    r, Jx, Jt = sm.id_factor(q, v, a, lam, theta, tau)
    eps = 1e-6

    def f(qq, vv, aa, ll, th):
        return sm.id_factor(qq, vv, aa, ll, th, tau, jacobians=False)[0]

    num = np.zeros_like(Jx)
    for i in range(sm.nx):
        d = np.zeros((n, sm.nx))
        d[:, i] = eps
        num[:, :, i] = (
            f(*sm._retract((q, v, a, lam), d), theta) - f(*sm._retract((q, v, a, lam), -d), theta)
        ) / (2 * eps)
    scale = np.abs(num).max()
    assert np.abs(Jx - num).max() < 1e-6 * scale
    numt = np.zeros_like(Jt)
    for i in range(sm.layout_.n):
        e = np.zeros(sm.layout_.n)
        e[i] = eps
        numt[:, :, i] = (f(q, v, a, lam, theta + e) - f(q, v, a, lam, theta - e)) / (2 * eps)
    assert np.abs(Jt - numt).max() < 1e-6 * max(np.abs(numt).max(), 1.0)


def test_contact_radius_moves_the_force_application_point(b1):
    """τ_c with ρ > 0 equals J_pᵀ f, J_p the LOCAL_WORLD_ALIGNED Jacobian of the point ρ below the foot."""
    sm = FloatingBaseSmoother(b1, FEET, contact_radius=0.02).setup()
    rng = np.random.default_rng(0)
    q = pin.integrate(b1.model, b1.neutral(), 0.3 * rng.standard_normal(b1.nv))[None]
    lam = 40.0 * rng.standard_normal((1, 12))
    tau = sm.contact_term(q, lam, jacobians=False)[0][0]
    m = b1.model.copy()
    d = m.createData()
    pin.framesForwardKinematics(m, d, q[0])
    pin.computeJointJacobians(m, d, q[0])
    ref = np.zeros(b1.nv)
    for i, f in enumerate(FEET):
        fid = m.getFrameId(f)
        J = pin.getFrameJacobian(m, d, fid, pin.LOCAL_WORLD_ALIGNED)
        Jp = J[:3] + np.cross(np.array([0.0, 0.0, 0.02])[None, :], J[3:].T).T  # v_p = v − ω × (ρ ẑ)
        ref += Jp.T @ (d.oMf[fid].rotation @ lam[0, 3 * i : 3 * i + 3])
    np.testing.assert_allclose(tau, ref, atol=1e-9 * np.abs(ref).max())


def test_point_mass_at_a_stance_contact_point_is_unobservable(b1):
    """The identity behind the total-mass limitation: adding δm at a stance foot's contact point (in the
    calf) and δm·g to that foot's vertical force leaves every inverse-dynamics row unchanged, at a
    state whose foot point does not accelerate (J a + J̇ v = 0)."""
    sm = FloatingBaseSmoother(b1, FEET, contact_radius=0.0).setup()
    lay = sm.layout_
    theta = lay.prior(0.7)[0]
    rng = np.random.default_rng(5)
    m, d = b1.model.copy(), b1.model.createData()
    fid = m.getFrameId("FL_foot")
    q = pin.integrate(m, b1.neutral(), 0.2 * rng.standard_normal(b1.nv))
    pin.computeJointJacobians(m, d, q)
    pin.framesForwardKinematics(m, d, q)
    J = pin.getFrameJacobian(m, d, fid, pin.LOCAL_WORLD_ALIGNED)[:3]
    Nj = np.linalg.svd(J)[2][3:].T  # velocities with a still foot point
    v = Nj @ rng.standard_normal(Nj.shape[1])
    pin.forwardKinematics(m, d, q, v, np.zeros(b1.nv))
    drift = pin.getFrameClassicalAcceleration(m, d, fid, pin.LOCAL_WORLD_ALIGNED).linear
    a = Nj @ rng.standard_normal(Nj.shape[1]) - np.linalg.pinv(J) @ drift  # J a + J̇ v = 0
    lam = 60.0 * rng.standard_normal((1, 12))
    tau = rng.standard_normal((1, b1.nv))
    r0 = sm.id_factor(q[None], v[None], a[None], lam, theta, tau, jacobians=False)[0]
    # δm in the calf at the foot frame origin (calf = parent joint of the foot frame)
    dm = 0.7
    p = lay.to_physical(theta)
    body = m.frames[fid].parentJoint - 1
    c = m.frames[fid].placement.translation
    blk = p[10 * body : 10 * body + 10].copy()
    blk[0] += dm
    blk[1:4] += dm * c
    S = np.array([[0, -c[2], c[1]], [c[2], 0, -c[0]], [-c[1], c[0], 0]])
    dI = -dm * S @ S
    blk[4:] += [dI[0, 0], dI[0, 1], dI[1, 1], dI[0, 2], dI[1, 2], dI[2, 2]]
    p[10 * body : 10 * body + 10] = blk
    theta2, _ = lay.to_theta_projected(p, p)
    lam2 = lam.copy()
    lam2[0, :3] += d.oMf[fid].rotation.T @ np.array([0.0, 0.0, dm * 9.81])
    r1 = sm.id_factor(q[None], v[None], a[None], lam2, theta2, tau, jacobians=False)[0]
    np.testing.assert_allclose(r1, r0, atol=1e-8 * np.abs(r0).max())
    # and it is a real change of the model: without the force change the rows differ
    r2 = sm.id_factor(q[None], v[None], a[None], lam, theta2, tau, jacobians=False)[0]
    assert np.abs(r2 - r0).max() > 1.0


@pytest.fixture(scope="module")
def stance(b1):
    res = simulate_stance(b1, 0.6, 200, seed=0, motion="sway", randomize=True, noise=0.005)
    return res, to_log(res)


def test_every_factor_block_jacobian_matches_central_differences(b1, stance):
    """Directional derivatives of every whitened block of the linearized graph (encoders, base pose, IMU,
    contacts, forces, cone, ID, integration, height pairs, θ priors) vs central differences."""
    res, log = stance
    sm = FloatingBaseSmoother(
        b1,
        FEET,
        contact_radius=0.02,
        max_iterations=2,
        reweight_rounds=0,
        constraints="soft",
        refine_iterations=1,
        total_mass=55.0,
        total_mass_std=1.0,
        symmetry="robot",
        symmetry_std=0.05,
    ).fit(log)
    st = sm.state_
    x = (st["q"], st["v"], st["a"], st["lam"])
    theta = sm.result_.theta
    rng = np.random.default_rng(0)
    N = st["v"].shape[0]
    dx = 1e-3 * rng.standard_normal((N, sm.nx))
    dth = 1e-3 * rng.standard_normal(theta.size)
    g = sm._linearize(x, theta, sm.noise_)
    eps = 1e-4
    gp = sm._linearize(sm._retract(x, eps * dx), theta + eps * dth, sm.noise_, jacobians=False)
    gm = sm._linearize(sm._retract(x, -eps * dx), theta - eps * dth, sm.noise_, jacobians=False)
    assert len(g.knot) >= 8 and len(g.pair) == 2  # all feet's height pairs + integration
    for (J, _), (_, rp), (_, rm) in zip(g.knot, gp.knot, gm.knot, strict=True):
        num = (rp - rm) / (2 * eps)
        pred = np.einsum("nmx,nx->nm", J, dx)
        assert np.abs(pred - num).max() <= 1e-5 * max(np.abs(num).max(), 1e-3)
    for (J0, J1, _), (_, _, rp), (_, _, rm) in zip(g.pair, gp.pair, gm.pair, strict=True):
        num = (rp - rm) / (2 * eps)
        pred = np.einsum("nmx,nx->nm", J0, dx[:-1]) + np.einsum("nmx,nx->nm", J1, dx[1:])
        assert np.abs(pred - num).max() <= 1e-5 * max(np.abs(num).max(), 1e-3)
    (Jx, Jt, _), (_, _, rp), (_, _, rm) = g.knot_theta[0], gp.knot_theta[0], gm.knot_theta[0]
    num = (rp - rm) / (2 * eps)
    assert np.abs(np.einsum("nmx,nx->nm", Jx, dx) + Jt @ dth - num).max() <= 1e-5 * np.abs(num).max()
    num = (gp.prior_r - gm.prior_r) / (2 * eps)
    assert g.prior_jacobian().shape[0] > theta.size  # total mass and symmetry rows are there
    assert np.abs(g.prior_jacobian() @ dth - num).max() <= 1e-5 * max(np.abs(num).max(), 1e-3)


@pytest.fixture(scope="module")
def hard_fit(b1, stance):
    res, log = stance
    sm = FloatingBaseSmoother(b1, FEET, contact_radius=0.02, knot_stride=2, use_forces=False).fit(log)
    return res, sm


def test_hard_constraints_hold_and_base_is_tracked(hard_fit):
    res, sm = hard_fit
    fb = sm.result_.extras["floating_base"]
    viol = fb["constraint_residual_max"]
    assert set(viol) >= {"base_wrench", "contact_velocity", "contact_acceleration", "contact_height"}
    assert max(viol.values()) <= 1e-6 and fb["constraints_satisfied"]
    ang, pos = base_pose_errors(res.q_pin[sm._idx], sm.state_["q"])
    assert ang.max() < 1.0 and pos.max() < 0.01  # noise 0.005 on the joints; base pose logged
    assert not sm.result_.consistency_problems()
    assert np.isfinite(sm.result_.std).all()
    s = sm.result_.summary()
    assert s["floating_base"]["imu"]["gyro"] and s["floating_base"]["imu"]["accelerometer"]
    assert "force.FL_foot.z" in sm.result_.trajectory and "base.quat.w" in sm.result_.trajectory
    # default on a stance log: soft symmetry of the mirrored joints' friction and armature only
    assert s["floating_base"]["symmetry"] == {
        "mode": "joints", "requested": "auto", "body_pairs": 0, "joint_pairs": 6, "std": 0.3
    }
    assert sm._symmetry.joint_pairs and np.all(sm._sym_std > 0.0)


def test_symmetry_auto_needs_a_foot_that_never_swings(b1):
    sm = FloatingBaseSmoother(b1, FEET)
    flags = np.ones((50, 4), bool)
    sm._flags = flags
    assert sm._resolve_symmetry() == "joints"  # four-foot stance: antisymmetric friction is weak
    flags[10:20, 0] = flags[20:30, 1] = flags[30:40, 2] = False
    assert sm._resolve_symmetry() == "joints"  # RR never swings
    flags[40:45, 3] = False
    assert sm._resolve_symmetry() is None  # every leg seen without an unknown contact force
    for explicit in ("robot", "joints", None):
        sm.symmetry = explicit
        assert sm._resolve_symmetry() == explicit


def test_estimated_contact_forces_carry_the_weight(hard_fit):
    res, sm = hard_fit
    fz = sm.state_["forces_world"][..., 2].sum(axis=1)
    true_fz = res.contact_force[sm._idx][..., 2].sum(axis=1)
    assert abs(fz.mean() / true_fz.mean() - 1) < 0.05


def test_known_total_mass_and_symmetry_as_hard_constraints(b1, stance):
    res, log = stance
    m_true = float(draw_truth(b1, 0)["inertial"][:, 0].sum())
    sm = FloatingBaseSmoother(
        b1,
        FEET,
        contact_radius=0.02,
        knot_stride=3,
        use_forces=False,
        total_mass=m_true,
        total_mass_std=0.0,
        symmetry="robot",
        symmetry_std=0.0,
        max_iterations=15,
        refine_iterations=5,
    ).fit(log)
    p = sm.result_.estimate
    assert abs(p[: 10 * b1.n_bodies : 10].sum() - m_true) < 1e-3
    names = list(sm.result_.names)
    fl, fr = p[names.index("FL_thigh.m")], p[names.index("FR_thigh.m")]
    assert abs(fl - fr) < 1e-3 * fl
    assert abs(p[names.index("FL_thigh.mcy")] + p[names.index("FR_thigh.mcy")]) < 1e-3  # mirrored in y


def test_projected_process_noise_option_runs_and_differs(b1, stance):
    _, log = stance
    kw = dict(
        contact_radius=0.02,
        knot_stride=3,
        use_forces=False,
        max_iterations=5,
        refine_iterations=2,
        constraints="soft",
        reweight_rounds=0,
    )
    a = FloatingBaseSmoother(b1, FEET, process_noise="projected", **kw).fit(log)
    b = FloatingBaseSmoother(b1, FEET, process_noise="unprojected", **kw).fit(log)
    assert a.result_.extras["floating_base"]["process_noise"] == "projected"
    assert np.abs(a.result_.estimate - b.result_.estimate).max() > 0
    assert np.isfinite(a.result_.estimate).all()


def test_bad_inputs_name_the_culprit(b1, stance):
    _, log = stance
    with pytest.raises(Exception, match="no_such_foot"):
        FloatingBaseSmoother(b1, ("no_such_foot",)).fit(log)
    with pytest.raises(Exception, match="not a free-flyer"):
        FloatingBaseSmoother(load_robot("z1"), FEET).setup()
    with pytest.raises(ValueError, match="constraints"):
        FloatingBaseSmoother(b1, FEET, constraints="very").setup()


def test_reset_maps_at_touchdown_have_exact_jacobians(b1):
    """Trot: touchdown intervals get the impact map (impulse in the touching-down foot's force slot of the
    previous knot); its whitened blocks (states of both knots and θ) match central differences, and the
    impulse slot is out of that knot's inverse dynamics."""
    res = simulate_stance(b1, 1.2, 200, seed=0, motion="trot", randomize=True, noise=0.005)
    sm = FloatingBaseSmoother(b1, contact_radius=0.02, knot_stride=2, max_iterations=1, reweight_rounds=0,
                              constraints="soft", use_forces=False, determined_std_ratio=None,
                              impacts=True).fit(to_log(res))
    assert len(sm._impacts) >= 4
    k, feet = sm._impacts[0]
    assert not sm._flags[k, feet].any() and sm._flags[k + 1, feet].all() and sm._impulse_slot[k, feet].all()
    st = sm.state_
    x, th = (st["q"], st["v"], st["a"], st["lam"]), sm.result_.theta
    rng = np.random.default_rng(1)
    N = st["q"].shape[0]
    dx, dth = 1e-3 * rng.standard_normal((N, sm.nx)), 1e-3 * rng.standard_normal(th.size)
    g = sm._linearize(x, th, sm.noise_)
    eps = 1e-5
    gp = sm._linearize(sm._retract(x, eps * dx), th + eps * dth, sm.noise_, jacobians=False)
    gm = sm._linearize(sm._retract(x, -eps * dx), th - eps * dth, sm.noise_, jacobians=False)
    assert len(g.pair_theta) == len(sm._impacts)
    blocks = zip(g.pair_theta, gp.pair_theta, gm.pair_theta, strict=True)
    for (k, J0, J1, Jt, _), (*_, rp), (*_, rm) in blocks:
        num = (rp - rm) / (2 * eps)
        assert np.abs(J0 @ dx[k] + J1 @ dx[k + 1] + Jt @ dth - num).max() <= 1e-5 * np.abs(num).max()
    # the impulse slot does not enter knot k's inverse dynamics
    lam2 = st["lam"].copy()
    lam2[k, 3 * feet[0]:3 * feet[0] + 3] += 100.0
    r1 = sm.id_factor(st["q"], st["v"], st["a"], st["lam"], th, sm._taum, jacobians=False)[0]
    r2 = sm.id_factor(st["q"], st["v"], st["a"], lam2, th, sm._taum, jacobians=False)[0]
    assert np.abs(r2 - r1).max() == 0.0


def test_touchdown_settle_delays_the_stance_constraints(b1):
    res = simulate_stance(b1, 1.2, 200, seed=0, motion="trot", randomize=True, noise=0.005)
    sm = FloatingBaseSmoother(b1, knot_stride=2, max_iterations=1, reweight_rounds=0, constraints="soft",
                              use_forces=False, determined_std_ratio=None,
                              touchdown_settle_s=0.02).fit(to_log(res))
    F, C = sm._flags, sm._cflags
    assert (C <= F).all() and (C != F).any()
    td = np.argwhere(F[1:] & ~F[:-1]) + [1, 0]  # (knot, foot) of touchdowns
    for k, i in td:
        assert not C[k, i] and not C[min(k + 1, len(C) - 1), i]  # 0.02 s = 2 knots of 0.01 s
        if k + 2 < len(C) and F[k + 2, i]:
            assert C[k + 2, i]


def test_unmeasured_efforts_are_left_out(b1, stance):
    """An all-NaN effort column means "not measured": its rows leave the graph (with a warning naming the
    joint) and the fit still satisfies the constraints."""
    import dataclasses

    _, log = stance
    tau = np.asarray(log.tau, float).copy()
    tau[:, 0] = np.nan
    with pytest.warns(UserWarning, match="FL_hip_joint"):
        sm = FloatingBaseSmoother(b1, knot_stride=3, use_forces=False, max_iterations=10).fit(
            dataclasses.replace(log, tau=tau))
    assert sm.result_.extras["floating_base"]["constraints_satisfied"]
    assert np.isfinite(sm.result_.estimate).all()


def test_energy_term_on_a_floating_base(b1):
    """--energy on a trot: one work-energy row per knot interval without a contact change (touchdowns and
    lift-offs left out), in the problem next to the constraints; the fit still meets them."""
    res = simulate_stance(b1, 1.2, 200, seed=0, motion="trot", randomize=True, noise=0.005)
    sm = FloatingBaseSmoother(b1, knot_stride=2, max_iterations=4, reweight_rounds=0, use_forces=False,
                              determined_std_ratio=None, energy=True).fit(to_log(res))
    term = sm.problem_.term("energy")
    keep = sm._energy_intervals()
    change = np.any(sm._flags[1:] != sm._flags[:-1], axis=1)
    assert change.any() and (keep[change] == 0).all() and (keep[~change] == 1).all()
    from fg_sysid.estimation.problem import Evaluation

    out = term.evaluate(Evaluation(sm.problem_, sm.states_, sm.result_.theta, False), False)
    assert np.all(np.isfinite(out.r)) and np.all(out.w[change] == 0) and np.all(out.w[~change] > 0)
    viol = sm.problem_.violations(sm.states_, sm.result_.theta)
    assert max(float(np.abs(v).max()) for v in viol.values() if np.size(v)) < 1e-4
