"""The fixed-lag online estimator on a floating base (`estimation.online_floating`, MuJoCo B1): its window
takes the batch floating-base smoother's Gauss–Newton step, its marginal prior is the exact Schur
complement, its end-of-log θ predicts held-out efforts like the batch fit, bad samples are rejected with a
message, and ``fg-sysid online --robot b1`` runs."""

import copy
import warnings

import numpy as np
import pytest
from online_helpers import feed, one_blas_thread  # noqa: F401 (one_blas_thread: autouse fixture)

from fg_sysid.datasets.mujoco_sim import draw_truth, simulate_stance, to_log
from fg_sysid.estimation.floating_smoother import FloatingBaseSmoother, full_configuration
from fg_sysid.estimation.online_floating import FloatingOnlineEstimator
from fg_sysid.floating_validation import floating_heldout_report
from fg_sysid.robots import load_robot

RATE = 500.0  # Hz: log rate of the MuJoCo sims
KNOTS = 100.0  # Hz: knot rate of the tests (stride 5: short, fast tests)
#: warm-up / batch options shared by the online and batch fits (a few iterations: fast tests)
OPTS = dict(contact_radius=0.02, use_forces=False, max_iterations=8, reweight_rounds=0)


@pytest.fixture(scope="module")
def b1():
    return load_robot("b1")


@pytest.fixture(scope="module")
def b1_logs(b1):
    """Training sway (2.4 s, σ = 0.005) and a held-out sway of another amplitude, same drawn truth."""
    drawn = draw_truth(b1, 0)
    common = dict(inertial=drawn["inertial"], friction=(drawn["fc"], drawn["fv"]), armature=drawn["armature"])
    train = simulate_stance(b1, 2.4, RATE, seed=0, noise=0.005, motion="sway", **common)
    held = simulate_stance(b1, 1.5, RATE, seed=1000, noise=0.005, motion="sway", sway_amplitude=0.14,
                           **common)
    return to_log(train), to_log(held)


def dense_schur(G, k):
    A, B, C = G[:k, :k], G[:k, k:], G[k:, k:]
    return C - B.T @ np.linalg.solve(A, B)


def batch_problem(est, log, robot):
    """The batch smoother's term set (`FloatingBaseSmoother._build_problem`) on the window's knots, its
    per-knot arrays built here from the log (not from the online buffers)."""
    c = est._chain
    t = c.t[c.o:c.o + c.n]
    idx = np.searchsorted(log.t, t)
    assert np.array_equal(log.t[idx], t)
    n, nv, iv = idx.size, robot.nv, robot.joint_index_v()
    sm = copy.copy(est._win)  # the window's θ coordinates (raw inertial parameters, the batch's stage 2)
    sm._qm = full_configuration(log, robot)[idx]
    sm._vm = np.zeros((n, nv))
    sm._vm[:, iv] = log.v[idx]
    sm._taum = np.zeros((n, nv))
    sm._taum[:, iv] = log.tau[idx]
    sm._tau_mask = np.ones((n, nv), bool)
    sm._h = np.diff(t)
    flags = np.stack([log.contacts[f][idx] for f in sm.feet_], axis=1)
    sm._flags, sm._cflags, sm._stance_pairs = flags, flags, flags[1:] & flags[:-1]
    sm._gyro, sm._acc, sm._fmeas = log.imu_gyro[idx], log.imu_acc[idx], None
    sm._impulse_slot = np.zeros_like(flags)
    sm._impacts, sm._smooth_interval, sm._force_mask = [], np.ones(n - 1), None
    sm._proj_whitener = None
    return sm._build_problem(sm.noise_)


# ---------------------------------------------------------------------------------------------- exactness
def test_window_without_marginalization_takes_the_batch_gauss_newton_step(b1, b1_logs):
    """Lag longer than the log: at a common linearization point the window's Gauss–Newton step (θ from the
    undamped top iteration, δx by back substitution) equals the batch floating smoother's O(N) step on the
    same knots (contacts, IMU, base pose, constraints as penalties at scale 1)."""
    from fg_sysid.estimation.linear_solver import solve_structured

    log = b1_logs[0]
    est = FloatingOnlineEstimator(b1, lag=10.0, knot_rate=KNOTS, warmup=0.8, smoother_options=OPTS)
    feed(est, log, stop=int(1.1 * RATE))
    c = est._chain
    assert c.marginalized == 0 and c.n > 30
    est.refine(iterations=1)
    c.relinearize(list(range(c.n)))  # every knot at the current (x̂, θ): δx = 0, θ̄_j = θ
    theta0 = c.theta.copy()
    x0 = c.states(slice(0, c.n))
    problem = batch_problem(est, log, b1)
    assert problem.constraints.scale == 1.0 and not problem.constraints.shift
    step = solve_structured(problem.linearize(x0, theta0), 0.0)
    T = c.theta_information()
    nt = c.nt
    p, J = c.pmap(theta0)
    assert c.pin is not None and c.pin.shape[0] > 0  # weak inertial directions held in the online solve
    c.pin_on = False  # the batch smoother's own cost: no pins
    r, Jr = c._theta_rows(theta0)
    H = J.T @ T[:nt, :nt] @ J + Jr.T @ Jr
    dtheta = -np.linalg.solve(H, J.T @ (T[:nt, :nt] @ p + T[:nt, -1]) + Jr.T @ r)
    scale = np.max(np.abs(step.dtheta))
    assert scale > 1e-6  # a real step
    assert np.max(np.abs(dtheta - step.dtheta)) < 1e-6 * max(scale, 1.0), np.max(np.abs(dtheta - step.dtheta))
    c.back_substitute(p=p + J @ dtheta)
    dx = c.dx[c.o:c.o + c.n]
    assert np.max(np.abs(dx - step.dx)) < 1e-6 * max(np.max(np.abs(step.dx)), 1.0)
    # the same cost at the linearization point (every row, including the live contact weights): at δx = 0
    # the window's cost is ½ [p; 1]ᵀ (Σ_j B_jᵀB_j + constants) [p; 1] + ½ ‖r_θ‖²
    sl = slice(c.o, c.o + c.n)
    Gp = np.einsum("kri,krj->ij", c.B[sl], c.B[sl])
    Gp[-1, -1] += c.kcc[sl].sum() + c.pcc[sl].sum()
    z = np.append(p, 1.0)
    assert 0.5 * float(z @ Gp @ z) + 0.5 * float(r @ r) == pytest.approx(problem.cost(x0, theta0), rel=1e-8)


