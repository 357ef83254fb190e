"""GTSAM keys (symbols) used by fg-sysid factors, defined in one place.

* ``X(k)`` — the state of knot k: the tangent-space stack (q, v, a) of size 3·nv, stored as a vector
  (for fixed bases q itself; the free-flyer base will carry its own manifold key).
* ``P(0)`` — the global parameter vector θ (unconstrained coordinates, see `fg_sysid.layout`).
"""

from __future__ import annotations

from gtsam.symbol_shorthand import P, X

THETA = P(0)


def state(k: int) -> int:
    """Key of knot k's state (q, v, a)."""
    return X(k)


__all__ = ["THETA", "state", "P", "X"]
