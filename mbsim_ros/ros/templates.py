"""Fixed-layout messages as preallocated CDR templates: the hot path of the message layer.

A topic's Imu, WrenchStamped, Clock, JointState, TFMessage, CameraInfo, LaserScan and Image
header have the same byte layout at every publication for a given world (the frame names, joint
names, ray and pixel counts do not change), so each template lays its message out once, with
every constant field written, and a publication only writes the stamp and the values in place
through numpy views at offsets computed here, then copies the buffer out as `bytes` (the
contract of every transport; an image goes to a transport that takes parts as its header's
bytes and the pixels, not joined: ImageTemplate.parts). No message object is built per publication. Stamps are integer
nanoseconds (`messages.to_nanoseconds`, the unit transports log in), so a publication converts
its time once.

The bytes equal `messages.TYPESTORE.serialize_cdr` of the same message content (the tests check
every template byte for byte against rosbags' serializer). CDR (XCDR1, little endian): a
primitive is aligned to its size counted from the end of the 4-byte encapsulation header; a
string is a uint32 length (with the NUL) and the bytes with the NUL; a sequence is a uint32
count and the elements, the first element aligned to its size (no padding when it is empty).

Templates are not thread-safe: each is filled and copied out by one thread at a time (the
publisher thread, or the physics thread when publishing inline).
"""
from __future__ import annotations

import struct

import numpy as np

from .._kernel_cache import kernel_cache

_HEADER = b"\x00\x01\x00\x00"     # CDR little endian, XCDR1


class _Layout:
    """Writes a CDR payload field by field and says where each field went (payload offsets)."""

    def __init__(self):
        self.out = bytearray()

    @property
    def pos(self) -> int:
        return len(self.out)

    def align(self, size: int) -> None:
        self.out += b"\0" * (-len(self.out) % size)

    def scalar(self, fmt: str, value) -> int:
        size = struct.calcsize(fmt)
        self.align(size)
        at = self.pos
        self.out += struct.pack(fmt, value)
        return at

    def time(self, sec: int = 0, nanosec: int = 0) -> int:
        at = self.scalar("<i", sec)
        self.scalar("<I", nanosec)
        return at

    def string(self, text: str) -> int:
        data = text.encode() + b"\0"
        at = self.scalar("<I", len(data))
        self.out += data
        return at

    def header(self, frame: str) -> int:
        """std_msgs/Header: returns the stamp's offset."""
        at = self.time()
        self.string(frame)
        return at

    def array(self, dtype, values) -> int:
        """A fixed-size array (no count): returns its first element's offset."""
        a = np.ascontiguousarray(values, dtype=np.dtype(dtype).newbyteorder("<")).reshape(-1)
        self.align(a.itemsize)
        at = self.pos
        self.out += a.tobytes()
        return at

    def sequence(self, dtype, values) -> int:
        """A sequence: the count, then the elements; returns the first element's offset (where
        it would be when empty)."""
        a = np.ascontiguousarray(values, dtype=np.dtype(dtype).newbyteorder("<")).reshape(-1)
        self.scalar("<I", len(a))
        if len(a):
            self.align(a.itemsize)
        at = self.pos
        self.out += a.tobytes()
        return at


_PACK_STAMP = struct.Struct("<iI").pack_into     # builtin_interfaces/Time: sec, nanosec
_PACK_3D = struct.Struct("<3d").pack_into
_PACK_6D = struct.Struct("<6d").pack_into


