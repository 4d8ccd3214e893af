"""A VRML97 parser: file text -> a tree of Nodes. Pure syntax; it knows nothing of OpenHRP.

What it reads (ISO/IEC 14772-1, as real robot files use it): an optional `#VRML V2.0` header,
`#` comments, commas as white space, CRLF line ends, bytes that are not UTF-8 (Shift-JIS
comments); DEF/USE (USE returns the very same Node, so sharing is kept); PROTO declarations
with field/exposedField/eventIn/eventOut and IS; EXTERNPROTO, Script and ROUTE are skipped
with a note; MF values bracketed or as one bare value, trailing commas allowed; `Inline`
urls are parsed relative to the including file, each file once, with cycle detection.

Values are typed by the node's field table (the standard nodes this project reads, or the
PROTO interface): SFFloat -> float, SFInt32 -> int, SFBool -> bool, SFString -> str,
SFVec2f/SFVec3f/SFColor/SFRotation -> float arrays, MF numeric fields -> arrays of shape
(n, k), MFString -> list of str, SFNode -> Node or None, MFNode -> list of Nodes. Fields of
other standard nodes (Background, Viewpoint, ...) are read by their syntax alone.

The parser keeps its own stack of open nodes instead of recursing, so nesting depth is not
bounded by Python's recursion limit but by MAX_NESTING (10000 levels). Every error is a ModelError that starts
with "file:line:" and says what was expected.
"""
from __future__ import annotations

import bisect
import math
import os
import re

import numpy as np

from ..model.errors import ModelError
from ..model.transforms import axis_angle_to_matrix, make_transform

# -- tokens ----------------------------------------------------------------------------
_TOKEN_RE = re.compile(r"""
    (?P<skip>(?:[\s,]+|\#[^\n\r]*)+)
  | (?P<str>"(?:[^"\\]|\\.)*")
  | (?P<num>[+-]?(?:0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?))
  | (?P<punct>[{}\[\].])
  | (?P<id>[^\x00-\x20"\#',.\[\]\\{}\x7f+\-0-9][^\x00-\x20"\#',.\[\]\\{}\x7f]*)
  | (?P<bad>.)
""", re.X | re.S)

# -- field tables of the standard nodes whose fields the loaders read ---------------------
_BBOX = {"bboxCenter": "SFVec3f", "bboxSize": "SFVec3f"}
_GROUPING = {"children": "MFNode", "addChildren": "MFNode", "removeChildren": "MFNode", **_BBOX}
FIELD_TYPES = {
    "Transform": {**_GROUPING, "center": "SFVec3f", "rotation": "SFRotation", "scale": "SFVec3f",
                  "scaleOrientation": "SFRotation", "translation": "SFVec3f"},
    "Group": dict(_GROUPING),
    "Billboard": {**_GROUPING, "axisOfRotation": "SFVec3f"},
    "Collision": {**_GROUPING, "collide": "SFBool", "proxy": "SFNode"},
    "Anchor": {**_GROUPING, "description": "SFString", "parameter": "MFString", "url": "MFString"},
    "Switch": {"choice": "MFNode", "whichChoice": "SFInt32"},
    "LOD": {"level": "MFNode", "center": "SFVec3f", "range": "MFFloat"},
    "Inline": {"url": "MFString", **_BBOX},
    "Shape": {"appearance": "SFNode", "geometry": "SFNode"},
    "Appearance": {"material": "SFNode", "texture": "SFNode", "textureTransform": "SFNode"},
    "Material": {"ambientIntensity": "SFFloat", "diffuseColor": "SFColor", "emissiveColor": "SFColor",
                 "shininess": "SFFloat", "specularColor": "SFColor", "transparency": "SFFloat"},
    "Box": {"size": "SFVec3f"},
    "Sphere": {"radius": "SFFloat"},
    "Cylinder": {"bottom": "SFBool", "height": "SFFloat", "radius": "SFFloat", "side": "SFBool",
                 "top": "SFBool"},
    "Cone": {"bottomRadius": "SFFloat", "height": "SFFloat", "side": "SFBool", "bottom": "SFBool"},
    "IndexedFaceSet": {"color": "SFNode", "coord": "SFNode", "normal": "SFNode", "texCoord": "SFNode",
                       "ccw": "SFBool", "colorIndex": "MFInt32", "colorPerVertex": "SFBool",
                       "convex": "SFBool", "coordIndex": "MFInt32", "creaseAngle": "SFFloat",
                       "normalIndex": "MFInt32", "normalPerVertex": "SFBool", "solid": "SFBool",
                       "texCoordIndex": "MFInt32"},
    "IndexedLineSet": {"color": "SFNode", "coord": "SFNode", "colorIndex": "MFInt32",
                       "colorPerVertex": "SFBool", "coordIndex": "MFInt32"},
    "PointSet": {"color": "SFNode", "coord": "SFNode"},
    "ElevationGrid": {"color": "SFNode", "normal": "SFNode", "texCoord": "SFNode", "height": "MFFloat",
                      "ccw": "SFBool", "colorPerVertex": "SFBool", "creaseAngle": "SFFloat",
                      "normalPerVertex": "SFBool", "solid": "SFBool", "xDimension": "SFInt32",
                      "xSpacing": "SFFloat", "zDimension": "SFInt32", "zSpacing": "SFFloat"},
    "Extrusion": {"beginCap": "SFBool", "ccw": "SFBool", "convex": "SFBool", "creaseAngle": "SFFloat",
                  "crossSection": "MFVec2f", "endCap": "SFBool", "orientation": "MFRotation",
                  "scale": "MFVec2f", "solid": "SFBool", "spine": "MFVec3f"},
    "Coordinate": {"point": "MFVec3f"},
    "Color": {"color": "MFColor"},
    "Normal": {"vector": "MFVec3f"},
    "TextureCoordinate": {"point": "MFVec2f"},
    "ImageTexture": {"url": "MFString", "repeatS": "SFBool", "repeatT": "SFBool"},
    "TextureTransform": {"center": "SFVec2f", "rotation": "SFFloat", "scale": "SFVec2f",
                         "translation": "SFVec2f"},
}
# The other VRML97 standard nodes: parsed by syntax alone (they carry no robot data).
STANDARD_NODES = set(FIELD_TYPES) | {
    "AudioClip", "Background", "ColorInterpolator", "CoordinateInterpolator", "CylinderSensor",
    "DirectionalLight", "Fog", "FontStyle", "MovieTexture", "NavigationInfo", "NormalInterpolator",
    "OrientationInterpolator", "PixelTexture", "PlaneSensor", "PointLight", "PositionInterpolator",
    "ProximitySensor", "ScalarInterpolator", "Script", "Sound", "SphereSensor", "SpotLight", "Text",
    "TimeSensor", "TouchSensor", "Viewpoint", "VisibilitySensor", "WorldInfo"}

