"""Kinematic residuals on the knot states x_k = (q_k, v_k, a_k), batched, with analytic Jacobians.

All Jacobians are w.r.t. tangent perturbations (q ⊕ δq, v + δv, a + δa), columns ordered (δq, δv, δa).

* Encoder:      r = q̂_k ⊖ ... i.e. r = q_k ⊖ q̂_k  (difference(q̂_k, q_k))                       [rad | m]
* Velocity:     r = v_k − v̂_k                                                                [rad/s | m/s]
* Integration between knots k and k+1 (step h), Euler–Maclaurin corrected trapezoid rules:

      r_q = (q_{k+1} ⊖ q_k) − h/2 (v_k + v_{k+1}) + h²/12 (a_{k+1} − a_k)      [rad]
      r_v = v_{k+1} − v_k − h/2 (a_k + a_{k+1})                              [rad/s]

  exact for polynomial motion of degree ≤ 3 in q (the "integration between knots on the manifold" of
  paper 004 eq. 1b, written implicitly so that both knots stay free variables); process noise is the
  std of r_q, r_v.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .manifold import ConfigurationSpace


@dataclass
class PairLinearization:
    """Residual (N-1, m) and Jacobians on x_k (J0) and x_{k+1} (J1), each (N-1, m, 3 nv)."""

    r: np.ndarray
    J0: np.ndarray | None = None
    J1: np.ndarray | None = None


def encoder_residual(space: ConfigurationSpace, q, q_meas, jacobians=True):
    """r = q ⊖ q̂ (N, nv); Jacobian (N, nv, 3nv) on the knot state."""
    r = space.difference(q_meas, q)
    if not jacobians:
        return r, None
    _, J1 = space.difference_jacobians(q_meas, q)
    n, nv = r.shape
    J = np.zeros((n, nv, 3 * nv))
    J[:, :, :nv] = J1
    return r, J


def velocity_residual(v, v_meas, jacobians=True):
    """r = v − v̂ (N, nv); Jacobian (N, nv, 3nv)."""
    r = v - v_meas
    if not jacobians:
        return r, None
    n, nv = r.shape
    J = np.zeros((n, nv, 3 * nv))
    J[:, :, nv:2 * nv] = np.eye(nv)
    return r, J


def integration_residual(space: ConfigurationSpace, q, v, a, h, jacobians=True) -> PairLinearization:
    """Residuals (r_q, r_v) stacked as (N-1, 2nv) between consecutive knots; ``h`` (N-1,) steps [s]."""
    h = np.asarray(h, float).reshape(-1, 1)
    q0, q1 = q[:-1], q[1:]
    v0, v1, a0, a1 = v[:-1], v[1:], a[:-1], a[1:]
    rq = space.difference(q0, q1) - 0.5 * h * (v0 + v1) + (h * h / 12.0) * (a1 - a0)
    rv = v1 - v0 - 0.5 * h * (a0 + a1)
    r = np.concatenate([rq, rv], axis=1)
    if not jacobians:
        return PairLinearization(r)
    n, nv = rq.shape
    D0, D1 = space.difference_jacobians(q0, q1)
    eye = np.eye(nv)
    hh = h[:, :, None]
    J0 = np.zeros((n, 2 * nv, 3 * nv))
    J1 = np.zeros((n, 2 * nv, 3 * nv))
    J0[:, :nv, :nv] = D0
    J0[:, :nv, nv:2 * nv] = -0.5 * hh * eye
    J0[:, :nv, 2 * nv:] = -(hh * hh / 12.0) * eye
    J0[:, nv:, nv:2 * nv] = -eye
    J0[:, nv:, 2 * nv:] = -0.5 * hh * eye
    J1[:, :nv, :nv] = D1
    J1[:, :nv, nv:2 * nv] = -0.5 * hh * eye
    J1[:, :nv, 2 * nv:] = (hh * hh / 12.0) * eye
    J1[:, nv:, nv:2 * nv] = eye
    J1[:, nv:, 2 * nv:] = -0.5 * hh * eye
    return PairLinearization(r, J0, J1)


def prior_residual(theta, mean, std):
    """Whitened parameter prior r = (θ − θ̄) / σ and its (diagonal) Jacobian 1/σ."""
    return (np.asarray(theta) - mean) / std, 1.0 / np.asarray(std)
