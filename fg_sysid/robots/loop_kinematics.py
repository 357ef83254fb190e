"""Closure kinematics of a tree model with loops (used by the MuJoCo truth and the baselines).

For a loop whose frames A and B must coincide (paper 004 Sec. III, eqs. 16–18; paper 000 eqs. 4–6):

* ``point3d``: c(q) = p_A(q) − p_B(q) ∈ R³ (world frame, m);
* ``planar`` with axis n of frame A: the two rows of R_Aᵀ (p_A − p_B) orthogonal to n (the in-plane
  gap in frame A; the out-of-plane row is identically zero for a planar linkage and is dropped so that
  the constraint Jacobian has full row rank).

J(q) = ∂c/∂q on the constraint manifold (the term with ∂R_A/∂q multiplies the gap and vanishes there),
J̇v from the frames' classical accelerations at a = 0, so that the acceleration constraint is
J a + J̇ v = 0 (paper 000 eq. 6). 6-D closures are not needed by the robots here and are refused.

`solve_passive` closes the loops by Gauss–Newton on the dependent joints (paper 000 eq. 18, q_u = Γ(q_a));
`dependent_map` returns G = [I; −J_u⁻¹ J_a] (paper 000 eqs. 19–22: v = G v_a, a = G a_a + γ with
γ_u = −J_u⁻¹ J̇ v).
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

_AXIS = {"x": 0, "y": 1, "z": 2}
_LWA = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED


class ClosureError(ValueError):
    """A loop cannot be closed (singular linkage, IK failure) or is of an unsupported type."""


def _rows(loop) -> list[int]:
    if loop.type == "point3d":
        return [0, 1, 2]
    if loop.type == "planar":
        k = _AXIS[loop.axis]
        return [i for i in range(3) if i != k]
    raise ClosureError(f"loop {loop.name!r}: closure type {loop.type!r} is not supported by the "
                       f"truth/baseline kinematics (point3d | planar)")


class ClosureKinematics:
    """Closure residual, Jacobian and J̇v of ``loops`` on a Pinocchio ``model`` (fixed or floating)."""

    def __init__(self, model: pin.Model, loops):
        self.model = model
        self.data = model.createData()
        self.loops = tuple(loops)
        self.rows = [_rows(lp) for lp in self.loops]
        self.frame_ids = []
        for lp in self.loops:
            ids = []
            for f in lp.frames:
                if not model.existFrame(f):
                    raise ClosureError(f"loop {lp.name!r}: the model has no frame {f!r}")
                ids.append(model.getFrameId(f))
            self.frame_ids.append(tuple(ids))
        self.n_rows = sum(len(r) for r in self.rows)

    def _proj(self, i: int) -> np.ndarray:
        """(rows, 3) projection of a world vector onto the closure's rows."""
        lp, rows = self.loops[i], self.rows[i]
        if lp.type == "point3d":
            return np.eye(3)
        R = self.data.oMf[self.frame_ids[i][0]].rotation
        return R.T[rows]

    def residual(self, q) -> np.ndarray:
        pin.framesForwardKinematics(self.model, self.data, q)
        out = []
        for i, (a, b) in enumerate(self.frame_ids):
            gap = self.data.oMf[a].translation - self.data.oMf[b].translation
            out.append(self._proj(i) @ gap)
        return np.concatenate(out) if out else np.zeros(0)

    def jacobian(self, q) -> np.ndarray:
        """(n_rows, nv) constraint Jacobian (exact on the constraint manifold)."""
        m, d = self.model, self.data
        pin.computeJointJacobians(m, d, q)
        pin.updateFramePlacements(m, d)
        out = []
        for i, (a, b) in enumerate(self.frame_ids):
            Ja = pin.getFrameJacobian(m, d, a, _LWA)[:3]
            Jb = pin.getFrameJacobian(m, d, b, _LWA)[:3]
            out.append(self._proj(i) @ (Ja - Jb))
        return np.vstack(out) if out else np.zeros((0, m.nv))

    def jdot_v(self, q, v) -> np.ndarray:
        """J̇(q, v) v: the closure acceleration at a = 0 (classical point accelerations, world frame)."""
        m, d = self.model, self.data
        pin.forwardKinematics(m, d, q, v, np.zeros(m.nv))
        pin.updateFramePlacements(m, d)
        out = []
        for i, (a, b) in enumerate(self.frame_ids):
            acc_a = pin.getFrameClassicalAcceleration(m, d, a, _LWA).linear
            acc_b = pin.getFrameClassicalAcceleration(m, d, b, _LWA).linear
            out.append(self._proj(i) @ (acc_a - acc_b))
        return np.concatenate(out) if out else np.zeros(0)

    # ------------------------------------------------------------------ dependent coordinates
    def solve_passive(self, q, dependent_v, tol: float = 1e-12, max_iter: int = 50,
                      max_step: float = 0.3, strict: bool = True) -> np.ndarray:
        """q with the joints at v-indices ``dependent_v`` (1-DoF joints: q index = v index + nq − nv)
        moved so that the closures hold (Gauss–Newton from ``q``, steps clipped to ``max_step`` rad so
        that the solution stays on the seed's assembly branch); ClosureError when it fails (``strict``;
        otherwise the least-squares point, for over-determined seeding)."""
        q = np.array(q, float)
        dep_q = np.asarray(dependent_v) + (self.model.nq - self.model.nv)
        for _ in range(max_iter):
            r = self.residual(q)
            if np.max(np.abs(r), initial=0.0) < tol:
                return q
            J = self.jacobian(q)[:, dependent_v]
            step, *_ = np.linalg.lstsq(J, -r, rcond=None)
            big = np.abs(step).max(initial=0.0)
            q[dep_q] += step * min(1.0, max_step / big) if big > 0 else step
        r = self.residual(q)
        if strict and np.max(np.abs(r), initial=0.0) > 1e-9:
            raise ClosureError(f"closure IK did not converge (residual {np.abs(r).max():.3g} m)")
        return q

    def dependent_map(self, q, dependent_v) -> tuple[np.ndarray, np.ndarray]:
        """(G (nv, nv − n_dep), independent v-indices): v = G v_ind on the constraint manifold."""
        nv = self.model.nv
        dep = np.asarray(dependent_v, int)
        ind = np.setdiff1d(np.arange(nv), dep)
        J = self.jacobian(q)
        Ju, Ja = J[:, dep], J[:, ind]
        if Ju.shape[0] != Ju.shape[1]:
            raise ClosureError(f"{Ju.shape[0]} closure rows for {Ju.shape[1]} dependent joints: the "
                               f"elimination needs as many as there are passive joints "
                               f"(paper 000 Assumption 1)")
        cond = np.linalg.cond(Ju)
        if not np.isfinite(cond) or cond > 1e8:
            raise ClosureError(f"closure Jacobian of the passive joints is singular (cond {cond:.3g}): "
                               f"the linkage is at a toggle position")
        G = np.zeros((nv, ind.size))
        G[ind, np.arange(ind.size)] = 1.0
        G[dep] = -np.linalg.solve(Ju, Ja)
        return G, ind

    def complete(self, q, v_ind, a_ind, dependent_v):
        """Full (q, v, a) from a closed ``q`` and independent velocities/accelerations (paper 000 eqs.
        21–22: v = G v_a, a = G a_a + γ with γ_u = −J_u⁻¹ J̇ v)."""
        G, ind = self.dependent_map(q, dependent_v)
        v = G @ v_ind
        dep = np.asarray(dependent_v, int)
        a = G @ a_ind
        if dep.size:
            Ju = self.jacobian(q)[:, dep]
            a[dep] += -np.linalg.solve(Ju, self.jdot_v(q, v))
        return v, a, G
