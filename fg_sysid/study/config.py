"""Study configuration (YAML) and its expansion into runs.

A study is the grid robots × motions × noise levels × methods × seeds × option sets; every cell is one
*run* (simulate → identify → evaluate, `fg_sysid.study.runner.run_one`). Schema (all keys but ``robots``,
``methods`` optional)::

    name: table2                        # study name (report title)
    robots: [z1, double_pendulum]       # catalog names or URDF / robot-spec paths (fixed base)
    motions:                            # simulated excitation: random Fourier motion drawn from the seed
      - {name: fourier-8s, duration: 8.0, rate: 500}     # [s], [Hz]
    noise: [0.0, 0.005, 0.01, 0.1]      # σ on q [rad], v [rad/s] and τ [N·m] (fg-sysid simulate --noise)
    methods: [ls-sg, energy-ls, smoother]                # see fg_sysid.study.methods.METHODS
    seeds: [0, 1, 2]                    # or {count: 50, start: 0}
    options:                            # option sets (a grid axis); every key optional
      - {name: default}
      - {name: vs-0.02, truth_friction_velocity_scale: 0.02}
    truth:    {friction_velocity_scale: 0.02}   # simulator (true system) defaults
    estimator: {friction_velocity_scale: 0.05, max_iterations: 20, knot_stride: 1, energy_window_s: 0.1,
                init_spread: 0.0,                # > 0: random initial guess / prior mean (see methods.py)
                use_forces: false, energy_contact: allowance,   # floating bases only (study/floating.py)
                strategy: hybrid,                # floating bases: LM damping (default: the estimator's)
                init: ls}                        # floating bases: start at the LS fit (default: the guess)
    heldout:  {duration: 4.0, seed_offset: 1000}  # noise-free held-out motion of the same true robot

Option-set keys: ``name`` and any key of ``truth`` (prefixed ``truth_``) or ``estimator``; they override the
study-wide values for the runs of that set. Out-of-class truth: a simulator friction velocity scale
different from the estimator's (``truth.friction_velocity_scale`` ≠ ``estimator.friction_velocity_scale``)
means the true friction is outside the estimator's model class.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .methods import METHODS

TRUTH_KEYS = {"friction_velocity_scale": 0.05,
              "contacts": "soft",  # floating bases only: soft (MuJoCo) | rigid (rigid_contact_sim)
              # rigid-contact trot only (issue 12, session 9; None: `simulate_rigid_stance`'s default)
              "trot_amplitude": None, "trot_period": None, "hip_amplitude": None, "hip_frequency": None,
              "swing_fraction": None}
ESTIMATOR_KEYS = {"friction_velocity_scale": 0.05, "max_iterations": 20, "knot_stride": 1,
                  "energy_window_s": 0.1, "init_spread": 0.0,
                  "use_forces": False, "energy_contact": "allowance",  # the last three: floating bases only
                  "bilateral_contacts": False,
                  "strategy": None,  # floating bases: LM damping (None: the estimator's default; issue 12)
                  "init": None}  # floating bases with init_spread > 0: "prior" (start at the guess, None) or
                                 # "ls" (the bounded LS fit with the guess as prior mean; issue 12, session 9)
HELDOUT_KEYS = {"duration": 4.0, "seed_offset": 1000}
#: keys whose default None means "the simulator's / estimator's own default"
OPTIONAL_KEYS = {"trot_amplitude", "trot_period", "hip_amplitude", "hip_frequency", "swing_fraction",
                 "strategy", "init"}
TOP_KEYS = {"name", "robots", "motions", "noise", "methods", "seeds", "options", "truth", "estimator",
            "heldout"}


class StudyConfigError(ValueError):
    """A bad study configuration; the message names the file and the key."""


@dataclass(frozen=True)
class RunSpec:
    """One run of the grid (picklable; sent to the workers)."""

    robot: str
    motion: str
    duration: float
    rate: float
    noise: float
    method: str
    seed: int
    option: str
    truth: dict = field(default_factory=dict)
    estimator: dict = field(default_factory=dict)
    heldout: dict = field(default_factory=dict)

    @property
    def run_id(self) -> str:
        """Readable unique id: ``robot/motion/σ/method/seed/option``."""
        return f"{self.robot}/{self.motion}/sigma={self.noise:g}/{self.method}/seed={self.seed}/{self.option}"

    @property
    def file_stem(self) -> str:
        return hashlib.sha1(self.run_id.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class StudyConfig:
    name: str
    runs: tuple[RunSpec, ...]
    source: str = ""
    raw: dict = field(default_factory=dict)


def _err(src, msg):
    raise StudyConfigError(f"{src}: {msg}")


def _number(src, key, x, positive=False, nonneg=False):
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(float(x)):
        _err(src, f"{key} must be a finite number, got {x!r}")
    if positive and not x > 0:
        _err(src, f"{key} must be > 0, got {x!r}")
    if nonneg and not x >= 0:
        _err(src, f"{key} must be >= 0, got {x!r}")
    return float(x)


def _section(src, raw, key, defaults):
    sec = raw.get(key) or {}
    if not isinstance(sec, dict):
        _err(src, f"{key} must be a mapping, got {type(sec).__name__}")
    unknown = sorted(set(sec) - set(defaults))
    if unknown:
        _err(src, f"{key}: unknown key(s) {unknown}; known: {sorted(defaults)}")
    out = dict(defaults)
    out.update(sec)
    return out


def _check_values(src, where, d):
    for k, v in d.items():
        if v is None and k in OPTIONAL_KEYS:
            continue
        if k == "strategy":
            from ..estimation.solver import STRATEGIES

            if v not in STRATEGIES:
                _err(src, f"{where}.{k} must be one of {', '.join(STRATEGIES)}, got {v!r}")
        elif k == "init":
            if v not in ("prior", "ls"):
                _err(src, f"{where}.{k} must be prior (start at the guess) or ls (least-squares start), "
                          f"got {v!r}")
        elif k in ("max_iterations", "knot_stride", "seed_offset"):
            if isinstance(v, bool) or not isinstance(v, int) or v < (0 if k == "seed_offset" else 1):
                _err(src, f"{where}.{k} must be an integer >= {0 if k == 'seed_offset' else 1}, got {v!r}")
        elif k == "init_spread":
            _number(src, f"{where}.{k}", v, nonneg=True)
        elif k in ("use_forces", "bilateral_contacts"):
            if not isinstance(v, bool):
                _err(src, f"{where}.{k} must be true or false, got {v!r}")
        elif k == "contacts":
            if v not in ("soft", "rigid"):
                _err(src, f"{where}.{k} must be soft (MuJoCo) or rigid (rigid point contacts), got {v!r}")
        elif k == "energy_contact":
            from ..estimation.energy_contact import CONTACT_WORK_MODES

            if v not in CONTACT_WORK_MODES:
                _err(src, f"{where}.{k} must be one of {', '.join(CONTACT_WORK_MODES)}, got {v!r}")
        else:
            _number(src, f"{where}.{k}", v, positive=True)


def parse_config(raw: dict, source: str = "<config>") -> StudyConfig:
    """Validate a config mapping and expand it into runs (errors name the key)."""
    src = source
    if not isinstance(raw, dict):
        _err(src, "the study configuration must be a YAML mapping")
    unknown = sorted(set(raw) - TOP_KEYS)
    if unknown:
        _err(src, f"unknown key(s) {unknown}; known: {sorted(TOP_KEYS)}")
    name = str(raw.get("name") or Path(source).stem)
    robots = raw.get("robots")
    if not robots or not isinstance(robots, list):
        _err(src, "robots must be a non-empty list of robot names")
    methods = raw.get("methods")
    if not methods or not isinstance(methods, list):
        _err(src, f"methods must be a non-empty list (choices: {', '.join(METHODS)})")
    for m in methods:
        if m not in METHODS:
            _err(src, f"methods: unknown method {m!r}; choices: {', '.join(METHODS)}")
    motions = raw.get("motions") or [{"name": "fourier-8s", "duration": 8.0, "rate": 500.0}]
    if not isinstance(motions, list):
        _err(src, "motions must be a list of {name, duration, rate}")
    mot = []
    for i, m in enumerate(motions):
        if not isinstance(m, dict) or set(m) - {"name", "duration", "rate"}:
            _err(src, f"motions[{i}] must be a mapping with keys name, duration [s], rate [Hz]")
        d = _number(src, f"motions[{i}].duration", m.get("duration", 8.0), positive=True)
        r = _number(src, f"motions[{i}].rate", m.get("rate", 500.0), positive=True)
        mot.append((str(m.get("name") or f"fourier-{d:g}s@{r:g}Hz"), d, r))
    if len({m[0] for m in mot}) != len(mot):
        _err(src, "motions: names must be unique")
    noise = raw.get("noise", [0.01])
    noise = noise if isinstance(noise, list) else [noise]
    noise = [_number(src, "noise", x, nonneg=True) for x in noise]
    seeds = raw.get("seeds", [0])
    if isinstance(seeds, dict):
        if set(seeds) - {"count", "start"}:
            _err(src, "seeds as a mapping takes count and start")
        cnt, start = seeds.get("count", 1), seeds.get("start", 0)
        if not (isinstance(cnt, int) and cnt >= 1 and isinstance(start, int) and start >= 0):
            _err(src, f"seeds: count must be >= 1 and start >= 0, got {seeds}")
        seeds = list(range(start, start + cnt))
    if not isinstance(seeds, list) or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0
                                              for s in seeds):
        _err(src, f"seeds must be a list of non-negative integers or {{count, start}}, got {seeds!r}")
    truth = _section(src, raw, "truth", TRUTH_KEYS)
    est = _section(src, raw, "estimator", ESTIMATOR_KEYS)
    held = _section(src, raw, "heldout", HELDOUT_KEYS)
    _check_values(src, "truth", truth)
    _check_values(src, "estimator", est)
    _check_values(src, "heldout", held)
    options = raw.get("options") or [{"name": "default"}]
    if not isinstance(options, list):
        _err(src, "options must be a list of option sets")
    opts = []
    allowed = {"name"} | {f"truth_{k}" for k in TRUTH_KEYS} | set(ESTIMATOR_KEYS)
    for i, o in enumerate(options):
        if not isinstance(o, dict):
            _err(src, f"options[{i}] must be a mapping")
        bad = sorted(set(o) - allowed)
        if bad:
            _err(src, f"options[{i}]: unknown key(s) {bad}; known: {sorted(allowed)}")
        t = dict(truth)
        e = dict(est)
        for k, v in o.items():
            if k.startswith("truth_"):
                t[k[6:]] = v
            elif k != "name":
                e[k] = v
        _check_values(src, f"options[{i}] truth", t)
        _check_values(src, f"options[{i}]", e)
        opts.append((str(o.get("name") or f"options{i}"), t, e))
    if len({o[0] for o in opts}) != len(opts):
        _err(src, "options: names must be unique")
    runs = tuple(
        RunSpec(robot=str(r), motion=m[0], duration=m[1], rate=m[2], noise=s, method=meth, seed=seed,
                option=o[0], truth=o[1], estimator=o[2], heldout=held)
        for r, m, s, meth, seed, o in itertools.product(robots, mot, noise, methods, seeds, opts)
    )
    return StudyConfig(name=name, runs=runs, source=str(source), raw=raw)


def load_config(path) -> StudyConfig:
    """Read and validate a study YAML file."""
    path = Path(path)
    if not path.is_file():
        raise StudyConfigError(f"study configuration not found: {path}")
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise StudyConfigError(f"{path}: not valid YAML: {e}") from None
    return parse_config(raw, str(path))
