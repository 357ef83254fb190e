"""Friction structure from the data: choose the friction law by blocked cross-validation (issue 9 item 3).

`JointSmoother(friction="auto")` (`fg-sysid identify --friction auto`) fits each candidate law
(`CANDIDATES`: ``coulomb-viscous-scale`` and ``stribeck6``, `fg_sysid.parameterizations`) by a fast
classical regression on the Savitzky–Golay (SG) states of the training log and keeps the more complex
law only when its blocked cross-validation score is lower by at least `MARGIN` (relative) — or, where the
regression's velocities are too noisy to resolve a Stribeck peak (`BLIND_VELOCITY`, session 14), unless it
is worse by that margin (`decide`). Only the
training log is used; the smoother then fits the chosen law (with the full state trajectory) — for the
Coulomb–viscous family its lead form `LEAD_LAW` (``fc·tanh((v + T a)/vs) + fv·v``, one lead T, prior 0),
since whether the friction flips ahead of the velocity shows only in the smoother's joint states
(session 10: MuJoCo's soft friction constraint, docs/friction-selection.md).

The regression (per law) is the classical inverse-dynamics model of `baseline.LeastSquaresSG` with the
law's friction columns, on the SG signals of the window that `LeastSquaresSG`'s own blocked CV chose::

    τ_j = Y_j(q, v, a) π + A_j a_j + Σ_l c_jl φ_l(v_j; s_j)        [N·m], v [rad/s], a [rad/s²]

``φ`` are the law's basis functions for fixed shape parameters ``s_j`` (variable projection: every law is
linear in its levels once its velocity scales are fixed):

* ``coulomb-viscous-scale``: ``φ = (tanh(v/vs), v)``, shape ``vs`` [rad/s] (``fc``, ``fv``);
* ``stribeck6`` (paper 004 eq. 56, sign corrected, see `Stribeck6`): ``φ = (tanh(g1 v) − tanh(g2 v),
  tanh(g4 v), v)`` with ``g1 = g4 = 1/vs`` and ``g2 = 1/v_st`` [s/rad] (``g0``, ``g3``, ``g5``).

Each joint's shape comes from a grid (`VS_GRID`, `VST_GRID`) by coordinate descent over the joints on the
CV score itself. The CV (as `LeastSquaresSG`'s): K contiguous blocks of the trimmed rows; fit on the
other blocks less a guard gap of half an SG window on each side (the filtered effort there saw the
held-out samples), score against the **raw** effort of the held-out block; per-joint RMSE normalised by
the joint's effort RMS, root mean square over joints, mean over folds. Everything is accumulated as
per-segment Gram matrices, so a candidate costs a few small solves, not a pass over the log.

The Stribeck regression at the chosen shapes also gives `JointSmoother(friction="stribeck6")` its
starting friction parameters (`stribeck_start`); without it the smoother would start from the prior
(``g0 = 0.2 fc``, widths 0.01 / 0.1 rad/s).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from scipy.signal import savgol_coeffs

from ..datasets.log import Log
from ..parameterizations import Stribeck6
from ..robots import RobotModel
from .baseline import _prepare, _sg, nominal_parameters, stacked_regressor
from .noise import highfreq_noise_std

__all__ = ["BLIND_VELOCITY", "CANDIDATES", "LEAD_LAW", "MARGIN", "VS_GRID", "VST_GRID", "FrictionSelection",
           "decide", "select_friction", "stribeck_start", "fit_auto"]

#: candidate laws, simplest first
CANDIDATES = ("coulomb-viscous-scale", "stribeck6")
#: what ``friction="auto"`` fits when the regression keeps the Coulomb–viscous family (issue 9, session 10):
#: the same law of the predicted velocity v + T·a, one T for all joints (`CoulombViscousLead`). The
#: SG regression cannot see T (the stick phases are ~2 % of the samples and its states are filtered), the
#: smoother's joint states can; T = 0 is the prior mean, so the law reduces to coulomb-viscous-scale
LEAD_LAW = "coulomb-viscous-lead"
#: the more complex law is chosen when its CV score is lower in every fold and on average by at least this
#: fraction (the score includes the effort noise, so a friction improvement shows as a small fraction:
#: 0.3-0.9 % per fold on the 20 s Z1/Panda Stribeck logs at σ = 0.01, |gain| < 0.1 % for the other truths)
MARGIN = 0.002
#: velocities [rad/s] the regression must resolve to see a Stribeck peak: `Stribeck6`'s prior peak width
#: 1/G1 = 0.01 rad/s. When the noise std of the regression's filtered velocities (median measured joint,
#: `FrictionSelection.velocity_noise`) exceeds it, the friction basis is evaluated at velocities blurred
#: beyond the features the laws differ by and the CV score cannot tell them apart (20 s / 1 kHz arm logs at
#: σ_v = 0.1 rad/s: 0.021 rad/s, stribeck6 "gains" −0.006 … −0.015 % on the Stribeck truth and on the
#: others alike; at σ_v = 0.01: 0.0021 rad/s, +0.37 / +0.70 % on the Stribeck truth only). Then
#: ``stribeck6`` — which nests the tanh law (g0 → 0) — is chosen unless the CV finds it worse by `MARGIN`
#: (docs/friction-selection.md, *Blurred velocities*)
BLIND_VELOCITY = 1.0 / Stribeck6.G1_PRIOR
#: tanh widths vs [rad/s] tried per joint (Coulomb sharpness; for stribeck6 g1 = g4 = 1/vs)
VS_GRID = (0.002, 0.005, 0.01, 0.02, 0.05, 0.1)
#: Stribeck decay velocities v_st [rad/s] tried per joint (g2 = 1/v_st), only with v_st > 2 vs
VST_GRID = (0.03, 0.1, 0.3)
#: smoothing window of logged velocities [s] for the friction basis (their SG, not q's derivative)
V_WINDOW_S = 0.05
#: ridge toward the URDF nominal (zero for friction levels) in column-scaled units, as `LeastSquaresSG`
RIDGE = 1e-6


def _joint_order(log: Log, robot: RobotModel) -> list[int]:
    names = list(log.joint_names)
    return [names.index(j) for j in robot.joint_names]


def _basis(law: str, v: np.ndarray, shape: tuple) -> np.ndarray:
    """(n, k) friction basis of ``law`` at velocities ``v`` (n,) [rad/s] for shape parameters ``shape``."""
    if law == "coulomb-viscous-scale":
        (vs,) = shape
        return np.column_stack([np.tanh(v / vs), v])
    vs, vst = shape
    t1 = np.tanh(v / vs)
    return np.column_stack([t1 - np.tanh(v / vst), t1, v])


def _shapes(law: str) -> list[tuple]:
    if law == "coulomb-viscous-scale":
        return [(vs,) for vs in VS_GRID]
    return [(vs, vst) for vs in VS_GRID for vst in VST_GRID if vst > 2 * vs]


@dataclass
class FrictionSelection:
    """What `select_friction` chose and why (summary.json ``friction_selection``)."""

    chosen: str
    scores: dict  # law -> mean blocked-CV score (normalised held-out RMSE, see the module docstring)
    fold_scores: dict  # law -> per-fold scores
    shapes: dict  # law -> {joint: shape parameters [rad/s]}
    levels: dict  # law -> {joint: linear coefficients at those shapes}
    margin: float = MARGIN
    folds: int = 5
    window_s: float = float("nan")
    polyorder: int = 3
    rows: int = 0
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    reason: str = ""
    #: joint -> noise std [rad/s] of the regression's filtered velocities (`_Regression.v_noise`)
    velocity_noise: dict = field(default_factory=dict)
    #: law -> (inertial (nb, 10), armature (nj,)) of the regression on every row
    _base: dict = field(default_factory=dict, repr=False)

    @property
    def median_velocity_noise(self) -> float:
        """The median measured joint's `velocity_noise` [rad/s] (0 without joints)."""
        return float(np.median(list(self.velocity_noise.values()))) if self.velocity_noise else 0.0

    @property
    def blurred(self) -> bool:
        """The median joint's velocity noise exceeds `BLIND_VELOCITY`: the CV cannot see a Stribeck peak."""
        return self.median_velocity_noise > BLIND_VELOCITY

    def as_dict(self) -> dict:
        return {"chosen": self.chosen, "candidates": list(self.scores),
                "cv_scores": {k: float(v) for k, v in self.scores.items()},
                "cv_fold_scores": {k: [float(x) for x in v] for k, v in self.fold_scores.items()},
                "relative_gain_per_fold": (None if len(self.scores) < 2 else [
                    float(1 - b / a) for a, b in zip(*self.fold_scores.values(), strict=True)]),
                "margin": self.margin, "folds": self.folds, "sg_window_s": self.window_s,
                "sg_polyorder": self.polyorder, "rows": self.rows,
                "shapes": {k: {j: [float(x) for x in s] for j, s in v.items()}
                           for k, v in self.shapes.items()},
                "velocity_noise": {j: float(x) for j, x in self.velocity_noise.items()},
                "blurred_velocities": self.blurred, "blind_velocity": BLIND_VELOCITY,
                "seconds": self.seconds, "cpu_seconds": self.cpu_seconds, "reason": self.reason}


