"""Reading an .osim file: the XML (parse, with OpenSim's `::` element names), the component
index and paths of 4.x files, frames and stations, typed properties with <defaults>, and the
messages that name the file, line and element (Reader); the small XML helpers shared by the parts."""
from __future__ import annotations

import os
import re
import warnings

import numpy as np
from lxml import etree

from ...model import ModelError, numbers_text
from ...model.transforms import make_transform
from .functions import xyz_pose

VISUALS = ("meshes", "primitives", "none")

# a Set element without a name attribute has OpenSim's default name
_SET_NAMES = {"BodySet": "bodyset", "JointSet": "jointset", "ForceSet": "forceset",
              "ConstraintSet": "constraintset", "ContactGeometrySet": "contactgeometryset",
              "MarkerSet": "markerset", "ControllerSet": "controllerset", "ProbeSet": "probeset",
              "ComponentSet": "componentset", "FrameSet": "frameset"}
FRAME_TYPES = ("Ground", "Body", "PhysicalOffsetFrame", "OffsetFrame", "StationDefinedFrame")
JOINT_TYPES = ("WeldJoint", "PinJoint", "SliderJoint", "UniversalJoint", "GimbalJoint", "BallJoint",
               "FreeJoint", "PlanarJoint", "CustomJoint", "EllipsoidJoint", "ScapulothoracicJoint")


def as_converted(values):
    """Numbers as OpenSim 4 reads them from a 3.x (or 30501) file: its conversion writes joint
    and bushing locations and orientations and the six inertia scalars back as text with 6
    significant digits, so OpenSim simulates the rounded values; so do we."""
    return np.array([float(f"{v:.6g}") for v in np.asarray(values, float).reshape(-1)])


def subelements(el):
    return [c for c in el if isinstance(c.tag, str)]


def first_child(el, tag):
    if el is None:
        return None
    for c in el:
        if c.tag == tag:
            return c
    return None


def describe(el):
    name = el.get("name")
    return f"<{el.tag.replace('__', '::')} name=\"{name}\">" if name is not None else f"<{el.tag.replace('__', '::')}>"


def unique_name(name, taken):
    out, k = name, 1
    while out in taken:
        k += 1
        out = f"{name}_{k}"
    return out


