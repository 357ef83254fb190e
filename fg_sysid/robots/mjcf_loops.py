"""Looped robots from MJCF: equality constraints → `LoopClosure`s, actuators → `Actuation` (issue 11).

Pinocchio's own parser (`pinocchio.buildModelAndConstraintsFromMJCF`, Pinocchio ≥ 3.4; checked with
4.1.0) reads the kinematic tree and the equality constraints: ``<connect>`` becomes a
`PointAnchorConstraintModel` (here a ``point3d`` closure), ``<weld>`` a `FrameAnchorConstraintModel`
(``6d``). MuJoCo semantics hold: the second anchor is where the first one is at ``qpos0``. Each anchor
becomes an operational frame ``<name>_a`` / ``<name>_b`` of the model (name = the equality's name, or
``loop<i>``). What Pinocchio's parser does not read is taken from MuJoCo's compiled model: actuators
(joint transmissions; their ``gear[0]`` is the gear ratio N, joints without an actuator are passive)
and ``jointpos`` sensors (when the file has any, joints without one are unencoded).

Known limitation (Pinocchio 4.1.0): only the **first** body under ``<worldbody>`` is parsed; wrap a
mechanism with several ground-attached chains (a four-bar's crank and rocker) in one root body.
"""

from __future__ import annotations

from pathlib import Path

import pinocchio as pin

from .loops import Actuation, LoopClosure
from .model import RobotError, RobotModel


def robot_from_mjcf(path: str | Path, name: str | None = None) -> RobotModel:
    """A `RobotModel` with ``loops`` and ``actuation`` from an MJCF file (see the module docstring).
    A root ``<freejoint>`` gives a floating base."""
    path = Path(path)
    if not path.is_file():
        raise RobotError(f"MJCF file not found: {path}")
    try:
        model, points, frames = pin.buildModelAndConstraintsFromMJCF(str(path))
    except Exception as e:  # pinocchio raises plain ValueError / RuntimeError
        raise RobotError(f"cannot parse MJCF {path} with Pinocchio: {e}") from None
    names = _equality_names(path)
    loops = []
    for kind, cms in (("point3d", points), ("6d", frames)):
        for cm in cms:
            i = len(loops)
            label = names[i] if i < len(names) and names[i] else f"loop{i}"
            fa, fb = f"{label}_a", f"{label}_b"
            for fname, jid, placement in ((fa, cm.joint1_id, cm.joint1_placement),
                                          (fb, cm.joint2_id, cm.joint2_placement)):
                model.addFrame(pin.Frame(fname, int(jid), pin.SE3(placement), pin.FrameType.OP_FRAME))
            loops.append(LoopClosure(label, (fa, fb), kind))
    floating = model.njoints > 1 and model.joints[1].shortname() == "JointModelFreeFlyer"
    robot = RobotModel._from_pinocchio(model, name or path.stem, None, floating, {})
    return robot.with_metadata(loops=tuple(loops), actuation=_actuation(path, robot))


def _mujoco_model(path: Path):
    import mujoco

    try:
        return mujoco.MjModel.from_xml_path(str(path))
    except Exception as e:
        raise RobotError(f"cannot compile MJCF {path} with MuJoCo: {e}") from None


def _equality_names(path: Path) -> list:
    """Names of the connect and weld equalities in Pinocchio's order (connects first, then welds)."""
    import mujoco

    m = _mujoco_model(path)
    out = {mujoco.mjtEq.mjEQ_CONNECT: [], mujoco.mjtEq.mjEQ_WELD: []}
    for i in range(m.neq):
        if int(m.eq_type[i]) in out:
            out[int(m.eq_type[i])].append(mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_EQUALITY, i))
    return out[mujoco.mjtEq.mjEQ_CONNECT] + out[mujoco.mjtEq.mjEQ_WELD]


def _actuation(path: Path, robot: RobotModel) -> Actuation | None:
    """Gear ratios and passive joints from the actuators, unencoded joints from the jointpos sensors."""
    import mujoco

    m = _mujoco_model(path)
    gears = {}
    for i in range(m.nu):
        if int(m.actuator_trntype[i]) == mujoco.mjtTrn.mjTRN_JOINT:
            j = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, int(m.actuator_trnid[i, 0]))
            if j in robot.joint_names:
                gears[j] = abs(float(m.actuator_gear[i, 0])) or 1.0
    encoded = {mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, int(m.sensor_objid[i]))
               for i in range(m.nsensor) if int(m.sensor_type[i]) == mujoco.mjtSensor.mjSENS_JOINTPOS}
    if not gears and not encoded:
        return None
    passive = tuple(j for j in robot.joint_names if gears and j not in gears)
    unencoded = tuple(j for j in robot.joint_names if encoded and j not in encoded)
    return Actuation(gears, passive, unencoded)
