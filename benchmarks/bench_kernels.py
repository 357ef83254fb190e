"""Kernel benchmark (issue 10 item 4): seconds per call and per knot of the floating-base smoother's hot
kernels on the knots of a B1 sway log, against the Pinocchio-call floor on the same knots.

Kernels (the ones a profile of ``FloatingBaseSmoother(load_robot("b1"), knot_stride=5).fit`` spends its
time in):

* ``contact_motion_residuals`` (4 feet, spherical-foot offset) — floor: one
  ``computeForwardKinematicsDerivatives`` per knot;
* ``accelerometer_residual`` and ``gyro_residual`` (IMU frame) — same floor;
* ``world_forces`` (one foot) — floor: one ``computeJointJacobians`` + ``updateFramePlacement`` per knot;
* ``LinearizedGraph.normal_equations`` and ``StructuredSolver.solve`` on the smoother's first linearized
  graph (captured from a real ``fit``) — floor: the flops of their dense block products at the BLAS rate
  measured in the same run (per-knot products of the same size).

The log: ``--log`` a pickled `Log` (e.g. /tmp/prof/b1_sway.pkl of the profile); without it an 8 s, 500 Hz
MuJoCo B1 sway is simulated (``simulate_stance(..., noise=0.01, seed=0, motion="sway", randomize=True)``).
One BLAS thread, as the smoother uses. Best of ``--repeat`` runs.

``--iteration`` adds one whole LM iteration of the smoother on the same knots (linearization with Jacobians +
solve + trial cost, as ``bench_floating.py --scaling`` times it).

Usage: python benchmarks/bench_kernels.py [--log /tmp/prof/b1_sway.pkl] [--stride 5] [--repeat 3]
       [--iteration]
"""

from __future__ import annotations

import argparse
import pickle
import warnings

import numpy as np
import pandas as pd
import pinocchio as pin
from benchlib import best
from threadpoolctl import threadpool_limits

from fg_sysid.estimation.floating_baseline import manifold_sg_states
from fg_sysid.estimation.floating_smoother import FloatingBaseSmoother, full_configuration
from fg_sysid.estimation.linear_solver import StructuredSolver
from fg_sysid.factors.contact import contact_motion_residuals
from fg_sysid.factors.contact_forces import world_forces
from fg_sysid.factors.imu import accelerometer_residual, gyro_residual
from fg_sysid.robots import load_robot


class _Captured(Exception):
    pass


def first_graph(robot, log, stride):
    """The smoother's first linearized graph (a real `fit`, stopped at its first solve)."""
    orig = StructuredSolver.solve

    def grab(self, graph, lam=0.0):
        raise _Captured(graph, lam)

    StructuredSolver.solve = grab
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            FloatingBaseSmoother(robot, knot_stride=stride).fit(log)
    except _Captured as e:
        return e.args
    finally:
        StructuredSolver.solve = orig
    raise RuntimeError("the smoother finished without calling StructuredSolver.solve")


