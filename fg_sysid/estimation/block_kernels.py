"""Compiled per-knot loops of the O(N) block elimination (`linear_solver.StructuredSolver`).

The block Cholesky of a block-tridiagonal normal matrix with a θ border is a sequence of small dense
operations per knot (nx ≈ 12–24 states, nθ ≈ 50–150 border columns), one knot after the other. Called
from Python, each knot costs four LAPACK/BLAS calls whose matrices are too small for BLAS to run at
speed (≈2 GFlop/s for 18 × 114 blocks, plus the call overhead); the same arithmetic written as plain
loops and compiled by Numba runs 3–5× faster (`benchmarks/bench_kernels.py`, docs/benchmarks.md). The
kernels hold no Python objects, release the GIL and are cached on disk after the first compilation.

Notation (one knot k of N): ``A[k] = [D̃_k | C̃_k | g̃_k]`` (nx × (nx + nθ + r), r right-hand sides),
``B[k]`` the coupling block of knots k and k+1, ``L[k]`` the lower Cholesky factor of D̃_k.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from scipy.linalg import blas, lapack

__all__ = ["blas_backward", "blas_forward", "block_backward", "block_backward_run", "block_forward",
           "block_forward_run"]


@njit(cache=True, nogil=True, fastmath=True)
def block_forward(A, E, B, L):  # pragma: no cover - compiled (covered through StructuredSolver)
    """Forward block elimination in time order, in place.

    Per knot: L_k = chol(D̃_k); W_k = L_k⁻¹ [C̃_k | g̃_k]; U_k = L_k⁻¹ B_k (written into A[k]'s first nx
    columns); then [D̃ | C̃ | g̃]_{k+1} −= U_kᵀ W_k. On return A[k] = [U_k | W_k] (the last knot's U is 0)
    and L[k] holds L_k (upper triangle zero). ``E`` (N, nx, P): further right-hand sides, eliminated
    alongside g (P may be 0). B is not changed.

    Returns −1, or the first knot whose block is not positive definite (the elimination stops there).
    """
    return block_forward_run(A, E, B, L, 0, A.shape[0], 1, A[0], E[0], True)


@njit(cache=True, nogil=True, fastmath=True)
def block_forward_run(A, E, B, L, first, count, step, sink_A, sink_E, last):  # pragma: no cover
    """`block_forward` over ``count`` knots k = first, first + step, … (``step`` = +1: forward in time, the
    coupling of k with k + 1 is B[k]; −1: backward in time, the coupling of k with k − 1 is B[k−1]ᵀ), in
    place on the full arrays (contiguous knots: a reversed view would cost the compiled loops their
    vectorization).

    With ``last`` False the run's final knot is not the chain's: its update −U_kᵀ [U_k | W_k] goes into
    ``sink_A`` (nx, nx + nθ + 1) and ``sink_E`` (nx, P) — the arrays of the knot after the run, or scratch
    added to it later (two runs meeting at one knot from both ends: `StructuredSolver`'s two threads).
    With ``last`` True the sinks are unused and the final knot's U is 0.

    Returns −1, or the first knot (its index in A) whose block is not positive definite.
    """
    nx = A.shape[1]
    ncol = A.shape[2]
    ne = E.shape[2]
    Bk = np.empty((nx, nx))
    for idx in range(count):
        k = first + idx * step
        Ak = A[k]
        Ek = E[k]
        Lk = L[k]
        # Cholesky (lower) of the leading nx × nx block, lower triangle read
        for j in range(nx):
            s = Ak[j, j]
            for m in range(j):
                s -= Lk[j, m] * Lk[j, m]
            if not (s > 0.0):  # also catches NaN
                return k
            d = np.sqrt(s)
            Lk[j, j] = d
            for i in range(j + 1, nx):
                t = Ak[i, j]
                for m in range(j):
                    t -= Lk[i, m] * Lk[j, m]
                Lk[i, j] = t / d
            for i in range(j):
                Lk[i, j] = 0.0
        # W_k = L_k⁻¹ [C̃_k | g̃_k] by forward substitution on the border and right-hand-side columns
        for i in range(nx):
            for m in range(i):
                c = Lk[i, m]
                for j in range(nx, ncol):
                    Ak[i, j] -= c * Ak[m, j]
            for m in range(i):
                c = Lk[i, m]
                for j in range(ne):
                    Ek[i, j] -= c * Ek[m, j]
            inv = 1.0 / Lk[i, i]
            for j in range(nx, ncol):
                Ak[i, j] *= inv
            for j in range(ne):
                Ek[i, j] *= inv
        if idx == count - 1 and last:
            for i in range(nx):
                for j in range(nx):
                    Ak[i, j] = 0.0
            break
        if step > 0:
            for i in range(nx):
                for j in range(nx):
                    Bk[i, j] = B[k, i, j]
        else:
            for i in range(nx):
                for j in range(nx):
                    Bk[i, j] = B[k - 1, j, i]
        for i in range(nx):  # U_k = L_k⁻¹ B_k
            for m in range(i):
                c = Lk[i, m]
                for j in range(nx):
                    Bk[i, j] -= c * Bk[m, j]
            inv = 1.0 / Lk[i, i]
            for j in range(nx):
                Bk[i, j] *= inv
        for i in range(nx):
            for j in range(nx):
                Ak[i, j] = Bk[i, j]
        if idx < count - 1:  # [D̃ | C̃ | g̃]_next −= U_kᵀ [U_k | W_k]
            A1 = A[k + step]
            E1 = E[k + step]
        else:
            A1 = sink_A
            E1 = sink_E
        for m in range(nx):
            for i in range(nx):
                c = Ak[m, i]
                if c != 0.0:
                    for j in range(ncol):
                        A1[i, j] -= c * Ak[m, j]
                    for j in range(ne):
                        E1[i, j] -= c * Ek[m, j]
    return -1


@njit(cache=True, nogil=True, fastmath=True)
def block_backward(W, L, c, dx):  # pragma: no cover - compiled (covered through StructuredSolver)
    """Back substitution δx_k = −L_k⁻ᵀ (c_k + U_k δx_{k+1}) for k = N−1 … 0 (δx_N = 0), written into dx.

    ``W[k, :, :nx]`` = U_k from `block_forward`, ``c`` (N, nx) the eliminated right-hand side with the
    θ step folded in (z_k + Z_k δθ)."""
    block_backward_run(W, L, c, dx, 0, W.shape[0], 1, np.zeros(W.shape[1]))


@njit(cache=True, nogil=True, fastmath=True)
def block_backward_run(W, L, c, dx, first, count, step, after):  # pragma: no cover - compiled
    """`block_backward` of a run eliminated by `block_forward_run` (same ``first``, ``count``, ``step``),
    its knots taken in the reverse order of their elimination; ``after`` = δx of the knot the run's final
    knot is coupled to (zeros for the chain's end)."""
    nx = W.shape[1]
    nxt = after.copy()
    rhs = np.empty(nx)
    for idx in range(count - 1, -1, -1):
        k = first + idx * step
        for i in range(nx):
            t = c[k, i]
            for j in range(nx):
                t += W[k, i, j] * nxt[j]
            rhs[i] = t
        for i in range(nx - 1, -1, -1):  # L_kᵀ y = rhs (upper triangular)
            t = rhs[i]
            for m in range(i + 1, nx):
                t -= L[k, m, i] * rhs[m]
            rhs[i] = t / L[k, i, i]
        for i in range(nx):
            nxt[i] = -rhs[i]
            dx[k, i] = nxt[i]


def blas_forward(A, B, L) -> int:
    """`block_forward` without right-hand sides beyond g, as the per-knot LAPACK/BLAS loop from Python of
    sessions 1–10 (potrf, trsm in place, gemm per knot): the reference the compiled kernel is checked and
    timed against (tests/test_linear_solver.py, benchmarks/bench_arm_iteration.py). Same in/out contract."""
    N, nx, _ = A.shape
    for k in range(N):
        Lk, info = lapack.dpotrf(A[k, :, :nx], lower=1, clean=1)
        if info != 0:
            return k
        L[k] = Lk
        blas.dtrsm(1.0, Lk, A[k].T, side=1, lower=1, trans_a=1, overwrite_b=1)
        if k < N - 1:
            blas.dtrsm(1.0, Lk, B[k].T, side=1, lower=1, trans_a=1, overwrite_b=1)
            A[k, :, :nx] = B[k]
            blas.dgemm(-1.0, A[k].T, B[k].T, beta=1.0, c=A[k + 1].T, trans_b=1, overwrite_c=1)
        else:
            A[k, :, :nx] = 0.0
    return -1


def blas_backward(W, L, c, dx) -> None:
    """`block_backward` as the per-knot BLAS loop (``dtrsv``) it replaced (reference)."""
    N, nx, _ = W.shape
    nxt = np.zeros(nx)
    for k in range(N - 1, -1, -1):
        nxt = -blas.dtrsv(L[k].T, c[k] + W[k, :, :nx] @ nxt, lower=0)
        dx[k] = nxt
