"""The named parameter layout: unconstrained θ ↔ physical parameters p, with the prior.

Physical vector p (all SI, names as in ``parameters.csv``):

* per body, 10 inertial parameters in Pinocchio's dynamic-parameter order
  ``<link>.<m|mcx|mcy|mcz|ixx|ixy|iyy|ixz|iyz|izz>`` (kg, kg·m, kg·m², about the body frame);
* per joint, the friction model's parameters ``<joint>.<suffix>`` (e.g. ``fc`` [N·m], ``fv`` [N·m·s/rad]);
* per joint, the rotor armature ``<joint>.armature`` [kg·m²] (reflected rotor inertia added to M's diagonal);
* optionally (``actuation``, issue 9 item 2) per joint the effort sensor's gain ``<joint>.effort_gain`` [1]
  and offset ``<joint>.effort_offset`` [N·m | N]: logged effort = gain · joint effort + offset
  (`fg_sysid.factors.actuation`).

θ stacks the same blocks in unconstrained coordinates (see `fg_sysid.parameterizations`), so every θ maps
to a physically consistent p. ``dp/dθ`` is block diagonal and analytic.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .parameterizations import (
    FrictionModel,
    InertiaParameterization,
    PositiveScalar,
    check_physical_consistency,
    friction_model,
    inertia_parameterization,
)
from .robots import RobotModel

GROUPS = ("inertial", "friction", "armature", "actuation")

#: Default prior widths. Inertial: "70 % relative uncertainty on the URDF values" (paper 004 Sec. IX-A),
#: applied as 0.7 in log-space for positive quantities and 0.7·scale for signed ones.
DEFAULT_RELATIVE_PRIOR = 0.7
#: Friction and armature are rarely known from a URDF: a wide prior in log-space (factor e^1.5 ≈ 4.5).
DEFAULT_FRICTION_LOG_STD = 1.5
DEFAULT_ARMATURE_LOG_STD = 1.5
#: Actuation (issue 9 item 2): effort-sensor gain prior std in log-space (≈ 10 % relative) around 1.
DEFAULT_GAIN_LOG_STD = 0.1
#: Actuation parts that can be fitted (``ParameterLayout.actuation``).
ACTUATION_PARTS = ("gain", "offset")


@dataclass(frozen=True, eq=False)
class ParameterLayout:
    """Layout of θ and p for a robot: inertial blocks, friction per joint, armature per joint."""

    robot: RobotModel
    inertia: InertiaParameterization
    friction: FrictionModel
    armature: PositiveScalar | None
    fit_friction: bool = True
    fit_armature: bool = True
    #: fitted actuation parts, a subset of `ACTUATION_PARTS`; non-empty = gain and offset blocks in θ
    #: (a part not fitted is held at its prior mean, gain 1 / offset 0)
    actuation: tuple = ()
    _names: tuple = field(init=False, repr=False)

    def __post_init__(self):
        names = tuple(self.robot.parameter_names(self.friction.suffixes))
        bad = [a for a in self.actuation if a not in ACTUATION_PARTS]
        if bad:
            raise ValueError(f"actuation parts {bad} unknown; choices: {', '.join(ACTUATION_PARTS)}")
        object.__setattr__(self, "actuation", tuple(a for a in ACTUATION_PARTS if a in self.actuation))
        if self.actuation:
            names += tuple(f"{j}.effort_gain" for j in self.robot.joint_names)
            names += tuple(f"{j}.effort_offset" for j in self.robot.joint_names)
        object.__setattr__(self, "_names", names)

    @classmethod
    def create(
        cls,
        robot: RobotModel,
        inertia: str | InertiaParameterization = "exponential-eigenvalue",
        friction: str | FrictionModel = "coulomb-viscous",
        friction_velocity_scale: float = 0.05,
        fit_friction: bool = True,
        fit_armature: bool = True,
        actuation: tuple = (),
    ) -> ParameterLayout:
        if isinstance(inertia, str):
            inertia = inertia_parameterization(inertia)
        if isinstance(friction, str):
            kw = {"velocity_scale": friction_velocity_scale} if friction != "stribeck6" else {}
            friction = friction_model(friction, **kw)
        return cls(robot, inertia, friction, PositiveScalar(), fit_friction, fit_armature, tuple(actuation))

    # ------------------------------------------------------------------ sizes and slices
    @property
    def nb(self) -> int:
        return self.robot.n_bodies

    @property
    def nj(self) -> int:
        return self.robot.n_joints

    @property
    def kf(self) -> int:
        return self.friction.n_params

    @property
    def n(self) -> int:
        return 10 * self.nb + self.nj * (self.kf + 1) + self.n_actuation

    @property
    def names(self) -> tuple[str, ...]:
        return self._names

    @property
    def s_inertial(self) -> slice:
        return slice(0, 10 * self.nb)

    @property
    def s_friction(self) -> slice:
        a = 10 * self.nb
        return slice(a, a + self.nj * self.kf)

    @property
    def s_armature(self) -> slice:
        a = 10 * self.nb + self.nj * self.kf
        return slice(a, a + self.nj)

    def groups(self) -> list[str]:
        return (["inertial"] * (10 * self.nb) + ["friction"] * (self.nj * self.kf)
                + ["armature"] * self.nj + ["actuation"] * self.n_actuation)

    # ------------------------------------------------------------------ maps
    def split(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(inertial (nb,10), friction (nj,kf), armature (nj,)) views of a θ or p vector."""
        x = np.asarray(x, dtype=float)
        return (x[self.s_inertial].reshape(self.nb, 10), x[self.s_friction].reshape(self.nj, self.kf),
                x[self.s_armature])

    def to_physical(self, theta: np.ndarray) -> np.ndarray:
        ti, tf, ta = self.split(theta)
        p = np.empty(self.n)
        p[self.s_inertial] = self.inertia.to_physical_batch(ti).ravel()
        p[self.s_friction] = np.concatenate([self.friction.to_physical(t) for t in tf]) if self.nj else []
        p[self.s_armature] = self.armature.to_physical(ta)
        if self.n_actuation:  # gain = exp(θ_g), offset = θ_o
            th = np.asarray(theta, float)
            p[self.s_gain] = np.exp(th[self.s_gain])
            p[self.s_offset] = th[self.s_offset]
        return p

    def to_theta(self, p: np.ndarray) -> np.ndarray:
        pi, pf, pa = self.split(p)
        th = np.empty(self.n)
        th[self.s_inertial] = np.concatenate([self.inertia.to_theta(b) for b in pi])
        th[self.s_friction] = np.concatenate([self.friction.to_theta(f) for f in pf]) if self.nj else []
        th[self.s_armature] = self.armature.to_theta(pa)
        if self.n_actuation:
            pp = np.asarray(p, float)
            th[self.s_gain] = np.log(np.maximum(pp[self.s_gain], 1e-9))
            th[self.s_offset] = pp[self.s_offset]
        return th

    def jacobian_blocks(self, theta: np.ndarray):
        """dp/dθ blocks: inertial (nb,10,10), friction (nj,kf,kf), armature (nj,) diagonal."""
        ti, tf, ta = self.split(theta)
        Ji = self.inertia.jacobian_batch(ti)
        Jf = np.array([self.friction.jacobian(t) for t in tf]).reshape(self.nj, self.kf, self.kf)
        Ja = np.asarray(self.armature.jacobian(ta), float)  # elementwise (diagonal)
        return Ji, Jf, Ja

    def jacobian(self, theta: np.ndarray) -> np.ndarray:
        """Dense dp/dθ (n, n), block diagonal."""
        Ji, Jf, Ja = self.jacobian_blocks(theta)
        J = np.zeros((self.n, self.n))
        o = 0
        for b in Ji:
            J[o:o + 10, o:o + 10] = b
            o += 10
        for b in Jf:
            J[o:o + self.kf, o:o + self.kf] = b
            o += self.kf
        J[self.s_armature, self.s_armature] = np.diag(Ja)
        if self.n_actuation:
            J[self.s_actuation, self.s_actuation] = np.diag(self.actuation_jacobian(theta))
        return J

    def retract(self, theta: np.ndarray, dtheta: np.ndarray) -> np.ndarray:
        """θ ⊕ δθ taken through the physical parameters the dynamics are linear in (issue 9, session 12).

        The inverse dynamics are linear in each body's π and in the armature (paper 004 eq. 43), so the
        cost is nearly quadratic in them and a Gauss–Newton step is a straight line there: δp = (∂p/∂θ) δθ.
        θ + δθ follows that line only to first order: where the data fix a sum and leave its split to the
        prior (a joint's armature and its link's inertia about the axis, mass and first moment along a
        link) the straight line in θ leaves the data term's narrow valley and the line search shortens
        the whole step (`benchmarks/bench_theta_steps.py`). Here each body's π + δπ is mapped back to θ
        exactly (`to_theta`) where it is physically consistent, and each armature a + δa where it stays
        positive; a block the straight line takes outside the valid set takes θ + δθ (clamping such a
        body onto the set's boundary instead bends its curve away from δθ; tried in session 12, it cost
        iterations on the Z1 out-of-class rows). Every block's curve has δθ as its tangent at δθ → 0, so
        the line search's shortening still reaches a decrease. Friction (whose shape parameters enter
        nonlinearly) and actuation keep θ + δθ, and so do the inertial blocks unless
        ``inertia="log-cholesky"`` (the default; "raw" is linear already, and "exponential-eigenvalue" has
        several θ per body, so mapping back could jump to another θ of the same π and change the prior's
        cost).
        """
        theta = np.asarray(theta, dtype=float)
        dtheta = np.asarray(dtheta, dtype=float)
        out = theta + dtheta
        ti, _, ta = self.split(theta)
        di, _, da = self.split(dtheta)
        if self.nb and self.inertia.name == "log-cholesky":  # a bijection onto the consistent set
            Ji = self.inertia.jacobian_batch(ti)
            pi_new = self.inertia.to_physical_batch(ti) + np.einsum("bij,bj->bi", Ji, di)
            oi = out[self.s_inertial].reshape(self.nb, 10)
            for b in np.flatnonzero(np.any(di != 0, axis=1)):
                try:
                    tb = np.asarray(self.inertia.to_theta(pi_new[b]), float)
                except (np.linalg.LinAlgError, ValueError):
                    continue
                # only a consistent π + δπ (`to_theta` would clamp one outside the set: not a retraction)
                back = self.inertia.to_physical_batch(tb[None])[0]
                if np.all(np.isfinite(tb)) and np.allclose(back, pi_new[b], rtol=1e-9,
                                                           atol=1e-12 * np.max(np.abs(pi_new[b]))):
                    oi[b] = tb
            out[self.s_inertial] = oi.ravel()
        if self.nj and self.fit_armature:
            pa_new = self.armature.to_physical(ta) + self.armature.jacobian(ta) * da  # (diagonal Jacobian)
            ok = (pa_new > self.armature.FLOOR) & (da != 0)  # (`to_theta` floors at FLOOR)
            out[self.s_armature] = np.where(ok, self.armature.to_theta(np.where(ok, pa_new, 1.0)),
                                            out[self.s_armature])
        return out

    def to_theta_projected(self, p: np.ndarray, fallback: np.ndarray) -> tuple[np.ndarray, list[str]]:
        """θ of ``p``, made representable: a physically inconsistent body is projected onto the
        consistent set (`project_pseudo_inertia`); a body that still cannot be represented, and friction
        or armature coefficients that are not finite and > 0, take the block of ``fallback``.
        Returns θ and the names of the projected or replaced blocks.
        """
        p = np.asarray(p, float)
        fallback = np.asarray(fallback, float)
        pi, pf, pa = self.split(p)
        fi, ff, fa = self.split(fallback)
        replaced = []
        th = self.to_theta(fallback)
        ti = th[self.s_inertial].reshape(self.nb, 10)
        for b, name in enumerate(self.robot.body_names):
            body = pi[b]
            ok = bool(np.all(np.isfinite(body)))
            if ok and check_physical_consistency(body[None], [name]):
                body = project_pseudo_inertia(body, fi[b])
                replaced.append(f"{name} (projected)")
            if ok:
                try:
                    ti[b] = self.inertia.to_theta(body)
                except np.linalg.LinAlgError:
                    ok = False
            if not ok:
                replaced.append(name)
        th[self.s_inertial] = ti.ravel()
        tf = th[self.s_friction].reshape(self.nj, self.kf)
        for j, name in enumerate(self.robot.joint_names):
            if self.friction.valid(pf[j]):
                tf[j] = self.friction.to_theta(pf[j])
            else:
                replaced.append(f"{name} friction")
        th[self.s_friction] = tf.ravel()
        ok = np.isfinite(pa) & (pa > 0)
        th[self.s_armature] = np.where(ok, self.armature.to_theta(np.where(ok, pa, 1.0)), th[self.s_armature])
        replaced += [f"{n} armature" for n, o in zip(self.robot.joint_names, ok, strict=True) if not o]
        if self.n_actuation:
            if p.size == self.n - self.n_actuation:  # a vector without actuation (e.g. a baseline's)
                p = np.concatenate([p, fallback[self.s_actuation]])
            g, o = p[self.s_gain], p[self.s_offset]
            ok = np.isfinite(g) & (g > 0) & np.isfinite(o)
            th[self.s_gain] = np.where(ok, np.log(np.where(ok, g, 1.0)), th[self.s_gain])
            th[self.s_offset] = np.where(ok, np.where(ok, o, 0.0), th[self.s_offset])
            replaced += [f"{n} actuation" for n, o_ in zip(self.robot.joint_names, ok, strict=True) if not o_]
        return th, replaced

    # ------------------------------------------------------------------ nominal and prior
    def nominal_physical(self) -> np.ndarray:
        """URDF inertias, friction from URDF <dynamics> (with floors), small positive armature."""
        r = self.robot
        p = np.empty(self.n)
        p[self.s_inertial] = r.nominal_inertial_parameters().ravel()
        fr = [self.friction.default_physical(float(f), float(d))
              for f, d in zip(r.urdf_friction, r.urdf_damping, strict=True)]
        p[self.s_friction] = np.concatenate(fr) if fr else []
        p[self.s_armature] = default_armature(r)
        if self.n_actuation:
            p[self.s_gain], p[self.s_offset] = 1.0, 0.0
        return p

    def prior(self, relative: float = DEFAULT_RELATIVE_PRIOR,
              friction_log_std: float = DEFAULT_FRICTION_LOG_STD,
              armature_log_std: float = DEFAULT_ARMATURE_LOG_STD,
              mean_physical: np.ndarray | None = None, gain_log_std: float = DEFAULT_GAIN_LOG_STD,
              offset_std=1.0) -> tuple[np.ndarray, np.ndarray]:
        """Gaussian prior on θ: (mean θ̄, std) with independent components.

        Inertial blocks follow the parameterization: log-coordinates (EE's σ_m, σ_xyz; log-Cholesky's
        logs) get std ``relative``; signed coordinates (first moments h, rotation ω, raw entries) get
        ``relative`` times a per-body scale (mass × radius of gyration for h, 1 rad for ω).
        Actuation (when in the layout): log-gain std ``gain_log_std`` around the mean's gain (1), offset
        std ``offset_std`` [N·m | N, scalar or per joint] around its offset (0).
        """
        p0 = self.nominal_physical() if mean_physical is None else np.asarray(mean_physical, float)
        if self.n_actuation and p0.size == self.n - self.n_actuation:  # a mean without actuation
            p0 = np.concatenate([p0, self.nominal_physical()[self.s_actuation]])
        th0 = self.to_theta(p0)
        std = np.empty(self.n)
        pi, _, _ = self.split(p0)
        std_i = np.array([inertial_prior_std(self.inertia.name, b, relative) for b in pi])
        std[self.s_inertial] = std_i.ravel()
        std[self.s_friction] = np.tile(self.friction.prior_std(friction_log_std), self.nj)
        std[self.s_armature] = armature_log_std
        if not self.fit_friction:
            std[self.s_friction] = 1e-6
        if not self.fit_armature:
            std[self.s_armature] = 1e-6
        if self.n_actuation:
            std[self.s_gain] = gain_log_std if "gain" in self.actuation else 1e-6
            std[self.s_offset] = (np.broadcast_to(np.asarray(offset_std, float), (self.nj,))
                                  if "offset" in self.actuation else 1e-6)
        return th0, std

    # ------------------------------------------------------------------ actuation (issue 9 item 2)
    @property
    def n_actuation(self) -> int:
        """Size of the actuation block: 2 per joint (gain, offset) when ``actuation`` is set, else 0."""
        return 2 * self.nj if self.actuation else 0

    @property
    def s_actuation(self) -> slice:
        a = 10 * self.nb + self.nj * (self.kf + 1)
        return slice(a, a + self.n_actuation)

    @property
    def s_gain(self) -> slice:
        """θ_g = log(effort gain) per joint (empty without actuation)."""
        a = self.s_actuation.start
        return slice(a, a + (self.nj if self.actuation else 0))

    @property
    def s_offset(self) -> slice:
        """θ_o = effort offset [N·m | N] per joint (empty without actuation)."""
        a = self.s_gain.stop
        return slice(a, a + (self.nj if self.actuation else 0))

    def actuation_jacobian(self, theta: np.ndarray) -> np.ndarray:
        """Diagonal of dp/dθ on the actuation block (2·nj,): exp(θ_g) for gains, 1 for offsets."""
        th = np.asarray(theta, float)
        return np.concatenate([np.exp(th[self.s_gain]), np.ones(self.s_offset.stop - self.s_offset.start)])


