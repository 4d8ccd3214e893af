"""The transport interface: topic names, counting, the "none" and fan-out transports, the factory."""
import pytest

from mbsim_ros.ros import messages as m
from mbsim_ros.ros import qos
from mbsim_ros.ros.transport import FanoutTransport, NullTransport, check_topic
from mbsim_ros.ros.transport_choice import rclpy_missing, transport_for


@pytest.mark.parametrize("name", ["/imu", "/sr1/imu", "/a_b/c9/_d", "/robot_description"])
def test_good_topic_names(name):
    assert check_topic(name) == name


@pytest.mark.parametrize("name", ["imu", "/", "//imu", "/imu/", "/9imu", "/a/1b", "/a-b", "/a b", "", None])
def test_bad_topic_names(name):
    with pytest.raises(ValueError):
        check_topic(name)


def test_null_transport_counts_and_discards():
    with NullTransport() as t:
        imu = t.advertise("/sr1/imu", m.IMU, qos.SENSOR)
        js = t.advertise("/joint_states", m.JOINT_STATE)
        data = m.imu(0.0, "imu", (0, 0, 9.8), (0, 0, 0))
        for _ in range(3):
            t.publish(imu, data, 0)
        t.publish(js, m.joint_state(0.0, ["a"], [1.0]), 0)
        t.subscribe("/cmd", m.JOINT_STATE, lambda d: pytest.fail("none transport delivered"))
        assert t.subscriber_count(imu) == 1
        assert t.wait_for_subscribers(imu, 1, timeout=0.1)
        stats = t.stats()
    assert stats["/sr1/imu"] == {"type": m.IMU, "direction": "out", "messages": 3,
                                 "bytes": 3 * len(data), "dropped": 0}
    assert stats["/joint_states"]["messages"] == 1
    assert stats["/cmd"] == {"type": m.JOINT_STATE, "direction": "in", "messages": 0, "bytes": 0}
    with pytest.raises(RuntimeError):
        t.advertise("/x", m.STRING)


def test_advertise_conflicts():
    t = NullTransport()
    p = t.advertise("/a", m.STRING, qos.LATCHED)
    assert t.advertise("/a", m.STRING, qos.LATCHED) is p
    with pytest.raises(ValueError):
        t.advertise("/a", m.IMU, qos.LATCHED)
    with pytest.raises(ValueError):
        t.advertise("/a", m.STRING, qos.DEFAULT)
    t.subscribe("/b", m.STRING, print)
    with pytest.raises(ValueError):
        t.subscribe("/b", m.STRING, print)


def test_fanout_to_a_bag_and_none(tmp_path):
    pytest.importorskip("rosbags")
    from mbsim_ros.ros.bag import BagTransport
    bag, none = BagTransport(tmp_path / "bag"), NullTransport()
    with FanoutTransport([bag, none]) as t:
        h = t.advertise("/clock", m.CLOCK, qos.CLOCK)
        for k in range(5):
            t.publish(h, m.clock(k * 0.1), m.to_nanoseconds(k * 0.1))
        t.subscribe("/cmd", m.JOINT_STATE, print)   # neither transport takes inputs
        assert t.subscriber_count(h) == 2
        assert t.stats()["/clock"]["messages"] == 5
    assert bag.closed and none.closed
    assert bag.stats()["/clock"]["messages"] == none.stats()["/clock"]["messages"] == 5
    assert "/cmd" not in none.stats()


def test_fanout_gives_parts_where_taken_and_joins_them_once_elsewhere(tmp_path):
    """A fan-out takes an image as parts: each bag gets the parts as they are, a transport that
    wants whole messages gets them joined (one bytes object, the same for every such transport);
    every count is of the message's bytes, not of the parts."""
    import numpy as np
    from rosbags.highlevel import AnyReader

    from capture_transport import RawCapture
    from mbsim_ros.ros.bag import BagTransport
    bags = [BagTransport(tmp_path / "b"), BagTransport(tmp_path / "c")]
    raws = [RawCapture(), RawCapture()]          # (asserts it gets bytes)
    image = m.image(0.5, "cam", np.arange(120 * 160 * 3, dtype=np.uint8).reshape(120, 160, 3))
    with FanoutTransport([bags[0], raws[0], bags[1], raws[1]]) as t:
        assert t.takes_parts
        h = t.advertise("/cam/image_raw", m.IMAGE, qos.SENSOR)
        t.publish(h, (image[:40], np.frombuffer(image, np.uint8)[40:]), m.to_nanoseconds(0.5))
        assert t.stats()["/cam/image_raw"]["bytes"] == len(image)
    assert [r.sent for r in raws] == [[("/cam/image_raw", image, m.to_nanoseconds(0.5))]] * 2
    assert raws[0].sent[0][1] is raws[1].sent[0][1]
    for path, bag in zip(("b", "c"), bags):
        assert bag.stats()["/cam/image_raw"]["bytes"] == len(image)
        with AnyReader([tmp_path / path]) as reader:
            assert [raw for _, _, raw in reader.messages()] == [image]


