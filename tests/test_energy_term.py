"""The work–energy term in the smoother (paper 004 eq. 63 as a pair term on (x_k, x_{k+1}, θ)):
analytic Jacobians through the core vs central differences, the same term in the GTSAM back end, and a
fit that uses it."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from fg_sysid.datasets.simulate import simulate
from fg_sysid.estimation.gtsam_backend import GtsamProblem
from fg_sysid.estimation.problem import Evaluation
from fg_sysid.estimation.smoother import JointSmoother
from fg_sysid.robots import load_robot


@pytest.fixture(scope="module")
def fit():
    robot = load_robot("z1")
    sim = simulate(robot, 1.0, 500, 0.01, 0, friction_velocity_scale=0.02)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return JointSmoother(robot, energy=True, max_iterations=10).fit(sim.log)


def test_energy_term_jacobians_match_central_differences(fit):
    p, x, th = fit.problem_, fit.states_, fit.result_.theta
    term = p.term("energy")
    rng = np.random.default_rng(0)
    dx = 1e-3 * rng.standard_normal((x[1].shape[0], p.nx))
    dth = 1e-3 * rng.standard_normal(th.size)
    res = term.evaluate(Evaluation(p, x, th, True), True)
    eps = 1e-5
    rp = term.evaluate(Evaluation(p, p.retract(x, eps * dx), th + eps * dth, False), False).r
    rm = term.evaluate(Evaluation(p, p.retract(x, -eps * dx), th - eps * dth, False), False).r
    num = (rp - rm) / (2 * eps)
    pred = (np.einsum("nmx,nx->nm", res.J, dx[:-1]) + np.einsum("nmx,nx->nm", res.J1, dx[1:])
            + np.einsum("nmt,t->nm", res.Jt, dth))
    assert np.abs(pred - num).max() < 1e-6 * np.abs(num).max()


def test_energy_rows_enter_the_elimination_and_gtsam(fit):
    p, x, th = fit.problem_, fit.states_, fit.result_.theta
    g = p.linearize(x, th)
    assert len(g.pair_theta) == x[1].shape[0] - 1  # one sparse (x_k, x_k+1, θ) row per interval
    sub = tuple(b[:12] for b in x)
    gp = GtsamProblem(p, sub, th)
    ev = Evaluation(p, sub, th, False, idx=np.arange(12))
    term = p.term("energy")
    native = 0.5 * float(np.sum(p.whitened(term, term.evaluate(ev, False), ev).r ** 2))
    # the energy factors are the 1-row factors of the graph (11 intervals)
    energy = [gp.graph.at(i) for i in range(gp.graph.size()) if gp.graph.at(i).dim() == 1]
    assert len(energy) == 11 and native > 0
    assert np.isclose(sum(f.error(gp.values) for f in energy), native, rtol=1e-9)


def test_energy_needs_every_effort():
    robot = load_robot("z1")
    log = simulate(robot, 0.5, 200, 0.01, 0).log
    tau = np.array(log.tau, float)
    tau[:, 2] = np.nan
    from dataclasses import replace

    log = replace(log, tau=tau)
    with pytest.warns(UserWarning, match="energy observations need every effort"):
        sm = JointSmoother(robot, energy=True, max_iterations=2).fit(log)
    assert "energy" not in [t.name for t in sm.problem_.terms]
