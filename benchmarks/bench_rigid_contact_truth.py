"""The rigid point-contact quadruped truth (issue 12, `fg_sysid.datasets.rigid_contact_sim`): does it satisfy
paper 004 eq. 63's contact assumption, and how far is it from a unilateral contact?

    nice -n 10 python benchmarks/bench_rigid_contact_truth.py [--seeds 4] [--duration 2] [--rate 500]

Per seed (the study's drawn truth, the training trot of `examples/studies/table1_quadruped_rigid.yaml`,
noise-free): the largest stance-foot speed [m/s] (Pinocchio, from the logged states), the work–energy
balance at the true parameters over 10-sample windows without a contact change (Σ|r| / Σ|W_in|) and the
energy lost in windows with a touchdown, the fraction of stance samples whose ground force pulls
(f_z < 0) or leaves a μ = 1 friction cone, joint speeds, and the simulation's CPU seconds.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
import pinocchio as pin

from fg_sysid.datasets.mujoco_sim import draw_truth
from fg_sysid.datasets.rigid_contact_sim import energy_balance, simulate_rigid_stance
from fg_sysid.robots import load_robot


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--duration", type=float, default=2.0)
    ap.add_argument("--rate", type=float, default=500.0)
    args = ap.parse_args()
    robot = load_robot("b1")
    model, data = robot.model, robot.model.createData()
    rows = []
    for seed in range(args.seeds):
        d = draw_truth(robot, seed, foot_radius=0.0)
        c0 = time.process_time()
        res = simulate_rigid_stance(robot, args.duration, args.rate, seed=seed, noise=0.0, motion="trot",
                                    inertial=d["inertial"], friction=(d["fc"], d["fv"]),
                                    armature=d["armature"])
        cpu = time.process_time() - c0
        fids = [model.getFrameId(f) for f in res.foot_frames]
        speed = np.zeros(res.contact.shape)
        for k, (q, v) in enumerate(zip(res.q_pin, res.v_pin, strict=True)):
            pin.forwardKinematics(model, data, q, v)
            speed[k] = [np.linalg.norm(pin.getFrameVelocity(model, data, f,
                                                            pin.ReferenceFrame.LOCAL_WORLD_ALIGNED).linear)
                        for f in fids]
        r, w, same = energy_balance(robot, res, 10)
        f = res.contact_force[res.contact]
        rows.append({"seed": seed, "stance_speed_max": speed[res.contact].max(),
                     "balance_|r|/|W|": np.abs(r[same]).sum() / np.abs(w[same]).sum(),
                     "windows": int(same.sum()), "impact_loss_J": -r[~same].sum(),
                     "input_work_J": np.abs(w).sum(), "pull_frac": np.mean(f[:, 2] < 0),
                     "cone_frac": np.mean(np.linalg.norm(f[:, :2], axis=1) > np.abs(f[:, 2])),
                     "contact_changes": int(np.abs(np.diff(res.contact.astype(int), axis=0)).sum()),
                     "rms_joint_speed": float(np.sqrt(np.mean(res.v ** 2))), "cpu_s": cpu})
    df = pd.DataFrame(rows).set_index("seed")
    pd.set_option("display.width", 200)
    print(df.to_string(float_format=lambda x: f"{x:.3g}"))
    print("mean:", df.mean().to_dict())


if __name__ == "__main__":
    main()
