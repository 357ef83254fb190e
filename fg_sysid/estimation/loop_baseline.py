"""Baselines for robots with closed loops (issue 11): paper 000's constraint-elimination least squares,
the reduced serial-chain model, and held-out prediction of actuated efforts through the closures.

**Constraint elimination (paper 000, Zhang, Haugk & Vasudevan, Sec. III–IV).** With the constraint
Jacobian split by columns J = [J_a | J_u] (actuated / passive; n_u = n_c, Assumption 1),
G(q) = [I; −J_u⁻¹ J_a] spans null(J) (eq. 19) and premultiplying the equations of motion
W(q, v, a) p = B u + Jᵀλ by Gᵀ removes λ (Theorem 2, eq. 23)::

    u = Gᵀ(q) W(q, v, a) p          (n_a rows per sample, eqs. 27–29)

W = [Y_inertial | friction columns | armature columns] in fg-sysid's physical layout
p = (π per body (10), (fc, fv) per joint, armature per joint), friction ``fc·tanh(v/vs) + fv·v``
(vs = 0.05 rad/s; the paper uses sign(v)). Data pipeline as the paper's Sec. V-B: velocities as logged,
accelerations by a 4th-order central difference of the velocity, a zero-phase 4th-order Butterworth
(``cutoff_hz``) on q, v, a and the efforts, passive states from the closures (eqs. 18, 21, 22:
`ClosureKinematics`). The LS is Gautier's two-step row weighting (per actuated joint by its effort RMS,
then by its residual RMS), unit-norm columns and a tiny ridge to the URDF nominal for the directions the
data cannot see. Not reproduced: the paper's MultiStart/fmincon with LMI physical-consistency constraints
and its hard-redescender reweighting (consistency is reported, not enforced — the classical baseline of
`baseline.py` does the same). Friction and armature are fitted on actuated joints only (the motors);
passive pins keep their nominal (URDF) values.

**Reduced serial model.** `serial_log` turns a looped log into the log of the serial chain one would
identify without knowing the loop: the driven joint's encoder and the motor torque re-labelled
(knee torque = motor torque); any serial estimator (the JointSmoother) then fits the serial robot.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pinocchio as pin

from ..datasets.log import Log
from ..robots import RobotModel
from ..robots.loop_kinematics import POINT_TYPES, ClosureKinematics
from ..robots.loops import actuated_joints, actuation_of

VELOCITY_SCALE = 0.05  # rad/s
DEFAULT_CUTOFF_HZ = 10.0


class LoopBaselineError(ValueError):
    """Bad input for the loop baselines (the message names the culprit)."""


@dataclass(frozen=True, eq=False)
class LoopStates:
    """Full states (all joints of the tree) reconstructed from a looped log.

    ``q`` (N, nq), ``v``/``a`` (N, nv); ``tau`` (N, n_a) filtered efforts of the actuated joints,
    ``tau_raw`` the logged ones; ``keep`` the rows away from the filter edges.
    """

    t: np.ndarray
    q: np.ndarray
    v: np.ndarray
    a: np.ndarray
    tau: np.ndarray
    tau_raw: np.ndarray
    keep: np.ndarray
    actuated: tuple[str, ...]
    info: dict = field(default_factory=dict)


def _butter(x: np.ndarray, cutoff_hz: float, rate: float, order: int = 4) -> np.ndarray:
    from scipy.signal import butter, filtfilt

    if cutoff_hz is None or cutoff_hz >= 0.5 * rate:
        return np.array(x, float)
    b, a = butter(order, cutoff_hz / (0.5 * rate))
    return filtfilt(b, a, x, axis=0)


def _central4(v: np.ndarray, dt: float) -> np.ndarray:
    """4th-order central difference d/dt (paper 000 Sec. V-B), 2nd order at the two edge samples."""
    a = np.gradient(v, dt, axis=0)
    a[2:-2] = (-v[4:] + 8 * v[3:-1] - 8 * v[1:-3] + v[:-4]) / (12 * dt)
    return a


def loop_states(robot: RobotModel, log: Log,
                cutoff_hz: float | None = DEFAULT_CUTOFF_HZ, exact: bool = False) -> LoopStates:
    """Full (q, v, a) of all joints and the actuated efforts of ``log`` (module docstring pipeline).

    ``exact``: use q and v as logged without filtering (noise-free logs, tests).
    The passive joints come from the closures; encoded passive joints only seed the IK.
    """
    names = list(robot.joint_names)
    act_names = actuated_joints(robot)
    col = {j: i for i, j in enumerate(log.joint_names)}
    missing = [j for j in act_names if j not in col]
    if missing:
        raise LoopBaselineError(f"log {log.source!r} has no encoder column for actuated joint(s) {missing}")
    tau_cols = [col[j] for j in act_names]
    tau_raw = np.asarray(log.tau, float)[:, tau_cols]
    if not np.all(np.isfinite(tau_raw)):
        bad = [j for j, c in zip(act_names, tau_raw.T, strict=True) if not np.all(np.isfinite(c))]
        raise LoopBaselineError(f"log {log.source!r}: effort of actuated joint(s) {bad} missing or not "
                                f"finite")
    t = np.asarray(log.t, float)
    dt = float(np.median(np.diff(t)))
    rate = 1.0 / dt
    q_a = np.asarray(log.q, float)[:, tau_cols]
    v_a = np.asarray(log.v, float)[:, tau_cols] if log.v is not None else np.gradient(q_a, dt, axis=0)
    if exact:
        a_a = _central4(v_a, dt)
        tau = tau_raw.copy()
    else:
        q_a = _butter(q_a, cutoff_hz, rate)
        v_a = _butter(v_a, cutoff_hz, rate)
        a_a = _butter(_central4(v_a, dt), cutoff_hz, rate)
        tau = _butter(tau_raw, cutoff_hz, rate)

    ck = ClosureKinematics(robot.model, robot.loops, types=POINT_TYPES)
    iv = np.asarray(robot.joint_index_v(), int)
    iq = np.asarray(robot.joint_index_q(), int)
    act = [names.index(j) for j in act_names]
    dep = [i for i in range(len(names)) if i not in act]
    q = pin.neutral(robot.model)
    for j, c in col.items():  # seed with every encoder (passive encoded joints included)
        if j in names:
            q[iq[names.index(j)]] = log.q[0, c]
    unenc = [iv[names.index(j)] for j in actuation_of(robot).unencoded if names.index(j) in dep]
    q[iq[act]] = q_a[0]
    if unenc:  # first the unencoded joints with every encoder held, then all passive joints
        q = ck.solve_passive(q, unenc, max_iter=20, strict=False)
    N = len(t)
    Q, V, A = ck.closed_trajectory(q, q_a, v_a, a_a, iq[act], iv[act], iv[dep])
    edge = 0 if exact else min(N // 10, int(round(2.0 * rate / max(cutoff_hz or rate, 1e-9))) + 2)
    keep = np.zeros(N, bool)
    keep[edge:N - edge] = True
    return LoopStates(t=t, q=Q, v=V, a=A, tau=tau, tau_raw=tau_raw, keep=keep, actuated=tuple(act_names),
                      info={"cutoff_hz": cutoff_hz, "exact": exact, "edge_samples": edge})


def parameter_names(robot: RobotModel) -> list[str]:
    """fg-sysid's physical layout: π per body, (fc, fv) per joint, armature per joint."""
    return robot.parameter_names(("fc", "fv"))


