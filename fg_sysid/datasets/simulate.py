"""Synthetic identification data with known truth (paper 004, Sec. IX protocol).

`simulate` draws a *true* robot (URDF inertias perturbed while staying physically consistent,
Coulomb + viscous friction, armature), makes it follow a `FourierTrajectory` with a computed-torque
controller built on the *nominal* model (PID feedback on the true state), integrates the true
dynamics, and returns the noise-free and the noisy logs together with the truth.

True dynamics (fixed base, 1-DoF joints)::

    (M(q) + diag(armature)) a + h(q, v) + tau_f(v) = tau,     tau_f(v) = fc·tanh(v / vs) + fv·v

Time convention (zero-order hold): at each sample ``t_k`` the controller reads the true state
``(q_k, v_k)``, computes ``tau_k`` and holds it constant over ``[t_k, t_k + 1/rate)``; the dynamics are
integrated with RK4 and several substeps per sample. The logged ``tau_k`` is exactly the applied
torque, and ``truth_acceleration[k]`` is the acceleration just after ``t_k`` (``a_k = FD(q_k, v_k,
tau_k)``), so the inverse-dynamics identity above holds *exactly* at every sample instant with
``(q_k, v_k, a_k, tau_k)``. (The acceleration is discontinuous at sample instants because ``tau``
jumps there; a finite difference of ``v`` approximates the interval average instead.)

Truth draws (all from ``seed``; ``U`` = uniform):

* inertia of each body: mass × U(0.8, 1.2); principal second moments of the mass distribution
  (eigenvalues of ``Σ = tr(I_c)/2·1 - I_c``) × mass factor × U(0.8, 1.2) each; principal axes
  rotated by a random rotation of ~0.05 rad; COM moved by N(0, (0.1·r_g)²) per axis
  (``r_g`` = radius of gyration). Non-negative second moments keep every body physically
  consistent (m > 0, I_c ≻= 0, triangle inequalities).
* friction and armature, per joint, relative to the motion's scale so they are noticeable but not
  dominant: with ``P_i`` = peak |rigid-body inverse-dynamics torque| of the nominal model along the
  planned trajectory and ``V_i`` = peak planned |v|,
  ``fc_i = U(0.5, 1.5)·0.05·P_i``, ``fv_i = U(0.5, 1.5)·0.05·P_i / V_i`` (viscous ≈ 5 % of the peak
  torque at peak speed), ``armature_i = U(0.5, 1.5)·0.1·mean M_ii(q)`` (10 % of the joint's mean
  link inertia). The controller's "nominal guess" is the centre of each range (the factors at 1).

Noise: zero-mean Gaussian, standard deviation ``noise`` on q [rad], v [rad/s] and tau [N·m]
(independent per sample and joint); ``noise = 0`` gives exact data.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pinocchio as pin

from ..robots import INERTIAL_SUFFIXES, RobotModel
from .excitation import FourierTrajectory, TrajectoryError
from .log import Log

FRICTION_MODEL = "coulomb-viscous"

#: Scales of the truth draws (see the module docstring).
MASS_RANGE = (0.8, 1.2)
SECOND_MOMENT_RANGE = (0.8, 1.2)
AXIS_ROTATION_STD = 0.05  # rad
COM_SHIFT_FRACTION = 0.1  # of the radius of gyration
FRICTION_RANGE = (0.5, 1.5)
COULOMB_FRACTION = 0.05  # of the peak rigid-body torque
VISCOUS_FRACTION = 0.05  # of the peak rigid-body torque, at the peak speed
ARMATURE_FRACTION = 0.1  # of the mean diagonal of M(q)

#: Controller bandwidth [rad/s]: PID on the acceleration command with a triple pole at -omega
#: (kp = 3·omega², kd = 3·omega, ki = omega³), omega = min(CONTROL_BANDWIDTH, 2π·rate/40).
CONTROL_BANDWIDTH = 2 * math.pi * 10.0


class SimulationError(ValueError):
    """Bad simulation input (the message names the culprit)."""


@dataclass(frozen=True, eq=False)
class SimResult:
    """Simulation output.

    Attributes:
        log: the noisy log (what an estimator sees).
        truth_log: the noise-free log (q, v, applied tau).
        truth_acceleration: (N, n) true accelerations just after each sample instant (see module doc).
        truth: JSON-ready description of the truth (see ``docs/data-format.md``).
        trajectory: the planned (desired) trajectory.
    """

    log: Log
    truth_log: Log
    truth_acceleration: np.ndarray
    truth: dict
    trajectory: FourierTrajectory | None = None
    desired: dict = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------- helpers
def friction_torque(v, fc, fv, velocity_scale: float) -> np.ndarray:
    """Coulomb-viscous friction ``fc·tanh(v/vs) + fv·v`` (broadcasts over leading axes)."""
    v = np.asarray(v, float)
    return fc * np.tanh(v / velocity_scale) + fv * v


def _rotation(rng, std) -> np.ndarray:
    return pin.exp3(rng.normal(0.0, std, 3))


def perturb_inertia(params: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A physically consistent random perturbation of one body's 10 dynamic parameters."""
    params = np.asarray(params, float)
    inertia = pin.Inertia.FromDynamicParameters(params)
    m = float(inertia.mass)
    if m <= 0.0:
        return params.copy()
    c = np.array(inertia.lever)
    I_c = np.array(inertia.inertia)
    I_c = 0.5 * (I_c + I_c.T)
    sigma_c = 0.5 * np.trace(I_c) * np.eye(3) - I_c  # second moments of the mass distribution
    s, R = np.linalg.eigh(sigma_c)
    s = np.maximum(s, 0.0)
    mass_factor = rng.uniform(*MASS_RANGE)
    s_new = s * mass_factor * rng.uniform(*SECOND_MOMENT_RANGE, size=3)
    R_new = _rotation(rng, AXIS_ROTATION_STD) @ R
    sigma_new = R_new @ np.diag(s_new) @ R_new.T
    I_new = np.trace(sigma_new) * np.eye(3) - sigma_new
    r_g = math.sqrt(max(np.trace(sigma_c), 0.0) / m)
    c_new = c + rng.normal(0.0, COM_SHIFT_FRACTION * r_g, 3)
    return pin.Inertia(m * mass_factor, c_new, 0.5 * (I_new + I_new.T)).toDynamicParameters()


