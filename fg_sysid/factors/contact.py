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

from .batched import cross, cross_cols

LWA = pin.LOCAL_WORLD_ALIGNED
WORLD = pin.WORLD
CHUNK_PAIRS = 256  # (knot, frame) pairs per chunk of the batched algebra


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


def _gather(model, data, frame_ids, q, v, a, jacobians):
    """One kinematics pass per knot; the raw per-frame outputs stacked over knots (k) and frames (f).

    Returns a dict of arrays: ``p`` (N, F, 3) frame origins [m, world]; ``vel``, ``acc`` (N, F, 6) WORLD
    spatial velocity (v_o, ω) and acceleration (a_o, α) of the frame (linear part: the body point at the
    world origin); with ``jacobians`` also ``dacc`` (N, F, 4, 6, nv), the WORLD outputs of
    ``pin.getFrameAccelerationDerivatives`` (∂v/∂q, ∂a/∂q, ∂a/∂v, ∂a/∂a = J_world; ∂v/∂v = J_world too).
    """
    n, nf, nv = q.shape[0], len(frame_ids), model.nv
    p = np.empty((n, nf, 3))
    vel = np.empty((n, nf, 6))
    acc = np.empty((n, nf, 6))
    dacc = np.empty((n, nf, 4, 6, nv)) if jacobians else None
    fkd, fk = pin.computeForwardKinematicsDerivatives, pin.forwardKinematics
    place, fvel, facc = pin.updateFramePlacement, pin.getFrameVelocity, pin.getFrameAcceleration
    dfacc = pin.getFrameAccelerationDerivatives
    for k in range(n):
        if jacobians:
            fkd(model, data, q[k], v[k], a[k])
        else:
            fk(model, data, q[k], v[k], a[k])
        for i, fid in enumerate(frame_ids):
            p[k, i] = place(model, data, fid).translation
            vel[k, i] = fvel(model, data, fid, WORLD).vector
            acc[k, i] = facc(model, data, fid, WORLD).vector
            if jacobians:
                dacc[k, i] = dfacc(model, data, fid, WORLD)
    return dict(p=p, vel=vel, acc=acc, dacc=dacc)


def _motion_from_raw(raw, offset, nv, want_velocity=True, want_acceleration=True):
    """Velocity / acceleration residuals and Jacobians of all (knot, frame) pairs from `_gather` output.

    World-axes formulas (WORLD spatial quantities, p the frame origin, d the constant offset):
    ṗ = v_o + ω × p;  p̈ = a_o + α × p + ω × ṗ;  J_lin = J_o − [p]× J_ω (LOCAL_WORLD_ALIGNED linear rows);
    ∂ṗ = ∂v_o − [p]× ∂ω + [ω]× J_lin δq;
    ∂p̈ = ∂a_o − [p]× ∂α + [α]× J_lin δq − [ṗ]× ∂ω + [ω]× ∂ṗ;  the offset adds ω × d, α × d and
    −[d]× ∂ω, −[d]× ∂α (paper 004 Sec. III-B). Returns (rv, Jv, ra, Ja) with shapes (..., 3),
    (..., 3, 3nv) (None where not wanted or without Jacobians).
    """
    p, vel, acc, dacc = raw["p"], raw["vel"], raw["acc"], raw["dacc"]
    vo, om, ao, al = vel[..., :3], vel[..., 3:], acc[..., :3], acc[..., 3:]
    pd = vo + cross(om, p)
    rv = ra = Jv = Ja = None
    if want_velocity:
        rv = pd + cross(om, offset) if offset is not None else pd
    if want_acceleration:
        ra = ao + cross(al, p) + cross(om, pd)
        if offset is not None:
            ra = ra + cross(al, offset)
    if dacc is None:
        return rv, Jv, ra, Ja
    v_dq, a_dq, a_dv, Jw = dacc[..., 0, :, :], dacc[..., 1, :, :], dacc[..., 2, :, :], dacc[..., 3, :, :]
    dw_q, Jw_ang = v_dq[..., 3:, :], Jw[..., 3:, :]  # ∂ω/∂δq, ∂ω/∂δv
    Jl = Jw[..., :3, :] - cross_cols(p, Jw_ang)
    om_Jl = cross_cols(om, Jl)
    pd_dq = v_dq[..., :3, :] - cross_cols(p, dw_q) + om_Jl
    d = None if offset is None else np.broadcast_to(np.asarray(offset, float), p.shape)
    d_Jw = None if d is None else cross_cols(d, Jw_ang)  # −[d]× ∂ω/∂δv = −[d]× ∂α/∂δa
    pdd = p if d is None else p + d  # [p]× ∂α and the offset's [d]× ∂α (WORLD angular rows) at once
    shape = p.shape[:-1] + (3, 3 * nv)
    if want_velocity:
        Jv = np.zeros(shape)
        Jv[..., :nv] = pd_dq
        Jv[..., nv:2 * nv] = Jl
        if d is not None:  # d(ω × d) = −[d]× dω
            Jv[..., :nv] -= cross_cols(d, dw_q)
            Jv[..., nv:2 * nv] -= d_Jw
    if want_acceleration:
        Ja = np.empty(shape)
        Ja[..., :nv] = (a_dq[..., :3, :] - cross_cols(pdd, a_dq[..., 3:, :]) + cross_cols(al, Jl)
                        - cross_cols(pd, dw_q) + cross_cols(om, pd_dq))
        Ja[..., nv:2 * nv] = (a_dv[..., :3, :] - cross_cols(pdd, a_dv[..., 3:, :])
                              - cross_cols(pd, Jw_ang) + om_Jl)
        Ja[..., 2 * nv:] = Jl if d is None else Jl - d_Jw
    return rv, Jv, ra, Ja


