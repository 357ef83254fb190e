"""Online estimation (issue 13): end-of-log accuracy vs the batch smoother, payload-change tracking,
latency and memory. Everything through the code path of ``fg-sysid online`` (`online_replay.replay`:
stream validation, the online estimator, the quality gate) and held-out errors through the one
prediction path (`fg_sysid.prediction.heldout_report`).

(a) **End of log** — a Unitree Z1 log (default 60 s at 500 Hz, noise σ = 0.01 on q, v, τ) replayed online;
    at the end the online θ (the estimator's current one) and the last *published* model are compared
    with the batch smoother fitted on the whole log (``identify``'s defaults). Two held-out errors on a
    10 s log of the same robot with another motion:
    ``heldout`` — relative torque RMSE of ``fg-sysid predict`` (measured q, v; SG accelerations with the
    batch fit's cross-validated window, the same for every model; measurement noise included), and
    ``model`` — relative RMSE of the model's efforts at the *true* states and accelerations against the
    true efforts (no noise: the parameters' error alone). In-class truth, and out-of-class truth
    (Stribeck friction with breakaway 1.5·fc and effort-sensor gain errors of ±5 %), in separate tables.
(b) **Payload change** — a Z1 log (default 30 s) whose last link picks up a 1 kg sphere at t = 15 s
    (`datasets.payload_change`); the online estimator forgets (window ``--forgetting``); every published
    model is scored on a held-out log of the *loaded* robot; the reference is the batch smoother on the
    post-change samples. Recovery time = first log time after the change from which the published
    model's held-out error stays within 1.5× the reference's. Plot: docs/img/online_tracking_<estimator>.png.
(c) **Memory** — a 10-minute log replayed; RSS (``/proc/self/statm``) and the estimator's buffered
    samples at minutes 1 and 10.

    python benchmarks/bench_online_tracking.py                  # all parts (≈ 10–15 min on 2 shared cores)
    python benchmarks/bench_online_tracking.py --parts a --duration 20
"""

from __future__ import annotations

import argparse
import os
import platform
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from fg_sysid.datasets.payload_change import simulate_payload_change
from fg_sysid.datasets.simulate import Effects, simulate
from fg_sysid.estimation.online_gate import QualityGate
from fg_sysid.estimation.online_replay import make_estimator, replay
from fg_sysid.estimation.online_stream import Stream
from fg_sysid.estimation.smoother import JointSmoother
from fg_sysid.prediction import heldout_report
from fg_sysid.robots import load_robot
from fg_sysid.validation import model_spec, predict_efforts, relative_rmse

ROBOT = "z1"
GATE = ("publish", "reject")
IMG = Path(__file__).resolve().parents[1] / "docs" / "img" / "online_tracking_{kind}.png"


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def batch_fit(robot, log):
    tic = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sm = JointSmoother(robot).fit(log)
    spec = model_spec(sm.result_, robot, ROBOT, sg_filter=dict(sm.init_filter_))
    return spec, dict(sm.init_filter_), time.perf_counter() - tic


def errors(model, robot, held, sg) -> dict:
    """heldout (predict path, noisy held-out log) and model (true states, noise-free) relative RMSE."""
    rep = heldout_report(model, robot, held.log, window_s=sg["window_s"], polyorder=sg["polyorder"])
    tl = held.truth_log
    tau = predict_efforts(model, robot, tl.q, tl.v, held.truth_acceleration)
    return {"heldout": float(rep["overall"]), "model": relative_rmse(tau, tl.tau)}


def run_online(robot, log, args, forgetting, on_chunk=None, record_period=0.1):
    est = make_estimator(
        args.estimator,
        robot,
        lag=args.lag,
        knot_rate=args.knot_rate,
        forgetting=forgetting,
        warmup=args.warmup,
    )
    if args.no_detector and hasattr(est, "detector_"):
        est.detector_ = None  # the fixed-lag estimator without its change detector (comparison runs)
    if args.relearn is not None and getattr(est, "detector_", None) is not None:
        est.relearn = est.detector_.holdoff = args.relearn  # relearning span and hold-off [s]
    gate = QualityGate(robot, ROBOT, margin=args.margin, holdout=args.holdout)
    chunk = max(1, int(round(args.rate / args.knot_rate)))
    return replay(
        Stream.from_log(log, robot), est, gate, chunk=chunk, record_period=record_period, on_chunk=on_chunk
    )


