"""B1 four-bar knee (fixed hip), MuJoCo truth: the loop smoother over several seeds (issue 11, knee).

Per seed: a ``--train`` s training log (seed s) and a ``--heldout`` s held-out log (seed s + 1, same truth)
of ``b1_leg_fourbar`` in MuJoCo (`simulate_loop_mujoco`: dry friction with stiction on the motors,
1 kHz PD + nominal feedforward, soft ``connect`` equality), ``--rate`` Hz, σ = ``--noise``. Scored like
``bench_loops.py`` (same held-out states, u = Gᵀτ against the noise-free motor torques), only the rows
that matter here:

    true           the floor: true parameters, friction fc·tanh(v/0.05) + fv·v (bench_loops' floor)
    true-sign      the true parameters with MuJoCo's friction law fc·sign(v) + fv·v (another floor)
    ce-ls          paper 000's constraint-elimination LS (all parameters)
    loop-smoother  `JointSmoother` on the looped spec through the `fg-sysid identify` file path

and the knee motor's fc, fv, armature against the truth, the passive calf and rod pins' fc / fv estimates
(truth: 0) and the identifiability of the knee's friction (`fg_sysid.estimation.loop_identifiability`:
the effective reflected viscous coefficient, the posterior correlation of motor and calf fv).
``--variants`` adds ablations of the loop smoother (`VARIANTS`: ``before`` = every pin's friction free and
effort rows 1/σ_τ, ``pins-only``, ``stick-only``, ``all-pins``, ``fixed-width``, ``process-0.1`` = a 3 ×
tighter process noise for the looped fit, `loop_terms.PROCESS_FRACTION` = 0.1). The parameter table has
the knee motor's posterior check (`loop_identifiability.posterior_records`: posterior std, prior shift,
weak flag).

CPU seconds (time.process_time) per fit are printed. Usage::

    nice -n 10 python benchmarks/bench_loops_knee.py --seeds 0 1 2 --variants default before \
        --out benchmarks/results/loops_knee
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from fg_sysid.datasets.mujoco_loops import simulate_loop_mujoco
from fg_sysid.estimation.loop_baseline import (
    ConstraintEliminationLS,
    loop_states,
    parameter_names,
    predict_loop_efforts,
)
from fg_sysid.robots.looped import load_loop_robot, loop_robot_path
from fg_sysid.robots.loops import actuated_joints

ROBOT = "b1_leg_fourbar"
MOTOR, CALF, ROD = "FL_knee_motor", "FL_calf_joint", "FL_rod_joint"


#: loop-smoother variants: JointSmoother keyword arguments and `loop_terms` switches (ablations)
VARIANTS = {
    "default": ({}, {}),
    "fixed-width": ({"friction": "coulomb-viscous"}, {}),
    "before": ({}, {"PASSIVE_FRICTION": "none", "STICK_WEIGHTS": False, "PROCESS_FRACTION": None}),
    "pins-only": ({}, {"STICK_WEIGHTS": False}),
    "stick-only": ({}, {"PASSIVE_FRICTION": "none"}),
    "all-pins": ({}, {"PASSIVE_FRICTION": "all"}),
    "process-0.1": ({}, {"PROCESS_FRACTION": 0.1}),  # issue 11 (knee fv): a 3 × tighter process noise
    # issues 11 + 9 (effort timing): the truth's 1 kHz commands held zero-order, efforts re-timed by half
    # the hold period (`effort_timing`); hold-sample: a hold over the 2 ms sample period assumed instead
    "hold": ({"effort_timing": "hold", "effort_hold_period": 1.0 / 1000.0}, {}),
    "hold-sample": ({"effort_timing": "hold"}, {}),
}


def fit_loop_smoother(log, kw=None, switches=None):
    """`JointSmoother` on the looped spec, the log written and read back like `fg-sysid identify`, with
    the `loop_terms` module switches ``switches`` set for this fit only."""
    import tempfile

    from fg_sysid.datasets.io import load_log_for_robot, write_log
    from fg_sysid.estimation import loop_terms
    from fg_sysid.estimation.smoother import JointSmoother
    from fg_sysid.robots import load_robot

    robot = load_robot(str(loop_robot_path(ROBOT)))
    old = {k: getattr(loop_terms, k) for k in (switches or {})}
    try:
        for k, val in (switches or {}).items():
            setattr(loop_terms, k, val)
        with tempfile.TemporaryDirectory() as tmp:
            write_log(log, Path(tmp) / "log.parquet")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                robot_l, log_l = load_log_for_robot(Path(tmp) / "log.parquet", robot)
                sm = JointSmoother(robot_l, verbose=False, **(kw or {})).fit(log_l)
    finally:
        for k, val in old.items():
            setattr(loop_terms, k, val)
    return sm


def predict_smoother(res, robot, st):
    from bench_loops import project  # noqa: E402  (benchmarks/ on sys.path when run as a script)

    from fg_sysid.factors.inverse_dynamics import InverseDynamicsResidual

    tau = InverseDynamicsResidual(res.layout).predict(st.q, st.v, st.a, res.theta)
    return project(robot, st, tau)


def sign_floor(robot, p_true, st):
    """True parameters with fc·sign(v) in place of fc·tanh(v/0.05) (MuJoCo's law outside stiction)."""
    names = parameter_names(robot)
    p_nof = np.array(p_true, float)
    p_nof[[i for i, n in enumerate(names) if n.endswith(".fc")]] = 0.0
    u = predict_loop_efforts(robot, p_nof, st)
    p_fc = np.zeros_like(p_nof)
    fc_idx = [i for i, n in enumerate(names) if n.endswith(".fc")]
    p_fc[fc_idx] = p_true[fc_idx]
    # tanh with a vanishing width = sign(v)
    return u + predict_loop_efforts(robot, p_fc, st, velocity_scale=1e-6)


def save_result(res, path: Path) -> None:
    """θ, its covariance, the physical estimate and the smoothed trajectory of a fit (for re-analysis)."""
    np.savez(f"{path}.npz", theta=res.theta, theta_cov=res.theta_cov, estimate=res.estimate,
             names=np.array(res.names), noise_tau=np.atleast_1d(res.noise.get("tau", np.nan)))
    res.trajectory.to_parquet(f"{path}_trajectory.parquet")


def run_seed(seed: int, args, variants: dict) -> tuple[list, list]:
    try:
        from fg_sysid.estimation.loop_identifiability import knee_friction_report
    except ImportError:
        knee_friction_report = None

    robot = load_loop_robot(ROBOT)
    tr = simulate_loop_mujoco(robot, args.train, args.rate, args.noise, seed)
    ho = simulate_loop_mujoco(robot, args.heldout, args.rate, args.noise, seed + 1, truth=tr.truth)
    act = [robot.joint_names.index(j) for j in actuated_joints(robot)]
    st = loop_states(robot, ho.log)
    keep = st.keep
    u_true = ho.truth_log.tau[:, act]
    names = parameter_names(robot)
    p_true = np.array([tr.truth["parameters"][n] for n in names])
    preds = {"true": predict_loop_efforts(robot, p_true, st),
             "true-sign": sign_floor(robot, p_true, st)}
    params = {"true": dict(zip(names, p_true, strict=True))}
    cpu = {}
    c0 = time.process_time()
    ce = ConstraintEliminationLS(robot).fit(tr.log)
    cpu["ce-ls"] = time.process_time() - c0
    preds["ce-ls"] = ce.predict(st)
    params["ce-ls"] = dict(zip(names, ce.result_.estimate, strict=True))
    ident = {}
    for vname, (kw, switches) in variants.items():
        c0 = time.process_time()
        sm = fit_loop_smoother(tr.log, kw, switches)
        cpu[vname] = time.process_time() - c0
        res = sm.result_
        preds[vname] = predict_smoother(res, robot, st)
        params[vname] = dict(zip(res.names, res.estimate, strict=True))
        save_result(res, Path(f"{args.out}_seed{seed}_{vname}"))
        ident[vname] = (knee_friction_report(res, sm.robot, prior=(sm._theta_bar, sm._theta_std))
                        if knee_friction_report else {})
        print(f"  seed {seed} {vname}: {cpu[vname]:.0f} CPU s; identifiability "
              f"{json.dumps(ident[vname], default=float)}", flush=True)
    rows, prow = [], []
    for m, u in preds.items():
        err = u[keep] - u_true[keep]
        for i, j in enumerate(st.actuated):
            rms = float(np.sqrt(np.mean(u_true[keep, i] ** 2)))
            e = float(np.sqrt(np.mean(err[:, i] ** 2)))
            rows.append({"seed": seed, "method": m, "joint": j, "rmse": e, "relative_%": 100 * e / rms,
                         "cpu_s": cpu.get(m, 0.0)})
    tru = params["true"]
    for m, p in params.items():
        r = {"seed": seed, "method": m}
        for s in ("fc", "fv", "armature"):
            r[f"{s}_err_%"] = 100 * (p[f"{MOTOR}.{s}"] / tru[f"{MOTOR}.{s}"] - 1)
        r["calf_fc"], r["calf_fv"] = p.get(f"{CALF}.fc", np.nan), p.get(f"{CALF}.fv", np.nan)
        r["rod_fc"], r["rod_fv"] = p.get(f"{ROD}.fc", np.nan), p.get(f"{ROD}.fv", np.nan)
        r["motor_vs"] = p.get(f"{MOTOR}.vs", np.nan)
        if ident.get(m):
            r["fv_eff_err_%"] = 100 * (ident[m]["fv_effective"] / tru[f"{MOTOR}.fv"] - 1)
            r["corr_fv_motor_calf"] = ident[m]["posterior_correlation_fv"]
            if ident[m].get("fv_posterior_relative_std") is not None:  # posterior check (issue 11, knee fv)
                r["fv_post_std_%"] = 100 * ident[m]["fv_posterior_relative_std"]
                r["fv_prior_shift_%"] = 100 * (ident[m]["fv_prior_shift"] or np.nan) / tru[f"{MOTOR}.fv"]
                r["fv_weak"] = ident[m]["fv_weak"]
        prow.append(r)
    return rows, prow


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--train", type=float, default=10.0)
    ap.add_argument("--heldout", type=float, default=5.0)
    ap.add_argument("--rate", type=float, default=500.0)
    ap.add_argument("--noise", type=float, default=0.01)
    ap.add_argument("--variants", nargs="+", default=["default"], choices=sorted(VARIANTS),
                    help="loop-smoother variants (VARIANTS): default; before (every pin's friction free, "
                         "effort rows 1/σ_τ); pins-only / stick-only (one of the two changes); all-pins; "
                         "fixed-width (friction='coulomb-viscous'); process-0.1 (3 × tighter process noise); "
                         "hold / hold-sample (efforts re-timed: 1 ms hold / the 2 ms sample period)")
    ap.add_argument("--out", default="benchmarks/results/loops_knee")
    args = ap.parse_args()
    variants = {f"loop-smoother[{v}]" if v != "default" else "loop-smoother": VARIANTS[v]
                for v in args.variants}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    rows, prows = [], []
    for seed in args.seeds:
        r, p = run_seed(seed, args, variants)
        rows += r
        prows += p
        pd.DataFrame(rows).to_csv(f"{out}.csv", index=False)
        pd.DataFrame(prows).to_csv(f"{out}_parameters.csv", index=False)
    tab = pd.DataFrame(rows)
    pd.set_option("display.width", 200)
    print("held-out relative RMSE [%] per seed (knee motor):")
    knee = tab[tab.joint == MOTOR].pivot(index="method", columns="seed", values="relative_%")
    knee["mean"] = knee.mean(axis=1)
    print(knee.round(2).to_string())
    print("all joints, mean over seeds:")
    print(tab.pivot_table(index="method", columns="joint", values="relative_%").round(2).to_string())
    print(pd.DataFrame(prows).round(4).to_string(index=False))
    print(f"wrote {out}.csv and {out}_parameters.csv")


if __name__ == "__main__":
    main()
