"""Closed kinematic loops and actuation of a tree model (issue 11): the robot-side description.

A looped mechanism (a four-bar knee, Digit's and Cassie's leg linkages) is described as its spanning
**tree** (the URDF, cut at one joint per loop) plus one `LoopClosure` per cut: two frames of the tree
that must coincide (paper 004 eqs. 16–18; Featherstone's loop-closure constraints). `Actuation` says
which joints carry a motor (with its gear ratio N: joint torque = N · motor torque), which are
**passive** (generalized force 0) and which have **no encoder** (their states come from the closure).

Closure types (rows of the position-level residual):

* ``6d`` — the frames coincide: log₆(ᵃMᵦ) (6 rows);
* ``point3d`` — the frame origins coincide: p_b − p_a in world axes [m] (3 rows);
* ``planar`` — the origins coincide in the plane normal to ``axis`` (x | y | z) of frame a: the two
  in-plane components of R_aᵀ(p_b − p_a) [m] (2 rows; enough for revolute four-bars whose joint axes are
  all parallel to ``axis``).

The closure kinematics (residuals, Jacobians, closure IK) are in `fg_sysid.robots.loop_kinematics`,
the closure forces' generalized force for the estimators in `fg_sysid.factors.loops`; the spec keys in
`fg_sysid.robots.spec` (``loops:``, ``actuation:``; docs/robot-spec.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

LOOP_TYPES = ("point3d", "6d", "planar")
LOOP_AXES = ("x", "y", "z")
#: rows of the position-level closure residual per type
LOOP_ROWS = {"point3d": 3, "6d": 6, "planar": 2}


@dataclass(frozen=True)
class LoopClosure:
    """One closure: frames ``frames[0]`` (a) and ``frames[1]`` (b) of the tree coincide (see the module
    docstring for ``type`` and ``axis``)."""

    name: str
    frames: tuple[str, str]
    type: str = "point3d"
    axis: str | None = None

    def __post_init__(self):
        object.__setattr__(self, "frames", tuple(self.frames))
        if len(self.frames) != 2 or self.frames[0] == self.frames[1]:
            raise ValueError(f"loop {self.name!r}: expected two different frames, got {list(self.frames)}")
        if self.type not in LOOP_TYPES:
            raise ValueError(f"loop {self.name!r}: unknown type {self.type!r}; expected one of "
                             f"{', '.join(LOOP_TYPES)}")
        if self.type == "planar" and self.axis not in LOOP_AXES:
            raise ValueError(f"loop {self.name!r}: a planar closure needs axis x, y or z, got {self.axis!r}")
        if self.type != "planar" and self.axis is not None:
            raise ValueError(f"loop {self.name!r}: key 'axis' is for planar closures only (type {self.type})")

    @property
    def rows(self) -> int:
        return LOOP_ROWS[self.type]

    def to_dict(self) -> dict:
        d = {"name": self.name, "frames": list(self.frames), "type": self.type}
        if self.axis is not None:
            d["axis"] = self.axis
        return d


@dataclass(frozen=True)
class Actuation:
    """Which joints are driven, with which gear ratio, and which have encoders.

    Attributes:
        gear_ratios: ``((joint, N), ...)`` actuated joints listed with their gear ratio N > 0 (joint
            torque = N · motor torque; rotor armature reflects as N² I_m, motor friction as N τ_m(N q̇)).
            Joints neither listed here nor passive are actuated with N = 1.
        passive: joints without a motor: their generalized force is 0 (a constraint of the estimator).
        unencoded: joints without an encoder column in the log: free (not locked); their states come
            from the loop closures.

    Log convention: ``tau.<joint>`` is the **joint-side** torque of an actuated joint [N·m] (N × motor
    torque); passive joints have no effort column.
    """

    gear_ratios: tuple = ()
    passive: tuple[str, ...] = ()
    unencoded: tuple[str, ...] = ()
    _gears: dict = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self):
        g = self.gear_ratios.items() if isinstance(self.gear_ratios, dict) else self.gear_ratios
        g = tuple((str(j), float(n)) for j, n in g)
        object.__setattr__(self, "gear_ratios", g)
        object.__setattr__(self, "passive", tuple(self.passive))
        object.__setattr__(self, "unencoded", tuple(self.unencoded))
        object.__setattr__(self, "_gears", dict(g))
        both = sorted(set(self._gears) & set(self.passive))
        if both:
            raise ValueError(f"actuation: joint(s) {both} are both passive and given a gear ratio")
        bad = [j for j, n in g if not n > 0]
        if bad:
            raise ValueError(f"actuation: gear ratios must be > 0 (joints {bad})")

    def is_actuated(self, joint: str) -> bool:
        return joint not in self.passive

    def gear(self, joint: str) -> float:
        """Gear ratio N of an actuated joint (1 unless given); 0 for a passive joint."""
        return 0.0 if joint in self.passive else self._gears.get(joint, 1.0)

    def to_dict(self) -> dict:
        d: dict = {}
        if self.gear_ratios:
            d["gear_ratios"] = dict(self.gear_ratios)
        if self.passive:
            d["passive"] = list(self.passive)
        if self.unencoded:
            d["unencoded"] = list(self.unencoded)
        return d

    def problems(self, joint_names, who: str) -> list[str]:
        """Messages for named joints that are not movable joints of the model (empty: valid)."""
        for key, names in (("gear_ratios", [j for j, _ in self.gear_ratios]), ("passive", self.passive),
                           ("unencoded", self.unencoded)):
            for j in names:
                if j not in joint_names:
                    return [f"{who}: actuation.{key}: joint {j!r} is not a movable joint of the model; "
                            f"joints: {list(joint_names)}"]
        if joint_names and all(j in self.passive for j in joint_names):
            return [f"{who}: actuation: every joint is passive; at least one must be actuated"]
        return []


def loop_problems(robot, who: str) -> list[str]:
    """Messages for a robot's ``loops`` and ``actuation`` that do not fit its model (empty: valid);
    `RobotModel.with_metadata` raises the first as a `RobotError`."""
    names = [c.name for c in robot.loops]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        return [f"{who}: loop name(s) {dup} used more than once"]
    for c in robot.loops:
        if not isinstance(c, LoopClosure):
            return [f"{who}: loops must be LoopClosure objects, got {type(c).__name__}"]
        for f in c.frames:
            if not robot.model.existFrame(f):
                return [f"{who}: loop {c.name!r}: frame {f!r} is not in the model"]
        ja, jb = (robot.model.frames[robot.model.getFrameId(f)].parentJoint for f in c.frames)
        if ja == jb:
            return [f"{who}: loop {c.name!r}: frames {list(c.frames)} are on the same body (the closure "
                    "would not constrain anything)"]
    if robot.actuation is not None:
        if not isinstance(robot.actuation, Actuation):
            return [f"{who}: actuation must be an Actuation, got {type(robot.actuation).__name__}"]
        out = robot.actuation.problems(robot.joint_names, who)
        if out:
            return out
        if robot.actuation.unencoded and not robot.loops:
            return [f"{who}: actuation.unencoded {list(robot.actuation.unencoded)} needs loops: without a "
                    "closure nothing determines an unencoded joint"]
    return []


def actuation_of(robot) -> Actuation:
    """The robot's `Actuation` (every joint actuated, gear 1, encoded when none is declared)."""
    return robot.actuation if robot.actuation is not None else Actuation()


