"""The sim_node's models from a robot_description topic (as ros_gz_sim create -topic) or
parameter, through real rclpy: robot_state_publisher's latched URDF is read and loads as the
file would."""
import os
import time
from pathlib import Path

import pytest

from mbsim_ros.formats import expand_xacro, load_description
from mbsim_ros.model import ConfigError
from mbsim_ros.run.config import load_config
from mbsim_ros.run.world import load_world

rclpy = pytest.importorskip("rclpy", reason="rclpy not installed (comes with ROS 2)")
from rclpy.parameter import Parameter  # noqa: E402

from mbsim_ros.ros.node import description_reader  # noqa: E402

ARM = Path(__file__).resolve().parents[1] / "models" / "urdf" / "arm.urdf.xacro"


@pytest.fixture
def context():
    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=100 + os.getpid() % 100)      # no crosstalk with other test runs
    yield ctx
    rclpy.try_shutdown(context=ctx)


def test_a_latched_robot_description_topic_and_a_parameter_become_the_world(context):
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from std_msgs.msg import String
    urdf = expand_xacro(ARM, {"prefix": "t_"})
    publisher_node = rclpy.create_node("robot_state_publisher_stand_in", context=context)
    sim_node = rclpy.create_node("mbsim", context=context,
                                 parameter_overrides=[Parameter("robot_description", value=expand_xacro(ARM))])
    try:
        qos = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE)
        pub = publisher_node.create_publisher(String, "/robot_description", qos)
        pub.publish(String(data=urdf))            # before the reader subscribes: latched
        time.sleep(0.2)
        from rclpy.executors import SingleThreadedExecutor
        spinner = SingleThreadedExecutor(context=context)
        spinner.add_node(publisher_node)
        import threading
        thread = threading.Thread(target=spinner.spin, daemon=True)
        thread.start()
        read = description_reader(sim_node, timeout=20.0)
        config = load_config(None, {"model": "topic:/robot_description, param:robot_description", "hold": 0})
        world, _ = load_world(config, read)
        assert [l.name for l in world[0].links] == [l.name for l in load_description(urdf).links]
        assert world[0].links[0].name == "t_base" and world[1].links[0].name == "base"
        with pytest.raises(ConfigError, match="no robot description on /nothing_here within 0.5 s"):
            description_reader(sim_node, timeout=0.5)("topic:/nothing_here")
        with pytest.raises(ConfigError, match="parameter 'other_description' is not set"):
            read("param:other_description")
        spinner.shutdown()
        thread.join(5)
    finally:
        publisher_node.destroy_node()
        sim_node.destroy_node()
