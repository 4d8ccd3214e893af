"""VTK PolyData (.vtp) meshes, OpenSim's geometry files: every encoding VTK writes (ascii,
inline base64, zlib blocks, appended raw and base64, 32- and 64-bit headers, both byte
orders), polygons and triangle strips, several pieces; and the real OpenSim geometry files."""
import base64
import zlib

import numpy as np
import pytest

from conftest import shared_models
from mbsim_ros.formats.meshes import MeshError, load_mesh

# a square pyramid: a quad base (two triangles by fan) and four triangles; plus a strip
POINTS = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0], [0.5, 0.5, 1.25]], dtype=float)
POLYS = [[0, 3, 2, 1], [0, 1, 4], [1, 2, 4], [2, 3, 4], [3, 0, 4]]
FACES = [(0, 3, 2), (0, 2, 1), (0, 1, 4), (1, 2, 4), (2, 3, 4), (3, 0, 4)]
STRIP = [0, 1, 3, 2]            # a strip: (0 1 3), then (3 1 2) to keep the winding
STRIP_FACES = [(0, 1, 3), (3, 1, 2)]


class _Writer:
    """Writes DataArrays the way VTK's XML writer does, in the chosen encoding."""

    def __init__(self, fmt, compressed=False, header="UInt32", order="<", separate=True, block=16,
                 appended_encoding="raw"):
        self.fmt, self.compressed, self.header, self.order = fmt, compressed, header, order
        self.separate, self.block, self.appended_encoding = separate, block, appended_encoding
        self.appended = b""

    def _header(self, values):
        return np.array(values, dtype=self.order + ("u8" if self.header == "UInt64" else "u4")).tobytes()

    def _encode(self, raw, encoded):
        if self.compressed:
            blocks = [raw[i:i + self.block] for i in range(0, len(raw), self.block)] or [b""]
            packed = [zlib.compress(b) for b in blocks]
            head = self._header([len(blocks), self.block, len(blocks[-1])] + [len(p) for p in packed])
            body = b"".join(packed)
            return base64.b64encode(head) + base64.b64encode(body) if encoded else head + body
        head = self._header([len(raw)])
        if not encoded:
            return head + raw
        return base64.b64encode(head) + base64.b64encode(raw) if self.separate else base64.b64encode(head + raw)

    def array(self, values, kind, name=None, components=1):
        dtype = {"Float32": "f4", "Float64": "f8", "Int32": "i4", "Int64": "i8", "UInt8": "u1"}[kind]
        values = np.asarray(values).astype(self.order + dtype).reshape(-1)
        attrs = f'type="{kind}" NumberOfComponents="{components}"' + (f' Name="{name}"' if name else "")
        if self.fmt == "ascii":
            return f'<DataArray {attrs} format="ascii">\n{" ".join(str(v) for v in values.tolist())}\n</DataArray>'
        if self.fmt == "binary":
            return f'<DataArray {attrs} format="binary">\n{self._encode(values.tobytes(), True).decode()}\n</DataArray>'
        offset = len(self.appended)
        self.appended += self._encode(values.tobytes(), self.appended_encoding == "base64")
        return f'<DataArray {attrs} format="appended" offset="{offset}"/>'

    def file(self, pieces):
        order = "LittleEndian" if self.order == "<" else "BigEndian"
        compressor = ' compressor="vtkZLibDataCompressor"' if self.compressed else ""
        xml = (f'<?xml version="1.0"?>\n<VTKFile type="PolyData" version="1.0" byte_order="{order}" '
               f'header_type="{self.header}"{compressor}>\n<PolyData>\n{pieces}\n</PolyData>\n').encode()
        if self.fmt == "appended":
            xml += f'<AppendedData encoding="{self.appended_encoding}">\n_'.encode() + self.appended + b"\n</AppendedData>\n"
        return xml + b"</VTKFile>\n"


def _cells(w, tag, cells, point_kind="Int64"):
    conn = [i for c in cells for i in c]
    offsets = np.cumsum([len(c) for c in cells])
    return (f"<{tag}>{w.array(conn, point_kind, 'connectivity')}{w.array(offsets, point_kind, 'offsets')}</{tag}>")


def _piece(w, points, polys=(), strips=(), kind="Float32"):
    body = f'<Points>{w.array(points, kind, components=3)}</Points>'
    body += '<PointData Normals="n">' + w.array(np.zeros_like(points), "Float32", "n", 3) + "</PointData>"
    if polys:
        body += _cells(w, "Polys", polys)
    if strips:
        body += _cells(w, "Strips", strips, "Int32")
    return f'<Piece NumberOfPoints="{len(points)}" NumberOfPolys="{len(polys)}" NumberOfStrips="{len(strips)}">{body}</Piece>'


