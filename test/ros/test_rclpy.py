"""RclpyTransport against a real rclpy: ROS 2 Jazzy's own, from the PyPI wheels of the test extra
(CPython 3.11 on x86_64), with tf2_msgs built by test/ros_interfaces/build.py (conftest); or a
sourced ROS 2."""
import threading
import time

import numpy as np
import pytest
from conftest import ROS_MISSING

from mbsim_ros.ros import messages as m
from mbsim_ros.ros import qos
from mbsim_ros.ros.transport_choice import message_class, rclpy_missing, transport_for

if ROS_MISSING:
    pytest.skip(ROS_MISSING, allow_module_level=True)
import rclpy  # noqa: E402

from mbsim_ros.ros.rclpy_transport import RclpyTransport  # noqa: E402


def test_qos_profiles():
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, ReliabilityPolicy
    p = qos.to_rclpy_qos(qos.LATCHED)
    assert (p.depth, p.history, p.reliability, p.durability) == (
        1, HistoryPolicy.KEEP_LAST, ReliabilityPolicy.RELIABLE, DurabilityPolicy.TRANSIENT_LOCAL)
    p = qos.to_rclpy_qos(qos.CLOCK)
    assert (p.depth, p.reliability, p.durability) == (1, ReliabilityPolicy.BEST_EFFORT,
                                                      DurabilityPolicy.VOLATILE)


def test_auto_picks_rclpy_where_every_message_package_imports():
    assert rclpy_missing() is None
    t = transport_for("auto")
    try:
        assert t.kind == "rclpy"
    finally:
        t.close()


def test_message_classes_come_by_module_name():
    from geometry_msgs.msg import WrenchStamped
    from tf2_msgs.msg import TFMessage
    assert message_class(m.TF_MESSAGE) is TFMessage and message_class(m.WRENCH_STAMPED) is WrenchStamped
    with pytest.raises(ImportError, match="no_such_msgs"):
        message_class("no_such_msgs/msg/Thing")


def test_a_missing_message_package_makes_auto_use_dds_and_rclpy_fail_with_one_line(monkeypatch):
    monkeypatch.setattr(m, "TYPES", m.TYPES + ("no_such_msgs/msg/Thing",))
    why = rclpy_missing()
    assert "no_such_msgs" in why and "\n" not in why
    with pytest.raises(ImportError) as e:
        transport_for("rclpy")
    assert str(e.value) == f"--transport rclpy: {why}"
    with pytest.raises(ImportError, match="no_such_msgs"):     # made directly (the node): at once
        RclpyTransport(node_name="mbsim_missing")
    pytest.importorskip("cyclonedds")
    notes = []
    t = transport_for("auto", domain_id=203, env={"ROS_AUTOMATIC_DISCOVERY_RANGE": "OFF"}, note=notes.append)
    try:
        assert t.kind == "dds"
        assert notes == [f"transport auto: {why}; using live DDS"]
    finally:
        t.close()


def test_publish_and_raw_subscribe_on_own_node():
    got = []
    arrived = threading.Event()
    with RclpyTransport(node_name="mbsim_test") as t:
        t.subscribe("/mbsim_test/joint_commands", m.JOINT_STATE,
                    lambda data: (got.append(data), arrived.set()))
        p = t.advertise("/mbsim_test/joint_commands", m.JOINT_STATE, qos.DEFAULT)
        assert t.wait_for_subscribers(p, 1, timeout=10)
        data = m.joint_state(1.25, ["a", "b"], [0.5, -0.5])
        deadline = time.monotonic() + 10
        while not arrived.is_set() and time.monotonic() < deadline:
            t.publish(p, data)
            arrived.wait(0.05)
        assert t.stats()["/mbsim_test/joint_commands"]["messages"] >= 1
    assert got, "nothing received"
    cmd = m.decode_joint_state(got[0])
    assert cmd.names == ["a", "b"] and cmd.stamp == 1.25
    np.testing.assert_array_equal(cmd.position, [0.5, -0.5])


def test_closing_stops_the_own_executor_before_destroying_publishers():
    """close() ends the spinning thread of its own node's executor first: rclpy's executor,
    building its wait set while a publisher (with its QoS event handlers) is destroyed, raises
    InvalidHandle in that thread (seen as a traceback at the end of a run)."""
    t = RclpyTransport(node_name="mbsim_close")
    for k in range(5):
        t.advertise(f"/mbsim_close/topic{k}", m.IMU, qos.SENSOR)
    t.subscribe("/mbsim_close/cmd", m.JOINT_STATE, lambda data: None)
    spinning = []
    destroy = t.node.destroy_publisher

    def destroy_publisher(publisher):
        spinning.append(t._thread.is_alive())
        return destroy(publisher)
    t.node.destroy_publisher = destroy_publisher
    t.close()
    assert len(spinning) >= 5 and not any(spinning)      # (destroy_node destroys its own ones too)


def test_latched_on_callers_node():
    """On a node the caller owns and spins; a late transient-local subscriber gets the message."""
    from rclpy.executors import SingleThreadedExecutor
    own = not rclpy.ok()
    if own:
        rclpy.init()
    node = rclpy.create_node("mbsim_test_caller")
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    try:
        t = RclpyTransport(node)
        rd = t.advertise("/mbsim_test/robot_description", m.STRING, qos.LATCHED)
        t.publish(rd, m.string("<robot/>"))
        got = []
        t.subscribe("/mbsim_test/robot_description", m.STRING, got.append, qos.LATCHED)
        deadline = time.monotonic() + 10
        while not got and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.05)
        assert got and m.decode(got[0], m.STRING).data == "<robot/>"
        t.close()
    finally:
        executor.shutdown()
        node.destroy_node()
        if own:
            rclpy.try_shutdown()


def test_mbsim_run_where_the_wheels_lack_tf2_msgs():
    """The PyPI wheels as they come (no tf2_msgs): `--transport auto` says so in one line and
    runs on live DDS; `--transport rclpy` stops with that line and status 2."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from conftest import subprocess_env
    repo = Path(__file__).resolve().parents[2]
    env = subprocess_env()
    env["PYTHONPATH"] = os.pathsep.join([str(repo)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
                                                        if p and "ros_interfaces" not in p])
    run = [sys.executable, "-m", "mbsim_ros.cli", "run", "--duration", "0.01", "--rtf", "0", "--quiet", "--transport"]
    auto = subprocess.run(run + ["auto"], cwd=repo, env=env, capture_output=True, text=True, timeout=1200)
    assert auto.returncode == 0, auto.stderr
    notes = [line for line in auto.stderr.splitlines() if "transport auto" in line]
    assert len(notes) == 1 and "tf2_msgs" in notes[0] and notes[0].endswith("using live DDS"), auto.stderr
    by_name = subprocess.run(run + ["rclpy"], cwd=repo, env=env, capture_output=True, text=True, timeout=1200)
    assert by_name.returncode == 2
    assert by_name.stderr.strip().splitlines() == [
        "mbsim: --transport rclpy: rclpy is there but not the ROS 2 message package(s) tf2_msgs "
        "(install ros-<distro>-tf2-msgs or source a ROS 2 that has them)"]
