"""Run a prepared batch on Dask (or in this process) and stream its rows to Parquet.

Where: an existing cluster when a scheduler address is given (argument or DASK_SCHEDULER_ADDRESS),
else an embedded LocalCluster on this machine (processes, one single-threaded worker per core,
loopback only); workers=0 runs every scenario here (no Dask): the batched chunks on a thread per
core, the others one after another.
What runs batched: plan.py decides (scenarios of one model that differ only in initial state,
when nothing needs a harness), in chunks of about (batched scenarios) / (worker threads), one
task each; a chunk steps its worlds on its task's thread (batched.py). One task per worker
thread, not one prange over the cores per task: Dask already gives every core a thread, a
task's kernel threads would compete with the other workers' tasks, and a prange meets its
threads at a barrier every step, which a loaded machine turns into waits (bench/README.md).
What travels: the world as bytes (spec.world_bytes(): the loaded models, run configuration,
drivers, metrics), installed once on every worker by a worker plugin (worker.py: the scheduler
gives it to workers that join or restart too, where scattered data would be lost with the last
worker holding it); each scenario or chunk is one task with no dependency, so the scheduler
queues them and hands each worker one or two at a time (chunks first: the longest). A task never
fails (run_scenario and run_chunk make failed rows); a worker that dies has its tasks rerun
elsewhere by the scheduler (distributed.scheduler.allowed-failures); a task that still cannot
finish becomes a failed row too.
Results: rows are written as they arrive to DIR/parts/*.parquet (each part a complete file, so
an interrupted or killed batch keeps every flushed row), then gathered into DIR/results.parquet;
`resume` runs only the scenarios without a row. Kept bags go to DIR/bags/<scenario>/.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import time
import uuid

from .plan import plan
from .scenario import run_scenario
from .spec import SpecError

RESULTS = "results.parquet"
STATE = "batch.json"


def require_dask():
    try:
        import pyarrow  # noqa: F401
        import dask.distributed  # noqa: F401
    except ImportError as e:
        raise ImportError(f"mbsim batch needs dask[distributed] and pyarrow ({e.name} is missing): "
                          "pip install mbsim_ros[batch]") from None


class BatchInterrupted(KeyboardInterrupt):
    def __init__(self, done, total, out_dir):
        super().__init__(f"interrupted: {done} of {total} scenarios kept in {out_dir}; --resume runs the rest")


def schema(spec):
    import pyarrow as pa
    fields = [("scenario", pa.string()), ("key", pa.string()), ("seed", pa.int64())]
    fields += [(a.name, pa.string() if a.categorical else pa.float64()) for a in spec.axes]
    fields += [(m, pa.float64()) for m in spec.metrics]
    fields += [("status", pa.string()), ("error", pa.string()), ("warnings", pa.string()),
               ("wall_time", pa.float64()), ("cpu_time", pa.float64()), ("sim_time", pa.float64()),
               ("worker", pa.string())]
    return pa.schema(fields)


class ResultsTable:
    """Rows streamed into part files under out_dir/parts, gathered by finish()."""

    def __init__(self, out_dir, spec, flush_every=2.0):
        self.out = out_dir
        self.parts = os.path.join(out_dir, "parts")
        self.schema = schema(spec)
        self.pending = []
        self.flush_every = flush_every
        self.last_flush = time.monotonic()
        os.makedirs(self.parts, exist_ok=True)

    def existing(self):
        """The table of every row already on disk (results.parquet and parts), or None."""
        import pyarrow as pa
        import pyarrow.parquet as pq
        tables = []
        path = os.path.join(self.out, RESULTS)
        if os.path.exists(path):
            tables.append(pq.read_table(path))
        for name in sorted(os.listdir(self.parts)):
            if name.endswith(".parquet"):
                tables.append(pq.read_table(os.path.join(self.parts, name)))
        if not tables:
            return None
        try:
            return pa.concat_tables([t.select(self.schema.names).cast(self.schema) for t in tables])
        except (KeyError, pa.ArrowInvalid) as e:
            raise SpecError(f"{self.out}: its rows do not match this batch's columns ({e}); choose another -o") from None

    def add(self, row):
        self.pending.append(row)
        if time.monotonic() - self.last_flush >= self.flush_every:
            self.flush()

    def flush(self):
        import pyarrow as pa
        import pyarrow.parquet as pq
        self.last_flush = time.monotonic()
        if not self.pending:
            return
        table = pa.Table.from_pylist(self.pending, schema=self.schema)
        name = f"part-{time.time_ns()}-{uuid.uuid4().hex[:6]}.parquet"
        tmp = os.path.join(self.parts, "." + name)
        pq.write_table(table, tmp)
        os.replace(tmp, os.path.join(self.parts, name))       # a part is whole or absent
        self.pending = []

    def finish(self):
        """Gather every row (sorted by scenario, one per key, the newest) into results.parquet."""
        import pyarrow.parquet as pq
        self.flush()
        table = self.existing()
        if table is None:
            table = self.schema.empty_table()
        rows = {}
        for row in table.to_pylist():
            rows[row["key"]] = row
        import pyarrow as pa
        table = pa.Table.from_pylist(sorted(rows.values(), key=lambda r: r["scenario"]), schema=self.schema)
        path = os.path.join(self.out, RESULTS)
        pq.write_table(table, path + ".tmp")
        os.replace(path + ".tmp", path)
        shutil.rmtree(self.parts, ignore_errors=True)
        os.makedirs(self.parts, exist_ok=True)
        return table


def prepare_output(out_dir, spec, resume, world=None):
    """Create out_dir, or check that it holds this batch (spec, its world_bytes()) when resuming."""
    state = os.path.join(out_dir, STATE)
    fingerprint = spec.fingerprint(world)
    if os.path.exists(state):
        if not resume:
            raise SpecError(f"{out_dir}: holds a batch already; --resume finishes it, or choose another -o")
        with open(state) as f:
            old = json.load(f)
        if old.get("fingerprint") != fingerprint:
            raise SpecError(f"{out_dir}: was run from a different batch (spec {old.get('spec')}: another world, "
                            "scenarios, drivers or metrics); choose another -o")
    elif os.path.isdir(out_dir) and os.listdir(out_dir):
        raise SpecError(f"{out_dir}: exists and is not a batch's output directory; choose another -o")
    os.makedirs(out_dir, exist_ok=True)
    with open(state, "w") as f:
        json.dump({"spec": spec.where, "fingerprint": fingerprint, "scenarios": len(spec.scenarios)}, f)


QUIET = {"distributed.worker.profile.enabled": False, "distributed.admin.tick.interval": "1s",
         "distributed.admin.system-monitor.interval": "5s", "distributed.worker.memory.monitor-interval": "1s"}


def connect(scheduler=None, workers=None):
    """(client, cluster): to the scheduler at `scheduler` (or DASK_SCHEDULER_ADDRESS), else a new
    LocalCluster of `workers` processes (default one per core) on the loopback interface."""
    from dask.distributed import Client, LocalCluster
    address = scheduler or os.environ.get("DASK_SCHEDULER_ADDRESS")
    if address:
        try:
            return Client(address, timeout="10s"), None
        except (OSError, TimeoutError) as e:
            raise OSError(f"cannot reach the Dask scheduler at {address} ({e})") from None
    import dask
    # Quieter servers (the nannies keep this config for the workers they restart): no statistical
    # profiler in the workers (it samples the task's stack every 10 ms: about 5-10 % of a
    # scenario's CPU here), and slower housekeeping ticks (event-loop watchdog 20 ms -> 1 s,
    # system monitor 0.5 -> 5 s, memory monitor 0.1 -> 1 s): an idle one-worker cluster took
    # 5 % of a core, now under 1 %.
    with dask.config.set(QUIET):
        cluster = LocalCluster(n_workers=workers or os.cpu_count() or 1, threads_per_worker=1, processes=True,
                               host="127.0.0.1", dashboard_address="127.0.0.1:0", silence_logs=logging.ERROR)
    return Client(cluster), cluster


def _write_bag(out_dir, scenario, files):
    base = os.path.join(out_dir, "bags", scenario)
    shutil.rmtree(base, ignore_errors=True)
    for rel, data in files.items():
        path = os.path.join(base, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)


def _failed_row(spec, scenario, error):
    import math
    row = dict(scenario=scenario["scenario"], key=scenario["key"], seed=scenario["seed"], **scenario["params"])
    row.update({m: math.nan for m in spec.metrics})
    row.update(status="failed", error=error, warnings="", wall_time=math.nan, cpu_time=math.nan, sim_time=math.nan,
               worker="")
    return row


def _results(spec, future, scenarios):
    """[(row, files)] of a finished task: a scenario's or a chunk's; failed rows when the task
    could not finish (e.g. its workers kept dying)."""
    try:
        out = future.result()
    except Exception as e:
        return [(_failed_row(spec, s, f"{type(e).__name__}: {e}"), None) for s in scenarios]
    return out if isinstance(out, list) else [out]


def _run_chunks_here(spec, world, work, take):
    """The plan's chunks in this process, one thread per core (the step kernels release the
    interpreter's lock), rows handed to take as chunks finish."""
    if not work.chunks:
        return
    import threading
    from concurrent.futures import ThreadPoolExecutor, as_completed
    from .batched import run_chunk, warm
    warm(world, work.chunks[0][0])
    stop = threading.Event()
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        futures = {pool.submit(run_chunk, world, c, stop): c for c in work.chunks}
        try:
            for future in as_completed(futures):
                for row, files in _results(spec, future, futures[future]):
                    take(row, files)
        except BaseException:
            stop.set()                     # running chunks end at their next step
            raise


