"""The VRML97 parser (mbsim_ros/formats/vrml.py): syntax only, no OpenHRP meaning."""
import contextlib
import pathlib
import signal

import numpy as np
import pytest

from mbsim_ros import ModelError
from mbsim_ros.formats import vrml

OWN = pathlib.Path(__file__).resolve().parents[1] / "models" / "openhrp"


@contextlib.contextmanager
def deadline(seconds=10.0):
    """Fail (instead of hanging) when the body takes longer than `seconds`: a hang guard with room
    for a loaded CI machine, not a timing (speed is bench/loaders.py)."""
    def on_alarm(signum, frame):
        raise TimeoutError(f"took longer than {seconds} s")
    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def parse(text, path="<test>"):
    return vrml.parse_string(text, path)


def test_header_comments_commas_and_typed_values():
    scene = parse('#VRML V2.0 utf8\n# a comment\nTransform { translation 1, 2, 3 # trailing\n'
                  'rotation 0 1 0 1.5 scale 2 2 2 children [ ] }\n')
    (t,) = scene.roots
    assert t.type == "Transform" and t.line == 3
    np.testing.assert_array_equal(t.fields["translation"], [1, 2, 3])
    np.testing.assert_array_equal(t.fields["rotation"], [0, 1, 0, 1.5])
    assert t.fields["children"] == []


def test_file_without_header_and_with_crlf():
    scene = parse("Shape {\r\n  geometry Box { size 1 2 3 }\r\n}\r\nShape { geometry Sphere { radius 4 } }\r\n")
    assert [n.type for n in scene.roots] == ["Shape", "Shape"]
    assert scene.roots[1].line == 4
    np.testing.assert_array_equal(scene.roots[0].fields["geometry"].fields["size"], [1, 2, 3])


def test_shift_jis_bytes_are_decoded():
    data = "# \u8155 comment\nWorldInfo { title \"\u8155\" }\n".encode("shift_jis")
    text = vrml.decode(data)
    assert parse(text).roots[0].type == "WorldInfo"
    # bytes valid in neither encoding still parse in a comment (dropped), not in a token (issue 19)
    assert parse(vrml.decode(b"# \xff\xfe\xfd\nGroup { }\n")).roots[0].type == "Group"
    with pytest.raises(ModelError, match=r"^bad\.wrl:2: bytes that are neither UTF-8 nor Shift-JIS in "
                                         "'\"a\ufffd\"'; expected VRML97 text in UTF-8"):
        parse(vrml.decode(b"#VRML V2.0 utf8\nWorldInfo { title \"a\xff\" }\n"), "bad.wrl")


@pytest.mark.parametrize("field, value, expected", [
    ("SFInt32 jointId", "99999999999999999999", r"'99999999999999999999' is out of range; expected an SFInt32 in "
                                                 r"-2147483648\.\.2147483647"),
    ("SFInt32 jointId", "0xFFFFFFFFFF", "out of range; expected an SFInt32"),
    ("SFFloat mass", "1e999", r"'1e999' is out of range; expected a Float within \+-1\.8e308"),
    ("SFVec3f p", "0 -2e400 0", r"'-2e400' is out of range"),
])
def test_numbers_out_of_range_name_the_line(field, value, expected):
    ftype, name = field.split()
    text = f"PROTO P [ field {ftype} {name} 0{' 0 0' if ftype == 'SFVec3f' else ''} ] {{ Group {{ }} }}\nP {{\n{name} {value} }}\n"
    with pytest.raises(ModelError, match=rf"^big\.wrl:3: .*{expected}"):
        parse(text, "big.wrl")


def test_mf_fields_bracketed_bare_and_trailing_commas():
    scene = parse("Coordinate { point [ 0 0 0, 1 0 0, 1 1 0, ] }\n"
                  "IndexedFaceSet { coordIndex 7 }\n"
                  "Anchor { url \"a.html\" parameter [ \"x\" \"y\" ] }\n")
    coord, ifs, anchor = scene.roots
    assert coord.fields["point"].shape == (3, 3)
    np.testing.assert_array_equal(ifs.fields["coordIndex"], [7])
    assert anchor.fields["url"] == ["a.html"] and anchor.fields["parameter"] == ["x", "y"]


def test_mfnode_as_single_node_and_sfnode_null():
    scene = parse("Transform { children Shape { geometry NULL } }")
    (shape,) = scene.roots[0].fields["children"]
    assert shape.type == "Shape" and shape.fields["geometry"] is None


def test_def_use_shares_the_node():
    scene = parse("Group { children [ DEF A Shape { geometry Box { } } USE A Transform { children USE A } ] }")
    first, second, transform = scene.roots[0].fields["children"]
    assert first is second and transform.fields["children"][0] is first
    assert first.name == "A"


