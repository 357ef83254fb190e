"""Floating B1 with four-bar knees: the model with the state estimation taken out (issue 11, floating).

Fits the looped floating inverse dynamics by MAP linear least squares **at given training states**
(`floating_loop_checks.fixed_state_system` / `map_fit`, the smoother's raw prior) and scores the estimate
on the held-out log at MuJoCo's exact states, like `bench_loops.py --floating` ("exact" column). Cases:

* states: ``inst`` = MuJoCo's own q, v and its instantaneous qacc at each sample; ``smooth`` = q, v and
  a = d/dt v (central differences of the sampled velocities: the best a state estimator that sees the
  motion at 500 Hz can reach);
* forces: ``measured`` (MuJoCo's contact forces, the rows Gᵀ W p = Gᵀ(S τ + Σ Jᵀ f)) or ``eliminated``
  (the stance feet's null space, no force sensor);
* window: ``all`` samples or ``unsaturated`` (samples within 0.1 s of an effort at its limit left out,
  `floating_loop_checks.saturation_window`, as the smoother now does).

Also prints the truth's saturation events (joint, time, max |qacc|) and the base/legs mass
identifiability of each fit (posterior stds, correlation; `floating_loop_checks.mass_split`).

    python benchmarks/bench_floating_loop_states.py                   # the 0.11 / 0.065 training log
    python benchmarks/bench_floating_loop_states.py --lift 0.10        # the jam-free one

Efforts: the training log's noisy efforts (σ = 0.01); held-out: noise-free MuJoCo efforts.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import pandas as pd

LEGS = ("FL", "FR", "RL", "RR")


def simulate(args):
    from fg_sysid.datasets.mujoco_loops import simulate_loop_stance
    from fg_sysid.robots.looped import load_loop_robot

    robot = load_loop_robot("b1_fourbar")
    ex_tr, ex_ho = {}, {}
    res_tr, log_tr, _ = simulate_loop_stance(robot, args.train, args.rate, args.noise, args.seed,
                                             step_period=args.step_period, friction_scale=args.friction_scale,
                                             lift=args.lift, loop=args.loop, exact=ex_tr)
    res_ho, _, _ = simulate_loop_stance(robot, args.heldout, args.rate, args.noise, args.seed + 1,
                                        step_period=args.heldout_step_period, truth=res_tr.truth,
                                        exact=ex_ho)
    return robot, res_tr, log_tr, ex_tr["a_pin"], res_ho, ex_ho["a_pin"]


def heldout_score(robot, p, res, a_pin, stride: int = 2) -> dict:
    """Relative RMSE [%] of the actuated efforts u = Gᵀ(ID(q, v, a; p) − Σ Jᵀ f) at MuJoCo's exact held-out
    states, mean per joint kind over the four legs (`bench_loops.run_floating`, "exact")."""
    from fg_sysid.floating_validation import contact_generalized_forces, floating_inverse_dynamics
    from fg_sysid.robots.loop_kinematics import ClosureKinematics
    from fg_sysid.robots.loops import actuated_joints, actuation_of

    names, iv = list(robot.joint_names), np.asarray(robot.joint_index_v())
    act = [names.index(j) for j in actuated_joints(robot)]
    passive = [int(iv[names.index(j)]) for j in actuation_of(robot).passive]
    ck = ClosureKinematics(robot.model, robot.loops)
    rows = np.arange(0, len(res.t), stride)
    q, v, a = res.q_pin[rows], res.v_pin[rows], a_pin[rows]
    gen = floating_inverse_dynamics(p, robot, q, v, a) - contact_generalized_forces(
        robot, q, np.asarray(res.contact_force)[rows], robot.contact_frames, robot.contact_radius)
    u = np.empty((rows.size, len(act)))
    for k in range(rows.size):
        G, cols = ck.actuated_map(q[k], passive, [iv[i] for i in act])
        u[k] = (G.T @ gen[k])[cols]
    ut = res.tau[rows][:, act]
    rel = 100 * np.sqrt(np.mean((u - ut) ** 2, axis=0)) / np.sqrt(np.mean(ut ** 2, axis=0))
    return {kind: float(np.mean([r for r, i in zip(rel, act, strict=True) if names[i].endswith(kind)]))
            for kind in ("hip_joint", "thigh_joint", "knee_motor")}


def smoother_prior(robot):
    """The floating smoother's raw-stage prior in the physical layout (mean = URDF, std from its
    ``prior_relative``; friction and armature weak, ≥ 0 — as its least-squares initial θ)."""
    from fg_sysid.estimation.floating_smoother import FloatingBaseSmoother

    sm = FloatingBaseSmoother(robot, inertia="raw").setup()
    lay = sm.layout_
    p_bar = lay.nominal_physical()
    _, std = lay.prior(sm.prior_relative, mean_physical=p_bar)
    p_std = np.abs(lay.jacobian(lay.to_theta(p_bar))) @ std
    nb10 = 10 * robot.n_bodies
    p_std[nb10:] = 10.0
    lower = np.full(p_bar.size, -np.inf)
    lower[nb10:] = 0.0
    return p_bar, p_std, lower


def saturation_events(robot, res, a_pin) -> list[str]:
    lim = robot.effort_limits()
    names = list(robot.joint_names)
    sat = np.abs(res.tau) >= 0.99 * lim[None]
    out = []
    for j in np.flatnonzero(sat.any(axis=0)):
        ts = res.t[sat[:, j]]
        out.append(f"{names[j]} at its {lim[j]:g} N·m limit in {sat[:, j].sum()} samples, t = {ts.min():.3f}–"
                   f"{ts.max():.3f} s")
    iv = np.asarray(robot.joint_index_v())
    amax = np.abs(a_pin[:, iv]).max(axis=0)
    out.append(f"max |qacc| {amax.max():.0f} rad/s² ({names[int(np.argmax(amax))]})")
    return out


def add_log_arguments(ap: argparse.ArgumentParser) -> None:
    """The step-in-place log protocol of the floating looped B1 (training and held-out MuJoCo logs,
    `simulate`): the follow-up logs of docs/benchmarks.md by default."""
    ap.add_argument("--train", type=float, default=9.6)
    ap.add_argument("--heldout", type=float, default=2.4)
    ap.add_argument("--step-period", type=float, default=2.4)
    ap.add_argument("--heldout-step-period", type=float, default=1.0)
    ap.add_argument("--lift", type=float, default=0.11)
    ap.add_argument("--loop", type=float, default=0.065)
    ap.add_argument("--friction-scale", type=float, default=0.25)
    ap.add_argument("--rate", type=float, default=500.0)
    ap.add_argument("--noise", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_log_arguments(ap)
    ap.add_argument("--stride", type=int, default=5, help="every stride-th training sample in the rows")
    ap.add_argument("--out", default=None, help="CSV of the table")
    args = ap.parse_args()
    from fg_sysid.estimation.floating_loop_checks import (
        fixed_state_system,
        map_fit,
        mass_split,
        saturation_window,
    )
    from fg_sysid.estimation.loop_baseline import nominal_parameters, parameter_names

    c0 = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        robot, res_tr, log_tr, a_tr, res_ho, a_ho = simulate(args)
    print(f"simulated {args.train:g} + {args.heldout:g} s (lift {args.lift:g} m, loop {args.loop:g} m) in "
          f"{time.process_time() - c0:.0f} CPU s", flush=True)
    for key, r, a in (("training", res_tr, a_tr), ("held-out", res_ho, a_ho)):
        print(f"  {key}: " + "; ".join(saturation_events(robot, r, a)), flush=True)
    names = parameter_names(robot)
    p_true = np.array([res_tr.truth["parameters"][n] for n in names])
    p_bar, p_std, lower = smoother_prior(robot)
    im = [i for i, n in enumerate(names) if n.endswith(".m")]
    rows_ = []
    for label, p in (("nominal URDF", nominal_parameters(robot)), ("true parameters", p_true)):
        rows_.append({"states": "-", "forces": "-", "window": "-", "method": label,
                      **heldout_score(robot, p, res_ho, a_ho), "base_mass": p[im[0]],
                      "total_mass": p[im].sum()})
    col = {j: i for i, j in enumerate(log_tr.joint_names)}
    tau = np.full((len(res_tr.t), robot.n_joints), np.nan)
    for i, j in enumerate(robot.joint_names):
        if j in col:
            tau[:, i] = np.asarray(log_tr.tau)[:, col[j]]
    sat = saturation_window(res_tr.t, tau, robot.effort_limits())
    a_smooth = np.gradient(res_tr.v_pin, res_tr.t, axis=0)
    stance = np.stack([np.asarray(log_tr.contacts[f], bool) for f in robot.contact_frames], axis=1)
    for states, a in (("inst", a_tr), ("smooth", a_smooth)):
        for window in ("all", "unsaturated"):
            if window == "unsaturated" and not sat.any():
                continue
            sel = np.arange(0, len(res_tr.t), args.stride)
            if window == "unsaturated":
                sel = sel[~sat[sel]]
            for forces in ("measured", "eliminated"):
                c1 = time.process_time()
                kw = ({"forces": np.asarray(res_tr.contact_force)[sel]} if forces == "measured"
                      else {"stance": stance[sel]})
                A, b = fixed_state_system(robot, res_tr.q_pin[sel], res_tr.v_pin[sel], a[sel], tau[sel], **kw)
                sigma = float(np.sqrt(np.mean((A @ p_true - b) ** 2)))  # model-mismatch level at the truth
                p, cov = map_fit(A, b, p_bar, p_std, sigma, lower)
                ms = mass_split(robot, cov, names)
                rows_.append({"states": states, "forces": forces, "window": window,
                              "method": "fixed-state MAP",
                              **heldout_score(robot, p, res_ho, a_ho), "base_mass": p[im[0]],
                              "total_mass": p[im].sum(), "resid_at_truth": sigma,
                              "base_mass_std": ms["base_mass_std"], "legs_mass_std": ms["legs_mass_std"],
                              "total_mass_std": ms["total_mass_std"], "corr_base_legs": ms["corr_base_legs"],
                              "rows": A.shape[0], "cpu_s": time.process_time() - c1})
                print(f"  {states} / {forces} / {window}: knee {rows_[-1]['knee_motor']:.2f} %, base mass "
                      f"{p[im[0]]:.2f} kg ({time.process_time() - c1:.0f} CPU s)", flush=True)
    tab = pd.DataFrame(rows_)
    pd.set_option("display.width", 200)
    print(f"held-out relative RMSE [%] at exact states (mean over the legs); true base mass "
          f"{p_true[im[0]]:.2f} kg, total {p_true[im].sum():.2f} kg; training samples in saturation windows: "
          f"{100 * sat.mean():.1f} %")
    print(tab.round(3).to_string(index=False))
    if args.out:
        tab.to_csv(args.out, index=False)
        print(f"wrote {args.out}")
    print(f"total {time.process_time() - c0:.0f} CPU s")


if __name__ == "__main__":
    main()