class Template:
    """A message laid out once: `buf` (a bytearray) holds the 4-byte header and the payload; the
    numpy views (i32, u32, f32, f64) over `buf` cover the payload from offset 0, so the element
    of a field at payload offset `o` is view[o // itemsize]. `stamp_at` is the header stamp's
    payload offset. Small fixed fields are written with struct.pack_into (cheaper than numpy
    for a few values), arrays through the views; the message leaves as bytes(buf)."""

    typename = ""

    def _finish(self, layout: _Layout) -> None:
        self.buf = bytearray(_HEADER + bytes(layout.out))
        self.size = n = len(self.buf)
        payload = n - 4
        self.i32 = np.frombuffer(self.buf, "<i4", payload // 4, 4)
        self.u32 = np.frombuffer(self.buf, "<u4", payload // 4, 4)
        self.f32 = np.frombuffer(self.buf, "<f4", payload // 4, 4)
        self.f64 = np.frombuffer(self.buf, "<f8", payload // 8, 4)

    def _stamp(self, at: int, ns: int) -> None:
        sec, nanosec = divmod(ns, 1_000_000_000)      # nanosec in [0, 1e9), as builtin_interfaces
        _PACK_STAMP(self.buf, 4 + at, sec, nanosec)

    def bytes(self) -> bytes:
        """The message as it stands."""
        return bytes(self.buf)


def _covariance(variances) -> np.ndarray:
    cov = np.zeros(9)
    cov[[0, 4, 8]] = np.asarray(variances, dtype=float).reshape(3)
    return cov


_NO_DATA = np.array([-1.0, 0, 0, 0, 0, 0, 0, 0, 0])   # covariance[0] = -1: "no estimate" (REP 145)
TF_WORK_SHAPE = (8, 4)     # tf_values' scratch: R, Rc (rows 0-5), pc (row 6), q (row 7)


class ImuTemplate(Template):
    """sensor_msgs/Imu of a frame, with accel and/or gyro (as messages.imu: a missing quantity
    is zero with covariance[0] = -1; no orientation, quaternion (0, 0, 0, 1))."""

    typename = "sensor_msgs/msg/Imu"

    def __init__(self, frame, accel=True, gyro=True, accel_variance=(0.0,) * 3, gyro_variance=(0.0,) * 3):
        lay = _Layout()
        self.stamp_at = lay.header(frame)
        values = np.zeros(37)                        # the rest of Imu is 37 float64 in a row
        values[3] = 1.0                              # orientation (0, 0, 0, 1)
        values[4:13] = _NO_DATA
        values[16:25] = _covariance(gyro_variance) if gyro else _NO_DATA
        values[28:37] = _covariance(accel_variance) if accel else _NO_DATA
        at = lay.array("f8", values)
        self._finish(lay)
        self.gyro_at = 4 + at + 13 * 8           # buffer offsets
        self.accel_at = 4 + at + 25 * 8
        self.has_accel, self.has_gyro = accel, gyro

    def fill(self, ns, accel=None, gyro=None) -> bytes:
        buf = self.buf
        sec, nanosec = divmod(ns, 1_000_000_000)
        _PACK_STAMP(buf, 4 + self.stamp_at, sec, nanosec)
        if accel is not None:
            _PACK_3D(buf, self.accel_at, accel[0], accel[1], accel[2])
        if gyro is not None:
            _PACK_3D(buf, self.gyro_at, gyro[0], gyro[1], gyro[2])
        return bytes(buf)


class WrenchTemplate(Template):
    """geometry_msgs/WrenchStamped of a frame: (fx, fy, fz, tx, ty, tz)."""

    typename = "geometry_msgs/msg/WrenchStamped"

    def __init__(self, frame):
        lay = _Layout()
        self.stamp_at = lay.header(frame)
        self.values_at = 4 + lay.array("f8", np.zeros(6))
        self._finish(lay)

    def fill(self, ns, values6) -> bytes:
        buf, v = self.buf, values6
        sec, nanosec = divmod(ns, 1_000_000_000)
        _PACK_STAMP(buf, 4 + self.stamp_at, sec, nanosec)
        _PACK_6D(buf, self.values_at, v[0], v[1], v[2], v[3], v[4], v[5])
        return bytes(buf)


class ClockTemplate(Template):
    """rosgraph_msgs/Clock."""

    typename = "rosgraph_msgs/msg/Clock"

    def __init__(self):
        lay = _Layout()
        self.stamp_at = lay.time()
        self._finish(lay)

    def fill(self, ns) -> bytes:
        sec, nanosec = divmod(ns, 1_000_000_000)
        _PACK_STAMP(self.buf, 4, sec, nanosec)
        return bytes(self.buf)


class JointStateTemplate(Template):
    """sensor_msgs/JointState with fixed names; position, velocity, effort each either one value
    per name or empty (False), as JointState allows; frame_id "" as messages.joint_state."""

    typename = "sensor_msgs/msg/JointState"

    def __init__(self, names, position=True, velocity=True, effort=True, frame=""):
        lay = _Layout()
        self.stamp_at = lay.header(frame)
        names = list(names)
        lay.scalar("<I", len(names))
        for n in names:
            lay.string(n)
        n = len(names)
        at = [lay.sequence("f8", np.zeros(n if on else 0)) for on in (position, velocity, effort)]
        self._finish(lay)
        views = [self.f64[a >> 3:(a >> 3) + n] if on else None
                 for a, on in zip(at, (position, velocity, effort))]
        self.position, self.velocity, self.effort = views
        self.position_at, self.velocity_at, self.effort_at = (4 + a for a in at)    # buffer offsets

    def fill(self, ns, position=None, velocity=None, effort=None) -> bytes:
        self._stamp(self.stamp_at, ns)
        for view, values in ((self.position, position), (self.velocity, velocity), (self.effort, effort)):
            if view is not None:
                view[:] = values
        return bytes(self.buf)


class CameraInfoTemplate(Template):
    """sensor_msgs/CameraInfo of an ideal pinhole camera (as messages.camera_info): only the
    stamp changes."""

    typename = "sensor_msgs/msg/CameraInfo"

    def __init__(self, frame, width, height, fx, fy, cx, cy):
        lay = _Layout()
        self.stamp_at = lay.header(frame)
        lay.scalar("<I", int(height))
        lay.scalar("<I", int(width))
        lay.string("plumb_bob")
        lay.sequence("f8", np.zeros(5))
        lay.array("f8", [fx, 0.0, cx, 0.0, fy, cy, 0.0, 0.0, 1.0])
        lay.array("f8", np.eye(3).reshape(9))
        lay.array("f8", [fx, 0.0, cx, 0.0, 0.0, fy, cy, 0.0, 0.0, 0.0, 1.0, 0.0])
        for _ in range(6):                 # binning_x, binning_y, roi x_offset, y_offset, height, width
            lay.scalar("<I", 0)
        lay.scalar("<B", 0)                # roi.do_rectify
        self._finish(lay)

    def fill(self, ns) -> bytes:
        self._stamp(self.stamp_at, ns)
        return bytes(self.buf)


class LaserScanTemplate(Template):
    """sensor_msgs/LaserScan with n ranges and no intensities (as messages.laser_scan)."""

    typename = "sensor_msgs/msg/LaserScan"

    def __init__(self, frame, n, angle_min, angle_increment, angle_max, range_min, range_max,
                 scan_time, time_increment=0.0):
        lay = _Layout()
        self.stamp_at = lay.header(frame)
        lay.array("f4", [angle_min, angle_max, angle_increment, time_increment, scan_time,
                         range_min, range_max])
        at = lay.sequence("f4", np.zeros(int(n)))
        lay.sequence("f4", np.zeros(0))    # intensities
        self._finish(lay)
        self.ranges = self.f32[at >> 2:(at >> 2) + int(n)]

    def fill(self, ns, ranges) -> bytes:
        self._stamp(self.stamp_at, ns)
        self.ranges[:] = ranges            # float64 -> float32 as np.float32 rounds
        return bytes(self.buf)


class ImageTemplate(Template):
    """The header of a sensor_msgs/Image of fixed size and encoding: fill() writes the stamp and
    appends the pixels (one copy of the bulk data, as messages.image)."""

    typename = "sensor_msgs/msg/Image"

    def __init__(self, frame, height, width, encoding, bytes_per_pixel):
        lay = _Layout()
        self.stamp_at = lay.header(frame)
        lay.scalar("<I", int(height))
        lay.scalar("<I", int(width))
        lay.string(encoding)
        lay.scalar("<B", 0)                               # is_bigendian
        lay.scalar("<I", int(width) * int(bytes_per_pixel))
        self.nbytes = int(height) * int(width) * int(bytes_per_pixel)
        lay.scalar("<I", self.nbytes)                     # data's count; the pixels follow
        self._finish(lay)

    def fill(self, ns, pixels) -> bytes:
        """pixels: a C-contiguous little-endian array of exactly the image's bytes."""
        return b"".join(self.parts(ns, pixels))

    def parts(self, ns, pixels) -> tuple:
        """The message as (the header's bytes, the pixels' bytes as they are), for a transport
        that takes parts (Transport.takes_parts): the pixels are not copied here, so they must
        not change afterwards (a rendered frame does not)."""
        if pixels.nbytes != self.nbytes:
            raise ValueError(f"image of {pixels.nbytes} bytes for a {self.nbytes}-byte template")
        self._stamp(self.stamp_at, ns)
        return bytes(self.buf), pixels.reshape(-1).view(np.uint8)


class TfTemplate(Template):
    """tf2_msgs/TFMessage of fixed (parent, child) frame pairs with one stamp. fill() takes the
    world poses of all links (R (nl, 3, 3), p (nl, 3)) and writes each edge's child pose in its
    parent with `tf_values` (numba), straight into the buffer."""

    typename = "tf2_msgs/msg/TFMessage"

    def __init__(self, edges):
        """edges: (parent frame, child frame) pairs."""
        lay = _Layout()
        lay.scalar("<I", len(edges))
        stamps, values = [], []
        for parent, child in edges:
            stamps.append(lay.header(parent) >> 2)
            lay.string(child)
            values.append(lay.array("f8", [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]) >> 3)
        self._finish(lay)
        self.stamp_index = np.array(stamps, dtype=np.int64)
        self.value_index = np.array(values, dtype=np.int64)
        self.tf_work = np.empty(TF_WORK_SHAPE)

    def fill_values(self, ns, values) -> bytes:
        """values: (n, 7) translation and quaternion (x, y, z, w) per edge."""
        sec, nanosec = divmod(ns, 1_000_000_000)
        self.i32[self.stamp_index] = sec
        self.u32[self.stamp_index + 1] = nanosec
        _write_rows(self.f64, self.value_index, np.asarray(values, dtype=np.float64))
        return bytes(self.buf)

    def fill(self, ns, link_R, link_p, parent, child, child_R, child_p) -> bytes:
        """parent, child: link index per edge (parent -1: the world); child_R, child_p: the edge's
        child frame in its child link (identity where the frame is the link's)."""
        sec, nanosec = divmod(ns, 1_000_000_000)
        self.i32[self.stamp_index] = sec
        self.u32[self.stamp_index + 1] = nanosec
        tf_values(link_R, link_p, parent, child, child_R, child_p, self.f64, self.value_index, self.tf_work)
        return bytes(self.buf)


def compile_tf_kernels():
    """Compile the TF and rate kernels (or load them from the cache) for the argument types they get: run
    in the warm-up (the bridge's WARM_UP_JOBS, mbsim warmup), before the first message and the clock."""
    due_rates(np.ones(1), np.zeros(1, np.int64), 0.0)
    one_R, one_p = np.zeros((1, 3, 3)), np.zeros((1, 3))
    TfTemplate([("world", "warm_up")]).fill(0, one_R, one_p, np.array([-1], dtype=np.int64),
                                            np.array([0], dtype=np.int64), one_R, one_p)


with kernel_cache("ros"):
    from .._kernel_cache import kernel

    @kernel()
    def due_rates(period, k, t):
        """Which periodic publications are due after the step that reached time t: bit i set
        when the i-th, due at k[i] * period[i] on the simulation clock, is; its k[i] then moves
        to the first multiple after t. One call a step for all of them (ros/bridge.py)."""
        mask = 0
        for i in range(len(period)):
            if t + 1e-9 >= k[i] * period[i]:
                k[i] = np.int64(np.floor(t / period[i] + 1e-9)) + 1
                mask |= 1 << i
        return mask

    @kernel()
    def _write_rows(out, at, values):
        for e in range(len(at)):
            for j in range(7):
                out[at[e] + j] = values[e, j]

    @kernel()
    def tf_values(link_R, link_p, parent, child, child_R, child_p, out, at, work):
        """For each edge e: the pose of (child link's pose * (child_R, child_p)) in the parent
        link's frame (the world for parent -1), written as (x, y, z, qx, qy, qz, qw) at out[at[e]:].
        The quaternion as messages.quaternion_from_matrix (Shepperd, normalized, w >= 0).
        work: scratch of TF_WORK_SHAPE."""
        R = work[0:3, 0:3]
        Rc = work[3:6, 0:3]
        pc = work[6, 0:3]
        q = work[7]
        for e in range(len(at)):
            c = child[e]
            for i in range(3):       # child frame in the world
                pc[i] = link_p[c, i]
                for j in range(3):
                    s = 0.0
                    for k in range(3):
                        s += link_R[c, i, k] * child_R[e, k, j]
                    Rc[i, j] = s
                    pc[i] += link_R[c, i, j] * child_p[e, j]
            o = at[e]
            b = parent[e]
            if b < 0:
                for i in range(3):
                    out[o + i] = pc[i]
                    for j in range(3):
                        R[i, j] = Rc[i, j]
            else:
                for i in range(3):   # R_b^T (pc - p_b), R_b^T Rc
                    s = 0.0
                    for k in range(3):
                        s += link_R[b, k, i] * (pc[k] - link_p[b, k])
                    out[o + i] = s
                    for j in range(3):
                        s = 0.0
                        for k in range(3):
                            s += link_R[b, k, i] * Rc[k, j]
                        R[i, j] = s
            d0 = 1.0 + R[0, 0] + R[1, 1] + R[2, 2]
            d1 = 1.0 + R[0, 0] - R[1, 1] - R[2, 2]
            d2 = 1.0 - R[0, 0] + R[1, 1] - R[2, 2]
            d3 = 1.0 - R[0, 0] - R[1, 1] + R[2, 2]
            s01, s02, s12 = R[0, 1] + R[1, 0], R[0, 2] + R[2, 0], R[1, 2] + R[2, 1]
            a21, a02, a10 = R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]
            if d0 >= d1 and d0 >= d2 and d0 >= d3:
                q[0], q[1], q[2], q[3] = a21, a02, a10, d0
            elif d1 >= d2 and d1 >= d3:
                q[0], q[1], q[2], q[3] = d1, s01, s02, a21
            elif d2 >= d3:
                q[0], q[1], q[2], q[3] = s01, d2, s12, a02
            else:
                q[0], q[1], q[2], q[3] = s02, s12, d3, a10
            n = np.sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
            sign = -1.0 if q[3] / n < 0 else 1.0
            for i in range(4):
                out[o + 3 + i] = sign * (q[i] / n)
