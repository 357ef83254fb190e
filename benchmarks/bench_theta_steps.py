"""Why the smoother takes its θ steps through the physical parameters (issue 9, session 12).

    python benchmarks/bench_theta_steps.py [--robot panda] [--truth stribeck] [--noise 0.01]
                                           [--friction stribeck6] [--iterations 12]

Fits a 20 s / 1 kHz out-of-class log (`bench_outofclass.simulate_truth`, seed 0) with
``JointSmoother(friction=…, reweight_rounds=0, max_iterations=…, theta_steps="additive")`` — stopped in
the tail of its iterations, where the line search had been shortening the steps — then takes one
Gauss–Newton step there (λ = 1e-12) and prints, for step lengths α = 1, ½, ¼, the cost decrease of

* the whole step, the θ part alone, and its inertial + armature part alone, applied as θ + α δθ
  (``additive``) and through the physical parameters (``physical``: `ParameterLayout.retract`),

next to the linear model's predicted decrease for the whole step (a decrease below 0 is a rise). Where
the data fix a sum (a joint's armature and its link's inertia about the axis) and leave its split to the
prior, the straight line in θ leaves the data term's narrow valley; the straight line in π does not.
"""
from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).parent))
from bench_outofclass import TRUTHS, simulate_truth  # noqa: E402

from fg_sysid.estimation.smoother import JointSmoother  # noqa: E402
from fg_sysid.robots import load_robot  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--robot", default="panda")
    ap.add_argument("--truth", default="stribeck", choices=list(TRUTHS))
    ap.add_argument("--noise", type=float, default=0.01)
    ap.add_argument("--friction", default="stribeck6")
    ap.add_argument("--iterations", type=int, default=12, help="additive-step iterations before the probe")
    args = ap.parse_args()
    robot = load_robot(args.robot)
    log = simulate_truth(robot, args.truth, 20.0, 1000.0, args.noise, 0).log
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sm = JointSmoother(robot, friction=args.friction, reweight_rounds=0, max_iterations=args.iterations,
                           theta_steps="additive").fit(log)
    P, L = sm.problem_, sm.layout_
    x, th = sm.states_, sm.result_.theta
    c0 = P.cost(x, th)
    step = sm._lm.linear_solve(P.linearize(x, th), 1e-12)
    inert_arm = np.zeros(L.n, bool)
    inert_arm[L.s_inertial] = inert_arm[L.s_armature] = True
    parts = {"whole step": (1.0, np.ones(L.n, bool)), "θ part": (0.0, np.ones(L.n, bool)),
             "inertial + armature part": (0.0, inert_arm)}
    rows = []
    for name, (wx, mask) in parts.items():
        for kind in ("additive", "physical"):
            row = {"step": name, "θ ⊕ δθ": kind}
            for a in (1.0, 0.5, 0.25):
                d = a * np.where(mask, step.dtheta, 0.0)
                th_new = th + d if kind == "additive" else L.retract(th, d)
                row[f"decrease α={a:g}"] = c0 - P.cost(P.retract(x, wx * a * step.dx), th_new)
            rows.append(row)
    print(f"\n## {args.robot}, {args.truth} truth, σ = {args.noise:g}, {args.friction}, after "
          f"{len(sm.result_.history)} additive iterations: cost {c0:.6g}, predicted decrease of the whole "
          f"step {step.predicted_decrease:.4g}\n")
    print(pd.DataFrame(rows).to_markdown(index=False, floatfmt=".4g"))


if __name__ == "__main__":
    main()
