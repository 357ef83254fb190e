"""``acceleration_process="auto"`` (issue 9, session 9, `fg_sysid.estimation.jerk_auto`): the white-jerk rows
only where the default fit's accelerations absorbed the effort noise (Nyquist-band RMS of the fitted
knot accelerations above the motion's RMS acceleration)."""

from __future__ import annotations

import dataclasses
import json
import warnings

import numpy as np
import pytest

from fg_sysid.datasets.simulate import simulate
from fg_sysid.estimation.jerk_auto import THRESHOLD, absorption_diagnostic, nyquist_ratio
from fg_sysid.estimation.smoother import JointSmoother
from fg_sysid.robots import load_robot
from fg_sysid.study.runner import evaluate


def test_nyquist_ratio_oracles():
    """The second difference / 4 returns the alternating mode with gain 1 and a well-sampled sine with
    gain (1 − cos ωh)/2 ≈ (ωh)²/4."""
    h, n = 0.002, 2000
    k = np.arange(n)
    c, s_a = 3.0, np.array([0.5, 2.0])
    alt = c * (-1.0) ** k
    np.testing.assert_allclose(nyquist_ratio(np.column_stack([alt, alt]), s_a), c / s_a, rtol=1e-12)
    w = 2 * np.pi * 1.5
    a = np.sin(w * h * k)[:, None]
    gain = (1 - np.cos(w * h)) / 2
    assert nyquist_ratio(a, [np.sqrt(0.5)])[0] == pytest.approx(gain, rel=1e-2)
    assert gain < 1e-3 * THRESHOLD


def _log(sigma):
    robot = load_robot("double_pendulum")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sim = simulate(robot, 2.0, 200.0, sigma, 3, friction_velocity_scale=0.02)
    return robot, sim


