"""Closed loops on the floating base (issue 11, `fg_sysid.estimation.floating_loops`): the floating inverse
dynamics with contact and closure forces and the closure constraints, Jacobians against central
differences on random floating states of ``b1_fourbar``; a short MuJoCo step-in-place log (out of class:
soft contacts and loop constraints, dry friction, PD feedback) identified through `fg-sysid identify`:
closures at the solution, and the knee-motor torque of the looped model against the serial B1's."""

import json
import warnings

import numpy as np
import pinocchio as pin
import pytest
from click.testing import CliRunner
from jacobian_check import central_diff

from fg_sysid.cli import main
from fg_sysid.estimation import floating_loops, loop_terms
from fg_sysid.estimation.floating_smoother import FloatingBaseSmoother
from fg_sysid.estimation.problem import Evaluation, Problem
from fg_sysid.robots import load_robot
from fg_sysid.robots.looped import loop_robot_path


@pytest.fixture(scope="module")
def robot():
    return load_robot(str(loop_robot_path("b1_fourbar")))


def _terms_setup(robot, n=2, seed=0):
    """A set-up smoother (no fit) with the loop terms of `floating_loops` on random floating states."""
    rng = np.random.default_rng(seed)
    sm = FloatingBaseSmoother(robot, inertia="log-cholesky").setup()
    sm._loops = loop_terms.closures(robot)
    nv, nf = robot.nv, sm.nf
    iv = robot.joint_index_v()
    sm._taum = np.zeros((n, nv))
    sm._taum[:, iv] = rng.normal(scale=10.0, size=(n, robot.n_joints))
    sm._tau_mask = np.ones((n, nv), bool)
    blocks = (("q", nv), ("v", nv), ("a", nv), ("lam", 3 * nf)) + floating_loops.extra_blocks(robot)
    problem = Problem(sm._space, blocks, sm.layout_.n)
    w_joint = np.ones((n, robot.n_joints)) / 0.5
    for t in floating_loops.loop_dynamics(sm, problem, sm._taum, w_joint, 0.05):
        problem.add(t)
    for t in loop_terms.loop_kinematics(problem, sm._loops):
        problem.add(floating_loops._weighted(t, floating_loops.POSITION_WEIGHT)
                    if t.name == "loop_position" else t)
    q = np.array([pin.randomConfiguration(robot.model, -np.ones(robot.nq), np.ones(robot.nq))
                  for _ in range(n)])
    q[:, :3] = rng.normal(size=(n, 3))
    for k in range(n):
        q[k, 3:7] = pin.Quaternion(pin.SE3.Random().rotation).coeffs()
    x = (q, rng.normal(size=(n, nv)), rng.normal(size=(n, nv)), rng.normal(scale=50.0, size=(n, 3 * nf)),
         rng.normal(scale=50.0, size=(n, floating_loops.n_rows(robot))))
    theta = sm.layout_.to_theta(sm.layout_.nominal_physical())
    theta = theta + 0.05 * rng.normal(size=theta.size)
    return sm, problem, x, theta


def test_floating_loop_terms_jacobians_match_central_differences(robot):
    sm, problem, x, theta = _terms_setup(robot)
    names = {t.name for t in problem.terms}
    assert {"inverse_dynamics", "base_wrench", "passive_dynamics", "loop_position", "loop_velocity",
            "loop_acceleration"} <= names
    for term in problem.terms:
        res = term.evaluate(Evaluation(problem, x, theta, True), True)
        for k in range(x[0].shape[0]):
            def r_of_dx(d, term=term, k=k):
                xk = tuple(b[k:k + 1] for b in x)
                xd = problem.retract(xk, d[None])
                return term.evaluate(Evaluation(problem, xd, theta, False, idx=[k]), False).r[0]

            num = central_diff(r_of_dx, np.zeros(problem.nx))
            scale = max(1.0, float(np.abs(num).max()))
            assert np.allclose(res.J[k], num, atol=2e-6 * scale, rtol=1e-5), term.name
            if res.Jt is not None:
                def r_of_theta(th, term=term, k=k):
                    xk = tuple(b[k:k + 1] for b in x)
                    return term.evaluate(Evaluation(problem, xk, th, False, idx=[k]), False).r[0]

                numt = central_diff(r_of_theta, theta)
                assert np.allclose(res.Jt[k], numt, atol=2e-6 * max(1.0, float(np.abs(numt).max()))), \
                    term.name


