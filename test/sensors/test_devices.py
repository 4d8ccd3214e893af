"""Devices: rates, delay, saturation, noise statistics and seeds, range and camera readings
through the Simulation, and configuration errors."""
import math

import numpy as np
import pytest

import mbsim_ros as mb
from mbsim_ros.model import Joint, Link, Model, Sensor, Shape
from mbsim_ros.sensors.noise import Noise, NoiseProcess, device_rng

G = 9.80665


def pose(p=(0, 0, 0)):
    T = np.eye(4)
    T[:3, 3] = p
    return T


def pendulum(sensors=()):
    """A link hanging at rest on a hinge, carrying the given sensors."""
    m = Model("p")
    m.add_link(Link("l", 1.0, [0, 0, -0.5], np.diag([0.1, 0.1, 0.1])))
    m.add_joint(Joint("j", "revolute", None, "l", axis=(1, 0, 0)))
    m.sensors += list(sensors)
    return m.finalize()


def test_each_device_samples_at_its_own_rate_on_a_fixed_grid():
    m = pendulum([Sensor("acc", "accelerometer", "l"), Sensor("gyro", "gyro", "l")])
    sim = mb.Simulation(m, dt=0.001, sensors={"gyro": {"rate": 250}})
    stamps = {"acc": [], "gyro": []}
    for _ in range(20):
        sim.step()
        for name, r in sim.readings().items():
            if not stamps[name] or stamps[name][-1] != r.stamp:
                stamps[name].append(r.stamp)
    # 1 kHz (default, = physics): a new reading every step; 250 Hz: every 4th step
    np.testing.assert_allclose(stamps["acc"], np.arange(20) * 0.001, atol=1e-12)
    np.testing.assert_allclose(stamps["gyro"], np.arange(5) * 0.004, atol=1e-12)


def test_step_n_samples_the_same_instants_as_n_single_steps():
    m = pendulum([Sensor("acc", "accelerometer", "l")])
    a = mb.Simulation(m, sensors={"acc": {"rate": 300, "noise": {"stddev": 0.1}}})
    b = mb.Simulation(m, sensors={"acc": {"rate": 300, "noise": {"stddev": 0.1}}})
    a.step(37)
    for _ in range(37):
        b.step()
    ra, rb = a.readings()["acc"], b.readings()["acc"]
    assert ra.stamp == rb.stamp == pytest.approx(0.034)
    assert np.array_equal(ra.values, rb.values)


def test_a_delayed_reading_appears_delay_seconds_after_its_stamp_with_that_stamp():
    m = pendulum([Sensor("acc", "accelerometer", "l")])
    sim = mb.Simulation(m, dt=0.001, sensors={"acc": {"rate": 100, "delay": 0.0035}})
    sim.step(3)
    assert "acc" not in sim.readings()          # sampled at t = 0, visible from t = 0.0035
    sim.step(1)
    r = sim.readings()["acc"]
    assert r.stamp == 0.0 and sim.t == pytest.approx(0.004)
    sim.step(9)                                 # the 0.01 s sample is visible from 0.0135
    assert sim.readings()["acc"].stamp == 0.0
    sim.step(1)
    assert sim.readings()["acc"].stamp == pytest.approx(0.01)


def test_saturation_clips_at_the_max_fields_and_says_so():
    s = Sensor("acc", "accelerometer", "l", params={"maxAcceleration": np.array([5.0, 5.0, 5.0])})
    sim = mb.Simulation(pendulum([s]), sensors={"acc": {"saturate": True}})
    sim.step(2)
    r = sim.readings()["acc"]
    assert r.saturated and r.values[2] == 5.0
    plain = mb.Simulation(pendulum([s]))
    plain.step(2)
    assert not plain.readings()["acc"].saturated and plain.readings()["acc"].values[2] == pytest.approx(G)


