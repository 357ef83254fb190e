"""Robots with closed kinematic loops (issue 11): a planar four-bar and B1-style legs whose knee is
driven through a four-bar linkage, as *tree* URDFs plus the agreed ``loops``/``actuation`` spec keys.

Each robot is a tree (the loop is cut at one joint; the two frames that must coincide are massless
links on fixed joints, i.e. Pinocchio frames) written with yourdfpy's URDF objects, and a spec YAML
with the ``loops`` and ``actuation`` keys (docs/loops.md). The files live in
``fg_sysid/robots/data/loops/`` (`write_loop_robots` regenerates them; a test checks they are current).

* ``fourbar`` — planar crank–rocker in the x–z plane (joints about y, gravity along −z): ``crank_joint``
  (actuated) at the origin, ``coupler_joint`` (passive, unencoded) at the crank tip, ``rocker_joint``
  (passive, encoded) at the ground pivot D = (0.30, 0, 0) m; closure ``coupler_tip`` ≡ ``rocker_tip``
  (planar, axis y). Link lengths a, b, c, d = 0.10, 0.30, 0.25, 0.30 m (Grashof: s + l ≤ p + q, the crank
  turns fully). Links are steel bars 20 × 10 mm (ρ = 7850 kg/m³): mass ρ·A·L, box inertia about the COM.
* ``b1_leg_fourbar`` — the front-left leg of example-robot-data's ``b1.urdf`` on a fixed trunk
  (``FL_hip_joint``, ``FL_thigh_joint`` actuated) whose knee is driven by ``FL_knee_motor`` — a motor at
  the hip (the URDF's ``FL_calf_rotor`` sits there), coaxial with the thigh joint — through a crank
  (r = 0.040 m, at −0.6 rad from the lever's direction at the reference posture) and a rod to a lever on
  the calf (d = 0.040 m from the knee axis): ``FL_calf_joint`` (passive, encoded), ``FL_rod_joint``
  (passive, unencoded); closure ``FL_rod_tip`` ≡ ``FL_calf_pin`` (planar in the leg plane, axis y). The
  transmission Jacobian dq_calf/dq_motor varies from 1.12 (motor at −1.0 rad) through 0.84 (−1.5, the
  standing posture) to 0.52 (−2.0): unitary near −1.2 rad, a torque gain as the knee folds (as in paper
  004 Fig. 13 c). Motor limit: B1's knee limit 140 N·m. B1 link inertias are the URDF's; crank and rod
  are steel bars (crank 20 × 10 mm, rod 12 × 8 mm).
* ``b1_fourbar`` — the whole B1 (free-flyer base) with the same linkage on all four knees; the B1
  catalog entry's feet, IMU and left/right symmetry.

Frames: every joint frame keeps the parent's orientation at q = 0 (all linkage joints turn about the
thigh's y axis); lengths in m, masses in kg, inertias in kg·m² about the COM in the URDF.
"""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import yaml

from .loop_specs import (  # noqa: F401  (re-exported)
    DATA_DIR,
    LEGS,
    b1_fourbar_spec,
    b1_leg_serial_spec,
    b1_leg_spec,
    fourbar_spec,
)

LOOP_ROBOTS = ("fourbar", "b1_leg_fourbar", "b1_fourbar")

STEEL = 7850.0  # kg/m^3
FOURBAR = {"a": 0.10, "b": 0.30, "c": 0.25, "d": 0.30, "section": (0.020, 0.010)}
#: B1 knee linkage: crank radius r, calf lever d, crank/rod sections (m), the reference posture q_ref
#: (rad; knee motor = calf = q_ref, rod angle 0) at which the crank points at crank_offset and the lever
#: at lever_offset from the thigh's +x axis (rotations about y).
B1_LINKAGE = {"r": 0.040, "d": 0.040, "crank_offset": -0.6, "lever_offset": 0.0,
              "crank_section": (0.020, 0.010), "rod_section": (0.012, 0.008),
              "q_ref": -1.5, "thigh_length": 0.35}
