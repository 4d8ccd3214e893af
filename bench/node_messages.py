"""Cost of one message of each kind the node publishes: build + serialize through message
objects (messages.*), the same bytes from the preallocated CDR template the node uses
(ros/templates.py: stamp and values written in place), and template + publish through live DDS
(no reader; one reader in another process on loopback) and into a rosbag2 MCAP file (plain and
zstd). Microseconds per message, best batch.

    python bench/node_messages.py            # prints the table
"""
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from common import print_table, time_per_call  # noqa: E402

from mbsim_ros.ros import messages as m  # noqa: E402
from mbsim_ros.ros import qos  # noqa: E402
from mbsim_ros.ros import templates as tpl  # noqa: E402

LOOPBACK = (HERE.parent / "test" / "ros" / "cyclonedds-localhost.xml").as_uri()
DOMAIN = 100 + os.getpid() % 100
W, H = 320, 240
FX = FY = (min(W, H) / 2) / np.tan(np.radians(60) / 2)
NAMES = [f"joint{i}" for i in range(30)]


def cases():
    """(label, typename, qos, builder, template filler or None) for each message kind."""
    rng = np.random.default_rng(0)
    rgb = rng.integers(0, 255, (H, W, 3), dtype=np.uint8)
    depth = (1.0 + rng.random((H, W))).astype(np.float32)
    q = rng.normal(size=30)
    tfs = []
    for i in range(30):
        T = np.eye(4)
        c, s = np.cos(0.1 * i), np.sin(0.1 * i)
        T[:3, :3] = [[c, -s, 0], [s, c, 0], [0, 0, 1]]
        T[:3, 3] = (0.1 * i, 0.0, 0.2)
        tfs.append((12.5, f"link{i}", f"link{i + 1}", T))
    ranges = (1.0 + rng.random(681)).astype(np.float32)
    imu_t = tpl.ImuTemplate("imu_link", accel_variance=(1e-4,) * 3, gyro_variance=(1e-6,) * 3)
    js_t = tpl.JointStateTemplate(NAMES)
    # TF from world link poses, as the node fills it: 31 links in a chain, 30 edges
    link_R = np.array([np.eye(3)] + [T[:3, :3] for *_, T in tfs])
    link_p = np.array([np.zeros(3)] + [T[:3, 3] for *_, T in tfs])
    parent, child = np.arange(30) - 1, np.arange(30)
    eye_R, zero_p = np.tile(np.eye(3), (30, 1, 1)), np.zeros((30, 3))
    tf_t = tpl.TfTemplate([(p, c) for _, p, c, _ in tfs])
    clock_t = tpl.ClockTemplate()
    scan_t = tpl.LaserScanTemplate("laser", 681, -2.09, 0.00614, 2.09, 0.02, 5.6, 0.1)
    rgb_t = tpl.ImageTemplate("cam", H, W, *m.image_encoding(rgb))
    depth_t = tpl.ImageTemplate("cam", H, W, *m.image_encoding(depth))
    info_t = tpl.CameraInfoTemplate("cam", W, H, FX, FY, (W - 1) / 2, (H - 1) / 2)
    return [
        ("Imu", m.IMU, qos.SENSOR,
         lambda t: m.imu(t, "imu_link", (0.1, 0.2, 9.8), (0.01, 0.02, 0.03), (1e-4,) * 3, (1e-6,) * 3),
         lambda t: imu_t.fill(m.to_nanoseconds(t), (0.1, 0.2, 9.8), (0.01, 0.02, 0.03))),
        ("JointState, 30 joints", m.JOINT_STATE, qos.DEFAULT,
         lambda t: m.joint_state(t, NAMES, q, q, q), lambda t: js_t.fill(m.to_nanoseconds(t), q, q, q)),
        ("TFMessage, 30 transforms", m.TF_MESSAGE, qos.TF, lambda t: m.tf_message(tfs),
         lambda t: tf_t.fill(m.to_nanoseconds(t), link_R, link_p, parent, child, eye_R, zero_p)),
        ("Clock", m.CLOCK, qos.CLOCK, lambda t: m.clock(t), lambda t: clock_t.fill(m.to_nanoseconds(t))),
        ("LaserScan, 681 rays", m.LASER_SCAN, qos.SENSOR,
         lambda t: m.laser_scan(t, "laser", ranges, -2.09, 0.00614, 2.09, 0.02, 5.6, 0.1),
         lambda t: scan_t.fill(m.to_nanoseconds(t), ranges)),
        (f"Image {W}x{H} rgb8", m.IMAGE, qos.SENSOR, lambda t: m.image(t, "cam", rgb), lambda t: rgb_t.fill(m.to_nanoseconds(t), rgb)),
        (f"Image {W}x{H} 32FC1", m.IMAGE, qos.SENSOR, lambda t: m.image(t, "cam", depth),
         lambda t: depth_t.fill(m.to_nanoseconds(t), depth)),
        ("CameraInfo", m.CAMERA_INFO, qos.SENSOR,
         lambda t: m.camera_info(t, "cam", W, H, FX, FY, (W - 1) / 2, (H - 1) / 2), lambda t: info_t.fill(m.to_nanoseconds(t))),
        (f"PointCloud2 {W}x{H}", m.POINT_CLOUD2, qos.SENSOR,
         lambda t: m.point_cloud(t, "cam", depth, FX, FY, (W - 1) / 2, (H - 1) / 2), None),
    ]


