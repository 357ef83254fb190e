"""Unconstrained parameterizations of inertial, friction and actuator parameters.

Inertia
-------
Physical parameters of one body follow Pinocchio's dynamic-parameter convention (paper 004 eq. 42)::

    pi = (m, mc_x, mc_y, mc_z, I_xx, I_xy, I_yy, I_xz, I_yz, I_zz)

with mass ``m`` [kg], first moment ``h = m c`` [kg·m] (``c`` = centre of mass in the body frame) and
the rotational inertia ``I`` [kg·m²] about the BODY FRAME ORIGIN, expressed in the body frame
(``pin.Inertia.toDynamicParameters``). An `InertiaParameterization` maps an unconstrained
``theta`` in R^10 to ``pi`` and back, with an analytic Jacobian ``d pi / d theta``:

* `ExponentialEigenvalue` (``"exponential-eigenvalue"``, alias ``"ee"``): paper 004 eqs. 45-54.
  Every theta gives a fully physically consistent body (eq. 44).
* `LogCholesky` (``"log-cholesky"``): Rucker & Wensing's log-Cholesky factor of the 4x4 pseudo-inertia,
  evaluated with Pinocchio's ``pin.LogCholeskyParameters``. Also fully consistent for every theta.
* `Raw` (``"raw"``): ``pi = theta``; no consistency guarantee.

Friction and actuation
----------------------
`CoulombViscous` and `Stribeck6` (paper 004 eqs. 56-60, with a sign correction, see `Stribeck6`) map
per-joint unconstrained parameters to positive physical coefficients and evaluate the friction torque
``tau_f(v)`` [N·m] with analytic derivatives w.r.t. the joint velocity ``v`` [rad/s] and theta.
`PositiveScalar` is the ``exp`` map used for the armature (reflected rotor inertia, kg·m²).

`check_physical_consistency` / `warn_if_inconsistent` test eq. 44 on a stack of bodies.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pinocchio as pin

__all__ = [
    "MASS_FLOOR", "SECOND_MOMENT_FLOOR_ABS", "SECOND_MOMENT_FLOOR_REL",
    "InertiaParameterization", "ExponentialEigenvalue", "LogCholesky", "Raw", "inertia_parameterization",
    "FrictionModel", "CoulombViscous", "Stribeck6", "friction_model", "PositiveScalar",
    "check_physical_consistency", "warn_if_inconsistent",
]

#: Smallest mass [kg] `to_theta` accepts; zero or negative masses are clamped up to it.
MASS_FLOOR = 1e-9
#: Smallest principal second moment of mass about the COM (``L``, kg·m²) `to_theta` accepts, absolute ...
SECOND_MOMENT_FLOOR_ABS = 1e-12
#: ... and relative to the body's largest principal second moment. The floor is the larger of the two.
SECOND_MOMENT_FLOOR_REL = 1e-9

#: (row, col) of the 3x3 rotational inertia for pi[4:10] = (I_xx, I_xy, I_yy, I_xz, I_yz, I_zz).
_VECH_R = np.array([0, 0, 1, 0, 1, 2])
_VECH_C = np.array([0, 1, 1, 2, 2, 2])
#: eq. 45: principal moments D = P L from principal second moments L.
_P = np.array([[0.0, 1.0, 1.0], [1.0, 0.0, 1.0], [1.0, 1.0, 0.0]])


# ====================================================================== small helpers
def _skew(v: np.ndarray) -> np.ndarray:
    """[v]x for v of shape (..., 3) -> (..., 3, 3)."""
    v = np.asarray(v, dtype=float)
    S = np.zeros(v.shape[:-1] + (3, 3))
    S[..., 0, 1], S[..., 0, 2] = -v[..., 2], v[..., 1]
    S[..., 1, 0], S[..., 1, 2] = v[..., 2], -v[..., 0]
    S[..., 2, 0], S[..., 2, 1] = -v[..., 1], v[..., 0]
    return S


def _so3_coeffs(w: np.ndarray):
    """A = sin t / t, B = (1 - cos t)/t², C = (t - sin t)/t³ for t = |w| (Taylor series near 0)."""
    t2 = np.einsum("...i,...i->...", w, w)
    t = np.sqrt(t2)
    small = t < 1e-2
    ts = np.where(small, 1.0, t)  # avoid 0-division in the branch not taken
    A = np.where(small, 1 - t2 / 6 + t2**2 / 120, np.sin(ts) / ts)
    B = np.where(small, 0.5 - t2 / 24 + t2**2 / 720, (1 - np.cos(ts)) / ts**2)
    C = np.where(small, 1.0 / 6 - t2 / 120 + t2**2 / 5040, (ts - np.sin(ts)) / ts**3)
    return A, B, C


def so3_exp(w: np.ndarray) -> np.ndarray:
    """Exp: R^3 -> SO(3) (Rodrigues), vectorized over leading axes: (..., 3) -> (..., 3, 3)."""
    w = np.asarray(w, dtype=float)
    A, B, _ = _so3_coeffs(w)
    K = _skew(w)
    return np.eye(3) + A[..., None, None] * K + B[..., None, None] * (K @ K)


def so3_right_jacobian(w: np.ndarray) -> np.ndarray:
    """Right Jacobian J_r(w): Exp(w + dw) = Exp(w) Exp(J_r(w) dw) + O(dw²). (..., 3) -> (..., 3, 3)."""
    w = np.asarray(w, dtype=float)
    _, B, C = _so3_coeffs(w)
    K = _skew(w)
    return np.eye(3) - B[..., None, None] * K + C[..., None, None] * (K @ K)


def so3_left_jacobian(w: np.ndarray) -> np.ndarray:
    """Left Jacobian J_l(w) = J_r(-w): Exp(w + dw) = Exp(J_l(w) dw) Exp(w) + O(dw²)."""
    return so3_right_jacobian(-np.asarray(w, dtype=float))


def _vech(M: np.ndarray) -> np.ndarray:
    """(..., 3, 3) symmetric -> (..., 6) in Pinocchio's order (xx, xy, yy, xz, yz, zz)."""
    return M[..., _VECH_R, _VECH_C]


