"""One held-out prediction path for every identified model: `heldout_report`.

Fixed bases: states from the log (logged velocities or the SG first derivative; SG second derivative for
the accelerations, `validation.heldout_accelerations`), efforts from the model's inverse dynamics
(`validation.predict_efforts`), errors against the measured efforts. Floating bases add the contact
handling as an option of the same call (`floating_validation.floating_heldout_report`): efforts predicted
with the log's measured contact forces (mode ``"forces"``), or the effort error in the contact-consistent
subspace when the log has no forces (mode ``"contact-consistent"``).
"""

from __future__ import annotations

import numpy as np

from .datasets.log import Log
from .floating_validation import floating_heldout_report
from .robots import RobotModel
from .validation import heldout_accelerations, predict_efforts, relative_rmse, relative_rmse_per_joint

__all__ = ["heldout_report"]


def heldout_report(model, robot: RobotModel, log: Log, window_s: float | None = None,
                   polyorder: int | None = None, contact_radius: float | None = None,
                   contact_frames=None, mode: str | None = None, sg_source: str = "training") -> dict:
    """Predict ``log``'s efforts with ``model`` (a model.json dict / directory, a result or a physical
    vector) and their held-out errors.

    ``window_s`` [s] / ``polyorder``: the SG filter (default: the model's training filter, else 50 ms,
    order 3). ``sg_source="log"`` (fixed-base open chains; issue 9, session 8): without ``window_s``, the
    filter the classical baseline's blocked CV picks on ``log`` itself (`heldout_filter.log_sg_filter`:
    a clean log gets a short window, a noisy one a long one), the training filter when that cannot run;
    ``filter["chosen"]`` says which. Floating bases: ``contact_radius`` [m], ``contact_frames`` and
    ``mode`` (None: forces when the log has them) as in `floating_heldout_report`.

    Returns a dict with ``mode`` (``"efforts"`` for fixed bases, ``"forces"`` or
    ``"contact-consistent"``), ``t``, ``n_samples``, ``tau`` (predicted efforts (N, n_joints), None in
    contact-consistent mode), ``per_joint`` ({joint: relative RMSE}, empty without measured efforts),
    ``overall``, ``filter`` (the SG filter used), and the floating-base extras (``frames``,
    ``contact_radius``, ``base_wrench_rms``, ``projection``).
    """
    if robot.floating_base:
        rep = floating_heldout_report(model, robot, log, window_s=window_s, polyorder=polyorder,
                                      contact_frames=contact_frames, contact_radius=contact_radius,
                                      mode=mode)
        if sg_source == "log" and window_s is None:  # no classical CV for floating bases
            rep["filter"] = {**rep["filter"], "chosen": "training (no held-out CV rule for floating bases)"}
        return rep
    if mode not in (None, "efforts"):
        raise ValueError(f"mode {mode!r} applies to floating-base models only")
    from .heldout_filter import resolve_heldout_filter

    window, order, chosen = resolve_heldout_filter(model, robot, log, window_s, polyorder, sg_source)
    if robot.loops:  # closed loops (issue 11): unencoded joints from the closures, λ from the passive rows
        from .estimation.loop_terms import model_efforts, prepare_log
        from .validation import load_model

        log = prepare_log(robot, log, project_all=True)
        v, a, info = heldout_accelerations(log, window, None if order is None else int(order))
        tau = model_efforts(model if isinstance(model, dict) else load_model(model), robot, log.q, v, a)
    else:
        v, a, info = heldout_accelerations(log, window, None if order is None else int(order))
        tau = predict_efforts(model, robot, log.q, v, a)
    measured = bool(np.any(log.tau_measured))
    meas = np.asarray(log.tau, float)
    per = relative_rmse_per_joint(tau, meas) if measured else np.full(robot.n_joints, np.nan)
    return {
        "mode": "efforts",
        "t": np.asarray(log.t, float),
        "n_samples": int(log.n_samples),
        "tau": tau,
        "per_joint": dict(zip(robot.joint_names, per.tolist(), strict=True)) if measured else {},
        "overall": relative_rmse(tau, meas) if measured else None,
        "filter": {**info, "chosen": chosen},
    }
