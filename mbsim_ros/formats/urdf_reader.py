"""URDF in: file -> Model. The writer (Model -> URDF) is urdf_writer.py.

Reading: `load_urdf(path, floating_base=None, package_paths=None)`.
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
- The single root link gets a joint `root_joint` to the world, as Gazebo places a URDF: 'fixed'
  when the root link is named "world" (the file welds the robot to it), else 'free' (the robot
  floats); floating_base=True or False overrides. A link named "world" is an ordinary
  (massless) link, as in Pinocchio. model.report gets ("base", root link, which and why).
- Meshes: `package://pkg/rest` is looked up through ROS (ament_index_python, if importable),
  then `package_paths` ({pkg: dir} or [dirs holding pkg folders]), then upward from the URDF's
  folder: a folder named pkg, a folder holding pkg, or the longest tail of `rest` that exists
  (the bare file name only beside the URDF). Relative paths are relative to the URDF, file://
  URIs are paths. A mesh that cannot be found or read is a warning (model.warnings and
  warnings.warn); the shape keeps mesh_path (the resolved path, else the URI) with no vertices.
- Bad input raises ModelError naming the file, the line and what was expected.
"""
from __future__ import annotations

import math
import os
import urllib.parse
import warnings

import numpy as np
from lxml import etree

from ..model import CoordinateCoupler, Function, Joint, Link, Model, ModelError, Shape, numbers_text
from ..model.transforms import make_transform, rpy_to_matrix
from .meshes import MeshError, load_mesh

UNLIMITED = 1.0e6   # written where URDF needs a finite limit and the Model has none

_URDF_JOINT_TYPES = {"revolute": "revolute", "continuous": "revolute", "prismatic": "prismatic",
                     "fixed": "fixed", "floating": "free", "planar": "planar"}
_AXIS_TYPES = ("revolute", "continuous", "prismatic", "planar")
_GEOMETRIES = ("box", "sphere", "cylinder", "capsule", "mesh")


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
                raise self.error(el, f"missing attribute {name}=\"...\" ({numbers_text(n)})")
            return np.array(default, dtype=float)
        try:
            values = np.array([float(w) for w in text.split()])
        except ValueError:
            raise self.error(el, f"{name}=\"{text}\": expected {numbers_text(n)}") from None
        if values.size != n:
            raise self.error(el, f"{name}=\"{text}\": expected {numbers_text(n)}, got {values.size}")
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


def load_urdf(path, floating_base=None, package_paths=None, text=None) -> Model:
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
    name = unique_name("root_joint", joint_names)
    floats = root != "world" if floating_base is None else bool(floating_base)
    if name != "root_joint" and floats:     # a weld has no coordinates: nobody needs its name
        reader.warn(root_el, f"a joint is already called root_joint; the root's joint is {name!r}")
    model.add_joint(Joint(name, "free" if floats else "fixed", None, root))
    if floating_base is not None:
        why = "as asked"
    elif floats:
        why = "no link named world welds it: the URDF convention, as in Gazebo"
    else:
        why = "a link named world is the world, as in Gazebo"
    model.report.append(("base", root, f"{'floats' if floats else 'is welded to the world'} ({why})"))
    return model.finalize()


def _parse(reader, text=None):
    """The <robot> element; XML errors become ModelError with the file and line."""
    parser = etree.XMLParser(remove_comments=True, remove_pis=True, resolve_entities=False,
                             no_network=True)
    try:
        if text is not None:
            tree = etree.ElementTree(etree.fromstring(text.encode() if isinstance(text, str) else text, parser))
        else:
            with open(reader.path, "rb") as f:      # (bytes: lxml cannot encode a non-UTF-8 file name)
                tree = etree.ElementTree(etree.fromstring(f.read(), parser))
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
    children = [g for g in geometry if isinstance(g.tag, str)]
    kinds = [g for g in children if _local(g) in _GEOMETRIES]
    if not kinds:
        expected = "expected <box>, <sphere>, <cylinder>, <capsule> or <mesh>"
        raise reader.error(children[0], "unknown geometry; " + expected) if children else \
            reader.error(geometry, "empty; " + expected)
    g = kinds[0]
    for other in children:        # urdfdom reads the first shape and ignores the rest
        if other is not g:
            reader.warn(other, f"ignored inside <geometry> (the shape is the <{_local(g)}> on line {g.sourceline})")
    kind = _local(g)
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
    coupler (a constraint row of the solver), as Gazebo's and Pinocchio's mimic joints. A mimic
    that cannot hold (on or of a joint that is not revolute, continuous or prismatic, of a joint
    that does not exist, of itself) is ignored with a note, as urdfdom, robot_state_publisher
    and Gazebo ignore it."""
    one_dof = ("revolute", "continuous", "prismatic")
    by_name = {j.name: j for j in model.joints}
    on_fixed = [(el, name) for el, name, urdf_type, *_ in reader.mimics if urdf_type == "fixed"]
    if on_fixed:        # common in public files (Talos' grippers): one note for them all
        listing = ", ".join(f"{name} (line {el.sourceline})" for el, name in on_fixed)
        reader.warn(on_fixed[0][0], f"{len(on_fixed)} <mimic> on fixed joints ignored (a fixed joint does not "
                                    f"move): {listing}")
    for el, name, urdf_type, leader, multiplier, offset in reader.mimics:
        lead = by_name.get(leader)
        if urdf_type == "fixed":
            continue
        if urdf_type not in one_dof:
            why = f"a {urdf_type} joint does not move as a mimic"
        elif leader == name:
            why = "a joint cannot mimic itself"
        elif lead is None:
            why = f"no joint {leader!r} in this robot"
        elif lead.type not in ("revolute", "prismatic") or lead.nv != 1:
            why = f"joint {leader!r} is {lead.type}, not revolute, continuous or prismatic"
        else:
            model.couplers.append(CoordinateCoupler(f"{name} (mimic)", name, leader,
                                                    Function.linear(multiplier, offset)))
            model.report.append(("joint", name, f"mimics {leader}: q = {multiplier:g} q_{leader} + {offset:g}"))
            continue
        reader.warn(el, f"mimic of joint {leader!r} ignored: {why}")


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


def unique_name(name, taken):
    """`name`, or `name_0`, `name_1`, ... the first not in `taken`."""
    k, candidate = 0, name
    while candidate in taken:
        candidate = f"{name}_{k}"
        k += 1
    return candidate
