"""A world of several models: names scoped per model (model/names.py), OpenHRP's own floor (whose
link is WAIST, as a robot's) beside a robot, and models added and removed between steps with the
others' state kept bit for bit."""
from pathlib import Path

import numpy as np
import pytest

import mbsim_ros as mb
from mbsim_ros.model.transforms import quat_to_matrix

HERE = Path(__file__).resolve().parent
BUNDLED = HERE.parent.parent / "mbsim_ros" / "data" / "models"
OPENHRP = HERE.parent / "models" / "openhrp"
G = 9.80665


def stand(sim, robot, seconds):
    """Hold every joint of the first model at its initial angle by PD torques for `seconds`;
    returns the lowest root height seen and the contact support force along the normals."""
    q_ref = sim.q.copy()
    kp, kd = 2000.0, 20.0
    low = np.inf
    qs, vs = sim.model_slices(sim.model_names[0])
    for _ in range(int(round(seconds / sim.dt))):
        sim.tau[vs.start + 6:vs.stop] = kp * (q_ref[qs.start + 7:qs.stop] - sim.q[qs.start + 7:qs.stop]) \
            - kd * sim.v[vs.start + 6:vs.stop]
        sim.step()
        low = min(low, sim.q[qs.start + 2])
    links = set(sim.compiled.link_names[:len(robot.links)])
    support = sum(c.normal @ c.force if c.link_a in links else -c.normal @ c.force for c in sim.contacts())
    return q_ref[qs.start + 2] - low, support


@pytest.mark.parametrize("robot_file", [BUNDLED / "SR1.wrl", OPENHRP / "sample1.wrl"], ids=["SR1", "sample1"])
def test_a_robot_stands_on_openhrps_own_floor_whose_link_is_also_waist(robot_file):
    """OpenHRP's floor.wrl names its one link WAIST, as the robots do: both load, the floor's
    is "floor/WAIST" (the first model keeps its bare names), and the robot, every joint PD-held
    at its initial angle, stands 2 s: its waist sinks less than 2 cm and the contact normal
    forces carry its weight within 1 % (the LCP's erp and cfm leave less than that)."""
    robot = mb.load_model(robot_file)
    floor = mb.load_model(OPENHRP / "openhrp_floor.wrl")
    sim = mb.Simulation([robot, floor], dt=1e-3)
    assert sim.model_names == [robot.name, "floor"]
    T = sim.link_transforms()
    assert "WAIST" in T and "floor/WAIST" in T
    np.testing.assert_array_equal(sim.link_pose("floor/WAIST"), T["floor/WAIST"])
    np.testing.assert_array_equal(sim.link_pose(f"{robot.name}/WAIST"), T["WAIST"])
    sink, support = stand(sim, robot, 2.0)
    assert sink < 0.02
    assert support == pytest.approx(robot.total_mass * G, rel=0.01)
    touching = {c.link_a for c in sim.contacts()} | {c.link_b for c in sim.contacts()}
    assert "floor/WAIST" in touching and "WAIST" not in touching


def test_a_bare_name_two_models_have_is_refused_listing_both_and_a_unique_one_is_taken():
    robot = mb.load_model(BUNDLED / "SR1.wrl")
    floor = mb.load_model(OPENHRP / "openhrp_floor.wrl")
    sim = mb.Simulation([robot, floor], dt=1e-3)
    with pytest.raises(KeyError, match="'WAIST' is in 2 models; say which: SR1/WAIST, floor/WAIST"):
        sim.link_pose("WAIST")
    assert sim.resolve("link", "RLEG_ANKLE_R") == ("SR1", "RLEG_ANKLE_R")
    assert sim.resolve("joint", "floor/WAIST") == ("floor", "WAIST")
    with pytest.raises(KeyError, match="no link named 'NOSE'"):
        sim.link_pose("NOSE")


def pose_matrix(xyz, quat):
    T = np.eye(4)
    T[:3, :3], T[:3, 3] = quat_to_matrix(quat), xyz
    return T


