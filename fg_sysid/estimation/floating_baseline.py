"""Decoupled floating-base baseline: manifold SG states, then LS on the contact-projected regressor.

The classical pipeline of paper 004 / issue 3 item 7: "states from filtered measurements and a kinematic
base estimate, then least squares on the floating-base regressor with contact forces removed by a
null-space projection of the contact Jacobian".

1. **States.**  The input is the full Pinocchio configuration trajectory ``q_pin`` (N, nq) (base pose from
   a kinematic estimate or the simulator, joint angles from the encoders).  The base orientation lives on
   SO(3), so the configuration is differentiated on the manifold by *local linearisation*: for every
   sample k the window neighbours are mapped to the tangent space at ``q_k``,
   ``d_j = pin.difference(model, q_k, q_{k+j})`` (j = -h..h), and the Savitzky–Golay (SG) dot-product
   coefficients (``scipy.signal.savgol_coeffs``) of derivative order 0, 1, 2 give the smoothed
   increment ``delta_k`` (the smoothed configuration is ``pin.integrate(q_k, delta_k)``), the velocity
   ``v_k`` and the acceleration ``a_k``.  For the free flyer, ``difference`` is the SE(3) log of
   ``M_k^{-1} M_{k+j}``; with ``xi(s) = log(M_k^{-1} M(t_k + s))`` the body twist is ``xi'(0)`` and its
   derivative ``xi''(0)`` (the ``-1/2 ad_{xi'} xi'`` term of the dexp series vanishes), which are exactly
   Pinocchio's free-flyer ``v`` and ``a``.  No global chart (Euler angles, cumulated increments) is needed.
   The joint efforts are filtered with the same SG smoother (order 0), as in `LeastSquaresSG`.  The first
   and last ``h`` samples are dropped.
2. **Projection.**  The floating-base dynamics ``Y(q, v, a) pi + S (armature a + fc tanh(v/vs) + fv v)
   = S tau + J_c^T f`` (``Y = pin.computeJointTorqueRegressor`` on the free-flyer model, nv rows;
   ``S`` (nv, n_joints) puts the joint efforts on the actuated rows, zeros on the 6 base rows; ``J_c``
   the stacked 3-row LOCAL_WORLD_ALIGNED linear Jacobians of the feet in contact) contain the unknown
   contact forces ``f``.  An orthonormal basis ``N`` (nv x (nv - rank J_c)) of the null space of ``J_c``
   (from its SVD) gives ``N^T J_c^T = 0``, hence ``N^T (Y pi + S(...)) = N^T S tau``: nv - rank(J_c)
   force-free equations per sample (6 with four feet on the ground for a quadruped).
3. **Solve.**  All projected rows are stacked (equal weights), columns scaled to unit norm, and a ridge
   ``prior_weight * ||x - x_nominal||^2`` in scaled units pulls the directions the data cannot see to the
   URDF nominal (same scheme as `LeastSquaresSG`).  The numerical rank (relative singular-value threshold
   `RANK_RTOL`) of the scaled regressor is reported.

Friction is the ``fc tanh(v / velocity_scale) + fv v`` model of `LeastSquaresSG`; the parameter layout is
`baseline.parameter_names` (inertial per body including the floating base, (fc, fv) per joint, armature
per joint).  Physical consistency is not enforced.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import pinocchio as pin
from scipy.signal import savgol_coeffs

from ..robots.model import RobotModel
from .baseline import (
    RANK_RTOL,
    ZERO_COLUMN_RTOL,
    free_parameter_mask,
    nominal_parameters,
    parameter_groups,
    parameter_names,
)

__all__ = [
    "DecoupledFloatingBaseLS",
    "FloatingBaselineResult",
    "contact_null_space",
    "manifold_sg_states",
    "projected_system",
]

#: relative singular-value threshold of the contact Jacobian's rank
JC_RANK_RTOL = 1e-9


def _check_floating(robot: RobotModel) -> None:
    if not robot.floating_base or robot.model.nq != robot.model.nv + 1:
        raise ValueError(f"robot {robot.name!r}: the decoupled floating-base baseline needs a free-flyer")


def _odd_window(window_s: float | None, dt: float, polyorder: int, n: int) -> int:
    if window_s is None:
        window_s = 0.05  # noise-free / lightly noisy default; pass window_s for noisy logs
    w = int(round(window_s / dt)) // 2 * 2 + 1
    w = max(w, polyorder + 2 if polyorder % 2 else polyorder + 1)
    w = max(w, 3)
    if w >= n:
        raise ValueError(f"log has {n} samples, not more than the SG window of {w} samples")
    return w


def manifold_sg_states(
    model: pin.Model, q: np.ndarray, dt: float, window: int, polyorder: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """SG smoothing and differentiation of a configuration trajectory on the manifold (module docstring).

    Returns ``rows`` (indices of the centre samples, h .. N-h-1), smoothed ``q`` (n_rows, nq), ``v`` and
    ``a`` (n_rows, nv).
    """
    q = np.asarray(q, dtype=float)
    n_s = q.shape[0]
    h = window // 2
    c0, c1, c2 = (savgol_coeffs(window, polyorder, deriv=d, delta=dt, use="dot") for d in (0, 1, 2))
    rows = np.arange(h, n_s - h)
    qs = np.empty((rows.size, model.nq))
    vs = np.empty((rows.size, model.nv))
    as_ = np.empty((rows.size, model.nv))
    D = np.empty((window, model.nv))
    for i, k in enumerate(rows):
        qk = q[k]
        for j in range(window):
            D[j] = pin.difference(model, qk, q[k - h + j])
        qs[i] = pin.integrate(model, qk, c0 @ D)
        vs[i] = c1 @ D
        as_[i] = c2 @ D
    return rows, qs, vs, as_


def contact_null_space(
    model: pin.Model, data: pin.Data, q: np.ndarray, frame_ids: list[int]
) -> tuple[np.ndarray, int]:
    """Orthonormal basis N (nv, nv - r) of the null space of the stacked contact Jacobian, and r.

    ``J_c`` stacks the 3 linear rows (LOCAL_WORLD_ALIGNED) of each frame; ``N^T J_c^T = 0``.  Kinematics
    (``pin.computeJointJacobians``) are computed here.
    """
    nv = model.nv
    if not frame_ids:
        return np.eye(nv), 0
    pin.computeJointJacobians(model, data, q)
    pin.updateFramePlacements(model, data)
    Jc = np.vstack([
        pin.getFrameJacobian(model, data, f, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)[:3] for f in frame_ids
    ])
    _, S, Vt = np.linalg.svd(Jc, full_matrices=True)
    r = int(np.sum(S > JC_RANK_RTOL * max(S[0], 1e-300)))
    return Vt[r:].T.copy(), r


def projected_system(
    robot: RobotModel,
    q: np.ndarray,
    v: np.ndarray,
    a: np.ndarray,
    tau: np.ndarray,
    contact: np.ndarray,
    foot_frames: list[str] | tuple[str, ...],
    velocity_scale: float = 0.05,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Stacked force-free equations ``A p = b`` of all samples.

    ``q`` (N, nq), ``v``/``a`` (N, nv) Pinocchio full state, ``tau`` (N, n_joints), ``contact`` (N, n_feet)
    bool in ``foot_frames`` order.  Returns ``A`` (n_rows, n_parameters) (= ``N^T [Y, S tanh, S v, S a]``,
    layout of `baseline.parameter_names`), ``b`` (n_rows,) (= ``N^T S tau``) and ``sample`` (n_rows,)
    (the sample index of each row).
    """
    _check_floating(robot)
    model = robot.model.copy()
    model.armature[:] = 0.0
    data = model.createData()
    iv = robot.joint_index_v()
    n, nb10 = robot.n_joints, 10 * robot.n_bodies
    fids = [model.getFrameId(f) for f in foot_frames]
    contact = np.asarray(contact, bool)
    A_rows, b_rows, s_rows = [], [], []
    Sfull = np.zeros((model.nv, n))
    Sfull[iv, np.arange(n)] = 1.0
    for k in range(q.shape[0]):
        Nk, _ = contact_null_space(model, data, q[k], [f for f, c in zip(fids, contact[k], strict=True) if c])
        if Nk.shape[1] == 0:
            continue
        Y = pin.computeJointTorqueRegressor(model, data, q[k], v[k], a[k])
        vj, aj = v[k, iv], a[k, iv]
        full = np.zeros((model.nv, nb10 + 3 * n))
        full[:, :nb10] = Y
        j = np.arange(n)
        full[iv, nb10 + 2 * j] = np.tanh(vj / velocity_scale)
        full[iv, nb10 + 2 * j + 1] = vj
        full[iv, nb10 + 2 * n + j] = aj
        A_rows.append(Nk.T @ full)
        b_rows.append(Nk.T @ (Sfull @ tau[k]))
        s_rows.append(np.full(Nk.shape[1], k))
    if not A_rows:
        raise ValueError("no sample has a non-trivial force-free projection")
    return np.vstack(A_rows), np.concatenate(b_rows), np.concatenate(s_rows)


