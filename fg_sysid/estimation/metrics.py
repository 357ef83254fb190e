"""Accuracy metrics shared by tests, benchmarks and reports."""

from __future__ import annotations

import math
import warnings

import numpy as np

from ..robots import RobotModel


def relative_rmse(pred: np.ndarray, true: np.ndarray) -> float:
    """``sqrt(mean((pred − true)²)) / sqrt(mean(true²))`` over all joints and samples.

    Columns of ``true`` that are entirely NaN (not measured) are ignored; any other NaN is an error.
    """
    pred, true = _aligned(pred, true)
    if true.size == 0:
        return math.nan
    den = math.sqrt(float(np.mean(true ** 2)))
    num = math.sqrt(float(np.mean((pred - true) ** 2)))
    return num / den if den > 0 else math.inf


def relative_rmse_per_joint(pred: np.ndarray, true: np.ndarray) -> np.ndarray:
    """Per-joint relative RMSE (n_joints,); NaN for joints whose ``true`` column is all NaN."""
    pred = np.atleast_2d(np.asarray(pred, float))
    true = np.atleast_2d(np.asarray(true, float))
    if pred.shape != true.shape:
        raise ValueError(f"prediction shape {pred.shape} differs from the reference shape {true.shape}")
    out = np.full(true.shape[1], np.nan)
    for j in range(true.shape[1]):
        if np.all(np.isnan(true[:, j])):
            continue
        den = math.sqrt(float(np.mean(true[:, j] ** 2)))
        num = math.sqrt(float(np.mean((pred[:, j] - true[:, j]) ** 2)))
        out[j] = num / den if den > 0 else math.inf
    return out


def _aligned(pred, true):
    pred = np.atleast_2d(np.asarray(pred, float))
    true = np.atleast_2d(np.asarray(true, float))
    if pred.shape != true.shape:
        raise ValueError(f"prediction shape {pred.shape} differs from the reference shape {true.shape}")
    keep = ~np.all(np.isnan(true), axis=0)
    pred, true = pred[:, keep], true[:, keep]
    if np.isnan(true).any():
        raise ValueError("reference efforts contain NaN in a measured column")
    return pred, true


#: friction-shape parameters (tanh width, lead T) that the classical layout (fc, fv per joint) does not carry
SHAPE_SUFFIXES = (".vs", ".lead")


def classical_vector(names, values) -> np.ndarray:
    """``values`` (physical, named ``names``) in the classical layout of `base_parameter_error`
    (inertial | (fc, fv) per joint | armature): the friction-shape entries `SHAPE_SUFFIXES` dropped. For a
    model of the Coulomb–viscous family (coulomb-viscous(-scale), coulomb-viscous-lead, soft-dry)."""
    return np.array([x for n, x in zip(names, values, strict=True) if not n.endswith(SHAPE_SUFFIXES)], float)


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


def base_pose_errors(q_true: np.ndarray, q_est: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-sample base orientation error [deg] (angle of R_trueᵀ R_est) and position error [m] of
    free-flyer configurations (N, nq) in Pinocchio's layout (p, quaternion x, y, z, w, joints)."""
    import pinocchio as pin

    q_true, q_est = np.asarray(q_true, float), np.asarray(q_est, float)
    ang = np.empty(len(q_true))
    for k, (qt, qe) in enumerate(zip(q_true, q_est, strict=True)):
        Rt = pin.Quaternion(qt[6], *qt[3:6]).toRotationMatrix()
        Re = pin.Quaternion(qe[6], *qe[3:6]).toRotationMatrix()
        ang[k] = np.degrees(np.linalg.norm(pin.log3(Rt.T @ Re)))
    return ang, np.linalg.norm(q_true[:, :3] - q_est[:, :3], axis=1)
