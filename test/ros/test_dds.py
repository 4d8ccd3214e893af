"""DdsTransport on live DDS: an independent reader in a second process (cyclonedds' own types
and deserializer, test/ros/dds_subscriber.py) gets what DdsTransport publishes, including a
transient-local /robot_description written before it started; DdsTransport.subscribe gets what
an independent writer publishes. Loopback only (cyclonedds-localhost.xml beside this file), one
random domain id per test, every wait bounded, helper processes killed at the end."""
import json
import os
import queue
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import subprocess_env

from mbsim_ros.ros import messages as m
from mbsim_ros.ros import qos

pytest.importorskip("cyclonedds", reason="cyclonedds (python) not installed")
from mbsim_ros.ros import dds  # noqa: E402
from mbsim_ros.ros.dds import DdsTransport, discovery_config  # noqa: E402

HERE = Path(__file__).resolve().parent
HELPER = HERE / "dds_subscriber.py"
LOOPBACK = HERE / "cyclonedds-localhost.xml"
LOOPBACK_URI = LOOPBACK.as_uri()
URDF = '<robot name="sr1"><link name="WAIST"/></robot>'
NAMES = [f"j{i}" for i in range(30)]

_used_domains = set()


@pytest.fixture
def domain():
    """A random domain id in 100..200 not used before in this run (no cross-talk with other
    tests or runs on the machine)."""
    rng = random.SystemRandom()
    while True:
        d = rng.randint(100, 200)
        if d not in _used_domains:
            _used_domains.add(d)
            return d


def loopback_env(domain):
    return {"ROS_DOMAIN_ID": str(domain), "CYCLONEDDS_URI": LOOPBACK_URI}


class Helper:
    """dds_subscriber.py as a child process whose stdout lines are read by a thread."""

    def __init__(self, *args, config=LOOPBACK_URI):
        env = {k: v for k, v in subprocess_env().items() if not k.startswith(("ROS_", "CYCLONEDDS"))}
        env["CYCLONEDDS_URI"] = config
        self.proc = subprocess.Popen([sys.executable, str(HELPER), *map(str, args)], cwd=HERE,
                                     env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        self.lines = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def expect(self, word, timeout):
        """Messages (JSON lines) before the line `word`; fails on timeout or early exit."""
        seen = []
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"helper: no {word} within {timeout} s; got {seen[-3:]}")
            if line is None:
                pytest.fail(f"helper exited ({self.proc.wait()}) before {word}: "
                            f"{seen[-3:]} {self.proc.stderr.read()[-2000:]}")
            if line == word:
                return seen
            seen.append(json.loads(line) if line.startswith("{") else line)

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        self.proc.stdout.close()
        self.proc.stderr.close()


@pytest.fixture
def helpers():
    made = []
    yield lambda *args, **kw: made.append(Helper(*args, **kw)) or made[-1]
    for h in made:
        h.close()


def _image(k):
    img = np.zeros((12, 16, 3), dtype=np.uint8)
    img[..., 0] = k % 256
    img[k % 12, :, 1] = 255
    img[:, k % 16, 2] = 7
    return img


def _joints(k):
    return np.sin(np.arange(30) * 0.1 + k)