# ----------------------------------------------------------------------------- noise ---
def test_white_noise_has_the_configured_mean_and_stddev():
    proc = NoiseProcess([Noise(mean=0.3, stddev=0.05)] * 3, device_rng(7, "imu"))
    x = np.array([proc.apply(np.zeros(3), 0.001) for _ in range(100_000)])
    # sample mean within 5 standard errors (0.05 / sqrt(1e5) = 1.6e-4); stddev within 1 %
    np.testing.assert_allclose(x.mean(axis=0), 0.3, atol=5 * 0.05 / math.sqrt(1e5))
    np.testing.assert_allclose(x.std(axis=0), 0.05, rtol=0.01)


def test_turn_on_bias_is_constant_per_run_with_a_random_sign_and_the_configured_spread():
    biases = np.array([NoiseProcess([Noise(bias_mean=1.0, bias_stddev=0.1)], device_rng(s, "g")).turn_on_bias[0]
                       for s in range(4000)])
    assert (biases > 0).mean() == pytest.approx(0.5, abs=0.05)
    np.testing.assert_allclose(np.abs(biases).mean(), 1.0, atol=0.01)
    np.testing.assert_allclose(np.abs(biases).std(), 0.1, rtol=0.05)
    proc = NoiseProcess([Noise(bias_mean=1.0)], device_rng(1, "g"))
    assert len({float(proc.apply(np.zeros(1), 0.001)[0]) for _ in range(10)}) == 1


def test_bias_drift_is_a_gauss_markov_process_with_the_configured_stationary_stddev():
    sigma, tau, dt = 0.2, 0.05, 0.001
    proc = NoiseProcess([Noise(dynamic_bias_stddev=sigma, dynamic_bias_correlation_time=tau)], device_rng(3, "d"))
    x = np.array([proc.apply(np.zeros(1), dt)[0] for _ in range(200_000)])
    # Gazebo's (RotorS') discretization makes sigma a density: the stationary stddev is
    # sigma sqrt(tau / 2). 200 s = 4000 correlation times: ~3 % sampling error, allowed 10 %;
    # lag-tau autocorrelation exp(-1)
    assert x.std() == pytest.approx(sigma * math.sqrt(tau / 2), rel=0.1)
    lag = int(tau / dt)
    r = np.corrcoef(x[:-lag], x[lag:])[0, 1]
    assert r == pytest.approx(math.exp(-1), abs=0.05)


def test_precision_quantizes():
    proc = NoiseProcess([Noise(stddev=0.3, precision=0.25)], device_rng(0, "q"))
    x = np.array([proc.apply(np.full(1, 1.0), 0.001)[0] for _ in range(1000)])
    np.testing.assert_allclose(x / 0.25, np.round(x / 0.25), atol=1e-12)
    assert len(set(x)) > 3


def test_the_same_seed_gives_the_same_readings_bit_for_bit_and_another_seed_does_not():
    sensors = [Sensor("acc", "accelerometer", "l"), Sensor("gyro", "gyro", "l")]
    config = {"acc": {"noise": {"stddev": 0.1, "bias_stddev": 0.1, "dynamic_bias_stddev": 0.01,
                                "dynamic_bias_correlation_time": 1.0}},
              "gyro": {"noise": [{"stddev": 0.01}, {"stddev": 0.02}, {"stddev": 0.03, "precision": 0.001}]}}

    def run(seed):
        sim = mb.Simulation(pendulum(sensors), seed=seed, sensors=config)
        out = []
        for _ in range(50):
            sim.step()
            out.append(np.concatenate([r.values for r in sim.readings().values()]))
        return np.array(out)
    a, b, c = run(11), run(11), run(12)
    assert np.array_equal(a, b)
    assert not np.allclose(a, c)
    # a device's noise depends on its own name and the seed only: adding a sensor changes nothing
    more = mb.Simulation(pendulum(sensors + [Sensor("acc2", "accelerometer", "l")]), seed=11, sensors=config)
    more.step(50)
    assert np.array_equal(more.readings()["acc"].values, a[-1, :3])


