"""The closure forces' generalized force for the estimators, with analytic Jacobians (issue 11).

The closure kinematics (φ, φ_v, φ_a and their Jacobians, closure IK) live once, in
`fg_sysid.robots.loop_kinematics.ClosureKinematics` (see its module docstring for the three levels and
each closure type's rows). `LoopClosures` is that class plus the closure force λ (one component per
velocity row), which enters the dynamics as the generalized force τ_c = Σ G(q)ᵀ λ (paper 004 eq. 21:
M a + h − Gᵀλ = S τ):

* ``6d``: λ is a wrench at the world origin in world axes acting on b (and −λ on a);
* ``point3d``: λ a world force on b at p_b (−λ on a at p_a);
* ``planar``: λ the in-plane force R_a P λ.

∂τ_c/∂q from ∂S_i/∂q_j = S_j × S_i (j supporting i) and the frames' Jacobians; ∂τ_c/∂λ = Gᵀ.
tests/test_loops_factors.py checks every Jacobian against central differences.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from ..robots.loop_kinematics import ClosureKinematics, LoopMotion, mv, skew

__all__ = ["LoopClosures", "LoopMotion"]


class LoopClosures(ClosureKinematics):
    """`ClosureKinematics` of a tree model plus the closure forces' generalized force (the estimators'
    view of the closures; see `ClosureKinematics` for the arguments)."""

    def __init__(self, model: pin.Model, closures):
        super().__init__(model, closures)
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
                    f = mv(Pm, lk)
                    F = sign * np.concatenate([f, np.cross(p, f)], axis=1)
                    JL = gf["JL"]
                    G = sign * np.transpose(JL, (0, 2, 1)) @ Pm  # (N, nv, rows)
                    if jacobians:
                        # dF/dq = (df, p × df − f × dp), dp = J_lin^LWA (frame), df from R_a (planar)
                        df = np.zeros((n, 3, nv))
                        if c.type == "planar":
                            u = lk @ self._plane(c)  # (N, 3): P λ in frame a
                            df = -g[fa]["R"] @ skew(u) @ g[fa]["Jang_L"]
                        dF = sign * np.concatenate([df, skew(p) @ df - skew(f) @ JL], axis=1)
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
