"""Stick-phase weights of open-chain effort rows (`fg_sysid.estimation.arm_stick`, issue 9 session 8) and the
stick-sample split of the out-of-class benchmark (benchmarks/stick_floor.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from fg_sysid.estimation.arm_stick import row_factor, stick_sigma
from fg_sysid.estimation.smoother import JointSmoother
from fg_sysid.layout import ParameterLayout
from fg_sysid.robots import load_robot

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))


def test_stick_sigma_and_row_factor():
    """δ = fc at rest, fc·(1 − tanh²(v/(2vs))) elsewhere (< 0.1 fc beyond 4 vs); the row factor is
    σ/√(σ² + δ²); laws without a Coulomb term give None."""
    robot = load_robot("double_pendulum")
    layout = ParameterLayout.create(robot, "log-cholesky", "coulomb-viscous-scale", 0.05)
    p = layout.to_physical(layout.prior(0.7)[0]).copy()
    _, pf, _ = layout.split(p)  # a view: set fc = (0.5, 2), vs = (0.01, 0.05)
    sfx = list(layout.friction.suffixes)
    pf[:, sfx.index("fc")] = [0.5, 2.0]
    pf[:, sfx.index("vs")] = [0.01, 0.05]
    v = np.array([[0.0, 0.0], [0.02, 0.1], [0.04, 0.2], [-1.0, -1.0]])
    d = stick_sigma(layout, p, v, 0.05)
    np.testing.assert_allclose(d[0], [0.5, 2.0])
    np.testing.assert_allclose(d[1], np.array([0.5, 2.0]) * (1 - np.tanh(1.0) ** 2))
    assert np.all(d[2] < 0.1 * np.array([0.5, 2.0])) and np.all(d[3] < 1e-6)
    f = row_factor(d, np.array([0.1, 0.1]), np.array([0, 1]), 2)
    np.testing.assert_allclose(f[0], 0.1 / np.sqrt(0.01 + np.array([0.25, 4.0])))
    np.testing.assert_allclose(f[3], 1.0)
    fixed = ParameterLayout.create(robot, "log-cholesky", "coulomb-viscous", 0.05)
    pfix = fixed.to_physical(fixed.prior(0.7)[0])
    np.testing.assert_allclose(stick_sigma(fixed, pfix, v[:1], 0.05)[0], np.abs(fixed.split(pfix)[1][:, 0]))
    stribeck = ParameterLayout.create(robot, "log-cholesky", "stribeck6", 0.05)
    assert stick_sigma(stribeck, stribeck.to_physical(stribeck.prior(0.7)[0]), v, 0.05) is None
    assert stick_sigma(layout, None, v, 0.05) is None


@pytest.mark.filterwarnings("ignore")
def test_smoother_weights_reversal_rows_on_a_short_mujoco_log():
    """On 2 s of the MuJoCo Z1 (dry friction), stick_weights=True gives the effort rows of the joint with the
    largest fc a factor < 0.2 at its velocity reversals and ≈ 1 where it slides fast; the default leaves
    every row at 1/σ_τ (no stick term)."""
    from bench_outofclass import simulate_truth

    robot = load_robot("z1")
    sim = simulate_truth(robot, "mujoco", 2.0, 1000.0, 0.01, 0)
    sm = JointSmoother(robot, stick_weights="law-width", max_iterations=2, reweight_rounds=0).fit(sim.log)
    fc = np.array([sim.truth["parameters"][f"{j}.fc"] for j in robot.joint_names])
    j = int(np.argmax(fc))
    delta = sm._stick_delta
    assert delta is not None and delta.shape == (sim.log.n_samples, robot.n_joints)
    w = row_factor(delta, sm.noise_.tau, robot.joint_index_v(), robot.nv)[:, robot.joint_index_v()[j]]
    v = sim.truth_log.v[:, j]
    assert np.median(w[np.abs(v) < 0.01]) < 0.2, np.median(w[np.abs(v) < 0.01])
    assert np.median(w[np.abs(v) > 0.5]) > 0.9, np.median(w[np.abs(v) > 0.5])
    plain = JointSmoother(robot, max_iterations=1, reweight_rounds=0).fit(sim.log)
    assert plain._stick_delta is None
    # "velocity-noise": the logged v with the width = its noise std (σ_v = 0.01 here): narrower, so the rows
    # with 0.1 < |v| < 0.3 rad/s keep their weight where "law-width" (2·0.05 rad/s) cuts them
    nz = JointSmoother(robot, stick_weights="velocity-noise", max_iterations=1, reweight_rounds=0)
    nz.fit(sim.log)
    iv = robot.joint_index_v()
    wn = row_factor(nz._stick_delta, nz.noise_.tau, iv, robot.nv)[:, iv[j]]
    mid = (np.abs(v) > 0.1) & (np.abs(v) < 0.3)
    assert np.median(wn[mid]) > 0.9 > np.median(w[mid]), (np.median(wn[mid]), np.median(w[mid]))
    assert np.median(wn[np.abs(v) < 0.003]) < 0.2
    with pytest.raises(ValueError, match="stick_weights"):
        JointSmoother(robot, stick_weights="yes", max_iterations=1).fit(sim.log)


def test_cli_stick_weights(tmp_path):
    """`fg-sysid identify --stick-weights velocity-noise` reaches the smoother (summary.json says so and the
    options it used); with the classical baseline: exit 2 naming the option, no output directory."""
    import json
    import warnings

    from click.testing import CliRunner

    from fg_sysid.cli import main
    from fg_sysid.datasets.io import write_log
    from fg_sysid.datasets.simulate import simulate

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sim = simulate(load_robot("z1"), 0.6, 500, 0.01, 0, friction_velocity_scale=0.005)
    path = tmp_path / "log.csv"
    write_log(sim.log, path)
    runner = CliRunner()
    out = tmp_path / "fit"
    bad = runner.invoke(main, ["identify", str(path), "--robot", "z1", "--out", str(out), "--method", "ls-sg",
                               "--stick-weights", "velocity-noise", "--quiet"])
    assert bad.exit_code == 2 and "--stick-weights" in bad.output and not out.exists(), bad.output
    ok = runner.invoke(main, ["identify", str(path), "--robot", "z1", "--out", str(out),
                              "--stick-weights", "velocity-noise", "--quiet", "--max-iterations", "5"])
    assert ok.exit_code == 0, ok.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["options"]["stick_weights"] == "velocity-noise", summary["options"]
