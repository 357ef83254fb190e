"""Classical baseline: inverse-dynamics least squares on Savitzky–Golay filtered, differentiated signals.

This is the "ID (tuned SG)" baseline of the paper (Sec. IX-E), done the way a careful user would:

1. Positions are smoothed and differentiated with a Savitzky–Golay (SG) filter
   (``scipy.signal.savgol_filter`` with ``deriv=0, 1, 2`` and ``delta=dt``).  A log whose clock is not
   uniform (any step more than 1 % away from the median step) is first resampled onto a uniform grid by
   linear interpolation of ``q`` and ``tau``; ``Log.v`` is not used (velocities come from ``q``).
2. The measured efforts are filtered with the *same* SG smoother, so the left- and right-hand sides of
   the regression carry the same filter distortion (standard practice; for a linear-in-acceleration
   model, ``SG * tau`` is very nearly ``Y(SG q, SG' q, SG'' q) p`` at the frequencies the filter passes).
3. The model is linear in the physical parameter vector ``p``::

       tau = Y(q, v, a) pi + armature * a + fc * tanh(v / vs) + fv * v

   ``Y = pin.computeJointTorqueRegressor`` (one Pinocchio call per sample), ``p = [pi_1 (10), ...,
   pi_nb (10), (fc, fv) per joint, armature per joint]``.  Joints whose effort column is all NaN are
   dropped from the regression.
4. The SG window and polynomial order are chosen by *blocked* K-fold cross-validation on the training
   log over the grid (odd windows ~5 ms .. ~200 ms, log-spaced) x (polyorder 3, 4 by default).  The rows
   (after trimming half the largest grid window at both ends, the same rows for every candidate) are
   split into K contiguous blocks; the model is fitted on K-1 blocks, leaving out a guard gap of half a
   window on each side of the held-out block (the filtered effort at those rows already saw held-out
   samples), and scored on the held-out block.  When the best window of an order is the largest of the
   grid, the grid grows by factors of 1.4 while the score improves (up to ``max_window_s`` and a tenth
   of the log; these longer windows use SG's polynomial edge fit on the outermost rows).

   The score is the held-out RMSE against the **raw measured** effort, per joint normalised by the RMS
   of that joint's effort and combined as a root mean square over joints.  Raw, not filtered: the
   effort noise is independent of the prediction (which is computed from ``q`` only), so the raw score
   equals the error against the true effort plus a window-independent constant, whereas scoring against
   the filtered effort would reward ever larger windows (the heavier the smoothing of both sides, the
   smaller their disagreement, while the attenuation of the true signal goes unpunished).

   For speed the CV regressor is evaluated on every ``stride``-th row (``stride`` keeps at most
   ``max_cv_samples`` samples); the filtering itself is always done at the full rate.  The final fit uses
   every row.
5. Weighted least squares in two steps (Gautier's scheme): rows of joint j are first divided by the RMS
   of that joint's effort, then by the RMS of its first-step residual.  Columns are scaled to unit norm
   and a tiny ridge ``prior_weight * ||x - x_nominal||^2`` (in column-scaled units, so relative to the
   unit diagonal of the scaled normal matrix) keeps the directions the data cannot see at the URDF
   nominal: only base-parameter combinations are identifiable from torques.
6. The reported standard deviations come from the LS covariance ``tau_LR s^2 (A^T A)^+`` of the final
   weighted problem, where ``tau_LR`` (``filter["variance_inflation"]``) is the Bartlett long-run-variance
   factor of the residual series (lags up to the window): the filtered residuals are serially correlated,
   and without it the std would be ~sqrt(tau_LR) times too small.  ``inf`` marks a parameter that is not
   identifiable on its own (a component in the numerical null space of the regressor), ``NaN`` a
   parameter held fixed (``fit_friction``/``fit_armature`` off).  They describe noise only, not the
   bias of filtering noisy positions (errors in variables, SG attenuation), which dominates for strong
   position noise: treat them as a lower bound.
   Physical consistency is *not* enforced (classical baseline) but reported per body (pseudo-inertia
   matrix positive definite, Wensing et al. 2017).
"""

from __future__ import annotations

import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pinocchio as pin
from scipy.signal import oaconvolve, savgol_coeffs, savgol_filter
from threadpoolctl import threadpool_limits

from ..datasets.log import Log
from ..robots.model import RobotModel
from .linear_solver import resolve_threads

__all__ = [
    "BaselineResult",
    "LeastSquaresSG",
    "default_windows",
    "nominal_parameters",
    "parameter_groups",
    "parameter_names",
    "predict_torque",
    "pseudo_inertia_min_eigenvalues",
    "stacked_regressor",
]

#: relative singular-value threshold of the numerical rank of the column-scaled regressor
RANK_RTOL = 1e-8
#: columns with a norm below this fraction of the largest are zero up to round-off (never seen)
ZERO_COLUMN_RTOL = 1e-10
#: a parameter whose unit vector has more than this squared norm in the null space is unidentifiable
NULL_TOL = 1e-6


