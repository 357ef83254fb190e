"""Ground truth for robots with closed kinematic loops (issue 11): MuJoCo with equality constraints, and
an exact in-class inverse-dynamics log.

Both simulators take a tree `RobotModel` that carries its closures and actuation (``robot.loops``,
``robot.actuation``; `fg_sysid.robots.loops`): loops cut at one joint, actuated / passive / unencoded
joints. The closure kinematics are `fg_sysid.robots.loop_kinematics.ClosureKinematics`.

Motion. The actuated joints follow a random finite Fourier series (`FourierTrajectory.random`, 5
harmonics of ``base_frequency``) inside `MOTION_RANGES` (per joint-name suffix, rad); the passive joints
follow from the closures (`ClosureKinematics.solve_passive`, continuation from `reference_configuration`),
v = G v_a and a = G a_a + γ (paper 000 eqs. 19–22).

Truth draw (``seed``; U = uniform): every body's inertia by `simulate.perturb_inertia` (mass ×U(0.8, 1.2),
second moments, axes, COM: physically consistent); on each **actuated** joint Coulomb
``fc = U(0.5, 1.5)·0.05·P``, viscous ``fv = U(0.5, 1.5)·0.05·P/W`` and armature
``U(0.5, 1.5)·0.2·M̄`` (P = peak nominal actuated torque along the motion, W = peak speed, M̄ = mean
diagonal of the reduced mass matrix GᵀMG at the joint); passive pins are frictionless and carry no
armature.

`simulate_loop_inclass` — the estimators' model class exactly: the logged effort of actuated joint i is
``u = Gᵀ(RNEA_true(q, v, a) + armature·a + fc·tanh(v/0.05) + fv·v)`` (paper 000 eq. 23) along the
planned (closed) trajectory; no integration, closures hold to the IK tolerance (1e-12 m).

`simulate_loop_mujoco` — an independent, out-of-class truth: `mujoco_sim.build_mujoco_spec` tree
(explicit inertials, ``armature``, ``damping`` = fv, ``frictionloss`` = fc: a dry friction *constraint*
with stiction) plus one ``connect`` equality per loop between sites at the two closing frames (stiff
``solref``/``solimp``; MuJoCo's constraint is soft, the violation is measured and reported),
motors on the actuated joints only, ``implicitfast`` at 4 kHz, an optional Stribeck hump
``(fs − fc)·exp(−(v/v_st)²)·sign(v)`` on the actuated joints (``qfrc_applied``), and a controller at
``control_rate`` (zero-order hold): feedforward = constrained inverse dynamics of the *nominal* model
with guessed friction/armature along the plan, plus PD feedback ``M̄_i (ω² e + 2ω ė)`` on each actuated
joint (the feedback is in the logged efforts). Logged at ``rate``: q, v of the encoded joints and the
motor torque (``qfrc_actuator``) of the actuated joints; passive encoded joints have an all-NaN effort
column (not measured). Noise σ on q [rad], v [rad/s], τ [N·m] (`simulate.measure`).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pinocchio as pin

from ..robots import RobotModel
from ..robots.loop_kinematics import POINT_TYPES, ClosureError, ClosureKinematics
from ..robots.loops import actuated_joints, actuation_of, encoded_mask, passive_mask
from .excitation import FourierTrajectory
from .log import Log
from .simulate import SimulationError, measure, perturb_inertia, truth_document

#: Motion range [rad] of the actuated joints, by joint-name suffix (B1 legs: around the standing pose).
MOTION_RANGES = {"crank_joint": (-1.2, 1.2), "hip_joint": (-0.3, 0.3), "thigh_joint": (0.4, 1.2),
                 "knee_motor": (-2.0, -1.0)}
MOTION_SPEED = 8.0  # rad/s: velocity bound of the planned actuated motion
BASE_FREQUENCY = 0.4  # Hz: 5 harmonics up to 2 Hz
FRICTION_RANGE = (0.5, 1.5)
COULOMB_FRACTION = 0.05
VISCOUS_FRACTION = 0.05
ARMATURE_FRACTION = 0.2
VELOCITY_SCALE = 0.05  # rad/s: the estimators' tanh width (in-class friction)
TIMESTEP = 0.00025  # s
EQ_SOLREF = (0.0005, 1.0)  # time constant 2·timestep, critical damping
EQ_SOLIMP = (0.9999, 0.9999, 0.001, 0.5, 2.0)
CONTROL_BANDWIDTH_HZ = 8.0


@dataclass(frozen=True, eq=False)
class LoopSimResult:
    """A looped-robot simulation.

    Attributes:
        log: what an estimator sees: encoded joints only (robot order), efforts of actuated joints
            (NaN columns for passive encoded joints), noisy.
        truth_log: noise-free log of *all* joints (q, v; tau = applied motor torque on actuated joints,
            0 on passive ones).
        truth_acceleration: (N, nv) true accelerations of all joints.
        truth: JSON-ready record (parameters, friction law, controller, closure violation, ...).
        closure_violation: max over the log of the closing frames' distance [m].
        trajectory: planned actuated motion.
    """

    log: Log
    truth_log: Log
    truth_acceleration: np.ndarray
    truth: dict
    closure_violation: float
    trajectory: FourierTrajectory
    desired: dict = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------- helpers
def _indices(robot: RobotModel):
    """(actuated, dependent = passive, encoded) joint indices (``joint_names`` order)."""
    act = [int(i) for i in np.flatnonzero(~passive_mask(robot))]
    dep = [int(i) for i in np.flatnonzero(passive_mask(robot))]
    enc = [int(i) for i in np.flatnonzero(encoded_mask(robot))]
    return act, dep, enc


def closure_kinematics(robot: RobotModel) -> ClosureKinematics:
    """The closures of ``robot`` (point3d | planar: MuJoCo ``connect`` equalities); `ClosureError` for
    another type or a robot without loops."""
    return ClosureKinematics(robot.model, robot.loops, types=POINT_TYPES)


def _v_index(robot: RobotModel) -> np.ndarray:
    return np.asarray(robot.joint_index_v(), int)


def reference_configuration(robot: RobotModel) -> np.ndarray:
    """A closed configuration to start continuation from: neutral, B1 legs at thigh 0.8, calf and knee
    motor at the linkage's reference angle (rod angle 0), then the closures solved."""
    from ..robots.looped import B1_LINKAGE

    q = pin.neutral(robot.model)
    if robot.floating_base:
        q[2] = 0.5
    iq = robot.joint_index_q()
    for i, j in enumerate(robot.joint_names):
        if j.endswith("thigh_joint"):
            q[iq[i]] = 0.8
        if j.endswith("calf_joint") or j.endswith("knee_motor"):
            q[iq[i]] = B1_LINKAGE["q_ref"]
    ck = closure_kinematics(robot)
    _, dep, _ = _indices(robot)
    return ck.solve_passive(q, _v_index(robot)[dep])


