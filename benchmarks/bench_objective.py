"""The fit objective at its converged minimum (issue 9, session 9): per-term noise balance on a log with
known noise, before and after the white-jerk acceleration rows (`fg_sysid.estimation.acceleration_process`).

    python benchmarks/bench_objective.py [--variants before-20 before-200 fixed default]

Log: the σ = 0.1 Z1 log of tests/test_acceleration_scale.py (3 s at 500 Hz, seed 3, Gaussian σ = 0.1 on
q, v, τ; out-of-class friction tanh width 0.02 rad/s; held out 2 s noise-free, seed 1003). Variants:

* ``before-20`` / ``before-200``: ``acceleration_process=False`` (the default objective) at 20
  and 200 iterations per reweighting round (the test's early stop and the converged MAP);
* ``fixed``: the white-jerk rows with the initial σ_a (``acceleration_process="fixed"``: no Helmert step,
  Huber factors still applied), 200 iterations;
* ``on``: the white-jerk rows with σ_a re-estimated by a Helmert step and Huber factors per round
  (``acceleration_process=True``, opt-in).

Per variant: base-parameter / held-out / friction error (`study.runner.evaluate`), iterations, converged,
final cost, CPU seconds; the noise levels used against the true ones; RMS of the knot states' errors;
per term the whitened χ², its redundancy (rows − tr H, Hutchinson, 8 probes) and χ²/redundancy
(`noise_balance.term_balance`).
"""
from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import pandas as pd

VARIANTS = {"before-20": dict(acceleration_process=False, max_iterations=20),
            "before-200": dict(acceleration_process=False, max_iterations=200),
            "fixed": dict(acceleration_process="fixed", max_iterations=200),
            "on": dict(acceleration_process=True, max_iterations=200)}


def _span(x) -> str:
    """min–max over the joints, two decimals."""
    return f"{np.min(x):.2f}–{np.max(x):.2f}"


def main() -> None:
    from fg_sysid.datasets.simulate import simulate
    from fg_sysid.estimation.noise_balance import term_balance
    from fg_sysid.estimation.smoother import JointSmoother
    from fg_sysid.robots import load_robot
    from fg_sysid.study.runner import evaluate

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variants", nargs="+", choices=tuple(VARIANTS), default=list(VARIANTS))
    args = ap.parse_args()
    robot = load_robot("z1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sim = simulate(robot, 3.0, 500.0, 0.1, 3, friction_velocity_scale=0.02)
        held = simulate(robot, 2.0, 500.0, 0.0, 1003, truth=sim.truth)
    tr = sim.truth_log
    true = {"q": np.std(sim.log.q - tr.q, axis=0), "v": np.std(sim.log.v - tr.v, axis=0),
            "tau": np.std(sim.log.tau - tr.tau, axis=0)}
    a_true = sim.truth_acceleration
    rows, noise_rows, balance = [], [], []
    for name in args.variants:
        c0 = time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sm = JointSmoother(robot, **VARIANTS[name]).fit(sim.log)
        cpu = time.process_time() - c0
        res = sm.result_
        order = {n: i for i, n in enumerate(res.names)}
        p = np.array([res.estimate[order[n]] for n in robot.parameter_names(("fc", "fv"))], float)
        e = evaluate(robot, p, sim.truth, held, 0.05)
        s = res.summary()
        q, v, a = sm.states_
        r_id = sm._id_residual(sm.states_, res.theta)
        err = a - a_true
        lag1 = np.mean([np.corrcoef(err[1:, j], err[:-1, j])[0, 1] for j in range(a.shape[1])])
        a_ratio = np.sqrt(np.mean(err ** 2, axis=0)) / np.sqrt(np.mean(a_true ** 2, axis=0))
        rows.append({"variant": name, "base-param err %": round(100 * e["inertial_base_error"], 2),
                     "held-out %": round(100 * e["heldout_rmse"], 2),
                     "friction err %": round(100 * e["friction_error"], 1),
                     "iterations": s["iterations"], "converged": s["converged"],
                     "final cost": round(s["final_cost"]), "cpu_s": round(cpu, 1),
                     "a err RMS / true RMS (median joint)": round(float(np.median(a_ratio)), 3),
                     "a err lag-1 autocorr (mean)": round(float(lag1), 3)})
        nz = sm.noise_
        id_rms = np.sqrt(np.mean(r_id ** 2, axis=0))
        noise_rows.append({"variant": name, "σ_τ used / true": _span(nz.tau / true["tau"]),
                           "ID residual RMS / true σ_τ": _span(id_rms / true["tau"]),
                           "σ_q used / true": _span(nz.q / true["q"]),
                           "σ_v used / true": _span(nz.v / true["v"]),
                           "σ_a [rad/s² per step]": "—" if nz.process_a is None else
                           f"{np.min(nz.process_a):.3g}–{np.max(nz.process_a):.3g}"})
        df = term_balance(sm.problem_, sm.states_, res.theta, probes=8)
        for _, row in df.iterrows():
            balance.append({"variant": name, "term": row["term"], "rows": int(row["rows"]),
                            "chi2": round(row["chi2"], 1), "redundancy": round(row["redundancy"], 1),
                            "chi2/redundancy": round(row["chi2_per_dof"], 3)})
        print(rows[-1], flush=True)
    print("\nσ = 0.1 Z1 log (3 s, 500 Hz, seed 3): errors, iterations, cost")
    print(pd.DataFrame(rows).to_markdown(index=False))
    print("\nnoise levels used (after the reweighting rounds) against the true ones")
    print(pd.DataFrame(noise_rows).to_markdown(index=False))
    print("\nper-term balance at the solution (χ²/redundancy ≈ 1: the term's σ matches its residuals)")
    print(pd.DataFrame(balance).pivot(index="term", columns="variant", values="chi2/redundancy")
          .reindex(columns=args.variants).to_markdown())
    print(pd.DataFrame(balance).pivot(index="term", columns="variant", values="redundancy")
          .reindex(columns=args.variants).to_markdown())


if __name__ == "__main__":
    main()
