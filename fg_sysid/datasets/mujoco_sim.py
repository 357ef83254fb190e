"""Floating-base legged-robot data from MuJoCo (issue 3 item 6, first slice).

`build_mujoco_spec` / `build_mujoco_model` rebuild a `RobotModel` (fixed or free-flyer root, 1-DoF
joints) as a MuJoCo model with `mujoco.MjSpec` — URDFs such as example-robot-data's ``b1.urdf`` do not
load in MuJoCo directly.
One MuJoCo body per Pinocchio joint, placed at ``model.jointPlacements`` (so MuJoCo body frames are
Pinocchio joint frames), explicit inertials from the Pinocchio inertias (COM position + full inertia
about the COM), hinge/slide axes from the joint types, ``frictionloss`` (Coulomb), ``damping``
(viscous) and ``armature`` per joint, sphere geoms at the foot frames colliding with a ground plane,
an IMU site on the base (gyro + accelerometer), one motor actuator per joint, ``implicitfast``.

`simulate_stance` stands the robot on its feet with a joint PD controller and a slow sinusoidal body
sway (``motion="sway"``), a still stance (``"stand"``), an open-loop trot in place (``"trot"``) or a
static step in place that lifts one foot at a time (``"steps"``) and
logs joint/base/IMU/contact signals at ``rate``. `to_log` turns the result into a (noisy) `Log`,
`write_mujoco_simulation` writes ``log.parquet``, ``truth.json`` and ``truth_trajectory.parquet``.

Truth draws (``randomize=True``, all from ``seed``; ``U`` = uniform):

* inertias: `simulate.perturb_inertia` per body (mass, second moments, axes, COM; physically
  consistent);
* per joint, relative to the joint's torque scale ``E_i`` (URDF effort limit) and speed scale
  ``W_i`` (URDF velocity limit): Coulomb ``fc_i = U(0.5, 1.5)·0.02·E_i`` (MuJoCo ``frictionloss``),
  viscous ``fv_i = U(0.5, 1.5)·0.02·E_i / W_i`` (``damping``), armature ``U(0.5, 1.5)·0.1·M_ii``
  (``M_ii`` = joint diagonal of the mass matrix at the standing posture).

Noise (``noise`` = σ, zero-mean Gaussian, independent per sample and channel, from ``seed``; only on
the measured copies in ``StanceResult.meas``, never on the truth arrays): σ on joint q [rad], v
[rad/s] and τ [N·m]; σ on the gyro [rad/s] and 10·σ on the accelerometer [m/s²] (the accelerometer
measures ~9.81 m/s² at rest, so an absolute σ that is 10× the gyro's keeps a similar relative
level). The base pose (a motion-capture-like reference), the IMU orientation and the contact
flags/forces are logged noise-free.

Coordinate conventions (see `mj_to_pin` / `pin_to_mj`):

* MuJoCo free joint: ``qpos = [p_world, quat (w, x, y, z)]``, ``qvel = [v_world, omega_local]``
  (linear velocity of the body origin in the world frame, angular velocity in the body frame).
* Pinocchio free flyer: ``q = [p_world, quat (x, y, z, w)]``, ``v = [R^T v_world, omega_local]``
  (both in the local base frame).

Friction note: MuJoCo's ``frictionloss`` is a constraint-based (dry) Coulomb friction, not the
``fc·tanh(v/vs)`` of `simulate.friction_torque`; the truth records ``friction_model`` accordingly.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

import mujoco
import numpy as np
import pandas as pd
import pinocchio as pin

from ..robots import INERTIAL_SUFFIXES, RobotModel
from .log import Log
from .simulate import perturb_inertia

DEFAULT_FOOT_FRAMES = ("FL_foot", "FR_foot", "RL_foot", "RR_foot")
FRICTION_MODEL = "mujoco-frictionloss-damping"
MOTIONS = ("sway", "stand", "trot", "steps")
FRICTION_RANGE = (0.5, 1.5)
COULOMB_FRACTION = 0.02  # of the effort limit
VISCOUS_FRACTION = 0.02  # of the effort limit, at the velocity limit
ARMATURE_FRACTION = 0.1  # of the joint's diagonal mass-matrix entry at the standing posture
ACC_NOISE_FACTOR = 10.0  # accelerometer σ = ACC_NOISE_FACTOR · noise
_AXES = {"X": (1.0, 0.0, 0.0), "Y": (0.0, 1.0, 0.0), "Z": (0.0, 0.0, 1.0)}


class MujocoSimError(ValueError):
    """Bad input for the MuJoCo simulator (the message names the culprit)."""


@dataclass(frozen=True, eq=False)
class MujocoInfo:
    """Mapping between the Pinocchio model and the MuJoCo model built from it.

    Attributes:
        joint_names: actuated joints (RobotModel order).
        body_names: MuJoCo body name per Pinocchio joint 1..njoints-1 (= RobotModel.body_names).
        qpos_adr, dof_adr: MuJoCo qpos / qvel address of each actuated joint.
        pin_idx_q, pin_idx_v: Pinocchio q / v index of each actuated joint.
        actuator_ids: MuJoCo actuator id per joint (same order).
        foot_frames: Pinocchio frame names of the feet; foot_geoms / foot_sites: MuJoCo ids.
        floor_geom: id of the ground plane; imu_site: site id; sensor_adr: {"gyro": adr, "acc": adr}.
        base_body: MuJoCo body id of the floating base.
    """

    joint_names: tuple[str, ...]
    body_names: tuple[str, ...]
    qpos_adr: np.ndarray
    dof_adr: np.ndarray
    pin_idx_q: np.ndarray
    pin_idx_v: np.ndarray
    actuator_ids: np.ndarray
    foot_frames: tuple[str, ...]
    foot_geoms: np.ndarray
    foot_sites: np.ndarray
    floor_geom: int
    imu_site: int
    sensor_adr: dict
    base_body: int
    foot_radius: float


# ---------------------------------------------------------------------------------------------- model
def _check_robot(robot: RobotModel) -> None:
    if not robot.floating_base:
        raise MujocoSimError(f"robot {robot.name!r}: the MuJoCo simulator needs a free-flyer root")
    if robot.model.joints[1].shortname() != "JointModelFreeFlyer":
        raise MujocoSimError(f"robot {robot.name!r}: joint 1 is not a free flyer")


def _joint_axis(jm) -> tuple[str, np.ndarray]:
    """('hinge'|'slide', axis) of a Pinocchio 1-DoF joint model."""
    name = jm.shortname()
    for prefix, kind in (("JointModelRevoluteUnaligned", "hinge"), ("JointModelPrismaticUnaligned", "slide")):
        if name.startswith(prefix):
            return kind, np.array(jm.axis, float)
    for prefix, kind in (("JointModelRUB", "hinge"), ("JointModelR", "hinge"), ("JointModelP", "slide")):
        if name.startswith(prefix) and name[-1] in _AXES:
            if prefix == "JointModelRUB":
                raise MujocoSimError(f"continuous joint {name} is not supported (lock it)")
            return kind, np.array(_AXES[name[-1]])
    raise MujocoSimError(f"unsupported joint type {name}")


def _per_joint(values, n, what) -> np.ndarray:
    if values is None:
        return np.zeros(n)
    arr = np.broadcast_to(np.asarray(values, float), (n,)).copy()
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise MujocoSimError(f"{what} must be finite and >= 0 per joint, got {arr}")
    return arr


def build_mujoco_spec(
    robot: RobotModel,
    inertial: np.ndarray | None = None,
    friction: tuple | dict | None = None,
    armature=None,
    foot_frames: tuple[str, ...] | None = DEFAULT_FOOT_FRAMES,
    foot_radius: float = 0.02,
    timestep: float = 0.0005,
    foot_friction: float = 1.0,
) -> mujoco.MjSpec:
    """`mujoco.MjSpec` of ``robot`` (fixed or free-flyer root, 1-DoF joints; see the module docstring).

    The single MuJoCo builder of the project: the simulators compile it (`build_mujoco_model`) and
    the MJCF export writes it (``spec.to_xml()``).

    Args:
        inertial: (n_bodies, 10) Pinocchio dynamic parameters (m, m·c, I about the joint frame) in
            SI units; default the URDF nominal.
        friction: ``(fc, fv)`` per joint (or dict with keys ``fc``, ``fv``) — Coulomb [N·m | N] as
            MuJoCo ``frictionloss``, viscous [N·m·s/rad | N·s/m] as ``damping``; default the URDF values.
        armature: per joint [kg·m² | kg] (scalar broadcasts); default 0.
        foot_frames: Pinocchio frame names where contact spheres go (their centres). Floating bases
            only; ``None`` (or a fixed base) adds no feet, no floor and no IMU.
    """
    model = robot.model
    floating = bool(robot.floating_base)
    if floating and model.joints[1].shortname() != "JointModelFreeFlyer":
        raise MujocoSimError(f"robot {robot.name!r}: joint 1 is not a free flyer")
    n = robot.n_joints
    P = robot.nominal_inertial_parameters() if inertial is None else np.asarray(inertial, float)
    if P.shape != (robot.n_bodies, 10):
        raise MujocoSimError(f"inertial must have shape ({robot.n_bodies}, 10), got {P.shape}")
    if friction is None:
        fc, fv = robot.urdf_friction, robot.urdf_damping
    elif isinstance(friction, dict):
        fc, fv = friction["fc"], friction["fv"]
    else:
        fc, fv = friction
    fc, fv = _per_joint(fc, n, "fc"), _per_joint(fv, n, "fv")
    arm = _per_joint(armature, n, "armature")
    feet = tuple(foot_frames or ()) if floating else ()
    for f in feet:
        if not model.existFrame(f):
            raise MujocoSimError(f"robot {robot.name!r} has no frame {f!r}")

    spec = mujoco.MjSpec()
    spec.modelname = f"{robot.name}_fg_sysid"
    spec.compiler.inertiafromgeom = mujoco.mjtInertiaFromGeom.mjINERTIAFROMGEOM_FALSE
    spec.compiler.balanceinertia = False
    spec.compiler.boundmass = 0.0
    spec.compiler.boundinertia = 0.0
    spec.option.timestep = float(timestep)
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    spec.option.gravity = np.array(model.gravity.linear, float)

    if floating:
        floor = spec.worldbody.add_geom(
            name="floor", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0.0, 0.0, 0.05],
            friction=[foot_friction, 0.005, 0.0001],
        )
        floor.contype, floor.conaffinity = 1, 1

    jn_index = {j: i for i, j in enumerate(robot.joint_names)}
    bodies = {0: spec.worldbody}
    for j in range(1, model.njoints):
        parent = bodies[int(model.parents[j])]
        M = model.jointPlacements[j]
        body = parent.add_body(name=robot.body_names[j - 1])
        body.pos = np.array(M.translation, float)
        body.quat = pin.Quaternion(M.rotation).coeffs()[[3, 0, 1, 2]]  # w, x, y, z
        inert = pin.Inertia.FromDynamicParameters(P[j - 1])
        I_c = np.array(inert.inertia, float)
        body.explicitinertial = True
        body.mass = float(inert.mass)
        body.ipos = np.array(inert.lever, float)
        body.iquat = [1.0, 0.0, 0.0, 0.0]
        body.fullinertia = [I_c[0, 0], I_c[1, 1], I_c[2, 2], I_c[0, 1], I_c[0, 2], I_c[1, 2]]
        if j == 1 and floating:
            body.add_freejoint(name=model.names[j])
            body.add_site(name="imu", pos=[0.0, 0.0, 0.0])
        else:
            kind, axis = _joint_axis(model.joints[j])
            i = jn_index[model.names[j]]
            jt = body.add_joint(
                name=model.names[j],
                type=mujoco.mjtJoint.mjJNT_HINGE if kind == "hinge" else mujoco.mjtJoint.mjJNT_SLIDE,
                axis=axis,
            )
            jt.frictionloss = float(fc[i])
            jt.damping = [float(fv[i]), 0.0, 0.0]  # linear term only (mujoco 4: polynomial)
            jt.armature = float(arm[i])
        bodies[j] = body

    for f in feet:
        fr = model.frames[model.getFrameId(f)]
        body = bodies[int(fr.parentJoint)]
        pos = np.array(fr.placement.translation, float)
        g = body.add_geom(name=f"{f}_geom", type=mujoco.mjtGeom.mjGEOM_SPHERE,
                          size=[foot_radius, 0.0, 0.0], pos=pos, friction=[foot_friction, 0.005, 0.0001])
        g.contype, g.conaffinity = 1, 1
        g.condim = 3
        body.add_site(name=f"{f}_site", pos=pos)

    effort = robot.effort_limits()
    for i, jname in enumerate(robot.joint_names):
        act = spec.add_actuator(name=f"{jname}_motor", target=jname,
                                trntype=mujoco.mjtTrn.mjTRN_JOINT)
        act.gainprm[0] = 1.0
        if np.isfinite(effort[i]):
            act.ctrllimited = 1
            act.ctrlrange = [-float(effort[i]), float(effort[i])]

    if floating:
        spec.add_sensor(name="imu_gyro", type=mujoco.mjtSensor.mjSENS_GYRO,
                        objtype=mujoco.mjtObj.mjOBJ_SITE, objname="imu")
        spec.add_sensor(name="imu_acc", type=mujoco.mjtSensor.mjSENS_ACCELEROMETER,
                        objtype=mujoco.mjtObj.mjOBJ_SITE, objname="imu")
    return spec


def build_mujoco_model(
    robot: RobotModel,
    inertial: np.ndarray | None = None,
    friction: tuple | dict | None = None,
    armature=None,
    foot_frames: tuple[str, ...] | None = DEFAULT_FOOT_FRAMES,
    foot_radius: float = 0.02,
    timestep: float = 0.0005,
    foot_friction: float = 1.0,
) -> tuple[mujoco.MjModel, MujocoInfo]:
    """Compiled MuJoCo model of ``robot`` (`build_mujoco_spec`) and its `MujocoInfo` map.

    Fixed-base robots get no feet, floor or IMU: ``foot_*`` arrays are empty and ``imu_site``,
    ``floor_geom``, ``sensor_adr`` entries are -1.
    """
    spec = build_mujoco_spec(robot, inertial, friction, armature, foot_frames, foot_radius, timestep,
                             foot_friction)
    try:
        mj = spec.compile()
    except Exception as e:  # mujoco raises ValueError with the compiler message
        raise MujocoSimError(f"robot {robot.name!r}: MuJoCo compile failed: {e}") from None
    floating = bool(robot.floating_base)
    feet = tuple(foot_frames or ()) if floating else ()

    def oid(kind, name):
        return int(mujoco.mj_name2id(mj, kind, name))

    def jid(name):
        return oid(mujoco.mjtObj.mjOBJ_JOINT, name)

    def sensor(name):
        i = oid(mujoco.mjtObj.mjOBJ_SENSOR, name)
        return int(mj.sensor_adr[i]) if i >= 0 else -1

    info = MujocoInfo(
        joint_names=tuple(robot.joint_names),
        body_names=tuple(robot.body_names),
        qpos_adr=np.array([mj.jnt_qposadr[jid(j)] for j in robot.joint_names], int),
        dof_adr=np.array([mj.jnt_dofadr[jid(j)] for j in robot.joint_names], int),
        pin_idx_q=robot.joint_index_q(),
        pin_idx_v=robot.joint_index_v(),
        actuator_ids=np.array([oid(mujoco.mjtObj.mjOBJ_ACTUATOR, f"{j}_motor") for j in robot.joint_names],
                              int),
        foot_frames=feet,
        foot_geoms=np.array([oid(mujoco.mjtObj.mjOBJ_GEOM, f"{f}_geom") for f in feet], int),
        foot_sites=np.array([oid(mujoco.mjtObj.mjOBJ_SITE, f"{f}_site") for f in feet], int),
        floor_geom=oid(mujoco.mjtObj.mjOBJ_GEOM, "floor"),
        imu_site=oid(mujoco.mjtObj.mjOBJ_SITE, "imu"),
        sensor_adr={"gyro": sensor("imu_gyro"), "acc": sensor("imu_acc")},
        base_body=oid(mujoco.mjtObj.mjOBJ_BODY, robot.body_names[0]),
        foot_radius=float(foot_radius),
    )
    return mj, info


# ---------------------------------------------------------------------------------------------- q/v maps
def pin_to_mj(q_pin, v_pin, info: MujocoInfo, nq_mj: int, nv_mj: int) -> tuple[np.ndarray, np.ndarray]:
    """Pinocchio ``(q, v)`` -> MuJoCo ``(qpos, qvel)`` (see the module docstring)."""
    q_pin = np.asarray(q_pin, float)
    qpos = np.zeros(nq_mj)
    qpos[:3] = q_pin[:3]
    x, y, z, w = q_pin[3:7]
    nrm = math.sqrt(w * w + x * x + y * y + z * z)
    qpos[3:7] = np.array([w, x, y, z]) / nrm
    qpos[info.qpos_adr] = q_pin[info.pin_idx_q]
    qvel = np.zeros(nv_mj)
    if v_pin is not None:
        v_pin = np.asarray(v_pin, float)
        R = pin.Quaternion(w / nrm, x / nrm, y / nrm, z / nrm).toRotationMatrix()
        qvel[:3] = R @ v_pin[:3]
        qvel[3:6] = v_pin[3:6]
        qvel[info.dof_adr] = v_pin[info.pin_idx_v]
    return qpos, qvel


def mj_to_pin(qpos, qvel, info: MujocoInfo, nq_pin: int, nv_pin: int) -> tuple[np.ndarray, np.ndarray]:
    """MuJoCo ``(qpos, qvel)`` -> Pinocchio ``(q, v)`` (see the module docstring)."""
    qpos = np.asarray(qpos, float)
    q = np.zeros(nq_pin)
    q[:3] = qpos[:3]
    w, x, y, z = qpos[3:7]
    q[3:7] = [x, y, z, w]
    q[info.pin_idx_q] = qpos[info.qpos_adr]
    v = np.zeros(nv_pin)
    if qvel is not None:
        qvel = np.asarray(qvel, float)
        R = pin.Quaternion(w, x, y, z).normalized().toRotationMatrix()
        v[:3] = R.T @ qvel[:3]
        v[3:6] = qvel[3:6]
        v[info.pin_idx_v] = qvel[info.dof_adr]
    return q, v


def contact_forces(
    mj: mujoco.MjModel, data: mujoco.MjData, info: MujocoInfo
) -> tuple[np.ndarray, np.ndarray]:
    """(flags (n_feet,) bool, forces (n_feet, 3) WORLD force exerted by the ground on each foot)."""
    nf = len(info.foot_geoms)
    flags = np.zeros(nf, bool)
    forces = np.zeros((nf, 3))
    slot = {int(g): i for i, g in enumerate(info.foot_geoms)}
    f6 = np.zeros(6)
    for c in range(data.ncon):
        con = data.contact[c]
        g1, g2 = int(con.geom1), int(con.geom2)
        if g2 in slot:
            i, sign = slot[g2], 1.0  # force in contact frame acts on geom2 (normal from geom1 to geom2)
        elif g1 in slot:
            i, sign = slot[g1], -1.0
        else:
            continue
        mujoco.mj_contactForce(mj, data, c, f6)
        frame = np.array(con.frame, float).reshape(3, 3)  # rows: normal, tangent1, tangent2 (world)
        forces[i] += sign * (frame.T @ f6[:3])
        flags[i] = True
    return flags, forces


# ---------------------------------------------------------------------------------------------- stance
@dataclass(frozen=True, eq=False)
class StanceResult:
    """Logs of `simulate_stance`, one row per sample (N samples at ``rate``).

    Joint arrays are (N, n_joints) in ``joint_names`` order; ``tau`` is the actuator torque MuJoCo
    applied (``qfrc_actuator``); ``base_pos`` (N, 3) world, ``base_quat`` (N, 4) w, x, y, z;
    ``base_lin_vel`` (N, 3) world; ``base_ang_vel`` (N, 3) local base frame (MuJoCo qvel); ``gyro``,
    ``acc`` (N, 3) IMU site frame (acc is the specific force, gravity included); ``contact`` (N, 4)
    bool and ``contact_force`` (N, 4, 3) world force of the ground on each foot; ``q_pin``/``v_pin``
    the full Pinocchio state. All of these are noise-free; ``meas`` holds the noisy measured copies
    ``q``, ``v``, ``tau``, ``gyro``, ``acc`` (see the module docstring for σ).
    """

    t: np.ndarray
    q: np.ndarray
    v: np.ndarray
    tau: np.ndarray
    q_des: np.ndarray
    gyro: np.ndarray
    acc: np.ndarray
    base_pos: np.ndarray
    base_quat: np.ndarray
    base_lin_vel: np.ndarray
    base_ang_vel: np.ndarray
    contact: np.ndarray
    contact_force: np.ndarray
    q_pin: np.ndarray
    v_pin: np.ndarray
    joint_names: tuple[str, ...]
    foot_frames: tuple[str, ...]
    truth: dict = field(default_factory=dict)
    meas: dict = field(default_factory=dict)


def standing_posture(robot: RobotModel, thigh: float = 0.8, calf: float = -1.5) -> np.ndarray:
    """Joint angles (n_joints,): hips 0, ``*thigh*`` joints ``thigh``, ``*calf*`` joints ``calf``."""
    qj = np.zeros(robot.n_joints)
    for i, j in enumerate(robot.joint_names):
        if "thigh" in j:
            qj[i] = thigh
        elif "calf" in j or "knee" in j:
            qj[i] = calf
    return qj


def standing_configuration(robot: RobotModel, qj: np.ndarray, foot_frames, foot_radius: float) -> np.ndarray:
    """Pinocchio q with the base level at the height where the lowest foot sphere touches z = 0."""
    q = pin.neutral(robot.model)
    q[robot.joint_index_q()] = qj
    d = robot.model.createData()
    pin.framesForwardKinematics(robot.model, d, q)
    zmin = min(d.oMf[robot.model.getFrameId(f)].translation[2] for f in foot_frames)
    q[2] = -zmin + foot_radius
    return q


def _sway_offsets(robot: RobotModel, t: float, amplitude: float) -> np.ndarray:
    """Slow body sway: lateral roll via the hips, height and pitch via thighs/calves."""
    ramp = min(1.0, t / 0.5)
    off = np.zeros(robot.n_joints)
    for i, j in enumerate(robot.joint_names):
        front = j.startswith("F")
        if "hip" in j:
            off[i] = 0.6 * amplitude * math.sin(2 * math.pi * 0.7 * t)
        elif "thigh" in j:
            off[i] = amplitude * (math.sin(2 * math.pi * 0.5 * t)
                                  + (0.5 if front else -0.5) * math.sin(2 * math.pi * 0.9 * t))
        elif "calf" in j:
            off[i] = -2.0 * amplitude * math.sin(2 * math.pi * 0.5 * t)
    return ramp * off


def _trot_offsets(robot: RobotModel, t: float, amplitude: float, period: float) -> np.ndarray:
    """Open-loop trot in place: diagonal pairs (FL+RR, FR+RL) alternately fold thigh/calf by a
    half-sine of ``amplitude`` (thigh +a, calf -2a, lifting the foot) for half of ``period``."""
    ramp = min(1.0, t / 0.5)
    phase = math.sin(2 * math.pi * t / period)
    lift = {0: max(0.0, phase), 1: max(0.0, -phase)}
    off = np.zeros(robot.n_joints)
    for i, j in enumerate(robot.joint_names):
        pair = 0 if j[:2] in ("FL", "RR") else 1
        if "thigh" in j:
            off[i] = amplitude * lift[pair]
        elif "calf" in j:
            off[i] = -2.0 * amplitude * lift[pair]
    return ramp * off


def _blend(s: float) -> float:
    """0 -> 1 on s in [0, 1] with zero slope at both ends (half cosine); clamped outside."""
    s = min(max(s, 0.0), 1.0)
    return 0.5 - 0.5 * math.cos(math.pi * s)


class StepPlan:
    """Joint targets of a static step-in-place gait: one foot at a time, in the order FL, FR, RR, RL.

    Each cycle of ``period`` seconds: shift the body (feet fixed, base level) towards the centroid of the
    three other feet (``shift_fraction`` of the way from the robot's COM at the standing posture, first
    quarter of the cycle), lift the foot by ``lift`` m, trace two loops of radius ``loop`` m in the air
    (the swing excites the leg's own inertia, friction and armature, which a four-foot stance cannot
    separate from the contact forces), then set it down with zero target velocity. Joints on no leg (an
    arm) follow slow sines of ``other_amplitude`` rad inside their limits. Leg targets come from a
    leg inverse kinematics (Pinocchio frame Jacobians, Newton steps) on the standing base, precomputed
    at ``rate`` and interpolated linearly.
    """

    ORDER = (0, 1, 3, 2)  # FL, FR, RR, RL: around the body, so consecutive shifts are short

    def __init__(self, robot: RobotModel, q0: np.ndarray, foot_frames, duration: float,
                 period: float = 2.4, lift: float = 0.08, loop: float = 0.05,
                 shift_fraction: float = 0.9, rate: float = 500.0, other_amplitude: float = 0.15):
        model = robot.model
        self._model, self._data = model, model.createData()
        self._feet = tuple(foot_frames)
        self._fid = {f: model.getFrameId(f) for f in self._feet}
        qb = np.asarray(q0, float).copy()
        qb[:3], qb[3:7] = 0.0, (0.0, 0.0, 0.0, 1.0)
        pin.framesForwardKinematics(model, self._data, qb)
        self._p0 = {f: self._data.oMf[self._fid[f]].translation.copy() for f in self._feet}
        com = pin.centerOfMass(model, self._data, qb)[:2]
        self._order = [self._feet[i] for i in self.ORDER if i < len(self._feet)]
        self._shift = {
            f: shift_fraction * (np.mean([self._p0[g][:2] for g in self._feet if g != f], axis=0) - com)
            for f in self._feet
        }
        self.period, self.lift, self.loop = float(period), float(lift), float(loop)
        self._leg = {}  # (q indices, v indices) of the 1-DoF joints between the base and each foot
        for f in self._feet:
            jid, iq, iv = model.frames[self._fid[f]].parentJoint, [], []
            while jid > 1:
                iq.append(model.joints[jid].idx_q)
                iv.append(model.joints[jid].idx_v)
                jid = model.parents[jid]
            self._leg[f] = (np.array(iq), np.array(iv))
        self._iq = robot.joint_index_q()
        self._tg = np.arange(0.0, duration + 2.0 / rate, 1.0 / rate)
        self._Q = np.empty((self._tg.size, self._iq.size))
        # leg joint motion per unit foot height in the base frame (column z of the inverse leg Jacobian)
        self._dq_dz = {f: np.empty((self._tg.size, 3)) for f in self._feet}
        pos = {j: i for i, j in enumerate(self._iq)}
        self._cols = {f: np.array([pos[j] for j in self._leg[f][0]]) for f in self._feet}
        q = qb.copy()
        for k, t in enumerate(self._tg):
            q, J = self._ik(q, self.foot_targets(t))
            self._Q[k] = q[self._iq]
            for f in self._feet:
                self._dq_dz[f][k] = np.linalg.pinv(J[f])[:, 2]
        # joints on no leg (an arm): slow sines of ``other_amplitude`` about the standing value clipped
        # into the URDF limits, so that they move (at rest they stick in dry friction)
        legs = set(np.concatenate([self._leg[f][0] for f in self._feet]).tolist())
        # positions (in the joint list) of the joints on no leg
        self.other_joints = np.array([n for n, j in enumerate(self._iq) if j not in legs], int)
        lo = model.lowerPositionLimit[self._iq[self.other_joints]]
        hi = model.upperPositionLimit[self._iq[self.other_joints]]
        amp = float(other_amplitude)
        base = qb[self._iq[self.other_joints]]
        ok = np.isfinite(lo) & np.isfinite(hi) & (hi - lo > 2 * amp)
        self._other_center = np.where(ok, np.clip(base, lo + amp, hi - amp), base)
        self._other_amp = amp
        self._other_freq = 0.2 + 0.07 * np.arange(self.other_joints.size)  # [Hz]
        self.level_gain = 1.0  # [1/s] integral leveling of the base (see `__call__`)
        self._dz = np.zeros(len(self._feet))
        self._t_last = None

    def foot_targets(self, t: float) -> dict:
        """Foot frame positions [m] in the (level, standing) base frame at time ``t`` [s]."""
        cyc = int(t // self.period)
        s = t / self.period - cyc
        foot = self._order[cyc % len(self._order)]
        prev = self._shift[self._order[(cyc - 1) % len(self._order)]] if cyc > 0 else np.zeros(2)
        shift = prev + (self._shift[foot] - prev) * _blend(s / 0.25)
        out = {}
        for f in self._feet:
            p = self._p0[f].copy()
            p[:2] -= shift
            out[f] = p
        if s > 0.25:
            u = (s - 0.25) / 0.75  # lift on [0, 0.2], loops on [0.2, 0.75], set down on [0.75, 0.95]
            p = out[foot]
            p[2] += self.lift * (_blend(u / 0.2) if u < 0.75 else 1.0 - _blend((u - 0.75) / 0.2))
            if 0.2 <= u < 0.75:
                w = (u - 0.2) / 0.55
                r = self.loop * math.sin(math.pi * w) ** 2
                ang = 4.0 * math.pi * w
                p += r * np.array([math.sin(ang), 0.5 * math.sin(2.0 * ang), 0.5 * (1.0 - math.cos(ang))])
        return out

    def _ik(self, q: np.ndarray, targets: dict) -> tuple[np.ndarray, dict]:
        """Newton steps on each leg's joints to the foot ``targets``; (q, leg Jacobians of the last step)."""
        m, d = self._model, self._data
        J_leg = {}
        for _ in range(20):
            pin.framesForwardKinematics(m, d, q)
            pin.computeJointJacobians(m, d, q)
            worst = 0.0
            for f in self._feet:
                e = targets[f] - d.oMf[self._fid[f]].translation
                worst = max(worst, float(np.abs(e).max()))
                J = pin.getFrameJacobian(m, d, self._fid[f], pin.LOCAL_WORLD_ALIGNED)[:3]
                iq, iv = self._leg[f]
                J_leg[f] = J[:, iv]
                q[iq] += np.linalg.lstsq(J[:, iv], e, rcond=None)[0]
            if worst < 1e-10:
                break
        return q, J_leg

    def __call__(self, t: float, base_quat_wxyz=None) -> np.ndarray:
        """Joint targets (n_joints,) at time ``t`` [s] (linear interpolation of the precomputed grid).

        With the measured base orientation, the foot heights in the base frame get an integral leveling
        correction, dz_i/dt = k (φ y_i − θ x_i) (roll φ, pitch θ, foot position x_i, y_i in the base frame,
        k = ``level_gain``), mapped to the leg joints through the leg Jacobian: open-loop foot placements
        are off by a few millimetres, which would otherwise tilt the body more at every step."""
        x = min(max(float(t), 0.0), self._tg[-1]) / (self._tg[1] - self._tg[0])
        i = min(int(x), self._tg.size - 2)
        a = x - i
        qd = (1.0 - a) * self._Q[i] + a * self._Q[i + 1]
        if self.other_joints.size:
            ramp = _blend(float(t) / 1.0)
            qd[self.other_joints] = (1.0 - ramp) * qd[self.other_joints] + ramp * (
                self._other_center + self._other_amp * np.sin(2.0 * np.pi * self._other_freq * float(t))
            )
        if base_quat_wxyz is None:
            return qd
        w, qx, qy, qz = base_quat_wxyz
        roll = math.atan2(2.0 * (w * qx + qy * qz), 1.0 - 2.0 * (qx * qx + qy * qy))
        pitch = math.asin(max(-1.0, min(1.0, 2.0 * (w * qy - qz * qx))))
        dt = 0.0 if self._t_last is None else max(float(t) - self._t_last, 0.0)
        self._t_last = float(t)
        four_feet = (float(t) / self.period) % 1.0 < 0.25
        for n, f in enumerate(self._feet):
            p = self._p0[f]
            if four_feet:  # level only while all four feet are down (well posed, statically stable)
                self._dz[n] += dt * self.level_gain * (roll * p[1] - pitch * p[0])
            qd[self._cols[f]] += self._dz[n] * self._dq_dz[f][i]
        return qd


