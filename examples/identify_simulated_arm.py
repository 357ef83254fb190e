"""Identify a simulated Panda from a noisy 10 s log and validate on a held-out motion.

Run:  .venv/bin/python examples/identify_simulated_arm.py
"""

import warnings

from fg_sysid.datasets.simulate import simulate
from fg_sysid.estimation.metrics import relative_rmse
from fg_sysid.estimation.smoother import JointSmoother
from fg_sysid.factors.inverse_dynamics import InverseDynamicsResidual
from fg_sysid.robots import load_robot

robot = load_robot("panda")
train = simulate(robot, duration=10, rate=1000, noise=0.01, seed=0)          # noisy q, v, τ
held = simulate(robot, duration=10, rate=1000, noise=0.0, seed=1, truth=train.truth)  # same robot

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    smoother = JointSmoother(robot, verbose=True).fit(train.log)
result = smoother.result_

table = result.parameters_table()
print(table[table["group"] != "inertial"].round(4).to_string(index=False))
print(result.physical_quantities().round(4).to_string(index=False))

model = InverseDynamicsResidual(smoother.layout_)
t = held.truth_log
tau = model.predict(t.q, t.v, held.truth_acceleration, result.theta)
print(f"held-out torque relative RMSE: {100 * relative_rmse(tau, t.tau):.3f} %")
