"""Noise balance of a solved problem (issue 9 item 4): whitened χ² per term against its redundancy.

At the MAP solution of a linear(ized) Gaussian problem with whitened Jacobian A (m rows) the residual of
term i has expectation

    E[χ²_i] = E[‖r_i‖²] = m_i − tr(H_ii),        H = A (AᵀA)⁻¹ Aᵀ  (the hat matrix),

so r_i = m_i − tr(H_ii) is the term's **redundancy** (its rows minus the unknowns it absorbs; Σ_i r_i =
m − n). ``χ²_i / r_i`` ≈ 1 when the term's σ is right; < 1 means σ too large (the term is over-weighted
relative to what its data show... i.e. its residuals are smaller than its stated noise), > 1 too small.
This is the statistic of Helmert's variance-component estimation (Förstner 1979; Koch, *Parameter
Estimation and Hypothesis Testing in Linear Models*, Sec. 3.6): σ_i² ← σ_i² · χ²_i / r_i.

tr(H_ii) is estimated with Hutchinson's trace estimator: for a Rademacher vector z over all rows,
−zᵢᵀ (A δ)_i with δ = −(AᵀA)⁻¹Aᵀz (O(N) solves of the problem's own structure,
`linear_solver.StructuredSolver`; every probe is a right-hand side of one factorization) has
expectation tr(H_ii) (cross-term products have zero mean).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .linear_solver import LinearizedGraph, StructuredSolver
from .problem import Evaluation, Problem

__all__ = ["balanced_noise", "term_balance"]


def term_balance(problem: Problem, x, theta, probes: int = 4, seed: int = 0,
                 columns: bool = False, solver: StructuredSolver | None = None) -> pd.DataFrame:
    """χ² per term at (x, θ), its redundancy and χ²/redundancy.

    Args:
        problem: the solved `Problem` (measurement / prior terms on knots, pairs and θ; constraint and
            sparse pair-θ terms are not supported).
        x, theta: the solution (knot states and θ).
        probes: Hutchinson probes (right-hand sides of one O(N) factorization); the trace estimate's
            relative error is about sqrt(2/probes)·‖H_ii‖_F / tr(H_ii), small for terms with many rows.
        seed: random seed of the probes.
        columns: also one row per residual column (e.g. per joint) of knot and pair terms, named
            ``<term>[<column>]``.
        solver: a `StructuredSolver` to reuse (an estimator's own: its work arrays of hundreds of MB are
            then not allocated and faulted in again).

    Returns:
        DataFrame with ``term``, ``rows`` (rows with a non-zero Jacobian), ``chi2`` (Σ whitened r²),
        ``chi2_per_row``, ``redundancy`` (rows − tr H_ii), ``redundancy_se`` (standard error of the
        Hutchinson estimate over the probes: a redundancy within a few SE of 0 makes χ²/redundancy
        meaningless) and ``chi2_per_dof`` (= χ²/redundancy).
    """
    ev = Evaluation(problem, x, theta, True)
    N = x[1].shape[0]
    parts = []  # (name, touches, whitened Residual, active rows mask)
    for term in problem.terms:
        if term.role == "constraint" or term.touches == "pair_theta":
            raise ValueError(f"term {term.name!r}: constraint and pair-θ terms are not supported")
        wb = problem.whitened(term, term.evaluate(ev, True), ev)
        J = [j for j in (wb.J, wb.J1, wb.Jt) if j is not None]
        active = np.zeros(np.shape(wb.r), bool)
        for j in J:
            active |= np.any(j != 0, axis=-1)
        parts.append((term.name, term.touches, wb, active))
    rng = np.random.default_rng(seed)
    solver = StructuredSolver() if solver is None else solver
    P = max(int(probes), 1)
    traces = [[] for _ in parts]  # per term: per-probe per-row Hutchinson samples
    # every probe has the same Jacobian: one factorization, the probes as right-hand sides
    zss = [[np.where(p[3], rng.choice((-1.0, 1.0), size=np.shape(p[2].r)), 0.0) for p in parts]
           for _ in range(P)]
    graphs = [_graph(problem, N, parts, zs) for zs in zss]
    step = solver.solve(graphs[0], 0.0, rhs=[g.gradient() for g in graphs[1:]])
    for zs, (dx, dtheta) in zip(zss, [(step.dx, step.dtheta)] + step.extra, strict=True):
        for i, (p, z) in enumerate(zip(parts, zs, strict=True)):
            traces[i].append(-z * _apply(p[1], p[2], dx, dtheta))
    rows = []
    for (name, touches, wb, active), samples in zip(parts, traces, strict=True):
        samples = np.asarray(samples)  # (P, *r.shape)
        r2 = np.asarray(wb.r, float) ** 2
        rows.append(_row(name, active, r2, samples))
        if columns and touches in ("knot", "pair"):
            for c in range(r2.shape[1]):
                if np.any(active[:, c]):
                    rows.append(_row(f"{name}[{c}]", active[:, c], r2[:, c], samples[:, :, c]))
    return pd.DataFrame(rows)


def _row(name, active, r2, samples) -> dict:
    m = int(np.count_nonzero(active))
    chi2 = float(np.sum(r2[active]))
    per_probe = np.array([float(np.sum(s[active])) for s in samples])
    red = m - float(per_probe.mean())
    se = float(per_probe.std(ddof=1) / np.sqrt(per_probe.size)) if per_probe.size > 1 else float("nan")
    return {"term": name, "rows": m, "chi2": chi2, "chi2_per_row": chi2 / max(m, 1), "redundancy": red,
            "redundancy_se": se, "chi2_per_dof": chi2 / red if red > 0 else float("nan")}


def _graph(problem: Problem, N: int, parts, zs) -> LinearizedGraph:
    """The whitened Jacobians of ``parts`` with the probe vectors ``zs`` as residuals."""
    g = LinearizedGraph(N, problem.nx, problem.ntheta)
    tJ, tr = [], []
    for (_, touches, wb, _), z in zip(parts, zs, strict=True):
        if touches == "theta":
            tJ.append(np.asarray(wb.Jt, float))
            tr.append(z)
        elif touches == "pair":
            g.pair.append((wb.J, wb.J1, z))
        elif wb.Jt is not None:
            g.knot_theta.append((wb.J, wb.Jt, z))
        else:
            g.knot.append((wb.J, z))
    if tJ:
        g.prior_w, g.prior_r = np.vstack(tJ), np.concatenate(tr)
    else:
        g.prior_w, g.prior_r = np.zeros((0, problem.ntheta)), np.zeros(0)
    return g


def _apply(touches, wb, dx, dtheta) -> np.ndarray:
    """A_i δ: the term's whitened Jacobian times the step (dx (N, nx), dθ)."""
    if touches == "theta":
        return np.asarray(wb.Jt, float) @ dtheta
    if touches == "pair":
        return (np.einsum("nmx,nx->nm", wb.J, dx[:-1]) + np.einsum("nmx,nx->nm", wb.J1, dx[1:]))
    out = np.einsum("nmx,nx->nm", wb.J, dx)
    if wb.Jt is not None:
        out = out + wb.Jt @ dtheta
    return out


