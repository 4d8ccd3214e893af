"""`mbsim run --config hil.yaml` with devices on pseudo-terminals and no ROS installation (the bag
transport): the whole path, paced at real time, read back from the bag with an independent
reader (mcap-ros2-support)."""
import threading
import time
from collections import defaultdict

import numpy as np
import pytest
import yaml
from harness import model_sensor
from ptys import EmulatedDevice, PtyDevice

from mbsim_ros.cli import main
from mbsim_ros.hil.protocols import make_encoder

RATE = 1000.0          # Hz, the csv IMU stream


class Streamer(threading.Thread):
    """Writes csv IMU lines (t in ms of wall time since start, then (k, -k, 9.81) with k the line
    number) at RATE by the wall clock, in whatever bursts the scheduler allows."""

    def __init__(self, pty):
        super().__init__(daemon=True)
        self.pty, self.sent, self.stop = pty, 0, threading.Event()

    def run(self):
        t0 = time.perf_counter()
        while not self.stop.is_set():
            due = int((time.perf_counter() - t0) * RATE)
            if due > self.sent:
                self.pty.write(b"".join(b"%.3f,%d,%d,9.81\n" % (1e3 * k / RATE, k, -k) for k in range(self.sent, due)))
                self.sent = due
            time.sleep(0.0005)


def test_mbsim_run_with_pty_devices_records_the_devices_on_the_sensor_topics(tmp_path, capsys):
    reader = pytest.importorskip("mcap_ros2.reader", reason="mcap-ros2-support is a test dependency")
    imu = PtyDevice(tmp_path / "imu")
    laser = EmulatedDevice(tmp_path / "urg", make_encoder({"protocol": "scip2"}, model_sensor("ChestRange")))
    config = {
        "real_time_factor": 1.0,
        "sensors": {"LeftCamera": {"enabled": False}, "RightCamera": {"enabled": False}, "ChestRange": {"rate": 40.0}},
        "devices": {"WaistAccelSensor": {"port": str(tmp_path / "imu"), "protocol": "csv",
                                         "fields": ["t", "ax", "ay", "az"], "time_scale": 0.001},
                    "ChestRange": {"port": str(tmp_path / "urg"), "protocol": "scip2"}},
        "diagnostics_rate": 4.0,
    }
    (tmp_path / "hil.yaml").write_text(yaml.safe_dump(config))
    streamer = Streamer(imu)

    def laser_stream():                   # 40 Hz constant scans once the node has started MD
        d = np.full(laser.encoder.n, 2.5)
        while not streamer.stop.is_set():
            if laser.encoder.stream is not None:
                laser.send(d, time.perf_counter())
            time.sleep(0.025)
    lt = threading.Thread(target=laser_stream, daemon=True)
    streamer.start()
    lt.start()
    bag = tmp_path / "bag"
    try:
        status = main(["run", "--config", str(tmp_path / "hil.yaml"), "--transport", "none", "--duration", "2",
                       "--bag", str(bag), "--quiet"])
    finally:
        streamer.stop.set()
        streamer.join()
        lt.join()
        imu.close()
        laser.close()
    out = capsys.readouterr().out
    assert status == 0
    assert "hardware in the loop:" in out and "device WaistAccelSensor: ok" in out, out
    assert "device ChestRange: ok" in out, out
    # pyserial discards what waited in the port when it opens it, so the first line the node
    # reads from a device that was already streaming may be a cut one: one bad_value at most
    imu_line = next(line for line in out.splitlines() if "device WaistAccelSensor:" in line)
    assert imu_line.endswith(("no faults", "; bad_value 1")), imu_line
    assert next(line for line in out.splitlines() if "device ChestRange:" in line).endswith("no faults")
    topics = defaultdict(list)
    for m in reader.read_ros2_messages(str(next(bag.glob("*.mcap")))):
        topics[m.channel.topic].append(m.ros_msg)
    acc = topics["/SR1/WaistAccelSensor"]
    sim = topics["/SR1/WaistAccelSensor/sim"]
    assert len(sim) == pytest.approx(2000, abs=2)                     # 1 kHz for 2 s
    real = np.array([[m.linear_acceleration.x, m.linear_acceleration.y, m.linear_acceleration.z] for m in acc])
    # every published value is one of the device's lines: (k, -k, 9.81) for a line number k
    assert len(real) > 1500
    np.testing.assert_array_equal(real[:, 1], -real[:, 0])
    np.testing.assert_array_equal(real[:, 2], 9.81)
    k = real[:, 0]
    assert np.all(np.diff(k) >= 0) and np.all(k == np.round(k))
    # one value per sample instant of the sensor (resampling holds the newest line received)
    # from the first line on: exactly the simulated topic's instants from then. The port opens
    # as the run starts; the first line then takes a few ms, tens on a loaded 2-core box
    def stamp(m):
        return m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec
    sim_stamps = [stamp(m) for m in sim]
    real_stamps = [stamp(m) for m in acc]
    assert real_stamps == [s for s in sim_stamps if s >= real_stamps[0]]
    assert real_stamps[0] - sim_stamps[0] < 0.2
    # clocks locked at rtf 1: device time (line k at k ms after the stream started) minus the
    # message's simulation stamp does not drift (the medians of the two halves of the run agree
    # to 20 ms) and stays near constant up to scheduling jitter (a loaded 2-core box: tens of
    # ms; 3/4 within 25 ms of the median)
    stamps = np.array(real_stamps)
    offset = k / RATE - stamps
    half = len(offset) // 2
    assert abs(np.median(offset[:half]) - np.median(offset[half:])) < 0.02
    assert np.mean(np.abs(offset - np.median(offset)) < 0.025) > 0.75
    laser_msgs = topics["/SR1/ChestRange"]
    assert len(topics["/SR1/ChestRange/sim"]) == pytest.approx(80, abs=2)
    device_scans = [m for m in laser_msgs if np.allclose(np.asarray(m.ranges)[np.isfinite(m.ranges)], 2.5)]
    assert len(device_scans) > 40 and all(m.header.frame_id == "ChestRange_laser_frame" for m in laser_msgs)
    diag = [s for m in topics["/diagnostics"] for s in m.status if s.name == "mbsim: device WaistAccelSensor"]
    assert diag and {v.key: v.value for v in diag[-1].values}["state"] == "ok"
