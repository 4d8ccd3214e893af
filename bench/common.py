"""Helpers shared by the benchmarks in bench/: timing, quiet loading, the result table, a free ROS
domain, the machine's pacing floor (a bare paced loop in a process of its own).

Benchmarks are scripts (`python bench/<name>.py`), so they import this module as `common`.
"""
import contextlib
import os
import sys
import time


def time_per_call(fn, *args, batches=7, batch_seconds=0.02, warmup=3, setup=None, clock=time.perf_counter):
    """Best (smallest) per-call time in seconds of fn(*args), over `batches` timed batches.

    After `warmup` untimed calls (numba compiles on the first one), the number of calls per
    batch doubles until one batch takes at least `batch_seconds`; then `batches` batches of
    that many calls are timed with `clock` and the best batch wins. Loop and call
    overhead from Python is included, the same for every engine. `setup()`, if given, runs
    untimed before each timed batch (e.g. to reset a simulation to the bench state). `clock`:
    time.thread_time leaves out the time the thread waits for a core on a busy machine (for
    calls that run on the calling thread alone).
    """
    return time_side_by_side({0: (fn, args, setup)}, batches, batch_seconds, warmup, clock)[0]


def time_side_by_side(calls, batches=7, batch_seconds=0.02, warmup=3, clock=time.perf_counter):
    """{key: best per-call seconds} for calls = {key: (fn, args, setup or None)}, each timed as
    time_per_call times one call, but with the batches taken in turn (one batch of every call
    per round): a load that comes and goes reaches every call alike, so the ratios between
    them stay fair on a busy machine."""
    counts = {key: _calls_per_batch(fn, args, batch_seconds, warmup, clock) for key, (fn, args, _) in calls.items()}
    best = dict.fromkeys(calls, float("inf"))
    for _ in range(batches):
        for key, (fn, args, setup) in calls.items():
            if setup is not None:
                setup()
            n = counts[key]
            t = clock()
            for _ in range(n):
                fn(*args)
            best[key] = min(best[key], (clock() - t) / n)
    return best


def _calls_per_batch(fn, args, batch_seconds, warmup, clock):
    for _ in range(warmup):
        fn(*args)
    n = 1
    while True:
        t = clock()
        for _ in range(n):
            fn(*args)
        if clock() - t >= batch_seconds:
            return n
        n *= 2


@contextlib.contextmanager
def quiet_stderr():
    """Silence the C/C++ stderr (file descriptor 2) of a noisy loader, e.g. urdfdom warnings."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def print_table(header, rows):
    """Print rows (lists of strings) under header as a plain aligned text table."""
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    line = lambda r: "  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip()
    print(line(header))
    print(line(["-" * w for w in widths]))
    for r in rows:
        print(line(r))


def free_ros_domain(first=150, last=229, listen=2.0, tries=20):
    """A ROS domain id in first..last that nobody on this machine uses: a random one on which a
    throwaway rclpy node saw no other node for `listen` s. A bench that counts messages on a
    domain another node shares counts that node's messages too."""
    import random
    import rclpy
    for _ in range(tries):
        domain = random.SystemRandom().randint(first, last)
        context = rclpy.Context()
        rclpy.init(context=context, domain_id=domain)
        try:
            node = rclpy.create_node("mbsim_bench_domain_check", context=context)
            end = time.monotonic() + listen
            others = []
            while time.monotonic() < end and not others:
                time.sleep(0.1)
                others = [n for n, _ in node.get_node_names_and_namespaces() if n != node.get_name()]
            node.destroy_node()
        finally:
            rclpy.shutdown(context=context)
        if not others:
            return domain
        print(f"ROS domain {domain} is in use ({', '.join(sorted(others))}): trying another", file=sys.stderr)
    raise SystemExit(f"no free ROS domain in {first}-{last} after {tries} tries")


_PACING_FLOOR = """
import json, os, sys, time
seconds, priority, cpu, samples = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
if cpu >= 0:
    os.sched_setaffinity(0, {cpu})
if priority:
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    except OSError:
        priority = 0
perf, sleep = time.perf_counter, time.sleep
late = []
start = perf() + 0.01
for k in range(int(seconds * 1000)):
    target = start + k * 1e-3
    wait = target - perf()
    if wait > 2e-4:
        sleep(wait - 2e-4)
    now = perf()
    while now < target:
        now = perf()
    late.append(now - target)
if samples:   # the first deadline (perf_counter: CLOCK_MONOTONIC, one clock for all processes), then each lateness
    with open(samples, "w") as f:
        f.write(" ".join(f"{x:.7f}" for x in [start, *late]))
late.sort()
print(json.dumps({"n": len(late), "p99_ms": 1e3 * late[int(0.99 * (len(late) - 1))], "max_ms": 1e3 * late[-1],
                  "over_2ms": sum(x >= 2e-3 for x in late), "priority": priority}))
"""


def start_pacing_floor(seconds, priority, cpu, samples=""):
    """The bare paced loop (_PACING_FLOOR) in a process of its own, for `seconds`; it writes
    each deadline's lateness (s) into the file `samples` when given one."""
    import subprocess
    return subprocess.Popen([sys.executable, "-c", _PACING_FLOOR, str(seconds), str(priority),
                             str(-1 if cpu is None else cpu), samples], stdout=subprocess.PIPE, text=True)
