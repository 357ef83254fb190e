"""Export benchmark (issue 14 item 1): round-trip accuracy of the URDF/MJCF export and MuJoCo rollouts.

For each robot: a training log (seed 0, noise σ on q, v, τ) identified with ``fg-sysid identify``
(smoother and ``--method ls-sg``), exported with ``fg-sysid export --urdf --mjcf``, then

* round trip: inverse dynamics of the exported URDF loaded by Pinocchio (same joints locked; + armature
  and the estimator's friction law with the URDF's friction/damping) and of the MJCF loaded by MuJoCo
  (``mj_inverse`` with the constraint solver off, so frictionloss is left out of both sides), relative
  to the identified model's (`fg_sysid.validation.predict_efforts`), on 50 random states:
  ``‖τ_export − τ_model‖ / ‖τ_model‖``;
* rollout: a noise-free held-out log of the same robot (seed 1, another excitation) replayed in MuJoCo
  with the logged efforts as feed-forward and a weak joint PD (2 Hz, `fg_sysid.export.track_log`),
  for the exported model, the nominal URDF (its own friction/damping) and the truth. Out of class for
  every model: the logs come from fg-sysid's simulator (RK4, smooth fc·tanh(v/0.05) friction), the
  rollout from MuJoCo (implicitfast, dry constraint frictionloss); the truth row is that floor.

Usage: python benchmarks/bench_export.py [--robots z1 panda] [--duration 10] [--rate 500]
       [--noise 0.01] [--out benchmarks/results/export.csv]
"""

from __future__ import annotations

import argparse
import tempfile
import time
import warnings
from pathlib import Path

import mujoco
import numpy as np
import pandas as pd
import pinocchio as pin
from click.testing import CliRunner

from fg_sysid.cli import main
from fg_sysid.datasets.io import write_log
from fg_sysid.datasets.mujoco_sim import build_mujoco_spec
from fg_sysid.datasets.simulate import simulate, truth_arrays
from fg_sysid.export import dry_friction_shape, identified_parameters, track_log
from fg_sysid.robots import RobotModel, load_robot
from fg_sysid.validation import load_model, predict_efforts


def _states(robot, n=50, seed=3):
    rng = np.random.default_rng(seed)
    lo, hi = robot.position_limits()
    q = rng.uniform(np.maximum(lo, -2.5), np.minimum(hi, 2.5), size=(n, robot.n_joints))
    return q, rng.normal(0, 1.5, q.shape), rng.normal(0, 4.0, q.shape)


def roundtrip(spec, params, urdf, mjcf) -> tuple[float, float]:
    robot = params.robot
    q, v, a = _states(robot)
    ref = predict_efforts(spec, robot, q, v, a)
    exp = RobotModel.from_urdf(urdf, locked_joints=spec["robot"]["locked_joints"])
    d = exp.model.createData()
    shape = dry_friction_shape(spec, robot.joint_names, v, a)  # the model's own law (v + T·a for lead laws)
    tau_u = np.array([pin.rnea(exp.model, d, q[k], v[k], a[k]) for k in range(q.shape[0])])
    tau_u += params.armature * a + exp.urdf_friction * shape + exp.urdf_damping * v
    err_u = float(np.linalg.norm(tau_u - ref) / np.linalg.norm(ref))
    if mjcf is None:
        return err_u, float("nan")
    m = mujoco.MjModel.from_xml_path(str(mjcf))
    m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONSTRAINT)
    md = mujoco.MjData(m)
    jid = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, j) for j in robot.joint_names]
    qa, da = m.jnt_qposadr[jid], m.jnt_dofadr[jid]
    tau_m = np.empty_like(q)
    for k in range(q.shape[0]):
        md.qpos[qa], md.qvel[da], md.qacc[da] = q[k], v[k], a[k]
        mujoco.mj_inverse(m, md)
        tau_m[k] = md.qfrc_inverse[da]
    ref_m = ref - params.fc * shape
    return err_u, float(np.linalg.norm(tau_m - ref_m) / np.linalg.norm(ref_m))


def run(robot_name, duration, rate, noise, work: Path) -> list[dict]:
    robot = load_robot(robot_name)
    train = simulate(robot, duration, rate, noise, 0)
    held = simulate(robot, duration, rate, 0.0, 1, truth=train.truth)
    write_log(train.log, work / f"{robot_name}.parquet")
    tr = truth_arrays(train.truth, robot)
    log = held.log
    floors = {}
    for name, m in (("nominal URDF", build_mujoco_spec(robot).compile()),
                    ("truth", build_mujoco_spec(robot, tr["inertial"], (tr["fc"], tr["fv"]),
                                                tr["armature"]).compile())):
        floors[name] = track_log(m, robot.joint_names, log.t, log.q, log.v, log.tau)
    rows = []
    for method in ("smoother", "ls-sg"):
        out = work / f"{robot_name}-{method}"
        t0 = time.perf_counter()
        r = CliRunner().invoke(main, ["identify", str(work / f"{robot_name}.parquet"), "--robot", robot_name,
                                      "--out", str(out), "--method", method, "--quiet"])
        assert r.exit_code == 0, r.output
        fit_s = time.perf_counter() - t0
        urdf, mjcf = out / "export.urdf", out / "export.xml"
        row = {"robot": robot_name, "method": method, "train_s": duration, "rate_hz": rate, "noise": noise,
               "fit_s": round(fit_s, 1)}
        ru = CliRunner().invoke(main, ["export", str(out), "--urdf", str(urdf)])
        rm = CliRunner().invoke(main, ["export", str(out), "--mjcf", str(mjcf)])
        spec = load_model(out)
        params = identified_parameters(spec)
        if ru.exit_code != 0 or rm.exit_code != 0:  # e.g. an ls-sg estimate with a negative friction
            if ru.exit_code == 0:
                row["urdf_id_rel_err"] = roundtrip(spec, params, urdf, None)[0]
            bad = ru if ru.exit_code != 0 else rm
            row["refused"] = bad.output.strip().splitlines()[-1][7:100]
            rows.append(row)
            continue
        row["urdf_id_rel_err"], row["mjcf_id_rel_err"] = roundtrip(spec, params, urdf, mjcf)
        mj = mujoco.MjModel.from_xml_path(str(mjcf))
        rr = track_log(mj, robot.joint_names, log.t, log.q, log.v, log.tau)
        row["rollout_rms_rad"] = rr["rms_overall"]
        row["rollout_max_joint_rms_rad"] = float(rr["rms"].max())
        for name, fl in floors.items():
            row[f"{name}_rms_rad"] = fl["rms_overall"]
        rows.append(row)
    return rows


def main_(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--robots", nargs="+", default=["z1", "panda"])
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--rate", type=float, default=500.0)
    ap.add_argument("--noise", type=float, default=0.01)
    ap.add_argument("--out", default="benchmarks/results/export.csv")
    args = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as work, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in args.robots:
            rows += run(name, args.duration, args.rate, args.noise, Path(work))
            print(pd.DataFrame(rows).tail(2).to_string(index=False), flush=True)
    df = pd.DataFrame(rows)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(args.out, index=False)
    with pd.option_context("display.width", 200, "display.max_columns", 20,
                           "display.float_format", "{:.3g}".format):
        print(df.to_string(index=False))


if __name__ == "__main__":
    main_()
