"""A real rclpy node for the tests: ROS 2 Jazzy's rclpy with Fast DDS from the test extra's
wheels (or a sourced ROS 2), with the interface packages conftest builds.

`Probe` is such a node in the test's own process, spun by a thread (test_node.py,
test_sim_node_interfaces.py, test_lazy.py). Run as a script, this file is such a node in a
process of its own (`ProbeProcess` starts and drives it): a user's node beside the simulation,
told on stdin what to do, one line per command:

    subscribe TOPIC TYPE     (e.g. /SR1/LeftCamera/image_raw sensor_msgs/msg/Image; default QoS,
                              reliable, keep last 10, as `create_subscription(T, topic, cb, 10)`)
    unsubscribe TOPIC        (destroys that subscription; the node stays)

It prints READY once its node exists, SUBSCRIBED TOPIC / UNSUBSCRIBED TOPIC when done, and one
JSON line per message received, `message_summary`'s (its topic, stamp and the SHA-1 of its
data); it ends at the end of its stdin. Its ROS domain is ROS_DOMAIN_ID of its environment.
"""
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from mbsim_ros.ros.transport_choice import message_class

REPO = Path(__file__).resolve().parents[2]


def child_env(**extra):
    """The environment for a process of ours a test starts: the one the test session began with
    (conftest.subprocess_env, with the ROS paths), this checkout first on PYTHONPATH, unbuffered
    output, and `extra`."""
    from conftest import subprocess_env
    env = subprocess_env(PYTHONUNBUFFERED=1, **extra)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


class Output:
    """A process's output lines, read by a thread (so its pipe never fills)."""

    def __init__(self, proc):
        self.lines = []
        self.thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self.thread.start()

    def _read(self, proc):
        for line in proc.stdout:
            self.lines.append(line)

    @property
    def text(self):
        return "".join(self.lines)


def stop_node(proc, out, timeout=60.0):
    """End a node a test started, if it still runs (SIGTERM, SIGKILL after `timeout` s), and
    collect the rest of its output."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    out.thread.join(5)


def stamp_of(msg):
    """A message's simulated time: its header's stamp (/tf: the first transform's, /clock: its clock)."""
    if hasattr(msg, "transforms"):
        h = msg.transforms[0].header.stamp
    elif hasattr(msg, "clock"):
        h = msg.clock
    else:
        h = msg.header.stamp
    return h.sec + h.nanosec * 1e-9


class Probe:
    """A real rclpy node in this process, with use_sim_time (its clock follows /clock),
    recording (message, wall time) per topic; spun by a thread."""

    def __init__(self, name="mbsim_probe", domain=None, sim_time=True):
        # (rclpy imported here: the rest of this module serves tests that run without it)
        import rclpy
        from rclpy.executors import MultiThreadedExecutor
        from rclpy.parameter import Parameter
        self.rclpy = rclpy
        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=domain)
        self.node = rclpy.create_node(name, context=self.context,
                                      parameter_overrides=[Parameter("use_sim_time", value=sim_time)])
        self.lock = threading.Lock()
        self.got = {}
        # per topic, parallel to got: each message's reception time as the middleware stamped it
        # (system clock, ns), in its receive thread: free of this process's executor delays
        self.received = {}
        self.subscriptions = {}
        self.executor = MultiThreadedExecutor(num_threads=2, context=self.context)
        self.executor.add_node(self.node)
        self.spinning = True
        self.thread = threading.Thread(target=self._spin, daemon=True)
        self.thread.start()

    def _spin(self):
        """The executor's spin, going on past a publisher or subscription a test destroyed while
        the executor built its wait set: rclpy raises InvalidHandle in the spinning thread then
        (from the entity's event handlers), which ended the probe's reception in the middle of a
        test run once."""
        from rclpy._rclpy_pybind11 import InvalidHandle
        from rclpy.executors import ExternalShutdownException, ShutdownException
        while self.spinning and self.context.ok():
            try:
                self.executor.spin_once(timeout_sec=0.1)
            except InvalidHandle:
                continue
            except (ShutdownException, ExternalShutdownException):
                break

    def subscribe(self, topic, typename, qos=100, on_message=None):
        """Record what arrives on topic (and hand each message to on_message, if given)."""
        self.got.setdefault(topic, [])
        self.received.setdefault(topic, [])

        def record(msg, info):
            with self.lock:
                self.got[topic].append((msg, time.monotonic()))
                self.received[topic].append(info["received_timestamp"])
            if on_message is not None:
                on_message(msg)
        self.subscriptions[topic] = self.node.create_subscription(message_class(typename), topic, record, qos)

    def unsubscribe(self, topic):
        """Destroy the subscription to topic (the node stays)."""
        self.node.destroy_subscription(self.subscriptions.pop(topic))

    def messages(self, topic, since=0.0):
        """Messages received on topic at wall time >= since."""
        with self.lock:
            return [msg for msg, wall in self.got.get(topic, []) if wall >= since]

    def sim_time(self):
        clock = self.messages("/clock")
        return stamp_of(clock[-1]) if clock else None

    def wait(self, what, condition, timeout=120.0, proc=None):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition():
                return
            if proc is not None and proc.poll() is not None:
                raise AssertionError(f"sim_node exited with {proc.returncode} while waiting for {what}")
            time.sleep(0.02)
        raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")

    def node_time(self):
        """The newest simulated time (the probe's use_sim_time clock: its time source takes the
        newest /clock, while the recordings may lag behind)."""
        return self.node.get_clock().now().nanoseconds * 1e-9

    def wait_stamp(self, topic, t, since=0.0):
        """Wait until `topic` has a message stamped t or later (received at or after `since`)."""
        self.wait(f"{topic} at t = {t:.3f} s",
                  lambda: any(stamp_of(x) >= t for x in self.messages(topic, since)), 60.0 + 30.0 * max(t - self.node_time(), 0))

    def wait_sim(self, seconds, timeout=None):
        """Wait until /clock has advanced by `seconds` of simulated time."""
        t0 = self.sim_time()
        self.wait(f"{seconds} s of simulated time", lambda: self.sim_time() >= t0 + seconds,
                  timeout or 60.0 + 30.0 * seconds)

    def call(self, srv_type, name, request, timeout=30.0):
        """One service call; the client is kept for the next call to the same service, as a
        user's node keeps it (a client per call makes discovery match new endpoints every time)."""
        clients = self.__dict__.setdefault("clients", {})
        if name not in clients:
            clients[name] = self.node.create_client(srv_type, name)
        client = clients[name]
        try:
            assert client.wait_for_service(timeout_sec=timeout), f"service {name} not offered"
            future = client.call_async(request)
            self.wait(f"the answer of {name}", future.done, timeout)
            return future.result()
        except AssertionError as e:
            raise AssertionError(f"{e}{self.node_report()}") from None

    def node_report(self):
        """Whether the sim_node under test (`watch`ed) still runs, and the end of its output."""
        if getattr(self, "watched", None) is None:
            return ""
        proc, out = self.watched
        state = "running" if proc.poll() is None else f"exited with {proc.returncode}"
        return f"; sim_node {state}, its output ends:\n{out.text[-3000:]}"

    def close(self):
        self.spinning = False
        self.executor.shutdown()
        self.thread.join(10)
        self.node.destroy_node()
        self.rclpy.shutdown(context=self.context)


