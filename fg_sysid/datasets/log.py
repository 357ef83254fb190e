"""The in-memory log: one row per sample, joint columns in the robot's joint order.

See ``docs/data-format.md`` for the on-disk schema (``t``, ``q.<joint>``, ``v.<joint>``, ``tau.<joint>``,
and the optional floating-base columns ``imu.*``, ``base.*``, ``contact.*``, ``force.*``, ``torque.*``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True, eq=False)
class Log:
    """A validated robot log (fixed or floating base).

    Attributes:
        t: sample times [s], shape (N,), strictly increasing.
        q: joint positions [rad | m], shape (N, n_joints), columns in ``joint_names`` order.
        v: joint velocities [rad/s | m/s], shape (N, n_joints), or None when not logged.
        tau: applied joint efforts [N·m | N], shape (N, n_joints); a column of NaN = not measured.
        joint_names: joint order of the columns (the robot's ``joint_names``).
        source: where the log came from (file path or "simulated").
        extra: other columns of the table, by name (kept, unused by the estimators).
        imu_gyro: IMU angular velocity [rad/s], IMU frame, shape (N, 3) (x, y, z), or None.
        imu_acc: IMU specific force [m/s²], IMU frame, shape (N, 3), or None.
        imu_quat: orientation of the IMU frame in the world, unit quaternion (N, 4) in (w, x, y, z)
            order, or None.
        base_pos: base position [m] in the world, shape (N, 3), or None.
        base_quat: base orientation in the world, unit quaternion (N, 4) (w, x, y, z), or None.
        contacts: contact frame -> stance flag, bool array (N,).
        forces: contact frame -> measured contact force [N], world frame, (N, 3); all-NaN columns =
            not measured.
        torques: contact frame -> measured contact torque [N·m], world frame, (N, 3); NaN as forces.

    For a floating-base robot ``q``/``v``/``tau`` hold the joints only; the base pose, when logged,
    is in ``base_pos``/``base_quat``.
    """

    t: np.ndarray
    q: np.ndarray
    v: np.ndarray | None
    tau: np.ndarray
    joint_names: tuple[str, ...]
    source: str = ""
    extra: dict = field(default_factory=dict)
    imu_gyro: np.ndarray | None = None
    imu_acc: np.ndarray | None = None
    imu_quat: np.ndarray | None = None
    base_pos: np.ndarray | None = None
    base_quat: np.ndarray | None = None
    contacts: dict = field(default_factory=dict)
    forces: dict = field(default_factory=dict)
    torques: dict = field(default_factory=dict)

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

        def cut(x):
            return None if x is None else np.asarray(x)[sl]

        return Log(
            t=self.t[sl], q=self.q[sl], v=None if self.v is None else self.v[sl], tau=self.tau[sl],
            joint_names=self.joint_names, source=f"{self.source}[{start}:{stop}]",
            extra={k: np.asarray(v)[sl] for k, v in self.extra.items()},
            imu_gyro=cut(self.imu_gyro), imu_acc=cut(self.imu_acc), imu_quat=cut(self.imu_quat),
            base_pos=cut(self.base_pos), base_quat=cut(self.base_quat),
            contacts={k: cut(x) for k, x in self.contacts.items()},
            forces={k: cut(x) for k, x in self.forces.items()},
            torques={k: cut(x) for k, x in self.torques.items()},
        )
