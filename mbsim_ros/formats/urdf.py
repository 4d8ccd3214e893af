"""URDF in (file -> Model) and out (Model -> URDF text for /robot_description).

Reading: `load_urdf(path, floating_base=False, package_paths=None)`.
- Joint types: revolute, continuous (a revolute without position limits), prismatic, fixed,
  floating (-> 'free') and planar (-> 'planar', see below). <mimic joint multiplier offset>
  becomes a CoordinateCoupler (q = multiplier q_leader + offset, a solver row) on a revolute,
  continuous or prismatic joint mimicking another of those. <calibration>, <safety_controller>,
  <gazebo>, <transmission> are ignored.
- Planar: q = (x, y, theta), translation along two in-plane axes, then rotation about the URDF
  axis (the plane normal n, Joint.axis). The in-plane axes are the Model's Joint.plane_axes():
  the joint frame's x made orthogonal to n (y when n is within ~25 deg of x), and n x that.
  So n = z gives (x, y), n = x gives (y, z), n = y gives (x, -z).
- Limits: equal lower and upper limits on a revolute or prismatic joint (an exporter's
  placeholder such as double_pendulum_simple.urdf's "0 0") mean no position limits, as MuJoCo
  reads them; an effort or velocity limit of 0 means no limit. Each gives a model warning.
  A limit of magnitude >= UNLIMITED (1e6, what to_urdf writes for "no limit" where URDF
  requires a number) reads back as infinite, so Model -> URDF -> Model keeps infinite limits.
- The single root link gets a joint `root_joint`: 'free' with floating_base=True, else
  'fixed' to the world. A link named "world" is an ordinary (massless) link, as in Pinocchio.
- Meshes: `package://pkg/rest` is looked up through ROS (ament_index_python, if importable),
  then `package_paths` ({pkg: dir} or [dirs holding pkg folders]), then upward from the URDF's
  folder: a folder named pkg, a folder holding pkg, or the longest tail of `rest` that exists
  (the bare file name only beside the URDF). Relative paths are relative to the URDF, file://
  URIs are paths. A mesh that cannot be found or read is a warning (model.warnings and
  warnings.warn); the shape keeps mesh_path (the resolved path, else the URI) with no vertices.
- Bad input raises ModelError naming the file, the line and what was expected.

Writing: `to_urdf(model, mesh_dir=None, sensor_frames=True)`. Names are kept: the Model's joint
X is URDF joint X. Types URDF lacks become chains of URDF joints through massless links named
`<joint>_link<k>`; the k-th DOF's joint is `<joint>_<k>`, matching Model.dof_names, so
/joint_states names match the URDF:
    universal     -> revolute about axis, revolute about axis2              (exact)
    euler         -> 3 revolutes about the euler_order axes                 (exact)
    planar        -> prismatic plane_x, prismatic plane_y, revolute normal  (exact)
    translational -> 3 prismatic along x, y, z                              (exact)
    ball          -> 3 revolutes about x, y, z: same motion, but the coordinates are xyz Euler
                     angles, not the Model's quaternion (the ROS side must convert)
    screw         -> revolute X and a prismatic `X_pitch` along the same axis with
                     <mimic joint="X" multiplier="pitch / 2 pi">: exact for robot_state_publisher
                     (which follows mimic joints); a reader that ignores mimic sees 2 DOFs
    free (not the root) -> floating
    custom        -> floating (OpenSim's CustomJoint has no URDF form; an XML comment names its
                     coordinates). Its pose reaches TF from the simulation (ros/bridge.py
                     publishes every moving joint's transform), not from robot_state_publisher
A joint with a child_pose (the joint's child-side frame in the child link, OpenSim's child
offset frame) ends at a massless link `<joint>_child_frame` (joint_frame_links(model) gives the
names) followed by a fixed joint `<joint>_child_pose` with origin inv(child_pose) to the child
link, so T_child = T_parent @ origin @ J(q) @ inv(child_pose) holds in the URDF too. Fixed,
free and custom joints need no such link: their origin becomes origin @ inv(child_pose).
A single fixed or free root joint is not written: its child is the URDF root link, and a
floating base reaches TF as odom -> root link (an XML comment says so). Other root joints hang
from an added link "world". Infinite limits: continuous for a revolute without position
limits; +-UNLIMITED for a prismatic's positions and for effort/velocity where URDF needs them.
Shapes: box, sphere, cylinder, mesh directly; capsule and cone become a generated OBJ in
mesh_dir when given, else their bounding cylinder (radius r, length L + 2r for a capsule, L for
a cone); a plane is a 20 m x 20 m x 1 mm box under its surface. A mesh is written as its
mesh_path (package://, file:// kept; a file path as file://) with its scale, or, with only
vertices, as an OBJ written to mesh_dir, else skipped with an XML comment. With mesh_dir, mesh
files (not package:// URIs) are written there too, so that the URDF travels with its meshes and
RViz reads them: STL and Collada copied, other formats (OpenSim's .vtp, OBJ) converted to binary
STL. Files in mesh_dir are named `mesh_uri + name` (a package:// prefix, or a path relative to
the URDF), or by file:// URIs when mesh_uri is None; a mesh file that does not exist
(missing_meshes(model)) is then left out with an XML comment, not written as a path to nothing.
With sensor_frames=True each model.sensors[k] and model.frames[k] becomes a massless link of the
same name on a fixed joint `<name>_joint`, so its frame is in TF, and so does each camera's
`<name>_optical_frame` and range sensor's `<name>_laser_frame` (model.sensor_ros_frames).
"""
from __future__ import annotations

