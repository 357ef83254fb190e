"""Legged-robot truth with rigid point contacts (issue 12: the quadruped row of paper 004's Table I).

Paper 004's work–energy observation (eq. 63) assumes that stance contacts do no work: the contact point
does not move while it carries load. MuJoCo's soft contacts violate that (penetration, compliance,
rolling; `mujoco_sim`), so this simulator gives the assumption's own truth: a free-flyer robot whose
stance feet are **rigid bilateral point contacts** at the foot frames (no slip, no penetration; the
contact point is the foot frame origin, ``foot_radius = 0``), integrated with Pinocchio quantities
(``crba``, ``nle``, frame Jacobians and drift accelerations) in a velocity-level time stepper:

    [M + h D   J_cᵀ] [v⁺]   [M v + h (S τ − b(q, v) − τ_f(v) + D v)]
    [J_c       0   ] [μ ] = [−β (p_c − p̄_c) / h                    ]          (one step of length h)

with τ_f(v) = fc tanh(v / vs) + fv v per joint and D = ∂τ_f/∂v its diagonal slope (friction implicit in
v⁺, so a sharp tanh stays stable), J_c the stacked world-aligned linear Jacobians of the stance feet, p̄_c
their anchors and β = 0.2 a position-drift correction. q⁺ = q ⊕ h v⁺ (semi-implicit Euler on the
manifold); then v⁺ is projected M-orthogonally onto J_c(q⁺) v = 0 (`_project`), so every logged state
has stance-foot velocities of zero to solver precision and the contact forces do no work. The world force
of the ground on a stance foot over the step is −μ_f / h.

Contacts: a foot leaves the ground at its scheduled lift-off; a swing foot lands when its height
reaches the ground (z ≤ 0) in the second half of its swing: perfectly inelastic impact = the same
M-orthogonal projection with the new stance set (an impulse; the energy it removes is an impact loss,
which the energy rows leave out with every interval containing a contact change). Contacts are
**bilateral** (paper 004 Sec. IX-F: "we enforced bilateral foot contacts"); the smallest stance normal
force is recorded in ``truth["min_normal_force"]`` (negative: the ground pulled).

Motions (joint PD, torques ``kp (q_d − q) − kd v`` computed at each log sample and **held** until the next
one: a digital controller): ``trot`` — diagonal pairs (FL+RR, FR+RL) alternately swing for
``swing_fraction`` of half a ``trot_period`` (lift profile sin², zero speed at both ends: thigh +a,
calf −2a) with all four feet down in between, plus a lateral hip sway of ``hip_amplitude`` rad at
``hip_frequency`` Hz (in-place trots barely move the hips: their friction is otherwise unobserved,
docs/benchmarks.md); ``sway`` — all feet down, `mujoco_sim._sway_offsets`; ``stand``.

Out of the estimators' class: a sharper friction law than theirs (truth ``vs`` = 0.01 rad/s by default,
estimators 0.05), efforts held between samples (estimators take τ̂ at the knot), the semi-implicit time
discretization and touchdown impacts. In class: rigid stance contacts doing no work (eq. 63's
assumption), point feet.

The result is a `mujoco_sim.StanceResult` (same fields and noise model: σ on joint q, v, τ and the gyro,
10 σ on the accelerometer; base pose, contact flags and forces noise-free), so `mujoco_sim.to_log` and
the study machinery apply unchanged; truth draws are `mujoco_sim.draw_truth` (same seeds, same robots).
"""

from __future__ import annotations

import math

import numpy as np
import pinocchio as pin

from ..robots import INERTIAL_SUFFIXES, RobotModel
from .mujoco_sim import (
    ACC_NOISE_FACTOR,
    DEFAULT_FOOT_FRAMES,
    StanceResult,
    _sway_offsets,
    draw_truth,
    standing_configuration,
    standing_posture,
)

