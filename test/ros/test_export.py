"""`mbsim export`: a bag's images as PNG files and its numeric topics as CSV, checked against the
bag as rosbags reads it (a bag written here with rosbags' own Writer, so nothing of ours is
between the pixels and numbers written and those compared). PNGs are decoded by matplotlib
(Pillow), an independent reader."""
import csv

import numpy as np
import pytest
from matplotlib.image import imread
from rosbags.rosbag2 import Reader, StoragePlugin, Writer

from mbsim_ros.cli import main
from mbsim_ros.ros import messages as msg
from mbsim_ros.ros.messages import IMAGE, IMU, JOINT_STATE, TF_MESSAGE, TYPESTORE
from mbsim_ros.render import depth_to_image

RNG = np.random.default_rng(7)
RGB = [RNG.integers(0, 256, (6, 5, 3), dtype=np.uint8) for _ in range(3)]
DEPTH = RNG.uniform(0.5, 4.0, (4, 3)).astype(np.float32)
JOINTS = ["hip", "knee"]
Q = RNG.normal(size=(4, 2))


@pytest.fixture(scope="module")
def bag(tmp_path_factory):
    path = tmp_path_factory.mktemp("bags") / "run1"
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as w:
        cam = w.add_connection("/r/cam/image_raw", IMAGE, typestore=TYPESTORE)
        bgr = w.add_connection("/r/bgr/image_raw", IMAGE, typestore=TYPESTORE)
        depth = w.add_connection("/r/cam/depth/image_raw", IMAGE, typestore=TYPESTORE)
        joints = w.add_connection("/joint_states", JOINT_STATE, typestore=TYPESTORE)
        imu = w.add_connection("/r/imu", IMU, typestore=TYPESTORE)
        tf = w.add_connection("/tf", TF_MESSAGE, typestore=TYPESTORE)
        for k, a in enumerate(RGB):
            w.write(cam, 10**8 * k, msg.image(0.1 * k, "cam", a))
        w.write(bgr, 0, msg.image(0.0, "bgr", RGB[0][:, :, ::-1].copy(), encoding="bgr8"))
        w.write(depth, 0, msg.image(0.0, "cam", DEPTH))
        for k, q in enumerate(Q):
            w.write(joints, 10**6 * k, msg.joint_state(0.001 * k, JOINTS, q, 2 * q, 3 * q))
            w.write(imu, 10**6 * k, msg.imu(0.001 * k, "imu", accel=[k, 0.5, 9.8], gyro=[0.1, 0.2, k]))
        T = np.eye(4)
        T[:3, 3] = [1.0, 2.0, 3.0]
        w.write(tf, 0, msg.tf_message([(0.0, "world", "base", T)]))
    return path


def rosbags_messages(path, topic):
    with Reader(path) as r:
        conns = [c for c in r.connections if c.topic == topic]
        return [TYPESTORE.deserialize_cdr(raw, c.msgtype) for c, _, raw in r.messages(connections=conns)]


def png(path):
    return np.rint(imread(path) * 255).astype(np.uint8)      # matplotlib reads 8-bit PNG as floats / 255


def test_images_are_the_bags_pixels(bag, tmp_path, capsys):
    assert main(["export", str(bag), "--images", str(tmp_path / "frames")]) == 0
    assert "wrote 5 PNG frames" in capsys.readouterr().out
    frames = tmp_path / "frames" / "r" / "cam" / "image_raw"
    for k, m in enumerate(rosbags_messages(bag, "/r/cam/image_raw")):
        pixels = np.asarray(m.data, np.uint8).reshape(m.height, m.width, 3)     # the bag's bytes, rgb8
        assert np.array_equal(png(frames / f"{k:06d}.png"), pixels)
    with open(frames / "stamps.csv") as f:
        assert [r["stamp"] for r in csv.DictReader(f)] == ["0.000000000", "0.100000000", "0.200000000"]
    bgr = png(tmp_path / "frames" / "r" / "bgr" / "image_raw" / "000000.png")
    assert np.array_equal(bgr, RGB[0])                                        # bgr8 turned to RGB
    (m,) = rosbags_messages(bag, "/r/cam/depth/image_raw")
    metres = np.frombuffer(np.asarray(m.data, np.uint8).tobytes(), "<f4").reshape(m.height, m.width)
    depth = png(tmp_path / "frames" / "r" / "cam" / "depth" / "image_raw" / "000000.png")
    assert depth.ndim == 2 and np.array_equal(depth, depth_to_image(metres))


