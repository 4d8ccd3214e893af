"""The wide fuzz campaign: N mutated files per format (default 1000), seeded and reproducible,
each loaded by `mb.load_model` in a worker process that must end it in a model or a ModelError
naming the file; plus N mutated run configurations (config/sim.yaml) through `load_config`,
which must end in a RunConfig or a ConfigError naming the file; plus N mutated `mbsim` command
lines (test/cli_fuzz.py: every subcommand) that must end in success or one line and exit 2,
each forked from a worker, bounded by SIGTERM then SIGKILL, its CPU and peak RSS from wait4.

    python bench/fuzz.py [--cases 1000] [--formats openhrp,urdf,...,config,hostile,cli] [--seed 40]
    python bench/fuzz.py --formats cli --first SEED      (one command line again, by its seed)

The mutations are test/formats/test_fuzz_loaders.py's (bytes flipped, spans cut or repeated,
nasty tokens inserted, digit runs replaced by huge numbers), over our own models of each format.
Per format it prints the cases, how they ended (loaded / ModelError / anything else, which is a
failure), the slowest case's CPU seconds and wall seconds (bound: 5 s), and the worker's peak RSS
(bound: 500 MB; the peak over all its cases bounds each case's; for cli each case's own peak,
which includes the worker's memory its fork starts with). A failure prints its seed. Exit
status 0 (a benchmark reports; it does not fail).
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import random
import resource
import shutil
import signal
import sys
import tempfile
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "test"), str(REPO / "test" / "formats")]      # (cli_fuzz: test/)
from test_fuzz_loaders import FORMATS, OWN, mutate  # noqa: E402

TIME_BOUND = 5.0          # s of CPU per case
MEMORY_BOUND = 500        # MB peak RSS of the worker
HANG_GUARD = 120.0        # s of wall time before a case counts as hung


def _nested(n):
    body = "Transform { children [\n" * n + "] }" * n
    return f"#VRML V2.0 utf8\nPROTO Deep [] {{\n{body}\n}}\nDeep {{}}\n".encode()


def _doubling(how, levels=40):
    if how == "USE":
        lines = ["DEF A0 Transform { }"] + [f"DEF A{i} Transform {{ children [ USE A{i - 1} USE A{i - 1} ] }}"
                                             for i in range(1, levels)]
    else:
        lines = ["PROTO P0 [] { Transform { } }"] + [
            f"PROTO P{i} [] {{ Transform {{ children [ P{i - 1} {{}} P{i - 1} {{}} ] }} }}" for i in range(1, levels)]
        lines.append(f"P{levels - 1} {{}}")
    return ("#VRML V2.0 utf8\n" + "\n".join(lines) + "\n").encode()


# the `hostile` kind: hand-made VRML files at the loaders' limits (not mutations; each run once)
HOSTILE = {"nested_100000.wrl": lambda: _nested(100_000),      # refused past MAX_NESTING
           "nested_10000.wrl": lambda: _nested(10_000),        # as deep as it loads
           "use_doubling_40.wrl": lambda: _doubling("USE"),    # 2^40 nodes: refused at MAX_SCENE_NODES
           "proto_doubling_40.wrl": lambda: _doubling("PROTO")}


class _Hung(Exception):
    pass


def _on_alarm(signum, frame):
    raise _Hung()


def _cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _run_cases(kind, cases, root):
    """In the worker: each (name, seed) mutated and loaded. Returns the tallies."""
    import mbsim_ros as mb
    from mbsim_ros import ModelError
    from mbsim_ros.model import ConfigError
    from mbsim_ros.run.config import load_config
    signal.signal(signal.SIGALRM, _on_alarm)
    out = {"loaded": 0, "refused": 0, "failures": [], "cpu": 0.0, "wall": 0.0, "slowest": None}
    for name, seed in cases:
        if kind == "config":
            original = (REPO / "config" / name).read_bytes()
            path = root / "config" / name
        elif kind == "hostile":
            original, path = b"", root / name
        else:
            original = (OWN / kind / name).read_bytes()
            path = root / "models" / kind / name
        path.write_bytes(HOSTILE[name]() if kind == "hostile" else mutate(original, random.Random(seed)))
        c0, w0 = _cpu(), time.perf_counter()
        signal.setitimer(signal.ITIMER_REAL, HANG_GUARD)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if kind == "config":
                    load_config(path)
                else:
                    mb.load_model(path)
            out["loaded"] += 1
        except (ModelError, ConfigError) as e:
            if str(e).startswith(str(path)):
                out["refused"] += 1
            else:
                out["failures"].append((name, seed, f"message does not start with the file: {str(e)[:200]}"))
        except _Hung:
            out["failures"].append((name, seed, f"no end within {HANG_GUARD:g} s"))
        except BaseException as e:      # anything else is what the campaign looks for
            out["failures"].append((name, seed, f"{type(e).__name__}: {str(e)[:200]}"))
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            path.write_bytes(original)
        cpu, wall = _cpu() - c0, time.perf_counter() - w0
        if cpu > out["cpu"]:
            out["cpu"], out["slowest"] = cpu, (name, seed)
        out["wall"] = max(out["wall"], wall)
    out["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def _cli_worker(cases, queue):
    """The `cli` kind: cases forked from this fresh process (test/cli_fuzz.py), their outcomes
    in the loaders' tallies (loaded = a success, refused = one line and exit 2)."""
    from cli_fuzz import run_cases
    out = run_cases([seed for _, seed in cases])
    queue.put({"loaded": out["ok"] + out["stopped"], "refused": out["refused"], "cpu": out["cpu"],
               "wall": out["wall"], "rss_mb": out["rss_mb"], "stopped": out["stopped"],
               "slowest": out["slowest"] and ("argv", out["slowest"][0]),
               "failures": [("argv", seed, f"{why}; mbsim {' '.join(map(repr, argv))[:300]}")
                            for seed, argv, why in out["failures"]]})


