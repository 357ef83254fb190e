"""Batched kernels (issue 10 item 4) equal straightforward per-knot references to 1e-12.

The references below are the per-knot, per-frame formulas (one Pinocchio getter per quantity, 3×3 skew
matrices) that the batched kernels of fg_sysid.factors.contact / .imu / .contact_forces replaced; they
are evaluated on random states of B1 and B1+Z1 (several knots, all feet, with and without the foot
offset). The linear-solver part compares `LinearizedGraph.normal_equations` with a per-block reference
(Σ JᵀJ per factor block) on random graphs with every factor kind and the Gram cache.
"""

import numpy as np
import pinocchio as pin
import pytest

from fg_sysid.estimation.linear_solver import LinearizedGraph, StructuredSolver
from fg_sysid.factors.contact import (
    contact_acceleration_residual,
    contact_motion_residuals,
    contact_velocity_residual,
)
from fg_sysid.factors.contact_forces import world_forces
from fg_sysid.factors.imu import accelerometer_residual, gyro_residual
from fg_sysid.robots import load_robot

N = 6
LWA, WORLD, LOCAL = pin.LOCAL_WORLD_ALIGNED, pin.WORLD, pin.LOCAL
FEET = ["FL_foot", "FR_foot", "RL_foot", "RR_foot"]


def S(w):
    return np.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]])


# ---------------------------------------------------------------- per-knot references
def ref_velocity(model, data, fid, q, v, a, offset):
    nv = model.nv
    pin.computeForwardKinematicsDerivatives(model, data, q, v, a)
    vel = pin.getFrameVelocity(model, data, fid, LWA)
    r = vel.linear.copy()
    if offset is not None:
        r += np.cross(vel.angular, offset)
    J = np.zeros((3, 3 * nv))
    p = data.oMi[model.frames[fid].parentJoint].act(model.frames[fid].placement).translation
    Jl = pin.getFrameJacobian(model, data, fid, LWA)[:3]
    dv_dq, dv_dv = pin.getFrameVelocityDerivatives(model, data, fid, WORLD)
    om = pin.getFrameVelocity(model, data, fid, WORLD).angular
    J[:, :nv] = dv_dq[:3] - S(p) @ dv_dq[3:] + S(om) @ Jl
    J[:, nv:2 * nv] = Jl
    if offset is not None:
        J[:, :nv] -= S(offset) @ dv_dq[3:]
        J[:, nv:2 * nv] -= S(offset) @ dv_dv[3:]
    return r, J


def ref_acceleration(model, data, fid, q, v, a, offset):
    nv = model.nv
    pin.computeForwardKinematicsDerivatives(model, data, q, v, a)
    r = pin.getFrameClassicalAcceleration(model, data, fid, LWA).linear.copy()
    if offset is not None:
        r += np.cross(pin.getFrameAcceleration(model, data, fid, LWA).angular, offset)
    J = np.zeros((3, 3 * nv))
    p = data.oMi[model.frames[fid].parentJoint].act(model.frames[fid].placement).translation
    Jl = pin.getFrameJacobian(model, data, fid, LWA)[:3]
    vel = pin.getFrameVelocity(model, data, fid, WORLD)
    om, al = vel.angular, pin.getFrameAcceleration(model, data, fid, WORLD).angular
    pd = vel.linear + np.cross(om, p)
    v_dq, a_dq, a_dv, a_da = pin.getFrameAccelerationDerivatives(model, data, fid, WORLD)
    _, v_dv = pin.getFrameVelocityDerivatives(model, data, fid, WORLD)
    pd_dq = v_dq[:3] - S(p) @ v_dq[3:] + S(om) @ Jl
    J[:, :nv] = a_dq[:3] - S(p) @ a_dq[3:] + S(al) @ Jl - S(pd) @ v_dq[3:] + S(om) @ pd_dq
    J[:, nv:2 * nv] = a_dv[:3] - S(p) @ a_dv[3:] - S(pd) @ v_dv[3:] + S(om) @ Jl
    J[:, 2 * nv:] = Jl
    if offset is not None:
        J[:, :nv] -= S(offset) @ a_dq[3:]
        J[:, nv:2 * nv] -= S(offset) @ a_dv[3:]
        J[:, 2 * nv:] -= S(offset) @ a_da[3:]
    return r, J


