"""Floating looped robots (issue 11, floating follow-up; `fg_sysid.estimation.floating_loop_checks` and the
saturation hooks of `floating_loops`): effort-saturation windows, the fixed-state regression's identities
(regressor·π = RNEA; closure and contact forces eliminated exactly) and the knots left out of the effort
and measured-force rows."""

import types
import warnings

import numpy as np
import pytest

from fg_sysid.estimation import floating_loop_checks as flc
from fg_sysid.estimation import floating_loops
from fg_sysid.estimation.problem import Residual, Term
from fg_sysid.robots import load_robot
from fg_sysid.robots.looped import loop_robot_path


@pytest.fixture(scope="module")
def robot():
    return load_robot(str(loop_robot_path("b1_fourbar")))


def test_saturation_window_marks_the_samples_near_the_effort_limit():
    t = np.arange(0.0, 1.0, 0.01)
    tau = np.zeros((t.size, 3))
    tau[50, 1] = -9.95  # 99.5 % of the 10 N·m limit
    tau[20, 2] = 1e6  # a joint without a limit (inf) never saturates
    tau[30, 0] = np.nan  # not measured
    m = flc.saturation_window(t, tau, [10.0, 10.0, np.inf], window_s=0.05)
    assert m.sum() == 11 and m[45:56].all() and not m[44] and not m[56]
    assert not flc.saturation_window(t, 0.98 * 10.0 * np.ones((t.size, 1)), [10.0]).any()
    with pytest.raises(ValueError, match="tau must be"):
        flc.saturation_window(t, tau, [10.0, 10.0])


def _closed_state(robot, rng):
    """A closed configuration (base pose random, legs at the linkage's reference) with random independent
    velocities and accelerations completed on the closures."""
    from fg_sysid.datasets.mujoco_loops import reference_configuration
    from fg_sysid.robots.loop_kinematics import ClosureKinematics
    from fg_sysid.robots.loops import actuation_of

    names, iv = list(robot.joint_names), np.asarray(robot.joint_index_v())
    dep = [int(iv[names.index(j)]) for j in actuation_of(robot).passive]
    ck = ClosureKinematics(robot.model, robot.loops)
    q = reference_configuration(robot)
    q[:3] = rng.normal(scale=0.1, size=3)
    iq = np.asarray(robot.joint_index_q())
    act = [i for i, j in enumerate(names) if int(iv[i]) not in dep]
    q[iq[act]] += rng.normal(scale=0.05, size=len(act))
    q = ck.solve_passive(q, dep)
    n_ind = robot.nv - len(dep)
    v, a, _ = ck.complete(q, rng.normal(size=n_ind), rng.normal(size=n_ind), dep)
    return q, v, a, ck, dep


def test_fixed_state_system_is_exact_at_the_true_parameters(robot):
    """Identity oracle: efforts and contact forces built from RNEA (`floating_inverse_dynamics`, not the
    regressor) with the base rows balanced by the feet; then A p = b to round-off in both forms (forces
    measured; forces eliminated with all four feet in stance), and a wrong p leaves a residual."""
    from fg_sysid.estimation.loop_baseline import nominal_parameters
    from fg_sysid.floating_validation import _contact_jacobians, floating_inverse_dynamics

    rng = np.random.default_rng(3)
    p = nominal_parameters(robot)
    n = robot.n_joints
    p[-3 * n:] = rng.uniform(0.01, 0.2, 3 * n)  # friction and armature of every joint
    iv = np.asarray(robot.joint_index_v())
    Q, V, A_, T, F = [], [], [], [], []
    fids = [robot.model.getFrameId(f) for f in robot.contact_frames]
    for _ in range(3):
        q, v, a, ck, dep = _closed_state(robot, rng)
        gen = floating_inverse_dynamics(p, robot, q[None], v[None], a[None])[0]
        G, ind = ck.dependent_map(q, dep)
        Jf = _contact_jacobians(robot.model, robot.model.createData(), q, fids, robot.contact_radius)
        GJ = np.hstack([G.T @ J.T for J in Jf])  # (n_ind, 12)
        f = np.linalg.lstsq(GJ[:6], (G.T @ gen)[:6], rcond=None)[0]  # feet carry the base rows
        u = G.T @ (gen - sum(J.T @ f[3 * i:3 * i + 3] for i, J in enumerate(Jf)))
        assert np.abs(u[:6]).max() < 1e-8
        tau = np.zeros(n)
        pos = {int(c): k for k, c in enumerate(ind)}
        for i in range(n):
            if int(iv[i]) not in dep:
                tau[i] = u[pos[int(iv[i])]]
        Q.append(q), V.append(v), A_.append(a), T.append(tau), F.append(f.reshape(4, 3))
    Q, V, A_, T, F = map(np.array, (Q, V, A_, T, F))
    A, b = flc.fixed_state_system(robot, Q, V, A_, T, forces=F)
    assert A.shape == (3 * (robot.nv - len(dep)), p.size)
    assert np.abs(A @ p - b).max() < 1e-8 * max(1.0, np.abs(b).max())
    A0, b0 = flc.fixed_state_system(robot, Q, V, A_, T, stance=np.ones((3, 4), bool))
    assert A0.shape[0] == 3 * (robot.nv - len(dep) - 12)
    assert np.abs(A0 @ p - b0).max() < 1e-8 * max(1.0, np.abs(b).max())
    wrong = p.copy()
    wrong[0] *= 1.1  # base mass +10 %
    assert np.abs(A @ wrong - b).max() > 1.0
    with pytest.raises(ValueError, match="exactly one"):
        flc.fixed_state_system(robot, Q, V, A_, T)


