"""Model -> URDF: round trips through our loader, the same mass matrix in Pinocchio, joint types
URDF lacks written as chains, shapes URDF lacks, roots and sensor frames."""
import math
import warnings

import numpy as np
import pytest
from conftest import OWN_MODELS, shared_models
from lxml import etree
from scipy.spatial.transform import Rotation

from mbsim_ros import Frame, Joint, Link, Model, Sensor, Shape
from mbsim_ros.formats.meshes import load_mesh
from mbsim_ros.formats.urdf import UNLIMITED, load_urdf, to_urdf
from mbsim_ros.model.transforms import make_transform, rpy_to_matrix

pin = pytest.importorskip("pinocchio")

SHARED_URDFS = shared_models("urdf", "*.urdf")
ELEMENTS = OWN_MODELS / "urdf" / "elements.urdf"
# Numbers are written as repr(float), which reads back bit for bit; only rotations pass through
# matrix -> rpy -> matrix, which costs a few ulps, hence 1e-14 on poses and exact equality elsewhere.
POSE_TOL = 1e-14


def quiet(f, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return f(*args, **kw)


def reload(model, tmp_path, floating=False, **kw):
    path = tmp_path / f"{model.name}_out.urdf"
    path.write_text(to_urdf(model, **kw))
    return quiet(load_urdf, path, floating_base=floating)


def assert_same_shape(a, b, where):
    assert (a.kind, a.name, a.mesh_path) == (b.kind, b.name, b.mesh_path), where
    np.testing.assert_allclose(a.pose, b.pose, atol=POSE_TOL, err_msg=where)
    for field in ("size", "radius", "length", "color", "scale"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=f"{where} {field}")
    if a.vertices is None:
        assert b.vertices is None, where
    else:
        np.testing.assert_array_equal(a.vertices, b.vertices, err_msg=where)


def assert_same_links(m1, m2, names):
    for name in names:
        a, b = m1.link(name), m2.link(name)
        assert a.mass == b.mass and np.array_equal(a.com, b.com) and np.array_equal(a.inertia, b.inertia), name
        assert len(a.visuals) == len(b.visuals) and len(a.collisions) == len(b.collisions), name
        for k, (sa, sb) in enumerate(zip(a.visuals + a.collisions, b.visuals + b.collisions)):
            assert_same_shape(sa, sb, f"{name} shape {k}")


def added_world_weld(m1, m2):
    """The names of what the URDF added to weld m1's fixed root: the massless "world" link and
    the reader's weld of it ([] when m1 had it already or floats)."""
    if "world" in {l.name for l in m1.links} or "world" not in {l.name for l in m2.links}:
        return []
    weld = next(j for j in m2.joints if j.parent is None)
    world = m2.link("world")
    assert weld.type == "fixed" and weld.child == "world" and world.mass == 0
    assert not world.visuals and not world.collisions
    return ["world", weld.name]


def link_names(m1, m2):
    return [l.name for l in m2.links if l.name not in added_world_weld(m1, m2)]


def joint_names(m1, m2):
    return [j.name for j in m2.joints if j.name not in added_world_weld(m1, m2)]


def assert_same_joints(m1, m2, names):
    welded = bool(added_world_weld(m1, m2))
    for name in names:
        a, b = m1.joint(name), m2.joint(name)
        parent = None if welded and b.parent == "world" else b.parent     # the added world link
        assert (a.type, a.parent, a.child, a.q_index, a.v_index) == (b.type, parent, b.child, b.q_index, b.v_index), name
        np.testing.assert_allclose(a.origin, b.origin, atol=POSE_TOL, err_msg=name)
        if a.type in ("revolute", "prismatic", "planar"):
            # a unit axis is written exactly but normalized again on reading: 1 ulp
            np.testing.assert_allclose(a.axis, b.axis, rtol=0, atol=1e-15, err_msg=name)
        for field in ("lower", "upper", "effort_limit", "velocity_limit", "damping", "friction"):
            np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=f"{name} {field}")


