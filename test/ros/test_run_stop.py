"""`mbsim run` stopped by SIGINT (Ctrl-C) or SIGTERM (systemctl stop, ros2 launch) in the middle
of a paced run: status 0, no traceback, the bag closed and complete (rosbags, not our code,
reads back every message its metadata counts), as the sim_node (test_node.py)."""
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import PipeText, subprocess_env

REPO = Path(__file__).resolve().parents[2]
STARTUP = 900.0      # s: a cold numba cache compiles the kernels for minutes on a shared machine
STEPPED = 0.3        # s of simulated time before the signal: the run is stepping and publishing


class Stderr(PipeText):
    """Everything the process writes to stderr, as it comes."""

    def __init__(self, proc):
        super().__init__(proc.stderr)

    def sim_time(self):
        """The latest simulated time the progress bar shows (-1 before the first)."""
        times = re.findall(r"t=(\d+\.\d+)s", self.text)
        return float(times[-1]) if times else -1.0


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_ends_mbsim_run_with_status_0_and_a_complete_bag(tmp_path, signum):
    from rosbags.rosbag2 import Reader
    bag = tmp_path / "bag"
    proc = subprocess.Popen([sys.executable, "-m", "mbsim_ros.cli", "run", "--rtf", "1", "--duration", "30",
                             "--transport", "none", "--bag", str(bag)],
                            cwd=REPO, env=subprocess_env(PYTHONPATH=REPO), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=False)
    err = Stderr(proc)
    try:
        deadline = time.monotonic() + STARTUP
        while err.sim_time() < STEPPED:
            assert proc.poll() is None, f"mbsim run ended early ({proc.returncode}): {err.text[-3000:]}"
            assert time.monotonic() < deadline, f"no progress within {STARTUP:g} s: {err.text[-3000:]}"
            time.sleep(0.05)
        proc.send_signal(signum)
        proc.wait(timeout=60)
        out = proc.stdout.read().decode()        # the summary: far less than a pipe's buffer
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err.thread.join(5)
    assert proc.returncode == 0, err.text[-3000:]
    assert "Traceback" not in err.text, err.text[-3000:]
    stopped = re.search(rf"stopped by {signal.Signals(signum).name} at t = (\d+\.\d+) s", err.text)
    assert stopped, err.text[-3000:]
    t_stop = float(stopped.group(1))
    assert STEPPED <= t_stop < 30.0            # it ended where it was, long before --duration
    assert f"wrote bag {bag}" in out, out       # the summary as after a full run
    with Reader(bag) as reader:
        counted = {c.topic: c.msgcount for c in reader.connections}
        read = {}
        for connection, _, _ in reader.messages():
            read[connection.topic] = read.get(connection.topic, 0) + 1
    # /clock at 1 kHz and joint_states at 100 Hz of simulated time, from t = 0 to the stop (+1
    # for the t = 0 sample, and a step either side for where the stop fell)
    assert counted["/clock"] == pytest.approx(1000 * t_stop, abs=2)
    assert counted["/SR1/joint_states"] == pytest.approx(100 * t_stop + 1, abs=2)
    assert read == {t: n for t, n in counted.items() if n}
