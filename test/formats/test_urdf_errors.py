"""Broken URDF files: each raises ModelError naming the file, the line and what was expected,
without a chained traceback from inside lxml or numpy."""
import re
import textwrap

import numpy as np
import pytest

from mbsim_ros import ModelError
from mbsim_ros.formats import load_model
from mbsim_ros.formats.urdf import load_urdf

GOOD_LINK = '<link name="b"><inertial><mass value="1"/><inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="1"/></inertial></link>'


def robot(*body):
    return '<?xml version="1.0"?>\n<robot name="r">\n' + "\n".join(body) + "\n</robot>\n"


def joint(name="j", type="revolute", parent="a", child="b", extra=""):
    return (f'<joint name="{name}" type="{type}"><parent link="{parent}"/><child link="{child}"/>'
            f'<limit lower="-1" upper="1" effort="1" velocity="1"/>{extra}</joint>')


# (case, file text, the text marking the offending line or None for "any line", expected words)
CASES = [
    ("not_xml", "this is not XML at all\n", None, "not well-formed XML"),
    ("empty", "", None, "not well-formed XML"),
    ("truncated", robot('<link name="a"/>', GOOD_LINK)[:60], None, "not well-formed XML"),
    ("no_robot", '<?xml version="1.0"?>\n<sdf version="1.6"><model name="m"/></sdf>\n', "<sdf", "root element must be <robot"),
    ("robot_without_name", '<robot>\n<link name="a"/>\n</robot>', "<robot>", "missing attribute name"),
    ("no_links", '<robot name="r">\n</robot>', "<robot", "at least one <link"),
    ("missing_parent_link", robot('<link name="a"/>', GOOD_LINK, joint(parent="ghost")), "<joint", "'ghost' does not exist"),
    ("missing_child_element", robot('<link name="a"/>', GOOD_LINK,
                                    '<joint name="j" type="fixed">\n<parent link="a"/></joint>'),
     '<joint name="j"', "missing <child"),
    ("unknown_joint_type", robot('<link name="a"/>', GOOD_LINK, joint(type="hinge")), "<joint", "expected one of revolute"),
    ("non_numeric_xyz", robot('<link name="a"/>', GOOD_LINK, '<joint name="j" type="fixed">',
                              '<parent link="a"/><child link="b"/>', '<origin xyz="0 one 0"/></joint>'),
     "<origin", "expected 3 numbers"),
    ("wrong_count_rpy", robot('<link name="a"/>', GOOD_LINK, '<joint name="j" type="fixed">',
                              '<parent link="a"/><child link="b"/>', '<origin rpy="0 0"/></joint>'),
     "<origin", "expected 3 numbers, got 2"),
    ("two_masses", robot('<link name="a">', '<inertial><mass value="1 2"/>',
                         '<inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="1"/></inertial></link>'),
     "<inertial><mass", 'value="1 2": expected a number, got 2'),
    ("nan_xyz", robot('<link name="a"/>', GOOD_LINK, '<joint name="j" type="fixed">',
                      '<parent link="a"/><child link="b"/>', '<origin xyz="0 nan 0"/></joint>'),
     "<origin", "expected finite numbers"),
    ("negative_mass", robot('<link name="a">', '<inertial><mass value="-1"/>',
                            '<inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="1"/></inertial></link>'),
     "<inertial><mass", "expected a mass >= 0"),
    ("missing_mass", robot('<link name="a">', '<inertial>',
                           '<inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="1"/></inertial></link>'),
     "<inertial>", "missing <mass"),
    ("missing_inertia_value", robot('<link name="a">', '<inertial><mass value="1"/>',
                                    '<inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0"/></inertial></link>'),
     "<inertia ", "missing attribute izz"),
    ("zero_axis", robot('<link name="a"/>', GOOD_LINK, joint(extra='\n<axis xyz="0 0 0"/>')), '<axis xyz="0 0 0"', "nonzero axis"),
    ("lower_above_upper", robot('<link name="a"/>', GOOD_LINK,
                                '<joint name="j" type="revolute"><parent link="a"/><child link="b"/>',
                                '<limit lower="2" upper="1" effort="1" velocity="1"/></joint>'),
     "<limit", "expected lower <= upper"),
    ("cycle", robot('<link name="a"/>', '<link name="b"/>', joint("j1", "fixed", "a", "b"),
                    joint("j2", "fixed", "b", "a")), "<robot", "a cycle"),
    ("cycle_beside_a_root", robot('<link name="root"/>', '<link name="a"/>', '<link name="b"/>',
                                  joint("j1", "fixed", "a", "b"), joint("j2", "fixed", "b", "a")),
     '<link name="a"', "a cycle"),
    ("self_loop", robot('<link name="a"/>', joint("j1", "fixed", "a", "a")), "<joint", "a cycle"),
    ("two_roots", robot('<link name="a"/>', '<link name="b"/>'), "<robot", "2 root links: 'a' (line 3), 'b' (line 4)"),
    ("duplicate_link", robot('<link name="a"/>', '<link name="a"/>'), '<link name="a"/>\n</robot>', "a second link named 'a'"),
    ("duplicate_joint", robot('<link name="a"/>', '<link name="b"/>', '<link name="c"/>', joint("j", "fixed", "a", "b"),
                              joint("j", "fixed", "a", "c")), '<joint name="j" type="fixed"><parent link="a"/><child link="c"',
     "a second joint named 'j'"),
    ("two_parents", robot('<link name="a"/>', '<link name="b"/>', '<link name="c"/>', joint("j1", "fixed", "a", "c"),
                          joint("j2", "fixed", "b", "c")), '<joint name="j2"', "already the child of joint 'j1'"),
    ("no_geometry", robot('<link name="a">', '<visual><origin xyz="0 0 0"/></visual></link>'), "<visual>", "missing <geometry>"),
    ("unknown_geometry", robot('<link name="a"><visual><geometry>', '<cone radius="1" length="2"/></geometry></visual></link>'),
     "<cone", "unknown geometry"),
    ("bad_box_size", robot('<link name="a"><visual><geometry>', '<box size="1 2"/></geometry></visual></link>'),
     "<box", "expected 3 numbers, got 2"),
    ("bad_rgba", robot('<link name="a"><visual><geometry><sphere radius="1"/></geometry>',
                       '<material name="m"><color rgba="1 0 0"/></material></visual></link>'), "<material", "expected 4 numbers"),
    ("negative_damping", robot('<link name="a"/>', GOOD_LINK, joint(extra='\n<dynamics damping="-1"/>')), "<dynamics",
     "expected a value >= 0"),
]