def _unvech(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, dtype=float)
    M = np.zeros(v.shape[:-1] + (3, 3))
    M[..., _VECH_R, _VECH_C] = v
    M[..., _VECH_C, _VECH_R] = v
    return M


def _parallel_axis(h: np.ndarray, m: np.ndarray) -> np.ndarray:
    """(1/m)[h]x[h]x^T = (|h|² 1 - h h^T)/m, the inertia of a point mass m at c = h/m about the origin."""
    hh = np.einsum("...i,...i->...", h, h)
    return (hh[..., None, None] * np.eye(3) - h[..., :, None] * h[..., None, :]) / m[..., None, None]


def _as_batch(x, n: int, what: str) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    if x.ndim == 1:
        x = x[None, :]
    if x.ndim != 2 or x.shape[1] != n:
        raise ValueError(f"{what}: expected shape ({n},) or (nb, {n}), got {np.shape(x)}")
    return x


def _as_vec(x, n: int, what: str) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    if x.shape != (n,):
        raise ValueError(f"{what}: expected shape ({n},), got {x.shape}")
    return x


def _com_decomposition(pi: np.ndarray):
    """Split one body's pi into mass, first moment and principal second moments about the COM.

    Returns ``(m, h, L, R, clamped)`` with ``Sigma_c = R diag(L) R^T`` the second moment of mass about the
    COM (``Sigma_c = tr(I_c)/2 1 - I_c``), ``R`` a proper rotation (det +1), and ``L`` its eigenvalues
    (principal second moments, kg·m², eq. 45: ``D = P L``). ``m`` is clamped to `MASS_FLOOR` and ``L``
    to ``max(SECOND_MOMENT_FLOOR_ABS, SECOND_MOMENT_FLOOR_REL * max(L))``; ``clamped`` says whether either
    happened (the body was on or beyond the boundary of physical consistency). ``h`` is kept as given.
    """
    pi = np.asarray(pi, dtype=float)
    if not np.all(np.isfinite(pi)):
        raise ValueError(f"inertial parameters are not finite: {pi}")
    m, h = float(pi[0]), pi[1:4].copy()
    clamped = m < MASS_FLOOR
    m = max(m, MASS_FLOOR)
    Ic = _unvech(pi[4:10]) - _parallel_axis(h, np.asarray(m))
    Sigma_c = 0.5 * np.trace(Ic) * np.eye(3) - Ic
    L, R = np.linalg.eigh(0.5 * (Sigma_c + Sigma_c.T))
    floor = max(SECOND_MOMENT_FLOOR_ABS, SECOND_MOMENT_FLOOR_REL * max(float(L.max()), 0.0))
    if np.any(L < floor):
        clamped = True
        L = np.maximum(L, floor)
    if np.linalg.det(R) < 0:
        R[:, 2] = -R[:, 2]
    return m, h, L, R, clamped


def _recompose(m: float, h: np.ndarray, L: np.ndarray, R: np.ndarray) -> np.ndarray:
    Ic = (R * (_P @ L)) @ R.T
    return np.concatenate([[m], h, _vech(Ic + _parallel_axis(h, np.asarray(m)))])


# ====================================================================== inertia
@dataclass(frozen=True)
class InertiaParameterization:
    """Map between unconstrained ``theta`` (10,) and one body's physical ``pi`` (10,), Pinocchio order.

    Stateless and hashable (instances of the same class compare equal). Subclasses implement
    `to_theta`, `to_physical_batch` and `jacobian_batch`; the single-body methods wrap them.
    """

    name: ClassVar[str] = "base"
    #: True when every theta maps to a physically consistent body (eq. 44).
    always_consistent: ClassVar[bool] = False

    def to_theta(self, pi) -> np.ndarray:
        """Physical (10,) -> unconstrained (10,)."""
        raise NotImplementedError

    def to_theta_batch(self, pi) -> np.ndarray:
        """(nb, 10) physical -> (nb, 10) unconstrained (a loop over `to_theta`)."""
        return np.array([self.to_theta(p) for p in _as_batch(pi, 10, "pi")]).reshape(-1, 10)

    def to_physical(self, theta) -> np.ndarray:
        """Unconstrained (10,) -> physical (10,)."""
        return self.to_physical_batch(_as_vec(theta, 10, "theta"))[0]

    def jacobian(self, theta) -> np.ndarray:
        """(10, 10) analytic ``d pi / d theta`` (row = physical parameter, column = theta entry)."""
        return self.jacobian_batch(_as_vec(theta, 10, "theta"))[0]

    def to_physical_batch(self, theta) -> np.ndarray:
        """(nb, 10) -> (nb, 10)."""
        raise NotImplementedError

    def jacobian_batch(self, theta) -> np.ndarray:
        """(nb, 10) -> (nb, 10, 10), one ``d pi / d theta`` per body."""
        raise NotImplementedError


