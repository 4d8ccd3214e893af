"""Batch throughput: SR1 scenarios (the bundled world, gyro noise, a seed each, every built-in
metric) run by `mbsim batch`'s machinery on Dask with 1 and 2 local workers, against a plain loop
of the same scenario function in this process and against the bare physics (a sensors
Simulation stepped in a loop, no harness, no recording).

    python bench/batch.py [--seconds 5] [--scenarios 6] [--quick]
    python bench/batch.py --batched [--seconds 1] [--scenarios 32] [--repeat 2]

Prints scenarios per second for each, the 2-worker speedup over 1 worker (goal: >= 1.8x on 2
cores), and the batch machinery's overhead per scenario (Dask scheduling, moving the world and
the rows, Parquet streaming) as a share of one scenario (goal: under 5 % for a 5 s SR1
scenario), two ways: in wall time (the batch's wall time times its workers minus the scenarios'
own wall times) and in CPU time (the CPU of every process of the batch, this one with the
scheduler and nannies and the workers, minus the scenarios' own thread CPU time). CPU time is the
figure that holds on a loaded machine; wall time and the speedup need free cores. Last, the
machinery's cost per task alone (40 one-step scenarios through one worker) against one SR1
scenario's CPU time: the overhead a long batch pays per scenario. The workers
load the numba kernels once each (a warm-up task before timing, timed separately). The load
average is printed beside each figure, and the cores two busy processes get together (on a
shared machine, what bounds the 2-worker speedup).

--batched: a batch every scenario of which can run batched (SR1, initial knee angles and
headings crossed with seeds, the built-in metrics that read the state) run both ways on one
LocalCluster of 2 workers as `mbsim batch` starts it: as the worlds of BatchSimulations (the
default) and one Harness per scenario (--no-batched), alternating, after one untimed run of
each (every worker has loaded both paths' kernels); wall time and the CPU time of every process
(this one, scheduler, nannies, workers: the figure a loaded machine does not blur). Then each way
once more as the command itself, a fresh `mbsim batch` process (cluster start and kernel loads
included). Prints the times side by side and their ratios, the rows compared bit for bit. Last, how a chunk is
best put on the cores when it steps once per call: one BatchSimulation on numba's 2 threads
(prange) against two half batches on a thread each.
"""
import argparse
import math
import os
import sys
import tempfile
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from mbsim_ros.batch.runner import connect, run_batch  # noqa: E402 (the checkout first)


def load():
    return "load %.1f/%.1f/%.1f" % os.getloadavg()


def cpu_seconds(children_only=False):
    """User + system CPU of this process (unless children_only) and its live descendants (the workers)."""
    import psutil
    me = psutil.Process()
    total = 0.0
    for p in ([] if children_only else [me]) + me.children(recursive=True):
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


def spin(seconds, out):
    t0, c0 = time.time(), time.process_time()
    while time.time() - t0 < seconds:
        pass
    out.put((time.process_time() - c0) / seconds)


def cores_available(seconds=2.0):
    """The cores two busy processes get together right now: what bounds a 2-worker speedup on a
    shared machine (each worker can have at most its own process's share)."""
    import multiprocessing as mp
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=spin, args=(seconds, out)) for _ in range(2)]
    for p in procs:
        p.start()
    got = [out.get() for _ in procs]
    for p in procs:
        p.join()
    return sum(got)


def spec_for(seconds, scenarios):
    from mbsim_ros.batch.spec import load_spec, prepare
    metrics = {m: {} for m in ("fell", "final_tilt", "max_tilt", "max_contact_force", "max_joint_torque",
                               "imu_rms", "distance", "settle_time")}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return prepare(load_spec({"world": {"sensors": {"WaistGyro": {"noise": {"stddev": 1e-3}}}},
                                  "duration": seconds, "seeds": scenarios, "metrics": metrics}))


def bare(spec):
    """The physics alone: the same world and sensors, stepped one step at a time."""
    import copy
    from mbsim_ros.run import build_simulation
    t0 = time.perf_counter()
    for s in spec.scenarios:
        config = copy.deepcopy(spec.config)
        config.seed = s["seed"]
        sim = build_simulation(copy.deepcopy(spec.models), config)
        for _ in range(int(round(spec.duration / sim.dt))):
            sim.step()
    return time.perf_counter() - t0


