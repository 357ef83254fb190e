"""Contact-force residuals (measured force, unilateral, friction cone): Jacobians vs central differences
through ``pin.integrate`` on b1 / b1_z1, and the hinge oracles (exactly 0 inside the feasible set,
positive outside)."""

import numpy as np
import pinocchio as pin
import pytest
from jacobian_check import central_diff

from fg_sysid.factors.contact_forces import (
    friction_cone_residual,
    measured_force_residual,
    unilateral_residual,
)
from fg_sysid.robots import load_robot

N = 3
MU = 0.6


@pytest.fixture(scope="module", params=["b1", "b1_z1"])
def setup(request):
    model = load_robot(request.param).model
    data = model.createData()
    fid = model.getFrameId("RL_foot")
    rng = np.random.default_rng(5)
    q = np.array([pin.randomConfiguration(model, -np.ones(model.nq), np.ones(model.nq)) for _ in range(N)])
    return model, data, fid, q, rng


def _rot(model, data, fid, q):
    pin.framesForwardKinematics(model, data, q)
    return data.oMf[fid].rotation.copy()


def _local_from_world(model, data, fid, q, f_world):
    return np.array([_rot(model, data, fid, q[k]).T @ f_world[k] for k in range(len(q))])


def _check(fun, model, q, lam, Jq, Jl):
    nv = model.nv
    for k in range(N):
        num_q = central_diff(lambda d, k=k: fun(pin.integrate(model, q[k], d)[None], lam[k][None])[0],
                             np.zeros(nv))
        num_l = central_diff(lambda d, k=k: fun(q[k][None], (lam[k] + d)[None])[0], np.zeros(3))
        scale = max(1.0, np.abs(num_q).max())
        np.testing.assert_allclose(Jq[k], num_q, atol=1e-6 * scale)
        np.testing.assert_allclose(Jl[k], num_l, atol=1e-7)


def test_measured_force_residual(setup):
    model, data, fid, q, rng = setup
    lam = rng.normal(0, 50, (N, 3))
    fm = rng.normal(0, 50, 3)
    r, Jq, Jl = measured_force_residual(model, data, fid, q, lam, fm)
    assert r.shape == (N, 3) and Jq.shape == (N, 3, model.nv) and Jl.shape == (N, 3, 3)
    _check(lambda qq, ll: measured_force_residual(model, data, fid, qq, ll, fm, False)[0],
           model, q, lam, Jq, Jl)
    # oracle: a local force built from the world measurement reproduces it exactly
    fw = rng.normal(0, 50, (N, 3))
    lam0 = _local_from_world(model, data, fid, q, fw)
    r0, _, _ = measured_force_residual(model, data, fid, q, lam0, fw, False)
    np.testing.assert_allclose(r0, 0.0, atol=1e-10)


def _world_forces(rng, inside, normal):
    """Random world forces strictly inside / outside the cone ‖f_t‖ ≤ μ f_n about ``normal``."""
    t1 = np.cross(normal, [1.0, 0.0, 0.0] if abs(normal[0]) < 0.9 else [0.0, 1.0, 0.0])
    t1 /= np.linalg.norm(t1)
    t2 = np.cross(normal, t1)
    fn = rng.uniform(20, 100, N)
    ratio = rng.uniform(0.0, 0.8, N) if inside else rng.uniform(1.3, 3.0, N)
    ang = rng.uniform(0, 2 * np.pi, N)
    ft = (ratio * MU * fn)[:, None] * (np.cos(ang)[:, None] * t1 + np.sin(ang)[:, None] * t2)
    return fn[:, None] * normal + ft


@pytest.mark.parametrize("normal", [(0.0, 0.0, 1.0), (0.2, -0.1, 1.0)])
def test_unilateral(setup, normal):
    model, data, fid, q, rng = setup
    n = np.asarray(normal) / np.linalg.norm(normal)
    push = _world_forces(rng, True, n)
    r, Jq, Jl = unilateral_residual(model, data, fid, q, _local_from_world(model, data, fid, q, push), normal)
    assert r.shape == (N, 1) and np.all(r == 0.0) and not Jq.any() and not Jl.any()
    pull = -push
    lam = _local_from_world(model, data, fid, q, pull)
    r, Jq, Jl = unilateral_residual(model, data, fid, q, lam, normal)
    np.testing.assert_allclose(r[:, 0], pull @ -n, rtol=1e-12)
    assert np.all(r > 0) and Jq.shape == (N, 1, model.nv) and Jl.shape == (N, 1, 3)
    _check(lambda qq, ll: unilateral_residual(model, data, fid, qq, ll, normal, False)[0],
           model, q, lam, Jq, Jl)


@pytest.mark.parametrize("normal", [(0.0, 0.0, 1.0), (0.2, -0.1, 1.0)])
def test_friction_cone(setup, normal):
    model, data, fid, q, rng = setup
    n = np.asarray(normal) / np.linalg.norm(normal)
    inside = _world_forces(rng, True, n)
    lam_in = _local_from_world(model, data, fid, q, inside)
    r, Jq, Jl = friction_cone_residual(model, data, fid, q, lam_in, MU, normal)
    assert r.shape == (N, 1) and np.all(r == 0.0) and not Jq.any() and not Jl.any()
    # pure normal force (λ_t = 0, where the unsmoothed norm has no derivative) and zero force: inside, r = 0
    for fw in (np.tile(30 * n, (N, 1)), np.zeros((N, 3))):
        r0, _, _ = friction_cone_residual(model, data, fid, q, _local_from_world(model, data, fid, q, fw), MU,
                                          normal)
        assert np.all(r0 == 0.0)
    outside = _world_forces(rng, False, n)
    lam = _local_from_world(model, data, fid, q, outside)
    eps = 1e-3
    r, Jq, Jl = friction_cone_residual(model, data, fid, q, lam, MU, normal, eps)
    fn = outside @ n
    ft = np.linalg.norm(outside - fn[:, None] * n, axis=1)
    assert np.all(r[:, 0] > 0)
    np.testing.assert_allclose(r[:, 0], np.sqrt(ft**2 + eps**2) - eps - MU * fn, rtol=1e-12)
    assert np.all(r[:, 0] <= ft - MU * fn) and np.all(r[:, 0] >= ft - MU * fn - eps)
    _check(lambda qq, ll: friction_cone_residual(model, data, fid, qq, ll, MU, normal, eps, False)[0],
           model, q, lam, Jq, Jl)
    # a pulling force (λ_n < 0) with no tangential part is outside the cone too
    lam_pull = _local_from_world(model, data, fid, q, np.tile(-10 * n, (N, 1)))
    r2, _, _ = friction_cone_residual(model, data, fid, q, lam_pull, MU, normal)
    np.testing.assert_allclose(r2[:, 0], MU * 10, rtol=1e-12)


def test_smooth_norm_jacobian_at_zero_tangential(setup):
    """With a large ε the cone residual is active at λ_t = 0 for λ_n < 0 and its Jacobian is finite there."""
    model, data, fid, q, rng = setup
    n = np.array([0.0, 0.0, 1.0])
    lam = _local_from_world(model, data, fid, q, np.tile(-5 * n, (N, 1)) + rng.normal(0, 1e-3, (N, 3)))
    r, Jq, Jl = friction_cone_residual(model, data, fid, q, lam, MU, n, 0.5)
    assert np.all(r > 0) and np.all(np.isfinite(Jq))
    _check(lambda qq, ll: friction_cone_residual(model, data, fid, qq, ll, MU, n, 0.5, False)[0],
           model, q, lam, Jq, Jl)
