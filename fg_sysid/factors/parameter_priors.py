"""Parameter priors from structural knowledge: mirror symmetry of limbs and a known total mass.

Paper 004 Sec. I-C / IX-C enforce left–right symmetry of mirrored limbs and the known total mass as
equality constraints on the parameters (Eq. 1e). Here they are residual functions of θ (batched numpy,
analytic Jacobians through ``ParameterLayout.jacobian``), whitened by a standard deviation so they can
enter the factor graph as *soft* priors:

* symmetry:    r = (p_left − R · p_right) / σ     for every paired parameter,
* total mass:  r = (Σ_b m_b − M) / σ.

A hard constraint is the limit σ → 0: use a tiny ``std`` (e.g. 1e-6 × the parameter scale; the problem
becomes stiff but stays well posed because the residuals are linear in p), or pass the unwhitened
residual (``std=1``) to a constrained noise model (``gtsam.noiseModel.Constrained``) / an equality-
constrained solver, which treats r = 0 exactly.

Reflection convention. Mirroring across a plane through the base origin is S = diag(s_x, s_y, s_z)
with one −1 (default the base's x–z plane: y → −y, S = diag(1, −1, 1)). A body on the right side is the
mirror image of its left partner when its frame is the reflected frame, so its inertial parameters are
h → S h, I → S I S. In Pinocchio's dynamic-parameter order (m, mcx, mcy, mcz, Ixx, Ixy, Iyy, Ixz, Iyz, Izz)
this is the sign pattern R = (1, s_x, s_y, s_z, 1, s_x s_y, 1, s_x s_z, s_y s_z, 1); for the y-reflection
mcy, Ixy and Iyz flip sign. Paired joints get equal friction and armature (sign +1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..layout import ParameterLayout, inertial_prior_std
from ..robots import RobotModel

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
        robot: RobotModel,
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

    def indices(self, layout: ParameterLayout) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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

    def matrix(self, layout: ParameterLayout) -> np.ndarray:
        """A (m, n) with r_unwhitened = A p."""
        li, ri, sg = self.indices(layout)
        A = np.zeros((li.size, layout.n))
        rows = np.arange(li.size)
        A[rows, li] = 1.0
        A[rows, ri] -= sg
        return A

    def residual_names(self, layout: ParameterLayout) -> list[str]:
        li, ri, _ = self.indices(layout)
        return [f"{layout.names[a]}~{layout.names[b]}" for a, b in zip(li, ri, strict=True)]

    def relative_std(self, layout: ParameterLayout, p_ref: np.ndarray | None = None,
                     relative: float = 0.01) -> np.ndarray:
        """Per-residual std: ``relative`` × the scale of the left parameter in ``p_ref`` (default the
        nominal p), with the per-body floors of the raw inertial prior so zero entries stay finite."""
        p_ref = layout.nominal_physical() if p_ref is None else np.asarray(p_ref, float)
        pi, _, _ = layout.split(p_ref)
        scale = np.abs(p_ref).copy()
        scale[layout.s_inertial] = np.array([inertial_prior_std("raw", b, 1.0) for b in pi]).ravel()
        li, _, _ = self.indices(layout)
        return relative * np.maximum(scale[li], 1e-12)


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


def symmetry_residual(layout: ParameterLayout, theta: np.ndarray, symmetry: SymmetryMap,
                      jacobians: bool = True, std: float | np.ndarray = 1.0):
    """Whitened symmetry prior r = (p_left − R p_right) / σ, shape (m,), and dr/dθ (m, n) or None.

    ``std`` is a scalar or per-residual array (see `SymmetryMap.relative_std`, `residual_names`).
    """
    p = layout.to_physical(theta)
    li, ri, sg = symmetry.indices(layout)
    std = np.broadcast_to(np.asarray(std, float), li.shape)
    r = (p[li] - sg * p[ri]) / std
    if not jacobians:
        return r, None
    D = layout.jacobian(theta)
    J = (D[li] - sg[:, None] * D[ri]) / std[:, None]
    return r, J


def total_mass_residual(layout: ParameterLayout, theta: np.ndarray, total_mass: float,
                        jacobians: bool = True, std: float = 1.0, bodies: Sequence[str] | None = None):
    """Whitened total-mass prior r = (Σ_b m_b − M) / σ, shape (1,), and dr/dθ (1, n) or None.

    ``bodies`` restricts the sum (default: all bodies of the layout); ``std`` in kg.
    """
    names = list(layout.robot.body_names)
    sel = range(len(names)) if bodies is None else [names.index(b) for b in bodies]
    idx = np.array([10 * i for i in sel], dtype=int)
    p = layout.to_physical(theta)
    r = np.array([(p[idx].sum() - float(total_mass)) / std])
    if not jacobians:
        return r, None
    Ji, _, _ = layout.jacobian_blocks(theta)
    J = np.zeros((1, layout.n))
    for i in sel:
        J[0, 10 * i:10 * i + 10] = Ji[i, 0] / std
    return r, J
