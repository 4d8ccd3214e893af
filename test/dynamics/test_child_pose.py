"""Joint.child_pose (the joint's child-side frame in the child link's frame, OpenSim's child
offset frame): T_child = T_parent @ origin @ J(q) @ inv(child_pose) for every joint type, and
every consumer of link poses (dynamics, Jacobians, velocities, accelerations, center of mass,
sensors, render scene, contact, loop closures) sees the link where that formula puts it.

Two references: Pinocchio with the link frame placed at inv(child_pose) in its joint frame
(pin_reference.to_pinocchio), and the same system re-expressed with each link's frame at its
joint's child-side frame (child_pose identity; inertia, shapes, frames, sensors and the child
joints' origins transformed), which must give the same q-space dynamics and the same world
geometry."""
import copy

import numpy as np
import pinocchio as pin
import pytest

import mbsim_ros as mb
from mbsim_ros.model import Joint, Link, LoopConstraint, Model, Sensor, Shape
from mbsim_ros.model.transforms import axis_angle_to_matrix, inverse_transform, quat_to_matrix
from mbsim_ros.render.scene import world_scene
from pin_reference import SHARED_TYPES, random_state, random_transform, random_tree, to_pinocchio

# Both sides are double-precision O(n) recursions over the same geometry: differences are
# rounding (~1e-14 relative); 1e-9 relative catches any real error, as test_vs_pinocchio.
REL = 1e-9


def close(a, b, rel=REL):
    a, b = np.asarray(a, float), np.asarray(b, float)
    return np.abs(a - b).max() <= rel * max(1.0, np.abs(b).max())


def with_child_poses(model, rng):
    """The model with a random child_pose on every joint (a new Model; the original is kept)."""
    m = copy.deepcopy(model)
    for j in m.joints:
        j.child_pose = random_transform(rng)
    return m.finalize()


def at_joint_frames(model):
    """The same system with each link's frame moved to its joint's child-side frame (F = L C):
    child_pose identity and everything given in a link's frame re-expressed in F."""
    m = copy.deepcopy(model)
    C = {j.child: j.child_pose.copy() for j in m.joints}
    Ci = {name: inverse_transform(T) for name, T in C.items()}
    for link in m.links:
        T = Ci[link.name]
        link.com = T[:3, :3] @ link.com + T[:3, 3]
        link.inertia = T[:3, :3] @ link.inertia @ T[:3, :3].T
        for shape in link.visuals + link.collisions:
            shape.pose = T @ shape.pose
    for j in m.joints:
        if j.parent is not None:
            j.origin = Ci[j.parent] @ j.origin
        j.child_pose = np.eye(4)
    for item in m.frames + m.sensors:
        item.pose = Ci[item.link] @ item.pose
    for lc in m.constraints:
        T1, T2 = Ci[lc.link1], Ci[lc.link2]
        lc.pos1 = T1[:3, :3] @ lc.pos1 + T1[:3, 3]
        lc.pos2 = T2[:3, :3] @ lc.pos2 + T2[:3, 3]
        lc.axis = T1[:3, :3] @ lc.axis
    return m.finalize()


@pytest.mark.parametrize("seed", range(3))
def test_dynamics_and_link_kinematics_match_pinocchio_with_child_poses(seed):
    rng = np.random.default_rng(100 + seed)
    model = with_child_poses(random_tree(rng, n_links=12, floating=seed != 1), rng)
    pm = to_pinocchio(model)
    pd = pm.createData()
    for _ in range(10):
        q, v, tau = random_state(rng, model)
        qdd = mb.forward_dynamics(model, q, v, tau)
        assert close(qdd, pin.aba(pm, pd, q, v, tau, pin.Convention.WORLD))
        assert close(mb.inverse_dynamics(model, q, v, qdd), pin.rnea(pm, pd, q, v, qdd))
        M = pin.crba(pm, pd, q, pin.Convention.WORLD)
        assert close(mb.mass_matrix(model, q), np.triu(M) + np.triu(M, 1).T)
        pin.forwardKinematics(pm, pd, q, v, qdd)
        pin.updateFramePlacements(pm, pd)
        pin.computeJointJacobians(pm, pd, q)
        T = mb.link_transforms(model, q)
        vel = mb.link_velocities(model, q, v)
        acc = mb.link_accelerations(model, q, v, qdd)
        point = rng.normal(size=3) * 0.2
        for link in model.links:
            fid = pm.getFrameId(link.name)
            assert close(T[link.name], pd.oMf[fid].homogeneous)
            Jp = pin.getFrameJacobian(pm, pd, fid, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)
            assert close(mb.frame_jacobian(model, q, link.name), Jp)
            assert close(vel[link.name], Jp @ v)
            a = pin.getFrameClassicalAcceleration(pm, pd, fid, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)
            assert close(acc[link.name], np.concatenate([a.linear, a.angular]))
            # a point off the link origin: its velocity is the link origin's plus w x r
            Jpt = mb.frame_jacobian(model, q, link.name, point)
            r = T[link.name][:3, :3] @ point
            assert close((Jpt @ v)[:3], vel[link.name][:3] + np.cross(vel[link.name][3:], r))