def debounce_contacts(flags: np.ndarray, samples: int) -> np.ndarray:
    """Contact flags (N, n_feet) with interior gaps of at most ``samples`` samples filled, then interior
    blips of at most ``samples`` removed — the hysteresis of a contact detector. MuJoCo's soft contact
    chatters (flag toggling every 2–4 ms at a few tens of newtons) while a foot unloads or barely loads."""
    out = np.asarray(flags, bool).copy()
    if samples <= 0:
        return out
    for i in range(out.shape[1]):
        for value in (False, True):  # fill short gaps, then drop short blips
            x = out[:, i]
            change = np.flatnonzero(np.diff(x.astype(np.int8))) + 1
            bounds = np.concatenate([[0], change, [x.size]])
            for a, b in zip(bounds[:-1], bounds[1:], strict=True):
                if x[a] == value and a > 0 and b < x.size and b - a <= samples:
                    x[a:b] = not value
    return out


def draw_truth(robot: RobotModel, seed: int, foot_frames=DEFAULT_FOOT_FRAMES,
               foot_radius: float = 0.02) -> dict:
    """True robot drawn from ``seed`` (see the module docstring): ``inertial`` (n_bodies, 10),
    ``fc``, ``fv``, ``armature`` (n_joints,)."""
    rng = np.random.default_rng(np.random.SeedSequence(int(seed)).spawn(3)[1])
    n = robot.n_joints
    P = np.array([perturb_inertia(p, rng) for p in robot.nominal_inertial_parameters()])
    effort = np.asarray(robot.effort_limits(), float)
    effort = np.where(np.isfinite(effort) & (effort > 0), effort, 10.0)
    vel = np.asarray(robot.velocity_limits(), float)
    vel = np.where(np.isfinite(vel) & (vel > 0), vel, 10.0)
    q0 = standing_configuration(robot, standing_posture(robot), foot_frames, foot_radius)
    M = pin.crba(robot.model, robot.model.createData(), q0)
    m_ii = np.maximum(np.diag(M)[robot.joint_index_v()], 1e-6)
    fc = COULOMB_FRACTION * effort * rng.uniform(*FRICTION_RANGE, n)
    fv = VISCOUS_FRACTION * effort / vel * rng.uniform(*FRICTION_RANGE, n)
    arm = ARMATURE_FRACTION * m_ii * rng.uniform(*FRICTION_RANGE, n)
    return {"inertial": P, "fc": fc, "fv": fv, "armature": arm}


