"""The one ROS 2 message layer: plain Python/numpy data in, serialized CDR bytes out.

Every builder returns the bytes ``bytes(TYPESTORE.serialize_cdr(msg, typename))`` gives: the
4-byte encapsulation header ``00 01 00 00`` followed by little-endian CDR (XCDR1), which is what
ROS 2 puts on the wire and into rosbag2 files. (tf_message packs its CDR directly and image /
point_cloud splice their bulk data into the typestore's serialization of the rest, for speed; the
tests check their bytes against the typestore's; the node's periodic messages come from the
preallocated templates of ros/templates.py, checked the same way.) The bytes go unchanged to whichever transport is active (rclpy, live DDS,
rosbag2 MCAP). The wire layout of every type here is the same in Humble and Jazzy.

Times are simulation seconds (float) turned into builtin_interfaces/Time by `to_sec_nanosec`.
Bulk data (images, depth, ranges, joint vectors) goes through as numpy arrays, never Python lists.
"""
from __future__ import annotations

import math
import re
import struct
from pathlib import Path
from typing import NamedTuple

import numpy as np
from rosbags.typesys import Stores, get_types_from_msg, get_typestore

TYPESTORE = get_typestore(Stores.ROS2_JAZZY)

# Interface packages a ROS distribution may lack (simulation_interfaces), from the definitions
# shipped in mbsim_ros/data/interfaces/<package>/{msg,srv,action}: the same files CI builds the
# rosidl package from.
INTERFACES = Path(__file__).resolve().parent.parent / "data" / "interfaces"


def interface_definitions(root=INTERFACES) -> dict:
    """{"pkg/msg/Name": definition} of every msg, srv and action under root, with services as
    their _Request / _Response messages and actions as the messages rosidl makes of them (Goal,
    Result, Feedback; SendGoal and GetResult requests and responses; FeedbackMessage), which is
    what goes on the wire and into a bag."""
    out = {}
    for path in sorted(root.glob("*/*/*")):
        package, kind, name = path.parts[-3], path.parts[-2], path.stem
        parts = [p.strip() + "\n" for p in re.split(r"^---\s*$", path.read_text(), flags=re.M)]
        base = f"{package}/{kind}/{name}"
        if kind == "msg" and len(parts) == 1:
            out[base] = parts[0]
        elif kind == "srv" and len(parts) == 2:
            out[base + "_Request"], out[base + "_Response"] = parts
        elif kind == "action" and len(parts) == 3:
            out[base + "_Goal"], out[base + "_Result"], out[base + "_Feedback"] = parts
            uuid = "unique_identifier_msgs/UUID goal_id\n"
            out[base + "_SendGoal_Request"] = uuid + f"{base}_Goal goal\n"
            out[base + "_SendGoal_Response"] = "bool accepted\nbuiltin_interfaces/Time stamp\n"
            out[base + "_GetResult_Request"] = uuid
            out[base + "_GetResult_Response"] = f"int8 status\n{base}_Result result\n"
            out[base + "_FeedbackMessage"] = uuid + f"{base}_Feedback feedback\n"
        else:
            raise ValueError(f"{path}: expected a .msg, a .srv with one '---' or an .action with two")
    return out


_BUILTIN = {"bool", "byte", "char", "float32", "float64", "int8", "uint8", "int16", "uint16", "int32",
            "uint32", "int64", "uint64", "string", "wstring"}


def _register_interfaces():
    """Into TYPESTORE. rosbags resolves a bare type name against the parent of the type being
    parsed (srv/ and action/ types would look for simulation_interfaces/action/Result) and files
    services under pkg/srv/msg/: bare names are qualified with their package first, and service
    types are registered under their rosidl names (pkg/srv/Name_Request)."""
    types = {}
    for typename, text in interface_definitions().items():
        package = typename.split("/")[0]
        text = re.sub(r"^([A-Za-z]\w*)(?=(\[\S*\])?\s)",
                      lambda m: m.group(1) if m.group(1) in _BUILTIN else f"{package}/{m.group(1)}",
                      text, flags=re.M)
        for name, parsed in get_types_from_msg(text, typename).items():
            types[name.replace("/srv/msg/", "/srv/")] = parsed
    TYPESTORE.register(types)


