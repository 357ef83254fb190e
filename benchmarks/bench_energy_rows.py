"""Energy rows at the truth (issue 12): quadrature bias, noise level and row correlation of the measured
input work on simulated Z1 logs (`fg_sysid.datasets.simulate`: efforts held zero-order between the 500 Hz
samples, RK4 substeps, friction fc·tanh(v/0.02) + fv·v, σ on q, v, τ), on seeds outside the Table I study's
0–49.

For each log, the work–energy residual per sample interval ``r = E(x_{k+1}) − E(x_k) + W_f − Ŵ_k``
(`factors.energy.EnergyResidual`, paper 004 eq. 63) is evaluated at the **true** states (the noise-free log)
and the **true** parameters, with Ŵ from the noisy log by each quadrature of `input_work`, and whitened by
`input_work_std` (per-row std, ``long_run=False``, and the long-run share, ``long_run=True``). Printed per
quadrature (means over seeds):

* ``bias/σ``, ``bias RMS/σ``: mean and RMS of the residual with the *noise-free* Ŵ, in units of the per-row
  σ (a one-signed error adds up over the log), and ``log bias/σ_sum``: its sum over the whole log in units
  of the std of the sum;
* ``row RMS``: RMS of the whitened rows (per-row σ) — 1 when the per-row σ is right;
* ``lag-1``: correlation of consecutive rows' noise (shared boundary samples);
* ``sum RMS (ind / lr)``: RMS of sums of 50 consecutive rows (0.1 s) whitened by the root of the sum of their
  σ² — per-row σ (independent rows assumed) vs the long-run σ; 1 when the rows carry the right information.

    nice -n 10 python benchmarks/bench_energy_rows.py [--seeds 5000,5001,5002,5003] [--duration 8]
        [--noise 0.01]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from fg_sysid.datasets.simulate import simulate, truth_arrays
from fg_sysid.factors.energy import WORK_QUADRATURES, EnergyResidual, input_work, input_work_std
from fg_sysid.layout import ParameterLayout
from fg_sysid.robots import load_robot


def true_theta(robot, truth, velocity_scale):
    """θ of the true parameters in a Coulomb–viscous layout with the truth's tanh width."""
    tr = truth_arrays(truth, robot)
    lay = ParameterLayout.create(robot, "exponential-eigenvalue", "coulomb-viscous", velocity_scale)
    p = np.concatenate([tr["inertial"].ravel(), np.c_[tr["fc"], tr["fv"]].ravel(), tr["armature"]])
    return lay, lay.to_theta(p)


def window_sums(x, k):
    n = (x.size // k) * k
    return x[:n].reshape(-1, k).sum(axis=1)


def analyse(robot, seed, duration, noise, rate=500.0, vs_true=0.02, sum_rows=50):
    sim = simulate(robot, duration, rate, noise, seed, friction_velocity_scale=vs_true)
    lay, th = true_theta(robot, sim.truth, vs_true)
    T, L = sim.truth_log, sim.log
    t = T.t
    ta, tb = t[:-1], t[1:]
    names = list(robot.joint_names)
    r0 = EnergyResidual(lay).evaluate(T.q, T.v, t, th, np.zeros(t.size - 1), jacobians=False).r  # ΔE + W_f
    rows = []
    for quad in WORK_QUADRATURES:
        kw = {"q_meas": L.q} if quad == "zoh" else {}
        w_nf = input_work(t, T.v, T.tau, ta, tb, names, quad, q_meas=T.q)
        w = input_work(t, L.v, L.tau, ta, tb, names, quad, **kw)
        s_ind = input_work_std(t, L.v, L.tau, ta, tb, noise, noise, quad, sigma_q=noise, long_run=False, **kw)
        s_lr = input_work_std(t, L.v, L.tau, ta, tb, noise, noise, quad, sigma_q=noise, long_run=True, **kw)
        bias, r = r0 - w_nf, r0 - w
        e = w - w_nf
        rows.append({
            "seed": seed, "quadrature": quad,
            "bias/σ": float(np.mean(bias / s_ind)),
            "bias RMS/σ": float(np.sqrt(np.mean((bias / s_ind) ** 2))),
            "log bias/σ_sum": float(np.sum(bias) / np.sqrt(np.sum(s_lr ** 2))),
            "row RMS": float(np.sqrt(np.mean((r / s_ind) ** 2))),
            "row RMS (lr σ)": float(np.sqrt(np.mean((r / s_lr) ** 2))),
            "lag-1": float(np.corrcoef(e[:-1], e[1:])[0, 1]),
            "sum RMS (ind)": float(np.sqrt(np.mean(window_sums(r, sum_rows) ** 2
                                                   / window_sums(s_ind ** 2, sum_rows)))),
            "sum RMS (lr)": float(np.sqrt(np.mean(window_sums(r, sum_rows) ** 2
                                                  / window_sums(s_lr ** 2, sum_rows)))),
            "median σ_row [mJ]": float(1e3 * np.median(s_ind)),
        })
    return rows


def seed_table_main(analyse, group: str, description: str, width: int = 200):
    """The command line of the energy-row benches: ``analyse(robot, seed, duration, noise)`` per seed on
    the Z1 (8 s at 500 Hz), printed as means over the seeds per ``group`` column."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--seeds", default="5000,5001,5002,5003")
    ap.add_argument("--duration", type=float, default=8.0)
    ap.add_argument("--noise", type=float, default=0.01)
    args = ap.parse_args()
    robot = load_robot("z1")
    c0 = time.process_time()
    rows = []
    for s in (int(x) for x in args.seeds.split(",")):
        rows += analyse(robot, s, args.duration, args.noise)
        print(f"seed {s} done ({time.process_time() - c0:.0f} CPU s)", flush=True)
    df = pd.DataFrame(rows)
    pd.set_option("display.width", width)
    print(f"z1, {args.duration:g} s at 500 Hz, σ = {args.noise:g}, truth states and parameters; means over "
          f"seeds {args.seeds}:")
    print(df.drop(columns="seed").groupby(group, sort=False).mean().round(3).to_string())
    print(f"{time.process_time() - c0:.1f} CPU s")


def main():
    seed_table_main(analyse, "quadrature", __doc__.splitlines()[0])


if __name__ == "__main__":
    main()
