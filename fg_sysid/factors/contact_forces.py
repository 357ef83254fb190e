"""Contact-force residuals on (q, λ_f): force-sensor measurement, unilateral and friction-cone penalties.

A stance foot ``frame_id`` (e.g. B1's ``"FL_foot"``) carries a contact force λ_f ∈ R³ [N] expressed in
the LOCAL axes of the foot frame, applied at the frame origin — the convention of the contact term
Σ_f J_f,LOCAL[:3]ᵀ λ_f in the inverse-dynamics factor (paper 004 eq. 2 / eq. 5, Sec. III-B). Its world
expression is

    f_w(q, λ) = R_f(q) λ_f,      R_f = ``data.oMf[frame_id].rotation``                       [N, world axes]

All residuals are batched over N knots: q (N, nq), λ (N, 3). Jacobians are w.r.t. the tangent
perturbation q ⊕ δq (``pin.integrate``) and λ + δλ, returned as two separate arrays (∂r/∂δq, ∂r/∂λ).
Since δR_f = [J_ω δq]× R_f with J_ω the angular rows of the LOCAL_WORLD_ALIGNED frame Jacobian,

    ∂f_w/∂δq = −[f_w]× J_ω  (3, nv),      ∂f_w/∂λ = R_f  (3, 3).

* :func:`measured_force_residual` — r = R_f λ_f − f̂ (N, 3) [N]: a foot force sensor / force-plate
  reading f̂ in world axes.
* :func:`unilateral_residual` — r = max(0, −λ_n) (N, 1) [N], λ_n = nᵀ R_f λ_f, enforcing λ_n ≥ 0
  (Signorini side condition, paper 004 eq. 11 Λ_c ≥ 0 at impulse level, here at force level).
* :func:`friction_cone_residual` — r = max(0, ‖λ_t‖_ε − μ λ_n) (N, 1) [N], ‖x‖_ε = sqrt(‖x‖² + ε²) − ε,
  enforcing the Coulomb cone ‖λ_t‖ ≤ μ λ_n (λ_t = (I − nnᵀ) R_f λ_f).

The ground normal n defaults to world +z (flat ground) and is configurable (unit 3-vector, world axes).

Inequalities as penalties. Both inequality residuals are one-sided hinges r = max(0, g(x)) for a
constraint g(x) ≤ 0: exactly 0 (with zero Jacobian) on the feasible set and growing linearly outside
it. Minimised by Gauss–Newton (r² weighted by the factor's noise model) this is a soft inequality
constraint: inactive factors contribute nothing, active ones pull the state back to the boundary. It is
what GTSAM does for inequalities used as penalties: ``gtsam/constraint`` (GTSAM ≥ 4.3)
``NonlinearInequalityConstraint::penaltyFactor`` wraps g in ``RampFunction`` (max(0, x), derivative 0 for
x < 0 and 1 otherwise) and hands the result to the ordinary Gauss–Newton/LM machinery as a
``NoiseModelFactor``. Here the derivative exactly on the boundary (g = 0) is taken as 0.
The smoothed norm ‖·‖_ε makes the cone residual differentiable at λ_t = 0;
it satisfies ‖x‖ − ε ≤ ‖x‖_ε ≤ ‖x‖, so the residual is exactly 0 in the true cone and the penalised set
is the true cone enlarged by at most ε [N] tangentially.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from .batched import cross_cols

LWA = pin.LOCAL_WORLD_ALIGNED
Z_UP = np.array([0.0, 0.0, 1.0])


def _as_2d(x):
    x = np.asarray(x, float)
    return x[None] if x.ndim == 1 else x


def _unit(normal):
    n = np.asarray(normal, float).reshape(3)
    return n / np.linalg.norm(n)


def world_forces(model, data, frame_id, q, lam_local, jacobians=True):
    """f_w = R_f(q) λ_f (N, 3) [N, world]; ∂f_w/∂δq (N, 3, nv) = −[f_w]× J_ω; ∂f_w/∂λ (N, 3, 3) = R_f."""
    q, lam = _as_2d(q), _as_2d(lam_local)
    n, nv = q.shape[0], model.nv
    R = np.empty((n, 3, 3))
    Jw = np.empty((n, 3, nv)) if jacobians else None
    for k in range(n):  # Pinocchio only; f and its Jacobian are formed for all knots at once
        if jacobians:
            pin.computeJointJacobians(model, data, q[k])
        else:
            pin.forwardKinematics(model, data, q[k])
        R[k] = pin.updateFramePlacement(model, data, frame_id).rotation
        if jacobians:
            Jw[k] = pin.getFrameJacobian(model, data, frame_id, LWA)[3:]
    f = np.einsum("nij,nj->ni", R, lam)
    if not jacobians:
        return f, None, None
    return f, -cross_cols(f, Jw), R


def measured_force_residual(model, data, frame_id, q, lam_local, force_world, jacobians=True, world=None):
    """r = R_f(q) λ_f − f̂ (N, 3) [N, world axes]; returns (r, ∂r/∂δq (N, 3, nv), ∂r/∂λ (N, 3, 3)).

    ``lam_local`` (N, 3) in the LOCAL foot axes, ``force_world`` (3,) or (N, 3) the measured force on the
    robot at the foot frame origin in world axes. ``world``: the `world_forces` output of the same
    arguments, when the caller has it already (the three residuals of a foot share it).
    """
    f, Jq, Jl = world if world is not None else world_forces(model, data, frame_id, q, lam_local, jacobians)
    return f - np.broadcast_to(np.asarray(force_world, float), f.shape), Jq, Jl


def unilateral_residual(model, data, frame_id, q, lam_local, normal=Z_UP, jacobians=True, world=None):
    """r = max(0, −λ_n) (N, 1) [N], λ_n = nᵀ R_f(q) λ_f; returns (r, ∂r/∂δq (N, 1, nv), ∂r/∂λ (N, 1, 3)).

    Zero (with zero Jacobian) whenever the normal force is non-negative, i.e. the ground pushes.
    ``world``: see `measured_force_residual`.
    """
    nrm = _unit(normal)
    f, Jq, Jl = world if world is not None else world_forces(model, data, frame_id, q, lam_local, jacobians)
    g = -(f @ nrm)
    active = g > 0.0
    r = np.where(active, g, 0.0)[:, None]
    if not jacobians:
        return r, None, None
    s = np.where(active, -1.0, 0.0)[:, None, None]
    return r, s * np.einsum("i,nij->nj", nrm, Jq)[:, None], s * np.einsum("i,nij->nj", nrm, Jl)[:, None]


def friction_cone_residual(model, data, frame_id, q, lam_local, mu, normal=Z_UP, eps=1e-3, jacobians=True,
                           world=None):
    """r = max(0, ‖λ_t‖_ε − μ λ_n) (N, 1) [N]; returns (r, ∂r/∂δq (N, 1, nv), ∂r/∂λ (N, 1, 3)).

    λ_n = nᵀ f_w, λ_t = (I − nnᵀ) f_w with f_w = R_f λ_f; ‖x‖_ε = sqrt(‖x‖² + ε²) − ε (``eps`` in N,
    > 0 keeps the Jacobian defined at λ_t = 0). Friction coefficient ``mu`` ≥ 0 (scalar). Exactly 0 inside
    the Coulomb cone ‖λ_t‖ ≤ μ λ_n; outside, ∂g/∂f_w = λ_tᵀ / sqrt(‖λ_t‖² + ε²) − μ nᵀ.
    ``world``: see `measured_force_residual`.
    """
    nrm = _unit(normal)
    f, Jq, Jl = world if world is not None else world_forces(model, data, frame_id, q, lam_local, jacobians)
    lam_n = f @ nrm
    lam_t = f - lam_n[:, None] * nrm
    rho = np.sqrt(np.einsum("ni,ni->n", lam_t, lam_t) + eps * eps)
    g = rho - eps - mu * lam_n
    active = g > 0.0
    r = np.where(active, g, 0.0)[:, None]
    if not jacobians:
        return r, None, None
    dg_df = lam_t / rho[:, None] - mu * nrm  # (N, 3); λ_t ⟂ n so the tangential projector is implicit
    dg_df = np.where(active[:, None], dg_df, 0.0)
    return r, np.einsum("ni,nij->nj", dg_df, Jq)[:, None], np.einsum("ni,nij->nj", dg_df, Jl)[:, None]


class ContactGeneralizedForces:
    """τ_c = Σ_f J_cᵀ λ_f (paper 004 eq. 2's contact term) with its analytic Jacobians, batched over knots.

    λ_f [N] is in the LOCAL axes of foot frame f, applied at the contact point: the frame origin for
    point feet, or ρ below it along world −z for a sphere of radius ρ (rolling without slipping).
    The spatial force on the parent joint is a placement of λ_f, so Pinocchio's RNEA derivatives with
    external forces (on a zero-gravity copy of the model: RNEA(q, 0, 0, fext) = −τ_c) give ∂τ_c/∂q
    exactly; ∂τ_c/∂λ_f = J_cᵀ.
    """

    def __init__(self, model: pin.Model, frame_ids, radius: float = 0.0):
        self.model = model.copy()
        self.model.gravity = pin.Motion.Zero()
        self.data = self.model.createData()
        self.fids = [int(f) for f in frame_ids]
        self.nf = len(self.fids)
        self.radius = float(radius)
        self.offset = np.array([0.0, 0.0, -self.radius])

    def _placement(self, fid):
        """Placement (in the parent joint) of the contact point of foot ``fid`` with the foot frame's axes:
        the frame origin shifted by ρ along −z_world (kinematics of ``data`` must be current)."""
        m, d = self.model, self.data
        fr = m.frames[fid]
        if self.radius == 0.0:
            return fr.placement
        R = d.oMi[fr.parentJoint].rotation @ fr.placement.rotation
        return fr.placement * pin.SE3(np.eye(3), R.T @ self.offset)

    def evaluate(self, q, lam, jacobians: bool = True):
        """τ_c (N, nv); dτ_c/dδq (N, nv, nv) (None without Jacobians); dτ_c/dλ (N, nv, 3 nf)."""
        m0, d0 = self.model, self.data
        n, nv = q.shape[0], m0.nv
        tau = np.empty((n, nv))
        dq = np.empty((n, nv, nv)) if jacobians else None
        dl = np.empty((n, nv, 3 * self.nf))
        zero = np.zeros(nv)
        for k in range(n):
            pin.computeJointJacobians(m0, d0, q[k])
            pin.updateFramePlacements(m0, d0)
            fext = pin.StdVec_Force()
            for _ in range(m0.njoints):
                fext.append(pin.Force.Zero())
            for i, fid in enumerate(self.fids):
                fr = m0.frames[fid]
                pl = self._placement(fid)
                Jj = pin.getJointJacobian(m0, d0, fr.parentJoint, pin.LOCAL)
                Jl = pl.toActionMatrixInverse()[:3] @ Jj
                dl[k, :, 3 * i: 3 * i + 3] = Jl.T
                f_i = pin.Force(lam[k, 3 * i: 3 * i + 3], np.zeros(3))
                fext[fr.parentJoint] = fext[fr.parentJoint] + pl.act(f_i)
            tau[k] = dl[k] @ lam[k]
            if jacobians:
                dr_dq, _, _ = pin.computeRNEADerivatives(m0, d0, q[k], zero, zero, fext)
                dq[k] = -dr_dq
                if self.radius != 0.0:
                    dq[k] += self._offset_moment_jacobian(lam[k])
        return tau, dq, dl

    def _offset_moment_jacobian(self, lam):
        """Correction of dτ_c/dδq for the world-fixed offset d of a spherical foot: RNEA derivatives with
        external forces treat the application point as fixed in the foot (turning with it)."""
        m0, d0 = self.model, self.data
        out = np.zeros((m0.nv, m0.nv))
        for i, fid in enumerate(self.fids):
            fr = m0.frames[fid]
            R = d0.oMi[fr.parentJoint].rotation @ fr.placement.rotation
            f_w = R @ lam[3 * i: 3 * i + 3]
            Jw = pin.getFrameJacobian(m0, d0, fid, pin.LOCAL_WORLD_ALIGNED)
            # τ = (J_lin − [d]× J_ang)ᵀ f = J_linᵀ f + J_angᵀ (d × f). A body-fixed offset would turn
            # with the foot, δd = δφ × d (δφ = J_ang δq, world), adding J_angᵀ (δd × f) = J_angᵀ [f]× [d]× δφ
            # to the derivative; the world-fixed offset of a rolling sphere does not: subtract it.
            Ja = Jw[3:]
            out -= Ja.T @ cross_cols(f_w, cross_cols(self.offset, Ja))  # Jaᵀ [f]× [d]× Ja
        return out
