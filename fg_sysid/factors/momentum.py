"""Generalized-momentum (acceleration-free) regressors and the windowed momentum-balance residual.

Paper 002 (Zhang, Zhou & Vasudevan), Thm. 8 and Cor. 10, after Park & Choi (2016):

    p = H(q) v = W_m(q, v) π                                              (eqs. 7, 11)   [N·m·s]
    ṗ = C(q, v)ᵀ v − g(q) − τ_f(v) − Ia∘a + τ,   Cᵀv − g = W_c(q, v) π     (eqs. 8, 12)   [N·m]

and, integrated over a window [t_s, t_e] (eq. 13; the armature term integrates exactly to Ia∘Δv):

    (W_m(e) − W_m(s)) π − ∫ W_c π dt + Ia∘(v_e − v_s) + ∫ τ_f dt − ∫ τ dt = 0.

π stacks the 10 inertial parameters of every body, Pinocchio order ``(m, mc_x, mc_y, mc_z, I_xx, I_xy,
I_yy, I_xz, I_yz, I_zz)`` about the body (joint) frame. ``H`` here is the rigid-body mass matrix without
armature (armature is its own term).

The regressors are built body by body with Pinocchio, exactly (no finite differences): with v_k(q, v) the
spatial velocity of body k in its own frame (``LOCAL``), J_k = ∂v_k/∂v and I_k its spatial inertia,

    T = ½ Σ_k v_kᵀ I_k v_k,   p = ∂T/∂v = Σ_k J_kᵀ I_k v_k,   Cᵀv = ∂T/∂q = Σ_k (∂v_k/∂q)ᵀ I_k v_k,

and I_k v_k = B(v_k) π_k with ``B = pin.bodyRegressor(0, v_k)``; g(q) = ∂V/∂q is Pinocchio's joint-torque
regressor at v = a = 0. Identities checked in the tests: W_m π = CRBA(q) v, W_c π = C(q, v)ᵀ v − g(q)
(``pin.computeCoriolisMatrix``), and finite-difference dp/dt = W_c π + τ − τ_f − Ia∘a along a simulated
motion.

The residual is a plain function (`momentum_window_residual`) with analytic Jacobians w.r.t. π, the
armature, the friction coefficients, the torque samples, and the window's end-point states (q, v) and every
sample's velocity. The Jacobian of the integrand C(q, v)ᵀv − g(q) w.r.t. q at interior samples needs
second-order dynamics derivatives that Pinocchio's Python API does not expose; it is not returned (the
payload problem, `fg_sysid.payload`, treats q and v as exact, paper 002 Assumption 12).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin

QUADRATURE_RULES = ("euler", "trapezoid")


def _body_ids(model: pin.Model) -> range:
    return range(1, model.njoints)


def momentum_regressors(model: pin.Model, data: pin.Data, q: np.ndarray, v: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray]:
    """``(W_m, W_c)`` at one sample, each (nv, 10·n_bodies): W_m π = H(q)v [N·m·s], W_c π = Cᵀv − g [N·m].

    Paper 002 eqs. 11–12 (without friction and armature, which are separate terms here).
    """
    nv = model.nv
    nb = model.njoints - 1
    Wm = np.zeros((nv, 10 * nb))
    Wc = np.zeros((nv, 10 * nb))
    zero = np.zeros(nv)
    pin.computeForwardKinematicsDerivatives(model, data, q, v, zero)
    z = pin.Motion.Zero()
    for k in _body_ids(model):
        dv_dq, dv_dv = pin.getJointVelocityDerivatives(model, data, k, pin.LOCAL)
        B = pin.bodyRegressor(z, data.v[k])  # I_k v_k = B π_k   (6, 10)
        cols = slice(10 * (k - 1), 10 * k)
        Wm[:, cols] = dv_dv.T @ B
        Wc[:, cols] = dv_dq.T @ B
    Wc -= pin.computeJointTorqueRegressor(model, data, q, zero, zero)  # − g(q) = − ∂V/∂q
    return Wm, Wc


def momentum_regressors_batch(model: pin.Model, q: np.ndarray, v: np.ndarray, data: pin.Data | None = None
                              ) -> tuple[np.ndarray, np.ndarray]:
    """`momentum_regressors` at N samples: arrays (N, nv, 10·n_bodies) each."""
    data = data if data is not None else model.createData()
    q = np.atleast_2d(np.asarray(q, float))
    v = np.atleast_2d(np.asarray(v, float))
    N = q.shape[0]
    P = 10 * (model.njoints - 1)
    Wm = np.empty((N, model.nv, P))
    Wc = np.empty((N, model.nv, P))
    for i in range(N):
        Wm[i], Wc[i] = momentum_regressors(model, data, q[i], v[i])
    return Wm, Wc


def quadrature_weights(t: np.ndarray, rule: str = "trapezoid") -> np.ndarray:
    """Weights w (len(t),) with Σ_j w_j f(t_j) ≈ ∫_{t_0}^{t_end} f dt for non-uniform sample times t [s].

    ``euler``: left rectangle Σ_{j<end} f_j (t_{j+1} − t_j) (paper 002 eq. 21 with the sum ending at h−1;
    exact for a zero-order-hold signal); ``trapezoid``: O(Δt²) for a smooth signal.
    """
    t = np.asarray(t, float)
    if rule not in QUADRATURE_RULES:
        raise ValueError(f"unknown quadrature rule {rule!r}; use one of {QUADRATURE_RULES}")
    dt = np.diff(t)
    w = np.zeros_like(t)
    if rule == "euler":
        w[:-1] = dt
    else:
        w[:-1] += dt / 2
        w[1:] += dt / 2
    return w


def window_bounds(n_samples: int, h: int) -> np.ndarray:
    """Non-overlapping windows of h intervals sharing end points: rows ``(s, e)`` = (0, h), (h, 2h), …

    Paper 002 eqs. 23–24; a trailing partial window is dropped.
    """
    if h < 1:
        raise ValueError(f"window length h must be ≥ 1 sample interval, got {h}")
    starts = np.arange(0, n_samples - h, h)
    return np.stack([starts, starts + h], axis=1) if starts.size else np.zeros((0, 2), int)


@dataclass
class WindowBalance:
    """Windowed momentum balance, stacked over K windows (paper 002 eqs. 21–24 before the θ split).

    ``A (K, nv, P)``: ΔW_m − ∫W_c dt, the coefficient of π [s·N·m per unit parameter];
    ``dv (K, nv)``: v_e − v_s, the coefficient of the armature [rad/s];
    ``Fc, Fv (K, nv)``: ∫sign(v) dt [s] and ∫v dt [rad], the coefficients of Coulomb / viscous friction;
    ``tau_w (N,)``: torque quadrature weights per sample [s] and ``win (K, 2)`` the sample ranges, so
    ``T = Σ_j tau_w_j τ_j`` over a window is ∫τ dt [N·m·s].

    The balance reads  A π + Ia∘dv + fc∘Fc + fv∘Fv = T  (exact up to the quadrature of W_c and friction).
    """

    A: np.ndarray
    dv: np.ndarray
    Fc: np.ndarray
    Fv: np.ndarray
    T: np.ndarray
    tau_w: np.ndarray
    win: np.ndarray


def window_balance(t, q, v, tau, model: pin.Model, h: int, rule: str = "trapezoid",
                   tau_rule: str = "euler", regressors=None) -> WindowBalance:
    """Build the windowed momentum balance from samples (t [s], q, v, τ [N·m]) of a fixed-base robot.

    ``rule`` integrates W_c and friction; ``tau_rule`` integrates the torque (``euler`` = exact for a
    zero-order-hold command, the usual digital controller). ``regressors`` = precomputed
    ``momentum_regressors_batch`` output.
    """
    t = np.asarray(t, float)
    v = np.asarray(v, float)
    tau = np.asarray(tau, float)
    Wm, Wc = regressors if regressors is not None else momentum_regressors_batch(model, q, v)
    win = window_bounds(len(t), h)
    K = len(win)
    nv = v.shape[1]
    A = np.empty((K, nv, Wm.shape[2]))
    dv = np.empty((K, nv))
    Fc = np.empty((K, nv))
    Fv = np.empty((K, nv))
    T = np.empty((K, nv))
    tau_w = np.zeros(len(t))
    for k, (s, e) in enumerate(win):
        w = quadrature_weights(t[s:e + 1], rule)
        wt = quadrature_weights(t[s:e + 1], tau_rule)
        A[k] = Wm[e] - Wm[s] - np.einsum("j,jab->ab", w, Wc[s:e + 1])
        dv[k] = v[e] - v[s]
        Fc[k] = w @ np.sign(v[s:e + 1])
        Fv[k] = w @ v[s:e + 1]
        T[k] = wt @ tau[s:e + 1]
        tau_w[s:e] += wt[:-1]  # end point weight is 0 for euler; trapezoid shares it with the next window
        if tau_rule == "trapezoid":
            tau_w[e] += wt[-1]
    return WindowBalance(A, dv, Fc, Fv, T, tau_w, win)


def momentum_window_residual(model: pin.Model, data: pin.Data, t, q, v, tau, pi, armature, fc, fv,
                             rule: str = "trapezoid", tau_rule: str = "euler", jacobians: bool = True):
    """Momentum balance of one window (samples 0..h of the arrays) and its analytic Jacobians.

        r = W_m(q_h, v_h)π − W_m(q_0, v_0)π + Ia∘(v_h − v_0)
            − Σ_j w_j (W_c(q_j, v_j)π − fc∘sign(v_j) − fv∘v_j) − Σ_j w'_j τ_j      [N·m·s]  (paper 002 eq. 13)

    Arguments: t (h+1,) [s], q, v, τ (h+1, nv); π (10·n_bodies,), armature, fc [N·m], fv [N·m·s/rad] (nv,).
    Returns ``(r, J)`` with J a dict: ``pi`` (nv, P), ``armature``/``fc``/``fv`` (nv, nv), ``tau``
    (nv, h+1, nv), ``v`` (nv, h+1, nv) (∂r/∂v_j for every sample), and ``q_start_momentum`` /
    ``q_end_momentum`` (nv, nv): ∂r/∂q of the two momentum terms (not of the integral, see the module doc).
    """
    t = np.asarray(t, float)
    q = np.asarray(q, float)
    v = np.asarray(v, float)
    tau = np.asarray(tau, float)
    pi = np.asarray(pi, float)
    w = quadrature_weights(t, rule)
    wt = quadrature_weights(t, tau_rule)
    Wm, Wc = momentum_regressors_batch(model, q, v, data)
    A = Wm[-1] - Wm[0] - np.einsum("j,jab->ab", w, Wc)
    sgn = np.sign(v)
    r = A @ pi + armature * (v[-1] - v[0]) + fc * (w @ sgn) + fv * (w @ v) - wt @ tau
    if not jacobians:
        return r, None
    nv = model.nv
    eye = np.eye(nv)
    J = {"pi": A, "armature": np.diag(v[-1] - v[0]), "fc": np.diag(w @ sgn), "fv": np.diag(w @ v),
         "tau": -np.einsum("j,ab->ajb", wt, eye)}
    # Endpoint momenta p = H(q)v: ∂p/∂q from RNEA derivatives of H(q)·a at a = v with zero velocity and
    # zero gravity; ∂p/∂v = H (CRBA).
    mz = model.copy()
    pis = pi.reshape(-1, 10)
    for k in _body_ids(mz):
        mz.inertias[k] = pin.Inertia.FromDynamicParameters(pis[k - 1])
    mz.gravity = pin.Motion.Zero()
    mz.armature = np.zeros(nv)
    dz = mz.createData()
    zero = np.zeros(nv)

    def dp(qi, vi):
        dq, _, _ = pin.computeRNEADerivatives(mz, dz, qi, zero, vi)
        H = pin.crba(mz, dz, qi)
        H = np.triu(H) + np.triu(H, 1).T
        return np.array(dq), H

    dpq_e, H_e = dp(q[-1], v[-1])
    dpq_s, H_s = dp(q[0], v[0])
    # Integrand f = Cᵀv − g − fc sign(v) − fv v: ∂f/∂v = (∂p/∂q)ᵀ − diag(fv)   (∂²T/∂q∂v = (∂p/∂q)ᵀ).
    Jv = np.empty((nv, len(t), nv))
    for j in range(len(t)):
        dpq_j = dpq_e if j == len(t) - 1 else (dpq_s if j == 0 else dp(q[j], v[j])[0])
        Jv[:, j, :] = -w[j] * (dpq_j.T - np.diag(fv))
    Jv[:, -1, :] += H_e + np.diag(armature)
    Jv[:, 0, :] -= H_s + np.diag(armature)
    J["v"] = Jv
    # momentum terms only: the integrand's q-Jacobian (second-order dynamics) is not included, see module doc
    J["q_end_momentum"] = dpq_e
    J["q_start_momentum"] = -dpq_s
    return r, J