# ---------------------------------------------------------------------------------------------- layout
def free_parameter_mask(robot: RobotModel, fit_friction: bool, fit_armature: bool) -> np.ndarray:
    """Which entries of the physical vector (inertial, (fc, fv) per joint, armature) are estimated."""
    n, nb10 = robot.n_joints, 10 * robot.n_bodies
    free = np.ones(nb10 + 3 * n, bool)
    if not fit_friction:
        free[nb10:nb10 + 2 * n] = False
    if not fit_armature:
        free[nb10 + 2 * n:] = False
    return free


def parameter_names(robot: RobotModel) -> list[str]:
    """Physical vector names: inertial, ``<j>.fc``, ``<j>.fv`` per joint, then ``<j>.armature``."""
    return robot.parameter_names(("fc", "fv"))


def parameter_groups(robot: RobotModel) -> list[str]:
    """Group of each entry of ``p``: ``inertial``, ``friction`` or ``armature``."""
    n = robot.n_joints
    return ["inertial"] * (10 * robot.n_bodies) + ["friction"] * (2 * n) + ["armature"] * n


def nominal_parameters(robot: RobotModel) -> np.ndarray:
    """URDF nominal ``p``: inertias, (friction, damping) as (fc, fv), and the model's armature."""
    n = robot.n_joints
    fr = np.empty(2 * n)
    fr[0::2] = robot.urdf_friction
    fr[1::2] = robot.urdf_damping
    arm = np.array(robot.model.armature)[robot.joint_index_v()]
    return np.concatenate([robot.nominal_inertial_parameters().ravel(), fr, arm])


def _check_fixed_base(robot: RobotModel) -> None:
    if robot.floating_base or robot.nv != robot.n_joints:
        raise ValueError(f"robot {robot.name!r}: the least-squares baseline supports fixed-base robots only")


def _configurations(robot: RobotModel, q: np.ndarray) -> np.ndarray:
    """Joint angles (N, n_joints) -> Pinocchio configurations (N, nq) (continuous joints as cos/sin)."""
    q = np.atleast_2d(np.asarray(q, dtype=float))
    out = np.tile(pin.neutral(robot.model), (q.shape[0], 1))
    for k, name in enumerate(robot.joint_names):
        jm = robot.model.joints[robot.model.getJointId(name)]
        if jm.nq == 1:
            out[:, jm.idx_q] = q[:, k]
        elif jm.nq == 2:  # continuous (unbounded revolute): (cos, sin)
            out[:, jm.idx_q] = np.cos(q[:, k])
            out[:, jm.idx_q + 1] = np.sin(q[:, k])
        else:  # pragma: no cover - RobotModel only admits 1-DoF joints
            raise ValueError(f"joint {name!r} has nq={jm.nq}")
    return out


def _regressor_model(robot: RobotModel) -> pin.Model:
    m = robot.model.copy()
    m.armature[:] = 0.0  # the regressor never uses it, but keep the copy free of hidden terms
    return m


def stacked_regressor(
    robot: RobotModel, q: np.ndarray, v: np.ndarray, a: np.ndarray, velocity_scale: float = 0.05
) -> np.ndarray:
    """Regressor of the full physical vector ``p``, shape (N, n_joints, n_parameters).

    ``tau[k] = stacked_regressor(...)[k] @ p`` with the model of the module docstring.  One
    ``pin.computeJointTorqueRegressor`` call per sample; rows in joint order.
    """
    _check_fixed_base(robot)
    q = np.atleast_2d(np.asarray(q, dtype=float))
    v = np.atleast_2d(np.asarray(v, dtype=float))
    a = np.atleast_2d(np.asarray(a, dtype=float))
    n_s, n = q.shape[0], robot.n_joints
    nb10 = 10 * robot.n_bodies
    model = _regressor_model(robot)
    data = model.createData()
    Q = _configurations(robot, q)
    iv = robot.joint_index_v()
    V = np.zeros((n_s, robot.nv))
    A = np.zeros((n_s, robot.nv))
    V[:, iv] = v
    A[:, iv] = a
    out = np.zeros((n_s, n, nb10 + 3 * n))
    reg = out[:, :, :nb10]
    identity_rows = np.array_equal(iv, np.arange(n))
    for k in range(n_s):
        Y = pin.computeJointTorqueRegressor(model, data, Q[k], V[k], A[k])
        reg[k] = Y if identity_rows else Y[iv]
    j = np.arange(n)
    out[:, j, nb10 + 2 * j] = np.tanh(v / velocity_scale)
    out[:, j, nb10 + 2 * j + 1] = v
    out[:, j, nb10 + 2 * n + j] = a
    return out


