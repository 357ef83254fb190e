"""Impact / reset-map residuals at touchdown (paper 004 Sec. III-B2, eqs. 7–11; derivatives eqs. 14–15).

At a touchdown knot the configuration q is continuous while the velocity jumps from v⁻ to v⁺ under the
contact impulses Λ_f ∈ R³ [N·s] of the feet in contact (``frame_ids``, e.g. B1's ``"FL_foot"``). Like the
contact forces λ_f of :mod:`.contact_forces`, each Λ_f is expressed in the LOCAL axes of its foot frame
and applied at the frame origin. The KKT residuals of the Gauss impact principle (eq. 7 → eq. 9) are

* Impulse–momentum (eq. 10):  r_imp  = (M(q; π) + diag(armature)) (v⁺ − v⁻) − Σ_f J_f,LOCAL[:3]ᵀ Λ_f
  (nv,) [N·m·s | N·s]. M depends linearly on the inertial parameters π (n_bodies × 10, Pinocchio
  dynamic-parameter order, flattened), and on the reflected rotor inertias ``armature`` (nv,) [kg·m²]
  on the joint rows.
* Restitution (eq. 9 lower block with the bias velocity of eq. 11, v_b = −ε J_c v⁻):
  r_rest = J_c(q) v⁺ + ε J_c(q) v⁻  (3 per foot) [m/s], J_c the linear rows of the
  LOCAL_WORLD_ALIGNED frame Jacobian (world axes, like :mod:`.contact`). ε = 0: plastic impact (the
  foot sticks), ε = 1: elastic (the foot velocity reverses, kinetic energy conserved).

Jacobians (all analytic, batched over N knots, tangent perturbation q ⊕ δq via ``pin.integrate``):

* ∂r_imp/∂δq from ``pin.computeRNEADerivatives`` on a zero-gravity model at (q, v = 0, a = Δv = v⁺ − v⁻)
  with the impulses as external forces: RNEA(q, 0, Δv, f_ext) = M Δv − Σ J_fᵀ Λ_f exactly (eq. 15
  with g = 0), so one call differentiates both the M(q) Δv term and the contact term (the same trick as
  ``FloatingBaseSmoother.contact_term``);
* ∂r_imp/∂v⁺ = M + diag(armature) = −∂r_imp/∂v⁻;  ∂r_imp/∂Λ_f = −J_f,LOCAL[:3]ᵀ;
* ∂r_imp/∂π = Y(q, 0, Δv), Pinocchio's joint-torque regressor on the zero-gravity model (M Δv = Y π);
* ∂r_imp/∂armature = diag(Δv);
* ∂r_rest/∂δq, ∂r_rest/∂v± from :func:`fg_sysid.factors.contact.contact_velocity_residual`.

Unilaterality (Λ_n ≥ 0) is not part of these equality residuals; add
:func:`fg_sysid.factors.contact_forces.unilateral_residual` on Λ if needed (the same hinge applies to
impulses). :func:`solve_reset` solves eq. 8 for a test oracle / initial guess.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pinocchio as pin
import scipy.linalg as sla

from .contact import contact_velocity_residual


class ImpactJacobians(NamedTuple):
    """Jacobians of r_imp (N, nv): w.r.t. δq, v⁺, v⁻ (N, nv, nv), Λ (N, nv, 3 nf), π (N, nv, 10 n_bodies),
    armature (N, nv, nv)."""

    dq: np.ndarray
    dv_plus: np.ndarray
    dv_minus: np.ndarray
    dimpulse: np.ndarray
    dparams: np.ndarray
    darmature: np.ndarray


class RestitutionJacobians(NamedTuple):
    """Jacobians of r_rest (N, 3 nf) w.r.t. δq, v⁺, v⁻, each (N, 3 nf, nv)."""

    dq: np.ndarray
    dv_plus: np.ndarray
    dv_minus: np.ndarray


def _as_2d(x):
    x = np.asarray(x, float)
    return x[None] if x.ndim == 1 else x


def zero_gravity_model(model: pin.Model, params=None) -> pin.Model:
    """A copy of ``model`` with zero gravity, zero Pinocchio armature and (optionally) body inertias
    ``params`` ((n_bodies, 10) or flattened, Pinocchio dynamic-parameter order)."""
    m0 = model.copy()
    m0.gravity = pin.Motion.Zero()
    m0.armature = np.zeros(model.nv)
    if params is not None:
        params = np.asarray(params, float).reshape(model.njoints - 1, 10)
        for j in range(1, m0.njoints):
            m0.inertias[j] = pin.Inertia.FromDynamicParameters(params[j - 1])
    return m0


def impact_residual(model, frame_ids, q, v_minus, v_plus, impulses, params, armature=None, jacobians=True):
    """Impulse–momentum residual r_imp = (M(q; π) + diag(armature))(v⁺ − v⁻) − Σ_f J_f,LOCAL[:3]ᵀ Λ_f.

    Inputs: q (N, nq); v_minus, v_plus (N, nv) [rad/s | m/s]; impulses (N, 3 nf) [N·s], LOCAL foot axes,
    ordered like ``frame_ids``; params (10 n_bodies,) inertial parameters (overriding the model's);
    armature (nv,) or None (zero). Pinocchio's own ``model.armature`` is ignored (passed explicitly).
    Returns r (N, nv) [N·m·s | N·s] and :class:`ImpactJacobians` (or None). Paper 004 eqs. 9–10, 15.
    """
    q, vm, vp, lam = _as_2d(q), _as_2d(v_minus), _as_2d(v_plus), _as_2d(impulses)
    n, nv, nf = q.shape[0], model.nv, len(frame_ids)
    arm = np.zeros(nv) if armature is None else np.asarray(armature, float).reshape(nv)
    m0 = zero_gravity_model(model, params)
    d0 = m0.createData()
    zero = np.zeros(nv)
    dv = vp - vm
    r = np.empty((n, nv))
    if jacobians:
        npi = 10 * (model.njoints - 1)
        J = ImpactJacobians(np.empty((n, nv, nv)), np.empty((n, nv, nv)), np.empty((n, nv, nv)),
                            np.empty((n, nv, 3 * nf)), np.empty((n, nv, npi)), np.zeros((n, nv, nv)))
    for k in range(n):
        pin.computeJointJacobians(m0, d0, q[k])
        fext = pin.StdVec_Force()
        for _ in range(m0.njoints):
            fext.append(pin.Force.Zero())
        for i, fid in enumerate(frame_ids):
            fr = m0.frames[fid]
            fext[fr.parentJoint] = fext[fr.parentJoint] + fr.placement.act(
                pin.Force(lam[k, 3 * i:3 * i + 3], np.zeros(3)))
            if jacobians:
                pin.updateFramePlacement(m0, d0, fid)
                J.dimpulse[k, :, 3 * i:3 * i + 3] = -pin.getFrameJacobian(m0, d0, fid, pin.LOCAL)[:3].T
        r[k] = pin.rnea(m0, d0, q[k], zero, dv[k], fext) + arm * dv[k]
        if jacobians:
            dq, _, M = pin.computeRNEADerivatives(m0, d0, q[k], zero, dv[k], fext)
            M = np.triu(M) + np.triu(M, 1).T + np.diag(arm)
            J.dq[k] = dq
            J.dv_plus[k] = M
            J.dv_minus[k] = -M
            J.dparams[k] = pin.computeJointTorqueRegressor(m0, d0, q[k], zero, dv[k])
            J.darmature[k][np.diag_indices(nv)] = dv[k]
    return r, (J if jacobians else None)


def restitution_residual(model, data, frame_ids, q, v_minus, v_plus, restitution=0.0, jacobians=True):
    """Velocity-level reset constraint r_rest = J_c(q) v⁺ + ε J_c(q) v⁻ (N, 3 nf) [m/s], world axes.

    Stacked per foot in ``frame_ids`` order, J_c the linear LOCAL_WORLD_ALIGNED rows (eq. 9 lower block,
    eq. 11 bias v_b = −ε J_c v⁻, ε = ``restitution`` ∈ [0, 1]). Returns r and
    :class:`RestitutionJacobians` (or None).
    """
    q, vm, vp = _as_2d(q), _as_2d(v_minus), _as_2d(v_plus)
    n, nv, nf = q.shape[0], model.nv, len(frame_ids)
    eps = float(restitution)
    r = np.empty((n, 3 * nf))
    J = RestitutionJacobians(*(np.zeros((n, 3 * nf, nv)) for _ in range(3))) if jacobians else None
    for i, fid in enumerate(frame_ids):
        sl = slice(3 * i, 3 * i + 3)
        rp, Jp = contact_velocity_residual(model, data, fid, q, vp, jacobians)
        r[:, sl] = rp
        if jacobians:
            J.dq[:, sl] = Jp[:, :, :nv]
            J.dv_plus[:, sl] = Jp[:, :, nv:2 * nv]
        if eps != 0.0:
            rm, Jm = contact_velocity_residual(model, data, fid, q, vm, jacobians)
            r[:, sl] += eps * rm
            if jacobians:
                J.dq[:, sl] += eps * Jm[:, :, :nv]
                J.dv_minus[:, sl] = eps * Jm[:, :, nv:2 * nv]
    return r, J


def solve_reset(model_with_params, q, v_minus, frame_ids, restitution=0.0, rcond=1e-10):
    """Post-impact velocity and impulses from the KKT system of eq. 8 at one configuration q (nq,).

    Solves [[M, −J_Lᵀ], [J_L, 0]] [v⁺; Λ] = [M v⁻; −ε J_L v⁻] with J_L the stacked LOCAL linear foot
    rows (so Λ is in LOCAL foot axes, like :func:`impact_residual`; J_L v = 0 ⇔ J_c v = 0) by the
    Schur complement: Λ = −(1 + ε) (J_L M⁻¹ J_Lᵀ)⁺ J_L v⁻, v⁺ = v⁻ + M⁻¹ J_Lᵀ Λ. M = ``pin.crba`` of
    ``model_with_params`` (its inertias; Pinocchio ≥ 3 adds ``model.armature`` to the diagonal). A
    rank-deficient J_L (redundant contacts) is handled with a least-squares (minimum-norm Λ) Schur solve
    (``rcond``); v⁺ is unique either way. Returns v⁺ (nv,), Λ (3 nf,). Bilateral: Λ_n ≥ 0 not enforced.
    """
    model = model_with_params
    data = model.createData()
    q = np.asarray(q, float)
    vm = np.asarray(v_minus, float)
    M = pin.crba(model, data, q)
    M = np.triu(M) + np.triu(M, 1).T
    pin.computeJointJacobians(model, data, q)
    rows = []
    for fid in frame_ids:
        pin.updateFramePlacement(model, data, fid)
        rows.append(pin.getFrameJacobian(model, data, fid, pin.LOCAL)[:3])
    JL = np.vstack(rows)
    cf = sla.cho_factor(M)
    MiJt = sla.cho_solve(cf, JL.T)
    A = JL @ MiJt
    A = 0.5 * (A + A.T)
    lam = np.linalg.lstsq(A, -(1.0 + float(restitution)) * (JL @ vm), rcond=rcond)[0]
    return vm + MiJt @ lam, lam
