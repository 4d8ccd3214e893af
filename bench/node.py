"""The whole node on the bundled world: SR1 with every sensor at its rate (IMU and force 1 kHz,
cameras 30 Hz, range 10 Hz), joint_states at 1 kHz, /tf at 100 Hz, /clock every step, all
recorded into a rosbag2 MCAP bag (the transport every machine has; live DDS costs about the
same per message, see bench/node_messages.py for the cost per message type).

    python bench/node.py [--seconds S] [--realtime-priority N] [--cpu K] [--plot PNG] [--live rclpy|dds]

Prints, each from its own run:
- rtf 0 (as fast as possible, publishing inline, rendering on its thread): the real-time factor;
- rtf 1 (publishing and rendering on their own threads): the achieved factor, overruns, the step
  lateness percentiles p50/p99/max and its histogram, and messages dropped;
- the per-step cost split: CPU time (time.thread_time, so load from other processes does not
  count) per simulated step in physics (the step kernel), sensors (kinematic sensors, rendering,
  ray casting, in whichever thread), messages (collecting in the physics thread, filling the
  templates, handing the bytes to the transport; with a bag, the Lane's filling and recording of
  the clock, joint states, /tf and kinematic sensors, ros/bag_lane.py) and bag (adding each message to
  the pending MCAP chunk, and the chunk writer thread writing the chunks into the file: the
  thread's whole CPU time, read from /proc), from a third, instrumented run at rtf 0 of up to 20
  simulated seconds (5 s ones varied by +-1.5 us a step on a 2-core VM; each timed call costs
  ~1 us more there); closing the bag
  (the last chunk, the summary, and rosbags writing metadata.yaml: ~0.15 s once per bag,
  whatever its length) is timed on its own, not spread over the steps of a short run;
- the machine load (uptime) beside them: the goals (issue 18) are for a quiet machine;
- the machine's own floor in the same minutes: a bare loop in a process of its own, paced as the
  runner paces (sleep until 0.2 ms before each 1 ms deadline, then spin), at one priority level
  above the physics thread, running beside the rtf 1 run. No code paced on this machine can be
  less late than that loop (on this 2-core VM it was woken up to 5-8 ms late on some days);
- the machine's floor for recording the bag's bytes: an O_DIRECT write of each byte from the
  page-aligned memory its producer just wrote it into (as the bag writes the cameras' images,
  which make most of them; the bag copies the rest once), timed on as many bytes per step as
  the instrumented run recorded: the part of "bag" that no code can avoid;
- with --plot PNG, a picture of it: each step's lateness over the rtf 1 run beside the bare
  loop's, the fraction of steps later than x with the goals drawn in, and the cost split;
- with --live rclpy|dds, every run records beside that live transport with nobody subscribed
  to it, as `mbsim run --transport LIVE --bag DIR` does (the bag's lane records, the live
  transport gets only what has readers; ROS_DOMAIN_ID chooses the domain).
"""
import argparse
import json
import os
import sys
import tempfile
import threading
import time
import warnings
from collections import defaultdict
from pathlib import Path

import numpy as np

from common import start_pacing_floor


def session_for(rtf, bag_dir, extra=None, seconds=60.0, live=None):
    from mbsim_ros.ros.bag import BagTransport
    from mbsim_ros.ros.transport import FanoutTransport
    from mbsim_ros.ros.transport_choice import transport_for
    from mbsim_ros.ros.bridge import WARM_UP_JOBS, Bridge
    from mbsim_ros.run import Session, load_config, load_world, build_simulation
    config = load_config(None, dict({"real_time_factor": rtf, "joint_state_rate": 1000.0}, **(extra or {})))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        models, _ = load_world(config)
    sim = build_simulation(models, config, warm_up_jobs=WARM_UP_JOBS)
    transport = BagTransport(bag_dir)
    if live:            # as `mbsim run --transport LIVE --bag DIR` records, nobody reading live
        transport = FanoutTransport([transport_for(live), transport])
    steps = int(round(seconds / sim.dt)) + 1     # lateness statistics over the whole run
    return Session(sim, config, listeners=[Bridge(sim, transport, config)], queue=4096, jitter_window=steps), transport


def run(seconds, rtf, bag_dir, extra=None, live=None):
    session, transport = session_for(rtf, bag_dir, extra, seconds, live)
    t0 = time.perf_counter()
    stats = session.run(seconds)
    worker = session.sim.optical_worker
    skipped = sum(worker.skipped.values()) if worker is not None else 0
    session.close()
    wall_with_flush = time.perf_counter() - t0
    messages = sum(v["messages"] for v in transport.stats().values() if v.get("direction", "out") == "out")
    # the first step's deadline (the pacing reference of a compensatory run that did not pause),
    # and each step's lateness
    lateness = (session.runner.pacing_reference[0], session.runner.lateness())
    return stats, session.dropped(), messages, wall_with_flush, skipped, session.runner.os_status, lateness


