"""Lazy publishing on live DDS: a sensor without a subscriber is neither sampled (rendered) nor
serialized; it starts when a subscriber comes and stops when it goes, whoever subscribes: our own
DdsTransport, or a real rclpy node (Jazzy's, Fast DDS) in another process as a user's node,
to DdsTransport (cyclonedds; the simulating process uses no rclpy) and to RclpyTransport
(get_subscription_count). A bag counts as a subscriber to everything, so recording loses
nothing. Rendering on a thread gives the same pixels as rendering inline."""
import contextlib
import hashlib
import os
import random
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from conftest import ROS_MISSING
from rclpy_probe import ProbeProcess, message_summary

from mbsim_ros.ros import messages as m
from mbsim_ros.ros import qos

pytest.importorskip("cyclonedds", reason="cyclonedds (python) not installed")
from mbsim_ros.ros.dds import DdsTransport  # noqa: E402

LOOPBACK_URI = (Path(__file__).resolve().parent / "cyclonedds-localhost.xml").as_uri()
# topics of their own: a subscriber of another test run that shares the domain is not ours
NAMESPACE = f"lazy_{os.getpid()}"


def env():
    """A fresh random domain in 201..230 on loopback (beside the 100..199 of the test sessions'
    rclpy nodes, conftest: no cross-talk with other test runs' subscribers of /clock or /tf)."""
    return {"ROS_DOMAIN_ID": str(random.SystemRandom().randint(201, 230)), "CYCLONEDDS_URI": LOOPBACK_URI}


