"""``fg-sysid study``: a grid of simulate → identify → evaluate runs, resumable, local or on Dask."""

from __future__ import annotations

import click

from .common import atomic_output_file, echo_err, fail, main


@main.command("study")
@click.argument("config_path", metavar="CONFIG.yaml", type=click.Path(dir_okay=False))
@click.option("--out", "out", default=None, type=click.Path(file_okay=False),
              help="Study directory (default: ./study-<name>); runs/<id>.parquet rows, "
                   "results.parquet, report.md, PNG plots. Finished runs found there are skipped.")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="Dask scheduler address (e.g. tcp://10.0.0.1:8786) to run on a cluster; default: a local "
                   "process pool.")
@click.option("--workers", type=int, default=None,
              help="Local pool size [processes]; default: CPU count; 0 = run in this process.")
@click.option("--retry-failed", is_flag=True, help="Run again the runs recorded as failed.")
@click.option("--max-runs", type=int, default=None,
              help="Stop after this many runs [count] (chunk a long study; rerun to continue).")
@click.option("--dry-run", is_flag=True, help="Print the number of runs (total, pending) and exit.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def study_cmd(config_path, out, scheduler, workers, retry_failed, max_runs, dry_run, quiet):
    """Run the comparison study described by CONFIG.yaml (grid: robots × motions × noise σ × methods ×
    seeds × option sets; schema in docs/studies.md).

    \b
    Each run simulates the robot with known truth (noise σ on q [rad], v [rad/s], τ [N·m]), identifies it
    with the method, and records held-out effort error and inertial / friction / armature errors
    (relative, ‖p̂ − p*‖/‖p*‖) as one Parquet row when it ends. Interrupted studies resume where they
    stopped; a failed run is recorded with its error and never stops the study.
    """
    from pathlib import Path

    from ..study import StudyConfigError, load_config, run_study
    from ..study.report import write_report

    if workers is not None and workers < 0:
        fail(f"--workers must be >= 0, got {workers}")
    if max_runs is not None and max_runs < 0:
        fail(f"--max-runs must be >= 0, got {max_runs}")
    try:
        config = load_config(config_path)
    except StudyConfigError as e:
        fail(str(e))
    out = Path(out) if out else Path(f"study-{config.name}")
    if dry_run:
        from ..study.runner import pending_runs

        pend = pending_runs(config, out, retry_failed) if out.exists() else list(config.runs)
        click.echo(f"study {config.name}: {len(config.runs)} runs, {len(pend)} pending ({out})")
        return
    if not quiet:
        echo_err(f"study {config.name}: {len(config.runs)} runs -> {out} "
                 f"({'dask ' + scheduler if scheduler else 'local pool'})")
    try:
        counts = run_study(config, out, scheduler=scheduler, workers=workers, retry_failed=retry_failed,
                           max_runs=max_runs, progress=not quiet)
    except OSError as e:  # e.g. an unreachable scheduler
        fail(f"cannot run the study: {e}")
    rows = counts.pop("results")
    if len(rows):
        with atomic_output_file(out / "results.parquet") as tmp:
            rows.to_parquet(tmp, index=False)
    write_report(rows, out, config.name, counts)
    n_ok = int((rows["status"] == "ok").sum()) if len(rows) else 0
    click.echo(f"wrote {out}: {len(rows)}/{counts['total']} runs finished ({n_ok} ok), ran {counts['ran']} "
               f"now ({counts['failed_now']} failed), skipped {counts['skipped']} finished before")
