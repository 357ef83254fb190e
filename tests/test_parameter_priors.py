"""Tests for fg_sysid.factors.parameter_priors: symmetry and total-mass priors on θ."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest
from jacobian_check import central_diff

from fg_sysid.factors.parameter_priors import (
    SymmetryMap,
    reflect_inertial,
    reflection_signs,
    symmetry_relative_std,
    symmetry_residual,
    total_mass_residual,
)
from fg_sysid.layout import ParameterLayout
from fg_sysid.robots import load_robot

PAIRS = [("FL_", "FR_"), ("RL_", "RR_")]


@pytest.fixture(scope="module")
def b1():
    return load_robot("b1")




def assert_jac_close(J, Jn, rtol=1e-6):
    err = np.abs(J - Jn).max() / max(np.abs(Jn).max(), 1e-12)
    assert err < rtol, f"analytic vs FD Jacobian relative error {err:.3g}"


@pytest.mark.parametrize("inertia", ["log-cholesky", "exponential-eigenvalue"])
def test_jacobians_fd(b1, inertia):
    layout = ParameterLayout.create(b1, inertia=inertia)
    sym = SymmetryMap.from_names(b1, pairs=PAIRS)
    mean, std = layout.prior()
    rng = np.random.default_rng(0)
    theta = mean + 0.3 * std * rng.standard_normal(layout.n)
    w = symmetry_relative_std(sym, layout, relative=0.05)
    r, J = symmetry_residual(layout, theta, sym, std=w)
    assert r.shape == (len(sym.residual_names(layout)),) and J.shape == (r.size, layout.n)
    f = lambda t: symmetry_residual(layout, t, sym, jacobians=False, std=w)[0]  # noqa: E731
    assert np.allclose(f(theta), r)
    assert_jac_close(J, central_diff(f, theta), rtol=1e-5)
    rm, Jm = total_mass_residual(layout, theta, 50.0, std=0.5)
    g = lambda t: total_mass_residual(layout, t, 50.0, jacobians=False, std=0.5)[0]  # noqa: E731
    assert rm.shape == (1,) and Jm.shape == (1, layout.n)
    assert_jac_close(Jm, central_diff(g, theta), rtol=1e-6)


def test_b1_nominal_symmetric(b1):
    """B1's URDF mirrors FL/FR and RL/RR across the x–z plane exactly, except the calves: their tiny
    products of inertia (ixy = 5.2e-8, iyz = 4.6e-7 kg·m²) are copied instead of mirrored."""
    layout = ParameterLayout.create(b1)
    sym = SymmetryMap.from_names(b1, pairs=PAIRS)
    p = layout.nominal_physical()
    theta = layout.to_theta(p)
    r, _ = symmetry_residual(layout, theta, sym, jacobians=False)
    names = sym.residual_names(layout)
    assert len(names) == 6 * 10 + 6 * (layout.kf + 1)
    bad = {n for n, v in zip(names, r, strict=True) if abs(v) > 1e-9}
    assert bad <= {f"{s}L_calf.{k}~{s}R_calf.{k}" for s in "FR" for k in ("ixy", "iyz")}
    assert np.abs(r).max() < 1e-5  # kg·m², vs calf Ixx ≈ 5.6e-2
    # relative to each parameter's scale the mismatch is negligible
    std = symmetry_relative_std(sym, layout, relative=1.0)
    rw, _ = symmetry_residual(layout, theta, sym, jacobians=False, std=std)
    assert np.abs(rw).max() < 1e-3


def test_total_mass_nominal(b1):
    layout = ParameterLayout.create(b1)
    p = layout.nominal_physical()
    masses = b1.nominal_inertial_parameters()[:, 0]
    M = 55.0
    r, _ = total_mass_residual(layout, layout.to_theta(p), M, jacobians=False)
    assert r[0] == pytest.approx(masses.sum() - M, abs=1e-9)
    assert masses.sum() == pytest.approx(pin.computeTotalMass(b1.model), rel=1e-12)
    r2, _ = total_mass_residual(layout, layout.to_theta(p), 2.0, std=0.1, bodies=["FL_calf", "FR_calf"],
                                jacobians=False)
    assert r2[0] == pytest.approx((2 * 0.907 - 2.0) / 0.1, abs=1e-9)


@pytest.mark.parametrize("plane", ["xz", "yz", "xy"])
def test_reflection_matches_pinocchio(plane):
    rng = np.random.default_rng(1)
    s = np.ones(3)
    s[{"xz": 1, "yz": 0, "xy": 2}[plane]] = -1
    S = np.diag(s)
    for _ in range(5):
        m = float(np.exp(rng.uniform(-2, 2)))
        c = rng.uniform(-0.3, 0.3, 3)
        A = rng.standard_normal((3, 3))
        Ic = A @ A.T + 0.1 * np.eye(3)  # random SPD rotational inertia at the COM
        body = pin.Inertia(m, c, Ic)
        pi = np.asarray(body.toDynamicParameters())
        mirrored = pin.Inertia(m, S @ c, S @ Ic @ S)
        expected = np.asarray(mirrored.toDynamicParameters())
        assert np.allclose(reflect_inertial(pi, plane), expected, atol=1e-12)
    if plane == "xz":  # mcy, Ixy, Iyz flip
        assert np.array_equal(np.flatnonzero(reflection_signs("xz") < 0), [2, 5, 8])


def test_unmatched_prefix_raises(b1):
    with pytest.raises(ValueError, match="FL_hip"):
        SymmetryMap.from_names(b1, left="FL_", right="XX_")
    with pytest.raises(ValueError, match="FR_hip"):  # right-prefixed name without a left partner
        SymmetryMap.from_names(b1, left="YY_", right="FR_")
    with pytest.raises(ValueError, match="plane"):
        SymmetryMap((), plane="ab")
    single = SymmetryMap.from_names(b1, left="FL_", right="FR_", joints=False)
    assert single.body_pairs == (("FL_hip", "FR_hip"), ("FL_thigh", "FR_thigh"), ("FL_calf", "FR_calf"))
    assert single.joint_pairs == ()
