"""Loop-closure residuals (fg_sysid.factors.loops): analytic Jacobians against central differences on
random states of two looped robots (the planar four-bar and a floating humanoid tree with closures
between its limbs), plus the identities that tie the levels together."""

import numpy as np
import pinocchio as pin
import pytest
from jacobian_check import central_diff

from fg_sysid.factors.loops import LoopClosures
from fg_sysid.robots.loop_examples import fourbar_angles, planar_fourbar
from fg_sysid.robots.loops import LoopClosure


def _humanoid():
    model = pin.buildSampleModelHumanoidRandom(True)  # free flyer, two arms, two legs
    model.addFrame(pin.Frame("lhand_pt", model.getJointId("larm6_joint"),
                             pin.SE3(pin.rpy.rpyToMatrix(0.3, -0.2, 0.5), np.array([0.05, 0.02, -0.1])),
                             pin.FrameType.OP_FRAME))
    model.addFrame(pin.Frame("rhand_pt", model.getJointId("rarm6_joint"),
                             pin.SE3(pin.rpy.rpyToMatrix(-0.1, 0.4, 0.2), np.array([0.03, -0.04, -0.08])),
                             pin.FrameType.OP_FRAME))
    model.addFrame(pin.Frame("lleg_pt", model.getJointId("lleg6_joint"), pin.SE3.Random(),
                             pin.FrameType.OP_FRAME))
    loops = [LoopClosure("hands6d", ("lhand_pt", "rhand_pt"), "6d"),
             LoopClosure("hands3d", ("rhand_pt", "lhand_pt"), "point3d"),
             LoopClosure("handleg", ("lleg_pt", "lhand_pt"), "planar", "z")]
    return model, loops


def _robots(tmp_path):
    fb = planar_fourbar(tmp_path)
    out = [("fourbar-point3d", fb.model, list(fb.loops)),
           ("fourbar-planar", fb.model, [LoopClosure("fb", ("coupler_tip", "rocker_tip"), "planar", "y")])]
    m, loops = _humanoid()
    out.append(("humanoid", m, loops))
    return out


def _states(model, rng, n=2):
    q = np.array([pin.randomConfiguration(model, -np.ones(model.nq), np.ones(model.nq)) for _ in range(n)])
    if model.joints[1].nq == 7:
        for k in range(n):
            q[k, :3] = rng.normal(size=3)
            q[k, 3:7] = pin.Quaternion(pin.SE3.Random().rotation).coeffs()
    return q, rng.normal(size=(n, model.nv)), rng.normal(size=(n, model.nv))


def _dq(model, q, f):
    """∂f(q ⊕ δ)/∂δ at δ = 0 by central differences on the tangent space."""
    return central_diff(lambda d: f(pin.integrate(model, q, d)), np.zeros(model.nv))


@pytest.mark.parametrize("which", [0, 1, 2])
def test_loop_jacobians_match_central_differences(tmp_path, which):
    name, model, loops = _robots(tmp_path)[which]
    L = LoopClosures(model, loops)
    rng = np.random.default_rng(which)
    Q, V, A = _states(model, rng)
    lam = rng.normal(size=(Q.shape[0], L.m))
    for k in range(Q.shape[0]):
        _check_knot(name, model, L, Q[k], V[k], A[k], lam[k])


