"""MJCF input of looped robots (fg_sysid.robots.mjcf_loops): equality constraints → closures through
Pinocchio's `buildModelAndConstraintsFromMJCF`, actuators → gear ratios and passive joints, jointpos
sensors → encoded joints. The MJCF is built with MuJoCo's MjSpec (no XML templates)."""

import numpy as np
import pytest

from fg_sysid.factors.loops import LoopClosures
from fg_sysid.robots.model import RobotError
from fg_sysid.robots.spec import load_robot


def _fourbar_mjcf(path, root_body=True, weld=False):
    mujoco = pytest.importorskip("mujoco")
    s = mujoco.MjSpec()
    base = s.worldbody.add_body(name="base") if root_body else s.worldbody
    H, C = mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtGeom.mjGEOM_CAPSULE
    bodies = {}
    for name, parent, pos, length in (("crank", None, [0, 0, 0], 0.1), ("coupler", "crank", [0.1, 0, 0], 0.3),
                                      ("rocker", None, [0.3, 0, 0], 0.25)):
        b = (bodies[parent] if parent else base).add_body(name=name, pos=pos)
        b.add_joint(name=f"{name}_joint", type=H, axis=[0, 1, 0])
        b.add_geom(type=C, fromto=[0, 0, 0, length, 0, 0], size=[0.01, 0, 0])
        b.add_site(name=f"{name}_site")
        bodies[name] = b
    eq = s.add_equality()
    eq.name, eq.objtype = "knee", mujoco.mjtObj.mjOBJ_BODY
    eq.type = mujoco.mjtEq.mjEQ_WELD if weld else mujoco.mjtEq.mjEQ_CONNECT
    eq.name1, eq.name2 = "coupler", "rocker"
    eq.data[0:3] = [0.3, 0, 0]
    act = s.add_actuator()
    act.name, act.target, act.trntype = "motor", "crank_joint", mujoco.mjtTrn.mjTRN_JOINT
    act.gear[0] = 10.0
    for j in ("crank_joint", "rocker_joint"):
        sen = s.add_sensor()
        sen.name, sen.type, sen.objtype, sen.objname = f"enc_{j}", mujoco.mjtSensor.mjSENS_JOINTPOS, \
            mujoco.mjtObj.mjOBJ_JOINT, j
    s.compile()
    path.write_text(s.to_xml())
    return path


@pytest.mark.parametrize("weld", [False, True])
def test_mjcf_equalities_become_closures(tmp_path, weld):
    robot = load_robot(_fourbar_mjcf(tmp_path / "fourbar.xml", weld=weld))
    assert robot.joint_names == ("crank_joint", "coupler_joint", "rocker_joint")
    (loop,) = robot.loops
    assert loop.name == "knee" and loop.type == ("6d" if weld else "point3d")
    act = robot.actuation
    assert act.gear("crank_joint") == 10.0
    assert act.passive == ("coupler_joint", "rocker_joint") and act.unencoded == ("coupler_joint",)
    # MuJoCo semantics: the second anchor is where the first one is at qpos0 → φ(0) = 0, φ(q) ≠ 0
    L = LoopClosures(robot.model, robot.loops)
    assert np.abs(L.position(np.zeros((1, 3)), False)[0]).max() < 1e-12
    assert np.abs(L.position(np.array([[0.3, 0.0, 0.0]]), False)[0]).max() > 1e-2


def test_mjcf_several_root_bodies_is_a_clear_error(tmp_path):
    """Pinocchio 4.1's MJCF parser keeps only the first body under <worldbody>: the rocker is lost and
    the equality cannot be resolved — reported as a RobotError naming the file."""
    path = _fourbar_mjcf(tmp_path / "flat.xml", root_body=False)
    with pytest.raises(RobotError, match=r"flat.xml.*rocker"):
        load_robot(path)
