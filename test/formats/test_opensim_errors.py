"""Bad .osim input: one ModelError naming the file, the line and the element, and what was
expected; never a traceback from deep inside, never a hang (Chrono loops forever on an
unknown function type)."""
import re
import warnings

import pytest

from mbsim_ros.formats import load_model
from mbsim_ros.formats.opensim import load_opensim
from mbsim_ros.model import ModelError

BODIES = """<BodySet><objects>
  <Body name="a"><mass>1</mass><inertia>1 1 1 0 0 0</inertia></Body>
  <Body name="b"><mass>1</mass><inertia>1 1 1 0 0 0</inertia></Body>
</objects></BodySet>"""


def _model(tmp_path, body, version=40000, name="bad.osim"):
    path = tmp_path / name
    path.write_text(f'<?xml version="1.0"?>\n<OpenSimDocument Version="{version}"><Model name="m">\n{body}\n'
                    '</Model></OpenSimDocument>\n')
    return path


def _fails(path, *patterns):
    with pytest.raises(ModelError) as info, warnings.catch_warnings():
        warnings.simplefilter("ignore")       # a body left without a joint in these small files
        load_opensim(path)
    message = str(info.value)
    assert message.startswith(str(path)), message
    for p in patterns:
        assert re.search(p, message), f"{p!r} not in {message!r}"
    return message


def _pin(name, parent, child, extra=""):
    return (f'<PinJoint name="{name}"><socket_parent_frame>{parent}</socket_parent_frame>'
            f'<socket_child_frame>{child}</socket_child_frame>{extra}</PinJoint>')


def test_socket_to_a_missing_frame(tmp_path):
    path = _model(tmp_path, BODIES + f"""
<JointSet><objects>
{_pin("j1", "/ground", "/bodyset/a")}
{_pin("j2", "a_offset", "/bodyset/b")}
</objects></JointSet>""")
    _fails(path, r"line 9, <socket_parent_frame> of <PinJoint name=\"j2\">: socket 'a_offset': no Ground or Body or "
                 r"PhysicalOffsetFrame or OffsetFrame or StationDefinedFrame at '/jointset/j2/a_offset' "
                 r"\(relative paths start at the component that names them\)")


def test_offset_frame_on_a_missing_body(tmp_path):
    path = _model(tmp_path, BODIES + """
<JointSet><objects><PinJoint name="j1">
  <socket_parent_frame>ground_offset</socket_parent_frame><socket_child_frame>/bodyset/a</socket_child_frame>
  <frames><PhysicalOffsetFrame name="ground_offset"><socket_parent>/bodyset/nothing</socket_parent></PhysicalOffsetFrame></frames>
</PinJoint></objects></JointSet>""")
    _fails(path, r"line 9, <socket_parent> of <PhysicalOffsetFrame name=\"ground_offset\">: socket '/bodyset/nothing'")


def test_a_joint_without_its_sockets(tmp_path):
    path = _model(tmp_path, BODIES + '<JointSet><objects><PinJoint name="j1"/></objects></JointSet>')
    _fails(path, r"<PinJoint name=\"j1\">: missing <socket_parent_frame>")


def test_custom_joint_with_collinear_axes(tmp_path):
    path = _model(tmp_path, BODIES + """
<JointSet><objects><CustomJoint name="c">
  <socket_parent_frame>/ground</socket_parent_frame><socket_child_frame>/bodyset/a</socket_child_frame>
  <coordinates><Coordinate name="q"/></coordinates>
  <SpatialTransform>
    <TransformAxis name="rotation1"><coordinates>q</coordinates><axis>1 0 0</axis>
      <LinearFunction name="function"><coefficients>1 0</coefficients></LinearFunction></TransformAxis>
    <TransformAxis name="rotation2"><axis>-2 0 0</axis></TransformAxis>
  </SpatialTransform>
</CustomJoint></objects></JointSet>""")
    _fails(path, r"line 10, <SpatialTransform>: rotation1 and rotation2 have collinear axes")


def test_unknown_function_type(tmp_path):
    path = _model(tmp_path, BODIES + """
<JointSet><objects><CustomJoint name="c">
  <socket_parent_frame>/ground</socket_parent_frame><socket_child_frame>/bodyset/a</socket_child_frame>
  <coordinates><Coordinate name="q"/></coordinates>
  <SpatialTransform>
    <TransformAxis name="rotation3"><coordinates>q</coordinates><axis>0 0 1</axis>
      <MultiplierFunction name="function"><function><ClutchedFunction><x>0 1</x></ClutchedFunction></function>
      <scale>2</scale></MultiplierFunction></TransformAxis>
  </SpatialTransform>
</CustomJoint></objects></JointSet>""")
    _fails(path, r"line 12, <ClutchedFunction>: unknown function type 'ClutchedFunction'; expected one of "
                 r"Constant, LinearFunction")


