"""A recorded rosbag2 bag as plain arrays, for replay (`mbsim view BAG`) and anything else that
wants a run's poses, joints and images back without ROS messages.

    rec = read_recording("run1")                  # ValueError (one line) for what is not a bag
    rec.start_ns, rec.end_ns                      # the bag's first and last log times
    rec.descriptions                              # {topic: URDF text} of every robot_description
    rec.frame_poses(t_ns)                         # {frame: 4x4 pose in its tree's root} at t
    rec.joint_states[topic]                       # JointSeries: times, names, position, ...
    rec.image_at(topic, t_ns)                     # (stamp ns, array h x w [x c]) newest at t
    rec.close()

The view (a sibling of ros/, which must not import it) is handed this object by the command
line and reads only these attributes; the ROS messages stay here, in the one message layer.
Times are the bag's log times, which the project's bags record as simulation time.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import messages as msg
from .export import image_array

__all__ = ["Recording", "JointSeries", "read_recording"]

@dataclass
class JointSeries:
    """One joint_states topic: times (n,) ns, names, and (n, joints) arrays (NaN where a message
    lacked the field or the joint)."""
    times: np.ndarray
    names: list
    position: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray


@dataclass
class Recording:
    path: str
    start_ns: int = 0
    end_ns: int = 0
    descriptions: dict = field(default_factory=dict)
    parents: dict = field(default_factory=dict)        # frame -> parent frame
    static: dict = field(default_factory=dict)         # frame -> 4x4 from its parent (/tf_static)
    tf_times: np.ndarray = None                        # (n,) ns of the /tf messages
    tf_frames: list = field(default_factory=list)      # the frames /tf moves
    tf_values: np.ndarray = None                       # (n, frames, 7) x y z qx qy qz qw, carried forward
    joint_states: dict = field(default_factory=dict)   # topic -> JointSeries
    images: dict = field(default_factory=dict)         # topic -> (n,) ns of its messages
    _reader: object = None
    _connections: dict = field(default_factory=dict)

    @property
    def frames(self):
        return sorted(set(self.parents) | set(self.parents.values()))

    def roots(self):
        return sorted({p for p in self.parents.values() if p not in self.parents})

    def frame_poses(self, t_ns: int) -> dict:
        """{frame: 4x4 pose relative to the root of its TF tree} from the newest /tf values at
        or before t_ns and /tf_static; frames /tf has not given yet at t_ns are left out."""
        local = dict(self.static)
        if self.tf_times is not None and len(self.tf_times):
            i = int(np.searchsorted(self.tf_times, t_ns, side="right")) - 1
            if i >= 0:
                for k, frame in enumerate(self.tf_frames):
                    v = self.tf_values[i, k]
                    if not np.isnan(v[0]):
                        local[frame] = _matrix(v)
        out = {root: np.eye(4) for root in self.roots()}

        def pose(frame, depth=0):
            got = out.get(frame)
            if got is not None or depth > 1000:
                return got
            parent = self.parents.get(frame)
            T = local.get(frame)
            if parent is None or T is None:
                return None
            P = pose(parent, depth + 1)
            if P is None:
                return None
            out[frame] = P @ T
            return out[frame]
        for frame in self.parents:
            pose(frame)
        return out

    def image_at(self, topic: str, t_ns: int):
        """(log time ns, pixels) of the newest image on `topic` at or before t_ns (the first
        before it starts); pixels uint8 (h, w, 3) or (h, w) as `mbsim export` writes them
        (depth as grey: white near, black nothing)."""
        times = self.images[topic]
        i = max(0, int(np.searchsorted(times, t_ns, side="right")) - 1)
        stamp = int(times[i])
        conn = self._connections[topic]
        for _, _, raw in self._reader.messages(connections=[conn], start=stamp, stop=stamp + 1):
            return stamp, image_array(msg.TYPESTORE.deserialize_cdr(raw, msg.IMAGE))
        raise ValueError(f"{topic}: no image at {stamp} ns")

    def close(self):
        if self._reader is not None:
            self._reader.close()
            self._reader = None


def _matrix(v):
    x, y, z, qx, qy, qz, qw = v
    n = qx * qx + qy * qy + qz * qz + qw * qw
    s = 2.0 / n if n > 0 else 0.0
    T = np.eye(4)
    T[:3, :3] = [[1 - s * (qy * qy + qz * qz), s * (qx * qy - qz * qw), s * (qx * qz + qy * qw)],
                 [s * (qx * qy + qz * qw), 1 - s * (qx * qx + qz * qz), s * (qy * qz - qx * qw)],
                 [s * (qx * qz - qy * qw), s * (qy * qz + qx * qw), 1 - s * (qx * qx + qy * qy)]]
    T[:3, 3] = (x, y, z)
    return T


def _transform_values(t):
    tr, r = t.transform.translation, t.transform.rotation
    return (tr.x, tr.y, tr.z, r.x, r.y, r.z, r.w)


def read_recording(path) -> Recording:
    """Read a rosbag2 directory: everything but the images now, those on demand. ValueError,
    one line naming the path, for anything that is not a readable bag."""
    from .bag_reader import open_bag
    path = os.fspath(path)
    try:
        reader = open_bag(Path(path))
    except FileNotFoundError as e:
        raise ValueError(str(e)) from None
    except ValueError as e:
        raise ValueError(str(e).splitlines()[0]) from None
    rec = Recording(path, _reader=reader)
    try:
        _read(rec, reader)
    except Exception:
        reader.close()
        raise
    return rec


def _read(rec, reader):
    conns = {c.topic: c for c in reader.connections}
    rec._connections = conns
    rec.start_ns, rec.end_ns = int(reader.start_time), int(reader.end_time)
    wanted = [c for c in reader.connections
              if (c.msgtype == msg.STRING and c.topic.endswith("/robot_description"))
              or (c.msgtype == msg.TF_MESSAGE and c.topic in ("/tf", "/tf_static"))
              or c.msgtype in (msg.JOINT_STATE, msg.IMAGE)]
    tf_rows, tf_index, joints = [], {}, {}
    deserialize = msg.TYPESTORE.deserialize_cdr
    for conn, t, raw in reader.messages(connections=wanted):
        if conn.msgtype == msg.IMAGE:
            rec.images.setdefault(conn.topic, []).append(t)
            continue
        try:
            m = deserialize(raw, conn.msgtype)
        except Exception as e:
            raise ValueError(f"{rec.path}: a {conn.msgtype} message on {conn.topic} at {t} ns does not decode ({e})") from None
        if conn.msgtype == msg.STRING:
            rec.descriptions[conn.topic] = m.data
        elif conn.topic == "/tf_static":
            for tr in m.transforms:
                rec.parents[tr.child_frame_id] = tr.header.frame_id
                rec.static[tr.child_frame_id] = _matrix(_transform_values(tr))
        elif conn.msgtype == msg.TF_MESSAGE:
            row = {}
            for tr in m.transforms:
                rec.parents[tr.child_frame_id] = tr.header.frame_id
                tf_index.setdefault(tr.child_frame_id, len(tf_index))
                row[tf_index[tr.child_frame_id]] = _transform_values(tr)
            tf_rows.append((t, row))
        else:
            joints.setdefault(conn.topic, []).append((t, m))
    rec.tf_frames = list(tf_index)
    rec.tf_times = np.array([t for t, _ in tf_rows], np.int64)
    values = np.full((len(tf_rows), len(tf_index), 7), np.nan)
    for i, (_, row) in enumerate(tf_rows):
        if i:
            values[i] = values[i - 1]           # a frame keeps its last transform until /tf moves it
        for k, v in row.items():
            values[i, k] = v
    rec.tf_values = values
    rec.images = {topic: np.array(times, np.int64) for topic, times in rec.images.items()}
    for topic, rows in joints.items():
        names = []
        for _, m in rows:
            names += [n for n in m.name if n not in names]
        col = {n: j for j, n in enumerate(names)}
        arrays = {f: np.full((len(rows), len(names)), np.nan) for f in ("position", "velocity", "effort")}
        for i, (_, m) in enumerate(rows):
            idx = [col[n] for n in m.name]
            for f, a in arrays.items():
                got = np.asarray(getattr(m, f), float)
                if len(got) == len(idx):
                    a[i, idx] = got
        rec.joint_states[topic] = JointSeries(np.array([t for t, _ in rows], np.int64), names, **arrays)
