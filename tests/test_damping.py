"""The solver's hybrid damping rule (issue 9, session 8; opt-in `strategy="hybrid"`, `--damping hybrid`):
λ carried across runs (IRLS rounds), convergence claimed only when the undamped model agrees, the KKT
solution reached from any starting λ, the sharp-friction log where the trust region stalled, the CLI
option, and bad strategy names refused."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from click.testing import CliRunner
from test_problem_core import N, _kkt, _problem

from fg_sysid.cli import main
from fg_sysid.datasets.io import write_log
from fg_sysid.datasets.simulate import simulate
from fg_sysid.estimation import LevenbergMarquardt, SolverOptions
from fg_sysid.estimation.smoother import JointSmoother
from fg_sysid.factors.inverse_dynamics import InverseDynamicsResidual
from fg_sysid.robots import load_robot


def _data():
    return np.linspace(0.3, 1.8, N)[:, None] + 0.05 * np.random.default_rng(0).standard_normal((N, 1))


def _x0():
    return (np.zeros((N, 1)), np.zeros((N, 1)), np.ones((N, 1)))


def test_lambda_is_carried_from_one_run_to_the_next():
    """The next run (the next reweighting round) starts from the λ the last one ended with; the first
    run starts at Gauss–Newton (λ = LAM_MIN)."""
    p = _problem(_data())
    lm = LevenbergMarquardt(SolverOptions("hybrid", tol=1e-14, max_iterations=3))
    lm.trials = []
    lm.run(p, _x0(), np.zeros(1))
    assert lm.trials[0]["lambda"] == LevenbergMarquardt.LAM_MIN
    lm.lam = 37.0  # as if a round had ended heavily damped
    lm.trials = []
    lm.run(p, _x0(), np.zeros(1), rnd=1)
    assert lm.trials[0]["lambda"] == pytest.approx(37.0)
    assert lm.lam != pytest.approx(37.0)  # and the run leaves its own final λ for the next one


@pytest.mark.parametrize("lam0", [None, 1e4])
def test_hybrid_reaches_the_least_squares_solution_from_any_damping(lam0):
    """Started with λ = 10⁴ every step is tiny and predicts a tiny decrease: the old trust region stopped
    there ("converged" on two small predicted decreases). The hybrid asks the undamped model, lowers λ and
    reaches the minimum (the KKT solution of the constrained problem after the augmented Lagrangian)."""
    y = _data()
    p = _problem(y)
    lm = LevenbergMarquardt(SolverOptions("hybrid", tol=1e-14, max_iterations=50))
    lm.lam = lam0
    x, theta, converged, hist = lm.run(p, _x0(), np.zeros(1))
    assert converged and len(hist) < 50
    x, theta, _, viol, _ = lm.augmented_lagrangian(p, x, theta, rounds=30, constraint_tol=1e-9)
    q, v, th = _kkt(y)
    np.testing.assert_allclose(x[0][:, 0], q, atol=1e-7)
    np.testing.assert_allclose(theta[0], th, atol=1e-7)


def test_unknown_strategy_is_refused():
    with pytest.raises(ValueError, match="hybrid"):
        LevenbergMarquardt(SolverOptions("newton"))


@pytest.fixture(scope="module")
def z1_sharp():
    """bench_damping.py's z1-sharp case: 3 s at 500 Hz, σ = 0.01, Coulomb friction with a tanh width of
    0.005 rad/s (10× sharper than the estimator's prior mean); held out: 2 s noise-free."""
    robot = load_robot("z1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        train = simulate(robot, 3.0, 500, 0.01, 0, friction_velocity_scale=0.005)
        held = simulate(robot, 2.0, 500, 0.0, 1, truth=train.truth, friction_velocity_scale=0.005)
    return robot, train, held


def _heldout(sm, held):
    t = held.truth_log
    pred = InverseDynamicsResidual(sm.layout_).predict(t.q, t.v, held.truth_acceleration, sm.result_.theta)
    return float(np.sqrt(np.mean((pred - t.tau) ** 2)) / np.sqrt(np.mean(t.tau ** 2)))


def test_hybrid_converges_on_the_sharp_friction_log_where_the_trust_region_stalled(z1_sharp):
    """The trust region stalled on this log (5.8 % held out, 55 iterations, not converged: rejected trials
    ate each round's budget and λ restarted every round); the hybrid converges like the line search
    (measured 0.610 % vs 0.609 %, 23 vs 22 iterations) and carries its λ to the end of the fit."""
    robot, train, held = z1_sharp
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hy = JointSmoother(robot, strategy="hybrid").fit(train.log)
    s = hy.result_.summary()
    assert s["converged"] and s["iterations"] < 30, s
    assert _heldout(hy, held) < 0.008
    assert hy._lm.lam is not None and hy._lm.lam >= LevenbergMarquardt.LAM_MIN


@pytest.mark.parametrize("flag,value,key,bad_method", [("--damping", "hybrid", "strategy", "ls-sg"),
                                                        ("--theta-steps", "additive", "theta_steps", "ls-sg"),
                                                        ("--jobs", "1", "n_jobs", "energy-ls")])
def test_cli_step_options(tmp_path, z1_sharp, flag, value, key, bad_method):
    """`--damping hybrid`, `--theta-steps additive` (session 12) and `--jobs 1` (session 13) reach the
    smoother (its summary says so); with a baseline they do not apply to: exit 2, no output."""
    robot, train, _ = z1_sharp
    path = tmp_path / "log.csv"
    write_log(train.log.slice(0, 300), path)
    runner = CliRunner()
    out = tmp_path / "fit"
    bad = runner.invoke(main, ["identify", str(path), "--robot", "z1", "--out", str(out), "--method",
                               bad_method, flag, value, "--quiet"])
    assert bad.exit_code == 2 and f"{flag} {value}" in bad.output and not out.exists(), bad.output
    ok = runner.invoke(main, ["identify", str(path), "--robot", "z1", "--out", str(out), flag, value,
                              "--quiet"])
    assert ok.exit_code == 0, ok.output
    summary = json.loads((out / "summary.json").read_text())
    assert str(summary["options"][key]) == value and summary["physically_consistent"], summary


def test_hybrid_takes_the_same_steps_with_the_gtsam_back_end():
    """GTSAM's solve gives no model prediction (NaN): the hybrid then judges a step by its decrease alone
    (ρ = 1) and takes the same steps as with the structured solver (before the fix every GTSAM step was
    rejected as having a non-finite prediction)."""
    robot = load_robot("double_pendulum")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        train = simulate(robot, 0.4, 100, 0.001, 3)
    kw = dict(sigma_q=1e-3, sigma_v=1e-3, sigma_tau=1e-2, max_iterations=3, reweight_rounds=0, init="savgol",
              strategy="hybrid")
    a = JointSmoother(robot, solver="structured", **kw).fit(train.log).result_
    b = JointSmoother(robot, solver="gtsam", **kw).fit(train.log).result_
    assert len(a.history) == len(b.history) == 3
    np.testing.assert_allclose(a.theta, b.theta, rtol=1e-6, atol=1e-8)


def test_theta_steps_physical_against_additive(z1_sharp):
    """Steps through the physical parameters (`ParameterLayout.retract`, the default since session 12)
    against θ + δθ on the sharp-friction log: the same held-out accuracy (within 10 %) in no more
    iterations, every iterate's bodies consistent; a bad name is refused."""
    robot, train, held = z1_sharp
    fits = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for kind in ("physical", "additive"):
            fits[kind] = JointSmoother(robot, theta_steps=kind).fit(train.log)
    it = {k: f.result_.summary()["iterations"] for k, f in fits.items()}
    err = {k: _heldout(f, held) for k, f in fits.items()}
    assert it["physical"] <= it["additive"], it
    assert err["physical"] < 1.1 * err["additive"] and err["physical"] < 0.008, err
    assert fits["physical"].problem_.theta_retraction is not None
    assert fits["additive"].problem_.theta_retraction is None
    assert not fits["physical"].result_.consistency_problems()
    with pytest.raises(ValueError, match="theta_steps"):
        JointSmoother(robot, theta_steps="exact").fit(train.log)
