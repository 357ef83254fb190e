"""Which blocked-CV score lets the friction selection see a Stribeck peak (issue 9, session 11)?

`friction_select.select_friction` scores each law by the per-joint RMSE of the held-out block over the
joint's effort RMS, root-mean-square over the joints (``rms``, the default). Two alternatives are scored
on the same regression (`friction_select._Regression`), with the same rule (mean gain ≥ MARGIN, every fold
lower) and the same grid search over the laws' widths:

* ``pooled``: sqrt(Σ_j SSE_j / Σ_j n_j·rms_j²) — the held-out metric of the benchmarks (large joints weigh);
* ``geometric``: exp(mean_j log(RMSE_j / rms_j)) — a Gaussian log-likelihood with one variance per joint
  (every joint's *relative* gain counts alike).

Each on the arms of bench_outofclass.py (20 s / 1 kHz, seed 0), every truth × σ, with the states the
selection normally uses (SG of the logged signals, the window of LS-SG's own CV) and with the simulator's
true q and v (the selection's best case). Printed: the law chosen and the per-fold relative gain [%] of
``stribeck6`` over ``coulomb-viscous-scale``. A useful score chooses ``stribeck6`` on the Stribeck truth
and nowhere else.

Usage: python benchmarks/bench_friction_scores.py [--robots z1 panda] [--noises 0.01 0.1]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_outofclass import simulate_truth  # noqa: E402

from fg_sysid.estimation import friction_select as fs  # noqa: E402
from fg_sysid.estimation.baseline import LeastSquaresSG  # noqa: E402
from fg_sysid.robots import load_robot  # noqa: E402

TRUTHS = ("in-class", "sharp", "stribeck", "mujoco", "sensors")


def _fold_sse(reg, blocks, tr, he):
    """Per-joint held-out SSE and counts of one fold (as `_Regression.score`)."""
    xb, xf = reg.solve(blocks, tr)
    sse = np.einsum("a,jab,b->j", xb, reg.YY[he].sum(0), xb) - 2 * reg.Yr[he].sum(0) @ xb + reg.rr[he].sum(0)
    for j in range(reg.m):
        YF, FF, _, Fr = (z[he].sum(0) for z in blocks[j])
        sse[j] += 2 * xb @ YF @ xf[j] + xf[j] @ FF @ xf[j] - 2 * Fr @ xf[j]
    return np.maximum(sse, 1e-300), np.maximum(reg.cnt[he].sum(0), 1)


def _score(kind):
    def score(reg, blocks):
        folds = []
        for tr, he in zip(reg.train, reg.held, strict=True):
            sse, n = _fold_sse(reg, blocks, tr, he)
            if kind == "pooled":
                folds.append(float(np.sqrt(np.sum(sse) / np.sum(n * reg.scale ** 2))))
            else:  # geometric
                folds.append(float(np.exp(np.mean(np.log(np.sqrt(sse / n) / reg.scale)))))
        return float(np.mean(folds)), folds
    return score


@contextlib.contextmanager
def scored_by(kind):
    original = fs._Regression.score
    if kind != "rms":
        fs._Regression.score = _score(kind)
    try:
        yield
    finally:
        fs._Regression.score = original


def run(robot_name, noise, truth) -> list[dict]:
    robot = load_robot(robot_name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tr = simulate_truth(robot, truth, 20.0, 1000.0, noise, 0)
    ls = LeastSquaresSG().fit(tr.log, robot).result_
    true_log = dataclasses.replace(tr.log, q=tr.truth_log.q, v=tr.truth_log.v)
    rows = []
    for states, log, window in (("SG", tr.log, float(ls.filter["window_s"])), ("true", true_log, 0.005)):
        for kind in ("rms", "pooled", "geometric"):
            with scored_by(kind):
                sel = fs.select_friction(robot, log, window, int(ls.filter["polyorder"]))
            gains = 100 * np.asarray(sel.as_dict()["relative_gain_per_fold"])
            rows.append({"robot": robot_name, "noise": noise, "truth": truth, "states": states, "score": kind,
                         "chosen": "stribeck6" if sel.chosen == "stribeck6" else "cvs",
                         "gain_mean_%": gains.mean(), "gain_min_%": gains.min(), "gain_max_%": gains.max()})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--robots", nargs="+", default=["z1", "panda"])
    ap.add_argument("--noises", nargs="+", type=float, default=[0.01, 0.1])
    ap.add_argument("--truths", nargs="+", default=list(TRUTHS), choices=TRUTHS)
    args = ap.parse_args()
    rows = []
    for r in args.robots:
        for n in args.noises:
            for t in args.truths:
                rows += run(r, n, t)
                print(f"[{r} σ={n:g} {t}] done", flush=True)
    df = pd.DataFrame(rows)
    df["cell"] = df["chosen"] + " (" + df["gain_mean_%"].round(2).astype(str) + ", min " \
        + df["gain_min_%"].round(2).astype(str) + ")"
    for states, g in df.groupby("states", sort=False):
        print(f"\nstates: {states} — law chosen (stribeck6's mean / min per-fold gain [%])")
        print(g.pivot_table(index=["robot", "noise", "truth"], columns="score", values="cell",
                            aggfunc="first")[["rms", "pooled", "geometric"]].to_markdown())


if __name__ == "__main__":
    main()