# numbers per element of each numeric field type
_WIDTH = {"SFFloat": 1, "SFTime": 1, "SFInt32": 1, "SFVec2f": 2, "SFVec3f": 3, "SFColor": 3,
          "SFRotation": 4}
_EXPECTED = {"SFFloat": "a number", "SFTime": "a number", "SFInt32": "an integer",
             "SFVec2f": "2 numbers", "SFVec3f": "3 numbers", "SFColor": "3 numbers (r g b)",
             "SFRotation": "4 numbers (axis x y z, angle)", "SFBool": "TRUE or FALSE",
             "SFString": 'a "quoted string"', "SFNode": "a node, USE name or NULL",
             "SFImage": "width height components pixels..."}
FIELD_KINDS = ("field", "exposedField", "eventIn", "eventOut")
_MAX_PROTO_NESTING = 50     # PROTO declarations inside PROTO bodies (each level recurses once)
# Nodes inside nodes. Real models nest a few dozen levels; XML parsers refuse far less (libxml2,
# which reads our XML formats: 2048; tinyxml2, MuJoCo's: 500). Past this a file is an attack
# or a generator's bug, and each level costs time in every pass over the scene.
MAX_NESTING = 10000


class Node:
    """One VRML node. `type` is the node type or PROTO name; `fields` maps field names to
    values (PROTO instances start with the interface defaults); `name` is the DEF name or "";
    `proto` the Proto for a PROTO instance; `inlined` the root nodes an Inline loaded."""
    __slots__ = ("type", "fields", "name", "file", "line", "proto", "inlined")

    def __init__(self, type, fields=None, name="", file="", line=0, proto=None):
        self.type = type
        self.fields = {} if fields is None else fields
        self.name = name
        self.file = file
        self.line = line
        self.proto = proto
        self.inlined = None

    def get(self, field, default=None):
        value = self.fields.get(field, default)
        return default if value is None or isinstance(value, IsRef) else value

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    def __repr__(self):
        name = f"DEF {self.name} " if self.name else ""
        return f"<{name}{self.type} at {self.where}>"


class IsRef:
    """`field IS name` inside a PROTO body: replaced by the instance's value on expansion."""
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name


