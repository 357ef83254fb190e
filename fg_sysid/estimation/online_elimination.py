"""Incremental elimination of the online window (`online.OnlineEstimator`): `KnotChain`.

Variables: per window knot j the tangent step δx_j = x_j ⊖ x̄_j from its linearization point x̄_j
(nx = 3 nv: δq, δv, δa), and the physical parameters p (n_p = nθ; `layout.ParameterLayout.to_physical`),
in which the inverse-dynamics rows are linear. Every factor is stored as whitened linear rows
A δx + B p + c with B = J_θ (∂p/∂θ)⁻¹ and c = r̄ − B p(θ̄_j) (r̄, A, J_θ at (x̄_j, θ̄_j)), so the elimination
does not depend on the current estimate, only on the factors. Per knot the Gram blocks are cached:

* ``Kx[j]``  — x_j rows of the knot factors on [x_j | p | 1];
* ``Px[j]``, ``Py[j]`` — x_j and x_{j+1} rows of the pair factor (j, j+1) on [x_j | x_{j+1} | 1] and
  [x_{j+1} | 1];
* ``B[j]`` — the p-dependent knot rows [B | c] themselves (their p Gram is BᵀB); ``kcc[j]``, ``pcc[j]``
  the constants ‖c‖² of the other knot rows and of the pair rows.

Eliminating knots oldest → newest, p last (`linear_solver`; paper 004 Sec. VIII): the factor entering
knot j is a dense Gaussian on (x_j, p) held as its x rows ``F[j]`` (nx × [x_j | p | 1]) and its p block
``T[j]`` ([p | 1] × [p | 1]). With M_x = Kx + Px + F (x_j rows on [x_j | x_{j+1} | p | 1]):

    L_j = chol(M_x[:, x_j]),   W_j = L_j⁻¹ M_x[:, x_{j+1}, p, 1] = [U_j | Z_j],
    F[j+1] = [Py_xx | 0 | Py_1] − U_jᵀ W_j,     T[j+1] = T[j] + B_jᵀB_j − Z_jᵀ Z_j   (+ constants)

— exactly the Schur complement of the (x_j, x_{j+1}, p) system over x_j. The x rows are computed knot by
knot; the p blocks lazily (`_T_at`: two stacked products over a run of knots, per knot only for the
newest ``TAIL``). After the newest knot, ``T[n]`` is the window's information on p; `solve` finds θ from
it and the θ prior (Levenberg–Marquardt on θ), cov θ = (Jᵀ T_pp J + J_rᵀ J_r)⁻¹. Back substitution:
δx_j = E_j δx_{j+1} + D_j [p; 1] with [E_j | D_j] = −L_j⁻ᵀ W_j. A changed factor at knot j invalidates only
knots ≥ j (``restart``); marginalizing the oldest knot keeps (F[1], T[1]) as the prior on (x_1, p).

Buffers have a fixed capacity (window + margin) and are compacted in place when the window reaches the
end, so the terms' closures (which read the estimator's measurement buffers) stay valid and memory is flat.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import blas, lapack, pinvh

from .linear_solver import SingularSystemError
from .problem import Evaluation, retract_states


class KnotChain:
    """The window's factors, elimination caches and solution (see the module docstring).

    ``est`` is the owning `OnlineEstimator` (measurement buffers ``_qm``, ``_vm``, ``_taum``, ``_h`` that
    the window `Problem`'s terms read; thresholds); ``sm`` the warm-up `JointSmoother` (noise, prior)."""

    def __init__(self, est, sm, problem, cap: int):
        self.est, self.sm, self.problem = est, sm, problem
        self.cap = cap
        robot = est.robot
        self.nq, self.nv = robot.nq, robot.nv
        self.nx = nx = problem.nx
        self.nt = nt = problem.ntheta
        self.t = np.zeros(cap)
        self.xq = np.zeros((cap, self.nq))
        self.xv = np.zeros((cap, self.nv))
        self.xa = np.zeros((cap, self.nv))
        self.dx = np.zeros((cap, nx))
        self.thbar = np.zeros((cap, nt))
        self.Kx = np.zeros((cap, nx, nx + nt + 1))
        self.Px = np.zeros((cap, nx, 2 * nx + 1))
        self.Py = np.zeros((cap, nx, nx + 1))
        self.mth = sum(1 for term in problem.terms if term.touches == "knot"
                       and getattr(term.evaluate, "depends_on_theta", False))
        self.B = None  # (cap, m_θ, nθ + 1), sized at the first linearization
        self.kcc = np.zeros(cap)  # ‖c‖² of the knot rows without θ
        self.pcc = np.zeros(cap)  # ‖r‖² of the pair rows
        self.F = np.zeros((cap + 1, nx, nx + nt + 1))
        self.T = np.zeros((cap + 1, nt + 1, nt + 1))
        self.L = np.zeros((cap, nx, nx))
        self.W = np.zeros((cap, nx, nx + nt + 1))
        self.ED = np.zeros((cap, nx, nx + nt + 1))  # back-substitution maps [E_j | D_j]
        self.Tvalid = np.zeros(cap + 1, bool)
        self.Toff = np.zeros((nt + 1, nt + 1))  # forgetting: added to every T (see `inflate_theta`)
        self._Mx = np.empty((nx, 2 * nx + nt + 1))
        self.o = 0  # buffer position of window knot 0
        self.n = 0  # knots in the window
        self.restart = 0  # first window knot whose elimination is out of date
        self.frozen_upto = -1  # window knots ≤ this keep their linearization point (carry the prior)
        self.theta = None
        self.theta_cov = None
        self.last_eliminated = 0
        self.theta_std = np.asarray(sm._theta_std, float)
        self.layout = sm.layout_
        self._pm_key, self._pm = None, None
        self._inv_key, self._inv = None, None
        self.top_iterations = 0
        self.top_tol = 1e-4  # convergence of the top Gauss–Newton: predicted decrease of ½χ²
        self.top_lambda = 0.0  # Levenberg–Marquardt damping of the top, carried from update to update
        self.top_tries = self.TOP_TRIALS  # damping trials per top iteration before giving up
        self.marginalized = 0

    # ------------------------------------------------------------------ set-up
    def start(self, t, q, v, tau, x, theta) -> None:
        """The warm-up knots (measurements t, q, v, τ and the batch states x = (q, v, a), θ)."""
        n = t.size
        est = self.est
        self.t[:n] = t
        est._qm[:n] = q
        if est._vm is not None:
            est._vm[:n] = v
        est._taum[:n] = np.where(est._tau_mask[:n], np.nan_to_num(tau), 0.0)
        est._h[:n - 1] = np.diff(t)
        for blk, xi in zip(self._blocks(), x, strict=True):
            blk[:n] = xi
        self.thbar[:n] = theta
        self.o, self.n = 0, n
        self.theta = np.asarray(theta, float).copy()
        for j in range(n):
            self._linearize_knot(j)
        for j in range(n - 1):
            self._linearize_pair(j)
        self.F[0] = 0.0
        self.T[0] = 0.0  # data information on p only; the θ-only terms (prior) enter at the top
        self.Tvalid[:] = False
        self.Tvalid[0] = True
        self.restart = 0
        self.frozen_upto = -1

    def pmap(self, theta):
        """(p, ∂p/∂θ) at θ (cached for the last θ): the physical parameters [SI: kg, kg·m, kg·m², friction,
        armature] the inverse-dynamics rows are linear in (`layout.ParameterLayout`)."""
        key = np.asarray(theta, float).tobytes()
        if key != self._pm_key:
            self._pm = (self.layout.to_physical(theta), self.layout.jacobian(theta))
            self._pm_key = key
        return self._pm

    def pmap_inverse(self, theta):
        """(p, (∂p/∂θ)⁻¹) at θ (cached for the last θ; the new knots of an update share it)."""
        key = np.asarray(theta, float).tobytes()
        if key != self._inv_key:
            self._inv = (self.layout.to_physical(theta), np.linalg.inv(self.layout.jacobian(theta)))
            self._inv_key = key
        return self._inv

    def _theta_rows(self, theta, jacobians: bool = True):
        """Whitened rows (r, J) of the θ-only terms (the parameter prior) at θ."""
        probe = tuple(np.zeros((1, b.shape[1])) for b in (self.xq[:1], self.xv[:1], self.xa[:1]))
        ev = Evaluation(self.problem, probe, theta, jacobians, idx=[0])
        rs, Js = [], []
        for term in self.problem.terms:
            if term.touches != "theta":
                continue
            if term.role == "constraint":
                raise NotImplementedError(f"online window: θ constraint term {term.name!r} is not supported")
            wb = self.problem.whitened(term, term.evaluate(ev, jacobians), ev)
            rs.append(np.atleast_1d(wb.r))
            Js.append(wb.Jt)
        if not rs:
            return np.zeros(0), np.zeros((0, self.nt))
        return np.concatenate(rs), (np.vstack(Js) if jacobians else None)

    # ------------------------------------------------------------------ linearization
    def _blocks(self) -> tuple:
        """The per-knot state buffers (linearization points), in the problem's block order: (q, v, a) here;
        a subclass adds blocks (the floating base's contact forces λ, `online_floating`)."""
        return (self.xq, self.xv, self.xa)

    def _x(self, p):
        return tuple(b[p] for b in self._blocks())

    def _linearize_knot(self, j: int) -> None:
        """Gram blocks of the knot factors at window knot j, at (x̄_j, θ̄_j)."""
        p = self.o + j
        nx, nt = self.nx, self.nt
        th = self.thbar[p]
        x = tuple(b[p:p + 1] for b in self._blocks())
        ev = Evaluation(self.problem, x, th, True, idx=[p])
        Kx = np.zeros((nx, nx + nt + 1))
        brows, cc = [], 0.0
        for term in self.problem.terms:
            if term.touches != "knot":
                continue
            wb = self.problem.whitened(term, term.evaluate(ev, True), ev)
            J, r = wb.J[0], wb.r[0]
            if wb.Jt is not None:
                # rows linear in p: J_p = J_θ (∂p/∂θ)⁻¹, c = r̄ − J_p p̄ (p̄ = p(θ̄_j))
                pbar, Jinv = self.pmap_inverse(th)
                Jt = wb.Jt[0] @ Jinv
                c = r - Jt @ pbar
                Kx[:, :nx] += J.T @ J
                Kx[:, nx:nx + nt] += J.T @ Jt
                Kx[:, -1] += J.T @ c
                brows.append(np.hstack([Jt, c[:, None]]))
            else:
                Kx[:, :nx] += J.T @ J
                Kx[:, -1] += J.T @ r
                cc += float(r @ r)
        self.Kx[p] = Kx
        if brows:
            Bp = np.vstack(brows)
            if self.B is None:
                self.B = np.zeros((self.cap, Bp.shape[0], nt + 1))
            self.B[p] = Bp
        elif self.B is None:
            self.B = np.zeros((self.cap, 0, nt + 1))
        self.kcc[p] = cc

    def _linearize_pair(self, j: int) -> None:
        """Gram blocks of the pair factors (j, j+1) at (x̄_j, x̄_{j+1})."""
        p = self.o + j
        nx = self.nx
        x = tuple(b[p:p + 2] for b in self._blocks())
        ev = Evaluation(self.problem, x, self.thbar[p], True, idx=[p, p + 1])
        Px = np.zeros((nx, 2 * nx + 1))
        Py = np.zeros((nx, nx + 1))
        cc = 0.0
        for term in self.problem.terms:
            if term.touches != "pair":
                continue
            if getattr(term.evaluate, "depends_on_theta", False):
                raise NotImplementedError(f"online window: θ-dependent pair term {term.name!r} is not "
                                          "supported")
            wb = self.problem.whitened(term, term.evaluate(ev, True), ev)
            J0, J1, r = wb.J[0], wb.J1[0], wb.r[0]
            Px[:, :nx] += J0.T @ J0
            Px[:, nx:2 * nx] += J0.T @ J1
            Px[:, -1] += J0.T @ r
            Py[:, :nx] += J1.T @ J1
            Py[:, -1] += J1.T @ r
            cc += float(r @ r)
        self.Px[p], self.Py[p] = Px, Py
        self.pcc[p] = cc

    # ------------------------------------------------------------------ stream
    def append(self, t, q, v, tau) -> None:
        """A new knot at the newest end: measurements into the buffers, linearization point predicted from
        the previous knot's estimate (q̄ = measured q, v̄ = measured v or v̂ + â h, ā = â), θ̄ = θ."""
        if self.o + self.n + 1 >= self.cap:
            self._compact()
        est = self.est
        p = self.o + self.n
        self.t[p] = t
        est._qm[p] = q
        if est._vm is not None:
            est._vm[p] = v
        est._taum[p] = np.where(est._tau_mask[p], np.nan_to_num(tau), 0.0)
        self.xq[p] = q
        if self.n > 0:
            h = t - self.t[p - 1]
            est._h[p - 1] = h
            qp, vp, ap = self.estimate(p - 1)
            self.xv[p] = v if v is not None else vp + ap * h
            self.xa[p] = ap
        else:
            self.xv[p] = v if v is not None else 0.0
            self.xa[p] = 0.0
        self._commit_knot(p)

    def _commit_knot(self, p: int) -> None:
        """Append the knot whose linearization point was just written at buffer position p: θ̄, δx = 0,
        no prior, then linearize it and its pair factor and mark the elimination to restart there."""
        self.thbar[p] = self.theta
        self.dx[p] = 0.0
        self.Px[p], self.Py[p], self.pcc[p] = 0.0, 0.0, 0.0
        self.n += 1
        self._linearize_knot(self.n - 1)
        if self.n > 1:
            self._linearize_pair(self.n - 2)
            self.restart = min(self.restart, self.n - 2)
        else:
            self.restart = min(self.restart, 0)

    @property
    def t_newest(self) -> float:
        return float(self.t[self.o + self.n - 1])

    def estimate(self, p: int):
        """x̂ = x̄ ⊕ δx at buffer position p."""
        x = retract_states(self.problem.space, tuple(b[p:p + 1] for b in self._blocks()), self.dx[p:p + 1])
        return tuple(xi[0] for xi in x)

    def states(self, sl: slice) -> tuple:
        """(q, v, a) of window knots ``sl`` (copies; δx of the last back substitution that reached them)."""
        a, b = self.o + sl.start, self.o + sl.stop
        return retract_states(self.problem.space, tuple(blk[a:b] for blk in self._blocks()), self.dx[a:b])

    def marginalize_oldest(self) -> float:
        """Drop window knot 0: the running factor its elimination leaves on (x_1, θ) — the exact Schur
        complement of the window's linear system over δx_0 — is the prior from now on; knot 1's
        linearization point is frozen (first-estimate Jacobians). Returns the time the knot covered [s]."""
        if self.restart <= 0:
            self._eliminate(upto=1)
        self._T_at(1)
        dt = float(self.t[self.o + 1] - self.t[self.o])
        self.o += 1
        self.n -= 1
        self.restart = max(self.restart - 1, 0)
        self.frozen_upto = 0
        self.marginalized += 1
        return dt

    def prior(self) -> tuple:
        """The prior on (x_0, θ) of the window: x rows F (nx × [x_0 | θ | 1]) and θ block T ([θ | 1]²)."""
        return self.F[self.o].copy(), self.T[self.o] + self.Toff

    def restart_segment(self) -> None:
        """Marginalize every state of the window (a gap): the next knot starts a new segment whose only prior
        is θ's marginal."""
        S = self.theta_information() - self.Toff if self.n >= 1 else self.T[self.o].copy()
        end = self.o + self.n
        if end + 2 >= self.cap:
            self.o, self.n = end, 0
            self._compact()
            end = 0
        self.o, self.n = end, 0
        self.F[end] = 0.0
        self.T[end] = S
        self.Tvalid[end:] = False
        self.Tvalid[end] = True
        self.restart = 0
        self.frozen_upto = -1

    def inflate_theta(self, q: np.ndarray) -> None:
        """θ random walk at the window boundary: the data information on p carried by the prior on (x_0, p)
        is convolved with N(0, Q_p), Q_p = J diag(q) Jᵀ (J = ∂p/∂θ at the current θ; q [θ units²]): with
        its θ-marginal (S, s) and K = (S + Q_p⁻¹)⁻¹, S' = S − S K S, s' = s − S K s (valid for singular S:
        unidentifiable directions). The conditional of x_0 given p is kept, so only the prior's p block
        changes, and every cached block T_j = T_0 + Σ C_i shifts by the same amount: it is added once to
        ``Toff`` — no re-elimination."""
        nx, nt = self.nx, self.nt
        p = self.o
        S = self.T[p] + self.Toff
        if self.frozen_upto >= 0:
            Hxx, Fx = self.F[p][:, :nx], self.F[p][:, nx:]
            S = S - Fx.T @ pinvh(Hxx) @ Fx  # (x rows without information — e.g. a_0 — carry no coupling)
        H, g = S[:nt, :nt], S[:nt, -1]
        J = self.pmap(self.theta)[1]
        Qp = (J * np.asarray(q, float)) @ J.T
        K = np.linalg.inv(H + np.linalg.inv(0.5 * (Qp + Qp.T)))
        HK = H @ K
        dT = np.zeros((nt + 1, nt + 1))
        dT[:nt, :nt] = -HK @ H
        dT[:nt, -1] = dT[-1, :nt] = -HK @ g
        dT[-1, -1] = -g @ K @ g
        self.Toff += 0.5 * (dT + dT.T)

    def prior_theta_marginal(self) -> np.ndarray:
        """The θ-marginal S ([p | 1] × [p | 1]) of the prior on (x_0, p), forgetting offset included: its
        x_0 rows eliminated, S = T_0 + Toff − F_pᵀ H_xx⁺ F_p (pinv: x rows without information)."""
        nx = self.nx
        S = self.T[self.o] + self.Toff
        if self.frozen_upto >= 0:
            Hxx, Fx = self.F[self.o][:, :nx], self.F[self.o][:, nx:]
            S = S - Fx.T @ pinvh(Hxx) @ Fx
        return S

    def scale_prior(self, scale: float) -> None:
        """Covariance reset at a detected change (`online_change`): the whole marginal prior on (x_0, p)
        — its x rows F_0, its θ block T_0 and the forgetting offset — is multiplied by ``scale``: its
        covariance is inflated by 1/``scale`` in every direction (fading memory of everything seen before
        the window). Scaling the θ-marginal alone is not enough: the kept conditional of x_0 given p still
        carries the old data's p information through x_0, which the window's encoders determine. The
        window is re-eliminated from its oldest knot."""
        if not (np.isfinite(scale) and 0.0 <= scale <= 1.0):
            raise ValueError(f"scale must be in [0, 1], got {scale}")
        p = self.o
        self.F[p] *= scale
        self.T[p] = scale * (self.T[p] + self.Toff)
        self.Toff[:] = 0.0
        self.Tvalid[p + 1:] = False
        self.Tvalid[p] = True
        self.restart = 0

    def reanchor_prior(self) -> np.ndarray:
        """Re-anchor the marginal prior at the current estimate of the oldest window knot x̂_0 = x̄_0 ⊕ d
        and relinearize that knot's own factors (its knot factors at the current θ, the pair (0, 1)) there.

        The prior is a Gaussian in (δx_0, p), linear in δx_0 = x_0 ⊖ x̄_0. With δx_0 = d + δx'_0 (exact
        on vector-space joints; first order on the joint manifold), the same Gaussian in δx'_0 has the
        x rows [H_xx | H_xp | H_x1 + H_xx d] and the θ block [H_pp | H_p1 + H_px d; ... | H_11 + 2 dᵀH_x1 +
        dᵀH_xx d]: an exact change of variables, so the window's solution does not move; only the
        knot's own factors (first-estimate until now) then move to the new point. Returns d."""
        nx, nt = self.nx, self.nt
        p = self.o
        d = self.dx[p].copy()
        if self.n == 0:
            return d
        F, T = self.F[p], self.T[p]
        Hxx, Hxp, Hx1 = F[:, :nx], F[:, nx:nx + nt], F[:, -1]
        Hd = Hxx @ d
        T[:nt, -1] += Hxp.T @ d
        T[-1, :nt] += Hxp.T @ d
        T[-1, -1] += 2.0 * d @ Hx1 + d @ Hd
        F[:, -1] = Hx1 + Hd
        for blk, val in zip(self._blocks(), self.estimate(p), strict=True):
            blk[p] = val
        self.dx[p] = 0.0
        self.thbar[p] = self.theta
        self._linearize_knot(0)
        if self.n > 1:
            self._linearize_pair(0)
        self.Tvalid[p + 1:] = False
        self.restart = 0
        return d

    def _compact(self) -> None:
        """Move the window to the front of every buffer (in place: the terms keep reading the same arrays)."""
        o, n = self.o, self.n
        if o == 0:
            raise RuntimeError("online window buffer full: capacity too small for the lag")
        est = self.est
        arrays = [self.t, self.xq, self.xv, self.xa, self.dx, self.thbar, self.Kx, self.Px, self.Py, self.B,
                  self.kcc, self.pcc, self.L, self.W, self.ED, est._qm, est._taum, est._h]
        if est._vm is not None:
            arrays.append(est._vm)
        for arr in arrays:
            arr[:n] = arr[o:o + n].copy()
        for arr in (self.F, self.T, self.Tvalid):
            arr[:n + 1] = arr[o:o + n + 1].copy()
        self.Tvalid[n + 1:] = False
        self.o = 0

    # ------------------------------------------------------------------ relinearization
    def _theta_stale(self, j: int) -> bool:
        d = np.abs(self.theta - self.thbar[self.o + j]) / self.theta_std
        return float(np.max(d, initial=0.0)) > self.est.relin_theta

    def step_large(self, j: int) -> bool:
        nv = self.nv
        d = np.abs(self.dx[self.o + j])
        thr = self.est.relin_x
        return bool(d[:nv].max() > thr[0] or d[nv:2 * nv].max() > thr[1] or d[2 * nv:3 * nv].max() > thr[2])

    def stale(self, limit: int, depth: int | None = None) -> list:
        """Window knots (not frozen) whose step or θ drift exceed the thresholds, oldest first, at most
        ``limit``, among the newest ``depth`` knots (default: those younger than ``relin_lag``)."""
        out = []
        if depth is None:
            depth = int(np.ceil(self.est.relin_lag / max(self.est._stride * self.est._dt, 1e-12)))
        for j in range(max(self.frozen_upto + 1, self.n - depth), self.n):
            if self.step_large(j) or self._theta_stale(j):
                out.append(j)
                if len(out) >= limit:
                    break
        return out

    def relinearize(self, js) -> None:
        """New linearization points x̄_j ← x̂_j, θ̄_j ← θ for window knots ``js`` (frozen ones skipped); their
        knot factors and the pair factors touching them are re-evaluated."""
        js = sorted(j for j in set(js) if self.frozen_upto < j < self.n)
        if not js:
            return
        for j in js:
            p = self.o + j
            for blk, val in zip(self._blocks(), self.estimate(p), strict=True):
                blk[p] = val
            self.dx[p] = 0.0
            self.thbar[p] = self.theta
            self._linearize_knot(j)
        pairs = sorted({k for j in js for k in (j - 1, j) if 0 <= k < self.n - 1})
        for k in pairs:
            self._linearize_pair(k)
        self.restart = min(self.restart, pairs[0] if pairs else js[0], js[0])

    # ------------------------------------------------------------------ elimination
    def _eliminate(self, upto: int | None = None) -> None:
        """Eliminate window knots restart … upto−1 (default: all): the x-chain (conditionals L_j, W_j, the
        back-substitution maps and the running x rows F) knot by knot; the θ blocks T lazily (`_T_at`)."""
        nx, nt = self.nx, self.nt
        upto = self.n if upto is None else upto
        potrf, trsm = lapack.dpotrf, blas.dtrsm
        count = 0
        j0 = self.restart
        Mx = self._Mx
        for j in range(j0, upto):
            p = self.o + j
            F, Kx, Px = self.F[p], self.Kx[p], self.Px[p]
            np.add(F[:, :nx], Kx[:, :nx], out=Mx[:, :nx])
            Mx[:, :nx] += Px[:, :nx]
            Mx[:, nx:2 * nx] = Px[:, nx:2 * nx]
            np.add(F[:, nx:], Kx[:, nx:], out=Mx[:, 2 * nx:])
            Mx[:, -1] += Px[:, -1]
            Lk, info = potrf(Mx[:, :nx], lower=1, clean=1)
            if info != 0:
                raise SingularSystemError(f"online window: state block of the knot at t={self.t[p]:.4f} s "
                                          f"is not positive definite (LAPACK potrf info={info})")
            W = trsm(1.0, Lk, Mx[:, nx:], lower=1)
            self.L[p], self.W[p] = Lk, W
            # back-substitution map δx_j = E_j δx_{j+1} + D_j [θ; 1] with [E | D] = −L⁻ᵀ W
            self.ED[p] = trsm(-1.0, Lk, W, lower=1, trans_a=1)
            Fn = self.F[p + 1]
            Fn[:, :nx] = self.Py[p][:, :nx]
            Fn[:, nx:nx + nt] = 0.0
            Fn[:, -1] = self.Py[p][:, -1]
            Fn -= W[:, :nx].T @ W
            count += 1
        if upto > j0:
            self.Tvalid[self.o + j0 + 1:self.o + self.n + 1] = False
            self.restart = max(self.restart, upto)
        self.last_eliminated = count

    def _C(self, a: int, b: int) -> np.ndarray:
        """Σ_{p=a}^{b−1} (B_pᵀB_p − Z_pᵀZ_p + constants): the θ-block contributions of eliminated knots
        (buffer positions a … b−1), two stacked products."""
        nx = self.nx
        Bs = self.B[a:b].reshape(-1, self.nt + 1)
        Zs = self.W[a:b, :, nx:].reshape(-1, self.nt + 1)
        C = Bs.T @ Bs - Zs.T @ Zs
        C[-1, -1] += float(np.sum(self.kcc[a:b]) + np.sum(self.pcc[a:b]))
        return C

    TOP_HALVINGS = (1.0, 0.5, 0.25, 0.125, 0.0625)  # step lengths tried along the Gauss–Newton step
    TOP_TRIALS = 16  # damping trials per top iteration (λ from 1e-6 up to 1e9 when started from 0)

    TAIL = 16  # θ blocks kept per knot for the newest knots (restart points of the next updates)

    def _T_at(self, j: int) -> np.ndarray:
        """The θ block T of the factor entering window knot j (j = n: θ's marginal information), without the
        forgetting offset; computed from the nearest valid one below (the prior's is always valid)."""
        p = self.o + j
        if self.Tvalid[p]:
            return self.T[p]
        i = p - 1
        while not self.Tvalid[i]:
            i -= 1
        seq_from = max(i, p - self.TAIL)
        if seq_from > i:
            self.T[seq_from] = self.T[i] + self._C(i, seq_from)
            self.Tvalid[seq_from] = True
        for k in range(seq_from, p):
            self.T[k + 1] = self.T[k] + self._C(k, k + 1)
            self.Tvalid[k + 1] = True
        return self.T[p]

    def theta_information(self) -> np.ndarray:
        """θ's marginal information [θ | 1] × [θ | 1] of the whole window (forgetting included)."""
        self._eliminate()
        return self._T_at(self.n) + self.Toff

    def solve(self, backsub: int | None = None, max_iterations: int = 5) -> None:
        """Eliminate what is out of date, then θ at the top and δx by back substitution — of the newest
        ``backsub`` knots only when given (the others keep their last δx until `back_substitute`).

        The top: the window's data information on [p | 1] (``theta_information``) is a quadratic in the
        physical parameters p; with the θ-only terms (the prior) θ minimizes
        ½ [p(θ); 1]ᵀ T [p(θ); 1] + ½ ‖r_prior(θ)‖² — a small Gauss–Newton on θ (with step halving), exact in
        the parameterization's nonlinearity. cov θ = (Jᵀ T_pp J + J_rᵀ J_r)⁻¹ at the solution (J = ∂p/∂θ)."""
        if self.n == 0:
            return
        nt = self.nt
        T = self.theta_information()
        P, g, c0 = T[:nt, :nt], T[:nt, -1], T[-1, -1]

        def cost(th):
            p = self.layout.to_physical(th)
            r, _ = self._theta_rows(th, False)
            return 0.5 * float(p @ P @ p + 2 * g @ p + c0 + r @ r)

        theta = self.theta.copy()
        f = cost(theta)
        # λ persists across updates: a poorly conditioned top (cond ≈ 1e9 after a poor warm-up) needs more
        # damping than 8 fresh trials reach, and restarting from λ = 0 every update froze θ for good
        it, lam = 0, self.top_lambda
        for it in range(1, max_iterations + 1):  # noqa: B007 (the count is reported)
            p, J = self.pmap(theta)
            r, Jr = self._theta_rows(theta)
            H = J.T @ P @ J + Jr.T @ Jr
            grad = J.T @ (P @ p + g) + Jr.T @ r
            d = np.maximum(np.diag(H), 1e-12)
            Lh, info = lapack.dpotrf(H, lower=1, clean=1)
            if info != 0:
                raise SingularSystemError("online window: the θ block is not positive definite")
            step = -lapack.dpotrs(Lh, grad, lower=1)[0]
            pred = -grad @ step
            if pred < self.top_tol:
                break  # converged: the (undamped) Newton decrement is below top_tol (χ²/2 units)
            accepted = False
            # the Gauss–Newton direction with step halving first: far from the optimum (after a change of
            # the robot) its direction is good but its length is not (p(θ) is nonlinear), and λ·diag(H)
            # damping alone crawled (λ stuck at 1–10, 2 % of the mass change per second)
            for alpha in self.TOP_HALVINGS:
                f_new = cost(theta + alpha * step)
                if f_new < f:
                    accepted, step, pred = True, alpha * step, alpha * pred
                    lam = 0.0
                    break
            for _ in range(0 if accepted else self.top_tries):  # Levenberg–Marquardt: λ·diag(H)
                if lam > 0:
                    Hd = H.copy()
                    Hd[np.diag_indices(nt)] += lam * d
                    Lh, info = lapack.dpotrf(Hd, lower=1, clean=1)
                    step = -lapack.dpotrs(Lh, grad, lower=1)[0]
                    pred = -grad @ step
                f_new = cost(theta + step)
                if f_new < f:
                    accepted = True
                    lam = 0.0 if lam <= 1e-6 else lam / 10
                    break
                lam = max(1e-6, 10 * lam)
            if not accepted:
                break
            theta, f = theta + step, f_new
            if pred < 10 * self.top_tol:
                break
        self.top_iterations = it
        self.top_lambda = lam
        p, J = self.pmap(theta)
        r, Jr = self._theta_rows(theta)
        H = J.T @ P @ J + Jr.T @ Jr
        Lh, info = lapack.dpotrf(H, lower=1, clean=1)
        if info != 0:
            raise SingularSystemError("online window: the θ block is not positive definite")
        Li, _ = lapack.dtrtri(Lh, lower=1)
        self.theta = theta
        self.theta_cov = Li.T @ Li
        self.back_substitute(self.n if backsub is None else min(int(backsub), self.n))

    def back_substitute(self, k: int | None = None, p: np.ndarray | None = None) -> None:
        """δx_j = E_j δx_{j+1} + D_j [p; 1] for the newest ``k`` knots (default: all); p = p(θ) unless
        given."""
        nx = self.nx
        o, n = self.o, self.n
        k = n if k is None else k
        th1 = np.append(self.pmap(self.theta)[0] if p is None else p, 1.0)
        ED = self.ED[o + n - k:o + n]
        c = ED[:, :, nx:] @ th1
        nxt = np.zeros(nx)
        dx = self.dx[o + n - k:o + n]
        for j in range(k - 1, -1, -1):
            nxt = c[j] + ED[j, :, :nx] @ nxt
            dx[j] = nxt

    def dense_system(self):
        """The window's whole linear system as one dense matrix on [δx_0 … δx_{n−1} | θ | 1] (tests: the
        incremental elimination and marginal prior against dense Schur complements)."""
        nx, nt, n, o = self.nx, self.nt, self.n, self.o
        N = n * nx + nt + 1
        G = np.zeros((N, N))
        th = slice(n * nx, n * nx + nt)
        one = N - 1

        def xs(j):
            return slice(j * nx, (j + 1) * nx)

        # prior on (x_0, θ)
        F0 = self.F[o]
        G[xs(0), xs(0)] += F0[:, :nx]
        G[xs(0), th] += F0[:, nx:nx + nt]
        G[th, xs(0)] += F0[:, nx:nx + nt].T
        G[xs(0), one] += F0[:, -1]
        G[one, xs(0)] += F0[:, -1]
        G[n * nx:, n * nx:] += self.T[o] + self.Toff
        for j in range(n):
            p = o + j
            Kx = self.Kx[p]
            G[xs(j), xs(j)] += Kx[:, :nx] + self.Px[p][:, :nx]
            G[xs(j), th] += Kx[:, nx:nx + nt]
            G[th, xs(j)] += Kx[:, nx:nx + nt].T
            G[xs(j), one] += Kx[:, -1] + self.Px[p][:, -1]
            G[one, xs(j)] += Kx[:, -1] + self.Px[p][:, -1]
            if j + 1 < n:
                G[xs(j), xs(j + 1)] += self.Px[p][:, nx:2 * nx]
                G[xs(j + 1), xs(j)] += self.Px[p][:, nx:2 * nx].T
                G[xs(j + 1), xs(j + 1)] += self.Py[p][:, :nx]
                G[xs(j + 1), one] += self.Py[p][:, -1]
                G[one, xs(j + 1)] += self.Py[p][:, -1]
            G[n * nx:, n * nx:] += self.B[p].T @ self.B[p]
            G[one, one] += self.kcc[p] + self.pcc[p]
        return G
