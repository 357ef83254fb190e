"""Per-parameter structural identifiability for a parameter layout (issue 4, item 4).

For every parameter of `fg_sysid.layout.ParameterLayout` (inertial, friction, armature):

* ``structural`` — "identifiable" (alone), "combination" (only in linear combination with others) or
  "unidentifiable" (no torque data can determine it), from the exact RPNA with one geared rotor per
  joint standing for the armature (reflected rotor inertia about the joint axis);
* ``identifiable_fraction`` — ‖P e_k‖², the squared norm of the parameter's unit direction projected on
  the identifiable subspace (1 = fully determined by ideal data, 0 = set by the prior alone).

Friction parameters of a joint are identifiable when that joint's effort is measured (the friction
torque enters only its own joint's equation), unidentifiable otherwise; so are effort offsets. Effort
gains (issue 9 item 2) are "combination": their common scale trades with a common scale of every
inertial, friction and armature parameter (`fg_sysid.factors.actuation`).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from .rpna import default_rotors, rpna


def parameter_identifiability(layout, measured_joints=None) -> pd.DataFrame:
    """DataFrame (name, structural, identifiable_fraction) in the layout's parameter order."""
    robot = layout.robot
    measured = set(robot.joint_names if measured_joints is None else measured_joints)
    gear = 100.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = rpna(robot, rotors=default_rotors(robot.model, gear_ratio=gear))
    R = res.null_basis()
    # armature = gear² × rotor inertia: express null directions in armature coordinates
    rotor_rows = [k for k, n in enumerate(res.parameter_names) if n.endswith(".rotor_inertia")]
    R = R.copy()
    R[rotor_rows] *= gear ** 2
    Q = np.linalg.qr(R)[0] if R.shape[1] else np.zeros((R.shape[0], 0))
    null_w = np.sum(Q ** 2, axis=1)  # ‖component in the null space‖² of each unit direction
    frac_by_name = {}
    for name, w in zip(res.parameter_names, null_w, strict=True):
        frac_by_name[name] = float(np.clip(1.0 - w, 0.0, 1.0))
    rows = []
    for name, group in zip(layout.names, layout.groups(), strict=True):
        if group == "inertial":
            f = frac_by_name[name]
        elif group == "armature":
            f = frac_by_name.get(name.replace(".armature", ".rotor_inertia"), np.nan)
        elif name.endswith(".effort_gain"):  # issue 9 item 2: the gains' common scale trades with all of π,
            rows.append({"name": name, "structural": "combination",  # friction and armature
                         "identifiable_fraction": np.nan})
            continue
        else:
            f = 1.0 if name.split(".")[0] in measured else 0.0
        structural = ("identifiable" if f > 1 - 1e-8 else "unidentifiable" if f < 1e-8 else "combination")
        rows.append({"name": name, "structural": structural, "identifiable_fraction": f})
    return pd.DataFrame(rows)
