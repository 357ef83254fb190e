"""A small looped robot for tests, examples and the estimator's checks: a planar four-bar (issue 11).

Crank (actuated, joint ``crank_joint`` at the origin), coupler (passive, ``coupler_joint`` at the crank
tip, **no encoder**) and rocker (passive, encoded, ``rocker_joint`` at (d, 0, 0)); every joint turns
about the world y axis, so the mechanism moves in the vertical xz plane under gravity −z. The tree is
cut at the coupler–rocker pin: frames ``coupler_tip`` and ``rocker_tip`` coincide (a ``point3d``
closure; ``planar`` with axis y works as well). Joint placements are chosen so that q = 0 is an assembled
configuration (crank at ``crank_angle`` from the x axis).

The URDF is written with yourdfpy (no XML templates); `planar_fourbar` returns the `RobotModel` with its
loops and actuation, `write_fourbar_spec` a URDF + robot spec pair for ``fg-sysid identify --robot``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .loops import Actuation, LoopClosure

#: link lengths [m]: crank, coupler, rocker, ground (Grashof crank-rocker: 0.1 + 0.3 < 0.25 + 0.3)
FOURBAR_LENGTHS = (0.1, 0.3, 0.25, 0.3)
FOURBAR_MASSES = (0.6, 0.4, 0.5)  # kg: crank, coupler, rocker
FOURBAR_JOINTS = ("crank_joint", "coupler_joint", "rocker_joint")


def fourbar_angles(crank_angle: float = 1.0, lengths=FOURBAR_LENGTHS) -> tuple[float, float, float]:
    """Absolute link angles (crank, coupler, rocker) [rad, about −y: x axis → (cos φ, 0, sin φ) in the xz
    plane] of the assembled four-bar at a crank angle (the "elbow-up" branch)."""
    L1, L2, L3, d = lengths
    B = np.array([L1 * np.cos(crank_angle), L1 * np.sin(crank_angle)])
    D = np.array([d, 0.0])
    dist = np.linalg.norm(D - B)
    # C: |C − B| = L2, |C − D| = L3 (circle intersection, upper solution)
    x = (L2 ** 2 - L3 ** 2 + dist ** 2) / (2 * dist)
    h = np.sqrt(max(L2 ** 2 - x ** 2, 0.0))
    e = (D - B) / dist
    C = B + x * e + h * np.array([-e[1], e[0]])
    phi2 = np.arctan2(C[1] - B[1], C[0] - B[0])
    phi3 = np.arctan2(C[1] - D[1], C[0] - D[0])
    return float(crank_angle), float(phi2), float(phi3)


def _rod_inertial(yourdfpy, mass: float, length: float):
    """A slender rod along x from the joint: COM at L/2, inertia about the COM (kg·m²)."""
    T = np.eye(4)
    T[0, 3] = length / 2
    i_t = mass * length ** 2 / 12
    return yourdfpy.Inertial(origin=T, mass=mass, inertia=np.diag([1e-5 * mass, i_t, i_t]))


def _origin(xyz, pitch: float = 0.0) -> np.ndarray:
    # URDF rpy (0, pitch, 0) is a rotation about +y; the link angle φ of `fourbar_angles` (about −y,
    # counter-clockwise in the (x, z) plane) is pitch = −φ
    c, s = np.cos(pitch), np.sin(pitch)
    T = np.array([[c, 0, s, 0], [0, 1, 0, 0], [-s, 0, c, 0], [0, 0, 0, 1.0]])
    T[:3, 3] = xyz
    return T


def write_fourbar_urdf(path: str | Path, crank_angle: float = 1.0, lengths=FOURBAR_LENGTHS,
                       masses=FOURBAR_MASSES) -> Path:
    """Write the planar four-bar's tree as a URDF (yourdfpy) and return its path."""
    import yourdfpy

    L1, L2, L3, d = lengths
    p1, p2, p3 = fourbar_angles(crank_angle, lengths)
    y = np.array([0.0, 1.0, 0.0])
    lim = yourdfpy.Limit(effort=50.0, velocity=30.0, lower=-2 * np.pi, upper=2 * np.pi)
    # nominal (datasheet-like) friction: the prior's centre, not the simulations' truth
    motor = yourdfpy.Dynamics(damping=0.01, friction=0.05)
    pin_joint = yourdfpy.Dynamics(damping=0.002, friction=0.005)
    links = [yourdfpy.Link("base"),
             yourdfpy.Link("crank", inertial=_rod_inertial(yourdfpy, masses[0], L1)),
             yourdfpy.Link("coupler", inertial=_rod_inertial(yourdfpy, masses[1], L2)),
             yourdfpy.Link("rocker", inertial=_rod_inertial(yourdfpy, masses[2], L3)),
             yourdfpy.Link("coupler_tip"), yourdfpy.Link("rocker_tip")]
    joints = [
        yourdfpy.Joint("crank_joint", "revolute", "base", "crank", _origin([0, 0, 0], -p1), -y, limit=lim,
                       dynamics=motor),
        yourdfpy.Joint("coupler_joint", "revolute", "crank", "coupler", _origin([L1, 0, 0], -(p2 - p1)), -y,
                       limit=lim, dynamics=pin_joint),
        yourdfpy.Joint("rocker_joint", "revolute", "base", "rocker", _origin([d, 0, 0], -p3), -y, limit=lim,
                       dynamics=pin_joint),
        yourdfpy.Joint("coupler_tip_joint", "fixed", "coupler", "coupler_tip", _origin([L2, 0, 0])),
        yourdfpy.Joint("rocker_tip_joint", "fixed", "rocker", "rocker_tip", _origin([L3, 0, 0])),
    ]
    urdf = yourdfpy.URDF(robot=yourdfpy.Robot(name="fourbar", links=links, joints=joints),
                         build_scene_graph=False, load_meshes=False)
    path = Path(path)
    urdf.write_xml_file(str(path))
    return path


def fourbar_loop(kind: str = "point3d") -> LoopClosure:
    return LoopClosure("fourbar", ("coupler_tip", "rocker_tip"), kind, "y" if kind == "planar" else None)


def fourbar_actuation(gear: float = 10.0) -> Actuation:
    return Actuation({"crank_joint": gear}, ("coupler_joint", "rocker_joint"), ("coupler_joint",))


def planar_fourbar(folder: str | Path, kind: str = "point3d", gear: float = 10.0, crank_angle: float = 1.0):
    """The four-bar `RobotModel` (URDF written into ``folder``) with its closure and actuation."""
    from .model import RobotModel

    urdf = write_fourbar_urdf(Path(folder) / "fourbar.urdf", crank_angle)
    return RobotModel.from_urdf(urdf).with_metadata(loops=(fourbar_loop(kind),),
                                                    actuation=fourbar_actuation(gear))


def write_fourbar_spec(folder: str | Path, kind: str = "point3d", gear: float = 10.0) -> Path:
    """URDF + robot spec YAML (keys ``loops`` and ``actuation``) in ``folder``; returns the spec path."""
    import yaml

    folder = Path(folder)
    write_fourbar_urdf(folder / "fourbar.urdf")
    spec = {"name": "fourbar", "urdf": "fourbar.urdf", "base": "fixed",
            "loops": [fourbar_loop(kind).to_dict()], "actuation": fourbar_actuation(gear).to_dict()}
    path = folder / "fourbar.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path
