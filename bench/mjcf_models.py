"""Every MJCF file under a folder (a robot maker's repository, MuJoCo Menagerie) through our
loader and MuJoCo's, compared as the tests compare the gymnasium and dm_control assets:

    python bench/mjcf_models.py FOLDER [FOLDER ...]

For each .xml file with a <mujoco> root that MuJoCo itself loads: link poses, the mass matrix,
bias forces, passive and actuator forces and accelerations at two random states (1e-9
relative, test/formats/mjcf_reference.py), and the body pairs the collision filters let
through. Prints one line per file (ok; what differs, or why it does not compare, with the notes
that explain it; or why it fails to load here) and the counts of files that load and that
match; files MuJoCo refuses (a missing mesh) are counted apart, each with MuJoCo's reason.
"""
import argparse
import os
import sys
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "formats"))
TOL = 1e-9
# the notes that name something left out or not simulated (what a difference may come from)
EXPLAINING = ("free joint", "not simulated", "not applied", "not supported", "left out", "not built")


def mjcf_files(folders):
    for folder in folders:
        for root, _, names in os.walk(folder):
            for name in sorted(names):
                path = os.path.join(root, name)
                if name.endswith(".xml") and b"<mujoco" in open(path, "rb").read(4096):
                    yield path


def check(path, ref, mujoco):
    """(status, detail): "refused" by MuJoCo, "fails" to load here, "differs" or "ok"."""
    try:
        m = mujoco.MjModel.from_xml_path(path)
    except Exception as e:
        return "refused", str(e).splitlines()[0][:120]
    import mbsim_ros as mb
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            notes = mb.load_model(path).warnings
    except Exception as e:
        return "fails", f"{type(e).__name__}: {str(e)[:300]}"
    try:                            # loaded: what does not compare differs (what we leave out, noted)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            worst = ref.compare(path, states=2, m=m)
        ours, theirs = ref.our_body_pairs(path), ref.mujoco_body_pairs(path)
    except Exception as e:
        worst, ours, theirs = {"compared": f"{type(e).__name__}: {str(e).splitlines()[0][:150]}"}, None, None
    bad = {k: v if isinstance(v, str) else f"{v:.2g}" for k, v in worst.items() if isinstance(v, str) or not v <= TOL}
    if ours != theirs:
        bad["pairs"] = f"ours only {sorted(map(sorted, ours - theirs))[:3]}, MuJoCo only {sorted(map(sorted, theirs - ours))[:3]}"
    if not bad:
        return "ok", ""
    explained = [n.split(": ", 1)[-1] for n in notes if any(w in n for w in EXPLAINING)]
    return "differs", f"{bad}; notes: {explained[:3]}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="+")
    args = ap.parse_args(argv)
    import mujoco
    import mjcf_reference as ref
    counts = {"ok": 0, "differs": 0, "fails": 0, "refused": 0}
    for path in mjcf_files(args.folders):
        status, detail = check(path, ref, mujoco)
        counts[status] += 1
        print(f"{status:8s} {os.path.relpath(path)} {detail}", flush=True)
    loaded = counts["ok"] + counts["differs"] + counts["fails"]
    print(f"\n{loaded} files MuJoCo {mujoco.__version__} loads: {loaded - counts['fails']} load here, {counts['ok']} match "
          f"({counts['differs']} differ, {counts['fails']} fail here); {counts['refused']} refused by MuJoCo itself")


if __name__ == "__main__":
    main()
