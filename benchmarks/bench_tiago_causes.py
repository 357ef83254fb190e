"""Why the smoother lost to classical least squares on the real TIAGo log, and the choice of the fix (issue 9,
session 7). Data and split as in bench_external.py (``tiago_dynamic_2021-07-01.csv``: train rows
921–4799, held out 4800–6790; effort RMSE [N·m] of arm_2–arm_4, the reliable efforts, pooled = sqrt of
the mean of the three mean squares; held-out efforts through the ``fg-sysid predict`` path).

Sections (``--sections``, default all):

* ``consistency`` — what physical consistency costs on this log: the classical regression (LS-SG's
  cross-validated Savitzky–Golay states and filtered efforts, Gautier's two-step row weights) solved
  unconstrained (physical coordinates) and as a MAP fit in the smoother's consistent parameterization
  with the smoother's prior (log-Cholesky, exp-positive friction/armature; `loop_init.map_parameters`
  from `loop_init.linear_start`), on all seven arm efforts and on arm_1–arm_4 only; held-out RMSE.
* ``gauss-newton`` — the smoother's Gauss–Newton model at its line-search solution: per term, the cost
  the linearization predicts along the GN step against the actual cost (step 1, 1/4, 1/16), and the
  step's state-only / θ-only parts of the inverse-dynamics cost per joint.
* ``residuals`` — the distribution of the default smoother's training inverse-dynamics residuals per
  joint (σ used, RMS, 1.4826·MAD, excess kurtosis, share beyond 3σ): is a robust loss justified?
* ``cv`` — the choice, by blocked cross-validation on the TRAINING rows only: each variant is fitted on
  one contiguous part of the training rows and scored on the other (fold A: fit 921–3506, score
  3507–4799; fold B: fit 2214–4799, score 921–2213), arm_2–arm_4 pooled, mean of the two folds.
* ``heldout`` — the same variants fitted on all training rows, scored on the held-out rows.
* ``window`` — parameters or prediction filter? The SG window that LS-SG's cross-validation picks on the
  training rows sets the smoother's initial states, its process noise (0.3 × RMS of the initial
  accelerations) and the held-out accelerations of the predict path; dropping the dead-band channels
  changes it. Each fit's model predicted with both windows, and LS-SG on the same channels as the
  default smoother.

Variants: ``session 6`` (line search, every effort channel: the defaults before), ``+ trust region``,
``+ dead band (the default)`` (dead-band channels left out, `effort_quality`), ``trust region + dead
band`` (both), then on top of it ``+ huber``, ``+ offset`` (``fit_actuation=("offset",)``), ``+ gain,offset``,
and ``dead-band zeros masked`` (the channels' exact zeros masked instead of the whole channel).

Usage: python benchmarks/bench_tiago_causes.py [--sections consistency gauss-newton residuals cv heldout]
       [--variants ...]
"""

from __future__ import annotations

import argparse
import dataclasses
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from bench_external import DATA, TIAGO_HELD, TIAGO_REPORT, TIAGO_TRAIN, _quiet
from benchlib import fit as bench_fit
from benchlib import predict

from fg_sysid.datasets.io import load_log_for_robot
from fg_sysid.estimation import loop_init
from fg_sysid.estimation.baseline import (
    LeastSquaresSG,
    _configurations,
    _sg,
    predict_torque,
    stacked_regressor,
)
from fg_sysid.estimation.effort_quality import deadband_channels
from fg_sysid.estimation.problem import Evaluation
from fg_sysid.estimation.smoother import JointSmoother
from fg_sysid.layout import ParameterLayout
from fg_sysid.validation import _predict_layout, heldout_accelerations, model_spec

SESSION6 = {"strategy": "line-search", "deadband_zero_fraction": None}
TR = {"strategy": "trust-region"}
VARIANTS = {
    "session 6": SESSION6,
    "+ trust region": {**TR, "deadband_zero_fraction": None},
    "+ dead band (the default)": {"strategy": "line-search"},
    "trust region + dead band": TR,
    "trust region + dead band + huber": {**TR, "robust": "huber"},
    "trust region + dead band + offset": {**TR, "fit_actuation": ("offset",)},
    "trust region + dead band + gain,offset": {**TR, "fit_actuation": ("gain", "offset")},
    "trust region, dead-band zeros masked": {**TR, "deadband_zero_fraction": None, "_mask_zeros": True},
    "ls-sg": None,  # the classical fit (all channels), for the CV scale
}
CV_FOLDS = (((921, 3507), (3507, 4800)), ((2214, 4800), (921, 2214)))