# =========================================================================================
# Reading
# =========================================================================================
class Reader:
    """Parsing state: the file (for messages), the component index and the model being built."""

    def __init__(self, path, visuals, collide, activate_actuators):
        if visuals not in VISUALS:
            raise ValueError(f"visuals={visuals!r}: expected one of {', '.join(VISUALS)}")
        self.path = os.path.abspath(path)
        self.name = os.fspath(path)
        self.folder = os.path.dirname(self.path)
        self.visuals = visuals
        self.collide = bool(collide)
        self.activate = bool(activate_actuators)
        self.model = None
        self.version = 0
        self.defaults = {}          # type -> template element from <defaults>
        self.path_of = {}           # element -> component path
        self.by_path = {}           # component path -> element
        self.by_name = {}           # name -> [elements] of frames, stations and bodies
        self.frame_cache = {}       # path -> (body or None, 4x4)
        self.mesh_cache = {}
        self.missing_meshes = []
        self.auto_named = set()     # joints the file leaves unnamed, named by index() as OpenSim does

    # -- messages ------------------------------------------------------------------------
    def where(self, el):
        return f"{self.name}, line {el.sourceline}, {describe(el)}"

    def error(self, el, expected):
        return ModelError(f"{self.where(el)}: {expected}")

    def warn(self, el, message, emit=True):
        text = f"{self.where(el)}: {message}" if el is not None else f"{self.name}: {message}"
        self.model.warnings.append(text)
        if emit:
            warnings.warn(text, stacklevel=4)

    def report(self, section, name, what):
        self.model.report.append((section, name, what))

    # -- properties ----------------------------------------------------------------------
    def prop(self, el, tag):
        """The property element `tag` of `el`, else of the <defaults> template of el's type."""
        c = first_child(el, tag)
        if c is None and el is not None and el.tag in self.defaults:
            c = first_child(self.defaults[el.tag], tag)
        return c

    def text(self, el, tag, default=None):
        c = self.prop(el, tag)
        if c is None or c.text is None or not c.text.strip():
            return default
        return c.text.strip()

    def numbers(self, el, tag, n=None, default=None, finite=True):
        """The numbers of property `tag` (n of them when n is given); default when absent."""
        c = self.prop(el, tag)
        if c is None or c.text is None or not c.text.strip():
            if default is None:
                raise self.error(el, f"missing <{tag}> ({'numbers' if n is None else numbers_text(n)})")
            return np.array(default, dtype=float)
        where = f"{self.where(c)} of {describe(el)}" if c.getparent() is el else self.where(c)
        try:
            values = np.array([float(w) for w in c.text.replace(",", " ").split()])
        except ValueError:
            raise ModelError(f"{where}: <{tag}>{c.text.strip()}</{tag}>: expected numbers") from None
        if n is not None and values.size != n:
            raise ModelError(f"{where}: <{tag}>{c.text.strip()}</{tag}>: expected {numbers_text(n)}, got {values.size}")
        if finite and not np.all(np.isfinite(values)):
            raise ModelError(f"{where}: <{tag}>{c.text.strip()}</{tag}>: expected finite numbers")
        return values

    def number(self, el, tag, default=None, finite=True):
        return float(self.numbers(el, tag, 1, None if default is None else [default], finite)[0])

    def flag(self, el, tag, default=False):
        t = self.text(el, tag)
        if t is None:
            return default
        if t.lower() in ("true", "1"):
            return True
        if t.lower() in ("false", "0"):
            return False
        raise ModelError(f"{self.where(self.prop(el, tag))} of {describe(el)}: <{tag}>{t}</{tag}>: expected true or false")

    def enabled(self, el):
        """False for a force or constraint switched off (appliesForce, isEnforced, isDisabled)."""
        if self.text(el, "appliesForce") is not None:
            return self.flag(el, "appliesForce", True)
        if self.text(el, "isEnforced") is not None:
            return self.flag(el, "isEnforced", True)
        return not self.flag(el, "isDisabled", False)

    # -- component paths (4.x) ------------------------------------------------------------
    def index(self, model_el):
        """Component paths of every named element below <Model> (outside <defaults>)."""
        by_path, path_of, by_name = self.by_path, self.path_of, self.by_name

        def walk(el, path):
            for c in el:
                tag = c.tag
                if not isinstance(tag, str) or tag == "defaults":
                    continue
                name = c.get("name")
                if name is None:
                    name = _SET_NAMES.get(tag)
                if not name and tag in JOINT_TYPES:
                    # OpenSim 4.6 names a joint without a name (or with name="") after its class
                    # in lower case, a second one _0, _1, ...
                    name, k = tag.lower(), 0
                    while f"{path}/{name}" in by_path:
                        name, k = f"{tag.lower()}_{k}", k + 1
                    c.set("name", name)
                    self.auto_named.add(c)
                if name is not None:
                    p = f"{path}/{name}"
                    path_of[c] = p
                    by_path.setdefault(p, c)
                    if tag in FRAME_TYPES or tag == "Station":
                        by_name.setdefault(name, []).append(c)
                    walk(c, p)
                else:
                    walk(c, path)
        walk(model_el, "")

    def resolve(self, owner, text, socket_el=None, kinds=FRAME_TYPES):
        """The element a socket of `owner` names: an absolute path, a path relative to the
        owner, or (older files) a plain name. "ground" is the ground even without an element."""
        where = socket_el if socket_el is not None else owner
        text = (text or "").strip()
        if not text:
            raise self.error(where, "empty socket: expected the path of a frame")
        if text.startswith("/"):
            path = text
        else:
            parts = self.path_of.get(owner, "").split("/")
            for seg in text.split("/"):
                if seg == "..":
                    parts = parts[:-1]
                elif seg not in ("", "."):
                    parts.append(seg)
            path = "/".join(parts)
        el = self.by_path.get(path.rstrip("/") or "/")
        if el is not None and (kinds is None or el.tag in kinds):
            return el
        last = text.rstrip("/").split("/")[-1]
        if last == "ground" and text in ("/ground", "ground", "../ground") and (kinds is None or "Ground" in kinds):
            return self.ground_el
        of = f" of {describe(owner)}" if where is not owner else ""
        if self.version >= 30505:       # OpenSim 4 resolves paths only
            raise ModelError(f"{self.where(where)}{of}: socket {text!r}: no "
                             f"{' or '.join(kinds) if kinds else 'component'} at {path!r}"
                             + (" (relative paths start at the component that names them)" if not text.startswith("/") else ""))
        found = [e for e in self.by_name.get(last, []) if kinds is None or e.tag in kinds]
        bodies = [e for e in found if e.tag in ("Body", "Ground")]
        if len(found) == 1 or len(bodies) == 1:      # older files name frames and bodies by name
            return found[0] if len(found) == 1 else bodies[0]
        raise ModelError(f"{self.where(where)}{of}: socket {text!r}: no {' or '.join(kinds) if kinds else 'component'} "
                         f"at that path" + (f" ({len(found)} candidates named {last!r})" if found else ""))

    def frame(self, el, _stack=()):
        """(body name or None for ground, 4x4 pose of the frame `el` in that body)."""
        key = self.path_of.get(el, id(el))
        if key in self.frame_cache:
            return self.frame_cache[key]
        if el in _stack:
            raise self.error(el, "frames refer to each other in a cycle")
        tag = el.tag
        if tag == "Ground" or el is self.ground_el:
            out = (None, np.eye(4))
        elif tag == "Body":
            out = (el.get("name"), np.eye(4))
        elif tag in ("PhysicalOffsetFrame", "OffsetFrame"):
            parent = self.resolve(el, self.text(el, "socket_parent"), self.prop(el, "socket_parent"))
            body, X = self.frame(parent, _stack + (el,))
            out = (body, X @ xyz_pose(self.numbers(el, "translation", 3, [0, 0, 0]),
                                      self.numbers(el, "orientation", 3, [0, 0, 0])))
        elif tag == "StationDefinedFrame":
            out = self.station_frame(el, _stack + (el,))
        else:
            raise self.error(el, f"a <{tag}> is not a frame (expected Ground, Body, PhysicalOffsetFrame "
                                 "or StationDefinedFrame)")
        self.frame_cache[key] = out
        return out

    def station(self, el, _stack=()):
        """(body, point in the body frame) of a <Station>."""
        frame = self.resolve(el, self.text(el, "socket_parent_frame"), self.prop(el, "socket_parent_frame"))
        body, X = self.frame(frame, _stack)
        return body, X[:3, :3] @ self.numbers(el, "location", 3, [0, 0, 0]) + X[:3, 3]

    def station_frame(self, el, stack):
        """OpenSim's StationDefinedFrame: ab along ab_axis, (ab x ac) along ab_x_ac_axis, their
        cross product on the third axis, origin at origin_point."""
        points = {}
        for s in ("point_a", "point_b", "point_c", "origin_point"):
            st = self.resolve(el, self.text(el, "socket_" + s), self.prop(el, "socket_" + s), kinds=("Station",))
            points[s] = self.station(st, stack)
        bodies = {b for b, _ in points.values()}
        if len(bodies) != 1:
            raise self.error(el, "its stations are on different bodies; expected one base frame")
        a, b, c, o = (points[s][1] for s in ("point_a", "point_b", "point_c", "origin_point"))
        ab, ac = b - a, c - a
        if np.linalg.norm(ab) < 1e-12 or np.linalg.norm(ac) < 1e-12 or np.linalg.norm(np.cross(ab, ac)) < 1e-12:
            raise self.error(el, "points a, b and c must form a triangle")
        ab /= np.linalg.norm(ab)
        n = np.cross(ab, ac / np.linalg.norm(ac))
        n /= np.linalg.norm(n)
        d0 = self.direction(el, "ab_axis")
        d1 = self.direction(el, "ab_x_ac_axis", next_to=d0)
        if d1[0] == d0[0]:
            self.warn(el, "ab_axis and ab_x_ac_axis are the same axis; ab_x_ac_axis falls back to the next axis")
            d1 = ((d0[0] + 1) % 3, 1.0)
        R = np.zeros((3, 3))
        R[:, d0[0]] = d0[1] * ab
        R[:, d1[0]] = d1[1] * n
        cyclic = (d1[0] - d0[0]) % 3 == 1        # right-handed: e_k = e_i x e_j for cyclic i, j, k
        R[:, 3 - d0[0] - d1[0]] = np.cross(R[:, d0[0]], R[:, d1[0]]) * (1.0 if cyclic else -1.0)
        return next(iter(bodies)), make_transform(R, o)

    def direction(self, el, tag, next_to=None):
        """(axis index, sign) of a StationDefinedFrame axis property ("x", "-y", "+z"); an absent
        property is OpenSim's default (+x, +y); an unreadable one warns and falls back as OpenSim
        does (+x for ab_axis, the axis after ab_axis for ab_x_ac_axis)."""
        t = self.text(el, tag)
        if t is None:
            return (0, 1.0) if next_to is None else (1, 1.0)
        sign = -1.0 if t.startswith("-") else 1.0
        axis = t.lstrip("+-").lower()
        if axis in ("x", "y", "z"):
            return "xyz".index(axis), sign
        fallback = (0, 1.0) if next_to is None else ((next_to[0] + 1) % 3, 1.0)
        self.warn(el, f"<{tag}>{t}</{tag}> is not an axis (x, y or z with an optional sign); using "
                      f"{'+' + 'xyz'[fallback[0]]}")
        return fallback


