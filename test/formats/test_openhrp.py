"""OpenHRP .wrl -> Model (mbsim_ros/formats/openhrp.py): own models with expected Models written
down, every shared OpenHRP model against values read off the files, bad input."""
import pathlib
import re

import numpy as np
import pytest
from conftest import shared_model, shared_models

import mbsim_ros as mb
from mbsim_ros import ModelError
from mbsim_ros.formats.openhrp import load_openhrp
from mbsim_ros.model.transforms import axis_angle_to_matrix, make_transform
from test_vrml import deadline

OWN = pathlib.Path(__file__).resolve().parents[1] / "models" / "openhrp"
BUNDLED = pathlib.Path(mb.__file__).resolve().parent / "data" / "models"


def Rz(a):
    return axis_angle_to_matrix([0, 0, 1], a)


# -- own models: expected Models written down ---------------------------------------------------
def test_two_segments_merge_into_one_link_inertia():
    model = load_openhrp(OWN / "two_segments.wrl")
    assert model.name == "TwoSegments" and [l.name for l in model.links] == ["BASE"]
    joint = model.joint("BASE")
    assert joint.type == "fixed" and joint.parent is None
    # the Humanoid's translation 9 9 9 is not applied; the Joint's offset is
    np.testing.assert_allclose(joint.origin, make_transform(Rz(np.pi / 2), [1, 2, 3]), atol=1e-12)
    link = model.link("BASE")
    # S1: m=2, c=(0.1,0,0), I=diag(.01,.02,.03). S2 under Rz(90deg) + (0,0.2,0): c=(0,0.3,0),
    # R I R^T = diag(.02,.01,.03). m=3, c=(0.2/3, 0.1, 0). Offsets o1=(1/30,-0.1,0), o2=(-1/15,0.2,0):
    # 2*(|o1|^2 E - o1 o1^T) + 1*(|o2|^2 E - o2 o2^T) = [[.06, .02, 0], [.02, 1/150, 0], [0, 0, 1/15]].
    assert link.mass == pytest.approx(3.0)
    np.testing.assert_allclose(link.com, [1 / 15, 0.1, 0.0], atol=1e-12)
    expected = np.array([[0.03 + 0.06, 0.02, 0.0],
                         [0.02, 0.03 + 1 / 150, 0.0],
                         [0.0, 0.0, 0.06 + 1 / 15]])
    np.testing.assert_allclose(link.inertia, expected, atol=1e-12)
    assert joint.params["segments"] == ["S1", "S2"]


def test_legacy_string_joint_axis_limits_and_rotor():
    model = load_openhrp(OWN / "legacy_axis.wrl")
    jx, jy = model.joint("J_X"), model.joint("J_Y")
    assert (jx.type, jy.type) == ("revolute", "prismatic")
    np.testing.assert_array_equal(jx.axis, [1, 0, 0])
    np.testing.assert_array_equal(jy.axis, [0, 1, 0])
    np.testing.assert_allclose(jx.origin[:3, 3], [0, 0, 0.5])
    assert (jx.lower[0], jx.upper[0]) == (-1.5, 1.25)
    assert jx.velocity_limit[0] == 3.0                 # min(|lvlimit|, |uvlimit|) = min(3, 4)
    assert jx.effort_limit[0] == pytest.approx(2.5 * 0.1 * 100)   # climit * torqueConst * gearRatio
    assert (jx.rotor_inertia[0], jx.gear_ratio[0]) == (1e-5, 100.0)
    assert jx.armature[0] == pytest.approx(0.1)
    assert jx.q0[0] == pytest.approx(0.3)               # jointValue
    # equivalentInertia overrides: armature = gearRatio^2 * rotor_inertia = 2.0
    assert jy.gear_ratio[0] == 10.0 and jy.armature[0] == pytest.approx(2.0)
    assert jy.params["rotorInertia"] == 0.5 and jy.params["equivalentInertia"] == 2.0
    assert np.isinf(jy.upper[0]) and np.isinf(jy.velocity_limit[0]) and np.isinf(jy.effort_limit[0])
    assert jx.params["climit"] == [2.5] and jx.params["jointId"] == 0 and jx.params["crawler"] is False


@pytest.fixture(scope="module")
def robot_all():
    return load_openhrp(OWN / "robot_all.wrl")


