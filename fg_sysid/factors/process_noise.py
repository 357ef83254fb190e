"""Constraint-consistent process noise (paper 004 Sec. V-A, eqs. 34–37).

Process noise w = (w_q, w_v) ∈ R^{2 nv} on the knot-to-knot integrator (eq. 34) must respect the implicit
motion constraints J_c(q) v̇ = a_b of the feet in contact: noise along constrained directions would let the
smoother "explain" a foot slipping by a disturbance. Paper 004 projects it with the dynamically
consistent nullspace projector (eq. 36)

    N(q) = I − M⁻¹ J_cᵀ (J_c M⁻¹ J_cᵀ)⁻¹ J_c,

the solution operator of Gauss's principle min ½‖w̃ − w‖²_M s.t. J_c w̃ = 0 (eq. 38): N is idempotent,
J_c N = 0, and M N is symmetric (N is the M-orthogonal projector onto ker J_c). The purely kinematic
alternative is N_kin = I − J_cᵀ (J_c J_cᵀ)⁻¹ J_c (Euclidean-orthogonal, independent of inertia). With
P = diag(N, N) the projected covariance is Σ_w̃ = P Σ_w Pᵀ (eq. 37), which is singular
(rank 2 (nv − rank J_c)).

:func:`projected_noise_whitener` turns it into a square-root information matrix usable as a Gaussian noise
model: W with WᵀW = (P Σ_w Pᵀ + floor² I)⁻¹. Directions in the row space of J_c (the constrained ones, the
left null space of P) get standard deviation ``floor``, so a small ``floor`` makes the constraint near-hard
while the matrix stays invertible; directions in ker J_c keep (approximately, for floor ≪ σ) the projected
covariance. In the smoother, the whitened process residual is W (x_{k+1} ⊖ Ψ(x_k, v̇_k)) with P evaluated at
the knot's contact set (J_c from :func:`contact_jacobian`, M from ``pin.crba``).

J_c here is the stack of linear LOCAL_WORLD_ALIGNED foot rows (3 per foot, world axes), as in
:mod:`.contact`. Rank-deficient J_c (e.g. redundant contacts) is handled by replacing the inverse of the
Gram matrix with a least-squares / pseudo-inverse solve; the result is still the M-orthogonal (resp.
orthogonal) projector onto ker J_c.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import scipy.linalg as sla

LWA = pin.LOCAL_WORLD_ALIGNED


def contact_jacobian(model, data, q, frame_ids) -> np.ndarray:
    """J_c (3 nf, nv): stacked linear LOCAL_WORLD_ALIGNED Jacobian rows of ``frame_ids`` at q (nq,)."""
    pin.computeJointJacobians(model, data, np.asarray(q, float))
    rows = []
    for fid in frame_ids:
        pin.updateFramePlacement(model, data, fid)
        rows.append(pin.getFrameJacobian(model, data, fid, LWA)[:3])
    return np.vstack(rows) if rows else np.zeros((0, model.nv))


def _gram_solve(A, B, rcond):
    """A⁻¹ B for a symmetric PSD Gram matrix A; Cholesky when well conditioned, else min-norm lstsq (A⁺ B)."""
    try:
        cf = sla.cho_factor(A)
        d = np.diag(cf[0]) ** 2
        if d.min() > rcond * d.max():
            return sla.cho_solve(cf, B)
    except np.linalg.LinAlgError:
        pass
    return np.linalg.lstsq(A, B, rcond=rcond)[0]


def dynamically_consistent_projector(M, Jc, rcond=1e-10) -> np.ndarray:
    """N = I − M⁻¹ J_cᵀ (J_c M⁻¹ J_cᵀ)⁻¹ J_c (nv, nv), paper 004 eq. 36.

    M (nv, nv) SPD mass matrix (factorised once by Cholesky, no explicit inverse), J_c (nc, nv). If J_c is
    rank deficient the Gram inverse becomes a pseudo-inverse (lstsq with ``rcond``); N is then still the
    M-orthogonal projector onto ker J_c. Properties: N² = N, J_c N = 0, M N = Nᵀ M.
    """
    M = np.asarray(M, float)
    Jc = np.asarray(Jc, float)
    nv = M.shape[0]
    if Jc.shape[0] == 0:
        return np.eye(nv)
    MiJt = sla.cho_solve(sla.cho_factor(M), Jc.T)
    A = Jc @ MiJt
    return np.eye(nv) - MiJt @ _gram_solve(0.5 * (A + A.T), Jc, rcond)


def kinematic_projector(Jc, rcond=1e-10) -> np.ndarray:
    """N_kin = I − J_cᵀ (J_c J_cᵀ)⁻¹ J_c (nv, nv): orthogonal projector onto ker J_c (pseudo-inverse if
    J_c is rank deficient). Symmetric, idempotent, J_c N_kin = 0; independent of the inertial parameters."""
    Jc = np.asarray(Jc, float)
    nv = Jc.shape[1]
    if Jc.shape[0] == 0:
        return np.eye(nv)
    return np.eye(nv) - Jc.T @ _gram_solve(Jc @ Jc.T, Jc, rcond)


def block_projector(N) -> np.ndarray:
    """P = diag(N, N) (2 nv, 2 nv), the state-noise projector of eq. 37 (same N on w_q and w_v)."""
    return sla.block_diag(N, N)


def projected_noise_whitener(P, sigma_q, sigma_v, floor) -> np.ndarray:
    """Square-root information W (2 nv, 2 nv) with WᵀW = (P Σ Pᵀ + floor² I)⁻¹ (paper 004 eq. 37).

    ``P`` (2 nv, 2 nv): the state-noise projector, normally ``block_projector(N)`` = diag(N, N).
    Σ = diag(σ_q², σ_v²) with ``sigma_q``, ``sigma_v`` scalars or (nv,) arrays (tangent units: rad | m and
    rad/s | m/s per knot step). ``floor`` > 0: std [same units] given to the constrained directions, which
    regularises the singular projected covariance. W = L⁻¹ with L the lower Cholesky factor of the
    regularised covariance, so W C Wᵀ = I and the whitened process residual is W w.
    """
    P = np.asarray(P, float)
    if P.ndim != 2 or P.shape[0] != P.shape[1] or P.shape[0] % 2:
        raise ValueError("P must be square (2 nv, 2 nv); use block_projector(N) for diag(N, N)")
    if floor <= 0:
        raise ValueError("floor must be > 0 (the projected covariance is singular)")
    nv = P.shape[0] // 2
    sq = np.broadcast_to(np.asarray(sigma_q, float), (nv,))
    sv = np.broadcast_to(np.asarray(sigma_v, float), (nv,))
    var = np.concatenate([sq, sv]) ** 2
    C = (P * var) @ P.T + float(floor) ** 2 * np.eye(2 * nv)
    L = np.linalg.cholesky(0.5 * (C + C.T))
    return sla.solve_triangular(L, np.eye(2 * nv), lower=True)