def project_pseudo_inertia(pi: np.ndarray, reference: np.ndarray, rel_floor: float = 1e-3) -> np.ndarray:
    """Nearest (Frobenius, in pseudo-inertia space) physically consistent body to ``pi``.

    The 4×4 pseudo-inertia J(π) is PSD exactly for physically consistent bodies (Wensing et al.); its
    eigenvalues are clamped at ``rel_floor`` × the reference body's largest eigenvalue. A negative mass
    gives no useful projection: then the reference body is returned.
    """
    import pinocchio as pin

    J = np.asarray(pin.PseudoInertia.FromDynamicParameters(np.asarray(pi, float)).toMatrix())
    Jr = np.asarray(pin.PseudoInertia.FromDynamicParameters(np.asarray(reference, float)).toMatrix())
    w, V = np.linalg.eigh(0.5 * (J + J.T))
    floor = rel_floor * float(np.max(np.linalg.eigvalsh(Jr)))
    Jp = (V * np.maximum(w, floor)) @ V.T
    if Jp[3, 3] <= 0:
        return np.asarray(reference, float).copy()
    return np.asarray(pin.PseudoInertia.FromMatrix(Jp).toDynamicParameters(), float)


def default_armature(robot: RobotModel) -> np.ndarray:
    """Prior mean of the armature [kg·m²]: the URDF's when set, else 1 % of the joint's largest
    diagonal mass-matrix entry at the neutral pose (a small positive value)."""
    import pinocchio as pin

    m = robot.model
    data = m.createData()
    M = pin.crba(m, data, pin.neutral(m))
    iv = robot.joint_index_v()
    urdf = np.array(m.armature)[iv]
    guess = 0.01 * np.maximum(np.diag(M)[iv], 1e-6)
    return np.where(urdf > 0, urdf, guess)


