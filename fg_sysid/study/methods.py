"""Estimators a study can run, by name: each maps (robot, log, estimator options) to the physical vector.

Every entry is ``fit(robot, log, options) -> (p, info)`` with ``p`` in the baseline layout
(`RobotModel.parameter_names`: inertial per body, (fc, fv) per joint, armature per joint; SI units) and
``info`` a flat dict of scalars recorded in the run's row (iterations, converged, ...). Estimators are
black boxes here: ``smoother`` is `JointSmoother(...).fit(log).result_`. ``register_method`` adds one
(e.g. "smoother+energy" once the estimation core has the energy factor).
"""

from __future__ import annotations

import numpy as np


def _ls_sg(robot, log, opt):
    from ..estimation.baseline import LeastSquaresSG

    res = LeastSquaresSG(velocity_scale=opt["friction_velocity_scale"]).fit(log, robot).result_
    return np.asarray(res.estimate, float), {"sg_window_s": float(res.filter["window_s"]),
                                             "consistent": bool(res.physical_consistency["consistent"])}


def _energy_ls(robot, log, opt):
    from ..estimation.energy_baseline import EnergyLeastSquares

    res = EnergyLeastSquares(window_s=opt["energy_window_s"],
                             velocity_scale=opt["friction_velocity_scale"]).fit(log, robot).result_
    return np.asarray(res.estimate, float), {"consistent": bool(res.physical_consistency["consistent"])}


def _smoother(robot, log, opt):
    from ..estimation.smoother import JointSmoother

    sm = JointSmoother(robot, friction_velocity_scale=opt["friction_velocity_scale"],
                       knot_stride=int(opt["knot_stride"]), max_iterations=int(opt["max_iterations"]),
                       verbose=False).fit(log)
    res = sm.result_
    order = {n: i for i, n in enumerate(res.names)}
    p = np.array([res.estimate[order[n]] for n in robot.parameter_names(("fc", "fv"))], float)
    return p, {"iterations": len(res.history), "converged": bool(res.converged),
               "consistent": not res.consistency_problems()}


METHODS = {"ls-sg": _ls_sg, "energy-ls": _energy_ls, "smoother": _smoother}


def register_method(name: str, fit) -> None:
    """Add an estimator ``fit(robot, log, options) -> (p, info)`` under ``name``."""
    METHODS[str(name)] = fit
