"""Optimal excitation: Fourier trajectories that make the base-parameter regressor well conditioned.

Trajectories are finite Fourier series (`fg_sysid.datasets.excitation.FourierTrajectory`, paper 004
App. B) of period ``duration``. Design choices:

* **Start and end at rest.** ``v(0) = a(0) = 0`` is imposed exactly by eliminating the first
  harmonic: ``a_i1 = -sum_{l>=2} a_il`` and ``b_i1 = -sum_{l>=2} l b_il``; periodicity then gives
  ``v(T) = a(T) = 0`` too. The optimizer works on the remaining ``2 (L-1)`` coefficients per joint.
* **Position and velocity limits** are met by construction: each candidate is scaled per joint to
  fill ``[lo + margin*span, hi - margin*span]`` and ``velocity_fraction * vmax`` (whichever binds
  first), with ``q0`` at the centre of the range (`fit_to_limits`).
* **Torque limits** (URDF effort limits, nominal URDF inertias, no friction) are a quadratic penalty
  during the search; the final trajectory is scaled down uniformly (bisection on the amplitude) until
  ``|tau| <= torque_fraction * effort`` holds at every sample (`enforce_torque_limits`).
* **Objective:** ``log10 cond(Y_b)`` with ``Y_b`` the regressor of the RPNA base parameters stacked
  at ``n_samples`` instants over one period (unscaled columns, SI units), minimized by L-BFGS-B with
  finite-difference gradients from the best of ``n_starts`` random draws. The reported condition
  numbers (optimized and baseline) are evaluated on a denser grid (>= 200 instants).

The baseline for the ">= 5x" target is a random trajectory of the same family and bounds
(`random_trajectory`: coefficients ``N(0, 1) / l``, same rest constraints, same scaling).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.optimize

from ..datasets.excitation import FourierTrajectory
from .numerical import Regressor
from .rpna import rpna


def rest_coefficients(a_free: np.ndarray, b_free: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Full (n, L) coefficients from the free harmonics 2..L so that v(0) = a(0) = 0."""
    L = a_free.shape[1] + 1
    ls = np.arange(2, L + 1)
    a = np.hstack([-a_free.sum(1, keepdims=True), a_free])
    b = np.hstack([-(b_free * ls).sum(1, keepdims=True), b_free])
    return a, b


def fit_to_limits(traj: FourierTrajectory, robot, margin: float = 0.1,
                  velocity_fraction: float = 0.8) -> FourierTrajectory:
    """Scale each joint's series to fill its position range (shrunk by ``margin``) or its velocity
    limit (times ``velocity_fraction``), whichever binds first, and centre it in the range."""
    unit = traj.with_coefficients(q0=np.zeros(traj.n_joints))
    ex = unit.extrema()
    lo, hi = robot.position_limits()
    half_room = 0.5 * (hi - lo) * (1.0 - 2.0 * margin)
    half_motion = np.maximum(0.5 * (ex["q_max"] - ex["q_min"]), 1e-12)
    scale = np.minimum(half_room / half_motion,
                       velocity_fraction * robot.velocity_limits() / np.maximum(ex["v_max"], 1e-12))
    scale = 0.995 * scale
    q0 = 0.5 * (lo + hi) - 0.5 * (ex["q_max"] + ex["q_min"]) * scale
    return traj.with_coefficients(q0=q0, a=traj.a * scale[:, None], b=traj.b * scale[:, None])


def _shrink(traj: FourierTrajectory, robot, s: float) -> FourierTrajectory:
    """Amplitude scaled by ``s`` about the centre of each joint's range (stays inside the limits)."""
    lo, hi = robot.position_limits()
    mid = 0.5 * (lo + hi)
    return traj.with_coefficients(q0=mid + s * (traj.q0 - mid), a=s * traj.a, b=s * traj.b)


@dataclass
class ExcitationProblem:
    """Stacked base regressor and torques of a trajectory for one robot."""

    robot: object
    n_samples: int = 200
    torque_fraction: float = 0.9

    def __post_init__(self):
        if self.robot.floating_base:
            raise ValueError("excitation optimization supports fixed-base robots only")
        self.reg = Regressor(self.robot.model)
        self.base_index = rpna(self.robot).base_parameters().index
        self.pi_nominal = self.robot.nominal_inertial_parameters().reshape(-1)
        self.effort = self.robot.effort_limits()
        self.iv = self.robot.joint_index_v()
        self.iq = self.robot.joint_index_q()

    def _states(self, traj: FourierTrajectory):
        t = np.linspace(0.0, traj.period, self.n_samples, endpoint=False)
        return traj.evaluate(t)

    def stacked(self, traj: FourierTrajectory) -> tuple[np.ndarray, np.ndarray]:
        """(Y_b stacked over the samples, torques (n_samples, n_joints) with nominal inertias)."""
        Q, V, A = self._states(traj)
        model = self.robot.model
        import pinocchio as pin

        q = pin.neutral(model)
        v = np.zeros(model.nv)
        a = np.zeros(model.nv)
        Ys, taus = [], []
        for k in range(Q.shape[0]):
            q[self.iq], v[self.iv], a[self.iv] = Q[k], V[k], A[k]
            Y = self.reg(q, v, a)[self.iv]
            Ys.append(Y[:, self.base_index])
            taus.append(Y @ self.pi_nominal)
        return np.vstack(Ys), np.array(taus)

    def condition(self, traj: FourierTrajectory) -> float:
        """2-norm condition number of the stacked base regressor."""
        return float(np.linalg.cond(self.stacked(traj)[0]))

    def torque_ratio(self, traj: FourierTrajectory) -> float:
        """max_k,i |tau_i| / (torque_fraction * effort_i) (<= 1 means within limits)."""
        tau = self.stacked(traj)[1]
        return float(np.max(np.abs(tau) / (self.torque_fraction * self.effort)))


