"""The MJCF loader: keyframes, actuators, sensors, equality constraints, recognition by content,
conversion to URDF, the command line, and bad input (ModelError naming file, line, element)."""
import os
import sysconfig
import warnings

import numpy as np
import pytest

import mbsim_ros as mb
from mbsim_ros import cli
from mbsim_ros.model import ModelError
from conftest import OWN_MODELS

mujoco = pytest.importorskip("mujoco")

ACTUATED = str(OWN_MODELS / "mjcf" / "actuated.xml")
FEATURES = str(OWN_MODELS / "mjcf" / "features.xml")
SITE = sysconfig.get_paths()["purelib"]


def _load(path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return mb.load_model(path, **kw)


def test_a_keyframe_is_the_initial_state_mujoco_resets_to():
    model = _load(ACTUATED, keyframe="home")
    m = mujoco.MjModel.from_xml_path(ACTUATED)
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, 0)
    mujoco.mj_forward(m, d)
    poses = mb.link_transforms(model, model.initial_q())
    for i in range(1, m.nbody):
        X = poses[mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, i)]
        assert np.allclose(X[:3, 3], d.xpos[i], atol=1e-12)
        assert np.allclose(X[:3, :3], d.xmat[i].reshape(3, 3), atol=1e-12)
    # the free joint's velocity: MuJoCo's world-frame linear velocity, ours in the body frame
    R = d.xmat[1].reshape(3, 3)
    assert np.allclose(R @ model.initial_v()[:3], d.qvel[:3], atol=1e-12)
    assert np.allclose(model.initial_v()[3:], d.qvel[3:], atol=1e-12)
    assert [a.control for a in model.actuators] == pytest.approx([0.3, -0.6, 0.4, 0.1, 0.2])   # 0.5 clamped by forcerange


def test_an_unknown_keyframe_names_the_ones_there_are():
    with pytest.raises(ModelError, match="no keyframe 'stand'; the keyframes are home"):
        _load(ACTUATED, keyframe="stand")


def test_actuator_forces_equal_mujocos_at_the_keyframe():
    """qfrc_actuator + qfrc_passive of MuJoCo (ctrl from the key, clamped) = our actuators'
    gain * control plus the joint springs and dampers the servos' bias joined."""
    import mjcf_reference as ref
    model = _load(ACTUATED, keyframe="home")
    m = mujoco.MjModel.from_xml_path(ACTUATED)
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, 0)
    mujoco.mj_forward(m, d)
    q, v = model.initial_q(), model.initial_v()
    tau = ref.passive_ours(model, q, v) + ref.actuators_ours(model, [a.control for a in model.actuators])
    mj = d.qfrc_actuator + d.qfrc_passive
    R = d.xmat[1].reshape(3, 3)
    mj[:3] = R.T @ mj[:3]        # a force on the free joint's linear coordinates, in our frame
    assert np.allclose(tau, mj, rtol=1e-12, atol=1e-12)
    motor = next(a for a in model.actuators if a.name == "tail_motor")
    assert (motor.min_control, motor.max_control) == (-0.4, 0.4)   # forcerange clamps gain * ctrl


def test_sensors_cameras_and_equalities_map_onto_the_model():
    model = _load(ACTUATED)
    sensors = {s.name: s for s in model.sensors}
    assert {k: s.type for k, s in sensors.items()} == {
        "imu_accel": "accelerometer", "imu_gyro": "gyro", "tail_force": "force", "lidar": "range",
        "overview": "camera"}
    assert sensors["tail_force"].params == {"force": "tail_force", "torque": "tail_torque"}
    # the rangefinder looks along the site's +z, our range sensor along its -z
    assert np.allclose(sensors["lidar"].pose[:3, :3] @ [0, 0, -1], [1, 0, 0])
    assert sensors["overview"].params == {"width": 64, "height": 48, "fieldOfView": pytest.approx(np.pi / 3)}
    assert any("jointpos" in w for w in model.warnings)
    # connect and weld: both anchors at one world point at qpos0
    poses = mb.link_transforms(model, model.initial_q())
    for c in model.constraints:
        T1 = poses[c.link1]
        T2 = np.eye(4) if c.link2 is None else poses[c.link2]
        assert np.allclose(T1[:3, :3] @ c.pos1 + T1[:3, 3], T2[:3, :3] @ c.pos2 + T2[:3, 3], atol=1e-12)
    assert {c.name: c.type for c in model.constraints} == {"ankle_pin": "ball", "flap_weld": "weld"}
    (coupler,) = model.couplers
    # MuJoCo: q1 - ref1 = 0.1 (q2 - ref2) + 0.02 (q2 - ref2)^2 with ref1 = 0.05, ref2 = 0
    assert coupler.function(0.7) == pytest.approx(0.05 + 0.1 * 0.7 + 0.02 * 0.49)


