"""One estimation problem: knot variables + θ + a list of factor terms (issue 10).

A **term** is a plain residual of the knot states and θ with analytic Jacobians (the functions in
`fg_sysid.factors` stay the single source) plus a **role**:

* ``"measurement"`` / ``"prior"``: the term whitens itself (row weights 1/σ, or per-row 0 where a row
  does not apply; a full whitening matrix per row block is allowed too);
* ``"constraint"``: the term returns the raw constraint value c [SI units] and a 0/1 mask of where it
  applies; the linearizer whitens it as (c + s)/(σ_c · scale) with the augmented-Lagrangian shift s and
  scale held by `ConstraintState` (the solver updates both, `solver.augmented_lagrangian`).

A term **touches** one of:

* ``"knot"`` — one knot's state x_k (and θ when it returns ``Jt``): rows (N, m);
* ``"pair"`` — two consecutive knots (x_k, x_{k+1}): rows (N−1, m);
* ``"pair_theta"`` — sparse (x_k, x_{k+1}, θ) rows at chosen intervals (impact maps);
* ``"theta"`` — θ alone (prior, total mass, symmetry): rows (m,).

`linearize` stacks any list of terms into the O(N) `LinearizedGraph` that `linear_solver` eliminates
(knots in time order, θ last). Work shared by several terms at one linearization point (one Pinocchio
kinematics pass per knot, the inverse-dynamics evaluation used by the joint rows and the base-wrench
rows) goes through `Evaluation.cached`, computed once.

The knot state is x_k = (q_k, v_k, a_k[, extra blocks such as contact forces λ_k]): q on the
configuration manifold (tangent dimension nv, retraction `ConfigurationSpace.integrate`), the other
blocks vector-valued; a state step is the concatenation of their tangent steps.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..factors.manifold import ConfigurationSpace
from .linear_solver import LinearizedGraph

ROLES = ("measurement", "prior", "constraint")
TOUCHES = ("knot", "pair", "pair_theta", "theta")


@dataclass
class Residual:
    """What a term returns at one linearization point.

    Attributes:
        r: residual — (N, m) knot, (N−1, m) pair, (m,) θ; for ``pair_theta`` a list of (m,) per interval.
        J: Jacobian w.r.t. the knot state (N, m, nx) [knot]; w.r.t. x_k (N−1, m, nx) [pair];
            None without Jacobians or for θ terms.
        J1: Jacobian w.r.t. x_{k+1} (pair terms).
        Jt: Jacobian w.r.t. θ: (N, m, nθ) for knot terms that depend on θ, (m, nθ) for θ terms.
        w: row weights broadcastable to r (measurement / prior: 1/σ and zeros where a row does not
            apply; constraint: the 0/1 mask of where it applies), or None (= 1).
        W: full whitening matrices (N−1, m, m) (pair terms only; e.g. the projected process noise);
            applied after ``w``.
        k: interval indices of ``pair_theta`` rows.
        owned: the term made r and the Jacobians for this call alone (nobody else holds them): whitening
            may scale them in place instead of allocating copies (hundreds of MB per linearization of a
            20 000-knot log).
    """

    r: np.ndarray
    J: np.ndarray | None = None
    J1: np.ndarray | None = None
    Jt: np.ndarray | None = None
    w: np.ndarray | float | None = None
    W: np.ndarray | None = None
    k: list | None = None
    owned: bool = False


@dataclass(frozen=True)
class Term:
    """A named factor term: ``evaluate(ev, jacobians) -> Residual`` with a role and what it touches.

    ``sigma``: for constraint terms, σ_c [SI units of the constraint] at scale 1 (scalar or per row).
    ``constant``: its whitened Jacobian does not depend on the linearization point (encoders and
    integration on vector-space configurations): the linearizer may reuse their Gram blocks.
    """

    name: str
    touches: str
    role: str
    evaluate: Callable[[Evaluation, bool], Residual]
    sigma: float | np.ndarray | None = None
    constant: bool = False

    def __post_init__(self):
        if self.role not in ROLES:
            raise ValueError(f"term {self.name!r}: role must be one of {ROLES}, not {self.role!r}")
        if self.touches not in TOUCHES:
            raise ValueError(f"term {self.name!r}: touches must be one of {TOUCHES}, not {self.touches!r}")
        if self.role == "constraint" and self.sigma is None:
            raise ValueError(f"constraint term {self.name!r} needs sigma")


@dataclass
class ConstraintState:
    """Augmented-Lagrangian state of the constraint terms: shift s per term name (same shape as its
    residual) and one common scale of σ_c (shrinks when rounds stall)."""

    shift: dict = field(default_factory=dict)
    scale: float = 1.0


class Evaluation:
    """One linearization point (x, θ) with a cache for work shared between terms.

    ``idx``: the knot indices whose states ``x`` holds (None: all knots, in order). Terms read their
    per-knot data through `rows` (per-knot arrays, (N, ...)) and `intervals` (per-interval arrays,
    (N−1, ...)), so any term can be evaluated on one knot or one consecutive pair — what a per-knot
    GTSAM factor needs (`gtsam_backend`).
    """

    def __init__(self, problem: Problem, x: tuple, theta: np.ndarray, jacobians: bool, idx=None):
        self.problem = problem
        self.x = x
        self.theta = theta
        self.jacobians = jacobians
        self.idx = None if idx is None else np.asarray(idx, int)
        self._cache: dict = {}

    def rows(self, arr):
        """Per-knot data (N, ...) at this evaluation's knots; scalars and per-column arrays pass."""
        if self.idx is None or arr is None or np.ndim(arr) < 2:
            return arr
        return arr[self.idx]

    def intervals(self, arr):
        """Per-interval data (N−1, ...) for the intervals between this evaluation's consecutive knots."""
        if self.idx is None or arr is None or np.ndim(arr) < 1:
            return arr
        return arr[self.idx[:-1]]

    @property
    def q(self):
        return self.x[0]

    @property
    def v(self):
        return self.x[1]

    @property
    def a(self):
        return self.x[2]

    def cached(self, key, fn: Callable):
        """``fn()`` computed once per evaluation (keyed by ``key``)."""
        if key not in self._cache:
            self._cache[key] = fn()
        return self._cache[key]