def reader_process(domain):
    """Child mode: subscribe to every bench topic with DdsTransport (raw take) and count."""
    from mbsim_ros.ros.dds import DdsTransport
    t = DdsTransport(env={"ROS_DOMAIN_ID": str(domain), "CYCLONEDDS_URI": LOOPBACK})
    for i, (_, typename, q, _, _) in enumerate(cases()):
        t.subscribe(f"/bench/t{i}", typename, lambda data: None, q)
    print("READY", flush=True)
    sys.stdin.read()          # until the parent closes stdin
    t.close()


def usec(seconds):
    return f"{seconds * 1e6:.1f}"


def main():
    from mbsim_ros.ros.bag import BagTransport
    from mbsim_ros.ros.dds import DdsTransport

    rows = []
    table = cases()
    stamp = [100.0]

    def next_stamp():
        stamp[0] += 0.001
        return stamp[0]

    serialize = [time_per_call(lambda b=b: b(next_stamp())) for _, _, _, b, _ in table]
    template = [time_per_call(lambda f=f: f(next_stamp())) if f else None for *_, f in table]
    sizes = [len(b(1.0)) for _, _, _, b, _ in table]

    def publish_times(transport, topic_prefix, wait_reader=False):
        out = []
        for i, (_, typename, q, build, fill) in enumerate(table):
            build = fill or build      # what the node publishes with
            h = transport.advertise(f"{topic_prefix}{i}", typename, q)
            if wait_reader and not transport.wait_for_subscribers(h, 1, timeout=10):
                raise RuntimeError(f"no reader matched {h.topic}")
            out.append(time_per_call(
                lambda h=h, build=build: transport.publish(h, build(next_stamp()), int(stamp[0] * 1e9)),
                batch_seconds=0.01))
        return out

    env = {"ROS_DOMAIN_ID": str(DOMAIN), "CYCLONEDDS_URI": LOOPBACK}
    with DdsTransport(env=env) as t:
        dds_alone = publish_times(t, "/bench/alone")

    child = subprocess.Popen([sys.executable, __file__, "--reader", str(DOMAIN)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        if child.stdout.readline().strip() != "READY":
            raise RuntimeError("reader process did not start")
        with DdsTransport(env=env) as t:
            dds_reader = publish_times(t, "/bench/t", wait_reader=True)
            time.sleep(0.2)
    finally:
        child.stdin.close()
        child.wait(timeout=10)

    with tempfile.TemporaryDirectory() as tmp:
        with BagTransport(Path(tmp) / "plain") as bag:
            bag_plain = publish_times(bag, "/bench/t")
        with BagTransport(Path(tmp) / "zstd", compression="zstd") as bag:
            bag_zstd = publish_times(bag, "/bench/t")

    for i, (label, *_rest) in enumerate(table):
        rows.append([label, f"{sizes[i]}", usec(serialize[i]), usec(template[i]) if template[i] else "-",
                     usec(dds_alone[i]), usec(dds_reader[i]), usec(bag_plain[i]), usec(bag_zstd[i])])
    print(f"message cost, microseconds per message (best batch); Python {sys.version.split()[0]}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; DDS and bag columns publish "
          "the template's bytes (the message objects' where there is no template)")
    print_table(["message", "bytes", "objects", "template", "DDS no reader", "DDS 1 reader", "bag", "bag zstd"],
                rows)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--reader":
        reader_process(int(sys.argv[2]))
    else:
        main()
