"""`mbsim render --at T`: the world at a time of a run, simulated to T or posed from a recorded
bag's /tf. A floating quadruped dropped from 1 m falls freely for the first 0.2 s (its feet are
~0.5 m above the ground plane): its base is at 1 - g t^2 / 2 (within 3 mm: semi-implicit Euler at
dt = 1 ms is off by ~g dt t / 2 = 1 mm, the held joints move the base against the body's centre
of mass by less). From a bag, the base is exactly where the bag's /tf (read here with rosbags)
put it at the last stamp <= T."""
import numpy as np
import pytest
from rosbags.rosbag2 import Reader

from conftest import shared_model
from mbsim_ros.cli import _world_at, build_parser, main
from mbsim_ros.ros.messages import TYPESTORE

G = 9.80665


def dropped(*extra):
    return [str(shared_model("urdf", "quadruped.urdf")), "--floating-base", "--pose", "0", "0", "1", "0", "0", "0",
            *extra]


def base_height(scene):
    return scene.link_transform("base_link")[2, 3]


def test_render_at_a_time_simulates_to_it():
    args = build_parser().parse_args(["render", *dropped("--at", "0.2"), "-o", "x.png"])
    models, scene, notes, when = _world_at(args)
    assert base_height(scene) == pytest.approx(1.0 - 0.5 * G * 0.2 ** 2, abs=3e-3)
    assert when == ", at t = 0.2 s"


def tf_at(bag, child, t):
    """The last /tf transform of `child` stamped at or before t, as rosbags reads it."""
    best = None
    with Reader(bag) as r:
        conns = [c for c in r.connections if c.topic == "/tf"]
        for c, _, raw in r.messages(connections=conns):
            for tr in TYPESTORE.deserialize_cdr(raw, c.msgtype).transforms:
                s = tr.header.stamp.sec + 1e-9 * tr.header.stamp.nanosec
                if tr.child_frame_id == child and s <= t + 1e-9 and (best is None or s >= best[0]):
                    best = (s, tr.header.frame_id, tr.transform.translation)
    return best


def test_render_at_a_time_of_a_bag_poses_the_links_as_recorded(tmp_path, capsys):
    bag = tmp_path / "drop"
    assert main(["run", *dropped("--duration", "0.3", "--rtf", "0", "--transport", "none", "--bag", str(bag),
                                 "--quiet")]) == 0
    args = build_parser().parse_args(["render", *dropped("--at", "0.25", "--bag", str(bag)), "-o", "x.png"])
    _, scene, _, when = _world_at(args)
    stamp, parent, p = tf_at(bag, "base_link", 0.25)
    assert parent == "odom" and 0.2 < stamp <= 0.25            # odom sits at the world origin (/tf_static)
    assert base_height(scene) == p.z and scene.link_transform("base_link")[0, 3] == p.x
    assert base_height(scene) == pytest.approx(1.0 - 0.5 * G * stamp ** 2, abs=3e-3)
    capsys.readouterr()
    assert main(["render", *dropped("--at", "0.25", "--bag", str(bag)), "-o", str(tmp_path / "at.png")]) == 0
    assert "at t = 0.25 s of" in capsys.readouterr().out and (tmp_path / "at.png").stat().st_size > 1000
    assert main(["render", *dropped("--at", "7", "--bag", str(bag)), "-o", str(tmp_path / "late.png")]) == 2
    err = capsys.readouterr().err
    assert "outside the recorded /tf" in err and len(err.strip().splitlines()) == 1


def test_render_bag_needs_a_time(tmp_path, capsys):
    assert main(["render", "--bag", str(tmp_path), "-o", str(tmp_path / "x.png")]) == 2
    assert "--bag needs --at T" in capsys.readouterr().err