KNEE_EFFORT = 140.0  # N·m: B1's knee motor limit
FOURBAR_EFFORT = 20.0


class LoopRobotError(ValueError):
    """Unknown looped robot or missing spec file (malformed ``loops``/``actuation`` keys are spec errors,
    `fg_sysid.robots.loops.parse_loops`)."""


# ------------------------------------------------------------------------------------------- geometry
def _T(xyz=(0.0, 0.0, 0.0), R=None) -> np.ndarray:
    T = np.eye(4)
    T[:3, 3] = xyz
    if R is not None:
        T[:3, :3] = R
    return T


def roty(a: float) -> np.ndarray:
    """Rotation about y by ``a`` [rad] (the joints of the linkages)."""
    c, s = np.cos(a), np.sin(a)
    return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])


def bar_inertial(start, end, section, density: float = STEEL):
    """yourdfpy ``Inertial`` of a solid rectangular bar from ``start`` to ``end`` (m, link frame) with
    cross-section ``section`` = (width along y, height) [m]: mass ρ·A·L, box inertia about the COM."""
    import yourdfpy

    start, end = np.asarray(start, float), np.asarray(end, float)
    u = end - start
    L = float(np.linalg.norm(u))
    w, h = section
    m = density * w * h * L
    ex = u / L
    ey = np.array([0.0, 1.0, 0.0])
    ez = np.cross(ex, ey)
    R = np.column_stack([ex, ey, ez])
    I_bar = m / 12.0 * np.diag([w**2 + h**2, L**2 + h**2, L**2 + w**2])
    I = R @ I_bar @ R.T
    return yourdfpy.Inertial(origin=_T(0.5 * (start + end)), mass=m, inertia=0.5 * (I + I.T))


def _joint(name, parent, child, xyz, axis=(0.0, 1.0, 0.0), effort=None, lower=None, upper=None,
           velocity=None, kind="revolute"):
    import yourdfpy

    limit = None
    if kind == "revolute":
        limit = yourdfpy.Limit(effort=effort, velocity=velocity, lower=lower, upper=upper)
    return yourdfpy.Joint(name=name, type=kind, parent=parent, child=child, origin=_T(xyz),
                          axis=None if kind == "fixed" else np.asarray(axis, float), limit=limit,
                          dynamics=yourdfpy.Dynamics(damping=0.0, friction=0.0) if kind != "fixed" else None)


def fourbar_assembly(a, b, c, d) -> np.ndarray:
    """Coupler–rocker joint C (x, 0, z) [m] at crank angle 0 (crank tip B = (a, 0, 0), rocker pivot
    D = (d, 0, 0)): the circle intersection |C − B| = b, |C − D| = c on the z > 0 branch."""
    B, D = np.array([a, 0.0]), np.array([d, 0.0])
    e = np.linalg.norm(D - B)
    x = (b**2 - c**2 + e**2) / (2 * e)
    h = np.sqrt(b**2 - x**2)
    u = (D - B) / e
    p = B + x * u + h * np.array([-u[1], u[0]])
    if p[1] < 0:
        p = B + x * u - h * np.array([-u[1], u[0]])
    return np.array([p[0], 0.0, p[1]])