@pytest.mark.parametrize("floating", [False, True], ids=["fixed", "floating"])
@pytest.mark.parametrize("path", SHARED_URDFS, ids=lambda p: p.name)
def test_shared_urdf_round_trip_keeps_the_model(path, floating, tmp_path):
    m1 = quiet(load_urdf, path, floating_base=floating)
    m2 = reload(m1, tmp_path, floating)
    assert [j.name for j in m1.joints] == joint_names(m1, m2)
    assert [l.name for l in m1.links] == link_names(m1, m2)
    assert_same_joints(m1, m2, [j.name for j in m1.joints])
    assert_same_links(m1, m2, [l.name for l in m1.links])


def test_own_model_round_trip_every_urdf_joint_type(tmp_path):
    m1 = quiet(load_urdf, ELEMENTS, floating_base=False)
    m2 = reload(m1, tmp_path)
    native = [j.name for j in m1.joints if j.type != "planar"]
    assert_same_joints(m1, m2, native)
    assert_same_links(m1, m2, [l.name for l in m1.links])
    # planar is written as prismatic, prismatic, revolute so robot_state_publisher can move it;
    # the chain has the same coordinates (x, y, theta) and the same plane axes
    chain = [m2.joint(f"j_planar_x_{k}") for k in range(3)]
    assert [j.type for j in chain] == ["prismatic", "prismatic", "revolute"]
    np.testing.assert_array_equal([j.axis for j in chain], [[0, 1, 0], [0, 0, 1], [1, 0, 0]])
    assert chain[0].parent == "base" and chain[2].child == "wall_puck"
    assert m2.link("j_planar_x_link0").mass == 0 and m2.link("j_planar_x_link1").mass == 0
    # written as -UNLIMITED (URDF needs a number), read back as "no limit"
    assert chain[0].lower[0] == -np.inf and chain[2].lower[0] == -np.inf


# -- Pinocchio's mass matrix of the original file and of our URDF ---------------------------
def random_configuration(pm, angles, base_pose):
    """q for a Pinocchio model from one angle per joint name: revolute/prismatic take it as
    is, continuous joints as (cos, sin), the free flyer takes `base_pose`."""
    q = np.zeros(pm.nq)
    for i in range(1, pm.njoints):
        j, name = pm.joints[i], pm.names[i]
        if j.nq == 7:
            q[j.idx_q:j.idx_q + 7] = base_pose
        elif j.nq == 2:
            q[j.idx_q:j.idx_q + 2] = math.cos(angles[name]), math.sin(angles[name])
        else:
            q[j.idx_q] = angles[name]
    return q


def velocity_order(pm):
    """Velocity indices listed in a common order: by joint name, then DOF within the joint."""
    return [pm.joints[i].idx_v + k for i in sorted(range(1, pm.njoints), key=lambda i: pm.names[i])
            for k in range(pm.joints[i].nv)]


@pytest.mark.parametrize("floating", [False, True], ids=["fixed", "floating"])
@pytest.mark.parametrize("path", SHARED_URDFS, ids=lambda p: p.name)
def test_pinocchio_mass_matrix_of_to_urdf_equals_the_original(path, floating):
    root = (pin.JointModelFreeFlyer(),) if floating else ()
    original = quiet(pin.buildModelFromUrdf, str(path), *root)
    text = to_urdf(quiet(load_urdf, path, floating_base=floating))
    ours = quiet(pin.buildModelFromXML, text, *root)
    assert sorted(original.names) == sorted(ours.names)
    da, db = original.createData(), ours.createData()
    ia, ib = velocity_order(original), velocity_order(ours)
    rng = np.random.default_rng(20)
    for _ in range(20):
        angles = {name: rng.uniform(-np.pi, np.pi) for name in original.names}
        base = np.concatenate([rng.normal(size=3), Rotation.random(random_state=rng).as_quat()])
        Ma = pin.crba(original, da, random_configuration(original, angles, base))
        Mb = pin.crba(ours, db, random_configuration(ours, angles, base))
        Ma, Mb = (np.triu(M) + np.triu(M, 1).T for M in (Ma, Mb))   # crba fills the upper triangle
        # both are sums of the same products of the same numbers: relative 1e-12 is rounding only
        assert np.abs(Ma[np.ix_(ia, ia)] - Mb[np.ix_(ib, ib)]).max() <= 1e-12 * np.abs(Ma).max()


