"""Looped robots (issue 11, truth side): descriptions, closure kinematics, MuJoCo truth, baselines."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest
import yaml

from fg_sysid.datasets.log import Log
from fg_sysid.datasets.mujoco_loops import (
    constrained_torque,
    simulate_loop_inclass,
    simulate_loop_mujoco,
)
from fg_sysid.estimation.loop_baseline import (
    ConstraintEliminationLS,
    LoopBaselineError,
    loop_states,
    parameter_names,
    predict_loop_efforts,
    serial_log,
)
from fg_sysid.robots.loop_kinematics import ClosureKinematics
from fg_sysid.robots.looped import (
    DATA_DIR,
    GENERATORS,
    LoopRobotError,
    load_loop_robot,
    loop_robot_path,
    write_loop_robots,
)
from fg_sysid.robots.loops import actuated_joints
from fg_sysid.robots.model import RobotError

pytest.importorskip("mujoco")


@pytest.fixture(scope="module")
def b1_leg():
    return load_loop_robot("b1_leg_fourbar")


@pytest.fixture(scope="module")
def fourbar():
    return load_loop_robot("fourbar")


def _indices(robot):
    names = list(robot.joint_names)
    act = [names.index(j) for j in actuated_joints(robot)]
    return act, [i for i in range(len(names)) if i not in act]


def test_packaged_descriptions_are_current(tmp_path):
    """The URDF/YAML files shipped in fg_sysid/robots/data/loops are what the generators write."""
    write_loop_robots(tmp_path)
    for name in GENERATORS:
        for ext in ("urdf", "yaml"):
            assert (tmp_path / f"{name}.{ext}").read_text() == (DATA_DIR / f"{name}.{ext}").read_text(), name


def test_descriptions_load_with_the_agreed_keys(b1_leg, tmp_path):
    robot = b1_leg
    assert actuated_joints(robot) == ["FL_hip_joint", "FL_thigh_joint", "FL_knee_motor"]
    assert robot.actuation.unencoded == ("FL_rod_joint",)
    assert robot.loops[0].frames == ("FL_rod_tip", "FL_calf_pin") and robot.loops[0].type == "planar"
    full = load_loop_robot("b1_fourbar")
    assert full.floating_base and len(full.loops) == 4 and full.n_joints == 20
    spec = yaml.safe_load(loop_robot_path("b1_leg_fourbar").read_text())
    for key, val, match in (("actuation", {"passive": ["FL_nope"]}, "FL_nope"),
                            ("loops", [{"frames": ["a", "b"], "type": "planar"}], "needs axis")):
        bad = tmp_path / f"bad_{key}.yaml"
        bad.write_text(yaml.safe_dump({**spec, key: val, "urdf": str(DATA_DIR / spec["urdf"])}))
        with pytest.raises(RobotError, match=match):
            load_loop_robot(str(bad))
    with pytest.raises(LoopRobotError, match="unknown looped robot"):
        load_loop_robot("no_such_robot")


@pytest.mark.parametrize("name", ["fourbar", "b1_leg_fourbar", "b1_fourbar"])
def test_catalog_names_and_spec_files_give_the_same_looped_robot(name):
    from fg_sysid.robots import load_robot

    by_name, by_file = load_robot(name), load_robot(str(loop_robot_path(name)))
    looped = load_loop_robot(name)
    for r in (by_name, by_file):
        assert r.joint_names == looped.joint_names and r.floating_base == looped.floating_base
        assert r.loops == looped.loops and r.actuation == looped.actuation


@pytest.mark.parametrize("name", ["fourbar", "b1_leg_fourbar", "b1_fourbar"])
def test_closure_jacobians_against_central_differences(name):
    robot = load_loop_robot(name)
    from fg_sysid.datasets.mujoco_loops import reference_configuration

    ck = ClosureKinematics(robot.model, robot.loops)
    q = reference_configuration(robot)
    assert np.abs(ck.residual(q)).max() < 1e-12
    act, dep = _indices(robot)
    iv = np.asarray(robot.joint_index_v())
    iq = np.asarray(robot.joint_index_q())
    q[iq[act]] += 0.1
    q = ck.solve_passive(q, iv[dep])
    J = ck.jacobian(q)
    eps = 1e-6
    Jn = np.column_stack([(ck.residual(pin.integrate(robot.model, q, eps * e))
                           - ck.residual(pin.integrate(robot.model, q, -eps * e))) / (2 * eps)
                          for e in np.eye(robot.nv)])
    assert np.abs(J - Jn).max() < 1e-7
    rng = np.random.default_rng(0)
    ind = np.setdiff1d(np.arange(robot.nv), iv[dep])
    v, a, G = ck.complete(q, rng.normal(size=ind.size), rng.normal(size=ind.size), iv[dep])
    assert np.abs(J @ G).max() < 1e-10 and np.abs(J @ v).max() < 1e-10
    # J a + J̇ v = 0  <=>  the closure's second derivative along q(t) = q ⊕ (v t + a t²/2) vanishes
    h = 1e-4
    c = [ck.residual(pin.integrate(robot.model, q, v * s + 0.5 * a * s * s)) for s in (-h, 0.0, h)]
    assert np.abs((c[0] - 2 * c[1] + c[2]) / h**2).max() < 1e-5 * max(1.0, np.abs(a).max())


def test_mujoco_truth_closes_its_loops_and_logs_the_spec_columns(fourbar):
    robot = fourbar
    res = simulate_loop_mujoco(robot, duration=1.0, rate=200.0, noise=0.01, seed=3)
    assert res.closure_violation <= 1e-6
    assert res.truth["closure_violation_max_m"] == res.closure_violation
    assert res.log.joint_names == ("crank_joint", "rocker_joint")  # the coupler is unencoded
    assert np.all(np.isfinite(res.log.tau[:, 0])) and np.all(np.isnan(res.log.tau[:, 1]))
    assert not res.truth["in_class"] and res.truth["passive"] == ["coupler_joint", "rocker_joint"]
    P = res.truth["parameters"]
    assert P["coupler_joint.fc"] == 0.0 and P["crank_joint.fc"] > 0


def test_mujoco_dynamics_agree_with_the_constrained_inverse_dynamics(b1_leg):
    """Oracle: MuJoCo's motor torques = Gᵀ(RNEA_true + armature·a + fv·v) + dry friction, |dry| ≤ fc."""
    robot = b1_leg
    res = simulate_loop_mujoco(robot, duration=0.5, rate=200.0, noise=0.0, seed=1)
    P = res.truth["parameters"]
    from fg_sysid.datasets.simulate import truth_arrays

    tr = truth_arrays(res.truth, robot)
    model = robot.pinocchio_model_with(tr["inertial"])
    model.armature = np.asarray(tr["armature"], float)
    ck = ClosureKinematics(robot.model, robot.loops)
    act, dep = _indices(robot)
    fc = np.array([P[f"{robot.joint_names[i]}.fc"] for i in act])
    worst = 0.0
    for k in range(len(res.truth_log.t)):
        q, v, a = res.truth_log.q[k], res.truth_log.v[k], res.truth_acceleration[k]
        u, _ = constrained_torque(model, ck, dep, act, q, v, a, tr["fv"] * v)
        dry = res.truth_log.tau[k, act] - u
        worst = max(worst, float(np.max(np.abs(dry) / fc)))
    assert worst <= 1.02, worst  # |τ_dry| ≤ fc up to MuJoCo's constraint softness
    assert worst > 0.5  # the dry friction is there (the check can fail)