import math
import os
import urllib.parse
import warnings

import numpy as np
from lxml import etree

from ..model import CoordinateCoupler, Function, Joint, Link, Model, ModelError, Shape, sensor_ros_frames
from ..model.transforms import inverse_transform, make_transform, matrix_to_rpy, rpy_to_matrix
from .meshes import MeshError, load_mesh, write_stl

UNLIMITED = 1.0e6   # written where URDF needs a finite limit and the Model has none

_URDF_JOINT_TYPES = {"revolute": "revolute", "continuous": "revolute", "prismatic": "prismatic",
                     "fixed": "fixed", "floating": "free", "planar": "planar"}
_AXIS_TYPES = ("revolute", "continuous", "prismatic", "planar")


# =========================================================================================
# Reading
# =========================================================================================
class _Reader:
    """Parsing state: the file (for messages), the model (for warnings) and mesh lookup."""

    def __init__(self, path, package_paths):
        self.path = os.path.abspath(path)
        self.name = os.fspath(path)
        self.folder = os.path.dirname(self.path)
        self.package_paths = package_paths
        self.model = None
        self.materials = {}
        self.texture_materials = set()
        self.mimics = []           # (element, joint, URDF type, leader, multiplier, offset)

    def error(self, el, expected):
        return ModelError(f"{self.name}, line {el.sourceline}, {_describe(el)}: {expected}")

    def warn(self, el, message):
        text = f"{self.name}, line {el.sourceline}, {_describe(el)}: {message}"
        self.model.warnings.append(text)
        warnings.warn(text, stacklevel=3)

    # -- attributes and numbers --------------------------------------------------------
    def attr(self, el, name):
        value = el.get(name)
        if value is None or not value.strip():
            raise self.error(el, f"missing attribute {name}=\"...\"")
        return value.strip()

    def floats(self, el, name, n, default=None):
        """`n` finite numbers from attribute `name` (default when the attribute is absent)."""
        text = el.get(name) if el is not None else None
        if text is None:
            if default is None:
                raise self.error(el, f"missing attribute {name}=\"...\" ({'a number' if n == 1 else f'{n} numbers'})")
            return np.array(default, dtype=float)
        try:
            values = np.array([float(w) for w in text.split()])
        except ValueError:
            raise self.error(el, f"{name}=\"{text}\": expected {n} numbers") from None
        if values.size != n:
            raise self.error(el, f"{name}=\"{text}\": expected {n} numbers, got {values.size}")
        if not np.all(np.isfinite(values)):
            raise self.error(el, f"{name}=\"{text}\": expected finite numbers")
        return values

    def number(self, el, name, default=None):
        return float(self.floats(el, name, 1, None if default is None else [default])[0])

    def origin(self, el):
        """4x4 transform of the <origin> child of `el` (identity when absent)."""
        o = _child(el, "origin")
        if o is None:
            return np.eye(4)
        return make_transform(rpy_to_matrix(self.floats(o, "rpy", 3, [0, 0, 0])),
                              self.floats(o, "xyz", 3, [0, 0, 0]))


def _local(el):
    return el.tag.rsplit("}", 1)[-1] if isinstance(el.tag, str) else ""


def _child(el, name):
    return next((c for c in el if _local(c) == name), None)


def _children(el, name):
    return [c for c in el if _local(c) == name]


def _describe(el):
    name = el.get("name")
    return f"<{_local(el)} name=\"{name}\">" if name is not None else f"<{_local(el)}>"


def load_urdf(path, floating_base: bool = False, package_paths=None, text=None) -> Model:
    """Read a URDF file into a finalized Model (see the module docstring). text: the URDF itself
    (a xacro expansion, a robot_description), `path` then naming it in messages and giving the
    folder relative mesh paths start from."""
    reader = _Reader(path, package_paths)
    robot = _parse(reader, text)
    model = Model(reader.attr(robot, "name"))
    model.source = reader.name
    reader.model = model
    reader.materials = _read_materials(reader, robot)
    reader.texture_materials = {m.get("name") for m in _children(robot, "material")}   # no warning
    link_els = _children(robot, "link")
    joint_els = _children(robot, "joint")
    root_el = _check_tree(reader, robot, link_els, joint_els)
    for el in link_els:
        model.add_link(_read_link(reader, el))
    for el in joint_els:
        model.add_joint(_read_joint(reader, el))
    _add_mimics(reader, model)
    root = root_el.get("name")
    joint_names = {j.name for j in model.joints}
    name = _unique("root_joint", joint_names)
    if name != "root_joint":
        reader.warn(root_el, f"a joint is already called root_joint; the root's joint is {name!r}")
    model.add_joint(Joint(name, "free" if floating_base else "fixed", None, root))
    return model.finalize()


def _parse(reader, text=None):
    """The <robot> element; XML errors become ModelError with the file and line."""
    parser = etree.XMLParser(remove_comments=True, remove_pis=True, resolve_entities=False,
                             no_network=True)
    try:
        if text is not None:
            tree = etree.ElementTree(etree.fromstring(text.encode() if isinstance(text, str) else text, parser))
        else:
            tree = etree.parse(reader.path, parser)
    except OSError as exc:
        raise ModelError(f"{reader.name}: cannot read the file: {exc}") from None
    except etree.XMLSyntaxError as exc:
        line = f", line {exc.lineno}" if exc.lineno else ""
        raise ModelError(f"{reader.name}{line}: not well-formed XML (expected a URDF <robot> "
                         f"document): {exc.msg}") from None
    robot = tree.getroot()
    if _local(robot) != "robot":
        raise reader.error(robot, "the root element must be <robot name=\"...\">")
    if not _children(robot, "link"):
        raise reader.error(robot, "expected at least one <link name=\"...\">")
    return robot


