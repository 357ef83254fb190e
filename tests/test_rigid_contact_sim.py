"""Rigid point-contact truth for the quadruped Table I row (issue 12, `datasets.rigid_contact_sim`)."""

import numpy as np
import pinocchio as pin
import pytest

from fg_sysid.datasets.rigid_contact_sim import (
    RigidContactSimError,
    energy_balance,
    friction_torque,
    simulate_rigid_stance,
)
from fg_sysid.robots import load_robot


@pytest.fixture(scope="module")
def b1():
    return load_robot("b1")


@pytest.fixture(scope="module")
def trot(b1):
    return simulate_rigid_stance(b1, duration=1.2, rate=500.0, seed=3, noise=0.0, motion="trot",
                                 randomize=True)


def _foot_velocities(robot, res):
    """World velocities (N, n_feet, 3) of the foot frames, recomputed from the logged Pinocchio states."""
    model, data = robot.model, robot.model.createData()
    fids = [model.getFrameId(f) for f in res.foot_frames]
    out = np.empty((len(res.t), len(fids), 3))
    for k, (q, v) in enumerate(zip(res.q_pin, res.v_pin, strict=True)):
        pin.forwardKinematics(model, data, q, v)
        pin.updateFramePlacements(model, data)
        out[k] = [pin.getFrameVelocity(model, data, f, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED).linear
                  for f in fids]
    return out


def test_stance_feet_do_not_move_and_swing_feet_do(b1, trot):
    speed = np.linalg.norm(_foot_velocities(b1, trot), axis=2)
    assert trot.contact.any(axis=0).all() and (~trot.contact).any(axis=0).all()  # each foot stands, swings
    assert np.abs(np.diff(trot.contact.astype(int), axis=0)).sum() >= 8  # lift-offs and touchdowns
    assert speed[trot.contact].max() <= 1e-6
    assert np.median(speed[~trot.contact]) > 0.05
    # the stance feet carry the weight on average (bilateral contacts: the ground may also pull briefly)
    m = sum(trot.truth["parameters"][f"{b}.m"] for b in b1.body_names)
    assert abs(np.mean(trot.contact_force[:, :, 2].sum(axis=1)) / (m * 9.81) - 1) < 0.05


def test_energy_balance_at_the_truth(b1, trot):
    """Eq. 63 at the true parameters: over windows without a contact change, ΔT + ΔU + ∫ τ_fᵀv dt equals the
    input work of the held efforts (no contact work; MuJoCo's soft contacts: 2-16 %, docs/benchmarks.md);
    touchdown windows lose energy to the impact."""
    r, w, same = energy_balance(b1, trot, 10)
    assert same.sum() >= 20 and (~same).sum() >= 4
    rel = np.abs(r[same]).sum() / np.abs(w[same]).sum()
    assert rel < 0.01, rel  # measured 0.005-0.006 (benchmarks/bench_rigid_contact_truth.py)
    assert r[~same].min() < -5 * np.abs(r[same]).max()  # impacts dissipate energy


def test_sharper_friction_than_the_estimator(b1):
    tau, slope = friction_torque(np.array([0.01, -0.05]), 2.0, 0.1, 0.01)
    assert tau == pytest.approx([2.0 * np.tanh(1.0) + 0.001, -2.0 * np.tanh(5.0) - 0.005])
    h = 1e-7
    num = (friction_torque(0.004 + h, 2.0, 0.1, 0.01)[0]
           - friction_torque(0.004 - h, 2.0, 0.1, 0.01)[0]) / (2 * h)
    assert friction_torque(0.004, 2.0, 0.1, 0.01)[1] == pytest.approx(num, rel=1e-6)


def test_bad_input_names_the_culprit(b1):
    with pytest.raises(RigidContactSimError, match="motion"):
        simulate_rigid_stance(b1, duration=0.1, motion="gallop")
    with pytest.raises(RigidContactSimError, match="timestep"):
        simulate_rigid_stance(b1, duration=0.1, rate=300.0)
    with pytest.raises(RigidContactSimError, match="free-flyer"):
        simulate_rigid_stance(load_robot("z1"), duration=0.1)


