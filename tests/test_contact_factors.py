"""Bilateral point-contact residuals (paper 004 Sec. III-B): Jacobians vs central differences through
``pin.integrate`` on free-flyer robots, zero residuals at rest / at the anchor, and d/dt consistency."""

import numpy as np
import pinocchio as pin
import pytest
from jacobian_check import central_diff

from fg_sysid.factors.contact import (
    contact_acceleration_residual,
    contact_position_residual,
    contact_velocity_residual,
)
from fg_sysid.robots import load_robot

N = 2




@pytest.fixture(scope="module", params=["b1", "b1_z1"])
def setup(request):
    robot = load_robot(request.param)
    model = robot.model
    data = model.createData()
    fid = model.getFrameId("FL_foot")
    assert fid < len(model.frames)
    rng = np.random.default_rng(11)
    q = np.array([pin.randomConfiguration(model, -np.ones(model.nq), np.ones(model.nq)) for _ in range(N)])
    v = rng.uniform(-1, 1, (N, model.nv))
    a = rng.uniform(-2, 2, (N, model.nv))
    return model, data, fid, q, v, a


def _perturbed(model, q, v, a, k, d):
    nv = model.nv
    qq = pin.integrate(model, q[k], d[:nv])[None]
    return qq, (v[k] + d[nv:2 * nv])[None], (a[k] + d[2 * nv:])[None]


def _check(J, f, nv):
    for k in range(N):
        num = central_diff(lambda d, k=k: f(k, d), np.zeros(3 * nv))
        scale = max(1.0, np.abs(num).max())
        np.testing.assert_allclose(J[k], num, atol=1e-6 * scale)


def test_position_jacobian_and_zero_at_anchor(setup):
    model, data, fid, q, v, a = setup
    anchor = np.array([0.1, -0.2, 0.3])
    r, J = contact_position_residual(model, data, fid, q, anchor)
    assert r.shape == (N, 3) and J.shape == (N, 3, 3 * model.nv)
    assert np.abs(J[:, :, model.nv:]).max() == 0.0
    _check(J, lambda k, d: contact_position_residual(
        model, data, fid, _perturbed(model, q, v, a, k, d)[0], anchor, False)[0][0], model.nv)
    p, _ = contact_position_residual(model, data, fid, q, np.zeros(3), False)
    r0, _ = contact_position_residual(model, data, fid, q, p, False)
    np.testing.assert_allclose(r0, 0.0, atol=1e-14)
    assert np.linalg.norm(r - r0) > 1e-3  # the anchor matters


def test_velocity_jacobian_and_static_zero(setup):
    model, data, fid, q, v, a = setup
    r, J = contact_velocity_residual(model, data, fid, q, v)
    assert r.shape == (N, 3) and np.linalg.norm(r) > 1e-3
    assert np.abs(J[:, :, 2 * model.nv:]).max() == 0.0

    def f(k, d):
        qq, vv, _ = _perturbed(model, q, v, a, k, d)
        return contact_velocity_residual(model, data, fid, qq, vv, False)[0][0]

    _check(J, f, model.nv)
    r0, _ = contact_velocity_residual(model, data, fid, q, np.zeros_like(v), False)
    np.testing.assert_allclose(r0, 0.0, atol=1e-14)


def test_acceleration_jacobian(setup):
    model, data, fid, q, v, a = setup
    r, J = contact_acceleration_residual(model, data, fid, q, v, a)
    assert r.shape == (N, 3) and np.linalg.norm(r) > 1e-3

    def f(k, d):
        qq, vv, aa = _perturbed(model, q, v, a, k, d)
        return contact_acceleration_residual(model, data, fid, qq, vv, aa, False)[0][0]

    _check(J, f, model.nv)
    # δa block is the position Jacobian; at rest the residual is J_lin a
    _, Jp = contact_position_residual(model, data, fid, q, np.zeros(3))
    np.testing.assert_allclose(J[:, :, 2 * model.nv:], Jp[:, :, :model.nv], atol=1e-12)
    r0, _ = contact_acceleration_residual(model, data, fid, q, np.zeros_like(v), a, False)
    np.testing.assert_allclose(r0, np.einsum("nij,nj->ni", Jp[:, :, :model.nv], a), atol=1e-10)


