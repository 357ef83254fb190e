"""MuJoCo floating-base simulator built from the Pinocchio model (fg_sysid.datasets.mujoco_sim)."""

import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")
pin = pytest.importorskip("pinocchio")

import json  # noqa: E402
import sys  # noqa: E402

import pandas as pd  # noqa: E402
from click.testing import CliRunner  # noqa: E402

from fg_sysid.cli import main  # noqa: E402
from fg_sysid.datasets.io import read_log, write_log  # noqa: E402
from fg_sysid.datasets.mujoco_sim import (  # noqa: E402
    ACC_NOISE_FACTOR,
    DEFAULT_FOOT_FRAMES,
    MujocoSimError,
    StepPlan,
    build_mujoco_model,
    debounce_contacts,
    mj_to_pin,
    pin_to_mj,
    simulate_stance,
    standing_configuration,
    standing_posture,
    to_log,
)
from fg_sysid.datasets.simulate import is_physically_consistent, truth_arrays  # noqa: E402
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


# ---------------------------------------------------------------------------------------------- truth, noise
@pytest.fixture(scope="module")
def noisy(b1):
    return simulate_stance(b1, duration=2.0, rate=500, seed=7, noise=0.02, randomize=True)


def _roll_pitch(quat):
    w, x, y, z = quat.T
    roll = np.arctan2(2 * (w * x + y * z), 1 - 2 * (x * x + y * y))
    pitch = np.arcsin(np.clip(2 * (w * y - z * x), -1, 1))
    return roll, pitch


def test_truth_draws_consistent_and_recorded(b1, noisy):
    truth = noisy.truth
    arr = truth_arrays(truth, b1)  # simulate.py names: <body>.<m|mcx..>, <joint>.fc/.fv/.armature
    P0 = b1.nominal_inertial_parameters()
    assert all(is_physically_consistent(p) for p in arr["inertial"])
    assert not np.allclose(arr["inertial"], P0)  # perturbed
    masses = arr["inertial"][:, 0] / P0[:, 0]
    assert np.all((masses > 0.79) & (masses < 1.21))
    effort = b1.effort_limits()
    assert np.all(arr["fc"] > 0) and np.all(arr["fc"] < 0.05 * effort)
    assert np.all(arr["fv"] > 0) and np.all(arr["armature"] > 0) and np.all(arr["armature"] < 0.5)
    assert truth["randomized"] is True and truth["seed"] == 7
    # the MuJoCo model was built from exactly these values
    mj, info = build_mujoco_model(b1, arr["inertial"], (arr["fc"], arr["fv"]), arr["armature"])
    np.testing.assert_allclose(mj.dof_frictionloss[info.dof_adr], arr["fc"])
    # reproducible from the seed, different for another seed
    again = simulate_stance(b1, duration=0.1, rate=100, seed=7, randomize=True, motion="stand")
    other = simulate_stance(b1, duration=0.1, rate=100, seed=8, randomize=True, motion="stand")
    assert again.truth["parameters"] == truth["parameters"]
    assert other.truth["parameters"] != truth["parameters"]
    # still stands
    roll, pitch = _roll_pitch(noisy.base_quat)
    assert np.abs(roll).max() < 0.2 and np.abs(pitch).max() < 0.2 and noisy.base_pos[:, 2].min() > 0.3


def test_noise_on_measurements_only(b1, noisy):
    sigma = 0.02
    m = noisy.meas
    sigmas = {"q": sigma, "v": sigma, "tau": sigma, "gyro": sigma, "acc": ACC_NOISE_FACTOR * sigma}
    for key, s in sigmas.items():
        d = m[key] - getattr(noisy, key)
        assert abs(d.mean()) < 0.1 * s, key
        assert d.std() == pytest.approx(s, rel=0.05), key
    assert noisy.truth["noise_model"]["imu_acc"] == pytest.approx(ACC_NOISE_FACTOR * sigma)
    # the truth arrays are the noise-free state: consistent with the Pinocchio state
    np.testing.assert_array_equal(noisy.q_pin[:, b1.joint_index_q()], noisy.q)
    clean = simulate_stance(b1, duration=0.2, rate=100, seed=3, motion="stand")
    for key in ("q", "v", "tau", "gyro", "acc"):
        np.testing.assert_array_equal(clean.meas[key], getattr(clean, key))
    with pytest.raises(MujocoSimError, match="noise"):
        simulate_stance(b1, duration=0.1, rate=100, noise=-1.0)
    with pytest.raises(MujocoSimError, match="motion"):
        simulate_stance(b1, duration=0.1, rate=100, motion="gallop")


