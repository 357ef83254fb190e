"""The smoother's damping strategies on logs where one of them struggles: line search (the default), trust
region and the hybrid (issue 9, session 8).

    python benchmarks/bench_damping.py [--cases z1-sharp tiago z1-noisy]
        [--strategies line-search trust-region hybrid] [--max-iterations 20 200]

* **z1-sharp** — simulated Z1, 3 s at 500 Hz, σ = 0.01, Coulomb friction with a tanh width of
  0.005 rad/s (10× sharper than the estimator's prior mean, which it estimates per joint); held out:
  2 s noise-free, relative RMSE with the true states (parameter error only).
* **z1-noisy** — the σ = 0.1 Z1 log of tests/test_acceleration_scale.py (3 s at 500 Hz, seed 3, truth
  tanh width 0.02 rad/s), base-parameter and held-out error, at the iteration caps ``--max-iterations``.
* **tiago** — the real TIAGo log, blocked split of `bench_external.py` (train rows 921–4799, held out
  4800–6790), pooled arm_2–4 RMSE [N·m] through the `fg-sysid predict` path.

Per strategy: held-out error, accepted iterations, converged flag, final cost, CPU seconds. Issue 9
(session 7): the trust region converges on TIAGo where the line search stops at its limit, but stalls on
z1-sharp; session 8: the hybrid rule (`solver`, docs/damping.md) on both. Per-trial traces of the
same fits: benchmarks/trace_damping.py.
"""
from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import pandas as pd

STRATEGIES = ("line-search", "trust-region", "hybrid")
#: bench_external method of each strategy (benchlib.METHODS; "smoother" = the default, line search)
TIAGO_METHOD = {"line-search": "smoother", "trust-region": "smoother-trust-region",
                "hybrid": "smoother-hybrid"}


#: extra JointSmoother options of every fit (``--acceleration-process``: issue 9 session 9)
EXTRA: dict = {}


def z1_sharp(strategies=STRATEGIES) -> list[dict]:
    from fg_sysid.datasets.simulate import simulate
    from fg_sysid.estimation.smoother import JointSmoother
    from fg_sysid.factors.inverse_dynamics import InverseDynamicsResidual
    from fg_sysid.robots import load_robot

    robot = load_robot("z1")
    train = simulate(robot, 3.0, 500, 0.01, 0, friction_velocity_scale=0.005)
    held = simulate(robot, 2.0, 500, 0.0, 1, truth=train.truth, friction_velocity_scale=0.005)
    t = held.truth_log
    rows = []
    for strategy in strategies:
        c0 = time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sm = JointSmoother(robot, strategy=strategy, **EXTRA).fit(train.log)
        cpu = time.process_time() - c0
        theta = sm.result_.theta
        pred = InverseDynamicsResidual(sm.layout_).predict(t.q, t.v, held.truth_acceleration, theta)
        err = float(np.sqrt(np.mean((pred - t.tau) ** 2)) / np.sqrt(np.mean(t.tau ** 2)))
        s = sm.result_.summary()
        rows.append({"case": "z1-sharp", "strategy": strategy, "held-out": f"{100 * err:.3f} %",
                     "iterations": s["iterations"], "converged": s["converged"],
                     "final cost": f"{s['final_cost']:.4g}", "cpu_s": round(cpu, 1)})
        print(rows[-1], flush=True)
    return rows


def z1_noisy(strategies=STRATEGIES, caps=(20,)) -> list[dict]:
    """The σ = 0.1 regression log of tests/test_acceleration_scale.py (Z1, 3 s at 500 Hz, seed 3, tanh
    width 0.02 rad/s in the truth; held out 2 s noise-free): base-parameter and held-out error
    (`study.runner.evaluate`) per strategy and iteration cap (per reweighting round)."""
    from fg_sysid.datasets.simulate import simulate
    from fg_sysid.estimation.smoother import JointSmoother
    from fg_sysid.robots import load_robot
    from fg_sysid.study.runner import evaluate

    robot = load_robot("z1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sim = simulate(robot, 3.0, 500.0, 0.1, 3, friction_velocity_scale=0.02)
        held = simulate(robot, 2.0, 500.0, 0.0, 1003, truth=sim.truth)
    rows = []
    for cap in caps:
        for strategy in strategies:
            c0 = time.process_time()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                sm = JointSmoother(robot, strategy=strategy, max_iterations=cap, **EXTRA).fit(sim.log)
            cpu = time.process_time() - c0
            res = sm.result_
            order = {n: i for i, n in enumerate(res.names)}
            p = np.array([res.estimate[order[n]] for n in robot.parameter_names(("fc", "fv"))], float)
            e = evaluate(robot, p, sim.truth, held, 0.05)
            s = res.summary()
            rows.append({"case": f"z1-noisy (cap {cap})", "strategy": strategy,
                         "held-out": f"{100 * e['heldout_rmse']:.2f} %",
                         "base-param err": f"{100 * e['inertial_base_error']:.2f} %",
                         "iterations": s["iterations"], "converged": s["converged"],
                         "final cost": f"{s['final_cost']:.4g}", "cpu_s": round(cpu, 1)})
            print(rows[-1], flush=True)
    return rows


def tiago(strategies=STRATEGIES) -> list[dict]:
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        script = str(Path(__file__).parent / "bench_external.py")
        subprocess.run([sys.executable, script, "--datasets", "tiago", "--methods",
                        *[TIAGO_METHOD[s] for s in strategies], "--out", tmp], check=True)
        tab = pd.read_csv(Path(tmp) / "tiago.csv")
    for _, r in tab.iterrows():
        strategy = {m: s for s, m in TIAGO_METHOD.items()}[r["method"]]
        rows.append({"case": "tiago", "strategy": strategy, "held-out": f"{r['pooled_Nm']:.3f} N·m",
                     "iterations": int(r["iterations"]), "converged": bool(r["converged"]), "final cost": "",
                     "cpu_s": round(r["cpu_seconds"], 1)})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", nargs="+", choices=("z1-sharp", "tiago", "z1-noisy"),
                    default=["z1-sharp", "tiago"])
    ap.add_argument("--strategies", nargs="+", choices=STRATEGIES, default=list(STRATEGIES))
    ap.add_argument("--max-iterations", nargs="+", type=int, default=[20],
                    help="z1-noisy: iteration caps per reweighting round (the test's 20; e.g. 20 200)")
    ap.add_argument("--acceleration-process", action="store_true",
                    help="z1 cases: JointSmoother(acceleration_process=True) (white-jerk rows, opt-in)")
    args = ap.parse_args()
    if args.acceleration_process:
        EXTRA["acceleration_process"] = True
    rows = []
    for case in args.cases:
        if case == "z1-noisy":
            rows += z1_noisy(args.strategies, args.max_iterations)
        else:
            rows += {"z1-sharp": z1_sharp, "tiago": tiago}[case](args.strategies)
    print(pd.DataFrame(rows).to_markdown(index=False))


if __name__ == "__main__":
    main()