def test_reset_restarts_the_schedule_and_the_noise():
    m = pendulum([Sensor("acc", "accelerometer", "l")])
    sim = mb.Simulation(m, sensors={"acc": {"noise": {"stddev": 0.1}}})
    sim.step(5)
    first = sim.readings()["acc"]
    sim.reset()
    assert sim.readings() == {}
    sim.step(5)
    again = sim.readings()["acc"]
    assert again.stamp == first.stamp and np.array_equal(again.values, first.values)


# ------------------------------------------------------------------ range and camera ---
def wall_world(d, sensors, color=(0.2, 0.6, 0.9)):
    """A sensor mount welded to the world at the origin (its -Z faces the wall) and a wall
    whose near face is the plane z = -d."""
    robot = Model("robot")
    robot.add_link(Link("mount", 1.0, [0, 0, 0], np.eye(3) * 0.01))
    robot.add_joint(Joint("weld", "fixed", None, "mount"))
    robot.sensors += sensors
    robot.finalize()
    wall = Model("wall")
    box = Shape("box", pose=pose((0, 0, -d - 0.05)), size=[40, 40, 0.1], color=[*color, 1.0])
    wall.add_link(Link("wall", 1.0, [0, 0, 0], np.eye(3) * 0.01, visuals=[box], collisions=[box]))
    wall.add_joint(Joint("wall_weld", "fixed", None, "wall"))
    return [robot, wall.finalize()]


