"""``fg-sysid identify``: physical parameters (and the smoothed trajectory) from a log."""

from __future__ import annotations

import math
import time

import click
import numpy as np

from .actuation_options import FIT_ACTUATION_HELP, annotate_actuation, parse_fit_actuation  # issue 9
from .common import atomic_output_dir, echo_err, fail, main
from .data_options import (  # issue 14: ROS bags, degenerate-data checks
    allow_prior_option,
    annotate_summary,
    bag_options,
    loader_kwargs,
    run_data_checks,
    write_prior_answer,
)
from .effort_timing_options import effort_timing_options, parse_effort_timing  # issues 11 + 9
from .outputs import write_identification

METHODS = ("smoother", "ls-sg", "energy-ls")  # energy-ls: issue 12 hook
INERTIAS = ("log-cholesky", "exponential-eigenvalue", "raw")
FRICTIONS = ("coulomb-viscous", "coulomb-viscous-scale", "coulomb-viscous-lead", "soft-dry", "stribeck6",
             "auto")  # auto: issue 9 item 3; the lead laws: issue 9 session 10
#: --acceleration-process when not given (smoother, fixed-base open chains; issue 9 session 9, `jerk_auto`)
ACCELERATION_PROCESS_DEFAULT = "auto"


# ---------------------------------------------------------------------------------------------- library part
def load_inputs(log_path, robot_source):
    """(robot, log) with joints absent from the log locked; bad input -> `fail` (exit 2)."""
    from ..datasets.io import LogError, load_log_for_robot
    from ..robots import RobotError

    try:
        return load_log_for_robot(log_path, robot_source, **loader_kwargs())  # issue 14: ROS bag options
    except (LogError, RobotError, FileNotFoundError) as e:
        fail(str(e))


def run_identification(robot, log, method: str = "smoother", options: dict | None = None,
                       verbose: bool = True):
    """Run one estimator on ``log``, fixed or floating base. Returns ``(result, sg_filter, estimator)``:
    an `IdentificationResult` (smoother) or a baseline result; the SG filter {window_s, polyorder} chosen
    on this log (fixed base; None for floating bases, whose writer chooses it); the fitted estimator.
    ``options``: the smoother's keyword arguments (floating-base ones only for floating robots).
    Raises EstimationError / ValueError on failure."""
    options = {k: v for k, v in (options or {}).items() if v is not None}
    vs = options.get("friction_velocity_scale", 0.05)
    friction = options.get("friction", "coulomb-viscous")
    if method == "smoother":
        if robot.floating_base:
            from ..estimation.floating_smoother import FloatingBaseSmoother as Smoother
        else:
            from ..estimation.smoother import JointSmoother as Smoother
        sm = Smoother(robot, verbose=verbose, **options).fit(log)
        return sm.result_, (None if robot.floating_base else dict(sm.init_filter_)), sm
    if method == "ls-sg":
        if friction != "coulomb-viscous":
            raise ValueError(f"--method ls-sg supports --friction coulomb-viscous only, not {friction!r}")
        if robot.floating_base:
            from ..estimation.floating_baseline import DecoupledFloatingBaseLS
            from ..estimation.floating_smoother import full_configuration

            if log.base_pos is None or log.base_quat is None:
                raise ValueError("the decoupled baseline needs the base pose (base.pos.*, base.quat.*) in "
                                 "the log")
            if not log.contacts:
                raise ValueError("the decoupled baseline needs contact flags (contact.<frame> columns)")
            tau = np.nan_to_num(np.asarray(log.tau, float))
            est = DecoupledFloatingBaseLS(velocity_scale=vs).fit(full_configuration(log, robot), log.t, tau,
                                                                 log.contacts, robot)
            return est.result_, None, est
        from ..estimation.baseline import LeastSquaresSG

        est = LeastSquaresSG(velocity_scale=vs, n_jobs=options.get("n_jobs")).fit(log, robot)
        res = est.result_
        filt = {"window_s": float(res.filter["window_s"]), "polyorder": int(res.filter["polyorder"])}
        return res, filt, est
    if method == "energy-ls" and not robot.floating_base:  # energy-regressor baseline (issue 12)
        from ..estimation.energy_baseline import run_energy_ls

        res, filt = run_energy_ls(robot, log, friction, vs, verbose=verbose)
        return res, filt, None
    raise ValueError(f"unknown method {method!r} for a {'floating' if robot.floating_base else 'fixed'}-base "
                     f"robot; choices: {', '.join(METHODS if not robot.floating_base else METHODS[:2])}")