def record_floating_run(mj, data, info: MujocoInfo, robot: RobotModel, control, duration: float, rate: float,
                        substeps: int, timestep: float, n_feet: int, actuated=None, on_sample=None):
    """Step a floating-base MuJoCo model under ``control(t) -> q_des`` and record one sample per log
    period (``substeps`` MuJoCo steps of ``timestep``; `mujoco.mj_forward` before each sample so that
    contacts, sensors and actuator forces are those at t_k). ``actuated`` (joint indices): joints whose
    ``qfrc_actuator`` is logged as tau (others 0; None: all); ``on_sample(data)`` is called at each sample.
    Returns t, out (q, v, tau, q_des, gyro, acc, base_pos, base_lin_vel, base_ang_vel), base_quat
    (w, x, y, z), contact flags, contact forces, and the Pinocchio q, v. Raises `MujocoSimError` when the
    simulation diverges."""
    import mujoco

    n = robot.n_joints
    N = int(round(duration * rate)) + 1
    out = {k: np.empty((N, n)) for k in ("q", "v", "tau", "q_des")}
    out.update({k: np.empty((N, 3)) for k in ("gyro", "acc", "base_pos", "base_lin_vel", "base_ang_vel")})
    base_quat = np.empty((N, 4))
    contact = np.zeros((N, n_feet), bool)
    cforce = np.zeros((N, n_feet, 3))
    q_pin, v_pin = np.empty((N, robot.nq)), np.empty((N, robot.nv))
    t = np.arange(N) / rate
    ga, aa = info.sensor_adr["gyro"], info.sensor_adr["acc"]
    act = None if actuated is None else np.asarray(actuated, int)
    for k in range(N):
        out["q_des"][k] = control(t[k])
        mujoco.mj_forward(mj, data)
        out["q"][k] = data.qpos[info.qpos_adr]
        out["v"][k] = data.qvel[info.dof_adr]
        if act is None:
            out["tau"][k] = data.qfrc_actuator[info.dof_adr]
        else:
            out["tau"][k] = 0.0
            out["tau"][k, act] = data.qfrc_actuator[np.asarray(info.dof_adr)[act]]
        out["gyro"][k] = data.sensordata[ga:ga + 3]
        out["acc"][k] = data.sensordata[aa:aa + 3]
        out["base_pos"][k] = data.qpos[:3]
        base_quat[k] = data.qpos[3:7]
        out["base_lin_vel"][k] = data.qvel[:3]
        out["base_ang_vel"][k] = data.qvel[3:6]
        contact[k], cforce[k] = contact_forces(mj, data, info)
        q_pin[k], v_pin[k] = mj_to_pin(data.qpos, data.qvel, info, robot.nq, robot.nv)
        if on_sample is not None:
            on_sample(data)
        if k == N - 1:
            break
        for s in range(substeps):
            if s:
                control(t[k] + s * timestep)
            mujoco.mj_step(mj, data)
        if not (np.isfinite(data.qpos).all() and np.isfinite(data.qvel).all()):
            raise MujocoSimError(f"MuJoCo simulation diverged at t={t[k + 1]:.4g} s")
    return t, out, base_quat, contact, cforce, q_pin, v_pin


