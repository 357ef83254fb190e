"""The Savitzky–Golay filter of a held-out log, chosen on *that* log (issue 9, session 8).

A log carries no accelerations: the held-out prediction path (`prediction.heldout_report`, ``fg-sysid
predict``) differentiates ``q`` twice with a Savitzky–Golay (SG) filter. The filter that suits a log
depends on *that log's* noise and motion. Until session 8 the path used the window the classical
baseline's blocked cross-validation (CV) had picked on the *training* log (model.json ``sg_filter``).
When the held-out log is cleaner than the training log — the benchmarks' noise-free held-out logs, or
a user who trains on a noisy log and validates on a good one — that window over-smooths the held-out
accelerations and sets a floor on the error that no parameter estimate can beat: the *true* robot
scored 0.53–0.65 % (1.31 % on the MuJoCo Z1) through it on 10 s noise-free logs (docs/benchmarks.md).

`log_sg_filter` applies **the same rule as** ``fg-sysid identify`` **to the log it is given**: the
blocked K-fold CV of `baseline.LeastSquaresSG` (windows ~5 ms .. ~200 ms and grown while it helps,
orders 3 and 4; the scored quantity is the classical regression's held-out effort error against the
*raw* efforts of the block, so that a noise-free log gets a short window and a noisy one a long window),
with the dead-band effort channels left out as identify does (`effort_quality.drop_deadband_channels`).
Only the chosen filter is used: the classical fit's parameters are discarded, and the model under test
plays no part in the choice, so the held-out score does not select its own filter. The rule needs the
log's measured efforts (the CV scores effort predictions); without them, and for floating-base or
closed-loop robots (no such baseline), `resolve_heldout_filter` falls back to the training window and
says so.
"""

from __future__ import annotations

import warnings

import numpy as np

from .datasets.log import Log
from .robots import RobotModel

__all__ = ["SOURCES", "log_sg_filter", "resolve_heldout_filter"]

#: where the held-out SG filter may come from: the held-out log's own CV, or the training log's
SOURCES = ("log", "training")


def log_sg_filter(log: Log, robot: RobotModel, polyorder: int | None = None,
                  velocity_scale: float = 0.05) -> dict:
    """The SG filter that the classical baseline's blocked CV picks on ``log`` (fixed-base open chain).

    ``polyorder``: restrict the CV to this order (default: orders 3 and 4, as identify). ``velocity_scale``
    [rad/s]: the classical regression's tanh width (identify's default 0.05). Returns ``{"window_s" [s],
    "window" [samples], "polyorder", "cv_score"}`` (cv_score: the CV's mean held-out RMS error, each joint
    relative to its RMS effort). Raises ValueError when the log has no measured effort, the robot is
    floating or has closed loops, or the log is too short for the CV.
    """
    from .estimation.baseline import LeastSquaresSG
    from .estimation.effort_quality import drop_deadband_channels

    if robot.floating_base or robot.loops:
        raise ValueError("the held-out log's own SG window needs a fixed-base open chain (the classical "
                         "baseline's CV)")
    log, _ = drop_deadband_channels(log)
    if not np.any(log.tau_measured):
        raise ValueError(f"log {log.source!r} has no measured effort: its SG window cannot be "
                         "cross-validated")
    orders = (3, 4) if polyorder is None else int(polyorder)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "largest admissible window" etc.: the choice is reported anyway
        res = LeastSquaresSG(velocity_scale=velocity_scale, polyorder=orders).fit(log, robot).result_
    f = res.filter
    best = min(e["score"] for e in f["cv"] if e["window"] == f["window"] and e["polyorder"] == f["polyorder"])
    return {"window_s": float(f["window_s"]), "window": int(f["window"]), "polyorder": int(f["polyorder"]),
            "cv_score": float(best)}


def resolve_heldout_filter(model, robot: RobotModel, log: Log, window_s: float | None = None,
                           polyorder: int | None = None, source: str = "training") -> tuple[
                               float | None, int | None, str]:
    """``(window_s, polyorder, chosen)``: the SG filter the held-out path uses on ``log``.

    An explicit ``window_s`` [s] wins (``chosen`` = ``"given"``). Else ``source`` = ``"log"``: the CV rule
    on ``log`` itself (`log_sg_filter`; ``polyorder`` restricts its orders), falling back to the training
    filter when the rule cannot run (no measured efforts, floating base, loops, too short a log: ``chosen``
    then says why); ``"training"``: model.json's ``sg_filter`` (None/None when the model has none: the
    caller's defaults, 50 ms cubic). ``model``: a model.json dict or anything `predict_efforts` takes.
    """
    if source not in SOURCES:
        raise ValueError(f"SG filter source must be one of {SOURCES}, got {source!r}")
    filt = (model.get("sg_filter") or {}) if isinstance(model, dict) else {}
    order = polyorder if polyorder is not None else filt.get("polyorder")
    if window_s is not None:
        return float(window_s), None if order is None else int(order), "given"
    if source == "log":
        try:
            f = log_sg_filter(log, robot, polyorder)
        except ValueError as e:
            chosen = f"training (the held-out log's own CV is unavailable: {e})"
        else:
            return f["window_s"], f["polyorder"], "held-out log (blocked CV of the classical fit)"
    else:
        chosen = "training"
    train = filt.get("window_s")
    if train is None:
        chosen += "; the model stores none: default"
    return (None if train is None else float(train)), (None if order is None else int(order)), chosen