@dataclass(frozen=True)
class ExponentialEigenvalue(InertiaParameterization):
    """Exponential-eigenvalue (EE) parameterization, paper 004 eqs. 45-54.

    ``theta = (sigma_m, h_x, h_y, h_z, w_x, w_y, w_z, sigma_x, sigma_y, sigma_z)`` (eq. 47) with

    * ``m = exp(sigma_m)`` [kg] (eq. 46); ``h = (h_x, h_y, h_z) = m c`` [kg·m], the first moment in the
      body frame, unconstrained;
    * ``R = Exp(w)`` (SO(3) exponential): body frame <- COM principal axes (columns = principal axes);
    * ``L = exp(sigma_xyz)`` [kg·m²], the principal second moments of mass about the COM, and
      ``D = diag(P L)`` the principal moments of inertia, ``P = [[0,1,1],[1,0,1],[1,1,0]]`` (eq. 45), so
      the triangle inequalities of eq. 44 hold by construction (``D_x = L_y + L_z`` etc.);
    * ``I_c = R D R^T`` and the inertia about the body origin ``I = I_c + (1/m)[h]x[h]x^T``.

    Jacobian (eqs. 48-54): ``dm/dsigma_m = m``, ``dh/dh = 1``, ``dI/dsigma_m = -(1/m)[h]x[h]x^T`` (eq. 49),
    ``dI/dh_k = (1/m)(2 h_k 1 - e_k h^T - h e_k^T)``, ``dI/dw_i = R[u_i]x D R^T + R D [u_i]x^T R^T``
    (eq. 51) and ``dI/dsigma_a = R (dD/dsigma_a) R^T`` (eqs. 53-54). NOTE eq. 50 prints
    ``u_i = J_l(w) e_i``; for ``R = Exp(w)`` the derivative is ``dR/dw_i = R [J_r(w) e_i]x`` (equivalently
    ``[J_l(w) e_i]x R``). We use ``u_i = J_r(w) e_i``; the tests check it against finite differences
    (J_l agrees only when ``w`` is parallel to ``e_i`` or ``w = 0``).

    `to_theta` accepts any physically consistent body: eigen-decomposition of the COM second moment
    ``Sigma_c = tr(I_c)/2 1 - I_c`` (eigenvalues ``L``, same eigenvectors as ``I_c``), ``R`` made proper
    (det +1), ``w = Log(R)`` with ``|w| <= pi``. Bodies on the boundary (point masses, rods, laminae with
    ``L_i = 0``) or beyond it get ``m >= MASS_FLOOR`` and ``L_i >= max(SECOND_MOMENT_FLOOR_ABS,
    SECOND_MOMENT_FLOOR_REL * max L)``: ``to_physical(to_theta(pi))`` then differs from ``pi`` by that floor.
    theta is not unique (eigenvector order/sign, ``w`` modulo 2 pi); only the round trip
    ``pi -> theta -> pi`` is an identity.
    """

    name: ClassVar[str] = "exponential-eigenvalue"
    always_consistent: ClassVar[bool] = True

    def to_theta(self, pi) -> np.ndarray:
        m, h, L, R, _ = _com_decomposition(_as_vec(pi, 10, "pi"))
        w = np.asarray(pin.log3(R), dtype=float).reshape(3)
        return np.concatenate([[np.log(m)], h, w, np.log(L)])

    @staticmethod
    def _parts(theta):
        theta = _as_batch(theta, 10, "theta")
        m = np.exp(theta[:, 0])
        h = theta[:, 1:4]
        w = theta[:, 4:7]
        L = np.exp(theta[:, 7:10])
        D = L @ _P.T  # (nb, 3), P symmetric
        R = so3_exp(w)
        return theta, m, h, w, L, D, R

    def to_physical_batch(self, theta) -> np.ndarray:
        theta, m, h, _, _, D, R = self._parts(theta)
        Ic = np.einsum("nij,nj,nkj->nik", R, D, R)
        I = Ic + _parallel_axis(h, m)
        return np.concatenate([m[:, None], h, _vech(I)], axis=1)

    def jacobian_batch(self, theta) -> np.ndarray:
        theta, m, h, w, L, D, R = self._parts(theta)
        nb = theta.shape[0]
        J = np.zeros((nb, 10, 10))
        J[:, 0, 0] = m  # eq. 48
        J[:, 1:4, 1:4] = np.eye(3)
        J[:, 4:, 0] = -_vech(_parallel_axis(h, m))  # eq. 49
        eye = np.eye(3)
        for k in range(3):  # dI/dh_k
            dI = (2 * h[:, k, None, None] * eye - eye[k][None, :, None] * h[:, None, :]
                  - h[:, :, None] * eye[k][None, None, :]) / m[:, None, None]
            J[:, 4:, 1 + k] = _vech(dI)
        Jr = so3_right_jacobian(w)
        RD = R * D[:, None, :]  # R diag(D)
        for i in range(3):  # eqs. 50-51 with u_i = J_r(w) e_i
            M = R @ _skew(Jr[:, :, i]) @ np.swapaxes(RD, 1, 2)  # R [u]x D R^T
            J[:, 4:, 4 + i] = _vech(M + np.swapaxes(M, 1, 2))
        for a in range(3):  # eqs. 52-54: dD/dsigma_a = L_a P[:, a]
            dD = L[:, a, None] * _P[:, a][None, :]
            J[:, 4:, 7 + a] = _vech(np.einsum("nij,nj,nkj->nik", R, dD, R))
        return J


