"""``fg-sysid excite``: optimized Fourier excitation trajectory (well-conditioned base regressor)."""

from __future__ import annotations

import json

import click

from .common import fail, load_robot_or_fail, main


@main.command("excite")
@click.option("--robot", "robot_name", required=True, help="Catalog name or URDF path (fixed base).")
@click.option("--duration", type=float, default=20.0, show_default=True, help="Period of the trajectory [s].")
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False),
              help="Coefficient CSV (joint,f_hz,q0,a1..aL,b1..bL), usable by `simulate --trajectory`.")
@click.option("--harmonics", type=int, default=5, show_default=True)
@click.option("--samples", type=int, default=50, show_default=True,
              help="Instants per period in the stacked regressor.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--max-evaluations", type=int, default=3000, show_default=True,
              help="Budget of objective evaluations (L-BFGS-B).")
@click.option("--margin", type=float, default=0.1, show_default=True,
              help="Fraction of each joint range kept free at both ends.")
@click.option("--velocity-fraction", type=float, default=0.8, show_default=True)
@click.option("--torque-fraction", type=float, default=0.9, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def excite_cmd(robot_name, duration, out, harmonics, samples, seed, max_evaluations, margin,
               velocity_fraction,
               torque_fraction, as_json):
    """Fourier trajectory (paper 004 App. B) starting and ending at rest, within position, velocity and
    torque limits, minimizing the condition number of the stacked base-parameter regressor."""
    from ..identifiability.excitation_opt import optimize_excitation

    if duration <= 0:
        fail("--duration must be positive")
    if harmonics < 2:
        fail("--harmonics must be >= 2")
    if samples < 2:
        fail("--samples must be >= 2")
    if not (0 <= margin < 0.5) or not (0 < velocity_fraction <= 1) or not (0 < torque_fraction <= 1):
        fail("--margin must be in [0, 0.5), --velocity-fraction and --torque-fraction in (0, 1]")
    robot = load_robot_or_fail(robot_name)
    if robot.floating_base:
        fail("excite supports fixed-base robots only")
    try:
        res = optimize_excitation(
            robot, duration=duration, harmonics=harmonics, n_samples=samples, seed=seed,
            max_evaluations=max_evaluations, margin=margin, velocity_fraction=velocity_fraction,
            torque_fraction=torque_fraction,
        )
    except ValueError as e:
        fail(str(e))
    try:
        res.trajectory.to_csv(out)
    except (ValueError, OSError) as e:
        fail(f"cannot write {out}: {e}")
    info = {"robot": robot.name, "out": str(out), "duration": duration, "harmonics": harmonics,
            "condition": res.condition, "random_condition": res.random_condition,
            "improvement": res.improvement, "torque_ratio": res.torque_ratio, "evaluations": res.evaluations,
            "limit_violations": res.trajectory.check_limits(robot)}
    if as_json:
        click.echo(json.dumps(info))
        return
    click.echo(f"robot {robot.name}: wrote {out} ({robot.n_joints} joints, {harmonics} harmonics, "
               f"period {duration:g} s, at rest at t=0 and t={duration:g} s)")
    click.echo(f"cond(base regressor): optimized {res.condition:.4g}, random (median of "
               f"{len(res.random_conditions)}, same bounds) {res.random_condition:.4g}: "
               f"{res.improvement:.2f}x better")
    click.echo(f"max |tau| / ({torque_fraction:g} * effort limit) = {res.torque_ratio:.3f}; "
               f"{res.evaluations} objective evaluations")
