"""Floating B1 with four-bar knees: the knee-motor friction reports (issue 11, floating knee).

`floating_knee.width_profile` (the friction-law width check) against synthetic friction torques with a
known law — a soft dry friction (linear up to a width w, then saturated, as MuJoCo's ``frictionloss``
constraint) and the estimator's own tanh law —; `floating_loop_checks.stick_row_factor` (arm_stick's
stick-phase rule mapped through the closure) against the closed form at rest and the transmission ratio
of `floating_loops.transmission_ratios`; `floating_knee.posterior_check` verdicts and the report.md
section (`loop_identifiability.posterior_report_lines`)."""

import numpy as np
import pinocchio as pin
import pytest

from fg_sysid.estimation import floating_knee, floating_loops, loop_terms
from fg_sysid.estimation.arm_stick import stick_delta, stick_sigma
from fg_sysid.estimation.floating_loop_checks import stick_row_factor
from fg_sysid.estimation.loop_baseline import parameter_names
from fg_sysid.estimation.loop_identifiability import report_lines
from fg_sysid.robots import load_robot
from fg_sysid.robots.loop_kinematics import ClosureKinematics
from fg_sysid.robots.looped import loop_robot_path
from fg_sysid.robots.loops import actuation_of


@pytest.fixture(scope="module")
def robot():
    return load_robot(str(loop_robot_path("b1_fourbar")))


@pytest.fixture(scope="module")
def layout(robot):
    from fg_sysid.estimation.floating_smoother import FloatingBaseSmoother

    return FloatingBaseSmoother(robot).setup().layout_


def _velocities(rng, n=3000):
    """Knee-motor-like speeds: RMS ≈ 0.8 rad/s with long slow phases (stance)."""
    return rng.normal(scale=0.8, size=n) * rng.choice([0.05, 1.0], size=n, p=[0.4, 0.6])


def test_width_profile_finds_a_soft_dry_friction_width():
    """fc·clip(v/w, ±1) + fv·v with w = 0.6 rad/s (MuJoCo's soft frictionloss): the tanh law at
    v_s = 0.05 trades Coulomb for viscous friction (fc far below, fv far above the truth), the profile's
    best width is ≥ 3 v_s and lowers the RMS by ≥ 5 % → mismatch; its fc is within 25 % of the truth."""
    rng = np.random.default_rng(0)
    v = _velocities(rng)
    fc, fv, w = 0.8, 0.1, 0.6
    y = fc * np.clip(v / w, -1, 1) + fv * v + rng.normal(scale=0.02, size=v.size)
    p = floating_knee.width_profile(v, y, 0.05)
    assert p["fc_law"] < 0.6 * fc and p["fv_law"] > 1.5 * fv
    assert p["width"] >= floating_knee.WIDTH_RATIO * 0.05 and p["rms_gain"] >= floating_knee.MIN_RMS_GAIN
    assert abs(p["fc"] / fc - 1) < 0.25
    assert p["rms"] <= min(r for _, r in p["profile"]) + 1e-12


def test_width_profile_keeps_the_estimators_own_law():
    """In class (fc·tanh(v/0.05) + fv·v): the best width is the law's within a grid step, fc and fv are
    recovered to 3 %, the RMS gain is below the threshold → no mismatch."""
    rng = np.random.default_rng(1)
    v = _velocities(rng)
    y = 0.7 * np.tanh(v / 0.05) + 0.15 * v + rng.normal(scale=0.02, size=v.size)
    p = floating_knee.width_profile(v, y, 0.05)
    assert 0.03 <= p["width"] <= 0.08
    assert abs(p["fc_law"] / 0.7 - 1) < 0.03 and abs(p["fv_law"] / 0.15 - 1) < 0.03
    assert p["rms_gain"] < floating_knee.MIN_RMS_GAIN
    with pytest.raises(ValueError, match="at least 3 samples"):
        floating_knee.width_profile([0.1, 0.2], [0.0, 0.0], 0.05)


def test_stick_delta_is_arm_sticks_rule(robot, layout):
    """The array form used by the floating looped rows gives `arm_stick.stick_sigma`'s δ."""
    rng = np.random.default_rng(2)
    p = layout.nominal_physical()
    _, pf, _ = layout.split(p)
    sfx = list(layout.friction.suffixes)
    p = p.copy()
    idx = np.arange(layout.s_friction.start, layout.s_friction.stop).reshape(layout.nj, -1)
    idx = idx[:, sfx.index("fc")]
    p[idx] = rng.uniform(0.1, 1.0, idx.size)
    v = rng.normal(scale=0.1, size=(50, layout.nj))
    assert np.allclose(stick_delta(p[idx], v, 0.05), stick_sigma(layout, p, v, 0.05), rtol=1e-12, atol=0)


