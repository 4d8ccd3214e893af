"""Real devices in place of simulated sensors (devices: section) on the bundled SR1 world: device
emulators of our own on pseudo-terminals speak each protocol (through the protocols' encoders)
with generated data; what the node publishes on the sensor's topic must be that data in SI
units and the sensor frame, the simulated value must go to <topic>/sim, and /diagnostics must
say what happened."""
import math

import numpy as np
import pytest
from harness import floats, model_sensor, status, step_until_reading, vector, world
from capture_transport import ros_session
from ptys import EmulatedDevice, PtyDevice, wait_for

from mbsim_ros.hil.protocols import make_encoder
from mbsim_ros.ros import messages as msg


def rz(angle):
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])


@pytest.fixture
def logs():
    return []


def test_csv_imu_readings_are_the_devices_data_in_the_sensor_frame(tmp_path, logs):
    port = tmp_path / "imu"
    dev = PtyDevice(port)
    rotation = [0.0, 0.0, math.pi / 2]       # the device is mounted turned 90 degrees about z
    options = {"port": str(port), "protocol": "csv", "fields": ["t", "ax", "ay", "az"], "scale": 0.001,
               "time_scale": 0.001, "rotation": rotation}
    sim, bridge, cap = world(devices={"WaistAccelSensor": options}, log=logs.append)
    try:
        src = bridge.hil.sources["WaistAccelSensor"]
        wait_for(lambda: src.connected, what="the node to open the pty")
        rng = np.random.default_rng(1)
        data = rng.normal(0.0, 5.0, (40, 3)).round(3)          # m/s^2, device frame
        encoder = make_encoder(options, model_sensor("WaistAccelSensor"))
        real, simulated = [], []
        for k, a in enumerate(data):
            dev.write(encoder.encode(a, 0.001 * k))
            wait_for(lambda: src.received == k + 1, what=f"sample {k}")
            r = step_until_reading(sim, bridge, "WaistAccelSensor")
            out = cap.got["/SR1/WaistAccelSensor"][-1]
            assert out.header.frame_id == "WaistAccelSensor"
            assert msg.stamp_seconds(out.header.stamp) == pytest.approx(r.stamp, abs=1e-9)
            real.append(vector(out))
            sim_msg = cap.got["/SR1/WaistAccelSensor/sim"][-1]
            simulated.append(vector(sim_msg))
            np.testing.assert_array_equal(simulated[-1], r.values)
        expected = data @ rz(math.pi / 2).T              # device frame -> sensor frame
        # the csv carries 3 decimals of mm/s^2 scaled by 0.001: exact in binary to ~1e-15 relative
        np.testing.assert_allclose(real, expected, rtol=1e-12, atol=1e-12)
        assert len(cap.got["/SR1/WaistAccelSensor"]) == len(cap.got["/SR1/WaistAccelSensor/sim"]) == 40
        level, message, values = status(bridge, "mbsim: device WaistAccelSensor")
        assert level == 0 and values["state"] == "ok" and values["received"] == 40 and values["published"] == 40
        d = np.array(real) - np.array(simulated)
        # diagnostics print 4 significant digits
        np.testing.assert_allclose(floats(values["residual_mean"]), d.mean(axis=0), rtol=1e-3)
        np.testing.assert_allclose(floats(values["residual_rms"]), np.sqrt((d * d).mean(axis=0)), rtol=1e-3)
        assert values["residual_samples"] == 40
        assert src.stats()["device_stamp"] == pytest.approx(0.039)
    finally:
        bridge.close()
        dev.close()


