"""Contact-work allowance of the floating-base work–energy rows (issue 12, `estimation.energy_contact`)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pinocchio as pin
import pytest

from fg_sysid.datasets.mujoco_sim import simulate_stance, to_log
from fg_sysid.estimation.energy_contact import (
    contact_point_velocities,
    contact_power_bound,
    contact_work_allowance,
    energy_rows,
    floating_energy_allowance,
    weight_share_forces,
)
from fg_sysid.estimation.floating_baseline import manifold_sg_states
from fg_sysid.estimation.floating_smoother import FloatingBaseSmoother, full_configuration
from fg_sysid.factors.energy import EnergyResidual, stance_constant_windows
from fg_sysid.layout import ParameterLayout
from fg_sysid.robots import load_robot

FEET = ("FL_foot", "FR_foot", "RL_foot", "RR_foot")
NOISE = 0.005


@pytest.fixture(scope="module")
def b1():
    return load_robot("b1")


def test_contact_point_velocity_is_the_material_points(b1):
    """v_c = d/dt of the foot's material point ρ below the frame origin (central differences along v)."""
    m, d = b1.model, b1.model.createData()
    rng = np.random.default_rng(3)
    fids = [m.getFrameId(f) for f in FEET]
    q = pin.integrate(m, pin.neutral(m), 0.3 * rng.standard_normal(m.nv))
    v = rng.standard_normal(m.nv)
    vc = contact_point_velocities(m, fids, 0.02, q[None], v[None])[0]
    pin.framesForwardKinematics(m, d, q)
    local = [d.oMf[f].rotation.T @ np.array([0.0, 0.0, -0.02]) for f in fids]

    def points(qq):
        pin.framesForwardKinematics(m, d, qq)
        return np.array([d.oMf[f].act(r) for f, r in zip(fids, local, strict=True)])

    eps = 1e-6
    fd = (points(pin.integrate(m, q, eps * v)) - points(pin.integrate(m, q, -eps * v))) / (2 * eps)
    np.testing.assert_allclose(vc, fd, atol=1e-6)
    # the rolling term ω × (0, 0, −ρ) matters: without it the velocities differ
    vo = contact_point_velocities(m, fids, 0.0, q[None], v[None])[0]
    assert np.abs(vo - fd).max() > 1e-3


def test_weight_share_and_power_bound():
    stance = np.array([[1, 1, 0, 0], [1, 1, 1, 1], [0, 0, 0, 0]], bool)
    f = weight_share_forces(stance, 10.0)
    np.testing.assert_allclose(f[..., 2].sum(1), [98.1, 98.1, 0.0])
    np.testing.assert_allclose(f[1, :, 2], 98.1 / 4)
    assert np.all(f[..., :2] == 0) and np.all(f[~stance] == 0)
    vel = np.ones((3, 4, 3))
    np.testing.assert_allclose(contact_power_bound(f, vel, stance), [98.1 * np.sqrt(3)] * 2 + [0.0])
    # the trapezoid integral over windows of a constant bound
    t = np.linspace(0, 1, 11)
    np.testing.assert_allclose(contact_work_allowance(t, np.full(11, 2.0), t[[0, 5]], t[[5, 10]]), [1.0, 1.0])


@pytest.fixture(scope="module")
def trot(b1):
    res = simulate_stance(b1, 1.2, 500, seed=1, motion="trot", randomize=True, noise=NOISE)
    return res, to_log(res)


def true_setup(b1, trot):
    """What both balance tests start from: the trot, the raw layout at the TRUE parameters (θ), the SG
    states on the manifold (rows, vs), every 5th sample as a knot (idx, tk) and the feet's frame ids."""
    res, log = trot
    layout = ParameterLayout.create(b1, "raw", "coulomb-viscous", 0.05)
    p = res.truth["parameters"]
    theta = layout.to_theta(np.array([p.get(n, 0.0) for n in layout.names]))
    qfull = full_configuration(log, b1)
    rows, _, vs, _ = manifold_sg_states(b1.model, qfull, 0.002, 25, 3)
    idx = np.arange(rows[0], rows[-1], 5)
    fids = [b1.model.getFrameId(f) for f in FEET]
    return res, log, layout, p, theta, qfull, rows, vs, idx, log.t[idx], fids


