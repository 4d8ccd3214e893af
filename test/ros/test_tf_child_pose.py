"""TF for joints with a child_pose and for custom joints: what the bridge publishes on /tf and
/tf_static composes to the simulation's link poses, and its tree is the URDF's."""
from collections import defaultdict

import numpy as np
import pytest
from lxml import etree
from scipy.spatial.transform import Rotation

pytest.importorskip("rosbags", reason="the ROS message codec (rosbags) is a runtime dependency of mbsim_ros.ros")

import mbsim_ros as mb  # noqa: E402
from mbsim_ros.model import Joint, Link, Model, Sensor  # noqa: E402
from mbsim_ros.model.elements import Function, TransformAxis  # noqa: E402
from mbsim_ros.ros import messages as msg  # noqa: E402
from mbsim_ros.ros.bridge import Bridge  # noqa: E402
from mbsim_ros.run.config import load_config  # noqa: E402
from mbsim_ros.ros.transport import NullTransport  # noqa: E402


class Capture(NullTransport):
    """Keeps every published message, decoded: {topic: [message]}."""

    def __init__(self):
        super().__init__()
        self.got = defaultdict(list)

    def publish(self, handle, data, stamp_ns=0):
        super().publish(handle, data, stamp_ns)
        self.got[handle.topic].append(msg.decode(data, handle.typename))


def pose(rng, scale=0.2):
    T = np.eye(4)
    T[:3, :3] = Rotation.random(random_state=rng).as_matrix()
    T[:3, 3] = rng.uniform(-scale, scale, 3)
    return T


def leg():
    rng = np.random.default_rng(1)
    m = Model("leg", gravity=(0, -9.80665, 0))
    for name in ("pelvis", "thigh", "shank", "foot", "toe"):
        m.add_link(Link(name, 1.0, [0.02, -0.1, 0.01], np.diag([0.02, 0.01, 0.02])))
    knee = [TransformAxis([1, 0, 0]), TransformAxis([0, 1, 0]), TransformAxis([0, 0, 1], 0, Function.linear(1.0)),
            TransformAxis([1, 0, 0], 0, Function.polynomial([0.0, 0.01, 0.005])),
            TransformAxis([0, 1, 0], 0, Function.polynomial([-0.4, 0.0, 0.01])), TransformAxis([0, 0, 1])]
    m.add_joint(Joint("hip", "revolute", None, "pelvis", origin=pose(rng), child_pose=pose(rng), v0=[1.0]))
    m.add_joint(Joint("thigh_joint", "ball", "pelvis", "thigh", origin=pose(rng), child_pose=pose(rng)))
    m.add_joint(Joint("knee", "custom", "thigh", "shank", origin=pose(rng), child_pose=pose(rng),
                      dof_names=["knee_angle"], transform_axes=knee, q0=[-0.5], v0=[2.0]))
    m.add_joint(Joint("ankle", "fixed", "shank", "foot", origin=pose(rng), child_pose=pose(rng)))
    m.add_joint(Joint("toe_joint", "prismatic", "foot", "toe", origin=pose(rng), child_pose=pose(rng), v0=[0.3]))
    m.sensors.append(Sensor("shank_imu", "accelerometer", "shank", pose(rng)))
    return m.finalize()


def transform(t):
    T = np.eye(4)
    r, p = t.transform.rotation, t.transform.translation
    T[:3, :3] = Rotation.from_quat([r.x, r.y, r.z, r.w]).as_matrix()
    T[:3, 3] = p.x, p.y, p.z
    return T


def test_tf_composes_to_the_link_poses_and_follows_the_urdf_tree():
    model = leg()
    sim = mb.Simulation(model, contact="none")
    cap = Capture()
    bridge = Bridge(sim, cap, load_config(None, {"tf_rate": 1000}))
    bridge.start()
    for _ in range(50):
        sim.step()
        bridge.on_step(sim)
    edges = {}
    for t in cap.got["/tf_static"][0].transforms + cap.got["/tf"][-1].transforms:
        assert t.child_frame_id not in edges, f"{t.child_frame_id} has two parents in TF"
        edges[t.child_frame_id] = (t.header.frame_id, transform(t))

    def world(frame):
        T = np.eye(4)
        while frame != "world":
            parent, Tp = edges[frame]
            T = Tp @ T
            frame = parent
        return T
    T = sim.link_transforms()
    # quaternions on the wire (float64) and a few products: rounding only
    for link, Tl in T.items():
        np.testing.assert_allclose(world(link), Tl, atol=1e-12, err_msg=link)
    np.testing.assert_allclose(world("shank_imu"), T["shank"] @ model.sensors[0].pose, atol=1e-12)
    for name in ("hip", "toe_joint"):          # moving joints with a child_pose: the URDF's frame link
        j = model.joint(name)
        np.testing.assert_allclose(world(f"{name}_child_frame"), T[j.child] @ j.child_pose, atol=1e-12)
    # the TF tree is the URDF's, but for the links inside a joint written as a chain (the
    # ball's three revolutes): TF spans the whole chain in one edge
    robot = etree.fromstring(cap.got["/leg/robot_description"][0].data.encode())
    checked = 0
    for j in robot.iter("joint"):
        parent, child = j.find("parent").get("link"), j.find("child").get("link")
        if child.startswith("thigh_joint_link"):
            continue
        if parent.startswith("thigh_joint_link"):
            parent = "pelvis"
        assert edges[child][0] == parent, child
        checked += 1
    assert checked == 9        # the 5 links, 3 child frames (hip, ball, toe) and the imu
