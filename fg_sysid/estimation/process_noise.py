"""Process-noise level of the smoother's integration factors from the log's own kinematics (issue 9).

The integration factor between knots k and k+1 (paper 004 eq. 1b, `factors.kinematics.integration_residual`)

    r_v = v_{k+1} − v_k − ½ h_k (a_k + a_{k+1})          [rad/s]

has a Gaussian "process noise" of std σ_pv per joint (and σ_pq = σ_pv · h on the position row). Its
only physical content is the trapezoid rule's discretization error (≈ h³/12 · d²a/dt², micro-rad/s at
robot rates): the chain q → v → a is exact. The historic default σ_pv = 0.3 · RMS(a) · h (the
``process_fraction``) is far looser than that. On a log whose velocities are measured precisely, such a
loose link discards what the velocities say about the accelerations: the accelerations are then set by
the inverse-dynamics rows alone, absorb the effort noise, and bias the inertial parameters towards
larger inertias/armatures (the larger M + A, the smaller the acceleration change that absorbs a given
effort error). Measured on the UR10 log with exact truth (docs/benchmarks.md, issue 9): base-parameter
error 1.2 % → 0.2 % at the low noise level.

`kinematic_process_std` measures what the log's own velocities allow: ½ · RMS of their third difference
at the knots (the part of the velocity no piecewise-linear acceleration — the trapezoid rule's model —
explains; velocity noise adds √20 σ_v to it, the safe side). The smoother uses
this bound (floored at 1e-3 · d) per joint where it is below 0.1 · d, ``d = process_fraction · RMS(a) · h``
(the historic default), else d: it only ever tightens the historic default, and only where the logged
velocities are precise enough to show it at least 10× too loose. Without logged velocities the historic
default stays.
docs/process-noise.md has the measurements and the known limit (efforts held over the whole sample
period with exact velocities).
"""

from __future__ import annotations

import warnings

import numpy as np

__all__ = ["kinematic_process_std", "process_velocity_std"]

#: never tighter than this fraction of the historic default (keeps the normal equations conditioned on
#: noise-free logs, where the bound is the trapezoid rule's micro-rad/s)
MIN_FRACTION_OF_DEFAULT = 1e-3
#: tighten a joint only where the bound is below this fraction of the historic default (the log's velocities
#: show it at least 10x too loose); elsewhere the default stays unchanged (no small perturbations of fits on
#: logs with noisy velocities)
TIGHTEN_BELOW = 0.1


def kinematic_process_std(v: np.ndarray) -> np.ndarray:
    """Per joint [rad/s]: ½ · RMS of the third difference of the logged velocities at the knots.

    Δ³v is the part of the velocity over four knots that no quadratic (no piecewise-linear acceleration,
    the trapezoid rule's model) represents: ≈ h³ · d²a/dt² for a smooth motion, whose trapezoid residual is
    h³/12 · d²a/dt², and ≈ h · (jump of a) where the acceleration jumps at a knot (efforts held between
    samples, friction reversals), whose residual is ≈ h/2 · jump. ½ RMS(Δ³v) therefore bounds the
    integration residual of the true states from above (velocity noise adds √20 σ_v: the safe side).
    RMS, not a robust scale: the rare large residuals (jumps) are the ones the process noise must admit.

    Args:
        v: logged joint velocities at the knots (N, n) [rad/s]; NaN where not logged.

    Returns:
        (n,); NaN for a joint with fewer than 8 finite third differences.
    """
    d3 = np.diff(np.asarray(v, float), n=3, axis=0)
    out = np.full(d3.shape[1], np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for j in range(d3.shape[1]):
            dj = d3[np.isfinite(d3[:, j]), j]
            if dj.size >= 8:
                out[j] = 0.5 * np.sqrt(np.mean(dj ** 2))
    return out


def process_velocity_std(default: np.ndarray, v_knots: np.ndarray | None) -> tuple[np.ndarray, str]:
    """The smoother's σ_pv per joint [rad/s per knot step] and a one-line record of how it was chosen.

    ``default`` (n,) is the historic ``process_fraction · RMS(a) · h``; with logged velocities
    (``v_knots`` (N, n), else None) a joint's σ_pv is its ``kinematic_process_std`` where that is below
    ``TIGHTEN_BELOW · default``, never below ``MIN_FRACTION_OF_DEFAULT · default``; else the default.
    """
    default = np.asarray(default, float)
    if v_knots is None or np.asarray(v_knots).shape[0] < 9:
        return default, "default (no logged velocities to check the kinematics against)"
    bound = kinematic_process_std(v_knots)
    ok = np.isfinite(bound) & (bound < TIGHTEN_BELOW * default)  # the log shows the default far too loose
    spv = np.where(ok, np.maximum(bound, MIN_FRACTION_OF_DEFAULT * default), default)
    tightened = int(np.sum(ok))
    return spv, (f"min(default, half the RMS third difference of the logged velocities): tightened on "
                 f"{tightened} of {default.size} joints")
