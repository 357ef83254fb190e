"""Batch joint state–parameter smoother (paper 004 eq. 1, fixed base).

Unknowns: per knot k the state x_k = (q_k, v_k, a_k) and the global parameter vector θ. The MAP problem

    min  Σ_k ‖q_k ⊖ q̂_k‖²_{Σq} + ‖v_k − v̂_k‖²_{Σv}                        (encoders)
       + Σ_k ‖M(q_k)a_k + h(q_k,v_k) + A a_k + τ_f(v_k) − τ̂_k‖²_{Στ}         (inverse dynamics)
       + Σ_k ‖integration(x_k, x_{k+1})‖²_{Σp}                                (process noise)
       + ‖θ − θ̄‖²_{Σθ}                                                        (parameter prior)

is a `problem.Problem` of four term sets (`terms.encoders`, `terms.velocities`,
`terms.inverse_dynamics`, `terms.integration`, `terms.parameter_prior`) solved by the core's
Levenberg–Marquardt (`solver`, line-search strategy): each iteration linearizes all terms in batch
(one Pinocchio RNEA-derivatives and one regressor call per knot), then solves the arrow-structured
normal equations in O(N) (`linear_solver`). θ's marginal covariance is the inverse Schur complement at
the solution. Noise levels left as None are estimated from the log (`noise`), and the effort noise is
re-estimated from the inverse-dynamics residuals between rounds (iteratively reweighted least squares).
"""

from __future__ import annotations

import sys
import time
import warnings
from dataclasses import dataclass, field

import numpy as np
from threadpoolctl import threadpool_limits

from ..datasets.log import Log
from ..factors.inverse_dynamics import InverseDynamicsResidual
from ..factors.manifold import ConfigurationSpace
from ..layout import ParameterLayout
from ..parameterizations import warn_if_inconsistent
from ..robots import RobotModel
from . import effort_timing, loop_terms, terms
from .effort_quality import HUBER_K, drop_deadband_channels, huber_weights
from .linear_solver import resolve_threads
from .noise import highfreq_noise_std, savgol_derivatives
from .problem import Problem, retract_states
from .process_noise import process_velocity_std
from .result import IdentificationResult
from .solver import EstimationError, LevenbergMarquardt, SolverOptions

#: std [s] of the rows tying consecutive joints' friction leads (``friction_lead="shared"``; 0.1 ms: one T)
LEAD_TIE_STD = 1e-4
#: laws started from the classical fit's (fc, fv) with their shape parameters (vs; the lead T) at the prior
LEAD_OR_SCALE = ("coulomb-viscous-scale", "coulomb-viscous-lead", "soft-dry")

__all__ = ["EstimationError", "JointSmoother", "NoiseLevels"]


@dataclass
class NoiseLevels:
    """Standard deviations used by the factors (per joint arrays)."""

    q: np.ndarray  # rad
    v: np.ndarray | None  # rad/s
    tau: np.ndarray  # N·m
    process_q: np.ndarray  # rad
    process_v: np.ndarray  # rad/s
    source: dict = field(default_factory=dict)
    tau_rms: np.ndarray | None = None  # RMS of the measured efforts, N·m
    tau_cap: np.ndarray | None = None  # upper bound of the re-estimated effort noise, N·m
    process_a: np.ndarray | None = None  # white-jerk acceleration row σ_a, rad/s² per knot step (issue 9)

    def as_dict(self) -> dict:
        d = {k: (None if getattr(self, k) is None else np.asarray(getattr(self, k)).tolist())
             for k in ("q", "v", "tau", "process_q", "process_v")}
        if self.process_a is not None:  # issue 9 (session 9): `acceleration_process`
            d["process_a"] = np.asarray(self.process_a).tolist()
        d["source"] = dict(self.source)
        return d