# -- joint types URDF lacks ----------------------------------------------------------------
def box_link(name, mass=1.0):
    return Link(name, mass=mass, com=[0.01, 0.02, 0.03],
                inertia=np.diag([0.1, 0.2, 0.3]) * mass, visuals=[Shape("box", size=[0.1, 0.1, 0.1])])


def exotic_model():
    """A revolute root to the world and one joint of each type URDF lacks, plus a sensor and a frame."""
    m = Model("exotic")
    rot = Rotation.from_euler("xyz", [0.1, 0.2, 0.3]).as_matrix()
    origin = np.eye(4)
    origin[:3, :3], origin[:3, 3] = rot, [0.1, 0, 0.2]
    for name in ("base", "u", "e", "p", "t", "b", "s"):
        m.add_link(box_link(name))
    m.add_joint(Joint("hinge", "revolute", None, "base", origin=origin, axis=[0, 1, 1], lower=-1, upper=1,
                      effort_limit=5, velocity_limit=2, damping=0.3))
    m.add_joint(Joint("uni", "universal", "base", "u", origin=origin, axis=[1, 0, 0], axis2=[0, 1, 0]))
    m.add_joint(Joint("eul", "euler", "u", "e", origin=origin, euler_order="zyx", lower=[-1, -2, -3], upper=[1, 2, 3]))
    m.add_joint(Joint("pla", "planar", "base", "p", origin=origin, axis=[1, 2, 3]))
    m.add_joint(Joint("tra", "translational", "base", "t", origin=origin, damping=[0.1, 0.2, 0.3]))
    m.add_joint(Joint("bal", "ball", "base", "b", origin=origin))
    # finite limits: a continuous joint has 2 coordinates in Pinocchio, which cannot mimic it
    m.add_joint(Joint("scr", "screw", "base", "s", origin=origin, axis=[0, 0, 1], pitch=0.05, lower=-10, upper=10))
    m.sensors.append(Sensor("imu", "accelerometer", "e", pose=origin))
    m.frames.append(Frame("tool", "s", pose=origin))
    return m.finalize()


def axis_rotation(axis, angle):
    return Rotation.from_rotvec(np.asarray(axis, dtype=float) / np.linalg.norm(axis) * angle).as_matrix()


def joint_motion(joint, q):
    """J(q) as the Model documents it (model.py JOINT_TYPES), written independently here."""
    T = np.eye(4)
    if joint.type == "revolute":
        T[:3, :3] = axis_rotation(joint.axis, q[0])
    elif joint.type == "universal":
        T[:3, :3] = axis_rotation(joint.axis, q[0]) @ axis_rotation(joint.axis2, q[1])
    elif joint.type == "euler":
        T[:3, :3] = Rotation.from_euler(joint.euler_order.upper(), q).as_matrix()   # intrinsic
    elif joint.type == "planar":
        x_p, y_p = joint.plane_axes()      # the Model's rule for the in-plane axes
        T[:3, 3] = q[0] * x_p + q[1] * y_p
        T[:3, :3] = axis_rotation(joint.axis, q[2])
    elif joint.type == "translational":
        T[:3, 3] = q
    elif joint.type == "ball":
        T[:3, :3] = Rotation.from_quat(q).as_matrix()
    elif joint.type == "screw":
        T[:3, :3] = axis_rotation(joint.axis, q[0])
        T[:3, 3] = joint.axis * q[0] * joint.pitch / (2 * np.pi)
    return T