def plan_motion(robot: RobotModel, rng, base_frequency: float = BASE_FREQUENCY,
                harmonics: int = 5) -> FourierTrajectory:
    """Random Fourier motion of the actuated joints inside `MOTION_RANGES` (module docstring)."""
    act_names = actuated_joints(robot)
    lo, hi = [], []
    for j in act_names:
        rng_j = next((r for s, r in MOTION_RANGES.items() if j.endswith(s)), None)
        if rng_j is None:
            raise SimulationError(f"no motion range for actuated joint {j!r} (MOTION_RANGES)")
        lo.append(rng_j[0])
        hi.append(rng_j[1])
    shim = SimpleNamespace(n_joints=len(act_names), joint_names=tuple(act_names),
                           position_limits=lambda: (np.array(lo), np.array(hi)),
                           velocity_limits=lambda: np.full(len(act_names), MOTION_SPEED))
    return FourierTrajectory.random(shim, rng=rng, harmonics=harmonics, base_frequency=base_frequency,
                                    margin=0.0, velocity_fraction=1.0)


def closed_states(robot: RobotModel, q_a, v_a, a_a, q_start=None):
    """Full (q, v, a) (N, nq | nv) of all joints from actuated (N, n_a) trajectories: the passive joints
    by closure IK (continuation along the samples, from ``q_start`` or `reference_configuration`)."""
    ck = closure_kinematics(robot)
    act, dep, _ = _indices(robot)
    iv = _v_index(robot)
    iq = np.asarray(robot.joint_index_q(), int)
    q = reference_configuration(robot) if q_start is None else np.array(q_start, float)
    # continuation from the start configuration to the first sample
    q0_a = q[iq[act]].copy()
    for s in np.linspace(0.0, 1.0, 21)[1:]:
        q[iq[act]] = (1 - s) * q0_a + s * q_a[0]
        q = ck.solve_passive(q, iv[dep])
    return ck.closed_trajectory(q, q_a, v_a, a_a, iq[act], iv[act], iv[dep])


def constrained_torque(model: pin.Model, ck: ClosureKinematics, dep_v, act_v, q, v, a, tau_extra=None):
    """Actuated efforts u = Gᵀ(RNEA(q, v, a) + τ_extra) (paper 000 eq. 23) at one sample; ``model``
    carries the armature. Returns (u (n_a,), G)."""
    data = model.createData()
    tau = pin.rnea(model, data, q, v, a)
    if tau_extra is not None:
        tau = tau + tau_extra
    G, cols = ck.actuated_map(q, dep_v, act_v)
    return (G.T @ tau)[cols], G


def _reduced_mass_diag(model, ck, dep_v, act_v, q):
    data = model.createData()
    M = pin.crba(model, data, q)
    M = 0.5 * (M + M.T)
    G, cols = ck.actuated_map(q, dep_v, act_v)
    return np.diag(G.T @ M @ G)[cols]


