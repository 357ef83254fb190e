"""Base-parameter (identifiable-combination) error of an inertial estimate (issue 12, Table II's fair metric).

Inverse-dynamics data determine the inertial vector π (10 per body: m, m·c, I about the body frame,
Pinocchio order) only up to the null space of the joint-torque regressor: for every state
``Y(q, v, a) π = Y(q, v, a) (π + n)`` with ``n`` in that null space. The error over all of π therefore
measures, besides the estimate, where an estimator leaves the directions no data can see (a prior, a ridge,
the initial guess). The **base parameters** ``β = K π`` (Gautier & Khalil's regrouped parameters) are the
identifiable combinations: ``Y π = Y_b β`` with ``Y_b`` the regressor's independent columns. ``K`` comes
from `fg_sysid.identifiability.numerical.numerical_identifiability` (regressor stacked over random states;
QR with column pivoting picks the base columns, the others are regrouped onto them), computed once per
robot and cached.

``base_error(robot, π̂, π*) = ‖K (π̂ − π*)‖₂ / ‖K π*‖₂`` — relative, mixed units like the other study
errors; invariant to any move of π̂ along unidentifiable directions (tested).
"""

from __future__ import annotations

import numpy as np

__all__ = ["base_error", "base_parameter_map"]

_MAPS: dict = {}  # (robot name, nv, n_bodies) -> K


def base_parameter_map(robot) -> np.ndarray:
    """``K`` (n_base, 10·n_bodies) with β = K π for ``robot`` (cached per robot name and size)."""
    key = (robot.name, robot.model.nv, robot.n_bodies)
    if key not in _MAPS:
        import warnings

        from ..identifiability.numerical import numerical_identifiability

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _MAPS[key] = numerical_identifiability(robot).base_K
    return _MAPS[key]


def base_error(robot, p_inertial: np.ndarray, p_true_inertial: np.ndarray) -> float:
    """Relative error of the base parameters, ‖K(π̂ − π*)‖ / ‖Kπ*‖ (module docstring); ``p_*`` the
    (10·n_bodies,) inertial vectors (body order of the robot)."""
    K = base_parameter_map(robot)
    d = K @ (np.asarray(p_inertial, float) - np.asarray(p_true_inertial, float))
    nb = float(np.linalg.norm(K @ np.asarray(p_true_inertial, float)))
    return float(np.linalg.norm(d) / nb) if nb > 0 else float(np.linalg.norm(d))
