"""Floating-base robots in `fg-sysid study` (issue 12: Table I's quadruped row; `fg_sysid.study.floating`)."""

from __future__ import annotations

import numpy as np

from fg_sysid.study.config import parse_config
from fg_sysid.study.floating import _motion
from fg_sysid.study.runner import run_one


def test_a_b1_run_is_simulated_in_mujoco_fitted_and_scored():
    """A short B1 trot from a 70 % random guess through run_one: the energy rows are in the fit, every
    metric is finite and sane; a fixed-base-only method fails with a message naming it (recorded, not
    raised)."""
    cfg = parse_config({"name": "q", "robots": ["b1"],
                        "motions": [{"name": "trot-short", "duration": 0.8, "rate": 100}],
                        "noise": [0.005], "methods": ["smoother+energy", "energy-ls"], "seeds": [0],
                        "options": [{"name": "guess-70", "init_spread": 0.7}],
                        "estimator": {"max_iterations": 1}, "heldout": {"duration": 0.5}})
    ok, bad = (run_one(s) for s in cfg.runs)
    assert ok["status"] == "ok", ok.get("error")
    assert ok["info_energy_rows"] > 20
    for k in ("heldout_rmse", "inertial_error", "inertial_base_error", "friction_error", "armature_error"):
        assert np.isfinite(ok[k]) and 0 <= ok[k] < 5, (k, ok[k])
    assert ok["heldout_rmse"] < 1.0 and ok["seconds_identify"] > 0
    assert bad["status"] == "failed" and "'energy-ls' is fixed-base only" in bad["error"]


def test_motion_names_map_to_mujoco_motions():
    assert [_motion(n) for n in ("trot-2s", "sway", "Steps-4s", "fourier-8s")] == ["trot", "sway", "steps",
                                                                                   "trot"]


def test_floating_guess_centre_is_the_truth_distributions():
    """The B1 URDF has no friction: the guesses are centred on the centre of the drawn truths' friction and
    armature (mean of draw_truth over seeds within sampling error), inertias on the URDF."""
    from fg_sysid.datasets.mujoco_sim import draw_truth
    from fg_sysid.robots import load_robot
    from fg_sysid.study.floating import nominal_parameters

    robot = load_robot("b1")
    nb, n = 10 * robot.n_bodies, robot.n_joints
    p = nominal_parameters(robot)
    assert np.allclose(p[:nb], robot.nominal_inertial_parameters().ravel())
    draws = [draw_truth(robot, s) for s in range(40)]
    fc = np.mean([d["fc"] for d in draws], axis=0)
    fv = np.mean([d["fv"] for d in draws], axis=0)
    arm = np.mean([d["armature"] for d in draws], axis=0)
    np.testing.assert_allclose(p[nb:nb + 2 * n:2], fc, rtol=0.15)
    np.testing.assert_allclose(p[nb + 1:nb + 2 * n:2], fv, rtol=0.15)
    np.testing.assert_allclose(p[nb + 2 * n:], arm, rtol=0.15)
