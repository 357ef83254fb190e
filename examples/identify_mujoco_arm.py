"""A Panda simulated in MuJoCo (dry friction = MuJoCo's soft frictionloss constraint), identified with the
friction of the predicted velocity v + T·a, checked on a held-out motion and exported back to MuJoCo.

Run:  .venv/bin/python examples/identify_mujoco_arm.py        (about 75 s; printed on 2026-11-29:
      tanh of v 0.629 %, tanh of v + T·a 0.128 % held out at the exact states, T = 9.30 ± 0.47 ms)
"""

import tempfile
import warnings
from pathlib import Path

import mujoco
import numpy as np

from fg_sysid.datasets.mujoco_sim import simulate_arm
from fg_sysid.estimation.metrics import relative_rmse
from fg_sysid.estimation.smoother import JointSmoother
from fg_sysid.export import export_mjcf, identified_parameters
from fg_sysid.robots import load_robot
from fg_sysid.validation import model_spec, predict_efforts

robot = load_robot("panda")
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    train = simulate_arm(robot, duration=8, rate=1000, noise=0.01, seed=0)           # noisy q, v, τ
    held = simulate_arm(robot, duration=4, rate=1000, noise=0.0, seed=1, truth=train.truth)
    fits = {law: JointSmoother(robot, friction=law).fit(train.log).result_
            for law in ("coulomb-viscous-scale", "coulomb-viscous-lead")}

t, a = held.truth_log, held.truth_acceleration
for law, res in fits.items():  # held-out efforts at the exact states: the parameters' error alone
    err = relative_rmse(predict_efforts(res, robot, t.q, t.v, a), held.log.tau)
    print(f"{law:22s} held-out torque relative RMSE {100 * err:.3f} %")
lead = fits["coulomb-viscous-lead"].parameters_table().set_index("name").loc["panda_joint2.lead"]
print(f"friction lead T = {1e3 * lead['estimate']:.2f} ± {1e3 * lead['std']:.2f} ms "
      "(MuJoCo's default soft constraint: 9.5 ms)")

# back to MuJoCo: frictionloss = fc, damping = fv, solreffriction / solimpfriction from vs and T
spec = model_spec(fits["coulomb-viscous-lead"], robot, "panda")
with tempfile.TemporaryDirectory() as d:
    export_mjcf(identified_parameters(spec, robot), Path(d) / "panda_fit.xml")
    m = mujoco.MjModel.from_xml_path(str(Path(d) / "panda_fit.xml"))
print("exported MJCF joints:", m.njnt, "| solreffriction of joint 2:", np.round(m.dof_solref[1], 4))
