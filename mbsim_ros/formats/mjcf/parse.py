"""MJCF text -> a tree of Nodes with <include> expanded, the <compiler> settings, the <default>
classes, and the attribute, number and orientation readers every other part uses.

Messages name the file (an included file by its own name), the line and the element.
"""
from __future__ import annotations

import os
from math import hypot, isfinite, sqrt
from xml.parsers import expat

import numpy as np
from lxml import etree

from ...model import ModelError
from ...model.transforms import axis_angle_rows, axis_angle_to_matrix, quat_rows

# elements <default> classes give attributes to (MuJoCo's mjs default kinds)
DEFAULT_KINDS = ("joint", "geom", "site", "camera", "light", "mesh", "material", "tendon",
                 "equality", "pair", "texture", "hfield", "flex")
ACTUATOR_TAGS = ("general", "motor", "position", "velocity", "intvelocity", "damper", "cylinder",
                 "muscle", "adhesion", "plugin")


EYE3, EYE4 = np.eye(3), np.eye(4)
EYE3.flags.writeable = EYE4.flags.writeable = False     # shared: copy them to get a matrix to fill


def compose(T, pose):
    """T @ pose; EYE4 itself stands for a body's own frame (most elements), so no product."""
    return pose if T is EYE4 else T @ pose


def cross(a, b):
    """np.cross of two 3-vectors (the same products and differences) without its overhead."""
    a0, a1, a2 = a.tolist() if isinstance(a, np.ndarray) else a
    b0, b1, b2 = b.tolist() if isinstance(b, np.ndarray) else b
    return np.array([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0])
_ORIENTATIONS = frozenset(("quat", "axisangle", "euler", "xyaxes", "zaxis"))


class Node:
    """One MJCF element: tag, its own attributes, children, and where it was written."""
    __slots__ = ("tag", "attrib", "children", "file", "line")

    def __init__(self, tag, attrib, file, line):
        self.tag, self.attrib, self.children, self.file, self.line = tag, attrib, [], file, line

    def get(self, name, default=None):
        return self.attrib.get(name, default)

    def each(self, tag):
        return [c for c in self.children if c.tag == tag]

    def describe(self):
        name = self.attrib.get("name")
        return f"<{self.tag} name=\"{name}\">" if name is not None else f"<{self.tag}>"


def parse_file(path, text, notes):
    """The <mujoco> root Node of a file (its text, or None to read it), includes expanded
    (cycles and missing files refused); notes (a list) gets (node, text) for what was read past."""
    includes = []
    root = _read_xml(path, text, notes, includes)
    if root.tag != "mujoco":
        raise ModelError(f"{path}, line {root.line}, <{root.tag}>: the root element must be <mujoco>")
    if includes:                    # (the walk rebuilds every child list: only when there is one)
        _expand_includes(root, os.path.dirname(os.path.abspath(path)), [os.path.abspath(path)], notes)
    return root


def _read_xml(path, text, notes, includes):
    """The file's root Node; includes (a list) gets its <include> Nodes."""
    try:
        if text is None:
            with open(path, "rb") as f:             # (bytes: lxml cannot encode a non-UTF-8 file name)
                text = f.read()
    except OSError as exc:
        raise ModelError(f"{path}: cannot read the file: {exc}") from None
    data = text.encode() if isinstance(text, str) else text
    root = _read_plain_xml(data, os.fspath(path), includes)
    return root if root is not None else _read_lxml(path, data, notes, includes)


class _NotPlain(Exception):
    pass


def _refuse(*_):
    raise _NotPlain


