"""Online identification pieces (issue 13): the quality gate, the stream validator, the windowed-batch
estimator, the payload-change simulator."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fg_sysid.datasets.payload_change import payload_parameters, payload_truth, simulate_payload_change
from fg_sysid.datasets.simulate import simulate, truth_arrays
from fg_sysid.estimation.baseline import nominal_parameters
from fg_sysid.estimation.online_gate import QualityGate, relative_uncertainty
from fg_sysid.estimation.online_stream import StreamValidator
from fg_sysid.estimation.online_windowed import WindowedBatchEstimator
from fg_sysid.estimation.smoother import JointSmoother
from fg_sysid.robots import load_robot

RATE = 250.0
SG = 0.2  # s: hold-out SG window suited to noise 0.01 rad at 250 Hz


@pytest.fixture(scope="module")
def z1():
    return load_robot("z1")


@pytest.fixture(scope="module")
def sim(z1):
    return simulate(z1, 6.0, RATE, 0.01, 0)


@pytest.fixture(scope="module")
def fitted(z1, sim):
    """A smoother fit on the first 3 s (the candidate) and the samples after it (the hold-out)."""
    n = int(3.0 * RATE)
    res = JointSmoother(z1, max_iterations=10, reweight_rounds=1).fit(sim.log.slice(0, n)).result_
    return res, n


def truth_vector(sim, robot):
    ta = truth_arrays(sim.truth, robot)
    fr = np.column_stack([ta["fc"], ta["fv"]]).ravel()
    return np.concatenate([ta["inertial"].ravel(), fr, ta["armature"]])


def feed(gate, log, start, stop, step=25):
    events = []
    for k in range(start, stop, step):
        events += gate.observe(log.slice(k, min(k + step, stop)))
    return events


def test_score_is_the_heldout_prediction_error(z1, sim):
    """Oracle: the true parameters predict noise-free efforts almost exactly; the URDF does not."""
    gate = QualityGate(z1, "z1", sg_window=0.05)
    clean = sim.truth_log.slice(250, 750)
    assert gate.score(truth_vector(sim, z1), clean) < 0.01
    assert gate.score(nominal_parameters(z1), clean) > 0.05


def test_gate_publishes_a_better_candidate_then_rejects_a_worse_one(z1, sim, fitted):
    res, n = fitted
    t_c = float(sim.log.t[n - 1])
    gate = QualityGate(z1, "z1", margin=0.05, holdout=1.0, sg_window=SG)
    assert gate.offer(res, t_c) is None and not gate.idle
    assert feed(gate, sim.log, n, n + int(0.8 * RATE)) == []  # hold-out incomplete: no decision yet
    (ev,) = feed(gate, sim.log, n + int(0.8 * RATE), n + int(1.2 * RATE))
    assert ev.decision == "publish" and "URDF nominal" in ev.reason
    assert ev.candidate_score < 0.95 * ev.published_score
    assert gate.published["online"]["published_t"] == pytest.approx(ev.t)
    assert gate.published["layout"]["theta"] == pytest.approx(list(res.theta))
    # a worse candidate: θ moved away from the fit (masses and friction off)
    lay = res.layout
    p_bad = np.asarray(res.estimate, float).copy()
    p_bad[: 10 * lay.nb] *= 1.6
    theta_bad = lay.to_theta(p_bad)
    bad = dataclasses.replace(res, theta=theta_bad, estimate=lay.to_physical(theta_bad))
    t1 = float(sim.log.t[n + int(1.2 * RATE) - 1])
    assert gate.offer(bad, t1) is None
    (ev2,) = feed(gate, sim.log, n + int(1.2 * RATE), n + int(2.4 * RATE))
    assert ev2.decision == "reject" and ev2.reason.startswith("not better")
    assert ev2.candidate_score > ev2.published_score
    assert gate.published["online"]["published_t"] == pytest.approx(ev.t)  # the published model is kept
    frame = gate.events_frame()
    assert list(frame["decision"]) == ["publish", "reject"]


def test_gate_rejects_an_uncertain_candidate_at_once(z1, sim, fitted):
    res, n = fitted
    gate = QualityGate(z1, "z1", max_rel_std=0.3, sg_window=SG)
    u, _ = relative_uncertainty(res)
    assert u < 0.3
    vague = dataclasses.replace(res, std=np.asarray(res.std) * 50)
    ev = gate.offer(vague, 3.0)
    assert ev is not None and ev.decision == "reject" and "too uncertain" in ev.reason
    assert ev.rel_std == pytest.approx(50 * u) and ev.rel_std > 0.3
    assert gate.idle and gate.published is None


def test_relative_uncertainty_is_the_quantile_over_identifiable_parameters(fitted):
    res, _ = fitted
    table = res.identifiability
    ident = table["structural"].to_numpy() == "identifiable"
    est, std, prior = (np.asarray(x, float) for x in (res.estimate, res.std, res.prior_std))
    r = std / np.maximum(np.abs(est), prior)
    u, worst = relative_uncertainty(res, quantile=0.5)
    assert u == pytest.approx(np.median(r[ident]))
    u_max, worst_max = relative_uncertainty(res, quantile=1.0)
    assert u_max == pytest.approx(r[ident].max()) and worst == worst_max
    assert worst == res.names[int(np.argmax(np.where(ident, r, -np.inf)))]


def test_gate_rejects_bad_settings(z1):
    for kw in ({"margin": 1.0}, {"margin": -0.1}, {"max_rel_std": 0.0}, {"holdout": 0.0}, {"quantile": 0.0}):
        with pytest.raises(ValueError):
            QualityGate(z1, "z1", **kw)
    gate = QualityGate(z1, "z1")
    with pytest.raises(RuntimeError, match="SG filter"):
        gate.offer(object(), 1.0)


def test_stream_validator_names_bad_samples():
    n = 12
    t = np.arange(n) * 0.01
    t[5] = t[4]  # repeated
    t[7] = 0.02  # out of order
    t[9:] += 0.5  # gap before sample 9
    q = np.zeros((n, 2))
    q[3, 1] = np.nan
    tau = np.ones((n, 2))
    tau[:, 1] = np.nan  # joint 2 not measured: NaN there is fine
    val = StreamValidator(measured=[True, False])
    ok, events = val.check({"t": t, "q": q, "v": None, "tau": tau})
    kinds = {e.kind: e for e in events}
    assert set(kinds) == {"non-finite", "repeated", "out-of-order", "gap"}
    assert not ok[3] and not ok[5] and not ok[7] and ok[9]
    assert "non-finite q" in kinds["non-finite"].message and "t=0.03" in kinds["non-finite"].message
    assert "0.5" in kinds["gap"].message
    assert val.counts["accepted"] == n - 3


def test_windowed_estimator_runs_on_and_reports_bad_samples(z1, sim):
    est = WindowedBatchEstimator(z1, lag=1.0, knot_rate=50.0, forgetting=2.0, warmup=1.5,
                                 smoother_options={"max_iterations": 5})
    log = sim.log
    outs = []
    for k in range(0, int(2.5 * RATE), 25):
        chunk = {"t": log.t[k:k + 25], "q": log.q[k:k + 25].copy(), "v": log.v[k:k + 25],
                 "tau": log.tau[k:k + 25]}
        if k == 250:
            chunk["q"][3, 0] = np.nan
        outs.append(est.update(chunk))
    assert not outs[0].ready and outs[-1].ready
    assert sum(o.refit for o in outs) >= 1
    assert any("non-finite q" in m for o in outs for m in o.rejected)
    assert est.theta_.shape == (est.layout_.n,) and est.theta_cov_.shape == (est.layout_.n,) * 2
    assert outs[-1].states["q"].shape == (z1.n_joints,)
    assert est.result() is not None and est.stats_["samples"] == int(2.5 * RATE) - 1
    assert est._t[-1] - est._t[0] <= 2.0 + 1e-9  # the window forgets
    with pytest.raises(ValueError, match="lag"):
        WindowedBatchEstimator(z1, lag=0.0)


def test_payload_parameters_are_a_sphere_at_the_offset():
    p = payload_parameters(1.0, (0.05, 0.0, 0.1), 0.03)
    assert p[0] == pytest.approx(1.0)
    assert p[1:4] == pytest.approx([0.05, 0.0, 0.1])  # m·c
    i_sphere = 2 / 5 * 0.03**2
    assert p[4] == pytest.approx(i_sphere + 0.1**2)  # Ixx about the body origin (parallel axis)
    assert p[9] == pytest.approx(i_sphere + 0.05**2)  # Izz
    assert p[7] == pytest.approx(-0.05 * 0.1)  # Ixz


def test_payload_change_continues_the_simulators_closed_loop(z1):
    """Oracle: a negligible payload reproduces the simulator's run; 1 kg changes only t >= change."""
    base = simulate(z1, 2.0, RATE, 0.0, 3)
    tiny = simulate_payload_change(z1, 2.0, RATE, 0.0, 3, change_time=1.0, mass=1e-9)
    assert np.abs(tiny.truth_log.q - base.truth_log.q).max() < 1e-9
    assert np.abs(tiny.truth_log.tau - base.truth_log.tau).max() < 1e-6
    pc = simulate_payload_change(z1, 2.0, RATE, 0.01, 3, change_time=1.0, mass=1.0, offset=(0.05, 0, 0))
    kc = pc.change_index
    assert pc.change_time == pytest.approx(1.0) and kc == int(RATE)
    d = np.abs(pc.truth_log.tau - base.truth_log.tau)
    assert d[:kc].max() == 0 and d[kc:].max() > 0.5
    after = truth_arrays(pc.truth_after, z1)["inertial"][-1]
    before = truth_arrays(pc.truth_before, z1)["inertial"][-1]
    assert after[0] - before[0] == pytest.approx(1.0)
    assert pc.truth_after == payload_truth(pc.truth_before, z1, 1.0, (0.05, 0, 0))
