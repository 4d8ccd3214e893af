"""CDR templates (ros/templates.py) against rosbags' serializer: every template, byte for byte and
field by field, for frame and joint names of every length modulo 8 (each alignment case), and for
the messages the bridge publishes on several worlds (bundled SR1, a URDF, an OpenSim model)
compared with the message-object path the bridge used before templates."""
import math
from pathlib import Path

import numpy as np
import pytest

from capture_transport import RawCapture
from mbsim_ros.ros import messages as m
from mbsim_ros.ros import templates as tpl

T = m.TYPESTORE.types
REPO = Path(__file__).resolve().parents[2]
NAMES = ["", "a", "ab", "abc", "abcd", "abcde", "abcdef", "abcdefg", "abcdefgh", "odd_len9x"]


def serialize(msg, typename):
    return bytes(m.TYPESTORE.serialize_cdr(msg, typename))


def canonical(data, typename):
    """data decodes, and re-serializes to the same bytes (rosbags' own layout)."""
    msg = m.decode(data, typename)
    assert serialize(msg, typename) == data
    return msg


def time_msg(stamp):
    sec, nanosec = m.to_sec_nanosec(stamp)
    return T["builtin_interfaces/msg/Time"](sec=sec, nanosec=nanosec)


def header(stamp, frame):
    return T["std_msgs/msg/Header"](stamp=time_msg(stamp), frame_id=frame)


@pytest.fixture
def rng():
    return np.random.default_rng(7)


@pytest.mark.parametrize("frame", NAMES)
def test_imu_template(frame, rng):
    var_a, var_g = rng.random(3), rng.random(3)
    for accel, gyro in ((True, True), (True, False), (False, True)):
        t = tpl.ImuTemplate(frame, accel=accel, gyro=gyro, accel_variance=var_a, gyro_variance=var_g)
        for stamp in (0.0, 12.345678901, 1_700_000_000.25, -0.5):   # refilled in place: no leftovers
            a, g = rng.normal(size=3), rng.normal(size=3)
            data = t.fill(m.to_nanoseconds(stamp), a if accel else None, g if gyro else None)
            ref = m.imu(stamp, frame, a if accel else None, g if gyro else None, var_a, var_g)
            assert data == ref
            msg = canonical(data, m.IMU)
            if accel:
                assert (msg.linear_acceleration.x, msg.linear_acceleration.y, msg.linear_acceleration.z) == tuple(a)
            if gyro:
                assert (msg.angular_velocity.x, msg.angular_velocity.y, msg.angular_velocity.z) == tuple(g)


@pytest.mark.parametrize("frame", NAMES)
def test_wrench_camera_info_and_clock_templates(frame, rng):
    w = tpl.WrenchTemplate(frame)
    ci = tpl.CameraInfoTemplate(frame, 319, 241, 211.5, 211.5, 159.0, 120.0)
    c = tpl.ClockTemplate()
    for stamp in (0.0, 3.0000000004, 99.999999):
        v = rng.normal(size=6)
        ns = m.to_nanoseconds(stamp)
        assert w.fill(ns, v) == m.wrench(stamp, frame, v)
        assert ci.fill(ns) == m.camera_info(stamp, frame, 319, 241, 211.5, 211.5, 159.0, 120.0)
        assert c.fill(ns) == m.clock(stamp)
        assert c.fill(ns) == serialize(T[m.CLOCK](clock=time_msg(stamp)), m.CLOCK)


