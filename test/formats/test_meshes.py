"""Mesh files -> (vertices, faces): OBJ, STL (ascii and binary), Collada."""
import re
import struct

import numpy as np
import pytest
from conftest import OWN_MODELS, shared_model

from mbsim_ros import ModelError
from mbsim_ros.formats import meshes
from mbsim_ros.formats.meshes import MeshError, load_mesh

MESHES = OWN_MODELS / "urdf" / "meshes"


def enclosed_volume(vertices, faces):
    """Signed volume by the divergence theorem: exact for a closed, outward-oriented mesh,
    so a wrong index, a lost face or a flipped triangle changes it."""
    a, b, c = (vertices[faces[:, k]] for k in range(3))
    return float(np.einsum("ij,ij->i", a, np.cross(b, c)).sum() / 6.0)


# Tolerance: the test meshes have coordinates that are exact binary fractions, so volumes and
# vertices agree to rounding of a few operations; 1e-12 is far below any real error.
TOL = 1e-12


def test_obj_polygons_negative_indices_and_slash_syntax():
    v, f = load_mesh(MESHES / "quad_pyramid.obj")
    assert v.shape == (5, 3)
    # a quad base (2 triangles) + 4 sides, written with v/vt/vn, v//vn, v/vt and negative indices
    assert f.shape == (6, 3)
    assert enclosed_volume(v, f) == pytest.approx(1 / 3, abs=TOL)   # pyramid: base 1 x 1, height 1
    assert sorted(map(tuple, f.tolist()))[0] == (0, 1, 4)            # "f 1//1 2//1 5//1"
    assert (1, 2, 4) in map(tuple, f.tolist())                       # "f -4 -3 -1" after 5 vertices


def test_scale_multiplies_each_axis():
    v, f = load_mesh(MESHES / "quad_pyramid.obj", scale=(1, 2, 3))
    assert v.max(axis=0) == pytest.approx([1, 2, 3], abs=TOL)
    assert enclosed_volume(v, f) == pytest.approx(2.0, abs=TOL)      # 1/3 * 1 * 2 * 3


def test_ascii_stl_merges_shared_corners():
    v, f = load_mesh(MESHES / "tetra.stl")
    assert v.shape == (4, 3) and f.shape == (4, 3)
    assert enclosed_volume(v, f) == pytest.approx(1 / 6, abs=TOL)


def write_binary_stl(path, triangles, header=b"binary stl"):
    with open(path, "wb") as out:
        out.write(header.ljust(80, b" "))
        out.write(struct.pack("<I", len(triangles)))
        for tri in triangles:
            out.write(struct.pack("<12fH", 0, 0, 0, *np.ravel(tri), 0))


TETRA = [[(0, 0, 0), (0, 1, 0), (1, 0, 0)], [(0, 0, 0), (1, 0, 0), (0, 0, 1)],
         [(0, 0, 0), (0, 0, 1), (0, 1, 0)], [(1, 0, 0), (0, 1, 0), (0, 0, 1)]]


@pytest.mark.parametrize("header", [b"binary stl", b"solid but binary"])
def test_binary_stl_even_when_the_header_says_solid(tmp_path, header):
    path = tmp_path / "tetra.stl"
    write_binary_stl(path, TETRA, header)
    v, f = load_mesh(path)
    assert v.shape == (4, 3) and f.shape == (4, 3)
    assert enclosed_volume(v, f) == pytest.approx(1 / 6, abs=TOL)


def test_collada_applies_node_transforms_and_unit():
    v, f = load_mesh(MESHES / "two_nodes.dae")
    # one geometry (4 positions; 1 triangle + a quad polylist + a triangle polygon = 4 triangles)
    # instanced twice: node a translates by 100 (cm), node b rotates 90 deg about z and its
    # child scales by 2; <unit meter="0.01"> turns centimetres into metres.
    square = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0]], dtype=float)
    node_a = (square + [100, 0, 0]) * 0.01
    node_b = (2 * square) @ np.array([[0, -1, 0], [1, 0, 0], [0, 0, 1]]).T * 0.01
    np.testing.assert_allclose(v, np.vstack([node_a, node_b]), atol=1e-15)
    expected = [[0, 1, 2], [0, 1, 3], [0, 3, 2], [1, 3, 2]]
    np.testing.assert_array_equal(f, np.vstack([expected, np.array(expected) + 4]))


def test_collada_r2d2_finger_matches_its_float_array_and_node_scale():
    path = shared_model("urdf", "meshes", "l_finger.dae")
    text = path.read_text()
    raw = re.search(r'<float_array id="finger_M2K_modShape-positions-array"[^>]*>([^<]*)<', text)
    positions = np.array(raw.group(1).split(), dtype=float).reshape(-1, 3)
    v, f = load_mesh(path)
    # the only node: identity rotations, <scale>0.1 0.1 0.10125</scale>, unit 1 m
    np.testing.assert_allclose(v, positions * [0.1, 0.1, 0.10125], rtol=0, atol=1e-15)
    assert f.shape == (2000, 3)       # <triangles count="2000">
    assert f.max() == len(v) - 1


@pytest.mark.parametrize("name, content, expected", [
    ("bad.obj", "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 x\n", "line 4"),
    ("out_of_range.obj", "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 9\n", "does not exist"),
    ("zero_index.obj", "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 0 1 2\n", "start at 1"),
    ("empty.obj", "# nothing\n", "no triangles"),
    ("noise.stl", "\x00\x01garbage that is neither ascii nor binary stl", "neither a binary STL"),
    ("odd.stl", "solid x\nfacet normal 0 0 1\nouter loop\nvertex 0 0 0\nvertex 1 0 0\nendloop\nendfacet\nendsolid\n",
     "3 per facet"),
    ("bad_vertex.stl", "solid x\n vertex 0 zero 0\nendsolid\n", "expected 3 numbers"),
    ("not_xml.dae", "<COLLADA><library_geometries>", "not well-formed XML"),
    ("other.dae", "<?xml version='1.0'?><svg/>", "expected <COLLADA>"),
    ("mesh.ply", "ply\n", "unknown mesh format"),
])
def test_garbage_raises_mesh_error_naming_the_file(tmp_path, name, content, expected):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(MeshError) as info:
        load_mesh(path)
    message = str(info.value)
    assert str(path) in message and expected in message
    assert isinstance(info.value, ModelError)


def test_missing_file_raises_mesh_error(tmp_path):
    with pytest.raises(MeshError, match="no such mesh file"):
        load_mesh(tmp_path / "absent.stl")


def test_new_formats_plug_in_by_extension(tmp_path, monkeypatch):
    def read_tri(path):
        return np.eye(3), np.array([[0, 1, 2]])

    monkeypatch.setitem(meshes.READERS, ".tri", read_tri)
    path = tmp_path / "x.tri"
    path.write_text("anything")
    v, f = load_mesh(path, scale=(2, 2, 2))
    np.testing.assert_array_equal(v, 2 * np.eye(3))
    np.testing.assert_array_equal(f, [[0, 1, 2]])
