"""Why the quadruped Table I fits do not converge, and what a converged fit's error is (issue 12, session 9).

    nice -n 10 python benchmarks/bench_quadruped_convergence.py --seeds 100 101 [--strategy trust-region]
        [--max-iterations 20] [--energy] [--motion trot] [--duration 2] [--rate 500] [--trace] [--init ls]
        [--truth-motion KEY=VALUE ...]

One study run per seed on the rigid-contact truth of `examples/studies/table1_quadruped_rigid.yaml` (drawn
B1, σ = 0.005, the seed's 70 % random guess as start and prior mean, bilateral contacts, no force sensors),
fitted by `FloatingBaseSmoother` with the given damping ``--strategy`` and per-stage iteration cap. Per LM run
(stage 1: states with θ held; stage 2: everything, IRLS rounds; then θ held again; AL rounds are not listed)
it prints the accepted steps, whether the run met its own convergence test, the cost at the start and end,
and the θ coordinates that moved most (in prior stds). ``--trace``: every accepted step (cost, λ, ρ, |δθ|).
Per seed: friction / inertial errors of the guess and of the fit, the number of joints whose viscous
(Coulomb) friction posterior/prior std ratio (`parameters_table`'s std_ratio) is > 0.87 (prior-determined),
the effort σ per joint after the reweighting round, and CPU seconds of the fit.
``--init ls``: start θ at the smoother's bounded least-squares fit (contact-projected rows) with the guess as
prior mean instead of at the guess itself. ``--truth-motion hip_amplitude=0.3`` etc. overrides
`simulate_rigid_stance`'s gait keywords (``trot_amplitude``, ``trot_period``, ``hip_amplitude``,
``hip_frequency``, ``swing_fraction``; the study's ``truth`` keys) for the protocol study of item 2.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from fg_sysid.estimation.floating_smoother import FloatingBaseSmoother
from fg_sysid.robots import load_robot
from fg_sysid.study.config import RunSpec

RATIO_PRIOR = 0.87  # posterior/prior std above this: the prior, not the log, set the value


class TracedSmoother(FloatingBaseSmoother):
    """`FloatingBaseSmoother` recording each LM run: (round, freeze_theta, steps, converged, cost0, cost1,
    θ before, θ after)."""

    def _run(self, x, theta, noise, rnd, **kw):
        self.problem_ = self._build_problem(noise)
        cost0 = float(self.problem_.cost(x, theta))
        out = super()._run(x, theta, noise, rnd, **kw)
        hist = list(out[3])  # the caller extends its history list in place
        cost1 = float(hist[-1]["cost"]) if hist else cost0
        self.runs_ = getattr(self, "runs_", []) + [
            {"round": rnd, "freeze": bool(kw.get("freeze_theta", False)), "steps": len(hist),
             "converged": bool(out[2]), "cost0": cost0, "cost1": cost1, "theta0": theta.copy(),
             "theta1": out[1].copy(), "scale": self._theta_std.copy(), "history": hist,
             "names": list(self.layout_.names) if hasattr(self.layout_, "names") else None}]
        return out


def parse_motion(items):
    out = {}
    for it in items or ():
        k, v = it.split("=", 1)
        out[k] = float(v)
    return out


def run_seed(robot, args, seed, motion_kw):
    from fg_sysid.datasets.mujoco_sim import to_log
    from fg_sysid.study.floating import nominal_parameters, simulate_floating
    from fg_sysid.study.methods import random_initial_guess

    spec = RunSpec(robot="b1", motion=args.motion, duration=args.duration, rate=args.rate, noise=args.noise,
                   method="smoother+energy" if args.energy else "smoother", seed=seed, option="conv",
                   truth={"friction_velocity_scale": 0.01, "contacts": "rigid", **motion_kw},
                   estimator={"friction_velocity_scale": 0.05, "max_iterations": args.max_iterations,
                              "init_spread": 0.7}, heldout={"duration": 1.0, "seed_offset": 1000})
    train, _, p_true = simulate_floating(robot, spec)
    log = to_log(train)
    p0 = random_initial_guess(robot, 0.7, seed, 0.05, mean_physical=nominal_parameters(robot, 0.05))
    c0 = time.process_time()
    sm = TracedSmoother(robot, tuple(train.foot_frames), contact_radius=float(train.truth["foot_radius"]),
                        use_forces=False, friction_velocity_scale=0.05, max_iterations=args.max_iterations,
                        energy=args.energy, prior_mean=p0, init=args.init, friction_coefficient=None,
                        strategy=args.strategy).fit(log)
    cpu = time.process_time() - c0
    res = sm.result_
    nb, nj = 10 * robot.n_bodies, robot.n_joints
    order = {n: i for i, n in enumerate(res.names)}
    names = robot.parameter_names(("fc", "fv"))
    p = np.array([res.estimate[order[n]] for n in names], float)

    def rel(a, b):
        return float(np.linalg.norm(a - b) / np.linalg.norm(b))

    fr = slice(nb, nb + 2 * nj)
    tab = res.parameters_table().set_index("name")
    # physical std_ratio (delta method): for exp-positive friction it scales with the estimate, so an
    # estimate pulled towards 0 looks better determined than it is
    ratio_fv = np.array([tab.loc[f"{j}.fv", "std_ratio"] for j in robot.joint_names])
    ratio_fc = np.array([tab.loc[f"{j}.fc", "std_ratio"] for j in robot.joint_names])
    v = np.asarray(train.v, float)
    rms = np.sqrt(np.mean(v ** 2, axis=0))
    print(f"--- seed {seed}: knots {res.knots}, joint |v| RMS {np.sqrt(np.mean(v ** 2)):.2f} rad/s, "
          f"per-joint RMS min/max {np.sqrt(np.mean(v ** 2, axis=0)).min():.2f}/"
          f"{np.sqrt(np.mean(v ** 2, axis=0)).max():.2f}")
    print("  effort σ per joint [N·m]: " + " ".join(f"{x:.2f}" for x in np.asarray(sm.noise_.tau, float)))
    print("  fv std ratio per joint: " + ", ".join(
        f"{j.replace('_joint', '')} {r:.2f} (|v| RMS {w:.2f})"
        for j, r, w in zip(robot.joint_names, ratio_fv, rms, strict=True)))
    for r in sm.runs_:
        d = (r["theta1"] - r["theta0"]) / r["scale"]
        top = np.argsort(-np.abs(d))[:3]
        lab = [r["names"][i] if r["names"] else str(i) for i in top] if not r["freeze"] else []
        moved = ", ".join(f"{n} {d[i]:+.2f}" for n, i in zip(lab, top, strict=False))
        print(f"  run round {r['round']}{' (θ held)' if r['freeze'] else ''}: {r['steps']} steps, "
              f"{'converged' if r['converged'] else 'NOT converged'}, cost {r['cost0']:.4e} -> "
              f"{r['cost1']:.4e}" + (f"; |Δθ|/σ max {np.abs(d).max():.2f} ({moved})" if lab else ""))
        if args.trace:
            for h in r["history"]:
                print(f"      it {h['iteration']:3d} cost {h['cost']:.6e} λ {h['lambda']:.1e} "
                      f"ρ {h.get('rho', float('nan')):.2f} |δθ| {h['step_theta']:.2e}")
    out = {"seed": seed, "guess_friction": rel(p0[fr], p_true[fr]), "friction": rel(p[fr], p_true[fr]),
           "guess_inertial": rel(p0[:nb], p_true[:nb]), "inertial": rel(p[:nb], p_true[:nb]),
           "fv_prior_det": int((ratio_fv > RATIO_PRIOR).sum()),
           "fc_prior_det": int((ratio_fc > RATIO_PRIOR).sum()),
           "fv_ratio_median": float(np.median(ratio_fv)), "fc_ratio_median": float(np.median(ratio_fc)),
           "iterations": len(res.history),
           "stage2_converged": all(r["converged"] for r in sm.runs_ if not r["freeze"]),
           "cpu_s": cpu}
    print("  " + ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in out.items()))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[100, 101])
    ap.add_argument("--strategy", default="trust-region", choices=("trust-region", "hybrid", "line-search"))
    ap.add_argument("--max-iterations", type=int, default=20)
    ap.add_argument("--energy", action="store_true")
    ap.add_argument("--motion", default="trot")
    ap.add_argument("--duration", type=float, default=2.0)
    ap.add_argument("--rate", type=float, default=500.0)
    ap.add_argument("--noise", type=float, default=0.005)
    ap.add_argument("--trace", action="store_true")
    ap.add_argument("--init", default="prior", choices=("prior", "ls"),
                    help="start at the guess (the study) or at the bounded LS fit centred on it")
    ap.add_argument("--truth-motion", nargs="*", default=None, help="KEY=VALUE motion keywords of the truth")
    args = ap.parse_args()
    import pandas as pd

    robot = load_robot("b1")
    rows = [run_seed(robot, args, s, parse_motion(args.truth_motion)) for s in args.seeds]
    df = pd.DataFrame(rows)
    pd.set_option("display.width", 250)
    print(df.round(3).to_string(index=False))
    print(f"mean: friction {df.friction.mean():.3f} (guess {df.guess_friction.mean():.3f}), inertial "
          f"{df.inertial.mean():.3f}, fv prior-determined {df.fv_prior_det.mean():.1f}/12, CPU "
          f"{df.cpu_s.mean():.1f} s/fit, stage 2 converged {int(df.stage2_converged.sum())}/{len(df)}")


if __name__ == "__main__":
    main()