def test_marginal_prior_is_the_dense_schur_complement(b1, b1_logs):
    est = FloatingOnlineEstimator(b1, lag=0.1, knot_rate=KNOTS, warmup=0.8, smoother_options=OPTS)
    feed(est, b1_logs[0], stop=int(1.0 * RATE))
    c = est._chain
    assert c.marginalized > 0 and c.nx == 3 * b1.nv + 12  # (δq, δv, δa, λ of four feet)
    G = c.dense_system()
    expected = dense_schur(G, c.nx)
    c.marginalize_oldest()
    got = c.dense_system()
    err = np.max(np.abs(got - expected)) / np.max(np.abs(expected))
    assert err < 1e-9, err
    # the cached elimination equals the dense Schur complement over every state of the window
    cached = c.theta_information()
    dense = dense_schur(c.dense_system(), c.n * c.nx)
    assert np.max(np.abs(cached - dense)) / np.max(np.abs(dense)) < 1e-9


# ---------------------------------------------------------------------------------------------- accuracy
def test_online_heldout_error_within_batch(b1, b1_logs):
    """End-of-log θ (0.5 s lag, 0.8 s warm-up) on a 2.4 s MuJoCo sway vs the batch floating smoother on the
    whole log (same options), on a held-out sway of another amplitude. Out of class (MuJoCo soft contacts,
    dry friction, rolling feet vs the rigid model). Measured (relative RMSE): online 0.1059 (1.09× the
    batch), batch 0.0970, warm-up fit alone 0.1045, nominal URDF 0.1205; stated factor: ≤ 1.15× the batch
    and better than the URDF. (Streaming without the weak-direction pins gave 0.0966 here but diverges with
    200 Hz knots, `FloatingOnlineEstimator._update_pins`.)"""
    from fg_sysid.validation import model_spec, nominal_model

    train, held = b1_logs
    est = FloatingOnlineEstimator(b1, lag=0.5, knot_rate=KNOTS, warmup=0.8, smoother_options=OPTS)
    out = feed(est, train)
    assert out.ready and est._chain.marginalized > 100
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sm = FloatingBaseSmoother(b1, knot_stride=5, **OPTS).fit(train)

    def heldout(model):
        rep = floating_heldout_report(model, b1, held, window_s=0.05, contact_radius=0.02, mode="forces")
        return rep["overall"]

    res = est.result()
    assert res.layout.inertia.name == sm.result_.layout.inertia.name  # the batch's parameterization
    assert res.extras["online"]["weak_directions_at_prior"] > 0
    online, batch = heldout(res), heldout(sm.result_)
    warm, nominal = heldout(est.smoother_.result_), heldout(nominal_model(b1))
    assert online <= 1.15 * batch, (online, batch)
    assert online < 0.93 * nominal and warm < nominal, (online, warm, nominal)
    spec = model_spec(res, b1, "b1")  # the model.json writer takes the online result
    assert spec["method"] == "online" and heldout(spec) == pytest.approx(online, rel=1e-9)


