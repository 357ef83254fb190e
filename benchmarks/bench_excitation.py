"""Does optimized excitation identify better? (issue 4, item 5, on the issue-2 accuracy protocol)

For Z1: an optimized Fourier trajectory (`fg-sysid excite`, condition number of the stacked base
regressor minimized under position/velocity/torque limits, start and end at rest) against random
Fourier trajectories of the same bounds (`random_trajectory`, seeds 1..R). Each is simulated for
`--duration` s at 1 kHz with noise σ, identified by the joint smoother and the LS-SG baseline, and
validated on the same noise-free held-out log (another random motion of the same robot).

Usage: python benchmarks/bench_excitation.py [--robot z1] [--duration 20] [--noise 0.01] [--random 2]
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import pandas as pd

from fg_sysid.datasets.simulate import simulate
from fg_sysid.estimation.baseline import LeastSquaresSG, predict_torque
from fg_sysid.estimation.metrics import base_parameter_error, relative_rmse
from fg_sysid.estimation.smoother import JointSmoother
from fg_sysid.factors.inverse_dynamics import InverseDynamicsResidual
from fg_sysid.identifiability.excitation_opt import optimize_excitation, random_trajectory
from fg_sysid.robots import load_robot


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--robot", default="z1")
    ap.add_argument("--duration", type=float, default=20.0)
    ap.add_argument("--noise", type=float, default=0.01)
    ap.add_argument("--random", type=int, default=2, help="number of random trajectories")
    args = ap.parse_args()
    robot = load_robot(args.robot)
    t0 = time.perf_counter()
    opt = optimize_excitation(robot, duration=args.duration)
    print(f"optimized: cond {opt.condition:.1f} vs random median {opt.random_condition:.1f} "
          f"({opt.improvement:.2f}x) in {time.perf_counter() - t0:.0f} s", flush=True)
    trajectories = {"optimized": opt.trajectory}
    for s in range(1, args.random + 1):
        trajectories[f"random seed {s}"] = random_trajectory(robot, args.duration, seed=s)
    ref = simulate(robot, args.duration, 1000, args.noise, 0)  # defines the true robot
    held = simulate(robot, 10.0, 1000, 0.0, 99, truth=ref.truth)
    t = held.truth_log
    rows = []
    for name, traj in trajectories.items():
        train = simulate(robot, args.duration, 1000, args.noise, 0, trajectory=traj, truth=ref.truth)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sm = JointSmoother(robot).fit(train.log)
            ls = LeastSquaresSG().fit(train.log, robot).result_
        layout = sm.layout_
        p_true = np.array([ref.truth["parameters"][n] for n in layout.names])
        idr = InverseDynamicsResidual(layout)
        a = held.truth_acceleration
        for method, tau, p in (("smoother", idr.predict(t.q, t.v, a, sm.result_.theta), sm.result_.estimate),
                               ("ls-sg", predict_torque(robot, ls.estimate, t.q, t.v, a), ls.estimate)):
            rows.append({"trajectory": name, "method": method,
                         "heldout_rel_rmse_%": 100 * relative_rmse(tau, t.tau),
                         "base_param_err_%": 100 * base_parameter_error(robot, p, p_true, t.q, t.v, a)})
        print(f"{name} done", flush=True)
    df = pd.DataFrame(rows)
    print(df.pivot_table(index="trajectory", columns="method",
                         values=["heldout_rel_rmse_%", "base_param_err_%"]).round(3).to_markdown())


if __name__ == "__main__":
    main()
