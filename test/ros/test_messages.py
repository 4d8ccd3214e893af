"""The message layer: every builder's bytes decode (rosbags' deserializer) to the values put in."""
import math

import numpy as np
import pytest
from conftest import subprocess_env

from mbsim_ros.ros import messages as m

CDR_LE_HEADER = b"\x00\x01\x00\x00"


def roundtrip(data, typename):
    assert isinstance(data, bytes)
    assert data[:4] == CDR_LE_HEADER
    msg = m.decode(data, typename)
    # the bytes are exactly the typestore's serialization of what they decode to
    assert bytes(m.TYPESTORE.serialize_cdr(msg, typename)) == data
    return msg


def stamp_of(msg):
    return msg.header.stamp.sec, msg.header.stamp.nanosec


# ---------------------------------------------------------------------------------------------
# stamps

@pytest.mark.parametrize("t, expected", [
    (0.0, (0, 0)),
    (1.5, (1, 500_000_000)),
    (0.9999999999, (1, 0)),            # rounds up across the second, never nanosec == 1e9
    (0.9999999994, (0, 999_999_999)),
    (2.0000000004, (2, 0)),
    (12.000000001, (12, 1)),
    (1e-9, (0, 1)),
    (-0.25, (-1, 750_000_000)),
    (-1e-10, (0, 0)),
    (1_700_000_000.5, (1_700_000_000, 500_000_000)),
])
def test_stamp_rounding(t, expected):
    sec, nanosec = m.to_sec_nanosec(t)
    assert (sec, nanosec) == expected
    assert 0 <= nanosec < 1_000_000_000
    assert m.to_nanoseconds(t) == sec * 1_000_000_000 + nanosec


def test_stamp_nanosec_never_overflows_on_a_dense_sweep():
    for k in range(-2000, 2000):
        sec, nanosec = m.to_sec_nanosec(k + 0.9999999995 + 1e-13 * k)
        assert 0 <= nanosec < 1_000_000_000


def test_stamp_rejects_non_finite():
    for bad in (math.nan, math.inf):
        with pytest.raises(ValueError):
            m.to_sec_nanosec(bad)


def test_clock():
    msg = roundtrip(m.clock(12.25), m.CLOCK)
    assert (msg.clock.sec, msg.clock.nanosec) == (12, 250_000_000)


# ---------------------------------------------------------------------------------------------
# IMU (REP 145)

def test_imu_values_and_covariances():
    msg = roundtrip(m.imu(3.5, "imu_link", accel=(0.1, -0.2, 9.81), gyro=(0.01, 0.02, -0.03),
                          accel_variance=(1e-4, 2e-4, 3e-4), gyro_variance=(1e-6, 2e-6, 3e-6)), m.IMU)
    assert stamp_of(msg) == (3, 500_000_000)
    assert msg.header.frame_id == "imu_link"
    a, w = msg.linear_acceleration, msg.angular_velocity
    assert (a.x, a.y, a.z) == (0.1, -0.2, 9.81)
    assert (w.x, w.y, w.z) == (0.01, 0.02, -0.03)
    np.testing.assert_array_equal(msg.linear_acceleration_covariance.reshape(3, 3),
                                  np.diag([1e-4, 2e-4, 3e-4]))
    np.testing.assert_array_equal(msg.angular_velocity_covariance.reshape(3, 3),
                                  np.diag([1e-6, 2e-6, 3e-6]))
    # no orientation estimate: covariance[0] = -1, the rest zero; quaternion (0, 0, 0, 1)
    assert msg.orientation_covariance[0] == -1.0
    assert not msg.orientation_covariance[1:].any()
    q = msg.orientation
    assert (q.x, q.y, q.z, q.w) == (0.0, 0.0, 0.0, 1.0)


