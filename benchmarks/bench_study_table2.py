"""Paper 004 Table II protocol with `fg-sysid study` (examples/studies/table2.yaml): ID-SG vs energy-LS vs
the smoother under noise σ, on out-of-class truth (simulated friction tanh scale 0.02 rad/s, estimators
0.05 rad/s). Prints the medians over seeds beside paper 004's numbers (their "parameter error"); the inertial
error over all parameters and over the base parameters (identifiable combinations, `study.base_parameters`).

    nice -n 10 python benchmarks/bench_study_table2.py [--out DIR] [--workers N] [--seeds K]

Resumable: rerunning with the same --out skips finished runs.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd
import yaml

from fg_sysid.study import load_config, parse_config, run_study

PAPER = {  # paper 004 Table II: parameter error, ID (tuned SG) / Energy / Ours
    0.0: (3.5, 6.5, 2.0), 0.005: (9.5, 8.0, 2.3), 0.01: (22.0, 12.5, 2.8), 0.1: (95.0, 38.0, 6.0)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="bench-study-table2")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seeds", type=int, default=None, help="seeds 0..K-1 instead of the config's")
    args = ap.parse_args()
    path = Path(__file__).resolve().parents[1] / "examples" / "studies" / "table2.yaml"
    if args.seeds is None:
        cfg = load_config(path)
    else:  # seeds 0 .. K-1 (fewer or more than the config's); same run ids, so an --out is reused
        raw = yaml.safe_load(path.read_text())
        cfg = parse_config({**raw, "seeds": {"count": int(args.seeds)}}, str(path))
    t0 = time.perf_counter()
    counts = run_study(cfg, args.out, workers=args.workers)
    rows = counts.pop("results")
    print(f"{counts} in {time.perf_counter() - t0:.0f} s")
    ok = rows[rows.status == "ok"]
    failed = rows[rows.status != "ok"]
    if len(failed):
        print("failed runs:\n" + failed[["run_id", "error"]].to_string(index=False))
    metrics = ["heldout_rmse", "inertial_error", "inertial_base_error", "friction_error"]
    med = ok.groupby(["noise", "method"])[metrics].median()
    n = ok.groupby(["noise", "method"]).size().rename("runs")
    table = (100 * med).round(2).join(n).unstack("method")
    pd.set_option("display.width", 200)
    print("medians over seeds [%] (held-out effort RMSE, inertial error over all 60 parameters and over the "
          "base parameters, friction error):")
    print(table.to_string())
    per_seed = (100 * ok.pivot_table(index=["noise", "seed"], columns="method",
                                     values="inertial_base_error")).round(2)
    print("base-parameter error per seed [%]:")
    print(per_seed.to_string())
    print("paper 004 Table II, parameter error [%] (ID tuned SG / Energy / Ours):")
    for s, v in PAPER.items():
        print(f"  sigma {s:<6g} {v[0]:5.1f} {v[1]:5.1f} {v[2]:5.1f}")


if __name__ == "__main__":
    main()
