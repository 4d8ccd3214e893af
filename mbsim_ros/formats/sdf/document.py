"""Reading SDFormat XML: files, versions, numbers and poses, URIs (model://, package://), and
the one place errors and notes are made (file, line and element in every message)."""
from __future__ import annotations

import os
import urllib.parse
import warnings

import numpy as np
from lxml import etree

from ...model import ModelError
from ...model.transforms import make_transform, quat_to_matrix, rpy_to_matrix

SUPPORTED = ("1.0", "1.2", "1.3", "1.4", "1.5", "1.6", "1.7", "1.8", "1.9", "1.10", "1.11", "1.12")
RESOURCE_PATH_VARIABLES = ("GZ_SIM_RESOURCE_PATH", "IGN_GAZEBO_RESOURCE_PATH", "SDF_PATH", "GAZEBO_MODEL_PATH")
UNBOUNDED = 1e16
# XML that Gazebo's parser (tinyxml2) reads and libxml2 calls errors: "--" inside comments,
# namespace prefixes declared nowhere (gz:system_priority, experimental:params in plugins), and
# blanks before the <?xml ...?> declaration
TOLERATED_XML = {"ERR_HYPHEN_IN_COMMENT", "NS_ERR_UNDEFINED_NAMESPACE", "NS_ERR_QNAME", "ERR_RESERVED_XML_NAME"}        # SDF's default joint limits (+-1e16) mean no limit


def local(el):
    return el.tag.rsplit("}", 1)[-1] if isinstance(el.tag, str) else ""


def child(el, name):
    return next((c for c in el if local(c) == name), None)


def children(el, name):
    return [c for c in el if local(c) == name]


def describe(el):
    name = el.get("name")
    return f"<{local(el)} name=\"{name}\">" if name is not None else f"<{local(el)}>"


def version_tuple(text):
    major, _, minor = str(text).partition(".")
    return int(major), int(minor or 0)