def test_constraint_elimination_ls_recovers_an_in_class_truth(b1_leg):
    robot = b1_leg
    train = simulate_loop_inclass(robot, duration=2.5, rate=200.0, noise=0.0, seed=0)
    held = simulate_loop_inclass(robot, duration=1.5, rate=200.0, noise=0.0, seed=1, truth=train.truth)
    ce = ConstraintEliminationLS(robot).fit(train.log, exact=True)
    names = parameter_names(robot)
    est = dict(zip(names, ce.result_.estimate, strict=True))
    P = train.truth["parameters"]
    for j in actuated_joints(robot):
        for s in ("fc", "fv"):
            assert est[f"{j}.{s}"] == pytest.approx(P[f"{j}.{s}"], rel=0.02), f"{j}.{s}"
    st = loop_states(robot, held.log, exact=True)
    u = ce.predict(st)
    rel = np.sqrt(np.mean((u - st.tau) ** 2, 0)) / np.sqrt(np.mean(st.tau**2, 0))
    assert np.all(rel < 2e-3), rel
    # the nominal model is far off on the same states: the check can fail
    from fg_sysid.estimation.loop_baseline import nominal_parameters

    u0 = predict_loop_efforts(robot, nominal_parameters(robot), st)
    assert np.all(np.sqrt(np.mean((u0 - st.tau) ** 2, 0)) / np.sqrt(np.mean(st.tau**2, 0)) > 0.03)