def simulate_stance(
    robot: RobotModel,
    duration: float = 2.0,
    rate: float = 500.0,
    seed: int = 0,
    noise: float = 0.0,
    motion: str = "sway",
    inertial: np.ndarray | None = None,
    friction=None,
    armature=None,
    kp: float | None = None,
    kd: float | None = None,
    sway_amplitude: float = 0.1,
    timestep: float = 0.0005,
    foot_frames: tuple[str, ...] = DEFAULT_FOOT_FRAMES,
    foot_radius: float = 0.02,
    settle: float = 0.3,
    randomize: bool = False,
    trot_amplitude: float = 0.2,
    trot_period: float = 0.45,
    step_period: float = 2.4,
    contact_debounce: float = 0.02,
) -> StanceResult:
    """Stand on four feet with joint PD (torque ``kp·(q_d - q) - kd·v``) and log at ``rate`` Hz.

    ``motion``: ``"sway"`` (sinusoidal joint-target offsets), ``"stand"`` or ``"trot"`` (open-loop
    diagonal-pair trot in place, `_trot_offsets`) or ``"steps"`` (a static step in place, one foot lifted
    at a time for ``step_period`` s, `StepPlan`). The robot is dropped from the touching height and
    settles for ``settle`` s before logging starts (logged ``t`` starts at 0). ``kp``/``kd`` default to
    300/5 (sway, stand), 1000/20 (trot: stiffer, so the base stays level on two feet) and 2000/40 on the
    legs for steps (three feet; joints on no leg, e.g. an arm, keep 300/5).
    The logged contact flags are MuJoCo's (a foot geom touching the floor), debounced over
    ``contact_debounce`` s (`debounce_contacts`; 0 = raw).

    ``randomize=True`` draws the true inertias, friction and armature from ``seed`` (`draw_truth`);
    explicit ``inertial`` / ``friction`` / ``armature`` override the corresponding draws. Otherwise
    the URDF values are used. ``noise`` (σ) goes on the measured copies in ``result.meas`` only.
    """
    _check_robot(robot)
    if motion not in MOTIONS:
        raise MujocoSimError(f"motion must be one of {', '.join(MOTIONS)}, got {motion!r}")
    if not (np.isfinite(noise) and noise >= 0):
        raise MujocoSimError(f"noise must be >= 0, got {noise}")
    if not (np.isfinite(contact_debounce) and contact_debounce >= 0):
        raise MujocoSimError(f"contact_debounce must be >= 0 s, got {contact_debounce}")
    if isinstance(seed, bool) or int(seed) != seed or seed < 0:
        raise MujocoSimError(f"seed must be a non-negative integer, got {seed!r}")
    if kp is None:
        kp = {"trot": 1000.0, "steps": 2000.0}.get(motion, 300.0)
    if kd is None:
        kd = {"trot": 20.0, "steps": 40.0}.get(motion, 5.0)
    for name, val in (("duration", duration), ("rate", rate), ("timestep", timestep)):
        if not (np.isfinite(val) and val > 0):
            raise MujocoSimError(f"{name} must be a positive number, got {val}")
    substeps = int(round(1.0 / (rate * timestep)))
    if substeps < 1 or abs(substeps * rate * timestep - 1.0) > 1e-6:
        raise MujocoSimError(f"1/rate ({1 / rate}) must be a multiple of timestep ({timestep})")

    n = robot.n_joints
    drawn = draw_truth(robot, seed, foot_frames, foot_radius) if randomize else None
    if inertial is not None:
        P = np.asarray(inertial, float)
    else:
        P = drawn["inertial"] if drawn else robot.nominal_inertial_parameters()
    if friction is not None:
        fc, fv = (friction["fc"], friction["fv"]) if isinstance(friction, dict) else friction
    else:
        fc, fv = (drawn["fc"], drawn["fv"]) if drawn else (robot.urdf_friction, robot.urdf_damping)
    if armature is None and drawn:
        armature = drawn["armature"]
    fc, fv = _per_joint(fc, n, "fc"), _per_joint(fv, n, "fv")
    arm = _per_joint(armature, n, "armature")
    mj, info = build_mujoco_model(robot, P, (fc, fv), arm, foot_frames, foot_radius, timestep)
    data = mujoco.MjData(mj)

    q0j = standing_posture(robot)
    q0 = standing_configuration(robot, q0j, foot_frames, foot_radius)
    plan, kp_j, kd_j = None, np.full(n, float(kp)), np.full(n, float(kd))
    if motion == "steps":
        plan = StepPlan(robot, q0, foot_frames, duration, period=step_period, rate=rate)
        kp_j[plan.other_joints], kd_j[plan.other_joints] = 300.0, 5.0  # an arm: the sway gains
    data.qpos[:], data.qvel[:] = pin_to_mj(q0, None, info, mj.nq, mj.nv)
    mujoco.mj_forward(mj, data)

    def control(t_log):
        if motion == "sway" and t_log > 0:
            qd = q0j + _sway_offsets(robot, t_log, sway_amplitude)
        elif motion == "trot" and t_log > 0:
            qd = q0j + _trot_offsets(robot, t_log, trot_amplitude, trot_period)
        elif motion == "steps" and t_log > 0:
            qd = plan(t_log, data.qpos[3:7])
        else:
            qd = q0j
        qj = data.qpos[info.qpos_adr]
        vj = data.qvel[info.dof_adr]
        data.ctrl[info.actuator_ids] = kp_j * (qd - qj) - kd_j * vj
        return qd

    n_settle = int(round(settle / timestep))
    for _ in range(n_settle):
        control(0.0)
        mujoco.mj_step(mj, data)

    t, out, base_quat, contact, cforce, q_pin, v_pin = record_floating_run(
        mj, data, info, robot, control, duration, rate, substeps, timestep, len(foot_frames))

    params = {}
    for b, row in zip(robot.body_names, P, strict=True):
        for s, x in zip(INERTIAL_SUFFIXES, row, strict=True):
            params[f"{b}.{s}"] = float(x)
    for i, j in enumerate(robot.joint_names):
        params[f"{j}.fc"] = float(fc[i])
        params[f"{j}.fv"] = float(fv[i])
    for i, j in enumerate(robot.joint_names):
        params[f"{j}.armature"] = float(arm[i])
    truth = {
        "robot": robot.name,
        "simulator": f"mujoco {mujoco.__version__}",
        "friction_model": FRICTION_MODEL,
        "noise": float(noise),
        "seed": int(seed),
        "rate": float(rate),
        "duration": float(duration),
        "timestep": float(timestep),
        "integrator": "implicitfast",
        "joint_names": list(robot.joint_names),
        "foot_frames": list(foot_frames),
        "foot_radius": float(foot_radius),
        "controller": {"kind": "joint PD", "kp": float(kp), "kd": float(kd), "motion": motion,
                       "sway_amplitude": float(sway_amplitude), "trot_amplitude": float(trot_amplitude),
                       "trot_period": float(trot_period), "step_period": float(step_period),
                       "settle": float(settle), "contact_debounce": float(contact_debounce)},
        "randomized": bool(randomize),
        "noise_model": {"q": float(noise), "v": float(noise), "tau": float(noise),
                        "imu_gyro": float(noise), "imu_acc": ACC_NOISE_FACTOR * float(noise),
                        "noise_free": ["base_pos", "base_quat", "imu_quat", "contacts", "forces"]},
        "parameters": params,
    }
    rng_noise = np.random.default_rng(np.random.SeedSequence(int(seed)).spawn(3)[2])
    meas = {}
    for key, sigma in (("q", noise), ("v", noise), ("tau", noise), ("gyro", noise),
                       ("acc", ACC_NOISE_FACTOR * noise)):
        x = out[key]
        meas[key] = x + rng_noise.normal(0.0, sigma, x.shape) if sigma > 0 else x.copy()
    return StanceResult(
        t=t, base_quat=base_quat, contact=debounce_contacts(contact, int(round(contact_debounce * rate))),
        contact_force=cforce, q_pin=q_pin, v_pin=v_pin,
        joint_names=tuple(robot.joint_names), foot_frames=tuple(foot_frames), truth=truth, meas=meas,
        **out,
    )