def ref_accelerometer(model, data, fid, q, v, a, meas):
    nv = model.nv
    g = np.asarray(model.gravity.linear, float)
    pin.computeForwardKinematicsDerivatives(model, data, q, v, a)
    pin.updateFramePlacement(model, data, fid)
    R = data.oMf[fid].rotation
    vel = pin.getFrameVelocity(model, data, fid, LOCAL)
    nu, om = vel.linear, vel.angular
    acc = pin.getFrameAcceleration(model, data, fid, LOCAL)
    gl = R.T @ g
    r = acc.linear + np.cross(om, nu) - gl - meas
    v_dq, a_dq, a_dv, a_da = pin.getFrameAccelerationDerivatives(model, data, fid, LOCAL)
    J = np.zeros((3, 3 * nv))
    J[:, :nv] = a_dq[:3] - S(nu) @ v_dq[3:] + S(om) @ v_dq[:3] - S(gl) @ a_da[3:]
    J[:, nv:2 * nv] = a_dv[:3] - S(nu) @ a_da[3:] + S(om) @ a_da[:3]
    J[:, 2 * nv:] = a_da[:3]
    return r, J


def ref_gyro(model, data, fid, q, v, meas):
    nv = model.nv
    pin.computeForwardKinematicsDerivatives(model, data, q, v, np.zeros(nv))
    dv_dq, dv_dv = pin.getFrameVelocityDerivatives(model, data, fid, LOCAL)
    J = np.zeros((3, 3 * nv))
    J[:, :nv], J[:, nv:2 * nv] = dv_dq[3:], dv_dv[3:]
    return pin.getFrameVelocity(model, data, fid, LOCAL).angular - meas, J


def ref_world_force(model, data, fid, q, lam):
    pin.computeJointJacobians(model, data, q)
    R = pin.updateFramePlacement(model, data, fid).rotation
    f = R @ lam
    return f, -S(f) @ pin.getFrameJacobian(model, data, fid, LWA)[3:], R


def close(x, ref):
    """Equal to 1e-12 relative to the reference's magnitude (entries near 0 by cancellation included)."""
    x, ref = np.asarray(x), np.asarray(ref)
    assert x.shape == ref.shape
    np.testing.assert_allclose(x, ref, rtol=1e-12, atol=1e-12 * max(1.0, float(np.abs(ref).max())))


@pytest.fixture(scope="module", params=["b1", "b1_z1"])
def states(request):
    robot = load_robot(request.param)
    model = robot.model
    rng = np.random.default_rng(5)
    q = np.array([pin.randomConfiguration(model, -np.ones(model.nq), np.ones(model.nq)) for _ in range(N)])
    v = rng.uniform(-2, 2, (N, model.nv))
    a = rng.uniform(-5, 5, (N, model.nv))
    fids = [model.getFrameId(f) for f in FEET]
    imu = model.getFrameId(robot.imu_frame)
    return model, model.createData(), fids, imu, q, v, a, rng


@pytest.mark.parametrize("offset", [None, np.array([0.0, 0.0, -0.02])])
def test_contact_motion_matches_per_knot_reference(states, offset):
    model, data, fids, _, q, v, a, _ = states
    rv, Jv, ra, Ja = contact_motion_residuals(model, data, fids, q, v, a, True, offset)
    rv0, _, ra0, _ = contact_motion_residuals(model, data, fids, q, v, a, False, offset)
    assert rv.shape == (N, 4, 3) and Ja.shape == (N, 4, 3, 3 * model.nv)
    for k in range(N):
        for i, fid in enumerate(fids):
            r, J = ref_velocity(model, data, fid, q[k], v[k], a[k], offset)
            close(rv[k, i], r), close(Jv[k, i], J), close(rv0[k, i], r)
            r, J = ref_acceleration(model, data, fid, q[k], v[k], a[k], offset)
            close(ra[k, i], r), close(Ja[k, i], J), close(ra0[k, i], r)
    # the single-frame entry points share the batched core
    r, J = contact_velocity_residual(model, data, fids[2], q, v, offset=offset)
    close(r, rv[:, 2]), close(J, Jv[:, 2])
    r, J = contact_acceleration_residual(model, data, fids[2], q, v, a, offset=offset)
    close(r, ra[:, 2]), close(J, Ja[:, 2])
    assert np.abs(Ja).max() > 1.0 and np.abs(rv).max() > 0.1  # a nontrivial comparison


