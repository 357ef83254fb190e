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

Out-of-class truth (`Effects`, issue 9; all off by default): friction sharper than the estimator's
smooth sign (``friction_velocity_scale`` < 0.05 rad/s), Stribeck friction
(`stribeck_friction_torque`), a controller faster than the log whose commands are held zero-order
between log samples, effort-sensor gain and offset errors (on the logged efforts only) and encoder
quantization. ``truth.json`` lists every effect used (``out_of_class``; empty = in-class). A fixed-base
arm simulated in MuJoCo (dry friction with stiction) is `mujoco_sim.simulate_arm`.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd
import pinocchio as pin

from ..robots import INERTIAL_SUFFIXES, RobotModel
from .excitation import FourierTrajectory, TrajectoryError
from .log import Log

FRICTION_MODEL = "coulomb-viscous"
#: Truth friction models of the RK4 simulator (`Effects.friction`).
SIM_FRICTION_MODELS = ("coulomb-viscous", "stribeck")
#: The estimator's default smooth-sign velocity scale [rad/s]: a truth with this scale and
#: Coulomb–viscous friction is in-class.
IN_CLASS_VELOCITY_SCALE = 0.05

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
#: Upper bound of RK4 substeps per controller step.
MAX_SUBSTEPS = 400


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


def stribeck_friction_torque(v, fc, fs, fv, velocity_scale: float, stribeck_velocity: float) -> np.ndarray:
    """Stribeck friction ``(fc + (fs − fc)·exp(−(v/v_st)²))·tanh(v/vs) + fv·v`` [N·m | N].

    ``fs`` ≥ ``fc`` is the breakaway (static) level reached at small |v| > vs, ``v_st`` [rad/s | m/s] the
    Stribeck velocity over which it decays to the Coulomb level ``fc``; ``vs`` smooths the sign. The
    Gaussian-decay form is the classical one (Armstrong-Hélouvry; it is the structure of the
    estimator's ``stribeck6`` layout, but the truth uses its own velocity constants).
    """
    v = np.asarray(v, float)
    level = fc + (fs - fc) * np.exp(-((v / stribeck_velocity) ** 2))
    return level * np.tanh(v / velocity_scale) + fv * v


@dataclass(frozen=True)
class Effects:
    """Out-of-class effects of a simulation (all off by default: the in-class simulator).

    Attributes:
        friction: ``"coulomb-viscous"`` (``fc·tanh(v/vs) + fv·v``, the estimator's model when vs is
            its 0.05 rad/s) or ``"stribeck"`` (`stribeck_friction_torque`, breakaway level
            ``fs = stribeck_ratio·fc``, Stribeck velocity ``stribeck_velocity`` [rad/s]).
        stribeck_ratio: fs / fc (> 1 for a breakaway peak).
        stribeck_velocity: v_st [rad/s].
        control_rate: controller rate [Hz], an integer multiple of the log rate; each command is held
            zero-order for 1/control_rate, so the effort changes between log samples (the logged value is
            the one applied at the sample instant). ``None``: the log rate (one command per sample).
        effort_gain_error: each joint's effort sensor reads ``g_i·τ`` with ``g_i ~ U(1 − e, 1 + e)``.
        effort_offset: ... plus ``o_i ~ U(−1, 1)·effort_offset·P_i`` (``P_i`` = the joint's peak rigid-body
            torque along the planned motion, see the module docstring).
        encoder_resolution: encoder step [rad | m]: logged q = step·round((q + noise)/step); 0 = none.

    Gains and offsets apply to the *logged* efforts only (the dynamics see the applied torque).
    """

    friction: str = "coulomb-viscous"
    stribeck_ratio: float = 1.5
    stribeck_velocity: float = 0.1
    control_rate: float | None = None
    effort_gain_error: float = 0.0
    effort_offset: float = 0.0
    encoder_resolution: float = 0.0

    def check(self, rate: float) -> int:
        """Validate against the log ``rate`` [Hz]; returns the controller steps per log sample."""
        if self.friction not in SIM_FRICTION_MODELS:
            raise SimulationError(f"friction model {self.friction!r} unknown; choices: "
                                  + ", ".join(SIM_FRICTION_MODELS))
        for name in ("stribeck_ratio", "stribeck_velocity"):
            val = getattr(self, name)
            if not (np.isfinite(val) and val > 0):
                raise SimulationError(f"{name} must be > 0, got {val}")
        for name in ("effort_gain_error", "effort_offset", "encoder_resolution"):
            val = getattr(self, name)
            if not (np.isfinite(val) and val >= 0):
                raise SimulationError(f"{name} must be >= 0, got {val}")
        if self.effort_gain_error >= 1:
            raise SimulationError(f"effort_gain_error must be < 1 (a gain in (0, 2)), "
                                  f"got {self.effort_gain_error}")
        if self.control_rate is None:
            return 1
        ratio = float(self.control_rate) / float(rate)
        m = int(round(ratio))
        if not (np.isfinite(ratio) and m >= 1 and abs(ratio - m) < 1e-9 * max(1.0, ratio)):
            raise SimulationError(f"control rate {self.control_rate} Hz must be an integer multiple of the "
                                  f"log rate {rate} Hz")
        return m

    def used(self, friction_velocity_scale: float) -> list[str]:
        """Names of the out-of-class effects switched on (empty: in-class truth)."""
        out = []
        if self.friction == "stribeck":
            out.append("stribeck-friction")
        if friction_velocity_scale != IN_CLASS_VELOCITY_SCALE:
            out.append(f"friction-velocity-scale {friction_velocity_scale:g} rad/s "
                       f"(estimator default {IN_CLASS_VELOCITY_SCALE:g})")
        if self.control_rate is not None:
            out.append(f"controller at {self.control_rate:g} Hz, zero-order hold between log samples")
        if self.effort_gain_error > 0:
            out.append(f"effort gain error up to {100 * self.effort_gain_error:g} %")
        if self.effort_offset > 0:
            out.append(f"effort offset up to {100 * self.effort_offset:g} % of the peak torque")
        if self.encoder_resolution > 0:
            out.append(f"encoder quantization {self.encoder_resolution:g} rad")
        return out