def nominal_parameters(robot: RobotModel) -> np.ndarray:
    from .baseline import nominal_parameters as nom

    return nom(robot)


def full_regressor(robot: RobotModel, q, v, a, velocity_scale: float = VELOCITY_SCALE) -> np.ndarray:
    """W(q, v, a) (nv, 10·n_bodies + 3·n): generalized forces = W p in the physical layout."""
    model = robot.model
    data = model.createData()
    n = robot.n_joints
    iv = np.asarray(robot.joint_index_v(), int)
    Y = pin.computeJointTorqueRegressor(model, data, q, v, a)
    F = np.zeros((robot.nv, 3 * n))
    for i in range(n):
        F[iv[i], 2 * i] = np.tanh(v[iv[i]] / velocity_scale)
        F[iv[i], 2 * i + 1] = v[iv[i]]
        F[iv[i], 2 * n + i] = a[iv[i]]
    return np.hstack([Y, F])


def constrained_regressor(robot: RobotModel, states: LoopStates,
                          rows=None, velocity_scale: float = VELOCITY_SCALE) -> np.ndarray:
    """Stacked Gᵀ W (paper 000 eqs. 27–28): (len(rows), n_a, n_p)."""
    ck = ClosureKinematics(robot.model, robot.loops, types=POINT_TYPES)
    names = list(robot.joint_names)
    iv = np.asarray(robot.joint_index_v(), int)
    act = [names.index(j) for j in states.actuated]
    dep = [i for i in range(len(names)) if i not in act]
    rows = np.arange(len(states.t)) if rows is None else np.asarray(rows)
    out = []
    for k in rows:
        G, cols = ck.actuated_map(states.q[k], iv[dep], iv[act])
        W = full_regressor(robot, states.q[k], states.v[k], states.a[k], velocity_scale)
        out.append((G.T @ W)[cols])
    return np.array(out)


