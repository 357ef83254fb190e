"""IMU residuals (fg_sysid.factors.imu) on free-flyer robots: analytic Jacobians vs central differences
through pinocchio.integrate, and physical sanity (level accelerometer at rest reads +|g| up, gyro on the
base equals the base angular velocity, orientation residual zero at the true quaternion)."""

import numpy as np
import pinocchio as pin
import pytest
from jacobian_check import central_diff

from fg_sysid.factors.imu import accelerometer_residual, gyro_residual, orientation_residual
from fg_sysid.robots import load_robot

N = 2




def with_offset_imu(model):
    """Copy of ``model`` with an extra frame "imu_offset" on the base joint, rotated and offset from the
    base origin (a lever arm, so centripetal / Euler terms enter the accelerometer)."""
    model = pin.Model(model)
    rot = pin.rpy.rpyToMatrix(0.3, -0.2, 1.1)
    placement = pin.SE3(rot, np.array([0.12, -0.05, 0.04]))
    parent_frame = model.getFrameId("base")
    model.addFrame(pin.Frame("imu_offset", 1, parent_frame, placement, pin.FrameType.OP_FRAME))
    return model


def frame_ids(model):
    """Base frame, an offset IMU on the base, and a distal frame (end of the kinematic tree)."""
    distal = "gripperMover" if model.existFrame("gripperMover") else "FL_foot"
    return [model.getFrameId(n) for n in ("base", "imu_offset", distal)]


@pytest.fixture(scope="module", params=["b1", "b1_z1"])
def robot(request):
    return load_robot(request.param)


def random_state(model, rng):
    q = np.array([pin.randomConfiguration(model, -np.ones(model.nq), np.ones(model.nq)) for _ in range(N)])
    v = rng.uniform(-1, 1, (N, model.nv))
    a = rng.uniform(-2, 2, (N, model.nv))
    return q, v, a


def check_jacobian(model, J, resid, q, v, a):
    """Compare J[k] (3, 3nv) with central differences of resid(q, v, a) -> (N, 3) on knot k."""
    nv = model.nv
    for k in range(q.shape[0]):
        def f(d, k=k):
            qq, vv, aa = q.copy(), v.copy(), a.copy()
            qq[k] = pin.integrate(model, q[k], d[:nv])
            vv[k] = v[k] + d[nv:2 * nv]
            aa[k] = a[k] + d[2 * nv:]
            return resid(qq, vv, aa)[k]

        num = central_diff(f, np.zeros(3 * nv))
        scale = max(1.0, float(np.abs(resid(q, v, a)[k]).max()))
        np.testing.assert_allclose(J[k], num, rtol=0, atol=1e-6 * scale)
        assert np.abs(J[k]).max() > 1e-3  # nontrivial Jacobian


def test_imu_jacobians_match_central_differences(robot):
    model = with_offset_imu(robot.model)
    data = model.createData()
    rng = np.random.default_rng(3)
    q, v, a = random_state(model, rng)
    gyro = rng.standard_normal((N, 3))
    acc = rng.standard_normal((N, 3))
    quat = rng.standard_normal((N, 4))
    quat /= np.linalg.norm(quat, axis=1, keepdims=True)
    for fid in frame_ids(model):
        r, J = gyro_residual(model, data, fid, q, v, gyro)
        assert r.shape == (N, 3) and J.shape == (N, 3, 3 * model.nv)
        check_jacobian(model, J, lambda qq, vv, aa, fid=fid: gyro_residual(
            model, data, fid, qq, vv, gyro, False)[0], q, v, a)
        assert np.all(J[:, :, 2 * model.nv:] == 0)

        r, J = accelerometer_residual(model, data, fid, q, v, a, acc)
        assert r.shape == (N, 3)
        check_jacobian(model, J, lambda qq, vv, aa, fid=fid: accelerometer_residual(
            model, data, fid, qq, vv, aa, acc, False)[0], q, v, a)

        r, J = orientation_residual(model, data, fid, q, quat)
        assert r.shape == (N, 3)
        check_jacobian(model, J, lambda qq, vv, aa, fid=fid: orientation_residual(
            model, data, fid, qq, quat, False)[0], q, v, a)