# ---------------------------------------------------------------------------------------------- (a)
def part_a(robot, args) -> list[dict]:
    rows = []
    cases = [
        ("in-class", None),
        ("out-of-class", Effects(friction="stribeck", stribeck_ratio=1.5, effort_gain_error=0.05)),
    ]
    for case, effects in cases:
        sim = simulate(robot, args.duration, args.rate, args.noise, args.seed, effects=effects)
        held = simulate(robot, 10.0, args.rate, args.noise, args.seed + 100, truth=sim.truth, effects=effects)
        spec_b, sg, sec_b = batch_fit(robot, sim.log)
        res = run_online(robot, sim.log, args, args.forgetting)
        est, gate = res.estimator, res.gate
        e_b = errors(spec_b, robot, held, sg)
        online_now = model_spec(est.result(), robot, ROBOT)
        models = {
            "batch smoother (whole log)": (spec_b, sec_b),
            f"online θ at the end ({est.kind_})": (online_now, res.wall_s),
            "online, last published": (gate.published, res.wall_s),
        }
        lat = res.latency_summary()
        for name, (m, sec) in models.items():
            if m is None:
                rows.append({"truth": case, "model": name, "heldout": np.nan, "model_err": np.nan})
                continue
            e = errors(m, robot, held, sg)
            rows.append(
                {
                    "truth": case,
                    "model": name,
                    "heldout": e["heldout"],
                    "model_err": e["model"],
                    "ratio_heldout": e["heldout"] / e_b["heldout"],
                    "ratio_model": e["model"] / e_b["model"],
                    "seconds": sec,
                }
            )
        rows[-1].update(
            changes_detected=res.counts.get("changes_detected", 0),
            published=res.counts["published"],
            rejected=res.counts["rejected_candidates"],
            p50_ms=lat["p50_s"] * 1e3,
            p95_ms=lat["p95_s"] * 1e3,
            p99_ms=lat["p99_s"] * 1e3,
            max_ms=lat["max_s"] * 1e3,
            log_s=args.duration,
        )
        print(f"[a] {case}: batch {sec_b:.1f} s, online replay {res.wall_s:.1f} s", flush=True)
    return rows


# ---------------------------------------------------------------------------------------------- (b)
def part_b(robot, args) -> dict:
    T, tc = args.payload_duration, args.payload_duration / 2
    pc = simulate_payload_change(
        robot, T, args.rate, args.noise, args.seed + 1, change_time=tc, mass=1.0, offset=(0.05, 0.0, 0.0)
    )
    held = simulate(robot, 10.0, args.rate, args.noise, args.seed + 200, truth=pc.truth_after)
    post = pc.log.slice(pc.change_index, pc.log.n_samples)
    spec_b, sg, _ = batch_fit(robot, post)
    e_ref = errors(spec_b, robot, held, sg)
    published: list[tuple[float, dict]] = []

    def on_chunk(t, est, gate):
        if gate.published is not None and (not published or published[-1][1] is not gate.published):
            published.append((t, gate.published))

    res = run_online(robot, pc.log, args, args.payload_forgetting, on_chunk=on_chunk, record_period=0.05)
    score = [(t, errors(m, robot, held, sg)) for t, m in published]
    # the published model in force at each time: its error; recovery = start of the final run within 1.5x
    ok = [(t, e["heldout"] <= 1.5 * e_ref["heldout"], e) for t, e in score]
    t_rec = None
    for t, good, _ in ok:
        if t >= tc and good and all(g for tt, g, _ in ok if tt >= t):
            t_rec = t
            break
    before = [e for t, e in score if t < tc]
    changes = res.events[res.events["decision"] == "change"]
    out = {
        "changes": changes,
        "gate_after": res.events[(res.events["t"] >= tc) & res.events["decision"].isin(GATE)],
        "change_time": tc,
        "reference_heldout": e_ref["heldout"],
        "reference_model": e_ref["model"],
        "pre_change_published_heldout": before[-1]["heldout"] if before else np.nan,
        "recovery_s": np.nan if t_rec is None else t_rec - tc,
        "publishes_after_change": sum(1 for t, _ in published if t >= tc),
        "score": score,
        "trajectory": res.trajectory,
        "pc": pc,
        "ref": e_ref,
        "forgetting": args.payload_forgetting,
        "no_detector": args.no_detector,
        "kind": res.estimator.kind_,
    }
    out["img"] = Path(str(IMG).format(kind=res.estimator.kind_))
    plot_tracking(out, robot, out["img"])
    print(f"[b] replay {res.wall_s:.1f} s", flush=True)
    return out


