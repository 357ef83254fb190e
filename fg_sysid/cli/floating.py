"""Floating-base (free-flyer) identification behind ``fg-sysid identify`` and ``fg-sysid demo --robot b1``.

`run_floating_identification` runs the joint smoother (`FloatingBaseSmoother`) or the decoupled
least-squares baseline (``--method ls-sg``: `DecoupledFloatingBaseLS`); `write_floating_identification`
writes the same files as the fixed-base path (parameters.csv, trajectory.parquet with the base pose and
the estimated contact forces, summary.json with the constraint residuals, model.json with the contact
frames for 'fg-sysid predict', report.md with plots); `floating_demo` simulates MuJoCo logs and compares
the smoother, the decoupled baseline and the nominal URDF on a held-out log.
"""

from __future__ import annotations

import json
import time
import warnings
from pathlib import Path

import click
import numpy as np

from .common import atomic_output_dir, echo_err, fail, json_safe

#: Held-out SG windows tried for the prediction filter stored in model.json [s].
WINDOWS = (0.03, 0.05, 0.1, 0.2)


def run_floating_identification(
    robot, log, method: str = "smoother", options: dict | None = None, verbose: bool = True
):
    """Returns ``(result, estimator)``: the smoother's `IdentificationResult` (estimator: the fitted
    `FloatingBaseSmoother`) or the decoupled baseline's result (estimator: `DecoupledFloatingBaseLS`).
    Raises EstimationError / ValueError on failure."""
    from ..estimation.floating_smoother import FloatingBaseSmoother, full_configuration

    options = dict(options or {})
    if log.base_pos is None or log.base_quat is None:
        if method != "smoother":
            raise ValueError(
                "the decoupled baseline needs the base pose (base.pos.*, base.quat.*) in the log"
            )
    if method == "smoother":
        sm = FloatingBaseSmoother(robot, verbose=verbose, **options).fit(log)
        return sm.result_, sm
    if method == "ls-sg":
        from ..estimation.floating_baseline import DecoupledFloatingBaseLS

        if not log.contacts:
            raise ValueError("the decoupled baseline needs contact flags (contact.<frame> columns)")
        vs = options.get("friction_velocity_scale", 0.05)
        est = DecoupledFloatingBaseLS(velocity_scale=vs).fit(
            full_configuration(log, robot),
            log.t,
            np.nan_to_num(np.asarray(log.tau, float)),
            log.contacts,
            robot,
        )
        return est.result_, est
    raise ValueError(f"unknown method {method!r}")


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


