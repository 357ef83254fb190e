"""Identifiability analysis: exact structural identifiability (RPNA, paper 003) and numerical checks."""

from .rpna import (
    DEFAULT_RTOL,
    BaseParameters,
    BodyResult,
    IdentifiabilityWarning,
    Rotor,
    RPNAResult,
    default_rotors,
    rpna,
)

__all__ = [
    "DEFAULT_RTOL", "BaseParameters", "BodyResult", "IdentifiabilityWarning", "RPNAResult", "Rotor",
    "default_rotors", "rpna",
]
