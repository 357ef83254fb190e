"""Replay a log through an online estimator and the quality gate (the engine of ``fg-sysid online``).

`replay` feeds a `Stream` chunk by chunk (one sample, or one knot period of samples) to the estimator
(`make_estimator`: issue 13's fixed-lag `OnlineEstimator` when available, else the
`WindowedBatchEstimator` fallback), validates each sample first (`StreamValidator`: bad samples are
logged and skipped, the run goes on), offers the estimator's current model to the `QualityGate` whenever
the gate is idle, and records

* the parameter trajectory: t and every physical parameter with its marginal std, at most every
  ``record_period`` seconds of log time (physical values through the layout's map, std by the delta
  method ``sqrt(diag(J Σθ Jᵀ))``, J = dp/dθ);
* the events: gate decisions (publish / reject), stream problems (non-finite, repeated, out-of-order,
  gap; estimator rejections) and detected changes of the robot (``change``: the estimator's CUSUM alarm
  and covariance reset, `online_change`; the gate then drops a candidate fitted before the change);
* the wall-clock latency of every ``update`` call [s].

With ``realtime`` the replay sleeps so that log time advances no faster than wall time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .online_gate import QualityGate
from .online_stream import Stream, StreamValidator, select

__all__ = ["ReplayResult", "available_estimators", "make_estimator", "physical_with_std", "replay"]

EVENT_COLUMNS = [
    "t",
    "decision",
    "reason",
    "candidate_score",
    "published_score",
    "rel_std",
    "candidate_t",
    "worst_parameter",
]


def available_estimators() -> list[str]:
    """``fixed-lag`` (issue 13's `OnlineEstimator`) if installed, ``gtsam`` (the same window on GTSAM's
    iSAM2 fixed-lag smoother, `gtsam_online.GtsamFixedLagEstimator`; slower, docs/online-gtsam.md) and
    ``windowed`` (always)."""
    out = []
    try:
        from .online import OnlineEstimator  # noqa: F401

        out.append("fixed-lag")
    except ImportError:
        pass
    try:
        from .gtsam_online import GtsamFixedLagEstimator  # noqa: F401

        out.append("gtsam")
    except ImportError:
        pass
    return [*out, "windowed"]


def make_estimator(
    kind: str,
    robot,
    lag: float,
    knot_rate: float,
    forgetting,
    warmup: float,
    smoother_options: dict | None = None,
    verbose: bool = False,
):
    """An online estimator: ``auto`` (fixed-lag if available, else windowed), ``fixed-lag``, ``gtsam``,
    ``windowed``."""
    avail = available_estimators()
    if kind == "auto":
        kind = avail[0]
    if kind not in avail:
        raise ValueError(f"estimator {kind!r} is not available (available: {', '.join(avail)})")
    if robot.floating_base and kind != "fixed-lag":
        raise ValueError(f"estimator {kind!r}: robot {robot.name!r} has a floating base; only the fixed-lag "
                         "estimator supports floating bases (online_floating.FloatingOnlineEstimator)")
    if kind == "fixed-lag" and robot.floating_base:  # the same window over the floating term set
        from .online_floating import FloatingOnlineEstimator as Est
    elif kind == "fixed-lag":
        from .online import OnlineEstimator as Est
    elif kind == "gtsam":
        from .gtsam_online import GtsamFixedLagEstimator as Est
    else:
        from .online_windowed import WindowedBatchEstimator as Est
    est = Est(
        robot,
        lag=lag,
        knot_rate=knot_rate,
        forgetting=forgetting,
        warmup=warmup,
        smoother_options=smoother_options,
        verbose=verbose,
    )
    est.kind_ = kind
    return est


def physical_with_std(layout, theta, theta_cov) -> tuple[np.ndarray, np.ndarray]:
    """Physical parameters p(θ) and their marginal std sqrt(diag(J Σθ Jᵀ)), J = dp/dθ (SI units)."""
    theta = np.asarray(theta, float)
    J = layout.jacobian(theta)
    with np.errstate(invalid="ignore"):
        std = np.sqrt(np.clip(np.einsum("ij,jk,ik->i", J, np.asarray(theta_cov, float), J), 0, None))
    return layout.to_physical(theta), std


@dataclass
class ReplayResult:
    """trajectory (DataFrame: t, <param>, <param>.std), events (DataFrame, `EVENT_COLUMNS`), latency_s
    (per update call), gate, estimator, counts (dict), wall_s."""

    trajectory: pd.DataFrame
    events: pd.DataFrame
    latency_s: np.ndarray
    gate: QualityGate
    estimator: object
    counts: dict
    wall_s: float

    def latency_summary(self) -> dict:
        lat = self.latency_s
        if not lat.size:
            return {}
        p50, p95, p99 = np.percentile(lat, [50, 95, 99])
        return {
            "p50_s": float(p50),
            "p95_s": float(p95),
            "p99_s": float(p99),
            "max_s": float(lat.max()),
            "mean_s": float(lat.mean()),
            "calls": int(lat.size),
        }


def _log(chunks: list[dict], robot):
    from ..datasets.log import Log

    if robot.floating_base:  # with the base pose, IMU, contact and force columns
        from .online_floating import samples_log

        return samples_log(chunks, robot, source="online warm-up")
    v = None if chunks[0]["v"] is None else np.concatenate([c["v"] for c in chunks])
    return Log(
        t=np.concatenate([c["t"] for c in chunks]),
        q=np.concatenate([c["q"] for c in chunks]),
        v=v,
        tau=np.concatenate([c["tau"] for c in chunks]),
        joint_names=tuple(robot.joint_names),
        source="online warm-up",
    )


def replay(
    stream: Stream,
    estimator,
    gate: QualityGate,
    chunk: int = 1,
    realtime: bool = False,
    record_period: float = 0.1,
    progress=None,
    on_chunk=None,
) -> ReplayResult:
    """Replay ``stream`` (see the module docstring). ``chunk``: samples per update; ``progress``: callable
    receiving the number of samples consumed per chunk; ``on_chunk(t, estimator, gate)``: called after each
    chunk (benchmarks sample memory or published models there)."""
    validator = StreamValidator(measured=stream.measured)
    rows, events, lat = [], [], []
    names = None
    last_row_t = -np.inf
    counts = {"samples": stream.n_samples, "chunks": 0, "estimator_rejected": 0, "changes_detected": 0}
    wall0 = time.perf_counter()
    t_first = None
    offered = None
    seen: list[dict] = []
    for start in range(0, stream.n_samples, chunk):
        stop = min(start + chunk, stream.n_samples)
        raw = stream.chunk(start, stop)
        ok, bad = validator.check(raw)
        for b in bad:
            events.append({"t": b.t, "decision": b.kind, "reason": b.message})
        if progress is not None:
            progress(stop - start)
        if not ok.any():
            continue
        good = select(raw, ok)
        t_new = float(good["t"][-1])
        if realtime:
            t_first = float(good["t"][0]) if t_first is None else t_first
            ahead = (t_new - t_first) - (time.perf_counter() - wall0)
            if ahead > 0:
                time.sleep(ahead)
        t0 = time.perf_counter()
        if gate.sg_filter is None:
            seen.append(good)
        out = estimator.update(good)
        lat.append(time.perf_counter() - t0)
        counts["chunks"] += 1
        for msg in out.rejected:
            counts["estimator_rejected"] += 1
            events.append({"t": t_new, "decision": "estimator-reject", "reason": str(msg)})
        for change in getattr(out, "events", ()):  # a detected change of the robot (online_change)
            counts["changes_detected"] += 1
            events.append({"t": change.t, "decision": "change", "reason": change.message(),
                           "candidate_t": change.t_change})
            ev = gate.on_change(change.t, change.t_change)
            if ev is not None:
                events.append(ev.row())
        for ev in gate.observe(good):
            events.append(ev.row())
        if out.ready and out.theta is not None:
            if gate.sg_filter is None:  # choose the hold-out SG filter on the samples seen so far
                gate.calibrate(_log(seen, estimator.robot))
            if gate.idle:
                res = estimator.result()
                if res is not None and res is not offered:  # the same fit is judged once
                    offered = res
                    ev = gate.offer(res, t_new)
                    if ev is not None:
                        events.append(ev.row())
            if t_new - last_row_t >= record_period - 1e-12:
                layout = estimator.layout_
                names = list(layout.names) if names is None else names
                p, s = physical_with_std(layout, out.theta, out.theta_cov)
                rows.append((t_new, p, s))
                last_row_t = t_new
        if on_chunk is not None:
            on_chunk(t_new, estimator, gate)
    traj = pd.DataFrame(columns=["t"])
    if rows:
        data = {"t": np.array([r[0] for r in rows])}
        P = np.array([r[1] for r in rows])
        S = np.array([r[2] for r in rows])
        for i, n in enumerate(names):
            data[n] = P[:, i]
            data[f"{n}.std"] = S[:, i]
        traj = pd.DataFrame(data)
    ev = pd.DataFrame(events, columns=EVENT_COLUMNS).sort_values("t", kind="stable").reset_index(drop=True)
    counts.update({f"stream_{k}": v for k, v in validator.counts.items()})
    counts["published"] = int((ev["decision"] == "publish").sum())
    counts["rejected_candidates"] = int((ev["decision"] == "reject").sum())
    return ReplayResult(
        traj, ev, np.asarray(lat, float), gate, estimator, counts, time.perf_counter() - wall0
    )
