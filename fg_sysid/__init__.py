"""fg-sysid: factor-graph system identification of robot physical parameters jointly with the state."""

__version__ = "0.1.0"
