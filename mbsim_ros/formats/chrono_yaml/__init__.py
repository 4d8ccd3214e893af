"""Chrono YAML multibody models (file -> Model): `load_chrono_yaml(path)`.

Files (Chrono's ChParserMbsYAML, chrono-version 9.x and 10.x):
- a simulation file (`type: MBS`, `model: <file>`, `solver: <file>`, `simulation:` end_time,
  enforce_realtime, gravity), the model and solver files it names (paths relative to it);
- the older single file: a `model:` mapping and a `simulation:` block (time_step,
  contact_method, integrator, solver) in the same file;
- a model file alone (gravity then Chrono's default (0, 0, -9.8)).
Enum strings are case-insensitive; numbers may be strings ("1e-4": YAML 1.1 reads it as text).

What the Model gets:
- Every body is a link named as the body, its frame the body's reference frame (location,
  orientation: [yaw, pitch, roll] = Rz Ry Rx in degrees or radians per `angle_degrees`, or a
  scalar-first unit quaternion); com and inertia (Chrono's tensor entries about the COM in the
  COM frame, products = off-diagonal entries) turned into the link frame.
- Joints (and the REVOLUTE/PRISMATIC guide of a motor) are the edges of a graph over the
  bodies, fixed bodies welded to the world. A spanning tree is chosen preferring the edges that
  remove the most DOFs (LOCK 6, REVOLUTE/PRISMATIC 5, UNIVERSAL 4, SPHERICAL 3), so the fewest
  constraint rows remain; its edges become Model joints (LOCK fixed, REVOLUTE revolute,
  PRISMATIC prismatic about/along the file's axis, SPHERICAL ball, UNIVERSAL universal), placed
  with origin/child_pose so that q = 0 (identity quaternion) is the file's configuration. The
  coordinate is the child's motion relative to the parent along +axis (a universal's about
  axis1 then axis2, or axis2 then axis1 when body2 is the tree parent). A body reached by no
  tree edge gets a free joint `<body>_free` (q0 its pose, v0 its initial velocities in the
  child frame); a fixed body a fixed joint `<body>_fixed`.
- The other edges become LoopConstraints: LOCK weld, SPHERICAL ball, REVOLUTE hinge,
  UNIVERSAL ball + point_plane (axis1 on body1 stays normal to axis2 on body2), PRISMATIC
  point_line + orientation, motor spindle CYLINDRICAL point_line + parallel, guide SPHERICAL
  point_line.
  POINT_LINE and POINT_PLANE are always loop constraints (a point of body1 on body2's line or
  plane). Chrono gives these two an identity frame: the line along the global x axis, the
  plane normal to the global z axis at the start; an `axis` in the file is used instead (the
  line's direction, the plane's normal) and said in the report. Extra rows of one joint are
  named `<joint>_2`, `<joint>_3`. A joint between two fixed bodies constrains nothing and is
  dropped with a warning. An unknown joint type is an error (Chrono makes it LOCK silently).
- Constraints DISTANCE (distance = initial), REVOLUTE-SPHERICAL (revolute on body1 at point1
  about `axis`, spherical on body2 at point2) and REVOLUTE-TRANSLATIONAL (revolute on body1 at
  point1 about `axis`, translational on body2 at point2, x2 = `axis2` when given) are loop
  constraints (Chrono's parser ignores the last two).
- A joint with bushing_data is no edge: it is a Bushing element (K = Kl on translations and
  Kr on rotations, the joint's free DOFs taking the DOF values; Model order rotations first),
  so the bodies it connects move on other joints or free joints, as in Chrono.
- TSDA -> SpringDamper (map beats curves beats linear coefficients; curves are linear
  interpolation held constant outside the table, as Chrono's ChFunctionInterp; a map's
  deformation is the full length, as Chrono's parser leaves free_length 0 for it; stops when
  both minimum_length and maximum_length are given, not on maps, as Chrono). RSDA ->
  RotarySpringDamper about `axis` (free_angle in degrees per angle_degrees).
- Motors -> Motor: Chrono drives body1 relative to body2, the Model link2 relative to link1,
  so link1 = body2 and link2 = body1, both frames at `location` with z = `axis`. The motor's
  guide/spindle became a joint (above), so every Motor here has guide "free".
- body_loads -> BodyLoad with its modulation_function; load_controllers -> three BodyLoads
  `<name>_x`, `_y`, `_z` along the unit axes, each scaled by Function.input of the same name.
  Functions: CONSTANT, POLYNOMIAL (ascending), SINE (phase in degrees per angle_degrees,
  `shift` the offset), RAMP, DATA (linear, held constant outside), CONTROLLER ->
  Function.input(<element name>), each with `repeat`.
- Shapes: SPHERE, BOX, CYLINDER (along `axis`), MESH and HULL (a triangle mesh) from files
  found through data_path; collision shapes get their material's friction (default 0.8) and
  restitution (default 0.01); contact.collision_family -> Link.collision_family. Chrono lets
  all bodies collide, so model.self_collision is True.
- Sections this project does not simulate (FEA, FEA_beams, visualization of springs, output)
  are left out with a warning and a report line; a file with no bodies is a ModelError.

model.settings (a dict the CLI and node may use; None where the files do not say):
    time_step (s), end_time (s, None for Chrono's "infinite" -1), enforce_realtime (bool),
    contact_method ("lcp" for NSC, "penalty" for SMC; also on model.contact_method),
    integrator and solver (Chrono's type names, upper case), gravity (list, also model.gravity),
    files (the files read: simulation, model, solver).

Bad input raises ModelError naming the file and the key path (`model.joints[3].axis`).

The modules, by job: this one reads the file layouts (simulation, model and solver files) and
the settings; reader.py gives typed access with key paths; parts.py holds Chrono's kinds, the
Body and Edge records and frame helpers; builder.py builds the Model from the model document
with bodies.py (bodies and shapes), joints.py (joints, motors, the spanning tree and loop
constraints) and elements.py (constraints, spring-dampers, loads and their functions).
"""
from __future__ import annotations

