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

import numpy as np

from ..layout import ParameterLayout, inertial_prior_std
from ..robots.symmetry import PLANES, SymmetryMap, reflect_inertial, reflection_signs

__all__ = ["PLANES", "SymmetryMap", "reflect_inertial", "reflection_signs", "symmetry_relative_std",
           "symmetry_residual", "total_mass_residual"]

def symmetry_relative_std(symmetry: SymmetryMap, layout: ParameterLayout, p_ref: np.ndarray | None = None,
                          relative: float = 0.01) -> np.ndarray:
    """Per-residual std of the symmetry prior: ``relative`` × the scale of the left parameter in ``p_ref``
    (default the nominal p), with the per-body floors of the raw inertial prior so zero entries stay
    finite."""
    p_ref = layout.nominal_physical() if p_ref is None else np.asarray(p_ref, float)
    pi, _, _ = layout.split(p_ref)
    scale = np.abs(p_ref).copy()
    scale[layout.s_inertial] = np.array([inertial_prior_std("raw", b, 1.0) for b in pi]).ravel()
    li, _, _ = symmetry.indices(layout)
    return relative * np.maximum(scale[li], 1e-12)


def symmetry_residual(layout: ParameterLayout, theta: np.ndarray, symmetry: SymmetryMap,
                      jacobians: bool = True, std: float | np.ndarray = 1.0):
    """Whitened symmetry prior r = (p_left − R p_right) / σ, shape (m,), and dr/dθ (m, n) or None.

    ``std`` is a scalar or per-residual array (see `symmetry_relative_std`, `SymmetryMap.residual_names`).
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
