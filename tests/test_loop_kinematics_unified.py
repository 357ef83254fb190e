"""One closure-kinematics implementation (issue 11 code health): `robots.loop_kinematics.ClosureKinematics`
against the formulas of the truth/baseline class it replaced, on random states of the four-bar, the B1 leg
and the floating B1; the estimator's `factors.loops.LoopClosures` is the same kinematics."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from fg_sysid.datasets.mujoco_loops import reference_configuration
from fg_sysid.factors.loops import LoopClosures
from fg_sysid.robots import load_robot
from fg_sysid.robots.loop_kinematics import POINT_TYPES, ClosureError, ClosureKinematics
from fg_sysid.robots.loops import LoopClosure, passive_mask

_LWA = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
ROBOTS = ("fourbar", "b1_leg_fourbar", "b1_fourbar")


def _old(model, loops, q, v):
    """The replaced class's formulas (gap p_A − p_B, rows of R_Aᵀ for planar closures, J from the LWA
    frame Jacobians without the ∂R_A term, J̇v from the frames' classical accelerations at a = 0)."""
    data = model.createData()
    pin.computeJointJacobians(model, data, q)
    pin.forwardKinematics(model, data, q, v, np.zeros(model.nv))
    pin.updateFramePlacements(model, data)
    res, jac, jdv = [], [], []
    for lp in loops:
        a, b = (model.getFrameId(f) for f in lp.frames)
        rows = [0, 1, 2] if lp.type == "point3d" else [i for i in range(3) if i != "xyz".index(lp.axis)]
        proj = np.eye(3) if lp.type == "point3d" else data.oMf[a].rotation.T[rows]
        res.append(proj @ (data.oMf[a].translation - data.oMf[b].translation))
        jac.append(proj @ (pin.getFrameJacobian(model, data, a, _LWA)[:3]
                           - pin.getFrameJacobian(model, data, b, _LWA)[:3]))
        jdv.append(proj @ (pin.getFrameClassicalAcceleration(model, data, a, _LWA).linear
                           - pin.getFrameClassicalAcceleration(model, data, b, _LWA).linear))
    return np.concatenate(res), np.vstack(jac), np.concatenate(jdv)


@pytest.mark.parametrize("name", ROBOTS)
def test_unified_kinematics_reproduce_the_replaced_formulas(name):
    robot = load_robot(name)
    model = robot.model
    ck = ClosureKinematics(model, robot.loops)
    rng = np.random.default_rng(11)
    dep = np.asarray(robot.joint_index_v(), int)[passive_mask(robot)]
    for _ in range(4):
        q = pin.randomConfiguration(model, -np.ones(model.nq), np.ones(model.nq))
        v = rng.normal(size=model.nv)
        r_old, J_old, jdv_old = _old(model, robot.loops, q, v)
        # the sign convention is p_b − p_a now (the estimator's): every quantity flips exactly
        np.testing.assert_array_equal(ck.residual(q), -r_old)
        np.testing.assert_array_equal(ck.jacobian(q), -J_old)
        np.testing.assert_allclose(ck.jdot_v(q, v), -jdv_old, rtol=0, atol=1e-12)
        assert np.abs(r_old).max() > 1e-3  # off the manifold: the exact Jacobian has the ∂R_a term
    # closed: the exact position Jacobian (the estimator's) equals the manifold one
    q = reference_configuration(robot)
    q[np.asarray(robot.joint_index_q(), int)[~passive_mask(robot)]] += 0.05
    q = ck.solve_passive(q, dep)
    assert np.abs(ck.residual(q)).max() < 1e-12
    np.testing.assert_allclose(ck.position(q[None])[1][0], ck.jacobian(q), rtol=0, atol=1e-10)


@pytest.mark.parametrize("name", ROBOTS)
def test_estimator_closures_are_the_same_kinematics(name):
    robot = load_robot(name)
    L, ck = LoopClosures(robot.model, robot.loops), ClosureKinematics(robot.model, robot.loops)
    assert isinstance(L, ClosureKinematics) and L.m == ck.m == sum(c.rows for c in robot.loops)
    rng = np.random.default_rng(3)
    Q = np.array([pin.randomConfiguration(robot.model, -np.ones(robot.model.nq), np.ones(robot.model.nq))
                  for _ in range(3)])
    V, A = rng.normal(size=(2, 3, robot.nv))
    for x, y in zip(L.position(Q), ck.position(Q), strict=True):
        np.testing.assert_array_equal(x, y)
    np.testing.assert_array_equal(L.motion(Q, V, A).ca_q, ck.motion(Q, V, A).ca_q)


def test_unsupported_closures_and_frames_name_the_culprit():
    robot = load_robot("fourbar")
    weld = LoopClosure("weld", ("coupler_tip", "rocker_tip"), "6d")
    assert ClosureKinematics(robot.model, [weld]).m == 6  # the estimator's kinematics take 6d closures
    with pytest.raises(ClosureError, match="'weld'.*'6d'"):
        ClosureKinematics(robot.model, [weld], types=POINT_TYPES)  # the truth / baseline do not
    with pytest.raises(ClosureError, match="'nope'"):
        ClosureKinematics(robot.model, [LoopClosure("x", ("coupler_tip", "nope"))])
    with pytest.raises(ClosureError, match="at least one closure"):
        ClosureKinematics(robot.model, [])


def test_closed_trajectory_stays_on_the_closures_and_maps_actuated_columns():
    """`closed_trajectory` (the truth's and the baseline's one continuation loop): every sample closed,
    G v = 0 and G a + Ġ v = 0 (paper 000 eqs. 6, 21–22), actuated coordinates as given; `actuated_map`
    picks the actuated columns of G = [I; −J_u⁻¹ J_a]."""
    robot = load_robot("b1_leg_fourbar")
    ck = ClosureKinematics(robot.model, robot.loops)
    pas = passive_mask(robot)
    iv, iq = np.asarray(robot.joint_index_v(), int), np.asarray(robot.joint_index_q(), int)
    t = np.linspace(0.0, 0.5, 26)[:, None]
    q0 = reference_configuration(robot)
    qa = q0[iq[~pas]] + 0.2 * np.sin(3 * t + np.arange((~pas).sum()))
    va = 0.6 * np.cos(3 * t + np.arange((~pas).sum()))
    aa = -1.8 * np.sin(3 * t + np.arange((~pas).sum()))
    Q, V, A = ck.closed_trajectory(q0, qa, va, aa, iq[~pas], iv[~pas], iv[pas])
    np.testing.assert_array_equal(Q[:, iq[~pas]], qa)
    np.testing.assert_array_equal(V[:, iv[~pas]], va)
    for q, v, a in zip(Q, V, A, strict=True):
        J = ck.jacobian(q)
        assert np.abs(ck.residual(q)).max() < 1e-12
        assert np.abs(J @ v).max() < 1e-10 and np.abs(J @ a + ck.jdot_v(q, v)).max() < 1e-9
    G, cols = ck.actuated_map(Q[5], iv[pas], iv[~pas])
    np.testing.assert_array_equal(G[iv[~pas]][:, cols], np.eye(len(cols)))
    np.testing.assert_allclose(G[:, cols] @ va[5], V[5], atol=1e-12)
