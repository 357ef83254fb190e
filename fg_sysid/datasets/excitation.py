"""Periodic excitation trajectories: finite Fourier series (Swevers et al.; paper 004, App. B).

Per joint ``i``, with ``w = 2π f`` and ``l = 1..L``::

    q_i(t) = q0_i + Σ_l  a_il / (w l) · sin(w l t)  -  b_il / (w l) · cos(w l t)
    v_i(t) =        Σ_l  a_il · cos(w l t)  +  b_il · sin(w l t)
    a_i(t) =        Σ_l -a_il w l · sin(w l t)  +  b_il w l · cos(w l t)

The trajectory is periodic with period ``1/f``. `FourierTrajectory` holds the coefficients only, so
an optimizer (e.g. for regressor conditioning) can produce new instances with ``replace`` or the
constructor and store them with `FourierTrajectory.to_csv`.

Coefficient file format (CSV, one row per joint, columns in this order)::

    joint,f_hz,q0,a1,...,aL,b1,...,bL

``f_hz`` is the base frequency [Hz] (same on every row); ``q0`` [rad | m]; ``a_l``, ``b_l`` are
velocity amplitudes [rad/s | m/s].
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd


class TrajectoryError(ValueError):
    """A trajectory (or its coefficient file) is malformed or does not fit the robot."""


@dataclass(frozen=True, eq=False)
class FourierTrajectory:
    """Finite Fourier series trajectory.

    Attributes:
        f: base frequency [Hz] (period 1/f).
        q0: offsets, shape (n,).
        a, b: coefficients, shape (n, L) [rad/s | m/s].
        joint_names: joint of each row (optional but written to / checked against files and robots).
    """

    f: float
    q0: np.ndarray
    a: np.ndarray
    b: np.ndarray
    joint_names: tuple[str, ...] = ()

    def __post_init__(self):
        q0 = np.asarray(self.q0, float).reshape(-1)
        a = np.atleast_2d(np.asarray(self.a, float))
        b = np.atleast_2d(np.asarray(self.b, float))
        if a.shape != b.shape or a.shape[0] != q0.shape[0]:
            raise TrajectoryError(f"shape mismatch: q0 {q0.shape}, a {a.shape}, b {b.shape}")
        if not (np.isfinite(self.f) and self.f > 0):
            raise TrajectoryError(f"base frequency must be positive and finite, got {self.f}")
        if not (np.isfinite(q0).all() and np.isfinite(a).all() and np.isfinite(b).all()):
            raise TrajectoryError("coefficients must be finite")
        names = tuple(self.joint_names)
        if names and len(names) != q0.shape[0]:
            raise TrajectoryError(f"{len(names)} joint names for {q0.shape[0]} joints")
        object.__setattr__(self, "f", float(self.f))
        object.__setattr__(self, "q0", q0)
        object.__setattr__(self, "a", a)
        object.__setattr__(self, "b", b)
        object.__setattr__(self, "joint_names", names)

    # ------------------------------------------------------------------ basics
    @property
    def n_joints(self) -> int:
        return int(self.q0.shape[0])

    @property
    def harmonics(self) -> int:
        return int(self.a.shape[1])

    @property
    def period(self) -> float:
        return 1.0 / self.f

    @property
    def omega(self) -> float:
        return 2.0 * np.pi * self.f

    def with_coefficients(self, q0=None, a=None, b=None, f=None) -> FourierTrajectory:
        """A copy with some fields replaced (convenient for optimizers)."""
        kw = {k: v for k, v in dict(q0=q0, a=a, b=b, f=f).items() if v is not None}
        return replace(self, **kw)

    def evaluate(self, t) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Analytic (q, v, a) at times ``t``: shapes (N, n) for an array, (n,) for a scalar."""
        scalar = np.ndim(t) == 0
        t = np.atleast_1d(np.asarray(t, float))
        w = self.omega
        wl = w * np.arange(1, self.harmonics + 1)  # (L,)
        ph = np.outer(t, wl)  # (N, L)
        s, c = np.sin(ph), np.cos(ph)
        q = self.q0 + s @ (self.a / wl).T - c @ (self.b / wl).T
        v = c @ self.a.T + s @ self.b.T
        acc = -s @ (self.a * wl).T + c @ (self.b * wl).T
        if scalar:
            return q[0], v[0], acc[0]
        return q, v, acc

    def extrema(self, samples_per_harmonic: int = 64) -> dict:
        """Min/max of q and max |v|, |a| over one period (dense sampling), per joint."""
        n = max(256, samples_per_harmonic * self.harmonics * 8)
        t = np.linspace(0.0, self.period, n, endpoint=False)
        q, v, acc = self.evaluate(t)
        return {"q_min": q.min(0), "q_max": q.max(0), "v_max": np.abs(v).max(0), "a_max": np.abs(acc).max(0)}

    def check_limits(self, robot, margin: float = 0.0) -> list[str]:
        """Messages for joints whose trajectory leaves the robot's position/velocity limits."""
        lo, hi = robot.position_limits()
        vl = robot.velocity_limits()
        span = hi - lo
        ex = self.extrema()
        msgs = []
        for i, j in enumerate(self._names(robot)):
            lo_i, hi_i = lo[i] + margin * span[i] - 1e-9, hi[i] - margin * span[i] + 1e-9
            if ex["q_min"][i] < lo_i or ex["q_max"][i] > hi_i:
                msgs.append(f"joint {j!r}: q in [{ex['q_min'][i]:.4g}, {ex['q_max'][i]:.4g}] "
                            f"outside limits [{lo[i]:.4g}, {hi[i]:.4g}]")
            if ex["v_max"][i] > vl[i] * (1 + 1e-9):
                msgs.append(f"joint {j!r}: |v| up to {ex['v_max'][i]:.4g} exceeds limit {vl[i]:.4g}")
        return msgs

    def _names(self, robot) -> tuple[str, ...]:
        if self.joint_names and tuple(self.joint_names) != tuple(robot.joint_names):
            raise TrajectoryError(
                f"trajectory joints {list(self.joint_names)} do not match robot {robot.name!r} joints "
                f"{list(robot.joint_names)}"
            )
        if self.n_joints != robot.n_joints:
            raise TrajectoryError(
                f"trajectory has {self.n_joints} joints, robot {robot.name!r} has {robot.n_joints}"
            )
        return tuple(robot.joint_names)

    # ------------------------------------------------------------------ random draws
    @classmethod
    def random(
        cls,
        robot,
        duration: float | None = None,
        rng: np.random.Generator | int | None = None,
        harmonics: int = 5,
        base_frequency: float = 0.1,
        margin: float = 0.1,
        velocity_fraction: float = 0.8,
        acceleration_limit: float | None = None,
    ) -> FourierTrajectory:
        """Random coefficients scaled to stay inside the robot's limits.

        Coefficients ``a_il, b_il ~ N(0, 1) / l`` are drawn, then each joint's series is scaled (and
        ``q0`` placed at the centre of the motion range) so that over a whole period
        ``q`` stays inside ``[lo + margin·span, hi - margin·span]``, ``|v| <= velocity_fraction·vmax``
        and, when given, ``|a| <= acceleration_limit``. ``duration`` is informational (the bounds hold
        over the whole period, hence for any duration).
        """
        del duration  # periodic: the limits hold for any duration
        rng = np.random.default_rng(rng)
        if harmonics < 1:
            raise TrajectoryError(f"harmonics must be >= 1, got {harmonics}")
        n = robot.n_joints
        ls = np.arange(1, harmonics + 1)
        a = rng.standard_normal((n, harmonics)) / ls
        b = rng.standard_normal((n, harmonics)) / ls
        unit = cls(base_frequency, np.zeros(n), a, b, tuple(robot.joint_names))
        ex = unit.extrema()
        lo, hi = robot.position_limits()
        span = hi - lo
        half_room = 0.5 * span * (1.0 - 2.0 * margin)
        half_motion = np.maximum(0.5 * (ex["q_max"] - ex["q_min"]), 1e-12)
        scale = half_room / half_motion
        v_room = velocity_fraction * robot.velocity_limits()
        scale = np.minimum(scale, v_room / np.maximum(ex["v_max"], 1e-12))
        if acceleration_limit is not None:
            scale = np.minimum(scale, acceleration_limit / np.maximum(ex["a_max"], 1e-12))
        # 0.995: safety against extrema falling between the sampled instants of `extrema`
        scale = 0.995 * np.maximum(scale, 0.0)
        centre_motion = 0.5 * (ex["q_max"] + ex["q_min"]) * scale
        q0 = 0.5 * (lo + hi) - centre_motion
        return cls(base_frequency, q0, a * scale[:, None], b * scale[:, None], tuple(robot.joint_names))

    # ------------------------------------------------------------------ files
    def to_frame(self) -> pd.DataFrame:
        names = self.joint_names or tuple(f"joint{i}" for i in range(self.n_joints))
        cols = {"joint": list(names), "f_hz": np.full(self.n_joints, self.f), "q0": self.q0}
        for l in range(self.harmonics):
            cols[f"a{l + 1}"] = self.a[:, l]
        for l in range(self.harmonics):
            cols[f"b{l + 1}"] = self.b[:, l]
        return pd.DataFrame(cols)

    def to_csv(self, path: str | os.PathLike) -> Path:
        """Write the coefficient table (``joint,f_hz,q0,a1..aL,b1..bL``) atomically."""
        from .io import write_frame

        return write_frame(self.to_frame(), path)

    @classmethod
    def from_csv(cls, path: str | os.PathLike) -> FourierTrajectory:
        """Read a coefficient table written by `to_csv` (or by another tool in the same format)."""
        path = Path(path)
        if not path.is_file():
            raise TrajectoryError(f"{path}: trajectory file not found")
        try:
            df = pd.read_csv(path)
        except Exception as e:
            raise TrajectoryError(f"{path}: cannot read trajectory: {type(e).__name__}: {e}") from None
        df.columns = [str(c).strip() for c in df.columns]
        for c in ("joint", "f_hz", "q0"):
            if c not in df.columns:
                raise TrajectoryError(f"{path}: missing column {c!r} (expected joint,f_hz,q0,a1..aL,b1..bL)")
        L = 0
        while f"a{L + 1}" in df.columns:
            L += 1
        if L == 0:
            raise TrajectoryError(f"{path}: no coefficient columns a1..aL")
        for l in range(1, L + 1):
            if f"b{l}" not in df.columns:
                raise TrajectoryError(f"{path}: column 'a{l}' has no matching 'b{l}'")
        extra = [c for c in df.columns if c not in {"joint", "f_hz", "q0"}
                 and c not in {f"a{l}" for l in range(1, L + 1)} | {f"b{l}" for l in range(1, L + 1)}]
        if extra:
            raise TrajectoryError(f"{path}: unexpected column(s) {extra}")
        num = df.drop(columns=["joint"]).apply(pd.to_numeric, errors="coerce")
        if num.isna().to_numpy().any():
            r, c = np.argwhere(num.isna().to_numpy())[0]
            raise TrajectoryError(f"{path}: row {r}, column {num.columns[c]!r}: not a finite number")
        f = num["f_hz"].to_numpy()
        if not np.allclose(f, f[0], rtol=1e-12, atol=0):
            raise TrajectoryError(f"{path}: column 'f_hz' must hold the same base frequency on every row")
        names = tuple(str(j) for j in df["joint"])
        if len(set(names)) != len(names):
            raise TrajectoryError(f"{path}: duplicate joint names in column 'joint'")
        try:
            return cls(
                float(f[0]), num["q0"].to_numpy(),
                num[[f"a{l}" for l in range(1, L + 1)]].to_numpy(),
                num[[f"b{l}" for l in range(1, L + 1)]].to_numpy(), names,
            )
        except TrajectoryError as e:
            raise TrajectoryError(f"{path}: {e}") from None
