"""GTSAM wrappers: Jacobians of every factor against central differences through `gtsam.Values`,
errors equal to the plain residual functions, and the GTSAM graph of a tiny batch problem against
`JointSmoother` (same optimum, same cost, same θ marginal covariance)."""

import warnings

import gtsam
import numpy as np
import pytest

from fg_sysid.datasets.simulate import simulate
from fg_sysid.estimation.gtsam_backend import build_graph
from fg_sysid.estimation.smoother import JointSmoother
from fg_sysid.factors import (
    THETA,
    check_factor_jacobians,
    encoder_factor,
    integration_factor,
    inverse_dynamics_factor,
    parameter_prior_factor,
    state,
    velocity_factor,
)
from fg_sysid.factors.inverse_dynamics import InverseDynamicsResidual
from fg_sysid.factors.kinematics import encoder_residual, integration_residual, velocity_residual
from fg_sysid.factors.manifold import ConfigurationSpace
from fg_sysid.layout import ParameterLayout
from fg_sysid.robots import load_robot

ROBOTS = ["double_pendulum", "z1", "panda"]


@pytest.fixture(scope="module", params=ROBOTS)
def setup(request):
    robot = load_robot(request.param)
    layout = ParameterLayout.create(robot, friction_velocity_scale=0.3)
    rng = np.random.default_rng(sum(map(ord, request.param)))
    theta_bar, std = layout.prior()
    theta = theta_bar + 0.2 * std * rng.standard_normal(layout.n)
    nv = robot.nv
    lo, hi = robot.position_limits()
    values = gtsam.Values()
    for k in range(2):
        x = np.concatenate([rng.uniform(lo, hi), rng.uniform(-1.5, 1.5, nv), rng.uniform(-3, 3, nv)])
        values.insert(state(k), x)
    values.insert(THETA, theta)
    space = ConfigurationSpace(robot.model)
    res = InverseDynamicsResidual(layout)
    meas = {
        "q": values.atVector(state(0))[:nv] + 0.02 * rng.standard_normal(nv),
        "v": values.atVector(state(0))[nv:2 * nv] + 0.1 * rng.standard_normal(nv),
        "tau": rng.standard_normal(nv),
        "sq": rng.uniform(0.5, 2.0, nv),
        "sv": rng.uniform(0.5, 2.0, nv),
        "st": rng.uniform(0.5, 2.0, nv),
    }
    return robot, layout, space, res, values, meas


def make_factors(setup):
    robot, layout, space, res, values, m = setup
    nv = robot.nv
    mask = np.ones(nv, bool)
    mask[1] = False
    theta_bar, std = layout.prior()
    return {
        "encoder": encoder_factor(space, 0, m["q"], m["sq"]),
        "velocity": velocity_factor(0, m["v"], m["sv"]),
        "integration": integration_factor(space, 0, 0.01, 0.7 * m["sq"], m["sv"]),
        "inverse_dynamics": inverse_dynamics_factor(res, 0, m["tau"], m["st"]),
        "inverse_dynamics_masked": inverse_dynamics_factor(res, 0, m["tau"], m["st"], mask=mask),
        "prior": parameter_prior_factor(theta_bar, std),
    }


@pytest.mark.parametrize("name", ["encoder", "velocity", "integration", "inverse_dynamics",
                                  "inverse_dynamics_masked", "prior"])
def test_factor_jacobians(setup, name):
    factor = make_factors(setup)[name]
    values = setup[4]
    scale = 1.0 + np.max(np.abs(factor.whitenedError(values)))
    check_factor_jacobians(factor, values, delta=1e-6, tol=2e-6 * scale, rtol=1e-5)


def test_check_factor_jacobians_names_the_wrong_block():
    """The checker fails, naming the key, on a factor whose second Jacobian is wrong."""
    def error(this, values, jacobians):
        x0, x1 = (values.atVector(k) for k in this.keys())
        if jacobians is not None:
            jacobians[0] = np.diag(2 * x0)
            jacobians[1] = np.eye(2)  # should be 3 x1²
        return x0 ** 2 + x1 ** 3

    f = gtsam.CustomFactor(gtsam.noiseModel.Unit.Create(2), [state(0), state(1)], error)
    v = gtsam.Values()
    v.insert(state(0), np.array([0.3, -0.2]))
    v.insert(state(1), np.array([0.5, 0.7]))
    with pytest.raises(AssertionError, match="key x1"):
        check_factor_jacobians(f, v)