def test_mjcf_is_known_by_its_root_not_its_extension(tmp_path):
    path = tmp_path / "robot.model"
    path.write_text(open(FEATURES).read().replace('<include file="features_defaults.xml"/>', ""))
    with pytest.raises(ModelError, match=r"class=\"limb\" is not a <default> class"):
        _load(path)          # read as MJCF (its classes are in the include left out)
    model = _load(OWN_MODELS / "mjcf" / "actuated.xml")
    assert model.settings["time_step"] == 0.001
    assert np.allclose(model.gravity, [0, 0, -9.81])         # MuJoCo's default, not 9.80665


def _write(tmp_path, text, name="model.xml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def _bad(tmp_path, body, name="bad.xml"):
    path = tmp_path / name
    path.write_text(body)
    with pytest.raises(ModelError) as info:
        _load(path)
    return str(info.value)


@pytest.mark.parametrize("text, line, expected", [
    ('<mujoco><worldbody>\n<body><geom type="sphere"/></body></worldbody></mujoco>', 2, "a sphere needs 1 positive size"),
    ('<mujoco><worldbody>\n<body><joint type="screw"/><geom size="1"/></body></worldbody></mujoco>', 2, "type=\"screw\": expected one of"),
    ('<mujoco><worldbody>\n<body quat="1 0 0 0" euler="0 0 1"/></worldbody></mujoco>', 2, "orientation given twice"),
    ('<mujoco><worldbody>\n<geom size="1" class="nope"/></worldbody></mujoco>', 2, "not a <default> class"),
    ('<mujoco><worldbody>\n<body><joint range="1 0"/><geom size="1"/></body></worldbody></mujoco>', 2, "expected lower < upper"),
    ('<mujoco><worldbody>\n<geom size="1 x"/></worldbody></mujoco>', 2, "expected 3 numbers"),
    ('<mujoco><worldbody><body>\n<geom type="mesh" mesh="m"/></body></worldbody></mujoco>', 2, "expected the name of an <asset><mesh>"),
    ('<mujoco>\n<include file="missing.xml"/></mujoco>', 2, "no such file"),
    ('<mujoco><worldbody><body name="a">\n<freejoint/><geom size="1"/><body><freejoint/><geom size="1"/></body></body></worldbody></mujoco>', 2, None),
    ('<mujoco><worldbody>\n<body><joint/><geom size="1"/></body></worldbody><actuator>\n<motor joint="nope"/></actuator></mujoco>', 3, "joint=\"nope\": no joint"),
    ('<mujoco><worldbody>\n<body><geom size="1" zaxis="0 0 0"/></body></worldbody></mujoco>', 2, "a zero vector"),
    ('<mujoco><compiler angle="grad"/>\n</mujoco>', 1, "expected one of degree, radian"),
    ('<mujoco><worldbody><body><joint name="j"/><geom size="1"/></body></worldbody><tendon><fixed>\n'
     '<joint joint="j"/></fixed></tendon></mujoco>', 2, "expected coef="),
])
def test_bad_input_is_a_model_error_naming_file_line_and_element(tmp_path, text, line, expected):
    message = _bad(tmp_path, text)
    assert message.startswith(str(tmp_path / "bad.xml")) or "missing.xml" in message, message
    if expected:
        assert expected in message, message
    assert "line" in message


def test_a_free_joint_below_the_top_level_is_refused_naming_it(tmp_path):
    message = _bad(tmp_path, '<mujoco><worldbody><body name="a">\n<joint/><geom size="1"/>\n'
                             '<body name="b"><freejoint/><geom size="1"/></body></body></worldbody></mujoco>')
    assert "line 3, <freejoint>: a free joint must be the only joint of a body in the world body" in message


def test_an_include_cycle_is_refused(tmp_path):
    (tmp_path / "a.xml").write_text('<mujoco>\n<include file="b.xml"/></mujoco>')
    (tmp_path / "b.xml").write_text('<mujoco>\n<include file="a.xml"/></mujoco>')
    with pytest.raises(ModelError, match=r"b.xml, line 2, <include file=\"a.xml\">: includes itself"):
        _load(tmp_path / "a.xml")


def test_what_is_not_simulated_is_a_note_not_silence(tmp_path):
    path = tmp_path / "notes.xml"
    path.write_text('<mujoco><worldbody><geom name="w" size="1"/><body><joint name="j"/><geom name="g" size="1"/>'
                    '</body></worldbody>\n'
                    '<tendon><fixed name="t" stiffness="3"><joint joint="j" coef="1"/></fixed></tendon>\n'
                    '<contact><pair geom1="w" geom2="g" friction="2 2 0.1 0.1 0.1"/></contact>\n<weird/></mujoco>')
    model = _load(path)
    text = "\n".join(model.warnings)
    for expected in ("line 2, <fixed name=\"t\">: the tendon's stiffness not simulated",
                     "line 3, <pair>: <pair> friction not applied",
                     "line 4, <weird>: unknown element <weird>"):
        assert expected in text, text


def test_convert_writes_a_urdf_with_the_same_dynamics(tmp_path, capsys):
    """A planar cheetah (several joints in one body: massless links between) converted to URDF and
    read back has the same mass matrix and bias forces."""
    src = os.path.join(SITE, "dm_control", "suite", "cheetah.xml")
    out = tmp_path / "cheetah.urdf"
    assert cli.main(["convert", src, "-o", str(out)]) == 0
    model, urdf = _load(src), _load(out)
    assert model.nv == urdf.nv == 9
    urdf.gravity = model.gravity           # URDF says nothing of gravity (ours 9.80665, MuJoCo's 9.81)
    armature = np.concatenate([j.armature for j in model.joints])     # URDF has no rotor inertia
    assert armature.any()
    rng = np.random.default_rng(1)
    for _ in range(3):
        q, v = rng.uniform(-1, 1, 9), rng.uniform(-1, 1, 9)
        assert np.allclose(mb.mass_matrix(model, q) - np.diag(armature), mb.mass_matrix(urdf, q), rtol=1e-9, atol=1e-12)
        assert np.allclose(mb.inverse_dynamics(model, q, v, 0 * q), mb.inverse_dynamics(urdf, q, v, 0 * q),
                           rtol=1e-9, atol=1e-12)


def test_info_describes_an_mjcf_model(capsys):
    assert cli.main(["info", ACTUATED]) == 0
    out = capsys.readouterr().out
    assert "actuated:" in out and "imu_accel [accelerometer] on torso" in out
    assert "note:" in out and "jointpos" in out


def test_run_starts_from_the_keyframe(capsys):
    assert cli.main(["run", ACTUATED, "--keyframe", "home", "--duration", "0.002", "--quiet", "--transport", "none",
                     "--rtf", "0", "--contact", "none", "--no-ground"]) == 0
    out = capsys.readouterr().out
    assert "dt = 0.001 s" in out, out                       # the file's timestep
    x = float(out.split("final position of torso: [")[1].split()[0])
    assert x > 0.09, out                                     # the key's x = 0.1 (qpos0's is 0)
    for topic in ("/actuated/imu_accel", "/actuated/lidar", "/actuated/overview/image_raw", "/actuated/tail_force",
                  "/actuated/actuator_controls/state"):
        assert topic in out, out


def test_a_quadruped_stands_two_seconds_in_its_home_keyframe():
    """A 12-DOF quadruped (Go1's size, position servos, Menagerie's class and keyframe style)
    started from `home` stands on the floor for 2 s: the trunk settles to within 2 cm of where
    MuJoCo settles it and stays level within 3 degrees."""
    path = str(OWN_MODELS / "mjcf" / "quadruped.xml")
    m = mujoco.MjModel.from_xml_path(path)
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, 0)
    mujoco.mj_step(m, d, nstep=1000)
    model = _load(path, keyframe="home")
    sim = mb.Simulation(model, dt=0.002)
    heights = []
    for _ in range(8):
        sim.step(125)
        assert np.all(np.isfinite(sim.q))
        heights.append(sim.q[2])
        qx, qy = sim.q[3], sim.q[4]
        tilt = 2 * np.degrees(np.arcsin(min(1.0, np.hypot(qx, qy))))
        assert tilt < 3.0, f"t = {sim.t:.2f} s: the trunk tilts {tilt:.1f} degrees"
    assert sim.t == pytest.approx(2.0)
    assert abs(heights[-1] - d.qpos[2]) < 0.02, (heights, d.qpos[2])
    assert max(heights[4:]) - min(heights[4:]) < 0.005        # settled, not sinking or bouncing


