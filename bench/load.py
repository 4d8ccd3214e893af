"""Load held: sim_node on the bundled world (every sensor at its rate, rtf 1, catch_up
conservative) with N rclpy subscribers in processes of their own on every topic
(bench/load_subscriber.py, each with the QoS its publisher offers), plus one slow subscriber that
never reads (its process stopped with SIGSTOP once subscribed: it neither takes nor acknowledges
a message).

    eval "$(python test/ros_interfaces/build.py --env)"   # (or a sourced ROS 2)
    python bench/load.py [--seconds S] [--baseline B] [--subscribers N] [--no-slow] [--config YAML]

Runs on a ROS domain of its own (random, 150-229, checked unused). Prints, for B wall seconds of the node
without subscribers and then S wall seconds with them (after every subscriber is in place):
- the real-time factor seen from outside (simulated time of /clock over wall time) and the
  machine's 1-minute load average along;
- the node's own /diagnostics over the window (rtf_recent, lateness p50/p99/max over its last
  ~4 s of steps each second, messages_dropped: publishing jobs its bounded queue dropped), and
  how many of those statuses saw a step 2 ms late or more;
- under load, the machine's floor beside the node: a bare loop paced as the node paces, in a
  process of its own, one real-time level above the physics when the config gives it one
  (`realtime_priority`): no step can be less late than that loop;
- the node's RSS (VmRSS from /proc) at the start of the window, at its end and its maximum;
- per topic, the messages each subscriber received per simulated second (min and mean over the
  subscribers): the configured rate where every message arrives.
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from common import free_ros_domain, start_pacing_floor

REPO = Path(__file__).resolve().parents[1]
SUBSCRIBER = REPO / "bench" / "load_subscriber.py"
NS = "/SR1"


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def start_node(config_path, env, ns=NS):
    return subprocess.Popen([sys.executable, "-m", "mbsim_ros.ros.node", "--ros-args", "-r", f"__ns:={ns}",
                             "-p", f"config:={config_path}"], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def start_subscriber(env, prefix=NS):
    return subprocess.Popen([sys.executable, str(SUBSCRIBER), prefix], cwd=REPO, env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)


def wait_line(proc, prefix, timeout):
    """The first line of proc's output starting with prefix (reads its stdout)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"a subscriber ended before {prefix}")
        if line.startswith(prefix):
            return line
    raise TimeoutError(prefix)


def stop_subscriber(proc, timeout=30.0):
    """End a subscriber and return its {topic: messages} (None for one that gave none)."""
    try:
        proc.send_signal(signal.SIGCONT)
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return None
    lines = [line for line in out.splitlines() if line.startswith("{")]
    return json.loads(lines[-1]) if lines else None


class Watch:
    """An rclpy node here: /clock (sim time by wall time) and /diagnostics' simulation status."""

    def __init__(self):
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import qos_profile_sensor_data
        from diagnostic_msgs.msg import DiagnosticArray
        from rosgraph_msgs.msg import Clock
        self.rclpy = rclpy
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node("mbsim_load_watch", context=self.context)
        self.clock = []             # (wall, sim)
        self.status = {}
        self.statuses = []          # (wall, status): one a second
        self.node.create_subscription(Clock, "/clock", self._clock, qos_profile_sensor_data)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._diagnostics, 10)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.running = True
        self.thread = threading.Thread(target=self._spin, daemon=True)
        self.thread.start()

    def _spin(self):
        while self.running:
            self.executor.spin_once(timeout_sec=0.1)

    def _clock(self, msg):
        self.clock.append((time.monotonic(), msg.clock.sec + msg.clock.nanosec * 1e-9))

    def _diagnostics(self, msg):
        for s in msg.status:
            if s.name == "mbsim: simulation":
                self.status = {kv.key: kv.value for kv in s.values}
                self.statuses.append((time.monotonic(), self.status))

    def sim_time(self):
        return self.clock[-1][1] if self.clock else None

    def close(self):
        self.running = False
        self.thread.join(5)
        self.executor.shutdown()
        self.node.destroy_node()
        self.rclpy.shutdown(context=self.context)


def measure(watch, node, seconds):
    """{wall, sim, rss [MB each second], statuses, load} over `seconds` of wall time from now."""
    t0, s0 = time.monotonic(), watch.sim_time()
    rss = [rss_mb(node.pid)]
    loads = []
    while time.monotonic() < t0 + seconds and node.poll() is None:
        time.sleep(1.0)
        rss.append(rss_mb(node.pid))
        loads.append(os.getloadavg()[0])
    t1, s1 = time.monotonic(), watch.sim_time()
    # the statuses sent in the window that cover only its steps (each covers the last ~4 s)
    statuses = [st for wall, st in watch.statuses if t0 + 4.0 <= wall <= t1]
    return dict(wall=t1 - t0, sim=s1 - s0, rss=rss, statuses=statuses, load=loads)