def _read_materials(reader, robot):
    """name -> rgba for every named material with a color: the top-level ones first, then
    those defined inside a visual (urdfdom lets later visuals refer to them by name too)."""
    materials = {}
    for el in _children(robot, "material") + list(robot.iter("{*}material")):
        name, color = el.get("name"), _child(el, "color")
        if name and color is not None and name not in materials:
            materials[name] = reader.floats(color, "rgba", 4)
    return materials


# -- tree --------------------------------------------------------------------------------
def _check_tree(reader, robot, link_els, joint_els):
    """Check names and the tree shape with line numbers; return the root <link> element."""
    links = _unique_elements(reader, link_els, "link")
    _unique_elements(reader, joint_els, "joint")
    parent_of = {}   # child link -> joint element
    for el in joint_els:
        ends = {}
        for end in ("parent", "child"):
            end_el = _child(el, end)
            if end_el is None:
                raise reader.error(el, f"missing <{end} link=\"...\"/>")
            ends[end] = reader.attr(end_el, "link")
            if ends[end] not in links:
                raise reader.error(end_el, f"link {ends[end]!r} does not exist "
                                           f"(expected the name of a <link> in the file)")
        if ends["parent"] == ends["child"]:
            raise reader.error(el, f"parent and child are the same link {ends['child']!r} (a cycle)")
        if ends["child"] in parent_of:
            other = parent_of[ends["child"]]
            raise reader.error(el, f"link {ends['child']!r} is already the child of joint "
                                   f"{other.get('name')!r} (line {other.sourceline}); expected "
                                   "each link to have one parent joint")
        parent_of[ends["child"]] = el
    roots = [links[n] for n in links if n not in parent_of]
    if len(roots) > 1:
        listing = ", ".join(f"{r.get('name')!r} (line {r.sourceline})" for r in roots)
        raise reader.error(robot, f"{len(roots)} root links: {listing}; expected a single root "
                                  "link (join the others with joints)")
    if not roots:
        raise reader.error(robot, "every link is the child of a joint (a cycle); expected one root link")
    _check_reachable(reader, roots[0].get("name"), joint_els, links)
    return roots[0]


def _unique_elements(reader, elements, kind):
    seen = {}
    for el in elements:
        name = reader.attr(el, "name")
        if name in seen:
            raise reader.error(el, f"a second {kind} named {name!r} (the first is on line "
                                   f"{seen[name].sourceline}); expected unique {kind} names")
        seen[name] = el
    return seen


def _check_reachable(reader, root, joint_els, links):
    children = {}
    for el in joint_els:
        children.setdefault(_child(el, "parent").get("link"), []).append(_child(el, "child").get("link"))
    seen, stack = {root}, [root]
    while stack:
        for c in children.get(stack.pop(), []):
            if c not in seen:
                seen.add(c)
                stack.append(c)
    lost = [n for n in links if n not in seen]
    if lost:
        el = links[lost[0]]
        raise reader.error(el, f"links {lost} are not connected to the root link {root!r} "
                               "(a cycle of joints); expected a tree")


# -- links -------------------------------------------------------------------------------
def _read_link(reader, el):
    name = el.get("name")
    link = Link(name)
    inertial = _child(el, "inertial")
    if inertial is not None:
        link.mass, link.com, link.inertia = _read_inertial(reader, inertial)
    link.visuals = [_read_shape(reader, v, visual=True) for v in _children(el, "visual")]
    link.collisions = [_read_shape(reader, c, visual=False) for c in _children(el, "collision")]
    return link


def _read_inertial(reader, el):
    """mass, com (link frame), inertia about the com rotated into link axes (R I R^T)."""
    mass_el = _child(el, "mass")
    if mass_el is None:
        raise reader.error(el, "missing <mass value=\"...\"/>")
    mass = reader.number(mass_el, "value")
    if mass < 0:
        raise reader.error(mass_el, f"mass {mass}: expected a mass >= 0")
    inertia_el = _child(el, "inertia")
    if inertia_el is None:
        raise reader.error(el, "missing <inertia ixx=... ixy=... ixz=... iyy=... iyz=... izz=.../>")
    xx, xy, xz, yy, yz, zz = (reader.number(inertia_el, k) for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz"))
    inertia = np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])
    T = reader.origin(el)
    R = T[:3, :3]
    if np.linalg.eigvalsh(inertia).min() < -1e-12 * max(1.0, np.abs(inertia).max()):
        reader.warn(inertia_el, "the inertia matrix is not positive semi-definite")
    inertia = R @ inertia @ R.T
    return mass, T[:3, 3], (inertia + inertia.T) / 2   # exactly symmetric, as URDF writes it