def test_imu_missing_fields_are_marked():
    msg = roundtrip(m.imu(0.0, "imu", gyro=(1.0, 2.0, 3.0)), m.IMU)
    assert msg.linear_acceleration_covariance[0] == -1.0
    assert not msg.linear_acceleration_covariance[1:].any()
    assert msg.angular_velocity_covariance[0] == 0.0        # present, zero variance given
    msg = roundtrip(m.imu(0.0, "imu", accel=(0.0, 0.0, 9.8)), m.IMU)
    assert msg.angular_velocity_covariance[0] == -1.0
    assert msg.linear_acceleration_covariance[0] == 0.0


def test_imu_with_orientation():
    msg = roundtrip(m.imu(0.0, "imu", accel=(0, 0, 9.8), orientation=(0.0, 0.0, 0.6, 0.8),
                          orientation_variance=(0.1, 0.2, 0.3)), m.IMU)
    assert (msg.orientation.z, msg.orientation.w) == (0.6, 0.8)
    np.testing.assert_array_equal(msg.orientation_covariance.reshape(3, 3), np.diag([0.1, 0.2, 0.3]))


def test_wrench():
    msg = roundtrip(m.wrench(1.0, "lleg_force", [1.0, 2.0, 3.0, 0.4, 0.5, 0.6]), m.WRENCH_STAMPED)
    f, t = msg.wrench.force, msg.wrench.torque
    assert (f.x, f.y, f.z, t.x, t.y, t.z) == (1.0, 2.0, 3.0, 0.4, 0.5, 0.6)
    assert msg.header.frame_id == "lleg_force"


# ---------------------------------------------------------------------------------------------
# range and cameras

def test_laser_scan_fields():
    ranges = np.array([1.0, np.inf, -np.inf, np.nan, 2.5], dtype=np.float32)
    msg = roundtrip(m.laser_scan(2.0, "laser", ranges, angle_min=-0.5, angle_increment=0.25,
                                 angle_max=0.5, range_min=0.1, range_max=30.0, scan_time=0.1,
                                 intensities=[1, 2, 3, 4, 5]), m.LASER_SCAN)
    assert msg.header.frame_id == "laser"
    assert (msg.angle_min, msg.angle_increment, msg.angle_max) == pytest.approx((-0.5, 0.25, 0.5))
    assert msg.angle_min + (len(msg.ranges) - 1) * msg.angle_increment == pytest.approx(msg.angle_max)
    assert (msg.range_min, msg.range_max) == pytest.approx((0.1, 30.0))
    assert msg.scan_time == pytest.approx(0.1) and msg.time_increment == 0.0
    assert msg.ranges.dtype == np.float32
    np.testing.assert_array_equal(msg.ranges, ranges)          # inf, -inf, NaN kept (REP 117)
    np.testing.assert_array_equal(msg.intensities, [1, 2, 3, 4, 5])
    empty = roundtrip(m.laser_scan(0.0, "laser", [1.0], 0, 0.1, 0, 0.1, 1.0, 0.1), m.LASER_SCAN)
    assert len(empty.intensities) == 0


@pytest.mark.parametrize("shape, dtype, encoding, bpp", [
    ((4, 5, 3), np.uint8, "rgb8", 3),
    ((4, 5, 4), np.uint8, "rgba8", 4),
    ((4, 5), np.uint8, "mono8", 1),
    ((4, 5), np.float32, "32FC1", 4),
    ((4, 5), np.uint16, "16UC1", 2),
])
def test_image_encodings(shape, dtype, encoding, bpp):
    rng = np.random.default_rng(1)
    a = (rng.random(shape) * 1000).astype(dtype)
    msg = roundtrip(m.image(1.0, "cam_optical_frame", a), m.IMAGE)
    assert (msg.height, msg.width) == (4, 5)
    assert msg.encoding == encoding
    assert msg.is_bigendian == 0
    assert msg.step == 5 * bpp
    assert len(msg.data) == msg.step * msg.height
    np.testing.assert_array_equal(np.frombuffer(msg.data.tobytes(), dtype=np.dtype(dtype).newbyteorder("<"))
                                  .reshape(shape), a)


