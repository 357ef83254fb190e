"""Online estimation benchmark (issue 13): latency per update, memory and end-of-log accuracy of the native
fixed-lag `OnlineEstimator` against the batch `JointSmoother` on the same log.

A simulated in-class log (seed 0) is streamed one sample per update (``--rate`` samples per second,
knots at ``--knot-rate``); the warm-up is fitted by the batch smoother and excluded from the latency
statistics. Per update: wall time and this thread's CPU time (on a shared machine the wall time includes
waiting for a core; the load average is printed). Memory: the process's peak RSS and the window buffers'
capacity. Accuracy: held-out relative RMSE of the predicted efforts (`fg_sysid.prediction.heldout_report`)
on a noise-free log of the same robot with another excitation (seed 1), for the online θ at the end of the
log and for the batch smoother fitted on the whole log.

Floating base (``--robot b1``, `online_floating.FloatingOnlineEstimator`, `run_floating`): a MuJoCo B1
sway (soft contacts: out of the estimator's rigid-contact model class) logged at 400 Hz, knots at 200 Hz
(stride 2), 0.5 s lag, fed one knot period (2 samples) per update; held-out: a sway of another amplitude
(same drawn truth), joint efforts predicted with the measured contact forces
(`floating_validation.floating_heldout_report`), online θ at the end of the log vs the batch
`FloatingBaseSmoother` on the whole log (same stride) vs the warm-up fit alone.

Out of class: ``--truth sharp`` (friction tanh width 0.005 rad/s) or ``--truth stribeck`` (Stribeck
friction), as benchmarks/bench_outofclass.py.

Usage: python benchmarks/bench_online.py [--robot z1|b1] [--duration 60] [--rate 200] [--knot-rate 200]
       [--lag 1.0] [--noise 0.01] [--truth in-class|sharp|stribeck] [--no-batch] [--floating]
       [--rss-every N] [--out benchmarks/results/online.csv]
Memory over 10 minutes: ``--duration 600 --no-batch --rss-every 2000`` (current RSS every 2000 updates, its
slope after the first minute in MB per minute of log).
"""

from __future__ import annotations