def plot(path, node_late, floor_late, per, floor_us, title):
    """The picture of a run: each step's lateness over the rtf 1 run beside the bare loop's (each
    given as (first deadline, lateness per deadline), on one clock), the fraction of steps later
    than x (where p99, overruns and max read off against the goals), and the CPU time per step
    by part against the 20 % line."""
    from matplotlib.figure import Figure
    fig = Figure(figsize=(10, 10), dpi=100)
    ax_time, ax_tail, ax_cost = fig.subplots(3, 1, gridspec_kw={"height_ratios": [3, 3, 1.4]})
    floor_ms = 1e-3       # a log axis: lateness under 1 us is drawn at 1 us
    series = [("bare paced loop beside it (the machine's floor)", floor_late, "0.6"),
              ("the node (physics thread)", node_late, "tab:blue")]       # the node drawn on top
    origin = node_late[0]
    for label, (start, late), colour in series:
        ms = np.maximum(1e3 * late, floor_ms)
        ax_time.semilogy(start - origin + np.arange(len(ms)) * 1e-3, ms, ".", ms=1.5, color=colour, label=label)
        tail = np.sort(ms)[::-1]
        ax_tail.loglog(tail, np.arange(1, len(tail) + 1) / len(tail), color=colour, label=label)
    for ax in (ax_time, ax_tail):
        line = ax.axhline if ax is ax_time else ax.axvline
        line(0.5, color="tab:orange", lw=0.8, ls="--", label="p99 goal 0.5 ms")
        line(2.0, color="tab:red", lw=0.8, ls="--", label="max goal 2 ms")
    ax_tail.axhline(1e-3, color="tab:purple", lw=0.8, ls=":", label="overrun goal: 0.1 % of steps over 1 ms")
    ax_tail.axvline(1.0, color="tab:purple", lw=0.8, ls=":")
    ax_time.set(xlabel="deadline (s from the node's first step)", ylabel="step lateness (ms)", title=title)
    ax_tail.set(xlabel="lateness x (ms)", ylabel="fraction of steps later than x")
    ax_time.legend(loc="upper right", fontsize=8, markerscale=6)
    ax_tail.legend(loc="lower left", fontsize=8)
    parts = ("physics", "sensors", "messages", "bag")
    colours = ("tab:green", "tab:olive", "tab:blue", "tab:cyan")
    left = 0.0
    for part, colour in zip(parts, colours):
        ax_cost.barh(0, per.get(part, 0.0), left=left, color=colour, label=f"{part} {per.get(part, 0.0):.1f} us")
        left += per.get(part, 0.0)
    budget = per["physics"] + per.get("sensors", 0.0) + 0.2 * per["physics"]
    ax_cost.axvline(budget, color="tab:red", lw=1, ls="--", label="messages + bag goal: 20 % of physics")
    if floor_us is not None:
        start = per["physics"] + per.get("sensors", 0.0)
        ax_cost.barh(-0.55, floor_us, left=start, height=0.25, color="0.4",
                     label=f"the machine's floor for recording the bag's bytes {floor_us:.1f} us")
    ax_cost.set(yticks=[], xlabel="CPU time per step (us, rtf 0, instrumented)")
    ax_cost.legend(loc="upper center", bbox_to_anchor=(0.5, -0.55), ncol=3, fontsize=8)
    fig.tight_layout()
    fig.savefig(path)


def recording_floor(directory, mib=64):
    """CPU us per MiB that recording bytes costs at least on this machine: an O_DIRECT write of
    bytes the producer just touched, from their own memory (as the bag's writer writes camera
    images: page-aligned, in huge pages where Linux gives them, sensors.optical.huge_page_memory;
    no copy, no Python per message) in writes of the bag's size (direct_file.WRITE_BATCH), over `mib`
    MiB of sources (more than the caches hold). None where the file system refuses O_DIRECT."""
    from mbsim_ros.ros.direct_file import WRITE_BATCH
    from mbsim_ros.sensors.optical import huge_page_memory
    MiB = 1 << 20
    memory = np.frombuffer(huge_page_memory(mib * MiB), np.uint8)
    sources = [memory[k:k + WRITE_BATCH] for k in range(0, mib * MiB, WRITE_BATCH)]
    for k, source in enumerate(sources):
        source[:] = k
    path = os.path.join(directory, "recording-floor")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o644)
    except (OSError, AttributeError):
        return None
    try:
        cpu = 0.0
        for k in range(2 * len(sources)):
            source = sources[k % len(sources)]
            source[::4096] += 1                    # touched by its producer, as a new frame is
            t0 = time.thread_time()
            os.pwrite(fd, source, (k % len(sources)) * WRITE_BATCH)
            cpu += time.thread_time() - t0
    except OSError:
        return None
    finally:
        os.close(fd)
        os.unlink(path)
    return 1e6 * cpu / (2 * mib)


