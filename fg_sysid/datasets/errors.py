"""Errors and shared keys of the log readers (a leaf module: `io` and `rosbag` both import it)."""

from __future__ import annotations

#: ``DataFrame.attrs`` key under which `fg_sysid.datasets.rosbag.read_bag_frame` leaves its report.
BAG_REPORT_ATTR = "fg_sysid.bag_report"


class LogError(ValueError):
    """A log file is unreadable or violates the schema (the message names file, column and row)."""
