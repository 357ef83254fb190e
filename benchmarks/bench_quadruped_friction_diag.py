"""Why the quadruped smoother identifies friction poorly (issue 12, Table I quadruped row): per joint, how
much the joint moves in the training log and what the smoother's posterior says about its friction.

    nice -n 10 python benchmarks/bench_quadruped_friction_diag.py [--seed 0] [--truth mujoco|rigid]
        [--motion trot] [--duration 2] [--rate 250] [--energy]

One study run (`fg_sysid.study.floating`: the drawn truth of ``--seed``, σ = 0.005, the seed's 70 % random
initial guess), fitted once; prints per joint: RMS joint speed, the fraction of samples with |v| above the
estimator's tanh width (where Coulomb friction is at its plateau and separable from viscous), the true and
estimated fc, fv, the posterior std and the posterior/prior std ratio (≈ 1: the prior, not the log, set
the value), and each joint's share of the squared friction error. CPU seconds of the fit at the end.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from fg_sysid.robots import load_robot
from fg_sysid.study.config import RunSpec


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--truth", default="mujoco", choices=("mujoco", "rigid"))
    ap.add_argument("--motion", default="trot")
    ap.add_argument("--duration", type=float, default=2.0)
    ap.add_argument("--rate", type=float, default=250.0)
    ap.add_argument("--energy", action="store_true", help="fit with the energy rows (smoother+energy)")
    ap.add_argument("--max-iterations", type=int, default=20)
    args = ap.parse_args()
    from fg_sysid.datasets.mujoco_sim import to_log
    from fg_sysid.estimation.floating_smoother import FloatingBaseSmoother
    from fg_sysid.study.floating import nominal_parameters, simulate_floating
    from fg_sysid.study.methods import random_initial_guess

    robot = load_robot("b1")
    spec = RunSpec(robot="b1", motion=args.motion, duration=args.duration, rate=args.rate, noise=0.005,
                   method="smoother+energy" if args.energy else "smoother", seed=args.seed, option="diag",
                   truth={"friction_velocity_scale": 0.01, "contacts": args.truth},
                   estimator={"friction_velocity_scale": 0.05, "max_iterations": args.max_iterations,
                              "init_spread": 0.7}, heldout={"duration": 1.0, "seed_offset": 1000})
    c0 = time.process_time()
    train, _, p_true = simulate_floating(robot, spec)
    c1 = time.process_time()
    log = to_log(train)
    p_nom = nominal_parameters(robot, 0.05)
    p0 = random_initial_guess(robot, 0.7, args.seed, 0.05, mean_physical=p_nom)
    sm = FloatingBaseSmoother(robot, tuple(train.foot_frames), contact_radius=float(train.truth["foot_radius"]),
                              use_forces=False, friction_velocity_scale=0.05, max_iterations=args.max_iterations,
                              energy=args.energy, prior_mean=p0, init="prior").fit(log)
    c2 = time.process_time()
    res = sm.result_
    tab = res.parameters_table().set_index("name")
    v = np.asarray(train.v, float)
    rows = []
    for i, j in enumerate(robot.joint_names):
        r = {"joint": j, "rms_v": np.sqrt(np.mean(v[:, i] ** 2)), "frac_|v|>vs": np.mean(np.abs(v[:, i]) > 0.05)}
        for k in ("fc", "fv"):
            n = f"{j}.{k}"
            r[f"{k}_true"] = train.truth["parameters"][n]
            r[f"{k}_guess"] = p0[robot.parameter_names(("fc", "fv")).index(n)]
            r[f"{k}_est"] = tab.loc[n, "estimate"]
            r[f"{k}_std"] = tab.loc[n, "std"]
            r[f"{k}_ratio"] = tab.loc[n, "std_ratio"]
        r["err2"] = (r["fc_est"] - r["fc_true"]) ** 2 + (r["fv_est"] - r["fv_true"]) ** 2
        rows.append(r)
    df = pd.DataFrame(rows).set_index("joint")
    nb, nj = 10 * robot.n_bodies, robot.n_joints
    f_true = p_true[nb:nb + 2 * nj]
    df["err_share"] = df["err2"] / df["err2"].sum()
    pd.set_option("display.width", 250)
    print(df.drop(columns="err2").round(3).to_string())
    err = np.sqrt(df["err2"].sum()) / np.linalg.norm(f_true)
    err0 = np.linalg.norm(p0[nb:nb + 2 * nj] - f_true) / np.linalg.norm(f_true)
    print(f"friction error {err:.3f} (guess {err0:.3f}); iterations {len(res.history)}, converged "
          f"{res.converged}; knots {res.knots}; CPU s simulate {c1 - c0:.1f}, fit {c2 - c1:.1f}")


if __name__ == "__main__":
    main()
