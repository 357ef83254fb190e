"""ROS bags (issue 14 item 3): rosbag2 sqlite3, rosbag2 MCAP and ROS 1 bags written with rosbags' own
writers from a simulated z1 log, read back onto a uniform clock, compared with the source columns, and
identified end to end through ``fg-sysid identify`` (in-class: simulated z1 data, z1 model)."""

from __future__ import annotations

import json
import warnings
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from fg_sysid.cli import main
from fg_sysid.datasets.io import LogError, load_log_for_robot, write_log
from fg_sysid.datasets.rosbag import (
    BagOptions,
    conversion_report,
    parse_contact_topic,
    read_bag_frame,
    write_bag,
)
from fg_sysid.datasets.simulate import simulate
from fg_sysid.robots import load_robot

STORAGES = {"sqlite3": "bag_sqlite3", "mcap": "bag_mcap", "ros1": "bag.bag"}


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def z1():
    return load_robot("z1")


@pytest.fixture(scope="module")
def sim(z1, tmp_path_factory):
    d = tmp_path_factory.mktemp("bags")
    log = simulate(z1, 1.0, 100.0, 0.01, 0).log
    write_log(log, d / "log.parquet")
    for storage, name in STORAGES.items():
        write_bag(d / name, log, storage=storage)
    return {"dir": d, "log": log}


def _load(path, robot="z1", **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_log_for_robot(path, robot, **kw)


@pytest.mark.parametrize("storage", list(STORAGES))
def test_bag_round_trip_matches_source_columns(sim, storage):
    src = sim["log"]
    lines = []
    robot, log = _load(sim["dir"] / STORAGES[storage], echo=lines.append)
    assert log.joint_names == src.joint_names and log.n_samples == src.n_samples
    np.testing.assert_allclose(log.t, src.t - src.t[0], atol=1e-12)
    for a, b in ((log.q, src.q), (log.v, src.v), (log.tau, src.tau)):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)
    rep = conversion_report(log)
    fmt = {"sqlite3": "rosbag2 (sqlite3)", "mcap": "rosbag2 (mcap)", "ros1": "ROS 1"}[storage]
    assert rep["format"] == fmt and rep["samples"] == src.n_samples
    assert rep["rate_hz"] == pytest.approx(100.0, rel=1e-9)
    assert rep["topics"]["/joint_states"]["time_source"] == "header.stamp"
    assert len(lines) == 1 and "uniform 100 Hz clock" in lines[0]


def test_joint_groups_on_different_clocks_are_resampled(sim, tmp_path):
    """Two JointState streams (joints 1-3, joints 4-6), the second 2.5 ms late: the common span starts
    at the later stream; joints 1-3 are linearly interpolated between their own samples."""
    src = sim["log"]
    names = list(src.joint_names)
    write_bag(tmp_path / "b", src, storage="mcap", joint_groups=[names[:3], names[3:]],
              group_offsets_s=[0.0, 0.0025])
    _, log = _load(tmp_path / "b")
    rep = conversion_report(log)
    assert rep["trimmed_start_s"] == pytest.approx(0.0025)
    assert rep["topics"]["/joint_states"]["messages"] == 2 * src.n_samples
    tk = log.t + 0.0025  # on the source clock
    for i in range(6):
        expect = np.interp(tk - (0.0025 if i >= 3 else 0.0), src.t, src.q[:, i])
        np.testing.assert_allclose(log.q[:, i], expect, atol=1e-12)
    assert log.n_samples == src.n_samples - 1


def test_jittered_stamps_resampled_on_uniform_clock(z1, tmp_path):
    base = simulate(z1, 1.0, 200.0, 0.0, 1).log
    rng = np.random.default_rng(3)
    t = base.t + rng.uniform(-1e-3, 1e-3, base.t.size)  # jitter < half a sample: still increasing
    jit = replace(base, t=t)
    write_bag(tmp_path / "j.bag", jit, storage="ros1")
    _, log = _load(tmp_path / "j.bag", bag_options=BagOptions(rate=100.0))
    assert np.allclose(np.diff(log.t), 0.01)
    t0 = conversion_report(log)["trimmed_start_s"] + t[0]
    for i in range(6):
        np.testing.assert_allclose(log.q[:, i], np.interp(log.t + t0, t, jit.q[:, i]), rtol=0,
                                   atol=1e-7)  # ns stamps
    assert conversion_report(log)["rate_source"] == "--bag-rate"