class Proto:
    """A PROTO (or EXTERNPROTO) declaration: interface field types and defaults, and body."""

    def __init__(self, name, file, line):
        self.name = name
        self.file = file
        self.line = line
        self.field_types = {}      # name -> VRML type, e.g. "SFVec3f"
        self.field_kinds = {}      # name -> field | exposedField | eventIn | eventOut
        self.defaults = {}         # name -> value (field and exposedField only)
        self.body = None           # list of template nodes; None for an EXTERNPROTO
        self.external = False


class Scene:
    """A parsed file: its root nodes, its PROTOs, the notes about what was skipped, and all
    files read (the file itself first, then its Inlines)."""

    def __init__(self, path, roots, protos, notes, files):
        self.path = path
        self.roots = roots
        self.protos = protos
        self.notes = notes
        self.files = files

    def walk(self):
        """Every node reachable from the roots (through fields and Inlines), each once, with no
        recursion; PROTO instances are listed as such, not expanded."""
        seen, stack, out = set(), list(reversed(self.roots)), []
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            out.append(node)
            children = []
            for value in node.fields.values():
                if isinstance(value, Node):
                    children.append(value)
                elif isinstance(value, list):
                    children.extend(v for v in value if isinstance(v, Node))
            children.extend(node.inlined or ())
            stack.extend(reversed(children))
        return out


# -- public entry points ---------------------------------------------------------------------
def parse_file(path) -> Scene:
    """Parse a .wrl file and the files it Inlines."""
    loader = _Loader()
    path = os.path.abspath(os.fspath(path))
    roots = loader.load(path, include_chain=(), where=None)
    parser = loader.parsers[path]
    return Scene(path, roots, parser.protos, loader.notes, list(loader.parsers))


def parse_string(text: str, path: str = "<string>") -> Scene:
    """Parse VRML text; Inline urls resolve relative to `path`'s folder."""
    loader = _Loader()
    parser = _Parser(text, path, loader, include_chain=(path,))
    roots = parser.parse()
    return Scene(path, roots, parser.protos, loader.notes, [path] + list(loader.parsers))


def decode(data: bytes) -> str:
    """UTF-8 as the header says; real files also hold Shift-JIS comments, so fall back to
    Shift-JIS and finally to UTF-8 with replacement characters: harmless in comments (dropped),
    a ModelError naming the line anywhere else (the tokenizer checks)."""
    for encoding in ("utf-8", "shift_jis"):
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            pass
    return data.decode("utf-8", errors="replace")


def instantiate(node: Node) -> list:
    """The body of a PROTO instance with every IS replaced by the instance's value: the
    nodes a browser would show. A node that is not a PROTO instance is returned alone."""
    proto = node.proto
    if proto is None:
        return [node]
    if proto.body is None:
        return []
    copies = {}
    pending = []            # templates whose copies still lack their fields: no recursion, so a
                            # body nested 100000 deep copies as a flat one does

    def shell(template):
        new = copies.get(id(template))
        if new is None:
            new = Node(template.type, {}, template.name, template.file, template.line, template.proto)
            new.inlined = template.inlined
            copies[id(template)] = new
            pending.append(template)
        return new

    def substitute(value):
        if isinstance(value, IsRef):
            return node.fields.get(value.name)
        if isinstance(value, Node):
            return shell(value)
        if isinstance(value, list) and value and isinstance(value[0], (Node, IsRef)):
            return [substitute(v) for v in value]
        return value

    out = [shell(t) for t in proto.body]
    while pending:
        template = pending.pop()
        new = copies[id(template)]
        for key, value in template.fields.items():
            new.fields[key] = substitute(value)
    return out


def rotation_matrix(rotation, where: str = "") -> np.ndarray:
    """SFRotation (x y z angle) -> 3x3 matrix; the axis is normalised, a zero axis is an error."""
    r = np.asarray(rotation, dtype=float).reshape(-1)
    axis, angle = r[:3], r[3]
    n = np.linalg.norm(axis)
    if not np.isfinite(n) or n < 1e-12:
        raise ModelError(f"{where}: rotation {r.tolist()}: expected a non-zero rotation axis")
    return axis_angle_to_matrix(axis / n, angle)


_TRANSFORM_FIELDS = frozenset(("translation", "center", "rotation", "scale", "scaleOrientation"))


def transform_matrix(node: Node):
    """A Transform's 4x4 matrix: T * C * R * SR * S * SR^-1 * C^-1 (VRML97 6.52); None for a
    Transform that only groups (most of them in real files: no matrix made or multiplied)."""
    if node.fields.keys().isdisjoint(_TRANSFORM_FIELDS):
        return None
    mat = make_transform
    where = node.where
    t = np.asarray(node.get("translation", (0, 0, 0)), dtype=float)
    c = np.asarray(node.get("center", (0, 0, 0)), dtype=float)
    R = rotation_matrix(node.get("rotation", (0, 0, 1, 0)), where + ": rotation")
    M = mat(R, t + c)
    scale = np.asarray(node.get("scale", (1, 1, 1)), dtype=float)
    if not np.allclose(scale, 1.0):
        SR = rotation_matrix(node.get("scaleOrientation", (0, 0, 1, 0)), where + ": scaleOrientation")
        M = M @ mat(SR) @ mat(np.diag(scale)) @ mat(SR.T)
    if np.any(c):
        M = M @ mat(p=-c)
    return M


