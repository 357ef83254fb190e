"""Shared test helper: central-difference Jacobians (the oracle every factor's analytic Jacobian meets)."""

import numpy as np

EPS = 1e-6


def central_diff(f, x, eps=EPS):
    """Columns ∂f/∂x_i by central differences; ``f`` returns an array of any shape."""
    x = np.asarray(x, dtype=float)
    cols = []
    for i in range(x.size):
        d = np.zeros_like(x)
        d.flat[i] = eps
        cols.append((np.asarray(f(x + d)) - np.asarray(f(x - d))) / (2 * eps))
    return np.stack(cols, axis=-1)
