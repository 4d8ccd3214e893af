"""A newcomer's first robots: five public robots of `example-robot-data` (test extra) through
`mbsim run` in a fresh process, with no flag but --on-ground where the robot floats (and the
test's own --duration, --rtf 0, --transport none --bag to read the outcome back).

Each run ends with status 0, prints no traceback and no raw Python warning, and says in its
first lines whether the robot's root floats or is welded and why. The outcome is read from the
bag with mcap-ros2-support (not our code):
- floating robots (solo12, Talos, TIAGo, the Allegro hand) start on the ground and stay above
  it: their root link neither sinks through the ground plane nor flies off;
- the UR5, welded to `world` by its file, holds its initial pose (the hold springs, 2000 N m/rad
  by default: the arm's gravity torques, at most ~50 N m, give under 0.03 rad) and touches
  nothing;
- none needs a flag it was not given: no start-up note of models inside each other, no slow-run
  hint (the real-time factor is printed, never asserted: tests do not time).
"""
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import example_robot, subprocess_env

REPO = Path(__file__).resolve().parents[1]
DURATION = 0.5      # s: long enough to fall 1.2 m or to settle onto the ground

# (what, file in example-robot-data, extra flags, root link, floats?)
ROBOTS = [
    ("quadruped", ("solo_description", "robots", "solo12.urdf"), ["--on-ground"], "base_link", True),
    ("humanoid", ("talos_data", "robots", "talos_reduced.urdf"), ["--on-ground"], "base_link", True),
    ("arm", ("ur_description", "urdf", "ur5_robot.urdf"), [], "world", False),
    ("mobile_base", ("tiago_description", "robots", "tiago_no_hand.urdf"), ["--on-ground"], "base_footprint", True),
    ("hand", ("allegro_hand_description", "urdf", "allegro_right_hand.urdf"), ["--on-ground"], "palm_link", True),
]
RAW_WARNING = re.compile(r"\w+Warning: |File \".*\", line \d+|^\s+warnings\.warn", re.M)


def run(path, flags, bag):
    env = subprocess_env()
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    argv = [sys.executable, "-m", "mbsim_ros.cli", "run", str(path), *flags, "--duration", str(DURATION),
            "--rtf", "0", "--transport", "none", "--bag", str(bag), "--quiet"]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=1200)


def messages(bag, topic_suffix):
    reader = pytest.importorskip("mcap_ros2.reader", reason="mcap-ros2-support is a test dependency")
    return [m.ros_msg for m in reader.read_ros2_messages(str(next(Path(bag).glob("*.mcap"))))
            if m.channel.topic.endswith(topic_suffix)]


@pytest.mark.parametrize("what, parts, flags, root, floats", ROBOTS, ids=[r[0] for r in ROBOTS])
def test_a_public_robot_runs_as_a_newcomer_would_run_it(tmp_path, what, parts, flags, root, floats):
    path = example_robot(*parts)
    p = run(path, flags, tmp_path / "bag")
    output = p.stdout + p.stderr
    assert p.returncode == 0, output[-3000:]
    assert "Traceback" not in output and not RAW_WARNING.search(output), output[-3000:]
    # nothing that a flag would have fixed: no model starting inside another or the ground (the
    # start-up check's note names --on-ground), no slow-run hint (it names the flags that help);
    # the run's speed itself is a printed figure, not asserted
    assert "start inside each other" not in output and "note: running at rtf" not in output, output[-3000:]
    assert re.search(r"real-time factor: \d", p.stdout), p.stdout
    first = p.stderr.splitlines()[:3]
    said = "floats (no link named world welds it" if floats else "is welded to the world (a link named world"
    assert any(f"root link {root} {said}" in line for line in first), first
    # the summary gives a floating base's final position, none for a welded arm
    assert bool(re.search(rf"final position of {root}: \[\S+ \S+ \S+\]", p.stdout)) == floats, p.stdout
    states = messages(tmp_path / "bag", "/joint_states")
    assert len(states) >= 10
    q0, q1 = np.array(states[0].position), np.array(states[-1].position)
    assert np.all(np.isfinite(q1))
    if floats:
        tf = [t for m in messages(tmp_path / "bag", "/tf") for t in m.transforms if t.child_frame_id.endswith(root)]
        z = np.array([t.transform.translation.z for t in tf])
        assert len(z) >= 10 and np.all(np.isfinite(z))
        # on the ground at the start (--on-ground), and still there: no sinking through the
        # plane, no flying off (the highest a root gets is where it started, plus 5 cm of
        # settling bounce)
        assert z.min() > -0.01 and z.max() < z[0] + 0.05, (z[0], z.min(), z.max())
    else:
        np.testing.assert_allclose(q1, q0, atol=0.03)
        # welded, with no ground under it: nothing touches (no contact between a link and what
        # it is welded to, nor between parent and child links)
        assert p.stdout.rstrip().splitlines()[-1] != "" and re.search(r"\b0 contacts", p.stdout), p.stdout