def test_proto_with_defaults_is_and_expansion():
    scene = parse("""
    PROTO Thing [
      field SFFloat size 2
      exposedField SFVec3f where 1 2 3
      eventIn SFBool poke
      eventOut SFBool poked
      exposedField MFNode children [ ]
    ]
    { Transform { translation IS where children [ DEF INNER Shape { geometry Sphere { radius IS size } } ] } }
    DEF T1 Thing { size 5 children Group { } }
    Thing { }
    """)
    t1, t2 = scene.roots
    assert t1.type == "Thing" and t1.proto is scene.protos["Thing"]
    assert t1.fields["size"] == 5.0 and t2.fields["size"] == 2.0        # default filled in
    np.testing.assert_array_equal(t2.fields["where"], [1, 2, 3])
    (body,) = vrml.instantiate(t1)
    assert body.type == "Transform"
    np.testing.assert_array_equal(body.fields["translation"], [1, 2, 3])
    assert body.fields["children"][0].fields["geometry"].fields["radius"] == 5.0
    (body2,) = vrml.instantiate(t2)
    assert body2.fields["children"][0].fields["geometry"].fields["radius"] == 2.0
    assert body2.fields["children"][0] is not body.fields["children"][0]   # one copy per instance
    assert "poke" not in t1.fields and scene.protos["Thing"].field_kinds["poked"] == "eventOut"


def test_externproto_script_and_route_are_skipped_with_a_note():
    scene = parse("""
    EXTERNPROTO Far [ field SFFloat x exposedField MFNode children ] "far.wrl#Far"
    DEF S Script { url "javascript: function f() { }" field SFBool on TRUE eventIn SFTime t }
    DEF T TimeSensor { loop TRUE }
    ROUTE T.fraction_changed TO S.t
    Far { x 1 }
    Group { }
    """)
    assert [n.type for n in scene.roots] == ["Script", "TimeSensor", "Far", "Group"]
    assert vrml.instantiate(scene.roots[2]) == []
    notes = " ".join(scene.notes)
    assert "1 ROUTE" in notes and "1 Script" in notes and "1 EXTERNPROTO" in notes


def test_inline_resolves_relative_to_the_including_file_and_reads_crlf_shift_jis():
    scene = vrml.parse_file(OWN / "robot_all.wrl")
    inlines = [n for n in scene.walk() if n.type == "Inline"]
    assert len(inlines) == 1
    (transform,) = inlines[0].inlined
    assert transform.file.endswith("parts/arm_shape.wrl") and transform.line == 2
    np.testing.assert_array_equal(transform.fields["scale"], [2, 2, 2])
    assert len(scene.files) == 2


def test_same_inline_twice_is_parsed_once(tmp_path):
    (tmp_path / "part.wrl").write_text("Shape { geometry Box { } }\n")
    main = tmp_path / "main.wrl"
    main.write_text('Group { children [ Inline { url "part.wrl" } Inline { url ["missing.wrl", "part.wrl"] } ] }\n')
    a, b = vrml.parse_file(main).roots[0].fields["children"]
    assert a.inlined is b.inlined and a.inlined[0].type == "Shape"


def test_grouping_nodes_and_geometry_fields_are_typed():
    scene = parse("""
    Switch { whichChoice 0 choice [ Shape { } ] }
    LOD { range [ 1 2 ] level [ Group { } ] }
    Billboard { axisOfRotation 0 1 0 children [ ] }
    Collision { collide FALSE children [ ] }
    ElevationGrid { xDimension 2 zDimension 2 height [ 0 1 2 3 ] }
    Extrusion { crossSection [ 0 0, 1 0 ] spine [ 0 0 0, 0 1 0 ] orientation 0 0 1 0 }
    """)
    switch, lod, billboard, collision, grid, extrusion = scene.roots
    assert switch.fields["whichChoice"] == 0 and len(switch.fields["choice"]) == 1
    np.testing.assert_array_equal(lod.fields["range"], [1, 2])
    assert collision.fields["collide"] is False
    assert grid.fields["xDimension"] == 2 and grid.fields["height"].shape == (4,)
    assert extrusion.fields["crossSection"].shape == (2, 2)
    assert extrusion.fields["orientation"].shape == (1, 4)


def test_transform_matrix_composes_center_rotation_and_scale():
    (t,) = parse("Transform { translation 1 0 0 center 0 1 0 rotation 0 0 1 1.5707963267948966 "
                 "scale 2 2 2 }").roots
    M = vrml.transform_matrix(t)
    # T * C * R * S * C^-1 applied to the origin: C^-1 -> (0,-1,0), S -> (0,-2,0), R -> (2,0,0), C, T
    np.testing.assert_allclose(M @ [0, 0, 0, 1], [3, 1, 0, 1], atol=1e-12)


