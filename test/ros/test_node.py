"""sim_node through a real ROS 2: the node runs in another process (`python -m mbsim_ros.ros.node`,
what `ros2 run mbsim_ros sim_node` starts) on the bundled SR1 world, and a real rclpy node here
(Jazzy's rclpy 7 with Fast DDS from the test extra's wheels; tf2_msgs built by
test/ros_interfaces) subscribes, calls its services and sets its parameters. Messages arrive
decoded by rclpy's own type support: an independent reader of what our message layer writes.

Times: rates and steps are checked on simulated time (message stamps, /clock), never on the wall
clock, but for the real-time factor, which is wall time by definition. Waits are on events (a
message, the process's exit) with generous timeouts: the first start in a fresh checkout compiles
the numba kernels for minutes.
"""
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import ROS_MISSING

if ROS_MISSING:
    pytest.skip(ROS_MISSING, allow_module_level=True)
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from rclpy_probe import REPO, Output, Probe, child_env, stamp_of  # noqa: E402

from mbsim_ros.ros import messages as m  # noqa: E402
NS = "/SR1"
STARTUP = 1200.0          # s of wall time the first start may take (kernels compile cold)
G = 9.80665
# the configured rates (Hz of simulated time) the node runs with here
# (modest, so that this Python reader keeps up on a loaded machine)
RATES = {"joint_state_rate": 100.0, "tf_rate": 50.0, "clock_rate": 100.0, "diagnostics_rate": 2.0}
SENSOR_RATES = {"WaistAccelSensor": 100.0, "WaistGyro": 100.0, "LeftAnkleForceSensor": 50.0,
                "RightAnkleForceSensor": 50.0, "ChestRange": 10.0, "LeftCamera": 5.0, "RightCamera": 5.0}
BASE_CONFIG = "\n".join([f"{k}: {v}" for k, v in RATES.items()] + ["sensors:"]
                        + [f"  {k}: {{rate: {v}}}" for k, v in SENSOR_RATES.items()]) + "\n"
# RightAnkleForceSensor's values come from a real device: a driver's ROS topic
CONFIG = BASE_CONFIG + "devices:\n  RightAnkleForceSensor: {source: ros, topic: /ft_driver/wrench}\n"
TOPICS = {
    "/clock": m.CLOCK, "/tf": m.TF_MESSAGE, "/tf_static": m.TF_MESSAGE, "/diagnostics": m.DIAGNOSTIC_ARRAY,
    NS + "/joint_states": m.JOINT_STATE, NS + "/robot_description": m.STRING,
    NS + "/WaistAccelSensor": m.IMU, NS + "/WaistGyro": m.IMU,
    NS + "/LeftAnkleForceSensor": m.WRENCH_STAMPED, NS + "/RightAnkleForceSensor": m.WRENCH_STAMPED,
    NS + "/RightAnkleForceSensor/sim": m.WRENCH_STAMPED, NS + "/ChestRange": m.LASER_SCAN,
    **{f"{NS}/{cam}/{kind}": t for cam in ("LeftCamera", "RightCamera")
       for kind, t in (("image_raw", m.IMAGE), ("camera_info", m.CAMERA_INFO),
                       ("depth/image_raw", m.IMAGE), ("depth/camera_info", m.CAMERA_INFO))},
}
LATCHED = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
# /clock as rclpy's own time source reads it (best effort), keeping every message that arrives
CLOCK_QOS = QoSProfile(history=HistoryPolicy.KEEP_ALL, reliability=ReliabilityPolicy.BEST_EFFORT)


# the rest: reliable and keep-all, so that nothing is lost while this Python reader lags behind
KEEP_ALL = QoSProfile(history=HistoryPolicy.KEEP_ALL, reliability=ReliabilityPolicy.RELIABLE)


def qos_of(topic):
    return LATCHED if topic.endswith(("tf_static", "robot_description")) else CLOCK_QOS if topic == "/clock" else KEEP_ALL


