"""Log I/O: validation messages, round trips, and the shared real/simulated logs."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fg_sysid.datasets import Log, LogError, load_log_for_robot, read_log, write_log
from fg_sysid.robots import load_robot

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"  # shared/ sits beside the clone
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason="shared data not available")


@pytest.fixture(scope="module")
def z1():
    return load_robot("z1")


def make_df(robot, n=20, v=True, tau=True, seed=0):
    rng = np.random.default_rng(seed)
    cols = {"t": np.arange(n) * 0.01}
    for j in robot.joint_names:
        cols[f"q.{j}"] = rng.uniform(-1, 1, n)
    if v:
        for j in robot.joint_names:
            cols[f"v.{j}"] = rng.normal(0, 1, n)
    if tau:
        for j in robot.joint_names:
            cols[f"tau.{j}"] = rng.normal(0, 5, n)
    return pd.DataFrame(cols)


def write(df, tmp_path, name="log.csv"):
    p = tmp_path / name
    if p.suffix == ".csv":
        df.to_csv(p, index=False)
    else:
        df.to_parquet(p, index=False)
    return p


def read_err(df, tmp_path, robot, name="log.csv"):
    p = write(df, tmp_path, name)
    with pytest.raises(LogError) as ei:
        read_log(p, robot)
    msg = str(ei.value)
    assert str(p) in msg
    return msg


# ------------------------------------------------------------------------------ valid reads
def test_read_valid_csv(z1, tmp_path):
    df = make_df(z1)
    log = read_log(write(df, tmp_path), z1)
    assert isinstance(log, Log)
    assert log.joint_names == z1.joint_names
    assert log.q.shape == (20, 6) and log.v.shape == (20, 6) and log.tau.shape == (20, 6)
    np.testing.assert_array_equal(log.q[:, 2], df["q.joint3"].to_numpy())
    assert log.tau_measured.all()


def test_columns_mapped_to_robot_order(z1, tmp_path):
    df = make_df(z1)
    shuffled = df[["t"] + list(df.columns[1:][::-1])]
    log = read_log(write(shuffled, tmp_path), z1)
    np.testing.assert_array_equal(log.q[:, 0], df["q.joint1"].to_numpy())
    np.testing.assert_array_equal(log.tau[:, 5], df["tau.joint6"].to_numpy())


def test_v_absent_gives_none(z1, tmp_path):
    log = read_log(write(make_df(z1, v=False), tmp_path), z1)
    assert log.v is None


def test_tau_absent_or_all_nan_is_not_measured(z1, tmp_path):
    df = make_df(z1).drop(columns=["tau.joint2"])
    df["tau.joint4"] = np.nan
    p = write(df, tmp_path)
    with pytest.warns(UserWarning, match=r"not measured.*joint2, joint4"):
        log = read_log(p, z1)
    assert list(log.tau_measured) == [True, False, True, False, True, True]
    assert np.isnan(log.tau[:, 1]).all() and np.isnan(log.tau[:, 3]).all()


def test_extra_columns_kept(z1, tmp_path):
    df = make_df(z1)
    df["temperature"] = np.linspace(20, 30, len(df))
    log = read_log(write(df, tmp_path), z1)
    np.testing.assert_array_equal(log.extra["temperature"], df["temperature"].to_numpy())


def test_locked_joint_column_goes_to_extra(z1, tmp_path):
    assert "jointGripper" in z1.locked_joints
    df = make_df(z1)
    df["q.jointGripper"] = 0.0
    log = read_log(write(df, tmp_path), z1)
    assert "q.jointGripper" in log.extra
    df["q.jointGripper"] = 0.5
    with pytest.warns(UserWarning, match="jointGripper"):
        read_log(write(df, tmp_path, "b.csv"), z1)


# ------------------------------------------------------------------------------ validation errors
def test_missing_t(z1, tmp_path):
    msg = read_err(make_df(z1).drop(columns=["t"]), tmp_path, z1)
    assert "'t'" in msg and "missing" in msg


def test_missing_q_column(z1, tmp_path):
    msg = read_err(make_df(z1).drop(columns=["q.joint3"]), tmp_path, z1)
    assert "q.joint3" in msg and "joint1" in msg  # names the culprit and lists the log's joints


def test_unknown_joint(z1, tmp_path):
    df = make_df(z1)
    df["tau.elbow"] = 1.0
    msg = read_err(df, tmp_path, z1)
    assert "tau.elbow" in msg and "unknown joint 'elbow'" in msg and "joint6" in msg


@pytest.mark.parametrize("col", ["t", "q.joint2", "v.joint5"])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite(z1, tmp_path, col, bad):
    df = make_df(z1)
    df.loc[7, col] = bad
    msg = read_err(df, tmp_path, z1, "log.parquet")
    assert repr(col) in msg and "row 7" in msg


def test_csv_row_reports_line(z1, tmp_path):
    df = make_df(z1)
    df.loc[4, "q.joint1"] = np.nan
    msg = read_err(df, tmp_path, z1)
    assert "row 4 (CSV line 6)" in msg


def test_decreasing_time(z1, tmp_path):
    df = make_df(z1)
    df.loc[5, "t"] = 0.0
    msg = read_err(df, tmp_path, z1)
    assert "'t'" in msg and "row 5" in msg and "decreasing" in msg


def test_duplicate_time(z1, tmp_path):
    df = make_df(z1)
    df.loc[9, "t"] = df.loc[8, "t"]
    msg = read_err(df, tmp_path, z1)
    assert "row 9" in msg and "duplicate" in msg


@pytest.mark.parametrize("col,value", [("q.joint4", 150.0), ("v.joint1", -2000.0), ("tau.joint2", 3e5)])
def test_implausible_values(z1, tmp_path, col, value):
    df = make_df(z1)
    df.loc[3, col] = value
    msg = read_err(df, tmp_path, z1)
    assert repr(col) in msg and "row 3" in msg and "implausible" in msg


def test_partial_tau_nan_is_error(z1, tmp_path):
    df = make_df(z1)
    df.loc[[6, 11], "tau.joint3"] = np.nan
    msg = read_err(df, tmp_path, z1)
    assert "tau.joint3" in msg and "row 6" in msg and "2 of 20" in msg


def test_partial_v_columns(z1, tmp_path):
    msg = read_err(make_df(z1).drop(columns=["v.joint6"]), tmp_path, z1)
    assert "v.joint6" in msg


def test_non_numeric_value(z1, tmp_path):
    df = make_df(z1).astype({"q.joint2": object})
    df.loc[2, "q.joint2"] = "abc"
    msg = read_err(df, tmp_path, z1)
    assert "q.joint2" in msg and "row 2" in msg and "abc" in msg


def test_bad_files(z1, tmp_path):
    with pytest.raises(LogError, match="not found"):
        read_log(tmp_path / "nope.csv", z1)
    (tmp_path / "log.txt").write_text("t\n0\n")
    with pytest.raises(LogError, match="unsupported"):
        read_log(tmp_path / "log.txt", z1)
    with pytest.raises(LogError, match="at least 2"):
        read_log(write(make_df(z1, n=1), tmp_path), z1)


# ------------------------------------------------------------------------------ round trips
@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_round_trip(z1, tmp_path, suffix):
    df = make_df(z1, n=50)
    df["tau.joint5"] = np.nan
    df["q.joint1"] *= np.exp(np.random.default_rng(1).normal(0, 3, 50))  # awkward magnitudes
    df["q.joint1"] = df["q.joint1"].clip(-99, 99)
    with pytest.warns(UserWarning):
        log = read_log(write(df, tmp_path, "in" + suffix), z1)
    out = tmp_path / ("out" + suffix)
    write_log(log, out)
    assert sorted(os.listdir(tmp_path)) == sorted(["in" + suffix, "out" + suffix])  # no temp left
    with pytest.warns(UserWarning, match="joint5"):
        back = read_log(out, z1)
    for name in ("t", "q", "v", "tau"):
        np.testing.assert_array_equal(getattr(back, name), getattr(log, name))
    assert back.joint_names == log.joint_names


def test_round_trip_without_v_and_with_extra(z1, tmp_path):
    log = Log(t=np.arange(5) * 0.1, q=np.ones((5, 6)), v=None, tau=np.zeros((5, 6)),
              joint_names=z1.joint_names, extra={"temp": np.arange(5.0)})
    write_log(log, tmp_path / "a.parquet")
    back = read_log(tmp_path / "a.parquet", z1)
    assert back.v is None
    np.testing.assert_array_equal(back.extra["temp"], np.arange(5.0))


def test_write_log_bad_suffix(z1, tmp_path):
    log = Log(t=np.arange(3.0), q=np.zeros((3, 6)), v=None, tau=np.zeros((3, 6)), joint_names=z1.joint_names)
    with pytest.raises(LogError, match="unsupported"):
        write_log(log, tmp_path / "a.xlsx")


# ------------------------------------------------------------------------------ robot + log helper
def test_load_log_for_robot_locks_absent_joints(tmp_path):
    robot = load_robot("z1_gripper")
    df = make_df(load_robot("z1"))
    p = write(df, tmp_path)
    with pytest.warns(UserWarning, match="jointGripper"):
        r, log = load_log_for_robot(p, robot)
    assert r.joint_names == log.joint_names == tuple(f"joint{i}" for i in range(1, 7))
    assert "jointGripper" in r.locked_joints


@needs_data
def test_tiago_real_log():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        robot, log = load_log_for_robot(DATA / "tiago_dynamic_2021-07-01.csv", "tiago")
    msgs = [str(x.message) for x in w]
    assert any("40 joint(s)" in m and "hand_index_abd_joint" in m for m in msgs)
    assert any("not measured" in m and "torso_lift_joint" in m for m in msgs)
    assert robot.joint_names == log.joint_names
    assert robot.joint_names[0] == "torso_lift_joint" and len(robot.joint_names) == 8
    assert len(robot.locked_joints) == 40
    assert log.n_samples == 8022 and log.v is not None
    assert list(log.tau_measured) == [False] + [True] * 7
    assert robot.nq == robot.nv == 8


@needs_data
def test_so101_sim_log():
    with pytest.warns(UserWarning, match="gripper"):
        robot, log = load_log_for_robot(DATA / "so101_sim_train.csv", "so101")
    assert robot.joint_names == log.joint_names and len(robot.joint_names) == 5
    assert log.n_samples == 3001 and log.tau_measured.all()


@needs_data
def test_ur10_truth_log_with_urdf():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing locked, everything measured: no warning
        robot, log = load_log_for_robot(DATA / "ur10_truth_train.csv", DATA / "ur10_truth.urdf")
    assert robot.joint_names == log.joint_names and len(robot.joint_names) == 6
    assert not robot.locked_joints
    assert log.n_samples == 1000 and log.tau_measured.all() and log.v is not None


@needs_data
def test_load_log_for_wrong_robot_names_joints():
    with pytest.raises(LogError, match="shoulder_pan"):
        load_log_for_robot(DATA / "so101_sim_train.csv", "z1")


# ------------------------------------------------------------------------------ floating-base columns
FEET = ("FL_foot", "FR_foot", "RL_foot", "RR_foot")


@pytest.fixture(scope="module")
def b1():
    robot = load_robot("b1")
    assert robot.floating_base and all(robot.model.existFrame(f) for f in FEET)
    return robot


def _unit_quats(rng, n):
    x = rng.normal(size=(n, 4))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def make_fb_df(robot, n=30, seed=0):
    rng = np.random.default_rng(seed)
    df = make_df(robot, n=n, seed=seed)
    cols = {}
    for prefix, comps, scale in (("imu.gyro", "xyz", 2.0), ("imu.acc", "xyz", 10.0), ("base.pos", "xyz", 1)):
        for c in comps:
            cols[f"{prefix}.{c}"] = rng.normal(0, scale, n)
    for prefix in ("imu.quat", "base.quat"):
        qs = _unit_quats(rng, n)
        for i, c in enumerate("wxyz"):
            cols[f"{prefix}.{c}"] = qs[:, i]
    for f in FEET:
        cols[f"contact.{f}"] = rng.integers(0, 2, n)
        for c in "xyz":
            cols[f"force.{f}.{c}"] = rng.normal(0, 100, n)
            cols[f"torque.{f}.{c}"] = rng.normal(0, 1, n)
    return pd.concat([df, pd.DataFrame(cols)], axis=1)


def test_floating_base_log_parsed(b1, tmp_path):
    df = make_fb_df(b1)
    log = read_log(write(df, tmp_path), b1)
    assert log.q.shape == (30, 12) and log.joint_names == b1.joint_names  # joints only, no base
    np.testing.assert_array_equal(log.imu_gyro[:, 1], df["imu.gyro.y"].to_numpy())
    assert log.imu_acc.shape == (30, 3) and log.base_pos.shape == (30, 3)
    assert log.imu_quat.shape == (30, 4) and log.base_quat.shape == (30, 4)
    np.testing.assert_allclose(log.base_quat[:, 0], df["base.quat.w"].to_numpy(), rtol=1e-14)
    assert set(log.contacts) == set(log.forces) == set(log.torques) == set(FEET)
    assert log.contacts["RL_foot"].dtype == bool
    np.testing.assert_array_equal(log.contacts["RL_foot"], df["contact.RL_foot"].to_numpy() == 1)
    np.testing.assert_array_equal(log.forces["FR_foot"][:, 2], df["force.FR_foot.z"].to_numpy())
    assert not any(c.startswith(("imu.", "base.", "contact.", "force.", "torque.")) for c in log.extra)
    sl = log.slice(5, 10)
    assert sl.imu_quat.shape == (5, 4) and sl.contacts["FL_foot"].shape == (5,)


def test_fixed_base_log_has_no_floating_fields(z1, tmp_path):
    log = read_log(write(make_df(z1), tmp_path), z1)
    assert log.imu_gyro is None and log.imu_acc is None and log.imu_quat is None
    assert log.base_pos is None and log.base_quat is None
    assert log.contacts == {} and log.forces == {} and log.torques == {} and log.extra == {}


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_floating_base_round_trip(b1, tmp_path, suffix):
    df = make_fb_df(b1, n=40)
    for c in "xyz":
        df[f"torque.RR_foot.{c}"] = np.nan  # torque not measured on one foot
    df["base.quat.w"] *= 1.0005  # normalised on read
    log = read_log(write(df, tmp_path, "in" + suffix), b1)
    np.testing.assert_allclose(np.linalg.norm(log.base_quat, axis=1), 1.0, rtol=1e-12)
    assert np.isnan(log.torques["RR_foot"]).all()
    out = tmp_path / ("out" + suffix)
    write_log(log, out)
    back = read_log(out, b1)
    for name in ("t", "q", "v", "tau", "imu_gyro", "imu_acc", "imu_quat", "base_pos", "base_quat"):
        np.testing.assert_array_equal(getattr(back, name), getattr(log, name))
    for name in ("contacts", "forces", "torques"):
        a, b = getattr(log, name), getattr(back, name)
        assert list(a) == list(b)
        for k in a:
            np.testing.assert_array_equal(a[k], b[k])


@pytest.mark.parametrize("drop", ["imu.gyro.z", "imu.acc.x", "imu.quat.w", "base.pos.y", "base.quat.z",
                                  "force.FL_foot.y", "torque.RR_foot.x"])
def test_incomplete_group(b1, tmp_path, drop):
    msg = read_err(make_fb_df(b1).drop(columns=[drop]), tmp_path, b1)
    assert repr(drop) in msg and "missing" in msg


@pytest.mark.parametrize("col", ["imu.gyro.x", "imu.acc.y", "imu.quat.w", "base.pos.z", "base.quat.y",
                                 "contact.FR_foot", "force.RL_foot.z", "torque.FL_foot.y"])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_floating_non_finite(b1, tmp_path, col, bad):
    df = make_fb_df(b1).astype({col: float})
    df.loc[7, col] = bad
    msg = read_err(df, tmp_path, b1, "log.parquet")
    assert repr(col) in msg and "row 7" in msg


def test_all_nan_force_is_not_measured(b1, tmp_path):
    df = make_fb_df(b1)
    df["force.FL_foot.x"] = np.nan
    log = read_log(write(df, tmp_path), b1)
    assert np.isnan(log.forces["FL_foot"][:, 0]).all() and np.isfinite(log.forces["FL_foot"][:, 1:]).all()


@pytest.mark.parametrize("prefix", ["imu.quat", "base.quat"])
def test_quaternion_not_unit(b1, tmp_path, prefix):
    df = make_fb_df(b1)
    df.loc[4, f"{prefix}.x"] += 0.1
    msg = read_err(df, tmp_path, b1)
    assert prefix in msg and "row 4" in msg and "norm" in msg


def test_contact_flag_not_binary(b1, tmp_path):
    df = make_fb_df(b1).astype({"contact.RR_foot": float})
    df.loc[9, "contact.RR_foot"] = 0.5
    msg = read_err(df, tmp_path, b1)
    assert "contact.RR_foot" in msg and "row 9" in msg and "0.5" in msg


@pytest.mark.parametrize("col", ["contact.hand", "force.hand.x", "torque.hand.x"])
def test_unknown_frame(b1, tmp_path, col):
    df = make_fb_df(b1)
    if col.startswith("contact"):
        df[col] = 1
    else:
        kind = col.split(".")[0]
        for c in "xyz":
            df[f"{kind}.hand.{c}"] = 0.0
    msg = read_err(df, tmp_path, b1)
    assert "'hand'" in msg and "FL_foot" in msg  # names the culprit and lists the known frames


@pytest.mark.parametrize("col,value", [("imu.gyro.y", 150.0), ("imu.acc.z", -2000.0),
                                       ("force.FR_foot.x", 2e5), ("torque.RL_foot.z", 2e5)])
def test_floating_implausible(b1, tmp_path, col, value):
    df = make_fb_df(b1)
    df.loc[3, col] = value
    msg = read_err(df, tmp_path, b1)
    assert col in msg and "row 3" in msg and "implausible" in msg


def test_unknown_group_component(b1, tmp_path):
    df = make_fb_df(b1)
    df["imu.gyro.w"] = 0.0
    msg = read_err(df, tmp_path, b1)
    assert "imu.gyro.w" in msg