RIGID_MOTIONS = ("trot", "sway", "stand")
FRICTION_MODEL = "tanh"
GRAVITY = 9.81


class RigidContactSimError(ValueError):
    """Bad input to `simulate_rigid_stance` or a diverged simulation (message names the culprit)."""


def friction_torque(v, fc, fv, vs):
    """τ_f = fc tanh(v/vs) + fv v [N·m] and its slope ∂τ_f/∂v [N·m·s/rad] (per joint)."""
    th = np.tanh(v / vs)
    return fc * th + fv * v, fc * (1.0 - th * th) / vs + fv


def trot_offsets(robot: RobotModel, t: float, amplitude: float, period: float, swing_fraction: float,
                 hip_amplitude: float, hip_frequency: float) -> tuple[np.ndarray, np.ndarray]:
    """(joint-target offsets (n_joints,) [rad], swing phase per diagonal pair in [0, 1] or −1 in stance).

    Pair 0 (FL, RR) swings over [0, swing_fraction·period/2) of each period, pair 1 (FR, RL) over
    [period/2, period/2 + swing_fraction·period/2); lift = sin²(π·phase) · amplitude (thigh +, calf −2×);
    hips sway by hip_amplitude·sin(2π hip_frequency t). Everything ramps in over the first 0.5 s."""
    ramp = min(1.0, t / 0.5)
    half = 0.5 * period
    phases = []
    for start in (0.0, half):
        s = ((t - start) % period) / (swing_fraction * half)
        phases.append(s if s < 1.0 else -1.0)
    off = np.zeros(robot.n_joints)
    hip = hip_amplitude * math.sin(2 * math.pi * hip_frequency * t)
    for i, j in enumerate(robot.joint_names):
        pair = 0 if j[:2] in ("FL", "RR") else 1
        lift = math.sin(math.pi * phases[pair]) ** 2 if phases[pair] >= 0 else 0.0
        if "hip" in j:
            off[i] = hip
        elif "thigh" in j:
            off[i] = amplitude * lift
        elif "calf" in j:
            off[i] = -2.0 * amplitude * lift
    return ramp * off, np.array(phases)


