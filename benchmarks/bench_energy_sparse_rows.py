"""Energy rows with knots sparser than the log (issue 12, session 9): what the measured-work rows add at knot
stride s, at the truth, on simulated Z1 logs (8 s at 500 Hz, σ = 0.01 on q, v, τ; efforts held between
samples; friction fc·tanh(v/0.02) + fv·v), seeds outside the Table I study's 0–49 and 100–103.

At stride s the inverse-dynamics rows see the efforts at the knots only (every s-th sample) and the velocity
rows the logged velocities at the knots; the energy row over [t_k, t_{k+s}] (paper 004 eq. 63,
`factors.energy.EnergyResidual` with Ŵ = `input_work(quadrature="hold")` over every log sample between the
knots, whitened by `input_work_std`, long-run share) also integrates the s − 1 samples in between. Printed per
stride (means over seeds):

* ``row RMS``: whitened RMS of the rows at the true states and parameters with the sensor σ — 1 when the
  noise model is right; ``noise-free RMS/σ``: the same with the noise-free log (the model error of the
  row: the friction work W_f is a trapezoid over the two knots, h = s/500 s, while Ŵ integrates every sample);
  ``sums RMS``: sums of 50 consecutive rows whitened by the root of the sum of their σ²;
* ``new noise share``: the fraction of the row's noise variance that comes from samples **no other row of
  the graph sees** (efforts and velocities strictly between two knots): 0 at s = 1 — the session-8 finding
  that the row is then a combination of the inverse-dynamics and velocity rows — and grows toward 1 with s
  (0.90 at s = 5): only then is the energy row new data;
* ``fc std``, ``fv std`` (with energy / without), median over joints: the marginal posterior std of each
  joint's Coulomb and viscous coefficients from the smoother's own graph (`JointSmoother`, knot stride s,
  σ's given as the sensor noise) linearized at the true states and parameters (undamped Schur complement,
  `LevenbergMarquardt.covariance`), with the energy rows divided by without; and ``fc std / stride-1`` the
  stride-s-with-energy std divided by the stride-1 smoother's (no energy) — below 1 would mean the rows claim
  more than the whole log holds (double counting).

    nice -n 10 python benchmarks/bench_energy_sparse_rows.py [--seeds 5000,5001,5002,5003] [--strides 1,5,10]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from fg_sysid.datasets.simulate import simulate
from fg_sysid.estimation.energy_sparse import friction_posterior_std, measured_row_statistics
from fg_sysid.robots import load_robot

VS_TRUE = 0.02
SIGMA = 0.01


def row_statistics(robot, sim, s):
    return measured_row_statistics(robot, sim, s, SIGMA, VS_TRUE)


def friction_std(robot, sim, s, energy):
    return friction_posterior_std(robot, sim, s, energy, SIGMA, VS_TRUE)


def analyse(robot, seed: int, strides, duration: float) -> list[dict]:
    sim = simulate(robot, duration, 500.0, SIGMA, seed, friction_velocity_scale=VS_TRUE)
    ref = friction_std(robot, sim, 1, False)
    rows = []
    for s in strides:
        row = {"seed": seed, "stride": s, **row_statistics(robot, sim, s)}
        no_e = ref if s == 1 else friction_std(robot, sim, s, False)
        with_e = friction_std(robot, sim, s, True)
        row["fc std (E / no E)"] = float(np.median(with_e[:, 0] / no_e[:, 0]))
        row["fv std (E / no E)"] = float(np.median(with_e[:, 1] / no_e[:, 1]))
        row["fc std no E / stride-1"] = float(np.median(no_e[:, 0] / ref[:, 0]))
        row["fc std E / stride-1"] = float(np.median(with_e[:, 0] / ref[:, 0]))
        row["fv std E / stride-1"] = float(np.median(with_e[:, 1] / ref[:, 1]))
        rows.append(row)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="5000,5001,5002,5003")
    ap.add_argument("--strides", default="1,5,10")
    ap.add_argument("--duration", type=float, default=8.0)
    args = ap.parse_args()
    robot = load_robot("z1")
    strides = [int(s) for s in args.strides.split(",")]
    c0 = time.process_time()
    rows = []
    for seed in (int(x) for x in args.seeds.split(",")):
        rows += analyse(robot, seed, strides, args.duration)
        print(f"seed {seed} done ({time.process_time() - c0:.0f} CPU s)", flush=True)
    df = pd.DataFrame(rows)
    pd.set_option("display.width", 220)
    print(f"z1, {args.duration:g} s at 500 Hz, σ = {SIGMA:g}, truth states and parameters; means over seeds "
          f"{args.seeds}:")
    print(df.drop(columns="seed").groupby("stride").mean().round(3).to_string())
    print(f"{time.process_time() - c0:.1f} CPU s")


if __name__ == "__main__":
    main()