def test_robot_all_joints(robot_all):
    m = robot_all
    assert m.name == "AllFeatures" and m.source == str(OWN / "robot_all.wrl")
    assert [(j.name, j.type, j.parent) for j in m.joints] == [
        ("BODY", "free", None), ("ARM", "revolute", "BODY"), ("SLIDER", "prismatic", "ARM"),
        ("TRACK", "fixed", "BODY")]
    assert [l.name for l in m.links] == ["BODY", "ARM", "SLIDER", "TRACK"]
    body = m.joint("BODY")
    np.testing.assert_array_equal(body.origin, np.eye(4))       # the world pose is in the state
    np.testing.assert_allclose(body.q0, [0.1, 0.2, 0.3, 0, 0, np.sqrt(0.5), np.sqrt(0.5)], atol=1e-12)
    arm = m.joint("ARM")
    np.testing.assert_allclose(arm.axis, [0, 1, 0])              # "0 2 0" normalised
    np.testing.assert_allclose(arm.origin, make_transform(p=[0, 0.2, 0]))
    assert (arm.lower[0], arm.upper[0]) == (-1.0, 1.0)
    np.testing.assert_allclose(m.joint("SLIDER").origin[:3, 3], [0, 0.2, 0])
    track = m.joint("TRACK")
    assert track.params["crawler"] is True and track.params["jointType"] == "crawler"
    assert any("TRACK" in w and "crawler" in w for w in m.warnings)
    assert m.nq == 7 + 1 + 1 and m.nv == 6 + 1 + 1


def test_robot_all_links_and_shapes(robot_all):
    m = robot_all
    body = m.link("BODY")
    assert body.mass == 4.0
    np.testing.assert_allclose(body.com, [0, 0, 0.05])
    np.testing.assert_allclose(body.inertia, np.diag([0.1, 0.2, 0.3]))
    assert [s.kind for s in body.visuals] == ["box", "sphere", "cone", "cylinder", "mesh", "box"]
    assert [s.kind for s in body.collisions] == ["box", "sphere", "cone", "cylinder", "mesh"]  # no camera housing
    box, sphere, cone, cyl, grid, cam_box = body.visuals
    np.testing.assert_allclose(box.size, [0.4, 0.3, 0.2])
    np.testing.assert_allclose(box.color, [1, 0, 0, 0.75])       # alpha = 1 - transparency
    assert box.name == "BODY_BOX"
    assert sphere.radius == 0.05
    np.testing.assert_allclose(sphere.pose[:3, 3], [0, 0, 0.2])
    np.testing.assert_allclose(sphere.color, [0.7, 0.7, 0.7, 1])   # no Material: the Shape default
    np.testing.assert_allclose(cone.color, [0.8, 0.8, 0.8, 1])     # Material default diffuseColor
    assert (cone.radius, cone.length) == (0.1, 0.3)                 # Switch whichChoice 1
    np.testing.assert_allclose(cone.pose[:3, :3] @ [0, 0, 1], [0, 1, 0], atol=1e-12)  # VRML: along Y
    assert (cyl.radius, cyl.length) == (0.02, 0.1)                  # LOD: the first level
    np.testing.assert_allclose(cyl.pose[:3, :3] @ [0, 0, 1], [0, 1, 0], atol=1e-12)
    np.testing.assert_allclose(grid.vertices, [[0, 0, 0], [0.1, 0, 0], [0.2, 0, 0],
                                               [0, 0.1, 0.2], [0.1, 0.1, 0.2], [0.2, 0.1, 0.2]])
    assert grid.faces.shape == (4, 3)
    v = grid.vertices[grid.faces]
    assert np.all(np.cross(v[:, 1] - v[:, 0], v[:, 2] - v[:, 0])[:, 1] > 0)   # ccw seen from +y
    np.testing.assert_allclose(cam_box.pose, make_transform(axis_angle_to_matrix([0, 1, 0], -np.pi / 2),
                                                            [0.2, 0, 0.1]), atol=1e-12)
    arm_mesh = m.link("ARM").visuals[0]                  # Inline, scale 2 baked in, ccw FALSE flipped
    np.testing.assert_allclose(arm_mesh.vertices, [[0, 0.1, 0], [0.2, 0.1, 0], [0.2, 0.3, 0], [0, 0.3, 0]])
    np.testing.assert_array_equal(arm_mesh.faces, [[0, 2, 1], [0, 3, 2]])
    np.testing.assert_array_equal(arm_mesh.pose, np.eye(4))
    extrusion = m.link("SLIDER").visuals[0]
    assert extrusion.kind == "mesh" and extrusion.vertices.shape == (10, 3) and extrusion.faces.shape == (12, 3)
    np.testing.assert_allclose(extrusion.vertices.min(axis=0), [-0.01, 0, -0.01])
    np.testing.assert_allclose(extrusion.vertices.max(axis=0), [0.01, 0.1, 0.01])
    tri = extrusion.vertices[extrusion.faces]
    volume = np.einsum("ij,ij->i", tri[:, 0], np.cross(tri[:, 1], tri[:, 2])).sum() / 6
    assert abs(volume) == pytest.approx(0.02 * 0.02 * 0.1)     # closed, consistently wound
    track_box = m.link("TRACK").visuals[0]                     # USE BODY_BOX with USE RED
    np.testing.assert_allclose(track_box.size, [0.4, 0.3, 0.2])
    np.testing.assert_allclose(track_box.color, [1, 0, 0, 0.75])


