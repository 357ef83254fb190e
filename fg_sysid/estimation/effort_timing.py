"""Effort timing: which instant of the motion a logged effort describes (issues 11 and 9).

**Held efforts.** A digital controller computes a command at t_i and holds it (zero-order hold, ZOH) over
[t_i, t_i + T) (T: its hold period, the sample period when the controller runs at the log rate); the
project's simulators and MuJoCo truths log that command (`fg_sysid.factors.energy`'s log convention:
"each logged effort is the command held over the following sample interval"). The rigid-body dynamics
ID(x(t)) = M a + h + A a + τ_f then equal the held value on the hold interval, and the acceleration jumps
at every command instant. The smoothers' knot k compares ID(q_k, v_k, a_k) at t_k with the effort row
τ̂_k, and their a_k is a smooth trajectory's (the integration factor's trapezoid rule, `factors.kinematics`):
across a jump it takes the mean of the one-sided values, so — ID being linear in a —

    ID(q_k, v_k, a_k) ≈ ½ (u(t_k − T) + u(t_k))  ≈  u(t_k − T/2)                               [N·m]

with u the (smooth) command sequence. To first order the held sample τ̂_k = u(t_k) is the dynamics at the
middle of its hold interval, t_k + T/2 (their average over the interval): the logged effort *leads* the
motion by d = T/2. Comparing τ̂_k with the dynamics at t_k ignores it; the error −d·u̇ has a viscous-like
part (on the B1 knee, MuJoCo truth: fv −4.8 % at 1 kHz control, −9 % at 500 Hz,
docs/benchmarks.md "B1 knee: the viscous friction fv").

**The fix: efforts re-timed to the knots.** `retime_efforts` interpolates the logged sequence (t_i, τ̂_i)
linearly at t_k − d:

    τ̃_k = (1 − d/h) τ̂_k + (d/h) τ̂_{k−1}      (0 ≤ d ≤ h; h the sample period)

For a hold over the whole sample interval (T = h, d = h/2) this is τ̃_k = ½(τ̂_{k−1} + τ̂_k), which is
*exact* for the ZOH identity at the knot with a_k = ½(a(t_k⁻) + a(t_k⁺)): the simulator's identity
ID(q_k, v_k, a(t_k⁺)) = τ̂_k and ID(q_k, v_k, a(t_k⁻)) = τ̂_{k−1}. Re-timing is data preprocessing of the
inverse-dynamics rows only, so the fixed-base, closed-loop and floating smoothers share it (`apply`); the
effort noise level is still estimated from the raw efforts (the two-sample mean halves the per-row
variance but not the long-run variance Σ τ̃_k ≈ Σ τ̂_k that the rows' sum carries, so σ_τ of the raw
samples is the right weight), and the energy rows keep the raw efforts (their quadrature already holds
them, `factors.energy.input_work`).

**Unknown timing (real logs).** Real drives add their own lags (current filter, bus, encoder latency),
of either sign. ``"cv"`` chooses d among `CV_FRACTIONS` of the sample period by blocked cross-validation
on the training log (`choose_delay_cv`): the classical regression of `baseline.LeastSquaresSG` (its CV's
Savitzky–Golay window), with the *states* shifted to t_i + d (SG signals interpolated) and scored against
the raw held-out efforts, so that every candidate is scored against the same data (re-timing the targets
instead would favour the smoothing of the two-sample mean). Fixed-base open chains only (the regression's
model class).
"""

from __future__ import annotations

import numpy as np

from ..datasets.log import Log
from ..robots import RobotModel
from .baseline import LeastSquaresSG, _prepare, _sg, nominal_parameters, stacked_regressor

__all__ = ["CV_FRACTIONS", "CV_MARGIN", "EFFORT_TIMINGS", "apply", "choose_delay_cv", "effort_delay",
           "retime_efforts"]

#: what a logged effort means: "sample" = the effort at the sample instant (no re-timing), "hold" = the
#: command held zero-order over the following hold period (default: the sample period), "cv" = a delay
#: chosen by blocked cross-validation on the training log
EFFORT_TIMINGS = ("sample", "hold", "cv")
#: delays tried by "cv", in sample periods (positive: the logged effort leads the motion, as a held one)
CV_FRACTIONS = (-1.0, -0.5, -0.25, 0.0, 0.25, 0.5, 1.0)
#: a nonzero delay is chosen only when its CV score is lower than the zero delay's by this fraction
#: (the score includes the effort noise; real TIAGo: the best delay, −½ sample, scores 0.03 % lower: kept 0)
CV_MARGIN = 0.002


