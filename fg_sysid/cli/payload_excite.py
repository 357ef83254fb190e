"""``fg-sysid payload-excite``: a safe exciting motion for payload identification (issue 16, paper 002)."""

from __future__ import annotations

import json
import math
import time

import click
import numpy as np

from .common import atomic_output_dir, echo_err, fail, load_robot_or_fail, main


def _floats(text: str, n: int, what: str) -> list[float]:
    try:
        vals = [float(x) for x in str(text).split(",")]
    except ValueError:
        vals = []
    if len(vals) != n or not all(math.isfinite(v) for v in vals):
        fail(f"{what} {text!r}: expected {n} comma-separated numbers")
    return vals


def _obstacles(spheres, boxes):
    from ..payload.excitation import BoxObstacle, SphereObstacle

    out = []
    for s in spheres:
        x, y, z, r = _floats(s, 4, "--sphere")
        if r <= 0:
            fail(f"--sphere {s!r}: the radius must be positive")
        out.append(SphereObstacle((x, y, z), r))
    for b in boxes:
        v = _floats(b, 6, "--box-obstacle")
        if min(v[3:]) <= 0:
            fail(f"--box-obstacle {b!r}: the half extents must be positive")
        out.append(BoxObstacle(tuple(v[:3]), tuple(v[3:])))
    return tuple(out)


