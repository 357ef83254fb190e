"""The online (fixed-lag) estimator solved with GTSAM's fixed-lag smoothers (issue 13 item 3).

The same window as the native `OnlineEstimator`: knots every 1/``knot_rate`` s over the last ``lag``
seconds plus the global parameter vector θ, with the batch smoother's factor terms (paper 004 eq. 1:
encoders, velocities, inverse dynamics, integration, parameter prior; `JointSmoother._build_problem`,
the single source of the term set). Here GTSAM holds the window:

* every new knot adds its knot terms and the integration pair to the previous knot as
  `gtsam.CustomFactor`s (`gtsam_backend.term_factor`: the terms' own residuals and analytic Jacobians),
  its state stored as local coordinates δ around its own anchor (the state predicted from the previous
  knot), x_k = x̄_k ⊕ δ_k;
* `gtsam.IncrementalFixedLagSmoother` (iSAM2: one Gauss–Newton step per update, relinearizing variables
  whose δ moved more than a threshold) or `gtsam.BatchFixedLagSmoother` (Levenberg–Marquardt on the whole
  window every update) keeps the knots of the last ``lag`` seconds; older knots are marginalized by GTSAM
  into a linear (Gaussian) prior on what remains (iSAM2's ``marginalizeLeaves`` / the batch smoother's
  `LinearContainerFactor`s), the exact Schur complement at their linearization point;
* θ's timestamp is refreshed on every update so θ never leaves the window
  (../shared/notes/gtsam-python-performance.md §2).

Warm-up: the first ``warmup`` seconds are buffered and fitted by the batch `JointSmoother`
(``smoother_options``), which gives the noise levels, the parameter layout, the prior, θ₀ and the states;
the warm-up knots and their factors (at those noise levels) seed the smoother, so with a lag longer than
the stream the fixed-lag problem is the batch problem over all knots.

Forgetting (θ random walk, std ``forgetting`` per √s in θ units): θ gets a new key every ``theta_epoch``
seconds tied to the previous one by a between factor of std σ·√Δt (the random walk's transition density);
new knots' factors use the newest key and old keys leave the window with their knots.

Fixed-base robots only (a floating base raises `EstimationError`).
"""

from __future__ import annotations

import copy
import time
from collections import deque

import gtsam
import numpy as np

from ..datasets.log import Log
from ..factors.keys import P, state
from .gtsam_backend import term_factor
from .online import STATS_KEPT, OnlineUpdate
from .problem import Problem, _has_theta, retract_states
from .result import IdentificationResult
from .smoother import JointSmoother
from .solver import EstimationError

__all__ = ["GtsamFixedLagEstimator"]

SMOOTHERS = ("incremental", "batch")


def _as_arrays(samples, nj: int) -> tuple:
    """(t, q, v or None, tau) of a `Log` chunk or a mapping with keys t, q, v (optional), tau."""
    if isinstance(samples, Log):
        t, q, v, tau = samples.t, samples.q, samples.v, samples.tau
    else:
        try:
            t, q = samples["t"], samples["q"]
        except (KeyError, TypeError) as e:
            raise ValueError("samples must be a Log or a mapping with keys t, q, v (optional), tau") from e
        v, tau = samples.get("v"), samples.get("tau")
    t = np.atleast_1d(np.asarray(t, float))
    q = np.asarray(q, float).reshape(t.size, -1)
    v = None if v is None else np.asarray(v, float).reshape(t.size, -1)
    tau = np.full_like(q, np.nan) if tau is None else np.asarray(tau, float).reshape(t.size, -1)
    for name, arr in (("q", q), ("v", v), ("tau", tau)):
        if arr is not None and arr.shape[1] != nj:
            raise ValueError(f"samples column {name!r} has {arr.shape[1]} joints, the robot has {nj}")
    return t, q, v, tau


