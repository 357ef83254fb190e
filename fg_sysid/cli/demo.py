"""``fg-sysid demo``: simulate, identify (smoother and LS-SG baseline), validate on a held-out log."""

from __future__ import annotations

import math
import time
from pathlib import Path

import click
import numpy as np

from .common import atomic_output_dir, echo_err, fail, load_robot_or_fail, main

QUICK_DURATION, QUICK_RATE = 4.0, 500.0
#: Floating-base demo (MuJoCo): training / held-out sway duration [s], rate [Hz], knot stride.
FLOATING_DURATION, FLOATING_RATE, FLOATING_STRIDE = 4.0, 500.0, 5
DEFAULT_DURATION, DEFAULT_RATE = 20.0, 1000.0
#: Seconds of the held-out log shown in the effort plot (the whole log is used in the table).
PLOT_SECONDS = 5.0


def _truth_vector(truth: dict, robot) -> np.ndarray:
    from ..datasets.simulate import truth_arrays

    arr = truth_arrays(truth, robot)
    fr = np.empty(2 * robot.n_joints)
    fr[0::2], fr[1::2] = arr["fc"], arr["fv"]
    return np.concatenate([arr["inertial"].ravel(), fr, arr["armature"]])


@main.command("demo")
@click.option("--robot", "robot_name", default="z1", show_default=True, help="Catalog name or URDF path.")
@click.option("--out", "out", default="demo-output", show_default=True, type=click.Path(file_okay=False),
              help="Output directory (written atomically; replaced if it exists).")
@click.option("--duration", type=float, default=None,
              help=f"Training and held-out log duration [s] (default {DEFAULT_DURATION:g}; --quick: "
                   f"{QUICK_DURATION:g}).")
@click.option("--rate", type=float, default=None,
              help=f"Sample rate [Hz] (default {DEFAULT_RATE:g}; --quick: {QUICK_RATE:g}).")
@click.option("--noise", type=float, default=0.01, show_default=True,
              help="Noise std on q [rad], v [rad/s] and tau [N·m].")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seed of the truth and training motion; the held-out log uses seed+1 (same truth).")
@click.option("--quick", is_flag=True,
              help=f"Short run ({QUICK_DURATION:g} s at {QUICK_RATE:g} Hz) for tests.")
