"""Held-out validation: the efforts an identified model predicts on another log, and their error.

Used by ``fg-sysid predict``, ``fg-sysid demo`` and the benchmarks.

* `heldout_accelerations` — velocities and accelerations of a log by Savitzky–Golay (SG)
  differentiation of ``q`` (a log carries no accelerations). The window is, in order of preference,
  the one given, the one the identification stored in ``model.json`` (``sg_filter``: the window the
  classical baseline's blocked cross-validation picked on the *training* log — the best fixed SG filter
  for that robot's sensors and motion), or `DEFAULT_SG_WINDOW_S` = 50 ms, cubic.
* `predict_efforts` — joint efforts (N, n_joints) of an identified model (an identify output directory,
  its ``model.json`` dict, an `IdentificationResult` or a `BaselineResult`) at given (q, v, a).
* `relative_rmse` / `relative_rmse_per_joint` — ``sqrt(mean((pred − true)²)) / sqrt(mean(true²))``
  over all joints and samples / per joint. Columns of ``true`` that are all NaN (effort not measured)
  are left out.
* `model_spec` / `robot_from_model` — what ``model.json`` holds, and the robot rebuilt from it.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np

from .datasets.log import Log
from .estimation.metrics import relative_rmse, relative_rmse_per_joint  # noqa: F401  (re-exported)
from .robots import RobotError, RobotModel, load_robot

#: SG window [s] and polynomial order used when neither the caller nor model.json gives one.
DEFAULT_SG_WINDOW_S = 0.05
DEFAULT_SG_POLYORDER = 3

MODEL_FORMAT = "fg-sysid-model"
MODEL_VERSION = 1


# ---------------------------------------------------------------------------------------------- errors

# ---------------------------------------------------------------------------------------------- derivatives
def sg_settings(window_s: float | None, polyorder: int | None) -> tuple[float, int]:
    """Savitzky–Golay window [s] and order with the defaults filled in; ValueError when unusable."""
    window_s = DEFAULT_SG_WINDOW_S if window_s is None else float(window_s)
    polyorder = DEFAULT_SG_POLYORDER if polyorder is None else int(polyorder)
    if not (math.isfinite(window_s) and window_s > 0):
        raise ValueError(f"SG window must be a positive duration, got {window_s} s")
    if polyorder < 2:
        raise ValueError(f"SG polynomial order must be >= 2 for accelerations, got {polyorder}")
    return window_s, polyorder


def heldout_accelerations(log: Log, window_s: float | None = None, polyorder: int | None = None,
                          use_logged_velocity: bool = True) -> tuple[np.ndarray, np.ndarray, dict]:
    """(v, a, info) for a log without accelerations, by SG differentiation of ``q``.

    ``v`` is the logged velocity when the log has one (and ``use_logged_velocity``), else the SG first
    derivative; ``a`` is always the SG second derivative (``scipy.signal.savgol_filter`` on the median
    clock, polynomial edge fit). ``window_s`` [s] defaults to `DEFAULT_SG_WINDOW_S`, ``polyorder`` to 3.
    ``info`` records the window actually used (samples and seconds), the order and the velocity source.
    """
    from scipy.signal import savgol_filter

    window_s, polyorder = sg_settings(window_s, polyorder)
    t = np.asarray(log.t, float)
    q = np.asarray(log.q, float)
    n = t.size
    dt = float(np.median(np.diff(t)))
    w = max(int(round(window_s / dt)), polyorder + 2)
    if w % 2 == 0:
        w += 1
    max_w = n if n % 2 == 1 else n - 1
    if max_w <= polyorder:
        raise ValueError(f"log {log.source!r} has {n} samples: too few for an SG filter of order {polyorder}")
    w = min(w, max_w)
    a = savgol_filter(q, w, polyorder, deriv=2, delta=dt, axis=0)
    if log.v is not None and use_logged_velocity:
        v = np.asarray(log.v, float)
        v_source = "logged"
    else:
        v = savgol_filter(q, w, polyorder, deriv=1, delta=dt, axis=0)
        v_source = "SG first derivative of q"
    info = {"window": int(w), "window_s": float(w * dt), "polyorder": polyorder, "dt": dt,
            "velocity": v_source}
    return v, a, info


# ---------------------------------------------------------------------------------------------- model.json
def model_spec(result, robot: RobotModel, robot_source: str, sg_filter: dict | None = None,
               training_log: str | None = None, velocity_scale: float | None = None) -> dict:
    """The ``model.json`` content of an `IdentificationResult` (smoother) or a `BaselineResult` (LS-SG).

    ``robot_source`` is the catalog name or the URDF path the robot was loaded from (before the joints
    absent from the log were locked: the locked joints and their values are stored separately).
    """
    from .estimation.result import IdentificationResult
    from .layout import ParameterLayout

    if isinstance(result, IdentificationResult):
        layout = result.layout
        method = result.method
        p = np.asarray(result.estimate, float)
        theta = np.asarray(result.theta, float)
        vs = getattr(layout.friction, "velocity_scale", None)
    else:  # BaselineResult: raw inertias (not constrained), Coulomb + viscous friction
        vs = 0.05 if velocity_scale is None else float(velocity_scale)
        layout = ParameterLayout.create(robot, "raw", "coulomb-viscous", vs)
        method = getattr(result, "method", "ls-sg")  # energy-ls results carry their method (issue 12)
        p = np.asarray(result.estimate, float)
        if list(result.names) != list(layout.names):
            raise ValueError("baseline parameter names do not match the layout")
        theta = None  # the raw physical estimate is the model (coulomb/viscous logs would clip negatives)
    src = str(robot_source)
    if Path(src).is_file():
        src = str(Path(src).resolve())
    return {
        "format": MODEL_FORMAT,
        "version": MODEL_VERSION,
        "method": method,
        "robot": {
            "source": src,
            "name": robot.name,
            "urdf": None if robot.urdf_path is None else str(Path(robot.urdf_path).resolve()),
            "joints": list(robot.joint_names),
            "locked_joints": dict(robot.locked_joints),
        },
        "layout": {
            "inertia_parameterization": layout.inertia.name,
            "friction_model": layout.friction.name,
            "friction_velocity_scale": vs,
            "names": list(layout.names),
            "theta": None if theta is None else theta.tolist(),
            "actuation": list(getattr(layout, "actuation", ())),  # issue 9 item 2: gain/offset in θ
        },
        "physical": {n: float(x) for n, x in zip(layout.names, p, strict=True)},
        "sg_filter": dict(sg_filter or {}),
        "training_log": training_log,
    }


def load_model(model_dir_or_file: str | os.PathLike) -> dict:
    """Read an identify output's ``model.json`` (a directory or the file itself); ValueError if unusable."""
    path = Path(model_dir_or_file)
    if path.is_dir():
        path = path / "model.json"
    if not path.is_file():
        raise ValueError(f"{path}: not found (give the directory written by 'fg-sysid identify')")
    try:
        spec = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: cannot read model: {e}") from None
    if not isinstance(spec, dict) or spec.get("format") != MODEL_FORMAT:
        raise ValueError(f"{path}: not an fg-sysid model file (format {MODEL_FORMAT!r} expected)")
    for key in ("robot", "layout", "physical"):
        if key not in spec:
            raise ValueError(f"{path}: model file lacks {key!r}")
    return spec


