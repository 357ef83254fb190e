"""Payload identification with guaranteed bounds (issue 16, paper 002): problem, bounds, truth harness."""

from .bounds import BOUND_MODES, PayloadBounds, compute_bounds, estimate, estimate_joint
from .problem import (
           DataContradictBounds,
           NoiseBounds,
           PayloadError,
           PayloadProblem,
           RobotPrior,
           compose_payload,
)

__all__ = ["BOUND_MODES", "DataContradictBounds", "NoiseBounds", "PayloadBounds", "PayloadError",
           "PayloadProblem", "RobotPrior", "compose_payload", "compute_bounds", "estimate",
           "estimate_joint"]