@click.option("--quiet", is_flag=True, help="No per-iteration progress on stderr.")
def demo_cmd(robot_name, out, duration, rate, noise, seed, quick, quiet):
    """Simulate a training and a held-out log of the same (randomly perturbed) robot, identify it with
    the smoother and the LS-SG baseline, and compare held-out effort predictions.

    The table gives the held-out relative RMSE sqrt(mean((pred-true)²))/sqrt(mean(true²)) of the
    efforts predicted at the noise-free held-out motion (true q, v, accelerations) against the true
    applied efforts, for the identified model, the LS-SG baseline, the nominal URDF and (sanity check,
    ~0) the true parameters; a second column does the same the way 'fg-sysid predict' does on the noisy
    held-out log (logged v, SG accelerations, measured efforts).

    Floating-base robots (b1, b1_z1): MuJoCo logs (soft contacts, dry joint friction, IMU, contact
    flags and forces) of a stance sway (4 s at 500 Hz; --quick: 1 s at 200 Hz), identified with
    the floating-base smoother and the decoupled least-squares baseline from encoders, efforts, IMU,
    base pose and contact flags (not the forces); the held-out table predicts the efforts with the
    held-out log's measured contact forces and compares with the floor of the true parameters.

    \b
    DIR (--out) receives:
      report.md, heldout_efforts.png   the table and the held-out efforts per joint
      train/, heldout/                 simulated logs and truth (as 'fg-sysid simulate')
      identify/                        'fg-sysid identify' outputs of the smoother
      identify-ls-sg/                  'fg-sysid identify --method ls-sg' outputs
    """
    from ..datasets.simulate import SimulationError, simulate, write_simulation
    from ..estimation.smoother import EstimationError
    from ..report import joint_units, markdown_table, plot_efforts
    from ..validation import (
        heldout_accelerations,
        nominal_model,
        predict_efforts,
        relative_rmse,
        relative_rmse_per_joint,
    )
    from .identify import run_identification
    from .outputs import write_identification

    floating_args = (duration, rate)
    if duration is None:
        duration = QUICK_DURATION if quick else DEFAULT_DURATION
    if rate is None:
        rate = QUICK_RATE if quick else DEFAULT_RATE
    for name, val in (("--duration", duration), ("--rate", rate)):
        if not (math.isfinite(val) and val > 0):
            fail(f"{name} must be a positive number, got {val}")
    if not (math.isfinite(noise) and noise >= 0):
        fail(f"--noise must be >= 0, got {noise}")
    if seed < 0:
        fail(f"--seed must be >= 0, got {seed}")
    robot = load_robot_or_fail(robot_name)
    if robot.floating_base:
        fl_duration = floating_args[0] or (1.0 if quick else FLOATING_DURATION)
        fl_rate = floating_args[1] or (200.0 if quick else FLOATING_RATE)
        floating_demo(robot, robot_name, out, fl_duration, fl_rate, noise, seed, quick, quiet,
                      knot_stride=2 if quick else FLOATING_STRIDE)
        return
    t_all = time.perf_counter()
    say = (lambda msg: None) if quiet else echo_err
    say(f"demo: simulating {robot.name}, {duration:g} s at {rate:g} Hz, noise {noise:g} "
        f"(training seed {seed}, held-out seed {seed + 1})")
    try:
        train = simulate(robot, duration, rate, noise, seed)
        held = simulate(robot, duration, rate, noise, seed + 1, truth=train.truth)
    except SimulationError as e:
        fail(str(e))
    out_path = Path(out)
    with atomic_output_dir(out) as tmp:
        write_simulation(train, tmp / "train")
        write_simulation(held, tmp / "heldout")
        train_log_path = out_path / "train" / "log.parquet"
        results = {}
        for method, sub in (("smoother", "identify"), ("ls-sg", "identify-ls-sg")):
            say(f"demo: identifying with {method}")
            t0 = time.perf_counter()
            try:
                res, filt, _ = run_identification(robot, train.log, method, verbose=not quiet)
            except (EstimationError, ValueError) as e:
                fail(f"{method}: {e}")
            (tmp / sub).mkdir()
            options = {"friction_velocity_scale": 0.05, "method": method}
            summary = write_identification(tmp / sub, res, filt, robot, train.log, train_log_path, robot_name,
                                           method, options, time.perf_counter() - t0)
            results[method] = (res, filt, summary)

        # held-out evaluation
        tl = held.truth_log
        q, v, a, tau_true = tl.q, tl.v, held.truth_acceleration, tl.tau
        models = {
            "identified (smoother)": results["smoother"][0],
            "classical LS-SG": results["ls-sg"][0],
            "nominal URDF": nominal_model(robot),
            "true parameters (sanity)": _truth_vector(train.truth, robot),
        }
        vs = float(train.truth.get("friction_velocity_scale", 0.05))
        filt = results["smoother"][1]
        vh, ah, info = heldout_accelerations(held.log, filt["window_s"], filt["polyorder"])
        rows, preds = [], {}
        for label, m in models.items():
            pred = predict_efforts(m, robot, q, v, a, velocity_scale=vs)
            pred_noisy = predict_efforts(m, robot, held.log.q, vh, ah, velocity_scale=vs)
            preds[label] = pred
            row = {"model": label, "held-out rel. RMSE (truth)": relative_rmse(pred, tau_true),
                   "held-out rel. RMSE (noisy log, SG acc.)": relative_rmse(pred_noisy, held.log.tau)}
            for j, r in zip(robot.joint_names, relative_rmse_per_joint(pred, tau_true), strict=True):
                row[j] = r
            rows.append(row)
        import pandas as pd

        table = pd.DataFrame(rows)
        keep = held.log.t <= held.log.t[0] + PLOT_SECONDS
        plot_preds = {k: preds[k][keep] for k in ("identified (smoother)", "classical LS-SG", "nominal URDF")}
        plot_efforts(tl.t[keep], tau_true[keep], plot_preds, robot.joint_names, tmp / "heldout_efforts.png",
                     measured_label="true effort (noise-free)", units=joint_units(robot),
                     title=f"{robot.name}: held-out efforts, true vs predicted (first {PLOT_SECONDS:g} s)")
        s = results["smoother"][2]
        lines = [
            f"# fg-sysid demo: {robot.name}", "",
            f"- training and held-out logs: {duration:g} s at {rate:g} Hz, noise std {noise:g} on q [rad], "
            f"v [rad/s] and tau [N·m]; same true robot (URDF perturbed, friction, armature), seeds {seed} "
            f"and {seed + 1}",
            f"- smoother: {s['knots']} knots, {s['iterations']} iterations, converged: {s['converged']}, "
            f"{s['seconds']:.3g} s, physically consistent: {s['physically_consistent']}",
            f"- LS-SG baseline: SG window {results['ls-sg'][1]['window_s'] * 1e3:.3g} ms, order "
            f"{results['ls-sg'][1]['polyorder']}, physically consistent: "
            f"{results['ls-sg'][2]['physically_consistent']}",
            "", "## Held-out effort prediction", "",
            "Relative RMSE = sqrt(mean((pred − true)²)) / sqrt(mean(true²)) over all joints and samples. "
            "*truth*: efforts predicted at the noise-free held-out q, v and true accelerations, against the "
            "true applied efforts (per-joint columns too). *noisy log*: what `fg-sysid predict` computes — "
            f"logged v, Savitzky–Golay accelerations ({info['window_s'] * 1e3:.3g} ms, order "
            f"{info['polyorder']}), against the noisy measured efforts (their noise included). "
            "'true parameters' checks the prediction path (≈ 0).", "",
            markdown_table(table), "",
            "![held-out efforts](heldout_efforts.png)", "",
            "Identification reports: [smoother](identify/report.md), [LS-SG](identify-ls-sg/report.md). "
            f"Re-run the held-out prediction with `fg-sysid predict {out_path / 'identify'} "
            f"{out_path / 'heldout' / 'log.parquet'} --out pred.csv`.", "",
        ]
        (tmp / "report.md").write_text("\n".join(lines))
    click.echo(f"held-out effort relative RMSE, {robot.name} ({duration:g} s at {rate:g} Hz, "
               f"noise {noise:g}):")
    w = max(len(r["model"]) for r in rows)
    click.echo(f"  {'model':<{w}s}  {'vs truth':>9s}  {'noisy log':>9s}")
    for r in rows:
        click.echo(f"  {r['model']:<{w}s}  {r['held-out rel. RMSE (truth)']:9.4f}  "
                   f"{r['held-out rel. RMSE (noisy log, SG acc.)']:9.4f}")
    click.echo(f"wrote {out} (report.md, heldout_efforts.png, identify/, identify-ls-sg/) in "
               f"{time.perf_counter() - t_all:.1f} s")


