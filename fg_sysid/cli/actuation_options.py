"""``fg-sysid identify --fit-actuation``: effort-sensor gain/offset in θ (issue 9 item 2).

`parse_fit_actuation` checks the option (bad input -> `fail`, exit 2); `annotate_actuation` adds the
per-joint gain/offset table and the common-scale verdict (`fg_sysid.factors.actuation.actuation_report`) to
``summary.json`` and ``report.md``, and writes ``actuation.csv``.
"""

from __future__ import annotations

import json
from pathlib import Path

from .common import fail

FIT_ACTUATION_HELP = (
    "Smoother, fixed base: estimate per joint the effort sensor's gain and/or offset (logged effort = "
    "gain·τ + offset; comma-separated parts of 'gain,offset', e.g. 'gain,offset' or 'offset'). Gains have a "
    "prior around 1 (log std 0.1), offsets around 0 (std 10 % of the joint's RMS effort). The gains' common "
    "scale trades against the inertias: summary.json 'actuation' says whether the log or the prior set it "
    "(docs/out-of-class.md).")


def parse_fit_actuation(value: str | None, method: str, floating: bool, energy: bool) -> tuple:
    """The parts of ``--fit-actuation`` as a tuple (() when not given)."""
    from ..layout import ACTUATION_PARTS

    if value is None or value.strip() == "":
        return ()
    parts = [p.strip() for p in value.split(",") if p.strip()]
    bad = [p for p in parts if p not in ACTUATION_PARTS]
    if bad:
        fail(f"--fit-actuation: unknown part(s) {', '.join(repr(b) for b in bad)}; choose from "
             f"{', '.join(ACTUATION_PARTS)} (comma-separated)")
    if method != "smoother" or floating:
        fail("--fit-actuation applies to the smoother on fixed-base robots")
    if energy:
        fail("--fit-actuation cannot be combined with --energy yet")
    return tuple(p for p in ACTUATION_PARTS if p in parts)


def annotate_actuation(out_dir, result) -> None:
    """Write ``actuation.csv`` and add ``actuation`` to summary.json and a section to report.md."""
    from ..factors.actuation import actuation_report

    table, scale = actuation_report(result)
    out_dir = Path(out_dir)
    table.to_csv(out_dir / "actuation.csv", index=False)
    path = out_dir / "summary.json"
    summary = json.loads(path.read_text())
    summary["actuation"] = {"parts": list(result.layout.actuation),
                            "joints": table.to_dict(orient="records"), "common_scale": scale}
    path.write_text(json.dumps(summary, indent=2) + "\n")
    md = out_dir / "report.md"
    if md.is_file():
        rows = ["| joint | gain | std | std ratio | offset [N·m] | std | std ratio | gain set by |",
                "|---|---|---|---|---|---|---|---|"]
        rows += [f"| {r.joint} | {r.gain:.4f} | {r.gain_std:.2g} | {r.gain_std_ratio:.2f} | {r.offset:.4g} | "
                 f"{r.offset_std:.2g} | {r.offset_std_ratio:.2f} | {r.gain_determined_by} |"
                 for r in table.itertuples()]
        md.write_text(md.read_text() + "\n".join(
            ["", "## Effort sensors (gain, offset)", "", "Logged effort = gain · joint effort + offset "
             "(`actuation.csv`).", "", *rows, "", scale["message"] + ".", ""]))