def test_study_config_rigid_truth_and_bilateral_contacts():
    from fg_sysid.study.config import StudyConfigError, parse_config

    raw = {"name": "q", "robots": ["b1"], "motions": [{"name": "trot-1s", "duration": 1.0, "rate": 500}],
           "noise": [0.005], "methods": ["smoother"], "seeds": {"count": 1},
           "truth": {"friction_velocity_scale": 0.01, "contacts": "rigid"},
           "estimator": {"bilateral_contacts": True}}
    run = parse_config(raw).runs[0]
    assert run.truth["contacts"] == "rigid" and run.estimator["bilateral_contacts"] is True
    with pytest.raises(StudyConfigError, match="contacts"):
        parse_config({**raw, "truth": {"contacts": "squishy"}})
    with pytest.raises(StudyConfigError, match="bilateral_contacts"):
        parse_config({**raw, "estimator": {"bilateral_contacts": "yes"}})


def test_study_simulates_the_rigid_truth(b1):
    """`study.floating.simulate_floating` with ``truth.contacts: rigid``: the drawn truth of the MuJoCo runs
    (same seed, same parameters), point feet, the truth's tanh width, a sway held-out on four feet."""
    from fg_sysid.datasets.mujoco_sim import draw_truth
    from fg_sysid.study.config import RunSpec
    from fg_sysid.study.floating import simulate_floating

    spec = RunSpec(robot="b1", motion="trot-0.4s", duration=0.4, rate=500.0, noise=0.005, method="smoother",
                   seed=2, option="x", truth={"friction_velocity_scale": 0.01, "contacts": "rigid"},
                   estimator={}, heldout={"duration": 0.2, "seed_offset": 1000})
    train, held, p_true = simulate_floating(b1, spec)
    drawn = draw_truth(b1, 2)
    nb, n = 10 * b1.n_bodies, b1.n_joints
    assert np.allclose(p_true[:nb], drawn["inertial"].ravel())
    assert np.allclose(p_true[nb:nb + 2 * n:2], drawn["fc"])
    assert np.allclose(p_true[nb + 2 * n:], drawn["armature"])
    assert train.truth["foot_radius"] == 0.0 and train.truth["friction_velocity_scale"] == 0.01
    assert train.truth["controller"]["motion"] == "trot" and held.truth["controller"]["motion"] == "sway"
    assert held.contact.all() and held.truth["noise"] == 0.0
    assert np.std(train.meas["q"] - train.q) == pytest.approx(0.005, rel=0.1)


def test_a_rigid_b1_run_through_the_study():
    """`run_one` with the shipped rigid protocol's truth/estimator keys on a short log: fitted with the energy
    rows, every metric finite; the shipped config parses to ≥ 2 methods × its seeds."""
    from pathlib import Path

    from fg_sysid.study.config import load_config, parse_config
    from fg_sysid.study.runner import run_one

    examples = Path(__file__).resolve().parents[1] / "examples" / "studies"
    shipped = load_config(examples / "table1_quadruped_rigid.yaml")
    assert {r.method for r in shipped.runs} == {"smoother", "smoother+energy"}
    assert all(r.truth["contacts"] == "rigid" and r.estimator["bilateral_contacts"] for r in shipped.runs)
    raw = dict(shipped.raw)
    raw.update(motions=[{"name": "trot-short", "duration": 0.3, "rate": 250}], methods=["smoother+energy"],
               seeds=[0], estimator={**raw["estimator"], "max_iterations": 1}, heldout={"duration": 0.2})
    row = run_one(parse_config(raw).runs[0])
    assert row["status"] == "ok", row.get("error")
    assert row["info_energy_rows"] > 5
    for k in ("heldout_rmse", "inertial_error", "inertial_base_error", "friction_error", "armature_error"):
        assert np.isfinite(row[k]) and 0 <= row[k] < 5, (k, row[k])
