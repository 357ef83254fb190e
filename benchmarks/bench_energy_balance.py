"""How well the work-energy balance (paper 004 eq. 63) closes with the TRUE parameters on logs of another
simulator: MuJoCo B1 (soft contacts, dry friction; out of the residual's model class).

For windows of 25 and 250 samples (0.05 s, 0.5 s at 500 Hz) over which no contact flag changes, prints
sum|r| / sum|W_in| and the medians of |W_in|, |r| and the friction dissipation W_f, where
r = E(x_b) - E(x_a) + W_f - W_in with E from the true inertias and armature (Pinocchio energy
regressors), W_f = integral of (fc|v| + fv v^2) (MuJoCo frictionloss + damping, true values) and W_in the
zero-order-hold input work of the applied joint torques. The stance-contact "no work" assumption is what
this measures (plus MuJoCo's dry-friction constraint vs the integral above).

    nice -n 10 python benchmarks/bench_energy_balance.py
"""

from __future__ import annotations

import numpy as np

from fg_sysid.datasets.mujoco_sim import simulate_stance
from fg_sysid.factors.energy import EnergyResidual, input_work, interval_windows, stance_constant_windows
from fg_sysid.layout import ParameterLayout
from fg_sysid.robots import load_robot


def main():
    robot = load_robot("b1")
    layout = ParameterLayout.create(robot, "raw")
    iv = robot.joint_index_v()
    print("motion  window[samples]  windows  sum|r|/sum|W_in|  median|W_in| [J]  median|r| [J]  "
          "median W_f [J]")
    for motion, duration in (("sway", 4.0), ("steps", 4.8)):
        res = simulate_stance(robot, duration=duration, rate=500, seed=0, motion=motion, randomize=True)
        p = res.truth["parameters"]
        P = np.array([p.get(n, 0.0) for n in layout.names])
        fc = np.array([p[f"{j}.fc"] for j in robot.joint_names])
        fv = np.array([p[f"{j}.fv"] for j in robot.joint_names])
        P[layout.s_friction] = 1e-12  # dissipation computed below with MuJoCo's dry friction + damping
        er = EnergyResidual(layout)
        theta = layout.to_theta(P)
        t, q, v = res.t, res.q_pin, res.v_pin
        E = er.energy(q, v, theta)
        vj = v[:, iv]
        pf = (fc * np.abs(vj) + fv * vj ** 2).sum(1)
        cum = np.concatenate([[0.0], np.cumsum(0.5 * np.diff(t) * (pf[1:] + pf[:-1]))])
        for L in (25, 250):
            s = stance_constant_windows(interval_windows(t.size, L), L, res.contact)
            W = input_work(t, vj, res.tau, t[s], t[s + L], quadrature="zoh", q_meas=res.q)
            Wf = cum[s + L] - cum[s]
            r = E[s + L] - E[s] + Wf - W
            print(f"{motion:6s}  {L:15d}  {s.size:7d}  {np.sum(np.abs(r)) / np.sum(np.abs(W)):16.3f}  "
                  f"{np.median(np.abs(W)):16.3f}  {np.median(np.abs(r)):13.3f}  {np.median(Wf):14.3f}")


if __name__ == "__main__":
    main()