def _closed_configuration(robot):
    ck = ClosureKinematics(robot.model, robot.loops)
    names, iv = list(robot.joint_names), np.asarray(robot.joint_index_v(), int)
    passive = [int(iv[names.index(j)]) for j in actuation_of(robot).passive]
    q = pin.neutral(robot.model)
    q[2] = 0.5
    for leg in ("FL", "FR", "RL", "RR"):  # a bent knee: the linkage away from its toggle range
        for j, val in ((f"{leg}_thigh_joint", 0.8), (f"{leg}_knee_motor", -1.4), (f"{leg}_calf_joint", -1.5)):
            q[robot.joint_index_q()[names.index(j)]] = val
    return ck.solve_passive(q, passive), passive


def test_stick_row_factor_maps_the_stick_rule_through_the_closure(robot):
    """At rest, with fc on the FL knee motor only, its row's factor is σ/√(σ² + fc²) and every other row
    (base, hips, thighs, other knees) is 1; with fc on the FL calf pin only, the motor row sees the calf's
    δ reflected by J = dq_calf/dq_motor (`floating_loops.transmission_ratios`); far from rest (|v| ≫ v_s)
    every factor is 1."""
    q, _ = _closed_configuration(robot)
    names = parameter_names(robot)
    jn = list(robot.joint_names)
    act = [j for j in jn if j not in actuation_of(robot).passive]
    iv = np.asarray(robot.joint_index_v(), int)
    sigma, fc = 0.3, 0.9
    p = np.zeros(len(names))
    p[names.index("FL_knee_motor.fc")] = fc
    v = np.zeros((1, robot.nv))
    f = stick_row_factor(robot, q[None], v, p, sigma)
    assert f.shape == (6 + len(act),)
    k = 6 + act.index("FL_knee_motor")
    assert f[k] == pytest.approx(sigma / np.hypot(sigma, fc), rel=1e-12)
    assert np.allclose(np.delete(f, k), 1.0)
    p[:] = 0.0
    p[names.index("FL_calf_joint.fc")] = fc
    R = floating_loops.transmission_ratios(loop_terms.closures(robot), robot, q[None])[0]
    pas = [j for j in jn if j in actuation_of(robot).passive]
    J = R[pas.index("FL_calf_joint"), act.index("FL_knee_motor")]
    f = stick_row_factor(robot, q[None], v, p, sigma)
    assert abs(J) > 0.1
    assert f[k] == pytest.approx(sigma / np.hypot(sigma, J * fc), rel=1e-9)
    p[names.index("FL_knee_motor.fc")] = fc
    v[0, iv] = 5.0  # |v| = 50 v_s: δ = fc (1 − tanh²(25)) ≈ 1e-21
    assert np.allclose(stick_row_factor(robot, q[None], v, p, sigma), 1.0, atol=1e-12)


def test_posterior_check_flags_floor_and_law_mismatch(robot, layout):
    """A knee motor's fc at the parameterization's floor is weakly determined whatever its (prior-equal)
    posterior std says; a joint whose law check found a width mismatch has fc and fv weakly determined
    with that reason; a well-determined armature stays determined; report.md lists them."""
    from types import SimpleNamespace

    p = layout.nominal_physical().copy()
    pn = list(layout.names)
    p[pn.index("FL_knee_motor.fc")] = layout.friction.FC_FLOOR
    for j in ("FR_knee_motor", "RL_knee_motor", "RR_knee_motor", "FL_hip_joint"):
        p[pn.index(f"{j}.fc")], p[pn.index(f"{j}.fv")] = 0.7, 0.1
    p[pn.index("FR_knee_motor.armature")] = 1e-3
    theta = layout.to_theta(p)
    cov = np.diag(np.full(theta.size, 1e-4 ** 2))  # every θ determined to 0.01 % (log scale)
    sm = SimpleNamespace(layout_=layout, robot=robot)
    law = [{"joint": "RL_knee_motor", "mismatch": True, "reason": "law mismatch: w = 0.5 rad/s"},
           {"joint": "RR_knee_motor", "mismatch": False, "reason": "the law's width fits"}]
    out = floating_knee.posterior_check(sm, theta, cov, law)
    by = {r["name"]: r for r in out["posterior_determination"]}
    assert set(by) >= {f"{leg}_knee_motor.{s}" for leg in ("FL", "RR") for s in ("fc", "fv", "armature")}
    assert not any(n.startswith(("FL_calf", "FL_rod")) for n in by)  # passive joints are not reported
    assert by["FL_knee_motor.fc"]["at_floor"] and "floor" in by["FL_knee_motor.fc"]["verdict"]
    assert by["RL_knee_motor.fc"]["weak"] and "law mismatch" in by["RL_knee_motor.fv"]["verdict"]
    assert not by["RR_knee_motor.fc"]["weak"] and not by["FR_knee_motor.armature"]["weak"]
    assert set(out["weakly_determined"]) == {n for n, r in by.items() if r["weak"]}
    lines = "\n".join(report_lines(None, None, out["posterior_determination"]))
    assert "posterior check" in lines and "FL_knee_motor.fc" in lines and "law mismatch" in lines
    assert report_lines(None, None, None) == []
