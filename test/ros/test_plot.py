"""mbsim_ros.ros.plot: bags written with BagTransport are plotted with the right data.

The figure's line data are compared with the values written (x = header stamps in seconds, not
the bag's log times), the PNG's pixel size is read from its IHDR chunk, and the errors name the
bag and what was looked for.
"""
import struct

import numpy as np
import pytest

from mbsim_ros.ros import messages as m
from mbsim_ros.ros import qos
from mbsim_ros.ros.bag import BagTransport
from mbsim_ros.ros.plot import PLOTTED_TYPES, make_figure, plot_bag, read_series

NS = "/SR1"
ACCEL, GYRO = NS + "/WaistAccelSensor", NS + "/WaistGyro"
LEFT, RIGHT = NS + "/LeftAnkleForceSensor", NS + "/RightAnkleForceSensor"
JOINTS = NS + "/joint_states"
JOINT_NAMES = ["WAIST_P", "WAIST_R", "CHEST"]
N = 40
DT = 0.005
T0 = 12.0                 # simulation time of the first sample, s
LOG_DELAY = 3.0           # bag log time = header stamp + this: the plot must use header stamps


def _stamps():
    return T0 + DT * np.arange(N)


def _accel(t):
    return np.stack([np.sin(t), 0.5 * np.cos(t), 9.8 + 0.0 * t], axis=-1)


def _gyro(t):
    return np.stack([0.1 * t, -0.2 + 0.0 * t, np.cos(3 * t)], axis=-1)


def _wrench(t, side):
    return np.stack([side * t, 2 * t, 300 + 10 * np.sin(t), 0.1 * side + 0 * t, np.cos(t), -t], axis=-1)


def _joints(t):
    return np.stack([np.sin(t + k) for k in range(len(JOINT_NAMES))], axis=-1)


def _write(path, *, extra=True, joint_names=JOINT_NAMES):
    """The SR1 sensor topics, plus (extra) topics of types that are not plotted."""
    t = _stamps()
    with BagTransport(path) as bag:
        a = bag.advertise(ACCEL, m.IMU, qos.SENSOR)
        g = bag.advertise(GYRO, m.IMU, qos.SENSOR)
        left = bag.advertise(LEFT, m.WRENCH_STAMPED, qos.SENSOR)
        right = bag.advertise(RIGHT, m.WRENCH_STAMPED, qos.SENSOR)
        js = bag.advertise(JOINTS, m.JOINT_STATE, qos.DEFAULT)
        if extra:
            clock = bag.advertise("/clock", m.CLOCK, qos.CLOCK)
            desc = bag.advertise(NS + "/robot_description", m.STRING, qos.LATCHED)
            scan = bag.advertise(NS + "/ChestRange", m.LASER_SCAN, qos.SENSOR)
            bag.publish(desc, m.string("<robot name='SR1'/>"), 0)
        q = np.stack([np.sin(t + k) for k in range(len(joint_names))], axis=-1)
        for k, s in enumerate(t):
            log = m.to_nanoseconds(s + LOG_DELAY)
            bag.publish(a, m.imu(s, "WaistAccelSensor", accel=_accel(s), accel_variance=(1e-4,) * 3), log)
            bag.publish(g, m.imu(s, "WaistGyro", gyro=_gyro(s)), log)
            bag.publish(left, m.wrench(s, "LeftAnkleForceSensor", _wrench(s, 1)), log)
            bag.publish(right, m.wrench(s, "RightAnkleForceSensor", _wrench(s, -1)), log)
            bag.publish(js, m.joint_state(s, joint_names, q[k], 2 * q[k], 3 * q[k]), log)
            if extra:
                bag.publish(clock, m.clock(s), log)
                bag.publish(scan, m.laser_scan(s, "ChestRange_laser_frame", np.ones(5), -0.1, 0.05,
                                               0.1, 0.1, 10.0, 0.1), log)
    return path


@pytest.fixture(scope="module")
def bag(tmp_path_factory):
    return _write(tmp_path_factory.mktemp("plot") / "run")


