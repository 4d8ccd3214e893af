"""Helper process for test_dds.py: an independent ROS 2 DDS reader (and writer).

Uses cyclonedds and the hand-written types in ros_idl.py only (no project code). Configure it
like any cyclonedds program (CYCLONEDDS_URI); the domain id is an argument.

    python dds_subscriber.py --domain 123 --timeout 10 --count 3 \
        /robot_description:string:latched /joint_states:joint_state /imu:imu /image:image

prints READY once its readers exist, then one JSON line per received sample, then DONE when
every topic got --count samples, latched (transient local, depth 1) topics one (exit 0), or
TIMEOUT (exit 2).

    python dds_subscriber.py --domain 123 --timeout 10 --publish /joint_commands

instead publishes sensor_msgs/JointState samples (names a, b, c; position k, 2k, 3k for the k-th
sample) every 20 ms until killed or the timeout passes.
"""
import argparse
import json
import sys
import time

from cyclonedds.core import InstanceState, ReadCondition, SampleState, ViewState, WaitSet
from cyclonedds.domain import DomainParticipant
from cyclonedds.pub import DataWriter
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic
from cyclonedds.util import duration

import ros_idl


def summary(kind, s):
    """The JSON-able values the test checks."""
    if kind == "string":
        return {"data": s.data}
    h = {"stamp": [s.header.stamp.sec, s.header.stamp.nanosec], "frame_id": s.header.frame_id}
    if kind == "joint_state":
        return {**h, "name": list(s.name), "position": list(s.position),
                "velocity": list(s.velocity), "effort": list(s.effort)}
    if kind == "imu":
        a, w, q = s.linear_acceleration, s.angular_velocity, s.orientation
        return {**h, "accel": [a.x, a.y, a.z], "gyro": [w.x, w.y, w.z],
                "orientation": [q.x, q.y, q.z, q.w],
                "orientation_covariance": list(s.orientation_covariance),
                "accel_covariance": list(s.linear_acceleration_covariance)}
    if kind == "image":
        data = bytes(s.data)
        return {**h, "height": s.height, "width": s.width, "encoding": s.encoding,
                "step": s.step, "is_bigendian": s.is_bigendian, "size": len(data),
                "data_hex": data.hex()}
    raise ValueError(kind)


def emit(obj):
    print(json.dumps(obj) if not isinstance(obj, str) else obj, flush=True)


def subscribe(dp, specs, count, timeout):
    readers, need = [], {}
    ws = WaitSet(dp)
    for spec in specs:
        topic, kind, *flags = spec.split(":")
        latched = "latched" in flags
        qos = ros_idl.ros_qos(depth=1 if latched else 10, transient_local=latched)
        reader = DataReader(dp, Topic(dp, "rt" + topic, ros_idl.TYPES[kind]), qos=qos)
        ws.attach(ReadCondition(reader, SampleState.Any | ViewState.Any | InstanceState.Any))
        readers.append((topic, kind, reader))
        need[topic] = 1 if latched else count
    emit("READY")
    got = {topic: 0 for topic, _, _ in readers}
    deadline = time.monotonic() + timeout
    while any(got[t] < n for t, n in need.items()):
        left = deadline - time.monotonic()
        if left <= 0:
            emit({"timeout": got})
            emit("TIMEOUT")
            return 2
        ws.wait(duration(seconds=min(left, 0.2)))
        for topic, kind, reader in readers:
            for s in reader.take(N=100):
                if s.sample_info.valid_data:
                    got[topic] += 1
                    emit({"topic": topic, **summary(kind, s)})
    emit("DONE")
    return 0


def publish(dp, topic, timeout):
    writer = DataWriter(dp, Topic(dp, "rt" + topic, ros_idl.JointState), qos=ros_idl.ros_qos())
    emit("READY")
    deadline = time.monotonic() + timeout
    k = 0
    while time.monotonic() < deadline:
        k += 1
        writer.write(ros_idl.JointState(
            header=ros_idl.Header(stamp=ros_idl.Time(sec=k, nanosec=500), frame_id=""),
            name=["a", "b", "c"], position=[float(k), 2.0 * k, 3.0 * k], velocity=[], effort=[]))
        time.sleep(0.02)
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--domain", type=int, required=True)
    ap.add_argument("--timeout", type=float, default=10.0)
    ap.add_argument("--count", type=int, default=1)
    ap.add_argument("--publish", metavar="TOPIC")
    ap.add_argument("topics", nargs="*", metavar="TOPIC:KIND[:latched]")
    args = ap.parse_args(argv)
    dp = DomainParticipant(args.domain)
    if args.publish:
        return publish(dp, args.publish, args.timeout)
    return subscribe(dp, args.topics, args.count, args.timeout)


if __name__ == "__main__":
    sys.exit(main())
