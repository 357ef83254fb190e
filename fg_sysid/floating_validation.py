"""Held-out prediction for floating-base (free-flyer) robots: ``fg-sysid predict`` on a legged log.

See ``docs/floating-prediction.md``. Notation per sample k: Pinocchio full state ``(q, v, a)`` (nq, nv, nv),
``S`` (nv, n_joints) the selection putting joint efforts on the actuated rows (zeros on the 6 base rows),
``ID(q, v, a; p) = M(q) a + h(q, v) + S (armature a_j + fc tanh(v_j / vs) + fv v_j)`` the full
generalized force of the model ``p`` *without* contacts (nv), and for a contact frame f with world force
``f_f`` applied at the contact point ``c_f = o_f − r ẑ_world`` (``o_f`` the frame origin, ``r`` the
contact radius: a spherical foot of radius r centred at the foot frame touches the ground r below it)

    J_f = J_lin,f − [c_f − o_f]_× J_ang,f           (LOCAL_WORLD_ALIGNED frame Jacobian, shifted to c_f)
    J_fᵀ f_f = J_lin,fᵀ f_f + J_ang,fᵀ ((c_f − o_f) × f_f).

* `floating_states` — ``(rows, q, v, a)`` of a log: base pose (``base.pos.*``, ``base.quat.*``) and joint
  angles assembled into Pinocchio configurations (`floating_smoother.full_configuration`), then
  Savitzky–Golay smoothing and differentiation *on the configuration manifold*
  (`floating_baseline.manifold_sg_states`) for everything, joints included (the logged joint velocities
  are not used: one filter for all coordinates keeps base and joint states consistent). The first and
  last half-window samples are dropped (``rows`` are the indices kept).
* `floating_inverse_dynamics` — ``ID(q, v, a; p)`` (N, nv) of a model (model.json dict / directory,
  identification result, or a plain physical parameter vector in the baseline layout).
* `contact_generalized_forces` — ``Σ_f J_fᵀ f_f`` (N, nv) of measured world contact forces.
* `predict_floating_efforts` — joint efforts ``Sᵀ (ID − Σ_f J_fᵀ f_f)`` (N, n_joints).
* `contact_consistent_error` — without contact forces: the effort error in the contact-consistent
  subspace (null space of the stance-contact Jacobian), where the unknown contact forces vanish.
* `floating_heldout_report` — the held-out errors of a model on a log, in whichever mode the log allows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from .datasets.log import Log
from .robots import RobotModel
from .validation import (
    _physical_vector,
    load_model,
    relative_rmse,
    relative_rmse_per_joint,
    sg_settings,
)

#: relative singular-value threshold of the stacked contact Jacobian's rank (as `contact_null_space`)
JC_RANK_RTOL = 1e-9
#: default tanh velocity scale [rad/s] of Coulomb friction when the model does not give one
DEFAULT_VELOCITY_SCALE = 0.05
#: names of the 6 free-flyer velocity coordinates (Pinocchio: base-frame linear, then angular)
BASE_COORDINATES = ("base.vx", "base.vy", "base.vz", "base.wx", "base.wy", "base.wz")
MODES = ("forces", "contact-consistent")


def _check_floating(robot: RobotModel) -> None:
    if not robot.floating_base or robot.model.nq != robot.model.nv + 1:
        raise ValueError(f"robot {robot.name!r} is not a free-flyer robot (floating-base prediction)")


def coordinate_names(robot: RobotModel) -> list[str]:
    """Names of the nv generalized coordinates in velocity order: `BASE_COORDINATES`, then the joints."""
    names = list(BASE_COORDINATES)
    order = np.argsort(robot.joint_index_v())
    names += [robot.joint_names[i] for i in order]
    return names


# ---------------------------------------------------------------------------------------------- states
def floating_states(
    log: Log,
    robot: RobotModel,
    window_s: float | None = None,
    polyorder: int | None = None,
    return_info: bool = False,
):
    """``(rows, q, v, a)``: Pinocchio full states of the log's samples ``rows`` (``+ (info,)`` with
    ``return_info``).

    ``q`` (n_rows, nq) smoothed configurations, ``v``/``a`` (n_rows, nv) by SG differentiation on the
    manifold of the whole configuration (base pose and joints; logged joint velocities are not used).
    ``window_s`` defaults to `validation.DEFAULT_SG_WINDOW_S` (50 ms), ``polyorder`` to 3. The clock must
    be uniform (steps within 1 % of the median). ValueError when the base pose is missing (naming the
    columns), the robot is not a free flyer, or the log is too short for the window. ``info``: window
    (samples, seconds), order, dt, velocity source.
    """

    from .estimation.floating_baseline import _odd_window, manifold_sg_states
    from .estimation.floating_smoother import full_configuration

    _check_floating(robot)
    missing = []
    if log.base_pos is None:
        missing += ["base.pos.x", "base.pos.y", "base.pos.z"]
    if log.base_quat is None:
        missing += ["base.quat.w", "base.quat.x", "base.quat.y", "base.quat.z"]
    if missing:
        raise ValueError(
            f"log {log.source!r} has no base pose (missing columns {', '.join(missing)}): "
            f"floating-base prediction of robot {robot.name!r} needs it"
        )
    window_s, polyorder = sg_settings(window_s, polyorder)
    t = np.asarray(log.t, float)
    dts = np.diff(t)
    dt = float(np.median(dts))
    if not np.all(np.abs(dts - dt) <= 0.01 * dt):
        raise ValueError(
            f"log {log.source!r}: the clock is not uniform (steps from {dts.min():.4g} to "
            f"{dts.max():.4g} s); resample it first"
        )
    w = _odd_window(window_s, dt, polyorder, t.size)
    q_full = full_configuration(log, robot)
    rows, q, v, a = manifold_sg_states(robot.model, q_full, dt, w, polyorder)
    info = {
        "window": int(w),
        "window_s": float(w * dt),
        "polyorder": polyorder,
        "dt": dt,
        "velocity": "SG first derivative on the configuration manifold",
    }
    return (rows, q, v, a, info) if return_info else (rows, q, v, a)


# ---------------------------------------------------------------------------------------------- dynamics
def _physical_id(robot: RobotModel, p: np.ndarray, q, v, a, vs: float) -> np.ndarray:
    n, nb10 = robot.n_joints, 10 * robot.n_bodies
    p = np.asarray(p, float).ravel()
    if p.size != nb10 + 3 * n:
        raise ValueError(
            f"parameter vector has {p.size} entries; robot {robot.name!r} needs {nb10 + 3 * n} "
            "(inertial per body incl. the base, (fc, fv) per joint, armature per joint)"
        )
    model = robot.pinocchio_model_with(p[:nb10].reshape(robot.n_bodies, 10))
    model.armature[:] = 0.0  # added explicitly below (Pinocchio >= 3 would add its own inside rnea)
    data = model.createData()
    out = np.empty((q.shape[0], robot.nv))
    for k in range(q.shape[0]):
        out[k] = pin.rnea(model, data, q[k], v[k], a[k])
    iv = robot.joint_index_v()
    fc, fv, arm = p[nb10 : nb10 + 2 * n : 2], p[nb10 + 1 : nb10 + 2 * n : 2], p[nb10 + 2 * n :]
    vj, aj = v[:, iv], a[:, iv]
    out[:, iv] += arm * aj + fc * np.tanh(vj / vs) + fv * vj
    return out


def _layout_id(layout, theta, q, v, a) -> np.ndarray:
    from .factors.inverse_dynamics import InverseDynamicsResidual

    return InverseDynamicsResidual(layout).predict(q, v, a, np.asarray(theta, float))


def floating_inverse_dynamics(
    model, robot: RobotModel, q: np.ndarray, v: np.ndarray, a: np.ndarray, velocity_scale: float | None = None
) -> np.ndarray:
    """``ID(q, v, a; p)`` (N, nv): full generalized forces of the model without contacts [N | N·m].

    ``q`` (N, nq), ``v``/``a`` (N, nv) Pinocchio full states. ``model`` as for `validation.predict_efforts`:
    an identify output directory / ``model.json`` path or dict, an `IdentificationResult`, a result
    with ``estimate`` (baseline / floating baseline), or a plain physical parameter vector in the baseline
    layout (`baseline.parameter_names`: inertial per body incl. the base, (fc, fv) per joint, armature
    per joint). Coulomb–viscous models use the physical vector with RNEA plus
    ``armature·a + fc·tanh(v/vs) + fv·v`` on the joint rows (``vs``: the model's
    ``friction_velocity_scale``, else ``velocity_scale``, else 0.05 rad/s); other friction models go
    through `InverseDynamicsResidual` with the stored θ.
    """
    from .estimation.result import IdentificationResult

    _check_floating(robot)
    q = np.atleast_2d(np.asarray(q, float))
    v = np.atleast_2d(np.asarray(v, float))
    a = np.atleast_2d(np.asarray(a, float))
    if (
        q.shape[1] != robot.nq
        or v.shape[1] != robot.nv
        or a.shape[1] != robot.nv
        or not (q.shape[0] == v.shape[0] == a.shape[0])
    ):
        raise ValueError(
            f"q (N, {robot.nq}), v and a (N, {robot.nv}) expected; got {q.shape}, {v.shape}, {a.shape}"
        )
    vs_given = DEFAULT_VELOCITY_SCALE if velocity_scale is None else float(velocity_scale)
    if isinstance(model, IdentificationResult):
        layout = model.layout
        if layout.friction.name == "coulomb-viscous":
            return _physical_id(robot, model.estimate, q, v, a, float(layout.friction.velocity_scale))
        return _layout_id(layout, model.theta, q, v, a)
    if isinstance(model, np.ndarray | list | tuple):
        return _physical_id(robot, np.asarray(model, float), q, v, a, vs_given)
    if not isinstance(model, dict | str) and hasattr(model, "estimate"):
        return _physical_id(robot, model.estimate, q, v, a, vs_given)
    spec = model if isinstance(model, dict) else load_model(model)
    lay = spec["layout"]
    if list(spec["robot"]["joints"]) != list(robot.joint_names):
        raise ValueError(
            f"model joints {spec['robot']['joints']} differ from robot joints {list(robot.joint_names)}"
        )
    p = _physical_vector(spec)
    vs = float(lay.get("friction_velocity_scale") or vs_given)
    if lay["friction_model"] == "coulomb-viscous":
        return _physical_id(robot, p, q, v, a, vs)
    from .layout import ParameterLayout

    layout = ParameterLayout.create(robot, lay["inertia_parameterization"], lay["friction_model"], vs)
    theta = np.asarray(lay["theta"], float) if lay.get("theta") is not None else layout.to_theta(p)
    return _layout_id(layout, theta, q, v, a)


def _frame_ids(robot: RobotModel, frame_names) -> list[int]:
    ids = []
    for f in frame_names:
        if not robot.model.existFrame(f):
            raise ValueError(f"contact frame {f!r} is not a frame of robot {robot.name!r}")
        ids.append(robot.model.getFrameId(f))
    return ids


def _contact_jacobians(
    model: pin.Model, data: pin.Data, q: np.ndarray, fids: list[int], radius: float
) -> list[np.ndarray]:
    """Per frame, the 3 x nv world-aligned linear Jacobian of the contact point ``o_f − radius ẑ``."""
    pin.computeJointJacobians(model, data, q)
    pin.updateFramePlacements(model, data)
    d = np.array([0.0, 0.0, -float(radius)])
    dx = np.array([[0.0, -d[2], d[1]], [d[2], 0.0, -d[0]], [-d[1], d[0], 0.0]])
    out = []
    for f in fids:
        J = pin.getFrameJacobian(model, data, f, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)
        out.append(J[:3] - dx @ J[3:] if radius else J[:3].copy())
    return out


def contact_generalized_forces(
    robot: RobotModel, q: np.ndarray, forces_world, frame_names, contact_radius: float = 0.0
) -> np.ndarray:
    """``Σ_f J_fᵀ f_f`` (N, nv): generalized forces of world point forces at the contact points.

    ``forces_world``: (N, n_frames, 3) array or a list/tuple of (N, 3) arrays in ``frame_names`` order
    (force of the ground on the foot, world axes); applied at ``o_f − contact_radius·ẑ_world``.
    """
    q = np.atleast_2d(np.asarray(q, float))
    frame_names = list(frame_names)
    if not frame_names:
        return np.zeros((q.shape[0], robot.nv))
    F = np.asarray(forces_world, float)
    if isinstance(forces_world, list | tuple):
        F = np.stack([np.asarray(x, float) for x in forces_world], axis=1)
    if F.shape != (q.shape[0], len(frame_names), 3):
        raise ValueError(f"forces must be (N={q.shape[0]}, {len(frame_names)}, 3), got {F.shape}")
    if not np.all(np.isfinite(F)):
        raise ValueError("contact forces must be finite (all-NaN = not measured is not allowed here)")
    model = robot.model
    data = model.createData()
    fids = _frame_ids(robot, frame_names)
    out = np.zeros((q.shape[0], robot.nv))
    for k in range(q.shape[0]):
        for J, f in zip(_contact_jacobians(model, data, q[k], fids, contact_radius), F[k], strict=True):
            out[k] += J.T @ f
    return out


def predict_floating_efforts(
    model,
    robot: RobotModel,
    q: np.ndarray,
    v: np.ndarray,
    a: np.ndarray,
    forces_world=None,
    frame_names=(),
    contact_radius: float = 0.0,
    velocity_scale: float | None = None,
    full: bool = False,
) -> np.ndarray:
    """Joint efforts (N, n_joints) ``Sᵀ [ID(q, v, a; p) − Σ_f J_fᵀ f_f]`` [N·m | N].

    ``model``: see `floating_inverse_dynamics`; ``forces_world``/``frame_names``/``contact_radius``: see
    `contact_generalized_forces` (None = no contact forces). ``full=True`` returns all nv rows instead:
    the 6 base rows are then the base wrench the model and forces leave unexplained (0 for a perfect
    model, states and forces).
    """
    G = floating_inverse_dynamics(model, robot, q, v, a, velocity_scale)
    if forces_world is not None and len(list(frame_names)):
        G = G - contact_generalized_forces(robot, q, forces_world, frame_names, contact_radius)
    return G if full else G[:, robot.joint_index_v()]


# ---------------------------------------------------------------------------------------------- projection
@dataclass(frozen=True)
class ContactConsistentError:
    """Result of `contact_consistent_error` (n samples, nv coordinates in `coordinate_names` order).

    Attributes:
        relative_error: ``sqrt(Σ_k ‖N_kᵀ r_k‖²) / sqrt(Σ_k ‖N_kᵀ S τ̂_k‖²)``.
        residual: (n, nv) ``P_k r_k`` with ``P_k = N_k N_kᵀ`` (so ``‖P_k r_k‖ = ‖N_kᵀ r_k‖``).
        reference: (n, nv) ``P_k S τ̂_k``.
        per_coordinate: (nv,) ``sqrt(Σ_k residual[k, i]²) / sqrt(Σ_k reference[k, i]²)``.
        rank: (n,) rank of the stacked stance-contact Jacobian; n_stance: (n,) feet in stance.
    """

    relative_error: float
    residual: np.ndarray
    reference: np.ndarray
    per_coordinate: np.ndarray
    rank: np.ndarray
    n_stance: np.ndarray


def contact_null_spaces(robot: RobotModel, q: np.ndarray, contact, frame_names, contact_radius: float = 0.0):
    """Per sample, ``(N_k, rank_k)``: orthonormal basis of the null space of the stacked stance-contact
    Jacobian (contact points ``o_f − contact_radius·ẑ``), ``N_kᵀ J_c,kᵀ = 0``. ``contact`` (n, n_frames)
    bool. With radius 0 this is `floating_baseline.contact_null_space`."""
    q = np.atleast_2d(np.asarray(q, float))
    C = np.asarray(contact, bool).reshape(q.shape[0], -1)
    fids = _frame_ids(robot, frame_names)
    if C.shape[1] != len(fids):
        raise ValueError(f"contact flags have {C.shape[1]} columns, {len(fids)} frames given")
    model = robot.model
    data = model.createData()
    out = []
    for k in range(q.shape[0]):
        sel = [f for f, c in zip(fids, C[k], strict=True) if c]
        if not sel:
            out.append((np.eye(model.nv), 0))
            continue
        Jc = np.vstack(_contact_jacobians(model, data, q[k], sel, contact_radius))
        _, s, Vt = np.linalg.svd(Jc, full_matrices=True)
        r = int(np.sum(s > JC_RANK_RTOL * max(s[0], 1e-300)))
        out.append((Vt[r:].T.copy(), r))
    return out


def contact_consistent_error(
    id_full: np.ndarray,
    tau_joints: np.ndarray,
    robot: RobotModel,
    q: np.ndarray,
    contact,
    frame_names,
    contact_radius: float = 0.0,
) -> ContactConsistentError:
    """Effort error of a model in the contact-consistent subspace (no contact forces needed).

    Per sample k: measured generalized forces ``S τ̂_k = [0_6; τ̂_joints]``, model ``ID_k`` =
    ``id_full[k]`` (`floating_inverse_dynamics`, no contacts), residual ``r_k = S τ̂_k − ID_k`` and
    ``N_k`` an orthonormal basis of the null space of the stacked Jacobian ``J_c,k`` of the feet in stance
    at sample k (`contact_null_spaces`). The true dynamics ``ID = S τ + J_cᵀ f`` give
    ``N_kᵀ r_k = N_kᵀ S (τ̂ − τ)``: the unknown contact forces drop out (any ``J_cᵀ λ`` added to either
    side leaves the error unchanged). Returns the relative error

        e = sqrt(Σ_k ‖N_kᵀ (S τ̂_k − ID_k)‖²) / sqrt(Σ_k ‖N_kᵀ S τ̂_k‖²)

    and the per-sample projected residuals ``N_k N_kᵀ r_k`` (nv coordinates, `coordinate_names`).
    Samples with nv − rank = 0 contribute nothing. ``tau_joints`` (n, n_joints) must be fully measured.
    """
    id_full = np.atleast_2d(np.asarray(id_full, float))
    tau = np.atleast_2d(np.asarray(tau_joints, float))
    n = id_full.shape[0]
    if id_full.shape != (n, robot.nv) or tau.shape != (n, robot.n_joints):
        raise ValueError(
            f"id_full (n, {robot.nv}) and tau_joints (n, {robot.n_joints}) expected, got "
            f"{id_full.shape} and {tau.shape}"
        )
    bad = [j for j, m in zip(robot.joint_names, np.all(np.isfinite(tau), axis=0), strict=True) if not m]
    if bad:
        raise ValueError(f"the contact-consistent error needs every joint's effort; not measured: {bad}")
    Stau = np.zeros((n, robot.nv))
    Stau[:, robot.joint_index_v()] = tau
    r = Stau - id_full
    res = np.empty_like(r)
    ref = np.empty_like(r)
    C = np.asarray(contact, bool).reshape(n, -1)
    ranks = np.empty(n, int)
    for k, (Nk, rk) in enumerate(contact_null_spaces(robot, q, C, frame_names, contact_radius)):
        res[k] = Nk @ (Nk.T @ r[k])
        ref[k] = Nk @ (Nk.T @ Stau[k])
        ranks[k] = rk
    den = float(np.sqrt(np.sum(ref**2)))
    if den == 0.0:
        raise ValueError("the measured efforts have no component in the contact-consistent subspace")
    with np.errstate(invalid="ignore", divide="ignore"):
        per = np.sqrt(np.sum(res**2, axis=0)) / np.sqrt(np.sum(ref**2, axis=0))
    return ContactConsistentError(
        relative_error=float(np.sqrt(np.sum(res**2)) / den),
        residual=res,
        reference=ref,
        per_coordinate=per,
        rank=ranks,
        n_stance=C.sum(axis=1).astype(int),
    )


# ---------------------------------------------------------------------------------------------- report
def _contact_frames(log: Log, contact_frames) -> list[str]:
    if contact_frames:
        return list(contact_frames)
    frames = list(log.contacts) or list(log.forces)
    if not frames:
        raise ValueError(
            f"log {log.source!r} has no contact.<frame> or force.<frame>.* columns and the model "
            "names no contact_frames: cannot tell which feet touch the ground"
        )
    return frames


def _measured_force(log: Log, frame: str) -> np.ndarray | None:
    F = log.forces.get(frame)
    if F is None:
        return None
    F = np.asarray(F, float)
    return F if np.all(np.isfinite(F)) else None


def floating_heldout_report(
    model,
    robot: RobotModel,
    log: Log,
    window_s: float | None = None,
    polyorder: int | None = None,
    contact_frames=None,
    contact_radius: float | None = None,
    velocity_scale: float | None = None,
    mode: str | None = None,
) -> dict:
    """Held-out prediction of a floating-base model on ``log`` and its errors.

    ``model``: see `floating_inverse_dynamics` (a model.json dict / directory supplies ``contact_frames``,
    ``contact_radius`` and ``sg_filter`` defaults when the arguments are None). Contact frames default to
    the model's, else the log's ``contact.<frame>`` (else ``force.<frame>``) columns.

    Mode (``mode=None``: automatic): ``"forces"`` when every stance foot (a frame with a stance flag in
    the used rows, or without flags) has fully measured ``force.<frame>.*``; then the predicted joint
    efforts use the measured forces and the errors are `relative_rmse` against the measured efforts
    (per joint and overall; requires measured efforts only for the errors). Otherwise
    ``"contact-consistent"`` (`contact_consistent_error`; needs the contact flags and every effort).

    Returns a dict: ``mode``, ``t``/``rows`` (samples used: the SG half-window is dropped at both ends),
    ``n_samples``, ``frames``, ``contact_radius``, ``filter``, ``joints``, ``tau`` (forces mode:
    predicted efforts, else None), ``per_joint`` ({joint: relative error}), ``overall``, ``base_wrench_rms``
    (forces mode: RMS of the unexplained base rows [N | N·m]), ``projection`` (contact-consistent mode:
    the `ContactConsistentError`).
    """
    if mode is not None and mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    spec = None
    if isinstance(model, dict):
        spec = model
    elif isinstance(model, str) or hasattr(model, "__fspath__"):
        spec = load_model(model)
        model = spec
    if spec is not None:
        filt = spec.get("sg_filter") or {}
        window_s = window_s if window_s is not None else filt.get("window_s")
        polyorder = polyorder if polyorder is not None else filt.get("polyorder")
        contact_frames = contact_frames if contact_frames is not None else spec.get("contact_frames")
        if contact_radius is None:
            contact_radius = spec.get("contact_radius")
    radius = 0.0 if contact_radius is None else float(contact_radius)
    if not np.isfinite(radius) or radius < 0:
        raise ValueError(f"contact radius must be >= 0 [m], got {contact_radius}")
    frames = _contact_frames(log, contact_frames)
    _frame_ids(robot, frames)
    rows, q, v, a, info = floating_states(log, robot, window_s, polyorder, return_info=True)

    flags = {f: np.asarray(log.contacts[f], bool)[rows] for f in frames if f in log.contacts}
    stance = [f for f in frames if f not in flags or flags[f].any()]
    forces = {f: F[rows] for f in frames if (F := _measured_force(log, f)) is not None}
    auto = "forces" if all(f in forces for f in stance) else "contact-consistent"
    mode = mode or auto
    if mode == "forces" and auto != "forces":
        raise ValueError(
            f"log {log.source!r} lacks measured force.<frame>.x|y|z for stance foot/feet "
            f"{[f for f in stance if f not in forces]}"
        )
    tau_meas = np.asarray(log.tau, float)[rows]
    G = floating_inverse_dynamics(model, robot, q, v, a, velocity_scale)
    iv = robot.joint_index_v()
    out = {
        "mode": mode,
        "rows": rows,
        "t": np.asarray(log.t, float)[rows],
        "n_samples": int(rows.size),
        "frames": frames,
        "contact_radius": radius,
        "filter": info,
        "joints": list(robot.joint_names),
        "tau": None,
        "per_joint": {},
        "overall": float("nan"),
        "base_wrench_rms": float("nan"),
        "projection": None,
    }
    if mode == "forces":
        fr = list(forces)
        Gc = G - contact_generalized_forces(robot, q, [forces[f] for f in fr], fr, radius)
        tau = Gc[:, iv]
        out["tau"] = tau
        out["base_wrench_rms"] = float(np.sqrt(np.mean(np.delete(Gc, iv, axis=1) ** 2)))
        measured = ~np.all(np.isnan(tau_meas), axis=0)
        if measured.any():
            per = relative_rmse_per_joint(tau, tau_meas)
            out["per_joint"] = {j: float(x) for j, x in zip(robot.joint_names, per, strict=True)}
            out["overall"] = float(relative_rmse(tau, tau_meas))
        return out
    missing_tau = [
        j for j, m in zip(robot.joint_names, np.all(np.isfinite(tau_meas), axis=0), strict=True) if not m
    ]
    if missing_tau:
        raise ValueError(
            f"log {log.source!r} has no measured force.<frame>.x|y|z for stance foot/feet "
            f"{[f for f in stance if f not in forces]} and no measured efforts for {missing_tau}: "
            "the contact-consistent error needs every joint's effort"
        )
    no_flags = [f for f in frames if f not in log.contacts]
    if no_flags:
        raise ValueError(
            f"log {log.source!r} has neither contact.<frame> flags nor measured "
            f"force.<frame>.x|y|z for {no_flags}: no contact-consistent error possible"
        )
    C = np.stack([flags[f] for f in frames], axis=1)
    proj = contact_consistent_error(G, tau_meas, robot, q, C, frames, radius)
    names = coordinate_names(robot)
    out["projection"] = proj
    by_name = dict(zip(names, proj.per_coordinate, strict=True))
    out["per_joint"] = {j: float(by_name[j]) for j in robot.joint_names}
    out["overall"] = proj.relative_error
    return out


__all__ = [
    "BASE_COORDINATES",
    "ContactConsistentError",
    "MODES",
    "contact_consistent_error",
    "contact_generalized_forces",
    "contact_null_spaces",
    "coordinate_names",
    "floating_heldout_report",
    "floating_inverse_dynamics",
    "floating_states",
    "predict_floating_efforts",
]
