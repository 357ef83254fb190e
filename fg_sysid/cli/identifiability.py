"""``fg-sysid identifiability``: which inertial parameters a robot's data can determine (RPNA)."""

from __future__ import annotations

import json
import warnings

import click

from .common import fail, load_robot_or_fail, main


@main.command("identifiability")
@click.option("--robot", "robot_name", required=True, help="Catalog name or URDF path.")
@click.option("--floating-base", is_flag=True, help="Free-flyer root (floating base).")
@click.option("--rotors", is_flag=True,
              help="Add one geared rotor per joint (parameter <joint>.rotor_inertia).")
@click.option("--gear-ratio", type=float, default=None,
              help="Rotor gear ratio (default: the model's, else 100 for URDFs).")
@click.option("--no-gravity", is_flag=True, help="Ignore gravity (fixed base: may lose parameters).")
@click.option("--static", "static", is_flag=True, help="Static (gravity-only) data.")
@click.option("--base-wrench-only", is_flag=True,
              help="Floating base: only the 6 base-wrench equations measured.")
@click.option("--numerical", is_flag=True, help="Also report the rank of stacked random-state regressors.")
@click.option("--rtol", type=float, default=None, help="Relative rank tolerance (default 1e-8).")
@click.option("--regroup", is_flag=True, help="Print each base parameter's regrouping.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def identifiability_cmd(robot_name, floating_base, rotors, gear_ratio, no_gravity, static, base_wrench_only,
                        numerical, rtol, regroup, as_json):
    """Structural identifiability (exact RPNA of Wensing, Niemeyer & Slotine): number of identifiable
    parameter combinations, per-body dim V / dim K / dim T, and a regrouped base-parameter set."""
    from ..identifiability import DEFAULT_RTOL, default_rotors, rpna
    from ..identifiability.numerical import numerical_identifiability

    kwargs = {"floating_base": True} if floating_base else {}
    robot = load_robot_or_fail(robot_name, **kwargs)
    rtol = DEFAULT_RTOL if rtol is None else rtol
    if rtol <= 0:
        fail("--rtol must be positive")
    if static and no_gravity:
        fail("--static needs gravity (drop --no-gravity)")
    if base_wrench_only and not robot.floating_base:
        fail("--base-wrench-only needs a floating base (--floating-base)")
    rot = default_rotors(robot.model, gear_ratio=gear_ratio) if rotors else None
    gravity = not no_gravity
    sensing = "base_wrench" if base_wrench_only else "full"
    try:
        res = rpna(robot, rotors=rot, gravity=gravity, static=static, sensing=sensing, rtol=rtol)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res_ng = None
            if gravity and not static and not base_wrench_only:
                res_ng = rpna(robot, rotors=rot, gravity=False, rtol=rtol)
        num = None
        if numerical:
            num = numerical_identifiability(robot, rotors=rot, rows="base" if base_wrench_only else "all",
                                            static=static, rtol=rtol)
    except ValueError as e:
        fail(str(e))

    bp = res.base_parameters()
    out = {"robot": robot.name, "method": "rpna"}
    out.update(res.as_dict())
    if res_ng is not None:
        for b, b0 in zip(out["bodies"], res_ng.bodies, strict=True):
            b["dim_V_without_gravity"], b["dim_K_without_gravity"] = b0.dim_V, b0.dim_K
    out["base_parameters"] = bp.names
    out["regrouping"] = bp.regrouping
    if num is not None:
        out["numerical"] = num.as_dict()
    if as_json:
        click.echo(json.dumps(out))
        return

    mode = "floating" if robot.floating_base else "fixed"
    what = "static data" if static else "base wrench only" if base_wrench_only else "joint torques"
    click.echo(f"robot {robot.name}: {res.identifiable} identifiable parameter combinations of "
               f"{res.n_parameters} ({res.unidentifiable} unidentifiable); {mode} base, "
               f"{'gravity' if gravity else 'no gravity'}, {what}"
               + (f", {len(rot)} rotors" if rot else ""))
    if num is not None:
        click.echo(f"numerical rank of stacked regressors: {num.rank} "
                   f"(margin {num.margin_decades:.1f} decades at rtol {rtol:g})")
    names_w = max(4, *(len(b.name) for b in res.bodies))
    joint_w = max(5, *(len(b.joint) for b in res.bodies))
    click.echo(f"{'body':{names_w}s}  {'joint':{joint_w}s}  {'dim V':>7s}  {'dim K':>7s}  {'dim T':>5s}  "
               f"{'ident.':>6s}")
    for k, b in enumerate(res.bodies):
        if res_ng is not None:
            b0 = res_ng.bodies[k]
            dv, dk = f"{b0.dim_V} ({b.dim_V})", f"{b0.dim_K} ({b.dim_K})"
        else:
            dv, dk = str(b.dim_V), str(b.dim_K)
        click.echo(f"{b.name:{names_w}s}  {b.joint:{joint_w}s}  {dv:>7s}  {dk:>7s}  {b.dim_T:5d}  "
                   f"{b.rank_N:6d}" + ("  +rotor" if b.has_rotor else ""))
    if res_ng is not None:
        click.echo("(dim V, dim K: without gravity, with gravity in parentheses; dim T with gravity)")
    click.echo(f"base parameters ({len(bp.names)}): " + ", ".join(bp.names))
    if regroup:
        for line in bp.regrouping:
            click.echo("  " + line)