def _read_shape(reader, el, visual):
    geometry = _child(el, "geometry")
    if geometry is None:
        raise reader.error(el, "missing <geometry>")
    kinds = [g for g in geometry if isinstance(g.tag, str)]
    if len(kinds) != 1:
        raise reader.error(geometry, "expected exactly one of <box>, <sphere>, <cylinder>, <capsule>, <mesh>")
    g = kinds[0]
    kind = _local(g)
    if kind not in ("box", "sphere", "cylinder", "capsule", "mesh"):
        raise reader.error(g, "unknown geometry; expected <box>, <sphere>, <cylinder>, <capsule> or <mesh>")
    shape = Shape(kind, pose=reader.origin(el), name=el.get("name") or "")
    if kind == "box":
        shape.size = reader.floats(g, "size", 3)
    elif kind == "sphere":
        shape.radius = reader.number(g, "radius")
    elif kind in ("cylinder", "capsule"):
        shape.radius, shape.length = reader.number(g, "radius"), reader.number(g, "length")
    else:
        _read_mesh(reader, g, shape)
    if min(shape.size.min(), shape.radius, shape.length) < 0:
        raise reader.error(g, "expected sizes >= 0")
    if visual:
        shape.color = _read_color(reader, _child(el, "material"), shape.color)
    return shape


def _read_color(reader, material, default):
    if material is None:
        return default
    color = _child(material, "color")
    if color is not None:
        return reader.floats(color, "rgba", 4)
    name = material.get("name")
    if name in reader.materials:
        return reader.materials[name].copy()
    if name not in reader.texture_materials and _child(material, "texture") is None:
        reader.warn(material, "material with no color and no top-level <material> of that name; "
                              "using the default color")
    return default


def _read_mesh(reader, el, shape):
    uri = reader.attr(el, "filename")
    shape.scale = reader.floats(el, "scale", 3, [1, 1, 1])
    path, looked = resolve_mesh_uri(uri, reader.folder, reader.package_paths)
    # an unresolved relative path is kept absolute so a writer can still point at it
    keep_uri = "://" in uri and not uri.startswith("file://")   # package:// or an unknown scheme
    shape.mesh_path = path or (uri if keep_uri else looked[0])
    if path is None:
        reader.warn(el, f"mesh {uri!r} not found (looked in: {'; '.join(looked) or 'nowhere'}); "
                        "kept without geometry")
        return
    try:
        shape.vertices, shape.faces = load_mesh(path, shape.scale)
    except MeshError as exc:
        reader.warn(el, f"mesh {uri!r} unreadable, kept without geometry: {exc}")


def resolve_mesh_uri(uri, base_dir, package_paths=None):
    """(absolute path or None, [places looked]) for a URDF mesh filename."""
    if uri.startswith("package://"):
        return _resolve_package(uri[len("package://"):], base_dir, package_paths)
    if uri.startswith("file://"):
        path = urllib.parse.unquote(uri[len("file://"):])
    elif "://" in uri:
        return None, [f"{uri} (unsupported URI scheme)"]
    else:
        path = uri
    path = os.path.normpath(os.path.join(base_dir, path))
    return (path if os.path.isfile(path) else None), [path]


def _resolve_package(spec, base_dir, package_paths):
    pkg, _, rest = spec.partition("/")
    candidates = []
    share = _ros_package_share(pkg)
    if share:
        candidates.append(os.path.join(share, rest))
    if isinstance(package_paths, dict):
        if pkg in package_paths:
            candidates.append(os.path.join(package_paths[pkg], rest))
    elif package_paths:
        for d in package_paths:
            candidates += [os.path.join(d, pkg, rest), os.path.join(d, rest)]
    ancestors = _ancestors(base_dir)
    for d in ancestors:
        if os.path.basename(d) == pkg:
            candidates.append(os.path.join(d, rest))
        candidates.append(os.path.join(d, pkg, rest))
    parts = rest.split("/")
    for k in range(len(parts) - 1):     # longest tail of `rest` first, nearest folder first
        tail = os.path.join(*parts[k:])
        candidates += [os.path.join(d, tail) for d in ancestors]
    candidates.append(os.path.join(base_dir, parts[-1]))   # the bare file name beside the URDF
    for c in candidates:
        if os.path.isfile(c):
            return os.path.normpath(c), candidates
    ros = f"ROS share {share}" if share else "ROS (ament_index_python not importable or no such package)"
    places = [ros, "package_paths" if package_paths else "no package_paths", base_dir + " and its parents"]
    return None, places


def _ros_package_share(pkg):
    try:
        from ament_index_python.packages import get_package_share_directory
    except ImportError:
        return None
    try:
        return get_package_share_directory(pkg)
    except Exception:   # PackageNotFoundError, or no ament index in the environment
        return None


def _ancestors(folder):
    out, d = [], os.path.abspath(folder)
    while True:
        out.append(d)
        parent = os.path.dirname(d)
        if parent == d:
            return out
        d = parent


# -- joints ------------------------------------------------------------------------------
def _read_joint(reader, el):
    name, urdf_type = el.get("name"), reader.attr(el, "type")
    if urdf_type not in _URDF_JOINT_TYPES:
        raise reader.error(el, f"type {urdf_type!r}: expected one of {', '.join(_URDF_JOINT_TYPES)}")
    joint = dict(name=name, type=_URDF_JOINT_TYPES[urdf_type], parent=_child(el, "parent").get("link"),
                 child=_child(el, "child").get("link"), origin=reader.origin(el))
    if urdf_type in _AXIS_TYPES:
        axis_el = _child(el, "axis")
        axis = reader.floats(axis_el, "xyz", 3, [1, 0, 0]) if axis_el is not None else np.array([1.0, 0, 0])
        norm = np.linalg.norm(axis)
        if norm < 1e-12:
            raise reader.error(axis_el, "axis xyz=\"0 0 0\": expected a nonzero axis direction")
        joint["axis"] = axis / norm
    if urdf_type in ("revolute", "prismatic", "continuous"):
        joint.update(_read_limits(reader, el, urdf_type))
        dynamics = _child(el, "dynamics")
        if dynamics is not None:
            for key in ("damping", "friction"):
                joint[key] = reader.number(dynamics, key, 0.0)
                if joint[key] < 0:
                    raise reader.error(dynamics, f"{key}={joint[key]}: expected a value >= 0")
    mimic = _child(el, "mimic")
    if mimic is not None:
        reader.mimics.append((mimic, name, urdf_type, reader.attr(mimic, "joint"),
                              reader.number(mimic, "multiplier", 1.0), reader.number(mimic, "offset", 0.0)))
    return Joint(**joint)


