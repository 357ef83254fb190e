"""Reading and writing robot logs (CSV or Parquet) in fg-sysid's schema.

Schema (see ``docs/data-format.md``): a column ``t`` [s] (strictly increasing), and per robot joint
``q.<joint>`` [rad | m] (required), ``v.<joint>`` [rad/s | m/s] (optional, all joints or none) and
``tau.<joint>`` [N·m | N] (optional; absent or all-NaN = not measured), and the optional
floating-base groups ``imu.gyro.{x,y,z}``, ``imu.acc.{x,y,z}``, ``imu.quat.{w,x,y,z}``,
``base.pos.{x,y,z}``, ``base.quat.{w,x,y,z}``, ``contact.<frame>``, ``force.<frame>.{x,y,z}`` and
``torque.<frame>.{x,y,z}``. Other columns are kept in ``Log.extra``. Every validation failure
raises `LogError` with one message naming the file, the column and, where it applies, the row
(0-based data row; for CSV also the file line).
"""

from __future__ import annotations

import os
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from ..robots import RobotModel, load_robot
from .errors import BAG_REPORT_ATTR, LogError  # noqa: F401 (LogError is part of this module's API)
from .log import Log

#: Plausibility bounds: anything larger is taken as a unit or parsing error.
MAX_ABS_Q = 100.0  # rad | m
MAX_ABS_V = 1000.0  # rad/s | m/s
MAX_ABS_TAU = 1e5  # N·m | N
MAX_NORM_GYRO = 100.0  # rad/s
MAX_NORM_ACC = 1000.0  # m/s²
MAX_NORM_BASE_POS = 1e4  # m
MAX_NORM_FORCE = 1e5  # N
MAX_NORM_TORQUE = 1e5  # N·m
#: A logged quaternion whose norm differs from 1 by more than this is an error (else it is normalised).
QUAT_NORM_TOLERANCE = 1e-3

#: Logged position of a locked joint further than this from its lock value triggers a warning.
LOCK_TOLERANCE = 0.05

_KINDS = ("q", "v", "tau")
_XYZ = ("x", "y", "z")
_WXYZ = ("w", "x", "y", "z")
#: Fixed column groups: Log field -> (column prefix, components, magnitude bound, unit);
#: bound None = unit quaternion.
_GROUPS = {
    "imu_gyro": ("imu.gyro", _XYZ, MAX_NORM_GYRO, "rad/s"),
    "imu_acc": ("imu.acc", _XYZ, MAX_NORM_ACC, "m/s²"),
    "imu_quat": ("imu.quat", _WXYZ, None, ""),
    "base_pos": ("base.pos", _XYZ, MAX_NORM_BASE_POS, "m"),
    "base_quat": ("base.quat", _WXYZ, None, ""),
}
#: Per-frame wrench groups: Log field -> (column kind, magnitude bound, unit).
_WRENCHES = {"forces": ("force", MAX_NORM_FORCE, "N"), "torques": ("torque", MAX_NORM_TORQUE, "N·m")}
SUPPORTED_SUFFIXES = (".csv", ".parquet", ".pq")


# ---------------------------------------------------------------------------------------------- reading
def _read_table(path: Path) -> pd.DataFrame:
    if not path.is_file():
        raise LogError(f"{path}: log file not found")
    suffix = path.suffix.lower()
    try:
        if suffix == ".csv":
            df = pd.read_csv(path)
        elif suffix in (".parquet", ".pq"):
            df = pd.read_parquet(path)
        else:
            raise LogError(f"{path}: unsupported log format {suffix!r}; use one of {SUPPORTED_SUFFIXES}")
    except LogError:
        raise
    except Exception as e:  # pandas/pyarrow raise many types
        raise LogError(f"{path}: cannot read log: {type(e).__name__}: {e}") from None
    df.columns = [str(c).strip() for c in df.columns]
    dup = df.columns[df.columns.duplicated()].tolist()
    if dup:
        raise LogError(f"{path}: duplicate column(s) {dup}")
    return df


def _num(x) -> str:
    """A number as users write it (``0.015``, never ``np.float64(0.015)``): shortest round-trip repr."""
    x = float(x)
    return repr(int(x)) if x.is_integer() and abs(x) < 1e16 else repr(x)


def _row_ref(path: Path, row: int) -> str:
    if path.suffix.lower() == ".csv":
        return f"row {row} (CSV line {row + 2})"
    return f"row {row}"


