"""Robot descriptions: `RobotModel` over a private Pinocchio model, and the robot catalog."""

from .catalog import CATALOG, catalog_names, example_robot_data_root
from .model import INERTIAL_SUFFIXES, RobotError, RobotModel, load_robot

__all__ = [
    "CATALOG", "INERTIAL_SUFFIXES", "RobotError", "RobotModel", "catalog_names",
    "example_robot_data_root", "load_robot",
]
