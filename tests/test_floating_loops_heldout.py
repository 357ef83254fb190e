"""Floating B1 with four-bar knees (issue 11): the exact held-out states of the MuJoCo step in place
(`mujoco_loops.mj_acceleration_to_pin`), the motor / passive-joint transmission ratios of the friction
collinearity report (`floating_loops.transmission_ratios`) and the closure projection of the unencoded
rods (`floating_loops.JointSpaceClosures` + `loop_terms.project_configurations`).

Oracles: Newton–Euler of the whole robot (the six base rows of ID(q, v, a; p_true) − Σ J_fᵀ f vanish at
MuJoCo's exact states and contact forces), central differences of the exact velocities, the closure
Jacobian's dependent map (`ClosureKinematics.dependent_map`) and MuJoCo's own rod angles."""

import numpy as np
import pytest

from fg_sysid.datasets.mujoco_loops import simulate_loop_stance
from fg_sysid.estimation import floating_loops, loop_terms
from fg_sysid.estimation.loop_baseline import nominal_parameters, parameter_names
from fg_sysid.floating_validation import contact_generalized_forces, floating_inverse_dynamics
from fg_sysid.robots.loop_kinematics import ClosureKinematics
from fg_sysid.robots.looped import load_loop_robot
from fg_sysid.robots.loops import actuation_of


@pytest.fixture(scope="module")
def stepping():
    """0.6 s noise-free MuJoCo step in place (one foot in the air from 0.15 s), exact accelerations."""
    robot = load_loop_robot("b1_fourbar")
    exact = {}
    res, log, viol = simulate_loop_stance(robot, 0.6, 500.0, 0.0, 0, step_period=0.6,
                                          friction_scale=0.25, exact=exact)
    return robot, res, log, exact["a_pin"]


def _generalized(robot, p, res, log, a, rows):
    q, v = res.q_pin[rows], res.v_pin[rows]
    forces = [log.forces[f][rows] for f in robot.contact_frames]
    JtF = contact_generalized_forces(robot, q, forces, robot.contact_frames, robot.contact_radius)
    return floating_inverse_dynamics(p, robot, q, v, a[rows]) - JtF


def test_acceleration_conversion_is_the_derivative_of_pinocchio_velocity():
    """A free body moving along p(t) (cubic) and rotating at a varying body rate ω(t): MuJoCo's (ṗ, ω)
    and (p̈, ω̇) mapped by `mj_acceleration_to_pin` equal d/dt of Pinocchio's v = (Rᵀṗ, ω) (central
    differences, h = 1e-5 s; R(t) integrated with a fine exponential step)."""
    from types import SimpleNamespace

    import pinocchio as pin

    from fg_sysid.datasets.mujoco_loops import mj_acceleration_to_pin

    info = SimpleNamespace(pin_idx_v=np.array([], int), dof_adr=np.array([], int))
    c = np.array([[0.1, -0.3, 0.2], [0.5, 0.4, -0.2], [-0.7, 0.3, 0.9]])  # p = c0 t + c1 t² + c2 t³

    def omega(t):
        return np.array([1.0 + 0.5 * t, -0.8 * t**2, 0.6])

    def state(t, n=4000):
        R = pin.rpy.rpyToMatrix(0.3, -0.2, 0.5)
        for k in range(n):  # body-frame ω: Ṙ = R [ω]×, midpoint rule
            R = R @ pin.exp3(omega((k + 0.5) * t / n) * t / n)
        pd = c[0] + 2 * c[1] * t + 3 * c[2] * t**2
        pdd = 2 * c[1] + 6 * c[2] * t
        quat = pin.Quaternion(R)
        qpos = np.r_[0, 0, 0, quat.w, quat.x, quat.y, quat.z]
        return qpos, np.r_[pd, omega(t)], np.r_[pdd, 1.0 / 2.0 * np.array([1.0, -3.2 * t, 0.0])], R

    t, h = 0.7, 1e-5
    qpos, qvel, qacc, _ = state(t)
    a = mj_acceleration_to_pin(qpos, qvel, qacc, info, 6)
    vp = [np.r_[R.T @ qv[:3], qv[3:]] for _, qv, _, R in (state(t + h), state(t - h))]
    fd = (vp[0] - vp[1]) / (2 * h)
    assert np.allclose(a, fd, atol=1e-4), (a, fd)
    naive = np.r_[qacc[:3], qacc[3:]]  # the world-frame p̈ copied: wrong once the base rotates
    assert not np.allclose(naive, fd, atol=1e-2)


