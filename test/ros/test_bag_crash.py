"""A bag recorded by `mbsim run --bag` and cut off by SIGKILL (nothing of the process runs after
the signal: no summary, no metadata.yaml) is made whole by `mbsim bag repair`: every message of
every chunk that reached the file before the kill is read back by two independent readers,
rosbags and the mcap package, and /clock is contiguous from t = 0 to the last chunk.

What reached the file is counted by mcap's stream reader on the killed file itself (it decodes
record after record and stops at the cut-off one), so the repaired bag is checked against the
file, not against our own scan. Kill times are drawn from a seeded generator (MBSIM_LONG=1: more
of them)."""
import collections
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import subprocess_env
from test_run_stop import Stderr

mcap_reader = pytest.importorskip("mcap.reader", reason="mcap (test extra) not installed")
from mcap.stream_reader import StreamReader  # noqa: E402
from rosbags.rosbag2 import Reader  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
# a double pendulum: cheap steps, so the run's startup is most of the test's time
PENDULUM = """<robot name="pendulum">
  <link name="base"/>
  <joint name="j1" type="continuous"><parent link="base"/><child link="l1"/><axis xyz="0 1 0"/></joint>
  <link name="l1"><inertial><origin xyz="0 0 -0.5"/><mass value="1"/>
    <inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="j2" type="continuous"><parent link="l1"/><child link="l2"/><origin xyz="0 0 -1"/>
    <axis xyz="0 1 0"/></joint>
  <link name="l2"><inertial><origin xyz="0 0 -0.5"/><mass value="1"/>
    <inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>
</robot>
"""
STARTUP = 900.0          # s: a cold numba cache compiles for minutes on a shared machine
KILLS = 8 if os.environ.get("MBSIM_LONG") == "1" else 2
_rng = random.Random(40)
# (simulated seconds at which the process is killed, compression): the bag of this model grows
# ~0.1 MB per simulated second, so these cut it after several 1 MiB chunks, 2 to 3.6 s into the run
CASES = [(round(_rng.uniform(50.0, 90.0), 2), ("zstd" if k % 2 else None)) for k in range(KILLS)]


def _mbsim(capsys, *args):
    """The command line in this process (the killed one is the child's)."""
    from mbsim_ros.cli import main
    status = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return status, out, err


def _killed_run(bag, t_kill, compression):
    """`mbsim run --bag` at 25 times real time (staged chunks reach the file within a second:
    direct_file._FLUSH_AGE), SIGKILLed once the progress bar passes t_kill."""
    model = bag.parent / "pendulum.urdf"
    model.write_text(PENDULUM)
    cmd = [sys.executable, "-m", "mbsim_ros.cli", "run", str(model), "--fixed-base", "--contact", "none",
           "--rtf", "25", "--duration", "1000",
           "--transport", "none", "--bag", str(bag)] + (["--compression", compression] if compression else [])
    proc = subprocess.Popen(cmd, cwd=REPO, env=subprocess_env(PYTHONPATH=REPO), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    err = Stderr(proc)
    try:
        deadline = time.monotonic() + STARTUP
        while err.sim_time() < t_kill:
            assert proc.poll() is None, f"mbsim run ended early ({proc.returncode}): {err.text[-3000:]}"
            assert time.monotonic() < deadline, f"no progress within {STARTUP:g} s: {err.text[-3000:]}"
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    return err.sim_time()


def _flushed(mcap_file):
    """{topic: messages} mcap's stream reader decodes from the killed file before the cut."""
    counts = collections.Counter()
    channels = {}
    with open(mcap_file, "rb") as f:
        try:
            for record in StreamReader(f, skip_magic=False).records:
                name = type(record).__name__
                if name == "Channel":
                    channels[record.id] = record.topic
                elif name == "Message":
                    counts[channels[record.channel_id]] += 1
        except Exception:        # the record the kill cut off: where the readable data ends
            pass
    return dict(counts)


@pytest.mark.parametrize("t_kill, compression", CASES)
def test_a_bag_killed_mid_run_is_repaired_to_every_chunk_written_before_the_kill(tmp_path, capsys, t_kill,
                                                                                 compression):
    bag = tmp_path / "bag"
    shown = _killed_run(bag, t_kill, compression)
    assert not (bag / "metadata.yaml").exists()        # the kill left no metadata: rosbags refuses it
    with pytest.raises(Exception):
        Reader(bag).open()
    mcap_file = bag / "bag.mcap"
    flushed = _flushed(mcap_file)
    assert flushed.get("/clock", 0) > 1000, flushed    # several chunks were written before the kill

    status, out, err = _mbsim(capsys, "bag", "repair", bag)
    assert status == 0, err
    assert out.startswith(f"repaired {bag}: {sum(flushed.values())} messages"), out

    with Reader(bag) as reader:                          # rosbags: metadata.yaml, summary, messages
        read = collections.Counter()
        clock = []
        for connection, t, _ in reader.messages():
            read[connection.topic] += 1
            if connection.topic == "/clock":
                clock.append(t)
        counted = {c.topic: c.msgcount for c in reader.connections}
    assert dict(read) == flushed
    assert {t: n for t, n in counted.items() if n} == flushed
    with open(mcap_file, "rb") as f:                     # mcap: through the summary's chunk indexes
        reader = mcap_reader.make_reader(f)
        summary = reader.get_summary()
        assert summary.statistics.message_count == sum(flushed.values())
        seen = collections.Counter(channel.topic for _, channel, _ in reader.iter_messages())
    assert dict(seen) == flushed
    # /clock: every step from t = 0, 1 ms apart, up to the last complete chunk (before the kill)
    clock = np.array(clock)
    assert clock[0] == 0 and np.all(np.diff(clock) == 1_000_000)
    assert clock[-1] <= shown * 1e9 + 1e9

    status, out, err = _mbsim(capsys, "bag", "repair", bag)      # a second repair leaves the bag as it is
    assert status == 0 and "nothing to repair" in out, out + err


def test_repair_refuses_what_is_not_a_bag_in_one_line(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "junk.mcap").write_bytes(b"not an mcap file at all")
    for path, expected in ((tmp_path / "missing", "no such bag directory"),
                           (tmp_path / "empty", "expected one .mcap file"),
                           (tmp_path / "junk", "not an MCAP file")):
        status, _, err = _mbsim(capsys, "bag", "repair", path)
        assert status == 2
        assert err.count("\n") == 1 and str(path) in err and expected in err, err
