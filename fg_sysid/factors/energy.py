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
* measured input work ``Ŵ_in = ∫ v̂ᵀ τ̂ dt`` (eq. 63's ŷ_E) over the *log samples* between ``t_a`` and
  ``t_b`` (`input_work`); it is data, not a function of the states. By default (``quadrature="hold"``)
  each logged effort is the command held over the following sample interval, ``Σ τ̂_iᵀ ½Δt (v̂_i + v̂_{i+1})``
  (exact for the `fg_sysid.datasets.simulate` logs and digital controllers); ``"trapezoid"`` is the paper's
  rule for efforts that vary smoothly between samples.

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
products of independent Gaussians have ``var(xy) = μ_x² σ_y² + μ_y² σ_x² + σ_x² σ_y²`` (measured values in
place of the true ones, `input_work_std`):

    hold:      σ_W² = Σ_i Σ_j [(½Δt_i (v_ij + v_(i+1)j))² σ_τ² + ½ Δt_i² σ_v² σ_τ²] + Σ_samples Σ_j g_ij² σ_v²
               g_i = ½Δt_(i−1) τ_(i−1) + ½Δt_i τ_i  (velocity noise of sample i, shared by two intervals)
    trapezoid: σ_W² = Σ_i c_i² Σ_j (v_ij² σ_τ² + τ_ij² σ_v² + σ_v² σ_τ²)

Consecutive windows share their boundary sample (row correlation ≈ 0.5 for one-interval windows on an arm,
where |τ| σ_v dominates); by default (``long_run=True``) each window is charged half of a shared sample's
variance with its full coefficient, so that the independent rows of the factor graph carry the information
of the window *sums* (the long-run variance), not twice as much. State noise does not enter: in the factor
graph the states are variables whose uncertainty the other factors carry.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from ..layout import ParameterLayout
from .inverse_dynamics import LayoutModel
from .manifold import ConfigurationSpace

__all__ = [
    "DEFAULT_WORK_FORM",
    "DEFAULT_WORK_QUADRATURE",
    "WORK_FORMS",
    "WORK_QUADRATURES",
    "EnergyLinearization",
    "EnergyResidual",
    "input_power",
    "input_work",
    "input_work_std",
    "interval_windows",
    "knot_interval_efforts",
    "stance_constant_windows",
    "state_work",
    "state_work_std",
    "trapezoid_weights",
]


# ---------------------------------------------------------------------------------------------- measured work
#: Quadratures of the measured input work (`input_work`); the default, "hold", takes a logged effort as the
#: command held over the following sample interval (the project's log convention, see `input_work`).
WORK_QUADRATURES = ("hold", "trapezoid", "zoh")
DEFAULT_WORK_QUADRATURE = "hold"


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
               joint_names=None, quadrature: str = DEFAULT_WORK_QUADRATURE,
               q_meas: np.ndarray | None = None) -> np.ndarray:
    """Measured input work ``Ŵ = ∫_{t_a}^{t_b} v̂ᵀ τ̂ dt`` [J] per window.

    ``t`` (N,) sample times [s]; ``v_meas``, ``tau_meas`` (N, n_joints) joint velocities [rad/s | m/s] and
    efforts [N·m | N]; ``t_a``, ``t_b`` (W,) window bounds, which must be sample instants (knots sit on
    samples). Raises ValueError when an effort is missing (NaN): its work would be unknown.

    ``quadrature`` (the effort's time convention between samples):

    * ``"hold"`` (default, `DEFAULT_WORK_QUADRATURE`): the logged effort τ̂_i is the command applied over
      ``[t_i, t_{i+1})`` (zero-order hold: a digital controller, every `fg_sysid.datasets.simulate` log;
      the convention of `factors.momentum.window_balance`'s ``tau_rule="euler"`` and of energy-ls), so
      ``Ŵ = Σ_i τ̂_iᵀ ∫ v dt = Σ_i τ̂_iᵀ ½ Δt_i (v̂_i + v̂_{i+1})`` — exact for held efforts up to the
      trapezoid error of ∫ v dt, O(Δt³ v̈);
    * ``"trapezoid"``: eq. 63's ŷ_E, ``Σ ½ Δt (P̂_i + P̂_{i+1})``, ``P̂ = v̂ᵀτ̂``, for an effort that varies
      smoothly between samples (a sampled torque sensor). On held efforts it is biased by
      ``−½ Σ Δt (τ_{i+1} − τ_i)ᵀ v_{i+1}`` (0.3 % of the work on a 500 Hz z1 log, one-signed: it adds up
      over the log to ~4 σ of the total work's noise, benchmarks.md);
    * ``"zoh"``: ``Σ τ̂_iᵀ (q̂_{i+1} − q̂_i)`` for held efforts from the joint positions ``q_meas`` (N,
      n_joints) of 1-DoF joints: exact without noise, but over one sample interval the position noise
      swamps Δq (use it over long windows, as energy-ls does).
    """
    tau_meas = np.asarray(tau_meas, float)
    _check_efforts(tau_meas, joint_names or [f"#{j}" for j in range(tau_meas.shape[1])])
    t = np.asarray(t, float)
    if quadrature == "trapezoid":
        P = input_power(v_meas, tau_meas)
        inc = 0.5 * np.diff(t) * (P[1:] + P[:-1])
    elif quadrature == "hold":
        v = np.asarray(v_meas, float)
        inc = np.einsum("ij,ij->i", tau_meas[:-1], 0.5 * np.diff(t)[:, None] * (v[:-1] + v[1:]))
    elif quadrature == "zoh":
        if q_meas is None:
            raise ValueError("zoh quadrature of the input work needs the joint positions q_meas")
        inc = np.einsum("ij,ij->i", tau_meas[:-1], np.diff(np.asarray(q_meas, float), axis=0))
    else:
        raise ValueError(f"unknown work quadrature {quadrature!r}; choices: {', '.join(WORK_QUADRATURES)}")
    cum = np.concatenate([[0.0], np.cumsum(inc)])
    ia, ib = _sample_ranges(t, t_a, t_b)
    return cum[ib] - cum[ia]


