"""BagTransport writes rosbag2 (MCAP, version 8) that an independent reader decodes message for
message: mcap-ros2-support (Foxglove's Python decoder, which parses the embedded definitions)."""
import errno
import fcntl
import mmap
import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from mbsim_ros.ros import messages as m
from mbsim_ros.ros import qos, templates

mcap_reader = pytest.importorskip("mcap_ros2.reader", reason="mcap-ros2-support (test extra) not installed")
from mbsim_ros.ros import bag_kernels, bag_writer, direct_file  # noqa: E402
from mbsim_ros.ros.bag import BagTransport  # noqa: E402

URDF = '<?xml version="1.0"?>\n<robot name="sr1"><link name="WAIST"/></robot>\n'
NAMES = [f"joint{i}" for i in range(12)]
T0 = 1000.0  # seconds of simulation time of the first sample


def _transform(angle, xyz):
    c, s = np.cos(angle), np.sin(angle)
    T = np.eye(4)
    T[:3, :3] = [[c, -s, 0], [s, c, 0], [0, 0, 1]]
    T[:3, 3] = xyz
    return T


def _image(k):
    img = np.zeros((24, 32, 3), dtype=np.uint8)
    img[..., 0] = k
    img[k % 24, :, 1] = 255
    return img


def write_bag(path, compression=None):
    """Write the test topics; returns {topic: [(stamp_ns, expected values...)]}."""
    written = {}
    with BagTransport(path, compression=compression) as bag:
        rd = bag.advertise("/robot_description", m.STRING, qos.LATCHED)
        tf_static = bag.advertise("/tf_static", m.TF_MESSAGE, qos.LATCHED)
        imu = bag.advertise("/sr1/imu", m.IMU, qos.SENSOR)
        js = bag.advertise("/joint_states", m.JOINT_STATE, qos.DEFAULT)
        cam = bag.advertise("/sr1/camera/image_raw", m.IMAGE, qos.SENSOR)
        assert bag.advertise("/sr1/imu", m.IMU, qos.SENSOR) is imu    # same handle again

        t_ns = m.to_nanoseconds(T0)
        bag.publish(rd, m.string(URDF), t_ns)
        written["/robot_description"] = [(t_ns, URDF)]
        statics = [(T0, "WAIST", "imu_link", _transform(0.3, (0.1, 0.0, 0.2))),
                   (T0, "imu_link", "camera_optical_frame", _transform(-2.0, (0.0, 0.05, 0.0)))]
        bag.publish(tf_static, m.tf_message(statics), t_ns)
        written["/tf_static"] = [(t_ns, statics)]
        written["/sr1/imu"], written["/joint_states"], written["/sr1/camera/image_raw"] = [], [], []
        for k in range(50):
            t = T0 + k * 0.005
            t_ns = m.to_nanoseconds(t)
            accel, gyro = (0.01 * k, -0.02, 9.8), (0.0, 0.001 * k, 0.0)
            bag.publish(imu, m.imu(t, "imu_link", accel, gyro, (1e-4,) * 3, (1e-6,) * 3), t_ns)
            written["/sr1/imu"].append((t_ns, accel, gyro))
            q = np.sin(np.arange(12) + k)
            bag.publish(js, m.joint_state(t, NAMES, q, 2 * q, 3 * q), t_ns)
            written["/joint_states"].append((t_ns, q))
            if k % 10 == 0:
                bag.publish(cam, m.image(t, "camera_optical_frame", _image(k)), t_ns)
                written["/sr1/camera/image_raw"].append((t_ns, _image(k)))
        stats = bag.stats()
    assert {t: s["messages"] for t, s in stats.items()} == {t: len(v) for t, v in written.items()}
    assert stats["/sr1/imu"]["type"] == m.IMU and stats["/sr1/imu"]["bytes"] > 0
    return written


def read_bag(path):
    """{topic: [McapROS2Message]} read with mcap-ros2-support from the bag's .mcap file."""
    files = sorted(path.glob("*.mcap"))
    assert len(files) == 1, files
    out = {}
    for msg in mcap_reader.read_ros2_messages(str(files[0])):
        out.setdefault(msg.channel.topic, []).append(msg)
    return out


def stamp_ns(header):
    return header.stamp.sec * 1_000_000_000 + header.stamp.nanosec


@pytest.mark.parametrize("compression", [None, "zstd"])
def test_bag_round_trip(tmp_path, compression):
    path = tmp_path / "run"
    written = write_bag(path, compression)
    got = read_bag(path)
    assert set(got) == set(written)
    types = {"/robot_description": m.STRING, "/tf_static": m.TF_MESSAGE, "/sr1/imu": m.IMU,
             "/joint_states": m.JOINT_STATE, "/sr1/camera/image_raw": m.IMAGE}
    for topic, msgs in got.items():
        assert len(msgs) == len(written[topic]), topic
        assert {x.schema.name for x in msgs} == {types[topic]}
        assert {x.schema.encoding for x in msgs} == {"ros2msg"}
        assert [x.log_time_ns for x in msgs] == [w[0] for w in written[topic]]

    assert got["/robot_description"][0].ros_msg.data == URDF

    tf = got["/tf_static"][0].ros_msg.transforms
    for ts, (stamp, parent, child, T) in zip(tf, written["/tf_static"][0][1]):
        assert (ts.header.frame_id, ts.child_frame_id) == (parent, child)
        assert stamp_ns(ts.header) == m.to_nanoseconds(stamp)
        tr, q = ts.transform.translation, ts.transform.rotation
        np.testing.assert_allclose([tr.x, tr.y, tr.z], T[:3, 3])
        angle = np.arctan2(T[1, 0], T[0, 0])
        np.testing.assert_allclose([q.x, q.y, q.z, q.w], [0, 0, np.sin(angle / 2), np.cos(angle / 2)],
                                   atol=1e-12)

    for msg, (t_ns, accel, gyro) in zip(got["/sr1/imu"], written["/sr1/imu"]):
        r = msg.ros_msg
        assert stamp_ns(r.header) == t_ns and r.header.frame_id == "imu_link"
        a, w = r.linear_acceleration, r.angular_velocity
        assert (a.x, a.y, a.z) == accel and (w.x, w.y, w.z) == gyro
        assert r.orientation_covariance[0] == -1.0
        assert list(r.linear_acceleration_covariance[::4]) == [1e-4] * 3

    for msg, (t_ns, q) in zip(got["/joint_states"], written["/joint_states"]):
        r = msg.ros_msg
        assert stamp_ns(r.header) == t_ns
        assert list(r.name) == NAMES
        np.testing.assert_array_equal(r.position, q)
        np.testing.assert_array_equal(r.velocity, 2 * q)
        np.testing.assert_array_equal(r.effort, 3 * q)

    for msg, (t_ns, img) in zip(got["/sr1/camera/image_raw"], written["/sr1/camera/image_raw"]):
        r = msg.ros_msg
        assert stamp_ns(r.header) == t_ns
        assert (r.height, r.width, r.encoding, r.step, r.is_bigendian) == (24, 32, "rgb8", 96, 0)
        np.testing.assert_array_equal(np.frombuffer(bytes(r.data), np.uint8).reshape(24, 32, 3), img)


