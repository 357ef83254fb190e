"""Base-parameter error of the study metrics (issue 12, `fg_sysid.study.base_parameters`)."""

from __future__ import annotations

import numpy as np

from fg_sysid.identifiability.numerical import numerical_identifiability, stacked_regressor
from fg_sysid.robots import load_robot
from fg_sysid.study.base_parameters import base_error, base_parameter_map


def test_base_error_ignores_unidentifiable_moves_and_sees_identifiable_ones():
    """β = Kπ reproduces the regressor (Y π = Y_b β), a move along the regressor's null space leaves the
    base error at 0 while the all-parameter error is large, and a move the data see is measured."""
    robot = load_robot("z1")
    K = base_parameter_map(robot)
    res = numerical_identifiability(robot)
    p = robot.nominal_inertial_parameters().ravel()
    Y = stacked_regressor(robot, seed=5)
    np.testing.assert_allclose(Y[:, res.base_index] @ (K @ p), Y @ p, atol=1e-9 * np.abs(Y @ p).max())
    assert K.shape == (res.rank, p.size) and res.rank < p.size
    null_move = res.null_basis @ np.random.default_rng(0).standard_normal(p.size - res.rank)
    moved = p + null_move * (np.linalg.norm(p) / np.linalg.norm(null_move))
    assert np.linalg.norm(moved - p) / np.linalg.norm(p) > 0.9
    assert base_error(robot, moved, p) < 1e-10
    u = res.identifiable_basis[0]
    seen = u * 0.1 * np.linalg.norm(K @ p) / np.linalg.norm(K @ u)
    assert 0.09 < base_error(robot, p + seen, p) < 0.11
    for scale in (0.8, 1.2):
        assert abs(base_error(robot, scale * p, p) - 0.2) < 1e-12