class _Stepper:
    """Dynamics quantities and the two KKT solves of one time step (module docstring)."""

    def __init__(self, model: pin.Model, fids, iv, armature, fc, fv, vs, dt, beta=0.2):
        self.model, self.data = model, model.createData()
        self.fids, self.iv, self.dt, self.beta = list(fids), np.asarray(iv), float(dt), float(beta)
        self.arm, self.fc, self.fv, self.vs = armature, fc, fv, float(vs)
        self.ref = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED

    def _mass(self, q):
        M = pin.crba(self.model, self.data, q)
        M = np.triu(M) + np.triu(M, 1).T
        M[self.iv, self.iv] += self.arm
        return M

    def _jacobians(self, q, stance):
        """(J_c (3·n_stance, nv), foot positions (n_stance, 3)) at q (kinematics updated by the caller)."""
        if not stance:
            return np.zeros((0, self.model.nv)), np.zeros((0, 3))
        J = np.vstack([pin.getFrameJacobian(self.model, self.data, self.fids[f], self.ref)[:3]
                       for f in stance])
        p = np.array([self.data.oMf[self.fids[f]].translation for f in stance])
        return J, p

    @staticmethod
    def _kkt(A, J, rhs, b):
        m = J.shape[0]
        if m == 0:
            return np.linalg.solve(A, rhs), np.zeros(0)
        K = np.block([[A, J.T], [J, np.zeros((m, m))]])
        sol = np.linalg.solve(K, np.concatenate([rhs, b]))
        return sol[:A.shape[0]], sol[A.shape[0]:]

    def step(self, q, v, tau_j, stance, anchors):
        """One step: (q⁺, v⁺ (projected), world contact forces (n_stance, 3) [N])."""
        model, data, dt = self.model, self.data, self.dt
        pin.computeJointJacobians(model, data, q)
        pin.updateFramePlacements(model, data)
        J, p = self._jacobians(q, stance)
        M = self._mass(q)
        h = pin.nle(model, data, q, v)
        tau = np.zeros(model.nv)
        vj = v[self.iv]
        f, d = friction_torque(vj, self.fc, self.fv, self.vs)
        tau[self.iv] = tau_j - f + d * vj
        A = M.copy()
        A[self.iv, self.iv] += dt * d
        rhs = M @ v + dt * (tau - h)
        b = -self.beta * (p - anchors).ravel() / dt if len(stance) else np.zeros(0)
        v_new, mu = self._kkt(A, J, rhs, b)
        q_new = pin.integrate(model, q, dt * v_new)
        v_new = self.project(q_new, v_new, stance)
        return q_new, v_new, -mu.reshape(-1, 3) / dt

    def project(self, q, v, stance):
        """v projected M-orthogonally onto J_c(q) v = 0 (a perfectly inelastic impulse when a foot lands)."""
        if not stance:
            return v
        pin.computeJointJacobians(self.model, self.data, q)
        pin.updateFramePlacements(self.model, self.data)
        J, _ = self._jacobians(q, stance)
        M = self._mass(q)
        return self._kkt(M, J, M @ v, np.zeros(J.shape[0]))[0]

    def foot_positions(self, q):
        pin.framesForwardKinematics(self.model, self.data, q)
        return np.array([self.data.oMf[f].translation.copy() for f in self.fids])

    def foot_velocities(self, q, v):
        """World velocities (n_feet, 3) [m/s] of the foot frame origins."""
        pin.forwardKinematics(self.model, self.data, q, v)
        pin.updateFramePlacements(self.model, self.data)
        return np.array([pin.getFrameVelocity(self.model, self.data, f, self.ref).linear for f in self.fids])

    def imu(self, q, v, a):
        """(gyro (3,) [rad/s], specific force (3,) [m/s²]) at the base origin, base axes."""
        pin.forwardKinematics(self.model, self.data, q, v, a)
        w, vl, al = v[3:6], v[:3], self.data.a[1].linear
        R = pin.Quaternion(q[6], q[3], q[4], q[5]).toRotationMatrix()
        return w.copy(), al + np.cross(w, vl) + R.T @ np.array([0.0, 0.0, GRAVITY])


def _check(robot, motion, duration, rate, timestep, noise, seed, vs):
    if not robot.floating_base or robot.nq != robot.nv + 1:
        raise RigidContactSimError(f"robot {robot.name!r} is not a free-flyer robot")
    if motion not in RIGID_MOTIONS:
        raise RigidContactSimError(f"motion must be one of {', '.join(RIGID_MOTIONS)}, got {motion!r}")
    for name, val in (("duration", duration), ("rate", rate), ("timestep", timestep),
                      ("friction_velocity_scale", vs)):
        if not (np.isfinite(val) and val > 0):
            raise RigidContactSimError(f"{name} must be a positive number, got {val}")
    if not (np.isfinite(noise) and noise >= 0):
        raise RigidContactSimError(f"noise must be >= 0, got {noise}")
    if isinstance(seed, bool) or int(seed) != seed or seed < 0:
        raise RigidContactSimError(f"seed must be a non-negative integer, got {seed!r}")
    substeps = int(round(1.0 / (rate * timestep)))
    if substeps < 1 or abs(substeps * rate * timestep - 1.0) > 1e-6:
        raise RigidContactSimError(f"1/rate ({1 / rate}) must be a multiple of timestep ({timestep})")
    return substeps


