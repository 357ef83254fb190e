"""``fg-sysid identify``: physical parameters (and the smoothed trajectory) from a log."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import click
import numpy as np

from .common import atomic_output_dir, echo_err, fail, json_safe, main
from .data_options import (  # issue 14: ROS bags, degenerate-data checks
    allow_prior_option,
    annotate_summary,
    bag_options,
    loader_kwargs,
    run_data_checks,
    write_prior_answer,
)

METHODS = ("smoother", "ls-sg", "energy-ls")  # energy-ls: issue 12 hook
INERTIAS = ("log-cholesky", "exponential-eigenvalue", "raw")
FRICTIONS = ("coulomb-viscous", "stribeck6")


# ---------------------------------------------------------------------------------------------- library part
def load_inputs(log_path, robot_source):
    """(robot, log) with joints absent from the log locked; bad input -> `fail` (exit 2)."""
    from ..datasets.io import LogError, load_log_for_robot
    from ..robots import RobotError

    try:
        return load_log_for_robot(log_path, robot_source, **loader_kwargs())  # issue 14: ROS bag options
    except (LogError, RobotError, FileNotFoundError) as e:
        fail(str(e))


def run_identification(robot, log, method: str = "smoother", *, knot_stride: int = 1, sigma_q=None,
                       sigma_v=None, sigma_tau=None, inertia: str = "log-cholesky",
                       friction: str = "coulomb-viscous", friction_velocity_scale: float = 0.05,
                       max_iterations: int = 30, verbose: bool = True):
    """Run one estimator. Returns ``(result, sg_filter)``: an `IdentificationResult` (smoother) or a
    `BaselineResult` (ls-sg), and the SG filter {window_s, polyorder} chosen on this log (stored in
    model.json for held-out differentiation). Raises EstimationError / ValueError on failure."""
    if method == "smoother":
        from ..estimation.smoother import JointSmoother

        sm = JointSmoother(robot, inertia=inertia, friction=friction,
                           friction_velocity_scale=friction_velocity_scale, knot_stride=knot_stride,
                           sigma_q=sigma_q, sigma_v=sigma_v, sigma_tau=sigma_tau,
                           max_iterations=max_iterations, verbose=verbose).fit(log)
        return sm.result_, dict(sm.init_filter_)
    if method == "ls-sg":
        from ..estimation.baseline import LeastSquaresSG

        if friction != "coulomb-viscous":
            raise ValueError(f"--method ls-sg supports --friction coulomb-viscous only, not {friction!r}")
        res = LeastSquaresSG(velocity_scale=friction_velocity_scale).fit(log, robot).result_
        return res, {"window_s": float(res.filter["window_s"]), "polyorder": int(res.filter["polyorder"])}
    if method == "energy-ls":  # issue 12 hook: energy-regressor baseline (estimation/energy_baseline.py)
        from ..estimation.energy_baseline import run_energy_ls
        return run_energy_ls(robot, log, friction, friction_velocity_scale, verbose=verbose)
    raise ValueError(f"unknown method {method!r}; choices: {', '.join(METHODS)}")


def _baseline_table(res, robot):
    from ..estimation.baseline import nominal_parameters

    t = res.parameters_table()
    t["prior_mean"] = nominal_parameters(robot)
    t["prior_std"] = np.nan
    t["std_ratio"] = np.nan
    return t


def _baseline_summary(res, robot, n_samples) -> dict:
    filt = {k: v for k, v in res.filter.items() if k != "cv"}
    return {
        "method": "ls-sg",
        "robot": robot.name,
        "joints": list(robot.joint_names),
        "locked_joints": robot.locked_joints,
        "knots": int(n_samples),
        "iterations": 0,
        "final_cost": None,
        "converged": True,
        "seconds": res.seconds,
        "seconds_per_iteration": None,
        "parameters": res.n_parameters,
        "inertia_parameterization": getattr(res, "inertia_parameterization",  # issue 12 hook (energy-ls)
                                            "raw (unconstrained least squares)"),
        "friction_model": "coulomb-viscous",
        "physically_consistent": bool(res.physical_consistency.get("consistent", False)),
        "inconsistent_bodies": res.physical_consistency.get("inconsistent_bodies", []),
        "rank": res.rank,
        "filter": filt,
        "measured_joints": list(res.measured_joints),
        "filtered_residual_rms": res.residual_rms,
        "cost_history": [],
    }


def _trajectory_frame(result, log, sg_filter, robot):
    """The smoother's knots, or for ls-sg the SG-smoothed q and its derivatives (the baseline's CV filter)."""
    import pandas as pd

    if getattr(result, "trajectory", None) is not None:
        return result.trajectory
    from ..estimation.noise import savgol_derivatives

    qs, vs, as_ = savgol_derivatives(log.t, np.asarray(log.q, float), sg_filter["window_s"],
                                     sg_filter["polyorder"])
    cols = {"t": np.asarray(log.t, float)}
    for i, j in enumerate(robot.joint_names):
        cols[f"q.{j}"] = qs[:, i]
        cols[f"v.{j}"] = vs[:, i]
        cols[f"a.{j}"] = as_[:, i]
    return pd.DataFrame(cols)


def write_identification(out_dir, result, sg_filter, robot, log, log_path, robot_source, method,
                         options: dict, wall_seconds: float) -> dict:
    """Write parameters.csv, trajectory.parquet, summary.json, model.json, report.md and its PNGs into
    the (existing, empty) ``out_dir``. Returns the summary dict."""
    from ..report import (
        joint_units,
        markdown_table,
        parameters_excerpt,
        plot_convergence,
        plot_efforts,
    )
    from ..validation import model_spec, predict_efforts, relative_rmse, relative_rmse_per_joint

    out_dir = Path(out_dir)
    if method == "smoother":
        table = result.parameters_table()
        summary = result.summary()
    else:
        table = _baseline_table(result, robot)
        summary = _baseline_summary(result, robot, log.n_samples)
    table = table[["name", "group", "estimate", "std", "prior_mean", "prior_std", "std_ratio"]]
    table.to_csv(out_dir / "parameters.csv", index=False)

    traj = _trajectory_frame(result, log, sg_filter, robot)
    traj.to_parquet(out_dir / "trajectory.parquet", index=False)

    # model efforts along the smoothed trajectory vs the measured efforts at the same instants
    names = list(robot.joint_names)
    qk = traj[[f"q.{j}" for j in names]].to_numpy()
    vk = traj[[f"v.{j}" for j in names]].to_numpy()
    ak = traj[[f"a.{j}" for j in names]].to_numpy()
    idx = np.clip(np.searchsorted(np.asarray(log.t, float), traj["t"].to_numpy()), 0, log.n_samples - 1)
    tau_meas = np.asarray(log.tau, float)[idx]
    tau_model = predict_efforts(result, robot, qk, vk, ak,
                                velocity_scale=options.get("friction_velocity_scale"))
    per_joint = relative_rmse_per_joint(tau_model, tau_meas)

    summary = dict(summary)
    summary["method"] = method
    summary["log"] = str(log_path)
    summary["robot_source"] = str(robot_source)
    summary["samples"] = log.n_samples
    summary["options"] = options
    summary["wall_seconds"] = wall_seconds
    summary["sg_filter"] = sg_filter
    summary["training_relative_rmse"] = {
        "overall": relative_rmse(tau_model, tau_meas) if np.any(log.tau_measured) else None,
        "per_joint": dict(zip(names, per_joint.tolist(), strict=True)),
        "note": "model efforts at the smoothed trajectory vs measured efforts (training log)",
    }
    (out_dir / "summary.json").write_text(json.dumps(json_safe(summary), indent=2) + "\n")

    spec = model_spec(result, robot, str(robot_source), sg_filter=sg_filter, training_log=str(log_path),
                      velocity_scale=options.get("friction_velocity_scale"))
    (out_dir / "model.json").write_text(json.dumps(json_safe(spec), indent=1) + "\n")

    # report
    history = getattr(result, "history", [])
    lines = [f"# Identification of {robot.name} ({method})", ""]
    lines.append(f"- log: `{log_path}` ({log.n_samples} samples, {log.duration:.3g} s, {log.rate:.4g} Hz)")
    lines.append(f"- joints: {', '.join(names)}")
    if robot.locked_joints:
        lines.append(f"- locked joints ({len(robot.locked_joints)}): "
                     + ", ".join(f"{k}={v}" for k, v in robot.locked_joints.items()))
    if method == "smoother":
        lines.append(f"- {summary['knots']} knots, {summary['iterations']} iterations, final cost "
                     f"{summary['final_cost']:.6g}, converged: {summary['converged']}, "
                     f"{summary['seconds']:.3g} s ({summary['seconds_per_iteration'] or 0:.3g} s/iteration)"
                     if summary["final_cost"] is not None else
                     f"- {summary['knots']} knots, no accepted iteration, converged: {summary['converged']}")
    else:
        f = summary["filter"]
        lines.append(f"- SG filter chosen by blocked CV: {f.get('window_s', 0) * 1e3:.3g} ms, order "
                     f"{f.get('polyorder')}; regressor rank {summary['rank']}; {summary['seconds']:.3g} s")
    lines.append(f"- physically consistent: {summary.get('physically_consistent')}")
    ov = summary["training_relative_rmse"]["overall"]
    if ov is not None:
        lines.append(f"- training-log effort relative RMSE (model at the smoothed trajectory vs measured): "
                     f"{ov:.4g}")
    lines += ["", "## Parameters (excerpt: masses, friction, armature; all in `parameters.csv`)", "",
              "`std_ratio` = posterior std / prior std: near 0 the log set the parameter, "
              "near 1 the prior did.",
              "", markdown_table(parameters_excerpt(table)), ""]
    if hasattr(result, "physical_quantities"):
        pq = result.physical_quantities()
        pq.to_csv(out_dir / "physical_quantities.csv", index=False)
        lines += ["## Physical quantities per body (who set them: the log or the prior)", "",
                  "Mass [kg], COM [m] in the body frame, principal-axis-free inertia about the COM "
                  "[kg·m²]. `set_by` compares the posterior std with the prior std of the parameters "
                  "each quantity is computed from (`log`: ratio < 0.5, `prior`: > 0.9). Structural "
                  "identifiability of every parameter is in `parameters.csv` (`structural`, "
                  "`identifiable_fraction`; see docs/identifiability.md).", "",
                  markdown_table(pq), ""]
    if method == "smoother":
        plot_convergence(history, out_dir / "convergence.png", title=f"{robot.name}: cost per LM iteration")
        lines += ["## Convergence", "", "![cost per iteration](convergence.png)", "",
                  "Each round re-weights the inverse-dynamics factors with the effort noise re-estimated "
                  "from the previous round's residuals, so costs of different rounds are not comparable.", ""]
    units = joint_units(robot)
    plot_efforts(np.asarray(traj["t"]), tau_meas, {f"model ({method})": tau_model}, names,
                 out_dir / "training_efforts.png", units=units,
                 title=f"{robot.name}: measured vs model efforts on the training log "
                       f"(model at the {'smoothed' if method == 'smoother' else 'SG-filtered'} trajectory)")
    lines += ["## Measured vs model efforts (training log)", "",
              "![measured vs model efforts](training_efforts.png)", "",
              markdown_table(_per_joint_frame(names, per_joint)), ""]
    (out_dir / "report.md").write_text("\n".join(lines))
    from .. import report_html  # issue 14 hook: self-contained report.html beside report.md
    report_html.write_report_html(out_dir, robot, table, summary, result=result, t=traj["t"],  # issue 14
                                  tau_meas=tau_meas, tau_model=tau_model, trajectory=traj,  # issue 14
                                  velocity_scale=options.get("friction_velocity_scale"))  # issue 14
    return summary


def _per_joint_frame(names, values):
    import pandas as pd

    return pd.DataFrame({"joint": names, "relative RMSE": values})


# ---------------------------------------------------------------------------------------------- command
def _positive(name, val, allow_none=True):
    if val is None and allow_none:
        return
    if not (math.isfinite(val) and val > 0):
        fail(f"{name} must be a positive number, got {val}")


@main.command("identify")
@click.argument("log_path", metavar="LOG", type=click.Path())  # issue 14: a rosbag2 bag is a directory
@click.option("--robot", "robot_source", required=True,
              help="Catalog name (z1, panda, tiago, ...) or URDF path.")
@click.option("--out", "out", required=True, type=click.Path(file_okay=False),
              help="Output directory (written atomically; replaced if it exists).")
@click.option("--method", type=click.Choice(METHODS), default="smoother", show_default=True,
              help="smoother = joint state-parameter factor-graph smoother; ls-sg = classical least squares "
                   "on Savitzky-Golay differentiated signals (baseline); energy-ls = work-energy regressor "
                   "least squares, physically consistent (baseline, no accelerations).")
@click.option("--knot-stride", type=int, default=None,
              help="One smoother knot every N log samples [samples]. Default: 1 for fixed-base robots; for "
                   "floating bases from the log (10x the joints' bandwidth, at most 10 ms, a quarter of the "
                   "shortest contact phase; reported in summary.json knot_spacing).")
@click.option("--sigma-q", type=float, default=None,
              help="Position noise std [rad | m]; default: estimated from the log.")
@click.option("--sigma-v", type=float, default=None,
              help="Velocity noise std [rad/s | m/s]; default: estimated from the log.")
@click.option("--sigma-tau", type=float, default=None,
              help="Effort noise std [N·m | N]; default: estimated from the log (then re-estimated from the "
                   "inverse-dynamics residuals).")
@click.option("--inertia", type=click.Choice(INERTIAS), default="log-cholesky", show_default=True,
              help="Inertial parameterization of the smoother (ls-sg is always raw).")
@click.option("--friction", type=click.Choice(FRICTIONS), default="coulomb-viscous", show_default=True,
              help="Friction model (ls-sg: coulomb-viscous only).")
@click.option("--friction-velocity-scale", type=float, default=0.05, show_default=True,
              help="vs in tau_f = fc·tanh(v/vs) + fv·v [rad/s].")
@click.option("--max-iterations", type=int, default=30, show_default=True,
              help="Levenberg-Marquardt iterations per round [count].")
@click.option("--contact-radius", type=float, default=None,
              help="Floating base: foot sphere radius [m] (contact point below the foot frame); default: the "
                   "robot spec's.")
@click.option("--total-mass", type=float, default=None,
              help="Floating base: known total mass [kg] as a prior (see --total-mass-std).")
@click.option("--total-mass-std", type=float, default=0.0, show_default=True,
              help="Floating base: std of the total-mass prior [kg]; 0 = hard constraint.")
@click.option("--symmetry", type=click.Choice(("auto", "joints", "all", "none")), default="auto",
              show_default=True,
              help="Floating base: left-right symmetry prior of the robot spec's mirrored limbs: joints = "
                   "friction and armature of mirrored joints, all = also the inertias of mirrored bodies, "
                   "auto = joints when some foot never leaves the ground in the log, else none.")
@click.option("--symmetry-std", type=float, default=0.3, show_default=True,
              help="Floating base: relative std of the symmetry prior; 0 = hard constraint.")
@click.option("--constraints", type=click.Choice(("hard", "soft")), default="hard", show_default=True,
              help="Floating base: contact and base-wrench constraints to 1e-6 (augmented Lagrangian) or as "
                   "soft penalties.")
@click.option("--process-noise", type=click.Choice(("unprojected", "projected")), default="unprojected",
              show_default=True, help="Floating base: process noise projected onto the contact null space "
                                      "(paper 004 eqs. 36-37) or not.")
@click.option("--impacts/--no-impacts", default=False, show_default=True,
              help="Floating base: reset maps with impulses at touchdowns (paper 004 eqs. 7-11) instead of "
                   "the plain integration factor (stiff contacts).")
@click.option("--touchdown-settle", type=float, default=0.0, show_default=True,
              help="Floating base: stance constraints of a foot start this long after its contact flag turns "
                   "on [s] (flags that switch on while the foot still moves).")
@click.option("--use-forces/--no-use-forces", default=True, show_default=True,
              help="Floating base: use measured contact forces (force.<frame>.*) as factors when the log "
                   "has them.")
@click.option("--quiet", is_flag=True, help="No per-iteration progress on stderr.")
@bag_options  # issue 14
@allow_prior_option  # issue 14
def identify_cmd(log_path, robot_source, out, method, knot_stride, sigma_q, sigma_v, sigma_tau, inertia,
                 friction, friction_velocity_scale, max_iterations, contact_radius, total_mass,
                 total_mass_std,
                 symmetry, symmetry_std, constraints, process_noise, impacts, touchdown_settle, use_forces,
                 quiet):
    """Identify ROBOT's physical parameters from LOG (CSV or Parquet, t/q.*/v.*/tau.* columns, or a ROS
    bag: rosbag2 directory, .db3, .mcap, ROS 1 .bag; see docs/data-format.md).

    Robot joints without a q.<joint> column in LOG are locked at neutral (with a warning). DIR (--out)
    receives:

    \b
      parameters.csv      name, group, estimate, std, prior_mean, prior_std, std_ratio (SI units:
                          kg, kg·m, kg·m², N·m, N·m·s/rad); std_ratio = posterior/prior std
                          (near 0: set by the log, near 1: set by the prior). ls-sg: prior_mean is
                          the URDF nominal, prior_std and std_ratio are NaN.
      trajectory.parquet  t [s], q.<j> [rad], v.<j> [rad/s], a.<j> [rad/s²]: the smoother's knots;
                          for ls-sg the Savitzky-Golay smoothed q and derivatives (CV-chosen window).
      summary.json        iterations, final cost, knots, seconds per iteration, converged, method, log...
      model.json          what 'fg-sysid predict' needs (robot, locked joints, layout, theta, estimate).
      report.md           parameter excerpt, convergence.png, training_efforts.png.
      report.html         self-contained page: efforts and residuals, friction curves, identified vs
                          prior, identifiability, convergence (docs/report.md).
    """
    _positive("--friction-velocity-scale", friction_velocity_scale, allow_none=False)
    for name, val in (("--sigma-q", sigma_q), ("--sigma-v", sigma_v), ("--sigma-tau", sigma_tau)):
        _positive(name, val)
    if knot_stride is not None and knot_stride < 1:
        fail(f"--knot-stride must be >= 1, got {knot_stride}")
    if max_iterations < 1:
        fail(f"--max-iterations must be >= 1, got {max_iterations}")
    robot, log = load_inputs(log_path, robot_source)
    checks = run_data_checks(robot, log, method, friction_velocity_scale)  # issue 14: exit 2 or the prior
    if robot.floating_base:
        _identify_floating(robot, log, log_path, robot_source, out, method, quiet, dict(
            knot_stride=knot_stride, sigma_q=sigma_q, sigma_v=sigma_v, sigma_tau=sigma_tau, inertia=inertia,
            friction=friction, friction_velocity_scale=friction_velocity_scale, max_iterations=max_iterations,
            contact_radius=contact_radius, total_mass=total_mass, total_mass_std=total_mass_std,
            symmetry={"all": "robot", "joints": "joints", "none": None, "auto": "auto"}[symmetry],
            symmetry_std=symmetry_std,
            constraints=constraints,
            process_noise=process_noise, impacts=impacts, touchdown_settle_s=touchdown_settle,
            use_forces=use_forces), checks)
        return
    knot_stride = 1 if knot_stride is None else knot_stride
    options = {"knot_stride": knot_stride, "sigma_q": sigma_q, "sigma_v": sigma_v, "sigma_tau": sigma_tau,
               "inertia": inertia if method == "smoother" else "raw", "friction": friction,
               "friction_velocity_scale": friction_velocity_scale, "max_iterations": max_iterations}
    from ..estimation.smoother import EstimationError

    if checks.prior_only:  # issue 14: --allow-prior on a log that cannot determine the parameters
        return write_prior_answer(out, robot, log, log_path, robot_source, options, checks,
                                  write_identification)
    t0 = time.perf_counter()
    if not quiet:
        echo_err(f"identifying {robot.name} ({robot.n_joints} joints) from {log_path}: "
                 f"{log.n_samples} samples, {log.duration:.3g} s, method {method}")
    try:
        result, sg_filter = run_identification(
            robot, log, method, knot_stride=knot_stride, sigma_q=sigma_q, sigma_v=sigma_v,
            sigma_tau=sigma_tau,
            inertia=inertia, friction=friction, friction_velocity_scale=friction_velocity_scale,
            max_iterations=max_iterations, verbose=not quiet)
    except np.linalg.LinAlgError as e:
        fail(f"{method} estimation failed with a numerical error inside the estimator ({e}); "
             + ("try --inertia exponential-eigenvalue or --method ls-sg" if method == "smoother" else
                "the log may not excite the robot enough"))
    except (EstimationError, ValueError) as e:
        fail(str(e))
    with atomic_output_dir(out) as tmp:
        summary = write_identification(tmp, result, sg_filter, robot, log, log_path, robot_source, method,
                                       options, time.perf_counter() - t0)
        annotate_summary(tmp, log, checks)  # issue 14
    conv = summary.get("converged")
    it = summary.get("iterations")
    click.echo(f"wrote {out}: {len(summary.get('joints', []))} joints, "
               f"{summary.get('parameters')} parameters, "
               f"method {method}, {it} iterations, converged: {conv}, "
               f"physically consistent: {summary.get('physically_consistent')}, "
               f"{summary['wall_seconds']:.1f} s")


def _identify_floating(robot, log, log_path, robot_source, out, method, quiet, options, checks=None):
    from ..estimation.smoother import EstimationError
    from .floating import run_floating_identification, write_floating_identification

    for name in ("contact_radius", "total_mass"):
        if options[name] is not None and not (math.isfinite(options[name]) and options[name] >= 0):
            fail(f"--{name.replace('_', '-')} must be a non-negative number, got {options[name]}")
    for name in ("total_mass_std", "symmetry_std", "touchdown_settle_s"):
        if not (math.isfinite(options[name]) and options[name] >= 0):
            fail(f"--{name.replace('_', '-')} must be >= 0, got {options[name]}")
    t0 = time.perf_counter()
    if not quiet:
        echo_err(f"identifying {robot.name} (floating base, {robot.n_joints} joints) from {log_path}: "
                 f"{log.n_samples} samples, {log.duration:.3g} s, method {method}")
    opts = {k: v for k, v in options.items() if v is not None} if method == "smoother" else \
        {"friction_velocity_scale": options["friction_velocity_scale"],
         "contact_radius": options["contact_radius"]}
    try:
        result, est = run_floating_identification(robot, log, method, opts, verbose=not quiet)
    except np.linalg.LinAlgError as e:
        fail(f"{method} estimation failed with a numerical error inside the estimator ({e})")
    except (EstimationError, ValueError) as e:
        fail(str(e))
    with atomic_output_dir(out) as tmp:
        summary = write_floating_identification(tmp, result, est, robot, log, log_path, robot_source, method,
                                                options, time.perf_counter() - t0)
        annotate_summary(tmp, log, checks)  # issue 14
    msg = (f"wrote {out}: {len(summary.get('joints', []))} joints, {summary.get('parameters')} parameters, "
           f"method {method}, physically consistent: {summary.get('physically_consistent')}")
    if "constraints" in summary:
        c = summary["constraints"]
        msg += (f", total mass {summary['floating_base']['total_mass_estimate']:.3f} kg, "
                "constraints satisfied: "
                f"{c['satisfied']}")
    click.echo(msg + f", {summary['wall_seconds']:.1f} s")
