"""Held-out prediction for floating-base robots (fg_sysid.floating_validation, ``fg-sysid predict``)
on short MuJoCo B1 stance logs.

Measured on the fixture below (sway, 0.5 s at 1000 Hz, seed 1, randomized truth with MuJoCo joint
friction set to zero; true simulator states, accelerations by central differences of v, true contact
forces): relative RMSE of the predicted joint efforts 0.0006 with the true parameters and the 0.02 m foot
radius, 0.017 with the true parameters and radius 0, 0.0145 with the URDF nominal parameters; the
contact-consistent error 0.0004 (true, radius 0.02), 0.0069 (true, radius 0), 0.072 (nominal).
"""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

pytest.importorskip("mujoco")
pin = pytest.importorskip("pinocchio")

from fg_sysid.cli import main  # noqa: E402
from fg_sysid.datasets.io import write_log  # noqa: E402
from fg_sysid.datasets.mujoco_sim import simulate_stance, to_log  # noqa: E402
from fg_sysid.estimation.baseline import nominal_parameters, parameter_names  # noqa: E402
from fg_sysid.estimation.floating_baseline import contact_null_space  # noqa: E402
from fg_sysid.floating_validation import (  # noqa: E402
    contact_consistent_error,
    contact_generalized_forces,
    contact_null_spaces,
    coordinate_names,
    floating_heldout_report,
    floating_inverse_dynamics,
    floating_states,
    predict_floating_efforts,
)
from fg_sysid.robots import load_robot  # noqa: E402
from fg_sysid.validation import model_spec, relative_rmse  # noqa: E402

RADIUS = 0.02  # simulate_stance's foot spheres
VS = 0.01  # tanh scale; irrelevant here (fc = 0)
TRUE_MAX = 0.003  # measured 0.0006 (forces), 0.0004 (contact-consistent)
NOMINAL_FORCES_MIN = 0.01  # measured 0.0145
NOMINAL_CC_MIN = 0.04  # measured 0.072


@pytest.fixture(scope="module")
def b1():
    return load_robot("b1")


@pytest.fixture(scope="module")
def sim(b1):
    z = np.zeros(b1.n_joints)
    s = simulate_stance(b1, 0.5, 1000, seed=1, motion="sway", randomize=True, friction=(z, z))
    assert s.contact.all()  # sway: four feet in stance throughout
    p_true = np.array([s.truth["parameters"][n] for n in parameter_names(b1)])
    dt = s.t[1] - s.t[0]
    a = (s.v_pin[2:] - s.v_pin[:-2]) / (2 * dt)  # free flyer: a = d/dt of the body twist components
    sl = slice(1, -1)
    return SimpleNamespace(s=s, p_true=p_true, q=s.q_pin[sl], v=s.v_pin[sl], a=a, tau=s.tau[sl],
                           F=s.contact_force[sl], C=s.contact[sl], frames=list(s.foot_frames))


def _err(b1, sim, p, radius):
    pred = predict_floating_efforts(p, b1, sim.q, sim.v, sim.a, sim.F, sim.frames, radius, velocity_scale=VS)
    return relative_rmse(pred, sim.tau)


def _cc(b1, sim, p, radius):
    G = floating_inverse_dynamics(p, b1, sim.q, sim.v, sim.a, VS)
    return contact_consistent_error(G, sim.tau, b1, sim.q, sim.C, sim.frames, radius)


# ------------------------------------------------------------------------------------ (a) true vs nominal
def test_true_parameters_predict_logged_efforts(b1, sim):
    e_true = _err(b1, sim, sim.p_true, RADIUS)
    e_nom = _err(b1, sim, nominal_parameters(b1), RADIUS)
    assert e_true < TRUE_MAX
    assert e_nom > NOMINAL_FORCES_MIN and e_nom > 5 * e_true
    # the base rows (no actuator) are explained too: unexplained base wrench ~0 with the true model
    full = predict_floating_efforts(sim.p_true, b1, sim.q, sim.v, sim.a, sim.F, sim.frames, RADIUS,
                                    velocity_scale=VS, full=True)
    weight = sim.p_true[0] * 9.81
    assert np.sqrt(np.mean(full[:, :6] ** 2)) < 0.01 * weight


def test_model_spec_and_vector_agree(b1, sim):
    spec = model_spec(SimpleNamespace(names=parameter_names(b1), estimate=sim.p_true), b1, "b1",
                      velocity_scale=VS)
    G_spec = floating_inverse_dynamics(spec, b1, sim.q[:20], sim.v[:20], sim.a[:20])
    G_vec = floating_inverse_dynamics(sim.p_true, b1, sim.q[:20], sim.v[:20], sim.a[:20], VS)
    np.testing.assert_allclose(G_spec, G_vec, rtol=1e-12, atol=1e-9)