def line_of(text, marker):
    return text[:text.index(marker)].count("\n") + 1


@pytest.mark.parametrize("case, text, marker, expected", CASES, ids=[c[0] for c in CASES])
def test_broken_urdf_raises_model_error_with_file_line_and_expectation(tmp_path, case, text, marker, expected):
    path = tmp_path / f"{case}.urdf"
    path.write_text(textwrap.dedent(text))
    with pytest.raises(ModelError) as info:
        load_urdf(path)
    message = str(info.value)
    assert f"{case}.urdf" in message
    assert expected in message
    if marker is None:
        assert re.search(r"line \d+", message), message
    else:
        assert f"line {line_of(text, marker)}" in message, message
    # raised by our code with the cause suppressed: no lxml or numpy traceback chained to it
    assert info.value.__cause__ is None
    assert info.value.__context__ is None or info.value.__suppress_context__


def test_missing_file(tmp_path):
    with pytest.raises(ModelError, match="absent.urdf"):
        load_urdf(tmp_path / "absent.urdf")
    with pytest.raises(ModelError, match="no such model file"):
        load_model(tmp_path / "absent.urdf")


def test_non_fatal_problems_are_warnings_not_errors(tmp_path):
    path = tmp_path / "soft.urdf"
    path.write_text(robot('<link name="a"><visual><geometry><sphere radius="1"/></geometry>',
                          '<material name="undefined"/></visual></link>', GOOD_LINK,
                          '<joint name="j" type="revolute"><parent link="a"/><child link="b"/></joint>',
                          '<link name="c"/>', joint("m", "revolute", "a", "c", '<mimic joint="j"/>')))
    with pytest.warns(UserWarning):
        model = load_urdf(path)
    assert len(model.warnings) == 2      # unknown material, revolute without <limit>
    assert [(c.dependent, c.independent) for c in model.couplers] == [("m", "j")]   # the mimic
    assert model.joint("j").lower[0] == -float("inf")


