"""``fg-sysid predict``: the efforts an identified model predicts on another log (held-out validation)."""

from __future__ import annotations

import math
from pathlib import Path

import click
import numpy as np

from .common import fail, main


@main.command("predict")
@click.argument("model_dir", metavar="DIR", type=click.Path(file_okay=False))
@click.argument("log_path", metavar="LOG", type=click.Path(dir_okay=False))
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False),
              help="Output table, .csv or .parquet (by suffix; written atomically).")
@click.option("--sg-window", type=float, default=None,
              help="Savitzky-Golay window for the accelerations [s]; default: the window the training "
                   "log's cross-validation chose (model.json sg_filter), else 0.05 s.")
@click.option("--sg-order", type=int, default=None,
              help="Savitzky-Golay polynomial order (>= 2); default: the training one, else 3.")
def predict_cmd(model_dir, log_path, out, sg_window, sg_order):
    """Predict the joint efforts of LOG's motion with the model identified in DIR.

    DIR is an output directory of 'fg-sysid identify' (its model.json). LOG must carry q.<joint>
    for every joint of the identified model (columns of joints the model locked are allowed); its
    velocities are used when present, else the SG first derivative of q. Accelerations are the SG second
    derivative of q [rad/s²]: the SG window defaults to the one the classical baseline's blocked
    cross-validation picked on the *training* log (the best fixed filter for that robot's sensors),
    stored in model.json; --sg-window overrides it.

    Writes FILE (--out) with t [s] and tau.<joint> [N·m | N]. If LOG has measured efforts, prints the
    held-out relative RMSE sqrt(mean((pred-meas)²))/sqrt(mean(meas²)) per joint and overall (measurement
    noise included).
    """
    from ..datasets.io import SUPPORTED_SUFFIXES, LogError, read_log, write_frame
    from ..robots import RobotError
    from ..validation import (
        heldout_accelerations,
        load_model,
        predict_efforts,
        relative_rmse,
        relative_rmse_per_joint,
        robot_from_model,
    )

    if Path(out).suffix.lower() not in SUPPORTED_SUFFIXES:
        fail(f"--out {out}: unsupported output format {Path(out).suffix!r}; use one of {SUPPORTED_SUFFIXES}")
    if sg_window is not None and not (math.isfinite(sg_window) and sg_window > 0):
        fail(f"--sg-window must be a positive duration [s], got {sg_window}")
    if sg_order is not None and sg_order < 2:
        fail(f"--sg-order must be >= 2, got {sg_order}")
    if not Path(model_dir).is_dir():
        fail(f"{model_dir}: model directory not found (give the --out directory of 'fg-sysid identify')")
    try:
        spec = load_model(model_dir)
        robot = robot_from_model(spec)
        log = read_log(log_path, robot, locked_values=spec["robot"].get("locked_joints"))
        filt = spec.get("sg_filter") or {}
        window = sg_window if sg_window is not None else filt.get("window_s")
        order = sg_order if sg_order is not None else filt.get("polyorder")
        order = None if order is None else int(order)
        v, a, info = heldout_accelerations(log, window, order)
        tau = predict_efforts(spec, robot, log.q, v, a)
    except (LogError, RobotError, ValueError, FileNotFoundError) as e:
        fail(str(e))
    import pandas as pd

    cols = {"t": np.asarray(log.t, float)}
    for i, j in enumerate(robot.joint_names):
        cols[f"tau.{j}"] = tau[:, i]
    try:
        write_frame(pd.DataFrame(cols), out)
    except LogError as e:
        fail(str(e))
    click.echo(f"wrote {out}: {log.n_samples} samples, {robot.n_joints} joints "
               f"(model: {spec.get('method')}; accelerations: SG window {info['window_s'] * 1e3:.3g} ms "
               f"= {info['window']} samples, order {info['polyorder']}; velocities: {info['velocity']})")
    if np.any(log.tau_measured):
        meas = np.asarray(log.tau, float)
        per = relative_rmse_per_joint(tau, meas)
        click.echo("held-out relative RMSE (vs measured efforts, noise included):")
        for j, r in zip(robot.joint_names, per, strict=True):
            click.echo(f"  {j:<24s} {'not measured' if np.isnan(r) else f'{r:.4f}'}")
        click.echo(f"  {'overall':<24s} {relative_rmse(tau, meas):.4f}")