def test_contact_motion_chunks_are_seamless(states, monkeypatch):
    """Chunked algebra (several knots per chunk, a ragged last chunk) equals the one-chunk result."""
    import fg_sysid.factors.contact as contact

    model, data, fids, _, q, v, a, _ = states
    whole = contact_motion_residuals(model, data, fids, q, v, a, True, np.array([0.0, 0.0, -0.02]))
    for pairs in (2 * len(fids), 4 * len(fids) + 1):  # 2 knots per chunk (3 chunks); 4 + a ragged 2
        monkeypatch.setattr(contact, "CHUNK_PAIRS", pairs)
        parts = contact_motion_residuals(model, data, fids, q, v, a, True, np.array([0.0, 0.0, -0.02]))
        for x, y in zip(parts, whole, strict=True):
            close(x, y)


def test_imu_matches_per_knot_reference(states):
    model, data, _, imu, q, v, a, rng = states
    meas = rng.standard_normal((N, 3))
    r, J = accelerometer_residual(model, data, imu, q, v, a, meas)
    r0, J0 = accelerometer_residual(model, data, imu, q, v, a, meas, jacobians=False)
    rg, Jg = gyro_residual(model, data, imu, q, v, meas)
    assert J0 is None
    for k in range(N):
        rr, JJ = ref_accelerometer(model, data, imu, q[k], v[k], a[k], meas[k])
        close(r[k], rr), close(J[k], JJ), close(r0[k], rr)
        rr, JJ = ref_gyro(model, data, imu, q[k], v[k], meas[k])
        close(rg[k], rr), close(Jg[k], JJ)


def test_world_forces_match_per_knot_reference(states):
    model, data, fids, _, q, _, _, rng = states
    lam = rng.uniform(-50, 150, (N, 3))
    f, Jq, Jl = world_forces(model, data, fids[1], q, lam)
    f0, Jq0, Jl0 = world_forces(model, data, fids[1], q, lam, jacobians=False)
    assert Jq0 is None and Jl0 is None
    for k in range(N):
        ff, JJ, RR = ref_world_force(model, data, fids[1], q[k], lam[k])
        close(f[k], ff), close(Jq[k], JJ), close(Jl[k], RR), close(f0[k], ff)


# ---------------------------------------------------------------- normal equations / solver
def random_graph(rng, N=9, nx=7, nt=5, cache=None):
    g = LinearizedGraph(N, nx, nt, gram_cache=cache)
    for m in (3, 1, 4):
        g.knot.append((rng.standard_normal((N, m, nx)), rng.standard_normal((N, m))))
    for m in (2, 3):
        g.knot_theta.append((rng.standard_normal((N, m, nx)), rng.standard_normal((N, m, nt)),
                             rng.standard_normal((N, m))))
    for m in (4, 1):
        g.pair.append((rng.standard_normal((N - 1, m, nx)), rng.standard_normal((N - 1, m, nx)),
                       rng.standard_normal((N - 1, m))))
    g.knot.append((np.zeros((N, 2, nx)), rng.standard_normal((N, 2))))  # an all-zero block: skipped
    g.pair.append((np.zeros((N - 1, 2, nx)), np.zeros((N - 1, 2, nx)), rng.standard_normal((N - 1, 2))))
    g.pair_theta.append((3, rng.standard_normal((2, nx)), rng.standard_normal((2, nx)),
                         rng.standard_normal((2, nt)), rng.standard_normal(2)))
    g.prior_w = rng.uniform(0.5, 2.0, nt)
    g.prior_r = rng.standard_normal(nt)
    return g