def _joint_motion(joint, qj):
    """J(q) of the simple joint types, written out independently of the kernels."""
    T = np.eye(4)
    if joint.type == "revolute":
        T[:3, :3] = axis_angle_to_matrix(joint.axis, qj[0])
    elif joint.type == "prismatic":
        T[:3, 3] = joint.axis * qj[0]
    elif joint.type == "free":
        T[:3, :3], T[:3, 3] = quat_to_matrix(qj[3:]), qj[:3]
    elif joint.type == "ball":
        T[:3, :3] = quat_to_matrix(qj)
    return T


@pytest.mark.parametrize("joint_type", ["revolute", "prismatic", "free", "ball", "fixed"])
def test_link_pose_is_parent_origin_motion_inverse_child_pose(joint_type):
    rng = np.random.default_rng(5)
    m = Model("chain")
    names = ["a", "b", "c"]
    for k, name in enumerate(names):
        m.add_link(Link(name, 1.0 + k, rng.normal(size=3) * 0.1, np.diag([0.1, 0.2, 0.3])))
        kind = joint_type if k > 0 else "revolute"
        m.add_joint(Joint(f"j{k}", kind, names[k - 1] if k else None, name, axis=rng.normal(size=3),
                          origin=random_transform(rng), child_pose=random_transform(rng)))
    m.finalize()
    q, _, _ = random_state(rng, m)
    T = mb.link_transforms(m, q)
    parent = np.eye(4)
    for j in m.joints:
        qj = q[j.q_index:j.q_index + j.nq]
        expected = parent @ j.origin @ _joint_motion(j, qj) @ inverse_transform(j.child_pose)
        # one product of a few 4x4 matrices either way: rounding only
        np.testing.assert_allclose(T[j.child], expected, atol=1e-13)
        parent = expected


def test_a_child_pose_model_equals_the_model_re_expressed_at_its_joint_frames():
    rng = np.random.default_rng(21)
    model = with_child_poses(random_tree(rng, n_links=10, types=SHARED_TYPES), rng)
    rebased = at_joint_frames(model)
    for _ in range(5):
        q, v, tau = random_state(rng, model)
        assert close(mb.forward_dynamics(model, q, v, tau), mb.forward_dynamics(rebased, q, v, tau))
        assert close(mb.inverse_dynamics(model, q, v, tau), mb.inverse_dynamics(rebased, q, v, tau))
        assert close(mb.mass_matrix(model, q), mb.mass_matrix(rebased, q))
        assert close(mb.center_of_mass(model, q), mb.center_of_mass(rebased, q))
        TA, TB = mb.link_transforms(model, q), mb.link_transforms(rebased, q)
        for j in model.joints:
            assert close(TA[j.child], TB[j.child] @ inverse_transform(j.child_pose))
            point = rng.normal(size=3) * 0.3          # the same material point in both link frames
            pB = inverse_transform(j.child_pose) @ np.r_[point, 1.0]
            assert close(mb.frame_jacobian(model, q, j.child, point), mb.frame_jacobian(rebased, q, j.child, pB[:3]))


def _two_link_arm(child_poses):
    """A free base with an arm on a revolute joint; IMU and force sensor on the arm, a box and a
    sphere to collide with a ground plane, and a loop closure from the arm to the world."""
    C0, C1 = child_poses
    m = Model("arm")
    ground = Model("ground")
    m.add_link(Link("base", 3.0, [0.02, 0.01, -0.03], np.diag([0.05, 0.06, 0.07]),
                    collisions=[Shape("box", pose=np.eye(4), size=np.array([0.3, 0.2, 0.1]))],
                    visuals=[Shape("box", pose=np.eye(4), size=np.array([0.3, 0.2, 0.1]))]))
    m.add_link(Link("arm", 1.0, [0.2, 0.0, 0.0], np.diag([0.002, 0.02, 0.02]),
                    collisions=[Shape("sphere", pose=random_transform(np.random.default_rng(3)), radius=0.05)],
                    visuals=[Shape("sphere", pose=np.eye(4), radius=0.05)]))
    origin = np.eye(4)
    origin[:3, 3] = [0.15, 0.0, 0.05]
    m.add_joint(Joint("root", "free", None, "base", q0=[0, 0, 0.3, 0, 0, 0, 1], child_pose=C0))
    m.add_joint(Joint("elbow", "revolute", "base", "arm", origin=origin, axis=[0, 1, 0], child_pose=C1,
                      q0=[0.4], v0=[1.0]))
    m.sensors += [Sensor("imu_acc", "accelerometer", "arm", random_transform(np.random.default_rng(4))),
                  Sensor("imu_gyro", "gyro", "arm", random_transform(np.random.default_rng(4))),
                  Sensor("elbow_force", "force", "arm", random_transform(np.random.default_rng(6)))]
    ground.add_link(Link("floor", collisions=[Shape("plane")]))
    ground.add_joint(Joint("floor_weld", "fixed", None, "floor"))
    return m.finalize(), ground.finalize()


