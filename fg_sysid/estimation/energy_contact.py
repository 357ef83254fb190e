"""Contact-work allowance of the work–energy rows on a floating base (issue 12, paper 004 eq. 63).

The work–energy balance of a legged robot, ``E(x_b) − E(x_a) + W_f = Ŵ_in + W_c``, has the contact work
``W_c = ∫ Σ_f f_fᵀ v_c,f dt`` (``f_f`` the world contact force on foot f, ``v_c,f`` the world velocity of
its contact point). The rigid-contact model of `FloatingBaseSmoother` holds a stance contact point still
(``v_c = 0``), so its energy rows assume ``W_c = 0``. A real (or MuJoCo, soft) contact point moves while
it carries the robot's weight — penetration, compliance, rolling and slip: on MuJoCo B1 trots with the
true parameters the balance residual per knot interval is that contact work (correlation 0.997) and
100–200× the input-work sensor noise (docs/benchmarks.md, "Energy observations on a floating base").
Rows whitened by the sensor noise alone then act as hard constraints on an energy the model cannot
represent, and the states and parameters bend to satisfy them.

The rows here get an **allowance** for that unmodelled work: per knot interval [t_a, t_b]

    σ_c = ∫_{t_a}^{t_b} Σ_{f in stance} ‖f̂_f(t)‖ ‖v̂_c,f(t)‖ dt                                      [J]

(trapezoid rule over the log samples), an upper bound of |W_c| by Cauchy–Schwarz, evaluated on the
*measured* trajectory before any fit: ``v̂_c`` from the logged base pose and joint positions / velocities
(the smoother's Savitzky–Golay states, `contact_point_velocities`), ``f̂`` the logged contact forces when
the smoother uses them, else the static share of the nominal weight, ``m g / n_stance`` along +z
(`weight_share_forces`). Each row's std is ``σ_row = √(σ_W² + σ_c²)`` with σ_W the input work's sensor
noise (`factors.energy.input_work_std`). Where the feet are still (a quiet stance) σ_c → the velocity
noise's share and the rows keep their weight; where they move, the rows only count as far as the contact
work can be bounded. ``energy_contact="none"`` restores the sensor-noise-only rows.

With contact-force sensors the contact work can be **modelled** instead (``energy_contact="measured"``,
`measured_contact_rows`): Ŵ_c = ∫ τ_cᵀ v̂ dt with τ_c = Σ J_cᵀ f̂ is added to the measured input work and
the rows' std combines the sensor noise of Ŵ_in + Ŵ_c and 5 % of the bound σ_c for the error of the
modelled contact work (`MEASURED_CONTACT_RELATIVE_ERROR`). On a MuJoCo B1 trot with the true parameters
the residual after adding it is near the sensor-noise level (median 0.0027 J against 0.0026 J σ_W, from
0.051 J), with a heavy tail that the 5 % term covers.

Frames and units: world-aligned contact-point velocities [m/s] (Pinocchio ``LOCAL_WORLD_ALIGNED``
frame velocity moved to the sphere's lowest point ρ below the frame origin), forces [N] in the world,
work [J], time [s].
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

__all__ = [
    "CONTACT_WORK_MODES",
    "contact_generalized_forces",
    "contact_point_velocities",
    "contact_power_bound",
    "contact_work_allowance",
    "floating_energy_allowance",
    "measured_contact_rows",
    "weight_share_forces",
]

#: ``FloatingBaseSmoother(energy_contact=...)``: "allowance" (bound as noise), "measured" (contact work from
#: logged forces, `measured_contact_rows`) or "none" (sensor noise only).
CONTACT_WORK_MODES = ("allowance", "measured", "none")
#: κ of ``energy_contact="measured"``: error of the modelled contact work as a fraction of its bound σ_c.
#: Chosen so that the rows at the TRUE parameters and states of a MuJoCo B1 trot (seed 1, 1.2 s) whiten to
#: RMS ≈ 1 (1.1–1.2 at 250 and 500 Hz, knot strides 1–5; with κ = 0 the RMS is 4–6, heavy-tailed: 10 % of
#: the rows beyond 5σ). A calibration on simulated truth, stated as such (docs/energy.md).
MEASURED_CONTACT_RELATIVE_ERROR = 0.05
GRAVITY = 9.81


def contact_point_velocities(model: pin.Model, frame_ids, radius: float, q: np.ndarray,
                             v: np.ndarray) -> np.ndarray:
    """World velocity [m/s] of each foot's contact point, (N, n_feet, 3).

    ``q`` (N, nq), ``v`` (N, nv) Pinocchio configurations / velocities (free flyer: base velocity in the
    base frame). The contact point is ``radius`` [m] below the foot frame's origin along world −z (a sphere
    foot's lowest point), ``v_c = v_o + ω × (0, 0, −ρ)`` with the frame's world-aligned linear and angular
    velocity.
    """
    q, v = np.atleast_2d(np.asarray(q, float)), np.atleast_2d(np.asarray(v, float))
    data = model.createData()
    offset = np.array([0.0, 0.0, -float(radius)])
    out = np.empty((q.shape[0], len(frame_ids), 3))
    for k in range(q.shape[0]):
        pin.forwardKinematics(model, data, q[k], v[k])
        for i, fid in enumerate(frame_ids):
            vf = pin.getFrameVelocity(model, data, int(fid), pin.LOCAL_WORLD_ALIGNED)
            out[k, i] = vf.linear + np.cross(vf.angular, offset)
    return out


def weight_share_forces(stance: np.ndarray, mass: float, gravity: float = GRAVITY) -> np.ndarray:
    """Static split of the weight ``mass·g`` [N] over the stance feet, along world +z: (N, n_feet, 3).
    ``stance`` (N, n_feet) bool; samples with no foot down carry no force."""
    stance = np.asarray(stance, bool)
    n = stance.sum(axis=1, keepdims=True)
    share = np.where(stance, float(mass) * gravity / np.maximum(n, 1), 0.0)
    f = np.zeros(stance.shape + (3,))
    f[..., 2] = share
    return f


def contact_power_bound(forces: np.ndarray, velocities: np.ndarray, stance: np.ndarray) -> np.ndarray:
    """``Σ_{f in stance} ‖f_f‖ ‖v_c,f‖`` [W] per sample (≥ |contact power| by Cauchy–Schwarz), (N,)."""
    mag = np.linalg.norm(forces, axis=2) * np.linalg.norm(velocities, axis=2)
    return np.sum(np.where(np.asarray(stance, bool), mag, 0.0), axis=1)


def contact_work_allowance(t: np.ndarray, power_bound: np.ndarray, t_a, t_b) -> np.ndarray:
    """``σ_c = ∫_{t_a}^{t_b} P̄ dt`` [J] per window (trapezoid over the samples ``t``); ``t_a``, ``t_b``
    sample instants (knots)."""
    from ..factors.energy import _sample_ranges

    t = np.asarray(t, float)
    P = np.asarray(power_bound, float)
    cum = np.concatenate([[0.0], np.cumsum(0.5 * np.diff(t) * (P[1:] + P[:-1]))])
    ia, ib = _sample_ranges(t, t_a, t_b)
    return cum[ib] - cum[ia]


def floating_energy_allowance(model: pin.Model, frame_ids, radius: float, log, q_full: np.ndarray,
                              rows: np.ndarray, v_sg: np.ndarray, t_knots: np.ndarray,
                              feet, mass: float, use_forces: bool) -> tuple[np.ndarray, str]:
    """σ_c per knot interval [J] of a floating-base log, and the force source used (module docstring).

    ``q_full`` (N, nq) the measured configurations of every log sample, ``rows`` / ``v_sg`` the samples
    and (n_rows, nv) velocities of the smoother's Savitzky–Golay states (the joint entries are replaced
    by the logged joint velocities when the log has them); samples outside ``rows`` take the nearest
    row's velocity. ``feet`` the contact frame names (stance flags from ``log.contacts``); ``mass`` [kg]
    for the weight share when forces are not used (``use_forces`` False or not logged).
    """
    n = q_full.shape[0]
    pos = np.clip(np.searchsorted(rows, np.arange(n)), 0, rows.size - 1)
    v = np.asarray(v_sg, float)[pos].copy()
    if log.v is not None:
        iv = [model.joints[model.getJointId(j)].idx_v for j in log.joint_names]
        v[:, iv] = np.asarray(log.v, float)
    stance = np.stack([np.asarray(log.contacts[f], bool) for f in feet], axis=1)
    if use_forces and log.forces and all(f in log.forces for f in feet):
        forces = np.stack([np.asarray(log.forces[f], float) for f in feet], axis=1)
        source = "logged contact forces"
    else:
        forces = weight_share_forces(stance, mass)
        source = f"weight share ({mass:.3g} kg)"
    vc = contact_point_velocities(model, frame_ids, radius, q_full, v)
    bound = contact_power_bound(forces, vc, stance)
    t_knots = np.asarray(t_knots, float)
    return contact_work_allowance(np.asarray(log.t, float), bound, t_knots[:-1], t_knots[1:]), source


def energy_rows(energy_log, t_knots, joint_names, noise, allowance, keep) -> tuple[np.ndarray, np.ndarray]:
    """Measured input work Ŵ [J] and row std σ_row = √(σ_W² + σ_c²) [J] per knot interval.

    ``energy_log`` = (t, joint velocities, efforts, velocities logged?) of the log (the smoother's
    ``_energy_data``); σ_W from the effort and velocity noise levels of ``noise`` as in
    `JointSmoother._energy_term` (without logged velocities, the SG velocities' high-frequency noise);
    ``allowance`` σ_c (N−1,); ``keep`` (N−1,) 0/1: σ = ∞ (weight 0) where 0.
    """
    from ..factors.energy import input_work, input_work_std
    from .noise import highfreq_noise_std

    t_log, v_log, tau_log, logged_v = energy_log
    t = np.asarray(t_knots, float)
    work = input_work(t_log, v_log, tau_log, t[:-1], t[1:], joint_names)
    sv = noise.v if logged_v and noise.v is not None else highfreq_noise_std(v_log)
    sigma_w = input_work_std(t_log, v_log, tau_log, t[:-1], t[1:], np.nan_to_num(sv), noise.tau)
    sigma = np.hypot(sigma_w, np.asarray(allowance, float))
    sigma = np.maximum(sigma, 1e-6 * max(float(np.max(np.abs(work), initial=0.0)), 1e-12))
    return work, np.where(np.asarray(keep, float) > 0, sigma, np.inf)


# ---------------------------------------------------------------------------------------------- measured
def contact_generalized_forces(model: pin.Model, frame_ids, radius: float, q: np.ndarray, forces: np.ndarray,
                               stance: np.ndarray) -> np.ndarray:
    """``τ_c = Σ_{f in stance} J_c,fᵀ f_f`` (N, nv): the generalized force of the world contact forces
    ``forces`` (N, n_feet, 3) [N] at the contact points (ρ below the frame origins along world −z), with
    ``J_c = J_lin − [o]× J_ang`` the contact point's world-aligned Jacobian (o = (0, 0, −ρ)); the contact
    power is ``τ_cᵀ v``."""
    q = np.atleast_2d(np.asarray(q, float))
    data = model.createData()
    skew = np.array([[0.0, radius, 0.0], [-radius, 0.0, 0.0], [0.0, 0.0, 0.0]])  # [(0, 0, −ρ)]×
    out = np.zeros((q.shape[0], model.nv))
    stance = np.asarray(stance, bool)
    for k in range(q.shape[0]):
        if not stance[k].any():
            continue
        pin.computeJointJacobians(model, data, q[k])
        pin.updateFramePlacements(model, data)
        for i, fid in enumerate(frame_ids):
            if stance[k, i]:
                J = pin.getFrameJacobian(model, data, int(fid), pin.LOCAL_WORLD_ALIGNED)
                out[k] += (J[:3] - skew @ J[3:]).T @ forces[k, i]
    return out


def measured_contact_rows(model: pin.Model, frame_ids, radius: float, log, q_full: np.ndarray,
                          rows: np.ndarray, v_sg: np.ndarray, t_knots: np.ndarray, feet, joint_index_v,
                          sigma_v, sigma_tau, sigma_force: float) -> tuple[np.ndarray, np.ndarray]:
    """Contact work *modelled* from logged forces (``energy_contact="measured"``): per knot interval the
    measured contact work Ŵ_c = ∫ τ_cᵀ v̂ dt [J] and the std [J] of the row with Ŵ_in + Ŵ_c.

    Sensor noise, per sample (the velocity noise of the two works treated as independent: conservative)
    ``var = Σ_j ((τ̂_j² + τ_c,j²) σ_v,j² + v̂_j² σ_τ,j² + σ_v,j² σ_τ,j²) + σ_f² Σ_{stance} ‖v̂_c,f‖²``, summed
    with the squared trapezoid weights of each interval; plus the error of the modelled contact work,
    ``MEASURED_CONTACT_RELATIVE_ERROR`` × its bound ∫ Σ ‖f̂‖‖v̂_c‖ dt (sampling a fast soft-contact transient
    at the log rate, touchdown settling inside a stance interval): σ = √(σ_noise² + (κ σ_c)²). The base
    velocity comes from the smoothed base pose (its noise neglected: a motion-capture / state-estimator
    pose). Needs ``force.<foot>.*`` for every foot (ValueError naming the missing feet).
    """
    missing = [f for f in feet if not log.forces or f not in log.forces]
    if missing:
        raise ValueError(f"energy_contact='measured' needs the logged contact forces of every foot; "
                         f"missing for {missing} (columns force.<foot>.x/y/z)")
    from ..factors.energy import _sample_ranges, trapezoid_weights

    n = q_full.shape[0]
    pos = np.clip(np.searchsorted(rows, np.arange(n)), 0, rows.size - 1)
    v = np.asarray(v_sg, float)[pos].copy()
    iv = np.asarray(joint_index_v)
    if log.v is not None:
        v[:, iv] = np.asarray(log.v, float)
    stance = np.stack([np.asarray(log.contacts[f], bool) for f in feet], axis=1)
    forces = np.stack([np.asarray(log.forces[f], float) for f in feet], axis=1)
    tau_c = contact_generalized_forces(model, frame_ids, radius, q_full, forces, stance)
    t = np.asarray(log.t, float)
    power = np.einsum("ij,ij->i", tau_c, v)
    vc = contact_point_velocities(model, frame_ids, radius, q_full, v)
    tau = np.asarray(log.tau, float)
    sv = np.broadcast_to(np.nan_to_num(np.asarray(sigma_v, float)), (iv.size,))
    st = np.broadcast_to(np.asarray(sigma_tau, float), (iv.size,))
    var = ((tau ** 2 + tau_c[:, iv] ** 2) @ sv ** 2 + (v[:, iv] ** 2) @ st ** 2
           + float(np.sum(sv ** 2 * st ** 2)))
    var = var + float(sigma_force) ** 2 * np.sum(np.where(stance, np.sum(vc ** 2, axis=2), 0.0), axis=1)
    t_knots = np.asarray(t_knots, float)
    work_c = contact_work_allowance(t, power, t_knots[:-1], t_knots[1:])
    ia, ib = _sample_ranges(t, t_knots[:-1], t_knots[1:])
    sigma = np.array([np.sqrt(np.sum(trapezoid_weights(t[a:b + 1]) ** 2 * var[a:b + 1]))
                      for a, b in zip(ia, ib, strict=True)])
    bound = contact_work_allowance(t, contact_power_bound(forces, vc, stance), t_knots[:-1], t_knots[1:])
    return work_c, np.hypot(sigma, MEASURED_CONTACT_RELATIVE_ERROR * bound)