def test_content_after_the_root_is_ignored_with_a_note_as_mujoco_does(tmp_path):
    text = '<mujoco>\n<worldbody><body><freejoint/><geom size="0.1"/></body></worldbody>\n</mujoco>\n</mujoco>\n'
    path = tmp_path / "scene.xml"
    path.write_text(text)
    assert mujoco.MjModel.from_xml_string(text).nbody == 2          # MuJoCo reads it
    model = _load(path)
    assert model.nv == 6
    assert any("line 1, <mujoco>: content after the root element (line 4) ignored" in w for w in model.warnings)
    path.write_text(text.replace("<worldbody>", "<worldbody></body>"))      # broken inside: refused
    with pytest.raises(ModelError, match="line 2: not well-formed XML"):
        _load(path)


def test_armature_on_a_free_joint_acts_as_mujocos(tmp_path):
    """MuJoCo adds a free joint's armature in its coordinates (world-frame linear velocity): at
    random states our bias forces and accelerations equal MuJoCo's (they would differ by
    armature * (w x v) on the linear DOFs if it acted on the body-frame velocity), and the file
    loads without a note."""
    import mjcf_reference as ref
    path = tmp_path / "free.xml"
    path.write_text('<mujoco><default><joint armature="0.3" damping="0.2"/></default><worldbody>'
                    '<body><joint type="free"/><geom type="box" size="0.3 0.2 0.1" mass="2"/>'
                    '<body pos="0.3 0 0"><joint axis="0 1 0"/><geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.05"/>'
                    '</body></body></worldbody></mujoco>')
    model = _load(path)
    assert not [w for w in model.warnings if "armature" in w]
    worst = ref.compare(str(path), states=5)
    assert max(worst.values()) < 1e-9, worst