def predict_torque(
    robot: RobotModel,
    p: np.ndarray,
    q: np.ndarray,
    v: np.ndarray,
    a: np.ndarray,
    velocity_scale: float = 0.05,
) -> np.ndarray:
    """Joint efforts (N, n_joints) of the physical parameter vector ``p`` at (q, v, a) (N, n_joints).

    RNEA on a copy of the model carrying ``p``'s inertias, plus ``armature * a`` and
    ``fc * tanh(v / velocity_scale) + fv * v``.  The parameters need not be physically consistent (RNEA is
    linear in the 10 dynamic parameters; Pinocchio's ``Inertia.FromDynamicParameters`` accepts any values).
    """
    _check_fixed_base(robot)
    p = np.asarray(p, dtype=float).ravel()
    n, nb10 = robot.n_joints, 10 * robot.n_bodies
    if p.size != nb10 + 3 * n:
        raise ValueError(f"parameter vector has {p.size} entries; robot {robot.name!r} needs {nb10 + 3 * n}")
    q = np.atleast_2d(np.asarray(q, dtype=float))
    v = np.atleast_2d(np.asarray(v, dtype=float))
    a = np.atleast_2d(np.asarray(a, dtype=float))
    model = robot.pinocchio_model_with(p[:nb10].reshape(robot.n_bodies, 10))
    model.armature[:] = 0.0  # Pinocchio >= 3 adds armature * a inside rnea; add it explicitly below
    data = model.createData()
    Q = _configurations(robot, q)
    iv = robot.joint_index_v()
    V = np.zeros((q.shape[0], robot.nv))
    A = np.zeros((q.shape[0], robot.nv))
    V[:, iv] = v
    A[:, iv] = a
    tau = np.empty((q.shape[0], n))
    for k in range(q.shape[0]):
        tau[k] = pin.rnea(model, data, Q[k], V[k], A[k])[iv]
    fc, fv = p[nb10:nb10 + 2 * n:2], p[nb10 + 1:nb10 + 2 * n:2]
    arm = p[nb10 + 2 * n:]
    return tau + arm * a + fc * np.tanh(v / velocity_scale) + fv * v


def pseudo_inertia_min_eigenvalues(inertial: np.ndarray) -> np.ndarray:
    """Smallest eigenvalue of each body's 4x4 pseudo-inertia matrix (> 0 iff physically consistent).

    ``inertial`` (n_bodies, 10) in Pinocchio order, rotational inertia about the body frame origin.
    """
    inertial = np.atleast_2d(np.asarray(inertial, dtype=float)).reshape(-1, 10)
    out = np.empty(inertial.shape[0])
    for b, (m, hx, hy, hz, ixx, ixy, iyy, ixz, iyz, izz) in enumerate(inertial):
        inertia = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
        sigma = 0.5 * np.trace(inertia) * np.eye(3) - inertia
        J = np.zeros((4, 4))
        J[:3, :3] = sigma
        J[:3, 3] = J[3, :3] = (hx, hy, hz)
        J[3, 3] = m
        out[b] = np.linalg.eigvalsh(J)[0]
    return out


