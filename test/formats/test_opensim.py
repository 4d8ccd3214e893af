"""The .osim loader: what each OpenSim element becomes in the Model, the 3.x and 4.x layouts of
one model giving one Model, the options (visuals, collide, activate_actuators) and the report.
OpenSim's own numbers are checked in test_opensim_truth.py."""
import math
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
from conftest import subprocess_env

from conftest import OWN_MODELS, shared_model
from opensim_reference import link_poses

from mbsim_ros.formats import load_model
from mbsim_ros.formats.meshes import load_mesh
from mbsim_ros.formats.opensim import load_opensim, xyz_rotation

MODELS = OWN_MODELS / "opensim"
FEATURES = MODELS / "features40.osim"
TETRA, _ = load_mesh(MODELS / "Geometry" / "tetra.vtp")


def _load(path, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_opensim(path, **options)


def _report(model, section=None):
    return {name: what for s, name, what in model.report if section is None or s == section}


@pytest.fixture(scope="module")
def features():
    return _load(FEATURES)


# -- one model, two layouts ------------------------------------------------------------------
def _assert_same(a, b, skip_links=(), skip_joints=(), origins=True, kinds=("forces", "actuators", "constraints",
                                                                       "couplers", "frames")):
    """Every link, joint, force, actuator, constraint, coupler and marker of a equals b's."""
    la = {l.name: l for l in a.links if l.name not in skip_links}
    lb = {l.name: l for l in b.links if l.name not in skip_links}
    assert set(la) == set(lb)
    for name, x in la.items():
        y = lb[name]
        assert x.mass == pytest.approx(y.mass, abs=1e-12), name
        np.testing.assert_allclose(x.com, y.com, atol=1e-12, err_msg=name)
        np.testing.assert_allclose(x.inertia, y.inertia, atol=1e-12, err_msg=name)
        assert [s.kind for s in x.collisions] == [s.kind for s in y.collisions], name
    ja = {j.name: j for j in a.joints if j.name not in skip_joints}
    jb = {j.name: j for j in b.joints if j.name not in skip_joints}
    assert set(ja) == set(jb)
    for name, x in ja.items():
        y = jb[name]
        assert (x.type, x.child, x.dof_names) == (y.type, y.child, y.dof_names), name
        np.testing.assert_allclose(x.q0, y.q0, atol=1e-12, err_msg=name)
        np.testing.assert_allclose(x.v0, y.v0, atol=1e-12, err_msg=name)
        np.testing.assert_array_equal(x.locked_dofs, y.locked_dofs, err_msg=name)
        np.testing.assert_allclose(x.child_pose, y.child_pose, atol=1e-12, err_msg=name)
        if origins:
            assert x.parent == y.parent, name
            np.testing.assert_allclose(x.origin, y.origin, atol=1e-12, err_msg=name)
        if x.type == "custom":
            xs = np.linspace(-2.5, 2.5, 21)
            for ta, tb in zip(x.transform_axes, y.transform_axes):
                np.testing.assert_allclose(ta.axis, tb.axis, atol=1e-12)
                assert ta.coordinate == tb.coordinate
                np.testing.assert_allclose(ta.function(xs), tb.function(xs), atol=1e-12)
        np.testing.assert_allclose(x.stiffness, y.stiffness)
        np.testing.assert_allclose(x.damping, y.damping)
        np.testing.assert_allclose(x.rest_position, y.rest_position)
    for kind in kinds:
        xa, xb = getattr(a, kind), getattr(b, kind)
        assert [e.name for e in xa] == [e.name for e in xb], kind
        for ea, eb in zip(xa, xb):
            for field, va in vars(ea).items():
                vb = getattr(eb, field)
                if field == "function":
                    np.testing.assert_allclose(va(np.linspace(-2, 2, 9)), vb(np.linspace(-2, 2, 9)), atol=1e-12)
                elif isinstance(va, (np.ndarray, float)) and not isinstance(va, bool):
                    np.testing.assert_allclose(va, vb, atol=1e-12, err_msg=f"{ea.name}.{field}")
                elif field != "params":
                    assert va == vb, f"{ea.name}.{field}"
    assert a.contact_method == b.contact_method
    np.testing.assert_allclose(a.gravity, b.gravity)


def test_our_3x_model_and_its_4x_twin_load_to_the_same_model():
    a, b = _load(MODELS / "features30.osim"), _load(MODELS / "features30_as40.osim")
    _assert_same(a, b)
    # the visuals too: the same meshes at the same poses
    for la in a.links:
        lb = b.link(la.name)
        assert len(la.visuals) == len(lb.visuals), la.name
        for va, vb in zip(la.visuals, lb.visuals):
            np.testing.assert_allclose(va.pose, vb.pose, atol=1e-12)
            np.testing.assert_allclose(va.vertices, vb.vertices, atol=1e-12)


def test_bouncing_block_3x_and_4x_load_to_the_same_model():
    _assert_same(_load(shared_model("opensim", "bouncing_block_30000.osim")),
                 _load(shared_model("opensim", "bouncing_block.osim")))


def test_arm26_3x_and_4x_load_to_the_same_arm():
    # upstream's 4.x arm hangs from a massless "base" welded 0.8 m above the ground (joint
    # "offset"), with the marker r_acromion on it; its 3.x copy hangs the shoulder and the
    # marker from the ground: everything else is equal
    old = _load(shared_model("opensim", "opensim-core_arm26.osim"))
    new = _load(shared_model("opensim", "arm26.osim"))
    _assert_same(old, new, skip_links=("base",), skip_joints=("offset",), origins=False,
                 kinds=("forces", "actuators", "constraints", "couplers"))
    assert [f.name for f in old.frames] == [f.name for f in new.frames]
    np.testing.assert_allclose(new.joint("r_shoulder").origin, old.joint("r_shoulder").origin, atol=1e-12)
    assert (old.joint("r_shoulder").parent, new.joint("r_shoulder").parent) == (None, "base")
    np.testing.assert_allclose(new.joint("offset").origin[:3, 3], [0, 0.8, 0])


def test_double_pendulum_3x_30501_and_4x_load_to_the_same_pendulum():
    # the same two rods; upstream's 4.x copy hangs them 1.1 m above the ground, and its 30501
    # copy moves rod1's mass center 0.2 m: everything else is equal
    v33 = _load(shared_model("opensim", "double_pendulum33.osim"))
    v4 = _load(shared_model("opensim", "opensim-models_double_pendulum.osim"))
    v30501 = _load(shared_model("opensim", "opensim-core_double_pendulum.osim"))
    _assert_same(v33, v4, skip_joints=("pin1",))
    assert v4.joint("pin1").origin[1, 3] == pytest.approx(1.1) and v33.joint("pin1").origin[1, 3] == 0.0
    v30501.link("rod1").com[:] = v33.link("rod1").com
    v30501.actuators[:] = v33.actuators      # the 30501 test file has no actuators
    _assert_same(v33, v30501)


# -- joints and coordinates ----------------------------------------------------------------
def test_joint_types_map_to_model_joints(features):
    expected = {"ground_pelvis": "custom", "hip": "custom", "knee": "custom", "ankle": "universal",
                "mtp": "revolute", "shoulder": "euler", "elbow": "euler", "wrist": "prismatic",
                "grip": "fixed", "cart_planar": "planar", "pole_pin": "revolute", "patella_joint": "custom"}
    assert {j.name: j.type for j in features.joints if j.name in expected} == expected
    assert features.joint("mtp").axis.tolist() == [0, 0, 1]
    assert features.joint("wrist").axis.tolist() == [1, 0, 0]
    assert features.joint("shoulder").euler_order == "xyz"
    assert features.joint("ankle").axis.tolist() == [1, 0, 0] and features.joint("ankle").axis2.tolist() == [0, 1, 0]
    # PlanarJoint: q = (tx, ty, rz) in our planar joint, OpenSim's (rz, tx, ty) reordered
    assert features.joint("cart_planar").dof_names == ["cart_tx", "cart_ty", "cart_rz"]
    np.testing.assert_allclose(features.joint("cart_planar").q0, [0.4, 0.0, 0.25])
    np.testing.assert_allclose(features.joint("cart_planar").v0, [1.2, 0.0, -0.5])
    # CustomJoint coordinates in the order they first appear in the transform (OpenSim's order)
    assert features.joint("hip").dof_names == ["hip_flexion", "hip_adduction"]
    np.testing.assert_allclose(features.joint("hip").q0, [0.6, 0.15])
    report = _report(features, "joint")
    assert report["shoulder"].startswith("BallJoint -> euler xyz")
    assert report["knee"].startswith("CustomJoint -> custom (1 coordinate)")
    assert report["grip"] == "WeldJoint -> fixed"


def test_joint_frames_are_origin_and_child_pose(features):
    # knee: the parent frame thigh_offset (its own <frames>) in the thigh, the shank's own frame
    knee = features.joint("knee")
    assert knee.parent == "thigh"
    np.testing.assert_allclose(knee.origin[:3, 3], [0, -0.38, 0.01])
    np.testing.assert_allclose(knee.origin[:3, :3], xyz_rotation([0, 0, 0.05]))
    np.testing.assert_allclose(knee.child_pose, np.eye(4))
    # hip: a body component frame on a body component frame (relative socket "../hip_r")
    hip = features.joint("hip")
    expected = np.eye(4)
    expected[:3, :3] = xyz_rotation([0.1, 0, 0.2])
    expected[:3, 3] = [0.05, -0.1, 0.08]
    inner = np.eye(4)
    inner[:3, :3] = xyz_rotation([0, -0.15, 0])
    inner[:3, 3] = [0.01, 0, 0]
    np.testing.assert_allclose(hip.origin, expected @ inner, atol=1e-15)
    np.testing.assert_allclose(hip.child_pose[:3, 3], [0, 0.2, 0])
    # the pole: child frame pole_offset on pole_base on the pole
    pole = features.joint("pole_pin")
    base = np.eye(4)
    base[:3, :3] = xyz_rotation([0, 0, 0.3])
    base[:3, 3] = [0.01, 0, 0.02]
    np.testing.assert_allclose(pole.child_pose, base @ np.array([[1, 0, 0, 0], [0, 1, 0, -0.05], [0, 0, 1, 0],
                                                                  [0, 0, 0, 1.0]]), atol=1e-15)


def test_station_defined_frame_follows_opensims_axes(features):
    # pelvis_sdf: ab along -y, (ab x ac) along +x, origin at point c (stations on the pelvis)
    shoulder = features.joint("shoulder")
    a = np.array([0.1, 0.2, 0.05])
    hip_r = np.eye(4)
    hip_r[:3, :3] = xyz_rotation([0.1, 0, 0.2])
    hip_r[:3, 3] = [0.05, -0.1, 0.08]
    b = hip_r[:3, :3] @ [0, 0.3, 0] + hip_r[:3, 3]
    c = np.array([-0.1, 0.25, 0.2])
    ab = (b - a) / np.linalg.norm(b - a)
    n = np.cross(ab, (c - a) / np.linalg.norm(c - a))
    n /= np.linalg.norm(n)
    R = shoulder.origin[:3, :3]
    np.testing.assert_allclose(R[:, 1], -ab, atol=1e-15)
    np.testing.assert_allclose(R[:, 0], n, atol=1e-15)
    np.testing.assert_allclose(R.T @ R, np.eye(3), atol=1e-15)
    assert np.linalg.det(R) == pytest.approx(1.0)
    np.testing.assert_allclose(shoulder.origin[:3, 3], c)


def test_coordinates_defaults_speeds_locks_and_ranges(features):
    pelvis = features.joint("ground_pelvis")
    assert pelvis.dof_names == ["pelvis_rx", "pelvis_ry", "pelvis_rz", "pelvis_tx", "pelvis_ty", "pelvis_tz"]
    np.testing.assert_allclose(pelvis.q0, [0.1, -0.2, 0.3, 0.5, 1.0, -0.2])
    # translations: OpenSim's speeds; rotations: the Euler angle rates of OpenSim's angular
    # velocity (0.5, -0.3, 0.2) in the parent frame
    np.testing.assert_allclose(pelvis.v0[3:], [0.1, -0.4, 0.3])
    a, b = 0.1, -0.2
    E = np.column_stack([[1, 0, 0], xyz_rotation([a, 0, 0])[:, 1], (xyz_rotation([a, 0, 0]) @ xyz_rotation([0, b, 0]))[:, 2]])
    np.testing.assert_allclose(E @ pelvis.v0[:3], [0.5, -0.3, 0.2], atol=1e-15)
    np.testing.assert_allclose(features.joint("mtp").v0, [2.0])
    assert features.joint("wrist").locked_dofs.tolist() == [True]
    assert not features.joint("mtp").locked_dofs.any()
    # OpenSim never enforces a range in dynamics: no joint limits, the range kept in params
    assert np.all(np.isinf(pelvis.lower)) and np.all(np.isinf(pelvis.upper))
    np.testing.assert_allclose(pelvis.params["range"][4], [0, 2])
    assert pelvis.params["clamped"] == [False, False, False, False, True, False]
    assert "clamped to [0, 2]" in _report(features, "coordinate")["pelvis_ty"]
    assert "locked at 0.02" in _report(features, "coordinate")["wrist_slide"]


def test_dof_names_are_the_coordinate_names(features):
    expected = ["knee_angle", "pelvis_rx", "pelvis_ry", "pelvis_rz", "pelvis_tx", "pelvis_ty", "pelvis_tz",
                "hip_flexion", "hip_adduction", "ankle_flexion", "ankle_inversion", "mtp_angle", "shoulder_x",
                "shoulder_y", "shoulder_z", "elbow_x", "elbow_y", "elbow_z", "wrist_slide", "cart_rz",
                "cart_tx", "cart_ty", "pole_angle", "patella_beta"]
    assert sorted(features.dof_names) == sorted(expected)
    assert {l.name for l in features.links} == {"ground", "pelvis", "thigh", "shank", "foot", "toe", "arm",
                                                "forearm", "hand", "tool", "cart", "pole", "patella"}
    ground = features.parent_joint("ground")
    assert (ground.type, ground.parent) == ("fixed", None)
    assert features.joint("ground_pelvis").parent is None and features.joint("cart_planar").parent is None


def test_a_name_used_by_two_joints_becomes_joint_slash_coordinate():
    model = _load(shared_model("opensim", "newton_cradle.osim"))
    # five BallJoints all named sph1 (OpenSim renames them sph1_0 ...), all with q1, q2, q3
    assert [j.name for j in model.joints if j.type == "euler"] == ["sph1", "sph1_0", "sph1_1", "sph1_2", "sph1_3"]
    assert model.joint("sph1_2").dof_names == ["sph1_2/q1", "sph1_2/q2", "sph1_2/q3"]
    assert len(set(model.dof_names)) == len(model.dof_names) == 15
    assert any("renamed sph1_0 as OpenSim does" in w for w in model.warnings)


def test_a_body_without_a_joint_gets_opensims_free_joint(tmp_path):
    path = tmp_path / "orphan.osim"
    path.write_text("""<?xml version="1.0"?>
<OpenSimDocument Version="40000"><Model name="orphan">
  <BodySet><objects>
    <Body name="b"><mass>2</mass><inertia>1 1 1 0 0 0</inertia></Body>
    <Body name="c"><mass>1</mass><inertia>1 1 1 0 0 0</inertia></Body>
  </objects></BodySet>
  <JointSet><objects><PinJoint name="j">
    <socket_parent_frame>/ground</socket_parent_frame><socket_child_frame>/bodyset/b</socket_child_frame>
  </PinJoint></objects></JointSet>
</Model></OpenSimDocument>""")
    with pytest.warns(UserWarning, match="body 'c' is not connected by a joint; a FreeJoint 'free_c'"):
        model = load_opensim(path)
    free = model.joint("free_c")
    assert (free.type, free.parent, free.child) == ("custom", None, "c")
    assert free.dof_names == [f"free_c_coord_{k}" for k in range(6)]
    assert model.joint("j").dof_names == ["_coord_0"]      # OpenSim's name for a coordinate left out
    pytest.importorskip("opensim", reason="OpenSim's Python package (the ground truth) is not installed")
    from opensim_reference import OpenSimState
    o = OpenSimState(path, tmp_path)
    assert sorted(o.key(c) for c in o.coords) == sorted([("j", "_coord_0")] + [("free_c", n) for n in free.dof_names])


def test_joints_without_a_name_are_named_after_their_class_as_opensim_4_6_does():
    with pytest.warns(UserWarning, match=r'a PinJoint without a name="...": named \'pinjoint\' as OpenSim 4.6 does'):
        model = load_opensim(MODELS / "unnamed_joints.osim", visuals="none")
    # OpenSim 4.6 (checked with its Python package: test_opensim_truth.py compares the joint names too)
    assert [(j.name, j.parent, j.child) for j in model.joints if j.child != "ground"] == [
        ("pinjoint", None, "upper"), ("pinjoint_0", "upper", "lower"), ("weldjoint", "lower", "tip")]
    assert model.joint("pinjoint_0").dof_names == ["q2"]


def test_reversed_joints_run_the_tree_backwards_with_the_inverse_motion():
    """A 4.x joint whose child frame is nearer the ground, and a 3.x <reverse>true</reverse>
    joint, are traversed from their child to their parent with J'(q) = inv(X_FM(q)); the poses
    and accelerations against OpenSim 4.6 are in test_opensim_truth.py."""
    model = _load(MODELS / "reversed_joints.osim")
    shoulder = model.joint("shoulder")
    assert (shoulder.type, shoulder.parent, shoulder.child, shoulder.axis.tolist()) == ("revolute", None, "upper", [0, 0, -1])
    elbow = model.joint("elbow")
    assert (elbow.type, elbow.parent, elbow.child) == ("custom", "upper", "lower")
    # the Gimbal's X-Y-Z rotations inverted: Z, Y, X with negated angles
    assert [(ta.axis.tolist(), ta.coordinate, float(ta.function(1.0))) for ta in elbow.transform_axes[:3]] == [
        ([0, 0, 1], 2, -1.0), ([0, 1, 0], 1, -1.0), ([1, 0, 0], 0, -1.0)]
    assert model.joint("finger_slide").axis.tolist() == [-1, 0, 0]
    assert ("joint", "shoulder", "traversed from ground to upper (its child frame is nearer the ground), as OpenSim "
                                 "does") in model.report
    old = _load(MODELS / "reversed30.osim")
    assert (old.joint("elbow").parent, old.joint("elbow").child) == ("arm", "forearm")
    assert any(n == "elbow" and "<reverse>true</reverse>" in w for _, n, w in old.report)


def test_ellipsoid_joint_is_simbodys_ellipsoid_mobilizer():
    """Poses and accelerations against OpenSim 4.6: test_opensim_truth.py on scapulothoracic.osim."""
    model = _load(MODELS / "prescribed_ellipsoid.osim")
    joint = model.joint("scapula")
    assert (joint.type, joint.dof_names, joint.ellipsoid_radii.tolist()) == ("custom", ["sc_x", "sc_y", "sc_z"],
                                                                             [0.07, 0.15, 0.07])
    assert "Simbody's Ellipsoid mobilizer" in _report(model, "joint")["scapula"]
    assert "prescribed motion: not simulated" in _report(model, "coordinate")["sc_z"]


def test_3x_properties_are_rounded_as_opensim_converts_them(tmp_path):
    # OpenSim 4 reads a 3.x joint location and the six inertia scalars through 6 significant digits
    model = _load(shared_model("opensim", "subject01_adjusted_spring.osim"))
    np.testing.assert_array_equal(model.joint("hip_r").origin[:3, 3], [-0.0724378, -0.0677247, 0.0855524])
    assert "rounded to 6 significant digits" in " ".join(_report(model, "model").values())


# -- forces, actuators, constraints --------------------------------------------------------
def test_coordinate_limit_force_in_si_units(features):
    limits = {f.name: f for f in features.forces if type(f).__name__ == "CoordinateLimitForce"}
    knee = limits["knee_limit"]       # rotational: OpenSim's degrees, N m/degree
    deg = math.pi / 180
    assert knee.dof == "knee_angle"
    assert knee.upper_limit == pytest.approx(5 * deg) and knee.lower_limit == pytest.approx(-110 * deg)
    assert knee.upper_stiffness == pytest.approx(20 / deg) and knee.lower_stiffness == pytest.approx(30 / deg)
    assert knee.damping == pytest.approx(0.5 / deg) and knee.transition == pytest.approx(4 * deg)
    wrist = limits["wrist_limit"]     # translational: SI already
    assert (wrist.upper_limit, wrist.upper_stiffness, wrist.damping, wrist.transition) == (0.05, 1000, 10, 0.01)


def test_springs_and_bushing(features):
    mtp = features.joint("mtp")
    assert (mtp.stiffness[0], mtp.rest_position[0], mtp.damping[0]) == (12, 0.1, 0.3)
    forces = {f.name: f for f in features.forces}
    spring = forces["cart_spring"]
    assert (spring.link1, spring.link2, spring.stiffness, spring.free_length) == ("cart", "pole", 200, 0.4)
    np.testing.assert_allclose(spring.point1, [0.1, 0, 0])
    np.testing.assert_allclose(spring.point2, [0, 0.5, 0])
    bushing = forces["hip_bushing"]
    assert (bushing.link1, bushing.link2) == ("pelvis", "thigh")
    np.testing.assert_allclose(bushing.frame1, np.eye(4))
    np.testing.assert_allclose(bushing.frame2[:3, 3], [0, 0.2, 0])
    np.testing.assert_allclose(bushing.frame2[:3, :3], xyz_rotation([0, 0.1, 0]))
    np.testing.assert_allclose(bushing.stiffness, [10, 11, 12, 100, 110, 120])
    np.testing.assert_allclose(bushing.damping, [0.1, 0.2, 0.3, 1, 2, 3])


def test_actuators(features):
    acts = {a.name: a for a in features.actuators}
    assert "off_motor" not in acts and "disabled in the file" in _report(features, "force")["off_motor"]
    push = acts["push"]            # <body> from the <defaults> template; direction normalized as OpenSim
    assert (push.kind, push.link1, push.gain, push.control) == ("point", "pelvis", 40, 0.0)
    np.testing.assert_allclose(push.direction, [0, 1, 0])
    assert push.direction_in_world and not push.point_in_world
    local = acts["push_local"]
    assert local.point_in_world and not local.direction_in_world
    np.testing.assert_allclose(local.direction, np.array([1, 0, 1]) / math.sqrt(2))
    twist = acts["twist"]
    assert (twist.kind, twist.link1, twist.link2, twist.axis_in_world) == ("torque", "thigh", "pelvis", False)
    np.testing.assert_allclose(twist.axis, np.array([1, 1, 0]) / math.sqrt(2))
    assert acts["twist_global"].link2 is None and acts["twist_global"].axis_in_world
    mtp = acts["mtp_motor"]
    assert (mtp.kind, mtp.dof, mtp.gain, mtp.min_control, mtp.max_control) == ("coordinate", "mtp_angle", 50, -2, 3)
    assert acts["cart_motor"].gain == 300          # optimal_force from the <defaults> template
    assert (acts["pelvis_ty_motor"].kind, acts["pelvis_ty_motor"].dof) == ("coordinate", "pelvis_ty")
    # a CoordinateActuator on a Ball/Free rotation: OpenSim's mobility force on the angular
    # velocity along the parent frame's axis = that torque on the child, its opposite on the parent
    rz = acts["pelvis_rz_motor"]
    assert (rz.kind, rz.link1, rz.link2, rz.axis_in_world) == ("torque", None, "pelvis", True)
    lab = xyz_rotation([0, 0.3, 0])        # the FreeJoint's parent frame is the /lab frame
    np.testing.assert_allclose(rz.axis, -lab[:, 2], atol=1e-15)
    shoulder = acts["shoulder_motor"]
    assert (shoulder.kind, shoulder.link1, shoulder.link2) == ("torque", "pelvis", "arm")
    np.testing.assert_allclose(shoulder.axis, -features.joint("shoulder").origin[:3, 1], atol=1e-15)
    on = _load(FEATURES, activate_actuators=True)
    assert all(a.control == 1.0 for a in on.actuators)


def test_constraints_and_couplers(features):
    coupler = features.couplers[0]
    assert (coupler.name, coupler.dependent, coupler.independent) == ("patella_coupler", "patella_beta", "knee_angle")
    assert coupler.function(0.3) == pytest.approx(0.5 * 0.3 + 0.1)
    # the dependent coordinate starts on the constraint: 0.5 * (-0.4) + 0.1, not its default -0.1
    assert features.joint("patella_joint").q0[0] == pytest.approx(-0.1)
    (line,) = features.constraints
    assert (line.name, line.type, line.link1, line.link2) == ("cart_on_line", "point_line", "ground", "cart")
    # the line is on the /lab_corner frame: its origin and x axis, in the ground
    corner = link_poses(features)["ground"] @ _pose([0.1, 0, 0.2], [0, 0.3, 0]) @ _pose([-1, 0, 0.5], [0.05, 0, -0.1])
    np.testing.assert_allclose(line.pos1, corner[:3, 3], atol=1e-15)
    np.testing.assert_allclose(line.axis, corner[:3, 0], atol=1e-15)
    assert "disabled in the file" in _report(features, "constraint")["unused_weld"]


def _pose(p, angles):
    T = np.eye(4)
    T[:3, :3] = xyz_rotation(angles)
    T[:3, 3] = p
    return T


def test_unsupported_forces_are_reported_not_fatal(features):
    forces = _report(features, "force")
    assert forces["pole_expression"] == "ExpressionBasedCoordinateForce: not simulated (force)"
    muscles = _report(_load(shared_model("opensim", "Tug_of_War.osim")), "force")
    assert all(what == "Thelen2003Muscle: not simulated (muscle)" for what in muscles.values()) and len(muscles) == 2


# -- contact and geometry ----------------------------------------------------------------------
def test_contact_geometry_of_contact_forces_becomes_collision_shapes(features):
    assert features.contact_method == "penalty"
    (floor,) = features.link("ground").collisions
    assert floor.kind == "plane" and floor.friction == 0.7      # the first force's dynamic friction
    # OpenSim's half-space is x > 0 of its frame (rotated -90 deg about z): our plane's normal
    # (+z of the shape) points up, +y of the ground, at y = -0.5
    np.testing.assert_allclose(floor.pose[:3, 2], [0, 1, 0], atol=1e-15)
    np.testing.assert_allclose(floor.pose[:3, 3], [0, -0.5, 0])
    (heel,) = features.link("foot").collisions
    assert (heel.kind, heel.radius, heel.friction) == ("sphere", 0.03, 0.7)
    np.testing.assert_allclose(heel.pose[:3, 3], [-0.05, -0.03, 0])
    assert features.link("hand").collisions[0].friction == 0.4
    assert features.link("toe").collisions == []        # "spare" is used by no contact force
    assert _report(features, "contact")["spare"] == "ContactSphere: used by no contact force"


def test_meshes_and_shapes(features):
    thigh = {s.name: s for s in features.link("thigh").visuals}
    np.testing.assert_allclose(thigh["thigh_tetra"].vertices, TETRA * [0.1, 0.2, 0.3])
    missing = thigh["thigh_bone"]
    assert missing.vertices is None and missing.mesh_path == "missing_bone.vtp"
    assert any("'missing_bone.vtp' not found" in w for w in features.warnings)
    assert "frame_geometry" not in thigh
    ground = {s.name: s for s in features.link("ground").visuals}
    np.testing.assert_allclose(ground["ground_tetra"].vertices, 2 * TETRA)
    np.testing.assert_allclose(ground["ground_brick"].size, [2, 0.02, 2])
    (box,) = features.link("foot").visuals           # the invisible sphere is left out
    np.testing.assert_allclose(box.color, [1, 0, 0, 0.5])
    (cyl,) = features.link("shank").visuals          # OpenSim's cylinders stand along y, ours along z
    assert (cyl.kind, cyl.radius, cyl.length) == ("cylinder", 0.03, 0.4)
    np.testing.assert_allclose(cyl.pose[:3, 2], [0, 1, 0], atol=1e-15)
    (ball,) = features.link("pelvis").visuals        # on the hip_r frame
    np.testing.assert_allclose(ball.pose[:3, 3], [0.05, -0.1, 0.08])
    (cone,) = features.link("pole").visuals          # base at the frame origin, apex 0.3 up y
    np.testing.assert_allclose(cone.pose[:3, 3], [0, 0.15, 0], atol=1e-15)
    (tool,) = features.link("tool").visuals          # an OBJ mesh file
    np.testing.assert_allclose(tool.vertices, 0.5 * TETRA)
    (ellipsoid,) = features.link("arm").visuals
    np.testing.assert_allclose(np.abs(ellipsoid.vertices).max(axis=0), [0.04, 0.15, 0.05], rtol=1e-12)


def test_3x_display_geometry(tmp_path):
    model = _load(MODELS / "features30.osim")
    (arm,) = model.link("arm").visuals                # the second one has display_preference 0
    np.testing.assert_allclose(arm.vertices, TETRA * [0.05, 0.3, 0.05])
    np.testing.assert_allclose(arm.pose, _pose([0, -0.1, 0], [0, 0, 0.5]))
    np.testing.assert_allclose(arm.color, [0.2, 0.4, 0.6, 0.8])
    np.testing.assert_allclose(model.link("ground").visuals[0].vertices, 3 * TETRA)


def test_visuals_none_and_primitives():
    none = _load(FEATURES, visuals="none")
    assert all(not l.visuals for l in none.links)
    assert none.link("foot").collisions            # contact is not a visual
    prim = _load(FEATURES, visuals="primitives")
    shank = prim.link("shank")
    spheres = [s for s in shank.visuals if s.kind == "sphere"]
    cylinders = [s for s in shank.visuals if s.kind == "cylinder"]
    assert len(spheres) == 1 and np.allclose(spheres[0].pose, np.eye(4))
    # from the shank origin to its joints: the knee (child frame at the origin: none) and the ankle
    (to_ankle,) = cylinders
    assert to_ankle.length == pytest.approx(0.4)
    np.testing.assert_allclose(to_ankle.pose[:3, 3], [0, -0.2, 0])
    np.testing.assert_allclose(np.abs(to_ankle.pose[:3, 2]), [0, 1, 0], atol=1e-15)
    assert not shank.collisions


def test_collide_adds_primitive_collisions_with_families_by_depth():
    model = _load(FEATURES, collide=True)
    assert model.self_collision
    depth = {"pelvis": 1, "cart": 1, "thigh": 2, "arm": 2, "pole": 2, "shank": 3, "patella": 3, "forearm": 3}
    for name, d in depth.items():
        link = model.link(name)
        family, other = (1, 2) if d % 2 else (2, 1)
        assert link.collision_family == family, name
        assert link.collision_mask == 0xFFFF & ~(1 << other), name
    # to the hip's child frame and the knee's parent frame (the patella joint's is at the origin)
    assert [s.kind for s in model.link("thigh").collisions] == ["cylinder"] * 2
    assert model.link("ground").collision_family == 0        # collides with both families


def test_z_up_turns_the_model_so_that_its_up_is_z(features):
    up = _load(FEATURES, z_up=True)
    R = np.eye(4)
    R[:3, :3] = [[1, 0, 0], [0, 0, -1], [0, 1, 0]]        # +y -> +z, +z -> -y
    np.testing.assert_allclose(up.gravity, [0, 0, -9.80665], atol=1e-15)
    ours, turned = link_poses(features), link_poses(up)
    for name, T in ours.items():
        np.testing.assert_allclose(turned[name], R @ T, atol=1e-15, err_msg=name)
    acts = {a.name: a for a in up.actuators}
    old = {a.name: a for a in features.actuators}
    np.testing.assert_allclose(acts["push"].direction, [0, 0, 1], atol=1e-15)        # a world direction
    np.testing.assert_allclose(acts["push"].point, old["push"].point)                 # a body point
    np.testing.assert_allclose(acts["push_local"].point, R[:3, :3] @ old["push_local"].point, atol=1e-15)
    np.testing.assert_allclose(acts["twist_global"].axis, R[:3, :3] @ old["twist_global"].axis, atol=1e-15)
    np.testing.assert_allclose(acts["twist"].axis, old["twist"].axis)
    np.testing.assert_allclose(acts["pelvis_rz_motor"].axis, R[:3, :3] @ old["pelvis_rz_motor"].axis, atol=1e-15)
    floor = up.link("ground").collisions[0]                 # on the ground link: the link turns
    np.testing.assert_allclose((turned["ground"] @ floor.pose)[:3, 2], [0, 0, 1], atol=1e-15)


def test_markers_become_frames(features):
    frames = {f.name: f for f in features.frames}
    assert set(frames) == {"thigh_marker_1", "shank_marker"}      # "shank" is a link's name
    np.testing.assert_allclose(frames["thigh_marker_1"].pose[:3, 3], [0.05, -0.1, 0.02])
    assert frames["shank_marker"].link == "shank"


# -- real models -----------------------------------------------------------------------------
def test_rajagopal_reads_like_opensim():
    model = _load(shared_model("opensim", "Rajagopal2016.osim"))
    assert len(model.links) == 23 and model.nv == 39
    assert model.joint("walker_knee_r").dof_names == ["knee_angle_r"]
    assert model.joint("walker_knee_r").type == "custom"
    assert [c.dependent for c in model.couplers] == ["knee_angle_r_beta", "knee_angle_l_beta"]
    assert len(model.actuators) == 17 and all(a.kind == "coordinate" for a in model.actuators)
    assert not any(a.name == "default" for a in model.actuators)       # <defaults> templates are not actuators
    muscles = [w for s, n, w in model.report if s == "force" and "Millard2012EquilibriumMuscle" in w]
    assert len(muscles) == 80


def test_load_model_reads_osim_by_extension():
    # OpenSim 4 simulates a TransformAxis without a function as the constant 0: said once
    with pytest.warns(UserWarning, match=r"line 582, <TransformAxis name=\"translation3\">: no function: the axis "
                                         r"does not move with 'patella_beta'"):
        model = load_model(FEATURES, visuals="none")
    assert model.name == "features" and model.source == str(FEATURES)


def test_info_prints_the_report():
    env = subprocess_env()        # the environment before `import opensim` rewrote LD_LIBRARY_PATH
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.getcwd(), env.get("PYTHONPATH")]))
    out = subprocess.run([sys.executable, "-m", "mbsim_ros.cli", "info", str(FEATURES)], capture_output=True,
                         text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "read from the file:" in out.stdout
    assert "knee: CustomJoint -> custom (1 coordinate): knee_angle" in out.stdout
    assert "pole_expression: ExpressionBasedCoordinateForce: not simulated (force)" in out.stdout


@pytest.mark.parametrize("source", ["double_pendulum33.osim", "opensim-models_double_pendulum.osim"])
def test_explicit_empty_joint_and_coordinate_names_get_opensim_4_6s_names(tmp_path, source):
    """<PinJoint name=""> and <Coordinate name=""> (public 3.x and 4.x files carry them): named as
    OpenSim 4.6 names them, checked with its Python package: a joint after its class in lower
    case (a second one _0), a coordinate "coordinate". Where two coordinates end up with that
    name, ours are "<joint>/coordinate" (a Model's DOF names are unique; OpenSim tells them apart
    by path)."""
    import re
    text = re.sub(r"<ForceSet.*?</ForceSet>", "", shared_model("opensim", source).read_text(), flags=re.S)
    cases = {"joints": text.replace('<PinJoint name="pin1">', '<PinJoint name="">')
                           .replace('<PinJoint name="pin2">', '<PinJoint name="">'),
             "coordinate": text.replace('<PinJoint name="pin1">', '<PinJoint name="">')
                               .replace('<Coordinate name="q2">', '<Coordinate name="">'),
             "both_coordinates": text.replace('<Coordinate name="q1">', '<Coordinate name="">')
                                     .replace('<Coordinate name="q2">', '<Coordinate name="">')}
    osim = pytest.importorskip("opensim", reason="OpenSim's Python package (the ground truth) is not installed")
    for case, variant in cases.items():
        path = tmp_path / f"{case}.osim"
        path.write_text(variant)
        with pytest.warns(UserWarning, match="as OpenSim 4.6 does"):
            model = load_opensim(path, visuals="none")
        reference = osim.Model(str(path))
        reference.initSystem()
        joints = [reference.getJointSet().get(k) for k in range(reference.getJointSet().getSize())]
        coords = [reference.getCoordinateSet().get(k) for k in range(reference.getCoordinateSet().getSize())]
        assert [j.name for j in model.joints if j.child != "ground"] == [j.getName() for j in joints], case
        names = [c.getName() for c in coords]
        expected = [n if names.count(n) == 1 else f"{c.getJoint().getName()}/{n}" for n, c in zip(names, coords)]
        assert model.dof_names == expected, case
    assert model.dof_names == ["pin1/coordinate", "pin2/coordinate"]