_register_interfaces()

# Type names (rosbags / rosbag2 spelling; the DDS spelling is derived from these).
IMU = "sensor_msgs/msg/Imu"
WRENCH_STAMPED = "geometry_msgs/msg/WrenchStamped"
LASER_SCAN = "sensor_msgs/msg/LaserScan"
IMAGE = "sensor_msgs/msg/Image"
CAMERA_INFO = "sensor_msgs/msg/CameraInfo"
POINT_CLOUD2 = "sensor_msgs/msg/PointCloud2"
JOINT_STATE = "sensor_msgs/msg/JointState"
TF_MESSAGE = "tf2_msgs/msg/TFMessage"
CLOCK = "rosgraph_msgs/msg/Clock"
STRING = "std_msgs/msg/String"
DIAGNOSTIC_ARRAY = "diagnostic_msgs/msg/DiagnosticArray"
FLOAT64_MULTI_ARRAY = "std_msgs/msg/Float64MultiArray"
# every type the bridge and the device bridges publish or subscribe (rclpy needs each one's
# Python message package: transport_choice checks them)
TYPES = (IMU, WRENCH_STAMPED, LASER_SCAN, IMAGE, CAMERA_INFO, POINT_CLOUD2, JOINT_STATE, TF_MESSAGE,
         CLOCK, STRING, DIAGNOSTIC_ARRAY, FLOAT64_MULTI_ARRAY)

_T = TYPESTORE.types
_Time = _T["builtin_interfaces/msg/Time"]
_Header = _T["std_msgs/msg/Header"]
_Vector3 = _T["geometry_msgs/msg/Vector3"]
_Quaternion = _T["geometry_msgs/msg/Quaternion"]
_Transform = _T["geometry_msgs/msg/Transform"]
_TransformStamped = _T["geometry_msgs/msg/TransformStamped"]
_Wrench = _T["geometry_msgs/msg/Wrench"]
_PointField = _T["sensor_msgs/msg/PointField"]
_RegionOfInterest = _T["sensor_msgs/msg/RegionOfInterest"]
_serialize = TYPESTORE.serialize_cdr

_F64 = np.dtype("<f8")
_F32 = np.dtype("<f4")
_NO_DATA = np.array([-1.0, 0, 0, 0, 0, 0, 0, 0, 0], dtype=_F64)  # covariance[0] = -1: "no estimate"
_PLUMB_BOB_D = np.zeros(5, dtype=_F64)
_IDENTITY9 = np.eye(3, dtype=_F64).reshape(9)
_EMPTY_F64 = np.zeros(0, dtype=_F64)
_EMPTY_F32 = np.zeros(0, dtype=_F32)
_EMPTY_U8 = np.zeros(0, dtype=np.uint8)
_POINT_XYZ = [_PointField(name=n, offset=4 * i, datatype=_PointField.FLOAT32, count=1)
              for i, n in enumerate("xyz")]
# a lidar point as velodyne/ouster drivers lay it out: x y z intensity float32, ring uint16, 2
# bytes of padding keeping every point 4-byte aligned
LIDAR_POINT = np.dtype({"names": ["x", "y", "z", "intensity", "ring"],
                        "formats": ["<f4", "<f4", "<f4", "<f4", "<u2"],
                        "offsets": [0, 4, 8, 12, 16], "itemsize": 20})
_POINT_XYZIR = _POINT_XYZ + [_PointField(name="intensity", offset=12, datatype=_PointField.FLOAT32, count=1),
                             _PointField(name="ring", offset=16, datatype=_PointField.UINT16, count=1)]

# (dtype kind, item size, channels) -> encoding, for the arrays `image` accepts
_ENCODINGS = {
    ("u", 1, 3): "rgb8",
    ("u", 1, 4): "rgba8",
    ("u", 1, 1): "mono8",
    ("u", 2, 1): "16UC1",
    ("f", 4, 1): "32FC1",
}


def _cdr(msg, typename: str) -> bytes:
    return bytes(_serialize(msg, typename))


# ---------------------------------------------------------------------------------------------
# time