def start_node(*ros_args, config=CONFIG, tmp=None, ns=NS, domain=None):
    """python -m mbsim_ros.ros.node in namespace `ns` with `config` (on ROS domain `domain`, default
    the session's), as a process with the environment the test session began with (before
    `import opensim` changed LD_LIBRARY_PATH)."""
    args = [sys.executable, "-m", "mbsim_ros.ros.node", "--ros-args", "-r", f"__ns:={ns}"]
    if config:
        path = Path(tmp) / "sim_node.yaml"
        path.write_text(config)
        args += ["-p", f"config:={path}"]
    for a in ros_args:
        args += ["-p", a]
    env = child_env(**({} if domain is None else {"ROS_DOMAIN_ID": domain}))
    return subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    """(process, output, probe): sim_node running, the probe subscribed to every topic."""
    tmp = tmp_path_factory.mktemp("sim_node")
    proc = start_node("use_sim_time:=true", tmp=tmp)
    out = Output(proc)
    probe = Probe()
    for topic, typename in TOPICS.items():
        probe.subscribe(topic, typename, qos_of(topic))
    try:
        probe.wait("the first /clock (a cold start compiles the kernels)", lambda: probe.messages("/clock"),
                   STARTUP, proc)
        probe.wait_sim(2.0)
        yield proc, out, probe
    finally:
        probe.close()
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        out.thread.join(5)
        print(out.text[-5000:])             # shown where a test failed
    assert proc.returncode == 0, out.text[-3000:]


def test_the_node_logs_that_it_compiles_before_loading(sim):
    proc, out, probe = sim
    lines = out.lines
    compiling = next(k for k, line in enumerate(lines) if "compiling the simulation kernels" in line)
    simulating = next(k for k, line in enumerate(lines) if "simulating SR1" in line)
    assert compiling < simulating
    assert "topics and services under /SR1" in lines[simulating]


def test_every_topic_with_its_type(sim):
    proc, out, probe = sim
    probe.wait("every topic in the graph", lambda: all(
        topic in dict(probe.node.get_topic_names_and_types()) for topic in TOPICS))
    graph = dict(probe.node.get_topic_names_and_types())
    for topic, typename in TOPICS.items():
        assert graph[topic] == [typename], topic
    # the node's inputs
    for topic in (NS + "/joint_commands", NS + "/joint_efforts", "/ft_driver/wrench"):
        assert probe.node.get_subscriptions_info_by_topic(topic), topic
    probe.wait("a message on every topic", lambda: all(probe.messages(t) for t in TOPICS if t != "/ft_driver/wrench"
                                                       and not t.endswith("RightAnkleForceSensor")))


def _rate(msgs, t_from, t_to):
    """Messages per simulated second between stamps t_from and t_to (the count over the span)."""
    stamps = sorted({stamp_of(msg) for msg in msgs})
    inside = [s for s in stamps if t_from <= s < t_to]
    return len(inside) / (t_to - t_from)


def test_rates_on_simulated_time(sim):
    """Each topic's rate on simulated time, from its messages' stamps over 4 s: every stamp on
    its k / rate grid and their spacing 1 / rate, within 5 % (the issue's tolerance; the schedule
    is exact, so this fails for a wrong rate and for counters that lose steps). Delivery counted
    apart: all but 10 % of the scheduled messages arrive here (reliable topics: Fast DDS on a
    loaded 2-core machine still loses an occasional small message behind a burst of images;
    /clock is best effort, rclcpp's ClockQoS, and loses more under load: half)."""
    proc, out, probe = sim
    t0 = probe.node_time() + 0.5
    span = (t0, t0 + 4.0)
    expected = {"/clock": RATES["clock_rate"], NS + "/joint_states": RATES["joint_state_rate"],
                "/tf": RATES["tf_rate"], "/diagnostics": RATES["diagnostics_rate"]}
    expected.update({NS + "/" + s: r for s, r in SENSOR_RATES.items() if "Camera" not in s and s != "RightAnkleForceSensor"})
    expected[NS + "/RightAnkleForceSensor/sim"] = SENSOR_RATES["RightAnkleForceSensor"]
    for cam in ("LeftCamera", "RightCamera"):
        for kind in ("image_raw", "camera_info", "depth/image_raw", "depth/camera_info"):
            expected[f"{NS}/{cam}/{kind}"] = SENSOR_RATES[cam]
    # each topic arrives with its own lag (publishing images takes longer): wait for each
    for topic in expected:
        probe.wait_stamp(topic, span[1])
    for topic, rate in expected.items():
        stamps = np.array(sorted({stamp_of(x) for x in probe.messages(topic) if span[0] <= stamp_of(x) < span[1]}))
        k = stamps * rate
        assert np.abs(k - np.round(k)).max() < 1e-6, f"{topic}: stamps off the 1/{rate:g} s grid: {stamps}"
        got = 1.0 / np.median(np.diff(stamps))
        assert abs(got - rate) <= 0.05 * rate, f"{topic}: {got:g} Hz, configured {rate:g} Hz"
        grid = np.arange(np.ceil(span[0] * rate - 1e-6), np.ceil(span[1] * rate - 1e-6)) / rate
        missing = [round(g, 6) for g in grid if not np.isclose(stamps, g, atol=1e-6).any()]
        allowed = 0.5 if topic == "/clock" else 0.1
        assert len(missing) <= allowed * len(grid), f"{topic}: {len(missing)} of {len(grid)} missing: {missing}"


