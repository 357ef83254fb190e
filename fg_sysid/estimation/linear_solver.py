"""Linear least-squares step of the smoother, in O(N) for N knots.

A linearized graph holds whitened Jacobian blocks of three kinds:

* knot factors on x_k alone (encoders, velocity measurements),
* knot factors on (x_k, θ) (inverse dynamics), and
* pair factors on (x_k, x_{k+1}) (integration between knots),

plus a diagonal prior on θ. Its normal matrix is block tridiagonal in the states with a dense border for
θ ("arrow" structure). Eliminating the knots in time order and θ last keeps every step O(N) — the
ordering of ../shared/notes/gtsam-python-performance.md §4 and the parameterized Riccati recursion of
paper 004 Sec. VIII. Two interchangeable back ends solve it:

* `solve_structured` (default): block Cholesky in time order, its per-knot loops compiled
  (`block_kernels`); the θ-border contributions Σ Z_kᵀ Z_k are accumulated in BLAS products at the end;
  further right-hand sides of the same Jacobian cost a few columns each (Hutchinson probes);
* `solve_gtsam`: the same whitened blocks as `gtsam.JacobianFactor`s in a `GaussianFactorGraph`,
  eliminated with the ordering x_0 … x_{N-1}, θ (used as cross-check and as the elimination floor in
  benchmarks).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from .block_kernels import block_backward, block_backward_run, block_forward, block_forward_run

#: process-wide threads for ``n_jobs=None`` (None: the cores this process may use, at most 2); set by
#: `default_threads` (e.g. a study's runs, which are parallel across runs already)
_DEFAULT_THREADS: int | None = None


@contextmanager
def default_threads(n: int):
    """Within the block, estimators given ``n_jobs=None`` use ``n`` threads (1 or 2) in linear solves."""
    global _DEFAULT_THREADS
    if n not in (1, 2):
        raise ValueError(f"threads must be 1 or 2, not {n!r}")
    before, _DEFAULT_THREADS = _DEFAULT_THREADS, n
    try:
        yield
    finally:
        _DEFAULT_THREADS = before


def resolve_threads(n_jobs: int | None) -> int:
    """Threads of `StructuredSolver` for an estimator's ``n_jobs`` (scikit-learn's convention): None or −1
    = the cores this process may use, capped at 2 (the solver splits its work in two at most; within
    `default_threads`, its value); 1 or 2 as given."""
    if n_jobs is None or n_jobs == -1:
        if _DEFAULT_THREADS is not None:
            return _DEFAULT_THREADS
        try:
            cores = len(os.sched_getaffinity(0))
        except AttributeError:  # not on Linux
            cores = os.cpu_count() or 1
        return 2 if cores >= 2 else 1
    if n_jobs not in (1, 2):
        raise ValueError(f"n_jobs must be None, -1, 1 or 2, not {n_jobs!r}")
    return int(n_jobs)


def _in_two(first, second):
    """``first()`` here and ``second()`` in a second thread at once (numpy's products and the compiled
    kernels release the GIL); returns both results."""
    with ThreadPoolExecutor(1) as ex:
        later = ex.submit(second)
        return first(), later.result()


class SingularSystemError(np.linalg.LinAlgError):
    """The normal equations are not positive definite (an unobservable or degenerate problem)."""


def _stack_rows(blocks, rows, widths, bufs, key):
    """Row-stack factor blocks [(A_1, A_2, …, r)] (each A (n, m, w_i), r (n, m)) at the knots ``rows``
    (a slice) into one array (len, Σm, Σw + 1) holding [A_1 | A_2 | … | r]; the memory comes from
    ``bufs[key]`` (grown as needed, reused across chunks)."""
    m = sum(b[-1].shape[1] for b in blocks)
    cols = np.cumsum((0,) + tuple(widths))
    n = rows.stop - rows.start
    size = n * m * (int(cols[-1]) + 1)
    if bufs.get(key) is None or bufs[key].size < size:
        bufs[key] = np.empty(size)
    S = bufs[key][:size].reshape(n, m, int(cols[-1]) + 1)
    i = 0
    for b in blocks:
        mi = b[-1].shape[1]
        for j, A in enumerate(b[:-1]):
            S[:, i:i + mi, cols[j]:cols[j + 1]] = A[rows]
        S[:, i:i + mi, -1] = b[-1][rows]
        i += mi
    return S


@dataclass
class LinearizedGraph:
    """Whitened Jacobian blocks (residual r, Jacobians J; the cost is ½ Σ ‖r‖²)."""

    n_knots: int
    nx: int
    ntheta: int
    knot: list = field(default_factory=list)  # [(J (N, m, nx), r (N, m))]
    knot_theta: list = field(default_factory=list)  # [(Jx (N, m, nx), Jt (N, m, nθ), r (N, m))]
    pair: list = field(default_factory=list)  # [(J0 (N-1, m, nx), J1 (N-1, m, nx), r (N-1, m))]
    #: Sparse pair factors on (x_k, x_{k+1}, θ) (e.g. impact maps at touchdown):
    #: [(k, J0 (m, nx), J1 (m, nx), Jθ (m, nθ), r (m,))]
    pair_theta: list = field(default_factory=list)
    #: Optional dict shared across linearizations whose knot and pair Jacobians do not change (vector-space
    #: configurations, fixed noise levels): their Gram blocks are computed once and reused.
    gram_cache: dict | None = None
    prior_w: np.ndarray | None = None  # whitened prior Jacobian: (nθ,) diagonal or (m, nθ) matrix
    prior_r: np.ndarray | None = None  # (nθ,) or (m,)

    CHUNK = 128  # knots per chunk of `normal_equations` (class constant, not a field; 128: measured best)

    def prior_jacobian(self) -> np.ndarray:
        w = np.asarray(self.prior_w, float)
        return np.diag(w) if w.ndim == 1 else w

    def cost_parts(self) -> dict:
        """½‖r‖² of each factor kind: knot, knot_theta, pair, prior."""
        return {
            "knot": 0.5 * sum(float(np.sum(r * r)) for _, r in self.knot),
            "knot_theta": 0.5 * sum(float(np.sum(r * r)) for _, _, r in self.knot_theta),
            "pair": 0.5 * sum(float(np.sum(r * r)) for _, _, r in self.pair)
            + 0.5 * sum(float(np.sum(r * r)) for *_, r in self.pair_theta),
            "prior": 0.0 if self.prior_r is None else 0.5 * float(np.sum(self.prior_r ** 2)),
        }

    def cost(self) -> float:
        c = 0.0
        for _, r in self.knot:
            c += float(np.sum(r * r))
        for _, _, r in self.knot_theta:
            c += float(np.sum(r * r))
        for _, _, r in self.pair:
            c += float(np.sum(r * r))
        for *_, r in self.pair_theta:
            c += float(np.sum(r * r))
        if self.prior_r is not None:
            c += float(np.sum(self.prior_r ** 2))
        return 0.5 * c

    def gradient(self) -> tuple[np.ndarray, np.ndarray]:
        """g = Jᵀ r of the cost ½‖r‖²: gx (N, nx) and gt (nθ,) (e.g. a further right-hand side of
        `StructuredSolver.solve` for a graph with the same Jacobians and other residuals)."""
        N, nx, nt = self.n_knots, self.nx, self.ntheta
        gx, gt = np.zeros((N, nx)), np.zeros(nt)
        for J, r in self.knot:
            gx += np.einsum("nmx,nm->nx", J, r)
        for Jx, Jt, r in self.knot_theta:
            gx += np.einsum("nmx,nm->nx", Jx, r)
            gt += Jt.reshape(-1, nt).T @ r.reshape(-1)
        for J0, J1, r in (self.pair if N > 1 else []):
            gx[:-1] += np.einsum("nmx,nm->nx", J0, r)
            gx[1:] += np.einsum("nmx,nm->nx", J1, r)
        for k, J0, J1, Jt, r in self.pair_theta:
            gx[k] += J0.T @ r
            gx[k + 1] += J1.T @ r
            gt += Jt.T @ r
        if self.prior_w is not None:
            gt += self.prior_jacobian().T @ self.prior_r
        return gx, gt

    # ------------------------------------------------------------------ normal equations
    def normal_equations(self, out: np.ndarray | None = None, threads: int = 1):
        """Blocks of H = Jᵀ J and g = Jᵀ r: D (N,nx,nx), B (N-1,nx,nx), C (N,nx,nθ), Htt, gx, gt.

        With ``out`` (N, nx, nx + nθ + 1), D, C and gx are written into its column blocks (views are
        returned), so a caller can reuse one buffer across iterations. ``threads`` = 2 splits the knots
        in two halves accumulated at once (numpy's products release the GIL); the pair factor joining
        the halves is added afterwards, so no knot is written by both.
        """
        # Fewer, larger products (issue 10 item 4): per chunk of knots, the rows of all blocks of one kind
        # are stacked once ([J_1 | … | r], `_stack_rows`) and each kind costs one batched product against
        # [J | r] (Gram blocks and gradient at once). Chunks keep the stacked rows in cache and reuse
        # their buffers.
        N, nx, nt = self.n_knots, self.nx, self.ntheta
        if out is None:
            out = np.empty((N, nx, nx + nt + 1))
        D, C, gx = out[:, :, :nx], out[:, :, nx:nx + nt], out[:, :, -1]
        B = np.zeros((max(N - 1, 0), nx, nx))
        cached = self.gram_cache.get("knot_pair") if self.gram_cache is not None else None
        if cached is not None and cached[0].shape != (N, nx, nx):
            cached = None
        fill = self.gram_cache is not None and cached is None
        Dk = np.zeros((N, nx, nx)) if fill else None  # knot and pair Gram blocks alone, for the cache
        step = self.CHUNK
        M = N // 2 // step * step  # split at a chunk boundary
        if threads > 1 and M >= step and N - M >= step:
            (Htt, gt), (Htt2, gt2) = _in_two(lambda: self._accumulate(out, B, Dk, cached, 0, M),
                                             lambda: self._accumulate(out, B, Dk, cached, M, N))
            Htt += Htt2
            gt += gt2
            self._add_pairs(out, B, Dk, cached, slice(M - 1, M))  # the pair joining the halves
        else:
            Htt, gt = self._accumulate(out, B, Dk, cached, 0, N)
        if fill:
            self.gram_cache["knot_pair"] = (Dk, B.copy())
        elif cached is not None:
            D += cached[0]
            B[:] = cached[1]
        for k, J0, J1, Jt, r in self.pair_theta:
            D[k] += J0.T @ J0
            D[k + 1] += J1.T @ J1
            B[k] += J0.T @ J1
            C[k] += J0.T @ Jt
            C[k + 1] += J1.T @ Jt
            Htt += Jt.T @ Jt
            gx[k] += J0.T @ r
            gx[k + 1] += J1.T @ r
            gt += Jt.T @ r
        if self.prior_w is not None:
            Jp = self.prior_jacobian()
            Htt += Jp.T @ Jp
            gt += Jp.T @ self.prior_r
        return D, B, C, Htt, gx, gt

    def _add_pairs(self, out, B, Dk, cached, ps, bufs=None):
        """Pair factors ``ps`` (a slice of pairs k, joining knots k and k + 1) into D, B and gx:
        J0ᵀ [J0 | J1 | r] and J1ᵀ [J1 | r]."""
        if not self.pair or self.n_knots < 2 or ps.stop <= ps.start:
            return
        nx = self.nx
        D, gx = out[:, :, :nx], out[:, :, -1]
        ps1 = slice(ps.start + 1, ps.stop + 1)
        P = _stack_rows(self.pair, ps, (nx, nx), {} if bufs is None else bufs, "p")
        J0t, J1t = np.swapaxes(P[:, :, :nx], 1, 2), np.swapaxes(P[:, :, nx:2 * nx], 1, 2)
        if cached is None:
            G0, G1 = J0t @ P, J1t @ P[:, :, nx:]
            D[ps] += G0[:, :, :nx]
            D[ps1] += G1[:, :, :nx]
            B[ps] = G0[:, :, nx:2 * nx]
            if Dk is not None:
                Dk[ps] += G0[:, :, :nx]
                Dk[ps1] += G1[:, :, :nx]
        else:
            G0, G1 = J0t @ P[:, :, 2 * nx:], J1t @ P[:, :, 2 * nx:]
        gx[ps] += G0[:, :, -1]
        gx[ps1] += G1[:, :, -1]

    def _accumulate(self, out, B, Dk, cached, lo, hi):
        """Knot factors of knots lo … hi−1 and the pair factors inside that range (pairs lo … hi−2) into
        `normal_equations`' blocks; returns this range's (Htt, gt) from the knot factors on θ. Writes only
        knots lo … hi−1 and pairs lo … hi−2 (two ranges can run at once)."""
        nx, nt = self.nx, self.ntheta
        D, gx = out[:, :, :nx], out[:, :, -1]
        step = self.CHUNK
        bufs = {}
        # knot factors on (x_k, θ): Jxᵀ [Jx | Jθ | r] gives D, C and gx at once, straight into `out`
        for s in range(lo, hi, step):
            ks = slice(s, min(s + step, hi))
            if self.knot_theta:
                K = _stack_rows(self.knot_theta, ks, (nx, nt), bufs, "kt")
                np.matmul(np.swapaxes(K[:, :, :nx], 1, 2), K, out=out[ks])
            else:
                out[ks] = 0.0
        for s in range(lo, hi, step):  # then add (a pair reaches into the next chunk's first knot)
            ks = slice(s, min(s + step, hi))
            # knot factors on x_k alone: Jᵀ [J | r]
            if self.knot:
                K = _stack_rows(self.knot, ks, (nx,), bufs, "k")
                Jt_ = np.swapaxes(K[:, :, :nx], 1, 2)
                if cached is None:
                    G = Jt_ @ K
                    D[ks] += G[:, :, :nx]
                    if Dk is not None:
                        Dk[ks] += G[:, :, :nx]
                    gx[ks] += G[:, :, nx]
                else:
                    gx[ks] += (Jt_ @ K[:, :, nx:])[:, :, 0]
            # pair factors on (x_k, x_k+1) inside the range
            self._add_pairs(out, B, Dk, cached, slice(s, min(s + step, hi - 1)), bufs)
        Htt = np.zeros((nt, nt))
        gt = np.zeros(nt)
        for _, Jth, r in self.knot_theta:  # θ rows only live in these blocks: one large symmetric product
            flat = Jth[lo:hi].reshape(-1, nt)
            Htt += flat.T @ flat
            gt += flat.T @ r[lo:hi].reshape(-1)
        return Htt, gt


@dataclass
class Step:
    """Solution of (H + λ·diag) δ = −g: state steps dx (N, nx), parameter step dtheta (nθ,),
    the Schur complement S on θ (its inverse is θ's marginal covariance when λ = 0), and the
    model decrease predicted by the linearization. ``extra``: [(dx, dθ)] for further right-hand sides
    solved with the same factorization (`StructuredSolver.solve`'s ``rhs``)."""

    dx: np.ndarray
    dtheta: np.ndarray
    schur: np.ndarray
    predicted_decrease: float
    extra: list = field(default_factory=list)


def _damp(M: np.ndarray, lam: float, floor: float) -> None:
    idx = np.diag_indices(M.shape[-1])
    d = M[..., idx[0], idx[1]]
    M[..., idx[0], idx[1]] = d + lam * np.maximum(d, floor)


class StructuredSolver:
    """O(N) block elimination (knots in time order, θ last) with Marquardt damping λ·diag(H).

    The per-knot loops are compiled (`block_kernels`); the θ border's Σ Z_kᵀ Z_k is one BLAS product per
    chunk of knots. Keeps its large work arrays between calls (an estimator solves many systems of one
    size; fresh arrays of hundreds of MB per solve cost more in page faults than the arithmetic).
    """

    CHUNK = 512  # knots per block of the θ-border accumulation
    #: fewest knots for which ``threads`` = 2 splits the work (measured at 20 000 knots; shorter chains
    #: stay on one thread, not measured)
    MIN_SPLIT_KNOTS = 2000

    def __init__(self, threads: int = 1):
        if threads not in (1, 2):
            raise ValueError(f"threads must be 1 or 2, not {threads!r}")
        #: 2: the knots are eliminated from both ends at once (a "twisted" block factorization meeting at
        #: the middle knot), the normal equations and the θ border accumulated in two halves; the same
        #: arithmetic as one thread up to rounding, 1.3–1.5× faster per solve on 2 cores (docs/benchmarks.md)
        self.threads = threads
        self._shape = None

    def _workspace(self, N, nx, nt, nrhs):
        if self._shape != (N, nx, nt):
            # [D_k | C_k | g_k], updated in place, then overwritten by [U_k | L_k^{-1} C̃_k | L_k^{-1} g̃_k]
            self._A = np.empty((N, nx, nx + nt + 1))
            self._L = np.empty((N, nx, nx))  # Cholesky factors L_k (lower)
            self._shape = (N, nx, nt)
        E = np.empty((N, nx, nrhs))  # further right-hand sides (usually none)
        return self._A, E, self._L

    def solve(self, graph: LinearizedGraph, lam: float = 0.0, rhs=()) -> Step:
        """Solve (H + λ·diag H) δ = −g for the graph's gradient g = Jᵀ r; ``rhs``: further gradients
        [(gx (N, nx), gt (nθ,))] of the same Jacobian (e.g. `LinearizedGraph.gradient` of other
        residuals), solved with the same factorization at the cost of a few columns (Step.extra)."""
        N, nx, nt = graph.n_knots, graph.nx, graph.ntheta
        P = len(rhs)
        A, E, Lfac = self._workspace(N, nx, nt, P)
        split = self.threads > 1 and N >= self.MIN_SPLIT_KNOTS
        D, B, C, Htt, gx, gt = graph.normal_equations(out=A, threads=2 if split else 1)
        for p, (gxp, _) in enumerate(rhs):
            E[:, :, p] = gxp
        H_diag_x = np.diagonal(D, axis1=1, axis2=2).copy()
        gx0 = gx.copy()
        floor = 1e-12 * max(float(np.max(np.abs(H_diag_x))), 1.0)
        H_diag_t = np.diag(Htt).copy()
        if lam > 0:
            _damp(D, lam, floor)
            _damp(Htt, lam, floor)
        # Block Cholesky (`block_kernels`): A becomes [U_k | W_k]
        B = np.ascontiguousarray(B, dtype=float)
        M = N // 2
        if split:
            bad = self._forward_twisted(A, E, B, Lfac, M)
        else:
            bad = block_forward(A, E, B, Lfac)
        if bad >= 0:
            raise SingularSystemError(
                f"state block of knot {bad} is not positive definite in the elimination of the knots; "
                "the states are not observable from the factors at this knot"
            )
        W = A
        # θ border: S = Htt − Σ Z_kᵀ Z_k, s = gt − Σ Z_kᵀ z_k, accumulated in blocks of knots
        s = np.column_stack([gt] + [np.asarray(gtp, float) for _, gtp in rhs])
        if split:
            (S0, s0), (S1, s1) = _in_two(lambda: self._border(W, E, 0, M), lambda: self._border(W, E, M, N))
            S, s = Htt - S0 - S1, s - s0 - s1
        else:
            S0, s0 = self._border(W, E, 0, N)
            S, s = Htt - S0, s - s0
        try:
            Ls_t = np.linalg.cholesky(S)
        except np.linalg.LinAlgError:
            raise SingularSystemError(
                "the parameter block is not positive definite after eliminating the states; "
                "give every parameter a prior (prior std too large?)"
            ) from None
        dthetas = -np.linalg.solve(Ls_t.T, np.linalg.solve(Ls_t, s))  # (nθ, 1 + P)
        # back substitution: δx_k = −L_k^{-T} (z_k + U_k δx_{k+1} + Z_k δθ)
        sols = []
        for p in range(1 + P):
            z = W[:, :, -1] if p == 0 else E[:, :, p - 1]
            cp = z + W[:, :, nx:nx + nt] @ dthetas[:, p]
            dx = np.empty((N, nx))
            if split:  # the middle knot first (nothing after it), then both runs from it
                block_backward_run(W, Lfac, cp, dx, M, 1, 1, np.zeros(nx))
                block_backward_run(W, Lfac, cp, dx, 0, M, 1, dx[M])
                block_backward_run(W, Lfac, cp, dx, N - 1, N - 1 - M, -1, dx[M])
            else:
                block_backward(W, Lfac, cp, dx)
            sols.append((dx, dthetas[:, p].copy()))
        dx, dtheta = sols[0]
        # predicted decrease of ½‖r‖² for the damped step: −gᵀδ − ½ δᵀHδ = −½ gᵀδ + ½ λ δᵀ diag δ
        g_dot = float(np.sum(gx0 * dx) + gt @ dtheta)
        damp_term = 0.0
        if lam > 0:
            damp_term = float(np.sum(np.maximum(H_diag_x, floor) * dx * dx)
                              + np.sum(np.maximum(H_diag_t, floor) * dtheta * dtheta))
        pred = -0.5 * g_dot + 0.5 * lam * damp_term
        return Step(dx, dtheta, S, pred, sols[1:])

    @staticmethod
    def _forward_twisted(A, E, B, Lfac, M) -> int:
        """`block_forward` from both ends at once (two threads): knots 0 … M−1 forward in time into knot
        M, knots N−1 … M+1 backward in time (coupling blocks transposed) into a scratch copy of knot M
        added afterwards; then knot M. Returns −1 or a failing knot."""
        N = A.shape[0]
        sink_A, sink_E = np.zeros_like(A[M]), np.zeros_like(E[M])
        bad, bad_rev = _in_two(lambda: block_forward_run(A, E, B, Lfac, 0, M, 1, A[M], E[M], False),
                               lambda: block_forward_run(A, E, B, Lfac, N - 1, N - 1 - M, -1, sink_A, sink_E,
                                                         False))
        if bad >= 0 or bad_rev >= 0:
            return bad if bad >= 0 else bad_rev
        A[M] += sink_A
        E[M] += sink_E
        return block_forward_run(A, E, B, Lfac, M, 1, 1, A[M], E[M], True)

    def _border(self, W, E, lo, hi):
        """Σ Z_kᵀ Z_k and Σ Z_kᵀ [z_k | e_k] over knots lo … hi−1 (Z_k = W[k, :, nx:nx+nθ]), in chunks."""
        nx = W.shape[1]
        nt = W.shape[2] - nx - 1
        P = E.shape[2]
        S = np.zeros((nt, nt))
        s = np.zeros((nt, 1 + P))
        for c0 in range(lo, hi, self.CHUNK):
            c1 = min(c0 + self.CHUNK, hi)
            Wc = W[c0:c1]
            Z = Wc[:, :, nx:nx + nt].reshape(-1, nt)
            S += Z.T @ Z
            s[:, 0] += Z.T @ Wc[:, :, -1].reshape(-1)
            if P:
                s[:, 1:] += Z.T @ E[c0:c1].reshape(-1, P)
        return S, s


def solve_structured(graph: LinearizedGraph, lam: float = 0.0) -> Step:
    """One O(N) solve with a fresh `StructuredSolver` (see there)."""
    return StructuredSolver().solve(graph, lam)


def solve_gtsam(graph: LinearizedGraph, lam: float = 0.0) -> Step:
    """The same step through GTSAM: JacobianFactors, ordering x_0 … x_{N-1}, θ, multifrontal QR.

    Damping is added as extra diagonal factors √(λ·diag H) (Marquardt), as GTSAM's LM does.
    """
    import gtsam

    from ..factors.keys import THETA, state

    N, nx, nt = graph.n_knots, graph.nx, graph.ntheta
    if graph.pair_theta:
        raise NotImplementedError("solve_gtsam: pair factors on (x_k, x_k+1, θ) are not supported")
    gfg = gtsam.GaussianFactorGraph()
    unit = {}

    def model(m):
        if m not in unit:
            unit[m] = gtsam.noiseModel.Unit.Create(m)
        return unit[m]

    for J, r in graph.knot:
        m = r.shape[1]
        for k in range(N):
            gfg.push_back(gtsam.JacobianFactor(state(k), J[k], -r[k], model(m)))
    for Jx, Jt, r in graph.knot_theta:
        m = r.shape[1]
        for k in range(N):
            gfg.push_back(gtsam.JacobianFactor(state(k), Jx[k], THETA, Jt[k], -r[k], model(m)))
    for J0, J1, r in graph.pair:
        m = r.shape[1]
        for k in range(N - 1):
            gfg.push_back(gtsam.JacobianFactor(state(k), J0[k], state(k + 1), J1[k], -r[k], model(m)))
    if graph.prior_w is not None:
        Jp = graph.prior_jacobian()
        gfg.push_back(gtsam.JacobianFactor(THETA, Jp, -graph.prior_r, model(Jp.shape[0])))
    if lam > 0:
        D, _, _, Htt, _, _ = graph.normal_equations()
        D = D.copy()
        floor = 1e-12 * max(float(np.max(np.abs(np.diagonal(D, axis1=1, axis2=2)))), 1.0)
        for k in range(N):
            d = np.sqrt(lam * np.maximum(np.diag(D[k]), floor))
            gfg.push_back(gtsam.JacobianFactor(state(k), np.diag(d), np.zeros(nx), model(nx)))
        d = np.sqrt(lam * np.maximum(np.diag(Htt), floor))
        gfg.push_back(gtsam.JacobianFactor(THETA, np.diag(d), np.zeros(nt), model(nt)))
    ordering = gtsam.Ordering()
    for k in range(N):
        ordering.push_back(state(k))
    ordering.push_back(THETA)
    sol = gfg.optimize(ordering)
    dx = np.array([sol.at(state(k)) for k in range(N)])
    dtheta = np.array(sol.at(THETA))
    return Step(dx, dtheta, np.full((nt, nt), np.nan), float("nan"))
