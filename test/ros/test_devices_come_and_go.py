"""Real devices that come and go, on a running sim_node (another process, paced at real-time
factor 1) watched by a real rclpy node here: a csv gyro on a pseudo-terminal that is unplugged
and plugged back (the same path, a new pty), and a force-torque driver's ROS topic that falls
silent and resumes. /diagnostics says stale (silent topic) within max_age + one diagnostics
period + one sensor period of simulated time, down (the port gone) within one diagnostics
period of the loss, the topics fall back as configured (on_fault hold: the last real wrench;
on_fault sim: the simulated rate of turn, the value of NS/WaistGyro/sim), and when the devices
return their readings come back; /clock advances all along (the reconnect attempts run in the
port's own thread, never in the physics thread)."""
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import ROS_MISSING

if ROS_MISSING:
    pytest.skip(ROS_MISSING, allow_module_level=True)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "hil"))     # the tests' pty devices
from ptys import PtyDevice  # noqa: E402
from rclpy_probe import Output, Probe, stamp_of, stop_node  # noqa: E402
from test_node import CLOCK_QOS, STARTUP, start_node  # noqa: E402

from mbsim_ros.ros import messages as m  # noqa: E402

NS = "/SR1"
MAX_AGE = 0.05                  # s: a sample older than this is not used (the device is stale)
DIAGNOSTICS_RATE = 10.0         # Hz
SENSOR_RATE = 50.0              # Hz, both sensors
BOUND = MAX_AGE + 1 / DIAGNOSTICS_RATE + 1 / SENSOR_RATE      # s of simulated time, stated in docs/hil.md
GYRO, FT = "WaistGyro", "RightAnkleForceSensor"


def config(port):
    return (f"diagnostics_rate: {DIAGNOSTICS_RATE}\njoint_state_rate: 50.0\ntf_rate: 10.0\nclock_rate: 100.0\n"
            "sensors:\n  LeftCamera: {enabled: false}\n  RightCamera: {enabled: false}\n"
            "  ChestRange: {enabled: false}\n"
            f"  {GYRO}: {{rate: {SENSOR_RATE}}}\n  {FT}: {{rate: {SENSOR_RATE}}}\n"
            "devices:\n"
            f"  {GYRO}: {{port: {port}, protocol: csv, max_age: {MAX_AGE}, on_fault: sim}}\n"
            f"  {FT}: {{source: ros, topic: /ft_driver/wrench, max_age: {MAX_AGE}, on_fault: hold}}\n")


class Feeder:
    """A thread sending one sample every `period` s while `on` is set (send(value))."""

    def __init__(self, send, period):
        self.send, self.period, self.value = send, period, None
        self.on = threading.Event()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop.wait(self.period):
            if self.on.is_set():
                self.send(self.value)

    def feed(self, value):
        self.value = value
        self.on.set()

    def close(self):
        self.stop.set()
        self.thread.join(5)


def status(probe, name, since):
    """(sim stamp, level, message) of each /diagnostics status `name` received since `since`."""
    out = []
    for arr in probe.messages("/diagnostics", since):
        for s in arr.status:
            if s.name == name:
                level = s.level if isinstance(s.level, int) else ord(s.level)     # rclpy: a byte
                out.append((stamp_of(arr), level, s.message))
    return out


def wait_level(probe, name, level, since, what, timeout=30.0):
    """The first status `name` at `level` received since `since`: (sim stamp, message)."""
    try:
        probe.wait(what, lambda: any(lv == level for _, lv, _ in status(probe, name, since)), timeout)
    except AssertionError as e:
        raise AssertionError(f"{e}; {name} said {status(probe, name, since)[-3:]}") from None
    return next((t, text) for t, lv, text in status(probe, name, since) if lv == level)


def vector(msg):
    if hasattr(msg, "wrench"):
        f, t = msg.wrench.force, msg.wrench.torque
        return np.array([f.x, f.y, f.z, t.x, t.y, t.z])
    w = msg.angular_velocity
    return np.array([w.x, w.y, w.z])


def shows(probe, topic, value):
    """The newest message on `topic` carries `value` (no message yet: not yet; the device's status
    can turn ok before its first message reaches the probe)."""
    got = probe.messages(topic)
    return bool(got) and np.allclose(vector(got[-1]), value)


