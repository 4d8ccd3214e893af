"""`mbsim run`: the bag it records read back with an independent decoder, live DDS to another
process, the node's parameters, joint commands, and bad input."""
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import subprocess_env
from lxml import etree

from mbsim_ros.cli import main
from mbsim_ros.ros import messages as msg
from mbsim_ros.run.config import DEFAULTS, load_config
from mbsim_ros.ros.parameters import config_from_parameters
from mbsim_ros.ros.transport import NullTransport

try:     # the DDS test's fixtures: an independent cyclonedds process, a fresh domain id
    from test_dds import domain, helpers  # noqa: F401
except pytest.skip.Exception:
    domain = helpers = None

G = 9.80665
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """One second of the bundled world recorded as fast as possible, read back with
    mcap-ros2-support (not our code): {topic: [(log_time_ns, schema name, decoded message)]}."""
    reader = pytest.importorskip("mcap_ros2.reader", reason="mcap-ros2-support is a test dependency")
    bag = tmp_path_factory.mktemp("run") / "bag"
    assert main(["run", "--transport", "none", "--rtf", "0", "--duration", "1", "--bag", str(bag), "--quiet"]) == 0
    topics = defaultdict(list)
    for m in reader.read_ros2_messages(str(next(bag.glob("*.mcap")))):
        topics[m.channel.topic].append((m.log_time_ns, m.schema.name, m.ros_msg))
    return bag, topics


def test_the_bag_has_every_topic_with_its_type(recorded):
    _, topics = recorded
    expected = {
        "/clock": "rosgraph_msgs/msg/Clock", "/tf": "tf2_msgs/msg/TFMessage", "/tf_static": "tf2_msgs/msg/TFMessage",
        "/diagnostics": "diagnostic_msgs/msg/DiagnosticArray", "/SR1/joint_states": "sensor_msgs/msg/JointState",
        "/SR1/robot_description": "std_msgs/msg/String", "/SR1/WaistAccelSensor": "sensor_msgs/msg/Imu",
        "/SR1/WaistGyro": "sensor_msgs/msg/Imu", "/SR1/LeftAnkleForceSensor": "geometry_msgs/msg/WrenchStamped",
        "/SR1/RightAnkleForceSensor": "geometry_msgs/msg/WrenchStamped", "/SR1/ChestRange": "sensor_msgs/msg/LaserScan",
        "/SR1/LeftCamera/image_raw": "sensor_msgs/msg/Image", "/SR1/LeftCamera/camera_info": "sensor_msgs/msg/CameraInfo",
        "/SR1/LeftCamera/depth/image_raw": "sensor_msgs/msg/Image",
        "/SR1/RightCamera/depth/camera_info": "sensor_msgs/msg/CameraInfo",
    }
    for topic, typename in expected.items():
        assert topic in topics, f"{topic} missing from the bag"
        assert {t for _, t, _ in topics[topic]} == {typename}


@pytest.mark.parametrize("topic, rate", [("/SR1/WaistAccelSensor", 1000), ("/SR1/LeftAnkleForceSensor", 1000),
                                         ("/SR1/joint_states", 100), ("/tf", 100), ("/clock", 1000),
                                         ("/SR1/LeftCamera/image_raw", 30), ("/SR1/ChestRange", 10)])
def test_message_counts_match_the_rates_within_5_percent(recorded, topic, rate):
    _, topics = recorded
    # one simulated second, plus the sample at t = 0 for the state topics
    assert len(topics[topic]) == pytest.approx(rate, rel=0.05, abs=1)


def stamp(m):
    return m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec


