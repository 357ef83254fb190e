"""Closed loops (issue 11): held-out torque per actuated joint, paper 004 Fig. 15 style.

For each looped robot (``fourbar``, ``b1_leg_fourbar``; fg_sysid/robots/looped.py) and truth:

    mujoco    MuJoCo with ``connect`` equalities (soft, violation reported), dry friction (frictionloss:
              stiction) on the actuated joints, 1 kHz PD + nominal feedforward controller (out-of-class)
    mujoco-stribeck   the same plus a Stribeck hump fs = 1.5 fc, v_st = 0.1 rad/s
    in-class  exact inverse dynamics u = Gᵀ(RNEA + armature·a + fc·tanh(v/0.05) + fv·v) along the plan

a training log (``--train`` s, seed ``--seed``) and a held-out log (``--heldout`` s, seed + 1, same truth,
another excitation), both at ``--rate`` Hz with Gaussian σ = ``--noise`` on q, v, τ. Methods:

    nominal        URDF parameters (no friction, no armature) through the loop model
    ce-ls          paper 000's constraint-elimination LS (all inertias + motor friction/armature)
    ce-ls-motor    the same with the inertias at the URDF values (paper 000's legs)
    reduced        B1 leg only: the default JointSmoother on the serial leg (catalog B1's FL chain), knee
                   torque = motor torque (the calf encoder as the knee angle)
    loop-smoother  the JointSmoother on the looped spec (loops-core), when the installed fg_sysid has it
    true           the true parameters (the floor: what the state pipeline and the friction model cost)

Every method is scored on the same held-out states: actuated encoders filtered (Butterworth 4th order,
10 Hz, zero phase), accelerations by 4th-order central differences, passive joints from the closures;
predicted actuated efforts u = Gᵀ τ(q, v, a) against the held-out log's noise-free efforts. The table
gives the RMSE [N·m] and the relative RMSE [%] per actuated joint; the driven joint's friction and
armature estimates are printed against the truth, with the combination armature + I_yy(crank) that a
fixed-axis rotor shares with its link (paper 003: only the sum is identifiable from torques).

Writes ``<out>.csv`` and the PNGs ``<out>_fig15.png`` (measured vs predicted held-out efforts, rows
nominal / reduced / loop model) and ``<out>_bars.png`` (RMSE per joint and method, log scale).

``--floating``: also the floating B1 with four-bar knees stepping in place in MuJoCo (`run_floating`:
nominal / reduced floating smoother on the serial B1 / loop smoother / true parameters, with the logged
contact forces), scored at the held-out log's exact states (MuJoCo's q, v, qacc) and at SG states of the
noisy log; the training motion's motor/calf friction collinearity is printed (`training_collinearity`).

Usage: python benchmarks/bench_loops.py [--robots b1_leg_fourbar fourbar] [--truths mujoco in-class]
       [--train 10] [--heldout 5] [--rate 500] [--noise 0.01] [--seed 0] [--out benchmarks/results/loops]
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from fg_sysid.datasets.mujoco_loops import simulate_loop_inclass, simulate_loop_mujoco
from fg_sysid.estimation.loop_baseline import (
    ConstraintEliminationLS,
    loop_states,
    nominal_parameters,
    parameter_names,
    predict_loop_efforts,
    serial_log,
    serial_states,
)
from fg_sysid.robots.looped import load_loop_robot, loop_robot_path
from fg_sysid.robots.loops import actuated_joints, actuation_of

SERIAL = {"b1_leg_fourbar": ("b1_leg_serial", {"FL_calf_joint": "FL_knee_motor"})}
DRIVEN = {"fourbar": ("crank_joint", "crank"), "b1_leg_fourbar": ("FL_knee_motor", "FL_crank")}


TRUTHS = ("mujoco", "mujoco-stribeck", "in-class")


def simulate(truth: str, robot, duration, rate, noise, seed, given=None):
    if truth == "mujoco":
        return simulate_loop_mujoco(robot, duration, rate, noise, seed, truth=given)
    if truth == "mujoco-stribeck":
        return simulate_loop_mujoco(robot, duration, rate, noise, seed, truth=given, stribeck_ratio=1.5)
    return simulate_loop_inclass(robot, duration, rate, noise, seed, truth=given)


def loop_smoother(robot_name: str, options: dict | None = None):
    """The loops-core estimator, if this fg_sysid has it: (fit(log) -> predictor(states)) or None
    (``options``: extra `JointSmoother` keyword arguments, e.g. the effort timing)."""
    try:
        from fg_sysid.estimation import loop_terms  # noqa: F401  (present once loops-core is merged)
        from fg_sysid.estimation.smoother import JointSmoother
        from fg_sysid.factors.inverse_dynamics import InverseDynamicsResidual
        from fg_sysid.robots import load_robot
    except ImportError:
        return None
    robot = load_robot(str(loop_robot_path(robot_name)))
    if not getattr(robot, "loops", None):
        return None

    def fit(log):
        import tempfile

        from fg_sysid.datasets.io import load_log_for_robot, write_log

        with tempfile.TemporaryDirectory() as tmp:  # the `fg-sysid identify` path: file -> Log
            write_log(log, Path(tmp) / "log.parquet")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                robot_l, log_l = load_log_for_robot(Path(tmp) / "log.parquet", robot)
                sm = JointSmoother(robot_l, verbose=True, **(options or {})).fit(log_l)
        res = sm.result_

        def predict(states, loop_robot):
            tau = InverseDynamicsResidual(res.layout).predict(states.q, states.v, states.a, res.theta)
            return project(loop_robot, states, tau)

        return res, predict

    return fit


def project(robot, states, tau_full) -> np.ndarray:
    """u_k = (G_kᵀ τ_k) on the actuated joints."""
    from fg_sysid.robots.loop_kinematics import ClosureKinematics

    ck = ClosureKinematics(robot.model, robot.loops)
    names = list(robot.joint_names)
    iv = np.asarray(robot.joint_index_v(), int)
    act = [names.index(j) for j in states.actuated]
    dep = [i for i in range(len(names)) if i not in act]
    out = np.empty((len(states.t), len(act)))
    for k in range(len(states.t)):
        G, cols = ck.actuated_map(states.q[k], iv[dep], iv[act])
        out[k] = (G.T @ tau_full[k])[cols]
    return out


def run(robot_name: str, truth: str, args) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    robot = load_loop_robot(robot_name)
    t0 = time.perf_counter()
    tr = simulate(truth, robot, args.train, args.rate, args.noise, args.seed)
    ho = simulate(truth, robot, args.heldout, args.rate, args.noise, args.seed + 1, given=tr.truth)
    print(f"[{robot_name} / {truth}] simulated {args.train:g} + {args.heldout:g} s in "
          f"{time.perf_counter() - t0:.1f} s; closure violation {tr.closure_violation:.2e} / "
          f"{ho.closure_violation:.2e} m", flush=True)
    act = [robot.joint_names.index(j) for j in actuated_joints(robot)]
    st = loop_states(robot, ho.log)
    keep = st.keep
    u_true = ho.truth_log.tau[:, act]
    names = parameter_names(robot)
    p_true = np.array([tr.truth["parameters"][n] for n in names])
    preds, params, seconds = {}, {}, {}

    preds["nominal"] = predict_loop_efforts(robot, nominal_parameters(robot), st)
    params["nominal"] = nominal_parameters(robot)
    preds["true"] = predict_loop_efforts(robot, p_true, st)
    params["true"] = p_true
    for method, identify in (("ce-ls", "all"), ("ce-ls-motor", "motor")):
        t1 = time.perf_counter()
        ce = ConstraintEliminationLS(robot, identify=identify).fit(tr.log)
        seconds[method] = time.perf_counter() - t1
        preds[method] = ce.predict(st)
        params[method] = ce.result_.estimate
    if robot_name in SERIAL:
        from fg_sysid.estimation.smoother import JointSmoother
        from fg_sysid.validation import predict_efforts

        s_name, emap = SERIAL[robot_name]
        srobot = load_loop_robot(s_name)
        t1 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sm = JointSmoother(srobot).fit(serial_log(tr.log, srobot, emap))
        seconds["reduced"] = time.perf_counter() - t1
        qs, vs, as_ = serial_states(srobot, robot, st)
        u_s = predict_efforts(sm.result_, srobot, qs, vs, as_)
        motor_of = {emap.get(j, j): i for i, j in enumerate(srobot.joint_names)}
        preds["reduced"] = np.column_stack([u_s[:, motor_of[j]] for j in st.actuated])
    # issues 11 + 9: the MuJoCo truths' commands are held zero-order (`--mujoco-effort-hold`)
    hold = getattr(args, "mujoco_effort_hold", None)
    held = hold and truth.startswith("mujoco")
    opts = {"effort_timing": "hold", "effort_hold_period": hold} if held else {}
    fit_loop = loop_smoother(robot_name, opts)
    if fit_loop is not None:
        t1 = time.perf_counter()
        res, predictor = fit_loop(tr.log)
        seconds["loop-smoother"] = time.perf_counter() - t1
        preds["loop-smoother"] = predictor(st, robot)
        est = dict(zip(res.names, res.estimate, strict=True))
        params["loop-smoother"] = np.array([est.get(n, np.nan) for n in names])
    else:
        print("  (loop-smoother: not in this fg_sysid — loops-core not merged)")

    rows = []
    for method, u in preds.items():
        err = u[keep] - u_true[keep]
        for i, j in enumerate(st.actuated):
            rms = float(np.sqrt(np.mean(u_true[keep, i] ** 2)))
            e = float(np.sqrt(np.mean(err[:, i] ** 2)))
            rows.append({"robot": robot_name, "truth": truth, "method": method, "joint": j, "rmse": e,
                         "relative_%": 100 * e / rms, "seconds": seconds.get(method, 0.0)})
    table = pd.DataFrame(rows)

    joint, crank = DRIVEN[robot_name]
    i_fc, i_fv, i_arm = (names.index(f"{joint}.{s}") for s in ("fc", "fv", "armature"))
    i_iyy = names.index(f"{crank}.iyy")
    prow = []
    for method, p in params.items():
        prow.append({"robot": robot_name, "truth": truth, "method": method, "joint": joint,
                     "fc": p[i_fc], "fv": p[i_fv], "armature": p[i_arm],
                     "armature+iyy_crank": p[i_arm] + p[i_iyy]})
    ptab = pd.DataFrame(prow)
    for col in ("fc", "fv", "armature", "armature+iyy_crank"):
        ptab[f"{col}_err_%"] = 100 * (ptab[col] / float(ptab.loc[ptab.method == "true", col].iloc[0]) - 1)
    extra = {"t": st.t, "keep": keep, "u_true": u_true, "preds": preds, "actuated": st.actuated,
             "violation": (tr.closure_violation, ho.closure_violation)}
    return table, ptab, extra


def plot(extra: dict, title: str, path_fig15: Path, table: pd.DataFrame, path_bars: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [m for m in ("nominal", "reduced", "ce-ls", "loop-smoother") if m in extra["preds"]]
    joints = extra["actuated"]
    t, keep = extra["t"], extra["keep"]
    fig, axes = plt.subplots(len(rows), len(joints), figsize=(3.6 * len(joints), 2.2 * len(rows)),
                             sharex=True, squeeze=False)
    for r, m in enumerate(rows):
        for c, j in enumerate(joints):
            ax = axes[r, c]
            ax.plot(t[keep], extra["u_true"][keep, c], color="tab:blue", lw=1.0,
                    label="measured (noise-free)")
            ax.plot(t[keep], extra["preds"][m][keep, c], color="tab:orange", lw=1.0, label="predicted")
            e = table[(table.method == m) & (table.joint == j)]["relative_%"].iloc[0]
            ax.set_title(f"{m}: {j} ({e:.1f} %)", fontsize=8)
            if c == 0:
                ax.set_ylabel("effort [N·m]")
    for ax in axes[-1]:
        ax.set_xlabel("t [s]")
    axes[0, 0].legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path_fig15, dpi=110)
    plt.close(fig)

    methods = [m for m in ("nominal", "reduced", "ce-ls-motor", "ce-ls", "loop-smoother", "true")
               if m in set(table.method)]
    fig, ax = plt.subplots(figsize=(1.6 + 1.5 * len(joints), 3.2))
    w = 0.8 / len(methods)
    for k, m in enumerate(methods):
        vals = [table[(table.method == m) & (table.joint == j)]["rmse"].iloc[0] for j in joints]
        ax.bar(np.arange(len(joints)) + (k - (len(methods) - 1) / 2) * w, vals, w, label=m)
    ax.set_xticks(np.arange(len(joints)), joints, fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("held-out RMSE [N·m]")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path_bars, dpi=110)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------- floating
LEGS = ("FL", "FR", "RL", "RR")
FALL_TILT_DEG = 30.0  # base tilt above which a "step in place" log is a fall


def floating_sg_states(robot, serial, log_ho, res_ho):
    """Held-out states of the pipeline any log allows (score "SG states"): SG on the manifold of the
    serial view (base pose, hip, thigh, calf encoders of the noisy log), knee motors and rods from the
    closures. Returns (rows, (q, v, a) of the looped robot, (q, v, a) of the serial robot)."""
    from fg_sysid.floating_validation import floating_states
    from fg_sysid.robots.loop_kinematics import ClosureKinematics

    emap = {f"{leg}_calf_joint": f"{leg}_knee_motor" for leg in LEGS}
    rows, q_s, v_s, a_s = floating_states(serial_log(log_ho, serial, emap), serial)
    names, snames = list(robot.joint_names), list(serial.joint_names)
    iq, iv = robot.joint_index_q(), robot.joint_index_v()
    siq, siv = serial.joint_index_q(), serial.joint_index_v()
    ck = ClosureKinematics(robot.model, robot.loops)
    knee_rod = [iv[i] for i, j in enumerate(names) if j.endswith(("knee_motor", "rod_joint"))]
    ind = np.setdiff1d(np.arange(robot.nv), knee_rod)
    pos = {int(c): i for i, c in enumerate(ind)}
    q = np.tile(np.asarray(res_ho.q_pin[rows[0]], float), (len(rows), 1))
    v, a = np.zeros((len(rows), robot.nv)), np.zeros((len(rows), robot.nv))
    qk = np.asarray(res_ho.q_pin[rows[0]], float).copy()
    for k in range(len(rows)):
        qk[:7] = q_s[k, :7]
        qk[[iq[names.index(j)] for j in snames]] = q_s[k, siq]
        qk = ck.solve_passive(qk, knee_rod)
        vi, ai = np.zeros(ind.size), np.zeros(ind.size)
        vi[:6], ai[:6] = v_s[k, :6], a_s[k, :6]
        for j, c in zip(snames, siv, strict=True):
            vi[pos[int(iv[names.index(j)])]] = v_s[k, c]
            ai[pos[int(iv[names.index(j)])]] = a_s[k, c]
        q[k] = qk
        v[k], a[k], _ = ck.complete(qk, vi, ai, knee_rod)
    return rows, (q, v, a), (q_s, v_s, a_s)


def floating_exact_states(robot, serial, res_ho, a_pin, rows):
    """Held-out states that measure the parameters (score "exact states"): MuJoCo's own q, v and qacc at
    the samples ``rows`` (`mujoco_loops.mj_acceleration_to_pin`), for the looped robot and its serial
    view (base + hip, thigh, calf of the same arrays)."""
    q, v, a = (np.asarray(x, float)[rows] for x in (res_ho.q_pin, res_ho.v_pin, a_pin))
    names = list(robot.joint_names)
    iq, iv = robot.joint_index_q(), robot.joint_index_v()
    n = len(rows)
    qs, vs, as_ = np.zeros((n, serial.nq)), np.zeros((n, serial.nv)), np.zeros((n, serial.nv))
    qs[:, :7], vs[:, :6], as_[:, :6] = q[:, :7], v[:, :6], a[:, :6]
    for j, cq, cv in zip(serial.joint_names, serial.joint_index_q(), serial.joint_index_v(), strict=True):
        qs[:, cq] = q[:, iq[names.index(j)]]
        vs[:, cv], as_[:, cv] = v[:, iv[names.index(j)]], a[:, iv[names.index(j)]]
    return (q, v, a), (qs, vs, as_)


def motor_efforts(robot, q, gen) -> np.ndarray:
    """u_k = (G_kᵀ g_k) on the actuated joints (G: v = G v_ind at q_k, passive joints dependent), from the
    generalized forces g (N, nv) = ID(q, v, a) − Σ_f J_fᵀ f_f; closure forces (Gᵀ Jᵀλ = 0) drop out."""
    from fg_sysid.robots.loop_kinematics import ClosureKinematics

    ck = ClosureKinematics(robot.model, robot.loops)
    names, iv = list(robot.joint_names), robot.joint_index_v()
    passive = [iv[names.index(j)] for j in actuation_of(robot).passive]
    act = [names.index(j) for j in actuated_joints(robot)]
    out = np.empty((q.shape[0], len(act)))
    for k in range(q.shape[0]):
        G, cols = ck.actuated_map(q[k], passive, [iv[i] for i in act])
        out[k] = (G.T @ gen[k])[cols]
    return out


def run_floating(args) -> pd.DataFrame:
    """Floating B1 with four-bar knees, step in place (module docstring of `simulate_loop_stance`):
    held-out actuated efforts u = Gᵀ(ID(q, v, a; p) − Σ_f J_fᵀ f_f) with the held-out log's contact forces,
    scored twice: ``states = "exact"`` (MuJoCo's q, v, qacc: what the parameters cost) and ``states =
    "sg"`` (SG on the manifold of the noisy log: what the prediction pipeline costs as well).
    Writes ``<out>_floating_parameters.csv`` (the loop fit's parameter table) and
    ``<out>_floating_identifiability.json`` (the fit's ``summary.json`` → ``loops`` block)."""
    import json

    from fg_sysid.datasets.mujoco_loops import simulate_loop_stance
    from fg_sysid.estimation.floating_smoother import FloatingBaseSmoother
    from fg_sysid.floating_validation import (
        contact_generalized_forces,
        floating_inverse_dynamics,
        predict_floating_efforts,
    )
    from fg_sysid.robots import load_robot

    robot = load_loop_robot("b1_fourbar")
    serial = load_robot("b1")
    emap = {f"{leg}_calf_joint": f"{leg}_knee_motor" for leg in LEGS}
    plan = {"lift": args.floating_lift, "loop": args.floating_loop}
    t0, c0 = time.perf_counter(), time.process_time()
    res_tr, log_tr, viol_tr = simulate_loop_stance(robot, args.floating_train, args.rate, args.noise,
                                                   args.seed, step_period=args.floating_step_period,
                                                   friction_scale=args.floating_friction_scale, **plan)
    exact = {}
    res_ho, log_ho, viol_ho = simulate_loop_stance(robot, args.floating_heldout, args.rate,
                                                   args.noise, args.seed + 1,
                                                   step_period=args.floating_heldout_step_period,
                                                   truth=res_tr.truth, exact=exact)
    print(f"[b1_fourbar / mujoco steps] simulated {args.floating_train:g} + {args.floating_heldout:g} s in "
          f"{time.perf_counter() - t0:.1f} s ({time.process_time() - c0:.0f} CPU s); closure violation "
          f"{viol_tr:.2e} / {viol_ho:.2e} m; base tilt max {res_tr.truth['base_tilt_max_deg']:.1f} / "
          f"{res_ho.truth['base_tilt_max_deg']:.1f} deg, feet in contact min "
          f"{res_tr.truth['feet_in_contact_min']} / {res_ho.truth['feet_in_contact_min']}", flush=True)
    for key, r in (("training", res_tr), ("held-out", res_ho)):
        if r.truth["base_tilt_max_deg"] > FALL_TILT_DEG:
            print(f"  WARNING: the {key} log's robot fell (base tilt {r.truth['base_tilt_max_deg']:.0f} "
                  f"deg > {FALL_TILT_DEG:g}): not a step in place; use a longer --floating-step-period",
                  flush=True)
        if r.truth.get("effort_saturated_samples"):  # e.g. a four-bar run into its toggle range
            print(f"  note: the {key} log has efforts at their limit (samples per joint: "
                  f"{r.truth['effort_saturated_samples']}); the loop smoother leaves those windows out of "
                  "its effort and force rows", flush=True)
    training_collinearity(robot, res_tr)
    rows, st_sg, ser_sg = floating_sg_states(robot, serial, log_ho, res_ho)
    st_ex, ser_ex = floating_exact_states(robot, serial, res_ho, exact["a_pin"], rows)
    forces = [log_ho.forces[f][rows] for f in robot.contact_frames]
    states = {"exact": (st_ex, ser_ex), "sg": (st_sg, ser_sg)}
    JtF = {k: contact_generalized_forces(robot, st[0], forces, robot.contact_frames, robot.contact_radius)
           for k, (st, _) in states.items()}
    names = list(robot.joint_names)
    act = [names.index(j) for j in actuated_joints(robot)]
    pnames = parameter_names(robot)
    p_true = np.array([res_ho.truth["parameters"][n] for n in pnames])
    models = {"true": p_true, "nominal": nominal_parameters(robot)}
    preds, cpu = {}, {}

    def physical(m, p):
        for k, (st, _) in states.items():
            gen = floating_inverse_dynamics(p, robot, *st) - JtF[k]
            preds[(m, k)] = motor_efforts(robot, st[0], gen)

    methods = set(args.floating_methods)
    if "reduced" in methods:  # the floating smoother on the serial view of the training log
        t1, c1 = time.perf_counter(), time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fs = FloatingBaseSmoother(serial).fit(serial_log(log_tr, serial, emap))
        cpu["reduced"] = time.process_time() - c1
        col = {emap.get(j, j): i for i, j in enumerate(serial.joint_names)}
        for k, (_, sst) in states.items():
            u_s = predict_floating_efforts(fs.result_, serial, *sst, forces, serial.contact_frames,
                                           serial.contact_radius)
            preds[("reduced", k)] = np.column_stack([u_s[:, col[names[i]]] for i in act])
        print(f"  reduced floating smoother: {time.perf_counter() - t1:.0f} s ({cpu['reduced']:.0f} CPU s)",
              flush=True)
    if "loop-smoother" in methods:  # the floating smoother on the looped spec (`fg-sysid identify` path)
        t1, c1 = time.perf_counter(), time.process_time()
        prior = None
        if args.floating_prior_mean == "truth":  # diagnostic: does the fit stay at the truth? (not a method)
            prior = np.array([res_tr.truth["parameters"][n] for n in parameter_names(robot)])
        if args.floating_saturation_window is not None:  # diagnostic (issue 11, floating knee): the
            import functools  # window half-width of `floating_loops.saturated_samples`

            from fg_sysid.estimation import floating_loops
            floating_loops.saturation_window = functools.partial(
                floating_loops.saturation_window, window_s=args.floating_saturation_window)
        res_l = floating_loop_smoother(log_tr, init=args.floating_init, prior_mean=prior)
        cpu["loop-smoother"] = time.process_time() - c1
        models["loop-smoother"] = res_l.layout.to_physical(res_l.theta)
        lp = res_l.extras["loops"]
        print(f"  loop floating smoother: {time.perf_counter() - t1:.0f} s "
              f"({cpu['loop-smoother']:.0f} CPU s); closures at the solution: "
              + ", ".join(f"{k} {val:.1e}" for k, val in lp["constraint_residual_max"].items()), flush=True)
        np.savez(f"{args.out}_floating_fit.npz", theta=res_l.theta, theta_cov=res_l.theta_cov,
                 estimate=res_l.estimate, names=np.array(res_l.names))
        tab = res_l.parameters_table()
        tab["truth"] = [res_ho.truth["parameters"].get(n, np.nan) for n in tab["name"]]
        tab.to_csv(f"{args.out}_floating_parameters.csv", index=False)
        Path(f"{args.out}_floating_identifiability.json").write_text(json.dumps(lp, indent=1, default=float))
        print_knee_identifiability(lp, res_ho.truth["parameters"])
    for m, p in models.items():
        physical(m, p)
    u_true = res_ho.tau[rows][:, act]
    out = []
    for (m, k), u in preds.items():
        for c, i in enumerate(act):
            e = float(np.sqrt(np.mean((u[:, c] - u_true[:, c]) ** 2)))
            out.append({"robot": "b1_fourbar", "truth": "mujoco-steps", "method": m, "states": k,
                        "joint": names[i], "rmse": e, "cpu_seconds": cpu.get(m, 0.0),
                        "relative_%": 100 * e / float(np.sqrt(np.mean(u_true[:, c] ** 2)))})
    return pd.DataFrame(out)


def training_collinearity(robot, res_tr, velocity_scale: float = 0.05) -> None:
    """Knee motor vs calf friction from the training motion alone (exact states, no fit): the transmission
    ratio J = dq_calf/dq_motor along the log and the cosines of the motor's and the reflected calf's
    friction regressor columns (`floating_loops.regressor_cosines`)."""
    from fg_sysid.estimation import floating_loops, loop_terms
    from fg_sysid.robots import load_robot
    from fg_sysid.robots.loops import passive_mask

    looped = load_robot(str(loop_robot_path("b1_fourbar")))
    names, iv = list(looped.joint_names), looped.joint_index_v()
    pas = passive_mask(looped)
    p_idx, a_idx = list(np.flatnonzero(pas)), list(np.flatnonzero(~pas))
    q, v = res_tr.q_pin[::10], res_tr.v_pin[::10]
    R = floating_loops.transmission_ratios(loop_terms.closures(looped), looped, q)
    for leg in LEGS:
        m, c = names.index(f"{leg}_knee_motor"), names.index(f"{leg}_calf_joint")
        J = R[:, p_idx.index(c), a_idx.index(m)]
        cos = floating_loops.regressor_cosines(v[:, iv[m]], v[:, iv[c]], J, velocity_scale)
        print(f"  training motion, {leg}: J = dq_calf/dq_motor in [{J.min():.3f}, {J.max():.3f}], regressor "
              f"cosine motor vs calf: fc {cos['fc']:.4f}, fv {cos['fv']:.4f} (weak-direction information "
              f"{cos['fc_weak_information']:.1e} / {cos['fv_weak_information']:.1e})", flush=True)


def print_knee_identifiability(lp: dict, truth: dict) -> None:
    """The knee motors' friction and armature, the motor/calf friction collinearity and the identifiable
    reflected sums against the truth (from ``summary.json`` → ``loops``, `floating_loops.summary_extras`)."""
    for row in lp.get("friction_collinearity", []):
        m, c = row["motor"], row["passive"]
        est = ", ".join(f"{k} {row['estimate'][k]:.4g} ± {row['std'][k]:.2g}" for k in row["estimate"])
        tru = {"fc_sum": truth[f"{m}.fc"] + row["ratio"] * truth[f"{c}.fc"],
               "fv_sum": truth[f"{m}.fv"] + row["ratio"] ** 2 * truth[f"{c}.fv"]}
        print(f"  {m} / {c}: J = {row['ratio']:.3f}, corr(fc) {row['correlation']['fc']:+.3f}, "
              f"corr(fv) {row['correlation']['fv']:+.3f}; {est}; true fc_sum {tru['fc_sum']:.4g}, "
              f"fv_sum {tru['fv_sum']:.4g}, motor fc {truth[f'{m}.fc']:.4g} fv {truth[f'{m}.fv']:.4g} "
              f"armature {truth[f'{m}.armature']:.4g}", flush=True)


def floating_loop_smoother(log, init: str = "ls", prior_mean=None):
    """`FloatingBaseSmoother` on the looped ``b1_fourbar`` spec, the log written and read back like
    `fg-sysid identify` does (unencoded rods: no columns); ``init``: its initial θ (``"ls"``, the default:
    the constraint-eliminated least squares; ``"prior"``: the prior mean; ``prior_mean``: physical
    parameters, None = the URDF's). Returns its
    `IdentificationResult`."""
    import tempfile

    from fg_sysid.datasets.io import load_log_for_robot, write_log
    from fg_sysid.estimation.floating_smoother import FloatingBaseSmoother
    from fg_sysid.robots import load_robot

    with tempfile.TemporaryDirectory() as tmp:
        write_log(log, Path(tmp) / "log.parquet")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            robot_l, log_l = load_log_for_robot(Path(tmp) / "log.parquet",
                                                load_robot(str(loop_robot_path("b1_fourbar"))))
            return FloatingBaseSmoother(robot_l, verbose=True, init=init,
                                        prior_mean=prior_mean).fit(log_l).result_


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--robots", nargs="*", default=["b1_leg_fourbar", "fourbar"])
    ap.add_argument("--truths", nargs="+", default=["mujoco", "in-class"], choices=TRUTHS)
    ap.add_argument("--train", type=float, default=10.0)
    ap.add_argument("--heldout", type=float, default=5.0)
    ap.add_argument("--rate", type=float, default=500.0)
    ap.add_argument("--noise", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="benchmarks/results/loops")
    ap.add_argument("--floating", action="store_true", help="also the floating B1 with four-bar knees")
    ap.add_argument("--floating-train", type=float, default=9.6)
    ap.add_argument("--floating-heldout", type=float, default=4.8)
    ap.add_argument("--floating-step-period", type=float, default=2.4, help="s per foot (training log)")
    ap.add_argument("--floating-heldout-step-period", type=float, default=2.0)
    ap.add_argument("--floating-friction-scale", type=float, default=1.0,
                    help="MuJoCo dry friction fc x this (1: 2 %% of the effort limit)")
    ap.add_argument("--floating-lift", type=float, default=0.08, help="swing-foot lift [m] (training log)")
    ap.add_argument("--floating-loop", type=float, default=0.05, help="swing-foot loop radius [m] (training)")
    ap.add_argument("--floating-init", default="ls", choices=("ls", "prior"),
                    help="initial θ of the loop smoother (default ls: constraint-eliminated least squares)")
    ap.add_argument("--floating-prior-mean", default="nominal", choices=("nominal", "truth"),
                    help="loop smoother's prior mean (truth: a diagnostic — does the fit stay there?)")
    ap.add_argument("--floating-saturation-window", type=float, default=None,
                    help="diagnostic: the loop smoother's saturation-window half-width [s] (default 0.1)")
    ap.add_argument("--floating-methods", nargs="*", default=["reduced", "loop-smoother"],
                    help="fitted methods of the floating rows (nominal and true are always scored)")
    ap.add_argument("--mujoco-effort-hold", type=float, default=None, metavar="SECONDS",
                    help="loop smoother on the MuJoCo truths: efforts held zero-order over this period "
                         "(their controller's, 0.001), re-timed to the knots (`effort_timing`); default off")
    args = ap.parse_args()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tables, ptabs = [], []
    pd.set_option("display.width", 160)
    for robot_name in args.robots:
        for truth in args.truths:
            table, ptab, extra = run(robot_name, truth, args)
            tables.append(table)
            ptabs.append(ptab)
            print(table.pivot(index="method", columns="joint", values="relative_%").round(2).to_string())
            print(table.pivot(index="method", columns="joint", values="rmse").round(4).to_string())
            print(ptab.round(5).to_string(index=False))
            stem = f"{out.name}_{robot_name}_{truth}"
            title = (f"{robot_name}, {truth} truth, σ = {args.noise:g}, held-out {args.heldout:g} s "
                     f"(train {args.train:g} s, {args.rate:g} Hz)")
            plot(extra, title, out.parent / f"{stem}_fig15.png", table, out.parent / f"{stem}_bars.png")
    if args.floating:
        ft = run_floating(args)
        tables.append(ft)
        piv = ft.assign(leg=ft.joint.str[:2], kind=ft.joint.str[3:]).pivot_table(
            index=["states", "method"], columns="kind", values="relative_%", aggfunc="mean")
        print("floating B1, held-out relative RMSE [%], mean over the four legs (states: exact = MuJoCo's "
              "q, v, qacc; sg = SG of the noisy log):")
        print(piv.round(2).to_string())
        knee = ft[ft.joint.str.endswith("knee_motor")].pivot_table(
            index=["states", "method"], columns="joint", values="relative_%")
        print("knee motors per leg [%]:")
        print(knee.round(2).to_string())
    pd.concat(tables).to_csv(f"{out}.csv", index=False)
    if ptabs:
        pd.concat(ptabs).to_csv(f"{out}_parameters.csv", index=False)
    print(f"wrote {out}.csv, {out}_parameters.csv and the PNGs in {out.parent}")


if __name__ == "__main__":
    main()