def _plot(t, q, ratio_t, ratio, robot, path, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lo, hi = robot.position_limits()
    fig, axes = plt.subplots(1, 2, figsize=(12, 3.8))
    for j, name in enumerate(robot.joint_names):
        axes[0].plot(t, 2 * (q[:, j] - lo[j]) / (hi[j] - lo[j]) - 1, label=name, lw=1)
    axes[0].axhline(1, color="k", lw=0.6)
    axes[0].axhline(-1, color="k", lw=0.6)
    axes[0].set_title("joint position, normalized to its range (±1 = limit)")
    axes[0].set_xlabel("t [s]")
    axes[0].legend(fontsize=6, ncol=2)
    axes[1].plot(ratio_t, ratio, color="C3")
    axes[1].set_title("max |τ| / effort limit over the parameter box")
    axes[1].set_xlabel("t [s]")
    axes[1].set_ylim(0, max(1.0, float(np.max(ratio)) * 1.05))
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


@main.command("payload-excite")
@click.option("--robot", "robot_name",
              help="Catalog name or URDF path (fixed base). Not needed with --model.")
@click.option("--model", "model_dir", type=click.Path(),
              help="Output of 'fg-sysid identify' on the robot WITHOUT payload (nominal θ_r); default: URDF.")
@click.option("--ee-link", help="Link carrying the payload (default: the last body).")
@click.option("--max-mass", type=float, default=3.0, show_default=True,
              help="Largest payload mass [kg] (with --radius: the rigorous initial payload box).")
@click.option("--radius", type=float, default=0.2, show_default=True,
              help="Radius [m] of a ball about the end-effector frame origin that contains the payload.")
@click.option("--payload-box", type=click.Path(dir_okay=False),
              help="JSON {lower: [10], upper: [10]} of the end-effector + payload parameters (instead of "
                   "--max-mass/--radius).")
@click.option("--robot-bound", default="5%", show_default=True,
              help="Half-width of the box on every other robot parameter, relative to its nominal value.")
@click.option("--duration", type=float, default=7.5, show_default=True, help="Motion duration [s].")
@click.option("--family", type=click.Choice(["bezier", "fourier"]), default="bezier", show_default=True,
              help="bezier: C² quintic pieces (paper 002; position/velocity limits in continuous time); "
                   "fourier: rest-to-rest Fourier series.")
@click.option("--pieces", type=int, default=4, show_default=True, help="Bézier pieces.")
@click.option("--harmonics", type=int, default=4, show_default=True, help="Fourier harmonics.")
@click.option("--torque-fraction", type=float, default=0.8, show_default=True,
              help="Box-robust torque limit as a fraction of the effort limits (the rest is for feedback).")
@click.option("--velocity-fraction", type=float, default=0.5, show_default=True)
@click.option("--margin", type=float, default=0.15, show_default=True,
              help="Fraction of each joint range kept free at both ends.")
@click.option("--max-evaluations", type=int, default=300, show_default=True,
              help="Budget of objective evaluations (L-BFGS-B).")
@click.option("--random", "random_only", is_flag=True,
              help="No optimization: one random motion of the family under the same limits (a baseline).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--rate", type=float, default=1000.0, show_default=True,
              help="Sample rate [Hz] of the written trajectory.")
@click.option("--sphere", "spheres", multiple=True, metavar="X,Y,Z,R",
              help="Spherical obstacle in the world frame [m] (repeatable).")
@click.option("--box-obstacle", "boxes", multiple=True, metavar="CX,CY,CZ,HX,HY,HZ",
              help="Axis-aligned box obstacle: centre and half extents in the world frame [m] (repeatable).")
@click.option("--out", "out", required=True, type=click.Path(file_okay=False), help="Output directory.")
def payload_excite_cmd(robot_name, model_dir, ee_link, max_mass, radius, payload_box, robot_bound, duration,
                       family, pieces, harmonics, torque_fraction, velocity_fraction, margin, max_evaluations,
                       random_only, seed, rate, spheres, boxes, out):
    """Optimize a safe exciting motion for payload identification: minimize the condition number of the
    momentum observation matrix Y (the rows `fg-sysid payload` bounds with) subject to joint position and
    velocity limits and to the torque limits checked over the WHOLE parameter box (payload box × θ_r box),
    optionally avoiding sphere / box obstacles.

    Writes into --out: trajectory.csv (t [s], q.<joint> [rad], v.<joint> [rad/s], a.<joint> [rad/s²] at
    --rate), excitation.json (cond(Y), box-robust torque ratio, limit checks, the box, timings) and
    excitation.png (positions in their ranges and the box-robust torque ratio over time).
    """
    from ..payload import PayloadError, RobotPrior
    from ..payload.excitation import (
        SafeExcitation,
        optimize_safe_excitation,
        payload_box_from_geometry,
        random_safe_motion,
    )
    from ..robots import RobotError
    from ..validation import load_model, robot_from_model
    from .payload import _parse_bound, _prior_from_model, _read_vector, _ten

    _, robot_rel = _parse_bound(robot_bound, "--robot-bound", allow_absolute=False)
    for name, val, ok in (("--duration", duration, duration > 0), ("--rate", rate, rate > 0),
                          ("--max-mass", max_mass, max_mass >= 0), ("--radius", radius, radius >= 0)):
        if not (math.isfinite(val) and ok):
            fail(f"{name} must be {'positive' if name in ('--duration', '--rate') else '>= 0'}, got {val}")
    if not (0 < torque_fraction <= 1 and 0 < velocity_fraction <= 1 and 0 <= margin < 0.5):
        fail("--torque-fraction and --velocity-fraction must be in (0, 1], --margin in [0, 0.5)")
    if family == "bezier" and pieces < 2:
        fail(f"--pieces must be >= 2 (one interior waypoint), got {pieces}")
    if family == "fourier" and harmonics < 2:
        fail(f"--harmonics must be >= 2, got {harmonics}")
    if max_evaluations < 1:
        fail(f"--max-evaluations must be >= 1, got {max_evaluations}")
    if duration * rate < 2:
        fail(f"--duration {duration} s at --rate {rate} Hz gives fewer than 2 samples")
    if model_dir is None and robot_name is None:
        fail("give --robot (catalog name or URDF) or --model (an 'fg-sysid identify' output)")
    obstacles = _obstacles(spheres, boxes)
    spec = None
    try:
        if model_dir is not None:
            spec = load_model(model_dir)
            robot = robot_from_model(spec)
        else:
            robot = load_robot_or_fail(robot_name)
    except (RobotError, ValueError, FileNotFoundError) as e:
        fail(str(e))
    if robot.floating_base:
        fail(f"robot {robot.name!r} has a floating base: 'payload-excite' supports fixed-base arms")
    try:
        ee = ee_link if ee_link is not None else -1
        prior = (_prior_from_model(spec, robot, ee, None, None) if spec is not None
                 else RobotPrior.from_robot(robot, ee))
        if payload_box is not None:
            data = _read_vector(payload_box, "--payload-box")
            if not isinstance(data, dict) or "lower" not in data or "upper" not in data:
                fail(f"--payload-box {payload_box}: expected an object with 'lower' and 'upper'")
            box = (_ten(data["lower"], "--payload-box lower"), _ten(data["upper"], "--payload-box upper"))
            if np.any(box[0] > box[1]):
                fail(f"--payload-box {payload_box}: lower > upper somewhere")
            box_source = str(payload_box)
        else:
            box = payload_box_from_geometry(prior, max_mass, radius)
            box_source = f"payload <= {max_mass:g} kg within {radius:g} m of the end-effector frame"
        ev = SafeExcitation(robot, prior, box, robot_rel=robot_rel, duration=duration,
                            torque_fraction=torque_fraction, obstacles=obstacles)
        fam = {"family": family, "harmonics": harmonics, "pieces": pieces, "margin": margin,
               "velocity_fraction": velocity_fraction}
        tic = time.perf_counter()
        if random_only:
            traj = random_safe_motion(ev, seed=seed, **fam)
            info = {"evaluations": 0}
        else:
            echo_err(f"optimizing a {family} motion of {duration:g} s (≤ {max_evaluations} evaluations)…")
            traj, info = optimize_safe_excitation(ev, seed=seed, max_evaluations=max_evaluations, **fam)
        opt_s = time.perf_counter() - tic
    except PayloadError as e:
        fail(str(e))
    n = int(round(duration * rate)) + 1
    t = np.arange(n) / rate
    q, v, a = traj.evaluate(t)
    lo, hi = robot.position_limits()
    vlim = robot.velocity_limits()
    n_check = max(4 * ev.n_torque, 256)
    t_check = np.linspace(0.0, duration, n_check)
    qc, vc, ac = traj.evaluate(t_check)
    ratio = np.array([ev._ratio(qc[k], vc[k], ac[k]) for k in range(n_check)])
    clearance = ev.clearance(traj, n=n_check) if obstacles else None
    checks = {"position_violations": int(np.sum((q < lo) | (q > hi))),
              "velocity_violations": int(np.sum(np.abs(v) > vlim)),
              "max_position_fraction_of_range": float(np.max(np.abs(2 * (q - lo) / (hi - lo) - 1))),
              "max_velocity_fraction": float(np.max(np.abs(v) / vlim)),
              "box_robust_torque_ratio": float(ratio.max()), "torque_fraction": torque_fraction,
              "check_instants": n_check, "min_clearance_m": clearance}
    result = {"robot": robot.name, "end_effector_link": robot.body_names[prior.ee_body], "family": family,
              "duration_s": duration, "rate_hz": rate, "seed": seed, "optimized": not random_only,
              "cond_Y": ev.condition(traj),
              "cond_Y_about": f"momentum matrix of {ev.h}-sample windows at {ev.rate:g} Hz, "
                              "no column scaling",
              "evaluations": info.get("evaluations", 0), "seconds": opt_s, "checks": checks,
              "payload_box": {"source": box_source, "lower": np.asarray(box[0]).tolist(),
                              "upper": np.asarray(box[1]).tolist()},
              "robot_bound_rel": robot_rel, "obstacles": [repr(o) for o in obstacles]}
    if (checks["position_violations"] or checks["velocity_violations"]
            or ratio.max() > torque_fraction * 1.001):
        fail(f"the motion violates the limits at the output rate ({checks}); report this as a bug")
    import pandas as pd

    cols = {"t": t}
    for j, name in enumerate(robot.joint_names):
        cols[f"q.{name}"], cols[f"v.{name}"], cols[f"a.{name}"] = q[:, j], v[:, j], a[:, j]
    with atomic_output_dir(out) as tmp:
        pd.DataFrame(cols).to_csv(tmp / "trajectory.csv", index=False)
        (tmp / "excitation.json").write_text(json.dumps(result, indent=1, default=float) + "\n")
        _plot(t, q, t_check, ratio, robot, tmp / "excitation.png",
              f"{robot.name}: {'random' if random_only else 'optimized'} {family} motion, "
              f"cond(Y) {result['cond_Y']:.3g}")
    click.echo(f"wrote {out}: {family} motion of {duration:g} s at {rate:g} Hz, "
               f"cond(Y) {result['cond_Y']:.4g}, "
               f"box-robust max |τ|/limit {ratio.max():.3f} (≤ {torque_fraction:g}), "
               f"{result['evaluations']} evaluations in {opt_s:.1f} s")