def _split_column(col: str) -> tuple[str, str] | None:
    """``"q.joint1"`` -> ("q", "joint1"); None for columns outside the joint schema."""
    kind, sep, joint = col.partition(".")
    if sep and kind in _KINDS and joint:
        return kind, joint
    return None


def log_joint_names(columns) -> list[str]:
    """Joints named by a table's ``q.``/``v.``/``tau.`` columns, in order of first appearance."""
    seen: dict[str, None] = {}
    for c in columns:
        s = _split_column(str(c).strip())
        if s is not None:
            seen.setdefault(s[1], None)
    return list(seen)


def _numeric(df: pd.DataFrame, col: str, path: Path) -> np.ndarray:
    s = df[col]
    if not pd.api.types.is_numeric_dtype(s.dtype) or pd.api.types.is_bool_dtype(s.dtype):
        conv = pd.to_numeric(s, errors="coerce")
        bad = np.flatnonzero(conv.isna().to_numpy() & s.notna().to_numpy())
        if bad.size:
            r = int(bad[0])
            raise LogError(f"{path}: column {col!r}, {_row_ref(path, r)}: not a number: {s.iloc[r]!r}")
        s = conv
    return s.to_numpy(dtype=float, na_value=np.nan)


def _check_finite(x: np.ndarray, col: str, path: Path) -> None:
    bad = np.flatnonzero(~np.isfinite(x))
    if bad.size:
        r = int(bad[0])
        raise LogError(
            f"{path}: column {col!r}, {_row_ref(path, r)}: value {x[r]} is not finite "
            f"({bad.size} bad row(s) in this column)"
        )


def _check_bound(x: np.ndarray, col: str, path: Path, bound: float, unit: str) -> None:
    bad = np.flatnonzero(np.abs(x) > bound)
    if bad.size:
        r = int(bad[0])
        raise LogError(
            f"{path}: column {col!r}, {_row_ref(path, r)}: implausible value {x[r]:g} "
            f"(|value| > {bound:g} {unit}; wrong units?)"
        )


def _group_cols(prefix: str, comps: tuple[str, ...]) -> list[str]:
    return [f"{prefix}.{c}" for c in comps]


def _check_group_complete(df: pd.DataFrame, prefix: str, comps: tuple[str, ...], path: Path) -> bool:
    """True if the group is present (all components), False if absent; error if partial or odd."""
    cols = _group_cols(prefix, comps)
    present = [c for c in df.columns if c.startswith(prefix + ".")]
    odd = [c for c in present if c not in cols]
    if odd:
        raise LogError(f"{path}: column {odd[0]!r}: unknown component of group '{prefix}' "
                       f"(expected columns {cols})")
    if not present:
        return False
    missing = [c for c in cols if c not in present]
    if missing:
        raise LogError(f"{path}: column {missing[0]!r} missing (all missing: {missing}); group "
                       f"'{prefix}' needs all of {cols}")
    return True


def _check_norm(x: np.ndarray, cols: list[str], path: Path, bound: float, unit: str) -> None:
    norm = np.linalg.norm(x, axis=1)
    bad = np.flatnonzero(norm > bound)
    if bad.size:
        r = int(bad[0])
        raise LogError(f"{path}: columns {cols}, {_row_ref(path, r)}: implausible magnitude "
                       f"{norm[r]:g} (> {bound:g} {unit}; wrong units?)")


def _normalised_quaternion(x: np.ndarray, cols: list[str], path: Path) -> np.ndarray:
    norm = np.linalg.norm(x, axis=1)
    bad = np.flatnonzero(np.abs(norm - 1.0) > QUAT_NORM_TOLERANCE)
    if bad.size:
        r = int(bad[0])
        raise LogError(f"{path}: columns {cols}, {_row_ref(path, r)}: quaternion norm {norm[r]:.6g} is "
                       f"not 1 (tolerance {QUAT_NORM_TOLERANCE:g}; {bad.size} bad row(s))")
    x = x.copy()
    fix = np.abs(norm - 1.0) > 1e-12  # leave already-unit rows bit-identical (exact round trips)
    x[fix] /= norm[fix, None]
    return x


def _known_frames(robot: RobotModel) -> list[str]:
    return list(dict.fromkeys(f.name for f in robot.model.frames))


def _check_frame(robot: RobotModel, frame: str, col: str, path: Path) -> None:
    if not robot.model.existFrame(frame):
        raise LogError(f"{path}: column {col!r} names unknown frame {frame!r}; robot {robot.name!r} "
                       f"frames: {_known_frames(robot)}")