def test_robot_all_sensors(robot_all):
    m = robot_all
    assert [(s.name, s.type, s.link, s.sensor_id) for s in m.sensors] == [
        ("IMU_ACC", "accelerometer", "BODY", 0), ("IMU_GYRO", "gyro", "BODY", 0),
        ("GYRO2", "gyro", "ARM", 2), ("WRIST_FS", "force", "ARM", 0), ("RANGE", "range", "BODY", 0),
        ("CAM", "camera", "BODY", 0)]
    acc, gyro, gyro2, fs, rng, cam = m.sensors
    np.testing.assert_allclose(acc.pose, make_transform(p=[0, 0, 0.1]))
    np.testing.assert_allclose(acc.params["maxAcceleration"], [50, 50, 50])
    np.testing.assert_allclose(gyro.pose[:3, :3], np.diag([1, -1, -1]), atol=1e-12)
    np.testing.assert_allclose(gyro.params["maxAngularVelocity"], [-1, -1, -1])
    np.testing.assert_allclose(fs.pose[:3, 3], [0, 0.2, 0])
    np.testing.assert_allclose(fs.params["maxForce"], [100, 100, 200])
    np.testing.assert_allclose(fs.params["maxTorque"], [-1, -1, -1])
    assert rng.params == {"scanAngle": 1.5, "scanStep": 0.1, "scanRate": 10.0, "maxDistance": 10.0}
    assert cam.params == {"fieldOfView": 0.785398, "name": "front", "frontClipDistance": 0.01,
                          "backClipDistance": 10.0, "type": "DEPTH", "width": 640, "height": 480,
                          "frameRate": 30.0}           # frameRate: not in this PROTO, standard default
    np.testing.assert_allclose(cam.pose, make_transform(axis_angle_to_matrix([0, 1, 0], -np.pi / 2),
                                                        [0.2, 0, 0.1]), atol=1e-12)
    assert any("gyro sensorIds [0, 2]" in w for w in m.warnings)


def test_robot_all_loop_constraint_and_notes(robot_all):
    (loop,) = robot_all.constraints
    assert (loop.name, loop.type, loop.link1, loop.link2) == ("LOOP", "ball", "SLIDER", "TRACK")
    np.testing.assert_allclose(loop.pos1, [0, 0, 0.1])
    np.testing.assert_allclose(loop.pos2, [0.1, 0, 0])
    np.testing.assert_allclose(loop.axis, [0, 0, 1])
    assert any("1 ROUTE" in w for w in robot_all.warnings)


def test_load_model_dispatches_wrl_and_ignores_floating_base():
    model = mb.load_model(OWN / "robot_all.wrl", floating_base=True)
    assert model.joints[0].name == "BODY" and model.joints[0].type == "free"
    assert load_openhrp(OWN / "two_segments.wrl", floating_base=True).joints[0].type == "fixed"


def test_environment_file_of_plain_shapes(tmp_path):
    path = tmp_path / "block.wrl"
    path.write_text("#VRML V2.0 utf8\nTransform { translation 0 0 0.5 children Shape { geometry Box { size 1 1 1 } } }\n")
    model = load_openhrp(path)
    assert [(j.name, j.type, j.parent) for j in model.joints] == [("block", "fixed", None)]
    (box,) = model.link("block").collisions
    np.testing.assert_allclose(box.pose[:3, 3], [0, 0, 0.5])
    assert model.total_mass == 0.0