class GtsamFixedLagEstimator:
    """Online joint state–parameter estimation with GTSAM's fixed-lag smoothers (see the module docstring).

    Args:
        robot: a fixed-base `RobotModel` whose joints match the stream's columns.
        lag: window length [s] (knots older than the newest knot time − ``lag`` are marginalized).
        knot_rate: knots per second; a sample becomes a knot when it is at least 1/``knot_rate`` s after
            the previous knot (samples in between are skipped, as the batch smoother's ``knot_stride``).
        forgetting: θ random-walk std per √s (scalar or per θ coordinate, θ units), or None (θ constant).
        warmup: seconds buffered and fitted by the batch `JointSmoother` before the first estimate.
        smoother_options: keyword arguments of `JointSmoother` for the warm-up fit (``knot_stride`` is set
            from ``knot_rate``; ``energy`` and ``extra_terms`` are not streamed).
        smoother: "incremental" (`gtsam.IncrementalFixedLagSmoother`, iSAM2) or "batch"
            (`gtsam.BatchFixedLagSmoother`, Levenberg–Marquardt over the window every update).
        relinearize_threshold: iSAM2 relinearizes a knot when its δ moved more than this since its
            linearization in any coordinate: a scalar or (q, v, a) thresholds [rad, rad/s, rad/s²] (the
            default never relinearizes for a: every term is linear in a); θ when it moved more than
            ``theta_relinearize_threshold`` (θ units). 0 relinearizes everything every update (the batch
            Gauss–Newton step, O(window) per update).
        relinearize_skip: iSAM2 checks for relinearization every this many updates.
        theta_epoch: seconds per θ key when ``forgetting`` is set.
        dogleg: iSAM2 with Powell's dogleg (a trust region) instead of Gauss–Newton steps (GN can diverge
            when many variables are relinearized far from the optimum).
        wildfire_threshold: iSAM2's back-substitution stops where the solution changed less than this.
    """

    def __init__(self, robot, lag: float = 1.0, knot_rate: float = 200.0, forgetting=None,
                 warmup: float = 5.0, smoother_options: dict | None = None, smoother: str = "incremental",
                 relinearize_threshold=(1e-3, 1e-2, np.inf), theta_relinearize_threshold: float = 0.05,
                 relinearize_skip: int = 1, theta_epoch: float = 0.1, dogleg: bool = False,
                 wildfire_threshold: float = 1e-3,
                 verbose: bool = False):
        if smoother not in SMOOTHERS:
            raise ValueError(f"smoother must be one of {SMOOTHERS}, not {smoother!r}")
        if robot.floating_base:
            raise EstimationError(f"GtsamFixedLagEstimator: robot {robot.name!r} has a floating base; the "
                                  "GTSAM fixed-lag back end streams the fixed-base term set only")
        for name, val in (("lag", lag), ("knot_rate", knot_rate), ("warmup", warmup),
                          ("theta_epoch", theta_epoch)):
            if not np.isfinite(val) or val <= 0:
                raise ValueError(f"{name} must be a positive number of seconds (or Hz), not {val!r}")
        if forgetting is not None and np.any(np.asarray(forgetting, float) < 0):
            raise ValueError("forgetting (θ random-walk std per √s) must be ≥ 0")
        self.robot = robot
        self.lag = float(lag)
        self.knot_rate = float(knot_rate)
        self.forgetting = forgetting
        self.warmup = float(warmup)
        self.smoother_options = dict(smoother_options or {})
        self.smoother = smoother
        self.relinearize_threshold = np.broadcast_to(np.asarray(relinearize_threshold, float), (3,)).copy()
        self.theta_relinearize_threshold = float(theta_relinearize_threshold)
        self.relinearize_skip = int(relinearize_skip)
        self.theta_epoch = float(theta_epoch)
        self.dogleg = bool(dogleg)
        self.wildfire_threshold = float(wildfire_threshold)
        self.verbose = verbose
        self._nj = robot.n_joints
        self._buffer: list[tuple] = []
        self._t_last = -np.inf  # last accepted sample time
        self.ready_ = False
        self.theta_ = None
        self.theta_cov_ = None
        # per-update statistics (the last STATS_KEPT updates): wall and process CPU time [s], knots in the
        # window, variables iSAM2 relinearized; warmup_s: the call that ran the warm-up fit
        self.stats_ = {k: deque(maxlen=STATS_KEPT) for k in ("latency_s", "cpu_s", "knots", "relinearized")}
        self.stats_["warmup_s"] = None

    # ------------------------------------------------------------------ public
    def update(self, samples) -> OnlineUpdate:
        """Feed samples (a `Log` chunk or a mapping of arrays t (n,), q (n, nj), v (n, nj) | None,
        tau (n, nj)); returns the current estimate (`OnlineUpdate`). Samples with a NaN time, position or
        (when the warm-up had them) velocity, and samples not after the last accepted one, are rejected
        with a message; the others are used."""
        t0, c0 = time.perf_counter(), time.process_time()
        t, q, v, tau = _as_arrays(samples, self._nj)
        rejected, good = self._screen(t, q, v)
        new = [(t[i], q[i], None if v is None else v[i], tau[i]) for i in good]
        states = {}
        if not self.ready_:
            self._buffer += new
            if self._buffer and self._buffer[-1][0] - self._buffer[0][0] >= self.warmup:
                states = self._start()
        elif new:
            states = self._advance(new)
        latency = time.perf_counter() - t0
        if self.ready_:
            if self.stats_["warmup_s"] is None:
                self.stats_["warmup_s"] = latency
            elif states:
                self.stats_["latency_s"].append(latency)
                self.stats_["cpu_s"].append(time.process_time() - c0)
                self.stats_["knots"].append(self._n_window())
        return OnlineUpdate(None if self.theta_ is None else self.theta_.copy(),
                            None if self.theta_cov_ is None else self.theta_cov_.copy(),
                            self._t_newest if self.ready_ else None, states,
                            rejected, latency, self.ready_)

    def iterate(self, iterations: int = 1) -> np.ndarray:
        """More nonlinear iterations on the current window without new data (iSAM2: one relinearization
        and Gauss–Newton step each; batch: one more Levenberg–Marquardt solve); returns θ."""
        if not self.ready_:
            raise EstimationError("no estimate yet: the warm-up has not ended")
        for _ in range(int(iterations)):
            self._smoother_update(gtsam.NonlinearFactorGraph(), gtsam.Values(), {})
        self._read_estimate([self._n_knots - 1])
        return self.theta_.copy()

    def window_states(self) -> dict:
        """Smoothed states of every knot in the window: ``t`` (n,), ``q``, ``v``, ``a`` (n, nv)."""
        est = self._sm.calculateEstimate()
        keys = [g for g in self._anchor if est.exists(state(g))]
        return self._states_of(keys, lambda g: est.atVector(state(g)))

    def result(self) -> IdentificationResult:
        """An `IdentificationResult` at the current θ and covariance with the window's states."""
        if not self.ready_:
            raise EstimationError("no estimate yet: the warm-up has not ended")
        s = self.window_states()
        return IdentificationResult.build(
            layout=self.layout_, theta=self.theta_, theta_cov=self.theta_cov_,
            theta_prior=(self._warm._theta_bar, self._warm._theta_std), t=s["t"], q=s["q"], v=s["v"],
            a=s["a"], history=[], converged=True, seconds=float(np.sum(self.stats_["latency_s"])),
            noise=self.noise_.as_dict(), method=f"online-gtsam-{self.smoother}", knots=int(s["t"].size),
            measured_joints=list(self.robot.joint_names))

    # ------------------------------------------------------------------ stream screening
    def _screen(self, t, q, v) -> tuple[list, list]:
        rejected, good = [], []
        need_v = self.ready_ and self._warm._vm is not None
        for i in range(t.size):
            culprit = None
            if not np.isfinite(t[i]):
                culprit = "t is not finite"
            elif t[i] <= self._t_last:
                culprit = f"t not after the last accepted sample ({self._t_last:.6f} s)"
            elif not np.all(np.isfinite(q[i])):
                culprit = f"q of joint {self.robot.joint_names[int(np.argmin(np.isfinite(q[i])))]!r} is NaN"
            elif need_v and (v is None or not np.all(np.isfinite(v[i]))):
                culprit = "v missing or NaN (the warm-up had velocities)"
            if culprit is None:
                good.append(i)
                self._t_last = float(t[i])
            else:
                rejected.append(f"sample at t={t[i]:.6f} s rejected: {culprit}")
        return rejected, good

    # ------------------------------------------------------------------ warm-up
    def _start(self) -> dict:
        t = np.array([s[0] for s in self._buffer])
        q = np.array([s[1] for s in self._buffer])
        has_v = all(s[2] is not None for s in self._buffer)
        v = np.array([s[2] for s in self._buffer]) if has_v else None
        tau = np.array([s[3] for s in self._buffer])
        self._buffer = []
        log = Log(t, q, v, tau, tuple(self.robot.joint_names), source="online warm-up")
        rate = (t.size - 1) / max(t[-1] - t[0], 1e-12)
        opts = dict(self.smoother_options)
        opts["knot_stride"] = max(1, int(round(rate / self.knot_rate)))
        opts.setdefault("process_from_log", False)  # issue 9's process-noise cap: not validated online yet
        opts.setdefault("process_motion_scale", False)  # issue 12's motion scale: not validated online yet
        self._warm = sm = JointSmoother(self.robot, **opts).fit(log)
        self.layout_, self.noise_ = sm.layout_, sm.noise_
        iv = self.robot.joint_index_v()
        self._iv = iv
        kt = np.asarray(sm.knot_times_, float)
        self._knot_t = {k: float(tk) for k, tk in enumerate(kt)}
        self._t_newest = float(kt[-1])
        n = kt.size
        idx = np.arange(0, log.n_samples, opts["knot_stride"])
        taum = self._tau_rows(tau[idx])
        problem = self._chunk_problem(q[idx], None if v is None else v[idx], taum, np.diff(kt), True)
        self._last_data = (q[idx][-1], None if v is None else v[idx][-1], taum[-1])
        self._anchor: dict[int, tuple] = {}
        self._theta_key, self._epoch_start = P(0), float(kt[-1])
        self._epoch = 0
        graph, values, stamps = gtsam.NonlinearFactorGraph(), gtsam.Values(), {}
        x = sm.states_
        self._add_knot_factors(graph, problem, list(range(n)), 0, tuple(b for b in x), with_pairs=True)
        for k in range(n):
            self._anchor[k] = tuple(b[k].copy() for b in x)
            values.insert(state(k), np.zeros(problem.nx))
            stamps[state(k)] = float(kt[k])
        for term in problem.terms:
            if term.touches == "theta":
                graph.add(term_factor(problem, term, [], [], tuple(b[:1] for b in x), sm.result_.theta,
                                      True, self._theta_key))
        values.insert(self._theta_key, np.asarray(sm.result_.theta, float).copy())
        stamps[self._theta_key] = float(kt[-1])
        self._n_knots = n
        self._sm = self._make_smoother()
        self._smoother_update(graph, values, stamps)
        self.ready_ = True
        self._read_estimate([n - 1])
        return self.window_states()

    def _make_smoother(self):
        # the lag counts from the newest timestamp; a knot exactly `lag` old stays (half a period slack)
        lag = self.lag + 0.5 / self.knot_rate
        if self.smoother == "batch":
            params = gtsam.LevenbergMarquardtParams()
            params.setMaxIterations(20)
            return gtsam.BatchFixedLagSmoother(lag, params)
        p = gtsam.ISAM2Params()
        if self.dogleg:
            p.setOptimizationParams(gtsam.ISAM2DoglegParams())
        else:
            p.setOptimizationParams(gtsam.ISAM2GaussNewtonParams(self.wildfire_threshold))
        thr = gtsam.ISAM2ThresholdMap()
        nv = self.robot.nv
        thr.insert(("x", np.minimum(np.repeat(self.relinearize_threshold, nv), 1e30)))
        thr.insert(("p", np.full(self.layout_.n, self.theta_relinearize_threshold)))
        p.setRelinearizeThreshold(thr)
        p.relinearizeSkip = self.relinearize_skip
        p.findUnusedFactorSlots = True  # reuse the slots of marginalized factors: memory flat
        return gtsam.IncrementalFixedLagSmoother(lag, p)

    def _tau_rows(self, tau_joint):
        """Efforts (n, nj) in the velocity layout (n, nv), NaN where not measured."""
        out = np.full((tau_joint.shape[0], self.robot.nv), np.nan)
        out[:, self._iv] = tau_joint
        return out

    def _chunk_problem(self, qm, vm, taum, h, with_prior: bool) -> Problem:
        """The batch smoother's term set (`JointSmoother._build_problem`, same noise levels and prior) over
        the knots of one chunk: a shallow copy of the warm-up smoother with the chunk's measurements."""
        c = copy.copy(self._warm)
        mask = ~np.isnan(taum)
        c._qm, c._vm, c._h = np.asarray(qm, float), vm, np.asarray(h, float)
        c._tau_mask, c._taum = mask, np.where(mask, taum, 0.0)
        c._energy_log, c.extra_terms = None, ()
        problem = c._build_problem(self.noise_)
        if not with_prior:
            problem.terms = [t for t in problem.terms if t.touches != "theta"]
        return problem

    def _add_knot_factors(self, graph, problem, local, g0, anchor, with_pairs, skip_first=False):
        """Factors of the chunk's knots ``local`` (global id g0 + local index): knot terms (not on the
        first knot when ``skip_first``: it is already in the window) and pair terms between consecutive
        knots; ``anchor`` holds the chunk knots' anchors (blocks (n, ·))."""
        for term in problem.terms:
            if term.touches == "knot":
                for i in local[1 if skip_first else 0:]:
                    graph.add(term_factor(problem, term, [i], [state(g0 + i)], tuple(b[[i]] for b in anchor),
                                          self._theta0, _has_theta(term), self._theta_key))
            elif term.touches == "pair" and with_pairs:
                for i in local[:-1]:
                    graph.add(term_factor(problem, term, [i, i + 1], [state(g0 + i), state(g0 + i + 1)],
                                          tuple(b[[i, i + 1]] for b in anchor), self._theta0,
                                          _has_theta(term), self._theta_key))

    @property
    def _theta0(self):
        return self._warm.result_.theta if self.theta_ is None else self.theta_

    # ------------------------------------------------------------------ streaming
    def _advance(self, new: list) -> dict:
        """Knots among the accepted samples ``new`` → factors, initial values, one smoother update."""
        period = 1.0 / self.knot_rate
        knots = []
        t_prev = self._t_newest
        for s in new:
            if s[0] - t_prev >= period * (1 - 1e-3):
                knots.append(s)
                t_prev = s[0]
        if not knots:
            return {}
        n = len(knots)
        tk = np.array([self._t_newest] + [s[0] for s in knots])
        h = np.diff(tk)
        qm = np.vstack([self._last_data[0]] + [s[1] for s in knots])
        vm = None if self._warm._vm is None else np.vstack([self._last_data[1]] + [s[2] for s in knots])
        taum = np.vstack([self._last_data[2], self._tau_rows(np.array([s[3] for s in knots]))])
        problem = self._chunk_problem(qm, vm, taum, h, False)
        g0 = self._n_knots - 1
        # anchors: the previous knot's anchor, then the prediction from its current estimate
        space = problem.space
        xq, xv, xa = self._last_x
        anchor = [tuple(b.copy() for b in self._anchor[g0])]
        for i in range(n):
            hi = h[i]
            xq = space.integrate(xq[None], (hi * xv + 0.5 * hi * hi * xa)[None])[0]
            xv = xv + hi * xa
            anchor.append((xq.copy(), xv.copy(), xa.copy()))
        anchor_blocks = tuple(np.array([a[j] for a in anchor]) for j in range(3))
        graph, values, stamps = gtsam.NonlinearFactorGraph(), gtsam.Values(), {}
        self._maybe_new_epoch(graph, values, float(tk[-1]))
        self._add_knot_factors(graph, problem, list(range(n + 1)), g0, anchor_blocks, True, skip_first=True)
        for i in range(1, n + 1):
            g = g0 + i
            self._anchor[g] = anchor[i]
            values.insert(state(g), np.zeros(problem.nx))
            stamps[state(g)] = float(tk[i])
        stamps[self._theta_key] = float(tk[-1])
        self._n_knots += n
        self._knot_t.update({g0 + i: float(tk[i]) for i in range(1, n + 1)})
        self._t_newest = float(tk[-1])
        self._last_data = (qm[-1], None if vm is None else vm[-1], taum[-1])
        self._smoother_update(graph, values, stamps)
        self._prune()
        ids = [g0 + i for i in range(1, n + 1)]
        dx = self._read_estimate(ids)
        return self._states_of(ids, dx.__getitem__)

    def _maybe_new_epoch(self, graph, values, t_new: float):
        """With forgetting: a new θ key every ``theta_epoch`` s, tied to the previous by the random walk's
        transition density θ_e − θ_{e−1} ~ N(0, σ²·Δt) (σ = ``forgetting`` per √s)."""
        if self.forgetting is None or t_new - self._epoch_start < self.theta_epoch:
            return None
        dt = t_new - self._epoch_start
        old = self._theta_key
        self._epoch += 1
        self._theta_key = P(self._epoch)
        sigma = np.broadcast_to(np.asarray(self.forgetting, float), (self.layout_.n,)) * np.sqrt(dt)
        noise = gtsam.noiseModel.Diagonal.Sigmas(np.maximum(sigma, 1e-12))
        graph.add(gtsam.BetweenFactorVector(old, self._theta_key, np.zeros(self.layout_.n), noise))
        values.insert(self._theta_key, self.theta_.copy())
        self._epoch_start = t_new
        return self._theta_key

    def _smoother_update(self, graph, values, stamps) -> None:
        self._sm.update(graph, values, stamps)
        if self.smoother == "incremental":
            self.stats_["relinearized"].append(int(self._sm.getISAM2Result().getVariablesRelinearized()))

    def _read_estimate(self, ids) -> dict:
        """θ, its marginal covariance and the δ of knots ``ids`` from the smoother; updates ``_last_x``."""
        if self.smoother == "incremental":
            isam = self._sm.getISAM2()
            get = isam.calculateEstimateVector
            self.theta_cov_ = np.asarray(self._sm.marginalCovariance(self._theta_key), float)
        else:
            est = self._sm.calculateEstimate()
            get = est.atVector
            graph = gtsam.NonlinearFactorGraph()
            factors = self._sm.getFactors()
            for i in range(factors.size()):
                f = factors.at(i)
                if f is not None:
                    graph.add(f)
            self.theta_cov_ = np.asarray(gtsam.Marginals(graph, est).marginalCovariance(self._theta_key))
        self.theta_ = np.asarray(get(self._theta_key), float).reshape(-1)
        dx = {g: np.asarray(get(state(g)), float).reshape(-1) for g in ids}
        g_last = ids[-1]
        self._last_x = self._x_of(g_last, dx[g_last])
        return dx

    def _x_of(self, g, dx):
        a = self._anchor[g]
        x = retract_states(self._warm._space, tuple(b[None] for b in a), dx[None])
        return tuple(b[0] for b in x)

    def _states_of(self, ids, dx_of) -> dict:
        xs = [self._x_of(g, dx_of(g)) for g in ids]
        t = np.array([self._knot_t[g] for g in ids])
        return {"t": t, "q": np.array([x[0] for x in xs]), "v": np.array([x[1] for x in xs]),
                "a": np.array([x[2] for x in xs])}

    def _prune(self) -> None:
        """Forget the anchors of knots GTSAM has marginalized (memory flat)."""
        t_min = self._t_newest - self.lag - 1.0 / self.knot_rate
        for g in [g for g in self._anchor if self._knot_t[g] < t_min and g < self._n_knots - 1]:
            del self._anchor[g], self._knot_t[g]

    def _n_window(self) -> int:
        t_min = self._t_newest - self.lag - 0.5 / self.knot_rate
        return sum(1 for t in self._knot_t.values() if t >= t_min)
