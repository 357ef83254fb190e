"""A self-contained ``report.html`` beside ``report.md`` (issue 14 item 2): opens offline, no network.

`write_report_html` builds the page with `xml.etree.ElementTree` (elements, not a string template) and
embeds every plot as a base64 PNG (matplotlib, Agg backend) in an ``<img id="fig-…">``:

* ``fig-efforts`` — measured vs model efforts per joint [N·m | N] over time [s], with the residual
  (model − measured) below each joint;
* ``fig-friction`` — friction torque τ_f(v) per joint [N·m] vs velocity [rad/s] (laws of v + T·a drawn
  at a = 0), identified and prior, the velocity range the data covered shaded;
* ``fig-parameters`` — masses [kg], Coulomb fc [N·m], viscous fv [N·m·s/rad] and armature [kg·m²]:
  identified ± std and the prior mean ± prior std;
* ``fig-shift`` — every parameter's shift from the prior in prior stds, (estimate − prior)/prior_std,
  with error bars std/prior_std (= ``std_ratio``: near 0 the log set it, near 1 the prior did);
* ``fig-identifiability`` — per parameter the structural identifiable fraction ‖P e_k‖² (exact RPNA,
  docs/identifiability.md: 1 alone, between 0 and 1 only in combination, 0 never) and 1 − std_ratio
  (how much this log narrowed the prior); a table lists the structural class counts;
* ``fig-convergence`` — cost per Levenberg–Marquardt iteration (log scale);
* floating bases: ``fig-forces`` (estimated contact forces, world axes [N]) and ``fig-base`` (base
  position [m] and roll/pitch/yaw [rad] of the smoothed trajectory).

A plot whose data the method does not produce (e.g. no iterations for ``ls-sg``) is still present and
says so in its picture, so the page always has the same figure ids for a given base type.
"""

from __future__ import annotations

import base64
import io
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pandas as pd

from .parameterizations import friction_model
from .report import MAX_PLOT_POINTS, _fmt, _pyplot

#: Figure ids of every report (fixed base); floating bases add `FLOATING_FIGURES`.
FIGURES = ("fig-efforts", "fig-friction", "fig-parameters", "fig-shift", "fig-identifiability",
           "fig-convergence")
FLOATING_FIGURES = ("fig-forces", "fig-base")

_CSS = """
body { font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 1200px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; border-bottom: 1px solid #ccc; margin-top: 1.6em; }
figure { margin: 0.8em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-size: 0.9em; color: #444; }
table { border-collapse: collapse; font-size: 0.85em; } td, th { border: 1px solid #ccc; padding: 2px 6px; }
th { background: #f3f3f3; } ul.summary li { margin: 0.15em 0; }
"""


# ---------------------------------------------------------------------------------------------- helpers
def _png(fig) -> str:
    plt = _pyplot()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _message(ax, text):
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=10, color="0.3")


