"""Models as ROS users have them: xacro files expanded with arguments (the `xacro` package),
URDF text from a robot_description, <mimic> joints as coordinate couplers, and the run's model
entries (files with xacro arguments, names, poses)."""
from pathlib import Path

import numpy as np
import pytest

import mbsim_ros as mb
from mbsim_ros.formats import expand_xacro, load_description
from mbsim_ros.model import ConfigError, ModelError
from mbsim_ros.run.config import load_config
from mbsim_ros.run.world import load_world, model_specs, needs_ground

URDF = Path(__file__).resolve().parent.parent / "models" / "urdf"
ARM = URDF / "arm.urdf.xacro"


def test_xacro_arguments_reach_the_model_and_defaults_apply_without_them():
    left = mb.load_model(ARM, xacro_args={"prefix": "left_", "length": "0.5"})
    assert [l.name for l in left.links] == ["left_base", "left_upper", "left_finger_a", "left_finger_b"]
    np.testing.assert_array_equal(left.joint("left_finger_a_joint").origin[:3, 3], [0.02, 0.0, 0.5])
    assert left.link("left_upper").mass == 1.0
    np.testing.assert_allclose(left.link("left_upper").inertia[0, 0], 0.5 ** 2 / 12, rtol=1e-15)
    plain = mb.load_model(ARM)
    np.testing.assert_array_equal(plain.joint("finger_a_joint").origin[:3, 3], [0.02, 0.0, 0.4])


def test_a_mimic_joint_becomes_a_coupler_with_its_multiplier_and_offset():
    arm = mb.load_model(ARM)
    (c,) = arm.couplers
    assert (c.dependent, c.independent) == ("finger_b_joint", "finger_a_joint")
    np.testing.assert_array_equal(c.function.coefs, [[0.001, -1.0]])
    assert arm.warnings == []


def test_a_bad_xacro_is_one_model_error_naming_the_file(tmp_path):
    bad = tmp_path / "bad.urdf.xacro"
    bad.write_text('<robot name="r" xmlns:xacro="http://www.ros.org/wiki/xacro"><link name="${undefined_name}"/></robot>')
    with pytest.raises(ModelError, match="bad.urdf.xacro: xacro could not expand it"):
        mb.load_model(bad)
    with pytest.raises(ModelError, match="not .xacro"):
        mb.load_model(URDF / "elements.urdf", xacro_args={"a": "1"})


def test_a_mimic_of_an_unknown_joint_is_a_note_with_its_line(tmp_path):
    """urdfdom loads a mimic of a joint that does not exist (and robot_state_publisher ignores
    it): the joint moves on its own, a note names the line."""
    text = expand_xacro(ARM).replace('mimic joint="finger_a_joint"', 'mimic joint="nope"')
    with pytest.warns(UserWarning, match=r"line \d+, <mimic>: mimic of joint 'nope' ignored: no joint 'nope'"):
        model = load_description(text, "/robot_description")
    assert model.couplers == [] and len(model.warnings) == 1


def test_robot_description_text_loads_like_the_file():
    a = load_description(expand_xacro(ARM, {"length": "0.3"}), "/robot_description")
    b = mb.load_model(ARM, xacro_args={"length": "0.3"})
    assert [l.name for l in a.links] == [l.name for l in b.links]
    for ja, jb in zip(a.joints, b.joints):
        np.testing.assert_array_equal(ja.origin, jb.origin)
    with pytest.raises(ModelError, match="robot_description: empty"):
        load_description("  ", "/robot_description")


def test_model_entries_carry_xacro_arguments_names_and_poses():
    config = load_config(None, {"model": f"{ARM} prefix:=r_ length:=0.6, {URDF / 'elements.urdf'}"})
    specs = model_specs(config)
    assert specs[0] == dict(file=str(ARM), name=None, pose=None, args={"prefix": "r_", "length": "0.6"})
    assert specs[1]["file"] == str(URDF / "elements.urdf") and specs[1]["args"] == {}
    config = load_config(None, {"model": [{"file": str(ARM), "name": "arm2", "pose": [1, 2, 0, 0, 0, 1.5],
                                           "args": {"prefix": "x_"}}], "hold": 0, "floating_base": False})
    world, _ = load_world(config)           # an arm welded at its pose: no ground plane added
    assert world.names == ["arm2"] and world[0].links[0].name == "x_base"
    np.testing.assert_allclose(world.poses[0][:3, 3], [1, 2, 0])
    with pytest.raises(ConfigError, match=r"model\[0\].pose must be \[x, y, z, roll, pitch, yaw\]"):
        load_config(None, {"model": [{"file": "a.urdf", "pose": [1, 2]}]})
    with pytest.raises(ConfigError, match="read by the ROS node"):
        load_world(load_config(None, {"model": "topic:/robot_description"}))


def test_a_floating_robot_alone_gets_a_ground_plane_unless_told_not_to():
    sr1 = URDF.parent.parent.parent / "mbsim_ros" / "data" / "models" / "SR1.wrl"
    config = load_config(None, {"model": str(sr1), "hold": 0})
    world, notes = load_world(config)
    assert [m.name for m in world] == ["SR1", "ground"] and any("ground plane" in n for n in notes)
    assert world[1].links[0].collisions[0].kind == "plane"
    world, _ = load_world(load_config(None, {"model": str(sr1), "hold": 0, "ground": False}))
    assert [m.name for m in world] == ["SR1"]
    floor = sr1.parent / "floor.wrl"
    assert not needs_ground([mb.load_model(sr1), mb.load_model(floor)])
    assert not needs_ground([mb.load_model(URDF / "elements.urdf", floating_base=False)])   # welded: no fall
    assert needs_ground([mb.load_model(URDF / "elements.urdf")])         # its root floats, as in Gazebo
    assert needs_ground([mb.load_model(ARM, floating_base=True)])        # a floating URDF alone falls
