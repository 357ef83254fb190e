"""Why the smoother lost to classical least squares on the UR10 log with exact truth (issue 9): one row per
hypothesis, each a single change of the smoother's settings, measured against the exact truth.

Data and noise protocol as in bench_external.py (``ur10_truth_*`` in ../shared/data: 10 s train at
100 Hz, exact q/v/a, no friction or armature in the truth, the prior = the ``nominal`` column of
ur10_truth_parameters.csv, N(0, (f·rms_j)²) on τ_j and N(0, σ_q²) on q; levels low f = 1 %, σ_q = 1e-5 rad
and high 5 %, 1e-4 rad; repetition i uses RandomState(101 + i)). Columns:

* ``base_err_%``: ‖K(p̂ − p)‖/‖K p‖ over the identifiable combinations of the validation motion;
* ``exact_states_%``: held-out relative RMSE of the efforts at the analytic validation q, v, a;
* ``train_a_err_%``: relative RMSE of the smoother's training accelerations against the analytic ones
  (``ur10_truth_train_accel.csv``) — how much of the effort noise the accelerations absorbed;
* ``armature_elbow``: the estimated elbow armature [kg·m²] (truth 0).

Variants (``--variants``, default all): ``before`` = the process noise of every release before issue 9
(0.3 × RMS acceleration per step: ``process_from_log=False``), ``default`` = the current default
(tightened to the logged velocities' integration residual, `estimation.process_noise`), then one change
each on top of ``before``: a 10× weaker parameter prior, no friction, no armature, the true per-joint
effort σ, 200 iterations, the exponential-eigenvalue parameterization, a 30× / 100× smaller fixed
process fraction.

Usage: python benchmarks/bench_ur10_causes.py [--levels low high] [--repeats 1] [--variants ...]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from bench_external import DATA, UR10_LEVELS, _noisy, _quiet, _ur10_truth

from fg_sysid.datasets.io import read_log
from fg_sysid.estimation.baseline import LeastSquaresSG
from fg_sysid.estimation.metrics import base_parameter_error, classical_vector, relative_rmse
from fg_sysid.estimation.smoother import JointSmoother
from fg_sysid.robots import load_robot
from fg_sysid.validation import model_spec, predict_efforts

BEFORE = {"process_from_log": False}
VARIANTS = {
    "before": BEFORE,
    "default": {},
    "before + prior 10x weaker": {**BEFORE, "prior_relative": 7.0},
    "before + no friction": {**BEFORE, "fit_friction": False},
    "before + no armature": {**BEFORE, "fit_armature": False},
    "before + true per-joint sigma_tau": {**BEFORE, "sigma_tau": "truth"},
    "before + 200 iterations": {**BEFORE, "max_iterations": 200},
    "before + exponential-eigenvalue": {**BEFORE, "inertia": "exponential-eigenvalue"},
    "before + process fraction 0.01": {**BEFORE, "process_fraction": 0.01},
    "before + process fraction 0.003": {**BEFORE, "process_fraction": 0.003},
    "default + no friction": {"fit_friction": False},
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--levels", nargs="+", default=["low", "high"], choices=list(UR10_LEVELS))
    ap.add_argument("--repeats", type=int, default=1, help="noise repetitions (<= 5)")
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    ap.add_argument("--out", default="benchmarks/results/ur10_causes.csv")
    args = ap.parse_args()
    robot0 = _quiet(load_robot, str(DATA / "ur10_truth.urdf"))
    P_true, P_nom = _ur10_truth(robot0, DATA)
    robot = dataclasses.replace(robot0, model=robot0.pinocchio_model_with(P_nom))
    train = _quiet(read_log, DATA / "ur10_truth_train.csv", robot)
    val = _quiet(read_log, DATA / "ur10_truth_validation.csv", robot)
    cols = [f"a.{j}" for j in robot.joint_names]
    a_val = pd.read_csv(DATA / "ur10_truth_validation_accel.csv")[cols].to_numpy()
    a_tr = pd.read_csv(DATA / "ur10_truth_train_accel.csv")[cols].to_numpy()
    rms = np.array(json.loads((DATA / "ur10_truth_train.meta.json").read_text())["training_tau_rms_nm"])
    p_true = np.concatenate([P_true.ravel(), np.zeros(3 * robot.n_joints)])
    elbow = robot.joint_names.index("elbow_joint")

    def score(spec_or_p, p):
        tau = predict_efforts(spec_or_p, robot, val.q, val.v, a_val)
        return (100 * base_parameter_error(robot, p, p_true, val.q, val.v, a_val),
                100 * relative_rmse(tau, val.tau))

    rows = []
    for level in args.levels:
        frac, sq = UR10_LEVELS[level]
        for i in range(max(1, min(5, args.repeats))):
            tr = _noisy(train, 101 + i, frac, sq, rms)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ls = LeastSquaresSG().fit(tr, robot).result_
            b, e = score(model_spec(ls, robot, "ur10"), ls.estimate)
            rows.append({"level": level, "repeat": i, "variant": "LS-SG", "base_err_%": b,
                         "exact_states_%": e,
                         "armature_elbow": ls.estimate[-robot.n_joints + elbow]})
            for name in args.variants:
                opt = dict(VARIANTS[name])
                if opt.get("sigma_tau") == "truth":
                    opt["sigma_tau"] = frac * rms
                t0 = time.process_time()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    sm = JointSmoother(robot, **opt).fit(tr)
                res = sm.result_
                spec = model_spec(res, robot, "ur10", sg_filter=sm.init_filter_)
                names = spec["layout"]["names"]
                p = classical_vector(names, [spec["physical"][k] for k in names])
                b, e = score(spec, p)
                a = sm.states_[2]
                rows.append({"level": level, "repeat": i, "variant": name, "base_err_%": b,
                             "exact_states_%": e,
                             "train_a_err_%": 100 * np.sqrt(np.mean((a - a_tr) ** 2) / np.mean(a_tr ** 2)),
                             "armature_elbow": spec["physical"]["elbow_joint.armature"],
                             "iterations": len(res.history), "converged": bool(res.converged),
                             "cpu_s": time.process_time() - t0})
                print(f"  [{level} rep {i}] {name}: base {b:.3f} %, exact {e:.3f} %", flush=True)
    df = pd.DataFrame(rows)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(args.out, index=False)
    agg = df.groupby(["level", "variant"], sort=False).mean(numeric_only=True).drop(columns="repeat")
    print(f"\nUR10 with exact truth, mean over {args.repeats} repetition(s):")
    print(agg.round(3).to_markdown())


if __name__ == "__main__":
    main()