def simulate_rigid_stance(
    robot: RobotModel,
    duration: float = 2.0,
    rate: float = 250.0,
    seed: int = 0,
    noise: float = 0.0,
    motion: str = "trot",
    inertial: np.ndarray | None = None,
    friction=None,
    armature=None,
    friction_velocity_scale: float = 0.01,
    randomize: bool = False,
    kp: float = 1000.0,
    kd: float = 20.0,
    timestep: float = 0.0005,
    foot_frames: tuple[str, ...] = DEFAULT_FOOT_FRAMES,
    settle: float = 0.3,
    trot_amplitude: float = 0.25,
    trot_period: float = 0.6,
    swing_fraction: float = 0.8,
    hip_amplitude: float = 0.15,
    hip_frequency: float = 0.8,
    sway_amplitude: float = 0.1,
) -> StanceResult:
    """Simulate ``robot`` on rigid point feet and log at ``rate`` Hz (module docstring).

    ``friction`` = (fc, fv) per joint [N·m, N·m·s/rad] with tanh width ``friction_velocity_scale``
    [rad/s]; ``armature`` [kg·m²] per joint; ``inertial`` (n_bodies, 10). ``randomize=True`` draws the
    ones not given from ``seed`` (`mujoco_sim.draw_truth`), else the URDF values. ``noise`` = σ on the
    measured copies in ``result.meas`` only. The robot starts standing still on four feet and settles
    for ``settle`` s under the PD law before logging (logged ``t`` starts at 0)."""
    substeps = _check(robot, motion, duration, rate, timestep, noise, seed, friction_velocity_scale)
    n = robot.n_joints
    drawn = draw_truth(robot, seed, foot_frames, 0.0) if randomize else None
    P = np.asarray(inertial, float) if inertial is not None else (
        drawn["inertial"] if drawn else robot.nominal_inertial_parameters())
    if friction is not None:
        fc, fv = (friction["fc"], friction["fv"]) if isinstance(friction, dict) else friction
    elif drawn:
        fc, fv = drawn["fc"], drawn["fv"]
    else:
        fc, fv = robot.urdf_friction, robot.urdf_damping
    if armature is None:
        armature = drawn["armature"] if drawn else np.zeros(n)
    fc, fv, arm = (np.broadcast_to(np.asarray(x, float), (n,)).copy() for x in (fc, fv, armature))
    model = robot.model.copy()
    robot.write_inertias(model, P)
    model.armature = np.zeros(model.nv)
    fids = [model.getFrameId(f) for f in foot_frames]
    iv = robot.joint_index_v()
    sim = _Stepper(model, fids, iv, arm, fc, fv, friction_velocity_scale, timestep)

    q0j = standing_posture(robot)
    q = standing_configuration(robot, q0j, foot_frames, 0.0)
    v = np.zeros(model.nv)
    stance = list(range(len(fids)))
    anchors = sim.foot_positions(q)
    pairs = [0 if str(f)[:2] in ("FL", "RR") else 1 for f in foot_frames]
    kp_j, kd_j = np.full(n, float(kp)), np.full(n, float(kd))
    iq = robot.joint_index_q()

    def target(t_log):
        if t_log <= 0 or motion == "stand":
            return q0j, np.full(2, -1.0)
        if motion == "sway":
            return q0j + _sway_offsets(robot, t_log, sway_amplitude), np.full(2, -1.0)
        off, ph = trot_offsets(robot, t_log, trot_amplitude, trot_period, swing_fraction, hip_amplitude,
                               hip_frequency)
        return q0j + off, ph

    def advance(t0, q, v, stance, anchors, n_steps):
        """n_steps of the stepper from t0 with one held torque; contact events at every step."""
        qd, _ = target(t0)
        tau = kp_j * (qd - q[iq]) - kd_j * v[iv]
        forces, first_a = None, None
        for s in range(n_steps):
            q_new, v_new, f = sim.step(q, v, tau, stance, anchors[stance] if stance else anchors[:0])
            if s == 0:
                forces, first_a = (stance.copy(), f), (v_new - v) / timestep
            q, v = q_new, v_new
            if motion == "trot" and t0 >= 0:
                _, ph = target(t0 + (s + 1) * timestep)
                pos = sim.foot_positions(q)
                changed = False
                for i in range(len(fids)):
                    swinging = ph[pairs[i]] >= 0
                    if i in stance and swinging and ph[pairs[i]] < 0.5:  # scheduled lift-off
                        stance.remove(i)
                    elif i not in stance and (pos[i, 2] <= 0.0 and (not swinging or ph[pairs[i]] >= 0.5)):
                        stance.append(i)  # touchdown: anchor where the foot meets the ground
                        anchors[i] = pos[i]
                        changed = True
                stance.sort()
                if changed:
                    v = sim.project(q, v, stance)
            if not (np.all(np.isfinite(q)) and np.all(np.isfinite(v))) or abs(q[2]) > 10:
                raise RigidContactSimError(
                    f"rigid-contact simulation diverged at t = {t0 + s * timestep:.4g} s")
        return q, v, tau, forces, first_a

    n_settle = int(round(settle / (substeps * timestep)))
    for k in range(n_settle):
        q, v, *_ = advance(-settle + k * substeps * timestep, q, v, stance, anchors, substeps)

    N = int(round(duration * rate)) + 1
    t = np.arange(N) / rate
    out = {k: np.empty((N, n)) for k in ("q", "v", "tau", "q_des")}
    out.update({k: np.empty((N, 3)) for k in ("gyro", "acc", "base_pos", "base_lin_vel", "base_ang_vel")})
    base_quat = np.empty((N, 4))
    contact = np.zeros((N, len(fids)), bool)
    cforce = np.zeros((N, len(fids), 3))
    q_pin, v_pin = np.empty((N, model.nq)), np.empty((N, model.nv))
    foot_speed = np.zeros((N, len(fids)))
    min_fz = np.inf
    for k in range(N):
        qk, vk = q.copy(), v.copy()
        out["q_des"][k] = target(t[k])[0]
        out["q"][k], out["v"][k] = qk[iq], vk[iv]
        base_quat[k] = qk[[6, 3, 4, 5]]
        R = pin.Quaternion(qk[6], qk[3], qk[4], qk[5]).toRotationMatrix()
        out["base_pos"][k], out["base_lin_vel"][k], out["base_ang_vel"][k] = qk[:3], R @ vk[:3], vk[3:6]
        contact[k, stance] = True
        foot_speed[k] = np.linalg.norm(sim.foot_velocities(qk, vk), axis=1)
        q_pin[k], v_pin[k] = qk, vk
        q, v, tau, (st, f), a0 = advance(t[k], q, v, stance, anchors, substeps)
        out["tau"][k] = tau
        cforce[k, st] = f
        if len(st):
            min_fz = min(min_fz, float(f[:, 2].min()))
        out["gyro"][k], out["acc"][k] = sim.imu(qk, vk, a0)

    params = {}
    for b, row in zip(robot.body_names, P, strict=True):
        for s_, x in zip(INERTIAL_SUFFIXES, row, strict=True):
            params[f"{b}.{s_}"] = float(x)
    for i, j in enumerate(robot.joint_names):
        params[f"{j}.fc"], params[f"{j}.fv"] = float(fc[i]), float(fv[i])
    for i, j in enumerate(robot.joint_names):
        params[f"{j}.armature"] = float(arm[i])
    stance_speed = float(np.max(np.where(contact, foot_speed, 0.0)))
    truth = {
        "robot": robot.name, "simulator": f"rigid point contacts (pinocchio {pin.__version__})",
        "friction_model": FRICTION_MODEL, "friction_velocity_scale": float(friction_velocity_scale),
        "noise": float(noise), "seed": int(seed), "rate": float(rate), "duration": float(duration),
        "timestep": float(timestep), "integrator": "semi-implicit Euler, velocity-level contacts",
        "joint_names": list(robot.joint_names), "foot_frames": list(foot_frames), "foot_radius": 0.0,
        "controller": {"kind": "joint PD, held between samples", "kp": float(kp), "kd": float(kd),
                       "motion": motion, "trot_amplitude": float(trot_amplitude),
                       "trot_period": float(trot_period), "swing_fraction": float(swing_fraction),
                       "hip_amplitude": float(hip_amplitude), "hip_frequency": float(hip_frequency),
                       "sway_amplitude": float(sway_amplitude), "settle": float(settle)},
        "randomized": bool(randomize), "min_normal_force": float(min_fz),
        "max_stance_foot_speed": stance_speed,
        "noise_model": {"q": float(noise), "v": float(noise), "tau": float(noise), "imu_gyro": float(noise),
                        "imu_acc": ACC_NOISE_FACTOR * float(noise),
                        "noise_free": ["base_pos", "base_quat", "imu_quat", "contacts", "forces"]},
        "parameters": params,
    }
    rng_noise = np.random.default_rng(np.random.SeedSequence(int(seed)).spawn(3)[2])
    meas = {}
    for key, sigma in (("q", noise), ("v", noise), ("tau", noise), ("gyro", noise),
                       ("acc", ACC_NOISE_FACTOR * noise)):
        x = out[key]
        meas[key] = x + rng_noise.normal(0.0, sigma, x.shape) if sigma > 0 else x.copy()
    return StanceResult(t=t, base_quat=base_quat, contact=contact, contact_force=cforce, q_pin=q_pin,
                        v_pin=v_pin, joint_names=tuple(robot.joint_names), foot_frames=tuple(foot_frames),
                        truth=truth, meas=meas, **out)


