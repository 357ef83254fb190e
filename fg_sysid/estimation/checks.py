"""Can this log determine the parameters? Checks run before any optimization (issue 14).

A log that cannot determine the dynamic parameters makes an estimator return numbers anyway (the
prior's, or noise fitted to noise). `check_data` says so plainly, from the data alone:

* **length**: at least `MIN_SAMPLES` samples, and (fixed base) at least as many effort equations
  (samples × measured joints) as identifiable parameter combinations;
* **effort content**: some effort measured, and not every measured effort identically zero;
* **motion**: a joint "moves" when its position range (1st–99th percentile) exceeds both
  `MIN_JOINT_RANGE` and `NOISE_RANGE_FACTOR` times its noise level (`highfreq_noise_std`); a log where
  no joint moves is degenerate (one pose: at most the gravity torques at that pose);
* **excitation** (fixed base): the regressor ``Y(q, v, a)`` of the full physical vector (paper 004
  eq. 16: ``tau = Y p``; `fg_sysid.estimation.baseline.stacked_regressor`) on the log's Savitzky–Golay
  smoothed states, restricted to the measured joints' rows and projected onto the structurally
  identifiable subspace (the row space of the same regressor over random states, as in
  `fg_sysid.identifiability.numerical`); columns are scaled by the random-state column norms so that
  units do not matter. Its rank and condition number (1 = every combination equally excited,
  inf = some combination not excited at all) are reported; a condition number above `COND_WARN` is a
  warning (those combinations stay at the prior: see ``std_ratio``), rank 0 is a problem.

Problems (``DataChecks.problems``) mean the data cannot determine the parameters: the CLI exits with
code 2 naming them, or with ``--allow-prior`` returns the prior. Warnings leave the fit to run.
Floating bases get the length, effort and motion checks (the excitation check is fixed-base only).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
from threadpoolctl import threadpool_limits

from ..datasets.log import Log
from ..robots import RobotModel
from .noise import highfreq_noise_std, savgol_derivatives

#: Fewer samples than this cannot give a smoothed trajectory, let alone parameters.
MIN_SAMPLES = 20
#: A joint sweeping less than this [rad | m] (1st–99th percentile range) does not move for sysid.
MIN_JOINT_RANGE = 0.02
#: ... nor when its range is below this many times its position noise level.
NOISE_RANGE_FACTOR = 10.0
#: Condition number of the (scaled, identifiable-subspace) data regressor above which we warn.
COND_WARN = 1e4
#: Relative singular-value tolerance of the rank decisions.
RANK_RTOL = 1e-8
#: At most this many samples (evenly spread) enter the regressor (cost: one Pinocchio call each).
MAX_REGRESSOR_SAMPLES = 400


@dataclass
class DataChecks:
    """Result of `check_data`. ``problems``: the data cannot determine the parameters (fatal);
    ``warnings``: parts of the parameter vector will stay at the prior."""

    samples: int
    duration_s: float
    measured_joints: list
    zero_effort_joints: list
    moving_joints: list
    still_joints: list
    position_range: dict
    regressor_rank: int | None = None
    identifiable_combinations: int | None = None
    condition_number: float | None = None
    problems: list = field(default_factory=list)
    warnings: list = field(default_factory=list)
    prior_only: bool = False

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict:
        d = asdict(self)
        if d["condition_number"] is not None and not np.isfinite(d["condition_number"]):
            d["condition_number"] = "inf"
        return d


def _fmt(x: float) -> str:
    return f"{float(x):.3g}"


def check_data(robot: RobotModel, log: Log, velocity_scale: float = 0.05) -> DataChecks:
    """Run the checks of the module docstring on ``log`` for ``robot``; never raises on bad data."""
    names = list(robot.joint_names)
    N = log.n_samples
    tau = np.asarray(log.tau, float)
    measured = [j for j, m in zip(names, log.tau_measured, strict=True) if m]
    zero = [j for i, j in enumerate(names) if j in measured and not np.any(tau[:, i])]
    q = np.asarray(log.q, float)
    if robot.loops and np.isnan(q).any():  # closed loops: unencoded joints (NaN columns) are not checked
        enc = ~np.all(np.isnan(q), axis=0)
        names, q = [j for j, e in zip(names, enc, strict=True) if e], q[:, enc]
    rng = (np.percentile(q, 99, axis=0) - np.percentile(q, 1, axis=0)) if N else np.zeros(len(names))
    sigma = np.nan_to_num(highfreq_noise_std(q), nan=0.0) if N else np.zeros(len(names))
    moving = [j for j, r, s in zip(names, rng, sigma, strict=True)
              if r > MIN_JOINT_RANGE and r > NOISE_RANGE_FACTOR * s]
    still = [j for j in names if j not in moving]
    out = DataChecks(samples=N, duration_s=float(log.duration) if N else 0.0, measured_joints=measured,
                     zero_effort_joints=zero, moving_joints=moving, still_joints=still,
                     position_range={j: float(r) for j, r in zip(names, rng, strict=True)})
    if N < MIN_SAMPLES:
        out.problems.append(f"the log has {N} samples; at least {MIN_SAMPLES} are needed")
    if not measured:
        out.problems.append("no effort is measured (every tau.<joint> column is absent or NaN): the log "
                            "cannot determine any dynamic parameter")
    elif len(zero) == len(measured):
        out.problems.append("every measured effort is zero (" + ", ".join(f"tau.{j}" for j in zero)
                            + "): a logging or unit error; the log cannot determine the parameters")
    elif zero:
        out.warnings.append("effort column(s) entirely zero: " + ", ".join(f"tau.{j}" for j in zero))
    if not moving:
        big = int(np.argmax(rng)) if len(rng) else 0
        out.problems.append(
            "no joint moves: the largest position range is "
            + (f"{_fmt(rng[big])} (joint {names[big]})" if len(rng) else "0")
            + f", below {MIN_JOINT_RANGE:g} rad|m or {NOISE_RANGE_FACTOR:g}x the joint's noise level; "
            "one pose "
            "determines at most the gravity torques at that pose")
    elif still:
        out.warnings.append(f"joint(s) that do not move (range below {MIN_JOINT_RANGE:g} rad|m or "
                            f"{NOISE_RANGE_FACTOR:g}x noise): {', '.join(still)}; what only their motion "
                            "reveals (their friction, armature) stays at the prior")
    if robot.floating_base or robot.loops or out.problems or not measured:  # (tree regressor only)
        return out
    # small dense algebra: one BLAS thread (multithreaded BLAS on a busy machine is 50x slower here)
    with threadpool_limits(1, "blas"):
        _excitation(robot, log, measured, velocity_scale, out)
    return out


def _excitation(robot: RobotModel, log: Log, measured: list, velocity_scale: float, out: DataChecks) -> None:
    from .baseline import stacked_regressor

    names = list(robot.joint_names)
    rows = [names.index(j) for j in measured]
    n = robot.n_joints
    # structural: random states within the joint limits, |v|, |a| <= 1
    lo, hi = robot.position_limits()
    P = 10 * robot.n_bodies + 3 * n
    n_rand = int(np.ceil(3 * P / max(len(rows), 1))) + 10
    gen = np.random.default_rng(0)
    qr = gen.uniform(lo, hi, (n_rand, n))
    vr = gen.uniform(-1, 1, (n_rand, n))
    ar = gen.uniform(-1, 1, (n_rand, n))
    Ys = stacked_regressor(robot, qr, vr, ar, velocity_scale)[:, rows].reshape(-1, P)
    scale = np.linalg.norm(Ys, axis=0)
    keep = scale > 1e-10 * scale.max()
    Ys = Ys[:, keep] / scale[keep]
    _, s, Vt = np.linalg.svd(Ys, full_matrices=False)
    R = int(np.sum(s > RANK_RTOL * s[0]))
    basis = Vt[:R]
    out.identifiable_combinations = R
    n_eq = log.n_samples * len(rows)
    if n_eq < R:
        out.problems.append(f"the log gives {n_eq} effort equations ({log.n_samples} samples x "
                            f"{len(rows)} measured joints) for {R} identifiable parameter combinations")
        return
    # the log's smoothed states (50 ms Savitzky–Golay, the estimators' default initial filter)
    t = np.asarray(log.t, float)
    qs, vs, as_ = savgol_derivatives(t, np.asarray(log.q, float), 0.05, 3)
    if log.v is not None:
        vs = np.asarray(log.v, float)
    idx = np.unique(np.linspace(0, log.n_samples - 1, min(MAX_REGRESSOR_SAMPLES, log.n_samples)).astype(int))
    Yd = stacked_regressor(robot, qs[idx], vs[idx], as_[idx], velocity_scale)[:, rows].reshape(-1, P)
    Yd = (Yd[:, keep] / scale[keep]) @ basis.T
    sd = np.linalg.svd(Yd, compute_uv=False)
    r = int(np.sum(sd > RANK_RTOL * sd[0])) if sd.size and sd[0] > 0 else 0
    out.regressor_rank = r
    cond = float(sd[0] / sd[-1]) if sd.size and sd[-1] > 0 else float("inf")
    out.condition_number = cond
    if r == 0:
        out.problems.append("the regressor on the log is zero: the motion excites no parameter combination")
    elif r < R or cond > COND_WARN:
        what = (f"the log excites {r} of {R} identifiable parameter combinations" if r < R else
                f"the log excites all {R} identifiable parameter combinations, some barely")
        out.warnings.append(
            f"weak excitation: {what} (condition number {_fmt(cond)} of the scaled regressor, warning above "
            f"{COND_WARN:g}); combinations it barely excites stay near the prior (std_ratio near 1)")