def _qos_by_topic(info):
    out = {}
    for entry in info["topics_with_message_count"]:
        meta = entry["topic_metadata"]
        profiles = meta["offered_qos_profiles"]
        out[meta["name"]] = yaml.safe_load(profiles) if isinstance(profiles, str) else profiles
    return out


@pytest.mark.parametrize("compression", [None, "zstd"])
def test_bag_metadata(tmp_path, compression):
    path = tmp_path / "run"
    written = write_bag(path, compression)
    info = yaml.safe_load((path / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert info["version"] == 8
    assert info["storage_identifier"] == "mcap"
    assert info["ros_distro"] == "jazzy"
    assert info["message_count"] == sum(len(v) for v in written.values())
    assert info["compression_mode"] == "" and info["compression_format"] == ""  # storage-level
    counts = {e["topic_metadata"]["name"]: e["message_count"] for e in info["topics_with_message_count"]}
    assert counts == {t: len(v) for t, v in written.items()}
    first = min(w[0] for v in written.values() for w in v)
    assert info["starting_time"]["nanoseconds_since_epoch"] == first

    # v8: offered_qos_profiles is a YAML string of rmw enum values (1 = TRANSIENT_LOCAL /
    # RELIABLE / KEEP_LAST, 2 = VOLATILE / BEST_EFFORT)
    profiles = _qos_by_topic(info)
    for topic in ("/tf_static", "/robot_description"):
        (p,) = profiles[topic]
        assert (p["durability"], p["reliability"], p["history"], p["depth"]) == (1, 1, 1, 1), topic
    (p,) = profiles["/sr1/imu"]
    assert (p["durability"], p["reliability"], p["depth"]) == (2, 1, 10)

    # the MCAP chunks are zstd-compressed when asked (rosbag2 "storage" compression)
    from mcap.reader import make_reader
    with open(next(path.glob("*.mcap")), "rb") as f:
        summary = make_reader(f).get_summary()
    chunk_compression = {c.compression for c in summary.chunk_indexes}
    assert chunk_compression == ({"zstd"} if compression else {""})
    # and the QoS travels inside the MCAP too (channel metadata), for readers of the file alone
    rd = [c for c in summary.channels.values() if c.topic == "/robot_description"][0]
    assert yaml.safe_load(rd.metadata["offered_qos_profiles"])[0]["durability"] == 1


def test_existing_path_is_refused(tmp_path):
    (tmp_path / "run").mkdir()
    with pytest.raises(FileExistsError, match="ros2 bag record refuses"):
        BagTransport(tmp_path / "run")
    with pytest.raises(ValueError):
        BagTransport(tmp_path / "other", compression="lz4")


def test_bag_ignores_subscriptions(tmp_path):
    with BagTransport(tmp_path / "run") as bag:
        sub = bag.subscribe("/joint_commands", m.JOINT_STATE, lambda data: None)
        assert sub.messages == 0
        assert bag.stats()["/joint_commands"]["direction"] == "in"
    assert bag.closed
    with pytest.raises(RuntimeError):
        bag.advertise("/x", m.STRING)


def _sequence():
    """Messages for the byte comparisons: IMU at 1 kHz, a 230 kB image every 40 ms, a topic
    advertised mid-way, a few late stamps and two messages larger than a chunk (1.4 MB and 4.8 MB,
    a point cloud's size), so that chunks exceed 1 MiB and the 4 MiB staging buffer has to grow."""
    rng = np.random.default_rng(3)
    seq = []
    for k in range(1500):
        t = 1.0 + k * 1e-3 + (0.0005 if k % 50 == 7 else 0.0)   # a few late stamps
        seq.append(("/sr1/imu", m.IMU, m.imu(t, "imu_link", rng.normal(size=3), rng.normal(size=3)), t))
        if k == 700:
            seq.append(("/late", m.STRING, m.string("joined"), t))
        if k % 40 == 0:
            seq.append(("/cam", m.IMAGE, m.image(t, "cam", rng.integers(0, 255, (240, 320, 3), dtype=np.uint8)), t))
        if k in (300, 1100):
            rows = 480 if k == 300 else 1600
            seq.append(("/big", m.IMAGE, m.image(t, "cam", rng.integers(0, 255, (rows, 1000, 3), dtype=np.uint8)), t))
    return seq


def _imu_lane(bag, handle):
    """A Lane recording /sr1/imu (_sequence's Imu) from a sensor slot of six values: the
    acceleration and the angular velocity; returns (lane, values, sample count, sample stamp)."""
    tmpl = templates.ImuTemplate("imu_link")
    values, count, stamp = np.zeros((1, 6)), np.zeros(1, np.int64), np.zeros(1)
    gathers = [(tmpl.accel_at + 8 * c, 3, c) for c in range(3)] + [(tmpl.gyro_at + 8 * c, 3, 3 + c) for c in range(3)]
    none = np.zeros(0)
    return (bag.lane([(handle, tmpl, 0, 0, gathers, [4 + tmpl.stamp_at])], (none, none, none, values, none), count, stamp),
            values, count, stamp)


def _write_sequence(path, seq, compression, fast=True, batch=1, lane=False, aligned_lane_buffers=False):
    """The .mcap file's bytes and metadata.yaml's text of a bag of `seq`; fast=False: every
    message through rosbags' Writer.write; batch: messages per publish_many call (1: publish);
    lane: the Imu messages recorded through a Lane from their values (the others published);
    aligned_lane_buffers: the lane's buffers page-aligned (so that its records could be taken
    for an image's pixels)."""
    from mbsim_ros.sensors.optical import page_aligned_empty
    with BagTransport(path, compression=compression) as bag:
        assert bag._storage is not None        # rosbags here has what the chunk path needs
        if not fast:
            bag._storage = None                # every message through Writer.write
        pubs, pending = {}, []
        for topic, typename, data, t in seq:
            if topic not in pubs:
                bag.publish_many(pending)      # a topic is advertised between two batches
                pending = []
                pubs[topic] = bag.advertise(topic, typename, qos.SENSOR)
                if lane and typename == m.IMU:
                    imu_lane, values, count, stamp = _imu_lane(bag, pubs[topic])
                    if aligned_lane_buffers:
                        bag._close_segment()
                        bag._lane_buffer = page_aligned_empty(bag._lane_capacity, np.uint8)
                        bag._state[bag_kernels.STATE_LANE_END] = 0
                        bag._free.extend(page_aligned_empty(bag._lane_capacity, np.uint8) for _ in range(4))
            if lane and typename == m.IMU:
                imu = m.TYPESTORE.deserialize_cdr(data, m.IMU)
                a, w = imu.linear_acceleration, imu.angular_velocity
                values[0] = (a.x, a.y, a.z, w.x, w.y, w.z)
                stamp[0] = t
                count[0] += 1
                imu_lane.record(1e9)    # (a time wrong for the Imu)
            elif batch == 1:
                bag.publish(pubs[topic], data, m.to_nanoseconds(t))
            else:                          # images as parts: a header and the pixels' array
                if typename == m.IMAGE:
                    data = (data[:100], np.frombuffer(data, np.uint8)[100:])
                pending.append((pubs[topic], data, m.to_nanoseconds(t)))
                if len(pending) == batch:
                    bag.publish_many(pending)
                    pending = []
        bag.publish_many(pending)
    return next(path.glob("*.mcap")).read_bytes(), (path / "metadata.yaml").read_text()


def _refuse_direct_open(name):
    raise OSError(errno.EINVAL, "Invalid argument")


def _refuse_direct_write(fd, buffers, offset):
    raise OSError(errno.EINVAL, "Invalid argument")


@pytest.mark.parametrize("compression", [None, "zstd"])
@pytest.mark.parametrize("mode", ["as-is", "no-direct-open", "no-direct-write", "batches", "lane"])
def test_chunked_writes_give_the_same_bag_as_rosbags_writer(tmp_path, monkeypatch, compression, mode):
    """The chunk path (parts in memory, chunks written by the writer thread, with O_DIRECT where
    the file system has it) writes the very bytes rosbags' Writer.write writes, message by
    message: the same .mcap file and metadata.yaml, across 1 MiB chunk closes, with chunks
    larger than the staging buffer, out-of-order log times, a topic advertised in the middle of
    a chunk and a last block that is not whole. The same where O_DIRECT is refused: at open
    (tmpfs and the like) or at the first write (buffered writes instead), and with the messages
    given 7 at a time to publish_many (a chunk closes inside a batch), images as two parts (a
    header's bytes and an array of the rest, as the bridge hands them over), and with the Imu
    messages recorded by a Lane (ros/bag_lane.py: filled from their values and recorded by one
    compiled call, stamps rounded to nanoseconds as messages.to_nanoseconds rounds them)."""
    seq = _sequence()
    out = {}
    for fast in (True, False):
        path = tmp_path / str(fast) / "bag"      # the same name: it is written into the bag
        with monkeypatch.context() as mp:
            if fast and mode == "no-direct-open":
                mp.setattr(direct_file, "_open_direct", _refuse_direct_open)
            if fast and mode == "no-direct-write":
                mp.setattr(direct_file, "_pwritev", _refuse_direct_write)
            out[fast] = _write_sequence(path, seq, compression, fast, 7 if fast and mode == "batches" else 1,
                                        lane=fast and mode == "lane")
    assert out[True][0] == out[False][0]
    assert out[True][1] == out[False][1]
    assert len(out[True][0]) > (3 if compression else 8) << 20   # several chunks
    assert len(out[True][0]) % 4096                                # a last partial block


def test_a_lanes_records_are_copied_not_written_in_place(tmp_path):
    """The lane's buffer is reused once its chunk is written, so its records are copied into
    the staging buffer, never written from the buffer like an image's pixels, even where the
    buffer is page-aligned and a run of records is longer than _BIG_PART: the bag is rosbags'
    bytes (an image written in place would have cut and padded the chunk)."""
    seq = [x for x in _sequence() if x[1] == m.IMU]       # records only: segments of ~1 MiB
    why_not = _direct_io_supported(tmp_path)
    if why_not is not None:
        pytest.skip(why_not)
    laned = _write_sequence(tmp_path / "lane" / "bag", seq, None, lane=True, aligned_lane_buffers=True)
    assert laned == _write_sequence(tmp_path / "rosbags" / "bag", seq, None, fast=False)


def _direct_io_supported(directory):
    """None if an O_DIRECT file in `directory` takes an aligned 4 KiB write, else why not."""
    if not hasattr(os, "O_DIRECT"):
        return "no os.O_DIRECT on this platform"
    probe = directory / "odirect-probe"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o644)
    except OSError as e:
        return f"O_DIRECT open refused in {directory}: {e}"
    try:
        buf = mmap.mmap(-1, 4096)
        os.pwrite(fd, buf, 0)
    except OSError as e:
        return f"O_DIRECT write refused in {directory}: {e}"
    finally:
        os.close(fd)
        probe.unlink()
    return None


@pytest.mark.parametrize("flush_age", [1e9, 0.0])
def test_chunks_go_through_o_direct_where_the_file_system_has_it(tmp_path, monkeypatch, flush_age):
    """Where the test directory's file system takes O_DIRECT writes, the chunks are written with
    it (whole 4 KiB blocks at block offsets), _WRITE_BATCH bytes or more at a time but the last
    (one pwrite costs ~35 us of CPU whatever its size), or each chunk at once when the last
    write is _FLUSH_AGE old (here 0); and the bag is still rosbags' bytes."""
    why_not = _direct_io_supported(tmp_path)
    if why_not is not None:
        pytest.skip(why_not)
    monkeypatch.setattr(direct_file, "_FLUSH_AGE", flush_age)
    writes, chunks = [], []
    write_chunk = bag_writer.ChunkWriter._write

    def pwritev(fd, buffers, offset):
        assert os.O_DIRECT & fcntl.fcntl(fd, fcntl.F_GETFL)      # the O_DIRECT descriptor
        assert all(len(b) % 4096 == 0 for b in buffers)
        writes.append((offset, sum(len(b) for b in buffers)))
        return os.pwritev(fd, buffers, offset)

    def count_chunks(self, *args):
        chunks.append(len(writes))
        return write_chunk(self, *args)
    monkeypatch.setattr(direct_file, "_pwritev", pwritev)
    monkeypatch.setattr(bag_writer.ChunkWriter, "_write", count_chunks)
    seq = _sequence()[:1200]
    direct = _write_sequence(tmp_path / "direct" / "bag", seq, None)
    monkeypatch.undo()
    assert direct == _write_sequence(tmp_path / "rosbags" / "bag", seq, None, fast=False)
    assert all(offset % 4096 == 0 and n % 4096 == 0 for offset, n in writes)
    # the direct writes cover the file but for its last partial block (and the summary), in order
    assert writes[0][0] == 0 and all(a + n == b for (a, n), (b, _) in zip(writes, writes[1:]))
    assert writes[-1][0] + writes[-1][1] > len(direct[0]) - (64 << 10)
    assert len(chunks) >= 8
    if flush_age:
        assert len(writes) >= 2 and all(n >= direct_file.WRITE_BATCH - 4096 for _, n in writes[:-1])
    else:              # each chunk written before the next comes
        assert chunks == list(range(len(chunks)))


def test_staged_chunks_reach_the_file_after_the_flush_age_without_a_new_chunk(tmp_path, monkeypatch):
    """A recording that stops producing chunks (paused, or slow) still gets its staged chunks
    written with O_DIRECT once they are _FLUSH_AGE old: a crash then loses at most the pending
    chunk and about _FLUSH_AGE of staged ones, not up to _WRITE_BATCH."""
    why_not = _direct_io_supported(tmp_path)
    if why_not is not None:
        pytest.skip(why_not)
    monkeypatch.setattr(direct_file, "_FLUSH_AGE", 1e9)     # staged, not written...
    written, staged = threading.Event(), threading.Event()
    write_chunk = bag_writer.ChunkWriter._write

    def pwritev(fd, buffers, offset):
        written.set()
        return os.pwritev(fd, buffers, offset)

    def stage(self, *args):
        write_chunk(self, *args)
        staged.set()
    monkeypatch.setattr(direct_file, "_pwritev", pwritev)
    monkeypatch.setattr(bag_writer.ChunkWriter, "_write", stage)
    bag = BagTransport(tmp_path / "bag")
    pub = bag.advertise("/cam", m.IMAGE, qos.SENSOR)
    image = m.image(1.0, "cam", np.zeros((480, 640, 3), np.uint8))   # 0.9 MB: a chunk every two
    for k in range(2):
        bag.publish(pub, image, k)
    assert staged.wait(30)
    direct = bag._chunk_writer._direct
    assert not written.is_set() and direct.fill > 1 << 20
    monkeypatch.setattr(direct_file, "_FLUSH_AGE", 0.0)     # ...until they are that old, with no new chunk
    assert written.wait(30)
    for _ in range(3000):             # (the staging buffer keeps the last partial block)
        if direct.fill < 4096:
            break
        time.sleep(0.01)
    assert direct.fill < 4096
    bag.close()
    from rosbags.highlevel import AnyReader
    with AnyReader([tmp_path / "bag"]) as reader:
        assert [raw for _, _, raw in reader.messages()] == [image, image]


@pytest.mark.parametrize("mode", ["as-is", "no-direct-open"])
def test_a_failing_disk_is_one_clear_error_naming_the_bag(tmp_path, monkeypatch, mode):
    """A chunk write that fails (here: no space left) on the writer thread is raised to the
    recording thread, at the next chunk or at close, as one OSError that names the bag: with
    O_DIRECT writes and with buffered ones."""
    path = tmp_path / "bag"

    def full(*args):
        raise OSError(errno.ENOSPC, "No space left on device")
    if mode == "no-direct-open":
        monkeypatch.setattr(direct_file, "_open_direct", _refuse_direct_open)
    monkeypatch.setattr(direct_file, "_pwritev", full)
    bag = BagTransport(path)
    pub = bag.advertise("/cam", m.IMAGE, qos.SENSOR)
    bag._storage.bio.write = full
    image = m.image(1.0, "cam", np.zeros((480, 640, 3), np.uint8))   # 0.9 MB: a chunk every two
    with pytest.raises(OSError, match=f"writing the bag {path}: .*No space left on device"):
        for k in range(8):
            bag.publish(pub, image, k)
        bag.close()


def test_a_stalled_disk_holds_the_recording_back_and_loses_nothing(tmp_path, monkeypatch):
    """While the disk takes no writes, at most _QUEUED chunks wait in memory: the recording
    thread is held at the next full chunk (not let to fill the memory), and once the disk
    takes writes again every message is in the bag, in order."""
    from rosbags.highlevel import AnyReader
    monkeypatch.setattr(bag_writer, "_QUEUED", 2)
    stalled, release = threading.Event(), threading.Event()
    write = bag_writer.ChunkWriter._write

    def stalled_write(self, *args):
        stalled.set()
        release.wait(30)
        return write(self, *args)
    monkeypatch.setattr(bag_writer.ChunkWriter, "_write", stalled_write)
    bag = BagTransport(tmp_path / "bag")
    pub = bag.advertise("/cam", m.IMAGE, qos.SENSOR)
    images = [m.image(1.0, "cam", np.full((480, 640, 3), k, np.uint8)) for k in range(12)]  # a chunk every two
    published = []

    def record():
        for k, image in enumerate(images):
            bag.publish(pub, image, k)
            published.append(k)
    recorder = threading.Thread(target=record)
    recorder.start()
    assert stalled.wait(30)
    recorder.join(0.5)         # it would finish in well under that if nothing held it back
    held = len(published)
    try:
        assert recorder.is_alive() and held < len(images)
        # one chunk in the writer, _QUEUED waiting, the recorder in the put of the next
        assert held == 2 * (1 + 2 + 1) - 1
    finally:
        release.set()
        recorder.join(30)
    bag.close()
    assert published == list(range(12))
    with AnyReader([tmp_path / "bag"]) as reader:
        assert [raw for _, _, raw in reader.messages()] == images


class _SlowLock:
    """A lock that waits a moment before it is taken: the other thread runs meanwhile."""

    def __init__(self):
        self._lock = threading.Lock()

    def __enter__(self):
        time.sleep(0.0005)
        self._lock.acquire()

    def __exit__(self, *exc):
        self._lock.release()


def test_two_threads_publishing_lose_nothing(tmp_path):
    """The publisher thread and the physics thread (a description or /tf_static after a spawn)
    may publish at once, each closing chunks: every message is in the bag, whole."""
    from rosbags.highlevel import AnyReader
    bag = BagTransport(tmp_path / "bag")
    bag._lock = _SlowLock()
    pubs = [bag.advertise(f"/t{k}", m.STRING, qos.SENSOR) for k in range(2)]
    payload = [m.string(f"{k}" * 20000) for k in range(2)]     # a chunk every ~50 messages

    def publish(k):
        for i in range(300):
            bag.publish_many([(pubs[k], payload[k], i)])
    threads = [threading.Thread(target=publish, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    bag.close()
    with AnyReader([tmp_path / "bag"]) as reader:
        got = [(c.topic, raw) for c, _, raw in reader.messages()]
    for k in range(2):
        assert [raw for topic, raw in got if topic == f"/t{k}"] == [payload[k]] * 300


def _record_world(path, config, steps, lane, events=None):
    """Step the bundled world for `steps` with a Bridge recording into a bag at `path`, with
    or without the Lane; events: {step: f(sim, bridge)} called after that many steps. Returns
    ({topic: [(log time, message bytes)]} read back with mcap, the bridge)."""
    import warnings

    from mcap.reader import make_reader

    from mbsim_ros.ros.bridge import Bridge
    from mbsim_ros.run.config import load_config
    from mbsim_ros.run import build_simulation
    from mbsim_ros.run.world import load_world
    config = load_config(None, config)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        models, _ = load_world(config)
    sim = build_simulation(models, config)
    transport = BagTransport(path)
    if not lane:
        transport.lane = lambda *args: None
    bridge = Bridge(sim, transport, config)
    bridge.start()
    assert (bridge.lane is not None) == lane
    for k in range(steps):
        if k in (events or {}):
            events[k](sim, bridge)
        sim.step()
        bridge.on_step(sim)
    transport.close()
    out = {}
    with open(next(path.glob("*.mcap")), "rb") as f:
        for _, channel, message in make_reader(f).iter_messages(log_time_order=False):
            out.setdefault(channel.topic, []).append((message.log_time, bytes(message.data)))
    return out, bridge


@pytest.mark.parametrize("merge_imu", [False, True])
def test_the_lane_records_what_publishing_records(tmp_path, merge_imu):
    """The bundled world recorded with the Lane (the clock, joint_states, /tf and kinematic sensors
    filled and recorded by one compiled call a step) and without it (every message filled by
    its template and published): on every topic the same messages, byte for byte, with the
    same log times. The accelerometer has noise (its values come from the noise model, not the
    sense kernel), a force sensor a delay (published as before, outside the lane), the cameras
    and the range sensor are outside the lane; merged, the accelerometer and gyro are one Imu."""
    config = {"real_time_factor": 0.0, "joint_state_rate": 1000.0, "tf_rate": 100.0, "merge_imu": merge_imu,
              "sensors": {"WaistAccelSensor": {"noise": {"stddev": 0.05, "bias_stddev": 0.1}},
                          "LeftAnkleForceSensor": {"delay": 0.003}}}
    got, bridge = _record_world(tmp_path / "lane", config, 150, lane=True)
    want, _ = _record_world(tmp_path / "publish", config, 150, lane=False)
    assert got == want
    in_lane = {h.topic for h in bridge.lane.handles}
    assert in_lane == ({"/clock", "/SR1/joint_states", "/tf", "/SR1/RightAnkleForceSensor"}
                       | ({"/SR1/WAIST_imu"} if merge_imu else {"/SR1/WaistAccelSensor", "/SR1/WaistGyro"}))
    assert len(got["/SR1/joint_states"]) == 151 and len(got["/SR1/LeftAnkleForceSensor"]) == 148   # stamps 0-147 ms: 3 ms old by 150
    assert len(got["/tf"]) == 16                                  # 0, 10, ..., 150 ms
    assert len(got["/SR1/LeftCamera/image_raw"]) >= 4 and len(got["/SR1/ChestRange"]) >= 2
    stats = bridge.transport.stats()
    assert all(stats[topic]["messages"] == len(got[topic]) for topic in got)


def test_each_delayed_reading_is_published_at_the_step_it_becomes_visible(tmp_path):
    """A delayed sensor outside the lane (a force sensor sampling at 100 Hz with a 3 ms delay)
    has each reading published at the very step its delay ends, not at a later sample."""
    published = []

    def spy(sim, bridge):
        bag, handle = bridge.transport, bridge.pubs["LeftAnkleForceSensor"]
        publish_many = bag.publish_many

        def recorded(batch):
            published.extend((sim.t, ns) for h, _, ns in batch if h is handle)
            publish_many(batch)
        bag.publish_many = recorded
    config = {"real_time_factor": 0.0, "sensors": {"LeftAnkleForceSensor": {"rate": 100.0, "delay": 0.003}}}
    _record_world(tmp_path / "bag", config, 100, lane=True, events={0: spy})
    assert [round(t * 1e3, 6) for t, _ in published] == [3.0 + 10 * k for k in range(10)]
    assert all(t - ns * 1e-9 == pytest.approx(0.003, abs=1e-9) for t, ns in published)


def test_a_reading_from_another_thread_is_published_at_the_next_step(tmp_path):
    """A reading pushed from another thread (as the render thread pushes frames) between two
    steps where nothing else of the devices outside the lane is due is published at the next
    step: on_step skips its look at those devices only while none of them got a reading."""
    from mbsim_ros.sensors import Reading
    published = []

    def push(sim, bridge):
        bag, handle = bridge.transport, bridge.pubs["ChestRange"]
        publish_many = bag.publish_many

        def recorded(batch):
            published.extend((round(sim.t * 1e3, 6), ns) for h, _, ns in batch if h is handle)
            publish_many(batch)
        bag.publish_many = recorded
        dev = sim.devices["ChestRange"]
        scan = Reading(0.0495, dev.latest.frame, dev.latest.values.copy())
        pusher = threading.Thread(target=dev.push, args=(scan,))
        pusher.start()
        pusher.join()
    _record_world(tmp_path / "bag", {"real_time_factor": 0.0}, 60, lane=True, events={50: push})
    assert published == [(51.0, 49_500_000)]      # the 10 Hz scans are at 0 and 100 ms

def test_diagnostics_name_every_sensor_also_those_the_lane_records(tmp_path):
    """/diagnostics has a status per sensor with its newest reading's stamp, for the sensors
    the lane records (their readings never pass through publishing) as for the others."""
    config = {"real_time_factor": 0.0, "joint_state_rate": 1000.0, "diagnostics_rate": 100.0}
    got, bridge = _record_world(tmp_path / "lane", config, 150, lane=True)
    last = m.decode(got["/diagnostics"][-1][1], m.DIAGNOSTIC_ARRAY)      # at t = 0.15 s
    stamps = {s.name: float(next(v.value for v in s.values if v.key == "stamp")) for s in last.status
              if s.name.startswith("mbsim: ") and s.name != "mbsim: simulation"}
    assert set(stamps) == {f"mbsim: {name}" for name in bridge.sim.devices}
    assert "/SR1/WaistGyro" in {h.topic for h in bridge.lane.handles}

    def newest(topic, typename):       # the stamp of the newest message on topic in the bag, s
        return m.stamp_seconds(m.decode(got[topic][-1][1], typename).header.stamp)
    assert stamps["mbsim: WaistGyro"] == pytest.approx(newest("/SR1/WaistGyro", m.IMU), abs=1e-6)     # (printed %.6f)
    assert stamps["mbsim: WaistGyro"] == pytest.approx(0.149, abs=1e-6)
    assert stamps["mbsim: LeftCamera"] == pytest.approx(newest("/SR1/LeftCamera/image_raw", m.IMAGE), abs=1e-6)


def test_the_lane_follows_a_spawned_and_deleted_model(tmp_path):
    """A robot spawned into the recording and deleted again: its kinematic sensors join the
    lane at the spawn (a new lane for the new world) and leave it at the delete, and the bag
    holds the same messages on every topic as one recorded without a lane."""
    import mbsim_ros as mb
    robot = mb.load_model(Path(__file__).resolve().parents[2] / "mbsim_ros" / "data" / "models" / "SR1.wrl")
    lanes = []

    def spawn(sim, bridge):
        sim.add_model(robot, "robot2", ((1.5, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0)))
        bridge.on_world_changed(sim)
        lanes.append(bridge.lane and {h.topic for h in bridge.lane.handles})

    def delete(sim, bridge):
        sim.remove_model("robot2")
        bridge.on_world_changed(sim)
        lanes.append(bridge.lane and {h.topic for h in bridge.lane.handles})
    config = {"real_time_factor": 0.0, "joint_state_rate": 1000.0}
    events = {40: spawn, 80: delete}
    got, _ = _record_world(tmp_path / "lane", config, 120, lane=True, events=events)
    spawned = {"/SR1/robot2/WaistGyro", "/SR1/robot2/WaistAccelSensor", "/SR1/robot2/LeftAnkleForceSensor",
               "/SR1/robot2/RightAnkleForceSensor"}
    assert spawned <= lanes[0] and not spawned & lanes[1]
    want, _ = _record_world(tmp_path / "publish", config, 120, lane=False, events=events)
    assert got == want
    assert len(got["/SR1/robot2/WaistGyro"]) == 40                       # samples at steps 41-80
    names = [m.TYPESTORE.deserialize_cdr(data, m.JOINT_STATE).name for _, data in got["/SR1/joint_states"]]
    assert "robot2/RLEG_KNEE" in names[60] and "robot2/RLEG_KNEE" not in names[-1]


def test_a_namespaced_robots_joint_states_are_published_beside_the_lane(tmp_path):
    """A robot spawned with a namespace has a joint_states of its own there, which on_step
    builds in Python at the joint_states rate while the lane records the rest (on_step leaves
    the steps where the lane recorded everything at the lane's call): the bag holds the same
    messages as one recorded without a lane, the namespaced joint_states at every step."""
    import mbsim_ros as mb
    robot = mb.load_model(Path(__file__).resolve().parents[2] / "mbsim_ros" / "data" / "models" / "SR1.wrl")

    def spawn(sim, bridge):
        sim.add_model(robot, "robot2", ((1.5, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0)))
        bridge.namespaces["robot2"] = "/fleet/robot2"
        bridge.on_world_changed(sim)
    config = {"real_time_factor": 0.0, "joint_state_rate": 1000.0, "diagnostics_rate": 50.0}
    got, bridge = _record_world(tmp_path / "lane", config, 60, lane=True, events={20: spawn})
    want, _ = _record_world(tmp_path / "publish", config, 60, lane=False, events={20: spawn})
    assert bridge.lane is not None and got == want
    assert len(got["/fleet/robot2/joint_states"]) == 40 and len(got["/diagnostics"]) == 4     # steps 21-60; 0-60 ms


def test_only_uint8_arrays_starting_on_a_block_count_as_block_aligned():
    """direct_file.block_aligned, which decides what the writer hands to the disk from its own memory:
    a 1-D C-contiguous uint8 array starting at a 4096-byte boundary, writable or read-only;
    not the same memory one byte further, as another dtype or shape, or as a memoryview."""
    from mbsim_ros.sensors.optical import page_aligned_empty
    pixels = page_aligned_empty(3 * 4096, np.uint8)
    read_only = pixels.view()
    read_only.setflags(write=False)
    assert direct_file.block_aligned(pixels) and direct_file.block_aligned(read_only)
    assert direct_file.block_aligned(pixels[4096:]) and direct_file.block_aligned(read_only[8192:])
    for other in (pixels[1:], read_only[1:], pixels.view(np.uint16), pixels.reshape(3, 4096), pixels[::2],
                  memoryview(pixels), bytes(pixels)):
        assert not direct_file.block_aligned(other)


def test_the_staging_buffer_is_faulted_in_when_the_bag_opens(tmp_path):
    """The bag's O_DIRECT staging buffer (huge pages) is faulted in when the bag opens, before
    the recording starts: its first writes come from the writer thread holding the interpreter,
    and a huge page's first write (all 2 MiB faulted in at once) stalled the physics thread
    ~4 ms at rtf 1 (bench/node.py). The first direct write takes that very buffer."""
    from proc_maps import mapping
    why_not = _direct_io_supported(tmp_path)
    if why_not is not None:
        pytest.skip(why_not)
    with BagTransport(tmp_path / "bag") as bag:
        staging = bag._chunk_writer._staging
        address = np.frombuffer(staging, np.uint8).ctypes.data
        assert mapping(address)["Rss"] >= len(staging) // 1024
        bag.publish(bag.advertise("/text", m.STRING, qos.SENSOR), m.string("x" * 2_000_000), 1)
        deadline = time.monotonic() + 10
        while bag._chunk_writer._direct is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert np.frombuffer(bag._chunk_writer._direct.buf, np.uint8).ctypes.data == address


def test_the_streaming_copy_copies_every_byte_at_every_alignment():
    """bag_kernels.stream_copy (non-temporal stores for the 32-byte aligned middle, memcpy for the
    ends) writes exactly the source's bytes at the offset and nothing around them: at every
    destination alignment, for lengths shorter than the unaligned head, around one vector and
    large, from a writable array and from bytes (a read-only buffer); an offset out of range is
    an error, not a write past the buffer."""
    rng = np.random.default_rng(5)
    for length in (0, 1, 5, 31, 32, 33, 63, 64, 65, 1000, 70_001):
        source = rng.integers(0, 256, length, dtype=np.uint8)
        for src in (source, np.frombuffer(source.tobytes(), np.uint8)):
            for at in range(0, 40, 3):
                dst = np.full(length + 128, 0xA5, np.uint8)
                expected = dst.copy()
                expected[at:at + length] = source
                bag_kernels.stream_copy(dst, at, src)
                assert np.array_equal(dst, expected), (length, at)
    with pytest.raises(IndexError):
        bag_kernels.stream_copy(np.zeros(10, np.uint8), 5, np.zeros(6, np.uint8))


def _top_level_records(data):
    """[(opcode, offset, content)] of an MCAP file's records after the leading magic, up to the
    footer."""
    out, at = [], 8
    while True:
        op, length = data[at], int.from_bytes(data[at + 1:at + 9], "little")
        out.append((op, at, data[at + 9:at + 9 + length]))
        at += 9 + length
        if op == 2:
            return out


@pytest.mark.parametrize("short_writes", [False, True])
def test_block_aligned_images_go_to_the_disk_from_where_they_were_rendered(tmp_path, monkeypatch, short_writes):
    """With O_DIRECT, an image whose pixels are a page-aligned array (as the cameras render them,
    sensors/optical.page_aligned_empty) of _BIG_PART bytes or more is written from that memory,
    not copied: its chunk is
    cut before it and padded (a record of opcode _PADDING) so that the pixels start at a block
    offset of the file. The bag then holds the same messages as rosbags' Writer writes, read
    through the index (rosbags, mcap's seeking reader) and by scanning the records (mcap's
    non-seeking reader, rosbags' scan); every chunk has its ChunkIndex and every pixel array
    was handed to pwritev as itself. Also when the disk takes fewer bytes a call than given
    (short_writes): the rest goes in the next call."""
    from mcap.reader import NonSeekingReader, SeekingReader
    from rosbags.highlevel import AnyReader
    from mbsim_ros.sensors.optical import page_aligned_empty
    why_not = _direct_io_supported(tmp_path)
    if why_not is not None:
        pytest.skip(why_not)
    rng = np.random.default_rng(11)
    seq, pixels = [], []
    for k in range(120):
        t = 2.0 + k * 1e-3
        seq.append(("/imu", m.IMU, m.imu(t, "imu_link", rng.normal(size=3), rng.normal(size=3)), t))
        if k % 10 == 0:        # two cameras' color and depth, as the bridge hands them over: header and pixels
            for topic, shape, dtype in (("/a/color", (240, 320, 3), np.uint8), ("/a/depth", (240, 320), np.float32),
                                        ("/b/color", (120, 160, 3), np.uint8), ("/b/depth", (120, 160), np.float32)):
                image = page_aligned_empty(shape, dtype)
                image[...] = rng.integers(0, 255, shape)
                assert image.ctypes.data % 4096 == 0
                tmpl = templates.ImageTemplate("cam", *shape[:2], *m.image_encoding(image))
                parts = tmpl.parts(m.to_nanoseconds(t), image)
                pixels.append(parts[1])
                seq.append((topic, m.IMAGE, parts, t))
    addresses = set()

    def pwritev(fd, buffers, offset):
        for b in buffers:
            addresses.add(np.frombuffer(b, np.uint8).ctypes.data)
        if short_writes:                       # at most two blocks a call (from page-aligned memory)
            head = b"".join(buffers)[:8192]
            buffers = [mmap.mmap(-1, len(head))]
            buffers[0][:] = head
        return os.pwritev(fd, buffers, offset)
    monkeypatch.setattr(direct_file, "_pwritev", pwritev)
    paths = {}
    for fast in (True, False):
        paths[fast] = tmp_path / str(fast) / "bag"
        with BagTransport(paths[fast]) as bag:
            if not fast:
                bag._storage = None            # every message through rosbags' Writer.write
            pubs = {}
            for topic, typename, data, t in seq:
                if topic not in pubs:
                    pubs[topic] = bag.advertise(topic, typename, qos.SENSOR)
                bag.publish_many([(pubs[topic], data, m.to_nanoseconds(t))])
    big = [p for p in pixels if p.nbytes >= direct_file.BIG_PART]    # (/b/color's 57600 bytes are copied)
    assert 0 < len(big) < len(pixels)
    if not short_writes:
        assert all(p.ctypes.data in addresses for p in big)    # written from where they are
    data = next(paths[True].glob("*.mcap")).read_bytes()
    records = _top_level_records(data)
    padding = [k for k, (op, _, _) in enumerate(records) if op == bag_kernels._PADDING]
    chunks = [(at, content) for op, at, content in records if op == 6]
    assert padding and all(records[k + 1][0] == 6 for k in padding)
    sizes = {p.nbytes for p in big}
    images = 0
    for at, content in chunks:         # every image's pixels (the end of its message) at a block offset
        assert content[28:32] == bytes(4)          # no compression
        inner = at + 9 + 40
        while inner < at + 9 + len(content):
            op, length = data[inner], int.from_bytes(data[inner + 1:inner + 9], "little")
            if op == 5 and length > direct_file.BIG_PART:
                end = inner + 9 + length
                size = next(s for s in sizes if int.from_bytes(data[end - s - 4:end - s], "little") == s)
                assert (end - size) % 4096 == 0
                images += 1
            inner += 9 + length
    assert images == len(big)
    with open(next(paths[True].glob("*.mcap")), "rb") as f:
        summary = SeekingReader(f).get_summary()
    assert summary.statistics.chunk_count == len(chunks) == len(summary.chunk_indexes)
    assert sorted(ci.chunk_start_offset for ci in summary.chunk_indexes) == [at for at, _ in chunks]

    def messages(path):
        with AnyReader([path]) as reader:
            indexed = [(c.topic, t, bytes(raw)) for c, t, raw in reader.messages()]
        mcap_file = next(path.glob("*.mcap"))
        with open(mcap_file, "rb") as f:
            seeking = [(ch.topic, msg.log_time, msg.data) for _, ch, msg in SeekingReader(f).iter_messages()]
        with open(mcap_file, "rb") as f:
            scanned = [(ch.topic, msg.log_time, msg.data) for _, ch, msg in NonSeekingReader(f).iter_messages()]
        return indexed, seeking, scanned
    want = messages(paths[False])[0]
    assert len(want) == len(seq)
    for got in messages(paths[True]):
        assert sorted(got) == sorted(want)


def test_the_summarys_chunk_indexes_wait_on_disk_not_in_memory(tmp_path):
    """An hour's recording writes ~100k chunks, each with a ChunkIndex for the summary: kept in
    rosbags' list they grew the RSS ~40 MB an hour. 20000 records of 300 bytes (6 MB) through
    SpilledRecords take less than 200 kB of Python memory, and come back in order, as written,
    for rosbags' write_record (tell() is the length)."""
    import io
    import tracemalloc
    spill = bag_writer.SpilledRecords(tmp_path)
    rng = np.random.default_rng(0)
    records = [rng.integers(0, 256, 300 + k % 7, np.uint8).tobytes() for k in range(20000)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for data in records:
            rec = io.BytesIO()
            rec.write(data)
            spill.append(rec)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 200_000, f"{grown} bytes kept for 20000 chunk indexes"
    assert len(spill) == 20000
    back = list(spill)
    assert [r.tell() for r in back] == [len(d) for d in records]
    assert [bytes(r.getbuffer()) for r in back] == records
    assert not list(tmp_path.iterdir()), "the temporary file has no name in the bag's folder"
    spill.close()


def test_lane_buffers_of_a_burst_go_back_to_the_system(tmp_path, monkeypatch):
    """A disk that was behind leaves many chunks queued, each with its lane buffer; once they are
    written the bag keeps LANE_BUFFERS_KEPT of them for the next chunks, not all (kept, a run's
    memory would step up at each burst and stay there)."""
    from mbsim_ros.ros.bag import LANE_BUFFERS_KEPT
    release = threading.Event()
    write = bag_writer.ChunkWriter._write

    def stalled_write(self, *args):
        release.wait(60)
        return write(self, *args)
    monkeypatch.setattr(bag_writer.ChunkWriter, "_write", stalled_write)
    queued = []

    def let_go(sim, bridge):
        queued.append(len(bridge.transport._chunk_writer._queue))
        release.set()
    got, bridge = _record_world(tmp_path / "bag", {"real_time_factor": 0.0, "joint_state_rate": 1000.0}, 400,
                                lane=True, events={399: let_go})
    assert queued[0] >= 2 * LANE_BUFFERS_KEPT                 # a burst: that many lane buffers in flight
    assert len(bridge.transport._free) <= LANE_BUFFERS_KEPT
    assert len(got["/SR1/joint_states"]) == 401               # and nothing lost (t = 0 to 0.4 s)