def ref_normal_equations(g):
    N, nx, nt = g.n_knots, g.nx, g.ntheta
    D, B, C = np.zeros((N, nx, nx)), np.zeros((N - 1, nx, nx)), np.zeros((N, nx, nt))
    gx, Htt, gt = np.zeros((N, nx)), np.diag(g.prior_w ** 2), g.prior_w * g.prior_r
    for J, r in g.knot:
        for k in range(N):
            D[k] += J[k].T @ J[k]
            gx[k] += J[k].T @ r[k]
    for Jx, Jt, r in g.knot_theta:
        for k in range(N):
            D[k] += Jx[k].T @ Jx[k]
            C[k] += Jx[k].T @ Jt[k]
            Htt += Jt[k].T @ Jt[k]
            gx[k] += Jx[k].T @ r[k]
            gt += Jt[k].T @ r[k]
    pairs = [(k, J0[k], J1[k], None, r[k]) for J0, J1, r in g.pair for k in range(N - 1)]
    for k, J0, J1, Jt, r in pairs + list(g.pair_theta):
        D[k] += J0.T @ J0
        D[k + 1] += J1.T @ J1
        B[k] += J0.T @ J1
        gx[k] += J0.T @ r
        gx[k + 1] += J1.T @ r
        if Jt is not None:
            C[k] += J0.T @ Jt
            C[k + 1] += J1.T @ Jt
            Htt += Jt.T @ Jt
            gt += Jt.T @ r
    return D, B, C, Htt, gx, gt


@pytest.mark.parametrize("chunk", [64, 4])  # one chunk; chunks of 4 knots (N = 9: 4 + 4 + 1)
@pytest.mark.parametrize("use_cache", [False, True])
def test_normal_equations_match_per_block_reference(use_cache, chunk, monkeypatch):
    monkeypatch.setattr(LinearizedGraph, "CHUNK", chunk)
    rng = np.random.default_rng(3)
    cache = {} if use_cache else None
    g = random_graph(rng, cache=cache)
    ref = ref_normal_equations(g)
    for _ in range(2 if use_cache else 1):  # with the cache: the filling call, then the cached call
        out = np.full((g.n_knots, g.nx, g.nx + g.ntheta + 1), np.nan)  # stale buffer contents
        got = g.normal_equations(out=out)
        for x, y in zip(got, ref, strict=True):
            close(x, y)
    if use_cache:
        assert "knot_pair" in cache


def test_structured_solver_reuses_workspace_and_matches_dense():
    """Two solves of one size through one solver (the workspace is reused) equal the dense solution."""
    rng = np.random.default_rng(4)
    solver = StructuredSolver()
    for lam in (0.0, 0.2):
        g = random_graph(rng)
        g.pair_theta.clear()
        D, B, C, Htt, gx, gt = ref_normal_equations(g)
        N, nx, nt = g.n_knots, g.nx, g.ntheta
        H = np.zeros((N * nx + nt, N * nx + nt))
        for k in range(N):
            H[k * nx:(k + 1) * nx, k * nx:(k + 1) * nx] = D[k]
            H[k * nx:(k + 1) * nx, N * nx:] = C[k]
            H[N * nx:, k * nx:(k + 1) * nx] = C[k].T
        for k in range(N - 1):
            H[k * nx:(k + 1) * nx, (k + 1) * nx:(k + 2) * nx] = B[k]
            H[(k + 1) * nx:(k + 2) * nx, k * nx:(k + 1) * nx] = B[k].T
        H[N * nx:, N * nx:] = Htt
        Hd = H + lam * np.diag(np.diag(H))
        delta = np.linalg.solve(Hd, -np.concatenate([gx.ravel(), gt]))
        st = solver.solve(g, lam)
        np.testing.assert_allclose(st.dx.ravel(), delta[:N * nx], rtol=1e-9, atol=1e-11)
        np.testing.assert_allclose(st.dtheta, delta[N * nx:], rtol=1e-9, atol=1e-11)
