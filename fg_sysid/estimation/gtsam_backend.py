"""GTSAM for every term: any `problem.Problem` as a `gtsam.NonlinearFactorGraph` (issue 10 item 3).

One `gtsam.CustomFactor` per (knot term, knot), per (pair term, interval) and per θ term, each calling
the term's own residual and analytic Jacobians on that knot or pair (`Evaluation` with ``idx``) and the
role's whitening (`Problem.whitened`); the noise model is unit (the term whitens itself), so GTSAM's
error equals the native cost ½ Σ‖r‖² term for term.

Knot states live in GTSAM as vectors of local coordinates around an anchor trajectory x̄ (a chart,
GTSAM's "custom retraction" route): x_k = x̄_k ⊕ δ_k with q_k = pin.integrate(q̄_k, δq_k) on the
configuration manifold — a free-flyer base included — and v, a, λ by addition. A factor's Jacobian
w.r.t. δ_k is the term's tangent Jacobian at x_k times ∂ integrate/∂δq (`pin.dIntegrate`), so GTSAM's
vector retraction is exact. θ is a vector under ``THETA``. Re-anchor (`GtsamProblem(problem, x, θ)`
again) after large steps to keep δ small.

Keys: ``state(k)`` and ``THETA`` from `fg_sysid.factors.keys`. GTSAM's own optimizers calling Python
factors cost O(N²) per iteration (../shared/notes/gtsam-python-performance.md): this back end is for
small problems, cross-checks, a user's own terms, `gtsam.Marginals` and fixed-lag windows; the native
O(N) solver (`solver.LevenbergMarquardt`) runs the long logs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import gtsam
import numpy as np
import pinocchio as pin

from ..factors.gtsam_factors import (
    _check_space,
    encoder_factor,
    integration_factor,
    inverse_dynamics_factor,
    parameter_prior_factor,
    velocity_factor,
)
from ..factors.inverse_dynamics import InverseDynamicsResidual
from ..factors.keys import THETA, state
from ..factors.manifold import ConfigurationSpace
from ..layout import ParameterLayout
from .problem import Evaluation, Problem, Term, _has_theta, retract_states

__all__ = ["GtsamProblem", "build_graph", "term_factor"]


class GtsamProblem:
    """``problem`` at the anchor (x̄, θ̄) as GTSAM ``graph`` and initial ``values`` (δ = 0, θ = θ̄).

    Args:
        freeze_theta: θ held at θ̄ (no ``THETA`` variable; θ terms left out), as the native solver's
            ``freeze_theta``.
    """

    def __init__(self, problem: Problem, x_anchor: tuple, theta_anchor: np.ndarray,
                 freeze_theta: bool = False):
        if any(t.touches == "pair_theta" for t in problem.terms):
            raise NotImplementedError("GtsamProblem: pair_theta terms (impact maps) are not wrapped")
        self.problem = problem
        self.anchor = tuple(np.asarray(b, float) for b in x_anchor)
        self.theta_anchor = np.asarray(theta_anchor, float).copy()
        self.freeze_theta = freeze_theta
        self.n_knots = self.anchor[1].shape[0]
        space = problem.space
        self._nv = space.model.nv
        self._vector_q = space.is_vector_space
        self.graph = gtsam.NonlinearFactorGraph()
        for term in problem.terms:
            if term.touches == "theta":
                if not freeze_theta:
                    self.graph.add(self._factor(term, [], with_theta=True))
            elif term.touches == "pair":
                for k in range(self.n_knots - 1):
                    self.graph.add(self._factor(term, [k, k + 1], _has_theta(term) and not freeze_theta))
            else:
                for k in range(self.n_knots):
                    self.graph.add(self._factor(term, [k], _has_theta(term) and not freeze_theta))
        self.values = gtsam.Values()
        for k in range(self.n_knots):
            self.values.insert(state(k), np.zeros(problem.nx))
        if not freeze_theta:
            self.values.insert(THETA, self.theta_anchor.copy())

    # ------------------------------------------------------------------ charts
    def states(self, values: gtsam.Values, knots) -> tuple[tuple, list]:
        """Knot states x̄ ⊕ δ at ``knots`` (blocks (len, ·)) and the chart Jacobians ∂x/∂δ per knot."""
        knots = list(knots)
        dx = np.array([values.atVector(state(k)) for k in knots])
        anchor = tuple(b[knots] for b in self.anchor)
        x = retract_states(self.problem.space, anchor, dx)
        charts = []
        nv, nx = self._nv, self.problem.nx
        for i in range(len(knots)):
            C = np.eye(nx)
            if not self._vector_q:
                C[:nv, :nv] = pin.dIntegrate(self.problem.space.model, anchor[0][i], dx[i, :nv], pin.ARG1)
            charts.append(C)
        return x, charts

    def solution(self, values: gtsam.Values) -> tuple[tuple, np.ndarray]:
        """(x, θ) of GTSAM values (e.g. an optimizer's result)."""
        x, _ = self.states(values, range(self.n_knots))
        theta = self.theta_anchor if self.freeze_theta else np.asarray(values.atVector(THETA), float)
        return x, theta

    # ------------------------------------------------------------------ factors
    def _factor(self, term: Term, knots: list, with_theta: bool):
        anchor = tuple(b[knots] if knots else b[:1] for b in self.anchor)
        return term_factor(self.problem, term, knots, [state(k) for k in knots], anchor,
                           self.theta_anchor, with_theta)

    def cost(self, values: gtsam.Values | None = None) -> float:
        """½ Σ‖r‖² (GTSAM's graph error) at ``values`` (default the anchor)."""
        return float(self.graph.error(self.values if values is None else values))

    def optimize(self, max_iterations: int = 50, relative_tol: float = 1e-12, verbose: bool = False):
        """GTSAM's Levenberg–Marquardt from the anchor; returns (x, θ) (see `solution`)."""
        params = gtsam.LevenbergMarquardtParams()
        params.setMaxIterations(int(max_iterations))
        params.setRelativeErrorTol(relative_tol)
        params.setAbsoluteErrorTol(0.0)
        if verbose:
            params.setVerbosityLM("SUMMARY")
        result = gtsam.LevenbergMarquardtOptimizer(self.graph, self.values, params).optimize()
        return self.solution(result)


# ------------------------------------------------------------------------------------------- per-knot factors
def term_factor(problem: Problem, term: Term, knots: list, keys: list, anchor: tuple,
                theta_anchor: np.ndarray, with_theta: bool, theta_key: int = THETA):
    """One `gtsam.CustomFactor` for ``term`` on the problem's knots ``knots`` (one knot, a consecutive
    pair, or ``[]`` for a θ term) — the factor `GtsamProblem` builds, with explicit GTSAM ``keys`` (one per
    knot) and the knots' own chart ``anchor`` (blocks (len(knots), ·); for a θ term any one knot, which it
    does not read). A streaming window (`gtsam_online`) builds factors of new knots this way.

    The variables are the local coordinates δ_k around the anchor (x_k = x̄_k ⊕ δ_k, see the module
    docstring) and θ under ``theta_key`` when ``with_theta`` (else θ is held at ``theta_anchor``); the
    noise model is unit (the term whitens itself), so the factor's error is the term's ½‖r‖² there.
    """
    space = problem.space
    nv, nx = space.model.nv, problem.nx
    vector_q = space.is_vector_space
    anchor = tuple(np.asarray(b, float) for b in anchor)
    theta_anchor = np.asarray(theta_anchor, float)
    idx = [0] if term.touches == "theta" else list(knots)

    def states(values):
        dx = np.array([values.atVector(k) for k in keys])
        x = retract_states(space, anchor, dx)
        charts = []
        for i in range(len(keys)):
            C = np.eye(nx)
            if not vector_q:
                C[:nv, :nv] = pin.dIntegrate(space.model, anchor[0][i], dx[i, :nv], pin.ARG1)
            charts.append(C)
        return x, charts

    ev0 = Evaluation(problem, anchor, theta_anchor, False, idx=idx)
    m = int(np.size(problem.whitened(term, term.evaluate(ev0, False), ev0).r))
    noise = gtsam.noiseModel.Unit.Create(m)

    def error(this, values, jacobians):
        jac = jacobians is not None
        theta = np.asarray(values.atVector(theta_key), float) if with_theta else theta_anchor
        if term.touches == "theta":
            x, charts = anchor, []
        else:
            x, charts = states(values)
        ev = Evaluation(problem, x, theta, jac, idx=idx)
        res = problem.whitened(term, term.evaluate(ev, jac), ev)
        r = np.asarray(res.r, float).reshape(-1)
        if jac:
            if term.touches in ("knot", "pair"):
                jacobians[0] = np.asarray(res.J[0]) @ charts[0]
            if term.touches == "pair":
                jacobians[1] = np.asarray(res.J1[0]) @ charts[1]
            if with_theta:
                jacobians[len(keys)] = np.asarray(res.Jt).reshape(m, -1)
        return r

    return gtsam.CustomFactor(noise, gtsam.KeyVector(list(keys) + ([theta_key] if with_theta else [])), error)


# ---------------------------------------------------------------------------------------------- hand-built
def _log_arrays(log_or_arrays):
    """(t, q, v or None, tau) from a `Log`, a mapping with keys t, q, v, tau, or a tuple (t, q, v, tau)."""
    if isinstance(log_or_arrays, Mapping):
        d = log_or_arrays
        t, q, v, tau = d["t"], d["q"], d.get("v"), d.get("tau")
    elif isinstance(log_or_arrays, Sequence) and not isinstance(log_or_arrays, str):
        t, q, v, tau = (list(log_or_arrays) + [None, None])[:4]
    else:
        t, q, v, tau = log_or_arrays.t, log_or_arrays.q, log_or_arrays.v, log_or_arrays.tau
    t = np.asarray(t, dtype=float)
    q = np.atleast_2d(np.asarray(q, dtype=float))
    v = None if v is None else np.atleast_2d(np.asarray(v, dtype=float))
    tau = np.full_like(q, np.nan) if tau is None else np.atleast_2d(np.asarray(tau, dtype=float))
    return t, q, v, tau


def _knot_indices(knots, n: int) -> np.ndarray:
    if knots is None:
        return np.arange(n)
    if isinstance(knots, slice):
        return np.arange(n)[knots]
    if np.isscalar(knots):
        return np.arange(min(int(knots), n))
    idx = np.asarray(knots, dtype=int)
    if idx.ndim != 1 or np.any(np.diff(idx) <= 0) or idx.min() < 0 or idx.max() >= n:
        raise ValueError("knots must be increasing sample indices inside the log")
    return idx


def build_graph(robot_or_layout, log_or_arrays, *, sigma_q, sigma_tau, sigma_v=None,
                sigma_process=None, sigma_process_q=None, sigma_process_v=None, knots=None,
                prior: tuple | None = None, prior_relative: float = 0.7, initial=None,
                inertia: str = "log-cholesky", friction: str = "coulomb-viscous",
                friction_velocity_scale: float = 0.05) -> tuple[gtsam.NonlinearFactorGraph, gtsam.Values]:
    """The full factor graph of the batch problem of `JointSmoother` on a SMALL window, and initial values.

    Args:
        robot_or_layout: a `RobotModel` (a `ParameterLayout` is created with ``inertia``, ``friction``,
            ``friction_velocity_scale``, like the smoother's defaults) or a ready `ParameterLayout`.
        log_or_arrays: a `fg_sysid.datasets.log.Log`, or arrays ``(t, q, v, tau)`` / a mapping with
            those keys (joint columns in the robot's joint order; ``v`` may be None; NaN effort = unmeasured).
        sigma_q, sigma_v, sigma_tau: measurement noise std (scalar or per joint); velocity factors are
            added only when the log has velocities and ``sigma_v`` is given.
        sigma_process: std of the velocity-integration residual per unit step [rad/s per s], converted
            exactly as the smoother does with the median step h̄: σ_v = sigma_process·h̄, σ_q = σ_v·h̄.
            Alternatively give ``sigma_process_q`` [rad] and ``sigma_process_v`` [rad/s] directly
            (e.g. ``JointSmoother.noise_.process_q/.process_v``).
        knots: sample indices used as knots: None (all), an int n (the first n samples), a slice
            (``slice(0, None, stride)`` is the smoother's ``knot_stride``) or an index array.
        prior: (θ̄, std); default ``layout.prior(prior_relative)``.
        initial: optional (q, v, a, θ) initial values for the knots (arrays (n_knots, nv)) and θ; by
            default a Savitzky–Golay (50 ms, order 3) fit of the log's positions and θ̄.

    Returns:
        (graph, values): encoder, velocity, inverse-dynamics (unmeasured rows dropped), integration and
        parameter-prior factors on ``state(i)`` for knot i = 0…n_knots−1 and ``THETA``.
    """
    from .noise import savgol_derivatives

    layout = robot_or_layout if isinstance(robot_or_layout, ParameterLayout) else ParameterLayout.create(
        robot_or_layout, inertia, friction, friction_velocity_scale)
    robot = layout.robot
    if robot.floating_base:
        raise ValueError("build_graph supports fixed-base robots only")
    space = ConfigurationSpace(robot.model)
    _check_space(space)
    nv, nj = robot.nv, robot.n_joints
    iv = robot.joint_index_v()
    t, q_log, v_log, tau_log = _log_arrays(log_or_arrays)
    if q_log.shape[1] != nj:
        raise ValueError(f"log has {q_log.shape[1]} joint columns, robot {robot.name!r} has {nj} joints")
    idx = _knot_indices(knots, t.size)
    if idx.size < 2:
        raise ValueError("need at least 2 knots")
    tk = t[idx]
    h = np.diff(tk)

    def per_joint_v(val):  # per-joint value → velocity layout (nv,)
        out = np.ones(nv)
        out[iv] = np.broadcast_to(np.asarray(val, float), (nj,))
        return out

    def to_v(cols):  # (n, nj) joint columns → (n, nv)
        out = np.zeros((cols.shape[0], nv))
        out[:, iv] = cols
        return out

    sq = per_joint_v(sigma_q)
    st = per_joint_v(sigma_tau)
    if sigma_process_q is not None and sigma_process_v is not None:
        spq, spv = per_joint_v(sigma_process_q), per_joint_v(sigma_process_v)
    elif sigma_process is not None:
        hbar = float(np.median(h))
        spv = per_joint_v(np.asarray(sigma_process, float) * hbar)
        spq = spv * hbar
    else:
        raise ValueError("give sigma_process or both sigma_process_q and sigma_process_v")
    qm = to_v(q_log[idx])
    taum = np.full((idx.size, nv), np.nan)
    taum[:, iv] = tau_log[idx]
    use_v = v_log is not None and sigma_v is not None
    vm = to_v(v_log[idx]) if use_v else None
    sv = per_joint_v(sigma_v) if use_v else None

    theta_bar, theta_std = layout.prior(prior_relative) if prior is None else prior
    res = InverseDynamicsResidual(layout)
    graph = gtsam.NonlinearFactorGraph()
    for i in range(idx.size):
        graph.add(encoder_factor(space, i, qm[i], sq))
        if use_v:
            graph.add(velocity_factor(i, vm[i], sv))
        if np.any(np.isfinite(taum[i])):
            graph.add(inverse_dynamics_factor(res, i, taum[i], st))
        if i + 1 < idx.size:
            graph.add(integration_factor(space, i, h[i], spq, spv))
    graph.add(parameter_prior_factor(theta_bar, theta_std))

    if initial is None:
        qs, vs, as_ = savgol_derivatives(t, q_log, 0.05, 3)
        q0, v0, a0 = to_v(qs[idx]), to_v(vs[idx]), to_v(as_[idx])
        theta0 = np.asarray(theta_bar, float)
    else:
        q0, v0, a0, theta0 = (np.asarray(z, float) for z in initial)
    values = gtsam.Values()
    for i in range(idx.size):
        values.insert(state(i), np.concatenate([q0[i], v0[i], a0[i]]))
    values.insert(THETA, np.array(theta0, dtype=float))
    return graph, values


# ---------------------------------------------------------------------------------------------- checking