# ---------------------------------------------------------------------------------------------- output
def to_log(result: StanceResult, source: str | None = None) -> Log:
    """The measured (noisy) log: joint q/v/tau and IMU gyro/acc from ``result.meas``; base pose, IMU
    orientation (= base orientation: the IMU site is at the base origin, axes aligned), contact
    flags and world contact forces noise-free. Quaternions in (w, x, y, z) order."""
    m = result.meas or {k: getattr(result, k) for k in ("q", "v", "tau", "gyro", "acc")}
    quat = result.base_quat / np.linalg.norm(result.base_quat, axis=1, keepdims=True)
    robot = result.truth.get("robot", "robot")
    return Log(
        t=result.t.copy(), q=m["q"].copy(), v=m["v"].copy(), tau=m["tau"].copy(),
        joint_names=tuple(result.joint_names), source=source or f"simulated:{robot} (mujoco)",
        imu_gyro=m["gyro"].copy(), imu_acc=m["acc"].copy(), imu_quat=quat.copy(),
        base_pos=result.base_pos.copy(), base_quat=quat.copy(),
        contacts={f: result.contact[:, i].copy() for i, f in enumerate(result.foot_frames)},
        forces={f: result.contact_force[:, i].copy() for i, f in enumerate(result.foot_frames)},
    )


