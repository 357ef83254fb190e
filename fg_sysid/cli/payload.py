"""``fg-sysid payload``: end-effector + payload parameters with guaranteed bounds (issue 16, paper 002)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import click
import numpy as np

from .common import atomic_output_dir, echo_err, fail, load_robot_or_fail, main

INERTIAL = ("m", "mcx", "mcy", "mcz", "ixx", "ixy", "iyy", "ixz", "iyz", "izz")


def _parse_bound(text: str, what: str, allow_absolute: bool) -> tuple[float, float]:
    """'2.5%' -> (0, 0.025); '0.5' -> (0.5, 0) (absolute, N·m) when allowed."""
    s = str(text).strip()
    try:
        if s.endswith("%"):
            rel = float(s[:-1]) / 100.0
            if not (math.isfinite(rel) and 0 <= rel < 1):
                raise ValueError
            return 0.0, rel
        if not allow_absolute:
            raise ValueError
        val = float(s)
        if not (math.isfinite(val) and val >= 0):
            raise ValueError
        return val, 0.0
    except ValueError:
        kind = "a percentage like 2.5% or an absolute value in N·m like 0.3" if allow_absolute else \
            "a percentage like 5%"
        fail(f"{what} {text!r}: expected {kind} (percentages in [0, 100))")


def _read_vector(path: str, what: str) -> dict:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as e:
        fail(f"{what} {path}: cannot read JSON: {e}")
    return data


def _ten(values, what: str) -> np.ndarray:
    if isinstance(values, dict):
        missing = [n for n in INERTIAL if n not in values]
        if missing:
            fail(f"{what}: missing {missing} (keys {list(INERTIAL)})")
        values = [values[n] for n in INERTIAL]
    try:
        x = np.asarray(values, float).reshape(10)
    except (TypeError, ValueError):
        fail(f"{what}: expected 10 numbers (order {', '.join(INERTIAL)}) or an object with those keys")
    if not np.all(np.isfinite(x)):
        fail(f"{what}: values must be finite")
    return x


def _prior_from_model(spec: dict, robot, ee_link, armature, viscous):
    from ..payload import RobotPrior

    phys = spec.get("physical") or {}
    pi = np.array([[phys.get(f"{b}.{s}", np.nan) for s in INERTIAL] for b in robot.body_names])
    if np.isnan(pi).any():
        fail("model.json lacks inertial parameters of some bodies of the robot (was it identified for it?)")
    joints = robot.joint_names
    arm = np.array([phys.get(f"{j}.armature", 0.0) for j in joints]) if armature is None else armature
    fv = np.array([phys.get(f"{j}.fv", 0.0) for j in robot.joint_names]) if viscous is None else viscous
    fc = np.array([phys.get(f"{j}.fc", 0.0) for j in robot.joint_names])
    return RobotPrior.from_robot(robot, ee_link, armature=arm, fc=fc, fv=fv, pi=pi)


def _with_payload(robot, prior, estimate):
    """The robot at its nominal θ_r with the estimated end effector + payload, as export parameters."""
    from ..export import IdentifiedParameters

    pi = prior.pi.copy()
    pi[prior.ee_body] = estimate
    return IdentifiedParameters(robot, pi, np.asarray(prior.fc, float), np.asarray(prior.fv, float),
                                np.asarray(prior.armature, float), "coulomb-viscous", None)


def _export_with_payload(params, tmp: Path, mjcf: bool, urdf: bool) -> None:
    """robot_with_payload.xml / .urdf through `fg_sysid.export` (the writers of ``fg-sysid export``)."""
    from ..export import ExportError, export_mjcf, export_urdf

    try:
        if mjcf:
            try:
                import mujoco  # noqa: F401
            except ImportError as e:
                fail(f"--export-mjcf needs mujoco (pip install 'fg-sysid[sim]'): {e}")
            export_mjcf(params, tmp / "robot_with_payload.xml")
        if urdf:
            export_urdf(params, tmp / "robot_with_payload.urdf")
    except ExportError as e:
        fail(f"cannot export the robot with its payload: {e}")


def _width_plot(hist, path: Path, mode: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    groups = (("mass [kg]", INERTIAL[:1]), ("first moments [kg·m]", INERTIAL[1:4]),
              ("rotational inertia [kg·m²]", INERTIAL[4:]))
    for ax, (title, names) in zip(axes, groups, strict=True):
        for n in names:
            ax.semilogy(hist["t"], hist[f"hi.{n}"] - hist[f"lo.{n}"], marker="o", label=n)
        ax.set_title(f"{title}: width ({mode})")
        ax.set_xlabel("time of update [s]")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


@main.command("payload")
@click.argument("log_path", metavar="LOG", type=click.Path(dir_okay=False))
@click.option("--robot", "robot_name",
              help="Catalog name or URDF path (fixed base). Not needed with --model.")
@click.option("--model", "model_dir", type=click.Path(),
              help="Output directory (or model.json) of 'fg-sysid identify' on the robot WITHOUT payload: "
                   "nominal θ_r (inertias, friction, armature); default: the URDF.")
@click.option("--ee-link", help="Link carrying the payload (default: the last body).")
@click.option("--tau-bound", default="2.5%", show_default=True,
              help="Torque-noise bound: relative to the true torque ('2.5%') or absolute in N·m ('0.3').")
@click.option("--robot-bound", default="5%", show_default=True,
              help="Half-width of the box on every other robot parameter, relative to its nominal value.")
@click.option("--model-margin", default="1%", show_default=True,
              help="Allowance for the momentum balance's model error, relative to each row's torque-noise "
                   "bound (added to the data-derived quadrature margin).")
@click.option("--bounds", "mode", type=click.Choice(["lp", "verified", "first-order"]), default="lp",
              show_default=True, help="lp: exact feasible set (HiGHS); verified: ball-arithmetic enclosure "
                                      "of the least-squares image; first-order: paper 002's radius.")
@click.option("--h", "h", type=int, default=None,
              help="Samples per momentum window [default: 10 for lp (finer windows never loosen the LP "
                   "set), 50 for verified and first-order].")
@click.option("--chunk", type=float, default=1.5, show_default=True,
              help="Online update period [s] (bound after every chunk, intersected with the previous).")
@click.option("--payload-box", type=click.Path(dir_okay=False),
              help="JSON {lower: [10], upper: [10]}: prior box on the end-effector + payload parameters.")
@click.option("--armature", type=float, help="Nominal armature of every joint [kg·m²] (overrides).")
@click.option("--viscous", type=float,
              help="Nominal viscous friction of every joint [N·m·s/rad] (overrides).")
@click.option("--truth", type=click.Path(dir_okay=False),
              help="JSON with the true 10 parameters (list or {m, mcx, …}): containment per parameter.")
@click.option("--export-mjcf", is_flag=True,
              help="Also write robot_with_payload.xml: the robot (nominal θ_r) with the estimated end "
                   "effector + payload, as MJCF (needs the 'sim' extra, mujoco).")
@click.option("--export-urdf", is_flag=True,
              help="Also write robot_with_payload.urdf: the robot's URDF with the nominal θ_r and the "
                   "estimated end effector + payload as the end-effector link's <inertial>.")
@click.option("--out", "out", required=True, type=click.Path(file_okay=False), help="Output directory.")
def payload_cmd(log_path, robot_name, model_dir, ee_link, tau_bound, robot_bound, model_margin, mode, h,
                chunk, payload_box, armature, viscous, truth, export_mjcf, export_urdf, out):
    """Identify the end-effector + payload (10 inertial parameters, about the end-effector frame) from a
    log of q, v, τ with acceleration-free momentum windows, and bound them under bounded torque noise and a
    box on the rest of the robot.

    Writes payload.json (estimate, interval, widths, COM interval, principal-inertia bounds, assumptions,
    timings, containment with --truth), bounds.csv, history.csv (one row per online update) and
    width_over_time.png into --out. Data that no parameter value can explain under the stated bounds give
    "the data contradict the bounds" (exit 2), never an interval.
    """
    from ..datasets.io import LogError, load_log_for_robot, read_log
    from ..payload import DataContradictBounds, NoiseBounds, PayloadError, RobotPrior
    from ..payload.online import run_online
    from ..robots import RobotError
    from ..validation import load_model, robot_from_model

    tau_abs, tau_rel = _parse_bound(tau_bound, "--tau-bound", allow_absolute=True)
    _, robot_rel = _parse_bound(robot_bound, "--robot-bound", allow_absolute=False)
    _, model_rel = _parse_bound(model_margin, "--model-margin", allow_absolute=False)
    if h is None:
        from ..payload.online import DEFAULT_H

        h = DEFAULT_H[mode]
    if h < 1:
        fail(f"--h must be >= 1 sample, got {h}")
    if not (math.isfinite(chunk) and chunk > 0):
        fail(f"--chunk must be a positive duration [s], got {chunk}")
    for name, val in (("--armature", armature), ("--viscous", viscous)):
        if val is not None and not (math.isfinite(val) and val >= 0):
            fail(f"{name} must be >= 0, got {val}")
    if model_dir is None and robot_name is None:
        fail("give --robot (catalog name or URDF) or --model (an 'fg-sysid identify' output)")
    spec = None
    try:
        if model_dir is not None:
            spec = load_model(model_dir)
            robot = robot_from_model(spec)
            log = read_log(log_path, robot, locked_values=spec["robot"].get("locked_joints"))
        else:
            robot = load_robot_or_fail(robot_name)
            robot, log = load_log_for_robot(log_path, robot)
    except (LogError, RobotError, ValueError, FileNotFoundError) as e:
        fail(str(e))
    if robot.floating_base:
        fail(f"robot {robot.name!r} has a floating base: 'payload' supports fixed-base arms")
    if log.v is None or not np.all(np.isfinite(log.v)):
        fail(f"{log_path}: the payload problem needs measured joint velocities v.<joint> at every sample "
             "(paper 002 Assumption 12: encoders give q and v exactly)")
    if not np.all(np.isfinite(log.tau)):
        fail(f"{log_path}: every joint's effort tau.<joint> must be measured at every sample")
    box = None
    if payload_box is not None:
        data = _read_vector(payload_box, "--payload-box")
        if not isinstance(data, dict) or "lower" not in data or "upper" not in data:
            fail(f"--payload-box {payload_box}: expected an object with 'lower' and 'upper'")
        box = (_ten(data["lower"], "--payload-box lower"), _ten(data["upper"], "--payload-box upper"))
        if np.any(box[0] > box[1]):
            fail(f"--payload-box {payload_box}: lower > upper for "
                 f"{[n for n, a, b in zip(INERTIAL, *box, strict=True) if a > b]}")
    truth_vec = _ten(_read_vector(truth, "--truth"), f"--truth {truth}") if truth else None
    arm = None if armature is None else np.full(robot.nv, armature)
    fv = None if viscous is None else np.full(robot.nv, viscous)
    try:
        ee = ee_link if ee_link is not None else -1
        if spec is not None:
            prior = _prior_from_model(spec, robot, ee, arm, fv)
        else:
            prior = RobotPrior.from_robot(robot, ee, armature=arm, fv=fv)
        noise = NoiseBounds(tau_abs=tau_abs, tau_rel=tau_rel, robot_rel=robot_rel, model_rel=model_rel)
        ident = run_online(robot, prior, noise, log.t, log.q, log.v, log.tau, chunk=chunk, mode=mode, h=h,
                           box=box, progress=echo_err)
    except DataContradictBounds as e:
        fail(str(e))
    except PayloadError as e:
        fail(str(e))
    b = ident.current
    hist = ident.history_frame()
    table = b.table(truth_vec)
    clo, chi = b.com_interval()
    llo, lhi = b.principal_inertia_interval()
    ee_name = robot.body_names[prior.ee_body]
    result = {
        "robot": robot.name, "log": str(log_path), "end_effector_link": ee_name, "mode": mode,
        "frame": f"{ee_name} (body frame); Pinocchio order; kg, kg·m, kg·m² about the frame origin",
        "assumptions": {"tau_bound_abs_Nm": tau_abs, "tau_bound_rel": tau_rel, "robot_bound_rel": robot_rel,
                        "model_margin_rel": model_rel,
                        "h": h, "chunk_s": chunk, "payload_box": None if box is None else
                        {"lower": box[0].tolist(), "upper": box[1].tolist()},
                        "robot_prior": "model.json" if spec is not None else "URDF",
                        "q_v_exact": True},
        "parameters": {n: {"estimate": float(b.estimate[i]), "lower": float(b.lower[i]),
                           "upper": float(b.upper[i]), "width": float(b.width[i])}
                       for i, n in enumerate(INERTIAL)},
        "com_interval_m": {"lower": clo.tolist(), "upper": chi.tolist()},
        "principal_inertia_interval_kgm2": {"lower": llo.tolist(), "upper": lhi.tolist(),
                                            "about": "end-effector frame origin"},
        "updates": len(hist), "windows": ident.problem.n_windows, "samples": ident.problem.n_samples,
        "timings_last_update_s": b.timings, "max_update_s": float(hist["update_s"].max()),
        "info": b.info,
    }
    if truth_vec is not None:
        inside = b.contains(truth_vec)
        result["containment"] = {"all": bool(inside.all()),
                                 **{n: bool(x) for n, x in zip(INERTIAL, inside, strict=True)}}
    params = _with_payload(robot, prior, b.estimate) if (export_mjcf or export_urdf) else None
    with atomic_output_dir(out) as tmp:
        _export_with_payload(params, tmp, export_mjcf, export_urdf)
        (tmp / "payload.json").write_text(json.dumps(result, indent=1, default=float) + "\n")
        table.to_csv(tmp / "bounds.csv", index=False)
        hist.to_csv(tmp / "history.csv", index=False)
        _width_plot(hist, tmp / "width_over_time.png", mode)
    click.echo(table.to_string(index=False, float_format=lambda x: f"{x:.5g}"))
    msg = (f"wrote {out}: {mode} bounds after {len(hist)} update(s), {ident.problem.n_windows} windows; "
           f"max update {result['max_update_s']:.2f} s")
    if truth_vec is not None:
        msg += f"; truth contained: {int(b.contains(truth_vec).sum())}/10"
    click.echo(msg)
