"""Robot descriptions: `RobotModel` over a private Pinocchio model, the robot catalog and robot spec files."""

from .catalog import CATALOG, catalog_names, example_robot_data_root
from .model import (
    CONTACT_TYPES,
    DEFAULT_FRICTION_MODEL,
    FRICTION_MODELS,
    INERTIAL_SUFFIXES,
    RobotError,
    RobotModel,
)
from .spec import BASE_TYPES, ContactSpec, RobotSpec, load_robot, load_spec

__all__ = [
    "BASE_TYPES", "CATALOG", "CONTACT_TYPES", "DEFAULT_FRICTION_MODEL", "FRICTION_MODELS",
    "INERTIAL_SUFFIXES", "ContactSpec", "RobotError", "RobotModel", "RobotSpec", "catalog_names",
    "example_robot_data_root", "load_robot", "load_spec",
]
