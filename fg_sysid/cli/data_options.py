"""CLI pieces of issue 14 shared by commands that read logs: ROS bag options, data checks, prior answer.

``identify`` uses them through a few marked lines:

* `bag_options` (decorator): ``--joint-states-topic``, ``--imu-topic``, ``--contact-topic``,
  ``--bag-rate``, ``--bag-time``; `loader_kwargs` turns them into the loader's ``bag_options``/``echo``;
* `allow_prior_option` (decorator): ``--allow-prior``;
* `run_data_checks`: `fg_sysid.estimation.checks.check_data`, exit 2 naming the reasons when the log
  cannot determine the parameters (unless ``--allow-prior``), warnings otherwise;
* `write_prior_answer`: the ``--allow-prior`` output (the prior, ``std_ratio`` = 1, said in
  summary.json and report.md);
* `annotate_summary`: ``data_checks`` and ``log_conversion`` (what the bag reader did) in summary.json.

The options are stored in the click context's ``meta`` so that commands need no new parameters.
"""

from __future__ import annotations

import functools
import json
import time
import warnings
from pathlib import Path

import click
import numpy as np

from .common import atomic_output_dir, echo_err, fail

_META = "fg_sysid.data_options"


def _meta() -> dict:
    ctx = click.get_current_context(silent=True)
    return {} if ctx is None else ctx.meta.setdefault(_META, {})


def bag_options(f):
    """Add the ROS bag options to a command; their values go to the context (see `loader_kwargs`)."""

    @click.option("--joint-states-topic", default=None,
                  help="ROS bag: sensor_msgs/JointState topic (default: the only one in the bag).")
    @click.option("--imu-topic", default=None,
                  help="ROS bag: sensor_msgs/Imu topic (default: the only one, if any; '' = ignore the IMU).")
    @click.option("--contact-topic", "contact_topics", multiple=True, metavar="FRAME[,FRAME...]=TOPIC",
                  help="ROS bag: contact flags of FRAME from TOPIC (std_msgs Bool / numeric 0-1, or a "
                       "*MultiArray with one entry per FRAME). Repeatable.")
    @click.option("--bag-rate", type=float, default=None,
                  help="ROS bag: resampling rate [Hz] (default: the median joint-state rate).")
    @click.option("--bag-time", type=click.Choice(("header", "receive")), default="header", show_default=True,
                  help="ROS bag: message time = header.stamp (when set) or the bag's receive time.")
    @functools.wraps(f)
    def wrapper(*args, joint_states_topic, imu_topic, contact_topics, bag_rate, bag_time, **kwargs):
        _meta()["bag"] = {"joint_states_topic": joint_states_topic, "imu_topic": imu_topic,
                          "contact_topics": contact_topics, "rate": bag_rate, "time_source": bag_time}
        _meta()["quiet"] = bool(kwargs.get("quiet", False))
        return f(*args, **kwargs)

    return wrapper


def allow_prior_option(f):
    """Add ``--allow-prior`` (see `run_data_checks`)."""

    @click.option("--allow-prior", is_flag=True,
                  help="When the log cannot determine the parameters (too short, no motion, no effort), "
                       "write the prior (std_ratio = 1, said in summary.json) instead of exiting with "
                       "code 2.")
    @functools.wraps(f)
    def wrapper(*args, allow_prior, **kwargs):
        _meta()["allow_prior"] = bool(allow_prior)
        return f(*args, **kwargs)

    return wrapper


def loader_kwargs() -> dict:
    """``bag_options`` and ``echo`` for `fg_sysid.datasets.io.load_log_for_robot` from the options."""
    from ..datasets.io import LogError
    from ..datasets.rosbag import BagOptions, parse_contact_topic

    m = _meta()
    b = m.get("bag")
    if b is None:
        return {}
    if b["rate"] is not None and not (np.isfinite(b["rate"]) and b["rate"] > 0):
        fail(f"--bag-rate must be a positive number of Hz, got {b['rate']}")
    try:
        contacts = tuple(parse_contact_topic(s) for s in b["contact_topics"])
    except LogError as e:
        fail(f"--contact-topic: {e}")
    opts = BagOptions(joint_states_topic=b["joint_states_topic"], imu_topic=b["imu_topic"],
                      contact_topics=contacts, rate=b["rate"], time_source=b["time_source"])
    return {"bag_options": opts, "echo": None if m.get("quiet") else echo_err}