@pytest.mark.parametrize("on_fault", ["hold", "sim", "drop"])
def test_faults_are_survived_reported_and_the_topic_follows_on_fault(tmp_path, logs, on_fault):
    port = tmp_path / "imu"
    dev = PtyDevice(port)
    # max_age 20 ms of simulated time: a device silent for longer is stale
    options = {"port": str(port), "protocol": "csv", "on_fault": on_fault, "max_age": 0.02}
    sim, bridge, cap = world(devices={"WaistGyro": options}, log=logs.append)
    topic = cap.got["/SR1/WaistGyro"]
    src = bridge.hil.sources["WaistGyro"]

    def instant():
        """One sample instant: (what the topic got, or None, the simulated value)."""
        n = len(topic)
        r = step_until_reading(sim, bridge, "WaistGyro")
        assert len(topic) in (n, n + 1)
        return (vector(topic[-1]) if len(topic) == n + 1 else None), r.values

    def send(data, samples):
        before = src.received
        dev.write(data)
        wait_for(lambda: src.received == before + samples, what=f"{samples} samples")

    try:
        wait_for(lambda: src.connected, what="the node to open the pty")
        send(b"0.5,0.25,-1\n", 1)
        got, _ = instant()
        np.testing.assert_array_equal(got, [0.5, 0.25, -1])
        # half frames across writes, garbage, short lines and non-numbers between good lines
        send(b"1.5,2.", 0)
        send(b"5,3\n\xff\xfe\x00garbage\n1,2\nx,y,z\n", 1)
        send(b"-2,", 0)
        send(b"-3,-4\n", 1)
        got, _ = instant()
        np.testing.assert_array_equal(got, [-2, -3, -4])
        level, _, values = status(bridge, "mbsim: device WaistGyro")
        assert level == 0 and values["fault_garbage"] == 1 and values["fault_bad_value"] == 2
        assert "not a number" in values["last_fault"] and values["superseded"] == 1   # 1.5,2.5,3 overtaken

        # a burst faster than the rate: the newest sample is used, the others are counted
        send(b"".join(b"%d,0,0\n" % k for k in range(10)), 10)
        got, _ = instant()
        np.testing.assert_array_equal(got, [9, 0, 0])
        assert src.stats()["superseded"] == 1 + 9

        # the device stops talking: stale after max_age, the topic follows on_fault
        expected = {"hold": lambda s: [9, 0, 0], "sim": lambda s: s, "drop": lambda s: None}[on_fault]
        for _ in range(40):
            got, simulated = instant()
        assert src.state == "stale"
        exp = expected(simulated)
        assert (got is None) if exp is None else np.array_equal(got, exp)
        level, message, values = status(bridge, "mbsim: device WaistGyro")
        assert level == 1 and values["state"] == "stale" and "no sample for" in message

        # the port vanishes: down, reconnect attempts with backoff, logged once each
        dev.vanish()
        wait_for(lambda: not src.connected, what="the node to notice the lost device")
        wait_for(lambda: src.link.faults["open_failed"] >= 3, what="reconnect attempts")
        got, simulated = instant()
        exp = expected(simulated)
        assert (got is None) if exp is None else np.array_equal(got, exp)
        level, message, values = status(bridge, "mbsim: device WaistGyro")
        assert level == 2 and values["state"] == "down" and values["fault_disconnected"] == 1
        assert values["fault_open_failed"] >= 3 and "cannot open" in values["last_fault"]

        # it comes back at the same path: reopened, used again
        dev.open()
        wait_for(lambda: src.connected, timeout=5, what="the node to reopen the device")
        send(b"7,8,9\n", 1)
        got, _ = instant()
        np.testing.assert_array_equal(got, [7, 8, 9])
        assert src.state == "ok" and status(bridge, "mbsim: device WaistGyro")[0] == 0
        # one log line per state change, not one per sample or per retry (down -> stale -> ok
        # at the start and again after the return)
        text = "\n".join(logs)
        assert text.count("ok -> stale") == 1 and text.count("stale -> down") == 1
        assert text.count("down -> stale") == 2 and text.count("stale -> ok") == 2
        assert text.count("cannot open") == 1 and text.count("lost") == 1
    finally:
        bridge.close()
        dev.close()


def scan_data(sim, rng):
    """A generated scan for ChestRange: distances to the millimetre (what SCIP 2.0 carries)
    within the device's limits, and some rays without a return."""
    dev = sim.devices["ChestRange"]
    d = rng.uniform(0.1, 0.95 * dev.range_max, len(dev.angles)).round(3)
    d[rng.integers(0, len(d), 30)] = np.inf
    return d


