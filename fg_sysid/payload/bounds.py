"""Point estimate and three interval bounds for the end-effector + payload parameters θ_e.

All three start from the rows of `PayloadProblem`:  |Y θ_e + R θ_r − T| ≤ d,  θ_r ∈ θ_r0 ± r.

* `estimate`: weighted least squares in log-Cholesky coordinates η (θ_e = P(η) physically consistent by
  construction; paper 002 eq. 25, Rucker & Wensing 2022), rows weighted by 1/d (the noise bound).
* mode ``first-order`` (paper 002 Thm. 13 with the point Jacobian, eqs. 42–46): θ* ± Σ_k |∂θ*/∂m_k| r_k,
  ∂θ*/∂U = P_η (∇²J)⁻¹ P_ηᵀ YᵀΩ², with the residual-curvature term Σ_i (YᵀΩ²(YP−U))_i ∇²P_i in ∇²J.
  A linearization: no guarantee when θ*(m) is not affine over the box or the model is inexact.
* mode ``verified``: mean-value form of the least-squares map m ↦ θ_LS(m) = G(T − Rθ_r), G = (YᵀΩ²Y)⁻¹YᵀΩ²,
  which is affine in m (τ, θ_r), so its exact image is  θ_LS(m0) ± (|G| d + |G R| r).  G, G R and the centre
  are computed in ball arithmetic (python-flint ``arb``), so floating-point rounding of the bound itself is
  enclosed. Contains the truth whenever the model is exact (Y θ_e + R θ_r = T_true holds), i.e. the
  quadrature of the momentum integral is exact (paper 002 Thm. 11's assumption).
* mode ``lp``: the exact feasible set {θ_e : ∃θ_r in its box, |Yθ_e + Rθ_r − T| ≤ d} (one θ_r shared by
  all rows) projected on each coordinate: 20 linear programs (scipy's HiGHS). Optionally intersected with a
  prior box on θ_e and the linear necessary conditions of physical consistency (m ≥ 0, diagonal of the
  pseudo-inertia ≥ 0). An empty set raises `DataContradictBounds`. Rigorous up to HiGHS's feasibility
  tolerance (the bound is padded by it). One HiGHS model (highspy), warm-started between the objectives.

Derived (all modes): COM interval [m c]/[m] (valid when m > 0 over the box) and bounds on the principal
moments of the rotational inertia about the end-effector frame (Weyl: |λ_i(I) − λ_i(I_mid)| ≤ ‖rad I‖₂).
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field

import numpy as np
import pinocchio as pin
from scipy.optimize import least_squares

from ..parameterizations import LogCholesky
from ..robots.model import INERTIAL_SUFFIXES
from .problem import DataContradictBounds, PayloadError, PayloadProblem

BOUND_MODES = ("lp", "verified", "first-order")
_LC = LogCholesky()


# ---------------------------------------------------------------------------------- log-Cholesky 2nd order
def _pseudo_to_dynamic() -> np.ndarray:
    """Matrix L (10, 16) with π = L vec(J) for the 4×4 pseudo-inertia J (linear map, Pinocchio)."""
    L = np.zeros((10, 16))
    for a in range(4):
        for b in range(4):
            E = np.zeros((4, 4))
            E[a, b] += 0.5
            E[b, a] += 0.5
            L[:, 4 * a + b] = pin.PseudoInertia.FromMatrix(E).toDynamicParameters()
    return L


_L = _pseudo_to_dynamic()
# positions in U (upper triangular, pinocchio's LogCholeskyParameters order α, d1, d2, d3, s12, s23, s13,
# t1, t2, t3) of the off-diagonal parameters
_OFF = {4: (0, 1), 5: (1, 2), 6: (0, 2), 7: (0, 3), 8: (1, 3), 9: (2, 3)}


def _U_and_derivatives(eta):
    """U(η) and ∂U/∂η_a (10, 4, 4), J = U Uᵀ (see `fg_sysid.parameterizations.LogCholesky`)."""
    a = eta[0]
    V = np.eye(4)
    for i in range(3):
        V[i, i] = np.exp(eta[1 + i])
    for k, (i, j) in _OFF.items():
        V[i, j] = eta[k]
    U = np.exp(a) * V
    dU = np.zeros((10, 4, 4))
    dU[0] = U
    for i in range(3):
        dU[1 + i, i, i] = U[i, i]
    for k, (i, j) in _OFF.items():
        dU[k, i, j] = np.exp(a)
    return U, dU


def logcholesky_hessian_contraction(eta: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Σ_i g_i ∇²_η P_i(η) (10, 10), P the log-Cholesky map; paper 002 eq. 43's residual-curvature term."""
    U, dU = _U_and_derivatives(eta)
    G = (g @ _L).reshape(4, 4)
    G = 0.5 * (G + G.T)  # g·π = tr(G J) for symmetric J
    # d²(UUᵀ) = Uab Uᵀ + Ua Ubᵀ + Ub Uaᵀ + U Uabᵀ;  tr(G ·) of it:
    H = 2 * np.einsum("aij,ik,bkj->ab", dU, G, dU)  # tr(G(Ua Ubᵀ + Ub Uaᵀ)) = 2 tr(Uaᵀ G Ub)
    # second derivatives Uab: (α,α) = U; (α,x) = (x,α) = ∂U/∂x for x ≠ α; (d_i, d_i) = ∂U/∂d_i
    Uab = {(0, 0): U}
    for x in range(1, 10):
        Uab[(0, x)] = Uab[(x, 0)] = dU[x]
    for i in range(3):
        Uab[(1 + i, 1 + i)] = dU[1 + i]
    for (p, q), M in Uab.items():
        H[p, q] += 2 * np.trace(G @ U @ M.T)  # tr(G(M Uᵀ + U Mᵀ)) = 2 tr(G U Mᵀ)
    return H