def test_deep_joint_chain_loads_without_recursion(tmp_path):
    header = (OWN / "two_segments.wrl").read_text().split("DEF TwoSegments")[0]
    n = 1500
    seg = "Segment { mass 1 momentsOfInertia [1 0 0 0 1 0 0 0 1] }"
    body = "".join(f'DEF J{i} Joint {{ jointType "rotate" translation 0 0 0.1 children [ {seg} '
                   for i in range(n)) + "] } " * n
    path = tmp_path / "chain.wrl"
    path.write_text(header + "Humanoid { humanoidBody [ " + body + "] }\n")
    with deadline(10.0):
        model = load_openhrp(path)
    assert model.nv == n and model.joints[-1].parent == f"J{n - 2}"


# -- bad input -------------------------------------------------------------------------------------
HEADER = (OWN / "legacy_axis.wrl").read_text().split("DEF Legacy")[0]
SEG = "Segment { mass 1 momentsOfInertia [1 0 0 0 1 0 0 0 1] }"
BAD_MODELS = [
    ("zero_rotation_axis", f'Humanoid {{ humanoidBody [\nDEF R Joint {{ jointType "fixed"\n rotation 0 0 0 1 children [ {SEG} ] }} ] }}',
     2, "expected a non-zero rotation axis"),
    ("zero_transform_axis", f'Humanoid {{ humanoidBody [\nDEF R Joint {{ jointType "fixed" children [ {SEG}\n'
     'Transform { rotation 0 0 0 0.5 } ] } ] }', 3, "expected a non-zero rotation axis"),
    ("asymmetric_inertia", f'Humanoid {{ humanoidBody [\nDEF R Joint {{ jointType "fixed" children [\n'
     'Segment { momentsOfInertia [1 0.01 0 0 1 0 0 0 1] } ] } ] }', 3, "inertia is not symmetric"),
    ("nonfinite_inertia", f'Humanoid {{ humanoidBody [\nDEF R Joint {{ jointType "fixed" children [\n'
     'Segment { momentsOfInertia [1 0 0 0 1e999 0 0 0 1] } ] } ] }', 3, "'1e999' is out of range"),
    ("wrong_field_type", f'Humanoid {{ humanoidBody [\nDEF R Joint {{ jointType "fixed" children [\nSegment {{ mass "heavy" }} ] }} ] }}',
     3, "expected SFFloat"),
    ("unknown_joint_type", f'Humanoid {{ humanoidBody [\nDEF R Joint {{ jointType "hinge" children [ {SEG} ] }} ] }}',
     2, "expected one of free, fixed, rotate, slide"),
    ("zero_joint_axis", f'Humanoid {{ humanoidBody [\nDEF R Joint {{ jointType "rotate" jointAxis "W" children [ {SEG} ] }} ] }}',
     2, 'expected "X", "Y", "Z"'),
    ("bad_inertia", f'Humanoid {{ humanoidBody [\nDEF R Joint {{ jointType "fixed" children [\nSegment {{ momentsOfInertia [1 2 3] }} ] }} ] }}',
     3, "expected 9"),
    ("unbalanced", f'Humanoid {{ humanoidBody [\nDEF R Joint {{ jointType "fixed" children [ {SEG} ] }}\n', 3,
     "unbalanced brackets"),
    ("unknown_use", f'Humanoid {{ humanoidBody [\nDEF R Joint {{ jointType "fixed" children [ {SEG}\nUSE FOO ] }} ] }}',
     3, "USE FOO"),
    ("missing_inline", f'Humanoid {{ humanoidBody [\nDEF R Joint {{ jointType "fixed" children [ {SEG}\n'
     'Inline { url "gone.wrl" } ] } ] }', 3, "file not found"),
    ("no_joint", 'Humanoid { humanoidBody [ ] }', 1, "expected a Joint in humanoidBody"),
    ("joint_without_name", f'Humanoid {{ humanoidBody [\nJoint {{ jointType "fixed" children [ {SEG} ] }} ] }}',
     2, "expected DEF <name> Joint"),
]


