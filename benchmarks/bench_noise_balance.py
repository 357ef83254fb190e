"""Noise balance (issue 9 item 4): whitened χ² per factor term at the smoother's solution, per redundancy.

For each case the fixed-base smoother is fitted (`fg-sysid identify` options; `--variants` adds
estimator options under test, entries of `VARIANTS`) and `fg_sysid.estimation.noise_balance.term_balance`
prints, per term (encoders, velocities, inverse dynamics, integration, parameter prior), the rows, χ², the
redundancy r_i = rows − tr(H_ii) (Hutchinson, 4 probes) and χ²/r_i (≈ 1 when the term's σ matches what
its residuals show; < 1: σ too large, > 1: too small). With ``--per-joint`` also per residual column.

Cases: ``z1-in-class`` (RK4 simulator, the estimator's own model class, σ = 0.01 on q, v, τ),
``z1-mujoco`` (MuJoCo arm: dry friction with stiction, 4 kHz controller; out of class), ``z1-sharp``
(RK4, friction velocity scale 0.005 rad/s; out of class), ``tiago`` (real TIAGo arm, the training block
of bench_external.py).

Usage: python benchmarks/bench_noise_balance.py [--cases z1-in-class z1-mujoco tiago] [--duration 10]
       [--variants default] [--per-joint] [--out benchmarks/results/noise_balance.csv]
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from bench_external import TIAGO_TRAIN
from bench_outofclass import simulate_truth

from fg_sysid.datasets.io import load_log_for_robot
from fg_sysid.estimation.noise_balance import term_balance
from fg_sysid.estimation.smoother import JointSmoother
from fg_sysid.robots import load_robot

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
#: variant name -> JointSmoother keyword arguments
VARIANTS = {
    "default": {},
    "actuation": {"fit_actuation": ("gain", "offset")},
}
CASES = ("z1-in-class", "z1-mujoco", "z1-sharp", "tiago")


def load_case(name: str, duration: float):
    if name == "tiago":
        data = DATA if DATA.is_dir() else Path("/work/shared/data")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            robot, log = load_log_for_robot(data / "tiago_dynamic_2021-07-01.csv", "tiago")
        return robot, log.slice(*TIAGO_TRAIN)
    robot = load_robot("z1")
    truth = {"z1-in-class": "in-class", "z1-mujoco": "mujoco", "z1-sharp": "sharp"}[name]
    return robot, simulate_truth(robot, truth, duration, 1000.0, 0.01, 0).log


def run(case: str, variant: str, duration: float, per_joint: bool) -> pd.DataFrame:
    robot, log = load_case(case, duration)
    t0, c0 = time.perf_counter(), time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sm = JointSmoother(robot, **VARIANTS[variant]).fit(log)
    fit_s, cpu = time.perf_counter() - t0, time.process_time() - c0
    t1 = time.perf_counter()
    df = term_balance(sm.problem_, sm.states_, sm.result_.theta, columns=per_joint)
    print(f"[{case} {variant}] fit {fit_s:.0f} s wall / {cpu:.0f} s CPU ({len(sm.result_.history)} "
          f"iterations), balance {time.perf_counter() - t1:.0f} s; σ_τ used: "
          f"{np.array2string(np.asarray(sm.noise_.tau), precision=3)}", flush=True)
    return df.assign(case=case, variant=variant, knots=int(sm.result_.knots))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", nargs="+", default=["z1-in-class", "z1-mujoco", "tiago"], choices=CASES)
    ap.add_argument("--variants", nargs="+", default=["default"], choices=list(VARIANTS))
    ap.add_argument("--duration", type=float, default=10.0, help="simulated training log [s]")
    ap.add_argument("--per-joint", action="store_true", help="also one row per residual column")
    ap.add_argument("--out", default="benchmarks/results/noise_balance.csv")
    args = ap.parse_args()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    frames = []
    for case in args.cases:
        for variant in args.variants:
            frames.append(run(case, variant, args.duration, args.per_joint))
            pd.concat(frames).to_csv(out, index=False)
    df = pd.concat(frames)
    print("\nχ² / redundancy per term at the solution (≈ 1: the term's σ matches its residuals):")
    wide = df.pivot_table(index="term", columns=["case", "variant"], values="chi2_per_dof", sort=False)
    print(wide.round(3).to_markdown())
    print("\nχ² per row (no redundancy correction):")
    print(df.pivot_table(index="term", columns=["case", "variant"], values="chi2_per_row",
                         sort=False).round(3).to_markdown())
    print("\nredundancy / rows:")
    print(df.assign(frac=df.redundancy / df.rows).pivot_table(
        index="term", columns=["case", "variant"], values="frac", sort=False).round(3).to_markdown())
    print(f"\nrows in {out}")


if __name__ == "__main__":
    main()