def forgetting_label(b) -> str:
    f = b["forgetting"]
    if b["kind"] == "windowed":
        return f"window {f:g} s)"
    det = "change detector off" if b["no_detector"] else "CUSUM change detector"
    return (f"{det}, " + ("no forgetting)" if f is None else f"forgetting σ_rw {f:g} per √s)"))


def plot_tracking(b, robot, path):
    from fg_sysid.report import _pyplot

    plt = _pyplot()
    body = b["pc"].body
    traj = b["trajectory"]
    t = traj["t"].to_numpy()
    fig, axes = plt.subplots(3, 1, figsize=(9, 7.5), sharex=True)
    before = b["pc"].truth_before["parameters"]
    after = b["pc"].truth_after["parameters"]
    for ax, name, label in ((axes[0], f"{body}.m", "mass [kg]"), (axes[1], f"{body}.mcx", "m·c_x [kg·m]")):
        p, s = traj[name].to_numpy(), traj[f"{name}.std"].to_numpy()
        ax.fill_between(t, p - 2 * s, p + 2 * s, step="post", alpha=0.25, lw=0, label="±2σ")
        ax.step(t, p, where="post", lw=1.2, label="online estimate")
        ax.hlines([before[name]], t[0], b["change_time"], colors="k", linestyles="--", lw=1, label="truth")
        ax.hlines([after[name]], b["change_time"], t[-1], colors="k", linestyles="--", lw=1)
        ax.set_ylabel(f"{body} {label}", fontsize=8)
        ax.grid(alpha=0.3)
    axes[0].legend(loc="upper left", fontsize=7, ncol=3)
    st = [t for t, _ in b["score"]]
    se = [e["heldout"] for _, e in b["score"]]
    axes[2].step(st + [t[-1]], se + [se[-1]], where="post", color="tab:green", label="published model")
    axes[2].axhline(b["reference_heldout"], color="k", lw=1, label="batch fit on post-change data")
    axes[2].axhline(1.5 * b["reference_heldout"], color="k", lw=1, ls=":", label="1.5 × batch")
    axes[2].set_ylabel("held-out rel. RMSE\n(loaded robot)", fontsize=8)
    axes[2].set_yscale("log")
    axes[2].legend(loc="upper left", fontsize=7)
    axes[2].grid(alpha=0.3)
    for ax in axes:
        ax.axvline(b["change_time"], color="tab:red", lw=1)
        for tc in b["changes"]["t"]:
            ax.axvline(tc, color="tab:purple", lw=1, ls=":")
    axes[-1].set_xlabel("log time t [s] (red: 1 kg payload attached; purple dotted: change detected)")
    fig.suptitle(
        f"{robot.name}: online tracking of a payload change ({b['kind']}, " + forgetting_label(b), fontsize=10
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------- (c)
def part_c(robot, args) -> list[dict]:
    sim = simulate(robot, args.memory_duration, args.rate, args.noise, args.seed + 2)
    marks = {60.0: None, args.memory_duration: None}
    rows = []

    def on_chunk(t, est, gate):
        for m in marks:
            if marks[m] is None and t >= m - 1e-9:
                marks[m] = True
                if hasattr(est, "_t"):  # windowed: buffered samples
                    buf = len(est._t)
                else:  # fixed-lag: knots in the window
                    kw = getattr(getattr(est, "stats_", None), "knots_in_window", None) or [np.nan]
                    buf = kw[-1]
                rows.append({"log_minute": m / 60, "rss_mb": rss_mb(), "estimator_window_size": buf})

    lag_saved = args.lag
    if args.kind == "windowed":  # refits every --memory-lag s (a refit per second for 10 minutes is too slow)
        args.lag = args.memory_lag
    res = run_online(robot, sim.log, args, args.payload_forgetting, on_chunk=on_chunk, record_period=1.0)
    args.lag = lag_saved
    lat = res.latency_summary()
    for r in rows:
        r.update(replay_s=res.wall_s, p99_ms=lat["p99_s"] * 1e3)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--parts", nargs="+", default=["a", "b", "c"], choices=["a", "b", "c"])
    ap.add_argument("--estimator", default="auto", choices=["auto", "fixed-lag", "windowed"])
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--rate", type=float, default=500.0)
    ap.add_argument("--noise", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lag", type=float, default=1.0)
    ap.add_argument("--knot-rate", type=float, default=100.0)
    ap.add_argument("--warmup", type=float, default=3.0)
    ap.add_argument("--forgetting", type=float, default=None)
    ap.add_argument("--margin", type=float, default=0.05)
    ap.add_argument("--holdout", type=float, default=1.0)
    ap.add_argument("--payload-duration", type=float, default=30.0)
    ap.add_argument("--payload-forgetting", type=float, default=None,
                    help="forgetting of parts (b), (c): windowed window [s] (default 5), fixed-lag θ "
                         "random-walk std per √s (default none: the change detector resets θ's information)")
    ap.add_argument("--no-detector", action="store_true",
                    help="fixed-lag: switch its change detector off (comparison with forgetting alone)")
    ap.add_argument("--relearn", type=float, default=None,
                    help="fixed-lag: relearning span and hold-off after a change [s] (default 0: off)")
    ap.add_argument("--memory-duration", type=float, default=600.0)
    ap.add_argument("--memory-lag", type=float, default=10.0)
    args = ap.parse_args()
    robot = load_robot(ROBOT)
    args.kind = kind = make_estimator(args.estimator, robot, 1.0, 100.0, None, 2.0).kind_
    if args.payload_forgetting is None and kind == "windowed":
        args.payload_forgetting = 5.0  # the fixed-lag default: no forgetting, the change detector
    print(
        f"# {platform.node()} {platform.processor() or platform.machine()}, robot {ROBOT}, "
        f"rate {args.rate:g} Hz, noise {args.noise:g}, knots {args.knot_rate:g} Hz, lag {args.lag:g} s, "
        f"estimator {args.estimator}"
    )
    pd.set_option("display.width", 200)
    pd.set_option("display.max_columns", 30)
    if "a" in args.parts:
        a = pd.DataFrame(part_a(robot, args))
        for case, g in a.groupby("truth", sort=False):
            print(f"\n## (a) end of a {args.duration:g} s log, {case} truth\n")
            print(g.drop(columns="truth").to_markdown(index=False, floatfmt=".4g"))
    if "b" in args.parts:
        b = part_b(robot, args)
        print(f"\n## (b) 1 kg payload at t = {b['change_time']:g} s ({forgetting_label(b)}\n")
        if len(b["changes"]):
            print(b["changes"][["t", "reason"]].to_markdown(index=False, floatfmt=".4g") + "\n")
        tab = pd.DataFrame(
            [
                {
                    "published_t": t,
                    "heldout": e["heldout"],
                    "model_err": e["model"],
                    "ratio_to_batch": e["heldout"] / b["reference_heldout"],
                }
                for t, e in b["score"]
            ]
        )
        print(tab.to_markdown(index=False, floatfmt=".4g"))
        g = b["gate_after"][["t", "decision", "candidate_score", "published_score", "rel_std", "candidate_t"]]
        print("\ngate decisions after the change:\n\n" + g.to_markdown(index=False, floatfmt=".4g"))
        print(
            f"\nbatch on post-change data: heldout {b['reference_heldout']:.4g}, "
            f"model {b['reference_model']:.4g}; "
            f"recovery time (held-out within 1.5x, staying): {b['recovery_s']:.3g} s; "
            f"{b['publishes_after_change']} publishes after the change; plot {b['img']}"
        )
    if "c" in args.parts:
        c = pd.DataFrame(part_c(robot, args))
        print(
            f"\n## (c) memory over a {args.memory_duration:g} s log (forgetting {args.payload_forgetting}, "
            f"lag {args.memory_lag if kind == 'windowed' else args.lag:g} s)\n"
        )
        print(c.to_markdown(index=False, floatfmt=".4g"))


if __name__ == "__main__":
    main()
