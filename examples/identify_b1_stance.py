"""Identify a Unitree B1 quadruped from a simulated stance log (MuJoCo, no force sensors used) and check
the result on a held-out log with its measured contact forces.

Run:  .venv/bin/python examples/identify_b1_stance.py      (~1 min)
"""

from fg_sysid.datasets.mujoco_sim import draw_truth, simulate_stance, to_log
from fg_sysid.estimation.floating_smoother import FloatingBaseSmoother
from fg_sysid.floating_validation import floating_heldout_report
from fg_sysid.robots import load_robot
from fg_sysid.validation import nominal_model

robot = load_robot("b1")                       # feet, 2 cm contact radius, IMU frame from the catalog
truth = draw_truth(robot, seed=0)              # perturbed inertias, dry friction, damping, armature
same_robot = dict(inertial=truth["inertial"], friction=(truth["fc"], truth["fv"]), armature=truth["armature"])
train = simulate_stance(robot, 2.0, 500, seed=0, noise=0.005, motion="sway", **same_robot)
held = simulate_stance(robot, 2.0, 500, seed=1, noise=0.005, motion="sway", sway_amplitude=0.14, **same_robot)

# encoders, efforts, IMU, base pose and contact flags; the logged contact forces are not used
smoother = FloatingBaseSmoother(robot, knot_stride=5, use_forces=False, verbose=True).fit(to_log(train))
result = smoother.result_
fb = result.extras["floating_base"]
residuals = {k: f"{v:.1e}" for k, v in fb["constraint_residual_max"].items()}
print("constraint residuals at the solution:", residuals)
print(f"total mass: {fb['total_mass_estimate']:.3f} kg (true {truth['inertial'][:, 0].sum():.3f} kg)")
print(result.physical_quantities().round(4).to_string(index=False))

log = to_log(held)
for name, model in (("identified", result), ("nominal URDF", nominal_model(robot))):
    rep = floating_heldout_report(model, robot, log, window_s=0.1, contact_radius=0.02, mode="forces")
    print(f"held-out effort relative RMSE with the measured contact forces, {name}: {rep['overall']:.4f}")