def test_scip2_laser_scans_are_the_devices_scans_and_checksum_errors_are_survived(tmp_path, logs):
    port = tmp_path / "urg"
    options = {"port": str(port), "protocol": "scip2"}
    dev = EmulatedDevice(port, make_encoder(options, model_sensor("ChestRange")))
    sim, bridge, cap = world(devices={"ChestRange": options}, sensors={"ChestRange": {"rate": 40.0}},
                             log=logs.append)
    src = bridge.hil.sources["ChestRange"]
    topic = cap.got["/SR1/ChestRange"]
    try:
        # the node's parser starts the device (SCIP2.0, QT, PP, then MD) over the pty
        wait_for(lambda: dev.encoder.stream is not None, what="the node to start the scan stream (MD)")
        assert b"PP\n" in dev.received and b"MD" in dev.received
        rng = np.random.default_rng(7)
        for k in range(3):
            d = scan_data(sim, rng)
            assert dev.send(d, 0.025 * k)
            wait_for(lambda: src.received == k + 1, what=f"scan {k}")
            r = step_until_reading(sim, bridge, "ChestRange")
            out = topic[-1]
            assert out.header.frame_id == "ChestRange_laser_frame"
            np.testing.assert_array_equal(out.ranges, d.astype(np.float32))     # to the millimetre, exactly
            sim_out = cap.got["/SR1/ChestRange/sim"][-1]
            np.testing.assert_array_equal(sim_out.ranges, r.values.astype(np.float32))
            assert (out.angle_min, out.angle_increment, out.range_max) == \
                (sim_out.angle_min, sim_out.angle_increment, sim_out.range_max)
        # a scan with a corrupted data line: dropped by the parser, counted; the next one is used
        with dev.lock:
            frame = bytearray(dev.encoder.encode(scan_data(sim, rng), 0.1))
            frame[frame.index(b"\n", frame.index(b"99") + 10) + 5] ^= 0x01     # a data character
            dev.write(frame)
        wait_for(lambda: src.all_faults()["checksum"] == 1, what="the checksum fault")
        d = scan_data(sim, rng)
        assert dev.send(d, 0.125)
        wait_for(lambda: src.received == 4, what="the next scan")
        step_until_reading(sim, bridge, "ChestRange")
        np.testing.assert_array_equal(topic[-1].ranges, d.astype(np.float32))
        level, _, values = status(bridge, "mbsim: device ChestRange")
        assert values["fault_checksum"] == 1 and "checksum" in values["last_fault"]
        assert values["protocol"] == "scip2" and values["state"] == "ok" and level == 0
        # the residual of a scan: the mean and RMS over rays finite in both
        assert values["residual_samples"] == 4 and len(floats(values["residual_rms"])) == 1
    finally:
        bridge.close()
        dev.close()


def test_one_xsens_imu_port_feeds_the_accelerometer_and_the_gyro(tmp_path, logs):
    port = tmp_path / "mti"
    acc = {"port": str(port), "protocol": "xsens", "rotation": [math.pi, 0, 0]}   # mounted upside down
    gyro = {"port": str(port), "protocol": "xsens", "rotation": [math.pi, 0, 0]}
    dev = EmulatedDevice(port, make_encoder({"protocol": "xsens", "precision": "float64"},
                                            model_sensor("WaistAccelSensor")))
    sim, bridge, cap = world(devices={"WaistAccelSensor": acc, "WaistGyro": gyro}, log=logs.append)
    sources = bridge.hil.sources
    try:
        wait_for(lambda: sources["WaistGyro"].connected, what="the node to open the pty")
        wait_for(lambda: b"\xfa\xff\x10" in dev.received, what="GoToMeasurement")
        rng = np.random.default_rng(3)
        flip = np.diag([1.0, -1.0, -1.0])                        # roll pi: device -> sensor frame
        for k in range(5):
            values = rng.normal(0, 3, 6)                            # (ax, ay, az, wx, wy, wz)
            dev.send(values, 0.001 * k)
            wait_for(lambda: sources["WaistGyro"].received == k + 1 and sources["WaistAccelSensor"].received == k + 1,
                     what=f"message {k}")
            step_until_reading(sim, bridge, "WaistGyro")
            # float64 on the wire: exact; the rotation by pi leaves 1e-16 of cos(pi) rounding
            np.testing.assert_allclose(vector(cap.got["/SR1/WaistAccelSensor"][-1]), flip @ values[:3], atol=1e-14)
            np.testing.assert_allclose(vector(cap.got["/SR1/WaistGyro"][-1]), flip @ values[3:], atol=1e-14)
        assert sources["WaistGyro"].link is sources["WaistAccelSensor"].link
        assert status(bridge, "mbsim: device WaistGyro")[2]["protocol"] == "xsens"
    finally:
        bridge.close()
        dev.close()