import argparse
import os
import resource
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from fg_sysid.datasets.simulate import Effects, simulate
from fg_sysid.estimation.online import OnlineEstimator
from fg_sysid.estimation.smoother import EstimationError, JointSmoother
from fg_sysid.prediction import heldout_report
from fg_sysid.robots import load_robot


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def current_rss_mb() -> float:
    """Resident set size now [MB] (``/proc/self/statm``; the peak `rss_mb` cannot show a decrease)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


#: simulated truth: (tanh width of the truth's friction [rad/s], effects) — in-class, or outside the
#: estimator's model class (as benchmarks/bench_outofclass.py)
TRUTHS = {
    "in-class": (0.05, Effects()),
    "sharp": (0.005, Effects()),
    "stribeck": (0.01, Effects(friction="stribeck", stribeck_ratio=1.5, stribeck_velocity=0.1)),
}


def run(robot_name: str, duration: float, rate: float, knot_rate: float, lag: float, noise: float,
        batch: bool, warmup: float, truth: str = "in-class", forgetting: float | None = None,
        rss_every: int = 0, rss_out: str | None = None) -> dict:
    robot = load_robot(robot_name)
    row = {"robot": robot_name, "truth": truth, "duration_s": duration, "rate_hz": rate,
           "knot_rate_hz": knot_rate, "lag_s": lag, "noise": noise, "forgetting": forgetting}
    vs, effects = TRUTHS[truth]
    try:
        est = OnlineEstimator(robot, lag=lag, knot_rate=knot_rate, warmup=warmup, forgetting=forgetting)
    except EstimationError as e:
        row["error"] = str(e)
        return row
    train = simulate(robot, duration, rate, noise, 0, friction_velocity_scale=vs, effects=effects)
    held = simulate(robot, min(duration, 10.0), rate, 0.0, 1, truth=train.truth, friction_velocity_scale=vs,
                    effects=effects)
    log = train.log
    rss, trace = [], []
    t0 = time.perf_counter()
    for i in range(log.n_samples):
        est.update(log.slice(i, i + 1))
        if i % max(int(rate), 1) == 0:
            rss.append(rss_mb())
        if rss_every and est.ready and est.n_updates_ % rss_every == 0:
            trace.append({"update": est.n_updates_, "t": float(log.t[i]), "rss_mb": current_rss_mb(),
                          "knots_in_window": int(est._chain.n)})
        if i % max(int(10 * rate), 1) == 0:
            print(f"  t = {log.t[i]:6.1f} s, {time.perf_counter() - t0:6.1f} s elapsed", flush=True)
    stats = est.stats_.table().iloc[1:]  # the first row is the warm-up's batch fit
    lat, cpu = stats["latency_s"].to_numpy() * 1e3, stats["cpu_s"].to_numpy() * 1e3
    for name, arr in (("wall", lat), ("cpu", cpu)):
        for q in (50, 95, 99):
            row[f"{name}_p{q}_ms"] = float(np.percentile(arr, q))
    row["updates"] = int(len(stats))
    row["knots_in_window_max"] = int(stats["knots_in_window"].max())
    row["buffer_capacity"] = int(est._chain.cap)
    row["rss_mb_after_warmup"] = float(rss[int(np.ceil(warmup)) + 1]) if len(rss) > warmup + 1 else np.nan
    row["rss_mb_end"] = float(rss[-1])
    row["changes_detected"] = len(getattr(est, "changes_", []))
    if trace:
        tr = pd.DataFrame(trace)
        if rss_out:
            Path(rss_out).parent.mkdir(parents=True, exist_ok=True)
            tr.to_csv(rss_out, index=False)
        late = tr[tr["t"] >= tr["t"].iloc[0] + 60.0]  # after the first minute of streaming
        late = late if len(late) > 2 else tr
        slope = np.polyfit(late["t"] / 60.0, late["rss_mb"], 1)[0]
        row.update(rss_trace_first_mb=float(tr["rss_mb"].iloc[0]),
                   rss_trace_last_mb=float(tr["rss_mb"].iloc[-1]), rss_trace_max_mb=float(tr["rss_mb"].max()),
                   rss_slope_mb_per_min=float(slope),
                   rss_samples=int(len(tr)))
    row["online_heldout"] = heldout_report(est.result(), robot, held.log)["overall"]
    row["warmup_heldout"] = heldout_report(est.smoother_.result_, robot, held.log)["overall"]
    if batch:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t1 = time.perf_counter()
            sm = JointSmoother(robot, knot_stride=est._stride).fit(log)
            row["batch_seconds"] = time.perf_counter() - t1
        row["batch_heldout"] = heldout_report(sm.result_, robot, held.log)["overall"]
        row["online_over_batch"] = row["online_heldout"] / row["batch_heldout"]
    row["load_average_1min"] = os.getloadavg()[0]
    return row


def run_floating(duration: float, lag: float, noise: float, batch: bool, warmup: float, rate: float = 400.0,
                 knot_rate: float = 200.0, seed: int = 0) -> dict:
    """The B1 row (module docstring): latency (wall and CPU) per update, memory, held-out accuracy."""
    from fg_sysid.datasets.mujoco_sim import draw_truth, simulate_stance, to_log
    from fg_sysid.estimation.floating_smoother import FloatingBaseSmoother
    from fg_sysid.estimation.online_floating import FloatingOnlineEstimator
    from fg_sysid.floating_validation import floating_heldout_report
    from fg_sysid.validation import nominal_model

    robot = load_robot("b1")
    row = {"robot": "b1", "truth": "mujoco-sway (out of class)", "duration_s": duration, "rate_hz": rate,
           "knot_rate_hz": knot_rate, "lag_s": lag, "noise": noise, "warmup_s": warmup}
    drawn = draw_truth(robot, seed)
    common = dict(inertial=drawn["inertial"], friction=(drawn["fc"], drawn["fv"]), armature=drawn["armature"])
    log = to_log(simulate_stance(robot, duration, rate, seed=seed, noise=noise, motion="sway", **common))
    held = to_log(simulate_stance(robot, 3.0, rate, seed=seed + 1000, noise=noise, motion="sway",
                                  sway_amplitude=0.14, **common))
    opts = dict(contact_radius=0.02, use_forces=False)  # as bench_floating: no force sensors
    est = FloatingOnlineEstimator(robot, lag=lag, knot_rate=knot_rate, warmup=warmup, smoother_options=opts)
    step = max(int(round(rate / knot_rate)), 1)
    rss = []
    t0 = time.perf_counter()
    for i in range(0, log.n_samples, step):
        est.update(log.slice(i, i + step))
        if i % int(rate) < step:
            rss.append(rss_mb())
        if i % int(2 * rate) < step:
            print(f"  t = {log.t[i]:6.2f} s, {time.perf_counter() - t0:6.1f} s elapsed", flush=True)
    stats = est.stats_.table().iloc[1:]  # the first row is the warm-up's batch fit
    lat, cpu = stats["latency_s"].to_numpy() * 1e3, stats["cpu_s"].to_numpy() * 1e3
    for name, arr in (("wall", lat), ("cpu", cpu)):
        for q in (50, 95, 99):
            row[f"{name}_p{q}_ms"] = float(np.percentile(arr, q))
        row[f"{name}_max_ms"] = float(arr.max())
    row["updates"] = int(len(stats))
    row["knot_period_ms"] = 1e3 * est._stride * est._dt
    row["knots_in_window_max"] = int(stats["knots_in_window"].max())
    row["buffer_capacity"] = int(est._chain.cap)
    row["rss_mb_after_warmup"] = float(rss[int(np.ceil(warmup)) + 1]) if len(rss) > warmup + 1 else np.nan
    row["rss_mb_end"] = float(rss[-1])

    def heldout(model):
        return floating_heldout_report(model, robot, held, window_s=0.05, contact_radius=0.02,
                                       mode="forces")["overall"]

    row["online_heldout"] = heldout(est.result())
    row["weak_directions_at_prior"] = est.weak_directions_
    row["warmup_heldout"] = heldout(est.smoother_.result_)
    row["nominal_heldout"] = heldout(nominal_model(robot))
    if batch:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t1 = time.perf_counter()
            sm = FloatingBaseSmoother(robot, knot_stride=est._stride, **opts).fit(log)
            row["batch_seconds"] = time.perf_counter() - t1
        row["batch_heldout"] = heldout(sm.result_)
        row["online_over_batch"] = row["online_heldout"] / row["batch_heldout"]
    row["load_average_1min"] = os.getloadavg()[0]
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--robot", default="z1")
    ap.add_argument("--duration", type=float, default=None, help="[s] (default 60; b1: 10)")
    ap.add_argument("--rate", type=float, default=None, help="log rate [Hz] (default 200; b1: 400)")
    ap.add_argument("--knot-rate", type=float, default=200.0)
    ap.add_argument("--lag", type=float, default=None, help="[s] (default 1.0; b1: 0.5)")
    ap.add_argument("--warmup", type=float, default=None, help="[s] (default 5; b1: 2)")
    ap.add_argument("--noise", type=float, default=None, help="σ on q, v, τ (default 0.01; b1: 0.005)")
    ap.add_argument("--truth", default="in-class", choices=sorted(TRUTHS))
    ap.add_argument("--no-batch", action="store_true")
    ap.add_argument("--forgetting", type=float, default=None, help="θ random-walk std per √s (default: none)")
    ap.add_argument("--floating", action="store_true", help="also the B1 row (10 s, 0.5 s lag, no batch)")
    ap.add_argument("--rss-every", type=int, default=0,
                    help="record the current RSS every N updates (memory over long logs: --duration 600); "
                         "the slope after the first minute is reported")
    ap.add_argument("--rss-out", default="benchmarks/results/online_rss.csv")
    ap.add_argument("--out", default=None,
                    help="CSV (default benchmarks/results/online.csv; b1: online_b1.csv)")
    a = ap.parse_args()
    def arg(x, fixed, floating):
        return x if x is not None else (floating if a.robot == "b1" else fixed)

    if a.robot == "b1":  # floating base: its own defaults (10 s sway at 400 Hz, 2 s warm-up, 0.5 s lag)
        rows = [run_floating(arg(a.duration, 60.0, 10.0), arg(a.lag, 1.0, 0.5), arg(a.noise, 0.01, 0.005),
                             not a.no_batch, arg(a.warmup, 5.0, 2.0), arg(a.rate, 200.0, 400.0), a.knot_rate)]
    else:
        rows = [run(a.robot, arg(a.duration, 60.0, 10.0), arg(a.rate, 200.0, 400.0), a.knot_rate,
                    arg(a.lag, 1.0, 0.5), arg(a.noise, 0.01, 0.005), not a.no_batch, arg(a.warmup, 5.0, 2.0),
                    a.truth, a.forgetting, a.rss_every, a.rss_out)]
    if a.floating:
        rows.append(run_floating(10.0, 0.5, 0.005, False, 2.0))
    df = pd.DataFrame(rows)
    a.out = a.out or f"benchmarks/results/online{'_b1' if a.robot == 'b1' else ''}.csv"
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(a.out, index=False)
    with pd.option_context("display.max_columns", None, "display.width", 200):
        print(df.T.to_string())


if __name__ == "__main__":
    main()