class Problem:
    """Knot variables + θ + terms.

    Args:
        space: the configuration manifold of q (tangent dimension nv).
        blocks: names and tangent sizes of the knot-state blocks, e.g. (("q", nv), ("v", nv), ("a", nv),
            ("lam", 3·n_feet)).
        ntheta: size of θ.
        terms: the factor terms (see `Term`).
    """

    def __init__(self, space: ConfigurationSpace, blocks, ntheta: int, terms=()):
        self.space = space
        self.blocks = tuple((str(n), int(s)) for n, s in blocks)
        self.ntheta = int(ntheta)
        self.terms: list[Term] = list(terms)
        self.nx = sum(s for _, s in self.blocks)
        offs = np.cumsum([0] + [s for _, s in self.blocks])
        self.slices = {n: slice(int(offs[i]), int(offs[i + 1])) for i, (n, _) in enumerate(self.blocks)}
        self.constraints = ConstraintState()
        self._gram_cache: dict = {}
        #: θ ⊕ δθ (``fn(θ, δθ) -> θ'``) of the solver's steps; None = θ + δθ. Estimators over a
        #: `ParameterLayout` set its `retract` (steps through the physical parameters, issue 9 session 12).
        self.theta_retraction = None

    def add(self, term: Term) -> Problem:
        self.terms.append(term)
        self._gram_cache = {}
        return self

    def term(self, name: str) -> Term:
        for t in self.terms:
            if t.name == name:
                return t
        raise KeyError(name)

    # ------------------------------------------------------------------ state
    def retract(self, x: tuple, dx: np.ndarray) -> tuple:
        """x ⊕ dx: q by the manifold retraction, the other blocks by addition."""
        return retract_states(self.space, x, dx)

    def retract_theta(self, theta: np.ndarray, dtheta: np.ndarray) -> np.ndarray:
        """θ ⊕ δθ: ``theta_retraction`` when set, else θ + δθ."""
        if self.theta_retraction is None:
            return theta + dtheta
        return self.theta_retraction(theta, dtheta)

    def state_jacobian(self, n_rows: int, m: int, parts: dict) -> np.ndarray:
        """Assemble (n_rows, m, nx) from per-block Jacobians ``{block name: (n_rows, m, size)}``."""
        J = np.zeros((n_rows, m, self.nx))
        for name, Jb in parts.items():
            if Jb is not None:
                J[:, :, self.slices[name]] = Jb
        return J

    # ------------------------------------------------------------------ linearization
    def whitened(self, term: Term, res: Residual, ev: Evaluation) -> Residual:
        """The term's residual and Jacobians whitened by its role (see the module docstring): row weights
        ``w`` (and matrices ``W``) applied; constraints shifted and divided by σ_c · scale."""
        cs = self.constraints
        w = 1.0 if res.w is None else res.w
        r = res.r
        if term.role == "constraint":
            if term.name in cs.shift:
                shift = cs.shift[term.name]
                r = r + (ev.intervals(shift) if term.touches == "pair" else
                         ev.rows(shift) if term.touches == "knot" else shift)
            w = w / (np.asarray(term.sigma, float) * cs.scale)
        if term.touches == "pair_theta":
            out = Residual([], [] if res.J is not None else None, [] if res.J1 is not None else None,
                           [] if res.Jt is not None else None, k=list(res.k))
            for i in range(len(res.k)):
                wi = np.reshape(w[i] if np.ndim(w) else w, (-1, 1))
                out.r.append(res.r[i] * wi[:, 0])
                for name in ("J", "J1", "Jt"):
                    blocks = getattr(res, name)
                    if blocks is not None:
                        getattr(out, name).append(None if blocks[i] is None else blocks[i] * wi)
            return out
        if term.touches == "theta":
            w = np.broadcast_to(np.asarray(w, float), np.shape(r))
            return Residual(r * w, Jt=None if res.Jt is None else res.Jt * w[:, None])
        w = np.asarray(w, float)
        wr = w[None, :] if (w.ndim == 1 and np.ndim(r) == 2) else w
        wj = wr[..., None] if np.ndim(wr) else wr
        rw = r * wr
        if res.owned and res.W is None and r is res.r:  # scaled in place (see `Residual.owned`)
            J, J1, Jt = (None if A is None else np.multiply(A, wj, out=A) for A in (res.J, res.J1, res.Jt))
            return Residual(rw, J, J1, Jt)
        J = None if res.J is None else res.J * wj
        J1 = None if res.J1 is None else res.J1 * wj
        Jt = None if res.Jt is None else res.Jt * wj
        if res.W is not None:
            rw = np.einsum("nij,nj->ni", res.W, rw)
            J = None if J is None else res.W @ J
            J1 = None if J1 is None else res.W @ J1
            Jt = None if Jt is None else res.W @ Jt
        return Residual(rw, J, J1, Jt)

    def linearize(self, x: tuple, theta: np.ndarray, jacobians: bool = True,
                  freeze_theta: bool = False) -> LinearizedGraph:
        """Whitened blocks of every term at (x, θ) (`LinearizedGraph`; cost ½ Σ‖r‖²).

        ``freeze_theta``: θ held — no θ columns, and the θ terms are replaced by δθ = 0 rows.
        """
        N = x[1].shape[0]
        ev = Evaluation(self, x, theta, jacobians)
        graph = LinearizedGraph(N, self.nx, self.ntheta)
        if all(t.constant for t in self.terms if t.touches in ("knot", "pair") and not _has_theta(t)) and \
                not any(t.touches == "pair" and _has_theta(t) for t in self.terms):
            graph.gram_cache = self._gram_cache
        theta_J, theta_r = [], []
        for term in self.terms:
            if term.touches == "theta" and freeze_theta:
                continue
            wb = self.whitened(term, term.evaluate(ev, jacobians), ev)
            if term.touches == "theta":
                theta_r.append(wb.r)
                theta_J.append(wb.Jt)
            elif term.touches == "pair_theta":
                for i, k in enumerate(wb.k):
                    Jt = None if wb.Jt is None else (np.zeros_like(wb.Jt[i]) if freeze_theta else wb.Jt[i])
                    graph.pair_theta.append((k, None if wb.J is None else wb.J[i],
                                             None if wb.J1 is None else wb.J1[i], Jt, wb.r[i]))
            elif term.touches == "pair" and (wb.Jt is not None or (not jacobians and _has_theta(term))):
                # a pair term on (x_k, x_{k+1}, θ): sparse pair-θ rows of the O(N) elimination
                for k in range(wb.r.shape[0]):
                    Jt = None if wb.Jt is None else (np.zeros_like(wb.Jt[k]) if freeze_theta else wb.Jt[k])
                    graph.pair_theta.append((k, None if wb.J is None else wb.J[k],
                                             None if wb.J1 is None else wb.J1[k], Jt, wb.r[k]))
            elif term.touches == "pair":
                graph.pair.append((wb.J, wb.J1, wb.r))
            elif wb.Jt is not None or (not jacobians and _has_theta(term)):
                Jt = None if wb.Jt is None else (np.zeros_like(wb.Jt) if freeze_theta else wb.Jt)
                graph.knot_theta.append((wb.J, Jt, wb.r))
            else:
                graph.knot.append((wb.J, wb.r))
        if freeze_theta or not theta_r:
            graph.prior_w = np.ones(self.ntheta)
            graph.prior_r = np.zeros(self.ntheta)
        elif len(theta_r) == 1 and theta_J[0] is not None and _is_diag(theta_J[0]):
            graph.prior_w, graph.prior_r = np.diag(theta_J[0]).copy(), theta_r[0]
        else:  # without Jacobians only the residual counts (the cost)
            graph.prior_r = np.concatenate(theta_r)
            graph.prior_w = np.vstack(theta_J) if jacobians else np.ones(self.ntheta)
        return graph

    def cost(self, x, theta, freeze_theta: bool = False) -> float:
        return self.linearize(x, theta, jacobians=False, freeze_theta=freeze_theta).cost()

    def violations(self, x: tuple, theta: np.ndarray, names=None) -> dict:
        """Raw values of the constraint terms (masked to where they apply), by term name, SI units."""
        ev = Evaluation(self, x, theta, False)
        out = {}
        for term in self.terms:
            if term.role != "constraint" or (names is not None and term.name not in names):
                continue
            res = term.evaluate(ev, False)
            w = 1.0 if res.w is None else res.w
            out[term.name] = np.asarray(res.r * w, float)
        return out


def retract_states(space: ConfigurationSpace, x: tuple, dx: np.ndarray) -> tuple:
    """Knot states (q, v, a, ...) ⊕ dx (N, nx): q by ``space.integrate`` (tangent width nv), every
    other block by addition (widths from the blocks' shapes)."""
    out, c = [], 0
    for i, xi in enumerate(x):
        w = space.model.nv if i == 0 else xi.shape[1]
        d = dx[:, c:c + w]
        out.append(space.integrate(xi, d) if i == 0 else xi + d)
        c += w
    return tuple(out)


def _has_theta(term: Term) -> bool:
    return getattr(term.evaluate, "depends_on_theta", False)


def _is_diag(J: np.ndarray) -> bool:
    return J.ndim == 2 and J.shape[0] == J.shape[1] and np.count_nonzero(J - np.diag(np.diag(J))) == 0


def theta_dependent(fn: Callable) -> Callable:
    """Mark a knot term's evaluate function as depending on θ (its rows go to the (x_k, θ) blocks)."""
    fn.depends_on_theta = True
    return fn


def worst_violation(viol: dict) -> float:
    return max((float(np.abs(v).max()) for v in viol.values() if np.size(v)), default=0.0)
