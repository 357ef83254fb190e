"""Process noise from the log's velocities (issue 9, `estimation.process_noise`): the bound's identities,
that it only ever tightens the historic default, and that on a UR10-like log (100 Hz, precise logged
velocities, per-joint effort noise of 5 % of each joint's RMS) the smoother's base-parameter error is
below the classical fit's — out of the UR10 data's class: the project's RK4 simulator with friction,
armature and a 1 kHz controller held between the 100 Hz samples."""

import dataclasses
import warnings

import numpy as np
import pytest

from fg_sysid.datasets.simulate import Effects, simulate, truth_arrays
from fg_sysid.estimation.baseline import LeastSquaresSG
from fg_sysid.estimation.metrics import base_parameter_error
from fg_sysid.estimation.process_noise import (
    MIN_FRACTION_OF_DEFAULT,
    TIGHTEN_BELOW,
    kinematic_process_std,
    process_velocity_std,
)
from fg_sysid.estimation.smoother import JointSmoother
from fg_sysid.robots import load_robot

H = 0.01  # 100 Hz


def _smooth_velocities(n=1000):
    t = np.arange(n) * H
    w = 2 * np.pi * np.array([0.3, 0.5])
    return t, np.sin(w[None, :] * t[:, None]), w


def test_bound_of_a_smooth_motion_is_the_trapezoid_scale():
    # v = sin(ω t): Δ³v ≈ h³ v''' = −h³ ω³ cos(ω t), RMS h³ ω³ / √2; the bound is half that
    _, v, w = _smooth_velocities()
    b = kinematic_process_std(v)
    np.testing.assert_allclose(b, 0.5 * H**3 * w**3 / np.sqrt(2), rtol=0.02)


def test_bound_with_white_velocity_noise_is_half_sqrt20_sigma():
    _, v, _ = _smooth_velocities(20000)
    sigma = 1e-3
    vn = v + np.random.default_rng(0).normal(0.0, sigma, v.shape)
    np.testing.assert_allclose(kinematic_process_std(vn), 0.5 * np.sqrt(20.0) * sigma, rtol=0.03)


def test_unlogged_joints_and_short_logs_give_nan():
    _, v, _ = _smooth_velocities(50)
    v[:, 1] = np.nan
    b = kinematic_process_std(v)
    assert np.isfinite(b[0]) and np.isnan(b[1])
    assert np.all(np.isnan(kinematic_process_std(v[:10])))


def test_process_std_only_tightens_the_default_and_has_a_floor():
    _, v, _ = _smooth_velocities()
    default = np.array([1e-3, 1e-9])  # joint 0: far looser than the bound; joint 1: tighter than it
    assert kinematic_process_std(v)[0] < TIGHTEN_BELOW * default[0]
    spv, how = process_velocity_std(default, v)
    bound = kinematic_process_std(v)
    assert spv[0] == pytest.approx(max(bound[0], MIN_FRACTION_OF_DEFAULT * default[0]))
    assert spv[0] < default[0]
    assert spv[1] == default[1]  # never looser than the historic default
    near = np.array([0.5, 1.0]) * bound / TIGHTEN_BELOW  # the bound is not 10x below: both kept
    np.testing.assert_allclose(process_velocity_std(near, v)[0], near)
    assert "tightened on 1 of 2 joints" in how
    noisy = v + np.random.default_rng(1).normal(0.0, 1.0, v.shape)
    np.testing.assert_array_equal(process_velocity_std(default, noisy)[0], default)
    spv, how = process_velocity_std(default, None)
    np.testing.assert_array_equal(spv, default)
    assert "no logged velocities" in how
    exact = np.outer(np.arange(1000) * H, [1.0, 2.0])  # constant velocity: bound 0 -> floor
    np.testing.assert_allclose(process_velocity_std(default, exact)[0], MIN_FRACTION_OF_DEFAULT * default)


def _base_error(robot, sim, est, names=None):
    ar = truth_arrays(sim.truth, robot)
    friction = np.column_stack([ar["fc"], ar["fv"]]).ravel()
    p = np.concatenate([ar["inertial"].ravel(), friction, ar["armature"]])
    if names is not None:  # the smoother's layout: the tanh widths (.vs) are not in the metric's vector
        est = np.array([e for e, n in zip(est, names, strict=True) if not n.endswith(".vs")])
    return 100 * base_parameter_error(robot, est, p, sim.truth_log.q, sim.truth_log.v, sim.truth_acceleration)


def test_smoother_beats_least_squares_on_a_ur10_like_log():
    """6 s at 100 Hz, 1 kHz controller, q noise 1e-5 rad, exact velocities, τ_j noise 5 % of joint j's RMS
    (the UR10 protocol's high level). Measured (seed 0): smoother 1.83 %, LS-SG 4.55 %, the smoother with
    the process noise of before issue 9 9.59 %. About 2 s of CPU."""
    robot = load_robot("z1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sim = simulate(robot, 6.0, 100.0, 0.0, 0, effects=Effects(control_rate=1000.0))
        clean = sim.truth_log
        rng = np.random.default_rng(10)
        rms = np.sqrt(np.mean(clean.tau**2, axis=0))
        log = dataclasses.replace(clean, q=clean.q + rng.normal(0.0, 1e-5, clean.q.shape),
                                  tau=clean.tau + rng.normal(0.0, 1.0, clean.tau.shape) * 0.05 * rms)
        ls = LeastSquaresSG().fit(log, robot).result_
        new = JointSmoother(robot).fit(log)
        old = JointSmoother(robot, process_from_log=False).fit(log).result_
    e_ls = _base_error(robot, sim, ls.estimate)
    e_new = _base_error(robot, sim, new.result_.estimate, new.result_.layout.names)
    e_old = _base_error(robot, sim, old.estimate, old.layout.names)
    assert "tightened on" in new.noise_.source["process"]
    assert e_new <= 0.8 * e_ls, (e_new, e_ls)
    assert e_new <= 0.5 * e_old, (e_new, e_old)


def test_fixed_armature_with_the_default_friction_fits():
    """Regression: ``fit_armature=False`` with the default (scale-estimating) friction crashed when the
    classical initial fit's vector (which always carries every armature) was mapped to the layout."""
    robot = load_robot("z1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        log = simulate(robot, 1.0, 100.0, 0.01, 3).log
        sm = JointSmoother(robot, fit_armature=False, max_iterations=3).fit(log)
    res = sm.result_
    arm = res.estimate[res.layout.s_armature]
    prior = res.layout.to_physical(sm._theta_bar)[res.layout.s_armature]
    np.testing.assert_allclose(arm, prior, rtol=1e-4)
