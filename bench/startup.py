"""Start-up of `mbsim run` on the bundled world: cold (fresh kernel cache) and warm (cache present).

    python bench/startup.py                 # a cold run, then a warm run on the cache it wrote
    python bench/startup.py --profile       # ... plus a per-kernel compile-time table (cold run)
    python bench/startup.py --warm          # warm only (on $MBSIM_CACHE_DIR or a cache given with --cache)

Each run is a fresh `mbsim run --transport none --duration D` process (the real command, through
mbsim_ros.cli.main) whose kernel cache is a temporary directory (MBSIM_CACHE_DIR). It reports:
  first line      wall seconds from the process start to its first byte on stdout or stderr
  first message   wall seconds from the process start to the first message handed to the transport
  CPU at 1st msg  the process's CPU seconds (user + system) at that first message
  CPU total       the process's CPU seconds when it ended (os.wait4 rusage)
  compile CPU     CPU seconds inside numba compilations (numba's "numba:compile" events,
                  outermost ones only, so a kernel compiled inside its caller counts once)
  run stats       the run's own summary line (real-time factor, overruns, lateness)
The machine this runs on may be shared: wall seconds then include waiting for a core, CPU seconds
do not, so CPU seconds are the figure to compare between machines and runs.

--profile prints every compiled function: its compile CPU seconds excluding the functions compiled
inside it ("self"), including them ("total"), and how many specializations (signatures) it got.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Runs inside the measured process: hooks that record, then the real command.
CHILD = r"""
import json, os, sys, time
out_path = os.environ["MBSIM_BENCH_OUT"]
record = {"compiles": [], "first_message": None}
if os.environ.get("MBSIM_BENCH_PROFILE"):
    from numba.core import event

    class CompileTimes(event.Listener):
        # numba:compile events nest (a callee compiles while its caller is typed): keep a stack
        def __init__(self):
            self.stack = []
        def on_start(self, ev):
            self.stack.append((time.process_time(), time.perf_counter(), 0.0))
        def on_end(self, ev):
            cpu0, wall0, inner = self.stack.pop()
            cpu = time.process_time() - cpu0
            d = ev.data["dispatcher"]
            f = d.py_func
            record["compiles"].append(dict(name=f"{f.__module__}.{f.__qualname__}", cpu=cpu, self_cpu=cpu - inner,
                                           wall=time.perf_counter() - wall0, depth=len(self.stack),
                                           sig=str(ev.data["args"])[:200]))
            if self.stack:
                c, w, i = self.stack[-1]
                self.stack[-1] = (c, w, i + cpu)
    event.register("numba:compile", CompileTimes())

from mbsim_ros.ros import transport as _transport
_publish = _transport.NullTransport.publish
def publish(self, handle, data, stamp_ns=0):
    if record["first_message"] is None:
        record["first_message"] = (time.clock_gettime(time.CLOCK_MONOTONIC), time.process_time(), handle.topic)
    return _publish(self, handle, data, stamp_ns)
_transport.NullTransport.publish = publish

def dump():
    with open(out_path, "w") as f:
        json.dump(record, f)