@pytest.mark.parametrize("name,body,line,expected", BAD_MODELS, ids=[b[0] for b in BAD_MODELS])
def test_bad_model_raises_model_error_with_file_and_line(tmp_path, name, body, line, expected):
    path = tmp_path / f"{name}.wrl"
    path.write_text(HEADER + "\n" * 0 + body)
    first = HEADER.count("\n")
    with deadline(1.0), pytest.raises(ModelError) as err:
        mb.load_model(path)
    message = str(err.value)
    assert message.startswith(f"{path}:{first + line}:"), message
    assert expected in message, message


def test_bad_extra_joint(tmp_path):
    proto = (OWN / "robot_all.wrl").read_text().split("DEF AllFeatures")[0]
    path = tmp_path / "loop.wrl"
    robot = f'Humanoid {{ humanoidBody [ DEF R Joint {{ jointType "fixed" children [ {SEG} ] }} ] }}\n'
    path.write_text(proto + robot + 'ExtraJoint { link1Name "R" link2Name "NOPE" }\n')
    with deadline(1.0), pytest.raises(ModelError, match=rf"^{re.escape(str(path))}:\d+: .*link2Name 'NOPE'; expected"):
        load_openhrp(path)
    path.write_text(proto + robot + 'ExtraJoint { link1Name "R" link2Name "R" jointType "hinge" }\n')
    with pytest.raises(ModelError, match="expected one of xyz, xy, z, piston, ball"):
        load_openhrp(path)


def test_inline_cycle_through_the_loader(tmp_path):
    (tmp_path / "part.wrl").write_text('Inline { url "robot.wrl" }\n')
    path = tmp_path / "robot.wrl"
    path.write_text(HEADER + f'Humanoid {{ humanoidBody [ DEF R Joint {{ jointType "fixed" children [ {SEG} '
                    'Inline { url "part.wrl" } ] } ] }\n')
    with deadline(1.0), pytest.raises(ModelError, match="robot.wrl -> part.wrl -> robot.wrl"):
        load_openhrp(path)


def test_proto_with_wrong_interface_type(tmp_path):
    path = tmp_path / "iface.wrl"
    path.write_text(HEADER.replace("SFFloat    gearRatio", "SFString   gearRatio").replace("gearRatio   1", 'gearRatio "1"')
                    + f'Humanoid {{ humanoidBody [ DEF R Joint {{ jointType "fixed" children [ {SEG} ] }} ] }}\n')
    with pytest.raises(ModelError, match=r"PROTO Joint field 'gearRatio' is SFString; expected SFFloat"):
        load_openhrp(path)


# -- every shared OpenHRP model, against values read off the files ----------------------------------
# name, joints (type per Model), total mass (sum of the Segment masses in the file), sensors
SHARED = {
    "SR1.wrl": ("SR1", {"free": 1, "revolute": 29}, 130.8, 6, 0),
    "sample1.wrl": ("SampleRobot", {"free": 1, "revolute": 29}, 130.8, 8, 0),
    "sample_4leg_robot.wrl": ("Sample4LegRobot", {"free": 1, "revolute": 24}, 111.0, 6, 0),
    "simple_vehicle_with_rangesensor.wrl": ("SimpleVehicle", {"free": 1, "revolute": 4}, 13.0, 1, 0),
    "springJoint.wrl": ("springJoint", {"free": 1, "prismatic": 1}, 2.0, 0, 0),
    "crawler.wrl": ("Crawler", {"free": 1, "fixed": 2}, 12.0, 0, 0),
    "choreonoid_crawler.wrl": ("Crawler", {"free": 1, "fixed": 2}, 12.0, 0, 0),
    "closed-link-sample.wrl": ("ClosedLinkSample", {"fixed": 1, "revolute": 3}, 27.339292, 0, 1),
    "ClosedLinkSample.wrl": ("ClosedLinkSample", {"fixed": 1, "revolute": 3}, 27.339292, 0, 1),
    "floor.wrl": ("floor", {"fixed": 1}, 0.5, 0, 0),
    "PA10/pa10.main.wrl": ("HRP1", {"fixed": 1, "revolute": 7, "prismatic": 2}, 35.21, 0, 0),
    "RH2/RH2_withoutArm_withObstacleSensor.wrl": ("HRP1", {"free": 1, "revolute": 6, "fixed": 2}, 35.867211, 1, 0),
}
SENSOR_NODES = {"AccelerationSensor": "accelerometer", "Gyro": "gyro", "ForceSensor": "force",
                "RangeSensor": "range", "VisionSensor": "camera"}