def test_closure_forces_are_internal_to_the_base_rows(robot):
    """Closures between two bodies of the robot, closed: Gᵀλ has zero base rows (Newton–Euler of the robot
    does not see internal forces) and the virtual power identity (Gᵀλ)·v = λ·(G v) holds."""
    sm, problem, x, theta = _terms_setup(robot, seed=3)
    from fg_sysid.datasets.mujoco_loops import reference_configuration
    from fg_sysid.robots.looped import load_loop_robot

    q = np.tile(reference_configuration(load_loop_robot("b1_fourbar")), (x[0].shape[0], 1))
    q[:, :7] = x[0][:, :7]  # random base pose
    q[:, 7:] += 0.05 * np.random.default_rng(4).normal(size=q[:, 7:].shape)
    x = floating_loops.project_states(sm, (q,) + x[1:])  # on the closures: the two points coincide
    assert np.abs(sm._loops.position(x[0], False)[0]).max() < 1e-10
    tc = sm._loops.generalized_force(x[0], x[4], False)[0]
    assert np.abs(tc[:, :6]).max() < 1e-9 * max(1.0, np.abs(tc).max())
    assert np.abs(tc[:, 6:]).max() > 1.0  # not trivially zero
    cv = sm._loops.motion(x[0], x[1], x[2], False).cv
    assert np.allclose(np.sum(tc * x[1], axis=1), np.sum(x[4] * cv, axis=1), rtol=1e-9, atol=1e-9)


# ------------------------------------------------------------------------------------- identification
@pytest.fixture(scope="module")
def stepping_log(tmp_path_factory):
    """1.2 s MuJoCo step in place of the floating B1 with four-bar knees at 500 Hz, σ = 0.01, written
    like a user's log (encoded joints; efforts of the actuated joints). The step period (2.0 s: the first
    foot lifts) keeps every effort below its limit: a faster step (0.2 s) drives the thighs and knee motors
    to their limits in most samples, and the effort-saturation windows would then leave no effort rows."""
    from fg_sysid.datasets.io import write_log
    from fg_sysid.datasets.mujoco_loops import simulate_loop_stance
    from fg_sysid.robots.looped import load_loop_robot

    r = load_loop_robot("b1_fourbar")
    res, log, viol = simulate_loop_stance(r, 1.2, 500.0, 0.01, 0, step_period=2.0,
                                          friction_scale=0.25)
    assert viol < 1e-5
    path = tmp_path_factory.mktemp("floop") / "log.parquet"
    write_log(log, path)
    return path, log


@pytest.fixture(scope="module")
def loop_fit(stepping_log, tmp_path_factory):
    path, _ = stepping_log
    out = tmp_path_factory.mktemp("floopfit") / "fit"
    res = CliRunner().invoke(main, ["identify", str(path), "--robot", str(loop_robot_path("b1_fourbar")),
                                    "--out", str(out), "--knot-stride", "10", "--quiet"])
    assert res.exit_code == 0, res.output
    return out, json.loads((out / "summary.json").read_text())


def test_floating_loop_identify_closures_at_the_solution(loop_fit):
    out, summary = loop_fit
    loops = summary["loops"]
    c = loops["constraint_residual_max"]
    assert c["loop_position"] <= 1e-8  # m (issue 11: position level ≤ 1e-8)
    assert c["loop_velocity"] <= 1e-6 and c["loop_acceleration"] <= 1e-6
    # passive rows [N·m]: as far as the floating augmented Lagrangian gets together with the base wrench
    # (it stalls near 1e-3 on MuJoCo logs): far below the knee torques (tens of N·m)
    assert c["passive_dynamics"] <= 1e-2  # N·m
    assert {m["joint"] for m in loops["motor_parameters"]} >= {"FL_knee_motor", "RR_knee_motor"}
    assert (out / "parameters.csv").exists() and (out / "trajectory.parquet").exists()


def test_floating_loop_summary_reports_the_knee_friction_collinearity(loop_fit):
    """``summary.json`` → ``loops.friction_collinearity``: one row per knee motor (hips and thighs drive no
    passive joint), its calf with the transmission ratio, and regressor cosines near 1 (the motor's and the
    calf's friction are nearly collinear through the linkage: only the reflected sum is determined)."""
    _, summary = loop_fit
    rows = summary["loops"]["friction_collinearity"]
    assert {r["motor"] for r in rows} == {f"{leg}_knee_motor" for leg in ("FL", "FR", "RL", "RR")}
    for r in rows:
        assert r["passive"] == r["motor"].replace("knee_motor", "calf_joint")
        assert 0.2 < r["ratio"] < 1.5 and set(r["coupled"]) >= {r["passive"]}
        assert r["regressor_cosine"]["fc"] > 0.9 and r["regressor_cosine"]["fv"] > 0.5
        assert all(-1.0 - 1e-9 <= r["correlation"][k] <= 1.0 + 1e-9 for k in ("fc", "fv"))
        assert r["std"]["fc_sum"] >= 0 and np.isfinite(r["estimate"]["fv_sum"])


