"""Work–energy residual (paper 004 Sec. VII, eqs. 62–71) with analytic Jacobians, batched over windows.

Over a window of knots ``a = k_0 < k_1 < … < k_L = b`` (times t_i, states x_i = (q_i, v_i)) the residual

    r = E(x_b; θ) − E(x_a; θ) + W_f(v_a..v_b; θ_f) − Ŵ_in                                        [J]

is paper 004 eq. 63 (y_E − ŷ_E) with

* mechanical energy ``E = K + U + K_arm`` linear in the inertial parameters π (eq. 69):
  ``K + U = (Y_K(q, v) + Y_U(q)) · π`` with Pinocchio's ``computeKineticEnergyRegressor`` /
  ``computePotentialEnergyRegressor`` (eqs. 67–68; spatial velocities in the body frames, gravity
  ``model.gravity`` in the world frame), plus the rotor (armature) kinetic energy
  ``K_arm = ½ Σ_j armature_j v_j²`` of the actuated joints;
* friction dissipation ``W_f = ∫ vᵀ τ_f(v; θ_f) dt`` (eq. 63's T_f) by the trapezoid rule over the
  window's knots (so ``W_f ≥ 0`` for any friction model whose force opposes motion);
* measured input work ``Ŵ_in = ∫ v̂ᵀ τ̂ dt`` (eq. 63's ŷ_E) by the trapezoid rule over the *log samples*
  between ``t_a`` and ``t_b`` (`input_work`); it is data, not a function of the states.

Jacobians (tangent perturbations ``q ⊕ δq`` as everywhere in fg-sysid, v, and the unconstrained θ):

* ``∂K/∂q = Σ_k (I_k v_k)ᵀ ∂v_k/∂q`` (eq. 70) from Pinocchio's forward-kinematics derivatives (body-frame
  spatial velocity v_k and inertia I_k of each body); ``∂K/∂v = M(q) v`` (+ ``armature·v``);
* ``∂U/∂q = g(q)`` the generalized gravity (eq. 71), ``computeGeneralizedGravity``;
* ``∂r/∂θ = (Y_E(x_b) − Y_E(x_a)) ∂π/∂θ_i | Σ_i c_i v_iᵀ ∂τ_f/∂θ_f | ½(v_b² − v_a²) ∂armature/∂θ_a``
  (eq. 66 without the hybrid-dynamics term: the states are variables of the factor graph here, not the
  output of a forward-dynamics step).

Floating base. The free-flyer's 6 velocity entries are not actuated and do no measured work; the
generalized forces of contacts do **no work** under the assumption that a stance contact point does not
move (``J_c v = 0``: no slip, no penetration; for a rolling sphere foot, the contact point's velocity is
zero too). Windows that contain a touchdown (impact losses, a foot that still slides) or a sliding foot
violate this assumption: leave them out (`stance_constant_windows`).

Noise level. With independent zero-mean noise of std σ_τ on τ̂ and σ_v on v̂ (per joint and sample),
the trapezoid sum ``Ŵ = Σ_i w_i Σ_j v̂_ij τ̂_ij`` has variance (product of independent Gaussians,
``var(xy) = μ_x² σ_y² + μ_y² σ_x² + σ_x² σ_y²``)

    σ_W² = Σ_i w_i² Σ_j (v_ij² σ_τ² + τ_ij² σ_v² + σ_v² σ_τ²)

evaluated with the measured values in place of the true ones (`input_work_std`). State noise does not
enter: in the factor graph the states are variables whose uncertainty the other factors carry.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from ..layout import ParameterLayout
from .inverse_dynamics import LayoutModel
from .manifold import ConfigurationSpace

__all__ = [
    "EnergyLinearization",
    "EnergyResidual",
    "input_power",
    "input_work",
    "input_work_std",
    "interval_windows",
    "stance_constant_windows",
    "trapezoid_weights",
]


# ---------------------------------------------------------------------------------------------- measured work
def _check_efforts(tau: np.ndarray, joint_names) -> None:
    cols = np.asarray(tau, float).T
    bad = [j for j, col in zip(joint_names, cols, strict=True) if np.any(~np.isfinite(col))]
    if bad:
        raise ValueError(
            f"energy observations need the effort of every actuated joint at every sample (the work of an "
            f"unmeasured effort is unknown); missing or non-finite efforts for joint(s) {bad}"
        )


def input_power(v_meas: np.ndarray, tau_meas: np.ndarray) -> np.ndarray:
    """Measured actuation power ``P̂_i = Σ_j v̂_ij τ̂_ij`` [W] per sample; (N, n_joints) inputs."""
    return np.einsum("ij,ij->i", np.asarray(v_meas, float), np.asarray(tau_meas, float))


def trapezoid_weights(t: np.ndarray) -> np.ndarray:
    """Weights c_i [s] of the trapezoid rule over the samples ``t`` (N,): ``∫ f dt ≈ Σ c_i f(t_i)``."""
    t = np.asarray(t, float)
    dt = np.diff(t)
    c = np.zeros(t.size)
    c[:-1] += 0.5 * dt
    c[1:] += 0.5 * dt
    return c


def _sample_ranges(t: np.ndarray, t_a: np.ndarray, t_b: np.ndarray):
    t = np.asarray(t, float)
    ia = np.searchsorted(t, np.asarray(t_a, float) - 1e-9 * max(1.0, abs(t[-1])))
    ib = np.searchsorted(t, np.asarray(t_b, float) + 1e-9 * max(1.0, abs(t[-1])), side="right") - 1
    if np.any(ib <= ia):
        raise ValueError("every energy window must span at least two log samples")
    return ia, ib


def input_work(t: np.ndarray, v_meas: np.ndarray, tau_meas: np.ndarray, t_a, t_b,
               joint_names=None, quadrature: str = "trapezoid",
               q_meas: np.ndarray | None = None) -> np.ndarray:
    """Measured input work ``Ŵ = ∫_{t_a}^{t_b} v̂ᵀ τ̂ dt`` [J] per window.

    ``t`` (N,) sample times [s]; ``v_meas``, ``tau_meas`` (N, n_joints) joint velocities [rad/s | m/s] and
    efforts [N·m | N]; ``t_a``, ``t_b`` (W,) window bounds, which must be sample instants (knots sit on
    samples). Raises ValueError when an effort is missing (NaN): its work would be unknown.

    ``quadrature``: ``"trapezoid"`` (eq. 63's ŷ_E: ``Σ ½ Δt (P̂_i + P̂_{i+1})``, ``P̂ = v̂ᵀτ̂``) or ``"zoh"``
    for efforts held constant over each sample interval (sampled commands, as `fg_sysid.datasets.simulate`
    logs them): ``Σ τ̂_iᵀ (q̂_{i+1} − q̂_i)``, exact for held efforts, from the joint positions ``q_meas``
    (N, n_joints) of 1-DoF joints. The trapezoid rule is biased by ``O(Δt · τ̇ᵀ v)`` on held efforts
    (0.3 % of the work on a 500 Hz z1 log).
    """
    tau_meas = np.asarray(tau_meas, float)
    _check_efforts(tau_meas, joint_names or [f"#{j}" for j in range(tau_meas.shape[1])])
    t = np.asarray(t, float)
    if quadrature == "trapezoid":
        P = input_power(v_meas, tau_meas)
        inc = 0.5 * np.diff(t) * (P[1:] + P[:-1])
    elif quadrature == "zoh":
        if q_meas is None:
            raise ValueError("zoh quadrature of the input work needs the joint positions q_meas")
        inc = np.einsum("ij,ij->i", tau_meas[:-1], np.diff(np.asarray(q_meas, float), axis=0))
    else:
        raise ValueError(f"unknown work quadrature {quadrature!r}; choices: trapezoid, zoh")
    cum = np.concatenate([[0.0], np.cumsum(inc)])
    ia, ib = _sample_ranges(t, t_a, t_b)
    return cum[ib] - cum[ia]


def input_work_std(t: np.ndarray, v_meas: np.ndarray, tau_meas: np.ndarray, t_a, t_b,
                   sigma_v, sigma_tau, quadrature: str = "trapezoid", q_meas: np.ndarray | None = None,
                   sigma_q=0.0) -> np.ndarray:
    """Std [J] of `input_work` per window from the sensor noise (module docstring formula).

    ``sigma_v`` [rad/s], ``sigma_tau`` [N·m], ``sigma_q`` [rad]: scalars or per joint (n_joints,).
    Trapezoid: ``σ_W² = Σ_i c_i² Σ_j (v_ij² σ_τ² + τ_ij² σ_v² + σ_v² σ_τ²)``. ZOH
    (``Σ_i τ_iᵀ Δq_i``, summation by parts): ``σ_W² = Σ_j [σ_τ² Σ_i Δq_ij² + σ_q² (τ_aj² + τ_(b−1)j²
    + Σ_(a<i<b) (τ_ij − τ_(i−1)j)²) + 2 n_steps σ_q² σ_τ²]`` — smooth efforts make the position noise
    nearly cancel.
    """
    t = np.asarray(t, float)
    v = np.asarray(v_meas, float)
    tau = np.asarray(tau_meas, float)
    nj = tau.shape[1]
    sv = np.broadcast_to(np.asarray(sigma_v, float), (nj,))
    st = np.broadcast_to(np.asarray(sigma_tau, float), (nj,))
    sq = np.broadcast_to(np.asarray(sigma_q, float), (nj,))
    ia, ib = _sample_ranges(t, t_a, t_b)
    out = np.empty(ia.size)
    if quadrature == "zoh":
        if q_meas is None:
            raise ValueError("zoh quadrature of the input work needs the joint positions q_meas")
        dq = np.diff(np.asarray(q_meas, float), axis=0)
        for w, (a, b) in enumerate(zip(ia, ib, strict=True)):
            var_tau = np.sum(dq[a:b] ** 2, axis=0) * st ** 2
            dtau = np.diff(tau[a:b], axis=0)
            var_q = (tau[a] ** 2 + tau[b - 1] ** 2 + np.sum(dtau ** 2, axis=0)) * sq ** 2
            out[w] = np.sqrt(np.sum(var_tau + var_q + 2 * (b - a) * sq ** 2 * st ** 2))
        return out
    per_sample = (v ** 2) @ (st ** 2) + (tau ** 2) @ (sv ** 2) + float(np.sum(sv ** 2 * st ** 2))
    for w, (a, b) in enumerate(zip(ia, ib, strict=True)):
        c = trapezoid_weights(t[a:b + 1])
        out[w] = np.sqrt(np.sum(c ** 2 * per_sample[a:b + 1]))
    return out


def interval_windows(n_knots: int, length: int = 1, stride: int | None = None) -> np.ndarray:
    """Start indices of windows of ``length`` knot intervals, every ``stride`` knots (default: length,
    i.e. consecutive non-overlapping windows), over ``n_knots`` knots."""
    if length < 1:
        raise ValueError(f"energy window length must be >= 1 knot interval, got {length}")
    stride = length if stride is None else int(stride)
    if stride < 1:
        raise ValueError(f"energy window stride must be >= 1, got {stride}")
    return np.arange(0, n_knots - length, stride, dtype=int)


def stance_constant_windows(starts: np.ndarray, length: int, contacts: np.ndarray) -> np.ndarray:
    """Keep the windows over which no contact flag changes (``contacts`` (N_knots, n_feet) bool): the
    stance-contact-does-no-work assumption holds there (no impact inside the window)."""
    contacts = np.asarray(contacts, bool).reshape(len(contacts), -1)
    change = np.any(contacts[1:] != contacts[:-1], axis=1).astype(int)
    cum = np.concatenate([[0], np.cumsum(change)])
    starts = np.asarray(starts, int)
    return starts[cum[starts + length] == cum[starts]]


# ---------------------------------------------------------------------------------------------- residual
@dataclass
class EnergyLinearization:
    """Residual and Jacobians of W windows of L knot intervals.

    Shapes: r (W,) [J]; Jq_a, Jq_b (W, nv) w.r.t. the tangent perturbations of the first and last knot's q;
    Jv (W, L+1, nv) w.r.t. the velocities of the window's L+1 knots; Jtheta (W, nθ).
    """

    r: np.ndarray
    Jq_a: np.ndarray | None = None
    Jq_b: np.ndarray | None = None
    Jv: np.ndarray | None = None
    Jtheta: np.ndarray | None = None


class EnergyResidual(LayoutModel):
    """Work–energy residual (eq. 63) for a `ParameterLayout`, on a private Pinocchio model.

    Works for fixed and free-flyer bases (see the module docstring for the contact assumption).
    """

    def __init__(self, layout: ParameterLayout):
        super().__init__(layout)
        self.space = ConfigurationSpace(self.model)

    # ------------------------------------------------------------------ per-knot pieces
    def energy_regressor(self, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """``Y_K(q, v) + Y_U(q)`` (N, 10 nb): mechanical energy of the bodies = this · π [J] (eq. 69)."""
        q, v = np.atleast_2d(q), np.atleast_2d(v)
        m, d = self.model, self.data
        return np.array([pin.computeKineticEnergyRegressor(m, d, qk, vk)
                         + pin.computePotentialEnergyRegressor(m, d, qk)
                         for qk, vk in zip(q, v, strict=True)])

    def energy(self, q: np.ndarray, v: np.ndarray, theta: np.ndarray) -> np.ndarray:
        """Total mechanical energy E = K + U + K_arm [J] per knot, (N,)."""
        self.set_theta(theta)
        v = np.atleast_2d(v)
        return self.energy_regressor(q, v) @ self.pi_flat + 0.5 * (v[:, self.iv] ** 2) @ self.parm

    def friction_power(self, v: np.ndarray):
        """``P_f = Σ_j v_j τ_f,j`` [W] (N,), ∂P_f/∂v (N, nv), ∂P_f/∂θ_f (N, nj·kf) at knot velocities."""
        L = self.layout
        v = np.atleast_2d(v)
        n = v.shape[0]
        P = np.zeros(n)
        dv = np.zeros((n, v.shape[1]))
        dth = np.zeros((n, L.nj * L.kf))
        for j in range(L.nj):
            vj = v[:, self.iv[j]]
            tf, dtf_dv, dtf_dth = L.friction.torque(vj, self.tf[j])
            P += vj * tf
            dv[:, self.iv[j]] = tf + vj * dtf_dv
            dth[:, j * L.kf:(j + 1) * L.kf] = vj[:, None] * dtf_dth
        return P, dv, dth

    def energy_gradients(self, q: np.ndarray, v: np.ndarray):
        """∂E/∂q (tangent, eqs. 70–71) and ∂E/∂v = M v + armature·v, each (N, nv), at the current θ."""
        m, d = self.model, self.data
        q, v = np.atleast_2d(q), np.atleast_2d(v)
        n, nv = v.shape
        dq = np.zeros((n, nv))
        dv = np.zeros((n, nv))
        zero = np.zeros(nv)
        for k in range(n):
            pin.computeForwardKinematicsDerivatives(m, d, q[k], v[k], zero)
            g = pin.computeGeneralizedGravity(m, d, q[k])
            acc = g.copy()
            for jid in range(1, m.njoints):
                dvq, _ = pin.getJointVelocityDerivatives(m, d, jid, pin.LOCAL)
                h = m.inertias[jid] * d.v[jid]  # body momentum I_k v_k, body frame
                acc += dvq.T @ h.vector
            dq[k] = acc
            M = pin.crba(m, d, q[k])
            M = np.triu(M) + np.triu(M, 1).T
            dv[k] = M @ v[k]
        dv[:, self.iv] += v[:, self.iv] * self.parm
        return dq, dv

    # ------------------------------------------------------------------ windows
    def evaluate(self, q, v, t, theta, work, starts=None, length: int = 1,
                 jacobians: bool = True) -> EnergyLinearization:
        """Residuals (and Jacobians) of the windows ``[starts[w], starts[w] + length]`` of the knots.

        ``q`` (N, nq), ``v`` (N, nv) knot states (Pinocchio conventions), ``t`` (N,) knot times [s],
        ``work`` (W,) measured input work per window [J] (`input_work`), ``starts`` (W,) first knot of each
        window (default: every knot interval, ``length`` 1).
        """
        self.set_theta(theta)
        q = np.atleast_2d(np.asarray(q, float))
        v = np.atleast_2d(np.asarray(v, float))
        t = np.asarray(t, float)
        n, nv = v.shape
        L = int(length)
        starts = interval_windows(n, L) if starts is None else np.asarray(starts, int)
        work = np.asarray(work, float)
        if work.shape != starts.shape:
            raise ValueError(f"{starts.size} energy windows but {work.size} input-work values")
        if starts.size and (starts.min() < 0 or starts.max() + L > n - 1):
            raise ValueError(f"energy windows of {L} intervals must lie within the {n} knots")
        ends = starts + L
        used = np.unique(np.concatenate([starts, ends]))
        Y = np.zeros((n, 10 * self.layout.nb))
        Y[used] = self.energy_regressor(q[used], v[used])
        E = Y @ self.pi_flat + 0.5 * (v[:, self.iv] ** 2) @ self.parm
        Pf, dPf_dv, dPf_dth = self.friction_power(v)
        # trapezoid weights of each window over its own knots: (W, L+1)
        idx = starts[:, None] + np.arange(L + 1)[None, :]
        tw = t[idx]
        c = np.zeros_like(tw)
        dtw = np.diff(tw, axis=1)
        c[:, :-1] += 0.5 * dtw
        c[:, 1:] += 0.5 * dtw
        Wf = np.sum(c * Pf[idx], axis=1)
        r = E[ends] - E[starts] + Wf - work
        if not jacobians:
            return EnergyLinearization(r)
        Lay = self.layout
        dEq, dEv = np.zeros((n, nv)), np.zeros((n, nv))
        dEq[used], dEv[used] = self.energy_gradients(q[used], v[used])
        Jv = c[:, :, None] * dPf_dv[idx]
        Jv[:, 0, :] -= dEv[starts]
        Jv[:, -1, :] += dEv[ends]
        Jth = np.zeros((starts.size, Lay.n))
        dY = (Y[ends] - Y[starts]).reshape(-1, Lay.nb, 10)
        Jth[:, Lay.s_inertial] = np.einsum("wbj,bjk->wbk", dY, self.Ji).reshape(-1, 10 * Lay.nb)
        Jth[:, Lay.s_friction] = np.einsum("wi,wik->wk", c, dPf_dth[idx])
        Jth[:, Lay.s_armature] = (0.5 * (v[ends][:, self.iv] ** 2 - v[starts][:, self.iv] ** 2)
                                  * self.Ja_arm)
        return EnergyLinearization(r, -dEq[starts], dEq[ends], Jv, Jth)

    # ------------------------------------------------------------------ linear-in-p rows (baselines)
    def regressor_rows(self, q, v, t, starts, length: int) -> np.ndarray:
        """Rows A (W, n_p) with ``E(x_b) − E(x_a) + W_f = A · p`` for the Coulomb–viscous model, linear in
        the *physical* vector p (inertial | (fc, fv) per joint | armature). Used by the energy baseline."""
        Lay = self.layout
        if Lay.friction.name != "coulomb-viscous":
            raise ValueError("energy regressor rows need the coulomb-viscous friction model "
                             "(linear in fc, fv)")
        vs = Lay.friction.velocity_scale
        q = np.atleast_2d(np.asarray(q, float))
        v = np.atleast_2d(np.asarray(v, float))
        t = np.asarray(t, float)
        starts = np.asarray(starts, int)
        ends = starts + int(length)
        A = np.zeros((starts.size, Lay.n))
        A[:, Lay.s_inertial] = (self.energy_regressor(q[ends], v[ends])
                                - self.energy_regressor(q[starts], v[starts]))
        idx = starts[:, None] + np.arange(int(length) + 1)[None, :]
        tw = t[idx]
        c = np.zeros_like(tw)
        dtw = np.diff(tw, axis=1)
        c[:, :-1] += 0.5 * dtw
        c[:, 1:] += 0.5 * dtw
        vj = v[:, self.iv]
        f0 = Lay.s_friction.start
        for j in range(Lay.nj):
            A[:, f0 + 2 * j] = np.sum(c * (vj[:, j] * np.tanh(vj[:, j] / vs))[idx], axis=1)
            A[:, f0 + 2 * j + 1] = np.sum(c * (vj[:, j] ** 2)[idx], axis=1)
        A[:, Lay.s_armature] = 0.5 * (vj[ends] ** 2 - vj[starts] ** 2)
        return A