@dataclass(frozen=True)
class LogCholesky(InertiaParameterization):
    """Log-Cholesky parameterization of the pseudo-inertia (Rucker & Wensing 2022), via Pinocchio.

    Pseudo-inertia ``J = [[Sigma, h], [h^T, m]]`` (4x4, ``Sigma = tr(I)/2 1 - I`` the second moment of mass
    about the body origin; ``pin.PseudoInertia(...).toMatrix()``) is factored ``J = U U^T`` with ``U``
    UPPER triangular::

        U = exp(alpha) [[exp(d1), s12,     s13,     t1],
                        [0,       exp(d2), s23,     t2],
                        [0,       0,       exp(d3), t3],
                        [0,       0,       0,       1 ]]

    theta order is Pinocchio's ``LogCholeskyParameters``: ``(alpha, d1, d2, d3, s12, s23, s13, t1, t2, t3)``.
    Hence ``m = exp(2 alpha)``, ``h = m t``. Every theta gives ``J`` positive definite, i.e. a fully
    physically consistent body. `to_physical` / `jacobian` call ``pin.LogCholeskyParameters(theta)``
    ``.toDynamicParameters()`` / ``.calculateJacobian()`` (checked against finite differences in the tests).
    `to_theta` builds ``J`` with ``pin.PseudoInertia.FromDynamicParameters`` and takes the upper Cholesky
    factor by flipping the lower one; bodies on/over the consistency boundary are first clamped exactly
    as in `ExponentialEigenvalue` (`MASS_FLOOR`, ``SECOND_MOMENT_FLOOR_*``).
    """

    name: ClassVar[str] = "log-cholesky"
    always_consistent: ClassVar[bool] = True

    def to_theta(self, pi) -> np.ndarray:
        pi = _as_vec(pi, 10, "pi")
        m, h, L, R, clamped = _com_decomposition(pi)
        if clamped:
            pi = _recompose(m, h, L, R)
        Jm = np.asarray(pin.PseudoInertia.FromDynamicParameters(pi).toMatrix(), dtype=float)
        E = np.eye(4)[::-1]
        U = E @ np.linalg.cholesky(E @ Jm @ E) @ E  # upper triangular, J = U U^T
        ea = U[3, 3]
        V = U / ea
        return np.array([np.log(ea), np.log(V[0, 0]), np.log(V[1, 1]), np.log(V[2, 2]),
                         V[0, 1], V[1, 2], V[0, 2], V[0, 3], V[1, 3], V[2, 3]])

    def to_physical_batch(self, theta) -> np.ndarray:
        theta = _as_batch(theta, 10, "theta")
        return np.array([pin.LogCholeskyParameters(t).toDynamicParameters() for t in theta]).reshape(-1, 10)

    def jacobian_batch(self, theta) -> np.ndarray:
        theta = _as_batch(theta, 10, "theta")
        return np.array([pin.LogCholeskyParameters(t).calculateJacobian() for t in theta]).reshape(-1, 10, 10)


@dataclass(frozen=True)
class Raw(InertiaParameterization):
    """Identity map ``pi = theta`` (Pinocchio order); Jacobian = identity. No consistency guarantee."""

    name: ClassVar[str] = "raw"

    def to_theta(self, pi) -> np.ndarray:
        return _as_vec(pi, 10, "pi").copy()

    def to_physical_batch(self, theta) -> np.ndarray:
        return _as_batch(theta, 10, "theta").copy()

    def jacobian_batch(self, theta) -> np.ndarray:
        theta = _as_batch(theta, 10, "theta")
        return np.broadcast_to(np.eye(10), (theta.shape[0], 10, 10)).copy()


_INERTIA_ALIASES = {
    "exponential-eigenvalue": ExponentialEigenvalue, "ee": ExponentialEigenvalue,
    "log-cholesky": LogCholesky, "raw": Raw,
}


def inertia_parameterization(name: str) -> InertiaParameterization:
    """``"exponential-eigenvalue"`` (or ``"ee"``), ``"log-cholesky"`` or ``"raw"`` -> instance."""
    if isinstance(name, InertiaParameterization):
        return name
    key = str(name).strip().lower().replace("_", "-")
    if key not in _INERTIA_ALIASES:
        raise ValueError(
            f"unknown inertia parameterization {name!r}; choices: "
            "'exponential-eigenvalue' (alias 'ee'), 'log-cholesky', 'raw'"
        )
    return _INERTIA_ALIASES[key]()


