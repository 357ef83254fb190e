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
