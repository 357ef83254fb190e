"""Frozen identification result: parameter table, smoothed trajectory, convergence, timings."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..layout import ParameterLayout
from ..parameterizations import check_physical_consistency


@dataclass(frozen=True, eq=False)
class IdentificationResult:
    """What an estimator learned. Physical parameters in the layout's order and units (SI).

    Attributes:
        names, groups: parameter names (``<link>.m``, ``<joint>.fc``, ...) and their groups.
        estimate, std: physical estimate and marginal std (delta method through dp/dθ).
        prior_mean, prior_std: the prior, mapped to physical units the same way.
        theta, theta_cov: unconstrained estimate and its marginal covariance.
        trajectory: smoothed knots (t, q.<j>, v.<j>, a.<j>), or None (classical baselines).
        history: per-iteration records (cost, λ, seconds).
        converged, seconds, knots, noise, method: run summary.
    """

    layout: ParameterLayout
    names: tuple
    groups: tuple
    estimate: np.ndarray
    std: np.ndarray
    prior_mean: np.ndarray
    prior_std: np.ndarray
    theta: np.ndarray
    theta_cov: np.ndarray
    trajectory: pd.DataFrame | None
    history: list
    converged: bool
    seconds: float
    knots: int
    noise: dict
    method: str
    id_residual_rms: np.ndarray = field(default_factory=lambda: np.zeros(0))
    std_ratio: np.ndarray = field(default_factory=lambda: np.zeros(0))
    identifiability: pd.DataFrame | None = None
    #: Estimator-specific extras merged into `summary` (e.g. the floating-base smoother's constraint
    #: residuals, contact forces and base-trajectory errors).
    extras: dict = field(default_factory=dict)

    @classmethod
    def build(cls, layout: ParameterLayout, theta, theta_cov, theta_prior, t, q, v, a, history, converged,
              seconds, noise, method, knots, id_residual=None,
              measured_joints=None, extra_columns: dict | None = None,
              extras: dict | None = None) -> IdentificationResult:
        theta_bar, theta_std = theta_prior
        J = layout.jacobian(theta)
        p = layout.to_physical(theta)
        with np.errstate(invalid="ignore"):
            std = np.sqrt(np.clip(np.einsum("ij,jk,ik->i", J, theta_cov, J), 0, None))
        J0 = layout.jacobian(theta_bar)
        prior_std = np.sqrt(np.einsum("ij,j,ij->i", J0, theta_std ** 2, J0))
        # identification ratio: posterior / prior std, both propagated through dp/dθ at the estimate
        # (so that the ratio is ≤ 1 whenever the data only add information)
        prior_at_est = np.sqrt(np.einsum("ij,j,ij->i", J, theta_std ** 2, J))
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = std / prior_at_est
        traj = None
        if q is not None:
            cols = {"t": t}
            for i, j in enumerate(layout.robot.joint_names):
                iv = layout.robot.joint_index_v()[i]
                cols[f"q.{j}"] = q[:, layout.robot.joint_index_q()[i]]
                cols[f"v.{j}"] = v[:, iv]
                cols[f"a.{j}"] = a[:, iv]
            cols.update(extra_columns or {})
            traj = pd.DataFrame(cols)
        rms = np.zeros(0)
        if id_residual is not None:
            rms = np.sqrt(np.mean(id_residual ** 2, axis=0))
        return cls(layout, tuple(layout.names), tuple(layout.groups()), p, std, layout.to_physical(theta_bar),
                   prior_std, np.asarray(theta), np.asarray(theta_cov), traj, list(history), bool(converged),
                   float(seconds), int(knots), dict(noise), method, rms, ratio,
                   _identifiability(layout, measured_joints), dict(extras or {}))

    # ------------------------------------------------------------------ views
    def parameters_table(self) -> pd.DataFrame:
        """Columns: name, group, estimate, std, prior_mean, prior_std, std_ratio (posterior/prior std at
        the estimate: near 1 = set by the prior, near 0 = identified by the data)."""
        ratio = self.std_ratio
        df = pd.DataFrame({"name": self.names, "group": self.groups, "estimate": self.estimate,
                           "std": self.std, "prior_mean": self.prior_mean, "prior_std": self.prior_std,
                           "std_ratio": ratio})
        if self.identifiability is not None:
            df["structural"] = self.identifiability["structural"].to_numpy()
            df["identifiable_fraction"] = self.identifiability["identifiable_fraction"].to_numpy()
            df["determined_by"] = np.where(ratio < 0.5, "log", np.where(ratio > 0.9, "prior", "both"))
        return df

    def physical_quantities(self) -> pd.DataFrame:
        """Per body the named physical quantities — mass [kg], COM [m] (body frame), rotational inertia
        about the COM [kg·m²] — with whether the log or the prior set them (worst std_ratio of the
        parameters they are computed from)."""
        rows = []
        pi = self.inertial()
        ratio = self.std_ratio.reshape(-1)[: 10 * len(pi)].reshape(len(pi), 10)
        for name, b, r in zip(self.layout.robot.body_names, pi, ratio, strict=True):
            m = b[0]
            c = b[1:4] / m
            I = np.array([[b[4], b[5], b[7]], [b[5], b[6], b[8]], [b[7], b[8], b[9]]])
            Ic = I - m * (np.dot(c, c) * np.eye(3) - np.outer(c, c))
            rows.append({"body": name, "mass": m, "com_x": c[0], "com_y": c[1], "com_z": c[2],
                         "Ic_xx": Ic[0, 0], "Ic_yy": Ic[1, 1], "Ic_zz": Ic[2, 2],
                         "mass_set_by": _who(r[0]), "com_set_by": _who(np.max(r[1:4])),
                         "inertia_set_by": _who(np.max(r[4:]))})
        return pd.DataFrame(rows)

    def inertial(self) -> np.ndarray:
        """(n_bodies, 10) physical inertial parameters."""
        return self.layout.split(self.estimate)[0].copy()

    def consistency_problems(self) -> list[str]:
        return check_physical_consistency(self.inertial(), list(self.layout.robot.body_names))

    def summary(self) -> dict:
        costs = [h["cost"] for h in self.history]
        per_it = [h["seconds"] for h in self.history]
        return {
            "method": self.method,
            "robot": self.layout.robot.name,
            "joints": list(self.layout.robot.joint_names),
            "locked_joints": self.layout.robot.locked_joints,
            "knots": self.knots,
            "iterations": len(self.history),
            "final_cost": costs[-1] if costs else None,
            "converged": self.converged,
            "seconds": self.seconds,
            "seconds_per_iteration": float(np.mean(per_it)) if per_it else None,
            "parameters": len(self.names),
            "inertia_parameterization": self.layout.inertia.name,
            "friction_model": self.layout.friction.name,
            "physically_consistent": not self.consistency_problems(),
            "noise": self.noise,
            "inverse_dynamics_residual_rms": self.id_residual_rms.tolist(),
            "cost_history": costs,
            **self.extras,
        }

    def to_json(self) -> str:
        return json.dumps(self.summary(), indent=2, default=_jsonable)


def _who(ratio: float) -> str:
    return "log" if ratio < 0.5 else "prior" if ratio > 0.9 else "log+prior"


def _identifiability(layout, measured_joints):
    if getattr(layout.robot, "loops", ()):  # the structural analysis is of the tree: not of a looped robot
        return None
    try:
        from ..identifiability.parameters import parameter_identifiability

        return parameter_identifiability(layout, measured_joints)
    except Exception:  # structural analysis is a report extra; never fail an identification for it
        return None


def _jsonable(o):
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, (np.floating, np.integer)):
        return o.item()
    raise TypeError(type(o))