def floating_demo(robot, robot_name, out, duration, rate, noise, seed, quick, quiet, knot_stride):
    """`fg-sysid demo` for a free-flyer robot (MuJoCo logs; see the demo command's help)."""
    import pandas as pd

    from ..datasets.mujoco_sim import (
        MujocoSimError,
        draw_truth,
        simulate_stance,
        to_log,
        write_mujoco_simulation,
    )
    from ..estimation.baseline import parameter_names
    from ..estimation.metrics import base_pose_errors
    from ..estimation.smoother import EstimationError
    from ..floating_validation import floating_heldout_report
    from ..report import joint_units, markdown_table, plot_efforts
    from ..validation import nominal_model
    from .identify import run_identification
    from .outputs import WINDOWS, write_identification

    say = (lambda msg: None) if quiet else echo_err
    t_all = time.perf_counter()
    drawn = draw_truth(robot, seed)
    common = dict(inertial=drawn["inertial"], friction=(drawn["fc"], drawn["fv"]), armature=drawn["armature"])
    say(
        f"demo: MuJoCo {robot.name}, training sway {duration:g} s and held-out sway {duration:g} s at "
        f"{rate:g} Hz, noise {noise:g} (seed {seed})"
    )
    try:
        train = simulate_stance(robot, duration, rate, seed=seed, noise=noise, motion="sway", **common)
        held = simulate_stance(
            robot, duration, rate, seed=seed + 1, noise=noise, motion="sway", sway_amplitude=0.14, **common
        )
    except MujocoSimError as e:
        fail(str(e))
    log_train, log_held = to_log(train), to_log(held)
    feet, radius = tuple(train.foot_frames), float(train.truth["foot_radius"])
    p_true = np.array([train.truth["parameters"][n] for n in parameter_names(robot)])
    m_true = float(drawn["inertial"][:, 0].sum())
    out_path = Path(out)
    with atomic_output_dir(out) as tmp:
        for sub, res in (("train", train), ("heldout", held)):
            (tmp / sub).mkdir()
            write_mujoco_simulation(res, tmp / sub)
        results = {}
        opts = {
            "smoother": {
                "contact_frames": feet,
                "contact_radius": radius,
                "knot_stride": knot_stride,
                "use_forces": False,
            },
            "ls-sg": {"contact_radius": radius},
        }
        for method, sub in (("smoother", "identify"), ("ls-sg", "identify-ls-sg")):
            say(f"demo: identifying with {method}")
            t0 = time.perf_counter()
            try:
                res, _, est = run_identification(robot, log_train, method, opts[method], verbose=not quiet)
            except (EstimationError, ValueError) as e:
                fail(f"{method}: {e}")
            (tmp / sub).mkdir()
            summary = write_identification(
                tmp / sub, res, None, robot, log_train, out_path / "train" / "log.parquet", robot_name,
                method, {k: v for k, v in opts[method].items() if k != "contact_frames"},
                time.perf_counter() - t0, estimator=est)
            results[method] = (res, est, summary)
        models = {
            "identified (smoother)": results["smoother"][0],
            "decoupled LS (baseline)": results["ls-sg"][0].estimate,
            "nominal URDF": nominal_model(robot),
            "true parameters (floor)": p_true,
        }
        floors = {
            w: floating_heldout_report(
                p_true, robot, log_held, window_s=w, contact_frames=feet, contact_radius=radius, mode="forces"
            )["overall"]
            for w in WINDOWS
        }
        window = min(floors, key=floors.get)
        rows = []
        for label, m in models.items():
            rep = floating_heldout_report(
                m, robot, log_held, window_s=window, contact_frames=feet, contact_radius=radius, mode="forces"
            )
            cc = floating_heldout_report(
                m,
                robot,
                log_held,
                window_s=window,
                contact_frames=feet,
                contact_radius=radius,
                mode="contact-consistent",
            )
            rows.append(
                {
                    "model": label,
                    "held-out rel. RMSE (measured forces)": rep["overall"],
                    "ratio to floor": rep["overall"] / floors[window],
                    "contact-consistent error": cc["overall"],
                }
            )
        table = pd.DataFrame(rows)
        s = results["smoother"][2]
        fb = s["floating_base"]
        sm = results["smoother"][1]
        ang, pos = base_pose_errors(train.q_pin[sm._idx], sm.state_["q"])
        m_sm = fb["total_mass_estimate"]
        m_ls = float(np.sum(results["ls-sg"][0].estimate[: 10 * robot.n_bodies : 10]))
        reps = {
            label: floating_heldout_report(
                models[label],
                robot,
                log_held,
                window_s=window,
                contact_frames=feet,
                contact_radius=radius,
                mode="forces",
            )
            for label in ("identified (smoother)", "decoupled LS (baseline)", "nominal URDF")
        }
        rep = reps["identified (smoother)"]
        keep = np.asarray(rep["t"]) <= rep["t"][0] + 3.0
        rows_used = np.asarray(rep["rows"])[keep]
        preds = {label: np.asarray(r["tau"])[keep] for label, r in reps.items()}
        plot_efforts(
            np.asarray(rep["t"])[keep],
            np.asarray(log_held.tau)[rows_used],
            preds,
            list(robot.joint_names),
            tmp / "heldout_efforts.png",
            units=joint_units(robot),
            title=f"{robot.name}: held-out efforts, measured vs predicted with the measured contact forces",
        )
        c = s["constraints"]
        lines = [
            f"# fg-sysid demo: {robot.name} (floating base, MuJoCo)",
            "",
            f"- training log: stance sway, {duration:g} s at {rate:g} Hz; held-out log: a sway of another "
            f"amplitude, same true robot (URDF inertias perturbed, joint dry friction, damping, armature; "
            f"seed {seed}); noise std {noise:g} on q [rad], v [rad/s], tau [N·m], gyro [rad/s], "
            f"10× on the accelerometer [m/s²]",
            "- identification uses encoders, efforts, IMU, base pose and contact flags — not the contact "
            "forces",
            f"- smoother: {s['knots']} knots, {s['iterations']} iterations, {s['seconds']:.3g} s, physically "
            f"consistent: {s['physically_consistent']}",
            f"- total mass: true {m_true:.3f} kg, smoother {m_sm:.3f} kg "
            f"({100 * (m_sm / m_true - 1):+.2f} %), "
            f"decoupled LS {m_ls:.3f} kg ({100 * (m_ls / m_true - 1):+.2f} %)",
            f"- smoothed base trajectory vs truth: orientation max {ang.max():.3f}° (RMS "
            f"{np.sqrt(np.mean(ang**2)):.3f}°), position max {1e3 * pos.max():.2f} mm",
            f"- constraints at the solution: contact position {c['contact_position_max_m']:.2g} m, velocity "
            f"{c['contact_velocity_max_m_per_s']:.2g} m/s, acceleration "
            f"{c['contact_acceleration_max_m_per_s2']:.2g} "
            f"m/s², base-row inverse dynamics {c['inverse_dynamics_base_rows_max']:.2g} N|N·m",
            "",
            "## Held-out effort prediction",
            "",
            "Joint efforts predicted from the held-out log's states (Savitzky–Golay on the configuration "
            f"manifold, window {window * 1e3:.0f} ms: the one that gives the true parameters the smallest "
            "error) and its measured contact forces, against the measured efforts; *floor* = the true "
            "parameters through the same prediction (soft contacts, dry friction and rolling feet are not "
            "in the rigid-body model). The contact-consistent error needs no forces "
            "(docs/floating-prediction.md).",
            "",
            markdown_table(table),
            "",
            "![held-out efforts](heldout_efforts.png)",
            "",
            "Reports: [smoother](identify/report.md), [decoupled LS](identify-ls-sg/report.md). Re-run: "
            f"`fg-sysid predict {out_path / 'identify'} {out_path / 'heldout' / 'log.parquet'} "
            "--out pred.csv`.",
            "",
        ]
        (tmp / "report.md").write_text("\n".join(lines))
    click.echo(
        f"held-out effort relative RMSE, {robot.name} (MuJoCo, {duration:g} s at {rate:g} Hz, "
        f"noise {noise:g}):"
    )
    w = max(len(r["model"]) for r in rows)
    for r in rows:
        click.echo(
            f"  {r['model']:<{w}s}  {r['held-out rel. RMSE (measured forces)']:8.4f}  "
            f"({r['ratio to floor']:.2f}x floor)"
        )
    click.echo(
        f"total mass error: smoother {100 * (m_sm / m_true - 1):+.2f} %, "
        f"decoupled {100 * (m_ls / m_true - 1):+.2f} %;"
        f" base orientation error max {ang.max():.3f}°"
    )
    click.echo(
        f"wrote {out} (report.md, heldout_efforts.png, identify/, identify-ls-sg/) in "
        f"{time.perf_counter() - t_all:.1f} s"
    )
    return table