def _thread_cpu(tid):
    """The CPU seconds thread `tid` of this process has run so far (Linux: /proc), or None."""
    try:
        with open(f"/proc/self/task/{tid}/schedstat") as f:
            return int(f.read().split()[0]) * 1e-9
    except (OSError, ValueError, IndexError):
        return None


class CostSplit:
    """Wraps the component functions to add up their CPU time (time.thread_time) per component."""

    def __init__(self):
        from mbsim_ros.dynamics import physics as dyn
        from mbsim_ros.ros import bridge, bag, bag_writer
        from mbsim_ros.sensors import optical
        from mbsim_ros.sensors import simulation as sens
        self.cpu = defaultdict(float)
        self.calls = defaultdict(int)
        self._inner = threading.local()
        self.patches = [(dyn.Physics, "step", "physics"), (sens.Simulation, "_sample", "sensors"),
                        (bridge.Bridge, "on_step", "messages"), (bridge.Bridge, "_write", "messages"),
                        (bag.BagTransport, "publish_many", "bag"), (bag.BagTransport, "_close", "bag close")]
        if _thread_cpu(threading.get_native_id()) is None:     # no /proc: the writer's one method
            self.patches.append((bag_writer.ChunkWriter, "_write", "bag"))
        self.originals = [(cls, name, getattr(cls, name)) for cls, name, _ in self.patches]
        for cls, name, part in self.patches:
            setattr(cls, name, self._wrap(getattr(cls, name), part))
        # the bag's writer thread: all of its CPU time up to the bag's close, whatever it ran (its
        # polling too; a method it gains later is not left out, as a per-image one once was)
        writer_close = bag_writer.ChunkWriter.close

        def close(writer):
            spent = _thread_cpu(writer.native_id)
            if spent is not None:
                self.cpu["bag"] += spent
            return writer_close(writer)
        self.originals.append((bag_writer.ChunkWriter, "close", writer_close))
        bag_writer.ChunkWriter.close = close
        # rendering inside _sample (inline) is already counted there; on the render thread it is not
        self._sense_optical = optical.sense_optical
        self._optical = optical

        def sense_optical(*a, **k):
            if threading.current_thread().name != "mbsim-render":
                return self._sense_optical(*a, **k)
            return self._timed(self._sense_optical, "sensors", a, k)
        optical.sense_optical = sense_optical

    def _timed(self, fn, part, args, kwargs):
        # nested calls (a bag write inside _write, the physics step inside _sample...) count
        # once, for the innermost component: the outer one gets its time back
        stack = getattr(self._inner, "stack", None)
        if stack is None:
            stack = self._inner.stack = []
        stack.append(0.0)
        t0 = time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            spent = time.thread_time() - t0
            inner = stack.pop()
            self.cpu[part] += spent - inner
            self.calls[part] += 1
            if stack:
                stack[-1] += spent

    def _wrap(self, fn, part):
        def wrapper(*args, **kwargs):
            return self._timed(fn, part, args, kwargs)
        return wrapper

    def restore(self):
        for cls, name, fn in self.originals:
            setattr(cls, name, fn)
        self._optical.sense_optical = self._sense_optical


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="simulated seconds per run (default 10)")
    parser.add_argument("--realtime-priority", type=int, default=0, help="SCHED_FIFO priority for the rtf 1 run")
    parser.add_argument("--cpu", type=int, help="pin the rtf 1 run's physics thread to this core")
    parser.add_argument("--plot", metavar="PNG", help="draw the lateness and the cost split into this PNG")
    parser.add_argument("--live", choices=("rclpy", "dds"), help="record beside this live transport (nobody "
                        "subscribed), as `mbsim run --transport LIVE --bag DIR` does")
    args = parser.parse_args()
    extra = {"realtime_priority": args.realtime_priority, "cpu": args.cpu}
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        run(0.05, 0, os.path.join(tmp, "warmup"), live=args.live)           # numba cache, first renders
        fast, dropped0, n0, _, _, _, _ = run(args.seconds, 0, os.path.join(tmp, "fast"), live=args.live)
        floor_priority = min(args.realtime_priority + 1, 99) if args.realtime_priority else 0
        floor_samples = os.path.join(tmp, "floor-lateness.txt")
        floor_proc = start_pacing_floor(args.seconds + 2.0, floor_priority, args.cpu,   # + the run's setup
                                        floor_samples)
        real, dropped1, n1, wall1, skipped1, os_status, node_late = run(args.seconds, 1.0, os.path.join(tmp, "real"),
                                                                         extra, args.live)
        floor = json.loads(floor_proc.communicate()[0])
        floor_start, *floor_late = np.loadtxt(floor_samples)
        floor_late = (floor_start, np.array(floor_late))
        split = CostSplit()
        try:
            timed, _, _, _, _, _, _ = run(min(args.seconds, 20.0), 0, os.path.join(tmp, "split"), live=args.live)
        finally:
            split.restore()
        floor_per_mib = recording_floor(tmp)
        recorded = sum(p.stat().st_size for p in Path(tmp, "split").glob("*.mcap"))
    load_after = os.getloadavg()
    steps = real["steps"]
    print(f"bench/node.py: bundled SR1 world, every sensor at its rate, joint_states 1 kHz, recording a bag"
          f"{f' beside live {args.live} (nobody subscribed)' if args.live else ''}; "
          f"{args.seconds:g} simulated seconds per run; {os.cpu_count()} CPUs, load average "
          f"{load_before[0]:.2f} before, {load_after[0]:.2f} after (1 min)")
    print(f"rtf 0 (as fast as possible, publishing inline, rendering on its thread): real-time factor {fast['rtf']:.2f} "
          f"({1e6 * fast['wall_time'] / fast['steps']:.0f} us wall per step incl. {n0 / fast['steps']:.1f} messages), "
          f"{dropped0} dropped")
    print(f"rtf 1 (publishing and rendering on their own threads; physics thread: {os_status}): "
          f"achieved {real['rtf']:.3f}, overruns {real['overruns']} of {steps} steps "
          f"({100.0 * real['overruns'] / max(steps, 1):.2f} %), lateness p50/p99/max "
          f"{real['lateness_p50_ms']:.3f}/{real['lateness_p99_ms']:.3f}/{real['lateness_max_ms']:.3f} ms "
          f"(mean {real['lateness_mean_ms']:.3f}; over every step), histogram "
          f"{real['lateness_histogram']}; {dropped1} steps of messages dropped, {skipped1} camera/range "
          f"frames skipped, {n1} messages, {wall1:.2f} s wall including the final flush")
    policy = f"SCHED_FIFO priority {floor['priority']}" if floor["priority"] else "normal priority"
    print(f"the machine's floor beside the rtf 1 run: a bare loop paced as the runner paces, {policy}: "
          f"lateness p99/max {floor['p99_ms']:.3f}/{floor['max_ms']:.3f} ms, {floor['over_2ms']} of "
          f"{floor['n']} deadlines late by >= 2 ms")
    per = {k: 1e6 * v / timed["steps"] for k, v in split.cpu.items() if k != "bag close"}
    total = sum(per.values())
    print(f"CPU time per step (rtf 0, instrumented, {timed['steps']} steps): "
          + ", ".join(f"{k} {per.get(k, 0.0):.1f} us" for k in ("physics", "sensors", "messages", "bag"))
          + f"; total {total:.1f} us; messages + bag = {100 * (per.get('messages', 0) + per.get('bag', 0)) / per['physics']:.0f} % "
          f"of physics; closing the bag {1e3 * split.cpu['bag close']:.0f} ms once")
    per_step_mib = recorded / 2**20 / timed["steps"]
    floor_us = None
    if floor_per_mib is not None:
        floor_us = floor_per_mib * per_step_mib
        print(f"the machine's floor for recording {1024 * per_step_mib:.1f} KiB a step (the bag's size over the "
              f"steps): an O_DIRECT write from the producer's memory, {floor_per_mib:.0f} us CPU per MiB, "
              f"= {floor_us:.1f} us a step, {100 * floor_us / per['physics']:.0f} % of physics")
    goals = [("p99 < 0.5 ms", real["lateness_p99_ms"] < 0.5), ("max < 2 ms", real["lateness_max_ms"] < 2.0),
             ("overruns < 0.1 %", real["overruns"] < 0.001 * steps), ("rtf 0 >= 6x", fast["rtf"] >= 6.0),
             ("messages + bag < 20 % of physics", per.get("messages", 0) + per.get("bag", 0) < 0.2 * per["physics"])]
    print("issue 18 goals (defined on a quiet machine): "
          + ", ".join(f"{name} {'met' if ok else 'MISSED'}" for name, ok in goals)
          + (f" (the machine's floor alone had a max of {floor['max_ms']:.2f} ms)" if floor["max_ms"] >= 2.0 else ""))
    if args.plot:
        plot(args.plot, node_late, floor_late, per, floor_us,
             f"bench/node.py, {time.strftime('%Y-%m-%d')}: rtf 1 for {args.seconds:g} s, {os_status}; "
             f"load {load_before[0]:.2f}")
        print(f"the picture: {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