def inertial_prior_std(parameterization: str, pi: np.ndarray, relative: float) -> np.ndarray:
    """Prior std of one body's θ block (10,) around the nominal π, see `ParameterLayout.prior`."""
    m = max(float(pi[0]), 1e-6)
    c = pi[1:4] / m
    I = np.array([[pi[4], pi[5], pi[7]], [pi[5], pi[6], pi[8]], [pi[7], pi[8], pi[9]]])
    Ic = I - m * (np.dot(c, c) * np.eye(3) - np.outer(c, c))
    r_gyr = np.sqrt(max(np.trace(Ic), 1e-12) / (2 * m))
    if parameterization == "exponential-eigenvalue":
        h_scale = np.maximum(np.abs(pi[1:4]), m * max(r_gyr, np.linalg.norm(c)))
        return np.concatenate([[relative], relative * h_scale, [relative] * 3, [relative] * 3])
    if parameterization == "log-cholesky":
        # θ = (α, d1, d2, d3, s12, s23, s13, t1, t2, t3): m = e^{2α}; e^{d}, s are lengths [m] of the
        # Cholesky factor of the second moment per unit mass; t = COM [m].
        length = max(r_gyr, 1e-3)
        return np.concatenate([[relative / 2], [relative / 2] * 3, [relative * length] * 3,
                               relative * np.maximum(np.abs(c), length)])
    # raw: relative to each entry with a floor from the body's scale
    scale = np.concatenate([[m], [m * max(r_gyr, np.linalg.norm(c))] * 3, [m * max(r_gyr, 1e-3) ** 2] * 6])
    return relative * np.maximum(np.abs(pi), scale)