class Reader:
    """Parsing state shared by every part of one load: the top file (for messages), notes
    (what is ignored, said once), and the parsed files by path (an include read twice is
    parsed once)."""

    def __init__(self, path, package_paths=None):
        self.path = os.path.abspath(path)
        self.name = os.fspath(path)
        self.package_paths = package_paths
        self.trees = {}
        self.ignored = {}           # "<tag>" -> count (plugins, lights, GUI ...)
        self.unknown = {}           # "<tag> in <parent>" -> first "file, line"
        self.notes = []

    # -- messages ------------------------------------------------------------------------
    def where(self, el):
        url = el.getroottree().docinfo.URL
        file = self.name if url is None or os.path.abspath(url) == self.path else url
        return f"{file}, line {el.sourceline}, {describe(el)}"

    def error(self, el, expected):
        return ModelError(f"{self.where(el)}: {expected}")

    def note(self, el, message):
        self.notes.append(f"{self.where(el)}: {message}" if el is not None else f"{self.name}: {message}")

    def ignore(self, el):
        tag = f"<{local(el)}>"
        self.ignored[tag] = self.ignored.get(tag, 0) + 1

    def unknown_element(self, el, parent_what):
        key = f"<{local(el)}> in {parent_what}"
        self.unknown.setdefault(key, f"line {el.sourceline}")

    def flush_notes(self, model):
        """Every note into model.warnings and warnings.warn: what was ignored in one line."""
        notes = list(self.notes)
        if self.ignored:
            items = ", ".join(f"{n} {tag}" if n > 1 else tag for tag, n in self.ignored.items())
            notes.append(f"{self.name}: not simulated, ignored: {items}")
        if self.unknown:
            items = ", ".join(f"{k} ({v})" for k, v in self.unknown.items())
            notes.append(f"{self.name}: unknown SDFormat elements, ignored: {items}")
        for text in notes:
            model.warnings.append(text)
            warnings.warn(text, stacklevel=4)

    # -- files ---------------------------------------------------------------------------
    def parse(self, path, text=None):
        """The <sdf> root element of a file; XML errors become ModelError with file and line."""
        path = os.path.abspath(path)
        if path in self.trees and text is None:
            return self.trees[path]
        shown = self.name if path == self.path else path
        try:
            tree, errors = _parse_xml(path, text)
        except etree.XMLSyntaxError as e:
            errors = [e]
        except (OSError, ValueError) as e:
            raise ModelError(f"{shown}: cannot read it: {e}") from None
        bad = [x for x in errors if getattr(x, "type_name", "") not in TOLERATED_XML]
        if bad:
            first = bad[0]
            line = getattr(first, "line", None) or getattr(first, "lineno", None) or "?"
            msg = getattr(first, "message", None) or getattr(first, "msg", None) or str(first)
            raise ModelError(f"{shown}, line {line}: not well-formed XML: {msg}") from None
        root = tree.getroot()
        if tree.docinfo.URL is None:
            tree.docinfo.URL = path
        if local(root) != "sdf":
            raise ModelError(f"{shown}, line {root.sourceline}: the root element is <{local(root)}>; "
                             "expected <sdf version=\"...\">")
        version = root.get("version")
        if version is None:
            raise ModelError(f"{shown}, line {root.sourceline}, <sdf>: missing attribute version=\"...\"")
        if version.strip() not in SUPPORTED:
            raise ModelError(f"{shown}, line {root.sourceline}, <sdf>: version {version!r}; expected one of "
                             f"{', '.join(SUPPORTED)}")
        self.trees[path] = root
        return root

    # -- values --------------------------------------------------------------------------
    def text(self, el, name, default=None):
        """The stripped text of child `name` (default when absent)."""
        c = child(el, name) if el is not None else None
        if c is None or c.text is None or not c.text.strip():
            return default
        return c.text.strip()

    def vector(self, el, n, what=None):
        """`n` finite numbers from the text of `el`."""
        text = (el.text or "").strip()
        try:
            values = np.array([float(w) for w in text.split()])
        except ValueError:
            raise self.error(el, f"\"{text}\": expected {what or f'{n} numbers'}") from None
        if values.size != n:
            raise self.error(el, f"\"{text}\": expected {what or f'{n} numbers'}, got {values.size}")
        if not np.all(np.isfinite(values)):
            raise self.error(el, f"\"{text}\": expected finite numbers")
        return values

    def number(self, el, name, default=None, positive=False, nonnegative=False):
        c = child(el, name) if el is not None else None
        if c is None or c.text is None or not c.text.strip():
            if default is None:
                raise self.error(el, f"missing <{name}> (a number)")
            return float(default)
        x = float(self.vector(c, 1, "a number")[0])
        if positive and not x > 0:
            raise self.error(c, f"{x:g}: expected a number > 0")
        if nonnegative and x < 0:
            raise self.error(c, f"{x:g}: expected a number >= 0")
        return x

    def numbers(self, el, name, n, default=None):
        c = child(el, name) if el is not None else None
        if c is None or c.text is None or not c.text.strip():
            if default is None:
                raise self.error(el, f"missing <{name}> ({n} numbers)")
            return np.array(default, dtype=float)
        return self.vector(c, n)

    def boolean(self, el, name, default=False):
        value = self.text(el, name)
        if value is None:
            return default
        if value.lower() in ("1", "true"):
            return True
        if value.lower() in ("0", "false"):
            return False
        raise self.error(child(el, name), f"\"{value}\": expected true or false")

    def integer(self, el, name, default, low=None):
        value = self.text(el, name)
        if value is None:
            return int(default)
        try:
            x = int(value)
        except ValueError:
            raise self.error(child(el, name), f"\"{value}\": expected an integer") from None
        if low is not None and x < low:
            raise self.error(child(el, name), f"{x}: expected an integer >= {low}")
        return x

    def pose(self, pose_el):
        """4x4 of a <pose> element (identity when None): x y z roll pitch yaw (radians, or degrees
        with degrees="true"), or x y z qx qy qz qw with rotation_format="quat_xyzw" (1.9+)."""
        if pose_el is None or not (pose_el.text or "").strip():
            return np.eye(4)
        fmt = (pose_el.get("rotation_format") or "euler_rpy").strip()
        if fmt == "quat_xyzw":
            v = self.vector(pose_el, 7, "7 numbers x y z qx qy qz qw")
            if np.linalg.norm(v[3:]) < 1e-12:
                raise self.error(pose_el, "quaternion is zero; expected a rotation")
            return make_transform(quat_to_matrix(v[3:]), v[:3])
        if fmt != "euler_rpy":
            raise self.error(pose_el, f"rotation_format=\"{fmt}\": expected euler_rpy or quat_xyzw")
        v = self.vector(pose_el, 6, "6 numbers x y z roll pitch yaw")
        degrees = (pose_el.get("degrees") or "false").strip().lower() in ("true", "1")
        rpy = np.radians(v[3:]) if degrees else v[3:]
        return make_transform(rpy_to_matrix(rpy), v[:3])

    @staticmethod
    def relative_to(pose_el):
        """The frame a <pose> is relative to ('' = the element's default); 1.5/1.6 spell it `frame`."""
        if pose_el is None:
            return ""
        return (pose_el.get("relative_to") or pose_el.get("frame") or "").strip()

    # -- URIs ----------------------------------------------------------------------------
    def resource_dirs(self, base_dir):
        dirs = []
        for var in RESOURCE_PATH_VARIABLES:
            dirs += [d for d in os.environ.get(var, "").split(os.pathsep) if d]
        return dirs + [base_dir, os.path.dirname(base_dir)]

    def resolve(self, uri, base_dir):
        """(absolute path or None, [places looked]) of a model://, package://, file://, absolute or
        relative URI (relative to base_dir)."""
        uri = uri.strip()
        if uri.startswith("model://"):
            rest = uri[len("model://"):]
            looked = []
            for d in self.resource_dirs(base_dir):
                p = os.path.normpath(os.path.join(d, rest))
                looked.append(p)
                if os.path.exists(p):
                    return p, looked
            return None, looked
        if uri.startswith("package://"):
            from ..urdf import resolve_mesh_uri
            path, looked = resolve_mesh_uri(uri, base_dir, self.package_paths)
            if path is None:     # a package:// folder (an <include>), not only a file
                pkg, _, rest = uri[len("package://"):].partition("/")
                for d in self.resource_dirs(base_dir):
                    p = os.path.normpath(os.path.join(d, pkg, rest))
                    if os.path.exists(p):
                        return p, looked + [p]
            return path, looked
        if uri.startswith("file://"):
            path = urllib.parse.unquote(uri[len("file://"):])
        elif uri.startswith(("https://", "http://")):
            return fuel_cached(uri)
        elif "://" in uri:
            return None, [f"{uri} (unsupported URI scheme)"]
        else:
            path = uri
        looked = []
        for d in [base_dir] + self.resource_dirs(base_dir)[:-2]:     # relative: beside the file, then the paths
            p = os.path.normpath(os.path.join(d, path))
            looked.append(p)
            if os.path.exists(p):
                return p, looked
        return None, looked

    def model_file(self, folder, el):
        """The SDF file of a model folder: model.config's <sdf> entry of the highest supported
        version, else model.sdf."""
        config = os.path.join(folder, "model.config")
        if os.path.isfile(config):
            try:
                with open(config, "rb") as f:       # (bytes: lxml cannot encode a non-UTF-8 file name)
                    root = etree.fromstring(f.read(), etree.XMLParser(remove_comments=True, resolve_entities=False,
                                                                      no_network=True))
            except (etree.XMLSyntaxError, OSError) as e:
                raise self.error(el, f"{config}: not a readable model.config: {e}") from None
            best = None
            for s in root.iter("sdf"):
                v = (s.get("version") or "1.0").strip()
                if (s.text or "").strip() and v in SUPPORTED:
                    if best is None or version_tuple(v) > version_tuple(best[0]):
                        best = (v, s.text.strip())
            if best is not None:
                return os.path.join(folder, best[1])
        for name in ("model.sdf", "model.urdf"):
            if os.path.isfile(os.path.join(folder, name)):
                return os.path.join(folder, name)
        raise self.error(el, f"{folder}: a model folder without model.config or model.sdf")


