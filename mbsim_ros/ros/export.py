"""A recorded bag out of ROS: camera images as PNG files (or an MP4 video where a video writer is
installed) and numeric topics as CSV tables (`mbsim export`).

    export_images("run1", "frames")      # frames/<topic>/000000.png ..., frames/<topic>/stamps.csv
    export_video("run1", "run1.mp4")     # one video per image topic (imageio + imageio-ffmpeg)
    export_csv("run1", "tables")         # tables/<topic>.csv: time, then one column per number

Images: rgb8, rgba8, bgr8, bgra8 and mono8 as they are (alpha dropped); depth (32FC1 metres,
16UC1 millimetres) as the grey view of `mbsim render --depth`: white = near, black = nothing.
CSV: the header stamp in seconds (else the bag's receive time), then every number of the message
by its field path (`linear_acceleration.x`, `orientation_covariance[4]`); a JointState's
arrays by joint name (`position.RLEG_HIP_R`), a TFMessage's transforms by child frame. Byte
arrays (pixels, point clouds) and strings are left out.
"""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from .messages import IMAGE, JOINT_STATE, TF_MESSAGE, TYPESTORE
from .bag_reader import open_bag

IMAGE_ENCODINGS = ("rgb8", "rgba8", "bgr8", "bgra8", "mono8", "8UC1", "32FC1", "16UC1", "mono16")
NOT_TABLES = (IMAGE, "sensor_msgs/msg/CompressedImage", "sensor_msgs/msg/PointCloud2")


def _topic_path(folder: Path, topic: str, suffix="") -> Path:
    return folder.joinpath(*[p for p in topic.split("/") if p]).with_suffix(suffix) if suffix else \
        folder.joinpath(*[p for p in topic.split("/") if p])


def _stamp(msg, log_time_ns) -> float:
    header = getattr(msg, "header", None)
    if header is not None:
        return header.stamp.sec + 1e-9 * header.stamp.nanosec
    return 1e-9 * log_time_ns


def _connections(reader, bag, types, topics, what):
    conns = [c for c in reader.connections if c.msgtype in types]
    if topics:
        wanted = {t if t.startswith("/") else "/" + t for t in topics}
        have = {c.topic for c in conns}
        missing = sorted(wanted - have)
        if missing:
            raise ValueError(f"{bag}: no {what} topic {', '.join(missing)} (the bag's: {', '.join(sorted(have)) or 'none'})")
        conns = [c for c in conns if c.topic in wanted]
    if not conns:
        raise ValueError(f"{bag}: no {what} topics in the bag")
    return conns


def image_array(msg) -> np.ndarray:
    """(H, W, 3) or (H, W) uint8 of a sensor_msgs/Image, as written to PNG."""
    from ..render import depth_to_image
    h, w, step, enc = msg.height, msg.width, msg.step, msg.encoding
    data = np.asarray(msg.data, dtype=np.uint8)
    if enc not in IMAGE_ENCODINGS:
        raise ValueError(f"image encoding {enc!r}: expected one of {', '.join(IMAGE_ENCODINGS)}")
    rows = data[:h * step].reshape(h, step)
    if enc in ("rgb8", "bgr8", "rgba8", "bgra8"):
        channels = 4 if "a" in enc[3:] else 3
        a = rows[:, :w * channels].reshape(h, w, channels)[:, :, :3]
        return np.ascontiguousarray(a[:, :, ::-1] if enc.startswith("bgr") else a)
    if enc in ("mono8", "8UC1"):
        return np.ascontiguousarray(rows[:, :w])
    order = ">" if msg.is_bigendian else "<"
    if enc == "32FC1":
        depth = rows[:, :4 * w].copy().view(order + "f4").astype(float)
    else:                                              # 16UC1, mono16: millimetres, 0 = nothing
        mm = rows[:, :2 * w].copy().view(order + "u2").astype(float)
        depth = np.where(mm > 0, mm / 1000.0, np.inf)
    return depth_to_image(depth)


def _image_messages(bag, topics):
    reader = open_bag(Path(bag))
    try:
        conns = _connections(reader, bag, (IMAGE,), topics, "image")
        for conn, t, raw in reader.messages(connections=conns):
            yield conn.topic, t, TYPESTORE.deserialize_cdr(raw, conn.msgtype)
    finally:
        reader.close()