def test_imu_at_rest_reads_plus_g_with_the_rep145_markers(sim):
    """The SR1 robot stands held by its joint springs: the waist accelerometer reads +g up
    (REP 145), within 0.3 m/s^2 on the mean over 0.5 s (the stance still sways a little)."""
    proc, out, probe = sim
    since = time.monotonic()
    probe.wait_sim(0.5)
    accel = probe.messages(NS + "/WaistAccelSensor", since)
    gyro = probe.messages(NS + "/WaistGyro", since)
    a = np.array([[x.linear_acceleration.x, x.linear_acceleration.y, x.linear_acceleration.z] for x in accel])
    assert abs(np.linalg.norm(a.mean(axis=0)) - G) < 0.3 and a.mean(axis=0)[2] > G - 0.3
    last = accel[-1]
    assert last.orientation_covariance[0] == -1 and last.angular_velocity_covariance[0] == -1
    assert last.linear_acceleration_covariance[0] >= 0
    assert gyro[-1].orientation_covariance[0] == -1 and gyro[-1].linear_acceleration_covariance[0] == -1
    w = np.array([[x.angular_velocity.x, x.angular_velocity.y, x.angular_velocity.z] for x in gyro])
    assert np.abs(w.mean(axis=0)).max() < 0.1           # rad/s: at rest


def _tf_frames(probe):
    edges = {}
    for msg in probe.messages("/tf_static") + probe.messages("/tf")[-50:]:
        for t in msg.transforms:
            edges[t.child_frame_id] = t.header.frame_id
    return edges


def test_frame_ids_are_in_the_tf_tree(sim):
    proc, out, probe = sim
    edges = _tf_frames(probe)
    for child in edges:                     # every frame reaches world
        frame, seen = child, set()
        while frame in edges:
            assert frame not in seen, f"a TF loop at {frame}"
            seen.add(frame)
            frame = edges[frame]
        assert frame == "world", f"{child} hangs from {frame}, not from world"
    frames = set(edges) | set(edges.values())
    for topic in TOPICS:      # (RightAnkleForceSensor carries its device: test_set_source checks it)
        if topic.startswith(NS + "/") and not topic.endswith(("robot_description", "joint_states", "ForceSensor")):
            msgs = probe.messages(topic)
            assert msgs, topic
            assert msgs[-1].header.frame_id in frames, f"{topic}: frame {msgs[-1].header.frame_id!r} not in TF"
    js = probe.messages(NS + "/joint_states")[-1]
    assert "WAIST_P" in js.name and len(js.position) == len(js.name) == len(js.velocity) == len(js.effort)


def test_camera_and_laser_messages_are_consistent(sim):
    proc, out, probe = sim
    for cam in ("LeftCamera", "RightCamera"):
        info = probe.messages(f"{NS}/{cam}/camera_info")[-1]
        image = probe.messages(f"{NS}/{cam}/image_raw")[-1]
        depth = probe.messages(f"{NS}/{cam}/depth/image_raw")[-1]
        assert (info.width, info.height) == (image.width, image.height) == (depth.width, depth.height) == (320, 240)
        assert image.encoding == "rgb8" and image.step == 3 * 320 and len(image.data) == 3 * 320 * 240
        assert depth.encoding == "32FC1" and depth.step == 4 * 320 and len(depth.data) == 4 * 320 * 240
        assert info.k[0] > 0 and 0 < info.k[2] < 320 and 0 < info.k[5] < 240
        assert image.header.frame_id == info.header.frame_id == depth.header.frame_id
    scan = probe.messages(NS + "/ChestRange")[-1]
    n = len(scan.ranges)
    assert n > 1 and scan.angle_min < 0 < scan.angle_max
    # angle_max = angle_min + (n - 1) increment: each range has its angle (within float32 rounding)
    assert scan.angle_min + (n - 1) * scan.angle_increment == pytest.approx(scan.angle_max, abs=1e-5)
    assert 0 <= scan.range_min < scan.range_max