def test_independent_reader_gets_what_we_publish(domain, helpers):
    with DdsTransport(env=loopback_env(domain)) as t:
        assert t.domain_id == domain
        rd = t.advertise("/robot_description", m.STRING, qos.LATCHED)
        t.publish(rd, m.string(URDF))            # before any reader exists: latched
        js = t.advertise("/joint_states", m.JOINT_STATE, qos.DEFAULT)
        imu = t.advertise("/sr1/imu", m.IMU, qos.SENSOR)
        cam = t.advertise("/sr1/camera/image_raw", m.IMAGE, qos.SENSOR)

        sub = helpers("--domain", domain, "--timeout", 15, "--count", 3,
                      "/robot_description:string:latched", "/joint_states:joint_state",
                      "/sr1/imu:imu", "/sr1/camera/image_raw:image")
        sub.expect("READY", 10)
        for h in (rd, js, imu, cam):
            assert t.wait_for_subscribers(h, 1, timeout=10), h.topic
        # publish until the reader has 3 of each (a volatile reader may miss the first ones
        # while discovery completes on its side)
        done = threading.Event()
        result = {}

        def collect():
            try:
                result["msgs"] = sub.expect("DONE", 15)
            finally:
                done.set()

        threading.Thread(target=collect, daemon=True).start()
        k = 0
        while not done.wait(0.02) and k < 500:
            k += 1
            stamp = 100.0 + k * 0.01
            t.publish(js, m.joint_state(stamp, NAMES, _joints(k), np.full(30, k), None))
            t.publish(imu, m.imu(stamp, "imu_link", (k, -1.0, 9.8), (0.5, 0.0, -k), (1e-3,) * 3))
            t.publish(cam, m.image(stamp, "camera_optical_frame", _image(k)))
        assert "msgs" in result, "the reader did not get 3 messages of every topic"
        stats = t.stats()
    msgs = result["msgs"]
    by_topic = {}
    for msg in msgs:
        by_topic.setdefault(msg["topic"], []).append(msg)

    assert [x["data"] for x in by_topic["/robot_description"]] == [URDF]
    for x in by_topic["/joint_states"]:
        sec, nsec = x["stamp"]
        k = round((sec + nsec * 1e-9 - 100.0) / 0.01)
        assert x["name"] == NAMES
        np.testing.assert_array_equal(x["position"], _joints(k))
        assert x["velocity"] == [float(k)] * 30 and x["effort"] == []
    for x in by_topic["/sr1/imu"]:
        k = x["accel"][0]
        assert x["frame_id"] == "imu_link"
        assert x["accel"] == [k, -1.0, 9.8] and x["gyro"] == [0.5, 0.0, -k]
        assert x["orientation"] == [0.0, 0.0, 0.0, 1.0]
        assert x["orientation_covariance"][0] == -1.0
        assert x["accel_covariance"][::4] == [1e-3] * 3
    for x in by_topic["/sr1/camera/image_raw"]:
        sec, nsec = x["stamp"]
        k = round((sec + nsec * 1e-9 - 100.0) / 0.01)
        assert (x["height"], x["width"], x["encoding"], x["step"], x["is_bigendian"]) == (12, 16, "rgb8", 48, 0)
        assert bytes.fromhex(x["data_hex"]) == _image(k).tobytes()
    assert stats["/robot_description"]["messages"] == 1
    assert stats["/joint_states"]["messages"] == k and stats["/joint_states"]["bytes"] > 30 * 8 * 2


def test_late_reader_gets_latched_robot_description(domain, helpers):
    """A reader that starts after the only write still gets it (transient local), also after an
    earlier reader came and went."""
    with DdsTransport(env=loopback_env(domain)) as t:
        rd = t.advertise("/robot_description", m.STRING, qos.LATCHED)
        t.publish(rd, m.string("old"))
        t.publish(rd, m.string(URDF))            # depth 1: only the last one is kept
        for _ in range(2):
            sub = helpers("--domain", domain, "--timeout", 10, "/robot_description:string:latched")
            sub.expect("READY", 10)
            msgs = sub.expect("DONE", 10)
            assert [x["data"] for x in msgs] == [URDF]
            sub.close()


def test_subscribe_gets_what_an_independent_writer_publishes(domain, helpers):
    got = []
    arrived = threading.Event()

    def on_command(data):
        got.append(m.decode_joint_state(data))
        if len(got) >= 3:
            arrived.set()

    with DdsTransport(env=loopback_env(domain)) as t:
        sub = t.subscribe("/sr1/joint_commands", m.JOINT_STATE, on_command)
        pub = helpers("--domain", domain, "--timeout", 15, "--publish", "/sr1/joint_commands")
        pub.expect("READY", 10)
        assert arrived.wait(10), "no commands received"
        assert sub.messages >= 3
        assert t.stats()["/sr1/joint_commands"]["direction"] == "in"
    for cmd in got:
        k = cmd.position[0]
        assert cmd.names == ["a", "b", "c"]
        assert cmd.stamp == pytest.approx(k + 500e-9)
        np.testing.assert_array_equal(cmd.position, [k, 2 * k, 3 * k])
        assert cmd.velocity.size == 0 and cmd.effort.size == 0


