"""Plots of a recorded rosbag2 bag: IMU, wrench and joint traces against simulation time.

    topics = plot_bag("run1", "plot.png")                  # every plottable topic
    topics = plot_bag("run1", "plot.png", ["/SR1/WaistGyro"])
    fig, topics = make_figure("run1")                      # the matplotlib Figure, not saved

One subplot per kind of quantity, top to bottom, where the bag has any:

- IMU linear acceleration (m/s^2): x, y, z of each sensor_msgs/Imu topic whose messages carry an
  estimate (linear_acceleration_covariance[0] != -1, REP 145; samples marked -1 are gaps);
- IMU angular velocity (rad/s): the same for angular_velocity;
- force (N) and torque (N m) of each geometry_msgs/WrenchStamped topic;
- joint positions (rad or m) of every joint of each sensor_msgs/JointState topic (or of the
  `joints` chosen by name or fnmatch pattern), thin lines, with a legend when there are at most
  12 joints (the title says how to choose when there are more).

Y limits are robust: samples farther than 3 bulk spans (the 0.5 to 99.5 percentile range of a
subplot's data) from the bulk, such as a landing's impact spike, are left beyond the axis and
marked by triangles on the edge they pass, their count and extreme in the title; every other
sample is in view.

x, y and z are red, green and blue (RViz's axis colours); several topics in one subplot differ in
line style. The time axis is the messages' header stamps in seconds (simulation time for bags
written by the simulator), not the bag's receive/log times. Subplots are titled with the topics
they show.

Bags are read with rosbags (MCAP or SQLite3 storage; a bag directory, or an .mcap/.db3 file where
rosbags accepts one) and decoded with the project's typestore (Jazzy definitions, wire-identical to
Humble's for these types). Figures are drawn on matplotlib's Agg canvas directly: no pyplot, no
display, and the process-wide matplotlib backend is left alone.
"""
from __future__ import annotations

import fnmatch
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .messages import IMU, JOINT_STATE, TYPESTORE, WRENCH_STAMPED

__all__ = ["FIGURE_FILES", "PLOTTED_TYPES", "BagSeries", "read_series", "make_figure", "plot_bag",
           "robust_limits"]

PLOTTED_TYPES = (IMU, WRENCH_STAMPED, JOINT_STATE)

WIDTH_IN = 11.0          # figure width, inches
PANEL_IN = 2.5           # height of one subplot, inches
MARGIN_IN = 0.5          # extra height for the time axis label, inches
DPI = 100                # so a figure is 1100 x (250 n + 50) pixels
LEGEND_MAX_JOINTS = 12
FIGURE_FILES = (".png", ".jpg", ".jpeg", ".pdf", ".svg")     # what plot_bag writes, by extension
ROBUST_PERCENTILES = (0.5, 99.5)   # the bulk of a subplot's samples, for its y limits
OUTLIER_SPAN = 3.0                 # samples farther than this many bulk spans from the bulk are outliers
MARGIN = 0.08                      # of the shown span, above and below

_AXIS_COLORS = ("tab:red", "tab:green", "tab:blue")
_LINE_STYLES = ("-", "--", ":", "-.")

# outside the axes, on the right: never over the data
_LEGEND = dict(fontsize=7, loc="upper left", bbox_to_anchor=(1.005, 1.0), borderaxespad=0.0,
               frameon=False)

