"""A user's own factor term (examples/custom_term_mocap.py): analytic Jacobian vs central differences,
used by the native smoother (lower end-effector error with motion capture) and by the GTSAM back end
(same cost)."""

from __future__ import annotations

import importlib.util
import warnings
from pathlib import Path

import numpy as np
import pytest

from fg_sysid.datasets.simulate import simulate
from fg_sysid.estimation.gtsam_backend import GtsamProblem
from fg_sysid.estimation.problem import Evaluation
from fg_sysid.estimation.smoother import JointSmoother
from fg_sysid.robots import load_robot

spec = importlib.util.spec_from_file_location(
    "custom_term_mocap", Path(__file__).resolve().parents[1] / "examples" / "custom_term_mocap.py")
example = importlib.util.module_from_spec(spec)
spec.loader.exec_module(example)


@pytest.fixture(scope="module")
def fits():
    robot = load_robot("z1")
    sim = simulate(robot, duration=1.5, rate=1000, noise=0.01, seed=1)
    frame = robot.model.frames[-1].name
    q_true = np.asarray(sim.truth_log.q)
    t_m = sim.truth_log.t[::20]
    p_m = example.frame_positions(robot, frame, q_true[::20])
    p_m = p_m + 1e-3 * np.random.default_rng(0).standard_normal(p_m.shape)
    term = example.mocap_term(robot, frame, t_m, p_m, 1e-3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = JointSmoother(robot, knot_stride=2).fit(sim.log)
        mocap = JointSmoother(robot, knot_stride=2, extra_terms=[term]).fit(sim.log)
    truth = example.frame_positions(robot, frame, q_true[::2])
    return robot, frame, plain, mocap, truth


def test_user_term_jacobian_matches_central_differences(fits):
    _, frame, _, sm, _ = fits
    problem = sm.problem_
    term = problem.term("mocap_" + frame)
    x, theta = sm.states_, sm.result_.theta
    rng = np.random.default_rng(0)
    dx = rng.standard_normal((x[1].shape[0], problem.nx))
    res = term.evaluate(Evaluation(problem, x, theta, True), True)
    eps = 1e-6
    rp = term.evaluate(Evaluation(problem, problem.retract(x, eps * dx), theta, False), False).r
    rm = term.evaluate(Evaluation(problem, problem.retract(x, -eps * dx), theta, False), False).r
    num = (rp - rm) / (2 * eps)
    assert np.abs(np.einsum("nmx,nx->nm", res.J, dx) - num).max() < 1e-6 * np.abs(num).max()


def test_user_term_improves_the_trajectory(fits):
    robot, frame, plain, mocap, truth = fits
    errs = [np.sqrt(np.mean((example.frame_positions(robot, frame, sm.states_[0]) - truth) ** 2))
            for sm in (plain, mocap)]
    assert errs[1] < 0.8 * errs[0]


def test_user_term_in_the_gtsam_back_end(fits):
    """GTSAM wraps the user's term like any other: its 15 factors' error equals the native whitened cost."""
    _, frame, _, sm, _ = fits
    problem = sm.problem_
    x, theta = tuple(b[:15] for b in sm.states_), sm.result_.theta
    gp = GtsamProblem(problem, x, theta)
    term = problem.term("mocap_" + frame)
    ev = Evaluation(problem, x, theta, False, idx=np.arange(15))
    native = 0.5 * float(np.sum(problem.whitened(term, term.evaluate(ev, False), ev).r ** 2))
    mocap = [gp.graph.at(i) for i in range(gp.graph.size()) if gp.graph.at(i).dim() == 3]  # z1: nv = 6
    assert len(mocap) == 15
    assert native > 0
    assert np.isclose(sum(f.error(gp.values) for f in mocap), native, rtol=1e-10)
