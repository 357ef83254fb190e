"""Adding a factor term of your own: motion-capture positions of the end effector at some knots.

A term is a plain residual of the knot states (and θ) with its analytic Jacobian, plus a role
(measurement / prior / constraint) — the estimation core (`fg_sysid.estimation.problem`) linearizes it
with every other term, the native O(N) solver and the GTSAM back end (`GtsamProblem`) both use it.

    r_k = p_ee(q_k) − p̂_k   [m, world frame],   ∂r/∂δq = J_lin(q_k)  (Pinocchio frame Jacobian)

Run:  python examples/custom_term_mocap.py   (Z1, 4 s at 1 kHz, mocap at 50 Hz with 1 mm noise)
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from fg_sysid.datasets.simulate import simulate
from fg_sysid.estimation.gtsam_backend import GtsamProblem
from fg_sysid.estimation.problem import Residual, Term
from fg_sysid.estimation.smoother import JointSmoother
from fg_sysid.robots import load_robot


def frame_positions(robot, frame: str, q: np.ndarray) -> np.ndarray:
    """World positions (N, 3) [m] of ``frame`` at configurations q (N, nq)."""
    m = robot.model
    d = m.createData()
    fid = m.getFrameId(frame)
    out = np.empty((q.shape[0], 3))
    for k, qk in enumerate(q):
        pin.framesForwardKinematics(m, d, qk)
        out[k] = d.oMf[fid].translation
    return out


def mocap_term(robot, frame: str, t_meas: np.ndarray, p_meas: np.ndarray, sigma: float):
    """A factory ``(problem, smoother) -> Term`` for `JointSmoother(extra_terms=[...])`."""
    model = robot.model.copy()
    data = model.createData()
    fid = model.getFrameId(frame)

    def make(problem, smoother):
        t = smoother.knot_times_
        n = t.size
        # each measurement goes to the nearest knot (within half a knot interval)
        k = np.clip(np.searchsorted(t, t_meas), 1, n - 1)
        k = np.where(np.abs(t[k - 1] - t_meas) < np.abs(t[k] - t_meas), k - 1, k)
        ok = np.abs(t[k] - t_meas) <= 0.5 * np.median(np.diff(t))
        target = np.zeros((n, 3))
        weight = np.zeros((n, 3))
        target[k[ok]] = p_meas[ok]
        weight[k[ok]] = 1.0 / sigma  # rows without a measurement get weight 0

        def evaluate(ev, jacobians):
            q = ev.q
            r = np.empty((q.shape[0], 3))
            J = np.zeros((q.shape[0], 3, problem.nx)) if jacobians else None
            for i, qk in enumerate(q):
                if jacobians:
                    pin.computeJointJacobians(model, data, qk)
                    pin.updateFramePlacements(model, data)
                    J[i, :, problem.slices["q"]] = pin.getFrameJacobian(model, data, fid,
                                                                        pin.LOCAL_WORLD_ALIGNED)[:3]
                else:
                    pin.framesForwardKinematics(model, data, qk)
                r[i] = data.oMf[fid].translation
            return Residual(r - ev.rows(target), J, w=ev.rows(weight))

        return Term("mocap_" + frame, "knot", "measurement", evaluate)

    return make


def main():
    robot = load_robot("z1")
    sim = simulate(robot, duration=4.0, rate=1000, noise=0.01, seed=0)
    frame = robot.model.frames[-1].name
    t_true = sim.truth_log.t[::20]
    p_true = frame_positions(robot, frame, np.asarray(sim.truth_log.q)[::20])
    p_meas = p_true + 1e-3 * np.random.default_rng(0).standard_normal(p_true.shape)

    plain = JointSmoother(robot).fit(sim.log)
    term = mocap_term(robot, frame, t_true, p_meas, 1e-3)
    with_mocap = JointSmoother(robot, extra_terms=[term]).fit(sim.log)
    for name, sm in (("encoders + efforts", plain), ("+ motion capture", with_mocap)):
        p = frame_positions(robot, frame, sm.states_[0])
        err = p - frame_positions(robot, frame, np.asarray(sim.truth_log.q)[:: sm.knot_stride])
        print(f"{name:20s} end-effector position RMSE {1e3 * np.sqrt(np.mean(err ** 2)):.3f} mm")
    # the same term in GTSAM: one CustomFactor per knot, the graph error equals the native cost
    sm = with_mocap
    gp = GtsamProblem(sm.problem_, tuple(b[:20] for b in sm.states_), sm.result_.theta)
    print("GTSAM factors:", gp.graph.size(), "— graph error", f"{gp.cost():.6g}")


if __name__ == "__main__":
    main()
