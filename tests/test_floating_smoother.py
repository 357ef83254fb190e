"""FloatingBaseSmoother: contact-force ID Jacobians vs central differences; end to end on a MuJoCo stance."""

import numpy as np
import pinocchio as pin
import pytest

from fg_sysid.estimation.floating_smoother import FloatingBaseSmoother
from fg_sysid.robots import load_robot

FEET = ("FL_foot", "FR_foot", "RL_foot", "RR_foot")


@pytest.fixture(scope="module")
def b1():
    return load_robot("b1")


def test_id_contact_jacobians_match_central_differences(b1):
    sm = FloatingBaseSmoother(b1, FEET).setup()
    rng = np.random.default_rng(3)
    nv, n = b1.nv, 2
    q = np.array([pin.integrate(b1.model, b1.neutral(), 0.3 * rng.standard_normal(nv)) for _ in range(n)])
    v, a = rng.standard_normal((n, nv)), rng.standard_normal((n, nv))
    lam = 50.0 * rng.standard_normal((n, 3 * len(FEET)))
    theta = sm.layout_.prior(0.7)[0] + 0.05 * rng.standard_normal(sm.layout_.n)
    tau = rng.standard_normal((n, nv))
    r, Jx, Jt = sm.id_factor(q, v, a, lam, theta, tau)
    eps = 1e-6

    def f(qq, vv, aa, ll, th):
        return sm.id_factor(qq, vv, aa, ll, th, tau, jacobians=False)[0]

    num = np.zeros_like(Jx)
    for i in range(sm.nx):
        d = np.zeros((n, sm.nx))
        d[:, i] = eps
        xp = sm._retract((q, v, a, lam), d)
        xm = sm._retract((q, v, a, lam), -d)
        num[:, :, i] = (f(*xp, theta) - f(*xm, theta)) / (2 * eps)
    scale = np.abs(num).max()
    assert np.abs(Jx[:, :, :nv] - num[:, :, :nv]).max() < 1e-6 * scale  # δq (contact term included)
    assert np.abs(Jx[:, :, 3 * nv:] - num[:, :, 3 * nv:]).max() < 1e-6 * scale  # λ
    assert np.abs(Jx - num).max() < 1e-6 * scale
    numt = np.zeros_like(Jt)
    for i in range(sm.layout_.n):
        e = np.zeros(sm.layout_.n)
        e[i] = eps
        numt[:, :, i] = (f(q, v, a, lam, theta + e) - f(q, v, a, lam, theta - e)) / (2 * eps)
    assert np.abs(Jt - numt).max() < 1e-6 * max(np.abs(numt).max(), 1.0)


@pytest.fixture(scope="module")
def stance_fit(b1):
    from fg_sysid.datasets.mujoco_sim import simulate_stance, to_log

    res = simulate_stance(b1, 1.0, 200, seed=0, motion="sway", randomize=True)
    sm = FloatingBaseSmoother(b1, res.foot_frames, knot_stride=2, max_iterations=30,
                              reweight_rounds=0).fit(to_log(res))
    return res, sm


def test_end_to_end_stance_runs_and_tracks_base_orientation(stance_fit):
    res, sm = stance_fit
    R = sm.result_
    assert R["history"] and np.isfinite(R["history"][-1]["cost"])
    assert R["history"][-1]["cost"] < 0.01 * R["initial_cost"]  # measured: 2.3e6 -> 5.1e3
    err = []
    for k, i in enumerate(sm._idx):
        qt, qe = res.q_pin[i], R["q"][k]
        Rt = pin.Quaternion(qt[6], *qt[3:6]).toRotationMatrix()
        Re = pin.Quaternion(qe[6], *qe[3:6]).toRotationMatrix()
        err.append(np.degrees(np.linalg.norm(pin.log3(Rt.T @ Re))))
    assert max(err) < 1.0  # measured: 0.15°
    assert np.isfinite(R["p"]).all()


@pytest.mark.xfail(reason="known gap of the first slice: total mass biased high (+14 % measured), "
                          "contact-force / parameter trade-off not resolved yet", strict=False)
def test_end_to_end_total_mass_within_2_percent(stance_fit):
    res, sm = stance_fit
    truth = sum(v for k, v in res.truth["parameters"].items() if k.endswith(".m"))
    est = float(np.sum(sm.result_["p"][sm.layout_.s_inertial].reshape(-1, 10)[:, 0]))
    assert abs(est - truth) < 0.02 * truth