def test_base_rows_vanish_at_the_exact_states_with_the_true_parameters(stepping):
    """Newton–Euler of the whole robot: closure forces are internal, the joints' friction acts between
    bodies, so only the contact forces balance M a + h on the base rows — to the soft contacts' point
    of application (sphere feet), far below the nominal model's inertial mismatch."""
    robot, res, log, a = stepping
    rows = np.arange(5, len(res.t) - 5)
    p_true = np.array([res.truth["parameters"][n] for n in parameter_names(robot)])
    weight = float(sum(robot.model.inertias[i].mass for i in range(1, robot.model.njoints))) * 9.81
    base_true = np.abs(_generalized(robot, p_true, res, log, a, rows)[:, :3]).max()
    base_nom = np.abs(_generalized(robot, nominal_parameters(robot), res, log, a, rows)[:, :3]).max()
    assert base_true < 0.01 * weight, (base_true, weight)
    assert base_true < 0.2 * base_nom, (base_true, base_nom)


def test_knee_motor_torque_at_the_exact_states_separates_truth_from_nominal(stepping):
    """u = Gᵀ(ID − Σ J_fᵀ f) on the knee motors: the true parameters reproduce MuJoCo's motor torque to
    the dry-friction model mismatch, clearly better than the nominal URDF (the protocol can tell them
    apart; with SG states of a noisy log it could not, docs/benchmarks.md)."""
    robot, res, log, a = stepping
    ck = ClosureKinematics(robot.model, robot.loops)
    names, iv = list(robot.joint_names), robot.joint_index_v()
    passive = [iv[names.index(j)] for j in actuation_of(robot).passive]
    knees = [names.index(f"{leg}_knee_motor") for leg in ("FL", "FR", "RL", "RR")]
    rows = np.arange(5, len(res.t) - 5)
    p_true = np.array([res.truth["parameters"][n] for n in parameter_names(robot)])
    err = {}
    for key, p in (("true", p_true), ("nominal", nominal_parameters(robot))):
        gen = _generalized(robot, p, res, log, a, rows)
        u = np.empty((rows.size, len(knees)))
        for k, r in enumerate(rows):
            G, ind = ck.dependent_map(res.q_pin[r], passive)
            pos = {int(c): i for i, c in enumerate(ind)}
            u[k] = (G.T @ gen[k])[[pos[int(iv[i])] for i in knees]]
        ref = res.tau[rows][:, knees]
        err[key] = np.sqrt(np.mean((u - ref) ** 2)) / np.sqrt(np.mean(ref ** 2))
    assert err["true"] < 0.05, err
    assert err["true"] < 0.8 * err["nominal"], err


def test_transmission_ratios_match_the_dependent_map(stepping):
    robot, res, _, _ = stepping
    L = loop_terms.closures(_looped(robot))
    q = res.q_pin[[10, 200]]
    R = floating_loops.transmission_ratios(L, _looped(robot), q)
    ck = ClosureKinematics(robot.model, robot.loops)
    names, iv = list(robot.joint_names), robot.joint_index_v()
    from fg_sysid.robots.loops import passive_mask

    pas = passive_mask(_looped(robot))
    p_idx, a_idx = np.flatnonzero(pas), np.flatnonzero(~pas)
    for n, qk in enumerate(q):
        G, ind = ck.dependent_map(qk, iv[p_idx])
        pos = {int(c): i for i, c in enumerate(ind)}
        ref = np.array([[G[iv[j], pos[int(iv[i])]] for i in a_idx] for j in p_idx])
        assert np.allclose(R[n], ref, atol=1e-4), np.abs(R[n] - ref).max()  # MuJoCo q: ~1e-6 m open
    calf, knee = names.index("FL_calf_joint"), names.index("FL_knee_motor")
    J = R[0, list(p_idx).index(calf), list(a_idx).index(knee)]
    assert 0.3 < J < 1.5  # the calf follows the knee motor, same sign (docs/benchmarks.md: 0.5 to 1.1)


