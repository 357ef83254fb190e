"""Numerical identifiability: rank and bases of joint-torque regressors stacked over random states.

This is the classical check (Gautier 1991) that the exact RPNA is compared with. ``Y(q, v, a)`` is
Pinocchio's joint-torque regressor (``computeJointTorqueRegressor``, parameters in Pinocchio's
dynamic-parameter order about the body frames), extended with one column per geared rotor
(`Rotor`, parameter ``<joint>.rotor_inertia``): the rotor is added as an extra revolute body on the
parent of its joint and the constraint ``q_rotor = n_R q_joint`` is applied, ``Y = G^T Y_aug``.

Tolerance. The stacked regressor is *not* column-scaled (scaling can inflate the rank of nearly
dependent columns). Its rank is the number of singular values above ``rtol * sigma_max`` with
``rtol = 1e-8`` by default: well above the ``~1e-12`` level that URDF angles rounded to 11-12 digits
produce, and well below genuine geometric effects. The margin (decades between the tolerance and
the nearest kept / dropped singular value) is reported, and an `IdentifiabilityWarning` is issued
when it is below 2 decades. Base parameters are chosen by QR with column pivoting.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pinocchio as pin
import scipy.linalg

from .rpna import (
    DEFAULT_RTOL,
    DEFAULT_WARN_DECADES,
    IdentifiabilityWarning,
    Rotor,
    _names,
    rotor_parameter_vector,
)


def _augmented(model: pin.Model, rotors: list[Rotor]):
    """Model with one extra revolute body per rotor, the map G (nv_aug x nv) and rotor axes."""
    if not rotors:
        return model, np.eye(model.nv), []
    from .rpna import _joint_geometry, _rotor_axis_in_parent

    geom = _joint_geometry(model)
    aug = model.copy()
    G = np.zeros((model.nv + len(rotors), model.nv))
    G[: model.nv] = np.eye(model.nv)
    axes = []
    for k, r in enumerate(rotors):
        j = model.getJointId(r.joint)
        p, _, S, liMi = geom[j]
        a = _rotor_axis_in_parent(r, liMi, S)
        jid = aug.addJoint(p, pin.JointModelRevoluteUnaligned(a), pin.SE3.Identity(), f"{r.joint}__rotor")
        aug.appendBodyToJoint(jid, pin.Inertia(0.0, np.zeros(3), np.outer(a, a)), pin.SE3.Identity())
        G[model.nv + k, model.joints[j].idx_v] = r.gear_ratio
        axes.append(a)
    return aug, G, axes


class Regressor:
    """Callable ``Y(q, v, a)`` (nv x n_parameters) including rotor columns."""

    def __init__(self, model: pin.Model, rotors: list[Rotor] | None = None):
        self.model = model
        self.rotors = list(rotors or [])
        self.aug, self.G, axes = _augmented(model, self.rotors)
        self.data = self.aug.createData()
        self.n_links = 10 * (model.njoints - 1)
        self._rvec = [rotor_parameter_vector(a) for a in axes]

    @property
    def n_parameters(self) -> int:
        return self.n_links + len(self.rotors)

    def _q_aug(self, q):
        if not self.rotors:
            return q
        qa = pin.neutral(self.aug)
        qa[: self.model.nq] = q
        return qa

    def __call__(self, q, v, a) -> np.ndarray:
        qa = self._q_aug(q)
        Ya = pin.computeJointTorqueRegressor(self.aug, self.data, qa, self.G @ v, self.G @ a)
        Y = self.G.T @ Ya
        if not self.rotors:
            return Y.copy()
        out = np.zeros((self.model.nv, self.n_parameters))
        out[:, : self.n_links] = Y[:, : self.n_links]
        for k, rv in enumerate(self._rvec):
            c = self.n_links + 10 * k
            out[:, self.n_links + k] = Y[:, c : c + 10] @ rv
        return out


def random_state(model: pin.Model, rng: np.random.Generator, scale: float = 1.0):
    """A random (q, v, a): q = neutral (+) uniform(-pi, pi) per DoF; v, a ~ uniform(-scale, scale)."""
    q = pin.integrate(model, pin.neutral(model), rng.uniform(-np.pi, np.pi, model.nv))
    return q, rng.uniform(-scale, scale, model.nv), rng.uniform(-scale, scale, model.nv)


def stacked_regressor(
    robot, rotors: list[Rotor] | None = None, n_samples: int | None = None, seed: int = 0,
    rows: str = "all", static: bool = False,
) -> np.ndarray:
    """Regressors stacked over random states. ``rows='base'`` keeps the 6 base-wrench rows of a
    floating-base model; ``static`` uses v = a = 0. Default ``n_samples`` gives >= 3x as many rows as
    parameters."""
    model, _, floating = _names(robot)
    reg = Regressor(model, rotors)
    if rows == "base" and not floating:
        raise ValueError("rows='base' needs a floating-base model")
    sel = slice(0, 6) if rows == "base" else slice(None)
    nrow = 6 if rows == "base" else model.nv
    n_samples = n_samples or max(10, int(np.ceil(3 * reg.n_parameters / nrow)))
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_samples):
        q, v, a = random_state(model, rng)
        if static:
            v, a = 0 * v, 0 * a
        out.append(reg(q, v, a)[sel])
    return np.vstack(out)


@dataclass
class NumericalResult:
    """Rank analysis of a stacked regressor (see module docstring for the tolerance)."""

    rank: int
    n_parameters: int
    singular_values: np.ndarray
    tolerance: float
    margin_decades: float
    null_basis: np.ndarray  # (n_parameters, n_parameters - rank), orthonormal
    identifiable_basis: np.ndarray  # (rank, n_parameters), orthonormal rows
    base_index: np.ndarray  # columns chosen by QR with column pivoting (sorted)
    base_K: np.ndarray  # beta = base_K @ pi, with Y pi = Y[:, base_index] beta
    parameter_names: list[str]

    @property
    def base_names(self) -> list[str]:
        return [self.parameter_names[k] for k in self.base_index]

    def as_dict(self) -> dict:
        return {"rank": self.rank, "parameters": self.n_parameters, "tolerance": self.tolerance,
                "margin_decades": self.margin_decades, "base_parameters": self.base_names}


def rank_analysis(
    Y: np.ndarray, names: list[str] | None = None, rtol: float = DEFAULT_RTOL,
    warn_decades: float = DEFAULT_WARN_DECADES,
) -> NumericalResult:
    """Rank, bases and QR-pivoted base parameters of a stacked regressor ``Y``."""
    n = Y.shape[1]
    names = names or [f"p{k}" for k in range(n)]
    _, s, Vt = np.linalg.svd(Y, full_matrices=True)
    s_full = np.zeros(n)
    s_full[: s.size] = s
    tol = rtol * (s[0] if s.size else 0.0)
    r = int(np.sum(s_full > tol)) if tol > 0 else 0
    kept = np.log10(s_full[r - 1] / tol) if r else np.inf
    dropped = -np.log10(s_full[r] / tol) if r < n and s_full[r] > 0 else np.inf
    margin = float(min(kept, dropped))
    if margin < warn_decades:
        warnings.warn(
            f"regressor rank {r}: a singular value is only {margin:.1f} decades from the tolerance "
            f"{rtol:g}*sigma_max; the rank is not robust (near-degenerate geometry, rounded URDF angles or "
            "too few / poorly exciting samples)", IdentifiabilityWarning, stacklevel=2,
        )
    _, R, perm = scipy.linalg.qr(Y, mode="economic", pivoting=True)
    b = np.sort(perm[:r])
    d = np.setdiff1d(np.arange(n), b)
    K = np.zeros((r, n))
    # Y[:, d] = Y[:, b] @ C  (least squares, exact up to the tolerance) => beta = pi_b + C pi_d
    C = np.linalg.lstsq(Y[:, b], Y[:, d], rcond=None)[0] if d.size and r else np.zeros((r, d.size))
    K[:, b] = np.eye(r)
    K[:, d] = C
    return NumericalResult(
        rank=r, n_parameters=n, singular_values=s_full, tolerance=tol, margin_decades=margin,
        null_basis=Vt[r:].T, identifiable_basis=Vt[:r], base_index=b, base_K=K, parameter_names=names,
    )


def numerical_identifiability(
    robot, rotors: list[Rotor] | None = None, n_samples: int | None = None, seed: int = 0,
    rows: str = "all", static: bool = False, rtol: float = DEFAULT_RTOL,
    warn_decades: float = DEFAULT_WARN_DECADES,
) -> NumericalResult:
    """Numerical counterpart of `rpna`: rank of the regressor stacked over random states."""
    from ..robots.model import INERTIAL_SUFFIXES

    model, body_names, _ = _names(robot)
    Y = stacked_regressor(robot, rotors, n_samples=n_samples, seed=seed, rows=rows, static=static)
    names = [f"{b}.{s}" for b in body_names for s in INERTIAL_SUFFIXES]
    names += [f"{r.joint}.rotor_inertia" for r in rotors or []]
    return rank_analysis(Y, names, rtol=rtol, warn_decades=warn_decades)
