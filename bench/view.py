"""The live view's cost to the run: the bundled world (SR1 with its sensors, on the floor) run
without the view and with the view and one browser connected (headless Chromium, WebGL in
SwiftShader), side by side in one process, alternating:

    python bench/view.py [--seconds S] [--rounds N] [--realtime-priority P] [--cpu K]

Prints, for each configuration, the median over its rounds of
- rtf 1: the achieved real-time factor and the step lateness p50 / p99 / max (per round, and
  over every step of every round pooled: the steadier figure);
- rtf 0: steps per wall second;
and the view's own CPU per wall second: its process (view/child.py: scene messages, viser's
server) and the run's thread that writes snapshots to it, read from /proc and time.thread_time.
The browser's own rendering runs in other processes and is reported beside (its CPU per second).

The browser draws WebGL in software here (SwiftShader: most of a core), where a user's browser
draws on a GPU or on another machine. By default it is therefore held to the last core and this
process (physics) and the view's process to the others, in both configurations, so the comparison measures
the view and not a software renderer competing for the simulation's core; --share-cores lets the
browser run anywhere (the measure of a machine that also renders in software); --browser-nice 19
has it take only what the run's own threads leave of its core. --cpu K pins the
physics thread to core K in both configurations (the run's `cpu`): then this process is not held
to a core, and the view keeps its process and threads off core K itself.
"""
import argparse
import os
import statistics
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "view"))


def process_cpu(pids):
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except OSError:
            pass
    return total


def pin(pids, cores):
    """Every thread of `pids` onto `cores` (sched_setaffinity acts on one thread id)."""
    for pid in pids:
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                os.sched_setaffinity(int(tid), cores)
        except OSError:
            pass         # gone meanwhile


def renice(pids, nice):
    """Every thread of `pids` at `nice` (a nice value is a thread's own on Linux)."""
    for pid in pids:
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                os.setpriority(os.PRIO_PROCESS, int(tid), nice)
        except OSError:
            pass         # gone meanwhile


