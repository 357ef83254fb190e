"""Excitation trajectories, simulation with known truth, and the ``simulate`` command."""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pinocchio as pin
import pytest
from click.testing import CliRunner

from fg_sysid.cli import main
from fg_sysid.datasets import (
    FourierTrajectory,
    SimulationError,
    TrajectoryError,
    friction_torque,
    is_physically_consistent,
    parameter_names,
    read_log,
    simulate,
    truth_arrays,
    truth_model,
)
from fg_sysid.robots import load_robot


@pytest.fixture(scope="module")
def z1():
    return load_robot("z1")


@pytest.fixture(scope="module")
def panda():
    return load_robot("panda")


@pytest.fixture(scope="module")
def sim_exact(z1):
    return simulate(z1, 2.0, 500, 0.0, 3)


@pytest.fixture(scope="module")
def sim_noisy(z1):
    return simulate(z1, 2.0, 500, 0.05, 3)


# ------------------------------------------------------------------------------ excitation
def test_fourier_derivatives_match_finite_differences(z1):
    traj = FourierTrajectory.random(z1, 10.0, np.random.default_rng(0), harmonics=4, base_frequency=0.3)
    t = np.linspace(0.1, 3.0, 50)
    h = 1e-6
    q, v, a = traj.evaluate(t)
    qp, vp, _ = traj.evaluate(t + h)
    qm, vm, _ = traj.evaluate(t - h)
    np.testing.assert_allclose((qp - qm) / (2 * h), v, atol=1e-6)
    np.testing.assert_allclose((vp - vm) / (2 * h), a, atol=1e-5)
    q1, v1, a1 = traj.evaluate(1.234)
    assert q1.shape == (6,)
    # periodic
    np.testing.assert_allclose(traj.evaluate(0.7)[0], traj.evaluate(0.7 + traj.period)[0], atol=1e-10)


@pytest.mark.parametrize("name", ["z1", "panda", "so101"])
def test_random_trajectory_within_limits(name):
    robot = load_robot(name)
    traj = FourierTrajectory.random(robot, 20.0, np.random.default_rng(5))
    lo, hi = robot.position_limits()
    t = np.linspace(0, traj.period, 20001)
    q, v, _ = traj.evaluate(t)
    margin = 0.1 * (hi - lo)
    assert (q >= lo + margin - 1e-9).all() and (q <= hi - margin + 1e-9).all()
    assert (np.abs(v) <= robot.velocity_limits() + 1e-12).all()
    # the motion actually uses the room (one of the two constraints is active per joint)
    used = np.maximum((q.max(0) - q.min(0)) / (hi - lo - 2 * margin),
                      np.abs(v).max(0) / (0.8 * robot.velocity_limits()))
    assert (used > 0.99).all()
    assert traj.check_limits(robot, margin=0.1) == []


def test_trajectory_csv_round_trip(z1, tmp_path):
    traj = FourierTrajectory.random(z1, 5.0, np.random.default_rng(2), harmonics=3)
    p = traj.to_csv(tmp_path / "coeffs.csv")
    df = pd.read_csv(p)
    assert list(df.columns) == ["joint", "f_hz", "q0", "a1", "a2", "a3", "b1", "b2", "b3"]
    back = FourierTrajectory.from_csv(p)
    assert back.joint_names == z1.joint_names and back.f == traj.f
    np.testing.assert_array_equal(back.a, traj.a)
    np.testing.assert_array_equal(back.b, traj.b)
    np.testing.assert_array_equal(back.q0, traj.q0)


def test_trajectory_csv_errors(z1, tmp_path):
    traj = FourierTrajectory.random(z1, 5.0, np.random.default_rng(2), harmonics=2)
    df = traj.to_frame()
    df.drop(columns=["b2"]).to_csv(tmp_path / "a.csv", index=False)
    with pytest.raises(TrajectoryError, match="b2"):
        FourierTrajectory.from_csv(tmp_path / "a.csv")
    bad = df.copy()
    bad.loc[1, "f_hz"] = 0.5
    bad.to_csv(tmp_path / "b.csv", index=False)
    with pytest.raises(TrajectoryError, match="f_hz"):
        FourierTrajectory.from_csv(tmp_path / "b.csv")
    with pytest.raises(TrajectoryError, match="not found"):
        FourierTrajectory.from_csv(tmp_path / "none.csv")


# ------------------------------------------------------------------------------ truth
def test_truth_format(z1, sim_exact):
    truth = sim_exact.truth
    for key in ("robot", "friction_model", "friction_velocity_scale", "noise", "seed", "rate", "duration",
                "parameters"):
        assert key in truth
    assert truth["robot"] == "z1" and truth["friction_model"] == "coulomb-viscous"
    assert list(truth["parameters"]) == parameter_names(z1)
    assert list(truth["parameters"])[:2] == [f"{z1.body_names[0]}.m", f"{z1.body_names[0]}.mcx"]
    assert list(truth["parameters"])[-1] == "joint6.armature"
    json.dumps(truth, allow_nan=False)


