"""Reading a recorded rosbag2 bag (MCAP or SQLite3, with rosbags) into time series: the
sensor_msgs/Imu, geometry_msgs/WrenchStamped and sensor_msgs/JointState topics against their
header stamps (simulation time for bags the simulator wrote), decoded with the project's
typestore. What `mbsim plot` draws (ros/plot.py) and `mbsim export` writes (ros/export.py)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .messages import IMU, JOINT_STATE, TYPESTORE, WRENCH_STAMPED

__all__ = ["PLOTTED_TYPES", "BagSeries", "open_bag", "read_series"]

PLOTTED_TYPES = (IMU, WRENCH_STAMPED, JOINT_STATE)      # the message types read_series reads


# (key, title, unit) of each subplot, in figure order
PANELS = (
    ("accel", "IMU linear acceleration", "m/s²"),
    ("gyro", "IMU angular velocity", "rad/s"),
    ("force", "Force", "N"),
    ("torque", "Torque", "N m"),
    ("joints", "Joint positions", "rad or m"),
)

@dataclass
class _Imu:
    t: list = field(default_factory=list)
    accel: list = field(default_factory=list)     # (x, y, z) or (nan, nan, nan) without estimate
    gyro: list = field(default_factory=list)


@dataclass
class _Wrench:
    t: list = field(default_factory=list)
    force: list = field(default_factory=list)
    torque: list = field(default_factory=list)


@dataclass
class BagSeries:
    """Time series read from a bag: per topic, stamps (s, sorted) and values.

    imu: {topic: (t (n,), accel (n, 3) or None, gyro (n, 3) or None)}; a quantity is None when no
    message of the topic carries it, and NaN rows are messages without it.
    wrench: {topic: (t (n,), force (n, 3), torque (n, 3))}.
    joints: {topic: {joint name: (t (m,), position (m,))}}, joints in first-seen order.
    """

    bag: Path
    imu: dict = field(default_factory=dict)
    wrench: dict = field(default_factory=dict)
    joints: dict = field(default_factory=dict)

    def topics(self) -> list:
        """The topics with something to plot, in figure order (each once)."""
        out = []
        for key, _, _ in PANELS:
            for topic, _ in self.panel(key):
                if topic not in out:
                    out.append(topic)
        return out

    def panel(self, key: str) -> list:
        """[(topic, data)] shown in subplot `key`, topics sorted by name."""
        if key in ("accel", "gyro"):
            i = 1 if key == "accel" else 2
            return [(topic, (s[0], s[i])) for topic, s in sorted(self.imu.items())
                    if s[i] is not None]
        if key in ("force", "torque"):
            i = 1 if key == "force" else 2
            return [(topic, (s[0], s[i])) for topic, s in sorted(self.wrench.items())]
        if key == "joints":
            return [(topic, joints) for topic, joints in sorted(self.joints.items()) if joints]
        raise KeyError(key)


def _stamp(header) -> float:
    return header.stamp.sec + header.stamp.nanosec * 1e-9


def _vec(v) -> tuple:
    return (v.x, v.y, v.z)


_NAN3 = (float("nan"),) * 3


def open_bag(path: Path):
    from rosbags.rosbag2 import Reader, ReaderError

    if not path.exists():
        raise FileNotFoundError(f"{path}: no such bag (expected a rosbag2 directory, e.g. one "
                                "written by `mbsim run --bag DIR` or `ros2 bag record -o DIR`)")
    if path.is_dir() and not (path / "metadata.yaml").is_file():
        raise ValueError(f"{path} is not a readable rosbag2 bag: a folder without metadata.yaml (expected "
                         "a bag written by `mbsim run --bag DIR` or `ros2 bag record -o DIR`)")
    try:
        reader = Reader(path)
        reader.open()
    except (ReaderError, FileNotFoundError, NotADirectoryError, KeyError) as e:
        raise ValueError(f"{path} is not a readable rosbag2 bag: {e}") from e
    return reader


def _select(reader, path: Path, topics) -> list:
    """The connections to read: every connection of a plotted type, or those of `topics`."""
    conns = list(reader.connections)
    in_bag = {}
    for c in conns:
        in_bag.setdefault(c.topic, c.msgtype)
    if topics is None:
        chosen = [c for c in conns if c.msgtype in PLOTTED_TYPES]
        if not chosen:
            have = ", ".join(f"{t} ({ty})" for t, ty in sorted(in_bag.items())) or "no topics"
            raise ValueError(f"{path}: nothing to plot: no topics of type {', '.join(PLOTTED_TYPES)} "
                             f"(the bag has {have})")
        return chosen
    if isinstance(topics, str):
        topics = [topics]
    topics = list(topics)
    if not topics:
        raise ValueError(f"{path}: an empty list of topics to plot (None plots every plottable one)")
    wanted = []
    for t in topics:
        t = str(t)
        wanted.append(t if t.startswith("/") else "/" + t)
    missing = [t for t in wanted if t not in in_bag]
    if missing:
        raise ValueError(f"{path}: no topic {', '.join(missing)} in the bag "
                         f"(it has {', '.join(sorted(in_bag)) or 'no topics'})")
    unsupported = [f"{t} ({in_bag[t]})" for t in wanted if in_bag[t] not in PLOTTED_TYPES]
    if unsupported:
        raise ValueError(f"{path}: cannot plot {', '.join(unsupported)}: plotted types are "
                         f"{', '.join(PLOTTED_TYPES)}")
    return [c for c in conns if c.topic in wanted and c.msgtype in PLOTTED_TYPES]


def read_series(bag_dir, topics=None) -> BagSeries:
    """Read the plotted quantities of `bag_dir` (all topics of the plotted types, or `topics`).

    FileNotFoundError for a path that does not exist; ValueError for a path that is not a rosbag2
    bag, for requested topics that are missing or of another type, and for a bag without any
    topic of the plotted types."""
    path = Path(bag_dir)
    reader = open_bag(path)
    try:
        conns = _select(reader, path, topics)
        imu, wrench, joints = {}, {}, {}
        deserialize = TYPESTORE.deserialize_cdr
        for conn, _, raw in reader.messages(connections=conns):
            kind = conn.msgtype
            msg = deserialize(raw, kind)
            t = _stamp(msg.header)
            if kind == IMU:
                s = imu.setdefault(conn.topic, _Imu())
                s.t.append(t)
                s.accel.append(_vec(msg.linear_acceleration)
                               if msg.linear_acceleration_covariance[0] != -1 else _NAN3)
                s.gyro.append(_vec(msg.angular_velocity)
                              if msg.angular_velocity_covariance[0] != -1 else _NAN3)
            elif kind == WRENCH_STAMPED:
                s = wrench.setdefault(conn.topic, _Wrench())
                s.t.append(t)
                s.force.append(_vec(msg.wrench.force))
                s.torque.append(_vec(msg.wrench.torque))
            else:  # JointState: position may be empty (not reported), names may vary per message
                per_joint = joints.setdefault(conn.topic, {})
                for name, q in zip(msg.name, msg.position):
                    ts, qs = per_joint.setdefault(name, ([], []))
                    ts.append(t)
                    qs.append(q)
    finally:
        reader.close()

    out = BagSeries(bag=path)
    for topic, s in imu.items():
        order = np.argsort(np.asarray(s.t), kind="stable")
        t = np.asarray(s.t, dtype=float)[order]
        accel = np.asarray(s.accel, dtype=float).reshape(-1, 3)[order]
        gyro = np.asarray(s.gyro, dtype=float).reshape(-1, 3)[order]
        accel = accel if np.isfinite(accel).any() else None
        gyro = gyro if np.isfinite(gyro).any() else None
        if accel is not None or gyro is not None:
            out.imu[topic] = (t, accel, gyro)
    for topic, s in wrench.items():
        order = np.argsort(np.asarray(s.t), kind="stable")
        out.wrench[topic] = (np.asarray(s.t, dtype=float)[order],
                             np.asarray(s.force, dtype=float).reshape(-1, 3)[order],
                             np.asarray(s.torque, dtype=float).reshape(-1, 3)[order])
    for topic, per_joint in joints.items():
        series = {}
        for name, (ts, qs) in per_joint.items():
            order = np.argsort(np.asarray(ts), kind="stable")
            series[name] = (np.asarray(ts, dtype=float)[order], np.asarray(qs, dtype=float)[order])
        if series:
            out.joints[topic] = series
    return out