def test_imu_and_contact_flags(z1, tmp_path):
    src = simulate(z1, 1.0, 100.0, 0.0, 2).log
    n = src.n_samples
    ang = np.linspace(0, 1.0, n)
    quat = np.column_stack([np.cos(ang / 2), np.zeros(n), np.zeros(n), np.sin(ang / 2)])
    gyro = np.column_stack([np.zeros(n), np.zeros(n), np.full(n, 1.0)])
    acc = np.column_stack([np.zeros(n), np.zeros(n), np.full(n, 9.81)])
    flags = (np.arange(n) // 10) % 2 == 0
    full = replace(src, imu_gyro=gyro, imu_acc=acc, imu_quat=quat, contacts={"link06": flags})
    write_bag(tmp_path / "b", full, storage="sqlite3", contact_topics={"link06": "/contact/link06"})
    _, log = _load(tmp_path / "b", bag_options=BagOptions(
        contact_topics=(parse_contact_topic("link06=/contact/link06"),)))
    np.testing.assert_allclose(log.imu_quat, quat, atol=1e-12)
    np.testing.assert_allclose(log.imu_gyro, gyro, atol=1e-12)
    np.testing.assert_allclose(log.imu_acc, acc, atol=1e-12)
    np.testing.assert_array_equal(log.contacts["link06"], flags)
    rep = conversion_report(log)
    assert "slerp" in rep["interpolation"] and "zero-order hold" in rep["interpolation"]
    # ignoring the IMU
    _, log2 = _load(tmp_path / "b", bag_options=BagOptions(imu_topic=""))
    assert log2.imu_gyro is None and log2.contacts == {}


def test_bad_bags_are_clear_errors(sim, tmp_path):
    d = sim["dir"]
    with pytest.raises(LogError, match=r"topic '/nope' \(--joint-states-topic\) is not in the bag; its "
                                       r"topics: /joint_states \[sensor_msgs/msg/JointState\]"):
        read_bag_frame(d / "bag_mcap", BagOptions(joint_states_topic="/nope"))
    (tmp_path / "empty_dir").mkdir()
    with pytest.raises(LogError, match="not a rosbag2 bag"):
        read_bag_frame(tmp_path / "empty_dir")
    bad = tmp_path / "broken.bag"
    bad.write_bytes((d / "bag.bag").read_bytes()[:700])
    with pytest.raises(LogError, match="cannot read ROS bag"):
        read_bag_frame(bad)
    with pytest.raises(LogError, match="FRAME=TOPIC"):
        parse_contact_topic("/contacts")
    with pytest.raises(LogError, match=r"no sensor_msgs/msg/JointState topic in the bag; its topics: /fl"):
        _read_without_joint_states(tmp_path)


def _read_without_joint_states(tmp_path):
    """A bag whose only topic is a std_msgs/Bool: written with rosbags directly."""
    from rosbags.rosbag2 import Writer
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.ROS2_HUMBLE)
    with Writer(tmp_path / "only_imu", version=9) as w:
        c = w.add_connection("/flag", "std_msgs/msg/Bool", typestore=ts)
        w.write(c, 1, ts.serialize_cdr(ts.types["std_msgs/msg/Bool"](data=True), "std_msgs/msg/Bool"))
    read_bag_frame(tmp_path / "only_imu")


def test_cli_identify_bag_end_to_end_equals_table(sim, tmp_path):
    """ls-sg on each bag gives exactly the parameters of the same log read from Parquet (lossless
    round trip); summary.json says what the conversion did."""
    ref = invoke("identify", sim["dir"] / "log.parquet", "--robot", "z1", "--out", tmp_path / "ref",
                 "--method", "ls-sg", "--quiet")
    assert ref.exit_code == 0, ref.output
    p_ref = pd.read_csv(tmp_path / "ref" / "parameters.csv")
    for storage, name in STORAGES.items():
        out = tmp_path / storage
        r = invoke("identify", sim["dir"] / name, "--robot", "z1", "--out", out, "--method", "ls-sg",
                   "--quiet")
        assert r.exit_code == 0, r.output
        p = pd.read_csv(out / "parameters.csv")
        np.testing.assert_allclose(p["estimate"], p_ref["estimate"], rtol=1e-6, atol=1e-9)
        s = json.loads((out / "summary.json").read_text())
        assert s["log_conversion"]["samples"] == sim["log"].n_samples
        assert s["data_checks"]["problems"] == [] and not s["prior_only"]
        assert "ROS bag" in (out / "report.md").read_text()
    # predict reads the bag too: the same efforts as from the Parquet log
    pred_ref = invoke("predict", tmp_path / "ref", sim["dir"] / "log.parquet", "--out", tmp_path / "p.csv")
    assert pred_ref.exit_code == 0, pred_ref.output
    pred = invoke("predict", tmp_path / "ref", sim["dir"] / "bag_mcap", "--out", tmp_path / "pb.csv")
    assert pred.exit_code == 0, pred.output
    np.testing.assert_allclose(pd.read_csv(tmp_path / "pb.csv").to_numpy(),
                               pd.read_csv(tmp_path / "p.csv").to_numpy(), rtol=1e-6, atol=1e-9)
    bad = invoke("predict", tmp_path / "ref", sim["dir"] / "bag_mcap", "--joint-states-topic", "/nope",
                 "--out", tmp_path / "bad.csv")
    assert bad.exit_code == 2 and "'/nope'" in bad.output and not (tmp_path / "bad.csv").exists()


def test_cli_identify_bag_smoother(sim, tmp_path):
    r = invoke("identify", sim["dir"] / "bag_mcap", "--robot", "z1", "--out", tmp_path / "o", "--quiet",
               "--knot-stride", "2", "--max-iterations", "15")
    assert r.exit_code == 0, r.output
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert s["log_conversion"]["format"] == "rosbag2 (mcap)" and s["iterations"] > 0
    p = pd.read_csv(tmp_path / "o" / "parameters.csv")
    assert (p["std_ratio"].dropna() < 1.0 + 1e-9).all() and (p["std_ratio"] < 0.5).any()


def test_cli_bag_errors_exit_2(sim, tmp_path):
    for args, needle in (
        (("--joint-states-topic", "/nope"), "'/nope'"),
        (("--bag-rate", "-3"), "--bag-rate"),
        (("--contact-topic", "oops"), "FRAME=TOPIC"),
    ):
        r = invoke("identify", sim["dir"] / "bag_sqlite3", "--robot", "z1", "--out", tmp_path / "o",
                   "--method", "ls-sg", "--quiet", *args)
        assert r.exit_code == 2 and needle in r.output and "Traceback" not in r.output, r.output
        assert not (tmp_path / "o").exists()
