"""In-class simulation of a looped robot with Pinocchio's constrained dynamics (issue 11).

The tree model of a `RobotModel` with ``loops`` is integrated with `pinocchio.constraintDynamics`, one
`RigidConstraintModel` per closure (``point3d`` and ``planar`` → CONTACT_3D at the two frames, ``6d`` →
CONTACT_6D; Baumgarte stabilization keeps the drift small), semi-implicit Euler with ``substeps``
steps per logged sample. Actuated joints follow a multi-sine reference with a PD law (plus the truth
friction and armature of the joint-side model); passive joints carry no torque except their friction.
The truth is the estimator's own model class: rigid bodies of the URDF (or given inertias), friction
τ_f = fc tanh(v/vs) + fv v and armature per joint.

The log (`Log`) has encoder columns for encoded joints only (unencoded joints: NaN, dropped by
`log_frame`), joint-side efforts for actuated joints (passive: NaN), Gaussian noise of std ``noise`` on
q and τ; ``truth`` holds the exact states, closure forces and physical parameters.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pinocchio as pin

from ..robots import RobotModel
from ..robots.loop_kinematics import ClosureKinematics
from ..robots.loops import actuation_of, encoded_mask, passive_mask
from .log import Log


@dataclass
class LoopedTruth:
    """Exact trajectory and parameters of a constrained simulation."""

    t: np.ndarray
    q: np.ndarray
    v: np.ndarray
    a: np.ndarray
    tau: np.ndarray  # applied joint-side motor torques (N, nj) (0 on passive joints)
    friction: np.ndarray  # (nj, 3): fc [N·m], fv [N·m·s/rad], vs [rad/s]
    armature: np.ndarray  # (nj,) [kg·m²]
    inertial: np.ndarray  # (nb, 10)
    max_violation: float  # worst position-level closure residual over the log [m | rad]


def constraint_models(robot: RobotModel, kp: float = 0.0, kd: float = 0.0):
    """One `pinocchio.RigidConstraintModel` per closure (see the module docstring) + their datas."""
    model = robot.model
    cms = []
    for c in robot.loops:
        fa, fb = (model.frames[model.getFrameId(f)] for f in c.frames)
        kind = pin.ContactType.CONTACT_6D if c.type == "6d" else pin.ContactType.CONTACT_3D
        cm = pin.RigidConstraintModel(kind, model, fa.parentJoint, fa.placement, fb.parentJoint, fb.placement,
                                      pin.ReferenceFrame.LOCAL)
        bp = cm.m_baumgarte_parameters
        bp.Kp, bp.Kd = float(kp), float(kd)
        cm.setBaumgarteCorrectorParameters(bp)
        cms.append(cm)
    vec = pin.StdVec_RigidConstraintModel()
    for cm in cms:
        vec.append(cm)
    datas = pin.StdVec_RigidConstraintData()
    for cm in cms:
        datas.append(cm.createData())
    return vec, datas


def simulate_looped(robot: RobotModel, duration: float = 4.0, rate: float = 500.0, noise: float = 0.01,
                    seed: int = 0, friction=(0.08, 0.03, 0.05), passive_friction=(0.01, 0.004, 0.05),
                    armature: float = 2e-3, amplitude: float = 0.8, substeps: int = 10,
                    inertial: np.ndarray | None = None, stribeck: tuple | None = None,
                    effort_gain: float = 1.0) -> tuple[Log, LoopedTruth]:
    """Simulate ``robot`` (fixed base, with loops) and return (noisy log, truth); see the module docstring.

    ``friction`` / ``passive_friction``: (fc, fv, vs) of actuated / passive joints; ``armature`` [kg·m²]
    of actuated joints (joint side; passive joints have none); ``amplitude`` [rad] of the actuated joints'
    multi-sine reference around q = 0.

    Out-of-class options (outside the estimator's model): ``stribeck`` = (fs [N·m], v_s [rad/s]) adds a
    Stribeck peak to the actuated joints' friction, (fc + (fs − fc) e^{−(v/v_s)²}) tanh(v/vs) + fv v;
    ``effort_gain`` scales the logged efforts (a torque-constant error: log τ = gain × applied τ)."""
    if robot.floating_base or not robot.loops:
        raise ValueError("simulate_looped needs a fixed-base robot with loops")
    rng = np.random.default_rng(seed)
    nj = robot.n_joints
    passive = passive_mask(robot)
    iv = robot.joint_index_v()
    model = robot.model.copy()
    if inertial is not None:
        robot.write_inertias(model, inertial)
    fr = np.where(passive[:, None], np.asarray(passive_friction, float)[None],
                  np.asarray(friction, float)[None])
    arm = np.where(passive, 0.0, armature)
    model.armature = np.zeros(model.nv)
    model.armature[iv] = arm
    data = model.createData()
    cms, cds = constraint_models(robot, kp=400.0, kd=40.0)
    pin.initConstraintDynamics(model, data, cms, cds)
    prox = pin.ProximalSettings(1e-12, 1e-10, 50)
    dt_log = 1.0 / rate
    dt = dt_log / substeps
    n = int(round(duration * rate)) + 1
    t = np.arange(n) * dt_log
    freqs = np.array([0.3, 0.7, 1.3]) * 2 * np.pi
    phases = rng.uniform(0, 2 * np.pi, size=(nj, 3))

    def reference(tt):
        s = np.sin(freqs[None] * tt + phases).sum(axis=1) / 3
        ds = (freqs[None] * np.cos(freqs[None] * tt + phases)).sum(axis=1) / 3
        ramp = min(tt / 0.5, 1.0)
        return amplitude * ramp * s, amplitude * ramp * ds

    def fric(vj):
        fc = fr[:, 0]
        if stribeck is not None:
            fs, v_s = stribeck
            fc = np.where(passive, fc, fc + (fs - fc) * np.exp(-(vj / v_s) ** 2))
        return fc * np.tanh(vj / fr[:, 2]) + fr[:, 1] * vj

    q = pin.neutral(model)
    v = np.zeros(model.nv)
    Q, V, A = (np.empty((n, model.nv)) for _ in range(3))
    TAU = np.empty((n, nj))
    kp, kd = 30.0, 2.0
    for i in range(n):
        for s in range(substeps):
            qr, vr = reference(t[i] + s * dt)
            u = np.where(passive, 0.0, kp * (qr - q[iv]) + kd * (vr - v[iv]))
            tau = np.zeros(model.nv)
            tau[iv] = u - fric(v[iv])
            a = pin.constraintDynamics(model, data, q, v, tau, cms, cds, prox)
            if s == 0:
                Q[i], V[i], A[i], TAU[i] = q, v, a, u
            v = v + dt * a
            q = pin.integrate(model, q, dt * v)
    viol = float(np.abs(ClosureKinematics(robot.model, robot.loops).position(Q, False)[0]).max())
    truth = LoopedTruth(t, Q, V, A, TAU, fr, arm, robot.nominal_inertial_parameters() if inertial is None
                        else np.asarray(inertial, float), viol)
    enc = encoded_mask(robot)
    qn = Q[:, iv] + noise * rng.standard_normal((n, nj))
    qn[:, ~enc] = np.nan
    taun = effort_gain * TAU + noise * rng.standard_normal((n, nj))
    taun[:, passive] = np.nan
    log = Log(t=t, q=qn, v=None, tau=taun, joint_names=tuple(robot.joint_names), source="simulate_looped")
    return log, truth


def log_frame(log: Log, robot: RobotModel) -> pd.DataFrame:
    """The log as a table in the data format: ``q.`` columns of encoded joints, ``tau.`` of actuated ones."""
    act = actuation_of(robot)
    cols = {"t": log.t}
    for i, j in enumerate(log.joint_names):
        if j not in act.unencoded:
            cols[f"q.{j}"] = log.q[:, i]
    for i, j in enumerate(log.joint_names):
        if j not in act.passive:
            cols[f"tau.{j}"] = log.tau[:, i]
    return pd.DataFrame(cols)