def export_images(bag, folder, topics=None) -> dict:
    """Every image of the image topics (or `topics`) as folder/<topic>/<k:06d>.png, with
    stamps.csv (frame, stamp in s) beside them. Returns {topic: frames written}."""
    from ..render import write_png
    folder = Path(folder)
    counts, stamps = {}, {}
    for topic, t, msg in _image_messages(bag, topics):
        out = _topic_path(folder, topic)
        if topic not in counts:
            out.mkdir(parents=True, exist_ok=True)
            counts[topic], stamps[topic] = 0, []
        k = counts[topic]
        write_png(out / f"{k:06d}.png", image_array(msg))
        stamps[topic].append((f"{k:06d}.png", f"{_stamp(msg, t):.9f}"))
        counts[topic] = k + 1
    for topic, rows in stamps.items():
        with open(_topic_path(folder, topic) / "stamps.csv", "w", newline="") as f:
            csv.writer(f).writerows([("frame", "stamp")] + rows)
    return counts


def export_video(bag, path, topics=None, fps=None) -> dict:
    """The image topics (or `topics`) as MP4 video: `path` for one topic, else path with the
    topic's name added (run1_SR1_LeftCamera_image.mp4). fps: from the stamps (median spacing)
    unless given. ImportError naming the package to install when no video writer is."""
    try:
        import imageio.v2 as imageio
        import imageio_ffmpeg
        imageio_ffmpeg.get_ffmpeg_exe()          # RuntimeError when the package has no ffmpeg to run
    except (ImportError, RuntimeError):
        raise ImportError("export --video: no video writer installed (pip install imageio imageio-ffmpeg); "
                          "--images DIR writes PNG frames without it") from None
    path = Path(path)
    frames = {}
    for topic, t, msg in _image_messages(bag, topics):
        frames.setdefault(topic, []).append((_stamp(msg, t), image_array(msg)))
    written = {}
    for topic, items in frames.items():
        out = path if len(frames) == 1 else path.with_name(
            f"{path.stem}_{'_'.join(p for p in topic.split('/') if p)}{path.suffix}")
        stamps = np.array([s for s, _ in items])
        rate = fps or (1.0 / float(np.median(np.diff(stamps))) if len(stamps) > 1 and np.all(np.diff(stamps) > 0)
                       else 10.0)
        with imageio.get_writer(out, fps=rate, codec="libx264", macro_block_size=1, quality=8,
                                ffmpeg_log_level="error") as w:
            for _, image in items:
                rgb = image if image.ndim == 3 else np.repeat(image[:, :, None], 3, axis=2)
                h, w_ = rgb.shape[:2]          # H.264 in yuv420p takes even sizes: one black row/column more
                w.append_data(np.pad(rgb, ((0, h % 2), (0, w_ % 2), (0, 0))))
        written[str(out)] = len(items)
    return written


def message_row(kind, msg) -> dict:
    """{column: number} of one message (module docstring)."""
    row = {}
    if kind == JOINT_STATE:
        for field in ("position", "velocity", "effort"):
            for name, x in zip(msg.name, getattr(msg, field)):
                row[f"{field}.{name}"] = float(x)
        return row
    if kind == TF_MESSAGE:
        for tr in msg.transforms:
            _flatten(tr.transform, f"{tr.child_frame_id}.", row)
        return row
    _flatten(msg, "", row)
    return row


def _flatten(msg, prefix, row):
    for name in msg.__dataclass_fields__:
        if name in ("header", "__msgtype__"):
            continue
        v = getattr(msg, name)
        if isinstance(v, (bool, np.bool_)):
            row[prefix + name] = int(v)
        elif isinstance(v, (int, float, np.integer, np.floating)):
            row[prefix + name] = v
        elif isinstance(v, np.ndarray):
            if v.dtype.kind in "iuf" and v.ndim == 1 and v.dtype != np.uint8:
                for i, x in enumerate(v.tolist()):
                    row[f"{prefix}{name}[{i}]"] = x
        elif hasattr(v, "__dataclass_fields__"):
            if type(v).__name__ == "Time":
                row[prefix + name] = v.sec + 1e-9 * v.nanosec
            else:
                _flatten(v, f"{prefix}{name}.", row)
        elif isinstance(v, list) and v and hasattr(v[0], "__dataclass_fields__"):
            for i, item in enumerate(v):
                _flatten(item, f"{prefix}{name}[{i}].", row)