def _read_plain_xml(data, file, includes):
    """The root Node of a document without a DOCTYPE or namespaces, read by expat straight into
    Nodes (no element tree in between: the load's largest single cost); None when the document
    is not such a plain one or expat refuses it, for lxml to read it and word any error. A
    node's line is where its start tag begins (lxml's is where it ends)."""
    parser = expat.ParserCreate(namespace_separator="}")
    stack, roots = [], []

    def start(tag, attrib):
        node = Node(tag, attrib, file, parser.CurrentLineNumber)
        (stack[-1].children if stack else roots).append(node)
        stack.append(node)
        if tag == "include":
            includes.append(node)
    parser.StartElementHandler = start
    parser.EndElementHandler = lambda tag: stack.pop()
    parser.StartDoctypeDeclHandler = parser.StartNamespaceDeclHandler = _refuse
    try:
        parser.Parse(data, True)
    except (expat.ExpatError, _NotPlain):
        del includes[:]
        return None
    finally:
        parser.StartElementHandler = None       # (the handler refers to the parser: no cycle left)
    return roots[0]


def _read_lxml(path, data, notes, includes):
    parser = etree.XMLParser(remove_comments=True, remove_pis=True, resolve_entities=False,
                             no_network=True, huge_tree=True)
    try:
        try:
            el, extra = etree.fromstring(data, parser), None
        except etree.XMLSyntaxError as exc:
            # MuJoCo (tinyxml2) reads the first element and ignores what follows it, such as a
            # stray second </mujoco>: so do we, with a note
            if exc.code != etree.ErrorTypes.ERR_DOCUMENT_END or not exc.lineno:
                raise
            extra = exc.lineno
            lines = data.split(b"\n")
            head = b"\n".join(lines[:extra - 1] + [lines[extra - 1][:exc.offset]])      # offset: 0-based
            el = etree.fromstring(head, parser)
    except etree.XMLSyntaxError as exc:
        line = f", line {exc.lineno}" if exc.lineno else ""
        raise ModelError(f"{path}{line}: not well-formed XML (expected an MJCF <mujoco> document): "
                         f"{exc.msg}") from None
    root = _convert(el, os.fspath(path), includes)
    if extra is not None:
        notes.append((root, f"content after the root element (line {extra}) ignored, as MuJoCo does"))
    return root


def _convert(el, file, includes):
    # dict(items()): the attributes as dict(attrib) has them, faster through lxml
    node = Node(el.tag if isinstance(el.tag, str) else "", dict(el.items()), file, el.sourceline)
    stack = [(el, node)]
    while stack:
        src, dst = stack.pop()
        append = dst.children.append
        for c in src.iterchildren(etree.Element):       # (elements only: no comments or entities)
            tag = c.tag                 # (lxml makes a new string at every .tag)
            n = Node(tag, dict(c.items()), file, c.sourceline)
            if tag == "include":
                includes.append(n)
            append(n)
            if len(c):
                stack.append((c, n))
    return node


def _expand_includes(node, folder, chain, notes):
    """Replace every <include file="..."/> by the children of the included file's root; the
    file name is relative to the top-level model's folder, as MuJoCo reads it."""
    out = []
    for c in node.children:
        if c.tag != "include":
            _expand_includes(c, folder, chain, notes)
            out.append(c)
            continue
        name = c.get("file")
        if not name:
            raise ModelError(f"{c.file}, line {c.line}, <include>: missing attribute file=\"...\"")
        path = name if os.path.isabs(name) else os.path.join(folder, name)
        if not os.path.isfile(path):
            raise ModelError(f"{c.file}, line {c.line}, <include file=\"{name}\">: no such file {path}")
        full = os.path.abspath(path)
        if full in chain:
            raise ModelError(f"{c.file}, line {c.line}, <include file=\"{name}\">: includes itself "
                             f"(through {' -> '.join(os.path.basename(p) for p in chain)})")
        sub = _read_xml(path, None, notes, [])
        if sub.tag != "mujoco":
            raise ModelError(f"{path}, line {sub.line}, <{sub.tag}>: an included file's root must be <mujoco>")
        _expand_includes(sub, folder, chain + [full], notes)
        out.extend(sub.children)
    node.children = out


class Compiler:
    """The <compiler> settings (MuJoCo's defaults where the file says nothing)."""

    def __init__(self):
        self.degree = True
        self.eulerseq = "xyz"
        self.meshdir = ""
        self.texturedir = ""
        self.autolimits = True
        self.inertiafromgeom = "auto"
        self.inertiagrouprange = (0, 5)
        self.boundmass = 0.0
        self.boundinertia = 0.0
        self.balanceinertia = False
        self.settotalmass = -1.0
        self.discardvisual = False