def default_windows(rate: float, polyorder: int = 3, n_samples: int | None = None) -> list[int]:
    """Odd SG windows spanning ~5 ms .. ~200 ms at ``rate`` [Hz] (about 12, log-spaced).

    The smallest is at least ``polyorder + 2`` (odd); with ``n_samples`` given, windows longer than
    ``n_samples // 10`` are dropped so that every CV block is several windows long.
    """
    lo = max(polyorder + 2, int(round(0.005 * rate)))
    hi = max(lo, int(round(0.2 * rate)))
    cands = np.geomspace(lo, hi, 12)
    ws = sorted({int(c) // 2 * 2 + 1 for c in cands} | {lo // 2 * 2 + 1 if lo % 2 else lo + 1})
    ws = [w for w in ws if w > polyorder]
    if n_samples is not None:
        ws = [w for w in ws if w <= max(n_samples // 10, ws[0])]
    return ws


# ---------------------------------------------------------------------------------------------- result
@dataclass(frozen=True)
class BaselineResult:
    """Result of `LeastSquaresSG.fit`.

    Attributes:
        names: parameter names (`parameter_names`).
        estimate: physical parameter vector ``p`` (n_parameters,).
        std: standard deviations from the LS covariance; ``inf`` = not identifiable alone, ``NaN`` = held
            fixed (not estimated).
        filter: chosen ``window`` [samples], ``window_s`` [s], ``polyorder``, ``dt`` [s], ``resampled``,
            ``folds``, ``cv_stride``, ``scored_against`` and the CV table ``cv`` (one dict per candidate:
            window, window_s, polyorder, score (mean over folds of the held-out RMSE against the raw
            effort, per joint divided by the joint's effort RMS, RMS over joints), score_std,
            fold_scores, rmse_per_joint [N m], extended (added by the grid extension)).
        rank: numerical rank of the column-scaled (free-parameter) regressor.
        n_parameters: number of entries of ``p``.
        seconds: wall-clock time of the fit (CV sweep included).
        physical_consistency: ``consistent`` (all bodies), ``min_eigenvalue`` per body (pseudo-inertia),
            ``inconsistent_bodies``.  Not enforced; reported.
        measured_joints: joints whose efforts entered the regression.
        residual_rms: per measured joint, RMS of the final fit's residual against the filtered effort.
    """

    names: list[str]
    estimate: np.ndarray
    std: np.ndarray
    filter: dict
    rank: int
    n_parameters: int
    seconds: float
    physical_consistency: dict = field(default_factory=dict)
    measured_joints: tuple[str, ...] = ()
    residual_rms: np.ndarray = field(default_factory=lambda: np.zeros(0))
    groups: list[str] = field(default_factory=list)

    def parameters_table(self) -> pd.DataFrame:
        """One row per parameter: name, group (inertial|friction|armature), estimate, std."""
        groups = self.groups or [_group_of(n) for n in self.names]
        return pd.DataFrame(
            {"name": self.names, "group": groups, "estimate": self.estimate, "std": self.std}
        )

    def cv_table(self) -> pd.DataFrame:
        """The CV scores as a DataFrame (one row per candidate filter)."""
        return pd.DataFrame(self.filter.get("cv", []))


def _group_of(name: str) -> str:
    if name.endswith((".fc", ".fv")):
        return "friction"
    if name.endswith(".armature"):
        return "armature"
    return "inertial"


# ---------------------------------------------------------------------------------------------- data prep
@dataclass
class _Prepared:
    dt: float
    q: np.ndarray          # (N, n) uniform grid
    tau: np.ndarray        # (N, n_meas) measured columns, NaN gaps interpolated
    tau_valid: np.ndarray  # (N, n_meas) False where the raw effort was NaN
    meas: np.ndarray       # indices of measured joints
    resampled: bool


def _prepare(log: Log, robot: RobotModel) -> _Prepared:
    _check_fixed_base(robot)
    names = tuple(log.joint_names)
    if names != tuple(robot.joint_names):
        if sorted(names) != sorted(robot.joint_names):
            raise ValueError(
                f"log joints {list(names)} do not match robot {robot.name!r} joints {list(robot.joint_names)}"
            )
        order = [names.index(j) for j in robot.joint_names]
    else:
        order = list(range(len(names)))
    t = np.asarray(log.t, dtype=float)
    q = np.asarray(log.q, dtype=float)[:, order]
    tau = np.asarray(log.tau, dtype=float)[:, order]
    if t.ndim != 1 or q.shape[0] != t.size or tau.shape[0] != t.size:
        raise ValueError("log arrays t, q, tau must have the same number of rows")
    if t.size < 2 or np.any(np.diff(t) <= 0):
        raise ValueError("log time stamps must be strictly increasing (at least 2 samples)")
    if not np.all(np.isfinite(q)):
        raise ValueError("log positions q contain NaN/inf; the SG baseline needs complete position data")
    meas = np.flatnonzero(~np.all(np.isnan(tau), axis=0))
    if meas.size == 0:
        raise ValueError("no effort column is measured (all tau columns are NaN)")
    tau = tau[:, meas]
    dts = np.diff(t)
    dt = float(np.median(dts))
    resampled = bool(np.max(np.abs(dts - dt)) > 0.01 * dt)
    if resampled:
        n_new = int(np.floor((t[-1] - t[0]) / dt + 1e-9)) + 1
        tu = t[0] + dt * np.arange(n_new)
        q = np.column_stack([np.interp(tu, t, q[:, j]) for j in range(q.shape[1])])
        tau_new = np.empty((n_new, tau.shape[1]))
        valid = np.empty((n_new, tau.shape[1]), bool)
        for j in range(tau.shape[1]):
            ok = np.isfinite(tau[:, j])
            tau_new[:, j] = np.interp(tu, t[ok], tau[ok, j])
            # a resampled value is valid when both neighbouring raw samples are
            idx = np.clip(np.searchsorted(t, tu), 1, t.size - 1)
            valid[:, j] = ok[idx] & ok[idx - 1]
        tau = tau_new
    else:
        valid = np.isfinite(tau)
        for j in range(tau.shape[1]):
            if not valid[:, j].all():
                x = np.arange(tau.shape[0])
                tau[:, j] = np.interp(x, x[valid[:, j]], tau[valid[:, j], j])
    return _Prepared(dt=dt, q=q, tau=tau, tau_valid=valid, meas=meas, resampled=resampled)


def _bartlett_factor(r: np.ndarray, lags: int) -> float:
    """Long-run variance over variance of a series: 1 + 2 sum_k (1 - k/(L+1)) rho_k, k = 1..L (Bartlett)."""
    r = np.asarray(r, dtype=float) - np.mean(r) if r.size else r
    n = r.size
    lags = int(min(lags, n - 1))
    if n < 3 or lags < 1 or not np.any(r):
        return 1.0
    nfft = 1 << int(np.ceil(np.log2(2 * n)))
    f = np.fft.rfft(r, nfft)
    acf = np.fft.irfft(f * np.conj(f), nfft)[: lags + 1]
    rho = acf[1:] / acf[0]
    k = np.arange(1, lags + 1)
    return float(1.0 + 2.0 * np.sum((1.0 - k / (lags + 1.0)) * rho))


#: SG windows [samples] from which `_sg` convolves by overlap-add FFT instead of directly (same result to
#: ~1e-10 relative; 4–6× faster at the 200–800-sample windows the CV tries on noisy 1 kHz logs)
FFT_WINDOW = 101


def _sg(x: np.ndarray, window: int, polyorder: int, deriv: int, dt: float) -> np.ndarray:
    """``savgol_filter(x, window, polyorder, deriv, delta=dt, axis=0, mode="interp")``; long windows by
    overlap-add FFT convolution of the mean-removed columns, the half-window ends by scipy's own
    polynomial fit (mode "interp" evaluates the fit of the first / last ``window`` samples there)."""
    if window < FFT_WINDOW or x.shape[0] < 2 * window:
        return savgol_filter(x, window, polyorder, deriv=deriv, delta=dt, axis=0, mode="interp")
    x = np.asarray(x, float)
    h = window // 2
    c = savgol_coeffs(window, polyorder, deriv=deriv, delta=dt, use="conv")
    mu = x.mean(axis=0)
    y = oaconvolve(x - mu, c.reshape((-1,) + (1,) * (x.ndim - 1)), mode="same", axes=0)
    if deriv == 0:
        y += mu
    ends = (savgol_filter(x[:window], window, polyorder, deriv=deriv, delta=dt, axis=0, mode="interp"),
            savgol_filter(x[-window:], window, polyorder, deriv=deriv, delta=dt, axis=0, mode="interp"))
    y[:h], y[-h:] = ends[0][:h], ends[1][-h:]
    return y


# ---------------------------------------------------------------------------------------------- estimator
class LeastSquaresSG:
    """Inverse-dynamics least squares on SG-filtered signals, window chosen by blocked CV.

    Parameters
    ----------
    windows : sequence of odd int, optional
        Candidate SG windows [samples]; default `default_windows` (~5 ms .. ~200 ms at the log's rate).
    polyorder : int or sequence of int
        SG polynomial order(s) (>= 2: the second derivative is used); several are cross-validated too.
        The default (3, 4) covers orders 2-5 for the smoothed position and the acceleration (a symmetric
        SG smoother or 2nd derivative of even order 2k equals the one of order 2k+1); on noisy z1 logs
        (12 s, 0.01 rad / 0.01 N m at 1 kHz) it halved the held-out error of polyorder 3 alone (1.2-2.3 % vs
        2.4-4.4 % over 5 seeds) for twice the CV time.
    folds : int
        Number of contiguous CV blocks (K).
    velocity_scale : float
        ``vs`` of the Coulomb term ``fc * tanh(v / vs)`` [rad/s].
    prior_weight : float
        Ridge toward the URDF nominal, relative to the column-scaled normal matrix (unit diagonal).
    fit_friction, fit_armature : bool
        Estimate (fc, fv) / armature; when False they are held at the nominal values (std NaN).
    min_speed : float
        Rows with ``|v_filtered| < min_speed`` are left out of the *fit* (Coulomb friction is
        ill-modelled near zero speed); held-out scoring uses every row.
    max_cv_samples : int
        The CV regressor uses every ``stride``-th row so that at most this many samples enter the sweep.
    max_window_s : float
        With the default grid, when the best window is the largest candidate the grid is extended by
        factors of 1.4 while the score improves, up to this length [s] (and a tenth of the log).
    blas_threads : int or None
        Threads of numpy's OpenBLAS during the fit (restored afterwards); None leaves it alone.
    n_jobs : int or None
        Threads scoring the CV candidates (the SG filters release the GIL): None = the cores this process
        may use, at most 2; 1 = one at a time.
    verbose : bool
        Print the CV table.
    """

    def __init__(
        self,
        windows=None,
        polyorder=(3, 4),
        folds=5,
        velocity_scale=0.05,
        prior_weight=1e-6,
        fit_friction=True,
        fit_armature=True,
        min_speed=0.0,
        verbose=False,
        max_cv_samples=10000,
        max_window_s=1.0,
        blas_threads=1,
        n_jobs=None,
    ):
        self.windows = windows
        self.polyorder = polyorder
        self.folds = folds
        self.velocity_scale = velocity_scale
        self.prior_weight = prior_weight
        self.fit_friction = fit_friction
        self.fit_armature = fit_armature
        self.min_speed = min_speed
        self.verbose = verbose
        self.max_cv_samples = max_cv_samples
        self.max_window_s = max_window_s
        self.n_jobs = n_jobs
        self.blas_threads = blas_threads

    # ------------------------------------------------------------------ helpers
    def _candidates(self, n_samples: int, rate: float) -> list[tuple[int, int]]:
        orders = [self.polyorder] if np.isscalar(self.polyorder) else list(self.polyorder)
        orders = [int(o) for o in orders]
        if any(o < 2 for o in orders):
            raise ValueError(f"polyorder must be >= 2 (the second derivative is used), got {orders}")
        if self.windows is None:
            cands = []
            for o in orders:
                cands += [(w, o) for w in default_windows(rate, o, n_samples)]
            too_long = [c for c in cands if c[0] > n_samples]
            if not cands or too_long:
                smallest = max(o + 2 for o in orders) // 2 * 2 + 1
                raise ValueError(
                    f"log has {n_samples} samples, fewer than the smallest SG window ({smallest} samples)"
                )
            return cands
        ws = [int(w) for w in np.atleast_1d(self.windows)]
        for w in ws:
            if w % 2 == 0 or w < 3:
                raise ValueError(f"SG windows must be odd and >= 3, got {w}")
            if w > n_samples:
                raise ValueError(
                    f"log has {n_samples} samples, fewer than the SG window of {w} samples; "
                    "use a longer log or smaller windows"
                )
        cands = [(w, o) for o in orders for w in ws if w > o]
        if not cands:
            raise ValueError(f"no SG window is longer than the polynomial order(s) {orders}")
        return cands

    def _free_mask(self, robot: RobotModel) -> np.ndarray:
        return free_parameter_mask(robot, self.fit_friction, self.fit_armature)

    def _signals(self, prep: _Prepared, robot: RobotModel, window: int, order: int, rows, p0, free):
        """Joint-major regressor of the free columns (nj, n_rows, nc), filtered and raw targets (nj, n_rows)
        with the fixed parameters' contribution removed, and the fit mask (nj, n_rows)."""
        qf = _sg(prep.q, window, order, 0, prep.dt)[rows]
        vf = _sg(prep.q, window, order, 1, prep.dt)[rows]
        af = _sg(prep.q, window, order, 2, prep.dt)[rows]
        tauf = _sg(prep.tau, window, order, 0, prep.dt)[rows]
        Rt = stacked_regressor(robot, qf, vf, af, self.velocity_scale).transpose(1, 0, 2)[prep.meas]
        fixed = (Rt[:, :, ~free] @ p0[~free]).T
        A = Rt[:, :, free]  # joint-major (nj, n_rows, nc): one copy
        b = np.ascontiguousarray((tauf - fixed).T)
        b_raw = np.ascontiguousarray((prep.tau[rows] - fixed).T)
        fit_ok = prep.tau_valid[rows].copy()
        if self.min_speed > 0:
            fit_ok &= np.abs(vf[:, prep.meas]) >= self.min_speed
        return A, b, b_raw, np.ascontiguousarray(fit_ok.T)

    def _cv_entry(self, prep, robot, w, o, rows, bounds, scale, p0, free) -> dict:
        """Blocked K-fold CV score of one SG filter (see the module docstring)."""
        lo, hi = int(bounds[0]), int(bounds[-1])
        K = len(bounds) - 1
        A, b, b_raw, fit_ok = self._signals(prep, robot, w, o, rows, p0, free)
        nj, _, nc = A.shape
        # per-segment, per-joint Gram sums; segments split at the block bounds and +- the guard gap
        gap = w // 2
        inner = {int(np.clip(c + d, lo, hi)) for c in bounds[1:-1] for d in (-gap, 0, gap)}
        cuts = sorted({lo, hi} | inner)
        row_cuts = np.searchsorted(rows, cuts)
        n_seg = len(cuts) - 1
        G = np.zeros((n_seg, nj, nc, nc))
        g = np.zeros((n_seg, nj, nc))
        bb = np.zeros((n_seg, nj))
        cnt = np.zeros((n_seg, nj))
        for s in range(n_seg):
            r0, r1 = row_cuts[s], row_cuts[s + 1]
            for j in range(nj):
                Aj, bj, ok = A[j, r0:r1], b[j, r0:r1], fit_ok[j, r0:r1]
                if not ok.all():
                    Aj, bj = Aj * ok[:, None], bj * ok
                G[s, j], g[s, j], bb[s, j], cnt[s, j] = Aj.T @ Aj, Aj.T @ bj, bj @ bj, ok.sum()
        valid = prep.tau_valid[rows][:, :].T
        fold_scores, fold_rmse = [], []
        for k in range(K):
            excl_lo = bounds[k] - gap if k > 0 else lo
            excl_hi = bounds[k + 1] + gap if k < K - 1 else hi
            train = [s for s in range(n_seg) if cuts[s + 1] <= excl_lo or cuts[s] >= excl_hi]
            x = self._solve_gram(
                G[train].sum(0), g[train].sum(0), bb[train].sum(0), cnt[train].sum(0), scale, p0[free]
            )
            t0, t1 = np.searchsorted(rows, [bounds[k], bounds[k + 1]])
            err = np.einsum("jtc,c->jt", A[:, t0:t1], x) - b_raw[:, t0:t1]
            err = np.where(valid[:, t0:t1], err, np.nan)
            rmse = np.sqrt(np.nanmean(err ** 2, axis=1))
            fold_rmse.append(rmse)
            fold_scores.append(float(np.sqrt(np.mean((rmse / scale) ** 2))))
        entry = {
            "window": int(w), "window_s": float(w * prep.dt), "polyorder": int(o),
            "score": float(np.mean(fold_scores)), "score_std": float(np.std(fold_scores)),
            "fold_scores": fold_scores, "rmse_per_joint": np.mean(fold_rmse, axis=0).tolist(),
            "extended": False,
        }
        if self.verbose:
            print(f"[LeastSquaresSG] window {w:4d} ({w * prep.dt * 1e3:7.1f} ms) polyorder {o}: "
                  f"CV score {entry['score']:.5f} +- {entry['score_std']:.5f}")
        return entry

    # ------------------------------------------------------------------ fit
    def fit(self, log: Log, robot: RobotModel) -> LeastSquaresSG:
        """Choose the SG filter by blocked CV on ``log``, then refit on all of it; result in ``result_``.

        Parameters
        ----------
        log : Log
            Training log (joint order of ``robot`` or a permutation of it); ``tau`` columns of NaN are
            not measured and dropped.
        robot : RobotModel
            Fixed-base robot whose URDF gives the nominal parameters (the ridge target).
        """
        # tall, thin products: one BLAS thread is faster than several on shared cores (measured 80x)
        limits = nullcontext() if not self.blas_threads else threadpool_limits(self.blas_threads, "blas")
        with limits:
            return self._fit(log, robot)

    def _fit(self, log: Log, robot: RobotModel) -> LeastSquaresSG:
        t0 = time.perf_counter()
        prep = _prepare(log, robot)
        n_s = prep.q.shape[0]
        cands = self._candidates(n_s, 1.0 / prep.dt)
        K = int(self.folds)
        if K < 2:
            raise ValueError(f"folds must be >= 2, got {K}")
        h_max = max(w for w, _ in cands) // 2
        lo, hi = h_max, n_s - h_max
        if hi - lo < 10 * K:
            raise ValueError(
                f"log has {n_s} samples; after trimming {h_max} samples at each end (half the largest SG "
                f"window) fewer than {10 * K} remain for {K}-fold CV"
            )
        p0 = nominal_parameters(robot)
        free = self._free_mask(robot)
        stride = max(1, int(np.ceil((hi - lo) / self.max_cv_samples)))
        rows = np.arange(lo, hi, stride)
        bounds = np.linspace(lo, hi, K + 1).round().astype(int)
        # scale of each measured joint's effort (fixed normalisation of rows and scores)
        scale = np.sqrt(np.mean(prep.tau[lo:hi] ** 2, axis=0))
        scale = np.where(scale > 0, scale, 1.0)

        threads = resolve_threads(self.n_jobs)
        if threads > 1:  # candidates scored side by side (results in grid order)
            with ThreadPoolExecutor(threads) as ex:
                table = list(ex.map(lambda c: self._cv_entry(prep, robot, c[0], c[1], rows, bounds, scale, p0,
                                                             free), cands))
        else:
            table = [self._cv_entry(prep, robot, w, o, rows, bounds, scale, p0, free) for w, o in cands]
        # auto grid: when the best window is the largest candidate, keep growing it (x1.4) while it helps
        w_cap = min(int(self.max_window_s / prep.dt), n_s // 10)
        if self.windows is None:
            for o in sorted({o for _, o in cands}):
                mine = [e for e in table if e["polyorder"] == o]
                best_o = min(mine, key=lambda e: e["score"])
                w_top = max(e["window"] for e in mine)
                while best_o["window"] == w_top:
                    w_next = int(1.4 * w_top) // 2 * 2 + 1
                    if w_next > w_cap:
                        break
                    e = self._cv_entry(prep, robot, w_next, o, rows, bounds, scale, p0, free)
                    e["extended"] = True
                    table.append(e)
                    w_top = w_next
                    if e["score"] < best_o["score"]:
                        best_o = e
        best = min(table, key=lambda e: e["score"])
        w, o = best["window"], best["polyorder"]
        top = max(e["window"] for e in table if e["polyorder"] == o)
        if self.windows is None and w == top and int(1.4 * w) // 2 * 2 + 1 > w_cap:
            warnings.warn(
                f"LeastSquaresSG: the CV picked the largest admissible SG window ({w} samples); "
                "the optimum may be longer", stacklevel=2,
            )

        # ---- final fit on every row at least half the chosen window from the ends
        h = w // 2
        all_rows = np.arange(h, n_s - h)
        A, b, _, fit_ok = self._signals(prep, robot, w, o, all_rows, p0, free)
        x, std_free, rank, res_rms, inflation = self._solve_final(A, b, fit_ok, scale, p0[free], w)
        est = p0.copy()
        est[free] = x
        std = np.full(p0.size, np.nan)
        std[free] = std_free
        nb = robot.n_bodies
        eig = pseudo_inertia_min_eigenvalues(est[:10 * nb])
        consistency = {
            "consistent": bool(np.all(eig > 0)),
            "min_eigenvalue": eig.tolist(),
            "inconsistent_bodies": [robot.body_names[i] for i in np.flatnonzero(eig <= 0)],
        }
        filt = {
            "window": int(w), "window_s": float(w * prep.dt), "polyorder": int(o), "dt": prep.dt,
            "resampled": prep.resampled, "folds": K, "cv_stride": int(stride),
            "cv_trimmed_samples": int(h_max), "variance_inflation": inflation,
            "scored_against": "raw measured effort (held-out block), per-joint RMS-normalised",
            "cv": table,
        }
        self.result_ = BaselineResult(
            names=parameter_names(robot), estimate=est, std=std, filter=filt, rank=int(rank),
            n_parameters=int(p0.size), seconds=time.perf_counter() - t0, physical_consistency=consistency,
            measured_joints=tuple(robot.joint_names[i] for i in prep.meas), residual_rms=res_rms,
            groups=parameter_groups(robot),
        )
        if self.verbose:
            print(f"[LeastSquaresSG] chose window {w} ({w * prep.dt * 1e3:.1f} ms), polyorder {o}; "
                  f"rank {rank}/{int(free.sum())}; {self.result_.seconds:.2f} s")
        return self

    # ------------------------------------------------------------------ solvers
    def _ridge_solve(self, N: np.ndarray, rhs: np.ndarray, x0: np.ndarray) -> np.ndarray:
        """min ||W(Ax - b)||^2 + lam ||D(x - x0)||^2 from the normal matrix N = A^T W^2 A, rhs = A^T W^2 b.

        ``D`` = column norms (unit diagonal of the scaled normal matrix); zero columns stay at ``x0``.
        """
        d = np.sqrt(np.diag(N))
        act = d > ZERO_COLUMN_RTOL * max(d.max(), 1e-300)
        d = d[act]
        Ns = N[np.ix_(act, act)] / d[:, None] / d[None, :]
        lam = self.prior_weight
        xs0 = d * x0[act]
        xs = np.linalg.solve(Ns + lam * np.eye(len(d)), rhs[act] / d + lam * xs0)
        x = x0.copy()
        x[act] = xs / d
        return x

    def _solve_gram(self, G, g, bb, cnt, scale, x0):
        """Two-step weighted ridge LS from per-joint sums G (nj, nc, nc), g (nj, nc), bb, cnt (nj)."""
        w = 1.0 / scale ** 2
        x = self._ridge_solve(np.tensordot(w, G, 1), np.tensordot(w, g, 1), x0)
        rss = np.einsum("c,jcd,d->j", x, G, x) - 2 * g @ x + bb
        sigma2 = np.maximum(rss, 0) / np.maximum(cnt, 1)
        sigma2 = np.maximum(sigma2, (1e-6 * scale) ** 2)
        sigma2 = np.where(cnt > 0, sigma2, scale ** 2)
        w = 1.0 / sigma2
        return self._ridge_solve(np.tensordot(w, G, 1), np.tensordot(w, g, 1), x0)

    def _solve_final(self, A, b, fit_ok, scale, x0, window):
        """Two-step weighted ridge LS on all rows (QR, then SVD of R); returns x, std, rank, residual RMS.

        ``A`` (nj, n_rows, nc), ``b`` and ``fit_ok`` (nj, n_rows).
        """
        nj, _, nc = A.shape
        rows_of = [np.flatnonzero(fit_ok[j]) if not fit_ok[j].all() else slice(None) for j in range(nj)]
        # step 1: rows normalised by the effort scale (Gram route); step 2: by the step-1 residual RMS
        G = np.stack([A[j, rows_of[j]].T @ A[j, rows_of[j]] for j in range(nj)])
        g = np.stack([A[j, rows_of[j]].T @ b[j, rows_of[j]] for j in range(nj)])
        w1 = 1.0 / scale ** 2
        x1 = self._ridge_solve(np.tensordot(w1, G, 1), np.tensordot(w1, g, 1), x0)
        sig = np.empty(nj)
        for j in range(nj):
            r = A[j, rows_of[j]] @ x1 - b[j, rows_of[j]]
            sig[j] = max(np.sqrt(np.mean(r ** 2)) if r.size else scale[j], 1e-6 * scale[j])
        d = np.sqrt(np.einsum("j,jcc->c", 1.0 / sig ** 2, G))
        # columns that are zero up to round-off (parameters the measured efforts never see) are left out
        # of the solve: they stay exactly at the nominal, std inf
        act = d > ZERO_COLUMN_RTOL * max(d.max(), 1e-300)
        na = int(act.sum())
        d_a = d[act]
        As = np.concatenate([A[j, rows_of[j]][:, act] * (1.0 / sig[j]) for j in range(nj)]) / d_a
        bw = np.concatenate([b[j, rows_of[j]] / sig[j] for j in range(nj)])
        m = As.shape[0]
        Rf = np.linalg.qr(As, mode="r") if m > na else As
        _, S, Vt = np.linalg.svd(Rf, full_matrices=True)
        if S.size < na:  # fewer rows than columns
            S = np.concatenate([S, np.zeros(na - S.size)])
        xs0 = d_a * x0[act]
        lam = self.prior_weight
        # ridge toward xs0 in scaled units: xs = xs0 + V diag(S / (S^2 + lam)) U^T r0, and
        # V^T As^T r0 = S U^T r0, so the coefficients are (V^T As^T r0) / (S^2 + lam);
        # directions below the numerical rank are left exactly at the nominal (their "signal" is round-off)
        tol = RANK_RTOL * (S[0] if S.size else 0.0)
        rank = int(np.sum(S > tol))
        proj = Vt[:rank] @ (As.T @ (bw - As @ xs0))
        xs = xs0 + Vt[:rank].T @ (proj / (S[:rank] ** 2 + lam))
        x = x0.copy()
        x[act] = xs / d_a
        r = As @ xs - bw
        s2 = float(r @ r) / max(m - rank, 1)
        # the filtered residuals are serially correlated over ~ a window: inflate the variance by the
        # Bartlett long-run-variance factor of each joint's residual series (row-weighted mean over joints)
        lengths = [A[j, rows_of[j]].shape[0] for j in range(nj)]
        pieces = np.split(r, np.cumsum(lengths)[:-1])
        taus = [_bartlett_factor(piece, window) for piece in pieces]
        inflation = float(max(np.average(taus, weights=np.maximum(lengths, 1)), 1.0))
        s2 *= inflation
        V = Vt.T
        var_s = s2 * np.sum((V[:, :rank] / S[:rank]) ** 2, axis=1)
        null_part = np.sum(V[:, rank:] ** 2, axis=1)
        std_a = np.sqrt(var_s) / d_a
        std_a[null_part > NULL_TOL] = np.inf
        std = np.full(nc, np.inf)
        std[act] = std_a
        res_rms = np.array([
            np.sqrt(np.mean((A[j, rows_of[j]] @ x - b[j, rows_of[j]]) ** 2)) for j in range(nj)
        ])
        return x, std, rank, res_rms, inflation
