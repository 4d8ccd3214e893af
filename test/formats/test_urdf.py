"""URDF -> Model: the shared real-world files against Pinocchio's own URDF parser and against
values read off the files, and our own small URDFs element by element."""
import os
import shutil
import warnings

import numpy as np
import pytest
from conftest import OWN_MODELS, shared_model, shared_models
from scipy.spatial.transform import Rotation

import mbsim_ros as mb
from mbsim_ros.formats.meshes import load_mesh
from mbsim_ros.formats.urdf import load_urdf

pin = pytest.importorskip("pinocchio")

SHARED_URDFS = shared_models("urdf", "*.urdf")
OWN = OWN_MODELS / "urdf"
# Our loader and Pinocchio read the same decimal text and compose at most a few rotations,
# so they agree to a few ulps; 1e-12 absolute (inertias are O(1e-6..1)) would catch any
# wrong axis, frame or sign while allowing the rounding of a different operation order.
TOL = 1e-12


def load_quietly(path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_urdf(path, **kw)


def pin_model(path, floating):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if floating:
            return pin.buildModelFromUrdf(str(path), pin.JointModelFreeFlyer())
        return pin.buildModelFromUrdf(str(path))


def merged_inertias(model):
    """Pinocchio's view of a Model: each moving joint's child link with its fixed-joint
    descendants welded on, as (mass, com, inertia about com) in that link's frame; the links
    welded to the world are merged under 'universe'."""
    pose = {}          # link -> (owner joint name, 4x4 pose in the owner's frame)
    out = {}
    for j in model.joints:   # depth-first: a parent is placed before its children
        if j.type == "fixed":
            if j.parent is None:
                owner, T = "universe", j.origin
            else:
                owner, T_parent = pose[j.parent]
                T = T_parent @ j.origin
        else:
            owner, T = j.name, np.eye(4)
        pose[j.child] = (owner, T)
        link = model.link(j.child)
        R, p = T[:3, :3], T[:3, 3]
        m0, c0, I0 = out.get(owner, (0.0, np.zeros(3), np.zeros((3, 3))))
        m1, c1, I1 = link.mass, R @ link.com + p, R @ link.inertia @ R.T
        m = m0 + m1
        c = (m0 * c0 + m1 * c1) / m if m > 0 else np.zeros(3)

        def shift(mass, com):   # parallel axis theorem: inertia of a point mass about c
            d = com - c
            return mass * (d @ d * np.eye(3) - np.outer(d, d))

        out[owner] = (m, c, I0 + shift(m0, c0) + I1 + shift(m1, c1))
    return out


@pytest.fixture(params=[False, True], ids=["fixed", "floating"])
def floating(request):
    return request.param


@pytest.mark.parametrize("path", SHARED_URDFS, ids=lambda p: p.name)
def test_shared_urdf_names_and_counts_match_pinocchio(path, floating):
    model = load_quietly(path, floating_base=floating)
    pm = pin_model(path, floating)
    body_frames = {f.name for f in pm.frames if f.type == pin.FrameType.BODY}
    fixed_joints = {f.name for f in pm.frames if f.type == pin.FrameType.FIXED_JOINT} - {"universe"}
    moving = set(list(pm.names)[1:])
    assert {l.name for l in model.links} == body_frames
    names = {j.name for j in model.joints}
    assert names == moving | fixed_joints | {"root_joint"}
    assert model.joint("root_joint").type == ("free" if floating else "fixed")
    assert model.joint("root_joint").parent is None
    assert model.nv == pm.nv
    # Pinocchio uses (cos, sin) for continuous joints: one extra q each
    continuous = sum(1 for j in pm.joints[1:] if j.nq == 2 and j.nv == 1)
    assert model.nq == pm.nq - continuous


@pytest.mark.parametrize("path", SHARED_URDFS, ids=lambda p: p.name)
def test_shared_urdf_masses_and_inertias_match_pinocchio(path, floating):
    model = load_quietly(path, floating_base=floating)
    pm = pin_model(path, floating)
    assert model.total_mass == pytest.approx(sum(pm.inertias[i].mass for i in range(pm.njoints)), abs=TOL)
    ours = merged_inertias(model)
    for i, name in enumerate(pm.names):
        Y = pm.inertias[i]
        mass, com, inertia = ours.get(name, (0.0, np.zeros(3), np.zeros((3, 3))))
        assert mass == pytest.approx(Y.mass, abs=TOL), name
        if Y.mass > 0:
            np.testing.assert_allclose(com, Y.lever, atol=TOL, err_msg=name)
        np.testing.assert_allclose(inertia, Y.inertia, atol=TOL, err_msg=name)


@pytest.mark.parametrize("path", SHARED_URDFS, ids=lambda p: p.name)
def test_shared_urdf_joint_frames_axes_and_limits_match_pinocchio(path):
    model = load_quietly(path, floating_base=False)      # Pinocchio's buildModel welds the root
    pm = pin_model(path, False)
    data = pm.createData()
    pin.forwardKinematics(pm, data, pin.neutral(pm))
    pin.updateFramePlacements(pm, data)
    world = {}
    for j in model.joints:     # our forward kinematics at q = 0
        world[j.child] = (world[j.parent] if j.parent else np.eye(4)) @ j.origin
    for link, T in world.items():
        oMf = data.oMf[pm.getFrameId(link, pin.FrameType.BODY)]
        np.testing.assert_allclose(T, oMf.homogeneous, atol=TOL, err_msg=link)
    for i, name in enumerate(list(pm.names)[1:], start=1):
        j = model.joint(name)
        assert j.nv == 1
        if pm.upperPositionLimit[pm.idx_qs[i]] > pm.lowerPositionLimit[pm.idx_qs[i]] and pm.joints[i].nq == 1:
            assert j.lower[0] == pm.lowerPositionLimit[pm.idx_qs[i]]
            assert j.upper[0] == pm.upperPositionLimit[pm.idx_qs[i]]
        assert j.damping[0] == pm.damping[pm.idx_vs[i]]
        assert j.friction[0] == pm.friction[pm.idx_vs[i]]
        if pm.effortLimit[pm.idx_vs[i]] > 0:
            assert j.effort_limit[0] == pm.effortLimit[pm.idx_vs[i]]


def test_r2d2_values_read_off_the_file():
    model = load_quietly(shared_model("urdf", "r2d2.urdf"))
    assert model.name == "physics"
    # continuous joints: revolute without position limits; lines 101..
    wheel = model.joint("right_front_wheel_joint")
    assert wheel.type == "revolute" and wheel.lower[0] == -np.inf and wheel.upper[0] == np.inf
    grip = model.joint("gripper_extension")   # <limit effort="1000.0" lower="-0.38" upper="0" velocity="0.5"/>
    assert grip.type == "prismatic"
    np.testing.assert_array_equal([grip.lower[0], grip.upper[0], grip.effort_limit[0], grip.velocity_limit[0]],
                                  [-0.38, 0.0, 1000.0, 0.5])
    np.testing.assert_array_equal(grip.axis, [1, 0, 0])        # no <axis>: URDF default
    right = model.joint("right_gripper_joint")                  # axis xyz="0 0 -1"
    np.testing.assert_array_equal(right.axis, [0, 0, -1])
    base = model.link("base_link")
    assert base.visuals[0].kind == "cylinder"
    assert (base.visuals[0].radius, base.visuals[0].length) == (0.2, 0.6)
    np.testing.assert_array_equal(base.visuals[0].color, [0, 0, 0.8, 1])    # material "blue"
    leg = model.link("right_leg").visuals[0]                    # box, origin rpy="0 1.57075 0" xyz="0 0 -0.3"
    np.testing.assert_array_equal(leg.size, [0.6, 0.1, 0.2])
    np.testing.assert_allclose(leg.pose[:3, :3], Rotation.from_euler("y", 1.57075).as_matrix(), atol=1e-15)
    np.testing.assert_array_equal(leg.pose[:3, 3], [0, 0, -0.3])
    np.testing.assert_array_equal(model.link("head").visuals[0].color, [1, 1, 1, 1])   # "white"
    assert model.link("head").visuals[0].radius == 0.2
    assert model.warnings == []


def test_r2d2_relative_dae_meshes_are_loaded():
    path = shared_model("urdf", "r2d2.urdf")
    model = load_quietly(path)
    finger = os.path.join(os.path.dirname(path), "meshes", "l_finger.dae")
    v, f = load_mesh(finger)
    for link in ("left_gripper", "right_gripper"):
        for shape in model.link(link).visuals + model.link(link).collisions:
            assert shape.kind == "mesh" and shape.mesh_path == finger
            np.testing.assert_array_equal(shape.vertices, v)
            np.testing.assert_array_equal(shape.faces, f)
    tip = model.link("right_tip").visuals[0]
    assert tip.mesh_path.endswith("l_finger_tip.dae") and tip.faces.shape == (1000, 3)


def read_obj_vertices(path):
    return np.array([l.split()[1:4] for l in open(path) if l.startswith("v ")], dtype=float)


def test_quadruped_package_meshes_found_beside_the_urdf_with_their_scale():
    path = shared_model("urdf", "quadruped.urdf")
    model = load_quietly(path)
    folder = os.path.dirname(path)
    base = model.link("base_link").visuals[0]     # cube.obj, scale="0.2 0.4 0.05"
    assert base.mesh_path == os.path.join(folder, "cube.obj")
    np.testing.assert_array_equal(base.scale, [0.2, 0.4, 0.05])
    np.testing.assert_array_equal(base.vertices, read_obj_vertices(base.mesh_path) * [0.2, 0.4, 0.05])
    np.testing.assert_allclose(base.vertices.max(axis=0), [0.1, 0.2, 0.025], atol=1e-15)
    leg = model.link("FL_upperleg").visuals[0]    # cylinder.obj, scale="0.025 0.025 0.16"
    np.testing.assert_array_equal(leg.vertices, read_obj_vertices(leg.mesh_path) * [0.025, 0.025, 0.16])
    np.testing.assert_array_equal(leg.pose[:3, 3], [0, 0, -0.08])
    np.testing.assert_array_equal(leg.color, [0.4, 0.4, 0.4, 0.1])
    assert not [w for w in model.warnings if "mesh" in w]


def test_ur5_missing_meshes_are_warnings_and_the_model_still_loads():
    path = shared_model("urdf", "ur5_robot.urdf")
    with pytest.warns(UserWarning, match="not found") as record:
        model = load_urdf(path)
    mesh_warnings = [w for w in model.warnings if "mesh" in w]
    assert len(mesh_warnings) == 14            # 7 links x (visual .dae + collision .stl)
    assert len([r for r in record if "not found" in str(r.message)]) == 14
    assert all("ur5_robot.urdf, line " in w and "package://example-robot-data" in w for w in mesh_warnings)
    shoulder = model.link("shoulder_link")
    assert shoulder.visuals[0].vertices is None
    assert shoulder.visuals[0].mesh_path == "package://example-robot-data/robots/ur_description/meshes/ur5/visual/shoulder.dae"
    assert model.total_mass == pytest.approx(20.9939, abs=1e-12)   # sum of the file's <mass>
    assert [j.name for j in model.joints if j.type == "revolute"] == [
        "shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint", "wrist_3_joint"]


def test_double_pendulum_placeholder_limits_mean_unlimited_with_warnings():
    model = load_quietly(shared_model("urdf", "double_pendulum_simple.urdf"))
    j = model.joint("joint1")    # <limit lower="0" upper="0" effort="0" velocity="0"/>, damping 0.05
    assert (j.lower[0], j.upper[0], j.effort_limit[0], j.velocity_limit[0]) == (-np.inf, np.inf, np.inf, np.inf)
    assert j.damping[0] == 0.05
    assert sum("equal lower and upper" in w for w in model.warnings) == 2
    assert model.link("link3").mass == 0.0 and model.joint("joint3").type == "fixed"


def test_sr1_floating_root_and_zero_velocity_warning():
    model = load_quietly(shared_model("urdf", "SR1.urdf"), floating_base=True)
    assert model.joints[0].name == "root_joint" and model.joints[0].child == "WAIST"
    assert model.nq == 7 + 29 and model.nv == 6 + 29
    assert model.warnings == ["{}, line 370, <limit>: velocity limit 0: treated as no limit".format(
        shared_model("urdf", "SR1.urdf"))]
    # WAIST's second visual names the material defined inline in the first one
    np.testing.assert_array_equal(model.link("WAIST").visuals[1].color, [0.8, 0.8, 0.8, 1.0])


# -- our own small models -----------------------------------------------------------------
def test_elements_joints():
    model = load_quietly(OWN / "elements.urdf", floating_base=False)
    assert model.name == "elements"
    types = {j.name: j.type for j in model.joints}
    assert types == {"root_joint": "fixed", "j_rev": "revolute", "j_cont": "revolute", "j_pris": "prismatic",
                     "j_fixed": "fixed", "j_float": "free", "j_planar": "planar", "j_planar_x": "planar",
                     "j_mimic": "revolute"}
    rev = model.joint("j_rev")
    assert (rev.parent, rev.child) == ("base", "arm")
    np.testing.assert_array_equal(rev.axis, [0, 0, 1])          # "0 0 2" normalized
    np.testing.assert_allclose(rev.origin[:3, :3], Rotation.from_euler("y", 0.5).as_matrix(), atol=1e-15)
    np.testing.assert_array_equal(rev.origin[:3, 3], [0, 0, 0.1])
    assert (rev.lower[0], rev.upper[0], rev.effort_limit[0], rev.velocity_limit[0]) == (-1, 2, 10, 3)
    assert (rev.damping[0], rev.friction[0]) == (0.5, 0.1)
    cont = model.joint("j_cont")
    assert (cont.lower[0], cont.upper[0], cont.effort_limit[0]) == (-np.inf, np.inf, np.inf)
    np.testing.assert_array_equal(cont.axis, [0, 1, 0])
    pris = model.joint("j_pris")
    np.testing.assert_array_equal(pris.axis, [1, 0, 0])         # no <axis>: default 1 0 0
    assert (pris.lower[0], pris.upper[0], pris.effort_limit[0], pris.velocity_limit[0]) == (-0.1, 0.2, 100, 1)
    fixed = model.joint("j_fixed")                              # a zero axis on a fixed joint is ignored
    np.testing.assert_allclose(fixed.origin[:3, :3], Rotation.from_euler("x", np.pi / 2).as_matrix(), atol=1e-15)
    assert model.joint("j_float").nq == 7
    planar = model.joint("j_planar")                            # normal z: plane axes x, y
    np.testing.assert_array_equal(planar.axis, [0, 0, 1])
    np.testing.assert_array_equal(planar.plane_axes(), [[1, 0, 0], [0, 1, 0]])
    planar_x = model.joint("j_planar_x")                        # normal x: plane axes y, z
    np.testing.assert_array_equal(planar_x.axis, [1, 0, 0])
    np.testing.assert_array_equal(planar_x.plane_axes(), [[0, 1, 0], [0, 0, 1]])
    (mimic,) = model.couplers                                    # line 178: q = 2 q_j_rev + 0.1
    assert (mimic.dependent, mimic.independent) == ("j_mimic", "j_rev")
    np.testing.assert_array_equal(mimic.function.coefs, [[0.1, 2.0]])


def test_elements_inertial_rpy_rotates_the_inertia_into_the_link_frame():
    model = load_quietly(OWN / "elements.urdf")
    base = model.link("base")
    I = np.array([[0.5, 0.01, -0.02], [0.01, 0.6, 0.03], [-0.02, 0.03, 0.7]])
    R = Rotation.from_euler("xyz", [0.3, -0.4, 1.2]).as_matrix()   # extrinsic x, y, z = Rz Ry Rx
    assert base.mass == 2.0
    np.testing.assert_array_equal(base.com, [0.1, 0.2, 0.3])
    np.testing.assert_allclose(base.inertia, R @ I @ R.T, atol=1e-15)
    assert model.link("tip").mass == 0.0 and not np.any(model.link("tip").inertia)


def test_elements_inertias_match_pinocchio():
    path = OWN / "elements.urdf"
    model = load_quietly(path, floating_base=False)      # as Pinocchio builds it
    pm = pin_model(path, False)
    ours = merged_inertias(model)
    for i, name in enumerate(pm.names):
        mass, com, inertia = ours[name]
        assert mass == pytest.approx(pm.inertias[i].mass, abs=TOL)
        np.testing.assert_allclose(inertia, pm.inertias[i].inertia, atol=TOL, err_msg=name)


def test_elements_shapes_and_materials():
    model = load_quietly(OWN / "elements.urdf")
    box, sphere, cylinder, mesh = model.link("base").visuals
    assert box.kind == "box" and box.name == "base_box"
    np.testing.assert_array_equal(box.size, [0.4, 0.3, 0.1])
    np.testing.assert_allclose(box.pose[:3, :3], Rotation.from_euler("xyz", [0.1, 0.2, 0.3]).as_matrix(), atol=1e-15)
    np.testing.assert_array_equal(box.pose[:3, 3], [0, 0, 0.05])
    np.testing.assert_array_equal(box.color, [1, 0, 0, 1])               # top-level "red"
    assert sphere.kind == "sphere" and sphere.radius == 0.05
    np.testing.assert_array_equal(sphere.color, [0, 1, 0, 0.5])          # inline color
    assert cylinder.kind == "cylinder" and (cylinder.radius, cylinder.length) == (0.02, 0.3)
    np.testing.assert_array_equal(cylinder.color, [0, 1, 0, 0.5])        # refers to the inline one
    assert mesh.kind == "mesh" and mesh.mesh_path == str(OWN / "meshes" / "quad_pyramid.obj")
    np.testing.assert_array_equal(mesh.scale, [1, 2, 3])
    np.testing.assert_array_equal(mesh.vertices.max(axis=0), [1, 2, 3])  # scale applied
    np.testing.assert_array_equal(mesh.color, [0.7, 0.7, 0.7, 1])        # texture only: default color
    (collision,) = model.link("base").collisions
    assert collision.kind == "box"
    wedge = model.link("arm").visuals[0]                                 # package://my_pkg/... found upward
    assert wedge.mesh_path == str(OWN / "my_pkg" / "meshes" / "wedge.obj")
    np.testing.assert_array_equal(wedge.vertices, [[0, 0, 0], [2, 0, 0], [0, 3, 0], [0, 0, 4]])
    stl = model.link("arm").collisions[0]
    assert stl.vertices.shape == (4, 3) and stl.vertices.max() == 0.5   # tetra.stl at scale 0.5
    dae = model.link("drone").visuals[0]
    assert dae.faces.shape == (8, 3)


def test_unresolved_and_missing_meshes_are_warnings():
    with pytest.warns(UserWarning) as record:
        model = load_urdf(OWN / "elements.urdf")
    texts = [str(r.message) for r in record]
    assert any("package://other_pkg/other_wedge.obj" in t and "line 88" in t for t in texts)
    assert any("does_not_exist.stl" in t and "line 106" in t for t in texts)
    missing = model.link("slider").visuals[0]
    assert missing.vertices is None and missing.mesh_path == str(OWN / "meshes" / "does_not_exist.stl")
    assert model.link("wheel").visuals[0].mesh_path == "package://other_pkg/other_wedge.obj"


@pytest.mark.parametrize("package_paths", [{"other_pkg": str(OWN / "extra_dir")}, [str(OWN / "extra_dir")]],
                         ids=["dict", "list"])
def test_package_paths_resolve_package_uris(package_paths):
    model = load_quietly(OWN / "elements.urdf", package_paths=package_paths)
    wheel = model.link("wheel").visuals[0]
    assert wheel.mesh_path == str(OWN / "extra_dir" / "other_wedge.obj")
    assert wheel.vertices.shape == (4, 3)
    assert not any("other_pkg" in w for w in model.warnings)


def test_file_uri_and_unreadable_mesh(tmp_path):
    shutil.copy(OWN / "meshes" / "tetra.stl", tmp_path / "good.stl")
    (tmp_path / "broken.obj").write_text("v 0 0 0\nf 1 2 3\n")
    (tmp_path / "r.urdf").write_text(f"""<robot name="r">
  <link name="a">
    <visual><geometry><mesh filename="file://{tmp_path}/good.stl"/></geometry></visual>
    <visual><geometry><mesh filename="broken.obj"/></geometry></visual>
  </link>
</robot>""")
    with pytest.warns(UserWarning, match="unreadable"):
        model = load_urdf(tmp_path / "r.urdf")
    good, broken = model.link("a").visuals
    assert good.vertices.shape == (4, 3) and good.mesh_path == str(tmp_path / "good.stl")
    assert broken.vertices is None and broken.mesh_path == str(tmp_path / "broken.obj")
    assert any("broken.obj" in w and "line 4" in w for w in model.warnings)


def test_link_named_world_is_an_ordinary_massless_root_link():
    model = load_quietly(shared_model("urdf", "ur5_robot.urdf"))
    assert model.joints[0].name == "root_joint" and model.joints[0].child == "world"
    assert model.joint("world_joint").parent == "world" and model.link("world").mass == 0.0


def test_load_model_dispatches_urdf(tmp_path):
    path = tmp_path / "one.xml"
    path.write_text('<?xml version="1.0"?>\n<robot name="one"><link name="only"/></robot>')
    model = mb.load_model(path, floating_base=True)
    assert [j.name for j in model.joints] == ["root_joint"] and model.nq == 7
    assert model.source == str(path)


def test_package_uri_is_resolved_through_ros_first(tmp_path, monkeypatch):
    """With ROS sourced, ament_index_python's share directory wins over the upward search."""
    import sys
    import types

    share = tmp_path / "share" / "my_pkg"
    (share / "meshes").mkdir(parents=True)
    (share / "meshes" / "wedge.obj").write_text("v 0 0 0\nv 5 0 0\nv 0 5 0\nf 1 2 3\n")

    def get_package_share_directory(name):
        if name != "my_pkg":
            raise LookupError(name)
        return str(share)

    packages = types.ModuleType("ament_index_python.packages")
    packages.get_package_share_directory = get_package_share_directory
    monkeypatch.setitem(sys.modules, "ament_index_python", types.ModuleType("ament_index_python"))
    monkeypatch.setitem(sys.modules, "ament_index_python.packages", packages)
    model = load_quietly(OWN / "elements.urdf")
    wedge = model.link("arm").visuals[0]
    assert wedge.mesh_path == str(share / "meshes" / "wedge.obj")     # not test/models/urdf/my_pkg
    assert wedge.vertices.max() == 5.0


def test_load_model_passes_package_paths(tmp_path):
    model = load_quietly_model(OWN / "elements.urdf", package_paths={"other_pkg": str(OWN / "extra_dir")})
    assert model.link("wheel").visuals[0].vertices is not None


def load_quietly_model(path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return mb.load_model(path, **kw)


@pytest.mark.parametrize("path", SHARED_URDFS, ids=lambda p: p.name)
def test_loaded_model_mass_matrix_equals_pinocchio(path):
    """End to end: the Model we load, run through the project's CRBA, gives Pinocchio's mass
    matrix for the same file (relative 1e-12: the same sums in another order)."""
    try:
        from mbsim_ros import mass_matrix
    except Exception as exc:     # the dynamics layer is built separately
        pytest.skip(f"dynamics layer not importable: {exc}")
    model = load_quietly(path, floating_base=False)     # as Pinocchio's buildModel: the root welded
    pm = pin_model(path, False)
    data = pm.createData()
    order = [model.joint(pm.names[i]).v_index for i in range(1, pm.njoints)]
    rng = np.random.default_rng(5)
    for _ in range(5):
        angles = {name: rng.uniform(-np.pi, np.pi) for name in pm.names}
        q = np.zeros(model.nq)
        for j in model.joints:
            if j.nq == 1:
                q[j.q_index] = angles[j.name]
        q_pin = np.zeros(pm.nq)
        for i in range(1, pm.njoints):
            j = pm.joints[i]
            a = angles[pm.names[i]]
            q_pin[j.idx_q:j.idx_q + j.nq] = (np.cos(a), np.sin(a)) if j.nq == 2 else a
        M_pin = pin.crba(pm, data, q_pin)
        M_pin = np.triu(M_pin) + np.triu(M_pin, 1).T
        M = mass_matrix(model, q)[np.ix_(order, order)]
        assert np.abs(M - M_pin).max() <= 1e-12 * np.abs(M_pin).max()
