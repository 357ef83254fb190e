"""Energy-regressor least squares: the "Energy" baseline of paper 004 Table II (Sec. IX-E).

Over consecutive windows ``[t_a, t_b]`` of the log the work–energy balance (paper 004 eqs. 62–63, 69)

    (Y_E(q_b, v_b) − Y_E(q_a, v_a)) π + ½ (v_b² − v_a²)ᵀ armature
        + Σ_j (fc_j ∫ v_j tanh(v_j / vs) dt + fv_j ∫ v_j² dt)  =  ∫ v̂ᵀ τ̂ dt                       [J]

is linear in the physical vector p = (π per body | (fc, fv) per joint | armature per joint), with
``Y_E = Y_K + Y_U`` Pinocchio's kinetic and potential energy regressors; integrals are trapezoid sums
over the log samples (`fg_sysid.factors.energy`). No acceleration is needed: positions and velocities
only (the logged ``v``, or the Savitzky–Golay first derivative of ``q`` when the log has none).

Solution:

1. rows are weighted by ``1/σ_row`` with ``σ_row² = σ_W² + σ_v² (‖∂E/∂v_a‖² + ‖∂E/∂v_b‖²)
   + σ_q² (‖∂E/∂q_a‖² + ‖∂E/∂q_b‖²)``: the input-work noise (`input_work_std`) plus the state noise at the
   window ends, gradients at the URDF nominal; σ_q, σ_v, σ_τ are given or estimated from the log
   (`highfreq_noise_std`);
2. a column-scaled ridge least squares toward the URDF nominal (as `LeastSquaresSG`) gives p_lin;
3. **physical consistency** (as Table II's baselines: exponential–eigenvalue inertias by default):
   p_lin is projected onto the consistent set (`ParameterLayout.to_theta_projected`: pseudo-inertia
   eigenvalues clamped, non-positive friction/armature replaced) and the weighted residual is minimised
   over the unconstrained θ of a `ParameterLayout` (``scipy.optimize.least_squares``, analytic Jacobian
   ``A · ∂p/∂θ``), with a weak prior ``prior_weight · ‖(θ − θ̄)/σ_θ‖²`` (URDF, 70 %) on the directions the
   energy cannot see. Every estimate is physically consistent by construction.

Standard deviations: Gauss–Newton covariance ``s² (JᵀJ)⁻¹`` at the solution (s² the weighted residual
variance), propagated through ∂p/∂θ. Windows are consecutive and do not overlap, so their input-work
noises are independent.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares
from threadpoolctl import threadpool_limits

from ..datasets.log import Log
from ..factors.energy import EnergyResidual, input_work, input_work_std, interval_windows
from ..layout import ParameterLayout
from ..robots.model import RobotModel
from .baseline import BaselineResult, parameter_groups, pseudo_inertia_min_eigenvalues
from .noise import highfreq_noise_std, savgol_derivatives

__all__ = ["EnergyLeastSquares", "EnergyResult", "run_energy_ls"]


@dataclass(frozen=True)
class EnergyResult(BaselineResult):
    """`BaselineResult` of the energy baseline; also carries the layout's θ (``theta``) and ``method``.

    ``filter`` holds the energy windows (``energy_window_s``, ``n_windows``), the velocity source, the noise
    levels used, and the SG filter (``window_s``, ``polyorder``) ``fg-sysid predict`` uses to differentiate
    held-out logs (the project default, 50 ms cubic: this method chose no filter).
    """

    theta: np.ndarray | None = None
    method: str = "energy-ls"
    inertia_parameterization: str = "exponential-eigenvalue"


class EnergyLeastSquares:
    """Energy-regressor least squares with physically consistent parameters (see the module docstring).

    Parameters
    ----------
    window_s : float
        Length of each energy window [s] (consecutive, non-overlapping).
    velocity_scale : float
        ``vs`` of the Coulomb term ``fc·tanh(v/vs)`` [rad/s].
    inertia : str
        Inertial parameterization of the consistent refinement (``exponential-eigenvalue``,
        ``log-cholesky``; ``raw`` skips consistency).
    prior_weight : float
        Weight of the standardized URDF prior on the inertial θ (70 % relative), relative to the whitened
        data rows (friction and armature: 1e-3 of it).
    velocity : ``"auto"`` | ``"logged"`` | ``"sg"``
        Joint velocities: the log's (auto when present), or the SG first derivative of q.
    sg_window_s : float
        SG window for velocities when they are differentiated [s] (cubic).
    sigma_q, sigma_v, sigma_tau : float, optional
        Noise stds [rad, rad/s, N·m]; default: estimated from the log.
    fit_friction, fit_armature : bool
        Estimate friction / armature (else held at the URDF prior).
    prior_mean : array, optional
        Physical vector (baseline layout) to centre the prior on (and rank-deficient directions at)
        instead of the URDF nominal — e.g. a random initial guess.
    work_quadrature : ``"zoh"`` | ``"trapezoid"``
        Input work from held efforts and positions (``Σ τ̂_iᵀ Δq̂_i``, exact for sampled-and-held
        commands, default) or the trapezoid rule on ``v̂ᵀτ̂`` (paper 004 eq. 63); see `input_work`.
    """

    def __init__(self, window_s: float = 0.1, velocity_scale: float = 0.05,
                 inertia: str = "exponential-eigenvalue", prior_weight: float = 1.0, velocity: str = "auto",
                 sg_window_s: float = 0.02, sigma_q=None, sigma_v=None, sigma_tau=None,
                 fit_friction: bool = True, fit_armature: bool = True, max_nfev: int = 300,
                 work_quadrature: str = "zoh", prior_mean: np.ndarray | None = None, verbose: bool = False):
        self.prior_mean = prior_mean
        self.work_quadrature = work_quadrature
        self.window_s = window_s
        self.velocity_scale = velocity_scale
        self.inertia = inertia
        self.prior_weight = prior_weight
        self.velocity = velocity
        self.sg_window_s = sg_window_s
        self.sigma_q = sigma_q
        self.sigma_v = sigma_v
        self.sigma_tau = sigma_tau
        self.fit_friction = fit_friction
        self.fit_armature = fit_armature
        self.max_nfev = max_nfev
        self.verbose = verbose

    # ------------------------------------------------------------------ data
    def _signals(self, log: Log, robot: RobotModel):
        if robot.floating_base or robot.nv != robot.n_joints or robot.nq != robot.nv:
            raise ValueError(f"robot {robot.name!r}: the energy least-squares baseline supports fixed-base "
                             "robots with one coordinate per joint only")
        names = tuple(log.joint_names)
        if sorted(names) != sorted(robot.joint_names):
            raise ValueError(f"log joints {list(names)} do not match robot {robot.name!r} joints "
                             f"{list(robot.joint_names)}")
        order = [names.index(j) for j in robot.joint_names]
        t = np.asarray(log.t, float)
        if t.size < 3 or np.any(np.diff(t) <= 0):
            raise ValueError("log time stamps must be strictly increasing (at least 3 samples)")
        q = np.asarray(log.q, float)[:, order]
        tau = np.asarray(log.tau, float)[:, order]
        if not np.all(np.isfinite(q)):
            raise ValueError("log positions q contain NaN/inf; the energy baseline needs complete positions")
        if self.velocity not in ("auto", "logged", "sg"):
            raise ValueError(f"velocity must be auto, logged or sg, got {self.velocity!r}")
        if self.velocity == "logged" and log.v is None:
            raise ValueError("velocity='logged' but the log has no v.<joint> columns")
        if log.v is not None and self.velocity != "sg":
            v = np.asarray(log.v, float)[:, order]
            source = "logged"
        else:
            _, v, _ = savgol_derivatives(t, q, self.sg_window_s, 3)
            source = f"SG first derivative of q ({self.sg_window_s * 1e3:.3g} ms, cubic)"
        if not np.all(np.isfinite(v)):
            raise ValueError("log velocities contain NaN/inf")
        return t, q, v, tau, source

    # ------------------------------------------------------------------ fit
    def fit(self, log: Log, robot: RobotModel) -> EnergyLeastSquares:
        """Fit on ``log`` (fixed base; every effort measured); result in ``result_``."""
        # small dense products: one BLAS thread is far faster than several on shared cores
        with threadpool_limits(1, "blas"):
            return self._fit(log, robot)

    def _fit(self, log: Log, robot: RobotModel) -> EnergyLeastSquares:
        t0 = time.perf_counter()
        if not (np.isfinite(self.window_s) and self.window_s > 0):
            raise ValueError(f"window_s must be a positive duration, got {self.window_s}")
        t, q, v, tau, source = self._signals(log, robot)
        dt = float(np.median(np.diff(t)))
        L = max(1, int(round(self.window_s / dt)))
        starts = interval_windows(t.size, L)
        if starts.size < 2:
            raise ValueError(f"log of {log.duration:.3g} s holds fewer than 2 energy windows of "
                             f"{self.window_s} s")
        layout = ParameterLayout.create(robot, self.inertia, "coulomb-viscous", self.velocity_scale,
                                        fit_friction=self.fit_friction, fit_armature=self.fit_armature)
        res = EnergyResidual(layout)
        W = input_work(t, v, tau, t[starts], t[starts + L], joint_names=list(robot.joint_names),
                       quadrature=self.work_quadrature, q_meas=q)
        A = res.regressor_rows(q, v, t, starts, L)

        # ---- noise and row weights
        sq = highfreq_noise_std(q) if self.sigma_q is None else np.full(robot.n_joints, float(self.sigma_q))
        sv = highfreq_noise_std(v) if self.sigma_v is None else np.full(robot.n_joints, float(self.sigma_v))
        st = highfreq_noise_std(tau) if self.sigma_tau is None else np.full(robot.n_joints,
                                                                             float(self.sigma_tau))
        sW = input_work_std(t, v, tau, t[starts], t[starts + L], sv, st, self.work_quadrature, q, sq)
        mean = None if self.prior_mean is None else np.asarray(self.prior_mean, float)
        if mean is not None and mean.shape != (layout.n,):
            raise ValueError(f"prior_mean has {mean.size} entries; robot {robot.name!r} needs {layout.n}")
        th_prior, std_prior = layout.prior(mean_physical=mean)
        res.set_theta(th_prior)
        ends = starts + L
        ga_q, ga_v = res.energy_gradients(q[starts], v[starts])
        gb_q, gb_v = res.energy_gradients(q[ends], v[ends])
        s_state2 = ((ga_v ** 2 + gb_v ** 2) @ sv ** 2 + (ga_q ** 2 + gb_q ** 2) @ sq ** 2)
        sigma_row = np.sqrt(sW ** 2 + s_state2)
        sigma_row = np.maximum(sigma_row, 1e-9 + 1e-6 * np.median(sigma_row))
        Aw = A / sigma_row[:, None]
        bw = W / sigma_row

        # ---- step 1: linear ridge LS toward the nominal (column-scaled)
        p_nom = layout.to_physical(th_prior)
        free = np.ones(layout.n, bool)
        if not self.fit_friction:
            free[layout.s_friction] = False
        if not self.fit_armature:
            free[layout.s_armature] = False
        p_lin = p_nom.copy()
        Af = Aw[:, free]
        rhs = bw - Aw[:, ~free] @ p_nom[~free]
        d = np.linalg.norm(Af, axis=0)
        act = d > 1e-12 * max(d.max(), 1e-300)
        As = Af[:, act] / d[act]
        lam = 1e-8
        x0 = d[act] * p_nom[free][act]
        xs = np.linalg.solve(As.T @ As + lam * np.eye(act.sum()), As.T @ rhs + lam * x0)
        sub = p_nom[free].copy()
        sub[act] = xs / d[act]
        p_lin[free] = sub

        # ---- step 2: physically consistent refinement over θ
        theta0, replaced = layout.to_theta_projected(p_lin, p_nom)
        # the 70 % URDF prior anchors the inertial directions the energy cannot see; friction and armature
        # (URDF values are rarely meaningful) get only a vanishing pull
        sw = np.full(layout.n, np.sqrt(self.prior_weight))
        sw[layout.s_friction] = sw[layout.s_armature] = np.sqrt(self.prior_weight) * 1e-3
        if not self.fit_friction:
            sw[layout.s_friction] = 1.0
        if not self.fit_armature:
            sw[layout.s_armature] = 1.0

        def fun(th):
            return np.concatenate([Aw @ layout.to_physical(th) - bw, sw * (th - th_prior) / std_prior])

        def jac(th):
            return np.vstack([Aw @ layout.jacobian(th), np.diag(sw / std_prior)])

        if layout.inertia.name == "raw":
            theta = layout.to_theta(p_lin)
        else:
            # a box of ±8 prior stds keeps every exp() of the parameterization finite during the search
            lo = np.minimum(th_prior - 8 * std_prior, theta0 - 1e-6)
            hi = np.maximum(th_prior + 8 * std_prior, theta0 + 1e-6)
            sol = least_squares(fun, theta0, jac=jac, bounds=(lo, hi), method="trf", x_scale="jac",
                                max_nfev=self.max_nfev)
            theta = sol.x
            if self.verbose:
                print(f"[EnergyLeastSquares] least_squares: {sol.nfev} evaluations, status {sol.status}")
        p = layout.to_physical(theta)
        J = jac(theta)
        r = fun(theta)
        m_rows = A.shape[0]
        s2 = float(np.sum(r[:m_rows] ** 2)) / max(m_rows - int(free.sum()), 1)
        JtJ = J.T @ J
        cov_th = s2 * np.linalg.pinv(JtJ, rcond=1e-12)
        Jp = layout.jacobian(theta)
        std = np.sqrt(np.maximum(np.einsum("ij,jk,ik->i", Jp, cov_th, Jp), 0.0))
        std[~free] = np.nan
        rank = int(np.linalg.matrix_rank(As))
        eig = pseudo_inertia_min_eigenvalues(p[layout.s_inertial])
        filt = {
            "window_s": 0.05, "polyorder": 3,
            "energy_window_s": float(L * dt), "energy_window_samples": int(L), "n_windows": int(starts.size),
            "velocity": source, "dt": dt, "work_quadrature": self.work_quadrature,
            "sigma_q": sq.tolist(), "sigma_v": sv.tolist(), "sigma_tau": st.tolist(),
            "projected_blocks": replaced, "weighted_residual_variance": s2,
            "note": "window_s/polyorder: SG filter for held-out accelerations (project default)",
        }
        self.result_ = EnergyResult(
            names=list(layout.names), estimate=p, std=std, filter=filt, rank=rank, n_parameters=layout.n,
            seconds=time.perf_counter() - t0,
            physical_consistency={
                "consistent": bool(np.all(eig > 0)), "min_eigenvalue": eig.tolist(),
                "inconsistent_bodies": [robot.body_names[i] for i in np.flatnonzero(eig <= 0)]},
            measured_joints=tuple(robot.joint_names),
            residual_rms=np.array([float(np.sqrt(np.mean((A @ p - W) ** 2)))]),
            groups=parameter_groups(robot), theta=theta, inertia_parameterization=layout.inertia.name,
        )
        if self.verbose:
            print(f"[EnergyLeastSquares] {starts.size} windows of {L * dt * 1e3:.3g} ms, rank {rank}/"
                  f"{int(free.sum())}, {self.result_.seconds:.2f} s")
        return self


def run_energy_ls(robot: RobotModel, log: Log, friction: str = "coulomb-viscous",
                  friction_velocity_scale: float = 0.05, verbose: bool = False):
    """``fg-sysid identify --method energy-ls``: ``(EnergyResult, sg_filter)`` as `run_identification`."""
    if friction != "coulomb-viscous":
        raise ValueError(f"--method energy-ls supports --friction coulomb-viscous only, not {friction!r}")
    res = EnergyLeastSquares(velocity_scale=friction_velocity_scale, verbose=verbose).fit(log, robot).result_
    return res, {"window_s": float(res.filter["window_s"]), "polyorder": int(res.filter["polyorder"])}
