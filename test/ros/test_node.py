"""sim_node under a real rclpy (runs only where ROS 2 is installed and sourced): it publishes
joint_states and a latched robot_description, and answers its services."""
import subprocess
import sys
import time
from pathlib import Path

import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy not installed (comes with ROS 2)")
pytest.importorskip("rosidl_runtime_py", reason="rclpy without rosidl_runtime_py is not a ROS 2 installation "
                    "(the node's rclpy transport needs it for the message classes)")

REPO = Path(__file__).resolve().parents[2]


def test_sim_node_publishes_and_pauses():
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState
    from std_msgs.msg import String
    from std_srvs.srv import SetBool
    node_proc = subprocess.Popen([sys.executable, "-m", "mbsim_ros.ros.node", "--ros-args", "-r", "__ns:=/sr1test",
                                  "-p", "real_time_factor:=1.0"], cwd=REPO)
    rclpy.init()
    node = rclpy.create_node("mbsim_node_test")
    states, descriptions = [], []
    node.create_subscription(JointState, "/sr1test/joint_states", states.append, 10)
    latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    node.create_subscription(String, "/sr1test/robot_description", descriptions.append, latched)
    pause = node.create_client(SetBool, "/sr1test/pause")
    try:
        deadline = time.monotonic() + 120
        while (len(states) < 20 or not descriptions) and time.monotonic() < deadline:
            rclpy.spin_once(node, timeout_sec=0.1)
        assert len(states) >= 20 and "WAIST_P" in states[-1].name
        assert descriptions[0].data.startswith('<robot name="SR1"')
        assert pause.wait_for_service(timeout_sec=10)
        future = pause.call_async(SetBool.Request(data=True))
        rclpy.spin_until_future_complete(node, future, timeout_sec=10)
        assert future.result().success
        for _ in range(10):                     # drain what was in flight
            rclpy.spin_once(node, timeout_sec=0.05)
        n = len(states)
        t_end = time.monotonic() + 1.0
        while time.monotonic() < t_end:
            rclpy.spin_once(node, timeout_sec=0.05)
        assert len(states) == n                 # paused: no new joint states
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
        node_proc.terminate()
        node_proc.wait(timeout=30)
