"""Soak: the bundled world at real-time factor 1 with every sensor at its default rate, recorded
into a zstd-compressed MCAP bag and published live over rclpy to subscribers in processes of
their own (bench/load_subscriber.py, subscribed to every topic before the first step), for a
given duration.

    source /work/ros_env.sh   # (or a sourced ROS 2 with the interface packages)
    python bench/soak.py [--seconds S] [--subscribers N] [--realtime-priority P] [--plot PNG] [--bag DIR]
                         [--deserialize-every K]

The run paces with catch_up conservative: a step that is late by more than a period moves the
pacing reference, so each minute's lateness is its own steps' (with compensatory pacing a stretch
of overload from other processes becomes a debt every later step carries, and the per-minute
figures would measure the machine's history, not drift of the run). It ends after S simulated
seconds, or after S wall seconds where the machine held it below rtf 1 (achieved rtf printed).

Prints (and checks, exit 1 where one fails):
- RSS of the process and the machine's 1-minute load average every 10 s of simulated time; the
  RSS growth from the first minute's end to the run's end must stay under 1 % (runs of 2
  minutes or more; shorter ones print it only). At simulated t = 30 s every subscriber is
  stopped (SIGSTOP) for LAG_SECONDS: Fast DDS keeps a writer's unacknowledged samples in a
  payload pool that grows, and stays, at the size of the largest backlog it has held (bounded
  by the topic's history depth: 10 images of each camera stream), and a subscriber that lags
  once makes it do so at any time of a run. Lagging on purpose in the first minute fills every
  pool to its bound there, so that growth after it is growth, not a pool's first filling;
- the step lateness per minute of simulated time: p50, p99, max and the histogram (drift shows
  as minutes getting later);
- messages per topic in the bag against rate x time (the configured rate of the topic times the
  simulated duration; within 1 % + 2 messages: the first and last instants), beside what the
  live transport published and what each subscriber received;
- that the bag reads end to end with rosbags (every message read, every K-th of each topic
  deserialized: K = 1 by default) and with the mcap package's reader (every chunk
  decompressed), with the same count per topic. The reading runs at nice 19 (the real-time
  part is over).
With --plot, a picture of the RSS and the load over time and the lateness per minute.
"""
import argparse
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from common import free_ros_domain

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
SUBSCRIBER = REPO / "bench" / "load_subscriber.py"
RSS_EVERY = 10.0              # s
MINUTE = 60.0
LAG_AT = 30.0                 # simulated s: every subscriber stopped ...
LAG_SECONDS = 3.0             # ... for this long (wall): more samples than any topic's depth


def rss_mb(pid="self", field="VmRSS"):
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) / 1024.0 for line in f if line.startswith(field + ":"))


def rss_kinds():
    """The RSS's parts (MB): anonymous (the heap: where a leak shows), file-backed (mapped
    libraries and files), shared memory (Fast DDS's segments, huge-page buffers); then what
    glibc's malloc holds in live blocks and free in its heaps (a leak grows the first; memory
    kept after a burst, the second), and the blocks Python's own allocator holds."""
    parts = [f"{k[3:].lower()} {rss_mb(field=k):.1f}" for k in ("RssAnon", "RssFile", "RssShmem")]
    from mbsim_ros.run.memory import mallinfo
    info = mallinfo()
    if info is not None:
        parts += [f"malloc in use {(info.uordblks + info.hblkhd) / 2**20:.1f}",
                  f"free {info.fordblks / 2**20:.1f}"]
    return "  ".join(parts + [f"python blocks {sys.getallocatedblocks()}"])


def session_for(bag_dir, seconds, realtime_priority=0):
    """(Session, Bridge, config, the live rclpy transport) of the bundled world at rtf 1, every
    sensor at its default rate, publishing into a zstd bag and rclpy."""
    from mbsim_ros.ros.bag import BagTransport
    from mbsim_ros.ros.bridge import WARM_UP_JOBS, Bridge
    from mbsim_ros.ros.transport import FanoutTransport
    from mbsim_ros.ros.transport_choice import transport_for
    from mbsim_ros.run import Session, build_simulation, load_config, load_world
    config = load_config(None, {"real_time_factor": 1.0, "catch_up": "conservative",
                                "realtime_priority": realtime_priority})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        models, _ = load_world(config)
    sim = build_simulation(models, config, warm_up_jobs=WARM_UP_JOBS)
    live = transport_for("rclpy")
    transport = FanoutTransport([live, BagTransport(bag_dir, compression="zstd")])
    bridge = Bridge(sim, transport, config)
    # the lateness of every step of the run (written through once here, so its pages do not
    # show up as growth of the RSS along the run)
    steps = int(round(seconds / sim.dt)) + 10
    return Session(sim, config, listeners=[bridge], queue=4096, jitter_window=steps), bridge, config, live