def test_image_accepts_views_and_big_endian():
    a = np.arange(6 * 8 * 3, dtype=np.uint8).reshape(6, 8, 3)[::2, ::2]  # non-contiguous view
    msg = roundtrip(m.image(0.0, "c", a), m.IMAGE)
    np.testing.assert_array_equal(msg.data.reshape(3, 4, 3), a)
    d = np.array([[1.5, 2.5]], dtype=">f4")
    msg = roundtrip(m.image(0.0, "c", d), m.IMAGE)
    np.testing.assert_array_equal(msg.data.view("<f4"), [1.5, 2.5])
    with pytest.raises(ValueError):
        m.image(0.0, "c", np.zeros((2, 2), dtype=np.float64))


def test_camera_info_matrices():
    msg = roundtrip(m.camera_info(0.5, "cam_optical_frame", 640, 480, 500.0, 501.0, 319.5, 239.5),
                    m.CAMERA_INFO)
    assert (msg.width, msg.height) == (640, 480)
    assert msg.distortion_model == "plumb_bob"
    np.testing.assert_array_equal(msg.d, np.zeros(5))
    np.testing.assert_array_equal(msg.k.reshape(3, 3), [[500, 0, 319.5], [0, 501, 239.5], [0, 0, 1]])
    np.testing.assert_array_equal(msg.r.reshape(3, 3), np.eye(3))
    np.testing.assert_array_equal(msg.p.reshape(3, 4), [[500, 0, 319.5, 0], [0, 501, 239.5, 0], [0, 0, 1, 0]])
    assert (msg.binning_x, msg.binning_y) == (0, 0)


def test_point_cloud_from_depth():
    fx, fy, cx, cy = 100.0, 110.0, 3.5, 2.0
    depth = np.full((5, 8), np.nan, dtype=np.float32)
    depth[0, 0] = 2.0
    depth[4, 7] = 0.5
    depth[2, 3] = 1.25
    depth[1, 1] = np.inf     # no return
    depth[1, 2] = 0.0        # no valid depth
    msg = roundtrip(m.point_cloud(1.0, "cam_optical_frame", depth, fx, fy, cx, cy), m.POINT_CLOUD2)
    assert (msg.height, msg.width) == (5, 8)          # organized
    assert [(f.name, f.offset, f.datatype, f.count) for f in msg.fields] == \
        [("x", 0, 7, 1), ("y", 4, 7, 1), ("z", 8, 7, 1)]
    assert msg.point_step == 12 and msg.row_step == 12 * 8
    assert msg.is_bigendian is False and msg.is_dense is False
    pts = np.frombuffer(msg.data.tobytes(), dtype="<f4").reshape(5, 8, 3)
    for (v, u) in [(0, 0), (4, 7), (2, 3)]:
        d = depth[v, u]
        np.testing.assert_allclose(pts[v, u], [(u - cx) * d / fx, (v - cy) * d / fy, d], rtol=1e-6)
    valid = np.isfinite(depth) & (depth > 0)
    assert np.isnan(pts[~valid]).all()
    assert np.isfinite(pts[valid]).all()


# ---------------------------------------------------------------------------------------------
# robot state

def test_joint_state():
    names = [f"j{i}" for i in range(30)]
    pos, vel, eff = np.linspace(-1, 1, 30), np.linspace(0, 3, 30), np.arange(30.0)
    msg = roundtrip(m.joint_state(7.125, names, pos, vel, eff), m.JOINT_STATE)
    assert stamp_of(msg) == (7, 125_000_000)
    assert msg.name == names
    np.testing.assert_array_equal(msg.position, pos)
    np.testing.assert_array_equal(msg.velocity, vel)
    np.testing.assert_array_equal(msg.effort, eff)
    msg = roundtrip(m.joint_state(0.0, ["a"], [1.0]), m.JOINT_STATE)
    assert len(msg.velocity) == 0 and len(msg.effort) == 0


def _random_rotations(rng, n):
    from scipy.spatial.transform import Rotation
    rots = list(Rotation.random(n, random_state=rng).as_matrix())
    # near and at 180 degrees, about random and about coordinate axes
    for axis in [rng.normal(size=3) for _ in range(20)] + list(np.eye(3)) + [np.array([1.0, 1.0, 0.0])]:
        axis = axis / np.linalg.norm(axis)
        for angle in (np.pi, np.pi - 1e-9, np.pi - 1e-6, np.pi - 1e-3, -np.pi + 1e-7, 1e-12, 0.0):
            rots.append(Rotation.from_rotvec(axis * angle).as_matrix())
    return np.array(rots)


