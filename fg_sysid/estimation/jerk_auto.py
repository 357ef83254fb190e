"""``acceleration_process="auto"``: the white-jerk rows only where the accelerations absorbed the effort
noise (issue 9, session 9).

The default objective leaves the knot accelerations' Nyquist band free (`acceleration_process`: the
trapezoid integration rows cannot see a_k = (−1)^k c), so on noisy or real logs the fitted accelerations
follow the effort noise through M(q) a_k ≈ τ̂_k. The white-jerk rows fix that, but they smooth fast true
changes of the acceleration (sharp friction, a high-gain controller held zero-order) on precise logs,
where the default is the better model. "auto" fits the default, measures on the training log alone
whether the absorption happened, and only then refits with the rows (warm start from the first fit).

The diagnostic (rule fixed before any held-out number was looked at; docs/damping.md):

    R_j = RMS_k( (a_{k−1} − 2 a_k + a_{k+1}) / 4 ) / s_{a,j}      [dimensionless]

the RMS of the fitted knot acceleration's Nyquist-band component of joint j (the second difference /
4 returns the alternating mode (−1)^k c with gain 1 and a smooth motion with gain ≈ (ω h)² / 4 ≈ 0)
over the motion's RMS acceleration s_a (noise removed: `acceleration_scale`, the process noise's scale).
Physical reading: a log is sampled above its motion's bandwidth, so a physical acceleration has almost
no energy at the sampling Nyquist frequency; R_j > 1 says that joint's fitted acceleration carries
more alternating content than the whole motion has acceleration — noise put there by the fit, not
motion. The rule fires when the median of R_j over the joints with measured efforts exceeds
``THRESHOLD`` = 1. Recorded with it (not used by the rule): the inverse-dynamics rows' redundancy
fraction (rows − tr H)/rows (`noise_balance.term_balance`; ≈ 1 when the states do not absorb the
effort noise) and the lag-1 autocorrelation of a − a_SG (the fitted minus the initial Savitzky–Golay
accelerations; ≈ −1 for the alternating mode).
"""

from __future__ import annotations

import time

import numpy as np

from .noise import savgol_derivatives

__all__ = ["THRESHOLD", "absorption_diagnostic", "fit_auto", "noisy_refit_law"]

#: the rule fires when the median joint's Nyquist-band RMS of the fitted a exceeds this × the motion's RMS a
THRESHOLD = 1.0
#: also record the inverse-dynamics rows' redundancy fraction (hat trace: 4 extra O(N) solves, ~15 % of a
#: 20 s / 1 kHz default fit's CPU); not used by the rule, so off in `fit_auto` unless set (benchmarks)
RECORD_BALANCE = False


def nyquist_ratio(a, s_a) -> np.ndarray:
    """R_j (module doc) of knot accelerations ``a`` (N, n) [rad/s²] against the motion's RMS
    acceleration ``s_a`` (n,) [rad/s²]; NaN for N < 3."""
    a = np.asarray(a, float)
    if a.shape[0] < 3:
        return np.full(a.shape[1], np.nan)
    hf = 0.25 * (a[:-2] - 2.0 * a[1:-1] + a[2:])
    return np.sqrt(np.mean(hf ** 2, axis=0)) / np.maximum(np.asarray(s_a, float), 1e-12)


def _lag1(x) -> np.ndarray:
    x = np.asarray(x, float) - np.mean(x, axis=0)
    num = np.sum(x[1:] * x[:-1], axis=0)
    den = np.sum(x ** 2, axis=0)
    return np.where(den > 0, num / np.maximum(den, 1e-300), np.nan)


