"""`mbsim run` worlds: a floating robot alone gets a ground plane (not with --no-ground), a model
placed inside another is named in a warning, --on-ground puts it back on the floor, and a
second copy of a model loads beside the first under qualified names."""
from pathlib import Path

import pytest

from mbsim_ros.cli import main

BUNDLED = Path(__file__).resolve().parents[2] / "mbsim_ros" / "data" / "models"
OPENHRP = Path(__file__).resolve().parents[1] / "models" / "openhrp"
RUN = ["--rtf", "0", "--transport", "none", "--quiet"]


def run(capsys, *args, duration=0.02):
    status = main(["run", *args, *RUN, "--duration", str(duration)])
    out, err = capsys.readouterr()
    return status, out, err


def contacts(out):
    line = next(l for l in out.splitlines() if l.startswith("final position of"))
    return int(line.rsplit(";", 1)[1].split()[0])


def test_a_floating_robot_alone_stands_on_an_added_ground_plane(capsys):
    status, out, err = run(capsys, str(BUNDLED / "SR1.wrl"), duration=0.1)   # lands at t = 0.03 s
    assert status == 0 and "added a ground plane" in err and "simulating SR1, ground:" in out
    assert contacts(out) >= 4                        # its soles on the plane
    status, out, err = run(capsys, str(BUNDLED / "SR1.wrl"), "--no-ground", duration=0.1)
    assert status == 0 and "ground plane" not in err and "simulating SR1:" in out and contacts(out) == 0


def test_a_robot_placed_in_the_floor_is_warned_about_and_on_ground_fixes_it(capsys):
    status, out, err = run(capsys, str(BUNDLED / "SR1.wrl"), str(BUNDLED / "floor.wrl"), "--pose", "0", "0", "-0.05", "0", "0", "0")
    assert status == 0
    warnings = [l for l in err.splitlines() if l.startswith("warning: SR1 and floor start inside each other: links")]
    assert len(warnings) == 1 and "LLEG_ANKLE_R and FLOOR 45.0 mm" in warnings[0]
    status, out, err = run(capsys, str(BUNDLED / "SR1.wrl"), str(BUNDLED / "floor.wrl"),
                           "--pose", "0", "0", "-0.05", "0", "0", "0", "--on-ground")
    assert status == 0 and "inside each other" not in err


def test_openhrp_floor_beside_a_robot_and_bad_poses(capsys):
    status, out, err = run(capsys, str(BUNDLED / "SR1.wrl"), str(OPENHRP / "openhrp_floor.wrl"))
    assert status == 0 and "simulating SR1, floor" in out and "inside each other" not in err
    status, out, err = run(capsys, str(BUNDLED / "SR1.wrl"), "--pose", "0", "0", "0", "0", "0", "0",
                           "--pose", "1", "0", "0", "0", "0", "0")
    assert status == 2 and "--pose given 2 times for 1 model(s)" in err and len(err.splitlines()) == 1


def test_the_node_takes_on_ground_and_ground_as_parameters():
    from mbsim_ros.ros.parameters import PARAMETER_DEFAULTS, config_from_parameters
    values = dict(PARAMETER_DEFAULTS, on_ground=True, ground=False)
    config = config_from_parameters(values, "/")
    assert config.on_ground is True and config.ground is False
    assert config_from_parameters(dict(PARAMETER_DEFAULTS), "/").on_ground is False


def test_mbsim_run_expands_a_xacro_with_the_arguments_after_it(capsys, tmp_path):
    from mbsim_ros.ros.bag import BagTransport  # noqa: F401  (the bag writer is a run-time dependency)
    arm = Path(__file__).resolve().parents[1] / "models" / "urdf" / "arm.urdf.xacro"
    bag = tmp_path / "bag"
    status, out, err = run(capsys, str(arm), "prefix:=left_", "length:=0.5", "--fixed-base", "--bag", str(bag))
    assert status == 0 and "simulating arm:" in out, err
    reader = pytest.importorskip("mcap_ros2.reader", reason="mcap-ros2-support is a test dependency")
    names = set()
    with open(next(bag.glob("*.mcap")), "rb") as f:
        for m in reader.read_ros2_messages(f, topics=["/arm/joint_states"]):
            names |= set(m.ros_msg.name)
    assert names == {"left_shoulder", "left_finger_a_joint", "left_finger_b_joint"}
    status, out, err = run(capsys, "length:=0.5")
    assert status == 2 and "needs a .xacro model file before it" in err
