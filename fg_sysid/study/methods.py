"""Estimators a study can run, by name: each maps (robot, log, estimator options) to the physical vector.

Every entry is ``fit(robot, log, options, seed) -> (p, info)`` with ``p`` in the baseline layout
(`RobotModel.parameter_names`: inertial per body, (fc, fv) per joint, armature per joint; SI units) and
``info`` a flat dict of scalars recorded in the run's row (iterations, converged, ...). Estimators are
black boxes here: ``smoother`` is `JointSmoother(...).fit(log).result_`. ``register_method`` adds one
(e.g. "smoother+energy" once the estimation core has the energy factor).

Random initial guesses (paper 004 Sec. IX-A/D: "initialized with a 70 % relative uncertainty"): with
``init_spread = s > 0`` (a relative uncertainty; 0.7 = the paper's) the run draws
θ₀ = θ̄ + (s / 0.7)·σ_θ·N(0, 1) in the exponential–eigenvalue coordinates of the URDF prior (σ_θ:
`ParameterLayout.prior`'s 70 % widths: std s on log-mass and log principal moments, s × the body's scale
on the first moments, s rad on the principal axes; std s on log friction and log armature), from
``seed``: a physically consistent guess p₀ = p(θ₀) (`random_initial_guess`). The smoother then
starts at p₀ and centres its prior on it (``prior_mean=p₀, init="prior"``); energy-ls centres its prior
on p₀; ls-sg has no initial guess (linear least squares) and ignores it.
"""

from __future__ import annotations

import numpy as np


def random_initial_guess(robot, spread: float, seed: int, velocity_scale: float = 0.05,
                         mean_physical: np.ndarray | None = None) -> np.ndarray:
    """Physically consistent random guess p₀ (baseline layout) around the URDF prior, see module doc
    (``mean_physical``: another centre, baseline layout; the floating-base study's nominal friction)."""
    from ..layout import ParameterLayout

    layout = ParameterLayout.create(robot, "exponential-eigenvalue", "coulomb-viscous", velocity_scale)
    th0, std = layout.prior(relative=float(spread), mean_physical=mean_physical)
    std = std.copy()
    std[layout.s_friction] = float(spread)
    std[layout.s_armature] = float(spread)
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 7001]))
    return layout.to_physical(th0 + std * rng.standard_normal(layout.n))


def _guess(robot, opt, seed):
    s = float(opt.get("init_spread", 0.0))
    return None if s <= 0 else random_initial_guess(robot, s, seed, opt["friction_velocity_scale"])


def _ls_sg(robot, log, opt, seed=0):
    from ..estimation.baseline import LeastSquaresSG

    res = LeastSquaresSG(velocity_scale=opt["friction_velocity_scale"]).fit(log, robot).result_
    return np.asarray(res.estimate, float), {"sg_window_s": float(res.filter["window_s"]),
                                             "consistent": bool(res.physical_consistency["consistent"])}


def _energy_ls(robot, log, opt, seed=0):
    from ..estimation.energy_baseline import EnergyLeastSquares

    res = EnergyLeastSquares(window_s=opt["energy_window_s"], velocity_scale=opt["friction_velocity_scale"],
                             prior_mean=_guess(robot, opt, seed)).fit(log, robot).result_
    return np.asarray(res.estimate, float), {"consistent": bool(res.physical_consistency["consistent"])}


def _smoother(robot, log, opt, seed=0, energy: bool = False, dynamics: str = "inverse"):
    from ..estimation.smoother import JointSmoother

    p0 = _guess(robot, opt, seed)
    kw = {} if p0 is None else {"prior_mean": p0, "init": "prior"}
    sm = JointSmoother(robot, friction_velocity_scale=opt["friction_velocity_scale"],
                       knot_stride=int(opt["knot_stride"]), max_iterations=int(opt["max_iterations"]),
                       energy=energy, dynamics=dynamics, verbose=False, **kw).fit(log)
    res = sm.result_
    order = {n: i for i, n in enumerate(res.names)}
    p = np.array([res.estimate[order[n]] for n in robot.parameter_names(("fc", "fv"))], float)
    return p, {"iterations": len(res.history), "converged": bool(res.converged),
               "consistent": not res.consistency_problems()}


def _smoother_energy(robot, log, opt, seed=0):
    """The smoother with the work–energy term (paper 004 Sec. VII, `terms.energy`)."""
    return _smoother(robot, log, opt, seed, energy=True)


def _smoother_forward(robot, log, opt, seed=0):
    """The forward-dynamics formulation of the smoother (paper 004 Fig. 10, `terms.forward_dynamics`)."""
    return _smoother(robot, log, opt, seed, dynamics="forward")


METHODS = {"ls-sg": _ls_sg, "energy-ls": _energy_ls, "smoother": _smoother,
           "smoother+energy": _smoother_energy, "smoother-fd": _smoother_forward}


def register_method(name: str, fit) -> None:
    """Add an estimator ``fit(robot, log, options, seed) -> (p, info)`` under ``name``."""
    METHODS[str(name)] = fit