def sr1(overrides=None):
    from mbsim_ros.run.config import load_config
    from mbsim_ros.run import build_simulation
    from mbsim_ros.run.world import load_world
    config = load_config(None, dict(overrides or {}, real_time_factor=0.0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        models, _ = load_world(config)
    return build_simulation(models, config), config


def step(sim, bridge, seconds):
    for _ in range(int(round(seconds / sim.dt))):
        sim.step()
        bridge.on_step(sim)


def wait_until(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


class DdsReader:
    """Our own DdsTransport reading topics in this process (ProbeProcess's interface); it goes
    (unsubscribe) by closing."""

    def __init__(self, e):
        self.transport, self.got = DdsTransport(env=e), {}

    def subscribe(self, topic, typename):
        self.got[topic] = []
        self.transport.subscribe(topic, typename, self.got[topic].append, qos.SENSOR)

    def unsubscribe(self, topic):
        self.transport.close()

    def messages(self, topic):
        return [message_summary(topic, m.decode(data, m.IMAGE)) for data in self.got[topic]]

    def close(self):
        self.transport.close()


def no_subscriber_for(transport, handle, quiet):
    """A predicate for wait_until: `handle` has had no subscriber for `quiet` s of wall time.
    (When a Fast DDS reader goes, cyclonedds' writer may count it 1, 0, 1, 0: measured here in 9
    of 55 removals, back to 1 for about a millisecond, up to 40 ms after the first 0; a refresh
    in that millisecond samples once more, which is right for what the writer sees.)"""
    last_seen = [time.monotonic()]

    def quiet_long_enough():
        if transport.subscriber_count(handle):
            last_seen[0] = time.monotonic()
        return time.monotonic() - last_seen[0] >= quiet
    return quiet_long_enough


def rclpy_transport(e, stack):
    """RclpyTransport on a node of our own (as sim_node's) on the domain of `e`."""
    from rclpy_probe import Probe

    from mbsim_ros.ros.rclpy_transport import RclpyTransport
    node = Probe("mbsim", domain=int(e["ROS_DOMAIN_ID"]), sim_time=False)
    stack.callback(node.close)
    return RclpyTransport(node.node)


@pytest.mark.parametrize("publisher, reader", [("dds", "dds"), ("dds", "rclpy"), ("rclpy", "rclpy")],
                         ids=["DdsTransport-DdsTransport", "DdsTransport-rclpy", "RclpyTransport-rclpy"])
def test_a_sensor_starts_and_stops_with_its_subscriber(publisher, reader):
    """The left camera renders while its image has a subscriber and only then, from the next
    refresh on; the subscriber (a real rclpy node in another process, or our DdsTransport) gets
    its frames: the newest one stamped as the camera's last frame, with its pixels. The right
    camera and the gyro, which nobody reads, never sample."""
    if "rclpy" in (publisher, reader) and ROS_MISSING:
        pytest.skip(ROS_MISSING)
    e = env()
    with contextlib.ExitStack() as stack:
        # (the reader's process first: it starts while the world loads)
        sub = stack.enter_context(contextlib.closing(
            DdsReader(e) if reader == "dds" else ProbeProcess(e["ROS_DOMAIN_ID"])))
        from mbsim_ros.ros.bridge import Bridge
        sim, config = sr1({"namespace": NAMESPACE})
        pub = stack.enter_context(contextlib.closing(
            DdsTransport(env=e) if publisher == "dds" else rclpy_transport(e, stack)))
        bridge = Bridge(sim, pub, config)
        bridge.start()
        left, right, gyro = sim.devices["LeftCamera"], sim.devices["RightCamera"], sim.devices["WaistGyro"]
        image = bridge.pubs["LeftCamera/image_raw"]

        # nobody listens: no sensor samples, nothing periodic is serialized
        step(sim, bridge, 0.15)
        assert left.last_stamp is None and right.last_stamp is None and gyro.last_stamp is None
        assert all(p.messages == 0 for k, p in bridge.pubs.items()
                   if not k.startswith(("robot_description", "tf_static")))

        # a subscriber to the left image: the left camera renders (at its 30 Hz), nothing else
        sub.subscribe(image.topic, m.IMAGE)
        assert pub.wait_for_subscribers(image, 1, timeout=10)
        step(sim, bridge, 0.15)       # the next look (every 0.1 s) sees the subscriber
        # the look that starts at t = 0.2 goes through the 21 topics one a step (the range
        # sensor's cloud among them), this one the 14th in the order advertised: woken at
        # t = 0.213, frames at 7/30 .. 9/30 s
        assert [k for k in bridge.pubs].index("LeftCamera/image_raw") == 13
        assert left.last_stamp == pytest.approx(0.3, abs=1e-9)
        assert right.last_stamp is None and gyro.last_stamp is None
        assert image.messages == 3
        assert bridge.pubs["LeftCamera/depth/image_raw"].messages == 0    # rendered, not serialized
        assert bridge.pubs["LeftCamera/camera_info"].messages == 0
        # the subscriber gets the frames (the newest one at least: the first may be published
        # before the reader has matched the writer on its side), decoded on its side
        pixels = hashlib.sha1(sim.readings()["LeftCamera"].values.color.tobytes()).hexdigest()

        def newest():
            got = sub.messages(image.topic)
            return got[-1] if got else None
        assert wait_until(lambda: newest() is not None and abs(newest()["stamp"] - left.last_stamp) < 1e-9), \
            f"the newest frame received: {newest()}, the camera's last: {left.last_stamp}"
        assert newest()["sha1"] == pixels

        # the subscriber goes: the camera stops again
        sub.unsubscribe(image.topic)
        assert wait_until(no_subscriber_for(pub, image, 0.5))
        step(sim, bridge, 0.1)         # a refresh
        stopped_at, sent = left.last_stamp, image.messages
        step(sim, bridge, 0.2)
        assert left.last_stamp == stopped_at and image.messages == sent
        assert right.last_stamp is None and gyro.last_stamp is None


def test_a_bag_beside_live_dds_gets_everything(tmp_path):
    """DDS without subscribers plus a bag: every sensor samples at its rate and every message
    reaches the bag."""
    from mbsim_ros.ros.bag import BagTransport
    from mbsim_ros.ros.bridge import Bridge
    from mbsim_ros.ros.transport import FanoutTransport
    sim, config = sr1({"joint_state_rate": 1000.0})
    t = FanoutTransport([DdsTransport(env=env()), BagTransport(tmp_path / "bag")])
    try:
        bridge = Bridge(sim, t, config)
        bridge.start()
        step(sim, bridge, 0.2)
    finally:
        t.close()
    stats = t.transports[1].stats()
    assert stats["/SR1/joint_states"]["messages"] == 201            # t = 0 .. 0.2 at 1 kHz
    assert stats["/SR1/WaistGyro"]["messages"] == 200               # 1 kHz, first sample after the first step
    assert stats["/clock"]["messages"] == 201
    assert stats["/SR1/LeftCamera/image_raw"]["messages"] == 7      # 30 Hz: t = 0, 1/30, ..., 6/30
    assert stats["/SR1/RightCamera/depth/camera_info"]["messages"] == 7


def _bag_messages(path):
    """{topic: [(log time, message bytes)]} of the bag at `path`, read with mcap."""
    from mcap.reader import make_reader
    out = {}
    with open(next(Path(path).glob("*.mcap")), "rb") as f:
        for _, channel, message in make_reader(f).iter_messages(log_time_order=False):
            out.setdefault(channel.topic, []).append((message.log_time, bytes(message.data)))
    return out


@pytest.mark.parametrize("publisher, reader", [("dds", "dds"), ("rclpy", "rclpy")],
                         ids=["DdsTransport-DdsTransport", "RclpyTransport-rclpy"])
def test_a_bag_beside_a_live_transport_records_through_its_lane(tmp_path, publisher, reader):
    """Live DDS or rclpy plus a bag: the bag records the clock, joint_states, /tf and the
    kinematic sensors through its lane, the same messages byte for byte as a bag alone; the live
    transport gets none of them while nobody reads them there, and the gyro's from the next look
    after a reader came (our DdsTransport: the same bytes as the bag's; a real rclpy node in
    another process: the same stamps)."""
    if reader == "rclpy" and ROS_MISSING:
        pytest.skip(ROS_MISSING)
    from mbsim_ros.ros.bag import BagTransport
    from mbsim_ros.ros.bridge import Bridge
    from mbsim_ros.ros.transport import FanoutTransport
    overrides = {"namespace": NAMESPACE, "joint_state_rate": 1000.0}
    e = env()
    with contextlib.ExitStack() as stack:
        sub = stack.enter_context(contextlib.closing(
            DdsReader(e) if reader == "dds" else ProbeProcess(e["ROS_DOMAIN_ID"])))
        sim, config = sr1(overrides)
        live = DdsTransport(env=e) if publisher == "dds" else rclpy_transport(e, stack)
        t = stack.enter_context(contextlib.closing(FanoutTransport([live, BagTransport(tmp_path / "both")])))
        bridge = Bridge(sim, t, config)
        bridge.start()
        gyro, joints = bridge.pubs["WaistGyro"], bridge.pubs["joint_states"]
        assert {gyro.topic, joints.topic, "/clock", "/tf"} <= {h.topic for h in bridge.lane.handles}
        step(sim, bridge, 0.15)
        assert all(live.stats()[h.topic]["messages"] == 0 for h in (gyro, joints, bridge.pubs["clock"]))

        sub.subscribe(gyro.topic, m.IMU)
        assert t.wait_for_subscribers(gyro, 1, timeout=10)     # (the bag does not count: its lane records it)
        step(sim, bridge, 0.15)          # the look from t = 0.2 s on sees the reader
        sent = live.stats()[gyro.topic]["messages"]
        # that look reaches the k-th topic advertised at t = 0.2 + k ms (one topic a step): the
        # samples stamped from then to 0.299 s
        assert sent == 100 - list(bridge.pubs).index("WaistGyro") > 0
        assert live.stats()[joints.topic]["messages"] == 0
        last = sim.readings()["WaistGyro"].stamp

        def received():        # what the reader got, as (stamp, bytes or None), in order of arrival
            if reader == "dds":
                return [(m.stamp_seconds(m.decode(data, m.IMU).header.stamp), data) for data in sub.got[gyro.topic]]
            return [(g["stamp"], None) for g in sub.messages(gyro.topic)]
        assert wait_until(lambda: received() and abs(received()[-1][0] - last) < 1e-9)
        got = received()
    both = _bag_messages(tmp_path / "both")

    sim, config = sr1(overrides)     # the same world recorded alone
    alone_bag = BagTransport(tmp_path / "alone")
    bridge = Bridge(sim, alone_bag, config)
    bridge.start()
    step(sim, bridge, 0.3)
    alone_bag.close()
    assert both == _bag_messages(tmp_path / "alone")
    assert len(both[gyro.topic]) == 300 and len(both[joints.topic]) == 301

    # what the reader got: messages the bag has, in its order (a burst at rtf 0 may lose some
    # older ones to the keep-last history), among the last `sent`; from DDS, the same bytes
    recorded = {m.stamp_seconds(m.decode(data, m.IMU).header.stamp): data for _, data in both[gyro.topic][-sent:]}
    assert all(stamp in recorded for stamp, _ in got), (got[0][0], min(recorded))
    assert [stamp for stamp, _ in got] == sorted(stamp for stamp, _ in got)
    if reader == "dds":
        assert all(data == recorded[stamp] for stamp, data in got)


def test_the_look_at_subscribers_is_spread_over_the_steps():
    """Running, on_step looks at the topics' subscribers a few a step (one for the bundled
    world's 20 topics at 1 kHz), every topic once each 0.1 s of simulation time, never all at
    once: each count is a call into the middleware, and all of them in one step made it late.
    A reader that comes is seen within 0.1 s; a sensor starts with it."""
    from capture_transport import LiveCapture

    from mbsim_ros.ros.bridge import Bridge
    sim, config = sr1()
    live = LiveCapture()
    bridge = Bridge(sim, live, config)
    bridge.start()
    topics = len(bridge.pubs)
    assert live.count_calls == topics + 1     # the start looks at every topic at once, then t = 0's look begins
    per_step = []
    for _ in range(300):
        live.count_calls = 0
        sim.step()
        bridge.on_step(sim)
        per_step.append(live.count_calls)
    # the rest of t = 0's look, those of 0.1 and 0.2 s, the first topic of 0.3 s's
    assert max(per_step) == 1 and sum(per_step) == (topics - 1) + 2 * topics + 1
    gyro = sim.devices["WaistGyro"]
    assert gyro.idle
    live.readers.add(bridge.pubs["WaistGyro"].topic)
    step(sim, bridge, 0.1)
    assert not gyro.idle and gyro.last_stamp is not None


def test_rendering_on_a_thread_gives_the_same_frames():
    """The worker renders a snapshot of the sample instant: the same pixels and stamps as inline."""
    inline, _ = sr1()
    threaded, _ = sr1()
    threaded.render_in_thread(True)
    worker = threaded.optical_worker
    try:
        frames = []
        for _ in range(70):        # two frames of each camera after t = 0
            inline.step()
            threaded.step()
            worker.flush()
            a, b = inline.readings()["LeftCamera"], threaded.readings()["LeftCamera"]
            assert a.stamp == b.stamp
            np.testing.assert_array_equal(a.values.color, b.values.color)
            np.testing.assert_array_equal(a.values.depth, b.values.depth)
            frames.append(b.stamp)
        assert len(set(frames)) == 3 and worker.rendered >= 6 and not worker.skipped
        # reset drops nothing into the new run
        threaded.reset()
        assert threaded.readings() == {}
    finally:
        threaded.render_in_thread(False)
    assert threaded.optical_worker is None


def test_a_busy_renderer_skips_frames_instead_of_steps():
    """While a device has MAX_IN_FLIGHT samples queued or rendering, the next one is skipped and
    counted; the device's schedule stays on its grid."""
    from mbsim_ros.sensors.optical import MAX_IN_FLIGHT
    sim, _ = sr1()
    sim.render_in_thread(True)
    worker = sim.optical_worker
    dev = sim.devices["LeftCamera"]
    try:
        worker._in_flight["LeftCamera"] = MAX_IN_FLIGHT     # as if that many frames were rendering
        sim.step(34)                             # t = 0 and 1/30 are due
        assert worker.skipped["LeftCamera"] == 2
        assert dev.last_stamp is None and dev.k_next == 2
        worker._in_flight["LeftCamera"] = 0
        sim.step(33)
        worker.flush()
        assert sim.readings()["LeftCamera"].stamp == pytest.approx(0.067, abs=1e-9)   # the step reaching 2/30
    finally:
        sim.render_in_thread(False)


def test_the_render_thread_draws_a_changed_world():
    """After a model joins the world (between steps), the worker renders the new world: the same
    pixels as rendering inline, and the new model is in view (the frame changed)."""
    from mbsim_ros.model import Joint, Link, Model
    from mbsim_ros.model.model import Shape

    def box():
        m = Model("box")
        m.add_link(Link("body", 1.0, np.zeros(3), np.eye(3) * 0.01,
                        visuals=[Shape("box", size=[0.3, 0.3, 0.3], color=[1.0, 0.0, 0.0, 1.0])]))
        m.add_joint(Joint("weld", "fixed", None, "body"))
        return m.finalize()
    inline, _ = sr1()
    threaded, _ = sr1()
    threaded.render_in_thread(True)
    worker = threaded.optical_worker
    try:
        for sim in (inline, threaded):
            sim.step(2)
        worker.flush()
        before = threaded.readings()["LeftCamera"].values.color.copy()
        dev = inline.devices["LeftCamera"]
        T = inline.link_transforms()[dev.link] @ dev.sensor.pose
        ahead = T[:3, 3] - 0.8 * T[:3, 2]            # VRML cameras look along their -Z
        for sim in (inline, threaded):
            sim.add_model(box(), "box", (ahead, [0.0, 0.0, 0.0, 1.0]))
        for _ in range(40):
            inline.step()
            threaded.step()
            worker.flush()
        a, b = inline.readings()["LeftCamera"], threaded.readings()["LeftCamera"]
        assert a.stamp == b.stamp and a.stamp > 0.03
        np.testing.assert_array_equal(a.values.color, b.values.color)
        np.testing.assert_array_equal(a.values.depth, b.values.depth)
        red = (b.values.color[..., 0] > 150) & (b.values.color[..., 1] < 60)
        assert red.mean() > 0.05 and (b.values.color != before).any()
    finally:
        threaded.render_in_thread(False)


def test_at_rtf_0_a_slow_render_thread_loses_no_frame(monkeypatch):
    """A Session at rtf 0 renders on the worker thread too. When the worker falls behind, the
    physics waits for it (no frame skipped); frames finishing together are all published, in
    order; run() returns with every frame of its steps published: the same stamps and pixels as
    rendering inline."""
    import time as _time
    from capture_transport import Capture, steps
    from mbsim_ros.ros.bridge import Bridge
    from capture_transport import ros_session
    from mbsim_ros.sensors import optical
    topics = ("/SR1/LeftCamera/image_raw", "/SR1/RightCamera/depth/image_raw", "/SR1/ChestRange")
    sim, config = sr1()
    inline = Capture()
    bridge = Bridge(sim, inline, config)
    bridge.start()
    steps(sim, bridge, 500)

    render = optical.sense_optical

    def slow_render(*args, **kwargs):
        _time.sleep(0.02)             # 20 steps of physics per frame: the worker falls behind
        return render(*args, **kwargs)
    monkeypatch.setattr(optical, "sense_optical", slow_render)
    sim, config = sr1()
    threaded = Capture()
    session, _ = ros_session(sim, threaded, config)
    try:
        worker = sim.optical_worker
        assert worker is not None and worker.lossless
        session.run(0.5)
        assert not worker.skipped and worker.rendered == 16 + 16 + 6   # 30 Hz: 0 .. 15/30 s; 10 Hz: 0 .. 0.5 s
        for topic in topics:
            want, got = inline.got[topic], threaded.got[topic]
            assert [m.stamp_seconds(x.header.stamp) for x in got] == [m.stamp_seconds(x.header.stamp) for x in want]
            assert len(got) >= 5
        np.testing.assert_array_equal(threaded.got[topics[0]][-1].data, inline.got[topics[0]][-1].data)
    finally:
        session.close()
