"""The motion's acceleration scale from a noisy position log, without the noise (issue 12, Table II, σ = 0.1).

The smoother's process noise (`smoother.JointSmoother`, ``process_fraction``; `process_noise`) is
``σ_pv = process_fraction · RMS(a) · h`` per joint: a stiff but not rigid link between q, v and a, scaled
by *the motion's* acceleration. ``RMS(a)`` used to be taken from the initial trajectory's accelerations,
a Savitzky–Golay (SG) second derivative of the logged positions with the window that cross-validation of
the classical baseline picks. That window is chosen for the *torque* fit, not for the acceleration's
RMS: with a short window on noisy positions the SG acceleration is mostly amplified noise. Measured on
the Z1 Table II log at σ_q = 0.1 rad (8 s, 500 Hz, seed 0): the cross-validated window of 34 ms gives
RMS(a) ≈ 2000 rad/s² per joint while the true motion's is 0.6–2.2 rad/s², so σ_pv was ~1000× too loose:
the integration factors no longer linked v and a to q, the knot accelerations absorbed the effort noise
(errors-in-variables) and the inertial base-parameter error was 44 % (docs/benchmarks.md).

The SG second derivative is linear in q: for i.i.d. position noise of std σ_q its noise has std
``n_w = σ_q · ‖c_w‖`` at interior samples, ``c_w`` the filter's coefficients for window w (including the
1/h² of the derivative; `scipy.signal.savgol_coeffs`; the log's first and last w/2 samples, fitted by one
polynomial each, have a larger gain: n_w slightly underestimates their noise). Noise and motion are
uncorrelated, so

    RMS(a_w)² ≈ s_w² + n_w²,     s_w = RMS of the smoothed *motion's* acceleration.

`signal_acceleration_rms` starts at the given (cross-validated) window and widens it by a factor 1.5
until the motion dominates, ``n_w ≤ s_w / snr`` (``snr = 3``: noise at most 10 % of the variance), and
returns the noise-corrected ``s_w = √(RMS(a_w)² − n_w²)`` of the first such window. On a low-noise log
the first window already qualifies and the result is the historic RMS(a) less its small noise share.
A wider window attenuates the motion's high-frequency content (an SG filter of order p is flat up to
roughly (p + 1) / (2 · window) Hz), so the result errs on the side of a tighter link, never a looser one.

The smoother uses it through `motion_acceleration_scale`: the historic RMS stays unless it exceeds the
motion's by ``REPLACE_ABOVE`` = 10x (noise ≥ 99 % of the filtered variance) — only gross errors are
corrected, as `process_noise` only tightens where the historic level is ≥ 10x too loose.
"""

from __future__ import annotations

import numpy as np
from scipy.signal import savgol_coeffs, savgol_filter

from .noise import savgol_window

__all__ = ["REPLACE_ABOVE", "motion_acceleration_scale", "savgol_acceleration_noise_gain",
           "signal_acceleration_rms"]

#: the motion must exceed the noise by this factor (std) in the chosen window
SNR = 3.0
#: window growth per step
GROWTH = 1.5
#: the widest window tried, as a fraction of the log
MAX_WINDOW_FRACTION = 0.25
#: `motion_acceleration_scale` replaces a joint's filtered RMS only where it is this many times the motion's
REPLACE_ABOVE = 10.0


def savgol_acceleration_noise_gain(window: int, polyorder: int, dt: float) -> float:
    """‖c‖ [1/s²] of the SG second-derivative filter (``window`` samples, order ``polyorder``, sample period
    ``dt`` [s]): its output's noise std per unit std of i.i.d. input noise (interior samples)."""
    if window <= polyorder:
        return float("inf")
    return float(np.linalg.norm(savgol_coeffs(int(window), int(polyorder), deriv=2, delta=float(dt))))