def fourbar_urdf():
    """The planar four-bar as a yourdfpy ``URDF`` (see the module docstring)."""
    import yourdfpy

    g = FOURBAR
    a, b, c, d, sec = g["a"], g["b"], g["c"], g["d"], g["section"]
    B, D = np.array([a, 0.0, 0.0]), np.array([d, 0.0, 0.0])
    C = fourbar_assembly(a, b, c, d)
    links = [
        yourdfpy.Link("ground"),
        yourdfpy.Link("crank", inertial=bar_inertial([0, 0, 0], B, sec)),
        yourdfpy.Link("coupler", inertial=bar_inertial([0, 0, 0], C - B, sec)),
        yourdfpy.Link("rocker", inertial=bar_inertial([0, 0, 0], C - D, sec)),
        yourdfpy.Link("coupler_tip"),
        yourdfpy.Link("rocker_tip"),
    ]
    lim = dict(effort=FOURBAR_EFFORT, velocity=20.0)
    joints = [
        _joint("crank_joint", "ground", "crank", [0, 0, 0], lower=-3.14, upper=3.14, **lim),
        _joint("coupler_joint", "crank", "coupler", B, lower=-3.14, upper=3.14, **lim),
        _joint("rocker_joint", "ground", "rocker", D, lower=-3.14, upper=3.14, **lim),
        _joint("coupler_tip_fixed", "coupler", "coupler_tip", C - B, kind="fixed"),
        _joint("rocker_tip_fixed", "rocker", "rocker_tip", C - D, kind="fixed"),
    ]
    return yourdfpy.URDF(robot=yourdfpy.Robot(name="fourbar", links=links, joints=joints),
                         build_scene_graph=False, load_meshes=False)


# -------------------------------------------------------------------------------------------- B1 legs
def _b1_source():
    import yourdfpy

    from .catalog import resolve_catalog

    path, _ = resolve_catalog("b1")
    return yourdfpy.URDF.load(str(path), build_scene_graph=False, build_collision_scene_graph=False,
                              load_meshes=False, load_collision_meshes=False)


def _linkage(leg: str):
    """Links and joints of one leg's knee linkage (in the thigh frame, linkage plane y = 0)."""
    import yourdfpy

    g = B1_LINKAGE
    r, d, q0, L = g["r"], g["d"], g["q_ref"], g["thigh_length"]
    K = np.array([0.0, 0.0, -L])                      # knee axis in the thigh frame
    # at the reference posture (thigh frame): crank tip B = r·u(α), lever point C = K + d·u(φ), with
    # u(ψ) = R_y(ψ) x̂ (α = crank_offset, φ = lever_offset; 0 = along the thigh's +x)
    B_ref = roty(g.get("crank_offset", 0.0)) @ np.array([r, 0.0, 0.0])
    C_ref = K + roty(g.get("lever_offset", 0.0)) @ np.array([d, 0.0, 0.0])
    b_crank = roty(-q0) @ B_ref                       # in the crank frame (R_y(q0) at the reference)
    c_calf = roty(-q0) @ (C_ref - K)                  # in the calf frame
    rod_tip = roty(-q0) @ (C_ref - B_ref)             # rod frame = crank orientation at rod angle 0
    effort = dict(effort=KNEE_EFFORT, velocity=15.55 * 1.5)
    links = [
        yourdfpy.Link(f"{leg}_crank", inertial=bar_inertial([0, 0, 0], b_crank, g["crank_section"])),
        yourdfpy.Link(f"{leg}_rod", inertial=bar_inertial([0, 0, 0], rod_tip, g["rod_section"])),
        yourdfpy.Link(f"{leg}_rod_tip"),
        yourdfpy.Link(f"{leg}_calf_pin"),
    ]
    joints = [
        _joint(f"{leg}_knee_motor", f"{leg}_thigh", f"{leg}_crank", [0, 0, 0], lower=-2.6, upper=-0.6,
               **effort),
        _joint(f"{leg}_rod_joint", f"{leg}_crank", f"{leg}_rod", b_crank, lower=-1.5, upper=1.5, **effort),
        _joint(f"{leg}_rod_tip_fixed", f"{leg}_rod", f"{leg}_rod_tip", rod_tip, kind="fixed"),
        _joint(f"{leg}_calf_pin_fixed", f"{leg}_calf", f"{leg}_calf_pin", c_calf, kind="fixed"),
    ]
    return links, joints


def _strip(link):
    link = copy.deepcopy(link)
    link.visuals, link.collisions = [], []
    return link