def _read_floating_base(df: pd.DataFrame, path: Path, robot: RobotModel) -> tuple[dict, set]:
    """Parse the optional imu/base/contact/force/torque columns: (Log keyword arguments, used columns)."""
    out: dict = {}
    used: set = set()
    for name, (prefix, comps, bound, unit) in _GROUPS.items():
        if not _check_group_complete(df, prefix, comps, path):
            continue
        cols = _group_cols(prefix, comps)
        x = np.column_stack([_numeric(df, c, path) for c in cols])
        for i, c in enumerate(cols):
            _check_finite(x[:, i], c, path)
        if bound is None:
            x = _normalised_quaternion(x, cols, path)
        else:
            _check_norm(x, cols, path, bound, unit)
        out[name] = x
        used.update(cols)

    contacts = {}
    for c in df.columns:
        if not c.startswith("contact."):
            continue
        frame = c[len("contact."):]
        if not frame:
            raise LogError(f"{path}: column {c!r}: no frame name (expected 'contact.<frame>')")
        _check_frame(robot, frame, c, path)
        x = _numeric(df, c, path)
        _check_finite(x, c, path)
        bad = np.flatnonzero((x != 0.0) & (x != 1.0))
        if bad.size:
            r = int(bad[0])
            raise LogError(f"{path}: column {c!r}, {_row_ref(path, r)}: contact flag {x[r]:g} is not 0 or 1")
        contacts[frame] = x == 1.0
        used.add(c)
    out["contacts"] = contacts

    for name, (kind, bound, unit) in _WRENCHES.items():
        frames: dict[str, None] = {}
        for c in df.columns:
            if c.startswith(kind + "."):
                frame, sep, comp = c[len(kind) + 1:].rpartition(".")
                if not sep or not frame or comp not in _XYZ:
                    raise LogError(f"{path}: column {c!r}: expected '{kind}.<frame>.x|y|z'")
                frames.setdefault(frame, None)
        wrenches = {}
        for frame in frames:
            prefix = f"{kind}.{frame}"
            cols = _group_cols(prefix, _XYZ)
            _check_frame(robot, frame, cols[0], path)
            _check_group_complete(df, prefix, _XYZ, path)
            x = np.column_stack([_numeric(df, c, path) for c in cols])
            for i, c in enumerate(cols):
                nan = np.isnan(x[:, i])
                if nan.all():
                    continue  # not measured (like tau)
                if nan.any():
                    r = int(np.flatnonzero(nan)[0])
                    raise LogError(
                        f"{path}: column {c!r}, {_row_ref(path, r)}: missing {kind} value ({int(nan.sum())} "
                        f"of {len(x)} rows are NaN; a column must be fully measured or all NaN)"
                    )
                _check_finite(x[:, i], c, path)
            _check_norm(np.nan_to_num(x, nan=0.0), cols, path, bound, unit)
            wrenches[frame] = x
            used.update(cols)
        out[name] = wrenches
    return out, used


