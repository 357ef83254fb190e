"""Issue 11, accuracy of the loop smoother on the B1 four-bar leg (fg_sysid/estimation/loop_init.py).

In class (exact u = Gᵀ ID along the plan, σ = 0.01 on q, v, τ), a short log: the default `JointSmoother`
on the looped spec must reach the floor of the true parameters on held-out data and recover the knee
motor's friction and armature. Before the fix it ended at 10.3 % held-out knee error against a 0.62 %
floor with every viscous coefficient at its 1e-4 floor (a projected, inconsistent initial θ and a
50 ms SG initial trajectory).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from fg_sysid.datasets.io import load_log_for_robot, write_log
from fg_sysid.datasets.mujoco_loops import simulate_loop_inclass
from fg_sysid.estimation import loop_init, loop_terms
from fg_sysid.estimation.loop_baseline import (
    ConstraintEliminationLS,
    constrained_regressor,
    loop_states,
    parameter_names,
    predict_loop_efforts,
)
from fg_sysid.estimation.smoother import JointSmoother
from fg_sysid.layout import ParameterLayout
from fg_sysid.robots import load_robot
from fg_sysid.robots.looped import load_loop_robot, loop_robot_path
from fg_sysid.robots.loops import passive_mask


@pytest.fixture(scope="module")
def leg(tmp_path_factory):
    """The looped spec robot (`fg-sysid identify --robot b1_leg_fourbar.yaml`), a 3 s
    training and a 2 s held-out in-class log at 250 Hz, and the training log as `identify` reads it."""
    sim_robot = load_loop_robot("b1_leg_fourbar")
    train = simulate_loop_inclass(sim_robot, duration=3.0, rate=250.0, noise=0.01, seed=0)
    held = simulate_loop_inclass(sim_robot, duration=2.0, rate=250.0, noise=0.01, seed=1,
                                 truth=train.truth)
    path = tmp_path_factory.mktemp("leg") / "log.parquet"
    write_log(train.log, path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        robot, log = load_log_for_robot(path, load_robot(str(loop_robot_path("b1_leg_fourbar"))))
    names = parameter_names(robot)
    p_true = np.array([train.truth["parameters"][n] for n in names])
    return robot, train, held, log, p_true


def _relative_rmse(u, u_ref, keep):
    e = u[keep] - u_ref[keep]
    return np.sqrt(np.mean(e ** 2, axis=0)) / np.sqrt(np.mean(u_ref[keep] ** 2, axis=0))


def test_map_start_is_consistent_and_fits_like_the_truth(leg):
    """The initial θ fits the constraint-eliminated regression as well as the true parameters (it is in
    the smoother's parameterization: consistent by construction); the physical-layout LS projected body
    by body (the old start) does not."""
    robot, train, _, _, p_true = leg
    layout = ParameterLayout.create(robot, "log-cholesky", "coulomb-viscous-scale", 0.05)
    st = loop_states(robot, train.log)
    rows = np.flatnonzero(st.keep)
    W = constrained_regressor(robot, st, rows, 0.05)
    u = st.tau[rows]
    bar, std = loop_terms.adjust_prior(robot, layout, *layout.prior(0.7))
    th0 = loop_init.linear_start(layout, W, u, bar, std, passive_mask(robot))
    th, info = loop_init.map_parameters(layout, W, u, bar, std, theta0=th0, reweight=1)
    sel = loop_init._base_selection(layout)

    def rms(p_base):
        return np.sqrt(np.mean((u - W @ p_base) ** 2, axis=0))

    r_map, r_true = rms(layout.to_physical(th)[sel]), rms(p_true)
    assert np.all(r_map <= 1.05 * r_true), (r_map, r_true)
    # the old start: constraint-elimination LS in the physical layout, projected onto consistency
    ce = ConstraintEliminationLS(robot, identify="all").fit(train.log)
    full = np.concatenate([ce.result_.estimate[:10 * robot.n_bodies],
                           np.column_stack([ce.result_.estimate[10 * robot.n_bodies:][:2 * robot.n_joints]
                                            .reshape(-1, 2), np.full(robot.n_joints, 0.05)]).ravel(),
                           ce.result_.estimate[-robot.n_joints:]])
    th_old, replaced = layout.to_theta_projected(full, layout.to_physical(bar))
    assert any("projected" in r for r in replaced)
    assert np.all(rms(layout.to_physical(th_old)[sel]) > 3 * r_true)
    # the driven joint's friction at the start: within 15 % of the truth
    est = dict(zip(layout.names, layout.to_physical(th), strict=True))
    for s in ("fc", "fv"):
        truth = train.truth["parameters"][f"FL_knee_motor.{s}"]
        assert abs(est[f"FL_knee_motor.{s}"] / truth - 1) < 0.15, s


def test_b1_leg_in_class_reaches_the_floor(leg):
    robot, train, held, log, p_true = leg
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sm = JointSmoother(robot).fit(log)
    res = sm.result_
    st = loop_states(robot, held.log)
    act = [robot.joint_names.index(j) for j in st.actuated]
    u_true = held.truth_log.tau[:, act]
    e_floor = _relative_rmse(predict_loop_efforts(robot, p_true, st), u_true, st.keep)
    u_fit = loop_terms.predict_torque(robot, res.layout, res.theta, st.q, st.v, st.a)
    e_fit = _relative_rmse(u_fit, u_true, st.keep)
    knee = list(st.actuated).index("FL_knee_motor")
    # measured: knee 0.83 % against a 0.62 % floor (1.34 x); before the fix 10.3 %
    assert e_fit[knee] <= 1.6 * e_floor[knee], (e_fit, e_floor)
    assert np.all(e_fit <= 2.5 * e_floor), (e_fit, e_floor)
    est = dict(zip(res.names, res.estimate, strict=True))
    # measured: fc −3.3 %, fv −9.6 %, armature +3.7 % (3 s log); before the fix fv at its 1e-4 floor
    for s, tol in (("fc", 0.10), ("fv", 0.15), ("armature", 0.15)):
        truth = train.truth["parameters"][f"FL_knee_motor.{s}"]
        assert abs(est[f"FL_knee_motor.{s}"] / truth - 1) < tol, (s, est[f"FL_knee_motor.{s}"], truth)
    assert res.extras["loops"]["satisfied"]