class JointSmoother:
    """Joint state–parameter batch smoother (scikit-learn style: configure, ``fit(log)``, read ``result_``).

    Args:
        robot: the `RobotModel` whose joints match the log.
        inertia: inertial parameterization ("log-cholesky" (default), "exponential-eigenvalue", "raw");
            LM steps are taken in its unconstrained coordinates θ, so every iterate is physically
            consistent (except with "raw").
        friction: friction model: "coulomb-viscous-scale" (default: fc·tanh(v/vs) + fv·v with the velocity
            scale vs estimated per joint, prior mean ``friction_velocity_scale``), "coulomb-viscous" (vs fixed
            at ``friction_velocity_scale``) or "stribeck6"; "auto" = coulomb-viscous-scale or stribeck6,
            chosen by blocked cross-validation of a classical regression on the training log
            (`friction_select`, issue 9 item 3; ``friction_selection_`` and summary ``friction_selection``).
        friction_velocity_scale: smooth-sign velocity scale of Coulomb friction [rad/s].
        knot_stride: one knot every ``knot_stride`` samples (1 = every sample).
        sigma_q, sigma_v, sigma_tau: measurement noise std [rad, rad/s, N·m] (scalar or per joint);
            None = estimated from the log.
        sigma_process: std of the velocity-integration residual per unit step [rad/s per s]; None = 1 %
            of the RMS acceleration (a stiff but not rigid kinematic link).
        prior_relative: relative prior uncertainty on the URDF inertial values (0.7 = 70 %).
        prior_mean: optional physical parameter vector to centre the prior on instead of the URDF.
        reweight_rounds: rounds of effort-noise re-estimation from the ID residuals (0 = off).
        max_iterations, tol: LM stopping rules (relative cost decrease).
        solver: "structured" (default, O(N) block elimination) or "gtsam" (GTSAM multifrontal).
        energy: add a work–energy observation per knot interval (paper 004 eq. 63, `terms.energy`; needs
            every effort measured); its std is the input work's from the effort and velocity noise.
        dynamics: "inverse" (default: M a + h + τ_f = τ̂ per knot, paper 004 eq. 2) or "forward" (the
            forward-dynamics formulation compared in paper 004 Fig. 10: a = ABA(q, v, τ̂; θ) per knot, the
            effort noise mapped to the accelerations; `factors.forward_dynamics`; every effort measured).
        fit_actuation: effort-sensor parts to estimate per joint, of ("gain", "offset") (issue 9 item 2,
            `fg_sysid.factors.actuation`: logged effort = gain·τ + offset); () = efforts are joint torques.
        gain_prior_std: prior std of log(gain) around 1 (0.1 ≈ 10 %); it anchors the gains' common scale.
        offset_prior_relative: prior std of the offset around 0, relative to the joint's RMS logged effort.
        process_from_log: with logged velocities, tighten each joint's process noise (``process_fraction``
            × RMS acceleration per step) to the robust std of the logged velocities' integration residual
            when that is smaller (issue 9, `process_noise`); False = the fraction alone (before issue 9).
        strategy: damping strategy of the Levenberg–Marquardt core (`solver`): "line-search" (default:
            Gauss–Newton steps shortened by halving, λ never raised while 1/64 of the step lowers the
            cost), "trust-region" (Nielsen's gain-ratio λ alone) or "hybrid" (issue 9, session 8:
            gain-ratio λ carried across the reweighting rounds, steps halved where the model overshoots,
            λ raised when only short steps lower the cost, convergence checked on the undamped model).
            Not the default: on TIAGo and on a Z1 log at σ = 0.1 the minimum it approaches sooner predicts
            worse than the line search's early stop (docs/damping.md).
        deadband_zero_fraction: an effort channel that reads exactly 0 on more than this fraction of its
            samples is a dead-band channel (`effort_quality.deadband_channels`: censored readings, not
            zero torque) and is left out of the inverse-dynamics term; None keeps every channel.
        robust: None (Gaussian effort noise) or "huber": Huber's loss on the inverse-dynamics rows through
            the reweighting rounds (`effort_quality.huber_weights`, k = 1.345 σ; the effort σ is then
            re-estimated from the residuals' median absolute deviation).
        extra_terms: callables ``(problem, smoother) -> problem.Term`` adding the user's own factor terms
            (e.g. motion-capture positions at some knots; ``smoother.knot_times_`` holds the knot times).
        process_motion_scale: where the position noise makes the initial SG accelerations' RMS > 10x the
            motion's, scale the process noise by the motion's RMS acceleration instead (issue 12,
            `acceleration_scale`); False = the initial accelerations' RMS always (before issue 12; ~1000x
            too loose on the Z1 at σ_q = 0.1 rad).
        stick_weights: open chains: each effort row's σ_τ widened in quadrature by the friction law's
            error near velocity reversals, fc·(1 − tanh²(v/(2·w))) (`arm_stick`, issue 9 session 8):
            None = off; "law-width": w = the prior tanh width, v = the initial velocities; "velocity-noise":
            w = the velocities' noise std, v = the logged ones. Closed loops: `loop_init.stick_sigma`.
        acceleration_process: open chains: True adds a white-jerk row a_{k+1} − a_k ~ N(0, σ_a²) between
            knots (`acceleration_process`, issue 9 session 9; opt-in), σ_a = 3 · (RMS a / RMS v) · RMS a · h
            of the motion, re-estimated by a Helmert variance-component step with Huber row factors in each
            reweighting round ("fixed": the initial σ_a kept). Without it the accelerations' Nyquist band is
            free and absorbs the effort noise (on noisy logs the converged MAP predicts worse than an early
            stop); with it, fast true changes of a (sharp friction, high-gain control at σ = 0.01) are
            smoothed and the fit loses there (docs/damping.md). False (default) = integration rows alone.
            "auto" (issue 9 session 9, `jerk_auto`; the default of ``fg-sysid identify``): the default
            fit, then a refit with the rows (warm start) only if its knot accelerations' Nyquist-band RMS
            exceeds the motion's RMS acceleration (median joint); the record in
            ``result_.noise["acceleration_process_auto"]``.
        effort_timing: what a logged effort means (issues 11 + 9, `effort_timing`): "sample" (default: the
            effort at the sample instant), "hold" (a command held zero-order over ``effort_hold_period``
            [s], default the sample period: the inverse-dynamics rows take the efforts re-timed to the
            knots, ½(τ̂_{k−1} + τ̂_k) for a hold over the sample period) or "cv" (a delay chosen by blocked
            cross-validation on the training log; fixed-base open chains).
        friction_lead: the lead laws' T (``coulomb-viscous-lead``, ``soft-dry``; issue 9 session 10):
            "shared" (default: one T for every joint, tie rows of std `LEAD_TIE_STD`; MuJoCo's soft
            constraints share one solref, and one T cannot absorb a per-joint misfit such as an unmodelled
            Stribeck peak) or "per-joint".
        theta_steps: how a solver step δθ is applied (issue 9, session 12): "physical" (default: each body's
            π + δπ and each armature a + δa mapped back to θ, `ParameterLayout.retract` — the inverse
            dynamics are linear in them, so the step follows the data term's valley; a block the straight
            line takes outside the physically valid set takes θ + δθ) or "additive" (θ + δθ, before
            session 12).
        n_jobs: threads of the O(N) linear solves (issue 9, session 13; `linear_solver.StructuredSolver`):
            None (default) = the cores this process may use, at most 2 (the knots are eliminated from both
            ends at once, the normal equations and the θ border accumulated in two halves: the same
            arithmetic, ~1.4× faster per solve on 2 cores); 1 = one thread (several fits side by side).
        verbose: print one line per iteration to stderr.
    """

    def __init__(self, robot: RobotModel, inertia: str = "log-cholesky",
                 friction: str = "coulomb-viscous-scale", friction_velocity_scale: float = 0.05,
                 knot_stride: int = 1, sigma_q=None, sigma_v=None, sigma_tau=None, sigma_process=None,
                 prior_relative: float = 0.7, prior_mean: np.ndarray | None = None,
                 reweight_rounds: int = 2, max_iterations: int = 30, tol: float = 1e-3,
                 solver: str = "structured", init: str = "ls-sg", process_fraction: float = 0.3,
                 fit_friction: bool = True, fit_armature: bool = True,
                 energy: bool = False, extra_terms=(), verbose: bool = False, dynamics: str = "inverse",
                 fit_actuation=(), gain_prior_std: float = 0.1, offset_prior_relative: float = 0.1,
                 process_from_log: bool = True, strategy: str = "line-search",
                 deadband_zero_fraction: float | None = 0.5, robust: str | None = None,
                 process_motion_scale: bool = True, stick_weights: str | None = None,
                 acceleration_process: bool | str = False,
                 effort_timing: str = "sample", effort_hold_period: float | None = None,
                 friction_lead: str = "shared", theta_steps: str = "physical", n_jobs: int | None = None):
        self.robot = robot
        self.inertia = inertia
        self.friction = friction
        self.friction_velocity_scale = friction_velocity_scale
        self.knot_stride = knot_stride
        self.sigma_q = sigma_q
        self.sigma_v = sigma_v
        self.sigma_tau = sigma_tau
        self.sigma_process = sigma_process
        self.prior_relative = prior_relative
        self.prior_mean = prior_mean
        self.reweight_rounds = reweight_rounds
        self.max_iterations = max_iterations
        self.tol = tol
        self.solver = solver
        self.init = init
        self.process_fraction = process_fraction
        self.fit_friction = fit_friction
        self.fit_armature = fit_armature
        self.energy = energy
        self.extra_terms = tuple(extra_terms)
        self.verbose = verbose
        self.dynamics = dynamics
        self.fit_actuation = tuple(fit_actuation or ())  # issue 9 item 2
        self.gain_prior_std = gain_prior_std
        self.offset_prior_relative = offset_prior_relative
        self.process_from_log = process_from_log  # issue 9
        self.strategy = strategy  # issue 9 (session 7): convergence on real logs
        self.deadband_zero_fraction = deadband_zero_fraction  # issue 9 (session 7): `effort_quality`
        self.robust = robust  # issue 9 item 4: Huber loss on the effort rows
        self.theta_steps = theta_steps  # issue 9 (session 12): `ParameterLayout.retract` or θ + δθ
        self.process_motion_scale = process_motion_scale  # issue 12
        self.stick_weights = stick_weights  # issue 9 (session 8): `arm_stick`, open chains
        self.acceleration_process = acceleration_process  # issue 9 (session 9): `acceleration_process`
        self.effort_timing = effort_timing  # issues 11 + 9: `effort_timing` (held efforts re-timed)
        self.effort_hold_period = effort_hold_period
        self.friction_lead = friction_lead  # issue 9 (session 10): lead laws' T shared or per joint
        self.n_jobs = n_jobs  # issue 9 (session 13): two threads in the linear solves

    # ------------------------------------------------------------------ public
    def fit(self, log: Log) -> JointSmoother:
        # small dense blocks: one BLAS thread is faster than several on shared cores
        with threadpool_limits(limits=1, user_api="blas"):
            if self.friction == "auto":  # issue 9 item 3: the law chosen by blocked CV (`friction_select`)
                from .friction_select import fit_auto

                return fit_auto(self, log)
            return self._fit(log)

    def _fit(self, log: Log) -> JointSmoother:
        if self.acceleration_process == "auto":  # issue 9 (session 9): rows only if a absorbed the noise
            from .jerk_auto import fit_auto as fit_jerk_auto

            return fit_jerk_auto(self, log)
        t_start = time.perf_counter()
        robot = self.robot
        if tuple(log.joint_names) != tuple(robot.joint_names):
            raise EstimationError(
                f"log joints {list(log.joint_names)} do not match robot {robot.name!r} joints "
                f"{list(robot.joint_names)}")
        if self.solver not in ("structured", "gtsam"):
            raise ValueError(f"solver must be 'structured' or 'gtsam', not {self.solver!r}")
        if robot.floating_base:
            raise EstimationError("floating-base robots are not supported by this smoother yet")
        if self.dynamics not in ("inverse", "forward"):
            raise ValueError(f"dynamics must be 'inverse' or 'forward', not {self.dynamics!r}")
        if self.dynamics == "forward" and self.fit_actuation:
            raise EstimationError("the forward-dynamics formulation does not take an actuation model "
                                  "(fit_actuation): use dynamics='inverse'")
        if self.dynamics == "forward" and not all(log.tau_measured):
            missing = [j for j, m in zip(log.joint_names, log.tau_measured, strict=True) if not m]
            raise EstimationError("the forward-dynamics formulation needs every joint's effort measured "
                                  f"(unmeasured: {', '.join(missing)})")
        if self.friction_lead not in ("shared", "per-joint"):
            raise ValueError(f"friction_lead must be 'shared' or 'per-joint', not {self.friction_lead!r}")
        if self.theta_steps not in ("physical", "additive"):
            raise ValueError(f"theta_steps must be 'physical' or 'additive', not {self.theta_steps!r}")
        if self.robust not in (None, "huber"):
            raise ValueError(f"robust must be None or 'huber', not {self.robust!r}")
        log, self.deadband_ = drop_deadband_channels(log, self.deadband_zero_fraction)  # `effort_quality`
        if self.deadband_:
            zeros = ", ".join(f"{j} ({100 * f:.0f} % zeros)" for j, f in self.deadband_.items())
            warnings.warn("effort channels read exactly 0 on most samples (dead band: censored readings, not "
                          f"zero torque), left out of the inverse dynamics: {zeros}", stacklevel=2)
        if robot.loops:  # closed loops (issue 11): unencoded joints filled in from the closures
            log = loop_terms.setup(self, log)
        stride = max(int(self.knot_stride), 1)
        idx = np.arange(0, log.n_samples, stride)
        if idx.size < 4:
            raise EstimationError(f"log {log.source!r} has {log.n_samples} samples: too few knots")
        warn_if_inconsistent(robot.nominal_inertial_parameters(), list(robot.body_names), "URDF prior")
        self.layout_ = layout = ParameterLayout.create(
            robot, self.inertia, self.friction, self.friction_velocity_scale,
            fit_friction=self.fit_friction, fit_armature=self.fit_armature, actuation=self.fit_actuation)
        if layout.friction.uses_acceleration:  # issue 9 (session 10): friction of v + T·a
            why = ("energy observations (the friction power would need the knot accelerations)" if self.energy
                   else "the forward-dynamics formulation (its a_fd assumes friction independent of a)"
                   if self.dynamics == "forward" else "closed loops (not validated)" if robot.loops else None)
            if why:
                raise EstimationError(f"friction law {layout.friction.name!r} depends on the acceleration "
                                      f"and cannot be combined with {why}: use coulomb-viscous-scale")
        if self.energy and layout.n_actuation:  # issue 9 item 2
            raise EstimationError("energy observations and the actuation model cannot be combined yet (the "
                                  "measured input work would need the gains and offsets)")
        self._space = ConfigurationSpace(robot.model)
        threads = resolve_threads(self.n_jobs)
        self._lm = LevenbergMarquardt(SolverOptions(self.strategy, self.tol, self.max_iterations,
                                                    backend=self.solver, verbose=self.verbose,
                                                    threads=threads))
        self._lm.stop_rule = getattr(self, "_stop_rule", None)  # `jerk_auto`: a decided first fit ends
        self._id = InverseDynamicsResidual(layout)
        self._id.processes = threads  # the per-knot Pinocchio loop shared with a second process
        iv = robot.joint_index_v()
        t = log.t[idx]
        self.knot_times_ = t
        self._h = np.diff(t)
        nv = robot.nv
        # measurements in velocity layout (fixed base: joints == velocity coordinates)
        self._qm = np.asarray(log.q, float)[idx]
        self._vm = None if log.v is None else np.asarray(log.v, float)[idx]
        taum = np.full((idx.size, nv), np.nan)
        taum[:, iv] = np.asarray(log.tau, float)[idx]
        self._tau_mask = ~np.isnan(taum)
        self._taum = np.where(self._tau_mask, taum, 0.0)
        unmeasured = [j for j, m in zip(robot.joint_names, log.tau_measured, strict=True) if not m]
        if unmeasured:
            warnings.warn(f"efforts not measured for joints {unmeasured}: their inverse-dynamics rows are "
                          "left out", stacklevel=2)
        if not np.any(log.tau_measured):
            warnings.warn("no effort is measured: parameters come from the prior alone", stacklevel=2)
        # initial trajectory: Savitzky–Golay smoothing with the window that blocked cross-validation of
        # the classical baseline picks on this log (the best fixed filter for this log's noise)
        # and θ from that baseline's least-squares estimate, mapped into the parameterization (bodies
        # outside the physically consistent set are projected onto it, `layout.to_theta_projected`)
        window_s, order, p_init, ls_rms = 0.05, 3, None, {}
        if self.init == "ls-sg" and np.any(log.tau_measured) and not robot.loops:  # (tree baseline)
            from .baseline import LeastSquaresSG

            try:
                ls = getattr(self, "_ls_result", None) or LeastSquaresSG(  # issue 9 item 3: auto's fit
                                    velocity_scale=self.friction_velocity_scale,
                                    fit_friction=self.fit_friction,
                                    fit_armature=self.fit_armature, blas_threads=None,
                                    n_jobs=self.n_jobs).fit(log, robot).result_
                window_s, order = float(ls.filter["window_s"]), int(ls.filter["polyorder"])
                ls_rms = dict(zip(ls.measured_joints, ls.residual_rms, strict=True))
                if self.friction in ("coulomb-viscous", *LEAD_OR_SCALE):
                    p_init = self._from_baseline_layout(ls.estimate)
                if self.friction == "stribeck6":  # issue 9 item 3: start from the Stribeck regression
                    from .friction_select import stribeck_start

                    p_init = stribeck_start(self, log, ls.filter)
            except ValueError as e:
                warnings.warn(f"cross-validated initial filter unavailable ({e}); using 50 ms", stacklevel=2)
        elif self.init == "ls-sg" and robot.loops:
            p_init = loop_terms.initial_parameters(self, log)  # paper 000's constraint-elimination LS
        self.init_filter_ = {"window_s": window_s, "polyorder": order}
        self._energy_log = None
        if self.energy:
            if not all(log.tau_measured):
                warnings.warn("energy observations need every effort measured: left out", stacklevel=2)
            else:
                v_log = np.asarray(log.v, float) if log.v is not None else \
                    savgol_derivatives(log.t, np.asarray(log.q, float), window_s, order)[1]
                self._energy_log = (np.asarray(log.t, float), v_log, np.asarray(log.tau, float),
                                    log.v is not None)
        self._log(f"initial trajectory: Savitzky–Golay window {window_s * 1e3:.0f} ms, order {order}")
        qs, vs, as_ = savgol_derivatives(log.t, np.asarray(log.q, float), window_s, order)
        if robot.loops and self.init == "ls-sg":  # closed loops (issue 11): paper 000's closed states
            from . import loop_init

            qs, vs, as_ = loop_init.initial_trajectory(self, log, (qs, vs, as_))
        q0 = qs[idx].copy()
        v0 = vs[idx].copy()
        a0 = as_[idx].copy()
        self.noise_ = noise = self._noise_levels(log, idx, a0, ls_rms)
        self._set_acceleration_process(noise, v0, a0)  # issue 9 (session 9)
        if self.deadband_:
            noise.source["tau_deadband"] = ("left out (dead band, fraction of exact zeros): "
                                            + ", ".join(f"{j} {f:.3f}" for j, f in self.deadband_.items()))
        effort_timing.apply(self, log, idx)  # issues 11 + 9: held efforts re-timed to the knots (or no-op)
        self._robust_w = None  # Huber row factors of the inverse-dynamics term (robust="huber")
        self._jerk_w = None  # Huber row factors of the white-jerk rows (`acceleration_process`)
        prior_mean_phys = None if self.prior_mean is None else self._from_baseline_layout(self.prior_mean)
        act_prior = {} if not layout.n_actuation else {  # issue 9 item 2
            "gain_log_std": self.gain_prior_std,
            "offset_std": np.maximum(self.offset_prior_relative * noise.tau_rms, 1e-6)}
        theta_bar, theta_std = layout.prior(self.prior_relative, mean_physical=prior_mean_phys, **act_prior)
        if robot.loops:  # passive joints have no rotor
            theta_bar, theta_std = loop_terms.adjust_prior(robot, layout, theta_bar, theta_std)
        self._theta_bar, self._theta_std = theta_bar, theta_std
        theta = theta_bar.copy()
        if p_init is not None:
            theta, replaced = layout.to_theta_projected(p_init, layout.to_physical(theta_bar))
            if replaced:
                self._log("initial θ: least-squares blocks outside the physically valid set, projected onto "
                          "it or (when not representable) set to the prior mean: " + ", ".join(replaced))
        self._stick_delta = None  # issue 9 (session 8): stick-phase row weights of open chains, `arm_stick`
        if self.stick_weights and not robot.loops:
            from .arm_stick import initial_stick_sigma

            self._stick_delta = initial_stick_sigma(self, layout, p_init, v0, noise)
        self.problem_ = self._build_problem(noise)
        warm = getattr(self, "_warm_start", None)  # issue 9 (session 9): `jerk_auto`'s refit
        if warm is not None and warm[0][0].shape == q0.shape and warm[1].shape == theta.shape:
            x, theta = warm  # (no kinematic initialisation: its states would be replaced)
        elif robot.loops:  # closures in the initial states, then the closure forces λ
            x = loop_terms.init_forces(self, loop_terms.kinematic_init(self, (q0, v0, a0), noise), theta)
        else:
            x = self._kinematic_init((q0, v0, a0), noise)
        history: list[dict] = []
        # later rounds re-estimate the effort noise from the inverse-dynamics residuals (IRLS: model
        # errors of real robots show up there), never below the high-frequency estimate
        tau_target = noise.tau.copy()
        converged = False
        rounds = 1 + max(int(self.reweight_rounds), 0) if (self.sigma_tau is None or self.robust) else 1
        for rnd in range(rounds):
            x, theta, converged, hist = self._lm.run(self.problem_, x, theta, rnd)
            history += hist
            if self._lm.stopped:  # the caller's rule already decided (`jerk_auto`): no more rounds
                break
            if rnd < rounds - 1:
                # IRLS: the effort noise that the residuals show (model error of a real robot shows up
                # there), between the high-frequency estimate and twice the classical fit's residual
                r = self._id_residual(x, theta)
                change = 0.0
                if self.sigma_tau is None:
                    rms = np.sqrt(np.sum((r * self._tau_mask) ** 2, axis=0)
                                  / np.maximum(self._tau_mask.sum(axis=0), 1))
                    if self.robust == "huber":  # a scale the outliers do not inflate: 1.4826·MAD
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore", RuntimeWarning)  # unmeasured (all-NaN) columns
                            mad = np.nanmedian(np.where(self._tau_mask, np.abs(r), np.nan), axis=0)
                        rms = 1.4826 * np.nan_to_num(mad, nan=0.0)
                    new_tau = np.clip(rms[iv], tau_target, np.maximum(tau_target, noise.tau_cap))
                    change = np.max(np.abs(np.log(new_tau / noise.tau)))
                    noise.tau = new_tau
                    noise.source["tau"] = f"re-estimated from inverse-dynamics residuals (round {rnd + 1})"
                if noise.process_a is not None and self.acceleration_process != "fixed":  # issue 9 s. 9
                    from .acceleration_process import helmert_factors

                    fa = helmert_factors(self.problem_, x, theta, solver=self._lm.linear_solver)
                    if fa is not None:
                        fa = np.where(noise.process_a > 0, fa[iv], 1.0)
                        noise.process_a = noise.process_a * fa
                        change = max(change, float(np.max(np.abs(np.log(fa)))))
                        noise.source["process_a"] += f"; Helmert step (round {rnd + 1})"
                if noise.process_a is not None:  # Huber factors of the white-jerk rows (jumps of a pass)
                    from .acceleration_process import huber_row_weights

                    sa = np.ones(self.robot.nv)
                    sa[iv] = noise.process_a
                    jw = huber_row_weights(x[2], sa)
                    prev = self._jerk_w if self._jerk_w is not None else np.ones_like(jw)
                    change = max(change, float(np.max(np.abs(jw - prev))))
                    self._jerk_w = jw
                if self.robust == "huber":  # issue 9 item 4: Huber IRLS weights of the effort rows
                    sig = np.ones(self.robot.nv)
                    sig[iv] = noise.tau
                    w_new = huber_weights(r * self._tau_mask, sig)
                    if self._robust_w is not None:
                        change = max(change, float(np.max(np.abs(w_new - self._robust_w))))
                    else:
                        change = max(change, float(np.max(1.0 - w_new)))
                    self._robust_w = w_new
                    n_down = int(np.sum(w_new[self._tau_mask] < 1))
                    noise.source["tau_robust"] = (f"Huber (k = {HUBER_K} σ), round {rnd + 1}: {n_down} rows "
                                                  "down-weighted")
                self.problem_ = self._build_problem(noise)
                if change < 0.05:
                    break
        if robot.loops:  # closures and passive rows to 1e-9 (augmented Lagrangian)
            x, theta, hist = loop_terms.finalize(self, x, theta)
            history += hist
        # marginal covariance of θ at the solution (undamped Schur complement); not for a fit the caller's
        # rule stopped (`jerk_auto`'s first fit: its refit replaces it)
        cov = (np.full((theta.size, theta.size), np.nan) if self._lm.stopped
               else self._lm.covariance(self.problem_, x, theta))
        self.states_ = x  # final knot states (q, v, a), the problem's variables with θ = result_.theta
        seconds = time.perf_counter() - t_start
        self.result_ = IdentificationResult.build(
            layout=layout, theta=theta, theta_cov=cov, theta_prior=(theta_bar, theta_std),
            t=t, q=x[0], v=x[1], a=x[2], history=history, converged=converged, seconds=seconds,
            noise=noise.as_dict(), method="smoother", knots=int(idx.size),
            id_residual=self._id_residual(x, theta) * self._tau_mask,
            measured_joints=[j for j, m in zip(robot.joint_names, log.tau_measured, strict=True) if m],
            extras=loop_terms.summary_extras(self, theta) if robot.loops else None,  # closed loops
        )
        return self

    def _from_baseline_layout(self, p) -> np.ndarray:
        """A physical vector in the smoother's layout from one in the classical baseline's (inertial,
        (fc, fv) per joint, armature): with ``coulomb-viscous-scale`` each joint's tanh width vs is the
        prior's ``friction_velocity_scale``. Vectors already in the smoother's layout pass unchanged."""
        p = np.asarray(p, float)
        robot = self.robot
        nb10, nj = 10 * robot.n_bodies, robot.n_joints
        if self.friction not in LEAD_OR_SCALE or p.size == self.layout_.n or \
                p.size != nb10 + 3 * nj:  # the baseline always carries every armature
            return p
        shape = self.layout_.friction.default_physical(1.0, 1.0)[2:]  # vs (and the soft-dry lead T)
        fr = np.hstack([p[nb10:nb10 + 2 * nj].reshape(nj, 2), np.tile(shape, (nj, 1))])
        return np.concatenate([p[:nb10], fr.ravel(), p[nb10 + 2 * nj:]])

    # ------------------------------------------------------------------ noise
    def _noise_levels(self, log: Log, idx, a0, model_error: dict) -> NoiseLevels:
        """Noise levels; ``model_error`` maps joints to the RMS residual of the classical fit against
        the filtered effort (what a rigid-body model with friction cannot explain), added in quadrature
        to the sensor noise of the effort."""
        nj = self.robot.n_joints
        src = {}

        def per_joint(val, name, est, floor):
            if val is not None:
                src[name] = "given"
                return np.broadcast_to(np.asarray(val, float), (nj,)).copy()
            src[name] = "estimated from the log's high-frequency content"
            return np.maximum(np.nan_to_num(est, nan=floor), floor)

        q = np.asarray(log.q, float)
        sq = per_joint(self.sigma_q, "q", highfreq_noise_std(q), 1e-6)
        sv = None
        if log.v is not None:
            sv = per_joint(self.sigma_v, "v", highfreq_noise_std(np.asarray(log.v, float)), 1e-5)
        tau = np.asarray(log.tau, float)
        with np.errstate(invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN (unmeasured) columns
            tau_rms = np.sqrt(np.nanmean(tau ** 2, axis=0))
        tau_floor = np.maximum(1e-3 * np.nan_to_num(tau_rms, nan=1.0), 1e-4)
        st = per_joint(self.sigma_tau, "tau", highfreq_noise_std(tau), 1e-4)
        tau_cap = np.full(nj, np.inf)
        if self.sigma_tau is None:
            st = np.maximum(st, tau_floor)  # a noise-free log must not give infinite weights
            me = np.array([model_error.get(j, np.nan) for j in self.robot.joint_names], float)
            tau_cap = np.where(np.isfinite(me), np.maximum(st, 2.0 * me), np.inf)
        h = float(np.median(self._h))
        if self.sigma_process is None:
            a_rms = np.sqrt(np.mean(a0 ** 2, axis=0))
            src["process"] = f"{self.process_fraction:g} x the RMS acceleration per step"
            note = ""
            if self.process_motion_scale:  # issue 12: the motion's RMS acceleration, not the noise's
                a_rms, note = self._motion_acceleration_rms(log, sq, a_rms)
            self._motion_a_rms = a_rms  # the acceleration row's scale (`acceleration_process`)
            spv = np.maximum(self.process_fraction * a_rms, 1e-3) * h
            if self.process_from_log and log.v is not None:  # issue 9: `process_noise`
                spv, src["process"] = process_velocity_std(spv, np.asarray(log.v, float)[idx])
            src["process"] += note
        else:
            spv = np.broadcast_to(np.asarray(self.sigma_process, float), (nj,)) * h
            src["process"] = "given"
        spq = spv * h
        return NoiseLevels(sq, sv, st, spq, spv, src, np.nan_to_num(tau_rms, nan=1.0), tau_cap)

    def _motion_acceleration_rms(self, log: Log, sigma_q, a_rms):
        """Per joint RMS acceleration for the process noise: the initial accelerations' ``a_rms`` except
        where the position noise makes it > 10x the motion's (`acceleration_scale.motion_acceleration_scale`,
        from the initial SG window), and a note for ``noise.source["process"]``. Sets ``acceleration_scale_``
        (its record; None without finite q or without the initial filter: the floating-base subclass)."""
        from .acceleration_scale import motion_acceleration_scale

        q = np.asarray(log.q, float)
        init = getattr(self, "init_filter_", None)  # None: FloatingBaseSmoother (its own process noise)
        if init is None or q.shape[1] != np.size(a_rms) or not np.all(np.isfinite(q)):
            self.acceleration_scale_ = None
            return a_rms, ""
        s, rec = motion_acceleration_scale(a_rms, log.t, q, sigma_q, init["window_s"], init["polyorder"])
        self.acceleration_scale_ = rec
        k = int(np.sum(rec["replaced"]))
        return s, (f"; RMS acceleration: the motion's (noise removed) on {k} of {s.size} joints" if k else "")

    def _set_acceleration_process(self, noise: NoiseLevels, v0, a0) -> None:
        """``noise.process_a``: σ_a of the white-jerk acceleration rows (`acceleration_process`) on open
        chains when ``acceleration_process`` is set, from the motion's RMS acceleration (that of the
        process noise) and RMS velocity (``v0``: initial SG velocities, used without logged ones);
        ``acceleration_process_`` its record."""
        self.acceleration_process_ = None
        if not self.acceleration_process or self.robot.loops:
            return
        from .acceleration_process import acceleration_process_std

        a_rms = getattr(self, "_motion_a_rms", None)
        if a_rms is None or self.sigma_process is not None:  # process noise given: the initial a's RMS
            a_rms = np.sqrt(np.mean(np.asarray(a0, float) ** 2, axis=0))
        # the motion's RMS velocity: the logged velocities less their noise, else the initial SG ones
        if self._vm is not None and noise.v is not None:
            ms = np.nanmean(np.asarray(self._vm, float) ** 2, axis=0)
            v_rms = np.sqrt(np.maximum(ms - noise.v ** 2, 0.25 * ms))
        else:
            v_rms = np.sqrt(np.mean(np.asarray(v0, float) ** 2, axis=0))
        noise.process_a, rec = acceleration_process_std(a_rms, v_rms, float(np.median(self._h)))
        self.acceleration_process_ = rec
        noise.source["process_a"] = ("white jerk: 3 x (RMS a / RMS v) x RMS a x h, the motion's (noise "
                                     "removed)")

    # ------------------------------------------------------------------ problem
    def _build_problem(self, noise: NoiseLevels) -> Problem:
        """The fixed-base term set (paper 004 eq. 1) at the given noise levels."""
        nv = self.robot.nv
        iv = self.robot.joint_index_v()
        blocks = (("q", nv), ("v", nv), ("a", nv))
        if self.robot.loops:  # closure forces λ (issue 11)
            blocks += loop_terms.extra_blocks(self.robot)
        problem = Problem(self._space, blocks, self.layout_.n)
        if self.theta_steps == "physical":  # issue 9 (session 12): steps through π and the armature
            problem.theta_retraction = self.layout_.retract
        wq = np.zeros(nv)
        wq[iv] = 1.0 / noise.q
        problem.add(terms.encoders(problem, self._qm, wq))
        if self._vm is not None:
            wv = np.zeros(nv)
            wv[iv] = 1.0 / noise.v
            problem.add(terms.velocities(problem, self._vm, wv))
        wt = np.zeros(nv)
        wt[iv] = 1.0 / noise.tau
        if self.dynamics == "forward":  # paper 004 Fig. 10's comparison formulation
            problem.add(self._forward_dynamics_term(problem, noise))
        else:
            w_id = self._tau_mask * wt[None, :]
            if getattr(self, "_robust_w", None) is not None:  # robust="huber" (issue 9 item 4)
                w_id = w_id * self._robust_w
            if getattr(self, "_stick_delta", None) is not None:  # stick_weights set: `arm_stick`
                from .arm_stick import row_factor

                w_id = w_id * row_factor(self._stick_delta, noise.tau, iv, nv)
            problem.add(terms.inverse_dynamics(problem, self._id, self._taum, w_id))
        wp = np.zeros(2 * nv)
        wp[iv] = 1.0 / noise.process_q
        wp[nv + iv] = 1.0 / noise.process_v
        problem.add(terms.integration(problem, self._h, wp))
        if getattr(noise, "process_a", None) is not None:  # issue 9 (session 9): white-jerk rows
            from .acceleration_process import acceleration_process_term

            wa = np.zeros(nv)
            wa[iv] = 1.0 / noise.process_a
            if getattr(self, "_jerk_w", None) is not None:  # Huber factors of the rows (per interval)
                wa = wa[None, :] * self._jerk_w
            problem.add(acceleration_process_term(problem, wa))
        problem.add(terms.parameter_prior(self._theta_bar, self._theta_std))
        if self.friction_lead == "shared":  # issue 9 (session 10): one lead T for every joint
            tie = terms.lead_tie(self.layout_, LEAD_TIE_STD)
            if tie is not None:
                problem.add(tie)
        if self._energy_log is not None:
            problem.add(self._energy_term(problem, noise))
        if self.robot.loops:  # closed loops (issue 11): `loop_terms.finish_problem`
            problem = loop_terms.finish_problem(problem, self, noise)
        return self._add_extra_terms(problem)

    def _id_residual(self, x, theta) -> np.ndarray:
        """Inverse-dynamics residual (N, nv) at the knot states x (with the closure forces of looped
        robots)."""
        if self.robot.loops:
            return loop_terms.id_residual(self, x, theta)
        return self._id.evaluate(*x, self._taum, theta, jacobians=False).r

    def _forward_dynamics_term(self, problem: Problem, noise: NoiseLevels):
        """`terms.forward_dynamics` with σ_a from the effort noise mapped through J_a⁻¹ at the measured
        configurations and the prior mean θ̄ (`factors.forward_dynamics.acceleration_sigma`)."""
        from ..factors.forward_dynamics import ForwardDynamicsResidual, acceleration_sigma

        fd = ForwardDynamicsResidual(self._id)
        sig_tau = np.ones(self.robot.nv)
        sig_tau[self.robot.joint_index_v()] = noise.tau
        self.sigma_acceleration_ = acceleration_sigma(fd, self._qm, self._theta_bar, sig_tau)
        return terms.forward_dynamics(problem, fd, self._taum, 1.0 / self.sigma_acceleration_)

    def _energy_term(self, problem: Problem, noise: NoiseLevels, keep=None):
        """`terms.energy` over every knot interval (``keep`` (N−1,) 0/1: only where 1): measured input work
        between the knots over the log samples, each effort held until the next sample
        (`factors.energy.DEFAULT_WORK_QUADRATURE`), and its std from the effort and velocity noise, rows
        sharing a boundary sample each charged half its variance (`factors.energy.input_work_std`; without
        logged velocities those of the initial SG filter, with their high-frequency noise)."""
        from ..factors.energy import EnergyResidual, input_work, input_work_std

        t_log, v_log, tau_log, logged_v = self._energy_log
        t = self.knot_times_
        state_rows = self._energy_state_term(problem, noise, keep)  # issue 12 session 8: work from the states
        if state_rows is not None:
            return state_rows
        work = input_work(t_log, v_log, tau_log, t[:-1], t[1:], self.robot.joint_names)
        sv = noise.v if logged_v and noise.v is not None else highfreq_noise_std(v_log)
        sigma = input_work_std(t_log, v_log, tau_log, t[:-1], t[1:], np.nan_to_num(sv), noise.tau)
        sigma = np.maximum(sigma, 1e-6 * max(float(np.max(np.abs(work), initial=0.0)), 1e-12))
        if keep is not None:
            sigma = np.where(np.asarray(keep, float) > 0, sigma, np.inf)  # weight 0 where left out
        return terms.energy(problem, EnergyResidual(self.layout_), t, work, sigma)

    def _energy_state_term(self, problem: Problem, noise: NoiseLevels, keep=None):
        """`terms.energy_state_work`: the energy rows with the input work a function of the states,
        τ̂_kᵀ (q_{k+1} ⊖ q_k) (``energy_work="state-q"``, `factors.energy.DEFAULT_WORK_FORM`) or
        τ̂_kᵀ ½h (v_k + v_{k+1}) (``"state-v"``), whitened by the effort noise alone
        (`factors.energy.state_work_std` on the logged or initial-filter velocities); None for
        ``energy_work="measured"`` (the data Ŵ of `_energy_term`) and, with a warning, when the knots are not
        on consecutive samples (the held effort of an interval is then not one sample's). Default: the state
        form on serial fixed-base arms with a knot at every sample, the measured work on floating bases,
        closed loops and strided knots (``knot_stride > 1``: rows integrating the samples between knots)."""
        from ..factors.energy import (
            DEFAULT_WORK_FORM,
            EnergyResidual,
            knot_interval_efforts,
            state_work_std,
        )

        # the state form by default on serial fixed-base arms (every velocity an actuated joint's); floating
        # bases and closed loops keep the measured work unless ``energy_work`` is set
        serial = self.robot.nv == len(self.robot.joint_names) and not self.robot.loops
        # issue 12 session 9: with knots sparser than the log (stride > 1) the measured work over every sample
        # between two knots, which the effort rows at the knots do not see (`energy_sparse`), no warning
        serial = serial and int(self.knot_stride or 1) <= 1
        form = getattr(self, "energy_work", DEFAULT_WORK_FORM if serial else "measured")
        if form == "measured":
            return None
        t_log, v_log, tau_log, _ = self._energy_log
        t = self.knot_times_
        try:
            tau_k = knot_interval_efforts(t_log, tau_log, t, self.robot.joint_names)
        except ValueError as e:
            warnings.warn(f"energy rows: {e}; using the measured input work", stacklevel=2)
            return None
        v_ref = v_log[np.searchsorted(t_log, t - 1e-9 * max(1.0, abs(float(t_log[-1]))))]
        sigma = state_work_std(t, v_ref, noise.tau)
        sigma = np.maximum(sigma, 1e-3 * max(float(np.median(sigma)), 1e-15))  # at rest: no infinite weight
        if keep is not None:
            sigma = np.where(np.asarray(keep, float) > 0, sigma, np.inf)
        return terms.energy_state_work(problem, EnergyResidual(self.layout_), t, tau_k,
                                       self.robot.joint_index_v(), sigma, form)

    def _add_extra_terms(self, problem: Problem) -> Problem:
        """The user's own terms (``extra_terms``: callables ``(problem, smoother) -> Term``; see
        docs/estimation.md, "Adding a term")."""
        for make in self.extra_terms:
            problem.add(make(problem, self))
        return problem

    def _linearize(self, x, theta, noise: NoiseLevels | None = None, jacobians: bool = True,
                   freeze_theta: bool = False):
        """The problem's `LinearizedGraph` at (x, θ) (for tests and benchmarks)."""
        problem = self.problem_ if noise is None or noise is self.noise_ else self._build_problem(noise)
        return problem.linearize(x, theta, jacobians, freeze_theta)

    def _kinematic_init(self, x, noise: NoiseLevels, iterations: int = 2):
        """Make the smoothed initial states consistent with the integration factors: a linear(ized)
        smoother over encoders, velocity measurements and integration, with the smoothed accelerations
        as weak pseudo-measurements (std = their RMS) in place of the dynamics."""
        q, v, a = x
        a_ref = a.copy()
        wa = 1.0 / np.maximum(np.sqrt(np.mean(a_ref ** 2, axis=0)), 1e-3)
        kin = self._build_problem(noise)
        kin.terms = [t for t in kin.terms
                     if t.name not in ("inverse_dynamics", "forward_dynamics", "parameter_prior", "energy")]
        kin.add(terms.pseudo_accelerations(kin, a_ref, wa))
        for _ in range(iterations):
            step = self._lm.linear_solve(kin.linearize((q, v, a), self._theta_bar, freeze_theta=True), 0.0)
            q, v, a = kin.retract((q, v, a), step.dx)
            if self._space.is_vector_space:
                break
        return q, v, a

    def _retract(self, x, dx):
        return retract_states(self._space, x, dx)

    def _log(self, msg: str) -> None:
        if self.verbose:
            print(msg, file=sys.stderr, flush=True)
