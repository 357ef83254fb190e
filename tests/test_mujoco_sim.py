"""MuJoCo floating-base simulator built from the Pinocchio model (fg_sysid.datasets.mujoco_sim)."""

import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")
pin = pytest.importorskip("pinocchio")

from fg_sysid.datasets.mujoco_sim import (  # noqa: E402
    DEFAULT_FOOT_FRAMES,
    build_mujoco_model,
    mj_to_pin,
    pin_to_mj,
    simulate_stance,
)
from fg_sysid.robots import load_robot  # noqa: E402


@pytest.fixture(scope="module")
def b1():
    return load_robot("b1")


@pytest.fixture(scope="module")
def built(b1):
    return build_mujoco_model(b1, friction=(0.3, 0.05), armature=0.01)


@pytest.fixture(scope="module")
def stance(b1):
    return simulate_stance(b1, duration=2.0, rate=500, seed=0)


def _random_state(robot, rng):
    q = pin.randomConfiguration(robot.model, -np.ones(robot.nq), np.ones(robot.nq))
    q[3:7] = pin.Quaternion(pin.exp3(rng.normal(0, 0.7, 3))).coeffs()  # x, y, z, w
    lo, hi = robot.position_limits()
    q[robot.joint_index_q()] = rng.uniform(lo, hi)
    v = rng.normal(0, 1.0, robot.nv)
    return q, v


def test_model_masses_and_coms(b1, built):
    mj, info = built
    total = pin.computeTotalMass(b1.model)
    assert abs(mj.body_mass.sum() - total) <= 1e-9 * total
    assert mj.opt.integrator == mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    for j in range(1, b1.model.njoints):
        bid = mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_BODY, b1.body_names[j - 1])
        inert = b1.model.inertias[j]
        assert mj.body_mass[bid] == pytest.approx(inert.mass, rel=1e-12)
        np.testing.assert_allclose(mj.body_ipos[bid], inert.lever, atol=1e-12)
        # full inertia about the COM in the body frame: MuJoCo stores principal axes (iquat) + diag
        R = np.zeros(9)
        mujoco.mju_quat2Mat(R, mj.body_iquat[bid])
        R = R.reshape(3, 3)
        I_mj = R @ np.diag(mj.body_inertia[bid]) @ R.T
        np.testing.assert_allclose(I_mj, inert.inertia, atol=1e-9 * max(1.0, np.abs(inert.inertia).max()))
    # joint parameters
    np.testing.assert_allclose(mj.dof_frictionloss[info.dof_adr], 0.3)
    np.testing.assert_allclose(mj.dof_damping[info.dof_adr], 0.05)
    np.testing.assert_allclose(mj.dof_armature[info.dof_adr], 0.01)


def test_qv_roundtrip_and_kinematics(b1, built):
    mj, info = built
    data = mujoco.MjData(mj)
    pd = b1.model.createData()
    rng = np.random.default_rng(3)
    for _ in range(5):
        q, v = _random_state(b1, rng)
        qpos, qvel = pin_to_mj(q, v, info, mj.nq, mj.nv)
        q2, v2 = mj_to_pin(qpos, qvel, info, b1.nq, b1.nv)
        np.testing.assert_allclose(q2, q, atol=1e-12)
        np.testing.assert_allclose(v2, v, atol=1e-12)

        data.qpos[:], data.qvel[:] = qpos, qvel
        mujoco.mj_forward(mj, data)
        pin.forwardKinematics(b1.model, pd, q, v)
        pin.updateFramePlacements(b1.model, pd)
        for f, sid, gid in zip(DEFAULT_FOOT_FRAMES, info.foot_sites, info.foot_geoms, strict=True):
            fid = b1.model.getFrameId(f)
            np.testing.assert_allclose(data.site_xpos[sid], pd.oMf[fid].translation, atol=1e-6)
            np.testing.assert_allclose(data.geom_xpos[gid], pd.oMf[fid].translation, atol=1e-6)
            # velocities check the (world linear, local angular) vs (local, local) conversion
            vel = np.zeros(6)  # MuJoCo: [angular, linear], world-aligned, at the site
            mujoco.mj_objectVelocity(mj, data, mujoco.mjtObj.mjOBJ_SITE, sid, vel, 0)
            vp = pin.getFrameVelocity(b1.model, pd, fid, pin.LOCAL_WORLD_ALIGNED)
            np.testing.assert_allclose(vel[3:], vp.linear, atol=1e-9)
            np.testing.assert_allclose(vel[:3], vp.angular, atol=1e-9)
        # base orientation
        R = data.xmat[info.base_body].reshape(3, 3)
        np.testing.assert_allclose(R, pd.oMi[1].rotation, atol=1e-9)