# ---------------------------------------------------------------------------------------------- command
def _positive(name, val, allow_none=True):
    if val is None and allow_none:
        return
    if not (math.isfinite(val) and val > 0):
        fail(f"{name} must be a positive number, got {val}")


@main.command("identify")
@click.argument("log_path", metavar="LOG", type=click.Path())  # issue 14: a rosbag2 bag is a directory
@click.option("--robot", "robot_source", required=True,
              help="Catalog name (z1, panda, tiago, ...) or URDF path.")
@click.option("--out", "out", required=True, type=click.Path(file_okay=False),
              help="Output directory (written atomically; replaced if it exists).")
@click.option("--method", type=click.Choice(METHODS), default="smoother", show_default=True,
              help="smoother = joint state-parameter factor-graph smoother; ls-sg = classical least squares "
                   "on Savitzky-Golay differentiated signals (baseline); energy-ls = work-energy regressor "
                   "least squares, physically consistent (baseline, no accelerations).")
@click.option("--knot-stride", type=int, default=None,
              help="One smoother knot every N log samples [samples]. Default: 1 for fixed-base robots; for "
                   "floating bases from the log (10x the joints' bandwidth, at most 10 ms, a quarter of the "
                   "shortest contact phase; reported in summary.json knot_spacing).")
@click.option("--sigma-q", type=float, default=None,
              help="Position noise std [rad | m]; default: estimated from the log.")
@click.option("--sigma-v", type=float, default=None,
              help="Velocity noise std [rad/s | m/s]; default: estimated from the log.")
@click.option("--sigma-tau", type=float, default=None,
              help="Effort noise std [N·m | N]; default: estimated from the log (then re-estimated from the "
                   "inverse-dynamics residuals).")
@click.option("--inertia", type=click.Choice(INERTIAS), default="log-cholesky", show_default=True,
              help="Inertial parameterization of the smoother (ls-sg is always raw).")
@click.option("--friction", type=click.Choice(FRICTIONS), default=None,
              help="Friction model. Default: auto for the smoother on fixed-base robots = coulomb-viscous-"
                   "lead (fc·tanh((v + T·a)/vs) + fv·v: vs and the lead T [s] estimated per joint, T prior "
                   "0) or stribeck6, chosen by blocked cross-validation on the training log; stribeck6 "
                   "also where the log's velocities are too noisy for that regression to see a Stribeck "
                   "peak (summary.json friction_selection says which and why; docs/friction-selection.md; "
                   "closed loops, --energy and prior-only logs: coulomb-viscous-scale = the same at T = 0); "
                   "soft-dry = fc·clip((v + T·a)/vs, ±1) + fv·v, MuJoCo's frictionloss constraint exactly; "
                   "coulomb-viscous (vs fixed) for floating bases and the baselines.")
@click.option("--friction-velocity-scale", type=float, default=0.05, show_default=True,
              help="vs in tau_f = fc·tanh(v/vs) + fv·v [rad/s].")
@click.option("--max-iterations", type=int, default=30, show_default=True,
              help="Levenberg-Marquardt iterations per round [count].")
@click.option("--contact-radius", type=float, default=None,
              help="Floating base: foot sphere radius [m] (contact point below the foot frame); default: the "
                   "robot spec's.")
@click.option("--total-mass", type=float, default=None,
              help="Floating base: known total mass [kg] as a prior (see --total-mass-std).")
@click.option("--total-mass-std", type=float, default=0.0, show_default=True,
              help="Floating base: std of the total-mass prior [kg]; 0 = hard constraint.")
@click.option("--symmetry", type=click.Choice(("auto", "joints", "all", "none")), default="auto",
              show_default=True,
              help="Floating base: left-right symmetry prior of the robot spec's mirrored limbs: joints = "
                   "friction and armature of mirrored joints, all = also the inertias of mirrored bodies, "
                   "auto = joints when some foot never leaves the ground in the log, else none.")
@click.option("--symmetry-std", type=float, default=0.3, show_default=True,
              help="Floating base: relative std of the symmetry prior; 0 = hard constraint.")
@click.option("--constraints", type=click.Choice(("hard", "soft")), default="hard", show_default=True,
              help="Floating base: contact and base-wrench constraints to 1e-6 (augmented Lagrangian) or as "
                   "soft penalties.")
@click.option("--process-noise", type=click.Choice(("unprojected", "projected")), default="unprojected",
              show_default=True, help="Floating base: process noise projected onto the contact null space "
                                      "(paper 004 eqs. 36-37) or not.")
@click.option("--impacts/--no-impacts", default=False, show_default=True,
              help="Floating base: reset maps with impulses at touchdowns (paper 004 eqs. 7-11) instead of "
                   "the plain integration factor (stiff contacts).")
