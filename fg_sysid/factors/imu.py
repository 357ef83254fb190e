"""IMU residuals (gyroscope, accelerometer, orientation) on the knot states x_k = (q_k, v_k, a_k).

The IMU is rigidly attached to a Pinocchio frame ``frame_id`` (e.g. a floating-base robot's torso /
"base" frame); its axes are the frame's axes and its measurement point is the frame origin — the torso
IMU of paper 004 Sec. IX-A. Residuals are batched over N knots, like :mod:`.kinematics`, and their
Jacobians are w.r.t. tangent perturbations (q ⊕ δq via ``pinocchio.integrate``, v + δv, a + δa), with
columns ordered (δq, δv, δa), each of size nv, i.e. shape (N, 3, 3 nv).

* Gyroscope:      r = ω_imu(q, v) − ω̂                                                       [rad/s]
  ω_imu is the angular velocity of the frame expressed in its own (LOCAL) axes.
* Accelerometer:  r = R_imuᵀ (p̈_imu − g) − f̂                                                [m/s²]
  specific force at the IMU point: the classical acceleration p̈_imu of the frame origin (lever arm
  included) minus gravity ``model.gravity.linear`` (world axes), both expressed in IMU axes; a level
  accelerometer at rest reads +|g| along the world up axis.
* Orientation:    r = Log3(R̂ᵀ R_imu(q))                                                      [rad]
  R̂ is the measured orientation of the IMU frame in the world (quaternion w, x, y, z).
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from .batched import cross, cross_cols


def quat_wxyz_to_rotation(quat: np.ndarray) -> np.ndarray:
    """Rotation matrices (N, 3, 3) from quaternions (N, 4) ordered (w, x, y, z); normalized first."""
    quat = np.atleast_2d(np.asarray(quat, float))
    out = np.empty((quat.shape[0], 3, 3))
    for k, (w, x, y, z) in enumerate(quat):
        out[k] = pin.Quaternion(w, x, y, z).normalized().toRotationMatrix()
    return out


def gyro_residual(model: pin.Model, data: pin.Data, frame_id: int, q, v, gyro_meas, jacobians=True):
    """r = ω_imu(q, v) − ω̂ (N, 3) [rad/s], ω in IMU (LOCAL) axes; Jacobian (N, 3, 3nv) or None.

    The Jacobian has nonzero δq and δv blocks (from ``getFrameVelocityDerivatives`` in LOCAL); δa is 0.
    """
    q, v = np.atleast_2d(q), np.atleast_2d(v)
    gyro_meas = np.atleast_2d(np.asarray(gyro_meas, float))
    n, nv = v.shape
    om = np.empty((n, 3))
    J = np.zeros((n, 3, 3 * nv)) if jacobians else None
    dv = np.empty((n, 2, 6, nv)) if jacobians else None
    zero = np.zeros(nv)
    for k in range(n):  # Pinocchio only; the rows are cut out below for all knots at once
        if jacobians:
            pin.computeForwardKinematicsDerivatives(model, data, q[k], v[k], zero)
            dv[k] = pin.getFrameVelocityDerivatives(model, data, frame_id, pin.LOCAL)
        else:
            pin.forwardKinematics(model, data, q[k], v[k])
        om[k] = pin.getFrameVelocity(model, data, frame_id, pin.LOCAL).angular
    if jacobians:
        J[:, :, :nv] = dv[:, 0, 3:]
        J[:, :, nv:2 * nv] = dv[:, 1, 3:]
    return om - gyro_meas, J


def accelerometer_residual(model: pin.Model, data: pin.Data, frame_id: int, q, v, a, acc_meas,
                           jacobians=True):
    """r = R_imuᵀ (p̈_imu − g) − f̂ (N, 3) [m/s²] (specific force in IMU axes); Jacobian (N, 3, 3nv).

    With the LOCAL spatial velocity (ν, ω) and spatial acceleration (α_lin, α_ang) of the frame, the
    classical acceleration of its origin in IMU axes is α_lin + ω × ν; the gravity term −Rᵀg varies with
    the frame rotation R ← R Exp(δθ), δθ = J_ang,local δq, as d(−Rᵀg) = −[Rᵀg]× δθ.
    """
    q, v, a = np.atleast_2d(q), np.atleast_2d(v), np.atleast_2d(a)
    acc_meas = np.atleast_2d(np.asarray(acc_meas, float))
    n, nv = v.shape
    g = np.asarray(model.gravity.linear, float)
    R = np.empty((n, 3, 3))
    vel = np.empty((n, 6))
    acc = np.empty((n, 6))
    dacc = np.empty((n, 4, 6, nv)) if jacobians else None
    for k in range(n):  # one Pinocchio pass per knot; the algebra is batched over knots below
        if jacobians:
            pin.computeForwardKinematicsDerivatives(model, data, q[k], v[k], a[k])
            dacc[k] = pin.getFrameAccelerationDerivatives(model, data, frame_id, pin.LOCAL)
        else:
            pin.forwardKinematics(model, data, q[k], v[k], a[k])
        R[k] = pin.updateFramePlacement(model, data, frame_id).rotation
        vel[k] = pin.getFrameVelocity(model, data, frame_id, pin.LOCAL).vector
        acc[k] = pin.getFrameAcceleration(model, data, frame_id, pin.LOCAL).vector
    nu, om = vel[:, :3], vel[:, 3:]
    g_local = np.einsum("nji,j->ni", R, g)  # Rᵀ g
    r = acc[:, :3] + cross(om, nu) - g_local - acc_meas
    if not jacobians:
        return r, None
    J = np.empty((n, 3, 3 * nv))
    v_dq, a_dq, a_dv, a_da = dacc[:, 0], dacc[:, 1], dacc[:, 2], dacc[:, 3]
    # a_da is the LOCAL frame Jacobian: rows 0:3 linear (dν/dv), rows 3:6 angular (dω/dv).
    J[:, :, :nv] = (a_dq[:, :3] - cross_cols(nu, v_dq[:, 3:]) + cross_cols(om, v_dq[:, :3])
                    - cross_cols(g_local, a_da[:, 3:]))
    J[:, :, nv:2 * nv] = a_dv[:, :3] - cross_cols(nu, a_da[:, 3:]) + cross_cols(om, a_da[:, :3])
    J[:, :, 2 * nv:] = a_da[:, :3]
    return r, J


def orientation_residual(model: pin.Model, data: pin.Data, frame_id: int, q, quat_meas, jacobians=True):
    """r = Log3(R̂ᵀ R_imu(q)) (N, 3) [rad], quat_meas (N, 4) as (w, x, y, z) of the IMU frame in the world.

    Jacobian (N, 3, 3nv) with δq block Jlog3(R̂ᵀR) · J_ang,local(q); δv, δa blocks are 0.
    """
    q = np.atleast_2d(q)
    n = q.shape[0]
    nv = model.nv
    R_meas = quat_wxyz_to_rotation(quat_meas)
    r = np.empty((n, 3))
    J = np.zeros((n, 3, 3 * nv)) if jacobians else None
    for k in range(n):
        if jacobians:
            pin.computeJointJacobians(model, data, q[k])
        else:
            pin.forwardKinematics(model, data, q[k])
        pin.updateFramePlacement(model, data, frame_id)
        E = R_meas[k].T @ data.oMf[frame_id].rotation
        r[k] = pin.log3(E)
        if jacobians:
            Jf = pin.getFrameJacobian(model, data, frame_id, pin.LOCAL)
            J[k, :, :nv] = pin.Jlog3(E) @ Jf[3:]
    return r, J
