"""``fg-sysid online``: replay a log sample by sample through the online estimator and the quality gate."""

from __future__ import annotations

import json
import math
import sys
import warnings
from pathlib import Path

import click
import numpy as np

from .common import atomic_output_dir, fail, json_safe, load_robot_or_fail, main

ESTIMATORS = ("auto", "fixed-lag", "gtsam", "windowed")
#: Parameters plotted by default: this many, the best determined (largest |p|/std at the end).
N_PLOTTED = 6


def _positive(name, x, allow_none=False):
    if x is None and allow_none:
        return
    if x is None or not (math.isfinite(x) and x > 0):
        fail(f"{name} must be a positive number, got {x}")


@main.command("online")
@click.argument("log_path", metavar="LOG", type=click.Path(dir_okay=True))
@click.option("--robot", "robot_name", required=True, help="Catalog name or URDF path.")
@click.option(
    "--out",
    "out",
    required=True,
    type=click.Path(file_okay=False),
    help="Output directory (written atomically: complete or absent).",
)
@click.option(
    "--lag",
    type=float,
    default=1.0,
    show_default=True,
    help="Smoother lag [s]: states older than this are marginalized (fixed-lag estimator); the "
    "refit period of the windowed estimator.",
)
@click.option(
    "--forgetting",
    type=float,
    default=None,
    help="Forgetting, needed to track a changing robot; passed to the estimator as is: fixed-lag: θ "
    "random-walk std per √s [θ units]; windowed: the window length [s] (default 20 s). Default: none "
    "(fixed-lag: θ constant).",
)
@click.option(
    "--knot-rate", type=float, default=200.0, show_default=True, help="Smoother knots per second [Hz]."
)
@click.option(
    "--warmup", type=float, default=5.0, show_default=True, help="Log time before the first estimate [s]."
)
@click.option(
    "--realtime",
    is_flag=True,
    help="Replay at log speed (sleep so log time never runs ahead of "
    "wall time); default: as fast as possible.",
)
@click.option(
    "--chunk",
    type=click.Choice(["sample", "knot"]),
    default="knot",
    show_default=True,
    help="Samples per update: one sample, or one knot period's worth.",
)
@click.option(
    "--estimator",
    "kind",
    type=click.Choice(ESTIMATORS),
    default="auto",
    show_default=True,
    help="fixed-lag: issue 13's OnlineEstimator; gtsam: the same window on GTSAM's iSAM2 fixed-lag "
    "smoother (slower; docs/online-gtsam.md); windowed: sliding-window batch refits; auto: fixed-lag when "
    "installed.",
)
@click.option(
    "--margin",
    type=float,
    default=0.05,
    show_default=True,
    help="Gate: a candidate is published when its hold-out torque error is below (1 - margin) "
    "times the published model's.",
)
@click.option(
    "--max-rel-std",
    type=float,
    default=0.3,
    show_default=True,
    help="Gate: largest median relative std of the identifiable parameters.",
)
@click.option(
    "--holdout",
    type=float,
    default=1.0,
    show_default=True,
    help="Gate: seconds of unseen samples each candidate is scored on [s].",
)
@click.option(
    "--sg-window",
    type=float,
    default=None,
    help="SG window of the hold-out accelerations [s]; default: chosen by the classical "
    "baseline's cross-validation on the warm-up samples.",
)
@click.option(
    "--record-period",
    type=float,
    default=0.1,
    show_default=True,
    help="Parameter trajectory: one row at most every this many seconds of log time.",
)
@click.option(
    "--plot-parameters",
    default=None,
    help=f"Comma-separated parameter names for parameters.png (default: the {N_PLOTTED} best-determined).",
)
@click.option("--verbose", is_flag=True, help="One line per estimator refit on stderr.")
def online_cmd(
    log_path,
    robot_name,
    out,
    lag,
    forgetting,
    knot_rate,
    warmup,
    realtime,
    chunk,
    kind,
    margin,
    max_rel_std,
    holdout,
    sg_window,
    record_period,
    plot_parameters,
    verbose,
):
    """Online identification: replay LOG sample by sample (at log speed with --realtime).

    The online estimator updates θ (link inertias, friction, armature) as samples arrive; a quality
    gate publishes a candidate model only when it predicts the next --holdout seconds of unseen
    efforts better than the published model by --margin and its parameters are certain enough
    (--max-rel-std). Bad samples (NaN, repeated or out-of-order time stamps) are reported and skipped,
    gaps reported; the run goes on and nothing published is lost.

    Writes to DIR: theta_trajectory.parquet (t [s], every physical parameter and its std `<name>.std`,
    SI units), events.csv (publish / reject with reason and scores; non-finite / repeated / out-of-order / gap
    samples), model.json (the last published model, for 'fg-sysid predict'), summary.json (latency
    percentiles of the update calls, counts, options), parameters.png (selected parameters ±2σ over
    time, publish times marked) and report.md. See docs/online.md.
    """
    from ..estimation.online_gate import QualityGate
    from ..estimation.online_replay import available_estimators, make_estimator, replay
    from ..estimation.online_stream import StreamError, read_stream

    for name, x in (
        ("--lag", lag),
        ("--knot-rate", knot_rate),
        ("--warmup", warmup),
        ("--holdout", holdout),
        ("--record-period", record_period),
    ):
        _positive(name, x)
    _positive("--forgetting", forgetting, allow_none=True)
    _positive("--sg-window", sg_window, allow_none=True)
    _positive("--max-rel-std", max_rel_std)
    if not (math.isfinite(margin) and 0 <= margin < 1):
        fail(f"--margin must be in [0, 1), got {margin}")
    if kind != "auto" and kind not in available_estimators():
        fail(
            f"--estimator {kind}: not available in this installation (available: "
            f"{', '.join(available_estimators())})"
        )
    robot = load_robot_or_fail(robot_name)
    try:
        if robot.floating_base:  # + base pose, IMU, contact and force columns (issue 13, online_floating)
            from ..estimation.online_floating import read_floating_stream as read_stream
        stream = read_stream(log_path, robot)
    except StreamError as e:
        fail(str(e))
    robot = stream.robot
    plotted = _requested_parameters(plot_parameters, robot)
    try:
        est = make_estimator(
            kind, robot, lag=lag, knot_rate=knot_rate, forgetting=forgetting, warmup=warmup, verbose=verbose
        )
        gate = QualityGate(
            robot,
            robot_name,
            margin=margin,
            max_rel_std=max_rel_std,
            holdout=holdout,
            sg_window=sg_window,
            training_log=str(log_path),
        )
    except ValueError as e:
        fail(str(e))
    finite_t = stream.t[np.isfinite(stream.t)]
    rate = 1.0 / float(np.median(np.diff(finite_t))) if finite_t.size > 1 else knot_rate
    n_chunk = 1 if chunk == "sample" else max(1, int(round(rate / knot_rate)))

    with atomic_output_dir(out) as tmp:
        with click.progressbar(
            length=stream.n_samples, label=f"online {est.kind_}", file=sys.stderr, show_eta=True
        ) as bar:
            res = replay(
                stream,
                est,
                gate,
                chunk=n_chunk,
                realtime=realtime,
                record_period=record_period,
                progress=bar.update,
            )
        summary = _write_outputs(
            Path(tmp),
            res,
            robot,
            robot_name,
            log_path,
            plotted,
            dict(
                lag=lag,
                forgetting=forgetting,
                knot_rate=knot_rate,
                warmup=warmup,
                realtime=realtime,
                chunk_samples=n_chunk,
                margin=margin,
                max_rel_std=max_rel_std,
                holdout_s=holdout,
                record_period_s=record_period,
            ),
            stream,
        )
    lat = {k: summary["latency"].get(k, float("nan")) * 1e3 for k in ("p50_s", "p99_s", "max_s")}
    c = summary["counts"]
    click.echo(
        f"wrote {out}: {c['published']} model(s) published, {c['rejected_candidates']} rejected; "
        f"bad samples: "
        f"{c['bad_samples']}; update latency p50 {lat['p50_s']:.3g} ms, p99 {lat['p99_s']:.3g} ms, "
        f"max {lat['max_s']:.3g} ms"
    )
    if gate.published is None:
        warnings.warn(
            "no candidate passed the quality gate: no model.json written (see events.csv)", stacklevel=1
        )


