"""Floating-base (legged) runs of a study: MuJoCo truth, `FloatingBaseSmoother`, held-out efforts (issue 12).

A study robot with a free-flyer base (e.g. ``b1``) is simulated in MuJoCo (`datasets.mujoco_sim`: soft
contacts, dry ``frictionloss`` friction, rolling sphere feet — out of every estimator's model class), not by
the fixed-base simulator:

* truth: `draw_truth(robot, seed)` (inertias, Coulomb / viscous friction, armature around the URDF);
* training log: `simulate_stance` with the motion named by the motion's first word (``trot-2s`` → trot;
  ``sway``, ``steps``, ``stand``; anything else → trot), the motion's duration and rate, σ = the run's noise
  on joint q, v, τ and the IMU (base pose, contact flags and forces logged noise-free);
* held-out: a noise-free 0.5 rad sway of the same robot (``heldout.duration`` s, seed + ``seed_offset``);
  ``heldout_rmse`` = relative RMSE of the joint efforts predicted with the logged contact forces
  (`floating_heldout_report`, mode ``forces``);
* methods: ``smoother`` / ``smoother+energy`` = `FloatingBaseSmoother` without / with the work–energy rows
  (``energy_contact``: ``allowance`` by default, or ``measured`` — the contact work from the logged forces —
  `estimation.energy_contact`), with the force measurements as factors only when ``use_forces: true``,
  knot stride chosen from the log; with ``init_spread > 0`` it starts at the random guess p₀ and centres its
  prior there (``prior_mean=p₀, init="prior"``, as the fixed-base smoother), or with ``init: ls`` starts at
  the bounded least-squares fit on the contact-projected rows with p₀ as its prior mean (issue 12, session
  9: the fits from p₀ itself did not converge; docs/benchmarks.md); ``strategy``: the LM damping.
  Other methods are fixed-base only: the run fails with a message naming the method.

Nominal parameters (the centre of the random guesses, and the prior mean without them): the URDF inertias
and, for friction and armature, the centre of the distribution the truth is drawn from
(`nominal_parameters`: fc = 0.02 × effort limit, fv = 0.02 × effort / velocity limit, armature = 0.1 × the
joint's mass-matrix diagonal at the standing posture) — the B1 URDF has no friction, so a guess "70 % around
the URDF" would put every friction at the layout's 1e-3 floor, out of reach of a 70 % prior (a first run
did: friction error 1.00 with and without energy). For fixed-base arms the URDF plays this role (the
truth is drawn around it).
"""

from __future__ import annotations

import numpy as np

FLOATING_METHODS = ("smoother", "smoother+energy")
#: ``truth`` keys of a rigid-contact study passed to the training trot (`simulate_rigid_stance`; issue 12,
#: session 9: the gait's amplitudes and period are part of the protocol)
RIGID_GAIT_KEYS = ("trot_amplitude", "trot_period", "hip_amplitude", "hip_frequency", "swing_fraction")


def _rel(a, b) -> float:
    """‖a − b‖ / ‖b‖ (the study's relative error; `runner` imports this module, not the reverse)."""
    nb = float(np.linalg.norm(b))
    return float(np.linalg.norm(a - b) / nb) if nb > 0 else float(np.linalg.norm(a - b))


def _motion(name: str) -> str:
    from ..datasets.mujoco_sim import MOTIONS

    word = str(name).split("-")[0].lower()
    return word if word in MOTIONS else "trot"


