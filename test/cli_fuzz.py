"""Fuzzed `mbsim` command lines: the generator and the harness, shared by the suite's seeded
slice (test/test_cli_fuzz.py) and the wide campaign (bench/fuzz.py --formats cli).

A case is a valid command line of one subcommand (run, info, convert, render, plot, export,
view, bag repair, warmup, batch), mutated and recombined with a seed: values replaced by wrong
types, huge numbers, NaN and inf, negative numbers, empty strings, bytes that are not UTF-8,
paths that do not exist or are directories; flags dropped, repeated, unknown, or taken from
another subcommand; values left missing; the subcommand swapped. Every case must end in
success or in exactly one line on stderr starting with "mbsim" (notes and warnings may come
before it) and exit status 2: never a traceback, another exit status, a signal, a hang, or a
success that prints nan.

Each case runs in a child forked from a process that imported mbsim_ros and nothing else (no
threads to fork), calling `mbsim_ros.cli.main(argv)` as the `mbsim` script does, with stdout
and stderr as a terminal user has them (UTF-8, strict on stdout). Its own copies of the model,
configuration, batch file and a recorded bag sit in a fresh folder, its working directory, so
no case sees another's outputs and every path stays inside that folder. The child runs in its
own process group; past the wall-time guard it gets SIGTERM (a run or a view server ends on it:
that is a command running as long as it was asked to), then SIGKILL. CPU seconds and peak RSS
come from wait4.

    python test/cli_fuzz.py --cases N [--seed S] [--first K]   (JSON results on stdout)
"""
from __future__ import annotations

import io
import json
import os
import random
import re
import shutil
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CART = HERE / "batch" / "models" / "cart.wrl"
CONFIG = REPO / "config" / "sim.yaml"
HANG_GUARD = 60.0       # s of wall time before SIGTERM (a guard on a loaded machine; the bound is on CPU)
STOP_GRACE = 20.0       # s after SIGTERM before SIGKILL
SETUP_GUARD = 1800.0    # s for recording the shared bag (the first run may compile the kernels)
ADDRESS_SPACE = 6 << 30  # bytes of virtual memory a case may map (numba and LLVM map ~2 GB)

RUN = ["cart.wrl", "--duration", "0.02", "--rtf", "0", "--transport", "none", "--quiet"]
TEMPLATES = [
    ["run", *RUN],
    ["run", *RUN, "--bag", "out_bag", "--dt", "0.002", "--seed", "3", "--hold", "100", "--contact", "penalty",
     "--integrator", "rk4", "--compression", "zstd"],
    ["run", *RUN, "--config", "sim.yaml", "--pose", "0", "0", "0.5", "0", "0", "0.3", "--on-ground",
     "--namespace", "cart", "--massless-armature", "0.01"],
    ["run", *RUN, "--realtime-priority", "10", "--cpu", "0", "--no-ground", "--z-up", "--fixed-base"],
    ["run", "cart.wrl", "--duration", "0.02", "--rtf", "0", "--transport", "foxglove", "--foxglove-port", "0",
     "--quiet"],
    ["info", "cart.wrl"],
    ["info", "cart.wrl", "--floating-base", "--z-up"],
    ["convert", "cart.wrl", "-o", "cart.urdf"],
    ["render", "cart.wrl", "-o", "view.png", "--width", "64", "--height", "48", "--fov", "0.9"],
    ["render", "cart.wrl", "-o", "view.jpg", "--width", "64", "--height", "48", "--from=2,1,1", "--to=0,0,0",
     "--depth", "depth.png"],
    ["render", "cart.wrl", "-o", "at.png", "--width", "64", "--height", "48", "--at", "0.02", "--bag", "bag"],
    ["plot", "bag", "-o", "plot.png", "--joints", "ARM"],
    ["export", "bag", "--csv", "csv", "--topics", "/cart/joint_states,/clock"],
    ["export", "bag", "--images", "images", "--csv", "csv2"],
    ["view", "bag"],                                    # (on a free port: confined())
    ["bag", "repair", "bag", "--ros-distro", "jazzy"],
    ["warmup", "--quiet"],
    ["batch", "spec.yaml", "--workers", "0", "-o", "results", "--no-plot", "--quiet"],
    ["batch", "spec.yaml", "--workers", "0", "-o", "results", "--no-plot", "--quiet", "--bags", "failed"],
]
SUBCOMMANDS = ["run", "info", "convert", "render", "plot", "export", "view", "bag", "warmup", "batch"]
FLAGS = ["--duration", "--rtf", "--bag", "--compression", "--transport", "--foxglove-port", "--foxglove-host",
         "--config", "--namespace", "--seed", "--dt", "--integrator", "--contact", "--hold", "--floating-base",
         "--fixed-base", "--no-bound-massless", "--keyframe", "--massless-armature", "--realtime-priority", "--cpu",
         "--z-up", "--pose", "--on-ground", "--no-ground", "--quiet", "-o", "--output", "--camera", "--from", "--to",
         "--width", "--height", "--fov", "--depth", "--at", "--joints", "--images", "--video", "--csv", "--topics",
         "--ros-distro", "--workers", "--scheduler", "--resume", "--bags", "--compare", "--no-plot", "--view-host",
         "--view", "--view-port", "-h", "--bogus", "-z", "--duration=", "--rtf=1e999", "--dt=-0"]
