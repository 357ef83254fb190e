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


def savgol_window(samples: float, polyorder: int, n: int) -> int:
    """The Savitzky–Golay window [samples] for a wanted length ``samples`` on a log of ``n`` samples: odd,
    > polyorder + 1, < n (≤ polyorder when the log is too short for any window)."""
    w = int(round(samples)) | 1
    w = max(w, polyorder + 2 + ((polyorder + 2) % 2 == 0))
    return min(w, n - 1 if (n - 1) % 2 == 1 else n - 2)


def savgol_derivatives(t: np.ndarray, q: np.ndarray, window_s: float = 0.05, polyorder: int = 3):
    """Smoothed q and its first two derivatives by a Savitzky–Golay filter on the (median) clock."""
    dt = float(np.median(np.diff(t)))
    w = savgol_window(window_s / dt, polyorder, q.shape[0])
    if w <= polyorder:
        return q.copy(), np.gradient(q, t, axis=0), np.zeros_like(q)
    qs = savgol_filter(q, w, polyorder, axis=0)
    v = savgol_filter(q, w, polyorder, deriv=1, delta=dt, axis=0)
    a = savgol_filter(q, w, polyorder, deriv=2, delta=dt, axis=0)
    return qs, v, a


def signal_bandwidth(t: np.ndarray, x: np.ndarray, energy: float = 0.99) -> float:
    """Frequency [Hz] below which ``energy`` of the signals' power lies, all columns pooled (so the joints
    that move most dominate), linear trends removed and each column's white-noise floor — the median of
    its periodogram above half the Nyquist frequency — subtracted first (noise spreads its variance evenly
    up to the Nyquist frequency and would otherwise dominate the upper band). NaN if nothing moves."""
    from scipy.signal import detrend, periodogram

    x = np.asarray(x, float)
    fs = 1.0 / float(np.median(np.diff(t)))
    f, p = periodogram(detrend(np.nan_to_num(x), axis=0), fs=fs, axis=0)
    floor = np.median(p[f > fs / 4.0], axis=0)
    c = np.cumsum(np.maximum(p - floor[None, :], 0.0).sum(axis=1))
    if c[-1] <= 0:
        return float("nan")
    return float(f[min(int(np.searchsorted(c, energy * c[-1])), f.size - 1)])


def knot_stride_from_log(t: np.ndarray, q: np.ndarray, flags: np.ndarray | None = None,
                         oversample: float = 10.0, max_spacing: float = 0.01,
                         energy: float = 0.99) -> tuple[int, dict]:
    """Knot stride (samples per knot) for a log whose knots need not sit at every sample.

    The knot spacing is the smallest of ``1 / (oversample · f_bw)`` — f_bw the joints' bandwidth
    (`signal_bandwidth`) — ``max_spacing`` [s], and a quarter of the shortest contact phase (runs of
    equal ``flags``, (N, n_feet)); the stride is that spacing in whole samples (≥ 1). Returns the stride
    and a JSON-ready record of why."""
    dt = float(np.median(np.diff(t)))
    f_bw = signal_bandwidth(t, q, energy)
    limits = {"max_spacing_s": float(max_spacing)}
    if np.isfinite(f_bw) and f_bw > 0:
        limits["bandwidth_s"] = 1.0 / (oversample * f_bw)
    if flags is not None and np.size(flags):
        fl = np.asarray(flags, bool)
        shortest = np.inf
        for col in fl.T:
            edges = np.flatnonzero(np.diff(col.astype(int)) != 0)
            runs = np.diff(np.r_[-1, edges, col.size - 1])
            if runs.size > 2:  # phases between two switches (first/last are cut by the log)
                shortest = min(shortest, float(runs[1:-1].min()) * dt)
        if np.isfinite(shortest):
            limits["contact_phase_s"] = shortest / 4.0
    spacing = min(limits.values())
    stride = max(int(np.floor(spacing / dt + 1e-9)), 1)
    return stride, {"stride": stride, "knot_spacing_s": stride * dt, "sample_period_s": dt,
                    "bandwidth_hz": f_bw, "energy": energy, "oversample": oversample,
                    "limited_by": min(limits, key=limits.get), "limits_s": limits}
