"""ROS logs: rosbag2 (sqlite3 ``.db3`` or MCAP) and ROS 1 ``.bag`` read into fg-sysid's log table.

No ROS install is needed: `rosbags <https://gitlab.com/ternaris/rosbags>`_ (pure Python) reads and
writes every format. What is read (see ``docs/data-format.md``, section "ROS bags"):

* ``sensor_msgs/msg/JointState`` (one topic; ``BagOptions.joint_states_topic``, default: the only
  topic of that type): ``position`` -> ``q.<name>`` [rad | m], ``velocity`` -> ``v.<name>``,
  ``effort`` -> ``tau.<name>`` [N·m | N], matched **by joint name**, so messages may carry any subset of
  the joints in any order (drivers that publish one message per joint group are fine). An empty
  ``velocity``/``effort`` array means "not given" in that message.
* ``sensor_msgs/msg/Imu`` (``imu_topic``, default: the only topic of that type, if any):
  ``angular_velocity`` -> ``imu.gyro.*`` [rad/s], ``linear_acceleration`` -> ``imu.acc.*`` [m/s²]
  (IMU frame), ``orientation`` -> ``imu.quat.{w,x,y,z}`` unless ``orientation_covariance[0] == -1``
  (the ROS convention for "no orientation").
* contact flags (``contact_topics``: ``(frames, topic)`` pairs): ``std_msgs/msg/Bool`` or a numeric
  scalar (``std_msgs/msg/{Int,UInt}{8,16,32,64}``, ``Float32``, ``Float64``; 0 or 1) for one frame, or
  a message with a ``data`` array (``std_msgs/msg/*MultiArray``, ``Int8MultiArray``...) with one entry
  per listed frame -> ``contact.<frame>``.

Time stamps: ``header.stamp`` when every message of the topic has a non-zero one, else the bag's
receive time (``BagOptions.time_source = "receive"`` forces the latter). Each channel (a joint's
position, velocity or effort, the IMU, a contact topic) is sorted, duplicated stamps keep the last
message, non-finite values are dropped; then every channel is resampled onto one **uniform clock**
(``rate``, default: the median rate of the joint-state stream) over the span that all continuous
channels cover: linear interpolation for q, v, tau, gyro and acceleration, spherical linear
interpolation for the orientation, zero-order hold for contact flags. ``t`` starts at 0 at the first
resampled instant; its absolute time is in the report. What was done is returned as a report
(`conversion_report`): a one-line summary for the user and per-topic details for ``summary.json``.
"""

from __future__ import annotations

import os
import warnings
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .errors import BAG_REPORT_ATTR, LogError
from .log import Log

BAG_SUFFIXES = (".bag", ".db3", ".mcap")
JOINT_STATE = "sensor_msgs/msg/JointState"
IMU = "sensor_msgs/msg/Imu"
SCALAR_CONTACT_TYPES = ("std_msgs/msg/Bool",) + tuple(
    f"std_msgs/msg/{k}" for k in ("Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32", "UInt64",
                                  "Float32", "Float64", "Byte", "Char"))
#: A gap between two messages of a channel longer than this many median intervals is reported.
GAP_FACTOR = 5.0
TIME_SOURCES = ("header", "receive")

_REPORTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class BagOptions:
    """How to read a bag. Topics None = pick the only topic of the expected type.

    Attributes:
        joint_states_topic: ``sensor_msgs/msg/JointState`` topic (required to exist).
        imu_topic: ``sensor_msgs/msg/Imu`` topic; None = the only Imu topic if there is exactly one;
            ``""`` = ignore IMU topics.
        contact_topics: ``((frame, ...), topic)`` pairs (see the module docstring).
        rate: resampling rate [Hz]; None = median rate of the joint-state stream.
        time_source: ``"header"`` (``header.stamp`` when set) or ``"receive"`` (bag time).
    """

    joint_states_topic: str | None = None
    imu_topic: str | None = None
    contact_topics: tuple = ()
    rate: float | None = None
    time_source: str = "header"


