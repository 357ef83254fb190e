"""Fuzz test over corrupted logs (issue 14 item 5): ``fg-sysid identify`` run in-process on a small
simulated z1 log after one or two random corruptions (dropped/renamed columns, NaN/inf, shuffled or
repeated time, strings, tiny/huge values, empty files, truncated CSV/Parquet, wrong joint names).
Whatever the corruption: no traceback, exit code 0 or 2 only, and on exit 2 no output directory and
no temporary leftovers. Deterministic (``derandomize``) so that CI sees the same 200 cases (100 per file
format)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, event, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from fg_sysid.cli import main  # noqa: E402
from fg_sysid.datasets.io import log_to_frame  # noqa: E402
from fg_sysid.datasets.simulate import simulate  # noqa: E402
from fg_sysid.robots import load_robot  # noqa: E402

N_CASES = 200
OPS = ("drop", "rename", "nan", "inf", "shuffle_t", "repeat_t", "string", "tiny", "huge", "wrong_joint",
       "empty", "header_only", "truncate")


def _base() -> pd.DataFrame:
    return log_to_frame(simulate(load_robot("z1"), 1.0, 100.0, 0.01, 0).log)


BASE = None


def _corrupt(df: pd.DataFrame, op: str, col: int, row: int, scale: float) -> pd.DataFrame | str:
    """One corruption; returns the table, or "empty"/"header_only"/"truncate" for file-level ones."""
    df = df.copy()
    c = df.columns[col % len(df.columns)]
    r = row % len(df)
    if op == "drop":
        return df.drop(columns=[c])
    if op == "rename":
        return df.rename(columns={c: c[::-1] if len(c) > 1 else c + "x"})
    if op in ("nan", "inf"):
        val = np.nan if op == "nan" else np.inf * (1 if scale > 0 else -1)
        if pd.api.types.is_numeric_dtype(df[c]):
            df[c] = df[c].astype(float)
            df.loc[r, c] = val
        else:  # a text column from an earlier "string" corruption: the value as text
            df.loc[r, c] = str(val)
    elif op in ("shuffle_t", "repeat_t") and "t" not in df.columns:  # a previous corruption dropped it
        return df
    elif op == "shuffle_t":
        df["t"] = np.random.default_rng(row).permutation(df["t"].to_numpy())
    elif op == "repeat_t":
        df.loc[r, "t"] = df.loc[max(r - 1, 0), "t"]
    elif op == "string":
        df[c] = df[c].astype(str)  # a text column (Parquet needs one type per column)
        df.loc[r, c] = "abc"
    elif op in ("tiny", "huge") and pd.api.types.is_numeric_dtype(df[c]):  # (a text column stays text)
        df[c] = df[c].astype(float) * (1e-12 if op == "tiny" else 1e12) * np.sign(scale or 1)
    elif op == "wrong_joint":
        return df.rename(columns={x: x.replace("joint", "jiont") for x in df.columns if x.endswith(c[-1])})
    elif op in ("empty", "header_only", "truncate"):
        return op
    return df


def _write(df_or_op, base: pd.DataFrame, path: Path, cut: float) -> None:
    if isinstance(df_or_op, str):
        if df_or_op == "empty":
            path.write_bytes(b"")
            return
        if df_or_op == "header_only":
            _write(base.iloc[:0], base, path, cut)
            return
        full = path.with_name("full" + path.suffix)
        _write(base, base, full, cut)
        data = full.read_bytes()
        path.write_bytes(data[: max(1, int(len(data) * cut))])
        return
    if path.suffix == ".csv":
        df_or_op.to_csv(path, index=False)
    else:
        df_or_op.to_parquet(path)


# one test per file format (half the cases each) so that the two halves run on both cores under xdist
@pytest.mark.parametrize("fmt", [".csv", ".parquet"])
@settings(max_examples=N_CASES // 2, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(st.sampled_from(OPS), min_size=1, max_size=2), col=st.integers(0, 40),
       row=st.integers(0, 100), scale=st.sampled_from([-1.0, 1.0]), cut=st.floats(0.05, 0.95))
def test_corrupted_logs_exit_0_or_2_without_traceback(fmt, ops, col, row, scale, cut):
    global BASE
    if BASE is None:
        BASE = _base()
    df: pd.DataFrame | str = BASE
    for op in ops:
        if isinstance(df, str):
            break
        df = _corrupt(df, op, col, row, scale)
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        log = d / f"log{fmt}"
        _write(df, BASE, log, cut)
        r = CliRunner().invoke(main, ["identify", str(log), "--robot", "z1", "--out", str(d / "out"),
                                      "--method", "ls-sg", "--quiet"])
        event(f"exit {r.exit_code}")
        assert r.exit_code in (0, 2), (ops, r.exit_code, r.output, r.exception)
        assert "Traceback" not in r.output, (ops, r.output)
        assert r.exception is None or isinstance(r.exception, SystemExit), (ops, repr(r.exception))
        leftovers = [p.name for p in d.iterdir() if p.name.startswith(".out.")]
        assert not leftovers, (ops, leftovers)
        if r.exit_code == 2:
            assert "error: " in r.output and not (d / "out").exists(), (ops, r.output)
        else:
            assert (d / "out" / "summary.json").is_file() and (d / "out" / "parameters.csv").is_file()
