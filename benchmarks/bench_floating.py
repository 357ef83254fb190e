"""Floating-base benchmark (issue 3): MuJoCo B1 / B1+Z1 logs, joint smoother vs decoupled LS vs nominal URDF.

For each noise level σ: a training log (stance sway, or a trot with ``--motion trot``) and a held-out log of
the SAME robot (same drawn truth: inertias, friction, armature) with another motion (a sway of another
amplitude, by default), both from MuJoCo with soft contacts (`fg_sysid.datasets.mujoco_sim`).

Reported per method:

* held-out joint-effort relative RMSE, predicted from the held-out log's states (SG on the manifold) and its
  measured contact forces (`floating_validation.floating_heldout_report`, mode "forces"); ``floor`` = the
  same prediction with the TRUE parameters (the simulator never matches the rigid-body model exactly:
  soft contacts, dry friction, rolling feet), and the ratio to that floor;
* total-mass error; for the smoother also the base orientation / position error of the smoothed
  trajectory against the simulator's truth, the largest constraint residuals, time per iteration.

Run: ``.venv/bin/python benchmarks/bench_floating.py --robot b1 --noise 0 0.005 0.01`` (see --help).
Results are printed as a table and written to ``benchmarks/results/floating_<robot>.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from fg_sysid.datasets.mujoco_sim import draw_truth, simulate_stance, to_log
from fg_sysid.estimation.baseline import parameter_names
from fg_sysid.estimation.floating_baseline import DecoupledFloatingBaseLS
from fg_sysid.estimation.floating_smoother import FloatingBaseSmoother, full_configuration
from fg_sysid.estimation.metrics import base_pose_errors
from fg_sysid.floating_validation import floating_heldout_report
from fg_sysid.robots import load_robot
from fg_sysid.validation import nominal_model

OUT = Path(__file__).parent / "results"
WINDOWS = (0.03, 0.05, 0.1, 0.2)  # held-out SG windows [s]


def truth_vector(robot, truth: dict) -> np.ndarray:
    names = parameter_names(robot)
    return np.array([truth["parameters"][n] for n in names], float)


def run(robot_name: str, sigma: float, args) -> dict:
    robot = load_robot(robot_name)
    drawn = draw_truth(robot, args.seed)
    common = dict(inertial=drawn["inertial"], friction=(drawn["fc"], drawn["fv"]), armature=drawn["armature"])
    train = simulate_stance(
        robot, args.duration, args.rate, seed=args.seed, noise=sigma, motion=args.motion, **common
    )
    held = simulate_stance(
        robot,
        args.heldout_duration,
        args.rate,
        seed=args.seed + 1000,
        noise=sigma,
        motion=args.heldout_motion,
        sway_amplitude=args.heldout_amplitude,
        **common,
    )
    log_train, log_held = to_log(train), to_log(held)
    p_true = truth_vector(robot, train.truth)
    radius = float(train.truth["foot_radius"])
    feet = tuple(train.foot_frames)
    m_true = float(drawn["inertial"][:, 0].sum())

    def heldout(model, window_s, mode="forces"):
        return floating_heldout_report(
            model,
            robot,
            log_held,
            window_s=window_s,
            contact_frames=feet,
            contact_radius=radius,
            mode=mode,
        )["overall"]

    def consistent(key, model):  # the same, in the contact-consistent subspace (no forces needed)
        row[f"{key}_contact_consistent"] = heldout(model, window, "contact-consistent")

    # the held-out accelerations come from a Savitzky–Golay filter of the held-out log; its window is the
    # one (of a grid) that gives the TRUE parameters the smallest error, used for every method
    floors = {w: heldout(p_true, w) for w in WINDOWS}
    window = min(floors, key=floors.get)
    row = {"robot": robot_name, "noise": sigma, "total_mass_true": m_true, "heldout_window_s": window}
    row["floor"] = floors[window]
    row["nominal"] = heldout(nominal_model(robot), window)
    consistent("floor", p_true)
    consistent("nominal", nominal_model(robot))
    # decoupled baseline
    t0 = time.perf_counter()
    base = DecoupledFloatingBaseLS().fit(
        full_configuration(log_train, robot),
        log_train.t,
        np.asarray(log_train.tau),
        log_train.contacts,
        robot,
    )
    row["decoupled_seconds"] = time.perf_counter() - t0
    row["decoupled"] = heldout(base.result_.estimate, window)
    consistent("decoupled", base.result_.estimate)
    row["decoupled_mass_error"] = float(base.result_.estimate[: 10 * robot.n_bodies : 10].sum() / m_true - 1)
    # joint smoother (no force measurements: the identification uses encoders, IMU, base pose, efforts)
    kw = dict(knot_stride=args.stride, contact_radius=radius, use_forces=False, verbose=args.verbose)
    kw.update(args.smoother_kwargs)
    if args.known_mass:
        kw.update(total_mass=m_true, total_mass_std=0.0)
    sm = FloatingBaseSmoother(robot, feet, **kw)
    t0 = time.perf_counter()
    sm.fit(log_train)
    row["smoother_seconds"] = time.perf_counter() - t0
    res = sm.result_
    fb = res.extras["floating_base"]
    row["smoother"] = heldout(res, window)
    consistent("smoother", res)
    row["smoother_mass_error"] = float(fb["total_mass_estimate"] / m_true - 1)
    ang, pos = base_pose_errors(train.q_pin[sm._idx], sm.state_["q"])
    row.update(
        orientation_max_deg=float(ang.max()),
        orientation_rms_deg=float(np.sqrt(np.mean(ang**2))),
        position_max_m=float(pos.max()),
        position_rms_m=float(np.sqrt(np.mean(pos**2))),
    )
    row["constraint_residual_max"] = fb["constraint_residual_max"]
    row["knots"] = res.knots
    row["iterations"] = len(res.history)
    row["seconds_per_iteration"] = (
        float(np.mean([h["seconds"] for h in res.history])) if res.history else None
    )
    row["projected_bodies"] = len(getattr(sm, "projected_bodies_", []))
    for k in ("nominal", "decoupled", "smoother"):
        row[f"{k}_over_floor"] = row[k] / row["floor"]
    return row


def scaling(robot_name: str, knots=(100, 200, 400, 800), stride: int = 5, rate: float = 500.0) -> list[dict]:
    """Seconds per LM iteration (linearization with Jacobians + O(N) solve + one trial cost) vs knots."""
    robot = load_robot(robot_name)
    res = simulate_stance(robot, max(knots) * stride / rate + 0.1, rate, seed=0, noise=0.005, motion="sway",
                          randomize=True)
    log = to_log(res)
    rows = []
    for n in knots:
        sub = log.slice(0, n * stride)
        sm = FloatingBaseSmoother(robot, tuple(res.foot_frames), knot_stride=stride, contact_radius=0.02,
                                  use_forces=False, max_iterations=1, reweight_rounds=0, constraints="soft",
                                  determined_std_ratio=None, init="prior").fit(sub)
        st = sm.state_
        x, th = (st["q"], st["v"], st["a"], st["lam"]), sm.result_.theta
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            g = sm._linearize(x, th, sm.noise_)
            step = sm._solver.solve(g, 1e-4)
            sm._linearize(sm._retract(x, step.dx), th + step.dtheta, sm.noise_, jacobians=False).cost()
            times.append(time.perf_counter() - t0)
        rows.append({"knots": int(st["q"].shape[0]), "seconds_per_iteration": float(np.median(times))})
        print(f"{robot_name}: {rows[-1]['knots']} knots: {rows[-1]['seconds_per_iteration']:.3f} s/iteration "
              f"({1e3 * rows[-1]['seconds_per_iteration'] / rows[-1]['knots']:.2f} ms/knot)", flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--robot", default="b1", choices=["b1", "b1_z1"])
    ap.add_argument("--noise", type=float, nargs="+", default=[0.0, 0.005, 0.01])
    ap.add_argument("--duration", type=float, default=None,
                    help="training log [s] (default 4 s; 9.6 s = four step cycles for --motion steps)")
    ap.add_argument("--heldout-duration", type=float, default=3.0)
    ap.add_argument("--rate", type=float, default=500.0, help="log rate [Hz]")
    ap.add_argument("--stride", type=int, default=5, help="knot stride (knots every stride samples)")
    ap.add_argument("--motion", default="sway", choices=["sway", "trot", "steps"])
    ap.add_argument("--heldout-motion", default="sway", choices=["sway", "trot"])
    ap.add_argument("--heldout-amplitude", type=float, default=0.14)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--known-mass", action="store_true", help="give the smoother the true total mass (hard)")
    ap.add_argument(
        "--smoother", default="", help="extra FloatingBaseSmoother kwargs, e.g. \"constraints='soft'\""
    )
    ap.add_argument("--tag", default="")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--scaling", action="store_true", help="time per iteration vs knots instead")
    args = ap.parse_args()
    args.smoother_kwargs = eval(f"dict({args.smoother})")  # benchmark-only convenience
    if args.duration is None:
        args.duration = 9.6 if args.motion == "steps" else 4.0
    if args.scaling:
        rows = scaling(args.robot)
        OUT.mkdir(exist_ok=True)
        (OUT / f"floating_scaling_{args.robot}.json").write_text(json.dumps(rows, indent=1))
        return
    rows = []
    for s in args.noise:
        row = run(args.robot, s, args)
        rows.append(row)
        print(
            f"σ={s:g}: floor {row['floor']:.4f} | nominal {row['nominal']:.4f} "
            f"({row['nominal_over_floor']:.2f}x)"
            f" | decoupled {row['decoupled']:.4f} ({row['decoupled_over_floor']:.2f}x, mass "
            f"{100 * row['decoupled_mass_error']:+.2f} %) | smoother {row['smoother']:.4f} "
            f"({row['smoother_over_floor']:.2f}x, mass {100 * row['smoother_mass_error']:+.2f} %, "
            f"orientation max {row['orientation_max_deg']:.3f}°, "
            f"position max {1e3 * row['position_max_m']:.2f} mm, "
            f"constraints max {max(row['constraint_residual_max'].values()):.1e}, "
            f"{row['smoother_seconds']:.0f} s, {row['iterations']} it, "
            f"{row['seconds_per_iteration']:.3f} s/it, {row['knots']} knots); contact-consistent: floor "
            f"{row['floor_contact_consistent']:.4f}, nominal {row['nominal_contact_consistent']:.4f}, "
            f"decoupled {row['decoupled_contact_consistent']:.4f}, "
            f"smoother {row['smoother_contact_consistent']:.4f}",
            flush=True,
        )
    OUT.mkdir(exist_ok=True)
    name = f"floating_{args.robot}_{args.motion}{('_' + args.tag) if args.tag else ''}.json"
    (OUT / name).write_text(
        json.dumps({"args": {k: v for k, v in vars(args).items()}, "rows": rows}, indent=1, default=float)
    )
    print(f"wrote {OUT / name}")


if __name__ == "__main__":
    main()