def _requested_parameters(text, robot) -> list[str] | None:
    if text is None:
        return None
    names = [s.strip() for s in text.split(",") if s.strip()]
    known = set(robot.body_names) | set(robot.joint_names)
    for n in names:
        if n.rpartition(".")[0] not in known:
            fail(
                f"--plot-parameters: {n!r} is not a parameter of robot {robot.name!r} (names are "
                f"<body>.<m|mcx|...> or <joint>.<fc|fv|armature|...>; bodies: {list(robot.body_names)})"
            )
    return names


def _chosen(traj, names, result) -> list[str]:
    """The parameters to plot: the requested ones, else the best determined identifiable ones at the end."""
    if names:
        missing = [n for n in names if n not in traj.columns]
        if missing:
            warnings.warn(
                f"--plot-parameters: {missing} not estimated by this layout: left out", stacklevel=2
            )
        return [n for n in names if n in traj.columns]
    if traj.empty:
        return []
    params = [c for c in traj.columns if c != "t" and not c.endswith(".std")]
    last = traj.iloc[-1]
    ident = None
    table = getattr(result, "identifiability", None) if result is not None else None
    if table is not None:
        ident = set(table.loc[table["structural"] == "identifiable", "name"])
    score = {}
    for p in params:
        s = float(last[f"{p}.std"])
        if (ident is None or p in ident) and s > 0 and np.isfinite(s):
            score[p] = abs(float(last[p])) / s
    return sorted(score, key=score.get, reverse=True)[:N_PLOTTED]


