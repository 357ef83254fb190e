"""Fixed-lag online estimation on a FLOATING base (issue 13): `FloatingOnlineEstimator`.

The native fixed-lag estimator (`online.OnlineEstimator`, `online_elimination.KnotChain`) over the term set
of the batch `floating_smoother.FloatingBaseSmoother` (paper 004 Sec. III-B, IV-A) — no second solver:

* **Knot state** x_j = (q_j, v_j, a_j, λ_j): q on the free-flyer configuration manifold (base pose on SE(3),
  tangent dimension nv), λ the contact forces of ALL feet in their local frames (3 per foot; zero-force
  prior in swing), as in the batch smoother, so nx = 3 nv + 3 n_feet. `FloatingKnotChain` adds the λ block
  to the chain's state buffers (the `KnotChain._blocks` hook); the elimination, the exact Schur marginal
  prior, relinearization and forgetting are the chain's own.
* **Terms**: the batch smoother's ``_build_problem`` evaluated on the window's per-knot buffers
  (encoders and the logged base pose or a first-knot anchor, joint velocities, IMU gyro/accelerometer,
  measured contact forces, contact velocity/acceleration/height constraints, swing-force prior, unilateral
  and friction-cone hinges, inverse dynamics with the six base rows as a constraint, integration on the
  manifold, θ prior, symmetry / total-mass rows). The contact-dependent weights of those terms read live
  per-knot buffers filled from the samples seen so far (contacts are **causal**: a knot's stance flag is its
  own sample's ``contact.<frame>``; the touchdown settling of ``touchdown_settle_s`` counts past knots only).
* **Constraints** are penalties with the batch's σ_c × ``constraint_scale`` (the batch smoother's soft mode;
  the augmented-Lagrangian rounds of the batch, which re-solve everything, are not run online).
* **Linearity in p**: the inverse-dynamics rows (joint and base) are linear in the physical parameters p
  (τ = Y(q, v, a) π + friction + armature − Σ J_fᵀ λ_f), so the chain's information stays exact in p.

* **θ coordinates**: the raw inertial parameters (the batch's stages 1–2; the inverse dynamics are linear
  in them), friction and armature exp-positive. While streaming, the weakly determined inertial directions
  (the batch's ``determined_std_ratio`` test on the window's information) get a second prior at the prior
  mean (``pin_std``) and θ moves at most ``max_theta_step`` prior stds per update: without them the window
  diverged on MuJoCo B1 logs (`FloatingOnlineEstimator._update_pins`). `result` is finished like the batch
  fit: the window's free MAP, weak directions reset to the prior mean, projection onto the physically
  consistent set in the requested parameterization (log-Cholesky by default).

**Warm-up**: the first ``warmup`` seconds are fitted by `FloatingBaseSmoother` (knot stride
round(sample rate / knot_rate)); its knots start the window and the samples after its last knot are fed
online. From then on every update reads only the samples given so far.

**Samples** (`update`): a `Log` (with its floating fields) or a dict with ``t``, ``q``, ``v``, ``tau`` (joint
columns, as the fixed-base estimator) plus ``base_pos`` (n, 3) [m], ``base_quat`` (n, 4) (w, x, y, z),
``imu_gyro`` (n, 3) [rad/s], ``imu_acc`` (n, 3) [m/s²], ``imu_quat`` (n, 4), ``contacts`` ({frame: (n,)}
0/1 or an (n, n_feet) array in the estimator's foot order) and ``forces`` ({frame: (n, 3)} [N], world
axes). Which of them are used is fixed by the warm-up; a later chunk without one of them is an error. A
sample with NaN/inf in a used column, or a contact flag that is not 0/1, is rejected with a message naming
its time and the column.

Units: SI (see `online`); base pose in the world frame, λ in the foot frames [N].
"""

from __future__ import annotations

import copy
import dataclasses
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pinocchio as pin

from ..datasets.log import Log
from .floating_smoother import GRAVITY, FloatingBaseSmoother
from .online import OnlineEstimator, _blas_one_thread, _jsonable, _Samples
from .online_elimination import KnotChain
from .online_stream import Stream
from .problem import Evaluation, Problem
from .result import IdentificationResult
from .solver import EstimationError

__all__ = ["FloatingKnotChain", "FloatingOnlineEstimator", "FloatingStream", "read_floating_stream",
           "samples_log"]

#: The optional per-sample arrays of a floating-base stream: key -> (Log field, width).
VECTOR_FIELDS = {"base_pos": 3, "base_quat": 4, "imu_gyro": 3, "imu_acc": 3, "imu_quat": 4}


@dataclass
class _FSamples(_Samples):
    """Joint samples plus the floating-base columns (None = not in the stream)."""

    base_pos: np.ndarray | None
    base_quat: np.ndarray | None
    imu_gyro: np.ndarray | None
    imu_acc: np.ndarray | None
    imu_quat: np.ndarray | None
    contacts: np.ndarray  # (n, n_feet) float (0/1; NaN = bad)
    forces: np.ndarray | None  # (n, n_feet, 3) [N], world axes

    def rows(self, keep) -> _FSamples:
        def cut(x):
            return None if x is None else x[keep]

        return _FSamples(self.t[keep], self.q[keep], cut(self.v), self.tau[keep], cut(self.base_pos),
                         cut(self.base_quat), cut(self.imu_gyro), cut(self.imu_acc), cut(self.imu_quat),
                         self.contacts[keep], cut(self.forces))