def read_log(path: str | os.PathLike, robot: RobotModel, locked_values: dict | None = None, *,
             bag_options=None, echo=None, _frame: pd.DataFrame | None = None) -> Log:
    """Read and validate a log for ``robot`` (CSV or Parquet by the file suffix, or a ROS bag).

    ROS bags (a rosbag2 directory with ``metadata.yaml``, its ``.db3``/``.mcap`` file, or a ROS 1
    ``.bag``) are converted by `fg_sysid.datasets.rosbag.read_bag_frame` (``bag_options``: a
    `BagOptions`; ``echo``: callable receiving its one-line report) and then validated like a table;
    `fg_sysid.datasets.rosbag.conversion_report(log)` returns what the conversion did.

    Columns are mapped to ``robot.joint_names`` order. Rules (each violation raises `LogError`):

    * ``t`` present, finite, strictly increasing; at least 2 rows;
    * ``q.<joint>`` present for every robot joint; ``q``/``v``/``tau`` columns of joints the robot
      does not have are errors, except joints the robot has *locked* (those columns go to ``extra``);
    * ``v.<joint>`` for all joints or for none (none -> ``Log.v is None``); q and v finite;
    * ``tau.<joint>`` absent or all-NaN -> not measured (NaN column, one warning naming the joints);
      a tau column with *some* NaN rows, or any inf, is an error naming the first bad row;
    * |q| <= 100, |v| <= 1000, |tau| <= 1e5 (else: implausible value, probably wrong units);
    * optional groups ``imu.gyro.{x,y,z}``, ``imu.acc.{x,y,z}``, ``imu.quat.{w,x,y,z}``,
      ``base.pos.{x,y,z}``, ``base.quat.{w,x,y,z}``: complete, finite, row norm <= 100 rad/s (gyro),
      1000 m/s² (acc), 1e4 m (pos), quaternion norm within 1e-3 of 1 (then normalised);
    * ``contact.<frame>``: 0/1, finite, frame of the robot model; ``force.<frame>.{x,y,z}`` /
      ``torque.<frame>.{x,y,z}``: complete, frame of the model, each column finite or all NaN
      (= not measured), row norm <= 1e5 N / N·m.

    Floating-base robots: ``q.``/``v.``/``tau.`` columns are the joints only (``robot.joint_names``
    excludes the free-flyer root); the base pose comes from the ``base.*`` columns when present.

    ``locked_values`` (joint -> value) overrides the lock values of ``robot.locked_joints`` used to
    check logged columns of locked joints (a warning if they stray more than 0.05 from the lock).
    """
    path = Path(path)
    if _frame is not None:
        df = _frame
    else:
        df = _read_any(path, bag_options, echo)
    if "t" not in df.columns:
        raise LogError(f"{path}: missing time column 't' (columns: {list(df.columns)[:12]})")
    if len(df) < 2:
        raise LogError(f"{path}: log has {len(df)} row(s); at least 2 are needed")

    robot_joints = list(robot.joint_names)
    locked = dict(robot.locked_joints)
    locked.update(locked_values or {})
    log_joints = log_joint_names(df.columns)
    unknown = [j for j in log_joints if j not in robot_joints and j not in locked]
    if unknown:
        col = next(c for c in df.columns if (s := _split_column(c)) is not None and s[1] == unknown[0])
        raise LogError(
            f"{path}: column {col!r} names unknown joint {unknown[0]!r} (all unknown: {unknown}); "
            f"robot {robot.name!r} joints: {robot_joints}"
            + (f"; locked: {list(locked)}" if locked else "")
        )
    unencoded = set(robot.actuation.unencoded) if robot.actuation is not None else set()  # closed loops
    missing_q = [j for j in robot_joints if f"q.{j}" not in df.columns and j not in unencoded]
    if missing_q:
        raise LogError(
            f"{path}: missing position column 'q.{missing_q[0]}' for robot joint {missing_q[0]!r} "
            f"(all missing: {missing_q}); the log's joints: {log_joints}"
        )

    t = _numeric(df, "t", path)
    _check_finite(t, "t", path)
    dt = np.diff(t)
    bad = np.flatnonzero(dt <= 0)
    if bad.size:
        r = int(bad[0]) + 1
        what = "duplicate" if dt[r - 1] == 0 else "decreasing"
        raise LogError(
            f"{path}: column 't', {_row_ref(path, r)}: {what} time {_num(t[r])} after {_num(t[r - 1])} "
            "(time must be strictly increasing)"
        )

    n, N = len(robot_joints), len(t)
    q = np.empty((N, n))
    for i, j in enumerate(robot_joints):
        col = f"q.{j}"
        if j in unencoded and col not in df.columns:  # no encoder: states from the loop closures
            q[:, i] = np.nan
            continue
        q[:, i] = _numeric(df, col, path)
        _check_finite(q[:, i], col, path)
        _check_bound(q[:, i], col, path, MAX_ABS_Q, "rad|m")

    v_present = [j for j in robot_joints if f"v.{j}" in df.columns]
    v = None
    if v_present:
        missing_v = [j for j in robot_joints if j not in v_present and j not in unencoded]
        if missing_v:
            raise LogError(
                f"{path}: velocity column 'v.{missing_v[0]}' missing (all missing: {missing_v}); "
                "give v for every joint or for none"
            )
        v = np.empty((N, n))
        for i, j in enumerate(robot_joints):
            col = f"v.{j}"
            if j not in v_present:  # unencoded joint
                v[:, i] = np.nan
                continue
            v[:, i] = _numeric(df, col, path)
            _check_finite(v[:, i], col, path)
            _check_bound(v[:, i], col, path, MAX_ABS_V, "rad/s|m/s")

    tau = np.full((N, n), np.nan)
    not_measured = []
    for i, j in enumerate(robot_joints):
        col = f"tau.{j}"
        if col not in df.columns:
            not_measured.append(j)
            continue
        x = _numeric(df, col, path)
        nan = np.isnan(x)
        if nan.all():
            not_measured.append(j)
            continue
        if nan.any():
            r = int(np.flatnonzero(nan)[0])
            raise LogError(
                f"{path}: column {col!r}, {_row_ref(path, r)}: missing effort value "
                f"({int(nan.sum())} of {N} rows are NaN; a column must be fully measured or all NaN)"
            )
        _check_finite(x, col, path)
        _check_bound(x, col, path, MAX_ABS_TAU, "N·m|N")
        tau[:, i] = x
    if robot.actuation is not None:  # passive joints of a closed loop have no effort by design
        not_measured = [j for j in not_measured if j not in robot.actuation.passive]
    if not_measured:
        warnings.warn(f"{path}: effort not measured (column absent or all NaN) for joint(s): "
                      + ", ".join(not_measured), stacklevel=2)
    zero = [f"tau.{j}" for i, j in enumerate(robot_joints) if j not in not_measured and not np.any(tau[:, i])]
    if zero:
        warnings.warn(f"{path}: effort column(s) entirely zero: {', '.join(zero)} (read as measured zero "
                      "efforts; write NaN or leave the column out if the effort was not logged)",
                      stacklevel=2)

    fb, fb_used = _read_floating_base(df, path, robot)
    used = {"t"} | {f"{k}.{j}" for k in _KINDS for j in robot_joints} | fb_used
    extra = {}
    for c in df.columns:
        if c in used:
            continue
        try:
            extra[c] = _numeric(df, c, path)
        except LogError:
            extra[c] = df[c].to_numpy()
    _warn_unknown_columns(path, list(extra), locked, robot_joints, fb_used)
    for j, val in locked.items():
        col = f"q.{j}"
        if col in extra and val is not None:
            x = np.asarray(extra[col], dtype=float)
            dev = np.nanmax(np.abs(x - val)) if np.isfinite(x).any() else 0.0
            if dev > LOCK_TOLERANCE:
                warnings.warn(f"{path}: joint {j!r} is locked at {val:g} in the model but its logged "
                              f"position departs from it by up to {dev:.3g}", stacklevel=2)

    log = Log(t=t, q=q, v=v, tau=tau, joint_names=tuple(robot_joints), source=str(path), extra=extra, **fb)
    report = df.attrs.get(BAG_REPORT_ATTR)
    if report is not None:
        from .rosbag import register_report

        register_report(log, report)
    return log