# ------------------------------------------------------------------------------------ (b) contact radius
def test_contact_radius_moves_error_the_expected_way(b1, sim):
    e0, e2 = _err(b1, sim, sim.p_true, 0.0), _err(b1, sim, sim.p_true, RADIUS)
    assert e0 > 5 * e2  # measured 0.017 vs 0.0006: the force acts 0.02 m below the foot frame
    c0, c2 = _cc(b1, sim, sim.p_true, 0.0).relative_error, _cc(b1, sim, sim.p_true, RADIUS).relative_error
    assert c0 > 5 * c2  # measured 0.0069 vs 0.0004
    # too large a radius is wrong again
    assert _err(b1, sim, sim.p_true, 2 * RADIUS) > 5 * e2


def test_contact_generalized_forces_match_pinocchio_external_forces(b1, sim):
    """Σ J_fᵀ f_f = rnea(q, v, a) − rnea(q, v, a, fext) with the point forces as joint-frame wrenches."""
    model = b1.model
    data = model.createData()
    k = 123
    q, v, a = sim.q[k], sim.v[k], sim.a[k]
    G = contact_generalized_forces(b1, q[None], sim.F[k][None], sim.frames, RADIUS)[0]
    pin.framesForwardKinematics(model, data, q)
    fext = [pin.Force.Zero() for _ in range(model.njoints)]
    for name, f in zip(sim.frames, sim.F[k], strict=True):
        fr = model.frames[model.getFrameId(name)]
        c = data.oMf[model.getFrameId(name)].translation - np.array([0.0, 0.0, RADIUS])
        oMi = data.oMi[fr.parentJoint]
        fl = oMi.rotation.T @ f
        rl = oMi.rotation.T @ (c - oMi.translation)
        fext[fr.parentJoint] += pin.Force(fl, np.cross(rl, fl))
    m0 = model.copy()
    d0 = m0.createData()
    ref = pin.rnea(m0, d0, q, v, a) - pin.rnea(m0, d0, q, v, a, fext)
    np.testing.assert_allclose(G, ref, rtol=1e-9, atol=1e-9)


# ------------------------------------------------------------------------------------ (c) contact-consistent
def test_null_space_matches_floating_baseline_at_zero_radius(b1, sim):
    model = b1.model
    fids = [model.getFrameId(f) for f in sim.frames]
    N_ref, r_ref = contact_null_space(model, model.createData(), sim.q[7], fids)
    ((N, r),) = contact_null_spaces(b1, sim.q[7:8], sim.C[7:8], sim.frames, 0.0)
    assert r == r_ref == 12
    np.testing.assert_allclose(N @ N.T, N_ref @ N_ref.T, atol=1e-10)


def test_contact_consistent_error_ignores_contact_forces(b1, sim):
    """Identity oracle: adding any J_cᵀλ (stance feet, shifted contact points) changes nothing."""
    rng = np.random.default_rng(0)
    n = 60
    q, C, tau = sim.q[:n], sim.C[:n].copy(), sim.tau[:n]
    C[::3, 1] = False  # some samples with a swing foot: its J must not be projected out
    G = floating_inverse_dynamics(nominal_parameters(b1), b1, q, sim.v[:n], sim.a[:n], VS)
    lam = rng.normal(0.0, 200.0, (n, len(sim.frames), 3)) * C[:, :, None]
    G2 = G + contact_generalized_forces(b1, q, lam, sim.frames, RADIUS)
    e1 = contact_consistent_error(G, tau, b1, q, C, sim.frames, RADIUS)
    e2 = contact_consistent_error(G2, tau, b1, q, C, sim.frames, RADIUS)
    assert e1.relative_error > 0.01
    np.testing.assert_allclose(e2.residual, e1.residual, atol=1e-8 * np.abs(G2).max())
    assert e2.relative_error == pytest.approx(e1.relative_error, rel=1e-9)
    # a force on the swing foot is NOT removed
    lam_sw = np.zeros_like(lam)
    lam_sw[::3, 1] = [0.0, 0.0, 100.0]
    e3 = contact_consistent_error(G + contact_generalized_forces(b1, q, lam_sw, sim.frames, RADIUS), tau, b1,
                                  q, C, sim.frames, RADIUS)
    assert not np.allclose(e3.residual, e1.residual)
    # definition: sqrt(Σ ‖Nᵀ r‖²) / sqrt(Σ ‖Nᵀ Sτ‖²)
    num = den = 0.0
    iv = b1.joint_index_v()
    for k, (N, _) in enumerate(contact_null_spaces(b1, q, C, sim.frames, RADIUS)):
        St = np.zeros(b1.nv)
        St[iv] = tau[k]
        num += np.sum((N.T @ (St - G[k])) ** 2)
        den += np.sum((N.T @ St) ** 2)
    assert e1.relative_error == pytest.approx(np.sqrt(num / den), rel=1e-12)


def test_contact_consistent_error_true_vs_nominal(b1, sim):
    e_true = _cc(b1, sim, sim.p_true, RADIUS)
    e_nom = _cc(b1, sim, nominal_parameters(b1), RADIUS)
    assert e_true.relative_error < TRUE_MAX
    assert e_nom.relative_error > NOMINAL_CC_MIN
    assert np.all(e_true.rank == 12) and np.all(e_true.n_stance == 4)


