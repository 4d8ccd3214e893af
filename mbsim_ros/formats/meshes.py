"""Triangle meshes from files: OBJ, STL (ascii and binary), Collada (.dae), VTK PolyData
(.vtp, OpenSim's geometry) and MuJoCo's binary .msh.

    vertices, faces = load_mesh("part.stl", scale=(1, 1, 1))

`vertices` is float (n, 3), already multiplied by `scale`; `faces` is int (m, 3) indices into
it. Polygons are triangulated as fans. Readers are chosen by file extension from `READERS`, so
another format (OpenSim .vtp, ...) is one function and one entry:

    READERS[".vtp"] = read_vtp        # read_vtp(path) -> (vertices, faces)

    write_stl("part.stl", vertices, faces)   # binary STL, for RViz (which reads STL, Collada, OBJ)

VTK PolyData (the XML format, <VTKFile type="PolyData">): the points and the polygons and
triangle strips of every <Piece>; DataArrays in ascii, inline binary (base64, with the UInt32 or
UInt64 header_type, optionally vtkZLibDataCompressor blocks) or <AppendedData> (raw or base64).

Any failure (missing file, unreadable or malformed content) raises MeshError, a ModelError
whose message starts with the file name; loaders turn it into a model warning.

Collada: the geometry of every <instance_geometry> of the scene's visual scene is placed by
its node transforms (matrix, translate, rotate, scale, nested nodes) and the asset's <unit>
scale, as RViz does; <up_axis> is ignored, as RViz does (it sets Assimp's
IGNORE_UP_DIRECTION). A file without a visual scene gives every geometry untransformed.
"""
from __future__ import annotations

import base64
import os
import struct
import zlib

import numpy as np

from ..model import ModelError


class MeshError(ModelError):
    """A mesh file is missing or cannot be read."""


def load_mesh(path, scale=(1.0, 1.0, 1.0), points=False):
    """Read a mesh file -> (vertices (n, 3) float, faces (m, 3) int), vertices scaled. points: a
    file of vertices without faces is accepted (no faces: MJCF makes its convex hull)."""
    path = os.fspath(path)
    ext = os.path.splitext(path)[1].lower()
    reader = READERS.get(ext)
    if reader is None:
        raise MeshError(f"{path}: unknown mesh format {ext!r}; expected one of {', '.join(sorted(READERS))}")
    if not os.path.isfile(path):
        raise MeshError(f"{path}: no such mesh file")
    try:
        vertices, faces = reader(path)
    except MeshError:
        raise
    except (OSError, ValueError, IndexError, struct.error) as exc:
        raise MeshError(f"{path}: cannot read {ext} mesh: {exc}") from None
    vertices = np.asarray(vertices, dtype=float).reshape(-1, 3)
    faces = np.asarray(faces, dtype=np.int64).reshape(-1, 3)
    _check_mesh(path, vertices, faces, points)
    return vertices * np.asarray(scale, dtype=float).reshape(3), faces


def _check_mesh(path, vertices, faces, points=False):
    if len(faces) == 0 and not (points and len(vertices)):
        raise MeshError(f"{path}: no triangles found (expected a triangle mesh)")
    if not np.all(np.isfinite(vertices)):
        raise MeshError(f"{path}: vertex coordinates are not all finite numbers")
    if len(faces) and (faces.min() < 0 or faces.max() >= len(vertices)):
        raise MeshError(f"{path}: a face refers to a vertex that does not exist "
                        f"(indices {faces.min()}..{faces.max()}, {len(vertices)} vertices)")


def _fan(polygon):
    """Triangulate a convex polygon (list of vertex indices) as a fan around its first vertex."""
    return [(polygon[0], polygon[k], polygon[k + 1]) for k in range(1, len(polygon) - 1)]