def parse_contact_topic(spec: str) -> tuple[tuple[str, ...], str]:
    """``"FL_foot=/contacts/fl"`` or ``"FL_foot,FR_foot=/contacts"`` -> ((frames...), topic)."""
    frames, sep, topic = str(spec).partition("=")
    names = tuple(f.strip() for f in frames.split(",") if f.strip())
    if not sep or not names or not topic.strip():
        raise LogError(f"contact topic {spec!r}: expected FRAME=TOPIC or FRAME1,FRAME2,...=TOPIC")
    return names, topic.strip()


def is_bag(path: str | os.PathLike) -> bool:
    """A ROS bag: a directory (rosbag2), or a ``.bag`` / ``.db3`` / ``.mcap`` file."""
    path = Path(path)
    return path.is_dir() or path.suffix.lower() in BAG_SUFFIXES


def register_report(log: Log, report: dict) -> None:
    _REPORTS[log] = report


def conversion_report(log: Log) -> dict | None:
    """What `read_bag_frame` did for the bag ``log`` was read from (None for CSV/Parquet logs)."""
    try:
        return _REPORTS.get(log)
    except TypeError:
        return None


# ---------------------------------------------------------------------------------------------- reading
class _Channel:
    """Samples of one quantity: integer-nanosecond stamps and (n, k) values."""

    def __init__(self, name: str, topic: str):
        self.name, self.topic = name, topic
        self.t: list[int] = []
        self.x: list = []

    def add(self, t: int, x) -> None:
        self.t.append(t)
        self.x.append(x)

    def clean(self, stats: dict) -> tuple[np.ndarray, np.ndarray]:
        """Sorted, unique stamps (last message wins), finite rows only."""
        t = np.asarray(self.t, dtype=np.int64)
        x = np.asarray(self.x, dtype=float).reshape(len(self.t), -1)
        if t.size and np.any(np.diff(t) < 0):
            stats["out_of_order"] = stats.get("out_of_order", 0) + int(np.sum(np.diff(t) < 0))
        order = np.argsort(t, kind="stable")
        t, x = t[order], x[order]
        keep = np.ones(t.size, bool)
        keep[:-1] = t[1:] != t[:-1]  # of equal stamps keep the last
        if (~keep).any():
            stats["duplicates_dropped"] = stats.get("duplicates_dropped", 0) + int((~keep).sum())
        t, x = t[keep], x[keep]
        fin = np.all(np.isfinite(x), axis=1)
        if (~fin).any():
            stats["nonfinite_dropped"] = stats.get("nonfinite_dropped", 0) + int((~fin).sum())
        return t[fin], x[fin]


def _stamp(msg, receive_ns: int) -> int:
    h = getattr(msg, "header", None)
    if h is None:
        return 0
    return int(h.stamp.sec) * 1_000_000_000 + int(h.stamp.nanosec)


def _pick_topic(path, conns, msgtype: str, wanted: str | None, required: bool, option: str) -> str | None:
    by_topic = {c.topic: c.msgtype for c in conns}
    of_type = sorted(t for t, m in by_topic.items() if m == msgtype)
    if wanted is not None:
        if wanted == "":
            return None
        if wanted not in by_topic:
            raise LogError(f"{path}: topic {wanted!r} ({option}) is not in the bag; its topics: "
                           + ", ".join(f"{t} [{m}]" for t, m in sorted(by_topic.items())))
        if by_topic[wanted] != msgtype:
            raise LogError(f"{path}: topic {wanted!r} ({option}) has type {by_topic[wanted]}, not {msgtype}")
        return wanted
    if len(of_type) == 1:
        return of_type[0]
    if len(of_type) > 1:
        raise LogError(f"{path}: {len(of_type)} topics of type {msgtype}: {', '.join(of_type)}; choose one "
                       f"with {option}")
    if required:
        raise LogError(f"{path}: no {msgtype} topic in the bag; its topics: "
                       + (", ".join(f"{t} [{m}]" for t, m in sorted(by_topic.items())) or "none"))
    return None


