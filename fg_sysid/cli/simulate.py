"""``fg-sysid simulate``: synthetic identification data with known truth."""

from __future__ import annotations

import math

import click

from .common import atomic_output_dir, fail, load_robot_or_fail, main

#: Motions of the floating-base (MuJoCo) simulator (kept here so --help works without mujoco).
MOTIONS = ("sway", "stand", "trot", "steps")


@main.command("simulate")
@click.option("--robot", "robot_name", required=True, help="Catalog name (z1, panda, ...) or URDF path.")
@click.option("--duration", type=float, default=20.0, show_default=True, help="Duration [s].")
@click.option("--rate", type=float, default=1000.0, show_default=True, help="Sample rate [Hz].")
@click.option("--noise", type=float, default=0.01, show_default=True,
              help="Std of the Gaussian noise on q [rad], v [rad/s] and tau [N·m]; 0 = exact data.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the truth, motion and noise.")
@click.option("--trajectory", "trajectory_path", type=click.Path(dir_okay=False), default=None,
              help="Fourier coefficient CSV (joint,f_hz,q0,a1..aL,b1..bL); default: random, from --seed.")
@click.option("--friction-velocity-scale", type=float, default=0.05, show_default=True,
              help="vs in tau_f = fc·tanh(v/vs) + fv·v [rad/s].")
@click.option("--simulator", type=click.Choice(("rk4", "mujoco")), default="rk4", show_default=True,
              help="Fixed-base robots: the project's RK4 simulator (smooth friction, see "
                   "--friction-model) or MuJoCo (dry friction with stiction: frictionloss, damping, "
                   "armature; 4 kHz physics, needs the sim extra). Out-of-class truth either way except rk4 "
                   "with the defaults.")
@click.option("--friction-model", type=click.Choice(("coulomb-viscous", "stribeck")),
              default="coulomb-viscous", show_default=True,
              help="RK4 truth friction: fc·tanh(v/vs) + fv·v, or Stribeck (fc + (fs-fc)·exp(-(v/v_st)²))·"
                   "tanh(v/vs) + fv·v with fs = --stribeck-ratio·fc.")
@click.option("--stribeck-ratio", type=float, default=1.5, show_default=True,
              help="Breakaway / Coulomb friction ratio fs/fc of --friction-model stribeck.")
@click.option("--stribeck-velocity", type=float, default=0.1, show_default=True,
              help="Stribeck velocity v_st [rad/s] of --friction-model stribeck.")
@click.option("--control-rate", type=float, default=None,
              help="Controller rate [Hz], an integer multiple of --rate; commands are held zero-order "
                   "between log samples [default: --rate for rk4, the 4 kHz physics rate for mujoco].")
@click.option("--effort-gain-error", type=float, default=0.0, show_default=True,
              help="Logged efforts read g·tau with a per-joint gain g ~ U(1-e, 1+e) (e.g. 0.1 for ±10 %).")
@click.option("--effort-offset", type=float, default=0.0, show_default=True,
              help="Per-joint effort offset ~ U(-1, 1)·this·(the joint's peak rigid-body torque).")
@click.option("--encoder-resolution", type=float, default=0.0, show_default=True,
              help="Encoder step [rad]: logged q rounded to multiples of it (0 = no quantization).")
@click.option("--motion", type=click.Choice(MOTIONS), default=None,
              help="Floating-base robots only (MuJoCo simulator): body sway, still stance, trot in place "
                   "or steps (a static step in place lifting one foot at a time, 2.4 s per foot: the "
                   "training log to record, since every leg swings) [default: sway]. Rejected for "
                   "fixed-base robots.")
@click.option("--out", "out", required=True, type=click.Path(file_okay=False),
              help="Output directory (replaced atomically).")