def test_quaternion_from_matrix_matches_scipy():
    from scipy.spatial.transform import Rotation
    rng = np.random.default_rng(7)
    mats = _random_rotations(rng, 500)
    q = m.quaternion_from_matrix(mats)
    ref = Rotation.from_matrix(mats).as_quat()            # (x, y, z, w)
    ref[ref[:, 3] < 0] *= -1
    # same rotation: q == ref up to sign (sign is ambiguous only where w == 0)
    err = np.minimum(np.linalg.norm(q - ref, axis=1), np.linalg.norm(q + ref, axis=1))
    assert err.max() < 1e-9
    np.testing.assert_allclose(np.linalg.norm(q, axis=1), 1.0, atol=1e-12)
    assert (q[:, 3] >= 0).all()
    np.testing.assert_allclose(Rotation.from_quat(q).as_matrix(), mats, atol=1e-9)


def test_tf_message():
    from scipy.spatial.transform import Rotation
    rng = np.random.default_rng(3)
    mats = _random_rotations(rng, 30)[:40]
    transforms = []
    for i, r in enumerate(mats):
        T = np.eye(4)
        T[:3, :3] = r
        T[:3, 3] = rng.normal(size=3)
        transforms.append((10.0 + i * 0.001, f"link{i}", f"link{i + 1}", T))
    msg = roundtrip(m.tf_message(transforms), m.TF_MESSAGE)
    assert len(msg.transforms) == len(transforms)
    for (stamp, parent, child, T), ts in zip(transforms, msg.transforms):
        assert ts.header.frame_id == parent and ts.child_frame_id == child
        assert stamp_of(ts) == m.to_sec_nanosec(stamp)
        tr, rot = ts.transform.translation, ts.transform.rotation
        np.testing.assert_array_equal([tr.x, tr.y, tr.z], T[:3, 3])
        np.testing.assert_allclose(Rotation.from_quat([rot.x, rot.y, rot.z, rot.w]).as_matrix(),
                                   T[:3, :3], atol=1e-9)
    assert m.decode(m.tf_message([]), m.TF_MESSAGE).transforms == []


def test_tf_message_bytes_equal_the_typestore_serialization():
    """tf_message packs CDR itself: compare with rosbags for every string padding (frame name
    lengths 0..9, multi-byte UTF-8) and stamps that need rounding."""
    from scipy.spatial.transform import Rotation
    rng = np.random.default_rng(11)
    T = m.TYPESTORE.types
    names = ["", "a", "ab", "abc", "abcd", "abcde", "abcdef", "abcdefg", "abcdefgh", "abcdefghi", "é_link"]
    transforms, objs = [], []
    for i in range(30):
        M = np.eye(4)
        M[:3, :3] = Rotation.random(random_state=rng).as_matrix()
        M[:3, 3] = rng.normal(size=3)
        stamp = 5.0 + i * 0.3333333333
        parent, child = names[i % len(names)], names[(3 * i + 1) % len(names)]
        transforms.append((stamp, parent, child, M))
        x, y, z, w = m.quaternion_from_matrix(M[:3, :3])
        sec, nanosec = m.to_sec_nanosec(stamp)
        objs.append(T["geometry_msgs/msg/TransformStamped"](
            header=T["std_msgs/msg/Header"](stamp=T["builtin_interfaces/msg/Time"](sec=sec, nanosec=nanosec),
                                            frame_id=parent),
            child_frame_id=child,
            transform=T["geometry_msgs/msg/Transform"](
                translation=T["geometry_msgs/msg/Vector3"](x=M[0, 3], y=M[1, 3], z=M[2, 3]),
                rotation=T["geometry_msgs/msg/Quaternion"](x=x, y=y, z=z, w=w))))
    for n in range(len(transforms) + 1):
        expected = bytes(m.TYPESTORE.serialize_cdr(T[m.TF_MESSAGE](transforms=objs[:n]), m.TF_MESSAGE))
        assert m.tf_message(transforms[:n]) == expected


