"""B1 four-bar knee, MuJoCo truth: what limits the knee motor's viscous friction fv (issue 11, knee fv).

No smoother fits (cheap: ≈ 15 CPU s per seed). Per seed, the training log of ``bench_loops_knee.py``
(``b1_leg_fourbar``, 10 s at 500 Hz, σ = 0.01, `simulate_loop_mujoco`) and four questions:

(a) pins      the truth's friction of the passive pins against the URDF <dynamics> value the estimator
              holds the rod pin at (`loop_terms.adjust_prior`);
(c) damping   MuJoCo's motor friction torque along the noise-free log, by the oracle identity
              f = u − [Gᵀ(RNEA_true + A a)]_motor (passive pins frictionless): least squares of
              fc·sign(v) + fv·v (+ an acceleration column) on |v| > 0.3 rad/s — with MuJoCo's own qacc
              (``[qacc]``) and with 4th-order central differences of the logged v (``[fd]``: what an
              estimator's states see), and with the efforts re-timed to the samples (``[fd+hold]``: by half
              the controller's hold period, `effort_timing`; ``[fd+hold(h)]``: by half the sample period).
              ``--control-rates`` repeats it for other controller rates: the
              logged effort is the value at the start of its zero-order hold, the motion answers the
              held value (a lag of half a control period), which shows up as a lower apparent fv;
(d) law       the estimator's law fc·tanh(v/vs) + fv·v fitted (nonlinear least squares, vs free) to that
              exact friction torque: the bias of the tanh law alone on fv;
(b) info      data-only std of the motor's fc, fv (`loop_identifiability.friction_information` at the
              constraint-elimination pipeline's states, σ_τ = σ): every pin's friction free, the rod's
              held (what the estimator holds), every pin's held.

    nice -n 10 python benchmarks/bench_loops_knee_fv.py --seeds 0 1 2
    nice -n 10 python benchmarks/bench_loops_knee_fv.py --seeds 0 2 --control-rates 4000 500

Prints one table row per seed; ``--out`` writes it as CSV.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from fg_sysid.datasets.mujoco_loops import constrained_torque, simulate_loop_mujoco
from fg_sysid.datasets.simulate import truth_arrays
from fg_sysid.estimation import loop_identifiability as li
from fg_sysid.estimation.effort_timing import retime_efforts
from fg_sysid.estimation.loop_baseline import _central4, loop_states
from fg_sysid.robots import load_robot
from fg_sysid.robots.loop_kinematics import ClosureKinematics
from fg_sysid.robots.looped import load_loop_robot, loop_robot_path
from fg_sysid.robots.loops import actuated_joints

ROBOT = "b1_leg_fourbar"
MOTOR, CALF, ROD = "FL_knee_motor", "FL_calf_joint", "FL_rod_joint"
FAST = 0.3  # rad/s: outside MuJoCo's stick / soft-constraint region


def motor_friction(robot, res, accelerations, tau=None) -> np.ndarray:
    """MuJoCo's friction torque on the knee motor [N·m] per sample: u − [Gᵀ(RNEA_true + A a)]_motor at
    the noise-free states with the given accelerations (N, nv) (``tau``: efforts in place of the log's)."""
    names = list(robot.joint_names)
    act = [names.index(j) for j in actuated_joints(robot)]
    dep = [i for i in range(len(names)) if i not in act]
    tr = truth_arrays(res.truth, robot)
    model = robot.pinocchio_model_with(tr["inertial"])
    model.armature = np.asarray(tr["armature"], float)
    ck = ClosureKinematics(robot.model, robot.loops)
    m, km = names.index(MOTOR), act.index(names.index(MOTOR))
    out = np.empty(len(res.truth_log.t))
    for k in range(out.size):
        q, v = res.truth_log.q[k], res.truth_log.v[k]
        u, _ = constrained_torque(model, ck, dep, act, q, v, accelerations[k])
        out[k] = (res.truth_log.tau if tau is None else tau)[k, m] - u[km]
    return out


def run_seed(seed: int, args, control_rate: float = 1000.0) -> dict:
    c0 = time.process_time()
    robot = load_loop_robot(ROBOT)
    names = list(robot.joint_names)
    m = names.index(MOTOR)
    res = simulate_loop_mujoco(robot, args.train, args.rate, args.noise, seed, control_rate=control_rate)
    P = res.truth["parameters"]
    fc, fv = P[f"{MOTOR}.fc"], P[f"{MOTOR}.fv"]
    row = {"seed": seed, "control_Hz": control_rate, "fc": fc, "fv": fv, "armature": P[f"{MOTOR}.armature"]}
    # (a) the pins: truth vs the URDF value the estimator holds
    iu = {j: i for i, j in enumerate(names)}
    for pin_ in (ROD, CALF):
        row[f"{pin_}_truth_fc/fv"] = f"{P[f'{pin_}.fc']:.3g}/{P[f'{pin_}.fv']:.3g}"
        row[f"{pin_}_urdf_fc/fv"] = f"{robot.urdf_friction[iu[pin_]]:.3g}/{robot.urdf_damping[iu[pin_]]:.3g}"
    # (c) MuJoCo's friction law and its damping, with qacc and with differentiated velocities
    v = res.truth_log.v[:, m]
    dt = 1.0 / args.rate
    a_fd = _central4(res.truth_log.v, dt)
    fast = np.abs(v) > FAST
    fast[:3], fast[-3:] = False, False  # central-difference edges
    # [fd+hold]: the efforts re-timed by half the controller's hold period (`effort_timing`, the truth's
    # timing); [fd+hold(h)]: by half the log's sample period (`--effort-timing hold` without a hold period)
    tl = res.truth_log
    retimed = {"fd+hold": retime_efforts(tl.t, tl.tau, 0.5 / control_rate),
               "fd+hold(h)": retime_efforts(tl.t, tl.tau, 0.5 * dt)}
    for label, acc in (("qacc", res.truth_acceleration), ("fd", a_fd), ("fd+hold", a_fd),
                       ("fd+hold(h)", a_fd)):
        f = motor_friction(robot, res, acc, retimed.get(label))
        A = np.c_[np.sign(v[fast]), v[fast], acc[fast, m]]
        x = np.linalg.lstsq(A, f[fast], rcond=None)[0]
        row[f"sign_fv_err_%[{label}]"] = 100 * (x[1] / fv - 1)
        row[f"sign_fc_err_%[{label}]"] = 100 * (x[0] / fc - 1)
        row[f"extra_inertia[{label}]"] = x[2]
        if label == "qacc":
            f_exact = f
            row["max_dev_fast_N·m"] = float(np.max(np.abs(f[fast] - fc * np.sign(v[fast]) - fv * v[fast])))
    row["h·D"] = res.truth["controller"]["mujoco_timestep"] * fv
    # (d) the tanh law (vs free) fitted to the exact friction torque
    r = least_squares(lambda p: p[0] * np.tanh(v / p[2]) + p[1] * v - f_exact, [fc, fv, 0.05],
                      bounds=([0, 0, 1e-4], [10, 10, 1]))
    row["tanh_fc_err_%"], row["tanh_fv_err_%"], row["tanh_vs"] = 100 * (r.x[0] / fc - 1), \
        100 * (r.x[1] / fv - 1), r.x[2]
    row["peak_|v|"] = float(np.abs(v).max())
    # (b) data-only information at the pipeline's states
    robot_l = load_robot(str(loop_robot_path(ROBOT)))
    st = loop_states(robot, res.log)
    k = np.flatnonzero(st.keep)
    (fi,) = li.friction_information(robot_l, st.q[k], st.v[k], st.a[k], args.noise)
    for label, held in (("pins free", []), ("rod held", [ROD]), ("pins held", [ROD, CALF])):
        row[f"fv_std_%[{label}]"] = 100 * li.std_held(fi, held)[1] / fv
    row["cpu_s"] = time.process_time() - c0
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--train", type=float, default=10.0)
    ap.add_argument("--rate", type=float, default=500.0)
    ap.add_argument("--noise", type=float, default=0.01)
    ap.add_argument("--control-rates", type=float, nargs="+", default=[1000.0],
                    help="controller rates [Hz] of the MuJoCo truth (zero-order hold; the bench's is 1000)")
    ap.add_argument("--out", default=None, help="CSV of the table")
    args = ap.parse_args()
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for cr in args.control_rates:
            for seed in args.seeds:
                rows.append(run_seed(seed, args, cr))
                print(f"seed {seed}, control {cr:g} Hz: {rows[-1]['cpu_s']:.0f} CPU s", flush=True)
    tab = pd.DataFrame(rows).set_index(["control_Hz", "seed"])
    pd.set_option("display.width", 250)
    print(tab.T.to_string(float_format=lambda x: f"{x:.4g}"))
    if args.out:
        tab.to_csv(args.out)


if __name__ == "__main__":
    main()