def _flags_matrix(contact_flags, n_s: int) -> tuple[tuple[str, ...], np.ndarray]:
    if not isinstance(contact_flags, dict) or not contact_flags:
        raise ValueError("contact_flags must be a non-empty dict {frame name: (N,) bool}")
    frames = tuple(contact_flags)
    C = np.stack([np.asarray(contact_flags[f], bool).ravel() for f in frames], axis=1)
    if C.shape[0] != n_s:
        raise ValueError(f"contact flags have {C.shape[0]} samples, the log {n_s}")
    return frames, C


@dataclass(frozen=True)
class FloatingBaselineResult:
    """Result of `DecoupledFloatingBaseLS.fit`.

    Attributes:
        names, groups: parameter names / groups (`baseline.parameter_names`, `parameter_groups`).
        estimate: physical parameter vector (n_parameters,); held-fixed entries stay at the nominal.
        rank: numerical rank of the column-scaled free-parameter projected regressor.
        n_parameters, n_free: sizes.
        n_rows: stacked force-free equations; n_samples: samples that contributed.
        filter: ``window`` [samples], ``window_s``, ``polyorder``, ``dt``, ``differentiation``.
        residual_rms: RMS of the projected residual of the fit; relative_residual: its norm over ``||b||``.
        seconds: wall-clock time of the fit.
    """

    names: list[str]
    estimate: np.ndarray
    rank: int
    n_parameters: int
    n_free: int
    n_rows: int
    n_samples: int
    filter: dict
    residual_rms: float
    relative_residual: float
    seconds: float
    groups: list[str] = field(default_factory=list)