def to_sec_nanosec(t: float) -> tuple[int, int]:
    """Seconds (float) -> (sec, nanosec), nanosec in [0, 1e9), rounded to the nearest nanosecond.

    The whole seconds are split off before scaling, so large times (wall clock, ~1.7e9 s) keep
    sub-microsecond resolution; 0.9999999999 s rounds up to (1, 0), never (0, 1000000000).
    Negative times follow builtin_interfaces: -0.25 s is (-1, 750000000).
    """
    t = float(t)
    if not math.isfinite(t):
        raise ValueError(f"time stamp must be finite, got {t}")
    sec = math.floor(t)
    nanosec = int(round((t - sec) * 1e9))
    if nanosec >= 1_000_000_000:
        sec += 1
        nanosec -= 1_000_000_000
    return int(sec), nanosec


def to_nanoseconds(t: float) -> int:
    """Seconds (float) -> integer nanoseconds, with the rounding of `to_sec_nanosec`."""
    sec, nanosec = to_sec_nanosec(t)
    return sec * 1_000_000_000 + nanosec


def time_msg(t: float):
    """builtin_interfaces/Time for `t` seconds."""
    sec, nanosec = to_sec_nanosec(t)
    return _Time(sec=sec, nanosec=nanosec)


def header(stamp: float, frame: str):
    return _Header(stamp=time_msg(stamp), frame_id=frame)


# ---------------------------------------------------------------------------------------------
# sensors

def _covariance(variances) -> np.ndarray:
    cov = np.zeros(9, dtype=_F64)
    cov[[0, 4, 8]] = np.asarray(variances, dtype=_F64).reshape(3)
    return cov


def _vector3(v):
    x, y, z = (float(c) for c in v)
    return _Vector3(x=x, y=y, z=z)


def imu(stamp: float, frame: str, accel=None, gyro=None,
        accel_variance=(0.0, 0.0, 0.0), gyro_variance=(0.0, 0.0, 0.0),
        orientation=None, orientation_variance=(0.0, 0.0, 0.0)) -> bytes:
    """sensor_msgs/Imu. accel: proper acceleration (m/s^2), gyro: angular velocity (rad/s), both in
    `frame`; orientation: optional quaternion (x, y, z, w).

    REP 145 / Imu.msg: a quantity without an estimate has covariance[0] = -1 (and zeros). Without
    an orientation the quaternion is (0, 0, 0, 1), ROS 2's Quaternion default and a valid rotation
    (an all-zero quaternion makes tools that ignore the -1 marker fail to normalize it).
    The covariance diagonals are the given variances (row-major 3x3, indices 0, 4, 8).
    """
    if orientation is None:
        q, q_cov = _Quaternion(x=0.0, y=0.0, z=0.0, w=1.0), _NO_DATA.copy()
    else:
        x, y, z, w = (float(c) for c in orientation)
        q, q_cov = _Quaternion(x=x, y=y, z=z, w=w), _covariance(orientation_variance)
    if gyro is None:
        w_vec, w_cov = _Vector3(x=0.0, y=0.0, z=0.0), _NO_DATA.copy()
    else:
        w_vec, w_cov = _vector3(gyro), _covariance(gyro_variance)
    if accel is None:
        a_vec, a_cov = _Vector3(x=0.0, y=0.0, z=0.0), _NO_DATA.copy()
    else:
        a_vec, a_cov = _vector3(accel), _covariance(accel_variance)
    msg = _T[IMU](header=header(stamp, frame), orientation=q, orientation_covariance=q_cov,
                  angular_velocity=w_vec, angular_velocity_covariance=w_cov,
                  linear_acceleration=a_vec, linear_acceleration_covariance=a_cov)
    return _cdr(msg, IMU)


def wrench(stamp: float, frame: str, values6) -> bytes:
    """geometry_msgs/WrenchStamped from (fx, fy, fz, tx, ty, tz) in N and N m."""
    v = np.asarray(values6, dtype=_F64).reshape(6)
    msg = _T[WRENCH_STAMPED](header=header(stamp, frame),
                             wrench=_Wrench(force=_vector3(v[:3]), torque=_vector3(v[3:])))
    return _cdr(msg, WRENCH_STAMPED)