def report(name, got):
    print(f"{name}: {got['wall']:.1f} s of wall time, {got['sim']:.1f} s simulated: real-time factor "
          f"{got['sim'] / got['wall']:.3f}; machine load average (1 min, {os.cpu_count()} cores) "
          f"{min(got['load']):.1f}-{max(got['load']):.1f}")
    window = got["statuses"]
    if window:
        def figure(key):
            return sorted(float(st[key]) for st in window if key in st)
        p50, p99, worst, rtf = (figure(k) for k in ("lateness_p50_ms", "lateness_p99_ms", "lateness_max_ms",
                                                     "rtf_recent"))
        print(f"  node /diagnostics ({len(window)} statuses, each over the node's last ~4 s of steps): lateness "
              f"p50 median {p50[len(p50) // 2]:.3f} ms, p99 median {p99[len(p99) // 2]:.3f} ms and worst "
              f"{p99[-1]:.3f} ms, max {worst[-1]:.2f} ms; rtf_recent {rtf[0]:.3f}-{rtf[-1]:.3f}; "
              f"messages_dropped {window[-1].get('messages_dropped')} (the run's)")
        over = sum(m >= 2.0 for m in (float(st["lateness_max_ms"]) for st in window))
        print(f"  statuses whose latest step was 2 ms late or more: {over} of {len(window)}")
    floor = got.get("floor")
    if floor:
        print(f"  the machine's floor beside it (a bare loop paced as the node paces, in a process of its own"
              f"{', SCHED_FIFO %d' % floor['priority'] if floor['priority'] else ''}): p99 {floor['p99_ms']:.3f} ms, "
              f"max {floor['max_ms']:.2f} ms, {floor['over_2ms']} of {floor['n']} deadlines 2 ms late or more")
    rss = got["rss"]
    print(f"  node RSS: {rss[0]:.1f} MB at the start, {rss[-1]:.1f} MB at the end, max {max(rss):.1f} MB")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=30.0, help="wall seconds under load")
    ap.add_argument("--baseline", type=float, default=20.0,
                    help="wall seconds measured before the subscribers start (the same node unloaded)")
    ap.add_argument("--subscribers", type=int, default=20)
    ap.add_argument("--no-slow", action="store_true", help="without the subscriber that never reads")
    ap.add_argument("--config", help="a sim_node config file (default: the bundled world's defaults at rtf 1, "
                                     "catch_up conservative)")
    args = ap.parse_args()
    env = dict(os.environ, ROS_DOMAIN_ID=str(free_ros_domain()), PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    os.environ["ROS_DOMAIN_ID"] = env["ROS_DOMAIN_ID"]
    with tempfile.TemporaryDirectory() as tmp:
        config = args.config or os.path.join(tmp, "sim.yaml")
        if not args.config:
            # conservative: a late step's lateness is its own, not the debt of an earlier stall
            Path(config).write_text("real_time_factor: 1.0\ncatch_up: conservative\n")
        node = start_node(config, env)
        # the machine's floor beside the loaded window: a bare paced loop one level above the
        # physics thread (when the config gives it a real-time priority)
        priority = re.search(r"^realtime_priority:\s*(\d+)", Path(config).read_text(), re.M)
        floor_priority = min(99, int(priority.group(1)) + 1) if priority and int(priority.group(1)) else 0
        log = []
        threading.Thread(target=lambda: log.extend(node.stdout), daemon=True).start()
        watch = Watch()
        subs = []
        try:
            while watch.sim_time() is None:
                if node.poll() is not None:
                    sys.exit("sim_node ended: " + "".join(log)[-2000:])
                time.sleep(0.2)
            print(f"sim_node up; {args.baseline:g} s without subscribers", flush=True)
            time.sleep(2.0)
            baseline = measure(watch, node, args.baseline)
            print(f"starting {args.subscribers} subscribers{'' if args.no_slow else ' and one that never reads'}",
                  flush=True)
            subs = [start_subscriber(env) for _ in range(args.subscribers + (0 if args.no_slow else 1))]
            for s in subs:
                wait_line(s, "SUBSCRIBED", 120)
            if not args.no_slow:
                subs[-1].send_signal(signal.SIGSTOP)
            time.sleep(2.0)                      # the discovery settles
            for s in subs[:args.subscribers]:
                s.send_signal(signal.SIGUSR1)    # their counts start now
            floor = start_pacing_floor(args.seconds, floor_priority, None)
            loaded = measure(watch, node, args.seconds)
            loaded["floor"] = json.loads(floor.communicate()[0].strip().splitlines()[-1])
            for s in subs[:args.subscribers]:
                s.send_signal(signal.SIGUSR2)    # and end now
        finally:
            counts = [stop_subscriber(s) for s in subs]
            watch.close()
            node.send_signal(signal.SIGINT)
            try:
                node.wait(60)
            except subprocess.TimeoutExpired:
                node.kill()
    readers = [c for c in counts[:args.subscribers] if c]
    print()
    report("without subscribers", baseline)
    report(f"{args.subscribers} subscribers on every topic{'' if args.no_slow else ' + 1 stopped (SIGSTOP)'}", loaded)
    if readers:
        sim_seconds = loaded["sim"]
        print(f"\nmessages per simulated second per subscriber ({len(readers)} answered):")
        print(f"{'topic':50s} {'min':>9s} {'mean':>9s}")
        for topic in sorted(readers[0]):
            got = [c.get(topic, 0) for c in readers]
            print(f"{topic:50s} {min(got) / sim_seconds:9.1f} {sum(got) / len(got) / sim_seconds:9.1f}")


if __name__ == "__main__":
    main()