def is_physically_consistent(params: np.ndarray, tol: float = 1e-12) -> bool:
    """m > 0, rotational inertia about the COM positive semi-definite, triangle inequalities."""
    inertia = pin.Inertia.FromDynamicParameters(np.asarray(params, float))
    if inertia.mass <= 0:
        return False
    I_c = np.array(inertia.inertia)
    ev = np.linalg.eigvalsh(0.5 * (I_c + I_c.T))
    scale = max(abs(ev).max(), 1e-300)
    if ev.min() < -tol * scale:
        return False
    return bool(all(ev[i] + ev[j] >= ev[k] - tol * scale for i, j, k in ((0, 1, 2), (1, 2, 0), (0, 2, 1))))


def parameter_names(robot: RobotModel) -> list[str]:
    """Physical vector names: inertial, ``<j>.fc``, ``<j>.fv`` per joint, then ``<j>.armature``."""
    return robot.parameter_names(("fc", "fv"))


def truth_arrays(truth: dict, robot: RobotModel) -> dict:
    """Split a truth dict into arrays: ``inertial`` (n_bodies, 10), ``fc``, ``fv``, ``armature`` (n,)."""
    p = truth["parameters"]
    try:
        inertial = np.array([[p[f"{b}.{s}"] for s in INERTIAL_SUFFIXES] for b in robot.body_names], float)
        fc = np.array([p[f"{j}.fc"] for j in robot.joint_names], float)
        fv = np.array([p[f"{j}.fv"] for j in robot.joint_names], float)
        arm = np.array([p[f"{j}.armature"] for j in robot.joint_names], float)
    except KeyError as e:
        raise SimulationError(f"truth has no parameter {e.args[0]!r} for robot {robot.name!r}") from None
    return {"inertial": inertial, "fc": fc, "fv": fv, "armature": arm}


