"""``fg-sysid payload``: outputs, containment with a truth file, bad input (exit 2, no partial output)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from fg_sysid.cli import main
from fg_sysid.payload import RobotPrior
from fg_sysid.payload.simulate import random_motion, simulate_payload_run, standard_payloads, torque_noise
from fg_sysid.robots import load_robot

ARMATURE, VISCOUS = 0.2, 0.1


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("payload")
    robot = load_robot("panda")
    prior = RobotPrior.from_robot(robot, armature=ARMATURE, fv=VISCOUS)
    rng = np.random.default_rng(3)
    run = simulate_payload_run(robot, prior, standard_payloads()[1], random_motion(robot, rng, duration=3.0),
                               duration=3.0, rate=500.0, substeps=2, rng=rng)
    tau = run.tau + torque_noise(run.tau, 0.025, rng=rng)
    cols = {"t": run.t}
    for i, j in enumerate(robot.joint_names):
        cols[f"q.{j}"], cols[f"v.{j}"], cols[f"tau.{j}"] = run.q[:, i], run.v[:, i], tau[:, i]
    pd.DataFrame(cols).to_csv(d / "log.csv", index=False)
    pd.DataFrame({k: v for k, v in cols.items() if not k.startswith("v.")}).to_csv(d / "nov.csv", index=False)
    names = ("m", "mcx", "mcy", "mcz", "ixx", "ixy", "iyy", "ixz", "iyz", "izz")
    (d / "truth.json").write_text(json.dumps(dict(zip(names, run.theta_e.tolist(), strict=True))))
    return d, run


def test_payload_cli_outputs_and_containment(data):
    d, run = data
    out = d / "res"
    r = invoke("payload", d / "log.csv", "--robot", "panda", "--tau-bound", "2.5%", "--robot-bound", "5%",
               "--bounds", "lp", "--h", 25, "--chunk", 1.0, "--armature", ARMATURE, "--viscous", VISCOUS,
               "--truth", d / "truth.json", "--export-mjcf", "--out", out)
    assert r.exit_code == 0, r.output
    res = json.loads((out / "payload.json").read_text())
    mujoco = pytest.importorskip("mujoco")
    mj = mujoco.MjModel.from_xml_path(str(out / "robot_with_payload.xml"))
    assert mj.body_mass[-1] == pytest.approx(res["parameters"]["m"]["estimate"], rel=1e-5)  # MJCF: 6 digits
    assert res["containment"]["all"] is True
    assert res["updates"] >= 2 and res["end_effector_link"] == "panda_link7"
    m = res["parameters"]["m"]
    assert m["lower"] <= run.theta_e[0] <= m["upper"] and m["width"] < 0.6
    assert abs(m["estimate"] - run.theta_e[0]) < 0.02 * run.theta_e[0]
    tab = pd.read_csv(out / "bounds.csv")
    assert tab["contained"].all() and len(tab) == 10
    hist = pd.read_csv(out / "history.csv")
    w = (hist["hi.m"] - hist["lo.m"]).to_numpy()
    assert np.all(np.diff(w) <= 1e-12)
    assert (out / "width_over_time.png").stat().st_size > 10_000


@pytest.mark.parametrize("args, message", [
    (("--tau-bound", "2.5"), None),  # absolute 2.5 N·m is valid: not an error
    (("--tau-bound", "abc"), "--tau-bound 'abc'"),
    (("--robot-bound", "0.05"), "--robot-bound '0.05'"),
    (("--tau-bound", "0.01%", "--robot-bound", "0%"), "the data contradict the bounds"),
    (("--ee-link", "no_such_link"), "no_such_link"),
    (("--h", "0"), "--h must be"),
])
def test_payload_cli_bad_input(data, tmp_path, args, message):
    d, _ = data
    out = tmp_path / "bad"
    r = invoke("payload", d / "log.csv", "--robot", "panda", "--h", 25, "--armature", ARMATURE,
               "--viscous", VISCOUS, "--out", out, *args)
    if message is None:
        assert r.exit_code == 0, r.output
        return
    assert r.exit_code == 2, r.output
    assert "error:" in r.output and message in r.output
    assert not out.exists()


def test_payload_cli_needs_velocities_and_help(data):
    d, _ = data
    r = invoke("payload", d / "nov.csv", "--robot", "panda", "--out", d / "nov")
    assert r.exit_code == 2 and "velocities" in r.output
    r = invoke("payload", "--help")
    assert r.exit_code == 0 and "--tau-bound" in r.output and "contradict" in r.output