def test_a_late_subscriber_gets_the_latched_topics_and_clock_has_one_publisher(sim):
    proc, out, probe = sim
    late = Probe("mbsim_late_probe")
    try:
        late.subscribe("/tf_static", m.TF_MESSAGE, LATCHED)
        late.subscribe(NS + "/robot_description", m.STRING, LATCHED)
        late.wait("the latched messages", lambda: late.messages("/tf_static") and late.messages(NS + "/robot_description"))
        assert late.messages(NS + "/robot_description")[0].data.startswith('<robot name="SR1"')
        assert len(late.messages("/tf_static")[0].transforms) > 3
    finally:
        late.close()
    clocks = probe.node.get_publishers_info_by_topic("/clock")
    assert len(clocks) == 1 and clocks[0].node_name == "mbsim" and clocks[0].node_namespace == NS


def test_use_sim_time_follows_clock(sim):
    """Both nodes run with use_sim_time: the probe's clock reads the simulated time /clock carries."""
    proc, out, probe = sim
    probe.wait_sim(0.2)
    now = probe.node.get_clock().now().nanoseconds
    assert 0 < now < 1e6 * 1e9                # simulated seconds, not the wall clock's
    # the probe's time is a /clock value (its TimeSource takes the newest; the recording here
    # lags behind it and, best effort, may miss one: sample until one matches)
    samples = []

    def matches():
        samples.append(probe.node.get_clock().now().nanoseconds)
        stamps = {x.clock.sec * 10**9 + x.clock.nanosec for x in probe.messages("/clock")}
        return any(t in stamps for t in samples)
    probe.wait("the probe's time among the /clock stamps", matches)
    from rcl_interfaces.srv import GetParameters
    got = probe.call(GetParameters, NS + "/mbsim/get_parameters", GetParameters.Request(names=["use_sim_time"]))
    assert got.values[0].bool_value is True


# -- parameters -------------------------------------------------------------------------------
def _params(probe, names):
    from rcl_interfaces.srv import GetParameters
    from rclpy.parameter import parameter_value_to_python
    got = probe.call(GetParameters, NS + "/mbsim/get_parameters", GetParameters.Request(names=names))
    return {n: parameter_value_to_python(v) for n, v in zip(names, got.values)}


def _set(probe, **values):
    from rcl_interfaces.srv import SetParameters
    req = SetParameters.Request(parameters=[Parameter(k, value=v).to_parameter_msg() for k, v in values.items()])
    return probe.call(SetParameters, NS + "/mbsim/set_parameters", req).results


def test_parameters_list_describe_get(sim):
    from rcl_interfaces.msg import ParameterType
    from rcl_interfaces.srv import DescribeParameters, ListParameters

    from mbsim_ros.ros.parameters import PARAMETERS
    proc, out, probe = sim
    listed = probe.call(ListParameters, NS + "/mbsim/list_parameters", ListParameters.Request()).result.names
    assert set(PARAMETERS) | {"use_sim_time"} <= set(listed)
    described = probe.call(DescribeParameters, NS + "/mbsim/describe_parameters",
                           DescribeParameters.Request(names=list(PARAMETERS))).descriptors
    for d in described:
        default, bounds, runtime, text = PARAMETERS[d.name]
        assert d.description == text and d.read_only == (not runtime), d.name
        if isinstance(default, float):
            assert (d.floating_point_range[0].from_value, d.floating_point_range[0].to_value) == bounds, d.name
        elif isinstance(default, int) and not isinstance(default, bool):
            assert d.type == ParameterType.PARAMETER_INTEGER
            assert (d.integer_range[0].from_value, d.integer_range[0].to_value) == bounds, d.name
    values = _params(probe, ["real_time_factor", "joint_state_rate", "model", "paused"])
    assert values == {"real_time_factor": 1.0, "joint_state_rate": 100.0, "model": "", "paused": False}


