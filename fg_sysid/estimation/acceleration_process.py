"""Process model of the knot accelerations: a Wiener-process (white-jerk) prior (issue 9, session 9).

Why. The fixed-base smoother's integration factors (paper 004 eq. 1b, `factors.kinematics`)

    r_q = q_{k+1} ⊖ q_k − ½h (v_k + v_{k+1}) + h²/12 (a_{k+1} − a_k)
    r_v = v_{k+1} − v_k − ½h (a_k + a_{k+1})

are blind to the alternating acceleration a_k = (−1)^k c: r_v does not see it at all (the trapezoid
rule's (1 + z)/2 vanishes at the Nyquist frequency) and r_q sees it only as h²/6 · c, which a
position alternating by h²c/12 (10⁻⁴ rad at c = 500 rad/s², h = 2 ms: far below any encoder noise)
cancels. So the accelerations' upper frequency band is free: every knot has as many free acceleration
coordinates as inverse-dynamics rows there, and the MAP estimate uses them to fit the *effort noise*
(M(q) a_k follows τ̂_k). Measured on the σ = 0.1 Z1 log of tests/test_acceleration_scale.py at the
converged MAP (docs/damping.md): knot-acceleration errors of 20–600 rad/s² RMS (true RMS 0.7–1.3 rad/s²)
with lag-1 autocorrelation −0.9 … −0.99 (the alternating mode), inverse-dynamics residuals 0.02–0.07 N·m
where the effort noise is 0.1 N·m (redundancy of joint 3's rows 7 of 1501: absorbed), and a fit that
got worse the longer it ran (base-parameter error 9.2 % at 20 iterations per round, 21.6 % converged):
the absorption is cheaper the larger M + A, so θ drifts toward large inertias and armatures.

The fix is a process model for a, the one the trapezoid rule already assumes between knots (a piecewise
linear, constant jerk on each interval): the discretized Wiener-process acceleration model (white jerk;
Bar-Shalom, Li & Kirubarajan, *Estimation with Applications to Tracking and Navigation*, 2001, Sec. 6.2.3),
whose acceleration row is

    r_a = a_{k+1} − a_k ~ N(0, σ_a²),   σ_a² = q̃ · h      (q̃: the jerk's power spectral density).

Its level comes from the log, not from a fit. For a motion of RMS velocity s_v and RMS acceleration
s_a (the motion's, noise removed), ω = s_a / s_v is the acceleration's characteristic angular frequency
(Rice's spectral-moment ratio: s_a² / s_v² = ∫ω² S_v dω / ∫S_v dω), and the jerk's RMS is about ω · s_a
(it is ≥ it: higher spectral moments grow), so one knot step changes a by about

    σ_a = JERK_FACTOR · (s_a / s_v) · s_a · h       [rad/s² per knot step]

per joint, JERK_FACTOR = 3 the margin for the jerk's higher frequency content. The motion passes (it
changes a by less than σ_a per step); the alternating mode costs (2c/σ_a)² per step, so the accelerations
can no longer follow the effort noise, which is left in the inverse-dynamics residuals where it belongs
(they then sit at the noise level, and the effort noise re-estimated from them between the reweighting
rounds is right). A joint that barely moves (s_v → 0) gets a loose row (large ω): the historic behaviour.
"""

from __future__ import annotations

import numpy as np

from .problem import Problem, Residual, Term

__all__ = ["JERK_FACTOR", "MAX_STEP_FACTOR", "acceleration_process_std", "acceleration_process_term",
           "helmert_factors", "huber_row_weights"]

#: σ_a = JERK_FACTOR · (s_a / s_v) · s_a · h: margin of the jerk's RMS over ω · s_a
JERK_FACTOR = 3.0


def acceleration_process_std(a_rms, v_rms, h: float, factor: float = JERK_FACTOR) -> tuple[np.ndarray, dict]:
    """σ_a per joint [rad/s² per knot step] of the white-jerk acceleration row, and a JSON-ready record.

    Args:
        a_rms: per joint RMS of the motion's acceleration (n,) [rad/s²] (the smoother's process-noise
            scale: `acceleration_scale.motion_acceleration_scale`).
        v_rms: per joint RMS of the motion's velocity (n,) [rad/s] (noise removed).
        h: knot spacing [s].
        factor: margin (`JERK_FACTOR`).

    Returns:
        (σ_a (n,), {"omega_rad_s", "factor", "sigma_a"}); ω = s_a / s_v with s_a ≥ 1e-3 rad/s² and
        s_v ≥ 1e-6 rad/s.
    """
    a_rms = np.maximum(np.nan_to_num(np.asarray(a_rms, float), nan=1e-3), 1e-3)
    v_rms = np.maximum(np.nan_to_num(np.asarray(v_rms, float), nan=1e-6), 1e-6)
    omega = a_rms / v_rms
    sigma = float(factor) * omega * a_rms * float(h)
    return sigma, {"omega_rad_s": omega.tolist(), "factor": float(factor), "sigma_a": sigma.tolist()}


