"""Native fixed-lag online estimator (issue 13): `OnlineEstimator`.

The same factor terms as the batch `smoother.JointSmoother` (paper 004 eq. 1: encoders, velocities,
inverse dynamics, integration, parameter prior), over a sliding window of knots x_j = (q_j, v_j, a_j)
plus the parameter vector θ, which is never marginalized. Knots leaving the window (older than ``lag``
seconds) are marginalized into a Gaussian prior on (oldest kept knot, θ): the exact Schur complement
of the linear system, not a re-anchoring.

**Warm-up.** The first ``warmup`` seconds are buffered and fitted by the batch `JointSmoother`
(``smoother_options``): noise levels, layout, initial θ and knot states. From then on everything is
causal: each update reads only the samples given so far.

**Incremental elimination** (`online_elimination.KnotChain`). Every knot j has one linearization point
x̄_j shared by all its factors and the θ̄_j its θ-dependent rows were linearized at. Its whitened linear
factors (``Problem.whitened`` of the batch terms evaluated on that knot / pair with ``Evaluation(idx=...)``)
are kept as Gram blocks on (δx_j, δx_{j+1}, p, 1) with δx_j = x_j ⊖ x̄_j and p the **physical** parameters
(`layout.ParameterLayout.to_physical`): the inverse-dynamics rows are linear in p (regressor identity
τ = Y(q, v, a) π + friction + armature), so J_p = J_θ (∂p/∂θ)⁻¹ and c = r̄ − J_p p(θ̄_j) make the stored
information exact in p whatever θ̄_j was (only the tanh-width friction coordinates stay nonlinear).
Knots are eliminated oldest → newest, p last (the order of `linear_solver`, paper 004 Sec. VIII);
eliminating x_j leaves a conditional and the x_{j+1} rows of a dense running factor on (x_{j+1}, p) —
both cached, with the p-block contributions, so that a new knot (factors only at the newest end)
re-eliminates only the last knots. The top is the window's information on p, a quadratic; θ minimizes it
plus the θ prior (the batch's parameter prior) by a few Levenberg–Marquardt iterations in θ (exact in the
parameterization's nonlinearity; ``top_iterations`` per update, warm-started), and
cov θ = (Jᵀ H_p J + prior)⁻¹ — the batch smoother's Gauss–Newton covariance. Back substitution gives the
recent knots' states (all of them on request, `window_states`).
A knot is relinearized (iSAM2's fluid relinearization) when its state step or the θ change since its
linearization exceed thresholds — at most ``max_relinearize`` per update, oldest first, among the knots
younger than ``relin_lag`` (so that the re-elimination per update stays bounded); a new knot, linearized
at a prediction, is relinearized at its first solution by the next update.

**Marginalization.** The running factor that eliminating the oldest knot leaves on (next knot, p) IS the
exact Schur complement; it becomes the prior, and the next knot's linearization point is frozen from then
on (first-estimate Jacobians).

**Forgetting.** θ is constant inside the window; with ``forgetting`` = σ_rw [θ units per √s] the
information the prior carries about p is that of a random walk over the time Δt the marginalized knots
covered: convolved with N(0, J diag(σ_rw² Δt) Jᵀ) (the predict step at the window boundary), with the
conditional of the boundary knot given p kept — only the prior's p block changes, and all cached p blocks
shift by the same amount (no re-elimination). The URDF prior on θ is not forgotten.

**Bad samples.** NaN in a required column, a time not after the last accepted sample (out of order or
repeated) → the sample is rejected with a message naming its time and the culprit; the estimator goes on
with the next sample. A gap longer than ``max_gap`` knot periods restarts the chain: the window's states
are marginalized out and the next knot starts a new segment with the θ marginal as its only prior.

Units: SI; q [rad | m], v [rad/s | m/s], a [rad/s² | m/s²], τ [N·m | N], t [s]; θ in the layout's
unconstrained coordinates (`layout.ParameterLayout`). Fixed bases here; floating bases (contacts, IMU,
base pose on SE(3)): the subclass `online_floating.FloatingOnlineEstimator`.
"""

from __future__ import annotations

import copy
import dataclasses
import sys
import time
import warnings
from collections import deque
from dataclasses import dataclass, field

import numpy as np
from threadpoolctl import ThreadpoolController