def test_exotic_joints_parse_in_pinocchio_with_the_expected_joints():
    model = exotic_model()
    pm = pin.buildModelFromXML(to_urdf(model))
    # hinge 1 + universal 2 + euler 3 + planar 3 + translational 3 + ball 3 + screw 2 (mimic off)
    assert pm.njoints - 1 == 17 and pm.nv == 17
    names = set(pm.names)
    assert {"hinge", "scr", "scr_pitch"} <= names
    assert set(model.dof_names) <= names            # /joint_states names are URDF joint names
    with_mimic = pin.buildModelFromXML(to_urdf(model), mimic=True)
    assert with_mimic.nv == 16                      # the screw's translation follows its rotation


def test_exotic_joint_chains_move_the_child_exactly_as_the_model_says():
    model = exotic_model()
    pm = pin.buildModelFromXML(to_urdf(model), mimic=True)
    data = pm.createData()
    rng = np.random.default_rng(7)
    for _ in range(10):
        angles = {name: rng.uniform(-1.5, 1.5) for name in pm.names}
        q_model, world = {}, {}
        for j in model.joints:
            if j.type == "ball":   # URDF coordinates: xyz Euler angles (intrinsic) of the same rotation
                R = Rotation.from_euler("XYZ", [angles[f"{j.name}_{k}"] for k in range(3)])
                q_model[j.name] = R.as_quat()
            elif j.nv == 1:
                q_model[j.name] = [angles[j.name]]
            else:
                q_model[j.name] = [angles[n] for n in model.dof_names if n.startswith(j.name + "_")]
            world[j.child] = (world[j.parent] if j.parent else np.eye(4)) @ j.origin @ joint_motion(j, np.asarray(q_model[j.name]))
        q = np.zeros(pm.nq)
        for i in range(1, pm.njoints):
            if pm.joints[i].nq == 2:
                q[pm.joints[i].idx_q:pm.joints[i].idx_q + 2] = math.cos(angles[pm.names[i]]), math.sin(angles[pm.names[i]])
            elif pm.joints[i].nq == 1:
                q[pm.joints[i].idx_q] = angles[pm.names[i]]
        pin.framesForwardKinematics(pm, data, q)
        for link, T in world.items():
            # 1e-12: a chain of at most 5 rotations composed in another order
            np.testing.assert_allclose(data.oMf[pm.getFrameId(link)].homogeneous, T, atol=1e-12, err_msg=link)
        for name, link, pose in (("imu", "e", model.sensors[0].pose), ("tool", "s", model.frames[0].pose)):
            np.testing.assert_allclose(data.oMf[pm.getFrameId(name)].homogeneous, world[link] @ pose, atol=1e-12)


def urdf_tree(text):
    return etree.fromstring(text.encode())


def test_exotic_urdf_structure():
    model = exotic_model()
    robot = urdf_tree(to_urdf(model))
    joints = {j.get("name"): j for j in robot.iter("joint")}
    assert joints["hinge"].find("parent").get("link") == "world"        # a revolute root hangs from "world"
    assert robot.find("link").get("name") == "world"
    assert [joints[f"uni_{k}"].get("type") for k in range(2)] == ["continuous"] * 2   # no limits
    assert joints["uni_0"].find("child").get("link") == "uni_link0" and joints["uni_1"].find("child").get("link") == "u"
    assert [joints[f"pla_{k}"].get("type") for k in range(3)] == ["prismatic", "prismatic", "continuous"]
    assert [joints[f"tra_{k}"].find("dynamics").get("damping") for k in range(3)] == ["0.1", "0.2", "0.3"]
    assert joints["eul_0"].find("limit").get("lower") == "-1.0" and joints["eul_2"].find("limit").get("upper") == "3.0"
    assert [joints[f"eul_{k}"].find("axis").get("xyz") for k in range(3)] == ["0 0 1.0", "0 1.0 0", "1.0 0 0"]
    hinge_limit = joints["hinge"].find("limit")
    assert (hinge_limit.get("effort"), hinge_limit.get("velocity")) == ("5.0", "2.0")
    mimic = joints["scr_pitch"].find("mimic")
    assert mimic.get("joint") == "scr" and float(mimic.get("multiplier")) == 0.05 / (2 * math.pi)
    assert joints["imu_joint"].get("type") == "fixed" and joints["tool_joint"].find("parent").get("link") == "s"
    no_frames = urdf_tree(to_urdf(model, sensor_frames=False))
    assert "imu_joint" not in {j.get("name") for j in no_frames.iter("joint")}


