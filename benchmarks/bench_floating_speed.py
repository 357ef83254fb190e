"""Floating-base speed (issue 10): wall time of one `FloatingBaseSmoother` fit with default settings.

Cases (MuJoCo logs, σ = 0.01, seeded truth draw):

* ``go2-sway``: Unitree Go2 (example-robot-data URDF through a robot spec written on the fly — a
  quadruped the project has no catalog entry for), 8 s stance sway at 500 Hz;
* ``b1-trot``: B1, 10 s open-loop trot at 1 kHz;
* ``b1-sway``: B1, 8 s stance sway at 500 Hz.

Printed per case: knots (stride chosen from the log), iterations, seconds, seconds per iteration, time
per knot and iteration, and the Pinocchio floor per knot — the dynamics and kinematics calls alone that
one linearization needs per knot (RNEA derivatives + torque regressor, RNEA derivatives with contact
forces, forward-kinematics derivatives for the contacts, joint Jacobians for the foot heights) — plus
the total-mass error and the worst constraint residual.

Run: ``.venv/bin/python benchmarks/bench_floating_speed.py [--cases go2-sway b1-trot] [--quick]``;
results also go to ``benchmarks/results/floating_speed.json``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pinocchio as pin

from fg_sysid.datasets.mujoco_sim import simulate_stance, to_log
from fg_sysid.estimation.floating_smoother import FloatingBaseSmoother
from fg_sysid.robots import example_robot_data_root, load_robot

OUT = Path(__file__).parent / "results"
CASES = {
    "go2-sway": dict(robot="go2", motion="sway", duration=8.0, rate=500.0),
    "b1-trot": dict(robot="b1", motion="trot", duration=10.0, rate=1000.0),
    "b1-sway": dict(robot="b1", motion="sway", duration=8.0, rate=500.0),
}
GO2_SPEC = """name: go2
urdf: {urdf}
base: floating
imu_frame: imu
contacts: [FL_foot, FR_foot, RL_foot, RR_foot]
contact_radius: 0.022
symmetry:
  pairs: [[FL_, FR_], [RL_, RR_]]
  plane: xz
"""


def robot_for(name: str, tmp: Path):
    if name != "go2":
        return load_robot(name), {}
    spec = tmp / "go2.yaml"
    spec.write_text(GO2_SPEC.format(urdf=example_robot_data_root() / "go2_description/urdf/go2.urdf"))
    return load_robot(spec), {"foot_radius": 0.022, "kp": 80.0, "kd": 2.0}


def pinocchio_floor(robot, q, v, a, feet, repeats: int = 1) -> float:
    """Seconds per knot of the Pinocchio calls one linearization needs (see the module docstring)."""
    m = robot.model
    d = m.createData()
    fids = [m.getFrameId(f) for f in feet]
    fext = pin.StdVec_Force()
    for _ in range(m.njoints):
        fext.append(pin.Force.Zero())
    zero = np.zeros(m.nv)
    n = q.shape[0]
    t0 = time.perf_counter()
    for _ in range(repeats):
        for k in range(n):
            pin.computeRNEADerivatives(m, d, q[k], v[k], a[k])
            pin.computeJointTorqueRegressor(m, d, q[k], v[k], a[k])
            pin.computeRNEADerivatives(m, d, q[k], zero, zero, fext)
            pin.computeForwardKinematicsDerivatives(m, d, q[k], v[k], a[k])
            for fid in fids:
                pin.getFrameAccelerationDerivatives(m, d, fid, pin.WORLD)
            pin.computeJointJacobians(m, d, q[k])
    return (time.perf_counter() - t0) / (repeats * n)


def run(case: str, args, tmp: Path) -> dict:
    c = dict(CASES[case])
    if args.quick:
        c["duration"] = min(c["duration"], 2.0)
    robot, sim_kw = robot_for(c["robot"], tmp)
    res = simulate_stance(robot, c["duration"], c["rate"], seed=args.seed, noise=args.noise,
                          motion=c["motion"], randomize=True, **sim_kw)
    log = to_log(res)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sm = FloatingBaseSmoother(robot, verbose=args.verbose).fit(log)
    seconds = time.perf_counter() - t0
    r = sm.result_
    fb = r.extras["floating_base"]
    iters = len(r.history)
    knots = int(r.knots)
    x = sm.states_
    floor = pinocchio_floor(robot, x[0], x[1], x[2], sm.feet_)
    per_knot_iter = float(np.median([h["seconds"] for h in r.history])) / knots
    true_mass = float(sum(v for k, v in res.truth["parameters"].items() if k.endswith(".m")))
    return {
        "case": case, "robot": robot.name, "motion": c["motion"], "duration_s": c["duration"],
        "rate_hz": c["rate"], "samples": int(log.n_samples), "knots": knots,
        "stride": int(sm.knot_spacing_["stride"]), "limited_by": sm.knot_spacing_["limited_by"],
        "iterations": iters, "seconds": seconds, "seconds_per_iteration": seconds / max(iters, 1),
        "ms_per_knot_iteration": 1e3 * per_knot_iter, "floor_ms_per_knot": 1e3 * floor,
        "ratio_to_floor": per_knot_iter / floor,
        "total_mass_error_pct": 100 * (fb["total_mass_estimate"] / true_mass - 1),
        "worst_constraint": max(fb["constraint_residual_max"].values()),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", nargs="+", choices=sorted(CASES), default=["go2-sway", "b1-trot"])
    ap.add_argument("--noise", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="2 s logs (a smoke run)")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for case in args.cases:
            row = run(case, args, Path(tmp))
            rows.append(row)
            print(json.dumps(row), flush=True)
    import pandas as pd

    cols = ["case", "samples", "knots", "stride", "iterations", "seconds", "seconds_per_iteration",
            "ms_per_knot_iteration", "floor_ms_per_knot", "ratio_to_floor", "total_mass_error_pct",
            "worst_constraint"]
    print(pd.DataFrame(rows)[cols].to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    OUT.mkdir(exist_ok=True)
    (OUT / "floating_speed.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
