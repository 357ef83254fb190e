"""Online tracking of a payload change, estimator variants (issue 13): the model error of the fixed-lag
`OnlineEstimator`'s current θ at given times after a simulated 1 kg payload change on Z1 (the change of
``bench_online_tracking.py`` (b): `datasets.payload_change`, t = 15 s, 500 Hz, σ = 0.01, 100 Hz knots, 1 s
lag, 3 s warm-up), without the quality gate.

Model error = relative RMSE of the θ's efforts at the *true* states and accelerations of a 5 s held-out log
of the loaded robot against its true efforts (`validation.predict_efforts`; the parameters' error alone).
Variants: the default (change detector, reset × 0.001, no relearning, no hold-off), relearning for 4 s,
reset factors, and no detector with and without forgetting.

    python benchmarks/bench_online_relearn.py [--times 16 17.5 20 25] [--variants default no-relearn ...]
"""

from __future__ import annotations

import argparse
import time

import pandas as pd

from fg_sysid.datasets.payload_change import simulate_payload_change
from fg_sysid.datasets.simulate import simulate
from fg_sysid.estimation.online import OnlineEstimator
from fg_sysid.robots import load_robot
from fg_sysid.validation import model_spec, predict_efforts, relative_rmse

VARIANTS = {
    "default": {},  # no relearning, no hold-off
    "relearn-4": {"change_detection": {"relearn": 4.0}},
    "no-relearn": {"change_detection": {"relearn": 0.0}},
    "reset-0.01": {"change_detection": {"reset": 0.01}},
    "no-detector": {"change_detection": False},
    "forgetting-0.5": {"change_detection": False, "forgetting": 0.5},
}


def run(variant: str, times: list[float], rate: float = 500.0) -> dict:
    robot = load_robot("z1")
    T = max(times) + 0.01
    pc = simulate_payload_change(robot, T, rate, 0.01, 1, change_time=15.0, mass=1.0, offset=(0.05, 0.0, 0.0))
    held = simulate(robot, 5.0, rate, 0.01, 200, truth=pc.truth_after)
    tl = held.truth_log
    est = OnlineEstimator(robot, lag=1.0, knot_rate=100.0, warmup=3.0, **VARIANTS[variant])
    row = {"variant": variant}
    todo = sorted(times)
    log = pc.log
    t0 = time.perf_counter()
    for i in range(0, log.n_samples, 5):
        est.update(log.slice(i, i + 5))
        while todo and log.t[min(i + 4, log.n_samples - 1)] >= todo[0]:
            m = model_spec(est.result(), robot, "z1")
            row[f"t={todo[0]:g} s"] = relative_rmse(predict_efforts(m, robot, tl.q, tl.v,
                                                                    held.truth_acceleration), tl.tau)
            todo.pop(0)
    row["changes"] = len(est.changes_)
    row["replay_s"] = time.perf_counter() - t0
    print(f"  {variant}: {row['replay_s']:.0f} s", flush=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--times", type=float, nargs="+", default=[16.0, 17.5, 20.0, 25.0])
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    a = ap.parse_args()
    df = pd.DataFrame([run(v, a.times) for v in a.variants])
    print("\nmodel error of the online θ after a 1 kg payload change at t = 15 s (Z1):\n")
    print(df.to_markdown(index=False, floatfmt=".4g"))


if __name__ == "__main__":
    main()