def test_floating_loop_knee_motor_torque_beats_the_serial_model(stepping_log, loop_fit):
    """On the same log, the knee-motor effort residual of the looped fit (model − measured, at the
    smoothed states) is well below that of the serial B1 (the calf joint driven directly by the knee
    motor's torque) fitted by the same smoother: the transmission through the four-bar matters."""
    from fg_sysid.estimation.loop_baseline import serial_log

    _, summary = loop_fit
    _, log = stepping_log
    names = list(load_robot(str(loop_robot_path("b1_fourbar"))).joint_names)
    rms_loop = dict(zip(names, summary["floating_base"]["joint_effort_residual_rms"], strict=True))
    serial = load_robot("b1")
    emap = {f"{leg}_calf_joint": f"{leg}_knee_motor" for leg in ("FL", "FR", "RL", "RR")}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fs = FloatingBaseSmoother(serial, knot_stride=10).fit(serial_log(log, serial, emap))
    rms_serial = dict(zip(serial.joint_names, fs.result_.extras["floating_base"]["joint_effort_residual_rms"],
                          strict=True))
    knee_loop = np.mean([rms_loop[f"{leg}_knee_motor"] for leg in ("FL", "FR", "RL", "RR")])
    knee_serial = np.mean([rms_serial[f"{leg}_calf_joint"] for leg in ("FL", "FR", "RL", "RR")])
    # the looped fit has effort rows (no saturation windows on this log): its residual is not a zero
    assert all(rms_loop[f"{leg}_knee_motor"] > 0.05 for leg in ("FL", "FR", "RL", "RR")), rms_loop
    print(f"knee-motor effort residual RMS: loop {knee_loop:.2f} N·m, serial {knee_serial:.2f} N·m")
    assert knee_loop < 0.7 * knee_serial, (knee_loop, knee_serial)


def test_floating_loop_options_refused(robot, stepping_log):
    from fg_sysid.datasets.io import load_log_for_robot
    from fg_sysid.estimation.smoother import EstimationError

    path, _ = stepping_log
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r, log = load_log_for_robot(path, robot)
    with pytest.raises(EstimationError, match="impacts"):
        FloatingBaseSmoother(r, impacts=True).fit(log)


def test_summary_units_cover_loop_terms():
    from fg_sysid.estimation.floating_smoother import CONSTRAINT_UNITS

    assert set(floating_loops.CONSTRAINT_UNITS) <= set(CONSTRAINT_UNITS)


def test_floating_loop_summary_reports_the_motor_posterior_and_the_friction_law(stepping_log, loop_fit):
    """``summary.json`` → ``loops.posterior_determination`` (every actuated joint's fc, fv, armature, the
    posterior check of the fixed-base loops on the floating fit, `floating_knee.posterior_check`),
    ``loops.weakly_determined`` consistent with it, ``loops.friction_law_check`` (one record per actuated
    joint with effort rows) and report.md's "posterior check" section (issue 11, floating knee). A knot in
    an effort-saturation window has no effort row: where a joint has none, nothing may be "determined"."""
    from fg_sysid.estimation.floating_loops import saturation_window

    out, summary = loop_fit
    _, log = stepping_log
    loops = summary["loops"]
    act = [m["joint"] for m in loops["motor_parameters"]]
    recs = {r["name"]: r for r in loops["posterior_determination"]}
    assert set(recs) == {f"{j}.{s}" for j in act for s in ("fc", "fv", "armature")}
    assert all(np.isfinite(r["std"]) and r["std"] >= 0 and r["verdict"] for r in recs.values())
    assert set(loops["weakly_determined"]) == {n for n, r in recs.items() if r["weak"]}
    assert all(r["weak"] for r in recs.values() if r["at_floor"])
    robot = load_robot(str(loop_robot_path("b1_fourbar")))
    tau = np.full((log.n_samples, robot.n_joints), np.nan)
    col = {j: i for i, j in enumerate(log.joint_names)}
    for i, j in enumerate(robot.joint_names):
        if j in col:
            tau[:, i] = np.asarray(log.tau, float)[:, col[j]]
    sat = saturation_window(log.t, tau, robot.effort_limits())
    law = {r["joint"]: r for r in loops["friction_law_check"]}
    if sat.all():  # this short log's efforts sit at their limits throughout: no effort row at all
        assert law == {} and all(r["weak"] for r in recs.values())
    else:
        assert set(law) == set(act)
    for r in law.values():
        assert r["width"] > 0 and np.isfinite(r["rms"]) and r["rms"] <= r["rms_law"] + 1e-12
        if r["mismatch"]:
            assert {f"{r['joint']}.fc", f"{r['joint']}.fv"} <= set(loops["weakly_determined"])
    assert "posterior check" in (out / "report.md").read_text()


def test_floating_loop_refuses_a_log_saturated_everywhere(tmp_path):
    """A 0.8 s step in place at a 0.2 s step period drives thighs and knee motors to their effort limits in
    most samples: every knot falls in a saturation window, so the fit stops with a message naming the
    joints instead of fitting without effort rows."""
    from fg_sysid.datasets.mujoco_loops import simulate_loop_stance
    from fg_sysid.estimation.smoother import EstimationError
    from fg_sysid.robots.looped import load_loop_robot

    r = load_loop_robot("b1_fourbar")
    _, log, _ = simulate_loop_stance(r, 0.8, 500.0, 0.01, 0, step_period=0.2, friction_scale=0.25)
    from fg_sysid.datasets.io import load_log_for_robot, write_log

    write_log(log, tmp_path / "log.parquet")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r, full = load_log_for_robot(tmp_path / "log.parquet", r)
        with pytest.raises(EstimationError, match=r"no effort rows are left") as err:
            FloatingBaseSmoother(r, knot_stride=10).fit(full)
    assert "RR_thigh_joint" in str(err.value), str(err.value)