# (key, title, unit) of each subplot, in figure order
_PANELS = (
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
        for key, _, _ in _PANELS:
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


def _open_reader(path: Path):
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
    reader = _open_reader(path)
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


def robust_limits(values):
    """(low, high, clipped) y limits for the finite `values`: the range of every sample within
    OUTLIER_SPAN bulk spans of the bulk (the ROBUST_PERCENTILES), plus a margin; clipped True
    when samples farther out (a landing's impact spike) are left beyond the limits. None without
    finite values."""
    v = np.asarray(values, dtype=float).ravel()
    v = v[np.isfinite(v)]
    if v.size == 0:
        return None
    lo, hi = (float(x) for x in np.percentile(v, ROBUST_PERCENTILES))
    span = (hi - lo) or 0.1 * max(abs(lo), abs(hi))
    near = v[(v >= lo - OUTLIER_SPAN * span) & (v <= hi + OUTLIER_SPAN * span)] if span > 0 else v
    lo, hi = float(near.min()), float(near.max())
    span = (hi - lo) or max(abs(hi), 1.0) * 0.1          # a constant: a band around it
    return lo - MARGIN * span, hi + MARGIN * span, near.size < v.size


def _mark_outliers(ax, traces, limits):
    """Triangles on the axis edges where samples of `traces` [(t, y, color)] leave `limits`;
    returns (count, the sample farthest out, its time)."""
    lo, hi = limits
    count, extreme, when = 0, None, None
    for t, y, color in traces:
        t, y = np.asarray(t, float), np.asarray(y, float)
        for side, outside, edge, marker in (("hi", y > hi, hi, "^"), ("lo", y < lo, lo, "v")):
            if not outside.any():
                continue
            count += int(outside.sum())
            ax.scatter(t[outside], np.full(int(outside.sum()), edge), marker=marker, s=14, color=color,
                       clip_on=False, zorder=3, linewidths=0)
            k = int(np.argmax(np.abs(y[outside] - (lo + hi) / 2)))
            if extreme is None or abs(y[outside][k] - (lo + hi) / 2) > abs(extreme - (lo + hi) / 2):
                extreme, when = float(y[outside][k]), float(t[outside][k])
    return count, extreme, when


def _select_joints(series, joints):
    """Keep only the joints named or matched (fnmatch) by `joints`; ValueError for a name or
    pattern that matches none, listing the joints there are."""
    if joints is None:
        return
    if isinstance(joints, str):
        joints = [joints]
    names = list(dict.fromkeys(name for per_joint in series.joints.values() for name in per_joint))
    unmatched = [p for p in joints if not any(fnmatch.fnmatchcase(n, p) for n in names)]
    if unmatched:
        raise ValueError(f"{series.bag}: no joint {', '.join(unmatched)} in the bag's joint states "
                         f"(joints: {', '.join(names) or 'none'})")
    for topic in list(series.joints):
        kept = {n: v for n, v in series.joints[topic].items() if any(fnmatch.fnmatchcase(n, p) for p in joints)}
        if kept:
            series.joints[topic] = kept
        else:
            del series.joints[topic]


def make_figure(bag_dir, topics=None, joints=None):
    """(matplotlib Figure, topics plotted) for `bag_dir`; the figure is not saved. `joints`: only
    these joints (names or fnmatch patterns) in the joint subplot. Errors as `read_series`, plus
    ValueError when the selected topics hold no data to plot or a joint matches nothing."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    series = read_series(bag_dir, topics)
    _select_joints(series, joints)
    panels = [(key, title, unit, series.panel(key)) for key, title, unit in _PANELS]
    panels = [p for p in panels if p[3]]
    if not panels:
        raise ValueError(f"{series.bag}: nothing to plot: the selected topics have no messages "
                         "(or, for IMUs, no acceleration or angular velocity estimates)")

    fig = Figure(figsize=(WIDTH_IN, PANEL_IN * len(panels) + MARGIN_IN), dpi=DPI,
                 constrained_layout=True)   # the spelling every matplotlib >= 3.5 takes
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
    for ax, (key, title, unit, entries) in zip(axes, panels):
        names = [topic for topic, _ in entries]
        heading = f"{title}: {', '.join(names)}"
        ax.set_ylabel(unit, fontsize=8)
        ax.tick_params(labelsize=8)
        ax.grid(True, linewidth=0.3, alpha=0.6)
        traces = []                       # (t, y, color) of every line, for the limits
        if key == "joints":
            n = sum(len(per_joint) for _, per_joint in entries)
            for topic, per_joint in entries:
                for name, (t, q) in per_joint.items():
                    label = name if len(entries) == 1 else f"{topic}: {name}"
                    line, = ax.plot(t, q, linewidth=0.7, label=label)
                    traces.append((t, q, line.get_color()))
            if n <= LEGEND_MAX_JOINTS:
                ax.legend(**_LEGEND)
            else:
                heading += f" ({n} joints: too many for a legend; choose some with --joints)"
        else:
            for k, (topic, (t, xyz)) in enumerate(entries):
                style = _LINE_STYLES[k % len(_LINE_STYLES)]
                for axis, color, column in zip("xyz", _AXIS_COLORS, xyz.T):
                    ax.plot(t, column, color=color, linestyle=style, linewidth=0.9,
                            label=f"{topic} {axis}")
                    traces.append((t, column, color))
            ax.legend(**_LEGEND)
        limits = robust_limits(np.concatenate([y for _, y, _ in traces])) if traces else None
        if limits is not None:
            lo, hi, clipped = limits
            ax.set_ylim(lo, hi)
            if clipped:
                count, extreme, when = _mark_outliers(ax, traces, (lo, hi))
                if count:
                    heading += (f"  [{count} sample{'s' if count > 1 else ''} beyond the axis (triangles), "
                                f"extreme {extreme:.4g} {unit} at t = {when:.4g} s]")
        ax.set_title("\n".join(textwrap.wrap(heading, 140)), fontsize=9, loc="left")
    axes[-1].set_xlabel("time (s, message header stamps)", fontsize=8)
    return fig, series.topics()


def plot_bag(bag_dir, out_png, topics=None, joints=None) -> list:
    """Draw the IMU, wrench and joint traces of the rosbag2 bag `bag_dir` into the image
    `out_png` (PNG, or JPEG, PDF, SVG by its extension: FIGURE_FILES; 11 x (2.5 n + 0.5) inches
    at 100 dpi for n subplots) and return the topics plotted, in figure order. `topics`: only
    these (names without a leading '/' are taken as absolute); `joints`: only these joints
    (names or fnmatch patterns such as "LLEG_*").

    FileNotFoundError: `bag_dir` does not exist. ValueError: another file extension, not a
    rosbag2 bag, a requested topic missing or of a type that is not plotted, a joint matching
    nothing, or nothing to plot (the message names the bag and the types looked for)."""
    ext = Path(out_png).suffix.lower()
    if ext not in FIGURE_FILES:
        raise ValueError(f"{out_png}: expected a file ending in {', '.join(FIGURE_FILES)}")
    fig, plotted = make_figure(bag_dir, topics, joints)
    fig.savefig(Path(out_png), format="jpeg" if ext == ".jpg" else ext[1:], dpi=DPI)
    return plotted
