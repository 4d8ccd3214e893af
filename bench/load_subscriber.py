"""A user's rclpy node in a process of its own, subscribed to every topic under a prefix and to
/clock, /tf, /tf_static and /diagnostics, each with the QoS its publisher offers (reliable where
it is, transient local where it is; keep last 10, as `create_subscription(T, topic, cb, 10)`):
what bench/load.py and test/ros/test_load.py start twenty or five of.

    python bench/load_subscriber.py PREFIX [--wait S]

It waits until the graph has topics under PREFIX (up to --wait s), subscribes, prints
`SUBSCRIBED <n topics>`, counts the messages per topic (SIGUSR1 sets the counts to 0 and
SIGUSR2 freezes them: the start and the end of a measured window), and on SIGTERM or the end of its stdin prints one JSON line
{topic: messages} and exits. A "slow" reader is this process stopped with
SIGSTOP after SUBSCRIBED: it never reads nor acknowledges anything.
"""
import argparse
import json
import signal
import sys
import threading
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("prefix")
    ap.add_argument("--wait", type=float, default=60.0)
    args = ap.parse_args()

    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from mbsim_ros.ros.transport_choice import message_class

    rclpy.init(signal_handler_options=rclpy.signals.SignalHandlerOptions.NO)
    node = rclpy.create_node("mbsim_load_subscriber")
    # hidden topics (a segment starting with "_": actions' feedback and status) are not a user's
    def wanted(t):
        return ((t.startswith(args.prefix + "/") or t in ("/clock", "/tf", "/tf_static", "/diagnostics"))
                and not any(part.startswith("_") for part in t.split("/")))
    deadline = time.monotonic() + args.wait
    def offered():      # topics someone publishes (a name alone may come from a subscription)
        return {t: types[0] for t, types in node.get_topic_names_and_types()
                if wanted(t) and node.get_publishers_info_by_topic(t)}
    # discovery brings the node's publishers one by one: wait until the set has held for 1 s
    topics, since = {}, time.monotonic()
    while time.monotonic() < deadline:
        now = offered()
        if now != topics:
            topics, since = now, time.monotonic()
        elif (any(t.startswith(args.prefix + "/") for t in topics) and "/clock" in topics
              and time.monotonic() - since > 1.0):
            break
        time.sleep(0.1)
    counts = {}
    lock = threading.RLock()        # the signal handlers below run in this thread, maybe inside a count

    frozen = []

    def counter(topic):
        def count(_msg):
            with lock:
                if not frozen:
                    counts[topic] += 1
        return count
    subs = []
    for topic, typename in topics.items():
        offered = node.get_publishers_info_by_topic(topic)
        if not offered:
            continue                    # the node's inputs (joint commands): nobody publishes them
        reliable = any(p.qos_profile.reliability == ReliabilityPolicy.RELIABLE for p in offered)
        latched = any(p.qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL for p in offered)
        qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL if latched else DurabilityPolicy.VOLATILE)
        counts[topic] = 0
        subs.append(node.create_subscription(message_class(typename), topic, counter(topic), qos, raw=True))

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *a: stop.set())

    def restart(*_):
        with lock:
            for t in counts:
                counts[t] = 0
    signal.signal(signal.SIGUSR1, restart)
    signal.signal(signal.SIGUSR2, lambda *a: frozen.append(True))
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    # announced only once the handlers are in: SIGUSR1's default action would end the process
    print(f"SUBSCRIBED {len(subs)}", flush=True)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    while not stop.is_set():
        executor.spin_once(timeout_sec=0.1)
    with lock:
        print(json.dumps(counts), flush=True)
    executor.shutdown()
    node.destroy_node()
    rclpy.try_shutdown()


if __name__ == "__main__":
    main()
