"""Tests of the classical baseline (inverse-dynamics least squares on Savitzky–Golay filtered signals).

The data are synthetic and made here: a physically consistent truth near the URDF (masses and COM
inertias scaled by U(0.8, 1.2), COMs shifted by ~1 cm), Coulomb/viscous friction and armature, joint
trajectories that are sums of sinusoids inside the joint limits with analytic velocity and acceleration,
and efforts from Pinocchio's RNEA.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from fg_sysid.datasets.log import Log
from fg_sysid.estimation.baseline import (
    LeastSquaresSG,
    nominal_parameters,
    parameter_names,
    predict_torque,
    pseudo_inertia_min_eigenvalues,
    stacked_regressor,
)
from fg_sysid.robots import load_robot

VS = 0.05  # Coulomb tanh velocity scale [rad/s]
RATE = 1000.0  # [Hz]
T_TRAIN = 12.0  # [s]
NOISE = 0.01  # std of the noise on q [rad] and tau [N m] in test (b)
#: held-out relative torque RMSE allowed under NOISE.  Measured with this exact setup (12 s z1 log,
#: default CV grid) over 8 truth/noise seeds: 0.012-0.023 (windows 201-393 samples, polyorder 3-4);
#: the seed of the test gives 0.020 (window 393, polyorder 4).  0.04 leaves a ~1.7x margin over the
#: worst seed, while the URDF nominal itself is off by 0.42 and a fit with a 5 ms window by 0.83.
NOISY_REL_RMSE_MAX = 0.04


def make_truth(robot, rng) -> np.ndarray:
    """Physically consistent parameter vector p near the URDF nominal."""
    nom = robot.nominal_inertial_parameters()
    bodies = []
    for b in range(robot.n_bodies):
        inertia = pin.Inertia.FromDynamicParameters(nom[b])
        m = inertia.mass * rng.uniform(0.8, 1.2)
        c = inertia.lever + rng.normal(0.0, 0.01, 3)
        i_c = inertia.inertia * rng.uniform(0.8, 1.2)
        bodies.append(pin.Inertia(m, c, i_c).toDynamicParameters())
    n = robot.n_joints
    fr = np.empty(2 * n)
    fr[0::2] = rng.uniform(0.2, 1.0, n)
    fr[1::2] = rng.uniform(0.1, 0.5, n)
    arm = rng.uniform(0.01, 0.05, n)
    return np.concatenate([np.ravel(bodies), fr, arm])


def make_trajectory(robot, rng, duration, rate=RATE, n_harm=4):
    """Sum of sinusoids inside the joint limits; analytic v and a."""
    t = np.arange(int(round(duration * rate))) / rate
    lo, hi = robot.position_limits()
    center, half = 0.5 * (lo + hi), 0.5 * (hi - lo)
    n = robot.n_joints
    q = np.tile(center, (t.size, 1))
    v = np.zeros_like(q)
    a = np.zeros_like(q)
    freq = rng.uniform(0.1, 1.2, (n, n_harm))
    phase = rng.uniform(0.0, 2 * np.pi, (n, n_harm))
    amp = rng.uniform(0.5, 1.0, (n, n_harm))
    amp *= (np.minimum(0.7 * half, 1.2) / amp.sum(1))[:, None]  # |q - center| <= 0.7 half-range
    for j in range(n):
        for k in range(n_harm):
            w = 2 * np.pi * freq[j, k]
            s, c = np.sin(w * t + phase[j, k]), np.cos(w * t + phase[j, k])
            q[:, j] += amp[j, k] * s
            v[:, j] += amp[j, k] * w * c
            a[:, j] -= amp[j, k] * w * w * s
    assert np.all(q >= lo) and np.all(q <= hi)
    return t, q, v, a


def oracle_torque(robot, p, q, v, a):
    """RNEA on a model copy with the truth inertias + armature * a + friction (no regressor involved)."""
    n, nb10 = robot.n_joints, 10 * robot.n_bodies
    model = robot.pinocchio_model_with(p[:nb10].reshape(robot.n_bodies, 10))
    model.armature[:] = 0.0
    data = model.createData()
    tau = np.array([pin.rnea(model, data, q[k], v[k], a[k]).copy() for k in range(q.shape[0])])
    fc, fv, arm = p[nb10:nb10 + 2 * n:2], p[nb10 + 1:nb10 + 2 * n:2], p[nb10 + 2 * n:]
    return tau + arm * a + fc * np.tanh(v / VS) + fv * v


def rel_rmse(pred, ref):
    return float(np.linalg.norm(pred - ref) / np.linalg.norm(ref))


@pytest.fixture(scope="module")
def z1():
    robot = load_robot("z1")
    rng = np.random.default_rng(20261122)
    p = make_truth(robot, rng)
    t, q, v, a = make_trajectory(robot, rng, T_TRAIN)
    tau = predict_torque(robot, p, q, v, a, VS)
    _, qh, vh, ah = make_trajectory(robot, np.random.default_rng(7), 4.0)  # different sinusoids
    tau_h = predict_torque(robot, p, qh, vh, ah, VS)
    return dict(robot=robot, p=p, t=t, q=q, v=v, a=a, tau=tau, held=(qh, vh, ah, tau_h))


# ---------------------------------------------------------------------------------------- (c) oracle
def test_truth_is_physically_consistent(z1):
    assert np.all(pseudo_inertia_min_eigenvalues(z1["p"][:60]) > 0)


def test_regressor_times_truth_equals_rnea_oracle(z1):
    robot, p = z1["robot"], z1["p"]
    sl = slice(0, 3000, 7)
    q, v, a = z1["q"][sl], z1["v"][sl], z1["a"][sl]
    Y = stacked_regressor(robot, q, v, a, VS)
    assert Y.shape == (q.shape[0], robot.n_joints, len(parameter_names(robot)))
    ref = oracle_torque(robot, p, q, v, a)
    np.testing.assert_allclose(Y @ p, ref, rtol=0, atol=1e-9)
    np.testing.assert_allclose(predict_torque(robot, p, q, v, a, VS), ref, rtol=0, atol=1e-9)
    # friction and armature columns are where the layout says
    nb10 = 10 * robot.n_bodies
    np.testing.assert_array_equal(Y[:, 2, nb10 + 2 * 2], np.tanh(v[:, 2] / VS))
    np.testing.assert_array_equal(Y[:, 2, nb10 + 2 * 2 + 1], v[:, 2])
    np.testing.assert_array_equal(Y[:, 2, nb10 + 2 * robot.n_joints + 2], a[:, 2])
    assert Y[:, 1, nb10 + 2 * 2].max() == 0  # joint 3's friction does not act on joint 2


# ---------------------------------------------------------------------------------------- (a) noise-free
@pytest.fixture(scope="module")
def clean_fit(z1):
    log = Log(t=z1["t"], q=z1["q"], v=None, tau=z1["tau"], joint_names=z1["robot"].joint_names)
    return LeastSquaresSG().fit(log, z1["robot"]).result_


def test_noise_free_predicts_held_out_torque(z1, clean_fit):
    robot, (qh, vh, ah, tau_h) = z1["robot"], z1["held"]
    pred = predict_torque(robot, clean_fit.estimate, qh, vh, ah, VS)
    err = rel_rmse(pred, tau_h)
    assert err < 1e-3, err  # measured 7.5e-07
    # noise-free data: the CV prefers the least smoothing (smallest window of the chosen order)
    f = clean_fit.filter
    assert f["window"] == min(e["window"] for e in f["cv"] if e["polyorder"] == f["polyorder"])


def test_noise_free_recovers_base_parameters(z1, clean_fit):
    robot, p = z1["robot"], z1["p"]
    est, p0 = clean_fit.estimate, nominal_parameters(robot)
    # numerical rank = rank of the column-scaled regressor on random states (structural: 52 for z1)
    rng = np.random.default_rng(3)
    lo, hi = robot.position_limits()
    n = robot.n_joints
    R = stacked_regressor(robot, rng.uniform(lo, hi, (300, n)), rng.normal(0, 1, (300, n)),
                          rng.normal(0, 1, (300, n)), VS).reshape(300 * n, -1)
    d = np.linalg.norm(R, axis=0)
    zero = d < 1e-10 * d.max()
    d[zero] = 1.0
    S = np.linalg.svd(R / d, compute_uv=False)
    assert clean_fit.rank == int(np.sum(S > 1e-8 * S[0])) == 52
    # identifiable combinations: the estimate and the truth differ only in the null space of the regressor
    _, S, Vt = np.linalg.svd(R / d, full_matrices=False)
    rank = clean_fit.rank
    row_space = Vt[:rank]
    delta = d * (est - p)
    scale = np.linalg.norm(d * p)
    assert np.linalg.norm(row_space @ delta) < 1e-4 * scale
    # ... while the truth itself is not recovered (only base combinations are identifiable) ...
    assert np.linalg.norm(d * (est - p)) > 1e-2 * scale
    # ... and parameters the efforts never see stay exactly at the URDF nominal (ridge target)
    assert zero.sum() > 5
    np.testing.assert_array_equal(est[zero], p0[zero])
    # the individually identifiable parameters (finite std) match the truth; the others report inf
    finite = np.isfinite(clean_fit.std)
    assert 20 < finite.sum() < rank
    np.testing.assert_allclose(est[finite], p[finite], rtol=1e-3, atol=1e-6)
    assert np.all(np.isinf(clean_fit.std[zero]))


def test_result_layout(z1, clean_fit):
    robot = z1["robot"]
    table = clean_fit.parameters_table()
    assert list(table.columns) == ["name", "group", "estimate", "std"]
    assert clean_fit.n_parameters == len(table) == 10 * robot.n_bodies + 3 * robot.n_joints
    assert table["name"].tolist()[:60] == robot.inertial_parameter_names()
    assert table["name"].iloc[60] == "joint1.fc" and table["name"].iloc[61] == "joint1.fv"
    assert table["name"].iloc[-1] == "joint6.armature"
    assert table["group"].value_counts().to_dict() == {"inertial": 60, "friction": 12, "armature": 6}
    cv = clean_fit.filter["cv"]
    assert {"window", "polyorder", "score", "fold_scores"} <= set(cv[0])
    assert all(len(e["fold_scores"]) == 5 for e in cv)
    assert isinstance(clean_fit.physical_consistency["consistent"], bool)
    assert clean_fit.seconds > 0


# ---------------------------------------------------------------------------------------- (b) noisy
def test_noisy_cv_picks_smoothing_and_predicts(z1):
    robot, (qh, vh, ah, tau_h) = z1["robot"], z1["held"]
    rng = np.random.default_rng(11)
    log = Log(t=z1["t"], q=z1["q"] + NOISE * rng.standard_normal(z1["q"].shape), v=None,
              tau=z1["tau"] + NOISE * rng.standard_normal(z1["tau"].shape), joint_names=robot.joint_names)
    res = LeastSquaresSG().fit(log, robot).result_
    cv = res.filter["cv"]
    windows = [e["window"] for e in cv]
    assert res.filter["window"] > min(windows)
    assert res.filter["window"] == min(cv, key=lambda e: e["score"])["window"]
    smallest = min(cv, key=lambda e: e["window"])
    assert smallest["score"] > 5 * min(e["score"] for e in cv)  # differentiation noise matters at 5 ms
    err = rel_rmse(predict_torque(robot, res.estimate, qh, vh, ah, VS), tau_h)
    assert err < NOISY_REL_RMSE_MAX, err
    assert np.all(res.std[np.isfinite(res.std)] > 0)
    # the tuning matters: the same least squares with the smallest window is far worse
    naive = LeastSquaresSG(windows=[min(windows)], polyorder=3).fit(log, robot).result_
    err_naive = rel_rmse(predict_torque(robot, naive.estimate, qh, vh, ah, VS), tau_h)
    assert err_naive > 3 * err, (err_naive, err)


# ---------------------------------------------------------------------------------------- (d) NaN column
def test_unmeasured_effort_column_is_ignored(z1):
    robot, (qh, vh, ah, tau_h) = z1["robot"], z1["held"]
    n = 4000
    tau = z1["tau"][:n].copy()
    tau[:, 2] = np.nan
    log = Log(t=z1["t"][:n], q=z1["q"][:n], v=None, tau=tau, joint_names=robot.joint_names)
    res = LeastSquaresSG(windows=[5, 11, 21]).fit(log, robot).result_
    assert "joint3" not in res.measured_joints and len(res.measured_joints) == 5
    assert np.all(np.isfinite(res.estimate))
    pred = predict_torque(robot, res.estimate, qh, vh, ah, VS)
    keep = [0, 1, 3, 4, 5]
    assert rel_rmse(pred[:, keep], tau_h[:, keep]) < 1e-3
    # joint 3's own friction and armature act on joint 3's effort only: unseen, kept at nominal
    p0 = nominal_parameters(robot)
    names = parameter_names(robot)
    for nm in ("joint3.fc", "joint3.fv", "joint3.armature"):
        i = names.index(nm)
        assert res.estimate[i] == p0[i] and np.isinf(res.std[i])


def test_no_measured_effort_raises(z1):
    robot = z1["robot"]
    tau = np.full_like(z1["tau"][:500], np.nan)
    log = Log(t=z1["t"][:500], q=z1["q"][:500], v=None, tau=tau, joint_names=robot.joint_names)
    with pytest.raises(ValueError, match="no effort column"):
        LeastSquaresSG().fit(log, robot)


# ---------------------------------------------------------------------------------------- (e) short logs
def test_log_shorter_than_window_raises(z1):
    robot = z1["robot"]
    log = Log(t=z1["t"][:30], q=z1["q"][:30], v=None, tau=z1["tau"][:30], joint_names=robot.joint_names)
    with pytest.raises(ValueError, match="fewer than the SG window of 51 samples"):
        LeastSquaresSG(windows=[11, 51]).fit(log, robot)
    tiny = Log(t=z1["t"][:4], q=z1["q"][:4], v=None, tau=z1["tau"][:4], joint_names=robot.joint_names)
    with pytest.raises(ValueError, match="fewer than the smallest SG window"):
        LeastSquaresSG().fit(tiny, robot)


# ---------------------------------------------------------------------------------------- options
def test_fixed_friction_and_nonuniform_clock():
    robot = load_robot("double_pendulum")
    rng = np.random.default_rng(5)
    p = make_truth(robot, rng)
    p0 = nominal_parameters(robot)
    nb10 = 10 * robot.n_bodies
    p[nb10:nb10 + 4] = p0[nb10:nb10 + 4]  # truth friction = URDF friction, held fixed in the fit
    t, q, v, a = make_trajectory(robot, rng, 6.0)
    t = t + rng.uniform(-0.2e-3, 0.2e-3, t.size) * (np.arange(t.size) % 3 == 0)  # jittery clock
    tau = predict_torque(robot, p, q, v, a, VS)
    log = Log(t=t, q=q, v=None, tau=tau, joint_names=robot.joint_names)
    res = LeastSquaresSG(windows=[7, 15, 31], fit_friction=False).fit(log, robot).result_
    assert res.filter["resampled"]
    names = parameter_names(robot)
    fric = [names.index(f"{j}.{s}") for j in robot.joint_names for s in ("fc", "fv")]
    np.testing.assert_array_equal(res.estimate[fric], p0[fric])
    assert np.all(np.isnan(res.std[fric]))
    _, qh, vh, ah = make_trajectory(robot, np.random.default_rng(8), 3.0)
    tau_h = predict_torque(robot, p, qh, vh, ah, VS)
    # resampling a jittered clock by linear interpolation costs some accuracy, still well under 1 %
    assert rel_rmse(predict_torque(robot, res.estimate, qh, vh, ah, VS), tau_h) < 1e-2


def test_std_is_calibrated_for_effort_noise(z1):
    """With noise on the efforts only (no errors in variables) the reported std match the actual errors.

    Measured: median |z| = 0.57, max 2.1 over the 31 individually identifiable parameters (0.67 for
    calibrated Gaussian errors); variance inflation 2.7 for the serial correlation of the residuals.
    """
    robot, p = z1["robot"], z1["p"]
    rng = np.random.default_rng(12)
    log = Log(t=z1["t"], q=z1["q"], v=None, tau=z1["tau"] + 0.05 * rng.standard_normal(z1["tau"].shape),
              joint_names=robot.joint_names)
    res = LeastSquaresSG().fit(log, robot).result_
    finite = np.isfinite(res.std)
    z = (res.estimate[finite] - p[finite]) / res.std[finite]
    assert 0.3 < np.median(np.abs(z)) < 1.2, np.median(np.abs(z))
    assert np.abs(z).max() < 5
    assert res.filter["variance_inflation"] > 1