def test_deep_nesting_does_not_recurse():
    """As deep as the parser allows (MAX_NESTING, ten times Python's recursion limit)."""
    depth = vrml.MAX_NESTING
    text = "Group { children [ " * depth + "] } " * depth
    with deadline(5.0):
        scene = parse(text)
    node, levels = scene.roots[0], 1
    while node.fields["children"]:
        node, levels = node.fields["children"][0], levels + 1
    assert levels == depth


def test_parses_a_large_file():
    body = "Shape { geometry IndexedFaceSet { coord Coordinate { point [ %s ] } coordIndex [ %s ] } }" % (
        ", ".join("%d 0.5 1e-3" % i for i in range(30000)), " ".join("0 1 2 -1" for _ in range(10000)))
    with deadline(10.0):       # a hang guard against accidental quadratic code; speed is bench/loaders.py
        scene = parse(body)
    assert scene.roots[0].fields["geometry"].fields["coord"].fields["point"].shape == (30000, 3)
    assert scene.roots[0].fields["geometry"].fields["coordIndex"].shape == (40000,)


# -- bad input: a ModelError naming file, line and what was expected, within a second ------------
BAD_SYNTAX = [
    ("unbalanced_close", "Group {\n  children [\n    Shape { }\n  }\n}\n", 4, "expected a node or ']'"),
    ("unbalanced_open", "Group {\n  children [\n    Shape { }\n", 4,
     "expected ']' to close field 'children' of Group opened at line 1"),
    ("unclosed_node", "Group {\n  children [ ]\n", 3, "expected '}' to close Group opened at line 1"),
    ("extra_close", "Group { }\n}\n", 2, "unbalanced"),
    ("unknown_use", "Group {\n children [ USE NOPE ]\n}\n", 2, "USE NOPE"),
    ("wrong_type", "Transform {\n  translation 1 \"two\" 3\n}\n", 2, "expected SFVec3f"),
    ("wrong_bool", "Collision { collide maybe }\n", 1, "expected SFBool"),
    ("unknown_field", "Transform {\n\n  translaton 1 2 3 }\n", 3, "no field 'translaton'"),
    ("unknown_node", "Group { children [\n Joint { } ] }\n", 2, "unknown node type 'Joint'"),
    ("unterminated_string", "WorldInfo {\n title \"abc }\n", 2, "unterminated string"),
    ("proto_field_type", "PROTO P [ field SFFloat x \"a\" ] { }\n", 1, "expected SFFloat"),
    ("bad_int", "Switch { whichChoice 1.5 }\n", 1, "expected SFInt32"),
]


@pytest.mark.parametrize("name,text,line,expected", BAD_SYNTAX, ids=[b[0] for b in BAD_SYNTAX])
def test_bad_syntax_raises_model_error_with_file_and_line(tmp_path, name, text, line, expected):
    path = tmp_path / f"{name}.wrl"
    path.write_text(text)
    with deadline(), pytest.raises(ModelError) as err:
        vrml.parse_file(path)
    message = str(err.value)
    assert message.startswith(f"{path}:{line}:"), message
    assert expected in message


def test_missing_inline_file_names_the_including_file_and_line(tmp_path):
    path = tmp_path / "main.wrl"
    path.write_text('Group {\n  children [\n    Inline { url "parts/nothere.wrl" }\n  ]\n}\n')
    with deadline(), pytest.raises(ModelError) as err:
        vrml.parse_file(path)
    assert str(err.value).startswith(f"{path}:3:")
    assert "nothere.wrl" in str(err.value) and "file not found" in str(err.value)


def test_inline_cycle_is_detected(tmp_path):
    (tmp_path / "a.wrl").write_text('Group { children Inline { url "b.wrl" } }\n')
    (tmp_path / "b.wrl").write_text('\n\nGroup { children Inline { url "a.wrl" } }\n')
    with deadline(), pytest.raises(ModelError) as err:
        vrml.parse_file(tmp_path / "a.wrl")
    message = str(err.value)
    assert message.startswith(f"{tmp_path / 'b.wrl'}:3:")
    assert "a.wrl -> b.wrl -> a.wrl" in message


def test_self_inline_is_a_cycle(tmp_path):
    (tmp_path / "self.wrl").write_text('Inline { url "self.wrl" }\n')
    with deadline(), pytest.raises(ModelError, match="includes itself"):
        vrml.parse_file(tmp_path / "self.wrl")


def test_zero_rotation_axis_is_an_error():
    (t,) = parse("\nTransform { rotation 0 0 0 1 }", path="zero.wrl").roots
    with pytest.raises(ModelError, match=r"^zero.wrl:2: .*expected a non-zero rotation axis"):
        vrml.transform_matrix(t)


def test_unreadable_file():
    with pytest.raises(ModelError, match="cannot be read"):
        vrml.parse_file("/nonexistent/x.wrl")