def test_stamps_strictly_increase_on_every_stamped_topic(recorded):
    _, topics = recorded
    for topic, items in topics.items():
        if topic in ("/tf_static", "/SR1/robot_description", "/SR1/floor/robot_description", "/clock", "/tf", "/diagnostics"):
            continue
        stamps = [stamp(m) for _, _, m in items]
        assert np.all(np.diff(stamps) > 0), topic
    clock = [c.clock.sec + 1e-9 * c.clock.nanosec for _, _, c in topics["/clock"]]
    assert np.all(np.diff(clock) > 0)
    tf = [stamp(m.transforms[0]) for _, _, m in topics["/tf"]]
    assert np.all(np.diff(tf) > 0)


def test_every_frame_id_is_in_one_tf_tree_rooted_at_world(recorded):
    _, topics = recorded
    parent = {}
    for name in ("/tf_static", "/tf"):
        for _, _, m in topics[name]:
            for t in m.transforms:
                parent[t.child_frame_id] = t.header.frame_id
    for topic, items in topics.items():
        for _, _, m in items[:3]:
            frame = getattr(getattr(m, "header", None), "frame_id", "")
            if not frame:
                continue
            seen = 0
            while frame != "world":                 # walk up to the root
                assert frame in parent, f"{topic}: frame {frame!r} is not in the TF tree"
                frame = parent[frame]
                seen += 1
                assert seen < 100


def test_robot_description_is_urdf_with_every_tf_frame_of_the_robot(recorded):
    _, topics = recorded
    (_, _, desc), = topics["/SR1/robot_description"]
    robot = etree.fromstring(desc.data.encode())
    assert robot.tag == "robot" and robot.get("name") == "SR1"
    links = {l.get("name") for l in robot.iter("link")}
    for name in ("WAIST", "LLEG_ANKLE_R", "WaistAccelSensor", "LeftCamera_optical_frame", "ChestRange_laser_frame"):
        assert name in links


def test_latched_topics_are_recorded_transient_local(recorded):
    bag, _ = recorded
    meta = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert meta["version"] == 8
    qos = {t["topic_metadata"]["name"]: t["topic_metadata"]["offered_qos_profiles"] for t in meta["topics_with_message_count"]}
    for topic in ("/tf_static", "/SR1/robot_description"):
        profile = qos[topic][0] if isinstance(qos[topic], list) else yaml.safe_load(qos[topic])[0]
        assert profile["durability"] in (1, "transient_local")


def test_the_resting_imu_reads_plus_g_and_marks_what_it_does_not_measure(recorded):
    _, topics = recorded
    acc = np.array([[m.linear_acceleration.x, m.linear_acceleration.y, m.linear_acceleration.z]
                    for _, _, m in topics["/SR1/WaistAccelSensor"][200:]])
    # standing on the floor (the waist sensor's z is up); 2 % covers the stance's small sway
    assert np.linalg.norm(acc.mean(axis=0)) == pytest.approx(G, rel=0.02)
    assert acc.mean(axis=0)[2] == pytest.approx(G, rel=0.02)
    m = topics["/SR1/WaistAccelSensor"][0][2]
    assert m.orientation_covariance[0] == -1 and m.angular_velocity_covariance[0] == -1
    assert m.linear_acceleration_covariance[0] != -1


def test_the_laser_scan_and_camera_info_follow_the_sensor(recorded):
    _, topics = recorded
    scan = topics["/SR1/ChestRange"][0][2]
    n = 2 * int(np.floor(4.18879 / 2 / 0.00613592)) + 1
    assert len(scan.ranges) == n and scan.angle_max == pytest.approx(-scan.angle_min)
    assert scan.angle_min + (n - 1) * scan.angle_increment == pytest.approx(scan.angle_max)
    assert scan.header.frame_id == "ChestRange_laser_frame"
    info = topics["/SR1/LeftCamera/camera_info"][0][2]
    f = 120 / np.tan(0.785398 / 2)
    assert (info.width, info.height) == (320, 240)
    np.testing.assert_allclose(info.k, [f, 0, 159.5, 0, f, 119.5, 0, 0, 1])
    assert info.header.frame_id == "LeftCamera_optical_frame"


