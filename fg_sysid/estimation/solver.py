"""The one nonlinear solver of the estimation core: Levenberg–Marquardt over a `Problem`, with the
augmented Lagrangian for its constraint terms (issue 10).

Iterations are driven from Python (GTSAM's own optimizers calling Python factors are O(N²) per
iteration, ../shared/notes/gtsam-python-performance.md); each one linearizes every term in batch
(`Problem.linearize`) and solves the arrow-structured normal equations in O(N) (`linear_solver`).

Three damping strategies, chosen per problem:

* ``"line-search"`` — λ starts tiny (a Gauss–Newton step); a step that does not lower the cost is first
  shortened (α = 1/2 … 1/64, no new solve), λ grows tenfold only when that fails too and shrinks
  tenfold after an accepted full step. Suited to well-conditioned smooth problems (fixed base).
* ``"trust-region"`` — Nielsen's gain-ratio update: ρ = actual/predicted decrease; accepted steps
  (ρ > 0) shrink λ by max(1/3, 1 − (2ρ − 1)³), rejected ones grow it by ν = 2, 4, 8, … Suited to
  bilinear, weakly determined problems (contact forces × kinematics, floating base).
* ``"hybrid"`` (issue 9, session 8; `_hybrid`) — gain-ratio λ carried from one ``run`` to the next (IRLS
  rounds), the line search's halving for a full step that fails, λ raised only when the cost accepts less
  than a quarter of the step, only accepted steps counted, convergence checked on the undamped model.
  Fixes the line search's crawl on TIAGo and the trust region's stall on a sharp-friction Z1 log; not a
  default (docs/damping.md: the minimum it approaches sooner predicts worse on those logs).

``LevenbergMarquardt.trials``: set it to a list to collect every trial step (diagnostics,
benchmarks/trace_damping.py).

The first two stop when the linear model predicts a relative decrease below ``tol`` (converged), when
consecutive accepted steps gain less than ``tol``, when θ stops moving (max |δθ| below ``theta_tol``
on two consecutive steps, where given), or after ``max_iterations``.
"""

from __future__ import annotations

import sys
import time
import warnings
from dataclasses import dataclass

import numpy as np

from .linear_solver import SingularSystemError, StructuredSolver, solve_gtsam
from .problem import Problem, worst_violation

#: damping strategies of `LevenbergMarquardt` (module docstring)
STRATEGIES = ("line-search", "trust-region", "hybrid")


class EstimationError(RuntimeError):
    """The estimation could not run or diverged (message says why)."""


@dataclass
class SolverOptions:
    """Options of `LevenbergMarquardt` (see the module docstring)."""

    strategy: str = "line-search"
    tol: float = 1e-3
    max_iterations: int = 30
    theta_tol: float | None = None  # relative to LevenbergMarquardt.theta_scale (e.g. the prior std)
    backend: str = "structured"  # or "gtsam" (GTSAM multifrontal elimination of the same blocks)
    verbose: bool = False
    threads: int = 1  # of the structured linear solves (1 or 2; `linear_solver.StructuredSolver`)


