"""The payload problem: end-effector + payload (10 inertial parameters) from windowed momentum balances.

Paper 002 Cor. 10 / Thm. 11 (eqs. 20–24). With the windowed balance of `fg_sysid.factors.momentum`
(A π + Ia∘Δv + fc∘∫sign(v)dt + fv∘∫v dt = ∫τ dt, one row per window and joint), split π into the
end-effector body θ_e (the unknown, 10 parameters, Pinocchio order about the end-effector body frame) and
everything else θ_r = (other bodies' π, armature, Coulomb fc, viscous fv) known within a box:

    Y θ_e + R θ_r = T,      Y = A_e,  R = [A_r | diag(Δv) | diag(∫sign v) | diag(∫v)],  T = ∫τ dt.

Bounded noise (paper 002 Assumptions 3 and 12): q and v exact; each torque sample within an absolute bound
[N·m] and/or a relative bound ρ of the *true* torque (|u| ≤ ρ|τ_true| ⇒ |u| ≤ ρ/(1−ρ)|τ_meas|); θ_r within
θ_r0 ± ρ_r|θ_r0| (and an optional absolute floor). Then every row satisfies

    |Y θ_e + R θ_r − T| ≤ d,   d_row = Σ_j w_j ū_j   (w_j the torque quadrature weights, ū_j the noise bound),

which all three bound modes of `fg_sysid.payload.bounds` start from. Rows are added window by window as
data stream in (`PayloadProblem.add`), so an online update only computes the new samples' regressors.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from ..factors.momentum import QUADRATURE_RULES, momentum_regressors_batch, quadrature_weights
from ..robots import RobotModel
from ..robots.model import INERTIAL_SUFFIXES


class PayloadError(ValueError):
    """Bad input to the payload problem (the message names the culprit)."""


class DataContradictBounds(PayloadError):
    """No parameter value is consistent with the data under the stated noise and robot bounds."""


@dataclass(frozen=True)
class NoiseBounds:
    """Bounded-noise assumptions (paper 002 Assumptions 3 and 12).

    tau_abs: absolute torque bound per joint [N·m] (scalar or (nv,)); tau_rel: relative bound of the true
    torque (0.025 = 2.5 %); robot_rel: relative half-width of the θ_r box (0.05 = 5 %); robot_abs: an
    absolute floor added to the θ_r half-width (SI units of each parameter); model_rel: allowance for
    the model error of the momentum balance (quadrature, integration, unmodelled effects) as a fraction of
    the torque-noise impulse bound of each row (1 %: the finely integrated benchmark data have a residual up
    to 0.18 % of it with the true parameters; a stated assumption, not a proof).
    """

    tau_abs: float | np.ndarray = 0.0
    tau_rel: float = 0.025
    robot_rel: float = 0.05
    robot_abs: float = 0.0
    model_rel: float = 0.01

    def __post_init__(self):
        if not (0.0 <= self.tau_rel < 1.0):
            raise PayloadError(f"relative torque bound must be in [0, 1), got {self.tau_rel}")
        if np.any(np.asarray(self.tau_abs) < 0) or min(self.robot_rel, self.robot_abs, self.model_rel) < 0:
            raise PayloadError("noise and robot bounds must be non-negative")
        if self.tau_rel == 0 and not np.any(np.asarray(self.tau_abs) > 0):
            raise PayloadError("a torque bound is needed (absolute N·m or relative %): zero noise is never "
                               "a safe assumption")

    def tau_radius(self, tau_meas: np.ndarray) -> np.ndarray:
        """Per-sample bound ū on |τ_meas − τ_true| [N·m], shape of ``tau_meas``."""
        return np.asarray(self.tau_abs) + self.tau_rel / (1.0 - self.tau_rel) * np.abs(tau_meas)


@dataclass(frozen=True)
class RobotPrior:
    """θ_r: the robot without the unknown end effector, its nominal values and names.

    ``pi`` (n_bodies, 10) nominal inertial parameters of every body (the end-effector row is ignored),
    ``armature`` [kg·m²], ``fc`` [N·m], ``fv`` [N·m·s/rad] per joint (nv,), ``ee_body`` index of the
    end-effector body (0-based, in ``robot.body_names``).
    """

    pi: np.ndarray
    armature: np.ndarray
    fc: np.ndarray
    fv: np.ndarray
    ee_body: int

    def theta_r(self) -> np.ndarray:
        keep = [k for k in range(self.pi.shape[0]) if k != self.ee_body]
        return np.concatenate([self.pi[keep].ravel(), self.armature, self.fc, self.fv])

    def names(self, robot: RobotModel) -> list[str]:
        out = [f"{b}.{s}" for k, b in enumerate(robot.body_names) if k != self.ee_body
               for s in INERTIAL_SUFFIXES]
        for suffix in ("armature", "fc", "fv"):
            out += [f"{j}.{suffix}" for j in robot.joint_names]
        return out

    @classmethod
    def from_robot(cls, robot: RobotModel, ee_body: int | str = -1, armature=None, fc=None, fv=None,
                   pi=None) -> RobotPrior:
        """Nominal θ_r from the robot's URDF (friction: URDF ``friction``/``damping``; armature: the
        model's, else 0) unless given (e.g. from an ``identify`` model.json)."""
        if robot.floating_base:
            raise PayloadError(f"robot {robot.name!r} has a floating base: the payload problem is for "
                               "fixed-base arms")
        nb = robot.n_bodies
        if isinstance(ee_body, str):
            if ee_body not in robot.body_names:
                raise PayloadError(f"end-effector link {ee_body!r} is not a body of robot {robot.name!r} "
                                   f"(bodies: {', '.join(robot.body_names)})")
            ee_body = robot.body_names.index(ee_body)
        if not -nb <= ee_body < nb:
            raise PayloadError(f"end-effector body index {ee_body} out of range for {nb} bodies")
        nv = robot.nv
        pi = robot.nominal_inertial_parameters() if pi is None else np.asarray(pi, float).reshape(nb, 10)

        def vec(x, default):
            x = default if x is None else x
            return np.broadcast_to(np.asarray(x, float), (nv,)).copy()

        return cls(pi.copy(), vec(armature, np.asarray(robot.model.armature)), vec(fc, robot.urdf_friction),
                   vec(fv, robot.urdf_damping), ee_body % nb)


