"""Broken Chrono YAML files: each raises one ModelError naming the file and the key path, with
no chained traceback from inside PyYAML or numpy."""
import textwrap
import warnings

import pytest

from mbsim_ros import ModelError
from mbsim_ros.formats import load_model

HEAD = """\
chrono-version: 10.0
model:
  bodies:
    - {name: ground, location: [0, 0, 0], fixed: true}
    - {name: a, location: [1, 0, 0], mass: 1, inertia: {moments: [1, 1, 1]}}
"""


def joints(*lines):
    return HEAD + "  joints:\n" + "".join(f"    - {line}\n" for line in lines)


REV = "{name: j0, type: REVOLUTE, body1: ground, body2: a, location: [0, 0, 0], axis: [0, 0, 1]}"

# (case, file text, the key path the message must name, words it must contain)
CASES = [
    ("unknown_body", joints(REV, REV.replace("j0", "j1"), REV.replace("j0", "j2"),
                            "{name: j3, type: SPHERICAL, body1: a, body2: ghost, location: [0, 0, 0]}"),
     "model.joints[3].body2", "'ghost' is not a body"),
    ("unknown_joint_type", joints("{name: j, type: HINGE, body1: ground, body2: a, location: [0, 0, 0]}"),
     "model.joints[0].type", "expected one of LOCK, REVOLUTE"),
    ("axis_length", joints(REV, "{name: j1, type: REVOLUTE, body1: ground, body2: a, location: [0, 0, 0], axis: [0, 1]}"),
     "model.joints[1].axis", "expected 3 numbers, got 2"),
    ("zero_axis", joints("{name: j, type: PRISMATIC, body1: ground, body2: a, location: [0, 0, 0], axis: [0, 0, 0]}"),
     "model.joints[0].axis", "zero direction"),
    ("missing_axis", joints("{name: j, type: REVOLUTE, body1: ground, body2: a, location: [0, 0, 0]}"),
     "model.joints[0].axis", "missing"),
    ("parallel_universal", joints("{name: j, type: UNIVERSAL, body1: ground, body2: a, location: [0, 0, 0], "
                                  "axis1: [1, 0, 0], axis2: [2, 0, 0]}"),
     "model.joints[0].axis2", "parallel"),
    ("no_mass", HEAD.replace("mass: 1, ", ""), "model.bodies[1].mass", "needs a mass"),
    ("zero_mass", HEAD.replace("mass: 1", "mass: 0"), "model.bodies[1].mass", "must be > 0"),
    ("no_inertia", HEAD.replace(", inertia: {moments: [1, 1, 1]}", ""), "model.bodies[1].inertia", "missing"),
    ("text_number", HEAD.replace("mass: 1", "mass: heavy"), "model.bodies[1].mass", "expected a number, got 'heavy'"),
    ("bad_quaternion", HEAD.replace("location: [1, 0, 0]", "location: [1, 0, 0], orientation: [1, 1, 0, 0]"),
     "model.bodies[1].orientation", "not a unit quaternion"),
    ("orientation_length", HEAD.replace("location: [1, 0, 0]", "location: [1, 0, 0], orientation: [1, 0]"),
     "model.bodies[1].orientation", "expected [yaw, pitch, roll] or a quaternion"),
    ("location_length", HEAD.replace("location: [1, 0, 0]", "location: [1, 0, 0, 0]"),
     "model.bodies[1].location", "expected 3 numbers, got 4"),
    ("duplicate_body", HEAD + "    - {name: a, location: [1, 0, 0], mass: 1, inertia: {moments: [1, 1, 1]}}\n",
     "model.bodies[2].name", "second body named 'a'"),
    ("self_joint", joints("{name: j, type: LOCK, body1: a, body2: a, location: [0, 0, 0]}"),
     "model.joints[0].body2", "to itself"),
    ("bushing_prismatic", joints("{name: j, type: PRISMATIC, body1: ground, body2: a, location: [0, 0, 0], axis: [1, 0, 0], "
                                 "bushing_data: {stiffness_linear: 1, damping_linear: 1, stiffness_rotational: 1, damping_rotational: 1}}"),
     "model.joints[0].bushing_data", "not supported"),
    ("bushing_missing_key", joints("{name: j, type: LOCK, body1: ground, body2: a, location: [0, 0, 0], "
                                   "bushing_data: {stiffness_linear: 1, damping_linear: 1, stiffness_rotational: 1}}"),
     "model.joints[0].bushing_data.damping_rotational", "missing"),
    ("motor_function_type", HEAD + "  motors:\n    - {name: m, type: ROTATION, body1: a, body2: ground, location: [0, 0, 0], "
                                   "axis: [0, 0, 1], actuation_type: SPEED, actuation_function: {type: COSINE}}\n",
     "model.motors[0].actuation_function.type", "expected one of CONSTANT"),
    ("motor_actuation", HEAD + "  motors:\n    - {name: m, type: ROTATION, body1: a, body2: ground, location: [0, 0, 0], "
                               "axis: [0, 0, 1], actuation_type: TORQUE, actuation_function: {type: CONSTANT, value: 1}}\n",
     "model.motors[0].actuation_type", "expected one of POSITION, SPEED, FORCE"),
    ("data_row_length", HEAD + "  motors:\n    - {name: m, type: LINEAR, body1: a, body2: ground, location: [0, 0, 0], "
                               "axis: [1, 0, 0], actuation_type: POSITION, actuation_function: {type: DATA, data: [[0, 1], [1, 2, 3]]}}\n",
     "model.motors[0].actuation_function.data[1]", "expected 2 numbers, got 3"),
    ("repeat_width", HEAD + "  motors:\n    - {name: m, type: LINEAR, body1: a, body2: ground, location: [0, 0, 0], axis: [1, 0, 0], "
                            "actuation_type: FORCE, actuation_function: {type: CONSTANT, value: 1, repeat: {start: 0, width: 0, shift: 0}}}\n",
     "model.motors[0].actuation_function.repeat.width", "positive width"),
    ("tsda_no_force", HEAD + "  tsdas:\n    - {name: t, body1: ground, body2: a, point1: [0, 0, 0], point2: [1, 0, 0]}\n",
     "model.tsdas[0]", "no spring_coefficient"),
    ("tsda_map_columns", HEAD + "  tsdas:\n    - {name: t, body1: ground, body2: a, point1: [0, 0, 0], point2: [1, 0, 0], "
                                "deformation: [0, 1], map_data: [[0, 1, 2], [1, 2]]}\n",
     "model.tsdas[0].map_data[1]", "expected 3 numbers, got 2"),
    ("tsda_no_free_length", HEAD + "  tsdas:\n    - {name: t, body1: ground, body2: a, point1: [0, 0, 0], point2: [1, 0, 0], "
                                   "spring_coefficient: 1}\n",
     "model.tsdas[0].free_length", "missing"),
    ("constraint_type", HEAD + "  constraints:\n    - {name: c, type: GEAR, body1: ground, body2: a}\n",
     "model.constraints[0].type", "expected one of DISTANCE"),
    ("rev_sph_axis", HEAD + "  constraints:\n    - {name: c, type: revolute-spherical, body1: ground, body2: a, "
                            "point1: [0, 0, 0], point2: [1, 0, 0]}\n",
     "model.constraints[0].axis", "missing"),
    ("collision_material", HEAD.replace("inertia: {moments: [1, 1, 1]}", "inertia: {moments: [1, 1, 1]}, contact: {materials: "
                                        "[{name: steel}], shapes: [{type: SPHERE, material: wood, location: [0, 0, 0], radius: 1}]}"),
     "model.bodies[1].contact.shapes[0].material", "'wood' is not one of"),
    ("bodies_not_list", "chrono-version: 10.0\nmodel:\n  bodies: {name: a}\n", "model.bodies", "expected a list"),
    ("no_model", "chrono-version: 10.0\ntype: MBS\n", "model", "missing"),
    ("not_yaml", "model: [unclosed\n", "line", "not valid YAML"),
    ("top_not_mapping", "- just\n- a list\n", "", "expected a YAML mapping"),
    ("sim_missing_model_file", "chrono-version: 10.0\ntype: MBS\nmodel: nowhere.yaml\nsolver: s.yaml\n",
     "model", "no such file"),
    ("solver_time_step", None, "integrator.time_step", "positive time step"),
]