def test_level_accelerometer_at_rest_reads_plus_g_up(robot):
    model = robot.model
    data = model.createData()
    fid = model.getFrameId("base")
    q = pin.neutral(model)[None]  # base level (identity base rotation)
    zero = np.zeros((1, model.nv))
    pin.framesForwardKinematics(model, data, q[0])
    R = data.oMf[fid].rotation
    f, _ = accelerometer_residual(model, data, fid, q, zero, zero, np.zeros((1, 3)), jacobians=False)
    g = model.gravity.linear
    expected = R.T @ (-g)  # +|g| along world up, in IMU axes
    np.testing.assert_allclose(f[0], expected, atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(f[0]), np.linalg.norm(g), atol=1e-12)
    assert (R @ f[0])[2] == pytest.approx(9.81)  # world z is up
    # the measurement enters with a minus sign: r = 0 at the true reading
    r, _ = accelerometer_residual(model, data, fid, q, zero, zero, f, jacobians=False)
    np.testing.assert_allclose(r, 0, atol=1e-12)


def test_gyro_on_base_equals_base_angular_velocity(robot):
    model = robot.model
    data = model.createData()
    fid = model.getFrameId("base")
    rng = np.random.default_rng(5)
    q, v, _ = random_state(model, rng)
    pin.framesForwardKinematics(model, data, q[0])
    # the "base" frame coincides with the free-flyer joint frame on these robots
    assert np.allclose(data.oMf[fid].homogeneous, data.oMi[1].homogeneous)
    r, _ = gyro_residual(model, data, fid, q, v, np.zeros((N, 3)), jacobians=False)
    np.testing.assert_allclose(r, v[:, 3:6], atol=1e-12)


def test_orientation_residual_zero_at_true_quaternion(robot):
    model = with_offset_imu(robot.model)
    data = model.createData()
    rng = np.random.default_rng(11)
    q, _, _ = random_state(model, rng)
    for fid in frame_ids(model):
        quat = []
        for qk in q:
            pin.framesForwardKinematics(model, data, qk)
            c = pin.Quaternion(data.oMf[fid].rotation).coeffs()  # (x, y, z, w)
            quat.append([c[3], c[0], c[1], c[2]])
        r, _ = orientation_residual(model, data, fid, q, np.array(quat), jacobians=False)
        np.testing.assert_allclose(r, 0, atol=1e-9)
        # and nonzero for a perturbed measurement
        r2, _ = orientation_residual(model, data, fid, q, np.array(quat) + [0, 0.1, 0, 0], jacobians=False)
        assert np.linalg.norm(r2) > 1e-2


def test_offset_accelerometer_sees_centripetal_acceleration(robot):
    """Lever arm: base at the origin, level, spinning with ω (zero origin velocity, a = 0): an IMU at
    offset r on the base reads R_offᵀ(ω × (ω × r) − g)."""
    model = with_offset_imu(robot.model)
    data = model.createData()
    fid = model.getFrameId("imu_offset")
    off = model.frames[fid].placement
    q = pin.neutral(model)[None]
    v = np.zeros((1, model.nv))
    w = np.array([0.4, -1.3, 2.0])
    v[0, 3:6] = w
    f, _ = accelerometer_residual(model, data, fid, q, v, np.zeros_like(v), np.zeros((1, 3)), jacobians=False)
    expected = off.rotation.T @ (np.cross(w, np.cross(w, off.translation)) - model.gravity.linear)
    np.testing.assert_allclose(f[0], expected, atol=1e-12)
    assert np.linalg.norm(np.cross(w, np.cross(w, off.translation))) > 0.1  # the check is not vacuous