def _png_size(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def _lines(ax):
    return {line.get_label(): line for line in ax.get_lines()}


def _check(line, t, y):
    np.testing.assert_allclose(line.get_xdata(), t, rtol=0, atol=1e-9)
    np.testing.assert_allclose(line.get_ydata(), y, rtol=0, atol=1e-12, equal_nan=True)


def test_plot_bag_png_and_topics(bag, tmp_path):
    out = tmp_path / "plot.png"
    topics = plot_bag(bag, out)
    assert topics == [ACCEL, GYRO, LEFT, RIGHT, JOINTS]
    assert out.is_file()
    assert _png_size(out) == (1100, 250 * 5 + 50)      # 11 x (2.5 n + 0.5) in at 100 dpi


def test_figure_data(bag):
    fig, topics = make_figure(str(bag))
    assert topics == [ACCEL, GYRO, LEFT, RIGHT, JOINTS]
    axes = fig.axes
    assert len(axes) == 5
    titles = [ax.get_title(loc="left") for ax in axes]
    assert titles == [f"IMU linear acceleration: {ACCEL}", f"IMU angular velocity: {GYRO}",
                      f"Force: {LEFT}, {RIGHT}", f"Torque: {LEFT}, {RIGHT}", f"Joint positions: {JOINTS}"]
    t = _stamps()

    # accelerometer: acceleration only (its gyro covariance[0] is -1); gyro: angular velocity only
    lines = _lines(axes[0])
    assert sorted(lines) == [f"{ACCEL} {a}" for a in "xyz"]
    for i, a in enumerate("xyz"):
        _check(lines[f"{ACCEL} {a}"], t, _accel(t)[:, i])
    lines = _lines(axes[1])
    assert sorted(lines) == [f"{GYRO} {a}" for a in "xyz"]
    for i, a in enumerate("xyz"):
        _check(lines[f"{GYRO} {a}"], t, _gyro(t)[:, i])

    # wrenches: force and torque of both sensors, x/y/z coloured alike, sensors by line style
    for ax, cols in ((axes[2], slice(0, 3)), (axes[3], slice(3, 6))):
        lines = _lines(ax)
        assert sorted(lines) == sorted(f"{topic} {a}" for topic in (LEFT, RIGHT) for a in "xyz")
        for topic, side in ((LEFT, 1), (RIGHT, -1)):
            for i, a in enumerate("xyz"):
                _check(lines[f"{topic} {a}"], t, _wrench(t, side)[:, cols][:, i])
        assert lines[f"{LEFT} x"].get_color() == lines[f"{RIGHT} x"].get_color()
        assert lines[f"{LEFT} x"].get_linestyle() != lines[f"{RIGHT} x"].get_linestyle()
        assert lines[f"{LEFT} x"].get_color() != lines[f"{LEFT} y"].get_color()
        assert ax.get_legend() is not None

    # joints: one thin line per joint, with a legend (3 <= 12 joints)
    lines = _lines(axes[4])
    assert sorted(lines) == sorted(JOINT_NAMES)
    for k, name in enumerate(JOINT_NAMES):
        _check(lines[name], t, _joints(t)[:, k])
        assert lines[name].get_linewidth() < 1.0
    legend = axes[4].get_legend()
    assert legend is not None and sorted(x.get_text() for x in legend.get_texts()) == sorted(JOINT_NAMES)
    assert "time" in axes[4].get_xlabel()


def test_many_joints_no_legend(tmp_path):
    names = [f"J{k}" for k in range(13)]
    path = _write(tmp_path / "many", extra=False, joint_names=names)
    fig, _ = make_figure(path, [JOINTS])
    ax, = fig.axes
    assert len(ax.get_lines()) == 13 and ax.get_legend() is None
    t = _stamps()
    _check(_lines(ax)["J12"], t, np.sin(t + 12))

    path = _write(tmp_path / "twelve", extra=False, joint_names=names[:12])
    fig, _ = make_figure(path, [JOINTS])
    assert fig.axes[0].get_legend() is not None


def test_selected_topics(bag, tmp_path):
    out = tmp_path / "wrench.png"
    assert plot_bag(bag, out, topics=[LEFT]) == [LEFT]
    assert _png_size(out) == (1100, 250 * 2 + 50)         # force and torque
    fig, topics = make_figure(bag, [GYRO.lstrip("/"), JOINTS])   # relative names taken as absolute
    assert topics == [GYRO, JOINTS]
    assert [ax.get_title(loc="left") for ax in fig.axes] == [f"IMU angular velocity: {GYRO}",
                                                             f"Joint positions: {JOINTS}"]


def test_imu_gaps_and_stamp_order(tmp_path):
    """Messages without an estimate are gaps (NaN); out-of-order stamps are sorted."""
    path = tmp_path / "gaps"
    stamps = [1.0, 1.02, 1.01, 1.03]
    with BagTransport(path) as b:
        h = b.advertise("/imu", m.IMU, qos.SENSOR)
        for k, s in enumerate(stamps):
            accel = None if k == 1 else (k, 0.0, 9.8)
            b.publish(h, m.imu(s, "imu", accel=accel, gyro=(0.0, 0.0, k)), k)
        h = b.advertise("/orientation_only", m.IMU, qos.SENSOR)    # neither quantity: not plotted
        b.publish(h, m.imu(1.0, "imu", orientation=(0, 0, 0, 1)), 0)
    series = read_series(path)
    assert set(series.imu) == {"/imu"}
    t, accel, gyro = series.imu["/imu"]
    np.testing.assert_allclose(t, [1.0, 1.01, 1.02, 1.03])
    np.testing.assert_allclose(accel[:, 0], [0, 2, np.nan, 3], equal_nan=True)
    np.testing.assert_allclose(gyro[:, 2], [0, 2, 1, 3])
    fig, topics = make_figure(path)
    assert topics == ["/imu"]
    _check(_lines(fig.axes[0])["/imu x"], [1.0, 1.01, 1.02, 1.03], [0, 2, np.nan, 3])
    with pytest.raises(ValueError, match="no acceleration or angular velocity"):
        make_figure(path, ["/orientation_only"])


def test_nothing_to_plot(tmp_path):
    path = tmp_path / "clock_only"
    with BagTransport(path) as b:
        h = b.advertise("/clock", m.CLOCK, qos.CLOCK)
        b.publish(h, m.clock(0.5), 500_000_000)
    with pytest.raises(ValueError) as e:
        plot_bag(path, tmp_path / "x.png")
    text = str(e.value)
    assert str(path) in text and "nothing to plot" in text and "/clock" in text
    for typename in PLOTTED_TYPES:
        assert typename in text
    assert not (tmp_path / "x.png").exists()


def test_bad_topics(bag, tmp_path):
    with pytest.raises(ValueError, match="no topic /nope") as e:
        plot_bag(bag, tmp_path / "x.png", topics=["/nope"])
    assert str(bag) in str(e.value) and JOINTS in str(e.value)
    with pytest.raises(ValueError, match="cannot plot /clock"):
        plot_bag(bag, tmp_path / "x.png", topics=["/clock"])
    with pytest.raises(ValueError, match="empty list"):
        plot_bag(bag, tmp_path / "x.png", topics=[])


def test_missing_and_non_bag_paths(tmp_path):
    missing = tmp_path / "no_such_bag"
    with pytest.raises(FileNotFoundError, match=str(missing)):
        plot_bag(missing, tmp_path / "x.png")
    empty = tmp_path / "empty_dir"
    empty.mkdir()
    with pytest.raises(ValueError, match="is not a readable rosbag2 bag") as e:
        plot_bag(empty, tmp_path / "x.png")
    assert str(empty) in str(e.value)
    text = tmp_path / "notes.txt"
    text.write_text("not a bag\n")
    with pytest.raises(ValueError, match="is not a readable rosbag2 bag") as e:
        plot_bag(text, tmp_path / "x.png")
    assert str(text) in str(e.value)
    assert not (tmp_path / "x.png").exists()


def test_agg_canvas(bag):
    """Drawn on matplotlib's Agg canvas directly (no pyplot figure manager, no display)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    fig, _ = make_figure(bag, [LEFT])
    assert type(fig.canvas) is FigureCanvasAgg


# -- robust y limits (issue 19: the landing spike flattened every trace) -------------------------
from mbsim_ros.ros.plot import robust_limits      # noqa: E402


def test_robust_limits_keep_smooth_data_whole():
    y = np.sin(np.linspace(0, 6, 500))
    lo, hi, clipped = robust_limits(y)
    assert not clipped and lo < y.min() and hi > y.max()
    assert hi - lo == pytest.approx((y.max() - y.min()) * (1 + 2 * 0.08))
    lo, hi, clipped = robust_limits(np.full(10, 9.8))          # a constant: a band around it
    assert not clipped and lo < 9.8 < hi
    assert robust_limits([np.nan, np.inf]) is None


def test_robust_limits_leave_out_a_spike():
    rng = np.random.default_rng(0)
    y = 9.8 + 0.01 * rng.standard_normal(2000)
    y[30:33] = [120.0, 324.0, 50.0]                               # a landing: 3 samples of 2000
    lo, hi, clipped = robust_limits(y)
    bulk = y[33:]
    assert clipped and lo < bulk.min() and hi > bulk.max() and hi < 10.0


def _spiky_bag(path):
    t = 0.001 * np.arange(1000)
    with BagTransport(path) as b:
        h = b.advertise(ACCEL, m.IMU, qos.SENSOR)
        js = b.advertise(JOINTS, m.JOINT_STATE, qos.DEFAULT)
        names = [f"LLEG_J{k}" for k in range(6)] + [f"RLEG_J{k}" for k in range(6)] + ["WAIST_P", "WAIST_R"]
        for k, s in enumerate(t):
            z = 324.0 if k == 30 else (0.0 if k < 30 else 9.8 + 0.05 * np.sin(20 * s))
            b.publish(h, m.imu(s, "WaistAccelSensor", accel=(0.0, 0.1 * np.sin(s), z), accel_variance=(1e-4,) * 3),
                      k)
            b.publish(js, m.joint_state(s, names, 0.01 * np.arange(len(names)) * np.sin(s)), k)
    return path, t


def test_a_spike_does_not_flatten_the_traces_and_is_marked(tmp_path):
    path, t = _spiky_bag(tmp_path / "spiky")
    fig, _ = make_figure(path, [ACCEL])
    ax = fig.axes[0]
    lo, hi = ax.get_ylim()
    assert hi < 11.0 and lo < 0.0                       # 0 (falling) and 9.8 (standing) shown, 324 not
    title = ax.get_title(loc="left")
    assert "1 sample beyond the axis" in title and "extreme 324" in title and "t = 0.03 s" in title
    marks = ax.collections
    assert len(marks) == 1
    np.testing.assert_allclose(marks[0].get_offsets(), [[0.03, hi]], atol=1e-12)
    _check(_lines(ax)[f"{ACCEL} z"], t, [324.0 if k == 30 else (0.0 if k < 30 else 9.8 + 0.05 * np.sin(20 * s))
                                         for k, s in enumerate(t)])     # the data themselves are whole


def test_joints_are_chosen_by_name_or_pattern_with_a_legend(tmp_path):
    path, _ = _spiky_bag(tmp_path / "spiky")
    fig, _ = make_figure(path, [JOINTS])
    ax, = fig.axes
    assert len(ax.get_lines()) == 14 and ax.get_legend() is None
    assert "14 joints: too many for a legend; choose some with --joints" in ax.get_title(loc="left")
    fig, _ = make_figure(path, [JOINTS], joints=["LLEG_*", "WAIST_P"])
    ax, = fig.axes
    expected = [f"LLEG_J{k}" for k in range(6)] + ["WAIST_P"]
    assert sorted(_lines(ax)) == sorted(expected)
    assert sorted(x.get_text() for x in ax.get_legend().get_texts()) == sorted(expected)
    with pytest.raises(ValueError, match="no joint ARM_\\*, NOPE") as e:
        make_figure(path, [JOINTS], joints=["ARM_*", "NOPE", "WAIST_R"])
    assert "LLEG_J0" in str(e.value)


def test_the_figure_format_follows_the_file_name(bag, tmp_path):
    plot_bag(bag, tmp_path / "p.jpg", [LEFT])
    assert (tmp_path / "p.jpg").read_bytes()[:3] == b"\xff\xd8\xff"
    plot_bag(bag, tmp_path / "p.pdf", [LEFT])
    assert (tmp_path / "p.pdf").read_bytes()[:5] == b"%PDF-"
    with pytest.raises(ValueError, match="p.bmp: expected a file ending in .png"):
        plot_bag(bag, tmp_path / "p.bmp", [LEFT])
    assert not (tmp_path / "p.bmp").exists()


def test_mbsim_plot_joints_option(tmp_path, capsys):
    from mbsim_ros import cli
    path, _ = _spiky_bag(tmp_path / "spiky")
    assert cli.main(["plot", str(path), "-o", str(tmp_path / "legs.png"), "--joints", "RLEG_*"]) == 0
    assert _png_size(tmp_path / "legs.png") == (1100, 250 * 2 + 50)
    assert cli.main(["plot", str(path), "-o", str(tmp_path / "x.png"), "--joints", "ARM_*"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no joint ARM_*" in err[0]