def _worker(kind, cases, queue):
    root = Path(tempfile.mkdtemp(prefix="mbsim-fuzz-"))
    try:
        shutil.copytree(OWN, root / "models")
        shutil.copytree(REPO / "config", root / "config")
        queue.put(_run_cases(kind, cases, root))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _cases(kind, n, seed):
    if kind == "hostile":
        return [(name, 0) for name in HOSTILE]
    if kind == "cli":
        from cli_fuzz import seeds_for
        return [("argv", s) for s in seeds_for(n, seed)]
    if kind == "config":
        files = ["sim.yaml", "hil.yaml"]
    else:
        files = sorted(p.name for p in (OWN / kind).glob(FORMATS[kind]))
    rng = random.Random(f"{seed}-{kind}")
    return [(files[k % len(files)], rng.randrange(2 ** 32)) for k in range(n)]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", type=int, default=1000, help="mutated files per format (default 1000)")
    p.add_argument("--formats", default=",".join([*FORMATS, "config", "hostile", "cli"]),
                   help="comma-separated: " + ", ".join([*FORMATS, "config", "hostile", "cli"])
                        + " (hostile: the VRML files of HOSTILE, each once; cli: mbsim command lines)")
    p.add_argument("--first", type=int, help="cli: run only the case of this seed (a failure's)")
    p.add_argument("--seed", type=int, default=40)
    args = p.parse_args(argv)
    ctx = mp.get_context("spawn")           # a fresh interpreter per format: its own peak RSS
    print(f"{'format':<12} {'cases':>6} {'loaded':>7} {'refused':>8} {'failed':>7} "
          f"{'max CPU s':>10} {'max wall s':>11} {'peak RSS MB':>12}")
    total_failures = []
    for kind in args.formats.split(","):
        cases = _cases(kind, args.cases, args.seed)
        queue = ctx.Queue()
        if kind == "cli" and args.first is not None:
            cases = [("argv", args.first)]
        proc = ctx.Process(target=_cli_worker if kind == "cli" else _worker,
                           args=(cases, queue) if kind == "cli" else (kind, cases, queue))
        proc.start()
        out = queue.get()
        proc.join()
        flag = "" if out["cpu"] <= TIME_BOUND and out["rss_mb"] <= MEMORY_BOUND and not out["failures"] else "  <-- over a bound"
        print(f"{kind:<12} {len(cases):>6} {out['loaded']:>7} {out['refused']:>8} {len(out['failures']):>7} "
              f"{out['cpu']:>10.2f} {out['wall']:>11.2f} {out['rss_mb']:>12.0f}{flag}", flush=True)
        total_failures += [(kind, *f) for f in out["failures"]]
    for kind, name, seed, why in total_failures[:50]:
        print(f"FAIL {kind}/{name} seed {seed}: {why}")
    print(f"bounds: {TIME_BOUND:g} s CPU per case, {MEMORY_BOUND} MB peak RSS per worker; "
          f"{len(total_failures)} failures")
    return 0


if __name__ == "__main__":
    sys.exit(main())
