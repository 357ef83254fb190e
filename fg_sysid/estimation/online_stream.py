"""Streaming input for online identification: a tolerant log reader and a per-sample validator.

`read_stream` reads a log table (CSV, Parquet, ROS bag) *without* the whole-log rules of
`fg_sysid.datasets.io.read_log` that a live stream cannot satisfy (strictly increasing time, finite
values everywhere): those are checked sample by sample by `StreamValidator` as the samples arrive, so
that a bad sample is reported and skipped instead of failing the run. The column rules that do not
depend on individual samples are checked up front (`StreamError`, message naming the culprit): a time
column ``t``, a ``q.<joint>`` column for the robot's joints (joints absent from the log are locked, as
``identify`` does), no columns of unknown joints, ``v.<joint>`` for every joint or none, and an effort
column ``tau.<joint>`` with data for at least one joint (the estimator needs efforts).

Units: t [s], q [rad | m], v [rad/s | m/s], tau [N·m | N], columns in ``robot.joint_names`` order.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..datasets.io import LogError, _read_any, lock_absent_joints, log_joint_names
from ..datasets.log import Log
from ..robots import RobotModel

__all__ = ["BadSample", "Stream", "StreamError", "StreamValidator", "read_stream"]

#: A time step longer than this many nominal periods is a gap.
GAP_FACTOR = 5.0
#: Accepted time steps used to fix the nominal sample period.
NOMINAL_STEPS = 20


class StreamError(ValueError):
    """A stream that cannot be used at all (its columns); the message names the culprit."""


@dataclass(frozen=True)
class Stream:
    """Raw samples of a log in file order (NaN and disorder allowed; `StreamValidator` judges them).

    Attributes: t (N,) [s]; q (N, n) [rad | m]; v (N, n) or None [rad/s | m/s]; tau (N, n) [N·m | N]
    (an all-NaN column = not measured); joint_names; robot (joints absent from the log locked);
    source (path).
    """

    t: np.ndarray
    q: np.ndarray
    v: np.ndarray | None
    tau: np.ndarray
    joint_names: tuple
    robot: RobotModel
    source: str
    measured: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))

    @property
    def n_samples(self) -> int:
        return int(self.t.shape[0])

    @classmethod
    def from_log(cls, log: Log, robot: RobotModel) -> Stream:
        """A validated in-memory `Log` as a stream (benchmarks, tests)."""
        return cls(
            np.asarray(log.t, float),
            np.asarray(log.q, float),
            None if log.v is None else np.asarray(log.v, float),
            np.asarray(log.tau, float),
            tuple(log.joint_names),
            robot,
            log.source,
            np.asarray(log.tau_measured, bool),
        )

    def chunk(self, start: int, stop: int) -> dict:
        """Rows ``start:stop`` as an `OnlineEstimator.update` sample dict."""
        return {
            "t": self.t[start:stop],
            "q": self.q[start:stop],
            "v": None if self.v is None else self.v[start:stop],
            "tau": self.tau[start:stop],
        }


def _column(df, col: str, path) -> np.ndarray:
    import pandas as pd

    x = pd.to_numeric(df[col], errors="coerce")  # non-numbers become NaN: bad samples, judged per sample
    return x.to_numpy(dtype=float, na_value=np.nan)


def read_stream(path: str | os.PathLike, robot: RobotModel, *, bag_options=None, echo=None,
                floating_ok: bool = False) -> Stream:
    """Read ``path`` as a stream for ``robot``. Raises `StreamError` on unusable columns. Floating-base
    robots: `online_floating.read_floating_stream` (base pose, IMU, contact and force columns too), which
    reads the joint columns here with ``floating_ok``."""
    path = Path(path)
    if robot.floating_base and not floating_ok:
        raise StreamError(f"robot {robot.name!r} has a floating base: read its log with "
                          "online_floating.read_floating_stream (fg-sysid online does)")
    try:
        df = _read_any(path, bag_options, echo)
    except LogError as e:
        raise StreamError(str(e)) from None
    if "t" not in df.columns:
        raise StreamError(f"{path}: missing time column 't' (columns: {list(df.columns)[:12]})")
    if len(df) < 2:
        raise StreamError(f"{path}: log has {len(df)} row(s); at least 2 are needed")
    log_joints = log_joint_names(df.columns)
    try:
        robot = lock_absent_joints(robot, df.columns, path)  # the rule of `load_log_for_robot`
    except LogError as e:
        raise StreamError(str(e)) from None
    joints = list(robot.joint_names)
    unknown = [j for j in log_joints if j not in joints and j not in robot.locked_joints]
    if unknown:
        raise StreamError(
            f"{path}: column(s) of unknown joint {unknown[0]!r} (all unknown: {unknown}); "
            f"robot {robot.name!r} joints: {joints}"
        )
    v_cols = [j for j in joints if f"v.{j}" in df.columns]
    if v_cols and len(v_cols) != len(joints):
        missing = [j for j in joints if j not in v_cols]
        raise StreamError(
            f"{path}: velocity column 'v.{missing[0]}' missing (all missing: {missing}); give v "
            "for every joint or for none"
        )
    t = _column(df, "t", path)
    q = np.column_stack([_column(df, f"q.{j}", path) for j in joints])
    v = np.column_stack([_column(df, f"v.{j}", path) for j in joints]) if v_cols else None
    tau = np.full_like(q, np.nan)
    for i, j in enumerate(joints):
        if f"tau.{j}" in df.columns:
            tau[:, i] = _column(df, f"tau.{j}", path)
    measured = ~np.all(np.isnan(tau), axis=0)
    if not measured.any():
        raise StreamError(
            f"{path}: no effort column (tau.<joint>) with data; online identification needs "
            f"measured efforts (robot joints: {joints})"
        )
    return Stream(t, q, v, tau, tuple(joints), robot, str(path), measured)


@dataclass(frozen=True)
class BadSample:
    """A sample the validator rejected (``kind``: non-finite, repeated, out-of-order) or a ``gap`` before an
    accepted sample; ``t`` [s] is the sample's time stamp, ``message`` says what and why."""

    t: float
    kind: str
    message: str