def test_to_log_roundtrip(b1, noisy, tmp_path):
    log = to_log(noisy)
    np.testing.assert_array_equal(log.q, noisy.meas["q"])
    np.testing.assert_array_equal(log.imu_acc, noisy.meas["acc"])
    np.testing.assert_allclose(log.base_quat, noisy.base_quat, atol=1e-12)  # w, x, y, z
    assert set(log.contacts) == set(DEFAULT_FOOT_FRAMES)
    path = write_log(log, tmp_path / "log.parquet")
    back = read_log(path, b1)
    assert back.joint_names == log.joint_names
    for name in ("t", "q", "v", "tau", "imu_gyro", "imu_acc", "imu_quat", "base_pos", "base_quat"):
        np.testing.assert_allclose(getattr(back, name), getattr(log, name), atol=1e-9, err_msg=name)
    for f in DEFAULT_FOOT_FRAMES:
        np.testing.assert_array_equal(back.contacts[f], log.contacts[f])
        np.testing.assert_allclose(back.forces[f], log.forces[f], atol=1e-9)


# ---------------------------------------------------------------------------------------------- trot
def _assert_upright(res, max_tilt):
    """Roll and pitch below ``max_tilt`` [rad], base above 0.4 m throughout."""
    roll, pitch = _roll_pitch(res.base_quat)
    assert np.abs(roll).max() < max_tilt and np.abs(pitch).max() < max_tilt
    assert res.base_pos[:, 2].min() > 0.4


def test_trot_upright_and_diagonal_contacts(b1):
    res = simulate_stance(b1, duration=3.0, rate=200, seed=2, motion="trot", randomize=True)
    _assert_upright(res, 0.2)
    c = res.contact  # FL, FR, RL, RR
    a_only = c[:, 0] & c[:, 3] & ~c[:, 1] & ~c[:, 2]
    b_only = c[:, 1] & c[:, 2] & ~c[:, 0] & ~c[:, 3]
    assert a_only.mean() > 0.25 and b_only.mean() > 0.25
    # alternation: in each half period after the ramp, exactly the swing pair is in the air
    period = res.truth["controller"]["trot_period"]
    k = res.t > 1.0
    phase = np.sin(2 * np.pi * res.t / period)
    assert a_only[k & (phase < -0.7)].mean() > 0.8
    assert b_only[k & (phase > 0.7)].mean() > 0.8
    # the vertical forces carry the weight on average
    weight = pin.computeTotalMass(b1.model) * 9.81
    assert res.contact_force[:, :, 2].sum(axis=1).mean() == pytest.approx(weight, rel=0.15)


def test_debounce_contacts_fills_gaps_and_drops_blips():
    x = np.ones(40, bool)
    x[5:7] = False  # 2-sample gap: filled
    x[15:30] = False  # long swing: kept
    x[20] = True  # 1-sample blip inside the swing: dropped
    y = debounce_contacts(np.stack([x, ~x], axis=1), 3)
    assert y[:15, 0].all() and not y[15:30, 0].any() and y[30:, 0].all()
    # the complement: the 2-sample blip goes, the 1-sample gap in the long stance is filled
    assert not y[:15, 1].any() and y[15:30, 1].all() and not y[30:, 1].any()
    # runs that touch the log's ends are left as logged, however short
    edge = np.array([True, False, False, False, False, True])
    assert np.array_equal(debounce_contacts(edge[:, None], 3)[:, 0], edge)
    assert np.array_equal(debounce_contacts(x[:, None], 0)[:, 0], x)