@pytest.mark.parametrize("frame", NAMES)
@pytest.mark.parametrize("n", [0, 1, 2, 3, 681])
def test_laser_scan_template(frame, n, rng):
    t = tpl.LaserScanTemplate(frame, n, -1.5, 0.01, -1.5 + (n - 1) * 0.01, 0.02, 5.6, 0.1)
    for stamp in (0.1, 0.2):
        r = rng.random(n) * 6
        r[:n // 3] = np.inf
        data = t.fill(m.to_nanoseconds(stamp), r)
        assert data == m.laser_scan(stamp, frame, r, -1.5, 0.01, -1.5 + (n - 1) * 0.01, 0.02, 5.6, 0.1)
        np.testing.assert_array_equal(canonical(data, m.LASER_SCAN).ranges, r.astype(np.float32))


@pytest.mark.parametrize("frame", NAMES)
@pytest.mark.parametrize("shape, dtype", [((3, 5, 3), np.uint8), ((3, 5), np.uint8), ((2, 3), np.float32),
                                          ((4, 7), np.uint16), ((1, 1, 4), np.uint8)])
def test_image_template(frame, shape, dtype, rng):
    pixels = (rng.random(shape) * 200).astype(dtype)
    t = tpl.ImageTemplate(frame, shape[0], shape[1], *m.image_encoding(pixels))
    for stamp in (1.0, 2.5):
        data = t.fill(m.to_nanoseconds(stamp), pixels)
        assert data == m.image(stamp, frame, pixels)
        canonical(data, m.IMAGE)
    with pytest.raises(ValueError, match="bytes"):
        t.fill(10**9, np.zeros((shape[0] + 1,) + shape[1:], dtype))


@pytest.mark.parametrize("names", [[], ["j"], NAMES[1:4], NAMES, [n + "_joint" for n in NAMES]])
def test_joint_state_template(names, rng):
    n = len(names)
    for flags in ((True, True, True), (False, False, True), (True, False, False)):
        t = tpl.JointStateTemplate(names, *flags)
        for stamp in (0.0, 7.25):
            vec = [rng.normal(size=n) if on else None for on in flags]
            data = t.fill(m.to_nanoseconds(stamp), *vec)
            assert data == m.joint_state(stamp, names, *vec)
            msg = canonical(data, m.JOINT_STATE)
            assert list(msg.name) == names


def random_rotation(rng):
    q = rng.normal(size=4)
    q /= np.linalg.norm(q)
    x, y, z, w = q
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def tf_reference(stamp, frames, values):
    """TFMessage through rosbags' message objects."""
    V3, Q = T["geometry_msgs/msg/Vector3"], T["geometry_msgs/msg/Quaternion"]
    out = []
    for (parent, child), v in zip(frames, values):
        tr = T["geometry_msgs/msg/Transform"](translation=V3(x=v[0], y=v[1], z=v[2]),
                                              rotation=Q(x=v[3], y=v[4], z=v[5], w=v[6]))
        out.append(T["geometry_msgs/msg/TransformStamped"](header=header(stamp, parent), child_frame_id=child,
                                                           transform=tr))
    return serialize(T[m.TF_MESSAGE](transforms=out), m.TF_MESSAGE)


def test_tf_template_bytes_and_poses(rng):
    """Every pair of parent/child name lengths; the poses equal the 4x4 algebra (parent^-1 child
    child_pose) to 1e-12 (round-off of products of unit-size numbers)."""
    frames = [(p, c + "x") for p in NAMES for c in NAMES[:5]]
    n = len(frames)
    nl = 6
    link_R = np.array([random_rotation(rng) for _ in range(nl)])
    link_p = rng.normal(size=(nl, 3))
    parent = rng.integers(-1, nl, n)
    child = rng.integers(0, nl, n)
    child_R = np.array([random_rotation(rng) if k % 2 else np.eye(3) for k in range(n)])
    child_p = rng.normal(size=(n, 3)) * (np.arange(n) % 2)[:, None]
    t = tpl.TfTemplate(frames)
    stamp = 42.001
    data = t.fill(m.to_nanoseconds(stamp), link_R, link_p, parent, child, child_R, child_p)
    msg = canonical(data, m.TF_MESSAGE)
    values = np.array([[tr.transform.translation.x, tr.transform.translation.y, tr.transform.translation.z,
                        tr.transform.rotation.x, tr.transform.rotation.y, tr.transform.rotation.z,
                        tr.transform.rotation.w] for tr in msg.transforms])
    assert data == tf_reference(stamp, frames, values)
    assert [(tr.header.frame_id, tr.child_frame_id) for tr in msg.transforms] == frames
    assert all((tr.header.stamp.sec, tr.header.stamp.nanosec) == (42, 1_000_000) for tr in msg.transforms)

    def h(R, p):
        out = np.eye(4)
        out[:3, :3], out[:3, 3] = R, p
        return out
    for e in range(n):
        Tc = h(link_R[child[e]], link_p[child[e]]) @ h(child_R[e], child_p[e])
        Te = Tc if parent[e] < 0 else np.linalg.solve(h(link_R[parent[e]], link_p[parent[e]]), Tc)
        np.testing.assert_allclose(values[e, :3], Te[:3, 3], atol=1e-12)
        np.testing.assert_allclose(values[e, 3:], m.quaternion_from_matrix(Te[:3, :3]), atol=1e-12)
    # fill_values writes given rows
    data = t.fill_values(1_500_000_000, values[::-1])
    assert data == tf_reference(1.5, frames, values[::-1])


def test_tf_quaternion_is_shepperd_near_180_degrees():
    """Rotations by pi about each axis (w = 0, the case a naive trace formula gets wrong)."""
    Rs = np.array([np.diag([1.0, -1, -1]), np.diag([-1.0, 1, -1]), np.diag([-1.0, -1, 1]), np.eye(3)])
    t = tpl.TfTemplate([("w", f"l{k}") for k in range(4)])
    msg = m.decode(t.fill(0, Rs, np.zeros((4, 3)), np.full(4, -1), np.arange(4), np.tile(np.eye(3), (4, 1, 1)),
                          np.zeros((4, 3))), m.TF_MESSAGE)
    q = [(tr.transform.rotation.x, tr.transform.rotation.y, tr.transform.rotation.z, tr.transform.rotation.w)
         for tr in msg.transforms]
    assert q == [(1.0, 0.0, 0.0, 0.0), (0.0, 1.0, 0.0, 0.0), (0.0, 0.0, 1.0, 0.0), (0.0, 0.0, 0.0, 1.0)]


# ---------------------------------------------------------------------------------------------
# the bridge on several worlds: templates against the message-object path


def reference_write(bridge, work):
    """What Bridge._write did before templates: rosbags message objects via messages.*, handed
    to the transport as Bridge._write hands them (its MessageWriter's send batches)."""
    bridge.writer.batch = []
    reference_fill(bridge, work)
    bridge.transport.publish_many(bridge.writer.batch)


def reference_fill(bridge, work):
    msg = m
    send = bridge.writer.send
    for item in work:
        kind = item[0]
        if callable(kind):        # a kinematic sensor's bound writer: its reading, on its own topic
            dev = next(d for d, writer in bridge.writer.templates.values() if writer is kind)
            item = ("reading", dev, item[1], "")
            kind = "reading"
        if kind == "clock":
            send("clock", msg.clock(item[1]), item[1])
        elif kind == "joint_states":
            _, key, t, q, v, tau, names = item
            send(key, msg.joint_state(t, names, q, v, tau), t)
        elif kind == "actuator_controls":
            _, t, controls = item
            send("actuator_controls/state", msg.joint_state(t, bridge.actuator_names, effort=controls), t)
        elif kind == "tf":
            _, t, R, p, (frames, parent, child, child_R, child_p) = item
            values = np.zeros((len(frames), 7))
            tpl.tf_values(R, p, parent, child, child_R, child_p, values.reshape(-1), np.arange(len(values)) * 7,
                          np.empty(tpl.TF_WORK_SHAPE))
            send("tf", tf_reference(t, frames, values), t)
        elif kind == "reading":
            dev, r, suffix = item[1], item[2], item[3]
            frame, stamp, key = bridge.frame(r.frame), r.stamp, dev.name + suffix
            if dev.kind == "accelerometer":
                send(key, msg.imu(stamp, frame, accel=r.values, accel_variance=dev.variance), stamp)
            elif dev.kind == "gyro":
                send(key, msg.imu(stamp, frame, gyro=r.values, gyro_variance=dev.variance), stamp)
            elif dev.kind == "force":
                send(key, msg.wrench(stamp, frame, r.values), stamp)
            elif dev.kind == "range":       # the scan: the ring nearest the horizon; a cloud of every ring
                ring = r.values[dev.scan_ring * dev.columns:(dev.scan_ring + 1) * dev.columns]
                send(key, msg.laser_scan(stamp, frame, ring, dev.angle_min, dev.angle_increment,
                                         dev.angle_max, dev.range_min, dev.range_max, dev.scan_time), stamp)
                if not suffix and dev.name + "/points" in bridge.pubs:
                    send(dev.name + "/points", msg.lidar_cloud(stamp, frame, r.values, dev.laser_directions,
                                                                r.intensities), stamp)
            elif dev.kind == "camera":
                info = msg.camera_info(stamp, frame, dev.width, dev.height, dev.fx, dev.fy, dev.cx, dev.cy)
                if r.values.color is not None:
                    send(dev.name + "/image_raw", msg.image(stamp, frame, r.values.color), stamp)
                    send(dev.name + "/camera_info", info, stamp)
                if r.values.depth is not None:
                    send(dev.name + "/depth/image_raw", msg.image(stamp, frame, r.values.depth), stamp)
                    send(dev.name + "/depth/camera_info", info, stamp)
        elif kind == "imu":
            _, topic, acc, gyro, ra, rg = item
            g = rg.values if rg is not None and abs(rg.stamp - ra.stamp) < 1e-9 else None
            send(topic, msg.imu(ra.stamp, bridge.frame(acc.frame), accel=ra.values, gyro=g,
                                accel_variance=acc.variance, gyro_variance=gyro.variance), ra.stamp)
        elif kind == "diagnostics":
            send("diagnostics", msg.diagnostics(item[1], bridge._statuses(item[2]())), item[1])


def published(model, overrides, seconds, reference):
    import warnings

    from mbsim_ros.ros.bridge import Bridge
    from mbsim_ros.run.config import load_config
    from mbsim_ros.run import build_simulation
    from mbsim_ros.run.world import load_world
    config = load_config(None, dict(overrides, model=model, real_time_factor=0.0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        models, _ = load_world(config)
    sim = build_simulation(models, config)
    capture = RawCapture()
    bridge = Bridge(sim, capture, config)
    if reference:
        bridge._write = lambda work: reference_write(bridge, work)
    bridge.start()
    for _ in range(int(round(seconds / sim.dt))):
        sim.step()
        bridge.on_step(sim)
    return [(topic, data) for topic, data, _ in capture.sent], bridge


WORLDS = [
    pytest.param(None, {"merge_imu": False}, 0.11, id="SR1"),          # bundled: every sensor kind
    pytest.param(None, {"merge_imu": True, "frame_prefix": "r1/"}, 0.012, id="SR1-merged-imu"),
    pytest.param(str(REPO / "test/models/urdf/elements.urdf"), {}, 0.012, id="urdf"),
    pytest.param(str(REPO / "test/models/opensim/features40.osim"), {}, 0.012, id="opensim"),
]


@pytest.mark.parametrize("model, overrides, seconds", WORLDS)
def test_bridge_templates_equal_the_message_objects(model, overrides, seconds):
    got, bridge = published(model, overrides, seconds, reference=False)
    ref, _ = published(model, overrides, seconds, reference=True)
    assert [t for t, _ in got] == [t for t, _ in ref]
    assert len(got) > 10
    types = {p.topic: p.typename for p in bridge.pubs.values()}
    for (topic, data), (_, expected) in zip(got, ref):
        assert data == expected, f"{topic}: template bytes differ from rosbags' serialization"
        canonical(data, types[topic])
    seen = {types[t] for t, _ in got}
    if model is None:       # SR1 has every kind the templates cover
        assert {m.IMU, m.WRENCH_STAMPED, m.LASER_SCAN, m.IMAGE, m.CAMERA_INFO, m.JOINT_STATE, m.TF_MESSAGE,
                m.CLOCK} <= seen
    else:
        assert {m.JOINT_STATE, m.TF_MESSAGE, m.CLOCK} <= seen
    assert all(math.isfinite(len(d)) for _, d in got)


def test_bridge_hands_images_to_a_bag_as_parts_and_the_bag_is_the_same(tmp_path):
    """A bag takes an image as its header and the rendered pixels (not copied on the way); the
    bag holds the messages of the one written from whole messages, in order (the bundled
    world's two cameras, color and depth, over three frames). (Not byte for byte: with O_DIRECT
    the rendered, page-aligned pixels go to the disk as they are, in chunks of their own,
    test_bag.py.)"""
    import warnings

    from mcap.reader import NonSeekingReader
    from rosbags.highlevel import AnyReader

    from mbsim_ros.ros.bag import BagTransport
    from mbsim_ros.ros.bridge import Bridge
    from mbsim_ros.run.config import load_config
    from mbsim_ros.run import build_simulation
    from mbsim_ros.run.world import load_world
    config = load_config(None, {"real_time_factor": 0.0})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        models, _ = load_world(config)
    files = []
    for parts in (True, False):
        sim = build_simulation(models, config)
        path = tmp_path / str(parts) / "bag"
        with BagTransport(path) as bag:
            if not parts:
                bag.takes_parts = False            # whole messages, as every other transport gets them
            sent = []
            publish_many = bag.publish_many
            bag.publish_many = lambda batch: (sent.extend(d for _, d, _ in batch), publish_many(batch))
            bridge = Bridge(sim, bag, config)
            bridge.start()
            for _ in range(70):
                sim.step()
                bridge.on_step(sim)
        assert sum(isinstance(d, tuple) for d in sent) == (12 if parts else 0)   # 2 cameras x 2 images x 3
        with AnyReader([path]) as reader:
            indexed = [(c.topic, t, bytes(raw)) for c, t, raw in reader.messages()]
        with open(next(path.glob("*.mcap")), "rb") as f:
            scanned = [(ch.topic, msg.log_time, msg.data) for _, ch, msg in NonSeekingReader(f).iter_messages()]
        assert sorted(scanned) == sorted(indexed)
        files.append(indexed)
    assert files[0] == files[1]
    assert sum(topic.endswith("image_raw") for topic, _, _ in files[0]) == 12


def test_bridge_tf_equals_the_4x4_algebra():
    """The /tf poses (numba tf_values) equal the link transforms composed as 4x4 matrices."""
    got, bridge = published(None, {}, 0.010, reference=False)   # /tf due at the last step
    sim = bridge.sim
    T4 = sim.link_transforms()
    last = [d for t, d in got if t == "/tf"][-1]
    msg = m.decode(last, m.TF_MESSAGE)
    assert len(msg.transforms) == len(bridge.moving)
    for tr, (parent, child, parent_link, child_link, child_pose) in zip(msg.transforms, bridge.moving):
        Tc = T4[child_link] if child_pose is None else T4[child_link] @ child_pose
        Te = Tc if parent_link is None else np.linalg.solve(T4[parent_link], Tc)
        a = tr.transform
        np.testing.assert_allclose([a.translation.x, a.translation.y, a.translation.z], Te[:3, 3], atol=1e-12)
        np.testing.assert_allclose([a.rotation.x, a.rotation.y, a.rotation.z, a.rotation.w],
                                   m.quaternion_from_matrix(Te[:3, :3]), atol=1e-12)
