"""Inverse-dynamics residual with measured effort, its analytic Jacobians, batched over knots.

    r(q, v, a, θ) = M(q; π) a + h(q, v; π) + diag(armature) a + τ_f(v, a; θ_f) − J(q)ᵀλ − τ̂      [N·m | N]

(paper 004 eq. 2 with the actuation model of eq. 55, S = I for a fixed base). ``J(q)ᵀλ`` is the slot
for constraint / contact forces; this module takes it as given generalized forces ``external`` (N, nv).

Jacobians are w.r.t. tangent perturbations of q (q ⊕ δq), v, a and the unconstrained θ:

* ∂r/∂q, ∂r/∂v, ∂r/∂a from Pinocchio's RNEA derivatives (∂r/∂a = M + diag(armature)),
  plus friction's ∂τ_f/∂v and ∂τ_f/∂a on the diagonal (∂τ_f/∂a ≠ 0 only for the soft-dry law);
* ∂r/∂θ = [Y(q, v, a) · ∂π/∂θ_i | ∂τ_f/∂θ_f | diag(a) ∂armature/∂θ_a] with Y Pinocchio's joint-torque
  regressor (paper 004 eq. 43) and the parameterization Jacobians of `fg_sysid.layout`.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from ..knot_worker import derivative_loop, shared_worker
from ..layout import ParameterLayout
from .actuation import apply_actuation


@dataclass
class IDLinearization:
    """Residual and Jacobians of N knots. Shapes: r (N, nv); Jq, Jv, Ja (N, nv, nv); Jtheta (N, nv, nθ)."""

    r: np.ndarray
    Jq: np.ndarray | None = None
    Jv: np.ndarray | None = None
    Ja: np.ndarray | None = None
    Jtheta: np.ndarray | None = None


class LayoutModel:
    """A private Pinocchio model whose inertias follow θ of a `ParameterLayout` (`set_theta`): the physical
    parameters p, their split (inertial π, friction, armature) and the parameterization Jacobians of the
    current θ. Shared by the residuals that evaluate dynamics at θ (inverse dynamics, energy)."""

    #: fewest knots for which ``processes`` = 2 splits the derivative loop (measured at 20 000; shorter
    #: chains stay serial: the hand-over's fixed cost was not measured)
    PARALLEL_KNOTS = 2000

    def __init__(self, layout: ParameterLayout):
        #: 2: the per-knot Pinocchio loop of a linearization is shared with a second process
        #: (`knot_worker`; Pinocchio holds the GIL) and the batched RNEA runs on two threads; 1: serial
        self.processes = 1
        self.layout = layout
        self.robot = layout.robot
        self.model = self.robot.model.copy()  # private: inertias are rewritten per θ
        # armature is a parameter of the layout: Pinocchio's own (URDF) armature would count it twice
        self.model.armature = np.zeros(self.model.nv)
        self.data = self.model.createData()
        self.iv = self.robot.joint_index_v()
        self._theta = None
        self._pool = None  # Pinocchio ModelPool of `rnea`, made anew after the inertias change
        self._pool_stale = True

    def rnea(self, q: np.ndarray, v: np.ndarray, a: np.ndarray) -> np.ndarray:
        """Rigid-body efforts M(q) a + h(q, v) (N, nv) [N·m | N] of the current θ's inertias (no
        armature, friction or actuation), by Pinocchio's batched RNEA (`rneaInParallel`, the loop over
        knots in C++, on two threads when ``processes`` = 2; equal to the regressor form Y(q, v, a) π up to
        rounding)."""
        threads = 2 if self.processes > 1 else 1
        if self._pool_stale or self._pool.size() != threads:  # a pool holds copies of the model
            self._pool = pin.ModelPool(self.model, threads)
            self._pool_stale = False
        q, v, a = (np.ascontiguousarray(np.atleast_2d(x), dtype=float) for x in (q, v, a))
        tau = np.asarray(pin.rneaInParallel(threads, self._pool, q.T, v.T, a.T))
        return tau.reshape(self.model.nv, q.shape[0]).T  # (a single knot comes back as a vector)

    def set_theta(self, theta: np.ndarray) -> None:
        theta = np.asarray(theta, dtype=float)
        if self._theta is not None and np.array_equal(theta, self._theta):
            return
        L = self.layout
        self._theta = theta.copy()
        self.p = L.to_physical(theta)
        self.pi, self.pf, self.parm = L.split(self.p)
        self.ti, self.tf, self.ta = L.split(theta)
        self.Ji, self.Jf, self.Ja_arm = L.jacobian_blocks(theta)
        self.robot.write_inertias(self.model, self.pi)
        self._pool_stale = True
        self.pi_flat = self.pi.ravel().copy()


class InverseDynamicsResidual(LayoutModel):
    """Evaluates the inverse-dynamics residual for a `ParameterLayout` on a private Pinocchio model."""

    # ------------------------------------------------------------------ evaluation
    def friction(self, v: np.ndarray, a: np.ndarray):
        """τ_f (N, nj), ∂τ_f/∂v (N, nj), ∂τ_f/∂a (N, nj), ∂τ_f/∂θ_f (N, nj, kf) at joint velocities
        v[:, iv] and accelerations a[:, iv] (∂τ_f/∂a = 0 for velocity-only laws)."""
        L = self.layout
        n = v.shape[0]
        tf = np.empty((n, L.nj))
        dv = np.empty((n, L.nj))
        da = np.empty((n, L.nj))
        dth = np.empty((n, L.nj, L.kf))
        for j in range(L.nj):
            tf[:, j], dv[:, j], da[:, j], dth[:, j, :] = L.friction.torque_acc(
                v[:, self.iv[j]], a[:, self.iv[j]], self.tf[j])
        return tf, dv, da, dth

    def evaluate(self, q, v, a, tau_meas, theta, jacobians: bool = True,
                 external: np.ndarray | None = None) -> IDLinearization:
        """Residual (and Jacobians) at N knots. ``tau_meas`` (N, nv); NaN entries give NaN rows."""
        self.set_theta(theta)
        q = np.atleast_2d(q)
        v = np.atleast_2d(v)
        a = np.atleast_2d(a)
        n, nv = v.shape
        L = self.layout
        if jacobians:
            Y, Jq, Jv, Ja = self._derivatives(q, v, a)
            # Pinocchio fills only the upper triangle of M in some versions; symmetrize.
            Ja = np.triu(Ja) + np.transpose(np.triu(Ja, 1), (0, 2, 1))
            r = Y @ self.pi_flat
        else:  # the residual alone (cost evaluations): RNEA with the θ inertias, one C++ loop over knots
            r = self.rnea(q, v, a)
        tf, dtf_dv, dtf_da, dtf_dth = self.friction(v, a)
        iv = self.iv
        r[:, iv] += tf + a[:, iv] * self.parm
        if external is not None:
            r -= external
        r -= tau_meas
        if not jacobians:
            return apply_actuation(L, theta, IDLinearization(r), tau_meas, iv)  # issue 9 item 2
        rows = np.arange(L.nj)
        Jv[:, iv, iv] += dtf_dv
        Ja[:, iv, iv] += self.parm + dtf_da
        Jth = np.zeros((n, nv, L.n))
        # Σ_j Y[n, v, b, j] Ji[b, j, k]: one BLAS product per body over all (knot, joint) rows, in place
        Y2, J2 = Y.reshape(n * nv, 10 * L.nb), Jth.reshape(n * nv, L.n)
        i0 = L.s_inertial.start
        for b in range(L.nb):
            np.matmul(Y2[:, 10 * b:10 * b + 10], self.Ji[b], out=J2[:, i0 + 10 * b:i0 + 10 * b + 10])
        f0 = L.s_friction.start
        for j in range(L.nj):
            Jth[:, iv[j], f0 + j * L.kf: f0 + (j + 1) * L.kf] = dtf_dth[:, j, :]  # w.r.t. θ_f
        Jth[:, iv[rows], L.s_armature.start + rows] = a[:, iv] * self.Ja_arm
        return apply_actuation(L, theta, IDLinearization(r, Jq, Jv, Ja, Jth), tau_meas, iv)  # issue 9 item 2

    def _derivatives(self, q, v, a):
        """Y (N, nv, 10·nb), ∂τ/∂q, ∂τ/∂v, M (N, nv, nv) at the current inertias (`derivative_loop`);
        with ``processes`` = 2 and enough knots, the second half of the knots in `knot_worker`'s process
        (bit-identical; if the worker fails, that half runs here too, with a warning)."""
        n, nv = v.shape
        Y = np.empty((n, nv, 10 * self.layout.nb))
        Jq, Jv, Ja = (np.empty((n, nv, nv)) for _ in range(3))
        worker = shared_worker() if self.processes > 1 and n >= self.PARALLEL_KNOTS else None
        if worker is None:
            derivative_loop(self.model, self.data, q, v, a, Jq, Jv, Ja, Y, 0, n)
            return Y, Jq, Jv, Ja
        half = n // 2
        try:
            worker.run(self.model, q[half:], v[half:], a[half:],
                       lambda: derivative_loop(self.model, self.data, q, v, a, Jq, Jv, Ja, Y, 0, half),
                       out=(Jq[half:], Jv[half:], Ja[half:], Y[half:]))
        except RuntimeError as exc:
            warnings.warn(f"fg-sysid knot worker: {exc}; its knots were computed here", RuntimeWarning,
                          stacklevel=3)
            derivative_loop(self.model, self.data, q, v, a, Jq, Jv, Ja, Y, half, n)
        return Y, Jq, Jv, Ja

    def predict(self, q, v, a, theta) -> np.ndarray:
        """Joint efforts the model predicts, (N, nv): M a + h + armature·a + τ_f; with an actuation block in
        the layout, as the effort sensors log them: g·τ + o (`factors.actuation`)."""
        zero = np.zeros_like(np.atleast_2d(v))
        return self.evaluate(q, v, a, zero, theta, jacobians=False).r
