"""Accuracy benchmark (issue 2): held-out torque error and base-parameter error on simulated arms.

For each robot and noise level: a 20 s training log at 1 kHz (seed 0) and a noise-free held-out log of the
same robot with another excitation (seed 1). Compared, with default settings: the joint smoother
(`fg-sysid identify`), the cross-validated LS-SG baseline (`--method ls-sg`) and the nominal URDF.

    held-out relative RMSE = sqrt(mean((τ_pred − τ_true)²)) / sqrt(mean(τ_true²))   (all joints, samples)
    base-parameter error   = ‖K(p̂ − p)‖ / ‖K p‖ with K the QR base-parameter map (metrics.py)

Usage: python benchmarks/bench_accuracy.py [--robots z1 panda] [--noises 0 0.005 0.01 0.1]
       [--duration 20] [--rate 1000] [--out benchmarks/results/accuracy.csv]
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from fg_sysid.datasets.simulate import simulate
from fg_sysid.estimation.baseline import LeastSquaresSG, predict_torque
from fg_sysid.estimation.metrics import base_parameter_error, relative_rmse
from fg_sysid.estimation.smoother import JointSmoother
from fg_sysid.factors.inverse_dynamics import InverseDynamicsResidual
from fg_sysid.robots import load_robot


def run(robot_name: str, noise: float, duration: float, rate: float, heldout: float) -> list[dict]:
    robot = load_robot(robot_name)
    train = simulate(robot, duration, rate, noise, 0)
    held = simulate(robot, heldout, rate, 0.0, 1, truth=train.truth)
    t = held.truth_log
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        sm = JointSmoother(robot).fit(train.log)
        t_sm = time.perf_counter() - t0
        t0 = time.perf_counter()
        ls = LeastSquaresSG().fit(train.log, robot).result_
        t_ls = time.perf_counter() - t0
    layout = sm.layout_
    p_true = np.array([train.truth["parameters"][n] for n in layout.names])
    idr = InverseDynamicsResidual(layout)
    a = held.truth_acceleration
    preds = {
        "smoother": (idr.predict(t.q, t.v, a, sm.result_.theta), sm.result_.estimate, t_sm,
                     len(sm.result_.history)),
        "ls-sg": (predict_torque(robot, ls.estimate, t.q, t.v, a), ls.estimate, t_ls, 0),
        "nominal": (idr.predict(t.q, t.v, a, layout.to_theta(layout.nominal_physical())),
                    layout.nominal_physical(), 0.0, 0),
    }
    for method, (tau, p, secs, iters) in preds.items():
        rows.append({
            "robot": robot_name, "noise": noise, "method": method,
            "heldout_rel_rmse_%": 100 * relative_rmse(tau, t.tau),
            "base_param_err_%": 100 * base_parameter_error(robot, p, p_true, t.q, t.v, a),
            "seconds": secs, "iterations": iters,
        })
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--robots", nargs="+", default=["z1", "panda"])
    ap.add_argument("--noises", nargs="+", type=float, default=[0.0, 0.005, 0.01, 0.1])
    ap.add_argument("--duration", type=float, default=20.0)
    ap.add_argument("--heldout", type=float, default=10.0)
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--out", default="benchmarks/results/accuracy.csv")
    args = ap.parse_args()
    rows = []
    for r in args.robots:
        for s in args.noises:
            t0 = time.perf_counter()
            rows += run(r, s, args.duration, args.rate, args.heldout)
            print(f"[{r} σ={s}] done in {time.perf_counter() - t0:.0f} s", flush=True)
    df = pd.DataFrame(rows)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(args.out, index=False)
    wide = df.pivot_table(index=["robot", "noise"], columns="method",
                          values=["heldout_rel_rmse_%", "base_param_err_%"])
    print("\nheld-out torque relative RMSE [%] and base-parameter error [%]:")
    print(wide.round(3).to_markdown())
    times = df[df.method != "nominal"].pivot_table(index=["robot", "noise"], columns="method",
                                                   values=["seconds", "iterations"])
    print("\nwall time [s] and smoother iterations:")
    print(times.round(1).to_markdown())
    sm = df[df.method == "smoother"].set_index(["robot", "noise"])["heldout_rel_rmse_%"]
    ls = df[df.method == "ls-sg"].set_index(["robot", "noise"])["heldout_rel_rmse_%"]
    print("\nratio LS-SG / smoother held-out error (>1: the smoother is better):")
    print((ls / sm).round(2).to_markdown())


if __name__ == "__main__":
    main()
