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
"""
from __future__ import annotations

import dataclasses
import os
import warnings
from collections import deque

import numpy as np
import yaml

from ..model import (BodyLoad, Bushing, Function, Joint, Link, LoopConstraint, Model, ModelError, Motor,
                     RotarySpringDamper, Shape, SpringDamper)
from ..model.transforms import inverse_transform, make_transform, matrix_to_quat, quat_to_matrix, rpy_to_matrix
from .meshes import MeshError, load_mesh
from .text import decode_text

CHRONO_GRAVITY = (0.0, 0.0, -9.8)     # ChParserMbsYAML's default
SUPPORTED_VERSIONS = ("9", "10")      # major versions read
CONTACT_METHODS = {"NSC": "lcp", "SMC": "penalty"}
DEFAULT_FRICTION, DEFAULT_RESTITUTION = 0.8, 0.01   # Chrono's contact material defaults
LOOP_ARM = 1.0        # m: the distance of the extra points composite loop constraints use

# edge types -> (Model tree joint type or None for loop-only, DOFs removed)
JOINT_KINDS = {
    "LOCK": ("fixed", 6), "REVOLUTE": ("revolute", 5), "PRISMATIC": ("prismatic", 5),
    "UNIVERSAL": ("universal", 4), "SPHERICAL": ("ball", 3),
    "POINT_LINE": (None, 2), "POINT_PLANE": (None, 1),
    "CYLINDRICAL": (None, 4),        # a rotation motor's CYLINDRICAL spindle
    "GUIDE_SPHERICAL": (None, 2),    # a linear motor's SPHERICAL guide: a point on the z line
}
# bushing: which of Chrono's joint DOFs are free (Model bushing order rx ry rz tx ty tz)
BUSHING_FREE = {"LOCK": (), "SPHERICAL": (0, 1, 2), "REVOLUTE": (2,), "UNIVERSAL": (0, 1)}
KNOWN_MODEL_KEYS = {"name", "angle_degrees", "data_path", "bodies", "joints", "constraints", "tsdas",
                    "rsdas", "body_loads", "load_controllers", "motors"}
KNOWN_BODY_KEYS = {"name", "location", "orientation", "fixed", "mass", "com", "inertia", "contact",
                   "visualization", "initial_linear_velocity", "initial_angular_velocity"}
VELOCITY_ALIASES = {"lin_vel": "initial_linear_velocity", "ang_vel": "initial_angular_velocity"}
_REQUIRED = object()


# =========================================================================================
# Reading typed values with key paths
# =========================================================================================
class _Reader:
    """Typed access to one YAML document; errors name the file and the key path."""

    def __init__(self, path, sink):
        self.path = os.path.abspath(path)
        self.name = os.fspath(path)
        self.folder = os.path.dirname(self.path)
        self.sink = sink              # the list warnings go to
        self.degrees = True

    def error(self, where, expected):
        return ModelError(f"{self.name}: {where}: {expected}")

    def warn(self, where, message):
        text = f"{self.name}: {where}: {message}"
        self.sink.append(text)
        warnings.warn(text, stacklevel=3)

    def load(self):
        try:
            with open(self.path, "rb") as f:
                doc = yaml.safe_load(decode_text(f.read(), self.name, what="YAML"))
        except OSError as exc:
            raise ModelError(f"{self.name}: cannot read the file: {exc}") from None
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = f", line {mark.line + 1}" if mark is not None else ""
            problem = getattr(exc, "problem", None) or str(exc)
            raise ModelError(f"{self.name}{line}: not valid YAML: {problem}") from None
        if not isinstance(doc, dict):
            raise ModelError(f"{self.name}: expected a YAML mapping at the top (Chrono YAML keys such as "
                             f"chrono-version and model), got {type(doc).__name__}")
        return doc

    # -- values ------------------------------------------------------------------------
    def mapping(self, value, where):
        if not isinstance(value, dict):
            raise self.error(where, f"expected a mapping of keys, got {_show(value)}")
        return value

    def sequence(self, d, key, where):
        """A list under `key` (empty when absent or null)."""
        value = d.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.error(f"{where}.{key}", f"expected a list, got {_show(value)}")
        return value

    def scalar_number(self, value, where):
        if isinstance(value, bool) or value is None:
            raise self.error(where, f"expected a number, got {_show(value)}")
        try:
            x = float(value)
        except (TypeError, ValueError):
            raise self.error(where, f"expected a number, got {_show(value)}") from None
        if not np.isfinite(x):
            raise self.error(where, f"expected a finite number, got {_show(value)}")
        return x

    def number(self, d, key, where, default=_REQUIRED):
        if d.get(key) is None:
            if default is _REQUIRED:
                raise self.error(f"{where}.{key}", "missing (expected a number)")
            return default
        return self.scalar_number(d[key], f"{where}.{key}")

    def numbers(self, value, where, n=None):
        if not isinstance(value, list):
            raise self.error(where, f"expected a list of {n or 'some'} numbers, got {_show(value)}")
        if n is not None and len(value) != n:
            raise self.error(where, f"expected {n} numbers, got {len(value)}")
        return np.array([self.scalar_number(x, f"{where}[{k}]") for k, x in enumerate(value)])

    def vector(self, d, key, where, default=_REQUIRED, n=3):
        if d.get(key) is None:
            if default is _REQUIRED:
                raise self.error(f"{where}.{key}", f"missing (expected {n} numbers)")
            return None if default is None else np.array(default, dtype=float)
        return self.numbers(d[key], f"{where}.{key}", n)

    def unit(self, d, key, where, default=_REQUIRED):
        v = self.vector(d, key, where, default)
        if v is None:
            return None
        n = np.linalg.norm(v)
        if n < 1e-12:
            raise self.error(f"{where}.{key}", f"a zero direction {v.tolist()}")
        return v / n

    def flag(self, d, key, where, default):
        value = d.get(key)
        if value is None:
            return default
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false", "yes", "no", "on", "off"):
            return value.strip().lower() in ("true", "yes", "on")
        raise self.error(f"{where}.{key}", f"expected true or false, got {_show(value)}")

    def text(self, d, key, where, default=_REQUIRED):
        value = d.get(key)
        if value is None:
            if default is _REQUIRED:
                raise self.error(f"{where}.{key}", "missing (expected a name)")
            return default
        if isinstance(value, (dict, list)):
            raise self.error(f"{where}.{key}", f"expected a name, got {_show(value)}")
        return str(value)

    def enum(self, d, key, where, choices, default=_REQUIRED):
        value = d.get(key)
        if value is None:
            if default is _REQUIRED:
                raise self.error(f"{where}.{key}", f"missing (expected one of {', '.join(choices)})")
            return default
        word = str(value).strip().upper()
        if word not in choices:
            raise self.error(f"{where}.{key}", f"{_show(value)}: expected one of {', '.join(choices)}")
        return word

    def rotation(self, d, key, where):
        """3x3 rotation of an orientation (identity when absent): 3 numbers [yaw, pitch, roll]
        (R = Rz(yaw) Ry(pitch) Rx(roll), degrees per angle_degrees) or a unit quaternion
        [e0, e1, e2, e3] (scalar first)."""
        value = d.get(key)
        if value is None:
            return np.eye(3)
        full = f"{where}.{key}"
        if not isinstance(value, list) or len(value) not in (3, 4):
            raise self.error(full, f"expected [yaw, pitch, roll] or a quaternion [e0, e1, e2, e3], got {_show(value)}")
        a = self.numbers(value, full)
        if a.size == 3:
            if self.degrees:
                a = np.radians(a)
            return rpy_to_matrix([a[2], a[1], a[0]])
        n = np.linalg.norm(a)
        if abs(n - 1.0) > 1e-3:
            raise self.error(full, f"quaternion {a.tolist()} is not a unit quaternion (norm {n:.6g}; "
                                   "expected [e0, e1, e2, e3] with e0^2 + e1^2 + e2^2 + e3^2 = 1)")
        return quat_to_matrix([a[1], a[2], a[3], a[0]])

    def unknown_keys(self, d, known, where):
        for key in d:
            if key not in known:
                self.warn(f"{where}.{key}", "not a key Chrono reads here; ignored")


def _show(value):
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _frame_z(z):
    """A rotation whose z column is the unit vector z; x is the world axis least along z made
    normal to it, so z = (0, 0, 1) gives the identity."""
    e = np.eye(3)[int(np.argmin(np.abs(z)))]
    x = e - z * e.dot(z)
    x /= np.linalg.norm(x)
    return np.column_stack([x, np.cross(z, x), z])


def _frame(R, p):
    return make_transform(R, p)


def _local_point(T, p):
    """World point p in the frame T."""
    return T[:3, :3].T @ (p - T[:3, 3])


# =========================================================================================
# Entry point and file layouts
# =========================================================================================
def load_chrono_yaml(path, floating_base: bool = False) -> Model:
    """Read a Chrono YAML simulation or model file into a finalized Model (module docstring).
    `floating_base` is ignored: a Chrono file says which bodies are fixed."""
    sink = []
    top = _Reader(path, sink)
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
        model_reader = _Reader(_relative(top, model_value, "model"), sink)
        model_doc = model_reader.load()
        _check_version(model_reader, model_doc)
        solver_value = doc.get("solver")
        if solver_value is not None:
            if not isinstance(solver_value, str):
                raise top.error("solver", f"expected the solver file's name, got {_show(solver_value)}")
            solver_reader = _Reader(_relative(top, solver_value, "solver"), sink)
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
        raise top.error("model", f"expected a mapping of the model or the model file's name, got {_show(model_value)}")
    settings["files"]["model"] = model_reader.path
    model = _Builder(model_reader, model_doc).build()
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


# =========================================================================================
# The model
# =========================================================================================
@dataclasses.dataclass
class _Body:
    name: str
    where: str
    T: np.ndarray                    # reference frame in the world
    fixed: bool
    link: Link
    v_ref: np.ndarray                # world velocity of the reference frame's origin
    w: np.ndarray                    # world angular velocity


@dataclasses.dataclass
class _Edge:
    """A kinematic connection between two bodies: a joint or a motor's guide."""
    name: str
    where: str
    ctype: str                       # key of JOINT_KINDS
    body1: str
    body2: str
    frame: np.ndarray                # Chrono's joint frame in the world
    source: str                      # "joint" or "motor"
    axis_given: bool = False         # POINT_LINE / POINT_PLANE with an axis from the file
    order: int = 0