def test_read_only_and_bad_values_are_refused_with_the_reason(sim):
    proc, out, probe = sim
    r = _set(probe, dt=0.002)[0]
    assert not r.successful and "read-only" in r.reason
    r = _set(probe, real_time_factor=-1.0)[0]
    assert not r.successful and "real_time_factor" in r.reason
    r = _set(probe, catch_up="sometimes")[0]
    assert not r.successful and "compensatory" in r.reason
    r = _set(probe, joint_state_rate="fast")[0]
    assert not r.successful and "number" in r.reason
    assert _params(probe, ["real_time_factor", "dt"]) == {"real_time_factor": 1.0, "dt": 0.001}


def test_a_rate_set_at_run_time_applies(sim):
    """joint_state_rate 10 (an integer, as `ros2 param set` sends it): 10 per simulated second
    within 5 %, then back to 100."""
    proc, out, probe = sim
    assert _set(probe, joint_state_rate=10)[0].successful
    try:
        t0 = probe.node_time() + 0.3              # past the change, which applies at the next step
        probe.wait_stamp(NS + "/joint_states", t0 + 3.0)
        got = _rate(probe.messages(NS + "/joint_states"), t0, t0 + 3.0)
        stamps = sorted(stamp_of(x) for x in probe.messages(NS + "/joint_states") if t0 - 0.2 <= stamp_of(x) < t0 + 3.2)
        assert abs(got - 10.0) <= 0.5, f"{got}: {stamps}; {_diagnostics(probe)}"
    finally:
        assert _set(probe, joint_state_rate=100.0)[0].successful


def _diagnostics(probe):
    """The node's latest "mbsim: simulation" status values (runner statistics, messages dropped)."""
    status = probe.messages("/diagnostics")[-1].status[0]
    return {v.key: v.value for v in status.values}


def _measured_rtf(probe, wall=4.0):
    """Simulated seconds per wall second over `wall` s: the least-squares slope of /clock stamps
    over their reception times as this process's middleware stamped them (DDS receive thread).
    Not the times the probe's Python callbacks ran: on a loaded 2-core machine its executor fell
    behind and then drained a backlog, which measured 1.2-1.4 and once 3.5 while the node's
    own statistics showed 2.0."""
    probe.subscribe("/clock", m.CLOCK, CLOCK_QOS)
    time.sleep(1.0)                       # the new pace has set in
    start = time.time_ns()
    time.sleep(wall)
    time.sleep(0.5)                       # what arrived in the window has been taken
    with probe.lock:
        got = [(stamp_of(x), ns * 1e-9) for (x, _), ns in zip(probe.got["/clock"], probe.received["/clock"])
               if start <= ns < start + wall * 1e9]
    assert len(got) >= 30, f"only {len(got)} /clock messages in {wall} s"
    stamps, received = np.array(got).T
    return float(np.polyfit(received - received[0], stamps, 1)[0])