from ..datasets.log import Log
from ..robots import RobotModel
from .linear_solver import SingularSystemError
from .online_elimination import KnotChain
from .problem import Problem
from .result import IdentificationResult
from .smoother import JointSmoother
from .solver import EstimationError

__all__ = ["OnlineEstimator", "OnlineUpdate"]

_CONTROLLER = None


def _blas_one_thread():
    """One BLAS thread for the small dense blocks (the controller is built once: building it costs ms)."""
    global _CONTROLLER
    if _CONTROLLER is None:
        _CONTROLLER = ThreadpoolController()
    return _CONTROLLER.limit(limits=1, user_api="blas")


@dataclass
class OnlineUpdate:
    """What one `OnlineEstimator.update` returns.

    Attributes:
        theta: current θ (layout coordinates), or None during warm-up.
        theta_cov: its covariance (inverse θ Schur complement of the window), or None.
        t: time of the newest knot [s] (None before the first knot).
        states: the knots added by this update (filtered estimates): dict of ``t`` (k,), ``q`` (k, nq),
            ``v`` (k, nv), ``a`` (k, nv).
        rejected: one message per rejected sample (and per chain restart at a gap).
        latency_s: wall time of this update [s].
        ready: False during warm-up.
        events: changes detected in this update (`online_change.ChangeEvent`, with the reset applied).
    """

    theta: np.ndarray | None
    theta_cov: np.ndarray | None
    t: float | None
    states: dict
    rejected: list
    latency_s: float
    ready: bool
    events: list = field(default_factory=list)


@dataclass
class _Samples:
    t: np.ndarray
    q: np.ndarray
    v: np.ndarray | None
    tau: np.ndarray


STATS_KEPT = 200_000  # updates kept in `OnlineEstimator.stats_` (bounded memory; 16 min at 200 Hz)


def _ring():
    return deque(maxlen=STATS_KEPT)


@dataclass
class _Stats:
    """Per-update statistics (the last `STATS_KEPT` updates)."""

    latency: deque = field(default_factory=_ring)  # wall time per update [s]
    cpu: deque = field(default_factory=_ring)  # CPU time of this thread per update [s] (shared machines)
    knots_in_window: deque = field(default_factory=_ring)
    relinearized: deque = field(default_factory=_ring)  # knots relinearized (besides the new ones)
    eliminated: deque = field(default_factory=_ring)  # knots re-eliminated

    def table(self):
        import pandas as pd

        return pd.DataFrame({"latency_s": list(self.latency), "cpu_s": list(self.cpu),
                             "knots_in_window": list(self.knots_in_window),
                             "relinearized": list(self.relinearized), "eliminated": list(self.eliminated)})