def simulate_cmd(robot_name, duration, rate, noise, seed, trajectory_path, friction_velocity_scale, simulator,
                 friction_model, stribeck_ratio, stribeck_velocity, control_rate, effort_gain_error,
                 effort_offset, encoder_resolution, motion, out):
    """Simulate ROBOT tracking an excitation trajectory and write DIR (--out) with:

    \b
      log.parquet               noisy log (t, q.*, v.*, tau.*) in the log schema
      truth.json                true parameters (inertias, friction, armature) and settings
      truth_trajectory.parquet  noise-free t, q.*, v.*, a.*, tau.*

    See docs/data-format.md for the formats and the zero-order-hold time convention.

    Out-of-class truth for fixed-base arms (docs/out-of-class.md): --friction-velocity-scale below the
    estimator's 0.05 rad/s, --friction-model stribeck, --simulator mujoco, --control-rate,
    --effort-gain-error, --effort-offset, --encoder-resolution; truth.json lists every effect used
    (out_of_class) and the sensor gains/offsets.

    Floating-base robots (e.g. b1) are simulated in MuJoCo (needs the ``sim`` extra) standing on
    their feet under joint PD control with --motion; the log then also has the IMU (gyro σ = noise,
    accelerometer σ = 10·noise), base pose, contact and contact-force columns, and the truth
    trajectory the noise-free base pose, joint q/v/tau and contact forces. 1/rate must be a
    multiple of the 0.5 ms MuJoCo step; --trajectory is rejected and --friction-velocity-scale
    ignored (MuJoCo's Coulomb friction is a dry-friction constraint).

    Robots with closed loops (fourbar, b1_leg_fourbar, b1_fourbar; docs/loops.md): --simulator rk4 writes
    the exact in-class log u = Gᵀ(inverse dynamics), --simulator mujoco the MuJoCo truth with loop
    equality constraints (--friction-model stribeck adds a Stribeck hump, --control-rate sets the
    controller); floating looped robots step in place (--motion steps | stand). The log has the encoded
    joints only and efforts of the actuated joints only.
    """
    from ..datasets.excitation import FourierTrajectory, TrajectoryError
    from ..datasets.simulate import SimulationError, simulate, write_simulation

    for name, val in (("--duration", duration), ("--rate", rate)):
        if not (math.isfinite(val) and val > 0):
            fail(f"{name} must be a positive number, got {val}")
    if not (math.isfinite(noise) and noise >= 0):
        fail(f"--noise must be >= 0, got {noise}")
    if not (math.isfinite(friction_velocity_scale) and friction_velocity_scale > 0):
        fail(f"--friction-velocity-scale must be > 0, got {friction_velocity_scale}")
    robot = load_robot_or_fail(robot_name)
    if getattr(robot, "loops", ()):  # closed loops (issue 11, docs/loops.md)
        _simulate_looped(robot, duration, rate, noise, seed, simulator, friction_model, stribeck_ratio,
                         stribeck_velocity, control_rate, effort_gain_error, effort_offset,
                         encoder_resolution, motion, trajectory_path, out)
        return
    effects = _effects_or_fail(robot, simulator, friction_model, stribeck_ratio, stribeck_velocity,
                               control_rate, effort_gain_error, effort_offset, encoder_resolution, rate)
    if robot.floating_base:
        _simulate_floating(robot, duration, rate, noise, seed, trajectory_path, motion or "sway", out)
        return
    if motion is not None:
        fail(f"--motion is only for floating-base robots (robot {robot.name!r} has a fixed base)")
    if simulator == "mujoco" and friction_velocity_scale != 0.05:
        fail("--friction-velocity-scale is for --simulator rk4 (MuJoCo's friction is dry friction)")
    trajectory = None
    if trajectory_path is not None:
        try:
            trajectory = FourierTrajectory.from_csv(trajectory_path)
        except TrajectoryError as e:
            fail(str(e))
    try:
        if simulator == "mujoco":
            from ..datasets.mujoco_sim import simulate_arm

            result = simulate_arm(robot, duration, rate, noise, seed, trajectory=trajectory, effects=effects)
        else:
            result = simulate(robot, duration, rate, noise, seed, trajectory=trajectory,
                              friction_velocity_scale=friction_velocity_scale, effects=effects)
    except (SimulationError, TrajectoryError) as e:
        fail(str(e))
    with atomic_output_dir(out) as tmp:
        write_simulation(result, tmp)
    oc = result.truth.get("out_of_class") or []
    click.echo(f"wrote {out}: {result.log.n_samples} samples of {robot.name} "
               f"({len(robot.joint_names)} joints, {simulator}), noise {noise}, seed {seed}; "
               + ("in-class truth" if not oc else "out-of-class truth: " + "; ".join(oc)))


def _effects_or_fail(robot, simulator, friction_model, stribeck_ratio, stribeck_velocity, control_rate,
                     effort_gain_error, effort_offset, encoder_resolution, rate):
    """The `Effects` of the out-of-class options; a clear error (exit 2) naming the bad option."""
    from ..datasets.simulate import Effects, SimulationError

    for name, val in (("--stribeck-ratio", stribeck_ratio), ("--stribeck-velocity", stribeck_velocity)):
        if not (math.isfinite(val) and val > 0):
            fail(f"{name} must be > 0, got {val}")
    for name, val in (("--effort-gain-error", effort_gain_error), ("--effort-offset", effort_offset),
                      ("--encoder-resolution", encoder_resolution)):
        if not (math.isfinite(val) and val >= 0):
            fail(f"{name} must be >= 0, got {val}")
    if effort_gain_error >= 1:
        fail(f"--effort-gain-error must be < 1 (gains in (0, 2)), got {effort_gain_error}")
    if control_rate is not None and not (math.isfinite(control_rate) and control_rate > 0):
        fail(f"--control-rate must be a positive rate [Hz], got {control_rate}")
    effects = Effects(friction=friction_model, stribeck_ratio=stribeck_ratio,
                      stribeck_velocity=stribeck_velocity, control_rate=control_rate,
                      effort_gain_error=effort_gain_error, effort_offset=effort_offset,
                      encoder_resolution=encoder_resolution)
    if robot.floating_base:
        if simulator != "rk4" or effects != Effects():
            fail(f"robot {robot.name!r} has a floating base: --simulator, --friction-model, --control-rate, "
                 "--effort-gain-error, --effort-offset and --encoder-resolution are for fixed-base arms")
        return effects
    if simulator == "mujoco" and friction_model != "coulomb-viscous":
        fail("--friction-model stribeck is for --simulator rk4 (MuJoCo's friction is dry friction)")
    if simulator == "rk4":
        try:
            effects.check(rate)
        except SimulationError as e:
            fail(f"--control-rate: {e}")
    return effects