def b1_fourbar_urdf(legs=LEGS, name: str = "b1_fourbar"):
    """B1 (example-robot-data) with four-bar knees on ``legs``; other legs dropped. Visual/collision
    meshes are removed (the estimator and the MuJoCo builder use neither)."""
    import yourdfpy

    src = _b1_source().robot
    drop = tuple(x for x in LEGS if x not in legs)
    keep = lambda s: not any(s.startswith(f"{x}_") for x in drop)  # noqa: E731
    links = [_strip(lk) for lk in src.links if keep(lk.name)]
    joints = [copy.deepcopy(j) for j in src.joints if keep(j.name) and keep(j.child)]
    for leg in legs:
        lk, jt = _linkage(leg)
        links += lk
        joints += jt
    return yourdfpy.URDF(robot=yourdfpy.Robot(name=name, links=links, joints=joints),
                         build_scene_graph=False, load_meshes=False)


def b1_leg_serial_urdf():
    """B1's front-left leg on a fixed trunk without the linkage (the serial chain of the catalog B1)."""
    import yourdfpy

    full = b1_fourbar_urdf(legs=("FL",), name="b1_leg_serial").robot
    linkage = {"FL_crank", "FL_rod", "FL_rod_tip", "FL_calf_pin"}
    links = [lk for lk in full.links if lk.name not in linkage]
    joints = [j for j in full.joints if j.child not in linkage]
    return yourdfpy.URDF(robot=yourdfpy.Robot(name="b1_leg_serial", links=links, joints=joints),
                         build_scene_graph=False, load_meshes=False)


GENERATORS = {
    "fourbar": (fourbar_urdf, fourbar_spec),
    "b1_leg_fourbar": (lambda: b1_fourbar_urdf(legs=("FL",), name="b1_leg_fourbar"), b1_leg_spec),
    "b1_leg_serial": (b1_leg_serial_urdf, b1_leg_serial_spec),
    "b1_fourbar": (b1_fourbar_urdf, b1_fourbar_spec),
}

_HEADER = ("# Generated by fg_sysid.robots.looped.write_loop_robots (do not edit; docs/loops.md).\n"
           "# Tree URDF + closures (loops) + actuated/passive/encoded joints (actuation).\n")


def write_loop_robots(out_dir: str | Path = DATA_DIR) -> list[Path]:
    """(Re)write ``<name>.urdf`` and ``<name>.yaml`` of every looped robot into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, (urdf_fn, spec_fn) in GENERATORS.items():
        u = urdf_fn()
        p = out / f"{name}.urdf"
        u.write_xml_file(str(p))
        y = out / f"{name}.yaml"
        y.write_text(_HEADER + yaml.safe_dump(spec_fn(), sort_keys=False))
        written += [p, y]
    return written


def loop_robot_path(name: str) -> Path:
    """Spec YAML of a looped robot (``fourbar``, ``b1_leg_fourbar``, ``b1_leg_serial``, ``b1_fourbar``)
    or the given path when it is a YAML file."""
    p = Path(str(name))
    if p.suffix.lower() in (".yaml", ".yml"):
        if not p.is_file():
            raise LoopRobotError(f"robot spec file not found: {p}")
        return p
    if name not in GENERATORS:
        raise LoopRobotError(f"unknown looped robot {name!r}; known: {', '.join(GENERATORS)}")
    return DATA_DIR / f"{name}.yaml"


def load_loop_robot(name: str, **kwargs):
    """The `RobotModel` (tree + ``loops`` + ``actuation``, `fg_sysid.robots.loops`) of a looped robot name
    or spec YAML; ``kwargs`` go to `RobotSpec.build`."""
    from .spec import RobotSpec

    path = loop_robot_path(name)
    return RobotSpec.from_dict(yaml.safe_load(path.read_text()) or {}, path=path).build(**kwargs)
