"""Joint and coordinate names of .osim files as OpenSim 4.6 and mbsim_ros read them: not a timing.
For each file, OpenSim's Python package and our loader each give the coordinates (with the joint
that owns each) and the joints; the line says whether they agree. Our Model has one joint OpenSim's
JointSet has not: the weld named "ground" that holds OpenSim's Ground body to the world (left out
of the comparison). A coordinate name two joints share is Model.dof_names "joint/coordinate" with
us (OpenSim keeps both names and tells them apart by path), so coordinates compare by last segment.

    python bench/opensim_names.py FILE.osim [FILE.osim ...]

Each file runs in its own process (a C++ crash in OpenSim ends only that line). Exit status 1 when
any file that both read disagrees."""
import json
import subprocess
import sys
import warnings


def names(path):
    """{"opensim": ..., "ours": ...}: sorted [joint, coordinate] pairs and joint names, or an error."""
    out = {}
    try:
        import opensim as osim
        m = osim.Model(path)
        m.finalizeFromProperties()
        m.finalizeConnections()
        cs, js = m.getCoordinateSet(), m.getJointSet()
        coords = [cs.get(i) for i in range(cs.getSize())]
        out["opensim"] = {"pairs": sorted([c.getJoint().getName(), c.getName()] for c in coords),
                          "joints": sorted(js.get(i).getName() for i in range(js.getSize()))}
    except Exception as e:            # OpenSim refuses the file: reported, nothing to compare
        out["opensim"] = {"error": str(e).splitlines()[0][:160]}
    try:
        from mbsim_ros.formats.opensim import load_opensim
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = load_opensim(path, visuals="none")
        joints = model.joints[:-1]      # the loader adds the ground's weld to the world last
        out["ours"] = {"pairs": sorted([j.params.get("opensim_joint", j.name), d.split("/")[-1]]
                                       for j in joints for d in (j.dof_names or [])),
                       "joints": sorted({j.params.get("opensim_joint", j.name) for j in joints})}
    except Exception as e:
        out["ours"] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"}
    return out


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--one"]:
        print(json.dumps(names(argv[1])))
        return 0
    disagree = 0
    for path in argv:
        run = subprocess.run([sys.executable, __file__, "--one", path], capture_output=True, text=True)
        lines = [ln for ln in run.stdout.splitlines() if ln.startswith("{")]
        if not lines:
            print(f"{path}: crashed ({run.returncode})")
            continue
        r = json.loads(lines[-1])
        o, u = r["opensim"], r["ours"]
        if "error" in o or "error" in u:
            print(f"{path}: OpenSim {o.get('error', 'reads it')}; mbsim_ros {u.get('error', 'reads it')}")
            continue
        same = o == u
        disagree += not same
        print(f"{path}: {len(o['pairs'])} coordinates, {len(o['joints'])} joints: "
              + ("same names" if same else f"DIFFER opensim={o} ours={u}"))
    return 1 if disagree else 0


if __name__ == "__main__":
    sys.exit(main())
