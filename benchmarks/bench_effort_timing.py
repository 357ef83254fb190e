"""Effort timing (issues 11 + 9): the smoother with the logged efforts ("sample") and re-timed ("hold").

Two parts (docs/effort-timing.md; numbers in docs/benchmarks.md, "B1 knee: effort timing"):

* ``--robot R --rate HZ --duration S --noise SIGMA --seeds ...``: in-class RK4 logs of the project's
  simulator (each command held over the sample period), `JointSmoother` with ``effort_timing`` "sample"
  and "hold"; per fit the viscous-friction errors and the held-out relative RMSE at the *exact* held-out
  states (3 s noise-free log of the same robot, seed + 10: the parameters' error alone) and CPU seconds.
* ``--tiago-cv``: the blocked-CV score of each effort delay (`effort_timing.choose_delay_cv`) on the
  real TIAGo training rows 921–4799 (dead-band channels dropped, `LeastSquaresSG`'s CV window).

    nice -n 10 python benchmarks/bench_effort_timing.py --robot z1 --rate 1000 --duration 5 --noise 0.01 \
        --seeds 0 1 2
    nice -n 10 python benchmarks/bench_effort_timing.py --robot z1 --rate 1000 --duration 5 --noise 0.001 \
        --seeds 0
    nice -n 10 python benchmarks/bench_effort_timing.py --tiago-cv
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import pandas as pd

from fg_sysid.datasets.io import load_log_for_robot
from fg_sysid.datasets.simulate import simulate
from fg_sysid.estimation.baseline import LeastSquaresSG
from fg_sysid.estimation.effort_quality import drop_deadband_channels
from fg_sysid.estimation.effort_timing import choose_delay_cv
from fg_sysid.estimation.metrics import relative_rmse
from fg_sysid.estimation.smoother import JointSmoother
from fg_sysid.robots import load_robot
from fg_sysid.validation import predict_efforts

DATA = next((p / "shared" / "data" for p in Path(__file__).resolve().parents[2:4]  # as bench_external.py
             if (p / "shared" / "data").is_dir()), Path(__file__).resolve().parents[2] / "shared" / "data")


def fits(args) -> pd.DataFrame:
    robot = load_robot(args.robot)
    rows = []
    for seed in args.seeds:
        tr = simulate(robot, args.duration, args.rate, args.noise, seed)
        ho = simulate(robot, 3.0, args.rate, 0.0, seed + 10, truth=tr.truth)
        truth = tr.truth["parameters"]
        for timing in ("sample", "hold"):
            c0 = time.process_time()
            sm = JointSmoother(robot, effort_timing=timing).fit(tr.log)
            cpu = time.process_time() - c0
            res = sm.result_
            est = dict(zip(res.names, res.estimate, strict=True))
            tau = predict_efforts(res, robot, ho.truth_log.q, ho.truth_log.v, ho.truth_acceleration)
            row = {"seed": seed, "timing": timing, "exact_states_%": 100 * relative_rmse(tau, ho.log.tau),
                   "iterations": len(res.history), "cpu_s": cpu}
            row.update({f"{n}_err_%": 100 * (est[n] / truth[n] - 1) for n in truth if n.endswith(".fv")})
            rows.append(row)
            print(f"seed {seed} {timing}: exact states {row['exact_states_%']:.3f} %, {cpu:.1f} CPU s",
                  flush=True)
    return pd.DataFrame(rows)


def tiago_cv(data: Path) -> pd.DataFrame:
    robot, log = load_log_for_robot(data / "tiago_dynamic_2021-07-01.csv", "tiago")
    train, dropped = drop_deadband_channels(log.slice(921, 4800))
    filt = LeastSquaresSG().fit(train, robot).result_.filter
    d, table = choose_delay_cv(robot, train, filt["window_s"], filt["polyorder"],
                               fractions=(-2, -1.5, -1, -0.5, -0.25, 0, 0.25, 0.5, 1, 1.5, 2))
    print(f"TIAGo: SG window {filt['window_s'] * 1e3:.0f} ms, order {filt['polyorder']}; dead band dropped "
          f"{sorted(dropped)}; chosen delay {d * 1e3:.2f} ms")
    return pd.DataFrame(table)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--robot", default="z1")
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--noise", type=float, default=0.01)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--tiago-cv", action="store_true", help="the delay CV table on the real TIAGo log only")
    ap.add_argument("--data", default=str(DATA))
    args = ap.parse_args()
    pd.set_option("display.width", 250)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tab = tiago_cv(Path(args.data)) if args.tiago_cv else fits(args)
    print(tab.to_string(index=False, float_format=lambda x: f"{x:.5g}"))


if __name__ == "__main__":
    main()
