"""`mbsim run` on an SDF robot with a 16-ring gpu_lidar (issue 38): the bag holds the lidar's
LaserScan and PointCloud2, read back by mcap-ros2-support (not our code) and the cloud's points
decoded here by the fields' own offsets; the scan is the cloud's ring nearest the horizon."""
from pathlib import Path

import numpy as np
import pytest

from mbsim_ros.cli import main

MODEL = Path(__file__).resolve().parents[1] / "models" / "sdf" / "lidar_robot.sdf"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    reader = pytest.importorskip("mcap_ros2.reader", reason="mcap-ros2-support is a test dependency")
    bag = tmp_path_factory.mktemp("sdf_lidar") / "bag"
    assert main(["run", str(MODEL), "--transport", "none", "--rtf", "0", "--duration", "0.5", "--bag", str(bag),
                 "--quiet"]) == 0
    topics = {}
    for m in reader.read_ros2_messages(str(next(bag.glob("*.mcap")))):
        topics.setdefault(m.channel.topic, []).append((m.schema.name, m.ros_msg))
    return topics


def decode(cloud):
    types = {7: "<f4", 4: "<u2"}
    raw = np.frombuffer(bytes(cloud.data), np.uint8).reshape(cloud.height, cloud.width, cloud.point_step)
    return {f.name: np.ascontiguousarray(raw[..., f.offset:f.offset + np.dtype(types[f.datatype]).itemsize])
            .view(types[f.datatype])[..., 0] for f in cloud.fields}


def topic(topics, suffix):
    names = [t for t in topics if t.endswith(suffix)]
    assert len(names) == 1, (suffix, sorted(topics))
    return topics[names[0]]


def test_lidar_publishes_scan_and_cloud(recorded):
    scans, clouds = topic(recorded, "/lidar"), topic(recorded, "/lidar/points")
    assert {s for s, _ in scans} == {"sensor_msgs/msg/LaserScan"}
    assert {s for s, _ in clouds} == {"sensor_msgs/msg/PointCloud2"}
    assert len(scans) == len(clouds) >= 4            # 10 Hz over 0.5 s
    for (_, scan), (_, cloud) in zip(scans, clouds):
        assert (scan.header.stamp.sec, scan.header.stamp.nanosec) == (cloud.header.stamp.sec, cloud.header.stamp.nanosec)
        assert scan.header.frame_id == cloud.header.frame_id == "lidar_laser_frame"
        assert (cloud.height, cloud.width, len(scan.ranges)) == (16, 180, 180)
        assert scan.angle_min == pytest.approx(-3.13) and scan.angle_max == pytest.approx(3.13)
        f = decode(cloud)
        assert [x.name for x in cloud.fields] == ["x", "y", "z", "intensity", "ring"]
        np.testing.assert_array_equal(f["ring"], np.repeat(np.arange(16, dtype=np.uint16), 180).reshape(16, 180))
        r = np.sqrt(f["x"].astype(float) ** 2 + f["y"] ** 2 + f["z"] ** 2)
        ring = int(np.argmin(np.abs(np.linspace(-0.26, 0.26, 16))))
        np.testing.assert_allclose(r[ring], np.asarray(scan.ranges, float), rtol=1e-6)
        hits = np.isfinite(r)
        assert hits.mean() > 0.9                       # a closed room: almost every ray returns
        assert set(np.unique(f["intensity"][hits])) <= {0.0, 40.0, 80.0}   # walls' laser_retro (floor 0)
        assert (r[hits] >= 0.1).all() and (r[hits] <= 12).all()
        assert np.isnan(f["x"][~hits]).all()


def test_the_imu_and_the_world_settings(recorded):
    assert {s for s, _ in topic(recorded, "/imu_accel")} == {"sensor_msgs/msg/Imu"}
    assert {s for s, _ in topic(recorded, "/imu_gyro")} == {"sensor_msgs/msg/Imu"}
