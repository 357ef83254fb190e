"""Out-of-class truth in the simulators (issue 9, item 1): every effect checked against its definition."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
from click.testing import CliRunner

from fg_sysid.cli import main
from fg_sysid.datasets.simulate import (
    Effects,
    SimulationError,
    friction_torque,
    simulate,
    stribeck_friction_torque,
    truth_arrays,
    truth_model,
)
from fg_sysid.robots import load_robot


@pytest.fixture(scope="module")
def z1():
    return load_robot("z1")


def _rnea(truth, robot, q, v, a):
    """True rigid-body + armature torques (N, n) [N·m] at (q, v, a)."""
    model = truth_model(truth, robot)
    data = model.createData()
    return np.array([pin.rnea(model, data, qk, vk, ak) for qk, vk, ak in zip(q, v, a, strict=True)])


def _friction_residual(res, robot):
    tl = res.truth_log
    return tl.tau - _rnea(res.truth, robot, tl.q, tl.v, res.truth_acceleration)


# ------------------------------------------------------------------------------ friction laws
def test_stribeck_formula_limits():
    fc, fs, fv, vs, vst = 2.0, 3.0, 0.5, 1e-3, 0.1
    v = np.array([-5.0, -0.02, 0.0, 0.02, 5.0])
    tau = stribeck_friction_torque(v, fc, fs, fv, vs, vst)
    assert tau[2] == 0.0
    np.testing.assert_allclose(tau, -stribeck_friction_torque(-v, fc, fs, fv, vs, vst))  # odd
    # far above v_st: Coulomb + viscous; vs << v << v_st: near the breakaway level fs
    assert tau[4] == pytest.approx(fc + fv * 5.0, rel=1e-9)
    assert tau[3] == pytest.approx(fs * math.exp(-0.04) + fc * (1 - math.exp(-0.04)) + fv * 0.02, rel=1e-6)
    assert tau[3] > fc + fv * 0.02  # the breakaway peak exists


@pytest.mark.parametrize("vs", [0.002, 0.02])
def test_sharp_friction_torque_matches_its_formula(z1, vs):
    res = simulate(z1, 0.4, 500, 0.0, 3, friction_velocity_scale=vs)
    arr = truth_arrays(res.truth, z1)
    expected = friction_torque(res.truth_log.v, arr["fc"], arr["fv"], vs)
    np.testing.assert_allclose(_friction_residual(res, z1), expected, atol=1e-9)
    assert res.truth["friction_velocity_scale"] == vs
    assert any("friction-velocity-scale" in u for u in res.truth["out_of_class"])
    assert res.truth["in_class"] is False


def test_stribeck_truth_torque_matches_its_formula(z1):
    fx = Effects(friction="stribeck", stribeck_ratio=1.8, stribeck_velocity=0.05)
    res = simulate(z1, 0.4, 500, 0.0, 3, friction_velocity_scale=0.01, effects=fx)
    arr = truth_arrays(res.truth, z1)
    fs = np.array([res.truth["friction"]["fs"][j] for j in z1.joint_names])
    np.testing.assert_allclose(fs, 1.8 * arr["fc"])
    expected = stribeck_friction_torque(res.truth_log.v, arr["fc"], fs, arr["fv"], 0.01, 0.05)
    np.testing.assert_allclose(_friction_residual(res, z1), expected, atol=1e-9)
    coulomb = friction_torque(res.truth_log.v, arr["fc"], arr["fv"], 0.01)
    assert np.abs(expected - coulomb).max() > 0.1 * arr["fc"].max()  # Stribeck differs visibly
    assert res.truth["friction_model"] == "stribeck" and "stribeck-friction" in res.truth["out_of_class"]
    # a held-out log of the same robot keeps the Stribeck law without being told
    held = simulate(z1, 0.2, 500, 0.0, 4, truth=res.truth)
    assert held.truth["friction"]["fs"] == res.truth["friction"]["fs"]
    v = held.truth_log.v
    np.testing.assert_allclose(_friction_residual(held, z1),
                               stribeck_friction_torque(v, arr["fc"], fs, arr["fv"], 0.01, 0.05), atol=1e-9)


def test_default_is_in_class(z1):
    res = simulate(z1, 0.2, 500, 0.01, 3)
    assert res.truth["in_class"] is True and res.truth["out_of_class"] == []
    assert res.truth["controller"]["control_rate"] == 500.0
    assert set(res.truth["sensors"]["effort_gain"].values()) == {1.0}


# ------------------------------------------------------------------------------ controller ZOH
def test_controller_faster_than_the_log_is_held_zero_order(z1):
    """1 kHz log of a 4 kHz controller = every 4th sample of the same system logged at 4 kHz."""
    fast = simulate(z1, 0.3, 4000, 0.0, 5)
    slow = simulate(z1, 0.3, 1000, 0.0, 5, truth=fast.truth, trajectory=fast.trajectory,
                    effects=Effects(control_rate=4000))
    assert slow.truth["controller"]["control_rate"] == 4000.0
    # (not bit-equal: the controller's nominal friction guess comes from the planned motion sampled at
    # the log rate, which differs by ~1e-5 relative between the two runs)
    np.testing.assert_allclose(slow.truth_log.q, fast.truth_log.q[::4], atol=1e-6)
    np.testing.assert_allclose(slow.truth_log.tau, fast.truth_log.tau[::4], atol=5e-4)
    # the command changes between log samples (held over 1/4000 s, not 1/1000 s), by far more than that
    within = np.abs(fast.truth_log.tau[1::4] - fast.truth_log.tau[:-1:4]).max()
    assert within > 5e-3
    # at the sample instants the logged torque is the applied one: the identity holds exactly
    arr = truth_arrays(slow.truth, z1)
    np.testing.assert_allclose(_friction_residual(slow, z1),
                               friction_torque(slow.truth_log.v, arr["fc"], arr["fv"], 0.05), atol=1e-9)


def test_control_rate_must_be_a_multiple_of_the_log_rate(z1):
    with pytest.raises(SimulationError, match="integer multiple"):
        simulate(z1, 0.1, 1000, 0.0, 0, effects=Effects(control_rate=1500))


# ------------------------------------------------------------------------------ sensors
def test_gain_and_offset_apply_to_the_logged_efforts_only(z1):
    plain = simulate(z1, 0.3, 500, 0.0, 2)
    fx = Effects(effort_gain_error=0.1, effort_offset=0.05)
    res = simulate(z1, 0.3, 500, 0.0, 2, effects=fx)
    np.testing.assert_array_equal(res.truth_log.q, plain.truth_log.q)  # the dynamics are untouched
    np.testing.assert_array_equal(res.truth_log.tau, plain.truth_log.tau)
    s = res.truth["sensors"]
    gain = np.array([s["effort_gain"][j] for j in z1.joint_names])
    offset = np.array([s["effort_offset"][j] for j in z1.joint_names])
    assert np.all(np.abs(gain - 1) <= 0.1) and np.abs(gain - 1).max() > 0.01
    assert np.abs(offset).max() > 0
    np.testing.assert_allclose(res.log.tau, gain * plain.truth_log.tau + offset, atol=1e-12)
    np.testing.assert_array_equal(res.log.q, plain.log.q)
    # a held-out log of the same robot has the same sensors
    held = simulate(z1, 0.2, 500, 0.0, 7, truth=res.truth)
    np.testing.assert_allclose(held.log.tau, gain * held.truth_log.tau + offset, atol=1e-12)


def test_encoder_quantization_step_is_visible(z1):
    step = 2 * math.pi / 2**12
    res = simulate(z1, 0.3, 500, 0.001, 2, effects=Effects(encoder_resolution=step))
    k = res.log.q / step
    np.testing.assert_allclose(k, np.round(k), atol=1e-9)  # every reading on the encoder grid
    assert np.abs(res.log.q - res.truth_log.q).max() <= step / 2 + 5 * 0.001
    nonzero = np.abs(np.diff(res.log.q, axis=0))
    nonzero = nonzero[nonzero > 0]
    assert nonzero.min() == pytest.approx(step, rel=1e-9)  # the smallest change is one step
    assert "encoder quantization" in " ".join(res.truth["out_of_class"])


def test_bad_effects_are_rejected(z1):
    for fx, what in ((Effects(friction="lugre"), "friction model"), (Effects(effort_gain_error=1.5), "gain"),
                     (Effects(encoder_resolution=-1.0), "encoder_resolution"),
                     (Effects(stribeck_velocity=0.0), "stribeck_velocity")):
        with pytest.raises(SimulationError, match=what):
            simulate(z1, 0.1, 500, 0.0, 0, effects=fx)


# ------------------------------------------------------------------------------ MuJoCo arm
def test_mujoco_arm_efforts_are_rnea_plus_dry_friction_of_its_truth(z1):
    pytest.importorskip("mujoco")
    from fg_sysid.datasets.mujoco_sim import simulate_arm

    res = simulate_arm(z1, 0.5, 1000, 0.0, 0)
    arr = truth_arrays(res.truth, z1)
    rk4 = simulate(z1, 0.5, 1000, 0.0, 0)
    # the same true robot as the RK4 simulator of the same seed (only the friction law differs)
    assert res.truth["parameters"] == rk4.truth["parameters"]
    dry = _friction_residual(res, z1) - arr["fv"] * res.truth_log.v
    v = res.truth_log.v
    sliding = np.abs(v) > 0.02
    assert sliding.mean() > 0.5
    np.testing.assert_allclose(dry[sliding], (np.sign(v) * arr["fc"])[sliding], rtol=1e-3,
                               atol=1e-4 * arr["fc"].max())
    assert np.all(np.abs(dry) <= arr["fc"] * (1 + 1e-6) + 1e-9)  # a dry friction never exceeds fc
    assert res.truth["friction_model"] == "mujoco-frictionloss-damping" and res.truth["in_class"] is False
    assert res.truth["controller"]["control_rate"] == 4000.0
    assert np.abs(res.truth_log.q - res.desired["q"]).max() < 0.05  # the controller tracks


def test_mujoco_arm_sensors_and_heldout_reuse(z1):
    pytest.importorskip("mujoco")
    from fg_sysid.datasets.mujoco_sim import simulate_arm

    fx = Effects(effort_gain_error=0.1, encoder_resolution=1e-3)
    res = simulate_arm(z1, 0.2, 1000, 0.0, 1, effects=fx)
    s = res.truth["sensors"]
    gain = np.array([s["effort_gain"][j] for j in z1.joint_names])
    np.testing.assert_allclose(res.log.tau, gain * res.truth_log.tau, atol=1e-12)
    np.testing.assert_allclose(res.log.q / 1e-3, np.round(res.log.q / 1e-3), atol=1e-9)
    held = simulate_arm(z1, 0.2, 1000, 0.0, 2, truth=res.truth, effects=fx)
    assert held.truth["parameters"] == res.truth["parameters"] and held.truth["sensors"] == s
    with pytest.raises(SimulationError, match="dry friction"):
        simulate_arm(z1, 0.1, 1000, 0.0, 0, effects=Effects(friction="stribeck"))
    with pytest.raises(SimulationError, match="multiple of the MuJoCo timestep"):
        simulate_arm(z1, 0.1, 3000, 0.0, 0)


# ------------------------------------------------------------------------------ CLI
def test_cli_out_of_class_options(tmp_path):
    pytest.importorskip("mujoco")
    out = tmp_path / "sim"
    r = CliRunner().invoke(main, ["simulate", "--robot", "z1", "--duration", "0.2", "--simulator", "mujoco",
                                  "--effort-gain-error", "0.1", "--effort-offset", "0.02",
                                  "--encoder-resolution", "1e-4", "--out", str(out)])
    assert r.exit_code == 0, r.output
    truth = json.loads((out / "truth.json").read_text())
    assert truth["simulator"] == "mujoco" and truth["sensors"]["encoder_resolution"] == 1e-4
    assert len(truth["out_of_class"]) == 5 and "out-of-class truth" in r.output
    out2 = tmp_path / "sim2"
    r = CliRunner().invoke(main, ["simulate", "--robot", "z1", "--duration", "0.2", "--friction-model",
                                  "stribeck", "--friction-velocity-scale", "0.005", "--control-rate", "2000",
                                  "--out", str(out2)])
    assert r.exit_code == 0, r.output
    truth = json.loads((out2 / "truth.json").read_text())
    assert truth["friction_model"] == "stribeck" and truth["controller"]["control_rate"] == 2000.0


@pytest.mark.parametrize("args, culprit", [
    (["--control-rate", "1500"], "--control-rate"),
    (["--effort-gain-error", "1.2"], "--effort-gain-error"),
    (["--encoder-resolution", "-1"], "--encoder-resolution"),
    (["--simulator", "mujoco", "--friction-model", "stribeck"], "--friction-model"),
    (["--simulator", "mujoco", "--friction-velocity-scale", "0.01"], "--friction-velocity-scale"),
    (["--simulator", "mujoco", "--control-rate", "3000"], "control rate"),
])
def test_cli_bad_out_of_class_options(tmp_path, args, culprit):
    out = tmp_path / "sim"
    r = CliRunner().invoke(main, ["simulate", "--robot", "z1", "--duration", "0.2", *args, "--out", str(out)])
    assert r.exit_code == 2
    assert culprit in r.output and "error:" in r.output
    assert not out.exists()


def test_cli_floating_rejects_arm_options(tmp_path):
    out = tmp_path / "sim"
    r = CliRunner().invoke(main, ["simulate", "--robot", "b1", "--duration", "0.2", "--effort-gain-error",
                                  "0.1", "--out", str(out)])
    assert r.exit_code == 2 and "fixed-base arms" in r.output and not out.exists()


# ------------------------------------------------------------------------------ benchmark path
def test_benchmark_heldout_path_ranks_models(z1):
    """bench_outofclass on a tiny sharp-friction log: classical fit beats nominal; the floor is lowest."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    try:
        import bench_outofclass
    finally:
        sys.path.pop(0)
    rows = bench_outofclass.run("z1", "sharp", 0.01, ["ls-sg", "nominal"], 5.0, 2.0, 500.0)
    err = {r["method"]: r["heldout_rel_rmse_%"] for r in rows}
    floor = rows[0]["floor_%"]
    assert err["ls-sg"] < 0.5 * err["nominal"]
    assert floor < err["ls-sg"]