def draw_truth(robot: RobotModel, Q, V, A, rng) -> tuple[dict, dict]:
    """(truth arrays, nominal scales): see the module docstring."""
    act, dep, _ = _indices(robot)
    iv = _v_index(robot)
    ck = closure_kinematics(robot)
    sub = np.unique(np.linspace(0, len(Q) - 1, min(len(Q), 200)).astype(int))
    U = np.array([constrained_torque(robot.model, ck, iv[dep], iv[act], Q[k], V[k], A[k])[0] for k in sub])
    Md = np.array([_reduced_mass_diag(robot.model, ck, iv[dep], iv[act], Q[k]) for k in sub[::10]])
    n = robot.n_joints
    peak_tau = np.maximum(np.abs(U).max(0), 1e-3)
    peak_v = np.maximum(np.abs(V[:, iv[act]]).max(0), 0.1)
    scales = {"fc": np.zeros(n), "fv": np.zeros(n), "armature": np.zeros(n), "peak_tau": peak_tau}
    scales["fc"][act] = COULOMB_FRACTION * peak_tau
    scales["fv"][act] = VISCOUS_FRACTION * peak_tau / peak_v
    scales["armature"][act] = ARMATURE_FRACTION * Md.mean(0)
    P0 = robot.nominal_inertial_parameters()
    truth = {"inertial": np.array([perturb_inertia(p, rng) for p in P0]),
             "fc": scales["fc"] * rng.uniform(*FRICTION_RANGE, n),
             "fv": scales["fv"] * rng.uniform(*FRICTION_RANGE, n),
             "armature": scales["armature"] * rng.uniform(*FRICTION_RANGE, n)}
    return truth, scales


def _truth_model(robot: RobotModel, truth: dict) -> pin.Model:
    model = robot.pinocchio_model_with(truth["inertial"])
    arm = np.array(model.armature)
    arm[_v_index(robot)] = truth["armature"]
    model.armature = arm
    return model


def _encoded_log(robot, t, Qj, Vj, TAU, noise, rng, source) -> Log:
    """The estimator's view: encoded joints, efforts of actuated joints (NaN on passive ones)."""
    act, _, enc = _indices(robot)
    tau = np.full_like(TAU, np.nan)
    tau[:, act] = TAU[:, act]
    q_m, v_m, tau_m = measure(Qj, Vj, tau, noise, 1.0, 0.0, 0.0, rng)
    names = tuple(robot.joint_names[i] for i in enc)
    return Log(t=t.copy(), q=q_m[:, enc], v=v_m[:, enc], tau=tau_m[:, enc], joint_names=names, source=source)


def _check(robot, duration, rate, noise):
    if robot.floating_base:
        raise SimulationError(f"robot {robot.name!r}: the looped simulators here are fixed-base")
    if not robot.loops:
        raise SimulationError(f"robot {robot.name!r} has no loops")
    for name, val, lo in (("duration", duration, 0.0), ("rate", rate, 0.0)):
        if not (np.isfinite(val) and val > lo):
            raise SimulationError(f"{name} must be > 0, got {val}")
    if not (np.isfinite(noise) and noise >= 0):
        raise SimulationError(f"noise must be >= 0, got {noise}")
    N = int(round(duration * rate)) + 1
    if N < 10:
        raise SimulationError(f"duration·rate gives {N} samples: too few")
    return N


def _doc(robot, truth, *, friction, noise, seed, rate, duration, controller, out_of_class, convention,
         closure_violation, simulator):
    doc = truth_document(robot, truth, friction=friction, noise=noise, seed=seed, rate=rate,
                         duration=duration, controller=controller, sensors={}, out_of_class=out_of_class,
                         time_convention=convention)
    doc["simulator"] = simulator
    doc["loops"] = [{"name": lp.name, "frames": list(lp.frames), "type": lp.type, "axis": lp.axis}
                    for lp in robot.loops]
    doc["actuated"] = actuated_joints(robot)
    doc["passive"] = list(actuation_of(robot).passive)
    doc["unencoded"] = list(actuation_of(robot).unencoded)
    doc["closure_violation_max_m"] = float(closure_violation)
    return doc


def _given_truth(truth: dict, robot: RobotModel) -> dict:
    from .simulate import truth_arrays

    return truth_arrays(truth, robot)