@pytest.mark.parametrize("use_forces", [False, True])
def test_allowance_makes_true_parameter_rows_order_one(b1, trot, use_forces):
    """At the TRUE parameters and states of a MuJoCo trot (soft contacts), the balance residual per knot
    interval is the contact work: whitened by the sensor noise alone it is ~100σ; with the allowance
    (weight share or logged forces) its RMS is O(1) and no row exceeds 3."""
    res, log, layout, p, theta, qfull, rows, vs, idx, tk, fids = true_setup(b1, trot)
    mass = float(sum(p[f"{b}.m"] for b in b1.body_names))
    sc, source = floating_energy_allowance(b1.model, fids, 0.02, log, qfull, rows, vs, tk, FEET, mass,
                                           use_forces)
    assert source.startswith("logged" if use_forces else "weight share")
    keep = np.zeros(idx.size - 1)
    keep[stance_constant_windows(np.arange(idx.size - 1), 1, res.contact[idx])] = 1
    noise = SimpleNamespace(v=np.full(12, NOISE), tau=np.full(12, NOISE))
    elog = (log.t, log.v, log.tau, True)
    work, sigma = energy_rows(elog, tk, b1.joint_names, noise, sc, keep)
    _, sigma_sensor = energy_rows(elog, tk, b1.joint_names, noise, np.zeros_like(sc), keep)
    r = EnergyResidual(layout).evaluate(res.q_pin[idx], res.v_pin[idx], tk, theta, work, jacobians=False).r
    k = keep > 0
    assert k.sum() > 50 and np.all(np.isinf(sigma[~k]))
    z, z_sensor = r[k] / sigma[k], r[k] / sigma_sensor[k]
    assert np.sqrt(np.mean(z_sensor ** 2)) > 30
    assert 0.05 < np.sqrt(np.mean(z ** 2)) < 1.5 and np.abs(z).max() < 3


def test_smoother_rows_use_the_allowance(b1):
    """FloatingBaseSmoother(energy=True): the energy rows' weights are 1/√(σ_W² + σ_c²) with σ_c from the
    log; energy_contact="none" keeps the sensor-noise weights; a bad mode is refused by name."""
    res = simulate_stance(b1, 1.0, 200, seed=0, motion="trot", randomize=True, noise=NOISE)
    log = to_log(res)
    sm = FloatingBaseSmoother(b1, knot_stride=2, max_iterations=2, reweight_rounds=0, use_forces=False,
                              determined_std_ratio=None, constraints="soft", energy=True).fit(log)
    from fg_sysid.estimation.problem import Evaluation

    keep = sm._energy_intervals()
    w = sm.problem_.term("energy").evaluate(Evaluation(sm.problem_, sm.states_, sm.result_.theta, False),
                                            False).w.ravel()
    assert sm.energy_contact_source_.startswith("weight share")
    _, sigma_sensor = energy_rows(sm._energy_log, sm.knot_times_, b1.joint_names, sm.noise_,
                                  np.zeros(keep.size), keep)
    k = keep > 0
    assert k.sum() > 20 and np.all(sm._energy_allowance[k] > 0)
    np.testing.assert_allclose(w[k], 1 / np.hypot(sigma_sensor[k], sm._energy_allowance[k]), rtol=1e-9)
    sm_allow_sigma = np.where(w > 0, 1 / np.where(w > 0, w, 1.0), np.inf)
    assert np.median(w[k] * sigma_sensor[k]) < 0.2  # the allowance dominates the sensor noise here
    # energy_contact="measured": the logged forces' contact work is added to the input work
    from fg_sysid.estimation.energy_contact import measured_contact_rows

    sm = FloatingBaseSmoother(b1, knot_stride=2, max_iterations=2, reweight_rounds=0, use_forces=False,
                              determined_std_ratio=None, constraints="soft", energy=True,
                              energy_contact="measured").fit(log)
    out = sm.problem_.term("energy").evaluate(Evaluation(sm.problem_, sm.states_, sm.result_.theta, False),
                                              False)
    lg, qfull, rows, vs = sm._energy_contact_inputs
    work_c, sigma = measured_contact_rows(sm._kin_model, sm._fids, sm.radius_, lg, qfull, rows, vs,
                                          sm.knot_times_, sm.feet_, b1.joint_index_v(), sm.noise_.v,
                                          sm.noise_.tau, sm.sigma_force)
    np.testing.assert_allclose(out.w.ravel()[k], 1 / sigma[k], rtol=1e-9)
    assert np.all(out.w.ravel()[~k] == 0) and np.median(sigma[k] / sm_allow_sigma[k]) < 0.5
    with pytest.raises(ValueError, match="energy_contact.*'bogus'"):
        FloatingBaseSmoother(b1, knot_stride=2, max_iterations=1, use_forces=False, energy=True,
                             energy_contact="bogus").fit(log)


