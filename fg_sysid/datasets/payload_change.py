"""A fixed-base log whose end-effector payload appears mid-run (truth harness for online tracking).

`simulate_payload_change` runs the in-class simulator (`fg_sysid.datasets.simulate.simulate`: the
drawn true robot, computed-torque + PID control on the nominal model, zero-order hold, RK4) and, from
the sample at ``change_time`` on, continues the *same* closed loop — same state, same PID integral, same
desired trajectory — with a rigid payload attached to the end-effector body: a solid sphere of mass
``payload_mass`` [kg] and radius ``payload_radius`` [m] whose centre sits at ``payload_offset`` [m] in
the end-effector body frame. Its spatial inertia (Pinocchio's ``Inertia.FromSphere`` moved by the
parallel-axis theorem, ``SE3.act``) is added to the body's dynamic parameters (m, m·c, I about the body
frame origin are linear in the inertia, so adding the 10-vectors is exact). The controller is not told:
its tracking error grows until the PID integral absorbs the extra load, as on a real robot.

`payload_truth` returns the post-change truth document (`simulate`'s ``truth``), so held-out logs of the
loaded robot are ``simulate(robot, ..., truth=payload_truth(...))``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from ..robots import INERTIAL_SUFFIXES, RobotModel
from .log import Log
from .simulate import SimResult, SimulationError, _stage, measure, nominal_scales, simulate, truth_arrays

__all__ = ["PayloadChange", "payload_parameters", "payload_truth", "simulate_payload_change"]


@dataclass(frozen=True, eq=False)
class PayloadChange:
    """log (noisy, what the estimator sees), truth_log (noise-free), change_time [s], change_index (first
    sample with the payload), truth_before / truth_after (truth documents), body (end-effector body)."""

    log: Log
    truth_log: Log
    change_time: float
    change_index: int
    truth_before: dict
    truth_after: dict
    body: str


def payload_parameters(mass: float, offset=(0.0, 0.0, 0.0), radius: float = 0.03) -> np.ndarray:
    """Dynamic parameters (m, m·c, I about the body frame origin; Pinocchio order) of a solid sphere of
    ``mass`` [kg], radius [m], centred at ``offset`` [m] in the body frame."""
    if not (np.isfinite(mass) and mass > 0):
        raise SimulationError(f"payload mass must be > 0 [kg], got {mass}")
    if not (np.isfinite(radius) and radius > 0):
        raise SimulationError(f"payload radius must be > 0 [m], got {radius}")
    sphere = pin.Inertia.FromSphere(float(mass), float(radius))
    return pin.SE3(np.eye(3), np.asarray(offset, float)).act(sphere).toDynamicParameters()


def payload_truth(
    truth: dict,
    robot: RobotModel,
    mass: float = 1.0,
    offset=(0.0, 0.0, 0.0),
    radius: float = 0.03,
    body: str | None = None,
) -> dict:
    """``truth`` (a `simulate` truth document) with the payload added to ``body`` (default: the last)."""
    body = body or robot.body_names[-1]
    if body not in robot.body_names:
        raise SimulationError(f"unknown body {body!r}; robot {robot.name!r} bodies: {list(robot.body_names)}")
    extra = payload_parameters(mass, offset, radius)
    out = dict(truth)
    params = dict(truth["parameters"])
    for s, x in zip(INERTIAL_SUFFIXES, extra, strict=True):
        params[f"{body}.{s}"] = params[f"{body}.{s}"] + float(x)
    out["parameters"] = params
    out["payload"] = {
        "body": body,
        "mass": float(mass),
        "offset": [float(x) for x in offset],
        "radius": float(radius),
        "shape": "solid sphere",
    }
    return out


def simulate_payload_change(
    robot: RobotModel,
    duration: float,
    rate: float,
    noise: float,
    seed: int,
    change_time: float,
    mass: float = 1.0,
    offset=(0.0, 0.0, 0.0),
    radius: float = 0.03,
    body: str | None = None,
    trajectory=None,
) -> PayloadChange:
    """Simulate ``duration`` s at ``rate`` Hz with the payload attached at ``change_time`` s (see the
    module docstring). In-class truth only (no `Effects`)."""
    sim: SimResult = simulate(robot, duration, rate, noise, seed, trajectory=trajectory)
    if not (np.isfinite(change_time) and 0 < change_time < duration):
        raise SimulationError(f"change_time must be inside (0, {duration}) s, got {change_time}")
    body = body or robot.body_names[-1]
    after = payload_truth(sim.truth, robot, mass, offset, radius, body)
    t = sim.truth_log.t
    kc = int(np.searchsorted(t, change_time - 1e-12))
    dt = 1.0 / rate
    q_d, v_d, a_d = sim.desired["q"], sim.desired["v"], sim.desired["a"]
    ctrl = sim.truth["controller"]
    kp, kd, ki, n_sub = ctrl["kp"], ctrl["kd"], ctrl["ki"], int(ctrl["rk4_substeps"])
    vs = float(sim.truth["friction_velocity_scale"])
    scales = nominal_scales(robot, q_d, v_d, a_d)
    ctrl_model = robot.model.copy()
    ctrl_model.armature = np.asarray(scales["armature"], float).copy()
    cd = ctrl_model.createData()
    arr = truth_arrays(after, robot)
    true_model = robot.pinocchio_model_with(arr["inertial"])
    true_model.armature = np.asarray(arr["armature"], float).copy()
    td = true_model.createData()
    fc, fv = arr["fc"], arr["fv"]
    Q, V, TAU = (np.array(x, float) for x in (sim.truth_log.q, sim.truth_log.v, sim.truth_log.tau))
    e_int = np.sum(q_d[:kc] - Q[:kc], axis=0) * dt  # the PID integral the simulator holds at sample kc
    q, v = Q[kc].copy(), V[kc].copy()
    h = dt / n_sub
    for k in range(kc, len(t)):
        e = q_d[k] - q
        a_cmd = a_d[k] + kp * e + kd * (v_d[k] - v) + ki * e_int
        e_int = e_int + e * dt
        tau = (
            pin.rnea(ctrl_model, cd, q, v, a_cmd)
            + scales["fc"] * np.tanh(v_d[k] / vs)
            + scales["fv"] * v_d[k]
        )
        Q[k], V[k], TAU[k] = q, v, tau
        if k == len(t) - 1:
            break
        for _ in range(n_sub):  # RK4, as the simulator (zero-order hold of tau over the sample period)
            k1v = _stage(true_model, td, q, v, tau, fc, fv, vs)
            k2q, k2v = (
                v + 0.5 * h * k1v,
                _stage(true_model, td, q + 0.5 * h * v, v + 0.5 * h * k1v, tau, fc, fv, vs),
            )
            k3q = v + 0.5 * h * k2v
            k3v = _stage(true_model, td, q + 0.5 * h * k2q, k3q, tau, fc, fv, vs)
            k4q = v + h * k3v
            k4v = _stage(true_model, td, q + h * k3q, k4q, tau, fc, fv, vs)
            q = q + (h / 6.0) * (v + 2 * k2q + 2 * k3q + k4q)
            v = v + (h / 6.0) * (k1v + 2 * k2v + 2 * k3v + k4v)
        if not (np.isfinite(q).all() and np.isfinite(v).all()):
            raise SimulationError(f"payload-change simulation diverged at t={t[k + 1]:.4g} s")
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 13]))
    n = robot.n_joints
    q_m, v_m, tau_m = measure(Q[kc:], V[kc:], TAU[kc:], noise, np.ones(n), np.zeros(n), 0.0, rng)
    names = tuple(robot.joint_names)
    log = Log(
        t=t.copy(),
        q=np.vstack([sim.log.q[:kc], q_m]),
        v=np.vstack([sim.log.v[:kc], v_m]),
        tau=np.vstack([sim.log.tau[:kc], tau_m]),
        joint_names=names,
        source=f"simulated:{robot.name} (payload {mass:g} kg at t={t[kc]:.4g} s)",
    )
    truth_log = Log(
        t=t.copy(),
        q=Q,
        v=V,
        tau=TAU,
        joint_names=names,
        source=f"simulated:{robot.name} (noise-free; payload at t={t[kc]:.4g} s)",
    )
    return PayloadChange(log, truth_log, float(t[kc]), kc, sim.truth, after, body)