def _check_knot(name, model, L, q, v, a, lam_k):
    r, J = L.position(q[None])
    np.testing.assert_allclose(J[0], _dq(model, q, lambda x: L.position(x[None], False)[0][0]),
                               atol=1e-6, err_msg=f"{name}: ∂φ/∂q")
    mo = L.motion(q[None], v[None], a[None])
    fv = lambda x, v_, a_: L.motion(x[None], v_[None], a_[None], False)  # noqa: E731
    np.testing.assert_allclose(mo.cv_q[0], _dq(model, q, lambda x: fv(x, v, a).cv[0]), atol=1e-6,
                               err_msg=f"{name}: ∂φ_v/∂q")
    np.testing.assert_allclose(mo.cv_v[0], central_diff(lambda x: fv(q, x, a).cv[0], v), atol=1e-6)
    np.testing.assert_allclose(mo.ca_q[0], _dq(model, q, lambda x: fv(x, v, a).ca[0]), atol=1e-5,
                               err_msg=f"{name}: ∂φ_a/∂q")
    np.testing.assert_allclose(mo.ca_v[0], central_diff(lambda x: fv(q, x, a).ca[0], v), atol=1e-6,
                               err_msg=f"{name}: ∂φ_a/∂v")
    np.testing.assert_allclose(mo.ca_a[0], central_diff(lambda x: fv(q, v, x).ca[0], a), atol=1e-6)
    tau, dq, dl = L.generalized_force(q[None], lam_k[None])
    np.testing.assert_allclose(dq[0], _dq(model, q, lambda x: L.generalized_force(
        x[None], lam_k[None], False)[0][0]), atol=1e-6, err_msg=f"{name}: ∂(Gᵀλ)/∂q")
    np.testing.assert_allclose(dl[0], central_diff(lambda x: L.generalized_force(
        q[None], x[None], False)[0][0], lam_k), atol=1e-6)
    # identities: τ_c = Gᵀλ with G = ∂φ_v/∂v (virtual power λ·φ_v = τ_c·v); φ_a's a-Jacobian is G
    np.testing.assert_allclose(dl[0], mo.cv_v[0].T, atol=1e-12)
    np.testing.assert_allclose(tau[0] @ v, lam_k @ mo.cv[0], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(mo.ca_a[0], mo.cv_v[0], atol=1e-12)
    assert np.abs(J[0]).max() > 0.1 and np.abs(dq[0]).max() > 1e-3  # non-trivial states


def test_velocity_and_acceleration_are_time_derivatives(tmp_path):
    """point3d: φ_v = dφ/dt and φ_a = dφ_v/dt along any path; planar and point3d: φ, φ_v, φ_a all vanish
    along an assembled, accelerating path of the four-bar (consistent levels: no Baumgarte needed)."""
    fb = planar_fourbar(tmp_path)
    model = fb.model
    pt = LoopClosures(model, fb.loops)
    rng = np.random.default_rng(3)
    q0, v0, a0 = rng.normal(size=3), rng.normal(size=3), rng.normal(size=3)
    h = 1e-5

    def at(L, t):
        return L.motion((q0 + v0 * t + 0.5 * a0 * t ** 2)[None], (v0 + a0 * t)[None], a0[None], False)

    dphi = (pt.position((q0 + v0 * h + 0.5 * a0 * h * h)[None], False)[0]
            - pt.position((q0 - v0 * h + 0.5 * a0 * h * h)[None], False)[0]) / (2 * h)
    np.testing.assert_allclose(at(pt, 0).cv, dphi, atol=1e-7)
    np.testing.assert_allclose(at(pt, 0).ca, (at(pt, h).cv - at(pt, -h).cv) / (2 * h), atol=1e-6)
    base = np.array(fourbar_angles(1.0))
    ref = np.array([base[0], base[1] - base[0], base[2]])

    def assembled(t):  # crank angle 1 + 0.8 t + 0.6 t², coupler relative angle, rocker angle
        p = np.array(fourbar_angles(1.0 + 0.8 * t + 0.6 * t * t))
        return np.array([p[0], p[1] - p[0], p[2]]) - ref

    pl = LoopClosures(model, [LoopClosure("p", ("coupler_tip", "rocker_tip"), "planar", "y")])
    q, v = assembled(0.0), (assembled(h) - assembled(-h)) / (2 * h)
    a = (assembled(1e-3) - 2 * assembled(0.0) + assembled(-1e-3)) / 1e-6
    for L in (pt, pl):
        assert np.abs(L.position(q[None], False)[0]).max() < 1e-12
        mo = L.motion(q[None], v[None], a[None], False)
        assert np.abs(mo.cv).max() < 1e-8 and np.abs(mo.ca).max() < 1e-4
        assert np.abs(L.motion(q[None], v[None], np.zeros((1, 3)), False).ca).max() > 0.05  # a matters


def test_fourbar_assembled_at_zero_and_closure_forces_balance(tmp_path):
    """q = 0 is assembled (φ = 0); a small crank rotation breaks it unless the others follow."""
    fb = planar_fourbar(tmp_path)
    L = LoopClosures(fb.model, fb.loops)
    r, _ = L.position(np.zeros((1, 3)))
    assert np.abs(r).max() < 1e-12
    r2, _ = L.position(np.array([[0.05, 0.0, 0.0]]))
    assert np.abs(r2).max() > 1e-3
    p1, p2, p3 = fourbar_angles(1.0)
    # the rows of G span the closure: a velocity that moves the mechanism as a linkage satisfies G v = 0
    p1b, p2b, p3b = fourbar_angles(1.0 + 1e-6)
    vdir = np.array([1e-6, (p2b - p2) - 1e-6, p3b - p3]) / 1e-6
    mo = L.motion(np.zeros((1, 3)), vdir[None], np.zeros((1, 3)), False)
    assert np.abs(mo.cv).max() < 1e-5


def test_bad_closures_are_rejected(tmp_path):
    fb = planar_fourbar(tmp_path)
    with pytest.raises(ValueError, match="not in the model"):
        LoopClosures(fb.model, [LoopClosure("x", ("coupler_tip", "nope"))])
    with pytest.raises(ValueError, match="axis"):
        LoopClosure("x", ("a", "b"), "planar")
    with pytest.raises(ValueError, match="unknown type"):
        LoopClosure("x", ("a", "b"), "hinge")
