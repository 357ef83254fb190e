"""Export an identified model to the formats other tools read: URDF (yourdfpy) and MJCF (MuJoCo MjSpec).

Used by ``fg-sysid export`` (see docs/export.md).

* `identified_parameters` — the identified robot and its parameters, from an identify output's
  ``model.json``: inertial (n_bodies, 10) in Pinocchio's dynamic-parameter order about each joint frame,
  Coulomb ``fc`` [N·m | N] and viscous ``fv`` [N·m·s/rad | N·s/m] per joint, armature [kg·m² | kg]; for
  the lead laws (``soft-dry``, ``coulomb-viscous-lead``) also the per-joint width ``vs`` and lead ``T``.
* `export_urdf` — rewrites the robot's own URDF (parsed with yourdfpy, edited through its model
  objects, serialized by yourdfpy) with the identified ``<inertial>`` of every link that carries an
  identified body and ``<dynamics damping="fv" friction="fc">`` on every identified joint.
* `export_mjcf` — `fg_sysid.datasets.mujoco_sim.build_mujoco_spec` with the identified parameters,
  written by ``MjSpec.to_xml()``: body inertias, joint ``armature``, ``frictionloss`` = fc, ``damping``
  = fv (floating bases also get the foot spheres, the floor and the IMU site); lead laws also set the
  joint's ``solreffriction`` / ``solimpfriction`` (`lead_friction_solref_solimp`, below).

Lead laws in MuJoCo. MuJoCo's joint friction loss is a soft constraint whose force in inverse dynamics
is ``fc·clip((a + b·v)/(R·fc), −1, 1)`` with ``b = 2/(dmax·timeconst)`` (solref = (timeconst, 1)) and
``R = (1 − d)/d · dof_invweight0`` (d the impedance: solimp[0] for a friction row). That is the
``soft-dry`` law ``fc·clip((v + T·a)/vs, −1, 1)`` with ``T = 1/b`` and ``vs = R·fc·T``. The export uses a
constant impedance ``solimp = (d, d, 0.001, 0.5, 2)`` (dmin = dmax: d exact) with
``d = w/(w + R)``, ``R = vs/(fc·T)``, ``w`` = the compiled model's ``dof_invweight0`` (it depends on the
inertias and armature, not on solimp), and ``solref = (2·T/d, 1)``: MuJoCo then reproduces the
soft-dry law exactly (to round-off). A joint with ``T ≤ 0``, with d outside MuJoCo's impedance range
[mjMINIMP, mjMAXIMP] = [0.0001, 0.9999], or with ``2·T/d`` below MuJoCo's minimum time constant
(2·timestep, unless the refsafe flag is disabled) keeps MuJoCo's default solref/solimp and a warning
names it and why. ``coulomb-viscous-lead`` (``fc·tanh((v + T·a)/vs)``) gets the same mapping: MuJoCo
then has the clip of the same width, an approximation (the two differ by at most ``fc·(1 − tanh 1)`` ≈
0.24·fc, at the band edge |v + T·a| = vs, and agree for |v + T·a| ≫ vs).

Which URDF link carries a Pinocchio body's inertia. A Pinocchio body (joint ``j``) is the union of the
joint's child link ``L`` (``RobotModel.body_names[j-1]``), the links attached below it by fixed joints,
and the subtrees below joints locked for identification (at their locked values). The identified
parameters are those of the union. The export keeps the URDF's nominal ``<inertial>`` on every other
link of the union and writes the *remainder* onto ``L``::

    π_L = X(L←j) π_j − Σ_{ℓ in union, ℓ ≠ L} X(L←ℓ) π_ℓ^URDF

(spatial inertias added in the frame of ``L``; ``X`` = `pinocchio.SE3.act` on a `pinocchio.Inertia`),
so a loader that merges the same links (Pinocchio, with the same joints locked) gets exactly the
identified body, and the links below locked joints keep a plausible mass if a user unlocks them. When
the remainder is not physically consistent (mass ≤ 0 or inertia about the COM not positive definite,
e.g. the identified body is lighter than the URDF's merged children), the whole identified body goes
onto ``L`` and the other links of the union lose their ``<inertial>`` (mass 0); a warning names them.

URDF ``<inertial>``: mass [kg], ``origin`` = COM in the link frame [m] with ``rpy = 0``, inertia
about the COM in the link frame axes [kg·m²].

Not representable: URDF has no rotor armature (it is in the MJCF and in ``parameters.csv``); friction
is ``fc·tanh(v/vs) + fv·v`` in the estimator, a dry Coulomb ``friction`` + viscous ``damping`` in URDF
and a constraint-based dry ``frictionloss`` + ``damping`` in MuJoCo (they agree for |v| ≫ vs); a
``stribeck6`` model is exported as its Coulomb level ``g3`` and viscous ``g5`` (the stiction excess
``g0`` is dropped); the lead laws' ``vs`` and ``T`` have no URDF counterpart (friction = fc, damping =
fv).
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pinocchio as pin

from .robots import RobotModel

#: Relative tolerance of the physical-consistency check of the remainder written onto a carrier link.
CONSISTENCY_TOL = 1e-9

#: Friction laws of the predicted velocity v + T·a whose MJCF export sets solreffriction/solimpfriction.
LEAD_LAWS = ("soft-dry", "coulomb-viscous-lead")


class ExportError(ValueError):
    """The model cannot be exported (the message names the culprit)."""


@dataclass(frozen=True)
class IdentifiedParameters:
    """An identified model ready for export.

    Attributes:
        robot: the identified robot (joints absent from the training log locked).
        inertial: (n_bodies, 10) Pinocchio dynamic parameters (m, m·c, I about the joint frame) [SI].
        fc, fv: per joint Coulomb level [N·m | N] and viscous coefficient [N·m·s/rad | N·s/m].
        armature: per joint rotor armature [kg·m² | kg].
        friction_model: the estimator's friction model name (``coulomb-viscous``,
            ``coulomb-viscous-scale``, ``stribeck6``, ``soft-dry`` or ``coulomb-viscous-lead``).
        velocity_scale: tanh width vs [rad/s] of the estimator's Coulomb term, ``coulomb-viscous`` only
            (None otherwise).
        effort_gain, effort_offset: per joint effort-sensor gain [1] and offset [N·m | N] (logged effort =
            gain·τ + offset; issue 9 item 2), None when the model has no actuation block.
        vs, lead: per joint stick-band width vs [rad/s | m/s] and lead T [s] of the lead laws
            (``soft-dry``, ``coulomb-viscous-lead``: fc·s((v + T·a)/vs) + fv·v); None for other laws.
    """

    robot: RobotModel
    inertial: np.ndarray
    fc: np.ndarray
    fv: np.ndarray
    armature: np.ndarray
    friction_model: str
    velocity_scale: float | None
    effort_gain: np.ndarray | None = None
    effort_offset: np.ndarray | None = None
    vs: np.ndarray | None = None
    lead: np.ndarray | None = None


def identified_parameters(spec: dict, robot: RobotModel | None = None) -> IdentifiedParameters:
    """`IdentifiedParameters` of a ``model.json`` dict (`fg_sysid.validation.load_model`).

    ``robot`` defaults to `fg_sysid.validation.robot_from_model` (RobotError when its source is gone).
    A ``stribeck6`` model maps to fc = g3 (Coulomb level), fv = g5 (viscous); the stiction peak is dropped.
    The lead laws (``soft-dry``, ``coulomb-viscous-lead``) also carry ``vs`` and ``lead`` per joint.
    """
    from .validation import robot_from_model

    if robot is None:
        robot = robot_from_model(spec)
    phys = spec["physical"]
    lay = spec["layout"]

    def get(name):
        try:
            return float(phys[name])
        except KeyError:
            raise ExportError(f"model.json has no value for parameter {name!r}") from None
        except (TypeError, ValueError):
            raise ExportError(f"model.json parameter {name!r} is not a number: {phys[name]!r}") from None

    inertial = np.array([[get(n) for n in robot.inertial_parameter_names()[10 * b:10 * b + 10]]
                         for b in range(robot.n_bodies)]).reshape(robot.n_bodies, 10)
    fmodel = lay.get("friction_model", "coulomb-viscous")
    keys = {"coulomb-viscous": ("fc", "fv"), "coulomb-viscous-scale": ("fc", "fv"),
            "stribeck6": ("g3", "g5"), "soft-dry": ("fc", "fv"),
            "coulomb-viscous-lead": ("fc", "fv")}.get(fmodel)
    if keys is None:
        raise ExportError(f"friction model {fmodel!r} cannot be exported (coulomb-viscous, "
                          "coulomb-viscous-scale, stribeck6, soft-dry or coulomb-viscous-lead)")
    fc = np.array([get(f"{j}.{keys[0]}") for j in robot.joint_names])
    fv = np.array([get(f"{j}.{keys[1]}") for j in robot.joint_names])
    arm = np.array([get(f"{j}.armature") if f"{j}.armature" in phys else 0.0 for j in robot.joint_names])
    widths = leads = None
    if fmodel in LEAD_LAWS:
        widths = np.array([get(f"{j}.vs") for j in robot.joint_names])
        leads = np.array([get(f"{j}.lead") for j in robot.joint_names])
    for what, arr in (("inertial", inertial), ("fc", fc), ("fv", fv), ("armature", arm), ("vs", widths),
                      ("lead", leads)):
        if arr is not None and not np.all(np.isfinite(arr)):
            raise ExportError(f"model.json has non-finite {what} values")
    vs = lay.get("friction_velocity_scale") if fmodel == "coulomb-viscous" else None
    gain = offset = None
    if lay.get("actuation"):  # issue 9 item 2
        gain = np.array([get(f"{j}.effort_gain") for j in robot.joint_names])
        offset = np.array([get(f"{j}.effort_offset") for j in robot.joint_names])
    return IdentifiedParameters(robot, inertial, fc, fv, arm, fmodel, None if vs is None else float(vs),
                                gain, offset, widths, leads)


def dry_friction_shape(spec: dict, joints, v: np.ndarray, a: np.ndarray) -> np.ndarray:
    """The shape s of a ``model.json`` model's dry-friction term fc·s, per joint, at velocities ``v`` and
    accelerations ``a`` (N, n_joints): tanh(v/vs) (coulomb-viscous: vs fixed or estimated per joint),
    tanh((v + T·a)/vs) (coulomb-viscous-lead) or clip((v + T·a)/vs, ±1) (soft-dry). Stribeck models are
    not of this form (ExportError)."""
    from .parameterizations import friction_model

    lay, phys = spec["layout"], spec["physical"]
    fmodel = lay.get("friction_model", "coulomb-viscous")
    if fmodel == "stribeck6":
        raise ExportError("a stribeck6 model has no single dry-friction shape")
    vs = np.array([phys.get(f"{j}.vs", lay.get("friction_velocity_scale") or 0.05) for j in joints], float)
    lead = np.array([phys.get(f"{j}.lead", 0.0) for j in joints], float)
    u = (np.asarray(v, float) + lead * np.asarray(a, float)) / vs
    return friction_model(fmodel).dry_shape(u)[0] if fmodel in LEAD_LAWS else np.tanh(u)


def physical_problems(params: IdentifiedParameters) -> list[str]:
    """What a simulator would reject: bodies whose inertia is not physically consistent (`is_consistent`)
    and joints with negative fc, fv or armature (an unconstrained ``ls-sg`` estimate can have both).
    Numbers are printed as plain decimals."""
    robot = params.robot
    out = []
    for b, name in enumerate(robot.body_names):
        pi = params.inertial[b]
        if not (pi[0] > 0 and is_consistent(pin.Inertia.FromDynamicParameters(pi))):
            out.append(f"body {name!r} (mass {float(pi[0]):.6g} kg) is not physically consistent")
    for what, arr in (("fc", params.fc), ("fv", params.fv), ("armature", params.armature)):
        for j, x in zip(robot.joint_names, arr, strict=True):
            if x < 0:
                out.append(f"joint {j!r} has {what} = {float(x):.6g} < 0")
    return out


# ---------------------------------------------------------------------------------------------- URDF
def _urdf_inertia(inertial) -> pin.Inertia:
    """A yourdfpy ``Inertial`` (or None) as a `pinocchio.Inertia` in the link frame."""
    if inertial is None or inertial.mass is None:
        return pin.Inertia.Zero()
    T = np.eye(4) if inertial.origin is None else np.asarray(inertial.origin, float)
    R, c = T[:3, :3], T[:3, 3]
    I_urdf = np.zeros((3, 3)) if inertial.inertia is None else np.asarray(inertial.inertia, float)
    return pin.Inertia(float(inertial.mass), c, R @ I_urdf @ R.T)


def is_consistent(inertia: pin.Inertia, tol: float = CONSISTENCY_TOL) -> bool:
    """Mass > 0 and the inertia about the COM positive definite with the triangle inequalities."""
    m = float(inertia.mass)
    if not (np.isfinite(m) and m > 0):
        return False
    ev = np.linalg.eigvalsh(0.5 * (inertia.inertia + inertia.inertia.T))
    scale = max(float(np.max(np.abs(ev))), 1e-300)
    if ev[0] <= tol * scale:
        return False
    a, b, c = ev
    return a + b >= c * (1 - tol)


def _urdf_inertial_of(inertia: pin.Inertia):
    import yourdfpy

    T = np.eye(4)
    T[:3, 3] = np.array(inertia.lever, float)
    I_c = np.array(inertia.inertia, float)
    return yourdfpy.Inertial(origin=T, mass=float(inertia.mass), inertia=0.5 * (I_c + I_c.T))


def _load_urdf(path: Path):
    import yourdfpy

    try:
        return yourdfpy.URDF.load(str(path), build_scene_graph=False, build_collision_scene_graph=False,
                                  load_meshes=False, load_collision_meshes=False)
    except Exception as e:  # yourdfpy/lxml raise assorted errors on malformed files
        raise ExportError(f"cannot parse URDF {path}: {e}") from None


def urdf_inertials(params: IdentifiedParameters, urdf) -> tuple[dict, pd.DataFrame]:
    """New link inertias ``{link: pinocchio.Inertia | None}`` (None: drop ``<inertial>``) and a table.

    See the module docstring for the carrier/remainder rule. The table has one row per written link:
    link, body (the Pinocchio body / carrier), role (``carrier``, ``carrier (whole body)``, ``merged:
    nominal kept``, ``merged: cleared``), mass [kg], com_x/y/z [m] (link frame).
    """
    robot = params.robot
    model = robot.model
    links = {lk.name: lk for lk in urdf.robot.links}
    new: dict = {}
    rows = []
    for j in range(1, model.njoints):
        carrier = robot.body_names[j - 1]
        if carrier not in links:
            raise ExportError(f"body {carrier!r} of the identified model is not a link of {robot.urdf_path}")
        members = [f for f in model.frames if f.type == pin.FrameType.BODY and f.parentJoint == j]
        jM = {f.name: f.placement for f in members}
        jML = jM[carrier]
        body = jML.actInv(pin.Inertia.FromDynamicParameters(params.inertial[j - 1]))  # in L's frame
        others = [f.name for f in members if f.name != carrier and f.name in links]
        rest = pin.Inertia.Zero()
        for name in others:
            rest = rest + (jML.actInv(jM[name])).act(_urdf_inertia(links[name].inertial))
        pi_L = body.toDynamicParameters() - rest.toDynamicParameters()
        remainder = pin.Inertia.FromDynamicParameters(pi_L) if pi_L[0] > 0 else None
        if remainder is not None and is_consistent(remainder):
            new[carrier] = remainder
            rows.append((carrier, carrier, "carrier", remainder))
            rows += [(n, carrier, "merged: nominal kept", _urdf_inertia(links[n].inertial)) for n in others]
        else:
            if others:
                warnings.warn(f"export: body {carrier!r}: the identified inertia minus the URDF's merged "
                              f"links {others} is not physically consistent; writing the whole body onto "
                              f"{carrier!r} and clearing the <inertial> of {others}", stacklevel=2)
            new[carrier] = body
            rows.append((carrier, carrier, "carrier (whole body)", body))
            for n in others:
                new[n] = None
                rows.append((n, carrier, "merged: cleared", pin.Inertia.Zero()))
    table = pd.DataFrame([{"link": lk, "body": b, "role": role, "mass": float(I.mass),
                           "com_x": float(I.lever[0]), "com_y": float(I.lever[1]),
                           "com_z": float(I.lever[2])} for lk, b, role, I in rows])
    return new, table


def export_urdf(params: IdentifiedParameters, out: str | os.PathLike) -> pd.DataFrame:
    """Write the robot's URDF with the identified inertials and joint dynamics to ``out``.

    Returns the per-link table of `urdf_inertials`. Raises ExportError when the robot has no URDF
    (programmatic catalog robots) or it cannot be parsed.
    """
    import yourdfpy

    robot = params.robot
    if robot.urdf_path is None:
        raise ExportError(f"robot {robot.name!r} is built programmatically and has no URDF to rewrite; "
                          "use --mjcf")
    src = Path(robot.urdf_path)
    if not src.is_file():
        raise ExportError(f"URDF not found: {src}")
    problems = physical_problems(params)
    negative = [p for p in problems if p.startswith("joint") and "armature" not in p]
    if negative:  # Pinocchio's URDF parser refuses friction < 0 (min_dry_friction > max_dry_friction)
        raise ExportError(f"the identified model of {robot.name!r} cannot be a URDF: " + "; ".join(negative)
                          + " (URDF friction and damping must be >= 0)")
    if problems:
        warnings.warn("export: the URDF is written but simulators may reject it: " + "; ".join(problems),
                      stacklevel=2)
    urdf = _load_urdf(src)
    new, table = urdf_inertials(params, urdf)
    links = {lk.name: lk for lk in urdf.robot.links}
    for name, inertia in new.items():
        links[name].inertial = None if inertia is None else _urdf_inertial_of(inertia)
    joints = {jt.name: jt for jt in urdf.robot.joints}
    for i, jn in enumerate(robot.joint_names):
        if jn not in joints:
            raise ExportError(f"joint {jn!r} of the identified model is not in {src}")
        joints[jn].dynamics = yourdfpy.Dynamics(damping=float(params.fv[i]), friction=float(params.fc[i]))
    urdf.robot.name = urdf.robot.name or robot.name
    urdf.write_xml_file(str(out))
    return table


# ---------------------------------------------------------------------------------------------- MJCF
def mjcf_spec(params: IdentifiedParameters):
    """The `mujoco.MjSpec` of the identified robot (`build_mujoco_spec`); ExportError if MuJoCo rejects it."""
    from .datasets.mujoco_sim import MujocoSimError, build_mujoco_spec

    robot = params.robot
    problems = physical_problems(params)
    if problems:
        raise ExportError(f"the identified model of {robot.name!r} cannot be a MuJoCo model: "
                          + "; ".join(problems) + " (export a physically consistent estimate, e.g. the "
                          "smoother's)")
    kw = {}
    if robot.floating_base:
        kw = {"foot_frames": tuple(robot.contact_frames) or None,
              "foot_radius": float(robot.contact_radius or 0.02)}
    try:
        spec = build_mujoco_spec(robot, params.inertial, (params.fc, params.fv), params.armature, **kw)
        if params.effort_gain is not None:  # issue 9 item 2
            calibrate_actuators(spec, robot.joint_names, params.effort_gain, params.effort_offset)
        mj_model = spec.compile()
        if params.lead is not None:  # soft-dry / coulomb-viscous-lead: the friction loss's solref/solimp
            set_lead_friction(spec, mj_model, params)
            spec.compile()
    except (MujocoSimError, ValueError) as e:
        raise ExportError(f"MuJoCo rejects the identified model of {robot.name!r}: {e}") from None
    return spec


def lead_friction_solref_solimp(fc: float, vs: float, lead: float, invweight0: float, timestep: float,
                                refsafe: bool = True):
    """MuJoCo joint friction-loss parameters that make ``frictionloss = fc`` the law fc·clip((v + T·a)/vs).

    MuJoCo's friction-loss force is ``fc·clip((a + b·v)/(R·fc), ±1)`` with ``b = 2/(dmax·timeconst)`` and
    ``R = (1 − d)/d · invweight0``: with the constant impedance d (dmin = dmax = d, so d is exact for any
    violation), ``R = vs/(fc·T)`` gives ``d = invweight0/(invweight0 + R)`` and ``b = 1/T`` gives
    ``timeconst = 2·T/d``.

    Args: fc [N·m | N] (> 0), vs [rad/s | m/s], lead T [s], invweight0 the compiled model's
    ``dof_invweight0`` of the joint's dof, timestep [s] and refsafe (MuJoCo raises timeconst to at least
    2·timestep unless ``mjDSBL_REFSAFE`` is set).
    Returns: ``(solref, solimp, None)`` (2- and 5-vectors) or ``(None, None, reason)`` when MuJoCo cannot
    represent the law (T ≤ 0, vs ≤ 0, d outside [mjMINIMP, mjMAXIMP], timeconst below the minimum).
    """
    import mujoco

    fc, vs, lead, w = float(fc), float(vs), float(lead), float(invweight0)
    if not lead > 0:
        return None, None, (f"lead T = {lead:.6g} s <= 0: MuJoCo's friction loss always leads the "
                            "velocity (T = dmax·timeconst/2 > 0)")
    if not (vs > 0 and fc > 0 and w > 0):
        return None, None, f"vs = {vs:.6g}, fc = {fc:.6g}, dof_invweight0 = {w:.6g} must be > 0"
    R = vs / (fc * lead)
    d = w / (w + R)
    if not mujoco.mjMINIMP <= d <= mujoco.mjMAXIMP:
        return None, None, (f"the stick band needs impedance d = {d:.6g} outside MuJoCo's "
                            f"[{mujoco.mjMINIMP:g}, {mujoco.mjMAXIMP:g}] (R = vs/(fc·T) = {R:.6g}, "
                            f"dof_invweight0 = {w:.6g})")
    timeconst = 2.0 * lead / d
    if refsafe and timeconst < 2.0 * timestep:
        return None, None, (f"the lead needs timeconst 2·T/d = {timeconst:.6g} s, below MuJoCo's minimum "
                            f"2·timestep = {2.0 * timestep:.6g} s (refsafe)")
    return np.array([timeconst, 1.0]), np.array([d, d, 0.001, 0.5, 2.0]), None


def set_lead_friction(spec, mj_model, params: IdentifiedParameters) -> None:
    """Set each joint's ``solref_friction`` / ``solimp_friction`` in ``spec`` from the lead law
    (`lead_friction_solref_solimp`, ``dof_invweight0`` of the compiled ``mj_model``). A joint MuJoCo cannot
    represent keeps MuJoCo's defaults, with a warning naming it and why; joints with fc = 0 have no
    friction-loss constraint and are left alone."""
    import mujoco

    joints = {j.name: j for j in spec.joints}
    timestep = float(spec.option.timestep)
    refsafe = not (spec.option.disableflags & int(mujoco.mjtDisableBit.mjDSBL_REFSAFE))
    for i, name in enumerate(params.robot.joint_names):
        if params.fc[i] == 0:
            continue
        w = mj_model.dof_invweight0[mj_model.joint(name).dofadr[0]]
        solref, solimp, why = lead_friction_solref_solimp(params.fc[i], params.vs[i], params.lead[i], w,
                                                          timestep, refsafe)
        if why is not None:
            warnings.warn(f"export: joint {name!r}: the {params.friction_model} friction law cannot be a "
                          f"MuJoCo friction loss ({why}); keeping MuJoCo's default solreffriction/"
                          "solimpfriction for it", stacklevel=3)
            continue
        joints[name].solref_friction = solref
        joints[name].solimp_friction = solimp


def calibrate_actuators(spec, joint_names, gain, offset) -> None:
    """Make each joint motor ``<joint>_motor`` take the *logged* effort as its control (issue 9 item 2):
    gear = 1/gain and an affine bias −offset, so the joint effort is (ctrl − offset)/gain [N·m | N]; a
    control range (the effort limit) is mapped to logged units the same way."""
    import mujoco

    acts = {a.name: a for a in spec.actuators}
    for j, g, o in zip(joint_names, gain, offset, strict=True):
        act = acts.get(f"{j}_motor")
        if act is None:
            raise ExportError(f"MJCF has no motor for joint {j!r} to carry its effort gain/offset")
        act.gear[0] = 1.0 / float(g)
        act.biastype = mujoco.mjtBias.mjBIAS_AFFINE
        act.biasprm[0] = -float(o)
        if act.ctrllimited:
            lo, hi = act.ctrlrange
            act.ctrlrange = [float(g) * lo + float(o), float(g) * hi + float(o)]


def _num(values) -> str:
    """Numbers as shortest round-trip decimal strings (``repr`` of a float), space separated."""
    return " ".join(repr(float(x)) for x in np.atleast_1d(np.asarray(values, float)))


def full_precision_xml(spec, xml: str) -> str:
    """``xml`` (``spec.to_xml()``) with the dynamics numbers re-written at full double precision.

    MuJoCo's XML writer prints 6 significant digits and converts full inertia matrices to a principal
    frame (``quat`` + ``diaginertia``, both rounded), which alone moves inverse dynamics by ~1e-6
    relative. This re-sets, from the `mujoco.MjSpec` values and by element name, each body's ``pos``
    and ``quat``, its ``<inertial>`` (``pos``, ``mass``, ``fullinertia`` [kg·m², about the COM, body
    axes]) and each joint's ``axis``, ``armature``, ``damping`` and ``frictionloss``, and its
    ``solreffriction`` / ``solimpfriction`` when they differ from MuJoCo's defaults (lead laws). The XML
    tree is MuJoCo's own output, parsed and edited with `xml.etree.ElementTree` (no template).
    """
    import xml.etree.ElementTree as ET

    import mujoco

    default = mujoco.MjSpec().worldbody.add_body().add_joint()  # MuJoCo's default joint
    root = ET.fromstring(xml)
    bodies = {b.name: b for b in spec.bodies if b.name}
    joints = {j.name: j for j in spec.joints if j.name}
    for el in root.iter("body"):
        b = bodies.get(el.get("name"))
        if b is None:
            continue
        el.set("pos", _num(b.pos))
        el.set("quat", _num(b.quat))
        inertial = el.find("inertial")
        if inertial is not None and b.explicitinertial:
            for key in ("quat", "diaginertia"):
                inertial.attrib.pop(key, None)
            inertial.set("pos", _num(b.ipos))
            inertial.set("mass", _num(b.mass))
            inertial.set("fullinertia", _num(b.fullinertia))
    for el in root.iter("joint"):
        j = joints.get(el.get("name"))
        if j is None:
            continue
        if j.type in (mujoco_joint_types()):
            el.set("axis", _num(j.axis))
        el.set("armature", _num(j.armature))
        el.set("damping", _num(j.damping[0]))
        el.set("frictionloss", _num(j.frictionloss))
        if (np.any(j.solref_friction != default.solref_friction)
                or np.any(j.solimp_friction != default.solimp_friction)):
            el.set("solreffriction", _num(j.solref_friction))
            el.set("solimpfriction", _num(j.solimp_friction))
    ET.indent(root, space="  ")
    return ET.tostring(root, encoding="unicode") + "\n"


def mujoco_joint_types():
    """Joint types that carry an axis (hinge, slide)."""
    import mujoco

    return (mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE)


def export_mjcf(params: IdentifiedParameters, out: str | os.PathLike) -> None:
    """Write the MJCF of the identified robot to ``out`` (``MjSpec.to_xml()`` at full precision)."""
    spec = mjcf_spec(params)
    Path(out).write_text(full_precision_xml(spec, spec.to_xml()))


# ---------------------------------------------------------------------------------------------- rollout
def track_log(mj_model, joint_names, t, q_ref, v_ref, tau_ff, bandwidth_hz: float = 2.0,
              damping_ratio: float = 1.0) -> dict:
    """Roll out a fixed-base MuJoCo model along a logged motion: feed-forward + weak joint PD.

    At each log sample ``k`` (zero-order hold until ``t[k+1]``, MuJoCo steps of ``opt.timestep``) the
    motors apply ``tau_ff[k] + Kp (q_ref[k] − q) + Kd (v_ref[k] − v)`` with per-joint gains from the
    model's mass-matrix diagonal at the initial state (``Kp = ω² M_ii``, ``Kd = 2 ζ ω M_ii``, ``ω = 2π
    bandwidth_hz``): a weak loop, so the tracking error measures how well the model explains the
    logged efforts. The state starts at ``(q_ref[0], v_ref[0])``.

    Args: joint_names (n,) MuJoCo joint names; t (N,) [s]; q_ref, v_ref, tau_ff (N, n) [rad, rad/s, N·m].
    Returns: ``q`` (N, n) simulated positions [rad] at the log instants, ``rms`` (n,) RMS of
    ``q − q_ref`` [rad] per joint, ``rms_overall`` [rad].
    """
    import mujoco

    t = np.asarray(t, float)
    q_ref, v_ref, tau_ff = (np.asarray(x, float) for x in (q_ref, v_ref, tau_ff))
    data = mujoco.MjData(mj_model)
    jid = [mujoco.mj_name2id(mj_model, mujoco.mjtObj.mjOBJ_JOINT, j) for j in joint_names]
    if min(jid) < 0:
        missing = [j for j, i in zip(joint_names, jid, strict=True) if i < 0]
        raise ExportError(f"MuJoCo model lacks joints {missing}")
    qadr = np.array([mj_model.jnt_qposadr[i] for i in jid])
    dadr = np.array([mj_model.jnt_dofadr[i] for i in jid])
    act = np.array([int(np.flatnonzero(mj_model.actuator_trnid[:, 0] == i)[0]) for i in jid])
    data.qpos[qadr] = q_ref[0]
    data.qvel[dadr] = v_ref[0]
    mujoco.mj_forward(mj_model, data)
    M = np.zeros((mj_model.nv, mj_model.nv))
    mujoco.mj_fullM(mj_model, data, M)
    w = 2 * np.pi * bandwidth_hz
    mii = np.diag(M)[dadr]
    kp, kd = w * w * mii, 2 * damping_ratio * w * mii
    dt = float(mj_model.opt.timestep)
    q_out = np.empty_like(q_ref)
    for k in range(t.size):
        q_out[k] = data.qpos[qadr]
        if k == t.size - 1:
            break
        n_sub = max(1, int(round((t[k + 1] - t[k]) / dt)))
        for _ in range(n_sub):
            q, v = data.qpos[qadr], data.qvel[dadr]
            data.ctrl[act] = tau_ff[k] + kp * (q_ref[k] - q) + kd * (v_ref[k] - v)
            mujoco.mj_step(mj_model, data)
    err = q_out - q_ref
    return {"q": q_out, "rms": np.sqrt(np.mean(err ** 2, axis=0)),
            "rms_overall": float(np.sqrt(np.mean(err ** 2)))}


__all__ = ["LEAD_LAWS", "ExportError", "IdentifiedParameters", "dry_friction_shape", "export_mjcf",
           "export_urdf", "identified_parameters", "is_consistent", "lead_friction_solref_solimp",
           "mjcf_spec", "physical_problems", "set_lead_friction", "track_log", "urdf_inertials"]