def test_factor_errors_equal_plain_residuals(setup):
    robot, layout, space, res, values, m = setup
    nv = robot.nv
    f = make_factors(setup)
    x0, x1 = values.atVector(state(0)), values.atVector(state(1))
    theta = values.atVector(THETA)
    q0, v0, a0 = x0[None, :nv], x0[None, nv:2 * nv], x0[None, 2 * nv:]

    def half_sq(r, s):
        return 0.5 * float(np.sum((np.asarray(r).ravel() / s) ** 2))

    r, _ = encoder_residual(space, q0, m["q"][None], False)
    assert f["encoder"].error(values) == pytest.approx(half_sq(r, m["sq"]), rel=1e-12)
    r, _ = velocity_residual(v0, m["v"][None], False)
    assert f["velocity"].error(values) == pytest.approx(half_sq(r, m["sv"]), rel=1e-12)
    xs = np.stack([x0, x1])
    lin = integration_residual(space, xs[:, :nv], xs[:, nv:2 * nv], xs[:, 2 * nv:], [0.01], False)
    s = np.concatenate([0.7 * m["sq"], m["sv"]])
    assert f["integration"].error(values) == pytest.approx(half_sq(lin.r, s), rel=1e-12)
    r = res.evaluate(q0, v0, a0, m["tau"][None], theta, jacobians=False).r[0]
    assert f["inverse_dynamics"].error(values) == pytest.approx(half_sq(r, m["st"]), rel=1e-12)
    keep = np.arange(nv) != 1
    assert f["inverse_dynamics_masked"].dim() == nv - 1
    assert f["inverse_dynamics_masked"].error(values) == pytest.approx(half_sq(r[keep], m["st"][keep]),
                                                                      rel=1e-12)
    np.testing.assert_allclose(f["inverse_dynamics_masked"].unwhitenedError(values), r[keep], rtol=1e-12)
    # NaN effort = unmeasured, like mask=False
    tau_nan = m["tau"].copy()
    tau_nan[1] = np.nan
    f_nan = inverse_dynamics_factor(res, 0, tau_nan, m["st"])
    assert f_nan.error(values) == pytest.approx(f["inverse_dynamics_masked"].error(values), rel=1e-12)
    theta_bar, std = layout.prior()
    assert f["prior"].error(values) == pytest.approx(half_sq(theta - theta_bar, std), rel=1e-12)


def test_jacobians_only_when_asked(setup):
    """error() evaluates the residual without Jacobians; linearize() asks for them."""
    robot, layout, _, _, values, m = setup

    class Recording(InverseDynamicsResidual):
        calls: list = []

        def evaluate(self, *args, jacobians=True, **kw):
            self.calls.append(jacobians)
            return super().evaluate(*args, jacobians=jacobians, **kw)

    f = inverse_dynamics_factor(Recording(layout), 0, m["tau"], m["st"])
    f.error(values)
    assert Recording.calls == [False]
    f.linearize(values)
    assert Recording.calls == [False, True]


# ---------------------------------------------------------------------------------------------- batch
NOISE = {"sigma_q": 1e-3, "sigma_v": 1e-2, "sigma_tau": 1e-2, "sigma_process": 1.0}


def _smoother_values(robot, res):
    tr = res.trajectory
    J = robot.joint_names
    cols = [tr[[f"{c}.{j}" for j in J]].to_numpy() for c in "qva"]
    values = gtsam.Values()
    for i in range(len(tr)):
        values.insert(state(i), np.concatenate([c[i] for c in cols]))
    values.insert(THETA, res.theta)
    return values


