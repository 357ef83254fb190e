"""Piecewise degree-5 Bézier joint trajectories (paper 002 Sec. V / ARMOUR's trajectory family).

A trajectory is a chain of ``m`` quintic pieces of equal duration T through waypoints with given position,
velocity and acceleration (quintic Hermite form), so it is C² everywhere; it starts and ends at rest
(v = a = 0 at the first and last waypoints). Piece i from (p0, v0, a0) to (p1, v1, a1) has the Bézier
control points

    P0 = p0,  P1 = p0 + v0 T/5,  P2 = p0 + 2 v0 T/5 + a0 T²/20,
    P3 = p1 − 2 v1 T/5 + a1 T²/20,  P4 = p1 − v1 T/5,  P5 = p1.

The curve stays in the convex hull of its control points, and its velocity is the quartic Bézier curve
with control points 5 (P_{j+1} − P_j)/T — so position and velocity limits checked on the control points
hold in **continuous time** (`bounds`), unlike limits checked at sampled instants.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import comb

import numpy as np


def _bernstein(n: int, s: np.ndarray) -> np.ndarray:
    """Bernstein basis of degree n at s ∈ [0, 1]: (len(s), n + 1)."""
    s = np.asarray(s, float)[:, None]
    j = np.arange(n + 1)[None, :]
    return np.array([comb(n, k) for k in range(n + 1)])[None, :] * s ** j * (1 - s) ** (n - j)


@dataclass(frozen=True)
class BezierTrajectory:
    """C² chain of quintic Bézier pieces through waypoints.

    Attributes:
        q, v, a: waypoint positions [rad | m], velocities, accelerations, each (m + 1, n_joints); the
            first and last waypoints must be at rest (v = a = 0).
        piece_duration: T [s] of every piece; the trajectory lasts m·T and holds the last waypoint after.
        joint_names: names of the columns.
    """

    q: np.ndarray
    v: np.ndarray
    a: np.ndarray
    piece_duration: float
    joint_names: tuple = ()

    def __post_init__(self):
        for name in ("q", "v", "a"):
            object.__setattr__(self, name, np.atleast_2d(np.asarray(getattr(self, name), float)))
        if not (self.q.shape == self.v.shape == self.a.shape) or self.q.shape[0] < 2:
            raise ValueError("waypoints q, v, a must have the same shape (m + 1 >= 2, n_joints)")
        if not self.piece_duration > 0:
            raise ValueError(f"piece_duration must be > 0, got {self.piece_duration}")

    @property
    def n_joints(self) -> int:
        return self.q.shape[1]

    @property
    def pieces(self) -> int:
        return self.q.shape[0] - 1

    @property
    def duration(self) -> float:
        return self.pieces * self.piece_duration

    def control_points(self) -> np.ndarray:
        """(pieces, 6, n_joints) Bézier control points (module docstring)."""
        T = self.piece_duration
        p0, v0, a0 = self.q[:-1], self.v[:-1], self.a[:-1]
        p1, v1, a1 = self.q[1:], self.v[1:], self.a[1:]
        return np.stack([p0, p0 + v0 * T / 5, p0 + 2 * v0 * T / 5 + a0 * T * T / 20,
                         p1 - 2 * v1 * T / 5 + a1 * T * T / 20, p1 - v1 * T / 5, p1], axis=1)

    def bounds(self) -> dict:
        """Continuous-time bounds from the control points: q_min, q_max (n,), v_max (n,) = max |q̇|."""
        P = self.control_points()
        V = 5.0 * np.diff(P, axis=1) / self.piece_duration
        return {"q_min": P.min(axis=(0, 1)), "q_max": P.max(axis=(0, 1)), "v_max": np.abs(V).max(axis=(0, 1))}

    def evaluate(self, t) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """q, v, a at times t [s] (each (len(t), n_joints)); before 0 / after the end: the end waypoints."""
        t = np.clip(np.atleast_1d(np.asarray(t, float)), 0.0, self.duration)
        T = self.piece_duration
        i = np.minimum((t // T).astype(int), self.pieces - 1)
        s = t / T - i
        P = self.control_points()[i]  # (len(t), 6, n)
        d1 = 5.0 * np.diff(P, axis=1) / T
        d2 = 4.0 * np.diff(d1, axis=1) / T
        q = np.einsum("kj,kjn->kn", _bernstein(5, s), P)
        v = np.einsum("kj,kjn->kn", _bernstein(4, s), d1)
        a = np.einsum("kj,kjn->kn", _bernstein(3, s), d2)
        return q, v, a

    def scaled_about(self, centre: np.ndarray, s) -> BezierTrajectory:
        """Amplitude scaled by ``s`` (scalar or per joint) about ``centre``: q → c + s (q − c), v → s v,
        a → s a (the control points scale the same way, so the bounds scale too)."""
        c = np.asarray(centre, float)
        return BezierTrajectory(c + s * (self.q - c), s * self.v, s * self.a, self.piece_duration,
                                self.joint_names)


def rest_to_rest(interior_q: np.ndarray, interior_v: np.ndarray, interior_a: np.ndarray, start: np.ndarray,
                 piece_duration: float, joint_names=()) -> BezierTrajectory:
    """A trajectory from ``start`` at rest through the interior waypoints back to ``start`` at rest."""
    n = start.size
    z = np.zeros((1, n))
    q = np.vstack([start[None], np.reshape(interior_q, (-1, n)), start[None]])
    v = np.vstack([z, np.reshape(interior_v, (-1, n)), z])
    a = np.vstack([z, np.reshape(interior_a, (-1, n)), z])
    return BezierTrajectory(q, v, a, piece_duration, tuple(joint_names))