def _sample_period(t) -> float:
    return float(np.median(np.diff(np.asarray(t, float))))


def effort_delay(timing: str, t, hold_period: float | None = None) -> float:
    """The delay d [s] by which the logged efforts lead the motion for ``timing`` "sample" (0) or "hold"
    (half the hold period ``hold_period`` [s]; None = the log's median sample period of the times ``t``)."""
    if timing not in EFFORT_TIMINGS:
        raise ValueError(f"effort timing must be one of {', '.join(EFFORT_TIMINGS)}, not {timing!r}")
    if timing == "sample":
        return 0.0
    if timing == "cv":
        raise ValueError("effort timing 'cv' has no fixed delay: use choose_delay_cv")
    period = _sample_period(t) if hold_period is None else float(hold_period)
    if not np.isfinite(period) or period <= 0:
        raise ValueError(f"effort hold period must be a positive number of seconds, not {hold_period!r}")
    return 0.5 * period


def retime_efforts(t, tau, delay: float) -> np.ndarray:
    """Efforts ``tau`` (N, n) logged at times ``t`` (N,) [s] re-timed to the sample instants: the linear
    interpolation of the sequence (t_i, τ̂_i) at t_i − ``delay`` [s] (module docstring; delay > 0 = the
    logged effort leads the motion). Times outside the log take the end sample; an interpolation that
    touches a NaN sample is NaN (an unmeasured effort stays unmeasured). Units of ``tau`` (N·m | N)."""
    t = np.asarray(t, float)
    tau = np.asarray(tau, float)
    if delay == 0.0:
        return tau.copy()
    tq = np.clip(t - float(delay), t[0], t[-1])
    i1 = np.clip(np.searchsorted(t, tq, side="left"), 1, t.size - 1)
    i0 = i1 - 1
    w1 = (tq - t[i0]) / (t[i1] - t[i0])
    w1 = np.clip(w1, 0.0, 1.0)[:, None]
    # exact weights 0 or 1 must not let a NaN neighbour through
    lo = np.where(w1 < 1.0, tau[i0], 0.0)
    hi = np.where(w1 > 0.0, tau[i1], 0.0)
    with np.errstate(invalid="ignore"):
        return (1.0 - w1) * lo + w1 * hi