@click.option("--touchdown-settle", type=float, default=0.0, show_default=True,
              help="Floating base: stance constraints of a foot start this long after its contact flag turns "
                   "on [s] (flags that switch on while the foot still moves).")
@click.option("--use-forces/--no-use-forces", default=True, show_default=True,
              help="Floating base: use measured contact forces (force.<frame>.*) as factors when the log "
                   "has them.")
@click.option("--energy/--no-energy", default=False, show_default=True,
              help="Smoother: a work-energy observation per knot interval (paper 004 eq. 63; needs every "
                   "effort measured; floating bases: intervals without a contact change; docs/energy.md).")
@click.option("--dynamics", type=click.Choice(["inverse", "forward"]), default="inverse", show_default=True,
              help="Smoother, fixed base: inverse = M a + h + τ_f = τ̂ per knot (paper 004 eq. 2); forward = "
                   "a = ABA(q, v, τ̂) per knot, the formulation paper 004 Fig. 10 compares with (issue 12).")
@click.option("--fit-actuation", "fit_actuation", default=None, metavar="PARTS",
              help=FIT_ACTUATION_HELP)  # issue 9 item 2
@click.option("--quiet", is_flag=True, help="No per-iteration progress on stderr.")
@bag_options  # issue 14
@allow_prior_option  # issue 14
@click.option("--robust", type=click.Choice(("none", "huber")), default="none", show_default=True,
              help="Smoother, fixed base: Huber's loss on the effort rows (k = 1.345 σ, through the "
                   "reweighting rounds) for logs with effort outliers (issue 9; docs/out-of-class.md).")
@click.option("--damping", type=click.Choice(("line-search", "trust-region", "hybrid")),
              default="line-search", show_default=True,
              help="Smoother, fixed base: how Levenberg–Marquardt damps its steps. line-search (default): "
                   "Gauss–Newton steps halved, λ raised only when 1/64 of a step fails; trust-region: "
                   "Nielsen's gain-ratio λ; hybrid: gain-ratio λ carried across reweighting rounds, steps "
                   "halved where the model overshoots and λ raised when only short steps lower the cost "
                   "(docs/damping.md).")
@click.option("--theta-steps", "theta_steps", type=click.Choice(("physical", "additive")),
              default="physical", show_default=True,
              help="Smoother, fixed base: how a solver step moves θ. physical (default): each body's "
                   "inertial parameters and each armature step along a straight line in physical units, "
                   "mapped back to the consistent parameterization (the dynamics are linear in them; fewer "
                   "shortened steps); additive: θ + δθ (before session 12; docs/damping.md).")
@click.option("--stick-weights", "stick_weights", type=click.Choice(("none", "velocity-noise", "law-width")),
              default="none", show_default=True,
              help="Smoother, fixed base: widen the effort noise of samples near velocity reversals by the "
                   "friction law's error there (dry friction with stiction: no smooth law predicts the stick "
                   "torque). velocity-noise: width from the velocity noise; law-width: from the tanh width "
                   "(docs/out-of-class.md, stick phases).")
@click.option("--acceleration-process", "acceleration_process", type=click.Choice(("off", "on", "auto")),
              is_flag=False, flag_value="on", default=None, metavar="[off|on|auto]",
              help="Smoother, fixed-base open chains: white-jerk rows between the knots' accelerations "
                   "(issue 9, session 9): without them the accelerations' highest frequencies absorb "
                   "the effort noise (noisy or real logs); they smooth fast true changes of the acceleration "
                   "(sharp friction at low noise). on (the bare flag): always; auto: fit without, refit with "
                   "them only if the fitted accelerations' Nyquist-band RMS exceeds the motion's RMS "
                   "acceleration (summary.json noise.acceleration_process_auto); off: never. Default: "
                   f"{ACCELERATION_PROCESS_DEFAULT} (docs/damping.md).")
@click.option("--jobs", "jobs", type=click.Choice(("auto", "1", "2")), default="auto", show_default=True,
              help="Cores of one fit (issue 9, session 13): auto = those this process may use, at most 2 "
                   "(the linear solves eliminate the knots from both ends at once; a worker process shares "
                   "the per-knot Pinocchio loop); 1 = one core (several fits side by side). "
                   "docs/performance.md.")