def test_limits_urdf_requires_get_a_large_finite_default():
    m = Model("lim")
    m.add_link(box_link("a"))
    m.add_link(box_link("b"))
    m.add_joint(Joint("root", "fixed", None, "a"))
    m.add_joint(Joint("slide", "prismatic", "a", "b", axis=[0, 0, 1]))
    limit = urdf_tree(to_urdf(m)).find("joint/limit")
    assert [float(limit.get(k)) for k in ("lower", "upper", "effort", "velocity")] == [-UNLIMITED, UNLIMITED, UNLIMITED, UNLIMITED]


# -- roots -----------------------------------------------------------------------------------
def chain_model(root_type):
    m = Model("chain")
    m.add_link(box_link("a"))
    m.add_link(box_link("b"))
    m.add_joint(Joint("base_joint", root_type, None, "a"))
    m.add_joint(Joint("j", "revolute", "a", "b"))
    return m


def test_free_root_joint_is_not_written():
    text = to_urdf(chain_model("free"))
    robot = urdf_tree(text)
    assert [l.get("name") for l in robot.iter("link")] == ["a", "b"]
    assert [j.get("name") for j in robot.iter("joint")] == ["j"]
    assert "odom -&gt; a" in text or "odom -> a" in text


def test_fixed_root_is_welded_to_a_world_link_as_gazebo_reads_it():
    m = chain_model("fixed")
    m.joint("base_joint").origin = make_transform(p=[0.1, 0.2, 0.7])
    robot = urdf_tree(to_urdf(m))
    assert [l.get("name") for l in robot.iter("link")] == ["world", "a", "b"]
    weld = robot.find("joint[@name='base_joint']")
    assert weld.get("type") == "fixed" and weld.find("parent").get("link") == "world"
    assert weld.find("child").get("link") == "a" and weld.find("origin").get("xyz") == "0.1 0.2 0.7"


@pytest.mark.parametrize("root_type", ["fixed", "free"])
def test_root_round_trip_fixed_stays_fixed_and_floating_floats(root_type, tmp_path):
    """Read back with the URDF convention (no floating_base given): the DOFs stay those of the
    Model, in our reader and in Pinocchio (which adds a free flyer only when asked), and a
    welded base keeps where it was welded."""
    m1 = chain_model(root_type)
    m1.joint("base_joint").origin = make_transform(rpy_to_matrix([0.3, 0, 0]), [0.1, 0.2, 0.7])
    m1.finalize()
    text = to_urdf(m1)
    path = tmp_path / "chain.urdf"
    path.write_text(text)
    m2 = load_urdf(path)
    root = next(j for j in m2.joints if j.parent is None)
    assert root.type == root_type
    assert (m2.nq, m2.nv) == (m1.nq, m1.nv) == ((1, 1) if root_type == "fixed" else (8, 7))
    pm = pin.buildModelFromXML(text, *((pin.JointModelFreeFlyer(),) if root_type == "free" else ()))
    assert pm.nv == m1.nv             # (Pinocchio's continuous joint has nq 2: (cos, sin))
    if root_type == "fixed":
        data = pm.createData()
        pin.framesForwardKinematics(pm, data, np.zeros(pm.nq))
        # origin -> xyz rpy text -> matrix: a few ulps
        np.testing.assert_allclose(data.oMf[pm.getFrameId("a")].homogeneous, m1.joint("base_joint").origin,
                                   atol=POSE_TOL)