# -- loading files and Inlines ---------------------------------------------------------------
class _Loader:
    """State shared by the parsers of one load: files parsed so far and notes."""

    def __init__(self):
        self.parsers = {}          # absolute path -> its _Parser (each file parsed once)
        self.roots = {}            # absolute path -> its root nodes
        self.notes = []

    def note(self, text):
        if text not in self.notes:
            self.notes.append(text)

    def load(self, path, include_chain, where):
        if path in include_chain:
            cycle = " -> ".join(os.path.basename(p) for p in include_chain + (path,))
            raise ModelError(f"{where}: Inline {os.path.basename(path)!r} includes itself "
                             f"(cycle: {cycle}); expected a file that does not Inline its includer")
        if path in self.roots:
            return self.roots[path]
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            prefix = f"{where}: Inline url" if where else "VRML file"
            raise ModelError(f"{prefix} {path}: cannot be read ({e.strerror}); expected an existing "
                             f".wrl file") from None
        parser = _Parser(decode(data), path, self, include_chain + (path,))
        self.parsers[path] = parser
        self.roots[path] = parser.parse()
        return self.roots[path]


class _Frame:
    """A node being parsed: the node, its field table, the open MFNode list if any, and how
    to hand the node to its parent when it closes."""
    __slots__ = ("node", "types", "mf_name", "mf_list", "deliver", "field")

    def __init__(self, node, types):
        self.node = node
        self.types = types
        self.mf_name = None
        self.mf_list = None
        self.deliver = None        # "sf": parent.fields[field] = node; "mf": into parent's open list
        self.field = None


