"""Closure kinematics of a tree model with loops (issue 11): the one implementation.

A closed kinematic chain is its spanning tree plus closures: two frames a, b of the tree coincide
(`fg_sysid.robots.loops.LoopClosure`). The holonomic constraint φ(q) = 0 holds at three levels
(paper 004 eqs. 16–18 for the position level; its time derivatives give the velocity and acceleration
levels, eqs. 19–20; paper 000 eqs. 4–6):

* position    φ(q)                                       [m | rad]
* velocity    φ_v(q, v) = G(q) v                         [m/s | rad/s]
* acceleration φ_a(q, v, a) = G(q) a + Ġ(q, v) v        [m/s² | rad/s²]

Per type (Pinocchio conventions; WORLD = spatial quantities at the world origin in world axes, LWA = at
the frame origin in world axes):

* ``6d``: φ = log₆(ᵃMᵦ) (Pinocchio's [linear; angular]); G = J_b^W − J_a^W, so φ_v and φ_a are the
  relative spatial velocity and acceleration (WORLD; zero exactly when ᵃMᵦ is constant).
* ``point3d``: φ = p_b − p_a (world); G = J_b,lin^LWA − J_a,lin^LWA; φ_a the difference of the origins'
  classical accelerations (spatial linear acceleration + ω × v).
* ``planar`` (axis n of frame a; P the two other axes of a): φ = Pᵀ R_aᵀ (p_b − p_a) (the out-of-plane
  row is identically zero for a planar linkage and is dropped so that G has full row rank);
  φ_v = Pᵀ R_aᵀ (v_b − v_a), φ_a = Pᵀ R_aᵀ (acc_b − acc_a) — the exact time derivatives of φ for a
  planar mechanism (rotations about n only, origins' offset along n).

`ClosureKinematics` evaluates these batched over knots with their Jacobians w.r.t. tangent perturbations
q ⊕ δq, v, a (Pinocchio's frame Jacobians and kinematics derivatives `computeForwardKinematicsDerivatives`,
`getFrameAccelerationDerivatives`, `Jlog6`); ``position`` gives the exact ∂φ/∂q everywhere (the planar
term with ∂R_a/∂q multiplies the gap and vanishes only on the constraint manifold; ``manifold=True``
drops it). On top of them, for one configuration: `ClosureKinematics.residual`, `jacobian` (the manifold
form, which the closure IK and G use), ``jdot_v`` (Ġ v = φ_a at a = 0), the closure
IK ``solve_passive`` (Gauss–Newton on the dependent joints, paper 000 eq. 18, q_u = Γ(q_a)),
``dependent_map`` G = [I; −J_u⁻¹ J_a] and ``complete`` (paper 000 eqs. 19–22: v = G v_a,
a = G a_a + γ with γ_u = −J_u⁻¹ J̇ v).

Users: the MuJoCo and in-class truth (`datasets/mujoco_loops.py`, `datasets/constrained_sim.py`), the
constraint-elimination baseline (`estimation/loop_baseline.py`) and, through
`fg_sysid.factors.loops.LoopClosures` (which adds the closure forces' generalized force Gᵀλ), the fixed-
and floating-base estimators. tests/test_loops_factors.py checks every Jacobian against central
differences.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from .loops import LoopClosure

_AXIS = {"x": 0, "y": 1, "z": 2}
WORLD, LWA, LOCAL = pin.ReferenceFrame.WORLD, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED, pin.ReferenceFrame.LOCAL


class ClosureError(ValueError):
    """A loop cannot be closed (singular linkage, IK failure), names a frame the model does not have, or is
    of a type the caller does not support."""


def skew(w: np.ndarray) -> np.ndarray:
    """(..., 3) → (..., 3, 3) with skew(w) u = w × u."""
    w = np.asarray(w, float)
    S = np.zeros(w.shape[:-1] + (3, 3))
    S[..., 0, 1], S[..., 0, 2] = -w[..., 2], w[..., 1]
    S[..., 1, 0], S[..., 1, 2] = w[..., 2], -w[..., 0]
    S[..., 2, 0], S[..., 2, 1] = -w[..., 1], w[..., 0]
    return S


def mv(M: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Batched matrix–vector product (N, a, b) · (N, b) → (N, a)."""
    return np.einsum("nab,nb->na", M, x)


