"""Energy rows' measured input work on held efforts (issue 12): quadrature bias, noise level, row correlation.

Oracles: the work–energy balance at the true states and parameters of a simulated Z1 (efforts held
zero-order over each 500 Hz sample, `datasets.simulate`), and Monte-Carlo draws of the sensor noise.
"""

from __future__ import annotations

import numpy as np
import pytest

from fg_sysid.datasets.simulate import simulate, truth_arrays
from fg_sysid.factors.energy import (
    DEFAULT_WORK_QUADRATURE,
    EnergyResidual,
    input_work,
    input_work_std,
)
from fg_sysid.layout import ParameterLayout
from fg_sysid.robots import load_robot

SIGMA = 0.01


@pytest.fixture(scope="module")
def z1_rows():
    """A 4 s Z1 log at 500 Hz (σ = 0.01 on q, v, τ; truth tanh width 0.02 rad/s, seed outside the
    Table I study's 0–49) and ``ΔE + W_f`` per sample interval at the true states and parameters."""
    robot = load_robot("z1")
    sim = simulate(robot, 4.0, 500.0, SIGMA, 7001, friction_velocity_scale=0.02)
    tr = truth_arrays(sim.truth, robot)
    lay = ParameterLayout.create(robot, "exponential-eigenvalue", "coulomb-viscous", 0.02)
    p = np.concatenate([tr["inertial"].ravel(), np.c_[tr["fc"], tr["fv"]].ravel(), tr["armature"]])
    T = sim.truth_log
    r0 = EnergyResidual(lay).evaluate(T.q, T.v, T.t, lay.to_theta(p), np.zeros(T.t.size - 1),
                                      jacobians=False).r
    return sim, r0


def _sums(x, k):
    n = (x.size // k) * k
    return x[:n].reshape(-1, k).sum(axis=1)


def test_hold_quadrature_is_exact_on_held_efforts_trapezoid_is_biased(z1_rows):
    sim, r0 = z1_rows
    T = sim.truth_log
    t = T.t
    assert DEFAULT_WORK_QUADRATURE == "hold"
    sig = input_work_std(t, sim.log.v, sim.log.tau, t[:-1], t[1:], SIGMA, SIGMA, long_run=False)
    hold = r0 - input_work(t, T.v, T.tau, t[:-1], t[1:])  # the default quadrature, noise-free log
    trap = r0 - input_work(t, T.v, T.tau, t[:-1], t[1:], quadrature="trapezoid")
    # held efforts: Σ τ_iᵀ ½Δt (v_i + v_i+1) closes the balance to the ∫v dt quadrature error
    assert np.sqrt(np.mean((hold / sig) ** 2)) < 0.02
    # the trapezoid rule's error is one-signed (−½ Δt Δτᵀv summed) and grows over the log
    assert np.mean(trap / sig) > 0.02  # measured 0.044
    assert abs(np.sum(trap)) > np.sqrt(np.sum(sig ** 2)), "bias should exceed the log's noise"  # 1.6
    assert abs(np.sum(hold)) < 0.1 * np.sqrt(np.sum(sig ** 2))


def test_whitened_rows_at_truth_have_unit_rms(z1_rows):
    """At the true parameters and states, the rows of the noisy log whitened by `input_work_std` have
    RMS ≈ 1 per row (own std) and per sum of 50 consecutive rows (long-run std, the default); treating
    the rows as independent overstates the sums' information (RMS > 1.2)."""
    sim, r0 = z1_rows
    L = sim.log
    t = L.t
    r = r0 - input_work(t, L.v, L.tau, t[:-1], t[1:])
    s_own = input_work_std(t, L.v, L.tau, t[:-1], t[1:], SIGMA, SIGMA, long_run=False)
    s_lr = input_work_std(t, L.v, L.tau, t[:-1], t[1:], SIGMA, SIGMA)
    row_rms = np.sqrt(np.mean((r / s_own) ** 2))
    assert 0.7 < row_rms < 1.4, row_rms
    k = 50
    sum_lr = np.sqrt(np.mean(_sums(r, k) ** 2 / _sums(s_lr ** 2, k)))
    sum_own = np.sqrt(np.mean(_sums(r, k) ** 2 / _sums(s_own ** 2, k)))
    assert 0.7 < sum_lr < 1.4, sum_lr
    assert sum_own > 1.2, sum_own
    # consecutive rows share a velocity sample: correlated noise
    e = r - (r0 - input_work(t, sim.truth_log.v, sim.truth_log.tau, t[:-1], t[1:]))
    assert np.corrcoef(e[:-1], e[1:])[0, 1] > 0.3


def test_hold_noise_formula_and_long_run_share_match_monte_carlo():
    rng = np.random.default_rng(3)
    t = np.linspace(0.0, 0.2, 101)
    v = np.column_stack([np.sin(7 * t), 2 * np.cos(5 * t)])
    tau = np.column_stack([4 * np.cos(5 * t), 1 + 0 * t])
    ta, tb = t[:-1], t[1:]
    sv, st = 0.05, 0.01  # the velocity noise dominates (|τ| ≫ |v|), as on the arm
    w0 = input_work(t, v, tau, ta, tb)
    draws = np.array([input_work(t, v + sv * rng.standard_normal(v.shape),
                                 tau + st * rng.standard_normal(tau.shape), ta, tb)
                      for _ in range(3000)]) - w0
    own = input_work_std(t, v, tau, ta, tb, sv, st, long_run=False)
    lr = input_work_std(t, v, tau, ta, tb, sv, st)
    assert np.allclose(np.median(draws.std(0) / own), 1.0, atol=0.05)
    # the long-run shares add up to the std of a sum of consecutive windows; the own stds do not
    for a, k in ((0, 100), (20, 30), (50, 10)):
        s = draws[:, a:a + k].sum(1).std()
        assert s / np.sqrt(np.sum(lr[a:a + k] ** 2)) == pytest.approx(1.0, abs=0.08)
        assert s / np.sqrt(np.sum(own[a:a + k] ** 2)) > 1.15
    # windows of several samples (a knot stride > 1): own stds and the long-run shares of their sum
    wa, wb = t[[0, 10, 40]], t[[10, 40, 100]]
    dw = np.array([input_work(t, v + sv * rng.standard_normal(v.shape), tau + st * rng.standard_normal(
        tau.shape), wa, wb) for _ in range(3000)]) - input_work(t, v, tau, wa, wb)
    assert np.allclose(dw.std(0) / input_work_std(t, v, tau, wa, wb, sv, st, long_run=False), 1.0, atol=0.06)
    assert dw.sum(1).std() / np.sqrt(np.sum(input_work_std(t, v, tau, wa, wb, sv, st) ** 2)) == \
        pytest.approx(1.0, abs=0.06)
    with pytest.raises(ValueError, match="unknown work quadrature 'simpson'"):
        input_work(t, v, tau, ta, tb, quadrature="simpson")
