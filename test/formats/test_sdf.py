"""SDFormat loader (issue 38): against DART's own SDF parser (mass matrix, Coriolis + gravity
forces at random states to 1e-9 relative, link poses), Gazebo's example worlds (every model
loads), sdformat's own expectations for frames, includes and 1.4 axes, and bad input."""
import math
import os
import pathlib
import warnings

import numpy as np
import pytest

import mbsim_ros as mb
from mbsim_ros import ModelError
from mbsim_ros.model.transforms import make_transform, rpy_to_matrix
from sdf_dart import compare, dart_skeletons

HERE = pathlib.Path(__file__).resolve().parents[1] / "models" / "sdf"
GAZEBO = HERE / "gazebo"
TOL = 1e-9    # relative: both sides are exact rigid-body algorithms in float64 (seen: ~1e-15)

# Gazebo's example worlds DART's parser reads (it needs every inertia entry and every default
# element written out; it takes a missing <inertia> as mass * identity where SDFormat says
# identity, and ignores an inertial frame's rotation, so worlds with those are not compared)
DART_WORLDS = ["diff_drive.sdf", "apply_joint_force.sdf", "joint_controller.sdf", "detachable_joint.sdf",
               "trajectory_follower.sdf", "world_joint.sdf"]


def load(path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return mb.load_model(path, **kw)


@pytest.fixture(autouse=True)
def resource_path(monkeypatch):
    monkeypatch.setenv("GZ_SIM_RESOURCE_PATH", str(GAZEBO / "models"))


def test_every_joint_type_matches_dart():
    path = HERE / "joint_zoo.sdf"
    model = load(path)
    assert {j.params.get("sdf_type") for j in model.joints} >= {"revolute", "prismatic", "universal", "ball",
                                                                "revolute2", "fixed", "screw"}
    skeletons = dart_skeletons(path)
    # DART reads <thread_pitch> as metres per revolution; SDFormat says radians per metre with a
    # left-handed positive thread (joint.sdf): give DART the pitch the spec means
    screw = model.joint("screw")
    assert screw.pitch == pytest.approx(-2 * math.pi / 10.0)
    for s in skeletons:
        for i in range(s.getNumJoints()):
            if s.getJoint(i).getType() == "ScrewJoint":
                s.getJoint(i).setPitch(screw.pitch)
    mass, bias, pose = compare(model, skeletons, states=30)
    assert mass < TOL and bias < TOL and pose < 1e-12


@pytest.mark.parametrize("name", DART_WORLDS)
def test_gazebo_world_matches_dart(name):
    model = load(GAZEBO / name)
    mass, bias, pose = compare(model, dart_skeletons(GAZEBO / name), states=10)
    assert mass < TOL and bias < TOL and pose < 1e-12


def _declared_links(path):
    """(model name, link name) of every <link> written in a world file (includes aside)."""
    from lxml import etree
    root = etree.parse(str(path), etree.XMLParser(recover=True)).getroot()
    out = []
    for model in root.iter("model"):
        if model.getparent().tag != "world":
            continue
        for link in model.iter("link"):
            scope = [m.get("name") for m in link.iterancestors("model")][::-1]
            out.append((scope[0], "::".join(scope[1:] + [link.get("name")])))
    return out


@pytest.mark.parametrize("name", sorted(p.name for p in GAZEBO.glob("*.sdf")))
def test_gazebo_example_world_loads_every_model(name):
    model = load(GAZEBO / name)
    names = {l.name for l in model.links}
    declared = _declared_links(GAZEBO / name)
    assert declared
    for top, link in declared:
        assert link in names or f"{top}::{link}" in names, (top, link)
    assert len(model.links) == len(declared)


def test_world_settings_gravity_step_and_real_time_factor(tmp_path):
    p = tmp_path / "w.sdf"
    p.write_text("""<sdf version="1.9"><world name="w"><gravity>0 0 -3.7</gravity>
      <physics name="slow" type="dart"><max_step_size>0.004</max_step_size><real_time_factor>0.5</real_time_factor></physics>
      <physics name="fast" default="true" type="ode"><max_step_size>0.002</max_step_size><real_time_factor>2</real_time_factor></physics>
      <light name="sun" type="directional"/><plugin filename="x" name="y"/>
      <model name="m"><link name="l"/></model></world></sdf>""")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = mb.load_model(p)
    assert model.gravity.tolist() == [0, 0, -3.7]
    assert model.settings == {"time_step": 0.002, "real_time_factor": 2.0}
    notes = [str(w.message) for w in caught]
    assert any("not simulated, ignored" in n and "<light>" in n and "<plugin>" in n for n in notes), notes
    assert model.joints[0].type == "free"         # a link no joint holds floats


def test_nested_include_with_frames_as_sdformat_expects():
    """sdformat's test/integration/nested_model.cc NestedModelWithFrames: test_model_with_frames
    included as M1 at (10, 0, 0, 0, 0, pi/2) inside ParentModel. The model file writes pi/2 as
    1.5708, so its frames are right to 1e-6 (gz-math's own comparison tolerance)."""
    text = """<sdf version='1.7'><world name='default'><model name='ParentModel'><include>
      <uri>model://test_model_with_frames</uri><name>M1</name><pose>10 0 0 0 0 1.5707963267948966</pose>
      </include></model></world></sdf>"""
    from mbsim_ros.formats.sdf import load_sdf
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = load_sdf(str(GAZEBO / "nested.sdf"), text=text)
    X = lambda x, y, z, r, p, yw: make_transform(rpy_to_matrix([r, p, yw]), [x, y, z])
    model1 = X(10, 0, 0, 0, 0, math.pi / 2)
    frame1 = model1 @ X(0, 0, 0, math.pi / 2, 0, 0)
    frame2 = frame1 @ X(0, 0, 0, 0, math.pi / 4, 0)
    T = mb.link_transforms(model, model.initial_q())
    np.testing.assert_allclose(T["M1::L1"], frame1, atol=1e-6)
    np.testing.assert_allclose(T["M1::L2"], frame1 @ X(1, 0, 0, 0, 0, 0), atol=1e-6)
    j = model.joint("M1::J1")
    R_joint = T[j.child][:3, :3] @ j.child_pose[:3, :3]
    np.testing.assert_allclose(R_joint @ j.axis, frame2[:3, :3] @ [0, 0, 1], atol=1e-6)
    np.testing.assert_allclose(R_joint @ j.axis2, frame2[:3, :3] @ [1, 0, 0], atol=1e-6)
    frames = {f.name: f for f in model.frames}
    F1 = frames["M1::F1"]
    np.testing.assert_allclose(T[F1.link] @ F1.pose, frame1, atol=1e-6)


def test_included_1_4_axes_are_in_the_model_frame():
    """sdformat's NestedInclude: the same double pendulum in SDFormat 1.5 and 1.4 (1.4 axes are
    in the model frame), each included at its own pose: link poses and world axes agree."""
    text = """<sdf version='1.5'><world name='default'>
      <include><uri>model://double_pendulum_kinematics</uri><pose>10 0 0 0 0 1.5707963267948966</pose></include>
      <model name='include_with_rotation'><include><uri>model://double_pendulum_kinematics</uri>
        <pose>-10 0 0 0 0 1.5707963267948966</pose></include></model>
      <model name='include_with_rotation_1.4'><include><uri>model://double_pendulum_kinematics_14</uri>
        <pose>0 10 0 0 0 1.5707963267948966</pose></include></model></world></sdf>"""
    from mbsim_ros.formats.sdf import load_sdf
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = load_sdf(str(GAZEBO / "nested.sdf"), text=text)
    T = mb.link_transforms(model, model.initial_q())
    name = "double_pendulum_kinematics"
    # names are scoped from the top model down: the nested include's links are "<include>::<link>"
    prefixes = {"": (10, 0), f"{name}::": (-10, 0), f"{name}_14::": (0, 10)}
    Rz = rpy_to_matrix([0, 0, math.pi / 2])
    raw = {}
    for prefix, (x, y) in prefixes.items():
        base = make_transform(Rz, [x, y, 0])
        for link in ("base", "upper_link", "lower_link"):
            rel = np.linalg.inv(base) @ T[prefix + link]
            raw.setdefault(link, rel)
            np.testing.assert_allclose(rel, raw[link], atol=1e-12)
            assert model.parent_joint(prefix + link).type == "free" if link == "base" else True
        for jn in ("upper_joint", "lower_joint"):
            j = model.joint(prefix + jn)
            R_joint = T[j.child][:3, :3] @ j.child_pose[:3, :3]
            np.testing.assert_allclose(R_joint @ j.axis, Rz @ [1, 0, 0], atol=1e-12)


def test_pose_relative_to_placement_frame_and_degrees(tmp_path):
    p = tmp_path / "m.sdf"
    p.write_text("""<sdf version="1.9"><model name="m" placement_frame="tip">
      <pose degrees="true">1 2 3 0 0 90</pose>
      <frame name="f"><pose>0 0 1 0 0 0</pose></frame>
      <link name="a"><pose relative_to="f">1 0 0 0 0 0</pose></link>
      <link name="b"><pose relative_to="a" rotation_format="quat_xyzw">0 1 0 0 0 0.7071067811865476 0.7071067811865476</pose></link>
      <frame name="tip" attached_to="b"><pose relative_to="b">0 0 0.5 0 0 0</pose></frame>
      <joint name="j" type="revolute"><pose relative_to="a">0 0 0 0 0 0</pose><parent>a</parent><child>b</child>
        <axis><xyz expressed_in="__model__">1 0 0</xyz></axis></joint>
      <joint name="fix" type="fixed"><parent>world</parent><child>a</child></joint>
    </model></sdf>""")
    model = load(p)
    T = mb.link_transforms(model, model.initial_q())
    a_m = make_transform(p=[1, 0, 1])                           # a in the model frame
    b_m = a_m @ make_transform(rpy_to_matrix([0, 0, math.pi / 2]), [0, 1, 0])
    tip_m = b_m @ make_transform(p=[0, 0, 0.5])
    # the pose places the placement frame (tip): X_W_model = X_pose inv(X_model_tip)
    X_W_m = make_transform(rpy_to_matrix([0, 0, math.pi / 2]), [1, 2, 3]) @ np.linalg.inv(tip_m)
    np.testing.assert_allclose(T["a"], X_W_m @ a_m, atol=1e-12)
    np.testing.assert_allclose(T["b"], X_W_m @ b_m, atol=1e-12)
    j = model.joint("j")
    R_joint = T["b"][:3, :3] @ j.child_pose[:3, :3]
    np.testing.assert_allclose(R_joint @ j.axis, X_W_m[:3, :3] @ [1, 0, 0], atol=1e-12)


def test_limits_dynamics_mimic_static_and_continuous(tmp_path):
    p = tmp_path / "m.sdf"
    p.write_text("""<sdf version="1.11"><world name="w">
      <model name="ground"><static>true</static><link name="g"><collision name="c"><geometry><plane><normal>0 0 1</normal></plane></geometry>
        <surface><friction><ode><mu>0.6</mu></ode></friction></surface></collision></link></model>
      <model name="r"><link name="base"/><link name="a"/><link name="b"/><link name="w"/>
      <joint name="fix" type="fixed"><parent>world</parent><child>base</child></joint>
      <joint name="ja" type="revolute"><parent>base</parent><child>a</child><axis><xyz>0 0 1</xyz>
        <limit><lower>-1</lower><upper>2</upper><effort>5</effort><velocity>-1</velocity></limit>
        <dynamics><damping>0.3</damping><friction>0.1</friction><spring_reference>0.2</spring_reference>
        <spring_stiffness>4</spring_stiffness></dynamics></axis></joint>
      <joint name="jb" type="prismatic"><parent>base</parent><child>b</child><axis><xyz>1 0 0</xyz>
        <mimic joint="ja" axis="axis"><multiplier>2</multiplier><offset>0.5</offset><reference>0.1</reference></mimic></axis></joint>
      <joint name="wheel" type="continuous"><parent>base</parent><child>w</child><axis><xyz>0 1 0</xyz>
        <limit><lower>-1</lower><upper>1</upper></limit></axis></joint>
      </model></world></sdf>""")
    model = load(p)
    ja, wheel = model.joint("ja"), model.joint("wheel")
    assert (ja.lower[0], ja.upper[0], ja.effort_limit[0], ja.velocity_limit[0]) == (-1, 2, 5, np.inf)
    assert (ja.damping[0], ja.friction[0], ja.rest_position[0], ja.stiffness[0]) == (0.3, 0.1, 0.2, 4)
    assert wheel.lower[0] == -np.inf and wheel.upper[0] == np.inf
    (c,) = model.couplers
    assert (c.dependent, c.independent) == ("jb", "ja")
    assert c.function(1.0) == pytest.approx(2 * (1.0 - 0.1) + 0.5)       # offset + multiplier (leader - reference)
    g = model.link("g")
    assert model.parent_joint("g").type == "fixed" and g.collisions[0].kind == "plane"
    assert g.collisions[0].friction == 0.6


def test_inertial_frame_rotation_and_auto_inertia(tmp_path):
    p = tmp_path / "m.sdf"
    p.write_text("""<sdf version="1.11"><model name="m">
      <link name="a"><inertial><pose>0.1 0 0 0 0 1.5707963267948966</pose><mass>2</mass>
        <inertia><ixx>1</ixx><iyy>2</iyy><izz>3</izz><ixy>0</ixy><ixz>0</ixz><iyz>0</iyz></inertia></inertial></link>
      <link name="b"><inertial auto="true"/><collision name="c"><density>500</density>
        <geometry><box><size>0.2 0.4 0.6</size></box></geometry></collision></link>
      <link name="c"><inertial auto="true"><mass>3</mass></inertial><collision name="c"><pose>0 0 1 0 0 0</pose>
        <geometry><sphere><radius>0.5</radius></sphere></geometry></collision></link>
    </model></sdf>""")
    model = load(p)
    a, b, c = model.link("a"), model.link("b"), model.link("c")
    np.testing.assert_allclose(a.inertia, np.diag([2, 1, 3]), atol=1e-12)      # the inertial frame turned 90 deg about z
    np.testing.assert_allclose(a.com, [0.1, 0, 0])
    m = 500 * 0.2 * 0.4 * 0.6
    assert b.mass == pytest.approx(m)
    np.testing.assert_allclose(b.inertia, m / 12 * np.diag([0.16 + 0.36, 0.04 + 0.36, 0.04 + 0.16]), rtol=1e-12)
    assert c.mass == pytest.approx(3) and c.com.tolist() == [0, 0, 1]
    np.testing.assert_allclose(c.inertia, 0.4 * 3 * 0.25 * np.eye(3), rtol=1e-12)


def test_convert_world_to_urdf_round_trips(tmp_path):
    """mbsim convert's path: every link where it was relative to its tree's root (a floating
    root's pose is the URDF's odom -> root transform, not part of the URDF)."""
    model = load(GAZEBO / "diff_drive.sdf")
    (tmp_path / "w.urdf").write_text(mb.to_urdf(model, mesh_dir=str(tmp_path)))
    back = load(tmp_path / "w.urdf")

    def relative_to_root(m):
        T = mb.link_transforms(m, m.initial_q())
        out = {}
        for link in T:
            root = link
            while m.parent_joint(root).parent is not None and m.parent_joint(root).type != "free":
                root = m.parent_joint(root).parent
            out[link] = np.linalg.inv(T[root]) @ T[link]
        return out
    T1, T2 = relative_to_root(model), relative_to_root(back)
    assert set(T1) <= set(T2)
    for link in T1:
        np.testing.assert_allclose(T2[link], T1[link], atol=1e-9)


BAD = [
    ("<sdf version='1.7'><model name='m'><link name='a'><pose>1 2</pose></link></model></sdf>", 1, "<pose>", "6 numbers"),
    ("<sdf version='1.7'><model name='m'>\n<link name='a'/>\n<joint name='j' type='hinge'><parent>world</parent>"
     "<child>a</child></joint></model></sdf>", 3, "<joint name=\"j\">", "expected one of"),
    ("<sdf version='1.7'><model name='m'><link name='a'/>\n<joint name='j' type='revolute'><parent>a</parent>"
     "<child>nope</child><axis><xyz>0 0 1</xyz></axis></joint></model></sdf>", 2, "<joint name=\"j\">", "does not exist"),
    ("<sdf version='1.7'><model name='m'><link name='a'><pose relative_to='b'>0 0 0 0 0 0</pose></link>\n"
     "<link name='b'><pose relative_to='a'>0 0 0 0 0 0</pose></link></model></sdf>", 2, "<link name=\"b\">", "cycle"),
    ("<sdf version='1.7'><world name='w'>\n<include><uri>model://no_such_model_here</uri></include></world></sdf>", 2,
     "<include>", "not found"),
    ("<sdf version='0.9'><model name='m'><link name='a'/></model></sdf>", 1, "<sdf>", "version"),
    ("<sdf version='1.7'><model name='m'><link name='a'/><link name='a'/></model></sdf>", 1, "<link name=\"a\">", "already used"),
    ("<sdf version='1.7'><model name='m'><link name='a'><collision name='c'><geometry><box><size>1 -1 1</size></box>"
     "</geometry></collision></link></model></sdf>", 1, "<box>", "> 0"),
    ("<sdf version='1.7'><model name='m'><link name='a'/>\n<link name='b'/><joint name='j' type='revolute'>"
     "<parent>a</parent><child>b</child></joint></model></sdf>", 2, "<joint name=\"j\">", "missing <axis>"),
    ("<sdf version='1.7'><model name='m'><link name='a'", 1, "", "not well-formed XML"),
]


@pytest.mark.parametrize("text, line, element, expected", BAD)
def test_bad_input_names_file_line_and_element(tmp_path, text, line, element, expected):
    p = tmp_path / "bad.sdf"
    p.write_text(text)
    with pytest.raises(ModelError) as e:
        load(p)
    msg = str(e.value)
    assert msg.startswith(f"{p}, line {line}"), msg
    assert element in msg and expected in msg, msg


def test_unknown_elements_are_a_note(tmp_path):
    p = tmp_path / "m.sdf"
    p.write_text("<sdf version='1.7'><model name='m'><link name='a'><wobble/></link><frobnicate/></model></sdf>")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mb.load_model(p)
    notes = [str(w.message) for w in caught if "unknown SDFormat elements" in str(w.message)]
    assert len(notes) == 1 and "<wobble> in <link>" in notes[0] and "<frobnicate> in <model>" in notes[0]


def test_xml_gazebo_accepts_loads(tmp_path):
    """tinyxml2 (Gazebo) reads '--' in comments and undeclared namespace prefixes: so do we."""
    p = tmp_path / "m.sdf"
    p.write_text("<?xml version='1.0'?>\n<!-- a -- comment --><sdf version='1.9'><world name='w'>"
                 "<plugin filename='f' name='n'><gz:policies><x>1</x></gz:policies></plugin>"
                 "<model name='m'><link name='a'/></model></world></sdf>")
    assert [l.name for l in load(p).links] == ["a"]


def test_fuel_include_is_found_in_gazebos_cache(tmp_path, monkeypatch):
    cache = tmp_path / "fuel" / "fuel.gazebosim.org" / "openrobotics" / "models" / "tiny box" / "3"
    cache.mkdir(parents=True)
    (cache / "model.config").write_text("<model><sdf version='1.6'>model.sdf</sdf></model>")
    (cache / "model.sdf").write_text("<sdf version='1.6'><model name='tiny'><link name='body'/></model></sdf>")
    monkeypatch.setenv("GZ_FUEL_CACHE_PATH", str(tmp_path / "fuel"))
    p = tmp_path / "w.sdf"
    p.write_text("<sdf version='1.9'><world name='w'><include>"
                 "<uri>https://fuel.gazebosim.org/1.0/OpenRobotics/models/Tiny Box</uri></include></world></sdf>")
    assert [l.name for l in load(p).links] == ["body"]


def test_auto_inertia_of_a_closed_mesh_is_that_of_the_solid(tmp_path):
    """A 0.1 x 0.2 x 0.3 box as an OBJ mesh (scaled by 2) at density 500: the box's mass,
    centre and inertia (divergence theorem over the faces)."""
    corners = [(x, y, z) for x in (0, 0.1) for y in (0, 0.2) for z in (0, 0.3)]
    faces = [(1, 2, 4), (1, 4, 3), (5, 7, 8), (5, 8, 6), (1, 5, 6), (1, 6, 2), (3, 4, 8), (3, 8, 7),
             (1, 3, 7), (1, 7, 5), (2, 6, 8), (2, 8, 4)]
    (tmp_path / "box.obj").write_text("".join(f"v {x} {y} {z}\n" for x, y, z in corners)
                                      + "".join(f"f {a} {b} {c}\n" for a, b, c in faces))
    p = tmp_path / "m.sdf"
    p.write_text("""<sdf version="1.11"><model name="m"><link name="a"><inertial auto="true"/>
      <collision name="c"><density>500</density><geometry><mesh><uri>box.obj</uri><scale>2 2 2</scale></mesh></geometry>
      </collision></link></model></sdf>""")
    link = load(p).link("a")
    a, b, c = 0.2, 0.4, 0.6
    m = 500 * a * b * c
    assert link.mass == pytest.approx(m, rel=1e-12)
    np.testing.assert_allclose(link.com, [a / 2, b / 2, c / 2], rtol=1e-12)
    np.testing.assert_allclose(link.inertia, m / 12 * np.diag([b * b + c * c, a * a + c * c, a * a + b * b]),
                               rtol=1e-9, atol=1e-15)
