"""Stick samples and the smooth-friction model class's own floor (issue 9 item 2 of session 8).

Dry friction with stiction (MuJoCo ``frictionloss``) is a constraint: while a joint sticks or reverses its
friction torque takes any value in ±fc that keeps it at rest, which no function of the velocity — the
estimator's ``fc·tanh(v/vs) + fv·v`` or any smooth law — can predict. Used by bench_outofclass.py:

* `stick_mask` — entries (sample, joint) whose true |v| is below ``V_STICK`` [rad/s] (stick / reversal).
* `split_error` — of a prediction's squared error against the reference efforts: the relative RMSE on the
  sliding entries alone, and the share of the squared error on the stick entries.
* `oracle_tanh` — the *model class's* floor at the exact states: the least-squares best inertias
  (unconstrained: a relaxation of the smoother's consistent set, so its error is a lower bound),
  armature, fc, fv and a per-joint tanh width (grid, coordinate sweeps) fitted to the reference efforts at
  the true q, v, a of the very log it is scored on (in-sample). ``weights`` = 0 on stick entries fits
  the sliding entries alone: if that lowers the sliding error a lot, stick entries bias a fit.
"""

from __future__ import annotations

import numpy as np

from fg_sysid.estimation.baseline import stacked_regressor

#: |v| [rad/s] below which a joint is counted as sticking / reversing (the MuJoCo simulator's test uses
#: the same threshold for "sliding": tests/test_outofclass_sim.py)
V_STICK = 0.02
#: tanh widths [rad/s] tried per joint by `oracle_tanh`
VS_GRID = np.geomspace(2e-4, 0.2, 31)
#: friction-law shapes s(v/w) of `oracle_tanh`: the estimator's smooth sign, and soft dry friction (linear
#: up to the width, then saturated: MuJoCo's soft ``frictionloss`` constraint as measured on the B1 knee
#: motors, docs/benchmarks.md "Floating B1 with four-bar knees: the knee-motor friction")
LAWS = {"tanh": np.tanh, "clip": lambda x: np.clip(x, -1.0, 1.0)}


def stick_mask(v: np.ndarray, v_stick: float = V_STICK) -> np.ndarray:
    """(N, n) bool: |v| < v_stick."""
    return np.abs(np.asarray(v, float)) < v_stick


def split_error(pred: np.ndarray, ref: np.ndarray, stick: np.ndarray) -> dict:
    """``sliding_%``: 100·sqrt(Σ_slide e²/Σ_slide ref²); ``stick_share``: Σ_stick e²/Σ e²;
    ``stick_fraction``: share of entries that stick."""
    e2 = (np.asarray(pred, float) - np.asarray(ref, float)) ** 2
    r2 = np.asarray(ref, float) ** 2
    slide = ~stick
    return {"sliding_%": 100 * float(np.sqrt(e2[slide].sum() / r2[slide].sum())),
            "stick_share": float(e2[stick].sum() / e2.sum()) if e2.sum() > 0 else 0.0,
            "stick_fraction": float(stick.mean())}


def oracle_tanh(robot, q, v, a, tau, weights: np.ndarray | None = None, grid=VS_GRID, sweeps: int = 2,
                law: str = "tanh"):
    """Best ``fc·tanh(v/vs) + fv·v`` + unconstrained inertias + armature at the given states, per-joint vs
    from ``grid``; weighted least squares with ``weights`` (N, n) (default 1). ``law="clip"``: the
    soft-dry shape ``clip(v/vs, ±1)`` instead of tanh (`LAWS`). Returns (prediction (N, n), vs per joint)."""
    shape = LAWS[law]
    tau = np.asarray(tau, float)
    N, n = tau.shape
    nb10 = 10 * robot.n_bodies
    Y = stacked_regressor(robot, q, v, a, 1.0)  # (N, n, P); tanh columns replaced below
    w = np.ones((N, n)) if weights is None else np.asarray(weights, float)
    P = Y.shape[2]
    Yw = (Y * w[:, :, None]).reshape(-1, P)
    bw = (tau * w).ravel()
    G = Yw.T @ Yw
    b = Yw.T @ bw
    cols = nb10 + 2 * np.arange(n)  # the tanh column of each joint
    vs = np.full(n, 0.05)

    def set_col(j, s):
        col = np.zeros((N, n))
        col[:, j] = shape(v[:, j] / s) * w[:, j]
        c = col.ravel()
        Yw[:, cols[j]] = c
        g = Yw.T @ c
        G[cols[j], :] = g
        G[:, cols[j]] = g
        b[cols[j]] = c @ bw

    def cost():
        p = np.linalg.lstsq(G, b, rcond=1e-13)[0]
        return float(p @ G @ p - 2 * p @ b + bw @ bw), p

    for j in range(n):
        set_col(j, vs[j])
    for _ in range(sweeps):
        for j in range(n):
            best = (np.inf, vs[j])
            for s in grid:
                set_col(j, s)
                best = min(best, (cost()[0], s))
            vs[j] = best[1]
            set_col(j, vs[j])
    p = cost()[1]
    Yu = Y.copy()
    for j in range(n):
        Yu[:, j, cols[j]] = shape(v[:, j] / vs[j])
    return np.einsum("knp,p->kn", Yu, p), vs
