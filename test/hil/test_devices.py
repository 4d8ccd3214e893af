"""Real devices in place of simulated sensors (devices: section) on the bundled SR1 world: device
emulators of our own on pseudo-terminals speak each protocol (through the protocols' encoders)
with generated data; what the node publishes on the sensor's topic must be that data in SI
units and the sensor frame, the simulated value must go to <topic>/sim, and /diagnostics must
say what happened."""
import math

import numpy as np
import pytest
from harness import floats, status, step_until_reading, vector, world
from ptys import EmulatedDevice, PtyDevice, wait_for

from mbsim_ros.hil.protocols import make_encoder
from mbsim_ros.ros import messages as msg


def rz(angle):
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])


def sensor(sim, name):
    return sim.devices[name].sensor


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
        encoder = make_encoder(options, sensor(sim, "WaistAccelSensor"))
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