def _rmse(tau, log, robot) -> tuple[list, float]:
    idx = [robot.joint_names.index(j) for j in TIAGO_REPORT]
    r = np.sqrt(np.mean((tau[:, idx] - log.tau[:, idx]) ** 2, axis=0))
    return [round(float(x), 3) for x in r], float(np.sqrt(np.mean(r ** 2)))


def _cols(per) -> dict:
    return dict(zip(["arm_2", "arm_3", "arm_4"], per, strict=True))


def _mask_zeros(log):
    flags, _ = deadband_channels(log.tau)
    tau = np.asarray(log.tau, float).copy()
    tau[:, flags] = np.where(tau[:, flags] == 0.0, np.nan, tau[:, flags])
    return dataclasses.replace(log, tau=tau)


def _fit_variant(robot, train, opts):
    """A fitted JointSmoother of the variant's options (``_mask_zeros``: see the module docstring)."""
    opts = dict(opts)
    if opts.pop("_mask_zeros", False):
        train = _mask_zeros(train)
    c0 = time.process_time()
    sm = _quiet(JointSmoother(robot, **opts).fit, train)
    return sm, time.process_time() - c0


def _fit_named(robot, train, name):
    """(fitted dict for `benchlib.predict`, CPU seconds, result) of a variant (``ls-sg``: classical fit)."""
    if VARIANTS[name] is None:
        f = bench_fit("ls-sg", robot, train, "tiago")
        return f, f["cpu_seconds"], f["result"]
    sm, cpu = _fit_variant(robot, train, VARIANTS[name])
    spec = model_spec(sm.result_, robot, "tiago", sg_filter=sm.init_filter_)
    ok = not sm.result_.consistency_problems()
    return {"model": spec, "sg_filter": sm.init_filter_, "consistent": ok}, cpu, sm.result_


def _score(fitted, robot, log):
    tau, _, _ = predict(fitted, robot, log)
    return _rmse(tau, log, robot)