def input_work_std(t: np.ndarray, v_meas: np.ndarray, tau_meas: np.ndarray, t_a, t_b,
                   sigma_v, sigma_tau, quadrature: str = DEFAULT_WORK_QUADRATURE,
                   q_meas: np.ndarray | None = None, sigma_q=0.0, long_run: bool = True) -> np.ndarray:
    """Std [J] of `input_work` per window from the sensor noise (module docstring formulas).

    ``sigma_v`` [rad/s], ``sigma_tau`` [N·m], ``sigma_q`` [rad]: scalars or per joint (n_joints,); the
    other arguments as `input_work`. Independent zero-mean noise per joint and sample; the products'
    variances use ``var(xy) = μ_x²σ_y² + μ_y²σ_x² + σ_x²σ_y²`` with the measured values for the means.

    Consecutive windows share their boundary sample, so their errors are correlated (correlation ≈ 0.5 for
    one-interval windows, whose noise is mostly the boundary samples' velocity noise). ``long_run=False``
    gives each window's own std. ``long_run=True`` (default) gives each window its share of the variance of
    a sum of consecutive windows: a boundary sample's noise enters that sum with its full coefficient
    (both neighbours' weights added), and each of the two windows is charged half of it. Whitened this way,
    independent rows carry exactly the information that the sum of the windows has — the long-run variance
    (spectral density at frequency 0) of the correlated row sequence — instead of twice as much, while each
    row on its own is whitened to a std of ≈ 0.7 instead of 1. Samples at the ends of the log belong to one
    window only and are charged in full. (For ``zoh`` the shared position noise *cancels* in a sum — it
    telescopes, correlation ≈ −0.5 — and the window ends dominate: ``long_run`` does not apply, each
    window's own std is returned, conservative for sums.)
    """
    t = np.asarray(t, float)
    v = np.asarray(v_meas, float)
    tau = np.asarray(tau_meas, float)
    nj = tau.shape[1]
    sv = np.broadcast_to(np.asarray(sigma_v, float), (nj,))
    st = np.broadcast_to(np.asarray(sigma_tau, float), (nj,))
    sq = np.broadcast_to(np.asarray(sigma_q, float), (nj,))
    ia, ib = _sample_ranges(t, t_a, t_b)
    h = np.diff(t)
    n = t.size
    if quadrature == "zoh":
        if q_meas is None:
            raise ValueError("zoh quadrature of the input work needs the joint positions q_meas")
        dq = np.diff(np.asarray(q_meas, float), axis=0)
        # per interval k: effort noise × Δq_k and the product of the two noises
        per_interval = (dq ** 2) @ (st ** 2) + 2.0 * float(np.sum(sq ** 2 * st ** 2))
        # position noise of sample i enters Σ τ_kᵀΔq_k with coefficient τ_(i−1) − τ_i (summation by parts)
        g_full = np.zeros_like(tau)
        g_full[1:] += tau[:-1]
        g_full[:-1] -= tau[:-1]

        def g_start(i):  # window starting at sample i: −τ_i
            return -tau[i]

        def g_end(i):  # window ending at sample i: +τ_(i−1)
            return tau[i - 1]
        sd = sq
    elif quadrature == "hold":
        per_interval = ((0.5 * h[:, None] * (v[:-1] + v[1:])) ** 2) @ (st ** 2) \
            + 0.5 * h ** 2 * float(np.sum(sv ** 2 * st ** 2))
        # velocity noise of sample i enters with coefficient ½ h_(i−1) τ_(i−1) + ½ h_i τ_i
        half = 0.5 * h[:, None] * tau[:-1]
        g_full = np.zeros_like(tau)
        g_full[:-1] += half
        g_full[1:] += half

        def g_start(i):
            return half[i]

        def g_end(i):
            return half[i - 1]
        sd = sv
    elif quadrature == "trapezoid":
        per_sample = (v ** 2) @ (st ** 2) + (tau ** 2) @ (sv ** 2) + float(np.sum(sv ** 2 * st ** 2))
        c_full = np.zeros(n)
        c_full[:-1] += 0.5 * h
        c_full[1:] += 0.5 * h
        per_interval = np.zeros(n - 1)
        g_full = np.sqrt(per_sample)[:, None] * c_full[:, None]  # (N, 1): "coefficient × std" per sample

        def g_start(i):
            return np.atleast_1d(0.5 * h[i] * np.sqrt(per_sample[i]))

        def g_end(i):
            return np.atleast_1d(0.5 * h[i - 1] * np.sqrt(per_sample[i]))
        sd = np.ones(1)
    else:
        raise ValueError(f"unknown work quadrature {quadrature!r}; choices: {', '.join(WORK_QUADRATURES)}")
    interval_cum = np.concatenate([[0.0], np.cumsum(per_interval)])
    sample_var = (g_full ** 2) @ (sd ** 2)  # (N,) full-sum coefficient² × noise variance
    sample_cum = np.concatenate([[0.0], np.cumsum(sample_var)])
    var = interval_cum[ib] - interval_cum[ia]
    var += np.maximum(sample_cum[ib] - sample_cum[ia + 1], 0.0)  # interior samples a < i < b
    for w, (a, b) in enumerate(zip(ia, ib, strict=True)):
        if long_run and quadrature != "zoh":
            var[w] += (1.0 if a == 0 else 0.5) * sample_var[a] + (1.0 if b == n - 1 else 0.5) * sample_var[b]
        else:
            var[w] += float(g_start(a) ** 2 @ sd ** 2) + float(g_end(b) ** 2 @ sd ** 2)
    return np.sqrt(var)


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
        if L.friction.uses_acceleration:
            raise ValueError("energy observations need a velocity-only friction law, not "
                             f"{L.friction.name!r} (its friction depends on the acceleration)")
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