def test_a_robot_spawned_mid_run_leaves_the_others_state_bit_for_bit_and_delete_restores_the_world():
    """SR1 on the bundled floor for 0.2 s; a second SR1 joins at (2, 1, 0) turned 90 degrees about
    z: the first's q and v are the same bits after as before, the second's waist is at the pose
    applied to its initial waist pose, both gyros read, time goes on; deleting the second gives
    back the first world's sizes, names and the first's state bit for bit."""
    robot = mb.load_model(BUNDLED / "SR1.wrl")
    floor = mb.load_model(BUNDLED / "floor.wrl")
    sim = mb.Simulation([robot, floor], dt=1e-3)
    nq, nv, links = sim.nq, sim.nv, list(sim.link_transforms())
    waist0 = sim.link_pose("WAIST")
    sim.step(200)
    q1, v1, t1 = sim.q.copy(), sim.v.copy(), sim.t
    quat = (0.0, 0.0, np.sin(np.pi / 4), np.cos(np.pi / 4))
    name = sim.add_model(robot, "robot2", pose=((2.0, 1.0, 0.0), quat))
    assert name == "robot2" and sim.model_names == ["SR1", "floor", "robot2"]
    assert sim.t == t1 and sim.nq == nq + robot.nq
    qs, vs = sim.model_slices("SR1")
    assert np.array_equal(sim.q[qs], q1[qs]) and np.array_equal(sim.v[vs], v1[vs])
    np.testing.assert_allclose(sim.link_pose("robot2/WAIST"), pose_matrix((2.0, 1.0, 0.0), quat) @ waist0,
                               atol=1e-12)
    with pytest.raises(ValueError, match="already in the world"):
        sim.add_model(robot, "robot2")
    sim.step(20)
    r = sim.readings()
    assert "WaistGyro" in r and "robot2/WaistGyro" in r
    assert r["robot2/WaistGyro"].stamp >= t1
    q2, v2 = sim.q.copy(), sim.v.copy()
    sim.remove_model("robot2")
    assert sim.model_names == ["SR1", "floor"] and (sim.nq, sim.nv) == (nq, nv)
    assert list(sim.link_transforms()) == links
    assert np.array_equal(sim.q, q2[:nq]) and np.array_equal(sim.v, v2[:nv])
    assert "robot2/WaistGyro" not in sim.readings() and set(sim.devices) == {s.name for s in robot.sensors}
    sim.step(10)


def test_teleport_a_free_root_and_set_joints_by_name():
    robot = mb.load_model(BUNDLED / "SR1.wrl")
    sim = mb.Simulation([robot], dt=1e-3)
    T = pose_matrix((0.3, -0.2, 1.5), (0.0, np.sin(0.2), 0.0, np.cos(0.2)))
    sim.set_root_pose("SR1", T)
    np.testing.assert_allclose(sim.link_pose("WAIST"), T, atol=1e-12)
    twist = np.array([0.1, 0.2, -0.3, 0.5, -0.4, 0.3])
    sim.set_root_twist("SR1", twist)
    np.testing.assert_allclose(sim.link_twist("WAIST"), twist, atol=1e-12)
    sim.set_joint_positions({"SR1/RLEG_KNEE": 0.4, "LLEG_KNEE": 0.3})
    assert sim.q[sim.dof_index("RLEG_KNEE")[0]] == 0.4 and sim.q[sim.dof_index("SR1/LLEG_KNEE")[0]] == 0.3
    with pytest.raises(KeyError, match="no joint named 'KNEE'"):
        sim.set_joint_positions({"KNEE": 1.0})


def test_link_twist_and_acceleration_of_a_falling_body_are_free_fall():
    """A free body in free fall: after 10 steps of semi-implicit Euler its twist is (0, 0, -10 g
    dt, 0, 0, 0) and its acceleration (0, 0, -g, 0, 0, 0), exactly up to rounding (1e-12)."""
    from mbsim_ros.model import Joint, Link, Model
    m = Model("body")
    m.add_link(Link("box", 2.0, [0, 0, 0], np.diag([0.1, 0.2, 0.3])))
    m.add_joint(Joint("free", "free", None, "box"))
    sim = mb.Simulation(m.finalize(), dt=1e-3)
    assert np.array_equal(sim.link_acceleration("box"), np.zeros(6))     # no step yet
    sim.step(10)
    np.testing.assert_allclose(sim.link_twist("box"), [0, 0, -10 * G * 1e-3, 0, 0, 0], atol=1e-12)
    np.testing.assert_allclose(sim.link_acceleration("body/box"), [0, 0, -G, 0, 0, 0], atol=1e-12)


def test_set_model_pose_moves_a_fixed_base_model_rigidly_and_keeps_every_state():
    """The xacro arm (welded to the world) beside a falling body: moving the arm's world frame
    by 1 m along x and 90 degrees about z moves each of its links by exactly that (1e-12) and
    leaves q and v bit for bit."""
    from mbsim_ros.model import Joint, Link, Model
    arm = mb.load_model(HERE.parent / "models" / "urdf" / "arm.urdf.xacro", floating_base=False)
    ball = Model("ball")
    ball.add_link(Link("ball", 1.0, [0, 0, 0], 0.01 * np.eye(3)))
    ball.add_joint(Joint("free", "free", None, "ball"))
    sim = mb.Simulation([arm, ball.finalize()], dt=1e-3)
    sim.set_joint_positions({"shoulder": 0.3})
    sim.step(5)
    before = sim.link_transforms()
    q, v = sim.q.copy(), sim.v.copy()
    T = pose_matrix((1.0, 0.0, 0.0), (0.0, 0.0, np.sin(np.pi / 4), np.cos(np.pi / 4)))
    sim.set_model_pose("arm", T)
    assert np.array_equal(sim.q, q) and np.array_equal(sim.v, v)
    after = sim.link_transforms()
    for name in ("base", "upper", "finger_a"):
        np.testing.assert_allclose(after[name], T @ before[name], atol=1e-12)
    np.testing.assert_array_equal(after["ball"], before["ball"])
    np.testing.assert_array_equal(sim.model_pose("arm"), T)
