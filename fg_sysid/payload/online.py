"""Online payload identification: chunks of samples stream in, the estimate and the bound are updated.

Each `OnlinePayloadIdentifier.update` appends the chunk to the `PayloadProblem` (only the new samples'
regressors are computed), re-solves the log-Cholesky estimate warm-started at the previous η*, recomputes
the bound of all data so far and intersects it with the previous bound, so widths never grow (paper 002
Alg. 2, line 8, with the intersection the paper's stopping rule implies). An empty intersection means the
data contradict the bounds (`DataContradictBounds`). For the ``lp`` and ``verified`` modes the
intersection of two enclosures of the truth still encloses it; for ``first-order`` it is a heuristic.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from ..robots.model import INERTIAL_SUFFIXES
from .bounds import PayloadBounds, compute_bounds
from .problem import DataContradictBounds, NoiseBounds, PayloadError, PayloadProblem, RobotPrior

#: Default window length [samples] per bound mode. ``lp``: short windows, because the LP feasible set of
#: finer windows is a subset of the coarser one's (`PayloadProblem.coarsened`) and row generation keeps the
#: LP cost nearly independent of the number of rows; 10 samples keep the balance's measured model error
#: ≤ 0.2 % of the noise bound (the 1 % allowance). ``verified``/``first-order``: the least-squares image
#: grows with more, finer rows, so they keep 50-sample windows.
DEFAULT_H = {"lp": 10, "verified": 50, "first-order": 50}


class OnlinePayloadIdentifier:
    """Streaming estimate + bound of the end-effector + payload parameters.

    Args: robot, prior (`RobotPrior`), noise (`NoiseBounds`), mode (``lp``, ``verified``,
    ``first-order``), h (samples per window; None: `DEFAULT_H` of the mode), box: optional initial
    payload box ``(lower, upper)``
    (10 each, e.g. paper 002 Table I), rule / tau_rule: quadrature (see `PayloadProblem`).
    """

    def __init__(self, robot, prior: RobotPrior, noise: NoiseBounds, mode: str = "lp", h: int | None = None,
                 box=None, rule: str = "trapezoid", tau_rule: str = "euler", consistency: bool = True):
        if h is None:
            h = DEFAULT_H.get(mode, 50)
        self.problem = PayloadProblem(robot, prior, noise, h=h, rule=rule, tau_rule=tau_rule)
        self.mode, self.consistency = mode, consistency
        self.box = None if box is None else (np.asarray(box[0], float), np.asarray(box[1], float))
        self.current: PayloadBounds | None = None
        self._eta = None
        self.history: list[dict] = []

    def update(self, t, q, v, tau) -> PayloadBounds | None:
        """Add a chunk; returns the updated bound, or None while the data do not yet determine θ_e."""
        tic, cpu = time.perf_counter(), time.process_time()
        self.problem.add(t, q, v, tau)
        t_reg = time.perf_counter() - tic
        try:
            self.problem.check_excitation()
        except PayloadError:
            return None
        box = self.box
        if self.current is not None:
            box = (self.current.lower, self.current.upper)
        b, self._eta = compute_bounds(self.problem, self.mode, box=box if self.mode == "lp" else self.box,
                                      eta0=self._eta, consistency=self.consistency)
        if self.current is not None:
            lo = np.maximum(b.lower, self.current.lower)
            hi = np.minimum(b.upper, self.current.upper)
            if np.any(lo > hi):
                bad = [INERTIAL_SUFFIXES[i] for i in np.flatnonzero(lo > hi)]
                raise DataContradictBounds(f"the data contradict the bounds: the new interval of {bad} does "
                                           "not intersect the previous one")
            b = PayloadBounds(b.mode, b.estimate, lo, hi, b.timings, b.info)
        b.timings["regressor_s"] = t_reg
        b.timings["update_s"] = time.perf_counter() - tic
        b.timings["update_cpu_s"] = time.process_time() - cpu  # this process's CPU time (all threads)
        self.current = b
        row = {"t": float(self.problem.t_end), "windows": self.problem.n_windows, **b.timings}
        for i, s in enumerate(INERTIAL_SUFFIXES):
            row[f"est.{s}"] = b.estimate[i]
            row[f"lo.{s}"] = b.lower[i]
            row[f"hi.{s}"] = b.upper[i]
        self.history.append(row)
        return b

    def history_frame(self) -> pd.DataFrame:
        """One row per update: time [s], windows, timings [s], estimate / lower / upper per parameter."""
        return pd.DataFrame(self.history)


def run_online(robot, prior: RobotPrior, noise: NoiseBounds, t, q, v, tau, chunk: float = 1.5,
               mode: str = "lp", h: int | None = None, box=None, progress=None,
               **kw) -> OnlinePayloadIdentifier:
    """Feed a whole log in chunks of ``chunk`` seconds; ``progress(msg)`` is called after each update."""
    if chunk <= 0:
        raise PayloadError(f"chunk must be positive (seconds), got {chunk}")
    ident = OnlinePayloadIdentifier(robot, prior, noise, mode=mode, h=h, box=box, **kw)
    t = np.asarray(t, float)
    edges = np.searchsorted(t, np.arange(t[0], t[-1] + chunk, chunk)[1:], side="right")
    start = 0
    for stop in list(edges) + [len(t)]:
        if stop <= start:
            continue
        b = ident.update(t[start:stop], q[start:stop], v[start:stop], tau[start:stop])
        if progress is not None and b is not None:
            progress(f"t = {t[stop - 1]:.2f} s: m = {b.estimate[0]:.4g} kg in [{b.lower[0]:.4g}, "
                     f"{b.upper[0]:.4g}], update {b.timings['update_s']:.2f} s")
        start = stop
    if ident.current is None:
        ident.problem.check_excitation()  # raises the precise message
    return ident