def laser_scan(stamp: float, frame: str, ranges, angle_min: float, angle_increment: float,
               angle_max: float, range_min: float, range_max: float, scan_time: float,
               time_increment: float = 0.0, intensities=None) -> bytes:
    """sensor_msgs/LaserScan. ranges in metres (REP 117: +inf no return, -inf too close, NaN
    invalid); angle_max is the angle of the last ray, angle_min + (n - 1) * angle_increment."""
    r = np.ascontiguousarray(ranges, dtype=_F32).reshape(-1)
    inten = _EMPTY_F32 if intensities is None else np.ascontiguousarray(intensities, dtype=_F32).reshape(-1)
    msg = _T[LASER_SCAN](header=header(stamp, frame), angle_min=float(angle_min),
                         angle_max=float(angle_max), angle_increment=float(angle_increment),
                         time_increment=float(time_increment), scan_time=float(scan_time),
                         range_min=float(range_min), range_max=float(range_max),
                         ranges=r, intensities=inten)
    return _cdr(msg, LASER_SCAN)


def image(stamp: float, frame: str, array, encoding: str | None = None) -> bytes:
    """sensor_msgs/Image from a numpy array: (H, W, 3) uint8 -> rgb8, (H, W, 4) uint8 -> rgba8,
    (H, W) uint8 -> mono8, (H, W) float32 -> 32FC1 (metres), (H, W) uint16 -> 16UC1 (mm).
    `encoding` overrides the name only (e.g. "bgr8" for a (H, W, 3) uint8 array in BGR order).
    Data are little-endian (is_bigendian = 0), rows packed: step = W * bytes per pixel."""
    a = np.asarray(array)
    name, pixel_bytes = image_encoding(a)
    a = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<"))
    height, width = a.shape[:2]
    msg = _T[IMAGE](header=header(stamp, frame), height=height, width=width,
                    encoding=encoding or name, is_bigendian=0,
                    step=width * pixel_bytes, data=_EMPTY_U8)
    return _with_data(msg, IMAGE, a, tail=0)


def image_encoding(array) -> tuple[str, int]:
    """(encoding, bytes per pixel) of an image array, as `image` names it."""
    a = np.asarray(array)
    if a.ndim == 2:
        channels = 1
    elif a.ndim == 3:
        channels = a.shape[2]
    else:
        raise ValueError(f"image must be (H, W) or (H, W, C), got shape {a.shape}")
    name = _ENCODINGS.get((a.dtype.kind, a.dtype.itemsize, channels))
    if name is None:
        raise ValueError(f"no image encoding for dtype {a.dtype} with {channels} channel(s)")
    return name, channels * a.dtype.itemsize


def camera_info(stamp: float, frame: str, width: int, height: int,
                fx: float, fy: float, cx: float, cy: float) -> bytes:
    """sensor_msgs/CameraInfo of an ideal pinhole camera: plumb_bob with five zero D,
    K = [fx 0 cx; 0 fy cy; 0 0 1], R = I, P = [fx 0 cx 0; 0 fy cy 0; 0 0 1 0]."""
    k = np.array([fx, 0.0, cx, 0.0, fy, cy, 0.0, 0.0, 1.0], dtype=_F64)
    p = np.array([fx, 0.0, cx, 0.0, 0.0, fy, cy, 0.0, 0.0, 0.0, 1.0, 0.0], dtype=_F64)
    msg = _T[CAMERA_INFO](header=header(stamp, frame), height=int(height), width=int(width),
                          distortion_model="plumb_bob", d=_PLUMB_BOB_D.copy(), k=k,
                          r=_IDENTITY9.copy(), p=p, binning_x=0, binning_y=0,
                          roi=_RegionOfInterest(x_offset=0, y_offset=0, height=0, width=0,
                                                do_rectify=False))
    return _cdr(msg, CAMERA_INFO)