def energy_balance(robot: RobotModel, result: StanceResult, window: int = 10):
    """Paper 004 eq. 63 at the truth of a `simulate_rigid_stance` result, over consecutive windows of
    ``window`` sample intervals: (residual r = ΔE + W_f − W_in [J], input work W_in [J], no contact change
    in the window (bool)), with E = T + U + ½ Σ armature v² (Pinocchio, true inertias), W_f the trapezoid
    of the true friction power τ_f(v)ᵀv and W_in = Σ τ_kᵀ ½Δt (v_k + v_k+1) (efforts held between samples).
    Windows with a contact change contain a touchdown impact (energy lost, r < 0)."""
    tr = result.truth
    model = robot.model.copy()
    robot.write_inertias(model, np.array([[tr["parameters"][f"{b}.{s}"] for s in INERTIAL_SUFFIXES]
                                          for b in robot.body_names]))
    data = model.createData()
    fc, fv, arm = (np.array([tr["parameters"][f"{j}.{k}"] for j in robot.joint_names])
                   for k in ("fc", "fv", "armature"))
    E = np.array([pin.computeKineticEnergy(model, data, q, v) + pin.computePotentialEnergy(model, data, q)
                  + 0.5 * arm @ vj ** 2
                  for q, v, vj in zip(result.q_pin, result.v_pin, result.v, strict=True)])
    dt = np.diff(result.t)
    pf = np.sum(friction_torque(result.v, fc, fv, tr["friction_velocity_scale"])[0] * result.v, axis=1)
    w_in = np.sum(result.tau[:-1] * 0.5 * (result.v[:-1] + result.v[1:]), axis=1) * dt
    r = np.diff(E) + 0.5 * (pf[:-1] + pf[1:]) * dt - w_in
    starts = np.arange(0, r.size - window + 1, window)
    same = np.array([not np.diff(result.contact[i:i + window + 1].astype(int), axis=0).any() for i in starts])
    return np.add.reduceat(r, starts)[: starts.size], np.add.reduceat(w_in, starts)[: starts.size], same


__all__ = ["RIGID_MOTIONS", "RigidContactSimError", "energy_balance", "friction_torque",
           "simulate_rigid_stance", "trot_offsets"]
