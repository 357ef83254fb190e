"""Energy rows with the input work from the *states* (issue 12, session 8): whitening at the truth and the
overlap with the inverse-dynamics and velocity rows, on simulated Z1 logs outside the Table I study's seeds.

For each log (`fg_sysid.datasets.simulate`: efforts held zero-order between the 500 Hz samples, RK4
substeps, friction fc·tanh(v/0.02) + fv·v, σ on q, v, τ) the energy row per sample interval (paper 004
eq. 63) ``r_E = E(x_{k+1}) − E(x_k) + W_f − W`` is evaluated at the **true** states and parameters with three
forms of the input work W:

* ``measured`` — Ŵ = τ̂_kᵀ ½h (v̂_k + v̂_{k+1}) (`input_work`, hold), long-run σ (`input_work_std`): before;
* ``state-q`` — W(x) = τ̂_kᵀ (q_{k+1} − q_k) (`state_work`), σ from the effort noise (`state_work_std`);
* ``state-v`` — W(x) = τ̂_kᵀ ½h (v_k + v_{k+1}).

Printed (means over seeds): whitened row RMS (1 when σ is right), the same with the noise-free effort
(model/quadrature error in units of σ), lag-1 correlation of the rows' noise, RMS of whitened sums of 50
consecutive rows, median σ; and the overlap with the other rows of the smoother at the truth:
``corr(r_E, d_kᵀ r_ID,k [+ ½h τ̂_kᵀ (r_v,k + r_v,k+1)])`` with r_ID = ID(q, v, a; θ) − τ̂ the inverse-dynamics
rows (a the true acceleration just after t_k), r_v = v − v̂ the velocity rows (measured form only) and d_k
the row's ∫ v dt (q_{k+1} − q_k for state-q, ½h (v_k + v_{k+1}) otherwise), and
the RMS of the *innovation* ``r_E − (that combination)`` in units of σ: the part of the energy row that
the inverse-dynamics and velocity rows do not already contain (docs/energy.md, "Double counting").
Last two columns: the out-of-class model error — the noise-free rows at the true states and (fc, fv) with
the estimators' tanh width (0.05 instead of 0.02 rad/s), in units of the rows' σ, for the energy rows and
for the inverse-dynamics rows (units of σ_τ).

    nice -n 10 python benchmarks/bench_energy_state_rows.py [--seeds 5000,5001,5002,5003] [--noise 0.01]
"""

from __future__ import annotations

import numpy as np
from bench_energy_rows import seed_table_main, true_theta, window_sums

from fg_sysid.datasets.simulate import simulate
from fg_sysid.factors.energy import (
    EnergyResidual,
    input_work,
    input_work_std,
    knot_interval_efforts,
    state_work,
    state_work_std,
)
from fg_sysid.factors.inverse_dynamics import InverseDynamicsResidual


def analyse(robot, seed, duration, noise, rate=500.0, vs_true=0.02, sum_rows=50, vs_est=0.05):
    sim = simulate(robot, duration, rate, noise, seed, friction_velocity_scale=vs_true)
    lay, th = true_theta(robot, sim.truth, vs_true)
    T, L = sim.truth_log, sim.log
    t = T.t
    names = list(robot.joint_names)
    iv = robot.joint_index_v()
    er = EnergyResidual(lay)
    r0 = er.evaluate(T.q, T.v, t, th, np.zeros(t.size - 1), jacobians=False).r  # ΔE + W_f
    # the other rows of the smoother at the truth
    r_id = InverseDynamicsResidual(lay).evaluate(T.q, T.v, sim.truth_acceleration, L.tau, th, False).r
    r_v = T.v - L.v
    h = np.diff(t)[:, None]
    d = np.diff(T.q, axis=0)
    tau_k = knot_interval_efforts(t, L.tau, t, names)
    dv = 0.5 * h * (T.v[:-1] + T.v[1:])
    # W = τ̂ᵀ d with τ̂ = ID − r_ID (and, measured form, v̂ = v − r_v): r_E = (ΔE + W_f − IDᵀd) + overlap
    overlap = {"measured": np.einsum("kj,kj->k", dv, r_id[:-1])
               + np.einsum("kj,kj->k", 0.5 * h * tau_k, r_v[:-1] + r_v[1:]),
               "state-q": np.einsum("kj,kj->k", d, r_id[:-1]),
               "state-v": np.einsum("kj,kj->k", dv, r_id[:-1])}
    # out-of-class model error: true states and (fc, fv), the estimators' tanh width vs_est
    lay_o, th_o = true_theta(robot, sim.truth, vs_est)
    r0_o = EnergyResidual(lay_o).evaluate(T.q, T.v, t, th_o, np.zeros(t.size - 1), jacobians=False).r
    id_o = InverseDynamicsResidual(lay_o).evaluate(T.q, T.v, sim.truth_acceleration, T.tau, th_o, False).r
    id_oc = float(np.sqrt(np.mean((id_o / noise) ** 2)))
    rows = []
    for form in ("measured", "state-q", "state-v"):
        if form == "measured":
            w = input_work(t, L.v, L.tau, t[:-1], t[1:], names)
            w_nf = input_work(t, T.v, T.tau, t[:-1], t[1:], names)
            s = input_work_std(t, L.v, L.tau, t[:-1], t[1:], noise, noise)
            s_own = input_work_std(t, L.v, L.tau, t[:-1], t[1:], noise, noise, long_run=False)
        else:
            w = state_work(er.space, T.q, T.v, t, tau_k, iv, form, jacobians=False)[0]
            w_nf = state_work(er.space, T.q, T.v, t, T.tau[:-1], iv, form, jacobians=False)[0]
            s = s_own = state_work_std(t, L.v, noise)
        r, r_nf = r0 - w, r0 - w_nf
        e = r - r_nf
        rows.append({
            "seed": seed, "form": form,
            "row RMS (own σ)": float(np.sqrt(np.mean((r / s_own) ** 2))),
            "noise-free RMS/σ": float(np.sqrt(np.mean((r_nf / s_own) ** 2))),
            "lag-1": float(np.corrcoef(e[:-1], e[1:])[0, 1]),
            "50-row sums RMS": float(np.sqrt(np.mean(window_sums(r, sum_rows) ** 2
                                                     / window_sums(s ** 2, sum_rows)))),
            "median σ [mJ]": float(1e3 * np.median(s)),
            "corr(r_E, ID+v rows)": float(np.corrcoef(r, overlap[form])[0, 1]),
            "innovation RMS/σ": float(np.sqrt(np.mean(((r - overlap[form]) / s_own) ** 2))),
            f"vs {vs_est:g}: row RMS/σ": float(np.sqrt(np.mean(((r0_o - w_nf) / s_own) ** 2))),
            f"vs {vs_est:g}: ID RMS/σ_τ": id_oc,
        })
    return rows


def main():
    seed_table_main(analyse, "form", __doc__.splitlines()[0], width=220)


if __name__ == "__main__":
    main()