@pytest.mark.parametrize("raw_pub, raw_sub", [(True, True), (False, True), (True, False)])
def test_subscribe_between_two_transports(domain, raw_pub, raw_sub):
    """Same process, one transport publishing, another subscribing; the raw (internal API) and
    generated-class (fallback) paths give the same bytes."""
    if (raw_pub or raw_sub) and not dds.RAW:
        pytest.skip("this cyclonedds has no ddspy_write/ddspy_take")
    env = loopback_env(domain)
    got = []
    arrived = threading.Event()
    with DdsTransport(env=env, raw=raw_sub) as b, DdsTransport(env=env, raw=raw_pub) as a:
        b.subscribe("/joint_efforts", m.FLOAT64_MULTI_ARRAY,
                    lambda data: (got.append(data), arrived.set()))
        p = a.advertise("/joint_efforts", m.FLOAT64_MULTI_ARRAY)
        assert a.wait_for_subscribers(p, 1, timeout=10)
        assert a.subscriber_count(p) == 1
        data = m.float64_array([1.0, -2.5, 3.25])
        deadline = time.monotonic() + 10
        while not arrived.is_set() and time.monotonic() < deadline:
            a.publish(p, data)
            arrived.wait(0.05)
        assert got
    np.testing.assert_array_equal(m.decode_float64_array(got[0]), [1.0, -2.5, 3.25])
    assert got[0][:len(data)] == data and not got[0][len(data):].strip(b"\0")