class LevenbergMarquardt:
    """Levenberg–Marquardt on any `Problem` (``run``), plus the augmented-Lagrangian rounds
    (``augmented_lagrangian``) and θ's marginal covariance (``covariance``)."""

    def __init__(self, options: SolverOptions | None = None):
        self.options = options or SolverOptions()
        if self.options.strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {', '.join(map(repr, STRATEGIES))}, "
                             f"not {self.options.strategy!r}")
        if self.options.backend not in ("structured", "gtsam"):
            raise ValueError(f"backend must be 'structured' or 'gtsam', not {self.options.backend!r}")
        self._linear = StructuredSolver(threads=self.options.threads)
        #: per-coordinate scale of θ for ``theta_tol`` (None: 1); estimators set their prior std
        self.theta_scale = None
        #: every trial step (accepted or not) when not None: a list the caller sets to collect them
        #: (round, iteration, λ, α, predicted and actual decrease, ρ, step norms, θ coordinate moved most)
        self.trials = None
        #: λ at the end of the last ``run`` ("hybrid": the next run starts from it, e.g. the next IRLS round)
        self.lam = None
        #: optional ``fn(x, θ) -> bool`` called after every accepted step; True ends the run there (not
        #: converged): a caller's rule that already knows the answer (`jerk_auto`)
        self.stop_rule = None
        self.stopped = False

    def _stopped(self, x, theta, rnd, it) -> bool:
        if self.stop_rule is not None and self.stop_rule(x, theta):
            self.log(f"round {rnd} iter {it:3d}: stopped by the caller's rule")
            self.stopped = True
            return True
        return False

    def _solve(self, graph, lam):
        if self.options.backend == "gtsam":
            return solve_gtsam(graph, lam)
        return self._linear.solve(graph, lam)

    @property
    def linear_solver(self) -> StructuredSolver:
        """The `StructuredSolver` of this optimizer (keeps its work arrays across solves: reuse it for
        further solves of the same problem, e.g. `noise_balance.term_balance`)."""
        return self._linear

    def linear_solve(self, graph, lam: float = 0.0):
        """One O(N) solve of a linearized problem (`linear_solver.StructuredSolver`; reuses its workspace)."""
        return self._linear.solve(graph, lam)

    def log(self, msg: str) -> None:
        if self.options.verbose:
            print(msg, file=sys.stderr, flush=True)

    # ------------------------------------------------------------------ LM
    def run(self, problem: Problem, x, theta, rnd: int = 0, freeze_theta: bool = False,
            tol: float | None = None, max_iterations: int | None = None):
        """Minimize the problem's cost from (x, θ). Returns (x, θ, converged, history)."""
        o = self.options
        self.stopped = False  # set when ``stop_rule`` ended the run
        tol = o.tol if tol is None else tol
        max_iterations = o.max_iterations if max_iterations is None else max_iterations
        graph = problem.linearize(x, theta, freeze_theta=freeze_theta)
        cost = graph.cost()
        if not np.isfinite(cost):
            raise EstimationError("initial cost is not finite (check the log for extreme values)")
        step_fn = {"line-search": self._line_search, "trust-region": self._trust_region,
                   "hybrid": self._hybrid}[o.strategy]
        return step_fn(problem, x, theta, graph, cost, rnd, freeze_theta, tol, max_iterations)

    def _record(self, history, rnd, it, cost, lam, alpha, dt, dtheta, rho=None):
        entry = {"round": rnd, "iteration": it, "cost": cost, "lambda": lam, "alpha": alpha,
                 "seconds": dt, "step_theta": float(np.linalg.norm(dtheta))}
        if rho is not None:
            entry["rho"] = float(rho)
        history.append(entry)

    def _trial(self, rnd, it, lam, alpha, cost, new_cost, step, accepted):
        """Append one trial to ``self.trials`` (diagnostics, issue 9 session 8)."""
        if self.trials is None or step is None:
            return
        actual = cost - new_cost if np.isfinite(new_cost) else -np.inf
        scale = 1.0 if self.theta_scale is None else self.theta_scale
        dth = alpha * np.abs(step.dtheta / scale)
        with np.errstate(divide="ignore", invalid="ignore"):
            # ρ of the shortened step against the Gauss–Newton model's (2α − α²)·pred
            rho = np.float64(actual) / ((2 * alpha - alpha ** 2) * np.float64(step.predicted_decrease))
        self.trials.append({"round": rnd, "iteration": it, "lambda": lam, "alpha": alpha, "cost": cost,
                            "predicted": float(step.predicted_decrease), "actual": float(actual),
                            "rho": float(rho),
                            "step_x": float(alpha * np.linalg.norm(step.dx)),
                            "step_theta": float(alpha * np.linalg.norm(step.dtheta)),
                            "theta_argmax": int(np.argmax(dth)) if dth.size else -1,
                            "accepted": bool(accepted)})

    def _backtrack(self, problem, x, theta, step, cost, freeze_theta, rnd, it, lam):
        """The step along its direction at α = 1, 1/2, … 1/64 until the cost falls (cost evaluations only, no
        new solve); every trial recorded (`_trial`). Returns (accepted, α, x, θ, cost) of the last trial."""
        alpha = 1.0
        while True:
            x_new = problem.retract(x, alpha * step.dx)
            theta_new = theta if freeze_theta else problem.retract_theta(theta, alpha * step.dtheta)
            with np.errstate(over="ignore", invalid="ignore"):  # a wild trial step is simply rejected
                new_cost = problem.cost(x_new, theta_new, freeze_theta)
            accepted = bool(np.isfinite(new_cost) and new_cost < cost)
            self._trial(rnd, it, lam, alpha, cost, new_cost, step, accepted)
            if accepted or alpha / 2 < 1 / 64:
                return accepted, alpha, x_new, theta_new, new_cost
            alpha *= 0.5

    def _theta_still(self, dtheta, theta) -> bool:
        """θ stopped moving: max |δθ / θ_scale| below ``theta_tol`` (θ_scale: e.g. the prior std)."""
        tt = self.options.theta_tol
        if tt is None:
            return False
        scale = 1.0 if self.theta_scale is None else self.theta_scale
        return float(np.max(np.abs(dtheta / scale), initial=0.0)) < tt

    def _line_search(self, problem, x, theta, graph, cost, rnd, freeze_theta, tol, max_iterations):
        lam = 1e-9
        history = []
        converged = False
        prev_small = False
        prev_still = False
        for it in range(max_iterations):
            t0 = time.perf_counter()
            accepted = False
            alpha = 1.0
            step = None
            for _ in range(8):
                try:
                    step = self._solve(graph, lam)
                except SingularSystemError:
                    lam = max(lam * 10, 1e-6)
                    continue
                pred = step.predicted_decrease
                if np.isfinite(pred) and pred < tol * 1e-2 * cost:
                    break  # the model predicts nothing more to gain
                accepted, alpha, x_new, theta_new, new_cost = self._backtrack(
                    problem, x, theta, step, cost, freeze_theta, rnd, it, lam)
                if accepted:
                    if alpha == 1.0:
                        lam = max(lam / 10, 1e-12)
                    break
                lam = max(lam * 10, 1e-6)
            if not accepted:
                # no step lowers the cost: a minimum to working precision if the model agrees
                pred = step.predicted_decrease if step is not None else np.inf
                converged = bool(np.isfinite(pred) and pred < 1e-3 * max(cost, 1e-300))
                self.log(f"round {rnd} iter {it:3d}: no further decrease (λ={lam:.1e}); "
                         + ("converged" if converged else "stalled"))
                break
            rel = (cost - new_cost) / max(cost, 1e-300)
            pred_rel = (step.predicted_decrease / max(cost, 1e-300)) if np.isfinite(step.predicted_decrease) \
                else rel
            x, theta, cost = x_new, theta_new, new_cost
            graph = problem.linearize(x, theta, freeze_theta=freeze_theta)
            dt = time.perf_counter() - t0
            self._record(history, rnd, it, cost, lam, alpha, dt, alpha * step.dtheta)
            parts = graph.cost_parts()
            self.log(f"round {rnd} iter {it:3d}: cost {cost:.6e} (knot {parts['knot']:.2e} "
                     f"knot-θ {parts['knot_theta']:.2e} pair {parts['pair']:.2e} θ {parts['prior']:.2e})  "
                     f"rel.decrease {rel:.2e}  step {alpha:.3g}  λ {lam:.0e}  {dt:.2f} s")
            if self._stopped(x, theta, rnd, it):
                break
            small = rel < tol
            still = not freeze_theta and self._theta_still(alpha * step.dtheta, theta)
            if ((alpha == 1.0 and max(rel, pred_rel) < tol) or (small and prev_small)
                    or (still and prev_still)):
                converged = True
                break
            prev_small, prev_still = small, still
        return x, theta, converged, history

    def _trust_region(self, problem, x, theta, graph, cost, rnd, freeze_theta, tol, max_iterations):
        lam, nu = 1e-4, 2.0
        history = []
        converged = False
        small_prev = False
        still_prev = False
        for it in range(max_iterations):
            t0 = time.perf_counter()
            try:
                step = self._solve(graph, lam)
            except SingularSystemError:
                lam, nu = lam * nu, nu * 2
                continue
            pred = step.predicted_decrease
            if not np.isfinite(pred):
                lam, nu = lam * nu, nu * 2
                continue
            if pred < 1e-2 * tol * cost:
                converged = True
                self.log(f"round {rnd} iter {it:3d}: predicted decrease {pred:.2e} below tolerance; "
                         "converged")
                break
            x_new = problem.retract(x, step.dx)
            theta_new = theta if freeze_theta else problem.retract_theta(theta, step.dtheta)
            with np.errstate(over="ignore", invalid="ignore"):  # a wild trial step is simply rejected
                new_cost = problem.cost(x_new, theta_new, freeze_theta)
            rho = (cost - new_cost) / pred if np.isfinite(new_cost) else -np.inf
            self._trial(rnd, it, lam, 1.0, cost, new_cost, step, rho > 0)
            if rho <= 0:
                lam, nu = lam * nu, nu * 2
                self.log(f"round {rnd} iter {it:3d}: rejected (ρ={rho:.2f}), λ -> {lam:.1e}")
                if lam > 1e10:
                    break
                continue
            rel = (cost - new_cost) / max(cost, 1e-300)
            x, theta, cost = x_new, theta_new, new_cost
            lam = max(lam * max(1 / 3, 1 - (2 * rho - 1) ** 3), 1e-12)
            nu = 2.0
            graph = problem.linearize(x, theta, freeze_theta=freeze_theta)
            dt = time.perf_counter() - t0
            self._record(history, rnd, it, cost, lam, 1.0, dt, step.dtheta, rho)
            self.log(f"round {rnd} iter {it:3d}: cost {cost:.6e} rel.decrease {rel:.2e} ρ {rho:.2f} "
                     f"λ {lam:.1e} |δθ| {np.abs(step.dtheta).max(initial=0.0):.2e} {dt:.2f} s")
            if self._stopped(x, theta, rnd, it):
                break
            small = pred < tol * cost
            still = not freeze_theta and self._theta_still(step.dtheta, theta)
            if (small and small_prev) or (still and still_prev):
                converged = True
                break
            small_prev, still_prev = small, still
        return x, theta, converged, history

    #: λ at or below which a step is Gauss–Newton to working precision (Marquardt scaling λ·diag(H))
    LAM_MIN = 1e-9
    LAM_GN = 1e-3
    ALPHA_DAMP = 0.25  # a step shortened below this raises λ: the direction, not only its length, is off
    LAM_RAISE = 1e-4  # λ grows from at least this (the trust region's start): below it λ changes nothing

    def _gn_predicts_little(self, graph, cost, tol):
        """Does the (undamped) Gauss–Newton model predict a relative decrease below ``tol``? A heavily damped
        step predicts little even far from a minimum; this asks the model itself. Returns (bool, step)."""
        try:
            step = self._solve(graph, self.LAM_MIN)
        except SingularSystemError:
            return False, None
        pred = step.predicted_decrease
        return bool(np.isfinite(pred) and pred < tol * max(cost, 1e-300)), step

    def _hybrid(self, problem, x, theta, graph, cost, rnd, freeze_theta, tol, max_iterations):
        """Gain-ratio Levenberg–Marquardt with a backtracking safeguard (issue 9, session 8).

        * λ (Marquardt scaling λ·diag(H)) starts from the previous run's final λ (the last IRLS round's;
          Gauss–Newton on the first run): a reweighting round does not re-learn the damping.
        * A full step that lowers the cost is accepted and λ follows Nielsen's gain-ratio update
          λ ← λ·max(1/3, 1 − (2ρ − 1)³), ρ = actual / predicted decrease (Madsen, Nielsen & Tingleff,
          *Methods for non-linear least squares problems*, 2004, eq. 3.15 and Alg. 3.16).
        * A full step that does not is shortened along its direction (α = 1/2 … 1/64, cost evaluations only,
          no new solve), as the line search does. Accepted at α ≥ 1/4 (``ALPHA_DAMP``): λ is kept (a
          mild overshoot is the line search's job). Accepted only below 1/4: the direction, not just its
          length, is off, and λ is treated as after a rejection, λ ← max(λ, 1e-4)·ν, ν ← 2ν (Nielsen;
          from at least ``LAM_RAISE``, below which λ changes nothing); the short step is kept. No α: the
          same λ update and a new solve.
        * Only accepted steps count as iterations; rejected solves are capped at 2 × ``max_iterations``.
        * Convergence is claimed only when the *Gauss–Newton* model (λ → 0) predicts a relative decrease
          below ``tol``: a heavily damped step predicts and gains little far from a minimum too. When two
          damped steps in a row gain less than ``tol``, one undamped solve asks the model; if it predicts
          more, its step is tried next (halved if need be; λ drops to Gauss–Newton only if it is taken
          whole). When the damped model predicts nothing at all but the undamped one does, λ /= 3.
        Variants tried and dropped (docs/damping.md): λ = 1/α − 1 after a step shortened to α, and every
        shortened step raising λ (both slowed the sharp-friction Z1 log).
        """
        lam = self.LAM_MIN if self.lam is None else max(float(self.lam), self.LAM_MIN)
        nu = 2.0
        history = []
        converged = False
        small_prev = still_prev = False
        it, rejected = 0, 0
        step, probe = None, False
        while it < max_iterations and rejected <= 2 * max_iterations:
            t0 = time.perf_counter()
            if step is None:
                try:
                    step = self._solve(graph, lam)
                except SingularSystemError:
                    lam, nu, rejected = max(lam * nu, 1e-6), nu * 2, rejected + 1
                    continue
            pred = step.predicted_decrease  # NaN from a back end that does not predict (GTSAM's)
            if np.isfinite(pred) and pred < 1e-2 * tol * cost:  # the damped model predicts nothing to gain
                converged = lam <= self.LAM_GN or self._gn_predicts_little(graph, cost, 1e-2 * tol)[0]
                if not converged:  # the undamped model sees more to gain: λ is too large
                    lam, rejected, step = max(lam / 3, self.LAM_MIN), rejected + 1, None
                    continue
                self.log(f"round {rnd} iter {it:3d}: predicted decrease {pred:.2e} below tolerance; "
                         "converged")
                break
            accepted, alpha, x_new, theta_new, new_cost = self._backtrack(
                problem, x, theta, step, cost, freeze_theta, rnd, it, lam)
            if not accepted and probe:  # the Gauss–Newton probe failed: back to the damped steps
                probe, rejected, step = False, rejected + 1, None
                continue
            if not accepted:  # not even 1/64 of the step lowers the cost: rejected
                lam, nu, rejected, step = max(lam, self.LAM_RAISE) * nu, nu * 2, rejected + 1, None
                self.log(f"round {rnd} iter {it:3d}: no decrease down to step 1/64, λ -> {lam:.1e}")
                if lam > 1e10:
                    break
                continue
            if not np.isfinite(pred):  # no model prediction: judge by the decrease itself (ρ = 1)
                pred = (cost - new_cost) / (2 * alpha - alpha ** 2)
            rho = (cost - new_cost) / max((2 * alpha - alpha ** 2) * pred, 1e-300)
            if probe:  # the Gauss–Newton probe of a stall: taken whole, Gauss–Newton is right again
                lam = self.LAM_MIN if alpha == 1.0 else lam
            elif alpha == 1.0:
                lam, nu = max(lam * max(1 / 3, 1 - (2 * rho - 1) ** 3), self.LAM_MIN), 2.0
            elif alpha < self.ALPHA_DAMP:  # the model failed beyond a line search's reach: a rejection for
                lam, nu = max(lam, self.LAM_RAISE) * nu, nu * 2  # λ (Nielsen); the short step is kept
            probe = False
            rel = (cost - new_cost) / max(cost, 1e-300)
            dtheta = alpha * step.dtheta
            x, theta, cost = x_new, theta_new, new_cost
            graph = problem.linearize(x, theta, freeze_theta=freeze_theta)
            step = None
            dt = time.perf_counter() - t0
            self._record(history, rnd, it, cost, lam, alpha, dt, dtheta, rho)
            self.log(f"round {rnd} iter {it:3d}: cost {cost:.6e} rel.decrease {rel:.2e} step {alpha:.3g} "
                     f"ρ {rho:.2f} λ {lam:.1e} |δθ| {np.abs(dtheta).max(initial=0.0):.2e} {dt:.2f} s")
            if self._stopped(x, theta, rnd, it):
                break
            it += 1
            small = rel < tol and pred < tol * cost
            still = not freeze_theta and self._theta_still(dtheta, theta)
            if (small and small_prev) or (still and still_prev):
                if lam <= self.LAM_GN:
                    converged = True
                    break
                gn_small, gn = self._gn_predicts_little(graph, cost, tol)
                if gn_small:
                    converged = True
                    break
                # slow damped progress, not a minimum: the next trial is the Gauss–Newton step itself
                # (shortened if need be), λ kept for the steps after it unless that step is taken whole
                step, probe = gn, gn is not None
                small, still = False, False
            small_prev, still_prev = small, still
        self.lam = lam
        return x, theta, converged, history

    # ------------------------------------------------------------------ constraints
    def augmented_lagrangian(self, problem: Problem, x, theta, rounds: int = 20, constraint_tol: float = 1e-6,
                             freeze_theta: bool = False, inner_iterations: int = 4, min_scale: float = 1e-3,
                             initial_scale: float | None = None, patience: int = 5):
        """Constraint terms to ``constraint_tol`` (SI units) by the augmented Lagrangian: each round adds
        the current violation to the shifts (s/σ_c² is the multiplier estimate) and re-solves; when a
        round does not reduce the worst violation fourfold, σ_c shrinks by the factor that the round's
        reduction predicts for a tenfold one (10–1000×, down to ``min_scale``; shifts rescaled so the
        multipliers stay). ``initial_scale``: σ_c scale of the first round (default: as the problem holds
        it); ``inner_iterations``: LM iterations per round (an approximate inner solve is enough: on a
        B1 sway 4 gave the same violation in 20 instead of 63 iterations as 10); rounds stop after
        ``patience`` rounds without halving the best violation (a 10 s B1 trot oscillates between
        2e-4 and 1e-2 N at σ_c's floor), and the state with the smallest violation is returned.
        Returns (x, θ, history, violations, rounds used)."""
        cs = problem.constraints
        if initial_scale is not None:
            cs.shift = {k: (initial_scale / cs.scale) ** 2 * v for k, v in cs.shift.items()}
            cs.scale = float(initial_scale)
        viol = problem.violations(x, theta)
        history = []
        worst_prev = worst_violation(viol)
        best = (worst_prev, x, theta, viol)
        since_best, rnd = 0, 0
        for rnd in range(1, int(rounds) + 1):
            if worst_violation(viol) <= constraint_tol:
                rnd -= 1
                break
            for name, c in viol.items():
                cs.shift[name] = cs.shift.get(name, 0.0) + c
            x, theta, _, hist = self.run(problem, x, theta, 100 + rnd, freeze_theta=freeze_theta, tol=1e-10,
                                         max_iterations=inner_iterations)
            history += hist
            viol = problem.violations(x, theta)
            worst = worst_violation(viol)
            self.log(f"augmented Lagrangian round {rnd}: worst constraint residual {worst:.2e} "
                     f"({', '.join(f'{k} {np.abs(v).max():.1e}' for k, v in viol.items() if v.size)})")
            if worst < 0.5 * best[0]:
                best, since_best = (worst, x, theta, viol), 0
            else:
                since_best += 1
            if worst <= constraint_tol:
                break
            if since_best >= patience:  # rounds oscillate without progress: keep the best state
                self.log(f"augmented Lagrangian: no progress in {patience} rounds; best {best[0]:.2e}")
                break
            if worst > 0.25 * worst_prev and cs.scale > min_scale:
                # multiplier updates shrink the violation by ρ ≈ κ/(1 + κ), κ ∝ σ_c²: shrink σ_c so that the
                # next round reaches ρ = 0.1 (at most 1000×, at least 10× per round)
                ratio = min(max(worst / max(worst_prev, 1e-300), 1e-6), 0.999)
                factor = float(np.clip(np.sqrt((0.1 / 0.9) / (ratio / (1.0 - ratio))), 1e-3, 0.1))
                factor = max(factor, min_scale / cs.scale)
                cs.scale *= factor
                cs.shift = {k: factor ** 2 * s for k, s in cs.shift.items()}  # keeps the multipliers s/σ²
            worst_prev = worst
        if worst_violation(viol) > best[0]:
            _, x, theta, viol = best
        if worst_violation(viol) > constraint_tol:
            warnings.warn(f"hard constraints not satisfied after {rnd} augmented-Lagrangian rounds: worst "
                          f"residual {worst_violation(viol):.2e} > {constraint_tol:g} (see summary.json "
                          f"constraints; more rounds: constraint_rounds)", stacklevel=3)
        return x, theta, history, viol, rnd

    # ------------------------------------------------------------------ covariance
    def schur(self, problem: Problem, x, theta, dampings=(0.0,)) -> np.ndarray:
        """Schur complement of θ (states eliminated) at (x, θ); the first damping that factorizes."""
        graph = problem.linearize(x, theta)
        for i, damping in enumerate(dampings):
            try:
                return self.linear_solve(graph, damping).schur
            except SingularSystemError:
                if i == len(dampings) - 1:
                    raise
        raise AssertionError("unreachable")

    def covariance(self, problem: Problem, x, theta) -> np.ndarray:
        """θ's marginal covariance (inverse undamped Schur complement); NaN when singular."""
        try:
            return np.linalg.inv(self.schur(problem, x, theta))
        except (SingularSystemError, np.linalg.LinAlgError):
            return np.full((problem.ntheta, problem.ntheta), np.nan)