class _Parser:
    def __init__(self, text, path, loader, include_chain):
        self.path = path
        self.loader = loader
        self.include_chain = include_chain
        self.protos = {}
        self.defs = {}
        self.proto_depth = 0       # >0 while parsing a PROTO body (templates: no Inline loading)
        self.nesting = 0           # nodes open around the cursor (PROTO bodies inside nodes too)
        self.counts = {}
        self._newlines = [m.start() for m in re.finditer("\n", text)]
        self.kinds, self.texts, self.pos = self._tokenize(text)
        self.i = 0
        if text.startswith("#VRML V1.0"):
            raise ModelError(f"{path}:1: VRML 1.0 file; expected VRML97 ('#VRML V2.0 utf8')")

    # -- tokens
    def _tokenize(self, text):
        kinds, texts, pos = [], [], []
        for m in _TOKEN_RE.finditer(text):
            kind = m.lastgroup
            if kind == "skip":
                continue
            if kind == "bad":
                what = "an unterminated string" if m.group() == '"' else repr(m.group())
                raise ModelError(f"{self.path}:{self.line_of(m.start())}: unexpected {what}; "
                                 "expected a VRML token")
            if "\ufffd" in m.group():
                raise ModelError(f"{self.path}:{self.line_of(m.start())}: bytes that are neither UTF-8 nor Shift-JIS "
                                 f"in {m.group()!r}; expected VRML97 text in UTF-8")
            kinds.append(kind)
            texts.append(m.group())
            pos.append(m.start())
        for _ in range(3):             # sentinels: look-ahead never runs off the end
            kinds.append("eof")
            texts.append("")
            pos.append(len(text))
        return kinds, texts, pos

    def line_of(self, offset):
        return bisect.bisect_right(self._newlines, offset - 1) + 1

    def here(self, i=None):
        return f"{self.path}:{self.line_of(self.pos[self.i if i is None else i])}"

    def error(self, message, i=None):
        return ModelError(f"{self.here(i)}: {message}")

    def _describe(self, i):
        kind, text = self.kinds[i], self.texts[i]
        return "end of file" if kind == "eof" else repr(text)

    def expect(self, text, context):
        if self.texts[self.i] != text or self.kinds[self.i] not in ("punct",):
            raise self.error(f"expected '{text}' {context}, got {self._describe(self.i)}")
        self.i += 1

    def expect_id(self, context):
        if self.kinds[self.i] != "id":
            raise self.error(f"expected {context}, got {self._describe(self.i)}")
        self.i += 1
        return self.texts[self.i - 1]

    def count(self, what):
        self.counts[what] = self.counts.get(what, 0) + 1

    # -- statements
    def parse(self):
        roots = self._statements(top=True)
        for what, n in sorted(self.counts.items()):
            self.loader.note(f"{self.path}: skipped {n} {what} (not simulated)")
        return roots

    def _statements(self, top):
        """Nodes, PROTO/EXTERNPROTO declarations and ROUTEs up to end of file (top) or '}'."""
        nodes = []
        while True:
            kind, text = self.kinds[self.i], self.texts[self.i]
            if kind == "eof":
                if not top:
                    raise self.error("unexpected end of file: expected '}' to close the PROTO body")
                return nodes
            if kind == "punct" and text == "}" and not top:
                return nodes
            if kind == "punct":
                raise self.error(f"unexpected {text!r}: expected a node, PROTO or ROUTE"
                                 + (" (unbalanced brackets)" if text in "}]" else ""))
            if self._declaration():
                continue
            node = self._node_statement("a node")
            if node is not None:
                nodes.append(node)

    def _declaration(self):
        """PROTO, EXTERNPROTO or ROUTE at the cursor: handle it and say so."""
        text = self.texts[self.i] if self.kinds[self.i] == "id" else None
        if text == "PROTO":
            self._proto()
        elif text == "EXTERNPROTO":
            self._externproto()
        elif text == "ROUTE":
            self._route()
        else:
            return False
        return True

    def _route(self):
        start = self.i
        self.i += 1
        for part in ("node name", ".", "eventOut name", "TO", "node name", ".", "eventIn name"):
            if part in (".", "TO"):
                if self.texts[self.i] != part:
                    raise self.error(f"ROUTE: expected {part!r}, got {self._describe(self.i)}")
                self.i += 1
            else:
                self.expect_id(f"ROUTE {part}")
        self.count("ROUTE statements")
        return start

    def _proto(self):
        line_i = self.i
        self.i += 1
        name = self.expect_id("a PROTO name")
        proto = Proto(name, self.path, self.line_of(self.pos[line_i]))
        self.expect("[", f"to open the interface of PROTO {name}")
        while not (self.kinds[self.i] == "punct" and self.texts[self.i] == "]"):
            kind = self.expect_id(f"']' or a field declaration ({', '.join(FIELD_KINDS)}) in PROTO {name}")
            if kind not in FIELD_KINDS:
                raise self.error(f"PROTO {name}: expected one of {', '.join(FIELD_KINDS)}, got {kind!r}",
                                 self.i - 1)
            ftype = self.expect_id(f"a field type in PROTO {name}")
            if not _known_type(ftype):
                raise self.error(f"PROTO {name}: unknown field type {ftype!r}; expected SF.../MF... "
                                 "VRML97 types", self.i - 1)
            fname = self.expect_id(f"a field name in PROTO {name}")
            proto.field_types[fname] = ftype
            proto.field_kinds[fname] = kind
            if kind in ("field", "exposedField"):
                proto.defaults[fname] = self._value(ftype, f"PROTO {name} field {fname!r}")
        self.i += 1
        self.expect("{", f"to open the body of PROTO {name}")
        if self.proto_depth >= _MAX_PROTO_NESTING:
            raise self.error(f"PROTO declarations nested more than {_MAX_PROTO_NESTING} deep")
        saved = self.defs, dict(self.protos)
        self.defs = {}
        self.proto_depth += 1
        self.protos[name] = proto          # a body may not use its own PROTO, but may name it
        try:
            proto.body = self._statements(top=False)
        finally:
            self.proto_depth -= 1
            self.defs, self.protos = saved
        self.expect("}", f"to close the body of PROTO {name}")
        self.protos[name] = proto

    def _externproto(self):
        line_i = self.i
        self.i += 1
        name = self.expect_id("an EXTERNPROTO name")
        proto = Proto(name, self.path, self.line_of(self.pos[line_i]))
        proto.external = True
        self.expect("[", f"to open the interface of EXTERNPROTO {name}")
        while not (self.kinds[self.i] == "punct" and self.texts[self.i] == "]"):
            kind = self.expect_id(f"']' or a field declaration in EXTERNPROTO {name}")
            if kind not in FIELD_KINDS:
                raise self.error(f"EXTERNPROTO {name}: expected one of {', '.join(FIELD_KINDS)}, "
                                 f"got {kind!r}", self.i - 1)
            ftype = self.expect_id("a field type")
            fname = self.expect_id("a field name")
            proto.field_types[fname] = ftype
            proto.field_kinds[fname] = kind
        self.i += 1
        self._value("MFString", f"EXTERNPROTO {name} url")
        self.protos[name] = proto
        self.count("EXTERNPROTO declarations (their instances have no body)")

    # -- nodes
    def _node_statement(self, expected):
        """A whole node (DEF name Type {...}, Type {...}, USE name or NULL) at the cursor."""
        start = self._node_start(expected)
        if not isinstance(start, _Frame):
            return start
        return self._finish(start)

    def _node_start(self, expected):
        """Parse the head of a node. Returns a Node (USE), None (NULL), or an open _Frame."""
        kind, text = self.kinds[self.i], self.texts[self.i]
        if kind != "id":
            raise self.error(f"expected {expected}, got {self._describe(self.i)}")
        if text == "NULL":
            self.i += 1
            return None
        if text == "USE":
            self.i += 1
            name = self.expect_id("a DEF name after USE")
            if name not in self.defs:
                raise self.error(f"USE {name}: no node was DEF'd with that name before; expected "
                                 "a DEF name defined earlier in this file" + (" or PROTO body" if self.proto_depth else ""),
                                 self.i - 1)
            return self.defs[name]
        def_name = ""
        if text == "DEF":
            self.i += 1
            def_name = self.expect_id("a name after DEF")
            kind, text = self.kinds[self.i], self.texts[self.i]
            if kind != "id":
                raise self.error(f"expected a node type after DEF {def_name}, got {self._describe(self.i)}")
        type_i = self.i
        self.i += 1
        line = self.line_of(self.pos[type_i])
        if text in self.protos:
            proto = self.protos[text]
            node = Node(text, dict(proto.defaults), def_name, self.path, line, proto)
            types = proto.field_types
        elif text in STANDARD_NODES:
            node = Node(text, {}, def_name, self.path, line)
            types = FIELD_TYPES.get(text)
        else:
            raise self.error(f"unknown node type {text!r}: expected a VRML97 node or a PROTO declared "
                             "before its use", type_i)
        self.expect("{", f"after node type {text}")
        if text == "Script":
            self._skip_body(type_i)
            self.count("Script nodes")
            return self._close(_Frame(node, None))
        return _Frame(node, types)

    def _skip_body(self, open_i):
        depth = 1
        while depth:
            kind, text = self.kinds[self.i], self.texts[self.i]
            if kind == "eof":
                raise self.error("unexpected end of file: expected '}' to close the node opened at "
                                 f"line {self.line_of(self.pos[open_i])}")
            if kind == "punct" and text in "{[":
                depth += 1
            elif kind == "punct" and text in "}]":
                depth -= 1
            self.i += 1

    def _close(self, frame):
        node = frame.node
        if node.name:
            self.defs[node.name] = node    # after the body: a node cannot USE itself
        if node.type == "Inline" and not self.proto_depth:
            self._load_inline(node)
        return node

    def _finish(self, root):
        """Parse the bodies of `root` and every node nested in it, with an explicit stack."""
        stack = [root]
        self._open(root)
        while True:
            frame = stack[-1]
            kind, text = self.kinds[self.i], self.texts[self.i]
            if kind == "eof":
                node = frame.node
                what = f"']' to close field {frame.mf_name!r} of" if frame.mf_name else "'}' to close"
                raise self.error(f"unexpected end of file: expected {what} {node.type} opened at line "
                                 f"{node.line} (unbalanced brackets)")
            if frame.mf_name is not None:                  # inside the [ ] of an MFNode field
                if kind == "punct" and text == "]":
                    self.i += 1
                    frame.node.fields[frame.mf_name] = frame.mf_list
                    frame.mf_name = frame.mf_list = None
                    continue
                if self._declaration():
                    continue
                child = self._node_start(f"a node or ']' in field {frame.mf_name!r} of {frame.node.type}")
                if isinstance(child, _Frame):
                    child.deliver = "mf"
                    stack.append(child)
                    self._open(child)
                elif child is not None:
                    frame.mf_list.append(child)
                continue
            if kind == "punct" and text == "}":
                self.i += 1
                stack.pop()
                self.nesting -= 1
                node = self._close(frame)
                if not stack:
                    return node
                parent = stack[-1]
                if frame.deliver == "mf":
                    parent.mf_list.append(node)
                else:
                    parent.node.fields[frame.field] = node if frame.deliver == "sf" else [node]
                continue
            if self._declaration():
                continue
            child = self._field(frame)
            if child is not None:
                stack.append(child)
                self._open(child)

    def _open(self, frame):
        """Count a node whose body is about to be parsed; refuse one nested too deep."""
        self.nesting += 1
        if self.nesting > MAX_NESTING:
            node = frame.node
            raise ModelError(f"{node.where}: {node.type} nested {self.nesting} nodes deep; expected at most "
                             f"{MAX_NESTING} levels (real models nest a few dozen)")

    def _field(self, frame):
        """One `name value` inside a node body. Returns a child _Frame when the value is a node
        whose body is still to be parsed."""
        node = frame.node
        fname = self.expect_id(f"a field name or '}}' in {node.type} (opened at line {node.line})")
        types = frame.types
        if types is not None and fname not in types and not (self.proto_depth and self.texts[self.i] == "IS"):
            expected = ", ".join(sorted(types)) or "no fields"
            raise self.error(f"{node.type} has no field {fname!r}; expected one of: {expected}", self.i - 1)
        if self.kinds[self.i] == "id" and self.texts[self.i] == "IS":
            if not self.proto_depth:
                raise self.error("IS is only allowed inside a PROTO body")
            self.i += 1
            node.fields[fname] = IsRef(self.expect_id("a PROTO field name after IS"))
            return None
        ftype = types.get(fname) if types is not None else self._guess_type()
        if ftype not in ("SFNode", "MFNode"):
            node.fields[fname] = self._value(ftype, f"field {fname!r} of {node.type}")
            return None
        what = f"field {fname!r} of {node.type}"
        if ftype == "MFNode" and self.kinds[self.i] == "punct" and self.texts[self.i] == "[":
            self.i += 1
            frame.mf_name, frame.mf_list = fname, []
            return None
        child = self._node_start(f"{_EXPECTED['SFNode']} for {what}" if ftype == "SFNode"
                                 else f"'[' or a node for {what}")
        if isinstance(child, _Frame):
            child.deliver, child.field = ("sf" if ftype == "SFNode" else "mf1"), fname
            return child
        node.fields[fname] = child if ftype == "SFNode" else ([] if child is None else [child])
        return None

    def _guess_type(self):
        """The type of a field of a node without a field table, from the syntax of its value."""
        kind, text = self.kinds[self.i], self.texts[self.i]
        if kind == "punct" and text == "[":
            k2, t2 = self.kinds[self.i + 1], self.texts[self.i + 1]
            if k2 == "id" and (t2 in ("DEF", "USE") or self.texts[self.i + 2] == "{"):
                return "MFNode"
            return None
        if kind == "id" and (text in ("DEF", "USE", "NULL") or self.texts[self.i + 1] == "{"):
            return "SFNode"
        return None

    def _load_inline(self, node):
        urls = node.get("url", [])
        where = node.where
        if not urls:
            raise ModelError(f"{where}: Inline without a url; expected url \"file.wrl\"")
        base = os.path.dirname(os.path.abspath(self.path))
        tried = []
        for url in urls:
            rel = url[7:] if url.startswith("file://") else url
            if "://" in rel:
                tried.append(url)
                continue
            full = os.path.normpath(os.path.join(base, rel))
            if os.path.isfile(full) or full in self.include_chain:
                if not full.lower().endswith((".wrl", ".wrz", ".vrml")):
                    self.loader.note(f"{where}: Inline {url!r} is not a VRML file; skipped")
                    return
                node.inlined = self.loader.load(full, self.include_chain, where)
                return
            tried.append(full)
        raise ModelError(f"{where}: Inline url {urls}: file not found (tried {', '.join(tried)}); "
                         "expected a .wrl file relative to the including file")

    # -- values
    def _value(self, ftype, what):
        if ftype is None:
            return self._untyped_value()
        if ftype in ("SFNode", "MFNode"):
            return self._node_value(ftype, what)
        single = "SF" + ftype[2:]
        if ftype.startswith("MF"):
            if self.kinds[self.i] == "punct" and self.texts[self.i] == "[":
                self.i += 1
                items = []
                while not (self.kinds[self.i] == "punct" and self.texts[self.i] == "]"):
                    if self.kinds[self.i] == "eof":
                        raise self.error(f"unexpected end of file: expected ']' to close {what}")
                    items.append(self._single(single, what, list_context=True))
                self.i += 1
            else:
                items = [self._single(single, what)]
            return self._pack_mf(single, items)
        value = self._single(ftype, what)
        return np.array(value) if _WIDTH.get(ftype, 1) > 1 else value

    def _pack_mf(self, single, items):
        width = _WIDTH.get(single)
        if width is None:
            return items                               # MFString, MFBool
        dtype = int if single == "SFInt32" else float
        arr = np.array(items, dtype=dtype)
        return arr.reshape(-1, width) if width > 1 else arr.reshape(-1)

    def _single(self, ftype, what, list_context=False):
        if ftype in _WIDTH:
            n = _WIDTH[ftype]
            values = []
            for _ in range(n):
                if self.kinds[self.i] != "num":
                    closing = " or ']'" if list_context and not values else ""
                    raise self.error(f"{what}: expected {ftype} ({_EXPECTED[ftype]}){closing}, got "
                                     f"{self._describe(self.i)}")
                values.append(self._number(ftype, what))
            return values if n > 1 else values[0]
        if ftype == "SFString":
            if self.kinds[self.i] != "str":
                raise self.error(f"{what}: expected SFString ({_EXPECTED['SFString']}), got "
                                 f"{self._describe(self.i)}")
            self.i += 1
            return _unquote(self.texts[self.i - 1])
        if ftype == "SFBool":
            text = self.texts[self.i]
            if self.kinds[self.i] != "id" or text not in ("TRUE", "FALSE"):
                raise self.error(f"{what}: expected SFBool (TRUE or FALSE), got {self._describe(self.i)}")
            self.i += 1
            return text == "TRUE"
        if ftype == "SFImage":
            head = [self._number("SFInt32", what) for _ in range(3)]
            return head + [self._number("SFInt32", what) for _ in range(head[0] * head[1])]
        raise self.error(f"{what}: unsupported field type {ftype}")

    def _number(self, ftype, what):
        if self.kinds[self.i] != "num":
            raise self.error(f"{what}: expected {ftype} ({_EXPECTED.get(ftype, 'a number')}), got "
                             f"{self._describe(self.i)}")
        text = self.texts[self.i]
        self.i += 1
        if "x" in text or "X" in text:
            value = int(text, 16)
        elif ftype == "SFInt32":
            try:
                value = int(text)
            except ValueError:
                value = float(text)
                if not value.is_integer():
                    raise self.error(f"{what}: expected SFInt32 (an integer), got {text!r}", self.i - 1) from None
                value = int(value)
        else:
            value = float(text)
            if not math.isfinite(value):       # VRML has no inf or nan: the literal overflowed a double
                raise self.error(f"{what}: {text!r} is out of range; expected a {ftype[2:]} within "
                                 "+-1.8e308", self.i - 1)
            return value
        if not -2 ** 31 <= value < 2 ** 31:
            raise self.error(f"{what}: {text!r} is out of range; expected an SFInt32 in "
                             "-2147483648..2147483647", self.i - 1)
        return value

    def _node_value(self, ftype, what):
        """SFNode/MFNode values outside a node body (PROTO defaults)."""
        if ftype == "MFNode" and self.kinds[self.i] == "punct" and self.texts[self.i] == "[":
            self.i += 1
            nodes = []
            while not (self.kinds[self.i] == "punct" and self.texts[self.i] == "]"):
                node = self._node_statement(f"a node or ']' for {what}")
                if node is not None:
                    nodes.append(node)
            self.i += 1
            return nodes
        node = self._node_statement(f"{_EXPECTED['SFNode']} for {what}")
        return node if ftype == "SFNode" else ([] if node is None else [node])

    def _untyped_value(self):
        """A value read by syntax alone: numbers, strings and TRUE/FALSE, bracketed or bare."""
        if self.kinds[self.i] == "punct" and self.texts[self.i] == "[":
            self.i += 1
            values = []
            while not (self.kinds[self.i] == "punct" and self.texts[self.i] == "]"):
                if self.kinds[self.i] == "eof":
                    raise self.error("unexpected end of file: expected ']'")
                values.append(self._untyped_atom())
            self.i += 1
            return values
        values = [self._untyped_atom()]
        while self.kinds[self.i] in ("num", "str") or self.texts[self.i] in ("TRUE", "FALSE"):
            values.append(self._untyped_atom())
        return values[0] if len(values) == 1 else values

    def _untyped_atom(self):
        kind, text = self.kinds[self.i], self.texts[self.i]
        self.i += 1
        if kind == "num":
            value = int(text, 16) if "x" in text.lower() else float(text)
            if not (math.isfinite(value) and abs(value) < 2 ** 63):
                raise self.error(f"{text!r} is out of range; expected a number within +-9.2e18", self.i - 1)
            return value
        if kind == "str":
            return _unquote(text)
        if kind == "id" and text in ("TRUE", "FALSE"):
            return text == "TRUE"
        raise self.error(f"expected a field value (numbers, strings, TRUE/FALSE), got {self._describe(self.i - 1)}",
                         self.i - 1)


def _known_type(ftype):
    return ftype in ("SFNode", "MFNode", "SFString", "MFString", "SFBool", "MFBool", "SFImage") or (
        ftype[:2] in ("SF", "MF") and "SF" + ftype[2:] in _WIDTH)


def _unquote(text):
    body = text[1:-1]
    return re.sub(r"\\(.)", r"\1", body) if "\\" in body else body