# ====================================================================== friction
@dataclass(frozen=True)
class FrictionModel:
    """Per-joint friction model ``tau_f(v; theta)`` [N·m] with ``v`` the joint velocity [rad/s].

    ``tau_f`` is the friction torque the joint loses (paper 004 eq. 55: ``tau = S (tau_hat - tau_f)``), so a
    dissipative model has ``tau_f(v) v >= 0``. Physical parameter names are ``f"{joint}.{suffix}"``.
    """

    name: ClassVar[str] = "base"
    n_params: ClassVar[int] = 0
    suffixes: ClassVar[tuple[str, ...]] = ()

    def to_physical(self, theta) -> np.ndarray:
        raise NotImplementedError

    def to_theta(self, phys) -> np.ndarray:
        raise NotImplementedError

    def jacobian(self, theta) -> np.ndarray:
        """(k, k) ``d phys / d theta``."""
        raise NotImplementedError

    #: True when the law also depends on the joint acceleration (`SoftDry`); then `torque_acc` must be used
    uses_acceleration: ClassVar[bool] = False

    def torque(self, v, theta) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(tau_f (N,), d tau_f/d v (N,), d tau_f/d theta (N, k))`` for velocities ``v`` (N,) [rad/s]."""
        raise NotImplementedError

    def torque_acc(self, v, a, theta) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(tau_f, d tau_f/d v, d tau_f/d a, d tau_f/d theta)`` at velocities ``v`` [rad/s] and
        accelerations ``a`` [rad/s²] (N,). Velocity-only laws: `torque` with ``d tau_f/d a = 0``."""
        tau, dv, dth = self.torque(v, theta)
        return tau, dv, np.zeros_like(dv), dth

    def default_physical(self, urdf_friction: float, urdf_damping: float) -> np.ndarray:
        """Prior mean from the URDF ``<dynamics friction=.. damping=..>`` values (floored when 0)."""
        raise NotImplementedError

    def valid(self, phys) -> bool:
        """Whether the physical vector of one joint is representable (finite; positive where θ is a log)."""
        phys = np.asarray(phys, float)
        return bool(np.all(np.isfinite(phys)) and np.all(phys > 0))

    def prior_std(self, log_std: float) -> np.ndarray:
        """Prior std of one joint's θ block (k,): ``log_std`` on every log-coordinate."""
        return np.full(self.n_params, float(log_std))

    def _theta(self, theta) -> np.ndarray:
        return _as_vec(theta, self.n_params, f"{self.name} theta")


def _sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(x, dtype=float)))


@dataclass(frozen=True)
class CoulombViscous(FrictionModel):
    """Smoothed Coulomb + viscous friction: ``tau_f = fc tanh(v / velocity_scale) + fv v``.

    ``theta = (log fc, log fv)``; ``fc`` [N·m] Coulomb level, ``fv`` [N·m·s/rad] viscous coefficient,
    ``velocity_scale`` [rad/s] the tanh smoothing width (for ``|v| >> velocity_scale``,
    ``tau_f -> fc sign(v) + fv v``). Prior (`default_physical`): the URDF friction and damping, floored at
    `FC_FLOOR` and `FV_FLOOR` so that the log is defined.
    """

    velocity_scale: float = 0.05
    name: ClassVar[str] = "coulomb-viscous"
    n_params: ClassVar[int] = 2
    suffixes: ClassVar[tuple[str, ...]] = ("fc", "fv")
    FC_FLOOR: ClassVar[float] = 1e-3  # N·m
    FV_FLOOR: ClassVar[float] = 1e-4  # N·m·s/rad

    def __post_init__(self):
        if not self.velocity_scale > 0:
            raise ValueError(f"velocity_scale must be > 0 rad/s, got {self.velocity_scale}")

    def to_physical(self, theta) -> np.ndarray:
        return np.exp(self._theta(theta))

    def to_theta(self, phys) -> np.ndarray:
        phys = _as_vec(phys, 2, "coulomb-viscous phys")
        return np.log(np.maximum(phys, [self.FC_FLOOR * 1e-6, self.FV_FLOOR * 1e-6]))

    def jacobian(self, theta) -> np.ndarray:
        return np.diag(self.to_physical(theta))

    def torque(self, v, theta):
        fc, fv = self.to_physical(theta)
        v = np.asarray(v, dtype=float)
        t = np.tanh(v / self.velocity_scale)
        tau = fc * t + fv * v
        dv = fc * (1.0 - t * t) / self.velocity_scale + fv
        dth = np.stack([fc * t, fv * v], axis=-1)
        return tau, dv, dth

    def default_physical(self, urdf_friction: float, urdf_damping: float) -> np.ndarray:
        return np.array([max(float(urdf_friction), self.FC_FLOOR), max(float(urdf_damping), self.FV_FLOOR)])


