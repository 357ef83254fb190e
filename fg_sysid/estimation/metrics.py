"""Accuracy metrics shared by tests, benchmarks and reports."""

from __future__ import annotations

import warnings

import numpy as np

from ..robots import RobotModel


def relative_rmse(pred: np.ndarray, true: np.ndarray) -> float:
    """sqrt(mean((pred − true)²)) / sqrt(mean(true²)) over all joints and samples (NaN columns skipped)."""
    pred, true = np.asarray(pred, float), np.asarray(true, float)
    ok = ~np.isnan(true) & ~np.isnan(pred)
    return float(np.sqrt(np.mean((pred[ok] - true[ok]) ** 2)) / np.sqrt(np.mean(true[ok] ** 2)))


def base_parameter_error(robot: RobotModel, p_est, p_true, q, v, a, velocity_scale: float = 0.05,
                         max_samples: int = 2000) -> float:
    """Relative error ‖K(p̂ − p)‖ / ‖K p‖ of the identifiable parameter combinations β = K p.

    K comes from QR with column pivoting of the regressor of the full physical vector (inertial,
    Coulomb/viscous friction, armature) stacked over the given motion: β are the classical base
    parameters, the combinations any torque data along that motion can determine.
    """
    from ..identifiability.numerical import rank_analysis
    from .baseline import stacked_regressor

    idx = np.unique(np.linspace(0, len(q) - 1, min(len(q), max_samples)).astype(int))
    Y = stacked_regressor(robot, q[idx], v[idx], a[idx], velocity_scale)
    Y = Y.reshape(-1, Y.shape[-1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        K = rank_analysis(Y).base_K
    d = K @ (np.asarray(p_est, float) - np.asarray(p_true, float))
    return float(np.linalg.norm(d) / np.linalg.norm(K @ np.asarray(p_true, float)))