def test_generalized_contact_force_power_is_force_times_point_velocity(b1):
    """τ_cᵀ v = Σ_stance f_fᵀ v_c,f (the contact-point Jacobian agrees with `contact_point_velocities`)."""
    from fg_sysid.estimation.energy_contact import contact_generalized_forces

    m = b1.model
    rng = np.random.default_rng(4)
    fids = [m.getFrameId(f) for f in FEET]
    q = np.array([pin.integrate(m, pin.neutral(m), 0.3 * rng.standard_normal(m.nv)) for _ in range(3)])
    v = rng.standard_normal((3, m.nv))
    f = rng.standard_normal((3, 4, 3))
    stance = np.array([[1, 0, 1, 1], [0, 0, 0, 0], [1, 1, 1, 1]], bool)
    tau_c = contact_generalized_forces(m, fids, 0.02, q, f, stance)
    vc = contact_point_velocities(m, fids, 0.02, q, v)
    expected = np.sum(
        np.where(stance, np.einsum("kfa,kfa->kf", f, vc), 0.0), axis=1)
    np.testing.assert_allclose(np.einsum("ki,ki->k", tau_c, v), expected, atol=1e-10)
    assert np.all(tau_c[1] == 0)


def test_measured_contact_work_closes_the_balance_to_sensor_noise(b1, trot):
    """energy_contact="measured": with the logged forces, Ŵ_in + Ŵ_c closes the balance at the TRUE
    parameters and states to the sensor noise (whitened RMS O(1)), from ~100σ without it."""
    from fg_sysid.estimation.energy_contact import measured_contact_rows

    res, log, layout, p, theta, qfull, rows, vs, idx, tk, fids = true_setup(b1, trot)
    keep = np.zeros(idx.size - 1)
    keep[stance_constant_windows(np.arange(idx.size - 1), 1, res.contact[idx])] = 1
    noise = SimpleNamespace(v=np.full(12, NOISE), tau=np.full(12, NOISE))
    work, sigma_sensor = energy_rows((log.t, log.v, log.tau, True), tk, b1.joint_names, noise,
                                     np.zeros(idx.size - 1), keep)
    work_c, sigma = measured_contact_rows(b1.model, fids, 0.02, log, qfull, rows, vs, tk, FEET,
                                          b1.joint_index_v(), NOISE, NOISE, 0.0)
    r = EnergyResidual(layout).evaluate(res.q_pin[idx], res.v_pin[idx], tk, theta, work + work_c,
                                        jacobians=False).r
    r0 = EnergyResidual(layout).evaluate(res.q_pin[idx], res.v_pin[idx], tk, theta, work, jacobians=False).r
    k = keep > 0
    assert np.sqrt(np.mean((r0[k] / sigma_sensor[k]) ** 2)) > 30
    z = r[k] / sigma[k]
    assert 0.5 < np.sqrt(np.mean(z ** 2)) < 2.0 and np.percentile(np.abs(z), 99) < 6
    import dataclasses

    with pytest.raises(ValueError, match="missing for.*FL_foot"):
        measured_contact_rows(b1.model, fids, 0.02, dataclasses.replace(log, forces={}), qfull, rows, vs, tk,
                              FEET, b1.joint_index_v(), NOISE, NOISE, 0.0)