# ------------------------------------------------------------------------------------ states and report
def test_floating_states_need_base_pose(b1, sim):
    log = dataclasses.replace(to_log(sim.s), base_pos=None, base_quat=None)
    with pytest.raises(ValueError, match=r"base\.pos\.x.*base\.quat\.w"):
        floating_states(log, b1)


def test_report_modes_on_sg_states(b1, sim):
    log = to_log(sim.s)
    rep = floating_heldout_report(sim.p_true, b1, log, window_s=0.02, contact_radius=RADIUS,
                                  velocity_scale=VS)
    assert rep["mode"] == "forces" and rep["n_samples"] == log.n_samples - 20
    assert rep["overall"] < TRUE_MAX  # measured 0.0006 on SG states of the noise-free log
    assert set(rep["per_joint"]) == set(b1.joint_names)
    rep_cc = floating_heldout_report(sim.p_true, b1, dataclasses.replace(log, forces={}), window_s=0.02,
                                     contact_radius=RADIUS, velocity_scale=VS)
    assert rep_cc["mode"] == "contact-consistent" and rep_cc["overall"] < TRUE_MAX
    nom = floating_heldout_report(nominal_parameters(b1), b1, dataclasses.replace(log, forces={}),
                                  window_s=0.02, contact_radius=RADIUS, velocity_scale=VS)
    assert nom["overall"] > NOMINAL_CC_MIN
    with pytest.raises(ValueError, match="no measured efforts"):
        floating_heldout_report(sim.p_true, b1, dataclasses.replace(log, forces={}, tau=np.full_like(log.tau,
                                np.nan)))


# ------------------------------------------------------------------------------------ (d) CLI
@pytest.fixture(scope="module")
def cli_files(b1, sim, tmp_path_factory):
    d = tmp_path_factory.mktemp("floating_predict")
    spec = model_spec(SimpleNamespace(names=parameter_names(b1), estimate=sim.p_true), b1, "b1",
                      velocity_scale=VS)
    spec["contact_frames"] = list(sim.frames)
    spec["contact_radius"] = RADIUS
    (d / "model").mkdir()
    (d / "model" / "model.json").write_text(json.dumps(spec))
    log = to_log(sim.s)
    write_log(log, d / "forces.parquet")
    write_log(dataclasses.replace(log, forces={}), d / "noforces.parquet")
    write_log(dataclasses.replace(log, base_pos=None, base_quat=None), d / "nobase.parquet")
    return d


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _overall(output):
    return float(next(line for line in output.splitlines() if line.strip().startswith("overall")).split()[-1])


def test_cli_with_forces(b1, cli_files, tmp_path):
    out = tmp_path / "pred.csv"
    r = invoke("predict", cli_files / "model", cli_files / "forces.parquet", "--out", out)
    assert r.exit_code == 0, r.output
    assert "mode: forces" in r.output and "held-out relative RMSE" in r.output
    for j in b1.joint_names:
        assert j in r.output
    assert _overall(r.output) < TRUE_MAX  # model.json's contact_radius 0.02 is used
    df = pd.read_csv(out)
    assert list(df.columns) == ["t"] + [f"tau.{j}" for j in b1.joint_names]
    r0 = invoke("predict", cli_files / "model", cli_files / "forces.parquet", "--out", out,
                "--contact-radius", 0)
    assert r0.exit_code == 0, r0.output
    assert _overall(r0.output) > 5 * _overall(r.output)


def test_cli_without_forces(b1, cli_files, tmp_path):
    out = tmp_path / "proj.parquet"
    r = invoke("predict", cli_files / "model", cli_files / "noforces.parquet", "--out", out)
    assert r.exit_code == 0, r.output
    assert "contact-consistent relative error" in r.output and "mode: contact-consistent" in r.output
    assert _overall(r.output) < TRUE_MAX
    df = pd.read_parquet(out)
    assert list(df.columns) == ["t", "n_stance"] + [f"proj_err.{c}" for c in coordinate_names(b1)]
    assert (df["n_stance"] == 4).all()


def test_cli_bad_input(cli_files, tmp_path):
    out = tmp_path / "x.csv"
    r = invoke("predict", cli_files / "model", cli_files / "nobase.parquet", "--out", out)
    assert r.exit_code == 2
    assert "base.pos.x" in r.output and "base.quat.w" in r.output
    assert len(r.output.strip().splitlines()) == 1 and not out.exists()
    r = invoke("predict", cli_files / "model", cli_files / "forces.parquet", "--out", out,
               "--contact-radius", -1)
    assert r.exit_code == 2 and "--contact-radius" in r.output and not out.exists()


def test_floating_states_match_simulator(b1, sim):
    rows, q, v, a = floating_states(to_log(sim.s), b1, window_s=0.02)
    assert q.shape == (rows.size, b1.nq) and v.shape == a.shape == (rows.size, b1.nv)
    # measured 0.0019 (v) and 0.0053 (a) relative RMSE vs the simulator / central differences
    assert relative_rmse(v, sim.s.v_pin[rows]) < 0.01
    assert relative_rmse(a, sim.a[rows - 1]) < 0.02