@dataclass(frozen=True)
class Stribeck6(FrictionModel):
    """Six-parameter smooth Stribeck friction, paper 004 eqs. 56-60 (sign corrected, see below)::

        tau_f(v) = g0 (tanh(g1 v) - tanh(g2 v)) + g3 tanh(g4 v) + g5 v

    g0 [N·m] stiction excess, g1 >= g2 [s/rad] stiction/Stribeck sharpness, g3 [N·m] Coulomb level,
    g4 [s/rad] Coulomb sharpness, g5 [N·m·s/rad] viscous coefficient.

    theta = (mu0, ..., mu5): ``g_i = exp(mu_i)`` for i in {0, 1, 3, 4, 5} (eq. 58) and
    ``g2 = g1 * sigmoid(mu2)``, which enforces ``0 < g2 < g1`` (eq. 57) by construction instead of the
    paper's stagewise optimizer.

    SIGN: eq. 56 prints ``-g0 (tanh(g1 v) - tanh(g2 v))``. With g0 >= 0 and g1 >= g2 the bracket has the
    sign of v, so the printed term REDUCES friction at low speed (a dip, the opposite of a stiction peak),
    and for ``g0 (g1 - g2) > g3 g4 + g5`` it makes ``tau_f v < 0`` near v = 0, i.e. friction that injects
    energy, contradicting the paper's own claim that eq. 57 makes friction dissipative. We implement
    ``+g0 (...)``: a stiction peak of height up to ~g0 above the Coulomb level that decays to g3 once
    ``g2 |v| >> 1``; every term then has the sign of v, so ``tau_f v >= 0`` for all theta. The derivatives
    (eq. 59) flip sign accordingly for g0, g1, g2; eq. 60 (chain rule) is applied with this theta map.
    """

    name: ClassVar[str] = "stribeck6"
    n_params: ClassVar[int] = 6
    suffixes: ClassVar[tuple[str, ...]] = ("g0", "g1", "g2", "g3", "g4", "g5")
    #: heuristic prior: stiction excess = STICTION_RATIO * Coulomb; sharpnesses 1/(velocity) [s/rad].
    STICTION_RATIO: ClassVar[float] = 0.2
    G1_PRIOR: ClassVar[float] = 100.0  # s/rad: peak reached by ~0.01 rad/s
    G2_PRIOR: ClassVar[float] = 10.0  # s/rad: Stribeck decay over ~0.1 rad/s
    G4_PRIOR: ClassVar[float] = 100.0  # s/rad: Coulomb tanh width 0.01 rad/s (>= G1 so the peak shows)
    FC_FLOOR: ClassVar[float] = 1e-3  # N·m
    FV_FLOOR: ClassVar[float] = 1e-4  # N·m·s/rad
    RATIO_EPS: ClassVar[float] = 1e-9  # to_theta clamps g2/g1 into [eps, 1 - eps]

    def to_physical(self, theta) -> np.ndarray:
        mu = self._theta(theta)
        g = np.exp(mu)
        g[2] = g[1] * _sigmoid(mu[2])
        return g

    def to_theta(self, phys) -> np.ndarray:
        g = _as_vec(phys, 6, "stribeck6 phys")
        tiny = 1e-300
        mu = np.log(np.maximum(g, tiny))
        r = np.clip(g[2] / max(g[1], tiny), self.RATIO_EPS, 1 - self.RATIO_EPS)
        mu[2] = np.log(r) - np.log1p(-r)
        return mu

    def jacobian(self, theta) -> np.ndarray:
        mu = self._theta(theta)
        g = self.to_physical(mu)
        J = np.diag(g)
        s = _sigmoid(mu[2])
        J[2, 2] = g[1] * s * (1 - s)
        J[2, 1] = g[2]  # d(g1 s)/d mu1 = g1 s
        return J

    def torque(self, v, theta):
        g = self.to_physical(theta)
        v = np.asarray(v, dtype=float)
        t1, t2, t4 = np.tanh(g[1] * v), np.tanh(g[2] * v), np.tanh(g[4] * v)
        c1, c2, c4 = 1 - t1 * t1, 1 - t2 * t2, 1 - t4 * t4
        tau = g[0] * (t1 - t2) + g[3] * t4 + g[5] * v
        dv = g[0] * (g[1] * c1 - g[2] * c2) + g[3] * g[4] * c4 + g[5]
        dg = np.stack([t1 - t2, g[0] * v * c1, -g[0] * v * c2, t4, g[3] * v * c4, v], axis=-1)  # eq. 59
        return tau, dv, dg @ self.jacobian(theta)  # eq. 60

    def default_physical(self, urdf_friction: float, urdf_damping: float) -> np.ndarray:
        fc = max(float(urdf_friction), self.FC_FLOOR)
        fv = max(float(urdf_damping), self.FV_FLOOR)
        return np.array([self.STICTION_RATIO * fc, self.G1_PRIOR, self.G2_PRIOR, fc, self.G4_PRIOR, fv])


@dataclass(frozen=True)
class CoulombViscousScale(CoulombViscous):
    """Smoothed Coulomb + viscous friction whose smoothing width is estimated too (issue 9 item 3):
    ``tau_f = fc tanh(v / vs) + fv v`` with ``theta = (log fc, log fv, log vs)``.

    ``vs`` [rad/s] is per joint and exp-positive; its prior mean is ``velocity_scale`` (the fixed width of
    `CoulombViscous`), so the data decide how sharp the friction is (sharper than the estimator's 0.05
    rad/s default on many real and simulated joints, docs/benchmarks.md out-of-class section).
    ``d tau_f / d log vs = -fc (1 - tanh²(v/vs)) v / vs``. ``to_physical``/``jacobian`` (exp) are
    `CoulombViscous`'s.
    """

    name: ClassVar[str] = "coulomb-viscous-scale"
    n_params: ClassVar[int] = 3
    suffixes: ClassVar[tuple[str, ...]] = ("fc", "fv", "vs")

    def to_theta(self, phys) -> np.ndarray:
        phys = _as_vec(phys, 3, "coulomb-viscous-scale phys")
        return np.log(np.maximum(phys, [self.FC_FLOOR * 1e-6, self.FV_FLOOR * 1e-6, 1e-9]))

    def torque(self, v, theta):
        fc, fv, vs = self.to_physical(theta)
        v = np.asarray(v, dtype=float)
        t = np.tanh(v / vs)
        sech2 = 1.0 - t * t
        tau = fc * t + fv * v
        dv = fc * sech2 / vs + fv
        dth = np.stack([fc * t, fv * v, -fc * sech2 * v / vs], axis=-1)
        return tau, dv, dth

    def default_physical(self, urdf_friction: float, urdf_damping: float) -> np.ndarray:
        return np.append(super().default_physical(urdf_friction, urdf_damping), self.velocity_scale)


