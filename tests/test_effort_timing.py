"""Effort timing (issues 11 + 9): held efforts re-timed to the knots, a delay chosen by blocked CV."""

from __future__ import annotations

import dataclasses
import json
import warnings

import numpy as np
import pinocchio as pin
import pytest
from click.testing import CliRunner

from fg_sysid.cli import main
from fg_sysid.datasets.io import write_log
from fg_sysid.datasets.simulate import simulate, truth_arrays
from fg_sysid.estimation.baseline import LeastSquaresSG
from fg_sysid.estimation.effort_timing import choose_delay_cv, effort_delay, retime_efforts
from fg_sysid.estimation.smoother import EstimationError, JointSmoother
from fg_sysid.robots import load_robot


@pytest.fixture(scope="module")
def pendulum():
    return load_robot("double_pendulum")


@pytest.fixture(scope="module")
def held_logs(pendulum):
    """In-class RK4 logs at 100 Hz whose efforts are held zero-order over the sample period."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [simulate(pendulum, 4.0, 100, 0.001, seed) for seed in (0, 1)]


def test_retime_efforts_is_the_interpolated_sequence():
    t = np.arange(6) * 0.002
    tau = np.c_[np.arange(6.0), 10 * np.arange(6.0)]
    tau[3, 1] = np.nan
    half = retime_efforts(t, tau, 0.001)  # hold over the sample period: ½(τ[k−1] + τ[k])
    assert np.allclose(half[1:, 0], 0.5 * (tau[:-1, 0] + tau[1:, 0]))
    assert half[0, 0] == tau[0, 0]  # before the log: the first sample
    assert np.isnan(half[3, 1]) and np.isnan(half[4, 1]) and half[5, 1] == 45.0  # NaN stays unmeasured
    quarter = retime_efforts(t, tau, 0.0005)
    assert np.allclose(quarter[1:, 0], 0.75 * tau[1:, 0] + 0.25 * tau[:-1, 0])
    lag = retime_efforts(t, tau, -0.002)  # effort lags the motion by one sample
    assert np.allclose(lag[:-1, 0], tau[1:, 0])
    assert np.array_equal(retime_efforts(t, tau, 0.0), tau, equal_nan=True)
    assert effort_delay("hold", t) == pytest.approx(0.001)
    assert effort_delay("hold", t, 0.001) == pytest.approx(0.0005)
    assert effort_delay("sample", t) == 0.0
    with pytest.raises(ValueError, match="hold period"):
        effort_delay("hold", t, -1.0)
    with pytest.raises(ValueError, match="effort timing"):
        effort_delay("late", t)


def test_zoh_identity_holds_for_the_retimed_efforts(pendulum, held_logs):
    """Oracle: along the noise-free held log, ID(q_k, v_k, ā_k) with ā_k the mean of the one-sided
    accelerations equals ½(τ̂_{k−1} + τ̂_k) to round-off, while the raw τ̂_k is off by half the jump."""
    res = held_logs[0]
    tr = truth_arrays(res.truth, pendulum)
    model = pendulum.pinocchio_model_with(tr["inertial"])
    model.armature = np.asarray(tr["armature"], float)
    data = model.createData()
    log = res.truth_log
    fc, fv = np.asarray(tr["fc"]), np.asarray(tr["fv"])
    vs = res.truth["friction"]["velocity_scale"]
    retimed = retime_efforts(log.t, log.tau, 0.5 / 100)
    err_raw, err_ret = [], []
    for k in range(1, 200):
        q, v = log.q[k], log.v[k]
        a_plus = res.truth_acceleration[k]
        a_minus = pin.aba(model, data, q, v, log.tau[k - 1] - fc * np.tanh(v / vs) - fv * v)
        tau_mid = pin.rnea(model, data, q, v, 0.5 * (a_plus + a_minus)) + fc * np.tanh(v / vs) + fv * v
        err_raw.append(tau_mid - log.tau[k])
        err_ret.append(tau_mid - retimed[k])
    scale = np.sqrt(np.mean(log.tau ** 2))
    assert np.max(np.abs(err_ret)) < 1e-8 * scale
    assert np.max(np.abs(err_raw)) > 1e-3 * scale


def test_hold_removes_the_viscous_friction_bias(pendulum, held_logs):
    """On held-effort logs (in-class dynamics, 100 Hz ZOH, σ = 0.001) the raw efforts bias some joint's fv
    by > 5 %; re-timed (effort_timing="hold") every fv is within 3 %."""
    for res in held_logs:
        truth = res.truth["parameters"]
        worst = {}
        for timing in ("sample", "hold"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                sm = JointSmoother(pendulum, friction="coulomb-viscous", effort_timing=timing).fit(res.log)
            est = dict(zip(sm.result_.names, sm.result_.estimate, strict=True))
            worst[timing] = max(abs(est[n] / truth[n] - 1) for n in truth if n.endswith(".fv"))
            if timing == "hold":
                assert sm.effort_timing_["delay_s"] == pytest.approx(0.005)
                assert "re-timed" in sm.result_.noise["source"]["tau_timing"]
        assert worst["sample"] > 0.05, worst
        assert worst["hold"] < 0.03, worst


def test_cv_recovers_a_known_delay(pendulum, held_logs):
    """Blocked CV of the shifted-state regression finds the hold's half sample (+0.5 h) on the held log
    and −0.5 h on the same log with the efforts delayed by one sample (a drive whose effort lags)."""
    log = held_logs[0].log
    h = 0.01
    filt = LeastSquaresSG().fit(log, pendulum).result_.filter  # the SG window the smoother's CV uses
    w, o = filt["window_s"], filt["polyorder"]
    d, table = choose_delay_cv(pendulum, log, w, o)
    assert d == pytest.approx(0.5 * h), table
    lagged = dataclasses.replace(log, tau=np.vstack([log.tau[:1], log.tau[:-1]]))
    d_lag, table_lag = choose_delay_cv(pendulum, lagged, w, o)
    assert d_lag == pytest.approx(-0.5 * h), table_lag
    # efforts already at the sample instants (the held log re-timed): no delay to find, d = 0 is kept
    at_samples = dataclasses.replace(log, tau=retime_efforts(log.t, log.tau, 0.5 * h))
    d0, table0 = choose_delay_cv(pendulum, at_samples, w, o)
    assert d0 == 0.0, table0
    scores = {r["fraction"]: r["score"] for r in table}
    assert scores[0.5] < 0.9 * scores[0.0]  # the choice is clear, not a tie


def test_smoother_cv_mode_and_bad_input(pendulum, held_logs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sm = JointSmoother(pendulum, friction="coulomb-viscous", effort_timing="cv",
                           max_iterations=3).fit(held_logs[0].log)
    assert sm.effort_timing_["mode"] == "cv"
    assert sm.effort_timing_["delay_samples"] == pytest.approx(0.5)
    assert len(sm.effort_timing_["cv"]) >= 5
    with pytest.raises(ValueError, match="effort_timing"):
        JointSmoother(pendulum, effort_timing="late").fit(held_logs[0].log)
    looped = load_robot("fourbar")
    with pytest.raises(EstimationError, match="open chain"):
        from fg_sysid.estimation import effort_timing

        class Fake:
            robot, effort_timing = looped, "cv"

        effort_timing.apply(Fake(), held_logs[0].log, np.arange(3))


def test_cli_effort_timing(tmp_path, held_logs):
    write_log(held_logs[0].log, tmp_path / "log.csv")
    runner = CliRunner()
    r = runner.invoke(main, ["identify", "--help"])
    assert r.exit_code == 0 and "--effort-timing" in r.output and "--effort-hold-period" in r.output
    bad = runner.invoke(main, ["identify", str(tmp_path / "log.csv"), "--robot", "double_pendulum", "--out",
                               str(tmp_path / "bad"), "--effort-hold-period", "0.01"])
    assert bad.exit_code == 2 and "--effort-hold-period applies with --effort-timing hold" in bad.output
    assert not (tmp_path / "bad").exists()
    bad = runner.invoke(main, ["identify", str(tmp_path / "log.csv"), "--robot", "double_pendulum", "--out",
                               str(tmp_path / "bad"), "--effort-timing", "hold",
                               "--effort-hold-period", "-1"])
    assert bad.exit_code == 2 and "positive" in bad.output
    bad = runner.invoke(main, ["identify", str(tmp_path / "log.csv"), "--robot", "double_pendulum", "--out",
                               str(tmp_path / "bad"), "--effort-timing", "hold", "--method", "ls-sg"])
    assert bad.exit_code == 2 and "applies to the smoother" in bad.output
    r = runner.invoke(main, ["identify", str(tmp_path / "log.csv"), "--robot", "double_pendulum", "--out",
                             str(tmp_path / "fit"), "--effort-timing", "hold",
                             "--friction", "coulomb-viscous", "--quiet"])
    assert r.exit_code == 0, r.output
    summary = json.loads((tmp_path / "fit" / "summary.json").read_text())
    assert "leads the motion by 5 ms" in json.dumps(summary)


def test_apply_on_a_floating_layout(held_logs):
    """The hook writes the re-timed efforts into the actuated columns of a free-flyer's (N, 6 + n) rows
    only (the base rows stay untouched) at the knots it is given (a knot stride of 2 here)."""
    from types import SimpleNamespace

    from fg_sysid.estimation import effort_timing

    b1 = load_robot("b1")
    log = held_logs[0].log
    n = b1.n_joints
    tau = np.tile(log.tau[:, :1], (1, n)) * np.arange(1, n + 1)
    tau[:, 3] = np.nan  # an unmeasured joint
    flog = dataclasses.replace(log, q=np.zeros((log.n_samples, n)), v=None, tau=tau,
                               joint_names=tuple(b1.joint_names))
    idx = np.arange(0, log.n_samples, 2)
    iv = b1.joint_index_v()
    sm = SimpleNamespace(robot=b1, effort_timing="hold", effort_hold_period=None,
                         noise_=SimpleNamespace(source={}),
                         _taum=np.full((idx.size, b1.nv), -7.0), _tau_mask=np.ones((idx.size, b1.nv), bool))
    rec = effort_timing.apply(sm, flog, idx)
    assert rec["delay_samples"] == pytest.approx(0.5)
    expect = 0.5 * (tau[np.maximum(idx - 1, 0)] + tau[idx])
    ok = np.isfinite(expect)
    assert np.allclose(sm._taum[:, iv][ok], expect[ok])
    assert not sm._tau_mask[:, iv[3]].any() and np.all(sm._taum[:, iv[3]] == 0.0)
    assert np.all(sm._taum[:, :6] == -7.0) and sm._tau_mask[:, :6].all()
    assert "tau_timing" in sm.noise_.source