def export_csv(bag, folder, topics=None) -> dict:
    """Every numeric topic (or `topics`) as folder/<topic>.csv: `time`, then its numbers. Returns
    {topic: rows written}."""
    reader = open_bag(Path(bag))
    tables = {}
    try:
        types = {c.msgtype for c in reader.connections} - set(NOT_TABLES)
        conns = _connections(reader, bag, types, topics, "numeric")
        for conn, t, raw in reader.messages(connections=conns):
            msg = TYPESTORE.deserialize_cdr(raw, conn.msgtype)
            row = message_row(conn.msgtype, msg)
            row["time"] = _stamp(msg, t)
            tables.setdefault(conn.topic, []).append(row)
    finally:
        reader.close()
    folder = Path(folder)
    counts = {}
    for topic, rows in tables.items():
        columns = ["time"] + list(dict.fromkeys(k for r in rows for k in r if k != "time"))
        if len(columns) == 1:
            continue                   # nothing numeric (strings only)
        out = _topic_path(folder, topic, ".csv")
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(out, "w", newline="") as f:
            w = csv.DictWriter(f, columns, restval="")
            w.writeheader()
            for r in rows:
                w.writerow({k: repr(float(v)) if isinstance(v, float) else v for k, v in r.items()})
        counts[topic] = len(rows)
    return counts


def frame_poses(bag, t) -> dict:
    """{frame: 4x4 pose in the frame `world`} at time t (s, header stamps) of a recorded bag:
    /tf_static, and each /tf edge as last stamped at or before t. ValueError when the bag has no
    /tf or t is outside the time it covers."""
    from ..model.transforms import quat_to_matrix
    reader = open_bag(Path(bag))
    edges, stamps = {}, []            # child -> (parent, T, stamp, static)
    try:
        conns = [c for c in reader.connections if c.msgtype == TF_MESSAGE and c.topic in ("/tf", "/tf_static")]
        if not any(c.topic == "/tf" for c in conns):
            raise ValueError(f"{bag}: no /tf in the bag: nothing says where the links were")
        for conn, _, raw in reader.messages(connections=conns):
            static = conn.topic == "/tf_static"
            for tr in TYPESTORE.deserialize_cdr(raw, conn.msgtype).transforms:
                stamp = tr.header.stamp.sec + 1e-9 * tr.header.stamp.nanosec
                if not static:
                    stamps.append(stamp)
                    if stamp > t + 1e-9:
                        continue
                old = edges.get(tr.child_frame_id)
                if old is None or static or stamp >= old[2]:
                    T = np.eye(4)
                    r, p = tr.transform.rotation, tr.transform.translation
                    T[:3, :3] = quat_to_matrix([r.x, r.y, r.z, r.w])
                    T[:3, 3] = p.x, p.y, p.z
                    edges[tr.child_frame_id] = (tr.header.frame_id, T, stamp)
    finally:
        reader.close()
    s = np.unique(stamps)
    slack = float(np.max(np.diff(s))) if len(s) > 1 else 0.0      # one /tf period
    if not len(s) or t < s[0] - 1e-9 or t > s[-1] + slack + 1e-9:
        raise ValueError(f"{bag}: --at {t:g} s is outside the recorded /tf "
                         f"({s[0]:g} to {s[-1]:g} s)" if len(s) else f"{bag}: /tf holds no transforms")
    poses = {"world": np.eye(4)}

    def pose(frame, depth=0):
        if frame not in poses:
            if frame not in edges or depth > len(edges):
                return None
            parent, T, _ = edges[frame]
            above = pose(parent, depth + 1)
            if above is None:
                return None
            poses[frame] = above @ T
        return poses[frame]
    for frame in edges:
        pose(frame)
    return poses
