"""Where models start: a floating robot lowered onto what is below it, a warning naming the
links of models that start inside each other, and URDF mimic joints following their leader."""
from pathlib import Path

import numpy as np
import pytest

import mbsim_ros as mb
from mbsim_ros.dynamics.placement import ground_height, lowest_point, overlap_notes, overlaps, put_on_ground
from mbsim_ros.model.transforms import make_transform

HERE = Path(__file__).resolve().parent
BUNDLED = HERE.parent.parent / "mbsim_ros" / "data" / "models"
ARM = HERE.parent / "models" / "urdf" / "arm.urdf.xacro"


def lifted(dz):
    return make_transform(None, (0.0, 0.0, dz))


def test_on_ground_lowers_a_lifted_robot_until_its_soles_touch_the_floor():
    """SR1 placed 0.5 m above its place on the bundled floor (the file itself starts its soles
    5 mm above the floor's top, hence the landing at t = 0.03 s): put_on_ground moves it down by
    0.5 m plus that gap, after which its lowest collision point is at the floor's top to 1e-12
    and nothing overlaps by more than 1 mm."""
    robot, floor = mb.load_model(BUNDLED / "SR1.wrl"), mb.load_model(BUNDLED / "floor.wrl")
    as_filed = mb.Simulation([robot, floor], dt=1e-3)
    low = lowest_point(as_filed, "SR1")
    top = ground_height(as_filed, "SR1", low[:2])
    gap = low[2] - top
    assert gap == pytest.approx(0.005, abs=1e-3)
    sim = mb.Simulation([robot, floor], dt=1e-3, poses=[lifted(0.5), None])
    dz = put_on_ground(sim, "SR1")
    assert dz == pytest.approx(-0.5 - gap, abs=1e-12)
    assert lowest_point(sim, "SR1")[2] == pytest.approx(top, abs=1e-12)
    assert overlaps(sim) == []
    assert put_on_ground(sim, "floor") is None        # not floating


def test_on_ground_moves_the_weld_of_a_fixed_base_robot():
    """solo12 welded to the world at the origin hangs its feet below the floor's top; on_ground
    moves its placement (the weld) up until its lowest collision point is on the floor's top
    (to 1e-12: a rigid shift of the model), with a note saying so; the floor stays."""
    from conftest import example_robot
    robot = mb.load_model(example_robot("solo_description", "robots", "solo12.urdf"), floating_base=False)
    floor = mb.load_model(BUNDLED / "floor.wrl")
    sim = mb.Simulation([robot, floor], dt=1e-3)
    low = lowest_point(sim, "solo")
    top = ground_height(sim, "solo", low[:2])
    assert low[2] < top - 0.1
    dz = put_on_ground(sim, "solo")
    assert dz == pytest.approx(top - low[2], abs=1e-12)
    assert lowest_point(sim, "solo")[2] == pytest.approx(top, abs=1e-12)
    np.testing.assert_allclose(sim.model_pose("solo")[:3, 3], [0, 0, dz], atol=1e-12)
    assert any(n.startswith("on_ground: solo is fixed to the world (fixed root joint): its whole model moved +")
               for n in sim.notes)
    assert put_on_ground(sim, "floor") is None and np.array_equal(sim.model_pose("floor"), np.eye(4))


def test_a_robot_started_inside_the_floor_is_named_in_a_warning():
    robot, floor = mb.load_model(BUNDLED / "SR1.wrl"), mb.load_model(BUNDLED / "floor.wrl")
    sim = mb.Simulation([robot, floor], dt=1e-3, poses=[lifted(-0.05), None])
    (note,) = overlap_notes(sim)                      # one line for the pair of models
    assert note.startswith("SR1 and floor start inside each other: links ")
    assert "LLEG_ANKLE_R and FLOOR 45.0 mm" in note and "RLEG_ANKLE_R and FLOOR 45.0 mm" in note
    deepest = overlaps(sim)[0][2]
    assert deepest == pytest.approx(0.05 - 0.005, abs=1e-6)      # less the file's own 5 mm gap (box on box: exact)
    assert overlap_notes(mb.Simulation([robot, floor], dt=1e-3)) == []   # as the file places it


def test_a_mimic_finger_follows_its_leader_through_the_solver():
    """The xacro arm's finger_b mimics finger_a with multiplier -1 and offset 1 mm: pushing
    finger_a alone (0.2 N for 0.2 s) moves finger_b the opposite way, the coupling held to 1e-6 m
    (Baumgarte's joint_erp closes the initial 1 mm within the first steps)."""
    arm = mb.load_model(ARM, floating_base=False)
    sim = mb.Simulation(arm, dt=1e-3)
    ia, ib = sim.dof_index("finger_a_joint"), sim.dof_index("finger_b_joint")
    for _ in range(200):
        sim.tau[ia[1]] = 0.2
        sim.step()
    qa, qb = sim.q[ia[0]], sim.q[ib[0]]
    assert qa > 0.01
    assert qb == pytest.approx(-qa + 0.001, abs=1e-6)