def test_csv_holds_the_numbers_rosbags_reads(bag, tmp_path, capsys):
    assert main(["export", str(bag), "--csv", str(tmp_path / "tables")]) == 0
    out = capsys.readouterr().out
    assert "wrote 3 CSV tables" in out and "image" not in out
    with open(tmp_path / "tables" / "joint_states.csv") as f:
        rows = list(csv.DictReader(f))
    states = rosbags_messages(bag, "/joint_states")
    assert len(rows) == len(states) == 4
    for row, m in zip(rows, states):
        assert float(row["time"]) == m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec
        for field in ("position", "velocity", "effort"):
            for name, x in zip(m.name, getattr(m, field)):
                assert float(row[f"{field}.{name}"]) == x                   # repr of a float: exact
    with open(tmp_path / "tables" / "r" / "imu.csv") as f:
        rows = list(csv.DictReader(f))
    for row, m in zip(rows, rosbags_messages(bag, "/r/imu")):
        assert float(row["linear_acceleration.z"]) == m.linear_acceleration.z
        assert float(row["angular_velocity.z"]) == m.angular_velocity.z
        assert float(row["orientation_covariance[0]"]) == m.orientation_covariance[0]
    with open(tmp_path / "tables" / "tf.csv") as f:
        (row,) = list(csv.DictReader(f))
    assert [float(row[f"base.translation.{a}"]) for a in "xyz"] == [1.0, 2.0, 3.0]


def test_only_the_topics_asked_for(bag, tmp_path):
    assert main(["export", str(bag), "--csv", str(tmp_path / "t"), "--topics", "/r/imu"]) == 0
    assert [p.name for p in (tmp_path / "t").rglob("*.csv")] == ["imu.csv"]


@pytest.mark.parametrize("argv, expected", [
    (["--csv", "out", "--topics", "/nothing"], "export: "),
    ([], "give --images DIR, --video FILE.mp4 and/or --csv DIR"),
    (["--video", "out.avi"], "expected a file ending in .mp4"),
])
def test_bad_export_is_one_line(bag, tmp_path, capsys, argv, expected):
    assert main(["export", str(bag), *argv]) == 2
    err = capsys.readouterr().err
    assert expected in err and len(err.strip().splitlines()) == 1, err


def test_a_folder_that_is_not_a_bag_is_one_line(tmp_path, capsys):
    assert main(["export", str(tmp_path), "--csv", str(tmp_path / "t")]) == 2
    err = capsys.readouterr().err
    assert "not a readable rosbag2 bag" in err and len(err.strip().splitlines()) == 1


def video_writer():
    try:
        import imageio_ffmpeg
        imageio_ffmpeg.get_ffmpeg_exe()
        return True
    except (ImportError, RuntimeError):
        return False


@pytest.mark.skipif(not video_writer(), reason="no video writer installed (imageio-ffmpeg with ffmpeg)")
def test_video_has_a_frame_per_image(bag, tmp_path):
    import imageio_ffmpeg
    assert main(["export", str(bag), "--video", str(tmp_path / "cam.mp4"), "--topics", "/r/cam/image_raw"]) == 0
    frames, seconds = imageio_ffmpeg.count_frames_and_secs(str(tmp_path / "cam.mp4"))     # ffmpeg's own count
    assert frames == len(RGB) and seconds == pytest.approx(0.3, abs=0.05)              # 10 fps from the stamps


@pytest.mark.skipif(video_writer(), reason="a video writer is installed")
def test_video_without_a_writer_says_what_to_install(bag, tmp_path, capsys):
    assert main(["export", str(bag), "--video", str(tmp_path / "cam.mp4")]) == 2
    err = capsys.readouterr().err
    assert "pip install imageio imageio-ffmpeg" in err and len(err.strip().splitlines()) == 1