def _add_mimics(reader, model):
    """<mimic joint="leader" multiplier="m" offset="c">: q = m q_leader + c held by a coordinate
    coupler (a constraint row of the solver), as Gazebo's and Pinocchio's mimic joints."""
    one_dof = ("revolute", "continuous", "prismatic")
    by_name = {j.name: j for j in model.joints}
    for el, name, urdf_type, leader, multiplier, offset in reader.mimics:
        if urdf_type not in one_dof:
            raise reader.error(el, f"a {urdf_type} joint cannot mimic: expected a revolute, continuous "
                                   "or prismatic joint")
        if leader == name:
            raise reader.error(el, f"joint=\"{leader}\": a joint cannot mimic itself")
        lead = by_name.get(leader)
        if lead is None or lead.type not in ("revolute", "prismatic") or lead.nv != 1:
            raise reader.error(el, f"joint=\"{leader}\": expected the name of a revolute, continuous or "
                                   f"prismatic joint of this robot")
        model.couplers.append(CoordinateCoupler(f"{name} (mimic)", name, leader, Function.linear(multiplier, offset)))
        model.report.append(("joint", name, f"mimics {leader}: q = {multiplier:g} q_{leader} + {offset:g}"))


def _read_limits(reader, el, urdf_type):
    limit = _child(el, "limit")
    out = {}
    if limit is None:
        if urdf_type != "continuous":
            reader.warn(el, "no <limit>: treated as unlimited")
        return out
    if urdf_type != "continuous":
        lower, upper = reader.number(limit, "lower", 0.0), reader.number(limit, "upper", 0.0)
        lower, upper = _unlimited(lower), _unlimited(upper)
        if lower > upper:
            raise reader.error(limit, f"lower={lower} > upper={upper}: expected lower <= upper")
        if lower == upper and np.isfinite(lower):
            given = "equal lower and upper limits" if limit.get("lower") or limit.get("upper") else \
                "no lower/upper limits (URDF default 0 0)"
            reader.warn(limit, f"{given} ({lower}): treated as no position limits")
        else:
            out["lower"], out["upper"] = lower, upper   # may be infinite: see _unlimited
    for key, field in (("effort", "effort_limit"), ("velocity", "velocity_limit")):
        if limit.get(key) is None:
            continue
        value = reader.number(limit, key)
        if value < 0:
            raise reader.error(limit, f"{key}={value}: expected a value >= 0")
        if value == 0:
            reader.warn(limit, f"{key} limit 0: treated as no limit")
        else:
            out[field] = _unlimited(value)
    return out


def _unlimited(value):
    """Limits at or beyond UNLIMITED (what to_urdf writes for "none") read back as infinite."""
    return math.copysign(math.inf, value) if abs(value) >= UNLIMITED else value


def _unique(name, taken):
    k, candidate = 0, name
    while candidate in taken:
        candidate = f"{name}_{k}"
        k += 1
    return candidate


# =========================================================================================
# Writing
# =========================================================================================
def to_urdf(model: Model, mesh_dir=None, sensor_frames: bool = True, mesh_uri=None) -> str:
    """URDF text for any Model (see the module docstring for how each type is written)."""
    model.finalize()
    writer = _Writer(model, mesh_dir, mesh_uri)
    robot = writer.robot
    roots = [j for j in model.joints if j.parent is None]
    if len(roots) == 1 and roots[0].type in ("fixed", "free"):
        if roots[0].type == "free":
            robot.append(etree.Comment(
                f" {_clean(roots[0].child)} floats (joint {_clean(roots[0].name)}): its pose is "
                f"published by TF as odom -> {_clean(roots[0].child)}, not by this URDF "))
        skip = {roots[0].name}
        world = None
    else:
        world = writer.fresh("world")
        etree.SubElement(robot, "link", name=world)
        skip = set()
    for link in model.links:
        writer.link(link)
    for joint in model.joints:
        if joint.name not in skip:
            writer.joint(joint, joint.parent if joint.parent is not None else world)
    if sensor_frames:
        for frame in list(model.sensors) + list(model.frames):
            writer.fixed_frame(frame.name, frame.link, frame.pose)
        for sensor in model.sensors:          # camera optical and laser frames, as TF has them
            for name, pose in sensor_ros_frames(sensor):
                writer.fixed_frame(name, sensor.name, pose)
    etree.indent(robot, space="  ")
    return etree.tostring(robot, encoding="unicode", pretty_print=True)


def joint_frame_links(model: Model) -> dict:
    """{joint name: URDF link name} of the massless links to_urdf writes at the child-side frame
    of joints with a child_pose: moving joints whose URDF joint (or chain) cannot carry it
    (every type but fixed, free and custom). Names are `<joint>_child_frame`, made unique
    against the model's link and joint names exactly as to_urdf does."""
    taken = {l.name for l in model.links} | {j.name for j in model.joints}
    out = {}
    for j in model.joints:
        if j.type not in ("fixed", "free", "custom") and not np.array_equal(j.child_pose, np.eye(4)):
            out[j.name] = _unique(f"{j.name}_child_frame", taken)
            taken.add(out[j.name])
    return out


