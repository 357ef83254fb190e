"""Cross products for stacks of 3-vectors, the building blocks of the batched factor kernels.

The kernels of :mod:`.contact`, :mod:`.imu` and :mod:`.contact_forces` call Pinocchio once per knot,
stack its raw outputs (positions, spatial velocities, derivative matrices) over knots, and do the
3-D algebra for all knots at once with these helpers: explicit component formulas, which numpy evaluates
as a handful of whole-array operations (``np.cross`` and 3×3 skew-matrix products per knot cost
microseconds each in Python overhead).
"""

from __future__ import annotations

import numpy as np


def cross(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    """w × x for stacks of 3-vectors: w, x (..., 3) (broadcast) -> (..., 3)."""
    w0, w1, w2 = w[..., 0], w[..., 1], w[..., 2]
    x0, x1, x2 = x[..., 0], x[..., 1], x[..., 2]
    return np.stack([w1 * x2 - w2 * x1, w2 * x0 - w0 * x2, w0 * x1 - w1 * x0], axis=-1)


def cross_cols(w: np.ndarray, M: np.ndarray) -> np.ndarray:
    """[w]× M for stacks: w (..., 3), M (..., 3, n) -> (..., 3, n), i.e. w × M[..., :, j] for every column."""
    w0, w1, w2 = w[..., 0, None], w[..., 1, None], w[..., 2, None]
    M0, M1, M2 = M[..., 0, :], M[..., 1, :], M[..., 2, :]
    return np.stack([w1 * M2 - w2 * M1, w2 * M0 - w0 * M2, w0 * M1 - w1 * M0], axis=-2)
