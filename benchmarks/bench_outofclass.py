"""Out-of-class benchmark (issue 9): held-out torque error on arms whose truth is NOT the estimator's model.

For each robot, truth and noise level: a training log (default 20 s at 1 kHz, seed 0, Gaussian σ on q, v, τ)
and a noise-free held-out log (default 10 s, seed 1) of the *same* robot and sensors with another
excitation. Truths (`TRUTHS`; docs/out-of-class.md):

    in-class        the project's RK4 simulator with the estimator's own friction (fc·tanh(v/0.05) + fv·v)
    sharp           RK4, friction velocity scale 0.005 rad/s (10× sharper than the estimator's)
    stribeck        RK4, Stribeck friction fs = 1.5 fc, v_st = 0.1 rad/s, vs = 0.01 rad/s
    mujoco          MuJoCo arm: dry friction (frictionloss, stiction), damping, armature, 4 kHz controller
                    held zero-order between the 1 kHz log samples
    sensors         RK4 in-class dynamics, 4 kHz controller with ZOH, effort gain ±10 %, effort offset
                    ±2 % of the peak torque, 16-bit encoder quantization (2π/65536 rad)
    mujoco+sensors  both

Methods (benchlib.METHODS): the smoother with defaults (`fg-sysid identify`), the cross-validated
classical fit (`--method ls-sg`), the nominal URDF, optional variants. Held-out efforts through the
`fg-sysid predict` path (logged v, SG accelerations; since session 8 with the window the CV rule picks on
the *held-out* log, `heldout_filter.log_sg_filter`; the training fit's window in the ``*_training_window``
columns), scored against the held-out log's noise-free *logged* efforts (the sensor's gain/offset
included, no noise):

    held-out relative RMSE = sqrt(mean((τ_pred − τ_log)²)) / sqrt(mean(τ_log²))   (all joints and samples)

``floor`` = the true robot (true inertias, friction law, armature, effort gain/offset) through the same
SG states: what the prediction path alone costs. ``exact states`` = the same relative RMSE with the
model evaluated at the held-out log's true q, v, a (no SG path: the parameters' error alone; its floor is
0 for the RK4 truths, and MuJoCo's stiction for the MuJoCo truths). Each fitted model.json is kept in
``<out stem>_models/``. Stick samples (stick_floor.py; entries with true |v| < 0.02 rad/s): the exact-state
error on the sliding entries alone and the stick entries' share of it; on MuJoCo truths (``--oracle``
for all) ``oracle_%`` = the best tanh-law model fitted at the exact held-out states (the model class's
own floor), ``oracle_sliding_%`` its sliding part.

Usage: python benchmarks/bench_outofclass.py [--robots z1 panda] [--noises 0.01 0.1]
       [--truths sharp stribeck mujoco sensors] [--methods smoother ls-sg nominal]
       [--duration 20] [--heldout 10] [--rate 1000] [--quick] [--out benchmarks/results/outofclass.csv]
"""

from __future__ import annotations

import argparse
import json
import math
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pinocchio as pin
from benchlib import DEFAULT_METHODS, METHODS, check_methods, fit_all, predict
from stick_floor import oracle_tanh, split_error, stick_mask

from fg_sysid.datasets.simulate import Effects, simulate, stribeck_friction_torque, truth_arrays, truth_model
from fg_sysid.estimation.metrics import relative_rmse
from fg_sysid.heldout_filter import log_sg_filter
from fg_sysid.robots import load_robot
from fg_sysid.validation import heldout_accelerations, predict_efforts

SENSORS = {"control_rate": 4000.0, "effort_gain_error": 0.1, "effort_offset": 0.02,
           "encoder_resolution": 2 * math.pi / 2**16}
#: truth name -> (simulator, friction velocity scale, Effects)
TRUTHS = {
    "in-class": ("rk4", 0.05, Effects()),
    "sharp": ("rk4", 0.005, Effects()),
    "stribeck": ("rk4", 0.01, Effects(friction="stribeck", stribeck_ratio=1.5, stribeck_velocity=0.1)),
    "mujoco": ("mujoco", None, Effects()),
    "sensors": ("rk4", 0.05, Effects(**SENSORS)),
    "mujoco+sensors": ("mujoco", None, Effects(**{k: v for k, v in SENSORS.items() if k != "control_rate"})),
}
DEFAULT_TRUTHS = ("sharp", "stribeck", "mujoco", "sensors")


