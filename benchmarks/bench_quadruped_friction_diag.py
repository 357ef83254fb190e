"""Why the quadruped smoother identifies friction poorly (issue 12, Table I quadruped row): per joint, how
much the joint moves in the training log and what the smoother's posterior says about its friction.

    nice -n 10 python benchmarks/bench_quadruped_friction_diag.py [--seed 0] [--truth mujoco|rigid]
        [--motion trot] [--duration 2] [--rate 250] [--energy] [--noise 0.005] [--truth-vs 0.01] [--cone]
        [--no-imu] [--impacts] [--knot-stride K] [--max-iterations 20]
    python benchmarks/bench_quadruped_friction_diag.py --guess-errors 50   # the guesses alone, no fit

One study run (`fg_sysid.study.floating`: the drawn truth of ``--seed``, σ = 0.005, the seed's 70 % random
initial guess; ``--truth rigid``: rigid point contacts, truth tanh width 0.01 rad/s, the estimator told the
contacts are bilateral, as `examples/studies/table1_quadruped_rigid.yaml`), fitted once; prints per joint:
RMS joint speed, the fraction of samples with |v| above the estimator's tanh width (Coulomb friction at its
plateau), the true and estimated fc, fv, the posterior std and the posterior/prior std ratio (≈ 1: the
prior, not the log, set the value), and each joint's share of the squared friction error; CPU seconds of
the fit at the end.
``--guess-errors N``: the friction / inertial errors of the random initial guesses of seeds 0..N−1 alone
(what an estimator that ignores the log would score; no simulation, no fit).
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
    ap.add_argument("--guess-errors", type=int, default=0, help="only the guesses' errors of N seeds")
    ap.add_argument("--noise", type=float, default=0.005, help="σ on joint q, v, τ and the gyro")
    ap.add_argument("--truth-vs", type=float, default=0.01, help="rigid truth's tanh width [rad/s]")
    ap.add_argument("--cone", action="store_true", help="rigid truth: keep the friction-cone penalties")
    ap.add_argument("--no-imu", action="store_true", help="leave the IMU factors out")
    ap.add_argument("--impacts", action="store_true", help="reset maps with impulses at touchdowns")
    ap.add_argument("--knot-stride", type=int, default=None, help="samples per knot (default: from the log)")
    args = ap.parse_args()
    if args.guess_errors:
        return guess_errors(args.guess_errors)
    from fg_sysid.datasets.mujoco_sim import to_log
    from fg_sysid.estimation.floating_smoother import FloatingBaseSmoother
    from fg_sysid.study.floating import nominal_parameters, simulate_floating
    from fg_sysid.study.methods import random_initial_guess

    robot = load_robot("b1")
    spec = RunSpec(robot="b1", motion=args.motion, duration=args.duration, rate=args.rate, noise=args.noise,
                   method="smoother+energy" if args.energy else "smoother", seed=args.seed, option="diag",
                   truth={"friction_velocity_scale": args.truth_vs, "contacts": args.truth},
                   estimator={"friction_velocity_scale": 0.05, "max_iterations": args.max_iterations,
                              "init_spread": 0.7}, heldout={"duration": 1.0, "seed_offset": 1000})
    c0 = time.process_time()
    train, _, p_true = simulate_floating(robot, spec)
    c1 = time.process_time()
    log = to_log(train)
    p_nom = nominal_parameters(robot, 0.05)
    p0 = random_initial_guess(robot, 0.7, args.seed, 0.05, mean_physical=p_nom)
    sm = FloatingBaseSmoother(
        robot, tuple(train.foot_frames), contact_radius=float(train.truth["foot_radius"]), use_forces=False,
        friction_velocity_scale=0.05, max_iterations=args.max_iterations, energy=args.energy, prior_mean=p0,
        init="prior", friction_coefficient=None if args.truth == "rigid" and not args.cone else 1.0,
        use_imu=not args.no_imu, impacts=args.impacts, knot_stride=args.knot_stride).fit(log)
    c2 = time.process_time()
    res = sm.result_
    tab = res.parameters_table().set_index("name")
    v = np.asarray(train.v, float)
    rows = []
    for i, j in enumerate(robot.joint_names):
        r = {"joint": j, "rms_v": np.sqrt(np.mean(v[:, i] ** 2)),
             "frac_|v|>vs": np.mean(np.abs(v[:, i]) > 0.05)}
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


def guess_errors(n_seeds: int) -> None:
    """Mean / median friction and inertial errors of the study's random initial guesses (seeds 0..n−1)."""
    from fg_sysid.datasets.mujoco_sim import draw_truth
    from fg_sysid.study.floating import nominal_parameters
    from fg_sysid.study.methods import random_initial_guess

    robot = load_robot("b1")
    nb, nj = 10 * robot.n_bodies, robot.n_joints
    p_nom = nominal_parameters(robot, 0.05)
    rows = []
    for seed in range(n_seeds):
        d = draw_truth(robot, seed, foot_radius=0.0)
        f_true = np.column_stack([d["fc"], d["fv"]]).ravel()
        p0 = random_initial_guess(robot, 0.7, seed, 0.05, mean_physical=p_nom)
        rows.append({"seed": seed,
                     "friction_error": np.linalg.norm(p0[nb:nb + 2 * nj] - f_true) / np.linalg.norm(f_true),
                     "inertial_error": np.linalg.norm(p0[:nb] - d["inertial"].ravel())
                     / np.linalg.norm(d["inertial"].ravel())})
    df = pd.DataFrame(rows)
    print(f"random 70 % guesses, seeds 0..{n_seeds - 1}: friction error mean "
          f"{df.friction_error.mean():.3f} / "
          f"median {df.friction_error.median():.3f}; inertial error mean {df.inertial_error.mean():.3f} / "
          f"median {df.inertial_error.median():.3f}")


if __name__ == "__main__":
    main()
