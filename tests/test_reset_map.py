"""Reset-map residuals (paper 004 eqs. 7–11): every Jacobian vs central differences (q through
``pin.integrate``), and physics oracles — ``solve_reset`` zeroes both residuals, ε = 1 reverses the contact
velocity and conserves kinetic energy, ε = 0 sticks the feet and does not create energy."""

import numpy as np
import pinocchio as pin
import pytest
from jacobian_check import central_diff

from fg_sysid.factors.reset_map import impact_residual, restitution_residual, solve_reset
from fg_sysid.robots import load_robot

N = 2
CASES = {
    "b1": ("FL_foot", "RR_foot"),
    "b1_z1": ("FL_foot", "FR_foot", "RL_foot"),
    "z1": ("link06",),
}


@pytest.fixture(scope="module", params=list(CASES))
def setup(request):
    robot = load_robot(request.param)
    model = robot.model.copy()
    fids = [model.getFrameId(f) for f in CASES[request.param]]
    assert max(fids) < len(model.frames)
    rng = np.random.default_rng(3)
    # perturbed (still physical) inertias so that π ≠ the model's and armature on the joint rows
    pi = robot.nominal_inertial_parameters() * rng.uniform(0.8, 1.2, (robot.n_bodies, 1))
    arm = np.zeros(model.nv)
    arm[robot.joint_index_v()] = rng.uniform(0.01, 0.1, robot.joint_index_v().size)
    q = np.array([pin.randomConfiguration(model, -np.ones(model.nq), np.ones(model.nq)) for _ in range(N)])
    vm = rng.uniform(-1, 1, (N, model.nv))
    vp = rng.uniform(-1, 1, (N, model.nv))
    lam = rng.normal(0, 5, (N, 3 * len(fids)))
    return robot, model, fids, pi.ravel(), arm, q, vm, vp, lam


def _close(J, num):
    np.testing.assert_allclose(J, num, atol=1e-6 * max(1.0, np.abs(num).max()))


def test_impact_jacobians(setup):
    robot, model, fids, pi, arm, q, vm, vp, lam = setup
    nv = model.nv
    r, J = impact_residual(model, fids, q, vm, vp, lam, pi, arm)
    assert r.shape == (N, nv) and J.dq.shape == (N, nv, nv) and J.dimpulse.shape == (N, nv, 3 * len(fids))
    assert J.dparams.shape == (N, nv, pi.size) and J.darmature.shape == (N, nv, nv)

    def f(k, q_=None, vm_=None, vp_=None, lam_=None, pi_=None, arm_=None):
        return impact_residual(model, fids, q[k] if q_ is None else q_, vm[k] if vm_ is None else vm_,
                               vp[k] if vp_ is None else vp_, lam[k] if lam_ is None else lam_,
                               pi if pi_ is None else pi_, arm if arm_ is None else arm_, False)[0][0]

    for k in range(N):
        _close(J.dq[k], central_diff(lambda d, k=k: f(k, q_=pin.integrate(model, q[k], d)), np.zeros(nv)))
        _close(J.dv_minus[k], central_diff(lambda x, k=k: f(k, vm_=x), vm[k]))
        _close(J.dv_plus[k], central_diff(lambda x, k=k: f(k, vp_=x), vp[k]))
        _close(J.dimpulse[k], central_diff(lambda x, k=k: f(k, lam_=x), lam[k]))
        _close(J.darmature[k], central_diff(lambda x, k=k: f(k, arm_=x), arm))
        # r is affine in π: the regressor reproduces the inertial part exactly
        np.testing.assert_allclose(J.dparams[k] @ pi + arm * (vp[k] - vm[k]) + J.dimpulse[k] @ lam[k], r[k],
                                   atol=1e-9 * max(1.0, np.abs(r[k]).max()))
    # the π Jacobian numerically (all 10 n_b columns, first knot)
    _close(J.dparams[0], central_diff(lambda x: f(0, pi_=x), pi))
    # ∂r/∂v⁺ is the mass matrix (+ armature) of the model carrying π
    m = robot.pinocchio_model_with(pi.reshape(-1, 10))
    m.armature = arm
    M = pin.crba(m, m.createData(), q[0])
    _close(J.dv_plus[0], np.triu(M) + np.triu(M, 1).T)


