"""Spec mappings (``loops``/``actuation`` and the other keys) of the looped robots of `robots.looped`.

Pure data (no imports from fg_sysid), so that `robots.catalog` can register the looped robots without an
import cycle; the URDFs live in `DATA_DIR` (written by `robots.looped.write_loop_robots`).
"""

from __future__ import annotations

from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent / "data" / "loops"
LEGS = ("FL", "FR", "RL", "RR")


def fourbar_spec() -> dict:
    return {
        "name": "fourbar",
        "urdf": "fourbar.urdf",
        "base": "fixed",
        "loops": [{"name": "fourbar", "frames": ["coupler_tip", "rocker_tip"], "type": "planar",
                   "axis": "y"}],
        "actuation": {"gear_ratios": {"crank_joint": 1.0}, "passive": ["coupler_joint", "rocker_joint"],
                      "unencoded": ["coupler_joint"]},
    }


def _b1_actuation(legs) -> dict:
    motors = ("hip_joint", "thigh_joint", "knee_motor")
    return {"gear_ratios": {f"{leg}_{j}": 1.0 for leg in legs for j in motors},
            "passive": [f"{leg}_{j}" for leg in legs for j in ("calf_joint", "rod_joint")],
            "unencoded": [f"{leg}_rod_joint" for leg in legs]}


def _b1_loops(legs) -> list:
    return [{"name": f"{leg}_knee_fourbar", "frames": [f"{leg}_rod_tip", f"{leg}_calf_pin"], "type": "planar",
             "axis": "y"} for leg in legs]


def b1_leg_spec() -> dict:
    return {"name": "b1_leg_fourbar", "urdf": "b1_leg_fourbar.urdf", "base": "fixed",
            "loops": _b1_loops(("FL",)), "actuation": _b1_actuation(("FL",))}


def b1_leg_serial_spec() -> dict:
    """The reduced model of `b1_leg_fourbar`: B1's serial FL leg (knee torque = calf torque)."""
    return {"name": "b1_leg_serial", "urdf": "b1_leg_serial.urdf", "base": "fixed"}


def b1_fourbar_spec() -> dict:
    return {"name": "b1_fourbar", "urdf": "b1_fourbar.urdf", "base": "floating", "imu_frame": "imu_link",
            "contacts": [{"frame": f"{leg}_foot", "type": "point"} for leg in LEGS], "contact_radius": 0.02,
            "symmetry": {"pairs": [["FL_", "FR_"], ["RL_", "RR_"]], "plane": "xz"},
            "loops": _b1_loops(LEGS), "actuation": _b1_actuation(LEGS)}


#: spec mapping of each looped robot, by name
SPECS = {"fourbar": fourbar_spec, "b1_leg_fourbar": b1_leg_spec, "b1_leg_serial": b1_leg_serial_spec,
         "b1_fourbar": b1_fourbar_spec}