def nominal_parameters(robot, velocity_scale: float = 0.05) -> np.ndarray:
    """Nominal physical vector (baseline layout: inertial per body, (fc, fv) per joint, armature per joint;
    SI units): URDF inertias, friction and armature at the centre of `mujoco_sim.draw_truth`'s ranges."""
    import pinocchio as pin

    from ..datasets import mujoco_sim as ms
    from ..layout import ParameterLayout

    layout = ParameterLayout.create(robot, "exponential-eigenvalue", "coulomb-viscous", velocity_scale)
    p = layout.nominal_physical().copy()
    effort = np.asarray(robot.effort_limits(), float)
    effort = np.where(np.isfinite(effort) & (effort > 0), effort, 10.0)
    vel = np.asarray(robot.velocity_limits(), float)
    vel = np.where(np.isfinite(vel) & (vel > 0), vel, 10.0)
    q0 = ms.standing_configuration(robot, ms.standing_posture(robot), ms.DEFAULT_FOOT_FRAMES, 0.02)
    m_ii = np.diag(pin.crba(robot.model, robot.model.createData(), q0))[robot.joint_index_v()]
    centre = float(np.mean(ms.FRICTION_RANGE))
    fric = np.column_stack([ms.COULOMB_FRACTION * effort, ms.VISCOUS_FRACTION * effort / vel]) * centre
    p[layout.s_friction] = fric.ravel()
    p[layout.s_armature] = ms.ARMATURE_FRACTION * np.maximum(m_ii, 1e-6) * centre
    return p


def simulate_floating(robot, spec):
    """(training `StanceResult`, held-out `StanceResult`, true physical vector p*) of ``spec``
    (``truth.contacts``: ``soft`` = MuJoCo, ``rigid`` = `simulate_rigid`)."""
    from ..datasets.mujoco_sim import draw_truth, simulate_stance

    if spec.truth.get("contacts", "soft") == "rigid":
        return simulate_rigid(robot, spec)
    drawn = draw_truth(robot, spec.seed)
    common = dict(inertial=drawn["inertial"], friction=(drawn["fc"], drawn["fv"]), armature=drawn["armature"])
    train = simulate_stance(robot, spec.duration, spec.rate, seed=spec.seed, noise=spec.noise,
                            motion=_motion(spec.motion), **common)
    held = simulate_stance(robot, float(spec.heldout["duration"]), spec.rate,
                           seed=spec.seed + int(spec.heldout["seed_offset"]), noise=0.0, motion="sway",
                           sway_amplitude=0.5, **common)
    names = robot.parameter_names(("fc", "fv"))
    p_true = np.array([train.truth["parameters"][n] for n in names], float)
    return train, held, p_true


def fit_floating(robot, log, spec, feet, radius):
    """``(p, info)`` of ``spec.method`` on a floating-base log (module docstring)."""
    from ..estimation.floating_smoother import FloatingBaseSmoother
    from .methods import random_initial_guess

    if spec.method not in FLOATING_METHODS:
        raise ValueError(f"method {spec.method!r} is fixed-base only; floating-base robots ({robot.name}) "
                         f"run {', '.join(FLOATING_METHODS)}")
    opt = spec.estimator
    vs, spread = float(opt["friction_velocity_scale"]), float(opt.get("init_spread", 0.0))
    p_nom = nominal_parameters(robot, vs)
    strategy = {} if opt.get("strategy") is None else {"strategy": str(opt["strategy"])}
    if spread > 0:
        kw = {"prior_mean": random_initial_guess(robot, spread, spec.seed, vs, mean_physical=p_nom),
              "init": opt.get("init") or "prior"}
    else:
        kw = {"prior_mean": p_nom}
    sm = FloatingBaseSmoother(robot, feet, contact_radius=radius,
                              use_forces=bool(opt.get("use_forces", False)),
                              friction_coefficient=None if opt.get("bilateral_contacts", False) else 1.0,
                              energy_contact=str(opt.get("energy_contact", "allowance")),
                              friction_velocity_scale=opt["friction_velocity_scale"],
                              max_iterations=int(opt["max_iterations"]),
                              energy=spec.method == "smoother+energy", **kw, **strategy).fit(log)
    res = sm.result_
    order = {n: i for i, n in enumerate(res.names)}
    p = np.array([res.estimate[order[n]] for n in robot.parameter_names(("fc", "fv"))], float)
    info = {"iterations": len(res.history), "converged": bool(res.converged),
            "energy_rows": int(sm._energy_intervals().sum()) if sm.energy else 0}
    return p, info


