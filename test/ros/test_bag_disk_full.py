"""Recording onto a disk that fills: `mbsim run --bag` ends with one line naming the bag and the
cause and status 2, and the bag is readable (rosbags and mcap, independent readers) up to its
last complete chunk, with its metadata.yaml; the sim_node with bag_error continue keeps
simulating and publishing live while /diagnostics reports the recording error at ERROR.

The full disk is the process's file size limit (RLIMIT_FSIZE, which Python's SIGXFSZ-ignoring
start-up turns into EFBIG "File too large" for the write that crosses it): portable, no root, no
mount, and the real files, writes and process, failing where a full disk would."""
import collections
import resource
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import subprocess_env

mcap_reader = pytest.importorskip("mcap.reader", reason="mcap (test extra) not installed")
from rosbags.rosbag2 import Reader  # noqa: E402
from test_bag_crash import PENDULUM  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
LIMIT = 2 << 20          # bytes a file of the process may reach: the pendulum's bag passes it after ~20 s
STARTUP = 900.0


def _limited(limit):
    def set_limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return set_limit


def read_back(bag):
    """{topic: messages} read by rosbags (through metadata.yaml) and the /clock stamps; the mcap
    reader must read the same."""
    with Reader(bag) as reader:
        counts = collections.Counter()
        clock = []
        for connection, t, _ in reader.messages():
            counts[connection.topic] += 1
            if connection.topic == "/clock":
                clock.append(t)
        counted = {c.topic: c.msgcount for c in reader.connections if c.msgcount}
    assert counted == dict(counts)
    with open(next(bag.glob("*.mcap")), "rb") as f:
        seen = collections.Counter(channel.topic for _, channel, _ in mcap_reader.make_reader(f).iter_messages())
    assert dict(seen) == dict(counts)
    return dict(counts), np.array(clock)


def test_mbsim_run_onto_a_full_disk_ends_in_one_line_with_the_bag_readable(tmp_path):
    model = tmp_path / "pendulum.urdf"
    model.write_text(PENDULUM)
    bag = tmp_path / "bag"
    done = subprocess.run([sys.executable, "-m", "mbsim_ros.cli", "run", str(model), "--fixed-base",
                           "--contact", "none", "--rtf", "0",
                           "--duration", "1000", "--transport", "none", "--quiet", "--bag", str(bag)],
                          cwd=REPO, env=subprocess_env(PYTHONPATH=REPO), capture_output=True, text=True,
                          timeout=STARTUP, preexec_fn=_limited(LIMIT))
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("mbsim:")]
    assert len(errors) == 1, done.stderr[-3000:]
    assert f"writing the bag {bag}:" in errors[0] and "File too large" in errors[0], errors[0]
    assert (bag / "metadata.yaml").exists()
    counts, clock = read_back(bag)
    assert counts["/clock"] > 5000                        # a chunk or more reached the file
    assert clock[0] == 0 and np.all(np.diff(clock) == 1_000_000)     # every step up to the last chunk
    assert (bag / "bag.mcap").stat().st_size <= LIMIT


def test_the_node_with_bag_error_continue_goes_on_publishing_and_reports_the_error(tmp_path):
    """bag_error continue: the disk fills, /diagnostics says so at ERROR (naming the bag), /clock
    goes on for seconds of simulated time after it, SIGINT ends the node with status 0 and the bag
    is readable up to its last complete chunk."""
    from conftest import ROS_MISSING
    if ROS_MISSING:
        pytest.skip(ROS_MISSING)
    from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
    from rclpy_probe import Output, Probe, child_env, stamp_of

    from mbsim_ros.ros import messages as m
    model = tmp_path / "pendulum.urdf"
    model.write_text(PENDULUM)
    config = tmp_path / "sim.yaml"
    config.write_text("floating_base: false\ncontact: none\n")
    bag = tmp_path / "bag"
    args = [sys.executable, "-m", "mbsim_ros.ros.node", "--ros-args", "-p", f"model:={model}", "-p", f"config:={config}",
            "-p", f"bag:={bag}", "-p", "bag_error:=continue", "-p", "real_time_factor:=10.0",
            "-p", "diagnostics_rate:=5.0", "-p", "clock_rate:=100.0"]     # (what this Python reader keeps up with)
    probe = Probe()
    keep = QoSProfile(history=HistoryPolicy.KEEP_ALL, reliability=ReliabilityPolicy.RELIABLE)
    probe.subscribe("/diagnostics", m.DIAGNOSTIC_ARRAY, keep)
    probe.subscribe("/clock", m.CLOCK, QoSProfile(history=HistoryPolicy.KEEP_ALL,
                                                  reliability=ReliabilityPolicy.BEST_EFFORT))
    proc = subprocess.Popen(args, cwd=REPO, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, preexec_fn=_limited(LIMIT))
    out = Output(proc)
    probe.watched = (proc, out)

    def bag_errors():
        return [(stamp_of(d), s) for d in probe.messages("/diagnostics") for s in d.status if s.name == "mbsim: bag"]
    try:
        probe.wait("the bag's error on /diagnostics", bag_errors, timeout=STARTUP, proc=proc)
        t_error, status = bag_errors()[0]
        assert status.level == b"\x02", status            # ERROR
        assert "File too large" in status.message and {v.key: v.value for v in status.values}["bag"] == str(bag)
        probe.wait("/clock 3 s of simulated time past the error", lambda: probe.sim_time() >= t_error + 3.0,
                   timeout=120.0, proc=proc)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        probe.close()
    out.thread.join(5)
    assert proc.returncode == 0, out.text[-3000:]
    assert "Traceback" not in out.text, out.text[-3000:]
    counts, clock = read_back(bag)
    assert counts["/clock"] > 500                         # a chunk or more reached the file
    assert clock[0] == 0 and np.all(np.diff(clock) == 10_000_000)    # /clock at 100 Hz, none missing
    assert clock[-1] * 1e-9 < t_error                     # recorded up to the failure, not after
    assert not (bag / "metadata.yaml.tmp").exists()
