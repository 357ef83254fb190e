"""Logs from outside the project as benchmark rows (issue 9, item 6): TIAGo, UR10 with exact truth, SO-101.

Data: ../shared/data (README.md and the ``.meta.json`` files there). Methods (benchlib.METHODS): the
smoother with defaults (`fg-sysid identify`), the cross-validated classical fit (`--method ls-sg`), the
nominal model. Held-out efforts through the `fg-sysid predict` path (logged v, SG accelerations with the
training fit's window).

* **tiago** — real hardware, blocked split: train rows 921–4799, held out rows 4800–6790; effort RMSE
  [N·m] of arm_2–arm_4 (the reliable efforts, meta file) per joint and pooled
  (sqrt of the mean of the three per-joint mean squares); physical consistency of every arm body.
* **ur10** — simulated UR10e with exact inertial truth (no friction/armature), 10 s train / 8 s
  validation at 100 Hz. Noise protocol of the meta file: N(0, (f·rms_j)²) on τ_j with rms_j the training
  τ RMS, N(0, σ_q²) on q; levels ``low`` (f = 1 %, σ_q = 1e-5 rad) and ``high`` (5 %, 1e-4 rad);
  repetition i uses ``numpy.random.RandomState(101 + i)`` (train) / ``(201 + i)`` (validation), drawing
  q's noise then τ's (our reading: the protocol.yaml itself is not in the data folder). The prior
  (nominal) is the ``nominal`` column of ur10_truth_parameters.csv — the URDF carries the truth. Reported:
  base-parameter error ‖K(p̂ − p)‖/‖K p‖ over the identifiable combinations (QR of the validation
  motion's regressor, metrics.base_parameter_error), held-out relative RMSE vs the noise-free validation
  efforts (predict path on the noisy validation log) and with the exact analytic states (model error
  only).
* **so101** — simulated SO-101 (friction, offsets, quantised current), slow motion; train on the train
  file, held-out relative RMSE on the validation file (vs measured and vs noise-free efforts); per body
  whether the smoother's report says the log or the prior set the mass, COM and rotational inertia
  (`IdentificationResult.physical_quantities`, std_ratio thresholds 0.5 / 0.9), and the mass / first-
  moment errors against the meta file's truth; diagnostic: the masses of the same fit on efforts with
  the meta file's true offsets removed.

Usage: python benchmarks/bench_external.py [--datasets tiago ur10 so101] [--methods smoother ls-sg nominal]
       [--ur10-levels low high] [--ur10-repeats 1] [--quick] [--data DIR]
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
from benchlib import DEFAULT_METHODS, METHODS, check_methods, fit, fit_all, predict

from fg_sysid.datasets.io import load_log_for_robot, read_log
from fg_sysid.estimation.metrics import base_parameter_error, classical_vector, relative_rmse
from fg_sysid.robots import INERTIAL_SUFFIXES, load_robot
from fg_sysid.validation import predict_efforts

#: ../shared/data next to the checkout (a git worktree one level deeper: ../../shared/data)
DATA = next((p / "shared" / "data" for p in Path(__file__).resolve().parents[2:4]
             if (p / "shared" / "data").is_dir()), Path(__file__).resolve().parents[2] / "shared" / "data")
TIAGO_TRAIN, TIAGO_HELD = (921, 4800), (4800, 6791)
TIAGO_REPORT = ["arm_2_joint", "arm_3_joint", "arm_4_joint"]
UR10_LEVELS = {"low": (0.01, 1e-5), "high": (0.05, 1e-4)}
UR10_SUFFIX = {"m": "m", "mcx": "mx", "mcy": "my", "mcz": "mz", "ixx": "Ixx", "ixy": "Ixy", "iyy": "Iyy",
               "ixz": "Ixz", "iyz": "Iyz", "izz": "Izz"}


def _quiet(fn, *a, **k):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*a, **k)


# ---------------------------------------------------------------------------------------------- TIAGo
def bench_tiago(data: Path, methods, quick: bool) -> pd.DataFrame:
    robot, log = _quiet(load_log_for_robot, data / "tiago_dynamic_2021-07-01.csv", "tiago")
    train = log.slice(*TIAGO_TRAIN)
    held = log.slice(*TIAGO_HELD)
    if quick:
        train, held = log.slice(921, 1900), log.slice(4800, 5300)
    fits = fit_all(methods, robot, train, "tiago", progress="[tiago] ")
    idx = [robot.joint_names.index(j) for j in TIAGO_REPORT]
    rows = []
    for m, f in fits.items():
        tau, _, _ = predict(f, robot, held)
        rmse = np.sqrt(np.mean((tau[:, idx] - held.tau[:, idx]) ** 2, axis=0))
        row = {"method": m, **{j.replace("_joint", ""): r for j, r in zip(TIAGO_REPORT, rmse, strict=True)}}
        row["pooled_Nm"] = float(np.sqrt(np.mean(rmse**2)))
        row.update(seconds=f["seconds"], cpu_seconds=f["cpu_seconds"],
                   iterations=f["iterations"], converged=f["converged"],
                   consistent=f["consistent"])
        rows.append(row)
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------- UR10
def _ur10_truth(robot, data: Path) -> tuple[np.ndarray, np.ndarray]:
    """(truth, nominal) inertial parameters (n_bodies, 10) from ur10_truth_parameters.csv (per joint)."""
    df = pd.read_csv(data / "ur10_truth_parameters.csv").set_index("parameter")
    out = []
    for col in ("truth", "nominal"):
        P = np.array([[df.loc[f"{UR10_SUFFIX[s]}_{j}", col] for s in INERTIAL_SUFFIXES]
                      for j in robot.joint_names], float)
        out.append(P)
    return out[0], out[1]


def _noisy(log, seed: int, tau_frac: float, sigma_q: float, tau_rms: np.ndarray):
    rs = np.random.RandomState(seed)
    q = log.q + rs.normal(0.0, sigma_q, log.q.shape)
    tau = log.tau + rs.normal(0.0, 1.0, log.tau.shape) * (tau_frac * tau_rms)
    return dataclasses.replace(log, q=q, tau=tau, source=f"{log.source} (noise seed {seed})")


def load_ur10(data: Path):
    """The UR10 set with exact truth: (urdf path, robot with the NOMINAL inertias — the URDF carries the
    truth, so the estimators' prior must be the nominal column —, P_true, P_nom, training log, validation
    log, validation accelerations (N, n) [rad/s²], training effort RMS per joint [N·m])."""
    urdf = data / "ur10_truth.urdf"
    robot0 = _quiet(load_robot, str(urdf))
    P_true, P_nom = _ur10_truth(robot0, data)
    robot = dataclasses.replace(robot0, model=robot0.pinocchio_model_with(P_nom))
    train = _quiet(read_log, data / "ur10_truth_train.csv", robot)
    val = _quiet(read_log, data / "ur10_truth_validation.csv", robot)
    acc = pd.read_csv(data / "ur10_truth_validation_accel.csv")
    a_val = acc[[f"a.{j}" for j in robot.joint_names]].to_numpy()
    meta = json.loads((data / "ur10_truth_train.meta.json").read_text())
    rms = np.array(meta["training_tau_rms_nm"], float)
    return urdf, robot, P_true, P_nom, train, val, a_val, rms


def bench_ur10(data: Path, methods, levels, repeats: int) -> pd.DataFrame:
    urdf, robot, P_true, P_nom, train, val, a_val, rms = load_ur10(data)
    n = robot.n_joints
    p_true = np.concatenate([P_true.ravel(), np.zeros(3 * n)])  # no friction, no armature
    rows = []
    for level in levels:
        frac, sq = UR10_LEVELS[level]
        for i in range(repeats):
            tr = _noisy(train, 101 + i, frac, sq, rms)
            va = _noisy(val, 201 + i, frac, sq, rms)
            p_nom = np.concatenate([P_nom.ravel(), np.zeros(3 * n)])
            fits = fit_all(methods, robot, tr, str(urdf), nominal=p_nom, progress=f"[ur10 {level} rep {i}] ")
            for m, f in fits.items():
                model = f["model"]
                # physical vector in the metric's layout (inertial, fc, fv, armature): the friction shape
                # (tanh width vs, lead T) left out (the truth has no friction)
                names = model["layout"]["names"] if isinstance(model, dict) else None
                p = (classical_vector(names, [model["physical"][k] for k in names])
                     if isinstance(model, dict) else model)
                tau, _, _ = predict(f, robot, va)
                tau_exact = predict_efforts(model, robot, val.q, val.v, a_val)
                rows.append({"level": level, "repeat": i, "method": m,
                             "base_param_err_%": 100 * base_parameter_error(robot, p, p_true, val.q, val.v,
                                                                            a_val),
                             "heldout_rel_rmse_%": 100 * relative_rmse(tau, val.tau),
                             "exact_states_rel_rmse_%": 100 * relative_rmse(tau_exact, val.tau),
                             "seconds": f["seconds"], "cpu_seconds": f["cpu_seconds"],
                             "iterations": f["iterations"], "consistent": f["consistent"]})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------- SO-101
def bench_so101(data: Path, methods) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    robot, train = _quiet(load_log_for_robot, data / "so101_sim_train.csv", "so101")
    val = _quiet(read_log, data / "so101_sim_validation.csv", robot, locked_values=robot.locked_joints)
    truth_val = pd.read_csv(data / "so101_sim_validation_truth.csv")
    tau_clean = truth_val[[f"tau_true.{j}" for j in robot.joint_names]].to_numpy()
    meta = json.loads((data / "so101_sim_train.meta.json").read_text())
    fits = fit_all(methods, robot, train, "so101", progress="[so101] ")
    rows, bodies = [], None
    for m, f in fits.items():
        tau, _, _ = predict(f, robot, val)
        rows.append({"method": m, "heldout_rel_rmse_vs_measured_%": 100 * relative_rmse(tau, val.tau),
                     "heldout_rel_rmse_vs_noise_free_%": 100 * relative_rmse(tau, tau_clean),
                     "seconds": f["seconds"], "cpu_seconds": f["cpu_seconds"], "iterations": f["iterations"],
                     "consistent": f["consistent"]})
        res = f["result"]
        if m == "smoother" and res is not None:
            pq = res.physical_quantities()
            truth = meta["truth"]["bodies_m_first_moment"]
            joint_of = dict(zip(robot.body_names, robot.joint_names, strict=True))
            est = res.inertial()
            recs = []
            for k, b in enumerate(robot.body_names):
                tb = truth.get(joint_of[b])
                rec = pq.iloc[k][["body", "mass_set_by", "com_set_by", "inertia_set_by"]].to_dict()
                rec["joint"] = joint_of[b]
                rec["inertia_std_ratio_min"] = float(np.min(res.std_ratio[10 * k + 4: 10 * k + 10]))
                if tb is not None:
                    rec["mass_err_%"] = 100 * (est[k, 0] - tb["m"]) / tb["m"]
                    mc = np.array([tb["mx"], tb["my"], tb["mz"]])
                    rec["first_moment_err_%"] = 100 * np.linalg.norm(est[k, 1:4] - mc) / np.linalg.norm(mc)
                recs.append(rec)
            bodies = pd.DataFrame(recs)
    if bodies is not None:  # diagnostic: the same fit on efforts with the true offsets removed
        off = np.array([meta["truth"]["offset"][j] for j in robot.joint_names])
        clean = fit("smoother", robot, dataclasses.replace(train, tau=train.tau - off), "so101")["result"]
        pq = clean.physical_quantities()
        m_true = np.array([meta["truth"]["bodies_m_first_moment"][j]["m"] for j in bodies.joint])
        bodies["mass_err_no_offset_%"] = 100 * (clean.inertial()[:, 0] - m_true) / m_true
        bodies["mass_set_by_no_offset"] = pq["mass_set_by"].to_numpy()
    return pd.DataFrame(rows), bodies


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", nargs="+", default=["tiago", "ur10", "so101"],
                    choices=["tiago", "ur10", "so101"])
    ap.add_argument("--methods", nargs="+", default=list(DEFAULT_METHODS), help=f"of {', '.join(METHODS)}")
    ap.add_argument("--ur10-levels", nargs="+", default=["low", "high"], choices=list(UR10_LEVELS))
    ap.add_argument("--ur10-repeats", type=int, default=1, help="noise repetitions (<= 5)")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: short TIAGo split, UR10 low level once, SO-101 (all methods given)")
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--out", default="benchmarks/results/external")
    args = ap.parse_args()
    methods = check_methods(args.methods)
    data = Path(args.data)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.quick:
        args.ur10_levels, args.ur10_repeats = ["low"], 1
    if "tiago" in args.datasets:
        t0 = time.perf_counter()
        df = bench_tiago(data, methods, args.quick)
        df.to_csv(out / "tiago.csv", index=False)
        print(f"\nTIAGo (real), train rows {TIAGO_TRAIN[0]}–{TIAGO_TRAIN[1] - 1}, held out "
              f"{TIAGO_HELD[0]}–{TIAGO_HELD[1] - 1}: held-out effort RMSE [N·m] "
              f"({time.perf_counter() - t0:.0f} s)")
        print(df.round(3).to_markdown(index=False), flush=True)
    if "ur10" in args.datasets:
        t0 = time.perf_counter()
        df = bench_ur10(data, methods, args.ur10_levels, max(1, min(5, args.ur10_repeats)))
        df.to_csv(out / "ur10.csv", index=False)
        print(f"\nUR10 (exact truth), noise protocol of the meta file ({time.perf_counter() - t0:.0f} s):")
        cols = ["base_param_err_%", "heldout_rel_rmse_%", "exact_states_rel_rmse_%", "seconds", "cpu_seconds"]
        agg = df.groupby(["level", "method"])[cols].mean()
        print(agg.round(3).to_markdown(), flush=True)
    if "so101" in args.datasets:
        t0 = time.perf_counter()
        df, bodies = bench_so101(data, methods)
        df.to_csv(out / "so101.csv", index=False)
        print(f"\nSO-101 (simulated, slow), held-out relative RMSE ({time.perf_counter() - t0:.0f} s):")
        print(df.round(3).to_markdown(index=False))
        if bodies is not None:
            bodies.to_csv(out / "so101_bodies.csv", index=False)
            print("\nSO-101 smoother: who set each body's quantities (report), and errors vs the truth:")
            print(bodies.round(3).to_markdown(index=False))
    print(f"\nrows in {out}/")


if __name__ == "__main__":
    main()