# ---------------------------------------------------------------------------------- results
@dataclass
class PayloadBounds:
    """Estimate and interval of θ_e (Pinocchio order, about the end-effector frame; kg, kg·m, kg·m²)."""

    mode: str
    estimate: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    timings: dict = field(default_factory=dict)
    info: dict = field(default_factory=dict)

    @property
    def width(self) -> np.ndarray:
        return self.upper - self.lower

    def contains(self, truth) -> np.ndarray:
        truth = np.asarray(truth, float)
        return (self.lower <= truth) & (truth <= self.upper)

    def com_interval(self) -> tuple[np.ndarray, np.ndarray]:
        """COM [m] in the end-effector frame: [m c]/[m] (interval division); NaN if m may be ≤ 0."""
        mlo, mhi = self.lower[0], self.upper[0]
        if not mlo > 0:
            return np.full(3, np.nan), np.full(3, np.nan)
        c = np.stack([self.lower[1:4] / mlo, self.lower[1:4] / mhi, self.upper[1:4] / mlo,
                      self.upper[1:4] / mhi])
        return c.min(0), c.max(0)

    def principal_inertia_interval(self) -> tuple[np.ndarray, np.ndarray]:
        """Bounds on the sorted eigenvalues of the rotational inertia about the end-effector frame [kg·m²]."""
        def mat(x):
            xx, xy, yy, xz, yz, zz = x[4:]
            return np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])
        mid = mat(0.5 * (self.lower + self.upper))
        rad = mat(0.5 * (self.upper - self.lower))
        lam = np.linalg.eigvalsh(mid)
        r = np.linalg.norm(rad, 2) * (1 + 1e-12)
        return lam - r, lam + r

    def table(self, truth=None):
        import pandas as pd
        df = pd.DataFrame({"parameter": list(INERTIAL_SUFFIXES), "estimate": self.estimate,
                           "lower": self.lower, "upper": self.upper, "width": self.width})
        if truth is not None:
            df["truth"] = np.asarray(truth, float)
            df["contained"] = self.contains(truth)
        return df


# ---------------------------------------------------------------------------------- estimate
def _weights(prob: PayloadProblem) -> np.ndarray:
    """Row weights Ω ≈ 1/d, rounded to powers of two (so that scaling by them is exact in floating point)."""
    d = prob.d
    floor = max(float(np.median(d)) * 1e-3, 1e-300)
    return _pow2(1.0 / np.maximum(d, floor))