def test_meshes_mujoco_makes_itself_are_left_out_with_their_geoms_and_a_note(tmp_path):
    """A builtin= mesh (MuJoCo generates it) loads: its geoms are left out with a note naming the
    line, and the body keeps the mass of its other geoms."""
    text = ('<mujoco><asset>\n<mesh name="ring" builtin="supertorus" params="16 .2 .4 1"/></asset><worldbody>'
            '<body><freejoint/>\n<geom type="mesh" mesh="ring"/><geom size="0.1" mass="2"/></body></worldbody></mujoco>')
    path = tmp_path / "builtin.xml"
    path.write_text(text)
    assert mujoco.MjModel.from_xml_string(text).nmesh == 1          # MuJoCo reads it
    model = _load(path)
    notes = "\n".join(model.warnings)
    assert 'line 2, <mesh name="ring">: a mesh made by builtin="supertorus" is not built here' in notes, notes
    assert 'line 3, <geom>: mesh "ring" is not built here: left out' in notes, notes
    assert model.links[0].mass == 2.0 and len(model.links[0].collisions) == 1


def test_a_mesh_file_of_points_is_its_convex_hull_as_in_mujoco(tmp_path):
    corners = [(x, y, z) for x in (-1, 1) for y in (-2, 2) for z in (-0.5, 0.5)]
    (tmp_path / "points.obj").write_text("".join(f"v {x} {y} {z}\n" for x, y, z in corners + [(0.1, 0.2, 0.0)]))
    path = tmp_path / "points.xml"
    path.write_text('<mujoco><asset><mesh file="points.obj"/></asset><worldbody><body><freejoint/>'
                    '<geom type="mesh" mesh="points" density="3"/></body></worldbody></mujoco>')
    m = mujoco.MjModel.from_xml_path(str(path))
    link = _load(path).links[0]
    assert np.isclose(link.mass, m.body_mass[1], rtol=1e-6) and np.isclose(link.mass, 3 * 2 * 4 * 1)
    assert np.allclose(np.linalg.eigvalsh(link.inertia), np.sort(m.body_inertia[1]), rtol=1e-6)