def _grid(n, ncols_max=3, w=4.2, h=2.6):
    plt = _pyplot()
    ncols = min(max(n, 1), ncols_max)
    nrows = max(1, math.ceil(n / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(w * ncols, h * nrows + 0.6), squeeze=False)
    for k in range(n, nrows * ncols):
        axes.ravel()[k].axis("off")
    return fig, axes.ravel()


def _param(table: pd.DataFrame, name: str, col: str = "estimate") -> float:
    row = table.loc[table["name"] == name, col]
    return float(row.iloc[0]) if len(row) else float("nan")


def _friction_law(model_name: str, velocity_scale: float | None):
    """``f(v, values)``: friction torque [N·m] of the estimator's model for one joint's parameters."""
    if model_name == "stribeck6":
        def f(v, g):
            return (g[0] * (np.tanh(g[1] * v) - np.tanh(g[2] * v)) + g[3] * np.tanh(g[4] * v) + g[5] * v)
        return ("g0", "g1", "g2", "g3", "g4", "g5"), f
    if model_name in ("coulomb-viscous-lead", "soft-dry"):  # friction of v + T·a: drawn at a = 0
        law = friction_model(model_name)

        def f(v, p):
            return p[0] * law.dry_shape(v / p[2])[0] + p[1] * v
        return ("fc", "fv", "vs"), f
    if model_name == "coulomb-viscous-scale":  # the velocity scale is a parameter of each joint
        def f(v, p):
            return p[0] * np.tanh(v / p[2]) + p[1] * v
        return ("fc", "fv", "vs"), f
    vs = float(velocity_scale or 0.05)

    def f(v, p):
        return p[0] * np.tanh(v / vs) + p[1] * v
    return ("fc", "fv"), f


# ---------------------------------------------------------------------------------------------- figures
def fig_efforts(t, tau_meas, tau_model, joint_names, units, title):
    plt = _pyplot()
    if t is None or tau_model is None:
        fig, ax = plt.subplots(figsize=(8, 2.4))
        _message(ax, "no model efforts along a smoothed trajectory for this method")
        ax.axis("off")
        fig.suptitle(title, fontsize=10)
        return fig
    n = len(joint_names)
    ncols = 1 if n <= 3 else 2
    nrows = math.ceil(n / ncols)
    fig = plt.figure(figsize=(6.4 * ncols, 3.1 * nrows + 0.8))
    sub = fig.add_gridspec(nrows, ncols, hspace=0.55, wspace=0.28)
    t = np.asarray(t, float)
    step = max(1, int(math.ceil(t.size / MAX_PLOT_POINTS)))
    s = slice(None, None, step)
    for j, name in enumerate(joint_names):
        inner = sub[j // ncols, j % ncols].subgridspec(2, 1, height_ratios=(2.2, 1), hspace=0.08)
        ax, axr = fig.add_subplot(inner[0]), fig.add_subplot(inner[1])
        meas = None if tau_meas is None else np.asarray(tau_meas, float)[:, j]
        have = meas is not None and not np.all(np.isnan(meas))
        if have:
            ax.plot(t[s], meas[s], color="0.35", lw=1.4, label="measured")
        ax.plot(t[s], np.asarray(tau_model, float)[s, j], color="tab:blue", lw=1.0, label="model")
        ax.set_title(name + ("" if have else "  (effort not measured)"), fontsize=9)
        ax.set_ylabel(f"effort [{units[j]}]", fontsize=8)
        ax.tick_params(labelsize=7, labelbottom=False)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper right")
        if have:
            axr.plot(t[s], (np.asarray(tau_model, float)[:, j] - meas)[s], color="tab:red", lw=0.8,
                     label="model − measured")
            axr.legend(fontsize=7, loc="upper right")
        else:
            _message(axr, "no residual (not measured)")
        axr.axhline(0, color="0.5", lw=0.6)
        axr.set_ylabel(f"residual [{units[j]}]", fontsize=8)
        axr.set_xlabel("t [s]", fontsize=8)
        axr.tick_params(labelsize=7)
        axr.grid(alpha=0.3)
    fig.suptitle(title, fontsize=10)
    return fig


def fig_friction(table, joint_names, velocity, model_name, velocity_scale, units):
    keys, law = _friction_law(model_name, velocity_scale)
    fig, axes = _grid(len(joint_names))
    for j, (name, ax) in enumerate(zip(joint_names, axes, strict=False)):
        est = np.array([_param(table, f"{name}.{k}") for k in keys])
        prior = np.array([_param(table, f"{name}.{k}", "prior_mean") for k in keys])
        vj = None if velocity is None else np.asarray(velocity, float)[:, j]
        vmax = float(np.nanmax(np.abs(vj))) if vj is not None and vj.size else 1.0
        vmax = vmax if np.isfinite(vmax) and vmax > 0 else 1.0
        v = np.linspace(-1.3 * vmax, 1.3 * vmax, 401)
        if vj is not None and vj.size:
            ax.axvspan(float(np.nanmin(vj)), float(np.nanmax(vj)), color="tab:green", alpha=0.12,
                       label="velocity range of the data")
        if np.all(np.isfinite(est)):
            ax.plot(v, law(v, est), color="tab:blue", lw=1.4, label="identified")
        if np.all(np.isfinite(prior)):
            ax.plot(v, law(v, prior), color="0.4", lw=1.0, ls="--", label="prior / URDF")
        unit = units[j]
        vunit = "m/s" if unit == "N" else "rad/s"
        ax.set_title(name, fontsize=9)
        ax.set_xlabel(f"v [{vunit}]", fontsize=8)
        ax.set_ylabel(f"τ_f [{unit}]", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6.5, loc="upper left")
    law_text = ("τ_f = g0 (tanh g1 v − tanh g2 v) + g3 tanh g4 v + g5 v" if model_name == "stribeck6" else
                "τ_f = fc·tanh(v/vs) + fv·v (vs per joint, estimated)"
                if model_name == "coulomb-viscous-scale"
                else f"τ_f = fc·tanh(v/{float(velocity_scale or 0.05):g}) + fv·v")
    fig.suptitle(f"Friction per joint: {law_text}", fontsize=10)
    fig.tight_layout()
    return fig


def fig_parameters(table):
    panels = [("mass", lambda n: n.endswith(".m"), "mass [kg]"),
              ("Coulomb fc / g3", lambda n: n.endswith(".fc") or n.endswith(".g3"), "fc [N·m | N]"),
              ("viscous fv / g5", lambda n: n.endswith(".fv") or n.endswith(".g5"), "fv [N·m·s/rad | N·s/m]"),
              ("armature", lambda n: n.endswith(".armature"), "armature [kg·m² | kg]")]
    fig, axes = _grid(4, ncols_max=2, w=6.2, h=3.2)
    for ax, (title, sel, ylabel) in zip(axes, panels, strict=True):
        rows = table[table["name"].map(sel)]
        if rows.empty:
            _message(ax, f"no {title} parameters")
            ax.set_title(title, fontsize=9)
            continue
        x = np.arange(len(rows))
        std = rows["std"].to_numpy(float)
        pstd = rows["prior_std"].to_numpy(float)
        ax.errorbar(x - 0.12, rows["prior_mean"], yerr=np.where(np.isfinite(pstd), pstd, 0), fmt="s",
                    color="0.5", ms=4, capsize=2, label="prior ± prior std")
        ax.errorbar(x + 0.12, rows["estimate"], yerr=np.where(np.isfinite(std), std, 0), fmt="o",
                    color="tab:blue", ms=4, capsize=2, label="identified ± std")
        ax.set_xticks(x)
        ax.set_xticklabels([n.rsplit(".", 1)[0] for n in rows["name"]], rotation=45, ha="right", fontsize=7)
        ax.set_ylabel(ylabel, fontsize=8)
        ax.set_title(title, fontsize=9)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("Identified vs prior (error bars: one standard deviation)", fontsize=10)
    fig.tight_layout()
    return fig


def fig_shift(table):
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(12, 3.8))
    pstd = table["prior_std"].to_numpy(float)
    ok = np.isfinite(pstd) & (pstd > 0)
    if not ok.any():
        _message(ax, "no prior standard deviations (method without a prior, e.g. ls-sg)")
    else:
        z = (table["estimate"].to_numpy(float) - table["prior_mean"].to_numpy(float)) / np.where(ok, pstd, 1)
        ratio = table["std"].to_numpy(float) / np.where(ok, pstd, 1)
        x = np.arange(len(table))
        colors = {"inertial": "tab:blue", "friction": "tab:orange", "armature": "tab:green"}
        for g, c in colors.items():
            m = ok & (table["group"].to_numpy() == g)
            if m.any():
                ax.errorbar(x[m], z[m], yerr=np.where(np.isfinite(ratio[m]), ratio[m], 0), fmt="o", ms=3,
                            capsize=1.5, color=c, lw=0.8, label=g)
        ax.axhline(0, color="0.4", lw=0.8)
        bodies = table["name"].str.rsplit(".", n=1).str[0].to_numpy()
        starts = [k for k in range(len(bodies)) if k == 0 or bodies[k] != bodies[k - 1]]
        ax.set_xticks(starts)
        ax.set_xticklabels([bodies[k] for k in starts], rotation=45, ha="right", fontsize=7)
        ax.legend(fontsize=8, ncol=3)
    ax.set_xlabel("parameter (ticks: first parameter of each body / joint)", fontsize=8)
    ax.set_ylabel("(estimate − prior) / prior std  [–]", fontsize=8)
    ax.set_title("Shift from the prior in prior standard deviations; error bars = posterior std / prior std",
                 fontsize=10)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def fig_identifiability(table, ident: pd.DataFrame | None):
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(12, 3.6))
    x = np.arange(len(table))
    have = False
    if ident is not None and "identifiable_fraction" in ident:
        frac = ident.set_index("name").reindex(table["name"])["identifiable_fraction"].to_numpy(float)
        ax.bar(x, frac, width=0.8, color="tab:purple", alpha=0.45, label="structural ‖P e_k‖² (any data)")
        have = True
    if "std_ratio" in table and np.isfinite(table["std_ratio"].to_numpy(float)).any():
        ax.plot(x, 1 - table["std_ratio"].to_numpy(float), "o", ms=3, color="tab:blue",
                label="1 − std_ratio (this log)")
        have = True
    if not have:
        _message(ax, "no identifiability information for this method")
    bodies = table["name"].str.rsplit(".", n=1).str[0].to_numpy()
    starts = [k for k in range(len(bodies)) if k == 0 or bodies[k] != bodies[k - 1]]
    ax.set_xticks(starts)
    ax.set_xticklabels([bodies[k] for k in starts], rotation=45, ha="right", fontsize=7)
    ax.set_ylim(-0.05, 1.1)
    ax.set_ylabel("fraction determined [–]", fontsize=8)
    ax.set_xlabel("parameter (ticks: first parameter of each body / joint)", fontsize=8)
    ax.set_title("Identifiability: what any data can determine (bars) and what this log did (dots)",
                 fontsize=10)
    if have:
        ax.legend(fontsize=8, loc="lower right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def fig_convergence(history, title):
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    if history:
        costs = np.array([h["cost"] for h in history], float)
        rounds = np.array([h.get("round", 0) for h in history], int)
        it = np.arange(1, costs.size + 1)
        ax.plot(it, costs, color="0.6", lw=1)
        for r in np.unique(rounds):
            m = rounds == r
            ax.plot(it[m], costs[m], "o", ms=4, label=f"round {r}")
        if np.all(costs > 0):
            ax.set_yscale("log")
        ax.legend(fontsize=8)
    else:
        _message(ax, "no iterations (closed-form least squares)")
    ax.set_xlabel("iteration [–]")
    ax.set_ylabel("cost (weighted SSQ) [–]")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    return fig


def fig_forces(traj, frames):
    fig, axes = _grid(max(len(frames), 1), ncols_max=2, w=6.0, h=2.4)
    if traj is None or not frames or f"force.{frames[0]}.x" not in traj:
        _message(axes[0], "no estimated contact forces for this method")
        return fig
    t = traj["t"].to_numpy(float)
    for ax, f in zip(axes, frames, strict=False):
        for c in "xyz":
            ax.plot(t, traj[f"force.{f}.{c}"].to_numpy(float), lw=1, label=f"f_{c}")
        ax.set_title(f, fontsize=9)
        ax.set_ylabel("force [N]", fontsize=8)
        ax.set_xlabel("t [s]", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, ncol=3, loc="upper right")
    fig.suptitle("Estimated contact forces (world axes, ground on foot)", fontsize=10)
    fig.tight_layout()
    return fig


def fig_base(traj):
    import pinocchio as pin

    plt = _pyplot()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 3.2))
    if traj is None or "base.pos.x" not in traj:
        _message(a1, "no base trajectory for this method")
        a2.axis("off")
        return fig
    t = traj["t"].to_numpy(float)
    for c in "xyz":
        a1.plot(t, traj[f"base.pos.{c}"].to_numpy(float), lw=1, label=c)
    quat = traj[[f"base.quat.{c}" for c in "xyzw"]].to_numpy(float)
    rpy = np.array([pin.rpy.matrixToRpy(pin.Quaternion(w, x, y, z).normalized().toRotationMatrix())
                    for x, y, z, w in quat])
    for k, c in enumerate(("roll", "pitch", "yaw")):
        a2.plot(t, rpy[:, k], lw=1, label=c)
    a1.set_ylabel("base position [m] (world)", fontsize=8)
    a2.set_ylabel("base orientation [rad]", fontsize=8)
    for ax, title in ((a1, "base position"), (a2, "base roll / pitch / yaw")):
        ax.set_xlabel("t [s]", fontsize=8)
        ax.set_title(title, fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------------------------- page
def _table(parent, df: pd.DataFrame):
    tab = ET.SubElement(parent, "table")
    tr = ET.SubElement(tab, "tr")
    for c in df.columns:
        ET.SubElement(tr, "th").text = str(c)
    for row in df.itertuples(index=False):
        tr = ET.SubElement(tab, "tr")
        for x in row:
            ET.SubElement(tr, "td").text = _fmt(x)
    return tab


def _figure(parent, fig_id, png_b64, alt, caption):
    f = ET.SubElement(parent, "figure")
    ET.SubElement(f, "img", {"id": fig_id, "alt": alt, "src": f"data:image/png;base64,{png_b64}"})
    ET.SubElement(f, "figcaption").text = caption


def write_report_html(out_dir, robot, table: pd.DataFrame, summary: dict, *, result=None, t=None,
                      tau_meas=None, tau_model=None, trajectory: pd.DataFrame | None = None, log=None,
                      knot_index=None, effort_residual=None, contact_frames=(),
                      velocity_scale: float | None = None) -> Path:
    """Write ``out_dir/report.html`` (see the module docstring); returns its path.

    Args:
        robot: the identified `RobotModel`; table: parameters table (name, group, estimate, std,
            prior_mean, prior_std, std_ratio); summary: the identify summary dict.
        result: the estimator's result (`IdentificationResult`: history, friction model,
            identifiability; a baseline result: none of those).
        t, tau_meas, tau_model: times [s] and (N, n_joints) measured / model efforts; or, for floating
            bases, ``log`` + ``knot_index`` + ``effort_residual`` (model − measured, (N, n_joints) or
            (N, nv)).
        trajectory: the smoothed trajectory (``v.<joint>`` for the friction velocity range; floating:
            ``base.*`` and ``force.<frame>.*``); contact_frames: the feet (floating bases).
        velocity_scale: vs [rad/s] of the Coulomb tanh when ``result`` does not carry a layout.
    """
    from .report import joint_units

    out_dir = Path(out_dir)
    names = list(robot.joint_names)
    units = joint_units(robot)
    method = str(summary.get("method", ""))
    if tau_model is None and effort_residual is not None and log is not None and knot_index is not None:
        tau_meas = np.asarray(log.tau, float)[knot_index]
        r = np.asarray(effort_residual, float)
        tau_model = tau_meas + (r if r.shape[1] == len(names) else r[:, robot.joint_index_v()])
        t = np.asarray(log.t, float)[knot_index]
    layout = getattr(result, "layout", None)
    fmodel = layout.friction.name if layout is not None else "coulomb-viscous"
    vs = getattr(layout.friction, "velocity_scale", None) if layout is not None else velocity_scale
    if trajectory is not None and all(f"v.{j}" in trajectory for j in names):
        velocity = trajectory[[f"v.{j}" for j in names]].to_numpy(float)
    elif log is not None and getattr(log, "v", None) is not None:
        velocity = np.asarray(log.v, float)
    else:
        velocity = None
    ident = getattr(result, "identifiability", None)
    history = list(getattr(result, "history", []) or [])

    html = ET.Element("html", {"lang": "en"})
    head = ET.SubElement(html, "head")
    ET.SubElement(head, "meta", {"charset": "utf-8"})
    ET.SubElement(head, "title").text = f"fg-sysid: {robot.name} ({method})"
    ET.SubElement(head, "style").text = _CSS
    body = ET.SubElement(html, "body")
    ET.SubElement(body, "h1").text = f"Identification of {robot.name} ({method})"
    ul = ET.SubElement(body, "ul", {"class": "summary"})
    items = [("log", summary.get("log")), ("samples", summary.get("samples")),
             ("knots", summary.get("knots")),
             ("iterations", summary.get("iterations")), ("converged", summary.get("converged")),
             ("physically consistent", summary.get("physically_consistent")),
             ("training effort relative RMSE", (summary.get("training_relative_rmse") or {}).get("overall")),
             ("joints", ", ".join(names)),
             ("locked joints", ", ".join(f"{k}={v}" for k, v in (robot.locked_joints or {}).items()) or None)]
    fb = summary.get("floating_base")
    if isinstance(fb, dict) and fb.get("total_mass_estimate") is not None:
        items.append(("total mass [kg]", fb["total_mass_estimate"]))
    for k, v in items:
        if v is not None:
            ET.SubElement(ul, "li").text = f"{k}: {_fmt(v)}"

    sections = [
        ("Measured vs model efforts (training log)", "fig-efforts",
         fig_efforts(t, tau_meas, tau_model, names, units,
                     f"{robot.name}: measured vs model efforts, residual = model − measured"),
         "Top: measured (grey) and model (blue) effort per joint; bottom: the residual model − measured."),
        ("Friction", "fig-friction", fig_friction(table, names, velocity, fmodel, vs, units),
         "Friction torque vs velocity per joint: identified (blue), prior (dashed); shaded: velocities "
         "the data covered (outside it the curve is extrapolated)."),
        ("Parameters: identified vs prior", "fig-parameters", fig_parameters(table),
         "Masses, Coulomb and viscous friction, armature: identified ± std and prior ± prior std."),
        ("Parameters: shift from the prior", "fig-shift", fig_shift(table),
         "All parameters in prior-std units; error bars = std_ratio (near 0: set by the log, near 1: by "
         "the prior)."),
        ("Identifiable combinations", "fig-identifiability", fig_identifiability(table, ident),
         "Bars: fraction of each parameter's direction in the structurally identifiable subspace (exact "
         "RPNA; 1 = alone, between: only in combination with others, 0 = never). Dots: 1 − std_ratio."),
        ("Convergence", "fig-convergence", fig_convergence(history, f"{robot.name}: cost per iteration"),
         "Cost after each accepted Levenberg–Marquardt iteration; rounds re-weight the effort noise."),
    ]
    if robot.floating_base:
        frames = list(contact_frames)
        sections += [
            ("Contact forces", "fig-forces", fig_forces(trajectory, frames),
             "Estimated contact force per foot, world axes [N]."),
            ("Base trajectory", "fig-base", fig_base(trajectory),
             "Smoothed base position (world) [m] and roll/pitch/yaw [rad]."),
        ]
    for title, fig_id, fig, caption in sections:
        ET.SubElement(body, "h2").text = title
        _figure(body, fig_id, _png(fig), title, caption)
        if fig_id == "fig-identifiability" and ident is not None and "structural" in ident:
            counts = ident["structural"].value_counts().rename_axis("structural")
            counts = counts.reset_index(name="parameters")
            _table(body, counts)
    ET.SubElement(body, "h2").text = "Parameters (all, SI units)"
    _table(body, table[[c for c in ("name", "group", "estimate", "std", "prior_mean", "prior_std",
                                    "std_ratio") if c in table]])
    ET.indent(html, space=" ")
    path = out_dir / "report.html"
    path.write_text("<!DOCTYPE html>\n" + ET.tostring(html, encoding="unicode", method="html") + "\n",
                    encoding="utf-8")
    return path


__all__ = ["FIGURES", "FLOATING_FIGURES", "write_report_html"]
