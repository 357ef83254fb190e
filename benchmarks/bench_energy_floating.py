"""Work–energy observations on a floating base (issue 12, paper 004 Table I's quadruped row): the B1
smoother with and without the energy term, on MuJoCo logs (out of class: soft contacts, dry friction,
rolling feet) of the same drawn robot.

Per seed: a truth drawn around the URDF (`draw_truth`: inertias, Coulomb/viscous friction, armature), a
training trot and a held-out sway of the same robot, σ = ``--noise`` on every sensor. Both fits use the
defaults of `FloatingBaseSmoother` (no force measurements); ``--energy`` adds one work–energy row per knot
interval without a contact change (`FloatingBaseSmoother(energy=True)`), each row whitened by the input work's
sensor noise and the contact-work allowance (``energy_contact="allowance"``, the default; `energy_contact.py`)
or by the sensor noise alone (``--variants ...,energy-none``: the first version). Reported: friction error
(relative l2 over (fc, fv) of all joints), inertial error (relative l2), total-mass error, held-out
joint-effort relative RMSE (with the held-out log's contact forces) and its floor (true parameters), seconds.

    nice -n 10 python benchmarks/bench_energy_floating.py [--seeds 3] [--duration 4] [--motion trot]
        [--variants smoother,energy,energy-none] [--first-seed 0]
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import pandas as pd

from fg_sysid.datasets.mujoco_sim import draw_truth, simulate_stance, to_log
from fg_sysid.estimation.baseline import parameter_names
from fg_sysid.estimation.floating_smoother import FloatingBaseSmoother
from fg_sysid.floating_validation import floating_heldout_report
from fg_sysid.robots import load_robot


def _rel(a, b) -> float:
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-12))


def run(seed: int, args) -> list[dict]:
    robot = load_robot("b1")
    drawn = draw_truth(robot, seed)
    common = dict(inertial=drawn["inertial"], friction=(drawn["fc"], drawn["fv"]), armature=drawn["armature"])
    train = simulate_stance(robot, args.duration, args.rate, seed=seed, noise=args.noise, motion=args.motion,
                            **common)
    held = simulate_stance(robot, 3.0, args.rate, seed=seed + 1000, noise=args.noise, motion="sway",
                           sway_amplitude=0.5, **common)
    log_train, log_held = to_log(train), to_log(held)
    names = parameter_names(robot)
    p_true = np.array([train.truth["parameters"][n] for n in names], float)
    nb10, nj = 10 * robot.n_bodies, robot.n_joints
    fr = slice(nb10, nb10 + 2 * nj)
    feet, radius = tuple(train.foot_frames), float(train.truth["foot_radius"])

    def heldout(model):
        return floating_heldout_report(model, robot, log_held, window_s=0.05, contact_frames=feet,
                                       contact_radius=radius, mode="forces")["overall"]

    floor = heldout(p_true)
    rows = []
    for variant in args.variants.split(","):
        energy = variant != "smoother"
        contact = "none" if variant == "energy-none" else "allowance"
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sm = FloatingBaseSmoother(robot, feet, contact_radius=radius, use_forces=False,
                                      energy=energy, energy_contact=contact).fit(log_train)
        res = sm.result_
        order = {n: i for i, n in enumerate(res.names)}
        p = np.array([res.estimate[order[n]] for n in names], float)
        method = {"smoother": "smoother", "energy": "smoother+energy",
                  "energy-none": "smoother+energy (sensor σ)"}
        rows.append({"seed": seed, "method": method[variant],
                     "friction_error": _rel(p[fr], p_true[fr]),
                     "inertial_error": _rel(p[:nb10], p_true[:nb10]),
                     "mass_error": float(p[:nb10:10].sum() / p_true[:nb10:10].sum() - 1),
                     "heldout": heldout(res), "floor": floor,
                     "energy_rows": int(sm._energy_intervals().sum()) if energy else 0,
                     "seconds": time.perf_counter() - t0})
        print(f"seed {seed} {variant}: friction {rows[-1]['friction_error']:.3f}, held-out "
              f"{rows[-1]['heldout']:.4f} (floor {floor:.4f}), {rows[-1]['seconds']:.0f} s", flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--duration", type=float, default=4.0)
    ap.add_argument("--rate", type=float, default=500.0)
    ap.add_argument("--noise", type=float, default=0.005)
    ap.add_argument("--motion", default="trot", choices=("trot", "sway"))
    ap.add_argument("--variants", default="smoother,energy",
                    help="comma list of: smoother, energy (contact-work allowance), "
                         "energy-none (sensor σ only)")
    ap.add_argument("--first-seed", type=int, default=0)
    args = ap.parse_args()
    rows = []
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        rows += run(seed, args)
    df = pd.DataFrame(rows)
    pd.set_option("display.width", 200)
    print(f"\nB1 (MuJoCo, out of class), {args.motion} {args.duration:g} s at {args.rate:g} Hz, "
          f"σ = {args.noise}, means over {args.seeds} drawn robots:")
    cols = ["friction_error", "inertial_error", "mass_error", "heldout", "floor", "energy_rows", "seconds"]
    print(df.groupby("method")[cols].mean().to_string(float_format=lambda x: f"{x:.4g}"))
    w = df[df.method == "smoother"]
    for m in sorted(set(df.method) - {"smoother"}):
        e = df[df.method == m]
        if len(w) == len(e):
            for col in ("friction_error", "inertial_error"):
                a, b = w[col].to_numpy(), e[col].to_numpy()
                print(f"{m}: {col} change {100 * (b.mean() / a.mean() - 1):+.1f} % (mean), per seed "
                      + ", ".join(f"{100 * (y / x - 1):+.0f} %" for x, y in zip(a, b, strict=True)))


if __name__ == "__main__":
    main()
