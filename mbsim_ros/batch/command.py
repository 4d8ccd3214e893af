"""`mbsim batch SPEC`: the command-line face of the batch runner (cli.py hands its arguments here)."""
from __future__ import annotations

import os
import sys


# local worker processes per core at most: each holds a Python, numba and the world (a typo such
# as --workers 10000 would start that many processes)
MAX_WORKERS_PER_CORE = 4


def add_arguments(p):
    p.add_argument("spec", help="the batch file (YAML: world, duration, seeds, parameters, metrics)")
    p.add_argument("-o", "--output", metavar="DIR", help="results directory (default: <spec name>-results)")
    p.add_argument("--workers", type=int, help="local worker processes (default: one per core; 0: no Dask, "
                                               "every scenario in this process)")
    p.add_argument("--scheduler", metavar="ADDRESS", help="an existing Dask cluster's scheduler, e.g. "
                                                          "tcp://host:8786 (default: $DASK_SCHEDULER_ADDRESS, "
                                                          "else a local cluster)")
    p.add_argument("--resume", action="store_true", help="run only the scenarios the output directory lacks")
    p.add_argument("--bags", choices=["none", "failed", "all"], default="none",
                   help="keep each scenario's rosbag2 recording: none (default), failed ones, all")
    p.add_argument("--no-batched", action="store_true", help="run every scenario through its own harness "
                                                              "(default: scenarios of one model that differ only "
                                                              "in their initial state run as the worlds of one "
                                                              "BatchSimulation, with the same results)")
    p.add_argument("--compare", metavar="BASELINE", help="a results.parquet to check against: list every "
                                                         "metric that moved beyond its tolerance, exit 1 if any")
    p.add_argument("--no-plot", action="store_true", help="no summary.png")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def main(args):
    from .runner import BatchInterrupted, RESULTS, require_dask, run_batch
    from .spec import SpecError, load_spec, prepare
    require_dask()
    cores = os.cpu_count() or 1
    if args.workers is not None and not 0 <= args.workers <= MAX_WORKERS_PER_CORE * cores:
        raise SpecError(f"--workers {args.workers}: expected 0 (this process) to {MAX_WORKERS_PER_CORE * cores} "
                        f"({MAX_WORKERS_PER_CORE} per core of the {cores} here: a scenario keeps one core busy, "
                        "more workers only add memory; a larger cluster is --scheduler ADDRESS)")
    baseline = None
    if args.compare:
        import pyarrow.parquet as pq
        try:
            baseline = pq.read_table(args.compare)
        except (OSError, ValueError) as e:
            raise SpecError(f"--compare {args.compare}: cannot read it as a Parquet table ({e})") from None
        if "key" not in baseline.column_names:
            raise SpecError(f"--compare {args.compare}: not a batch's results table (it has no key column)")
    spec = prepare(load_spec(args.spec))
    for note in spec.notes:
        print(f"note: {note}", file=sys.stderr)
    out = args.output or os.path.splitext(os.path.basename(args.spec))[0] + "-results"
    where = ("in this process" if args.workers == 0 and not (args.scheduler or os.environ.get("DASK_SCHEDULER_ADDRESS"))
             else f"on the Dask cluster at {args.scheduler or os.environ.get('DASK_SCHEDULER_ADDRESS')}"
             if args.scheduler or os.environ.get("DASK_SCHEDULER_ADDRESS")
             else f"on a local Dask cluster of {args.workers or os.cpu_count()} workers")
    print(f"batch {args.spec}: {len(spec.scenarios)} scenarios ({spec.sample}, {len(spec.seeds)} seed(s), "
          f"parameters: {', '.join(spec.parameter_names) or 'none'}) of {spec.duration:g} s each {where}")
    from .plan import batched_line, ran_batched, reason
    arrived = []
    try:
        table = run_batch(spec, out, scheduler=args.scheduler, workers=args.workers, resume=args.resume,
                          bags=args.bags, progress=not args.quiet, batched=not args.no_batched,
                          on_row=lambda row: arrived.append(ran_batched(row)))
    except BatchInterrupted as e:
        print(f"mbsim: {e}", file=sys.stderr)
        return 130
    from .report import compare, plot, summary
    print(batched_line(sum(arrived), len(arrived), reason(spec, args.bags, not args.no_batched)))
    print(summary(table, spec))
    wrote = [os.path.join(out, RESULTS)]
    if not args.no_plot and plot(table, spec, os.path.join(out, "summary.png")):
        wrote.append(os.path.join(out, "summary.png"))
    if args.bags != "none" and os.path.isdir(os.path.join(out, "bags")):
        wrote.append(os.path.join(out, "bags") + os.sep)
    print(f"wrote {', '.join(wrote)}")
    if baseline is None:
        return 0
    moved, notes = compare(table, baseline, spec)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    if not moved:
        print(f"compare {args.compare}: no metric moved beyond its tolerance")
        return 0
    print(f"compare {args.compare}: {len(moved)} change(s) beyond tolerance:")
    for scenario, what, old, new, tol, which in moved:
        if what == "status":
            print(f"  {scenario} status: {old} -> {new} ({which})")
        else:
            print(f"  {scenario} {what}: {old!r} -> {new!r}, tolerance {tol:g} ({which})")
    return 1
