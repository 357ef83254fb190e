"""Every factor's Jacobians against central differences, on random states of several robots,
and the identity oracle regressor·π = RNEA torque."""

import numpy as np
import pinocchio as pin
import pytest
from jacobian_check import central_diff

from fg_sysid.factors.inverse_dynamics import InverseDynamicsResidual
from fg_sysid.factors.kinematics import encoder_residual, integration_residual, velocity_residual
from fg_sysid.factors.manifold import ConfigurationSpace
from fg_sysid.layout import ParameterLayout
from fg_sysid.robots import load_robot

ROBOTS = ["double_pendulum", "z1", "panda"]


def random_state(robot, n, rng):
    lo, hi = robot.position_limits()
    q = rng.uniform(lo, hi, size=(n, robot.nq))
    v = rng.uniform(-1.5, 1.5, size=(n, robot.nv))
    a = rng.uniform(-3, 3, size=(n, robot.nv))
    return q, v, a




@pytest.fixture(scope="module", params=ROBOTS)
def setup(request):
    robot = load_robot(request.param)
    layout = ParameterLayout.create(robot, friction_velocity_scale=0.3)
    rng = np.random.default_rng(abs(hash(request.param)) % 2**32)
    theta0, std = layout.prior()
    theta = theta0 + 0.2 * std * rng.standard_normal(layout.n)
    return robot, layout, theta, rng


def check_knot_jacobians(res, lin, q, v, a, tau, theta, k, wrt=("q", "v", "a", "theta"), eps=1e-6):
    """Knot k's analytic Jacobians of an `InverseDynamicsResidual` against central differences."""
    args = {"q": q[k:k + 1], "v": v[k:k + 1], "a": a[k:k + 1], "theta": theta}
    at = {"q": q[k], "v": v[k], "a": a[k], "theta": theta}
    jac = {"q": lin.Jq[k], "v": lin.Jv[k], "a": lin.Ja[k], "theta": lin.Jtheta[k]}
    scale = 1 + np.abs(lin.r[k]).max()
    for name in wrt:
        def f(x, name=name):
            kw = {**args, name: x if name == "theta" else x[None]}
            return res.evaluate(kw["q"], kw["v"], kw["a"], tau[k:k + 1], kw["theta"], jacobians=False).r[0]

        step = 1e-6 if name in ("q", "theta") else eps
        np.testing.assert_allclose(jac[name], central_diff(f, at[name], step), atol=2e-6 * scale, rtol=1e-5)


@pytest.mark.parametrize("inertia", ["exponential-eigenvalue", "log-cholesky", "raw"])
def test_inverse_dynamics_jacobians(setup, inertia):
    robot, _, _, rng = setup
    layout = ParameterLayout.create(robot, inertia=inertia, friction_velocity_scale=0.3)
    theta0, std = layout.prior()
    theta = theta0 + 0.2 * std * rng.standard_normal(layout.n)
    res = InverseDynamicsResidual(layout)
    q, v, a = random_state(robot, 3, rng)
    tau = rng.standard_normal(v.shape)
    lin = res.evaluate(q, v, a, tau, theta)
    for k in range(3):
        check_knot_jacobians(res, lin, q, v, a, tau, theta, k)


@pytest.mark.parametrize("law", ["soft-dry", "coulomb-viscous-lead"])
def test_inverse_dynamics_jacobians_lead_laws(setup, law):
    """The lead laws (friction of v + T·a) add ∂τ_f/∂a to ∂r/∂a: checked by central differences with
    states inside and outside the stick band (away from the clip's kinks)."""
    robot, _, _, rng = setup
    layout = ParameterLayout.create(robot, friction=law, friction_velocity_scale=0.05)
    theta0, std = layout.prior()
    theta = theta0 + 0.2 * std * rng.standard_normal(layout.n)
    res = InverseDynamicsResidual(layout)
    q, v, a = random_state(robot, 4, rng)
    v[:2] *= 0.01  # the first two knots inside the band of most joints
    a[:2] *= 0.1
    tau = rng.standard_normal(v.shape)
    lin = res.evaluate(q, v, a, tau, theta)
    _, pf, _ = layout.split(layout.to_physical(theta))
    iv = robot.joint_index_v()
    inside = 0
    for k in range(4):
        u = (v[k, iv] + pf[:, 3] * a[k, iv]) / pf[:, 2]
        if np.any(np.abs(np.abs(u) - 1) < 1e-3):
            continue  # a kink of the clip: no derivative to compare
        inside += int(np.sum(np.abs(u) < 1))
        check_knot_jacobians(res, lin, q, v, a, tau, theta, k, wrt=("v", "a", "theta"), eps=1e-8)
    assert inside > 0  # the band's derivatives were exercised