class _Regression:
    """Per-segment Gram sums of the classical regression (module docstring) for one SG filter."""

    def __init__(self, robot: RobotModel, log: Log, window: int, polyorder: int, folds: int,
                 max_rows: int, filtered: bool = False):
        prep = _prepare(log, robot)
        n_s = prep.q.shape[0]
        h = window // 2
        lo, hi = h, n_s - h
        if hi - lo < 20 * folds:
            raise ValueError(f"log has {n_s} samples: too few for {folds}-fold CV with a {window}-sample "
                             "SG window")
        stride = max(1, int(np.ceil((hi - lo) / max_rows)))
        rows = np.arange(lo, hi, stride)
        self.n_rows = rows.size
        qf = _sg(prep.q, window, polyorder, 0, prep.dt)[rows]
        if log.v is not None and not prep.resampled and np.all(np.isfinite(log.v)):
            # logged velocities: far more precise than SG derivatives of q (the friction laws differ
            # at |v| ~ 0.01-0.1 rad/s); short smoothing for v, the CV window for a = dv/dt
            v_log = np.asarray(log.v, float)[:, _joint_order(log, robot)]
            wv = max(int(round(V_WINDOW_S / prep.dt)) // 2 * 2 + 1, polyorder + 2 | 1)
            vf = _sg(v_log, min(wv, window), polyorder, 0, prep.dt)[rows]
            af = _sg(v_log, window, polyorder, 1, prep.dt)[rows]
            v_gain = np.linalg.norm(savgol_coeffs(min(wv, window), polyorder))
            v_sigma = highfreq_noise_std(v_log)
        else:
            vf = _sg(prep.q, window, polyorder, 1, prep.dt)[rows]
            af = _sg(prep.q, window, polyorder, 2, prep.dt)[rows]
            v_gain = np.linalg.norm(savgol_coeffs(window, polyorder, deriv=1, delta=prep.dt))
            v_sigma = highfreq_noise_std(prep.q)
        tauf = _sg(prep.tau, window, polyorder, 0, prep.dt)[rows]
        meas = prep.meas
        nb10, nj = 10 * robot.n_bodies, robot.n_joints
        R = stacked_regressor(robot, qf, vf, af)[:, meas, :]
        base_cols = np.r_[np.arange(nb10), nb10 + 2 * nj + np.arange(nj)]  # inertial + armature
        Y = np.ascontiguousarray(R[:, :, base_cols].transpose(1, 0, 2))  # (m, n, nbase)
        self.v = np.ascontiguousarray(vf[:, meas].T)  # (m, n)
        # fitted and scored efforts (m, n): the raw effort is scored; it is also fitted unless
        # filtered=True (a filtered effort loses the narrow friction features the laws differ by)
        b = ((tauf if filtered else prep.tau[rows]).T, prep.tau[rows].T)
        ok = prep.tau_valid[rows].T
        self.meas, self.nbase, self.m = meas, base_cols.size, meas.size
        #: noise std [rad/s] of the velocities the friction basis is evaluated at, per measured joint: the
        #: signal's high-frequency noise std times the white-noise gain of its SG filter
        self.v_noise = np.nan_to_num(v_gain * v_sigma, nan=0.0)[meas]
        nominal = nominal_parameters(robot)
        self.x0 = nominal[base_cols]
        self.scale = np.sqrt(np.mean(prep.tau[lo:hi] ** 2, axis=0))
        self.scale = np.where(self.scale > 0, self.scale, 1.0)
        self.w = 1.0 / self.scale ** 2
        # segments: block bounds and +- the guard gap (half a window) around inner bounds
        bounds = np.linspace(lo, hi, folds + 1).round().astype(int)
        gap = h
        inner = {int(np.clip(c + d, lo, hi)) for c in bounds[1:-1] for d in (-gap, 0, gap)}
        cuts = sorted({lo, hi} | inner)
        self.seg_rows = [np.flatnonzero((rows >= a) & (rows < c)) for a, c in zip(cuts[:-1], cuts[1:],
                                                                                      strict=True)]
        self.train = [[s for s in range(len(cuts) - 1)
                       if cuts[s + 1] <= (bounds[k] - gap if k > 0 else lo)
                       or cuts[s] >= (bounds[k + 1] + gap if k < folds - 1 else hi)] for k in range(folds)]
        self.held = [[s for s in range(len(cuts) - 1)
                      if cuts[s] >= bounds[k] and cuts[s + 1] <= bounds[k + 1]] for k in range(folds)]
        S = len(self.seg_rows)
        self.ok = ok
        self.b_fit, self.b_raw = b
        self.Y = Y
        # base Grams per segment and joint (unweighted); rows with an invalid effort are left out
        self.YY = np.zeros((S, self.m, self.nbase, self.nbase))
        self.Yb = np.zeros((S, self.m, self.nbase))
        self.Yr = np.zeros((S, self.m, self.nbase))
        self.rr = np.zeros((S, self.m))
        self.cnt = np.zeros((S, self.m))
        for s, r in enumerate(self.seg_rows):
            for j in range(self.m):
                okj = ok[j, r]
                Yj = Y[j, r] * okj[:, None]
                self.YY[s, j] = Yj.T @ Yj
                self.Yb[s, j] = Yj.T @ b[0][j, r]
                self.Yr[s, j] = Yj.T @ b[1][j, r]
                self.rr[s, j] = np.sum((b[1][j, r] * okj) ** 2)
                self.cnt[s, j] = okj.sum()

    def friction_blocks(self, law: str, j: int, shape: tuple):
        """Per-segment Gram blocks of joint j's friction columns: YF (S, nbase, k), FF (S, k, k), Fb, Fr."""
        F = _basis(law, self.v[j], shape) * self.ok[j][:, None]
        Y = self.Y[j]
        out = []
        for r in self.seg_rows:
            Fr_ = F[r]
            out.append((Y[r].T @ Fr_ * 1.0, Fr_.T @ Fr_, Fr_.T @ self.b_fit[j, r], Fr_.T @ self.b_raw[j, r]))
        return [np.stack(z) for z in zip(*out, strict=True)]

    def solve(self, blocks, segs):
        """Weighted ridge LS on the segments ``segs``; blocks[j] = friction_blocks of joint j. Returns
        (base x (nbase,), friction levels [(k,)] per joint)."""
        k = blocks[0][1].shape[-1]
        nb, m, w = self.nbase, self.m, self.w
        n = nb + m * k
        G = np.zeros((n, n))
        g = np.zeros(n)
        G[:nb, :nb] = np.einsum("j,jab->ab", w, self.YY[segs].sum(0))
        g[:nb] = w @ self.Yb[segs].sum(0)
        for j in range(m):
            YF, FF, Fb, _ = (z[segs].sum(0) for z in blocks[j])
            sl = slice(nb + j * k, nb + (j + 1) * k)
            G[:nb, sl] = w[j] * YF
            G[sl, :nb] = w[j] * YF.T
            G[sl, sl] = w[j] * FF
            g[sl] = w[j] * Fb
        x0 = np.concatenate([self.x0, np.zeros(m * k)])
        d = np.sqrt(np.maximum(np.diag(G), 0))
        d = np.where(d > 1e-12 * max(d.max(), 1e-300), d, 1.0)
        Gs = G / d[:, None] / d[None, :]
        xs = np.linalg.solve(Gs + RIDGE * np.eye(n), g / d + RIDGE * d * x0)
        x = xs / d
        return x[:nb], [x[nb + j * k: nb + (j + 1) * k] for j in range(m)]

    def score(self, blocks):
        """Blocked-CV score and per-fold scores of the law with these friction blocks."""
        folds = []
        for tr, he in zip(self.train, self.held, strict=True):
            xb, xf = self.solve(blocks, tr)
            sse = np.einsum("a,jab,b->j", xb, self.YY[he].sum(0), xb) - 2 * self.Yr[he].sum(0) @ xb \
                + self.rr[he].sum(0)
            for j in range(self.m):
                YF, FF, _, Fr = (z[he].sum(0) for z in blocks[j])
                sse[j] += 2 * xb @ YF @ xf[j] + xf[j] @ FF @ xf[j] - 2 * Fr @ xf[j]
            rmse = np.sqrt(np.maximum(sse, 0) / np.maximum(self.cnt[he].sum(0), 1))
            folds.append(float(np.sqrt(np.mean((rmse / self.scale) ** 2))))
        return float(np.mean(folds)), folds


def _fit_law(reg: _Regression, law: str, sweeps: int = 2):
    """Coordinate descent over the joints' shapes on the CV score. Returns (score, folds, shapes, blocks)."""
    grid = _shapes(law)
    start = (0.05,) if law == "coulomb-viscous-scale" else (0.01, 0.1)
    shapes = [start] * reg.m
    cache = {}

    def blk(j, s):
        if (j, s) not in cache:
            cache[(j, s)] = reg.friction_blocks(law, j, s)
        return cache[(j, s)]

    blocks = [blk(j, shapes[j]) for j in range(reg.m)]
    best, folds = reg.score(blocks)
    for _ in range(sweeps):
        changed = False
        for j in range(reg.m):
            for s in grid:
                if s == shapes[j]:
                    continue
                trial = list(blocks)
                trial[j] = blk(j, s)
                sc, fo = reg.score(trial)
                if sc < best:
                    best, folds, shapes[j], blocks, changed = sc, fo, s, trial, True
        if not changed:
            break
    return best, folds, shapes, blocks


def decide(fold_scores: dict, candidates, margin: float, velocity_noise: float) -> tuple[str, str]:
    """(chosen law, reason) from the per-fold CV scores of the simplest and the most complex candidate.

    Sharp velocities (``velocity_noise`` ≤ `BLIND_VELOCITY` [rad/s]): the complex law only when it lowers
    the score in every fold and on average by at least ``margin``. Blurred velocities: the complex law
    (which nests the simple one) unless it raises the average score by more than ``margin``."""
    simple, complex_ = candidates[0], candidates[-1]
    if len(candidates) < 2:
        return simple, f"only {simple} scored"
    gains = 1 - np.asarray(fold_scores[complex_]) / np.asarray(fold_scores[simple])
    scored = (f"{complex_} lowers the blocked-CV score by {100 * gains.mean():+.3f} % on average "
              f"(folds {100 * gains.min():+.3f} … {100 * gains.max():+.3f} %) against {simple}")
    if velocity_noise > BLIND_VELOCITY:  # the CV cannot see the difference: the nesting law unless worse
        pays = bool(gains.mean() >= -margin)
        reason = (f"the regression's velocities are blurred (noise std {velocity_noise:.3g} rad/s after its "
                  f"filter, median joint, > {BLIND_VELOCITY:g} rad/s: the Stribeck prior's peak width), so "
                  f"its CV cannot see a Stribeck peak; {scored}: "
                  + (f"{complex_}, which nests {simple}" if pays else f"{simple}")
                  + f" (rule: {complex_} unless the CV finds it worse by more than {100 * margin:g} %)")
    else:
        pays = bool(gains.mean() >= margin and gains.min() > 0)
        reason = (f"{scored}: " + ("pays" if pays else "does not pay")
                  + f" (rule: mean >= {100 * margin:g} % and every fold lower)")
    return (complex_ if pays else simple), reason


def select_friction(robot: RobotModel, log: Log, window_s: float, polyorder: int, folds: int = 5,
                    margin: float = MARGIN, max_rows: int = 8000, candidates=CANDIDATES,
                    max_window_s: float | None = None, filtered: bool = False) -> FrictionSelection:
    """Choose the friction law of ``robot`` on the training ``log`` by blocked CV (module docstring).

    ``window_s`` [s] / ``polyorder``: the SG filter (e.g. `LeastSquaresSG`'s CV choice on this log).
    ``candidates``: laws to score, simplest first; the choice between the first and the last is `decide`'s
    (the last by ``margin`` where the velocities are sharp, the last unless worse where they are blurred).
    Raises ValueError when the log is too short for the CV.
    """
    t0, c0 = time.perf_counter(), time.process_time()
    dt = float(np.median(np.diff(np.asarray(log.t, float))))
    if max_window_s is not None:
        window_s = min(window_s, max_window_s)
    window = max(int(round(window_s / dt)) // 2 * 2 + 1, polyorder + 2 | 1)
    reg = _Regression(robot, log, window, int(polyorder), int(folds), int(max_rows), filtered)
    names = [robot.joint_names[i] for i in reg.meas]
    scores, fold_scores, shapes, levels, base = {}, {}, {}, {}, {}
    nb10 = 10 * robot.n_bodies
    for law in candidates:
        sc, fo, sh, blocks = _fit_law(reg, law)
        xb, xf = reg.solve(blocks, list(range(len(reg.seg_rows))))  # every row, for the smoother's start
        scores[law], fold_scores[law] = sc, fo
        shapes[law] = dict(zip(names, sh, strict=True))
        levels[law] = dict(zip(names, xf, strict=True))
        base[law] = (xb[:nb10].reshape(robot.n_bodies, 10), xb[nb10:])
    sel = FrictionSelection(CANDIDATES[0], scores, fold_scores, shapes, levels, margin, int(folds),
                            float(window * dt), int(polyorder), reg.n_rows,
                            velocity_noise=dict(zip(names, (float(x) for x in reg.v_noise), strict=True)))
    sel.chosen, sel.reason = decide(fold_scores, candidates, margin, sel.median_velocity_noise)
    sel.seconds, sel.cpu_seconds = time.perf_counter() - t0, time.process_time() - c0
    sel._base = base
    return sel


def stribeck_physical(sel: FrictionSelection, robot: RobotModel, layout) -> np.ndarray:
    """Full physical vector in ``layout`` (friction ``stribeck6``) from the Stribeck regression: inertias
    and armature of that fit, (g0, g1, g2, g3, g4, g5) = (c0, 1/vs, 1/v_st, c1, 1/vs, c2) per measured
    joint with the levels floored positive; everything else at the layout's prior mean."""
    from ..parameterizations import Stribeck6

    p = layout.to_physical(layout.prior(0.7)[0])
    inertial, arm = sel._base["stribeck6"]
    p[layout.s_inertial] = inertial.ravel()
    pa = p[layout.s_armature]
    pa[:] = np.where(arm > 0, arm, pa)
    p[layout.s_armature] = pa
    fr = p[layout.s_friction].reshape(layout.nj, layout.kf)
    for j, name in enumerate(robot.joint_names):
        if name not in sel.shapes["stribeck6"]:
            continue
        vs, vst = sel.shapes["stribeck6"][name]
        c = sel.levels["stribeck6"][name]
        fr[j] = [max(c[0], 1e-3 * max(c[1], Stribeck6.FC_FLOOR)), 1 / vs, 1 / vst,
                 max(c[1], Stribeck6.FC_FLOOR), 1 / vs, max(c[2], Stribeck6.FV_FLOOR)]
    p[layout.s_friction] = fr.ravel()
    return p


def stribeck_start(smoother, log: Log, filt: dict) -> np.ndarray | None:
    """Starting physical vector of a ``stribeck6`` smoother fit (`stribeck_physical`), from the selection
    of ``friction="auto"`` when it ran, else from a Stribeck-only regression with the SG filter ``filt``
    ({window_s, polyorder}); None when the regression is not possible (log too short)."""
    sel = getattr(smoother, "friction_selection_", None) if getattr(smoother, "_ls_result", None) else None
    if sel is None or "stribeck6" not in sel._base:
        try:
            sel = select_friction(smoother.robot, log, filt["window_s"], filt["polyorder"],
                                  candidates=("stribeck6",))
        except ValueError:
            return None
    return stribeck_physical(sel, smoother.robot, smoother.layout_)


def fit_auto(smoother, log: Log):
    """`JointSmoother.fit` with ``friction="auto"``: the classical fit (its SG window), the selection, then
    the smoother with the chosen law; ``result_.extras["friction_selection"]`` says what and why."""
    from .baseline import LeastSquaresSG
    from .effort_quality import drop_deadband_channels

    robot = smoother.robot
    sel, ls, reason = None, None, None
    if robot.floating_base or robot.loops:
        reason = "closed loops / floating base: no classical regression to select on"
    elif smoother.init != "ls-sg" or not np.any(log.tau_measured):
        reason = "no measured effort or no classical initialisation"
    elif not smoother.fit_friction:
        reason = "friction not fitted"
    else:
        # the efforts `JointSmoother._fit` will use: dead-band channels out (they skew the SG window's CV)
        log_used, _ = drop_deadband_channels(log, smoother.deadband_zero_fraction)
        try:
            ls = LeastSquaresSG(velocity_scale=smoother.friction_velocity_scale,
                                fit_friction=smoother.fit_friction, fit_armature=smoother.fit_armature,
                                blas_threads=None, n_jobs=smoother.n_jobs).fit(log_used, robot).result_
            sel = select_friction(robot, log_used, float(ls.filter["window_s"]), int(ls.filter["polyorder"]))
        except ValueError as e:
            reason = f"selection unavailable ({e})"
    chosen = sel.chosen if sel is not None else CANDIDATES[0]
    if sel is not None:
        reason = sel.reason
        if chosen == CANDIDATES[0]:  # the Coulomb–viscous family: the smoother also estimates the lead
            if smoother.energy or smoother.dynamics == "forward":
                reason += "; energy rows and forward dynamics need a velocity-only law: no lead"
            else:
                chosen = LEAD_LAW
                reason += (f"; the smoother fits {LEAD_LAW} (friction of v + T·a with the lead T estimated, "
                           "prior 0: the data say whether the friction flips ahead of the velocity)")
    smoother._log(f"friction auto: {chosen} ({reason})")
    smoother.friction_selection_ = sel
    smoother._ls_result = ls  # reused by `JointSmoother._fit` (no second classical fit)
    smoother.friction = chosen
    smoother._auto_lead = chosen == LEAD_LAW  # `jerk_auto` drops the lead where a absorbed the noise
    try:
        smoother._fit(log)
    finally:
        smoother.friction = "auto"
        smoother._ls_result = None
        smoother._auto_lead = False
    fitted = smoother.result_.layout.friction.name
    if fitted != chosen:  # the lead dropped by the acceleration-process refit (`jerk_auto`)
        reason += (f"; fitted {fitted}: the knot accelerations absorbed the effort noise (acceleration "
                   "process auto fired), so they cannot time the friction's lead, and at that noise the "
                   "regression cannot see a Stribeck peak: the refit fits stribeck6, which nests the tanh "
                   "law (`jerk_auto.noisy_refit_law`)")
        chosen = fitted
    info = {**(sel.as_dict() if sel is not None else {}), "chosen": chosen, "reason": reason}
    if sel is not None:
        info["regression_choice"] = sel.chosen
    smoother.result_.extras["friction_selection"] = info
    return smoother
