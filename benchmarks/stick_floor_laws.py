"""Which friction law could reach issue 9's σ = 0.01 bar on the MuJoCo arms (session 9, next-step probe).

The model class's floor on a MuJoCo held-out log (`stick_floor.oracle_tanh`: best inertias, armature, fc, fv
and per-joint width fitted at the exact held-out states to the held-out efforts, in-sample) for two shapes of
the Coulomb term: the estimator's ``tanh(v/w)`` and soft dry friction ``clip(v/w, ±1)``, each over a width
grid up to 2 rad/s. If the clip law's floor is far below the tanh law's, a soft-dry law in ``--friction
auto`` is the lever for the MuJoCo rows; if not, no smooth law is. Prints a table; no fit of the smoother.

    python benchmarks/stick_floor_laws.py --robots z1 panda --heldout 10
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_outofclass import simulate_truth  # noqa: E402
from stick_floor import oracle_tanh, split_error, stick_mask  # noqa: E402

from fg_sysid.estimation.metrics import relative_rmse  # noqa: E402
from fg_sysid.robots import load_robot  # noqa: E402

#: widths [rad/s] tried per joint (wider than `stick_floor.VS_GRID`: MuJoCo's soft constraint can be wide)
GRID = np.geomspace(2e-4, 2.0, 41)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--robots", nargs="+", default=["z1", "panda"])
    ap.add_argument("--heldout", type=float, default=10.0, help="held-out log [s]")
    ap.add_argument("--rate", type=float, default=1000.0)
    args = ap.parse_args()
    rows = []
    for name in args.robots:
        robot = load_robot(name)
        train = simulate_truth(robot, "mujoco", 2.0, args.rate, 0.01, 0)  # only for the truth parameters
        held = simulate_truth(robot, "mujoco", args.heldout, args.rate, 0.0, 1, truth=train.truth)
        ref = np.asarray(held.log.tau, float)
        tl = held.truth_log
        stick = stick_mask(tl.v)
        for law in ("tanh", "clip"):
            c0 = time.process_time()
            pred, vs = oracle_tanh(robot, tl.q, tl.v, held.truth_acceleration, ref, grid=GRID, law=law)
            sp = split_error(pred, ref, stick)
            rows.append({"robot": name, "law": law, "oracle_%": 100 * relative_rmse(pred, ref),
                         "sliding_%": sp["sliding_%"], "stick_share": sp["stick_share"],
                         "width_median": float(np.median(vs)),
                         "width_range": f"{vs.min():.3g}–{vs.max():.3g}",
                         "cpu_s": time.process_time() - c0})
            print(rows[-1], flush=True)
    print(pd.DataFrame(rows).round(4).to_markdown(index=False))


if __name__ == "__main__":
    main()