def plain(spec):
    """The scenario function (harness, recording, metrics) in a loop in this process."""
    from mbsim_ros.batch.scenario import run_scenario
    world = spec.world_bytes()
    t0, c0 = time.perf_counter(), cpu_seconds()
    rows = [run_scenario(world, s)[0] for s in spec.scenarios]
    return time.perf_counter() - t0, cpu_seconds() - c0, rows


def on_dask(spec, workers, out):
    """(cluster start, kernel load, wall, CPU of all processes, CPU of the workers, rows) of one
    batch on a new LocalCluster of `workers`."""
    from mbsim_ros.batch.scenario import run_scenario
    t0 = time.perf_counter()
    client, cluster = connect(workers=workers)     # the LocalCluster `mbsim batch` starts
    started = time.perf_counter() - t0
    # one short scenario per worker: each loads the numba kernels from the cache (once per process)
    short = dict(spec.scenarios[0], scenario="warm")
    warm = spec_for(0.01, 1)
    t0 = time.perf_counter()
    client.gather([client.submit(run_scenario, warm.world_bytes(), short, workers=[w], pure=False)
                   for w in client.scheduler_info()["workers"]])
    warmed = time.perf_counter() - t0
    t0, c0, w0 = time.perf_counter(), cpu_seconds(), cpu_seconds(children_only=True)
    table = run_batch(spec, out, client=client)
    wall, cpu, cpu_workers = time.perf_counter() - t0, cpu_seconds() - c0, cpu_seconds(children_only=True) - w0
    client.close()
    cluster.close()
    return started, warmed, wall, cpu, cpu_workers, table.to_pylist()


