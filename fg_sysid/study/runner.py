"""Run a study: every run simulates, identifies and evaluates; rows are appended as runs finish.

Storage (``OUT``):

* ``runs/<hash>.parquet`` — one single-row Parquet file per finished run (written atomically), i.e. a
  Parquet *dataset* that grows as runs end; ``pandas.read_parquet(OUT / "runs")`` reads them all. A run
  whose file exists is finished and skipped on the next invocation (resumable); a failed run is recorded
  with ``status = failed`` and its ``error`` (rerun with ``retry_failed``).
* ``results.parquet`` — the consolidated table, rewritten at the end; ``report.md`` and PNG plots
  (`fg_sysid.study.report`).

Execution: a local process pool (``workers`` processes; 0 = in this process) or a Dask cluster
(``scheduler`` = its address, ``dask.distributed.Client``). The workers return rows; only this process
writes files, so workers need no shared file system. Progress: a tqdm bar with ETA on stderr.

Metrics of one run (fixed-base simulation with known truth, `fg_sysid.datasets.simulate`):

* ``heldout_rmse`` — relative RMSE of the identified model's efforts on a *noise-free held-out* motion
  of the same true robot (true q, v and accelerations: the error is the model's, not the differentiation's);
* ``inertial_base_error`` — ``‖K(π̂ − π*)‖₂ / ‖Kπ*‖₂`` over the base parameters β = Kπ (the identifiable
  combinations, `fg_sysid.study.base_parameters`): blind to the directions no data can see;
* ``inertial_error`` / ``friction_error`` / ``armature_error`` — ``‖p̂ − p*‖₂ / ‖p*‖₂`` over the inertial
  parameters (all bodies; directions no data can see stay at the prior), the (fc, fv) of every joint,
  and the armatures. When the simulator's friction velocity scale differs from the estimator's
  (out-of-class truth), fc is compared across models with different tanh widths — as paper 004 does.
"""

from __future__ import annotations

import os
import socket
import time
import traceback
import warnings
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd

from .config import RunSpec, StudyConfig

RUNS_DIR = "runs"


# ---------------------------------------------------------------------------------------------- one run
def _truth_vector(truth: dict, robot) -> np.ndarray:
    from ..datasets.simulate import truth_arrays

    tr = truth_arrays(truth, robot)
    return np.concatenate([tr["inertial"].ravel(), np.column_stack([tr["fc"], tr["fv"]]).ravel(),
                           tr["armature"]])


def _rel(a, b) -> float:
    nb = float(np.linalg.norm(b))
    return float(np.linalg.norm(a - b) / nb) if nb > 0 else float(np.linalg.norm(a - b))


def evaluate(robot, p: np.ndarray, truth: dict, heldout, velocity_scale: float) -> dict:
    """Metrics of the physical vector ``p`` against the truth and a noise-free held-out `SimResult`."""
    from ..estimation.baseline import predict_torque
    from .base_parameters import base_error

    pt = _truth_vector(truth, robot)
    nb, n = 10 * robot.n_bodies, robot.n_joints
    hl = heldout.truth_log
    tau = predict_torque(robot, p, hl.q, hl.v, heldout.truth_acceleration, velocity_scale)
    rmse = float(np.sqrt(np.mean((tau - hl.tau) ** 2)) / np.sqrt(np.mean(hl.tau ** 2)))
    return {
        "heldout_rmse": rmse,
        "inertial_error": _rel(p[:nb], pt[:nb]),
        "inertial_base_error": base_error(robot, p[:nb], pt[:nb]),
        "friction_error": _rel(p[nb:nb + 2 * n], pt[nb:nb + 2 * n]),
        "armature_error": _rel(p[nb + 2 * n:], pt[nb + 2 * n:]),
        "mass_error": _rel(p[:nb:10], pt[:nb:10]),
    }


def run_one(spec: RunSpec) -> dict:
    """Simulate, identify with ``spec.method``, evaluate. Never raises: failures become a row with
    ``status = failed`` and the error message."""
    row = {"run_id": spec.run_id, **{k: v for k, v in asdict(spec).items()
                                     if k not in ("truth", "estimator", "heldout")}}
    row["truth_friction_velocity_scale"] = float(spec.truth["friction_velocity_scale"])
    row["estimator_friction_velocity_scale"] = float(spec.estimator["friction_velocity_scale"])
    row["init_spread"] = float(spec.estimator.get("init_spread", 0.0))
    row["host"] = f"{socket.gethostname()}:{os.getpid()}"
    t0 = time.perf_counter()
    try:
        from ..estimation.linear_solver import default_threads
        from ..robots import load_robot

        # one thread per fit: a study is parallel across its runs (workers processes or Dask workers)
        with warnings.catch_warnings(record=True) as caught, default_threads(1):
            warnings.simplefilter("always")
            robot = load_robot(spec.robot)
            if robot.floating_base:  # legged robots: MuJoCo truth, FloatingBaseSmoother (study/floating.py)
                from .floating import run_floating

                metrics, info, s_sim, s_fit = run_floating(robot, spec)
                row.update(metrics)
                t1, t2 = t0 + s_sim, t0 + s_sim + s_fit
            else:
                metrics, info, t1, t2 = _run_fixed(spec, robot)
                row.update(metrics)
        row.update({f"info_{k}": v for k, v in info.items()})
        row.update(status="ok", error="", warnings=len(caught), seconds_simulate=t1 - t0,
                   seconds_identify=t2 - t1)
    except Exception as e:  # recorded, never raised: one bad run must not stop a study
        row.update(status="failed", error=f"{type(e).__name__}: {e}",
                   traceback=traceback.format_exc(limit=6))
    row["seconds"] = time.perf_counter() - t0
    row["finished_at"] = pd.Timestamp.now(tz="UTC").isoformat()
    return row


