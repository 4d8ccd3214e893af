"""Publishing through rcl without the interpreter's lock (ros/rcl_publish.py), read by a real
rclpy subscriber: a child process publishes with SerializedPublish, this process subscribes."""
import subprocess
import sys
import time

import pytest
from conftest import ROS_MISSING

if ROS_MISSING:
    pytest.skip(ROS_MISSING, allow_module_level=True)
import rclpy  # noqa: E402
from rclpy_probe import Output, child_env, stop_node  # noqa: E402

TOPIC = "/mbsim_test/rcl_publish"

# The child publishes one message in each form SerializedPublish takes (bytes as they are, the
# others copied into bytes) until it is stopped: the subscriber may match after the first ones.
PUBLISHER = f"""
import time, rclpy
from std_msgs.msg import String
from rclpy.serialization import serialize_message
from mbsim_ros.ros.rcl_publish import SerializedPublish
rclpy.init()
node = rclpy.create_node("mbsim_test_rcl_publisher")
pub = node.create_publisher(String, {TOPIC!r}, 10)
publish = SerializedPublish()
print("READY", flush=True)
while True:
    for form in (bytes, bytearray, memoryview):
        publish(pub, form(serialize_message(String(data=form.__name__ + " " + "x" * 1000))))
    time.sleep(0.05)
"""


def test_bytes_bytearray_and_memoryview_arrive_as_published():
    from rclpy.executors import SingleThreadedExecutor
    from std_msgs.msg import String
    proc = subprocess.Popen([sys.executable, "-c", PUBLISHER], env=child_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    out = Output(proc)
    own = not rclpy.ok()
    if own:
        rclpy.init()
    node = rclpy.create_node("mbsim_test_rcl_subscriber")
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    got = set()
    node.create_subscription(String, TOPIC, lambda msg: got.add(msg.data), 10)
    try:
        deadline = time.monotonic() + 60
        while len(got) < 3 and time.monotonic() < deadline and proc.poll() is None:
            executor.spin_once(timeout_sec=0.05)
        assert got == {f"{form} {'x' * 1000}" for form in ("bytes", "bytearray", "memoryview")}, \
            (got, proc.poll(), out.text[-2000:])
    finally:
        executor.shutdown()
        node.destroy_node()
        if own:
            rclpy.try_shutdown()
        stop_node(proc, out, timeout=10)


def test_a_destroyed_publisher_is_refused_not_written():
    """A publisher rclpy has destroyed: the call fails in rclpy's handle (no write through a
    freed rcl publisher)."""
    from std_msgs.msg import String
    from rclpy.serialization import serialize_message

    from mbsim_ros.ros.rcl_publish import SerializedPublish
    own = not rclpy.ok()
    if own:
        rclpy.init()
    node = rclpy.create_node("mbsim_test_rcl_destroyed")
    try:
        pub = node.create_publisher(String, TOPIC + "_destroyed", 10)
        publish = SerializedPublish()
        publish(pub, serialize_message(String(data="alive")))
        node.destroy_publisher(pub)
        from rclpy._rclpy_pybind11 import InvalidHandle
        with pytest.raises(InvalidHandle, match="destruction was requested"):
            publish(pub, serialize_message(String(data="gone")))
    finally:
        node.destroy_node()
        if own:
            rclpy.try_shutdown()