def signal_acceleration_rms(t: np.ndarray, q: np.ndarray, sigma_q, window_s: float, polyorder: int,
                            snr: float = SNR) -> tuple[np.ndarray, dict]:
    """Per joint RMS acceleration of the logged motion with the position noise's share removed [rad/s²].

    Args:
        t: sample times (N,) [s] (median period used).
        q: logged joint positions (N, n) [rad] (NaN-free; one column per joint).
        sigma_q: position noise std per joint (n,) or scalar [rad] (the smoother's ``noise.q``).
        window_s: the starting SG window [s] (the initial trajectory's cross-validated one).
        polyorder: the SG polynomial order.
        snr: required ratio motion / noise (std) in the chosen window.

    Returns:
        ``(rms, record)``: ``rms`` (n,) per the module docstring; ``record`` a JSON-ready dict with the
        chosen window [s] per joint and the noise std n_w [rad/s²] there.
    """
    q = np.asarray(q, float)
    n, nj = q.shape
    sq = np.broadcast_to(np.asarray(sigma_q, float), (nj,))
    dt = float(np.median(np.diff(np.asarray(t, float))))
    w = savgol_window(window_s / dt, polyorder, n)
    w_max = max(w, savgol_window(MAX_WINDOW_FRACTION * n, polyorder, n))
    rms = np.full(nj, np.nan)
    chosen = np.full(nj, np.nan)
    noise = np.full(nj, np.nan)
    fallback = np.full(nj, np.inf)
    todo = np.ones(nj, bool)
    while True:
        if w <= polyorder:  # too short a log for any SG window: the historic rule (noise not removed)
            a = np.gradient(np.gradient(q, dt, axis=0), dt, axis=0)
            rms[todo] = np.sqrt(np.mean(a[:, todo] ** 2, axis=0))
            chosen[todo] = 0.0
            break
        a = savgol_filter(q[:, todo], w, polyorder, deriv=2, delta=dt, axis=0)
        tot2 = np.mean(a ** 2, axis=0)  # every sample, as the historic rule (motion at the log's ends counts)
        nw = sq[todo] * savgol_acceleration_noise_gain(w, polyorder, dt)
        s = np.sqrt(np.maximum(tot2 - nw ** 2, 0.0))
        ok = nw <= s / snr
        cols = np.flatnonzero(todo)
        rms[cols[ok]], chosen[cols[ok]], noise[cols[ok]] = s[ok], w * dt, nw[ok]
        fallback[cols] = np.minimum(fallback[cols], np.sqrt(tot2))
        todo[cols[ok]] = False
        if not todo.any():
            break
        if w >= w_max:  # the motion never dominates (a joint that hardly moves): the smallest RMS seen,
            rms[todo], chosen[todo] = fallback[todo], w * dt  # an upper bound of its acceleration
            break
        w = min(savgol_window(GROWTH * w, polyorder, n), w_max)
    return rms, {"window_s": chosen.tolist(), "noise_std": noise.tolist()}


def motion_acceleration_scale(filtered_rms, t, q, sigma_q, window_s: float, polyorder: int,
                              replace_above: float = REPLACE_ABOVE) -> tuple[np.ndarray, dict]:
    """The smoother's acceleration scale per joint [rad/s²]: the initial SG accelerations' RMS
    (``filtered_rms``, the historic rule) except where it is more than ``replace_above`` times the motion's
    (`signal_acceleration_rms`): there the noise is ≥ 99 % of the filtered variance and the motion's RMS
    replaces it. Only gross errors are corrected: on the real TIAGo log the uncorrected rule would lower
    two joints' scale by 2–3x (its high-frequency content is not all white noise) and the held-out error
    rose 1.85 → 2.16 N·m (docs/benchmarks.md); on the Z1 at σ = 0.1 the factor is 600–2000.

    Returns ``(rms, record)``: record = `signal_acceleration_rms`'s plus ``motion_rms``,
    ``filtered_rms`` and ``replaced`` (bool per joint).
    """
    filtered_rms = np.asarray(filtered_rms, float)
    s, rec = signal_acceleration_rms(t, q, sigma_q, window_s, polyorder)
    replace = np.isfinite(s) & (filtered_rms > replace_above * s)
    rec = {**rec, "motion_rms": s.tolist(), "filtered_rms": filtered_rms.tolist(),
           "replaced": replace.tolist()}
    return np.where(replace, s, filtered_rms), rec
