"""Noise levels from the log itself, for users who do not know their sensors (see docs/estimation.md).

White measurement noise of std σ on a smooth signal dominates its third difference at the sample rates
of robot logs: Δ³(s + e) ≈ Δ³e, whose variance is 20 σ². A robust estimate per channel is therefore
``σ ≈ 1.4826 · MAD(Δ³x) / √20``. Signals with real high-frequency content (controllers that chatter)
make this an over-estimate, which is the safe side for a noise level.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.signal import savgol_filter


def highfreq_noise_std(x: np.ndarray) -> np.ndarray:
    """Per-column noise std of ``x`` (N, n) from the median absolute third difference."""
    x = np.asarray(x, float)
    if x.shape[0] < 8:
        return np.full(x.shape[1], np.nan)
    d3 = np.diff(x, n=3, axis=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns (unmeasured) give NaN
        mad = np.nanmedian(np.abs(d3 - np.nanmedian(d3, axis=0)), axis=0)
    sigma = 1.4826 * mad / np.sqrt(20.0)
    # quantized channels (encoders, current sensors) can have a zero MAD: never below step/√12
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        d1 = np.abs(np.diff(x, axis=0))
        d1[d1 <= 1e-12 * np.nanmax(np.abs(x), axis=0, initial=0.0)] = np.nan
        step = np.nanmin(d1, axis=0)
    return np.fmax(sigma, step / np.sqrt(12.0))


def savgol_derivatives(t: np.ndarray, q: np.ndarray, window_s: float = 0.05, polyorder: int = 3):
    """Smoothed q and its first two derivatives by a Savitzky–Golay filter on the (median) clock."""
    dt = float(np.median(np.diff(t)))
    n = q.shape[0]
    w = int(round(window_s / dt)) | 1
    w = max(w, polyorder + 2 + ((polyorder + 2) % 2 == 0))
    w = min(w, n - 1 if (n - 1) % 2 == 1 else n - 2)
    if w <= polyorder:
        return q.copy(), np.gradient(q, t, axis=0), np.zeros_like(q)
    qs = savgol_filter(q, w, polyorder, axis=0)
    v = savgol_filter(q, w, polyorder, deriv=1, delta=dt, axis=0)
    a = savgol_filter(q, w, polyorder, deriv=2, delta=dt, axis=0)
    return qs, v, a
