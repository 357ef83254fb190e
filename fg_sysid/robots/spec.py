"""Robot spec files: describe any URDF for (floating-base) identification in one YAML file.

Format (every key is documented in docs/robot-spec.md)::

    name: my_quadruped            # optional, default: the file stem
    urdf: b1.urdf                 # relative to the YAML file (or absolute); or `catalog: b1` instead
    base: floating                # floating | fixed (required with `urdf`; default the catalog's)
    imu_frame: imu_link
    contacts:
      - {frame: FL_foot, type: point}     # point (3-D force) | 6d (wrench); a bare frame name = point
    contact_radius: 0.02          # m
    symmetry: {pairs: [[FL_, FR_], [RL_, RR_]], plane: xz}
    friction: {default: coulomb-viscous, joints: {FL_hip_joint: none}}
    locked_joints: {jointGripper: 0.0}    # value in rad / m, or null for the neutral position
    total_mass: 50.0              # kg
    loops:                        # closed loops: frames of the tree that coincide (issue 11)
      - {name: knee, frames: [rod_tip, calf_pin], type: point3d}   # point3d | 6d | planar (+ axis)
    actuation: {gear_ratios: {knee_motor: 10.0}, passive: [calf_joint, rod_joint], unencoded: [rod_joint]}

`RobotSpec.from_file` checks the file's structure (keys, types, enumerations); `RobotSpec.build` builds
the `RobotModel` and checks the names against it (frames, joints, symmetry prefixes). Every error is a
`RobotError` whose message starts with the file name and names the offending key and value.
With ``catalog:``, keys left out keep the catalog entry's values (e.g. the B1's feet and IMU).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .catalog import CATALOG, catalog_names
from .model import CONTACT_TYPES, DEFAULT_FRICTION_MODEL, FRICTION_MODELS, RobotError, RobotModel

BASE_TYPES = ("floating", "fixed")
SYMMETRY_PLANES = ("xz", "yz", "xy")
SPEC_KEYS = ("name", "urdf", "catalog", "base", "imu_frame", "contacts", "contact_radius", "symmetry",
             "friction", "locked_joints", "total_mass", "loops", "actuation")
_CONTACT_KEYS = ("frame", "type")
_SYMMETRY_KEYS = ("pairs", "plane")
_FRICTION_KEYS = ("default", "joints")


@dataclass(frozen=True)
class ContactSpec:
    """One contact: a frame of the model and its type (``point``: 3-D force, ``6d``: wrench)."""

    frame: str
    type: str = "point"


@dataclass(frozen=True)
class RobotSpec:
    """A parsed robot spec. ``None`` / empty fields mean "not given" (catalog value or model default)."""

    name: str
    urdf: Path | None = None
    catalog: str | None = None
    floating_base: bool | None = None
    imu_frame: str | None = None
    contacts: tuple[ContactSpec, ...] | None = None
    contact_radius: float | None = None
    symmetry_pairs: tuple[tuple[str, str], ...] | None = None
    symmetry_plane: str | None = None
    friction_default: str = DEFAULT_FRICTION_MODEL
    friction_joints: dict = field(default_factory=dict)
    locked_joints: dict = field(default_factory=dict)
    total_mass: float | None = None
    loops: tuple = ()  # `fg_sysid.robots.loops.LoopClosure`s
    actuation: object | None = None  # `fg_sysid.robots.loops.Actuation`
    path: Path | None = field(default=None, compare=False)

    # ------------------------------------------------------------------ parsing
    @classmethod
    def from_file(cls, path: str | Path) -> RobotSpec:
        """Read and check a spec file (structure only; names are checked by `build`)."""
        path = Path(path)
        if not path.is_file():
            raise RobotError(f"robot spec file not found: {path}")
        try:
            data = yaml.safe_load(path.read_text())
        except yaml.YAMLError as e:
            raise RobotError(f"{path}: not valid YAML: {e}") from None
        return cls.from_dict(data, path=path)

    @classmethod
    def from_dict(cls, data, path: str | Path | None = None, base_dir: str | Path | None = None) -> RobotSpec:
        """Check a spec mapping. Relative ``urdf`` paths are resolved against ``base_dir`` (default: the
        folder of ``path``, else the working directory); ``path`` names the source in error messages."""
        path = Path(path) if path is not None else None
        src = str(path) if path is not None else "robot spec"
        if base_dir is None:
            base_dir = path.parent if path is not None else Path(".")
        base_dir = Path(base_dir)

        def err(msg):
            return RobotError(f"{src}: {msg}")

        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise err(f"expected a mapping of keys ({', '.join(SPEC_KEYS)}), got {type(data).__name__}")
        unknown = [k for k in data if k not in SPEC_KEYS]
        if unknown:
            raise err(f"unknown key(s) {unknown}; allowed keys: {', '.join(SPEC_KEYS)}")

        name = data.get("name", path.stem if path is not None else None)
        if not isinstance(name, str) or not name:
            raise err(f"key 'name': expected a non-empty string, got {name!r}")

        urdf, catalog = data.get("urdf"), data.get("catalog")
        if urdf is not None and catalog is not None:
            raise err("give either key 'urdf' or key 'catalog', not both")
        if urdf is None and catalog is None:
            raise err("missing key 'urdf' (URDF path relative to the spec file) or 'catalog' (robot name)")
        urdf_path = None
        if urdf is not None:
            if not isinstance(urdf, str) or not urdf:
                raise err(f"key 'urdf': expected a file path, got {urdf!r}")
            urdf_path = Path(os.path.expanduser(urdf))
            if not urdf_path.is_absolute():
                urdf_path = base_dir / urdf_path
            urdf_path = Path(os.path.abspath(urdf_path))
            if not urdf_path.is_file():
                raise err(f"key 'urdf': URDF file not found: {urdf!r} (looked for {urdf_path})")
        if catalog is not None and (not isinstance(catalog, str) or catalog not in CATALOG):
            raise err(f"key 'catalog': unknown robot {catalog!r}; "
                      f"catalog robots: {', '.join(catalog_names())}")

        base = data.get("base")
        if base is None:
            if urdf is not None:
                raise err(f"missing key 'base' (one of {', '.join(BASE_TYPES)}) for a URDF robot")
            floating = None
        elif base not in BASE_TYPES:
            raise err(f"key 'base': unknown base type {base!r}; expected one of {', '.join(BASE_TYPES)}")
        else:
            floating = base == "floating"

        imu = data.get("imu_frame")
        if imu is not None and (not isinstance(imu, str) or not imu):
            raise err(f"key 'imu_frame': expected a frame name, got {imu!r}")

        contacts = None
        if "contacts" in data:
            contacts = _parse_contacts(data["contacts"], err)

        radius = data.get("contact_radius")
        if radius is not None:
            radius = _number(radius, "contact_radius", err)
            if radius < 0:
                raise err(f"key 'contact_radius': must be >= 0 (m), got {radius}")

        pairs = plane = None
        if "symmetry" in data:
            pairs, plane = _parse_symmetry(data["symmetry"], err)

        fdefault, fjoints = DEFAULT_FRICTION_MODEL, {}
        if "friction" in data:
            fdefault, fjoints = _parse_friction(data["friction"], err)

        locked = data.get("locked_joints") or {}
        if isinstance(locked, list):
            locked = {j: None for j in locked}
        if not isinstance(locked, dict):
            raise err(f"key 'locked_joints': expected a mapping joint -> value (or null), got {locked!r}")
        for j, v in locked.items():
            if not isinstance(j, str):
                raise err(f"key 'locked_joints': joint names must be strings, got {j!r}")
            if v is not None:
                locked[j] = _number(v, f"locked_joints.{j}", err)

        mass = data.get("total_mass")
        if mass is not None:
            mass = _number(mass, "total_mass", err)
            if mass <= 0:
                raise err(f"key 'total_mass': must be > 0 (kg), got {mass}")

        from .loops import parse_actuation, parse_loops  # closed loops (issue 11)

        loops = parse_loops(data.get("loops"), err)
        actuation = parse_actuation(data.get("actuation"), err)
        return cls(
            name=name, urdf=urdf_path, catalog=catalog, floating_base=floating, imu_frame=imu,
            contacts=contacts, contact_radius=radius, symmetry_pairs=pairs, symmetry_plane=plane,
            friction_default=fdefault, friction_joints=fjoints, locked_joints=dict(locked), total_mass=mass,
            loops=loops, actuation=actuation, path=path,
        )

    # ------------------------------------------------------------------ writing
    def to_dict(self, base_dir: str | Path | None = None) -> dict:
        """The spec as a YAML-ready mapping; ``urdf`` is written relative to ``base_dir`` when given."""
        out: dict = {"name": self.name}
        if self.catalog is not None:
            out["catalog"] = self.catalog
        if self.urdf is not None:
            u = os.path.abspath(self.urdf)
            out["urdf"] = os.path.relpath(u, os.path.abspath(base_dir)) if base_dir is not None else u
        if self.floating_base is not None:
            out["base"] = "floating" if self.floating_base else "fixed"
        if self.imu_frame is not None:
            out["imu_frame"] = self.imu_frame
        if self.contacts is not None:
            out["contacts"] = [{"frame": c.frame, "type": c.type} for c in self.contacts]
        if self.contact_radius is not None:
            out["contact_radius"] = self.contact_radius
        if self.symmetry_pairs is not None:
            out["symmetry"] = None  # `symmetry: null` drops a catalog's symmetry
            if self.symmetry_pairs:
                out["symmetry"] = {"pairs": [list(p) for p in self.symmetry_pairs],
                                   "plane": self.symmetry_plane or "xz"}
        if self.friction_default != DEFAULT_FRICTION_MODEL or self.friction_joints:
            out["friction"] = {"default": self.friction_default, "joints": dict(self.friction_joints)}
        if self.locked_joints:
            out["locked_joints"] = dict(self.locked_joints)
        if self.total_mass is not None:
            out["total_mass"] = self.total_mass
        if self.loops:
            out["loops"] = [c.to_dict() for c in self.loops]
        if self.actuation is not None:
            out["actuation"] = self.actuation.to_dict()
        return out

    def save(self, path: str | Path) -> Path:
        """Write the spec as YAML (``urdf`` relative to the new file's folder)."""
        path = Path(path)
        path.write_text(yaml.safe_dump(self.to_dict(base_dir=path.parent), sort_keys=False))
        return path

    # ------------------------------------------------------------------ building
    def build(self, floating_base: bool | None = None, locked_joints: dict | None = None) -> RobotModel:
        """The `RobotModel` this spec describes; names (frames, joints, prefixes) are checked against it.

        ``floating_base`` overrides the spec's ``base``; ``locked_joints`` adds to its ``locked_joints``.
        """
        src = str(self.path) if self.path is not None else f"robot spec {self.name!r}"

        def err(msg):
            return RobotError(f"{src}: {msg}")

        fb = self.floating_base if floating_base is None else bool(floating_base)
        locks = dict(self.locked_joints)
        locks.update(locked_joints or {})
        try:
            if self.catalog is not None:
                kw = {} if fb is None else {"floating_base": fb}
                robot = RobotModel.from_catalog(self.catalog, **kw)
            else:
                robot = RobotModel.from_urdf(self.urdf, floating_base=bool(fb))
        except (RobotError, FileNotFoundError, KeyError) as e:
            raise err(e.args[0] if e.args else str(e)) from None
        unknown = [j for j in locks if not robot.model.existJointName(j) and j not in robot.locked_joints]
        if unknown:
            raise err(f"key 'locked_joints': unknown joint(s) {unknown}; joints: {list(robot.joint_names)}")
        if self.catalog is not None and any(j in robot.locked_joints for j in locks):
            # re-lock on the full model so a catalog-locked joint takes the spec's value
            kw = {} if fb is None else {"floating_base": fb}
            robot = RobotModel.from_catalog(self.catalog, locked_joints=locks, **kw)
        elif locks:
            robot = robot.lock(locks)
        robot = _replace_name(robot, self.name)

        meta: dict = {"spec_path": self.path}
        frames = robot.model
        if self.imu_frame is not None:
            if not frames.existFrame(self.imu_frame):
                raise err(f"key 'imu_frame': frame {self.imu_frame!r} is not in the model; "
                          f"{_frame_hint(robot, self.imu_frame)}")
            meta["imu_frame"] = self.imu_frame
        if self.contacts is not None:
            for i, c in enumerate(self.contacts):
                if not frames.existFrame(c.frame):
                    raise err(f"key 'contacts[{i}].frame': frame {c.frame!r} is not in the model; "
                              f"{_frame_hint(robot, c.frame)}")
            meta["contact_frames"] = tuple(c.frame for c in self.contacts)
            meta["contact_types"] = tuple(c.type for c in self.contacts)
        if self.contact_radius is not None:
            meta["contact_radius"] = float(self.contact_radius)
        if self.symmetry_pairs is not None:
            names = robot.body_names + robot.joint_names
            for lp, rp in self.symmetry_pairs:
                for pref in (lp, rp):
                    if not any(n.startswith(pref) for n in names):
                        raise err(f"key 'symmetry.pairs': prefix {pref!r} (pair [{lp!r}, {rp!r}]) matches no "
                                  f"body or joint; bodies: {list(robot.body_names)}")
            meta["symmetry_pairs"] = tuple(self.symmetry_pairs)
        if self.symmetry_plane is not None:
            meta["symmetry_plane"] = self.symmetry_plane
        if self.friction_joints or self.friction_default != DEFAULT_FRICTION_MODEL:
            for j in self.friction_joints:
                if j not in robot.joint_names:
                    why = "is locked" if j in robot.locked_joints else "is not a movable joint of the model"
                    raise err(f"key 'friction.joints': joint {j!r} {why}; joints: {list(robot.joint_names)}")
            meta["friction_models"] = tuple(self.friction_joints.get(j, self.friction_default)
                                            for j in robot.joint_names)
        if self.total_mass is not None:
            meta["total_mass"] = float(self.total_mass)
        if self.loops:
            meta["loops"] = tuple(self.loops)
        if self.actuation is not None:
            meta["actuation"] = self.actuation
        try:
            robot = robot.with_metadata(**meta)
            robot.symmetry_map()  # partners exist for every prefixed name
        except RobotError as e:
            raise err(str(e)) from None
        return robot


def load_spec(path: str | Path) -> RobotSpec:
    """Shorthand for `RobotSpec.from_file`."""
    return RobotSpec.from_file(path)


# ---------------------------------------------------------------------- helpers
def _replace_name(robot: RobotModel, name: str) -> RobotModel:
    import dataclasses

    return robot if robot.name == name else dataclasses.replace(robot, name=name)


def _frame_hint(robot: RobotModel, frame: str) -> str:
    names = [f.name for f in robot.model.frames]
    low = frame.lower()
    close = [n for n in names if low in n.lower() or n.lower() in low][:8]
    if close:
        return f"similar frames: {close}"
    return f"frames: {names[:20]}{' ...' if len(names) > 20 else ''}"


def _number(v, key: str, err) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise err(f"key '{key}': expected a finite number, got {v!r}")
    return float(v)


def _parse_contacts(raw, err) -> tuple[ContactSpec, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise err(f"key 'contacts': expected a list of {{frame: ..., type: point|6d}}, got {raw!r}")
    out = []
    for i, c in enumerate(raw):
        if isinstance(c, str):
            c = {"frame": c}
        if not isinstance(c, dict):
            raise err(f"key 'contacts[{i}]': expected {{frame: ..., type: point|6d}}, got {c!r}")
        bad = [k for k in c if k not in _CONTACT_KEYS]
        if bad:
            raise err(f"key 'contacts[{i}]': unknown key(s) {bad}; allowed: {', '.join(_CONTACT_KEYS)}")
        frame = c.get("frame")
        if not isinstance(frame, str) or not frame:
            raise err(f"key 'contacts[{i}].frame': expected a frame name, got {frame!r}")
        ctype = c.get("type", "point")
        ctype = ctype.lower() if isinstance(ctype, str) else ctype
        if ctype not in CONTACT_TYPES:
            raise err(f"key 'contacts[{i}].type': unknown contact type {ctype!r} (frame {frame!r}); "
                      f"expected one of {', '.join(CONTACT_TYPES)}")
        out.append(ContactSpec(frame, ctype))
    frames = [c.frame for c in out]
    dup = sorted({f for f in frames if frames.count(f) > 1})
    if dup:
        raise err(f"key 'contacts': frame(s) {dup} listed more than once")
    return tuple(out)


def _parse_symmetry(raw, err) -> tuple[tuple[tuple[str, str], ...], str | None]:
    if raw is None or raw == {}:  # `symmetry: null`: no mirrored limbs (overrides a catalog's)
        return (), None
    if not isinstance(raw, dict):
        raise err(f"key 'symmetry': expected {{pairs: [[left, right], ...], plane: xz}}, got {raw!r}")
    bad = [k for k in raw if k not in _SYMMETRY_KEYS]
    if bad:
        raise err(f"key 'symmetry': unknown key(s) {bad}; allowed: {', '.join(_SYMMETRY_KEYS)}")
    pairs = raw.get("pairs")
    if not isinstance(pairs, list) or not pairs:
        raise err(f"key 'symmetry.pairs': expected a non-empty list of [left_prefix, right_prefix], "
                  f"got {pairs!r}")
    out = []
    for i, p in enumerate(pairs):
        if (not isinstance(p, (list, tuple)) or len(p) != 2
                or not all(isinstance(x, str) and x for x in p) or p[0] == p[1]):
            raise err(f"key 'symmetry.pairs[{i}]': expected two different name prefixes [left, right], "
                      f"got {p!r}")
        out.append((p[0], p[1]))
    plane = raw.get("plane", "xz")
    if plane not in SYMMETRY_PLANES:
        raise err(f"key 'symmetry.plane': unknown plane {plane!r}; "
                  f"expected one of {', '.join(SYMMETRY_PLANES)}")
    return tuple(out), plane


def _parse_friction(raw, err) -> tuple[str, dict]:
    if isinstance(raw, str):
        raw = {"default": raw}
    if not isinstance(raw, dict):
        raise err(f"key 'friction': expected {{default: ..., joints: {{joint: model}}}}, got {raw!r}")
    bad = [k for k in raw if k not in _FRICTION_KEYS]
    if bad:
        raise err(f"key 'friction': unknown key(s) {bad}; allowed: {', '.join(_FRICTION_KEYS)}")
    default = raw.get("default", DEFAULT_FRICTION_MODEL)
    if default not in FRICTION_MODELS:
        raise err(f"key 'friction.default': unknown friction model {default!r}; "
                  f"expected one of {', '.join(FRICTION_MODELS)}")
    joints = raw.get("joints") or {}
    if not isinstance(joints, dict):
        raise err(f"key 'friction.joints': expected a mapping joint -> model, got {joints!r}")
    joints = {j: ("none" if m is None else m) for j, m in joints.items()}  # `joint: null` = no friction
    for j, m in joints.items():
        if m not in FRICTION_MODELS:
            raise err(f"key 'friction.joints.{j}': unknown friction model {m!r}; "
                      f"expected one of {', '.join(FRICTION_MODELS)}")
    return default, {str(j): m for j, m in joints.items()}


def load_robot(name_or_path, **kwargs) -> RobotModel:
    """A catalog name (``z1``, ``panda``, ...), a URDF file, a robot spec file (``.yaml``, see
    docs/robot-spec.md) or an MJCF file (``.xml``: closures from its equality constraints,
    `fg_sysid.robots.mjcf_loops`). Keyword arguments: ``floating_base``, ``locked_joints`` (and, for
    URDFs and catalog names, those of `RobotModel.from_urdf`)."""
    p = Path(str(name_or_path))
    if p.suffix.lower() in (".yaml", ".yml"):
        return RobotSpec.from_file(p).build(**kwargs)
    if p.suffix.lower() == ".xml":  # MJCF with equality constraints (closed loops, issue 11)
        from .mjcf_loops import robot_from_mjcf

        robot = robot_from_mjcf(p)
        return robot.lock(kwargs["locked_joints"]) if kwargs.get("locked_joints") else robot
    return RobotModel.from_name(name_or_path, **kwargs)
