"""Factors of the fg-sysid graph: residual functions (`kinematics`, `inverse_dynamics`) and their
GTSAM wrappers (`gtsam_factors`)."""

from .gtsam_factors import (
    check_factor_jacobians,
    encoder_factor,
    integration_factor,
    inverse_dynamics_factor,
    make_noise_model,
    parameter_prior_factor,
    velocity_factor,
)
from .keys import THETA, state

__all__ = [
    "THETA",
    "check_factor_jacobians",
    "encoder_factor",
    "integration_factor",
    "inverse_dynamics_factor",
    "make_noise_model",
    "parameter_prior_factor",
    "state",
    "velocity_factor",
]
