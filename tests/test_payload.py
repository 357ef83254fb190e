"""Payload identification with bounds (issue 16): truth containment, bound ordering, bad input, online."""

from types import SimpleNamespace

import numpy as np
import pinocchio as pin
import pytest

from fg_sysid.payload import (
    DataContradictBounds,
    NoiseBounds,
    PayloadError,
    PayloadProblem,
    RobotPrior,
    compose_payload,
    compute_bounds,
)
from fg_sysid.payload.bounds import first_order_bounds, lp_bounds, verified_bounds
from fg_sysid.payload.online import run_online
from fg_sysid.payload.simulate import (
    random_motion,
    simulate_payload_run,
    standard_payloads,
    torque_noise,
)
from fg_sysid.robots import load_robot

RATE = 500.0
H = 25


@pytest.fixture(scope="module")
def setup():
    robot = load_robot("panda")
    prior = RobotPrior.from_robot(robot, fv=0.1, armature=np.array([0.3, 0.3, 0.3, 0.3, 0.1, 0.1, 0.1]))
    rng = np.random.default_rng(11)
    payload = standard_payloads()[3]
    run = simulate_payload_run(robot, prior, payload, random_motion(robot, rng, duration=3.0), duration=3.0,
                               rate=RATE, substeps=2, robot_rel=0.05, rng=rng)
    tau_meas = run.tau + torque_noise(run.tau, 0.025, rng=rng)
    return robot, prior, run, tau_meas


def _problem(robot, prior, run, tau, **noise):
    prob = PayloadProblem(robot, prior, NoiseBounds(**({"tau_rel": 0.025, "robot_rel": 0.05} | noise)), h=H)
    prob.add(run.t, run.q, run.v, tau)
    return prob


def test_compose_payload_parallel_axis():
    """m, m·c add; I about the frame = I_c + m(|c|²1 − ccᵀ) rotated (Steiner), checked by hand."""
    ee = pin.Inertia(1.2, np.array([0.01, 0.0, 0.05]), np.diag([0.01, 0.012, 0.008])).toDynamicParameters()
    R = pin.utils.rpyToMatrix(0.3, -0.2, 0.5)
    c = np.array([0.02, -0.01, 0.15])
    Ic = np.diag([0.02, 0.03, 0.04])
    out = compose_payload(ee, pin.Inertia(2.0, np.zeros(3), Ic), pin.SE3(R, c))
    assert out[0] == pytest.approx(3.2)
    np.testing.assert_allclose(out[1:4], ee[1:4] + 2.0 * c, atol=1e-14)
    Ip = R @ Ic @ R.T + 2.0 * (c @ c * np.eye(3) - np.outer(c, c))
    I_out = np.array([[out[4], out[5], out[7]], [out[5], out[6], out[8]], [out[7], out[8], out[9]]])
    I_ee = np.array([[ee[4], ee[5], ee[7]], [ee[5], ee[6], ee[8]], [ee[7], ee[8], ee[9]]])
    np.testing.assert_allclose(I_out, I_ee + Ip, atol=1e-14)


def test_all_modes_contain_truth_and_lp_is_tightest(setup):
    robot, prior, run, tau = setup
    prob = _problem(robot, prior, run, tau)
    res = {m: compute_bounds(prob, m)[0] for m in ("lp", "verified", "first-order")}
    for mode, b in res.items():
        assert b.contains(run.theta_e).all(), (mode, b.table(run.theta_e))
    # the LP set is the exact feasible set, a subset of the least-squares image (verified)
    lp, ver = res["lp"], res["verified"]
    assert np.all(lp.lower >= ver.lower - 1e-6) and np.all(lp.upper <= ver.upper + 1e-6)
    assert lp.width[0] < 0.8 * ver.width[0]
    # point estimate: mass within 2 % (in-class: the estimator's own model, out-of-class θ_r and RK4 data)
    assert abs(lp.estimate[0] - run.theta_e[0]) < 0.02 * run.theta_e[0]
    assert lp.contains(lp.estimate).all()
    # derived intervals contain the derived truth
    clo, chi = lp.com_interval()
    com = run.theta_e[1:4] / run.theta_e[0]
    assert np.all((clo <= com) & (com <= chi))
    xx, xy, yy, xz, yz, zz = run.theta_e[4:]
    lam = np.linalg.eigvalsh(np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]]))
    llo, lhi = lp.principal_inertia_interval()
    assert np.all((llo <= lam) & (lam <= lhi))


def test_worst_case_sign_aligned_noise(setup):
    """Noise at the bound, sign-aligned with the mass row of the LS map: verified and LP still contain."""
    robot, prior, run, _ = setup
    clean = _problem(robot, prior, run, run.tau)
    Y, w = clean.Y, 1 / np.maximum(clean.d, 1e-12)
    G = np.linalg.solve((Y * w[:, None] ** 2).T @ Y, (Y * w[:, None] ** 2).T)  # (10, rows)
    sign = np.zeros_like(run.tau)
    for k in range(clean.n_windows):  # each sample's noise pushes the mass estimate up
        sign[k * H:(k + 1) * H] = np.sign(G[0, k * 7:(k + 1) * 7])
    tau = run.tau + torque_noise(run.tau, 0.025, sign=sign)
    prob = _problem(robot, prior, run, tau)
    for mode in ("lp", "verified"):
        b = compute_bounds(prob, mode)[0]
        assert b.contains(run.theta_e).all(), mode
    assert compute_bounds(prob, "lp")[0].estimate[0] > compute_bounds(clean, "lp")[0].estimate[0]


