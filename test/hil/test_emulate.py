"""Simulated sensors written out of serial ports (emulate:), read back by our own parsers acting
as the host at the other end of a pseudo-terminal: they must give back the simulated readings
to the protocol's resolution."""
import math

import numpy as np
import pytest
from harness import model_sensor, status, step_until_reading, world
from ptys import PtyDevice, wait_for

from mbsim_ros.hil.protocols import make_parser


class Host:
    """A host (a controller board, a driver) at the master of the pty, with our parser."""

    def __init__(self, pty, parser):
        self.pty, self.parser = pty, parser
        self.samples = []
        pty.write(parser.startup())

    def pump(self):
        """Read what the node wrote, parse it and answer (the parser's pending output)."""
        data = self.pty.read(0.01)
        if data:
            self.samples += self.parser.feed(data)
            self.pty.write(self.parser.pending_output())

    def until(self, predicate, what):
        def pumped():
            self.pump()
            return predicate()
        wait_for(pumped, what=what)


def test_scip2_emulation_read_by_our_scip2_parser_gives_back_the_simulated_scan(tmp_path):
    port = tmp_path / "hokuyo"
    pty = PtyDevice(port)
    sim, bridge, cap = world(emulate={"ChestRange": {"port": str(port), "protocol": "scip2"}},
                             sensors={"ChestRange": {"rate": 40.0}})
    em = bridge.hil.emulators["ChestRange"]
    try:
        wait_for(lambda: em.link.connected, what="the node to open the pty")
        host = Host(pty, make_parser({"protocol": "scip2"}, model_sensor("ChestRange")))
        host.until(lambda: em.encoder.stream is not None, "the handshake (SCIP2.0, QT, PP, MD)")
        readings = {}
        for k in range(6):
            r = step_until_reading(sim, bridge, "ChestRange")
            readings[round(r.stamp * 1000)] = r.values
            host.until(lambda: len(host.samples) == k + 1, f"scan {k}")
        dev = sim.devices["ChestRange"]
        hits = 0
        for s in host.samples:
            expected = readings[round(s.stamp * 1000)]          # the scan's device timestamp (ms) is its stamp
            finite = np.isfinite(expected)
            hits += finite.sum()
            # millimetres on the wire: the simulated distance rounded to the mm, exactly
            np.testing.assert_array_equal(np.rint(s.values[finite] * 1000), np.rint(expected[finite] * 1000))
            assert np.abs(s.values[finite] - expected[finite]).max() <= 0.0005 + 1e-12
            np.testing.assert_array_equal(s.values[~finite], expected[~finite])
            assert len(s.values) == len(dev.angles)
        assert hits > 100                                  # the scan sees the floor and the world, not only +inf
        # the emulator counts a frame once its write returned, which may be after the host read it
        wait_for(lambda: status(bridge, "mbsim: emulate ChestRange")[2]["frames"] >= 6, what="the frame count")
        values = status(bridge, "mbsim: emulate ChestRange")[2]
        assert values["frames"] == 6 and values["dropped"] == 0 and values["replies"] >= 2       # SCIP2.0 QT PP, then MD
    finally:
        bridge.close()
        pty.close()


@pytest.mark.parametrize("protocol, options, resolution", [
    ("csv", {"fields": ["t", "ax", "ay", "az"]}, 0.0),          # repr(float) round-trips exactly
    ("xsens", {"precision": "float32"}, 2e-7),                 # float32 on the wire: relative 2^-23
])
def test_imu_emulation_read_by_our_parser_gives_back_the_simulated_readings(tmp_path, protocol, options, resolution):
    port = tmp_path / "imu"
    pty = PtyDevice(port)
    entry = dict(options, port=str(port), protocol=protocol, rotation=[0.0, 0.0, math.pi / 2])
    sim, bridge, cap = world(emulate={"WaistAccelSensor": entry})
    em = bridge.hil.emulators["WaistAccelSensor"]
    try:
        wait_for(lambda: em.link.connected, what="the node to open the pty")
        host = Host(pty, make_parser({"protocol": protocol, **{k: v for k, v in options.items() if k != "precision"}},
                                     model_sensor("WaistAccelSensor")))
        sent = []
        for _ in range(50):
            sent.append(step_until_reading(sim, bridge, "WaistAccelSensor"))
        host.until(lambda: len(host.samples) >= 50, "50 samples")
        rz_t = np.array([[0.0, 1, 0], [-1, 0, 0], [0, 0, 1]])        # sensor -> device: R(yaw pi/2)^T
        got = np.array([s.values for s in host.samples[-50:]])
        expected = np.array([r.values for r in sent]) @ rz_t.T
        np.testing.assert_allclose(got, expected, rtol=resolution, atol=1e-12)
        stamps = [s.stamp for s in host.samples[-50:]]
        # xsens stamps in 100 us ticks, csv carries the float
        np.testing.assert_allclose(stamps, [r.stamp for r in sent], atol=1e-4 if protocol == "xsens" else 1e-12)
        assert status(bridge, "mbsim: emulate WaistAccelSensor")[2]["dropped"] == 0
    finally:
        bridge.close()
        pty.close()


def test_an_accelerometer_and_a_gyro_on_one_port_are_one_emulated_xsens_mti(tmp_path):
    port = tmp_path / "mti"
    pty = PtyDevice(port)
    entry = {"port": str(port), "protocol": "xsens", "precision": "float64"}
    sim, bridge, cap = world(emulate={"WaistAccelSensor": dict(entry, rotation=[math.pi, 0, 0]), "WaistGyro": entry})
    em = bridge.hil.emulators["WaistGyro"]
    assert em is bridge.hil.emulators["WaistAccelSensor"]
    try:
        wait_for(lambda: em.link.connected, what="the node to open the pty")
        acc = Host(pty, make_parser({"protocol": "xsens"}, model_sensor("WaistAccelSensor")))
        gyro = make_parser({"protocol": "xsens"}, model_sensor("WaistGyro"))
        gyro_samples = []
        feed = acc.parser.feed

        def both(data):                  # one byte stream, two parsers (as the node reads a real MTi)
            gyro_samples.extend(gyro.feed(data))
            return feed(data)
        acc.parser.feed = both
        sent = []
        for _ in range(20):
            step_until_reading(sim, bridge, "WaistGyro")
            r = sim.readings()
            assert r["WaistGyro"].stamp == r["WaistAccelSensor"].stamp
            sent.append((r["WaistAccelSensor"].values, r["WaistGyro"].values))
        acc.until(lambda: len(acc.samples) >= 20 and len(gyro_samples) >= 20, "20 messages")
        flip = np.diag([1.0, -1.0, -1.0])                          # roll pi: sensor -> device for the accelerometer
        # float64 on the wire: exact but for cos(pi)'s 1e-16 in the rotation
        np.testing.assert_allclose([s.values for s in acc.samples[-20:]], [flip @ a for a, _ in sent], atol=1e-12)
        np.testing.assert_array_equal([s.values for s in gyro_samples[-20:]], [g for _, g in sent])
        # counted once the write returned, which may be after the host read the frame
        wait_for(lambda: status(bridge, "mbsim: emulate WaistAccelSensor+WaistGyro")[2]["frames"] >= 20,
                 what="the frame count to reach the 20 frames the host read")
    finally:
        bridge.close()
        pty.close()
