"""Estimation: the one core (`problem`, `solver`, `terms`), the estimators built on it (`smoother`,
`floating_smoother`), the classical baselines and the GTSAM back end (`gtsam_backend`).

    from fg_sysid.estimation import Problem, Term, Residual, LevenbergMarquardt, SolverOptions
"""

from .problem import ConstraintState, Evaluation, Problem, Residual, Term, theta_dependent
from .solver import EstimationError, LevenbergMarquardt, SolverOptions

__all__ = [
    "ConstraintState", "EstimationError", "Evaluation", "LevenbergMarquardt", "Problem", "Residual",
    "SolverOptions", "Term", "theta_dependent",
]
