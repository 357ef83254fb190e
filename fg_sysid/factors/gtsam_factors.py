"""GTSAM wrappers of the fg-sysid residual functions ("residual functions first, wrappers second").

Every factory returns a `gtsam.CustomFactor` (or a built-in GTSAM factor where one fits) whose error
function calls the plain residual function of `fg_sysid.factors` for a single knot and fills the
Jacobians only when GTSAM asks for them (``jacobians is not None``). GTSAM conventions:

* the error function returns the *unwhitened* residual r; the noise model whitens it, so
  ``factor.error(values) = ½‖Σ^{-½} r‖²`` and ``factor.linearize(values)`` holds Σ^{-½}∂r/∂x;
* variables are `gtsam.Values` vectors under the keys of `fg_sysid.factors.keys`: ``state(k) = X(k)``
  holds (q_k, v_k, a_k) stacked (size 3·nv; fixed bases, nq == nv) and ``THETA = P(0)`` holds θ.
  GTSAM retracts vectors by addition, which is the tangent perturbation (q ⊕ δq, v + δv, a + δa) of the
  residual Jacobians for vector-space configuration manifolds.

Noise arguments (``sigma``…) are a scalar, a per-row array, or a ready ``gtsam.noiseModel.Base``.

Performance: GTSAM's C++ optimizers calling Python factors cost O(N²) per iteration
(``shared/notes/gtsam-python-performance.md``). These factors and `estimation.gtsam_backend.build_graph`
are therefore meant for SMALL problems (short windows, a user's own graph, `gtsam.Marginals`,
fixed-lag smoothing; `fg_sysid.estimation.gtsam_backend` wraps any term of the estimation core the
same way); the batch estimator
(`fg_sysid.estimation.smoother.JointSmoother`) linearizes in batch and solves in O(N) instead.
"""

from __future__ import annotations

import gtsam
import numpy as np

from .inverse_dynamics import InverseDynamicsResidual
from .keys import THETA, state
from .kinematics import encoder_residual, integration_residual, velocity_residual
from .manifold import ConfigurationSpace

__all__ = [
    "check_factor_jacobians",
    "encoder_factor",
    "integration_factor",
    "inverse_dynamics_factor",
    "make_noise_model",
    "parameter_prior_factor",
    "velocity_factor",
]


# ---------------------------------------------------------------------------------------------- helpers
def make_noise_model(sigma, dim: int) -> gtsam.noiseModel.Base:
    """Diagonal noise model of dimension ``dim`` from a scalar / (dim,) std, or ``sigma`` itself if it
    already is a GTSAM noise model (its dimension is checked)."""
    if isinstance(sigma, gtsam.noiseModel.Base):
        if sigma.dim() != dim:
            raise ValueError(f"noise model has dimension {sigma.dim()}, the factor {dim}")
        return sigma
    s = np.broadcast_to(np.asarray(sigma, dtype=float), (dim,)).copy()
    if not np.all(np.isfinite(s)) or np.any(s <= 0):
        raise ValueError(f"noise standard deviations must be finite and > 0, got {s}")
    return gtsam.noiseModel.Diagonal.Sigmas(s)


def _unpack(x: np.ndarray, nv: int):
    """(q, v, a) rows of shape (1, nv) from a stacked knot state."""
    x = np.asarray(x, dtype=float)
    if x.shape != (3 * nv,):
        raise ValueError(f"knot state has shape {x.shape}, expected ({3 * nv},)")
    return x[None, :nv], x[None, nv:2 * nv], x[None, 2 * nv:]


def _check_space(space: ConfigurationSpace) -> None:
    if space.nq != space.nv:
        raise ValueError(
            f"the stacked knot state needs nq == nv (fixed base, 1-DoF joints); this model has "
            f"nq={space.nq}, nv={space.nv}")


