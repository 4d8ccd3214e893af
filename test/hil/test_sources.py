"""DeviceSource on its own: arrival stamps on the simulation clock, max_age, hold-latest
resampling, the states and what the topic carries in each, the residual window."""
import math

import numpy as np
import pytest

from mbsim_ros.hil.entries import check_section, rotation_matrix
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
    assert src.take(0.0015, 0.002, sim) is None                             # arrived after this instant
    np.testing.assert_array_equal(src.take(0.003, 0.004, sim), [1, 2, 3])
    assert src.state == "ok" and src.age == pytest.approx(0.001)
    np.testing.assert_array_equal(src.take(0.012, 0.013, sim), [1, 2, 3])   # age 10 ms: still fresh
    assert src.state == "ok"
    np.testing.assert_array_equal(src.take(0.0125, 0.013, sim), [1, 2, 3])  # 10.5 ms: stale, held
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
    clock.tick(5.0)
    src.push([1.0, 1.0, 1.0])
    src.push([2.0, 2.0, 2.0])
    src.take(5.0, 5.0, np.zeros(3))
    assert src.state == "ok"
    clock.tick(0.001)                            # the simulation restarted at t = 0
    assert src.take(0.0, 0.001, np.zeros(3)) is None and src.state == "stale" and "reset" in src.state_reason
    src.push([3.0, 3.0, 3.0])
    np.testing.assert_array_equal(src.take(0.001, 0.002, np.zeros(3)), [3, 3, 3])


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


@pytest.mark.parametrize("resample", ["newest", "each"])
def test_arrival_jitter_at_equal_rates(resample):
    """A 1 kHz device read into a 1 kHz sensor whose samples arrive 0, 1 or 2 per step (jitter
    below a period): 'each' publishes every sample once, in order; 'newest' skips some."""
    src, clock, _ = source(resample=resample)
    arrivals = [1, 2, 0, 1, 2, 0, 0, 2, 1, 1, 2, 0, 1] * 5         # per step; never more than one ahead or behind
    out, k = [], 0
    for n, count in enumerate(arrivals):
        clock.t = 0.001 * n                                         # the last completed step
        for _ in range(count):
            src.push([k, 0, 0])
            k += 1
        out.append(src.take(0.001 * n, 0.001 * (n + 1), np.zeros(3))[0])
    distinct = sorted(set(out))
    assert out == sorted(out)                                        # in order either way
    if resample == "each":
        # every sample but the backlog still queued at the end, once
        assert distinct == list(range(len(distinct))) and len(distinct) >= k - 2 and src.superseded == 0
    else:
        assert len(distinct) < k and src.superseded == k - len(distinct)


def test_each_catches_up_after_a_burst_within_two_periods():
    src, clock, _ = source(resample="each")
    for k in range(5):
        src.push([k, 0, 0])                                          # five at once, at t = 0
    got = [src.take(0.001 * n, 0.001 * (n + 1), np.zeros(3))[0] for n in range(5)]
    # the oldest first, one per instant while they are at most two periods old, then the newest
    assert got == [0, 1, 2, 4, 4] and src.superseded == 1


def test_a_sample_stamped_ahead_of_the_simulation_waits_for_its_instant():
    """While the physics catches up after a stall, the schedule stamps arrivals ahead of it."""
    src, clock, _ = source()
    clock.schedule = lambda: 0.0
    src.push([1.0, 0, 0])
    clock.schedule = lambda: 0.004                 # arrived 4 ms later by the wall clock
    src.push([2.0, 0, 0])
    assert src.take(0.0, 0.001, np.zeros(3))[0] == 1
    assert src.take(0.003, 0.004, np.zeros(3))[0] == 1      # held: sample 2 belongs to t = 4 ms
    assert src.take(0.004, 0.005, np.zeros(3))[0] == 2
    assert src.superseded == 0


def test_the_runner_schedule_maps_the_wall_clock_to_simulation_time():
    import time

    import mbsim_ros as mb
    from mbsim_ros.model import Joint, Link, Model
    from mbsim_ros.run.pacing import Runner
    m = Model("pendulum")
    m.add_link(Link("l", 1.0, [0.2, 0, 0], np.diag([0.01, 0.01, 0.01])))
    m.add_joint(Joint("j", "revolute", None, "l"))
    m.finalize()
    sim = mb.Simulation(m)
    runner = Runner(sim, rtf=1.0)
    assert runner.sim_time() == sim.t                       # not running: the simulation's time
    runner.start()
    try:
        time.sleep(0.2)
        pairs = []
        for _ in range(50):
            wall = time.perf_counter()
            pairs.append((wall, runner.sim_time(wall), sim.t))
            time.sleep(0.002)
        walls, mapped, actual = np.array(pairs).T
        # locked clocks: the mapping advances with the wall clock at rtf 1 (exactly: it is linear)...
        np.testing.assert_allclose(np.diff(mapped), np.diff(walls), rtol=1e-9)
        # ...and the simulation follows it within scheduling noise (a 2-core box shared with
        # other jobs: mean lateness up to ~30 ms seen)
        assert np.median(np.abs(mapped - actual)) < 0.05
        runner.pause(wait=True, timeout=5)
        assert runner.sim_time() == sim.t                   # paused: no schedule
    finally:
        runner.stop()
        runner.join(5)


@pytest.mark.parametrize("timing", ["arrival", "device"])
def test_device_timing_and_a_delay_publish_every_sample_of_a_bursty_device(timing):
    """A 1 kHz device whose samples reach the node in bursts of 5 (USB frames), 0.3 ms after the
    last one's acquisition, its clock 1000 s off; the simulated sensor has a 6 ms delay (the
    jitter buffer). With the device's time each instant gets its own sample."""
    src, clock, _ = source(timing=timing)
    P, delay = 0.001, 0.006
    pending = [(5 * j + 4) * P + 0.0003 for j in range(40)]          # burst j: samples 5j..5j+4
    out = []
    for n in range(180):
        while pending and pending[0] <= n * P + delay:
            j = 40 - len(pending)
            arrival = pending.pop(0)
            clock.schedule = lambda: arrival
            for k in range(5 * j, 5 * j + 5):
                src.push([k, 0, 0], device_stamp=1000.0 + k * P)
        got = src.take(n * P, n * P + delay, np.zeros(3))
        out.append(None if got is None else int(got[0]))
    if timing == "device":
        # from the second burst on, sample k is stamped k ms + 0.3 ms (the least delay seen in
        # the first): instant n gets sample n - 1 (the first burst, before any offset, is
        # stamped on arrival)
        assert out[6:] == list(range(5, 179)) and src.superseded <= 4
    else:
        assert src.superseded > 100                     # a burst is one instant: 4 of 5 overtaken