# ---------------------------------------------------------------------------------------------- bad input
def test_bad_samples_are_rejected_and_the_run_continues(b1, b1_logs):
    from fg_sysid.estimation.online import OnlineEstimator
    from fg_sysid.estimation.online_floating import FloatingStream
    from fg_sysid.estimation.online_replay import make_estimator
    from fg_sysid.estimation.smoother import EstimationError

    log = b1_logs[0]
    stream = FloatingStream.from_log(log, b1)
    est = make_estimator("auto", b1, lag=0.3, knot_rate=KNOTS, forgetting=None, warmup=0.8,
                         smoother_options=OPTS)
    assert isinstance(est, FloatingOnlineEstimator) and est.kind_ == "fixed-lag"
    out = est.update(stream.chunk(0, 5))
    assert not out.ready and out.theta is None
    with pytest.raises(EstimationError, match="warm-up"):
        est.result()
    for i in range(5, 450, 5):
        est.update(stream.chunk(i, i + 5))
    assert est.ready
    theta = est.theta_.copy()

    def bad(i, key, value, foot=None):
        s = stream.chunk(i, i + 1)
        if foot is None:
            s[key] = np.array(s[key], float)
            s[key][0, 0] = value
        else:
            s[key] = dict(s[key])
            s[key][foot] = np.array([value])
        return est.update(s)

    t = log.t
    out = bad(450, "base_pos", np.nan)
    assert out.rejected == [f"sample at t={t[450]:.6f} s rejected: NaN/inf in base_pos[x]"]
    assert np.array_equal(out.theta, theta)  # nothing published is lost
    out = bad(451, "imu_gyro", np.inf)
    assert out.rejected == [f"sample at t={t[451]:.6f} s rejected: NaN/inf in imu_gyro[x]"]
    out = bad(452, "contacts", 0.5, foot="RL_foot")
    assert out.rejected == [f"sample at t={t[452]:.6f} s rejected: contact flag of RL_foot is 0.5, not 0 "
                            "or 1"]
    out = est.update(stream.chunk(100, 101))
    assert "out of order" in out.rejected[0] and f"t={t[100]:.6f}" in out.rejected[0]
    # a good chunk with one NaN effort: only that sample goes, the run continues
    s = stream.chunk(453, 463)
    s["tau"] = np.array(s["tau"])
    s["tau"][3, 2] = np.nan
    out = est.update(s)
    assert out.rejected == [f"sample at t={t[456]:.6f} s rejected: NaN/inf in tau[{b1.joint_names[2]}]"]
    assert out.states["t"].size >= 1 and t[456] not in out.states["t"] and np.all(np.isfinite(out.theta))
    out = est.update(stream.chunk(463, 600))
    assert out.ready and t[590] < out.t <= t[599] and np.all(np.isfinite(out.theta))
    # columns that cannot be used at all: clear errors naming the culprit
    s = stream.chunk(600, 601)
    s["contacts"] = {k: x for k, x in s["contacts"].items() if k != "FR_foot"}
    with pytest.raises(ValueError, match="no contact flags for \\['FR_foot'\\]"):
        est.update(s)
    s = stream.chunk(600, 601)
    del s["base_pos"], s["base_quat"]
    with pytest.raises(ValueError, match="without \\['base_pos', 'base_quat'\\]"):
        est.update(s)
    with pytest.raises(ValueError, match="only the fixed-lag estimator supports floating bases"):
        make_estimator("windowed", b1, lag=0.5, knot_rate=KNOTS, forgetting=None, warmup=1.0)
    with pytest.raises(ValueError, match="impacts"):
        FloatingOnlineEstimator(b1, smoother_options={"impacts": True})
    with pytest.raises(EstimationError, match="FloatingOnlineEstimator"):
        OnlineEstimator(b1)
    with pytest.raises(EstimationError, match="fixed base"):
        FloatingOnlineEstimator(load_robot("z1"))


# ---------------------------------------------------------------------------------------------- CLI
def test_cli_online_b1(b1, b1_logs, tmp_path):
    import json

    import pandas as pd
    from click.testing import CliRunner

    from fg_sysid.cli import main
    from fg_sysid.datasets.io import log_to_frame, write_log

    path = write_log(b1_logs[0].slice(0, int(1.6 * RATE)), tmp_path / "b1.parquet")
    out = tmp_path / "online"
    r = CliRunner().invoke(main, ["online", str(path), "--robot", "b1", "--lag", "0.5", "--warmup", "0.8",
                                  "--knot-rate", "100", "--holdout", "0.3", "--max-rel-std", "100",
                                  "--out", str(out)])
    assert r.exit_code == 0, r.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["estimator"] == "fixed-lag" and summary["counts"]["bad_samples"] == 0
    traj = pd.read_parquet(out / "theta_trajectory.parquet")
    assert len(traj) >= 5 and traj["t"].iloc[-1] > 1.4 and np.isfinite(traj["FL_calf.m"]).all()
    ev = pd.read_csv(out / "events.csv")
    scored = ev[ev["decision"].isin(["publish", "reject"])]
    assert len(scored) and np.isfinite(scored["candidate_score"]).any()  # hold-out scored with the contacts
    assert not scored["reason"].str.contains("cannot score").any()
    # a floating-base log without contact flags: one error line, exit 2, no output
    df = log_to_frame(b1_logs[0].slice(0, 100))
    df.drop(columns=["contact.FR_foot"]).to_csv(tmp_path / "nc.csv", index=False)
    r = CliRunner().invoke(main, ["online", str(tmp_path / "nc.csv"), "--robot", "b1", "--out",
                                  str(tmp_path / "o2")])
    assert r.exit_code == 2 and "contact.FR_foot" in r.output and not (tmp_path / "o2").exists()