def test_a_vanishing_pty_and_a_silent_driver_topic(tmp_path):
    from geometry_msgs.msg import WrenchStamped
    port = tmp_path / "gyro"
    dev = PtyDevice(port)
    lock = threading.Lock()

    def write_gyro(value):
        with lock:
            if dev.master is not None:
                try:
                    dev.write(b"%g,%g,%g\n" % tuple(value), timeout=0.5)
                except (TimeoutError, OSError):
                    pass                 # the node is not reading (between unplug and reopen)
    proc = start_node(config=config(port), tmp=tmp_path)
    out = Output(proc)
    probe = Probe("mbsim_devices_probe")
    probe.watched = (proc, out)
    for topic, typename in (("/diagnostics", m.DIAGNOSTIC_ARRAY), ("/clock", m.CLOCK),
                            (f"{NS}/{GYRO}", m.IMU), (f"{NS}/{GYRO}/sim", m.IMU), (f"{NS}/{FT}", m.WRENCH_STAMPED)):
        probe.subscribe(topic, typename, CLOCK_QOS if topic == "/clock" else 100)
    driver = probe.node.create_publisher(WrenchStamped, "/ft_driver/wrench", 10)

    def publish_wrench(value):
        w = WrenchStamped()
        w.header.frame_id = "ft"
        (w.wrench.force.x, w.wrench.force.y, w.wrench.force.z,
         w.wrench.torque.x, w.wrench.torque.y, w.wrench.torque.z) = (float(x) for x in value)
        driver.publish(w)
    gyro, ft = Feeder(write_gyro, 0.005), Feeder(publish_wrench, 0.005)
    try:
        probe.wait("the first /clock (a cold start compiles the kernels)", lambda: probe.messages("/clock"),
                   STARTUP, proc)
        first = (1.0, 2.0, 3.0, 0.1, 0.2, 0.3)
        gyro.feed((0.5, -0.25, 1.0))
        ft.feed(first)
        t0 = time.monotonic()
        wait_level(probe, f"mbsim: device {GYRO}", 0, t0, "the gyro ok")
        wait_level(probe, f"mbsim: device {FT}", 0, t0, "the driver topic ok")
        probe.wait("the device values on the topics", lambda: (
            shows(probe, f"{NS}/{GYRO}", [0.5, -0.25, 1.0]) and shows(probe, f"{NS}/{FT}", first)), 10)

        # the driver falls silent: stale within BOUND of simulated time, the last wrench held
        ft.on.clear()
        silent = time.monotonic()
        stopped_at = probe.node_time()                  # the simulated time now (or a little before)
        stale_at, message = wait_level(probe, f"mbsim: device {FT}", 1, silent, "the driver topic stale")
        assert "the last real value" in message, message
        # stopped_at is the probe's clock, which lags the node's by the delivery of /clock: the
        # stale status may be the one after (statuses come one diagnostics period apart)
        assert stale_at - stopped_at <= BOUND + 1 / DIAGNOSTICS_RATE + 0.02, (stale_at, stopped_at)
        held = probe.messages(f"{NS}/{FT}", time.monotonic())
        probe.wait("wrenches while stale", lambda: len(probe.messages(f"{NS}/{FT}", silent + 0.5)) >= 3, 10)
        assert all(np.allclose(vector(w), first) for w in probe.messages(f"{NS}/{FT}", silent + 0.5)), held
        # it resumes: ok again, its new values on the topic
        again = (4.0, 5.0, 6.0, 0.4, 0.5, 0.6)
        resumed = time.monotonic()
        ft.feed(again)
        wait_level(probe, f"mbsim: device {FT}", 0, resumed, "the driver topic ok again")
        probe.wait("the new wrench", lambda: shows(probe, f"{NS}/{FT}", again), 10)

        # the gyro is unplugged: down on the next diagnostics, the topic carries the simulation
        gyro.on.clear()
        with lock:
            unplugged = time.monotonic()
            lost_at = probe.node_time()
            dev.vanish()
        down_at, message = wait_level(probe, f"mbsim: device {GYRO}", 2, unplugged, "the gyro down")
        assert "the simulation" in message, message
        # down on the first diagnostics after the vanish; lost_at is the probe's clock, which lags
        # the node's by the delivery of /clock (/clock at 100 Hz here), so it may be the one after
        assert down_at - lost_at <= 2 / DIAGNOSTICS_RATE + 0.02, (down_at, lost_at)
        clock_before = probe.node_time()
        time.sleep(1.5)                                 # reconnect attempts with backoff meanwhile

        # the last sample before the unplug stays fresh for MAX_AGE of simulated time after it
        # arrived (before down_at): readings stamped later carry the simulation. Chosen by their
        # stamps, not by when this probe took them (a busy probe takes messages late).
        away = down_at + MAX_AGE

        def both():
            """(the gyro topic's messages, {stamp: the /sim topic's reading}) stamped while away."""
            sim = {stamp_of(x): vector(x) for x in probe.messages(f"{NS}/{GYRO}/sim", unplugged)
                   if stamp_of(x) > away}
            return [x for x in probe.messages(f"{NS}/{GYRO}", unplugged) if stamp_of(x) in sim], sim
        # (both topics are best effort: on a busy machine this Python probe misses some)
        probe.wait("the simulation going on, five readings on both topics while the device is away",
                   lambda: probe.node_time() > clock_before + 0.5 and len(both()[0]) >= 5, 30, proc)
        common, sim = both()
        differ = [(stamp_of(x), vector(x), sim[stamp_of(x)]) for x in common
                  if not np.array_equal(vector(x), sim[stamp_of(x)])]
        assert not differ, (away, differ[:3])
        # plugged back at the same path: reopened (backoff at most 2 s), its readings back
        with lock:
            dev.open()
        back = time.monotonic()
        gyro.feed((-1.0, 0.75, 2.0))
        wait_level(probe, f"mbsim: device {GYRO}", 0, back, "the gyro ok again")
        probe.wait("the gyro's values again",
                   lambda: shows(probe, f"{NS}/{GYRO}", [-1.0, 0.75, 2.0]), 10)
        assert proc.poll() is None
        assert "Traceback" not in out.text, out.text[-3000:]
    finally:
        gyro.close()
        ft.close()
        probe.close()
        stop_node(proc, out)
        dev.close()