def browser_pids(driver):
    """The processes of this bench's browser: chromedriver's descendants (other Chromiums on
    the machine are not counted)."""
    parent = {}
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/stat") as f:
                    parent[int(pid)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                pass
    tree = {driver.service.process.pid}
    grew = True
    while grew:
        more = {pid for pid, ppid in parent.items() if ppid in tree} - tree
        tree |= more
        grew = bool(more)
    return sorted(tree)


def session_for(rtf, seconds, priority, listeners=(), cpu=None):
    """The bundled world's Session, its lateness kept for every step of the run."""
    from mbsim_ros.run import Session, load_config, load_world, build_simulation
    overrides = {"real_time_factor": rtf, "realtime_priority": priority}
    if cpu is not None:
        overrides["cpu"] = cpu
    config = load_config(None, overrides)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        models, _ = load_world(config)
        sim = build_simulation(models, config)
    steps = int(round(seconds / sim.dt)) + 1
    return Session(sim, config, listeners=list(listeners), jitter_window=steps)


def measured(session, seconds):
    w0 = time.monotonic()
    stats = session.run(seconds)
    wall = time.monotonic() - w0
    return dict(rtf=stats["rtf"], p50=stats["lateness_p50_ms"], p99=stats["lateness_p99_ms"],
                max=stats["lateness_max_ms"], steps_per_s=stats["steps"] / wall), session.runner.lateness()


def one_run(rtf, seconds, priority, cpu=None):
    """The run without the view."""
    session = session_for(rtf, seconds, priority, cpu=cpu)
    try:
        return measured(session, seconds)
    finally:
        session.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--port", type=int, default=18765)
    parser.add_argument("--realtime-priority", type=int, default=0, metavar="P",
                        help="the physics thread under SCHED_FIFO at P in both configurations (docs/real-time.md)")
    parser.add_argument("--cpu", type=int, default=None, metavar="K",
                        help="the physics thread pinned to core K in both configurations (the run's cpu)")
    parser.add_argument("--share-cores", action="store_true",
                        help="the browser on any core (default: on the last core, this process on the others)")
    parser.add_argument("--browser-nice", type=int, default=0, metavar="N",
                        help="the browser's processes at nice N (19: it takes only what the run leaves of its "
                             "core, as a browser drawing on a GPU or on another machine would)")
    args = parser.parse_args()
    cores = sorted(os.sched_getaffinity(0))
    split = None if args.share_cores or len(cores) < 2 else (set(cores[:-1]), {cores[-1]})
    if split and args.cpu is None:
        pin([os.getpid()], split[0])
    from browser import browser, wait_for
    from mbsim_ros.view.process import ViewProcess

    results, lateness = {}, {}
    load_before = os.getloadavg()[0]
    for rnd in range(args.rounds):
        for with_view in (False, True):
            for rtf in (1.0, 0.0):
                if with_view:
                    r, late = run_with_browser(ViewProcess(port=args.port), rtf, args.seconds, browser, wait_for,
                                               split and split[1], args.realtime_priority, args.cpu,
                                               args.browser_nice)
                else:
                    r, late = one_run(rtf, args.seconds, args.realtime_priority, args.cpu)
                results.setdefault((with_view, rtf), []).append(r)
                lateness.setdefault((with_view, rtf), []).append(late)
                print(f"round {rnd + 1} {'view + browser' if with_view else 'no view':15} rtf {rtf:g}: "
                      + ", ".join(f"{k} {v:.4g}" for k, v in r.items()), flush=True)
    med = {k: {f: statistics.median(r[f] for r in v) for f in v[0]} for k, v in results.items()}
    load = os.getloadavg()[0]
    where = (f"the browser on core {cores[-1]}" if split else "the browser on any core") + (
        f" at nice {args.browser_nice}, " if args.browser_nice else ", ") + (
        f"the physics thread on core {args.cpu}, the rest of this process on any core" if args.cpu is not None
        else f"this process on {sorted(split[0])}" if split else "this process on any core")
    fifo = f"SCHED_FIFO {args.realtime_priority}" if args.realtime_priority else "normal priority"
    print(f"\nmedian of {args.rounds} rounds of {args.seconds:g} s, machine load {load_before:.1f} before, "
          f"{load:.1f} after ({os.cpu_count()} cores; {where}; the physics thread at {fifo}):")
    a, b = med[(False, 1.0)], med[(True, 1.0)]
    print(f"  rtf 1 lateness p50/p99/max ms: no view {a['p50']:.3f}/{a['p99']:.3f}/{a['max']:.2f}, "
          f"view + browser {b['p50']:.3f}/{b['p99']:.3f}/{b['max']:.2f}; achieved rtf {a['rtf']:.3f} vs {b['rtf']:.3f}")
    pooled = {k: np.concatenate(lateness[(k, 1.0)]) * 1e3 for k in (False, True)}
    p = {k: np.percentile(v, [50, 99, 99.9]) for k, v in pooled.items()}
    print(f"  rtf 1 lateness over every step of the {args.rounds} rounds pooled, p50/p99/p99.9 ms: "
          f"no view {p[False][0]:.3f}/{p[False][1]:.3f}/{p[False][2]:.2f}, view + browser "
          f"{p[True][0]:.3f}/{p[True][1]:.3f}/{p[True][2]:.2f} (p99 ratio {p[True][1] / p[False][1]:.3f})")
    a0, b0 = med[(False, 0.0)], med[(True, 0.0)]
    print(f"  rtf 0 steps per second: no view {a0['steps_per_s']:.0f}, view + browser {b0['steps_per_s']:.0f} "
          f"(ratio {b0['steps_per_s'] / a0['steps_per_s']:.3f})")
    print(f"  the view's own CPU per second: its process {b['view_cpu']:.3f} s + the run's sender thread "
          f"{b['sender_cpu']:.3f} s at rtf 1; {b0['view_cpu']:.3f} + {b0['sender_cpu']:.3f} s at rtf 0; "
          f"the browser (SwiftShader) {b['browser_cpu']:.2f} s")


def run_with_browser(view, rtf, seconds, browser, wait_for, browser_cores=None, priority=0, cpu=None, nice=0):
    """The run with `view` (a ViewProcess) as its listener and a browser showing it, connected
    before it starts (the browser's processes held to browser_cores when given, at `nice`)."""
    from browser import button
    session = session_for(rtf, seconds, priority, [view], cpu)
    driver = browser()
    try:
        driver.get(view.url)
        wait_for(lambda: button(driver, "Pause") or button(driver, "Play"), "the page's panel")
        if browser_cores:
            pin(browser_pids(driver), browser_cores)
        time.sleep(5.0)             # the page built and drawing
        cpu0 = (process_cpu([view.pid]), view.sender_cpu_seconds)
        chrome = browser_pids(driver)
        if browser_cores:
            pin(chrome, browser_cores)      # (and any it started meanwhile)
        if nice:
            renice(chrome, nice)
        b0, w0 = process_cpu(chrome), time.monotonic()
        r, late = measured(session, seconds)
        wall = time.monotonic() - w0
        r.update(browser_cpu=(process_cpu(chrome) - b0) / wall,
                 view_cpu=(process_cpu([view.pid]) - cpu0[0]) / wall,
                 sender_cpu=(view.sender_cpu_seconds - cpu0[1]) / wall, dropped=view.frames_dropped)
        return r, late
    finally:
        session.close()
        driver.quit()


if __name__ == "__main__":
    main()