import os

import numpy as np

from ...model import Model
from .reader import Reader, show
from .parts import CHRONO_GRAVITY
from .builder import Builder


SUPPORTED_VERSIONS = ("9", "10")      # major versions read
CONTACT_METHODS = {"NSC": "lcp", "SMC": "penalty"}


# =========================================================================================
# Entry point and file layouts
# =========================================================================================
def load_chrono_yaml(path, floating_base: bool = False) -> Model:
    """Read a Chrono YAML simulation or model file into a finalized Model (module docstring).
    `floating_base` is ignored: a Chrono file says which bodies are fixed."""
    sink = []
    top = Reader(path, sink)
    doc = top.load()
    _check_version(top, doc)
    settings = dict(time_step=None, end_time=None, enforce_realtime=False, contact_method=None,
                    integrator=None, solver=None, gravity=list(CHRONO_GRAVITY), files={})
    model_value = doc.get("model")
    if isinstance(doc.get("required"), list) or (isinstance(model_value, dict) and "properties" in model_value):
        raise top.error("required", "this is a Chrono YAML schema file (it describes the keys of a model); "
                                    "load a model or simulation file")
    if isinstance(model_value, str):          # a simulation file naming its model and solver
        settings["files"]["simulation"] = top.path
        sim_type = doc.get("type")
        if sim_type is not None and str(sim_type).strip().upper() != "MBS":
            top.warn("type", f"{sim_type!r}: only the multibody model ({model_value}) is loaded")
        model_reader = Reader(_relative(top, model_value, "model"), sink)
        model_doc = model_reader.load()
        _check_version(model_reader, model_doc)
        solver_value = doc.get("solver")
        if solver_value is not None:
            if not isinstance(solver_value, str):
                raise top.error("solver", f"expected the solver file's name, got {show(solver_value)}")
            solver_reader = Reader(_relative(top, solver_value, "solver"), sink)
            solver_doc = solver_reader.load()
            _check_version(solver_reader, solver_doc)
            _read_solver(solver_reader, solver_doc, "", settings)
            settings["files"]["solver"] = solver_reader.path
        else:
            top.warn("solver", "no solver file named: time step and contact method left to the simulator")
        _read_simulation(top, doc, settings)
    elif isinstance(model_value, dict):       # a model file, perhaps with a simulation block
        model_reader, model_doc = top, doc
        if "simulation" in doc:
            _read_simulation(top, doc, settings)
        if "contact_method" in doc or "integrator" in doc:
            _read_solver(top, doc, "", settings)
    elif model_value is None:
        if "contact_method" in doc or "integrator" in doc:
            raise top.error("model", "missing: this is a Chrono solver file; load the simulation file "
                                     "(which names the model) or the model file")
        raise top.error("model", "missing: expected a Chrono YAML model (a `model:` mapping with bodies) "
                                 "or a simulation file naming one (`model: <file>`)")
    else:
        raise top.error("model", f"expected a mapping of the model or the model file's name, got {show(model_value)}")
    settings["files"]["model"] = model_reader.path
    model = Builder(model_reader, model_doc).build()
    model.source = top.name
    model.warnings = sink
    model.gravity = np.array(settings["gravity"], dtype=float)
    model.contact_method = settings["contact_method"]
    model.settings = settings
    model.report.append(("settings", os.path.basename(top.name), ", ".join(
        f"{k}={settings[k]}" for k in ("time_step", "end_time", "enforce_realtime", "contact_method", "gravity"))))
    return model