@dataclass
class LoopMotion:
    """Velocity and acceleration closure residuals of N knots (m = total rows of all closures).

    cv (N, m); cv_q, cv_v (N, m, nv); ca (N, m); ca_q, ca_v, ca_a (N, m, nv) (None without Jacobians)."""

    cv: np.ndarray
    ca: np.ndarray
    cv_q: np.ndarray | None = None
    cv_v: np.ndarray | None = None
    ca_q: np.ndarray | None = None
    ca_v: np.ndarray | None = None
    ca_a: np.ndarray | None = None


class ClosureKinematics:
    """The closures of a tree model, evaluated batched over knots on a private Pinocchio data.

    Args:
        model: the tree's Pinocchio model (fixed or floating base; only its kinematics are used: not
            modified).
        closures: `LoopClosure`s whose frames exist in ``model`` (at least one).
        types: closure types the caller supports (None: all); another type raises `ClosureError`
            (the MuJoCo truth and the elimination baseline take ``("point3d", "planar")``).
    """

    def __init__(self, model: pin.Model, closures, types=None):
        self.model = model
        self.data = model.createData()
        self.closures = tuple(closures)
        if not self.closures:
            raise ClosureError("ClosureKinematics needs at least one closure")
        self.fids = []
        for c in self.closures:
            if not isinstance(c, LoopClosure):
                raise TypeError(f"expected LoopClosure, got {type(c).__name__}")
            if types is not None and c.type not in types:
                raise ClosureError(f"loop {c.name!r}: closure type {c.type!r} is not supported here "
                                   f"({' | '.join(types)})")
            ids = []
            for f in c.frames:
                if not model.existFrame(f):
                    raise ClosureError(f"loop {c.name!r}: frame {f!r} is not in the model")
                ids.append(model.getFrameId(f))
            self.fids.append(tuple(ids))
        self.rows = [c.rows for c in self.closures]
        self.m = int(sum(self.rows))
        self.offsets = np.concatenate([[0], np.cumsum(self.rows)]).astype(int)

    @property
    def nv(self) -> int:
        return self.model.nv

    # ------------------------------------------------------------------ position level
    def position(self, q, jacobians: bool = True, manifold: bool = False):
        """φ(q) (N, m) and ∂φ/∂q (N, m, nv) (see the module docstring for each type's rows).

        ``manifold``: the planar rows' Jacobian without the term in ∂R_a/∂q, which multiplies the gap
        R_aᵀ(p_b − p_a) and so vanishes on the constraint manifold: Pᵀ R_aᵀ (J_b − J_a) (what the closure
        IK and the elimination map G = [I; −J_u⁻¹ J_a] use; the estimator's terms use the exact one)."""
        q = np.atleast_2d(np.asarray(q, float))
        n, nv = q.shape[0], self.nv
        r = np.empty((n, self.m))
        J = np.zeros((n, self.m, nv)) if jacobians else None
        model, data = self.model, self.data
        for k in range(n):
            if jacobians:
                pin.computeJointJacobians(model, data, q[k])
            else:
                pin.forwardKinematics(model, data, q[k])
            pin.updateFramePlacements(model, data)
            for c, (fa, fb), o in zip(self.closures, self.fids, self.offsets, strict=False):
                oMa, oMb = data.oMf[fa], data.oMf[fb]
                s = slice(o, o + c.rows)
                if c.type == "6d":
                    aMb = oMa.actInv(oMb)
                    r[k, s] = pin.log6(aMb).vector
                    if jacobians:
                        Ja = pin.getFrameJacobian(model, data, fa, LOCAL)
                        Jb = pin.getFrameJacobian(model, data, fb, LOCAL)
                        J[k, s] = pin.Jlog6(aMb) @ (Jb - aMb.inverse().action @ Ja)
                    continue
                d = oMb.translation - oMa.translation
                if c.type == "point3d":
                    r[k, s] = d
                    if jacobians:
                        J[k, s] = (pin.getFrameJacobian(model, data, fb, LWA)[:3]
                                   - pin.getFrameJacobian(model, data, fa, LWA)[:3])
                    continue
                P = self._plane(c)
                Ra = oMa.rotation
                r[k, s] = P @ Ra.T @ d
                if jacobians:
                    Jd = (pin.getFrameJacobian(model, data, fb, LWA)[:3]
                          - pin.getFrameJacobian(model, data, fa, LWA)[:3])
                    Jang = pin.getFrameJacobian(model, data, fa, LOCAL)[3:]
                    J[k, s] = P @ (Ra.T @ Jd) if manifold else P @ (Ra.T @ Jd + skew(Ra.T @ d) @ Jang)
        return r, J

    @staticmethod
    def _plane(c: LoopClosure) -> np.ndarray:
        """(2, 3): the two in-plane axes (rows) of a planar closure, in frame a."""
        keep = [i for i in range(3) if i != _AXIS[c.axis]]
        return np.eye(3)[keep]

    # ------------------------------------------------------------------ velocity and acceleration levels
    def _frames(self) -> list[int]:
        return sorted({f for pair in self.fids for f in pair})

    def _gather(self, q, v=None, a=None, jacobians: bool = True, level: str = "motion") -> dict:
        """Per-knot Pinocchio quantities of every closure frame, stacked over knots (frame id → dict of
        (N, ...) arrays): placements (p, R), WORLD velocity/acceleration and their derivatives (level
        ``motion``) or WORLD / LWA / LOCAL Jacobians (level ``force``)."""
        model, data = self.model, self.data
        n = q.shape[0]
        frames = self._frames()
        keys = ["p", "R"]
        if level == "motion":
            keys += ["V", "A"] + (["dV_dq", "dA_dq", "dA_dv", "dA_da", "Jang_L"] if jacobians else [])
        else:
            keys += ["JW", "JL", "Jang_L"]
        out = {f: {k: [] for k in keys} for f in frames}
        for k in range(n):
            if level == "motion":
                if jacobians:
                    pin.computeForwardKinematicsDerivatives(model, data, q[k], v[k], a[k])
                else:
                    pin.forwardKinematics(model, data, q[k], v[k], a[k])
            else:
                pin.computeJointJacobians(model, data, q[k])
            pin.updateFramePlacements(model, data)
            for f in frames:
                o = out[f]
                M = data.oMf[f]
                o["p"].append(M.translation.copy())
                o["R"].append(M.rotation.copy())
                if level == "motion":
                    o["V"].append(pin.getFrameVelocity(model, data, f, WORLD).vector)
                    o["A"].append(pin.getFrameAcceleration(model, data, f, WORLD).vector)
                    if jacobians:
                        d = pin.getFrameAccelerationDerivatives(model, data, f, WORLD)
                        for key, val in zip(("dV_dq", "dA_dq", "dA_dv", "dA_da"), d, strict=True):
                            o[key].append(val)
                        o["Jang_L"].append(pin.getFrameJacobian(model, data, f, LOCAL)[3:])
                else:
                    o["JW"].append(pin.getFrameJacobian(model, data, f, WORLD))
                    o["JL"].append(pin.getFrameJacobian(model, data, f, LWA)[:3])
                    o["Jang_L"].append(pin.getFrameJacobian(model, data, f, LOCAL)[3:])
        return {f: {k: np.array(vals) for k, vals in o.items()} for f, o in out.items()}

    def motion(self, q, v, a, jacobians: bool = True) -> LoopMotion:
        """φ_v = G v and φ_a = G a + Ġ v (N, m) with their Jacobians (see `LoopMotion`)."""
        q, v, a = (np.atleast_2d(np.asarray(x, float)) for x in (q, v, a))
        n, nv, m = q.shape[0], self.nv, self.m
        cv, ca = np.empty((n, m)), np.empty((n, m))
        out = LoopMotion(cv, ca)
        if jacobians:
            out.cv_q, out.cv_v = np.zeros((n, m, nv)), np.zeros((n, m, nv))
            out.ca_q, out.ca_v, out.ca_a = (np.zeros((n, m, nv)) for _ in range(3))
        g = self._gather(q, v, a, jacobians, "motion")
        point = {}
        for c, (fa, fb), o in zip(self.closures, self.fids, self.offsets, strict=False):
            s = slice(o, o + c.rows)
            if c.type == "6d":
                vals = [self._spatial(g[f], jacobians) for f in (fa, fb)]
            else:
                vals = [point.setdefault(f, self._point(g[f], jacobians)) for f in (fa, fb)]
            diff = [None if x is None else y - x for x, y in zip(vals[0], vals[1], strict=True)]
            vv, aa = diff[0], diff[1]
            if c.type == "planar":
                PRt = self._plane(c)[None] @ np.transpose(g[fa]["R"], (0, 2, 1))  # (N, 2, 3)
                cv[:, s], ca[:, s] = mv(PRt, vv), mv(PRt, aa)
                if jacobians:
                    P, Rt = self._plane(c), np.transpose(g[fa]["R"], (0, 2, 1))
                    Jang = g[fa]["Jang_L"]
                    out.cv_q[:, s] = PRt @ diff[2] + P @ (skew(mv(Rt, vv)) @ Jang)
                    out.cv_v[:, s] = PRt @ diff[3]
                    out.ca_q[:, s] = PRt @ diff[4] + P @ (skew(mv(Rt, aa)) @ Jang)
                    out.ca_v[:, s] = PRt @ diff[5]
                    out.ca_a[:, s] = PRt @ diff[6]
                continue
            cv[:, s], ca[:, s] = vv, aa
            if jacobians:
                out.cv_q[:, s], out.cv_v[:, s] = diff[2], diff[3]
                out.ca_q[:, s], out.ca_v[:, s], out.ca_a[:, s] = diff[4], diff[5], diff[6]
        return out

    @staticmethod
    def _spatial(g: dict, jacobians: bool):
        """WORLD spatial velocity and acceleration of a frame (same as its joint's) + derivatives:
        (V, A, dV/dq, dV/dv, dA/dq, dA/dv, dA/da), stacked over knots."""
        if not jacobians:
            return g["V"], g["A"], None, None, None, None, None
        return g["V"], g["A"], g["dV_dq"], g["dA_da"], g["dA_dq"], g["dA_dv"], g["dA_da"]

    @staticmethod
    def _point(g: dict, jacobians: bool):
        """Velocity and classical acceleration of a frame's origin p in world axes + derivatives (same
        tuple layout as `_spatial`), from the WORLD spatial quantities (v_O, ω), (a_O, ω̇):
        v_p = v_O + ω × p, acc_p = a_O + ω̇ × p + ω × v_p (Pinocchio's WORLD kinematics derivatives;
        its LOCAL_WORLD_ALIGNED velocity derivatives are not those of the point velocity)."""
        p, V, A = g["p"], g["V"], g["A"]
        w, wd = V[:, 3:], A[:, 3:]
        vp = V[:, :3] + np.cross(w, p)
        acc = A[:, :3] + np.cross(wd, p) + np.cross(w, vp)
        if not jacobians:
            return vp, acc, None, None, None, None, None
        dV_dq, dA_dq, dA_dv, dA_da = g["dV_dq"], g["dA_dq"], g["dA_dv"], g["dA_da"]
        Sp, Sw, Swd, Svp = skew(p), skew(w), skew(wd), skew(vp)
        Jp = dA_da[:, :3] - Sp @ dA_da[:, 3:]  # ∂p/∂q = ∂v_p/∂v = the LWA linear Jacobian
        vp_q = dV_dq[:, :3] - Sp @ dV_dq[:, 3:] + Sw @ Jp
        acc_q = dA_dq[:, :3] - Sp @ dA_dq[:, 3:] + Swd @ Jp + Sw @ vp_q - Svp @ dV_dq[:, 3:]
        acc_v = dA_dv[:, :3] - Sp @ dA_dv[:, 3:] + Sw @ Jp - Svp @ dA_da[:, 3:]
        return vp, acc, vp_q, Jp, acc_q, acc_v, Jp

    # ------------------------------------------------------------------ one configuration
    def residual(self, q) -> np.ndarray:
        """φ(q) (m,) of one configuration [m | rad]."""
        return self.position(np.asarray(q, float)[None], False)[0][0]

    def jacobian(self, q) -> np.ndarray:
        """G(q) = ∂φ/∂q (m, nv) of one configuration on the constraint manifold (``position(...,
        manifold=True)``; tangent perturbations q ⊕ δq)."""
        return self.position(np.asarray(q, float)[None], manifold=True)[1][0]

    def jdot_v(self, q, v) -> np.ndarray:
        """Ġ(q, v) v (m,): the closure acceleration φ_a at a = 0 (paper 000 eq. 6: G a + Ġ v = 0)."""
        q, v = np.asarray(q, float), np.asarray(v, float)
        return self.motion(q[None], v[None], np.zeros((1, self.nv)), False).ca[0]

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

    def actuated_map(self, q, dependent_v, actuated_v) -> tuple[np.ndarray, list[int]]:
        """(G, cols): `dependent_map`'s G and the positions of the v-indices ``actuated_v`` among its
        columns, so that the actuated efforts of a generalized force τ are (Gᵀ τ)[cols] (paper 000 eq. 23)."""
        G, ind = self.dependent_map(q, dependent_v)
        pos = {int(c): i for i, c in enumerate(ind)}
        return G, [pos[int(i)] for i in actuated_v]

    def closed_trajectory(self, q, q_a, v_a, a_a, actuated_q, actuated_v, dependent_v):
        """(Q (N, nq), V, A (N, nv)) of all joints along actuated samples ``q_a, v_a, a_a`` (N, n_a): per
        sample the coordinates ``actuated_q`` set, the dependent joints (v-indices ``dependent_v``) by
        `solve_passive` continued from the previous sample (the first from ``q``), v and a by `complete`
        with the actuated velocities/accelerations at v-indices ``actuated_v`` (other independent ones 0)."""
        q = np.array(q, float)
        dep = np.asarray(dependent_v, int)
        ind = np.setdiff1d(np.arange(self.nv), dep)
        pos = {int(c): i for i, c in enumerate(ind)}
        cols = [pos[int(i)] for i in actuated_v]
        N = len(q_a)
        Q, V, A = np.empty((N, self.model.nq)), np.empty((N, self.nv)), np.empty((N, self.nv))
        for k in range(N):
            q[actuated_q] = q_a[k]
            q = self.solve_passive(q, dep)
            v_ind, a_ind = np.zeros(ind.size), np.zeros(ind.size)
            v_ind[cols], a_ind[cols] = v_a[k], a_a[k]
            Q[k] = q
            V[k], A[k], _ = self.complete(q, v_ind, a_ind, dep)
        return Q, V, A

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


#: closure types of the truth simulators and the elimination baseline (MuJoCo ``connect`` equalities)
POINT_TYPES = ("point3d", "planar")