def _warn_unknown_columns(path: Path, extra_cols: list[str], locked: dict, robot_joints: list[str],
                          used: set) -> None:
    """One warning naming the columns outside the schema (kept in ``Log.extra``, unused), with the
    closest schema column for likely typos (``tua.joint1`` -> ``tau.joint1``)."""
    import difflib

    ignored = [c for c in extra_cols if not ((s := _split_column(c)) is not None and s[1] in locked)]
    if not ignored:
        return
    expected = [f"{k}.{j}" for k in _KINDS for j in robot_joints] + ["t"] + sorted(used)
    expected += [f"{p}.{c}" for p, comps, _, _ in _GROUPS.values() for c in comps]
    parts = []
    for c in ignored:
        close = difflib.get_close_matches(c, expected, n=1, cutoff=0.8)
        parts.append(f"{c!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    warnings.warn(f"{path}: column(s) outside the log schema are ignored by the estimators: "
                  + ", ".join(parts), stacklevel=3)


def _read_any(path: Path, bag_options=None, echo=None) -> pd.DataFrame:
    """A table from a CSV/Parquet file or a ROS bag (see `read_log`)."""
    from .rosbag import is_bag, read_bag_frame

    if is_bag(path):
        return read_bag_frame(path, bag_options, echo=echo)
    return _read_table(path)