class PayloadProblem:
    """Stacked rows ``Y θ_e + R θ_r = T ± d`` of a fixed-base robot, grown window by window.

    Args:
        robot: the robot (fixed base); prior: `RobotPrior` (θ_r nominal and the end-effector body);
        noise: `NoiseBounds`; h: samples per window (paper 002 uses 400 at 4 kHz, ≈ 0.1 s);
        rule: quadrature of W_c and friction (``trapezoid`` or ``euler``); tau_rule: quadrature of the
        torque (``euler`` = exact for a zero-order-hold command).
    """

    def __init__(self, robot: RobotModel, prior: RobotPrior, noise: NoiseBounds, h: int = 100,
                 rule: str = "trapezoid", tau_rule: str = "euler"):
        if h < 1:
            raise PayloadError(f"window length h must be ≥ 1 sample, got {h}")
        for r in (rule, tau_rule):
            if r not in QUADRATURE_RULES:
                raise PayloadError(f"unknown quadrature rule {r!r} (use {', '.join(QUADRATURE_RULES)})")
        self.robot, self.prior, self.noise, self.h = robot, prior, noise, int(h)
        self.rule, self.tau_rule = rule, tau_rule
        self.model = robot.model.copy()
        self.model.armature = np.zeros(self.model.nv)  # armature is a θ_r term of its own
        self.data = self.model.createData()
        self.nv = robot.nv
        self.theta_r0 = prior.theta_r()
        self.theta_r_radius = noise.robot_rel * np.abs(self.theta_r0) + noise.robot_abs
        e = prior.ee_body
        self._cols_e = np.arange(10 * e, 10 * e + 10)
        self._cols_r = np.setdiff1d(np.arange(10 * robot.n_bodies), self._cols_e)
        self._rows_Y, self._rows_R, self._rows_T, self._rows_d = [], [], [], []
        self._rows_E = []  # per row: quadrature-error coefficients of |π| (P,), |fc|, |fv|
        #: |θ_e| used for the quadrature margin (set by `fg_sysid.payload.bounds.compute_bounds` from the
        #: estimate); None: no margin
        self.theta_e_abs = None
        self.quadrature_margin = True
        self._buf = None  # samples of the window in progress (t, q, v, tau, Wm, Wc)
        self.n_samples = 0
        self.t_end = None

    # ------------------------------------------------------------------ data
    def add(self, t, q, v, tau) -> int:
        """Append samples (t [s] increasing, q [rad], v [rad/s], τ [N·m], (N, nv)); returns new rows."""
        t = np.asarray(t, float).reshape(-1)
        q, v, tau = (np.asarray(x, float).reshape(len(t), self.nv) for x in (q, v, tau))
        for name, x in (("t", t), ("q", q), ("v", v), ("tau", tau)):
            if not np.isfinite(x).all():
                raise PayloadError(f"{name} contains NaN or inf: the payload problem needs q, v and τ of "
                                   "every joint at every sample")
        if len(t) and (np.any(np.diff(t) <= 0) or (self.t_end is not None and t[0] <= self.t_end)):
            raise PayloadError("sample times must be strictly increasing")
        if not len(t):
            return 0
        Wm, Wc = momentum_regressors_batch(self.model, q, v, self.data)
        new = (t, q, v, tau, Wm, Wc)
        if self._buf is not None:
            new = tuple(np.concatenate([a, b]) for a, b in zip(self._buf, new, strict=True))
        self._buf = new
        self.n_samples += len(t)
        self.t_end = t[-1]
        added = 0
        while len(self._buf[0]) > self.h:
            self._add_window(*(x[:self.h + 1] for x in self._buf))
            self._buf = tuple(x[self.h:] for x in self._buf)  # windows share their end samples
            added += self.nv
        return added

    def _add_window(self, t, q, v, tau, Wm, Wc):
        w = quadrature_weights(t, self.rule)
        wt = quadrature_weights(t, self.tau_rule)
        A = Wm[-1] - Wm[0] - np.einsum("j,jab->ab", w, Wc)
        R = np.concatenate([A[:, self._cols_r], np.diag(v[-1] - v[0]), np.diag(w @ np.sign(v)),
                            np.diag(w @ v)], axis=1)
        self._rows_Y.append(A[:, self._cols_e])
        self._rows_R.append(R)
        self._rows_T.append(wt @ tau)
        self._rows_d.append((1.0 + self.noise.model_rel) * (wt @ self.noise.tau_radius(tau)))
        self._rows_E.append(self._quadrature_error(t, v, Wc))

    def _quadrature_error(self, t, v, Wc) -> np.ndarray:
        """Estimated bound on the quadrature error of ∫W_c dt, ∫v dt, ∫sign(v) dt over one window, as
        coefficients of (|π| per body parameter, |fc|, |fv|): (nv, P + 2).

        Trapezoid: per interval Δt³/12·max|f''|, f'' from divided second differences at the interval's two
        end samples (one-sided at the window ends); euler: Δt/2·|f(t_j+1) − f(t_j)|. A sign change of v
        within an interval costs Δt. A data-derived estimate, not a proof (see docs/payload.md)."""
        dt = np.diff(t)
        n_int = len(dt)
        if self.rule == "euler":
            EW = np.einsum("j,jab->ab", dt / 2, np.abs(np.diff(Wc, axis=0)))
            Ev = (dt / 2) @ np.abs(np.diff(v, axis=0))
        else:
            def second(f):  # divided second differences at interior samples (h−1, ...)
                d1 = np.diff(f, axis=0) / dt.reshape((-1,) + (1,) * (f.ndim - 1))
                den = (dt[1:] + dt[:-1]).reshape((-1,) + (1,) * (f.ndim - 1))
                return 2 * np.diff(d1, axis=0) / den
            if n_int < 2:
                return np.zeros((self.nv, Wc.shape[2] + 2))
            S, Sv = np.abs(second(Wc)), np.abs(second(v))
            S = np.concatenate([S[:1], S, S[-1:]])
            Sv = np.concatenate([Sv[:1], Sv, Sv[-1:]])
            c = dt**3 / 12
            EW = np.einsum("j,jab->ab", c, np.maximum(S[:-1], S[1:]))
            Ev = c @ np.maximum(Sv[:-1], Sv[1:])
        Es = dt @ (np.sign(v[1:]) != np.sign(v[:-1]))
        return np.concatenate([EW, Es[:, None], Ev[:, None]], axis=1)
    def coarsened(self, k: int) -> PayloadProblem:
        """The same data with windows of k·h samples: every k consecutive windows summed into one (the
        last group may be shorter). Exact for Y, R, T and the noise bound: windows share their end
        samples, so the integrals, the torque impulses and the noise-impulse bounds of adjacent windows add
        up to those of their union. Hence every row of the coarse problem is implied by the fine rows, and
        the LP feasible set of the fine problem is a subset of the coarse one's (finer windows are never
        looser for ``lp``, up to the quadrature margin below); the least-squares image (``verified``) has
        no such order. The quadrature-margin coefficients are summed too: the per-interval estimate of
        the fine windows, which uses one-sided second differences at their inner ends (a few % off the
        coarse window's own estimate there). Samples not yet in a window are not carried over (the
        result is for bounding, not for `add`)."""
        if int(k) < 1:
            raise PayloadError(f"coarsening factor must be ≥ 1, got {k}")
        k = int(k)
        out = PayloadProblem(self.robot, self.prior, self.noise, h=self.h * k, rule=self.rule,
                             tau_rule=self.tau_rule)
        out.quadrature_margin = self.quadrature_margin
        out.theta_e_abs = self.theta_e_abs
        pairs = ((self._rows_Y, out._rows_Y), (self._rows_R, out._rows_R), (self._rows_T, out._rows_T),
                 (self._rows_d, out._rows_d), (self._rows_E, out._rows_E))
        for src, dst in pairs:
            dst.extend(sum(src[i:i + k]) for i in range(0, len(src), k))
        out.n_samples, out.t_end = self.n_samples, self.t_end
        return out

    # ------------------------------------------------------------------ stacked arrays
    @property
    def n_windows(self) -> int:
        return len(self._rows_Y)

    @property
    def Y(self) -> np.ndarray:
        """(K·nv, 10) coefficient of θ_e [s·(N·m per unit parameter)] (paper 002 eq. 21)."""
        return np.concatenate(self._rows_Y) if self._rows_Y else np.zeros((0, 10))

    @property
    def R(self) -> np.ndarray:
        """(K·nv, n_r) coefficient of θ_r."""
        return np.concatenate(self._rows_R) if self._rows_R else np.zeros((0, self.theta_r0.size))

    @property
    def T(self) -> np.ndarray:
        """(K·nv,) measured torque impulse ∫τ dt [N·m·s]."""
        return np.concatenate(self._rows_T) if self._rows_T else np.zeros(0)

    @property
    def d(self) -> np.ndarray:
        """(K·nv,) bound on the torque-noise impulse of each row [N·m·s]."""
        d = np.concatenate(self._rows_d) if self._rows_d else np.zeros(0)
        if self.quadrature_margin and self.theta_e_abs is not None and self._rows_E:
            d = d + self.quadrature_d()
        return d

    def quadrature_d(self) -> np.ndarray:
        """(K·nv,) quadrature-error margin of each row [N·m·s]: the estimated coefficients times the
        θ_r box's |upper| (rigorous) and ``theta_e_abs`` for the end effector."""
        nb, nv = self.robot.n_bodies, self.nv
        P = 10 * nb
        nr_bodies = len(self._cols_r)
        r_hi = np.abs(self.theta_r0) + self.theta_r_radius
        pi_abs = np.zeros(P)
        pi_abs[self._cols_e] = np.abs(self.theta_e_abs)
        pi_abs[self._cols_r] = r_hi[:nr_bodies]
        fc = r_hi[nr_bodies + nv: nr_bodies + 2 * nv]
        fv = r_hi[nr_bodies + 2 * nv:]
        E = np.concatenate(self._rows_E)  # (K·nv, P + 2)
        K = len(self._rows_E)
        return E[:, :P] @ pi_abs + E[:, P] * np.tile(fc, K) + E[:, P + 1] * np.tile(fv, K)

    def noise_d(self) -> np.ndarray:
        """(K·nv,) torque-noise part of d only [N·m·s]."""
        return np.concatenate(self._rows_d) if self._rows_d else np.zeros(0)

    def U0(self) -> np.ndarray:
        """Right-hand side at the nominal robot, T − R θ_r0 (paper 002 eq. 22 with the sign fixed)."""
        return self.T - self.R @ self.theta_r0

    def check_excitation(self, rtol: float = 1e-7) -> None:
        """Raise `PayloadError` when Y does not determine all 10 parameters (no or too little motion)."""
        Y = self.Y
        if Y.shape[0] < 10:
            raise PayloadError(f"too little data: {self.n_windows} window(s) of h = {self.h} samples give "
                               f"{Y.shape[0]} equations for 10 payload parameters")
        scale = np.linalg.norm(Y, axis=0)
        if not np.all(scale > 0):
            raise PayloadError("the motion does not excite the end-effector at all (no motion?)")
        s = np.linalg.svd(Y / scale, compute_uv=False)
        rank = int(np.sum(s > rtol * s[0]))
        if rank < 10:
            raise PayloadError(f"the motion does not excite all payload parameters (rank {rank} of 10 after "
                               "column scaling): move every joint, including the wrist")


def compose_payload(ee: np.ndarray, payload: pin.Inertia, placement: pin.SE3) -> np.ndarray:
    """End-effector + rigid payload (parallel-axis theorem via Pinocchio's spatial-inertia algebra).

    ``ee``: 10 dynamic parameters of the end-effector body (its frame); ``payload``: the payload's spatial
    inertia in its own frame; ``placement``: payload frame in the end-effector frame. Returns 10 parameters.
    """
    return (pin.Inertia.FromDynamicParameters(np.asarray(ee, float)) + placement.act(payload)
            ).toDynamicParameters()