def _concat(parts: list, name: str):
    xs = [getattr(p, name) for p in parts]
    return None if xs[0] is None else np.concatenate(xs)


# ---------------------------------------------------------------------------------------------- chain
class FloatingKnotChain(KnotChain):
    """`KnotChain` with the contact forces λ (3 per foot) as a fourth knot-state block; new knots take their
    floating columns from the estimator (`FloatingOnlineEstimator._record`)."""

    def __init__(self, est, sm, problem, cap: int):
        super().__init__(est, sm, problem, cap)
        self.nf = sm.nf
        self.xl = np.zeros((cap, 3 * sm.nf))
        # friction / armature in exp coordinates: far from the window's optimum (the warm-up's θ is shrunk and
        # projected) the undamped step overshoots by orders of magnitude; allow damping up to λ = 1e13
        self.top_tries = 20
        self.pin = None  # (k, nθ) rows pinning the weakly determined θ directions at pin_ref (`_theta_rows`)
        self.pin_ref = None
        self.pin_on = True
        self.max_theta_step = np.inf  # per `solve`, in prior stds (`FloatingOnlineEstimator.max_theta_step`)

    def solve(self, backsub: int | None = None, max_iterations: int = 5) -> None:
        """`KnotChain.solve`, the θ change limited to ``max_theta_step`` prior stds (max norm):
        θ ← θ₀ + α (θ − θ₀), the covariance kept, the back substitution redone at the limited θ."""
        th0 = None if self.theta is None else self.theta.copy()
        super().solve(backsub=backsub, max_iterations=max_iterations)
        if th0 is None or not np.isfinite(self.max_theta_step):
            return
        d = float(np.max(np.abs(self.theta - th0) / self.theta_std, initial=0.0))
        if d > self.max_theta_step:
            self.theta = th0 + (self.max_theta_step / d) * (self.theta - th0)
            self.back_substitute(self.n if backsub is None else min(int(backsub), self.n))

    def _blocks(self) -> tuple:
        return (self.xq, self.xv, self.xa, self.xl)

    def _theta_rows(self, theta, jacobians: bool = True):
        """Whitened rows of the θ-only terms (prior, symmetry, total mass; a hard total-mass / symmetry row
        is a penalty with its σ_c × ``constraint_scale``, `Problem.whitened`), plus the pin rows of the weakly
        determined directions when ``pin_on`` (`FloatingOnlineEstimator._update_pins`)."""
        probe = tuple(np.zeros((1, b.shape[1])) for b in self._blocks())
        ev = Evaluation(self.problem, probe, theta, jacobians, idx=[0])
        rs, Js = [], []
        for term in self.problem.terms:
            if term.touches == "theta":
                wb = self.problem.whitened(term, term.evaluate(ev, jacobians), ev)
                rs.append(np.atleast_1d(wb.r))
                Js.append(wb.Jt)
        if self.pin_on and self.pin is not None and self.pin.shape[0]:
            rs.append(self.pin @ (theta - self.pin_ref))
            Js.append(self.pin)
        return np.concatenate(rs), (np.vstack(Js) if jacobians else None)

    def append(self, t, q, v, tau) -> None:
        """A new knot from the sample at time t (joint columns q, v, τ; the floating columns from
        ``est._record(t)``). Linearization point: the logged base pose (else the previous knot's estimate
        integrated over h), the measured joints, v̄ = v̂ + â h (joint rows: measured v when logged), ā = â,
        λ̄ = the previous knot's λ̂ for feet that stay in stance, the static share m g / n_stance (foot axes)
        for a touchdown, 0 in swing."""
        if self.o + self.n + 1 >= self.cap:
            self._compact()
        est = self.est
        rec = est._record(t)
        p = self.o + self.n
        iq, iv = est._iq, est._iv
        prev = self.estimate(p - 1) if self.n > 0 else None
        h = float(t - self.t[p - 1]) if prev is not None else 0.0
        space = self.problem.space
        if rec["base_pos"] is not None:
            qm = np.zeros(self.nq)
            qm[:3] = rec["base_pos"]
            quat = rec["base_quat"] / np.linalg.norm(rec["base_quat"])
            qm[3:6], qm[6] = quat[1:], quat[0]
        elif prev is not None:
            qm = space.integrate(prev[0][None], (prev[1] * h + 0.5 * h * h * prev[2])[None])[0]
        else:
            qm = est.robot.neutral().copy()
            if rec["imu_quat"] is not None:
                quat = rec["imu_quat"] / np.linalg.norm(rec["imu_quat"])
                qm[3:6], qm[6] = quat[1:], quat[0]
        qm[iq] = q
        est._qm[p] = qm
        if est._vm is not None:
            est._vm[p] = 0.0
            est._vm[p, iv] = v
        taum = np.zeros(self.nv)
        taum[iv] = np.nan_to_num(tau)
        est._taum[p] = np.where(est._tau_mask[p], taum, 0.0)
        # contacts (causal): stance flag of this sample; constraints after the settling knots
        f = rec["contacts"] > 0.5
        est._run = np.where(f, est._run + 1, 0)
        cf = f & ~((est._run > 0) & (est._run <= est._n_settle))
        est._set_contact_weights(p, f, cf, None if self.n == 0 else est._cflags_b[p - 1])
        if est._gyro is not None:
            est._gyro[p] = rec["imu_gyro"]
        if est._acc is not None:
            est._acc[p] = rec["imu_acc"]
        if est._fmeas is not None:
            est._fmeas[p] = rec["forces"]
        if est._anchor_w is not None:  # no logged base pose: a new segment's first knot anchors the gauge
            est._anchor_w[p] = 0.0
            if self.n == 0:
                est._anchor_w[p, :6] = 1.0 / self.sm.sigma_base_pos
        # linearization point
        self.t[p] = t
        self.xq[p] = qm
        if prev is not None:
            est._h[p - 1] = h
            self.xv[p] = prev[1] + prev[2] * h
            self.xa[p] = prev[2]
        else:
            self.xv[p] = 0.0
            self.xa[p] = 0.0
        if v is not None:
            self.xv[p, iv] = v
        self.xl[p] = self._initial_forces(qm, f, None if prev is None else prev[3],
                                          None if self.n == 0 else est._flags_b[p - 1])
        self._commit_knot(p)

    def _initial_forces(self, q, stance, lam_prev, stance_prev) -> np.ndarray:
        lam = np.zeros(3 * self.nf)
        ns = int(stance.sum())
        if ns == 0:
            return lam
        sm = self.sm
        m, d = sm._kin_model, sm._kin_data
        pin.framesForwardKinematics(m, d, q)
        weight = np.array([0.0, 0.0, self.est._mass * GRAVITY / ns])
        for i, fid in enumerate(sm._fids):
            if not stance[i]:
                continue
            if lam_prev is not None and stance_prev is not None and stance_prev[i]:
                lam[3 * i:3 * i + 3] = lam_prev[3 * i:3 * i + 3]
            else:
                lam[3 * i:3 * i + 3] = d.oMf[fid].rotation.T @ weight
        return lam

    def _compact(self) -> None:
        o, n = self.o, self.n
        if o:
            for arr in (self.xl, *self.est._floating_buffers()):
                arr[:n] = arr[o:o + n].copy()
        super()._compact()