def _relative(reader, value, key):
    path = os.path.join(reader.folder, value)
    if not os.path.isfile(path):
        raise reader.error(key, f"{value!r}: no such file (looked for {path})")
    return path


def _check_version(reader, doc):
    value = doc.get("chrono-version")
    if value is None:
        reader.warn("chrono-version", "missing; read as a Chrono 10 file")
        return
    major = str(value).strip().split(".")[0]
    if major not in SUPPORTED_VERSIONS:
        reader.warn("chrono-version", f"{value!r}: this reader knows 9.x and 10.x; read as 10.x")


def _read_simulation(r, doc, settings):
    sim = r.mapping(doc.get("simulation") or {}, "simulation")
    w = "simulation"
    end = r.number(sim, "end_time", w, None)
    settings["end_time"] = None if end is None or end < 0 else end
    settings["enforce_realtime"] = r.flag(sim, "enforce_realtime", w, False)
    gravity = r.vector(sim, "gravity", w, None)
    if gravity is not None:
        settings["gravity"] = gravity.tolist()
    # the older single-file layout kept the solver settings here
    if "time_step" in sim:
        settings["time_step"] = _positive(r, r.number(sim, "time_step", w), f"{w}.time_step")
    if "contact_method" in sim:
        settings["contact_method"] = CONTACT_METHODS[r.enum(sim, "contact_method", w, tuple(CONTACT_METHODS))]
    if isinstance(sim.get("integrator"), dict):
        settings["integrator"] = r.text(sim["integrator"], "type", f"{w}.integrator").upper()
    if isinstance(sim.get("solver"), dict):
        settings["solver"] = r.text(sim["solver"], "type", f"{w}.solver").upper()


def _read_solver(r, doc, w, settings):
    prefix = f"{w}." if w else ""
    if doc.get("contact_method") is not None:
        settings["contact_method"] = CONTACT_METHODS[r.enum(doc, "contact_method", w or "solver file",
                                                            tuple(CONTACT_METHODS))]
    integ = doc.get("integrator")
    if integ is not None:
        integ = r.mapping(integ, f"{prefix}integrator")
        settings["integrator"] = r.text(integ, "type", f"{prefix}integrator", "").upper() or None
        # the schema's required list says time-step; files and Chrono use time_step
        key = "time_step" if "time_step" in integ else "time-step"
        step = r.number(integ, key, f"{prefix}integrator", None)
        if step is not None:
            settings["time_step"] = _positive(r, step, f"{prefix}integrator.{key}")
    solver = doc.get("solver")
    if isinstance(solver, dict):
        settings["solver"] = r.text(solver, "type", f"{prefix}solver", "").upper() or None


def _positive(r, x, where):
    if not x > 0:
        raise r.error(where, f"expected a positive time step, got {x}")
    return x