def _file_text(path):
    return re.sub(r"#[^\n]*", "", path.read_bytes().decode("latin-1"))


def test_every_shared_openhrp_model_is_covered():
    found = {str(p.relative_to(p.parents[0] if p.parent.name == "openhrp" else p.parents[1]))
             for p in shared_models("openhrp", "**/*.wrl") if "Humanoid" in p.read_bytes().decode("latin-1")}
    if not found:
        pytest.skip("the shared model files (../shared/models) are absent")
    assert found == set(SHARED)


@pytest.mark.parametrize("name", sorted(SHARED))
def test_shared_model(name):
    path = shared_model("openhrp", name)
    model_name, types, mass, n_sensors, n_loops = SHARED[name]
    with deadline(2.0):
        model = load_openhrp(path)
    text = _file_text(path)
    assert model.name == model_name
    # joint names = the Joint DEF names in the file; links are named after their joints
    names = re.findall(r"DEF\s+(\S+)\s+Joint\s*\{", text)
    assert sorted(j.name for j in model.joints) == sorted(names)
    assert [l.name for l in model.links] == [j.child for j in model.joints] == [j.name for j in model.joints]
    counted = {}
    for j in model.joints:
        counted[j.type] = counted.get(j.type, 0) + 1
    assert counted == types
    assert model.total_mass == pytest.approx(mass, abs=1e-9)
    sensors = re.findall(r"DEF\s+(\S+)\s+(" + "|".join(SENSOR_NODES) + r")\s*\{", text)
    assert len(sensors) == n_sensors
    assert sorted((s.name, s.type) for s in model.sensors) == sorted((n, SENSOR_NODES[t]) for n, t in sensors)
    assert len(model.constraints) == n_loops
    assert model.source == str(path)
    bare = {"STEERING"} if name.startswith("simple_vehicle") else set()   # its Segment has no children
    assert {l.name for l in model.links if not l.visuals} == bare


def _sensor(model, name):
    return next(s for s in model.sensors if s.name == name)


def test_sr1_sensors_field_by_field():
    model = load_openhrp(shared_model("openhrp", "SR1.wrl"))
    assert [(s.name, s.type, s.link, s.sensor_id) for s in model.sensors] == [
        ("WaistAccelSensor", "accelerometer", "WAIST", 0), ("WaistGyro", "gyro", "WAIST", 0),
        ("LeftAnkleForceSensor", "force", "LLEG_ANKLE_R", 0), ("RightAnkleForceSensor", "force", "RLEG_ANKLE_R", 1),
        ("LeftCamera", "camera", "CHEST", 0), ("RightCamera", "camera", "CHEST", 1)]
    left = _sensor(model, "LeftCamera")
    assert left.params == {"fieldOfView": 0.785398, "name": "LeftCamera", "frontClipDistance": 0.01,
                           "backClipDistance": 10.0, "type": "COLOR_DEPTH", "width": 320, "height": 240,
                           "frameRate": 30.0}
    R = axis_angle_to_matrix(np.array([0.4472, -0.4472, -0.7746]) / np.linalg.norm([0.4472, -0.4472, -0.7746]), 1.8235)
    np.testing.assert_allclose(left.pose, make_transform(R, [0.15, 0.05, 0.15]), atol=1e-12)
    np.testing.assert_allclose(_sensor(model, "WaistAccelSensor").params["maxAcceleration"], [-1, -1, -1])
    np.testing.assert_allclose(_sensor(model, "LeftAnkleForceSensor").params["maxTorque"], [-1, -1, -1])
    chest = model.link("CHEST")
    assert len(chest.visuals) == 4 + 2 and len(chest.collisions) == 4     # + two camera housings (visual only)
    waist = model.joint("WAIST")
    np.testing.assert_allclose(waist.q0, [0, 0, 0.7135, 0, 0, 0, 1])
    np.testing.assert_allclose(model.joint("CHEST").axis, [0, 0, 1])    # the PROTO default
    np.testing.assert_allclose(model.joint("WAIST_P").origin[:3, 3], [0, 0, 0.176])