NASTY = ["", " ", "-", "--", "nan", "NaN", "inf", "-inf", "+inf", "1e999", "-1e999", "1e308", "-1", "-0", "0", "1e-300",
         "-0.001", "99999999999999999999999", "-99999999999999999999999", "4294967297", "1.5", "0x10", "1_000",
         "abc", "true", "None", "[]", "{}", "1,2", "1,2,3,4", "nan,0,0", "inf,inf,inf", "\t", "\n",
         "\udcff\udcfe", "caf\udce9.wrl", "\u00e9\u00e8", "a" * 5000, "missing.wrl", "missing/dir/x.png",
         "folder", "folder/", "notes.txt", "cart.wrl", "bag", "spec.yaml", "sim.yaml", "out.mp4", "x.png",
         "tcp://127.0.0.1:1", "ARM", "*", "/cart/joint_states", "zstd", "lz4", "rk4", "lcp"]


def mutate(argv: list, rng: random.Random) -> list:
    """One to three mutations of a command line (the subcommand word may change too)."""
    argv = list(argv)
    for _ in range(rng.randint(1, 3)):
        kind = rng.randrange(9)
        at = rng.randrange(len(argv) + 1)
        k = min(at, len(argv) - 1)
        if kind == 0 and argv:                         # a value (or a flag) replaced by a nasty one
            argv[k] = rng.choice(NASTY)
        elif kind == 1 and argv:                       # a token dropped: a value missing, a flag gone
            del argv[k]
        elif kind == 2:                                # a flag from anywhere, with a nasty value or none
            argv[at:at] = [rng.choice(FLAGS)] + ([rng.choice(NASTY)] if rng.random() < 0.7 else [])
        elif kind == 3 and argv:                       # a token repeated
            argv.insert(k, argv[k])
        elif kind == 4 and len(argv) > 1:              # two tokens swapped
            j = rng.randrange(len(argv))
            argv[k], argv[j] = argv[j], argv[k]
        elif kind == 5 and argv:                       # the subcommand swapped: another's flags
            argv[0] = rng.choice(SUBCOMMANDS)
        elif kind == 6:                                # cut off
            argv = argv[:at]
        elif kind == 7 and argv:                       # a numeric value pushed out of range
            numeric = [i for i, a in enumerate(argv) if re.fullmatch(r"-?[0-9.]+", a)]
            if numeric:
                argv[rng.choice(numeric)] = rng.choice(["nan", "inf", "-inf", "1e999", "-1", "0", "1e308", "-1e-9",
                                                        "99999999999999999999999"])
        else:                                          # --flag=value form of a flag and its value
            flags = [i for i, a in enumerate(argv[:-1]) if a.startswith("--") and "=" not in a]
            if flags:
                i = rng.choice(flags)
                argv[i:i + 2] = [f"{argv[i]}={rng.choice([argv[i + 1], *NASTY[:20]])}"]
    return argv


def case(seed: int) -> list:
    """The command line of case `seed` (a template and its mutations)."""
    rng = random.Random(seed)
    return mutate(rng.choice(TEMPLATES), rng)