import atexit
atexit.register(dump)
from mbsim_ros.cli import main
sys.exit(main(sys.argv[1:]))
"""


def run_once(cache, duration, profile, extra_env=None):
    """One measured `mbsim run` process on kernel cache directory `cache`."""
    fd, out_path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    env = dict(os.environ, MBSIM_CACHE_DIR=cache, MBSIM_BENCH_OUT=out_path, PYTHONUNBUFFERED="1",
               PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if profile:
        env["MBSIM_BENCH_PROFILE"] = "1"
    env.update(extra_env or {})
    argv = [sys.executable, "-c", CHILD, "run", "--transport", "none", "--duration", str(duration)]
    t0 = time.clock_gettime(time.CLOCK_MONOTONIC)
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=REPO)
    first_line = None
    chunks = []
    while True:
        data = os.read(p.stdout.fileno(), 65536)
        if not data:
            break
        if first_line is None:
            first_line = time.clock_gettime(time.CLOCK_MONOTONIC) - t0
        chunks.append(data)
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    wall = time.clock_gettime(time.CLOCK_MONOTONIC) - t0
    text = b"".join(chunks).decode(errors="replace")
    try:
        with open(out_path) as f:
            record = json.load(f)
    finally:
        os.unlink(out_path)
    if p.returncode != 0:
        sys.exit(f"bench/startup.py: mbsim run ended with status {p.returncode}:\n{text[-3000:]}")
    fm = record["first_message"]
    lines = [line.strip() for line in text.replace("\r", "\n").splitlines() if line.strip()]
    outer = [c for c in record["compiles"] if c["depth"] == 0]
    return dict(first_line=first_line, first_line_text=lines[0] if lines else "",
                first_message=None if fm is None else fm[0] - t0, cpu_first_message=None if fm is None else fm[1],
                cpu_total=usage.ru_utime + usage.ru_stime, wall=wall,
                compile_cpu=sum(c["cpu"] for c in outer), compiled=len(record["compiles"]),
                run_line=next((line for line in lines if line.startswith("steps:")), ""),
                compiles=record["compiles"], text=text)


def show(label, r, profile):
    def s(x):
        return "-" if x is None else f"{x:.2f} s"
    print(f"{label}: first line {s(r['first_line'])}  first message {s(r['first_message'])}  "
          f"CPU at first message {s(r['cpu_first_message'])}  CPU total {s(r['cpu_total'])}  wall {s(r['wall'])}")
    if profile:
        print(f"    compile CPU {r['compile_cpu']:.2f} s in {r['compiled']} function compilations")
    print(f"    first line: {r['first_line_text'][:110]}")
    print(f"    {r['run_line'][:160]}")


def profile_table(compiles, top):
    per = {}
    for c in compiles:
        e = per.setdefault(c["name"], dict(self_cpu=0.0, cpu=0.0, n=0, outer=0.0))
        e["self_cpu"] += c["self_cpu"]
        e["n"] += 1
        if c["depth"] == 0:
            e["outer"] += c["cpu"]
    rows = sorted(per.items(), key=lambda kv: -kv[1]["self_cpu"])
    total = sum(e["self_cpu"] for e in per.values())
    print(f"\ncompiled functions by self CPU seconds (of {total:.1f} s; 'sigs' = specializations compiled):")
    print(f"  {'self s':>7} {'share':>6} {'sigs':>4}  function")
    for name, e in rows[:top]:
        print(f"  {e['self_cpu']:7.2f} {100 * e['self_cpu'] / max(total, 1e-9):5.1f}% {e['n']:4d}  "
              f"{name.replace('mbsim_ros.', '')}")
    if len(rows) > top:
        rest = sum(e["self_cpu"] for _, e in rows[top:])
        print(f"  {rest:7.2f} {100 * rest / max(total, 1e-9):5.1f}%       ... {len(rows) - top} more")
    outer = [(name, e["outer"]) for name, e in per.items() if e["outer"] > 0]
    print("\nentry points (compiled from Python), CPU seconds including everything compiled inside them:")
    for name, cpu in sorted(outer, key=lambda x: -x[1]):
        print(f"  {cpu:7.2f}  {name.replace('mbsim_ros.', '')}")
    dup = [(name, [c["sig"] for c in compiles if c["name"] == name]) for name, e in per.items() if e["n"] > 1]
    if dup:
        print("\nfunctions compiled for more than one signature:")
        for name, sigs in dup:
            print(f"  {name.replace('mbsim_ros.', '')}: {len(sigs)}")
            for sig in sigs[:4]:
                print(f"      {sig[:150]}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--duration", type=float, default=1.0, help="simulated seconds per run (default 1)")
    p.add_argument("--profile", action="store_true", help="per-kernel compile-time table of the cold run")
    p.add_argument("--warm", action="store_true", help="warm run only, on --cache (or $MBSIM_CACHE_DIR)")
    p.add_argument("--cache", help="kernel cache directory to use (default: a fresh temporary one)")
    p.add_argument("--top", type=int, default=40, help="rows of the profile table")
    p.add_argument("--json", help="also write the figures to this file")
    args = p.parse_args()
    cache = args.cache or (os.environ.get("MBSIM_CACHE_DIR") if args.warm else None)
    fresh = cache is None
    if fresh:
        cache = tempfile.mkdtemp(prefix="mbsim-cache-")
    print(f"bench/startup.py: `mbsim run --transport none --duration {args.duration:g}` on the bundled world, "
          f"kernel cache {cache}; {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}")
    results = {}
    try:
        if not args.warm:
            results["cold"] = cold = run_once(cache, args.duration, args.profile)
            show("cold", cold, args.profile)
        results["warm"] = warm = run_once(cache, args.duration, args.profile)
        show("warm", warm, args.profile)
        if not args.warm:
            print(f"compilation: {cold['cpu_first_message'] - warm['cpu_first_message']:.1f} CPU s "
                  f"(CPU at first message, cold - warm)")
            if args.profile:
                profile_table(cold["compiles"], args.top)
    finally:
        if fresh:
            shutil.rmtree(cache, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({k: {kk: vv for kk, vv in v.items() if kk != "text"} for k, v in results.items()}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
