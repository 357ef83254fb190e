"""``fg-sysid predict``: the efforts an identified model predicts on another log (held-out validation)."""

from __future__ import annotations

import math
from pathlib import Path

import click
import numpy as np

from .common import fail, main
from .data_options import bag_options, loader_kwargs


@main.command("predict")
@click.argument("model_dir", metavar="DIR", type=click.Path(file_okay=False))
@click.argument("log_path", metavar="LOG", type=click.Path())  # a table file or a rosbag2 directory
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False),
              help="Output table, .csv or .parquet (by suffix; written atomically).")
@click.option("--sg-window", type=float, default=None,
              help="Savitzky-Golay window for the accelerations [s]; default: see --sg-window-from.")
@click.option("--sg-window-from", "sg_from", type=click.Choice(["log", "training"]), default="log",
              show_default=True,
              help="Without --sg-window: 'log' = the window the classical baseline's blocked "
                   "cross-validation picks on LOG itself (as identify does on its log: suits LOG's noise; "
                   "needs LOG's efforts, fixed-base open chains, else the training window); 'training' = "
                   "the training log's window (model.json sg_filter), else 0.05 s.")
@click.option("--sg-order", type=int, default=None,
              help="Savitzky-Golay polynomial order (>= 2); default: the one chosen with the window, else 3.")
@click.option("--contact-radius", type=float, default=None,
              help="Floating-base robots: contact forces act this far [m] below the foot frame origin "
                   "(spherical feet); default: model.json contact_radius, else 0.")
@bag_options  # LOG may be a ROS bag, read as by 'fg-sysid identify'
def predict_cmd(model_dir, log_path, out, sg_window, sg_from, sg_order, contact_radius):
    """Predict the joint efforts of LOG's motion with the model identified in DIR.

    DIR is an output directory of 'fg-sysid identify' (its model.json). LOG is a CSV/Parquet table or a
    ROS bag (the --joint-states-topic ... options as for identify); it must carry q.<joint>
    for every joint of the identified model (columns of joints the model locked are allowed); its
    velocities are used when present, else the SG first derivative of q. Accelerations are the SG second
    derivative of q [rad/s²]. The SG window is, by default, the one the classical baseline's blocked
    cross-validation picks on LOG itself (the rule identify applies to its training log), so that a clean
    log is differentiated with a short window and a noisy one with a long one (docs/out-of-class.md);
    when LOG has no efforts (or for floating-base and closed-loop models) it is the training log's window
    stored in model.json. --sg-window-from training forces the training window, --sg-window a given one;
    the window used is printed.

    Writes FILE (--out) with t [s] and tau.<joint> [N·m | N]. If LOG has measured efforts, prints the
    held-out relative RMSE sqrt(mean((pred-meas)²))/sqrt(mean(meas²)) per joint and overall (measurement
    noise included).

    Floating-base (free-flyer) models (see docs/floating-prediction.md): LOG must carry the base pose
    (base.pos.*, base.quat.*); states come from SG differentiation of the whole configuration on its
    manifold (the half-window at both ends is dropped). When LOG has force.<frame>.x|y|z for every stance
    foot (the model's contact_frames, else the log's contact.<frame> columns), FILE holds t and the
    predicted tau.<joint> (model inverse dynamics minus the contact forces' generalized forces) and the
    per-joint held-out relative RMSE is printed. Otherwise FILE holds the residual in the
    contact-consistent subspace (null space of the stance-contact Jacobian), proj_err.<coordinate>, and
    the contact-consistent relative error is printed.
    """
    import pandas as pd

    from ..datasets.io import SUPPORTED_SUFFIXES, LogError, read_log, write_frame
    from ..floating_validation import coordinate_names
    from ..prediction import heldout_report
    from ..robots import RobotError
    from ..validation import load_model, robot_from_model

    if Path(out).suffix.lower() not in SUPPORTED_SUFFIXES:
        fail(f"--out {out}: unsupported output format {Path(out).suffix!r}; use one of {SUPPORTED_SUFFIXES}")
    if sg_window is not None and not (math.isfinite(sg_window) and sg_window > 0):
        fail(f"--sg-window must be a positive duration [s], got {sg_window}")
    if sg_order is not None and sg_order < 2:
        fail(f"--sg-order must be >= 2, got {sg_order}")
    if not Path(model_dir).is_dir():
        fail(f"{model_dir}: model directory not found (give the --out directory of 'fg-sysid identify')")
    if contact_radius is not None and not (math.isfinite(contact_radius) and contact_radius >= 0):
        fail(f"--contact-radius must be >= 0 [m], got {contact_radius}")
    try:
        spec = load_model(model_dir)
        robot = robot_from_model(spec)
        log = read_log(log_path, robot, locked_values=spec["robot"].get("locked_joints"), **loader_kwargs())
        radius = contact_radius if contact_radius is not None else spec.get("contact_radius")
        rep = heldout_report(spec, robot, log, window_s=sg_window, polyorder=sg_order, contact_radius=radius,
                             sg_source=sg_from)
    except (LogError, RobotError, ValueError, FileNotFoundError) as e:
        fail(str(e))
    cols = {"t": rep["t"]}
    if rep["tau"] is not None:
        for i, j in enumerate(robot.joint_names):
            cols[f"tau.{j}"] = rep["tau"][:, i]
    else:
        proj = rep["projection"]
        cols["n_stance"] = proj.n_stance
        for i, c in enumerate(coordinate_names(robot)):
            cols[f"proj_err.{c}"] = proj.residual[:, i]
    try:
        write_frame(pd.DataFrame(cols), out)
    except LogError as e:
        fail(str(e))
    info = rep["filter"]
    sg = (f"window {info['window_s'] * 1e3:.3g} ms = {info['window']} samples, order {info['polyorder']}"
          + (f", chosen: {info['chosen']}" if info.get("chosen") else ""))
    if rep["mode"] == "efforts":
        click.echo(f"wrote {out}: {log.n_samples} samples, {robot.n_joints} joints (model: "
                   f"{spec.get('method')}; accelerations: SG {sg}; velocities: {info['velocity']})")
    else:
        click.echo(f"wrote {out}: {rep['n_samples']} of {log.n_samples} samples, {robot.n_joints} joints "
                   f"(model: {spec.get('method')}; floating base, mode: {rep['mode']}; contact frames "
                   f"{', '.join(rep['frames'])}, contact radius {rep['contact_radius']:g} m; states: SG on "
                   f"the configuration manifold, {sg})")
    if rep["mode"] == "contact-consistent":
        click.echo("contact-consistent relative error (mode: contact-consistent; no measured contact forces: "
                   "effort error in the null space of the stance-contact Jacobian):")
    elif not rep["per_joint"]:
        click.echo("no measured efforts in LOG: no held-out error")
        return
    else:
        click.echo("held-out relative RMSE (" + ("mode: forces; predicted with the measured contact forces, "
                                                 if rep["mode"] == "forces" else "")
                   + "vs measured efforts, noise included):")
    for j, r in rep["per_joint"].items():
        click.echo(f"  {j:<24s} {'not measured' if np.isnan(r) else f'{r:.4f}'}")
    click.echo(f"  {'overall':<24s} {rep['overall']:.4f}")
    if rep["mode"] == "forces":
        click.echo(f"  unexplained base wrench RMS: {rep['base_wrench_rms']:.4g} N|N·m")