def evaluate_floating(robot, p, p_true, held, feet, radius, velocity_scale) -> dict:
    """The study metrics (`runner.evaluate`'s keys) of a floating-base estimate ``p``."""
    from ..datasets.mujoco_sim import to_log
    from ..floating_validation import floating_heldout_report
    from .base_parameters import base_error

    nb, n = 10 * robot.n_bodies, robot.n_joints
    rep = floating_heldout_report(p, robot, to_log(held), window_s=0.05, contact_frames=feet,
                                  contact_radius=radius, velocity_scale=velocity_scale, mode="forces")
    return {
        "heldout_rmse": float(rep["overall"]),
        "inertial_error": _rel(p[:nb], p_true[:nb]),
        "inertial_base_error": base_error(robot, p[:nb], p_true[:nb]),
        "friction_error": _rel(p[nb:nb + 2 * n], p_true[nb:nb + 2 * n]),
        "armature_error": _rel(p[nb + 2 * n:], p_true[nb + 2 * n:]),
        "mass_error": _rel(p[:nb:10], p_true[:nb:10]),
    }


def run_floating(robot, spec) -> tuple[dict, dict, float, float]:
    """Simulate, fit and evaluate one floating-base run: (metrics, info, seconds simulate, identify)."""
    import time

    from ..datasets.mujoco_sim import to_log

    t0 = time.perf_counter()
    train, held, p_true = simulate_floating(robot, spec)
    feet, radius = tuple(train.foot_frames), float(train.truth["foot_radius"])
    t1 = time.perf_counter()
    p, info = fit_floating(robot, to_log(train), spec, feet, radius)
    t2 = time.perf_counter()
    if not np.all(np.isfinite(p)):
        raise FloatingPointError("the estimate has non-finite entries")
    vs = spec.estimator["friction_velocity_scale"]
    metrics = evaluate_floating(robot, p, p_true, held, feet, radius, vs)
    return metrics, info, t1 - t0, t2 - t1


def simulate_rigid(robot, spec):
    """`simulate_floating` with rigid point contacts (``truth.contacts: rigid``, issue 12): the same drawn
    truth as the MuJoCo runs (`mujoco_sim.draw_truth`), simulated by `rigid_contact_sim` — stance feet do no
    work (paper 004 eq. 63's assumption), friction fc tanh(v / truth.friction_velocity_scale) + fv v,
    efforts held between samples. Training: the motion's first word (``trot`` with hip sway, ``sway``,
    ``stand``; anything else → trot), its gait from the ``truth`` keys `RIGID_GAIT_KEYS` where given;
    held-out: a noise-free sway on four feet (no contact change)."""
    from ..datasets.mujoco_sim import draw_truth
    from ..datasets.rigid_contact_sim import RIGID_MOTIONS, simulate_rigid_stance

    drawn = draw_truth(robot, spec.seed, foot_radius=0.0)
    word = str(spec.motion).split("-")[0].lower()
    common = dict(inertial=drawn["inertial"], friction=(drawn["fc"], drawn["fv"]), armature=drawn["armature"],
                  friction_velocity_scale=float(spec.truth["friction_velocity_scale"]))
    gait = {k: float(spec.truth[k]) for k in RIGID_GAIT_KEYS if spec.truth.get(k) is not None}
    train = simulate_rigid_stance(robot, spec.duration, spec.rate, seed=spec.seed, noise=spec.noise,
                                  motion=word if word in RIGID_MOTIONS else "trot", **common, **gait)
    held = simulate_rigid_stance(robot, float(spec.heldout["duration"]), spec.rate,
                                 seed=spec.seed + int(spec.heldout["seed_offset"]), noise=0.0, motion="sway",
                                 sway_amplitude=0.5, **common)
    names = robot.parameter_names(("fc", "fv"))
    p_true = np.array([train.truth["parameters"][n] for n in names], float)
    return train, held, p_true