def message_summary(topic, msg):
    """What a test compares of a received message: its topic, stamp (s) and the SHA-1 of its data
    field (an Image's pixels), for a message decoded by rclpy or by rosbags (messages.decode)."""
    data = getattr(msg, "data", None)
    return {"topic": topic, "stamp": stamp_of(msg),
            "sha1": None if data is None else hashlib.sha1(bytes(data)).hexdigest()}


class ProbeProcess:
    """This file run as a script: a real rclpy node in a process of its own on ROS domain
    `domain`, subscribing and unsubscribing when told."""

    def __init__(self, domain, timeout=60.0):
        self.timeout = timeout
        self.proc = subprocess.Popen([sys.executable, __file__], cwd=REPO, env=child_env(ROS_DOMAIN_ID=domain),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)
        self.out = Output(self.proc)
        self.expect("READY")

    def expect(self, line):
        """Wait for the line `line` from the process; fails (with its output) on its exit or timeout."""
        deadline = time.monotonic() + self.timeout
        while line + "\n" not in self.out.lines:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                state = "timed out" if self.proc.poll() is None else f"exited with {self.proc.returncode}"
                raise AssertionError(f"rclpy probe process {state} waiting for {line}; its output:\n{self.out.text[-3000:]}")
            time.sleep(0.01)

    def _tell(self, command, answer):
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        self.expect(answer)

    def subscribe(self, topic, typename):
        self._tell(f"subscribe {topic} {typename}", f"SUBSCRIBED {topic}")

    def unsubscribe(self, topic):
        self._tell(f"unsubscribe {topic}", f"UNSUBSCRIBED {topic}")

    def messages(self, topic):
        """message_summary of each message received on topic, in order of arrival."""
        got = [json.loads(line) for line in list(self.out.lines) if line.startswith("{")]
        return [g for g in got if g["topic"] == topic]

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()          # its end of stdin: it ends
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.out.thread.join(5)


def main():
    probe = Probe("mbsim_probe_process", sim_time=False)
    printing = threading.Lock()

    def say(text):
        with printing:
            print(text, flush=True)
    say("READY")
    try:
        for line in sys.stdin:
            command, topic, *rest = line.split()
            if command == "subscribe":
                probe.subscribe(topic, rest[0], 10,
                                on_message=lambda msg, topic=topic: say(json.dumps(message_summary(topic, msg))))
                say(f"SUBSCRIBED {topic}")
            elif command == "unsubscribe":
                probe.unsubscribe(topic)
                say(f"UNSUBSCRIBED {topic}")
            else:
                raise ValueError(f"unknown command {command!r}")
    finally:
        probe.close()


if __name__ == "__main__":
    main()
