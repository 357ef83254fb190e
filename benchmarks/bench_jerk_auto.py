"""``acceleration_process="auto"`` (issue 9, session 9): the absorption diagnostic of the default fit and
the auto choice on six logs, with the held-out error of the default (first) fit and of the auto result.

    python benchmarks/bench_jerk_auto.py [--cases z1-noisy z1-sharp ur10-low ur10-high tiago z1-inclass
                                          z1-mujoco] [--no-balance]

Cases (the logs of the benchmarks they come from; every fit `JointSmoother(robot,
acceleration_process="auto")`, otherwise defaults as in those benchmarks):

* **z1-noisy** — the σ = 0.1 Z1 log of tests/test_acceleration_scale.py (3 s at 500 Hz, seed 3, tanh width
  0.02 rad/s); base-parameter and held-out error (`study.runner.evaluate`, 2 s noise-free, seed 1003).
* **z1-sharp** — bench_damping.py's z1-sharp (3 s at 500 Hz, σ = 0.01, tanh width 0.005 rad/s); held-out
  relative RMSE at the exact states (2 s noise-free).
* **ur10-low / ur10-high** — bench_external.py's UR10 with exact truth, repetition 0; base-parameter error
  and held-out error through the predict path.
* **tiago** — bench_external.py's blocked split of the real TIAGo log; pooled arm_2–4 RMSE [N·m], predict
  path.
* **z1-inclass / z1-mujoco** — bench_outofclass.py's Z1 at σ = 0.01 (20 s at 1 kHz train, 10 s held out),
  in-class RK4 and MuJoCo truth; held-out relative RMSE through the predict path (the held-out log's CV
  window) and at the exact states.

Per case: the diagnostic (median Nyquist-band ratio R, per-joint range, ID redundancy fraction, lag-1
autocorrelation of a − a_SG), the choice, the default (first) fit's and the auto result's errors,
iterations and CPU seconds (process time of the whole auto fit: first fit, diagnostic, refit).
"""
from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import pandas as pd

CASES = ("z1-noisy", "z1-sharp", "ur10-low", "ur10-high", "tiago", "z1-inclass", "z1-mujoco")


def _quiet(fn, *a, **k):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*a, **k)


