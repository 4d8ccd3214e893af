"""Load time of every shared model file that `mbsim_ros.load_model` supports today.

    python bench/loaders.py [--models DIR]

Walks ../shared/models (or --models / $MBSIM_SHARED_MODELS), keeps the files whose extension
the loader registry knows (formats/__init__.py _LOADERS, so new formats join by themselves),
skips Inline-only geometry parts of .wrl models (no Humanoid or Joint: they load as environment
links, but they are parts, not models) and reports the best of a few loads per file, with the
number of files each load read (a .wrl and its Inlines; an .osim and the mesh files it found).
Failures are reported, not raised: the script exits 0.
The issues' targets: PA10 (10 Inline files) and SR1 parse well under a second each;
Rajagopal2016.osim (875 KB, 22 bodies, 80 muscles) loads in under a second.

MJCF side by side with MuJoCo: the humanoids shipped in gymnasium and dm_control, each loaded by
mb.load_model and by mujoco.MjModel.from_xml_path, alternating, best of --repeats (7) each, in
CPU time (the process's, all threads) and in wall time; the goal is ours within 2x MuJoCo's time
(MJCF_GOAL). On a machine shared with other jobs the wall times include waiting for a core and
the CPU times do not, so the note goes by the CPU ratio.
"""
import argparse
import importlib
import os
import pathlib
import sys
import time
import warnings

from common import print_table, quiet_stderr

HERE = pathlib.Path(__file__).resolve().parent
DEFAULT = pathlib.Path(os.environ.get("MBSIM_SHARED_MODELS", HERE.parent.parent / "shared" / "models"))
TARGET_SECONDS = 1.0
MJCF_GOAL = 2.0
MJCF_HUMANOIDS = ("gymnasium/envs/mujoco/assets/humanoid.xml", "dm_control/suite/humanoid.xml",
                  "dm_control/suite/humanoid_CMU.xml", "dm_control/locomotion/walkers/assets/humanoid_CMU_V2020.xml")


def supported_extensions():
    from mbsim_ros import formats
    return set(formats._LOADERS)


def is_model(path):
    """Inline parts of OpenHRP models are geometry, not models of their own; Chrono YAML
    solver and schema files are settings, not models (a model or simulation file has `model:`)."""
    if path.suffix.lower() in (".yaml", ".yml"):
        return "schema" not in path.name and any(line.startswith(b"model:") for line in path.read_bytes().splitlines())
    if path.suffix.lower() != ".wrl":
        return True
    text = path.read_bytes()
    return b"Humanoid" in text or b"Joint" in text


def best_load_time(path, repeats=3):
    import mbsim_ros as mb
    best, model = float("inf"), None
    for _ in range(repeats):
        t = time.perf_counter()
        with warnings.catch_warnings(), quiet_stderr():
            warnings.simplefilter("ignore")
            model = mb.load_model(path)
        best = min(best, time.perf_counter() - t)
    return best, model


def files_read(path, model):
    """How many files one load reads: a .wrl and its Inlines, an .osim and its mesh files."""
    ext = path.suffix.lower()
    if ext == ".osim":
        return 1 + len({s.mesh_path for l in model.links for s in l.visuals if s.vertices is not None and s.mesh_path})
    if ext != ".wrl":
        return 1
    from mbsim_ros.formats import vrml
    return len(vrml.parse_file(path).files)


def mjcf_side_by_side(repeats=7):
    """Rows (model, links, ours CPU ms, MuJoCo CPU ms, CPU ratio, wall ratio, note) for the MJCF
    humanoids that are installed."""
    import sysconfig
    try:
        import mujoco
    except ImportError:
        return []
    import mbsim_ros as mb
    site = pathlib.Path(sysconfig.get_paths()["purelib"])
    rows = []
    for rel in MJCF_HUMANOIDS:
        path = site / rel
        if not path.is_file():
            continue
        ours, theirs = [float("inf")] * 2, [float("inf")] * 2        # (CPU, wall) seconds
        for _ in range(repeats):
            c, t = time.process_time(), time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = mb.load_model(path)
            ours = [min(ours[0], time.process_time() - c), min(ours[1], time.perf_counter() - t)]
            c, t = time.process_time(), time.perf_counter()
            with quiet_stderr():
                mujoco.MjModel.from_xml_path(str(path))
            theirs = [min(theirs[0], time.process_time() - c), min(theirs[1], time.perf_counter() - t)]
        ratio = ours[0] / theirs[0]
        rows.append([rel, f"{len(model.links)}", f"{ours[0] * 1000:.1f}", f"{theirs[0] * 1000:.1f}", f"{ratio:.2f}",
                     f"{ours[1] / theirs[1]:.2f}", "" if ratio <= MJCF_GOAL else f"over the {MJCF_GOAL:g}x goal"])
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=pathlib.Path, default=DEFAULT)
    parser.add_argument("--mjcf-only", action="store_true", help="only the MJCF humanoids against MuJoCo")
    parser.add_argument("--repeats", type=int, default=7, help="loads of each MJCF humanoid by each (best of)")
    args = parser.parse_args()
    rows = mjcf_side_by_side(args.repeats)
    if rows:
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        print_table(["MJCF model", "links", "mb.load_model CPU ms", "MjModel.from_xml_path CPU ms", "ratio",
                     "wall ratio", "note"], rows)
        print()
    if args.mjcf_only:
        return 0
    if not args.models.is_dir():
        print(f"{args.models}: no shared models here; nothing to time")
        return 0
    t = time.perf_counter()
    importlib.import_module("mbsim_ros")        # import time is not load time
    print(f"import mbsim_ros: {time.perf_counter() - t:.3f} s")
    extensions = supported_extensions()
    paths = sorted(p for p in args.models.rglob("*") if p.is_file())
    rows, skipped = [], {}
    for path in paths:
        ext = path.suffix.lower()
        if ext not in extensions:
            skipped[ext or "(none)"] = skipped.get(ext or "(none)", 0) + 1
            continue
        if not is_model(path):
            skipped[f"{ext} parts"] = skipped.get(f"{ext} parts", 0) + 1
            continue
        rel = str(path.relative_to(args.models))
        try:
            seconds, model = best_load_time(path)
        except Exception as e:                     # report and go on: a bench, not a test
            rows.append([rel, "-", "-", "-", f"FAILED: {type(e).__name__}: {str(e)[:80]}"])
            continue
        note = "" if seconds < TARGET_SECONDS else f"over the {TARGET_SECONDS:.0f} s target"
        rows.append([rel, f"{seconds * 1000:.1f}", str(files_read(path, model)),
                     f"{len(model.links)}/{len(model.sensors)}", note])
    print_table(["model", "load ms (best of 3)", "files", "links/sensors", "note"], rows)
    if skipped:
        print("skipped (no loader yet, or not a model):",
              ", ".join(f"{k}: {v}" for k, v in sorted(skipped.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