def _bag_format(path: Path) -> str:
    if path.suffix.lower() == ".bag":
        return "ROS 1"
    if path.suffix.lower() == ".mcap":
        return "rosbag2 (mcap)"
    if path.suffix.lower() == ".db3":
        return "rosbag2 (sqlite3)"
    try:
        import yaml

        meta = yaml.safe_load((path / "metadata.yaml").read_text())
        return f"rosbag2 ({meta['rosbag2_bagfile_information']['storage_identifier']})"
    except Exception:
        return "rosbag2"


def read_bag_frame(path: str | os.PathLike, options: BagOptions | None = None,
                   echo: Callable[[str], None] | None = None) -> pd.DataFrame:
    """Read a ROS bag into a log table (columns of ``docs/data-format.md``) on a uniform clock.

    Raises `LogError` (`fg_sysid.datasets.io.LogError`; one message naming the bag and topic) for
    unreadable bags, missing or ambiguous topics and unusable contents. The report of the conversion is in
    ``frame.attrs[fg_sysid.datasets.errors.BAG_REPORT_ATTR]``; ``echo`` receives its one-line summary.
    """

    path = Path(path)
    opts = options or BagOptions()
    if not path.exists():
        raise LogError(f"{path}: log file or bag not found")
    if path.is_dir() and not (path / "metadata.yaml").is_file():
        raise LogError(f"{path}: a directory, but not a rosbag2 bag (no metadata.yaml); give a log file "
                       "(.csv, .parquet) or a bag (rosbag2 directory, .db3, .mcap, ROS 1 .bag)")
    if opts.time_source not in TIME_SOURCES:
        raise LogError(f"time source must be one of {TIME_SOURCES}, not {opts.time_source!r}")
    if opts.rate is not None and not (np.isfinite(opts.rate) and opts.rate > 0):
        raise LogError(f"resampling rate must be a positive number of Hz, got {opts.rate}")
    try:
        raw = _read_messages(path, opts)
    except LogError:
        raise
    except Exception as e:  # rosbags raises many types for damaged or foreign files
        raise LogError(f"{path}: cannot read ROS bag: {type(e).__name__}: {e}") from None
    df, report = _resample(path, opts, raw)
    report["format"] = _bag_format(path)
    df.attrs[BAG_REPORT_ATTR] = report
    if echo is not None:
        echo(report["message"])
    return df


def _read_messages(path: Path, opts: BagOptions) -> dict:
    """Raw channels per topic (stamps in ns, chosen time source)."""
    from rosbags.highlevel import AnyReader
    from rosbags.typesys import Stores, get_typestore

    contact_topics = [(tuple(f), str(t)) for f, t in opts.contact_topics]
    with AnyReader([path], default_typestore=get_typestore(Stores.ROS2_HUMBLE)) as reader:
        conns = reader.connections
        js = _pick_topic(path, conns, JOINT_STATE, opts.joint_states_topic, True, "--joint-states-topic")
        imu = _pick_topic(path, conns, IMU, opts.imu_topic, False, "--imu-topic")
        by_topic = {c.topic: c.msgtype for c in conns}
        for frames, topic in contact_topics:
            if topic not in by_topic:
                raise LogError(f"{path}: contact topic {topic!r} (frames {', '.join(frames)}) is not in the "
                               "bag; "
                               f"its topics: {', '.join(sorted(by_topic))}")
        topics = {js, imu} | {t for _, t in contact_topics}
        topics.discard(None)
        per_topic: dict[str, list] = {t: [] for t in topics}
        for conn, ts, rawdata in reader.messages(connections=[c for c in conns if c.topic in topics]):
            msg = reader.deserialize(rawdata, conn.msgtype)
            per_topic[conn.topic].append((int(ts), _stamp(msg, int(ts)), msg))
    return {"joint_states": js, "imu": imu, "contacts": contact_topics, "messages": per_topic,
            "types": {t: by_topic[t] for t in topics}}


def _times(msgs: list, opts: BagOptions) -> tuple[list[int], str]:
    if opts.time_source == "header" and msgs and all(s != 0 for _, s, _ in msgs):
        return [s for _, s, _ in msgs], "header.stamp"
    return [r for r, _, _ in msgs], "receive time"


