"""RclpyTransport against a real rclpy (runs only where ROS 2 is installed and sourced)."""
import threading
import time

import numpy as np
import pytest

from mbsim_ros.ros import messages as m
from mbsim_ros.ros import qos
from mbsim_ros.ros.transport import rclpy_available, transport_for

rclpy = pytest.importorskip("rclpy", reason="rclpy not installed (comes with ROS 2)")
pytest.importorskip("rosidl_runtime_py", reason="rclpy without rosidl_runtime_py is not a ROS 2 installation "
                    "(the rclpy transport needs it for the message classes; auto takes DDS there)")
from mbsim_ros.ros.rclpy_transport import RclpyTransport  # noqa: E402


def test_qos_profiles():
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, ReliabilityPolicy
    p = qos.to_rclpy_qos(qos.LATCHED)
    assert (p.depth, p.history, p.reliability, p.durability) == (
        1, HistoryPolicy.KEEP_LAST, ReliabilityPolicy.RELIABLE, DurabilityPolicy.TRANSIENT_LOCAL)
    p = qos.to_rclpy_qos(qos.CLOCK)
    assert (p.depth, p.reliability, p.durability) == (1, ReliabilityPolicy.BEST_EFFORT,
                                                      DurabilityPolicy.VOLATILE)


def test_auto_picks_rclpy():
    assert rclpy_available()
    t = transport_for("auto")
    try:
        assert t.kind == "rclpy"
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
