"""Forward-dynamics residual (paper 004 Fig. 10's comparison formulation): Jacobians against central
differences on random states of three robots, the ABA identity, and a fit that recovers the truth."""

import numpy as np
import pinocchio as pin
import pytest
from jacobian_check import central_diff

from fg_sysid.datasets.simulate import simulate, truth_arrays
from fg_sysid.estimation.smoother import EstimationError, JointSmoother
from fg_sysid.factors.forward_dynamics import ForwardDynamicsResidual, acceleration_sigma
from fg_sysid.factors.inverse_dynamics import InverseDynamicsResidual
from fg_sysid.layout import ParameterLayout
from fg_sysid.robots import load_robot


@pytest.fixture(scope="module", params=["double_pendulum", "z1", "panda"])
def setup(request):
    robot = load_robot(request.param)
    layout = ParameterLayout.create(robot, friction="coulomb-viscous-scale", friction_velocity_scale=0.3)
    rng = np.random.default_rng(7)
    theta0, std = layout.prior()
    theta = theta0 + 0.2 * std * rng.standard_normal(layout.n)
    lo, hi = robot.position_limits()
    n = 2
    q = rng.uniform(lo, hi, size=(n, robot.nq))
    v = rng.uniform(-1.5, 1.5, size=(n, robot.nv))
    a = rng.uniform(-3, 3, size=(n, robot.nv))
    tau = 3 * rng.standard_normal((n, robot.nv))
    return robot, layout, theta, (q, v, a, tau)


def test_forward_dynamics_is_aba(setup):
    """a_fd equals Pinocchio's ABA of the model at θ (armature included, friction moved to the input)."""
    robot, layout, theta, (q, v, a, tau) = setup
    idr = InverseDynamicsResidual(layout)
    fd = ForwardDynamicsResidual(idr)
    lin = fd.evaluate(q, v, a, tau, theta, jacobians=False)
    model = idr.model.copy()
    model.armature = np.zeros(model.nv)
    model.armature[idr.iv] = idr.parm
    data = model.createData()
    tf = idr.friction(v, a)[0]
    for k in range(q.shape[0]):
        u = tau[k].copy()
        u[idr.iv] -= tf[k]
        np.testing.assert_allclose(lin.a_fd[k], pin.aba(model, data, q[k], v[k], u), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(lin.r, lin.a_fd - a, atol=1e-12)
    # the inverse dynamics at a_fd reproduces the measured efforts
    np.testing.assert_allclose(idr.evaluate(q, v, lin.a_fd, tau, theta, jacobians=False).r, 0, atol=1e-8)


def test_forward_dynamics_jacobians(setup):
    robot, layout, theta, (q, v, a, tau) = setup
    fd = ForwardDynamicsResidual(InverseDynamicsResidual(layout))
    lin = fd.evaluate(q, v, a, tau, theta)
    for k in range(q.shape[0]):
        def r(qq=q[k], vv=v[k], aa=a[k], th=theta, tk=tau[k:k + 1]):
            return fd.evaluate(qq[None], vv[None], aa[None], tk, th, jacobians=False).r[0]

        def f_q(d, k=k):
            return r(qq=pin.integrate(robot.model, q[k], d))

        np.testing.assert_allclose(lin.Jq[k], central_diff(f_q, np.zeros(robot.nv)), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(lin.Jv[k], central_diff(lambda x: r(vv=x), v[k]), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(central_diff(lambda x: r(aa=x), a[k]), -np.eye(robot.nv), atol=1e-5)
        np.testing.assert_allclose(lin.Jtheta[k], central_diff(lambda x: r(th=x), theta), rtol=1e-5,
                                   atol=1e-5)


def test_acceleration_sigma_maps_effort_noise(setup):
    robot, layout, theta, (q, v, a, tau) = setup
    fd = ForwardDynamicsResidual(InverseDynamicsResidual(layout))
    s = acceleration_sigma(fd, q[:1], theta, np.full(robot.nv, 0.1))
    Minv = np.linalg.inv(fd.mass_matrix(q[:1], theta)[0])
    np.testing.assert_allclose(s, 0.1 * np.sqrt(np.sum(Minv ** 2, axis=1)), rtol=1e-12)


def test_forward_dynamics_smoother_recovers_truth():
    """In-class double pendulum, σ = 0.01: the forward-dynamics smoother recovers the link masses and
    first moments (the identifiable ones of a planar pendulum) like the inverse-dynamics one."""
    robot = load_robot("double_pendulum")
    sim = simulate(robot, 4.0, 200.0, 0.01, 3)
    truth = truth_arrays(sim.truth, robot)["inertial"]
    est = {}
    for dyn in ("inverse", "forward"):
        sm = JointSmoother(robot, dynamics=dyn, max_iterations=30).fit(sim.log)
        est[dyn] = sm.result_.inertial()
        if dyn == "forward":
            assert np.all(np.isfinite(sm.sigma_acceleration_)) and np.all(sm.sigma_acceleration_ > 0)
            assert sm.problem_.term("forward_dynamics") and "inverse_dynamics" not in \
                [t.name for t in sm.problem_.terms]
    # gravity moments m·c of each link (the best-excited parameters of a pendulum); 4 s, σ = 0.01:
    # measured 0.0035 (inverse) and 0.0019 (forward) kg·m of a largest moment of 0.032 kg·m
    err = {dyn: np.abs(pi[:, 1:4] - truth[:, 1:4]).max() for dyn, pi in est.items()}
    scale = np.abs(truth[:, 1:4]).max()
    assert err["inverse"] < 0.2 * scale and err["forward"] < 0.2 * scale, err
    assert err["forward"] < 3 * err["inverse"] + 1e-4, err


def test_forward_dynamics_needs_every_effort():
    robot = load_robot("double_pendulum")
    log = simulate(robot, 1.0, 100.0, 0.01, 0).log
    tau = np.array(log.tau, float)
    tau[:, 1] = np.nan
    from dataclasses import replace

    bad = replace(log, tau=tau)
    with pytest.raises(EstimationError, match="every joint's effort"):
        JointSmoother(robot, dynamics="forward").fit(bad)


def test_cli_dynamics_forward(tmp_path):
    from click.testing import CliRunner

    from fg_sysid.cli import main
    from fg_sysid.datasets.io import write_log

    robot = load_robot("double_pendulum")
    write_log(simulate(robot, 2.0, 200.0, 0.01, 1).log, tmp_path / "log.csv")
    run = CliRunner().invoke(main, ["identify", str(tmp_path / "log.csv"), "--robot", "double_pendulum",
                                    "--dynamics", "forward", "--quiet", "--out", str(tmp_path / "fd")])
    assert run.exit_code == 0, run.output
    assert (tmp_path / "fd" / "model.json").is_file()
    bad = CliRunner().invoke(main, ["identify", str(tmp_path / "log.csv"), "--robot", "double_pendulum",
                                    "--dynamics", "forward", "--method", "ls-sg",
                                    "--out", str(tmp_path / "x")])
    assert bad.exit_code == 2 and "--dynamics forward" in bad.output and not (tmp_path / "x").exists()
