"""to_urdf for joints with a child_pose and for custom joints: Pinocchio, reading our URDF as
robot_state_publisher would (mimic joints followed), puts every link where the Model's
kinematics puts it, T_child = T_parent @ origin @ J(q) @ inv(child_pose)."""
import math

import numpy as np
import pytest
from lxml import etree
from scipy.spatial.transform import Rotation

import mbsim_ros as mb
from mbsim_ros.formats.urdf import joint_frame_links, to_urdf
from mbsim_ros.model import Joint, Link, Model, Shape
from mbsim_ros.model.elements import Function, TransformAxis
from mbsim_ros.model.transforms import inverse_transform

pin = pytest.importorskip("pinocchio")


def pose(rng, scale=0.2):
    T = np.eye(4)
    T[:3, :3] = Rotation.random(random_state=rng).as_matrix()
    T[:3, 3] = rng.uniform(-scale, scale, 3)
    return T


def model_with_child_poses():
    """Every joint type but ball, each with a child_pose, and a custom joint in the middle of the tree."""
    rng = np.random.default_rng(3)
    m = Model("offsets")
    kinds = [("hinge", "revolute", None), ("slide", "prismatic", "hinge"), ("uni", "universal", "hinge"),
             ("eul", "euler", "uni"), ("pla", "planar", "hinge"), ("tra", "translational", "slide"),
             ("scr", "screw", "hinge"), ("weld", "fixed", "eul"), ("knee", "custom", "eul"),
             ("ankle", "revolute", "knee"), ("float", "free", "hinge")]
    angles = np.linspace(-2.0, 0.3, 5)
    knee_axes = [TransformAxis([1, 0, 0]), TransformAxis([0, 1, 0]), TransformAxis([0, 0, 1], 0, Function.linear(1.0)),
                 TransformAxis([1, 0, 0], 0, Function.piecewise_linear(angles, 0.02 * np.sin(angles))),
                 TransformAxis([0, 1, 0], 0, Function.polynomial([-0.4, 0.01, 0.02])), TransformAxis([0, 0, 1])]
    for name, kind, parent in kinds:
        link = f"{name}_body"
        m.add_link(Link(link, 1.0, [0.01, 0.02, 0.03], np.diag([0.1, 0.2, 0.3]),
                        visuals=[Shape("box", size=[0.1, 0.1, 0.1])]))
        extra = dict(axis=rng.normal(size=3), axis2=[0, 1, 0], pitch=0.1)
        if kind == "universal":
            extra["axis"] = [1, 0, 0]
        if kind == "screw":          # finite limits: Pinocchio gives a continuous joint two coordinates
            extra.update(lower=-10, upper=10)
        if kind == "custom":
            extra = dict(dof_names=["knee_angle"], transform_axes=knee_axes)
        m.add_joint(Joint(name, kind, f"{parent}_body" if parent else None, link, origin=pose(rng),
                          child_pose=pose(rng), **extra))
    return m.finalize()


def pinocchio_q(pm, model, q, T):
    """Pinocchio's q for our q: one-DOF URDF joints by name (the Model's DOF names), floating
    joints (free and custom) from the link poses through the written origin @ inv(child_pose)."""
    values = dict(zip(model.dof_names, [None] * model.nv))
    for j in model.joints:
        if j.type not in ("free", "custom"):
            for k, name in enumerate(model.dof_names[j.v_index:j.v_index + j.nv]):
                values[name] = q[j.q_index + k]
    out = pin.neutral(pm)
    for i in range(1, pm.njoints):
        jm, name = pm.joints[i], pm.names[i]
        if jm.nq == 7:
            j = model.joint(name)
            M = inverse_transform(j.origin @ inverse_transform(j.child_pose)) @ inverse_transform(T[j.parent]) @ T[j.child]
            out[jm.idx_q:jm.idx_q + 7] = np.r_[M[:3, 3], Rotation.from_matrix(M[:3, :3]).as_quat()]
        elif jm.nq == 2:
            out[jm.idx_q:jm.idx_q + 2] = math.cos(values[name]), math.sin(values[name])
        elif jm.nq == 1:
            out[jm.idx_q] = values[name]
    return out


def test_every_link_of_the_urdf_is_where_the_model_puts_it():
    model = model_with_child_poses()
    text = to_urdf(model)
    pm = pin.buildModelFromXML(text, mimic=True)
    data = pm.createData()
    frames = joint_frame_links(model)
    # fixed, free and custom joints carry the child_pose in their origin: no frame link
    assert set(frames) == {"hinge", "slide", "uni", "eul", "pla", "tra", "scr", "ankle"}
    rng = np.random.default_rng(4)
    for _ in range(10):
        q = model.neutral_q()
        for j in model.joints:
            if j.type == "free":
                q[j.q_index:j.q_index + 7] = np.r_[rng.normal(size=3), Rotation.random(random_state=rng).as_quat()]
            else:
                q[j.q_index:j.q_index + j.nq] = rng.uniform(-1.5, 0.2, j.nq)
        T = mb.link_transforms(model, q)
        pin.framesForwardKinematics(pm, data, pinocchio_q(pm, model, q, T))
        for link, Tl in T.items():
            # a few rotations through rpy text and back: ~1e-14; 1e-12 as test_urdf_roundtrip
            np.testing.assert_allclose(data.oMf[pm.getFrameId(link)].homogeneous, Tl, atol=1e-12, err_msg=link)
        for jname, frame in frames.items():
            j = model.joint(jname)
            np.testing.assert_allclose(data.oMf[pm.getFrameId(frame)].homogeneous, T[j.child] @ j.child_pose,
                                       atol=1e-12, err_msg=frame)


def test_urdf_structure_of_child_frames_and_custom_joints():
    model = model_with_child_poses()
    robot = etree.fromstring(to_urdf(model).encode())
    joints = {j.get("name"): j for j in robot.iter("joint")}
    links = {l.get("name") for l in robot.iter("link")}
    assert "hinge_child_frame" in links and "uni_child_frame" in links
    assert joints["hinge"].find("child").get("link") == "hinge_child_frame"
    assert joints["uni_1"].find("child").get("link") == "uni_child_frame"
    assert joints["scr_pitch"].find("child").get("link") == "scr_child_frame"
    fixed = joints["hinge_child_pose"]
    assert fixed.get("type") == "fixed"
    assert (fixed.find("parent").get("link"), fixed.find("child").get("link")) == ("hinge_child_frame", "hinge_body")
    assert joints["knee"].get("type") == "floating"
    assert joints["knee"].find("child").get("link") == "knee_body"
    assert any("custom joint knee (coordinates knee_angle)" in c.text for c in robot.iter(etree.Comment))


def test_frame_link_names_avoid_the_models_names():
    m = Model("clash")
    m.add_link(Link("a", 1.0, inertia=np.eye(3) * 0.1))
    m.add_link(Link("j_child_frame", 1.0, inertia=np.eye(3) * 0.1))
    C = np.eye(4)
    C[:3, 3] = [0.1, 0, 0]
    m.add_joint(Joint("j", "revolute", None, "a", child_pose=C))
    m.add_joint(Joint("k", "fixed", "a", "j_child_frame"))
    m.finalize()
    assert joint_frame_links(m) == {"j": "j_child_frame_0"}
    robot = etree.fromstring(to_urdf(m).encode())
    assert {j.find("child").get("link") for j in robot.iter("joint") if j.get("name") == "j"} == {"j_child_frame_0"}