class Reader:
    """Parsing state shared by the parts: the file, compiler settings, default classes, notes."""

    def __init__(self, path):
        self.path = os.fspath(path)
        self.folder = os.path.dirname(os.path.abspath(self.path))
        self.compiler = Compiler()
        self.classes = {}        # class name -> {kind: {attr: value}, "actuator": [(tag, attrs)]}
        self.notes = []          # (node, message) for what is read but not simulated
        self.skipped_geoms = set()   # names of geoms left out (types not simulated)
        self.unbuilt_meshes = set()  # names of meshes a plugin or builtin= makes (not built here)
        self.left_out = set()        # tags of the generators left out (<flexcomp>...): what they name is unknown
        self._parsed = {}        # attribute text -> its finite numbers (classes repeat the same texts)

    # -- messages ----------------------------------------------------------------------
    def error(self, node, expected):
        return ModelError(f"{node.file}, line {node.line}, {node.describe()}: {expected}")

    def note(self, node, message):
        self.notes.append(f"{node.file}, line {node.line}, {node.describe()}: {message}")

    # -- attributes with their default class ------------------------------------------------
    def attrs(self, node, kind, cls):
        """The element's attributes over those its class gives `kind` elements."""
        name = node.attrib.get("class", cls)
        if name not in self.classes:
            raise self.error(node, f"class=\"{name}\" is not a <default> class of this model "
                                   f"(the classes are {', '.join(sorted(self.classes))})")
        base = self.classes[name].get(kind)
        if not base:
            return node.attrib
        merged = dict(base)
        merged.update(node.attrib)
        return merged

    def floats(self, node, attrs, name, n, default=None, nmin=None):
        """n numbers (or nmin..n when nmin is given) from attribute `name`; default when absent."""
        text = attrs.get(name)
        if text is None:
            if default is None:
                raise self.error(node, f"missing attribute {name}=\"...\" ({'a number' if n == 1 else f'{n} numbers'})")
            return np.array(default, dtype=float)
        return np.array(self.numbers(node, attrs, name, n, nmin=nmin))

    def numbers(self, node, attrs, name, n, default=None, nmin=None):
        """floats' numbers as a list of Python floats (for arithmetic before any array is built)."""
        text = attrs.get(name)
        if text is None:
            if default is None:
                raise self.error(node, f"missing attribute {name}=\"...\" ({'a number' if n == 1 else f'{n} numbers'})")
            return [float(x) for x in default]
        values = self._parsed.get(text)
        if values is None:
            try:
                values = tuple(map(float, text.split()))
            except ValueError:
                raise self.error(node, f"{name}=\"{text}\": expected {n} numbers") from None
            if all(map(isfinite, values)):
                self._parsed[text] = values
        if not (nmin or n) <= len(values) <= n:
            want = f"{n}" if nmin is None else f"{nmin} or more" if n > 10 ** 6 else f"{nmin} to {n}"
            raise self.error(node, f"{name}=\"{text}\": expected {want} numbers, got {len(values)}")
        if text not in self._parsed:
            raise self.error(node, f"{name}=\"{text}\": expected finite numbers")
        return list(values)

    def number(self, node, attrs, name, default=None):
        text = attrs.get(name)
        if text is None and default is not None:
            return float(default)
        values = self._parsed.get(text)
        if values is not None and len(values) == 1:         # the usual case: a text read before
            return values[0]
        return self.numbers(node, attrs, name, 1, None if default is None else [default])[0]

    def ints(self, node, attrs, name, default):
        text = attrs.get(name)
        if text is None:
            return default
        try:
            return int(text)
        except ValueError:
            raise self.error(node, f"{name}=\"{text}\": expected an integer") from None

    def choice(self, node, attrs, name, options, default):
        value = attrs.get(name, default)
        if value not in options:
            raise self.error(node, f"{name}=\"{value}\": expected one of {', '.join(options)}")
        return value

    def flag(self, node, attrs, name, default):
        value = attrs.get(name)
        if value is None:
            return default
        if value not in ("true", "false"):
            raise self.error(node, f"{name}=\"{value}\": expected true or false")
        return value == "true"

    def angle(self, value):
        return value * np.pi / 180.0 if self.compiler.degree else value

    # -- poses ---------------------------------------------------------------------------
    def rotation(self, node, attrs):
        if not _ORIENTATIONS.intersection(attrs):
            return EYE3.copy()
        return self._rotation(node, attrs)

    def _rotation(self, node, attrs):
        """The 3x3 rotation of quat (w x y z), axisangle, euler, xyaxes or zaxis (one of them)."""
        return np.array(self._rotation_rows(node, attrs))

    def _rotation_rows(self, node, attrs):
        """_rotation's rows as lists of floats (pose builds its 4x4 from them in one go)."""
        quat, rows = self.orientation(node, attrs)
        if quat is not None:
            w, x, y, z = quat
            return quat_rows((x, y, z, w))
        return rows or [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]

    def orientation(self, node, attrs):
        """(quat, rows): the quaternion (w x y z, as written, not zero) when the orientation is a
        quat (most are: their matrices are computed for a whole model at once), else the rows of
        the rotation of axisangle, euler, xyaxes or zaxis (one of them); (None, None) when none."""
        if _ORIENTATIONS.isdisjoint(attrs):           # (attrs holds the node's own)
            return None, None
        given = _ORIENTATIONS.intersection(node.attrib)
        if len(given) > 1:
            given = [k for k in ("quat", "axisangle", "euler", "xyaxes", "zaxis") if k in given]
            raise self.error(node, f"orientation given twice ({' and '.join(given)}); expected one of "
                                   "quat, axisangle, euler, xyaxes, zaxis")
        if not given:
            given = [k for k in ("quat", "axisangle", "euler", "xyaxes", "zaxis") if k in attrs][:1]
        if not given:
            return None, None
        kind = next(iter(given))
        if kind == "quat":
            quat = self.numbers(node, attrs, "quat", 4)
            if hypot(*quat) < 1e-12:
                raise self.error(node, f"quat=\"{attrs['quat']}\": a zero quaternion; expected w x y z of a rotation")
            return quat, None
        if kind == "axisangle":
            v = self.floats(node, attrs, "axisangle", 4)
            return None, axis_angle_rows(self.unit(node, v[:3], "axisangle"), self.angle(v[3]))
        if kind == "euler":
            return None, self.euler(node, self.floats(node, attrs, "euler", 3)).tolist()
        if kind == "xyaxes":
            v = self.floats(node, attrs, "xyaxes", 6)
            x = self.unit(node, v[:3], "xyaxes")
            y = v[3:] - x * x.dot(v[3:])
            y = self.unit(node, y, "xyaxes (y along x)")
            return None, np.column_stack([x, y, cross(x, y)]).tolist()
        return None, z_to(self.unit(node, self.floats(node, attrs, "zaxis", 3), "zaxis")).tolist()

    def euler(self, node, angles):
        seq = self.compiler.eulerseq
        R = np.eye(3)
        for ch, a in zip(seq, angles):
            axis = np.eye(3)["xyz".index(ch.lower())]
            Ri = axis_angle_to_matrix(axis, self.angle(a))
            R = R @ Ri if ch.islower() else Ri @ R      # lowercase: moving axes, uppercase: fixed
        return R

    def unit_numbers(self, node, attrs, name):
        """Attribute `name`'s three numbers made a unit vector (a tuple of floats)."""
        x, y, z = self.numbers(node, attrs, name, 3)
        n = sqrt(x * x + y * y + z * z)
        if n < 1e-12:
            raise self.error(node, f"{name}: a zero vector; expected a direction")
        return x / n, y / n, z / n

    def unit(self, node, v, what):
        v = np.asarray(v, dtype=float)
        n = sqrt(v.dot(v))                  # what np.linalg.norm computes for a vector, without its overhead
        if n < 1e-12:
            raise self.error(node, f"{what}: a zero vector; expected a direction")
        return v / n

    def pose(self, node, attrs):
        """The 4x4 of pos and the orientation, built in one array from Python floats."""
        if _ORIENTATIONS.isdisjoint(attrs):
            r0, r1, r2 = [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]
        else:
            r0, r1, r2 = self._rotation_rows(node, attrs)
        x, y, z = self.numbers(node, attrs, "pos", 3) if "pos" in attrs else (0.0, 0.0, 0.0)
        return np.array([*r0, x, *r1, y, *r2, z, 0.0, 0.0, 0.0, 1.0]).reshape(4, 4)     # (flat: faster than nested lists)


