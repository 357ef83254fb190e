"""Paper 004 Fig. 10: inverse- vs forward-dynamics formulations of the same smoother (issue 12).

Same measurements, noise levels, priors, knots and solver; only the dynamics term differs
(`terms.inverse_dynamics` vs `terms.forward_dynamics`). Each seed starts from a random initial guess with
the paper's 70 % relative spread (`fg_sysid.study.methods.random_initial_guess`; the prior is centred
there). Truths: in class (the estimator's friction law) and out of class (Stribeck friction with a 1.5×
breakaway peak and zero-order-hold torques at 4× the log rate), reported in separate tables.

Prints per robot / truth / formulation: iterations, normalized cost after 3 and 10 iterations
((J_k − J_final)/(J_0 − J_final)), the state-trajectory RMSE of the knots against the noise-free truth
(q [rad], v [rad/s]), the inertial and friction parameter errors (relative l2) and the held-out torque
RMSE (relative), means over seeds; writes the cost-decay plot fd_vs_id.png (--out).

    nice -n 10 python benchmarks/bench_fd_vs_id.py [--seeds 3] [--duration 8] [--out DIR]
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from fg_sysid.datasets.simulate import Effects, simulate
from fg_sysid.estimation.smoother import JointSmoother
from fg_sysid.robots import load_robot
from fg_sysid.study.methods import random_initial_guess
from fg_sysid.study.runner import evaluate

TRUTHS = {
    "in-class": None,
    "out-of-class": Effects(friction="stribeck", stribeck_ratio=1.5, stribeck_velocity=0.1,
                            control_rate=2000.0),
}
VS = 0.05


def _costs(history) -> np.ndarray:
    return np.array([h["cost"] for h in history], float)


def run(robot_name: str, truth_name: str, seed: int, duration: float, rate: float = 500.0) -> list[dict]:
    robot = load_robot(robot_name)
    sim = simulate(robot, duration, rate, 0.01, seed, friction_velocity_scale=VS, effects=TRUTHS[truth_name])
    held = simulate(robot, 4.0, rate, 0.0, seed + 1000, truth=sim.truth)
    p0 = random_initial_guess(robot, 0.7, seed, VS)
    rows = []
    for dyn in ("inverse", "forward"):
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sm = JointSmoother(robot, friction="coulomb-viscous", friction_velocity_scale=VS, prior_mean=p0,
                               init="prior", max_iterations=40, dynamics=dyn).fit(sim.log)
        wall = time.perf_counter() - t0
        res = sm.result_
        order = {n: i for i, n in enumerate(res.names)}
        p = np.array([res.estimate[order[n]] for n in robot.parameter_names(("fc", "fv"))], float)
        ev = evaluate(robot, p, sim.truth, held, VS)
        c = _costs(res.history)
        norm = (c - c[-1]) / max(c[0] - c[-1], 1e-300)
        tl = sim.truth_log
        k = np.searchsorted(tl.t, sm.knot_times_)
        rows.append({"robot": robot_name, "truth": truth_name, "seed": seed, "dynamics": dyn,
                     "iterations": len(c), "cost_after_3": float(norm[min(3, len(c) - 1)]),
                     "cost_after_10": float(norm[min(10, len(c) - 1)]),
                     "q_rmse": float(np.sqrt(np.mean((sm.states_[0] - tl.q[k]) ** 2))),
                     "v_rmse": float(np.sqrt(np.mean((sm.states_[1] - tl.v[k]) ** 2))),
                     "inertial_error": ev["inertial_error"], "friction_error": ev["friction_error"],
                     "heldout_rmse": ev["heldout_rmse"], "seconds": wall, "curve": norm})
    return rows


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = sorted({(r["robot"], r["truth"]) for r in rows})
    fig, axes = plt.subplots(1, len(groups), figsize=(4.2 * len(groups), 3.4), squeeze=False)
    for ax, (rb, tr) in zip(axes[0], groups, strict=True):
        for r in rows:
            if (r["robot"], r["truth"]) != (rb, tr):
                continue
            col = "C0" if r["dynamics"] == "inverse" else "C3"
            ax.semilogy(np.maximum(r["curve"], 1e-12), color=col, alpha=0.7,
                        label=r["dynamics"] if r["seed"] == 0 else None)
        ax.set_title(f"{rb}, {tr}")
        ax.set_xlabel("iteration")
        ax.set_ylabel("(J_k − J_final)/(J_0 − J_final)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--duration", type=float, default=8.0)
    ap.add_argument("--robots", default="double_pendulum,z1")
    ap.add_argument("--out", default="bench-fd-vs-id")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for rb in args.robots.split(","):
        for tr in TRUTHS:
            for seed in range(args.seeds):
                rows += run(rb, tr, seed, args.duration)
                print(f"done {rb} {tr} seed {seed}", flush=True)
    df = pd.DataFrame([{k: v for k, v in r.items() if k != "curve"} for r in rows])
    df.to_csv(out / "fd_vs_id.csv", index=False)
    plot(rows, out / "fd_vs_id.png")
    cols = ["iterations", "cost_after_3", "cost_after_10", "q_rmse", "v_rmse", "inertial_error",
            "friction_error", "heldout_rmse", "seconds"]
    pd.set_option("display.width", 220)
    for tr in TRUTHS:
        print(f"\n{tr} truth, σ = 0.01, {args.duration:g} s at 500 Hz, "
              f"means over {args.seeds} initial guesses:")
        t = df[df.truth == tr].groupby(["robot", "dynamics"])[cols].mean()
        print(t.to_string(float_format=lambda x: f"{x:.4g}"))
    print(f"\nwrote {out / 'fd_vs_id.csv'} and {out / 'fd_vs_id.png'}")


if __name__ == "__main__":
    main()