def _simulate_floating(robot, duration, rate, noise, seed, trajectory_path, motion, out):
    if trajectory_path is not None:
        fail(f"--trajectory is not supported for floating-base robot {robot.name!r} (use --motion)")
    if seed < 0:
        fail(f"--seed must be >= 0, got {seed}")
    try:
        from ..datasets.mujoco_sim import MujocoSimError, simulate_stance, write_mujoco_simulation
    except ImportError as e:
        fail(f"robot {robot.name!r} has a floating base: its simulator needs MuJoCo ({e}); "
             "install the `sim` extra (pip install 'fg-sysid[sim]')")
    try:
        result = simulate_stance(robot, duration=duration, rate=rate, seed=seed, noise=noise,
                                 motion=motion, randomize=True)
    except MujocoSimError as e:
        fail(str(e))
    with atomic_output_dir(out) as tmp:
        write_mujoco_simulation(result, tmp)
    click.echo(f"wrote {out}: {len(result.t)} samples of {robot.name} (floating base, MuJoCo, "
               f"motion {motion}, {len(robot.joint_names)} joints), noise {noise}, seed {seed}")


def _simulate_looped(robot, duration, rate, noise, seed, simulator, friction_model, stribeck_ratio,
                     stribeck_velocity, control_rate, effort_gain_error, effort_offset, encoder_resolution,
                     motion, trajectory_path, out):
    """`fg-sysid simulate` for robots with closed loops (docs/loops.md)."""
    import json
    from pathlib import Path

    if trajectory_path is not None:
        fail(f"--trajectory is not supported for looped robot {robot.name!r} (random excitation of its "
             f"actuated joints)")
    if effort_gain_error or effort_offset or encoder_resolution:
        fail(f"looped robot {robot.name!r}: --effort-gain-error, --effort-offset and --encoder-resolution "
             f"are not supported")
    if seed < 0:
        fail(f"--seed must be >= 0, got {seed}")
    try:
        from ..datasets import mujoco_loops as ml
        from ..datasets.simulate import SimulationError
    except ImportError as e:
        fail(f"looped robot {robot.name!r}: its simulators need MuJoCo ({e}); install the `sim` extra")
    try:
        if robot.floating_base:
            if motion not in (None, "steps", "stand"):
                fail(f"looped floating robot {robot.name!r}: --motion steps or stand, got {motion!r}")
            res, log, viol = ml.simulate_loop_stance(robot, duration, rate, noise, seed,
                                                     motion=motion or "steps")
            with atomic_output_dir(out) as tmp:
                ml.write_loop_log(log, Path(tmp) / "log.parquet")
                (Path(tmp) / "truth.json").write_text(json.dumps(res.truth, indent=1, allow_nan=False) + "\n")
            n, what = len(log.t), f"floating, MuJoCo, motion {motion or 'steps'}"
        else:
            if motion is not None:
                fail(f"--motion is only for floating-base robots (robot {robot.name!r} has a fixed base)")
            if simulator == "mujoco":
                result = ml.simulate_loop_mujoco(
                    robot, duration, rate, noise, seed,
                    control_rate=1000.0 if control_rate is None else control_rate,
                    stribeck_ratio=stribeck_ratio if friction_model == "stribeck" else None,
                    stribeck_velocity=stribeck_velocity)
            else:
                if friction_model != "coulomb-viscous" or control_rate is not None:
                    fail("--friction-model and --control-rate need --simulator mujoco for looped robots")
                result = ml.simulate_loop_inclass(robot, duration, rate, noise, seed)
            with atomic_output_dir(out) as tmp:
                ml.write_loop_simulation(result, tmp)
            n, viol, what = result.log.n_samples, result.closure_violation, simulator
    except (SimulationError, ml.ClosureError) as e:
        fail(str(e))
    click.echo(f"wrote {out}: {n} samples of {robot.name} ({what}), noise {noise}, seed {seed}; "
               f"closure violation {viol:.2e} m")