def absorption_diagnostic(smoother, balance: bool = True, probes: int = 4) -> dict:
    """Whether a fitted fixed-base `JointSmoother`'s accelerations absorbed the effort noise (module doc).

    Returns a JSON-ready dict: ``fires`` (bool), ``value`` (median R_j over joints with measured
    efforts), ``threshold``, ``nyquist_ratio`` (R_j per joint), ``lag1_a_minus_sg`` (per joint),
    ``id_redundancy_fraction`` (None when ``balance`` is False or `term_balance` cannot take the
    problem), ``seconds`` (CPU of the rule's diagnostic) and ``balance_seconds`` (CPU of the hat trace)."""
    c0 = time.process_time()
    iv = smoother.robot.joint_index_v()
    a = np.asarray(smoother.states_[2], float)[:, iv]
    s_a = getattr(smoother, "_motion_a_rms", None)
    filt = smoother.init_filter_
    a_sg = savgol_derivatives(smoother.knot_times_, np.asarray(smoother._qm, float),  # per joint (log.q)
                              filt["window_s"], filt["polyorder"])[2]
    if s_a is None or np.size(s_a) != a.shape[1]:
        s_a = np.sqrt(np.mean(a_sg ** 2, axis=0))
    ratio = nyquist_ratio(a, s_a)
    measured = np.any(smoother._tau_mask[:, iv], axis=0)
    value = float(np.nanmedian(ratio[measured])) if np.any(measured) else float("nan")
    red, cpu_rule = None, time.process_time() - c0
    if balance:
        from .noise_balance import term_balance

        try:
            df = term_balance(smoother.problem_, smoother.states_, smoother.result_.theta,
                              probes=probes).set_index("term")
            if "inverse_dynamics" in df.index:
                row = df.loc["inverse_dynamics"]
                red = float(row["redundancy"] / max(row["rows"], 1))
        except ValueError:
            red = None
    return {"fires": bool(np.isfinite(value) and value > THRESHOLD), "value": value, "threshold": THRESHOLD,
            "nyquist_ratio": ratio.tolist(), "lag1_a_minus_sg": _lag1(a - a_sg).tolist(),
            "id_redundancy_fraction": red, "seconds": cpu_rule,
            "balance_seconds": time.process_time() - c0 - cpu_rule if balance else 0.0}


def early_rule(smoother):
    """The rule of this module evaluated after every accepted step of the first fit (``fn(x, θ) -> bool``
    for `LevenbergMarquardt.stop_rule`): True once the median joint's R exceeds `THRESHOLD`. R grows as the
    fit converges (the accelerations take up the effort noise step by step: Z1 σ = 0.1 1.9 → 3.3, TIAGo
    9.8 → 27.4 over 67 iterations, Z1 σ = 0.01 0.10 → 0.39; session 10), so a first fit that crosses the
    threshold would end above it: the decision is made there and the refit starts at once."""
    iv = smoother.robot.joint_index_v()

    def rule(x, theta) -> bool:
        s_a = getattr(smoother, "_motion_a_rms", None)
        measured = np.any(smoother._tau_mask[:, iv], axis=0)
        if s_a is None or not np.any(measured):
            return False
        r = nyquist_ratio(np.asarray(x[2], float)[:, iv], s_a)
        return bool(np.nanmedian(r[measured]) > THRESHOLD)

    return rule


def noisy_refit_law(smoother, layout, theta) -> tuple[str, np.ndarray]:
    """``("stribeck6", θ)`` for the refit of a `CoulombViscousLead` fit (friction="auto") whose knot
    accelerations absorbed the effort noise (issue 9, sessions 10–11).

    The lead T is timed by the knot accelerations; where they absorbed the noise (this module's rule
    fires) T only fits that noise (Z1 σ = 0.1: T of −10 … +18 ms, held-out Stribeck 1.87 → 2.74 %), so the
    refit drops it. It fits `Stribeck6` instead of the tanh law: at that noise level the selection's
    regression cannot see a Stribeck peak (its CV gain is inside the noise), while `stribeck6` nests the
    tanh law and costs little where there is none — measured on 20 s / 1 kHz σ = 0.1 logs
    (docs/friction-selection.md): Z1 Stribeck truth 1.93 → 1.04 % held out, in class 0.320 → 0.334 %,
    sharp 0.384 → 0.433 %, MuJoCo 0.982 → 0.973 %.

    θ: the first fit's inertias, armature and actuation; friction from the selection's Stribeck
    regression (`friction_select.stribeck_physical`)."""
    from ..layout import ParameterLayout
    from .friction_select import stribeck_physical

    law = "stribeck6"
    new = ParameterLayout.create(layout.robot, layout.inertia, law, layout.friction.velocity_scale,
                                 fit_friction=layout.fit_friction, fit_armature=layout.fit_armature,
                                 actuation=layout.actuation)
    p_new = stribeck_physical(smoother.friction_selection_, layout.robot, new)
    p = layout.to_physical(theta)
    for s_old, s_new in ((layout.s_inertial, new.s_inertial), (layout.s_armature, new.s_armature),
                         (layout.s_actuation, new.s_actuation)):
        p_new[s_new] = p[s_old]
    return law, new.to_theta(p_new)