def predict_loop_efforts(robot: RobotModel, p, states: LoopStates,
                         velocity_scale: float = VELOCITY_SCALE) -> np.ndarray:
    """Actuated efforts (N, n_a) u = Gᵀ W p that parameters ``p`` (physical layout) predict."""
    W = constrained_regressor(robot, states, velocity_scale=velocity_scale)
    return W @ np.asarray(p, float)


@dataclass(frozen=True, eq=False)
class LoopLSResult:
    names: tuple
    estimate: np.ndarray
    free: np.ndarray
    rank: int
    seconds: float
    info: dict

    def table(self) -> pd.DataFrame:
        return pd.DataFrame({"name": self.names, "estimate": self.estimate, "free": self.free})


class ConstraintEliminationLS:
    """Paper 000's constraint-elimination least squares (module docstring).

    Args:
        identify: ``"all"`` (inertias + motor friction/armature; paper 000's arms) or ``"motor"``
            (motor friction and armature only, inertias at the URDF values; paper 000's legs).
        cutoff_hz: Butterworth cutoff [Hz] (None: no filtering).
        prior_weight: ridge to the nominal in column-scaled units.
        stride: use every ``stride``-th sample in the regression.
    """

    def __init__(self, robot: RobotModel, identify: str = "all",
                 cutoff_hz: float | None = DEFAULT_CUTOFF_HZ, prior_weight: float = 1e-6, stride: int = 1,
                 velocity_scale: float = VELOCITY_SCALE):
        if identify not in ("all", "motor"):
            raise LoopBaselineError(f"identify must be 'all' or 'motor', got {identify!r}")
        self.robot = robot
        self.identify, self.cutoff_hz, self.prior_weight = identify, cutoff_hz, prior_weight
        self.stride, self.velocity_scale = int(stride), float(velocity_scale)

    def free_mask(self) -> np.ndarray:
        r = self.robot
        n, nb10 = r.n_joints, 10 * r.n_bodies
        free = np.zeros(nb10 + 3 * n, bool)
        if self.identify == "all":
            free[:nb10] = True
        for i, j in enumerate(r.joint_names):
            if j not in actuation_of(r).passive:
                free[nb10 + 2 * i:nb10 + 2 * i + 2] = True
                free[nb10 + 2 * n + i] = True
        return free

    def fit(self, log: Log, states: LoopStates | None = None, exact: bool = False) -> ConstraintEliminationLS:
        t0 = time.perf_counter()
        st = states if states is not None else loop_states(self.robot, log, self.cutoff_hz, exact)
        rows = np.flatnonzero(st.keep)[:: max(1, self.stride)]
        W = constrained_regressor(self.robot, st, rows, self.velocity_scale)  # (K, n_a, n_p)
        U = st.tau[rows]
        p0 = nominal_parameters(self.robot)
        free = self.free_mask()
        # move the fixed parameters to the right-hand side
        rhs = U - W[:, :, ~free] @ p0[~free]
        Wf = W[:, :, free]
        w = 1.0 / np.maximum(np.sqrt(np.mean(U**2, axis=0)), 1e-9)  # step 1: per-joint effort RMS
        x = p0[free].copy()
        for _ in range(2):
            A = (Wf * w[None, :, None]).reshape(-1, free.sum())
            b = (rhs * w[None, :]).reshape(-1)
            scale = np.maximum(np.linalg.norm(A, axis=0), 1e-12)
            As = A / scale
            lam = self.prior_weight
            Aaug = np.vstack([As, np.sqrt(lam) * np.eye(As.shape[1])])
            baug = np.concatenate([b, np.sqrt(lam) * p0[free] * scale])
            xs, *_ = np.linalg.lstsq(Aaug, baug, rcond=None)
            x = xs / scale
            res = rhs - Wf @ x
            w = 1.0 / np.maximum(np.sqrt(np.mean(res**2, axis=0)), 1e-9)  # step 2: residual RMS
        sv = np.linalg.svd(As, compute_uv=False)
        rank = int(np.sum(sv > sv[0] * 1e-8))
        p = p0.copy()
        p[free] = x
        self.result_ = LoopLSResult(tuple(parameter_names(self.robot)), p, free, rank,
                                    time.perf_counter() - t0,
                                    {"rows": int(len(rows)), "states": st.info, "identify": self.identify,
                                     "residual_rms": np.sqrt(np.mean(res**2, axis=0)).tolist()})
        return self

    def predict(self, states: LoopStates) -> np.ndarray:
        return predict_loop_efforts(self.robot, self.result_.estimate, states, self.velocity_scale)


