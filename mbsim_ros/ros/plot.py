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
from pathlib import Path

import numpy as np

from .bag_reader import PANELS, PLOTTED_TYPES, BagSeries, read_series

__all__ = ["FIGURE_FILES", "PLOTTED_TYPES", "BagSeries", "read_series", "make_figure", "plot_bag",
           "robust_limits"]

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
    panels = [(key, title, unit, series.panel(key)) for key, title, unit in PANELS]
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