def _run_fixed(spec: RunSpec, robot) -> tuple[dict, dict, float, float]:
    """Fixed-base run: simulate (`datasets.simulate`), identify, evaluate; (metrics, info, t1, t2)."""
    from ..datasets.simulate import simulate
    from .methods import METHODS

    sim = simulate(robot, spec.duration, spec.rate, spec.noise, spec.seed,
                   friction_velocity_scale=spec.truth["friction_velocity_scale"])
    held = simulate(robot, float(spec.heldout["duration"]), spec.rate, 0.0,
                    spec.seed + int(spec.heldout["seed_offset"]), truth=sim.truth)
    t1 = time.perf_counter()
    if spec.method not in METHODS:
        raise ValueError(f"unknown method {spec.method!r}; choices: {', '.join(METHODS)}")
    p, info = METHODS[spec.method](robot, sim.log, spec.estimator, spec.seed)
    t2 = time.perf_counter()
    if not np.all(np.isfinite(p)):
        raise FloatingPointError("the estimate has non-finite entries")
    metrics = evaluate(robot, p, sim.truth, held, spec.estimator["friction_velocity_scale"])
    return metrics, info, t1, t2


# ---------------------------------------------------------------------------------------------- storage
def read_rows(out_dir) -> pd.DataFrame:
    """All finished runs' rows under ``out_dir/runs`` (empty frame when none)."""
    d = Path(out_dir) / RUNS_DIR
    files = sorted(d.glob("*.parquet")) if d.is_dir() else []
    if not files:
        return pd.DataFrame()
    return pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)


def _write_row(out_dir: Path, spec: RunSpec, row: dict) -> None:
    from ..cli.common import atomic_output_file

    with atomic_output_file(out_dir / RUNS_DIR / f"{spec.file_stem}.parquet") as tmp:
        pd.DataFrame([row]).to_parquet(tmp, index=False)


# ---------------------------------------------------------------------------------------------- study
def pending_runs(config: StudyConfig, out_dir, retry_failed: bool = False) -> list[RunSpec]:
    """Runs of ``config`` without a finished row in ``out_dir`` (failed ones too with ``retry_failed``)."""
    done = read_rows(out_dir)
    finished = set()
    if len(done):
        ok = done if not retry_failed else done[done["status"] == "ok"]
        finished = set(ok["run_id"])
    return [s for s in config.runs if s.run_id not in finished]


def run_study(config: StudyConfig, out_dir, scheduler: str | None = None, workers: int | None = None,
              retry_failed: bool = False, max_runs: int | None = None, progress: bool = True,
              client=None) -> dict:
    """Run the pending runs of ``config`` into ``out_dir``; returns counts and the results frame.

    ``scheduler``: Dask scheduler address (``tcp://host:8786``) or None for a local process pool of
    ``workers`` processes (default: CPU count; 0 = run in this process). ``client``: an existing
    ``dask.distributed.Client`` (tests). ``max_runs``: stop after this many runs (chunked studies).
    """
    from tqdm import tqdm

    out_dir = Path(out_dir)
    (out_dir / RUNS_DIR).mkdir(parents=True, exist_ok=True)
    todo = pending_runs(config, out_dir, retry_failed)
    skipped = len(config.runs) - len(todo)
    if max_runs is not None:
        todo = todo[:max(int(max_runs), 0)]
    n_failed = 0
    bar = tqdm(total=len(todo), desc=f"study {config.name}", unit="run", disable=not progress,
               dynamic_ncols=True)

    def done(spec, row):
        nonlocal n_failed
        _write_row(out_dir, spec, row)
        n_failed += row["status"] != "ok"
        bar.set_postfix(failed=n_failed)
        bar.update(1)

    try:
        if todo and (scheduler or client is not None):
            _run_dask(todo, done, scheduler, client)
        elif todo and workers == 0:
            for spec in todo:
                done(spec, run_one(spec))
        elif todo:
            _run_pool(todo, done, workers)
    finally:
        bar.close()
    rows = read_rows(out_dir)
    if len(rows):
        ids = {s.run_id for s in config.runs}
        rows = rows[rows["run_id"].isin(ids)].reset_index(drop=True)
    return {"total": len(config.runs), "skipped": skipped, "ran": len(todo), "failed_now": n_failed,
            "results": rows}


def _run_pool(todo, done, workers):
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed

    n = workers or os.cpu_count() or 1
    # spawn: workers start clean (no inherited BLAS/Dask threads); each imports fg_sysid once
    with ProcessPoolExecutor(max_workers=n, mp_context=mp.get_context("spawn")) as ex:
        futs = {ex.submit(run_one, s): s for s in todo}
        try:
            for f in as_completed(futs):
                done(futs[f], f.result())
        except BaseException:
            for f in futs:
                f.cancel()
            raise


def _run_dask(todo, done, scheduler, client):
    from dask.distributed import Client, as_completed

    own = client is None
    client = Client(scheduler) if own else client
    try:
        futs = client.map(run_one, todo, pure=False, key=[f"run-{s.file_stem}" for s in todo])
        spec_of = {f.key: s for f, s in zip(futs, todo, strict=True)}
        try:
            for f in as_completed(futs):
                done(spec_of[f.key], f.result())
        except BaseException:
            client.cancel(futs)
            raise
    finally:
        if own:
            client.close()