def truth_trajectory_frame(result: StanceResult) -> pd.DataFrame:
    """Noise-free ``t``, ``base.pos.*``, ``base.quat.{w,x,y,z}``, ``base.vel.*`` (world),
    ``base.omega.*`` (base frame), ``q.*``, ``v.*``, ``tau.*``, ``imu.gyro.*``, ``imu.acc.*``,
    ``contact.<foot>``, ``force.<foot>.*`` (world)."""
    cols = {"t": result.t}
    for name, arr, comps in (("base.pos", result.base_pos, "xyz"), ("base.quat", result.base_quat, "wxyz"),
                             ("base.vel", result.base_lin_vel, "xyz"),
                             ("base.omega", result.base_ang_vel, "xyz"),
                             ("imu.gyro", result.gyro, "xyz"), ("imu.acc", result.acc, "xyz")):
        for i, c in enumerate(comps):
            cols[f"{name}.{c}"] = arr[:, i]
    for kind, arr in (("q", result.q), ("v", result.v), ("tau", result.tau)):
        for i, j in enumerate(result.joint_names):
            cols[f"{kind}.{j}"] = arr[:, i]
    for i, f in enumerate(result.foot_frames):
        cols[f"contact.{f}"] = result.contact[:, i].astype(np.int8)
        for a, c in enumerate("xyz"):
            cols[f"force.{f}.{c}"] = result.contact_force[:, i, a]
    return pd.DataFrame(cols)