def test_stance_stays_upright_and_carries_weight(b1, stance):
    res = stance
    N = len(res.t)
    assert N == 1001 and res.q.shape == (N, 12) and res.contact_force.shape == (N, 4, 3)
    assert np.all(np.isfinite(res.q)) and np.all(np.isfinite(res.tau))
    z = res.base_pos[:, 2]
    assert 0.3 < z.min() and z.max() < 0.7
    # roll / pitch from the base quaternion (w, x, y, z)
    w, x, y, zq = res.base_quat.T
    roll = np.arctan2(2 * (w * x + y * zq), 1 - 2 * (x * x + y * y))
    pitch = np.arcsin(np.clip(2 * (w * y - zq * x), -1, 1))
    assert np.abs(roll).max() < 0.2 and np.abs(pitch).max() < 0.2
    assert res.contact.all(axis=1).mean() > 0.9
    weight = pin.computeTotalMass(b1.model) * 9.81
    fz = res.contact_force[:, :, 2].sum(axis=1)
    assert fz.mean() == pytest.approx(weight, rel=0.05)
    assert np.all(res.contact_force[:, :, 2][res.contact] >= -1e-9)  # the ground only pushes
    # the robot actually moves (sway) and the IMU sees gravity
    assert np.ptp(res.q, axis=0).max() > 0.05
    assert np.linalg.norm(res.acc, axis=1).mean() == pytest.approx(9.81, rel=0.1)
    # logged Pinocchio state is consistent with the logged joint/base arrays
    np.testing.assert_allclose(res.q_pin[:, b1.joint_index_q()], res.q)
    np.testing.assert_allclose(res.q_pin[:, :3], res.base_pos)
    # truth dict in simulate.py's naming
    p = res.truth["parameters"]
    assert p["base.m"] == pytest.approx(b1.model.inertias[1].mass)
    assert {"FL_calf_joint.fc", "FL_calf_joint.fv", "FL_calf_joint.armature"} <= set(p)


def test_stance_base_equations_close(b1, stance):
    """Newton's law for the whole robot: m·a_com = sum of contact forces + m·g (vertical, averaged)."""
    res = stance
    model = b1.model
    d = model.createData()
    m = pin.computeTotalMass(model)
    com = np.array([pin.centerOfMass(model, d, q) for q in res.q_pin])
    dt = res.t[1] - res.t[0]
    a_com = (com[2:] - 2 * com[1:-1] + com[:-2]) / dt**2
    f = res.contact_force.sum(axis=1)[1:-1]
    resid = m * a_com - f - m * np.array([0, 0, -9.81])
    scale = m * 9.81
    # measured: mean ~6e-6, max ~1.2e-3 of m·g (the forces close the base equations)
    assert np.abs(resid).mean(axis=0).max() < 1e-3 * scale
    assert np.abs(resid).max() < 2e-2 * scale


def test_stance_with_friction_and_armature(b1):
    res = simulate_stance(b1, duration=0.4, rate=250, friction=(0.5, 0.1), armature=0.02, motion="stand")
    assert len(res.t) == 101 and np.all(np.isfinite(res.q_pin))
    assert res.contact.all()
    p = res.truth["parameters"]
    assert p["RR_calf_joint.fc"] == 0.5 and p["RR_calf_joint.fv"] == 0.1
    assert p["RR_calf_joint.armature"] == 0.02