def _fit(robot, log, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return JointSmoother(robot, **kw).fit(log)


def test_auto_turns_the_rows_on_for_a_noisy_log_and_it_pays():
    """σ = 0.1: the default fit's accelerations carry alternating content ≫ the motion's (R > 5), auto
    refits with the rows (σ_a recorded); the first fit's effort residuals sit below the true effort noise
    (absorbed by the accelerations), the refit's at it, and the refit predicts better."""
    robot, sim = _log(0.1)
    sm = _fit(robot, sim.log, acceleration_process="auto")
    rec = sm.result_.noise["acceleration_process_auto"]
    assert rec["chosen"] == "on" and rec["fires"], rec
    assert rec["value"] > 5 * THRESHOLD, rec["value"]
    assert sm.result_.noise["process_a"] is not None and len(sm.result_.noise["process_a"]) == 2
    assert sm.acceleration_process == "auto"  # the option is restored after the fit
    held = simulate(robot, 2.0, 200.0, 0.0, 1003, truth=sim.truth)

    def err(res):
        order = {n: i for i, n in enumerate(res.names)}
        p = np.array([res.estimate[order[n]] for n in robot.parameter_names(("fc", "fv"))], float)
        return evaluate(robot, p, sim.truth, held, 0.05)

    # the first fit stops where R crosses the threshold (session 10); the default fit run to its end
    # crosses it too — the early decision is the end-of-fit decision — and absorbed the effort noise
    assert rec["first_fit"]["stopped_at_threshold"] and rec["first_fit"]["iterations"] < 5, rec["first_fit"]
    plain = _fit(robot, sim.log)
    assert absorption_diagnostic(plain, balance=False)["value"] > THRESHOLD
    true_tau = np.std(sim.log.tau - sim.truth_log.tau, axis=0)
    r_plain = plain.result_.id_residual_rms / true_tau
    r_final = sm.result_.id_residual_rms / true_tau
    assert np.all(r_plain < 0.85) and np.all(r_final > 0.9), (r_plain, r_final)
    assert err(sm.result_)["heldout_rmse"] < err(plain.result_)["heldout_rmse"]


def test_auto_lead_law_is_dropped_where_the_rows_fire():
    """friction="auto" fits the lead law (friction of v + T·a); where the accelerations absorbed the noise
    the refit with the rows has no lead and fits stribeck6 (warm-started: the first fit's inertias and
    armature, the selection regression's Stribeck friction) and summary.json says so; on a precise log
    the lead law stays."""
    from fg_sysid.estimation.friction_select import LEAD_LAW, stribeck_physical
    from fg_sysid.estimation.jerk_auto import noisy_refit_law

    robot, sim = _log(0.1)
    # velocities logged ten times more precisely than q and τ: the selection's regression sees them sharp
    # (noise std after its filter < BLIND_VELOCITY), so it keeps the Coulomb family and the lead law
    rng = np.random.default_rng(5)
    log = dataclasses.replace(sim.log, v=sim.truth_log.v + rng.normal(0.0, 0.01, sim.log.v.shape))
    sm = _fit(robot, log, acceleration_process="auto", friction="auto")
    assert not sm.friction_selection_.blurred, sm.friction_selection_.velocity_noise
    assert sm.acceleration_auto_first_.layout.friction.name == LEAD_LAW
    assert sm.result_.layout.friction.name == "stribeck6" and sm.friction == "auto"
    sel = sm.result_.summary()["friction_selection"]
    assert sel["chosen"] == "stribeck6" and "absorbed" in sel["reason"], sel
    assert sel["regression_choice"] == "coulomb-viscous-scale", sel
    first = sm.acceleration_auto_first_
    law, theta = noisy_refit_law(sm, first.layout, first.theta)
    new = sm.result_.layout
    p0, p1 = first.layout.to_physical(first.theta), new.to_physical(theta)
    lay = first.layout
    assert law == "stribeck6" and theta.size == first.theta.size + 2 * robot.n_joints
    np.testing.assert_allclose(p1[new.s_inertial], p0[lay.s_inertial], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(p1[new.s_armature], p0[lay.s_armature], rtol=1e-9)
    np.testing.assert_allclose(p1[new.s_friction],
                               stribeck_physical(sm.friction_selection_, robot, new)[new.s_friction],
                               rtol=1e-9)
    robot, sim = _log(0.001)
    precise = _fit(robot, sim.log, acceleration_process="auto", friction="auto")
    assert precise.result_.layout.friction.name == LEAD_LAW


def test_blurred_velocities_fit_stribeck6_from_the_start():
    """σ = 0.1 on every channel: the regression's velocities are blurred (session 14), so friction="auto"
    fits stribeck6 from the start; where the rows fire, the refit keeps the law and continues from the
    first fit's θ (no lead to drop)."""
    from fg_sysid.estimation.friction_select import BLIND_VELOCITY

    robot, sim = _log(0.1)
    sm = _fit(robot, sim.log, acceleration_process="auto", friction="auto")
    sel = sm.result_.summary()["friction_selection"]
    assert sel["blurred_velocities"] and np.median(list(sel["velocity_noise"].values())) > BLIND_VELOCITY
    assert sel["regression_choice"] == sel["chosen"] == "stribeck6" and "blurred" in sel["reason"], sel
    assert "absorbed" not in sel["reason"], sel["reason"]
    assert sm.acceleration_auto_first_.layout.friction.name == sm.result_.layout.friction.name == "stribeck6"
    assert sm.result_.noise["acceleration_process_auto"]["chosen"] == "on"


def test_auto_keeps_the_default_on_a_precise_log():
    """σ = 0.001: no absorption (R < 1), the result is the default fit's, no acceleration rows."""
    robot, sim = _log(0.001)
    sm = _fit(robot, sim.log, acceleration_process="auto")
    rec = sm.result_.noise["acceleration_process_auto"]
    assert rec["chosen"] == "off" and not rec["fires"] and rec["value"] < THRESHOLD, rec
    assert "process_a" not in sm.result_.noise
    assert sm.result_ is sm.acceleration_auto_first_


def test_cli_option_values_and_errors(tmp_path):
    """`--acceleration-process auto` records the choice and the diagnostic in summary.json's noise section;
    the bare flag still means on; a bad value or a method without the rows is a clear error (exit 2, no
    output)."""
    from click.testing import CliRunner

    from fg_sysid.cli import main
    from fg_sysid.datasets.io import write_log

    robot, sim = _log(0.1)
    path = tmp_path / "log.parquet"
    write_log(sim.log, path)

    def run(*extra):
        args = ["identify", str(path), "--robot", "double_pendulum", "--quiet", "--friction",
                "coulomb-viscous-scale", *map(str, extra)]
        return CliRunner().invoke(main, args)

    r = run("--out", tmp_path / "auto", "--acceleration-process", "auto")
    assert r.exit_code == 0, r.output
    noise = json.loads((tmp_path / "auto" / "summary.json").read_text())["noise"]
    rec = noise["acceleration_process_auto"]
    assert rec["chosen"] == "on" and rec["value"] > THRESHOLD and len(rec["nyquist_ratio"]) == 2
    assert len(noise["process_a"]) == 2
    r = run("--acceleration-process", "--out", tmp_path / "on")  # bare flag before another option
    assert r.exit_code == 0, r.output
    noise = json.loads((tmp_path / "on" / "summary.json").read_text())["noise"]
    assert "process_a" in noise and "acceleration_process_auto" not in noise
    r = run("--out", tmp_path / "bad", "--acceleration-process", "sometimes")
    assert r.exit_code == 2 and "sometimes" in r.output, r.output
    r = run("--out", tmp_path / "bad", "--method", "ls-sg", "--acceleration-process", "auto")
    assert r.exit_code == 2 and "--acceleration-process auto" in r.stderr, r.output
    assert not (tmp_path / "bad").exists()
    r = CliRunner().invoke(main, ["identify", str(path), "--robot", "double_pendulum", "--quiet", "--method",
                                  "ls-sg", "--out", str(tmp_path / "ls")])  # the default: no error on ls-sg
    assert r.exit_code == 0, r.output
