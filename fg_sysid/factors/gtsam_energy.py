"""GTSAM wrapper of the work–energy residual (`fg_sysid.factors.energy`, paper 004 eq. 63).

Same conventions as `fg_sysid.factors.gtsam_factors`: knot states ``state(k)`` hold (q, v, a) stacked
(fixed bases, nq == nv), ``THETA`` holds θ; the error is the unwhitened residual [J] and the noise
model whitens it with σ_W (`fg_sysid.factors.energy.input_work_std`).
"""

from __future__ import annotations

import gtsam
import numpy as np

from .energy import EnergyResidual
from .gtsam_factors import _check_space, _unpack, make_noise_model
from .keys import THETA, state

__all__ = ["energy_factor"]


def energy_factor(residual: EnergyResidual, k0: int, k1: int, t0: float, t1: float, work: float,
                  sigma) -> gtsam.CustomFactor:
    """Energy factor on (``state(k0)``, ``state(k1)``, ``THETA``) for the knot interval [t0, t1] [s]:

        r = E(x_k1) − E(x_k0) + ½ (t1 − t0) (v_k0ᵀτ_f(v_k0) + v_k1ᵀτ_f(v_k1)) − Ŵ_in      [J]

    ``work`` = Ŵ_in measured over the interval [J] (`input_work`), ``sigma`` its std [J] (or a noise
    model of dimension 1). The acceleration part of the states has zero Jacobian.
    """
    _check_space(residual.space)
    nv = residual.model.nv
    if not t1 > t0:
        raise ValueError(f"energy factor {k0}->{k1}: t1 must be > t0, got {t0}, {t1}")
    t = np.array([t0, t1], float)
    W = np.array([float(work)])
    model = make_noise_model(sigma, 1)

    def error(this: gtsam.CustomFactor, values: gtsam.Values, jacobians):
        ka, kb, kt = this.keys()
        qa, va, _ = _unpack(values.atVector(ka), nv)
        qb, vb, _ = _unpack(values.atVector(kb), nv)
        theta = values.atVector(kt)
        lin = residual.evaluate(np.vstack([qa, qb]), np.vstack([va, vb]), t, theta, W, np.array([0]), 1,
                                jacobians=jacobians is not None)
        if jacobians is not None:
            zero = np.zeros((1, nv))
            jacobians[0] = np.concatenate([lin.Jq_a, lin.Jv[:, 0], zero], axis=1)
            jacobians[1] = np.concatenate([lin.Jq_b, lin.Jv[:, 1], zero], axis=1)
            jacobians[2] = lin.Jtheta
        return lin.r

    return gtsam.CustomFactor(model, [state(k0), state(k1), THETA], error)
