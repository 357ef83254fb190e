"""Actuation model (issue 9, item 2): per-joint effort-sensor gain and offset, estimated in θ.

A logged effort is rarely the joint torque itself: it is a motor current times a nominal torque constant
(and gear ratio), with a per-joint scale error and a bias. The sensor model is

    τ̂_i = g_i · τ_i + o_i        (logged effort of joint i [N·m | N]; τ_i the effort acting on the joint)

with gain g_i = exp(θ_g,i) > 0 [1] and offset o_i = θ_o,i [N·m | N] (`ParameterLayout.actuation`,
parameters ``<joint>.effort_gain`` / ``<joint>.effort_offset``). The inverse-dynamics residual of
`fg_sysid.factors.inverse_dynamics` (paper 004 eq. 2, whose actuation term eq. 55 is the identity for a
fixed base) is then written in the sensor's units,

    r = g · (M a + h + A a + τ_f − J^T λ) + o − τ̂                              [N·m | N]

so that its noise is the effort sensor's σ_τ whatever the gain: every Jacobian row of joint i is scaled by
g_i, and ∂r/∂θ_g = g · τ_model (dg/dθ_g = g), ∂r/∂θ_o = 1. (Dividing the measurement instead,
``model − (τ̂ − o)/g``, scales the noise by 1/g: without the log-determinant term a least-squares fit then
shrinks every torque and inflates every gain by several per cent — measured on Z1 before this form.)

Identifiability. The joint torques are linear in the inertial parameters, the Coulomb/viscous friction
coefficients and the armature; scaling all of them by one common factor c and every gain by 1/c leaves
every residual unchanged: the **common scale** of the gains is not determined by torque data, only the
gains' ratios are (a known mass or payload, or the prior, sets it). A joint whose effort is mostly its
own friction and armature (a light wrist) has a gain that trades against those and is weakly determined.
The prior (log-gain std 0.1 around 1 by default, inertial prior around the URDF) anchors that direction;
`actuation_report` says, per joint and for the common scale, whether the log or the prior determined it.
Held-out predictions in logged units (``g · τ_model + o``) do not depend on that common scale.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["actuation_report", "apply_actuation", "sensor_effort"]


def apply_actuation(layout, theta, lin, tau_meas, iv):
    """The inverse-dynamics linearization ``lin`` (`IDLinearization` of ``model − τ̂``) turned into the
    sensor-units residual ``g·model + o − τ̂`` with its Jacobians, in place; a no-op without actuation.

    ``tau_meas`` (N, nv) logged efforts [N·m | N] (velocity layout), ``iv`` the joints' velocity indices.
    """
    if not layout.n_actuation:
        return lin
    th = np.asarray(theta, float)
    g = np.exp(th[layout.s_gain])
    o = th[layout.s_offset]
    r = lin.r
    model = r[:, iv] + np.atleast_2d(tau_meas)[:, iv]  # model effort (minus external forces)
    r[:, iv] = g * r[:, iv] + (g - 1.0) * np.atleast_2d(tau_meas)[:, iv] + o
    if lin.Jtheta is None:
        return lin
    for J in (lin.Jq, lin.Jv, lin.Ja, lin.Jtheta):
        J[:, iv, :] *= g[None, :, None]
    rows = np.arange(layout.nj)
    lin.Jtheta[:, iv[rows], layout.s_gain.start + rows] = g * model
    lin.Jtheta[:, iv[rows], layout.s_offset.start + rows] = 1.0
    return lin


def sensor_effort(layout, theta, tau_joint: np.ndarray) -> np.ndarray:
    """What the effort sensors read for joint efforts ``tau_joint`` (N, nj): ``g · τ + o`` [N·m | N]."""
    th = np.asarray(theta, float)
    return np.exp(th[layout.s_gain]) * np.asarray(tau_joint, float) + th[layout.s_offset]


def actuation_report(result, threshold: float = 0.9) -> tuple[pd.DataFrame, dict]:
    """Whether the log or the prior determined each gain, and the gains' common scale.

    ``result``: an `IdentificationResult` whose layout has actuation. Returns ``(table, scale)``: the
    table has per joint ``gain``, ``gain_std``, ``gain_std_ratio`` (posterior / prior std),
    ``offset`` [N·m | N], ``offset_std``, ``offset_std_ratio`` and ``gain_determined_by`` ("log", "prior",
    "log+prior"); ``scale`` holds the mean log-gain (the common scale, a direction torque data cannot
    determine without an anchor), its posterior and prior std, their ratio, ``determined_by`` and a
    ``message``. A ratio above ``threshold`` means the prior set it.
    """
    lay = result.layout
    if not lay.n_actuation:
        raise ValueError("the result's layout has no actuation block (fit with fit_actuation)")
    th = np.asarray(result.theta, float)
    cov = np.asarray(result.theta_cov, float)
    sg, so = lay.s_gain, lay.s_offset
    ratio = np.asarray(result.std_ratio, float)
    est, std = np.asarray(result.estimate, float), np.asarray(result.std, float)
    gr = ratio[sg]
    table = pd.DataFrame({
        "joint": list(lay.robot.joint_names), "gain": est[sg], "gain_std": std[sg], "gain_std_ratio": gr,
        "offset": est[so], "offset_std": std[so], "offset_std_ratio": ratio[so],
        "gain_determined_by": np.where(gr < 0.5, "log", np.where(gr > threshold, "prior", "log+prior"))})
    nj = lay.nj
    w = np.full(nj, 1.0 / nj)
    post = float(np.sqrt(max(w @ cov[sg, sg] @ w, 0.0)))
    prior_std = _prior_theta_std(result)[sg]
    prior = float(np.sqrt(np.sum((w * prior_std) ** 2)))
    r = post / prior if prior > 0 else float("nan")
    who = "log" if r < 0.5 else "prior" if r > threshold else "log+prior"
    msg = (f"common scale of the effort gains (mean log-gain {float(w @ th[sg]):+.4f} ± {post:.4f}): "
           f"set by the {who} (posterior/prior std {r:.2f})")
    if who != "log":
        msg += ("; torque data cannot separate it from a common scale of the inertias, friction and "
                "armature: a known mass / payload or a tighter gain prior anchors it (held-out efforts in "
                "logged units do not depend on it)")
    scale = {"mean_log_gain": float(w @ th[sg]), "std": post, "prior_std": prior, "std_ratio": r,
             "determined_by": who, "message": msg}
    return table, scale


def _prior_theta_std(result) -> np.ndarray:
    """θ-space prior std of a result (prior std in physical units through the diagonal of dp/dθ)."""
    lay = result.layout
    d = np.diag(lay.jacobian(lay.to_theta(result.prior_mean)))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(result.prior_std, float) / np.where(d != 0, np.abs(d), np.nan)