def fit_auto(smoother, log):
    """`JointSmoother._fit` with ``acceleration_process="auto"``: the default fit; if
    `absorption_diagnostic` fires, a refit with the white-jerk rows (``acceleration_process=True``) from
    the first fit's q, v and θ, with the initial SG accelerations.
    ``result_.noise["acceleration_process_auto"]`` (summary.json's noise section) records the choice, the
    diagnostic and the first fit's iterations;
    ``acceleration_auto_first_`` keeps the first fit's result (benchmarks)."""
    smoother.acceleration_process = False
    c0 = time.process_time()
    rows_possible = not smoother.robot.loops and smoother.dynamics == "inverse"
    law = smoother.friction
    try:
        smoother._stop_rule = early_rule(smoother) if rows_possible else None
        smoother._fit(log)
        smoother._stop_rule = None
        stopped = bool(smoother._lm.stopped)
        first = smoother.result_
        cpu_first = time.process_time() - c0
        smoother.acceleration_auto_first_ = first
        diag = absorption_diagnostic(smoother, balance=RECORD_BALANCE) if rows_possible else {
            "fires": False, "value": None, "threshold": THRESHOLD,
            "reason": "closed loops / forward dynamics: no white-jerk rows"}
        val = "n/a" if diag["value"] is None else f"{diag['value']:.3g}"
        smoother._log(f"acceleration process auto: Nyquist-band a / motion a = {val} "
                      f"(threshold {THRESHOLD:g}): rows {'on' if diag['fires'] else 'off'}")
        if diag["fires"]:
            smoother.acceleration_process = True
            theta = np.array(first.theta, copy=True)
            if getattr(smoother, "_auto_lead", False):  # friction="auto"'s lead law: no lead in the refit
                smoother.friction, theta = noisy_refit_law(smoother, first.layout, theta)
            # q, v and θ of the first fit; its accelerations carry the absorbed noise the rows are about to
            # remove (the refit's first cost ~1e12 on the Z1 at σ = 0.1): start a from the SG filter instead
            # (session 10: 28 → 15 refit iterations there, exact-state error 1.004 → 1.000 %)
            q, v, a = (np.array(s, copy=True) for s in smoother.states_)
            iv = smoother.robot.joint_index_v()
            filt = smoother.init_filter_
            a[:, iv] = savgol_derivatives(smoother.knot_times_, np.asarray(smoother._qm, float),
                                          filt["window_s"], filt["polyorder"])[2]
            smoother._warm_start = ((q, v, a), theta)
            smoother._fit(log)
    finally:
        smoother.acceleration_process = "auto"
        smoother._warm_start = None
        smoother._stop_rule = None
        smoother.friction = law
    rec = {"chosen": "on" if diag["fires"] else "off", **diag,
           "first_fit": {"iterations": len(first.history), "converged": bool(first.converged),
                         "cpu_seconds": cpu_first, "stopped_at_threshold": stopped},
           "rule": "rows on when the median joint's RMS Nyquist-band knot acceleration exceeds "
                   f"{THRESHOLD:g} x the motion's RMS acceleration"}
    smoother.result_.noise["acceleration_process_auto"] = rec
    smoother.acceleration_auto_ = rec
    return smoother
