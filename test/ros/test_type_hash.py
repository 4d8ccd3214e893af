"""The RIHS01 type hashes (REP 2011) our DDS endpoints carry in USER_DATA (`typehash=RIHS01_...;`)
are the ones a real ROS 2 Jazzy advertises for the same types: a real rclpy node (Fast DDS) reads
each of our writers' and readers' hash from discovery and compares it with the hash its own
endpoints of that type carry. Jazzy's rmw logs "Failed to parse type hash" for endpoints
without one."""
import time

import pytest
from conftest import ROS_MISSING

from mbsim_ros.ros import messages as m
from mbsim_ros.ros import qos

if ROS_MISSING:
    pytest.skip(ROS_MISSING, allow_module_level=True)
pytest.importorskip("cyclonedds", reason="cyclonedds (python) not installed")
import rclpy  # noqa: E402

from mbsim_ros.ros.dds import DdsTransport  # noqa: E402
from mbsim_ros.ros.transport_choice import message_class  # noqa: E402


def _hash_string(type_hash) -> str:
    """rclpy's TypeHash -> 'RIHS01_<hex>' (its version and 32-byte value)."""
    return f"RIHS{type_hash.version:02d}_{bytes(type_hash.value).hex()}"


def _wait(what, get, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = get()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_our_dds_endpoints_carry_the_type_hashes_real_jazzy_endpoints_do():
    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node("mbsim_type_hash_probe", context=context)
    dds = DdsTransport()          # ROS_DOMAIN_ID and the LOCALHOST range from conftest
    try:
        for k, typename in enumerate(m.TYPES):
            ours, theirs = f"/mbsim_hash/ours_{k}", f"/mbsim_hash/theirs_{k}"
            dds.advertise(ours, typename, qos.DEFAULT)
            node.create_publisher(message_class(typename), theirs, 10)
            real = _hash_string(_wait(f"rclpy's own {typename} publisher",
                                      lambda: node.get_publishers_info_by_topic(theirs))[0].topic_type_hash)
            got = _wait(f"our {typename} writer seen by rclpy", lambda: node.get_publishers_info_by_topic(ours))
            assert got[0].topic_type == typename
            assert _hash_string(got[0].topic_type_hash) == real, typename
            assert real == m.TYPESTORE.hash_rihs01(typename)
        # readers (the node's inputs) carry it too
        dds.subscribe("/mbsim_hash/joint_commands", m.JOINT_STATE, lambda data: None)
        node.create_subscription(message_class(m.JOINT_STATE), "/mbsim_hash/theirs_commands", lambda msg: None, 10)
        real = _hash_string(_wait("rclpy's own subscription", lambda: node.get_subscriptions_info_by_topic(
            "/mbsim_hash/theirs_commands"))[0].topic_type_hash)
        got = _wait("our reader seen by rclpy", lambda: node.get_subscriptions_info_by_topic("/mbsim_hash/joint_commands"))
        assert _hash_string(got[0].topic_type_hash) == real
    finally:
        dds.close()
        node.destroy_node()
        rclpy.shutdown(context=context)
