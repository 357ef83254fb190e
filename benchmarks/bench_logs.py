"""ROS bag reading and degenerate-data checks (issue 14): the numbers of docs/benchmarks.md.

1. A simulated Z1 log (20 s at 1 kHz, noise 0.01) written as rosbag2 sqlite3, rosbag2 MCAP and ROS 1
   bags with rosbags' writers, read back by `load_log_for_robot`: size, read time, largest difference
   to the source columns; and the same log published as two JointState streams (joints 1-3, 4-6, the
   second 0.5 ms late, stamps jittered by up to ±0.2 ms) resampled onto the 1 kHz clock: error against
   the noise-free truth interpolated at the resampled instants vs the log's own noise.
2. `check_data` on the issue's degenerate cases and on the shared logs (TIAGo real, UR10, SO-101):
   regressor rank / identifiable combinations, condition number, problems, time.

Run: ``python benchmarks/bench_logs.py`` (about a minute on an idle laptop core).
"""

from __future__ import annotations

import tempfile
import time
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from fg_sysid.datasets.io import load_log_for_robot
from fg_sysid.datasets.rosbag import conversion_report, write_bag
from fg_sysid.datasets.simulate import simulate
from fg_sysid.estimation.checks import check_data
from fg_sysid.robots import load_robot

#: shared/ sits beside the clone (or beside the folder of worktrees)
DATA = next((p / "shared" / "data" for p in Path(__file__).resolve().parents[2:4]
             if (p / "shared" / "data").is_dir()), Path("shared/data"))


def _size(p: Path) -> float:
    files = [p] if p.is_file() else list(p.rglob("*"))
    return sum(f.stat().st_size for f in files if f.is_file()) / 1e6


def bags() -> None:
    z1 = load_robot("z1")
    sim = simulate(z1, 20.0, 1000.0, 0.01, 0)
    log = sim.log
    rows = []
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        for storage, name in (("sqlite3", "b_sqlite3"), ("mcap", "b_mcap"), ("ros1", "b.bag")):
            t0 = time.perf_counter()
            write_bag(d / name, log, storage=storage)
            t1 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                _, back = load_log_for_robot(d / name, z1)
            t2 = time.perf_counter()
            err = max(float(np.max(np.abs(a - b))) for a, b in ((back.q, log.q), (back.v, log.v),
                                                                 (back.tau, log.tau)))
            rows.append({"bag": conversion_report(back)["format"], "messages": log.n_samples,
                         "MB": round(_size(d / name), 2), "write s": round(t1 - t0, 2),
                         "read s": round(t2 - t1, 2), "max |diff| to source": err})
        print("## round trip: 20 s of Z1 at 1 kHz, one JointState message per sample\n")
        print(pd.DataFrame(rows).to_markdown(index=False))

        rng = np.random.default_rng(0)
        jit = replace(log, t=log.t + rng.uniform(-2e-4, 2e-4, log.n_samples))
        names = list(log.joint_names)
        write_bag(d / "split", jit, storage="mcap", joint_groups=[names[:3], names[3:]],
                  group_offsets_s=[0.0, 5e-4])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _, back = load_log_for_robot(d / "split", z1)
        rep = conversion_report(back)
        tq = np.asarray(sim.truth_log.q, float)
        t0 = rep["start_time_s"] - 1_700_000_000.0  # write_bag's default start time
        rows = []
        for i, j in enumerate(names):
            # the truth at the instants the resampled row stands for (group 2 stamps are 0.5 ms late)
            t_src = back.t + t0 - (5e-4 if i >= 3 else 0.0)
            exact = np.interp(t_src, log.t, tq[:, i])
            rms = float(np.sqrt(np.mean((back.q[:, i] - exact) ** 2)))
            rows.append({"joint": j, "rms error vs truth [rad]": rms, "log noise std [rad]": 0.01})
        print(f"\n## two jittered JointState streams resampled: {rep['samples']} samples at "
              f"{rep['rate_hz']:.6g} Hz, trimmed {rep['trimmed_start_s'] * 1e3:.3g} ms / "
              f"{rep['trimmed_end_s'] * 1e3:.3g} ms\n")
        print(pd.DataFrame(rows).to_markdown(index=False, floatfmt=".4g"))


def checks() -> None:
    z1 = load_robot("z1")
    good = simulate(z1, 4.0, 200.0, 0.01, 0).log
    still_q = np.tile(good.q[0], (good.n_samples, 1))
    one = good.q.copy()
    one[:, 1:] = good.q[0, 1:]
    cases = [("z1 sim 4 s (good)", z1, good),
             ("z1 sim, 5 samples", z1, good.slice(0, 5)),
             ("z1 sim, no joint moves", z1, replace(good, q=still_q, v=np.zeros_like(good.v))),
             ("z1 sim, all efforts zero", z1, replace(good, tau=np.zeros_like(good.tau))),
             ("z1 sim, only joint1 moves", z1, replace(good, q=one, v=None))]
    for label, path, robot in (("TIAGo real (shared)", "tiago_dynamic_2021-07-01.csv", "tiago"),
                               ("UR10 (shared)", "ur10_truth_train.csv", DATA / "ur10_truth.urdf"),
                               ("SO-101 sim (shared)", "so101_sim_train.csv", "so101")):
        if (DATA / path).is_file():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                r, lg = load_log_for_robot(DATA / path, robot)
            cases.append((label, r, lg))
    rows = []
    for label, robot, lg in cases:
        t0 = time.perf_counter()
        c = check_data(robot, lg)
        rows.append({"log": label, "samples": c.samples,
                     "rank / combinations": (f"{c.regressor_rank} / {c.identifiable_combinations}"
                                             if c.regressor_rank is not None else "-"),
                     "condition number": ("-" if c.condition_number is None else f"{c.condition_number:.3g}"),
                     "verdict": "exit 2: " + c.problems[0][:60] if c.problems else
                     ("warning: " + c.warnings[0][:60] if c.warnings else "ok"),
                     "seconds": round(time.perf_counter() - t0, 2)})
    print("\n## check_data\n")
    print(pd.DataFrame(rows).to_markdown(index=False))


if __name__ == "__main__":
    bags()
    checks()