# ---------------------------------------------------------------------------------------------- sections
def section_consistency(robot, train, held) -> pd.DataFrame:
    ls = LeastSquaresSG().fit(train, robot).result_
    w, o = int(ls.filter["window"]), int(ls.filter["polyorder"])
    vh, ah, _ = heldout_accelerations(held, ls.filter["window_s"], o)
    dt = float(np.median(np.diff(train.t)))
    qf, vf, af = (_sg(np.asarray(train.q, float), w, o, d, dt) for d in (0, 1, 2))
    rows = np.arange(w // 2, train.n_samples - w // 2)
    W_all = stacked_regressor(robot, qf[rows], vf[rows], af[rows], 0.05)
    tau_f = _sg(np.nan_to_num(np.asarray(train.tau, float)), w, o, 0, dt)[rows]
    layout = ParameterLayout.create(robot, "log-cholesky", "coulomb-viscous-scale", 0.05)
    tb, ts = layout.prior(0.7)
    per, pooled = _rmse(predict_torque(robot, ls.estimate, held.q, vh, ah), held, robot)
    out = [{"fit": "LS-SG (library, all arm efforts)", **_cols(per), "pooled": pooled,
            "consistent": bool(ls.physical_consistency["consistent"]), "cpu_s": 0.0}]
    subsets = {"arm_1–arm_7": [f"arm_{i}_joint" for i in range(1, 8)],
               "arm_1–arm_4": [f"arm_{i}_joint" for i in range(1, 5)]}
    for label, joints in subsets.items():
        meas = [robot.joint_names.index(j) for j in joints]
        W, u = W_all[:, meas, :], tau_f[:, meas]
        A = W.reshape(-1, W.shape[2])
        # unconstrained: Gautier's two steps, column-scaled, minimum-norm on the null space around the URDF
        from fg_sysid.estimation.baseline import nominal_parameters
        x = nominal_parameters(robot)
        wts = 1.0 / np.sqrt(np.mean(u ** 2, axis=0))
        for _ in range(2):
            wr = np.tile(wts, W.shape[0])
            Aw = A * wr[:, None]
            d = np.linalg.norm(Aw, axis=0)
            keep = d > 1e-10 * d.max()
            x = nominal_parameters(robot)
            x[keep] = np.linalg.lstsq(Aw[:, keep] / d[keep], wr * (u.ravel() - A[:, ~keep] @ x[~keep]),
                                      rcond=1e-8)[0] / d[keep]
            wts = 1.0 / np.sqrt(np.mean((u - (A @ x).reshape(u.shape)) ** 2, axis=0))
        per, pooled = _rmse(predict_torque(robot, x, held.q, vh, ah), held, robot)
        out.append({"fit": f"unconstrained LS, {label}", **_cols(per),
                    "pooled": pooled, "consistent": False, "cpu_s": 0.0})
        c0 = time.process_time()
        th0 = loop_init.linear_start(layout, W, u, tb, ts, np.zeros(robot.n_joints, bool))
        th, info = loop_init.map_parameters(layout, W, u, tb, ts, theta0=th0, reweight=2)
        tau = _predict_layout(layout, th, robot, held.q, vh, ah, _configurations)
        per, pooled = _rmse(tau, held, robot)
        out.append({"fit": f"consistent MAP (smoother's θ and prior), {label}",
                    **_cols(per), "pooled": pooled, "consistent": True,
                    "cpu_s": round(time.process_time() - c0, 1), "gn_iterations": info["iterations"]})
        print(f"  consistency: {out[-1]}", flush=True)
    return pd.DataFrame(out)


def section_gauss_newton(robot, train) -> pd.DataFrame:
    sm, _ = _fit_variant(robot, train, SESSION6)
    P, x, th = sm.problem_, sm.states_, sm.result_.theta
    g = P.linearize(x, th)
    step = sm._lm.linear_solve(g, 1e-9)
    dxk = step.dx

    def parts(xx, tt, jac):
        ev = Evaluation(P, xx, tt, jac)
        return {t.name: P.whitened(t, t.evaluate(ev, jac), ev) for t in P.terms}

    p0 = parts(x, th, True)
    rows = []
    for a in (1.0, 0.25, 1 / 16):
        p1 = parts(P.retract(x, a * dxk), th + a * step.dtheta, False)
        for name, wb in p0.items():
            if name == "parameter_prior":
                rl = wb.r + wb.Jt @ (a * step.dtheta)
            else:
                rl = np.array(wb.r, float)
                if wb.J1 is not None:
                    rl = rl + np.einsum("nij,nj->ni", wb.J, a * dxk[:-1]) + np.einsum("nij,nj->ni", wb.J1,
                                                                                     a * dxk[1:])
                else:
                    rl = rl + np.einsum("nij,nj->ni", wb.J, a * dxk)
                if wb.Jt is not None:
                    rl = rl + np.einsum("nij,j->ni", wb.Jt, a * step.dtheta)
            rows.append({"step": a, "term": name, "cost_now": 0.5 * float(np.sum(np.asarray(wb.r) ** 2)),
                         "predicted": 0.5 * float(np.sum(rl ** 2)),
                         "actual": 0.5 * float(np.sum(np.asarray(p1[name].r) ** 2))})
    lay = sm.layout_
    big = np.argsort(-np.abs(step.dtheta))[:5]
    print("  largest θ steps: " + ", ".join(f"{lay.names[i]} {step.dtheta[i]:+.2f}" for i in big))
    return pd.DataFrame(rows)


def section_residuals(robot, train) -> pd.DataFrame:
    sm, _ = _fit_variant(robot, train, {"deadband_zero_fraction": None})
    r = sm._id_residual(sm.states_, sm.result_.theta)
    iv = robot.joint_index_v()
    out = []
    for k, j in enumerate(robot.joint_names):
        m = sm._tau_mask[:, iv[k]]
        if not m.any():
            continue
        e = r[m, iv[k]]
        sig = float(sm.noise_.tau[k])
        z = (e - e.mean()) / e.std()
        out.append({"joint": j, "sigma_used": sig, "rms": float(np.sqrt(np.mean(e ** 2))),
                    "mad_scale": float(1.4826 * np.median(np.abs(e - np.median(e)))),
                    "excess_kurtosis": float(np.mean(z ** 4) - 3.0),
                    "beyond_3sigma_%": 100.0 * float(np.mean(np.abs(e) > 3 * sig)),
                    "gaussian_beyond_3sigma_%": 0.27})
    return pd.DataFrame(out)


def section_cv(robot, log, variants) -> pd.DataFrame:
    out = []
    for name in variants:
        rec = {"variant": name}
        scores, cpu = [], 0.0
        for f, ((a0, a1), (b0, b1)) in enumerate(CV_FOLDS):
            fitted, c, _ = _fit_named(robot, log.slice(a0, a1), name)
            per, pooled = _score(fitted, robot, log.slice(b0, b1))
            rec[f"fold_{'AB'[f]}"] = round(pooled, 3)
            scores.append(pooled)
            cpu += c
        rec["cv_pooled"] = float(np.mean(scores))
        rec["cpu_s"] = round(cpu, 1)
        print(f"  cv: {rec}", flush=True)
        out.append(rec)
    return pd.DataFrame(out)


def section_heldout(robot, train, held, variants) -> pd.DataFrame:
    out = []
    for name in variants:
        fitted, cpu, res = _fit_named(robot, train, name)
        per, pooled = _score(fitted, robot, held)
        smoother = hasattr(res, "consistency_problems")
        out.append({"variant": name, **_cols(per), "pooled": pooled,
                    "iterations": len(res.history) if smoother else 0,
                    "converged": bool(res.converged) if smoother else True,
                    "consistent": (not res.consistency_problems()) if smoother else
                    bool(res.physical_consistency["consistent"]),
                    "sg_window_s": round(float(fitted["sg_filter"]["window_s"]), 4), "cpu_s": round(cpu, 1)})
        print(f"  heldout: {out[-1]}", flush=True)
    return pd.DataFrame(out)


def section_window(robot, train, held) -> pd.DataFrame:
    from fg_sysid.estimation.effort_quality import drop_deadband_channels

    fits = {}
    for name in ("session 6", "+ trust region", "trust region + dead band"):
        fitted, cpu, _ = _fit_named(robot, train, name)
        fits[name] = fitted
    windows = {"session 6": fits["session 6"]["sg_filter"],
               "dead band": fits["trust region + dead band"]["sg_filter"]}
    fits["ls-sg"] = bench_fit("ls-sg", robot, train, "tiago")
    fits["ls-sg, dead-band channels left out"] = bench_fit("ls-sg", robot, drop_deadband_channels(train)[0],
                                                           "tiago")
    out = []
    for name, f in fits.items():
        rec = {"fit": name, "own_window_s": round(float(f["sg_filter"]["window_s"]), 4),
               "pooled_own": _score(f, robot, held)[1]}
        for wname, filt in windows.items():
            rec[f"pooled_with_{wname.replace(' ', '')}_window_{float(filt['window_s']):.3f}s"] = \
                _score(dict(f, sg_filter=filt), robot, held)[1]
        rec["consistent"] = f.get("consistent", True)
        out.append(rec)
        print(f"  window: {rec}", flush=True)
    return pd.DataFrame(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sections = ["consistency", "gauss-newton", "residuals", "cv", "heldout", "window"]
    ap.add_argument("--sections", nargs="+", default=sections, choices=sections)
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--out", default="benchmarks/results/tiago_causes")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    robot, log = _quiet(load_log_for_robot, Path(args.data) / "tiago_dynamic_2021-07-01.csv", "tiago")
    train, held = log.slice(*TIAGO_TRAIN), log.slice(*TIAGO_HELD)
    warnings.simplefilter("ignore")
    for sec in args.sections:
        t0 = time.process_time()
        if sec == "consistency":
            df = section_consistency(robot, train, held)
        elif sec == "gauss-newton":
            df = section_gauss_newton(robot, train)
        elif sec == "residuals":
            df = section_residuals(robot, train)
        elif sec == "cv":
            df = section_cv(robot, log, args.variants)
        elif sec == "window":
            df = section_window(robot, train, held)
        else:
            df = section_heldout(robot, train, held, args.variants)
        df.to_csv(out / f"{sec}.csv", index=False)
        print(f"\n{sec} ({time.process_time() - t0:.0f} s CPU)")
        print(df.round(4).to_markdown(index=False), flush=True)


if __name__ == "__main__":
    main()