def confined(argv: list) -> list:
    """What keeps a case on this machine and off the ports others use: a view server or a
    Foxglove server that would listen on a real port listens on a free one of 127.0.0.1 instead
    (appended: the last option wins); a port that is no port is left to be refused."""
    argv = list(argv)
    ports = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--view-port"]
    ports += [a.split("=", 1)[1] for a in argv if a.startswith("--view-port=")]
    if (argv[:1] == ["view"] or "--view" in argv) and (not ports or re.fullmatch(r"[0-9]{1,5}", ports[-1])
                                                       and 0 < int(ports[-1]) < 65536):
        argv += ["--view-port", str(_free_port()), "--view-host", "127.0.0.1"]
    if any(a == "--transport=foxglove" or (a == "foxglove" and i and argv[i - 1] == "--transport")
           for i, a in enumerate(argv)):
        argv += ["--foxglove-port", "0", "--foxglove-host", "127.0.0.1"]
    return argv


def _free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def judge(argv: list, rc: int, out: str, err: str, stopped: bool):
    """None when the case ended as it must; else what was wrong."""
    lines = err.strip().splitlines()
    if "Traceback (most recent call last)" in err:
        return "traceback: " + (lines[-1] if lines else "")
    if stopped:
        # a run or a server ends at SIGTERM: a command that runs as long as asked (a run with
        # --duration 1e300, a view) is not a hang; anything else still going is one
        if argv[:1] == ["run"] and rc == 0 and "stopped by SIGTERM" in err:
            return None
        if (argv[:1] in (["view"],) or "--view" in argv) and rc in (0, -signal.SIGTERM):
            return None
        return f"no end within {HANG_GUARD:g} s (exit status {rc} after SIGTERM)"
    if rc < 0:
        return f"killed by signal {-rc}"
    if rc == 2:
        said = [line for line in lines if line.startswith("mbsim")]
        if len(said) != 1 or not lines[-1].startswith("mbsim"):
            return f"exit 2 with {len(said)} 'mbsim...' lines, last line {lines[-1][:200] if lines else '(none)'!r}"
        return None
    if rc == 0:
        if re.search(r"\bnan\b", out, re.I):
            return "success printing nan: " + next(line for line in out.splitlines() if re.search(r"\bnan\b", line, re.I))[:200]
        return None
    return f"exit status {rc}: {lines[-1][:200] if lines else '(no stderr)'}"


# -- the harness ----------------------------------------------------------------------------
def _assets(root: Path):
    """The files every case gets its own copy of: the cart model, sim.yaml, a batch file, a bag."""
    assets = root / "assets"
    assets.mkdir()
    shutil.copy(CART, assets / "cart.wrl")
    shutil.copy(CONFIG, assets / "sim.yaml")
    (assets / "spec.yaml").write_text("world:\n  model: cart.wrl\nduration: 0.02\nseeds: [0]\n"
                                      "metrics: {max_tilt: {}, distance: {}}\n")
    (assets / "notes.txt").write_text("not a model\n")
    (assets / "folder").mkdir()
    rc, _, err, _, _, _ = _fork(["run", *RUN, "--bag", "bag"], assets, guard=SETUP_GUARD)
    if rc != 0:
        raise RuntimeError(f"recording the bag failed: {err[-2000:]}")
    return assets


