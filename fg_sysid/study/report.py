"""Study report: summary tables (pandas) and PNG plots from the results table.

* ``summary_table`` — per robot × motion × option × method × σ: runs, failures, and mean / median of
  the held-out effort error and the inertial (all parameters and base parameters), friction and armature
  errors (`fg_sysid.study.runner`);
* ``error_vs_noise.png`` — median held-out error and parameter errors against σ, one line per method;
* ``error_boxes.png`` — box plots of the friction and inertial errors per method (all σ pooled per panel).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..report import _pyplot, markdown_table

METRICS = ("heldout_rmse", "inertial_error", "inertial_base_error", "friction_error", "armature_error")
GROUP = ["robot", "motion", "option", "method", "noise"]


def summary_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Aggregate the rows (one per run) per robot, motion, option, method and noise level."""
    if rows.empty:
        return pd.DataFrame()
    ok = rows[rows["status"] == "ok"]
    g = rows.groupby(GROUP, sort=True)
    out = g.size().rename("runs").to_frame()
    out["failed"] = g["status"].apply(lambda s: int((s != "ok").sum()))
    if len(ok):
        go = ok.groupby(GROUP, sort=True)
        for m in (m for m in METRICS if m in ok.columns):  # older tables lack inertial_base_error
            out[f"{m} mean"] = go[m].mean()
            out[f"{m} median"] = go[m].median()
        out["seconds mean"] = go["seconds_identify"].mean()
    return out.reset_index()


def plot_error_vs_noise(rows: pd.DataFrame, path) -> Path | None:
    ok = rows[rows["status"] == "ok"] if len(rows) else rows
    if ok.empty:
        return None
    plt = _pyplot()
    metrics = [m for m in ("heldout_rmse", "inertial_error", "inertial_base_error", "friction_error")
               if m in ok.columns]
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.4 * len(metrics), 3.8))
    for ax, m in zip(axes, metrics, strict=True):
        for (robot, option, method), d in ok.groupby(["robot", "option", "method"]):
            med = d.groupby("noise")[m].median()
            x = np.maximum(med.index.to_numpy(float), 1e-4)  # σ = 0 drawn at 1e-4 on the log axis
            ax.plot(x, med.to_numpy(), marker="o", label=f"{method} ({robot}, {option})")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("noise σ (σ = 0 at 1e-4)")
        ax.set_title(f"median {m}")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)


def plot_error_boxes(rows: pd.DataFrame, path) -> Path | None:
    ok = rows[rows["status"] == "ok"] if len(rows) else rows
    if ok.empty:
        return None
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    methods = sorted(ok["method"].unique())
    for ax, m in zip(axes, ("friction_error", "inertial_error"), strict=True):
        data = [ok.loc[ok["method"] == meth, m].to_numpy() for meth in methods]
        try:
            ax.boxplot(data, tick_labels=methods)
        except TypeError:  # matplotlib < 3.9 names it labels
            ax.boxplot(data, labels=methods)
        ax.set_yscale("log")
        ax.set_title(f"{m} (all σ, robots, options)")
        ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)


def write_report(rows: pd.DataFrame, out_dir, name: str, counts: dict | None = None) -> Path:
    """``report.md``, ``summary.csv`` and the two plots, in ``out_dir``: written in a temporary directory
    and moved into place file by file (a reader never sees a half-written file)."""
    import os
    import shutil
    import tempfile

    final = Path(out_dir)
    out_dir = Path(tempfile.mkdtemp(prefix=".report.tmp-", dir=final))
    try:
        path = _write_report(rows, out_dir, name, counts)
        for f in out_dir.iterdir():
            os.replace(f, final / f.name)
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
    return final / path.name


def _write_report(rows: pd.DataFrame, out_dir: Path, name: str, counts: dict | None) -> Path:
    lines = [f"# Study {name}", ""]
    if counts:
        lines.append(f"- runs in the grid: {counts['total']}; finished before this invocation: "
                     f"{counts['skipped']}; run now: {counts['ran']} ({counts['failed_now']} failed)")
    n_ok = int((rows["status"] == "ok").sum()) if len(rows) else 0
    lines += [f"- rows: {len(rows)} ({n_ok} ok, {len(rows) - n_ok} failed); table: `results.parquet`", "",
              "Metrics: `heldout_rmse` = relative RMSE of the identified model's efforts on a noise-free "
              "held-out motion of the same true robot; `*_error` = ‖p̂ − p*‖ / ‖p*‖ per group; "
              "`inertial_base_error` = the same over the base parameters β = Kπ (identifiable combinations).",
              ""]
    table = summary_table(rows)
    if len(table):
        cols = ["robot", "motion", "option", "method", "noise", "runs", "failed"] + [
            c for c in table.columns if c.endswith("median")] + (
            ["seconds mean"] if "seconds mean" in table.columns else [])
        lines += ["## Summary (medians over seeds)", "", markdown_table(table[cols]), ""]
        table.to_csv(out_dir / "summary.csv", index=False)
    if plot_error_vs_noise(rows, out_dir / "error_vs_noise.png"):
        lines += ["## Error against noise", "", "![error vs noise](error_vs_noise.png)", ""]
    if plot_error_boxes(rows, out_dir / "error_boxes.png"):
        lines += ["## Friction and inertial errors", "", "![error boxes](error_boxes.png)", ""]
    if len(rows) and (rows["status"] != "ok").any():
        failed = rows.loc[rows["status"] != "ok", ["run_id", "error"]]
        lines += ["## Failed runs", "", markdown_table(failed.reset_index(drop=True)), ""]
    path = out_dir / "report.md"
    path.write_text("\n".join(lines))
    return path
