"""Truth harness for payload identification (issue 16 item 7; paper 002 digest §7).

A fixed-base arm (default: the 7-DoF Panda) picks up a rigid payload — dumbbell (cylinder bar + two
cylinder heads) or box, built with Pinocchio's shape inertias and composed onto the end-effector body by
the parallel-axis theorem (`compose_payload`). The true robot's other parameters θ_r are drawn uniformly
inside θ_r0 ± ρ_r|θ_r0| (redrawn until every body is physically consistent). A computed-torque controller
on the *nominal* model (θ_r0, end effector without payload) with PD feedback tracks a desired motion; the
command is held constant over each sample period (zero-order hold) and

* ``integrator="rk4"``: the true dynamics are integrated with RK4 on ``substeps`` sub-steps (realistic);
* ``integrator="euler"``: forward Euler at the sample rate (paper 002's data assumption).

True dynamics: (M(q) + diag(Ia)) a + C(q, v)v + g(q) + fc∘sign(v) + fv∘v = τ (Coulomb smoothed by
tanh(v/1e-3) for the integrator). Measured torque τ_meas = τ + u with |u| ≤ ρ|τ| (relative) or |u| ≤ ū
(absolute): drawn uniformly, or sign-aligned with a given sensitivity (worst case).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from ..datasets.excitation import FourierTrajectory
from ..datasets.simulate import is_physically_consistent
from ..robots import RobotModel
from .problem import RobotPrior, compose_payload

#: Paper 002 Table I: initial (conservative) end-effector + payload box, Pinocchio order
#: (m, mcx, mcy, mcz, ixx, ixy, iyy, ixz, iyz, izz). Used for the Kinova Gen3; see `payload_box`.
TABLE_I_LOWER = np.array([1.2, -0.4, -0.4, -1.0, -0.2, -0.2, -0.2, -0.2, -0.2, -0.2])
TABLE_I_UPPER = np.array([5.2, 0.4, 0.4, -0.1, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2])


@dataclass(frozen=True)
class Payload:
    """A rigid payload: name, spatial inertia (its own frame) and its placement in the end-effector frame."""

    name: str
    inertia: pin.Inertia
    placement: pin.SE3

    @property
    def mass(self) -> float:
        return float(self.inertia.mass)


def dumbbell(mass: float, length: float = 0.2, bar_radius: float = 0.015, head_radius: float = 0.045,
             head_length: float = 0.05, head_fraction: float = 0.8) -> pin.Inertia:
    """Dumbbell along its x axis, centred at its frame origin: a bar and two cylindrical heads [kg, m]."""
    bar = pin.Inertia.FromCylinder(mass * (1 - head_fraction), bar_radius, length)
    head = pin.Inertia.FromCylinder(mass * head_fraction / 2, head_radius, head_length)
    rot = pin.utils.rpyToMatrix(0.0, np.pi / 2, 0.0)  # cylinder axis z -> x
    out = pin.SE3(rot, np.zeros(3)).act(bar)
    for sgn in (-1.0, 1.0):
        out += pin.SE3(rot, np.array([sgn * (length / 2 - head_length / 2), 0.0, 0.0])).act(head)
    return out


def standard_payloads() -> list[Payload]:
    """Five payloads (paper 002's 4–8 lb dumbbells, one replaced by a box): grasped near the COM, hanging
    0.10–0.18 m below the Panda's last joint frame along its z axis, bars tilted differently."""
    specs = [("dumbbell-1.81kg", 1.81, 0.10, 0.00, (0.01, 0.00, 0.0)),
             ("dumbbell-2.27kg", 2.27, 0.12, np.pi / 4, (0.00, 0.01, 0.0)),
             ("box-2.72kg", 2.72, 0.14, np.pi / 6, (0.015, -0.01, 0.0)),
             ("dumbbell-3.18kg", 3.18, 0.16, np.pi / 2, (-0.01, 0.0, 0.0)),
             ("dumbbell-3.63kg", 3.63, 0.18, -np.pi / 3, (0.0, -0.015, 0.0))]
    out = []
    for name, m, z, yaw, off in specs:
        I = pin.Inertia.FromBox(m, 0.12, 0.08, 0.10) if name.startswith("box") else dumbbell(m)
        R = pin.utils.rpyToMatrix(0.1, 0.0, yaw)
        out.append(Payload(name, I, pin.SE3(R, np.array([off[0], off[1], z]))))
    return out


def payload_truth(prior: RobotPrior, payload: Payload | None) -> np.ndarray:
    """θ_e truth: the nominal end-effector body plus the payload (10 parameters, end-effector frame)."""
    ee = prior.pi[prior.ee_body]
    return ee.copy() if payload is None else compose_payload(ee, payload.inertia, payload.placement)


def draw_robot(prior: RobotPrior, rel: float, rng: np.random.Generator, max_tries: int = 1000):
    """True (π, armature, fc, fv) with every θ_r entry uniform in θ_r0 ± rel|θ_r0|, bodies consistent."""
    pi = prior.pi.copy()
    for k in range(pi.shape[0]):
        if k == prior.ee_body:
            continue
        for _ in range(max_tries):
            cand = prior.pi[k] * (1 + rng.uniform(-rel, rel, 10))
            if is_physically_consistent(cand):
                pi[k] = cand
                break
        else:
            raise RuntimeError(f"could not draw a consistent body {k} within ±{rel:.0%}")

    def jit(x):
        return x * (1 + rng.uniform(-rel, rel, x.shape))

    return pi, jit(prior.armature), jit(prior.fc), jit(prior.fv)


@dataclass
class PayloadRun:
    """One closed-loop run: t [s], q [rad], v [rad/s], τ applied [N·m] (N, nv), desired q_d, and the truth."""

    t: np.ndarray
    q: np.ndarray
    v: np.ndarray
    tau: np.ndarray
    q_des: np.ndarray
    theta_e: np.ndarray
    pi: np.ndarray
    armature: np.ndarray
    fc: np.ndarray
    fv: np.ndarray


def simulate_payload_run(robot: RobotModel, prior: RobotPrior, payload: Payload | None,
                         trajectory, duration: float = 7.5, rate: float = 1000.0, integrator: str = "rk4",
                         substeps: int = 4, robot_rel: float = 0.05, rng=None, kp: float = 400.0,
                         kd: float = 40.0, true_robot=None) -> PayloadRun:
    """Closed-loop tracking of ``trajectory`` (object with ``evaluate(t) -> (q, v, a)``), see module doc."""
    rng = np.random.default_rng(rng)
    pi, arm, fc, fv = true_robot if true_robot is not None else draw_robot(prior, robot_rel, rng)
    theta_e = payload_truth(prior, payload)
    pi = pi.copy()
    pi[prior.ee_body] = theta_e
    true = robot.pinocchio_model_with(pi)
    true.armature = arm.copy()
    nom = robot.pinocchio_model_with(prior.pi)
    nom.armature = prior.armature.copy()
    dt_, dn = true.createData(), nom.createData()
    n = int(round(duration * rate)) + 1
    t = np.arange(n) / rate
    qd, vd, ad = trajectory.evaluate(t)
    q = np.empty((n, robot.nv))
    v = np.empty((n, robot.nv))
    tau = np.empty((n, robot.nv))
    q[0], v[0] = qd[0], vd[0]

    def accel(qi, vi, ti):
        return pin.aba(true, dt_, qi, vi, ti - fc * np.tanh(vi / 1e-3) - fv * vi)

    h = 1.0 / rate
    for k in range(n):
        a_cmd = ad[k] + kp * (qd[k] - q[k]) + kd * (vd[k] - v[k])
        tau[k] = pin.rnea(nom, dn, q[k], v[k], a_cmd) + prior.fc * np.sign(v[k]) + prior.fv * v[k]
        if k == n - 1:
            break
        if integrator == "euler":
            a = accel(q[k], v[k], tau[k])
            q[k + 1] = q[k] + h * v[k]
            v[k + 1] = v[k] + h * a
            continue
        qi, vi, hs = q[k].copy(), v[k].copy(), h / substeps
        for _ in range(substeps):
            k1q, k1v = vi, accel(qi, vi, tau[k])
            k2q, k2v = vi + hs / 2 * k1v, accel(qi + hs / 2 * k1q, vi + hs / 2 * k1v, tau[k])
            k3q, k3v = vi + hs / 2 * k2v, accel(qi + hs / 2 * k2q, vi + hs / 2 * k2v, tau[k])
            k4q, k4v = vi + hs * k3v, accel(qi + hs * k3q, vi + hs * k3v, tau[k])
            qi = qi + hs / 6 * (k1q + 2 * k2q + 2 * k3q + k4q)
            vi = vi + hs / 6 * (k1v + 2 * k2v + 2 * k3v + k4v)
        q[k + 1], v[k + 1] = qi, vi
    return PayloadRun(t, q, v, tau, qd, theta_e, pi, arm, fc, fv)


def torque_noise(tau: np.ndarray, rel: float = 0.025, absolute: float = 0.0, rng=None,
                 sign: np.ndarray | None = None) -> np.ndarray:
    """Bounded noise u with |u| ≤ rel|τ| + absolute: uniform, or ``sign``·bound (worst case)."""
    bound = rel * np.abs(tau) + absolute
    if sign is not None:
        return np.sign(sign) * bound
    return np.random.default_rng(rng).uniform(-1, 1, tau.shape) * bound


def random_motion(robot: RobotModel, rng, duration: float = 7.5, velocity_fraction: float = 0.5,
                  harmonics: int = 5) -> FourierTrajectory:
    """A random Fourier motion inside position and (a fraction of) velocity limits."""
    return FourierTrajectory.random(robot, rng=rng, harmonics=harmonics, base_frequency=1.0 / duration,
                                    margin=0.15, velocity_fraction=velocity_fraction,
                                    acceleration_limit=4.0)