def test_a_range_sensor_facing_a_wall_reads_d_centrally_and_d_over_cos_theta_off_axis():
    d = 2.0
    s = Sensor("scan", "range", "mount", params={"scanAngle": 2.0, "scanStep": 0.01, "scanRate": 20.0,
                                                  "maxDistance": 30.0})
    sim = mb.Simulation(wall_world(d, [s]))
    sim.step(1)
    r = sim.readings()["scan"]
    dev = sim.devices["scan"]
    n = 2 * math.floor(2.0 / 2 / 0.01) + 1
    assert len(r.values) == n == 201 and r.frame == "scan_laser_frame"
    assert (dev.angle_min, dev.angle_max) == pytest.approx((-1.0, 1.0))
    # the ray cast is exact for a box face: 1e-9 m is rounding
    np.testing.assert_allclose(r.values, d / np.cos(dev.angles), rtol=1e-9)
    assert r.values[n // 2] == pytest.approx(d, rel=1e-12)


def test_a_range_sensor_with_nothing_in_range_reads_plus_inf():
    s = Sensor("scan", "range", "mount", params={"scanAngle": 1.0, "scanStep": 0.1, "maxDistance": 1.5})
    sim = mb.Simulation(wall_world(2.0, [s]))          # the wall is beyond maxDistance
    sim.step(1)
    assert np.all(sim.readings()["scan"].values == np.inf)


def test_a_camera_facing_a_wall_sees_its_depth_everywhere_and_its_color_at_the_center():
    d = 3.0
    s = Sensor("cam", "camera", "mount", params={"type": "COLOR_DEPTH", "width": 64, "height": 48,
                                                  "fieldOfView": 0.8, "frontClipDistance": 0.1,
                                                  "backClipDistance": 10.0, "frameRate": 30.0})
    sim = mb.Simulation(wall_world(d, [s], color=(1.0, 0.0, 0.0)))
    sim.step(1)
    r = sim.readings()["cam"]
    dev = sim.devices["cam"]
    assert r.frame == "cam_optical_frame"
    assert r.values.color.shape == (48, 64, 3) and r.values.depth.dtype == np.float32
    # float32 depth of an exact plane: relative 1e-6
    np.testing.assert_allclose(r.values.depth, d, rtol=1e-6)
    red, green, blue = r.values.color[24, 32].astype(int)
    assert red > 50 and green == 0 and blue == 0
    assert dev.fx == dev.fy == pytest.approx((min(64, 48) / 2) / math.tan(0.8 / 2))
    assert (dev.cx, dev.cy) == (31.5, 23.5)


def test_camera_modes_give_the_images_they_name_and_none_gives_no_readings():
    params = dict(width=16, height=12, fieldOfView=0.8, frontClipDistance=0.1, backClipDistance=10.0)
    sensors = [Sensor(mode, "camera", "mount", params=dict(params, type=mode))
               for mode in ("COLOR", "DEPTH", "MONO", "MONO_DEPTH", "NONE")]
    sim = mb.Simulation(wall_world(2.0, sensors))
    sim.step(1)
    r = sim.readings()
    assert r["COLOR"].values.color.shape == (12, 16, 3) and r["COLOR"].values.depth is None
    assert r["DEPTH"].values.color is None and r["DEPTH"].values.depth.shape == (12, 16)
    assert r["MONO"].values.color.shape == (12, 16) and r["MONO"].values.depth is None
    assert r["MONO_DEPTH"].values.color.shape == (12, 16) and r["MONO_DEPTH"].values.depth is not None
    assert "NONE" not in r
    # rendered into page-aligned memory, which a bag with O_DIRECT writes without a copy (ros/direct_file.py)
    images = [a for mode in ("COLOR", "DEPTH", "MONO", "MONO_DEPTH") for a in r[mode].values if a is not None]
    assert len(images) == 5 and all(a.ctypes.data % 4096 == 0 and a.flags.c_contiguous for a in images)


def test_camera_noise_has_the_configured_stddev_in_color_and_depth():
    """Color noise (a fraction of full scale) and depth noise (metres) on a wall: uint8 frames,
    clipped to 0-255, with the configured stddev."""
    s = Sensor("cam", "camera", "mount", params={"type": "COLOR_DEPTH", "width": 64, "height": 48,
                                                  "fieldOfView": 0.8, "frontClipDistance": 0.1,
                                                  "backClipDistance": 10.0, "frameRate": 30.0})
    frames = {}
    for noise in (None, {"color": {"stddev": 0.05}, "depth": {"stddev": 0.01}}):
        sim = mb.Simulation(wall_world(3.0, [s], color=(1.0, 0.0, 0.0)), sensors={"cam": {"noise": noise}})
        sim.step(1)
        frames[noise is None] = sim.readings()["cam"].values
    clean, noisy = frames[True], frames[False]
    assert noisy.color.dtype == np.uint8 and (noisy.color != clean.color).mean() > 0.5
    assert noisy.color.ctypes.data % 4096 == 0 and noisy.depth.ctypes.data % 4096 == 0   # as noiseless frames
    # 0.05 of 255 ~ 12.75 counts; the black channels clip at 0, so only red is compared
    assert np.std(noisy.color[..., 0].astype(float) - clean.color[..., 0]) == pytest.approx(12.75, rel=0.15)
    assert np.std(noisy.depth - clean.depth) == pytest.approx(0.01, rel=0.15)


def test_a_camera_samples_at_its_frame_rate():
    s = Sensor("cam", "camera", "mount", params={"type": "DEPTH", "width": 8, "height": 6, "frameRate": 30.0})
    sim = mb.Simulation(wall_world(2.0, [s]), dt=0.001)
    stamps = set()
    for _ in range(200):
        sim.step()
        stamps.add(round(sim.readings()["cam"].stamp, 9))
    # instants k/30 reached at the first step on or after them
    assert sorted(stamps) == pytest.approx([0.001, 0.034, 0.067, 0.1, 0.134, 0.167, 0.2])


# --------------------------------------------------------------------------- errors ---
@pytest.mark.parametrize("config, message", [
    ({"nope": {}}, r"unknown sensor\(s\) nope; the models have acc"),
    ({"acc": {"rat": 5}}, r"sensors\.acc: unknown key\(s\) rat"),
    ({"acc": {"rate": -1}}, r"sensors\.acc\.rate: expected a finite number > 0"),
    ({"acc": {"noise": {"stdev": 1}}}, r"sensors\.acc\.noise: unknown noise field\(s\) stdev"),
    ({"acc": {"noise": [{}, {}]}}, r"2 noise blocks for 3 channels"),
    ({"acc": 5}, r"sensors\.acc: expected a mapping"),
])
def test_bad_sensor_configuration_names_the_sensor_and_the_field(config, message):
    with pytest.raises(mb.SensorConfigError, match=message):
        mb.Simulation(pendulum([Sensor("acc", "accelerometer", "l")]), sensors=config)


def test_a_frame_pool_reuses_a_frame_only_once_nothing_refers_to_it():
    """FramePool (sensors/optical.py): page-aligned frames of its shape; a frame comes back only
    when no view, memoryview or array made from it is alive (a bag may hold an image's pixels
    until it has written them), else a new one; past its limit it allocates without keeping."""
    from mbsim_ros.sensors.optical import FramePool
    for make in (lambda f: memoryview(f.reshape(-1).view(np.uint8)), lambda f: f[2:],
                 lambda f: np.frombuffer(f, np.uint8)):
        pool = FramePool((6, 8, 3), np.uint8)
        a = pool.take()
        assert a.shape == (6, 8, 3) and a.dtype == np.uint8 and a.ctypes.data % 4096 == 0 and a.flags.c_contiguous
        address = a.ctypes.data
        ref = make(a)
        del a
        assert pool.take().ctypes.data != address      # held through `ref` alone: another frame
        del ref
        assert pool.take().ctypes.data == address      # free again: reused
    frames = [pool.take() for _ in range(70)]          # 64 kept, 6 more allocated, all distinct
    assert len({f.ctypes.data for f in frames}) == 70 and len(pool._owners) == pool.limit == 64
    assert FramePool((1080, 1920, 3), np.uint8).limit == 16      # 6 MB frames: 64 MiB would be 10
    assert FramePool((480, 640, 3), np.uint8).limit == 18        # VGA: 16 MiB, what it keeps for good
    depth = FramePool((6, 8), np.float32).take()
    assert depth.dtype == np.float32 and depth.shape == (6, 8) and depth.ctypes.data % 4096 == 0
    pool = FramePool((240, 320, 3), np.uint8)          # 8 frames of 56.25 pages in 2 MiB
    frames = [pool.take() for _ in range(9)]
    starts = [f.ctypes.data for f in frames]
    assert starts[0] % (2 << 20) == 0 and starts[1:8] == [starts[0] + 57 * 4096 * k for k in range(1, 8)]
    assert starts[8] % (2 << 20) == 0 and len(pool._owners) == 16      # a second huge page's 8


def test_huge_page_memory_starts_on_a_huge_page_and_asks_for_huge_pages():
    """huge_page_memory (sensors/optical.py): writable memory of the size asked, starting at a
    2 MiB boundary, in a mapping advised for transparent huge pages (VmFlags "hg"), so that an
    O_DIRECT write of the frames and the bag's staging buffer pins one entry per 2 MiB; with
    touch, faulted in before it is returned (no page of it is resident otherwise)."""
    from mbsim_ros.sensors.optical import huge_page_memory
    from proc_maps import mapping
    for nbytes in (1, 233472 * 8, 8 << 20, (8 << 20) + 4096):
        memory = huge_page_memory(nbytes)
        array = np.frombuffer(memory, np.uint8)
        array[:] = 7
        assert len(memory) == nbytes and not memory.readonly
        assert array.ctypes.data % (2 << 20) == 0
        first, last = mapping(array.ctypes.data), mapping(array.ctypes.data + nbytes - 1)
        assert "hg" in first["VmFlags"] and "hg" in last["VmFlags"]
    untouched, touched = huge_page_memory(8 << 20), huge_page_memory(8 << 20, touch=True)
    assert mapping(np.frombuffer(untouched, np.uint8).ctypes.data)["Rss"] == 0
    assert mapping(np.frombuffer(touched, np.uint8).ctypes.data)["Rss"] >= 8192     # kB: faulted in already
