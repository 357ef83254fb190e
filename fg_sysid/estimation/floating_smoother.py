"""Batch joint state–parameter smoother for free-flyer robots in contact (paper 004 Sec. III-B, IV-A).

First slice of the floating-base smoother. Per knot k the state is

    x_k = (δq_k (nv, base included), δv_k, δa_k, λ_k (3 per foot, ALL feet))

so the state size is constant and the O(N) `StructuredSolver` of the fixed-base smoother applies.
λ_f is the contact force of the ground on foot f, expressed in the LOCAL foot frame axes at the foot
frame origin ("option B"): its spatial force on the parent joint is a constant placement of λ_f, so
Pinocchio's RNEA derivatives with external forces are exact for ∂(J_fᵀλ_f)/∂q, and ∂/∂λ_f = J_f,LOCALᵀ.
World forces are R_f(q) λ_f (reported in ``forces_world_``).

Factors (all whitened):

* encoders on the actuated joints (q ⊖ q̂, + v − v̂ when logged); the base pose (``log.base_pos`` /
  ``base_quat``) as a measurement on the free-flyer block of q ⊖ q̂ when logged, else a weak prior on
  the initial base pose (untested in this slice);
* inverse dynamics on all nv rows: Y(q,v,a)π + armature·a + τ_f(v) − Σ_f J_fᵀ λ_f − τ̂ with τ̂ = 0 on
  the 6 unactuated base rows (std ``sigma_base_wrench``), joint rows with the effort noise;
* per foot in contact: foot acceleration = 0 (``contact_acceleration_residual``) and foot velocity
  = 0; per foot not in contact: a tight zero prior on λ_f;
* integration between knots on the manifold, θ prior as in `JointSmoother`.

Simplifications (this slice): no IMU factors; θ initialised at the prior mean (no LS-SG initial θ);
effort-std IRLS optional (``reweight_rounds``, default off: it raised the mass bias on the MuJoCo
stance test); fixed initial SG filter; no marginal covariance; rolling of the spherical feet is
absorbed by loose contact stds.
The LM loop is `JointSmoother._levenberg_marquardt` (inherited).
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import pinocchio as pin

from ..datasets.log import Log
from ..factors.contact import contact_acceleration_residual, contact_velocity_residual
from ..factors.inverse_dynamics import InverseDynamicsResidual
from ..factors.kinematics import encoder_residual, integration_residual, velocity_residual
from ..factors.manifold import ConfigurationSpace
from ..layout import ParameterLayout
from ..robots import RobotModel
from .floating_baseline import manifold_sg_states
from .linear_solver import LinearizedGraph, StructuredSolver
from .smoother import EstimationError, JointSmoother

GRAVITY = 9.81


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
        contact_frames: foot frame names (all of them get a λ block; flags come from ``log.contacts``).
        sigma_base_pos, sigma_base_rot: std of the logged base pose [m, rad].
        sigma_base_wrench: std of the unactuated base rows of the inverse dynamics [N | N·m].
        sigma_contact_acc, sigma_contact_vel: std of the stance-foot acceleration / velocity [m/s², m/s].
        sigma_swing_force: std of the zero prior on a swing foot's force [N].
        reweight_rounds: IRLS rounds re-estimating the effort stds from the ID residuals.
        tau_floor_relative: estimated effort noise is floored at this fraction of each joint's effort RMS.
        sg_window_s, sg_order: Savitzky–Golay filter of the initial trajectory.
    """

    def __init__(self, robot: RobotModel, contact_frames, inertia: str = "log-cholesky",
                 friction: str = "coulomb-viscous", friction_velocity_scale: float = 0.05,
                 knot_stride: int = 1, sigma_q=None, sigma_v=None, sigma_tau=None, sigma_process=None,
                 prior_relative: float = 0.7, prior_mean: np.ndarray | None = None,
                 max_iterations: int = 30, tol: float = 1e-3, process_fraction: float = 0.3,
                 fit_friction: bool = True, fit_armature: bool = True,
                 sigma_base_pos: float = 1e-3, sigma_base_rot: float = 1e-3, sigma_base_wrench: float = 0.5,
                 sigma_contact_acc: float = 0.2, sigma_contact_vel: float = 0.02,
                 sigma_swing_force: float = 1e-2, reweight_rounds: int = 0,
                 tau_floor_relative: float = 0.02, sg_window_s: float = 0.05, sg_order: int = 3,
                 verbose: bool = False):
        super().__init__(robot, inertia=inertia, friction=friction,
                         friction_velocity_scale=friction_velocity_scale, knot_stride=knot_stride,
                         sigma_q=sigma_q, sigma_v=sigma_v, sigma_tau=sigma_tau, sigma_process=sigma_process,
                         prior_relative=prior_relative, prior_mean=prior_mean,
                         reweight_rounds=reweight_rounds,
                         max_iterations=max_iterations, tol=tol, solver="structured", init="prior",
                         process_fraction=process_fraction, fit_friction=fit_friction,
                         fit_armature=fit_armature, verbose=verbose)
        self.contact_frames = tuple(contact_frames)
        self.sigma_base_pos = sigma_base_pos
        self.sigma_base_rot = sigma_base_rot
        self.sigma_base_wrench = sigma_base_wrench
        self.sigma_contact_acc = sigma_contact_acc
        self.sigma_contact_vel = sigma_contact_vel
        self.sigma_swing_force = sigma_swing_force
        self.tau_floor_relative = tau_floor_relative
        self.sg_window_s = sg_window_s
        self.sg_order = sg_order

    # ------------------------------------------------------------------ setup
    def setup(self, robot: RobotModel | None = None) -> FloatingBaseSmoother:
        """Layout, models and the inverse-dynamics evaluator (called by ``fit``; public for tests)."""
        robot = self.robot
        if not robot.floating_base or robot.nq != robot.nv + 1:
            raise EstimationError(f"robot {robot.name!r} is not a free-flyer robot")
        self.layout_ = ParameterLayout.create(
            robot, self.inertia, self.friction, self.friction_velocity_scale,
            fit_friction=self.fit_friction, fit_armature=self.fit_armature)
        self._space = ConfigurationSpace(robot.model)
        self._solver = StructuredSolver()
        self._gram_cache = {}
        self._id = InverseDynamicsResidual(self.layout_)
        self._kin_model = robot.model.copy()
        self._kin_data = self._kin_model.createData()
        self._m0 = robot.model.copy()  # zero gravity: RNEA(q, 0, 0, fext) = −Σ J_fᵀ λ_f
        self._m0.gravity = pin.Motion.Zero()
        self._d0 = self._m0.createData()
        self._fids = []
        for f in self.contact_frames:
            if not self._kin_model.existFrame(f):
                raise EstimationError(f"robot {robot.name!r} has no frame {f!r}")
            self._fids.append(self._kin_model.getFrameId(f))
        self.nf = len(self._fids)
        self.nx = 3 * robot.nv + 3 * self.nf
        return self

    # ------------------------------------------------------------------ contact-force term
    def contact_term(self, q, lam, jacobians: bool = True):
        """τ_c = Σ_f J_f,LOCALᵀ λ_f (N, nv); dτ_c/dδq (N, nv, nv); dτ_c/dλ (N, nv, 3 nf)."""
        m0, d0 = self._m0, self._d0
        n, nv = q.shape[0], m0.nv
        tau = np.empty((n, nv))
        dq = np.empty((n, nv, nv)) if jacobians else None
        dl = np.empty((n, nv, 3 * self.nf))
        zero = np.zeros(nv)
        for k in range(n):
            pin.computeJointJacobians(m0, d0, q[k])
            pin.updateFramePlacements(m0, d0)
            fext = pin.StdVec_Force()
            for _ in range(m0.njoints):
                fext.append(pin.Force.Zero())
            for i, fid in enumerate(self._fids):
                fr = m0.frames[fid]
                Jl = pin.getFrameJacobian(m0, d0, fid, pin.LOCAL)[:3]
                dl[k, :, 3 * i:3 * i + 3] = Jl.T
                fext[fr.parentJoint] = fext[fr.parentJoint] + fr.placement.act(
                    pin.Force(lam[k, 3 * i:3 * i + 3], np.zeros(3)))
            tau[k] = dl[k] @ lam[k]
            if jacobians:
                dr_dq, _, _ = pin.computeRNEADerivatives(m0, d0, q[k], zero, zero, fext)
                dq[k] = -dr_dq
        return tau, dq, dl

    def id_factor(self, q, v, a, lam, theta, tau_meas, jacobians: bool = True):
        """Unweighted ID residual with the contact term: r (N, nv), Jx (N, nv, nx), Jθ (N, nv, nθ)."""
        nv = v.shape[1]
        tau_c, dq, dl = self.contact_term(q, lam, jacobians)
        lin = self._id.evaluate(q, v, a, tau_meas, theta, jacobians, external=tau_c)
        if not jacobians:
            return lin.r, None, None
        n = q.shape[0]
        Jx = np.zeros((n, nv, self.nx))
        Jx[:, :, :nv] = lin.Jq - dq
        Jx[:, :, nv:2 * nv] = lin.Jv
        Jx[:, :, 2 * nv:3 * nv] = lin.Ja
        Jx[:, :, 3 * nv:] = -dl
        return lin.r, Jx, lin.Jtheta

    def forces_world(self, q, lam) -> np.ndarray:
        """World-axes contact forces (N, nf, 3) = R_f(q) λ_f."""
        m, d = self._kin_model, self._kin_data
        out = np.empty((q.shape[0], self.nf, 3))
        for k in range(q.shape[0]):
            pin.framesForwardKinematics(m, d, q[k])
            for i, fid in enumerate(self._fids):
                out[k, i] = d.oMf[fid].rotation @ lam[k, 3 * i:3 * i + 3]
        return out

    # ------------------------------------------------------------------ fit
    def _fit(self, log: Log) -> FloatingBaseSmoother:  # JointSmoother.fit wraps it (BLAS threads)
        t_start = time.perf_counter()
        robot = self.robot
        if tuple(log.joint_names) != tuple(robot.joint_names):
            raise EstimationError("log joints do not match the robot joints")
        self.setup()
        nv, iv = robot.nv, robot.joint_index_v()
        has_base = log.base_pos is not None and log.base_quat is not None
        if has_base:
            qfull = full_configuration(log, robot)
        else:
            warnings.warn("no base pose in the log: base pose only weakly anchored (untested)", stacklevel=2)
            qfull = np.tile(robot.neutral(), (log.n_samples, 1))
            qfull[:, robot.joint_index_q()] = np.asarray(log.q, float)
        dt = float(np.median(np.diff(log.t)))
        w = max(int(round(self.sg_window_s / dt)) // 2 * 2 + 1, self.sg_order + 2 | 1)
        rows, qs, vs, as_ = manifold_sg_states(robot.model, qfull, dt, w, self.sg_order)
        stride = max(int(self.knot_stride), 1)
        sel = np.arange(0, rows.size, stride)
        idx = rows[sel]
        if idx.size < 4:
            raise EstimationError("too few knots")
        self._idx = idx
        t = log.t[idx]
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
        flags = np.zeros((idx.size, self.nf), bool)
        for i, f in enumerate(self.contact_frames):
            if f in log.contacts:
                flags[:, i] = np.asarray(log.contacts[f], bool)[idx]
        self._flags = flags
        # q at the measured configuration (the SG-smoothed one conflicts with tight encoders), v, a from SG
        q0, v0, a0 = qfull[idx].copy(), vs[sel], as_[sel]
        # noise
        self.noise_ = noise = self._noise_levels(log, idx, a0[:, iv], {})
        if self.sigma_tau is None:  # model error of a prior-mean θ dominates a noise-free log's effort noise
            noise.tau = np.maximum(noise.tau, self.tau_floor_relative * noise.tau_rms)
            noise.source["tau"] += f", floored at {self.tau_floor_relative:g} x the effort RMS"
        a_rms = np.sqrt(np.mean(a0 ** 2, axis=0))
        h = float(np.median(self._h))
        if self.sigma_process is None:
            self._proc_v = np.maximum(self.process_fraction * a_rms, 1e-3) * h
        else:
            self._proc_v = np.broadcast_to(np.asarray(self.sigma_process, float), (nv,)) * h
        self._proc_q = self._proc_v * h
        # θ prior, θ = prior mean
        prior_mean_phys = None if self.prior_mean is None else np.asarray(self.prior_mean, float)
        theta_bar, theta_std = self.layout_.prior(self.prior_relative, mean_physical=prior_mean_phys)
        self._theta_bar, self._theta_std = theta_bar, theta_std
        theta = theta_bar.copy()
        # λ: static split of the nominal weight over the stance feet, rotated into the foot frames
        mass = float(np.sum(self.layout_.split(self.layout_.to_physical(theta))[0][:, 0]))
        lam0 = np.zeros((idx.size, 3 * self.nf))
        m, d = self._kin_model, self._kin_data
        for k in range(idx.size):
            ns = int(flags[k].sum())
            if ns == 0:
                continue
            pin.framesForwardKinematics(m, d, q0[k])
            for i, fid in enumerate(self._fids):
                if flags[k, i]:
                    lam0[k, 3 * i:3 * i + 3] = d.oMf[fid].rotation.T @ np.array([0, 0, mass * GRAVITY / ns])
        x = (q0, v0, a0, lam0)
        self._base_std = np.full(6, float(self.sigma_base_wrench))
        self._initial_cost = self._linearize(x, theta, noise, jacobians=False).cost()
        # stage 1: states and forces with θ held at the prior mean; stage 2: everything
        x, theta, _, history = self._levenberg_marquardt(x, theta, noise, 0, freeze_theta=True)
        # stage 2 (+ reweighting rounds): the effort std of every row (base wrench rows included) is
        # re-estimated from the ID residual RMS, never below its initial value (IRLS as in JointSmoother)
        base_std = np.full(6, float(self.sigma_base_wrench))
        for rnd in range(1 + max(int(self.reweight_rounds), 0)):
            x, theta, converged, hist = self._levenberg_marquardt(x, theta, noise, rnd + 1)
            history += hist
            if rnd == self.reweight_rounds:
                break
            r = self.id_factor(*x, theta, self._taum, jacobians=False)[0]
            rms = np.sqrt(np.mean(r ** 2, axis=0))
            if self.sigma_tau is None:
                noise.tau = np.maximum(noise.tau, rms[iv])
                noise.source["tau"] = f"re-estimated from inverse-dynamics residuals (round {rnd + 1})"
            base_std = np.maximum(base_std, rms[:6])
            self._base_std = base_std
        q, v, a, lam = x
        r_id, _, _ = self.id_factor(q, v, a, lam, theta, self._taum, jacobians=False)
        self.result_ = {
            "theta": theta, "p": self.layout_.to_physical(theta), "t": t, "q": q, "v": v, "a": a,
            "lam": lam, "forces_world": self.forces_world(q, lam), "contact": flags,
            "history": history, "converged": converged, "seconds": time.perf_counter() - t_start,
            "id_residual": r_id, "knots": int(idx.size), "initial_cost": self._initial_cost,
        }
        return self

    # ------------------------------------------------------------------ graph (overrides)
    def _linearize(self, x, theta, noise, jacobians: bool = True, freeze_theta: bool = False):
        q, v, a, lam = x
        N, nv = v.shape
        nx = self.nx
        graph = LinearizedGraph(N, nx, self.layout_.n)
        iv = self.robot.joint_index_v()

        def pad(J):
            if J is None:
                return None
            out = np.zeros(J.shape[:2] + (nx,))
            out[:, :, :J.shape[2]] = J
            return out

        # encoders (+ base pose)
        wq = np.zeros(nv)
        wq[iv] = 1.0 / noise.q
        if self._has_base:
            wq[:3] = 1.0 / self.sigma_base_pos
            wq[3:6] = 1.0 / self.sigma_base_rot
        r, J = encoder_residual(self._space, q, self._qm, jacobians)
        graph.knot.append((None if J is None else pad(J) * wq[None, :, None], r * wq))
        if not self._has_base:  # weak anchor of the first knot's base pose (gauge)
            wb = np.zeros((N, 6))
            wb[0] = 1.0
            r0 = r[:, :6] * wb
            J0 = None if J is None else pad(J)[:, :6] * wb[:, :, None]
            graph.knot.append((J0, r0))
        if self._vm is not None:
            wv = np.zeros(nv)
            wv[iv] = 1.0 / noise.v
            r, J = velocity_residual(v, self._vm, jacobians)
            graph.knot.append((None if J is None else pad(J) * wv[None, :, None], r * wv))
        # contacts
        fl = self._flags.astype(float)
        for i, fid in enumerate(self._fids):
            wa = fl[:, i:i + 1] / self.sigma_contact_acc
            r, J = contact_acceleration_residual(self._kin_model, self._kin_data, fid, q, v, a, jacobians)
            graph.knot.append((None if J is None else pad(J) * wa[:, :, None], r * wa))
            wvel = fl[:, i:i + 1] / self.sigma_contact_vel
            r, J = contact_velocity_residual(self._kin_model, self._kin_data, fid, q, v, jacobians)
            graph.knot.append((None if J is None else pad(J) * wvel[:, :, None], r * wvel))
            ws = (1.0 - fl[:, i:i + 1]) / self.sigma_swing_force
            r = lam[:, 3 * i:3 * i + 3] * ws
            if jacobians:
                J = np.zeros((N, 3, nx))
                J[:, :, 3 * nv + 3 * i:3 * nv + 3 * i + 3] = np.eye(3)
                J = J * ws[:, :, None]
            graph.knot.append((J if jacobians else None, r))
        # inverse dynamics
        wt = np.zeros(nv)
        wt[:6] = 1.0 / self._base_std
        wt[iv] = 1.0 / noise.tau
        W = self._tau_mask * wt[None, :]
        r, Jx, Jt = self.id_factor(q, v, a, lam, theta, self._taum, jacobians)
        if jacobians:
            graph.knot_theta.append((Jx * W[:, :, None], Jt * W[:, :, None], r * W))
        else:
            graph.knot_theta.append((None, None, r * W))
        # integration
        wp = np.concatenate([1.0 / self._proc_q, 1.0 / self._proc_v])
        pl = integration_residual(self._space, q, v, a, self._h, jacobians)
        graph.pair.append((None if pl.J0 is None else pad(pl.J0) * wp[None, :, None],
                           None if pl.J1 is None else pad(pl.J1) * wp[None, :, None], pl.r * wp))
        graph.prior_r = (theta - self._theta_bar) / self._theta_std
        graph.prior_w = 1.0 / self._theta_std
        if freeze_theta:
            if jacobians:
                Jx, Jt, r = graph.knot_theta[0]
                graph.knot_theta[0] = (Jx, np.zeros_like(Jt), r)
            graph.prior_w = np.ones(self.layout_.n)
            graph.prior_r = np.zeros(self.layout_.n)
        return graph

    def _retract(self, x, dx):
        q, v, a, lam = x
        nv = v.shape[1]
        return (self._space.integrate(q, dx[:, :nv]), v + dx[:, nv:2 * nv], a + dx[:, 2 * nv:3 * nv],
                lam + dx[:, 3 * nv:])