def _resample(path: Path, opts: BagOptions, raw: dict) -> tuple[pd.DataFrame, dict]:
    js = raw["joint_states"]
    msgs = raw["messages"][js]
    if not msgs:
        raise LogError(f"{path}: topic {js!r} has no messages")
    topics_report: dict[str, dict] = {}
    notes: list[str] = []

    # ---------------------------------------------------------------- joint states -> channels
    stamps, tsrc = _times(msgs, opts)
    stats: dict = {"type": JOINT_STATE, "messages": len(msgs), "time_source": tsrc}
    channels: dict[str, dict[str, _Channel]] = {}
    for (_, _, m), t in zip(msgs, stamps, strict=True):
        names = list(m.name)
        pos, vel, eff = (np.asarray(getattr(m, k), float).ravel() for k in ("position", "velocity", "effort"))
        for kind, arr in (("q", pos), ("v", vel), ("tau", eff)):
            if arr.size == 0:
                continue
            if arr.size != len(names):
                raise LogError(f"{path}: topic {js!r}: a message has {len(names)} names but {arr.size} "
                               f"{ {'q': 'position', 'v': 'velocity', 'tau': 'effort'}[kind]} values")
            for j, x in zip(names, arr, strict=True):
                channels.setdefault(j, {}).setdefault(kind, _Channel(f"{kind}.{j}", js)).add(t, x)
    joints = list(channels)
    without_q = [j for j in joints if "q" not in channels[j]]
    if without_q:
        notes.append(f"joint(s) with no position in {js}: {', '.join(without_q)} (left out)")
        joints = [j for j in joints if "q" in channels[j]]
    if not joints:
        raise LogError(f"{path}: topic {js!r}: no message carries a joint position")
    cleaned: dict[str, tuple[np.ndarray, np.ndarray, str]] = {}  # column -> (t_ns, x, topic)
    for j in joints:
        for kind, ch in channels[j].items():
            t, x = ch.clean(stats)
            if t.size:
                cleaned[f"{kind}.{j}"] = (t, x[:, 0], js)
    no_v = [j for j in joints if f"v.{j}" not in cleaned]
    if no_v and len(no_v) < len(joints):
        notes.append(f"velocity missing for joint(s) {', '.join(no_v)}: no v column is written (v is given "
                     "for "
                     "all joints or none; the estimators then treat v as latent)")
    if no_v:
        for j in joints:
            cleaned.pop(f"v.{j}", None)
    topics_report[js] = stats

    # ---------------------------------------------------------------- IMU
    imu_cols: dict[str, tuple] = {}
    quat = None
    imu = raw["imu"]
    if imu is not None and raw["messages"][imu]:
        m_imu = raw["messages"][imu]
        st, src = _times(m_imu, opts)
        s_imu: dict = {"type": IMU, "messages": len(m_imu), "time_source": src}
        gyro, acc, q_ch = _Channel("imu.gyro", imu), _Channel("imu.acc", imu), _Channel("imu.quat", imu)
        for (_, _, m), t in zip(m_imu, st, strict=True):
            w = m.angular_velocity
            a = m.linear_acceleration
            gyro.add(t, [w.x, w.y, w.z])
            acc.add(t, [a.x, a.y, a.z])
            o = m.orientation
            if float(m.orientation_covariance[0]) != -1.0 and np.hypot.reduce([o.w, o.x, o.y, o.z]) > 0.5:
                q_ch.add(t, [o.w, o.x, o.y, o.z])
        for ch, prefix in ((gyro, "imu.gyro"), (acc, "imu.acc")):
            t, x = ch.clean(s_imu)
            if t.size:
                for i, c in enumerate("xyz"):
                    imu_cols[f"{prefix}.{c}"] = (t, x[:, i], imu)
        if q_ch.t:
            tq, xq = q_ch.clean(s_imu)
            if tq.size:
                quat = (tq, xq / np.linalg.norm(xq, axis=1, keepdims=True), imu)
        else:
            notes.append(f"{imu}: no orientation (orientation_covariance[0] = -1): no imu.quat columns")
        topics_report[imu] = s_imu
    elif imu is not None:
        notes.append(f"{imu}: no messages (IMU left out)")

    # ---------------------------------------------------------------- contacts (zero-order hold)
    holds: dict[str, tuple[np.ndarray, np.ndarray, str]] = {}
    for frames, topic in raw["contacts"]:
        m_c = raw["messages"][topic]
        typ = raw["types"][topic]
        st, src = _times(m_c, opts)
        s_c: dict = {"type": typ, "messages": len(m_c), "time_source": src, "frames": list(frames)}
        ch = _Channel(topic, topic)
        for (_, _, m), t in zip(m_c, st, strict=True):
            data = getattr(m, "data", None)
            if data is None:
                raise LogError(f"{path}: contact topic {topic!r} has type {typ} without a 'data' field; "
                               f"accepted: {', '.join(SCALAR_CONTACT_TYPES)} or std_msgs/msg/*MultiArray")
            vals = np.atleast_1d(np.asarray(data, dtype=float)).ravel()
            if vals.size != len(frames):
                raise LogError(f"{path}: contact topic {topic!r}: a message has {vals.size} value(s) for "
                               f"{len(frames)} frame(s) ({', '.join(frames)})")
            ch.add(t, vals)
        t, x = ch.clean(s_c)
        if not t.size:
            raise LogError(f"{path}: contact topic {topic!r} has no usable messages")
        for i, f in enumerate(frames):
            holds[f"contact.{f}"] = (t, x[:, i], topic)
        topics_report[topic] = s_c

    # ---------------------------------------------------------------- the uniform clock
    continuous = dict(cleaned)
    continuous.update(imu_cols)
    if quat is not None:
        continuous["imu.quat"] = quat
    for col, (t, _, _) in list(continuous.items()) + list(holds.items()):
        if t.size < 2:
            raise LogError(f"{path}: channel {col!r} has {t.size} usable sample(s); at least 2 are needed "
                           "to resample it")
    origin = min(int(t[0]) for t, _, _ in continuous.values())
    start = max(int(t[0]) for t, _, _ in list(continuous.values()) + list(holds.values()))
    end = min(int(t[-1]) for t, _, _ in continuous.values())
    if end <= start:
        raise LogError(f"{path}: the channels do not overlap in time (latest start "
                       f"{(start - origin) * 1e-9:.6g} s, "
                       f"earliest end {(end - origin) * 1e-9:.6g} s after the first message)")
    ref = max((c for c in cleaned if c.startswith("q.")), key=lambda c: cleaned[c][0].size)
    dt_med = float(np.median(np.diff(cleaned[ref][0]))) * 1e-9
    rate = float(opts.rate) if opts.rate is not None else 1.0 / dt_med
    span = (end - start) * 1e-9
    n = int(np.floor(span * rate + 1e-9)) + 1
    if n < 2:
        raise LogError(f"{path}: the common span of the channels ({span:.3g} s) holds fewer than 2 samples "
                       "at "
                       f"{rate:.6g} Hz")
    tk = np.arange(n) / rate  # s after `start`
    rel = {c: (t - start) * 1e-9 for c, (t, _, _) in list(continuous.items()) + list(holds.items())}

    cols: dict[str, np.ndarray] = {"t": tk}
    for c in sorted(cleaned, key=lambda c: ({"q": 0, "v": 1, "tau": 2}[c.split(".", 1)[0]], joints.index(
            c.split(".", 1)[1]))):
        cols[c] = np.interp(tk, rel[c], cleaned[c][1])
    for c, (_, x, _) in imu_cols.items():
        cols[c] = np.interp(tk, rel[c], x)
    if quat is not None:
        from scipy.spatial.transform import Rotation, Slerp

        tq, xq, _ = quat
        rot = Rotation.from_quat(xq[:, [1, 2, 3, 0]])  # scipy: scalar last
        xyzw = Slerp(rel["imu.quat"], rot)(np.clip(tk, rel["imu.quat"][0], rel["imu.quat"][-1])).as_quat()
        # keep the hemisphere of the nearest logged sample (q and -q are the same rotation)
        near = xq[np.clip(np.searchsorted(rel["imu.quat"], tk), 0, len(tq) - 1)]
        wxyz = xyzw[:, [3, 0, 1, 2]]
        wxyz *= np.where(np.sum(wxyz * near, axis=1) < 0, -1.0, 1.0)[:, None]
        for i, c in enumerate("wxyz"):
            cols[f"imu.quat.{c}"] = wxyz[:, i]
    for c, (_, x, _) in holds.items():
        idx = np.clip(np.searchsorted(rel[c], tk + 1e-12, side="right") - 1, 0, len(x) - 1)
        cols[c] = x[idx]

    # ---------------------------------------------------------------- report
    for col, (t, _, topic) in list(continuous.items()) + list(holds.items()):
        d = np.diff(t) * 1e-9
        s = topics_report[topic]
        med, gap = float(np.median(d)), float(np.max(d))
        s["median_interval_s"] = min(s.get("median_interval_s", np.inf), med)
        if gap > s.get("max_gap_s", 0.0):
            s["max_gap_s"], s["max_gap_channel"] = gap, col
    for topic, s in topics_report.items():
        if s.get("max_gap_s", 0.0) > GAP_FACTOR * s.get("median_interval_s", np.inf):
            msg = (f"{topic}: gap of {s['max_gap_s']:.3g} s in {s['max_gap_channel']} (median interval "
                   f"{s['median_interval_s']:.3g} s); the resampled log interpolates across it")
            notes.append(msg)
            warnings.warn(f"{path}: {msg}", stacklevel=3)
        if s.get("time_source") == "receive time" and opts.time_source == "header":
            notes.append(f"{topic}: header stamps missing (zero): the bag's receive time is used")
    trim_start = (start - origin) * 1e-9
    last = max(int(t[-1]) for t, _, _ in continuous.values())
    trim_end = (last - (start + int(round(tk[-1] * 1e9)))) * 1e-9
    interp = "linear interpolation (q, v, tau" + (", imu gyro/acc" if imu_cols else "") + ")"
    if quat is not None:
        interp += ", slerp (imu orientation)"
    if holds:
        interp += ", zero-order hold (contact flags)"
    parts = [f"{js} ({len(msgs)} messages, {len(joints)} joints)"]
    if imu_cols:
        parts.append(f"{imu} ({topics_report[imu]['messages']} messages)")
    parts += [f"{t} (contacts {', '.join(f)})" for f, t in raw["contacts"]]
    message = (f"{path}: ROS bag, read {'; '.join(parts)}; resampled onto a uniform {rate:.6g} Hz clock "
               f"({'--bag-rate' if opts.rate is not None else 'median joint-state rate'}) by {interp}: "
               f"{n} samples over {tk[-1]:.6g} s; trimmed {trim_start:.3g} s at the start and "
               f"{trim_end:.3g} s "
               "at the end to the span every channel covers")
    if notes:
        message += "; " + "; ".join(notes)
    report = {
        "source": str(path),
        "message": message,
        "rate_hz": rate,
        "rate_source": "--bag-rate" if opts.rate is not None else f"median interval of {ref}",
        "samples": n,
        "duration_s": float(tk[-1]),
        "start_time_s": start * 1e-9,
        "trimmed_start_s": trim_start,
        "trimmed_end_s": trim_end,
        "interpolation": interp,
        "joints": joints,
        "topics": topics_report,
        "notes": notes,
    }
    return pd.DataFrame(cols), report


