"""Energy rows with knots sparser than the log (issue 12, session 9): what the measured-work rows add.

At knot stride s (one knot every s log samples, `JointSmoother(knot_stride=s)`) the inverse-dynamics rows
see the logged efforts at the knots only and the velocity rows the logged velocities at the knots. The
energy row over [t_k, t_{k+s}] (paper 004 eq. 63, `factors.energy.EnergyResidual`) subtracts the measured
input work Ŵ = Σᵢ τ̂ᵢᵀ ½Δtᵢ (v̂ᵢ + v̂ᵢ₊₁) over **every** sample i of the interval (`factors.energy.input_work`,
held efforts), whitened by `input_work_std` (long-run share of the shared boundary samples). Its noise is
then mostly that of the s − 1 samples no other row sees (at s = 1, none: the row is a combination of rows
already in the graph, docs/energy.md "Double counting"). What it adds is one scalar per interval: the
skipped samples' efforts projected on the motion, ∫ vᵀτ dt. For joint j's friction that is information
(∫|v_j| dt)² (fc) or (∫ v_j² dt)² (fv) over σ_W², where σ_W² ≈ Σᵢ Δt² (|vᵢ|² σ_τ² + |τᵢ|² σ_v²) holds every
joint's power noise (on an arm mostly the velocity noise times the effort), against ≈ (s − 1)/σ_τ² per
joint from inverse-dynamics rows at the skipped samples: the rows recover a small part of what the sparse
knots leave out.

Diagnostics on simulated logs (`fg_sysid.datasets.simulate.SimResult`, truth known); used by
benchmarks/bench_energy_sparse_rows.py and tests/test_energy_sparse.py. Units: J for work, N·m and N·m·s/rad
for the friction coefficients (fc, fv).
"""

from __future__ import annotations

import warnings

import numpy as np

from ..datasets.simulate import truth_arrays
from ..factors.energy import EnergyResidual, input_work, input_work_std
from ..layout import ParameterLayout


def truth_physical(robot, truth: dict, layout: ParameterLayout, velocity_scale: float) -> np.ndarray:
    """The true parameters (``SimResult.truth``) as a physical vector of ``layout`` (Coulomb–viscous; with
    the tanh-width column of ``coulomb-viscous-scale`` set to ``velocity_scale`` [rad/s], the truth's)."""
    tr = truth_arrays(truth, robot)
    fr = np.c_[tr["fc"], tr["fv"]]
    if layout.kf == 3:
        fr = np.c_[fr, np.full(robot.n_joints, float(velocity_scale))]
    elif layout.kf != 2:
        raise ValueError(f"friction law with {layout.kf} parameters per joint: Coulomb–viscous layouts only")
    return np.concatenate([tr["inertial"].ravel(), fr.ravel(), tr["armature"]])


def measured_row_statistics(robot, sim, stride: int, sigma: float, velocity_scale: float,
                            sum_rows: int = 50) -> dict:
    """The measured-work energy rows at knot stride ``stride`` at the true states and parameters of ``sim``.

    ``sigma``: the sensor noise std of v̂ and τ̂ (rad/s, N·m); ``velocity_scale``: the truth's tanh width.
    Returns ``row RMS`` (whitened by `input_work_std`), ``noise-free RMS/σ`` (the same on the noise-free log:
    the row's model error — W_f is a trapezoid over the two knots while Ŵ integrates every sample),
    ``sums RMS`` (sums of ``sum_rows`` consecutive rows whitened by the root of their σ² sum), ``new noise
    share`` (fraction of the rows' noise variance from samples strictly between two knots, which no
    inverse-dynamics or velocity row sees) and ``median σ [mJ]``."""
    T, L = sim.truth_log, sim.log
    t = np.asarray(T.t, float)
    idx = np.arange(0, t.size, int(stride))
    tk = t[idx]
    names = list(robot.joint_names)
    lay = ParameterLayout.create(robot, "exponential-eigenvalue", "coulomb-viscous", velocity_scale)
    th = lay.to_theta(truth_physical(robot, sim.truth, lay, velocity_scale))
    r0 = EnergyResidual(lay).evaluate(T.q[idx], T.v[idx], tk, th, np.zeros(idx.size - 1), jacobians=False).r
    w = input_work(t, L.v, L.tau, tk[:-1], tk[1:], names)
    w_nf = input_work(t, T.v, T.tau, tk[:-1], tk[1:], names)
    knot = np.zeros(t.size, bool)
    knot[idx] = True  # samples the inverse-dynamics and velocity rows also see
    w_knot = input_work(t, np.where(knot[:, None], L.v, T.v), np.where(knot[:, None], L.tau, T.tau),
                        tk[:-1], tk[1:], names)
    sig = input_work_std(t, L.v, L.tau, tk[:-1], tk[1:], sigma, sigma)
    e, e_known = w - w_nf, w_knot - w_nf
    r = r0 - w
    n = (r.size // sum_rows) * sum_rows
    sums = r[:n].reshape(-1, sum_rows).sum(1) / np.sqrt((sig[:n] ** 2).reshape(-1, sum_rows).sum(1))
    return {"row RMS": float(np.sqrt(np.mean((r / sig) ** 2))),
            "noise-free RMS/σ": float(np.sqrt(np.mean(((r0 - w_nf) / sig) ** 2))),
            "sums RMS": float(np.sqrt(np.mean(sums ** 2))),
            "new noise share": float(np.var(e - e_known) / np.var(e)),
            "median σ [mJ]": float(1e3 * np.median(sig))}


def friction_posterior_std(robot, sim, stride: int, energy: bool, sigma: float,
                           velocity_scale: float) -> np.ndarray:
    """(n_joints, 2) marginal posterior std of each joint's (fc, fv) from the smoother's own graph at knot
    stride ``stride`` (`JointSmoother`, Coulomb–viscous with estimated tanh width, σ_q = σ_v = σ_τ = ``sigma``
    given, default prior and process noise; ``energy``: with the measured-work energy rows), linearized at
    the true states and parameters of ``sim`` (undamped Schur complement of θ, mapped to physical units)."""
    from .smoother import JointSmoother

    T = sim.truth_log
    idx = np.arange(0, T.t.size, int(stride))
    sm = JointSmoother(robot, knot_stride=int(stride), sigma_q=sigma, sigma_v=sigma, sigma_tau=sigma,
                       max_iterations=1, energy=energy)
    sm.energy_work = "measured"  # the state form needs stride 1; measured rows at every stride compare alike
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sm.fit(sim.log)
    lay = sm.layout_
    th = lay.to_theta(truth_physical(robot, sim.truth, lay, velocity_scale))
    x = (T.q[idx], T.v[idx], sim.truth_acceleration[idx])
    J = lay.jacobian(th)
    cov = J @ sm._lm.covariance(sm.problem_, x, th) @ J.T
    return np.sqrt(np.diag(cov))[lay.s_friction].reshape(lay.nj, lay.kf)[:, :2]