# ---------------------------------------------------------------------------------------------- reduced
def serial_log(log: Log, serial_robot: RobotModel, effort_map: dict) -> Log:
    """The log a serial-chain identification would use: encoders of ``serial_robot``'s joints, and
    each serial joint's effort taken from the motor named in ``effort_map`` (serial joint → motor;
    e.g. ``{"FL_calf_joint": "FL_knee_motor"}``: knee torque = motor torque); the floating-base fields
    (base pose, IMU, contacts, forces) are kept. Raises when a column is missing."""
    col = {j: i for i, j in enumerate(log.joint_names)}
    names = list(serial_robot.joint_names)
    missing = [j for j in names if j not in col]
    if missing:
        raise LoopBaselineError(f"log {log.source!r} has no encoder for serial joint(s) {missing}")
    idx = [col[j] for j in names]
    tau_idx = [col[effort_map.get(j, j)] for j in names]
    import dataclasses

    return dataclasses.replace(  # base pose, IMU, contacts and forces of a floating log are kept
        log, q=np.asarray(log.q)[:, idx].copy(),
        v=None if log.v is None else np.asarray(log.v)[:, idx].copy(),
        tau=np.asarray(log.tau)[:, tau_idx].copy(), joint_names=tuple(names),
        source=f"{log.source} (serial view: {effort_map})")


def serial_states(serial_robot: RobotModel, loop_robot: RobotModel, states: LoopStates):
    """(q, v, a) (N, n_serial) of the serial robot's joints taken from full loop states."""
    names = list(loop_robot.joint_names)
    iq, iv = loop_robot.joint_index_q(), loop_robot.joint_index_v()
    sel_q = [iq[names.index(j)] for j in serial_robot.joint_names]
    sel_v = [iv[names.index(j)] for j in serial_robot.joint_names]
    return states.q[:, sel_q], states.v[:, sel_v], states.a[:, sel_v]


__all__ = ["ConstraintEliminationLS", "LoopBaselineError", "LoopLSResult", "LoopStates",
           "constrained_regressor", "full_regressor", "loop_states", "nominal_parameters",
           "parameter_names", "predict_loop_efforts", "serial_log", "serial_states"]
