"""Why energy rows sometimes worsen the Z1 friction estimate (issue 12, Table I protocol): two diagnostics.

1. Tanh-width floor (default): at the **true** states of a simulated Z1 log (truth friction
   fc·tanh(v/0.02) + fv·v), fit (fc, fv) per joint by linear least squares with the tanh width fixed at
   ``--vs`` (0.02 = the truth, 0.05 = the estimators' prior mean) from (a) the friction torques (what the
   inverse-dynamics rows see) and (b) the dissipated energy per sample interval summed over the joints
   (what the energy rows see); prints the relative friction error of each.
2. ``--refit SEEDS``: the study's smoother and smoother+energy fits (same simulation, random guess and
   settings as `bench_study_table1.py`) of the given seeds, printing per joint fc/fc*, fv/fv* and the
   estimated tanh width vs [rad/s].

    nice -n 10 python benchmarks/bench_energy_z1_diag.py [--seeds 5000,5001,5002] [--refit 12,49]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from fg_sysid.datasets.simulate import simulate, truth_arrays
from fg_sysid.robots import load_robot


def friction_floor(robot, seed, vs_fit, vs_true=0.02):
    sim = simulate(robot, 8.0, 500.0, 0.0, seed, friction_velocity_scale=vs_true)
    tr = truth_arrays(sim.truth, robot)
    v, h = sim.truth_log.v, np.diff(sim.truth_log.t)
    tf = tr["fc"] * np.tanh(v / vs_true) + tr["fv"] * v
    p_true = np.r_[tr["fc"], tr["fv"]]
    n = robot.n_joints
    est_id = np.array([np.linalg.lstsq(np.c_[np.tanh(v[:, j] / vs_fit), v[:, j]], tf[:, j], rcond=None)[0]
                       for j in range(n)])
    P = v * tf
    D = 0.5 * h * (P[1:] + P[:-1]).sum(axis=1)
    cols = []
    for j in range(n):
        a, b = v[:, j] * np.tanh(v[:, j] / vs_fit), v[:, j] ** 2
        cols += [0.5 * h * (a[1:] + a[:-1]), 0.5 * h * (b[1:] + b[:-1])]
    est_e = np.linalg.lstsq(np.array(cols).T, D, rcond=None)[0].reshape(n, 2)

    def rel(e):
        return float(np.linalg.norm(np.r_[e[:, 0], e[:, 1]] - p_true) / np.linalg.norm(p_true))

    return rel(est_id), rel(est_e)


def refit(robot, seed):
    from fg_sysid.estimation.smoother import JointSmoother
    from fg_sysid.study.methods import random_initial_guess

    sim = simulate(robot, 8.0, 500.0, 0.01, seed, friction_velocity_scale=0.02)
    tr = truth_arrays(sim.truth, robot)
    p0 = random_initial_guess(robot, 0.7, seed, 0.05)
    for energy in (False, True):
        c0 = time.process_time()
        res = JointSmoother(robot, friction_velocity_scale=0.05, max_iterations=20, energy=energy,
                            prior_mean=p0, init="prior").fit(sim.log).result_
        est = dict(zip(res.names, res.estimate, strict=True))
        fc, fv, vs = (np.array([est[f"{j}.{k}"] for j in robot.joint_names]) for k in ("fc", "fv", "vs"))
        name = "smoother+energy" if energy else "smoother       "
        print(f"seed {seed} {name} fc/fc* {np.round(fc / tr['fc'], 3)} fv/fv* {np.round(fv / tr['fv'], 3)} "
              f"vs {np.round(vs, 3)} "
              f"({time.process_time() - c0:.0f} CPU s)", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="5000,5001,5002")
    ap.add_argument("--refit", default="", help="comma-separated study seeds to refit with per-joint output")
    args = ap.parse_args()
    robot = load_robot("z1")
    if args.refit:
        for s in args.refit.split(","):
            refit(robot, int(s))
        return
    print("friction error of (fc, fv) fitted at the true states, truth tanh width 0.02 rad/s:")
    print("seed   vs_fit   from friction torques   from dissipated energy")
    for s in (int(x) for x in args.seeds.split(",")):
        for vs in (0.02, 0.05):
            a, b = friction_floor(robot, s, vs)
            print(f"{s:5d}   {vs:.2f}    {a:.3f}                   {b:.3f}")


if __name__ == "__main__":
    main()
