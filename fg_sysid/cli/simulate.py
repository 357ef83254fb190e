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
@click.option("--motion", type=click.Choice(MOTIONS), default=None,
              help="Floating-base robots only (MuJoCo simulator): body sway, still stance, trot in place "
                   "or steps (a static step in place lifting one foot at a time, 2.4 s per foot: the "
                   "training log to record, since every leg swings) [default: sway]. Rejected for "
                   "fixed-base robots.")
@click.option("--out", "out", required=True, type=click.Path(file_okay=False),
              help="Output directory (replaced atomically).")
def simulate_cmd(robot_name, duration, rate, noise, seed, trajectory_path, friction_velocity_scale, motion,
                 out):
    """Simulate ROBOT tracking an excitation trajectory and write DIR (--out) with:

    \b
      log.parquet               noisy log (t, q.*, v.*, tau.*) in the log schema
      truth.json                true parameters (inertias, friction, armature) and settings
      truth_trajectory.parquet  noise-free t, q.*, v.*, a.*, tau.*

    See docs/data-format.md for the formats and the zero-order-hold time convention.

    Floating-base robots (e.g. b1) are simulated in MuJoCo (needs the ``sim`` extra) standing on
    their feet under joint PD control with --motion; the log then also has the IMU (gyro σ = noise,
    accelerometer σ = 10·noise), base pose, contact and contact-force columns, and the truth
    trajectory the noise-free base pose, joint q/v/tau and contact forces. 1/rate must be a
    multiple of the 0.5 ms MuJoCo step; --trajectory is rejected and --friction-velocity-scale
    ignored (MuJoCo's Coulomb friction is a dry-friction constraint).
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
    if robot.floating_base:
        _simulate_floating(robot, duration, rate, noise, seed, trajectory_path, motion or "sway", out)
        return
    if motion is not None:
        fail(f"--motion is only for floating-base robots (robot {robot.name!r} has a fixed base)")
    trajectory = None
    if trajectory_path is not None:
        try:
            trajectory = FourierTrajectory.from_csv(trajectory_path)
        except TrajectoryError as e:
            fail(str(e))
    try:
        result = simulate(robot, duration, rate, noise, seed, trajectory=trajectory,
                          friction_velocity_scale=friction_velocity_scale)
    except (SimulationError, TrajectoryError) as e:
        fail(str(e))
    with atomic_output_dir(out) as tmp:
        write_simulation(result, tmp)
    click.echo(f"wrote {out}: {result.log.n_samples} samples of {robot.name} "
               f"({len(robot.joint_names)} joints), noise {noise}, seed {seed}")


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
