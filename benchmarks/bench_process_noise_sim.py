"""The process-noise rule of issue 9 (docs/process-noise.md) out of the UR10 log's class: the project's RK4
simulator (Z1, friction, armature), 100 Hz logs with exact velocities, q noise 1e-5 rad and effort noise
f × each joint's RMS (the UR10 protocol), with the controller at 1 kHz (held between samples: a real
arm's) or at the log rate (efforts held over the whole sample period: the rule's known limit).

Base-parameter error [%] (‖K(p̂ − p)‖/‖K p‖ on the training motion's identifiable combinations, truth
with its friction and armature) of the smoother with the current default, the smoother with the process
noise of before issue 9 (``process_from_log=False``) and the classical LS-SG fit.

Usage: python benchmarks/bench_process_noise_sim.py [--durations 6 10] [--fractions 0.01 0.05]
       [--control-rates 1000 100] [--seeds 0]
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import warnings

import numpy as np
import pandas as pd

from fg_sysid.datasets.simulate import Effects, simulate, truth_arrays
from fg_sysid.estimation.baseline import LeastSquaresSG
from fg_sysid.estimation.metrics import base_parameter_error, classical_vector
from fg_sysid.estimation.smoother import JointSmoother
from fg_sysid.robots import load_robot


def _err(robot, est, p, states, names=None) -> float:
    """Base-parameter error [%]; the smoother's friction shape (``.vs``, ``.lead``) is not in the metric's
    vector."""
    if names is not None:
        est = classical_vector(names, est)
    return 100 * base_parameter_error(robot, est, p, *states)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--durations", nargs="+", type=float, default=[6.0, 10.0])
    ap.add_argument("--fractions", nargs="+", type=float, default=[0.01, 0.05])
    ap.add_argument("--control-rates", nargs="+", type=float, default=[1000.0, 100.0])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    args = ap.parse_args()
    robot = load_robot("z1")
    rows = []
    for dur, frac, cr, seed in itertools.product(args.durations, args.fractions, args.control_rates,
                                                 args.seeds):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sim = simulate(robot, dur, 100.0, 0.0, seed, effects=Effects(control_rate=cr))
            clean = sim.truth_log
            rng = np.random.default_rng(seed + 10)
            rms = np.sqrt(np.mean(clean.tau**2, axis=0))
            log = dataclasses.replace(clean, q=clean.q + rng.normal(0.0, 1e-5, clean.q.shape),
                                      tau=clean.tau + rng.normal(0.0, 1.0, clean.tau.shape) * frac * rms)
            ar = truth_arrays(sim.truth, robot)
            p = np.concatenate([ar["inertial"].ravel(), np.column_stack([ar["fc"], ar["fv"]]).ravel(),
                                ar["armature"]])

            states = (clean.q, clean.v, sim.truth_acceleration)
            row = {"duration_s": dur, "tau_noise_fraction": frac, "control_rate_hz": cr, "seed": seed,
                   "ls-sg": _err(robot, LeastSquaresSG().fit(log, robot).result_.estimate, p, states)}
            for name, opt in (("smoother", {}), ("smoother-before", {"process_from_log": False})):
                res = JointSmoother(robot, **opt).fit(log).result_
                row[name] = _err(robot, res.estimate, p, states, res.layout.names)
        rows.append(row)
        print(row, flush=True)
    print("\nZ1, 100 Hz, exact velocities: base-parameter error [%]")
    print(pd.DataFrame(rows).round(3).to_markdown(index=False))


if __name__ == "__main__":
    main()
