"""``fg-sysid export``: an identified model as URDF (yourdfpy) and/or MJCF (MuJoCo MjSpec)."""

from __future__ import annotations

import contextlib
from pathlib import Path

import click

from .common import atomic_output_file, fail, main


@main.command("export")
@click.argument("model_dir", metavar="DIR", type=click.Path(file_okay=False))
@click.option("--urdf", "urdf_out", type=click.Path(dir_okay=False), default=None,
              help="Write the robot's URDF with the identified <inertial> and <dynamics> here.")
@click.option("--mjcf", "mjcf_out", type=click.Path(dir_okay=False), default=None,
              help="Write a MuJoCo model (MJCF) with the identified inertias, armature, frictionloss and "
                   "damping here.")
def export_cmd(model_dir, urdf_out, mjcf_out):
    """Export the model identified in DIR (an 'fg-sysid identify' output) to URDF and/or MJCF.

    \b
    --urdf FILE  the robot's own URDF (catalog robot or the URDF path it was identified with),
                 rewritten with yourdfpy: per link <inertial> (mass [kg], origin = COM in the link
                 frame [m], inertia about the COM in link axes [kg·m²]); per identified joint
                 <dynamics friction="fc" damping="fv"> (Coulomb [N·m], viscous [N·m·s/rad]).
                 A Pinocchio body merges a joint's child link with its fixed children (and links
                 below locked joints): those keep their URDF inertial and the child link carries
                 the rest, so the merged body equals the identified one (docs/export.md).
                 URDF has no armature: see parameters.csv or the MJCF.
    --mjcf FILE  a MuJoCo model of the identified robot (one body per moving joint, joints locked
                 for identification are rigid): body inertias, joint armature, frictionloss = fc,
                 damping = fv, one motor per joint; floating bases add foot spheres, floor, IMU.
                 soft-dry / coulomb-viscous-lead models also get per-joint solreffriction and
                 solimpfriction so that MuJoCo's friction loss is fc·clip((v + T·a)/vs) (exact for
                 soft-dry, the clip of the same width for the tanh law; docs/export.md).

    The estimator's friction is fc·tanh(v/vs) + fv·v; URDF and MuJoCo have dry Coulomb friction and
    viscous damping (equal for |v| >> vs). Both files are written atomically, or none on error.
    """
    from ..export import ExportError, export_mjcf, export_urdf, identified_parameters
    from ..robots import RobotError
    from ..validation import load_model, robot_from_model

    if urdf_out is None and mjcf_out is None:
        fail("nothing to export: give --urdf FILE and/or --mjcf FILE")
    if urdf_out is not None and mjcf_out is not None and Path(urdf_out).resolve() == Path(mjcf_out).resolve():
        fail(f"--urdf and --mjcf name the same file {urdf_out}")
    if not Path(model_dir).is_dir():
        fail(f"{model_dir}: model directory not found (give the --out directory of 'fg-sysid identify')")
    try:
        spec = load_model(model_dir)
        robot = robot_from_model(spec)
        params = identified_parameters(spec, robot)
    except (RobotError, ValueError, FileNotFoundError) as e:
        fail(str(e))
    table = None
    try:
        with contextlib.ExitStack() as stack:
            if urdf_out is not None:
                tmp = stack.enter_context(atomic_output_file(urdf_out))
                table = export_urdf(params, tmp)
            if mjcf_out is not None:
                tmp = stack.enter_context(atomic_output_file(mjcf_out))
                export_mjcf(params, tmp)
    except ExportError as e:
        fail(str(e))
    except OSError as e:
        fail(f"cannot write the export: {e}")
    if table is not None:
        click.echo(f"wrote {urdf_out}: {robot.name}, {len(table)} link inertials, "
                   f"{robot.n_joints} joint <dynamics> (source {robot.urdf_path})")
        for row in table.itertuples(index=False):
            click.echo(f"  {row.link:<28s} {row.role:<22s} mass {row.mass:.6g} kg")
        click.echo("  armature is not part of URDF: " + ", ".join(
            f"{j}={a:.4g}" for j, a in zip(robot.joint_names, params.armature, strict=True)))
    if mjcf_out is not None:
        lead = ", solreffriction/solimpfriction from vs and T" if params.lead is not None else ""
        click.echo(f"wrote {mjcf_out}: {robot.name}, {robot.n_bodies} bodies, {robot.n_joints} joints "
                   f"(armature, frictionloss = fc, damping = fv{lead})")