# ---------------------------------------------------------------------------------------------- writing
def log_to_frame(log: Log) -> pd.DataFrame:
    """The log as a table in the on-disk schema (t, q.*, v.*, tau.*, imu.*, base.*, contact.*,
    force.*, torque.*, then 1-D extra columns)."""
    cols: dict[str, np.ndarray] = {"t": np.asarray(log.t, float)}
    for kind, arr in (("q", log.q), ("v", log.v), ("tau", log.tau)):
        if arr is None:
            continue
        for i, j in enumerate(log.joint_names):
            cols[f"{kind}.{j}"] = np.asarray(arr[:, i], float)
    for name, (prefix, comps, _, _) in _GROUPS.items():
        arr = getattr(log, name)
        if arr is not None:
            arr = np.asarray(arr, float)
            for i, c in enumerate(comps):
                cols[f"{prefix}.{c}"] = arr[:, i]
    for frame, flag in log.contacts.items():
        cols[f"contact.{frame}"] = np.asarray(flag).astype(np.int8)
    for name, (kind, _, _) in _WRENCHES.items():
        for frame, arr in getattr(log, name).items():
            arr = np.asarray(arr, float)
            for i, c in enumerate(_XYZ):
                cols[f"{kind}.{frame}.{c}"] = arr[:, i]
    for k, x in log.extra.items():
        x = np.asarray(x)
        if k not in cols and x.ndim == 1 and x.shape[0] == log.n_samples:
            cols[k] = x
    return pd.DataFrame(cols)


def write_frame(df: pd.DataFrame, path: str | os.PathLike) -> Path:
    """Write a table to ``path`` (.csv or .parquet) atomically (temporary file, then os.replace)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        raise LogError(f"{path}: unsupported log format {suffix!r}; use one of {SUPPORTED_SUFFIXES}")
    parent = path.parent if str(path.parent) else Path(".")
    parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.tmp-", suffix=suffix, dir=parent)
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    try:
        if suffix == ".csv":
            df.to_csv(tmp, index=False)
        else:
            df.to_parquet(tmp, index=False)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def write_log(log: Log, path: str | os.PathLike) -> Path:
    """Write ``log`` as CSV or Parquet (by suffix), atomically. Floats round-trip exactly."""
    return write_frame(log_to_frame(log), path)


# ---------------------------------------------------------------------------------------------- helpers
def load_log_for_robot(
    path: str | os.PathLike, robot_name_or_urdf: str | os.PathLike | RobotModel, *, bag_options=None,
    echo=None,
) -> tuple[RobotModel, Log]:
    """Load a robot and a log together: robot joints absent from the log are locked at neutral.

    ``robot_name_or_urdf`` is a catalog name, a URDF path or a `RobotModel`; ROS bags are
    read as in `read_log` (``bag_options``, ``echo``). Joints of the robot with no ``q.<joint>``
    column are locked (``robot.lock({joint: None})``) with one warning naming them;
    log joints the robot does not have are an error (`LogError`). Returns the consistent
    ``(robot, log)`` pair (``log.joint_names == robot.joint_names``).
    """
    path = Path(path)
    if isinstance(robot_name_or_urdf, RobotModel):
        robot = robot_name_or_urdf
    else:
        robot = load_robot(robot_name_or_urdf)
    from .rosbag import is_bag, read_bag_frame

    frame = None
    if is_bag(path):
        frame = read_bag_frame(path, bag_options, echo=echo)
        columns = list(frame.columns)
    elif not path.is_file():
        raise LogError(f"{path}: log file not found")
    elif path.suffix.lower() == ".csv":
        try:
            columns = list(pd.read_csv(path, nrows=0).columns)
        except Exception as e:
            raise LogError(f"{path}: cannot read log: {type(e).__name__}: {e}") from None
    else:
        columns = list(_read_table(path).columns)
    robot = lock_absent_joints(robot, columns, path)
    return robot, read_log(path, robot, _frame=frame)


def lock_absent_joints(robot: RobotModel, columns, path, stacklevel: int = 2) -> RobotModel:
    """``robot`` with the joints that have no ``q.<joint>`` column in ``columns`` locked at neutral (one
    warning naming them, ``stacklevel`` counted from the caller); unencoded joints of a closed loop stay
    free. `LogError` when no joint matches. Shared by `load_log_for_robot` and the online stream reader."""
    columns = [str(c).strip() for c in columns]
    logged = {j for j in log_joint_names(columns) if f"q.{j}" in columns}
    unencoded = robot.actuation.unencoded if robot.actuation is not None else ()
    absent = [j for j in robot.joint_names if j not in logged and j not in unencoded]  # (closed loops)
    if absent and len(absent) == len(robot.joint_names):
        raise LogError(
            f"{path}: no position column matches a joint of robot {robot.name!r}; the log's joints: "
            f"{log_joint_names(columns)}; robot joints: {list(robot.joint_names)}"
        )
    if absent:
        robot = robot.lock({j: None for j in absent})
        warnings.warn(
            f"{path}: {len(absent)} joint(s) of robot {robot.name!r} absent from the log are locked at "
            "neutral: " + ", ".join(absent),
            stacklevel=stacklevel + 1,
        )
    return robot