def test_map_fit_recovers_a_determined_parameter_and_keeps_the_prior_elsewhere():
    rng = np.random.default_rng(0)
    A = np.column_stack([rng.normal(size=200), np.zeros(200)])
    b = A @ np.array([2.0, 0.0]) + 1e-3 * rng.normal(size=200)
    p, cov = flc.map_fit(A, b, [0.0, 5.0], [10.0, 0.5], 1e-3)
    assert abs(p[0] - 2.0) < 1e-3 and abs(p[1] - 5.0) < 1e-9
    assert np.sqrt(cov[1, 1]) == pytest.approx(0.5) and np.sqrt(cov[0, 0]) < 1e-3


def test_saturated_samples_warn_and_leave_their_knots_out(robot):
    """`floating_loops.saturated_samples` on a log with the FR knee motor at its effort limit: a warning
    naming the joint; `saturation_knots` maps the window to the knots; `_knot_masked` zeroes the weights of
    a knot term's rows there (and only there)."""
    names = list(robot.joint_names)
    lim = robot.effort_limits()
    t = np.arange(0.0, 2.0, 0.002)
    tau = np.full((t.size, len(names)), np.nan)
    tau[:, [i for i, j in enumerate(names) if not j.endswith(("calf_joint", "rod_joint"))]] = 1.0
    k = names.index("FR_knee_motor")
    tau[500:510, k] = lim[k]
    log = types.SimpleNamespace(t=t, tau=tau)
    with pytest.warns(UserWarning, match="FR_knee_motor"):
        sat = floating_loops.saturated_samples(robot, log)
    assert sat[450:560].all() and not sat[:440].any() and not sat[570:].any()
    sm = types.SimpleNamespace(_idx=np.arange(0, t.size, 10), _saturated=sat)
    keep = floating_loops.saturation_knots(sm)
    assert keep.shape == (100,) and (~keep).sum() == 11 and not keep[50]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no saturation: no warning, everything kept
        assert not floating_loops.saturated_samples(robot, types.SimpleNamespace(t=t, tau=0 * tau)).any()
    term = Term("measured_forces", "knot", "measurement", lambda ev, jac: Residual(np.ones((3, 12)), w=2.0))
    ev = types.SimpleNamespace(rows=lambda arr: np.asarray(arr)[[40, 50, 70]])
    res = floating_loops._knot_masked(term, keep).evaluate(ev, False)
    w = np.broadcast_to(res.w, (3, 12))
    assert np.all(w[0] == 2.0) and np.all(w[1] == 0.0) and np.all(w[2] == 2.0)
    w = np.broadcast_to(floating_loops._knot_masked(term, keep, 0.01).evaluate(ev, False).w, (3, 12))
    assert np.allclose(w[1], 0.02) and np.all(w[0] == 2.0)