def actuated_joints(robot) -> list[str]:
    """Names of the joints that carry a motor (not passive), ``joint_names`` order."""
    act = actuation_of(robot)
    return [j for j in robot.joint_names if act.is_actuated(j)]


def passive_mask(robot) -> np.ndarray:
    """(n_joints,) True for passive joints (``joint_names`` order)."""
    act = actuation_of(robot)
    return np.array([j in act.passive for j in robot.joint_names], bool)


def encoded_mask(robot) -> np.ndarray:
    """(n_joints,) True for joints with an encoder column in the log."""
    act = actuation_of(robot)
    return np.array([j not in act.unencoded for j in robot.joint_names], bool)


def gear_ratios(robot) -> np.ndarray:
    """(n_joints,) gear ratio N per joint (0 for passive joints)."""
    act = actuation_of(robot)
    return np.array([act.gear(j) for j in robot.joint_names], float)


# ---------------------------------------------------------------------- spec keys (robots/spec.py)
_LOOP_KEYS = ("name", "frames", "type", "axis")
_ACTUATION_KEYS = ("gear_ratios", "passive", "unencoded")


def parse_loops(raw, err) -> tuple[LoopClosure, ...]:
    """The ``loops:`` key of a robot spec (structure only; frames are checked by `RobotSpec.build`)."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise err(f"key 'loops': expected a list of {{name, frames: [a, b], type, axis}}, got {raw!r}")
    out = []
    for i, c in enumerate(raw):
        if not isinstance(c, dict):
            raise err(f"key 'loops[{i}]': expected {{name, frames: [a, b], type, axis}}, got {c!r}")
        bad = [k for k in c if k not in _LOOP_KEYS]
        if bad:
            raise err(f"key 'loops[{i}]': unknown key(s) {bad}; allowed: {', '.join(_LOOP_KEYS)}")
        name = c.get("name", f"loop{i}")
        frames = c.get("frames")
        if (not isinstance(frames, list) or len(frames) != 2
                or not all(isinstance(f, str) and f for f in frames)):
            raise err(f"key 'loops[{i}].frames': expected two frame names [a, b], got {frames!r}")
        try:
            out.append(LoopClosure(str(name), tuple(frames), c.get("type", "point3d"), c.get("axis")))
        except ValueError as e:
            raise err(f"key 'loops[{i}]': {e}") from None
    names = [c.name for c in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise err(f"key 'loops': name(s) {dup} used more than once")
    return tuple(out)


def parse_actuation(raw, err) -> Actuation | None:
    """The ``actuation:`` key of a robot spec (structure only; joints are checked by `RobotSpec.build`)."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise err("key 'actuation': expected {gear_ratios: {joint: N}, passive: [...], unencoded: [...]}, "
                  f"got {raw!r}")
    bad = [k for k in raw if k not in _ACTUATION_KEYS]
    if bad:
        raise err(f"key 'actuation': unknown key(s) {bad}; allowed: {', '.join(_ACTUATION_KEYS)}")
    gears = raw.get("gear_ratios") or {}
    if not isinstance(gears, dict):
        raise err(f"key 'actuation.gear_ratios': expected a mapping joint -> ratio, got {gears!r}")
    for j, n in gears.items():
        if isinstance(n, bool) or not isinstance(n, (int, float)) or not np.isfinite(n) or n <= 0:
            raise err(f"key 'actuation.gear_ratios.{j}': expected a number > 0, got {n!r}")
    lists = {}
    for key in ("passive", "unencoded"):
        v = raw.get(key) or []
        if not isinstance(v, list) or not all(isinstance(j, str) and j for j in v):
            raise err(f"key 'actuation.{key}': expected a list of joint names, got {v!r}")
        lists[key] = tuple(v)
    try:
        return Actuation({str(j): float(n) for j, n in gears.items()}, lists["passive"], lists["unencoded"])
    except ValueError as e:
        raise err(f"key {e}") from None
