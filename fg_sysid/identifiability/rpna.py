"""Exact structural identifiability: the Recursive Parameter Nullspace Algorithm (RPNA).

Wensing, Niemeyer, Slotine, "A Geometric Characterization of Observability in Inertial Parameter
Identification" (paper 003; see docs/identifiability.md). One outward pass over the kinematic tree
propagates, per body,

* ``V_i`` - a basis of the span of the body's attainable spatial velocities (with gravity, the span
  also contains the gravity acceleration seen in the body frame, App. F of the paper);
* ``K_i`` - a basis of the body's identifiable parameter directions;

and emits one nullspace descriptor ``N_i`` per joint: ``null(N_i)`` are the inertia transfers across
joint ``i`` that no joint-torque / external-force measurement can detect. The number of identifiable
parameter combinations is ``sum_i rank(N_i)``; the work per joint is constant, so the pass is O(N).

Conventions are Pinocchio's: spatial motion vectors are ``[linear; angular]`` and the 10 parameters
of a body are ``(m, mc_x, mc_y, mc_z, I_xx, I_xy, I_yy, I_xz, I_yz, I_zz)`` about the body (joint)
frame origin. The paper writes ``[angular; linear]``; every quantity here is the same object in the
other coordinate order, and ranks do not depend on it.

Rotors (geared motor inertia, Sec. 8 / App. I of the paper): a rotor of joint ``i`` rides on the
parent body of joint ``i`` and spins at ``n_R * qd_i`` about an axis fixed in the parent. A
rotationally symmetric rotor's mass, first moment and transverse inertia move rigidly with the
parent (they are indistinguishable from the parent's own parameters), so each rotor contributes
exactly one parameter: its inertia about the spin axis, named ``<joint>.rotor_inertia`` (kg m^2, on
the motor side; the reflected inertia / armature is ``n_R**2`` times it). Its position on the parent
does not matter for the same reason, so a rotor is described by joint, gear ratio and axis only.

Rank decisions use a relative singular-value tolerance ``rtol * max(1, sigma_max)`` on matrices whose
columns are orthonormal bases; each decision's margin (how many decades the smallest kept and the
largest dropped singular values sit from the tolerance) is recorded, and `rpna` warns when the
smallest margin is below ``warn_decades`` (near-degenerate geometry, e.g. rounded URDF angles).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import pinocchio as pin

from ..robots.model import INERTIAL_SUFFIXES

#: Preference order used to pick base parameters inside a body (the paper's table order:
#: m, mcx, mcy, mcz, Ixx, Iyy, Izz, Iyz, Ixz, Ixy, rotor), as indices into Pinocchio's order.
PAPER_TABLE_ORDER = (0, 1, 2, 3, 4, 6, 9, 8, 7, 5, 10)

DEFAULT_RTOL = 1e-8
DEFAULT_WARN_DECADES = 2.0


class IdentifiabilityWarning(UserWarning):
    """A rank decision was close to the tolerance; the count may depend on rounding of the geometry."""


# ----------------------------------------------------------------------------- spatial algebra


def _skew(x):
    return np.array([[0.0, -x[2], x[1]], [x[2], 0.0, -x[0]], [-x[1], x[0], 0.0]])


def crm(phi: np.ndarray) -> np.ndarray:
    """Motion cross-product matrix ``(phi x)`` for ``phi = [v; w]`` (Pinocchio order)."""
    v, w = phi[:3], phi[3:]
    out = np.zeros((6, 6))
    out[:3, :3] = _skew(w)
    out[:3, 3:] = _skew(v)
    out[3:, 3:] = _skew(w)
    return out


def inertia_hat(pi: np.ndarray) -> np.ndarray:
    """6x6 spatial inertia (about the frame origin, ``[linear; angular]``) of dynamic parameters ``pi``."""
    m, hx, hy, hz, ixx, ixy, iyy, ixz, iyz, izz = np.asarray(pi, float)
    S = _skew([hx, hy, hz])
    out = np.zeros((6, 6))
    out[:3, :3] = m * np.eye(3)
    out[:3, 3:] = -S
    out[3:, :3] = S
    out[3:, 3:] = [[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]]
    return out


def inertia_vee(M: np.ndarray) -> np.ndarray:
    """Inverse of `inertia_hat` for a matrix of that form."""
    S = M[3:, :3]
    return np.array([M[0, 0], S[2, 1], S[0, 2], S[1, 0],
                     M[3, 3], M[3, 4], M[4, 4], M[3, 5], M[4, 5], M[5, 5]])


_E = np.array([inertia_hat(e) for e in np.eye(10)])  # (10, 6, 6) basis of the inertia space
_VEE_IDX = (np.array([0, 5, 3, 4, 3, 3, 4, 3, 4, 5]), np.array([0, 1, 2, 0, 3, 4, 4, 5, 5, 5]))


def _vee_many(Ms: np.ndarray) -> np.ndarray:
    """Columns ``vee(M_k)`` for a stack (k, 6, 6) -> (10, k)."""
    return Ms[:, _VEE_IDX[0], _VEE_IDX[1]].T


def B_matrix(X: np.ndarray) -> np.ndarray:
    """``B(X) pi = vee(X^T hat(pi) X)``: a child's parameters seen in its parent's frame (10x10).

    ``X`` is the motion transform from parent to child coordinates (``^iX_p``)."""
    return _vee_many(np.einsum("ai,kab,bj->kij", X, _E, X))


def A_matrix(phi: np.ndarray) -> np.ndarray:
    """``A(phi) pi = vee((phi x)^T hat(pi) + hat(pi) (phi x))``: rate of the mapping condition (10x10)."""
    C = crm(phi)
    return _vee_many(np.einsum("ba,kbc->kac", C, _E) + np.einsum("kab,bc->kac", _E, C))


def M_matrix(V: np.ndarray, Phi: np.ndarray) -> np.ndarray:
    """``M(V, Phi)``: columns are gradients of the entries of ``V^T hat(pi) Phi`` (10 x cols(V)*cols(Phi))."""
    if V.shape[1] == 0:
        return np.zeros((10, 0))
    return np.einsum("ac,kab,bd->kcd", V, _E, Phi).reshape(10, -1)


# ----------------------------------------------------------------------------- rank bookkeeping


class _Ranker:
    """Range bases with a relative tolerance; records the margin of every rank decision."""

    def __init__(self, rtol: float):
        self.rtol = rtol
        self.min_kept = np.inf  # smallest kept singular value / tolerance
        self.max_dropped = 0.0  # largest dropped singular value / tolerance

    def _svd(self, A):
        U, s, Vt = np.linalg.svd(A, full_matrices=False)
        tol = self.rtol * max(1.0, s[0] if s.size else 0.0)
        r = int(np.sum(s > tol))
        if r:
            self.min_kept = min(self.min_kept, s[r - 1] / tol)
        if r < s.size:
            self.max_dropped = max(self.max_dropped, s[r] / tol)
        return U, s, Vt, r

    def orth(self, A: np.ndarray) -> np.ndarray:
        """Orthonormal basis of range(A)."""
        if A.size == 0:
            return np.zeros((A.shape[0], 0))
        U, _, _, r = self._svd(A)
        return U[:, :r]

    def row_basis(self, A: np.ndarray) -> np.ndarray:
        """Orthonormal rows spanning the row space of A."""
        if A.size == 0:
            return np.zeros((0, A.shape[1]))
        _, _, Vt, r = self._svd(A)
        return Vt[:r]

    def null(self, A: np.ndarray) -> np.ndarray:
        """Orthonormal basis of null(A) (columns)."""
        n = A.shape[1]
        if A.shape[0] == 0:
            return np.eye(n)
        _, _, Vt, r = self._svd(np.vstack([A, np.zeros((max(0, n - A.shape[0]), n))]))
        return Vt[r:].T

    def ctrb(self, mats: list[np.ndarray], V: np.ndarray) -> np.ndarray:
        """Smallest subspace containing range(V) invariant under every matrix of ``mats``."""
        Q = self.orth(V)
        while Q.shape[1]:
            Q2 = self.orth(np.hstack([Q] + [A @ Q for A in mats]))
            if Q2.shape[1] == Q.shape[1]:
                return Q2
            Q = Q2
        return Q

    @property
    def margin_decades(self) -> float:
        kept = np.log10(self.min_kept) if np.isfinite(self.min_kept) else np.inf
        dropped = -np.log10(self.max_dropped) if self.max_dropped > 0 else np.inf
        return float(min(kept, dropped))


# ----------------------------------------------------------------------------- rotors


@dataclass(frozen=True)
class Rotor:
    """A geared, rotationally symmetric motor rotor driving 1-DoF joint ``joint``.

    The rotor rides on the joint's parent body and turns at ``gear_ratio * qd`` about ``axis``
    (a direction in the parent body's frame; None = the joint's own axis at q = 0: rotation axis of a
    revolute joint, translation direction of a prismatic one). Its only parameter is its inertia about
    the spin axis, named ``<joint>.rotor_inertia``.
    """

    joint: str
    gear_ratio: float = 1.0
    axis: tuple | None = None


def default_rotors(model: pin.Model, gear_ratio: float | None = None, fallback: float = 100.0) -> list[Rotor]:
    """One rotor per 1-DoF joint, on the joint axis.

    Gear ratio: ``gear_ratio`` if given; else ``model.rotorGearRatio`` when the model carries rotor
    data (some ratio != 1 or some ``rotorInertia`` != 0; Pinocchio's defaults are ratio 1, inertia 0,
    which is what every URDF gives); else ``fallback`` (100, a typical harmonic-drive value; any ratio
    other than 1 gives the same identifiability)."""
    gr = np.asarray(model.rotorGearRatio, float)
    has_data = bool(np.any(gr != 1.0) or np.any(np.asarray(model.rotorInertia) != 0.0))
    out = []
    for j in range(1, model.njoints):
        jm = model.joints[j]
        if jm.nv != 1:
            continue
        if gear_ratio is not None:
            n = gear_ratio
        else:
            n = gr[jm.idx_v] if has_data and gr[jm.idx_v] != 0 else fallback
        out.append(Rotor(model.names[j], float(n)))
    return out


def _joint_geometry(model: pin.Model):
    """Per joint: parent, parent->child motion transform at the neutral configuration, motion subspace
    (in the joint frame) and the parent->joint placement. O(1) per joint."""
    q0 = pin.neutral(model)
    out = {}
    for j in range(1, model.njoints):
        jm = model.joints[j]
        jd = jm.createData()
        jm.calc(jd, q0)
        liMi = model.jointPlacements[j] * jd.M
        S = np.array(jd.S, dtype=float).reshape(6, jm.nv)
        out[j] = (model.parents[j], liMi.inverse().toActionMatrix(), S, liMi)
    return out


def _rotor_axis_in_parent(rotor: Rotor, liMi: pin.SE3, S: np.ndarray) -> np.ndarray:
    if rotor.axis is not None:
        a = np.asarray(rotor.axis, float)
    else:
        s = S[:, 0]
        a = liMi.rotation @ (s[3:] if np.linalg.norm(s[3:]) > 1e-12 else s[:3])
    return a / np.linalg.norm(a)


def rotor_parameter_vector(axis: np.ndarray) -> np.ndarray:
    """Dynamic parameters (10) of a unit inertia about ``axis`` through the origin, zero mass."""
    a = np.asarray(axis, float)
    return np.array([0, 0, 0, 0, a[0] ** 2, a[0] * a[1], a[1] ** 2, a[0] * a[2], a[1] * a[2], a[2] ** 2])


# ----------------------------------------------------------------------------- results


@dataclass
class BodyResult:
    """Per-body outputs of the RPNA (``dim_T = n_local - rank_N``; n_local = 10, or 11 with a rotor)."""

    name: str
    joint: str
    parent: int  # index of the parent body in `RPNAResult.bodies`, -1 for the world
    dim_V: int
    dim_K: int
    dim_T: int
    rank_N: int
    N: np.ndarray  # nullspace descriptor, orthonormal rows, (rank_N, n_local)
    has_rotor: bool = False

    def as_dict(self) -> dict:
        return {"name": self.name, "joint": self.joint, "dim_V": self.dim_V, "dim_K": self.dim_K,
                "dim_T": self.dim_T, "identifiable": self.rank_N, "rotor": self.has_rotor}


@dataclass
class BaseParameters:
    """A regrouped base-parameter set: ``beta = K @ pi``; regressors satisfy ``Y pi = Y[:, index] beta``."""

    names: list[str]
    index: np.ndarray  # columns of the full parameter vector kept as base parameters
    K: np.ndarray  # (n_base, n_parameters)
    regrouping: list[str]  # human-readable ``beta_k = pi_a + c * pi_b + ...``


@dataclass
class RPNAResult:
    """Output of `rpna`. Parameters: 10 per body (body order), then one per rotor (rotor order)."""

    parameter_names: list[str]
    bodies: list[BodyResult]
    rotor_joints: list[str]
    identifiable: int
    gravity: bool
    static: bool
    floating_base: bool
    rtol: float
    margin_decades: float
    _B: list = field(default_factory=list, repr=False)  # per body: (10, n_local) map to parent frame
    _cols: list = field(default_factory=list, repr=False)  # per body: global columns of its n_local params

    @property
    def n_parameters(self) -> int:
        return len(self.parameter_names)

    @property
    def unidentifiable(self) -> int:
        return self.n_parameters - self.identifiable

    # -- system bases (App. G). Dense: O(N^2) memory, meant for N up to a few hundred bodies.
    def null_basis(self) -> np.ndarray:
        """Basis (columns) of the unidentifiable subspace: ``Y @ R = 0`` for every state."""
        n = self.n_parameters
        blocks = []
        rk = _Ranker(self.rtol)
        for i, b in enumerate(self.bodies):
            Ri = rk.null(b.N)
            if Ri.shape[1] == 0:
                continue
            col = np.zeros((n, Ri.shape[1]))
            col[self._cols[i]] = Ri
            if b.parent >= 0:
                col[self._cols[b.parent][:10]] -= self._B[i] @ Ri
            blocks.append(col)
        return np.hstack(blocks) if blocks else np.zeros((n, 0))

    def identifiable_basis(self) -> np.ndarray:
        """Rows spanning the identifiable combinations (``Nsys``; its null space is `null_basis`)."""
        n = self.n_parameters
        out = []
        children = [[] for _ in self.bodies]
        for i, b in enumerate(self.bodies):
            if b.parent >= 0:
                children[b.parent].append(i)
        for i, b in enumerate(self.bodies):
            if b.rank_N == 0:
                continue
            R = np.zeros((b.rank_N, n))
            R[:, self._cols[i]] = b.N
            stack = list(children[i])
            while stack:
                j = stack.pop()
                p = self.bodies[j].parent
                R[:, self._cols[j]] = R[:, self._cols[p][:10]] @ self._B[j]
                stack.extend(children[j])
            out.append(R)
        return np.vstack(out) if out else np.zeros((0, n))

    def base_parameters(self, preference=PAPER_TABLE_ORDER) -> BaseParameters:
        """Greedy per-body choice of base parameters in ``preference`` order, and their regrouping."""
        chosen = []
        for i, b in enumerate(self.bodies):
            nloc = b.N.shape[1]
            sel: list[int] = []
            for k in preference:
                if k >= nloc or len(sel) == b.rank_N:
                    continue
                if np.linalg.matrix_rank(b.N[:, sel + [k]], tol=1e-9) > len(sel):
                    sel.append(k)
            chosen.extend(int(self._cols[i][k]) for k in sel)
        idx = np.array(sorted(chosen), int)
        R = self.null_basis()
        dep = np.setdiff1d(np.arange(self.n_parameters), idx)
        K = np.zeros((idx.size, self.n_parameters))
        K[np.arange(idx.size), idx] = 1.0
        if dep.size:
            K[:, dep] = -R[idx] @ np.linalg.solve(R[dep], np.eye(dep.size))
        K[np.abs(K) < 1e-10] = 0.0
        names = [self.parameter_names[k] for k in idx]
        regroup = []
        for r, k in enumerate(idx):
            terms = [self.parameter_names[k]]
            for c in dep:
                if K[r, c] != 0.0:
                    terms.append(f"{K[r, c]:+.6g}*{self.parameter_names[c]}")
            regroup.append(" ".join(terms))
        return BaseParameters(names, idx, K, regroup)

    def classify(self) -> list[str]:
        """Per parameter: 'identifiable' (alone), 'combination' (only in combination) or 'unidentifiable'."""
        R = self.null_basis()
        Q = np.linalg.qr(R)[0] if R.shape[1] else R
        out = []
        for k in range(self.n_parameters):
            w = float(np.linalg.norm(Q[k])) if Q.shape[1] else 0.0
            out.append("identifiable" if w < 1e-8 else "unidentifiable" if w > 1 - 1e-8 else "combination")
        return out

    def as_dict(self) -> dict:
        return {
            "identifiable": self.identifiable,
            "parameters": self.n_parameters,
            "unidentifiable": self.unidentifiable,
            "gravity": self.gravity,
            "static": self.static,
            "floating_base": self.floating_base,
            "rotors": list(self.rotor_joints),
            "rtol": self.rtol,
            "margin_decades": self.margin_decades,
            "bodies": [b.as_dict() for b in self.bodies],
        }


# ----------------------------------------------------------------------------- the algorithm


def _names(robot_or_model):
    """(pin.Model, body names, floating_base) from a RobotModel or a pin.Model."""
    if isinstance(robot_or_model, pin.Model):
        model = robot_or_model
        first_body = {}
        for f in model.frames:
            if f.type == pin.FrameType.BODY:
                first_body.setdefault(f.parentJoint, f.name)
        names = [first_body.get(j, model.names[j]) for j in range(1, model.njoints)]
        floating = model.njoints > 1 and model.joints[1].shortname() == "JointModelFreeFlyer"
        return model, names, floating
    return robot_or_model.model, list(robot_or_model.body_names), bool(robot_or_model.floating_base)


def rpna(
    robot,
    rotors: list[Rotor] | None = None,
    gravity: bool = True,
    static: bool = False,
    sensing: str = "full",
    rtol: float = DEFAULT_RTOL,
    warn_decades: float = DEFAULT_WARN_DECADES,
) -> RPNAResult:
    """Structural identifiability of a Pinocchio model (or `RobotModel`) by the RPNA.

    Args:
        robot: ``pin.Model`` or `RobotModel`; fixed base, or a free-flyer root (floating base). Any
            Pinocchio joint whose motion subspace is constant in the joint frame (revolute, prismatic,
            continuous, unaligned, helical, spherical, planar, free flyer).
        rotors: geared rotors (`Rotor`), one per 1-DoF joint at most.
        gravity: seed the velocity span with the model's gravity (fixed base: may add parameters).
        static: identifiability from static (gravity-only, ``v = a = 0``) data; needs gravity.
        sensing: ``"full"`` (joint torques + base wrench) or ``"base_wrench"`` (floating base, only the
            6 base-wrench equations). Without rotors both give the same subspace (Ayusawa et al. 2014,
            Theorem 3 of the paper). With rotors the paper only remarks that rotors are generally not
            identifiable from ground forces; here the rotor joint's own column ``Phi_bar`` is left out
            of its velocity span (it carries the torque condition ``Phi_bar^T dI_bar Phi_bar``, seen
            only by that joint's torque). This extension is ours and is checked against the numerical
            base-wrench rank (tests/test_identifiability.py).
        rtol: relative singular-value tolerance of every rank decision.
        warn_decades: warn (`IdentifiabilityWarning`) when a rank decision is closer than this many
            decades to ``rtol``.
    """
    model, body_names, floating = _names(robot)
    rotors = list(rotors or [])
    if sensing not in ("full", "base_wrench"):
        raise ValueError(f"sensing must be 'full' or 'base_wrench', not {sensing!r}")
    if sensing == "base_wrench":
        if not floating:
            raise ValueError("base-wrench sensing needs a floating-base model (free-flyer root)")
    if static and not gravity:
        raise ValueError("static identifiability needs gravity")
    geom = _joint_geometry(model)
    rotor_of = {}
    for r in rotors:
        if not model.existJointName(r.joint):
            raise ValueError(f"rotor of unknown joint {r.joint!r}")
        jid = model.getJointId(r.joint)
        if model.joints[jid].nv != 1:
            raise ValueError(f"rotor joint {r.joint!r} must have 1 DoF")
        if jid in rotor_of:
            raise ValueError(f"two rotors on joint {r.joint!r}")
        rotor_of[jid] = r

    rk = _Ranker(rtol)
    g = np.asarray(model.gravity.linear, float)
    V0 = np.concatenate([-g, np.zeros(3)])[:, None] if gravity and np.linalg.norm(g) > 0 else np.zeros((6, 0))
    K0 = np.zeros((10, 0))
    Vs, Ks = {0: V0}, {0: K0}
    bodies, Bs, cols = [], [], []
    n_links = 10 * (model.njoints - 1)
    rotor_col = {model.getJointId(r.joint): n_links + k for k, r in enumerate(rotors)}
    identifiable = 0
    for j in range(1, model.njoints):
        p, X, S, liMi = geom[j]
        nd = S.shape[1]
        Vp, Kp = Vs[p], Ks[p]
        B = B_matrix(X)
        crms = [crm(S[:, k]) for k in range(nd)]
        As = [A_matrix(S[:, k]) for k in range(nd)]
        r = rotor_of.get(j)
        if r is None:
            Vm = rk.ctrb(crms, X @ Vp)
            Vi = Vm if static else rk.orth(np.hstack([Vm, S]))
            Km = rk.ctrb([A.T for A in As], B.T @ Kp)
            M = M_matrix(Vi, S)
            Ki = rk.orth(np.hstack([Km, M]))
            N = rk.row_basis(np.vstack([M.T] + [Km.T @ A for A in As]))
            Vlink, Klink, Bbar = Vi, Ki, B
            nloc = 10
        else:
            # stacked link + rotor (App. I); rotor frame = parent frame, rotor axis a fixed in it
            a = _rotor_axis_in_parent(r, liMi, S)
            phi_m = np.concatenate([np.zeros(3), a]) * r.gear_ratio
            rvec = rotor_parameter_vector(a)
            Xbar = np.vstack([X, np.eye(6)])
            Cbar = np.zeros((12, 12))
            Cbar[:6, :6], Cbar[6:, 6:] = crms[0], crm(phi_m)
            Phibar = np.concatenate([S[:, 0], phi_m])[:, None]
            Bbar = np.hstack([B, rvec[:, None]])  # (10, 11): link + rotor params -> parent frame
            Abar = np.zeros((11, 11))
            Abar[:10, :10] = As[0]  # a symmetric rotor is invariant under its own spin: A(phi_m) r = 0
            Vm = rk.ctrb([Cbar], Xbar @ Vp)
            # base-wrench sensing drops the joint's own column (the torque condition), see docstring
            Vbar = Vm if (static or sensing == "base_wrench") else rk.orth(np.hstack([Vm, Phibar]))
            Mbar = np.vstack([
                M_matrix(Vbar[:6], S),
                (np.einsum("ac,ab,b->c", Vbar[6:], inertia_hat(rvec), phi_m))[None, :],
            ])
            Km = rk.ctrb([Abar.T], Bbar.T @ Kp)
            Kbar = rk.orth(np.hstack([Km, Mbar]))
            N = rk.row_basis(np.vstack([Mbar.T, Km.T @ Abar]))
            Vlink, Klink = rk.orth(Vbar[:6]), rk.orth(Kbar[:10])
            nloc = 11
        Vs[j], Ks[j] = Vlink, Klink
        rank_N = N.shape[0]
        identifiable += rank_N
        bodies.append(BodyResult(
            name=body_names[j - 1], joint=model.names[j], parent=p - 1, dim_V=Vlink.shape[1],
            dim_K=Klink.shape[1], dim_T=nloc - rank_N, rank_N=rank_N, N=N, has_rotor=r is not None,
        ))
        Bs.append(Bbar)
        c = list(range(10 * (j - 1), 10 * j))
        if r is not None:
            c.append(rotor_col[j])
        cols.append(np.array(c, int))

    names = [f"{b}.{s}" for b in body_names for s in INERTIAL_SUFFIXES]
    names += [f"{r.joint}.rotor_inertia" for r in rotors]
    margin = rk.margin_decades
    if margin < warn_decades:
        warnings.warn(
            f"RPNA: a rank decision is only {margin:.1f} decades from the tolerance rtol={rtol:g}; "
            "nearly parallel/perpendicular axes or rounded URDF angles may change the count "
            "(compare with another rtol or with numerical_identifiability)",
            IdentifiabilityWarning, stacklevel=2,
        )
    return RPNAResult(
        parameter_names=names, bodies=bodies, rotor_joints=[r.joint for r in rotors],
        identifiable=identifiable, gravity=gravity, static=static, floating_base=floating,
        rtol=rtol, margin_decades=margin, _B=Bs, _cols=cols,
    )