def write_mujoco_simulation(result: StanceResult, out_dir: str | os.PathLike) -> None:
    """Write ``log.parquet`` (`to_log`), ``truth.json`` and ``truth_trajectory.parquet``
    (`truth_trajectory_frame`) into the existing directory ``out_dir`` (each file atomically)."""
    from .simulate import write_outputs

    write_outputs(out_dir, to_log(result), truth_trajectory_frame(result), result.truth)


__all__ = [
    "DEFAULT_FOOT_FRAMES", "FRICTION_MODEL", "MOTIONS", "MujocoInfo", "MujocoSimError", "StanceResult",
    "StepPlan", "build_mujoco_model", "build_mujoco_spec", "contact_forces", "debounce_contacts",
    "draw_truth", "mj_to_pin",
    "pin_to_mj", "simulate_arm", "simulate_stance", "standing_configuration", "standing_posture", "to_log",
    "truth_trajectory_frame", "write_mujoco_simulation",
]


# ------------------------------------------------------------------------------------------- fixed-base arm
ARM_FRICTION_MODEL = "mujoco-frictionloss-damping"
ARM_TIMESTEP = 0.00025  # s: 4 kHz physics, the controller runs at every step by default


def simulate_arm(
    robot: RobotModel,
    duration: float,
    rate: float,
    noise: float,
    seed: int,
    trajectory=None,
    truth: dict | None = None,
    effects=None,
    timestep: float = ARM_TIMESTEP,
):
    """A fixed-base arm simulated in MuJoCo: an out-of-class truth for the fixed-base estimators.

    The true robot is drawn exactly as in `simulate.simulate` with the same ``seed`` (same inertias,
    Coulomb/viscous levels and armature; the same random excitation), but its joints carry MuJoCo's
    dry friction: ``frictionloss`` = fc (a friction *constraint*: true stiction, |τ_f| ≤ fc, sign(v)·fc
    while sliding — not the estimator's fc·tanh(v/vs)), ``damping`` = fv, ``armature``. The model is
    `build_mujoco_spec` (fixed base, no feet), ``implicitfast`` at ``timestep`` [s]. The controller
    (computed torque on the *nominal* model with the nominal friction guess + PID, as in `simulate`) runs
    at ``effects.control_rate`` (default every physics step, 1/timestep) and its command is held
    zero-order over the physics steps in between; the actuators clip at the URDF effort limits.

    Logged at ``rate`` (1/rate must be a multiple of ``timestep``): q, v, and the actuator torque applied
    at the sample instant (``qfrc_actuator``); ``truth_acceleration`` is MuJoCo's ``qacc`` at that
    instant, so ``τ = RNEA_true(q, v, a) + armature·a + fv·v + τ_dry`` holds at every sample with
    ``|τ_dry| ≤ fc`` (= ``sign(v)·fc`` while sliding, up to MuJoCo's constraint softness). Sensor errors
    (noise, effort gain/offset, encoder quantization) come from ``effects`` as in `simulate`; its
    ``friction`` field must stay "coulomb-viscous" (MuJoCo's friction is dry).

    ``truth``: a previous result's truth (held-out logs of the same robot and sensors).
    Returns a `simulate.SimResult`.
    """
    from .simulate import (
        CONTROL_BANDWIDTH,
        Effects,
        SimResult,
        SimulationError,
        _given_sensors,
        check_inputs,
        draw_sensor_errors,
        draw_truth,
        measure,
        nominal_scales,
        planned_motion,
        sensor_record,
        truth_arrays,
        truth_document,
    )

    N = check_inputs(robot, duration, rate, noise, seed)
    effects = Effects() if effects is None else effects
    if effects.friction != "coulomb-viscous":
        raise SimulationError(f"the MuJoCo arm's friction is MuJoCo's dry friction; friction model "
                              f"{effects.friction!r} applies to the RK4 simulator only")
    if not (np.isfinite(timestep) and timestep > 0):
        raise SimulationError(f"timestep must be > 0 [s], got {timestep}")
    log_every = int(round(1.0 / (rate * timestep)))
    if log_every < 1 or abs(log_every * timestep * rate - 1.0) > 1e-9:
        raise SimulationError(f"1/rate = {1.0 / rate:g} s must be a multiple of the MuJoCo timestep "
                              f"{timestep:g} s")
    control_rate = effects.control_rate if effects.control_rate is not None else 1.0 / timestep
    ctrl_every = int(round(1.0 / (control_rate * timestep)))
    if ctrl_every < 1 or abs(ctrl_every * timestep * control_rate - 1.0) > 1e-9 or log_every % ctrl_every:
        raise SimulationError(f"control rate {control_rate:g} Hz must divide the physics rate "
                              f"{1.0 / timestep:g} Hz and be an integer multiple of the log rate {rate:g} Hz")

    ss = np.random.SeedSequence(int(seed))
    rng_traj, rng_truth, rng_noise = (np.random.default_rng(s) for s in ss.spawn(3))
    rng_sensor = np.random.default_rng(ss.spawn(1)[0])
    trajectory = planned_motion(robot, trajectory, duration, rng_traj)
    n = robot.n_joints
    t = np.arange(N) / rate
    q_d, v_d, a_d = trajectory.evaluate(t)
    scales = nominal_scales(robot, q_d, v_d, a_d)
    drawn = draw_truth(robot, scales, rng_truth)
    gain, offset = draw_sensor_errors(effects, scales["peak_tau"], rng_sensor)
    if truth is not None:
        drawn = truth_arrays(truth, robot)
        sensors = _given_sensors(truth, robot)
        if sensors is not None:
            gain, offset = sensors

    mj, info = build_mujoco_model(robot, drawn["inertial"], (drawn["fc"], drawn["fv"]), drawn["armature"],
                                  foot_frames=None, timestep=timestep)
    data = mujoco.MjData(mj)
    qa, da, act = info.qpos_adr, info.dof_adr, info.actuator_ids
    ctrl_model = robot.model.copy()
    ctrl_model.armature = np.asarray(scales["armature"], float).copy()
    cd = ctrl_model.createData()
    fc_nom, fv_nom = scales["fc"], scales["fv"]
    omega = min(CONTROL_BANDWIDTH, 2 * math.pi * rate / 40.0)
    kp, kd, ki = 3.0 * omega**2, 3.0 * omega, omega**3
    dt_c = ctrl_every * timestep
    n_steps = (N - 1) * log_every
    t_ctrl = np.arange(0, n_steps + 1, ctrl_every) * timestep
    qf, vf, af = trajectory.evaluate(t_ctrl)

    data.qpos[qa] = q_d[0]
    data.qvel[da] = v_d[0]
    Q, V, A, TAU = (np.empty((N, n)) for _ in range(4))
    e_int = np.zeros(n)
    clipped = 0
    lim = np.asarray(robot.effort_limits(), float)
    for step in range(n_steps + 1):
        if step % ctrl_every == 0:
            c = step // ctrl_every
            q = np.array(data.qpos[qa])
            v = np.array(data.qvel[da])
            e = qf[c] - q
            a_cmd = af[c] + kp * e + kd * (vf[c] - v) + ki * e_int
            e_int += e * dt_c
            tau = pin.rnea(ctrl_model, cd, q, v, a_cmd) + fc_nom * np.tanh(vf[c] / 0.05) + fv_nom * vf[c]
            clipped += int(np.any(np.abs(tau) > lim))
            data.ctrl[act] = tau
        if step % log_every == 0:
            k = step // log_every
            mujoco.mj_forward(mj, data)
            Q[k], V[k] = data.qpos[qa], data.qvel[da]
            A[k], TAU[k] = data.qacc[da], data.qfrc_actuator[da]
            if step == n_steps:
                break
        mujoco.mj_step(mj, data)
        if step % 1000 == 0 and not np.all(np.isfinite(data.qvel)):
            raise SimulationError(f"MuJoCo simulation diverged at t={step * timestep:.4g} s "
                                  f"(robot {robot.name!r})")

    names = tuple(robot.joint_names)
    truth_log = Log(t=t, q=Q, v=V, tau=TAU, joint_names=names,
                    source=f"simulated:{robot.name} (MuJoCo, noise-free)")
    q_m, v_m, tau_m = measure(Q, V, TAU, noise, gain, offset, effects.encoder_resolution, rng_noise)
    log = Log(t=t.copy(), q=q_m, v=v_m, tau=tau_m, joint_names=names,
              source=f"simulated:{robot.name} (MuJoCo)")
    used = ["MuJoCo dry friction (frictionloss constraint: stiction and exact sign)",
            f"controller at {control_rate:g} Hz, zero-order hold between log samples"]
    used += [u for u in effects.used(0.05) if not u.startswith("controller")]
    if truth is not None:
        used = list(dict.fromkeys([*(truth.get("out_of_class") or []), *used]))
    friction = {"model": ARM_FRICTION_MODEL, "velocity_scale": None,
                "law": "MuJoCo frictionloss = fc (dry friction constraint, |tau_f| <= fc, stiction at v = 0) "
                       "+ damping fv·v"}
    controller = {"kind": "computed-torque (nominal model + nominal friction/armature guess) + PID",
                  "kp": kp, "kd": kd, "ki": ki, "control_rate": float(control_rate), "hold": "zero-order",
                  "mujoco_timestep": float(timestep), "integrator": "implicitfast",
                  "control_steps_clipped_at_effort_limit": int(clipped)}
    doc = truth_document(
        robot, drawn, friction=friction, noise=noise, seed=seed, rate=rate, duration=duration,
        controller=controller, sensors=sensor_record(robot, gain, offset, effects), out_of_class=used,
        time_convention="tau[k] = actuator torque applied at t_k (held until the next control step); "
                        "a[k] = MuJoCo qacc at t_k",
    )
    doc["simulator"] = "mujoco"
    return SimResult(log=log, truth_log=truth_log, truth_acceleration=A, truth=doc, trajectory=trajectory,
                     desired={"q": q_d, "v": v_d, "a": a_d})