def test_sample1_sensors_inside_segments_and_limits():
    model = load_openhrp(shared_model("openhrp", "sample1.wrl"))
    assert [s.name for s in model.sensors if s.type == "force"] == ["lfsensor", "rfsensor", "lhsensor", "rhsensor"]
    lf = _sensor(model, "lfsensor")
    assert lf.link == "LLEG_ANKLE_R" and lf.sensor_id == 0
    np.testing.assert_allclose(lf.pose[:3, 3], [0, 0, -0.07])
    assert _sensor(model, "lhsensor").link == "LARM_WRIST_P"
    assert [_sensor(model, n).params["type"] for n in ("VISION_SENSOR1", "VISION_SENSOR2")] == ["COLOR", "COLOR"]
    gsensor = _sensor(model, "gsensor")
    R = axis_angle_to_matrix(np.array([0, 0.707107, 0.707107]) / np.linalg.norm([0, 0.707107, 0.707107]), 3.14159)
    np.testing.assert_allclose(gsensor.pose[:3, :3], R, atol=1e-12)
    wrist = model.joint("LARM_WRIST_P")
    assert (wrist.lower[0], wrist.upper[0]) == (-2.0944, 2.0944)
    assert wrist.velocity_limit[0] == 40.0 and wrist.gear_ratio[0] == 200.0 and wrist.rotor_inertia[0] == 3.0e-4
    assert wrist.armature[0] == pytest.approx(200 ** 2 * 3.0e-4)


def test_range_sensors_of_rh2_and_simple_vehicle():
    rh2 = load_openhrp(shared_model("openhrp", "RH2", "RH2_withoutArm_withObstacleSensor.wrl"))
    urg = _sensor(rh2, "URG_SENSOR0")
    assert (urg.type, urg.link, urg.sensor_id) == ("range", "OBSTACLE_SENSOR", 0)
    assert urg.params == {"scanAngle": 4.712388965, "scanStep": 0.004363323, "scanRate": 38.461538462,
                          "maxDistance": 10.0}
    np.testing.assert_allclose(urg.pose[:3, 3], [0, 0, 0.055])
    # duplicate field `rotation` in OBSTACLE_SENSOR: the last one counts (as in Choreonoid)
    np.testing.assert_allclose(rh2.joint("OBSTACLE_SENSOR").origin[:3, :3],
                               axis_angle_to_matrix([0, 0, -1], 1.5707963221), atol=1e-12)
    assert rh2.joint("MAIN_WHEEL2").axis.tolist() == [0, -1, 0]
    assert rh2.joint("OBSTACLE_SENSOR").type == "fixed"        # its jointAxis "0 0 0" is unused
    body = rh2.link("BODY")
    assert body.visuals and all(s.kind == "mesh" for s in body.visuals)     # from parts/body/body.wrl
    vehicle = load_openhrp(shared_model("openhrp", "simple_vehicle_with_rangesensor.wrl"))
    (rng,) = vehicle.sensors
    assert rng.params == {"scanAngle": 3.14159, "scanStep": 0.1, "scanRate": 10.0, "maxDistance": 10.0}
    R = axis_angle_to_matrix(np.array([0, 1, 1]) / np.sqrt(2), 3.1415)     # axis "0 1 1" normalised
    np.testing.assert_allclose(rng.pose, make_transform(R, [0, -0.3, 0.1]), atol=1e-12)


def test_closed_link_samples_both_vocabularies():
    hrp = load_openhrp(shared_model("openhrp", "closed-link-sample.wrl"))
    cn = load_openhrp(shared_model("openhrp", "ClosedLinkSample.wrl"))
    for model, kind in ((hrp, "xy"), (cn, "piston")):
        (loop,) = model.constraints
        assert (loop.name, loop.type, loop.link1, loop.link2) == ("J1J3", kind, "J1", "J3")
        np.testing.assert_allclose(loop.pos1, [0.2, 0, 0])
        np.testing.assert_allclose(loop.pos2, [0, 0.1, 0])
        np.testing.assert_allclose(loop.axis, [0, 0, 1])
    np.testing.assert_allclose(hrp.joint("WAIST").origin[:3, :3], axis_angle_to_matrix([1, 0, 0], -1.5710))
    waist = hrp.link("WAIST")
    np.testing.assert_allclose(waist.com, [0.1, 0.025, 0.05])
    np.testing.assert_allclose(np.diag(waist.inertia), [0.163125, 0.3825, 0.163125])
    assert waist.visuals[0].kind == "mesh" and waist.visuals[0].faces.shape == (12, 3)