@dataclass(frozen=True)
class SoftDry(CoulombViscous):
    """Dry friction with stiction as a *soft constraint* (MuJoCo's joint ``frictionloss``), plus viscous::

        tau_f = fc · s((v + T a) / vs) + fv · v          [N·m | N],   s = clip(·, −1, 1) (or tanh)

    ``theta = (log fc, log fv, log vs, T)``: ``fc`` [N·m] the dry-friction bound, ``fv`` [N·m·s/rad],
    ``vs`` [rad/s] the width of the stick band, ``T`` [s] the lead of the friction's argument (signed: a
    negative T is a lag). While ``|v + T a| < vs`` the joint sticks and the friction torque is whatever
    holds it (any value in ±fc, along the band's slope fc/vs); outside it slides with ``±fc``. A
    velocity-only law cannot say *when* a reversing joint's friction flips: a soft constraint resists the
    predicted velocity ``v + T a``, so the flip leads the velocity's zero crossing by ~T.

    With ``shape="clip"`` this is exactly MuJoCo's friction-loss constraint force (MuJoCo documentation,
    *Computation* → soft constraints: ``f = −R⁻¹ (J q̈ − a_ref)`` clamped to ±frictionloss with
    ``a_ref = −b J q̇``): with the constraint's damping ``b = 2 / (d_max · timeconst)`` and regularizer
    ``R = (1 − d)/d · invweight``, ``T = 1/b`` and ``vs = R · fc / b``. MuJoCo's defaults (solref 0.02 s,
    solimp 0.9/0.95) give T = 9.5 ms; a MuJoCo arm's efforts are reproduced to round-off at the exact
    states (docs/out-of-class.md). ``shape="tanh"`` nests `CoulombViscousScale` (T = 0).

    Prior (`default_physical`, `prior_std`): URDF fc/fv as `CoulombViscous`, ``vs = velocity_scale`` and
    ``T = 0`` with std `LEAD_PRIOR_STD`. ``d tau_f/d a = T · d tau_f/d (v + T a)``.
    """

    shape: str = "clip"
    name: ClassVar[str] = "soft-dry"
    n_params: ClassVar[int] = 4
    suffixes: ClassVar[tuple[str, ...]] = ("fc", "fv", "vs", "lead")
    uses_acceleration: ClassVar[bool] = True
    #: prior std of the lead T [s] around 0 (MuJoCo's default soft constraint: 0.95 · 0.02 / 2 = 9.5 ms)
    LEAD_PRIOR_STD: ClassVar[float] = 0.02

    def __post_init__(self):
        super().__post_init__()
        if self.shape not in ("clip", "tanh"):
            raise ValueError(f"soft-dry shape must be 'clip' or 'tanh', not {self.shape!r}")

    def to_physical(self, theta) -> np.ndarray:
        th = self._theta(theta)
        return np.append(np.exp(th[:3]), th[3])

    def to_theta(self, phys) -> np.ndarray:
        phys = _as_vec(phys, 4, "soft-dry phys")
        return np.append(np.log(np.maximum(phys[:3], [self.FC_FLOOR * 1e-6, self.FV_FLOOR * 1e-6, 1e-9])),
                         phys[3])

    def jacobian(self, theta) -> np.ndarray:
        return np.diag(np.append(np.exp(self._theta(theta)[:3]), 1.0))

    def valid(self, phys) -> bool:
        phys = np.asarray(phys, float)
        return bool(np.all(np.isfinite(phys)) and np.all(phys[:3] > 0))

    def prior_std(self, log_std: float) -> np.ndarray:
        return np.array([log_std, log_std, log_std, self.LEAD_PRIOR_STD])

    def dry_shape(self, u):
        """The dry term's shape s(u) and ds/du at u = (v + T a)/vs: clip(u, ±1) or tanh(u)."""
        u = np.asarray(u, dtype=float)
        if self.shape == "clip":
            inside = np.abs(u) <= 1.0
            return np.where(inside, u, np.sign(u)), inside.astype(float)
        s = np.tanh(u)
        return s, 1.0 - s * s

    def torque(self, v, theta):
        raise ValueError("the soft-dry friction law depends on the acceleration: use torque_acc(v, a, theta)")

    def torque_acc(self, v, a, theta):
        fc, fv, vs, lead = self.to_physical(theta)
        v = np.asarray(v, dtype=float)
        a = np.asarray(a, dtype=float)
        u = (v + lead * a) / vs
        s, ds = self.dry_shape(u)
        g = fc * ds / vs  # d tau_f / d (v + T a)
        tau = fc * s + fv * v
        dth = np.stack([fc * s, fv * v, -fc * ds * u, g * a], axis=-1)
        return tau, g + fv, g * lead, dth

    def default_physical(self, urdf_friction: float, urdf_damping: float) -> np.ndarray:
        return np.append(super().default_physical(urdf_friction, urdf_damping), [self.velocity_scale, 0.0])


