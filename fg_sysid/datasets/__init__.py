"""Datasets: the `Log` contract, log I/O, excitation trajectories and simulation with known truth."""

from .excitation import FourierTrajectory, TrajectoryError
from .io import LogError, load_log_for_robot, log_to_frame, read_log, write_frame, write_log
from .log import Log
from .simulate import (
    SimResult,
    SimulationError,
    friction_torque,
    is_physically_consistent,
    parameter_names,
    simulate,
    truth_arrays,
    truth_model,
    write_simulation,
)

__all__ = [
    "FourierTrajectory", "Log", "LogError", "SimResult", "SimulationError", "TrajectoryError",
    "friction_torque", "is_physically_consistent", "load_log_for_robot", "log_to_frame", "parameter_names",
    "read_log", "simulate", "truth_arrays", "truth_model", "write_frame", "write_log", "write_simulation",
]
