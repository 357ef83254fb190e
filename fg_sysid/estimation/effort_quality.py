"""Effort channels that do not measure torque, and robust weights for effort outliers (issue 9, real data).

**Dead-band channels.** A motor-current effort whose reading is *exactly* zero on most samples while
the joint moves is below the drive's current resolution or dead band, not at zero torque: on the real
TIAGo log (../shared/data, meta file caveats) arm_5–arm_7 read exactly 0 on 85–87 % of the training
samples, the rest in steps of 0.0206 N·m, against the 0.05–0.08 N·m RMS that gravity alone puts on those
joints. Such a reading is censored (|τ| below a threshold), and fitting it as τ = 0 biases the distal
bodies' masses and first moments — and through them the torques of every joint upstream (measured in
docs/benchmarks.md, "TIAGo: why the smoother lost"). `deadband_channels` flags a channel whose fraction
of exactly-zero readings exceeds ``max_zero_fraction``; the smoother leaves its inverse-dynamics rows
out (`drop_deadband_channels`) and says so in ``summary.json`` (noise ``source``) and a warning.

**Huber weights.** `huber_weights` gives the per-row factor of an iteratively reweighted least-squares
(IRLS) step for Huber's loss ρ(z) = z²/2 (|z| ≤ k), k|z| − k²/2 (|z| > k) on whitened residuals
z = r/σ: the square root of the IRLS weight ψ(z)/z = min(1, k/|z|) multiplies the whitening 1/σ
(Huber 1964; Zhang, "Parameter estimation techniques", Image Vis. Comput. 15, 1997, Sec. 7), so a row
far outside the noise level pulls on the solution like an absolute-value residual instead of a square.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..datasets.log import Log

__all__ = ["DEFAULT_MAX_ZERO_FRACTION", "HUBER_K", "deadband_channels", "drop_deadband_channels",
           "huber_weights"]

#: a channel reading exactly 0 on more than this fraction of its measured samples is a dead-band channel
DEFAULT_MAX_ZERO_FRACTION = 0.5
#: Huber's threshold in units of σ (95 % efficiency at Gaussian noise)
HUBER_K = 1.345


def deadband_channels(tau: np.ndarray, max_zero_fraction: float = DEFAULT_MAX_ZERO_FRACTION
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Which effort columns of ``tau`` (N, n) [N·m | N] read exactly 0 on more than ``max_zero_fraction``
    of their measured (non-NaN) samples. Returns (flags (n,) bool, zero fractions (n,), NaN for a column
    with no measured sample)."""
    tau = np.asarray(tau, float)
    measured = ~np.isnan(tau)
    n_meas = measured.sum(axis=0)
    zeros = np.sum(measured & (tau == 0.0), axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        frac = np.where(n_meas > 0, zeros / np.maximum(n_meas, 1), np.nan)
    return np.nan_to_num(frac, nan=0.0) > float(max_zero_fraction), frac


def drop_deadband_channels(log: Log, max_zero_fraction: float | None = DEFAULT_MAX_ZERO_FRACTION
                           ) -> tuple[Log, dict]:
    """``log`` with the efforts of dead-band channels (`deadband_channels`) set to NaN (not measured),
    and a JSON-ready record {joint: zero fraction} of the dropped ones. ``max_zero_fraction`` None keeps
    every channel."""
    if max_zero_fraction is None or log.tau is None:
        return log, {}
    flags, frac = deadband_channels(log.tau, max_zero_fraction)
    if not np.any(flags):
        return log, {}
    tau = np.asarray(log.tau, float).copy()
    tau[:, flags] = np.nan
    dropped = {j: round(float(f), 4) for j, f, b in zip(log.joint_names, frac, flags, strict=True) if b}
    return dataclasses.replace(log, tau=tau), dropped


def huber_weights(r: np.ndarray, sigma: np.ndarray, k: float = HUBER_K) -> np.ndarray:
    """Square roots of Huber's IRLS weights, min(1, k/|r/σ|)^½, per entry of the residual ``r`` (N, n)
    with per-column noise std ``sigma`` (n,) [same units as r]; 1 where |r| ≤ kσ (and for NaN)."""
    z = np.abs(np.asarray(r, float)) / np.maximum(np.asarray(sigma, float), 1e-300)
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.where(z > k, k / z, 1.0)
    return np.sqrt(np.nan_to_num(w, nan=1.0))
