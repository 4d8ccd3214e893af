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


def test_the_start_check_compiles_no_collision_kernel_when_no_shapes_of_two_models_can_meet(monkeypatch):
    """SR1 as its file places it on the floor (soles 5 mm above): the start check proves from the
    shapes' extents along the floor's normal that nothing overlaps, so it never calls (and a cold
    start never compiles) the collision kernel; 45 mm into the floor it does call it, and finds
    soles and ankles."""
    import mbsim_ros.dynamics.placement as placement
    calls = []
    kernel = placement.collide_kernel
    monkeypatch.setattr(placement, "collide_kernel", lambda *a: calls.append(1) or kernel(*a))
    robot, floor = mb.load_model(BUNDLED / "SR1.wrl"), mb.load_model(BUNDLED / "floor.wrl")
    assert overlaps(mb.Simulation([robot, floor], dt=1e-3)) == [] and calls == []
    sunk = overlaps(mb.Simulation([robot, floor], dt=1e-3, poses=[lifted(-0.05), None]))
    assert calls == [1] and {a for a, _, _, _ in sunk} == {"LLEG_ANKLE_R", "RLEG_ANKLE_R", "LLEG_ANKLE_P", "RLEG_ANKLE_P"}


def test_the_start_check_lets_every_overlap_through_to_the_collision_kernel():
    """Random poses of every pair of shape kinds, close enough to touch about half the time: each
    time the collision kernel finds the two interpenetrating by more than min_depth, the start
    check's bound (_may_overlap) lets the pair through; and it turns away most pairs that do not
    touch at all (a bound that let everything through would compile the kernel for every world)."""
    from scipy.spatial.transform import Rotation

    from mbsim_ros.dynamics.collision.collide import collide_kernel
    from mbsim_ros.dynamics.collision.geoms import compile_geoms, contacts_list
    from mbsim_ros.dynamics.compiled import compile_models
    from mbsim_ros.dynamics.placement import _may_overlap
    from mbsim_ros.model import Joint, Link, Model, Shape

    cube = np.array([[x, y, z] for x in (-0.1, 0.1) for y in (-0.1, 0.1) for z in (-0.1, 0.1)])
    shapes = [Shape("sphere", radius=0.3), Shape("box", size=[0.6, 0.4, 0.2]), Shape("capsule", radius=0.1, length=0.6),
              Shape("cylinder", radius=0.2, length=0.6), Shape("cone", radius=0.2, length=0.6),
              Shape("mesh", vertices=cube), Shape("plane")]

    def body(name, shape):
        m = Model(name)
        m.add_link(Link(f"{name}_link", 1.0, inertia=0.01 * np.eye(3), collisions=[shape]))
        m.add_joint(Joint(f"{name}_free", "free", None, f"{name}_link"))
        return m.finalize()

    rng = np.random.default_rng(7)
    min_depth, deep, apart, turned_away = 1e-3, 0, 0, 0
    for a in range(len(shapes)):
        for b in range(a, len(shapes) - (a == len(shapes) - 1)):
            models = [body("a", shapes[a]), body("b", shapes[b])]
            geoms = compile_geoms(models, compile_models(models))
            for _ in range(60):
                R = Rotation.random(2, random_state=rng).as_matrix()
                p = np.array([np.zeros(3), rng.uniform(-0.6, 0.6, 3)])
                cf, ci, contacts = geoms.new_workspace()
                n = collide_kernel(geoms.gf, geoms.gi, cf, ci, R, p, 0.0)
                depth = max((c["depth"] for c in contacts_list(geoms, contacts, n)), default=-1.0)
                allowed = _may_overlap(geoms, R, p, np.array([0, 1]), min_depth)
                if depth > min_depth:
                    deep += 1
                    assert allowed, (shapes[a].kind, shapes[b].kind, R, p, depth)
                elif n == 0:
                    apart += 1
                    turned_away += not allowed
    assert deep > 300 and apart > 300
    assert turned_away > 0.5 * apart, (turned_away, apart)