def depth_points(depth, fx: float, fy: float, cx: float, cy: float) -> np.ndarray:
    """(H, W, 3) float32 points in the optical frame (z forward, x right, y down) of a depth
    image in metres: pixel (u, v) at depth d -> ((u - cx) d / fx, (v - cy) d / fy, d).
    Pixels without a valid depth (not finite, or <= 0) give NaN points."""
    d = np.asarray(depth, dtype=_F32)
    if d.ndim != 2:
        raise ValueError(f"depth image must be (H, W), got shape {d.shape}")
    height, width = d.shape
    pts = np.empty((height, width, 3), dtype=_F32)
    z = pts[..., 2]
    np.copyto(z, d)
    np.copyto(z, np.float32(np.nan), where=~((d > 0) & (d < np.inf)))  # NaN fails both tests
    np.multiply(z, ((np.arange(width, dtype=_F32) - np.float32(cx)) / np.float32(fx))[None, :],
                out=pts[..., 0])
    np.multiply(z, ((np.arange(height, dtype=_F32) - np.float32(cy)) / np.float32(fy))[:, None],
                out=pts[..., 1])
    return pts


def _with_data(msg, typename: str, data: np.ndarray, tail: int) -> bytes:
    """Serialize `msg`, given with an empty uint8[] `data` that is followed by `tail` bytes of
    byte-sized fields (Image: 0, PointCloud2: 1), with `data` spliced in: one copy of the bulk
    data instead of three (the bytes are the typestore's serialization of the full message)."""
    template = bytes(_serialize(msg, typename))
    cut = len(template) - tail - 4                      # where the empty sequence's length is
    if template[cut:cut + 4] != b"\0\0\0\0":
        raise RuntimeError(f"unexpected {typename} layout")
    return b"".join((template[:cut], struct.pack("<I", data.nbytes), data.reshape(-1).view(np.uint8),
                     template[cut + 4:]))


def point_cloud(stamp: float, frame: str, depth, fx: float, fy: float, cx: float, cy: float) -> bytes:
    """sensor_msgs/PointCloud2 (x, y, z float32, point_step 12) from a 32FC1 depth image.

    Organized (height = H, width = W, is_dense = False) with NaN points where the depth is not
    valid, as depth_image_proc's point_cloud_xyz produces, so that a point keeps its pixel."""
    pts = depth_points(depth, fx, fy, cx, cy)
    height, width = pts.shape[:2]
    msg = _T[POINT_CLOUD2](header=header(stamp, frame), height=height, width=width,
                           fields=_POINT_XYZ, is_bigendian=False,
                           point_step=12, row_step=12 * width,
                           data=_EMPTY_U8, is_dense=False)
    return _with_data(msg, POINT_CLOUD2, pts, tail=1)


def lidar_points(ranges, directions, intensities=None) -> np.ndarray:
    """(rings, columns) LIDAR_POINT records of a range sensor's sample: ranges (rings * columns)
    ring by ring, bottom first; directions (rings, columns, 3) unit rays in the laser frame.
    A ray without a finite return (REP 117: +inf nothing, -inf too close, NaN invalid) gives a NaN
    point that keeps its place in the organized cloud; its intensity is 0."""
    rings, columns = directions.shape[:2]
    r = np.asarray(ranges, dtype=np.float32).reshape(rings, columns)
    pts = np.zeros((rings, columns), LIDAR_POINT)
    valid = np.isfinite(r)
    r_valid = np.where(valid, r, np.float32(0))       # inf * 0 (a ray along an axis) would warn
    for k, axis in enumerate("xyz"):
        pts[axis] = np.where(valid, r_valid * directions[..., k], np.float32(np.nan))
    if intensities is not None:
        pts["intensity"] = np.where(valid, np.asarray(intensities, np.float32).reshape(rings, columns), 0)
    pts["ring"] = np.arange(rings, dtype=np.uint16)[:, None]
    return pts


def lidar_cloud(stamp: float, frame: str, ranges, directions, intensities=None) -> bytes:
    """sensor_msgs/PointCloud2 of a lidar sample (lidar_points): organized (height = rings,
    width = columns, is_dense = False), fields x, y, z, intensity (float32) and ring (uint16)."""
    pts = lidar_points(ranges, directions, intensities)
    height, width = pts.shape
    msg = _T[POINT_CLOUD2](header=header(stamp, frame), height=height, width=width,
                           fields=_POINT_XYZIR, is_bigendian=False,
                           point_step=LIDAR_POINT.itemsize, row_step=LIDAR_POINT.itemsize * width,
                           data=_EMPTY_U8, is_dense=False)
    return _with_data(msg, POINT_CLOUD2, pts, tail=1)


