"""`fg-sysid payload-excite`: a safe exciting motion written as a sampled trajectory (issue 16 item 5)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from fg_sysid.cli import main
from fg_sysid.payload import NoiseBounds, PayloadProblem, RobotPrior
from fg_sysid.payload.excitation import SafeExcitation, payload_box_from_geometry
from fg_sysid.robots import load_robot


def _run(args):
    return CliRunner().invoke(main, ["payload-excite", *args], catch_exceptions=False)


def test_payload_excite_writes_a_safe_trajectory(tmp_path):
    out = tmp_path / "ex"
    res = _run(["--robot", "panda", "--duration", "3", "--max-evaluations", "5", "--rate", "100",
                "--sphere", "0.5,0,0.3,0.1", "--out", str(out)])
    assert res.exit_code == 0, res.output
    info = json.loads((out / "excitation.json").read_text())
    df = pd.read_csv(out / "trajectory.csv")
    robot = load_robot("panda")
    assert len(df) == 301
    assert list(df.columns[:4]) == ["t", "q.panda_joint1", "v.panda_joint1", "a.panda_joint1"]
    q = df[[f"q.{j}" for j in robot.joint_names]].to_numpy()
    v = df[[f"v.{j}" for j in robot.joint_names]].to_numpy()
    lo, hi = robot.position_limits()
    assert np.all((q >= lo) & (q <= hi)) and np.all(np.abs(v) <= robot.velocity_limits())
    np.testing.assert_allclose(v[[0, -1]], 0, atol=1e-9)  # rest to rest
    # the reported box-robust torque ratio and cond(Y), recomputed independently from the written samples
    prior = RobotPrior.from_robot(robot)
    box = payload_box_from_geometry(prior, 3.0, 0.2)
    ev = SafeExcitation(robot, prior, box, robot_rel=0.05, duration=3.0)
    a = df[[f"a.{j}" for j in robot.joint_names]].to_numpy()
    ratio = max(ev._ratio(q[k], v[k], a[k]) for k in range(0, len(q), 3))
    assert ratio <= info["checks"]["box_robust_torque_ratio"] + 1e-9 <= 0.8 + 1e-6
    assert info["checks"]["min_clearance_m"] >= 0
    t = df["t"].to_numpy()
    sub = slice(0, None, 2)  # 50 Hz, the optimizer's windows of 5 samples
    prob = PayloadProblem(robot, prior, NoiseBounds(), h=5)
    prob.add(t[sub], q[sub], v[sub], np.zeros_like(q[sub]))
    assert np.linalg.cond(prob.Y) == pytest.approx(info["cond_Y"], rel=1e-6)
    assert (out / "excitation.png").stat().st_size > 1000


@pytest.mark.parametrize("args, message", [
    (["--duration", "0"], "--duration must be positive"),
    (["--max-mass", "-1"], "--max-mass must be >= 0"),
    (["--sphere", "1,2,3"], "expected 4 comma-separated numbers"),
    (["--box-obstacle", "0,0,0,1,1,-1"], "half extents must be positive"),
    (["--torque-fraction", "1.5"], "--torque-fraction"),
    (["--robot-bound", "abc"], "--robot-bound"),
    (["--max-mass", "1000", "--radius", "1", "--random"], "torque limits cannot be met"),
])
def test_payload_excite_bad_input(tmp_path, args, message):
    out = tmp_path / "bad"
    res = _run(["--robot", "panda", "--duration", "2", "--rate", "50", *args, "--out", str(out)])
    assert res.exit_code == 2, res.output
    assert message in res.output and "error:" in res.output
    assert not out.exists()


def test_payload_excite_needs_a_robot(tmp_path):
    res = _run(["--out", str(tmp_path / "x")])
    assert res.exit_code == 2 and "give --robot" in res.output