def simulate_truth(robot, truth_name: str, duration: float, rate: float, noise: float, seed: int,
                   truth: dict | None = None):
    simulator, vs, effects = TRUTHS[truth_name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if simulator == "mujoco":
            from fg_sysid.datasets.mujoco_sim import simulate_arm

            return simulate_arm(robot, duration, rate, noise, seed, truth=truth, effects=effects)
        return simulate(robot, duration, rate, noise, seed, friction_velocity_scale=vs, truth=truth,
                        effects=effects)


def true_friction(truth: dict, robot, v: np.ndarray) -> np.ndarray:
    """The truth's friction law at velocities v (N, n) [N·m] (MuJoCo's dry friction as fc·sign(v))."""
    arr = truth_arrays(truth, robot)
    fx = truth["friction"]
    if fx["model"] == "stribeck":
        fs = np.array([fx["fs"][j] for j in robot.joint_names])
        return stribeck_friction_torque(v, arr["fc"], fs, arr["fv"], fx["velocity_scale"],
                                        fx["stribeck_velocity"])
    if fx["model"] == "coulomb-viscous":
        return arr["fc"] * np.tanh(v / fx["velocity_scale"]) + arr["fv"] * v
    return arr["fc"] * np.sign(v) + arr["fv"] * v


def floor_prediction(truth: dict, robot, q, v, a) -> np.ndarray:
    """The true robot's logged efforts at (q, v, a): gain·(RNEA_true + armature·a + friction) + offset."""
    model = truth_model(truth, robot)
    data = model.createData()
    tau = np.array([pin.rnea(model, data, qk, vk, ak) for qk, vk, ak in zip(q, v, a, strict=True)])
    tau += true_friction(truth, robot, v)
    s = truth["sensors"]
    gain = np.array([s["effort_gain"][j] for j in robot.joint_names])
    offset = np.array([s["effort_offset"][j] for j in robot.joint_names])
    return gain * tau + offset


def _first_fit_iterations(result):
    """Iterations of `jerk_auto`'s first fit when it refitted (None otherwise)."""
    noise = getattr(result, "noise", None) or {}
    rec = noise.get("acceleration_process_auto") if isinstance(noise, dict) else None
    if not isinstance(rec, dict) or rec.get("chosen") != "on":
        return None
    return rec.get("first_fit", {}).get("iterations")


def run(robot_name, truth_name, noise, methods, duration, heldout, rate, model_dir=None,
        oracle: bool = False) -> list[dict]:
    robot = load_robot(robot_name)
    train = simulate_truth(robot, truth_name, duration, rate, noise, 0)
    held = simulate_truth(robot, truth_name, heldout, rate, 0.0, 1, truth=train.truth)
    ref = np.asarray(held.log.tau, float)
    fits = fit_all(methods, robot, train.log, robot_name, progress=f"[{robot_name} {truth_name} σ={noise}] ")
    rows = []
    floor = floor_train = None
    tl = held.truth_log
    # the predict path's window since session 8: the CV rule on the held-out log (model-independent)
    hf = log_sg_filter(held.log, robot)
    v_h, a_h, _ = heldout_accelerations(held.log, hf["window_s"], hf["polyorder"])
    stick = stick_mask(tl.v)
    extra = {"heldout_sg_window_ms": 1e3 * hf["window_s"], "heldout_sg_order": hf["polyorder"]}
    if oracle or TRUTHS[truth_name][0] == "mujoco":
        ta = held.truth_acceleration
        o_all, _ = oracle_tanh(robot, tl.q, tl.v, ta, ref)
        o_slide, _ = oracle_tanh(robot, tl.q, tl.v, ta, ref, weights=(~stick).astype(float))
        extra.update({"oracle_%": 100 * relative_rmse(o_all, ref),
                      "oracle_sliding_%": split_error(o_all, ref, stick)["sliding_%"],
                      "oracle_fit_sliding_only_sliding_%": split_error(o_slide, ref, stick)["sliding_%"],
                      "oracle_fit_sliding_only_%": 100 * relative_rmse(o_slide, ref)})
    for m, f in fits.items():
        tau_train, v, a = predict(f, robot, held.log)  # the training fit's window (before session 8)
        tau = predict_efforts(f["model"], robot, held.log.q, v_h, a_h)
        tau_exact = predict_efforts(f["model"], robot, tl.q, tl.v, held.truth_acceleration)
        split = split_error(tau_exact, ref, stick)
        if model_dir is not None and isinstance(f["model"], dict):
            Path(model_dir).mkdir(parents=True, exist_ok=True)
            (Path(model_dir) / f"{robot_name}_{truth_name}_{noise:g}_{m}.json").write_text(
                json.dumps(f["model"], indent=1))
        if floor_train is None and f["sg_filter"]:
            floor_train = 100 * relative_rmse(floor_prediction(train.truth, robot, held.log.q, v, a), ref)
        if floor is None:
            floor = 100 * relative_rmse(floor_prediction(train.truth, robot, held.log.q, v_h, a_h), ref)
        rows.append({"robot": robot_name, "truth": truth_name, "noise": noise, "method": m,
                     "heldout_rel_rmse_%": 100 * relative_rmse(tau, ref),
                     "heldout_training_window_%": 100 * relative_rmse(tau_train, ref),
                     "exact_states_rel_rmse_%": 100 * relative_rmse(tau_exact, ref),
                     "exact_sliding_%": split["sliding_%"], "exact_stick_share": split["stick_share"],
                     "stick_fraction": split["stick_fraction"], **extra, "seconds": f["seconds"],
                     "cpu_seconds": f["cpu_seconds"],
                     "iterations": f["iterations"], "converged": f["converged"],
                     # acceleration_process="auto": the first fit's iterations (the refit's are above)
                     "first_fit_iterations": _first_fit_iterations(f.get("result")),
                     "consistent": f["consistent"],
                     "sg_window_ms": 1e3 * f["sg_filter"].get("window_s", float("nan")),
                     # the smoother's friction law (with friction="auto": the one the selection chose)
                     "friction": (f["model"]["layout"].get("friction_model")
                                  if isinstance(f["model"], dict) and "layout" in f["model"] else None)})
    for r in rows:
        r["floor_%"] = floor
        r["floor_training_window_%"] = floor_train
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--robots", nargs="+", default=["z1", "panda"])
    ap.add_argument("--noises", nargs="+", type=float, default=[0.01, 0.1])
    ap.add_argument("--truths", nargs="+", default=list(DEFAULT_TRUTHS), choices=list(TRUTHS))
    ap.add_argument("--methods", nargs="+", default=list(DEFAULT_METHODS), help=f"of {', '.join(METHODS)}")
    ap.add_argument("--duration", type=float, default=20.0, help="training log [s]")
    ap.add_argument("--heldout", type=float, default=10.0, help="held-out log [s]")
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: Z1, σ = 0.01, truths sharp + mujoco, 3 s / 2 s logs")
    ap.add_argument("--oracle", action="store_true",
                    help="the tanh-law oracle at the exact held-out states on every truth (default: MuJoCo)")
    ap.add_argument("--out", default="benchmarks/results/outofclass.csv")
    args = ap.parse_args()
    methods = check_methods(args.methods)
    if args.quick:
        args.robots, args.noises, args.truths = ["z1"], [0.01], ["sharp", "mujoco"]
        args.duration, args.heldout = 3.0, 2.0
    rows = []
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    for r in args.robots:
        for s in args.noises:
            for tr in args.truths:
                t0 = time.perf_counter()
                rows += run(r, tr, s, methods, args.duration, args.heldout, args.rate,
                            model_dir=out.with_name(out.stem + "_models"), oracle=args.oracle)
                print(f"[{r} {tr} σ={s}] done in {time.perf_counter() - t0:.0f} s", flush=True)
                pd.DataFrame(rows).to_csv(out, index=False)  # partial results survive an interruption
    df = pd.DataFrame(rows)
    print("\nheld-out relative RMSE [%] (vs the noise-free logged efforts); floor = true robot, same path:")
    wide = df.pivot_table(index=["robot", "noise", "truth"], columns="method", values="heldout_rel_rmse_%")
    wide["floor"] = df.groupby(["robot", "noise", "truth"])["floor_%"].first()
    if "smoother" in wide and "ls-sg" in wide:
        wide["smoother / ls-sg"] = wide["smoother"] / wide["ls-sg"]
    print(wide.round(3).to_markdown())
    print("\nthe same with the training fit's SG window (the predict path before session 8):")
    wt = df.pivot_table(index=["robot", "noise", "truth"], columns="method",
                        values="heldout_training_window_%")
    wt["floor"] = df.groupby(["robot", "noise", "truth"])["floor_training_window_%"].first()
    print(wt.round(3).to_markdown())
    print("\nSG window [ms] / order: training fit (smoother) | held-out log's own CV:")
    win = ["sg_window_ms", "heldout_sg_window_ms", "heldout_sg_order"]
    print(df.groupby(["robot", "noise", "truth"])[win].first().round(1).to_markdown())
    print("\nexact states, sliding entries only (true |v| ≥ 0.02 rad/s) [%] / stick entries' share of the "
          "squared error:")
    print(df.pivot_table(index=["robot", "noise", "truth"], columns="method",
                         values=["exact_sliding_%", "exact_stick_share"]).round(3).to_markdown())
    if "oracle_%" in df:
        print("\ntanh-law oracle at the exact held-out states (the model class's floor) [%]:")
        cols = ["stick_fraction", "oracle_%", "oracle_sliding_%", "oracle_fit_sliding_only_%",
                "oracle_fit_sliding_only_sliding_%"]
        print(df.dropna(subset=["oracle_%"]).groupby(["robot", "noise", "truth"])[cols].first().round(4)
              .to_markdown())
    print("\nthe same with the true held-out states (q, v, a; parameter error only):")
    print(df.pivot_table(index=["robot", "noise", "truth"], columns="method",
                         values="exact_states_rel_rmse_%").round(3).to_markdown())
    if df["friction"].notna().any():
        print("\nfriction law of each fit (smoother: chosen by --friction auto):")
        print(df.pivot_table(index=["robot", "noise", "truth"], columns="method", values="friction",
                             aggfunc="first").to_markdown())
    fitted = df[df.seconds > 0]
    if len(fitted):
        print("\nper fit: wall time / CPU time [s] (iterations):")
        cells = [f"{s:.0f} / {c:.0f} ({i})"
                 for s, c, i in zip(fitted.seconds, fitted.cpu_seconds, fitted.iterations, strict=True)]
        t = fitted.assign(cell=cells)
        print(t.pivot_table(index=["robot", "noise", "truth"], columns="method", values="cell",
                            aggfunc="first").to_markdown())
    print(f"\nrows in {out}")


if __name__ == "__main__":
    main()
