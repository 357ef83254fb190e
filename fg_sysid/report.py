"""Markdown reports and PNG plots (matplotlib, Agg backend: no display needed).

* `plot_convergence` — cost per Levenberg–Marquardt iteration (log scale), one marker style per round.
* `plot_efforts` — measured vs model efforts, one subplot per joint (joints whose effort is not measured
  show the model alone, titled "not measured").
* `markdown_table` — a DataFrame as a GitHub-flavoured markdown table (no extra dependency).
* `parameters_excerpt` — the rows of a parameters table worth reading first (masses, friction, armature).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

#: At most this many points per line in effort plots (longer series are decimated for readability).
MAX_PLOT_POINTS = 4000


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _fmt(x) -> str:
    if isinstance(x, (float, np.floating)):
        if math.isnan(x):
            return "nan"
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
        if x != 0 and (abs(x) >= 1e4 or abs(x) < 1e-3):
            return f"{x:.3e}"
        return f"{x:.4g}"
    if isinstance(x, (bool, np.bool_)):
        return "yes" if x else "no"
    return str(x)


def markdown_table(df: pd.DataFrame) -> str:
    """``df`` as a markdown table (floats with 4 significant digits)."""
    cols = [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(_fmt(x) for x in row) + " |")
    return "\n".join(lines)


def parameters_excerpt(table: pd.DataFrame, max_rows: int = 60) -> pd.DataFrame:
    """Masses (``*.m``), friction and armature rows of a parameters table, at most ``max_rows``."""
    mask = table["name"].str.endswith(".m") | (table["group"] != "inertial")
    return table[mask].head(max_rows).reset_index(drop=True)


def plot_convergence(history: list[dict], path: str | Path, title: str = "") -> Path:
    """Cost after each accepted LM iteration (log y). ``history``: dicts with ``cost`` (and ``round``)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 3.6), dpi=110)
    if history:
        costs = np.array([h["cost"] for h in history], float)
        rounds = np.array([h.get("round", 0) for h in history], int)
        it = np.arange(1, costs.size + 1)
        ax.plot(it, costs, color="0.6", lw=1)
        for r in np.unique(rounds):
            m = rounds == r
            label = f"round {r}" + (" (effort noise re-estimated)" if r else "")
            ax.plot(it[m], costs[m], "o", ms=4, label=label)
        if np.all(costs > 0):
            ax.set_yscale("log")
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "no iterations recorded", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("iteration")
    ax.set_ylabel("cost (weighted sum of squares)")
    ax.set_title(title or "Convergence")
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path)
    plt.close(fig)
    return path


def plot_efforts(t: np.ndarray, measured: np.ndarray | None, predicted: dict[str, np.ndarray],
                 joint_names, path: str | Path, title: str = "", measured_label: str = "measured",
                 units: list[str] | None = None) -> Path:
    """One subplot per joint: ``measured`` (grey) and each ``predicted[label]`` (N, n_joints)."""
    plt = _pyplot()
    joint_names = list(joint_names)
    n = len(joint_names)
    ncols = 1 if n <= 3 else 2
    nrows = math.ceil(n / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(6.0 * ncols, 2.1 * nrows + 0.8), dpi=110,
                             sharex=True, squeeze=False)
    t = np.asarray(t, float)
    step = max(1, int(math.ceil(t.size / MAX_PLOT_POINTS)))
    sl = slice(None, None, step)
    colors = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple"]
    for j, name in enumerate(joint_names):
        ax = axes[j // ncols][j % ncols]
        have = measured is not None and not np.all(np.isnan(measured[:, j]))
        if have:
            ax.plot(t[sl], measured[sl, j], color="0.35", lw=1.6, label=measured_label)
        for k, (label, y) in enumerate(predicted.items()):
            ax.plot(t[sl], np.asarray(y)[sl, j], color=colors[k % len(colors)], lw=1.0, label=label,
                    ls="-" if k == 0 else "--")
        unit = units[j] if units else "N·m"
        ax.set_title(name + ("" if have or measured is None else "  (not measured)"), fontsize=9)
        ax.set_ylabel(f"effort [{unit}]", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(True, alpha=0.3)
    for k in range(n, nrows * ncols):
        axes[k // ncols][k % ncols].axis("off")
    for c in range(ncols):
        axes[-1][c].set_xlabel("t [s]", fontsize=8)
    handles, labels = [], []
    for ax in axes.ravel():
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    height = fig.get_figheight()
    top = 1.0 - 0.55 / height  # title line and legend line above the subplots
    fig.suptitle(title, fontsize=10, x=0.01, y=1.0 - 0.05 / height, ha="left", va="top")
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 1.0 - 0.3 / height), fontsize=8,
               ncol=max(len(labels), 1), frameon=False)
    fig.tight_layout(rect=(0, 0, 1, top))
    path = Path(path)
    fig.savefig(path)
    plt.close(fig)
    return path


def joint_units(robot) -> list[str]:
    """``N·m`` for revolute joints, ``N`` for prismatic ones."""
    out = []
    for name in robot.joint_names:
        jm = robot.model.joints[robot.model.getJointId(name)]
        out.append("N" if jm.shortname().startswith("JointModelP") else "N·m")
    return out
