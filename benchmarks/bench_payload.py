"""Payload identification with bounds: Monte-Carlo containment, widths and timings (issue 16, paper 002).

Per trial: a Panda (7 DoF) carries one of five payloads (`standard_payloads`: dumbbells and a box composed
onto the last link by the parallel-axis theorem); the true robot's other parameters θ_r (bodies, armature,
viscous friction) are drawn uniformly within ±5 % of the nominal; a computed-torque + PD controller on the
*nominal* model (no payload) tracks a random Fourier motion for 7.5 s; the command is a zero-order hold at
1 kHz and the dynamics are integrated with RK4 on 4 sub-steps (``--integrator euler``: forward Euler at the
sample rate, paper 002's assumption). Measured torque = applied + bounded noise (2.5 % of |τ|): uniform,
and, on the same run, at the bound with the sign aligned to the LS mass sensitivity (worst case).

Identification (5 % θ_r box, 2.5 % torque bound), each mode with its default window (`DEFAULT_H`):
* ``lp`` online, h = 10 samples (10 ms windows; ``--h``): chunks of 1.5 s, estimate + LP bound after each
  chunk (timed, wall and process CPU: regressors of the chunk + estimates + 20 LPs by row generation);
* ``verified`` and ``first-order`` on all 7.5 s at once, h = 50 (``--h-ls``; the lp problem's windows
  summed 5 at a time, `PayloadProblem.coarsened`, which is exact).
The worst-case noise sign is aligned with the LS mass sensitivity of the 50-sample rows (as before the
window change, so the "before" and "after" tables see the same noise). BLAS runs single-threaded (set
below, before numpy loads): on a shared machine threaded BLAS mostly waits.
Containment is per parameter and joint (all 10); widths are full widths at 7.5 s.

    python benchmarks/bench_payload.py --trials-per-payload 40          # the docs table (≈ 20–30 min)
    python benchmarks/bench_payload.py --trials-per-payload 2 --integrator euler
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from fg_sysid.payload import NoiseBounds, PayloadError, PayloadProblem, RobotPrior, compute_bounds  # noqa: E402
from fg_sysid.payload.online import run_online  # noqa: E402
from fg_sysid.payload.simulate import (  # noqa: E402
    random_motion,
    simulate_payload_run,
    standard_payloads,
    torque_noise,
)
from fg_sysid.robots import load_robot  # noqa: E402

NAMES = ("m", "mcx", "mcy", "mcz", "ixx", "ixy", "iyy", "ixz", "iyz", "izz")


def worst_case_sign(prob: PayloadProblem, n_samples: int, nv: int, h: int) -> np.ndarray:
    Y, d = prob.Y, prob.d
    w2 = 1 / np.maximum(d, 1e-12) ** 2
    G = np.linalg.solve((Y * w2[:, None]).T @ Y, (Y * w2[:, None]).T)
    sign = np.zeros((n_samples, nv))
    for k in range(prob.n_windows):
        sign[k * h:(k + 1) * h] = np.sign(G[0, k * nv:(k + 1) * nv])
    return sign


def trial(robot, prior, payload, seed, args, noise):
    rng = np.random.default_rng(seed)
    traj = random_motion(robot, rng, duration=args.duration)
    tic = time.perf_counter()
    run = simulate_payload_run(robot, prior, payload, traj, duration=args.duration, rate=args.rate,
                               integrator=args.integrator, substeps=args.substeps, robot_rel=0.05, rng=rng)
    sim_s = time.perf_counter() - tic
    rows = []
    prob = None
    for kind in ("uniform", "worst-case"):
        if kind == "uniform":
            tau = run.tau + torque_noise(run.tau, 0.025, rng=rng)
        else:  # Y depends on q, v only: the uniform run's problem gives the LS mass sensitivity
            sign = worst_case_sign(prob.coarsened(args.h_ls // args.h), len(run.t), robot.nv, args.h_ls)
            tau = run.tau + torque_noise(run.tau, 0.025, sign=sign)
        try:
            ident = run_online(robot, prior, noise, run.t, run.q, run.v, tau, chunk=args.chunk, mode="lp",
                               h=args.h)
        except PayloadError as e:  # e.g. "the data contradict the bounds": a failure of every mode
            rows += [{"payload": payload.name, "seed": seed, "noise": kind, "mode": m, "contained_all": False,
                      "error": str(e), "update_times": [], "update_cpu": []}
                     for m in ("lp", "verified", "first-order")]
            if prob is None:
                prob = PayloadProblem(robot, prior, noise, h=args.h)
                prob.add(run.t, run.q, run.v, tau)
            continue
        hist = ident.history_frame()
        results = {"lp": ident.current}
        prob = ident.problem
        coarse = prob.coarsened(args.h_ls // args.h)
        errors = {}
        for mode in ("verified", "first-order"):
            try:
                results[mode] = compute_bounds(coarse, mode)[0]
            except PayloadError as e:  # recorded as a failure of that mode, not skipped
                errors[mode] = str(e)
        for mode, msg in errors.items():
            rows.append({"payload": payload.name, "seed": seed, "noise": kind, "mode": mode,
                         "contained_all": False, "error": msg, "update_times": [], "update_cpu": []})
        for mode, b in results.items():
            row = {"payload": payload.name, "seed": seed, "noise": kind, "mode": mode,
                   "contained_all": bool(b.contains(run.theta_e).all()),
                   "mass_err_pct": 100 * (b.estimate[0] - run.theta_e[0]) / run.theta_e[0],
                   "cond_Y": b.info["cond_Y"], "sim_s": sim_s,
                   "update_p_max_s": float(hist["update_s"].max()) if mode == "lp" else np.nan,
                   "update_times": hist["update_s"].tolist() if mode == "lp" else [],
                   "update_cpu": hist["update_cpu_s"].tolist() if mode == "lp" else [],
                   "bound_s": b.timings["bound_s"]}
            for i, n in enumerate(NAMES):
                row[f"in.{n}"] = bool(b.contains(run.theta_e)[i])
                row[f"w.{n}"] = b.width[i]
            rows.append(row)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials-per-payload", type=int, default=40)
    ap.add_argument("--integrator", choices=("rk4", "euler"), default="rk4")
    ap.add_argument("--substeps", type=int, default=4)
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--duration", type=float, default=7.5)
    ap.add_argument("--h", type=int, default=10, help="samples per window of the lp rows")
    ap.add_argument("--h-ls", type=int, default=50,
                    help="samples per window of verified / first-order (a multiple of --h)")
    ap.add_argument("--chunk", type=float, default=1.5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--csv", help="write the per-trial table here (update times as ';'-joined lists)")
    ap.add_argument("--payloads", default="0,1,2,3,4",
                    help="indices of `standard_payloads` to run, in this order (split a long run over "
                         "processes)")
    ap.add_argument("--summarize", nargs="+", metavar="CSV",
                    help="only print the tables of per-trial CSVs written by --csv (merged; a trial in two "
                         "files counts once, from the later file)")
    args = ap.parse_args(argv)
    if args.h_ls % args.h:
        ap.error("--h-ls must be a multiple of --h")
    if args.summarize:
        df = pd.concat([pd.read_csv(f) for f in args.summarize], ignore_index=True)
        # a trial run by two processes counts once (the later file wins)
        df = df.drop_duplicates(subset=["payload", "seed", "noise", "mode"], keep="last")
        for col in ("update_times", "update_cpu"):
            df[col] = [[float(x) for x in str(s).split(";") if x not in ("", "nan")] for s in df[col]]
        summarize(df, args, df["seed"].nunique(), None)
        return

    robot = load_robot("panda")
    prior = RobotPrior.from_robot(robot, fv=0.1, armature=np.array([0.3, 0.3, 0.3, 0.3, 0.1, 0.1, 0.1]))
    noise = NoiseBounds(tau_rel=0.025, robot_rel=0.05)
    rows = []
    tic = time.perf_counter()
    chosen = [int(x) for x in args.payloads.split(",")]
    n_total = len(chosen) * args.trials_per_payload
    payloads = standard_payloads()
    for p in chosen:  # in the given order
        payload = payloads[p]
        for k in range(args.trials_per_payload):
            seed = args.seed + 1000 * p + k
            rows += trial(robot, prior, payload, seed, args, noise)
            if args.csv:  # incremental: a crash or a stop keeps the trials done so far
                _to_csv(pd.DataFrame(rows), args.csv)
            done = chosen.index(p) * args.trials_per_payload + k + 1
            lp = [r for r in rows[-6:] if r["mode"] == "lp"]
            flags = [r.get("error", "")[:40] or r["contained_all"] for r in lp]
            print(f"[{done}/{n_total}] {payload.name} seed {seed}: lp contained {flags}"
                  f" mass width {lp[0].get('w.m', float('nan')):.3f} kg, {time.perf_counter() - tic:.0f} s",
                  file=sys.stderr, flush=True)
    df = pd.DataFrame(rows)
    if args.csv:
        _to_csv(df, args.csv)
    summarize(df, args, n_total, time.perf_counter() - tic)


def _to_csv(df, path):
    out = df.copy()
    for col in ("update_times", "update_cpu"):
        out[col] = [";".join(f"{x:.6g}" for x in u) for u in out[col]]
    out.to_csv(path, index=False)


def summarize(df, args, n_total, elapsed):
    print(f"\n## Payload bounds: {n_total} trials × 2 noise draws, {args.integrator} data "
          f"({args.substeps if args.integrator == 'rk4' else 1} step(s)/sample), {args.rate:g} Hz, "
          f"{args.duration:g} s, h = {args.h} (lp) / {args.h_ls} (verified, first-order), 2.5 % torque, "
          f"5 % θ_r; CPU: {platform.processor() or 'n/a'}\n")
    summ = []
    for (mode, kind), g in df.groupby(["mode", "noise"], sort=False):
        summ.append({"mode": mode, "noise": kind, "trials": len(g),
                     "contained (all 10)": f"{100 * g['contained_all'].mean():.1f} %",
                     "worst param. containment": f"{100 * min(g[f'in.{n}'].mean() for n in NAMES):.1f} %",
                     "mass width median / max [kg]": f"{g['w.m'].median():.3f} / {g['w.m'].max():.3f}",
                     "max first-moment width [kg·m]":
                         f"{g[['w.mcx', 'w.mcy', 'w.mcz']].to_numpy().max():.4f}",
                     "max inertia width [kg·m²]": f"{g[[f'w.{n}' for n in NAMES[4:]]].to_numpy().max():.4f}",
                     "|mass err| median / max [%]": f"{g['mass_err_pct'].abs().median():.2f} / "
                                                    f"{g['mass_err_pct'].abs().max():.2f}"})
    print(pd.DataFrame(summ).to_markdown(index=False))
    if "error" in df and df["error"].notna().any():
        errs = df.dropna(subset=["error"]).groupby(["mode", "noise"], sort=False)["error"].agg(
            lambda s: f"{len(s)}× {s.iloc[0][:60]}")
        print("\nfailures (counted as not contained):\n")
        print(errs.to_frame().to_markdown())
    upd = np.concatenate([np.asarray(u, float) for u in df.loc[df["mode"] == "lp", "update_times"]] + [[]])
    if not upd.size:
        return
    cpu = np.concatenate([np.asarray(u, float) for u in df.loc[df["mode"] == "lp", "update_cpu"]] + [[]])
    print(f"\nLP online update (regressors of a 1.5 s chunk + estimates + 20 LPs over all data so far): "
          f"{len(upd)} updates, wall median {np.median(upd):.3f} s, p99 {np.percentile(upd, 99):.3f} s, "
          f"max {upd.max():.3f} s; process CPU median {np.median(cpu):.3f} s, p99 "
          f"{np.percentile(cpu, 99):.3f} s, max {cpu.max():.3f} s; load average at the end "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print("batch bound times (all 7.5 s): " + ", ".join(
        f"{m} median {df.loc[df['mode'] == m, 'bound_s'].median():.3f} s"
        for m in ("verified", "first-order")))
    print(f"cond(Y) median {df['cond_Y'].median():.3g}; simulation {df['sim_s'].median():.2f} s per run"
          + ("" if elapsed is None else f"; total {elapsed:.0f} s"))
    lpu = df[(df["mode"] == "lp") & (df["noise"] == "uniform")]
    if len(lpu):
        by = lpu.groupby("payload", sort=False)["w.m"].agg(["size", "median", "max"]).round(3)
        by["> 0.4 kg"] = lpu.groupby("payload", sort=False)["w.m"].apply(lambda s: int((s > 0.4).sum()))
        print("\nlp mass width per payload, uniform noise [kg]:\n")
        print(by.to_markdown())
    per = df.groupby("mode", sort=False)[[f"in.{n}" for n in NAMES]].mean().mul(100).round(1)
    print("\nper-parameter containment [%] (both noise draws):\n")
    print(per.to_markdown())


if __name__ == "__main__":
    main()