def test_what_names_a_body_a_left_out_generator_makes_is_left_out_with_a_note(tmp_path):
    model = _load(_write(tmp_path, '<mujoco><worldbody><body name="b"><freejoint/><geom size="0.1"/></body>\n'
                                   '<flexcomp name="flag" type="grid" count="3 3 1" spacing=".1 .1 .1" dim="2"/>'
                                   '</worldbody><equality>\n<connect body1="flag_0" body2="b" anchor="0 0 0"/>'
                                   '</equality></mujoco>'))
    notes = "\n".join(model.warnings)
    assert "line 2, <flexcomp name=\"flag\">: <flexcomp> is not supported: left out" in notes, notes
    assert 'line 3, <connect>: body "flag_0" is not in the model' in notes, notes
    assert not model.constraints
    message = _bad(tmp_path, '<mujoco><worldbody><body name="b"><freejoint/><geom size="0.1"/></body></worldbody>'
                             '<equality>\n<connect body1="nope" body2="b" anchor="0 0 0"/></equality></mujoco>')
    assert 'line 2, <connect>: "nope": expected the name of a <body>' in message     # no generator: an error


def _tree(node):
    return (node.tag, node.attrib, node.line, [_tree(c) for c in node.children])


@pytest.mark.parametrize("text", [
    '<?xml version="1.0"?>\n<!-- a comment -->\n<mujoco model="m &amp; n"><worldbody>\n<body name="a" pos="0 0 1">'
    '<geom size="1"/><?pi x?></body>\n<body/></worldbody><include file="x.xml"/></mujoco>',
    '<mujoco><worldbody><body name="a&#x41;"><geom size="1" rgba="1 0 0 1"/></body></worldbody></mujoco>',
])
def test_the_plain_reader_builds_the_nodes_lxml_builds(text):
    """Plain documents are read by expat straight into Nodes; the same as through lxml (the
    reader of the documents expat does not take), includes found the same."""
    from mbsim_ros.formats.mjcf import parse
    data = text.encode()
    inc1, inc2 = [], []
    plain = parse._read_plain_xml(data, "m.xml", inc1)
    assert plain is not None
    assert _tree(plain) == _tree(parse._read_lxml("m.xml", data, [], inc2))
    assert [n.attrib for n in inc1] == [n.attrib for n in inc2]


@pytest.mark.parametrize("text", [
    '<!DOCTYPE mujoco [<!ENTITY s "1">]><mujoco><worldbody><geom size="&s;"/></worldbody></mujoco>',
    '<mujoco xmlns:x="urn:x"><worldbody><geom size="1"/></worldbody></mujoco>',
    '<mujoco><worldbody/></mujoco></mujoco>',
])
def test_documents_with_a_doctype_namespaces_or_errors_go_to_lxml(text):
    from mbsim_ros.formats.mjcf import parse
    assert parse._read_plain_xml(text.encode(), "m.xml", []) is None


def test_a_joints_actuatorfrcrange_clamps_its_motors_force_as_in_mujoco(tmp_path):
    """MuJoCo clamps the actuator force on a joint (gear times the motor's force) to the joint's
    actuatorfrcrange: a control clamp of the joint's one motor; the passive and actuator forces
    at controls beyond it equal MuJoCo's."""
    import mjcf_reference as ref
    path = _write(tmp_path, '<mujoco><worldbody><body><joint name="j" axis="0 1 0" actuatorfrcrange="-0.5 0.8"/>'
                            '<geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.05"/></body></worldbody>'
                            '<actuator><motor joint="j" gear="-2"/></actuator></mujoco>')
    a = _load(path).actuators[0]
    assert (a.min_control, a.max_control) == (-0.4, 0.25)
    worst = ref.compare(str(path), states=5)
    assert max(worst.values()) < 1e-9, worst