def _child(argv, folder):
    os.setpgid(0, 0)
    rc = 1
    try:
        import resource     # a net on this shared machine (the bound checked is the peak RSS)
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))
        os.chdir(folder)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        for fd, name in ((1, "stdout"), (2, "stderr")):
            f = os.open(name + ".txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(f, fd)
        # as a terminal user has them (a UTF-8 locale): strict on stdout, backslashes on stderr
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", line_buffering=True)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8",
                                      errors="backslashreplace", line_buffering=True)
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
        sys.argv = ["mbsim", *argv]
        from mbsim_ros.cli import main
        try:
            rc = main(argv)                 # the `mbsim` script: sys.exit(main())
            rc = 0 if rc is None else rc
        except SystemExit as e:
            rc = 0 if e.code is None else e.code if isinstance(e.code, int) else 1
            if not isinstance(e.code, int) and e.code is not None:
                print(e.code, file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        try:
            traceback.print_exc()
            sys.stderr.flush()
        except BaseException:
            pass
        rc = 1
    finally:
        os._exit(rc if isinstance(rc, int) and 0 <= rc < 256 else 1)


def _fork(argv, folder, guard=None):
    """(exit status, stdout, stderr, stopped, CPU s, peak RSS MB) of `mbsim argv` run in folder."""
    guard = HANG_GUARD if guard is None else guard
    pid = os.fork()
    if pid == 0:
        _child(argv, folder)
    t0, stopped, killed = time.monotonic(), None, False
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            break
        now = time.monotonic()
        if stopped is None and now - t0 > guard:
            stopped = now
            _signal_group(pid, signal.SIGTERM)
        elif stopped is not None and not killed and now - stopped > STOP_GRACE:
            killed = True
            _signal_group(pid, signal.SIGKILL)
        time.sleep(0.01)
    _signal_group(pid, signal.SIGKILL)              # what the case left behind (a Dask worker, ...)
    read = lambda name: (folder / name).read_text(errors="replace") if (folder / name).exists() else ""  # noqa: E731
    return (os.waitstatus_to_exitcode(status), read("stdout.txt"), read("stderr.txt"), stopped is not None,
            usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024)


def _signal_group(pid, sig):
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


PRELOAD = ["mbsim_ros.cli", "mbsim_ros.run", "mbsim_ros.run.config", "mbsim_ros.run.world", "mbsim_ros.ros.bag",
           "mbsim_ros.ros.bridge", "mbsim_ros.ros.transport_choice", "mbsim_ros.ros.export", "mbsim_ros.ros.plot",
           "mbsim_ros.ros.recording", "mbsim_ros.ros.bag_repair", "mbsim_ros.render", "mbsim_ros.formats",
           "mbsim_ros.batch.command", "mbsim_ros.batch.spec", "tqdm", "matplotlib.pyplot"]


def run_cases(seeds, root: Path | None = None):
    """Run the cases of `seeds`; returns {"cases", "ok", "refused", "stopped", "failures":
    [(seed, argv, why)], "cpu", "slowest", "wall", "rss_mb", "outcomes": {seed: (rc, why)}}."""
    os.environ.setdefault("ROS_DOMAIN_ID", str(random.SystemRandom().randrange(100, 200)))
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    import importlib
    for name in PRELOAD:          # imported once, before the forks (imports start no threads)
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    own = root is None
    root = Path(tempfile.mkdtemp(prefix="mbsim-cli-fuzz-")) if own else root
    out = {"cases": 0, "ok": 0, "refused": 0, "stopped": 0, "failures": [], "cpu": 0.0, "slowest": None,
           "wall": 0.0, "rss_mb": 0.0}
    try:
        assets = _assets(root)
        for seed in seeds:
            argv = confined(case(seed))
            folder = root / f"case-{seed}"
            shutil.copytree(assets, folder)
            w0 = time.monotonic()
            rc, stdout, stderr, stopped, cpu, rss = _fork(argv, folder)
            why = judge(argv, rc, stdout, stderr, stopped)
            out["cases"] += 1
            if why is not None:
                out["failures"].append((seed, argv, why))
                print(f"FAIL seed {seed}: {why}", file=sys.stderr, flush=True)
            elif stopped:
                out["stopped"] += 1
            elif rc == 0:
                out["ok"] += 1
            else:
                out["refused"] += 1
            if cpu > out["cpu"]:
                out["cpu"], out["slowest"] = cpu, (seed, argv)
            out["wall"] = max(out["wall"], time.monotonic() - w0)
            out["rss_mb"] = max(out["rss_mb"], rss)
            shutil.rmtree(folder, ignore_errors=True)
    finally:
        if own:
            shutil.rmtree(root, ignore_errors=True)
    return out


def seeds_for(n, seed=40, first=None):
    """The campaign's case seeds: `first` alone (to reproduce a failure) or n from `seed`."""
    if first is not None:
        return [first]
    rng = random.Random(f"{seed}-cli")
    return [rng.randrange(2 ** 32) for _ in range(n)]


if __name__ == "__main__":
    import argparse
    p = argparse.ArgumentParser(description="fuzzed mbsim command lines (JSON results on stdout)")
    p.add_argument("--cases", type=int, default=100)
    p.add_argument("--seed", type=int, default=40)
    p.add_argument("--first", type=int)
    p.add_argument("--guard", type=float, default=HANG_GUARD, help="s of wall time before SIGTERM")
    args = p.parse_args()
    HANG_GUARD = args.guard
    sys.path.insert(0, str(REPO))
    result = run_cases(seeds_for(args.cases, args.seed, args.first))
    json.dump(result, sys.stdout)
