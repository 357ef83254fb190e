"""Identification of a looped robot (issue 11): the planar four-bar (crank actuated through gear 10,
coupler passive and unencoded, rocker passive), simulated **in-class** with Pinocchio's constrained
dynamics (`pin.constraintDynamics`), σ = 0.01 on q and τ. Checks: closures and passive rows hold at the
solution, held-out crank torque near the floor of the true parameters and far better than the serial
(reduced) model, crank friction and the identifiable armature combination recovered; the CLI end to end;
tree robots untouched."""

import dataclasses
import json
import warnings

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from fg_sysid.cli import main
from fg_sysid.datasets.constrained_sim import log_frame, simulate_looped
from fg_sysid.datasets.io import load_log_for_robot
from fg_sysid.datasets.log import Log
from fg_sysid.estimation import loop_terms
from fg_sysid.estimation.smoother import JointSmoother
from fg_sysid.factors.inverse_dynamics import InverseDynamicsResidual
from fg_sysid.robots.loop_examples import planar_fourbar, write_fourbar_spec
from fg_sysid.robots.model import RobotError
from fg_sysid.robots.spec import load_robot


@pytest.fixture(scope="module")
def fit(tmp_path_factory):
    robot = planar_fourbar(tmp_path_factory.mktemp("fb"))
    log, truth = simulate_looped(robot, duration=2.0, rate=250, seed=1)
    held, held_truth = simulate_looped(robot, duration=2.0, rate=250, seed=7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sm = JointSmoother(robot).fit(log)
    return robot, log, truth, held, held_truth, sm


def test_truth_simulation_obeys_the_constrained_dynamics(fit):
    """Oracle of the simulator: M a + h + A a + τ_f − Gᵀλ = S τ with λ from the passive rows, and the
    closure holds along the simulated trajectory (Baumgarte-stabilized)."""
    robot, log, truth, *_ = fit
    assert truth.max_violation < 1e-4
    layout = fit[-1].layout_
    p = layout.nominal_physical()
    p[layout.s_friction] = truth.friction.ravel()
    p[layout.s_armature] = np.maximum(truth.armature, 1e-9)
    pred = loop_terms.predict_torque(robot, layout, layout.to_theta(p), truth.q, truth.v, truth.a)
    np.testing.assert_allclose(pred[:, 0], truth.tau[:, 0], atol=1e-6)


def test_fourbar_in_class_identification(fit):
    robot, log, truth, held, held_truth, sm = fit
    # closures and passive rows at the solution (augmented Lagrangian), recomputed from the states
    phi, _ = loop_terms.closures(robot).position(sm.states_[0], False)
    assert np.abs(phi).max() <= 1e-8
    assert max(sm.constraints_[k] for k in ("loop_position", "loop_velocity", "passive_dynamics")) <= 1e-8
    # the unencoded coupler is recovered from the closure
    assert np.abs(sm.states_[0][:, 1] - truth.q[:, 1]).max() < 0.02
    # held-out crank torque at the held-out log's exact states: near the floor of the true parameters
    layout, theta = sm.layout_, sm.result_.theta
    p = layout.nominal_physical()
    p[layout.s_friction] = held_truth.friction.ravel()
    p[layout.s_armature] = np.maximum(held_truth.armature, 1e-9)
    meas = held.tau[:, 0]
    hq, hv, ha = held_truth.q, held_truth.v, held_truth.a
    e_fit = np.sqrt(np.mean((loop_terms.predict_torque(robot, layout, theta, hq, hv, ha)[:, 0] - meas) ** 2))
    e_true = np.sqrt(np.mean((loop_terms.predict_torque(robot, layout, layout.to_theta(p), hq, hv, ha)[:, 0]
                              - meas) ** 2))
    assert e_fit <= 1.25 * e_true, (e_fit, e_true)
    # the reduced (serial) model: coupler and rocker locked, the crank identified alone
    red = dataclasses.replace(robot.lock(["coupler_joint", "rocker_joint"]), loops=(), actuation=None)
    lg = Log(t=log.t, q=log.q[:, [0]], v=None, tau=log.tau[:, [0]], joint_names=("crank_joint",), source="x")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        smr = JointSmoother(red, reweight_rounds=0).fit(lg)
    pr = InverseDynamicsResidual(smr.layout_).predict(hq[:, [0]], hv[:, [0]], ha[:, [0]], smr.result_.theta)
    e_red = np.sqrt(np.mean((pr[:, 0] - meas) ** 2))
    assert e_red > 3 * e_fit, (e_red, e_fit)
    # crank friction, and the armature in its identifiable combination with the crank's inertia about
    # the axis (A + I_yy: a joint on the fixed base cannot tell them apart)
    tab = sm.result_.parameters_table().set_index("name")["estimate"]
    fc, fv = truth.friction[0, :2]
    assert abs(tab["crank_joint.fc"] - fc) <= 0.15 * fc
    assert abs(tab["crank_joint.fv"] - fv) <= 0.15 * fv
    iyy = robot.nominal_inertial_parameters()[0, 6]
    combo = tab["crank_joint.armature"] + tab["crank.iyy"]
    assert abs(combo - (truth.armature[0] + iyy)) <= 0.1 * (truth.armature[0] + iyy)
    motor = loop_terms.motor_parameters(robot, layout.to_physical(theta), layout)
    assert list(motor.joint) == ["crank_joint"]
    assert motor.armature_motor[0] == pytest.approx(tab["crank_joint.armature"] / 100)


def test_cli_identify_looped_robot_end_to_end(tmp_path):
    spec = write_fourbar_spec(tmp_path)
    robot = load_robot(spec)
    log, _ = simulate_looped(robot, duration=1.2, rate=200, seed=3)
    frame = log_frame(log, robot)
    assert "q.coupler_joint" not in frame and "tau.rocker_joint" not in frame
    frame.to_csv(tmp_path / "log.csv", index=False)
    # the unencoded joint is not locked by the "absent joints are locked" rule
    r2, lg = load_log_for_robot(tmp_path / "log.csv", robot)
    assert r2.joint_names == robot.joint_names and np.isnan(lg.q[:, 1]).all()
    out = tmp_path / "fit"
    res = CliRunner().invoke(main, ["identify", str(tmp_path / "log.csv"), "--robot", str(spec), "--out",
                                    str(out), "--max-iterations", "15"])
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "summary.json").read_text())
    loops = summary["loops"]
    assert loops["satisfied"] and loops["constraint_residual_max"]["loop_position"] <= 1e-8
    assert loops["motor_parameters"][0]["gear_ratio"] == 10.0
    traj = pd.read_parquet(out / "trajectory.parquet")
    assert np.isfinite(traj.filter(like="coupler_joint").to_numpy()).all()
    assert (out / "parameters.csv").is_file()
    # held-out prediction of a looped model: actuated efforts with the closure forces, passive NaN
    res = CliRunner().invoke(main, ["predict", str(out), str(tmp_path / "log.csv"), "--out",
                                    str(tmp_path / "pred.csv"), "--sg-window", "0.15"])
    assert res.exit_code == 0, res.output
    pred = pd.read_csv(tmp_path / "pred.csv")
    assert pred["tau.coupler_joint"].isna().all()
    err = pred["tau.crank_joint"] - frame["tau.crank_joint"]
    assert np.sqrt(np.mean(err ** 2)) < 0.15 * np.sqrt(np.mean(frame["tau.crank_joint"] ** 2))