def robot_from_model(spec: dict) -> RobotModel:
    """Rebuild the identified robot: load its source, lock the same joints at the same values."""
    r = spec["robot"]
    try:
        base = load_robot(r["source"])
    except FileNotFoundError as e:
        raise RobotError(str(e)) from None
    extra = {j: v for j, v in (r.get("locked_joints") or {}).items() if j not in base.locked_joints}
    robot = base.lock(extra) if extra else base
    if list(robot.joint_names) != list(r["joints"]):
        raise RobotError(f"robot {r['source']!r} rebuilt from the model has joints "
                         f"{list(robot.joint_names)}, "
                         f"the model was identified for {r['joints']}")
    return robot


# ---------------------------------------------------------------------------------------------- prediction
def _physical_vector(spec: dict) -> np.ndarray:
    names = spec["layout"]["names"]
    try:
        return np.array([spec["physical"][n] for n in names], float)
    except KeyError as e:
        raise ValueError(f"model has no physical value for parameter {e.args[0]!r}") from None


def predict_efforts(model, robot: RobotModel, q: np.ndarray, v: np.ndarray, a: np.ndarray,
                    velocity_scale: float | None = None) -> np.ndarray:
    """Joint efforts (N, n_joints) [N·m | N] the identified model predicts at (q, v, a) (N, n_joints).

    ``model``: an identify output directory / ``model.json`` path, a ``model.json`` dict, an
    `IdentificationResult`, a `BaselineResult` (``velocity_scale`` then defaults to 0.05 rad/s), or a
    plain physical parameter vector in the baseline's layout (inertial, (fc, fv) per joint, armature).
    Coulomb–viscous models use the physical vector with RNEA (`predict_torque`; any values, consistent or
    not); other friction models and models with an actuation block (effort gain/offset, issue 9 item 2:
    efforts then as the sensors log them, gain·τ + offset) go through `InverseDynamicsResidual` with the
    stored θ.
    """
    from .estimation.baseline import BaselineResult, _configurations, predict_torque
    from .estimation.result import IdentificationResult

    q = np.atleast_2d(np.asarray(q, float))
    v = np.atleast_2d(np.asarray(v, float))
    a = np.atleast_2d(np.asarray(a, float))
    if isinstance(model, IdentificationResult):
        layout = model.layout
        if layout.friction.name == "coulomb-viscous" and not layout.n_actuation:
            return predict_torque(robot, model.estimate, q, v, a, layout.friction.velocity_scale)
        return _predict_layout(layout, np.asarray(model.theta, float), robot, q, v, a, _configurations)
    vs_given = 0.05 if velocity_scale is None else float(velocity_scale)
    if isinstance(model, BaselineResult):
        return predict_torque(robot, model.estimate, q, v, a, vs_given)
    if isinstance(model, np.ndarray):
        return predict_torque(robot, model, q, v, a, vs_given)
    spec = model if isinstance(model, dict) else load_model(model)
    lay = spec["layout"]
    if list(spec["robot"]["joints"]) != list(robot.joint_names):
        raise ValueError(f"model joints {spec['robot']['joints']} differ from robot joints "
                         f"{list(robot.joint_names)}")
    p = _physical_vector(spec)
    vs = lay.get("friction_velocity_scale") or 0.05
    actuation = tuple(lay.get("actuation") or ())  # issue 9 item 2: logged = gain·τ + offset
    if lay["friction_model"] == "coulomb-viscous" and not actuation:
        return predict_torque(robot, p, q, v, a, float(vs))
    from .layout import ParameterLayout

    layout = ParameterLayout.create(robot, lay["inertia_parameterization"], lay["friction_model"], float(vs),
                                    actuation=actuation)
    theta = np.asarray(lay["theta"], float) if lay.get("theta") is not None else layout.to_theta(p)
    return _predict_layout(layout, theta, robot, q, v, a, _configurations)


def _predict_layout(layout, theta, robot, q, v, a, configurations):
    from .factors.inverse_dynamics import InverseDynamicsResidual

    iv = robot.joint_index_v()
    Q = configurations(robot, q)
    V = np.zeros((q.shape[0], robot.nv))
    A = np.zeros((q.shape[0], robot.nv))
    V[:, iv] = v
    A[:, iv] = a
    return InverseDynamicsResidual(layout).predict(Q, V, A, theta)[:, iv]


def nominal_model(robot: RobotModel) -> np.ndarray:
    """The URDF's own parameter vector (baseline layout): inertias, friction/damping as (fc, fv),
    the model's armature — the model a user has before identifying anything."""
    from .estimation.baseline import nominal_parameters

    return nominal_parameters(robot)


__all__ = [
    "DEFAULT_SG_POLYORDER", "DEFAULT_SG_WINDOW_S", "heldout_accelerations", "load_model", "model_spec",
    "nominal_model", "predict_efforts", "relative_rmse", "relative_rmse_per_joint", "robot_from_model",
]
