"""Effort rows near velocity reversals weighted by the friction law's uncertainty there — open chains
(issue 9, session 8; the closed-loop version is `loop_init.stick_sigma`, issue 11).

Dry friction with stiction (MuJoCo ``frictionloss``, real gearboxes) is a constraint: while joint j sticks
or reverses, its friction torque is anything in ±fc_j that keeps it at rest, which fc·tanh(v/vs) + fv·v
cannot follow. Treated as an error of the friction law with std

    δ_j(v) = fc_j · (1 − tanh²(v_j / (k·vs_j)))        (k = `STICK_WIDTH_FACTOR` = 2)

(≈ fc at rest, < 0.1 fc beyond 4 vs), added in quadrature to the effort noise of that row: the row's
whitening factor 1/σ_τ becomes 1/√(σ_τ² + δ²), i.e. `JointSmoother`'s inverse-dynamics weights are
multiplied by σ_τ / √(σ_τ² + δ²). On an open chain each joint's own row carries its own friction (the
loop version maps δ through the closure Jacobian G; here G = I). fc, vs: the smoother's initial
parameters (the classical fit's fc, the prior mean vs); v: the initial (Savitzky–Golay) velocities.
Opt-in: ``JointSmoother(stick_weights=True)``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["STICK_MODES", "STICK_WIDTH_FACTOR", "initial_stick_sigma", "row_factor", "stick_delta",
           "stick_sigma"]

#: the friction law's transition region: |v| ≲ STICK_WIDTH_FACTOR × its tanh width (the prior mean
#: 0.05 rad/s when the law estimates none) — the samples whose friction torque a smooth law cannot predict
STICK_WIDTH_FACTOR = 2.0


def stick_sigma(layout, p: np.ndarray | None, v: np.ndarray, default_vs: float,
                width: np.ndarray | None = None) -> np.ndarray | None:
    """δ (N_knots, n_joints) [N·m | N] at velocities ``v`` (N_knots, n_joints) [rad/s | m/s] for the physical
    vector ``p`` in ``layout`` (its fc and, when the law has one, vs per joint; else ``default_vs``).
    ``width`` (n_joints,) [rad/s]: use it instead of vs (e.g. the velocities' noise std: the joint may be
    at rest wherever |v| is within a few of it). None when ``p`` is None or the law has no Coulomb term."""
    if p is None:
        return None
    sfx = list(layout.friction.suffixes)
    if "fc" not in sfx:
        return None
    _, pf, _ = layout.split(np.asarray(p, float))
    fc = np.abs(pf[:, sfx.index("fc")])
    vs = pf[:, sfx.index("vs")] if "vs" in sfx else np.full(layout.nj, float(default_vs))
    return stick_delta(fc, v, vs if width is None else width)


def row_factor(delta: np.ndarray, sigma_tau: np.ndarray, iv, nv: int) -> np.ndarray:
    """Weight factor (N_knots, nv) of the inverse-dynamics rows: σ_τ / √(σ_τ² + δ²) on the joints' velocity
    coordinates ``iv`` (1 elsewhere); ``sigma_tau`` (n_joints,) [N·m | N]."""
    out = np.ones((delta.shape[0], nv))
    s = np.asarray(sigma_tau, float)[None, :]
    out[:, iv] = s / np.sqrt(s ** 2 + delta ** 2)
    return out


#: ``JointSmoother(stick_weights=...)`` choices
STICK_MODES = ("law-width", "velocity-noise")


def initial_stick_sigma(smoother, layout, p_init, v0: np.ndarray, noise) -> np.ndarray | None:
    """δ at the knots for `JointSmoother` (``stick_weights``): ``"law-width"`` — the initial
    velocities ``v0`` (N_knots, n_joints) and the prior tanh width (``friction_velocity_scale``);
    ``"velocity-noise"`` — the logged velocities with the width = their noise std per joint (``noise.v``),
    ``v0`` and the law's width when the log has none."""
    mode = smoother.stick_weights
    if mode not in STICK_MODES:
        raise ValueError(f"stick_weights must be None or one of {STICK_MODES}, not {mode!r}")
    vm = getattr(smoother, "_vm", None)  # (N_knots, n_joints): fixed base, joints = velocity coordinates
    if mode == "velocity-noise" and vm is not None and noise.v is not None:
        return stick_sigma(layout, p_init, vm, smoother.friction_velocity_scale,
                           width=np.asarray(noise.v, float))
    return stick_sigma(layout, p_init, v0, smoother.friction_velocity_scale)


def stick_delta(fc: np.ndarray, v: np.ndarray, vs) -> np.ndarray:
    """The rule of `stick_sigma` on arrays: δ = |fc| · (1 − tanh²(v / (k·vs))) [N·m | N] with
    k = `STICK_WIDTH_FACTOR`; ``fc`` (n,) [N·m | N], ``v`` (N, n) [rad/s | m/s], ``vs`` scalar or (n,)
    [rad/s | m/s] (floored at 1e-6). The one formula: `stick_sigma` (layouts) and the floating looped
    fixed-state rows (`floating_loop_checks.stick_row_factor`, issue 11) call it."""
    vs = np.maximum(np.abs(np.broadcast_to(np.asarray(vs, float), np.shape(fc))), 1e-6)
    x = np.asarray(v, float) / (STICK_WIDTH_FACTOR * vs)
    return np.abs(np.asarray(fc, float)) * (1.0 - np.tanh(x) ** 2)