def test_mimics_that_cannot_hold_are_notes_as_urdfdom_loads_them(tmp_path):
    """A <mimic> on a fixed joint, of a fixed joint, or of a joint that does not exist: urdfdom
    loads the file and robot_state_publisher, Pinocchio and Gazebo ignore such a tag. One note
    per tag, naming its line; no coupler; the good mimic beside them still holds."""
    text = robot('<link name="a"/>', GOOD_LINK, '<link name="c"/>', '<link name="d"/>', '<link name="e"/>',
                 joint("j", "revolute", "a", "b"),
                 '<joint name="f" type="fixed"><parent link="a"/><child link="c"/>\n<mimic joint="j"/></joint>',
                 joint("g", "revolute", "a", "d", '\n<mimic joint="f" multiplier="2"/>'),
                 joint("h", "revolute", "a", "e", '\n<mimic joint="ghost"/>'))
    text = text.replace(joint("k", "revolute", "a", "e"), "")
    path = tmp_path / "mimics.urdf"
    path.write_text(text)
    with pytest.warns(UserWarning) as caught:
        model = load_urdf(path)
    notes = [str(w.message) for w in caught]
    assert model.warnings == notes and len(notes) == 3
    line = line_of(text, '<mimic joint="j"/></joint>')
    assert f"line {line}, <mimic>: 1 <mimic> on fixed joints ignored (a fixed joint does not move): " \
           f"f (line {line})" in notes[0]
    assert "mimic of joint 'f' ignored: joint 'f' is fixed" in notes[1]
    assert "mimic of joint 'ghost' ignored: no joint 'ghost' in this robot" in notes[2]
    assert model.couplers == []


def test_talos_urdfs_with_a_mimic_on_a_fixed_joint_load():
    """4 of the 6 Talos URDFs of example-robot-data carry <mimic> on fixed gripper joints."""
    from conftest import example_robot
    for name in ("talos_left_arm.urdf", "talos_reduced.urdf", "talos_reduced_box.urdf",
                 "talos_reduced_corrected.urdf"):
        with pytest.warns(UserWarning) as caught:
            model = load_urdf(example_robot("talos_data", "robots", name))
        notes = [str(w.message) for w in caught if "mimic" in str(w.message)]
        assert len(notes) == 1 and "<mimic> on fixed joints ignored" in notes[0], notes
        assert "gripper_left_inner_double_joint (line" in notes[0]
        assert model.joint("gripper_left_inner_double_joint").type == "fixed"


def test_other_elements_inside_geometry_are_notes(tmp_path):
    """<material> inside <geometry> (seen in public URDFs): urdfdom reads the shape and ignores
    the rest; so do we, with a note naming the line."""
    text = robot('<link name="a"><visual><geometry>', '<box size="1 2 3"/>',
                 '<material name="m"><color rgba="1 0 0 1"/></material></geometry></visual></link>')
    path = tmp_path / "material_in_geometry.urdf"
    path.write_text(text)
    with pytest.warns(UserWarning, match=rf"line {line_of(text, '<material')}, <material name=\"m\">: ignored "
                                         "inside <geometry> \\(the shape is the <box> on line"):
        model = load_urdf(path)
    np.testing.assert_array_equal(model.link("a").visuals[0].size, [1, 2, 3])