# ---------------------------------------------------------------------------------------------
# robot state

def _f64_vector(values) -> np.ndarray:
    if values is None:
        return _EMPTY_F64
    return np.ascontiguousarray(values, dtype=_F64).reshape(-1)


def joint_state(stamp: float, names, position=None, velocity=None, effort=None) -> bytes:
    """sensor_msgs/JointState (rad or m, rad/s or m/s, N m or N); None leaves a vector empty, as
    JointState allows."""
    msg = _T[JOINT_STATE](header=header(stamp, ""), name=list(names), position=_f64_vector(position),
                          velocity=_f64_vector(velocity), effort=_f64_vector(effort))
    return _cdr(msg, JOINT_STATE)


_QUAT_DIAG = np.array([3, 4, 9, 14])  # the entry of candidate k that is 4 q_k^2 (its largest)


def quaternion_from_matrix(rotation) -> np.ndarray:
    """Unit quaternions (x, y, z, w), w >= 0, of rotation matrices (..., 3, 3).

    Shepperd's method: the component with the largest magnitude is taken from the diagonal and the
    others from the off-diagonal sums and differences, so the result stays accurate near 180
    degrees (where w -> 0); the result is normalized, which also absorbs small non-orthogonality.
    Elementwise only (no matrix products), so a rotation gives the same bits in any batch."""
    r = np.asarray(rotation, dtype=_F64)
    batch = r.shape[:-2]
    r00, r01, r02, r10, r11, r12, r20, r21, r22 = r.reshape(-1, 9).T
    d0 = 1.0 + r00 + r11 + r22
    d1 = 1.0 + r00 - r11 - r22
    d2 = 1.0 - r00 + r11 - r22
    d3 = 1.0 - r00 - r11 + r22
    s01, s02, s12 = r01 + r10, r02 + r20, r12 + r21
    a21, a02, a10 = r21 - r12, r02 - r20, r10 - r01
    # candidate (x, y, z, w) * 4 q_k for the choice k of the largest component (w, x, y, z)
    cand = np.stack([a21, a02, a10, d0, d1, s01, s02, a21,
                     s01, d2, s12, a02, s02, s12, d3, a10], axis=1)
    k = np.argmax(cand[:, _QUAT_DIAG], axis=1)
    q = cand.reshape(-1, 4, 4)[np.arange(len(k)), k]
    q /= np.sqrt((q * q).sum(axis=1))[:, None]
    q[q[:, 3] < 0] *= -1.0
    return q.reshape(batch + (4,))


_pack_stamp_len = struct.Struct("<iII").pack   # sec, nanosec, length of frame_id (with NUL)
_pack_len = struct.Struct("<I").pack
_pack_7d = struct.Struct("<7d").pack


def tf_message(transforms) -> bytes:
    """tf2_msgs/TFMessage from (stamp, parent_frame, child_frame, T) with T a 4x4 homogeneous
    transform of the child frame in the parent frame (numpy).

    Packed directly (CDR: 4-byte aligned lengths and ints, 8-byte aligned doubles, offsets from
    the end of the encapsulation header); the bytes equal the typestore's serialization (tested),
    at a fraction of the cost of building 6 message objects per transform."""
    transforms = list(transforms)
    out = [b"\x00\x01\x00\x00", _pack_len(len(transforms))]
    if not transforms:
        return b"".join(out)
    mats = np.asarray([t[3] for t in transforms], dtype=_F64).reshape(-1, 4, 4)
    values = np.concatenate([mats[:, :3, 3], quaternion_from_matrix(mats[:, :3, :3])], axis=1).tolist()
    off = 4                                                  # payload bytes so far
    for (stamp, parent, child, _), v in zip(transforms, values):
        sec, nanosec = to_sec_nanosec(stamp)
        fid = parent.encode() + b"\0"
        cid = child.encode() + b"\0"
        pad1 = -(off + 12 + len(fid)) % 4
        at = off + 12 + len(fid) + pad1 + 4 + len(cid)
        pad2 = -at % 8
        out += [_pack_stamp_len(sec, nanosec, len(fid)), fid, b"\0" * pad1, _pack_len(len(cid)), cid,
                b"\0" * pad2, _pack_7d(*v)]
        off = at + pad2 + 56
    return b"".join(out)