def _motion(raw, offset, nv, want_velocity=True, want_acceleration=True):
    """`_motion_from_raw` over chunks of knots (the temporaries stay small and in cache; one call over
    all knots at once is page-fault bound), assembled into (N, F, 3) / (N, F, 3, 3nv) arrays."""
    n, nf = raw["p"].shape[:2]
    jac = raw["dacc"] is not None
    rv = np.empty((n, nf, 3)) if want_velocity else None
    ra = np.empty((n, nf, 3)) if want_acceleration else None
    Jv = np.empty((n, nf, 3, 3 * nv)) if want_velocity and jac else None
    Ja = np.empty((n, nf, 3, 3 * nv)) if want_acceleration and jac else None
    step = max(1, CHUNK_PAIRS // max(nf, 1))
    for s in range(0, n, step):
        sub = {key: None if x is None else x[s:s + step] for key, x in raw.items()}
        for dst, src in zip((rv, Jv, ra, Ja), _motion_from_raw(sub, offset, nv, want_velocity,
                                                                want_acceleration), strict=True):
            if dst is not None:
                dst[s:s + step] = src
    return rv, Jv, ra, Ja


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
    raw = _gather(model, data, [frame_id], q, v, np.zeros_like(v), jacobians)
    rv, Jv, _, _ = _motion(raw, offset, model.nv, want_acceleration=False)
    return rv[:, 0], None if Jv is None else Jv[:, 0]


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
    raw = _gather(model, data, [frame_id], q, v, a, jacobians)
    _, _, ra, Ja = _motion(raw, offset, model.nv, want_velocity=False)
    return ra[:, 0], None if Ja is None else Ja[:, 0]


def contact_motion_residuals(model, data, frame_ids, q, v, a, jacobians=True, offset=None):
    """Velocity and acceleration residuals of several frames with ONE kinematics pass per knot.

    Returns ``(rv, Jv, ra, Ja)`` with rv, ra (N, F, 3) and Jv, Ja (N, F, 3, 3nv) (None without
    ``jacobians``): for each frame the same values as `contact_velocity_residual` and
    `contact_acceleration_residual` (velocity derivatives do not depend on a). The Python loop over knots
    only calls Pinocchio (`_gather`); the cross products and skew algebra are batched over (knot, frame)
    pairs with numpy (`_motion_from_raw`, in chunks of `CHUNK_PAIRS`).
    """
    q, v, a = _as_2d(q), _as_2d(v), _as_2d(a)
    raw = _gather(model, data, list(frame_ids), q, v, a, jacobians)
    return _motion(raw, offset, model.nv)