# --------------------------------------------------------------------------------- DDS ---
@pytest.mark.skipif(helpers is None, reason="cyclonedds (python) not installed")
def test_dds_run_reaches_a_plain_cyclonedds_subscriber_in_another_process(helpers, domain):
    from test_dds import LOOPBACK_URI
    env = {k: v for k, v in subprocess_env().items() if not k.startswith(("ROS_", "CYCLONEDDS"))}
    env.update(ROS_DOMAIN_ID=str(domain), CYCLONEDDS_URI=LOOPBACK_URI)
    sub = helpers("--domain", domain, "--timeout", 60, "--count", 3, "/SR1/joint_states:joint_state",
                  "/SR1/WaistAccelSensor:imu", "/SR1/LeftCamera/image_raw:image")
    sub.expect("READY", 30)
    run = subprocess.Popen([sys.executable, "-m", "mbsim_ros.cli", "run", "--transport", "dds", "--duration", "20",
                            "--quiet"], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        got = sub.expect("DONE", 60)
        by_topic = defaultdict(list)
        for g in got:
            by_topic[g["topic"]].append(g)
        js = by_topic["/SR1/joint_states"][0]
        assert "WAIST_P" in js["name"] and len(js["position"]) == len(js["name"])
        imu = by_topic["/SR1/WaistAccelSensor"][0]
        # the first samples are taken while the robot drops the last millimetres onto the floor
        assert imu["frame_id"] == "WaistAccelSensor" and np.all(np.isfinite(imu["accel"]))
        assert imu["orientation_covariance"][0] == -1
        img = by_topic["/SR1/LeftCamera/image_raw"][0]
        assert (img["width"], img["height"], img["encoding"]) == (320, 240, "rgb8")
        late = helpers("--domain", domain, "--timeout", 30, "/SR1/robot_description:string:latched")
        (desc,) = [g for g in late.expect("DONE", 30) if isinstance(g, dict)]
        assert desc["data"].startswith("<robot name=\"SR1\"")
    finally:
        run.kill()
        run.communicate(timeout=30)


# ------------------------------------------------------------------ node, config, input ---
def test_node_parameters_left_at_their_defaults_do_not_override_the_config_file(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("dt: 0.002\nreal_time_factor: 0.5\n")
    values = {"model": "", "config": str(cfg), "dt": 0.001, "real_time_factor": 2.0, "catch_up": "compensatory",
              "seed": 0, "frame_prefix": "", "joint_state_rate": 100.0, "tf_rate": 100.0, "hold": 2000.0}
    c = config_from_parameters(values, "/robot1")
    assert c.dt == 0.002 and c.real_time_factor == 2.0 and c.namespace == "robot1"
    assert config_from_parameters(dict(values, config=""), "/").namespace == ""


def test_joint_commands_track_a_position_with_the_pd_gains():
    import mbsim_ros as mb
    from mbsim_ros.model import Joint, Link, Model
    from mbsim_ros.ros.bridge import Bridge
    from mbsim_ros.ros.transport import NullTransport
    m = Model("arm", gravity=(0, 0, 0))
    m.add_link(Link("l", 1.0, [0.2, 0, 0], np.diag([0.01, 0.01, 0.01])))
    m.add_joint(Joint("j", "revolute", None, "l"))
    m.finalize()
    sim = mb.Simulation(m)
    from capture_transport import ros_session
    config = load_config(None, {"pd_gains": {"j": [20.0, 4.0]}, "real_time_factor": 0})
    session, bridge = ros_session(sim, NullTransport(), config)
    bridge.inputs._on_joint_commands(msg.joint_state(0.0, ["j"], position=[0.5]))
    session.runner.step_once(3000)                           # not running: steps here, control included
    assert sim.q[0] == pytest.approx(0.5, abs=1e-3)          # critically damped-ish PD settles
    bridge.inputs._on_joint_efforts(msg.float64_array([0.3]))
    q0, v0 = sim.q[0], sim.v[0]
    session.runner.step_once(1)                              # the effort adds to the PD of the state stepped from
    assert sim.tau[0] == pytest.approx(0.3 + 20.0 * (0.5 - q0) - 4.0 * v0)
    bridge.inputs._on_joint_commands(msg.joint_state(0.0, ["nope"], effort=[1.0]))
    assert bridge.errors == ["joint_commands: unknown joint(s) nope"]


@pytest.mark.parametrize("args, config_text, message", [
    (["/no/such/robot.wrl"], None, "no/such/robot.wrl"),
    ([], "sensors:\n  NoSuchSensor: {rate: 10}\n", "unknown sensor(s) NoSuchSensor"),
    ([], "dt: [0.001\n", "not valid YAML"),
    ([], "dtt: 0.001\n", "unknown setting 'dtt'"),
    (["--realtime-priority", "100"], None, "realtime_priority must be a whole number 0..99"),
    ([], "cpu: 1.5\n", "cpu must be a whole number >= 0"),
])
def test_bad_input_ends_with_one_clear_line_and_status_2(tmp_path, capsys, args, config_text, message):
    extra = []
    if config_text is not None:
        cfg = tmp_path / "c.yaml"
        cfg.write_text(config_text)
        extra = ["--config", str(cfg)]
    assert main(["run", *args, *extra, "--transport", "none", "--duration", "0.01", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("mbsim: ") and message in err[0]


def test_config_sim_yaml_documents_every_setting_at_its_default():
    text = (REPO / "config" / "sim.yaml").read_text()
    assert load_config(REPO / "config" / "sim.yaml").as_dict() == DEFAULTS
    for key in DEFAULTS:
        assert f"\n{key}:" in "\n" + text


class Capture(NullTransport):
    """A transport that keeps what is published: {topic: [decoded message]}."""

    def __init__(self):
        super().__init__()
        self.got = defaultdict(list)

    def publish(self, handle, data, stamp_ns=0):
        self.got[handle.topic].append(msg.decode(data, handle.typename))


def test_merge_imu_and_frame_prefix():
    import mbsim_ros as mb
    from mbsim_ros.model import Joint, Link, Model, Sensor
    from mbsim_ros.ros.bridge import Bridge
    m = Model("bot")
    m.add_link(Link("base", 1.0, [0, 0, -0.3], np.eye(3) * 0.01))
    m.add_joint(Joint("hinge", "revolute", None, "base", axis=(1, 0, 0), v0=[0.5]))
    m.sensors += [Sensor("acc", "accelerometer", "base"), Sensor("gyro", "gyro", "base")]
    m.finalize()
    sim = mb.Simulation(m)
    cap = Capture()
    bridge = Bridge(sim, cap, load_config(None, {"merge_imu": True, "frame_prefix": "r1/"}))
    bridge.start()
    for _ in range(5):
        sim.step()
        bridge.on_step(sim)
    assert "/bot/acc" not in cap.got and "/bot/gyro" not in cap.got
    imus = cap.got["/bot/base_imu"]
    assert len(imus) == 5
    last = imus[-1]
    r = sim.readings()
    np.testing.assert_allclose([last.angular_velocity.x, last.angular_velocity.y, last.angular_velocity.z],
                               r["gyro"].values)
    np.testing.assert_allclose([last.linear_acceleration.x, last.linear_acceleration.y,
                                last.linear_acceleration.z], r["acc"].values)
    assert last.header.frame_id == "r1/acc" and last.orientation_covariance[0] == -1
    assert last.angular_velocity_covariance[0] != -1
    frames = {t.child_frame_id for t in cap.got["/tf_static"][0].transforms}
    assert {"r1/acc", "r1/gyro"} <= frames
    moving = cap.got["/tf"][-1].transforms
    assert [(t.header.frame_id, t.child_frame_id) for t in moving] == [("world", "r1/base")]
    (js,) = cap.got["/bot/joint_states"][:1]
    assert list(js.name) == ["hinge"]
