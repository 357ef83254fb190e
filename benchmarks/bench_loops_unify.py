"""Closed loops, one closure-kinematics implementation (issue 11 code health): old against new outputs.

The closure kinematics used to live twice (``robots/loop_kinematics.ClosureKinematics`` for the truth and
the constraint-elimination baseline, ``factors/loops.LoopClosures`` for the estimators) with two loop
descriptions (``robots/looped.LoopDescription`` and ``RobotModel.loops``/``.actuation``). This script runs
the same workloads on a reference revision (``--ref-rev``, default the commit before the unification;
exported with ``git archive`` into a temporary directory) and on the working tree, each in its own
process, and prints per quantity the largest absolute and relative difference and whether the outputs
are bit-identical:

* kinematics on random states (5 per robot, fixed seed) of ``fourbar``, ``b1_leg_fourbar`` and the
  floating ``b1_fourbar``: the truth/baseline residual, Jacobian and J̇v (old sign convention p_a − p_b
  flipped to the estimator's p_b − p_a) and the estimator's φ, ∂φ/∂q, φ_v, φ_a with Jacobians, Gᵀλ;
* end to end: `simulate_loop_inclass` (B1 leg, 1 s at 200 Hz), its constraint-elimination LS fit and
  held-in prediction, `loop_states`; `simulate_loop_mujoco` (four-bar, 0.3 s); `simulate_loop_stance`
  (floating B1, 0.2 s of steps); `constrained_sim.simulate_looped` (four-bar, 0.2 s).

Run: ``python benchmarks/bench_loops_unify.py`` (about 5 CPU s per side).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
REF_REV = "28c1af1"  # the last commit with the two implementations
ROBOTS = ("fourbar", "b1_leg_fourbar", "b1_fourbar")


def dump(out: str) -> None:
    """Every compared quantity of the fg_sysid on ``sys.path`` into ``out`` (npz)."""
    import pinocchio as pin

    from fg_sysid.datasets import mujoco_loops as ml
    from fg_sysid.datasets.constrained_sim import simulate_looped
    from fg_sysid.estimation.loop_baseline import ConstraintEliminationLS, constrained_regressor, loop_states
    from fg_sysid.factors.loops import LoopClosures
    from fg_sysid.robots import load_robot
    from fg_sysid.robots.loop_kinematics import ClosureKinematics
    from fg_sysid.robots.looped import load_loop_robot

    old = isinstance(load_loop_robot("fourbar"), tuple)  # (robot, LoopDescription) before the change
    sign = -1.0 if old else 1.0  # the old truth kinematics used p_a − p_b

    def looped(name):
        return load_loop_robot(name) if old else (load_loop_robot(name), None)

    def call(f, robot, desc, *a, **k):
        return f(robot, desc, *a, **k) if old else f(robot, *a, **k)

    t0 = time.process_time()
    res = {}
    for name in ROBOTS:
        r = load_robot(name)
        rng = np.random.default_rng(7)
        ck, L = ClosureKinematics(r.model, r.loops), LoopClosures(r.model, r.loops)
        Q = np.array([pin.randomConfiguration(r.model, -np.ones(r.model.nq), np.ones(r.model.nq))
                      for _ in range(5)])
        V, A, lam = rng.normal(size=(5, r.nv)), rng.normal(size=(5, r.nv)), rng.normal(size=(5, L.m))
        res[f"{name}: truth residual"] = sign * np.array([ck.residual(q) for q in Q])
        res[f"{name}: truth Jacobian"] = sign * np.array([ck.jacobian(q) for q in Q])
        res[f"{name}: truth J̇v"] = sign * np.array([ck.jdot_v(q, v) for q, v in zip(Q, V, strict=True)])
        phi, dphi = L.position(Q)
        mo = L.motion(Q, V, A)
        tau, dq, dl = L.generalized_force(Q, lam)
        for key, val in (("φ", phi), ("∂φ/∂q", dphi), ("φ_v", mo.cv), ("φ_a", mo.ca), ("∂φ_a/∂q", mo.ca_q),
                         ("∂φ_a/∂v", mo.ca_v), ("Gᵀλ", tau), ("∂Gᵀλ/∂q", dq), ("∂Gᵀλ/∂λ", dl)):
            res[f"{name}: estimator {key}"] = val
    robot, desc = looped("b1_leg_fourbar")
    sim = call(ml.simulate_loop_inclass, robot, desc, 1.0, 200.0, 0.01, 0)
    res["in-class log q"], res["in-class log τ"] = sim.log.q, sim.log.tau
    res["in-class a (all joints)"] = sim.desired["a"]
    st = call(loop_states, robot, desc, sim.log)
    res["loop_states q"], res["loop_states a"] = st.q, st.a
    ce = call(ConstraintEliminationLS, robot, desc).fit(sim.log)
    res["CE-LS estimate p"], res["CE-LS prediction u"] = ce.result_.estimate, ce.predict(st)
    # the part of p the regression determines: its projection onto the row space of the stacked Gᵀ W
    W = call(constrained_regressor, robot, desc, st, np.flatnonzero(st.keep))
    _, sv, Vt = np.linalg.svd(W.reshape(-1, W.shape[-1]), full_matrices=False)
    Vr = Vt[sv > 1e-9 * sv[0]]
    res["CE-LS estimate p, identifiable part"] = Vr.T @ (Vr @ ce.result_.estimate)
    res["CE-LS regressor rank"] = np.array([len(Vr), W.shape[-1]])
    robot, desc = looped("fourbar")
    sim = call(ml.simulate_loop_mujoco, robot, desc, 0.3, 200.0, 0.01, 3)
    res["MuJoCo four-bar log q"], res["MuJoCo four-bar log τ"] = sim.log.q, sim.log.tau
    robot, desc = looped("b1_fourbar")
    _, log, viol = call(ml.simulate_loop_stance, robot, desc, 0.2, 200.0, 0.01, 2, motion="steps",
                        step_period=0.1, settle=0.05)
    res["MuJoCo floating B1 log q"], res["MuJoCo floating B1 log τ"] = log.q, log.tau
    _, truth = simulate_looped(load_robot("fourbar"), duration=0.2, rate=200.0, substeps=4)
    res["constrained_sim q"], res["constrained_sim violation"] = truth.q, np.array(truth.max_violation)
    res["_cpu"] = np.array(time.process_time() - t0)
    np.savez(out, **{k.encode("unicode_escape").decode(): v for k, v in res.items()})


def _run(tree: Path, out: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(tree))
    subprocess.run([sys.executable, __file__, "--dump", str(out)], env=env, check=True, cwd=tree)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ref-rev", default=REF_REV, help="git revision of the reference (default %(default)s)")
    ap.add_argument("--dump", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.dump:
        dump(args.dump)
        return
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        ref = tmp / "ref"
        ref.mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.ref_rev, "fg_sysid"],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(ref)], input=archive, check=True)
        print(f"reference {args.ref_rev} ...", flush=True)
        _run(ref, tmp / "old.npz")
        print("working tree ...", flush=True)
        _run(ROOT, tmp / "new.npz")
        a, b = np.load(tmp / "old.npz"), np.load(tmp / "new.npz")
        rows = []
        for k in a.files:
            if k == "_cpu":
                continue
            x, y = a[k], b[k]
            fin = np.isfinite(x)
            if x.shape != y.shape or not np.array_equal(fin, np.isfinite(y)):
                rows.append({"quantity": k, "max |Δ|": np.inf, "max |Δ| / max |old|": np.inf,
                             "bit-identical": False})
                continue
            d = float(np.abs(x[fin] - y[fin]).max(initial=0.0))
            scale = float(np.abs(x[fin]).max(initial=0.0))
            rows.append({"quantity": k.encode().decode("unicode_escape"), "max |Δ|": d,
                         "max |Δ| / max |old|": d / scale if scale > 0 else 0.0,
                         "bit-identical": bool(np.array_equal(x[fin], y[fin]))})
        with pd.option_context("display.width", 160, "display.max_rows", 200):
            print(pd.DataFrame(rows).to_string(index=False, float_format=lambda v: f"{v:.3g}"))
        rank = a["CE-LS regressor rank"]
        print(f"CE-LS stacked regressor: rank {rank[0]} of {rank[1]} columns (σ > 1e-9 σ_max)")
        print(f"CPU s: reference {float(a['_cpu']):.1f}, working tree {float(b['_cpu']):.1f}")


if __name__ == "__main__":
    main()