def test_set_source_switches_between_the_simulation_and_the_device_at_run_time(tmp_path, logs):
    from harness import Capture

    from mbsim_ros.run.config import load_config
    from mbsim_ros.run import build_simulation
    from mbsim_ros.run.world import load_world
    port = tmp_path / "imu"
    dev = PtyDevice(port)
    config = load_config(None, {"devices": {"WaistAccelSensor": {"port": str(port), "protocol": "csv", "source": "sim"}},
                                "sensors": {"LeftCamera": {"enabled": False}, "RightCamera": {"enabled": False}},
                                "real_time_factor": 0})
    models, _ = load_world(config)
    sim = build_simulation(models, config)
    cap = Capture()
    session, bridge = ros_session(sim, cap, config, log=logs.append)
    topic, sim_topic = cap.got["/SR1/WaistAccelSensor"], cap.got["/SR1/WaistAccelSensor/sim"]
    src = bridge.hil.sources["WaistAccelSensor"]
    try:
        wait_for(lambda: src.connected, what="the node to open the pty")

        def instant(values):
            n = src.received
            dev.write(b"%r,%r,%r\n" % tuple(values))
            wait_for(lambda: src.received == n + 1, what="the sample")
            m = len(sim_topic)
            while len(sim_topic) == m:
                session.runner.step_once(1)      # not running: steps here, on_step included
            return vector(topic[-1]), vector(sim_topic[-1])

        got, simulated = instant([1.0, 2.0, 3.0])
        np.testing.assert_array_equal(got, simulated)            # source sim: the topic is the simulation
        assert "the real device" in bridge.set_source("WaistAccelSensor", "real")
        got, simulated = instant([4.0, 5.0, 6.0])
        np.testing.assert_array_equal(got, [4, 5, 6])
        assert not np.array_equal(got, simulated)
        assert "the simulation" in bridge.set_source("WaistAccelSensor", "sim")
        got, simulated = instant([7.0, 8.0, 9.0])
        np.testing.assert_array_equal(got, simulated)
        # the residual covers every instant with a fresh device sample, whatever the topic carried
        assert status(bridge, "mbsim: device WaistAccelSensor")[2]["residual_samples"] == 3
        # the sim_node's NS/<sensor>/set_source service (std_srvs/SetBool) calls the same
        from types import SimpleNamespace

        from mbsim_ros.ros.node_services import set_source_service
        response = set_source_service(bridge, "WaistAccelSensor")(SimpleNamespace(data=True), SimpleNamespace())
        assert response.success and "the real device" in response.message and src.use_real
        response = set_source_service(bridge, "ChestRange")(SimpleNamespace(data=True), SimpleNamespace())
        assert not response.success and "has no real device" in response.message
        with pytest.raises(ValueError, match="'ChestRange' has no real device"):
            bridge.set_source("ChestRange", "real")
        with pytest.raises(ValueError, match="source must be real or sim"):
            bridge.set_source("WaistAccelSensor", "usb")
    finally:
        session.close()
        dev.close()


