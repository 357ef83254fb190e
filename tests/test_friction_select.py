"""friction="auto" (issue 9 item 3): the friction law chosen by blocked cross-validation on the training log
(`fg_sysid.estimation.friction_select`), the Stribeck6 start, and the CLI default."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from click.testing import CliRunner
from jacobian_check import central_diff

from fg_sysid.cli import main
from fg_sysid.datasets.io import write_log
from fg_sysid.datasets.simulate import Effects, simulate
from fg_sysid.estimation import friction_select as fs
from fg_sysid.factors.inverse_dynamics import InverseDynamicsResidual
from fg_sysid.layout import ParameterLayout
from fg_sysid.robots import load_robot

#: SG filter of the selection tests: about what `LeastSquaresSG`'s CV picks on these logs (0.39-0.55 s)
WINDOW_S, ORDER = 0.4, 3
STRIBECK = Effects(friction="stribeck", stribeck_ratio=1.5, stribeck_velocity=0.1)


@pytest.fixture(scope="module")
def z1_logs():
    """10 s at 1 kHz, σ = 0.01: the in-class truth and the Stribeck truth (fs = 1.5 fc, v_st = 0.1 rad/s,
    vs = 0.01 rad/s) of the same robot and excitation."""
    robot = load_robot("z1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return robot, {"in-class": simulate(robot, 10.0, 1000.0, 0.01, 0).log,
                       "stribeck": simulate(robot, 10.0, 1000.0, 0.01, 0, friction_velocity_scale=0.01,
                                            effects=STRIBECK).log}


def test_auto_picks_stribeck_only_when_it_pays(z1_logs):
    robot, logs = z1_logs
    sel = {k: fs.select_friction(robot, log, WINDOW_S, ORDER) for k, log in logs.items()}
    assert sel["in-class"].chosen == "coulomb-viscous-scale", sel["in-class"].reason
    assert sel["stribeck"].chosen == "stribeck6", sel["stribeck"].reason
    gains = 1 - np.array(sel["stribeck"].fold_scores["stribeck6"]) / sel["stribeck"].fold_scores[
        "coulomb-viscous-scale"]
    assert gains.min() > 0 and gains.mean() >= fs.MARGIN
    # the Stribeck regression finds the truth's shapes (vs = 0.01, v_st = 0.1 rad/s) on most joints
    shapes = np.array(list(sel["stribeck"].shapes["stribeck6"].values()))
    assert np.sum(shapes[:, 0] == 0.01) >= 4 and np.sum(shapes[:, 1] == 0.1) >= 4, shapes
    d = sel["stribeck"].as_dict()
    assert d["chosen"] == "stribeck6" and set(d["cv_scores"]) == set(fs.CANDIDATES)
    assert len(d["relative_gain_per_fold"]) == d["folds"] == 5 and "pays" in d["reason"]
    assert d["cpu_seconds"] < 10


def test_cv_score_equals_explicit_refits(z1_logs):
    """The Gram bookkeeping (segments, guard gaps, per-joint weights, ridge) against explicit refits:
    per fold, the stacked weighted design of the training rows solved by lstsq, residuals on the held-out
    rows against the raw effort."""
    robot, logs = z1_logs
    reg = fs._Regression(robot, logs["stribeck"], 201, 3, 5, 1500)
    rng = np.random.default_rng(0)
    grid = fs._shapes("stribeck6")
    blocks = [reg.friction_blocks("stribeck6", j, grid[rng.integers(len(grid))]) for j in range(reg.m)]
    shapes = [None] * reg.m
    for j in range(reg.m):  # recover each joint's shape from its block (the cache key)
        for s in grid:
            if np.allclose(reg.friction_blocks("stribeck6", j, s)[1], blocks[j][1]):
                shapes[j] = s
    score, folds = reg.score(blocks)
    k = 3
    nb = reg.nbase
    ref = []
    for tr, he in zip(reg.train, reg.held, strict=True):
        def design(segs, j):
            r = np.concatenate([reg.seg_rows[s] for s in segs])
            A = np.zeros((r.size, nb + reg.m * k))
            A[:, :nb] = reg.Y[j, r]
            A[:, nb + j * k: nb + (j + 1) * k] = fs._basis("stribeck6", reg.v[j, r], shapes[j])
            return A * reg.ok[j, r][:, None], r

        rows = [design(tr, j) for j in range(reg.m)]
        A = np.vstack([a * np.sqrt(reg.w[j]) for j, (a, _) in enumerate(rows)])
        b = np.concatenate([reg.b_fit[j, r] * np.sqrt(reg.w[j]) for j, (_, r) in enumerate(rows)])
        x0 = np.concatenate([reg.x0, np.zeros(reg.m * k)])
        d = np.linalg.norm(A, axis=0)
        d = np.where(d > 1e-12 * d.max(), d, 1.0)
        Aa = np.vstack([A / d, np.sqrt(fs.RIDGE) * np.eye(A.shape[1])])
        ba = np.concatenate([b, np.sqrt(fs.RIDGE) * d * x0])
        x = np.linalg.lstsq(Aa, ba, rcond=None)[0] / d
        rmse = []
        for j in range(reg.m):
            a, r = design(he, j)
            e = (a @ x - reg.b_raw[j, r]) * reg.ok[j, r]
            rmse.append(np.sqrt(np.sum(e ** 2) / reg.ok[j, r].sum()))
        ref.append(np.sqrt(np.mean((np.array(rmse) / reg.scale) ** 2)))
    np.testing.assert_allclose(folds, ref, rtol=1e-6)
    assert score == pytest.approx(np.mean(ref), rel=1e-6)


def _filtered_noise_std(noise, window, order, deriv, dt):
    """Empirical std of the regression's SG filter applied to the noise itself (rows away from the ends)."""
    from fg_sysid.estimation.baseline import _sg

    h = window // 2
    return np.std(_sg(noise, window, order, deriv, dt)[h:-h], axis=0)