def test_a_body_cycle(tmp_path):
    path = _model(tmp_path, BODIES + f"""
<JointSet><objects>
{_pin("j1", "/bodyset/b", "/bodyset/a")}
{_pin("j2", "/bodyset/a", "/bodyset/b")}
</objects></JointSet>""")
    _fails(path, r"line 8, <PinJoint name=\"j1\">: the joints form a cycle of bodies \(a -> b -> a, each followed by "
                 r"its parent\)")


def test_a_body_with_two_parent_joints(tmp_path):
    path = _model(tmp_path, BODIES + f"""
<JointSet><objects>
{_pin("j1", "/ground", "/bodyset/a")}
{_pin("j2", "/bodyset/b", "/bodyset/a")}
{_pin("j3", "/ground", "/bodyset/b")}
</objects></JointSet>""")
    # j2 runs backwards from a to b (its child frame is nearer the ground), so j3 closes the loop
    _fails(path, r"line 10, <PinJoint name=\"j3\">: body 'b' is already the child of joint 'j2' \(line 9\)")


@pytest.mark.parametrize("kind", ["FreeJoint", "PlanarJoint"])
def test_a_joint_traversed_backwards_that_rotates_and_translates(tmp_path, kind):
    """Its inverse is no joint here: refused by name (rotation-only and translation-only joints
    load reversed: test_opensim_truth.py on reversed_joints.osim and reversed30.osim)."""
    joint = _pin("j1", "/bodyset/a", "/ground").replace("PinJoint", kind)
    path = _model(tmp_path, BODIES + f'<JointSet><objects>{joint}</objects></JointSet>')
    _fails(path, rf"<{kind} name=\"j1\">: a {kind} traversed backwards \(its child frame is nearer the ground, or "
                 r"<reverse>true</reverse>\): its inverse moves rotation and translation together")


@pytest.mark.parametrize("content, pattern", [
    (b"\x89PNG\r\n\x1a\n\x00\x00binary", r"bad\.osim, line 1: not well-formed XML \(expected an OpenSim <OpenSimDocument>"),
    (b"", r"bad\.osim(, line 1)?: not well-formed XML"),
    (b"<OpenSimDocument Version='40000'><Model name='m'><BodySet>", r"bad\.osim, line 1: not well-formed XML"),
    (b"<robot name='r'/>", r"bad\.osim, line 1, <robot name=\"r\">: the root element must be <OpenSimDocument>"),
    (b"<OpenSimDocument Version='forty'><Model/></OpenSimDocument>", r"Version=\"forty\": expected a number"),
    (b"<OpenSimDocument Version='40000'/>", r"<OpenSimDocument>: no <Model> element inside"),
])
def test_files_that_are_not_opensim_models(tmp_path, content, pattern):
    path = tmp_path / "bad.osim"
    path.write_bytes(content)
    _fails(path, pattern)


def test_a_missing_file():
    with pytest.raises(ModelError, match=r"nothing\.osim: no such model file"):
        load_model("nothing.osim")


@pytest.mark.parametrize("body, pattern", [
    ('<Body name="a"><inertia>1 1 1 0 0 0</inertia></Body>', r"<Body name=\"a\">: mass nan: expected a finite number"),
    ('<Body name="a"><mass>-1</mass></Body>', r"mass -1.0: expected a finite number >= 0"),
    ('<Body name="a"><mass>1</mass><inertia>1 1 1</inertia></Body>', r"line 4, <inertia> of <Body name=\"a\">: <inertia>1 1 1</inertia>: expected 6 numbers, got 3"),
    ('<Body name="a"><mass>1</mass><mass_center>0 zero 0</mass_center></Body>', r"<mass_center>0 zero 0</mass_center>: expected numbers"),
    ('<Body><mass>1</mass></Body>', r"a <Body> without a name"),
])
def test_bad_bodies(tmp_path, body, pattern):
    path = _model(tmp_path, f"<BodySet><objects>\n{body}\n</objects></BodySet>")
    _fails(path, pattern)


def test_a_second_body_of_the_same_name(tmp_path):
    path = _model(tmp_path, BODIES.replace('name="b"', 'name="a"'))
    _fails(path, r"line 5, <Body name=\"a\">: a second body named 'a' \(the first is on line 4\)")


def test_unsupported_joint_type(tmp_path):
    path = _model(tmp_path, BODIES + """<JointSet><objects><ConstantCurvatureJoint name="cc">
<socket_parent_frame>/ground</socket_parent_frame><socket_child_frame>/bodyset/a</socket_child_frame>
</ConstantCurvatureJoint></objects></JointSet>""")
    _fails(path, r"<ConstantCurvatureJoint name=\"cc\">: unsupported joint type 'ConstantCurvatureJoint'; expected one "
                 r"of WeldJoint, PinJoint")