class _Builder:
    def __init__(self, reader, doc):
        self.r = reader
        self.doc = doc
        self.bodies: dict[str, _Body] = {}
        self.edges: list[_Edge] = []

    # -- top level ---------------------------------------------------------------------
    def build(self) -> Model:
        r = self.r
        m = r.mapping(self.doc["model"], "model")
        r.degrees = r.flag(m, "angle_degrees", "model", True)
        name = r.text(m, "name", "model", "") or os.path.splitext(os.path.basename(r.name))[0]
        model = Model(name, gravity=CHRONO_GRAVITY)
        model.self_collision = True
        self.model = model
        for key in m:
            if key not in KNOWN_MODEL_KEYS:
                what = ("finite-element content" if "FEA" in str(key).upper() else "not a Chrono MBS model key")
                r.warn(f"model.{key}", f"{what}; not simulated, left out")
                model.report.append(("left out", str(key), f"{what}: not simulated"))
        self.data_root = self._data_root(m)
        if not m.get("bodies"):
            others = [k for k in m if k not in ("name", "angle_degrees", "data_path")]
            raise r.error("model.bodies", "no bodies: this file has no multibody content"
                          + (f" (it holds {', '.join(map(str, others))}, which this project does not simulate)"
                             if others else ""))
        for k, b in enumerate(r.sequence(m, "bodies", "model")):
            self._read_body(b, f"model.bodies[{k}]")
        for k, j in enumerate(r.sequence(m, "joints", "model")):
            self._read_joint(j, f"model.joints[{k}]")
        motors = [self._read_motor(x, f"model.motors[{k}]") for k, x in enumerate(r.sequence(m, "motors", "model"))]
        self._build_tree()
        for k, c in enumerate(r.sequence(m, "constraints", "model")):
            self._read_constraint(c, f"model.constraints[{k}]")
        for k, t in enumerate(r.sequence(m, "tsdas", "model")):
            self._read_tsda(t, f"model.tsdas[{k}]")
        for k, t in enumerate(r.sequence(m, "rsdas", "model")):
            self._read_rsda(t, f"model.rsdas[{k}]")
        for k, ld in enumerate(r.sequence(m, "body_loads", "model")):
            self._read_load(ld, f"model.body_loads[{k}]", controller=False)
        for k, ld in enumerate(r.sequence(m, "load_controllers", "model")):
            self._read_load(ld, f"model.load_controllers[{k}]", controller=True)
        model.motors.extend(mo for mo in motors if mo is not None)
        return model.finalize()

    def _data_root(self, m):
        r = self.r
        dp = m.get("data_path")
        if dp is None:
            return None
        dp = r.mapping(dp, "model.data_path")
        kind = r.enum(dp, "type", "model.data_path", ("ABSOLUTE", "RELATIVE"), "ABSOLUTE")
        if kind == "ABSOLUTE":
            return None
        return os.path.normpath(os.path.join(r.folder, r.text(dp, "root", "model.data_path", ".")))

    def _named(self, d, key, where):
        name = self.r.text(d, key, where)
        if name not in self.bodies:
            raise self.r.error(f"{where}.{key}", f"{name!r} is not a body of this model "
                                                 f"(bodies: {', '.join(self.bodies)})")
        return name

    # -- bodies --------------------------------------------------------------------------
    def _read_body(self, b, w):
        r = self.r
        b = r.mapping(b, w)
        name = r.text(b, "name", w)
        if name in self.bodies:
            raise r.error(f"{w}.name", f"a second body named {name!r}")
        for alias, key in VELOCITY_ALIASES.items():
            if alias in b and key not in b:
                r.warn(f"{w}.{alias}", f"read as {key} (Chrono's parser reads only {key} and would ignore it)")
        r.unknown_keys(b, KNOWN_BODY_KEYS | set(VELOCITY_ALIASES), w)
        fixed = r.flag(b, "fixed", w, False)
        p = r.vector(b, "location", w)
        R = r.rotation(b, "orientation", w)
        T = _frame(R, p)
        mass = r.number(b, "mass", w, None)
        inertia = b.get("inertia")
        if not fixed:
            if mass is None:
                raise r.error(f"{w}.mass", f"missing: body {name!r} is not fixed, so it needs a mass")
            if not mass > 0:
                raise r.error(f"{w}.mass", f"body {name!r} is not fixed, so its mass must be > 0, got {mass}")
            if inertia is None:
                raise r.error(f"{w}.inertia", f"missing: body {name!r} is not fixed, so it needs inertia moments")
        elif mass is not None and mass < 0:
            raise r.error(f"{w}.mass", f"expected a mass >= 0, got {mass}")
        com = np.zeros(3)
        Rcom = np.eye(3)
        if b.get("com") is not None:
            c = r.mapping(b["com"], f"{w}.com")
            com = r.vector(c, "location", f"{w}.com", [0, 0, 0])
            Rcom = r.rotation(c, "orientation", f"{w}.com")
        I = np.zeros((3, 3))
        if inertia is not None:
            inertia = r.mapping(inertia, f"{w}.inertia")
            moments = r.vector(inertia, "moments", f"{w}.inertia", None if fixed else _REQUIRED)
            products = r.vector(inertia, "products", f"{w}.inertia", [0, 0, 0])
            if moments is not None:
                if np.any(moments < 0):
                    raise r.error(f"{w}.inertia.moments", f"expected moments >= 0, got {moments.tolist()}")
                # Chrono's SetInertiaXX / SetInertiaXY: the tensor's diagonal and off-diagonal entries
                Ic = np.array([[moments[0], products[0], products[1]],
                               [products[0], moments[1], products[2]],
                               [products[1], products[2], moments[2]]])
                I = Rcom @ Ic @ Rcom.T
        link = Link(name, mass=mass or 0.0, com=com, inertia=I)
        lin = r.vector(b, "initial_linear_velocity", w, None) if "initial_linear_velocity" in b else \
            r.vector(b, "lin_vel", w, [0, 0, 0])
        ang = r.vector(b, "initial_angular_velocity", w, None) if "initial_angular_velocity" in b else \
            r.vector(b, "ang_vel", w, [0, 0, 0])
        if fixed and (np.any(lin) or np.any(ang)):
            r.warn(w, f"fixed body {name!r} has initial velocities; ignored")
            lin, ang = np.zeros(3), np.zeros(3)
        # Chrono: the linear velocity is the COM's (world), the angular one in the COM frame
        w_world = R @ Rcom @ ang
        v_ref = lin + np.cross(w_world, p - (p + R @ com))
        self._read_geometry(b, w, link)
        self.model.add_link(link)
        self.bodies[name] = _Body(name, w, T, fixed, link, v_ref, w_world)

    def _read_geometry(self, b, w, link):
        r = self.r
        contact = b.get("contact")
        if contact is not None:
            contact = r.mapping(contact, f"{w}.contact")
            materials = {}
            for k, mat in enumerate(r.sequence(contact, "materials", f"{w}.contact")):
                mw = f"{w}.contact.materials[{k}]"
                mat = r.mapping(mat, mw)
                materials[r.text(mat, "name", mw)] = (
                    r.number(mat, "coefficient_of_friction", mw, DEFAULT_FRICTION),
                    r.number(mat, "coefficient_of_restitution", mw, DEFAULT_RESTITUTION))
            for k, sh in enumerate(r.sequence(contact, "shapes", f"{w}.contact")):
                sw = f"{w}.contact.shapes[{k}]"
                sh = r.mapping(sh, sw)
                mat = r.text(sh, "material", sw)
                if mat not in materials:
                    raise r.error(f"{sw}.material", f"{mat!r} is not one of this body's contact materials "
                                                    f"({', '.join(materials) or 'none'})")
                shape = self._shape(sh, sw, collision=True)
                if shape is not None:
                    shape.friction, shape.restitution = materials[mat]
                    link.collisions.append(shape)
            if contact.get("collision_family") is not None:
                fam = r.number(contact, "collision_family", f"{w}.contact")
                if fam != int(fam) or not 0 <= fam <= 15:
                    raise r.error(f"{w}.contact.collision_family", f"expected an integer 0..15, got {fam}")
                link.collision_family = int(fam)
        vis = b.get("visualization")
        if vis is not None:
            vis = r.mapping(vis, f"{w}.visualization")
            if vis.get("model_file") is not None:
                shape = Shape("mesh", name=f"{link.name}_model_file")
                self._mesh(shape, r.text(vis, "model_file", f"{w}.visualization"), f"{w}.visualization.model_file")
                link.visuals.append(shape)
            for k, sh in enumerate(r.sequence(vis, "shapes", f"{w}.visualization")):
                sw = f"{w}.visualization.shapes[{k}]"
                shape = self._shape(r.mapping(sh, sw), sw, collision=False)
                if shape is not None:
                    link.visuals.append(shape)

    def _shape(self, sh, w, collision):
        r = self.r
        kinds = ("SPHERE", "BOX", "CYLINDER", "MESH", "HULL")
        kind = r.enum(sh, "type", w, kinds)
        p = r.vector(sh, "location", w, [0, 0, 0])
        R = r.rotation(sh, "orientation", w)
        shape = None
        if kind == "SPHERE":
            shape = Shape("sphere", pose=_frame(np.eye(3), p), radius=self._size(sh, "radius", w))
        elif kind == "BOX":
            dims = r.vector(sh, "dimensions", w)
            if np.any(dims <= 0):
                raise r.error(f"{w}.dimensions", f"expected positive lengths, got {dims.tolist()}")
            shape = Shape("box", pose=_frame(R, p), size=dims)
        elif kind == "CYLINDER":
            axis = r.unit(sh, "axis", w)
            shape = Shape("cylinder", pose=_frame(_frame_z(axis), p), radius=self._size(sh, "radius", w),
                          length=self._size(sh, "length", w))
        else:
            if kind == "HULL":
                r.warn(w, "HULL read as the triangle mesh of its file (Chrono takes each object's convex hull)")
            scale = r.number(sh, "scale", w, 1.0)
            shape = Shape("mesh", pose=_frame(R, p), scale=np.full(3, scale))
            self._mesh(shape, r.text(sh, "filename", w), f"{w}.filename")
        if not collision and sh.get("color") is not None:
            rgb = r.vector(sh, "color", w)
            shape.color = np.array([*np.clip(rgb, 0, 1), 1.0])
        return shape

    def _size(self, sh, key, w):
        x = self.r.number(sh, key, w)
        if not x > 0:
            raise self.r.error(f"{w}.{key}", f"expected a positive size, got {x}")
        return x

    def _mesh(self, shape, filename, w):
        path = filename if self.data_root is None else os.path.join(self.data_root, filename)
        if not os.path.isabs(path):
            path = os.path.join(self.r.folder, path)
        shape.mesh_path = os.path.normpath(path)
        if not os.path.isfile(path):
            self.r.warn(w, f"mesh {filename!r} not found (looked for {shape.mesh_path}); kept without geometry")
            return
        try:
            shape.vertices, shape.faces = load_mesh(path, shape.scale)
        except MeshError as exc:
            self.r.warn(w, f"mesh {filename!r} unreadable, kept without geometry: {exc}")

    # -- joints and motors: the graph's edges -------------------------------------------------
    def _read_joint(self, j, w):
        r = self.r
        j = r.mapping(j, w)
        name = r.text(j, "name", w)
        ctype = r.enum(j, "type", w, ("LOCK", "REVOLUTE", "SPHERICAL", "PRISMATIC", "UNIVERSAL",
                                      "POINT_LINE", "POINT_PLANE"))
        b1, b2 = self._named(j, "body1", w), self._named(j, "body2", w)
        if b1 == b2:
            raise r.error(f"{w}.body2", f"joint {name!r} connects body {b1!r} to itself")
        p = r.vector(j, "location", w)
        axis_given = False
        if ctype in ("REVOLUTE", "PRISMATIC"):
            R = _frame_z(r.unit(j, "axis", w))
        elif ctype == "UNIVERSAL":
            x = r.unit(j, "axis1", w)
            y = r.unit(j, "axis2", w)
            z = np.cross(x, y)
            if np.linalg.norm(z) < 1e-9:
                raise r.error(f"{w}.axis2", f"universal joint {name!r}: axis2 {y.tolist()} is parallel to axis1")
            z /= np.linalg.norm(z)
            R = np.column_stack([x, np.cross(z, x), z])
        elif ctype in ("POINT_LINE", "POINT_PLANE") and j.get("axis") is not None:
            # the line's direction (Chrono's x) or the plane's normal (Chrono's z)
            a = r.unit(j, "axis", w)
            Rz = _frame_z(a)
            R = np.column_stack([a, Rz[:, 0], np.cross(a, Rz[:, 0])]) if ctype == "POINT_LINE" else Rz
            axis_given = True
        else:
            R = np.eye(3)
        F = _frame(R, p)
        if j.get("bushing_data") is not None:
            self._bushing(j, w, name, ctype, b1, b2, F)
            return
        self.edges.append(_Edge(name, w, ctype, b1, b2, F, "joint", axis_given, len(self.edges)))

    def _bushing(self, j, w, name, ctype, b1, b2, F):
        r = self.r
        if ctype not in BUSHING_FREE:
            raise r.error(f"{w}.bushing_data", f"a bushing of type {ctype} is not supported "
                                               f"(Chrono refuses it too; use {', '.join(BUSHING_FREE)})")
        bd = r.mapping(j["bushing_data"], f"{w}.bushing_data")
        bw = f"{w}.bushing_data"
        kl, dl = r.number(bd, "stiffness_linear", bw), r.number(bd, "damping_linear", bw)
        kr, dr = r.number(bd, "stiffness_rotational", bw), r.number(bd, "damping_rotational", bw)
        dof = r.mapping(bd.get("DOF") or {}, f"{bw}.DOF")
        kr_dof, dr_dof = r.number(dof, "stiffness_rotational", f"{bw}.DOF", 0.0), r.number(dof, "damping_rotational", f"{bw}.DOF", 0.0)
        K = np.array([kr, kr, kr, kl, kl, kl])
        D = np.array([dr, dr, dr, dl, dl, dl])
        for i in BUSHING_FREE[ctype]:
            K[i], D[i] = kr_dof, dr_dof
        T1, T2 = self.bodies[b1].T, self.bodies[b2].T
        self.model.forces.append(Bushing(name, b1, inverse_transform(T1) @ F, b2, inverse_transform(T2) @ F,
                                         stiffness=K, damping=D))
        self.model.report.append(("joint", name, f"{ctype} with bushing_data -> Bushing element "
                                                 f"(K rot/lin {K[:3].tolist()}/{K[3:].tolist()}); no kinematic joint"))

    def _read_motor(self, mo, w):
        r = self.r
        mo = r.mapping(mo, w)
        name = r.text(mo, "name", w)
        kind = r.enum(mo, "type", w, ("LINEAR", "ROTATION"))
        b1, b2 = self._named(mo, "body1", w), self._named(mo, "body2", w)
        if b1 == b2:
            raise r.error(f"{w}.body2", f"motor {name!r} connects body {b1!r} to itself")
        actuation = r.enum(mo, "actuation_type", w, ("POSITION", "SPEED", "FORCE"))
        if mo.get("actuation_function") is None:
            raise r.error(f"{w}.actuation_function", "missing (expected a function of time)")
        function = self._function(mo["actuation_function"], f"{w}.actuation_function", name)
        F = _frame(_frame_z(r.unit(mo, "axis", w)), r.vector(mo, "location", w))
        if kind == "LINEAR":
            guide = r.enum(mo, "guide", w, ("FREE", "PRISMATIC", "SPHERICAL"), "PRISMATIC")
            ctype = {"FREE": None, "PRISMATIC": "PRISMATIC", "SPHERICAL": "GUIDE_SPHERICAL"}[guide]
        else:
            guide = r.enum(mo, "spindle", w, ("FREE", "REVOLUTE", "CYLINDRICAL"), "REVOLUTE")
            ctype = {"FREE": None, "REVOLUTE": "REVOLUTE", "CYLINDRICAL": "CYLINDRICAL"}[guide]
        if ctype is not None:
            self.edges.append(_Edge(name, w, ctype, b1, b2, F, "motor", order=len(self.edges)))
        T1, T2 = self.bodies[b1].T, self.bodies[b2].T
        if actuation == "POSITION" and function.kind != "input" and abs(function(0.0)) > 1e-12:
            r.warn(f"{w}.actuation_function", f"position motor {name!r} starts at f(0) = {function(0.0):.6g}, not 0: "
                                              "the bodies start away from its target and are pulled onto it")
        self.model.report.append(("motor", name, f"{kind} {actuation} {guide} between {b1!r} (driven) and {b2!r}"))
        # Chrono drives body1 relative to body2; the Model drives link2 relative to link1
        return Motor(name, kind.lower(), b2, inverse_transform(T2) @ F, b1, inverse_transform(T1) @ F,
                     actuation.lower(), function, guide="free")

    # -- the spanning tree ---------------------------------------------------------------
    def _build_tree(self):
        model, bodies = self.model, self.bodies
        names = list(bodies)
        uf = {n: n for n in names + [None]}     # None: the world

        def find(x):
            while uf[x] != x:
                uf[x] = uf[uf[x]]
                x = uf[x]
            return x

        for n in names:
            if bodies[n].fixed:
                uf[find(n)] = find(None)
        tree, loops = [], []
        for e in sorted(self.edges, key=lambda e: (-JOINT_KINDS[e.ctype][1], e.order)):
            if bodies[e.body1].fixed and bodies[e.body2].fixed:
                self.r.warn(e.where, f"{e.source} {e.name!r} joins two fixed bodies ({e.body1!r}, "
                                     f"{e.body2!r}): it constrains nothing; dropped")
                continue
            a, b = find(e.body1), find(e.body2)
            if JOINT_KINDS[e.ctype][0] is not None and a != b:
                uf[a] = b
                tree.append(e)
            else:
                loops.append(e)
        adjacency = {n: [] for n in names}
        for e in tree:
            adjacency[e.body1].append(e)
            adjacency[e.body2].append(e)
        used_names = set()
        seen = set()

        def unique(name):
            out, k = name, 2
            while out in used_names:
                out, k = f"{name}_{k}", k + 1
            used_names.add(out)
            return out

        def grow(root):
            queue = deque([root])
            seen.add(root)
            while queue:
                parent = queue.popleft()
                for e in adjacency[parent]:
                    child = e.body2 if e.body1 == parent else e.body1
                    if child in seen:
                        continue
                    seen.add(child)
                    self._tree_joint(e, parent, child, unique)
                    queue.append(child)

        for n in names:
            if bodies[n].fixed:
                body = bodies[n]
                model.add_joint(Joint(unique(f"{n}_fixed"), "fixed", None, n, origin=body.T,
                                      params={"chrono": "fixed body"}))
                model.report.append(("body", n, "fixed: welded to the world"))
        for n in names:
            if bodies[n].fixed:
                grow(n)
        for n in names:
            if n not in seen:
                body = bodies[n]
                R = body.T[:3, :3]
                q0 = np.concatenate([body.T[:3, 3], matrix_to_quat(R)])
                v0 = np.concatenate([R.T @ body.v_ref, R.T @ body.w])
                model.add_joint(Joint(unique(f"{n}_free"), "free", None, n, q0=q0, v0=v0,
                                      params={"chrono": "free body"}))
                model.report.append(("body", n, "free joint to the world (no joint path to a fixed body)"))
                grow(n)
        for e in sorted(loops, key=lambda e: e.order):     # in the file's order
            self._loop(e)

    def _tree_joint(self, e, parent, child, unique):
        """Model joint for tree edge e with the given orientation; q = 0 at the file's pose."""
        bodies = self.bodies
        jtype = JOINT_KINDS[e.ctype][0]
        TP, TC = bodies[parent].T, bodies[child].T
        F = e.frame.copy()
        axis, axis2 = np.array([0.0, 0.0, 1.0]), np.array([0.0, 1.0, 0.0])
        if jtype in ("ball", "fixed"):
            F[:3, :3] = TC[:3, :3]          # any frame serves; the child's keeps v in its frame
        elif jtype == "universal":
            axis, axis2 = (np.array([1.0, 0, 0]), np.array([0, 1.0, 0])) if parent == e.body1 else \
                (np.array([0, 1.0, 0]), np.array([1.0, 0, 0]))
        name = unique(e.name)
        if name != e.name:
            self.r.warn(e.where, f"name {e.name!r} is taken by another joint; this one is {name!r}")
        joint = Joint(name, jtype, parent, child, origin=inverse_transform(TP) @ F, axis=axis, axis2=axis2,
                      child_pose=inverse_transform(TC) @ F,
                      params={"chrono": e.ctype, "body1": e.body1, "body2": e.body2, "source": e.source})
        joint.v0 = self._joint_velocity(joint, e, bodies[parent], bodies[child], F)
        self.model.add_joint(joint)
        self.model.report.append((e.source, e.name, f"{e.ctype} -> {jtype} joint {name!r} "
                                                    f"(parent {parent!r}, child {child!r})"))

    def _joint_velocity(self, joint, e, P, C, F):
        """The joint rates closest to the file's initial velocities of the two bodies."""
        if not (np.any(P.v_ref) or np.any(P.w) or np.any(C.v_ref) or np.any(C.w)) or joint.nv == 0:
            return np.zeros(joint.nv)
        o = F[:3, 3]
        w_rel = C.w - P.w
        v_rel = (C.v_ref + np.cross(C.w, o - C.T[:3, 3])) - (P.v_ref + np.cross(P.w, o - P.T[:3, 3]))
        RF = F[:3, :3]
        if joint.type == "ball":
            S = np.vstack([np.zeros((3, 3)), C.T[:3, :3]])
        elif joint.type == "revolute":
            S = np.concatenate([np.zeros(3), RF @ joint.axis])[:, None]
        elif joint.type == "prismatic":
            S = np.concatenate([RF @ joint.axis, np.zeros(3)])[:, None]
        else:   # universal at q = 0
            S = np.vstack([np.zeros((3, 2)), np.column_stack([RF @ joint.axis, RF @ joint.axis2])])
        target = np.concatenate([v_rel, w_rel])
        qd = np.linalg.lstsq(S, target, rcond=None)[0]
        residual = np.linalg.norm(S @ qd - target)
        if residual > 1e-9 * max(1.0, np.linalg.norm(target)):
            self.r.warn(e.where, f"the initial velocities of {P.name!r} and {C.name!r} do not fit joint "
                                 f"{joint.name!r} (off by {residual:.3g}); its rate is the nearest fit")
        return qd

    def _loop(self, e):
        """LoopConstraints for a non-tree edge (module docstring)."""
        model, bodies = self.model, self.bodies
        T1, T2 = bodies[e.body1].T, bodies[e.body2].T
        p, R = e.frame[:3, 3], e.frame[:3, :3]
        x, y, z = R[:, 0], R[:, 1], R[:, 2]
        info = {"chrono": e.ctype, "source": e.source}

        def on(T, point):
            return _local_point(T, point)

        def direction(T, d):
            return T[:3, :3].T @ d

        def loop(kind, l1, T_1, a1, l2, T_2, a2, axis=z, **params):
            k = sum(1 for c in model.constraints if c.params.get("joint") == e.name)
            name = e.name if k == 0 else f"{e.name}_{k + 1}"
            model.constraints.append(LoopConstraint(name, kind, l1, l2, pos1=on(T_1, a1), pos2=on(T_2, a2),
                                                    axis=direction(T_1, axis),
                                                    params={**info, "joint": e.name, **params}))
            return kind

        b1, b2 = e.body1, e.body2
        L = LOOP_ARM
        if e.ctype == "LOCK":
            kinds = [loop("weld", b1, T1, p, b2, T2, p)]
        elif e.ctype == "SPHERICAL":
            kinds = [loop("ball", b1, T1, p, b2, T2, p)]
        elif e.ctype == "REVOLUTE":
            kinds = [loop("hinge", b1, T1, p, b2, T2, p)]
        elif e.ctype == "UNIVERSAL":
            kinds = [loop("ball", b1, T1, p, b2, T2, p),
                     loop("point_plane", b1, T1, p, b2, T2, p + L * y, axis=x)]
        elif e.ctype == "PRISMATIC":
            kinds = [loop("point_line", b1, T1, p, b2, T2, p), loop("orientation", b1, T1, p, b2, T2, p)]
        elif e.ctype == "CYLINDRICAL":
            kinds = [loop("point_line", b1, T1, p, b2, T2, p), loop("parallel", b1, T1, p, b2, T2, p)]
        elif e.ctype == "GUIDE_SPHERICAL":
            kinds = [loop("point_line", b1, T1, p, b2, T2, p)]
        elif e.ctype == "POINT_LINE":     # body1's point on body2's line (Chrono's x axis)
            kinds = [loop("point_line", b2, T2, p, b1, T1, p, axis=x)]
        else:                             # POINT_PLANE: body1's point in body2's plane (normal z)
            kinds = [loop("point_plane", b2, T2, p, b1, T1, p, axis=z)]
        how = " (axis from the file)" if e.axis_given else (
            " (Chrono's identity frame: line along global x)" if e.ctype == "POINT_LINE" else
            " (Chrono's identity frame: plane normal global z)" if e.ctype == "POINT_PLANE" else "")
        model.report.append((e.source, e.name, f"{e.ctype} -> loop constraint {' + '.join(kinds)}{how}"))

    # -- constraints, springs, loads --------------------------------------------------------
    def _read_constraint(self, c, w):
        r = self.r
        c = r.mapping(c, w)
        name = r.text(c, "name", w)
        ctype = r.enum(c, "type", w, ("DISTANCE", "REVOLUTE-SPHERICAL", "REVOLUTE-TRANSLATIONAL"))
        b1, b2 = self._named(c, "body1", w), self._named(c, "body2", w)
        T1, T2 = self.bodies[b1].T, self.bodies[b2].T
        p1, p2 = r.vector(c, "point1", w), r.vector(c, "point2", w)
        if self.bodies[b1].fixed and self.bodies[b2].fixed:
            r.warn(w, f"constraint {name!r} joins two fixed bodies ({b1!r}, {b2!r}): it constrains nothing; dropped")
            return
        params = {"chrono": ctype}
        axis = np.array([0.0, 0.0, 1.0])
        if ctype == "DISTANCE":
            kind = "distance"
            params["distance"] = float(np.linalg.norm(p2 - p1))
        else:
            axis = T1[:3, :3].T @ r.unit(c, "axis", w)       # the revolute's axis, on body1
            if ctype == "REVOLUTE-SPHERICAL":
                kind = "revolute_spherical"
                params["distance"] = float(np.linalg.norm(p2 - p1))
            else:
                kind = "revolute_translational"
                x2 = r.unit(c, "axis2", w, None)
                if x2 is not None:
                    params["x2"] = T2[:3, :3].T @ x2
        self.model.constraints.append(LoopConstraint(name, kind, b1, b2, pos1=_local_point(T1, p1),
                                                     pos2=_local_point(T2, p2), axis=axis, params=params))
        self.model.report.append(("constraint", name, f"{ctype} -> loop constraint {kind}"))

    def _curve(self, t, key, w):
        data = t.get(key)
        if data is None:
            return None
        pts = self._table(data, f"{w}.{key}", 2)
        if len(pts) == 1:
            return Function.constant(pts[0, 1])
        return Function.piecewise_linear(pts[:, 0], pts[:, 1], extrapolate="constant")

    def _table(self, data, w, ncols):
        r = self.r
        if not isinstance(data, list) or not data:
            raise r.error(w, f"expected a list of [x, y] rows, got {_show(data)}")
        rows = np.array([r.numbers(row, f"{w}[{k}]", ncols) for k, row in enumerate(data)])
        order = np.argsort(rows[:, 0], kind="stable")
        rows = rows[order]
        if np.any(np.diff(rows[:, 0]) <= 0):
            raise r.error(w, f"the first column repeats a value ({rows[:, 0].tolist()}); expected distinct x")
        return rows

    def _read_tsda(self, t, w):
        r = self.r
        t = r.mapping(t, w)
        name = r.text(t, "name", w)
        b1, b2 = self._named(t, "body1", w), self._named(t, "body2", w)
        T1, T2 = self.bodies[b1].T, self.bodies[b2].T
        p1, p2 = r.vector(t, "point1", w), r.vector(t, "point2", w)
        sd = SpringDamper(name, b1, _local_point(T1, p1), b2, _local_point(T2, p2),
                          preload=r.number(t, "preload", w, 0.0))
        what = None
        if t.get("map_data") is not None:
            defs = r.numbers(t.get("deformation"), f"{w}.deformation") if t.get("deformation") is not None else None
            if defs is None:
                raise r.error(f"{w}.deformation", "missing: a map_data TSDA needs the deformation list")
            rows = self._table(t["map_data"], f"{w}.map_data", defs.size + 1)
            if defs.size < 2 or rows.shape[0] < 2 or np.any(np.diff(defs) <= 0):
                raise r.error(f"{w}.map_data", "a map needs two or more increasing deformations and two or more "
                                               "velocity rows")
            sd.map_deformations, sd.map_velocities, sd.map_forces = defs, rows[:, 0], rows[:, 1:]
            sd.free_length = 0.0   # Chrono's parser leaves it 0 for a map: deformation = length
            what = "map"
        else:
            if t.get("spring_curve_data") is not None or t.get("damping_curve_data") is not None:
                sd.stiffness_curve = self._curve(t, "spring_curve_data", w)
                sd.damping_curve = self._curve(t, "damping_curve_data", w)
                what = "curves"
            if sd.stiffness_curve is None and t.get("spring_coefficient") is not None:
                sd.stiffness = r.number(t, "spring_coefficient", w)
                what = what or "linear"
            if sd.damping_curve is None and t.get("damping_coefficient") is not None:
                sd.damping = r.number(t, "damping_coefficient", w)
                what = what or "linear"
            if what is None:
                raise r.error(w, f"TSDA {name!r}: no spring_coefficient, damping_coefficient, curve or map data")
            if sd.stiffness_curve is not None or t.get("spring_coefficient") is not None:
                sd.free_length = r.number(t, "free_length", w)
            if t.get("degressivity_compression") is not None:
                r.warn(w, "degressive damping is not modelled: read as the linear damping coefficient")
            if t.get("minimum_length") is not None and t.get("maximum_length") is not None:
                sd.min_length = r.number(t, "minimum_length", w)
                sd.max_length = r.number(t, "maximum_length", w)
        self.model.forces.append(sd)
        self.model.report.append(("tsda", name, f"{what} spring-damper between {b1!r} and {b2!r}"))

    def _read_rsda(self, t, w):
        r = self.r
        t = r.mapping(t, w)
        name = r.text(t, "name", w)
        b1, b2 = self._named(t, "body1", w), self._named(t, "body2", w)
        T1, T2 = self.bodies[b1].T, self.bodies[b2].T
        F = _frame(_frame_z(r.unit(t, "axis", w)), r.vector(t, "location", w, [0, 0, 0]))
        rs = RotarySpringDamper(name, b1, inverse_transform(T1) @ F, b2, inverse_transform(T2) @ F,
                                preload=r.number(t, "preload", w, 0.0))
        rs.stiffness_curve = self._curve(t, "spring_curve_data", w)
        rs.damping_curve = self._curve(t, "damping_curve_data", w)
        if rs.stiffness_curve is None and t.get("spring_coefficient") is not None:
            rs.stiffness = r.number(t, "spring_coefficient", w)
        if rs.damping_curve is None and t.get("damping_coefficient") is not None:
            rs.damping = r.number(t, "damping_coefficient", w)
        if rs.stiffness_curve is None and t.get("spring_coefficient") is None and rs.damping_curve is None \
                and t.get("damping_coefficient") is None:
            raise r.error(w, f"RSDA {name!r}: no spring_coefficient, damping_coefficient or curve data")
        if rs.stiffness_curve is not None or t.get("spring_coefficient") is not None:
            angle = r.number(t, "free_angle", w)
            rs.free_angle = np.radians(angle) if r.degrees else angle
        self.model.forces.append(rs)
        self.model.report.append(("rsda", name, f"rotational spring-damper between {b1!r} and {b2!r}"))

    def _read_load(self, ld, w, controller):
        r = self.r
        ld = r.mapping(ld, w)
        name = r.text(ld, "name", w)
        kind = r.enum(ld, "type", w, ("FORCE", "TORQUE")).lower()
        body = self._named(ld, "body", w)
        local = r.flag(ld, "local_load", w, True)
        point = r.vector(ld, "point", w, [0, 0, 0]) if kind == "force" else np.zeros(3)
        point_local = r.flag(ld, "local_point", w, True) if kind == "force" else True
        if controller:
            for k, axis in enumerate("xyz"):
                lname = f"{name}_{axis}"
                self.model.loads.append(BodyLoad(lname, body, kind, np.eye(3)[k], local, point, point_local,
                                                 modulation=Function.input(lname)))
            self.model.report.append(("load", name, f"{kind} from a controller on {body!r}: inputs "
                                                    f"{name}_x, {name}_y, {name}_z"))
            return
        vector = r.vector(ld, "load", w)
        modulation = None
        if ld.get("modulation_function") is not None:
            modulation = self._function(ld["modulation_function"], f"{w}.modulation_function", name)
        self.model.loads.append(BodyLoad(name, body, kind, vector, local, point, point_local, modulation))
        self.model.report.append(("load", name, f"{kind} {vector.tolist()} on {body!r}"))

    # -- functions ---------------------------------------------------------------------------
    def _function(self, f, w, owner):
        r = self.r
        f = r.mapping(f, w)
        kind = r.enum(f, "type", w, ("CONSTANT", "POLYNOMIAL", "SINE", "RAMP", "DATA", "CONTROLLER"))
        if kind == "CONSTANT":
            fn = Function.constant(r.number(f, "value", w))
        elif kind == "POLYNOMIAL":
            if not isinstance(f.get("coefficients"), list) or not f["coefficients"]:
                raise r.error(f"{w}.coefficients", "expected a list of coefficients (ascending powers)")
            fn = Function.polynomial(r.numbers(f["coefficients"], f"{w}.coefficients"))
        elif kind == "SINE":
            phase = r.number(f, "phase", w, 0.0)
            fn = Function.sine(r.number(f, "amplitude", w), r.number(f, "frequency", w),
                               np.radians(phase) if r.degrees else phase, r.number(f, "shift", w, 0.0))
        elif kind == "RAMP":
            fn = Function.linear(r.number(f, "slope", w), r.number(f, "intercept", w, 0.0))
        elif kind == "DATA":
            pts = self._table(f.get("data"), f"{w}.data", 2)
            fn = Function.constant(pts[0, 1]) if len(pts) == 1 else \
                Function.piecewise_linear(pts[:, 0], pts[:, 1], extrapolate="constant")
        else:
            fn = Function.input(owner)
        if f.get("repeat") is not None:
            rep = r.mapping(f["repeat"], f"{w}.repeat")
            start, width = r.number(rep, "start", f"{w}.repeat"), r.number(rep, "width", f"{w}.repeat")
            if not width > 0:
                raise r.error(f"{w}.repeat.width", f"expected a positive width, got {width}")
            fn = dataclasses.replace(fn, repeat=(start, width, r.number(rep, "shift", f"{w}.repeat", 0.0)))
        return fn
