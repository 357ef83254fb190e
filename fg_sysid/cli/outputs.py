"""The output directory of ``fg-sysid identify`` (and of the demo's identifications), for fixed and
floating bases alike: parameters.csv, trajectory.parquet, summary.json, model.json, report.md (+ PNGs)
and report.html.

One writer, `write_identification`; what differs between the bases is gathered first
(`_fixed_part`: model efforts at the smoothed trajectory, the training log's SG filter;
`_floating_part`: the effort residual with the estimated contact forces, the constraint residuals, the
contact-consistent choice of the held-out SG window, contact frames for `predict`, contact-force plot).
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .common import json_safe

#: Held-out SG windows tried for the floating-base prediction filter stored in model.json [s].
WINDOWS = (0.03, 0.05, 0.1, 0.2)


@dataclass
class _Part:
    """What one base type adds to the common outputs."""

    table: object
    summary: dict
    sg_filter: dict
    trajectory: object = None
    spec_extra: dict = field(default_factory=dict)
    header: list = field(default_factory=list)
    sections: list = field(default_factory=list)
    html: dict = field(default_factory=dict)


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


def _per_joint_frame(names, values):
    import pandas as pd

    return pd.DataFrame({"joint": names, "relative RMSE": values})


def choose_prediction_window(result, robot, log, frames, radius) -> tuple[float, dict]:
    """The SG window (of `WINDOWS`) whose contact-consistent error of ``result`` on the training log is
    smallest: stored in model.json as the held-out differentiation filter."""
    from ..floating_validation import floating_heldout_report

    errors = {}
    for w in WINDOWS:
        try:
            errors[w] = floating_heldout_report(
                result,
                robot,
                log,
                window_s=w,
                contact_frames=frames,
                contact_radius=radius,
                mode="contact-consistent",
            )["overall"]
        except ValueError:
            continue
    if not errors:
        return 0.05, {}
    return min(errors, key=errors.get), errors


def _decoupled_table_summary(res, robot):
    """parameters.csv table and summary dict of the decoupled baseline (`FloatingBaselineResult`)."""
    import pandas as pd

    from ..estimation.baseline import nominal_parameters
    from ..parameterizations import check_physical_consistency

    table = pd.DataFrame(
        {
            "name": res.names,
            "group": res.groups or [""] * len(res.names),
            "estimate": res.estimate,
            "std": np.nan,
            "prior_mean": nominal_parameters(robot),
            "prior_std": np.nan,
            "std_ratio": np.nan,
        }
    )
    problems = check_physical_consistency(
        np.asarray(res.estimate)[: 10 * robot.n_bodies].reshape(-1, 10), list(robot.body_names)
    )
    summary = {
        "method": "ls-sg",
        "robot": robot.name,
        "joints": list(robot.joint_names),
        "locked_joints": robot.locked_joints,
        "iterations": 0,
        "converged": True,
        "seconds": res.seconds,
        "parameters": res.n_parameters,
        "inertia_parameterization": "raw (unconstrained least squares)",
        "friction_model": "coulomb-viscous",
        "physically_consistent": not problems,
        "inconsistent_bodies": problems,
        "rank": res.rank,
        "free_parameters": res.n_free,
        "filter": res.filter,
        "projected_rows": res.n_rows,
        "relative_residual": res.relative_residual,
        "total_mass_estimate": float(np.sum(np.asarray(res.estimate)[: 10 * robot.n_bodies : 10])),
    }
    return table, summary


def plot_forces(traj, frames, path, title=""):
    from ..report import _pyplot

    plt = _pyplot()
    fig, axes = plt.subplots(len(frames), 1, figsize=(9, 1.8 * len(frames) + 0.6), sharex=True, squeeze=False)
    t = traj["t"].to_numpy()
    for ax, f in zip(axes[:, 0], frames, strict=True):
        for c in "xyz":
            ax.plot(t, traj[f"force.{f}.{c}"].to_numpy(), label=c, lw=1)
        ax.set_ylabel(f"{f} [N]")
        ax.grid(alpha=0.3)
    axes[0, 0].legend(loc="upper right", ncol=3)
    axes[-1, 0].set_xlabel("t [s]")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _fixed_part(out_dir, result, sg_filter, robot, log, method, options) -> _Part:
    from ..report import joint_units, markdown_table, plot_efforts
    from ..validation import predict_efforts, relative_rmse, relative_rmse_per_joint

    if method == "smoother":
        table, summary = result.parameters_table(), dict(result.summary())
    else:
        table, summary = _baseline_table(result, robot), _baseline_summary(result, robot, log.n_samples)
    traj = _trajectory_frame(result, log, sg_filter, robot)
    # model efforts along the smoothed trajectory vs the measured efforts at the same instants
    names = list(robot.joint_names)
    qk, vk, ak = (traj[[f"{c}.{j}" for j in names]].to_numpy() for c in "qva")
    idx = np.clip(np.searchsorted(np.asarray(log.t, float), traj["t"].to_numpy()), 0, log.n_samples - 1)
    tau_meas = np.asarray(log.tau, float)[idx]
    tau_model = predict_efforts(result, robot, qk, vk, ak,
                                velocity_scale=options.get("friction_velocity_scale"))
    per_joint = relative_rmse_per_joint(tau_model, tau_meas)
    summary["training_relative_rmse"] = {
        "overall": relative_rmse(tau_model, tau_meas) if np.any(log.tau_measured) else None,
        "per_joint": dict(zip(names, per_joint.tolist(), strict=True)),
        "note": "model efforts at the smoothed trajectory vs measured efforts (training log)",
    }
    header = []
    if method == "smoother":
        header.append(f"- {summary['knots']} knots, {summary['iterations']} iterations, final cost "
                      f"{summary['final_cost']:.6g}, converged: {summary['converged']}, "
                      f"{summary['seconds']:.3g} s ({summary['seconds_per_iteration'] or 0:.3g} s/iteration)"
                      if summary["final_cost"] is not None else
                      f"- {summary['knots']} knots, no accepted iteration, converged: {summary['converged']}")
        sel = summary.get("friction_selection")
        header.append(f"- friction law: {summary.get('friction_model')}"
                      + (f" (`--friction auto`: {sel['reason']})" if sel else ""))
    else:
        f = summary["filter"]
        header.append(f"- SG filter chosen by blocked CV: {f.get('window_s', 0) * 1e3:.3g} ms, order "
                      f"{f.get('polyorder')}; regressor rank {summary['rank']}; {summary['seconds']:.3g} s")
    ov = summary["training_relative_rmse"]["overall"]
    if ov is not None:
        header.append(f"- training-log effort relative RMSE (model at the smoothed trajectory vs measured): "
                      f"{ov:.4g}")
    plot_efforts(np.asarray(traj["t"]), tau_meas, {f"model ({method})": tau_model}, names,
                 out_dir / "training_efforts.png", units=joint_units(robot),
                 title=f"{robot.name}: measured vs model efforts on the training log "
                       f"(model at the {'smoothed' if method == 'smoother' else 'SG-filtered'} trajectory)")
    sections = ["## Measured vs model efforts (training log)", "",
                "![measured vs model efforts](training_efforts.png)", "",
                markdown_table(_per_joint_frame(names, per_joint)), ""]
    html = dict(t=traj["t"], tau_meas=tau_meas, tau_model=tau_model)
    return _Part(table, summary, dict(sg_filter), traj, {}, header, sections, html)


def _floating_part(out_dir, result, estimator, robot, log, method, options) -> _Part:
    names = list(robot.joint_names)
    r_id = idx = traj = None
    if method == "smoother":
        table = result.parameters_table()
        summary = dict(result.summary())
        fb = summary["floating_base"]
        frames, radius = fb["contact_frames"], fb["contact_radius"]
        traj = result.trajectory
        r_id = estimator.state_["id_residual"][:, robot.joint_index_v()]
        r_id = np.where(np.asarray(log.tau_measured, bool)[None, :], r_id, np.nan)  # unmeasured: no residual
        idx = np.clip(np.searchsorted(np.asarray(log.t, float), estimator.knot_times_), 0, log.n_samples - 1)
    else:
        table, summary = _decoupled_table_summary(result, robot)
        frames = list(log.contacts)
        radius = float(options.get("contact_radius") or getattr(robot, "contact_radius", 0.0) or 0.0)
    window, window_errors = choose_prediction_window(result, robot, log, frames, radius)
    sg_filter = {
        "window_s": float(window),
        "polyorder": 3,
        "chosen_by": "smallest contact-consistent effort error of the identified model on the training log",
        "errors": {str(k): v for k, v in window_errors.items()},
    }
    header = [f"- contact frames: {', '.join(frames)} (radius {radius:g} m)"]
    sections = []
    if r_id is not None:
        tau_meas = np.asarray(log.tau, float)[idx]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN (unmeasured) effort columns
            rms_meas = np.sqrt(np.nanmean(tau_meas**2, axis=0))
        with np.errstate(invalid="ignore"):
            per = np.sqrt(np.mean(r_id**2, axis=0)) / np.where(rms_meas > 0, rms_meas, np.nan)
        summary["training_relative_rmse"] = {
            "overall": float(np.sqrt(np.nanmean(r_id**2)) / np.sqrt(np.nanmean(tau_meas**2))),
            "per_joint": dict(zip(names, per.tolist(), strict=True)),
            "note": "model efforts (with the estimated contact forces) at the smoothed trajectory vs "
                    "measured",
        }
        viol = fb["constraint_residual_max"]
        c = summary["constraints"] = {
            "enforced": fb["constraints"],
            "tolerance": fb["constraint_tol"],
            "satisfied": fb["constraints_satisfied"],
            "contact_position_max_m": viol.get("contact_height"),
            "contact_velocity_max_m_per_s": viol.get("contact_velocity"),
            "contact_acceleration_max_m_per_s2": viol.get("contact_acceleration"),
            "inverse_dynamics_base_rows_max": viol.get("base_wrench"),
            "note": "inverse dynamics: the 6 unactuated base rows M v̇ + h − Σ J_fᵀ λ_f = 0 [N | N·m]; the "
            "joint rows equal the estimated efforts by construction, their difference to the "
            "measured efforts is training_relative_rmse",
        }
        header += [
            f"- {summary['knots']} knots, {summary['iterations']} iterations, "
            f"{summary['seconds']:.3g} s ({summary['seconds_per_iteration'] or 0:.3g} s/iteration)",
            f"- total mass: {fb['total_mass_estimate']:.4g} kg"
            + (f" (known-mass prior {fb['total_mass_prior']})" if fb["total_mass_prior"] else
               " (no total-mass prior: a stance-only log leaves the mass at each stance foot's "
               "contact point unobservable, docs/floating-base.md)"),
            f"- constraints ({c['enforced']}, tolerance {c['tolerance']:g}): contact position "
            f"{c['contact_position_max_m']:.2g} m, velocity {c['contact_velocity_max_m_per_s']:.2g} m/s, "
            f"acceleration {c['contact_acceleration_max_m_per_s2']:.2g} m/s², base-row inverse "
            f"dynamics {c['inverse_dynamics_base_rows_max']:.2g} N|N·m; satisfied: {c['satisfied']}",
            f"- training effort relative RMSE: {summary['training_relative_rmse']['overall']:.4g}",
        ]
        plot_forces(traj, frames, out_dir / "contact_forces.png",
                    title=f"{robot.name}: estimated contact forces")
        sections = ["## Estimated contact forces (world frame)", "",
                    "![contact forces](contact_forces.png)", ""]
    spec_extra = dict(floating_base=True, contact_frames=list(frames), contact_radius=float(radius))
    html = dict(log=log, knot_index=idx, effort_residual=r_id, contact_frames=frames)
    return _Part(table, summary, sg_filter, traj, spec_extra, header, sections, html)


def write_identification(out_dir, result, sg_filter, robot, log, log_path, robot_source, method,
                         options: dict, wall_seconds: float, estimator=None) -> dict:
    """Write parameters.csv, trajectory.parquet, summary.json, model.json, report.md (+ PNGs) and
    report.html into the (existing, empty) ``out_dir``; returns the summary dict.

    ``sg_filter``: the training log's SG filter {window_s, polyorder} (fixed base; stored in model.json for
    held-out differentiation); floating bases choose their own (`choose_prediction_window`).
    ``estimator``: the fitted `FloatingBaseSmoother` (floating base, smoother).
    """
    from .. import report_html
    from ..report import markdown_table, parameters_excerpt, plot_convergence
    from ..validation import model_spec

    out_dir = Path(out_dir)
    if robot.floating_base:
        part = _floating_part(out_dir, result, estimator, robot, log, method, options)
    else:
        part = _fixed_part(out_dir, result, sg_filter, robot, log, method, options)
    table = part.table[["name", "group", "estimate", "std", "prior_mean", "prior_std", "std_ratio"]]
    table.to_csv(out_dir / "parameters.csv", index=False)
    if part.trajectory is not None:
        part.trajectory.to_parquet(out_dir / "trajectory.parquet", index=False)
    summary = part.summary
    summary.update(method=method, log=str(log_path), robot_source=str(robot_source), samples=log.n_samples,
                   options=options, wall_seconds=wall_seconds, sg_filter=part.sg_filter)
    if isinstance(summary.get("loops"), dict) and not robot.floating_base and method == "smoother":
        from ..estimation.loop_identifiability import apply_posterior  # issue 11 (knee fv): posterior check

        apply_posterior(summary["loops"], result, robot, prior=(
            getattr(estimator, "_theta_bar", None), getattr(estimator, "_theta_std", None))
            if getattr(estimator, "_theta_bar", None) is not None else None)
    (out_dir / "summary.json").write_text(json.dumps(json_safe(summary), indent=2) + "\n")
    spec = model_spec(result, robot, str(robot_source),
                      sg_filter={k: part.sg_filter[k] for k in ("window_s", "polyorder")},
                      training_log=str(log_path), velocity_scale=options.get("friction_velocity_scale"))
    spec.update(part.spec_extra)
    (out_dir / "model.json").write_text(json.dumps(json_safe(spec), indent=1) + "\n")

    names = list(robot.joint_names)
    base = "floating base, " if robot.floating_base else ""
    lines = [f"# Identification of {robot.name} ({base}{method})", "",
             f"- log: `{log_path}` ({log.n_samples} samples, {log.duration:.3g} s, {log.rate:.4g} Hz)",
             f"- joints: {', '.join(names)}"]
    if robot.locked_joints:
        lines.append(f"- locked joints ({len(robot.locked_joints)}): "
                     + ", ".join(f"{k}={v}" for k, v in robot.locked_joints.items()))
    lines += part.header
    lines.append(f"- physically consistent: {summary.get('physically_consistent')}")
    lines += ["", "## Parameters (excerpt: masses, friction, armature; all in `parameters.csv`)", "",
              "`std_ratio` = posterior std / prior std: near 0 the log set the parameter, near 1 the "
              "prior did.",
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
        plot_convergence(getattr(result, "history", []), out_dir / "convergence.png",
                         title=f"{robot.name}: cost per LM iteration")
        lines += ["## Convergence", "", "![cost per iteration](convergence.png)", "",
                  "Each round re-weights the inverse-dynamics factors with the effort noise re-estimated "
                  "from the previous round's residuals, so costs of different rounds are not comparable.", ""]
    lines += part.sections
    from ..estimation.loop_identifiability import report_lines  # closed loops (issue 11, knee)

    lines += report_lines(summary.get("loops", {}).get("friction_identifiability"), table,
                          summary.get("loops", {}).get("posterior_determination"))  # issue 11 (knee fv)
    (out_dir / "report.md").write_text("\n".join(lines))
    report_html.write_report_html(out_dir, robot, table, summary, result=result, trajectory=part.trajectory,
                                  velocity_scale=options.get("friction_velocity_scale"), **part.html)
    return summary