def test_localhost_discovery_range(domain, helpers):
    """ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST: our generated configuration (rmw_cyclonedds'
    shape) discovers a reader in another process configured the same way."""
    env = {"ROS_DOMAIN_ID": str(domain), "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}
    _, config, rng = discovery_config(env)
    assert rng == "LOCALHOST"
    with DdsTransport(env=env) as t:
        js = t.advertise("/joint_states", m.JOINT_STATE)
        sub = helpers("--domain", domain, "--timeout", 10, "/joint_states:joint_state", config=config)
        sub.expect("READY", 10)
        assert t.wait_for_subscribers(js, 1, timeout=10)
        deadline = time.monotonic() + 10
        while sub.proc.poll() is None and time.monotonic() < deadline:
            t.publish(js, m.joint_state(1.0, ["a"], [0.5]))
            time.sleep(0.02)
        msgs = sub.expect("DONE", 5)
    assert msgs[0]["position"] == [0.5]


# ---------------------------------------------------------------------------------------------
# the ROS environment -> cyclonedds configuration

def test_discovery_config_domain_id():
    assert discovery_config({})[:1] == (0,)
    assert discovery_config({"ROS_DOMAIN_ID": " 42 "})[0] == 42
    assert discovery_config({"ROS_DOMAIN_ID": ""})[0] == 0
    assert discovery_config({"ROS_DOMAIN_ID": "42"}, domain_id=7)[0] == 7
    for bad in ("x", "233", "-1"):
        with pytest.raises(ValueError):
            discovery_config({"ROS_DOMAIN_ID": bad})


def test_discovery_config_ranges():
    # SUBNET (the default): cyclonedds' defaults (multicast), nothing to add
    assert discovery_config({}) == (0, "", "SUBNET")
    assert discovery_config({"ROS_AUTOMATIC_DISCOVERY_RANGE": "SYSTEM_DEFAULT",
                             "ROS_STATIC_PEERS": "10.0.0.9"})[1:] == ("", "SYSTEM_DEFAULT")
    # SUBNET with static peers: peers added, multicast kept
    _, cfg, _ = discovery_config({"ROS_STATIC_PEERS": "10.0.0.9;robot.local"})
    assert '<Peer address="10.0.0.9"/><Peer address="robot.local"/>' in cfg
    assert "AllowMulticast" not in cfg
    # LOCALHOST: no multicast, localhost as unicast peer (plus static peers)
    for env in ({"ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}, {"ROS_LOCALHOST_ONLY": "1"},
                {"ROS_AUTOMATIC_DISCOVERY_RANGE": "bogus"}):
        _, cfg, rng = discovery_config(env)
        assert rng == "LOCALHOST"
        assert "<AllowMulticast>false</AllowMulticast>" in cfg
        assert '<Peers><Peer address="localhost"/></Peers>' in cfg
        assert "<ParticipantIndex>auto</ParticipantIndex>" in cfg
    # OFF: no multicast, no peers, a per-process tag: nothing outside this process matches
    _, cfg, rng = discovery_config({"ROS_AUTOMATIC_DISCOVERY_RANGE": "OFF", "ROS_STATIC_PEERS": "1.2.3.4"})
    assert rng == "OFF" and "<Peers>" not in cfg and f"ros_discovery_off_{os.getpid()}" in cfg
    # the user's CYCLONEDDS_URI comes last, so it refines these settings
    _, cfg, _ = discovery_config({"ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST", "CYCLONEDDS_URI": LOOPBACK_URI})
    assert cfg.startswith("<CycloneDDS>") or cfg.startswith("<CycloneDDS ")
    assert cfg.endswith("," + LOOPBACK_URI)
    assert discovery_config({"CYCLONEDDS_URI": LOOPBACK_URI})[1] == LOOPBACK_URI


def test_dds_names_and_types():
    assert dds.dds_type_name(m.IMU) == "sensor_msgs::msg::dds_::Imu_"
    cls = dds.idl_class(m.JOINT_STATE)
    assert cls.__idl_typename__ == "sensor_msgs::msg::dds_::JointState_"
    # cyclonedds' serializer of the generated class gives the typestore's bytes
    data = m.joint_state(1.5, ["a", "b"], [1.0, 2.0], [3.0, 4.0], [])
    sample = cls.deserialize(data)
    assert sample.serialize(use_version_2=False) == data
    data = m.imu(2.0, "imu", (1, 2, 3), (4, 5, 6))
    assert dds.idl_class(m.IMU).deserialize(data).serialize(use_version_2=False) == data


def test_transport_checks(domain):
    with DdsTransport(env=loopback_env(domain)) as t:
        with pytest.raises(ValueError):
            t.advertise("imu", m.IMU)                      # not absolute
        with pytest.raises(ValueError):
            t.advertise("/9imu", m.IMU)
        p = t.advertise("/imu", m.IMU, qos.SENSOR)
        assert t.advertise("/imu", m.IMU, qos.SENSOR) is p
        with pytest.raises(ValueError):
            t.advertise("/imu", m.IMU, qos.TF)              # same topic, other QoS
        assert t.subscriber_count(p) == 0
    assert t.closed
    t.close()                                               # idempotent


def test_write_timeout_is_counted_not_raised(domain, monkeypatch, caplog):
    if not dds.RAW:
        pytest.skip("this cyclonedds has no ddspy_write")
    with DdsTransport(env=loopback_env(domain)) as t:
        p = t.advertise("/img", m.IMAGE)
        monkeypatch.setattr(dds, "_raw_write", lambda ref, data: dds.DDSException.DDS_RETCODE_TIMEOUT)
        t.publish(p, m.string("x"))
        t.publish(p, m.string("x"))
        assert (p.messages, p.dropped) == (0, 2)
        assert t.stats()["/img"]["dropped"] == 2
        assert caplog.text.count("timed out") == 1
        monkeypatch.setattr(dds, "_raw_write", lambda ref, data: dds.DDSException.DDS_RETCODE_ERROR)
        with pytest.raises(dds.DDSException):
            t.publish(p, m.string("x"))