# ---------------------------------------------------------------------------------------------- factors
def encoder_factor(space: ConfigurationSpace, k: int, q_meas, sigma) -> gtsam.CustomFactor:
    """Encoder factor on ``state(k)``: r = q_k ⊖ q̂_k (nv,) [rad | m]."""
    _check_space(space)
    nv = space.nv
    qm = np.asarray(q_meas, dtype=float).reshape(1, nv).copy()

    def error(this: gtsam.CustomFactor, values: gtsam.Values, jacobians):
        q, _, _ = _unpack(values.atVector(this.keys()[0]), nv)
        r, J = encoder_residual(space, q, qm, jacobians is not None)
        if jacobians is not None:
            jacobians[0] = J[0]
        return r[0]

    return gtsam.CustomFactor(make_noise_model(sigma, nv), [state(k)], error)


def velocity_factor(k: int, v_meas, sigma) -> gtsam.CustomFactor:
    """Velocity-measurement factor on ``state(k)``: r = v_k − v̂_k (nv,) [rad/s | m/s]."""
    vm = np.asarray(v_meas, dtype=float).reshape(1, -1).copy()
    nv = vm.shape[1]

    def error(this: gtsam.CustomFactor, values: gtsam.Values, jacobians):
        _, v, _ = _unpack(values.atVector(this.keys()[0]), nv)
        r, J = velocity_residual(v, vm, jacobians is not None)
        if jacobians is not None:
            jacobians[0] = J[0]
        return r[0]

    return gtsam.CustomFactor(make_noise_model(sigma, nv), [state(k)], error)


def integration_factor(space: ConfigurationSpace, k: int, h: float, sigma_q, sigma_v) -> gtsam.CustomFactor:
    """Integration (process) factor on (``state(k)``, ``state(k+1)``), step ``h`` [s]:

        r_q = (q_{k+1} ⊖ q_k) − h/2 (v_k + v_{k+1}) + h²/12 (a_{k+1} − a_k)   std ``sigma_q`` [rad]
        r_v = v_{k+1} − v_k − h/2 (a_k + a_{k+1})                           std ``sigma_v`` [rad/s]

    ``sigma_q``/``sigma_v`` are the stds of these residuals (scalar or (nv,)); a noise model of
    dimension 2·nv may be passed as ``sigma_q`` with ``sigma_v=None``.
    """
    _check_space(space)
    nv = space.nv
    hh = np.array([float(h)])
    if isinstance(sigma_q, gtsam.noiseModel.Base) and sigma_v is None:
        model = make_noise_model(sigma_q, 2 * nv)
    else:
        sq = np.broadcast_to(np.asarray(sigma_q, dtype=float), (nv,))
        sv = np.broadcast_to(np.asarray(sigma_v, dtype=float), (nv,))
        model = make_noise_model(np.concatenate([sq, sv]), 2 * nv)

    def error(this: gtsam.CustomFactor, values: gtsam.Values, jacobians):
        k0, k1 = this.keys()
        x0 = _unpack(values.atVector(k0), nv)
        x1 = _unpack(values.atVector(k1), nv)
        q, v, a = (np.concatenate([u, w]) for u, w in zip(x0, x1, strict=True))
        lin = integration_residual(space, q, v, a, hh, jacobians is not None)
        if jacobians is not None:
            jacobians[0] = lin.J0[0]
            jacobians[1] = lin.J1[0]
        return lin.r[0]

    return gtsam.CustomFactor(model, [state(k), state(k + 1)], error)