def test_a_ros_driver_topic_replaces_the_simulated_wrench(logs):
    sim, bridge, cap = world(devices={"RightAnkleForceSensor": {"topic": "/ft_driver/wrench", "max_age": 0.005}},
                             log=logs.append)
    try:
        topic = cap.got["/SR1/RightAnkleForceSensor"]
        for k in range(3):
            w = np.array([1.0, -2.0, 30.0, 0.1, -0.2, 0.3]) * (k + 1)
            cap.deliver("/ft_driver/wrench", msg.wrench(100.0 + k, "ft_link", w))
            step_until_reading(sim, bridge, "RightAnkleForceSensor")
            np.testing.assert_array_equal(vector(topic[-1]), w)
            assert topic[-1].header.frame_id == "RightAnkleForceSensor"         # the sensor's frame, not the driver's
        for _ in range(10):                                                     # the driver falls silent
            step_until_reading(sim, bridge, "RightAnkleForceSensor")
        level, _, values = status(bridge, "mbsim: device RightAnkleForceSensor")
        assert values["state"] == "stale" and level == 1 and values["protocol"] == "ros"
        assert values["device"] == "/ft_driver/wrench" and values["received"] == 3
        np.testing.assert_array_equal(vector(topic[-1]), w)                    # on_fault hold
        cap.deliver("/ft_driver/wrench", b"\x00\x01\x00\x00garbage")
        assert status(bridge, "mbsim: device RightAnkleForceSensor")[2]["fault_bad_message"] == 1
    finally:
        bridge.close()


def test_a_ros_driver_over_live_dds_replaces_the_simulated_gyro(logs):
    """source: ros through the DDS transport: a driver's sensor_msgs/Imu published by another
    DDS participant (loopback only, a random domain) is re-published on the sensor's topic."""
    pytest.importorskip("cyclonedds", reason="cyclonedds (python) not installed")
    import random
    from pathlib import Path

    from mbsim_ros.ros.dds import DdsTransport
    from mbsim_ros.ros.qos import SENSOR
    env = {"ROS_DOMAIN_ID": str(random.SystemRandom().randint(201, 230)),
           "CYCLONEDDS_URI": (Path(__file__).parents[1] / "ros" / "cyclonedds-localhost.xml").as_uri()}
    node, driver = DdsTransport(env=env), DdsTransport(env=env)
    sim, bridge, cap = world(devices={"WaistGyro": {"topic": "/imu_driver/data"}}, transport=node, log=logs.append)
    try:
        src = bridge.hil.sources["WaistGyro"]
        pub = driver.advertise("/imu_driver/data", msg.IMU, SENSOR)
        assert driver.wait_for_subscribers(pub, timeout=10)
        for k in range(3):
            w = np.array([0.1, -0.2, 0.3]) * (k + 1)
            driver.publish(pub, msg.imu(50.0 + k, "imu_link", gyro=w))
            wait_for(lambda: src.received == k + 1, what=f"driver message {k}")
            step_until_reading(sim, bridge, "WaistGyro")
            np.testing.assert_array_equal(vector(cap.got["/SR1/WaistGyro"][-1]), w)
        assert src.stats()["device_stamp"] == pytest.approx(52.0)       # the driver's header stamp
    finally:
        bridge.close()
        node.close()
        driver.close()


def test_a_sensor_with_a_device_keeps_its_own_topic_under_merge_imu(tmp_path):
    port = tmp_path / "imu"
    dev = PtyDevice(port)
    sim, bridge, cap = world(devices={"WaistAccelSensor": {"port": str(port), "protocol": "csv"}}, merge_imu=True)
    try:
        topics = set(cap.stats())
        assert {"/SR1/WaistAccelSensor", "/SR1/WaistAccelSensor/sim", "/SR1/WaistGyro"} <= topics
        assert not any(t.endswith("_imu") for t in topics)       # the waist pair is not merged
        assert cap.stats()["/SR1/WaistAccelSensor/sim"]["type"] == "sensor_msgs/msg/Imu"
    finally:
        bridge.close()
        dev.close()


def test_one_driver_imu_topic_feeds_the_accelerometer_and_the_gyro(logs):
    sim, bridge, cap = world(devices={"WaistAccelSensor": {"topic": "/imu/data"}, "WaistGyro": {"topic": "/imu/data"}},
                             log=logs.append)
    try:
        a, w = np.array([0.5, -0.5, 9.0]), np.array([0.01, 0.02, -0.03])
        cap.deliver("/imu/data", msg.imu(1.0, "imu_link", accel=a, gyro=w))
        step_until_reading(sim, bridge, "WaistGyro")
        np.testing.assert_array_equal(vector(cap.got["/SR1/WaistAccelSensor"][-1]), a)
        np.testing.assert_array_equal(vector(cap.got["/SR1/WaistGyro"][-1]), w)
    finally:
        bridge.close()