def test_verified_encloses_exact_linear_model_at_the_vertices():
    """Exact model Yθ + Rθ_r = T_true, noise at ±d (vertices of the box): the verified box always contains θ,
    and first-order equals it when the LS solution is interior (linear map: the bound is exact)."""
    rng = np.random.default_rng(7)
    for _ in range(20):
        rows, nr = 60, 8
        Y, R = rng.normal(size=(rows, 10)), rng.normal(size=(rows, nr))
        theta_r0 = rng.uniform(0.5, 2, nr)
        r = 0.05 * theta_r0
        theta_r = theta_r0 + r * rng.choice([-1, 1], nr)
        A = rng.normal(size=(3, 3))  # a random body, seeded (pin.Inertia.Random is not)
        theta = pin.Inertia(rng.uniform(0.5, 2.0), 0.1 * rng.normal(size=3),
                            0.05 * A @ A.T + 0.01 * np.eye(3)).toDynamicParameters()
        d = rng.uniform(0.01, 0.05, rows)
        T = Y @ theta + R @ theta_r + d * rng.choice([-1, 1], rows)
        prob = SimpleNamespace(Y=Y, R=R, T=T, d=d, theta_r0=theta_r0, theta_r_radius=r, n_windows=rows,
                               U0=lambda T=T, R=R, t0=theta_r0: T - R @ t0)
        mid, lo, hi = verified_bounds(prob)
        assert np.all((lo <= theta) & (theta <= hi))
        llo, lhi, _ = lp_bounds(prob, consistency=False)
        assert np.all((llo <= theta) & (theta <= lhi))
        assert np.all(llo >= lo - 1e-6) and np.all(lhi <= hi + 1e-6)


def test_first_order_matches_verified_radius_without_curvature(setup):
    """In the zero-curvature limit the paper's first-order radius is the LS image's radius."""
    robot, prior, run, tau = setup
    prob = _problem(robot, prior, run, tau)
    b, eta = compute_bounds(prob, "first-order")
    rad, _ = first_order_bounds(prob, b.estimate, eta, curvature=False)
    _, lo, hi = verified_bounds(prob)
    np.testing.assert_allclose(rad, (hi - lo) / 2, rtol=1e-6)


def test_bad_input_messages(setup):
    robot, prior, run, tau = setup
    # no motion
    n = 400
    still = PayloadProblem(robot, prior, NoiseBounds(), h=H)
    q0 = np.tile(run.q[0], (n, 1))
    still.add(np.arange(n) / RATE, q0, np.zeros((n, 7)), np.tile(tau[0], (n, 1)))
    with pytest.raises(PayloadError, match="does not excite"):
        compute_bounds(still, "lp")
    # torque bound too small for the data (true noise 2.5 %, claimed 0.05 %, no robot uncertainty)
    tight = _problem(robot, prior, run, tau, tau_rel=0.0005, robot_rel=0.0)
    for mode in ("lp", "verified", "first-order"):
        with pytest.raises(DataContradictBounds, match="the data contradict the bounds"):
            compute_bounds(tight, mode)
    # a payload box that excludes the data (mass far too small)
    prob = _problem(robot, prior, run, tau)
    box = (np.r_[0.1, -np.ones(9)], np.r_[1.0, np.ones(9)])
    with pytest.raises(DataContradictBounds, match="contradict"):
        compute_bounds(prob, "lp", box=box)
    with pytest.raises(PayloadError, match="NaN"):
        PayloadProblem(robot, prior, NoiseBounds()).add(run.t[:5], run.q[:5] * np.nan, run.v[:5], tau[:5])
    with pytest.raises(PayloadError, match="torque bound is needed"):
        NoiseBounds(tau_rel=0.0)
    with pytest.raises(PayloadError, match="unknown bound mode"):
        compute_bounds(prob, "interval")


def test_online_widths_never_grow(setup):
    robot, prior, run, tau = setup
    ident = run_online(robot, prior, NoiseBounds(), run.t, run.q, run.v, tau, chunk=0.75, mode="lp", h=H)
    hist = ident.history_frame()
    assert len(hist) >= 3
    widths = hist["hi.m"].to_numpy() - hist["lo.m"].to_numpy()
    assert np.all(np.diff(widths) <= 1e-12) and widths[-1] < widths[0]
    assert ident.current.contains(run.theta_e).all()
    assert (hist["update_s"] > 0).all()


def test_quadrature_margin_covers_the_trapezoid_error_of_a_smooth_motion(setup):
    """∫W_c dt at 1 kHz vs the same windows at 20 kHz (≈ exact): the error stays below the margin."""
    robot, prior, _, _ = setup
    traj = random_motion(robot, np.random.default_rng(8), duration=2.0)
    pi = prior.pi.copy()
    out = {}
    for rate, h in ((1000.0, 50), (20000.0, 1000)):
        t = np.arange(int(0.5 * rate) + 1) / rate
        q, v, _ = traj.evaluate(t)
        prob = PayloadProblem(robot, prior, NoiseBounds(), h=h)
        prob.add(t, q, v, np.zeros_like(q))
        prob.theta_e_abs = np.abs(pi[prior.ee_body])
        out[rate] = prob
    coarse, fine = out[1000.0], out[20000.0]
    th_r = prior.theta_r()
    err = np.abs((coarse.Y - fine.Y) @ pi[prior.ee_body] + (coarse.R - fine.R) @ th_r)
    margin = coarse.quadrature_d()
    assert err.max() > 0 and np.all(err <= margin), (err / margin).max()
