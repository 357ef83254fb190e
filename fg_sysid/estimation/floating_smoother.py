"""Batch joint state–parameter–contact-force smoother for free-flyer robots (paper 004 Sec. III-B, IV-A).

Per knot k the state is

    x_k = (δq_k (nv, base included), δv_k, δa_k, λ_k (3 per foot, ALL feet))

so the state size is constant and the O(N) `StructuredSolver` of the fixed-base smoother applies.
λ_f is the contact force of the ground on foot f, expressed in the LOCAL foot frame axes and applied
at the contact point (the foot frame origin for point feet; for a spherical foot of radius ρ the
point ρ below its centre, world z): its spatial force on the parent joint is a placement of λ_f, so
Pinocchio's RNEA derivatives with external forces give ∂(J_fᵀλ_f)/∂q exactly, and ∂/∂λ_f = J_fᵀ.
World forces are R_f(q) λ_f (``forces_world``).

Factors (all whitened; σ's in SI units):

* measurements: encoders on the actuated joints (q ⊖ q̂, v − v̂ when logged); the base pose (``base.pos``,
  ``base.quat``) when logged, else a weak anchor of the first knot's base pose; IMU gyro and
  accelerometer (specific force with gravity and lever arm, `factors.imu`) when logged; measured
  contact forces R_f λ_f − f̂_f when logged (``force.<frame>.*``);
* inverse dynamics on all nv rows, Y(q,v,a)π + armature·a + τ_f(v) − Σ_f J_fᵀ λ_f − Sτ̂: the 6
  unactuated base rows are a **constraint** (no actuator: Newton–Euler of the whole robot), the joint
  rows compare with the measured efforts (effort noise);
* contacts, per foot in stance: velocity and acceleration of the contact point are zero (rolling
  without slipping for spherical feet: ṗ + ω × d = 0, p̈ + α × d = 0 with d = −ρ ẑ, `factors.contact`),
  and the foot height does not change between consecutive stance knots (position level, holonomic
  for a sphere on a plane); these are **constraints**; a swing foot's force is zero;
* soft friction-cone and unilateral penalties on stance forces (``friction_coefficient``);
* integration between knots on the manifold (process noise, optionally projected onto the contact
  null space with the dynamically consistent projector N(q), eqs. 36–37);
* θ prior as in `JointSmoother`, plus the known total mass and the left–right symmetry of mirrored
  limbs (paper 004 Sec. I-C / IX-C), each a soft prior or a constraint.

* optionally (``impacts=True``) reset maps with impulses at touchdowns (eqs. 7–11, `_setup_impacts`).
* closed loops (``robot.loops``, e.g. ``b1_fourbar``): closure forces as a knot block after the contact
  forces, Gᵀλ in the inverse dynamics, passive-joint rows and closures as constraints
  (`floating_loops`, docs/loops-floating.md).

Stages (docs/floating-base.md): states with θ held → all, raw inertial parameters → weakly determined
inertial directions back to the prior → requested (log-Cholesky) parameterization, consistent set →
constraints to tolerance with θ held.

Constraints (``constraints="hard"``) are enforced by an augmented Lagrangian on top of the
Levenberg–Marquardt loop: each constraint row c(x, θ) enters the least squares as (c + s)/σ_c with a
moderate σ_c, and after each inner solve the shift is updated s ← s + c (s/σ_c² is the Lagrange
multiplier estimate); σ_c shrinks tenfold (at most three times) when a round does not reduce the
violation fourfold. The total-mass and symmetry equalities, linear in the physical parameters, are
enforced by projection instead (`_enforce_parameter_equalities`). This
keeps the normal equations as well conditioned as a soft problem (no 1e12 weights, no change to the
O(N) elimination) while the violation goes to zero; rounds stop when every constraint is below
``constraint_tol`` (1e-6 in SI units: N, N·m, m, m/s, m/s²). ``constraints="soft"`` keeps the first
round's σ_c (a penalty method, for comparison).

Why a stance-only log does not determine the total mass: a point mass δm added to a calf at the
contact point of a stance foot changes no joint effort (the ground carries its weight: λ_f grows by
δm·g and J_fᵀ(δm g) cancels its gravity torque) and has zero acceleration while the foot stands, so
every factor above is unchanged. Stance data leave one such direction per leg; swing phases (trot)
or a known total mass resolve it (`tests/test_floating_smoother.py` checks the identity).
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import pinocchio as pin

from ..datasets.log import Log
from ..factors.contact_forces import ContactGeneralizedForces, world_forces
from ..factors.energy import stance_constant_windows
from ..factors.inverse_dynamics import InverseDynamicsResidual
from ..factors.manifold import ConfigurationSpace
from ..factors.parameter_priors import (
    SymmetryMap,
    symmetry_relative_std,
    symmetry_residual,
    total_mass_residual,
)
from ..layout import ParameterLayout
from ..parameterizations import check_physical_consistency, friction_model
from ..robots import RobotModel
from . import effort_timing, floating_loops, terms
from .floating_baseline import manifold_sg_states
from .linear_solver import SingularSystemError, resolve_threads
from .noise import highfreq_noise_std, knot_stride_from_log, savgol_derivatives
from .problem import Problem, retract_states
from .result import IdentificationResult
from .smoother import EstimationError, JointSmoother
from .solver import LevenbergMarquardt, SolverOptions

GRAVITY = 9.81
SIGMA_Q_FLOOR, SIGMA_V_FLOOR = 1e-4, 1e-3  # [rad], [rad/s] floors of the estimated encoder noise
#: Units of the constraint groups (for reports).
CONSTRAINT_UNITS = {
    "base_wrench": "N | N·m",
    "contact_velocity": "m/s",
    "contact_acceleration": "m/s²",
    "contact_height": "m",
    "total_mass": "kg",
    "symmetry": "SI",
    **floating_loops.CONSTRAINT_UNITS,  # closed loops (issue 11)
}


def full_configuration(log: Log, robot: RobotModel) -> np.ndarray:
    """Pinocchio configurations (N, nq) from ``log.base_pos``, ``log.base_quat`` (w, x, y, z), ``log.q``."""
    n = log.n_samples
    q = np.zeros((n, robot.nq))
    q[:, :3] = np.asarray(log.base_pos, float)
    quat = np.asarray(log.base_quat, float)
    quat = quat / np.linalg.norm(quat, axis=1, keepdims=True)
    q[:, 3:6] = quat[:, 1:]
    q[:, 6] = quat[:, 0]
    q[:, robot.joint_index_q()] = np.asarray(log.q, float)
    return q


class FloatingBaseSmoother(JointSmoother):
    """Joint state / parameter / contact-force smoother for a free-flyer robot (``fit(log)``, ``result_``).

    Args (besides those of `JointSmoother` that apply: inertia, friction, friction_velocity_scale,
    knot_stride, sigma_q, sigma_v, sigma_tau, prior_relative, prior_mean, max_iterations, tol):
        knot_stride: samples per knot; None (default): from the log (`noise.knot_stride_from_log`: 10×
            the joints' bandwidth, at most 10 ms, a quarter of the shortest contact phase), recorded in
            ``knot_spacing_`` and the summary.
        contact_frames: foot frame names (each gets a λ block; stance flags from ``log.contacts``);
            default: ``robot.contact_frames``, else the log's contact columns.
        contact_radius: foot sphere radius ρ [m] (contact point ρ below the frame origin); default
            ``robot.contact_radius``.
        constraints: ``"hard"`` (augmented Lagrangian to ``constraint_tol``) or ``"soft"`` (penalties).
        total_mass: known total mass [kg] (default ``robot.total_mass``; None: not used);
            ``total_mass_std`` [kg]: 0 = constraint, > 0 = soft prior.
        symmetry: a `SymmetryMap`, ``"robot"`` (the robot's symmetry pairs), ``"joints"`` (only friction
            and armature of the robot's mirrored joints: mirrored legs carry the same actuators — on a
            MuJoCo B1 sway it lowers the held-out error 1.93 → 1.40× the floor at σ = 0.01), None, or
            ``"auto"`` (default: ``"joints"`` when some foot never leaves the ground in the log, None
            when every foot swings at some point, see `_resolve_symmetry`; robots without symmetry
            pairs: none);
            ``symmetry_std``: 0 = constraint, > 0 = soft prior with this relative std.
        use_imu, sigma_gyro [rad/s], sigma_acc [m/s²]: IMU factors (σ default: from the log's
            high-frequency content, floored at 1e-3 / 1e-2).
        use_forces, sigma_force [N]: measured contact forces as factors when the log has them.
        friction_coefficient, sigma_cone [N]: soft friction cone / unilateral penalty (None: off).
        process_noise: ``"unprojected"`` or ``"projected"`` (eqs. 36–37; see `_projected_whitener`).
        sigma_base_pos [m], sigma_base_rot [rad]: std of the logged base pose.
        sigma_swing_force [N]: std of the zero prior on a swing foot's force.
        reweight_rounds: IRLS rounds re-estimating the joint effort stds from the ID residuals.
        tau_floor_relative: effort noise floor as a fraction of each joint's effort RMS.
        sg_window_s, sg_order: Savitzky–Golay filter of the initial trajectory.
        init: ``"ls"`` (bounded least-squares initial θ, `_initial_parameters`) or ``"prior"``.
        determined_std_ratio: inertial directions whose posterior/prior std ratio exceeds it are kept at
            the prior mean (`_shrink_weak_directions`; None: off).
        refine_iterations: joint iterations after mapping into the requested parameterization.
        touchdown_settle_s: the stance constraints of a foot start this long after its touchdown flag [s]
            (flags that switch on while the foot still moves); 0: at the flag.
        impacts: reset maps with impulses at touchdowns (`_setup_impacts`). Default off: on MuJoCo trot
            logs (soft contacts spread an impact over ~a knot interval) they measured worse than the plain
            integration factor (docs/benchmarks.md).
        energy: work–energy rows per knot interval without a contact change (paper 004 eq. 63);
            ``energy_contact``: their contact work — ``"allowance"`` (default: bound as noise), ``"measured"``
            (modelled from the logged forces) or ``"none"`` (sensor noise only); `energy_contact.py`.
        effort_timing, effort_hold_period: what a logged effort means, "sample" (default) or "hold" (held
            zero-order over the hold period [s], default the sample period: efforts re-timed to the
            knots), as `JointSmoother` (`effort_timing`; "cv" is for fixed-base open chains).
        strategy: Levenberg–Marquardt damping of every stage (`solver.STRATEGIES`): ``"trust-region"``
            (default) or ``"hybrid"`` / ``"line-search"`` (issue 12, session 9: docs/benchmarks.md).
        n_jobs: threads of the linear solves, as `JointSmoother` (None = up to 2, 1 = one thread); used on
            chains of ≥ 2000 knots only (the default knot stride usually keeps a floating-base log below).
    """

    #: LM stops when no θ coordinate moved more than this fraction of its prior std in two consecutive
    #: steps (the parameters stopped moving; the states may still creep)
    THETA_TOL = 1e-3
    #: σ_c scale of the first augmented-Lagrangian round: at scale 1 (the stages' penalty level) the
    #: first rounds reduced the base-wrench violation by ~1 % each on a B1 sway (docs/benchmarks.md).
    AL_INITIAL_SCALE = 1e-2
    #: Initial constraint stds of the augmented Lagrangian (SI units) and the soft-mode stds.
    SIGMA_CONSTRAINT = {
        "base_wrench": 0.05,
        "contact_velocity": 2e-3,
        "contact_acceleration": 0.05,
        "contact_height": 1e-4,
        "total_mass": 1e-2,
        "symmetry": 1e-3,
    }

    def __init__(
        self,
        robot: RobotModel,
        contact_frames=None,
        inertia: str = "log-cholesky",
        friction: str = "coulomb-viscous",
        friction_velocity_scale: float = 0.05,
        knot_stride: int | None = None,
        sigma_q=None,
        sigma_v=None,
        sigma_tau=None,
        sigma_process=None,
        prior_relative: float = 0.7,
        prior_mean: np.ndarray | None = None,
        max_iterations: int = 30,
        tol: float = 1e-3,
        process_fraction: float = 0.3,
        fit_friction: bool = True,
        fit_armature: bool = True,
        contact_radius: float | None = None,
        constraints: str = "hard",
        constraint_tol: float = 1e-6,
        constraint_rounds: int = 20,
        total_mass: float | None = None,
        total_mass_std: float = 0.0,
        symmetry="auto",
        symmetry_std: float = 0.3,
        use_imu: bool = True,
        sigma_gyro: float | None = None,
        sigma_acc: float | None = None,
        use_forces: bool = True,
        sigma_force: float = 1.0,
        friction_coefficient: float | None = 1.0,
        sigma_cone: float = 1.0,
        process_noise: str = "unprojected",
        sigma_base_pos: float = 1e-3,
        sigma_base_rot: float = 1e-3,
        sigma_swing_force: float = 1e-3,
        reweight_rounds: int = 1,
        tau_floor_relative: float = 0.02,
        sg_window_s: float = 0.05,
        sg_order: int = 3,
        refine_iterations: int = 0,
        init: str = "ls",
        determined_std_ratio: float | None = 0.1,
        impacts: bool = False,
        touchdown_settle_s: float = 0.0,
        extra_terms=(),
        verbose: bool = False,
        energy: bool = False,
        energy_contact: str = "allowance",
        effort_timing: str = "sample",
        effort_hold_period: float | None = None,
        strategy: str = "trust-region",
        n_jobs: int | None = None,
    ):
        super().__init__(
            robot,
            inertia=inertia,
            friction=friction,
            friction_velocity_scale=friction_velocity_scale,
            knot_stride=knot_stride,
            sigma_q=sigma_q,
            sigma_v=sigma_v,
            sigma_tau=sigma_tau,
            sigma_process=sigma_process,
            prior_relative=prior_relative,
            prior_mean=prior_mean,
            reweight_rounds=reweight_rounds,
            max_iterations=max_iterations,
            tol=tol,
            solver="structured",
            init=init,
            process_fraction=process_fraction,
            fit_friction=fit_friction,
            fit_armature=fit_armature,
            extra_terms=extra_terms,
            verbose=verbose,
            energy=energy,
            n_jobs=n_jobs,
        )
        self.effort_timing = effort_timing  # issues 11 + 9: `effort_timing` (held efforts re-timed)
        self.effort_hold_period = effort_hold_period
        self.contact_frames = None if contact_frames is None else tuple(contact_frames)
        self.contact_radius = contact_radius
        self.constraints = constraints
        self.constraint_tol = constraint_tol
        self.constraint_rounds = constraint_rounds
        self.total_mass = total_mass
        self.total_mass_std = total_mass_std
        self.symmetry = symmetry
        self.symmetry_std = symmetry_std
        self.use_imu = use_imu
        self.sigma_gyro = sigma_gyro
        self.sigma_acc = sigma_acc
        self.use_forces = use_forces
        self.sigma_force = sigma_force
        self.friction_coefficient = friction_coefficient
        self.sigma_cone = sigma_cone
        self.process_noise = process_noise
        self.sigma_base_pos = sigma_base_pos
        self.sigma_base_rot = sigma_base_rot
        self.sigma_swing_force = sigma_swing_force
        self.tau_floor_relative = tau_floor_relative
        self.sg_window_s = sg_window_s
        self.sg_order = sg_order
        self.refine_iterations = refine_iterations
        self.determined_std_ratio = determined_std_ratio
        self.impacts = impacts
        self.touchdown_settle_s = touchdown_settle_s
        self.energy_contact = energy_contact  # issue 12: contact-work allowance of the energy rows
        self.strategy = strategy  # issue 12 (session 9): LM damping of every stage (`solver.STRATEGIES`)

    # ------------------------------------------------------------------ setup
    def setup(self, log: Log | None = None) -> FloatingBaseSmoother:
        """Layout, models, feet and the inverse-dynamics evaluator (called by ``fit``; public for tests)."""
        robot = self.robot
        if not robot.floating_base or robot.nq != robot.nv + 1:
            raise EstimationError(f"robot {robot.name!r} is not a free-flyer robot")
        if self.constraints not in ("hard", "soft"):
            raise ValueError(f"constraints must be 'hard' or 'soft', not {self.constraints!r}")
        if self.process_noise not in ("unprojected", "projected"):
            raise ValueError(
                f"process_noise must be 'unprojected' or 'projected', not {self.process_noise!r}"
            )
        frames = self.contact_frames
        if frames is None:
            frames = tuple(getattr(robot, "contact_frames", ()) or ())
        if not frames and log is not None:
            frames = tuple(log.contacts)
        if not frames:
            raise EstimationError(
                f"no contact frames: give contact_frames, a robot spec with contacts or "
                f"contact.<frame> columns in the log (robot {robot.name!r})"
            )
        self.feet_ = tuple(frames)
        if friction_model(self.friction).uses_acceleration:  # issue 9 (session 10): fixed-base arms only
            raise EstimationError(f"friction law {self.friction!r} (friction of v + T·a) is not available "
                                  "for floating-base robots yet: use coulomb-viscous(-scale)")
        radius = self.contact_radius
        if radius is None:
            radius = float(getattr(robot, "contact_radius", 0.0) or 0.0)
        self.radius_ = float(radius)
        self.layout_ = ParameterLayout.create(
            robot,
            self.inertia,
            self.friction,
            self.friction_velocity_scale,
            fit_friction=self.fit_friction,
            fit_armature=self.fit_armature,
        )
        self._space = ConfigurationSpace(robot.model)
        self._lm = LevenbergMarquardt(SolverOptions(self.strategy, self.tol, self.max_iterations,
                                                    theta_tol=self.THETA_TOL, verbose=self.verbose,
                                                    threads=resolve_threads(self.n_jobs)))
        self._id = InverseDynamicsResidual(self.layout_)
        self._kin_model = robot.model.copy()
        self._kin_data = self._kin_model.createData()
        self._fids = []
        for f in self.feet_:
            if not self._kin_model.existFrame(f):
                raise EstimationError(f"robot {robot.name!r} has no frame {f!r}")
            self._fids.append(self._kin_model.getFrameId(f))
        self.nf = len(self._fids)
        self.nx = 3 * robot.nv + 3 * self.nf
        if robot.loops:  # closed loops (issue 11): the closure-force block after the contact forces
            self.nx += floating_loops.n_rows(robot)
        self._offset = np.array([0.0, 0.0, -self.radius_])
        self._contact = ContactGeneralizedForces(robot.model, self._fids, self.radius_)
        return self

    # ------------------------------------------------------------------ contact-force term
    def contact_term(self, q, lam, jacobians: bool = True):
        """τ_c = Σ_f J_cᵀ λ_f (N, nv); dτ_c/dδq (N, nv, nv); dτ_c/dλ (N, nv, 3 nf)
        (`factors.contact_forces.ContactGeneralizedForces`: local foot axes, rolling contact point)."""
        return self._contact.evaluate(q, lam, jacobians)

    def id_factor(self, q, v, a, lam, theta, tau_meas, jacobians: bool = True):
        """Unweighted ID residual with the contact term: r (N, nv), Jx (N, nv, nx), Jθ (N, nv, nθ)."""
        nv = v.shape[1]
        mask = getattr(self, "_force_mask", None)
        if mask is not None and mask.shape[0] == q.shape[0]:  # impulse slots are not forces
            lam = lam * mask
        tau_c, dq, dl = self.contact_term(q, lam, jacobians)
        if jacobians and mask is not None and mask.shape[0] == q.shape[0]:
            dl = dl * mask[:, None, :]
        lin = self._id.evaluate(q, v, a, tau_meas, theta, jacobians, external=tau_c)
        if not jacobians:
            return lin.r, None, None
        n = q.shape[0]
        Jx = np.zeros((n, nv, self.nx))
        Jx[:, :, :nv] = lin.Jq - dq
        Jx[:, :, nv : 2 * nv] = lin.Jv
        Jx[:, :, 2 * nv : 3 * nv] = lin.Ja
        Jx[:, :, 3 * nv : 3 * nv + dl.shape[2]] = -dl
        return lin.r, Jx, lin.Jtheta

    def forces_world(self, q, lam) -> np.ndarray:
        """World-axes contact forces (N, nf, 3) = R_f(q) λ_f (`factors.contact_forces.world_forces`)."""
        m, d = self._kin_model, self._kin_data
        return np.stack([world_forces(m, d, fid, q, lam[:, 3 * i : 3 * i + 3], jacobians=False)[0]
                         for i, fid in enumerate(self._fids)], axis=1)

    # ------------------------------------------------------------------ fit
    def _fit(self, log: Log) -> FloatingBaseSmoother:  # JointSmoother.fit wraps it (BLAS threads)
        t_start = time.perf_counter()
        robot = self.robot
        if tuple(log.joint_names) != tuple(robot.joint_names):
            raise EstimationError(
                f"log joints {list(log.joint_names)} do not match robot {robot.name!r} joints "
                f"{list(robot.joint_names)}"
            )
        if robot.loops:  # closed loops (issue 11): unencoded joints filled in from the closures
            log = floating_loops.prepare_log(self, log)
        self.setup(log)
        nv, iv = robot.nv, robot.joint_index_v()
        has_base = log.base_pos is not None and log.base_quat is not None
        if has_base:
            qfull = full_configuration(log, robot)
        else:
            warnings.warn(
                "no base pose in the log (base.pos.*, base.quat.*): the base pose comes from the "
                "IMU, contacts and dynamics, anchored at the first knot",
                stacklevel=2,
            )
            qfull = np.tile(robot.neutral(), (log.n_samples, 1))
            qfull[:, robot.joint_index_q()] = np.asarray(log.q, float)
            if log.imu_quat is not None:
                quat = np.asarray(log.imu_quat, float)
                qfull[:, 3:6], qfull[:, 6] = quat[:, 1:], quat[:, 0]
        missing_feet = [f for f in self.feet_ if f not in log.contacts]
        if missing_feet:
            raise EstimationError(
                f"log {log.source!r} has no contact flags for {missing_feet} (columns contact.<frame>)"
            )
        dt = float(np.median(np.diff(log.t)))
        w = max(int(round(self.sg_window_s / dt)) // 2 * 2 + 1, self.sg_order + 2 | 1)
        rows, qs, vs, as_ = manifold_sg_states(robot.model, qfull, dt, w, self.sg_order)
        if self.knot_stride is None:  # from the log's bandwidth and contact phases
            flags = np.stack([np.asarray(log.contacts[f], bool) for f in self.feet_], axis=1)
            stride, self.knot_spacing_ = knot_stride_from_log(log.t, np.asarray(log.q, float), flags)
            self._log(f"knot stride {stride} ({self.knot_spacing_['knot_spacing_s'] * 1e3:.1f} ms; "
                      f"limited by {self.knot_spacing_['limited_by']}, joint bandwidth "
                      f"{self.knot_spacing_['bandwidth_hz']:.2f} Hz)")
        else:
            stride = max(int(self.knot_stride), 1)
            self.knot_spacing_ = {"stride": stride, "knot_spacing_s": stride * dt, "limited_by": "given"}
        sel = np.arange(0, rows.size, stride)
        idx = rows[sel]
        if idx.size < 4:
            raise EstimationError(f"log {log.source!r}: too few knots ({idx.size})")
        self._idx = idx
        t = log.t[idx]
        self.knot_times_ = t
        self._h = np.diff(t)
        self._qm = qfull[idx]
        self._has_base = has_base
        self._vm = None
        if log.v is not None:
            self._vm = np.zeros((idx.size, nv))
            self._vm[:, iv] = np.asarray(log.v, float)[idx]
        taum = np.zeros((idx.size, nv))
        taum[:, iv] = np.nan_to_num(np.asarray(log.tau, float)[idx])
        self._taum = taum
        self._tau_mask = np.ones((idx.size, nv), bool)
        self._tau_mask[:, iv] = np.asarray(log.tau_measured, bool)[None, :]
        self._flags = np.stack([np.asarray(log.contacts[f], bool)[idx] for f in self.feet_], axis=1)
        # contact constraints start `touchdown_settle_s` after a touchdown (a flag that turns on while the
        # foot still moves, as MuJoCo's and many estimators' do); the force is free from the flag on
        self._cflags = self._flags.copy()
        n_settle = int(np.ceil(self.touchdown_settle_s / max(float(np.median(self._h)), 1e-12) - 1e-9))
        if n_settle > 0:
            for i in range(self.nf):
                run = 0
                for k in range(self._flags.shape[0]):
                    run = run + 1 if self._flags[k, i] else 0
                    if 0 < run <= n_settle and k > 0:
                        self._cflags[k, i] = False
        self._stance_pairs = self._cflags[1:] & self._cflags[:-1]
        self._energy_log = self._energy_data(log) if self.energy else None  # issue 12: work–energy term
        self._setup_impacts()
        # IMU and measured forces
        self._gyro = self._acc = None
        self._imu_fid = None
        if self.use_imu and (log.imu_gyro is not None or log.imu_acc is not None):
            imu_frame = (
                getattr(robot, "imu_frame", None)
                or robot.model.frames[int(np.argmax([f.parentJoint == 1 for f in robot.model.frames]))].name
            )
            self._imu_fid = self._kin_model.getFrameId(imu_frame)
            self.imu_frame_ = imu_frame
            if log.imu_gyro is not None:
                self._gyro = np.asarray(log.imu_gyro, float)[idx]
                sg = self.sigma_gyro or float(np.nanmax(highfreq_noise_std(np.asarray(log.imu_gyro, float))))
                self._sigma_gyro = max(sg, 1e-3)
            if log.imu_acc is not None:
                self._acc = np.asarray(log.imu_acc, float)[idx]
                sa = self.sigma_acc or float(np.nanmax(highfreq_noise_std(np.asarray(log.imu_acc, float))))
                self._sigma_acc = max(sa, 1e-2)
        self._fmeas = None
        if self.use_forces and log.forces and all(f in log.forces for f in self.feet_):
            self._fmeas = np.stack([np.asarray(log.forces[f], float)[idx] for f in self.feet_], axis=1)
        self._energy_allowance = None  # issue 12: contact-work allowance (energy_contact.py)
        if self._energy_log is not None:
            self._energy_allowance = self._contact_work_allowance(log, qfull, rows, vs)
        # the SG-smoothed configuration conflicts with tight encoders: start at the measured one
        q0, v0, a0 = qfull[idx].copy(), vs[sel], as_[sel]
        self.noise_ = noise = self._noise_levels(log, idx, a0[:, iv], {})
        if self.sigma_tau is None:  # model error of a prior-mean θ dominates a noise-free log's effort noise
            noise.tau = np.maximum(noise.tau, self.tau_floor_relative * noise.tau_rms)
            noise.source["tau"] += f", floored at {self.tau_floor_relative:g} x the effort RMS"
        effort_timing.apply(self, log, idx)  # issues 11 + 9: held efforts re-timed to the knots (or no-op)
        # a noise-free log still disagrees with the rigid-contact model at the 1e-4 level (soft contacts,
        # slip): encoder / velocity stds below that only make the problem stiff
        if self.sigma_q is None:
            noise.q = np.maximum(noise.q, SIGMA_Q_FLOOR)
        if self.sigma_v is None and noise.v is not None:
            noise.v = np.maximum(noise.v, SIGMA_V_FLOOR)
        a_rms = np.sqrt(np.mean(a0**2, axis=0))
        h = float(np.median(self._h))
        if self.sigma_process is None:
            self._proc_v = np.maximum(self.process_fraction * a_rms, 1e-3) * h
        else:
            self._proc_v = np.broadcast_to(np.asarray(self.sigma_process, float), (nv,)) * h
        self._proc_q = self._proc_v * h
        # θ: stages 1-2 run in the raw inertial parameterization (the inverse dynamics are linear in it,
        # so Gauss–Newton steps on weakly determined parameters do not overshoot), stage 3 continues in
        # the requested one from the projection of the raw estimate onto the physically consistent set
        requested = self.inertia
        p_bar = (
            self.layout_.nominal_physical() if self.prior_mean is None else np.asarray(self.prior_mean, float)
        )
        self._p_bar = p_bar
        self._p_scale = None
        theta = self._use_parameterization("raw", p_bar)
        unmeasured = [j for j, m_ in zip(robot.joint_names, log.tau_measured, strict=True) if not m_]
        if robot.loops:  # passive joints have no effort by design (and no decoupled-LS start)
            unmeasured = [j for j in unmeasured if j not in robot.actuation.passive]
        if unmeasured:
            warnings.warn(f"efforts not measured for joints {unmeasured}: their inverse-dynamics rows are "
                          "left out (and the least-squares initial θ, which needs every effort, is skipped)",
                          stacklevel=3)
        use_ls = self.init == "ls" and has_base and not unmeasured
        p_init = self._initial_parameters(log, qfull, p_bar) if use_ls else None
        if p_init is not None and robot.loops:  # passive joints: no rotor (issue 11)
            p_init = floating_loops.fix_passive(robot, self.layout_, p_init)
        if p_init is not None:
            self._p_scale = np.where(np.arange(p_bar.size) < 10 * robot.n_bodies, p_bar,
                                     np.maximum(p_init, p_bar))
            theta = self._use_parameterization("raw", p_init)
        # λ: static split of the nominal weight over the stance feet, rotated into the foot frames
        mass = float(np.sum(self.layout_.split(p_bar)[0][:, 0]))
        lam0 = np.zeros((idx.size, 3 * self.nf))
        m, d = self._kin_model, self._kin_data
        for k in range(idx.size):
            ns = int(self._flags[k].sum())
            if ns == 0:
                continue
            pin.framesForwardKinematics(m, d, q0[k])
            for i, fid in enumerate(self._fids):
                if self._flags[k, i]:
                    lam0[k, 3 * i : 3 * i + 3] = d.oMf[fid].rotation.T @ np.array([0, 0, mass * GRAVITY / ns])
        x = (q0, v0, a0, lam0)
        self._proj_whitener = None
        if robot.loops:  # closure-consistent initial states and closure forces λ_L (issue 11)
            self.problem_ = self._build_problem(noise)
            x = floating_loops.init_forces(self, floating_loops.project_states(self, x), theta)
        self.problem_ = self._build_problem(noise)
        self._initial_cost = self.problem_.cost(x, theta)
        # stage 1: states and forces with θ held at the prior mean
        x, theta, _, history = self._run(x, theta, noise, 0, freeze_theta=True)
        if self.process_noise == "projected":
            self._proj_whitener = self._projected_whitener(x, theta)
        # stage 2 (+ IRLS rounds): everything; the joint effort stds re-estimated from the ID residuals
        converged = False
        rounds = 1 + max(int(self.reweight_rounds), 0) if self.sigma_tau is None else 1
        for rnd in range(rounds):
            x, theta, converged, hist = self._run(x, theta, noise, rnd + 1)
            history += hist
            if rnd == rounds - 1:
                break
            r = (floating_loops.id_residual(self, x, theta) if robot.loops  # closure forces (issue 11)
                 else self.id_factor(*x, theta, self._taum, jacobians=False)[0])
            rms = np.sqrt(np.mean(r**2, axis=0))
            noise.tau = np.maximum(noise.tau, rms[iv])
            noise.source["tau"] = f"re-estimated from inverse-dynamics residuals (round {rnd + 1})"
        if self.determined_std_ratio is not None:
            theta = self._shrink_weak_directions(x, theta, noise)
        if self.determined_std_ratio is not None or self._hard_parameter_rows():
            theta = self.layout_.to_theta(self._enforce_parameter_equalities(self.layout_.to_physical(theta)))
            x, _, _, hist = self._run(x, theta, noise, rounds + 1, freeze_theta=True)
            history += hist
        # stage 3: physically consistent parameters in the requested parameterization. Bodies whose raw
        # estimate is not consistent are projected onto the consistent set (nearest pseudo-inertia with
        # eigenvalues above a floor); optionally states, forces and θ refined together
        p_raw = self.layout_.to_physical(theta)
        self.projected_bodies_ = check_physical_consistency(
            self.layout_.split(p_raw)[0], list(robot.body_names)
        )
        if requested != "raw":
            theta = self._use_parameterization(requested, p_raw)
            if self.projected_bodies_:
                self._log(
                    "raw estimate not physically consistent: "
                    + "; ".join(self.projected_bodies_)
                    + " -> projected"
                )
            if self.refine_iterations > 0:
                x, theta, converged, hist = self._run(
                    x, theta, noise, rounds + 1, max_iterations=self.refine_iterations
                )
                history += hist
            theta = self._consistent_with_equalities(theta)
        if robot.loops:  # states, contact and closure forces re-equilibrated at this θ first (issue 11)
            x, _, _, hist = self._run(x, theta, noise, rounds + 2, freeze_theta=True)
            history += hist
        # stage 4: the constraints to tolerance at this θ (augmented Lagrangian on states and forces)
        self.problem_ = self._build_problem(noise)
        viol = self.constraint_violations(x, theta)
        al_rounds = 0
        if self.constraints == "hard":
            x, theta, hist, viol, al_rounds = self._lm.augmented_lagrangian(
                self.problem_, x, theta, self.constraint_rounds, self.constraint_tol, freeze_theta=True,
                initial_scale=self.AL_INITIAL_SCALE)
            history += hist
        if robot.loops:  # final projection of the passive joints onto the closures (issue 11)
            x = floating_loops.project_states(self, x)
            viol = self.constraint_violations(x, theta)
        self._finish(log, x, theta, noise, t, history, converged, viol, al_rounds, t_start)
        return self

    def _initial_parameters(self, log: Log, qfull: np.ndarray, p_bar: np.ndarray) -> np.ndarray | None:
        """Initial physical parameters: the decoupled least squares (Savitzky–Golay states, efforts
        projected onto the stance-contact null space, `DecoupledFloatingBaseLS.system`) as a bounded MAP
        problem — prior p̄ with the raw prior stds, friction and armature ≥ 0 (scipy ``lsq_linear``), rows
        weighted by 2 % of their RMS. Friction and armature then start from the data rather than from the
        URDF's (often zero) values, where the exp parameterizations have vanishing gradients."""
        from scipy.optimize import lsq_linear

        from .floating_baseline import DecoupledFloatingBaseLS

        try:
            if self.robot.loops:  # contact and closure forces eliminated (issue 11)
                A, b = floating_loops.projected_system(self, log, qfull)
            else:
                A, b, _, _, _ = DecoupledFloatingBaseLS(velocity_scale=self.friction_velocity_scale).system(
                    qfull, log.t, np.nan_to_num(np.asarray(log.tau, float)), log.contacts, self.robot
                )
        except ValueError as e:
            warnings.warn(
                f"least-squares initial parameters unavailable ({e}); starting at the prior mean",
                stacklevel=3,
            )
            return None
        lay = self.layout_  # raw layout: θ = p for the inertias
        _, std = lay.prior(self.prior_relative, mean_physical=p_bar)
        p_std = np.abs(lay.jacobian(lay.to_theta(p_bar))) @ std  # diagonal Jacobian: physical stds
        nb10 = 10 * self.robot.n_bodies
        p_std[nb10:] = 10.0  # weak: friction and armature set by the data and the bounds
        sb = 0.02 * max(float(np.sqrt(np.mean(b**2))), 1e-9)
        lo = np.full(p_bar.size, -np.inf)
        lo[nb10:] = 0.0
        if not self.fit_friction:
            lo[lay.s_friction], p_std[lay.s_friction] = p_bar[lay.s_friction] - 1e-12, 1e-9
        if not self.fit_armature:
            lo[lay.s_armature], p_std[lay.s_armature] = p_bar[lay.s_armature] - 1e-12, 1e-9
        M = np.vstack([A / sb, np.diag(1.0 / p_std)])
        rhs = np.concatenate([b / sb, p_bar / p_std])
        sol = lsq_linear(M, rhs, bounds=(lo, np.full(p_bar.size, np.inf)), lsmr_tol="auto", max_iter=500)
        p = sol.x.copy()
        p[nb10:] = np.maximum(p[nb10:], 1e-3 * np.maximum(p_bar[nb10:], 1e-6))  # exp-positive coordinates
        self._log(
            f"initial θ: bounded least squares on {A.shape[0]} contact-projected rows "
            f"({sol.status}, {sol.nit} iterations)"
        )
        return p

    def _shrink_weak_directions(self, x, theta, noise):
        """Reset the components of θ − θ̄ along directions the data determine weakly to the prior mean.

        With S the Schur complement of θ (all factors, states eliminated) and P the prior's information,
        the data information in prior-whitened coordinates is G = D (S − P) D (D = prior stds); along an
        eigenvector with eigenvalue μ the posterior std is (1 + μ)^(-1/2) × the prior's. Eigenvectors whose
        ratio exceeds ``determined_std_ratio`` (default 0.1: μ < 99) are directions where a MAP estimate
        follows small systematic model errors (soft contacts, rolling feet, dry friction) rather than the
        robot — e.g. the mass at a stance foot's
        contact point, exactly unobservable from stance data (module docstring). Truncating them is the
        truncated-SVD regularization of the decoupled baseline, applied to the joint problem."""
        problem = self._build_problem(noise)
        graph = problem.linearize(x, theta)
        for damping in (0.0, 1e-9, 1e-7):  # relative Marquardt damping, only if a state block is
            try:  # numerically indefinite without it (ill-conditioned knot blocks, e.g. an arm at rest)
                S = self._lm.linear_solve(graph, damping).schur
                break
            except SingularSystemError:
                if damping == 1e-7:
                    raise
        Jp = graph.prior_jacobian()
        si = self.layout_.s_inertial
        other = np.ones(theta.size, bool)
        other[si] = False
        # information on the inertial block with friction and armature marginalized (their prior mean is
        # not a meaningful reference: URDFs rarely carry friction), minus the inertial prior's
        S_ii = S[si, si] - S[si][:, other] @ np.linalg.solve(S[np.ix_(other, other)], S[other][:, si])
        D = self._theta_std[si]
        P_ii = (Jp.T @ Jp)[si, si]
        G = D[:, None] * (S_ii - P_ii) * D[None, :]
        mu, U = np.linalg.eigh(0.5 * (G + G.T))
        threshold = 1.0 / self.determined_std_ratio**2 - 1.0  # posterior/prior std = (1 + μ)^(-1/2)
        weak = U[:, mu < threshold]
        dw = (theta[si] - self._theta_bar[si]) / D
        dw -= weak @ (weak.T @ dw)
        theta = theta.copy()
        theta[si] = self._theta_bar[si] + D * dw
        self.weak_directions_ = int(weak.shape[1])
        self._log(
            f"{weak.shape[1]} of {D.size} inertial parameter directions weakly determined by the log "
            f"(posterior/prior std > {self.determined_std_ratio:g}): kept at the prior mean"
        )
        return theta

    def _consistent_with_equalities(self, theta: np.ndarray) -> np.ndarray:
        """Alternate projections onto the hard parameter equalities (linear in p) and the physically
        consistent set until both hold."""
        if not self._hard_parameter_rows():
            return theta
        for _ in range(100):
            p_eq = self._enforce_parameter_equalities(self.layout_.to_physical(theta))
            theta = self.layout_.to_theta_projected(p_eq, self._p_bar)[0]
            if np.abs(self.layout_.to_physical(theta) - p_eq).max() < 1e-9 * max(np.abs(p_eq).max(), 1.0):
                break
        return theta

    def _hard_parameter_rows(self) -> list[str]:
        names = []
        if self._total_mass is not None and self.total_mass_std <= 0:
            names.append("total_mass")
        if self._symmetry is not None and self.symmetry_std <= 0:
            names.append("symmetry")
        return names

    def _enforce_parameter_equalities(self, p: np.ndarray) -> np.ndarray:
        """Project p onto the hard parameter equalities A p = b (total mass Σ m_b = M; symmetry
        p_left − R p_right = 0), both linear in the physical parameters, in the metric of the prior
        variances: p − W Aᵀ (A W Aᵀ)⁻¹ (A p − b)."""
        hard = self._hard_parameter_rows()
        if not hard:
            return p
        lay = self.layout_
        rows, rhs = [], []
        if "total_mass" in hard:
            a = np.zeros(lay.n)
            a[np.arange(lay.s_inertial.start, lay.s_inertial.stop, 10)] = 1.0
            rows.append(a[None])
            rhs.append([self._total_mass])
        if "symmetry" in hard:
            A = self._symmetry.matrix(lay)
            rows.append(A)
            rhs.append(np.zeros(A.shape[0]))
        A, b = np.vstack(rows), np.concatenate(rhs)
        w = getattr(self, "_eq_weights", None)
        if w is None:  # prior variances in physical units, from the raw layout (diagonal dp/dθ)
            raw = ParameterLayout.create(
                self.robot,
                "raw",
                self.friction,
                self.friction_velocity_scale,
                fit_friction=self.fit_friction,
                fit_armature=self.fit_armature,
            )
            _, std = raw.prior(self.prior_relative, mean_physical=self._p_bar)
            w = (np.abs(np.diag(raw.jacobian(raw.to_theta(self._p_bar)))) * std) ** 2
            w = self._eq_weights = np.maximum(w, 1e-12 * max(w.max(), 1e-300))
        AW = A * w[None, :]
        lam = np.linalg.lstsq(AW @ A.T, A @ p - b, rcond=None)[0]
        return p - AW.T @ lam

    def _use_parameterization(self, inertia: str, p_now: np.ndarray) -> np.ndarray:
        """Switch the layout (and the ID evaluator, prior, parameter rows) to ``inertia``; θ of ``p_now``
        (inconsistent bodies projected onto the consistent set, `ParameterLayout.to_theta_projected`)."""
        self.layout_ = ParameterLayout.create(
            self.robot,
            inertia,
            self.friction,
            self.friction_velocity_scale,
            fit_friction=self.fit_friction,
            fit_armature=self.fit_armature,
        )
        self._id = InverseDynamicsResidual(self.layout_)
        theta_bar, theta_std = self.layout_.prior(self.prior_relative, mean_physical=self._p_bar)
        if self.robot.loops:  # passive joints have no rotor (issue 11)
            from . import loop_terms

            theta_bar, theta_std = loop_terms.adjust_prior(self.robot, self.layout_, theta_bar, theta_std)
        self._theta_bar, self._theta_std = theta_bar, theta_std
        self._setup_parameter_constraints(theta_bar)
        theta, _ = self.layout_.to_theta_projected(p_now, self._p_bar)
        return theta

    # ------------------------------------------------------------------ constraints
    def _setup_parameter_constraints(self, theta_bar):
        lay, robot = self.layout_, self.robot
        tm = self.total_mass if self.total_mass is not None else getattr(robot, "total_mass", None)
        self._total_mass = None if tm is None else float(tm)
        sym = self.resolved_symmetry_ = self._resolve_symmetry()
        if isinstance(sym, str) and sym in ("robot", "joints"):
            sym = robot.symmetry_map() if hasattr(robot, "symmetry_map") else None
            if sym is not None and self.resolved_symmetry_ == "joints":
                # friction and armature of mirrored joints only
                sym = SymmetryMap((), sym.joint_pairs, sym.plane)
        self._symmetry = sym if isinstance(sym, SymmetryMap) else None
        self._sym_std = None
        if self._symmetry is not None:
            # relative to the data's scale where there is one (URDFs rarely carry friction: a relative std
            # of their near-zero values would be a hard constraint)
            p_ref = getattr(self, "_p_scale", None)
            p_ref = lay.to_physical(theta_bar) if p_ref is None else p_ref
            self._sym_std = symmetry_relative_std(self._symmetry, lay, p_ref, max(self.symmetry_std, 1e-3))

    def _resolve_symmetry(self):
        """``"auto"``: ``"joints"`` when some foot stays in stance for the whole log, else None.

        In four-foot stance a leg's three joint torques can always be balanced by its own contact force,
        so friction that differs between mirrored joints trades against internal contact forces and is
        determined only through the base wrench; the symmetry prior regularizes it (MuJoCo B1 sway:
        1.93 → 1.40× the floor). Once every foot swings at some point, each leg's joints are observed
        without an unknown force, and a symmetry prior only biases actuators that differ (MuJoCo B1 step
        in place: 1.37 with it, 1.23× without; docs/benchmarks.md)."""
        if not (isinstance(self.symmetry, str) and self.symmetry == "auto"):
            return self.symmetry
        flags = getattr(self, "_flags", None)
        if flags is None or flags.all(axis=0).any():
            return "joints"
        return None

    def _parameter_row_functions(self):
        """Total-mass and symmetry rows as (name, fn(θ, jacobians) -> (r, J), hard, σ), r unweighted (SI)."""
        rows = []
        lay, sym, std = self.layout_, self._symmetry, self._sym_std
        if self._total_mass is not None:
            mass = self._total_mass
            rows.append(("total_mass", lambda th, jac: total_mass_residual(lay, th, mass, jac),
                         self.total_mass_std <= 0, max(self.total_mass_std, 0.0)))
        if sym is not None:
            def symmetry(th, jac):
                # symmetry_residual is whitened by the relative std; r·std is the raw difference
                r, J = symmetry_residual(lay, th, sym, jac, std=std)
                return r * std, None if J is None else J * std[:, None]

            rows.append(("symmetry", symmetry, self.symmetry_std <= 0, std))
        return rows

    def constraint_violations(self, x, theta) -> dict:
        """Raw constraint residuals (masked to where they apply) by group, SI units."""
        return self.problem_.violations(x, theta)

    def _heights(self, q, jacobians=True):
        """Foot heights z (N, nf) [m] and their Jacobians (N, nf, nv) (z-row of the LOCAL_WORLD_ALIGNED
        linear frame Jacobian; for a sphere on a plane the centre height is constant while it rolls),
        one kinematics pass per knot for all feet."""
        m, d = self._kin_model, self._kin_data
        N, nv = q.shape[0], m.nv
        z = np.empty((N, self.nf))
        Jz = np.zeros((N, self.nf, nv)) if jacobians else None
        for k in range(N):
            if jacobians:
                pin.computeJointJacobians(m, d, q[k])
                pin.updateFramePlacements(m, d)
            else:
                pin.framesForwardKinematics(m, d, q[k])
            for i, fid in enumerate(self._fids):
                z[k, i] = d.oMf[fid].translation[2]
                if jacobians:
                    Jz[k, i] = pin.getFrameJacobian(m, d, fid, pin.LOCAL_WORLD_ALIGNED)[2]
        return z, Jz

    # ------------------------------------------------------------------ result
    def _finish(self, log, x, theta, noise, t, history, converged, viol, al_rounds, t_start):
        q, v, a, lam = x[:4]
        self.states_ = x  # final knot states (q, v, a, λ), the problem's variables with θ = result_.theta
        robot = self.robot
        iv = robot.joint_index_v()
        cov = self._lm.covariance(self.problem_, x, theta)
        r_id = self.id_factor(q, v, a, lam, theta, self._taum, jacobians=False)[0]
        if robot.loops:  # with the closure forces (issue 11)
            r_id = floating_loops.id_residual(self, x, theta)
        fw = self.forces_world(q, lam)
        cols = {}
        for i, c in enumerate("xyz"):
            cols[f"base.pos.{c}"] = q[:, i]
        for i, c in zip((6, 3, 4, 5), "wxyz", strict=True):
            cols[f"base.quat.{c}"] = q[:, i]
        for i, c in enumerate(("vx", "vy", "vz", "wx", "wy", "wz")):
            cols[f"base.{c}"] = v[:, i]
        for i, f in enumerate(self.feet_):
            cols[f"contact.{f}"] = self._flags[:, i].astype(np.int8)
            for j, c in enumerate("xyz"):
                cols[f"force.{f}.{c}"] = fw[:, i, j]
        max_viol = {k: float(np.abs(val).max()) if np.size(val) else 0.0 for k, val in viol.items()}
        if robot.loops:  # loop constraints in SI units (issue 11)
            max_viol = floating_loops.residuals_si(viol)
        p = self.layout_.to_physical(theta)
        mass = float(np.sum(self.layout_.split(p)[0][:, 0]))
        extras = {
            "knot_spacing": self.knot_spacing_,
            "floating_base": {
                "contact_frames": list(self.feet_),
                "contact_radius": self.radius_,
                "constraints": self.constraints,
                "constraint_tol": self.constraint_tol,
                "augmented_lagrangian_rounds": int(al_rounds),
                "constraint_residual_max": max_viol,
                "constraints_satisfied": bool(
                    self.constraints == "hard" and max(max_viol.values()) <= self.constraint_tol
                ),
                "constraint_units": {k: CONSTRAINT_UNITS[k] for k in max_viol},
                "total_mass_estimate": mass,
                "total_mass_prior": None
                if self._total_mass is None
                else {"value": self._total_mass, "std": self.total_mass_std},
                "symmetry": None
                if self._symmetry is None
                else {
                    "mode": self.resolved_symmetry_ if isinstance(self.resolved_symmetry_, str) else "map",
                    "requested": self.symmetry if isinstance(self.symmetry, str) else "map",
                    "body_pairs": len(self._symmetry.body_pairs),
                    "joint_pairs": len(self._symmetry.joint_pairs),
                    "std": self.symmetry_std,
                },
                "imu": {
                    "frame": getattr(self, "imu_frame_", None),
                    "gyro": self._gyro is not None,
                    "accelerometer": self._acc is not None,
                },
                "measured_forces_used": self._fmeas is not None,
                "process_noise": self.process_noise,
                "joint_effort_residual_rms": np.sqrt(np.mean(r_id[:, iv] ** 2, axis=0)).tolist(),
            }
        }
        if robot.loops:  # closures, actuation, motor-side parameters (issue 11)
            extras.update(floating_loops.summary_extras(self, x, theta, cov))
        self.result_ = IdentificationResult.build(
            layout=self.layout_,
            theta=theta,
            theta_cov=cov,
            theta_prior=(self._theta_bar, self._theta_std),
            t=t,
            q=q,
            v=v,
            a=a,
            history=history,
            converged=converged,
            seconds=time.perf_counter() - t_start,
            noise=noise.as_dict(),
            method="floating-smoother",
            knots=int(t.size),
            id_residual=r_id[:, iv] * self._tau_mask[:, iv],
            measured_joints=[j for j, mm in zip(robot.joint_names, log.tau_measured, strict=True) if mm],
            extra_columns=cols,
            extras=extras,
        )
        self.state_ = {
            "t": t,
            "q": q,
            "v": v,
            "a": a,
            "lam": lam,
            "forces_world": fw,
            "contact": self._flags,
            "id_residual": r_id,
            "initial_cost": self._initial_cost,
        }

    # ------------------------------------------------------------------ impacts (reset maps)
    def _setup_impacts(self):
        """Touchdowns: a foot in swing at knot k and in stance at k + 1. With ``impacts`` on, the
        integration factor of that interval is replaced by the reset map (paper 004 eqs. 7–11, plastic
        impact, restitution 0): the position row from the pre-impact motion,
        q_{k+1} ⊖ q_k − h v_k − h²/2 a_k = 0, and the impulse–momentum row
        (M(q_{k+1}) + diag(armature))(v_{k+1} − v⁻) − Σ_f J_fᵀ Λ_f = 0 with v⁻ = v_k + h a_k and the
        post-impact contact velocity constrained to zero by the stance factors at k + 1. The impulse Λ_f
        [N·s, foot axes] of a touching-down foot lives in that foot's force slot at knot k (free: the foot
        is in swing there), which is taken out of knot k's inverse dynamics and swing prior."""
        N = self._flags.shape[0]
        self._impacts = []
        self._impulse_slot = np.zeros((N, self.nf), bool)
        if self.impacts:
            touchdown = self._flags[1:] & ~self._flags[:-1]
            for k in np.nonzero(touchdown.any(axis=1))[0]:
                feet = np.nonzero(touchdown[k])[0]
                self._impacts.append((int(k), feet))
                self._impulse_slot[k, feet] = True
        self._smooth_interval = np.ones(N - 1)
        for k, _ in self._impacts:
            self._smooth_interval[k] = 0.0
        self._force_mask = np.repeat(~self._impulse_slot, 3, axis=1).astype(float)
        if self._impacts:
            m = self.robot.model
            M = pin.crba(m, m.createData(), self.robot.neutral())
            self._impact_scale = np.sqrt(np.maximum(np.diag(M), 1e-6))
            self._log(f"{len(self._impacts)} touchdown intervals: reset maps with impulses")

    def _impact_factors(self, q, v, a, lam, theta, jacobians, freeze_theta):
        """Whitened impact pair factors [(k, J0, J1, Jθ, r)] (see `_setup_impacts`). Rows: position
        (process σ_q), impulse–momentum (process σ_v × √diag M at the neutral posture)."""
        from ..factors.reset_map import impact_residual

        nv, nx, lay = v.shape[1], self.nx, self.layout_
        iv = self.robot.joint_index_v()
        p = lay.to_physical(theta)
        pi = lay.split(p)[0].ravel()
        arm = np.zeros(nv)
        arm[iv] = p[lay.s_armature]
        Jlay = lay.jacobian(theta) if jacobians and not freeze_theta else None
        wq = 1.0 / self._proc_q
        wi = 1.0 / (self._proc_v * self._impact_scale)
        out = []
        for k, feet in self._impacts:
            h = float(self._h[k])
            fids = [self._fids[i] for i in feet]
            slots = np.concatenate([np.arange(3 * i, 3 * i + 3) for i in feet])
            vminus = v[k] + h * a[k]
            rq = self._space.difference(q[k:k + 1], q[k + 1:k + 2])[0] - h * v[k] - 0.5 * h * h * a[k]
            ri, Ji = impact_residual(self.robot.model, fids, q[k + 1], vminus, v[k + 1], lam[k, slots], pi,
                                     arm, jacobians)
            r = np.concatenate([rq * wq, ri[0] * wi])
            if not jacobians:
                out.append((k, None, None, None, r))
                continue
            J0 = np.zeros((2 * nv, nx))
            J1 = np.zeros((2 * nv, nx))
            D0, D1 = self._space.difference_jacobians(q[k:k + 1], q[k + 1:k + 2])
            J0[:nv, :nv] = D0[0]
            J0[:nv, nv:2 * nv] = -h * np.eye(nv)
            J0[:nv, 2 * nv:3 * nv] = -0.5 * h * h * np.eye(nv)
            J1[:nv, :nv] = D1[0]
            J0[nv:, nv:2 * nv] = Ji.dv_minus[0]
            J0[nv:, 2 * nv:3 * nv] = h * Ji.dv_minus[0]
            J0[nv:, 3 * nv + slots] = Ji.dimpulse[0]
            J1[nv:, :nv] = Ji.dq[0]
            J1[nv:, nv:2 * nv] = Ji.dv_plus[0]
            J0[:nv] *= wq[:, None]
            J1[:nv] *= wq[:, None]
            J0[nv:] *= wi[:, None]
            J1[nv:] *= wi[:, None]
            Jt = np.zeros((2 * nv, lay.n))
            if Jlay is not None:
                Jt[nv:] = Ji.dparams[0] @ Jlay[lay.s_inertial] + Ji.darmature[0][:, iv] @ Jlay[lay.s_armature]
                Jt[nv:] *= wi[:, None]
            out.append((k, J0, J1, Jt, r))
        return out

    # ------------------------------------------------------------------ process noise
    def _projected_whitener(self, x, theta):
        """Per-interval whitening of the integration residual with the process noise projected onto the
        stance-contact null space by N(q_k) (eqs. 36–37), evaluated at the current trajectory and
        θ and then held fixed (like a noise model)."""
        from ..factors.process_noise import (
            block_projector,
            contact_jacobian,
            dynamically_consistent_projector,
            projected_noise_whitener,
        )

        q = x[0]
        model = self.robot.pinocchio_model_with(self.layout_.split(self.layout_.to_physical(theta))[0])
        data = model.createData()
        W = []
        for k in range(q.shape[0] - 1):
            pin.crba(model, data, q[k])
            M = np.triu(data.M) + np.triu(data.M, 1).T
            feet = [fid for fid, c in zip(self._fids, self._stance_pairs[k], strict=True) if c]
            if feet:
                Jc = contact_jacobian(model, data, q[k], feet)
                P = dynamically_consistent_projector(M, Jc)
            else:
                P = np.eye(model.nv)
            W.append(
                projected_noise_whitener(
                    block_projector(P),
                    self._proc_q,
                    self._proc_v,
                    1e-3 * min(self._proc_q.min(), self._proc_v.min()),
                )
            )
        return np.array(W)

    # ------------------------------------------------------------------ problem (term set)
    def _run(self, x, theta, noise, rnd, **kw):
        """The core's Levenberg–Marquardt on the current term set (rebuilt: noise levels, layout and
        process-noise whitener may have changed since the last run)."""
        self.problem_ = self._build_problem(noise)
        self._lm.theta_scale = self._theta_std
        return self._lm.run(self.problem_, x, theta, rnd, **kw)

    def _build_problem(self, noise) -> Problem:
        """The floating-base term set: the fixed-base terms plus base pose, IMU, contacts (constraints on
        settled stance knots, zero force in swing, measured forces, unilateral and cone hinges), the
        base rows of the inverse dynamics as a constraint, impact maps and total-mass / symmetry rows."""
        robot, nv, nf = self.robot, self.robot.nv, self.nf
        iv = robot.joint_index_v()
        N = self._qm.shape[0]
        sc = self.SIGMA_CONSTRAINT
        blocks = (("q", nv), ("v", nv), ("a", nv), ("lam", 3 * nf))
        if robot.loops:  # closure forces λ_L (issue 11)
            blocks += floating_loops.extra_blocks(robot)
        problem = Problem(self._space, blocks, self.layout_.n)
        # encoders (+ base pose)
        wq = np.zeros(nv)
        wq[iv] = 1.0 / noise.q
        if self._has_base:
            wq[:3] = 1.0 / self.sigma_base_pos
            wq[3:6] = 1.0 / self.sigma_base_rot
        if robot.loops:  # unencoded joints: states from the closures (issue 11)
            wq = floating_loops.encoder_weights(robot, wq)
        problem.add(terms.encoders(problem, self._qm, wq))
        if not self._has_base:  # anchor the first knot's base position and yaw (gauge); roll/pitch: IMU
            wb = np.zeros((N, nv))
            wb[0, :6] = 1.0 / self.sigma_base_pos
            problem.add(terms.encoders(problem, self._qm, wb, name="base_anchor"))
        if self._vm is not None:
            wv = np.zeros(nv)
            wv[iv] = 1.0 / noise.v
            if robot.loops:  # (issue 11)
                wv = floating_loops.encoder_weights(robot, wv)
            problem.add(terms.velocities(problem, self._vm, wv))
        # IMU
        if self._gyro is not None:
            problem.add(terms.imu_gyro(problem, self._kin_model, self._kin_data, self._imu_fid, self._gyro,
                                       self._sigma_gyro))
        if self._acc is not None:
            problem.add(terms.imu_accelerometer(problem, self._kin_model, self._kin_data, self._imu_fid,
                                                self._acc, self._sigma_acc))
        # contacts: constraints on settled stance knots, zero force where the flag is off
        for term in terms.contact_motion(problem, self._kin_model, self._kin_data, self._fids, self._offset,
                                         self._cflags, sc["contact_velocity"], sc["contact_acceleration"]):
            problem.add(term)
        swing = (1.0 - self._flags - self._impulse_slot) / self.sigma_swing_force
        problem.add(terms.swing_force(problem, np.repeat(swing, 3, axis=1)))
        problem.add(terms.contact_height(problem, self._heights, self._stance_pairs, sc["contact_height"]))
        for term in terms.contact_force_terms(problem, self._kin_model, self._kin_data, self._fids,
                                              self._fmeas, self.sigma_force, self.friction_coefficient,
                                              self._cflags, self.sigma_cone):
            problem.add(term)
        # inverse dynamics: joint rows vs the measured efforts, base rows a constraint
        wt = np.where(np.isfinite(noise.tau), 1.0 / noise.tau, 0.0)  # unmeasured efforts: no row
        for term in terms.floating_dynamics(problem, self.id_factor, self._taum,
                                            self._tau_mask[:, iv] * wt[None, :], sc["base_wrench"], iv):
            problem.add(term)
        # integration (touchdown intervals: replaced by the impact map)
        wp = np.concatenate([1.0 / self._proc_q, 1.0 / self._proc_v])
        keep = None if not self._impacts else self._smooth_interval
        problem.add(terms.integration(problem, self._h, wp, keep=keep, whitener=self._proj_whitener))
        if self._impacts:
            problem.add(terms.impact_maps(
                lambda ev, jac: self._impact_factors(ev.q, ev.v, ev.a, ev.x[3], ev.theta, jac, False)))
        if self._energy_log is not None:  # issue 12: work–energy per interval without a contact change
            problem.add(self._floating_energy_term(problem, noise))
        # θ: prior, total mass, symmetry
        problem.add(terms.parameter_prior(self._theta_bar, self._theta_std))
        for name, fn, hard, std in self._parameter_row_functions():
            sigma = (sc[name] if name == "total_mass" else std) if hard else std
            problem.add(terms.theta_rows(name, fn, sigma, hard))
        if robot.loops:  # closed loops (issue 11): `floating_loops.finish_problem`
            problem = floating_loops.finish_problem(problem, self, noise)
        return self._add_extra_terms(problem)

    def _energy_data(self, log: Log):
        """(t, joint velocities, efforts, velocities logged?) of the log for the work–energy term, or None
        (with a warning) when an effort is not measured."""
        if not all(log.tau_measured):
            warnings.warn("energy observations need every effort measured: left out", stacklevel=3)
            return None
        if log.v is not None:
            v_log = np.asarray(log.v, float)
        else:
            v_log = savgol_derivatives(log.t, np.asarray(log.q, float), self.sg_window_s, self.sg_order)[1]
        return np.asarray(log.t, float), v_log, np.asarray(log.tau, float), log.v is not None

    def _energy_intervals(self) -> np.ndarray:
        """0/1 per knot interval: 1 where no foot's contact flag changes (stance feet do no work, swing
        feet carry no force; touchdowns — impacts, settling feet — are left out; `factors.energy`)."""
        keep = np.zeros(self._flags.shape[0] - 1)
        keep[stance_constant_windows(np.arange(keep.size), 1, np.hstack([self._cflags, self._flags]))] = 1.0
        return keep

    def _contact_work_allowance(self, log: Log, qfull, rows, vs):
        """σ_c per knot interval [J] (`energy_contact.floating_energy_allowance`), or None with
        ``energy_contact="none"``."""
        from .energy_contact import CONTACT_WORK_MODES, floating_energy_allowance

        if self.energy_contact not in CONTACT_WORK_MODES:
            raise ValueError(f"energy_contact must be one of {', '.join(CONTACT_WORK_MODES)}, "
                             f"not {self.energy_contact!r}")
        if self.energy_contact == "none":
            return None
        if self.energy_contact == "measured":  # contact work from the logged forces, at term-build time
            self._energy_contact_inputs = (log, qfull, rows, vs)
            self.energy_contact_source_ = "logged contact forces (contact work modelled)"
            return None
        p_bar = self.layout_.nominal_physical() if self.prior_mean is None else np.asarray(self.prior_mean)
        mass = float(np.sum(self.layout_.split(np.asarray(p_bar, float))[0][:, 0]))
        sigma, source = floating_energy_allowance(self._kin_model, self._fids, self.radius_, log, qfull, rows,
                                                  vs, self.knot_times_, self.feet_, mass, self.use_forces)
        self.energy_contact_source_ = source
        return sigma

    def _floating_energy_term(self, problem: Problem, noise):
        """The work–energy rows over intervals without a contact change, each whitened by
        √(σ_W² + σ_c²): sensor noise of the input work and the contact-work allowance (issue 12)."""
        keep = self._energy_intervals()
        from ..factors.energy import EnergyResidual
        from .energy_contact import energy_rows, measured_contact_rows

        if self.energy_contact == "measured":
            log, qfull, rows, vs = self._energy_contact_inputs
            work, _ = energy_rows(self._energy_log, self.knot_times_, self.robot.joint_names, noise,
                                  np.zeros(keep.size), keep)
            sv = noise.v if self._energy_log[3] and noise.v is not None else highfreq_noise_std(
                self._energy_log[1])
            work_c, sigma = measured_contact_rows(
                self._kin_model, self._fids, self.radius_, log, qfull, rows, vs, self.knot_times_, self.feet_,
                self.robot.joint_index_v(), sv, noise.tau, self.sigma_force)
            work = work + work_c
            sigma = np.maximum(sigma, 1e-6 * max(float(np.max(np.abs(work), initial=0.0)), 1e-12))
            sigma = np.where(keep > 0, sigma, np.inf)
        elif self._energy_allowance is None:
            return self._energy_term(problem, noise, keep=keep)
        else:
            work, sigma = energy_rows(self._energy_log, self.knot_times_, self.robot.joint_names, noise,
                                      self._energy_allowance, keep)
        return terms.energy(problem, EnergyResidual(self.layout_), self.knot_times_, work, sigma)

    def _linearize(self, x, theta, noise=None, jacobians: bool = True, freeze_theta: bool = False):
        """The term set's `LinearizedGraph` at (x, θ) (for tests and benchmarks)."""
        problem = self.problem_ if noise is None or noise is self.noise_ else self._build_problem(noise)
        return problem.linearize(x, theta, jacobians, freeze_theta)

    def _retract(self, x, dx):
        return retract_states(self._space, x, dx)


def _skew(w):
    return np.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]])

