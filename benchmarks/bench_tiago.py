"""Real-data benchmark: TIAGo arm (../shared/data/tiago_dynamic_2021-07-01.csv), blocked split.

Train on rows 921–6790 (the span the data notes recommend), validate on the rest (rows 0–920 and
6791–end, a held-out part of the same recording). Efforts of arm_2–arm_4 are the reliable ones
(meta file); all measured arm joints are used for training, errors are reported for arm_1–arm_4.
Held-out efforts are predicted from q, with v and a by Savitzky–Golay differentiation (the window the
baseline's cross-validation picked on the training span) — the `fg-sysid predict` protocol.

Usage: python benchmarks/bench_tiago.py [--data PATH] [--sigma-q S] [--max-iterations N]
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from fg_sysid.datasets.io import load_log_for_robot
from fg_sysid.estimation.baseline import LeastSquaresSG
from fg_sysid.estimation.smoother import JointSmoother
from fg_sysid.validation import heldout_accelerations, nominal_model, predict_efforts

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "tiago_dynamic_2021-07-01.csv"
REPORT = ["arm_1_joint", "arm_2_joint", "arm_3_joint", "arm_4_joint"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--sigma-q", type=float, default=None)
    ap.add_argument("--max-iterations", type=int, default=30)
    args = ap.parse_args()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        robot, log = load_log_for_robot(args.data, "tiago")
    train = log.slice(921, 6791)
    held = [log.slice(0, 921), log.slice(6791, log.n_samples)]
    rows = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        ls = LeastSquaresSG().fit(train, robot).result_
        t_ls = time.perf_counter() - t0
        t0 = time.perf_counter()
        sm = JointSmoother(robot, sigma_q=args.sigma_q, max_iterations=args.max_iterations).fit(train).result_
        t_sm = time.perf_counter() - t0
    window = ls.filter["window_s"], ls.filter["polyorder"]
    models = {"smoother": sm, "ls-sg": ls, "nominal URDF": nominal_model(robot)}
    idx = [robot.joint_names.index(j) for j in REPORT]
    for name, model in models.items():
        err2, n = np.zeros(len(REPORT)), 0
        for part in held:
            v, a, _ = heldout_accelerations(part, *window)
            tau = predict_efforts(model, robot, part.q, v, a)
            err2 += np.sum((tau[:, idx] - part.tau[:, idx]) ** 2, axis=0)
            n += part.n_samples
        rows[name] = np.sqrt(err2 / n)
    df = pd.DataFrame(rows, index=REPORT).T
    df["pooled"] = np.sqrt(np.mean(df[REPORT].to_numpy() ** 2, axis=1))
    print("held-out effort RMSE [N·m] (TIAGo, blocked split):")
    print(df.round(3).to_markdown())
    print(f"\nsmoother: {len(sm.history)} iterations, converged {sm.converged}, {t_sm:.1f} s; "
          f"LS-SG {t_ls:.1f} s; "
          f"smoother physically consistent: {not sm.consistency_problems()}, "
          f"LS-SG consistent: {ls.physical_consistency.get('consistent')}")


if __name__ == "__main__":
    main()