def test_several_roots_hang_from_a_world_link(tmp_path):
    m = chain_model("free")
    m.add_link(box_link("c"))
    m.add_joint(Joint("c_joint", "fixed", None, "c"))
    robot = urdf_tree(to_urdf(m))
    joints = {j.get("name"): (j.get("type"), j.find("parent").get("link")) for j in robot.iter("joint")}
    assert joints["base_joint"] == ("floating", "world") and joints["c_joint"] == ("fixed", "world")


def test_revolute_root_round_trip_keeps_the_dynamics(tmp_path):
    m1 = exotic_model()
    m2 = reload(m1, tmp_path)
    assert m2.joint("root_joint").child == "world" and m2.link("world").mass == 0
    assert m2.joint("hinge").parent == "world"
    m2.joint("hinge").parent = None     # the only difference: the massless "world" link above it
    assert_same_joints(m1, m2, ["hinge"])
    assert_same_links(m1, m2, ["base", "u", "e", "p", "t", "b", "s"])


# -- shapes URDF lacks -------------------------------------------------------------------------
def shapes_model():
    m = Model("shapes")
    tri = (np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0]], float), np.array([[0, 1, 2]]))
    m.add_link(Link("a", visuals=[Shape("capsule", radius=0.1, length=0.4), Shape("cone", radius=0.2, length=0.6),
                                  Shape("plane"), Shape("mesh", vertices=tri[0], faces=tri[1])],
                    collisions=[Shape("mesh", mesh_path="package://p/m.stl", scale=[2, 2, 2])]))
    m.add_joint(Joint("root", "fixed", None, "a"))
    return m


def test_capsule_and_cone_become_bounding_cylinders_without_mesh_dir():
    robot = urdf_tree(to_urdf(shapes_model()))
    visuals = robot.findall("link/visual")
    assert len(visuals) == 3          # the vertex-only mesh is skipped with a comment
    capsule, cone, plane = (v.find("geometry")[-1] for v in visuals)
    assert capsule.tag == "cylinder" and float(capsule.get("radius")) == 0.1
    assert float(capsule.get("length")) == pytest.approx(0.4 + 2 * 0.1, abs=1e-15)
    assert (cone.tag, float(cone.get("length")), float(cone.get("radius"))) == ("cylinder", 0.6, 0.2)
    assert plane.tag == "box"
    assert "skipped" in to_urdf(shapes_model())
    mesh = robot.find("link/collision/geometry/mesh")
    assert mesh.get("filename") == "package://p/m.stl" and mesh.get("scale") == "2.0 2.0 2.0"


def test_mesh_dir_gets_generated_meshes(tmp_path):
    robot = urdf_tree(to_urdf(shapes_model(), mesh_dir=tmp_path))
    files = [m.get("filename") for m in robot.iter("mesh")]
    capsule, cone, tri = (load_mesh(f[len("file://"):]) for f in files[:3])
    # generated surfaces reach exactly to the shape's extent along z and its radius in xy
    assert capsule[0][:, 2].max() == pytest.approx(0.3, abs=1e-15) and capsule[0][:, 0].max() == pytest.approx(0.1, abs=1e-15)
    assert cone[0][:, 2].max() == pytest.approx(0.3, abs=1e-15) and cone[0][:, 2].min() == pytest.approx(-0.3, abs=1e-15)
    np.testing.assert_array_equal(tri[0], [[0, 0, 0], [1, 0, 0], [0, 1, 0]])
    np.testing.assert_array_equal(tri[1], [[0, 1, 2]])