def batched_spec(seconds, scenarios):
    """SR1 scenarios of one model: knee angles x headings x seeds (at least `scenarios`), state metrics."""
    from mbsim_ros.batch.spec import load_spec, prepare
    metrics = {m: {} for m in ("fell", "final_tilt", "max_tilt", "max_contact_force", "max_joint_torque",
                               "distance", "settle_time")}
    knees = [0.0, 0.1, 0.2, 0.3]
    seeds = max(1, -(-scenarios // (2 * len(knees))))
    data = {"duration": seconds, "seeds": seeds, "metrics": metrics,
            "parameters": {"joint.RLEG_KNEE.q0": {"values": knees}, "model.SR1.yaw": {"values": [0.0, 0.3]}}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return data, prepare(load_spec(data))


def prange_or_chunks(spec, worlds=16, steps=300, repeat=3):
    """Stepping one step per call (as a batched chunk records every step): one BatchSimulation
    of all worlds on numba's threads (2) against two of half as many, each on its own Python
    thread with one numba thread (the kernels release the GIL). us per world-step, best of repeat."""
    import copy
    import threading
    import numba
    import mbsim_ros as mb
    from mbsim_ros.run import build_simulation
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sim = build_simulation(copy.deepcopy(spec.models), copy.deepcopy(spec.config))

        def batch(n):
            return mb.BatchSimulation(list(sim.models), n, dt=sim.dt, poses=sim.placements, names=sim.entities)

        def run(b, threads):
            numba.set_num_threads(threads)
            for _ in range(steps):
                b.step()

        def one():
            b = batch(worlds)
            t0 = time.perf_counter()
            run(b, 2)
            return time.perf_counter() - t0

        def two():
            bs = [batch(worlds // 2), batch(worlds // 2)]
            ts = [threading.Thread(target=run, args=(b, 1)) for b in bs]
            t0 = time.perf_counter()
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            return time.perf_counter() - t0
        best = {"one": math.inf, "two": math.inf}
        for _ in range(repeat):
            best["one"] = min(best["one"], one())
            best["two"] = min(best["two"], two())
    per = {k: v / worlds / steps * 1e6 for k, v in best.items()}
    print(f"{worlds} worlds, one step a call, best of {repeat}: one batch on 2 threads (prange) {per['one']:.0f} us per "
          f"world-step, two batches of {worlds // 2} on a thread each {per['two']:.0f} us: {per['one'] / per['two']:.2f}x "
          f"({load()})")


def compare_batched(seconds, scenarios, repeat):
    """Batched against one Harness per scenario, on one cluster and as the command; then how a
    chunk meets the cores (prange_or_chunks)."""
    import subprocess
    import yaml
    from mbsim_ros.batch.plan import ran_batched
    data, spec = batched_spec(seconds, scenarios)
    n = len(spec.scenarios)
    print(f"{n} SR1 scenarios of {seconds:g} s (knee angle x heading x seed), every one batchable, on a LocalCluster "
          f"of 2 workers ({os.cpu_count()} cores, {load()})")
    with tempfile.TemporaryDirectory() as tmp:
        client, cluster = connect(workers=2)
        times, cpus = {True: [], False: []}, {True: [], False: []}
        rows = {}
        for k in range(repeat + 1):                 # the first round untimed: kernels loaded in every worker
            for batched in (True, False):
                t0, c0 = time.perf_counter(), cpu_seconds()
                table = run_batch(spec, os.path.join(tmp, f"{k}-{batched}"), client=client, batched=batched)
                wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
                rows[batched] = table.to_pylist()
                if k:
                    times[batched].append(wall)
                    cpus[batched].append(cpu)
                    print(f"  round {k}: {'batched      ' if batched else 'one by one   '} {wall:6.2f} s wall, "
                          f"{cpu:6.2f} s CPU of every process ({load()})")
        client.close()
        cluster.close()
        assert all(ran_batched(r) for r in rows[True]) and not any(ran_batched(r) for r in rows[False])
        same = all(a[m] == b[m] or (math.isnan(a[m]) and math.isnan(b[m]))
                   for a, b in zip(rows[True], rows[False]) for m in spec.metrics)
        best = {b: min(t) for b, t in times.items()}
        least = {b: min(t) for b, t in cpus.items()}
        print(f"warm cluster, best of {repeat}: batched {best[True]:.2f} s, one by one {best[False]:.2f} s wall: "
              f"{best[False] / best[True]:.2f}x; CPU {least[True]:.2f} against {least[False]:.2f} s: "
              f"{least[False] / least[True]:.2f}x (metrics equal bit for bit: {same})")
        path = os.path.join(tmp, "sweep.yaml")
        with open(path, "w") as f:
            yaml.safe_dump(data, f)
        cold = {}
        for batched in (True, False):
            command = [sys.executable, "-m", "mbsim_ros.cli", "batch", path, "-o", os.path.join(tmp, f"cli-{batched}"),
                       "--workers", "2", "--quiet", "--no-plot"] + ([] if batched else ["--no-batched"])
            t0 = time.perf_counter()
            done = subprocess.run(command, capture_output=True, text=True)
            cold[batched] = time.perf_counter() - t0
            line = next((x for x in done.stdout.splitlines() if x.startswith("batched:")), done.stderr.strip()[-200:])
            print(f"  mbsim batch{'' if batched else ' --no-batched'}: {cold[batched]:.1f} s ({load()}): {line}")
        print(f"the command, cluster start and kernel loads included: batched {cold[True]:.1f} s, one by one "
              f"{cold[False]:.1f} s: {cold[False] / cold[True]:.2f}x")
    prange_or_chunks(spec)
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, help="simulated seconds per scenario (default 5; --batched 1)")
    p.add_argument("--scenarios", type=int, help="scenarios per batch (default 6; --batched 32)")
    p.add_argument("--quick", action="store_true", help="1 s scenarios, 4 of them")
    p.add_argument("--batched", action="store_true", help="batched against one by one (default 32 scenarios of 1 s)")
    p.add_argument("--repeat", type=int, default=2, help="--batched: timed rounds of each (default 2)")
    args = p.parse_args()
    if args.batched:
        args.seconds, args.scenarios = args.seconds or 1.0, args.scenarios or 32
    elif args.quick:
        args.seconds, args.scenarios = 1.0, 4
    else:
        args.seconds, args.scenarios = args.seconds or 5.0, args.scenarios or 6
    try:
        import dask.distributed  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError as e:
        print(f"bench/batch.py: needs dask[distributed] and pyarrow ({e}); skipped")
        return 0
    if args.batched:
        return compare_batched(args.seconds, args.scenarios, args.repeat)
    n = args.scenarios
    print(f"{n} scenarios of {args.seconds:g} s of the SR1 world on {os.cpu_count()} cores ({load()})")
    spec = spec_for(args.seconds, n)
    plain(spec_for(0.01, 1))                       # kernels loaded in this process
    c0 = cpu_seconds()
    t_bare = bare(spec)
    c_bare = cpu_seconds() - c0
    print(f"bare physics loop      {n / t_bare:7.3f} scenarios/s  ({t_bare / n:.3f} s each, {c_bare / n:.3f} s CPU; {load()})")
    t_plain, c_plain, rows = plain(spec)
    own_cpu = sum(r["cpu_time"] for r in rows) / n
    print(f"plain scenario loop    {n / t_plain:7.3f} scenarios/s  ({t_plain / n:.3f} s each: harness, recording "
          f"and metrics {100 * (c_plain - c_bare) / c_bare:+.1f} % CPU over the bare physics; {own_cpu:.3f} s CPU "
          f"each; {load()})")
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for workers in (1, 2):
            started, warmed, wall, cpu, cpu_workers, rows = on_dask(spec, workers, os.path.join(tmp, f"w{workers}"))
            assert all(r["status"] == "ok" for r in rows), [r["error"] for r in rows]
            inside = sum(r["wall_time"] for r in rows)
            inside_cpu = sum(r["cpu_time"] for r in rows)
            results[workers] = wall
            overhead = (wall * workers - inside) / n   # worker-seconds not spent inside a scenario
            overhead_cpu = (cpu - inside_cpu) / n
            print(f"dask, {workers} worker{'s' if workers > 1 else ' '}        {n / wall:7.3f} scenarios/s  "
                  f"(cluster start {started:.1f} s, kernel load {warmed:.1f} s, untimed; {load()})\n"
                  f"    machinery per scenario: wall {overhead * 1e3:.0f} ms = {100 * overhead / (inside / n):.1f} % "
                  f"of a scenario's {inside / n:.2f} s; CPU {overhead_cpu * 1e3:.0f} ms = "
                  f"{100 * overhead_cpu / (inside_cpu / n):.1f} % of a scenario's {inside_cpu / n:.3f} s CPU "
                  f"(in a plain process {own_cpu:.3f} s); of it in the workers {(cpu_workers - inside_cpu) / n * 1e3:.0f} ms, "
                  f"in this process (client, scheduler, nannies) {(cpu - cpu_workers) / n * 1e3:.0f} ms")
        # the machinery's own cost per task, apart from the cluster's background over a long
        # wall time: many one-step scenarios through one worker
        tiny = spec_for(0.001, 40)
        client, cluster = connect(workers=1)
        run_batch(spec_for(0.001, 1), os.path.join(tmp, "warm"), client=client)
        t0, c0 = time.perf_counter(), cpu_seconds()
        rows = run_batch(tiny, os.path.join(tmp, "tiny"), client=client).to_pylist()
        wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
        client.close()
        cluster.close()
        per_cpu = (cpu - sum(r["cpu_time"] for r in rows)) / len(rows)
        per_wall = (wall - sum(r["wall_time"] for r in rows)) / len(rows)
        print(f"per task, {len(rows)} one-step scenarios on 1 worker: machinery {per_cpu * 1e3:.1f} ms CPU, "
              f"{per_wall * 1e3:.1f} ms wall = {100 * per_cpu / own_cpu:.2f} % (CPU) and {100 * per_wall / (t_plain / n):.2f} % "
              f"(wall) of one {args.seconds:g} s SR1 scenario ({load()})")
    speedup = results[1] / results[2]
    cores = cores_available()
    print(f"2 workers over 1: {speedup:.2f}x (goal >= 1.8x on 2 free cores; two busy processes of this "
          f"benchmark get {cores:.2f} cores together now, which bounds it; {load()})")
    per = (results[1] - t_plain) / n
    print(f"1 worker vs the plain loop, wall: {1e3 * per:+.0f} ms per scenario ({100 * per / (t_plain / n):+.1f} %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