def z_to(z):
    """MuJoCo's z2quat: the smallest rotation taking (0, 0, 1) to the unit vector z (a half turn
    about x when z points down)."""
    axis = cross([0.0, 0.0, 1.0], z)
    s = np.linalg.norm(axis)
    if s < 1e-10:
        axis = np.array([1.0, 0.0, 0.0])
    else:
        axis = axis / s
    return axis_angle_to_matrix(axis, np.arctan2(s, z[2]))


def read_compiler(r: Reader, root: Node):
    c = r.compiler
    for node in root.each("compiler"):
        a = node.attrib
        c.degree = r.choice(node, a, "angle", ("degree", "radian"), "degree" if c.degree else "radian") == "degree"
        seq = a.get("eulerseq", c.eulerseq)
        if len(seq) != 3 or any(ch not in "xyzXYZ" for ch in seq):
            raise r.error(node, f"eulerseq=\"{seq}\": expected three of x y z X Y Z")
        c.eulerseq = seq
        if "assetdir" in a:
            c.meshdir = c.texturedir = a["assetdir"]
        c.meshdir = a.get("meshdir", c.meshdir)
        c.texturedir = a.get("texturedir", c.texturedir)
        c.autolimits = r.flag(node, a, "autolimits", c.autolimits)
        c.inertiafromgeom = r.choice(node, a, "inertiafromgeom", ("auto", "true", "false"), c.inertiafromgeom)
        c.inertiagrouprange = tuple(int(x) for x in r.floats(node, a, "inertiagrouprange", 2, c.inertiagrouprange))
        c.boundmass = r.number(node, a, "boundmass", c.boundmass)
        c.boundinertia = r.number(node, a, "boundinertia", c.boundinertia)
        c.balanceinertia = r.flag(node, a, "balanceinertia", c.balanceinertia)
        c.settotalmass = r.number(node, a, "settotalmass", c.settotalmass)
        c.discardvisual = r.flag(node, a, "discardvisual", c.discardvisual)
        for key in ("fusestatic", "alignfree", "usethread", "saveinertial", "exactmeshinertia"):
            if a.get(key) == "true":
                r.note(node, f"{key}=\"true\" is not used (the model keeps every body as written)")


def read_defaults(r: Reader, root: Node):
    """Every <default> class: its kinds' attributes over its parent's. The top level is "main"."""
    r.classes["main"] = {"actuator": []}
    for node in root.each("default"):
        _read_default_class(r, node, r.classes["main"], top=True)


def _read_default_class(r, node, parent, top=False):
    name = node.get("class", "main" if top else None)
    if name is None:
        raise r.error(node, "a nested <default> needs class=\"...\"")
    if top and name == "main":
        cls = parent
    else:
        if name in r.classes:
            raise r.error(node, f"default class \"{name}\" is defined twice")
        cls = {k: dict(v) for k, v in parent.items() if k != "actuator"}
        cls["actuator"] = list(parent["actuator"])
        r.classes[name] = cls
    for c in node.children:        # a nested class inherits all of this one's, in any order
        if c.tag == "default":
            continue
        if c.tag in DEFAULT_KINDS:
            cls.setdefault(c.tag, {}).update(c.attrib)
        elif c.tag in ACTUATOR_TAGS:
            cls["actuator"].append((c.tag, c.attrib, c))
        else:
            r.note(c, f"unknown element in <default class=\"{name}\">: ignored")
    for c in node.each("default"):
        _read_default_class(r, c, cls)