def test_sensors_scene_and_contact_see_the_links_where_child_pose_puts_them():
    rng = np.random.default_rng(8)
    arm, ground = _two_link_arm([random_transform(rng, 0.1), random_transform(rng, 0.1)])
    rebased = at_joint_frames(arm)
    runs = []
    for m in (arm, rebased):
        sim = mb.Simulation([m, ground], dt=1e-3)
        readings, contacts = [], []
        for _ in range(300):             # falls onto the floor and bounces on its contacts
            sim.step()
            r = sim.readings()
            readings.append(np.concatenate([r[k].values for k in ("imu_acc", "imu_gyro", "elbow_force")]))
            contacts.append(len(sim.contacts()))
        runs.append((sim.q.copy(), np.array(readings), contacts, sim))
    (qa, ra, ca, sa), (qb, rb, cb, sb) = runs
    assert max(ca) > 0, "the arm never touched the floor: the test does not cover contact"
    assert ca == cb
    # the same motion computed through different link frames: rounding grows through ~300
    # contact steps (LCP solves), still far below any modelling difference (mm, degrees)
    np.testing.assert_allclose(qa, qb, atol=1e-8)
    np.testing.assert_allclose(ra, rb, atol=1e-6 * max(1.0, np.abs(rb).max()))
    # the render scene places each shape at its link's pose: same world geometry
    sceneA, sceneB = world_scene([arm, ground], qa), world_scene([rebased, ground], qa)
    for links in (["base"], ["arm"]):
        np.testing.assert_allclose(sceneA.bounds(links), sceneB.bounds(links), atol=1e-12)


def test_loop_closure_on_links_with_child_poses():
    """A four-bar whose coupler link has a child_pose: the loop holds, and the motion equals
    the re-expressed model's."""
    rng = np.random.default_rng(9)
    m = Model("fourbar", gravity=(0, 0, -9.80665))
    L = 0.5
    for name in ("crank", "coupler", "rocker"):
        m.add_link(Link(name, 1.0, [L / 2, 0, 0], np.diag([1e-3, 0.02, 0.02])))
    T = np.eye(4)
    m.add_joint(Joint("j_crank", "revolute", None, "crank", axis=[0, 1, 0], q0=[0.3], child_pose=random_transform(rng, 0.1)))
    T[:3, 3] = [L, 0, 0]
    m.add_joint(Joint("j_coupler", "revolute", "crank", "coupler", origin=inverse_transform(m.joints[0].child_pose) @ T,
                      axis=[0, 1, 0], q0=[-0.3], child_pose=random_transform(rng, 0.1)))
    T2 = np.eye(4)
    T2[:3, 3] = [L, 0, 0]
    m.add_joint(Joint("j_rocker", "revolute", None, "rocker", origin=T2, axis=[0, 1, 0], q0=[0.3]))
    m.finalize()
    # the coupler's far end (L along the coupler's joint frame x) meets the rocker's end
    Cc = m.joint("j_coupler").child_pose
    end = inverse_transform(Cc) @ np.array([L, 0, 0, 1.0])
    Tw = mb.link_transforms(m, m.initial_q())
    rocker_end = inverse_transform(Tw["rocker"]) @ Tw["coupler"] @ end
    m.constraints.append(LoopConstraint("close", "ball", "coupler", "rocker", pos1=end[:3], pos2=rocker_end[:3]))
    m.finalize()
    out = []
    for model in (m, at_joint_frames(m)):
        sim = mb.Simulation(model, dt=1e-3, contact="none")
        sim.step(500)
        T = sim.link_transforms()
        gap = T["coupler"] @ end - T["rocker"] @ np.r_[rocker_end[:3], 1.0] if model is m else None
        out.append((sim.q.copy(), gap))
    # Baumgarte-stabilised closure: the gap stays at the step's O(dt^2) level
    assert np.linalg.norm(out[0][1][:3]) < 1e-4
    np.testing.assert_allclose(out[0][0], out[1][0], atol=1e-9)
