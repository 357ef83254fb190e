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
                cv[:, s], ca[:, s] = _mv(PRt, vv), _mv(PRt, aa)
                if jacobians:
                    P, Rt = self._plane(c), np.transpose(g[fa]["R"], (0, 2, 1))
                    Jang = g[fa]["Jang_L"]
                    out.cv_q[:, s] = PRt @ diff[2] + P @ (_skew(_mv(Rt, vv)) @ Jang)
                    out.cv_v[:, s] = PRt @ diff[3]
                    out.ca_q[:, s] = PRt @ diff[4] + P @ (_skew(_mv(Rt, aa)) @ Jang)
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
        Sp, Sw, Swd, Svp = _skew(p), _skew(w), _skew(wd), _skew(vp)
        Jp = dA_da[:, :3] - Sp @ dA_da[:, 3:]  # ∂p/∂q = ∂v_p/∂v = the LWA linear Jacobian
        vp_q = dV_dq[:, :3] - Sp @ dV_dq[:, 3:] + Sw @ Jp
        acc_q = dA_dq[:, :3] - Sp @ dA_dq[:, 3:] + Swd @ Jp + Sw @ vp_q - Svp @ dV_dq[:, 3:]
        acc_v = dA_dv[:, :3] - Sp @ dA_dv[:, 3:] + Sw @ Jp - Svp @ dA_da[:, 3:]
        return vp, acc, vp_q, Jp, acc_q, acc_v, Jp

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
        g = self._gather(q, level="force")
        for c, (fa, fb), o in zip(self.closures, self.fids, self.offsets, strict=False):
            s = slice(o, o + c.rows)
            lk = lam[:, s]
            for sign, fid in ((-1.0, fa), (1.0, fb)):
                gf = g[fid]
                JW, p = gf["JW"], gf["p"]
                dF = None
                if c.type == "6d":
                    F = sign * lk
                    G = sign * np.transpose(JW, (0, 2, 1))
                else:
                    if c.type == "point3d":
                        Pm = np.broadcast_to(np.eye(3), (n, 3, 3))
                    else:
                        Pm = g[fa]["R"] @ self._plane(c).T  # (N, 3, 2)
                    f = _mv(Pm, lk)
                    F = sign * np.concatenate([f, np.cross(p, f)], axis=1)
                    JL = gf["JL"]
                    G = sign * np.transpose(JL, (0, 2, 1)) @ Pm  # (N, nv, rows)
                    if jacobians:
                        # dF/dq = (df, p × df − f × dp), dp = J_lin^LWA (frame), df from R_a (planar)
                        df = np.zeros((n, 3, nv))
                        if c.type == "planar":
                            u = lk @ self._plane(c)  # (N, 3): P λ in frame a
                            df = -g[fa]["R"] @ _skew(u) @ g[fa]["Jang_L"]
                        dF = sign * np.concatenate([df, _skew(p) @ df - _skew(f) @ JL], axis=1)
                tau += np.einsum("nki,nk->ni", JW, F)
                if jacobians:
                    dl[:, :, s] += G
                    # ∂(JᵀF)/∂q_j at column i: (S_j × S_i)·F for j supporting i (F held); with
                    # S = (v, ω): ω_j·(v_i × f) + v_j·(ω_i × f) + ω_j·(ω_i × n) for F = (f, n)
                    lin, ang = np.transpose(JW[:, :3], (0, 2, 1)), np.transpose(JW[:, 3:], (0, 2, 1))
                    fl, fn = F[:, None, :3], F[:, None, 3:]
                    vxf, wxf, wxn = np.cross(lin, fl), np.cross(ang, fl), np.cross(ang, fn)
                    Mji = ang @ np.transpose(vxf, (0, 2, 1)) + lin @ np.transpose(wxf, (0, 2, 1)) \
                        + ang @ np.transpose(wxn, (0, 2, 1))
                    dq += np.transpose(Mji * self._anc[None], (0, 2, 1))
                    if dF is not None:
                        dq += np.transpose(JW, (0, 2, 1)) @ dF
        return tau, dq, dl


def _mv(M: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Batched matrix–vector product (N, a, b) · (N, b) → (N, a)."""
    return np.einsum("nab,nb->na", M, x)
