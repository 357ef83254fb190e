"""Models of paper 003 (Wensing, Niemeyer, Slotine) built from its kinematic data.

The paper's models (PUMA 560, SCARA, MIT Cheetah 3 leg, two 2R arms) are given as modified
Denavit-Hartenberg rows ``(alpha_{i-1}, a_{i-1}, d_i)`` (Craig's convention): the joint-``i`` frame
sits at ``RotX(alpha) * TransX(a) * TransZ(d)`` in the frame of body ``i-1`` and the joint moves
about (revolute) or along (prismatic) its own z axis. The DH values are those of the paper's
released code (see the digest, section 3). Identifiability only depends on this geometry, so the
inertias are arbitrary physically consistent values (used only by numerical cross-checks).

Each builder returns a ``pin.Model`` whose joints are ``joint1..jointN`` and whose bodies carry BODY
frames ``link1..linkN`` (the Cheetah floating variant adds a ``torso`` on a free-flyer root).
``model.rotorGearRatio`` holds the paper's gear ratios (`identifiability.default_rotors` reads them).
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

G = 9.81


def _rotx(a):
    c, s = np.cos(a), np.sin(a)
    return np.array([[1.0, 0, 0], [0, c, -s], [0, s, c]])


def dh_placement(alpha: float, a: float, d: float) -> pin.SE3:
    """Craig modified-DH placement of joint frame i in body i-1: RotX(alpha) TransX(a) TransZ(d)."""
    R = _rotx(alpha)
    return pin.SE3(R, np.array([a, 0.0, 0.0]) + R @ np.array([0.0, 0.0, d]))


def _inertia(k: int) -> pin.Inertia:
    """Arbitrary, generic (no symmetry), physically consistent body inertia number ``k``."""
    rng = np.random.default_rng(1000 + k)
    m = 1.0 + rng.uniform(0, 2)
    c = rng.uniform(-0.1, 0.1, 3)
    A = rng.normal(size=(3, 3))
    Ic = 0.01 * (A @ A.T + 0.5 * np.eye(3))
    return pin.Inertia(m, c, Ic)


def chain_from_dh(
    rows,
    types=None,
    gravity=(0.0, 0.0, -G),
    gear_ratios=None,
    base: pin.SE3 | None = None,
    floating_base: bool = False,
    prefix: str = "",
) -> pin.Model:
    """Serial chain from modified-DH rows; ``types`` is a string of 'R'/'P' per joint (default all R).

    ``base`` places the DH base frame in the world (fixed) or in the torso (floating_base: a free-flyer
    ``torso`` body is added as root)."""
    n = len(rows)
    types = types or "R" * n
    model = pin.Model()
    model.gravity = pin.Motion(np.array(gravity, float), np.zeros(3))
    parent = 0
    parent_frame = 0
    if floating_base:
        parent = model.addJoint(0, pin.JointModelFreeFlyer(), pin.SE3.Identity(), "root_joint")
        model.appendBodyToJoint(parent, _inertia(99), pin.SE3.Identity())
        parent_frame = model.addBodyFrame("torso", parent, pin.SE3.Identity(), 0)
    base = base if base is not None else pin.SE3.Identity()
    for i, ((alpha, a, d), t) in enumerate(zip(rows, types, strict=True), start=1):
        placement = dh_placement(alpha, a, d)
        if i == 1:
            placement = base * placement
        jm = pin.JointModelRZ() if t == "R" else pin.JointModelPZ()
        jid = model.addJoint(parent, jm, placement, f"{prefix}joint{i}")
        model.appendBodyToJoint(jid, _inertia(i), pin.SE3.Identity())
        parent_frame = model.addBodyFrame(f"{prefix}link{i}", jid, pin.SE3.Identity(), parent_frame)
        parent = jid
    if gear_ratios is not None:
        gr = np.array(model.rotorGearRatio)
        gr[model.nv - n:] = gear_ratios
        model.rotorGearRatio = gr
    return model


PUMA560_DH = [(0, 0, 0), (-np.pi / 2, 0, 0), (0, 0.2, 0.4), (-np.pi / 2, 0.153, 0.839),
              (np.pi / 2, 0, 0), (-np.pi / 2, 0, 0)]
SCARA_DH = [(0, 0, 0), (0, 0.1, 0), (0, 0.2, 0), (0, 0, 0)]
CHEETAH3_LEG_DH = [(0, 0, 0), (np.pi / 2, 0, 0.044), (0, 0.342, 0)]

#: The leg's DH base frame in the world / torso: x0 along gravity (down), z0 = ab/ad axis forward.
#: The paper's code sets gravity along +x of the DH base frame, perpendicular to the ab/ad axis.
CHEETAH3_LEG_BASE = pin.SE3(np.array([[0.0, 0, 1], [0, 1, 0], [-1, 0, 0]]), np.zeros(3))


def puma560(floating_base: bool = False) -> pin.Model:
    """PUMA 560 (6R, gravity -z, gear ratio 5 on every joint)."""
    return chain_from_dh(PUMA560_DH, gear_ratios=[5.0] * 6, floating_base=floating_base)


def scara(floating_base: bool = False) -> pin.Model:
    """SCARA (RRPR, all axes along z, gravity -z, gear ratio 5)."""
    return chain_from_dh(SCARA_DH, types="RRPR", gear_ratios=[5.0] * 4, floating_base=floating_base)


def cheetah3_leg(floating_base: bool = False) -> pin.Model:
    """MIT Cheetah 3 leg (ab/ad, hip, knee; gear ratio 10). Fixed: torso locked ("table-top"), gravity
    perpendicular to the ab/ad axis. Floating: the leg on a free-flying torso (hip at (0.2, -0.1, 0))."""
    base = CHEETAH3_LEG_BASE
    if floating_base:
        base = pin.SE3(CHEETAH3_LEG_BASE.rotation, np.array([0.2, -0.1, 0.0]))
    return chain_from_dh(CHEETAH3_LEG_DH, gear_ratios=[10.0] * 3, base=base, floating_base=floating_base)


def two_link_parallel(l: float = 1.0) -> pin.Model:
    """Planar 2R arm of the paper's Fig. 4a (parallel axes, no gravity)."""
    return chain_from_dh([(0, 0, 0), (0, l, 0)], gravity=(0, 0, 0))


def two_link_perpendicular(l: float = 1.0) -> pin.Model:
    """2R arm of Fig. 4b (perpendicular axes offset by l along the common normal, no gravity)."""
    return chain_from_dh([(0, 0, 0), (-np.pi / 2, l, 0)], gravity=(0, 0, 0))


def random_chain(n: int, seed: int = 0, floating_base: bool = False) -> pin.Model:
    """A generic serial chain of ``n`` revolute/prismatic joints (benchmarks)."""
    rng = np.random.default_rng(seed)
    rows = [(rng.choice([0, np.pi / 2, -np.pi / 2, rng.uniform(-1, 1)]), rng.uniform(0, 0.3),
             rng.uniform(0, 0.3)) for _ in range(n)]
    types = "".join(rng.choice(["R", "R", "R", "P"]) for _ in range(n))
    return chain_from_dh(rows, types=types, floating_base=floating_base)


BUILDERS = {"puma560": puma560, "scara": scara, "cheetah3_leg": cheetah3_leg}