def test_real_time_factor_two_is_measured_as_two(tmp_path):
    """real_time_factor 2 set at run time: the simulation advances 2 s per wall second within
    5 % (the issue's tolerance), measured from the stamps of /clock (20 Hz of simulated time)
    against their reception in this process over 4 s. A node of its own, in a DDS domain of its own
    (its /clock alone), without the cameras and the range sensor (rendering), its other topics at
    10 Hz, and a probe that reads little more than /clock, so that a 2-core machine keeps up with 2x (this world steps at
    about 3x real time on one loaded core here: a machine busier than that fails this test, and
    the message shows the node's own overruns)."""
    domain = _other_domain()
    # the physics thread under SCHED_FIFO (root here, as in CI): other processes' bursts do not
    # preempt it (without it, 1 CI run in 3 measured 1.57 with hundreds of steps late by > 2 ms)
    light = ("joint_state_rate: 10\ntf_rate: 10\nclock_rate: 20\nrealtime_priority: 50\nsensors:\n"
             + "".join(f"  {s}: {{enabled: false}}\n" for s in ("LeftCamera", "RightCamera", "ChestRange"))
             + "".join(f"  {s}: {{rate: 10}}\n" for s in ("WaistAccelSensor", "WaistGyro", "LeftAnkleForceSensor",
                                                            "RightAnkleForceSensor")))
    proc = start_node(config=light, tmp=tmp_path, domain=domain)
    out = Output(proc)
    probe = Probe("mbsim_rtf_probe", domain=domain)
    try:
        probe.subscribe("/diagnostics", m.DIAGNOSTIC_ARRAY, KEEP_ALL)
        probe.wait("the node's parameters", lambda: probe.node.count_publishers("/clock") > 0, STARTUP, proc)
        probe.wait("simulated time", lambda: probe.node.get_clock().now().nanoseconds > 5e8, STARTUP, proc)
        assert _set(probe, real_time_factor=2.0)[0].successful
        # the node's own thread (its executor) takes the GIL too: one level below the physics, so
        # that the machine's other processes cannot deschedule it while it holds the GIL
        # (with twenty subscribers beside it, that held the physics back by up to 50 ms)
        if _may_use_fifo():
            assert (os.sched_getscheduler(proc.pid), os.sched_getparam(proc.pid).sched_priority) == (os.SCHED_FIFO, 49)
        rtf = _measured_rtf(probe)
        stats = _diagnostics(probe)
        assert stats["target_rtf"] == "2"                # applied
        assert abs(rtf - 2.0) <= 0.1, f"measured {rtf:.3f}; the node's own statistics: {stats}"
    finally:
        probe.close()
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
        out.thread.join(5)
        print(out.text[-3000:])


def _may_use_fifo():
    """Whether this process may put a thread under SCHED_FIFO (root, as in CI, or an rtprio limit)."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
    except PermissionError:
        return False
    os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    return True


def _other_domain():
    """A ROS domain beside the session's (100-199, conftest) for a node of its own."""
    return (int(os.environ["ROS_DOMAIN_ID"]) - 100 + 50) % 100 + 100


def test_hold_and_catch_up_change_at_run_time(sim):
    proc, out, probe = sim
    assert _set(probe, catch_up="conservative")[0].successful
    assert _set(probe, catch_up="compensatory")[0].successful
    assert _set(probe, hold=2000.0)[0].successful
    assert _params(probe, ["catch_up", "hold"]) == {"catch_up": "compensatory", "hold": 2000.0}


# -- services -----------------------------------------------------------------------------------
def test_pause_freezes_clock_and_step_advances_one_dt(sim):
    from std_srvs.srv import SetBool, Trigger
    proc, out, probe = sim
    # a /clock and a joint_states per step
    assert all(r.successful for r in _set(probe, clock_rate=1000.0, joint_state_rate=1000.0))
    try:
        assert probe.call(SetBool, NS + "/pause", SetBool.Request(data=True)).success
        probe.wait("the paused parameter", lambda: _params(probe, ["paused"])["paused"] is True, 10)

        def last_arrival(topic):
            with probe.lock:
                return probe.got[topic][-1][1]
        # frozen: /clock and joint_states fall silent (once what was in flight, and this reader's
        # backlog, is in: under load the reliable joint_states queue drains after best-effort /clock)
        probe.wait("/clock and joint_states to fall silent",
                   lambda: min(time.monotonic() - last_arrival(x) for x in ("/clock", NS + "/joint_states")) > 1.5)
        n, t_clock = len(probe.messages("/clock")), probe.sim_time()
        # the time it paused at: the newest joint_states (reliable: the last one always arrives;
        # /clock is best effort, as every simulator publishes it, so its last may be lost)
        t = stamp_of(probe.messages(NS + "/joint_states")[-1])
        assert t_clock in (pytest.approx(t, abs=1e-9), pytest.approx(t - 0.001, abs=1e-9))
        time.sleep(1.0)
        assert len(probe.messages("/clock")) == n and probe.sim_time() == t_clock
        r = probe.call(Trigger, NS + "/step", Trigger.Request())
        assert r.success
        assert float(r.message.split()[2]) == pytest.approx(t + 0.001, abs=1e-6)     # "t = ... s": one dt on
        probe.wait("the stepped joint_states", lambda: stamp_of(probe.messages(NS + "/joint_states")[-1]) > t, 10)
        assert stamp_of(probe.messages(NS + "/joint_states")[-1]) == pytest.approx(t + 0.001, abs=1e-9)
        probe.wait("the stepped /clock", lambda: probe.sim_time() > t_clock, 10)
        assert probe.sim_time() == pytest.approx(t + 0.001, abs=1e-9)
    finally:
        # the parameter resumes as the service does
        assert all(r.successful for r in _set(probe, paused=False, clock_rate=RATES["clock_rate"],
                                              joint_state_rate=RATES["joint_state_rate"]))
    assert _params(probe, ["paused", "clock_rate", "joint_state_rate"]) == {
        "paused": False, "clock_rate": RATES["clock_rate"], "joint_state_rate": RATES["joint_state_rate"]}
    probe.wait_sim(0.2)