def write_floating_identification(
    out_dir, result, estimator, robot, log, log_path, robot_source, method, options: dict, wall_seconds: float
) -> dict:
    """Write parameters.csv, trajectory.parquet, summary.json, model.json, report.md (+ PNGs) into the
    existing ``out_dir``; returns the summary dict."""
    import pandas as pd

    from ..report import markdown_table, parameters_excerpt, plot_convergence
    from ..validation import model_spec

    out_dir = Path(out_dir)
    names = list(robot.joint_names)
    if method == "smoother":
        table = result.parameters_table()
        summary = dict(result.summary())
        fb = summary["floating_base"]
        frames, radius = fb["contact_frames"], fb["contact_radius"]
        traj = result.trajectory
        r_id = estimator.state_["id_residual"][:, robot.joint_index_v()]
        r_id = np.where(np.asarray(log.tau_measured, bool)[None, :], r_id, np.nan)  # unmeasured: no residual
        idx = estimator._idx
    else:
        table, summary = _decoupled_table_summary(result, robot)
        frames = list(log.contacts)
        radius = float(options.get("contact_radius") or getattr(robot, "contact_radius", 0.0) or 0.0)
        traj = None
        r_id = idx = None
    table = table[["name", "group", "estimate", "std", "prior_mean", "prior_std", "std_ratio"]]
    table.to_csv(out_dir / "parameters.csv", index=False)
    if traj is not None:
        traj.to_parquet(out_dir / "trajectory.parquet", index=False)
    window, window_errors = choose_prediction_window(result, robot, log, frames, radius)
    sg_filter = {
        "window_s": float(window),
        "polyorder": 3,
        "chosen_by": "smallest contact-consistent effort error of the identified model on the training log",
        "errors": {str(k): v for k, v in window_errors.items()},
    }
    summary.update(
        method=method,
        log=str(log_path),
        robot_source=str(robot_source),
        samples=log.n_samples,
        options=options,
        wall_seconds=wall_seconds,
        sg_filter=sg_filter,
    )
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
        summary["constraints"] = {
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
    (out_dir / "summary.json").write_text(json.dumps(json_safe(summary), indent=2) + "\n")
    spec = model_spec(
        result,
        robot,
        str(robot_source),
        sg_filter={"window_s": float(window), "polyorder": 3},
        training_log=str(log_path),
        velocity_scale=options.get("friction_velocity_scale"),
    )
    spec.update(floating_base=True, contact_frames=list(frames), contact_radius=float(radius))
    (out_dir / "model.json").write_text(json.dumps(json_safe(spec), indent=1) + "\n")

    lines = [
        f"# Identification of {robot.name} (floating base, {method})",
        "",
        f"- log: `{log_path}` ({log.n_samples} samples, {log.duration:.3g} s, {log.rate:.4g} Hz)",
        f"- joints: {', '.join(names)}; contact frames: {', '.join(frames)} (radius {radius:g} m)",
        f"- physically consistent: {summary.get('physically_consistent')}",
    ]
    if method == "smoother":
        lines.append(
            f"- {summary['knots']} knots, {summary['iterations']} iterations, "
            f"{summary['seconds']:.3g} s ({summary['seconds_per_iteration'] or 0:.3g} s/iteration)"
        )
        lines.append(
            f"- total mass: {fb['total_mass_estimate']:.4g} kg"
            + (
                f" (known-mass prior {fb['total_mass_prior']})"
                if fb["total_mass_prior"]
                else " (no total-mass prior: a stance-only log leaves the mass at each stance foot's "
                "contact point unobservable, docs/floating-base.md)"
            )
        )
        c = summary["constraints"]
        lines.append(
            f"- constraints ({c['enforced']}, tolerance {c['tolerance']:g}): contact position "
            f"{c['contact_position_max_m']:.2g} m, velocity {c['contact_velocity_max_m_per_s']:.2g} m/s, "
            f"acceleration {c['contact_acceleration_max_m_per_s2']:.2g} m/s², base-row inverse "
            f"dynamics {c['inverse_dynamics_base_rows_max']:.2g} N|N·m; satisfied: {c['satisfied']}"
        )
        lines.append(f"- training effort relative RMSE: {summary['training_relative_rmse']['overall']:.4g}")
    lines += [
        "",
        "## Parameters (excerpt; all in `parameters.csv`)",
        "",
        markdown_table(parameters_excerpt(table)),
        "",
    ]
    if hasattr(result, "physical_quantities"):
        pq = result.physical_quantities()
        pq.to_csv(out_dir / "physical_quantities.csv", index=False)
        lines += ["## Physical quantities per body", "", markdown_table(pq), ""]
    if method == "smoother":
        plot_convergence(
            result.history, out_dir / "convergence.png", title=f"{robot.name}: cost per iteration"
        )
        plot_forces(
            traj, frames, out_dir / "contact_forces.png", title=f"{robot.name}: estimated contact forces"
        )
        lines += [
            "## Convergence",
            "",
            "![cost per iteration](convergence.png)",
            "",
            "## Estimated contact forces (world frame)",
            "",
            "![contact forces](contact_forces.png)",
            "",
        ]
    (out_dir / "report.md").write_text("\n".join(lines))
    from .. import report_html  # issue 14 hook: self-contained report.html beside report.md
    report_html.write_report_html(out_dir, robot, table, summary, result=result, trajectory=traj,  # issue 14
                                  log=log, knot_index=idx, effort_residual=r_id,  # issue 14
                                  contact_frames=frames,  # issue 14
                                  velocity_scale=options.get("friction_velocity_scale"))  # issue 14
    del pd
    return summary


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


def floating_demo(robot, robot_name, out, duration, rate, noise, seed, quick, quiet, knot_stride):
    """`fg-sysid demo` for a free-flyer robot (MuJoCo logs; see the demo command's help)."""
    import pandas as pd

    from ..datasets.mujoco_sim import (
        MujocoSimError,
        draw_truth,
        simulate_stance,
        to_log,
        write_mujoco_simulation,
    )
    from ..estimation.baseline import parameter_names
    from ..estimation.metrics import base_pose_errors
    from ..estimation.smoother import EstimationError
    from ..floating_validation import floating_heldout_report
    from ..report import joint_units, markdown_table, plot_efforts
    from ..validation import nominal_model

    say = (lambda msg: None) if quiet else echo_err
    t_all = time.perf_counter()
    drawn = draw_truth(robot, seed)
    common = dict(inertial=drawn["inertial"], friction=(drawn["fc"], drawn["fv"]), armature=drawn["armature"])
    say(
        f"demo: MuJoCo {robot.name}, training sway {duration:g} s and held-out sway {duration:g} s at "
        f"{rate:g} Hz, noise {noise:g} (seed {seed})"
    )
    try:
        train = simulate_stance(robot, duration, rate, seed=seed, noise=noise, motion="sway", **common)
        held = simulate_stance(
            robot, duration, rate, seed=seed + 1, noise=noise, motion="sway", sway_amplitude=0.14, **common
        )
    except MujocoSimError as e:
        fail(str(e))
    log_train, log_held = to_log(train), to_log(held)
    feet, radius = tuple(train.foot_frames), float(train.truth["foot_radius"])
    p_true = np.array([train.truth["parameters"][n] for n in parameter_names(robot)])
    m_true = float(drawn["inertial"][:, 0].sum())
    out_path = Path(out)
    with atomic_output_dir(out) as tmp:
        for sub, res in (("train", train), ("heldout", held)):
            (tmp / sub).mkdir()
            write_mujoco_simulation(res, tmp / sub)
        results = {}
        opts = {
            "smoother": {
                "contact_frames": feet,
                "contact_radius": radius,
                "knot_stride": knot_stride,
                "use_forces": False,
            },
            "ls-sg": {"contact_radius": radius},
        }
        for method, sub in (("smoother", "identify"), ("ls-sg", "identify-ls-sg")):
            say(f"demo: identifying with {method}")
            t0 = time.perf_counter()
            try:
                res, est = run_floating_identification(
                    robot, log_train, method, opts[method], verbose=not quiet
                )
            except (EstimationError, ValueError) as e:
                fail(f"{method}: {e}")
            (tmp / sub).mkdir()
            summary = write_floating_identification(
                tmp / sub,
                res,
                est,
                robot,
                log_train,
                out_path / "train" / "log.parquet",
                robot_name,
                method,
                {k: v for k, v in opts[method].items() if k != "contact_frames"},
                time.perf_counter() - t0,
            )
            results[method] = (res, est, summary)
        models = {
            "identified (smoother)": results["smoother"][0],
            "decoupled LS (baseline)": results["ls-sg"][0].estimate,
            "nominal URDF": nominal_model(robot),
            "true parameters (floor)": p_true,
        }
        floors = {
            w: floating_heldout_report(
                p_true, robot, log_held, window_s=w, contact_frames=feet, contact_radius=radius, mode="forces"
            )["overall"]
            for w in WINDOWS
        }
        window = min(floors, key=floors.get)
        rows = []
        for label, m in models.items():
            rep = floating_heldout_report(
                m, robot, log_held, window_s=window, contact_frames=feet, contact_radius=radius, mode="forces"
            )
            cc = floating_heldout_report(
                m,
                robot,
                log_held,
                window_s=window,
                contact_frames=feet,
                contact_radius=radius,
                mode="contact-consistent",
            )
            rows.append(
                {
                    "model": label,
                    "held-out rel. RMSE (measured forces)": rep["overall"],
                    "ratio to floor": rep["overall"] / floors[window],
                    "contact-consistent error": cc["overall"],
                }
            )
        table = pd.DataFrame(rows)
        s = results["smoother"][2]
        fb = s["floating_base"]
        sm = results["smoother"][1]
        ang, pos = base_pose_errors(train.q_pin[sm._idx], sm.state_["q"])
        m_sm = fb["total_mass_estimate"]
        m_ls = float(np.sum(results["ls-sg"][0].estimate[: 10 * robot.n_bodies : 10]))
        reps = {
            label: floating_heldout_report(
                models[label],
                robot,
                log_held,
                window_s=window,
                contact_frames=feet,
                contact_radius=radius,
                mode="forces",
            )
            for label in ("identified (smoother)", "decoupled LS (baseline)", "nominal URDF")
        }
        rep = reps["identified (smoother)"]
        keep = np.asarray(rep["t"]) <= rep["t"][0] + 3.0
        rows_used = np.asarray(rep["rows"])[keep]
        preds = {label: np.asarray(r["tau"])[keep] for label, r in reps.items()}
        plot_efforts(
            np.asarray(rep["t"])[keep],
            np.asarray(log_held.tau)[rows_used],
            preds,
            list(robot.joint_names),
            tmp / "heldout_efforts.png",
            units=joint_units(robot),
            title=f"{robot.name}: held-out efforts, measured vs predicted with the measured contact forces",
        )
        c = s["constraints"]
        lines = [
            f"# fg-sysid demo: {robot.name} (floating base, MuJoCo)",
            "",
            f"- training log: stance sway, {duration:g} s at {rate:g} Hz; held-out log: a sway of another "
            f"amplitude, same true robot (URDF inertias perturbed, joint dry friction, damping, armature; "
            f"seed {seed}); noise std {noise:g} on q [rad], v [rad/s], tau [N·m], gyro [rad/s], "
            f"10× on the accelerometer [m/s²]",
            "- identification uses encoders, efforts, IMU, base pose and contact flags — not the contact "
            "forces",
            f"- smoother: {s['knots']} knots, {s['iterations']} iterations, {s['seconds']:.3g} s, physically "
            f"consistent: {s['physically_consistent']}",
            f"- total mass: true {m_true:.3f} kg, smoother {m_sm:.3f} kg "
            f"({100 * (m_sm / m_true - 1):+.2f} %), "
            f"decoupled LS {m_ls:.3f} kg ({100 * (m_ls / m_true - 1):+.2f} %)",
            f"- smoothed base trajectory vs truth: orientation max {ang.max():.3f}° (RMS "
            f"{np.sqrt(np.mean(ang**2)):.3f}°), position max {1e3 * pos.max():.2f} mm",
            f"- constraints at the solution: contact position {c['contact_position_max_m']:.2g} m, velocity "
            f"{c['contact_velocity_max_m_per_s']:.2g} m/s, acceleration "
            f"{c['contact_acceleration_max_m_per_s2']:.2g} "
            f"m/s², base-row inverse dynamics {c['inverse_dynamics_base_rows_max']:.2g} N|N·m",
            "",
            "## Held-out effort prediction",
            "",
            "Joint efforts predicted from the held-out log's states (Savitzky–Golay on the configuration "
            f"manifold, window {window * 1e3:.0f} ms: the one that gives the true parameters the smallest "
            "error) and its measured contact forces, against the measured efforts; *floor* = the true "
            "parameters through the same prediction (soft contacts, dry friction and rolling feet are not "
            "in the rigid-body model). The contact-consistent error needs no forces "
            "(docs/floating-prediction.md).",
            "",
            markdown_table(table),
            "",
            "![held-out efforts](heldout_efforts.png)",
            "",
            "Reports: [smoother](identify/report.md), [decoupled LS](identify-ls-sg/report.md). Re-run: "
            f"`fg-sysid predict {out_path / 'identify'} {out_path / 'heldout' / 'log.parquet'} "
            "--out pred.csv`.",
            "",
        ]
        (tmp / "report.md").write_text("\n".join(lines))
    click.echo(
        f"held-out effort relative RMSE, {robot.name} (MuJoCo, {duration:g} s at {rate:g} Hz, "
        f"noise {noise:g}):"
    )
    w = max(len(r["model"]) for r in rows)
    for r in rows:
        click.echo(
            f"  {r['model']:<{w}s}  {r['held-out rel. RMSE (measured forces)']:8.4f}  "
            f"({r['ratio to floor']:.2f}x floor)"
        )
    click.echo(
        f"total mass error: smoother {100 * (m_sm / m_true - 1):+.2f} %, "
        f"decoupled {100 * (m_ls / m_true - 1):+.2f} %;"
        f" base orientation error max {ang.max():.3f}°"
    )
    click.echo(
        f"wrote {out} (report.md, heldout_efforts.png, identify/, identify-ls-sg/) in "
        f"{time.perf_counter() - t_all:.1f} s"
    )
    return table