@effort_timing_options  # issues 11 + 9: held efforts re-timed to the knots
def identify_cmd(log_path, robot_source, out, method, knot_stride, sigma_q, sigma_v, sigma_tau, inertia,
                 friction, friction_velocity_scale, max_iterations, contact_radius, total_mass,
                 total_mass_std,
                 symmetry, symmetry_std, constraints, process_noise, impacts, touchdown_settle, use_forces,
                 energy, dynamics, fit_actuation, quiet, robust="none", damping="line-search",
                 stick_weights="none", acceleration_process=None, effort_timing="sample",
                 effort_hold_period=None, theta_steps="physical", jobs="auto"):
    """Identify ROBOT's physical parameters from LOG (CSV or Parquet, t/q.*/v.*/tau.* columns, or a ROS
    bag: rosbag2 directory, .db3, .mcap, ROS 1 .bag; see docs/data-format.md).

    Robot joints without a q.<joint> column in LOG are locked at neutral (with a warning). DIR (--out)
    receives:

    \b
      parameters.csv      name, group, estimate, std, prior_mean, prior_std, std_ratio (SI units:
                          kg, kg·m, kg·m², N·m, N·m·s/rad); std_ratio = posterior/prior std
                          (near 0: set by the log, near 1: set by the prior). ls-sg: prior_mean is
                          the URDF nominal, prior_std and std_ratio are NaN.
      trajectory.parquet  t [s], q.<j> [rad], v.<j> [rad/s], a.<j> [rad/s²]: the smoother's knots;
                          for ls-sg the Savitzky-Golay smoothed q and derivatives (CV-chosen window).
      summary.json        iterations, final cost, knots, seconds per iteration, converged, method, log...
      model.json          what 'fg-sysid predict' needs (robot, locked joints, layout, theta, estimate).
      report.md           parameter excerpt, convergence.png, training_efforts.png.
      report.html         self-contained page: efforts and residuals, friction curves, identified vs
                          prior, identifiability, convergence (docs/report.md).
    """
    _positive("--friction-velocity-scale", friction_velocity_scale, allow_none=False)
    for name, val in (("--sigma-q", sigma_q), ("--sigma-v", sigma_v), ("--sigma-tau", sigma_tau)):
        _positive(name, val)
    if knot_stride is not None and knot_stride < 1:
        fail(f"--knot-stride must be >= 1, got {knot_stride}")
    if max_iterations < 1:
        fail(f"--max-iterations must be >= 1, got {max_iterations}")
    robot, log = load_inputs(log_path, robot_source)
    checks = run_data_checks(robot, log, method, friction_velocity_scale)  # issue 14: exit 2 or the prior
    if friction is None:
        # the smoother on a fixed base: the law chosen on the log (session 8; docs/friction-selection.md)
        friction = ("auto" if method == "smoother" and not robot.floating_base else "coulomb-viscous")
    if friction == "auto" and (method != "smoother" or robot.floating_base):  # issue 9 item 3
        fail("--friction auto applies to the smoother on fixed-base robots")
    if friction == "auto" and checks.prior_only:  # nothing to select on: the default law
        friction = "coulomb-viscous-scale"
    options = {"knot_stride": knot_stride, "sigma_q": sigma_q, "sigma_v": sigma_v, "sigma_tau": sigma_tau,
               "inertia": inertia, "friction": friction, "friction_velocity_scale": friction_velocity_scale,
               "max_iterations": max_iterations}
    if energy and method != "smoother":
        fail("--energy applies to the smoother")
    if energy:
        options["energy"] = True
    if dynamics == "forward":  # issue 12: paper 004 Fig. 10's comparison formulation
        if robot.floating_base or method != "smoother":
            fail("--dynamics forward applies to the smoother on fixed-base robots")
        options["dynamics"] = "forward"
    actuation = parse_fit_actuation(fit_actuation, method, robot.floating_base, energy)  # issue 9 item 2
    if actuation:
        options["fit_actuation"] = actuation
    if robust != "none":  # issue 9 item 4 (session 7)
        if robot.floating_base or method != "smoother":
            fail("--robust huber applies to the smoother on fixed-base robots")
        options["robust"] = robust
    if damping != "line-search":  # issue 9 (sessions 7-8): convergence on real logs
        if robot.floating_base or method != "smoother":
            fail(f"--damping {damping} applies to the smoother on fixed-base robots")
        options["strategy"] = damping
    if jobs != "auto":  # issue 9 (session 13): two cores by default
        if method == "energy-ls" or (robot.floating_base and method == "ls-sg"):
            fail(f"--jobs {jobs} applies to the smoother and the ls-sg baseline of fixed-base robots")
        options["n_jobs"] = int(jobs)
    if theta_steps != "physical":  # issue 9 (session 12): `ParameterLayout.retract` or θ + δθ
        if robot.floating_base or method != "smoother":
            fail(f"--theta-steps {theta_steps} applies to the smoother on fixed-base robots")
        options["theta_steps"] = theta_steps
    if stick_weights != "none":  # issue 9 (session 8): stick phases, estimation/arm_stick.py
        if robot.floating_base or method != "smoother" or robot.loops:
            fail(f"--stick-weights {stick_weights} applies to the smoother on fixed-base open-chain robots")
        options["stick_weights"] = stick_weights
    open_chain = not robot.floating_base and method == "smoother" and not robot.loops
    if acceleration_process is None:  # issue 9 (session 9): the default where the rows apply
        acceleration_process = ACCELERATION_PROCESS_DEFAULT if open_chain else "off"
    elif acceleration_process != "off" and not open_chain:  # issue 9 (session 9)
        fail(f"--acceleration-process {acceleration_process} applies to the smoother on fixed-base "
             "open-chain robots")
    if acceleration_process != "off":  # estimation/acceleration_process.py, estimation/jerk_auto.py
        options["acceleration_process"] = {"on": True, "auto": "auto"}[acceleration_process]
    parse_effort_timing(options, effort_timing, effort_hold_period, method, robot)  # issues 11 + 9
    if robot.floating_base:
        _check_floating_options(contact_radius, total_mass, total_mass_std, symmetry_std, touchdown_settle)
        options.update(contact_radius=contact_radius, total_mass=total_mass, total_mass_std=total_mass_std,
                       symmetry={"all": "robot", "joints": "joints", "none": None, "auto": "auto"}[symmetry],
                       symmetry_std=symmetry_std, constraints=constraints, process_noise=process_noise,
                       impacts=impacts, touchdown_settle_s=touchdown_settle, use_forces=use_forces)
    else:
        options["knot_stride"] = 1 if knot_stride is None else knot_stride
    if checks.prior_only:  # issue 14: --allow-prior on a log that cannot determine the parameters
        if robot.floating_base:
            fail("--allow-prior is not available for floating-base robots: " + "; ".join(checks.problems))
        return write_prior_answer(out, robot, log, log_path, robot_source, options, checks,
                                  write_identification)
    from ..estimation.smoother import EstimationError

    t0 = time.perf_counter()
    if not quiet:
        echo_err(f"identifying {robot.name} ({'floating base, ' if robot.floating_base else ''}"
                 f"{robot.n_joints} joints) from {log_path}: {log.n_samples} samples, {log.duration:.3g} s, "
                 f"method {method}")
    fit_options = options if method == "smoother" else {
        k: options.get(k) for k in ("friction", "friction_velocity_scale")}
    try:
        result, sg_filter, est = run_identification(robot, log, method, fit_options, verbose=not quiet)
    except np.linalg.LinAlgError as e:
        fail(f"{method} estimation failed with a numerical error inside the estimator ({e}); "
             + ("try --inertia exponential-eigenvalue or --method ls-sg" if method == "smoother" else
                "the log may not excite the robot enough"))
    except (EstimationError, ValueError) as e:
        fail(str(e))
    if method != "smoother":
        options["inertia"] = "raw"
    with atomic_output_dir(out) as tmp:
        summary = write_identification(tmp, result, sg_filter, robot, log, log_path, robot_source, method,
                                       options, time.perf_counter() - t0, estimator=est)
        annotate_summary(tmp, log, checks)  # issue 14
        if actuation:  # issue 9 item 2
            annotate_actuation(tmp, result)
    msg = (f"wrote {out}: {len(summary.get('joints', []))} joints, {summary.get('parameters')} parameters, "
           f"method {method}, {summary.get('iterations')} iterations, converged: {summary.get('converged')}, "
           f"physically consistent: {summary.get('physically_consistent')}")
    if "constraints" in summary:
        msg += (f", total mass {summary['floating_base']['total_mass_estimate']:.3f} kg, constraints "
                f"satisfied: {summary['constraints']['satisfied']}")
    click.echo(msg + f", {summary['wall_seconds']:.1f} s")


def _check_floating_options(contact_radius, total_mass, total_mass_std, symmetry_std, touchdown_settle):
    for name, val in (("--contact-radius", contact_radius), ("--total-mass", total_mass)):
        if val is not None and not (math.isfinite(val) and val >= 0):
            fail(f"{name} must be a non-negative number, got {val}")
    for name, val in (("--total-mass-std", total_mass_std), ("--symmetry-std", symmetry_std),
                      ("--touchdown-settle", touchdown_settle)):
        if not (math.isfinite(val) and val >= 0):
            fail(f"{name} must be >= 0, got {val}")