# ---------------------------------------------------------------------------------------------- estimator
class FloatingOnlineEstimator(OnlineEstimator):
    """Fixed-lag joint state–parameter–contact-force estimator for a free-flyer robot (module docstring).

    Args: those of `OnlineEstimator` (``smoother_options`` go to the warm-up `FloatingBaseSmoother`:
    ``contact_frames``, ``contact_radius``, ``use_imu``, ``use_forces``, noise levels, ...), plus
        constraint_scale: the window's constraint rows are penalties with std σ_c × this
            (`FloatingBaseSmoother.SIGMA_CONSTRAINT`: base wrench 0.05 N | N·m, contact velocity 2e-3 m/s,
            acceleration 0.05 m/s², height 1e-4 m).
        pin_std: the weakly determined inertial directions (the batch's ``determined_std_ratio`` test) get a
            second prior at the prior mean with this std [prior stds] in the window's θ solve
            (`_update_pins`; streaming only: `result` solves the window's free MAP);
        pin_period: the weak set is re-evaluated every this many seconds of log time [s].
        max_theta_step: largest θ change per update [prior stds, max norm]. The window's optimum can lie
            several prior stds from the warm-up's θ (which the batch shrank and projected); reached in one
            step, the state estimates follow by ~100 N of contact force and the relinearized knots diverge
            (MuJoCo B1, 200 Hz knots, 1 s warm-up); in steps of 0.5 σ it is reached within a few dozen
            updates. `result` solves fully (and restores the streaming state).
    """

    FLOATING = True

    def __init__(self, robot, lag: float = 0.5, knot_rate: float = 200.0, forgetting=None,
                 warmup: float = 2.0, smoother_options: dict | None = None, verbose: bool = False,
                 constraint_scale: float = 1.0, pin_std: float = 0.3, pin_period: float = 1.0,
                 max_theta_step: float = 0.5, **kw):
        if not robot.floating_base:
            raise EstimationError(f"FloatingOnlineEstimator: robot {robot.name!r} has a fixed base "
                                  "(use OnlineEstimator)")
        opts = dict(smoother_options or {})
        for bad, why in (("impacts", "reset maps at touchdowns"), ("energy", "work–energy rows")):
            if opts.get(bad):
                raise ValueError(f"smoother_options[{bad!r}] ({why}) is not supported by the online window")
        if opts.get("process_noise", "unprojected") != "unprojected":
            raise ValueError("smoother_options['process_noise']: the online window supports 'unprojected' "
                             "only")
        if not (np.isfinite(constraint_scale) and constraint_scale > 0):
            raise ValueError(f"constraint_scale must be a positive number, got {constraint_scale}")
        # the change detector scores the fixed-base inverse-dynamics residual: not wired for floating bases
        kw.setdefault("change_detection", False)
        super().__init__(robot, lag=lag, knot_rate=knot_rate, forgetting=forgetting, warmup=warmup,
                         smoother_options=opts, verbose=verbose, **kw)
        self.constraint_scale = float(constraint_scale)
        self.pin_std, self.pin_period = float(pin_std), float(pin_period)
        self.max_theta_step = float(max_theta_step)
        self._pin_t = -np.inf
        frames = opts.get("contact_frames") or getattr(robot, "contact_frames", None) or None
        self.feet_ = None if frames is None else tuple(frames)
        self._has: dict | None = None  # which optional columns the stream carries (fixed by the first chunk)
        self._iq, self._iv = robot.joint_index_q(), robot.joint_index_v()
        self._cur = None

    # ------------------------------------------------------------------ input
    def _as_samples(self, s) -> _FSamples:
        base = super()._as_samples(s)
        n = base.t.size
        get = (lambda k: getattr(s, k)) if isinstance(s, Log) else s.get
        contacts = get("contacts") or ({} if isinstance(s, Log) else None)
        if self.feet_ is None:
            if not isinstance(contacts, dict) or not contacts:
                raise ValueError("samples need contact flags ('contacts': {frame: (n,)}): the robot spec has "
                                 "no contact frames to take them from")
            self.feet_ = tuple(contacts)
        feet = self.feet_
        if contacts is None or (isinstance(contacts, dict) and not contacts):
            raise ValueError(f"samples need contact flags for the feet {list(feet)} ('contacts')")
        if isinstance(contacts, dict):
            missing = [f for f in feet if f not in contacts]
            if missing:
                raise ValueError(f"samples have no contact flags for {missing} (feet {list(feet)})")
            C = np.column_stack([np.asarray(contacts[f], float).reshape(n) for f in feet])
        else:
            C = np.asarray(contacts, float).reshape(n, len(feet))
        vec = {}
        for k, w in VECTOR_FIELDS.items():
            x = get(k)
            vec[k] = None if x is None else np.asarray(x, float).reshape(n, w)
        forces = get("forces") or None
        F = None
        if isinstance(forces, dict) and all(f in forces for f in feet):
            F = np.stack([np.asarray(forces[f], float).reshape(n, 3) for f in feet], axis=1)
        elif forces is not None and not isinstance(forces, dict):
            F = np.asarray(forces, float).reshape(n, len(feet), 3)
        if isinstance(s, Log) and F is not None and np.isnan(F).all(axis=(0, 2)).any():
            F = None  # a foot's force not measured
        present = {k: x is not None for k, x in vec.items()} | {"forces": F is not None}
        if (vec["base_pos"] is None) != (vec["base_quat"] is None):
            raise ValueError("samples need both base_pos and base_quat, or neither")
        if self._has is None:
            self._has = present
        else:
            lost = [k for k, used in self._has.items() if used and not present[k]]
            if lost:
                raise ValueError(f"samples without {lost} after chunks that had them")
            for k, used in self._has.items():
                if not used:
                    vec[k] = None
            if not self._has["forces"]:
                F = None
        return _FSamples(base.t, base.q, base.v, base.tau, vec["base_pos"], vec["base_quat"], vec["imu_gyro"],
                         vec["imu_acc"], vec["imu_quat"], C, F)

    def _checked_columns(self, s: _FSamples, tau_req) -> list:
        """The joint columns of `OnlineEstimator` plus the base pose, IMU and measured contact forces."""
        return super()._checked_columns(s, tau_req) + [
            (k, getattr(s, k), "wxyz" if VECTOR_FIELDS[k] == 4 else "xyz", None) for k in VECTOR_FIELDS]

    def _sample_culprit(self, s: _FSamples, i: int) -> str | None:
        """Contact flags that are not 0/1, NaN/inf in a measured contact force."""
        c = s.contacts[i]
        bad = ~((c == 0.0) | (c == 1.0))
        if np.any(bad):
            foot = self.feet_[int(np.argmax(bad))]
            return f"contact flag of {foot} is {float(c[bad][0]):g}, not 0 or 1"
        if s.forces is not None and not np.all(np.isfinite(s.forces[i])):
            foot = self.feet_[int(np.argmax(~np.all(np.isfinite(s.forces[i]), axis=1)))]
            return f"NaN/inf in forces[{foot}]"
        return None

    def _keep_rows(self, s: _FSamples, keep: np.ndarray) -> _FSamples:
        return s.rows(keep)

    def _record(self, t: float) -> dict:
        """The floating columns of the current chunk's sample at time t (for `FloatingKnotChain.append`)."""
        s = self._cur
        i = int(np.searchsorted(s.t, t))
        if i >= s.t.size or s.t[i] != t:
            raise RuntimeError(f"no sample at t={t} in the current chunk")

        def row(x):
            return None if x is None else x[i]

        return {"base_pos": row(s.base_pos), "base_quat": row(s.base_quat), "imu_gyro": row(s.imu_gyro),
                "imu_acc": row(s.imu_acc), "imu_quat": row(s.imu_quat), "contacts": s.contacts[i],
                "forces": row(s.forces)}

    # ------------------------------------------------------------------ warm-up
    def _warmup_feed(self, s: _FSamples, msgs: list) -> None:
        if self._buf and len(self._buf) > 1:
            gap = s.t[0] - self._buf[-1].t[-1]
            dt = np.median(np.diff(np.concatenate([b.t for b in self._buf])))
            if gap > self.max_gap * max(dt, 1.0 / self.knot_rate):
                msgs.append(f"gap of {gap:.4f} s before t={s.t[0]:.6f} s during warm-up: warm-up restarts")
                self._buf = []
        self._buf.append(s)
        if s.t[-1] - self._buf[0].t[0] < self.warmup:
            return
        parts, self._buf = self._buf, []
        whole = _FSamples(*(_concat(parts, f.name) for f in dataclasses.fields(_FSamples)))
        self._start_floating(whole, msgs)

    def _as_log(self, s: _FSamples) -> Log:
        contacts = {f: s.contacts[:, i] > 0.5 for i, f in enumerate(self.feet_)}
        forces = {} if s.forces is None else {f: s.forces[:, i] for i, f in enumerate(self.feet_)}
        return Log(s.t, s.q, s.v, s.tau, tuple(self.robot.joint_names), source="online warm-up",
                   imu_gyro=s.imu_gyro, imu_acc=s.imu_acc, imu_quat=s.imu_quat, base_pos=s.base_pos,
                   base_quat=s.base_quat, contacts=contacts, forces=forces)

    def _start_floating(self, s: _FSamples, msgs: list) -> None:
        """Batch `FloatingBaseSmoother` on the warm-up samples; its knots start the window, the samples after
        its last knot (the Savitzky–Golay initialization drops the log's last half window) are fed online."""
        log = self._as_log(s)
        dt = float(np.median(np.diff(log.t)))
        self._stride = max(int(round(1.0 / (self.knot_rate * dt))), 1)
        self._dt = dt
        self._tau_measured = log.tau_measured
        self._log(f"warm-up: batch floating-base smoother on {log.n_samples} samples ({log.duration:.2f} s), "
                  f"knot stride {self._stride}")
        opts = dict(self.smoother_options)
        opts.setdefault("contact_frames", self.feet_)
        sm = FloatingBaseSmoother(self.robot, knot_stride=self._stride, verbose=self.verbose, **opts)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sm.fit(log)
        self.smoother_ = sm
        # the window's θ coordinates: the raw inertial parameters (the batch's stages 1–2), in which the
        # inverse dynamics are linear; `result` shrinks weak directions and projects like the batch's end
        win = self._win = copy.copy(sm)
        theta0 = win._use_parameterization("raw", sm.layout_.to_physical(sm.result_.theta))
        self.layout_ = win.layout_
        self.feet_ = tuple(sm.feet_)
        idx = sm._idx
        n = idx.size
        self._build_floating_buffers(win, n)
        # the warm-up knots' floating buffers (the batch's own per-knot arrays)
        self._run = np.zeros(sm.nf, int)
        for k in range(n):
            self._run = np.where(sm._flags[k], self._run + 1, 0)
            self._set_contact_weights(k, sm._flags[k], sm._cflags[k], None if k == 0 else sm._cflags[k - 1])
        for mine, theirs in ((self._gyro, sm._gyro), (self._acc, sm._acc), (self._fmeas, sm._fmeas)):
            if mine is not None:
                mine[:n] = theirs
        if self._anchor_w is not None:
            self._anchor_w[0, :6] = 1.0 / sm.sigma_base_pos
        p = self.layout_.to_physical(theta0)
        self._mass = float(np.sum(self.layout_.split(p)[0][:, 0]))
        self._chain = FloatingKnotChain(self, win, self._problem, self._cap)
        self._chain.max_theta_step = self.max_theta_step
        self._chain.start(log.t[idx], sm._qm, sm._vm, sm._taum, sm.states_, theta0)
        self._marginalize_old()
        self._update_pins()
        self._chain.solve(max_iterations=50)
        self.theta_, self.theta_cov_ = self._chain.theta.copy(), self._chain.theta_cov.copy()
        self._last_knot_t = float(log.t[idx[-1]])
        self._tail_knots = int(np.ceil(self.relin_lag / (self._stride * self._dt))) + 1
        self._pending_forget = 0.0
        rest = np.arange(s.t.size) > idx[-1]
        if rest.any():
            self._online_feed(s.rows(rest), msgs)

    def _set_contact_weights(self, p: int, flags, cflags, cflags_prev) -> None:
        """Live contact weights of buffer position p (stance flag, settled-stance flag, previous knot's)."""
        sm = self._win
        self._flags_b[p] = flags
        self._cflags_b[p] = cflags
        self._m3[p] = np.repeat(np.asarray(cflags, float), 3)
        self._swing_w[p] = np.repeat(1.0 - np.asarray(flags, float), 3) / sm.sigma_swing_force
        self._cone_w[p] = np.asarray(cflags, float) / sm.sigma_cone
        self._pair_w[p] = 0.0
        if cflags_prev is not None:
            self._pair_w[p - 1] = np.asarray(cflags_prev, bool) & np.asarray(cflags, bool)

    def _floating_buffers(self) -> list:
        """Per-knot buffers besides the chain's and `_build_buffers`' (compacted with them)."""
        out = [self._flags_b, self._cflags_b, self._m3, self._swing_w, self._cone_w, self._pair_w]
        return out + [b for b in (self._gyro, self._acc, self._fmeas, self._anchor_w) if b is not None]

    def _build_floating_buffers(self, sm: FloatingBaseSmoother, n_warm: int) -> None:
        """Per-knot buffers (capacity ~ window + margin) and the window `Problem`: the batch smoother's own
        ``_build_problem`` on a shallow copy whose per-knot arrays are these buffers; the terms whose
        contact weights the batch bakes in at build time read the live buffers instead (`_live`)."""
        window = int(np.ceil(self.lag / (self._stride * self._dt))) + 2
        self._cap = cap = max(window + max(window // 2, 64), n_warm + 8)
        r, nf = self.robot, sm.nf
        nv = r.nv
        self._qm = np.zeros((cap, r.nq))
        self._vm = None if sm._vm is None else np.zeros((cap, nv))
        self._taum = np.zeros((cap, nv))
        self._tau_mask = np.broadcast_to(sm._tau_mask[0], (cap, nv)).copy()
        self._h = np.ones(cap)
        self._flags_b = np.zeros((cap, nf), bool)
        self._cflags_b = np.zeros((cap, nf), bool)
        self._m3 = np.zeros((cap, 3 * nf))
        self._swing_w = np.zeros((cap, 3 * nf))
        self._cone_w = np.zeros((cap, nf))
        self._pair_w = np.zeros((cap, nf))
        self._gyro = None if sm._gyro is None else np.zeros((cap, 3))
        self._acc = None if sm._acc is None else np.zeros((cap, 3))
        self._fmeas = None if sm._fmeas is None else np.zeros((cap, nf, 3))
        self._anchor_w = None if sm._has_base else np.zeros((cap, nv))
        dt_knot = float(np.median(sm._h))
        self._n_settle = int(np.ceil(sm.touchdown_settle_s / max(dt_knot, 1e-12) - 1e-9))
        shadow = copy.copy(sm)
        shadow._qm, shadow._vm, shadow._taum, shadow._tau_mask, shadow._h = (
            self._qm, self._vm, self._taum, self._tau_mask, self._h)
        ones = np.ones((cap, nf), bool)
        shadow._flags, shadow._cflags, shadow._stance_pairs = ones, ones, ones
        shadow._impulse_slot = np.zeros((cap, nf), bool)
        shadow._impacts, shadow._smooth_interval, shadow._force_mask = [], np.ones(cap), None
        shadow._gyro, shadow._acc, shadow._fmeas = self._gyro, self._acc, self._fmeas
        shadow._energy_log, shadow.extra_terms, shadow._proj_whitener = None, (), None
        problem = shadow._build_problem(sm.noise_)
        self._problem: Problem = self._live(problem)
        self._problem.constraints.scale = self.constraint_scale

    def _live(self, problem: Problem) -> Problem:
        live = {"contact_acceleration": ("rows", self._m3), "contact_velocity": ("rows", self._m3),
                "swing_force": ("rows", self._swing_w), "contact_height": ("intervals", self._pair_w),
                "unilateral": ("rows", self._cone_w), "friction_cone": ("rows", self._cone_w),
                "base_anchor": ("rows", self._anchor_w)}
        for i, term in enumerate(problem.terms):
            if term.name in live:
                problem.terms[i] = _with_live_weights(term, *live[term.name])
            elif term.name == "symmetry" and self._win._symmetry is not None:
                problem.terms[i] = self._fast_symmetry()
        return problem

    def _fast_symmetry(self):
        """The symmetry rows of `FloatingBaseSmoother._parameter_row_functions` (raw differences
        p_left − R p_right, `factors.parameter_priors.symmetry_residual` × σ) from the chain's cached
        (p, ∂p/∂θ) and index arrays computed once (the factor recomputes its indices per call: ~5 ms of
        every update's top solve on the B1)."""
        from . import terms

        win = self._win
        lay, std, hard = win.layout_, win._sym_std, win.symmetry_std <= 0
        li, ri, sg = win._symmetry.indices(lay)

        def rows(th, jac):
            if not jac:
                p = lay.to_physical(th)
                return p[li] - sg * p[ri], None
            p, D = self._chain.pmap(th)
            return p[li] - sg * p[ri], D[li] - sg[:, None] * D[ri]

        return terms.theta_rows("symmetry", rows, std, hard)

    # ------------------------------------------------------------------ streaming
    def _online_feed(self, s: _FSamples, msgs: list) -> dict:
        self._cur = s
        out = super()._online_feed(s, msgs)
        c = self._chain
        if c.n and c.t_newest - self._pin_t >= self.pin_period:
            self._update_pins()
        return out

    def _information(self, theta, pins: bool = False):
        """θ information of the window at θ (states eliminated): Jᵀ T_pp J + J_rᵀ J_r (J = ∂p/∂θ, J_r the θ
        rows; the pin rows only with ``pins``) — the inverse θ covariance of the batch's Gauss–Newton."""
        c = self._chain
        T = c.theta_information()
        nt = c.nt
        _, J = c.pmap(theta)
        c.pin_on = pins
        try:
            _, Jr = c._theta_rows(theta)
        finally:
            c.pin_on = True
        return J.T @ T[:nt, :nt] @ J + Jr.T @ Jr, Jr

    def _weak_directions(self, theta):
        """The batch's `FloatingBaseSmoother._shrink_weak_directions` test on the window: with S the θ
        information (states eliminated, no pins), the inertial block's data information in prior-whitened
        coordinates G = D (S_ii|other − P_ii) D (P the θ rows' information, D the prior stds); eigenvectors
        whose posterior / prior std ratio (1 + μ)^(-1/2) exceeds ``determined_std_ratio`` are weak.
        Returns U (n_inertial, k), orthonormal, or None when the ratio is None."""
        ratio = self.smoother_.determined_std_ratio
        if ratio is None:
            return None
        S, Jr = self._information(theta)
        si = self.layout_.s_inertial
        other = np.ones(theta.size, bool)
        other[si] = False
        S_ii = S[si, si] - S[si][:, other] @ np.linalg.solve(S[np.ix_(other, other)], S[other][:, si])
        D = self._win._theta_std[si]
        G = D[:, None] * (S_ii - (Jr.T @ Jr)[si, si]) * D[None, :]
        mu, U = np.linalg.eigh(0.5 * (G + G.T))
        return U[:, mu < 1.0 / ratio**2 - 1.0]

    def _update_pins(self) -> None:
        """Pin the weakly determined inertial directions towards the prior mean in the streaming θ solve: rows
        Uᵀ D⁻¹ (θ_i − θ̄_i) / ``pin_std`` (U from `_weak_directions` at the current θ; a second prior of
        ``pin_std`` prior stds along them). The batch smoother resets the same directions to the prior mean
        at the end of its fit (`result` does too, after the window's free MAP); while streaming, θ can run
        along them by many prior stds (trading with the contact forces) and the relinearized knots diverge.
        Measured (MuJoCo B1 sway; tests/test_online_floating.py, `benchmarks/bench_online.py`): 200 Hz
        knots, 1 s warm-up: diverged with pin_std 1 (even with ``max_theta_step`` 0.5 and more
        relinearization), stable with 0.3; 100 Hz knots, 0.6 s warm-up: the same. Pinning `result`'s θ too
        cost held-out accuracy (0.107 with pins vs 0.0966 free-then-shrunk, batch 0.0970), so `result`
        solves without pins. The set is re-evaluated every ``pin_period`` seconds of log time: directions
        become determined as data arrive."""
        c = self._chain
        self._pin_t = c.t_newest
        U = self._weak_directions(c.theta)
        if U is None:
            c.pin = None
            return
        si = self.layout_.s_inertial
        D = self._win._theta_std[si]
        pin = np.zeros((U.shape[1], c.nt))
        pin[:, si] = U.T / D[None, :] / self.pin_std
        c.pin, c.pin_ref = pin, self._win._theta_bar.copy()
        self.weak_directions_ = int(U.shape[1])

    def window_states(self) -> dict:
        """The window's smoothed knot states: ``t``, ``q`` (nq: base pose + joints), ``v``, ``a`` (nv),
        ``lam`` (3 per foot, foot axes [N])."""
        if not self.ready:
            raise EstimationError("the online estimator is still in warm-up: no window yet")
        c = self._chain
        c.back_substitute()
        x = c.states(slice(0, c.n))
        return {"t": c.t[c.o:c.o + c.n].copy(), "q": x[0], "v": x[1], "a": x[2], "lam": x[3]}

    def result(self) -> IdentificationResult:
        """An `IdentificationResult` of the window, finished like the batch smoother's fit: the window's free
        MAP θ (raw inertial coordinates, no pins, no step limit; the streaming state is restored after) with
        the weakly determined inertial directions back at the prior mean (`_weak_directions`, the batch's
        ``determined_std_ratio``), projected onto the physically consistent set in the requested
        parameterization; covariance mapped by the delta method; joint-row
        inverse-dynamics residuals with the window's contact forces."""
        if not self.ready:
            raise EstimationError("the online estimator is still in warm-up: no result yet")
        sm, win, c = self.smoother_, self._win, self._chain
        with _blas_one_thread():
            self._update_pins()
            saved = (c.theta.copy(), c.theta_cov.copy(), c.dx.copy(), c.max_theta_step)
            c.max_theta_step, c.pin_on = np.inf, False  # the window's free MAP, as the batch's stage 2
            try:
                c.solve(max_iterations=50)
                theta_raw, theta_cov = c.theta.copy(), c.theta_cov.copy()
                st = self.window_states()
            finally:  # the stream goes on from its own (pinned, step-limited) state
                c.theta, c.theta_cov, c.dx, c.max_theta_step = saved
                c.pin_on = True
            self.theta_, self.theta_cov_ = theta_raw.copy(), theta_cov
            U = self._weak_directions(theta_raw)
            if U is not None:  # what the pins leave of the weak components goes too (exactly the batch's end)
                si, win = self.layout_.s_inertial, self._win
                D = win._theta_std[si]
                dw = (theta_raw[si] - win._theta_bar[si]) / D
                theta_raw[si] = win._theta_bar[si] + D * (dw - U @ (U.T @ dw))
            cov_raw = np.linalg.inv(self._information(theta_raw)[0])  # without pins: the batch's covariance
        lay = sm.layout_  # the requested parameterization
        theta, _ = lay.to_theta_projected(self.layout_.to_physical(theta_raw), sm._p_bar)
        A = np.linalg.solve(lay.jacobian(theta), self.layout_.jacobian(theta_raw))  # dθ_req / dθ_raw
        cov = A @ cov_raw @ A.T
        sl = slice(c.o, c.o + c.n)
        r = win.id_factor(st["q"], st["v"], st["a"], st["lam"], theta_raw, self._taum[sl], jacobians=False)[0]
        iv = self._iv
        r = r[:, iv] * self._tau_mask[sl][:, iv]
        return IdentificationResult.build(
            layout=lay, theta=theta, theta_cov=0.5 * (cov + cov.T),
            theta_prior=(sm._theta_bar, sm._theta_std), t=st["t"], q=st["q"], v=st["v"], a=st["a"],
            history=[], converged=True, seconds=self._seconds, noise=sm.noise_.as_dict(),
            method="online", knots=int(c.n), id_residual=r,
            measured_joints=[j for j, m in zip(self.robot.joint_names, self._tau_measured, strict=True) if m],
            extras={"online": {"lag": self.lag, "knot_rate": self.knot_rate,
                               "forgetting": _jsonable(self.forgetting), "updates": self.n_updates_,
                               "constraint_scale": self.constraint_scale,
                               "weak_directions_at_prior": getattr(self, "weak_directions_", 0)},
                    "floating_base": {"contact_frames": list(self.feet_), "contact_radius": win.radius_}})


def _with_live_weights(term, kind: str, arr):
    """``term`` with its row weights read from the live per-knot buffer ``arr`` (``kind``: "rows" for knot
    terms, "intervals" for pair terms) instead of the array baked in when the term was built."""
    if arr is None:
        return term
    orig = term.evaluate

    def evaluate(ev, jac):
        res = orig(ev, jac)
        res.w = ev.rows(arr) if kind == "rows" else ev.intervals(arr)
        return res

    if getattr(orig, "depends_on_theta", False):
        evaluate.depends_on_theta = True
    return dataclasses.replace(term, evaluate=evaluate)


# ---------------------------------------------------------------------------------------------- streams
@dataclass(frozen=True)
class FloatingStream(Stream):
    """A `online_stream.Stream` with the floating-base columns (NaN allowed; judged per sample by the
    estimator): ``columns`` {key of `VECTOR_FIELDS`: (N, 3 | 4)}, ``contacts`` {frame: (N,) float 0/1},
    ``forces`` {frame: (N, 3) [N], world axes}."""

    columns: dict = field(default_factory=dict)
    contacts: dict = field(default_factory=dict)
    forces: dict = field(default_factory=dict)

    @classmethod
    def from_log(cls, log: Log, robot) -> FloatingStream:
        """A validated in-memory floating-base `Log` as a stream (benchmarks, tests)."""
        base = Stream.from_log(log, robot)
        cols = {k: np.asarray(getattr(log, k), float) for k in VECTOR_FIELDS if getattr(log, k) is not None}
        return cls(*(getattr(base, f.name) for f in dataclasses.fields(Stream)), columns=cols,
                   contacts={f: np.asarray(x, float) for f, x in log.contacts.items()},
                   forces={f: np.asarray(x, float) for f, x in log.forces.items()
                           if not np.isnan(np.asarray(x, float)).all()})

    def chunk(self, start: int, stop: int) -> dict:
        out = super().chunk(start, stop)
        out.update({k: x[start:stop] for k, x in self.columns.items()})
        out["contacts"] = {f: x[start:stop] for f, x in self.contacts.items()}
        if self.forces:
            out["forces"] = {f: x[start:stop] for f, x in self.forces.items()}
        return out


def read_floating_stream(path: str | os.PathLike, robot, *, bag_options=None, echo=None) -> FloatingStream:
    """`online_stream.read_stream` for a floating-base robot: the joint columns by its rules, plus the
    ``base.pos.*``, ``base.quat.*``, ``imu.gyro.*``, ``imu.acc.*``, ``imu.quat.*`` groups (each complete
    or absent), ``contact.<frame>`` flags (required for the robot's contact frames) and
    ``force.<frame>.{x,y,z}``. Values are not judged here (the estimator rejects bad samples one by one).
    Raises `StreamError` naming the culprit column."""
    from ..datasets.io import LogError, _read_any
    from .online_stream import StreamError, _column, read_stream

    base = read_stream(path, robot, bag_options=bag_options, echo=echo, floating_ok=True)
    try:
        df = _read_any(Path(path), bag_options, echo)
    except LogError as e:
        raise StreamError(str(e)) from None
    groups = {"base_pos": ("base.pos", "xyz"), "base_quat": ("base.quat", "wxyz"),
              "imu_gyro": ("imu.gyro", "xyz"), "imu_acc": ("imu.acc", "xyz"),
              "imu_quat": ("imu.quat", "wxyz")}
    cols = {}
    for key, (prefix, comps) in groups.items():
        names = [f"{prefix}.{c}" for c in comps]
        have = [c for c in names if c in df.columns]
        if have and len(have) != len(names):
            missing = [c for c in names if c not in df.columns]
            raise StreamError(f"{path}: column {missing[0]!r} missing; group '{prefix}' needs all of {names}")
        if have:
            cols[key] = np.column_stack([_column(df, c, path) for c in names])
    if ("base_pos" in cols) != ("base_quat" in cols):
        raise StreamError(f"{path}: give both base.pos.* and base.quat.* columns, or neither")
    contacts = {c[len("contact."):]: _column(df, c, path) for c in df.columns if c.startswith("contact.")}
    frames = tuple(getattr(base.robot, "contact_frames", None) or contacts)
    if not frames:
        raise StreamError(f"{path}: no contact flags (contact.<frame> columns): robot {robot.name!r} has a "
                          "floating base and its spec names no contact frames")
    missing = [f for f in frames if f not in contacts]
    if missing:
        raise StreamError(f"{path}: column 'contact.{missing[0]}' missing (contact flags of the feet "
                          f"{list(frames)} are needed for a floating base)")
    forces = {}
    for f in frames:
        names = [f"force.{f}.{c}" for c in "xyz"]
        if all(c in df.columns for c in names):
            x = np.column_stack([_column(df, c, path) for c in names])
            if not np.isnan(x).all():
                forces[f] = x
    return FloatingStream(*(getattr(base, fl.name) for fl in dataclasses.fields(Stream)), columns=cols,
                          contacts={f: contacts[f] for f in frames}, forces=forces)


def samples_log(chunks: list, robot, source: str = "online samples") -> Log:
    """A `Log` (with the floating-base fields) from accepted sample dicts (`FloatingStream.chunk` format):
    the replay's warm-up samples and the gate's hold-out."""
    def cat(key):
        xs = [c.get(key) for c in chunks]
        return None if xs[0] is None else np.concatenate([np.asarray(x, float) for x in xs])

    def cat_dict(key):
        first = chunks[0].get(key) or {}
        return {f: np.concatenate([np.asarray(c[key][f], float) for c in chunks]) for f in first}

    contacts = {f: x > 0.5 for f, x in cat_dict("contacts").items()}
    return Log(cat("t"), cat("q"), cat("v"), cat("tau"), tuple(robot.joint_names), source=source,
               imu_gyro=cat("imu_gyro"), imu_acc=cat("imu_acc"), imu_quat=cat("imu_quat"),
               base_pos=cat("base_pos"), base_quat=cat("base_quat"), contacts=contacts,
               forces=cat_dict("forces"))
