"""Why a smoother fit needs many iterations: a per-iteration trace (issue 9 item 5, session 8).

Fits the default `JointSmoother` (as ``fg-sysid identify``) on one out-of-class log of
bench_outofclass.py and records, at every linearization, θ; prints per iteration the round (effort-noise
re-estimation rounds restart the solver), the cost, the accepted step length α and λ, the three θ
coordinates that moved most in units of their prior std, and each joint's estimated tanh width vs
[rad/s]; then a summary per round (iterations, how many full steps) and the effort noise σ_τ [N·m] each
round used. Read-only with respect to the solver (it wraps `Problem.linearize` to see θ).

Usage: python benchmarks/bench_iterations_trace.py [--robot panda] [--truth mujoco] [--noise 0.01]
       [--duration 20] [--out benchmarks/results/iterations_trace.csv]
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from bench_outofclass import TRUTHS, simulate_truth

from fg_sysid.estimation import problem as problem_mod
from fg_sysid.estimation.smoother import JointSmoother
from fg_sysid.robots import load_robot


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--robot", default="panda")
    ap.add_argument("--truth", default="mujoco", choices=list(TRUTHS))
    ap.add_argument("--noise", type=float, default=0.01)
    ap.add_argument("--duration", type=float, default=20.0)
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--out", default="benchmarks/results/iterations_trace.csv")
    args = ap.parse_args()
    robot = load_robot(args.robot)
    train = simulate_truth(robot, args.truth, args.duration, args.rate, args.noise, 0)
    thetas = []
    orig = problem_mod.Problem.linearize

    def recording(self, x, theta, jacobians=True, freeze_theta=False):
        th = np.array(theta, float)
        # the solver's linearizations (not the line search's cost-only evaluations), once per θ
        if jacobians and not freeze_theta and not (thetas and np.array_equal(thetas[-1], th)):
            thetas.append(th)
        return orig(self, x, theta, jacobians, freeze_theta)

    problem_mod.Problem.linearize = recording
    sm = JointSmoother(robot, verbose=True)
    c0 = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sm.fit(train.log)
    cpu = time.process_time() - c0
    problem_mod.Problem.linearize = orig
    res = sm.result_
    layout = sm.layout_
    names = list(layout.names)
    std = np.asarray(sm._theta_std, float)
    vs_idx = [i for i, n in enumerate(names) if n.endswith(".vs")]
    # the last len(history) + 1 distinct linearization points: the start and every accepted step (a round
    # restarts at the previous round's θ, deduplicated; earlier entries: the initial-state set-up)
    thetas = thetas[-(len(res.history) + 1):]
    rows = []
    for k, h in enumerate(res.history):
        th0, th1 = thetas[k], thetas[k + 1]
        d = (th1 - th0) / std
        top = np.argsort(-np.abs(d))[:3]
        phys = layout.to_physical(th1)
        rows.append({**{c: h[c] for c in ("round", "iteration", "cost", "alpha", "lambda", "step_theta")},
                     "top_moves": ", ".join(f"{names[i]} {d[i]:+.2f}σ" for i in top),
                     **{f"vs.{names[i].split('.')[0]}": phys[i] for i in vs_idx}})
    df = pd.DataFrame(rows)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(out, index=False)
    pd.set_option("display.width", 250)
    pd.set_option("display.max_colwidth", 90)
    print(df.to_string(float_format=lambda v: f"{v:.4g}"))
    print(f"\n{len(df)} iterations, {cpu:.0f} s CPU; converged {res.converged}")
    print(df.groupby("round").agg(iterations=("iteration", "size"),
                                  full_steps=("alpha", lambda a: (a == 1).sum()),
                                  first_cost=("cost", "first"), last_cost=("cost", "last")).to_string())
    print("noise:", {k: v for k, v in res.noise.items() if k in ("tau", "source")})


if __name__ == "__main__":
    main()