def test_restitution_jacobians(setup):
    robot, model, fids, pi, arm, q, vm, vp, lam = setup
    data = model.createData()
    nv = model.nv
    for eps in (0.0, 0.7):
        r, J = restitution_residual(model, data, fids, q, vm, vp, eps)
        assert r.shape == (N, 3 * len(fids)) and J.dq.shape == (N, 3 * len(fids), nv)

        def f(k, q_, vm_, vp_, eps=eps):
            return restitution_residual(model, data, fids, q_, vm_, vp_, eps, False)[0][0]

        for k in range(N):
            _close(J.dq[k], central_diff(lambda d, k=k: f(k, pin.integrate(model, q[k], d), vm[k], vp[k]),
                                         np.zeros(nv)))
            _close(J.dv_plus[k], central_diff(lambda x, k=k: f(k, q[k], vm[k], x), vp[k]))
            _close(J.dv_minus[k], central_diff(lambda x, k=k: f(k, q[k], x, vp[k]), vm[k]))
        if eps == 0.0:
            assert not J.dv_minus.any()


def _model_with(robot, pi, arm):
    m = robot.pinocchio_model_with(pi.reshape(-1, 10))
    m.armature = arm
    return m


@pytest.mark.parametrize("eps", [0.0, 0.5, 1.0])
def test_solve_reset_oracle(setup, eps):
    robot, model, fids, pi, arm, q, vm, vp, lam = setup
    m = _model_with(robot, pi, arm)
    data = model.createData()
    for k in range(N):
        vplus, Lam = solve_reset(m, q[k], vm[k], fids, eps)
        r_imp, _ = impact_residual(model, fids, q[k], vm[k], vplus, Lam, pi, arm, False)
        r_rest, _ = restitution_residual(model, data, fids, q[k], vm[k], vplus, eps, False)
        scale = max(1.0, np.abs(Lam).max())
        np.testing.assert_allclose(r_imp, 0.0, atol=1e-9 * scale)
        np.testing.assert_allclose(r_rest, 0.0, atol=1e-9)
        # contact velocities before / after (world axes): post = −ε · pre
        pre, _ = restitution_residual(model, data, fids, q[k], vm[k], vm[k], 0.0, False)
        post, _ = restitution_residual(model, data, fids, q[k], vm[k], vplus, 0.0, False)
        np.testing.assert_allclose(post, -eps * pre, atol=1e-9)
        assert np.linalg.norm(pre) > 1e-2
        M = pin.crba(m, m.createData(), q[k])
        M = np.triu(M) + np.triu(M, 1).T
        e_minus, e_plus = 0.5 * vm[k] @ M @ vm[k], 0.5 * vplus @ M @ vplus
        if eps == 1.0:
            np.testing.assert_allclose(e_plus, e_minus, rtol=1e-9)  # elastic: energy conserved
        else:
            assert e_plus <= e_minus + 1e-12  # plastic / partial: energy can only be lost
            if eps == 0.0:
                assert e_plus < e_minus - 1e-6


def test_solve_reset_redundant_contacts():
    """The same foot listed twice (rank-deficient J_c): the min-norm Schur solve still gives the unique v⁺
    and residual-zeroing impulses."""
    robot = load_robot("b1")
    model = robot.model
    fids = [model.getFrameId("FL_foot")] * 2 + [model.getFrameId("RR_foot")]
    rng = np.random.default_rng(1)
    q = pin.randomConfiguration(model, -np.ones(model.nq), np.ones(model.nq))
    vm = rng.uniform(-1, 1, model.nv)
    vplus, Lam = solve_reset(model, q, vm, fids, 0.0)
    v_ref, _ = solve_reset(model, q, vm, fids[1:], 0.0)
    np.testing.assert_allclose(vplus, v_ref, atol=1e-9)
    np.testing.assert_allclose(Lam[:3], Lam[3:6], atol=1e-9)  # min-norm splits the impulse evenly
    r_imp, _ = impact_residual(model, fids, q, vm, vplus, Lam, robot.nominal_inertial_parameters(),
                               model.armature, False)
    np.testing.assert_allclose(r_imp, 0.0, atol=1e-8)