def test_loop_baseline_inputs_name_the_culprit(b1_leg):
    robot = b1_leg
    serial = load_loop_robot("b1_leg_serial")
    t = np.arange(20) * 0.01
    log = Log(t=t, q=np.zeros((20, 2)), v=np.zeros((20, 2)), tau=np.zeros((20, 2)),
              joint_names=("FL_hip_joint", "FL_thigh_joint"), source="bad.csv")
    with pytest.raises(LoopBaselineError, match="FL_knee_motor"):
        loop_states(robot, log)
    with pytest.raises(LoopBaselineError, match="FL_calf_joint"):
        serial_log(log, serial, {"FL_calf_joint": "FL_knee_motor"})
    good = Log(t=t, q=np.arange(80.0).reshape(20, 4), v=None, tau=np.arange(80.0).reshape(20, 4) + 0.5,
               joint_names=("FL_hip_joint", "FL_thigh_joint", "FL_calf_joint", "FL_knee_motor"), source="ok")
    s = serial_log(good, serial, {"FL_calf_joint": "FL_knee_motor"})
    assert s.joint_names == serial.joint_names
    np.testing.assert_array_equal(s.tau[:, 2], good.tau[:, 3])  # knee torque = motor torque
    np.testing.assert_array_equal(s.q[:, 2], good.q[:, 2])      # calf encoder as the knee angle


def test_floating_b1_fourbar_stands_in_mujoco_with_closed_loops():
    from fg_sysid.datasets.mujoco_loops import simulate_loop_stance

    robot = load_loop_robot("b1_fourbar")
    res, log, viol = simulate_loop_stance(robot, duration=0.3, rate=200.0, noise=0.01, seed=2,
                                          motion="stand")
    assert viol <= 1e-6
    assert res.contact.all()  # four feet down
    assert abs(res.base_pos[-1, 2] - res.base_pos[0, 2]) < 0.01
    assert "FL_rod_joint" not in log.joint_names and "FL_knee_motor" in log.joint_names
    i_calf, i_knee = log.joint_names.index("FL_calf_joint"), log.joint_names.index("FL_knee_motor")
    assert np.all(np.isnan(log.tau[:, i_calf])) and np.all(np.isfinite(log.tau[:, i_knee]))
    assert log.base_pos is not None and set(log.contacts) == set(robot.contact_frames)
    assert res.truth["parameters"]["FL_rod_joint.armature"] == 0.0


def test_cli_simulate_looped_robot(tmp_path):
    import pandas as pd
    from click.testing import CliRunner

    from fg_sysid.cli import main

    out = tmp_path / "sim"
    r = CliRunner().invoke(main, ["simulate", "--robot", "b1_leg_fourbar", "--simulator", "mujoco",
                                  "--duration", "0.5", "--rate", "200", "--out", str(out)])
    assert r.exit_code == 0, r.output
    cols = list(pd.read_parquet(out / "log.parquet").columns)
    assert "q.FL_rod_joint" not in cols and "q.FL_calf_joint" in cols  # unencoded rod, encoded calf
    assert "tau.FL_calf_joint" not in cols and "tau.FL_knee_motor" in cols  # efforts of actuated joints
    assert (out / "truth.json").is_file() and "closure violation" in r.output
    bad = tmp_path / "bad"
    r = CliRunner().invoke(main, ["simulate", "--robot", "fourbar", "--effort-offset", "0.1",
                                  "--out", str(bad)])
    assert r.exit_code == 2 and "error:" in r.output and "--effort-offset" in r.output
    assert not bad.exists()
