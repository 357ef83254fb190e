"""Per-iteration cost of the fixed-base smoother on a 20 s / 1 kHz arm log (issue 9 item 5, session 11).

The pieces of one Levenberg–Marquardt iteration of `JointSmoother` with every default on the arms of
bench_outofclass.py (MuJoCo truth, σ = 0.1, so the white-jerk rows are on: the larger of the two
problems), each timed on the smoother's own linearized problem at its solution, best of ``--repeat``:

* ``linearize``: every term's residual and Jacobians (inverse dynamics: Pinocchio's RNEA derivatives and
  torque regressor per knot), the per-knot loop in this process alone and shared with the worker process
  (session 13, `fg_sysid.knot_worker`);
* ``cost``: the residuals alone (a line-search trial) — since session 11 by Pinocchio's batched RNEA
  (`LayoutModel.rnea`), against the regressor loop it replaced (``cost (regressor loop)``);
* ``normal equations`` and ``solve`` (`StructuredSolver.solve`: compiled per-knot elimination,
  `block_kernels`) against the per-knot LAPACK/BLAS loop it replaced (``solve (BLAS loop)``, reproduced
  here as `blas_loop_solve`), on one thread and on two (session 13: the knots eliminated from both ends
  at once, the normal equations and the θ border in two halves; the estimators' default on 2 cores);
* ``Hutchinson, 4 probes``: `noise_balance.term_balance` (the Helmert step of the white-jerk rows), one
  factorization with four right-hand sides, against four separate solves.

Usage: python benchmarks/bench_arm_iteration.py [--robots z1 panda] [--repeat 3]
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pinocchio as pin

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_outofclass import simulate_truth  # noqa: E402
from benchlib import best  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

from fg_sysid.estimation import noise_balance  # noqa: E402
from fg_sysid.estimation.block_kernels import blas_backward, blas_forward  # noqa: E402
from fg_sysid.estimation.linear_solver import StructuredSolver  # noqa: E402
from fg_sysid.estimation.smoother import JointSmoother  # noqa: E402
from fg_sysid.robots import load_robot  # noqa: E402


def blas_loop_solve(graph):
    """The undamped step by the per-knot LAPACK/BLAS loop of sessions 1–10 (potrf, trsm, gemm per knot
    from Python; the θ border as in `StructuredSolver`): the reference the compiled kernels replaced."""
    N, nx, nt = graph.n_knots, graph.nx, graph.ntheta
    A = np.empty((N, nx, nx + nt + 1))
    D, B, C, Htt, gx, gt = graph.normal_equations(out=A)
    B = np.ascontiguousarray(B)
    L = np.empty((N, nx, nx))
    blas_forward(A, B, L)
    S, s = Htt.copy(), gt.copy()
    for c0 in range(0, N, 512):
        Wc = A[c0:c0 + 512]
        Z = Wc[:, :, nx:nx + nt].reshape(-1, nt)
        S -= Z.T @ Z
        s -= Z.T @ Wc[:, :, -1].reshape(-1)
    dtheta = -np.linalg.solve(S, s)
    c = A[:, :, -1] + A[:, :, nx:nx + nt] @ dtheta
    dx = np.empty((N, nx))
    blas_backward(A, L, c, dx)
    return dx, dtheta


def regressor_cost(idr, q, v, a):
    """The residual's rigid-body part by the regressor loop (sessions 1–10's cost path)."""
    Y = np.array([pin.computeJointTorqueRegressor(idr.model, idr.data, q[k], v[k], a[k])
                  for k in range(q.shape[0])])
    return Y @ idr.pi_flat


def run(robot_name: str, repeat: int) -> list[dict]:
    robot = load_robot(robot_name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        log = simulate_truth(robot, "mujoco", 20.0, 1000.0, 0.1, 0).log
        sm = JointSmoother(robot, friction="coulomb-viscous-lead", acceleration_process=True,
                           max_iterations=3, reweight_rounds=0).fit(log)
    prob, x, theta = sm.problem_, sm.states_, np.asarray(sm.result_.theta, float)
    graph = prob.linearize(x, theta)
    step = sm._lm.linear_solve(graph, 0.0)
    dx_ref, dth_ref = blas_loop_solve(graph)
    agree = float(np.max(np.abs(step.dx - dx_ref)) / max(np.max(np.abs(dx_ref)), 1e-300))
    idr = sm._id  # the smoother's `InverseDynamicsResidual`
    rows = []
    for procs, label in ((1, "linearize"), (2, "linearize (2 processes: `knot_worker`)")):
        if idr is not None:
            idr.processes = procs
        rows.append((label, best(lambda: prob.linearize(x, theta), repeat)))
    rows.append(("cost (batched RNEA, 2 threads)", best(lambda: prob.cost(x, theta), repeat)))
    if idr is not None:
        q, v, a = (np.asarray(s, float) for s in x)
        idr.set_theta(theta)
        rows.append(("cost (regressor loop), ID part", best(lambda: regressor_cost(idr, q, v, a), repeat)))
        rows.append(("cost (batched RNEA, 2 threads), ID part", best(lambda: idr.rnea(q, v, a), repeat)))
    one, two = StructuredSolver(threads=1), StructuredSolver(threads=2)
    A = np.empty((graph.n_knots, graph.nx, graph.nx + graph.ntheta + 1))  # a reused buffer, as the solver's
    step1, step2 = one.solve(graph, 0.0), two.solve(graph, 0.0)
    agree2 = float(np.max(np.abs(step2.dx - step1.dx)) / max(np.max(np.abs(step1.dx)), 1e-300))
    rows += [("normal equations", best(lambda: graph.normal_equations(out=A), repeat)),
             ("normal equations (2 threads)", best(lambda: graph.normal_equations(out=A, threads=2), repeat)),
             ("solve (compiled)", best(lambda: one.solve(graph, 0.0), repeat)),
             ("solve (compiled, 2 threads)", best(lambda: two.solve(graph, 0.0), repeat)),
             ("solve (BLAS loop)", best(lambda: blas_loop_solve(graph), repeat)),
             ("Hutchinson, 4 probes, one factorization",
              best(lambda: noise_balance.term_balance(prob, x, theta, probes=4, solver=one), repeat)),
             ("Hutchinson, 4 probes, one factorization (2 threads)",
              best(lambda: noise_balance.term_balance(prob, x, theta, probes=4, solver=two), repeat))]
    out = [{"robot": robot_name, "knots": graph.n_knots, "nx": graph.nx, "ntheta": graph.ntheta,
            "piece": name, "seconds": sec} for name, sec in rows]
    print(f"[{robot_name}] compiled vs BLAS-loop step: max relative difference {agree:.1e}; two threads vs "
          f"one: {agree2:.1e}", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--robots", nargs="+", default=["z1", "panda"])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    rows = []
    with threadpool_limits(1, "blas"):  # as inside the estimators
        for r in args.robots:
            rows += run(r, args.repeat)
    df = pd.DataFrame(rows)
    for r, g in df.groupby("robot", sort=False):
        g = g.set_index("piece")
        ref = g.loc["solve (BLAS loop)", "seconds"]
        g["× BLAS-loop solve"] = g["seconds"] / ref
        print(f"\n{r}: {int(g['knots'].iloc[0])} knots, nx = {int(g['nx'].iloc[0])}, "
              f"nθ = {int(g['ntheta'].iloc[0])}")
        print(g[["seconds", "× BLAS-loop solve"]].round(3).to_markdown())


if __name__ == "__main__":
    main()