# ---------------------------------------------------------------------------------------------- in-class
def simulate_loop_inclass(robot: RobotModel, duration: float, rate: float,
                          noise: float, seed: int, truth: dict | None = None) -> LoopSimResult:
    """Exact in-class log (module docstring): u = Gᵀ(RNEA_true + armature·a + fc·tanh(v/0.05) + fv·v)."""
    N = _check(robot, duration, rate, noise)
    ss = np.random.SeedSequence(int(seed))
    rng_traj, rng_truth, rng_noise = (np.random.default_rng(s) for s in ss.spawn(3))
    traj = plan_motion(robot, rng_traj)
    t = np.arange(N) / rate
    qa, va, aa = traj.evaluate(t)
    Q, V, A = closed_states(robot, qa, va, aa)
    drawn, _ = draw_truth(robot, Q, V, A, rng_truth)
    if truth is not None:
        drawn = _given_truth(truth, robot)
    act, dep, _ = _indices(robot)
    iv = _v_index(robot)
    model = _truth_model(robot, drawn)
    ck = closure_kinematics(robot)
    TAU = np.zeros((N, robot.n_joints))
    for k in range(N):
        vj = V[k, iv]
        extra = np.zeros(robot.nv)
        extra[iv] = drawn["fc"] * np.tanh(vj / VELOCITY_SCALE) + drawn["fv"] * vj
        TAU[k, act], _ = constrained_torque(model, ck, iv[dep], iv[act], Q[k], V[k], A[k], extra)
    viol = max(float(np.abs(ck.residual(Q[k])).max()) for k in range(0, N, max(1, N // 200)))
    iq = np.asarray(robot.joint_index_q(), int)
    Qj, Vj = Q[:, iq], V[:, iv]
    names = tuple(robot.joint_names)
    truth_log = Log(t=t, q=Qj, v=Vj, tau=TAU, joint_names=names,
                    source=f"simulated:{robot.name} (loops, in-class, noise-free)")
    log = _encoded_log(robot, t, Qj, Vj, TAU, noise, rng_noise,
                       f"simulated:{robot.name} (loops, in-class)")
    friction = {"model": "coulomb-viscous", "velocity_scale": VELOCITY_SCALE,
                "law": "fc·tanh(v/vs) + fv·v on actuated joints; passive joints frictionless"}
    doc = _doc(robot, drawn, friction=friction, noise=noise, seed=seed, rate=rate, duration=duration,
               controller={"kind": "none (exact inverse dynamics along the plan)"}, out_of_class=[],
               convention="tau[k] = G(q_k)^T (RNEA_true + armature a + friction) at t_k",
               closure_violation=viol, simulator="inverse-dynamics (in-class)")
    return LoopSimResult(log=log, truth_log=truth_log, truth_acceleration=A[:, iv], truth=doc,
                         closure_violation=viol, trajectory=traj, desired={"q": Q, "v": V, "a": A})


# ---------------------------------------------------------------------------------------------- MuJoCo
def build_loop_mujoco_model(robot: RobotModel, truth: dict, timestep: float = TIMESTEP,
                            solref=EQ_SOLREF, solimp=EQ_SOLIMP, feet: tuple | None = None,
                            foot_radius: float = 0.02):
    """(MjModel, MujocoInfo, closure site id pairs) of the looped robot: `build_mujoco_spec` tree (with
    ``feet``, floor and IMU for a floating base), motors on actuated joints only, one ``connect`` equality
    per loop between sites at the closing frames (`_add_closures`)."""
    import mujoco

    from .mujoco_sim import MujocoSimError, build_mujoco_model, build_mujoco_spec

    spec = build_mujoco_spec(robot, truth["inertial"], (truth["fc"], truth["fv"]), truth["armature"],
                             foot_frames=feet, foot_radius=foot_radius, timestep=timestep)
    _add_closures(spec, robot, solref, solimp)
    try:
        mj = spec.compile()
    except Exception as e:
        raise MujocoSimError(f"robot {robot.name!r}: MuJoCo compile failed: {e}") from None
    _, info = build_mujoco_model(robot, truth["inertial"], (truth["fc"], truth["fv"]), truth["armature"],
                                 foot_frames=feet, foot_radius=foot_radius, timestep=timestep)
    site_ids = [tuple(int(mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_SITE, f"{f}_site")) for f in lp.frames)
                for lp in robot.loops]
    return mj, info, site_ids


def simulate_loop_mujoco(robot: RobotModel, duration: float, rate: float, noise: float,
                         seed: int, truth: dict | None = None, control_rate: float = 1000.0,
                         stribeck_ratio: float | None = None, stribeck_velocity: float = 0.1,
                         timestep: float = TIMESTEP) -> LoopSimResult:
    """Out-of-class MuJoCo truth of a looped fixed-base robot (module docstring).

    ``truth``: a previous result's ``truth`` record (held-out logs of the same robot); ``stribeck_ratio``
    fs/fc of the Stribeck hump added to MuJoCo's dry friction (None: dry friction only).
    """
    import mujoco

    N = _check(robot, duration, rate, noise)
    log_every = int(round(1.0 / (rate * timestep)))
    ctrl_every = int(round(1.0 / (control_rate * timestep)))
    if (log_every < 1 or abs(log_every * timestep * rate - 1) > 1e-9 or ctrl_every < 1
            or abs(ctrl_every * timestep * control_rate - 1) > 1e-9 or log_every % ctrl_every):
        raise SimulationError(f"rate {rate:g} Hz and control rate {control_rate:g} Hz must divide the "
                              f"physics rate {1 / timestep:g} Hz, the control rate a multiple of the log "
                              f"rate")
    ss = np.random.SeedSequence(int(seed))
    rng_traj, rng_truth, rng_noise = (np.random.default_rng(s) for s in ss.spawn(3))
    traj = plan_motion(robot, rng_traj)
    n_steps = (N - 1) * log_every
    t_ctrl = np.arange(0, n_steps + 1, ctrl_every) * timestep
    qa, va, aa = traj.evaluate(t_ctrl)
    Qd, Vd, Ad = closed_states(robot, qa, va, aa)
    drawn, scales = draw_truth(robot, Qd[::ctrl_every], Vd[::ctrl_every], Ad[::ctrl_every], rng_truth)
    if truth is not None:
        drawn = _given_truth(truth, robot)
    act, dep, _ = _indices(robot)
    iv = _v_index(robot)
    iq = np.asarray(robot.joint_index_q(), int)

    # feedforward on the nominal model with guessed friction/armature; PD gains scaled by GᵀMG
    nominal = robot.model.copy()
    arm = np.array(nominal.armature)
    arm[iv] = scales["armature"]
    nominal.armature = arm
    ck = closure_kinematics(robot)
    n_c = len(t_ctrl)
    U_ff = np.zeros((n_c, len(act)))
    for c in range(n_c):
        extra = np.zeros(robot.nv)
        vj = Vd[c, iv]
        extra[iv] = scales["fc"] * np.tanh(vj / VELOCITY_SCALE) + scales["fv"] * vj
        U_ff[c], _ = constrained_torque(nominal, ck, iv[dep], iv[act], Qd[c], Vd[c], Ad[c], extra)
    m_bar = np.mean([_reduced_mass_diag(nominal, ck, iv[dep], iv[act], Qd[c]) for c in range(0, n_c, 50)], 0)
    w = 2 * math.pi * CONTROL_BANDWIDTH_HZ
    kp, kd = m_bar * w**2, m_bar * 2 * w

    mj, info, sites = build_loop_mujoco_model(robot, drawn, timestep)
    data = mujoco.MjData(mj)
    qadr, dadr = info.qpos_adr, info.dof_adr
    act_ids = [int(mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_ACTUATOR, f"{robot.joint_names[i]}_motor"))
               for i in act]
    data.qpos[qadr] = Qd[0, iq]
    data.qvel[dadr] = Vd[0, iv]
    mujoco.mj_forward(mj, data)
    fc_a, vst = drawn["fc"][act], float(stribeck_velocity)
    hump = (float(stribeck_ratio) - 1.0) * fc_a if stribeck_ratio else np.zeros(len(act))
    n = robot.n_joints
    Q, V, A, TAU = (np.zeros((N, n)) for _ in range(4))
    viol = 0.0
    lim = np.asarray(robot.effort_limits(), float)[act]
    clipped = 0
    for step in range(n_steps + 1):
        if step % ctrl_every == 0:
            c = step // ctrl_every
            q_now = data.qpos[qadr[act]]
            v_now = data.qvel[dadr[act]]
            u = U_ff[c] + kp * (Qd[c, iq[act]] - q_now) + kd * (Vd[c, iv[act]] - v_now)
            clipped += int(np.any(np.abs(u) > lim))
            data.ctrl[act_ids] = u
        if stribeck_ratio:
            v_now = data.qvel[dadr[act]]
            data.qfrc_applied[dadr[act]] = -hump * np.exp(-(v_now / vst) ** 2) * np.tanh(v_now / 1e-3)
        if step % log_every == 0:
            k = step // log_every
            mujoco.mj_forward(mj, data)
            Q[k], V[k], A[k] = data.qpos[qadr], data.qvel[dadr], data.qacc[dadr]
            TAU[k, act] = data.qfrc_actuator[dadr[act]]
            for a_id, b_id in sites:
                viol = max(viol, float(np.linalg.norm(data.site_xpos[a_id] - data.site_xpos[b_id])))
            if step == n_steps:
                break
        mujoco.mj_step(mj, data)
        if step % 2000 == 0 and not np.all(np.isfinite(data.qvel)):
            raise SimulationError(f"MuJoCo diverged at t = {step * timestep:.4g} s (robot {robot.name!r})")

    t = np.arange(N) / rate
    names = tuple(robot.joint_names)
    truth_log = Log(t=t, q=Q, v=V, tau=TAU, joint_names=names,
                    source=f"simulated:{robot.name} (loops, MuJoCo, noise-free)")
    log = _encoded_log(robot, t, Q, V, TAU, noise, rng_noise, f"simulated:{robot.name} (loops, MuJoCo)")
    used = ["MuJoCo dry friction on the actuated joints (frictionloss constraint: stiction, exact sign)",
            f"controller at {control_rate:g} Hz with PD feedback on a nominal-model feedforward, "
            "zero-order hold",
            "soft MuJoCo loop constraints (connect equality; violation reported)"]
    if stribeck_ratio:
        used.append(f"Stribeck hump fs/fc = {stribeck_ratio:g}, v_st = {stribeck_velocity:g} rad/s")
    friction = {"model": "mujoco-frictionloss-damping", "velocity_scale": None,
                "law": "frictionloss = fc (dry), damping = fv, + (fs - fc) exp(-(v/v_st)^2) sign(v) on "
                       "actuated joints; passive joints frictionless",
                "stribeck_ratio": stribeck_ratio, "stribeck_velocity": stribeck_velocity}
    controller = {"kind": "constrained nominal inverse dynamics + PD", "kp": kp.tolist(), "kd": kd.tolist(),
                  "control_rate": float(control_rate), "mujoco_timestep": float(timestep),
                  "integrator": "implicitfast", "equality_solref": list(EQ_SOLREF),
                  "equality_solimp": list(EQ_SOLIMP), "control_steps_clipped_at_effort_limit": int(clipped)}
    doc = _doc(robot, drawn, friction=friction, noise=noise, seed=seed, rate=rate, duration=duration,
               controller=controller, out_of_class=used,
               convention="tau[k] = motor torque applied at t_k (qfrc_actuator); a[k] = MuJoCo qacc at t_k",
               closure_violation=viol, simulator="mujoco")
    return LoopSimResult(log=log, truth_log=truth_log, truth_acceleration=A, truth=doc,
                         closure_violation=viol, trajectory=traj,
                         desired={"q": Qd[::log_every // ctrl_every][:N]})


# ---------------------------------------------------------------------------------------------- output
def truth_trajectory_frame(result: LoopSimResult) -> pd.DataFrame:
    """Noise-free ``t, q.*, v.*, a.*, tau.*`` table of all joints (tau 0 on passive joints); the same table
    as `fg_sysid.datasets.simulate.truth_trajectory_frame`."""
    from .simulate import truth_trajectory_frame as frame

    return frame(result)


def write_loop_log(log: Log, path: str | os.PathLike) -> Path:
    """Write a looped robot's log: columns of the encoded joints, ``tau.`` only where measured (the
    actuated joints; the all-NaN effort columns of passive joints are left out)."""
    from .io import log_to_frame, write_frame

    df = log_to_frame(log)
    drop = [c for c in df.columns if c.startswith("tau.") and df[c].isna().all()]
    return write_frame(df.drop(columns=drop), path)


def write_loop_simulation(result: LoopSimResult, out_dir: str | os.PathLike) -> None:
    """``log.parquet`` (encoded joints, actuated efforts), ``truth.json``, ``truth_trajectory.parquet``."""
    from .simulate import write_outputs

    write_outputs(out_dir, result.log, truth_trajectory_frame(result), result.truth,
                  log_writer=write_loop_log)


__all__ = ["ClosureError", "LoopSimResult", "build_loop_mujoco_model", "closed_states", "constrained_torque",
           "plan_motion", "reference_configuration", "simulate_loop_inclass", "simulate_loop_mujoco",
           "truth_trajectory_frame", "write_loop_log", "write_loop_simulation"]


# ---------------------------------------------------------------------------------------------- floating
def _knee_targets(ck: ClosureKinematics, q_full: np.ndarray, dep_v) -> np.ndarray:
    """The configuration whose closures hold with the calf joints at their values in ``q_full``: the knee
    motors and rods (v-indices ``dep_v``) solved by closure IK (Gauss–Newton from ``q_full``)."""
    return ck.solve_passive(q_full, dep_v)


def mj_acceleration_to_pin(qpos, qvel, qacc, info, nv_pin: int) -> np.ndarray:
    """MuJoCo ``qacc`` -> Pinocchio ``a`` (nv_pin,) of a free-flyer robot.

    MuJoCo's free joint: linear velocity ṗ and acceleration p̈ in the WORLD frame, angular ω and ω̇ in the
    base frame. Pinocchio's free flyer: v = (Rᵀṗ, ω) in the base frame and a = dv/dt, so
    a_lin = d(Rᵀṗ)/dt = Rᵀp̈ − ω × (Rᵀṗ) and a_ang = ω̇ (the base-frame spatial acceleration);
    the joints' entries are copied (same order as `mujoco_sim.mj_to_pin`)."""
    qpos, qvel, qacc = (np.asarray(x, float) for x in (qpos, qvel, qacc))
    w, x, y, z = qpos[3:7]
    R = pin.Quaternion(w, x, y, z).normalized().toRotationMatrix()
    a = np.zeros(nv_pin)
    a[:3] = R.T @ qacc[:3] - np.cross(qvel[3:6], R.T @ qvel[:3])
    a[3:6] = qacc[3:6]
    a[info.pin_idx_v] = qacc[info.dof_adr]
    return a


def simulate_loop_stance(robot: RobotModel, duration: float = 4.8, rate: float = 500.0,
                         noise: float = 0.0, seed: int = 0, motion: str = "steps", timestep: float = 0.0005,
                         step_period: float = 2.4, settle: float = 0.3, kp: float = 2000.0, kd: float = 40.0,
                         foot_radius: float = 0.02, truth: dict | None = None, friction_scale: float = 1.0,
                         lift: float = 0.08, loop: float = 0.05, exact: dict | None = None):
    """The floating B1 with four-bar knees (``b1_fourbar``) standing or stepping in place in MuJoCo.

    Truth: `mujoco_sim.draw_truth` (inertias, friction ∝ effort limit, armature ∝ M_ii) with the passive
    joints' friction and armature set to 0. Model: `build_mujoco_spec` with feet and floor, motors on the
    actuated joints only, one ``connect`` equality per knee linkage (stiff ``solref`` 2·timestep).
    Motion: ``"steps"`` — the catalog B1's static step in place (`mujoco_sim.StepPlan`: one foot lifted
    at a time for ``step_period`` s, two loops in the air) planned on the serial leg; each calf target
    becomes a knee-motor target through the closure (IK with the calf held); ``"stand"`` — the standing
    posture. Joint PD on the actuated joints, ``kp``/``kd`` at the hip and thigh and ``kp·r²``/``kd·r²``
    at the knee motor (r = dq_calf/dq_motor at the standing posture, so that the calf sees ``kp``).
    ``truth``: a previous result's truth record (held-out logs of the same robot; ``seed`` then only
    draws the noise). ``friction_scale`` multiplies the drawn dry friction fc (MuJoCo ``frictionloss``;
    stiction stays; 0.25 → 0.5 % of the effort limit instead of 2 %). ``lift`` [m] and ``loop`` [m]: the
    swing foot's lift and the radius of its two loops in the air (`mujoco_sim.StepPlan`; larger values =
    larger knee travel). ``exact``: a dict that receives ``"a_pin"`` (N, nv), the exact Pinocchio
    accelerations at the samples (`mj_acceleration_to_pin`; the held-out "exact states" score).
    Returns ``(StanceResult of all joints, Log of the encoded joints (efforts of the
    actuated ones), max closure violation [m])``.
    """
    import mujoco

    from .mujoco_sim import (
        MujocoSimError,
        StanceResult,
        StepPlan,
        debounce_contacts,
        pin_to_mj,
        record_floating_run,
        standing_configuration,
        standing_posture,
        to_log,
    )
    from .mujoco_sim import (
        draw_truth as stance_truth,
    )

    if not robot.floating_base:
        raise SimulationError(f"robot {robot.name!r}: simulate_loop_stance needs a floating base")
    if motion not in ("steps", "stand"):
        raise SimulationError(f"motion must be 'steps' or 'stand', got {motion!r}")
    feet = tuple(robot.contact_frames)
    n = robot.n_joints
    names = list(robot.joint_names)
    act, dep, enc = _indices(robot)
    iv, iq = _v_index(robot), np.asarray(robot.joint_index_q(), int)
    ck = closure_kinematics(robot)
    calf = [i for i, j in enumerate(names) if j.endswith("calf_joint")]
    solve_for = [i for i in dep if i not in calf] + [i for i in act if names[i].endswith("knee_motor")]
    drawn = stance_truth(robot, seed, feet, foot_radius)
    if truth is not None:
        drawn = _given_truth(truth, robot)
    if truth is None and friction_scale != 1.0:
        drawn["fc"] = np.asarray(drawn["fc"], float) * float(friction_scale)
    passive = [names.index(j) for j in actuation_of(robot).passive]
    for key in ("fc", "fv", "armature"):
        drawn[key][passive] = 0.0

    q0j = standing_posture(robot)
    q0 = reference_configuration(robot)
    q0[iq] = np.where([j.endswith(("calf_joint", "knee_motor", "rod_joint")) for j in names], q0[iq], q0j)
    q0 = ck.solve_passive(q0, iv[dep])
    q0 = standing_configuration(robot, q0[iq], feet, foot_radius)
    G, ind = ck.dependent_map(q0, iv[dep])
    pos = {int(c): i for i, c in enumerate(ind)}
    ratio = {i: abs(G[iv[c], pos[int(iv[i])]]) for i in act if names[i].endswith("knee_motor")
             for c in calf if names[c][:3] == names[i][:3]}
    kp_j, kd_j = np.full(n, kp), np.full(n, kd)
    for i, r in ratio.items():
        kp_j[i], kd_j[i] = kp * r**2, kd * r**2

    plan = None
    if motion == "steps":
        from ..robots import load_robot

        serial = load_robot("b1")
        ser_names = list(serial.joint_names)
        q0s = standing_configuration(serial, np.array([q0[iq[names.index(j)]] for j in ser_names]), feet,
                                     foot_radius)
        plan = StepPlan(serial, q0s, feet, duration, period=step_period, rate=rate, lift=lift, loop=loop)
        ser_of = [names.index(j) for j in ser_names]

    # equality time constant 2·timestep
    mj, info, sites = build_loop_mujoco_model(robot, drawn, timestep, (2 * timestep, 1.0), EQ_SOLIMP, feet,
                                              foot_radius)
    data = mujoco.MjData(mj)
    act_ids = np.array([int(mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_ACTUATOR, f"{names[i]}_motor"))
                        for i in act])
    data.qpos[:], data.qvel[:] = pin_to_mj(q0, None, info, mj.nq, mj.nv)
    mujoco.mj_forward(mj, data)
    q_target = q0.copy()
    cache = {"t": None, "qd": q0[iq].copy()}

    def targets(t_log):
        if plan is None or t_log <= 0:
            return q0[iq]
        if cache["t"] == t_log:
            return cache["qd"]
        qs = plan(t_log, data.qpos[3:7])
        q_target[iq[ser_of]] = qs
        qt = _knee_targets(ck, q_target, iv[solve_for])
        q_target[:] = qt
        cache["t"], cache["qd"] = t_log, qt[iq].copy()
        return cache["qd"]

    def control(t_log):
        qd = targets(t_log)
        qj = data.qpos[info.qpos_adr]
        vj = data.qvel[info.dof_adr]
        data.ctrl[act_ids] = (kp_j * (qd - qj) - kd_j * vj)[act]
        return qd

    for _ in range(int(round(settle / timestep))):
        control(0.0)
        mujoco.mj_step(mj, data)
    substeps = int(round(1.0 / (rate * timestep)))
    viol = [0.0]
    acc = []

    def closure_gap(data):
        for a_id, b_id in sites:
            viol[0] = max(viol[0], float(np.linalg.norm(data.site_xpos[a_id] - data.site_xpos[b_id])))
        if exact is not None:
            acc.append(mj_acceleration_to_pin(data.qpos, data.qvel, data.qacc, info, robot.nv))

    try:
        t, out, base_quat, contact, cforce, q_pin, v_pin = record_floating_run(
            mj, data, info, robot, control, duration, rate, substeps, timestep, len(feet), actuated=act,
            on_sample=closure_gap)
    except MujocoSimError as e:
        raise SimulationError(f"{e} (robot {robot.name!r})") from None
    viol = viol[0]
    if exact is not None:
        exact["a_pin"] = np.asarray(acc, float)

    friction = {"model": "mujoco-frictionloss-damping", "velocity_scale": None,
                "law": "frictionloss = fc (dry), damping = fv on actuated joints"}
    doc = _doc(robot, drawn, friction=friction,
               noise=noise, seed=seed, rate=rate, duration=duration,
               controller={"kind": "joint PD on actuated joints", "kp": kp_j[act].tolist(),
                           "kd": kd_j[act].tolist(), "motion": motion, "step_period": step_period,
                           "lift": lift, "loop": loop,
                           "settle": settle, "mujoco_timestep": timestep},
               out_of_class=["MuJoCo dry friction (frictionloss)", "soft contacts and loop constraints",
                             "PD feedback in the efforts"],
               convention="tau[k] = motor torque applied at t_k", closure_violation=viol, simulator="mujoco")
    doc["foot_frames"] = list(feet)
    doc["base_tilt_max_deg"] = float(base_tilt_deg(q_pin).max())  # a fall shows here (docs/loops-floating.md)
    contact = debounce_contacts(contact, int(round(0.02 * rate)))
    doc["feet_in_contact_min"] = int(np.asarray(contact, bool).sum(axis=1).min())  # debounced flags
    # efforts at their limit (a jammed linkage shows here: docs/loops-floating.md), samples per joint
    sat = np.abs(out["tau"]) >= 0.99 * robot.effort_limits()[None]
    doc["effort_saturated_samples"] = {names[j]: int(c) for j, c in enumerate(sat.sum(axis=0)) if c}
    rng_noise = np.random.default_rng(np.random.SeedSequence(int(seed)).spawn(3)[2])
    meas = {}
    for key, sigma in (("q", noise), ("v", noise), ("tau", noise), ("gyro", noise), ("acc", 10.0 * noise)):
        x = out[key]
        meas[key] = x + rng_noise.normal(0.0, sigma, x.shape) if sigma > 0 else x.copy()
    res = StanceResult(t=t, base_quat=base_quat, contact=contact,
                       contact_force=cforce, q_pin=q_pin, v_pin=v_pin, joint_names=tuple(names),
                       foot_frames=feet, truth=doc, meas=meas, **out)
    full = to_log(res, source=f"simulated:{robot.name} (loops, MuJoCo, {motion})")
    tau = np.full_like(full.tau, np.nan)
    tau[:, act] = full.tau[:, act]
    import dataclasses

    log = dataclasses.replace(full, q=full.q[:, enc], v=full.v[:, enc], tau=tau[:, enc],
                              joint_names=tuple(names[i] for i in enc))
    return res, log, viol


def base_tilt_deg(q_pin: np.ndarray) -> np.ndarray:
    """Angle [deg] between the base's z axis and the world's vertical per sample (Pinocchio q, quaternion
    x, y, z, w at q[3:7]): R_zz = 1 − 2(x² + y²)."""
    x, y = np.asarray(q_pin, float)[:, 3], np.asarray(q_pin, float)[:, 4]
    return np.degrees(np.arccos(np.clip(1.0 - 2.0 * (x * x + y * y), -1.0, 1.0)))


def _add_closures(spec, robot, solref, solimp):
    """Delete the passive joints' motors; add a site at each closing frame and a ``connect`` equality."""
    import mujoco

    passive = set(actuation_of(robot).passive)
    for act in list(spec.actuators):
        if act.target in passive:
            spec.delete(act)
    model = robot.model
    for lp in robot.loops:
        for f in lp.frames:
            fr = model.frames[model.getFrameId(f)]
            body = spec.body(robot.body_names[int(fr.parentJoint) - 1])
            body.add_site(name=f"{f}_site", pos=np.array(fr.placement.translation, float))
        spec.add_equality(name=lp.name, type=mujoco.mjtEq.mjEQ_CONNECT, objtype=mujoco.mjtObj.mjOBJ_SITE,
                          name1=f"{lp.frames[0]}_site", name2=f"{lp.frames[1]}_site",
                          solref=list(solref), solimp=list(solimp))
