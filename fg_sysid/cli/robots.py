"""``fg-sysid robots``: list catalog robots or describe one."""

from __future__ import annotations

import click

from .common import load_robot_or_fail, main


@main.command("robots")
@click.argument("robot", required=False)
def robots_cmd(robot):
    """List the catalog robots, or describe ROBOT (catalog name or URDF path)."""
    from ..robots import CATALOG

    if robot is None:
        for name, entry in sorted(CATALOG.items()):
            click.echo(f"{name:16s} {entry.description}")
        return
    r = load_robot_or_fail(robot)
    click.echo(r.describe())
    click.echo("  bodies: " + ", ".join(r.body_names))