def acceleration_process_term(problem: Problem, w) -> Term:
    """The white-jerk row r_a = a_{k+1} − a_k between consecutive knots (module doc), weights ``w`` (nv,)
    = 1/σ_a [s²/rad] (0: no row for that coordinate), or (N−1, nv) per interval (the Huber-reweighted rows
    of `huber_row_weights`). A pair term with a constant Jacobian (−I, I on the accelerations)."""
    w = np.asarray(w, float)
    nv = w.shape[-1]
    sl = problem.slices["a"]

    def evaluate(ev, jac):
        r = ev.a[1:] - ev.a[:-1]
        ww = ev.intervals(w) if w.ndim == 2 else w
        if not jac:
            return Residual(r, w=ww)
        n = r.shape[0]
        J0 = np.zeros((n, nv, problem.nx))
        J1 = np.zeros((n, nv, problem.nx))
        J0[:, :, sl] = -np.eye(nv)
        J1[:, :, sl] = np.eye(nv)
        return Residual(r, J0, J1, w=ww)

    return Term("acceleration_process", "pair", "measurement", evaluate, constant=w.ndim == 1)


def huber_row_weights(a, sigma_a, k: float = 1.345) -> np.ndarray:
    """Huber IRLS factors (N−1, nv) of the white-jerk rows at the knot accelerations ``a`` (N, nv): 1 where
    |Δa| ≤ k σ_a, k σ_a / |Δa| beyond (Huber 1964). The jerk of a real motion is heavy-tailed (friction
    reversals of light links, contacts: single steps of 10-100 σ_a), the noise mode the rows suppress is
    not (it is spread over every interval); the Huber loss lets the jumps through and keeps the rest."""
    r = np.abs(np.diff(np.asarray(a, float), axis=0)) / np.maximum(np.asarray(sigma_a, float), 1e-300)
    return np.where(r > k, k / np.maximum(r, 1e-300), 1.0)


#: a Helmert step changes σ_a by at most this factor (either way) per reweighting round
MAX_STEP_FACTOR = 10.0


def helmert_factors(problem: Problem, x, theta, probes: int = 4, min_se: float = 5.0,
                    seed: int = 0, solver=None) -> np.ndarray | None:
    """Per-joint factors for σ_a from one step of Helmert's variance-component estimation at (x, θ):
    sqrt(χ²_j / r_j) of the acceleration rows of coordinate j, r_j = rows − tr(H_jj) their redundancy (the
    hat matrix's trace by Hutchinson's estimator, `noise_balance.term_balance`: the states' and θ's degrees
    of freedom accounted for, REML-like). Where r_j is below ``min_se`` standard errors, the pooled factor
    of all coordinates; clipped to [1/MAX_STEP_FACTOR, MAX_STEP_FACTOR]. Returns (nv,) (1 for coordinates
    without rows) or None when the problem has no acceleration rows or terms `term_balance` cannot take.
    ``solver``: a `StructuredSolver` to reuse (its work arrays), e.g. the estimator's own."""
    from .noise_balance import term_balance

    try:
        df = term_balance(problem, x, theta, probes=probes, seed=seed, columns=True,
                          solver=solver).set_index("term")
    except ValueError:  # constraint / pair-θ terms (closed loops, energy rows)
        return None
    name = "acceleration_process"
    if name not in df.index:
        return None

    def factor(row):
        ok = row["redundancy"] > 0 and row["redundancy"] > min_se * row["redundancy_se"]
        return float(np.sqrt(row["chi2"] / row["redundancy"])) if ok else None

    pooled = factor(df.loc[name])
    nv = problem.slices["a"].stop - problem.slices["a"].start
    out = np.ones(nv)
    for j in range(nv):
        key = f"{name}[{j}]"
        if key in df.index:
            f = factor(df.loc[key])
            out[j] = f if f is not None else (pooled if pooled is not None else 1.0)
    return np.clip(out, 1.0 / MAX_STEP_FACTOR, MAX_STEP_FACTOR)