def plot_parameters(traj, names, publish_t, path, title=""):
    """Each parameter's online estimate with its ±2σ band over log time; publish times as vertical lines."""
    from ..report import _pyplot

    plt = _pyplot()
    n = max(1, len(names))
    fig, axes = plt.subplots(n, 1, figsize=(9, 1.7 * n + 0.8), sharex=True, squeeze=False)
    t = traj["t"].to_numpy() if len(traj) else np.zeros(0)
    for ax, name in zip(axes[:, 0], names, strict=False):
        p, s = traj[name].to_numpy(), traj[f"{name}.std"].to_numpy()
        ax.fill_between(t, p - 2 * s, p + 2 * s, alpha=0.25, lw=0, step="post", label="±2σ")
        ax.step(t, p, where="post", lw=1.2, label="estimate")
        for k, tp in enumerate(publish_t):
            ax.axvline(tp, color="tab:green", lw=0.8, alpha=0.6, label="published" if k == 0 else None)
        ax.set_ylabel(name, fontsize=8)
        ax.grid(alpha=0.3)
    axes[0, 0].legend(loc="upper right", fontsize=7, ncol=3)
    axes[-1, 0].set_xlabel("log time t [s]")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _write_outputs(out_dir: Path, res, robot, robot_name, log_path, plotted, options, stream) -> dict:
    from ..report import markdown_table

    gate, est = res.gate, res.estimator
    res.trajectory.to_parquet(out_dir / "theta_trajectory.parquet", index=False)
    res.events.to_csv(out_dir / "events.csv", index=False)
    if gate.published is not None:
        (out_dir / "model.json").write_text(json.dumps(json_safe(gate.published), indent=1) + "\n")
    ev = res.events
    bad_kinds = ("non-finite", "repeated", "out-of-order", "estimator-reject")
    counts = dict(res.counts)
    counts["bad_samples"] = int(ev["decision"].isin(bad_kinds).sum())
    counts["gaps"] = int((ev["decision"] == "gap").sum())
    publish_t = ev.loc[ev["decision"] == "publish", "t"].tolist()
    stats = _estimator_stats(est)
    finite_t = stream.t[np.isfinite(stream.t)]
    summary = {
        "command": "online",
        "robot": robot.name,
        "robot_source": str(robot_name),
        "joints": list(robot.joint_names),
        "locked_joints": robot.locked_joints,
        "log": str(log_path),
        "log_duration_s": float(finite_t.max() - finite_t.min()) if finite_t.size else None,
        "estimator": est.kind_,
        "options": options,
        "gate": {
            "margin": gate.margin,
            "max_rel_std": gate.max_rel_std,
            "holdout_s": gate.holdout,
            "uncertainty": f"quantile {gate.quantile:g} of std/max(|p|, prior std) over the "
            "structurally identifiable parameters",
            "sg_filter": gate.sg_filter,
        },
        "latency": {**res.latency_summary(), "note": "wall time of each estimator update call (one chunk)"},
        "counts": counts,
        "published_times_s": publish_t,
        "published": None if gate.published is None else gate.published.get("online"),
        "estimator_stats": stats,
        "wall_seconds": res.wall_s,
    }
    (out_dir / "summary.json").write_text(json.dumps(json_safe(summary), indent=2) + "\n")
    names = _chosen(res.trajectory, plotted, gate.published_result or est.result())
    plot_parameters(
        res.trajectory,
        names,
        publish_t,
        out_dir / "parameters.png",
        title=f"{robot.name}: online estimates (±2σ), publish times in green",
    )
    lat = summary["latency"]
    lines = [
        f"# Online identification of {robot.name} ({est.kind_} estimator)",
        "",
        f"- log: `{log_path}` ({stream.n_samples} samples, {summary['log_duration_s'] or 0:.4g} s); "
        f"replayed in {res.wall_s:.3g} s" + (" at log speed" if options["realtime"] else ""),
        f"- lag {options['lag']:g} s, forgetting {options['forgetting']}, knots {options['knot_rate']:g} Hz, "
        f"warm-up {options['warmup']:g} s, {options['chunk_samples']} sample(s) per update",
        f"- gate: margin {gate.margin:g}, max relative std {gate.max_rel_std:g}, hold-out "
        f"{gate.holdout:g} s, SG window {(gate.sg_filter or {}).get('window_s', float('nan')):.3g} s",
        f"- {counts['published']} published, {counts['rejected_candidates']} rejected candidates; "
        f"{counts['bad_samples']} bad samples skipped, {counts['gaps']} gaps",
        "",
        "## Update latency",
        "",
        markdown_table(_latency_frame(lat)),
        "",
        "## Parameters over time",
        "",
        "![parameters](parameters.png)",
        "",
        "## Gate decisions",
        "",
    ]
    gate_rows = ev[ev["decision"].isin(["publish", "reject"])]
    lines += [
        markdown_table(
            gate_rows[["t", "decision", "candidate_score", "published_score", "rel_std", "reason"]].head(50)
        )
        if len(gate_rows)
        else "(none)",
        "",
    ]
    bad = ev[~ev["decision"].isin(["publish", "reject"])]
    if len(bad):
        lines += [
            "## Stream problems (first 20)",
            "",
            markdown_table(bad[["t", "decision", "reason"]].head(20)),
            "",
        ]
    if gate.published is None:
        lines += ["No candidate passed the gate: no model.json.", ""]
    (out_dir / "report.md").write_text("\n".join(lines))
    return summary


def _estimator_stats(est) -> dict:
    """The estimator's ``stats_`` (a dict or a dataclass) for summary.json: scalars as they are, lists of
    numbers as mean / max / count."""
    import dataclasses

    raw = getattr(est, "stats_", None)
    if dataclasses.is_dataclass(raw):
        raw = dataclasses.asdict(raw)
    out = {}
    for k, v in (raw or {}).items():
        if isinstance(v, (list, tuple, np.ndarray)):
            x = np.asarray(v, float).ravel() if len(v) else np.zeros(0)
            out[k] = {"mean": float(x.mean()), "max": float(x.max()), "count": int(x.size)} if x.size else {}
        elif isinstance(v, (int, float, str, bool, type(None), np.number)):
            out[k] = v
    return out


def _latency_frame(lat: dict):
    import pandas as pd

    keys = ("p50_s", "p95_s", "p99_s", "max_s", "mean_s")
    return pd.DataFrame(
        {
            "statistic": [k[:-2] for k in keys if k in lat],
            "latency [ms]": [lat[k] * 1e3 for k in keys if k in lat],
        }
    )