# ---------------------------------------------------------------------------------------------- state work
#: Forms of the input work in the smoother's energy rows (`JointSmoother._energy_term`, issue 12 session 8):
#: ``"state-q"`` Ŵ(x) = τ̂_kᵀ (q_{k+1} ⊖ q_k), ``"state-v"`` Ŵ(x) = τ̂_kᵀ ½h (v_k + v_{k+1}) — functions of the
#: states, noise from the effort only (`state_work`) — and ``"measured"``, the data Ŵ of `input_work` from
#: the measured velocities v̂ (before).
WORK_FORMS = ("state-q", "state-v", "measured")
DEFAULT_WORK_FORM = "state-q"


def knot_interval_efforts(t: np.ndarray, tau_meas: np.ndarray, t_knots: np.ndarray,
                          joint_names=None) -> np.ndarray:
    """The logged effort held over each knot interval, (K−1, n_joints) [N·m | N].

    The state forms of the work need one held effort per knot interval: every interval ``[t_k, t_{k+1}]``
    must be exactly one log sample interval (knots on consecutive samples, ``knot_stride=1``); raises
    ValueError otherwise (and for a missing effort, as `input_work`)."""
    tau_meas = np.asarray(tau_meas, float)
    _check_efforts(tau_meas, joint_names or [f"#{j}" for j in range(tau_meas.shape[1])])
    t_knots = np.asarray(t_knots, float)
    ia, ib = _sample_ranges(t, t_knots[:-1], t_knots[1:])
    if np.any(ib - ia != 1):
        raise ValueError("the state form of the input work needs a knot at every log sample (knot_stride=1); "
                         f"{int(np.sum(ib - ia != 1))} knot intervals span several samples")
    return tau_meas[ia]


