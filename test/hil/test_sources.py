"""DeviceSource on its own: arrival stamps on the simulation clock, max_age, hold-latest
resampling, the states and what the topic carries in each, the residual window."""
import math

import numpy as np
import pytest

from mbsim_ros.hil.config import check_section, rotation_matrix
from mbsim_ros.hil.sources import DeviceSource, SimClock


def source(on_fault="hold", kind="gyro", channels=3, rate=1000.0, connected=True, **options):
    entry = check_section("devices", {"S": dict({"port": "/dev/x", "protocol": "csv", "on_fault": on_fault},
                                                 **options)}, "test")["S"]
    clock = SimClock()
    logs = []
    return DeviceSource("S", kind, channels, rate, entry, clock, log=logs.append, connected=connected), clock, logs


def test_a_sample_is_used_while_it_is_at_most_max_age_old_then_the_device_is_stale():
    src, clock, logs = source(max_age=0.01)
    sim = np.zeros(3)
    assert src.take(0.0, 0.0, sim) is None and src.state == "stale"       # hold, nothing received yet
    clock.t = 0.002
    src.push([1.0, 2.0, 3.0])
    np.testing.assert_array_equal(src.take(0.002, 0.003, sim), [1, 2, 3])
    assert src.state == "ok" and src.age == pytest.approx(0.001)
    np.testing.assert_array_equal(src.take(0.011, 0.012, sim), [1, 2, 3])   # age 10 ms: still fresh
    assert src.state == "ok"
    np.testing.assert_array_equal(src.take(0.012, 0.0125, sim), [1, 2, 3])  # 10.5 ms: stale, held
    assert src.state == "stale" and src.used == 2 and src.published == 3
    assert logs == ["S: device /dev/x stale -> ok (receiving); the topic carries the real device",
                    "S: device /dev/x ok -> stale (no sample for 0.0105 s (max_age 0.01 s)); the topic "
                    "carries the last real value"]


def test_resampling_holds_the_newest_sample_and_counts_the_overtaken():
    src, clock, _ = source()
    for k in range(5):
        src.push([k, 0, 0])
    np.testing.assert_array_equal(src.take(0.0, 0.001, np.zeros(3)), [4, 0, 0])
    assert src.superseded == 4 and src.received == 5
    np.testing.assert_array_equal(src.take(0.001, 0.002, np.zeros(3)), [4, 0, 0])   # held (age 2 ms)
    assert src.superseded == 4 and src.used == 2


@pytest.mark.parametrize("on_fault, carries", [("hold", "held"), ("sim", "sim"), ("drop", None)])
def test_down_follows_on_fault(on_fault, carries):
    src, clock, _ = source(on_fault)
    src.push([5.0, 6.0, 7.0])
    src.take(0.0, 0.0, np.zeros(3))
    src.set_connected(False, "unplugged")
    assert src.state == "down"
    out = src.take(0.5, 0.5, np.full(3, 9.0))
    expected = {"held": [5, 6, 7], "sim": [9, 9, 9], None: None}[carries]
    assert (out is None) if expected is None else np.array_equal(out, expected)
    assert src.state == "down" and src.state_reason == "unplugged"
    src.set_connected(True)
    assert src.state == "stale"


def test_after_a_reset_older_samples_are_not_fresh():
    src, clock, _ = source()
    clock.t = 5.0
    src.push([1.0, 1.0, 1.0])
    src.take(5.0, 5.0, np.zeros(3))
    assert src.state == "ok"
    src.take(0.0, 0.001, np.zeros(3))            # the simulation restarted at t = 0
    assert src.state == "stale" and "reset" in src.state_reason


def test_rotation_takes_device_vectors_into_the_sensor_frame():
    src, _, _ = source(kind="force", channels=6, rotation=[0.0, 0.0, math.pi / 2])
    src.push([1.0, 0, 0, 0, 2.0, 0])
    out = src.take(0.0, 0.0, np.zeros(6))
    np.testing.assert_allclose(out, [0, 1, 0, -2, 0, 0], atol=1e-15)     # x -> y, y -> -x: force and torque
    R = rotation_matrix([0.3, -0.2, 0.1])
    # URDF rpy: R = Rz(yaw) Ry(pitch) Rx(roll)
    c, s = np.cos, np.sin
    Rx = np.array([[1, 0, 0], [0, c(0.3), -s(0.3)], [0, s(0.3), c(0.3)]])
    Ry = np.array([[c(-0.2), 0, s(-0.2)], [0, 1, 0], [-s(-0.2), 0, c(-0.2)]])
    Rz = np.array([[c(0.1), -s(0.1), 0], [s(0.1), c(0.1), 0], [0, 0, 1]])
    np.testing.assert_allclose(R, Rz @ Ry @ Rx, atol=1e-15)
    assert src.push([1.0, 2.0]) is False and src.faults["layout"] == 1


def test_the_residual_window_keeps_the_last_window_of_instants():
    src, clock, _ = source(residual_window=0.004)     # 4 instants at 1 kHz
    rng = np.random.default_rng(0)
    rows = []
    for k in range(10):
        real, sim = rng.normal(size=3), rng.normal(size=3)
        src.push(real)
        src.take(0.001 * k, 0.001 * k, sim)
        rows.append(real - sim)
    mean, rms, n = src.residual()
    last = np.array(rows[-4:])
    assert n == 4
    np.testing.assert_allclose(mean, last.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(rms, np.sqrt((last ** 2).mean(axis=0)), rtol=1e-12)


def test_a_scan_residual_is_over_rays_finite_in_both():
    src, _, _ = source(kind="range", channels=4)
    src.push([1.0, np.inf, 2.0, -np.inf])
    src.take(0.0, 0.0, np.array([0.5, 1.0, np.inf, -np.inf]))
    mean, rms, n = src.residual()
    assert (mean, rms, n) == (0.5, 0.5, 1)          # only ray 0 is finite in both