def test_string_and_diagnostics():
    urdf = '<robot name="r"><link name="base_link"/></robot>' * 50
    assert roundtrip(m.string(urdf), m.STRING).data == urdf
    msg = roundtrip(m.diagnostics(4.0, [("sim", 0, "ok", {"rtf": 0.98, "step": 12}),
                                        ("imu", 2, "saturated", {})]), m.DIAGNOSTIC_ARRAY)
    assert stamp_of(msg) == (4, 0)
    assert [(s.name, s.level, s.message) for s in msg.status] == [("sim", 0, "ok"), ("imu", 2, "saturated")]
    assert [(kv.key, kv.value) for kv in msg.status[0].values] == [("rtf", "0.98"), ("step", "12")]
    with pytest.raises(ValueError):
        m.diagnostics(0.0, [("x", 7, "", {})])
    # written field by field: every alignment after strings of each length mod 4, non-ASCII
    # text, empty arrays and maps, several stamps
    for k in range(9):
        statuses = [("s" * k, k % 4, "m" * (k // 2), {"k" * j: "v" * (k + j) for j in range(k % 3)}),
                    ("Zweiggelenk ü ✓", 1, "", None), ("", 3, "x" * k, {"": ""})][:1 + k % 3]
        msg = roundtrip(m.diagnostics(k * 0.3 - 1.0, statuses), m.DIAGNOSTIC_ARRAY)
        assert [(s.name, s.level, s.message, s.hardware_id, [(kv.key, kv.value) for kv in s.values])
                for s in msg.status] == [(n, lv, ms, "", list((v or {}).items())) for n, lv, ms, v in statuses]
        assert stamp_of(msg) == m.to_sec_nanosec(k * 0.3 - 1.0)
    assert roundtrip(m.diagnostics(0.0, []), m.DIAGNOSTIC_ARRAY).status == []


# ---------------------------------------------------------------------------------------------
# inputs

def test_decode_joint_command():
    cmd = m.decode_joint_state(m.joint_state(2.5, ["a", "b"], [0.1, 0.2], None, [3.0, 4.0]))
    assert cmd.stamp == 2.5 and cmd.names == ["a", "b"]
    np.testing.assert_array_equal(cmd.position, [0.1, 0.2])
    assert cmd.velocity.shape == (0,)
    np.testing.assert_array_equal(cmd.effort, [3.0, 4.0])


def test_decode_float64_array():
    np.testing.assert_array_equal(m.decode_float64_array(m.float64_array([1.0, -2.0, 3.5])), [1.0, -2.0, 3.5])
    # a message from another writer with a 2-D layout: the data vector is taken as it is
    T = m.TYPESTORE.types
    dims = [T["std_msgs/msg/MultiArrayDimension"](label="rows", size=2, stride=4),
            T["std_msgs/msg/MultiArrayDimension"](label="cols", size=2, stride=2)]
    msg = T[m.FLOAT64_MULTI_ARRAY](layout=T["std_msgs/msg/MultiArrayLayout"](dim=dims, data_offset=0),
                                   data=np.array([1.0, 2.0, 3.0, 4.0]))
    data = bytes(m.TYPESTORE.serialize_cdr(msg, m.FLOAT64_MULTI_ARRAY))
    np.testing.assert_array_equal(m.decode_float64_array(data), [1.0, 2.0, 3.0, 4.0])


def test_package_import_is_light():
    import subprocess
    import sys
    code = ("import sys, mbsim_ros.ros, mbsim_ros.ros.qos, mbsim_ros.ros.transport; "
            "bad = [k for k in ('rosbags', 'cyclonedds', 'rclpy') if k in sys.modules]; "
            "print(bad); sys.exit(1 if bad else 0)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env=subprocess_env())
    assert res.returncode == 0, res.stdout + res.stderr