def test_regressor_times_pi_equals_rnea(setup):
    """Identity oracle: Y(q,v,a)·π + armature·a + τ_f = RNEA(model with π) + armature·a + τ_f."""
    robot, layout, theta, rng = setup
    res = InverseDynamicsResidual(layout)
    q, v, a = random_state(robot, 4, rng)
    pred = res.predict(q, v, a, theta)
    p = layout.to_physical(theta)
    pi, pf, parm = layout.split(p)
    model = robot.pinocchio_model_with(pi)
    data = model.createData()
    iv = robot.joint_index_v()
    for k in range(4):
        tau = pin.rnea(model, data, q[k], v[k], a[k]).copy()
        vs = layout.friction.velocity_scale
        tau[iv] += parm * a[k, iv] + pf[:, 0] * np.tanh(v[k, iv] / vs) + pf[:, 1] * v[k, iv]
        np.testing.assert_allclose(pred[k], tau, rtol=1e-10, atol=1e-10)
    # the residual alone (batched RNEA) = the linearization's residual (regressor form), also after θ moved
    # (the batched RNEA's model pool follows the inertias) and for a single knot
    zero = np.zeros_like(v)
    for th in (theta, theta + 0.05 * rng.standard_normal(theta.size), theta):
        r_alone = res.evaluate(q, v, a, zero, th, jacobians=False).r
        r_lin = res.evaluate(q, v, a, zero, th, jacobians=True).r
        np.testing.assert_allclose(r_alone, r_lin, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(res.evaluate(q[:1], v[:1], a[:1], zero[:1], th, jacobians=False).r,
                                   r_lin[:1], rtol=1e-10, atol=1e-10)
    # the shared robot model was not written to
    np.testing.assert_array_equal(robot.nominal_inertial_parameters(),
                                  load_robot(robot.name).nominal_inertial_parameters())


def test_worker_process_shares_the_derivative_loop(setup, monkeypatch):
    """``processes = 2``: the second half of the knots' Pinocchio loop runs in `knot_worker`'s process
    (shared memory): bit-identical residual and Jacobians, batched RNEA on two threads equal to rounding;
    a stopped worker is replaced on the next call; a failing one leaves its knots to the caller."""
    from fg_sysid import knot_worker

    if not knot_worker.worker_available():
        pytest.skip("the knot worker needs POSIX")
    robot, layout, theta, rng = setup
    monkeypatch.setattr(InverseDynamicsResidual, "PARALLEL_KNOTS", 8)
    q, v, a = random_state(robot, 41, rng)
    tau = rng.standard_normal(v.shape)
    serial, shared = InverseDynamicsResidual(layout), InverseDynamicsResidual(layout)
    shared.processes = 2
    one = serial.evaluate(q, v, a, tau, theta)
    for _ in range(2):
        two = shared.evaluate(q, v, a, tau, theta)
        for f in ("r", "Jq", "Jv", "Ja", "Jtheta"):
            np.testing.assert_array_equal(getattr(two, f), getattr(one, f))
        assert knot_worker.worker_cpu_seconds() > 0.0
        knot_worker.shared_worker()._proc.kill()  # the next call starts a new worker
        knot_worker.shared_worker()._proc.wait()
    np.testing.assert_allclose(shared.evaluate(q, v, a, tau, theta, jacobians=False).r, one.r,
                               rtol=1e-12, atol=1e-10)

    def broken(self, model, q, v, a, local, out):
        local()
        raise RuntimeError("test: the worker failed")

    monkeypatch.setattr(knot_worker.KnotWorker, "run", broken)  # its knots are then computed here
    with pytest.warns(RuntimeWarning, match="the worker failed"):
        two = shared.evaluate(q, v, a, tau, theta)
    for f in ("r", "Jq", "Jv", "Ja", "Jtheta"):
        np.testing.assert_array_equal(getattr(two, f), getattr(one, f))


def test_external_forces_slot(setup):
    robot, layout, theta, rng = setup
    res = InverseDynamicsResidual(layout)
    q, v, a = random_state(robot, 2, rng)
    tau = rng.standard_normal(v.shape)
    ext = rng.standard_normal(v.shape)
    r0 = res.evaluate(q, v, a, tau, theta, jacobians=False).r
    r1 = res.evaluate(q, v, a, tau, theta, jacobians=False, external=ext).r
    np.testing.assert_allclose(r0 - r1, ext, atol=1e-12)


def test_kinematic_jacobians(setup):
    robot, _, _, rng = setup
    space = ConfigurationSpace(robot.model)
    n = 4
    q, v, a = random_state(robot, n, rng)
    h = rng.uniform(1e-3, 2e-2, n - 1)
    lin = integration_residual(space, q, v, a, h)
    x = np.concatenate([q, v, a], axis=1)
    nv = robot.nv

    def unpack(xx):
        return xx[:, :nv], xx[:, nv:2 * nv], xx[:, 2 * nv:]

    for k in range(n - 1):
        def f0(x0, k=k):
            xx = x.copy()
            xx[k] = x0
            return integration_residual(space, *unpack(xx), h, jacobians=False).r[k]

        def f1(x1, k=k):
            xx = x.copy()
            xx[k + 1] = x1
            return integration_residual(space, *unpack(xx), h, jacobians=False).r[k]

        np.testing.assert_allclose(lin.J0[k], central_diff(f0, x[k]), atol=1e-7)
        np.testing.assert_allclose(lin.J1[k], central_diff(f1, x[k + 1]), atol=1e-7)
    qm = q + 0.01 * rng.standard_normal(q.shape)
    r, J = encoder_residual(space, q, qm)
    np.testing.assert_allclose(r, q - qm)
    np.testing.assert_allclose(J[0], central_diff(lambda z: encoder_residual(space, z[None, :nv], qm[:1],
                                                                           False)[0][0], x[0]), atol=1e-8)
    vm = v + 0.1
    r, J = velocity_residual(v, vm)
    np.testing.assert_allclose(J[0], central_diff(lambda z: velocity_residual(z[None, nv:2 * nv], vm[:1],
                                                                             False)[0][0], x[0]), atol=1e-8)


def test_integration_exact_for_cubic_motion():
    """The Euler–Maclaurin rule has zero residual on a cubic q(t)."""
    space = ConfigurationSpace(load_robot("double_pendulum").model)
    t = np.linspace(0, 1, 11)[:, None]
    c = np.array([[0.3, -0.2]])
    q = 0.1 + c * t + 0.5 * t ** 2 - 0.7 * t ** 3
    v = c + t - 2.1 * t ** 2
    a = 1 - 4.2 * t
    lin = integration_residual(space, q, v, a, np.diff(t[:, 0]), jacobians=False)
    np.testing.assert_allclose(lin.r, 0, atol=1e-13)


@pytest.mark.parametrize("name", ["b1", "b1_z1"])
def test_floating_base_manifold_jacobians(name):
    """Free-flyer robots load from the catalog, and the integration/encoder residuals on the
    configuration manifold (SE(3) base) have correct Jacobians — the state layout of issue 3."""
    import pinocchio as pin

    robot = load_robot(name)
    assert robot.floating_base and robot.nq == robot.nv + 1
    space = ConfigurationSpace(robot.model)
    assert not space.is_vector_space
    rng = np.random.default_rng(7)
    n = 3
    q = np.array([pin.randomConfiguration(robot.model, -np.ones(robot.nq), np.ones(robot.nq))
                  for _ in range(n)])
    v = rng.uniform(-1, 1, (n, robot.nv))
    a = rng.uniform(-2, 2, (n, robot.nv))
    h = np.full(n - 1, 1e-2)
    lin = integration_residual(space, q, v, a, h)
    nv = robot.nv

    def f(k, which, d):
        qq, vv, aa = q.copy(), v.copy(), a.copy()
        i = k + which
        qq[i] = pin.integrate(robot.model, q[i], d[:nv])
        vv[i] = v[i] + d[nv:2 * nv]
        aa[i] = a[i] + d[2 * nv:]
        return integration_residual(space, qq, vv, aa, h, jacobians=False).r[k]

    zero = np.zeros(3 * nv)
    for k in range(n - 1):
        np.testing.assert_allclose(lin.J0[k], central_diff(lambda d, k=k: f(k, 0, d), zero), atol=1e-6)
        np.testing.assert_allclose(lin.J1[k], central_diff(lambda d, k=k: f(k, 1, d), zero), atol=1e-6)
    qm = np.array([pin.integrate(robot.model, qq, 0.01 * rng.standard_normal(nv)) for qq in q])
    r, J = encoder_residual(space, q, qm)
    num = central_diff(lambda d: encoder_residual(space, pin.integrate(robot.model, q[0], d[:nv])[None],
                                                  qm[:1], False)[0][0], zero)
    np.testing.assert_allclose(J[0], num, atol=1e-6)


def test_inverse_dynamics_on_floating_base():
    """The ID residual works on a free-flyer robot (issue 3): Jacobians match central differences
    through the SE(3) base, friction/armature act on actuated joints only, and Jᵀλ of a foot contact
    enters through `external`."""
    import pinocchio as pin

    robot = load_robot("b1")
    layout = ParameterLayout.create(robot, friction_velocity_scale=0.3)
    res = InverseDynamicsResidual(layout)
    rng = np.random.default_rng(11)
    theta0, std = layout.prior()
    theta = theta0 + 0.1 * std * rng.standard_normal(layout.n)
    q = pin.randomConfiguration(robot.model, -np.ones(robot.nq), np.ones(robot.nq))[None]
    v = rng.uniform(-1, 1, (1, robot.nv))
    a = rng.uniform(-2, 2, (1, robot.nv))
    tau = rng.standard_normal((1, robot.nv))
    lin = res.evaluate(q, v, a, tau, theta)
    nv = robot.nv

    def f_q(d):
        return res.evaluate(pin.integrate(robot.model, q[0], d)[None], v, a, tau, theta, jacobians=False).r[0]

    scale = 1 + np.abs(lin.r).max()
    np.testing.assert_allclose(lin.Jq[0], central_diff(f_q, np.zeros(nv)), atol=2e-6 * scale, rtol=1e-5)
    np.testing.assert_allclose(
        lin.Jtheta[0],
        central_diff(lambda t: res.evaluate(q, v, a, tau, t, jacobians=False).r[0], theta),
        atol=2e-6 * scale, rtol=1e-5)
    # base rows carry no friction or armature: zero-parameter columns on the 6 base rows
    assert np.all(lin.Jtheta[0, :6, layout.s_friction] == 0)
    assert np.all(lin.Jtheta[0, :6, layout.s_armature] == 0)
    # contact force slot: r(λ) = r(0) − Jᵀλ
    data = robot.model.createData()
    fid = robot.model.getFrameId("FL_foot")
    J = pin.computeFrameJacobian(robot.model, data, q[0], fid, pin.LOCAL_WORLD_ALIGNED)[:3]
    lam = np.array([1.0, -2.0, 50.0])
    r1 = res.evaluate(q, v, a, tau, theta, jacobians=False, external=(J.T @ lam)[None]).r
    np.testing.assert_allclose(lin.r - r1, (J.T @ lam)[None], atol=1e-9)