class OnlineEstimator:
    """Fixed-lag joint state–parameter estimator, fed chunk by chunk (see the module docstring).

    Args:
        robot: the `RobotModel` (fixed base) whose joints match the stream's columns.
        lag: window length [s]; older knots are marginalized.
        knot_rate: knots per second [Hz] (one knot every round(sample rate / knot_rate) samples).
        forgetting: θ random-walk std per √s [θ units] (None: θ constant, no forgetting).
        warmup: seconds buffered and fitted by the batch smoother before the first online update (5 s:
            with 2 s the Panda's poor warm-up fit stayed in the frozen marginal prior, 20× the batch error
            at the end of a 60 s log; with 5 s 0.98×, Z1 1.02×, `benchmarks/bench_online.py`).
        smoother_options: keyword arguments of the warm-up `JointSmoother` (noise levels, friction, ...).
        verbose: progress lines on stderr.
        max_gap: a time step longer than ``max_gap`` knot periods restarts the chain.
        max_relinearize: knots relinearized per update at most (besides the newest ones).
        relin_x: thresholds on |δq| [rad], |δv| [rad/s], |δa| [rad/s²] of a knot's step from its
            linearization point.
        relin_theta: threshold on max |θ − θ̄_j| / θ prior std.
        relin_lag: only knots younger than this [s] are relinearized (older ones keep their linearization
            point until they leave the window; their estimates still move by back substitution). Bounds
            the re-elimination per update to the knots in this lag.
        top_iterations: Levenberg–Marquardt iterations on θ at the top per update (warm-started from the
            previous update's θ, so the iterations accumulate over updates; `result` converges fully).
        change_detection: detect changes of the robot's dynamics and reset θ's information then
            (`online_change.CusumDetector` on the smoothed knots' inverse-dynamics residuals): True
            (default settings), False, or a dict of `CusumDetector` options plus ``reset`` (the factor the
            marginal prior's information is multiplied by at a detected change, `KnotChain.scale_prior`;
            default 0.001: its covariance × 1000; the window is first marginalized down to its 2 newest
            knots, so that no knot straddling the change stays), ``relearn`` (default 0: off; then
            there is no hold-off either and the detector resets again while the residuals stay
            inconsistent with θ — on a 1 kg payload change 9 resets in 0.6 s, then none. With ``relearn``
            > 0, for at most that long after the alarm the window keeps every new knot (lag = time
            since the alarm), relinearizes up to
            ``relearn_relinearize`` (default 8) stale knots of the whole window per update and runs a
            full `refine` every ``relearn_refine`` s (default 0.5); relearning ends once a refine moves θ
            by less than ``relin_theta`` prior stds (at least 1 s after the alarm), so that the
            post-change knots are marginalized only once θ has converged to the new robot — knots
            marginalized while linearized at the stale θ bias it for good;
            `benchmarks/bench_online_relearn.py` compares the variants).
        reanchor_period: re-anchor the marginal prior at the oldest knot's current estimate and relinearize
            that knot (`KnotChain.reanchor_prior`) when its step or θ drift exceed the thresholds, at most
            once per this many seconds of log (None: only in `refine`).
    """

    FLOATING = False  # floating bases: the subclass `online_floating.FloatingOnlineEstimator`

    def __init__(self, robot: RobotModel, lag: float = 1.0, knot_rate: float = 200.0, forgetting=None,
                 warmup: float = 5.0, smoother_options: dict | None = None, verbose: bool = False,
                 max_gap: float = 5.0, max_relinearize: int = 2, relin_x=(1e-2, 1e-1, 1.0),
                 relin_theta: float = 0.1, relin_lag: float = 0.05, top_iterations: int = 2,
                 change_detection=True, reanchor_period: float | None = None):
        if robot.floating_base and not self.FLOATING:
            raise EstimationError(
                f"OnlineEstimator: robot {robot.name!r} has a floating base; use "
                "online_floating.FloatingOnlineEstimator (make_estimator routes floating robots there)")
        for name, val in (("lag", lag), ("knot_rate", knot_rate), ("warmup", warmup), ("max_gap", max_gap)):
            if not (np.isfinite(val) and val > 0):
                raise ValueError(f"{name} must be a positive number, got {val}")
        fg = None if forgetting is None else np.asarray(forgetting, float)
        if fg is not None and not (np.all(np.isfinite(fg)) and np.all(fg >= 0)):
            raise ValueError(f"forgetting must be a non-negative std per √s, got {forgetting}")
        opts = dict(smoother_options or {})
        for bad in ("energy", "extra_terms", "knot_stride", "solver"):
            if opts.get(bad):
                raise ValueError(f"smoother_options[{bad!r}] is not supported by the online estimator")
        self.robot = robot
        self.lag = float(lag)
        self.knot_rate = float(knot_rate)
        self.forgetting = forgetting
        self.warmup = float(warmup)
        self.smoother_options = opts
        self.verbose = verbose
        self.max_gap = float(max_gap)
        self.max_relinearize = int(max_relinearize)
        self.relin_x = np.asarray(relin_x, float)
        self.relin_theta = float(relin_theta)
        self.relin_lag = float(relin_lag)
        self.top_iterations = int(top_iterations)
        (self.detector_, self.reset_scale, self.relearn, self.relearn_relinearize,
         self.relearn_refine) = _detector(change_detection)
        self._relearn_from, self._relearn_until = -np.inf, -np.inf
        self._refine_at: list = []  # log times of the full refinements while relearning
        self.changes_: list = []  # every ChangeEvent so far
        self._events: list = []
        if reanchor_period is not None and not (np.isfinite(reanchor_period) and reanchor_period > 0):
            raise ValueError(f"reanchor_period must be a positive number of seconds, got {reanchor_period}")
        self.reanchor_period = None if reanchor_period is None else float(reanchor_period)
        self._next_reanchor = -np.inf
        self.reanchored_ = 0
        self.stats_ = _Stats()
        self.n_updates_ = 0
        self._seconds = 0.0
        self.layout_ = None
        self.theta_ = None
        self.theta_cov_ = None
        self.smoother_ = None
        self._buf: list[_Samples] = []
        self._last_t = -np.inf
        self._v_logged = None
        self._tau_measured = None
        self._chain = None

    # ------------------------------------------------------------------ public
    @property
    def ready(self) -> bool:
        return self._chain is not None

    def update(self, samples) -> OnlineUpdate:
        """Feed a chunk (a `Log` slice or a dict of ``t`` (n,), ``q`` (n, nj), ``v`` (n, nj) | None,
        ``tau`` (n, nj)); returns the current θ, its covariance and the knots added (`OnlineUpdate`)."""
        t0, c0 = time.perf_counter(), time.thread_time()
        with _blas_one_thread():
            chunk = self._as_samples(samples)
            good, rejected = self._validate(chunk)
            new_states = self._empty_states()
            if good is not None:
                if not self.ready:
                    self._warmup_feed(good, rejected)
                else:
                    new_states = self._online_feed(good, rejected)
        lat = time.perf_counter() - t0
        if self.ready:
            self.stats_.latency.append(lat)
            self.n_updates_ += 1
            self._seconds += lat
            self.stats_.cpu.append(time.thread_time() - c0)
            self.stats_.relinearized.append(getattr(self, "_relin_count", 0))
            self.stats_.eliminated.append(self._chain.last_eliminated)
            self._relin_count = 0
            self.stats_.knots_in_window.append(self._chain.n)
        events, self._events = self._events, []
        return OnlineUpdate(None if self.theta_ is None else self.theta_.copy(),
                            None if self.theta_cov_ is None else self.theta_cov_.copy(),
                            None if not self.ready else self._chain.t_newest,
                            new_states, rejected, lat, self.ready, events)

    def window_states(self) -> dict:
        """The window's smoothed knot states (full back substitution): ``t``, ``q``, ``v``, ``a``."""
        if not self.ready:
            raise EstimationError("the online estimator is still in warm-up: no window yet")
        c = self._chain
        c.back_substitute()
        x = c.states(slice(0, c.n))
        return {"t": c.t[c.o:c.o + c.n].copy(), "q": x[0], "v": x[1], "a": x[2]}

    def result(self) -> IdentificationResult:
        """An `IdentificationResult` at the current θ (θ covariance of the window, window trajectory):
        usable by `prediction.heldout_report` and the model.json writer."""
        if not self.ready:
            raise EstimationError("the online estimator is still in warm-up: no result yet")
        sm, c = self.smoother_, self._chain
        with _blas_one_thread():
            c.solve(max_iterations=50)
        self.theta_, self.theta_cov_ = c.theta.copy(), c.theta_cov.copy()
        st = self.window_states()
        n = c.n
        sl = slice(c.o, c.o + n)
        r = sm._id.evaluate(st["q"], st["v"], st["a"], self._taum[sl], self.theta_, jacobians=False).r
        r = r * self._tau_mask[sl]
        return IdentificationResult.build(
            layout=self.layout_, theta=self.theta_, theta_cov=self.theta_cov_,
            theta_prior=(sm._theta_bar, sm._theta_std), t=st["t"], q=st["q"], v=st["v"], a=st["a"],
            history=[], converged=True, seconds=self._seconds, noise=sm.noise_.as_dict(),
            method="online", knots=int(n), id_residual=r,
            measured_joints=[j for j, m in zip(self.robot.joint_names, self._tau_measured, strict=True) if m],
            extras={"online": {"lag": self.lag, "knot_rate": self.knot_rate,
                               "forgetting": _jsonable(self.forgetting),
                               "updates": self.n_updates_,
                               "changes_detected": len(self.changes_)}})

    def refine(self, iterations: int = 1) -> None:
        """Relinearize every knot of the window at the current estimate and re-solve, ``iterations`` times:
        undamped Gauss–Newton iterations of the window (the streaming updates only relinearize the young
        knots). The oldest knot, which carries the marginal prior, is relinearized by re-anchoring the prior
        there (`KnotChain.reanchor_prior`)."""
        if not self.ready:
            return
        with _blas_one_thread():
            c = self._chain
            for _ in range(iterations):
                c.solve(max_iterations=50)
                if c.frozen_upto >= 0:
                    c.reanchor_prior()
                    self.reanchored_ += 1
                c.relinearize(list(range(c.frozen_upto + 1, c.n)))
                c.solve(max_iterations=50)
            self.theta_, self.theta_cov_ = c.theta.copy(), c.theta_cov.copy()

    # ------------------------------------------------------------------ input
    def _as_samples(self, s) -> _Samples:
        nj = self.robot.n_joints
        if isinstance(s, Log):
            if tuple(s.joint_names) != tuple(self.robot.joint_names):
                raise EstimationError(f"log joints {list(s.joint_names)} do not match robot "
                                      f"{self.robot.name!r} joints {list(self.robot.joint_names)}")
            t, q, v, tau = s.t, s.q, s.v, s.tau
        elif isinstance(s, dict):
            missing = [k for k in ("t", "q", "tau") if k not in s]
            if missing:
                raise ValueError(f"samples need the keys t, q, tau (v optional); missing {missing}")
            t, q, v, tau = s["t"], s["q"], s.get("v"), s["tau"]
        else:
            raise TypeError(f"samples must be a Log or a dict of arrays, not {type(s).__name__}")
        t = np.atleast_1d(np.asarray(t, float))
        q = np.asarray(q, float).reshape(t.size, -1)
        tau = np.asarray(tau, float).reshape(t.size, -1)
        v = None if v is None else np.asarray(v, float).reshape(t.size, -1)
        for name, arr in (("q", q), ("tau", tau), ("v", v)):
            if arr is not None and arr.shape[1] != nj:
                raise ValueError(f"samples[{name!r}] has {arr.shape[1]} columns; robot {self.robot.name!r} "
                                 f"has {nj} joints")
        if self._v_logged is None:
            self._v_logged = v is not None
        elif self._v_logged and v is None:
            raise ValueError("samples without 'v' after chunks that had logged velocities")
        elif not self._v_logged:
            v = None
        return _Samples(t, q, v, tau)

    def _validate(self, s: _Samples):
        """Drop bad samples with a message each: NaN/inf time, t not after the last accepted sample, NaN in
        a column of `_checked_columns` (q, v, a measured effort column), or a subclass's `_sample_culprit`."""
        keep = np.ones(s.t.size, bool)
        msgs = []
        last = self._last_t
        tau_req = self._tau_measured if self._tau_measured is not None else ~np.all(np.isnan(s.tau), axis=0)
        cols = self._checked_columns(s, tau_req)
        for i in range(s.t.size):
            ti = s.t[i]
            culprit = None
            if not np.isfinite(ti):
                culprit = "time t is not finite"
            elif ti <= last:
                culprit = (f"t is not after the last accepted sample t={last:.6f} s "
                           f"({'repeated' if ti == last else 'out of order'})")
            else:
                for col, arr, labels, req in cols:
                    if arr is None:
                        continue
                    bad = ~np.isfinite(arr[i]) if req is None else (~np.isfinite(arr[i]) & req)
                    if np.any(bad):
                        culprit = f"NaN/inf in {col}[{labels[int(np.argmax(bad))]}]"
                        break
                if culprit is None:
                    culprit = self._sample_culprit(s, i)
            if culprit is not None:
                keep[i] = False
                msgs.append(f"sample at t={ti:.6f} s rejected: {culprit}")
            else:
                last = ti
        self._last_t = last
        if not keep.any():
            return None, msgs
        return self._keep_rows(s, keep), msgs

    def _checked_columns(self, s, tau_req) -> list:
        """(name, array or None, labels, required mask or None) of the columns a sample must have finite."""
        names = self.robot.joint_names
        return [("q", s.q, names, None), ("v", s.v, names, None), ("tau", s.tau, names, tau_req)]

    def _sample_culprit(self, s, i: int) -> str | None:
        """A subclass's extra check of sample i (after the finite-column checks); None = good."""
        return None

    def _keep_rows(self, s: _Samples, keep: np.ndarray) -> _Samples:
        return _Samples(s.t[keep], s.q[keep], None if s.v is None else s.v[keep], s.tau[keep])

    # ------------------------------------------------------------------ warm-up
    def _warmup_feed(self, s: _Samples, msgs: list) -> None:
        if self._buf:
            prev = self._buf[-1].t[-1]
            gap = s.t[0] - prev
            if self._buf and len(self._buf) > 1:
                dt = np.median(np.diff(np.concatenate([b.t for b in self._buf])))
                if gap > self.max_gap * max(dt, 1.0 / self.knot_rate):
                    msgs.append(f"gap of {gap:.4f} s before t={s.t[0]:.6f} s during warm-up: "
                                "warm-up restarts")
                    self._buf = []
        self._buf.append(s)
        t_first = self._buf[0].t[0]
        if s.t[-1] - t_first < self.warmup:
            return
        t = np.concatenate([b.t for b in self._buf])
        q = np.concatenate([b.q for b in self._buf])
        v = None if self._buf[0].v is None else np.concatenate([b.v for b in self._buf])
        tau = np.concatenate([b.tau for b in self._buf])
        self._buf = []
        self._start(Log(t, q, v, tau, tuple(self.robot.joint_names), source="online warm-up"))

    def _start(self, log: Log) -> None:
        """Batch fit of the warm-up log; the window starts with its knots (`KnotChain`)."""
        dt = float(np.median(np.diff(log.t)))
        self._stride = max(int(round(1.0 / (self.knot_rate * dt))), 1)
        self._dt = dt
        self._tau_measured = log.tau_measured
        self._log(f"warm-up: batch smoother on {log.n_samples} samples ({log.duration:.2f} s), "
                  f"knot stride {self._stride}")
        opts = dict(self.smoother_options)
        opts.setdefault("process_from_log", False)  # issue 9's process-noise cap: not validated online yet
        opts.setdefault("process_motion_scale", False)  # issue 12's motion scale: not validated online yet
        sm = JointSmoother(self.robot, knot_stride=self._stride, verbose=self.verbose, **opts)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sm.fit(log)
        self.smoother_ = sm
        self.layout_ = sm.layout_
        idx = np.arange(0, log.n_samples, self._stride)
        x = sm.states_
        self._build_buffers(sm, len(idx))
        self._chain = KnotChain(self, sm, self._problem, self._cap)
        self._chain.start(log.t[idx], log.q[idx], None if log.v is None else log.v[idx], log.tau[idx], x,
                          sm.result_.theta)
        self._marginalize_old()
        self._chain.solve()
        self.theta_, self.theta_cov_ = self._chain.theta.copy(), self._chain.theta_cov.copy()
        self._last_knot_t = float(log.t[idx[-1]])
        self._tail_knots = int(np.ceil(self.relin_lag / (self._stride * self._dt))) + 1
        self._pending_forget = 0.0

    def _build_buffers(self, sm: JointSmoother, n_warm: int) -> None:
        """Per-knot buffers (capacity ~ window + margin, compacted in place) and the window `Problem` with the
        batch smoother's own term builders reading them."""
        span = self.lag + (self.relearn if self.detector_ is not None else 0.0)  # relearning after a change
        window = int(np.ceil(span / (self._stride * self._dt))) + 2
        self._cap = cap = max(window + max(window // 2, 64), n_warm + 8)
        nv = self.robot.nv
        self._qm = np.zeros((cap, self.robot.nq))
        self._vm = np.zeros((cap, nv)) if self._v_logged else None
        self._taum = np.zeros((cap, nv))
        iv = self.robot.joint_index_v()
        mask = np.zeros(nv, bool)
        mask[iv] = self._tau_measured
        self._tau_mask = np.broadcast_to(mask, (cap, nv)).copy()
        self._h = np.ones(cap)
        shadow = copy.copy(sm)
        shadow._qm, shadow._vm, shadow._taum, shadow._tau_mask, shadow._h = (
            self._qm, self._vm, self._taum, self._tau_mask, self._h)
        shadow._energy_log = None
        shadow.extra_terms = ()
        self._problem: Problem = shadow._build_problem(sm.noise_)

    # ------------------------------------------------------------------ streaming
    def _online_feed(self, s: _Samples, msgs: list) -> dict:
        c = self._chain
        if self._refine_at and s.t[-1] >= self._refine_at[0]:  # relearning after a detected change
            while self._refine_at and s.t[-1] >= self._refine_at[0]:
                self._refine_at.pop(0)
            th0 = c.theta.copy()
            self.refine(1)
            moved = float(np.max(np.abs(c.theta - th0) / c.theta_std))
            if moved < self.relin_theta and s.t[-1] >= self._relearn_from + 1.0:
                self._relearn_until = min(self._relearn_until, float(s.t[-1]))  # converged: marginalize
                self._refine_at = []
        period = self._stride * self._dt
        added = []
        for i in range(s.t.size):
            ti = s.t[i]
            gap = ti - self._last_knot_t
            if gap > self.max_gap * period:
                msgs.append(f"gap of {gap:.4f} s before t={ti:.6f} s (> {self.max_gap:g} knot periods): "
                            "the chain restarts here with the θ marginal as its prior")
                c.restart_segment()
                self._pending_forget += gap
            elif gap < period - 0.5 * self._dt:
                continue  # not a knot sample
            c.append(ti, s.q[i], None if s.v is None else s.v[i], s.tau[i])
            self._last_knot_t = ti
            added.append(c.n - 1)
            self._marginalize_old()
        if not added:
            return self._empty_states()
        # fluid relinearization of the young knots at the last solution (new knots start from a prediction:
        # they are relinearized at the next update), then one elimination from the oldest changed knot
        if c.t_newest < self._relearn_until:  # relearning after a detected change: the whole window
            relin = c.stale(self.relearn_relinearize, depth=c.n)
        else:
            relin = c.stale(self.max_relinearize)
        if relin:
            c.relinearize(relin)
        if (self.reanchor_period is not None and c.frozen_upto >= 0 and c.t_newest >= self._next_reanchor
                and (c.step_large(0) or c._theta_stale(0))):
            c.reanchor_prior()
            self.reanchored_ += 1
            self._next_reanchor = c.t_newest + self.reanchor_period
        try:
            c.solve(backsub=self._tail_knots + len(added), max_iterations=self.top_iterations)
        except SingularSystemError as e:
            if c.frozen_upto >= 0 or c.n >= 4:
                raise
            # a new segment's first knots (after a gap) may not determine every state yet (e.g. the
            # accelerations of joints without effort measurements): wait for the next knots
            msgs.append(f"t={c.t_newest:.6f} s: new segment not solvable yet ({e}); waiting for more knots")
            c.restart = 0
            return self._empty_states()
        self._relin_count = len(relin)
        self._detect(msgs)
        self.theta_, self.theta_cov_ = c.theta.copy(), c.theta_cov.copy()
        k = min(len(added), c.n)
        x = c.states(slice(c.n - k, c.n))
        return {"t": c.t[c.o + c.n - k:c.o + c.n].copy(), "q": x[0], "v": x[1], "a": x[2]}

    def _empty_states(self) -> dict:
        r = self.robot
        return {"t": np.zeros(0), "q": np.zeros((0, r.nq)), "v": np.zeros((0, r.nv)),
                "a": np.zeros((0, r.nv))}

    def _marginalize_old(self) -> None:
        c = self._chain
        if c.n and c.t_newest < self._relearn_until:  # relearning: the window is the post-change knots
            while c.n > 2 and c.t[c.o] < self._relearn_from:
                self._pending_forget += c.marginalize_oldest()
        while c.n > 2 and c.t[c.o + c.n - 1] - c.t[c.o + 1] >= self._lag_now():
            dt = c.marginalize_oldest()
            self._pending_forget = getattr(self, "_pending_forget", 0.0) + dt
        if self.forgetting is not None and self._pending_forget > 0:
            q = np.broadcast_to(np.asarray(self.forgetting, float) ** 2, (c.nt,)) * self._pending_forget
            c.inflate_theta(q)
        self._pending_forget = 0.0

    def _lag_now(self) -> float:
        """The window length [s]: ``lag``, or while relearning after a change the time since it started."""
        c = self._chain
        if c.n and c.t_newest < self._relearn_until:
            return max(c.t_newest - self._relearn_from, 0.0) + 1e-9
        return self.lag

    def _log(self, msg: str) -> None:
        if self.verbose:
            print(msg, file=sys.stderr, flush=True)

    # ------------------------------------------------------------------ change detection
    def residual_statistic(self, j0: int, j1: int) -> tuple[np.ndarray, np.ndarray, int]:
        """(t, s, m) of window knots j0 … j1−1: s = Σ ((τ(x̂; θ) − τ_meas)/σ_τ)² over the m measured
        joints — the whitened inverse-dynamics residual at the knots' current estimates and θ
        (σ_τ [N·m]: the warm-up smoother's effort noise). The statistic of `online_change`."""
        c = self._chain
        q, v, a = c.states(slice(j0, j1))[:3]
        b = slice(c.o + j0, c.o + j1)
        r = self.smoother_._id.evaluate(q, v, a, self._taum[b], c.theta, jacobians=False).r
        w = np.zeros(self.robot.nv)
        w[self.robot.joint_index_v()] = 1.0 / np.asarray(self.smoother_.noise_.tau, float)
        z = r * self._tau_mask[b] * w
        m = int(np.count_nonzero(self._tau_mask[b][0] * w)) if j1 > j0 else 0
        return c.t[b].copy(), np.sum(z * z, axis=1), m

    def _detect(self, msgs: list) -> None:
        """Test the knots that left the back-substitution tail since the last update; on an alarm reset
        θ's information (module docstring of `online_change`)."""
        det = self.detector_
        if det is None:
            return
        c = self._chain
        j1 = c.n - self._tail_knots
        if j1 <= 0:
            return
        ts = c.t[c.o:c.o + j1]
        j0 = int(np.searchsorted(ts, det.t_last, side="right"))
        if j0 >= j1:
            return
        t, s, m = self.residual_statistic(j0, j1)
        if m == 0:
            return
        ev = det.update(t, s, m)
        if ev is None:
            return
        # covariance reset: marginalize the window but its 2 newest knots — every knot that may straddle
        # the change (the CUSUM's change-time estimate is early by up to the smoothing delay: smoothed
        # residuals of pre-change knots already see the post-change ones; a pre-change knot left in the
        # relearning window has a large residual for the new θ and biases it) —, then scale the prior
        # (it now holds them); relearning: the new knots stay in the window
        m0 = c.marginalized
        t_keep = float(c.t[c.o + max(c.n - 2, 0)])
        self._relearn_from, self._relearn_until = t_keep, t_keep + self.relearn
        n_ref = int(np.ceil(self.relearn / self.relearn_refine - 1e-9))
        self._refine_at = [min(ev.t + (k + 1) * self.relearn_refine, self._relearn_until)
                           for k in range(n_ref)]
        while c.n > 2 and c.t[c.o] < t_keep:
            self._pending_forget += c.marginalize_oldest()
        self._marginalize_old()
        k = c.marginalized - m0
        c.scale_prior(self.reset_scale)
        c.solve(backsub=c.n, max_iterations=max(self.top_iterations, 10))
        ev = dataclasses.replace(ev, reset=self.reset_scale, marginalized=k)
        self.changes_.append(ev)
        self._events.append(ev)
        self._log(ev.message())


def _detector(option):
    """(CusumDetector | None, reset scale) from the ``change_detection`` option."""
    from .online_change import CusumDetector

    if option is False or option is None:
        return None, 1.0, 0.0, 1, 1.0
    opts = {} if option is True else dict(option)
    reset = float(opts.pop("reset", 0.001))
    if not (np.isfinite(reset) and 0.0 <= reset < 1.0):
        raise ValueError(f"change_detection['reset'] must be in [0, 1), got {reset}")
    relearn = float(opts.pop("relearn", 0.0))
    if not (np.isfinite(relearn) and relearn >= 0):
        raise ValueError(f"change_detection['relearn'] must be ≥ 0 [s], got {relearn}")
    nrel = int(opts.pop("relearn_relinearize", 8))
    if nrel < 1:
        raise ValueError(f"change_detection['relearn_relinearize'] must be ≥ 1, got {nrel}")
    every = float(opts.pop("relearn_refine", 0.5))
    if not (np.isfinite(every) and every > 0):
        raise ValueError(f"change_detection['relearn_refine'] must be > 0 [s], got {every}")
    opts.setdefault("holdoff", relearn)
    return CusumDetector(**opts), reset, relearn, nrel, every


def _jsonable(x):
    return None if x is None else np.asarray(x, float).tolist()
