"""The sim_node on an SDF robot with a 16-ring gpu_lidar (issue 38), read by a real rclpy
subscriber in this process: the node advertises the lidar's PointCloud2 beside its LaserScan, and
the clouds rclpy deserializes have the fields x, y, z, intensity, ring, 16 x 180 points, each
point's ring its row, and the horizon's ring at the scan's ranges (the room is closed: almost
every ray returns, within the sensor's range)."""
from pathlib import Path

import numpy as np
import pytest
from conftest import ROS_MISSING

if ROS_MISSING:
    pytest.skip(ROS_MISSING, allow_module_level=True)
from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from rclpy_probe import Output, Probe, stop_node  # noqa: E402
from test_node import STARTUP, start_node  # noqa: E402
from test_sdf_lidar_run import decode  # noqa: E402

MODEL = Path(__file__).resolve().parents[1] / "models" / "sdf" / "lidar_robot.sdf"
NS = "/lidar_node"


def test_a_real_rclpy_subscriber_gets_the_lidars_cloud_and_scan(tmp_path):
    proc = start_node(f"model:={MODEL}", "real_time_factor:=1.0", config="", tmp=tmp_path, ns=NS)
    out = Output(proc)
    probe = Probe("lidar_cloud_probe")
    try:
        def advertised():
            return {name: types for name, types in probe.node.get_topic_names_and_types()
                    if name.startswith(NS) and name.endswith(("/lidar", "/lidar/points"))}
        probe.wait("the lidar's two topics", lambda: len(advertised()) == 2, STARTUP, proc)
        topics = advertised()
        cloud_topic = next(n for n in topics if n.endswith("/points"))
        scan_topic = next(n for n in topics if not n.endswith("/points"))
        assert topics[cloud_topic] == ["sensor_msgs/msg/PointCloud2"]
        assert topics[scan_topic] == ["sensor_msgs/msg/LaserScan"]
        qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT)   # matches either writer
        probe.subscribe(cloud_topic, "sensor_msgs/msg/PointCloud2", qos)
        probe.subscribe(scan_topic, "sensor_msgs/msg/LaserScan", qos)
        probe.wait("three clouds and scans", lambda: len(probe.messages(cloud_topic)) >= 3
                   and len(probe.messages(scan_topic)) >= 3, 120.0, proc)
        scans = {(s.header.stamp.sec, s.header.stamp.nanosec): s for s in probe.messages(scan_topic)}
        checked = 0
        for cloud in probe.messages(cloud_topic):
            assert [f.name for f in cloud.fields] == ["x", "y", "z", "intensity", "ring"]
            assert (cloud.height, cloud.width) == (16, 180) and cloud.header.frame_id == "lidar_laser_frame"
            f = decode(cloud)
            np.testing.assert_array_equal(f["ring"], np.repeat(np.arange(16, dtype=np.uint16), 180).reshape(16, 180))
            r = np.sqrt(f["x"].astype(float) ** 2 + f["y"] ** 2 + f["z"] ** 2)
            hits = np.isfinite(r)
            assert hits.mean() > 0.9 and (r[hits] >= 0.1).all() and (r[hits] <= 12).all()
            scan = scans.get((cloud.header.stamp.sec, cloud.header.stamp.nanosec))
            if scan is not None:           # (best effort: a scan may be lost)
                ring = int(np.argmin(np.abs(np.linspace(-0.26, 0.26, 16))))
                np.testing.assert_allclose(r[ring], np.asarray(scan.ranges, float), rtol=1e-6)
                checked += 1
        assert checked >= 1, "no cloud had its scan of the same stamp"
    finally:
        probe.close()
        stop_node(proc, out)
