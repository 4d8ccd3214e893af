"""Contact-rich scenes stay at rest (issue 39): a stack of ten boxes on the floor and a
gripper holding a box in the air by friction, 10 s each at dt = 1 ms, from MJCF files that
bench/contact_scenes.py also runs in MuJoCo. Tolerance 1 mm: the boxed LCP holds contacts
rigidly (its error reduction corrects the few micrometres a step leaves), so a stack that
creeps, jitters apart or a box that slips out of the grip moves far more in 10 s."""
import numpy as np
import pytest

import mbsim_ros as mb
from conftest import OWN_MODELS

SECONDS = 10.0
TOL = 1e-3          # m


def run(path, **load):
    sim = mb.Simulation(mb.load_model(str(OWN_MODELS / "mjcf" / path), **load), dt=0.001)
    start = sim.q.copy()
    sim.step(int(round(SECONDS / sim.dt)))
    stats = sim.stats()
    assert stats["pgs_failures"] == 0, stats
    return start, sim


def test_a_stack_of_ten_boxes_stays_stacked_for_ten_seconds():
    start, sim = run("stack.xml")
    assert len(sim.contacts()) == 40                 # four corners under each box
    moved = np.abs(sim.q - start).reshape(10, 7)
    assert moved[:, :3].max() < TOL, moved[:, :3].max(axis=1)
    assert moved[:, 3:].max() < 1e-3, moved[:, 3:].max(axis=1)      # orientation: quaternion entries


def test_a_gripper_holds_a_box_for_ten_seconds():
    start, sim = run("gripper.xml", keyframe="hold")
    (obj,) = [j for j in sim.models[0].joints if j.type == "free"]
    i = obj.q_index
    assert np.abs(sim.q[i:i + 3] - start[i:i + 3]).max() < TOL      # not slipped
    assert all({c.link_a, c.link_b} & {"left", "right"} for c in sim.contacts())   # held by the fingers alone
    assert sim.q[i + 2] == pytest.approx(0.43, abs=TOL)