@pytest.fixture(scope="module", params=["all-measured", "joint-2-unmeasured"])
def tiny(request):
    robot = load_robot("double_pendulum")
    log = simulate(robot, 0.3, 100, 0.0, 0).log
    if request.param == "joint-2-unmeasured":
        tau = log.tau.copy()
        tau[:, 1] = np.nan
        log = type(log)(t=log.t, q=log.q, v=log.v, tau=tau, joint_names=log.joint_names, source="tiny")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # too short for the cross-validated initial filter
        sm = JointSmoother(robot, friction="coulomb-viscous", **NOISE, tol=1e-12, max_iterations=200).fit(log)
    graph, init = build_graph(robot, log, **NOISE)
    params = gtsam.LevenbergMarquardtParams()
    params.setRelativeErrorTol(1e-12)
    params.setAbsoluteErrorTol(1e-15)
    params.setMaxIterations(200)
    opt = gtsam.LevenbergMarquardtOptimizer(graph, init, params)
    sol = opt.optimize()
    return robot, log, sm, graph, init, sol


def test_build_graph_structure(tiny):
    robot, log, _, graph, init, _ = tiny
    n = log.n_samples
    assert n == 31
    n_id = n  # every knot has at least one measured effort
    assert graph.size() == n + n + n_id + (n - 1) + 1
    assert init.size() == n + 1
    assert init.atVector(THETA).size == ParameterLayout.create(robot, "log-cholesky").n


def test_gtsam_lm_matches_smoother(tiny):
    """Same factors ⇒ the smoother's cost equals the GTSAM graph's error at the smoother's solution,
    and GTSAM's LM (from the Savitzky–Golay start and θ̄) reaches the same optimum."""
    robot, log, sm, graph, init, sol = tiny
    res = sm.result_
    assert res.converged
    at_smoother = _smoother_values(robot, res)
    cost_smoother = res.history[-1]["cost"]
    assert graph.error(at_smoother) == pytest.approx(cost_smoother, rel=1e-10)
    assert graph.error(sol) < graph.error(init)
    assert graph.error(sol) == pytest.approx(cost_smoother, rel=1e-8)
    theta_std = np.sqrt(np.diag(res.theta_cov))
    dtheta = sol.atVector(THETA) - res.theta
    assert np.max(np.abs(dtheta) / theta_std) < 1e-4
    np.testing.assert_allclose(sol.atVector(THETA), res.theta, atol=1e-6)


def test_gtsam_marginals_match_smoother_covariance(tiny):
    robot, log, sm, graph, _, sol = tiny
    cov_g = gtsam.Marginals(graph, sol).marginalCovariance(THETA)
    cov_s = sm.result_.theta_cov
    sg, ss = np.sqrt(np.diag(cov_g)), np.sqrt(np.diag(cov_s))
    np.testing.assert_allclose(sg, ss, rtol=1e-3)
    corr_g = cov_g / np.outer(sg, sg)
    corr_s = cov_s / np.outer(ss, ss)
    np.testing.assert_allclose(corr_g, corr_s, atol=1e-3)


def test_build_graph_options(tiny):
    """knots (int / slice), explicit process stds, arrays input and initial values."""
    robot, log, sm, graph, _, sol = tiny
    nv = robot.nv
    g, v = build_graph(robot, (log.t, log.q, log.v, log.tau), knots=10, **NOISE)
    assert v.size() == 10 + 1 and g.size() == 10 + 10 + 10 + 9 + 1
    nz = sm.noise_
    g2, v2 = build_graph(robot, log, knots=slice(0, None, 3), sigma_q=1e-3, sigma_tau=1e-2,
                         sigma_process_q=nz.process_q, sigma_process_v=nz.process_v)
    assert v2.size() == 11 + 1 and g2.size() == 11 + 11 + 10 + 1  # no sigma_v: no velocity factors
    # initial values given explicitly: the graph at the GTSAM solution's values has the same error
    xs = np.array([sol.atVector(state(i)) for i in range(log.n_samples)])
    g3, v3 = build_graph(robot, log, initial=(xs[:, :nv], xs[:, nv:2 * nv], xs[:, 2 * nv:],
                                              sol.atVector(THETA)), **NOISE)
    assert g3.error(v3) == pytest.approx(graph.error(sol), rel=1e-12)
    with pytest.raises(ValueError, match="sigma_process"):
        build_graph(robot, log, sigma_q=1e-3, sigma_tau=1e-2)