# ---------------------------------------------------------------------------------------------- writing
STORAGES = ("sqlite3", "mcap", "ros1")


def write_bag(
    path: str | os.PathLike, log: Log, *, storage: str = "sqlite3", joint_states_topic: str = "/joint_states",
    imu_topic: str = "/imu", contact_topics: dict[str, str] | None = None,
    joint_groups: Sequence[Sequence[str]] | None = None, group_offsets_s: Sequence[float] | None = None,
    start_time_s: float = 1_700_000_000.0, effort: bool = True,
) -> Path:
    """Write ``log`` as a ROS bag with rosbags' own writers (``storage``: sqlite3, mcap or ros1).

    One ``sensor_msgs/msg/JointState`` message per sample (or one per group of ``joint_groups``, group g
    stamped ``group_offsets_s[g]`` later), ``sensor_msgs/msg/Imu`` when the log has gyro and
    acceleration, and one ``std_msgs/msg/Bool`` topic per frame of ``contact_topics`` (frame -> topic).
    ``header.stamp`` and the receive time are ``start_time_s + t``. For tests, examples and users
    who want to try the bag reader; ``path`` must not exist.
    """
    from rosbags.typesys import Stores, get_typestore

    if storage not in STORAGES:
        raise ValueError(f"storage must be one of {STORAGES}, not {storage!r}")
    path = Path(path)
    ros1 = storage == "ros1"
    ts = get_typestore(Stores.ROS1_NOETIC if ros1 else Stores.ROS2_HUMBLE)
    T = ts.types
    Time, Header = T["builtin_interfaces/msg/Time"], T["std_msgs/msg/Header"]
    names = list(log.joint_names)
    groups = [list(g) for g in (joint_groups or [names])]
    offsets = list(group_offsets_s or [0.0] * len(groups))
    index = {j: i for i, j in enumerate(names)}
    serialize = ts.serialize_ros1 if ros1 else ts.serialize_cdr
    start_ns = int(round(start_time_s * 1e9))

    def header(t_s: float, seq: int):
        ns = start_ns + int(round(t_s * 1e9))
        kw = {"stamp": Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000), "frame_id": ""}
        if ros1:
            kw["seq"] = seq
        return Header(**kw), ns

    def write_all(writer):
        js = writer.add_connection(joint_states_topic, JOINT_STATE, typestore=ts)
        imu = None
        if log.imu_gyro is not None and log.imu_acc is not None:
            imu = writer.add_connection(imu_topic, IMU, typestore=ts)
        cons = {f: writer.add_connection(tp, "std_msgs/msg/Bool", typestore=ts)
                for f, tp in (contact_topics or {}).items()}
        Vec, Quat = T["geometry_msgs/msg/Vector3"], T["geometry_msgs/msg/Quaternion"]
        for k, t in enumerate(np.asarray(log.t, float)):
            for g, off in zip(groups, offsets, strict=True):
                h, ns = header(float(t) + off, k)
                idx = [index[j] for j in g]
                tau = np.asarray(log.tau[k, idx], float)
                msg = T[JOINT_STATE](
                    header=h, name=list(g), position=np.asarray(log.q[k, idx], float),
                    velocity=np.asarray(log.v[k, idx], float) if log.v is not None else np.zeros(0),
                    effort=tau if effort and not np.all(np.isnan(tau)) else np.zeros(0))
                writer.write(js, ns, serialize(msg, JOINT_STATE))
            h, ns = header(float(t), k)
            if imu is not None:
                if log.imu_quat is not None:
                    w, x, y, z = log.imu_quat[k]
                    o, ocov = Quat(x=x, y=y, z=z, w=w), np.zeros(9)
                else:
                    o, ocov = Quat(x=0.0, y=0.0, z=0.0, w=1.0), np.r_[-1.0, np.zeros(8)]
                g_, a_ = log.imu_gyro[k], log.imu_acc[k]
                msg = T[IMU](header=h, orientation=o, orientation_covariance=ocov,
                             angular_velocity=Vec(x=g_[0], y=g_[1], z=g_[2]),
                             angular_velocity_covariance=np.zeros(9),
                             linear_acceleration=Vec(x=a_[0], y=a_[1], z=a_[2]),
                             linear_acceleration_covariance=np.zeros(9))
                writer.write(imu, ns, serialize(msg, IMU))
            for f, c in cons.items():
                msg = T["std_msgs/msg/Bool"](data=bool(log.contacts[f][k]))
                writer.write(c, ns, serialize(msg, "std_msgs/msg/Bool"))

    if ros1:
        from rosbags.rosbag1 import Writer as Writer1

        with Writer1(path) as w:
            write_all(w)
    else:
        from rosbags.rosbag2 import StoragePlugin
        from rosbags.rosbag2 import Writer as Writer2

        plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
        with Writer2(path, version=9, storage_plugin=plugin) as w:
            write_all(w)
    return path
