r"""Floating B1 with four-bar knees: the knee-motor friction at given states (issue 11, floating knee).

The fixed-state regression of `bench_floating_loop_states.py` (`floating_loop_checks.fixed_state_system`
/ `map_fit`, the smoother's raw prior, measured contact forces, effort-saturation windows left out), with
two row weightings of the actuated rows:

* ``uniform``: every actuated row 1/σ (σ = the true parameters' residual RMS on the rows);
* ``stick``: `arm_stick`'s stick-phase rule mapped through the closure (`floating_loop_checks.
  stick_row_factor`: δ_j = fc_j (1 − tanh²(v_j / (2 v_s))), σ_stick,a = ‖(G_ja δ_j)_j‖, row factor
  σ / √(σ² + σ_stick²)), fc from the uniform fit (``stick``) or the truth (``stick-oracle``).

First, the oracle (`oracle_friction`): the knee motors' friction torque at the exact states, and which
law fits it. Then, per case, the held-out error at exact states (hip / thigh / knee motor, %) and each
knee motor's fc, fv, armature against the truth with its posterior std and the calf / rod pins' fc; pins
``free`` (the floating smoother's prior) or ``held`` at their URDF value (the fixed-base loop's rule for
collinear pins). ``--swap``: `swap_table` of a loop-smoother fit; ``--ls-init``: the loop smoother's
initial θ (`ls_initial_parameters`).

    python benchmarks/bench_floating_knee_friction.py --stride 10
    python benchmarks/bench_floating_knee_friction.py --stride 10 --pins held --weightings uniform \
        --states inst --swap benchmarks/results/loops_floating_static_floating_parameters.csv
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

LEGS = ("FL", "FR", "RL", "RR")


def oracle_friction(robot, res, a_pin, p_true, names, sat, stride: int = 2) -> pd.DataFrame:
    """The knee motors' friction torque at MuJoCo's exact states (instantaneous qacc, noise-free efforts,
    contact forces; saturation windows left out): y = [Gᵀ(S τ + Σ J_fᵀ f) − Gᵀ W p₀]_motor with p₀ = the
    true parameters without any friction (the truth's pins have none). Per motor: the share of samples per
    |v| band, `floating_knee.width_profile` (tanh law with its width free; at v_s = 0.05: ``fc_law``) and a
    soft dry-friction fit fc·clip(v/w, ±1) + fv·v (scipy ``least_squares``)."""
    from scipy.optimize import least_squares

    from fg_sysid.estimation.floating_knee import width_profile
    from fg_sysid.estimation.floating_loop_checks import fixed_state_system

    sel = np.arange(0, len(res.t), stride)
    sel = sel[~sat[sel]]
    tau = np.asarray(res.tau, float)
    A, b = fixed_state_system(robot, res.q_pin[sel], res.v_pin[sel], a_pin[sel], tau[sel],
                              forces=np.asarray(res.contact_force)[sel])
    p0 = p_true.copy()
    jn = list(robot.joint_names)
    p0[[names.index(f"{j}.{s}") for j in jn for s in ("fc", "fv")]] = 0.0
    y_all = (b - A @ p0).reshape(sel.size, -1)
    act = [j for j in jn if j not in robot.actuation.passive]
    iv = np.asarray(robot.joint_index_v())
    rows = []
    for leg in LEGS:
        m = f"{leg}_knee_motor"
        v, y = res.v_pin[sel][:, iv[jn.index(m)]], y_all[:, 6 + act.index(m)]
        prof = width_profile(v, y, 0.05)
        sl = least_squares(lambda c, v=v, y=y: c[0] * np.clip(v / abs(c[2]), -1, 1) + c[1] * v - y,
                           [0.5, 0.1, 0.1])
        fc, fv = p_true[names.index(m + ".fc")], p_true[names.index(m + ".fv")]
        av = np.abs(v)
        rows.append({"motor": m, "fc_true": fc, "fv_true": fv,
                     "share_|v|<0.05": float(np.mean(av < 0.05)), "share_|v|>0.5": float(np.mean(av > 0.5)),
                     "fc_tanh_0.05": prof["fc_law"], "fv_tanh_0.05": prof["fv_law"],
                     "width_tanh": prof["width"], "fc_tanh_w": prof["fc"], "fv_tanh_w": prof["fv"],
                     "rms_gain_%": 100 * prof["rms_gain"], "width_soft": abs(sl.x[2]), "fc_soft": sl.x[0],
                     "fv_soft": sl.x[1], "fc_soft_err_%": 100 * (sl.x[0] / fc - 1),
                     "fc_tanh_w_err_%": 100 * (prof["fc"] / fc - 1)})
    return pd.DataFrame(rows)


def swap_table(robot, names, p_true, fit_csv, res_ho, a_ho) -> pd.DataFrame:
    """Which parameter group of a loop-smoother fit costs the held-out hip / thigh / knee error: the fit
    (``fit_csv`` = `bench_loops.py --floating`'s ``*_floating_parameters.csv``) with one group replaced by
    the truth, scored at the exact held-out states (`bench_floating_loop_states.heldout_score`), mean over
    the legs."""
    from bench_floating_loop_states import heldout_score

    from fg_sysid.estimation.loop_baseline import nominal_parameters

    est = dict(pd.read_csv(fit_csv)[["name", "estimate"]].itertuples(index=False, name=None))
    p_fit = np.array([est[n] for n in names])
    kind = [n.rsplit(".", 1)[1] for n in names]
    body = [n.rsplit(".", 1)[0] for n in names]
    inert = np.array([k not in ("fc", "fv", "armature") for k in kind])
    groups = {"fit": np.zeros(len(names), bool), "friction + armature": ~inert,
              "all inertias": inert, "base body": inert & (np.array(body) == "base"),
              "leg bodies": inert & (np.array(body) != "base")}
    for part in ("hip", "thigh", "calf", "crank", "rod"):
        groups[f"{part} bodies"] = inert & np.array([b.endswith("_" + part) for b in body])
    rows = [{"case": "nominal URDF", **heldout_score(robot, nominal_parameters(robot), res_ho, a_ho)},
            {"case": "true parameters", **heldout_score(robot, p_true, res_ho, a_ho)}]
    for g, m in groups.items():
        p = p_fit.copy()
        p[m] = p_true[m]
        rows.append({"case": "fit" if g == "fit" else f"fit, {g} = truth",
                     **heldout_score(robot, p, res_ho, a_ho)})
    return pd.DataFrame(rows)


def ls_initial_parameters(log) -> tuple[list[str], np.ndarray]:
    """The loop smoother's initial θ on ``log`` (`FloatingBaseSmoother._initial_parameters`: the
    constraint-eliminated least squares), the log written and read back like `fg-sysid identify` does;
    the fit stops right after it. Returns (names, physical parameters)."""
    import tempfile

    from fg_sysid.datasets.io import load_log_for_robot, write_log
    from fg_sysid.estimation.floating_smoother import FloatingBaseSmoother
    from fg_sysid.robots import load_robot
    from fg_sysid.robots.looped import loop_robot_path

    class _Stop(Exception):
        pass

    class _InitOnly(FloatingBaseSmoother):
        def _initial_parameters(self, *a, **k):
            self.initial_parameters_ = super()._initial_parameters(*a, **k)
            raise _Stop

    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        write_log(log, Path(tmp) / "log.parquet")
        robot, log_l = load_log_for_robot(Path(tmp) / "log.parquet",
                                          load_robot(str(loop_robot_path("b1_fourbar"))))
        sm = _InitOnly(robot)
        try:
            sm.fit(log_l)
        except _Stop:
            pass
    return list(sm.layout_.names), sm.initial_parameters_


def main() -> None:
    from bench_floating_loop_states import add_log_arguments, heldout_score, simulate, smoother_prior

    from fg_sysid.estimation.floating_loop_checks import (
        fixed_state_system,
        map_fit,
        saturation_window,
        stick_row_factor,
    )
    from fg_sysid.estimation.loop_baseline import parameter_names
    from fg_sysid.robots.loops import actuation_of

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_log_arguments(ap)
    ap.add_argument("--stride", type=int, default=10)
    ap.add_argument("--states", nargs="+", default=["inst", "smooth"])
    ap.add_argument("--pins", nargs="+", default=["free", "held"], choices=["free", "held"])
    ap.add_argument("--weightings", nargs="+", default=["uniform", "stick", "stick-oracle"],
                    choices=["uniform", "stick", "stick-oracle"])
    ap.add_argument("--ls-init", action="store_true", help="the smoother's initial θ")
    ap.add_argument("--swap", default=None, help="a loop fit's *_floating_parameters.csv: swap table")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    c0 = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        robot, res_tr, log_tr, a_tr, res_ho, a_ho = simulate(args)
    print(f"simulated in {time.process_time() - c0:.0f} CPU s", flush=True)
    names = parameter_names(robot)
    p_true = np.array([res_tr.truth["parameters"][n] for n in names])
    p_bar, p_std, lower = smoother_prior(robot)
    col = {j: i for i, j in enumerate(log_tr.joint_names)}
    tau = np.full((len(res_tr.t), robot.n_joints), np.nan)
    for i, j in enumerate(robot.joint_names):
        if j in col:
            tau[:, i] = np.asarray(log_tr.tau)[:, col[j]]
    sat = saturation_window(res_tr.t, tau, robot.effort_limits())
    orc = oracle_friction(robot, res_tr, a_tr, p_true, names, sat)
    pd.set_option("display.width", 250)
    pd.set_option("display.max_columns", 100)
    print("knee-motor friction torque at the exact training states (oracle: true inertias, noise-free "
          "efforts):")
    print(orc.round(3).to_string(index=False), flush=True)
    sel = np.arange(0, len(res_tr.t), args.stride)
    sel = sel[~sat[sel]]
    a_smooth = np.gradient(res_tr.v_pin, res_tr.t, axis=0)
    F = np.asarray(res_tr.contact_force)[sel]
    knees = [f"{leg}_knee_motor" for leg in LEGS]
    im = [i for i, n in enumerate(names) if n.endswith(".m")]
    passive_friction = [names.index(f"{j}.{s}") for j in actuation_of(robot).passive for s in ("fc", "fv")]
    rows = []
    for states in args.states:
        a = a_tr if states == "inst" else a_smooth
        q, v = res_tr.q_pin[sel], res_tr.v_pin[sel]
        A, b = fixed_state_system(robot, q, v, a[sel], tau[sel], forces=F)
        sigma = float(np.sqrt(np.mean((A @ p_true - b) ** 2)))
        for pins in args.pins:
            ps, lo = p_std.copy(), lower.copy()
            if pins == "held":  # passive joints' friction held at the URDF value (the fixed-base loop's rule)
                for i in passive_friction:
                    ps[i], lo[i] = 1e-9, p_bar[i] - 1e-12
            p_uni = None
            for weighting in args.weightings:
                c1 = time.process_time()
                if weighting == "uniform":
                    f = np.ones(A.shape[0])
                else:
                    p_fc = p_uni if weighting == "stick" else p_true
                    f = stick_row_factor(robot, q, v, p_fc, sigma)
                p, cov = map_fit(A * f[:, None], b * f, p_bar, ps, sigma, lo)
                if weighting == "uniform":
                    p_uni = p
                sd = np.sqrt(np.clip(np.diag(cov), 0, None))
                row = {"states": states, "pins": pins, "weighting": weighting,
                       **heldout_score(robot, p, res_ho, a_ho),
                       "rows_down_weighted": float(np.mean(f < 0.5)), "cpu_s": time.process_time() - c1}
                for k in knees:
                    leg = k[:2]
                    for s in ("fc", "fv", "armature"):
                        i = names.index(f"{k}.{s}")
                        row[f"{leg}.{s}"] = p[i]
                        row[f"{leg}.{s}.err%"] = 100 * (p[i] / p_true[i] - 1)
                        row[f"{leg}.{s}.std%"] = 100 * sd[i] / max(abs(p_true[i]), 1e-12)
                    for pj in ("calf_joint", "rod_joint"):
                        row[f"{leg}.{pj}.fc"] = p[names.index(f"{leg}_{pj}.fc")]
                    row[f"{leg}.base_mass"] = p[im[0]]
                rows.append(row)
                print(f"  {states} / pins {pins} / {weighting}: hip {row['hip_joint']:.2f} thigh "
                      f"{row['thigh_joint']:.2f} knee {row['knee_motor']:.2f} %, fc err "
                      + " ".join(f"{row[k[:2] + '.fc.err%']:+.0f}" for k in knees) + " % (std "
                      + " ".join(f"{row[k[:2] + '.fc.std%']:.0f}" for k in knees) + " %), fv err "
                      + " ".join(f"{row[k[:2] + '.fv.err%']:+.0f}" for k in knees) + " %, arm err "
                      + " ".join(f"{row[k[:2] + '.armature.err%']:+.0f}" for k in knees) + " %", flush=True)
    tab = pd.DataFrame(rows)
    if args.ls_init:
        c1 = time.process_time()
        ln, p0 = ls_initial_parameters(log_tr)
        print(f"loop smoother's initial θ (least squares, {time.process_time() - c1:.0f} CPU s) vs truth: "
              + "; ".join(f"{n} {p0[ln.index(n)]:.3f} ({p_true[names.index(n)]:.3f})" for n in
                          ("base.m", "FR_thigh.m", "FR_thigh.mcx", "FR_thigh.mcz", "FL_thigh.mcx")))
    if args.swap:
        print(f"held-out relative RMSE [%] at exact states, {args.swap} with parameter groups set to the "
              "truth:")
        print(swap_table(robot, names, p_true, args.swap, res_ho, a_ho).round(2).to_string(index=False))
    print("truth: " + "; ".join(f"{k[:2]} fc {p_true[names.index(k + '.fc')]:.3f} fv "
                                f"{p_true[names.index(k + '.fv')]:.3f} arm "
                                f"{p_true[names.index(k + '.armature')]:.5f}" for k in knees))
    print(tab.round(4).T.to_string())
    if args.out:
        tab.to_csv(args.out, index=False)
        print(f"wrote {args.out}")
    print(f"total {time.process_time() - c0:.0f} CPU s")


if __name__ == "__main__":
    main()