def test_truth_is_physically_consistent_and_perturbed(z1, sim_exact):
    arr = truth_arrays(sim_exact.truth, z1)
    nominal = z1.nominal_inertial_parameters()
    ratio = arr["inertial"][:, 0] / nominal[:, 0]
    assert ((ratio >= 0.8) & (ratio <= 1.2)).all()
    assert not np.allclose(arr["inertial"], nominal)
    for p in arr["inertial"]:
        assert is_physically_consistent(p)
        inertia = pin.Inertia.FromDynamicParameters(p)
        ev = np.linalg.eigvalsh(np.array(inertia.inertia))
        assert ev.min() > 0
        assert ev[0] + ev[1] >= ev[2] * (1 - 1e-12)
    for key in ("fc", "fv", "armature"):
        assert (arr[key] > 0).all()


def test_consistency_checker_rejects_bad_inertia():
    bad = pin.Inertia(1.0, np.zeros(3), np.diag([0.1, 0.1, 0.5])).toDynamicParameters()  # 0.1+0.1 < 0.5
    assert not is_physically_consistent(bad)


def test_friction_and_armature_noticeable_not_dominant(z1, sim_exact):
    tl = sim_exact.truth_log
    arr = truth_arrays(sim_exact.truth, z1)
    a = sim_exact.truth_acceleration
    tf = friction_torque(tl.v, arr["fc"], arr["fv"], 0.05) + arr["armature"] * a
    share = np.sqrt((tf**2).mean(0)) / np.sqrt((tl.tau**2).mean(0))
    assert (share > 0.01).all() and (share < 0.5).all()


# ------------------------------------------------------------------------------ dynamics oracle
@pytest.mark.parametrize("which", ["z1", "panda"])
def test_inverse_dynamics_oracle(which, z1, panda, sim_exact):
    robot = z1 if which == "z1" else panda
    res = sim_exact if which == "z1" else simulate(panda, 1.0, 500, 0.0, 0)
    tl = res.truth_log
    arr = truth_arrays(res.truth, robot)
    model = truth_model(res.truth, robot, with_armature=False)
    data = model.createData()
    a = res.truth_acceleration
    pred = np.array([pin.rnea(model, data, tl.q[k], tl.v[k], a[k]) for k in range(tl.n_samples)])
    vs = res.truth["friction_velocity_scale"]
    pred += arr["armature"] * a + friction_torque(tl.v, arr["fc"], arr["fv"], vs)
    scale = np.abs(tl.tau).max(0)
    assert (np.abs(pred - tl.tau) / scale).max() < 1e-9
    # the nominal model (no friction) does NOT explain the data: the truth differs from the URDF
    nom = robot.model.copy()
    nd = nom.createData()
    pred0 = np.array([pin.rnea(nom, nd, tl.q[k], tl.v[k], a[k]) for k in range(tl.n_samples)])
    assert (np.abs(pred0 - tl.tau) / scale).max() > 1e-2


def test_integration_matches_reference_solver(z1, sim_exact):
    """ZOH: from (q_k, v_k) with tau_k held, an accurate independent ODE solve reaches (q_k+1, v_k+1)."""
    from scipy.integrate import solve_ivp

    tl = sim_exact.truth_log
    arr = truth_arrays(sim_exact.truth, z1)
    model = truth_model(sim_exact.truth, z1)
    data = model.createData()
    n = z1.n_joints

    def f(_, x, tau):
        q, v = x[:n], x[n:]
        tau_f = friction_torque(v, arr["fc"], arr["fv"], 0.05)
        return np.concatenate([v, pin.aba(model, data, q, v, tau - tau_f)])

    for k in (0, 250, 777, 999):
        sol = solve_ivp(f, (0, 1 / 500), np.concatenate([tl.q[k], tl.v[k]]), args=(tl.tau[k],),
                        rtol=1e-11, atol=1e-13, method="DOP853")
        np.testing.assert_allclose(sol.y[:n, -1], tl.q[k + 1], atol=1e-8)
        np.testing.assert_allclose(sol.y[n:, -1], tl.v[k + 1], atol=1e-6)


def test_tracking_and_limits(z1, sim_exact):
    tl = sim_exact.truth_log
    lo, hi = z1.position_limits()
    assert (tl.q >= lo).all() and (tl.q <= hi).all()
    assert np.abs(tl.q - sim_exact.desired["q"]).max() < 0.02
    assert (np.abs(tl.v) <= z1.velocity_limits()).all()
    assert tl.n_samples == 1001 and tl.t[-1] == pytest.approx(2.0)


# ------------------------------------------------------------------------------ noise and seeds
def test_noise_statistics(sim_exact, sim_noisy):
    assert sim_noisy.truth == {**sim_exact.truth, "noise": 0.05}  # same truth for the same seed
    np.testing.assert_array_equal(sim_noisy.truth_log.q, sim_exact.truth_log.q)
    for name in ("q", "v", "tau"):
        e = getattr(sim_noisy.log, name) - getattr(sim_noisy.truth_log, name)
        assert abs(e.mean()) < 4 * 0.05 / np.sqrt(e.size)
        assert e.std() == pytest.approx(0.05, rel=0.05)
    np.testing.assert_array_equal(sim_noisy.log.t, sim_noisy.truth_log.t)