def test_rods_projected_from_the_encoders_match_mujoco(stepping):
    """`prepare_log`'s projection of the unencoded rods (the fixed-base `project_configurations` on the
    joint coordinates) reproduces MuJoCo's rod angles on a noise-free log."""
    robot, res, log, _ = stepping
    from types import SimpleNamespace

    sm = SimpleNamespace(robot=_looped(robot), impacts=False, energy=False)
    full = floating_loops.prepare_log(sm, _all_joint_log(robot, res, log))
    names = list(robot.joint_names)
    rods = [i for i, j in enumerate(names) if j.endswith("rod_joint")]
    iq = robot.joint_index_q()
    truth = res.q_pin[:, [iq[i] for i in rods]]
    assert np.abs(full.q[:, rods] - truth).max() < 1e-4  # MuJoCo's soft closure: violation ~1e-6 m
    phi, _ = floating_loops.JointSpaceClosures(sm._loops, robot).position(full.q[::50], jacobians=False)
    assert np.abs(phi).max() < 1e-5  # noise-free encoders weigh 1e6: the closures hold to MuJoCo's own gap


def _looped(robot):
    """The catalog spec of the same robot with its ``loops`` (what `fg-sysid identify` loads)."""
    from fg_sysid.robots import load_robot
    from fg_sysid.robots.looped import loop_robot_path

    looped = load_robot(str(loop_robot_path("b1_fourbar")))
    assert list(looped.joint_names) == list(robot.joint_names) and looped.loops
    return looped


def _all_joint_log(robot, res, log):
    """The log with a NaN column for every unencoded joint (what `load_log_for_robot` gives the
    smoother)."""
    import dataclasses

    names = list(robot.joint_names)
    q = np.full((len(log.t), len(names)), np.nan)
    for c, j in enumerate(log.joint_names):
        q[:, names.index(j)] = log.q[:, c]
    return dataclasses.replace(log, q=q, v=None, tau=np.full_like(q, np.nan), joint_names=tuple(names))


def test_base_tilt_reports_a_fall(stepping):
    """`base_tilt_deg`: 0 upright, 90 deg on the side, 180 upside down; the truth record of a step in
    place carries the worst tilt and the fewest feet on the ground (the bench flags a fall)."""
    import pinocchio as pin

    from fg_sysid.datasets.mujoco_loops import base_tilt_deg

    q = np.zeros((3, 7))
    for k, roll in enumerate((0.0, np.pi / 2, np.pi)):
        q[k, 3:7] = pin.Quaternion(pin.rpy.rpyToMatrix(roll, 0.0, 0.3)).coeffs()
    assert np.allclose(base_tilt_deg(q), [0.0, 90.0, 180.0], atol=1e-6)
    _, res, _, _ = stepping
    assert res.truth["base_tilt_max_deg"] < 10.0  # 0.6 s per foot is a hop (no foot down at times), no fall
    assert res.truth["feet_in_contact_min"] == int(res.contact.sum(axis=1).min())


def test_regressor_cosines_measure_the_motor_passive_collinearity():
    """v_p = J v_m with a constant J: the viscous columns are parallel (cos 1, no information on the
    split); a J that varies along the motion separates them; independent motions are near orthogonal."""
    rng = np.random.default_rng(3)
    v_m = np.sin(np.linspace(0, 12, 2000)) * 2.0
    const = floating_loops.regressor_cosines(v_m, 0.8 * v_m, np.full(v_m.size, 0.8), 0.05)
    assert const["fv"] == pytest.approx(1.0, abs=1e-12) and const["fv_weak_information"] < 1e-12
    assert const["fc"] > 0.99  # tanh(v/v_s) vs tanh(0.8 v/v_s): equal signs, different transitions
    J = 0.3 + 0.6 * (1 + np.cos(np.linspace(0, 12, 2000))) / 2  # 0.3 … 0.9, correlated with the motion
    varying = floating_loops.regressor_cosines(v_m, J * v_m, J, 0.05)
    assert 0.5 < varying["fv"] < 0.99 and varying["fv_weak_information"] > 0.01
    indep = floating_loops.regressor_cosines(v_m, rng.normal(size=v_m.size), np.ones(v_m.size), 0.05)
    assert abs(indep["fv"]) < 0.1 and abs(indep["fc"]) < 0.1