def state_work(space: ConfigurationSpace, q, v, t_knots, tau_k, iv, form: str = DEFAULT_WORK_FORM,
               jacobians: bool = True):
    """Input work over each knot interval as a function of the states, with its Jacobians.

    ``q`` (K, nq), ``v`` (K, nv) knot states; ``t_knots`` (K,) [s]; ``tau_k`` (K−1, n_joints) the effort held
    over each interval (`knot_interval_efforts`); ``iv`` the velocity indices of the actuated joints.
    With the effort τ_k held over ``[t_k, t_{k+1})`` the work is ``τ_kᵀ ∫ v dt = τ_kᵀ (q_{k+1} ⊖ q_k)``
    (``form="state-q"``, 1-DoF joints: Δq is ∫ v dt); ``"state-v"`` takes ``∫ v dt ≈ ½h (v_k + v_{k+1})``
    (trapezoid, O(h³ v̈)). Unlike `input_work`, no measured velocity enters: the only noise is the
    effort's, which no other row of the interval's energy balance shares (`state_work_std`).

    Returns ``(W, Jq0, Jq1, Jv0, Jv1)``: W (K−1,) [J] and its derivatives (K−1, nv) w.r.t. the tangent
    perturbations of q_k, q_{k+1} and w.r.t. v_k, v_{k+1} (None without Jacobians).
    """
    q, v = np.atleast_2d(np.asarray(q, float)), np.atleast_2d(np.asarray(v, float))
    n, nv = v.shape
    tf = np.zeros((n - 1, nv))
    tf[:, iv] = np.asarray(tau_k, float)
    h = np.diff(np.asarray(t_knots, float))[:, None]
    if form == "state-q":
        W = np.einsum("kj,kj->k", tf, space.difference(q[:-1], q[1:]))
        if not jacobians:
            return W, None, None, None, None
        D0, D1 = space.difference_jacobians(q[:-1], q[1:])
        zero = np.zeros_like(tf)
        return W, np.einsum("kj,kji->ki", tf, D0), np.einsum("kj,kji->ki", tf, D1), zero, zero.copy()
    if form == "state-v":
        W = np.einsum("kj,kj->k", tf, 0.5 * h * (v[:-1] + v[1:]))
        if not jacobians:
            return W, None, None, None, None
        zero = np.zeros_like(tf)
        return W, zero, zero.copy(), 0.5 * h * tf, 0.5 * h * tf
    raise ValueError(f"unknown state work form {form!r}; choices: state-q, state-v")


def state_work_std(t_knots, v_ref, sigma_tau, iv=None) -> np.ndarray:
    """Std [J] of `state_work` per knot interval from the effort noise alone.

    ``W = τ̂_kᵀ d_k`` with d_k = ∫ v dt over the interval: independent zero-mean effort noise of std σ_τ,j
    gives ``σ_W² = Σ_j d_kj² σ_τ,j²``, d_k evaluated as ``½h (v_k + v_{k+1})`` on a reference trajectory
    ``v_ref`` (K, nv) (the logged velocities or the initial SG states: the weight must not depend on the
    variables). Each row's noise is its own effort sample's: no sharing between rows (unlike the measured
    form's boundary velocity samples), so no long-run correction is needed. ``iv`` picks the actuated
    velocity columns of ``v_ref`` (default: all)."""
    v_ref = np.atleast_2d(np.asarray(v_ref, float))
    if iv is not None:
        v_ref = v_ref[:, iv]
    h = np.diff(np.asarray(t_knots, float))[:, None]
    d = 0.5 * h * (v_ref[:-1] + v_ref[1:])
    st = np.broadcast_to(np.asarray(sigma_tau, float), (d.shape[1],))
    return np.sqrt((d ** 2) @ (st ** 2))
