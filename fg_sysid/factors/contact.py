"""Bilateral point-contact residuals on knot states x_k = (q_k, v_k, a_k), batched, analytic Jacobians.

Paper 004 (Sec. III-B, IV-A) models a foot in stance as a bilateral contact and constrains the contact
point at position, velocity and acceleration level. For a Pinocchio frame ``frame_id`` (e.g. B1's
``"FL_foot"``) with origin p(q), all residuals are 3-D, expressed in the WORLD axes at the frame origin
(``pin.LOCAL_WORLD_ALIGNED``):

* Position:      r = p(q) − p̄                                  [m]     (p̄: contact anchor, world frame)
* Velocity:      r = ṗ = J_lin(q) v                            [m/s]
* Acceleration:  r = p̈ = J_lin(q) a + J̇_lin(q, v) v            [m/s²]  (classical acceleration)

J_lin is the linear (translation) block of the LOCAL_WORLD_ALIGNED frame Jacobian. As in
:mod:`fg_sysid.factors.kinematics`, Jacobians are w.r.t. tangent perturbations
(q ⊕ δq via ``pin.integrate``, v + δv, a + δa), shape (N, 3, 3 nv), columns ordered (δq, δv, δa).
Inputs q (N, nq), v, a (N, nv); ``anchor`` (3,) or (N, 3).
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

LWA = pin.LOCAL_WORLD_ALIGNED
WORLD = pin.WORLD


def _skew(w):
    return np.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]])


def _as_2d(x):
    x = np.asarray(x, float)
    return x[None] if x.ndim == 1 else x


def contact_position_residual(model, data, frame_id, q, anchor, jacobians=True):
    """r = p_frame(q) − anchor (N, 3) [m], world frame; J (N, 3, 3nv), only δq columns nonzero.

    The derivative of the world position of the frame origin w.r.t. δq is the linear block of the
    LOCAL_WORLD_ALIGNED frame Jacobian (paper 004 Sec. III-B, position-level bilateral contact).
    """
    q = _as_2d(q)
    n, nv = q.shape[0], model.nv
    anchor = np.broadcast_to(np.asarray(anchor, float), (n, 3))
    r = np.empty((n, 3))
    J = np.zeros((n, 3, 3 * nv)) if jacobians else None
    for k in range(n):
        if jacobians:
            pin.computeJointJacobians(model, data, q[k])
        else:
            pin.forwardKinematics(model, data, q[k])
        pin.updateFramePlacement(model, data, frame_id)
        r[k] = data.oMf[frame_id].translation - anchor[k]
        if jacobians:
            J[k, :, :nv] = pin.getFrameJacobian(model, data, frame_id, LWA)[:3]
    return r, J


def _velocity_at(model, data, frame_id, nv, jacobians, offset, out_r, out_J):
    """Velocity residual of one frame from current kinematics (see `contact_velocity_residual`)."""
    vel = pin.getFrameVelocity(model, data, frame_id, LWA)
    out_r[:] = vel.linear
    if offset is not None:
        out_r += np.cross(vel.angular, offset)
    if not jacobians:
        return
    p = data.oMi[model.frames[frame_id].parentJoint].act(model.frames[frame_id].placement).translation
    Jl = pin.getFrameJacobian(model, data, frame_id, LWA)[:3]
    dv_dq, dv_dv = pin.getFrameVelocityDerivatives(model, data, frame_id, WORLD)
    om = pin.getFrameVelocity(model, data, frame_id, WORLD).angular
    out_J[:, :nv] = dv_dq[:3] - _skew(p) @ dv_dq[3:] + _skew(om) @ Jl
    out_J[:, nv:2 * nv] = Jl
    if offset is not None:  # d(ω × d) = −[d]× dω (WORLD angular rows)
        S_d = _skew(offset)
        out_J[:, :nv] -= S_d @ dv_dq[3:]
        out_J[:, nv:2 * nv] -= S_d @ dv_dv[3:]


def _acceleration_at(model, data, frame_id, nv, jacobians, offset, out_r, out_J):
    """Acceleration residual of one frame from current kinematics (see `contact_acceleration_residual`)."""
    out_r[:] = pin.getFrameClassicalAcceleration(model, data, frame_id, LWA).linear
    if offset is not None:
        out_r += np.cross(pin.getFrameAcceleration(model, data, frame_id, LWA).angular, offset)
    if not jacobians:
        return
    p = data.oMi[model.frames[frame_id].parentJoint].act(model.frames[frame_id].placement).translation
    Jl = pin.getFrameJacobian(model, data, frame_id, LWA)[:3]
    vel = pin.getFrameVelocity(model, data, frame_id, WORLD)
    acc = pin.getFrameAcceleration(model, data, frame_id, WORLD)
    om, al = vel.angular, acc.angular
    pd = vel.linear + np.cross(om, p)
    v_dq, a_dq, a_dv, a_da = pin.getFrameAccelerationDerivatives(model, data, frame_id, WORLD)
    _, v_dv = pin.getFrameVelocityDerivatives(model, data, frame_id, WORLD)
    S_p, S_om, S_pd = _skew(p), _skew(om), _skew(pd)
    # dṗ = dv_o − [p]× dω + [ω]× dp,  dp = J_lin δq
    pd_dq = v_dq[:3] - S_p @ v_dq[3:] + S_om @ Jl
    # p̈ = a_o + α × p + ω × ṗ
    out_J[:, :nv] = a_dq[:3] - S_p @ a_dq[3:] + _skew(al) @ Jl - S_pd @ v_dq[3:] + S_om @ pd_dq
    out_J[:, nv:2 * nv] = a_dv[:3] - S_p @ a_dv[3:] - S_pd @ v_dv[3:] + S_om @ Jl
    out_J[:, 2 * nv:] = Jl
    if offset is not None:  # d(α × d) = −[d]× dα (WORLD angular rows)
        S_d = _skew(offset)
        out_J[:, :nv] -= S_d @ a_dq[3:]
        out_J[:, nv:2 * nv] -= S_d @ a_dv[3:]
        out_J[:, 2 * nv:] -= S_d @ a_da[3:]


def contact_velocity_residual(model, data, frame_id, q, v, jacobians=True, offset=None):
    """r = J_lin(q) v (N, 3) [m/s]: velocity of the frame origin in world axes; J (N, 3, 3nv).

    ``offset`` (3,) world vector d: r = ṗ + ω × d, the velocity of the body point at p + d — for a
    spherical foot of radius ρ on a ground plane with normal n, d = −ρ n is the contact point and
    r = 0 is rolling without slipping.

    With (v_o, ω) the WORLD spatial velocity (v_o: velocity of the body point at the world origin),
    ṗ = v_o + ω × p, so ∂ṗ = ∂v_o − [p]× ∂ω + [ω]× J_lin δq, using ``pin.getFrameVelocityDerivatives``
    in WORLD (true derivatives, the world frame being fixed); ∂r/∂δv = J_lin. Paper 004
    Sec. III-B, velocity-level bilateral contact.
    """
    q, v = _as_2d(q), _as_2d(v)
    n, nv = q.shape[0], model.nv
    zero = np.zeros(nv)
    r = np.empty((n, 3))
    J = np.zeros((n, 3, 3 * nv)) if jacobians else None
    for k in range(n):
        if jacobians:
            pin.computeForwardKinematicsDerivatives(model, data, q[k], v[k], zero)
        else:
            pin.forwardKinematics(model, data, q[k], v[k])
        _velocity_at(model, data, frame_id, nv, jacobians, offset, r[k], None if J is None else J[k])
    return r, J


def contact_acceleration_residual(model, data, frame_id, q, v, a, jacobians=True, offset=None):
    """r = classical acceleration of the frame origin in world axes (N, 3) [m/s²]; J (N, 3, 3nv).

    ``offset`` (3,) world vector d (constant): r = p̈ + α × d, the time derivative of the rolling
    velocity ṗ + ω × d of `contact_velocity_residual` (α: angular acceleration, world axes).

    With (a_o, α) the WORLD spatial acceleration, p̈ = a_o + α × p + ω × ṗ; its derivative
    ∂p̈ = ∂a_o − [p]× ∂α + [α]× ∂p − [ṗ]× ∂ω + [ω]× ∂ṗ uses the WORLD spatial derivatives of
    ``pin.getFrameAccelerationDerivatives`` / ``getFrameVelocityDerivatives``. ∂r/∂δa = J_lin.
    Paper 004 Sec. III-B / IV-A, acceleration-level bilateral contact.
    """
    q, v, a = _as_2d(q), _as_2d(v), _as_2d(a)
    n, nv = q.shape[0], model.nv
    r = np.empty((n, 3))
    J = np.zeros((n, 3, 3 * nv)) if jacobians else None
    for k in range(n):
        if jacobians:
            pin.computeForwardKinematicsDerivatives(model, data, q[k], v[k], a[k])
        else:
            pin.forwardKinematics(model, data, q[k], v[k], a[k])
        _acceleration_at(model, data, frame_id, nv, jacobians, offset, r[k], None if J is None else J[k])
    return r, J


def contact_motion_residuals(model, data, frame_ids, q, v, a, jacobians=True, offset=None):
    """Velocity and acceleration residuals of several frames with ONE kinematics pass per knot.

    Returns ``(rv, Jv, ra, Ja)`` with rv, ra (N, F, 3) and Jv, Ja (N, F, 3, 3nv) (None without
    ``jacobians``): for each frame the same values as `contact_velocity_residual` and
    `contact_acceleration_residual` (velocity derivatives do not depend on a).
    """
    q, v, a = _as_2d(q), _as_2d(v), _as_2d(a)
    n, nv, nf = q.shape[0], model.nv, len(frame_ids)
    rv, ra = np.empty((n, nf, 3)), np.empty((n, nf, 3))
    Jv = np.zeros((n, nf, 3, 3 * nv)) if jacobians else None
    Ja = np.zeros((n, nf, 3, 3 * nv)) if jacobians else None
    for k in range(n):
        if jacobians:
            pin.computeForwardKinematicsDerivatives(model, data, q[k], v[k], a[k])
        else:
            pin.forwardKinematics(model, data, q[k], v[k], a[k])
        for i, fid in enumerate(frame_ids):
            _velocity_at(model, data, fid, nv, jacobians, offset, rv[k, i], None if Jv is None else Jv[k, i])
            _acceleration_at(model, data, fid, nv, jacobians, offset, ra[k, i],
                             None if Ja is None else Ja[k, i])
    return rv, Jv, ra, Ja