def _num(x):
    """Shortest text that reads back as the same float."""
    x = float(x)
    return "0" if x == 0 else repr(x)


def _nums(xs):
    return " ".join(_num(x) for x in xs)


def _clean(text):
    """Safe inside an XML comment."""
    return str(text).replace("--", "- -")


RVIZ_MESHES = (".stl", ".dae")      # mesh files RViz reads as they are; others become STL


def mesh_file_missing(shape) -> bool:
    """Whether a mesh shape names a local file that does not exist (a loader's warning said so):
    with a mesh_dir the writer leaves it out rather than point at nothing."""
    if shape.kind != "mesh" or not shape.mesh_path or shape.vertices is not None:
        return False
    path = shape.mesh_path
    if "://" in path:
        if not path.startswith("file://"):
            return False                  # package:// and other URIs: resolved by the reader
        path = urllib.parse.unquote(path[len("file://"):])
    return not os.path.isfile(path)


def missing_meshes(model: Model) -> list:
    """The mesh files of `model` that to_urdf leaves out because they do not exist, each once."""
    return list(dict.fromkeys(shape.mesh_path for link in model.links
                              for shape in list(link.visuals) + list(link.collisions)
                              if mesh_file_missing(shape)))


class _Writer:
    def __init__(self, model, mesh_dir, mesh_uri=None):
        self.model = model
        self.mesh_dir = mesh_dir
        self.mesh_uri = mesh_uri
        self.exported = {}              # source mesh file -> URI of its copy in mesh_dir
        self.robot = etree.Element("robot", name=model.name)
        self.robot.append(etree.Comment(f" generated by mbsim_ros from {_clean(model.source or 'a Model')} "))
        self.names = {l.name for l in model.links} | {j.name for j in model.joints}
        self.joint_frames = joint_frame_links(model)     # reserved first: the bridge computes the same
        self.names |= set(self.joint_frames.values())

    def fresh(self, name):
        name = _unique(name, self.names)
        self.names.add(name)
        return name

    # -- links ---------------------------------------------------------------------------
    def link(self, link):
        el = etree.SubElement(self.robot, "link", name=link.name)
        if link.mass > 0 or np.any(link.inertia):
            inertial = etree.SubElement(el, "inertial")
            etree.SubElement(inertial, "origin", xyz=_nums(link.com), rpy="0 0 0")
            etree.SubElement(inertial, "mass", value=_num(link.mass))
            I = link.inertia
            etree.SubElement(inertial, "inertia", ixx=_num(I[0, 0]), ixy=_num(I[0, 1]), ixz=_num(I[0, 2]),
                             iyy=_num(I[1, 1]), iyz=_num(I[1, 2]), izz=_num(I[2, 2]))
        for k, shape in enumerate(link.visuals):
            self.shape(el, "visual", shape, f"{link.name}_visual{k}")
        for k, shape in enumerate(link.collisions):
            self.shape(el, "collision", shape, f"{link.name}_collision{k}")

    def shape(self, link_el, tag, shape, label):
        pose, geometry = self.geometry(shape, label)
        if geometry is None and self.mesh_dir is not None and mesh_file_missing(shape):
            link_el.append(etree.Comment(f" {tag} {_clean(shape.name or label)} left out: mesh file "
                                         f"{_clean(shape.mesh_path)} not found "))
            return
        if geometry is None:
            link_el.append(etree.Comment(f" {tag} {_clean(shape.name or label)} skipped: a {shape.kind} "
                                         "without a mesh file or vertices (or no mesh_dir to write them) "))
            return
        el = etree.SubElement(link_el, tag)
        if shape.name:
            el.set("name", shape.name)
        _origin(el, pose)
        el.append(geometry)
        if tag == "visual":
            rgba = np.clip(shape.color, 0, 1)
            material = etree.SubElement(el, "material", name="rgba_" + "_".join(f"{c:.4g}" for c in rgba))
            etree.SubElement(material, "color", rgba=_nums(rgba))

    def geometry(self, shape, label):
        """(pose, <geometry> element or None) for one Shape."""
        g = etree.Element("geometry")
        pose = shape.pose
        if shape.kind == "box":
            etree.SubElement(g, "box", size=_nums(shape.size))
        elif shape.kind == "sphere":
            etree.SubElement(g, "sphere", radius=_num(shape.radius))
        elif shape.kind == "cylinder":
            etree.SubElement(g, "cylinder", radius=_num(shape.radius), length=_num(shape.length))
        elif shape.kind in ("capsule", "cone"):
            if self.mesh_dir is not None:
                v, f = (capsule_mesh if shape.kind == "capsule" else cone_mesh)(shape.radius, shape.length)
                etree.SubElement(g, "mesh", filename=self.write_obj(label, v, f))
            else:
                g.append(etree.Comment(f" {shape.kind} written as its bounding cylinder "))
                length = shape.length + (2 * shape.radius if shape.kind == "capsule" else 0.0)
                etree.SubElement(g, "cylinder", radius=_num(shape.radius), length=_num(length))
        elif shape.kind == "plane":
            g.append(etree.Comment(" plane written as a thin box under its surface "))
            etree.SubElement(g, "box", size="20 20 0.001")
            pose = pose @ make_transform(p=[0, 0, -0.0005])
        elif shape.mesh_path and self.mesh_dir is not None and mesh_file_missing(shape):
            return pose, None
        elif shape.mesh_path and "://" not in shape.mesh_path and self.mesh_dir is not None:
            uri = self.export_mesh(shape.mesh_path)
            if uri is None:
                return pose, None
            etree.SubElement(g, "mesh", filename=uri, scale=_nums(shape.scale))
        elif shape.mesh_path:
            etree.SubElement(g, "mesh", filename=_mesh_uri(shape.mesh_path), scale=_nums(shape.scale))
        elif shape.vertices is not None and self.mesh_dir is not None:
            etree.SubElement(g, "mesh", filename=self.write_obj(label, shape.vertices, shape.faces))
        else:
            return pose, None
        return pose, g

    def write_obj(self, label, vertices, faces):
        os.makedirs(self.mesh_dir, exist_ok=True)
        name = f"{self.model.name}_{label}.obj"
        with open(os.path.join(self.mesh_dir, name), "w", encoding="utf-8") as f:
            f.write(f"# {label} of model {self.model.name}, written by mbsim_ros\n")
            f.writelines(f"v {_nums(v)}\n" for v in vertices)
            f.writelines(f"f {a + 1} {b + 1} {c + 1}\n" for a, b, c in faces)
        return self.uri_in_mesh_dir(name)

    def export_mesh(self, path):
        """The URI of mesh file `path` copied into mesh_dir: STL and Collada as they are, other
        formats (OpenSim's .vtp, OBJ) converted to binary STL, unscaled (the URDF's scale
        applies). None (an XML comment says why) when the file cannot be read."""
        if path in self.exported:
            return self.exported[path]
        stem, ext = os.path.splitext(os.path.basename(path))
        ext = ext.lower() if ext.lower() in RVIZ_MESHES else ".stl"
        taken = set(self.exported.values())
        name, k = stem + ext, 0
        while self.uri_in_mesh_dir(name) in taken:        # two sources with one file name
            k += 1
            name = f"{stem}_{k}{ext}"
        os.makedirs(self.mesh_dir, exist_ok=True)
        target = os.path.join(self.mesh_dir, name)
        if ext == os.path.splitext(path)[1].lower():
            import shutil
            shutil.copyfile(path, target)
        else:
            try:
                vertices, faces = load_mesh(path)
            except MeshError as exc:
                self.robot.append(etree.Comment(f" mesh {_clean(path)} unreadable, left out: {_clean(str(exc))} "))
                self.exported[path] = None
                return None
            write_stl(target, vertices, faces, header=f"{stem} from {os.path.basename(path)}, by mbsim_ros".encode())
        self.exported[path] = self.uri_in_mesh_dir(name)
        return self.exported[path]

    def uri_in_mesh_dir(self, name):
        """How the URDF names file `name` in mesh_dir: mesh_uri + name, else a file:// URI."""
        if self.mesh_uri is None:
            return _mesh_uri(os.path.abspath(os.path.join(self.mesh_dir, name)))
        prefix = self.mesh_uri.rstrip("/")
        return (prefix + "/" if prefix else "") + urllib.parse.quote(name)

    # -- joints --------------------------------------------------------------------------
    def joint(self, joint, parent):
        """One Model joint as one URDF joint, or as a chain through massless links; a child_pose
        through the joint's child-side frame link."""
        if joint.type in ("fixed", "free", "custom"):
            if joint.type == "custom":
                self.robot.append(etree.Comment(
                    f" custom joint {_clean(joint.name)} (coordinates {_clean(', '.join(joint.dof_names))}): "
                    "no URDF equivalent, written floating; its pose is published by TF "))
            self.urdf_joint(joint.name, _NATIVE.get(joint.type, "floating"), parent, joint.child,
                            joint.origin @ inverse_transform(joint.child_pose), None, None, None)
            return
        frame = self.joint_frames.get(joint.name)
        child = joint.child
        if frame is not None:
            etree.SubElement(self.robot, "link", name=frame)
            child = frame
        if joint.type in ("revolute", "prismatic"):
            self.urdf_joint(joint.name, _NATIVE[joint.type], parent, child, joint.origin, joint.axis, joint, 0)
        elif joint.type == "screw":
            self.screw(joint, parent, child)
        else:
            self.chain(joint, parent, child)
        if frame is not None:
            self.urdf_joint(self.fresh(f"{joint.name}_child_pose"), "fixed", frame, joint.child,
                            inverse_transform(joint.child_pose), None, None, None)

    def chain(self, joint, parent, end):
        """A multi-DOF joint as URDF joints `<joint>_<k>` through links `<joint>_link<k>`."""
        steps = _chain_steps(joint)
        if joint.type == "ball":
            self.robot.append(etree.Comment(
                f" ball joint {_clean(joint.name)}: 3 revolutes about x, y, z (xyz Euler angles "
                "in place of the Model's quaternion; same motion) "))
        origin = joint.origin
        for k, (urdf_type, axis) in enumerate(steps):
            last = k == len(steps) - 1
            child = end if last else self.fresh(f"{joint.name}_link{k}")
            if not last:
                etree.SubElement(self.robot, "link", name=child)
            dof = k if joint.type != "ball" else None
            self.urdf_joint(self.fresh(f"{joint.name}_{k}"), urdf_type, parent, child, origin, axis,
                            joint, dof)
            parent, origin = child, np.eye(4)

    def screw(self, joint, parent, end):
        link = self.fresh(f"{joint.name}_link0")
        etree.SubElement(self.robot, "link", name=link)
        self.urdf_joint(joint.name, "revolute", parent, link, joint.origin, joint.axis, joint, 0)
        el = self.urdf_joint(self.fresh(f"{joint.name}_pitch"), "prismatic", link, end,
                             np.eye(4), joint.axis, None, None)
        etree.SubElement(el, "mimic", joint=joint.name, multiplier=_num(joint.pitch / (2 * math.pi)),
                         offset="0")
        el.addprevious(etree.Comment(f" screw joint {_clean(joint.name)}: translation follows the "
                                     "rotation through <mimic> "))

    def urdf_joint(self, name, urdf_type, parent, child, origin, axis, joint, dof):
        """Write one URDF joint; limits and dynamics from DOF `dof` of `joint` (if any)."""
        lower, upper, effort, velocity, damping, friction = _dof_values(joint, dof)
        if urdf_type == "revolute" and not (np.isfinite(lower) or np.isfinite(upper)):
            urdf_type = "continuous"
        el = etree.SubElement(self.robot, "joint", name=name, type=urdf_type)
        _origin(el, origin)
        etree.SubElement(el, "parent", link=parent)
        etree.SubElement(el, "child", link=child)
        if urdf_type in ("revolute", "continuous", "prismatic"):
            etree.SubElement(el, "axis", xyz=_nums(axis))
            limit = {}
            if urdf_type != "continuous":
                limit["lower"] = _num(max(lower, -UNLIMITED))
                limit["upper"] = _num(min(upper, UNLIMITED))
            if urdf_type != "continuous" or np.isfinite(effort) or np.isfinite(velocity):
                limit["effort"] = _num(min(effort, UNLIMITED))
                limit["velocity"] = _num(min(velocity, UNLIMITED))
            if limit:
                etree.SubElement(el, "limit", **limit)
            if damping or friction:
                etree.SubElement(el, "dynamics", damping=_num(damping), friction=_num(friction))
        return el

    def fixed_frame(self, name, link, pose):
        if name in self.names:
            self.robot.append(etree.Comment(f" frame {_clean(name)} on {_clean(link)} not written: "
                                            "a link or joint already has that name "))
            return
        self.names.add(name)
        etree.SubElement(self.robot, "link", name=name)
        self.urdf_joint(self.fresh(f"{name}_joint"), "fixed", link, name, pose, None, None, None)


