"""Quality gate of online identification (issue 13, after paper 001's publish-when-better rule).

An online estimator produces a candidate model continually; a controller must only ever see a model
that is *better* than the one it has and *certain enough*. `QualityGate` keeps the published model and
judges candidates one at a time:

1. **Uncertainty** (checked when the candidate is offered): the candidate's relative standard
   deviation over the structurally identifiable physical parameters (``structural == "identifiable"``
   in its identifiability table: the parameters ideal data determine alone; all parameters if the table
   is missing): the ``quantile`` (default the median) of

       r_i = std_i / max(|p_i|, σ_prior,i)   over identifiable i,

   where ``p_i`` is the physical estimate, ``std_i`` its marginal std (delta method through dp/dθ) and
   ``σ_prior,i`` the prior std (the denominator keeps parameters whose value is near zero — first
   moments, products of inertia — from dividing by ~0: for them ``u`` is the posterior/prior std
   ratio; a prior-only estimate has r_i ≈ 1). A quantile rather than the maximum because a window of
   data always leaves a few identifiable parameters weakly excited (r_i ≈ 1), which would veto every
   candidate. ``u > max_rel_std`` rejects the candidate at once (the reason names the worst parameter).
2. **Prediction** (decided once ``holdout`` seconds of samples *after* the candidate's time have
   arrived — data neither model has seen): both the candidate and the published model predict these
   samples' efforts through the one held-out prediction path `fg_sysid.prediction.heldout_report`
   (measured q and v, SG-filtered accelerations, inverse dynamics of the model) and are scored by the
   relative torque RMSE ``sqrt(mean((τ̂ − τ)²)) / sqrt(mean(τ²))``. The candidate is published iff

       score_candidate < (1 − margin) · score_published.

   Before any publication the reference is the URDF nominal model (inertias, URDF friction/damping,
   armature): the first model published must beat the URDF by the margin.

Every decision is an event row (t, decision, reason, candidate_score, published_score, rel_std,
candidate_t, worst_parameter); the published model is kept as a ``model.json`` dict
(`fg_sysid.validation.model_spec`, what ``fg-sysid predict`` reads).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from ..datasets.log import Log
from ..robots import RobotModel
from .online_stream import _arrays

__all__ = ["GateEvent", "QualityGate", "relative_uncertainty"]


@dataclass(frozen=True)
class GateEvent:
    """One decision: t [s] (log time of the decision), decision (``publish`` | ``reject``), reason,
    scores (relative torque RMSE on the hold-out; nan when not scored), rel_std (``u``), candidate_t [s]
    (log time of the candidate's newest sample), worst_parameter (the one setting ``u``)."""

    t: float
    decision: str
    reason: str
    candidate_score: float
    published_score: float
    rel_std: float
    candidate_t: float
    worst_parameter: str

    def row(self) -> dict:
        return asdict(self)


def relative_uncertainty(result, quantile: float = 0.5, identifiable_only: bool = True) -> tuple[float, str]:
    """``(u, worst parameter name)`` of an `IdentificationResult`: ``u`` is the ``quantile`` of the
    per-parameter relative std over the identifiable parameters (see the module docstring)."""
    est = np.asarray(result.estimate, float)
    std = np.asarray(result.std, float)
    prior = np.asarray(result.prior_std, float)
    mask = np.isfinite(std)
    table = getattr(result, "identifiability", None)
    if identifiable_only and table is not None:
        mask &= table["structural"].to_numpy() == "identifiable"
    if not mask.any():
        return float("inf"), ""
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = std / np.maximum(np.abs(est), prior)
    rel = np.where(mask & ~np.isnan(rel), rel, -np.inf)
    k = int(np.argmax(rel))
    u = float(np.quantile(rel[mask], quantile))
    return u, str(result.names[k])


class QualityGate:
    """Publish-when-better gate (see the module docstring).

    Args:
        robot: the robot the candidates were identified for.
        robot_source: catalog name or URDF path (stored in the published model.json).
        margin: relative improvement of the hold-out score a candidate needs (0.05 = 5 % lower error).
        max_rel_std: largest admissible ``u`` (relative std of the identifiable parameters).
        holdout: seconds of unseen samples a candidate is scored on [s].
        sg_window, sg_order: SG filter of the hold-out accelerations [s] (stored in model.json); None =
            chosen by `calibrate` (the classical baseline's blocked cross-validation on early samples, as
            ``identify`` stores in model.json) — the noise of SG accelerations decides the score, so the
            window must suit the sensors.
        quantile: ``u`` is this quantile of the per-parameter relative std (0.5 = median; 1 = the worst).
        training_log: recorded in model.json.
    """

    def __init__(
        self,
        robot: RobotModel,
        robot_source: str,
        margin: float = 0.05,
        max_rel_std: float = 0.3,
        holdout: float = 1.0,
        sg_window: float | None = None,
        sg_order: int = 3,
        quantile: float = 0.5,
        training_log: str | None = None,
    ):
        if not (np.isfinite(margin) and 0 <= margin < 1):
            raise ValueError(f"margin must be in [0, 1), got {margin}")
        if not (np.isfinite(max_rel_std) and max_rel_std > 0):
            raise ValueError(f"max_rel_std must be > 0, got {max_rel_std}")
        if not (np.isfinite(holdout) and holdout > 0):
            raise ValueError(f"holdout must be > 0 [s], got {holdout}")
        self.robot = robot
        self.robot_source = str(robot_source)
        self.margin = float(margin)
        self.max_rel_std = float(max_rel_std)
        self.holdout = float(holdout)
        if not 0 < quantile <= 1:
            raise ValueError(f"quantile must be in (0, 1], got {quantile}")
        self.quantile = float(quantile)
        self.sg_filter = (
            None
            if sg_window is None
            else {"window_s": float(sg_window), "polyorder": int(sg_order), "chosen_by": "given"}
        )
        self.training_log = training_log
        self.published: dict | None = None  # model.json dict
        self.published_result = None
        self.published_t: float | None = None
        self.events: list[GateEvent] = []
        self._pending = None  # (spec, result, candidate_t, u, worst)
        self._buf: list[tuple] = []

    # ------------------------------------------------------------------ public
    @property
    def idle(self) -> bool:
        """True when no candidate is waiting for its hold-out samples."""
        return self._pending is None

    def calibrate(self, log: Log) -> dict:
        """Choose the hold-out SG filter on ``log`` (early samples) by the classical baseline's blocked
        cross-validation (`LeastSquaresSG`); keeps a given filter. Returns the filter."""
        import warnings

        from .baseline import LeastSquaresSG

        if self.sg_filter is None and self.robot.floating_base:  # no LS-SG baseline for floating bases
            import inspect

            from .floating_smoother import FloatingBaseSmoother

            par = inspect.signature(FloatingBaseSmoother).parameters  # the floating smoother's own SG filter
            self.sg_filter = {"window_s": float(par["sg_window_s"].default),
                              "polyorder": int(par["sg_order"].default),
                              "chosen_by": "the floating-base smoother's default SG filter"}
        if self.sg_filter is None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                f = LeastSquaresSG().fit(log, self.robot).result_.filter
            self.sg_filter = {
                "window_s": float(f["window_s"]),
                "polyorder": int(f["polyorder"]),
                "chosen_by": f"blocked CV of the LS-SG baseline on t ≤ {log.t[-1]:.4g} s",
            }
        return self.sg_filter

    def offer(self, result, t: float) -> GateEvent | None:
        """Submit a candidate `IdentificationResult` fitted on samples up to log time ``t`` [s]. Returns the
        reject event if it is too uncertain, else None (it is scored on the next ``holdout`` seconds)."""
        from ..validation import model_spec

        if self._pending is not None:
            raise RuntimeError("a candidate is already waiting for its hold-out samples (check `idle`)")
        if self.sg_filter is None:
            raise RuntimeError("no hold-out SG filter: give sg_window or call calibrate(log) first")
        u, worst = relative_uncertainty(result, quantile=self.quantile)
        if not u <= self.max_rel_std:
            return self._event(
                t,
                "reject",
                f"too uncertain: relative std {u:.3g} (quantile {self.quantile:g}; "
                f"worst {worst}) > {self.max_rel_std:g}",
                np.nan,
                np.nan,
                u,
                t,
                worst,
            )
        spec = model_spec(
            result,
            self.robot,
            self.robot_source,
            sg_filter={k: self.sg_filter[k] for k in ("window_s", "polyorder")},
            training_log=self.training_log,
        )
        self._pending = (spec, result, float(t), u, worst)
        self._buf = []
        return None

    def observe(self, samples) -> list[GateEvent]:
        """Feed accepted samples (dict or `Log`, time-ordered); decides the pending candidate once its
        hold-out is complete. Returns the events of this call."""
        if self._pending is None:
            return []
        t, q, v, tau = _arrays(samples)
        cand_t = self._pending[2]
        keep = t > cand_t
        if keep.any():
            self._buf.append((t[keep], q[keep], None if v is None else v[keep], tau[keep]))
            if self.robot.floating_base:  # the base pose, IMU, contact and force columns too
                from .online_stream import select

                self._buf[-1] = (*self._buf[-1], select(samples, keep))
        if not self._buf:
            return []
        span = self._buf[-1][0][-1] - cand_t
        if span < self.holdout - 1e-9:
            return []
        return [self._decide()]

    def score(self, model, log: Log) -> float:
        """Relative torque RMSE of ``model`` (model.json dict or physical vector) on ``log``."""
        from ..prediction import heldout_report

        rep = heldout_report(
            model, self.robot, log, window_s=self.sg_filter["window_s"], polyorder=self.sg_filter["polyorder"]
        )
        return float("nan") if rep["overall"] is None else float(rep["overall"])

    def on_change(self, t: float, t_change: float) -> GateEvent | None:
        """A change of the robot was detected at log time ``t`` [s] (estimated to have happened at
        ``t_change``): a pending candidate fitted on samples before it is dropped (a reject event) — it
        would be scored on post-change samples against a published model that is just as stale, and it
        blocks the post-change candidates for a whole hold-out. The published model stays until a
        candidate beats it."""
        if self._pending is None:
            return None
        spec, result, cand_t, u, worst = self._pending
        self._pending, self._buf = None, []
        reason = (f"superseded: a change of the robot was detected at t={t:.3f} s (from t≈{t_change:.3f} s) "
                  "after this candidate")
        return self._event(t, "reject", reason, np.nan, np.nan, u, cand_t, worst)

    def events_frame(self):
        import pandas as pd

        cols = list(GateEvent.__dataclass_fields__)
        return pd.DataFrame([e.row() for e in self.events], columns=cols)

    # ------------------------------------------------------------------ internals
    def _reference(self):
        if self.published is not None:
            return self.published, "published"
        from .baseline import nominal_parameters

        return nominal_parameters(self.robot), "URDF nominal"

    def _decide(self) -> GateEvent:
        spec, result, cand_t, u, worst = self._pending
        self._pending = None
        t = np.concatenate([b[0] for b in self._buf])
        v = None if self._buf[0][2] is None else np.concatenate([b[2] for b in self._buf])
        log = Log(
            t=t,
            q=np.concatenate([b[1] for b in self._buf]),
            v=v,
            tau=np.concatenate([b[3] for b in self._buf]),
            joint_names=tuple(self.robot.joint_names),
            source=f"hold-out after t={cand_t:.6g} s",
        )
        if self.robot.floating_base:
            from .online_floating import samples_log

            log = samples_log([b[4] for b in self._buf], self.robot, source=log.source)
        self._buf = []
        ref, ref_name = self._reference()
        try:
            s_new, s_ref = self.score(spec, log), self.score(ref, log)
        except ValueError as e:
            return self._event(
                t[-1], "reject", f"cannot score on the hold-out: {e}", np.nan, np.nan, u, cand_t, worst
            )
        if not np.isfinite(s_new):
            return self._event(
                t[-1], "reject", "no measured efforts in the hold-out", s_new, s_ref, u, cand_t, worst
            )
        if s_new < (1.0 - self.margin) * s_ref:
            spec = dict(spec)
            spec["online"] = {
                "published_t": float(t[-1]),
                "candidate_t": cand_t,
                "holdout_score": s_new,
                "reference_score": s_ref,
                "reference": ref_name,
                "rel_std": u,
                "gate": {"margin": self.margin, "max_rel_std": self.max_rel_std, "holdout_s": self.holdout},
            }
            self.published, self.published_result, self.published_t = spec, result, float(t[-1])
            return self._event(
                t[-1],
                "publish",
                f"hold-out error {s_new:.4g} < (1 − {self.margin:g}) × "
                f"{s_ref:.4g} ({ref_name}); relative std {u:.3g}",
                s_new,
                s_ref,
                u,
                cand_t,
                worst,
            )
        return self._event(
            t[-1],
            "reject",
            f"not better: hold-out error {s_new:.4g} ≥ (1 − {self.margin:g}) × {s_ref:.4g} ({ref_name})",
            s_new,
            s_ref,
            u,
            cand_t,
            worst,
        )

    def _event(self, t, decision, reason, s_new, s_ref, u, cand_t, worst) -> GateEvent:
        ev = GateEvent(float(t), decision, reason, float(s_new), float(s_ref), float(u), float(cand_t), worst)
        self.events.append(ev)
        return ev
