"""ros/fastdds_memory.py: the samples a Fast DDS writer held for a subscriber that fell behind are
freed once it has caught up, instead of staying in the writer's pool for the rest of the run.

A simulating process (RclpyTransport, real rclpy and Fast DDS) publishes 1 MB images, reliable,
keep last 10, to a real rclpy node in another process that is stopped (SIGSTOP) meanwhile, so
the writer holds its last 10 images (10 MB). The node is let go, receives them, and the
simulating process's live malloc memory (glibc's mallinfo2) is compared with what it was before
the burst. Without our profile (rmw_fastrtps' pool, forced here by naming the user's own
setting) those 10 MB stay; with it they go back."""
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import ROS_MISSING
from rclpy_probe import REPO, Output, ProbeProcess, child_env

from mbsim_ros.ros.fastdds_memory import free_samples_when_done

pytestmark = pytest.mark.skipif(bool(ROS_MISSING), reason=str(ROS_MISSING))

TOPIC = "/fastdds_memory/image"
PUBLISHER = r"""
import sys, time
import numpy as np
from mbsim_ros.ros import messages
from mbsim_ros.ros.qos import SENSOR
from mbsim_ros.ros.rclpy_transport import RclpyTransport
from mbsim_ros.run.memory import mallinfo

def in_use_mb():
    info = mallinfo()
    return (info.uordblks + info.hblkhd) / 2**20

transport = RclpyTransport(node_name="fastdds_memory")
pub = transport.advertise(sys.argv[1], "sensor_msgs/msg/Image", SENSOR)
print("READY", flush=True)
for line in sys.stdin:
    if line.strip() == "matched":          # the reader is matched: what we write is for it
        while pub.impl.get_subscription_count() < 1:
            time.sleep(0.05)
        print("MATCHED", flush=True)
    elif line.strip() == "publish":
        for k in range(12):
            frame = np.full((256, 1024, 4), k, np.uint8)
            transport.publish(pub, messages.image(float(k), "camera", frame, "rgba8"))
            del frame
        print("PUBLISHED", flush=True)
    elif line.strip() == "measure":
        print(f"IN_USE {in_use_mb():.1f}", flush=True)
transport.close()
"""


def in_use_after_a_burst(domain, extra_env):
    """(live malloc MB before the burst, after the stopped reader caught up) in the publisher."""
    reader = ProbeProcess(domain)
    env = child_env(ROS_DOMAIN_ID=domain, **extra_env)
    pub = subprocess.Popen([sys.executable, "-c", PUBLISHER, TOPIC], cwd=REPO, env=env, text=True,
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = Output(pub)
    try:
        def tell(command, answer):
            n = len(out.lines)
            pub.stdin.write(command + "\n")
            pub.stdin.flush()
            deadline = time.monotonic() + 60
            while not any(x.startswith(answer) for x in out.lines[n:]):
                assert pub.poll() is None and time.monotonic() < deadline, out.text[-3000:]
                time.sleep(0.02)
            return next(x for x in out.lines[n:] if x.startswith(answer))

        deadline = time.monotonic() + 60
        while "READY\n" not in out.lines:
            assert pub.poll() is None and time.monotonic() < deadline, out.text[-3000:]
            time.sleep(0.02)
        reader.subscribe(TOPIC, "sensor_msgs/msg/Image")
        tell("matched", "MATCHED")                     # (a sample written before the match would
        time.sleep(1.0)                                # not reach it: volatile durability)
        before = float(tell("measure", "IN_USE").split()[1])
        os.kill(reader.proc.pid, signal.SIGSTOP)       # a subscriber that fell behind
        tell("publish", "PUBLISHED")
        os.kill(reader.proc.pid, signal.SIGCONT)
        deadline = time.monotonic() + 60
        while len(reader.messages(TOPIC)) < 10:        # it caught up: the writer's history is acknowledged
            assert time.monotonic() < deadline, f"the reader got {len(reader.messages(TOPIC))} images"
            time.sleep(0.05)
        time.sleep(1.0)
        after = float(tell("measure", "IN_USE").split()[1])
        return before, after
    finally:
        pub.stdin.close()
        try:
            pub.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pub.kill()
        reader.close()


def test_samples_are_freed_after_a_lagging_reader():
    domain = os.environ["ROS_DOMAIN_ID"]
    before, after = in_use_after_a_burst(domain, {})
    assert after - before < 3, (before, after)         # of the 10 MB held, at most a frame or two stays
    # rmw_fastrtps' own pool (the user's publication mode named: ours is not applied) keeps them
    before, after = in_use_after_a_burst(domain, {"RMW_FASTRTPS_PUBLICATION_MODE": "SYNCHRONOUS"})
    assert after - before > 8, (before, after)


def test_the_users_own_settings_win(tmp_path):
    assert not free_samples_when_done({"RMW_IMPLEMENTATION": "rmw_cyclonedds_cpp"}, tmp_path)
    assert not free_samples_when_done({"FASTRTPS_DEFAULT_PROFILES_FILE": "mine.xml"}, tmp_path)
    (tmp_path / "DEFAULT_FASTRTPS_PROFILES.xml").write_text("<dds/>")
    assert not free_samples_when_done({}, tmp_path)
    environ = {}
    assert free_samples_when_done(environ, tmp_path / "elsewhere")
    assert environ["RMW_FASTRTPS_USE_QOS_FROM_XML"] == "1"
    assert os.path.exists(environ["FASTRTPS_DEFAULT_PROFILES_FILE"])
