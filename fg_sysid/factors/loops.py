"""Loop-closure residuals and the closure forces' generalized force, with analytic Jacobians (issue 11).

A closed kinematic chain is its spanning tree plus closures: two frames a, b of the tree coincide
(`fg_sysid.robots.loops.LoopClosure`). The holonomic constraint φ(q) = 0 holds at three levels
(paper 004 eqs. 16–18 for the position level; its time derivatives give the velocity and acceleration
levels, eqs. 19–20, which the estimator imposes as separate constraints so that no Baumgarte term is
needed at the solution):

* position    φ(q)                                       [m | rad]
* velocity    φ_v(q, v) = G(q) v                         [m/s | rad/s]
* acceleration φ_a(q, v, a) = G(q) a + Ġ(q, v) v        [m/s² | rad/s²]

and the closure force λ (one component per velocity row) enters the dynamics as the generalized
force τ_c = Σ G(q)ᵀ λ (paper 004 eq. 21: M a + h − Gᵀλ = S τ). Per type (Pinocchio conventions; WORLD
= spatial quantities at the world origin in world axes, LWA = at the frame origin in world axes):

* ``6d``: φ = log₆(ᵃMᵦ) (Pinocchio's [linear; angular]); G = J_b^W − J_a^W, so φ_v and φ_a are the
  relative spatial velocity and acceleration (WORLD; zero exactly when ᵃMᵦ is constant); λ is a wrench
  at the world origin in world axes acting on b (and −λ on a).
* ``point3d``: φ = p_b − p_a (world); G = J_b,lin^LWA − J_a,lin^LWA; φ_a the difference of the origins'
  classical accelerations (spatial linear acceleration + ω × v); λ a world force on b at p_b (−λ on a
  at p_a).
* ``planar`` (axis n of frame a; P the two other axes of a): φ = Pᵀ R_aᵀ (p_b − p_a);
  φ_v = Pᵀ R_aᵀ (v_b − v_a), φ_a = Pᵀ R_aᵀ (acc_b − acc_a) — the exact time derivatives of φ for a
  planar mechanism (rotations about n only, origins' offset along n); λ the in-plane force R_a P λ.

Jacobians are w.r.t. tangent perturbations q ⊕ δq, v, a and λ, from Pinocchio's frame Jacobians and
kinematics derivatives (`computeForwardKinematicsDerivatives`, `getFrameVelocityDerivatives`,
`getFrameAccelerationDerivatives`, `Jlog6`); ∂(Jᵀ F)/∂q from ∂S_i/∂q_j = S_j × S_i (j supporting i).
tests/test_loops_factors.py checks every Jacobian against central differences.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from ..robots.loops import LoopClosure

_AXIS = {"x": 0, "y": 1, "z": 2}
WORLD, LWA, LOCAL = pin.ReferenceFrame.WORLD, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED, pin.ReferenceFrame.LOCAL


def _skew(w: np.ndarray) -> np.ndarray:
    """(..., 3) → (..., 3, 3) with skew(w) u = w × u."""
    w = np.asarray(w, float)
    S = np.zeros(w.shape[:-1] + (3, 3))
    S[..., 0, 1], S[..., 0, 2] = -w[..., 2], w[..., 1]
    S[..., 1, 0], S[..., 1, 2] = w[..., 2], -w[..., 0]
    S[..., 2, 0], S[..., 2, 1] = -w[..., 1], w[..., 0]
    return S


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


class LoopClosures:
    """The closures of a tree model, evaluated batched over knots on a private Pinocchio data.

    Args:
        model: the tree's Pinocchio model (only its kinematics are used: not modified).
        closures: `LoopClosure`s whose frames exist in ``model``.
    """

    def __init__(self, model: pin.Model, closures):
        self.model = model
        self.data = model.createData()
        self.closures = tuple(closures)
        if not self.closures:
            raise ValueError("LoopClosures needs at least one closure")
        self.fids = []
        for c in self.closures:
            if not isinstance(c, LoopClosure):
                raise TypeError(f"expected LoopClosure, got {type(c).__name__}")
            ids = []
            for f in c.frames:
                if not model.existFrame(f):
                    raise ValueError(f"loop {c.name!r}: frame {f!r} is not in the model")
                ids.append(model.getFrameId(f))
            self.fids.append(tuple(ids))
        self.rows = [c.rows for c in self.closures]
        self.m = int(sum(self.rows))
        self.offsets = np.concatenate([[0], np.cumsum(self.rows)]).astype(int)
        # anc[j, i]: velocity column j belongs to a joint supporting (or equal to) column i's joint
        nv = model.nv
        joint_of = np.empty(nv, int)
        for jid in range(1, model.njoints):
            jm = model.joints[jid]
            joint_of[jm.idx_v: jm.idx_v + jm.nv] = jid
        self._anc = np.zeros((nv, nv), bool)
        for i in range(nv):
            sup = set(model.supports[int(joint_of[i])])
            for j in range(nv):
                self._anc[j, i] = int(joint_of[j]) in sup

    @property
    def nv(self) -> int:
        return self.model.nv

    # ------------------------------------------------------------------ position level
    def position(self, q, jacobians: bool = True):
        """φ(q) (N, m) and ∂φ/∂q (N, m, nv) (see the module docstring for each type's rows)."""
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
                    J[k, s] = P @ (Ra.T @ Jd + _skew(Ra.T @ d) @ Jang)
        return r, J

    @staticmethod
    def _plane(c: LoopClosure) -> np.ndarray:
        """(2, 3): the two in-plane axes (rows) of a planar closure, in frame a."""
        keep = [i for i in range(3) if i != _AXIS[c.axis]]
        return np.eye(3)[keep]

    # ------------------------------------------------------------------ velocity and acceleration levels
    def motion(self, q, v, a, jacobians: bool = True) -> LoopMotion:
        """φ_v = G v and φ_a = G a + Ġ v (N, m) with their Jacobians (see `LoopMotion`)."""
        q, v, a = (np.atleast_2d(np.asarray(x, float)) for x in (q, v, a))
        n, nv, m = q.shape[0], self.nv, self.m
        cv, ca = np.empty((n, m)), np.empty((n, m))
        out = LoopMotion(cv, ca)
        if jacobians:
            out.cv_q, out.cv_v = np.zeros((n, m, nv)), np.zeros((n, m, nv))
            out.ca_q, out.ca_v, out.ca_a = (np.zeros((n, m, nv)) for _ in range(3))
        model, data = self.model, self.data
        for k in range(n):
            if jacobians:
                pin.computeForwardKinematicsDerivatives(model, data, q[k], v[k], a[k])
            else:
                pin.forwardKinematics(model, data, q[k], v[k], a[k])
            pin.updateFramePlacements(model, data)
            for c, (fa, fb), o in zip(self.closures, self.fids, self.offsets, strict=False):
                s = slice(o, o + c.rows)
                if c.type == "6d":
                    vals = [self._spatial(fid, jacobians) for fid in (fa, fb)]
                else:
                    vals = [self._point(fid, jacobians) for fid in (fa, fb)]
                diff = [None if x is None else y - x for x, y in zip(vals[0], vals[1], strict=True)]
                vv, aa = diff[0], diff[1]
                if c.type == "planar":
                    P = self._plane(c)
                    Ra = data.oMf[fa].rotation
                    cv[k, s], ca[k, s] = P @ Ra.T @ vv, P @ Ra.T @ aa
                    if jacobians:
                        Jang = pin.getFrameJacobian(model, data, fa, LOCAL)[3:]
                        out.cv_q[k, s] = P @ (Ra.T @ diff[2] + _skew(Ra.T @ vv) @ Jang)
                        out.cv_v[k, s] = P @ Ra.T @ diff[3]
                        out.ca_q[k, s] = P @ (Ra.T @ diff[4] + _skew(Ra.T @ aa) @ Jang)
                        out.ca_v[k, s] = P @ Ra.T @ diff[5]
                        out.ca_a[k, s] = P @ Ra.T @ diff[6]
                    continue
                cv[k, s], ca[k, s] = vv, aa
                if jacobians:
                    out.cv_q[k, s], out.cv_v[k, s] = diff[2], diff[3]
                    out.ca_q[k, s], out.ca_v[k, s], out.ca_a[k, s] = diff[4], diff[5], diff[6]
        return out

    def _spatial(self, fid: int, jacobians: bool):
        """WORLD spatial velocity and acceleration of frame ``fid`` (same as its joint's) + derivatives:
        (V, A, dV/dq, dV/dv, dA/dq, dA/dv, dA/da)."""
        model, data = self.model, self.data
        V = pin.getFrameVelocity(model, data, fid, WORLD).vector
        A = pin.getFrameAcceleration(model, data, fid, WORLD).vector
        if not jacobians:
            return V, A, None, None, None, None, None
        dV_dq, dA_dq, dA_dv, dA_da = pin.getFrameAccelerationDerivatives(model, data, fid, WORLD)
        return V, A, dV_dq, dA_da, dA_dq, dA_dv, dA_da

    def _point(self, fid: int, jacobians: bool):
        """Velocity and classical acceleration of frame ``fid``'s origin p in world axes + derivatives
        (same tuple layout as `_spatial`), from the WORLD spatial quantities (v_O, ω), (a_O, ω̇):
        v_p = v_O + ω × p, acc_p = a_O + ω̇ × p + ω × v_p (Pinocchio's WORLD kinematics derivatives;
        its LOCAL_WORLD_ALIGNED velocity derivatives are not those of the point velocity)."""
        model, data = self.model, self.data
        V = pin.getFrameVelocity(model, data, fid, WORLD)
        A = pin.getFrameAcceleration(model, data, fid, WORLD)
        p = data.oMf[fid].translation
        w, wd = V.angular, A.angular
        vp = V.linear + np.cross(w, p)
        acc = A.linear + np.cross(wd, p) + np.cross(w, vp)
        if not jacobians:
            return vp, acc, None, None, None, None, None
        dV_dq, dA_dq, dA_dv, dA_da = pin.getFrameAccelerationDerivatives(model, data, fid, WORLD)
        Jp = pin.getFrameJacobian(model, data, fid, LWA)[:3]  # ∂p/∂q and ∂v_p/∂v
        Sp, Sw, Swd, Svp = _skew(p), _skew(w), _skew(wd), _skew(vp)
        vp_q = dV_dq[:3] - Sp @ dV_dq[3:] + Sw @ Jp
        acc_q = dA_dq[:3] - Sp @ dA_dq[3:] + Swd @ Jp + Sw @ vp_q - Svp @ dV_dq[3:]
        acc_v = dA_dv[:3] - Sp @ dA_dv[3:] + Sw @ Jp - Svp @ dA_da[3:]
        return vp, acc, vp_q, Jp, acc_q, acc_v, Jp.copy()

    # ------------------------------------------------------------------ closure forces
    def generalized_force(self, q, lam, jacobians: bool = True):
        """τ_c = Σ Gᵀλ (N, nv) [N·m | N], ∂τ_c/∂q (N, nv, nv) and ∂τ_c/∂λ = Gᵀ (N, nv, m).

        ``lam`` (N, m): per closure its rows (6d: wrench at the world origin [N, N·m]; point3d: world
        force [N]; planar: in-plane force in frame a's axes [N])."""
        q = np.atleast_2d(np.asarray(q, float))
        lam = np.atleast_2d(np.asarray(lam, float))
        n, nv, m = q.shape[0], self.nv, self.m
        tau = np.zeros((n, nv))
        dq = np.zeros((n, nv, nv)) if jacobians else None
        dl = np.zeros((n, nv, m)) if jacobians else None
        model, data = self.model, self.data
        anc = self._anc
        for k in range(n):
            pin.computeJointJacobians(model, data, q[k])
            pin.updateFramePlacements(model, data)
            for c, (fa, fb), o in zip(self.closures, self.fids, self.offsets, strict=False):
                s = slice(o, o + c.rows)
                lk = lam[k, s]
                for sign, fid in ((-1.0, fa), (1.0, fb)):
                    JW = pin.getFrameJacobian(model, data, fid, WORLD)
                    p = data.oMf[fid].translation
                    if c.type == "6d":
                        F = sign * lk
                        dF = None
                        G = sign * JW.T
                    else:
                        if c.type == "point3d":
                            f, Pm = lk, np.eye(3)
                        else:
                            Ra = data.oMf[fa].rotation
                            Pm = Ra @ self._plane(c).T
                            f = Pm @ lk
                        F = sign * np.concatenate([f, np.cross(p, f)])
                        JL = pin.getFrameJacobian(model, data, fid, LWA)
                        G = sign * JL[:3].T @ Pm  # (nv, rows)
                        if jacobians:
                            # dF/dq = (df, p × df − f × dp), dp = J_lin^LWA (frame), df from R_a (planar)
                            df = np.zeros((3, nv))
                            if c.type == "planar":
                                Jang_a = pin.getFrameJacobian(model, data, fa, LOCAL)[3:]
                                df = -Ra @ _skew(self._plane(c).T @ lk) @ Jang_a
                            dF = sign * np.vstack([df, _skew(p) @ df - _skew(f) @ JL[:3]])
                    tau[k] += JW.T @ F
                    if jacobians:
                        dl[k, :, s] += G
                        # ∂(JᵀF)/∂q_j at column i: (S_j × S_i)·F for j supporting i (F held)
                        lin, ang = JW[:3], JW[3:]
                        fl, fa_ = F[:3], F[3:]
                        # (S_j × S_i) = (ω_j × v_i + v_j × ω_i, ω_j × ω_i); dot with (fl, fa_)
                        #   ω_j × v_i · fl = ω_j · (v_i × fl); v_j × ω_i · fl = v_j · (ω_i × fl);
                        #   ω_j × ω_i · fa = ω_j · (ω_i × fa)
                        vxf = np.cross(lin.T, fl)  # (nv, 3): v_i × fl
                        wxf = np.cross(ang.T, fl)
                        wxn = np.cross(ang.T, fa_)
                        M = ang.T @ vxf.T + lin.T @ wxf.T + ang.T @ wxn.T  # [j, i]
                        dq[k] += (M * anc).T
                        if dF is not None:
                            dq[k] += JW.T @ dF
        return tau, dq, dl
