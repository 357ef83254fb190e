"""Online estimation with GTSAM's fixed-lag smoothers (issue 13 item 3): latency per update.

For each robot: an in-class simulated log at 200 Hz (seed 0, noise 0.01), the first ``--warmup`` seconds
fitted by the batch smoother, then one sample per `update` (200 Hz knots, ``--lag`` s window).
Back ends on the same stream: `GtsamFixedLagEstimator` with iSAM2 (`IncrementalFixedLagSmoother`,
Gauss–Newton, default relinearization thresholds), iSAM2 with dogleg, the batch fixed-lag smoother
(Levenberg–Marquardt over the window every update; only ``--batch-updates`` updates, it is slow), and the
native `OnlineEstimator` when `fg_sysid.estimation.online` is importable. Printed per back end: process CPU
time per update p50/p95/p99 [ms] (what an update costs; the wall time on a shared machine is mostly waiting
for a core) and wall p50/p99, over the streamed updates (warm-up call excluded), mean knots in the window, the
held-out relative torque error of the final θ (noise-free held-out log of the same robot, seed 1).
Latency depends on the machine's load: the table records `os.getloadavg()` at the start.

Usage: python benchmarks/bench_online_gtsam.py [--robots z1 panda] [--stream 3] [--warmup 2] [--lag 1]
       [--batch-updates 30] [--out benchmarks/results/online_gtsam.csv]
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from fg_sysid.datasets.simulate import simulate
from fg_sysid.estimation.gtsam_online import GtsamFixedLagEstimator
from fg_sysid.estimation.metrics import relative_rmse
from fg_sysid.robots import load_robot
from fg_sysid.validation import predict_efforts

RATE = 200.0


def _stream(est, log, max_updates=None):
    n = 0
    for i in range(log.n_samples):
        out = est.update(dict(t=log.t[i:i + 1], q=log.q[i:i + 1], v=None if log.v is None else log.v[i:i + 1],
                              tau=log.tau[i:i + 1]))
        if out.ready:
            n += 1
            if max_updates is not None and n > max_updates:
                break
    return est


def _native(robot, lag, warmup):
    try:
        from fg_sysid.estimation.online import OnlineEstimator
    except ImportError:
        return None
    return OnlineEstimator(robot, lag=lag, knot_rate=RATE, warmup=warmup)


def run(robot_name: str, stream: float, warmup: float, lag: float, batch_updates: int) -> list[dict]:
    robot = load_robot(robot_name)
    sim = simulate(robot, warmup + stream, RATE, 0.01, 0)
    held = simulate(robot, 2.0, RATE, 0.0, 1, truth=sim.truth)
    h = held.truth_log
    backends = {
        "gtsam-isam2 (GN)": lambda: GtsamFixedLagEstimator(robot, lag=lag, knot_rate=RATE, warmup=warmup),
        "gtsam-isam2 (dogleg)": lambda: GtsamFixedLagEstimator(robot, lag=lag, knot_rate=RATE, warmup=warmup,
                                                               dogleg=True),
        "gtsam-batch (LM)": lambda: GtsamFixedLagEstimator(robot, lag=lag, knot_rate=RATE, warmup=warmup,
                                                           smoother="batch"),
        "native": lambda: _native(robot, lag, warmup),
    }
    rows = []
    for name, make in backends.items():
        est = make()
        if est is None:
            continue
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _stream(est, sim.log, batch_updates if "batch" in name else None)
        wall = time.perf_counter() - t0
        stats = est.stats_
        if isinstance(stats, dict):  # GtsamFixedLagEstimator
            lat, cpu, knots = stats["latency_s"], stats["cpu_s"], stats["knots"]
        else:  # native OnlineEstimator
            lat, cpu, knots = stats.latency, stats.cpu, stats.knots_in_window
        lat, cpu = np.asarray(lat, float) * 1e3, np.asarray(cpu, float) * 1e3
        err = relative_rmse(predict_efforts(est.result(), robot, h.q, h.v, held.truth_acceleration), h.tau)
        rows.append({"robot": robot_name, "backend": name, "updates": lat.size,
                     "cpu_p50_ms": np.percentile(cpu, 50), "cpu_p95_ms": np.percentile(cpu, 95),
                     "cpu_p99_ms": np.percentile(cpu, 99), "wall_p50_ms": np.percentile(lat, 50),
                     "wall_p99_ms": np.percentile(lat, 99), "knots": float(np.mean(knots)),
                     "heldout_rel_rmse": err, "wall_s": wall})
        print(pd.DataFrame(rows[-1:]).to_string(index=False, float_format="%.3g"), flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--robots", nargs="+", default=["z1", "panda"])
    ap.add_argument("--stream", type=float, default=3.0, help="seconds streamed after the warm-up")
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--lag", type=float, default=1.0)
    ap.add_argument("--batch-updates", type=int, default=30)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    load = os.getloadavg()[0]
    print(f"load average at start: {load:.1f} on {os.cpu_count()} cores", flush=True)
    rows = []
    for r in a.robots:
        rows += run(r, a.stream, a.warmup, a.lag, a.batch_updates)
    df = pd.DataFrame(rows)
    df["load_avg"] = load
    gn = df[df.backend == "gtsam-isam2 (GN)"].set_index("robot")
    for other in ("gtsam-batch (LM)", "native"):
        o = df[df.backend == other].set_index("robot")
        for robot in o.index.intersection(gn.index):
            r50 = gn.cpu_p50_ms[robot] / o.cpu_p50_ms[robot]
            r99 = gn.cpu_p99_ms[robot] / o.cpu_p99_ms[robot]
            print(f"{robot}: CPU p50 / p99 gtsam-isam2 (GN) / {other} = {r50:.2f} / {r99:.2f}")
    print(df.to_string(index=False, float_format="%.3g"))
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        df.to_csv(a.out, index=False)


if __name__ == "__main__":
    main()
