"""``fg-sysid identify --effort-timing/--effort-hold-period``: what a logged effort means (issues 11 + 9).

`effort_timing_options` is the decorator of the two options; `parse_effort_timing` checks them (bad input
-> `fail`, exit 2) and puts ``effort_timing`` / ``effort_hold_period`` into the smoother's options
(`fg_sysid.estimation.effort_timing`; docs/data-format.md, "Effort timing").
"""

from __future__ import annotations

import math

import click

from .common import fail

EFFORT_TIMING_HELP = (
    "Smoother: what a logged effort means. sample (default): the effort at the sample instant. hold: a "
    "command held zero-order over the next --effort-hold-period (a digital controller's output, as the "
    "project's simulators and MuJoCo truths log it): the dynamics answer it half a hold period later, so "
    "the inverse-dynamics rows take the efforts re-timed to the knots (½(τ[k-1] + τ[k]) for a hold over "
    "the sample period). cv: a delay (−1 .. +1 sample) chosen by blocked cross-validation on the training "
    "log (real drives; fixed-base open chains). summary.json noise.source.tau_timing says what was used.")


def effort_timing_options(f):
    """The ``--effort-timing`` and ``--effort-hold-period`` click options."""
    f = click.option("--effort-hold-period", "effort_hold_period", type=float, default=None,
                     metavar="SECONDS",
                     help="With --effort-timing hold: the controller's hold period [s] (its command "
                          "period); default the log's sample period.")(f)
    return click.option("--effort-timing", "effort_timing", type=click.Choice(("sample", "hold", "cv")),
                        default="sample", show_default=True, help=EFFORT_TIMING_HELP)(f)


def parse_effort_timing(options: dict, timing: str, hold_period: float | None, method: str, robot) -> None:
    """Validate the options and add them to the smoother's ``options`` (nothing for the defaults)."""
    if hold_period is not None:
        if timing != "hold":
            fail("--effort-hold-period applies with --effort-timing hold")
        if not math.isfinite(hold_period) or hold_period <= 0:
            fail(f"--effort-hold-period must be a positive number of seconds, got {hold_period}")
    if timing == "sample":
        return
    if method != "smoother":
        fail(f"--effort-timing {timing} applies to the smoother")
    if timing == "cv" and (robot.floating_base or robot.loops):
        fail("--effort-timing cv applies to fixed-base open-chain robots "
             "(use hold with --effort-hold-period)")
    options["effort_timing"] = timing
    if hold_period is not None:
        options["effort_hold_period"] = float(hold_period)