def test_step_plan_inverse_kinematics_reaches_the_foot_targets(b1):
    q0 = standing_configuration(b1, standing_posture(b1), DEFAULT_FOOT_FRAMES, 0.02)
    plan = StepPlan(b1, q0, DEFAULT_FOOT_FRAMES, duration=4.8)
    assert np.allclose(plan(0.0), standing_posture(b1), atol=1e-8)
    d = b1.model.createData()
    for t in (0.3, 1.0, 1.5, 2.0, 3.4):  # shift, lift, loops, set-down, second foot's loops
        q = pin.neutral(b1.model)
        q[b1.joint_index_q()] = plan(t)
        pin.framesForwardKinematics(b1.model, d, q)
        target = plan.foot_targets(t)
        for f in DEFAULT_FOOT_FRAMES:
            assert np.allclose(d.oMf[b1.model.getFrameId(f)].translation, target[f], atol=2e-3), (t, f)
    # FL is in the air in the first cycle, FR in the second; the others stay at the ground height
    z = {f: plan.foot_targets(1.5)[f][2] for f in DEFAULT_FOOT_FRAMES}
    assert z["FL_foot"] > max(z["FR_foot"], z["RL_foot"], z["RR_foot"]) + 0.05
    z = {f: plan.foot_targets(2.4 + 1.5)[f][2] for f in DEFAULT_FOOT_FRAMES}
    assert z["FR_foot"] > max(z["FL_foot"], z["RL_foot"], z["RR_foot"]) + 0.05


def test_steps_lift_one_foot_at_a_time_and_stay_upright(b1):
    res = simulate_stance(b1, duration=4.8, rate=250, seed=1, motion="steps", randomize=True)
    _assert_upright(res, 0.25)
    c = res.contact  # FL, FR, RL, RR
    assert c.sum(axis=1).min() >= 2 and (c.sum(axis=1) == 3).mean() > 0.4
    first, second = (res.t > 1.0) & (res.t < 1.8), (res.t > 3.4) & (res.t < 4.2)
    assert not c[first, 0].any() and c[first][:, 1:].all()  # FL swings, the others stand
    assert not c[second, 1].any() and c[second][:, [0, 2, 3]].all()  # then FR
    assert res.truth["controller"]["motion"] == "steps"
    # the swinging leg moves: its joints cover a range the four-foot stance does not
    iv = [res.joint_names.index(j) for j in ("FL_thigh_joint", "FL_calf_joint")]
    assert np.ptp(res.q[first][:, iv], axis=0).min() > 0.1


# ---------------------------------------------------------------------------------------------- CLI
def _invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_cli_simulate_b1(b1, tmp_path):
    out = tmp_path / "sim"
    r = _invoke("simulate", "--robot", "b1", "--motion", "trot", "--duration", 1, "--rate", 200,
                "--noise", 0.01, "--seed", 0, "--out", out)
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in out.iterdir()) == ["log.parquet", "truth.json", "truth_trajectory.parquet"]
    truth = json.loads((out / "truth.json").read_text())
    assert truth["robot"] == "b1" and truth["controller"]["motion"] == "trot" and truth["randomized"]
    log = read_log(out / "log.parquet", b1)
    assert log.n_samples == 201 and log.base_quat is not None and set(log.forces) == set(DEFAULT_FOOT_FRAMES)
    tt = pd.read_parquet(out / "truth_trajectory.parquet")
    assert len(tt) == 201 and {"base.pos.z", "base.quat.w", "q.FL_calf_joint", "force.RR_foot.z"} <= set(tt)
    assert np.std(log.q[:, 2] - tt["q.FL_calf_joint"].to_numpy()) == pytest.approx(0.01, rel=0.3)


def test_cli_simulate_bad_motion(tmp_path, monkeypatch):
    for args, needle in ((("--robot", "b1", "--motion", "gallop"), "gallop"),
                         (("--robot", "z1", "--motion", "sway"), "floating-base"),
                         (("--robot", "b1", "--rate", 300), "timestep")):
        out = tmp_path / "bad"
        r = _invoke("simulate", *args, "--duration", 0.5, "--out", out)
        assert r.exit_code == 2 and needle in r.output, (args, r.output)
        assert not out.exists()
    monkeypatch.setitem(sys.modules, "fg_sysid.datasets.mujoco_sim", None)  # as if mujoco were missing
    r = _invoke("simulate", "--robot", "b1", "--duration", 0.5, "--out", tmp_path / "bad")
    assert r.exit_code == 2 and "sim` extra" in r.output, r.output
    assert not (tmp_path / "bad").exists()
