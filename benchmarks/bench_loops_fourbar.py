"""Closed loops (issue 11): the planar four-bar, in-class, loop model vs the reduced serial model.

The four-bar of `fg_sysid.robots.loop_examples` (crank actuated through gear 10, coupler passive and
unencoded, rocker passive and encoded) is simulated with Pinocchio's constrained dynamics
(`fg_sysid.datasets.constrained_sim`, in-class: the estimator's rigid-body + tanh friction + armature
model), noise σ on q and τ, one training log and one held-out log (other excitation seed). Compared:

* ``loop``: `JointSmoother` on the tree with the closure (`robot.loops`) — what ``fg-sysid identify``
  runs for a spec with ``loops:``;
* ``reduced``: the serial model — coupler and rocker locked, the crank identified alone (what
  identifying a linkage-driven joint as a serial chain does);
* ``truth``: the true parameters (the floor set by the effort noise; out of class, the truth's own
  rigid-body + friction parameters without the Stribeck peak and gain error).

Truth classes: ``in`` (the estimator's model) and ``out`` (`OUT_OF_CLASS`: Stribeck friction peak on the
crank, 5 % effort gain error).

Held-out error: RMS of predicted − measured crank torque at the held-out log's exact states [N·m]; the
ratio of the model errors above the noise floor, √(e² − e_truth²), of the loop and the reduced model.
Also printed: worst closure / passive-row residual at the solution, crank friction and the identifiable
combination armature + crank I_yy against the truth, fit time.

Usage: python benchmarks/bench_loops_fourbar.py [--seeds 1 2 3] [--duration 3] [--rate 500] [--noise 0.01]
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
import warnings

import numpy as np
import pandas as pd

from fg_sysid.datasets.constrained_sim import simulate_looped
from fg_sysid.datasets.log import Log
from fg_sysid.estimation import loop_terms
from fg_sysid.estimation.smoother import JointSmoother
from fg_sysid.factors.inverse_dynamics import InverseDynamicsResidual
from fg_sysid.robots.loop_examples import planar_fourbar

#: out-of-class truth: Stribeck peak (fs = 0.15 N·m at v_s = 0.3 rad/s) on the crank and a 5 % torque-constant
#: error in the logged efforts (both outside the estimator's model)
OUT_OF_CLASS = {"stribeck": (0.15, 0.3), "effort_gain": 1.05}


def run(seed: int, duration: float, rate: float, noise: float, kind: str, truth_class: str = "in") -> dict:
    robot = planar_fourbar(tempfile.mkdtemp(), kind=kind)
    kw = OUT_OF_CLASS if truth_class == "out" else {}
    log, truth = simulate_looped(robot, duration=duration, rate=rate, noise=noise, seed=seed, **kw)
    held, ht = simulate_looped(robot, duration=duration, rate=rate, noise=noise, seed=seed + 100, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        sm = JointSmoother(robot).fit(log)
        seconds = time.perf_counter() - t0
        red = dataclasses.replace(robot.lock(["coupler_joint", "rocker_joint"]), loops=(), actuation=None)
        lg = Log(t=log.t, q=log.q[:, [0]], v=None, tau=log.tau[:, [0]], joint_names=("crank_joint",),
                 source="reduced")
        smr = JointSmoother(red).fit(lg)
    lay, theta = sm.layout_, sm.result_.theta
    p = lay.nominal_physical()
    p[lay.s_friction] = ht.friction.ravel()
    p[lay.s_armature] = np.maximum(ht.armature, 1e-9)
    meas = held.tau[:, 0]

    def rms(pred):
        return float(np.sqrt(np.mean((pred - meas) ** 2)))

    e_loop = rms(loop_terms.predict_torque(robot, lay, theta, ht.q, ht.v, ht.a)[:, 0])
    e_true = rms(loop_terms.predict_torque(robot, lay, lay.to_theta(p), ht.q, ht.v, ht.a)[:, 0])
    e_red = rms(InverseDynamicsResidual(smr.layout_).predict(ht.q[:, [0]], ht.v[:, [0]], ht.a[:, [0]],
                                                             smr.result_.theta)[:, 0])
    est = sm.result_.parameters_table().set_index("name")["estimate"]
    iyy = robot.nominal_inertial_parameters()[0, 6]
    combo_true = truth.armature[0] + iyy
    fc, fv = truth.friction[0, :2]
    return {
        "seed": seed, "closure": kind, "truth": f"{truth_class}-class", "knots": int(log.n_samples),
        "heldout_loop": e_loop, "heldout_reduced": e_red, "heldout_truth": e_true,
        "loop/truth": e_loop / e_true, "loop/reduced": e_loop / e_red,
        # model error above the noise floor (noise independent of the model error: e² ≈ floor² + excess²)
        "excess_loop/reduced": np.sqrt(max(e_loop ** 2 - e_true ** 2, 0.0))
        / np.sqrt(max(e_red ** 2 - e_true ** 2, 1e-300)),
        "closure_residual_max": sm.constraints_["loop_position"],
        "passive_residual_max": sm.constraints_.get("passive_dynamics", 0.0),
        "fc_err_%": 100 * (est["crank_joint.fc"] - fc) / fc,
        "fv_err_%": 100 * (est["crank_joint.fv"] - fv) / fv,
        "armature+Iyy_err_%": 100 * (est["crank_joint.armature"] + est["crank.iyy"] - combo_true)
        / combo_true,
        "armature_err_%": 100 * (est["crank_joint.armature"] - truth.armature[0]) / truth.armature[0],
        "fit_s": seconds,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--duration", type=float, default=3.0)
    ap.add_argument("--rate", type=float, default=500.0)
    ap.add_argument("--noise", type=float, default=0.01)
    ap.add_argument("--closures", nargs="+", default=["point3d", "planar"])
    ap.add_argument("--truth", nargs="+", default=["in", "out"], choices=["in", "out"])
    args = ap.parse_args()
    rows = [run(s, args.duration, args.rate, args.noise, k, c) for c in args.truth for k in args.closures
            for s in args.seeds]
    df = pd.DataFrame(rows)
    fmt = "{:.4g}".format
    with pd.option_context("display.width", 200, "display.max_columns", 30, "display.float_format", fmt):
        print(df.to_string(index=False))


if __name__ == "__main__":
    main()