def iteration_seconds(robot, log, stride, repeat):
    """Seconds of one LM iteration as `bench_floating.py --scaling` times it (linearization with
    Jacobians + O(N) solve + one trial cost), at the state after one iteration of a soft-constraint fit."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sm = FloatingBaseSmoother(robot, knot_stride=stride, max_iterations=1, reweight_rounds=0,
                                  constraints="soft", determined_std_ratio=None, init="prior").fit(log)
    st = sm.state_
    x, th = (st["q"], st["v"], st["a"], st["lam"]), sm.result_.theta

    def one():
        g = sm._linearize(x, th, sm.noise_)
        step = sm._solver.solve(g, 1e-4)
        sm._linearize(sm._retract(x, step.dx), th + step.dtheta, sm.noise_, jacobians=False).cost()

    return best(one, repeat)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--log", default=None, help="pickled Log (default: simulate an 8 s B1 sway)")
    ap.add_argument("--stride", type=int, default=5, help="knot stride (samples per knot)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--iteration", action="store_true",
                    help="also time one whole LM iteration of the smoother (as bench_floating --scaling)")
    args = ap.parse_args(argv)
    robot = load_robot("b1")
    if args.log:
        with open(args.log, "rb") as fh:
            log = pickle.load(fh)
    else:
        from fg_sysid.datasets.mujoco_sim import simulate_stance, to_log

        print("simulating an 8 s B1 sway (MuJoCo) ...", flush=True)
        log = to_log(simulate_stance(robot, duration=8.0, rate=500, noise=0.01, seed=0, motion="sway",
                                     randomize=True))
    sm = FloatingBaseSmoother(robot, knot_stride=args.stride).setup(log)
    model, data = sm._kin_model, sm._kin_data
    dt = float(np.median(np.diff(log.t)))
    qfull = full_configuration(log, robot)
    w = max(int(round(sm.sg_window_s / dt)) // 2 * 2 + 1, sm.sg_order + 2 | 1)  # as the smoother's start
    rows, q, v, a = manifold_sg_states(robot.model, qfull, dt, w, sm.sg_order)
    sel = np.arange(0, rows.size, max(args.stride, 1))
    q, v, a = q[sel], v[sel], a[sel]
    N, nv = v.shape
    fids = list(sm._fids)
    imu = model.getFrameId(robot.imu_frame) if getattr(robot, "imu_frame", None) else fids[0]
    rng = np.random.default_rng(0)
    meas = rng.standard_normal((N, 3))
    lam = rng.standard_normal((N, 3))
    print(f"B1, {N} knots (stride {args.stride}), nv={nv}, feet={sm.feet_}", flush=True)

    def fk_floor():
        for k in range(N):
            pin.computeForwardKinematicsDerivatives(model, data, q[k], v[k], a[k])

    def jac_floor():
        for k in range(N):
            pin.computeJointJacobians(model, data, q[k])
            pin.updateFramePlacement(model, data, fids[0])

    rows_out = []
    with threadpool_limits(limits=1, user_api="blas"):
        t_fk = best(fk_floor, args.repeat)
        t_jac = best(jac_floor, args.repeat)
        kernels = [
            ("contact_motion_residuals (4 feet)", t_fk,
             lambda: contact_motion_residuals(model, data, fids, q, v, a, True, sm._offset)),
            ("accelerometer_residual", t_fk,
             lambda: accelerometer_residual(model, data, imu, q, v, a, meas)),
            ("gyro_residual", t_fk, lambda: gyro_residual(model, data, imu, q, v, meas)),
            ("world_forces (1 foot)", t_jac, lambda: world_forces(model, data, fids[0], q, lam)),
        ]
        for name, floor, f in kernels:
            t = best(f, args.repeat)
            rows_out.append(dict(kernel=name, knots=N, s_per_call=t, us_per_knot=1e6 * t / N,
                                 floor_s=floor, x_floor=t / floor))
        print("capturing the smoother's first linearized graph ...", flush=True)
        graph, lam_lm = first_graph(robot, log, args.stride)
        Ng, nx, nt = graph.n_knots, graph.nx, graph.ntheta
        m_knot = sum(r.shape[1] for _, r in graph.knot)
        m_kt = sum(r.shape[1] for *_, r in graph.knot_theta)
        print(f"graph: {Ng} knots, nx={nx}, ntheta={nt}, {len(graph.knot)} knot blocks ({m_knot} rows), "
              f"{len(graph.knot_theta)} knot-theta blocks ({m_kt} rows), {len(graph.pair)} pair blocks",
              flush=True)
        m_pair = sum(r.shape[1] for *_, r in graph.pair)
        # BLAS rate on this machine now: per-knot products of the normal equations' size
        X, Y = np.ones((nx, m_knot)), np.ones((m_knot, nx + 1))
        t_g = best(lambda: [X @ Y for _ in range(Ng)], args.repeat)
        rate = Ng * 2.0 * nx * m_knot * (nx + 1) / t_g
        t = best(graph.normal_equations, args.repeat)
        # flops of the dense products: knot Jᵀ[J|r], knot-θ Jxᵀ[Jx|Jθ|r] and JθᵀJθ (symmetric),
        # pair J0ᵀ[J0|J1|r] and J1ᵀ[J1|r]
        flops = Ng * (2.0 * nx * m_knot * (nx + 1) + 2.0 * nx * m_kt * (nx + nt + 1) + m_kt * nt * nt
                      + 2.0 * nx * m_pair * (2 * nx + 1) + 2.0 * nx * m_pair * (nx + 1))
        rows_out.append(dict(kernel="normal_equations", knots=Ng, s_per_call=t, us_per_knot=1e6 * t / Ng,
                             floor_s=flops / rate, x_floor=t * rate / flops, gflop=flops / 1e9))
        solver = StructuredSolver()
        solver.solve(graph, lam_lm)  # workspace allocation
        t = best(lambda: solver.solve(graph, lam_lm), args.repeat)
        # plus the recursion: L⁻¹[D|C|g] and L⁻¹B (trsm), U_kᵀW_k (gemm), θ border Σ Z_kᵀZ_k (symmetric)
        w = nx + nt + 1
        flops += Ng * (nx * nx * w + nx ** 3 + 2.0 * nx * nx * w + nx * nt * nt)
        rows_out.append(dict(kernel="StructuredSolver.solve (incl. normal_equations)", knots=Ng,
                             s_per_call=t, us_per_knot=1e6 * t / Ng, floor_s=flops / rate,
                             x_floor=t * rate / flops, gflop=flops / 1e9))
        if args.iteration:
            print("one LM iteration of the smoother on these knots ...", flush=True)
            t = iteration_seconds(robot, log, args.stride, args.repeat)
            rows_out.append(dict(kernel="LM iteration (linearize + solve + trial cost)", knots=Ng,
                                 s_per_call=t, us_per_knot=1e6 * t / Ng, floor_s=np.nan, x_floor=np.nan))
    print(f"BLAS rate (per-knot {nx}x{m_knot}x{nx + 1} products, 1 thread): {rate / 1e9:.1f} GFLOP/s; "
          "floor of the BLAS-bound kernels = their dense-product flops at that rate")
    df = pd.DataFrame(rows_out)
    with pd.option_context("display.width", 160, "display.float_format", "{:.4g}".format):
        print(df.to_string(index=False))
    return df


if __name__ == "__main__":
    main()