def run_batch(spec, out_dir, scheduler=None, workers=None, resume=False, bags="none", progress=False,
              client=None, on_row=None, batched=True):
    """Run the prepared spec's scenarios (all, or those without a row when resuming) and return
    the results table (pyarrow). client: an existing dask Client to use (then scheduler and
    workers are ignored). on_row(row): called for each row as it arrives (in this process).
    batched: scenarios that can (plan.py) run as the worlds of BatchSimulations; False: every
    scenario through its own Harness. KeyboardInterrupt (or BatchInterrupted from on_row) keeps
    what finished and re-raises as BatchInterrupted."""
    require_dask()
    if bags not in ("none", "failed", "all"):
        raise SpecError(f"--bags {bags}: expected none, failed or all")
    world = spec.world_bytes()
    prepare_output(out_dir, spec, resume, world)
    results = ResultsTable(out_dir, spec)
    done = set()
    old = results.existing()
    if old is not None:
        done = set(old.column("key").to_pylist())
    todo = [s for s in spec.scenarios if s["key"] not in done]
    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=len(spec.scenarios), initial=len(spec.scenarios) - len(todo), unit="scenario",
                   mininterval=0.5, smoothing=0.1)
    failed = 0

    def take(row, files):
        nonlocal failed
        if files:
            _write_bag(out_dir, row["scenario"], files)
        results.add(row)
        failed += row["status"] != "ok"
        if bar is not None:
            bar.update(1)
            bar.set_postfix_str(f"failed={failed}")
        if on_row is not None:
            on_row(row)

    own = None
    try:
        if workers == 0 and client is None and not (scheduler or os.environ.get("DASK_SCHEDULER_ADDRESS")):
            work = plan(spec, todo, bags, batched, slots=os.cpu_count() or 1)
            _run_chunks_here(spec, world, work, take)
            for s in work.single:
                take(*run_scenario(world, s, bags))
        elif todo:
            from dask.distributed import as_completed
            if client is None:
                own = connect(scheduler, workers)     # (client, cluster): closed at the end
                client = own[0]
            slots = sum(w.get("nthreads", 1) for w in client.scheduler_info()["workers"].values())
            work = plan(spec, todo, bags, batched, slots=max(1, slots))
            if work.chunks:
                from .batched import warm
                warm(world, work.chunks[0][0])
            from .worker import WorldPlugin, run, run_chunk_of
            token = uuid.uuid4().hex[:8]
            plugin = WorldPlugin(f"mbsim-world-{token}", world)
            register = getattr(client, "register_plugin", None) or client.register_worker_plugin
            register(plugin)
            # the chunks first: the longest tasks, so that the scenarios one by one fill in after
            futures = {client.submit(run_chunk_of, plugin.name, c, key=f"mbsim-batch-{c[0]['scenario']}-{token}",
                                     pure=False): c for c in work.chunks}
            futures.update({client.submit(run, plugin.name, s, bags, key=f"mbsim-{s['scenario']}-{token}",
                                          pure=False): [s] for s in work.single})
            try:
                for future in as_completed(futures):
                    for row, files in _results(spec, future, futures[future]):
                        take(row, files)
                    future.release()
            except BaseException:
                client.cancel(list(futures))
                raise
            finally:
                try:
                    client.unregister_worker_plugin(plugin.name)
                except Exception:        # a cluster going away takes the plugin with it
                    pass
    except KeyboardInterrupt:
        results.flush()
        table = results.existing()
        kept = 0 if table is None else len(set(table.column("key").to_pylist()))
        raise BatchInterrupted(kept, len(spec.scenarios), out_dir) from None
    finally:
        if bar is not None:
            bar.close()
        if own is not None:
            client, cluster = own
            client.close()
            if cluster is not None:
                cluster.close()
        results.flush()
    return results.finish()