def truth_model(truth: dict, robot: RobotModel, with_armature: bool = True) -> pin.Model:
    """Pinocchio model of the true robot (true inertias and, by default, armature)."""
    arr = truth_arrays(truth, robot)
    model = robot.pinocchio_model_with(arr["inertial"])
    if with_armature:
        arm = np.array(model.armature)
        arm[robot.joint_index_v()] = arr["armature"]
        model.armature = arm
    return model


def _check_robot(robot: RobotModel) -> None:
    if robot.floating_base:
        raise SimulationError(f"robot {robot.name!r}: simulation supports fixed-base robots only")
    if robot.nq != robot.nv or robot.nv != robot.n_joints:
        raise SimulationError(
            f"robot {robot.name!r}: simulation needs one configuration coordinate per joint "
            f"(nq={robot.nq}, nv={robot.nv}; continuous joints are not supported — lock them)"
        )


def _stage(model, data, q, v, tau, fc, fv, vs):
    return pin.aba(model, data, q, v, tau - fc * np.tanh(v / vs) - fv * v).copy()


# ---------------------------------------------------------------------------------------------- simulate
def simulate(
    robot: RobotModel,
    duration: float,
    rate: float,
    noise: float,
    seed: int,
    trajectory: FourierTrajectory | None = None,
    friction_velocity_scale: float = 0.05,
    truth: dict | None = None,
) -> SimResult:
    """Simulate ``duration`` seconds sampled at ``rate`` Hz (``round(duration·rate) + 1`` samples).

    See the module docstring for the truth draws, the controller, the zero-order-hold convention and
    the noise model. ``trajectory`` (desired motion) defaults to ``FourierTrajectory.random`` drawn
    from ``seed``; the truth draws do not depend on whether a trajectory is given except through the
    friction/armature scales (which depend on the planned motion).

    ``truth`` (a previous run's ``SimResult.truth``) reuses that robot — same inertias, friction and
    armature — for held-out logs of the same system with another seed's motion.
    """
    _check_robot(robot)
    for name, val in (("duration", duration), ("rate", rate)):
        if not (np.isfinite(val) and val > 0):
            raise SimulationError(f"{name} must be a positive number, got {val}")
    if not (np.isfinite(noise) and noise >= 0):
        raise SimulationError(f"noise must be >= 0, got {noise}")
    if not (np.isfinite(friction_velocity_scale) and friction_velocity_scale > 0):
        raise SimulationError(f"friction_velocity_scale must be > 0, got {friction_velocity_scale}")
    if isinstance(seed, bool) or int(seed) != seed or seed < 0:
        raise SimulationError(f"seed must be a non-negative integer, got {seed!r}")
    N = int(round(duration * rate)) + 1
    if N < 2:
        raise SimulationError(f"duration {duration} s at {rate} Hz gives fewer than 2 samples")
    if N > 50_000_000:
        raise SimulationError(f"duration {duration} s at {rate} Hz gives {N} samples (too many)")

    ss = np.random.SeedSequence(int(seed))
    rng_traj, rng_truth, rng_noise = (np.random.default_rng(s) for s in ss.spawn(3))
    if trajectory is None:
        trajectory = FourierTrajectory.random(robot, duration, rng_traj)
    else:
        trajectory._names(robot)  # raises TrajectoryError on mismatch
        problems = trajectory.check_limits(robot)
        if problems:
            warnings.warn("trajectory leaves the robot's limits: " + "; ".join(problems), stacklevel=2)

    n = robot.n_joints
    dt = 1.0 / rate
    t = np.arange(N) * dt
    q_d, v_d, a_d = trajectory.evaluate(t)

    # ---- scales from the nominal model along the planned motion
    nominal = robot.model.copy()
    nd = nominal.createData()
    sub = np.unique(np.linspace(0, N - 1, min(N, 400)).astype(int))
    tau_rigid = np.array([pin.rnea(nominal, nd, q_d[k], v_d[k], a_d[k]) for k in sub])
    m_diag = np.array([np.diag(pin.crba(nominal, nd, q_d[k])) for k in sub[:: max(1, len(sub) // 50)]])
    peak_tau = np.maximum(np.abs(tau_rigid).max(0), 1e-3)
    peak_v = np.maximum(np.abs(v_d).max(0), 0.1)
    fc_nom = COULOMB_FRACTION * peak_tau
    fv_nom = VISCOUS_FRACTION * peak_tau / peak_v
    arm_nom = ARMATURE_FRACTION * np.maximum(m_diag.mean(0), 1e-6)

    # ---- truth draws
    P0 = robot.nominal_inertial_parameters()
    P_true = np.array([perturb_inertia(p, rng_truth) for p in P0])
    fc = fc_nom * rng_truth.uniform(*FRICTION_RANGE, n)
    fv = fv_nom * rng_truth.uniform(*FRICTION_RANGE, n)
    arm = arm_nom * rng_truth.uniform(*FRICTION_RANGE, n)
    vs = float(friction_velocity_scale)
    if truth is not None:
        given = truth_arrays(truth, robot)
        P_true, fc, fv, arm = given["inertial"], given["fc"], given["fv"], given["armature"]
        vs = float(truth.get("friction_velocity_scale", vs))

    true_model = robot.pinocchio_model_with(P_true)
    true_model.armature = np.asarray(arm, float).copy()
    td = true_model.createData()
    ctrl_model = robot.model.copy()
    ctrl_model.armature = np.asarray(arm_nom, float).copy()
    cd = ctrl_model.createData()

    # ---- RK4 substeps: keep h·λ <= 1 for the stiffest friction mode (tanh slope fc/vs + fv)
    D = np.diag(fc / vs + fv)
    lam = 0.0
    for k in sub[:: max(1, len(sub) // 20)]:
        M = pin.crba(true_model, td, q_d[k])
        M = np.triu(M) + np.triu(M, 1).T
        lam = max(lam, float(np.max(np.real(np.linalg.eigvals(np.linalg.solve(M, D))))))
    n_sub = int(min(200, max(1, math.ceil(lam * dt / 1.0))))
    h = dt / n_sub

    omega = min(CONTROL_BANDWIDTH, 2 * math.pi * rate / 40.0)
    kp, kd, ki = 3.0 * omega**2, 3.0 * omega, omega**3

    Q = np.empty((N, n))
    V = np.empty((N, n))
    A = np.empty((N, n))
    TAU = np.empty((N, n))
    q = q_d[0].copy()
    v = v_d[0].copy()
    e_int = np.zeros(n)
    for k in range(N):
        e = q_d[k] - q
        a_cmd = a_d[k] + kp * e + kd * (v_d[k] - v) + ki * e_int
        e_int += e * dt
        tau = pin.rnea(ctrl_model, cd, q, v, a_cmd) + fc_nom * np.tanh(v_d[k] / vs) + fv_nom * v_d[k]
        a0 = _stage(true_model, td, q, v, tau, fc, fv, vs)
        Q[k], V[k], A[k], TAU[k] = q, v, a0, tau
        if k == N - 1:
            break
        for s in range(n_sub):
            k1v = a0 if s == 0 else _stage(true_model, td, q, v, tau, fc, fv, vs)
            k1q = v
            k2q = v + 0.5 * h * k1v
            k2v = _stage(true_model, td, q + 0.5 * h * k1q, k2q, tau, fc, fv, vs)
            k3q = v + 0.5 * h * k2v
            k3v = _stage(true_model, td, q + 0.5 * h * k2q, k3q, tau, fc, fv, vs)
            k4q = v + h * k3v
            k4v = _stage(true_model, td, q + h * k3q, k4q, tau, fc, fv, vs)
            q = q + (h / 6.0) * (k1q + 2 * k2q + 2 * k3q + k4q)
            v = v + (h / 6.0) * (k1v + 2 * k2v + 2 * k3v + k4v)
        if not (np.isfinite(q).all() and np.isfinite(v).all()):
            raise SimulationError(f"simulation diverged at t={t[k + 1]:.4g} s (robot {robot.name!r})")

    lo, hi = robot.position_limits()
    out = np.flatnonzero(((Q < lo - 1e-9) | (Q > hi + 1e-9)).any(0))
    if out.size:
        warnings.warn("simulated motion leaves the position limits of joint(s) "
                      + ", ".join(robot.joint_names[i] for i in out), stacklevel=2)

    names = tuple(robot.joint_names)
    truth_log = Log(t=t, q=Q, v=V, tau=TAU, joint_names=names, source=f"simulated:{robot.name} (noise-free)")
    if noise > 0:
        nq_, nv_, nt_ = (rng_noise.normal(0.0, noise, (N, n)) for _ in range(3))
        log = Log(t=t.copy(), q=Q + nq_, v=V + nv_, tau=TAU + nt_, joint_names=names,
                  source=f"simulated:{robot.name}")
    else:
        log = Log(t=t.copy(), q=Q.copy(), v=V.copy(), tau=TAU.copy(), joint_names=names,
                  source=f"simulated:{robot.name}")

    params = {}
    for b, row in zip(robot.body_names, P_true, strict=True):
        for s, x in zip(INERTIAL_SUFFIXES, row, strict=True):
            params[f"{b}.{s}"] = float(x)
    for i, j in enumerate(names):
        params[f"{j}.fc"] = float(fc[i])
        params[f"{j}.fv"] = float(fv[i])
    for i, j in enumerate(names):
        params[f"{j}.armature"] = float(arm[i])
    truth = {
        "robot": robot.name,
        "friction_model": FRICTION_MODEL,
        "friction_velocity_scale": vs,
        "noise": float(noise),
        "seed": int(seed),
        "rate": float(rate),
        "duration": float(duration),
        "joint_names": list(names),
        "locked_joints": {k: v for k, v in robot.locked_joints.items()},
        "time_convention": "zero-order hold: tau[k] applied over [t_k, t_k+1/rate); a[k] just after t_k",
        "controller": {"kind": "computed-torque (nominal model + nominal friction/armature guess) + PID",
                       "kp": kp, "kd": kd, "ki": ki, "rk4_substeps": n_sub},
        "parameters": params,
    }
    return SimResult(
        log=log, truth_log=truth_log, truth_acceleration=A, truth=truth, trajectory=trajectory,
        desired={"q": q_d, "v": v_d, "a": a_d},
    )


# ---------------------------------------------------------------------------------------------- output
def truth_trajectory_frame(result: SimResult) -> pd.DataFrame:
    """Noise-free ``t, q.*, v.*, a.*, tau.*`` table."""
    tl = result.truth_log
    cols = {"t": tl.t}
    for kind, arr in (("q", tl.q), ("v", tl.v), ("a", result.truth_acceleration), ("tau", tl.tau)):
        for i, j in enumerate(tl.joint_names):
            cols[f"{kind}.{j}"] = arr[:, i]
    return pd.DataFrame(cols)


def write_simulation(result: SimResult, out_dir: str | os.PathLike) -> None:
    """Write ``log.parquet``, ``truth.json`` and ``truth_trajectory.parquet`` into ``out_dir``
    (an existing directory; each file is written atomically)."""
    from .io import write_frame, write_log

    out_dir = Path(out_dir)
    write_log(result.log, out_dir / "log.parquet")
    write_frame(truth_trajectory_frame(result), out_dir / "truth_trajectory.parquet")
    tmp = out_dir / ".truth.json.tmp"
    tmp.write_text(json.dumps(result.truth, indent=1, allow_nan=False) + "\n")
    os.replace(tmp, out_dir / "truth.json")


__all__ = [
    "FRICTION_MODEL", "SimResult", "SimulationError", "TrajectoryError", "friction_torque",
    "is_physically_consistent", "parameter_names", "perturb_inertia", "simulate", "truth_arrays",
    "truth_model", "truth_trajectory_frame", "write_simulation",
]
