"""Noise balance (issue 9 item 4): whitened χ² per factor term at the smoother's solution, per redundancy.

For each case the fixed-base smoother is fitted (`fg-sysid identify` options; `--variants` adds
estimator options under test, entries of `VARIANTS`) and `fg_sysid.estimation.noise_balance.term_balance`
prints, per term (encoders, velocities, inverse dynamics, integration, parameter prior), the rows, χ², the
redundancy r_i = rows − tr(H_ii) (Hutchinson, 4 probes) and χ²/r_i (≈ 1 when the term's σ matches what
its residuals show; < 1: σ too large, > 1: too small). With ``--per-joint`` also per residual column.

Cases: ``z1-in-class`` (RK4 simulator, the estimator's own model class, σ = 0.01 on q, v, τ),
``z1-mujoco`` (MuJoCo arm: dry friction with stiction, 4 kHz controller; out of class), ``z1-sharp``
(RK4, friction velocity scale 0.005 rad/s; out of class), ``tiago`` (real TIAGo arm, the training block
of bench_external.py).

Held-out error of each fit through the `fg-sysid predict` path: Z1 cases on a 5 s noise-free log of the
same robot (relative RMSE [%], and with the true states), TIAGo on the held-out block of
bench_external.py (pooled RMSE of arm_2–arm_4 [N·m]). Variant ``vce``: the default fit, one step of
Helmert's variance-component estimation (`noise_balance.balanced_noise`), and a refit with those σ.

Usage: python benchmarks/bench_noise_balance.py [--cases z1-in-class z1-mujoco tiago] [--duration 10]
       [--heldout 5] [--variants default vce] [--per-joint] [--out benchmarks/results/noise_balance.csv]
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from bench_external import TIAGO_HELD, TIAGO_REPORT, TIAGO_TRAIN
from bench_outofclass import simulate_truth
from benchlib import predict

from fg_sysid.datasets.io import load_log_for_robot
from fg_sysid.estimation.metrics import relative_rmse
from fg_sysid.estimation.noise_balance import balanced_noise, term_balance
from fg_sysid.estimation.smoother import JointSmoother
from fg_sysid.robots import load_robot
from fg_sysid.validation import model_spec, predict_efforts

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
#: variant name -> JointSmoother keyword arguments; "vce" = the default fit, then one step of Helmert's
#: variance-component estimation (`noise_balance.balanced_noise`) and a refit with those σ
VARIANTS = {
    "default": {},
    "actuation": {"fit_actuation": ("gain", "offset")},
    "vce": {},
}
CASES = ("z1-in-class", "z1-mujoco", "z1-sharp", "tiago")
SIM_TRUTH = {"z1-in-class": "in-class", "z1-mujoco": "mujoco", "z1-sharp": "sharp"}


def load_case(name: str, duration: float, heldout: float):
    """(robot, training log, held-out log, held-out truth or None)."""
    if name == "tiago":
        data = DATA if DATA.is_dir() else Path("/work/shared/data")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            robot, log = load_log_for_robot(data / "tiago_dynamic_2021-07-01.csv", "tiago")
        return robot, log.slice(*TIAGO_TRAIN), log.slice(*TIAGO_HELD), None
    robot = load_robot("z1")
    train = simulate_truth(robot, SIM_TRUTH[name], duration, 1000.0, 0.01, 0)
    held = simulate_truth(robot, SIM_TRUTH[name], heldout, 1000.0, 0.0, 1, truth=train.truth)
    return robot, train.log, held.log, held


def heldout_error(case, robot, sm, held_log, held_sim) -> dict:
    """Held-out error through the `fg-sysid predict` path: relative RMSE [%] (simulated cases; and with
    the true states) or the pooled RMSE of arm_2–arm_4 [N·m] (TIAGo, as bench_external.py)."""
    spec = model_spec(sm.result_, robot, robot.name, sg_filter=sm.init_filter_)
    tau, _, _ = predict({"model": spec, "sg_filter": sm.init_filter_}, robot, held_log)
    if held_sim is None:
        idx = [robot.joint_names.index(j) for j in TIAGO_REPORT]
        rmse = np.sqrt(np.mean((tau[:, idx] - held_log.tau[:, idx]) ** 2, axis=0))
        return {"heldout": float(np.sqrt(np.mean(rmse ** 2))), "heldout_unit": "N·m pooled"}
    tl = held_sim.truth_log
    exact = predict_efforts(spec, robot, tl.q, tl.v, held_sim.truth_acceleration)
    return {"heldout": 100 * relative_rmse(tau, held_log.tau), "heldout_unit": "%",
            "exact_states": 100 * relative_rmse(exact, held_log.tau)}


def run(case: str, variant: str, duration: float, heldout: float, per_joint: bool) -> pd.DataFrame:
    robot, log, held_log, held_sim = load_case(case, duration, heldout)
    t0, c0 = time.perf_counter(), time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sm = JointSmoother(robot, **VARIANTS[variant]).fit(log)
        note = ""
        if variant == "vce":
            noise, factors = balanced_noise(sm)
            h = float(np.median(np.diff(sm.knot_times_)))
            sm = JointSmoother(robot, sigma_q=noise.q, sigma_v=noise.v, sigma_tau=noise.tau,
                               sigma_process=noise.process_v / h).fit(log)
            note = "; VCE factors " + ", ".join(f"{k} {'kept' if f is None else f'x{f:.3g}'}"
                                                for k, f in factors.items())
    fit_s, cpu = time.perf_counter() - t0, time.process_time() - c0
    t1 = time.perf_counter()
    df = term_balance(sm.problem_, sm.states_, sm.result_.theta, columns=per_joint)
    err = heldout_error(case, robot, sm, held_log, held_sim)
    print(f"[{case} {variant}] fit {fit_s:.0f} s wall / {cpu:.0f} s CPU ({len(sm.result_.history)} "
          f"iterations, converged {sm.result_.converged}), balance {time.perf_counter() - t1:.0f} s; "
          f"held-out {err['heldout']:.4g} {err['heldout_unit']}"
          + (f" (exact states {err['exact_states']:.4g} %)" if "exact_states" in err else "") + note,
          flush=True)
    return df.assign(case=case, variant=variant, knots=int(sm.result_.knots), **err)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", nargs="+", default=["z1-in-class", "z1-mujoco", "tiago"], choices=CASES)
    ap.add_argument("--variants", nargs="+", default=["default"], choices=list(VARIANTS))
    ap.add_argument("--duration", type=float, default=10.0, help="simulated training log [s]")
    ap.add_argument("--heldout", type=float, default=5.0, help="simulated noise-free held-out log [s]")
    ap.add_argument("--per-joint", action="store_true", help="also one row per residual column")
    ap.add_argument("--out", default="benchmarks/results/noise_balance.csv")
    args = ap.parse_args()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    frames = []
    for case in args.cases:
        for variant in args.variants:
            frames.append(run(case, variant, args.duration, args.heldout, args.per_joint))
            pd.concat(frames).to_csv(out, index=False)
    df = pd.concat(frames)
    print("\nχ² / redundancy per term at the solution (≈ 1: the term's σ matches its residuals):")
    wide = df.pivot_table(index="term", columns=["case", "variant"], values="chi2_per_dof", sort=False)
    print(wide.round(3).to_markdown())
    print("\nredundancy ± standard error (Hutchinson):")
    cells = df.assign(cell=[f"{r:.4g} ± {e:.2g}"
                            for r, e in zip(df.redundancy, df.redundancy_se, strict=True)])
    print(cells.pivot_table(index="term", columns=["case", "variant"], values="cell", aggfunc="first",
                            sort=False).to_markdown())
    print("\nheld-out error (predict path):")
    print(df.groupby(["case", "variant"])[[c for c in ("heldout", "exact_states") if c in df]].first()
          .round(4).to_markdown())
    print("\nχ² per row (no redundancy correction):")
    print(df.pivot_table(index="term", columns=["case", "variant"], values="chi2_per_row",
                         sort=False).round(3).to_markdown())
    print("\nredundancy / rows:")
    print(df.assign(frac=df.redundancy / df.rows).pivot_table(
        index="term", columns=["case", "variant"], values="frac", sort=False).round(3).to_markdown())
    print(f"\nrows in {out}")


if __name__ == "__main__":
    main()
