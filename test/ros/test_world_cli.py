"""`mbsim run` worlds: a floating robot alone gets a ground plane (not with --no-ground), a model
placed inside another is named in a warning, --on-ground puts it back on the floor, and a
second copy of a model loads beside the first under qualified names."""
from pathlib import Path

import pytest

from mbsim_ros.cli import main

BUNDLED = Path(__file__).resolve().parents[2] / "mbsim_ros" / "data" / "models"
OPENHRP = Path(__file__).resolve().parents[1] / "models" / "openhrp"
RUN = ["--rtf", "0", "--transport", "none", "--duration", "0.02", "--quiet"]


def run(capsys, *args):
    status = main(["run", *args, *RUN])
    out, err = capsys.readouterr()
    return status, out, err


def contacts(out):
    line = next(l for l in out.splitlines() if l.startswith("final position of"))
    return int(line.rsplit(";", 1)[1].split()[0])


def test_a_floating_robot_alone_stands_on_an_added_ground_plane(capsys):
    status, out, err = run(capsys, str(BUNDLED / "SR1.wrl"))
    assert status == 0 and "added a ground plane" in err and "simulating SR1, ground:" in out
    assert contacts(out) >= 4                        # its soles on the plane
    status, out, err = run(capsys, str(BUNDLED / "SR1.wrl"), "--no-ground")
    assert status == 0 and "ground plane" not in err and "simulating SR1:" in out and contacts(out) == 0


def test_a_robot_placed_in_the_floor_is_warned_about_and_on_ground_fixes_it(capsys):
    status, out, err = run(capsys, str(BUNDLED / "SR1.wrl"), str(BUNDLED / "floor.wrl"), "--pose", "0", "0", "-0.05", "0", "0", "0")
    assert status == 0
    warnings = [l for l in err.splitlines() if l.startswith("warning: links")]
    assert any("LLEG_ANKLE_R" in w and "FLOOR" in w for w in warnings)
    status, out, err = run(capsys, str(BUNDLED / "SR1.wrl"), str(BUNDLED / "floor.wrl"),
                           "--pose", "0", "0", "-0.05", "0", "0", "0", "--on-ground")
    assert status == 0 and "inside each other" not in err


def test_openhrp_floor_beside_a_robot_and_bad_poses(capsys):
    status, out, err = run(capsys, str(BUNDLED / "SR1.wrl"), str(OPENHRP / "openhrp_floor.wrl"))
    assert status == 0 and "simulating SR1, floor" in out and "inside each other" not in err
    status, out, err = run(capsys, str(BUNDLED / "SR1.wrl"), "--pose", "0", "0", "0", "0", "0", "0",
                           "--pose", "1", "0", "0", "0", "0", "0")
    assert status == 2 and "--pose given 2 times for 1 model(s)" in err and len(err.splitlines()) == 1