def expected_rates(sim, bridge, config):
    """{topic: messages per simulated second} of every topic the bridge advertised, from the
    configured rates (None for the latched ones: descriptions, /tf_static)."""
    fixed = {"clock": min(config.clock_rate, 1.0 / sim.dt), "tf": config.tf_rate,
             "diagnostics": config.diagnostics_rate, "joint_states": config.joint_state_rate}
    merged = {key: acc.rate for key, acc, _ in bridge.merged.values()}
    rates = {}
    for key, pub in bridge.pubs.items():
        head = key.split("/")[0]
        if key in fixed:
            rates[pub.topic] = fixed[key]
        elif head == "joint_states":
            rates[pub.topic] = config.joint_state_rate
        elif head in sim.devices:
            rates[pub.topic] = min(sim.devices[head].rate, 1.0 / sim.dt)
        elif head in merged:
            rates[pub.topic] = min(merged[head], 1.0 / sim.dt)
        else:
            rates[pub.topic] = None
    return rates


def read_rosbags(bag_dir, every=1):
    """{topic: messages} read by rosbags, every message's bytes read (every chunk decompressed)
    and every `every`-th message of each topic deserialized (its first and last among them)."""
    from rosbags.highlevel import AnyReader
    from rosbags.typesys import Stores, get_typestore
    counts, last = Counter(), {}
    with AnyReader([Path(bag_dir)], default_typestore=get_typestore(Stores.ROS2_JAZZY)) as reader:
        for conn, _, raw in reader.messages():
            if counts[conn.topic] % every == 0:
                reader.deserialize(raw, conn.msgtype)
            counts[conn.topic] += 1
            last[conn.topic] = (raw, conn.msgtype)
        for raw, msgtype in last.values():
            reader.deserialize(raw, msgtype)
    return dict(counts)


def read_mcap(bag_dir):
    """{topic: messages} read by the mcap package's reader (every chunk decompressed)."""
    from mcap.reader import make_reader
    counts = Counter()
    for path in sorted(Path(bag_dir).glob("*.mcap")):
        with open(path, "rb") as f:
            for _, channel, _ in make_reader(f).iter_messages():
                counts[channel.topic] += 1
    return dict(counts)


def read_bag(bag_dir, every=1):
    """(rosbags' {topic: messages}, the mcap reader's), read in two processes side by side."""
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        by_rosbags = pool.submit(read_rosbags, bag_dir, every)
        by_mcap = pool.submit(read_mcap, bag_dir)
        return by_rosbags.result(), by_mcap.result()