def _consistent(theta) -> bool:
    return bool(np.linalg.eigvalsh(pin.PseudoInertia.FromDynamicParameters(theta).toMatrix()).min() > 0)


def estimate(prob: PayloadProblem, eta0: np.ndarray | None = None):
    """Weighted LS in log-Cholesky coordinates (paper 002 eq. 25). Returns (θ*, η*, seconds).

    When the linear weighted LS solution is physically consistent (pseudo-inertia ≻ 0) it is the global
    minimizer and η* = P⁻¹(θ_LS) (paper 002 Cor. 17: P is a diffeomorphism onto the consistent set);
    otherwise the problem is solved in η (trust-region least squares, analytic Jacobian Y·∂P/∂η) from the
    previous η* or the projection of θ_LS.
    """
    tic = time.perf_counter()
    Y, U, w = prob.Y, prob.U0(), _weights(prob)
    Yw, Uw = Y * w[:, None], U * w
    theta_ls = np.linalg.lstsq(Yw, Uw, rcond=None)[0]
    if _consistent(theta_ls):
        return theta_ls, _LC.to_theta(theta_ls), time.perf_counter() - tic
    if eta0 is None:
        eta0 = _LC.to_theta(theta_ls)  # clamps onto the consistent set

    def fun(eta):
        return Yw @ _LC.to_physical(eta) - Uw

    def jac(eta):
        return Yw @ _LC.jacobian(eta)

    eta0 = np.clip(eta0, -30.0, 30.0)
    sol = least_squares(fun, eta0, jac=jac, method="trf", xtol=1e-12, ftol=1e-12, gtol=1e-12, max_nfev=200)
    if not np.all(np.isfinite(sol.fun)):
        raise PayloadError("the log-Cholesky least-squares estimate diverged (non-finite residual)")
    return _LC.to_physical(sol.x), sol.x, time.perf_counter() - tic


def estimate_joint(prob: PayloadProblem, prior_weight: float = 1.0) -> np.ndarray:
    """θ_e from a joint least squares over (θ_e, θ_r) with the θ_r box as a prior: rows weighted by ≈ 1/d,
    prior rows √λ (θ_r − θ_r0)/r (box half-width as the prior's scale; entries with r = 0 fixed). The data
    determine part of θ_r, which removes most of the bias that the paper's estimate (θ_r = θ_r0) carries
    when the true robot is off-nominal. A consistent result is returned as is; otherwise it is projected
    onto the consistent set (the log-Cholesky clamp of `LogCholesky.to_theta`)."""
    Y, R, T = prob.Y, prob.R, prob.T
    w = _weights(prob)
    r = prob.theta_r_radius
    free = r > 0
    sq = np.sqrt(prior_weight)
    A = np.vstack([np.hstack([Y * w[:, None], R[:, free] * w[:, None]]),
                   np.hstack([np.zeros((int(free.sum()), 10)), np.diag(sq / r[free])])])
    b = np.concatenate([(T - R[:, ~free] @ prob.theta_r0[~free]) * w, sq * prob.theta_r0[free] / r[free]])
    theta = np.linalg.lstsq(A, b, rcond=None)[0][:10]
    return theta if _consistent(theta) else _LC.to_physical(_LC.to_theta(theta))


# ---------------------------------------------------------------------------------- bound modes
def first_order_bounds(prob: PayloadProblem, theta, eta, curvature: bool = True) -> tuple[np.ndarray, dict]:
    """Half-width of paper 002's first-order bound (eqs. 42–46, point Jacobian)."""
    Y, U, w, d = prob.Y, prob.U0(), _weights(prob), prob.d
    w2 = w**2
    Peta = _LC.jacobian(eta)
    YPw = (Y * w2[:, None]).T  # (10, rows) = YᵀΩ²
    H = Peta.T @ (YPw @ Y) @ Peta
    if curvature:
        H = H + logcholesky_hessian_contraction(eta, YPw @ (Y @ theta - U))
    try:
        Ga = Peta @ np.linalg.solve(H, Peta.T @ YPw)  # ∂θ*/∂U (10, rows)
    except np.linalg.LinAlgError:
        raise PayloadError("first-order bound: the Hessian of eq. 43 is singular at the estimate (the "
                           "estimate is on the physical-consistency boundary); use --bounds lp or verified"
                           ) from None
    rad = np.abs(Ga) @ d + np.abs(Ga @ prob.R) @ prob.theta_r_radius
    return rad, {"hessian_cond": float(np.linalg.cond(H))}