class DecoupledFloatingBaseLS:
    """Decoupled floating-base LS baseline (module docstring)."""

    def __init__(
        self,
        window_s: float | None = None,
        polyorder: int = 3,
        velocity_scale: float = 0.05,
        prior_weight: float = 1e-6,
        fit_friction: bool = True,
        fit_armature: bool = True,
    ):
        self.window_s = window_s
        self.polyorder = int(polyorder)
        self.velocity_scale = float(velocity_scale)
        self.prior_weight = float(prior_weight)
        self.fit_friction = fit_friction
        self.fit_armature = fit_armature

    # ------------------------------------------------------------------ helpers
    def _free_mask(self, robot: RobotModel) -> np.ndarray:
        return free_parameter_mask(robot, self.fit_friction, self.fit_armature)

    def system(self, q_pin, t, tau_joints, contact_flags, robot: RobotModel, window: int | None = None):
        """SG states of the log and its stacked projected system ``(A, b, sample, window, dt)``."""
        _check_floating(robot)
        q_pin = np.asarray(q_pin, float)
        t = np.asarray(t, float).ravel()
        tau = np.asarray(tau_joints, float)
        n_s = q_pin.shape[0]
        if q_pin.shape != (n_s, robot.nq) or tau.shape != (n_s, robot.n_joints) or t.size != n_s:
            raise ValueError("q_pin (N, nq), t (N,) and tau_joints (N, n_joints) must agree")
        dts = np.diff(t)
        dt = float(np.median(dts))
        if not (dt > 0 and np.all(np.abs(dts - dt) <= 0.01 * dt)):
            raise ValueError("the log's clock must be uniform (resample first)")
        frames, C = _flags_matrix(contact_flags, n_s)
        w = window if window is not None else _odd_window(self.window_s, dt, self.polyorder, n_s)
        rows, qs, vs, as_ = manifold_sg_states(robot.model, q_pin, dt, w, self.polyorder)
        c0 = savgol_coeffs(w, self.polyorder, deriv=0, use="dot")
        h = w // 2
        tau_f = np.stack([c0 @ tau[k - h:k + h + 1] for k in rows])
        A, b, s = projected_system(robot, qs, vs, as_, tau_f, C[rows], frames, self.velocity_scale)
        return A, b, rows[s], w, dt

    def projected_efforts(self, q_pin, t, tau_joints, contact_flags, robot: RobotModel, p=None):
        """``(N^T Y_full p, N^T S tau)`` on the SG states of a log (``p`` default: the fitted estimate)."""
        p = self.result_.estimate if p is None else np.asarray(p, float)
        w = self.result_.filter["window"] if hasattr(self, "result_") else None
        A, b, _, _, _ = self.system(q_pin, t, tau_joints, contact_flags, robot, window=w)
        return A @ p, b

    # ------------------------------------------------------------------ fit
    def fit(self, q_pin, t, tau_joints, contact_flags, robot: RobotModel) -> DecoupledFloatingBaseLS:
        """Fit on one log: ``q_pin`` (N, nq), ``t`` (N,), ``tau_joints`` (N, n_joints) in ``robot`` joint
        order, ``contact_flags`` {foot frame: (N,) bool}; result in ``result_``."""
        t0 = time.perf_counter()
        A, b, samples, w, dt = self.system(q_pin, t, tau_joints, contact_flags, robot)
        p0 = nominal_parameters(robot)
        free = self._free_mask(robot)
        bf = b - A[:, ~free] @ p0[~free]
        Af = A[:, free]
        x0 = p0[free]
        d = np.linalg.norm(Af, axis=0)
        act = d > ZERO_COLUMN_RTOL * max(d.max(), 1e-300)
        As = Af[:, act] / d[act]
        xs0 = d[act] * x0[act]
        _, S, Vt = np.linalg.svd(As, full_matrices=False)
        rank = int(np.sum(S > RANK_RTOL * (S[0] if S.size else 0.0)))
        # ridge toward the nominal in scaled units; directions below the numerical rank stay at the nominal
        proj = Vt[:rank] @ (As.T @ (bf - As @ xs0))
        xs = xs0 + Vt[:rank].T @ (proj / (S[:rank] ** 2 + self.prior_weight))
        x = x0.copy()
        x[act] = xs / d[act]
        est = p0.copy()
        est[free] = x
        r = A @ est - b
        self.result_ = FloatingBaselineResult(
            names=parameter_names(robot), estimate=est, rank=rank, n_parameters=int(p0.size),
            n_free=int(free.sum()), n_rows=int(A.shape[0]), n_samples=int(np.unique(samples).size),
            filter={"window": int(w), "window_s": float(w * dt), "polyorder": self.polyorder, "dt": dt,
                    "differentiation": "SG on pin.difference(q_k, q_k+j) (local tangent linearisation)"},
            residual_rms=float(np.sqrt(np.mean(r ** 2))),
            relative_residual=float(np.linalg.norm(r) / max(np.linalg.norm(b), 1e-300)),
            seconds=time.perf_counter() - t0, groups=parameter_groups(robot),
        )
        return self