# -- OBJ ---------------------------------------------------------------------------------
def read_obj(path):
    """Wavefront OBJ: `v x y z [w]` and `f a b c ...` with a, a/t, a//n or a/t/n; indices are
    1-based, negative ones count back from the last vertex read so far."""
    vertices, faces = [], []
    with open(path, "r", encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            words = line.split()
            if not words:
                continue
            try:
                if words[0] == "v":
                    vertices.append([float(w) for w in words[1:4]])
                    if len(vertices[-1]) != 3:
                        raise ValueError("expected 3 coordinates")
                elif words[0] == "f":
                    polygon = [_obj_index(w, len(vertices)) for w in words[1:]]
                    if len(polygon) < 3:
                        raise ValueError("expected at least 3 vertices")
                    faces.extend(_fan(polygon))
            except ValueError as exc:
                raise MeshError(f"{path}, line {lineno}: {line.strip()!r}: {exc}") from None
    return np.array(vertices, dtype=float).reshape(-1, 3), np.array(faces, dtype=np.int64).reshape(-1, 3)


def _obj_index(word, n_vertices):
    i = int(word.split("/")[0])
    if i == 0:
        raise ValueError("vertex index 0 (OBJ indices start at 1)")
    return i - 1 if i > 0 else n_vertices + i


# -- STL ---------------------------------------------------------------------------------
def read_stl(path):
    """STL, binary (80-byte header, triangle count, 50 bytes per triangle) or ascii."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) >= 84:
        (count,) = struct.unpack_from("<I", data, 80)
        if len(data) == 84 + 50 * count:   # binary STL files may also start with "solid"
            return _stl_binary(data, count)
    if data.lstrip()[:5].lower() == b"solid":
        return _stl_ascii(path, data)
    raise MeshError(f"{path}: neither a binary STL (size does not match its triangle count) "
                    "nor an ascii STL (no 'solid' header)")


def _stl_binary(data, count):
    record = np.dtype([("normal", "<f4", 3), ("v", "<f4", (3, 3)), ("attr", "<u2")])
    triangles = np.frombuffer(data, dtype=record, count=count, offset=84)["v"].astype(float)
    return _merge_corners(triangles.reshape(-1, 3))


def _stl_ascii(path, data):
    words = data.decode("ascii", errors="replace").split()
    corners = []
    for k, w in enumerate(words):
        if w == "vertex":
            try:
                corners.append([float(x) for x in words[k + 1:k + 4]])
            except ValueError:
                raise MeshError(f"{path}: 'vertex' followed by {' '.join(words[k + 1:k + 4])!r}: "
                                "expected 3 numbers") from None
    if len(corners) % 3:
        raise MeshError(f"{path}: {len(corners)} vertices: expected 3 per facet")
    return _merge_corners(np.array(corners, dtype=float).reshape(-1, 3))


def _merge_corners(corners):
    """STL lists three corners per triangle; share equal corners between triangles."""
    vertices, inverse = np.unique(corners, axis=0, return_inverse=True)
    return vertices, inverse.reshape(-1, 3)


# -- Collada -----------------------------------------------------------------------------
def read_collada(path):
    from lxml import etree
    try:
        with open(path, "rb") as f:                 # (bytes: lxml cannot encode a non-UTF-8 file name)
            root = etree.fromstring(f.read(), etree.XMLParser(resolve_entities=False, no_network=True,
                                                              huge_tree=True))
    except etree.XMLSyntaxError as exc:
        raise MeshError(f"{path}, line {exc.lineno}: not well-formed XML: {exc.msg}") from None
    if _local(root) != "COLLADA":
        raise MeshError(f"{path}: root element <{_local(root)}>: expected <COLLADA>")
    by_id = {el.get("id"): el for el in root.iter() if isinstance(el.tag, str) and el.get("id")}
    unit = _child(_child(root, "asset"), "unit")
    meter = float(unit.get("meter", "1")) if unit is not None else 1.0
    placed = _scene_geometries(root, by_id)
    if placed is None:   # no visual scene: every geometry as it is
        placed = [(g, np.eye(4)) for g in root.iter() if _local(g) == "geometry"]
    all_v, all_f, offset = [], [], 0
    for geometry, T in placed:
        for mesh in (m for m in geometry if _local(m) == "mesh"):
            v, f = _collada_mesh(path, mesh, by_id)
            all_v.append(v @ T[:3, :3].T + T[:3, 3])
            all_f.append(f + offset)
            offset += len(v)
    if not all_v:
        raise MeshError(f"{path}: no <geometry><mesh> found")
    return np.vstack(all_v) * meter, np.vstack(all_f)


def _local(el):
    return el.tag.rsplit("}", 1)[-1] if isinstance(el.tag, str) else ""


def _child(el, name):
    if el is None:
        return None
    return next((c for c in el if _local(c) == name), None)


def _ref(by_id, url):
    return by_id.get((url or "").lstrip("#"))


def _scene_geometries(root, by_id):
    """[(geometry element, 4x4 node transform)] for the instanced visual scene, or None."""
    scene = _child(root, "scene")
    inst = _child(scene, "instance_visual_scene")
    visual_scene = _ref(by_id, inst.get("url")) if inst is not None else None
    if visual_scene is None:
        return None
    placed = []

    def walk(node, T):
        T = T @ _node_transform(node)
        for c in node:
            name = _local(c)
            if name == "instance_geometry" and _ref(by_id, c.get("url")) is not None:
                placed.append((_ref(by_id, c.get("url")), T))
            elif name == "node":
                walk(c, T)
            elif name == "instance_node" and _ref(by_id, c.get("url")) is not None:
                walk(_ref(by_id, c.get("url")), T)

    for node in visual_scene:
        if _local(node) == "node":
            walk(node, np.eye(4))
    return placed


def _node_transform(node):
    """Product of a node's transform elements, in document order (COLLADA 1.4 5.8)."""
    T = np.eye(4)
    for c in node:
        name = _local(c)
        if name not in ("matrix", "translate", "rotate", "scale"):
            continue
        x = np.array((c.text or "").split(), dtype=float)
        M = np.eye(4)
        if name == "matrix":
            M = x.reshape(4, 4)
        elif name == "translate":
            M[:3, 3] = x[:3]
        elif name == "scale":
            M[:3, :3] = np.diag(x[:3])
        else:
            M[:3, :3] = _rotation(x[:3], np.radians(x[3]))
        T = T @ M
    return T


def _rotation(axis, angle):
    n = np.linalg.norm(axis)
    if n < 1e-12:
        return np.eye(3)
    x, y, z = axis / n
    K = np.array([[0, -z, y], [z, 0, -x], [-y, x, 0]])
    return np.eye(3) + np.sin(angle) * K + (1 - np.cos(angle)) * K @ K


def _collada_mesh(path, mesh, by_id):
    """Vertices and triangles of one <mesh>: its <triangles>, <polylist> and <polygons>."""
    vertices_el = _child(mesh, "vertices")
    if vertices_el is None:
        raise MeshError(f"{path}, line {mesh.sourceline}: <mesh> has no <vertices>")
    position = next((i for i in vertices_el if _local(i) == "input" and i.get("semantic") == "POSITION"), None)
    if position is None:
        raise MeshError(f"{path}, line {vertices_el.sourceline}: <vertices> has no POSITION input")
    positions = _source_array(path, _ref(by_id, position.get("source")), position)
    faces = []
    for prim in mesh:
        kind = _local(prim)
        if kind not in ("triangles", "polylist", "polygons"):
            continue
        inputs = [i for i in prim if _local(i) == "input"]
        stride = 1 + max((int(i.get("offset", "0")) for i in inputs), default=0)
        vertex_input = next((i for i in inputs if i.get("semantic") == "VERTEX"), None)
        if vertex_input is None:
            raise MeshError(f"{path}, line {prim.sourceline}: <{kind}> has no VERTEX input")
        voff = int(vertex_input.get("offset", "0"))
        for p in (c for c in prim if _local(c) == "p"):
            idx = np.array((p.text or "").split(), dtype=np.int64).reshape(-1, stride)[:, voff]
            if kind == "triangles":
                faces.extend(idx.reshape(-1, 3).tolist())
            elif kind == "polygons":
                faces.extend(_fan(idx.tolist()))
            else:
                vcount = np.array((_child(prim, "vcount").text or "").split(), dtype=np.int64)
                starts = np.concatenate([[0], np.cumsum(vcount)[:-1]])
                for s, n in zip(starts, vcount):
                    faces.extend(_fan(idx[s:s + n].tolist()))
    return positions, np.array(faces, dtype=np.int64).reshape(-1, 3)


def _source_array(path, source, where):
    if source is None:
        raise MeshError(f"{path}, line {where.sourceline}: POSITION source {where.get('source')!r} not found")
    floats = _child(source, "float_array")
    if floats is None:
        raise MeshError(f"{path}, line {source.sourceline}: <source> has no <float_array>")
    values = np.array((floats.text or "").split(), dtype=float)
    accessor = _child(_child(source, "technique_common"), "accessor")
    stride = int(accessor.get("stride", "3")) if accessor is not None else 3
    count = int(accessor.get("count", len(values) // stride)) if accessor is not None else len(values) // stride
    return values[:count * stride].reshape(count, stride)[:, :3]


# -- VTK PolyData (.vtp) ----------------------------------------------------------------
_VTK_TYPES = {"Int8": "i1", "UInt8": "u1", "Int16": "i2", "UInt16": "u2", "Int32": "i4", "UInt32": "u4",
              "Int64": "i8", "UInt64": "u8", "Float32": "f4", "Float64": "f8"}


def read_vtp(path):
    from lxml import etree
    with open(path, "rb") as f:
        data = f.read()
    appended = b""
    start = data.find(b"<AppendedData")
    if start >= 0:
        # raw appended data is not XML: cut it out (after the "_" marker) before parsing
        mark = data.index(b"_", data.index(b">", start)) + 1
        end = data.rfind(b"</AppendedData>")
        if end < mark:
            raise MeshError(f"{path}: <AppendedData> without its closing tag")
        appended = data[mark:end]
        data = data[:mark - 1] + data[end:]
    try:
        root = etree.fromstring(data, etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=True))
    except etree.XMLSyntaxError as exc:
        raise MeshError(f"{path}, line {exc.lineno}: not well-formed XML: {exc.msg}") from None
    if root.tag != "VTKFile" or root.get("type") != "PolyData":
        raise MeshError(f"{path}: root <{root.tag} type={root.get('type')!r}>: expected <VTKFile type=\"PolyData\">")
    vtk = _VtkArrays(path, root, appended)
    all_v, all_f, offset = [], [], 0
    for piece in root.iter("Piece"):
        n_points = int(piece.get("NumberOfPoints", "0"))
        points_el = piece.find("Points/DataArray")
        if points_el is None:
            if n_points:
                raise MeshError(f"{path}, line {piece.sourceline}: <Piece> without <Points>")
            continue
        points = vtk.array(points_el).astype(float).reshape(-1, 3)[:n_points]
        faces = []
        for kind in ("Polys", "Strips"):
            cells = piece.find(kind)
            if cells is None:
                continue
            arrays = {a.get("Name"): a for a in cells.findall("DataArray")}
            if "connectivity" not in arrays or "offsets" not in arrays:
                raise MeshError(f"{path}, line {cells.sourceline}: <{kind}> needs connectivity and offsets arrays")
            conn = vtk.array(arrays["connectivity"]).astype(np.int64)
            ends = vtk.array(arrays["offsets"]).astype(np.int64)
            begin = 0
            for end in ends:
                cell = conn[begin:end].tolist()
                begin = end
                if kind == "Polys":
                    faces.extend(_fan(cell))
                else:   # a triangle strip: every other triangle flipped to keep the winding
                    faces.extend((cell[k], cell[k + 1], cell[k + 2]) if k % 2 == 0 else (cell[k + 1], cell[k], cell[k + 2])
                                 for k in range(len(cell) - 2))
        all_v.append(points)
        all_f.append(np.array(faces, dtype=np.int64).reshape(-1, 3) + offset)
        offset += len(points)
    if not all_v:
        raise MeshError(f"{path}: no <Piece> with points")
    return np.vstack(all_v), np.vstack(all_f)


class _VtkArrays:
    """Decodes DataArray elements of one VTK XML file (ascii, binary, appended)."""

    def __init__(self, path, root, appended):
        self.path = path
        self.order = "<" if root.get("byte_order", "LittleEndian") == "LittleEndian" else ">"
        self.header = np.dtype(self.order + ("u8" if root.get("header_type") == "UInt64" else "u4"))
        compressor = root.get("compressor")
        if compressor not in (None, "", "vtkZLibDataCompressor"):
            raise MeshError(f"{path}: compressor {compressor!r}; expected vtkZLibDataCompressor or none")
        self.compressed = bool(compressor)
        appended_el = root.find("AppendedData")
        self.appended_base64 = appended_el is not None and appended_el.get("encoding") == "base64"
        self.appended = b"".join(appended.split()) if self.appended_base64 else appended

    def array(self, el):
        kind = el.get("type")
        if kind not in _VTK_TYPES:
            raise MeshError(f"{self.path}, line {el.sourceline}: DataArray type {kind!r}; expected one of "
                            f"{', '.join(_VTK_TYPES)}")
        dtype = np.dtype(self.order + _VTK_TYPES[kind])
        fmt = el.get("format", "ascii")
        if fmt == "ascii":
            return np.array((el.text or "").split(), dtype=float).astype(dtype)
        if fmt == "binary":
            return self.decode("".join((el.text or "").split()).encode("ascii"), dtype, el, encoded=True)
        if fmt == "appended":
            offset = int(el.get("offset", "0"))
            return self.decode(self.appended[offset:], dtype, el, encoded=self.appended_base64)
        raise MeshError(f"{self.path}, line {el.sourceline}: DataArray format {fmt!r}; expected ascii, binary or appended")

    def decode(self, data, dtype, el, encoded):
        """One array: its header (byte count, or the zlib block table) then its data; raw, or
        base64 (the header encoded on its own or together with uncompressed data; the zlib
        block table always on its own)."""
        h = self.header.itemsize
        hc = _b64_len(h)
        try:
            if not self.compressed:
                if not encoded:
                    size = int(np.frombuffer(data[:h], self.header)[0])
                    return np.frombuffer(data[h:h + size], dtype)
                size = int(np.frombuffer(base64.b64decode(data[:hc])[:h], self.header)[0])
                if data[hc - 1:hc] == b"=":           # the header encoded on its own
                    raw = base64.b64decode(data[hc:hc + _b64_len(size)])
                    return np.frombuffer(raw[:size], dtype)
                raw = base64.b64decode(data[:_b64_len(h + size)])
                return np.frombuffer(raw[h:h + size], dtype)
            first = base64.b64decode(data[:hc])[:h] if encoded else data[:h]
            blocks = int(np.frombuffer(first, self.header)[0])
            n_header = (3 + blocks) * h
            if encoded:
                header = np.frombuffer(base64.b64decode(data[:_b64_len(n_header)])[:n_header], self.header)
                sizes = header[3:3 + blocks].astype(np.int64)
                start = _b64_len(n_header)
                body = base64.b64decode(data[start:start + _b64_len(int(sizes.sum()))])
            else:
                header = np.frombuffer(data[:n_header], self.header)
                sizes = header[3:3 + blocks].astype(np.int64)
                body = data[n_header:n_header + int(sizes.sum())]
            chunks, at = [], 0
            for size in sizes:
                chunks.append(zlib.decompress(body[at:at + int(size)]))
                at += int(size)
            return np.frombuffer(b"".join(chunks), dtype)
        except (ValueError, TypeError, IndexError, zlib.error) as exc:
            raise MeshError(f"{self.path}, line {el.sourceline}: cannot decode the binary DataArray: {exc}") from None


def _b64_len(n_bytes):
    """Characters of base64 for n bytes (with padding)."""
    return 4 * ((n_bytes + 2) // 3)


def read_msh(path):
    """MuJoCo's binary .msh: int32 counts (vertices, normals, texture coordinates, faces), then
    float32 vertices, normals, texture coordinates and int32 faces."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 16:
        raise MeshError(f"{path}: too short for a MuJoCo .msh header (16 bytes)")
    nv, nn, nt, nf = struct.unpack_from("<4i", data)
    size = 16 + 4 * (3 * nv + 3 * nn + 2 * nt + 3 * nf)
    if min(nv, nn, nt, nf) < 0 or len(data) != size:
        raise MeshError(f"{path}: {len(data)} bytes; a .msh with {nv} vertices, {nn} normals, {nt} texture "
                        f"coordinates and {nf} faces has {size}")
    vertices = np.frombuffer(data, "<f4", 3 * nv, 16).reshape(-1, 3).astype(float)
    faces = np.frombuffer(data, "<i4", 3 * nf, 16 + 4 * (3 * nv + 3 * nn + 2 * nt)).reshape(-1, 3)
    return vertices, faces


READERS = {
    ".msh": read_msh,
    ".obj": read_obj,
    ".stl": read_stl,
    ".dae": read_collada,
    ".vtp": read_vtp,
}


def write_stl(path, vertices, faces, header=b"mbsim_ros"):
    """Write a binary STL (float32 corners, facet normals from the corners); returns path."""
    V = np.asarray(vertices, dtype=float).reshape(-1, 3)
    F = np.asarray(faces, dtype=np.int64).reshape(-1, 3)
    corners = V[F]                                            # (m, 3, 3)
    n = np.cross(corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0])
    length = np.linalg.norm(n, axis=1, keepdims=True)
    n = np.divide(n, length, out=np.zeros_like(n), where=length > 0)
    record = np.dtype([("normal", "<f4", 3), ("v", "<f4", (3, 3)), ("attr", "<u2")])
    rows = np.zeros(len(F), dtype=record)
    rows["normal"], rows["v"] = n, corners
    with open(path, "wb") as f:
        f.write(header[:80].ljust(80, b" ") + struct.pack("<I", len(F)) + rows.tobytes())
    return path