# ---------------------------------------------------------------------------------------------- CV
def choose_delay_cv(robot: RobotModel, log: Log, window_s: float, polyorder: int,
                    fractions=CV_FRACTIONS, folds: int = 5) -> tuple[float, list[dict]]:
    """The effort delay d [s] among ``fractions`` × the sample period with the lowest blocked-CV score of
    the classical regression (`baseline.LeastSquaresSG` with the SG window ``window_s`` [s] and
    ``polyorder``; module docstring) whose states are taken at t_i + d. Returns (d, table) with one record
    per candidate (delay_s, fraction, score = mean over folds of the RMS over joints of the held-out
    RMSE / effort RMS, score_std); ties go to the smaller |d|, and d = 0 is kept unless the best score
    is lower by `CV_MARGIN` (relative)."""
    prep = _prepare(log, robot)
    n_s = prep.q.shape[0]
    w = max(int(round(window_s / prep.dt)) // 2 * 2 + 1, int(polyorder) + 2 | 1)
    shift_max = int(np.ceil(max(abs(float(f)) for f in fractions))) + 1
    lo, hi = w // 2 + shift_max, n_s - w // 2 - shift_max
    K = int(folds)
    if hi - lo < 10 * K:
        raise ValueError(f"log has {n_s} samples: too few for the effort-delay cross-validation")
    rows = np.arange(lo, hi)
    bounds = np.linspace(lo, hi, K + 1).round().astype(int)
    scale = np.sqrt(np.mean(prep.tau[lo:hi] ** 2, axis=0))
    scale = np.where(scale > 0, scale, 1.0)
    table = []
    for f in fractions:
        ls = _ShiftedLS(float(f), folds=K)
        p0 = nominal_parameters(robot)
        e = ls._cv_entry(prep, robot, w, int(polyorder), rows, bounds, scale, p0, ls._free_mask(robot))
        table.append({"fraction": float(f), "delay_s": float(f) * prep.dt, "score": e["score"],
                      "score_std": e["score_std"]})
    best = min(table, key=lambda r: (round(r["score"], 12), abs(r["fraction"])))
    zero = [r for r in table if r["fraction"] == 0.0]
    if zero and best["score"] > (1.0 - CV_MARGIN) * zero[0]["score"]:
        best = zero[0]  # not clearly better than no delay: keep the log's time stamps
    return best["delay_s"], table


class _ShiftedLS(LeastSquaresSG):
    """`LeastSquaresSG` whose regressor rows take the SG states at t_i + shift·dt (targets unchanged)."""

    def __init__(self, shift: float, **kw):
        super().__init__(blas_threads=None, **kw)
        self.shift = float(shift)

    def _signals(self, prep, robot, window, order, rows, p0, free):
        x = np.arange(prep.q.shape[0], dtype=float)
        xq = rows + self.shift

        def at(sig):
            return np.column_stack([np.interp(xq, x, sig[:, j]) for j in range(sig.shape[1])])

        qf, vf, af = (at(_sg(prep.q, window, order, d, prep.dt)) for d in (0, 1, 2))
        R = stacked_regressor(robot, qf, vf, af, self.velocity_scale)[:, prep.meas, :]
        fixed = R[:, :, ~free] @ p0[~free]
        A = np.ascontiguousarray(R[:, :, free].transpose(1, 0, 2))
        tauf = _sg(prep.tau, window, order, 0, prep.dt)[rows]
        b = np.ascontiguousarray((tauf - fixed).T)
        b_raw = np.ascontiguousarray((prep.tau[rows] - fixed).T)
        return A, b, b_raw, np.ascontiguousarray(prep.tau_valid[rows].T)


# ---------------------------------------------------------------------------------------------- hook
def apply(smoother, log: Log, idx) -> dict | None:
    """The smoothers' hook (`JointSmoother`, `FloatingBaseSmoother`, closed loops through either): with
    ``smoother.effort_timing`` "hold" or "cv", replace the inverse-dynamics measurements
    ``smoother._taum[:, iv]`` at the knots ``idx`` (sample indices) by the re-timed efforts and drop rows
    the re-timing made NaN from ``smoother._tau_mask``. Records ``smoother.effort_timing_`` (mode,
    delay_s, the CV table) and a line in ``smoother.noise_.source["tau_timing"]``; returns the record
    (None for "sample": nothing changes)."""
    from .solver import EstimationError

    timing = getattr(smoother, "effort_timing", "sample") or "sample"
    if timing not in EFFORT_TIMINGS:
        raise ValueError(f"effort_timing must be one of {', '.join(EFFORT_TIMINGS)}, not {timing!r}")
    smoother.effort_timing_ = None
    if timing == "sample":
        return None
    robot = smoother.robot
    table = None
    if timing == "cv":
        if robot.floating_base or robot.loops or robot.nv != robot.n_joints:
            raise EstimationError("effort_timing 'cv' needs a fixed-base open chain (the classical "
                                  "regression it cross-validates); use 'hold' (with effort_hold_period) "
                                  "or 'sample'")
        filt = getattr(smoother, "init_filter_", None) or {"window_s": 0.05, "polyorder": 3}
        delay, table = choose_delay_cv(robot, log, filt["window_s"], filt["polyorder"])
    else:
        delay = effort_delay(timing, log.t, getattr(smoother, "effort_hold_period", None))
    iv = robot.joint_index_v()
    tau = retime_efforts(log.t, log.tau, delay)[np.asarray(idx)]
    ok = np.isfinite(tau)
    smoother._tau_mask[:, iv] &= ok
    smoother._taum[:, iv] = np.where(smoother._tau_mask[:, iv], np.nan_to_num(tau), 0.0)
    h = _sample_period(log.t)
    rec = {"mode": timing, "delay_s": float(delay), "delay_samples": float(delay / h), "cv": table}
    smoother.effort_timing_ = rec
    how = "chosen by blocked CV" if timing == "cv" else "held zero-order"
    noise = getattr(smoother, "noise_", None)
    if noise is not None:
        noise.source["tau_timing"] = (f"efforts re-timed to the knots ({how}): logged effort leads the "
                                      f"motion by {delay * 1e3:.4g} ms ({delay / h:.3g} samples)")
    return rec
