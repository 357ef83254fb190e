"""Forward-dynamics residual: the state's acceleration against the model's forward dynamics (paper 004
Sec. II / Fig. 10, the formulation the inverse-dynamics smoother is compared with).

    r(q, v, a, θ) = a_fd(q, v, τ̂; θ) − a                                                  [rad/s² | m/s²]

with a_fd the acceleration the model with parameters θ produces under the measured efforts τ̂ (Pinocchio's
ABA of M(q; π) + diag(armature), friction τ_f(v; θ_f) included). Because the inverse dynamics
τ_ID(q, v, a; θ) = M a + h + diag(armature) a + τ_f is affine in a, a_fd comes from the inverse-dynamics
residual r_ID = τ_ID − τ̂ of `InverseDynamicsResidual` (the single source of the dynamics and its
parameter Jacobians):

    a_fd = a − J_a⁻¹ r_ID(q, v, a; θ),          J_a = ∂τ_ID/∂a = M(q; π) + diag(armature)

and by the implicit-function theorem on τ_ID(q, v, a_fd; θ) = τ̂ the Jacobians are those of the inverse
dynamics evaluated at a_fd, mapped through −J_a⁻¹:

    ∂r/∂(q, v, θ) = −J_a⁻¹ ∂τ_ID/∂(q, v, θ) |_(q, v, a_fd),      ∂r/∂a = −I.

Weighting: the forward-dynamics formulation treats the measured efforts as the input and puts the noise
on the accelerations; `acceleration_sigma` maps the effort noise through J_a⁻¹ (per joint, the median over
knots of √diag(J_a⁻¹ Σ_τ J_a⁻ᵀ)) and holds it constant. (With the exact per-knot covariance
J_a⁻¹ Σ_τ J_a⁻ᵀ the whitened cost would equal the inverse-dynamics one; the formulations then differ only
in the Gauss–Newton linearization.)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from .inverse_dynamics import InverseDynamicsResidual


@dataclass
class FDLinearization:
    """Residual (N, nv) and Jacobians Jq, Jv (N, nv, nv), Jtheta (N, nv, nθ) (∂r/∂a = −I is implied)."""

    r: np.ndarray
    Jq: np.ndarray | None = None
    Jv: np.ndarray | None = None
    Jtheta: np.ndarray | None = None
    a_fd: np.ndarray | None = None


class ForwardDynamicsResidual:
    """r = a_fd(q, v, τ̂; θ) − a over N knots, through an `InverseDynamicsResidual` (fixed base; every
    effort measured)."""

    def __init__(self, id_residual: InverseDynamicsResidual):
        self.id = id_residual

    def mass_matrix(self, q: np.ndarray, theta: np.ndarray) -> np.ndarray:
        """J_a = M(q; π) + diag(armature) (N, nv, nv) [kg·m² | kg] at θ."""
        idr = self.id
        idr.set_theta(theta)
        q = np.atleast_2d(q)
        n, nv = q.shape[0], idr.model.nv
        M = np.empty((n, nv, nv))
        for k in range(n):
            Mk = pin.crba(idr.model, idr.data, q[k])
            M[k] = np.triu(Mk) + np.triu(Mk, 1).T  # Pinocchio fills the upper triangle
        M[:, idr.iv, idr.iv] += idr.parm
        return M

    def evaluate(self, q, v, a, tau_meas, theta, jacobians: bool = True) -> FDLinearization:
        """Residual (and Jacobians) at N knots; ``tau_meas`` (N, nv) must be finite."""
        q, v, a = np.atleast_2d(q), np.atleast_2d(v), np.atleast_2d(a)
        r_id = self.id.evaluate(q, v, a, tau_meas, theta, jacobians=False).r
        M = self.mass_matrix(q, theta)
        step = np.linalg.solve(M, r_id[..., None])[..., 0]
        a_fd = a - step
        if not jacobians:
            return FDLinearization(-step, a_fd=a_fd)
        lin = self.id.evaluate(q, v, a_fd, tau_meas, theta, jacobians=True)
        Minv = np.linalg.inv(M)
        return FDLinearization(-step, -Minv @ lin.Jq, -Minv @ lin.Jv, -Minv @ lin.Jtheta, a_fd)


def acceleration_sigma(fd: ForwardDynamicsResidual, q: np.ndarray, theta: np.ndarray,
                       sigma_tau: np.ndarray) -> np.ndarray:
    """Per-coordinate acceleration noise std (nv,) [rad/s² | m/s²] of the forward-dynamics formulation: the
    median over the knots ``q`` (N, nq) of √diag(J_a⁻¹ diag(σ_τ²) J_a⁻ᵀ), ``sigma_tau`` (nv,) [N·m | N]."""
    Minv = np.linalg.inv(fd.mass_matrix(q, theta))
    var = np.einsum("nij,j,nij->ni", Minv, np.asarray(sigma_tau, float) ** 2, Minv)
    return np.sqrt(np.median(var, axis=0))