def test_fanout_leaves_out_a_live_transport_without_readers_until_the_next_look():
    """subscriber_count() notes which live transports have no reader of a volatile topic, and
    publish() leaves them out until the next look; a transport that is not live ("none", a
    bag) and a topic with transient local durability always get every message."""
    from capture_transport import LiveCapture
    live, none = LiveCapture(), NullTransport()
    with FanoutTransport([live, none]) as t:
        imu = t.advertise("/imu", m.IMU, qos.SENSOR)
        static = t.advertise("/tf_static", m.TF_MESSAGE, qos.LATCHED)

        def send():
            t.publish(imu, b"imu")
            t.publish(static, b"static")
        send()                                   # before any look: to everyone
        assert t.subscriber_count(imu) == 1 and t.subscriber_count(static) == 1    # "none" counts as one
        send()                                   # no live reader of /imu now
        live.readers.add("/imu")
        send()                                   # a reader came, but nobody looked yet
        assert t.subscriber_count(imu) == 2
        send()
        assert live.stats()["/imu"]["messages"] == 2 and none.stats()["/imu"]["messages"] == 4
        assert live.stats()["/tf_static"]["messages"] == none.stats()["/tf_static"]["messages"] == 4
        assert t.stats()["/imu"]["messages"] == 4


def test_worker_threads_name_the_threads_a_transport_runs(tmp_path):
    """worker_threads: the ids of live threads of this process that the transport started (the
    bag's chunk writer; the DDS receive thread once something is subscribed), gathered by a
    fan-out, none for the "none" transport."""
    import threading
    pytest.importorskip("cyclonedds")
    from mbsim_ros.ros.bag import BagTransport
    bag, none = BagTransport(tmp_path / "bag"), NullTransport()
    dds = transport_for("dds", domain_id=203, env={"ROS_AUTOMATIC_DISCOVERY_RANGE": "OFF"})
    with FanoutTransport([bag, none, dds]) as t:
        assert none.worker_threads() == [] and dds.worker_threads() == []
        t.subscribe("/cmd", m.JOINT_STATE, print)
        live = {th.native_id: th.name for th in threading.enumerate()}
        assert [live[tid] for tid in t.worker_threads()] == ["mbsim-bag-writer", "mbsim-dds-receive"]


def test_subscription_callback_errors_are_contained(caplog):
    from mbsim_ros.ros.transport import Subscription
    calls = []

    def bad(data):
        calls.append(data)
        raise RuntimeError("boom")

    sub = Subscription("/cmd", m.JOINT_STATE, qos.DEFAULT, bad)
    sub.deliver(b"1234")
    sub.deliver(b"5678")
    assert calls == [b"1234", b"5678"] and sub.messages == 2 and sub.bytes == 8
    assert "callback for /cmd raised" in caplog.text


def test_transport_for():
    assert transport_for("none").kind == "none"
    with pytest.raises(ValueError, match="auto, rclpy, dds, foxglove, none"):
        transport_for("zmq")
    pytest.importorskip("cyclonedds")
    t = transport_for("dds", domain_id=201, env={"ROS_AUTOMATIC_DISCOVERY_RANGE": "OFF"})
    try:
        assert t.kind == "dds" and t.domain_id == 201 and t.discovery_range == "OFF"
    finally:
        t.close()
    if rclpy_missing() is not None:
        t = transport_for("auto", domain_id=202, env={"ROS_AUTOMATIC_DISCOVERY_RANGE": "OFF"})
        try:
            assert t.kind == "dds"
        finally:
            t.close()