def run_data_checks(robot, log, method: str, velocity_scale: float = 0.05):
    """Check the log (`check_data`); on problems exit 2 with the reasons, or with ``--allow-prior``
    return checks with ``prior_only`` set. Warnings are emitted as ``warning:`` lines."""
    from ..estimation.checks import check_data

    checks = check_data(robot, log, velocity_scale=velocity_scale)
    for w in checks.warnings if not checks.problems else []:
        warnings.warn(f"{log.source}: {w}", stacklevel=2)
    if checks.problems:
        reason = "; ".join(checks.problems)
        if not _meta().get("allow_prior"):
            fail(f"{log.source}: the log cannot determine the parameters: {reason} (--allow-prior writes the "
                 "prior instead)")
        if robot.floating_base:
            fail(f"{log.source}: the log cannot determine the parameters: {reason} (--allow-prior is not "
                 "available for floating bases yet)")
        checks.prior_only = True
        warnings.warn(f"{log.source}: the log cannot determine the parameters ({reason}); --allow-prior: "
                      "writing the prior (std_ratio = 1)", stacklevel=2)
    return checks


def prior_result(robot, log, options: dict):
    """An `IdentificationResult` holding the smoother's prior (estimate = prior mean, std = prior std,
    std_ratio = 1) and a Savitzky–Golay trajectory of the log (50 ms, order 3; raw q for tiny logs)."""
    from ..estimation.noise import savgol_derivatives
    from ..estimation.result import IdentificationResult
    from ..layout import ParameterLayout

    inertia = options.get("inertia", "log-cholesky")
    layout = ParameterLayout.create(robot, inertia if inertia != "raw" else "log-cholesky",
                                    options.get("friction", "coulomb-viscous"),
                                    options.get("friction_velocity_scale", 0.05))
    theta_bar, theta_std = layout.prior()
    t = np.asarray(log.t, float)
    q, v, a = savgol_derivatives(t, np.asarray(log.q, float), 0.05, 3)
    return IdentificationResult.build(
        layout=layout, theta=theta_bar, theta_cov=np.diag(theta_std ** 2), theta_prior=(theta_bar, theta_std),
        t=t, q=q, v=v, a=a, history=[], converged=False, seconds=0.0, noise={}, method="prior", knots=len(t),
        measured_joints=[j for j, m in zip(robot.joint_names, log.tau_measured, strict=True) if m])


def write_prior_answer(out, robot, log, log_path, robot_source, options: dict, checks,
                       write_identification) -> None:
    """The ``--allow-prior`` output directory: identify's files (``write_identification``, passed by
    the caller) with the prior as the answer."""
    t0 = time.perf_counter()
    result = prior_result(robot, log, options)
    with atomic_output_dir(out) as tmp:
        write_identification(tmp, result, {"window_s": 0.05, "polyorder": 3}, robot, log, log_path,
                             robot_source, "smoother", options, time.perf_counter() - t0)
        annotate_summary(tmp, log, checks)
    click.echo(f"wrote {out}: the prior ({len(result.names)} parameters, std_ratio = 1): the log cannot "
               f"determine the parameters ({'; '.join(checks.problems)})")


def _plain(o):
    """JSON fallback for numpy scalars and arrays (everything else we add is plain Python)."""
    return o.tolist() if hasattr(o, "tolist") else str(o)


def annotate_summary(out_dir, log, checks) -> None:
    """Add ``data_checks``, ``prior_only`` (with the reason) and, for bags, ``log_conversion`` to
    summary.json (and a line to report.md) in ``out_dir``."""
    from ..datasets.rosbag import conversion_report

    path = Path(out_dir) / "summary.json"
    summary = json.loads(path.read_text())
    summary["data_checks"] = checks.as_dict() if checks is not None else None
    summary["prior_only"] = bool(checks is not None and checks.prior_only)
    if summary["prior_only"]:
        summary["method"] = "prior"
        summary["prior_only_reason"] = "; ".join(checks.problems)
    report = conversion_report(log)
    if report is not None:
        summary["log_conversion"] = report
    path.write_text(json.dumps(summary, indent=2, default=_plain) + "\n")
    md = Path(out_dir) / "report.md"
    if md.is_file():
        lines = md.read_text().split("\n")
        extra = []
        if summary["prior_only"]:
            extra.append(f"- **the prior, not an estimate**: the log cannot determine the parameters "
                         f"({summary['prior_only_reason']}); `--allow-prior` wrote the prior (std_ratio = 1)")
        elif checks is not None and checks.warnings:
            extra += [f"- data check: {w}" for w in checks.warnings]
        if report is not None:
            extra.append(f"- ROS bag: {report['message']}")
        md.write_text("\n".join(lines[:2] + extra + lines[2:]))
