"""Mirror symmetry of a robot's limbs: which bodies and joints pair up, and the reflection plane.

A description of the robot (names + plane), used by the symmetry prior of
`fg_sysid.factors.parameter_priors` (which explains the reflection convention, paper 004 Sec. I-C).
Parameter-layout arguments are duck-typed (``robot``, ``n``, ``names``, ``s_friction``,
``s_armature``, ``kf``): this module imports nothing above `fg_sysid.robots`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: Axis flipped by each reflection plane.
PLANES = {"xz": 1, "yz": 0, "xy": 2}


def reflection_signs(plane: str = "xz") -> np.ndarray:
    """Sign pattern (10,) of the dynamic parameters under reflection across ``plane`` (see module doc)."""
    if plane not in PLANES:
        raise ValueError(f"unknown reflection plane {plane!r}; expected one of {sorted(PLANES)}")
    s = np.ones(3)
    s[PLANES[plane]] = -1.0
    sx, sy, sz = s
    return np.array([1.0, sx, sy, sz, 1.0, sx * sy, 1.0, sx * sz, sy * sz, 1.0])


def reflect_inertial(pi: np.ndarray, plane: str = "xz") -> np.ndarray:
    """Dynamic parameters (…, 10) of the mirror image of a body: h → S h, I → S I S."""
    return np.asarray(pi, float) * reflection_signs(plane)


@dataclass(frozen=True)
class SymmetryMap:
    """Pairs of mirrored bodies and joints, ``(left, right)`` names, and the reflection plane."""

    body_pairs: tuple[tuple[str, str], ...]
    joint_pairs: tuple[tuple[str, str], ...] = ()
    plane: str = "xz"

    def __post_init__(self):
        reflection_signs(self.plane)  # validates the plane

    @property
    def signs(self) -> np.ndarray:
        return reflection_signs(self.plane)

    @classmethod
    def from_names(
        cls,
        robot,
        left: str | None = None,
        right: str | None = None,
        pairs: Sequence[tuple[str, str]] | None = None,
        plane: str = "xz",
        joints: bool = True,
    ) -> SymmetryMap:
        """Pair bodies (and joints) by prefix substitution ``left…`` ↔ ``right…``.

        Give one pair as ``left=, right=`` or several as ``pairs=[("FL_", "FR_"), ("RL_", "RR_")]``.
        Names carrying none of the prefixes (e.g. the base) are left unpaired. A name with a prefix whose
        substituted partner does not exist raises ``ValueError`` naming it.
        """
        prefix_pairs = list(pairs or [])
        if left is not None or right is not None:
            if left is None or right is None:
                raise ValueError("give both left= and right= prefixes")
            prefix_pairs.append((left, right))
        if not prefix_pairs:
            raise ValueError("no prefix pairs given (left=/right= or pairs=)")
        body_pairs = _pair_names(robot.body_names, prefix_pairs, "body")
        joint_pairs = _pair_names(robot.joint_names, prefix_pairs, "joint") if joints else ()
        return cls(tuple(body_pairs), tuple(joint_pairs), plane)

    def indices(self, layout) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(left index, right index, sign) into p for every paired parameter."""
        bidx = {b: i for i, b in enumerate(layout.robot.body_names)}
        jidx = {j: i for i, j in enumerate(layout.robot.joint_names)}
        li, ri, sg = [], [], []
        k10 = np.arange(10)
        for a, b in self.body_pairs:
            li.append(10 * bidx[a] + k10)
            ri.append(10 * bidx[b] + k10)
            sg.append(self.signs)
        f0, a0, kf = layout.s_friction.start, layout.s_armature.start, layout.kf
        for a, b in self.joint_pairs:
            ja, jb = jidx[a], jidx[b]
            li.append(np.r_[f0 + kf * ja + np.arange(kf), a0 + ja])
            ri.append(np.r_[f0 + kf * jb + np.arange(kf), a0 + jb])
            sg.append(np.ones(kf + 1))
        if not li:
            return np.zeros(0, int), np.zeros(0, int), np.zeros(0)
        return np.concatenate(li).astype(int), np.concatenate(ri).astype(int), np.concatenate(sg)

    def matrix(self, layout) -> np.ndarray:
        """A (m, n) with r_unwhitened = A p."""
        li, ri, sg = self.indices(layout)
        A = np.zeros((li.size, layout.n))
        rows = np.arange(li.size)
        A[rows, li] = 1.0
        A[rows, ri] -= sg
        return A

    def residual_names(self, layout) -> list[str]:
        li, ri, _ = self.indices(layout)
        return [f"{layout.names[a]}~{layout.names[b]}" for a, b in zip(li, ri, strict=True)]

def _pair_names(names: Sequence[str], prefix_pairs, kind: str) -> list[tuple[str, str]]:
    present = set(names)
    out = []
    for name in names:
        for lp, rp in prefix_pairs:
            if name.startswith(lp):
                partner = rp + name[len(lp):]
                if partner not in present:
                    raise ValueError(f"{kind} {name!r} has no mirrored partner {partner!r} "
                                     f"(prefixes {lp!r} -> {rp!r})")
                out.append((name, partner))
                break
            if name.startswith(rp):
                partner = lp + name[len(rp):]
                if partner not in present:
                    raise ValueError(f"{kind} {name!r} has no mirrored partner {partner!r} "
                                     f"(prefixes {rp!r} -> {lp!r})")
                break
    return out
