"""Scaling benchmark (issue 2): time per smoother iteration at 1k, 4k and 16k knots, against the floor.

One iteration = linearize every factor with Jacobians + solve the damped normal equations + evaluate
the cost at the trial point (what an accepted LM step costs). The floor, measured in the same run on the
same knots: the Pinocchio calls alone (one `computeRNEADerivatives` and one `computeJointTorqueRegressor`
per knot) plus one elimination. Two eliminations are timed: our O(N) structured solver and GTSAM's
multifrontal elimination of the same whitened blocks (ordering x_0 … x_{N-1}, θ).

Usage: python benchmarks/bench_scaling.py [--robot z1] [--knots 1000 4000 16000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import warnings

import pandas as pd
import pinocchio as pin
from benchlib import best
from threadpoolctl import threadpool_limits

from fg_sysid.datasets.simulate import simulate
from fg_sysid.estimation.linear_solver import solve_gtsam, solve_structured
from fg_sysid.estimation.smoother import JointSmoother
from fg_sysid.robots import load_robot


def measure(robot_name: str, n: int, repeat: int, with_gtsam: bool) -> dict:
    robot = load_robot(robot_name)
    sim = simulate(robot, (n - 1) / 1000.0, 1000, 0.01, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sm = JointSmoother(robot, max_iterations=0, reweight_rounds=0, init="savgol").fit(sim.log)
    # reconstruct the smoother's working point (states and θ after initialisation)
    x = (sim.truth_log.q.copy(), sim.truth_log.v.copy(), sim.truth_acceleration.copy())
    theta = sm.result_.theta.copy()
    noise = sm.noise_

    def iteration():
        g = sm._linearize(x, theta, noise)
        st = solve_structured(g, 1e-6)
        sm._linearize(sm._retract(x, st.dx), theta + st.dtheta, noise, jacobians=False).cost()

    model = sm._id.model
    data = model.createData()
    q, v, a = x

    def pinocchio_calls():
        for k in range(n):
            pin.computeRNEADerivatives(model, data, q[k], v[k], a[k])
            pin.computeJointTorqueRegressor(model, data, q[k], v[k], a[k])

    graph = sm._linearize(x, theta, noise)
    t_iter = best(iteration, repeat)
    t_pin = best(pinocchio_calls, repeat)
    t_solve = best(lambda: solve_structured(graph, 1e-6), repeat)
    row = {"robot": robot_name, "knots": n, "theta_dim": sm.layout_.n, "iteration_s": t_iter,
           "pinocchio_s": t_pin, "elimination_s": t_solve}
    if with_gtsam:
        row["gtsam_elimination_s"] = best(lambda: solve_gtsam(graph, 1e-6), 1)
    row["floor_s"] = t_pin + t_solve
    row["iteration/floor"] = t_iter / row["floor_s"]
    if with_gtsam:
        row["iteration/(pinocchio+gtsam elim.)"] = t_iter / (t_pin + row["gtsam_elimination_s"])
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--robot", default="z1")
    ap.add_argument("--knots", nargs="+", type=int, default=[1000, 4000, 16000])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-gtsam", action="store_true", help="skip timing GTSAM's elimination")
    args = ap.parse_args()
    rows = []
    with threadpool_limits(limits=1, user_api="blas"):
        for n in args.knots:
            rows.append(measure(args.robot, n, args.repeat, not args.no_gtsam))
            print(f"{n} knots done", flush=True)
    df = pd.DataFrame(rows)
    print(df.round(4).to_markdown(index=False))
    t = df.set_index("knots")["iteration_s"]
    ks = list(t.index)
    for k0, k1 in zip(ks[:-1], ks[1:], strict=True):
        print(f"time ratio {k1}/{k0} knots: {t[k1] / t[k0]:.2f} (linear = {k1 / k0:.1f})")


if __name__ == "__main__":
    main()