def _log10_cond(Y: np.ndarray) -> float:
    """log10 cond(Y) from the eigenvalues of the small Gram matrix (fast; exact enough below 1e7)."""
    ev = np.linalg.eigvalsh(Y.T @ Y)
    return float(0.5 * np.log10(ev[-1] / max(ev[0], 1e-300 * ev[-1])))


def enforce_torque_limits(problem: ExcitationProblem, traj: FourierTrajectory, iters: int = 20):
    """Largest uniform amplitude scale in (0, 1] whose torques stay within the limits (bisection)."""
    if problem.torque_ratio(traj) <= 1.0:
        return traj
    lo, hi = 0.0, 1.0
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        if problem.torque_ratio(_shrink(traj, problem.robot, mid)) <= 1.0:
            lo = mid
        else:
            hi = mid
    if lo == 0.0:
        raise ValueError("the torque limits cannot be met even at rest (gravity torques exceed them)")
    return _shrink(traj, problem.robot, lo)


def _from_free(x, robot, n, L, f, margin, velocity_fraction):
    af, bf = x[: n * (L - 1)].reshape(n, L - 1), x[n * (L - 1):].reshape(n, L - 1)
    a, b = rest_coefficients(af, bf)
    traj = FourierTrajectory(f, np.zeros(n), a, b, tuple(robot.joint_names))
    return fit_to_limits(traj, robot, margin, velocity_fraction)


def random_trajectory(robot, duration: float = 20.0, harmonics: int = 5, seed=None, margin: float = 0.1,
                      velocity_fraction: float = 0.8) -> FourierTrajectory:
    """Random Fourier trajectory of the same family and bounds as `optimize_excitation` (no torque check)."""
    rng = np.random.default_rng(seed)
    n, L = robot.n_joints, harmonics
    ls = np.arange(2, L + 1)
    x = np.concatenate([(rng.standard_normal((n, L - 1)) / ls).ravel(),
                        (rng.standard_normal((n, L - 1)) / ls).ravel()])
    return _from_free(x, robot, n, L, 1.0 / duration, margin, velocity_fraction)


@dataclass
class ExcitationResult:
    trajectory: FourierTrajectory
    condition: float
    random_condition: float  # median over the random baselines
    random_conditions: list
    torque_ratio: float
    evaluations: int

    @property
    def improvement(self) -> float:
        return self.random_condition / self.condition


def optimize_excitation(
    robot, duration: float = 20.0, harmonics: int = 5, n_samples: int = 50, seed: int = 0,
    n_starts: int = 5, max_evaluations: int = 3000, margin: float = 0.1, velocity_fraction: float = 0.8,
    torque_fraction: float = 0.9, n_baseline: int = 5,
) -> ExcitationResult:
    """Fourier trajectory (period ``duration``) minimizing cond(Y_b) under the limits (module docstring)."""
    if harmonics < 2:
        raise ValueError("harmonics must be >= 2 (the first harmonic is used by the rest constraints)")
    if duration <= 0:
        raise ValueError("duration must be positive")
    problem = ExcitationProblem(robot, n_samples=n_samples, torque_fraction=torque_fraction)
    n, L, f = robot.n_joints, harmonics, 1.0 / duration
    rng = np.random.default_rng(seed)
    ls = np.arange(2, L + 1)
    count = [0]

    def objective(x):
        count[0] += 1
        traj = _from_free(x, robot, n, L, f, margin, velocity_fraction)
        Yb, tau = problem.stacked(traj)
        val = _log10_cond(Yb)
        over = np.maximum(np.abs(tau) / (torque_fraction * problem.effort) - 1.0, 0.0)
        return float(val + 10.0 * np.sum(over**2))

    starts = [np.concatenate([(rng.standard_normal((n, L - 1)) / ls).ravel(),
                              (rng.standard_normal((n, L - 1)) / ls).ravel()]) for _ in range(n_starts)]
    x0 = min(starts, key=objective)
    res = scipy.optimize.minimize(objective, x0, method="L-BFGS-B",
                                  options={"maxfun": max_evaluations, "eps": 1e-4})
    best = res.x if res.fun <= objective(x0) else x0
    traj = enforce_torque_limits(problem, _from_free(best, robot, n, L, f, margin, velocity_fraction))
    # report on a denser grid than the search used (the torque check too)
    problem = ExcitationProblem(robot, n_samples=max(200, n_samples), torque_fraction=torque_fraction)
    traj = enforce_torque_limits(problem, traj)
    base = []
    for k in range(n_baseline):  # random trajectories of the same family and the same bounds
        rt = random_trajectory(robot, duration, harmonics, seed=10_000 + seed + k, margin=margin,
                               velocity_fraction=velocity_fraction)
        base.append(problem.condition(enforce_torque_limits(problem, rt)))
    return ExcitationResult(traj, problem.condition(traj), float(np.median(base)), base,
                            problem.torque_ratio(traj), count[0])