_NATIVE = {"fixed": "fixed", "revolute": "revolute", "prismatic": "prismatic", "free": "floating"}


def _chain_steps(joint):
    """[(urdf type, axis in the moving frame)] for a multi-DOF joint written as a chain."""
    e = np.eye(3)
    if joint.type == "universal":
        return [("revolute", joint.axis), ("revolute", joint.axis2)]
    if joint.type == "euler":
        return [("revolute", e["xyz".index(c)]) for c in joint.euler_order]
    if joint.type == "ball":
        return [("revolute", e[k]) for k in range(3)]
    if joint.type == "translational":
        return [("prismatic", e[k]) for k in range(3)]
    if joint.type == "planar":
        x, y = joint.plane_axes()
        return [("prismatic", x), ("prismatic", y), ("revolute", joint.axis)]
    raise ModelError(f"joint {joint.name!r}: cannot write type {joint.type!r} to URDF")


def _dof_values(joint, dof):
    if joint is None or dof is None:
        return -np.inf, np.inf, np.inf, np.inf, 0.0, 0.0
    return (joint.lower[dof], joint.upper[dof], joint.effort_limit[dof], joint.velocity_limit[dof],
            joint.damping[dof], joint.friction[dof])


def _origin(el, T):
    etree.SubElement(el, "origin", xyz=_nums(T[:3, 3]), rpy=_nums(matrix_to_rpy(T[:3, :3])))