def test_zero_noise_is_exact(sim_exact):
    for name in ("q", "v", "tau"):
        np.testing.assert_array_equal(getattr(sim_exact.log, name), getattr(sim_exact.truth_log, name))


def test_seed_determinism(z1, sim_exact):
    again = simulate(z1, 2.0, 500, 0.0, 3)
    np.testing.assert_array_equal(again.truth_log.tau, sim_exact.truth_log.tau)
    other = simulate(z1, 0.5, 500, 0.0, 4)
    assert other.truth["parameters"] != sim_exact.truth["parameters"]


def test_given_trajectory_is_tracked(z1):
    traj = FourierTrajectory.random(z1, 1.0, np.random.default_rng(11), harmonics=2, base_frequency=0.5)
    res = simulate(z1, 1.0, 500, 0.0, 0, trajectory=traj)
    assert res.trajectory is traj
    np.testing.assert_allclose(res.truth_log.q, traj.evaluate(res.truth_log.t)[0], atol=0.02)


def test_simulate_rejects_bad_input(z1):
    with pytest.raises(SimulationError, match="duration"):
        simulate(z1, -1.0, 500, 0.0, 0)
    with pytest.raises(SimulationError, match="noise"):
        simulate(z1, 1.0, 500, -0.1, 0)
    bad = FourierTrajectory(0.1, np.zeros(2), np.zeros((2, 1)), np.zeros((2, 1)), ("a", "b"))
    with pytest.raises(TrajectoryError, match="joints"):
        simulate(z1, 1.0, 500, 0.0, 0, trajectory=bad)
    with pytest.raises(SimulationError, match="continuous"):
        simulate(load_robot("tiago"), 1.0, 100, 0.0, 0)


# ------------------------------------------------------------------------------ CLI
def test_cli_simulate_writes_outputs(z1, tmp_path):
    out = tmp_path / "sim"
    r = CliRunner().invoke(main, ["simulate", "--robot", "z1", "--duration", "0.5", "--rate", "200",
                                  "--noise", "0.01", "--seed", "1", "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert sorted(os.listdir(out)) == ["log.parquet", "truth.json", "truth_trajectory.parquet"]
    assert sorted(os.listdir(tmp_path)) == ["sim"]  # no temporary left behind
    log = read_log(out / "log.parquet", z1)
    assert log.n_samples == 101 and log.tau_measured.all() and log.v is not None
    truth = json.loads((out / "truth.json").read_text())
    assert truth["seed"] == 1 and truth["noise"] == 0.01 and truth["robot"] == "z1"
    tt = pd.read_parquet(out / "truth_trajectory.parquet")
    assert {"t", "q.joint1", "v.joint1", "a.joint1", "tau.joint6"} <= set(tt.columns)
    assert (tt["q.joint2"].to_numpy() - log.q[:, 1]).std() == pytest.approx(0.01, rel=0.3)


def test_cli_simulate_with_trajectory_file(z1, tmp_path):
    traj = FourierTrajectory.random(z1, 1.0, np.random.default_rng(0), harmonics=2)
    traj.to_csv(tmp_path / "c.csv")
    out = tmp_path / "sim"
    r = CliRunner().invoke(main, ["simulate", "--robot", "z1", "--duration", "0.2", "--rate", "200",
                                  "--noise", "0", "--trajectory", str(tmp_path / "c.csv"), "--out", str(out)])
    assert r.exit_code == 0, r.output
    tt = pd.read_parquet(out / "truth_trajectory.parquet")
    planned = traj.evaluate(tt["t"].to_numpy())[0][:, 0]
    np.testing.assert_allclose(tt["q.joint1"].to_numpy(), planned, atol=1e-2)


@pytest.mark.parametrize("args,needle", [
    (["--robot", "nope"], "unknown robot"),
    (["--robot", "z1", "--duration", "-1"], "--duration"),
    (["--robot", "z1", "--rate", "0"], "--rate"),
    (["--robot", "z1", "--noise", "-0.5"], "--noise"),
    (["--robot", "z1", "--seed", "-3"], "seed"),
    (["--robot", "panda", "--trajectory", "TRAJ"], "joints"),
    (["--robot", "z1", "--trajectory", "MISSING"], "not found"),
])
def test_cli_simulate_bad_input(tmp_path, z1, args, needle):
    FourierTrajectory.random(z1, 1.0, np.random.default_rng(0), harmonics=1).to_csv(tmp_path / "z1.csv")
    args = [a.replace("TRAJ", str(tmp_path / "z1.csv")).replace("MISSING", str(tmp_path / "no.csv"))
            for a in args]
    out = tmp_path / "out"
    r = CliRunner().invoke(main, ["simulate", *args, "--duration" if "--duration" not in args else "--seed",
                                  "0.1" if "--duration" not in args else "0", "--out", str(out)])
    assert r.exit_code == 2, r.output
    assert needle in r.output
    assert not out.exists()
    assert sorted(os.listdir(tmp_path)) == ["z1.csv"]