def test_reverse_in_a_4x_joint_is_ignored_as_opensim_does(tmp_path):
    path = _model(tmp_path, BODIES + f'<JointSet><objects>{_pin("j1", "/ground", "/bodyset/a", "<reverse>true</reverse>")}'
                                     "</objects></JointSet>")
    with pytest.warns(UserWarning, match=r"<PinJoint name=\"j1\">: <reverse>true</reverse> is not a property of a "
                                         r"4.x joint: ignored, as OpenSim 4.6 ignores it"):
        model = load_model(path)
    joint = model.joint("j1")
    assert (joint.type, joint.parent, joint.child, joint.axis.tolist()) == ("revolute", None, "a", [0, 0, 1])


def test_clamped_default_outside_its_range(tmp_path):
    coordinate = ("<coordinates><Coordinate name=\"q\"><default_value>3</default_value><range>-1 1</range>"
                  "<clamped>true</clamped></Coordinate></coordinates>")
    path = _model(tmp_path, BODIES + f'<JointSet><objects>{_pin("j1", "/ground", "/bodyset/a", coordinate)}'
                                     "</objects></JointSet>")
    _fails(path, r"<Coordinate name=\"q\">: default_value 3 is outside the range \[-1, 1\] of this clamped coordinate")


def test_too_many_coordinates(tmp_path):
    coordinates = "<coordinates><Coordinate name=\"q\"/><Coordinate name=\"p\"/></coordinates>"
    path = _model(tmp_path, BODIES + f'<JointSet><objects>{_pin("j1", "/ground", "/bodyset/a", coordinates)}'
                                     "</objects></JointSet>")
    _fails(path, r"<PinJoint name=\"j1\">: 2 coordinates; a PinJoint has 1")


@pytest.mark.parametrize("axes, pattern", [
    ('<TransformAxis name="rotation1"><coordinates>q p</coordinates><axis>1 0 0</axis></TransformAxis>',
     r"<TransformAxis name=\"rotation1\">: depends on 2 coordinates \(q, p\); only functions of one coordinate"),
    ('<TransformAxis name="rotation1"><coordinates>q</coordinates><axis>0 0 0</axis></TransformAxis>',
     r"<TransformAxis name=\"rotation1\">: a zero <axis>"),
    ('<TransformAxis name="rotation1"><coordinates></coordinates><axis>1 0 0</axis></TransformAxis>',
     r"<Coordinate name=\"q\">: coordinate 'q' of CustomJoint 'c' drives none of its transform axes"),
])
def test_bad_spatial_transforms(tmp_path, axes, pattern):
    path = _model(tmp_path, BODIES + f"""
<JointSet><objects><CustomJoint name="c">
  <socket_parent_frame>/ground</socket_parent_frame><socket_child_frame>/bodyset/a</socket_child_frame>
  <coordinates><Coordinate name="q"/></coordinates>
  <SpatialTransform>{axes}</SpatialTransform>
</CustomJoint></objects></JointSet>""")
    _fails(path, pattern)


def test_force_on_a_missing_coordinate(tmp_path):
    path = _model(tmp_path, BODIES + f"""<JointSet><objects>{_pin("j1", "/ground", "/bodyset/a")}</objects></JointSet>
<ForceSet><objects><CoordinateActuator name="act"><coordinate>knee</coordinate></CoordinateActuator></objects></ForceSet>""")
    _fails(path, r"<CoordinateActuator name=\"act\">: coordinate 'knee' does not exist")


def test_contact_force_on_missing_geometry(tmp_path):
    path = _model(tmp_path, BODIES + f"""<JointSet><objects>{_pin("j1", "/ground", "/bodyset/a")}</objects></JointSet>
<ForceSet><objects><HuntCrossleyForce name="hc"><HuntCrossleyForce::ContactParametersSet><objects>
<HuntCrossleyForce::ContactParameters><geometry>floor ball</geometry></HuntCrossleyForce::ContactParameters>
</objects></HuntCrossleyForce::ContactParametersSet></HuntCrossleyForce></objects></ForceSet>""")
    _fails(path, r"<ForceSet>: contact force 'hc' names contact geometry 'floor', which does not exist")


def test_3x_joint_on_a_missing_parent_body(tmp_path):
    path = _model(tmp_path, """<BodySet><objects>
<Body name="ground"><Joint/></Body>
<Body name="a"><mass>1</mass><Joint><PinJoint name="j"><parent_body>torso</parent_body></PinJoint></Joint></Body>
</objects></BodySet>""", version=30000)
    _fails(path, r"line 5, <PinJoint name=\"j\">: body 'torso' does not exist")


def test_bad_options(tmp_path):
    path = _model(tmp_path, BODIES)
    with pytest.raises(ValueError, match="visuals='all': expected one of meshes, primitives, none"):
        load_opensim(path, visuals="all")