def inverse_dynamics_factor(residual: InverseDynamicsResidual, k: int, tau_meas, sigma,
                            mask=None, external=None) -> gtsam.CustomFactor:
    """Inverse-dynamics factor on (``state(k)``, ``THETA``) with measured effort ``tau_meas`` (nv,)
    in velocity layout [N·m | N]:

        r = M(q)a + h(q, v) + A a + τ_f(v) − ext − τ̂

    Rows whose effort is not measured (``mask`` False, or NaN in ``tau_meas``) are dropped, so the factor
    has dimension = number of measured rows. ``sigma``: scalar, (nv,) std in velocity layout (the
    measured rows are taken from it), or a noise model of the reduced dimension. ``external``: optional
    known generalized forces J(q)ᵀλ (nv,).
    """
    nv = residual.model.nv
    tau = np.asarray(tau_meas, dtype=float).reshape(nv)
    keep = np.isfinite(tau) if mask is None else (np.asarray(mask, bool).reshape(nv) & np.isfinite(tau))
    rows = np.flatnonzero(keep)
    if rows.size == 0:
        raise ValueError(f"knot {k}: no measured effort, the inverse-dynamics factor would be empty")
    taum = np.where(keep, tau, 0.0)[None, :]
    ext = None if external is None else np.asarray(external, dtype=float).reshape(1, nv).copy()
    if isinstance(sigma, gtsam.noiseModel.Base):
        model = make_noise_model(sigma, rows.size)
    else:
        model = make_noise_model(np.broadcast_to(np.asarray(sigma, float), (nv,))[rows], rows.size)

    def error(this: gtsam.CustomFactor, values: gtsam.Values, jacobians):
        kx, kt = this.keys()
        q, v, a = _unpack(values.atVector(kx), nv)
        theta = values.atVector(kt)
        lin = residual.evaluate(q, v, a, taum, theta, jacobians=jacobians is not None, external=ext)
        if jacobians is not None:
            jacobians[0] = np.concatenate([lin.Jq[0], lin.Jv[0], lin.Ja[0]], axis=1)[rows]
            jacobians[1] = lin.Jtheta[0][rows]
        return lin.r[0][rows]

    return gtsam.CustomFactor(model, [state(k), THETA], error)


def parameter_prior_factor(theta_bar, std) -> gtsam.PriorFactorVector:
    """Gaussian prior on θ: a built-in `gtsam.PriorFactorVector` on ``THETA`` with a diagonal noise model
    (``std`` scalar / (nθ,) or a noise model); error ½‖(θ − θ̄)/σ‖², as the smoother's prior."""
    tb = np.asarray(theta_bar, dtype=float).copy()
    return gtsam.PriorFactorVector(THETA, tb, make_noise_model(std, tb.size))


# ---------------------------------------------------------------------------------------------- graph
def check_factor_jacobians(factor, values: gtsam.Values, delta: float = 1e-6, tol: float = 1e-5,
                           rtol: float = 1e-5) -> None:
    """Assert that ``factor.linearize(values)``'s whitened Jacobian blocks equal central differences of
    ``factor.whitenedError`` under vector perturbations of ``values`` (GTSAM's
    EXPECT_CORRECT_FACTOR_JACOBIANS for vector-valued variables). Also checks that the linearized
    right-hand side is −whitenedError. Raises AssertionError naming the key and column that disagree.
    """
    keys = list(factor.keys())
    lin = factor.linearize(values)
    A, b = lin.jacobian()
    e0 = np.asarray(factor.whitenedError(values), float)
    if not np.allclose(-b, e0, atol=tol, rtol=rtol):
        raise AssertionError(f"linearized rhs {-b} differs from the whitened error {e0}")
    col = 0
    for key in keys:
        x = np.asarray(values.atVector(key), float)
        block = A[:, col:col + x.size]
        col += x.size
        fd = np.empty_like(block)
        for j in range(x.size):
            d = np.zeros_like(x)
            d[j] = delta
            vp, vm = gtsam.Values(values), gtsam.Values(values)
            vp.update(key, x + d)
            vm.update(key, x - d)
            ep, em = np.asarray(factor.whitenedError(vp)), np.asarray(factor.whitenedError(vm))
            fd[:, j] = (ep - em) / (2 * delta)
        bad = ~np.isclose(block, fd, atol=tol, rtol=rtol)
        if np.any(bad):
            r, c = np.argwhere(bad)[0]
            raise AssertionError(
                f"Jacobian block of key {gtsam.DefaultKeyFormatter(key)} disagrees with central differences "
                f"at row {r}, column {c}: analytic {block[r, c]:.9g}, numerical {fd[r, c]:.9g} "
                f"(max |diff| {np.max(np.abs(block - fd)):.3g})")
    if col != A.shape[1]:
        raise AssertionError(f"linearized factor has {A.shape[1]} columns, the keys {col}")
