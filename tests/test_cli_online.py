"""``fg-sysid online``: outputs end to end, ``predict`` reads its model.json, bad input (exit 2, no
partial output), bad samples mid-stream (reported, skipped, the run goes on)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from fg_sysid.cli import main
from fg_sysid.datasets.io import log_to_frame, read_log
from fg_sysid.datasets.simulate import simulate
from fg_sysid.estimation.baseline import nominal_parameters
from fg_sysid.prediction import heldout_report
from fg_sysid.robots import load_robot

FAST = ["--knot-rate", "50", "--warmup", "2", "--lag", "1", "--holdout", "0.8"]


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    d = tmp_path_factory.mktemp("online")
    robot = load_robot("z1")
    sim = simulate(robot, 6.0, 250.0, 0.01, 0)
    frame = log_to_frame(sim.log)
    frame.to_parquet(d / "log.parquet", index=False)
    held = simulate(robot, 3.0, 250.0, 0.01, 1, truth=sim.truth)  # the same robot, another motion
    log_to_frame(held.log).to_csv(d / "heldout.csv", index=False)
    return d, frame


@pytest.fixture(scope="module")
def run(logs):
    d, _ = logs
    out = d / "run"
    r = invoke("online", d / "log.parquet", "--robot", "z1", "--out", out, *FAST)
    assert r.exit_code == 0, r.output
    return out, r.output


def test_online_writes_every_output(run):
    out, text = run
    for f in ("theta_trajectory.parquet", "events.csv", "model.json", "summary.json", "parameters.png",
              "report.md"):
        assert (out / f).is_file(), f
    traj = pd.read_parquet(out / "theta_trajectory.parquet")
    assert traj["t"].is_monotonic_increasing
    assert traj["t"].iloc[0] >= 2.0 - 1e-9  # the first estimate comes after the warm-up
    assert {"link06.m", "link06.m.std", "joint1.fc", "joint1.fc.std"} <= set(traj.columns)
    assert (traj["link06.m.std"] > 0).all()
    ev = pd.read_csv(out / "events.csv")
    pub = ev[ev["decision"] == "publish"]
    assert len(pub) >= 1 and (pub["candidate_score"] < 0.95 * pub["published_score"]).all()
    assert ev["reason"].notna().all()
    s = json.loads((out / "summary.json").read_text())
    assert s["estimator"] in ("fixed-lag", "windowed")
    lat = s["latency"]
    assert 0 < lat["p50_s"] <= lat["p95_s"] <= lat["p99_s"] <= lat["max_s"]
    assert s["counts"]["published"] == len(pub) and s["counts"]["bad_samples"] == 0
    assert s["published_times_s"][-1] == pytest.approx(pub["t"].iloc[-1])
    model = json.loads((out / "model.json").read_text())
    assert model["online"]["published_t"] == pytest.approx(pub["t"].iloc[-1])
    assert "parameters.png" in (out / "report.md").read_text()
    assert "published" in text


def test_predict_accepts_the_online_model(run, logs, tmp_path):
    out, _ = run
    d, _ = logs
    r = invoke("predict", out, d / "heldout.csv", "--out", tmp_path / "pred.csv")
    assert r.exit_code == 0, r.output
    overall = float(r.output.strip().splitlines()[-1].split()[-1])
    # the URDF nominal model through the same prediction path (same SG filter) does clearly worse
    robot = load_robot("z1")
    spec = json.loads((out / "model.json").read_text())
    urdf = heldout_report(nominal_parameters(robot), robot, read_log(d / "heldout.csv", robot),
                          window_s=spec["sg_filter"]["window_s"], polyorder=spec["sg_filter"]["polyorder"])
    assert overall < 0.8 * urdf["overall"], (overall, urdf["overall"])
    pred = pd.read_csv(tmp_path / "pred.csv")
    assert len(pred) == 751 and "tau.joint1" in pred.columns


def test_bad_samples_are_reported_and_skipped(logs, tmp_path):
    d, frame = logs
    f = frame.iloc[: int(4.5 * 250)].copy()
    f.loc[300, "q.joint2"] = np.nan
    f.loc[400, "t"] = f.loc[399, "t"]  # repeated
    f.loc[500, "t"] = 0.5  # out of order
    f = f.drop(index=range(700, 760))  # a 0.24 s gap
    f.to_csv(tmp_path / "bad.csv", index=False)
    out = tmp_path / "out"
    r = invoke("online", tmp_path / "bad.csv", "--robot", "z1", "--out", out, "--estimator", "windowed",
               *FAST)
    assert r.exit_code == 0, r.output
    ev = pd.read_csv(out / "events.csv")
    kinds = ev.groupby("decision")["t"].apply(list).to_dict()
    assert {"non-finite", "repeated", "out-of-order", "gap"} <= set(kinds)
    assert kinds["non-finite"] == [pytest.approx(300 / 250)]
    assert kinds["gap"] == [pytest.approx(760 / 250)]
    s = json.loads((out / "summary.json").read_text())
    assert s["counts"]["bad_samples"] == 3 and s["counts"]["gaps"] == 1
    traj = pd.read_parquet(out / "theta_trajectory.parquet")
    assert traj["t"].iloc[-1] > 4.0  # kept estimating after the bad samples


@pytest.mark.parametrize("case, args, message", [
    ("unknown robot", ["--robot", "no-such-robot"], "no-such-robot"),
    ("bad lag", ["--robot", "z1", "--lag", "0"], "--lag"),
    ("bad margin", ["--robot", "z1", "--margin", "1.5"], "--margin"),
    ("bad plot parameter", ["--robot", "z1", "--plot-parameters", "nolink.m"], "nolink.m"),
])
def test_bad_options_exit_2_without_output(logs, tmp_path, case, args, message):
    d, _ = logs
    out = tmp_path / "out"
    r = invoke("online", d / "log.parquet", "--out", out, *args)
    assert r.exit_code == 2, (case, r.output)
    assert "error:" in r.output and message in r.output
    assert not out.exists()


@pytest.mark.parametrize("case, edit, message", [
    ("no time column", lambda f: f.drop(columns="t"), "missing time column 't'"),
    ("no efforts", lambda f: f.drop(columns=[c for c in f.columns if c.startswith("tau.")]), "effort"),
    ("unknown joint", lambda f: f.assign(**{"q.elbow_x": 0.0}), "unknown joint 'elbow_x'"),
    ("partial velocities", lambda f: f.drop(columns="v.joint3"), "v.joint3"),
])
def test_bad_logs_exit_2_without_output(logs, tmp_path, case, edit, message):
    _, frame = logs
    path = tmp_path / "bad.csv"
    edit(frame.iloc[:50].copy()).to_csv(path, index=False)
    out = tmp_path / "out"
    r = invoke("online", path, "--robot", "z1", "--out", out)
    assert r.exit_code == 2, (case, r.output)
    assert "error:" in r.output and message in r.output, r.output
    assert not out.exists()


def test_missing_log_exit_2(tmp_path):
    r = invoke("online", tmp_path / "nope.csv", "--robot", "z1", "--out", tmp_path / "out")
    assert r.exit_code == 2 and "not found" in r.output


def test_realtime_replays_at_log_speed(logs, tmp_path):
    _, frame = logs
    path = tmp_path / "short.csv"
    frame.iloc[: int(2.6 * 250)].to_csv(path, index=False)
    out = tmp_path / "rt"
    r = invoke("online", path, "--robot", "z1", "--out", out, "--realtime", "--estimator", "windowed",
               "--chunk", "sample", *FAST)
    assert r.exit_code == 0, r.output
    s = json.loads((out / "summary.json").read_text())
    assert s["options"]["realtime"] and s["options"]["chunk_samples"] == 1
    assert s["wall_seconds"] >= s["log_duration_s"] - 0.05  # never ahead of the log's clock


def test_gtsam_estimator_through_the_cli(logs, tmp_path):
    """--estimator gtsam: the same window on GTSAM's iSAM2 fixed-lag smoother, same outputs."""
    d, _ = logs
    out = tmp_path / "g"
    r = invoke("online", d / "log.parquet", "--robot", "z1", "--estimator", "gtsam", "--out", out, *FAST)
    assert r.exit_code == 0, r.output
    s = json.loads((out / "summary.json").read_text())
    assert s["estimator"] == "gtsam" and s["counts"]["bad_samples"] == 0
    traj = pd.read_parquet(out / "theta_trajectory.parquet")
    assert len(traj) > 10 and (traj["link06.m.std"] > 0).all()
    assert (out / "model.json").is_file()
