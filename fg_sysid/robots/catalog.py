"""Catalog of named robots: where their URDF lives and which joints are locked by default.

The URDFs come from the ``example-robot-data`` wheel, which ships the robot files but no Python
module (see ../shared/notes/measured-facts.md); they live under
``<site-packages>/cmeel.prefix/share/example-robot-data/robots/``.
"""

from __future__ import annotations

import site
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class CatalogEntry:
    """A named robot: URDF path relative to example-robot-data's ``robots`` folder.

    ``extra`` holds `RobotModel` metadata applied by ``RobotModel.from_catalog``: ``contact_frames``,
    ``contact_types``, ``contact_radius``, ``imu_frame``, ``symmetry_pairs``, ``symmetry_plane``,
    ``total_mass`` (see `RobotModel.with_metadata`).
    """

    urdf: str
    description: str
    locked_joints: tuple[str, ...] = ()
    floating_base: bool = False
    extra: dict = field(default_factory=dict)
    #: Programmatic robots (no URDF): ``builder(floating_base=...) -> pin.Model``.
    builder: Callable | None = None


#: Unitree B1: four point-contact feet (0.02 m spheres, as in datasets/mujoco_sim.py), IMU, mirrored legs.
_B1_EXTRA = {
    "contact_frames": ("FL_foot", "FR_foot", "RL_foot", "RR_foot"),
    "contact_types": ("point",) * 4,
    "contact_radius": 0.02,
    "imu_frame": "imu_link",
    "symmetry_pairs": (("FL_", "FR_"), ("RL_", "RR_")),
    "symmetry_plane": "xz",
}

CATALOG: dict[str, CatalogEntry] = {
    "double_pendulum": CatalogEntry(
        "double_pendulum_description/urdf/double_pendulum.urdf", "planar 2-DoF pendulum"
    ),
    "z1": CatalogEntry(
        "z1_description/urdf/z1.urdf",
        "Unitree Z1 6-DoF arm (gripper joint locked at 0)",
        locked_joints=("jointGripper",),
    ),
    "z1_gripper": CatalogEntry("z1_description/urdf/z1.urdf", "Unitree Z1 arm with its gripper joint"),
    "panda": CatalogEntry(
        "panda_description/urdf/panda.urdf",
        "Franka Panda 7-DoF arm (finger joints locked at 0)",
        locked_joints=("panda_finger_joint1", "panda_finger_joint2"),
    ),
    "b1": CatalogEntry("b1_description/urdf/b1.urdf", "Unitree B1 quadruped (free-flyer base)",
                       floating_base=True, extra=dict(_B1_EXTRA)),
    "b1_z1": CatalogEntry("b1_description/urdf/b1-z1.urdf",
                          "Unitree B1 quadruped with a Z1 arm (free-flyer base)", floating_base=True,
                          extra=dict(_B1_EXTRA)),
    "ur10": CatalogEntry("ur_description/urdf/ur10_robot.urdf", "Universal Robots UR10"),
    "ur5": CatalogEntry("ur_description/urdf/ur5_robot.urdf", "Universal Robots UR5"),
    "so101": CatalogEntry("so_arm_description/urdf/so101.urdf", "SO-101 hobby arm"),
    "tiago": CatalogEntry("tiago_description/robots/tiago.urdf", "PAL TIAGo (mobile base fixed)"),
}


def _paper003(name: str) -> Callable:
    def build(floating_base: bool = False):
        from . import paper003

        return paper003.BUILDERS[name](floating_base=floating_base)

    return build


#: Programmatic catalog robots (built from kinematic data, see robots/paper003.py); name -> entry.
PROGRAMMATIC: dict[str, CatalogEntry] = {
    "puma560": CatalogEntry("", "PUMA 560 of paper 003 (DH data, gear ratio 5)",
                            builder=_paper003("puma560")),
    "scara": CatalogEntry("", "SCARA (RRPR) of paper 003 (DH data, gear ratio 5)",
                          builder=_paper003("scara")),
    "cheetah3_leg": CatalogEntry(
        "", "MIT Cheetah 3 leg of paper 003 (torso fixed; --floating-base: free torso)",
        builder=_paper003("cheetah3_leg"),
    ),
}
CATALOG.update(PROGRAMMATIC)


def example_robot_data_root() -> Path:
    """Folder holding example-robot-data's robots (``.../share/example-robot-data/robots``)."""
    candidates = list(site.getsitepackages()) + [site.getusersitepackages()] + list(sys.path)
    for base in candidates:
        p = Path(base) / "cmeel.prefix" / "share" / "example-robot-data" / "robots"
        if p.is_dir():
            return p
    raise FileNotFoundError(
        "example-robot-data's robot files were not found under any site-packages "
        "(expected cmeel.prefix/share/example-robot-data/robots); install the 'example-robot-data' wheel"
    )


def catalog_names() -> list[str]:
    return sorted(CATALOG)


def resolve_catalog(name: str) -> tuple[Path, CatalogEntry]:
    """Return (URDF path, entry) for a catalog robot, or raise KeyError naming the known robots."""
    if name not in CATALOG:
        raise KeyError(f"unknown robot {name!r}; catalog robots: {', '.join(catalog_names())}")
    entry = CATALOG[name]
    path = example_robot_data_root() / entry.urdf
    if not path.is_file():
        raise FileNotFoundError(f"robot {name!r}: URDF {path} is missing from example-robot-data")
    return path, entry


# ---------------------------------------------------------------------------------------------- closed loops
def _looped_builder(name: str) -> Callable:
    def build(floating_base: bool = False):
        import pinocchio as pin

        from .loop_specs import DATA_DIR

        path = str(DATA_DIR / f"{name}.urdf")
        return pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer()) if floating_base \
            else pin.buildModelFromUrdf(path)

    return build


def _looped_extra(name: str, base: dict | None = None) -> dict:
    """``loops``/``actuation`` metadata of a looped robot from its spec (robots/looped.py)."""
    from .loop_specs import SPECS
    from .loops import parse_actuation, parse_loops

    spec = SPECS[name]()

    def err(msg):
        return ValueError(f"looped robot {name!r}: {msg}")

    extra = dict(base or {})
    extra["loops"] = parse_loops(spec.get("loops"), err)
    act = parse_actuation(spec.get("actuation"), err)
    if act is not None:
        extra["actuation"] = act
    return extra


#: Robots with closed kinematic loops (issue 11; docs/loops.md): tree URDFs in robots/data/loops.
LOOPED: dict[str, CatalogEntry] = {
    "fourbar": CatalogEntry("", "planar four-bar (crank actuated; coupler, rocker passive)",
                            builder=_looped_builder("fourbar"), extra=_looped_extra("fourbar")),
    "b1_leg_fourbar": CatalogEntry("", "B1 front-left leg on a fixed trunk, knee driven through a four-bar",
                                   builder=_looped_builder("b1_leg_fourbar"),
                                   extra=_looped_extra("b1_leg_fourbar")),
    "b1_leg_serial": CatalogEntry("", "B1 front-left leg on a fixed trunk (serial chain: reduced model)",
                                  builder=_looped_builder("b1_leg_serial")),
    "b1_fourbar": CatalogEntry("", "Unitree B1 with four-bar knees on all legs (free-flyer base)",
                               floating_base=True, builder=_looped_builder("b1_fourbar"),
                               extra=_looped_extra("b1_fourbar", _B1_EXTRA)),
}
CATALOG.update(LOOPED)