def per_minute(lateness, dt):
    """[(minute, p50 ms, p99 ms, max ms, histogram)] of the steps' lateness, by simulated minute."""
    from mbsim_ros.run.pacing import LATENESS_BINS
    per = int(round(MINUTE / dt))
    out = []
    for k in range(0, len(lateness), per):
        x = np.sort(lateness[k:k + per])
        hist = np.diff(np.searchsorted(x, LATENESS_BINS))
        out.append((k // per, 1e3 * x[len(x) // 2], 1e3 * x[int(0.99 * (len(x) - 1))], 1e3 * x[-1], hist.tolist()))
    return out


def plot(path, samples, minutes, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from mbsim_ros.run.pacing import LATENESS_LABELS
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    t, mb, load = (np.array(x) for x in zip(*samples))
    a.plot(t / 60, mb, ".-", color="C0")
    a.set_xlabel("simulated minutes")
    a.set_ylabel("RSS (MB)", color="C0")
    a.set_title("memory, and the machine's load")
    a2 = a.twinx()
    a2.plot(t / 60, load, "-", color="C3", lw=0.8)
    a2.set_ylabel(f"1-minute load average ({os.cpu_count()} cores)", color="C3")
    hist = np.array([m[4] for m in minutes], float)
    frac = hist / hist.sum(axis=1, keepdims=True)
    bottom = np.zeros(len(minutes))
    for j, label in enumerate(LATENESS_LABELS):
        b.bar([m[0] for m in minutes], frac[:, j], bottom=bottom, label=label)
        bottom += frac[:, j]
    b.set_xlabel("simulated minute")
    b.set_ylabel("fraction of steps")
    b.set_title("step lateness per minute")
    b.legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def start_subscribers(n, prefix, env):
    """n load_subscriber.py processes, each subscribed to every topic (after SUBSCRIBED)."""
    subs = [subprocess.Popen([sys.executable, str(SUBSCRIBER), prefix], cwd=REPO, env=env, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True) for _ in range(n)]
    for s in subs:
        line = s.stdout.readline()
        if not line.startswith("SUBSCRIBED") or int(line.split()[1]) == 0:
            sys.exit(f"a subscriber found no topic under {prefix} or ended: {line!r}")
    return subs


def lag(subs, seconds):
    """Every subscriber stopped for `seconds` (they read on afterwards): each topic's writer
    then holds as many unacknowledged samples as its history depth allows."""
    for s in subs:
        os.kill(s.pid, signal.SIGSTOP)
    time.sleep(seconds)
    for s in subs:
        os.kill(s.pid, signal.SIGCONT)
    print(f"subscribers stopped for {seconds:g} s at t = {LAG_AT:g} s (the writers' pools filled to their depth)",
          flush=True)


def stop_subscribers(subs):
    """Each subscriber's {topic: messages} (None for one that did not answer in 60 s)."""
    counts = []
    for s in subs:
        try:
            text = s.communicate(timeout=60)[0]
            lines = [x for x in text.splitlines() if x.startswith("{")]
            counts.append(json.loads(lines[-1]) if lines else None)
        except subprocess.TimeoutExpired:
            s.kill()
            s.communicate()
            counts.append(None)
    return counts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0,
                    help="simulated seconds (= wall seconds at rtf 1); the run ends after as many wall seconds "
                         "(+1) at the latest, where a loaded machine held it below rtf 1")
    ap.add_argument("--subscribers", type=int, default=2)
    ap.add_argument("--realtime-priority", type=int, default=0, metavar="N",
                    help="the physics thread under SCHED_FIFO at N, the threads that take the GIL at N-1 "
                         "(docs/real-time.md; needs CAP_SYS_NICE)")
    ap.add_argument("--plot", help="PNG to draw")
    ap.add_argument("--bag", help="where the bag goes (default: a temporary folder, removed)")
    ap.add_argument("--deserialize-every", type=int, default=1, metavar="K",
                    help="rosbags deserializes every K-th message of each topic (and reads all of them)")
    args = ap.parse_args()
    if "ROS_DOMAIN_ID" not in os.environ:
        os.environ["ROS_DOMAIN_ID"] = str(free_ros_domain())
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    tmp = tempfile.TemporaryDirectory()
    bag_dir = args.bag or os.path.join(tmp.name, "soak")
    from mbsim_ros.run.memory import map_large_blocks
    map_large_blocks()          # as `mbsim` does first: before rclpy and the bag allocate
    session, bridge, config, live = session_for(bag_dir, args.seconds, args.realtime_priority)
    sim = session.sim
    rates = expected_rates(sim, bridge, config)
    samples = []                 # (simulated s, RSS MB, 1-minute load average)
    failures = []
    # the subscribers are in place before the first step, so they can get the whole run
    subs = start_subscribers(args.subscribers, bridge.ns, env)
    try:
        time.sleep(2.0)          # the discovery of the subscribers settles
        wall0 = time.monotonic()
        session.start(args.seconds)
        next_sample = 0.0
        lagged = False
        while session.running:
            if not lagged and sim.t >= LAG_AT:
                lag(subs, LAG_SECONDS)
                lagged = True
            if time.monotonic() > wall0 + args.seconds + 1.0:
                session.stop()          # a loaded machine: the run ends in time all the same
            if sim.t >= next_sample:
                samples.append((sim.t, rss_mb(), os.getloadavg()[0]))
                print(f"t = {sim.t:7.1f} s  RSS {samples[-1][1]:.1f} MB ({rss_kinds()})  "
                      f"loadavg {samples[-1][2]:.2f}", flush=True)
                next_sample += RSS_EVERY
            time.sleep(0.2)
        session.join()
        wall = time.monotonic() - wall0
        # what was queued for publishing goes out before the last sample (a queue of frames
        # waiting for a lagging subscriber is not growth)
        queued = session.publisher.pending
        session.publisher.flush(timeout=30)
        stats = session.stats(last=1)
        samples.append((sim.t, rss_mb(), os.getloadavg()[0]))
        dropped = session.dropped()
        live_stats = live.stats()
    finally:
        session.close()
        counts = stop_subscribers(subs)
    # the real-time part is over: what follows reads and draws, and yields the machine to others
    os.nice(19)
    lateness = session.runner.lateness()
    duration = sim.t
    loads = [x[2] for x in samples]
    print(f"\nsoak: {duration:.1f} s simulated at rtf 1 in {wall:.1f} s of wall time (achieved {stats['rtf']:.4f}, "
          f"overruns {stats['overruns']}), zstd bag + rclpy with {args.subscribers} subscriber processes; "
          f"publishing jobs dropped {dropped}, queued at the end {queued} (sent before the last RSS sample); "
          f"physics thread {f'SCHED_FIFO {args.realtime_priority}' if args.realtime_priority else 'at normal priority'}")
    print(f"machine load (1-minute load average on {os.cpu_count()} cores, sampled every {RSS_EVERY:g} s): "
          f"mean {np.mean(loads):.2f}, min {min(loads):.2f}, max {max(loads):.2f}")
    after = [mb for t, mb, _ in samples if t >= MINUTE - 1e-9]
    if after:
        growth = 100.0 * (samples[-1][1] - after[0]) / after[0]
        print(f"RSS: {samples[0][1]:.1f} MB at t = 0, {after[0]:.1f} MB after the first minute, "
              f"{samples[-1][1]:.1f} MB at the end, max {max(x[1] for x in samples):.1f} MB: "
              f"growth after the first minute {growth:+.2f} %")
        t, mb = np.array([(t, mb) for t, mb, _ in samples if t >= MINUTE - 1e-9]).T
        if len(t) >= 3:
            slope = np.polyfit(t / 3600.0, mb, 1)[0]
            print(f"RSS after the first minute, least-squares line: {slope:+.1f} MB per simulated hour")
        if duration >= 2 * MINUTE and growth >= 1.0:
            failures.append(f"RSS grew {growth:.2f} % after the first minute")
    minutes = per_minute(lateness, sim.dt)
    from mbsim_ros.run.pacing import LATENESS_LABELS
    print("\nminute   p50 ms   p99 ms   max ms   " + " ".join(f"{x:>9s}" for x in LATENESS_LABELS))
    for m, p50, p99, worst, hist in minutes:
        print(f"{m:6d} {p50:8.3f} {p99:8.3f} {worst:8.2f}   " + " ".join(f"{n:9d}" for n in hist))
    if args.plot:           # before the reading, which takes long after an hour's run at nice 19
        plot(args.plot, samples, minutes, f"bench/soak.py --seconds {args.seconds:g}: SR1, every sensor, zstd bag, "
                                          f"rclpy + {args.subscribers} subscribers; machine load average "
                                          f"{min(loads):.0f}-{max(loads):.0f} on {os.cpu_count()} cores")
        print(f"plot: {args.plot}", flush=True)
    read0 = time.monotonic()
    by_rosbags, by_mcap = read_bag(bag_dir, args.deserialize_every)
    size = sum(f.stat().st_size for f in Path(bag_dir).iterdir()) / 1e6
    every = "each" if args.deserialize_every == 1 else f"one in {args.deserialize_every} of each topic"
    print(f"\nbag: {size:.1f} MB; {sum(by_rosbags.values())} messages read by rosbags ({every} deserialized), "
          f"{sum(by_mcap.values())} by the mcap reader ({time.monotonic() - read0:.0f} s at nice 19)")
    if by_rosbags != by_mcap:
        failures.append("rosbags and the mcap reader count different messages")
    readers = [c for c in counts if c is not None]
    if len(readers) < len(counts):
        failures.append(f"{len(counts) - len(readers)} subscriber(s) did not answer")
    print(f"\n{'topic':45s} {'rate x t':>9s} {'in bag':>9s} {'live':>9s} {'dropped':>7s}"
          + "".join(f" {'sub' + str(k):>8s}" for k in range(len(readers))))
    for topic in sorted(set(by_rosbags) | set(rates)):
        want = rates.get(topic)
        got = by_rosbags.get(topic, 0)
        pub = live_stats.get(topic, {})
        line = f"{topic:45s} {'' if want is None else f'{want * duration:9.0f}':>9s} {got:9d} " \
               f"{pub.get('messages', 0):9d} {pub.get('dropped', 0):7d}"
        line += "".join(f" {c.get(topic, 0):8d}" for c in readers)
        print(line)
        if want is not None and abs(got - want * duration) > 0.01 * want * duration + 2:
            failures.append(f"{topic}: {got} messages in the bag, rate x time {want * duration:.0f}")
        if want is None and topic not in rates and got > 1:
            failures.append(f"{topic}: {got} messages in the bag, of no topic the bridge advertised")
    tmp.cleanup()
    for f in failures:
        print("FAIL:", f)
    print("soak:", "FAIL" if failures else "ok", flush=True)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