def _case(name):
    """(robot, training log, robot source, evaluate(result, filt) -> {metric: value})."""
    from fg_sysid.datasets.simulate import simulate
    from fg_sysid.estimation.metrics import base_parameter_error, classical_vector, relative_rmse
    from fg_sysid.robots import load_robot
    from fg_sysid.validation import model_spec, predict_efforts

    def spec(res, robot, src, filt):
        return model_spec(res, robot, src, sg_filter=filt)

    if name in ("z1-noisy", "z1-sharp"):
        from fg_sysid.factors.inverse_dynamics import InverseDynamicsResidual
        from fg_sysid.study.runner import evaluate

        robot = load_robot("z1")
        if name == "z1-noisy":
            sim = _quiet(simulate, robot, 3.0, 500.0, 0.1, 3, friction_velocity_scale=0.02)
            held = _quiet(simulate, robot, 2.0, 500.0, 0.0, 1003, truth=sim.truth)

            def ev(res, filt):
                order = {n: i for i, n in enumerate(res.names)}
                p = np.array([res.estimate[order[n]] for n in robot.parameter_names(("fc", "fv"))], float)
                e = evaluate(robot, p, sim.truth, held, 0.05)
                return {"base-param err %": 100 * e["inertial_base_error"],
                        "held-out": 100 * e["heldout_rmse"]}
            return robot, sim.log, "z1", ev
        train = _quiet(simulate, robot, 3.0, 500, 0.01, 0, friction_velocity_scale=0.005)
        held = _quiet(simulate, robot, 2.0, 500, 0.0, 1, truth=train.truth, friction_velocity_scale=0.005)
        t = held.truth_log

        def ev(res, filt):
            pred = InverseDynamicsResidual(res.layout).predict(t.q, t.v, held.truth_acceleration, res.theta)
            return {"held-out": 100 * relative_rmse(pred, t.tau)}
        return robot, train.log, "z1", ev
    if name.startswith("ur10"):
        from bench_external import DATA, UR10_LEVELS, _noisy, load_ur10

        urdf, robot, P_true, P_nom, train, val, a_val, rms = load_ur10(DATA)
        frac, sq = UR10_LEVELS[name.split("-")[1]]
        tr, va = _noisy(train, 101, frac, sq, rms), _noisy(val, 201, frac, sq, rms)
        n = robot.n_joints
        p_true = np.concatenate([P_true.ravel(), np.zeros(3 * n)])

        def ev(res, filt):
            from benchlib import predict

            model = spec(res, robot, str(urdf), filt)
            names = model["layout"]["names"]
            p = classical_vector(names, [model["physical"][k] for k in names])
            tau, _, _ = predict({"model": model, "sg_filter": filt}, robot, va)
            return {"base-param err %": 100 * base_parameter_error(robot, p, p_true, val.q, val.v, a_val),
                    "held-out": 100 * relative_rmse(tau, val.tau)}
        return robot, tr, str(urdf), ev
    if name == "tiago":
        from bench_external import DATA, TIAGO_HELD, TIAGO_REPORT, TIAGO_TRAIN
        from benchlib import predict

        from fg_sysid.datasets.io import load_log_for_robot

        robot, log = _quiet(load_log_for_robot, DATA / "tiago_dynamic_2021-07-01.csv", "tiago")
        train, held = log.slice(*TIAGO_TRAIN), log.slice(*TIAGO_HELD)
        idx = [robot.joint_names.index(j) for j in TIAGO_REPORT]

        def ev(res, filt):
            tau, _, _ = predict({"model": spec(res, robot, "tiago", filt), "sg_filter": filt}, robot, held)
            rmse = np.sqrt(np.mean((tau[:, idx] - held.tau[:, idx]) ** 2, axis=0))
            return {"held-out": float(np.sqrt(np.mean(rmse ** 2))),
                    "consistent": not res.consistency_problems()}
        return robot, train, "tiago", ev
    # z1-inclass / z1-mujoco: bench_outofclass.py's protocol (20 s / 10 s at 1 kHz, σ = 0.01)
    from bench_outofclass import simulate_truth

    from fg_sysid.heldout_filter import log_sg_filter
    from fg_sysid.validation import heldout_accelerations

    robot = load_robot("z1")
    truth = "in-class" if name == "z1-inclass" else "mujoco"
    train = simulate_truth(robot, truth, 20.0, 1000.0, 0.01, 0)
    held = simulate_truth(robot, truth, 10.0, 1000.0, 0.0, 1, truth=train.truth)
    ref = np.asarray(held.log.tau, float)
    hf = log_sg_filter(held.log, robot)
    v_h, a_h, _ = heldout_accelerations(held.log, hf["window_s"], hf["polyorder"])
    tl = held.truth_log

    def ev(res, filt):
        model = spec(res, robot, "z1", filt)
        return {"held-out": 100 * relative_rmse(predict_efforts(model, robot, held.log.q, v_h, a_h), ref),
                "exact states": 100 * relative_rmse(
                    predict_efforts(model, robot, tl.q, tl.v, held.truth_acceleration), ref)}
    return robot, train.log, "z1", ev


def run(name: str, balance: bool = True) -> dict:
    from fg_sysid.estimation import jerk_auto
    from fg_sysid.estimation.smoother import JointSmoother

    jerk_auto.RECORD_BALANCE = balance  # the hat-trace redundancy too (not used by the rule)
    robot, log, _, ev = _case(name)
    c0 = time.process_time()
    sm = _quiet(JointSmoother(robot, acceleration_process="auto").fit, log)
    cpu = time.process_time() - c0
    rec = sm.result_.noise["acceleration_process_auto"]
    first = sm.acceleration_auto_first_
    filt = dict(sm.init_filter_)
    e0 = ev(first, filt)
    e1 = ev(sm.result_, filt) if rec["chosen"] == "on" else e0
    R = np.asarray(rec["nyquist_ratio"], float)
    row = {"case": name, "R (median)": rec["value"], "R range": f"{np.nanmin(R):.3g}–{np.nanmax(R):.3g}",
           "ID redundancy fraction": rec["id_redundancy_fraction"],
           "lag-1 a−a_SG (median)": float(np.nanmedian(rec["lag1_a_minus_sg"])),
           f"fires (R > {jerk_auto.THRESHOLD:g})": rec["fires"]}
    for k, v in e0.items():
        row[f"default {k}"] = v
    for k, v in e1.items():
        row[f"auto {k}"] = v
    row.update({"default it.": rec["first_fit"]["iterations"],
                "auto it. (refit)": len(sm.result_.history) if rec["chosen"] == "on" else 0,
                "default CPU [s]": rec["first_fit"]["cpu_seconds"], "auto CPU [s]": cpu,
                "diagnostic CPU [s]": rec["seconds"], "hat-trace CPU [s]": rec["balance_seconds"]})
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    ap.add_argument("--no-balance", action="store_true", help="skip the hat-trace redundancy (faster)")
    args = ap.parse_args()
    rows = []
    for c in args.cases:
        rows.append(run(c, not args.no_balance))
        print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in rows[-1].items()}, flush=True)
    print(pd.DataFrame(rows).round(4).to_markdown(index=False))


if __name__ == "__main__":
    main()