def draw_sensor_errors(effects: Effects, peak_tau: np.ndarray, rng: np.random.Generator) -> tuple:
    """Per-joint effort gains and offsets [N·m | N] of `Effects` (ones / zeros when switched off)."""
    n = len(peak_tau)
    gain = np.ones(n)
    offset = np.zeros(n)
    if effects.effort_gain_error > 0:
        gain = 1.0 + rng.uniform(-effects.effort_gain_error, effects.effort_gain_error, n)
    if effects.effort_offset > 0:
        offset = rng.uniform(-1.0, 1.0, n) * effects.effort_offset * np.asarray(peak_tau, float)
    return gain, offset


def measure(Q, V, TAU, noise: float, gain, offset, encoder_resolution: float,
            rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Logged (q, v, τ) from the true ones: τ_log = gain·τ + offset + n_τ, v_log = v + n_v,
    q_log = q + n_q, then rounded to the encoder step when ``encoder_resolution`` > 0 (n ~ N(0, noise²)).
    The noise draws are those of the in-class simulator (q, v, τ in that order)."""
    N, n = Q.shape
    if noise > 0:
        nq_, nv_, nt_ = (rng.normal(0.0, noise, (N, n)) for _ in range(3))
        q, v, tau = Q + nq_, V + nv_, TAU * gain + offset + nt_
    else:
        q, v, tau = Q.copy(), V.copy(), TAU * gain + offset
    if encoder_resolution > 0:
        q = encoder_resolution * np.round(q / encoder_resolution)
    return q, v, tau


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


def _stage(model, data, q, v, tau, fc, fv, vs, fric=None):
    if fric is None:
        return pin.aba(model, data, q, v, tau - fc * np.tanh(v / vs) - fv * v).copy()
    return pin.aba(model, data, q, v, tau - fric(v)).copy()


def check_inputs(robot: RobotModel, duration: float, rate: float, noise: float, seed: int) -> int:
    """Validate the common simulation inputs; returns the number of samples ``round(duration·rate) + 1``."""
    _check_robot(robot)
    for name, val in (("duration", duration), ("rate", rate)):
        if not (np.isfinite(val) and val > 0):
            raise SimulationError(f"{name} must be a positive number, got {val}")
    if not (np.isfinite(noise) and noise >= 0):
        raise SimulationError(f"noise must be >= 0, got {noise}")
    if isinstance(seed, bool) or int(seed) != seed or seed < 0:
        raise SimulationError(f"seed must be a non-negative integer, got {seed!r}")
    N = int(round(duration * rate)) + 1
    if N < 2:
        raise SimulationError(f"duration {duration} s at {rate} Hz gives fewer than 2 samples")
    if N > 50_000_000:
        raise SimulationError(f"duration {duration} s at {rate} Hz gives {N} samples (too many)")
    return N


def planned_motion(robot: RobotModel, trajectory: FourierTrajectory | None, duration: float,
                   rng: np.random.Generator) -> FourierTrajectory:
    """The desired trajectory: ``trajectory`` (checked against the robot) or a random one from ``rng``."""
    if trajectory is None:
        return FourierTrajectory.random(robot, duration, rng)
    trajectory._names(robot)  # raises TrajectoryError on mismatch
    problems = trajectory.check_limits(robot)
    if problems:
        warnings.warn("trajectory leaves the robot's limits: " + "; ".join(problems), stacklevel=3)
    return trajectory


def nominal_scales(robot: RobotModel, q_d, v_d, a_d) -> dict:
    """Torque/speed scales of the planned motion on the nominal model (module docstring):
    ``peak_tau`` P_i [N·m], ``peak_v`` V_i [rad/s], nominal guesses ``fc``, ``fv``, ``armature``, and the
    sample indices ``sub`` used."""
    N = len(q_d)
    nominal = robot.model.copy()
    nd = nominal.createData()
    sub = np.unique(np.linspace(0, N - 1, min(N, 400)).astype(int))
    tau_rigid = np.array([pin.rnea(nominal, nd, q_d[k], v_d[k], a_d[k]) for k in sub])
    m_diag = np.array([np.diag(pin.crba(nominal, nd, q_d[k])) for k in sub[:: max(1, len(sub) // 50)]])
    peak_tau = np.maximum(np.abs(tau_rigid).max(0), 1e-3)
    peak_v = np.maximum(np.abs(v_d).max(0), 0.1)
    return {"peak_tau": peak_tau, "peak_v": peak_v, "sub": sub,
            "fc": COULOMB_FRACTION * peak_tau, "fv": VISCOUS_FRACTION * peak_tau / peak_v,
            "armature": ARMATURE_FRACTION * np.maximum(m_diag.mean(0), 1e-6)}


def draw_truth(robot: RobotModel, scales: dict, rng: np.random.Generator) -> dict:
    """True inertias (n_bodies, 10) and per-joint ``fc``, ``fv``, ``armature`` (module docstring)."""
    n = robot.n_joints
    P0 = robot.nominal_inertial_parameters()
    P_true = np.array([perturb_inertia(p, rng) for p in P0])
    fc = scales["fc"] * rng.uniform(*FRICTION_RANGE, n)
    fv = scales["fv"] * rng.uniform(*FRICTION_RANGE, n)
    arm = scales["armature"] * rng.uniform(*FRICTION_RANGE, n)
    return {"inertial": P_true, "fc": fc, "fv": fv, "armature": arm}


def truth_document(robot: RobotModel, truth: dict, *, friction: dict, noise: float, seed: int, rate: float,
                   duration: float, controller: dict, sensors: dict, out_of_class: list[str],
                   time_convention: str) -> dict:
    """The JSON-ready truth record (``truth.json``) of a fixed-base simulation.

    ``parameters`` holds the inertial parameters, ``<j>.fc``, ``<j>.fv`` and ``<j>.armature`` (what the
    estimator's Coulomb–viscous layout names); ``friction`` the truth friction law and any extra
    constants (Stribeck breakaway levels, MuJoCo's dry friction); ``sensors`` the effort gains/offsets
    and the encoder step; ``out_of_class`` every effect outside the estimator's model class (empty:
    an in-class truth).
    """
    names = tuple(robot.joint_names)
    params = {}
    for b, row in zip(robot.body_names, truth["inertial"], strict=True):
        for s, x in zip(INERTIAL_SUFFIXES, row, strict=True):
            params[f"{b}.{s}"] = float(x)
    for i, j in enumerate(names):
        params[f"{j}.fc"] = float(truth["fc"][i])
        params[f"{j}.fv"] = float(truth["fv"][i])
    for i, j in enumerate(names):
        params[f"{j}.armature"] = float(truth["armature"][i])
    return {
        "robot": robot.name,
        "friction_model": friction["model"],
        "friction_velocity_scale": friction.get("velocity_scale"),
        "friction": friction,
        "noise": float(noise),
        "seed": int(seed),
        "rate": float(rate),
        "duration": float(duration),
        "joint_names": list(names),
        "locked_joints": {k: v for k, v in robot.locked_joints.items()},
        "time_convention": time_convention,
        "controller": controller,
        "sensors": sensors,
        "in_class": not out_of_class,
        "out_of_class": list(out_of_class),
        "parameters": params,
    }


def sensor_record(robot: RobotModel, gain, offset, effects: Effects) -> dict:
    """The ``sensors`` entry of ``truth.json``: effort gains/offsets per joint and the encoder step."""
    names = robot.joint_names
    return {
        "effort_gain": {j: float(g) for j, g in zip(names, gain, strict=True)},
        "effort_offset": {j: float(o) for j, o in zip(names, offset, strict=True)},
        "encoder_resolution": float(effects.encoder_resolution),
        "logged": "q = res·round((q_true + n)/res) (res = 0: no rounding); v = v_true + n; "
                  "tau = gain·tau_applied + offset + n; n ~ N(0, noise²) (noise: top level)",
    }


def _given_sensors(truth: dict | None, robot: RobotModel):
    """(gain, offset) stored in a previous truth record, or None."""
    sensors = (truth or {}).get("sensors") or {}
    if "effort_gain" not in sensors:
        return None
    try:
        gain = np.array([sensors["effort_gain"][j] for j in robot.joint_names], float)
        offset = np.array([sensors["effort_offset"][j] for j in robot.joint_names], float)
    except KeyError as e:
        raise SimulationError(f"truth sensors have no entry for joint {e.args[0]!r}") from None
    return gain, offset


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
    effects: Effects | None = None,
) -> SimResult:
    """Simulate ``duration`` seconds sampled at ``rate`` Hz (``round(duration·rate) + 1`` samples).

    See the module docstring for the truth draws, the controller, the zero-order-hold convention and
    the noise model. ``trajectory`` (desired motion) defaults to ``FourierTrajectory.random`` drawn
    from ``seed``; the truth draws do not depend on whether a trajectory is given except through the
    friction/armature scales (which depend on the planned motion).

    ``truth`` (a previous run's ``SimResult.truth``) reuses that robot — same inertias, friction,
    armature, friction law and effort-sensor errors — for held-out logs of the same system with another
    seed's motion.

    ``effects`` (`Effects`) switches on out-of-class truth: Stribeck friction, a controller faster than
    the log (its commands held zero-order between samples), effort gain/offset errors and encoder
    quantization. With the default ``Effects()`` and ``friction_velocity_scale = 0.05`` the result is
    the in-class simulator's, bit for bit. With a faster controller the inverse-dynamics identity still
    holds at sample instants (``tau[k]`` is the torque applied just after ``t_k``) but not between them.
    """
    N = check_inputs(robot, duration, rate, noise, seed)
    if not (np.isfinite(friction_velocity_scale) and friction_velocity_scale > 0):
        raise SimulationError(f"friction_velocity_scale must be > 0, got {friction_velocity_scale}")
    given_fx = (truth or {}).get("friction") or {}
    if effects is None:
        effects = Effects()
    if truth is not None and given_fx.get("model") == "stribeck":  # the same robot: the same friction law
        effects = replace(effects, friction="stribeck", stribeck_ratio=float(given_fx["stribeck_ratio"]),
                          stribeck_velocity=float(given_fx["stribeck_velocity"]))
    m_ctrl = effects.check(rate)

    ss = np.random.SeedSequence(int(seed))
    rng_traj, rng_truth, rng_noise = (np.random.default_rng(s) for s in ss.spawn(3))
    rng_sensor = np.random.default_rng(ss.spawn(1)[0])
    trajectory = planned_motion(robot, trajectory, duration, rng_traj)

    n = robot.n_joints
    dt = 1.0 / rate
    t = np.arange(N) * dt
    q_d, v_d, a_d = trajectory.evaluate(t)

    # ---- scales from the nominal model along the planned motion, truth draws
    scales = nominal_scales(robot, q_d, v_d, a_d)
    sub = scales["sub"]
    fc_nom, fv_nom, arm_nom = scales["fc"], scales["fv"], scales["armature"]
    drawn = draw_truth(robot, scales, rng_truth)
    P_true, fc, fv, arm = drawn["inertial"], drawn["fc"], drawn["fv"], drawn["armature"]
    gain, offset = draw_sensor_errors(effects, scales["peak_tau"], rng_sensor)
    vs = float(friction_velocity_scale)
    if truth is not None:
        given = truth_arrays(truth, robot)
        P_true, fc, fv, arm = given["inertial"], given["fc"], given["fv"], given["armature"]
        vs = float(truth.get("friction_velocity_scale") or vs)
        sensors = _given_sensors(truth, robot)
        if sensors is not None:
            gain, offset = sensors
    fs = effects.stribeck_ratio * fc
    fric = None
    if effects.friction == "stribeck":
        vst = effects.stribeck_velocity

        def fric(v):
            return stribeck_friction_torque(v, fc, fs, fv, vs, vst)

    true_model = robot.pinocchio_model_with(P_true)
    true_model.armature = np.asarray(arm, float).copy()
    td = true_model.createData()
    ctrl_model = robot.model.copy()
    ctrl_model.armature = np.asarray(arm_nom, float).copy()
    cd = ctrl_model.createData()

    # ---- RK4 substeps: keep h·λ <= 1 for the stiffest friction mode (slope at v = 0: fmax/vs + fv)
    f_peak = np.maximum(fc, fs) if effects.friction == "stribeck" else fc
    D = np.diag(f_peak / vs + fv)
    lam = 0.0
    for k in sub[:: max(1, len(sub) // 20)]:
        M = pin.crba(true_model, td, q_d[k])
        M = np.triu(M) + np.triu(M, 1).T
        lam = max(lam, float(np.max(np.real(np.linalg.eigvals(np.linalg.solve(M, D))))))
    dt_c = dt / m_ctrl
    n_sub = int(min(MAX_SUBSTEPS, max(1, math.ceil(lam * dt_c / 1.0))))
    h = dt_c / n_sub

    omega = min(CONTROL_BANDWIDTH, 2 * math.pi * rate / 40.0)
    kp, kd, ki = 3.0 * omega**2, 3.0 * omega, omega**3
    if m_ctrl > 1:
        t_fine = (np.arange(N - 1)[:, None] * dt + np.arange(m_ctrl)[None, :] * dt_c).ravel()
        qf, vf, af = trajectory.evaluate(t_fine)

    def command(qd, vd, ad, q, v, e_int):
        a_cmd = ad + kp * (qd - q) + kd * (vd - v) + ki * e_int
        return pin.rnea(ctrl_model, cd, q, v, a_cmd) + fc_nom * np.tanh(vd / vs) + fv_nom * vd

    def rk4(q, v, tau, a0):
        for s in range(n_sub):
            k1v = a0 if s == 0 and a0 is not None else _stage(true_model, td, q, v, tau, fc, fv, vs, fric)
            k1q = v
            k2q = v + 0.5 * h * k1v
            k2v = _stage(true_model, td, q + 0.5 * h * k1q, k2q, tau, fc, fv, vs, fric)
            k3q = v + 0.5 * h * k2v
            k3v = _stage(true_model, td, q + 0.5 * h * k2q, k3q, tau, fc, fv, vs, fric)
            k4q = v + h * k3v
            k4v = _stage(true_model, td, q + h * k3q, k4q, tau, fc, fv, vs, fric)
            q = q + (h / 6.0) * (k1q + 2 * k2q + 2 * k3q + k4q)
            v = v + (h / 6.0) * (k1v + 2 * k2v + 2 * k3v + k4v)
        return q, v

    Q = np.empty((N, n))
    V = np.empty((N, n))
    A = np.empty((N, n))
    TAU = np.empty((N, n))
    q = q_d[0].copy()
    v = v_d[0].copy()
    e_int = np.zeros(n)
    for k in range(N):
        if m_ctrl == 1:
            e = q_d[k] - q
            a_cmd = a_d[k] + kp * e + kd * (v_d[k] - v) + ki * e_int
            e_int += e * dt
            tau = pin.rnea(ctrl_model, cd, q, v, a_cmd) + fc_nom * np.tanh(v_d[k] / vs) + fv_nom * v_d[k]
        else:
            j0 = k * m_ctrl
            if k < N - 1:
                tau = command(qf[j0], vf[j0], af[j0], q, v, e_int)
                e_int += (qf[j0] - q) * dt_c
            else:
                tau = command(q_d[k], v_d[k], a_d[k], q, v, e_int)
        a0 = _stage(true_model, td, q, v, tau, fc, fv, vs, fric)
        Q[k], V[k], A[k], TAU[k] = q, v, a0, tau
        if k == N - 1:
            break
        q, v = rk4(q, v, tau, a0)
        for c in range(1, m_ctrl):  # controller steps between log samples (not logged)
            j = k * m_ctrl + c
            tau_c = command(qf[j], vf[j], af[j], q, v, e_int)
            e_int += (qf[j] - q) * dt_c
            q, v = rk4(q, v, tau_c, None)
        if not (np.isfinite(q).all() and np.isfinite(v).all()):
            raise SimulationError(f"simulation diverged at t={t[k + 1]:.4g} s (robot {robot.name!r})")

    lo, hi = robot.position_limits()
    out = np.flatnonzero(((Q < lo - 1e-9) | (Q > hi + 1e-9)).any(0))
    if out.size:
        warnings.warn("simulated motion leaves the position limits of joint(s) "
                      + ", ".join(robot.joint_names[i] for i in out), stacklevel=2)

    names = tuple(robot.joint_names)
    truth_log = Log(t=t, q=Q, v=V, tau=TAU, joint_names=names, source=f"simulated:{robot.name} (noise-free)")
    q_m, v_m, tau_m = measure(Q, V, TAU, noise, gain, offset, effects.encoder_resolution, rng_noise)
    log = Log(t=t.copy(), q=q_m, v=v_m, tau=tau_m, joint_names=names, source=f"simulated:{robot.name}")

    friction = {"model": effects.friction, "velocity_scale": vs,
                "law": "fc·tanh(v/vs) + fv·v"}
    if effects.friction == "stribeck":
        friction.update(law="(fc + (fs − fc)·exp(−(v/v_st)²))·tanh(v/vs) + fv·v",
                        stribeck_ratio=float(effects.stribeck_ratio),
                        stribeck_velocity=float(effects.stribeck_velocity),
                        fs={j: float(x) for j, x in zip(names, fs, strict=True)})
    controller = {"kind": "computed-torque (nominal model + nominal friction/armature guess) + PID",
                  "kp": kp, "kd": kd, "ki": ki, "rk4_substeps": n_sub,
                  "control_rate": float(rate * m_ctrl), "hold": "zero-order"}
    if m_ctrl > 1:
        controller["rk4_substeps_per_control_step"] = n_sub
    doc = truth_document(
        robot, {"inertial": P_true, "fc": fc, "fv": fv, "armature": arm}, friction=friction, noise=noise,
        seed=seed, rate=rate, duration=duration, controller=controller,
        sensors=sensor_record(robot, gain, offset, effects),
        out_of_class=effects.used(vs) if truth is None or not truth.get("out_of_class")
        else _merge_used(effects.used(vs), truth["out_of_class"]),
        time_convention="zero-order hold: tau[k] applied over [t_k, t_k+1/control_rate); a[k] just after t_k",
    )
    return SimResult(
        log=log, truth_log=truth_log, truth_acceleration=A, truth=doc, trajectory=trajectory,
        desired={"q": q_d, "v": v_d, "a": a_d},
    )


def _merge_used(now: list[str], before: list[str]) -> list[str]:
    return list(dict.fromkeys([*before, *now]))


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
    write_outputs(out_dir, result.log, truth_trajectory_frame(result), result.truth)


def write_outputs(out_dir: str | os.PathLike, log, trajectory: pd.DataFrame, truth: dict,
                  log_writer=None) -> None:
    """The simulators' output files in the existing directory ``out_dir``, each written atomically:
    ``log.parquet`` (``log_writer(log, path)``, default `io.write_log`), ``truth_trajectory.parquet``
    (``trajectory``) and ``truth.json`` (``truth``; NaN refused)."""
    from .io import write_frame, write_log

    out_dir = Path(out_dir)
    (log_writer or write_log)(log, out_dir / "log.parquet")
    write_frame(trajectory, out_dir / "truth_trajectory.parquet")
    tmp = out_dir / ".truth.json.tmp"
    tmp.write_text(json.dumps(truth, indent=1, allow_nan=False) + "\n")
    os.replace(tmp, out_dir / "truth.json")


__all__ = [
    "FRICTION_MODEL", "SIM_FRICTION_MODELS", "Effects", "SimResult", "SimulationError", "TrajectoryError",
    "draw_sensor_errors", "friction_torque", "is_physically_consistent", "measure", "parameter_names",
    "perturb_inertia", "simulate", "stribeck_friction_torque", "truth_arrays", "truth_model",
    "truth_trajectory_frame", "write_simulation",
]
