"""`WindowedBatchEstimator`: online identification by refitting the batch smoother on a sliding window.

The fallback of issue 13's fixed-lag `OnlineEstimator` (same API): samples stream in through
`update`; every ``lag`` seconds of log time (once ``warmup`` seconds are buffered) the batch
`JointSmoother` (paper 004 eq. 1) is fitted on the last ``window`` seconds with one knot every
``1/knot_rate`` seconds. θ and its marginal covariance are that fit's (the inverse Schur complement at
the solution); between refits they stay constant. Old data are forgotten by the window (``forgetting``
[s] sets it; default `DEFAULT_WINDOW_S`), so a change of the robot (a payload picked up) is tracked
within one window length. Each fit is centred on the URDF prior, independently of the previous one.

Compared with a fixed-lag smoother this costs O(window) per refit instead of O(lag) per knot, and a
sample's latency is the refit time when a refit falls on it; memory is bounded by the window.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field

import numpy as np

from ..datasets.log import Log
from ..robots import RobotModel
from .online_stream import StreamValidator, select

__all__ = ["DEFAULT_WINDOW_S", "OnlineUpdate", "WindowedBatchEstimator"]

#: Window [s] when ``forgetting`` is None (the cost of a refit grows with it).
DEFAULT_WINDOW_S = 20.0
#: Default smoother options of a refit (fewer iterations than a batch run: short windows converge fast).
REFIT_OPTIONS = {"max_iterations": 10, "reweight_rounds": 1}


@dataclass
class OnlineUpdate:
    """What one `update` returns.

    Attributes:
        theta, theta_cov: the current unconstrained parameter estimate and its marginal covariance (None
            before the first fit).
        t: time [s] of the newest accepted sample (nan if none yet).
        states: the newest knot's smoothed state {t [s], q [rad], v [rad/s], a [rad/s²]} (None before the
            first fit).
        rejected: one message per sample the estimator skipped (non-finite, repeated, out of order).
        latency_s: wall time of this call [s].
        ready: True once an estimate exists.
        refit: True if this call ran a refit.
    """

    theta: np.ndarray | None
    theta_cov: np.ndarray | None
    t: float
    states: dict | None
    rejected: list = field(default_factory=list)
    latency_s: float = 0.0
    ready: bool = False
    refit: bool = False


class WindowedBatchEstimator:
    """Sliding-window batch refits with the `OnlineEstimator` API (see the module docstring).

    Args:
        robot: fixed-base `RobotModel` whose joints match the samples' columns.
        lag: refit period [s] of log time.
        knot_rate: knots per second of the smoother [Hz] (the log is decimated to it).
        forgetting: window length [s] (older samples are dropped); None = `DEFAULT_WINDOW_S`.
        warmup: samples needed before the first fit [s].
        smoother_options: `JointSmoother` keyword arguments (override `REFIT_OPTIONS`).
        verbose: print one line per refit to stderr.
    """

    name = "windowed-batch"

    def __init__(
        self,
        robot: RobotModel,
        lag: float = 1.0,
        knot_rate: float = 200.0,
        forgetting=None,
        warmup: float = 2.0,
        smoother_options: dict | None = None,
        verbose: bool = False,
    ):
        for key, val in (("lag", lag), ("knot_rate", knot_rate), ("warmup", warmup)):
            if not (np.isfinite(val) and val > 0):
                raise ValueError(f"{key} must be > 0, got {val}")
        if forgetting is not None and not (np.isfinite(forgetting) and forgetting > 0):
            raise ValueError(f"forgetting must be a window length > 0 [s], got {forgetting}")
        if robot.floating_base:
            raise ValueError(f"robot {robot.name!r} has a floating base: not supported online")
        self.robot = robot
        self.lag = float(lag)
        self.knot_rate = float(knot_rate)
        self.forgetting = forgetting
        self.window = float(forgetting) if forgetting is not None else DEFAULT_WINDOW_S
        if self.window < warmup:
            raise ValueError(f"the window ({self.window:g} s) is shorter than the warm-up ({warmup:g} s)")
        self.warmup = float(warmup)
        self.smoother_options = {**REFIT_OPTIONS, **(smoother_options or {})}
        self.verbose = verbose
        self._validator = StreamValidator()
        self._t: list[float] = []
        self._q: list[np.ndarray] = []
        self._v: list[np.ndarray] = []
        self._tau: list[np.ndarray] = []
        self._has_v: bool | None = None
        self._last_fit_t = -np.inf
        self._result = None
        self.layout_ = None
        self.theta_ = None
        self.theta_cov_ = None
        self.stats_ = {
            "samples": 0,
            "rejected": 0,
            "refits": 0,
            "failed_refits": 0,
            "refit_seconds": [],
            "window_s": self.window,
            "estimator": self.name,
        }

    # ------------------------------------------------------------------ public
    def update(self, samples) -> OnlineUpdate:
        """Append a chunk (a `Log` or a dict t (n,), q (n, nj), v (n, nj) | None, tau (n, nj)); refit when
        ``lag`` seconds have passed since the last fit. Returns an `OnlineUpdate`."""
        t0 = time.perf_counter()
        ok, bad = self._validator.check(samples)
        rejected = [b.message for b in bad if b.kind != "gap"]
        good = select(samples, ok)
        self._append(good)
        for b in bad:
            if b.kind == "gap":  # the smoother's integration factors cannot bridge a gap: restart the window
                self._drop_before(b.t)
        self.stats_["rejected"] += len(rejected)
        refit = False
        if (
            self._t
            and self._t[-1] - self._last_fit_t >= self.lag - 1e-9
            and self._span() >= self.warmup - 1e-9
        ):
            refit = self._refit()
        states = None
        if self._result is not None and self._result.trajectory is not None:
            row = self._result.trajectory.iloc[-1]
            names = self.robot.joint_names
            states = {"t": float(row["t"])}
            for c in "qva":
                states[c] = np.array([row[f"{c}.{j}"] for j in names])
        return OnlineUpdate(
            self.theta_,
            self.theta_cov_,
            self._t[-1] if self._t else float("nan"),
            states,
            rejected,
            time.perf_counter() - t0,
            self.theta_ is not None,
            refit,
        )

    def result(self):
        """The latest fit's `IdentificationResult` (its trajectory covers the window); None before it."""
        return self._result

    # ------------------------------------------------------------------ internals
    def _append(self, good: dict) -> None:
        n = good["t"].shape[0]
        if not n:
            return
        has_v = good["v"] is not None
        if self._has_v is None:
            self._has_v = has_v
        elif has_v != self._has_v:
            raise ValueError("velocities present in some chunks and absent from others")
        self._t.extend(good["t"].tolist())
        self._q.extend(good["q"])
        self._tau.extend(good["tau"])
        if has_v:
            self._v.extend(good["v"])
        self.stats_["samples"] += n
        self._drop_before(self._t[-1] - self.window)

    def _drop_before(self, t_min: float) -> None:
        k = int(np.searchsorted(np.asarray(self._t), t_min, side="left"))
        if k:
            del self._t[:k], self._q[:k], self._tau[:k]
            if self._v:
                del self._v[:k]

    def _span(self) -> float:
        return self._t[-1] - self._t[0] if len(self._t) > 1 else 0.0

    def _refit(self) -> bool:
        from .smoother import EstimationError, JointSmoother

        t = np.asarray(self._t)
        rate = 1.0 / float(np.median(np.diff(t)))
        log = Log(
            t=t,
            q=np.asarray(self._q),
            v=np.asarray(self._v) if self._v else None,
            tau=np.asarray(self._tau),
            joint_names=tuple(self.robot.joint_names),
            source="online window",
        )
        stride = max(1, int(round(rate / self.knot_rate)))
        t0 = time.perf_counter()
        self._last_fit_t = float(t[-1])
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # per-window SG/CV notes would flood a stream
                sm = JointSmoother(self.robot, knot_stride=stride, **self.smoother_options).fit(log)
        except (EstimationError, ValueError, np.linalg.LinAlgError) as e:
            self.stats_["failed_refits"] += 1
            if self.verbose:
                print(f"[online] refit at t={t[-1]:.3f} s failed: {e}", flush=True)
            return False
        dt = time.perf_counter() - t0
        self._result = sm.result_
        self.layout_ = sm.result_.layout
        self.theta_ = np.asarray(sm.result_.theta, float)
        self.theta_cov_ = np.asarray(sm.result_.theta_cov, float)
        self.stats_["refits"] += 1
        self.stats_["refit_seconds"].append(dt)
        if self.verbose:
            print(
                f"[online] refit at t={t[-1]:.3f} s on {t[-1] - t[0]:.3g} s ({log.n_samples} samples, "
                f"stride {stride}): {dt:.3g} s",
                flush=True,
            )
        return True
