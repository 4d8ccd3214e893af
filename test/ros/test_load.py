"""Load held, short: sim_node on the bundled world (test_node's modest rates, cameras at 5 Hz)
with three rclpy subscribers in processes of their own on every topic (bench/load_subscriber.py,
each with the QoS its publisher offers) and a fourth stopped with SIGSTOP once subscribed (it
never reads nor acknowledges). bench/load.py is the long form (twenty subscribers, figures in
bench/README.md).

What would fail if the node were wrong, without timing anything (the machine may be loaded):
- the simulation goes on: it advances SIM_SECONDS of simulated time after the reader stopped,
  more than it takes every reliable writer to fill a history of 10 for it (joint_states at
  100 Hz in 0.1 s, the cameras at 5 Hz in 2 s); a node blocked on that reader stops there and
  the wait times out;
- memory stays bounded: the node's RSS grows less than MAX_GROWTH_MB over those seconds, while
  keeping the stopped reader's share of the images alone (two cameras' color and depth at 5 Hz,
  ~21 MB a simulated second) would take over 100 MB;
- every reading subscriber keeps receiving /clock, joint states, the IMU and the camera images
  in that window, and the node answers a service call at the end.
"""
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROS_MISSING

if ROS_MISSING:
    pytest.skip(ROS_MISSING, allow_module_level=True)
from rclpy_probe import REPO, Output, Probe, child_env, stop_node  # noqa: E402
from test_node import BASE_CONFIG, CLOCK_QOS, NS, STARTUP, start_node  # noqa: E402

from mbsim_ros.ros import messages as m  # noqa: E402

SUBSCRIBER = Path(REPO) / "bench" / "load_subscriber.py"
READERS = 3
SIM_SECONDS = 5.0
MAX_GROWTH_MB = 50.0


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) / 1024.0 for line in f if line.startswith("VmRSS:"))


def test_subscribers_and_one_that_never_reads(tmp_path):
    proc = start_node(config=BASE_CONFIG, tmp=tmp_path)
    out = Output(proc)
    probe = Probe("mbsim_load_probe")
    probe.watched = (proc, out)
    probe.subscribe("/clock", m.CLOCK, CLOCK_QOS)          # best effort, as /clock is offered
    subs = []
    try:
        probe.wait("the first /clock (a cold start compiles the kernels)", lambda: probe.messages("/clock"),
                   STARTUP, proc)
        subs = [subprocess.Popen([sys.executable, str(SUBSCRIBER), NS], cwd=REPO, env=child_env(),
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                for _ in range(READERS + 1)]
        for s in subs:
            line = s.stdout.readline()
            assert line.startswith("SUBSCRIBED"), line + s.stdout.read()
            assert int(line.split()[1]) >= 10, line           # every topic of the node, not a few
        subs[-1].send_signal(signal.SIGSTOP)
        for s in subs[:READERS]:
            s.send_signal(signal.SIGUSR1)                     # their counts start now
        t0, rss0 = probe.sim_time(), rss_mb(proc.pid)
        rss = [rss0]

        def advanced():
            rss.append(rss_mb(proc.pid))
            return probe.sim_time() >= t0 + SIM_SECONDS
        probe.wait(f"{SIM_SECONDS:g} s of simulated time with a reader stopped", advanced,
                   60.0 + 30.0 * SIM_SECONDS, proc)
        for s in subs[:READERS]:
            s.send_signal(signal.SIGUSR2)                     # and end now
        assert max(rss) - rss0 < MAX_GROWTH_MB, f"the node's RSS grew from {rss0:.0f} MB to {max(rss):.0f} MB"
        counts = []
        for s in subs[:READERS]:
            text = s.communicate(timeout=60)[0]
            lines = [line for line in text.splitlines() if line.startswith("{")]
            assert lines, f"a subscriber ended with status {s.returncode} and no counts: {text[-2000:]}"
            counts.append(json.loads(lines[-1]))
        for topic in ("/clock", NS + "/joint_states", NS + "/WaistGyro", NS + "/LeftCamera/image_raw"):
            got = [c.get(topic, 0) for c in counts]
            assert all(n > 0 for n in got), (topic, got)
        from std_srvs.srv import SetBool
        assert probe.call(SetBool, NS + "/pause", SetBool.Request(data=False)).success
    finally:
        # continued and asked to end (SIGTERM: a clean rclpy shutdown), killed only if it will
        # not: a reader killed inside Fast DDS's shared-memory transport leaves its port's lock
        # held, and every later participant that opens that port waits on it for ever
        for s in subs:
            if s.poll() is None:
                s.send_signal(signal.SIGCONT)
                s.terminate()
        for s in subs:
            try:
                s.wait(timeout=20)
            except subprocess.TimeoutExpired:
                s.kill()
                s.wait()
        probe.close()
        stop_node(proc, out)
