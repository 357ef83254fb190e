"""`RobotModel`: an immutable description of a robot over a private Pinocchio model.

Conventions are Pinocchio's: configuration ``q`` (size ``nq``), velocity ``v`` and acceleration ``a``
(size ``nv``), joint frames, dynamic parameters per body in the order
``(m, mc_x, mc_y, mc_z, I_xx, I_xy, I_yy, I_xz, I_yz, I_zz)`` with the rotational inertia expressed
about the body (joint) frame origin. Units are SI.

A ``RobotModel`` owns its Pinocchio model and never writes into it; code that needs other inertial
parameters asks for a copy (`pinocchio_model_with`).
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pinocchio as pin

from .catalog import CATALOG, resolve_catalog

#: Contact models: ``point`` (3-D force at the contact point) or ``6d`` (6-D wrench at the contact frame).
CONTACT_TYPES = ("point", "6d")
#: Joint friction models; ``coulomb-viscous`` is the default (parameters ``fc`` and ``fv``).
FRICTION_MODELS = ("coulomb-viscous", "viscous", "none")
DEFAULT_FRICTION_MODEL = "coulomb-viscous"

#: Fields describing sensors, contacts and priors; carried over unchanged by `RobotModel.lock`.
_META_FIELDS = ("contact_frames", "contact_types", "contact_radius", "imu_frame", "symmetry_pairs",
                "symmetry_plane", "total_mass", "spec_path",
                "loops", "actuation")  # closed loops (issue 11): `fg_sysid.robots.loops`

#: Suffixes of the 10 inertial parameters of a body, in Pinocchio's dynamic-parameter order.
INERTIAL_SUFFIXES = ("m", "mcx", "mcy", "mcz", "ixx", "ixy", "iyy", "ixz", "iyz", "izz")


class RobotError(ValueError):
    """A robot description could not be built or does not match the data (message names the culprit)."""


@dataclass(frozen=True, eq=False)
class RobotModel:
    """Immutable robot description.

    Attributes:
        name: catalog name or URDF stem.
        model: the Pinocchio model (read-only by contract; use `pinocchio_model_with` for a modified copy).
        urdf_path: source URDF file.
        floating_base: True when the root joint is a free flyer.
        joint_names: names of the movable joints in velocity order (one per 1-DoF joint).
        body_names: per inertia-carrying body (Pinocchio joints 1..njoints-1), the URDF link that carries it.
        locked_joints: joints removed from the model, with the value (rad or m) they were locked at.
        urdf_friction, urdf_damping: Coulomb (N·m) and viscous (N·m·s/rad) values read from the URDF.
        contact_frames: frames where the robot touches the environment (e.g. the feet), and
        contact_types: per contact frame, ``point`` (3-D force) or ``6d`` (wrench).
        contact_radius: foot sphere radius [m]: the contact point is this far below the frame origin.
        imu_frame: frame of the IMU (None: no IMU declared).
        symmetry_pairs: ``(left prefix, right prefix)`` pairs of mirrored limbs (see `symmetry_map`),
        symmetry_plane: their reflection plane (``xz``, ``yz`` or ``xy``).
        friction_models: per joint in ``joint_names`` order, one of `FRICTION_MODELS`; empty = all
            ``coulomb-viscous`` (see `joint_friction_models`).
        total_mass: known total mass [kg], or None.
        spec_path: the robot spec file (YAML) the model was built from, if any.
        loops: closures of the tree (`fg_sysid.robots.loops.LoopClosure`), () for a tree robot.
        actuation: `fg_sysid.robots.loops.Actuation` (gear ratios, passive and unencoded joints), or
            None (every joint actuated, gear 1, encoded).
    """

    name: str
    model: pin.Model
    urdf_path: Path | None
    floating_base: bool
    joint_names: tuple[str, ...]
    body_names: tuple[str, ...]
    locked_joints: dict = field(default_factory=dict)
    urdf_friction: np.ndarray = field(default_factory=lambda: np.zeros(0))
    urdf_damping: np.ndarray = field(default_factory=lambda: np.zeros(0))
    contact_frames: tuple[str, ...] = ()
    contact_types: tuple[str, ...] = ()
    contact_radius: float = 0.0
    imu_frame: str | None = None
    symmetry_pairs: tuple = ()
    symmetry_plane: str = "xz"
    friction_models: tuple[str, ...] = ()
    total_mass: float | None = None
    spec_path: Path | None = None
    loops: tuple = ()
    actuation: object | None = None

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_name(cls, name_or_path: str | Path, **kwargs) -> RobotModel:
        """A catalog name (``z1``, ``panda``, ...) or a path to a URDF file (robot spec files:
        `fg_sysid.robots.load_robot`)."""
        p = Path(str(name_or_path))
        if p.suffix.lower() in (".yaml", ".yml"):
            raise RobotError(f"{p} is a robot spec file: load it with fg_sysid.robots.load_robot")
        if p.suffix.lower() == ".urdf" or p.is_file():
            if not p.is_file():
                raise RobotError(f"URDF file not found: {p}")
            return cls.from_urdf(p, **kwargs)
        try:
            return cls.from_catalog(str(name_or_path), **kwargs)
        except KeyError as e:
            raise RobotError(str(e.args[0])) from None

    @classmethod
    def from_catalog(cls, name: str, locked_joints: dict | None = None, **kwargs) -> RobotModel:
        entry = CATALOG.get(name)
        if entry is not None and entry.builder is not None:  # programmatic robot (no URDF)
            fb = bool(kwargs.pop("floating_base", entry.floating_base))
            robot = cls._from_pinocchio(entry.builder(floating_base=fb), name, None, fb, {})
            robot = robot.with_metadata(**_catalog_metadata(entry))
            return robot.lock(locked_joints) if locked_joints else robot
        path, entry = resolve_catalog(name)
        locks = {j: None for j in entry.locked_joints}
        locks.update(locked_joints or {})
        robot = cls.from_urdf(
            path, name=name, floating_base=kwargs.pop("floating_base", entry.floating_base), **kwargs,
        ).with_metadata(**_catalog_metadata(entry))
        return robot.lock(locks) if locks else robot

    @classmethod
    def from_urdf(
        cls,
        path: str | Path,
        name: str | None = None,
        floating_base: bool = False,
        locked_joints: dict | None = None,
    ) -> RobotModel:
        """Build from a URDF. ``locked_joints`` maps joint name -> value (None = neutral)."""
        path = Path(path)
        try:
            if floating_base:
                full = pin.buildModelFromUrdf(str(path), pin.JointModelFreeFlyer())
            else:
                full = pin.buildModelFromUrdf(str(path))
        except Exception as e:  # pinocchio raises plain RuntimeError/ValueError
            raise RobotError(f"cannot parse URDF {path}: {e}") from None
        robot = cls._from_pinocchio(full, name or path.stem, path, floating_base, {})
        if locked_joints:
            robot = robot.lock(locked_joints)
        return robot

    @classmethod
    def _from_pinocchio(cls, model, name, path, floating_base, locked) -> RobotModel:
        joint_names = []
        for j in range(1, model.njoints):
            jm = model.joints[j]
            if floating_base and j == 1:
                continue
            if jm.nv != 1:
                raise RobotError(
                    f"joint {model.names[j]!r} has {jm.nv} DoF; only 1-DoF joints (revolute, prismatic, "
                    "continuous) are supported below the root"
                )
            joint_names.append(model.names[j])
        body_names = []
        for j in range(1, model.njoints):
            frames = [f.name for f in model.frames if f.type == pin.FrameType.BODY and f.parentJoint == j]
            body_names.append(frames[0] if frames else model.names[j])
        idx = [model.joints[model.getJointId(n)].idx_v for n in joint_names]
        return cls(
            name=name,
            model=model,
            urdf_path=path,
            floating_base=floating_base,
            joint_names=tuple(joint_names),
            body_names=tuple(body_names),
            locked_joints=dict(locked),
            urdf_friction=np.array(model.friction)[idx].copy(),
            urdf_damping=np.array(model.damping)[idx].copy(),
        )

    def lock(self, joints: dict | list | tuple) -> RobotModel:
        """Return a reduced model with ``joints`` fixed (dict name -> value or None for neutral)."""
        if not isinstance(joints, dict):
            joints = {j: None for j in joints}
        unknown = [j for j in joints if not self.model.existJointName(j)]
        if unknown:
            raise RobotError(
                f"cannot lock unknown joint(s) {unknown} of robot {self.name!r}; "
                f"joints: {list(self.joint_names)}"
            )
        q_ref = pin.neutral(self.model)
        ids = []
        values = {}
        for jn, val in joints.items():
            jid = self.model.getJointId(jn)
            jm = self.model.joints[jid]
            if val is not None:
                if jm.nq != 1:
                    raise RobotError(f"locking joint {jn!r} at a value needs a 1-DoF joint")
                q_ref[jm.idx_q] = float(val)
            values[jn] = float(q_ref[jm.idx_q]) if jm.nq == 1 else None
            ids.append(jid)
        reduced = pin.buildReducedModel(self.model, ids, q_ref)
        locked = dict(self.locked_joints)
        locked.update(values)
        out = RobotModel._from_pinocchio(reduced, self.name, self.urdf_path, self.floating_base, locked)
        meta = {f: getattr(self, f) for f in _META_FIELDS}
        if self.friction_models:
            by_name = dict(zip(self.joint_names, self.friction_models, strict=True))
            meta["friction_models"] = tuple(by_name[j] for j in out.joint_names)
        return dataclasses.replace(out, **meta)

    def with_metadata(self, **changes) -> RobotModel:
        """A copy with contact/IMU/symmetry/friction-model/mass fields replaced, validated against the model.

        Keys: any of ``contact_frames``, ``contact_types``, ``contact_radius``, ``imu_frame``,
        ``symmetry_pairs``, ``symmetry_plane``, ``friction_models``, ``total_mass``, ``spec_path``.
        """
        bad = sorted(set(changes) - set(_META_FIELDS) - {"friction_models"})
        if bad:
            raise TypeError(f"with_metadata: not a metadata field: {bad}")
        if "contact_frames" in changes:
            changes["contact_frames"] = tuple(changes["contact_frames"])
            if "contact_types" not in changes:
                changes["contact_types"] = ("point",) * len(changes["contact_frames"])
        for key in ("contact_types", "friction_models"):
            if key in changes:
                changes[key] = tuple(changes[key])
        if "symmetry_pairs" in changes:
            changes["symmetry_pairs"] = tuple(tuple(p) for p in changes["symmetry_pairs"])
        if "loops" in changes:
            changes["loops"] = tuple(changes["loops"])
        out = dataclasses.replace(self, **changes)
        out._validate_metadata()
        return out

    def _validate_metadata(self) -> None:
        who = f"robot {self.name!r}"
        if len(self.contact_types) != len(self.contact_frames):
            raise RobotError(f"{who}: {len(self.contact_frames)} contact frames but "
                             f"{len(self.contact_types)} contact types")
        for f in self.contact_frames + ((self.imu_frame,) if self.imu_frame else ()):
            if not self.model.existFrame(f):
                raise RobotError(f"{who}: frame {f!r} is not in the model")
        for t in self.contact_types:
            if t not in CONTACT_TYPES:
                raise RobotError(f"{who}: unknown contact type {t!r}; expected one of {list(CONTACT_TYPES)}")
        if self.friction_models:
            if len(self.friction_models) != self.n_joints:
                raise RobotError(f"{who}: {len(self.friction_models)} friction models for "
                                 f"{self.n_joints} joints")
            for m in self.friction_models:
                if m not in FRICTION_MODELS:
                    raise RobotError(f"{who}: unknown friction model {m!r}; expected one of "
                                     f"{list(FRICTION_MODELS)}")
        if not (np.isfinite(self.contact_radius) and self.contact_radius >= 0):
            raise RobotError(f"{who}: contact_radius must be >= 0, got {self.contact_radius}")
        if self.total_mass is not None and not (np.isfinite(self.total_mass) and self.total_mass > 0):
            raise RobotError(f"{who}: total_mass must be > 0, got {self.total_mass}")
        if self.loops or self.actuation is not None:  # closed loops (issue 11)
            from .loops import loop_problems

            problems = loop_problems(self, who)
            if problems:
                raise RobotError(problems[0])

    # ------------------------------------------------------------------ contacts, symmetry, friction
    def joint_friction_models(self) -> tuple[str, ...]:
        """Friction model per joint (``joint_names`` order); ``coulomb-viscous`` unless set otherwise."""
        return self.friction_models or (DEFAULT_FRICTION_MODEL,) * self.n_joints

    def symmetry_map(self):
        """`SymmetryMap` of the mirrored limbs (``symmetry_pairs``, ``symmetry_plane``), or None if unset."""
        if not self.symmetry_pairs:
            return None
        from .symmetry import SymmetryMap

        try:
            return SymmetryMap.from_names(self, pairs=list(self.symmetry_pairs), plane=self.symmetry_plane)
        except ValueError as e:
            raise RobotError(f"robot {self.name!r}: symmetry: {e}") from None

    # ------------------------------------------------------------------ sizes and layout
    @property
    def nq(self) -> int:
        return self.model.nq

    @property
    def nv(self) -> int:
        return self.model.nv

    @property
    def n_joints(self) -> int:
        """Number of 1-DoF movable joints (excludes a free-flyer root)."""
        return len(self.joint_names)

    @property
    def n_bodies(self) -> int:
        """Number of inertia-carrying bodies (Pinocchio joints 1..njoints-1)."""
        return self.model.njoints - 1

    def inertial_parameter_names(self) -> list[str]:
        return [f"{b}.{s}" for b in self.body_names for s in INERTIAL_SUFFIXES]

    def parameter_names(self, friction_suffixes: tuple[str, ...] = ("fc", "fv")) -> list[str]:
        """Physical parameter names: inertial per body, friction per joint, armature per joint."""
        names = self.inertial_parameter_names()
        names += [f"{j}.{s}" for j in self.joint_names for s in friction_suffixes]
        names += [f"{j}.armature" for j in self.joint_names]
        return names

    def nominal_inertial_parameters(self) -> np.ndarray:
        """URDF inertial parameters, shape (n_bodies, 10), Pinocchio dynamic-parameter order."""
        return np.array([self.model.inertias[j].toDynamicParameters() for j in range(1, self.model.njoints)])

    def pinocchio_model_with(self, inertial: np.ndarray) -> pin.Model:
        """A copy of the Pinocchio model whose body inertias are ``inertial`` (n_bodies, 10)."""
        m = self.model.copy()
        self.write_inertias(m, inertial)
        return m

    def write_inertias(self, model: pin.Model, inertial: np.ndarray) -> None:
        """Write (n_bodies, 10) dynamic parameters into ``model`` (a model the caller owns)."""
        inertial = np.asarray(inertial, dtype=float).reshape(self.n_bodies, 10)
        for j in range(1, model.njoints):
            model.inertias[j] = pin.Inertia.FromDynamicParameters(inertial[j - 1])

    # ------------------------------------------------------------------ joints
    def joint_index_v(self) -> np.ndarray:
        """Velocity index of each named joint (excludes the free-flyer's 6 entries)."""
        return np.array([self.model.joints[self.model.getJointId(n)].idx_v for n in self.joint_names], int)

    def joint_index_q(self) -> np.ndarray:
        return np.array([self.model.joints[self.model.getJointId(n)].idx_q for n in self.joint_names], int)

    def position_limits(self) -> tuple[np.ndarray, np.ndarray]:
        """Lower/upper limits of the named joints; URDFs without limits get [-pi, pi]."""
        iq = self.joint_index_q()
        lo = np.array(self.model.lowerPositionLimit)[iq].copy()
        hi = np.array(self.model.upperPositionLimit)[iq].copy()
        bad = ~np.isfinite(lo) | ~np.isfinite(hi) | (hi - lo <= 1e-9) | (np.abs(hi - lo) > 1e6)
        lo[bad], hi[bad] = -np.pi, np.pi
        return lo, hi

    def velocity_limits(self) -> np.ndarray:
        vl = np.array(self.model.velocityLimit)[self.joint_index_v()].copy()
        vl[~np.isfinite(vl) | (vl <= 0) | (vl > 1e6)] = 3.0
        return vl

    def effort_limits(self) -> np.ndarray:
        el = np.array(self.model.effortLimit)[self.joint_index_v()].copy()
        el[~np.isfinite(el) | (el <= 0) | (el > 1e6)] = np.inf
        return el

    def neutral(self) -> np.ndarray:
        return pin.neutral(self.model)

    def describe(self) -> str:
        lines = [f"robot {self.name}: nq={self.nq} nv={self.nv}, {self.n_bodies} bodies, "
                 f"{'floating' if self.floating_base else 'fixed'} base"]
        lines.append("  joints: " + ", ".join(self.joint_names))
        if self.locked_joints:
            lines.append("  locked: " + ", ".join(f"{k}={v}" for k, v in self.locked_joints.items()))
        if self.contact_frames:
            lines.append("  contacts: " + ", ".join(
                f"{f} ({t})" for f, t in zip(self.contact_frames, self.contact_types, strict=True))
                + (f", radius {self.contact_radius:g} m" if self.contact_radius else ""))
        if self.imu_frame:
            lines.append(f"  imu: {self.imu_frame}")
        if self.symmetry_pairs:
            lines.append("  symmetry: " + ", ".join(f"{a}<->{b}" for a, b in self.symmetry_pairs)
                         + f" (plane {self.symmetry_plane})")
        if self.friction_models and any(m != DEFAULT_FRICTION_MODEL for m in self.friction_models):
            others = DEFAULT_FRICTION_MODEL in self.friction_models
            lines.append("  friction: " + ", ".join(
                f"{j}={m}" for j, m in zip(self.joint_names, self.friction_models, strict=True)
                if m != DEFAULT_FRICTION_MODEL) + (f" (others {DEFAULT_FRICTION_MODEL})" if others else ""))
        if self.total_mass is not None:
            lines.append(f"  total mass: {self.total_mass:g} kg (known)")
        if self.spec_path is not None:
            lines.append(f"  spec: {self.spec_path}")
        for c in self.loops:
            lines.append(f"  loop {c.name}: {c.frames[0]} = {c.frames[1]} ({c.type}"
                         + (f", axis {c.axis})" if c.axis else ")"))
        if self.actuation is not None and (self.actuation.passive or self.actuation.unencoded):
            lines.append(f"  passive: {', '.join(self.actuation.passive) or '-'}; unencoded: "
                         f"{', '.join(self.actuation.unencoded) or '-'}")
        return "\n".join(lines)

    def warn_locked(self, reason: str) -> None:
        if self.locked_joints:
            warnings.warn(
                f"robot {self.name}: joints locked ({reason}): "
                + ", ".join(f"{k} at {v}" for k, v in self.locked_joints.items()),
                stacklevel=2,
            )


def _catalog_metadata(entry) -> dict:
    """Metadata fields given by a catalog entry's ``extra`` (contacts, IMU, symmetry, ...)."""
    return {k: v for k, v in entry.extra.items() if k in _META_FIELDS or k == "friction_models"}