@pytest.mark.parametrize("case, text, path, words", CASES, ids=[c[0] for c in CASES])
def test_bad_file_raises_one_clear_model_error(tmp_path, case, text, path, words):
    file = tmp_path / f"{case}.yaml"
    if text is None:     # a simulation file with a bad solver file
        (tmp_path / "m.yaml").write_text(HEAD)
        (tmp_path / "s.yaml").write_text("chrono-version: 10.0\ncontact_method: SMC\nintegrator: {type: HHT, time_step: -1}\n")
        text = "chrono-version: 10.0\ntype: MBS\nmodel: m.yaml\nsolver: s.yaml\n"
    file.write_text(textwrap.dedent(text))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ModelError) as err:
            load_model(file)
    message = str(err.value)
    assert message.startswith(str(tmp_path)), message       # names the file
    assert path in message and words in message, message
    e = err.value
    assert e.__cause__ is None and (e.__context__ is None or e.__suppress_context__), "a chained traceback leaks through"


def test_unknown_keys_and_fixed_pairs_warn(tmp_path):
    file = tmp_path / "m.yaml"
    file.write_text(HEAD.replace("fixed: true}", "fixed: true, colour: red}") +
                    "    - {name: g2, location: [0, 0, 0], fixed: true}\n"
                    "  joints:\n    - {name: j, type: LOCK, body1: ground, body2: g2, location: [0, 0, 0]}\n")
    with pytest.warns(UserWarning) as record:
        model = load_model(file)
    messages = [str(w.message) for w in record]
    assert any("model.bodies[0].colour" in m and "ignored" in m for m in messages)
    assert any("model.joints[0]" in m and "two fixed bodies" in m for m in messages)
    assert model.warnings == messages


def test_invalid_utf8_names_line_and_byte_offset(tmp_path):
    """Issue 19: an invalid UTF-8 byte was a UnicodeDecodeError traceback."""
    path = tmp_path / "bad_bytes.yaml"
    path.write_bytes(b"chrono-version: 10.0\nmodel:\n  name: a\xffb\n")
    with pytest.raises(ModelError, match=rf"^{path}:3: byte 0xff at byte offset 37 is not UTF-8 text; "
                                         "expected a YAML file in UTF-8"):
        load_model(path)