def _arb_col(mid, rad=None):
    from flint import arb, arb_mat
    mid = np.asarray(mid, float)
    if rad is None:
        return arb_mat([[arb(float(m))] for m in mid])
    return arb_mat([[arb(float(m), float(r))] for m, r in zip(mid, rad, strict=True)])


def _arb_mat(x):
    from flint import arb_mat
    return arb_mat(np.asarray(x, float).tolist())


def _pow2(x: np.ndarray) -> np.ndarray:
    return 2.0 ** np.round(np.log2(x))


def verified_bounds(prob: PayloadProblem) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rigorous enclosure of the LS image (see module doc). Returns (centre, lower, upper).

    Row weights Ω and column scales S are powers of two, so B = ΩYS⁻¹, ΩT and ΩR are exact in floating
    point; G_B = (BᵀB)⁻¹Bᵀ is enclosed in ball arithmetic, G_B B = I, and θ = S⁻¹ G_B (ΩT_true − ΩR θ_r)
    for the true (T, θ_r) when the model is exact. T_true ∈ T ± d and θ_r ∈ θ_r0 ± r are balls, and the
    ball products enclose the image.
    """
    from flint import ctx
    old = ctx.prec
    ctx.prec = 80
    try:
        Y, R, d = prob.Y, prob.R, prob.d
        w = _weights(prob)
        s = _pow2(np.maximum(np.linalg.norm(Y * w[:, None], axis=0), 1e-300))
        B = Y * w[:, None] / s
        Ba = _arb_mat(B)
        Bt = Ba.transpose()
        G = (Bt * Ba).inv() * Bt  # (10, rows)
        xT = _arb_col(prob.T * w, d * w * (1 + 1e-12))
        xr = _arb_col(prob.theta_r0, prob.theta_r_radius * (1 + 1e-12))
        th = G * xT - (G * _arb_mat(R * w[:, None])) * xr
        lo = np.array([float(th[i, 0].lower()) for i in range(10)])
        hi = np.array([float(th[i, 0].upper()) for i in range(10)])
        mid = np.array([float(th[i, 0].mid()) for i in range(10)])
        # arb -> float conversion rounds to nearest: widen by one ulp outward, then undo the power-of-2 scale
        return mid / s, np.nextafter(lo, -np.inf) / s, np.nextafter(hi, np.inf) / s
    finally:
        ctx.prec = old


def _lp_system(prob: PayloadProblem, box=None, consistency: bool = True):
    """Scaled two-sided rows ``lo ≤ A x ≤ hi`` and column bounds for x = (θ_e·s_e, θ_r·s_r)."""
    Y, R, T, d = prob.Y, prob.R, prob.T, prob.d
    nr = R.shape[1]
    wr = _weights(prob)  # rows scaled by 1/d and columns by their norms (HiGHS tolerances are absolute)
    se = np.maximum(np.linalg.norm(Y * wr[:, None], axis=0), 1e-300)
    sr = np.maximum(np.linalg.norm(R * wr[:, None], axis=0), 1e-300)
    A = np.hstack([Y * wr[:, None] / se, R * wr[:, None] / sr])
    row_lo, row_hi = (T - d) * wr, (T + d) * wr
    col_lo = np.concatenate([np.full(10, -np.inf), (prob.theta_r0 - prob.theta_r_radius) * sr])
    col_hi = np.concatenate([np.full(10, np.inf), (prob.theta_r0 + prob.theta_r_radius) * sr])
    if box is not None:
        col_lo[:10] = np.asarray(box[0], float) * se
        col_hi[:10] = np.asarray(box[1], float) * se
    if consistency:
        # m ≥ 0 and the diagonal of Σ = tr(I)/2·1 − I ≥ 0 (π order m, mc, Ixx, Ixy, Iyy, Ixz, Iyz, Izz):
        # Ixx − Iyy − Izz ≤ 0, …
        C = np.zeros((3, 10 + nr))
        for k, row in enumerate(((1, -1, -1), (-1, 1, -1), (-1, -1, 1))):
            C[k, [4, 6, 9]] = row
        C[:, :10] /= se
        A = np.vstack([A, C])
        row_lo = np.concatenate([row_lo, np.full(3, -np.inf)])
        row_hi = np.concatenate([row_hi, np.zeros(3)])
        col_lo[0] = max(col_lo[0], 0.0)
    return A, row_lo, row_hi, col_lo, col_hi, se


_CONTRADICT = ("the data contradict the bounds: no end-effector parameters are consistent with the log "
               "under the torque bound and the robot box ({n} windows); widen --tau-bound or --robot-bound, "
               "or check the payload box and the robot model")


_HIGHS_QUIET = False


def _new_highs():
    """A ``highspy.Highs`` instance; the C++ banner HiGHS prints on its first construction in a process
    goes to /dev/null instead of our stdout (CLI output and tables stay clean)."""
    global _HIGHS_QUIET
    import highspy

    if _HIGHS_QUIET:
        return highspy.Highs()
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            h = highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
    _HIGHS_QUIET = True
    return h


def _highs(A, row_lo, row_hi, col_lo, col_hi, tol):
    import highspy
    from scipy.sparse import csc_matrix

    h = _new_highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("primal_feasibility_tolerance", tol)
    h.setOptionValue("dual_feasibility_tolerance", tol)
    inf = highspy.kHighsInf
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = A.shape[1], A.shape[0]
    lp.col_cost_ = np.zeros(A.shape[1])
    lp.col_lower_ = np.where(np.isfinite(col_lo), col_lo, -inf)
    lp.col_upper_ = np.where(np.isfinite(col_hi), col_hi, inf)
    lp.row_lower_ = np.where(np.isfinite(row_lo), row_lo, -inf)
    lp.row_upper_ = np.where(np.isfinite(row_hi), row_hi, inf)
    M = csc_matrix(A)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = M.indptr
    lp.a_matrix_.index_ = M.indices
    lp.a_matrix_.value_ = M.data
    h.passModel(lp)
    return h


def lp_bounds(prob: PayloadProblem, box: tuple | None = None, consistency: bool = True,
              tol: float = 1e-8, method: str = "rows") -> tuple[np.ndarray, np.ndarray, dict]:
    """min/max of each θ_e over the feasible polytope (one shared θ_r); see module doc.

    ``method="rows"`` (default): row generation (a cutting-plane / constraint-generation scheme): each LP
    is solved on a working subset of the rows; the rows the optimum violates (by more than ``tol``) are
    added and it is re-solved (warm start) until the optimum satisfies every row. A subset of the rows
    is a relaxation, so each of its minima is ≤ the full LP's (an outer bound at every step); at the end
    it is the full LP's optimum. The working set stays small (a vertex needs ≤ 10 + n_r active rows),
    so the cost hardly grows with the number of rows — short windows (many rows) cost about what long
    ones do. The θ_e columns get a finite artificial box (4× the float least-squares image, which contains
    the feasible set); if an optimum touches it, the full LP is solved instead (`method="full"`).
    ``method="full"``: all rows in one HiGHS model; the 20 objectives in turn, each warm-started.
    """
    if method not in ("rows", "full"):
        raise PayloadError(f"unknown LP method {method!r} (rows or full)")
    A, row_lo, row_hi, col_lo, col_hi, se = _lp_system(prob, box, consistency)
    tic = time.perf_counter()
    out = None
    if method == "rows":
        out = _lp_rows(prob, A, row_lo, row_hi, col_lo, col_hi, se, tol, n_cons=3 if consistency else 0)
    if out is None:
        lo, hi = _lp_full(prob, A, row_lo, row_hi, col_lo, col_hi, se, tol)
        info = {"lp_method": "full", "lp_rows_used": int(A.shape[0])}
    else:
        lo, hi, info = out
    # pad by the solver's feasibility tolerance mapped back through the scaling (conservative)
    pad = tol * (np.abs(lo) + np.abs(hi)) + 10 * tol * np.sqrt(A.shape[0]) / se
    info["lp_seconds"] = time.perf_counter() - tic
    return lo - pad, hi + pad, info


def _lp_status_check(h, prob, i):
    import highspy

    st = highspy.HighsModelStatus
    status = h.getModelStatus()
    if status == st.kInfeasible:
        raise DataContradictBounds(_CONTRADICT.format(n=prob.n_windows))
    if status in (st.kUnbounded, st.kUnboundedOrInfeasible):
        raise PayloadError(f"the payload parameter {INERTIAL_SUFFIXES[i]!r} is unbounded by the "
                           "data: excite the end effector more or give a payload box")
    if status != st.kOptimal:
        raise PayloadError(f"LP for {INERTIAL_SUFFIXES[i]!r} failed: {h.modelStatusToString(status)}")


def _lp_full(prob, A, row_lo, row_hi, col_lo, col_hi, se, tol):
    h = _highs(A, row_lo, row_hi, col_lo, col_hi, tol)
    lo, hi = np.empty(10), np.empty(10)
    for i in range(10):
        for sign, out in ((1.0, lo), (-1.0, hi)):
            h.changeColCost(i, sign)
            h.run()
            _lp_status_check(h, prob, i)
            out[i] = sign * h.getInfo().objective_function_value / se[i]
        h.changeColCost(i, 0.0)
    return lo, hi


def _ls_image_box(prob: PayloadProblem, se: np.ndarray):
    """Float enclosure (scaled θ_e coordinates) of the least-squares image of the rows' box, widened 4×:
    only a finite start box for row generation, whose activity is checked (not a bound by itself)."""
    w = _weights(prob)
    Yw = prob.Y * w[:, None]
    G = np.linalg.pinv(Yw)
    c = G @ ((prob.T - prob.R @ prob.theta_r0) * w)
    rad = np.abs(G) @ (prob.d * w) + np.abs(G @ (prob.R * w[:, None])) @ prob.theta_r_radius
    rad = 4 * rad + 1e-9 * (np.abs(c) + 1)
    return (c - rad) * se, (c + rad) * se


def _lp_rows(prob, A, row_lo, row_hi, col_lo, col_hi, se, tol, n_cons):
    """Row generation for `lp_bounds`; None when the artificial box is touched or a sub-LP is not solved
    to optimality (the caller then solves the full LP)."""
    import highspy

    n_rows = A.shape[0]
    n_data = n_rows - n_cons
    work = np.zeros(n_rows, bool)
    work[:n_data:max(n_data // 200, 1)] = True
    work[n_data:] = True  # the consistency rows
    order = list(np.flatnonzero(work))  # rows of the sub-LP, in the order they were added
    art_lo, art_hi = _ls_image_box(prob, se)
    clo, chi = col_lo.copy(), col_hi.copy()
    clo[:10] = np.maximum(col_lo[:10], art_lo)
    chi[:10] = np.minimum(col_hi[:10], art_hi)
    art_active_lo = art_lo > col_lo[:10]  # where the artificial box is tighter than the real one
    art_active_hi = art_hi < col_hi[:10]
    batch = max(20, n_rows // 100)
    lo, hi = np.empty(10), np.empty(10)
    rounds = 0
    basis = None
    # a fresh HiGHS model per round, warm-started from the previous basis (new rows basic); an iteration
    # cap guards against cycling
    for i in range(10):
        for sign, out in ((1.0, lo), (-1.0, hi)):
            while True:
                h = _highs(A[order], row_lo[order], row_hi[order], clo, chi, tol)
                h.setOptionValue("simplex_iteration_limit", 20000)
                cost = np.zeros(A.shape[1])
                cost[i] = sign
                h.changeColsCost(A.shape[1], np.arange(A.shape[1], dtype=np.int32), cost)
                if basis is not None:
                    b = highspy.HighsBasis()
                    b.col_status = basis[0]
                    b.row_status = basis[1] + [highspy.HighsBasisStatus.kBasic] * (len(order) - len(basis[1]))
                    b.valid = True
                    h.setBasis(b)
                h.run()
                try:
                    _lp_status_check(h, prob, i)
                except PayloadError:  # infeasible / unbounded / failed: the full LP decides (and says why)
                    return None
                hb = h.getBasis()
                basis = (list(hb.col_status), list(hb.row_status))
                x = np.asarray(h.getSolution().col_value)
                r = A @ x
                viol = np.maximum(r - row_hi, row_lo - r)
                viol[work] = -np.inf
                bad = np.flatnonzero(viol > tol)
                if not bad.size:
                    break
                rounds += 1
                add = bad[np.argsort(-viol[bad])[:batch]]
                work[add] = True
                order.extend(add.tolist())
            xe = x[:10]
            margin = 1e-6 * (art_hi - art_lo)
            if (np.any(art_active_lo & (xe <= art_lo + margin))
                    or np.any(art_active_hi & (xe >= art_hi - margin))):
                return None  # the artificial box binds: not an optimum of the real LP
            out[i] = sign * h.getInfo().objective_function_value / se[i]
    return lo, hi, {"lp_method": "rows", "lp_rows_used": int(work.sum()), "lp_rounds": rounds}


def feasibility_check(prob: PayloadProblem, box=None, consistency: bool = True) -> None:
    """Raise `DataContradictBounds` when no (θ_e, θ_r) satisfies all rows (one LP)."""
    import highspy

    h = _highs(*_lp_system(prob, box, consistency)[:5], tol=1e-8)
    h.run()
    if h.getModelStatus() == highspy.HighsModelStatus.kInfeasible:
        raise DataContradictBounds(_CONTRADICT.format(n=prob.n_windows))


def compute_bounds(prob: PayloadProblem, mode: str = "lp", box=None, eta0=None, consistency: bool = True,
                   check: bool = True) -> tuple[PayloadBounds, np.ndarray]:
    """Estimate + bound of one mode. Returns (PayloadBounds, η*) (η* for warm starts)."""
    if mode not in BOUND_MODES:
        raise PayloadError(f"unknown bound mode {mode!r} (use {', '.join(BOUND_MODES)})")
    prob.check_excitation()
    timings = {}
    prob.theta_e_abs = None  # the estimate is weighted by the noise bound only
    theta, eta, timings["estimate_s"] = estimate(prob, eta0=eta0)
    # quadrature margin of the rows (docs/payload.md, assumption 4): |θ_e| ≤ 2|θ̂_e|, or the box if larger
    te_abs = 2 * np.abs(theta)
    if box is not None:
        te_abs = np.maximum(te_abs, np.maximum(np.abs(box[0]), np.abs(box[1])))
    prob.theta_e_abs = te_abs
    tic = time.perf_counter()
    info = {"cond_Y": float(np.linalg.cond(prob.Y)), "windows": prob.n_windows}
    if mode == "lp":
        lo, hi, extra = lp_bounds(prob, box=box, consistency=consistency)
        info.update(extra)
    else:
        if check:
            feasibility_check(prob, box, consistency)
        if mode == "verified":
            _, lo, hi = verified_bounds(prob)
        else:
            rad, extra = first_order_bounds(prob, theta, eta)
            info.update(extra)
            lo, hi = theta - rad, theta + rad
        if box is not None:
            lo, hi = np.maximum(lo, box[0]), np.minimum(hi, box[1])
            if np.any(lo > hi):
                raise DataContradictBounds("the data contradict the bounds: the interval lies outside the "
                                           "payload box")
    timings["bound_s"] = time.perf_counter() - tic
    if mode != "first-order":  # first-order keeps the paper's θ* (the centre its radius belongs to)
        tic = time.perf_counter()
        theta = estimate_joint(prob)
        timings["estimate_s"] += time.perf_counter() - tic
    return PayloadBounds(mode, theta, lo, hi, timings, info), eta
