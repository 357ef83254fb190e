"""Change detection of the online estimator (issue 13): a CUSUM test on the inverse-dynamics residuals.

A robot whose dynamics change in service (a payload picked up, a gearbox wearing) makes the θ that the
fixed-lag window carries — the marginal prior holds everything seen since the start — wrong for the new
samples. A constant forgetting (θ random walk) follows such a change but throws away information all the
time (it costs steady-state accuracy); instead `CusumDetector` watches the residuals and the estimator
forgets only when a change is detected (a covariance reset of the θ block of the marginal prior,
`online_elimination.KnotChain.scale_prior`).

**Statistic.** For each knot k once it is smoothed (older than the estimator's back-substitution tail,
≈ ``relin_lag`` s: its acceleration is fixed by the neighbouring knots, so it cannot absorb an effort
mismatch), the whitened inverse-dynamics residual at its state estimate and the current θ,

    s_k = Σ_i ((τ_i(q_k, v_k, a_k; θ) − τ_meas,ki) / σ_τ,i)²    over the m measured joints,

(σ_τ: the warm-up smoother's effort noise [N·m]; the batch smoother's own whitening). With a model that
fits, s_k ≈ ρ χ²_m; ρ (the reference level, ≈ 1 in class, larger out of class: model error) is the
mean of s_k/m over the first ``calibration`` seconds and then follows an exponential average with time
constant ``reference_tau`` seconds (every knot outside the hold-off, s/m capped at y_max·ρ: a slow
drift — wear, temperature — moves the reference instead of raising an alarm). A change multiplies the
residual variance: y_k = s_k / (m ρ) ~ χ²_m/m before, λ₁ χ²_m/m after (λ₁ = ``ratio``: the smallest
variance increase the test is tuned for). Page's CUSUM (Page 1954; Basseville & Nikiforov 1993, ch. 2)
with the log-likelihood ratio of one knot

    ℓ_k = (m/2) [(1 − 1/λ₁) min(y_k, y_max) − ln λ₁],       g_k = max(0, g_{k−1} + ℓ_k),

alarms when g_k > h (``threshold``); y is capped at ``y_max`` so that one outlier knot cannot raise an
alarm alone (with the defaults at least 3 knots of large residuals are needed). The change time is
estimated as the time of the last knot at which g was zero (the CUSUM change-point estimate). After an
alarm, g restarts at zero and stays there for ``holdoff`` seconds of log (the estimator is re-learning θ
from the post-change samples; their residuals are large meanwhile by construction).

Units: t [s]; s, y, ℓ, g dimensionless.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

__all__ = ["ChangeEvent", "CusumDetector"]


@dataclass(frozen=True)
class ChangeEvent:
    """One detected change: t [s] (log time of the knot that raised the alarm), t_change [s] (estimated
    change time), statistic (g at the alarm), threshold (h), ratio (mean y = s/(m ρ) of the knots since
    t_change), knots (their number), reference (ρ), reset (the factor the θ information of the marginal
    prior was multiplied by; filled in by the estimator), marginalized (window knots before t_change
    marginalized at the reset)."""

    t: float
    t_change: float
    statistic: float
    threshold: float
    ratio: float
    knots: int
    reference: float
    reset: float = float("nan")
    marginalized: int = 0

    def message(self) -> str:
        return (f"change detected at t={self.t:.3f} s (CUSUM {self.statistic:.3g} > {self.threshold:g}; "
                f"inverse-dynamics residual {self.ratio:.3g}× its reference over {self.knots} knots since "
                f"t={self.t_change:.3f} s): prior information × {self.reset:g} after marginalizing "
                f"{self.marginalized} knots")

    def row(self) -> dict:
        return asdict(self)


class CusumDetector:
    """Page's CUSUM on the whitened inverse-dynamics residuals (see the module docstring).

    Args:
        ratio: λ₁ > 1, residual variance increase the test is tuned for (4: the residual std doubles).
        threshold: h, CUSUM alarm level [log-likelihood ratio].
        y_max: cap of the normalized residual y of one knot.
        calibration: seconds of knots whose mean s/m sets the initial reference ρ (no alarm before).
        reference_tau: time constant [s] of the reference's exponential average afterwards.
        holdoff: seconds after an alarm during which the statistic stays zero.
    """

    def __init__(self, ratio: float = 4.0, threshold: float = 100.0, y_max: float = 20.0,
                 calibration: float = 1.0, reference_tau: float = 10.0, holdoff: float = 2.0):
        for name, val in (("threshold", threshold), ("y_max", y_max), ("reference_tau", reference_tau)):
            if not (np.isfinite(val) and val > 0):
                raise ValueError(f"change detector: {name} must be > 0, got {val}")
        if not (np.isfinite(ratio) and ratio > 1):
            raise ValueError(f"change detector: ratio must be > 1, got {ratio}")
        for name, val in (("calibration", calibration), ("holdoff", holdoff)):
            if not (np.isfinite(val) and val >= 0):
                raise ValueError(f"change detector: {name} must be ≥ 0 [s], got {val}")
        self.ratio = float(ratio)
        self.threshold = float(threshold)
        self.y_max = float(y_max)
        self.calibration = float(calibration)
        self.reference_tau = float(reference_tau)
        self.holdoff = float(holdoff)
        self.reference: float | None = None
        self.g = 0.0
        self.t_last = -np.inf  # time of the last knot tested
        self._t_zero = None  # time of the last knot with g = 0
        self._since: list[float] = []  # y of the knots since g was last zero
        self._calib: list[float] = []
        self._t_calib0 = None
        self._quiet_until = -np.inf
        self.alarms = 0

    def options(self) -> dict:
        return {"ratio": self.ratio, "threshold": self.threshold, "y_max": self.y_max,
                "calibration": self.calibration, "reference_tau": self.reference_tau, "holdoff": self.holdoff}

    def llr(self, y: np.ndarray, m: int) -> np.ndarray:
        """ℓ = (m/2) [(1 − 1/λ₁) min(y, y_max) − ln λ₁] per knot."""
        lam = self.ratio
        return 0.5 * m * ((1.0 - 1.0 / lam) * np.minimum(y, self.y_max) - np.log(lam))

    def update(self, t: np.ndarray, s: np.ndarray, m: int) -> ChangeEvent | None:
        """Test knots at times ``t`` [s] (increasing, after the last tested) with whitened squared residual
        sums ``s`` over ``m`` measured joints. Returns the alarm (the first) or None; knots after an alarm in
        the same call are left for the hold-off."""
        t = np.asarray(t, float)
        s = np.asarray(s, float)
        for k in range(t.size):
            tk, sk = float(t[k]), float(s[k])
            dt = tk - self.t_last if np.isfinite(self.t_last) else 0.0
            self.t_last = tk
            if not np.isfinite(sk):
                continue
            if self.reference is None:  # calibration
                self._t_calib0 = tk if self._t_calib0 is None else self._t_calib0
                self._calib.append(sk / m)
                if tk - self._t_calib0 >= self.calibration:
                    self.reference = max(float(np.mean(self._calib)), 1e-12)
                    self._calib = []
                    self._t_zero = tk
                continue
            if tk < self._quiet_until:
                self._t_zero = tk
                continue
            y = sk / (m * self.reference)
            self.g = max(0.0, self.g + float(self.llr(np.array([y]), m)[0]))
            w = min(1.0, max(dt, 0.0) / self.reference_tau)
            self.reference += w * (min(sk / m, self.y_max * self.reference) - self.reference)
            if self.g == 0.0:
                self._t_zero = tk
                self._since = []
                continue
            self._since.append(y)
            if self.g > self.threshold:
                ev = ChangeEvent(t=tk, t_change=float(self._t_zero), statistic=self.g,
                                 threshold=self.threshold, ratio=float(np.mean(self._since)),
                                 knots=len(self._since), reference=float(self.reference))
                self.alarms += 1
                self.g = 0.0
                self._since = []
                self._quiet_until = tk + self.holdoff
                self._t_zero = tk
                return ev
        return None