def parse(reader):
    """The <Model> element (and the document version); XML errors become ModelError with the
    file and line."""
    try:
        with open(reader.path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise ModelError(f"{reader.name}: cannot read the file: {exc}") from None
    if b"::" in data:
        # OpenSim writes element names such as HuntCrossleyForce::ContactParametersSet, which
        # a namespace-aware XML parser rejects: read them as HuntCrossleyForce__ContactParametersSet
        data = re.sub(rb"</?[A-Za-z_][\w.:\-]*", lambda m: m.group(0).replace(b"::", b"__"), data)
    parser = etree.XMLParser(remove_comments=True, remove_pis=True, resolve_entities=False,
                             no_network=True, huge_tree=True)
    try:
        root = etree.fromstring(data, parser)
    except etree.XMLSyntaxError as exc:
        line = f", line {exc.lineno}" if exc.lineno else ""
        raise ModelError(f"{reader.name}{line}: not well-formed XML (expected an OpenSim "
                         f"<OpenSimDocument> with a <Model>): {exc.msg}") from None
    if root.tag == "OpenSimDocument":
        text = root.get("Version", "0")
        try:
            reader.version = int(float(text))
        except (ValueError, OverflowError):          # (OverflowError: Version="1e999")
            raise reader.error(root, f"Version=\"{text}\": expected a number such as 30000 or 40000") from None
        model_el = first_child(root, "Model")
        if model_el is None:
            raise reader.error(root, "no <Model> element inside")
    elif root.tag == "Model":
        model_el = root
    else:
        raise reader.error(root, "the root element must be <OpenSimDocument> (or <Model>)")
    return model_el