def _parse_xml(path, text):
    """(tree, [libxml2 errors]) parsed in recover mode: the caller decides which errors are fatal
    (the parser's own log: an exception's error_log can hold a previous parse's errors)."""
    parser = etree.XMLParser(remove_comments=True, remove_pis=True, resolve_entities=False, no_network=True,
                             recover=True)
    if text is None:
        with open(path, "rb") as f:
            text = f.read()
    data = text.encode() if isinstance(text, str) else text
    root = etree.fromstring(data, parser, base_url=path)
    errors = [x for x in parser.error_log if x.level_name in ("ERROR", "FATAL")]
    if root is None:
        raise etree.XMLSyntaxError("no XML element", None, 1, 1)
    return etree.ElementTree(root), errors


def fuel_cache_dirs():
    """Where Gazebo keeps the Fuel models it downloaded (gz fuel download)."""
    dirs = [os.environ.get("GZ_FUEL_CACHE_PATH", ""), os.path.expanduser("~/.gz/fuel"),
            os.path.expanduser("~/.ignition/fuel")]
    return [d for d in dirs if d]


def fuel_cached(uri):
    """(path, looked) of a Fuel model URI (https://host/1.0/owner/models/name[/version][/files/rest]) in
    Gazebo's Fuel cache (owner and name lower case, the highest version unless one is named).
    Nothing is downloaded."""
    parsed = urllib.parse.urlparse(uri)
    parts = [urllib.parse.unquote(p) for p in parsed.path.split("/") if p]
    hint = (f"{uri} (not downloaded here: `gz fuel download -u \"{uri}\"` puts it in Gazebo's Fuel cache, "
            "or put the model in a folder on GZ_SIM_RESOURCE_PATH)")
    if "models" not in parts or parts.index("models") + 1 >= len(parts):
        return None, [hint]
    k = parts.index("models")
    owner, name = parts[k - 1].lower(), parts[k + 1].lower()
    rest = parts[k + 2:]
    version = rest.pop(0) if rest and rest[0].isdigit() else None
    if rest and rest[0] == "files":
        rest = rest[1:]
    looked = []
    for d in fuel_cache_dirs():
        folder = os.path.join(d, parsed.netloc, owner, "models", name)
        looked.append(folder)
        if not os.path.isdir(folder):
            continue
        versions = sorted((v for v in os.listdir(folder) if v.isdigit()), key=int)
        chosen = version if version in versions else (versions[-1] if versions and version is None else None)
        if chosen is not None:
            path = os.path.join(folder, chosen, *rest)
            if os.path.exists(path):
                return path, looked
    return None, looked + [hint]
