"""Safe exciting motions for payload identification (issue 16 item 5; paper 002 Sec. V, simplified).

Family: Fourier series of period ``duration`` that start and end at rest (`rest_coefficients`, issue 4),
oscillating about a home pose (`SafeExcitation.home_pose`: the pose of least box-robust gravity torque)
and scaled per joint into the room left in the position range (shrunk by ``margin``) and
``velocity_fraction`` of the velocity limit (`fit_around`) — position and velocity limits hold by
construction for the *desired* motion.

Objective: log cond(Y) of the **momentum observation matrix** of the payload problem (rows of
`PayloadProblem`, windows of ``h`` samples of the desired motion at ``rate``), not the torque-regressor
surrogate the paper optimizes (its Table IV shows the two decorrelate for long windows).

Torque limits over the **whole current parameter box**: along the desired motion the inverse-dynamics
torque is linear in the parameters, τ = W_e(q, v, a) θ_e + R_τ(q, v, a) θ_r (R_τ: the other bodies' torque
regressor and the armature / Coulomb / viscous columns), so its exact maximum over the box is
|W_e c_e + R_τ θ_r0| + |W_e| r_e + |R_τ| r_r. It must stay below ``torque_fraction`` of the effort limit at
every check instant (a quadratic penalty during the search, then a bisection on the amplitude about the
range centre). The remaining ``1 − torque_fraction`` is the margin for the feedback of the tracking
controller; the executed closed-loop motion is checked by simulation in the benchmark and the tests.

`payload_box_from_geometry` gives a rigorous initial box from a maximum payload mass and a radius around the
end-effector frame origin that contains the payload (|mc| ≤ Mρ, I_xx ≤ Mρ², |I_xy| ≤ Mρ²/2).

Obstacles (`SphereObstacle`, `BoxObstacle`, world frame [m]): the arm is swept as capsules of radius
``link_radius`` along the segments between consecutive joint origins (sampled at ``link_samples`` points)
plus a sphere of radius ``payload_radius`` about the end-effector frame origin (the payload's ball); a motion
is admissible when the smallest signed distance to every obstacle stays ≥ 0 at the check instants. The
home pose is chosen among collision-free poses, and the same amplitude bisection that enforces the torque
limits shrinks a motion about it until it is clear (`SafeExcitation.enforce_limits`). Checked at sampled
instants (like the torques), not in continuous time: keep a clearance margin in the radii.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pinocchio as pin
import scipy.optimize

from ..datasets.excitation import FourierTrajectory
from ..identifiability.excitation_opt import rest_coefficients
from .bezier import BezierTrajectory, rest_to_rest
from .problem import NoiseBounds, PayloadError, PayloadProblem, RobotPrior


@dataclass(frozen=True)
class SphereObstacle:
    """A ball: ``centre`` (3,) in the world frame [m], ``radius`` [m]."""

    centre: tuple
    radius: float

    def distance(self, p: np.ndarray) -> np.ndarray:
        """Signed distance [m] of points ``p`` (..., 3) to the ball (negative inside)."""
        return np.linalg.norm(np.asarray(p, float) - np.asarray(self.centre, float), axis=-1) - self.radius


@dataclass(frozen=True)
class BoxObstacle:
    """An axis-aligned box: ``centre`` (3,) and ``half_extents`` (3,) in the world frame [m]."""

    centre: tuple
    half_extents: tuple

    def distance(self, p: np.ndarray) -> np.ndarray:
        """Signed distance [m] of points ``p`` (..., 3) to the box (negative inside)."""
        half = np.asarray(self.half_extents, float)
        d = np.abs(np.asarray(p, float) - np.asarray(self.centre, float)) - half
        outside = np.linalg.norm(np.maximum(d, 0.0), axis=-1)
        return outside + np.minimum(np.max(d, axis=-1), 0.0)


def payload_box_from_geometry(prior: RobotPrior, max_mass: float, radius: float):
    """(lower, upper) of θ_e for the end effector plus any payload of mass ≤ ``max_mass`` [kg] lying within
    ``radius`` [m] of the end-effector frame origin.

    Rigorous: |∫x dm| ≤ Mρ, 0 ≤ ∫(y²+z²)dm ≤ Mρ², |∫xy dm| ≤ Mρ²/2 for any such mass distribution."""
    if max_mass < 0 or radius < 0:
        raise PayloadError("maximum payload mass and radius must be non-negative")
    ee = prior.pi[prior.ee_body]
    M, r = float(max_mass), float(radius)
    lo, hi = ee.copy(), ee.copy()
    hi[0] += M
    lo[1:4] -= M * r
    hi[1:4] += M * r
    for i in (4, 6, 9):  # diagonal moments only grow
        hi[i] += M * r * r
    for i in (5, 7, 8):
        lo[i] -= M * r * r / 2
        hi[i] += M * r * r / 2
    return lo, hi


def _shrink(traj, centre: np.ndarray, s: float):
    """Amplitude scaled by ``s`` about ``centre`` (stays inside the limits when the motion was)."""
    if isinstance(traj, BezierTrajectory):
        return traj.scaled_about(centre, s)
    return traj.with_coefficients(q0=centre + s * (traj.q0 - centre), a=s * traj.a, b=s * traj.b)


def fit_bezier_around(traj: BezierTrajectory, robot, centre: np.ndarray, margin: float,
                      velocity_fraction: float) -> BezierTrajectory:
    """Scale each joint of a Bézier chain that starts at ``centre`` (about it) so that its control points —
    hence the whole curve, in continuous time — stay inside the position range shrunk by ``margin`` of the
    span and within ``velocity_fraction`` of the velocity limit."""
    lo, hi = robot.position_limits()
    room = np.maximum(np.minimum(centre - lo, hi - centre) - margin * (hi - lo), 0.0)
    b = traj.bounds()
    reach = np.maximum(np.maximum(b["q_max"] - centre, centre - b["q_min"]), 1e-12)
    scale = 0.995 * np.minimum(room / reach, velocity_fraction * robot.velocity_limits()
                               / np.maximum(b["v_max"], 1e-12))
    return traj.scaled_about(centre, scale)


def fit_around(traj: FourierTrajectory, robot, centre: np.ndarray, margin: float,
               velocity_fraction: float) -> FourierTrajectory:
    """Scale each joint's series to fill the room around ``centre`` inside the position range (shrunk by
    ``margin`` of the span at both ends) or ``velocity_fraction`` of the velocity limit, centred there."""
    unit = traj.with_coefficients(q0=np.zeros(traj.n_joints))
    ex = unit.extrema()
    lo, hi = robot.position_limits()
    span = hi - lo
    room = np.maximum(np.minimum(centre - lo, hi - centre) - margin * span, 0.0)
    half_motion = np.maximum(0.5 * (ex["q_max"] - ex["q_min"]), 1e-12)
    scale = 0.995 * np.minimum(room / half_motion,
                               velocity_fraction * robot.velocity_limits() / np.maximum(ex["v_max"], 1e-12))
    q0 = centre - 0.5 * (ex["q_max"] + ex["q_min"]) * scale
    return traj.with_coefficients(q0=q0, a=traj.a * scale[:, None], b=traj.b * scale[:, None])


@dataclass
class SafeExcitation:
    """Evaluates a candidate motion: momentum-matrix condition and box-robust torque ratio."""

    robot: object
    prior: RobotPrior
    box: tuple
    robot_rel: float = 0.05
    duration: float = 7.5
    rate: float = 50.0
    h: int = 5
    n_torque: int = 512
    torque_fraction: float = 0.8
    centre: np.ndarray | None = None
    obstacles: tuple = field(default_factory=tuple)
    link_radius: float = 0.05
    payload_radius: float = 0.1
    link_samples: int = 4

    def __post_init__(self):
        self.model = self.robot.model.copy()
        self.model.armature = np.zeros(self.model.nv)
        self.data = self.model.createData()
        self.effort = self.robot.effort_limits()
        e = self.prior.ee_body
        self._ce = slice(10 * e, 10 * e + 10)
        self._cr = np.setdiff1d(np.arange(10 * self.robot.n_bodies), np.arange(10 * e, 10 * e + 10))
        self.theta_r0 = self.prior.theta_r()
        self.r_r = self.robot_rel * np.abs(self.theta_r0)
        lo, hi = (np.asarray(x, float) for x in self.box)
        self.c_e, self.r_e = 0.5 * (lo + hi), 0.5 * (hi - lo)
        self.obstacles = tuple(self.obstacles)
        if self.centre is None:
            self.centre = self.home_pose()
        elif self.obstacles and self.clearance_at(np.asarray(self.centre, float)) < 0:
            raise PayloadError("the given centre pose collides with an obstacle")

    def clearance_at(self, q: np.ndarray) -> float:
        """Smallest signed distance [m] between the swept arm (capsules of ``link_radius`` between the
        joint origins, the payload ball of ``payload_radius`` at the end-effector frame origin) and the
        obstacles at configuration q; +inf without obstacles."""
        if not self.obstacles:
            return float("inf")
        pin.forwardKinematics(self.model, self.data, q)
        origins = np.array([self.data.oMi[j].translation for j in range(self.model.njoints)])
        parents = np.array([self.model.parents[j] for j in range(1, self.model.njoints)])
        s = np.linspace(0.0, 1.0, max(int(self.link_samples), 2))[:, None, None]
        pts = (1 - s) * origins[parents][None] + s * origins[1:][None]  # (samples, links, 3)
        ee = self.data.oMi[self.prior.ee_body + 1].translation
        d_links = min(float(np.min(o.distance(pts))) for o in self.obstacles) - self.link_radius
        d_ee = min(float(o.distance(ee)) for o in self.obstacles) - self.payload_radius
        return min(d_links, d_ee)

    def clearance(self, traj: FourierTrajectory, n: int | None = None) -> float:
        """Smallest clearance [m] over ``n`` check instants (default ``n_torque``) of the motion."""
        if not self.obstacles:
            return float("inf")
        q, _, _ = traj.evaluate(np.linspace(0.0, self.duration, n or self.n_torque))
        return min(self.clearance_at(qk) for qk in q)

    def rest_ratio(self, q: np.ndarray) -> float:
        """Box-robust gravity torque ratio at rest at q."""
        z = np.zeros(self.model.nv)
        return self._ratio(q, z, z)

    def home_pose(self, n: int = 400, seed: int = 0) -> np.ndarray:
        """The pose (of n random ones in the middle half of the range, and the range centre) with the
        smallest box-robust gravity torque ratio: the centre the motions oscillate about."""
        lo, hi = self.robot.position_limits()
        rng = np.random.default_rng(seed)
        mid = 0.5 * (lo + hi)
        cands = [mid] + list(mid + 0.25 * (hi - lo) * rng.uniform(-1, 1, (n, lo.size)))
        if self.obstacles:
            cands = [c for c in cands if self.clearance_at(c) >= 0.0]
            if not cands:
                raise PayloadError(f"no collision-free home pose among {n + 1} candidates: the obstacles "
                                   "leave no room (or give the centre pose)")
        return min(cands, key=self.rest_ratio)

    def _ratio(self, q, v, a) -> float:
        W = pin.computeJointTorqueRegressor(self.model, self.data, q, v, a)
        Rt = np.concatenate([W[:, self._cr], np.diag(a), np.diag(np.sign(v)), np.diag(v)], axis=1)
        We = W[:, self._ce]
        tmax = np.abs(We @ self.c_e + Rt @ self.theta_r0) + np.abs(We) @ self.r_e + np.abs(Rt) @ self.r_r
        return float(np.max(tmax / self.effort))

    def momentum_matrix(self, traj: FourierTrajectory) -> np.ndarray:
        t = np.arange(int(round(self.duration * self.rate)) + 1) / self.rate
        q, v, _ = traj.evaluate(t)
        prob = PayloadProblem(self.robot, self.prior, NoiseBounds(), h=self.h)
        prob.add(t, q, v, np.zeros_like(q))
        return prob.Y

    def condition(self, traj: FourierTrajectory) -> float:
        return float(np.linalg.cond(self.momentum_matrix(traj)))

    def torque_ratio(self, traj: FourierTrajectory, n: int | None = None) -> float:
        """max over instants, joints and the parameter box of |τ| / effort limit."""
        t = np.linspace(0.0, self.duration, n or self.n_torque)
        q, v, a = traj.evaluate(t)
        return max(self._ratio(q[k], v[k], a[k]) for k in range(len(t)))

    def admissible(self, traj: FourierTrajectory, n: int | None = None) -> bool:
        """Torque ratio ≤ torque_fraction over the parameter box and clearance ≥ 0 at the check instants."""
        return self.torque_ratio(traj, n) <= self.torque_fraction and self.clearance(traj, n) >= 0.0

    def enforce_limits(self, traj: FourierTrajectory, iters: int = 18, n: int | None = None
                       ) -> FourierTrajectory:
        """Largest amplitude scale in (0, 1] about the centre pose with the motion admissible (torques
        over the box and obstacle clearance; bisection; ``n`` check instants, default ``n_torque``)."""
        if self.admissible(traj, n):
            return traj
        lo, hi = 0.0, 1.0
        for _ in range(iters):
            mid = 0.5 * (lo + hi)
            if self.admissible(_shrink(traj, self.centre, mid), n):
                lo = mid
            else:
                hi = mid
        if lo == 0.0:
            raise PayloadError("the torque limits cannot be met over the parameter box even at rest: shrink "
                               "the payload box or the robot bound")
        return _shrink(traj, self.centre, lo)


def _from_free(x, ev, n, L, f, margin, velocity_fraction):
    af, bf = x[: n * (L - 1)].reshape(n, L - 1), x[n * (L - 1):].reshape(n, L - 1)
    a, b = rest_coefficients(af, bf)
    traj = FourierTrajectory(f, np.zeros(n), a, b, tuple(ev.robot.joint_names))
    return fit_around(traj, ev.robot, ev.centre, margin, velocity_fraction)


def _bezier_from_free(x, ev, n, pieces, margin, velocity_fraction):
    """Interior waypoints (q offsets, v·T, a·T², standard scale) → a rest-to-rest chain about the centre."""
    T = ev.duration / pieces
    k = (pieces - 1) * n
    traj = rest_to_rest(ev.centre + x[:k].reshape(-1, n), x[k:2 * k].reshape(-1, n) / T,
                        x[2 * k:].reshape(-1, n) / T ** 2, np.asarray(ev.centre, float), T,
                        tuple(ev.robot.joint_names))
    return fit_bezier_around(traj, ev.robot, ev.centre, margin, velocity_fraction)


def _family(ev, family: str, harmonics: int, pieces: int, margin: float, velocity_fraction: float):
    """(standard scales of the free vector's random starts, map free vector → motion) of a family."""
    n = ev.robot.n_joints
    if family == "fourier":
        L, f = harmonics, 1.0 / ev.duration
        ls = np.tile(np.repeat(1.0 / np.arange(2, L + 1)[None, :], n, axis=0).ravel(), 2)
        return ls, lambda x: _from_free(x, ev, n, L, f, margin, velocity_fraction)
    if family == "bezier":
        if pieces < 2:
            raise PayloadError("a Bézier motion needs at least 2 pieces (one interior waypoint)")
        return (np.ones(3 * (pieces - 1) * n),
                lambda x: _bezier_from_free(x, ev, n, pieces, margin, velocity_fraction))
    raise PayloadError(f"unknown motion family {family!r}: fourier or bezier")


def random_safe_motion(ev: SafeExcitation, harmonics: int = 4, seed=None, margin: float = 0.15,
                       velocity_fraction: float = 0.5, family: str = "fourier", pieces: int = 4):
    """Random motion of the same family, limits and box-robust torque check (the baseline)."""
    rng = np.random.default_rng(seed)
    scales, make = _family(ev, family, harmonics, pieces, margin, velocity_fraction)
    return ev.enforce_limits(make(scales * rng.standard_normal(scales.size)))


def optimize_safe_excitation(ev: SafeExcitation, harmonics: int = 4, seed: int = 0, n_starts: int = 4,
                             max_evaluations: int = 600, margin: float = 0.15, velocity_fraction: float = 0.5,
                             family: str = "fourier", pieces: int = 4) -> tuple:
    """Minimize log cond(Y) under the limits (module doc) over rest-to-rest Fourier series (``harmonics``)
    or C² chains of ``pieces`` quintic Bézier pieces (`fg_sysid.payload.bezier`; position and velocity
    limits then hold in continuous time). Returns (trajectory, info)."""
    rng = np.random.default_rng(seed)
    scales, make = _family(ev, family, harmonics, pieces, margin, velocity_fraction)
    count = [0]

    def candidate(x, n_check=48):
        return ev.enforce_limits(make(x), iters=12, n=n_check)

    def objective(x):  # log cond of the motion *after* its torque scaling (coarse check instants)
        count[0] += 1
        return float(np.log10(ev.condition(candidate(x))))

    starts = [scales * rng.standard_normal(scales.size) for _ in range(n_starts)]
    vals = [objective(x) for x in starts]
    x0 = starts[int(np.argmin(vals))]
    res = scipy.optimize.minimize(objective, x0, method="L-BFGS-B",
                                  options={"maxfun": max_evaluations, "eps": 1e-4})
    # final check on the dense grid; keep the optimum only if it still beats the best start
    finals = [ev.enforce_limits(candidate(x)) for x in (res.x, x0)]
    conds = [ev.condition(tr) for tr in finals]
    traj = finals[int(np.argmin(conds))]
    info = {"evaluations": count[0], "condition": min(conds),
            "torque_ratio": ev.torque_ratio(traj, n=4 * ev.n_torque)}
    return traj, info