def _mesh_uri(path):
    if "://" in path:
        return path
    return "file://" + urllib.parse.quote(os.path.abspath(path))


# -- generated meshes (capsule and cone, only with mesh_dir) -------------------------------
def _revolve(profile, segments=24):
    """Surface of revolution about z of a (r, z) profile from bottom to top pole."""
    angles = np.linspace(0, 2 * np.pi, segments, endpoint=False)
    vertices, rings = [], []
    for r, z in profile:
        start = len(vertices)
        if r == 0:
            vertices.append((0.0, 0.0, z))
            rings.append([start] * segments)
        else:
            vertices += [(r * np.cos(a), r * np.sin(a), z) for a in angles]
            rings.append(list(range(start, start + segments)))
    faces = []
    for lo, hi in zip(rings[:-1], rings[1:]):
        for k in range(segments):
            a, b, c, d = lo[k], lo[(k + 1) % segments], hi[(k + 1) % segments], hi[k]
            faces += [t for t in ((a, b, c), (a, c, d)) if len(set(t)) == 3]
    return np.array(vertices, dtype=float), np.array(faces, dtype=np.int64)


def capsule_mesh(radius, length, segments=24):
    half = length / 2
    cap = np.linspace(-np.pi / 2, np.pi / 2, 9)
    profile = [(radius * np.cos(t), -half + radius * np.sin(t)) for t in cap[:5]]
    profile += [(radius * np.cos(t), half + radius * np.sin(t)) for t in cap[4:]]
    profile = [(0.0 if abs(r) < 1e-15 else r, z) for r, z in profile]
    return _revolve(profile, segments)


def cone_mesh(radius, length, segments=24):
    """Apex at +length/2, base disk at -length/2 (Shape's convention)."""
    return _revolve([(0.0, -length / 2), (radius, -length / 2), (0.0, length / 2)], segments)