def test_time_derivative_consistency(setup):
    """Along q(t) = q0 ⊕ t v (constant v, zero a): d/dt of the position residual = velocity residual,
    and d/dt of the velocity residual = acceleration residual."""
    model, data, fid, q, v, a = setup
    h = 1e-5
    zero3 = np.zeros(3)
    for k in range(N):
        def pos(t, k=k):
            return contact_position_residual(model, data, fid, pin.integrate(model, q[k], t * v[k])[None],
                                             zero3, False)[0][0]

        def vel(t, k=k):
            return contact_velocity_residual(model, data, fid, pin.integrate(model, q[k], t * v[k])[None],
                                             v[k][None], False)[0][0]

        rv, _ = contact_velocity_residual(model, data, fid, q[k][None], v[k][None], False)
        np.testing.assert_allclose((pos(h) - pos(-h)) / (2 * h), rv[0], atol=1e-7)
        ra, _ = contact_acceleration_residual(model, data, fid, q[k][None], v[k][None],
                                              np.zeros((1, model.nv)), False)
        np.testing.assert_allclose((vel(h) - vel(-h)) / (2 * h), ra[0], atol=1e-6)


def test_rolling_offset_jacobians_and_material_point_velocity(setup):
    """With a world offset d the velocity residual is the velocity of the body point at p + d (checked with
    an extra frame at that point) and both residuals' Jacobians match central differences."""
    model, data, fid, q, v, a = setup
    d = np.array([0.0, 0.0, -0.02])
    nv = model.nv
    rv, Jv = contact_velocity_residual(model, data, fid, q, v, offset=d)
    ra, Ja = contact_acceleration_residual(model, data, fid, q, v, a, offset=d)
    _check(Jv, lambda k, dd: contact_velocity_residual(
        model, data, fid, *_perturbed(model, q, v, a, k, dd)[:2], False, offset=d)[0][0], nv)
    _check(Ja, lambda k, dd: contact_acceleration_residual(
        model, data, fid, *_perturbed(model, q, v, a, k, dd), False, offset=d)[0][0], nv)
    r0, _ = contact_velocity_residual(model, data, fid, q, v, False)
    assert np.abs(rv - r0).max() > 1e-4  # the offset matters
    for k in range(N):
        m2 = model.copy()
        pin.framesForwardKinematics(model, data, q[k])
        fr = model.frames[fid]
        local = data.oMf[fid].rotation.T @ d
        pl = fr.placement * pin.SE3(np.eye(3), local)
        fid2 = m2.addFrame(pin.Frame("contact_point", fr.parentJoint, fr.parentFrame, pl,
                                     pin.FrameType.OP_FRAME))
        d2 = m2.createData()
        pin.forwardKinematics(m2, d2, q[k], v[k])
        np.testing.assert_allclose(rv[k], pin.getFrameVelocity(m2, d2, fid2, pin.LOCAL_WORLD_ALIGNED).linear,
                                   atol=1e-12)


def test_multi_frame_residuals_equal_the_single_frame_ones(setup):
    from fg_sysid.factors.contact import contact_motion_residuals

    model, data, fid, q, v, a = setup
    fids = [model.getFrameId(f) for f in ("FL_foot", "RR_foot")]
    d = np.array([0.0, 0.0, -0.02])
    rv, Jv, ra, Ja = contact_motion_residuals(model, data, fids, q, v, a, offset=d)
    for i, f in enumerate(fids):
        r1, J1 = contact_velocity_residual(model, data, f, q, v, offset=d)
        r2, J2 = contact_acceleration_residual(model, data, f, q, v, a, offset=d)
        np.testing.assert_allclose(rv[:, i], r1, atol=1e-12)
        np.testing.assert_allclose(Jv[:, i], J1, atol=1e-10)
        np.testing.assert_allclose(ra[:, i], r2, atol=1e-12)
        np.testing.assert_allclose(Ja[:, i], J2, atol=1e-10)
