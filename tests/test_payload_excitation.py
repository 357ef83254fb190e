"""Safe exciting motions for payload identification: rigorous initial box, box-robust torque, optimizer."""

import numpy as np
import pinocchio as pin
import pytest

from fg_sysid.payload import RobotPrior, compose_payload
from fg_sysid.payload.excitation import (
    SafeExcitation,
    optimize_safe_excitation,
    payload_box_from_geometry,
    random_safe_motion,
)
from fg_sysid.robots import load_robot


@pytest.fixture(scope="module")
def setup():
    robot = load_robot("panda")
    prior = RobotPrior.from_robot(robot, fv=0.1, armature=np.array([0.3, 0.3, 0.3, 0.3, 0.1, 0.1, 0.1]))
    box = payload_box_from_geometry(prior, 3.0, 0.2)
    ev = SafeExcitation(robot, prior, box, duration=3.0, rate=25.0, h=3, n_torque=128)
    return robot, prior, box, ev


def test_geometric_box_contains_any_payload_inside_the_ball(setup):
    _, prior, (lo, hi), _ = setup
    rng = np.random.default_rng(0)
    ee = prior.pi[prior.ee_body]
    for _ in range(200):
        n = rng.integers(1, 6)  # a cloud of point masses within 0.2 m of the frame origin, total ≤ 3 kg
        pts = rng.normal(size=(n, 3))
        pts *= (0.2 * rng.uniform(0, 1, (n, 1)) ** (1 / 3)) / np.linalg.norm(pts, axis=1, keepdims=True)
        ms = rng.dirichlet(np.ones(n)) * rng.uniform(0, 3.0)
        th = ee.copy()
        for p, m in zip(pts, ms, strict=True):
            th = compose_payload(th, pin.Inertia(m, np.zeros(3), np.zeros((3, 3))), pin.SE3(np.eye(3), p))
        assert np.all((lo - 1e-12 <= th) & (th <= hi + 1e-12))


def test_box_robust_torque_is_the_exact_maximum(setup):
    """Sampled parameters in the box never exceed the bound; the sign-aligned vertex attains it."""
    robot, prior, (lo, hi), ev = setup
    rng = np.random.default_rng(1)
    q, v, a = rng.uniform(-1, 1, 7), rng.uniform(-1, 1, 7), rng.uniform(-2, 2, 7)
    W = pin.computeJointTorqueRegressor(ev.model, ev.data, q, v, a)
    Rt = np.concatenate([W[:, ev._cr], np.diag(a), np.diag(np.sign(v)), np.diag(v)], axis=1)
    We = W[:, ev._ce]
    bound = np.abs(We @ ev.c_e + Rt @ ev.theta_r0) + np.abs(We) @ ev.r_e + np.abs(Rt) @ ev.r_r
    for _ in range(200):
        te = rng.uniform(lo, hi)
        tr = ev.theta_r0 + ev.r_r * rng.uniform(-1, 1, ev.theta_r0.size)
        assert np.all(np.abs(We @ te + Rt @ tr) <= bound + 1e-9)
    j = 3
    s = np.sign(We[j] @ ev.c_e + Rt[j] @ ev.theta_r0)
    te = ev.c_e + s * np.sign(We[j]) * ev.r_e
    tr = ev.theta_r0 + s * np.sign(Rt[j]) * ev.r_r
    assert abs(We[j] @ te + Rt[j] @ tr) == pytest.approx(bound[j], rel=1e-12)
    assert ev._ratio(q, v, a) == pytest.approx(np.max(bound / robot.effort_limits()))


def test_optimizer_beats_random_within_limits(setup):
    robot, _, _, ev = setup
    traj, info = optimize_safe_excitation(ev, harmonics=3, seed=0, n_starts=2, max_evaluations=150)
    rnd = random_safe_motion(ev, harmonics=3, seed=0)
    random_conds = [ev.condition(random_safe_motion(ev, harmonics=3, seed=s)) for s in range(1, 6)]
    assert info["condition"] < 0.8 * np.median(random_conds), (info, random_conds)
    assert info["torque_ratio"] <= ev.torque_fraction * 1.01
    assert ev.torque_ratio(rnd) <= ev.torque_fraction + 1e-9
    lo, hi = robot.position_limits()
    t = np.linspace(0, ev.duration, 2000)
    q, v, _ = traj.evaluate(t)
    assert np.all((q >= lo) & (q <= hi)) and np.all(np.abs(v) <= robot.velocity_limits())
    np.testing.assert_allclose(v[0], 0.0, atol=1e-9)  # starts at rest


def test_obstacle_distances():
    from fg_sysid.payload.excitation import BoxObstacle, SphereObstacle

    s = SphereObstacle((1.0, 0.0, 0.0), 0.5)
    pts = np.array([[0.0, 0, 0], [1.0, 0, 0], [1.0, 2.0, 0]])
    np.testing.assert_allclose(s.distance(pts), [0.5, -0.5, 1.5])
    b = BoxObstacle((0.0, 0.0, 1.0), (0.5, 0.5, 0.25))
    pts = np.array([[0, 0, 1.0], [0, 0, 2.0], [1.5, 0, 1.0], [1.5, 1.5, 1.0], [0.4, 0, 1.0]])
    np.testing.assert_allclose(b.distance(pts), [-0.25, 0.75, 1.0, np.sqrt(2.0), -0.1])


def test_motions_keep_clear_of_an_obstacle_in_their_way(setup):
    """A ball put where the unconstrained random motion carries the payload: with it declared, the random
    and the optimized motions keep the arm and the payload ball clear of it (dense check), within limits."""
    from fg_sysid.payload.excitation import PayloadError, SphereObstacle

    robot, prior, box, ev = setup
    free = random_safe_motion(ev, harmonics=3, seed=0)
    t = np.linspace(0, ev.duration, 400)
    q, _, _ = free.evaluate(t)
    ee = []
    for qk in q:
        pin.forwardKinematics(ev.model, ev.data, qk)
        ee.append(ev.data.oMi[prior.ee_body + 1].translation.copy())
    ee = np.array(ee)
    for k in np.argsort(-np.linalg.norm(ee - ee[0], axis=1)):  # far from the start, clear of the centre pose
        try:
            ob = SafeExcitation(robot, prior, box, duration=3.0, rate=25.0, h=3, n_torque=128,
                                obstacles=(SphereObstacle(tuple(ee[k]), 0.03),), payload_radius=0.05,
                                link_radius=0.02, centre=ev.centre)
        except PayloadError:
            continue
        if ob.clearance_at(ev.centre) > 0.02:
            break
    else:
        pytest.fail("no obstacle position clear of the centre pose")
    assert ob.clearance(free, n=400) < 0  # the free motion runs into it
    rnd = random_safe_motion(ob, harmonics=3, seed=0)
    traj, info = optimize_safe_excitation(ob, harmonics=3, seed=0, n_starts=2, max_evaluations=60)
    for m in (rnd, traj):
        assert ob.clearance(m, n=1000) >= -1e-3  # sampled check at 128 instants, dense re-check at 1000
        assert ob.torque_ratio(m) <= ob.torque_fraction + 1e-9
    # a centre pose inside the obstacle is refused with a clear message
    with pytest.raises(PayloadError, match="collides"):
        SafeExcitation(robot, prior, box, obstacles=(SphereObstacle(tuple(ee[0]), 0.2),), centre=ev.centre)
