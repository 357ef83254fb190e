"""The rigid point-contact quadruped truth (issue 12, `fg_sysid.datasets.rigid_contact_sim`): does it satisfy
paper 004 eq. 63's contact assumption, and how far is it from a unilateral contact?

    nice -n 10 python benchmarks/bench_rigid_contact_truth.py [--seeds 4] [--duration 2] [--rate 500]

Per seed (the study's drawn truth, the training trot of `examples/studies/table1_quadruped_rigid.yaml`,
noise-free): the largest stance-foot speed [m/s] (Pinocchio, from the logged states), the work–energy
balance at the true parameters over 10-sample windows without a contact change (Σ|r| / Σ|W_in|) and the
energy lost in windows with a touchdown, the fraction of stance samples whose ground force pulls
(f_z < 0) or leaves a μ = 1 friction cone, joint speeds, and the simulation's CPU seconds.

``--friction-information``: what the work–energy rows alone can tell about the 24 friction coefficients
(Coulomb–viscous, the estimator's 0.05 rad/s width), per seed on the same logs, with the inertial
parameters taken as known (an upper bound on the rows' contribution). One row per 10 ms interval without a
contact change, A_k = ∫ [tanh(v_j/0.05) v_j, v_j²]_j dt (trapezoid); whitened either by the input work's
sensor noise (σ = 0.005 on v and τ, `input_work_std`) or by σ_row = 0.044 J (the median contact-work
allowance measured on seed 1). Against the study's 70 % prior (std 0.7 × the true value) it prints the
number of friction directions the rows determine better than the prior (generalized eigenvalues of
(F_rows, F_prior) > 1) and the median / smallest posterior-to-prior std ratio per coefficient.
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
    ap.add_argument("--friction-information", action="store_true")
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
        if args.friction_information:
            rows.append({"seed": seed, **friction_information(res, d)})
            continue
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


def friction_information(res, drawn, stride: int = 5, vs: float = 0.05, sigma: float = 0.005,
                         allowance: float = 0.044, spread: float = 0.7) -> dict:
    """Energy-row information on the friction coefficients (module docstring, ``--friction-information``)."""
    from fg_sysid.factors.energy import input_work_std

    t, v = res.t, res.v
    starts = np.arange(0, t.size - stride, stride)
    keep = np.array([not np.diff(res.contact[a:a + stride + 1].astype(int), axis=0).any() for a in starts])
    starts = starts[keep]
    A = []
    for a in starts:
        seg, ts = v[a:a + stride + 1], t[a:a + stride + 1]
        w = np.zeros(ts.size)
        w[:-1] += 0.5 * np.diff(ts)
        w[1:] += 0.5 * np.diff(ts)
        A.append(np.column_stack([w @ (np.tanh(seg / vs) * seg), w @ seg ** 2]).ravel())
    A = np.array(A)
    p = np.column_stack([drawn["fc"], drawn["fv"]]).ravel()
    f_prior = np.diag(1.0 / (spread * p) ** 2)
    out = {"rows": len(starts)}
    s_w = input_work_std(t, v, res.tau, t[starts], t[starts + stride], sigma, sigma)
    for name, s_row in (("sensor", s_w), ("allowance", np.sqrt(s_w ** 2 + allowance ** 2))):
        F = (A / s_row[:, None]).T @ (A / s_row[:, None])
        L = np.diag(spread * p)  # F_prior^{-1/2}
        ev = np.linalg.eigvalsh(L @ F @ L)
        ratio = np.sqrt(np.diag(np.linalg.inv(f_prior + F)) / np.diag(np.linalg.inv(f_prior)))
        out.update({f"{name}_median_sigma_J": float(np.median(s_row)),
                    f"{name}_directions>prior": int(np.sum(ev > 1.0)),
                    f"{name}_ratio_median": float(np.median(ratio)), f"{name}_ratio_min": float(ratio.min())})
    return out


if __name__ == "__main__":
    main()