def test_crawlers_flagged_in_both_vocabularies():
    for name, kind in (("crawler.wrl", "crawler"), ("choreonoid_crawler.wrl", "pseudoContinuousTrack")):
        model = load_openhrp(shared_model("openhrp", name))
        tracks = [j for j in model.joints if j.params["crawler"]]
        assert len(tracks) == 2 and all(j.type == "fixed" and j.params["jointType"] == kind for j in tracks)
        assert sum("crawler track" in w for w in model.warnings) == 2
        assert model.link(tracks[0].name).visuals[0].kind == "mesh"        # the Extrusion


def test_pa10_inlines_every_part():
    model = load_openhrp(shared_model("openhrp", "PA10", "pa10.main.wrl"))
    assert [j.name for j in model.joints] == ["BASE", "J1", "J2", "J3", "J4", "J5", "J6", "J7", "HAND_L", "HAND_R"]
    assert all(s.kind == "mesh" for l in model.links for s in l.visuals)
    assert model.joint("J1").rotor_inertia[0] == 3.0e-4 and model.joint("J1").upper[0] == 3.08923278
    np.testing.assert_allclose(model.joint("J6").origin[:3, 3], [-0.0025, 0, 0.25])


def test_floor_is_a_fixed_box():
    model = load_openhrp(shared_model("openhrp", "floor.wrl"))
    (box,) = model.link("WAIST").collisions
    np.testing.assert_allclose(box.size, [4, 4, 0.2])
    np.testing.assert_allclose(model.joint("WAIST").origin[:3, 3], [0, 0, -0.1])


# -- the bundled sample --------------------------------------------------------------------------
def test_bundled_sr1_world_carries_all_five_sensor_types():
    sr1 = load_openhrp(BUNDLED / "SR1_range.wrl")
    assert {s.type for s in sr1.sensors} == {"accelerometer", "gyro", "force", "range", "camera"}
    (rng,) = [s for s in sr1.sensors if s.type == "range"]
    assert rng.link == "CHEST" and rng.params["maxDistance"] == 10.0
    original = load_openhrp(BUNDLED / "SR1.wrl")
    assert len(original.sensors) == 6 and original.total_mass == pytest.approx(130.8)
    assert (BUNDLED / "SR1.wrl").read_bytes() == shared_model("openhrp", "SR1.wrl").read_bytes()
    floor = load_openhrp(BUNDLED / "floor.wrl")
    assert floor.joints[0].type == "fixed" and floor.links[0].collisions[0].kind == "box"


# -- files from the field (issue 19) ----------------------------------------------------------------
def test_bush_joint_chain_and_cad_rounded_inertia():
    """Joints without a Segment get massless links (OpenHRP, Choreonoid); a momentsOfInertia
    asymmetric by 5.8e-7 of its largest entry is averaged with its transpose; both noted (its
    dynamics against Pinocchio: test/dynamics/test_massless.py)."""
    model = load_openhrp(OWN / "bush_chain.wrl")
    assert [(j.name, j.type, j.parent) for j in model.joints] == [
        ("BASE", "fixed", None), ("BUSH_X", "prismatic", "BASE"), ("BUSH_Y", "prismatic", "BUSH_X"),
        ("BUSH_RZ", "revolute", "BUSH_Y"), ("FOOT", "revolute", "BUSH_RZ")]
    assert [model.link(n).mass for n in ("BUSH_X", "BUSH_Y", "BUSH_RZ")] == [0.0, 0.0, 0.0]
    assert not any(model.link(n).inertia.any() for n in ("BUSH_X", "BUSH_Y", "BUSH_RZ"))
    assert any("Joints BUSH_X, BUSH_Y, BUSH_RZ have no Segment: massless links" in w for w in model.warnings)
    (note,) = [w for w in model.warnings if "asymmetric" in w]
    assert "Segment BASE_SEG momentsOfInertia: inertia asymmetric by 8.7e-08 (5.8e-07 of its largest entry" in note
    I = model.link("BASE").inertia
    assert I[0, 1] == I[1, 0] == pytest.approx((0.002 + 0.002000087) / 2, rel=1e-15)