def clock(t: float) -> bytes:
    """rosgraph_msgs/Clock for simulation time `t` seconds."""
    return _cdr(_T[CLOCK](clock=time_msg(t)), CLOCK)


def string(text: str) -> bytes:
    """std_msgs/String (e.g. /robot_description)."""
    return _cdr(_T[STRING](data=str(text)), STRING)


_COUNT = struct.Struct("<I")


def _put_string(out: bytearray, text: str) -> None:
    """A CDR string after what `out` (the 4-byte encapsulation header, then the payload) holds:
    aligned to 4 from the payload's start, its uint32 length with the NUL, the UTF-8 bytes, NUL."""
    data = text.encode()
    out += b"\0" * (-len(out) % 4)        # len(out) - 4 is the payload offset: the same modulo 4
    out += _COUNT.pack(len(data) + 1)
    out += data
    out.append(0)


def diagnostics(stamp: float, statuses) -> bytes:
    """diagnostic_msgs/DiagnosticArray from (name, level, message, {key: value}) tuples;
    level 0 OK, 1 WARN, 2 ERROR, 3 STALE; values are converted with str(). Written field by
    field (the bytes of TYPESTORE.serialize_cdr, tested): it goes out every second on the
    publisher thread, where building rosbags' message objects and serializing them took 0.1-0.3
    ms of Python that competed with the physics thread for the GIL."""
    statuses = list(statuses)
    out = bytearray(b"\x00\x01\x00\x00")
    out += struct.pack("<iI", *to_sec_nanosec(stamp))
    _put_string(out, "")                                     # header.frame_id
    out += b"\0" * (-len(out) % 4)
    out += _COUNT.pack(len(statuses))
    for name, level, message, values in statuses:
        level = int(level)
        if not 0 <= level <= 3:
            raise ValueError(f"diagnostic level must be 0..3, got {level}")
        out.append(level)
        _put_string(out, str(name))
        _put_string(out, str(message))
        _put_string(out, "")                                 # hardware_id
        values = values or {}
        out += b"\0" * (-len(out) % 4)
        out += _COUNT.pack(len(values))
        for key, value in values.items():
            _put_string(out, str(key))
            _put_string(out, str(value))
    return bytes(out)


# ---------------------------------------------------------------------------------------------
# decoding (tests, and the inputs the node subscribes to)

def decode(data, typename: str):
    """The rosbags message object of serialized CDR `data` (with its 4-byte header)."""
    return TYPESTORE.deserialize_cdr(data, typename)


def stamp_seconds(time) -> float:
    """builtin_interfaces/Time -> float seconds."""
    return time.sec + time.nanosec * 1e-9


class JointCommand(NamedTuple):
    """A decoded sensor_msgs/JointState command; vectors may be empty (not commanded)."""
    stamp: float
    names: list
    position: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray


def decode_joint_state(data) -> JointCommand:
    """Decode a sensor_msgs/JointState (e.g. /joint_commands)."""
    m = decode(data, JOINT_STATE)
    return JointCommand(stamp_seconds(m.header.stamp), list(m.name),
                        np.array(m.position, dtype=np.float64), np.array(m.velocity, dtype=np.float64),
                        np.array(m.effort, dtype=np.float64))


def decode_float64_array(data) -> np.ndarray:
    """Decode a std_msgs/Float64MultiArray (e.g. /joint_efforts) into its data vector (the layout
    is ignored: the vector is taken in joint order)."""
    return np.array(decode(data, FLOAT64_MULTI_ARRAY).data, dtype=np.float64)


def float64_array(values) -> bytes:
    """std_msgs/Float64MultiArray with a 1-D layout (for tests and tools that send efforts)."""
    v = _f64_vector(values)
    dim = _T["std_msgs/msg/MultiArrayDimension"](label="", size=len(v), stride=len(v))
    layout = _T["std_msgs/msg/MultiArrayLayout"](dim=[dim], data_offset=0)
    return _cdr(_T[FLOAT64_MULTI_ARRAY](layout=layout, data=v), FLOAT64_MULTI_ARRAY)