def test_reset_restarts_at_zero_and_every_topic_keeps_flowing(sim):
    from std_srvs.srv import Trigger
    proc, out, probe = sim
    assert probe.node_time() > 1.0
    since = time.monotonic()
    assert probe.call(Trigger, NS + "/reset", Trigger.Request()).success
    for topic in TOPICS:
        if topic in ("/tf_static", NS + "/robot_description", NS + "/RightAnkleForceSensor"):
            continue
        probe.wait(f"{topic} within 1 s of simulated time after the reset",
                   lambda: any(stamp_of(x) < 1.0 for x in probe.messages(topic, since)))
    first = min(stamp_of(x) for x in probe.messages("/clock", since))
    assert first <= 0.05                    # /clock restarted at 0 (best effort: the first few may be lost)


def test_set_source_switches_a_ros_device(sim):
    """RightAnkleForceSensor reads a `source: ros` device on /ft_driver/wrench: its topic carries
    the device's wrench; set_source false puts the simulated one there, true the device's again."""
    from geometry_msgs.msg import WrenchStamped
    from std_srvs.srv import SetBool
    proc, out, probe = sim
    topic = NS + "/RightAnkleForceSensor"
    pub = probe.node.create_publisher(WrenchStamped, "/ft_driver/wrench", 10)
    stop = threading.Event()

    def drive():
        while not stop.is_set():
            msg = WrenchStamped()
            msg.header.frame_id = "ft_driver"
            msg.wrench.force.x = 123.0
            pub.publish(msg)
            time.sleep(0.005)
    driver = threading.Thread(target=drive, daemon=True)
    driver.start()
    try:
        since = time.monotonic()
        probe.wait("the device's wrench on the sensor's topic",
                   lambda: any(x.wrench.force.x == 123.0 for x in probe.messages(topic, since)))
        since = time.monotonic()
        r = probe.call(SetBool, f"{topic}/set_source", SetBool.Request(data=False))
        assert r.success and "sim" in r.message
        probe.wait_sim(0.3)
        # in simulated time order (messages of steps before the switch may still arrive on a
        # loaded machine): the device's values, then the simulated ones only, from one instant on
        forces = [x.wrench.force.x for x in sorted(probe.messages(topic, since), key=stamp_of)]
        first_sim = next((i for i, f in enumerate(forces) if f != 123.0), None)
        assert first_sim is not None and all(f != 123.0 for f in forces[first_sim:]), forces
        r = probe.call(SetBool, f"{topic}/set_source", SetBool.Request(data=True))
        assert r.success
        since = time.monotonic()
        probe.wait("the device's wrench again", lambda: any(x.wrench.force.x == 123.0 for x in probe.messages(topic, since)))
    finally:
        stop.set()
        driver.join(2)
        probe.node.destroy_publisher(pub)


