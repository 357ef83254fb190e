"""Configuration-manifold operations for batches of knots (Pinocchio's integrate / difference).

For models whose configuration space is a vector space (1-DoF revolute/prismatic joints, nq == nv)
these reduce to vector addition and subtraction and are evaluated vectorized; otherwise they loop
over knots with `pinocchio.difference` / `pinocchio.dDifference`, so a free-flyer base needs no redesign.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin


class ConfigurationSpace:
    """Batched ⊕ / ⊖ on the configuration manifold of a Pinocchio model."""

    def __init__(self, model: pin.Model):
        self.model = model
        self.nq, self.nv = model.nq, model.nv
        self.is_vector_space = all(
            (j.nq == j.nv == 1 and j.shortname() in VECTOR_JOINTS) for j in list(model.joints)[1:]
        )

    def difference(self, q0: np.ndarray, q1: np.ndarray) -> np.ndarray:
        """q1 ⊖ q0 in the tangent space at q0, shape (N, nv)."""
        if self.is_vector_space:
            return q1 - q0
        return np.array([pin.difference(self.model, a, b) for a, b in zip(q0, q1, strict=True)])

    def difference_jacobians(self, q0: np.ndarray, q1: np.ndarray):
        """(d(q1⊖q0)/dq0, d(q1⊖q0)/dq1), each (N, nv, nv), w.r.t. tangent perturbations q ⊕ δ."""
        n = q0.shape[0]
        if self.is_vector_space:
            eye = np.broadcast_to(np.eye(self.nv), (n, self.nv, self.nv))
            return -eye, eye
        J0 = np.array([pin.dDifference(self.model, a, b, pin.ARG0) for a, b in zip(q0, q1, strict=True)])
        J1 = np.array([pin.dDifference(self.model, a, b, pin.ARG1) for a, b in zip(q0, q1, strict=True)])
        return J0, J1

    def integrate(self, q: np.ndarray, dq: np.ndarray) -> np.ndarray:
        """q ⊕ dq for batches (N, nq), (N, nv)."""
        if self.is_vector_space:
            return q + dq
        return np.array([pin.integrate(self.model, a, b) for a, b in zip(q, dq, strict=True)])


VECTOR_JOINTS = {
    "JointModelRX", "JointModelRY", "JointModelRZ", "JointModelRevoluteUnaligned",
    "JointModelPX", "JointModelPY", "JointModelPZ", "JointModelPrismaticUnaligned",
}
