"""The in-memory log: one row per sample, joint columns in the robot's joint order.

See ``docs/data-format.md`` for the on-disk schema (``t``, ``q.<joint>``, ``v.<joint>``, ``tau.<joint>``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True, eq=False)
class Log:
    """A validated robot log (fixed base).

    Attributes:
        t: sample times [s], shape (N,), strictly increasing.
        q: joint positions [rad | m], shape (N, n_joints), columns in ``joint_names`` order.
        v: joint velocities [rad/s | m/s], shape (N, n_joints), or None when not logged.
        tau: applied joint efforts [N·m | N], shape (N, n_joints); a column of NaN = not measured.
        joint_names: joint order of the columns (the robot's ``joint_names``).
        source: where the log came from (file path or "simulated").
        extra: other columns of the table, by name (kept, unused by the estimators).
    """

    t: np.ndarray
    q: np.ndarray
    v: np.ndarray | None
    tau: np.ndarray
    joint_names: tuple[str, ...]
    source: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def n_samples(self) -> int:
        return int(self.t.shape[0])

    @property
    def n_joints(self) -> int:
        return len(self.joint_names)

    @property
    def tau_measured(self) -> np.ndarray:
        """Boolean mask (n_joints,): True where the effort column has data."""
        return ~np.all(np.isnan(self.tau), axis=0)

    @property
    def duration(self) -> float:
        return float(self.t[-1] - self.t[0])

    @property
    def rate(self) -> float:
        """Median sample rate [Hz]."""
        return float(1.0 / np.median(np.diff(self.t)))

    def slice(self, start: int, stop: int) -> Log:
        """Rows ``start:stop`` as a new log."""
        sl = slice(start, stop)
        return Log(
            t=self.t[sl], q=self.q[sl], v=None if self.v is None else self.v[sl], tau=self.tau[sl],
            joint_names=self.joint_names, source=f"{self.source}[{start}:{stop}]",
            extra={k: np.asarray(v)[sl] for k, v in self.extra.items()},
        )
