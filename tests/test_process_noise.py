"""Constraint-consistent process noise (paper 004 eqs. 36–37): projector identities at random B1 (and
B1+Z1) configurations with 2–4 feet in contact, Gauss-principle optimality, rank-deficient J_c, and the
whitening identity of the regularised projected covariance."""

import itertools

import numpy as np
import pinocchio as pin
import pytest

from fg_sysid.factors.process_noise import (
    block_projector,
    contact_jacobian,
    dynamically_consistent_projector,
    kinematic_projector,
    projected_noise_whitener,
)
from fg_sysid.robots import load_robot

FEET = ("FL_foot", "FR_foot", "RL_foot", "RR_foot")


def _states(name, seed=0):
    model = load_robot(name).model
    data = model.createData()
    rng = np.random.default_rng(seed)
    out = []
    for nf in (2, 3, 4):
        for feet in itertools.islice(itertools.combinations(FEET, nf), 2):
            q = pin.randomConfiguration(model, -np.ones(model.nq), np.ones(model.nq))
            M = pin.crba(model, data, q)
            M = np.triu(M) + np.triu(M, 1).T
            Jc = contact_jacobian(model, data, q, [model.getFrameId(f) for f in feet])
            out.append((model, q, M, Jc, rng))
    return out


@pytest.fixture(scope="module", params=["b1", "b1_z1"])
def states(request):
    return _states(request.param)


def test_contact_jacobian_matches_frame_jacobians(states):
    model, q, M, Jc, _ = states[-1]
    data = model.createData()
    pin.computeJointJacobians(model, data, q)
    pin.updateFramePlacements(model, data)
    ref = np.vstack([pin.getFrameJacobian(model, data, model.getFrameId(f), pin.LOCAL_WORLD_ALIGNED)[:3]
                     for f in FEET])
    assert Jc.shape == (12, model.nv)
    np.testing.assert_allclose(Jc, ref, atol=1e-14)


def test_dynamically_consistent_projector(states):
    for model, _, M, Jc, rng in states:
        nv = model.nv
        Nd = dynamically_consistent_projector(M, Jc)
        assert Nd.shape == (nv, nv)
        np.testing.assert_allclose(Jc @ Nd, 0.0, atol=1e-10)  # feasible directions only
        np.testing.assert_allclose(Nd @ Nd, Nd, atol=1e-10)  # projector
        np.testing.assert_allclose(M @ Nd, (M @ Nd).T, atol=1e-10)  # M-orthogonal
        assert np.linalg.matrix_rank(Nd, tol=1e-8) == nv - np.linalg.matrix_rank(Jc)
        # reference formula with explicit inverses
        Mi = np.linalg.inv(M)
        ref = np.eye(nv) - Mi @ Jc.T @ np.linalg.inv(Jc @ Mi @ Jc.T) @ Jc
        np.testing.assert_allclose(Nd, ref, atol=1e-8)
        # Gauss's principle (eq. 38): N w minimises ‖w̃ − w‖_M over J_c w̃ = 0 — any feasible step is worse
        w = rng.normal(size=nv)
        wt = Nd @ w
        z = kinematic_projector(Jc) @ rng.normal(size=nv)  # a feasible direction
        costs = [(x - w) @ M @ (x - w) for x in (wt, wt + 1e-3 * z, wt - 1e-3 * z)]
        assert costs[0] <= min(costs[1:])
        # feasible directions are left untouched
        np.testing.assert_allclose(Nd @ z, z, atol=1e-10)


def test_kinematic_projector(states):
    for model, _, _, Jc, _ in states:
        Nk = kinematic_projector(Jc)
        np.testing.assert_allclose(Jc @ Nk, 0.0, atol=1e-10)
        np.testing.assert_allclose(Nk @ Nk, Nk, atol=1e-10)
        np.testing.assert_allclose(Nk, Nk.T, atol=1e-12)
        np.testing.assert_allclose(Nk, np.eye(model.nv) - np.linalg.pinv(Jc) @ Jc, atol=1e-9)


def test_rank_deficient_contacts():
    """A foot listed twice: J_c has 6 rows of rank 3; both projectors still project onto ker J_c."""
    model, q, M, _, _ = _states("b1", 4)[0]
    data = model.createData()
    fid = model.getFrameId("FR_foot")
    Jc = contact_jacobian(model, data, q, [fid, fid])
    Jref = contact_jacobian(model, data, q, [fid])
    assert np.linalg.matrix_rank(Jc) == 3
    np.testing.assert_allclose(dynamically_consistent_projector(M, Jc),
                               dynamically_consistent_projector(M, Jref), atol=1e-8)
    np.testing.assert_allclose(kinematic_projector(Jc), kinematic_projector(Jref), atol=1e-8)
    assert np.array_equal(dynamically_consistent_projector(M, np.zeros((0, model.nv))), np.eye(model.nv))


@pytest.mark.parametrize("floor", [1e-1, 1e-4])
def test_projected_noise_whitener(states, floor):
    for model, _, M, Jc, rng in states[::2]:
        nv = model.nv
        Nd = dynamically_consistent_projector(M, Jc)
        P = block_projector(Nd)
        sq, sv = rng.uniform(0.01, 0.1, nv), 0.5
        W = projected_noise_whitener(P, sq, sv, floor)
        assert W.shape == (2 * nv, 2 * nv)
        C = P @ np.diag(np.concatenate([sq**2, np.full(nv, sv**2)])) @ P.T + floor**2 * np.eye(2 * nv)
        np.testing.assert_allclose(W @ C @ W.T, np.eye(2 * nv), atol=1e-15 * np.linalg.cond(C))
        Ci = np.linalg.inv(C)
        np.testing.assert_allclose(W.T @ W, Ci, rtol=1e-6, atol=1e-6 * np.abs(Ci).max())
        # a unit constrained velocity disturbance (row space of J_c, orthogonal to range N) costs ~1/floor;
        # a projected (feasible) disturbance of the same size costs ~1/σ
        g = Jc.T @ rng.normal(size=Jc.shape[0])
        d_con = np.concatenate([np.zeros(nv), g / np.linalg.norm(g)])
        np.testing.assert_allclose(np.linalg.norm(W @ d_con), 1.0 / floor, rtol=1e-6)
        w = P @ np.concatenate([sq * rng.normal(size=nv), sv * rng.normal(size=nv)])
        assert np.linalg.norm(W @ w) < 10 * np.sqrt(2 * nv)


def test_whitener_rejects_bad_input():
    with pytest.raises(ValueError):
        projected_noise_whitener(np.eye(3), 0.1, 0.1, 1e-3)
    with pytest.raises(ValueError):
        projected_noise_whitener(np.eye(4), 0.1, 0.1, 0.0)
