"""Quintic Bézier chains (paper 002's trajectory family): C² through the waypoints, rest to rest,
derivatives consistent, control-point bounds hold in continuous time; the safe-excitation optimizer
on them."""

import numpy as np
import pytest

from fg_sysid.payload import RobotPrior
from fg_sysid.payload.bezier import BezierTrajectory, rest_to_rest
from fg_sysid.payload.excitation import (
    SafeExcitation,
    optimize_safe_excitation,
    payload_box_from_geometry,
    random_safe_motion,
)
from fg_sysid.robots import load_robot


def _random_chain(seed=0, pieces=3, n=2, T=0.7):
    rng = np.random.default_rng(seed)
    k = pieces - 1
    return rest_to_rest(rng.normal(size=(k, n)), rng.normal(size=(k, n)), rng.normal(size=(k, n)),
                        rng.normal(size=n), T)


def test_waypoints_continuity_and_rest():
    tr = _random_chain()
    T = tr.piece_duration
    for i in range(tr.pieces + 1):
        q, v, a = tr.evaluate(np.array([i * T]))
        np.testing.assert_allclose(q[0], tr.q[i], atol=1e-12)
        np.testing.assert_allclose(v[0], tr.v[i], atol=1e-10)
        np.testing.assert_allclose(a[0], tr.a[i], atol=1e-9)
        if 0 < i < tr.pieces:  # C²: left and right limits agree
            ql, vl, al = tr.evaluate(np.array([i * T - 1e-9]))
            qr, vr, ar = tr.evaluate(np.array([i * T + 1e-9]))
            np.testing.assert_allclose(vl, vr, atol=1e-6)
            np.testing.assert_allclose(al, ar, atol=1e-5)
    _, v0, a0 = tr.evaluate(np.array([0.0, tr.duration]))
    np.testing.assert_allclose(v0, 0, atol=1e-12)
    np.testing.assert_allclose(a0, 0, atol=1e-12)


def test_derivatives_and_continuous_bounds():
    tr = _random_chain(seed=1, pieces=4, n=3)
    t = np.linspace(0, tr.duration, 20001)
    q, v, a = tr.evaluate(t)
    h = t[1] - t[0]
    np.testing.assert_allclose(np.gradient(q, h, axis=0)[1:-1], v[1:-1], atol=2e-4 * np.abs(v).max())
    np.testing.assert_allclose(np.gradient(v, h, axis=0)[1:-1], a[1:-1], atol=2e-3 * np.abs(a).max())
    b = tr.bounds()
    assert np.all(q >= b["q_min"] - 1e-12) and np.all(q <= b["q_max"] + 1e-12)
    assert np.all(np.abs(v) <= b["v_max"] + 1e-12)
    s = tr.scaled_about(tr.q[0], 0.5)
    qs, vs, _ = s.evaluate(t)
    np.testing.assert_allclose(qs, tr.q[0] + 0.5 * (q - tr.q[0]), atol=1e-12)
    np.testing.assert_allclose(vs, 0.5 * v, atol=1e-12)
    with pytest.raises(ValueError):
        BezierTrajectory(np.zeros((1, 2)), np.zeros((1, 2)), np.zeros((1, 2)), 1.0)


def test_safe_bezier_excitation_within_limits_and_better_than_random():
    robot = load_robot("panda")
    prior = RobotPrior.from_robot(robot, fv=0.1, armature=np.full(7, 0.2))
    ev = SafeExcitation(robot, prior, payload_box_from_geometry(prior, 3.0, 0.2), duration=3.0, rate=25.0,
                        h=3, n_torque=128)
    traj, info = optimize_safe_excitation(ev, family="bezier", pieces=3, seed=0, n_starts=2,
                                          max_evaluations=120)
    assert isinstance(traj, BezierTrajectory) and traj.duration == pytest.approx(3.0)
    random_conds = [ev.condition(random_safe_motion(ev, family="bezier", pieces=3, seed=s)) for s in range(4)]
    assert info["condition"] < np.median(random_conds), (info, random_conds)
    lo, hi = robot.position_limits()
    b = traj.bounds()  # continuous time, from the control points
    assert np.all(b["q_min"] >= lo) and np.all(b["q_max"] <= hi)
    assert np.all(b["v_max"] <= robot.velocity_limits())
    assert info["torque_ratio"] <= ev.torque_fraction * 1.01
