"""``fg-sysid identify`` / ``predict`` / ``demo`` on floating-base (B1, MuJoCo) logs, end to end."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from fg_sysid.cli import main
from fg_sysid.datasets.io import write_log
from fg_sysid.datasets.mujoco_sim import simulate_stance, to_log
from fg_sysid.robots import load_robot


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    b1 = load_robot("b1")
    d = tmp_path_factory.mktemp("b1")
    train = simulate_stance(b1, 0.6, 200, seed=2, noise=0.005, motion="sway", randomize=True)
    write_log(to_log(train), d / "train.parquet")
    held = simulate_stance(
        b1, 0.6, 200, seed=2, noise=0.005, motion="sway", randomize=True, sway_amplitude=0.14
    )
    log = to_log(held)
    write_log(log, d / "held.parquet")
    write_log(dataclasses.replace(log, forces={}), d / "held_noforces.parquet")
    return d


@pytest.fixture(scope="module")
def identified(logs):
    out = logs / "id"
    r = invoke(
        "identify",
        logs / "train.parquet",
        "--robot",
        "b1",
        "--out",
        out,
        "--knot-stride",
        2,
        "--no-use-forces",
        "--quiet",
    )
    assert r.exit_code == 0, r.output
    return out, r.output


def test_identify_floating_writes_outputs_and_constraints(identified):
    out, output = identified
    assert "constraints satisfied: True" in output
    s = json.loads((out / "summary.json").read_text())
    c = s["constraints"]
    assert c["satisfied"] and c["tolerance"] == 1e-6
    for k in (
        "contact_position_max_m",
        "contact_velocity_max_m_per_s",
        "contact_acceleration_max_m_per_s2",
        "inverse_dynamics_base_rows_max",
    ):
        assert 0 <= c[k] <= 1e-6
    assert s["floating_base"]["contact_frames"] == ["FL_foot", "FR_foot", "RL_foot", "RR_foot"]
    m = json.loads((out / "model.json").read_text())
    assert m["floating_base"] and m["contact_radius"] == pytest.approx(0.02)
    traj = pd.read_parquet(out / "trajectory.parquet")
    assert {"base.pos.x", "base.quat.w", "force.RR_foot.z"} <= set(traj.columns)
    # the estimated vertical forces carry the robot's weight (sum of body masses × g), ±5 %
    p = pd.read_csv(out / "parameters.csv")
    mass = p.loc[p.name.str.endswith(".m"), "estimate"].sum()
    fz = traj[[f"force.{f}.z" for f in ("FL_foot", "FR_foot", "RL_foot", "RR_foot")]].sum(axis=1).mean()
    assert abs(fz / (9.81 * mass) - 1) < 0.05
    for f in ("report.md", "convergence.png", "contact_forces.png", "physical_quantities.csv"):
        assert (out / f).exists()


def test_predict_floating_with_and_without_forces(identified, logs, tmp_path):
    out, _ = identified
    r = invoke("predict", out, logs / "held.parquet", "--out", tmp_path / "pred.csv")
    assert r.exit_code == 0, r.output
    assert "forces" in r.output.lower()
    df = pd.read_csv(tmp_path / "pred.csv")
    assert "tau.FL_calf_joint" in df and np.isfinite(df["tau.FL_calf_joint"]).all()
    r = invoke("predict", out, logs / "held_noforces.parquet", "--out", tmp_path / "pred2.csv")
    assert r.exit_code == 0, r.output
    assert "contact-consistent" in r.output


def test_identify_floating_decoupled_baseline(logs, tmp_path):
    r = invoke(
        "identify",
        logs / "train.parquet",
        "--robot",
        "b1",
        "--out",
        tmp_path / "ls",
        "--method",
        "ls-sg",
        "--quiet",
    )
    assert r.exit_code == 0, r.output
    s = json.loads((tmp_path / "ls" / "summary.json").read_text())
    assert s["method"] == "ls-sg" and s["rank"] > 0


def test_identify_floating_bad_options(logs, tmp_path):
    r = invoke(
        "identify", logs / "train.parquet", "--robot", "b1", "--out", tmp_path / "x", "--total-mass", -3
    )
    assert r.exit_code == 2 and "total-mass" in r.output
    assert not (tmp_path / "x").exists()


def test_demo_b1_quick(tmp_path):
    out = tmp_path / "demo"
    r = invoke("demo", "--robot", "b1", "--quick", "--out", out, "--quiet")
    assert r.exit_code == 0, r.output
    assert "true parameters (floor)" in r.output and "total mass error" in r.output
    for f in (
        "report.md",
        "heldout_efforts.png",
        "identify/summary.json",
        "identify-ls-sg/summary.json",
        "train/log.parquet",
        "heldout/truth.json",
    ):
        assert (out / f).exists(), f