ENCODINGS = {
    "ascii": dict(fmt="ascii"),
    "binary": dict(fmt="binary"),
    "binary, header with the data": dict(fmt="binary", separate=False),
    "binary, 64-bit header": dict(fmt="binary", header="UInt64"),
    "binary, big endian": dict(fmt="binary", order=">"),
    "zlib": dict(fmt="binary", compressed=True),
    "zlib, 64-bit header, one block": dict(fmt="binary", compressed=True, header="UInt64", block=1 << 15),
    "appended raw": dict(fmt="appended"),
    "appended raw zlib": dict(fmt="appended", compressed=True, header="UInt64"),
    "appended base64": dict(fmt="appended", appended_encoding="base64"),
    "appended base64 zlib": dict(fmt="appended", appended_encoding="base64", compressed=True),
}


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_every_encoding_reads_the_same_mesh(tmp_path, encoding):
    w = _Writer(**ENCODINGS[encoding])
    xml = w.file(_piece(w, POINTS, POLYS, kind="Float64") + _piece(w, POINTS * 2, strips=[STRIP]))
    path = tmp_path / "pyramid.vtp"
    path.write_bytes(xml)
    vertices, faces = load_mesh(path, scale=(1, 2, 3))
    np.testing.assert_array_equal(vertices, np.vstack([POINTS, 2 * POINTS]) * [1, 2, 3])
    assert faces.tolist() == [list(f) for f in FACES] + [[i + 5 for i in f] for f in STRIP_FACES]


def test_strip_triangles_keep_one_winding(tmp_path):
    w = _Writer("ascii")
    path = tmp_path / "strip.vtp"
    path.write_bytes(w.file(_piece(w, POINTS, strips=[STRIP])))
    vertices, faces = load_mesh(path)
    normals = [np.cross(vertices[b] - vertices[a], vertices[c] - vertices[a]) for a, b, c in faces]
    assert all(n[2] > 0 for n in normals)       # the planar strip's triangles all face +z


@pytest.mark.parametrize("xml, message", [
    (b"<VTKFile type='UnstructuredGrid'><UnstructuredGrid/></VTKFile>", "expected <VTKFile type=\"PolyData\">"),
    (b"<VTKFile type='PolyData'><PolyData><Piece NumberOfPoints='3'/></PolyData></VTKFile>", "<Piece> without <Points>"),
    (b"<VTKFile type='PolyData'><PolyData></PolyData></VTKFile>", "no <Piece> with points"),
    (b"<VTKFile type='PolyData' compressor='vtkLZ4DataCompressor'><PolyData/></VTKFile>", "compressor 'vtkLZ4DataCompressor'"),
    (b"<VTKFile type='PolyData'><PolyData><Piece NumberOfPoints='1'><Points><DataArray type='Float32' "
     b"format='binary'>@@@@</DataArray></Points></Piece></PolyData></VTKFile>", "cannot decode the binary DataArray"),
    (b"<VTKFile type='PolyData'><PolyData><Piece NumberOfPoints='1'><Points><DataArray type='Complex' "
     b"format='ascii'>1 2 3</DataArray></Points></Piece></PolyData></VTKFile>", "DataArray type 'Complex'"),
    (b"<VTKFile type='PolyData'><PolyData><Piece", "not well-formed XML"),
    (b"<VTKFile type='PolyData'><PolyData><Piece NumberOfPoints='3'><Points><DataArray type='Float32' format='ascii'>"
     b"0 0 0 1 0 0 0 1 0</DataArray></Points><Polys><DataArray type='Int32' Name='connectivity' format='ascii'>0 1 7"
     b"</DataArray><DataArray type='Int32' Name='offsets' format='ascii'>3</DataArray></Polys></Piece></PolyData>"
     b"</VTKFile>", "a face refers to a vertex that does not exist"),
])
def test_bad_vtp_files_raise_mesh_errors(tmp_path, xml, message):
    path = tmp_path / "bad.vtp"
    path.write_bytes(xml)
    with pytest.raises(MeshError, match=message) as info:
        load_mesh(path)
    assert str(info.value).startswith(str(path))


@pytest.mark.parametrize("path", shared_models("opensim/Geometry", "*.vtp") or [
    pytest.param(None, marks=pytest.mark.skip(reason="../shared/models is absent: no real OpenSim geometry here"))])
def test_opensims_geometry_files(path):
    """Each real file: every point, and one triangle per triangle polygon its Piece counts."""
    from lxml import etree
    root = etree.parse(str(path)).getroot()
    pieces = root.findall(".//Piece")
    n_points = sum(int(p.get("NumberOfPoints")) for p in pieces)
    vertices, faces = load_mesh(path)
    assert vertices.shape == (n_points, 3) and len(faces) > 0
    first = np.array(pieces[0].find("Points/DataArray").text.split(), float).reshape(-1, 3)
    np.testing.assert_allclose(vertices[:len(first)], first)
    # the triangles close the surface: every edge is shared by two triangles (box.vtp: 12 triangles)
    if path.name in ("box.vtp", "block.vtp", "sphere.vtp"):
        edges = {}
        for a, b, c in faces:
            for e in ((a, b), (b, c), (c, a)):
                key = tuple(sorted(map(tuple, vertices[list(e)].round(6).tolist())))
                edges[key] = edges.get(key, 0) + 1
        assert set(edges.values()) == {2}