class StreamValidator:
    """Judges samples one at a time, in arrival order.

    Rejected (skipped, reported): a sample with a non-finite time, position, velocity or measured effort
    (``non-finite``); a time stamp equal to (``repeated``) or before (``out-of-order``) the last accepted one.
    Reported but accepted: a step longer than ``gap_factor`` nominal periods (``gap``); the nominal
    period is the median of the first `NOMINAL_STEPS` accepted steps (or ``1/rate`` if given).
    ``measured``: boolean mask of the joints whose efforts are measured (NaN in the others is fine).
    """

    def __init__(self, measured=None, rate: float | None = None, gap_factor: float = GAP_FACTOR):
        self.measured = None if measured is None else np.asarray(measured, bool)
        self.gap_factor = float(gap_factor)
        self.period = None if rate is None else 1.0 / float(rate)
        self.last_t: float | None = None
        self._steps: list[float] = []
        self.counts = {"accepted": 0, "non-finite": 0, "repeated": 0, "out-of-order": 0, "gap": 0}

    def check(self, samples) -> tuple[np.ndarray, list[BadSample]]:
        """(accepted mask (n,), events) for a chunk (dict or `Log` with t, q, v, tau)."""
        t, q, v, tau = _arrays(samples)
        ok = np.zeros(t.shape[0], bool)
        events: list[BadSample] = []
        cols = slice(None) if self.measured is None else self.measured
        for k in range(t.shape[0]):
            tk = float(t[k])
            bad = [
                name
                for name, x in (
                    ("t", np.atleast_1d(t[k])),
                    ("q", q[k]),
                    ("v", None if v is None else v[k]),
                    ("tau", tau[k][cols]),
                )
                if x is not None and not np.all(np.isfinite(x))
            ]
            if bad:
                events.append(
                    BadSample(
                        tk, "non-finite", f"sample at t={tk:.6g} s has non-finite {', '.join(bad)}: skipped"
                    )
                )
                self.counts["non-finite"] += 1
                continue
            if self.last_t is not None and tk <= self.last_t:
                kind = "repeated" if tk == self.last_t else "out-of-order"
                events.append(
                    BadSample(
                        tk,
                        kind,
                        f"sample at t={tk:.6g} s is {kind} (last accepted t={self.last_t:.6g} s): skipped",
                    )
                )
                self.counts[kind] += 1
                continue
            if self.last_t is not None:
                step = tk - self.last_t
                nominal = (
                    self.period
                    if self.period is not None
                    else (float(np.median(self._steps)) if len(self._steps) >= 3 else None)
                )
                if nominal is not None and step > self.gap_factor * nominal:
                    events.append(
                        BadSample(
                            tk,
                            "gap",
                            f"gap of {step:.4g} s (nominal period {nominal:.4g} s) "
                            f"before t={tk:.6g} s: {step / nominal - 1:.0f} "
                            "sample(s) missing",
                        )
                    )
                    self.counts["gap"] += 1
                elif self.period is None and len(self._steps) < NOMINAL_STEPS:
                    self._steps.append(step)
                    if len(self._steps) == NOMINAL_STEPS:
                        self.period = float(np.median(self._steps))
            ok[k] = True
            self.last_t = tk
            self.counts["accepted"] += 1
        return ok, events


def _arrays(samples):
    if isinstance(samples, Log):
        return (
            np.asarray(samples.t, float),
            np.asarray(samples.q, float),
            None if samples.v is None else np.asarray(samples.v, float),
            np.asarray(samples.tau, float),
        )
    t = np.atleast_1d(np.asarray(samples["t"], float))
    q = np.atleast_2d(np.asarray(samples["q"], float))
    v = samples.get("v")
    v = None if v is None else np.atleast_2d(np.asarray(v, float))
    tau = np.atleast_2d(np.asarray(samples["tau"], float))
    return t, q, v, tau


def select(samples, mask) -> dict:
    """The rows of ``samples`` where ``mask`` holds, as a sample dict."""
    t, q, v, tau = _arrays(samples)
    out = {"t": t[mask], "q": q[mask], "v": None if v is None else v[mask], "tau": tau[mask]}
    if isinstance(samples, dict):  # floating-base columns (`online_floating.FloatingStream.chunk`)
        for k, x in samples.items():
            if k not in out and x is not None:
                out[k] = ({f: np.asarray(a)[mask] for f, a in x.items()} if isinstance(x, dict)
                          else np.asarray(x)[mask])
    return out