#: term name -> the NoiseLevels fields it scales (one Helmert factor per term; `balanced_noise`)
_TERM_FIELDS = {"encoders": ("q",), "velocities": ("v",), "inverse_dynamics": ("tau",),
                "integration": ("process_q", "process_v")}


def balanced_noise(smoother, probes: int = 4, min_se: float = 5.0, seed: int = 0):
    """One step of Helmert's variance-component estimation on a fitted `JointSmoother`.

    Each measurement term's σ (all joints together) is multiplied by sqrt(χ²_i / r_i) from `term_balance`
    at the smoother's solution, when the redundancy r_i is at least ``min_se`` standard errors of its
    Hutchinson estimate (otherwise the term keeps its σ). Returns ``(noise, factors)``: a new
    `NoiseLevels` and {term: factor or None}. Refit with ``sigma_q=noise.q, sigma_v=noise.v,
    sigma_tau=noise.tau, sigma_process=noise.process_v / h`` (h = median knot spacing [s]).
    """
    from dataclasses import replace

    df = term_balance(smoother.problem_, smoother.states_, smoother.result_.theta, probes=probes,
                      seed=seed).set_index("term")
    noise = replace(smoother.noise_, source=dict(smoother.noise_.source))
    factors = {}
    for term, fields in _TERM_FIELDS.items():
        if term not in df.index:
            continue
        row = df.loc[term]
        ok = row["redundancy"] > min_se * row["redundancy_se"] and row["redundancy"] > 0
        f = float(np.sqrt(row["chi2"] / row["redundancy"])) if ok else None
        factors[term] = f
        if f is None:
            continue
        for name in fields:
            val = getattr(noise, name)
            if val is not None:
                setattr(noise, name, np.asarray(val, float) * f)
        noise.source[fields[0]] = f"Helmert variance component (x{f:.3g})"
    return noise, factors