def test_joint_commands_reach_the_joints(sim):
    """An effort on one joint held by the hold springs (2000 N m/rad) turns it by effort / 2000 =
    0.05 rad for 100 N m, and by 0.025 rad once `hold` is set to 4000 at run time; within 0.01
    and 0.005 rad (gravity's torque on the forearm changes as it turns).
    Angles are means over 0.2 s of joint_states. Each change is awaited until two such means
    0.4 s of sim time apart both agree (the springs are critically damped: they settle and stay);
    a probe that lags the node under load cannot tell when a command or parameter took effect."""
    from sensor_msgs.msg import JointState
    proc, out, probe = sim
    joint = "RARM_ELBOW"
    topic = NS + "/joint_states"
    k = list(probe.messages(topic)[-1].name).index(joint)
    since = time.monotonic()               # (after the reset test: earlier messages repeat these stamps)

    def angle_at(t):
        probe.wait_stamp(topic, t, since)
        return np.mean([x.position[k] for x in probe.messages(topic, since) if t - 0.2 <= stamp_of(x) <= t])

    def now():      # the node's time by the topic itself (the probe's clock may lag a reset)
        probe.wait(f"{topic} from the running node", lambda: probe.messages(topic, since), 30, proc)
        return max(stamp_of(x) for x in probe.messages(topic, since))
    def settles_at(angle, tol, what, timeout=60.0):
        deadline, seen = time.monotonic() + timeout, []
        while time.monotonic() < deadline:
            t = now()
            seen.append(angle_at(t))
            if abs(seen[-1] - angle) <= tol and abs(angle_at(t + 0.4) - angle) <= tol:
                return
            time.sleep(0.2)
        raise AssertionError(f"{what}: the angle never settled at {angle:.4f} +- {tol} rad in {timeout:g} s: "
                             f"{np.round(seen[-5:], 4)}")
    before = angle_at(max(now() + 0.3, 2.5))
    pub = probe.node.create_publisher(JointState, NS + "/joint_commands", 10)
    # as a controller does, the command is published at a rate (20 Hz), not once: a single
    # message sent as discovery completes may reach no reader
    effort, stop = [100.0], threading.Event()

    def command():
        while not stop.wait(0.05):
            pub.publish(JointState(name=[joint], effort=[effort[0]]))
    publisher = threading.Thread(target=command, daemon=True)
    try:
        probe.wait("the node's joint_commands subscription", lambda: pub.get_subscription_count() > 0, 10)
        publisher.start()
        settles_at(before + 0.05, 0.01, "100 N m against hold 2000")
        # hold set at run time: twice as stiff, half the turn
        assert _set(probe, hold=4000.0)[0].successful
        settles_at(before + 0.025, 0.005, "100 N m against hold 4000")
        effort[0] = 0.0
        settles_at(before, 0.005, "no effort")
    finally:
        stop.set()
        publisher.join(2)
        _set(probe, hold=2000.0)
        probe.node.destroy_publisher(pub)


# -- stopping ---------------------------------------------------------------------------------
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_ends_the_node_with_status_0_and_a_complete_bag(tmp_path, signum):
    """SIGINT (Ctrl-C) and SIGTERM (what `ros2 launch` sends after SIGINT): exit 0, no traceback,
    no failed publisher job, and the bag the node recorded is closed: rosbags reads every message
    its metadata counts."""
    from rosbags.rosbag2 import Reader
    bag = tmp_path / "bag"
    ns, domain = "/SR1stop", _other_domain()       # beside the module's node
    proc = start_node(f"bag:={bag}", config=BASE_CONFIG, tmp=tmp_path, ns=ns, domain=domain)
    out = Output(proc)
    probe = Probe("mbsim_signal_probe", domain=domain)
    try:
        probe.subscribe(ns + "/joint_states", m.JOINT_STATE, KEEP_ALL)
        probe.wait("0.5 s of simulated time", lambda: any(stamp_of(x) >= 0.5 for x in probe.messages(ns + "/joint_states")),
                   STARTUP, proc)
    finally:
        probe.close()
    proc.send_signal(signum)
    assert proc.wait(timeout=60) == 0, out.text[-3000:]
    out.thread.join(5)
    assert "Traceback" not in out.text and "job failed" not in out.text, out.text[-3000:]
    assert f"stopped by {signal.Signals(signum).name}" in out.text
    with Reader(bag) as reader:
        counted = {c.topic: c.msgcount for c in reader.connections}
        read = {}
        for connection, _, _ in reader.messages():
            read[connection.topic] = read.get(connection.topic, 0) + 1
    assert counted["/clock"] >= 50 and counted[ns + "/joint_states"] >= 50      # 100 Hz, >= 0.5 s
    assert read == {t: n for t, n in counted.items() if n}