@pytest.mark.parametrize("with_v", [True, False])
def test_velocity_noise_is_the_filtered_noise(with_v):
    """`FrictionSelection.velocity_noise` (the regression's velocity resolution) equals the std of its SG
    filter applied to the log's own noise — logged velocities (short window) or q's derivative (CV window)."""
    import dataclasses

    robot = load_robot("z1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sim = simulate(robot, 10.0, 1000.0, 0.01, 0)
    log = sim.log if with_v else dataclasses.replace(sim.log, v=None)
    sel = fs.select_friction(robot, log, WINDOW_S, ORDER)
    got = np.array(list(sel.velocity_noise.values()))
    dt = 1e-3
    if with_v:  # 50 ms window on the logged velocities
        ref = _filtered_noise_std(sim.log.v - sim.truth_log.v, 51, ORDER, 0, dt)
        np.testing.assert_allclose(got, ref, rtol=0.1)
    else:  # the 401-sample derivative window leaves ~25 independent values in 10 s: 200 s of the noise law
        white = np.random.default_rng(0).normal(0.0, 0.01, (200_000, 1))
        ref = _filtered_noise_std(white, 401, ORDER, 1, dt)
        np.testing.assert_allclose(got, ref[0], rtol=0.1)
    # logged velocities at σ_v = 0.01 rad/s are sharp after 50 ms (≈ 0.002 rad/s); q's derivative at
    # σ_q = 0.01 rad over the 0.4 s window is not (≈ 0.011 rad/s > BLIND_VELOCITY)
    assert sel.blurred is (not with_v) and sel.as_dict()["blurred_velocities"] is sel.blurred


def test_blurred_velocities_choose_the_nesting_law(z1_logs):
    """σ = 0.1 (velocity noise 0.1 rad/s): the regression's velocities are noisier than the Stribeck prior's
    peak width, and `stribeck6` (which nests the tanh law) is chosen although the truth has no peak (the CV
    cannot be trusted to say; `test_decide_rules` checks the "unless worse" branch)."""
    robot, _ = z1_logs
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        log = simulate(robot, 10.0, 1000.0, 0.1, 0).log  # in-class truth: no Stribeck peak at all
    sel = fs.select_friction(robot, log, WINDOW_S, ORDER)
    vn = np.median(list(sel.velocity_noise.values()))
    assert vn > fs.BLIND_VELOCITY and sel.blurred, vn
    assert sel.chosen == "stribeck6" and "blurred" in sel.reason, sel.reason


def test_decide_rules():
    """The two rules of `decide` on fixed fold scores: sharp velocities need a gain in every fold and on
    average; blurred velocities keep the nesting law unless it is worse on average by more than the margin."""
    cands, m = fs.CANDIDATES, fs.MARGIN
    sharp, blurred = 0.1 * fs.BLIND_VELOCITY, 2 * fs.BLIND_VELOCITY

    def scores(gains):
        return {cands[0]: [1.0] * len(gains), cands[1]: [1.0 - g for g in gains]}

    assert fs.decide(scores([2 * m] * 5), cands, m, sharp)[0] == "stribeck6"
    assert fs.decide(scores([4 * m, 4 * m, 4 * m, 4 * m, -m / 10]), cands, m, sharp)[0] == cands[0]  # a fold
    assert fs.decide(scores([m / 2] * 5), cands, m, sharp)[0] == cands[0]  # below the margin
    assert fs.decide(scores([-m / 2] * 5), cands, m, blurred)[0] == "stribeck6"  # noise: the nesting law
    chosen, reason = fs.decide(scores([-2 * m] * 5), cands, m, blurred)  # clearly worse: the simple law
    assert chosen == cands[0] and "blurred" in reason
    assert fs.decide({cands[0]: [1.0]}, cands[:1], m, blurred)[0] == cands[0]


def test_stribeck_start_is_a_valid_stribeck6_vector(z1_logs):
    robot, logs = z1_logs
    sel = fs.select_friction(robot, logs["stribeck"], WINDOW_S, ORDER, candidates=("stribeck6",))
    assert sel.chosen == "stribeck6"
    layout = ParameterLayout.create(robot, friction="stribeck6")
    p = fs.stribeck_physical(sel, robot, layout)
    assert p.size == layout.n and np.all(np.isfinite(p))
    g = p[layout.s_friction].reshape(layout.nj, 6)
    assert np.all(g > 0) and np.all(g[:, 1] > g[:, 2])  # eq. 57: g1 > g2
    theta, _ = layout.to_theta_projected(p, layout.to_physical(layout.prior()[0]))
    np.testing.assert_allclose(layout.to_physical(theta)[layout.s_friction], p[layout.s_friction], rtol=1e-9)


def test_stribeck6_inverse_dynamics_jacobians():
    """Inverse-dynamics residual with the Stribeck6 law (paper 004 eqs. 56-60): Jacobians in v and θ
    against central differences at velocities inside the Stribeck peak (|v| <= 0.05 rad/s)."""
    robot = load_robot("z1")
    layout = ParameterLayout.create(robot, friction="stribeck6")
    rng = np.random.default_rng(3)
    theta0, std = layout.prior()
    theta = theta0 + 0.2 * std * rng.standard_normal(layout.n)
    res = InverseDynamicsResidual(layout)
    q = rng.uniform(-1, 1, size=(3, robot.nq))
    v = rng.uniform(-0.05, 0.05, size=(3, robot.nv))
    a = rng.uniform(-3, 3, size=(3, robot.nv))
    tau = rng.standard_normal(v.shape)
    lin = res.evaluate(q, v, a, tau, theta)
    for k in range(3):
        def f_v(x, k=k):
            return res.evaluate(q[k:k + 1], x[None], a[k:k + 1], tau[k:k + 1], theta, jacobians=False).r[0]

        def f_t(x, k=k):
            return res.evaluate(q[k:k + 1], v[k:k + 1], a[k:k + 1], tau[k:k + 1], x, jacobians=False).r[0]

        scale = 1 + np.abs(lin.r[k]).max()
        np.testing.assert_allclose(lin.Jv[k], central_diff(f_v, v[k], eps=1e-7), atol=2e-5 * scale, rtol=1e-4)
        np.testing.assert_allclose(lin.Jtheta[k], central_diff(f_t, theta), atol=2e-6 * scale, rtol=1e-5)


def test_cli_auto_option_and_errors(tmp_path):
    robot = load_robot("double_pendulum")
    write_log(simulate(robot, 2.0, 200.0, 0.01, 0).log, tmp_path / "train.parquet")
    run = CliRunner()
    out = tmp_path / "fit"
    r = run.invoke(main, ["identify", str(tmp_path / "train.parquet"), "--robot", "double_pendulum", "--out",
                          str(out), "--quiet", "--friction", "auto"])
    assert r.exit_code == 0, r.output
    s = json.loads((out / "summary.json").read_text())
    sel = s["friction_selection"]
    assert s["friction_model"] == sel["chosen"] and sel["regression_choice"] in fs.CANDIDATES
    if sel["regression_choice"] == "stribeck6":
        assert sel["chosen"] == "stribeck6"
    else:  # the lead form of the Coulomb–viscous family, or stribeck6 where the accelerations absorbed noise
        dropped = sel["chosen"] == "stribeck6" and "absorbed" in sel["reason"]
        assert sel["chosen"] == fs.LEAD_LAW or dropped
    assert set(sel["cv_scores"]) == set(fs.CANDIDATES) and sel["reason"]
    spec = json.loads((out / "model.json").read_text())
    assert spec["layout"]["friction_model"] == sel["chosen"]
    for extra, needle in ((("--method", "ls-sg"), "--friction auto"),):
        bad = tmp_path / "bad"
        r = run.invoke(main, ["identify", str(tmp_path / "train.parquet"), "--robot", "double_pendulum",
                              "--out", str(bad), "--friction", "auto", *extra])
        assert r.exit_code == 2 and needle in r.output and not bad.exists(), r.output
