"""Per-trial traces of the smoother's Levenberg–Marquardt core (issue 9, session 8): why a damping rule
stalls on a log.

    python benchmarks/trace_damping.py [--cases z1-sharp tiago] [--strategies line-search trust-region hybrid]
                                       [--max-iterations 30] [--out trace-damping]

For each case (the two logs of bench_damping.py) and strategy, every trial step of the solver (accepted or
rejected; `LevenbergMarquardt.trials`) is written to ``<out>/<case>-<strategy>-<max iterations>.csv``:
IRLS round, iteration, λ, step length α, predicted decrease of ½‖r‖² (the linear model's, for the full
step), actual decrease, gain ratio ρ (actual over the Gauss–Newton model's (2α − α²)·predicted), norms of
the state and θ steps, the θ coordinate that moved most (named by the physical parameter of its index).
A summary per round is printed: trials, accepted, mean α, median ρ of the accepted trials, λ range,
first and last cost.
"""
from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from fg_sysid.estimation import solver as solver_mod

STRATEGIES = ("line-search", "trust-region", "hybrid")


class _Recorder:
    """Makes every `LevenbergMarquardt` created while active collect its trials (instances kept)."""

    def __init__(self):
        self.instances = []
        self._orig = solver_mod.LevenbergMarquardt.__init__

    def __enter__(self):
        rec = self

        def init(lm, *a, **k):
            rec._orig(lm, *a, **k)
            lm.trials = []
            rec.instances.append(lm)
        solver_mod.LevenbergMarquardt.__init__ = init
        return self

    def __exit__(self, *exc):
        solver_mod.LevenbergMarquardt.__init__ = self._orig


def _fit_z1(strategy, max_iterations=30):
    from fg_sysid.datasets.simulate import simulate
    from fg_sysid.estimation.smoother import JointSmoother
    from fg_sysid.factors.inverse_dynamics import InverseDynamicsResidual
    from fg_sysid.robots import load_robot

    robot = load_robot("z1")
    train = simulate(robot, 3.0, 500, 0.01, 0, friction_velocity_scale=0.005)
    held = simulate(robot, 2.0, 500, 0.0, 1, truth=train.truth, friction_velocity_scale=0.005)
    sm = JointSmoother(robot, strategy=strategy, max_iterations=max_iterations).fit(train.log)
    t = held.truth_log
    pred = InverseDynamicsResidual(sm.layout_).predict(t.q, t.v, held.truth_acceleration, sm.result_.theta)
    err = float(np.sqrt(np.mean((pred - t.tau) ** 2)) / np.sqrt(np.mean(t.tau ** 2)))
    return sm, f"{100 * err:.3f} %"


def _fit_tiago(strategy, max_iterations=30):
    import sys
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_external import DATA, TIAGO_HELD, TIAGO_REPORT, TIAGO_TRAIN
    from benchlib import predict

    from fg_sysid.cli.identify import run_identification
    from fg_sysid.datasets.io import load_log_for_robot
    from fg_sysid.validation import model_spec

    robot, log = load_log_for_robot(DATA / "tiago_dynamic_2021-07-01.csv", "tiago")
    train, held = log.slice(*TIAGO_TRAIN), log.slice(*TIAGO_HELD)
    options = {"strategy": strategy, "max_iterations": max_iterations}
    result, filt, est = run_identification(robot, train, "smoother", options, verbose=False)
    spec = model_spec(result, robot, "tiago", sg_filter=filt)
    tau, _, _ = predict({"model": spec, "sg_filter": filt}, robot, held)
    idx = [robot.joint_names.index(j) for j in TIAGO_REPORT]
    rmse = np.sqrt(np.mean((tau[:, idx] - held.tau[:, idx]) ** 2, axis=0))
    return est, f"{float(np.sqrt(np.mean(rmse ** 2))):.3f} N·m"


def trace(case: str, strategy: str, out: Path, max_iterations: int = 30) -> pd.DataFrame:
    with warnings.catch_warnings(), _Recorder() as rec:
        warnings.simplefilter("ignore")
        c0 = time.process_time()
        est, err = {"z1-sharp": _fit_z1, "tiago": _fit_tiago}[case](strategy, max_iterations)
        cpu = time.process_time() - c0
    trials = [t for lm in rec.instances for t in lm.trials]
    df = pd.DataFrame(trials)
    names = est.layout_.names
    df["theta_max"] = [names[i] if 0 <= i < len(names) else "" for i in df["theta_argmax"]]
    df.to_csv(out / f"{case}-{strategy}-{max_iterations}.csv", index=False)
    s = est.result_.summary()
    print(f"\n## {case}, {strategy} (at most {max_iterations} iterations per round): held-out {err}, "
          f"{s['iterations']} accepted iterations, converged "
          f"{s['converged']}, final cost {s['final_cost']:.6g}, CPU {cpu:.1f} s", flush=True)
    rows = []
    for rnd, g in df.groupby("round"):
        acc = g[g.accepted]
        rows.append({"round": rnd, "trials": len(g), "accepted": len(acc),
                     "mean α (acc.)": round(float(acc.alpha.mean()), 3) if len(acc) else np.nan,
                     "median ρ (acc.)": round(float(acc.rho.median()), 3) if len(acc) else np.nan,
                     "λ min": f"{g['lambda'].min():.1e}", "λ max": f"{g['lambda'].max():.1e}",
                     "first cost": f"{g.cost.iloc[0]:.6g}",
                     "last cost": f"{g.cost.iloc[-1] - max(g.actual.iloc[-1], 0) * g.accepted.iloc[-1]:.6g}",
                     "θ moved most": acc.theta_max.mode().iloc[0] if len(acc) else ""})
    print(pd.DataFrame(rows).to_markdown(index=False), flush=True)
    return df


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", nargs="+", choices=("z1-sharp", "tiago"), default=["z1-sharp", "tiago"])
    ap.add_argument("--strategies", nargs="+", default=list(STRATEGIES))
    ap.add_argument("--out", type=Path, default=Path("trace-damping"))
    ap.add_argument("--max-iterations", type=int, default=30, help="per IRLS round (the default: 30)")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for case in args.cases:
        for strategy in args.strategies:
            trace(case, strategy, args.out, args.max_iterations)


if __name__ == "__main__":
    main()