@dataclass(frozen=True)
class CoulombViscousLead(SoftDry):
    """Smoothed Coulomb + viscous friction of the *predicted* velocity (issue 9, session 10)::

        tau_f = fc · tanh((v + T a) / vs) + fv · v,     theta = (log fc, log fv, log vs, T)

    `SoftDry` with the smooth shape: it nests `CoulombViscousScale` (T = 0, the prior mean) and lets the
    data say whether the friction flips ahead of the velocity (T > 0: a soft stick constraint such as
    MuJoCo's, 9.5 ms by default) or behind it (T < 0). The default law of ``friction="auto"`` when the
    Coulomb–viscous family is chosen.
    """

    shape: str = "tanh"
    name: ClassVar[str] = "coulomb-viscous-lead"


_FRICTION_ALIASES = {"coulomb-viscous": CoulombViscous, "stribeck6": Stribeck6,
                     "coulomb-viscous-scale": CoulombViscousScale, "soft-dry": SoftDry,
                     "coulomb-viscous-lead": CoulombViscousLead}


def friction_model(name: str, **kw) -> FrictionModel:
    """``"coulomb-viscous"``, ``"coulomb-viscous-scale"``, ``"coulomb-viscous-lead"``, ``"soft-dry"`` (kw:
    ``velocity_scale`` [rad/s]: the fixed width / the prior mean of the estimated width) or ``"stribeck6"``
    -> instance."""
    if isinstance(name, FrictionModel):
        return name
    key = str(name).strip().lower().replace("_", "-")
    if key not in _FRICTION_ALIASES:
        choices = ", ".join(map(repr, _FRICTION_ALIASES))
        raise ValueError(f"unknown friction model {name!r}; choices: {choices}")
    return _FRICTION_ALIASES[key](**kw)


@dataclass(frozen=True)
class PositiveScalar:
    """``phys = exp(theta)`` elementwise, e.g. the armature (rotor inertia reflected to the joint, kg·m²).

    `jacobian` returns the elementwise derivative ``d phys / d theta = exp(theta)`` with the shape of
    theta (the diagonal of the Jacobian). `to_theta` floors ``phys`` at `FLOOR` before the log.
    """

    name: ClassVar[str] = "positive"
    n_params: ClassVar[int] = 1
    suffixes: ClassVar[tuple[str, ...]] = ("armature",)
    FLOOR: ClassVar[float] = 1e-9

    def to_physical(self, theta) -> np.ndarray:
        return np.exp(np.asarray(theta, dtype=float))

    def to_theta(self, phys) -> np.ndarray:
        return np.log(np.maximum(np.asarray(phys, dtype=float), self.FLOOR))

    def jacobian(self, theta) -> np.ndarray:
        return np.exp(np.asarray(theta, dtype=float))


# ====================================================================== consistency checks
def check_physical_consistency(pi, body_names, tol: float = 1e-12) -> list[str]:
    """Check eq. 44 for each body of ``pi`` (nb, 10); return one message per offending body.

    Checks: finite values, ``m > 0``, ``I_c = I - (1/m)[h]x[h]x^T`` positive semidefinite and the triangle
    inequality on its principal moments (``D_max <= D_a + D_b``). Eigenvalue checks use the tolerance
    ``tol * scale`` with ``scale`` the largest magnitude among the entries of ``I`` and of ``I_c``'s
    eigenvalues, so bodies exactly on the boundary (rods, laminae, point masses) pass.
    Empty list = consistent.
    """
    pi = _as_batch(pi, 10, "pi")
    names = list(body_names)
    if len(names) != pi.shape[0]:
        raise ValueError(f"{pi.shape[0]} bodies but {len(names)} body names")
    out = []
    for name, p in zip(names, pi, strict=True):
        if not np.all(np.isfinite(p)):
            out.append(f"{name}: non-finite inertial parameters {p.tolist()}")
            continue
        m = p[0]
        if m <= 0:
            out.append(f"{name}: mass {m:.6g} kg <= 0")
            continue
        I = _unvech(p[4:10])
        Ic = I - _parallel_axis(p[1:4], np.asarray(m))
        D = np.linalg.eigvalsh(0.5 * (Ic + Ic.T))  # ascending
        thr = tol * max(np.abs(I).max(), np.abs(D).max(), 1e-300)
        problems = []
        if D[0] < -thr:
            problems.append(f"I_c not PSD (min eigenvalue {D[0]:.3g} kg·m²)")
        excess = D[2] - D[0] - D[1]
        if excess > thr:
            problems.append(
                f"triangle inequality D_max <= D_a + D_b violated (principal moments "
                f"{np.array2string(D, precision=4)} kg·m², excess {excess:.3g})"
            )
        if problems:
            out.append(f"{name}: " + "; ".join(problems))
    return out


def warn_if_inconsistent(pi, body_names, what: str = "URDF prior") -> list[str]:
    """`check_physical_consistency`, plus one ``warnings.warn`` line listing the problems (if any)."""
    msgs = check_physical_consistency(pi, body_names)
    if msgs:
        warnings.warn(
            f"{what}: physically inconsistent inertial parameters: " + " | ".join(msgs), stacklevel=2
        )
    return msgs