def test_spec_keys_errors_name_the_culprit(tmp_path):
    import yaml

    spec = write_fourbar_spec(tmp_path)
    base = yaml.safe_load(spec.read_text())

    def write(**changes):
        d = dict(base, **changes)
        p = tmp_path / "bad.yaml"
        p.write_text(yaml.safe_dump(d))
        return p

    with pytest.raises(RobotError, match=r"frame 'nope' is not in the model"):
        load_robot(write(loops=[{"name": "x", "frames": ["coupler_tip", "nope"], "type": "point3d"}]))
    with pytest.raises(RobotError, match=r"loops\[0\].*unknown type 'hinge'"):
        load_robot(write(loops=[{"frames": ["coupler_tip", "rocker_tip"], "type": "hinge"}]))
    with pytest.raises(RobotError, match=r"actuation.passive: joint 'elbow'"):
        load_robot(write(actuation={"passive": ["elbow"]}))
    with pytest.raises(RobotError, match=r"gear_ratios.crank_joint': expected a number > 0"):
        load_robot(write(actuation={"gear_ratios": {"crank_joint": -2}}))
    with pytest.raises(RobotError, match=r"both passive and given a gear ratio"):
        load_robot(write(actuation={"gear_ratios": {"crank_joint": 2}, "passive": ["crank_joint"]}))
    with pytest.raises(RobotError, match=r"unknown key\(s\) \['motors'\]"):
        load_robot(write(actuation={"motors": 1}))
    # CLI: one error line, exit 2
    res = CliRunner().invoke(main, ["identify", str(spec), "--robot",
                                    str(write(loops=[{"frames": ["coupler_tip"]}])), "--out",
                                    str(tmp_path / "o")])
    assert res.exit_code == 2 and "loops[0].frames" in res.output
    assert not (tmp_path / "o").exists()


def test_floating_base_loops_are_a_clear_error(tmp_path):
    """A floating looped robot without feet is a clear EstimationError (floating bases with loops are fitted:
    tests/test_floating_loops.py); GTSAM with loops is refused."""
    from fg_sysid.estimation.floating_smoother import FloatingBaseSmoother
    from fg_sysid.estimation.solver import EstimationError
    from fg_sysid.robots.loop_examples import fourbar_actuation, fourbar_loop, write_fourbar_urdf
    from fg_sysid.robots.model import RobotModel

    robot = RobotModel.from_urdf(write_fourbar_urdf(tmp_path / "fb.urdf"), floating_base=True).with_metadata(
        loops=(fourbar_loop(),), actuation=fourbar_actuation())
    n = 50
    log = Log(t=np.arange(n) * 0.01, q=np.zeros((n, 3)), v=None, tau=np.zeros((n, 3)),
              joint_names=robot.joint_names, source="x")
    with pytest.raises(EstimationError, match="no contact frames"):
        FloatingBaseSmoother(robot).fit(log)
    fixed = planar_fourbar(tmp_path)
    with pytest.raises(EstimationError, match="structured solver"):
        JointSmoother(fixed, solver="gtsam").fit(dataclasses.replace(log, joint_names=fixed.joint_names))
