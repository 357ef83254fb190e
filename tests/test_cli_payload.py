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
from fg_sysid.robots import RobotModel, load_robot

ARMATURE, VISCOUS = 0.2, 0.1
INERTIAL = ("m", "mcx", "mcy", "mcz", "ixx", "ixy", "iyy", "ixz", "iyz", "izz")


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
               "--truth", d / "truth.json", "--export-mjcf", "--export-urdf", "--out", out)
    assert r.exit_code == 0, r.output
    res = json.loads((out / "payload.json").read_text())
    # URDF: Pinocchio (same locked fingers) loads the estimated end effector + payload as link 7's body
    robot = load_robot("panda")
    urdf = RobotModel.from_urdf(out / "robot_with_payload.urdf", locked_joints=robot.locked_joints)
    est = np.array([res["parameters"][n]["estimate"] for n in INERTIAL])
    np.testing.assert_allclose(urdf.nominal_inertial_parameters()[-1], est, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(urdf.nominal_inertial_parameters()[:-1],
                               robot.nominal_inertial_parameters()[:-1], rtol=1e-9, atol=1e-12)
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


def _model_json(robot, path):
    """A model.json (the format ``fg-sysid identify`` writes) holding the simulation's robot: URDF
    inertias, armature ARMATURE and viscous friction VISCOUS on every joint, no Coulomb friction."""
    from fg_sysid.validation import MODEL_FORMAT

    pi = robot.nominal_inertial_parameters()
    names = list(robot.inertial_parameter_names())
    phys = dict(zip(names, pi.ravel().tolist(), strict=True))
    for j in robot.joint_names:
        phys.update({f"{j}.fc": 0.0, f"{j}.fv": VISCOUS, f"{j}.armature": ARMATURE})
    spec = {"format": MODEL_FORMAT, "robot": {"source": "panda", "joints": list(robot.joint_names),
                                               "locked_joints": {}},
            "layout": {"names": list(phys), "friction_model": "coulomb-viscous"}, "physical": phys}
    path.write_text(json.dumps(spec))
    return path


def test_payload_cli_model_json_gives_the_same_prior_as_the_urdf(data):
    """--model: θ_r (inertias, armature, friction) from an identify output instead of the URDF; with the
    same values the bounds are those of --robot with --armature/--viscous."""
    d, run = data
    model = _model_json(load_robot("panda"), d / "model.json")
    common = ("--tau-bound", "2.5%", "--robot-bound", "5%", "--h", 25, "--chunk", 1.5)
    r1 = invoke("payload", d / "log.csv", "--model", model, *common, "--out", d / "from_model")
    assert r1.exit_code == 0, r1.output
    r2 = invoke("payload", d / "log.csv", "--robot", "panda", "--armature", ARMATURE, "--viscous", VISCOUS,
                *common, "--out", d / "from_urdf")
    assert r2.exit_code == 0, r2.output
    a = json.loads((d / "from_model" / "payload.json").read_text())
    b = json.loads((d / "from_urdf" / "payload.json").read_text())
    assert a["assumptions"]["robot_prior"] == "model.json" and b["assumptions"]["robot_prior"] == "URDF"
    for n in INERTIAL:
        for k in ("estimate", "lower", "upper"):
            assert a["parameters"][n][k] == pytest.approx(b["parameters"][n][k], rel=1e-6, abs=1e-9), (n, k)
    assert a["parameters"]["m"]["lower"] <= run.theta_e[0] <= a["parameters"]["m"]["upper"]
    # a model.json of another robot is refused with a clear message (exit 2, no output)
    spec = json.loads(model.read_text())
    spec["robot"]["joints"] = spec["robot"]["joints"][:-1]
    (d / "other.json").write_text(json.dumps(spec))
    r3 = invoke("payload", d / "log.csv", "--model", d / "other.json", "--out", d / "other")
    assert r3.exit_code == 2 and "error:" in r3.output and not (d / "other").exists()
