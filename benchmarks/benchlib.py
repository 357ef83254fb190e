"""Shared helpers of the held-out benchmarks (bench_outofclass.py, bench_external.py).

One fit per *method* through the code path of ``fg-sysid identify`` (`run_identification`), the fitted
model as its ``model.json`` dict (`model_spec`), and held-out efforts through the code path of
``fg-sysid predict``: velocities = the log's, accelerations = Savitzky–Golay second derivative of q with
the window the training log's cross-validation chose (`heldout_accelerations`), efforts =
`predict_efforts` of the model dict. Adding a method (e.g. an estimator option under test) is one
entry in `METHODS`.
"""

from __future__ import annotations

import time
import warnings

import numpy as np

from fg_sysid.cli.identify import run_identification
from fg_sysid.knot_worker import worker_cpu_seconds
from fg_sysid.validation import heldout_accelerations, model_spec, nominal_model, predict_efforts


def best(fn, repeat: int) -> float:
    """Wall seconds of the fastest of ``repeat`` calls of ``fn()`` (kernel timings)."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


#: method name -> (method, estimator options) of `run_identification` (None: the nominal URDF model, no fit).
METHODS = {
    "smoother": ("smoother", {}),  # = fg-sysid identify's default (friction coulomb-viscous-scale)
    "smoother-auto": ("smoother", {"friction": "auto"}),  # issue 9 item 3: --friction auto (opt-in)
    "smoother+energy": ("smoother", {"energy": True}),
    "smoother-fd": ("smoother", {"dynamics": "forward"}),  # paper 004 Fig. 10 (issue 12)
    "smoother-vs0.01": ("smoother", {"friction_velocity_scale": 0.01}),
    "smoother-vs-estimated": ("smoother", {"friction": "coulomb-viscous-scale"}),
    "smoother-fixed-width": ("smoother", {"friction": "coulomb-viscous"}),  # the default before session 4
    "smoother+actuation": ("smoother", {"fit_actuation": ("gain", "offset")}),  # --fit-actuation gain,offset
    # process noise = 0.3 x RMS acceleration per step alone: the default before issue 9's process_noise
    "smoother-process-fraction": ("smoother", {"process_from_log": False}),
    "smoother-pf0.01": ("smoother", {"process_from_log": False, "process_fraction": 0.01}),
    "smoother-pf0.03": ("smoother", {"process_from_log": False, "process_fraction": 0.03}),
    "smoother-stribeck6": ("smoother", {"friction": "stribeck6"}),  # issue 9 item 3
    # issue 9 session 10: MuJoCo's frictionloss law exactly (clip of v + T·a)
    "smoother-softdry": ("smoother", {"friction": "soft-dry", "friction_velocity_scale": 0.01}),
    "smoother-lead": ("smoother", {"friction": "coulomb-viscous-lead"}),  # issue 9 s10: friction of v + T·a
    "default-lead-per-joint": ("smoother", {"friction": "auto", "acceleration_process": "auto",
                                           "friction_lead": "per-joint"}),
    # = fg-sysid identify with every default (friction auto, acceleration_process auto, log-Cholesky)
    "default": ("smoother", {"friction": "auto", "acceleration_process": "auto"}),
    # the default before session 10 where auto keeps the Coulomb–viscous family (no lead T)
    "default-nolead": ("smoother", {"friction": "coulomb-viscous-scale", "acceleration_process": "auto"}),
    # issue 9 session 11: stribeck6 with the other defaults (the σ = 0.1 candidate where the lead is dropped)
    "default-stribeck6": ("smoother", {"friction": "stribeck6", "acceleration_process": "auto"}),
    "smoother-cvs": ("smoother", {"friction": "coulomb-viscous-scale"}),  # the default before friction="auto"
    # issue 9 session 12: every default but θ steps taken as θ + δθ (the default before session 12)
    "default-additive": ("smoother", {"friction": "auto", "acceleration_process": "auto",
                                      "theta_steps": "additive"}),
    # issue 9 session 13: every default on one core (n_jobs=1: the default before session 13)
    "default-1core": ("smoother", {"friction": "auto", "acceleration_process": "auto", "n_jobs": 1}),

    # issue 9, session 7 (TIAGo): the defaults before it, one at a time, and the robust/offset options
    "smoother-line-search": ("smoother", {"strategy": "line-search"}),
    "smoother-keep-deadband": ("smoother", {"deadband_zero_fraction": 1.0}),  # (None is dropped)
    "smoother-session6": ("smoother", {"strategy": "line-search", "deadband_zero_fraction": 1.0}),
    "smoother+huber": ("smoother", {"robust": "huber"}),
    "smoother+offset": ("smoother", {"fit_actuation": ("offset",)}),
    "smoother-trust-region": ("smoother", {"strategy": "trust-region"}),  # opt-in (TIAGo converges)
    "smoother-hybrid": ("smoother", {"strategy": "hybrid"}),  # issue 9 session 8: --damping hybrid (opt-in)
    "smoother+stick": ("smoother", {"stick_weights": "law-width"}),  # issue 9 session 8: `arm_stick`
    "smoother+stick-noise": ("smoother", {"stick_weights": "velocity-noise"}),
    "smoother-auto+stick-noise": ("smoother", {"friction": "auto", "stick_weights": "velocity-noise"}),
    # issue 9 session 9: the white-jerk acceleration rows (opt-in), and both objectives run to convergence
    "smoother+jerk": ("smoother", {"acceleration_process": True}),
    "smoother+jerk-converged": ("smoother", {"acceleration_process": True, "strategy": "hybrid",
                                             "max_iterations": 200}),
    "smoother-converged": ("smoother", {"strategy": "hybrid", "max_iterations": 200}),
    # issue 9 session 9: the rows only where the default fit's accelerations absorbed the effort noise
    # (`jerk_auto`; the default of fg-sysid identify on fixed-base open chains)
    "smoother+jerk-auto": ("smoother", {"acceleration_process": "auto"}),
    # issues 11 + 9 (effort timing): efforts re-timed to the knots, `effort_timing` (--effort-timing)
    "smoother+hold": ("smoother", {"effort_timing": "hold"}),  # held over the sample period
    "smoother+hold4k": ("smoother", {"effort_timing": "hold", "effort_hold_period": 1 / 4000}),  # 4 kHz ctrl
    "smoother+delay-cv": ("smoother", {"effort_timing": "cv"}),  # delay chosen by blocked CV
    "ls-sg": ("ls-sg", {}),
    "nominal": None,
}
DEFAULT_METHODS = ("smoother", "ls-sg", "nominal")


def check_methods(names) -> list[str]:
    bad = [m for m in names if m not in METHODS]
    if bad:
        raise SystemExit(f"unknown method(s) {bad}; choices: {', '.join(METHODS)}")
    return list(names)


def fit(method: str, robot, log, robot_source: str, sg_filter: dict | None = None,
        nominal: np.ndarray | None = None) -> dict:
    """Fit ``method`` on ``log``. Returns ``model`` (the model.json dict, or the nominal parameter vector),
    ``sg_filter`` (the held-out SG window: the fit's own, else ``sg_filter``, else 50 ms cubic),
    ``seconds`` (wall), ``cpu_seconds`` (this process's CPU time plus its `knot_worker` process's: the
    cost on a shared machine),
    ``iterations``, ``converged`` and ``consistent`` (physically consistent bodies)."""
    entry = METHODS[method]
    if entry is None:
        p = nominal_model(robot) if nominal is None else np.asarray(nominal, float)
        return {"model": p, "sg_filter": dict(sg_filter or {}), "seconds": 0.0, "cpu_seconds": 0.0,
                "iterations": 0,
                "converged": None, "consistent": None, "result": None}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0, c0 = time.perf_counter(), time.process_time() + worker_cpu_seconds()
        name, options = entry
        result, filt, _ = run_identification(robot, log, name, options, verbose=False)
        secs, cpu = time.perf_counter() - t0, time.process_time() + worker_cpu_seconds() - c0
    vs = options.get("friction_velocity_scale", 0.05)
    spec = model_spec(result, robot, robot_source, sg_filter=filt, velocity_scale=vs)
    if hasattr(result, "consistency_problems"):
        consistent = not result.consistency_problems()
        iterations, converged = len(result.history), bool(result.converged)
    else:
        consistent = bool(result.physical_consistency.get("consistent", False))
        iterations, converged = 0, True
    return {"model": spec, "sg_filter": dict(filt), "seconds": secs, "cpu_seconds": cpu,
            "iterations": iterations,
            "converged": converged, "consistent": consistent, "result": result}


def predict(fitted: dict, robot, log) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(tau_pred, v, a)`` on ``log`` by the ``fg-sysid predict`` path with the fit's SG window."""
    filt = fitted.get("sg_filter") or {}
    v, a, _ = heldout_accelerations(log, filt.get("window_s"), filt.get("polyorder"))
    return predict_efforts(fitted["model"], robot, log.q, v, a), v, a


def sg_of(fits: dict) -> dict:
    """The SG filter of the first fitted method (the nominal model's held-out filter)."""
    for f in fits.values():
        if f.get("sg_filter"):
            return f["sg_filter"]
    return {}


def fit_all(methods, robot, log, robot_source: str, nominal=None, progress: str = "") -> dict:
    """Fit every method (nominal last, with the first fitted method's SG window)."""
    fits = {}
    for m in sorted(methods, key=lambda m: METHODS[m] is None):
        fits[m] = fit(m, robot, log, robot_source, sg_filter=sg_of(fits), nominal=nominal)
        if METHODS[m] is not None:
            print(f"  {progress}{m}: {fits[m]['seconds']:.1f} s wall, {fits[m]['cpu_seconds']:.1f} s CPU, "
                  f"{fits[m]['iterations']} iterations", flush=True)
    return fits
