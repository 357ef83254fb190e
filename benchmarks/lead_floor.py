"""The friction law's own floor on a MuJoCo held-out log, with and without the lead T (issue 9, session 10).

At the exact held-out states (and through the predict path's SG states) of a MuJoCo arm log, the residual
``τ − RNEA_true(q, v, a) − fv·v`` (true inertias, armature, viscous: only the dry-friction law is fitted) is
fitted per joint by ``fc·s((v + T·a)/vs)`` for s = tanh or clip, with T = 0 (a law of the velocity alone)
or T estimated (`scipy.optimize.least_squares` over fc, log vs, T from a few starts). In-sample: the law's
floor on that log, not a prediction. Also the oracle of MuJoCo's own constants: T = 1/b = d_max·timeconst/2,
vs = R·fc·T, R = (1 − d)/d · dof_invweight0 (`--mujoco-constants`).

    python benchmarks/lead_floor.py --robots z1 panda [--train 20] [--heldout 10]
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pinocchio as pin
from scipy.optimize import least_squares

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_outofclass import simulate_truth  # noqa: E402

from fg_sysid.datasets.mujoco_sim import build_mujoco_model  # noqa: E402
from fg_sysid.datasets.simulate import truth_arrays, truth_model  # noqa: E402
from fg_sysid.heldout_filter import log_sg_filter  # noqa: E402
from fg_sysid.prediction import heldout_accelerations  # noqa: E402
from fg_sysid.robots import load_robot  # noqa: E402

SHAPES = {"tanh": np.tanh, "clip": lambda x: np.clip(x, -1.0, 1.0)}


def fit_law(r, v, a, shape, fc0, lead: bool):
    """Best (fc, vs, T) of fc·s((v + T a)/vs) for one joint's residual r; returns (sse, params)."""
    s = SHAPES[shape]
    best = None
    for lw0 in np.log([0.002, 0.01, 0.05]):
        for t0 in ((0.0, 0.01) if lead else (0.0,)):
            def f(p):
                T = p[2] if lead else 0.0
                return r - p[0] * s((v + T * a) / np.exp(p[1]))
            sol = least_squares(f, [fc0, lw0, t0][:3 if lead else 2])
            if best is None or sol.cost < best.cost:
                best = sol
    return 2 * best.cost, best.x


def run(name: str, train_s: float, heldout_s: float) -> list[dict]:
    robot = load_robot(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        train = simulate_truth(robot, "mujoco", train_s, 1000.0, 0.01, 0)  # the truth of the 20 s benchmark
        held = simulate_truth(robot, "mujoco", heldout_s, 1000.0, 0.0, 1, truth=train.truth)
    arr = truth_arrays(train.truth, robot)
    model = truth_model(train.truth, robot)
    data = model.createData()
    ref = np.asarray(held.log.tau, float)
    den = float(np.sum(ref ** 2))
    hf = log_sg_filter(held.log, robot)
    vh, ah, _ = heldout_accelerations(held.log, hf["window_s"], hf["polyorder"])
    states = {"exact": (held.truth_log.q, held.truth_log.v, held.truth_acceleration),
              f"predict path (SG {1e3 * hf['window_s']:.0f} ms)": (held.log.q, vh, ah)}
    rows = []
    for sname, (q, v, a) in states.items():
        rnea = np.array([pin.rnea(model, data, qk, vk, ak) for qk, vk, ak in zip(q, v, a, strict=True)])
        r = ref - rnea - arr["fv"] * v
        for shape in SHAPES:
            for lead in (False, True):
                sse, leads = 0.0, []
                for j in range(robot.n_joints):
                    e, p = fit_law(r[:, j], v[:, j], a[:, j], shape, arr["fc"][j], lead)
                    sse += e
                    leads.append(p[2] if lead else 0.0)
                big = arr["fc"] > 0.3 * arr["fc"].max()
                rows.append({"robot": name, "states": sname, "law": f"{shape}({'v + T·a' if lead else 'v'})",
                             "floor_%": 100 * np.sqrt(sse / den),
                             "T_ms (joints with fc > 0.3 max)": " ".join(f"{1e3 * t:.2f}"
                                                                          for t in np.array(leads)[big])})
                print(rows[-1], flush=True)
    mj, info = build_mujoco_model(robot, arr["inertial"], (arr["fc"], arr["fv"]), arr["armature"],
                                  foot_frames=None)
    imp = mj.dof_solimp[info.dof_adr]
    T = imp[:, 1] * mj.dof_solref[info.dof_adr][:, 0] / 2
    vs = (1 - imp[:, 0]) / imp[:, 0] * mj.dof_invweight0[info.dof_adr] * arr["fc"] * T
    q, v, a = states["exact"]
    rnea = np.array([pin.rnea(model, data, qk, vk, ak) for qk, vk, ak in zip(q, v, a, strict=True)])
    law = arr["fc"] * np.clip((v + T * a) / vs, -1, 1) + arr["fv"] * v
    rows.append({"robot": name, "states": "exact", "law": "clip(v + T·a), MuJoCo's constants",
                 "floor_%": 100 * np.sqrt(np.sum((ref - rnea - law) ** 2) / den),
                 "T_ms (joints with fc > 0.3 max)": f"{1e3 * T[0]:.2f} (all)"})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--robots", nargs="+", default=["z1", "panda"])
    ap.add_argument("--train", type=float, default=20.0, help="training log [s] (draws the truth)")
    ap.add_argument("--heldout", type=float, default=10.0, help="held-out log [s]")
    args = ap.parse_args()
    rows = [row for name in args.robots for row in run(name, args.train, args.heldout)]
    print(pd.DataFrame(rows).round(4).to_markdown(index=False))


if __name__ == "__main__":
    main()
