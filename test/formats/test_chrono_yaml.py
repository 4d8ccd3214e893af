"""Chrono YAML loader: structure, initial poses, conventions and settings.

Ground truth for poses: the file's own numbers, turned into transforms here with scipy's
Rotation (Chrono's [yaw, pitch, roll] = intrinsic Z-Y-X; quaternions scalar first), compared
with the Model's links placed by its documented contract
T_child = T_parent @ origin @ J(q0) @ inv(child_pose), evaluated here in numpy.
"""
import math
import pathlib
import textwrap
import warnings

import numpy as np
import pytest
import yaml
from conftest import OWN_MODELS, SHARED_MODELS, shared_model
from scipy.spatial.transform import Rotation

import mbsim_ros as mb
from mbsim_ros import ModelError
from mbsim_ros.formats.chrono_yaml import load_chrono_yaml
from mbsim_ros.model import Function


OWN = OWN_MODELS / "chrono_yaml"
SHARED = SHARED_MODELS / "chrono_yaml"
SHARED_FILES = sorted(SHARED.rglob("*.yaml")) if SHARED.is_dir() else []
POSE_TOL = 1e-12     # m and rad: poses are a handful of float products, nothing accumulates


def load(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return mb.load_model(path)


# ---------------------------------------------------------------- the Model contract, in numpy
def _axis_angle(axis, angle):
    return Rotation.from_rotvec(np.asarray(axis, float) / np.linalg.norm(axis) * angle).as_matrix()


def joint_motion(j, q):
    T = np.eye(4)
    if j.type == "revolute":
        T[:3, :3] = _axis_angle(j.axis, q[0])
    elif j.type == "prismatic":
        T[:3, 3] = j.axis * q[0]
    elif j.type == "universal":
        T[:3, :3] = _axis_angle(j.axis, q[0]) @ _axis_angle(j.axis2, q[1])
    elif j.type == "ball":
        T[:3, :3] = Rotation.from_quat(q).as_matrix()
    elif j.type == "free":
        T[:3, :3] = Rotation.from_quat(q[3:]).as_matrix()
        T[:3, 3] = q[:3]
    else:
        assert j.type == "fixed", j.type
    return T


def world_poses(model, q=None):
    """{link: 4x4 world pose} by the Model's frame contract."""
    q = model.initial_q() if q is None else q
    out = {}
    for j in model.joints:
        parent = np.eye(4) if j.parent is None else out[j.parent]
        out[j.child] = parent @ j.origin @ joint_motion(j, q[j.q_index:j.q_index + j.nq]) @ np.linalg.inv(j.child_pose)
    return out


# ---------------------------------------------------------------- the file, read independently
def file_bodies(path):
    """{body: 4x4 pose from the file's numbers} for a model file or a simulation file."""
    path = pathlib.Path(path)
    doc = yaml.safe_load(path.read_text())
    if isinstance(doc.get("model"), str):
        path = path.parent / doc["model"]
        doc = yaml.safe_load(path.read_text())
    m = doc["model"]
    degrees = m.get("angle_degrees", True)
    out = {}
    for b in m["bodies"]:
        T = np.eye(4)
        T[:3, 3] = [float(x) for x in b["location"]]
        o = [float(x) for x in b.get("orientation", [0, 0, 0])]
        if len(o) == 3:
            T[:3, :3] = Rotation.from_euler("ZYX", o, degrees=degrees).as_matrix()
        else:
            T[:3, :3] = Rotation.from_quat([o[1], o[2], o[3], o[0]]).as_matrix()
        out[b["name"]] = T
    return out


def loadable(path):
    doc = yaml.safe_load(path.read_text()) if "schema" not in path.parts else None
    return isinstance(doc, dict) and (isinstance(doc.get("model"), str) or bool((doc.get("model") or {}).get("bodies")))


@pytest.mark.parametrize("path", SHARED_FILES, ids=lambda p: str(p.relative_to(SHARED)))
def test_every_shared_file_loads_with_the_files_initial_poses_or_fails_clearly(path):
    if not loadable(path):
        with pytest.raises(ModelError) as err:
            load(path)
        message = str(err.value)
        assert str(path) in message
        assert any(w in message for w in ("no multibody content", "solver file", "schema", "not valid YAML")), message
        return
    model = load(path)
    expected = file_bodies(path)
    poses = world_poses(model)
    assert set(poses) == set(expected)
    for name, T in expected.items():
        np.testing.assert_allclose(poses[name], T, atol=POSE_TOL, err_msg=f"{path.name}: body {name}")
    # loop constraints start closed: their two points coincide where the type says so
    for c in model.constraints:
        pa = poses[c.link1][:3, :3] @ c.pos1 + poses[c.link1][:3, 3]
        pb = poses[c.link2][:3, :3] @ c.pos2 + poses[c.link2][:3, 3]
        ua = poses[c.link1][:3, :3] @ c.axis
        if c.type in ("ball", "weld", "hinge"):
            np.testing.assert_allclose(pa, pb, atol=POSE_TOL)
        elif c.type == "point_plane":
            assert abs(ua @ (pb - pa)) < POSE_TOL
        elif c.type == "point_line":
            np.testing.assert_allclose(np.cross(ua, pb - pa), 0, atol=POSE_TOL)
        elif c.type == "distance":
            assert abs(np.linalg.norm(pa - pb) - c.params["distance"]) < POSE_TOL


@pytest.mark.parametrize("path", [p for p in SHARED_FILES if loadable(p)], ids=lambda p: str(p.relative_to(SHARED)))
def test_dynamics_places_every_shared_model_where_the_file_says(path):
    """The compiled kinematics (numba) agrees with the file for every real model."""
    model = load(path)
    poses = mb.link_transforms(model, model.initial_q())
    for name, T in file_bodies(path).items():
        np.testing.assert_allclose(poses[name], T, atol=1e-12, err_msg=f"{path.name}: body {name}")


# ---------------------------------------------------------------- the slider-crank, in detail
def test_slider_crank_tree_loops_motor_and_spring():
    model = load(shared_model("chrono_yaml", "mbs", "mbs.yaml"))
    joints = {j.name: j for j in model.joints}
    # ground welded; slider, ball prismatic and crank revolute (the motor's spindle) from it;
    # of the rod's two joints the universal (4 DOFs removed) is in the tree, the spherical a loop
    assert joints["ground_fixed"].type == "fixed" and joints["ground_fixed"].parent is None
    assert (joints["ground_slider"].type, joints["ground_slider"].parent) == ("prismatic", "ground")
    assert (joints["ground_crank"].type, joints["ground_crank"].parent) == ("revolute", "ground")
    assert (joints["rod_slider"].type, joints["rod_slider"].parent, joints["rod_slider"].child) == ("universal", "slider", "rod")
    assert [(c.name, c.type) for c in model.constraints] == [("crank_rod", "ball")]
    assert model.nv == 5
    poses = world_poses(model)
    # joint axes in the world: the prismatic along +x, the crank's revolute along +y
    for name, world_axis in (("ground_slider", [1, 0, 0]), ("ground_crank", [0, 1, 0]), ("ground_ball", [1, 0, 0])):
        j = joints[name]
        np.testing.assert_allclose(j.origin[:3, :3] @ j.axis, world_axis, atol=1e-15)
    # universal: body1 = rod is the child, so its first axis is axis2 (z) on the slider, then axis1 (y)
    j = joints["rod_slider"]
    R = poses["slider"][:3, :3] @ j.origin[:3, :3]
    np.testing.assert_allclose(np.abs(R @ j.axis), [0, 0, 1], atol=1e-15)
    np.testing.assert_allclose(np.abs(R @ j.axis2), [0, 1, 0], atol=1e-15)
    # the motor: Chrono drives body1 (ground) relative to body2 (crank), the Model link2 relative to link1
    (motor,) = model.motors
    assert (motor.name, motor.kind, motor.actuation, motor.link1, motor.link2, motor.guide) == \
        ("ground_crank", "rotation", "speed", "crank", "ground", "free")
    for link, frame in ((motor.link1, motor.frame1), (motor.link2, motor.frame2)):
        F = poses[link] @ frame
        np.testing.assert_allclose(F[:3, 3], [0, 0, 0], atol=1e-15)
        np.testing.assert_allclose(F[:3, 2], [0, 1, 0], atol=1e-15)
    # DATA with repeat: linear between the points, the repeat window from the file
    f = motor.function
    assert f.repeat == (0.0, 16.0, 16.0)
    assert f(0.5) == pytest.approx(1.57) and f(2.0) == pytest.approx(3.14) and f(10.0) == pytest.approx(-3.14)
    assert f(16.5) == pytest.approx(1.57)
    (spring,) = model.forces
    assert (spring.link1, spring.link2, spring.stiffness, spring.damping, spring.free_length) == ("ground", "ball", 50, 5, 1)
    np.testing.assert_allclose(poses["ground"][:3, 3] + spring.point1, [6.5, 0, 0])
    np.testing.assert_allclose(spring.point2, [0, 0, 0])
    # settings from the simulation and solver files
    s = model.settings
    assert (s["time_step"], s["end_time"], s["enforce_realtime"], s["contact_method"], s["integrator"]) == \
        (1e-4, 100.0, True, "penalty", "EULER_IMPLICIT_LINEARIZED")
    assert model.contact_method == "penalty"
    np.testing.assert_allclose(model.gravity, [0, 0, -9.8])
    assert model.self_collision
    slider = model.link("slider")
    assert slider.collisions[0].kind == "box" and slider.collisions[0].friction == pytest.approx(0.4)
    ball = model.link("ball").collisions[0]
    assert (ball.friction, ball.restitution) == (pytest.approx(0.6), pytest.approx(0.4))


def test_model_file_alone_has_chrono_default_gravity_and_no_settings():
    model = load(shared_model("chrono_yaml", "mbs", "model_slider_crank.yaml"))
    np.testing.assert_allclose(model.gravity, [0, 0, -9.8])
    assert model.settings["time_step"] is None and model.contact_method is None


def test_motors_file_every_motor_kind_and_guide():
    model = load(shared_model("chrono_yaml", "mbs", "model_motors.yaml"))
    motors = {m.name: m for m in model.motors}
    assert {n: (m.kind, m.actuation) for n, m in motors.items()} == {
        "motor_A1": ("rotation", "speed"), "motor_A2": ("rotation", "position"), "motor_A3": ("rotation", "force"),
        "motor_B1": ("linear", "position"), "motor_B2": ("linear", "speed"), "motor_B3": ("linear", "force")}
    joints = {j.name: j for j in model.joints}
    for n in ("motor_A1", "motor_A2", "motor_A3"):
        assert joints[n].type == "revolute" and joints[n].parent.startswith("stator")
    for n in ("motor_B1", "motor_B2", "motor_B3"):
        assert joints[n].type == "prismatic" and joints[n].parent.startswith("guide")
    # angle_degrees: false, so the sine's phase is radians
    assert motors["motor_B2"].function.phase == pytest.approx(1.5708)
    assert motors["motor_A2"].function(5.0) == pytest.approx(3.14 * math.sin(2 * math.pi * 0.05 * 5))
    # the obstacles are not connected: free joints at their poses
    assert joints["obs1_free"].type == "free"
    np.testing.assert_allclose(joints["obs1_free"].q0, [1.5, 3, 0.4, 0, 0, 0, 1])


def test_bushing_becomes_a_bushing_element_and_a_free_body():
    model = load(shared_model("chrono_yaml", "mbs", "model_bushing.yaml"))
    (bushing,) = model.forces
    # REVOLUTE about y: the free DOF (rotation about the joint's z = y) takes the DOF values (0)
    np.testing.assert_allclose(bushing.stiffness, [1e5, 1e5, 0, 1e5, 1e5, 1e5])
    np.testing.assert_allclose(bushing.damping, [1e3, 1e3, 0, 1e3, 1e3, 1e3])
    poses = world_poses(model)
    F1 = poses["ground"] @ bushing.frame1
    F2 = poses["body"] @ bushing.frame2
    np.testing.assert_allclose(F1, F2, atol=1e-15)
    np.testing.assert_allclose(F1[:3, 2], [0, 1, 0], atol=1e-15)
    free = model.joint("body_free")
    assert free.type == "free"
    # lin_vel / ang_vel (not Chrono's keys) are read as the initial velocities, with a warning;
    # the body is unrotated with its COM at its origin, so v0 = (lin_vel, ang_vel)
    np.testing.assert_allclose(free.v0, [1.0, -0.4, 0.2, 1.5, 1.5, -1.5])
    assert any("lin_vel" in w for w in model.warnings)
    (load_,) = model.loads
    assert (load_.kind, load_.local, load_.point_local) == ("force", False, True)
    np.testing.assert_allclose(load_.vector, [0, 0, -8e3])


def test_controller_inputs_for_motor_and_loads():
    model = load(shared_model("chrono_yaml", "mbs", "model_inverted_pendulum_motor.yaml"))
    (motor,) = model.motors
    assert (motor.function.kind, motor.function.name, motor.link1, motor.link2) == ("input", "cart_controller", "ground", "cart")
    model = load(shared_model("chrono_yaml", "mbs", "mbs_controller.yaml"))
    assert [(ld.name, ld.modulation.name, ld.vector.tolist()) for ld in model.loads] == [
        ("cart_controller_x", "cart_controller_x", [1, 0, 0]), ("cart_controller_y", "cart_controller_y", [0, 1, 0]),
        ("cart_controller_z", "cart_controller_z", [0, 0, 1])]
    assert model.settings["time_step"] == 1e-4


def test_fea_content_is_left_out_and_said():
    model = load(shared_model("chrono_yaml", "fea", "model_cables.yaml"))
    assert any("FEA" in w and "not simulated" in w for w in model.warnings)
    assert ("left out", "FEA", "finite-element content: not simulated") in model.report
    with pytest.raises(ModelError, match="no multibody content.*FEA_beams"):
        load(shared_model("chrono_yaml", "fea", "model_beams.yaml"))


# ---------------------------------------------------------------- our own small files
def write(tmp_path, text, name="model.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


BODY = """
    - name: {name}
      location: {loc}
      orientation: {rot}
      mass: 2
      inertia: {{moments: [1, 2, 3], products: [0.1, 0.2, 0.3]}}
"""


def test_orientations_inertia_and_velocities(tmp_path):
    path = write(tmp_path, """
        chrono-version: "9.0"
        model:
          angle_degrees: false
          bodies:
            - name: a
              location: ["1", "2", "3"]
              orientation: [0.3, -0.2, 0.5]
              mass: "2.5"
              com: {location: [0.1, 0, 0], orientation: [0.7071067811865476, 0, 0, 0.7071067811865476]}
              inertia: {moments: [1, 2, 3], products: [0.1, 0.2, 0.3]}
              initial_linear_velocity: [1, 0, 0]
              initial_angular_velocity: [0, 0, 2]
    """)
    model = load(path)
    j = model.joint("a_free")
    R = Rotation.from_euler("ZYX", [0.3, -0.2, 0.5]).as_matrix()
    np.testing.assert_allclose(Rotation.from_quat(j.q0[3:]).as_matrix(), R, atol=1e-14)
    np.testing.assert_allclose(j.q0[:3], [1, 2, 3])
    link = model.link("a")
    assert link.mass == 2.5
    # the inertia tensor about the COM in the COM frame, rotated 90 deg about z into the link frame
    Ic = np.array([[1, 0.1, 0.2], [0.1, 2, 0.3], [0.2, 0.3, 3]])
    Rc = Rotation.from_euler("z", 90, degrees=True).as_matrix()
    np.testing.assert_allclose(link.inertia, Rc @ Ic @ Rc.T, atol=1e-14)
    # velocities: the COM's linear velocity (world), the angular one in the COM frame; the free
    # joint's v is the reference frame's (linear, angular) velocity in its own frame
    w_world = R @ Rc @ [0, 0, 2]
    v_ref = np.array([1.0, 0, 0]) + np.cross(w_world, -R @ [0.1, 0, 0])
    np.testing.assert_allclose(j.v0, np.concatenate([R.T @ v_ref, R.T @ w_world]), atol=1e-14)


def test_spanning_tree_prefers_the_stiffest_joints_and_closes_loops(tmp_path):
    """A four-bar with a prismatic coupler and a universal: the loop goes to the cheapest joint,
    every loop type starts closed, and joint directions follow the file's axes."""
    bodies = "".join(BODY.format(name=n, loc=l, rot=r) for n, l, r in (
        ("crank", "[0, 0, 1]", "[10, 20, 30]"), ("coupler", "[1, 0, 1]", "[0, 0, 0]"),
        ("rocker", "[2, 0, 0.5]", "[1, 0, 0, 0]"), ("slider", "[2, 1, 0]", "[0, 0, 0]")))
    path = write(tmp_path, f"""
        chrono-version: 10.0
        model:
          bodies:
            - name: ground
              location: [0, 0, 0]
              fixed: true
{textwrap.indent(textwrap.dedent(bodies), ' ' * 12)}
          joints:
            - {{name: j_ball, type: SPHERICAL, body1: coupler, body2: rocker, location: [2, 0, 1]}}
            - {{name: j_crank, type: revolute, body1: ground, body2: crank, location: [0, 0, 1], axis: [0, 1, 0]}}
            - {{name: j_coupler, type: UNIVERSAL, body1: crank, body2: coupler, location: [1, 0, 1], axis1: [0, 1, 0], axis2: [0, 0, 1]}}
            - {{name: j_rocker, type: Revolute, body1: rocker, body2: ground, location: [2, 0, 0], axis: [0, 1, 0]}}
            - {{name: j_slide, type: PRISMATIC, body1: slider, body2: rocker, location: [2, 1, 0], axis: [0, 0, 1]}}
            - {{name: j_plane, type: POINT_PLANE, body1: slider, body2: ground, location: [2, 1, 0]}}
            - {{name: j_line, type: POINT_LINE, body1: slider, body2: ground, location: [2, 1, 0], axis: [0, 0, 1]}}
    """)
    model = load(path)
    types = {j.name: (j.type, j.parent, j.child) for j in model.joints}
    assert types["j_crank"] == ("revolute", "ground", "crank")
    assert types["j_rocker"] == ("revolute", "ground", "rocker")
    assert types["j_slide"] == ("prismatic", "rocker", "slider")
    assert types["j_coupler"] == ("universal", "crank", "coupler")
    assert [(c.name, c.type, c.link1, c.link2) for c in model.constraints] == [
        ("j_ball", "ball", "coupler", "rocker"),
        ("j_plane", "point_plane", "ground", "slider"), ("j_line", "point_line", "ground", "slider")]
    poses = world_poses(model)
    for name, T in file_bodies(path).items():
        np.testing.assert_allclose(poses[name], T, atol=POSE_TOL)
    line = model.constraints[2]
    np.testing.assert_allclose(poses["ground"][:3, :3] @ line.axis, [0, 0, 1], atol=1e-15)
    plane = model.constraints[1]       # Chrono's identity frame: normal along global z
    np.testing.assert_allclose(poses["ground"][:3, :3] @ plane.axis, [0, 0, 1], atol=1e-15)
    # moving a tree joint moves its child about/along the file's axis through the joint location
    q = model.initial_q()
    q[model.joint("j_crank").q_index] = 0.3
    crank = world_poses(model, q)["crank"]
    expected = np.eye(4)
    expected[:3, :3] = _axis_angle([0, 1, 0], 0.3)
    pivot = np.array([0, 0, 1.0])
    expected[:3, 3] = pivot - expected[:3, :3] @ pivot
    np.testing.assert_allclose(crank, expected @ file_bodies(path)["crank"], atol=1e-14)


def test_a_joint_made_a_loop_allows_exactly_its_motions(tmp_path):
    """Two joints of each kind in parallel between ground and a body: the second is a loop whose
    rows vanish along the first's motion (checked at a displaced q) and not across it."""
    for ctype, extra, motion in (
            ("REVOLUTE", "axis: [0, 1, 0]", ("rot", [0, 1, 0])),
            ("PRISMATIC", "axis: [1, 1, 0]", ("lin", [1, 1, 0])),
            ("UNIVERSAL", "axis1: [0, 1, 0], axis2: [1, 0, 0]", ("rot", [0, 1, 0]))):
        path = write(tmp_path, f"""
            chrono-version: 10.0
            model:
              bodies:
                - {{name: ground, location: [0, 0, 0], fixed: true}}
                - {{name: p, location: [0.3, 0.2, 0.1], orientation: [20, 10, 5], mass: 1, inertia: {{moments: [1, 1, 1]}}}}
              joints:
                - {{name: first, type: {ctype}, body1: p, body2: ground, location: [0.5, 0.5, 0.5], {extra}}}
                - {{name: second, type: {ctype}, body1: p, body2: ground, location: [0.5, 0.5, 0.5], {extra}}}
        """, name=f"{ctype}.yaml")
        model = load(path)
        assert model.joint("first").type == {"REVOLUTE": "revolute", "PRISMATIC": "prismatic", "UNIVERSAL": "universal"}[ctype]
        assert all(c.params["joint"] == "second" for c in model.constraints)
        j = model.joint("first")
        start = world_poses(model)

        def residual(c, poses):
            P1, P2 = poses[c.link1], poses[c.link2]
            pa, pb = P1[:3, :3] @ c.pos1 + P1[:3, 3], P2[:3, :3] @ c.pos2 + P2[:3, 3]
            ua = P1[:3, :3] @ c.axis
            # relative rotation against the start (hinge, orientation); axis on b kept parallel
            rel = (P1[:3, :3].T @ P2[:3, :3]) @ (start[c.link1][:3, :3].T @ start[c.link2][:3, :3]).T
            axis_b = P2[:3, :3] @ start[c.link2][:3, :3].T @ start[c.link1][:3, :3] @ c.axis
            return {"ball": np.linalg.norm(pa - pb),
                    "hinge": np.linalg.norm(pa - pb) + np.linalg.norm(np.cross(ua, axis_b)),
                    "point_plane": abs(ua @ (pb - pa)), "point_line": np.linalg.norm(np.cross(ua, pb - pa)),
                    "orientation": np.linalg.norm(rel - np.eye(3)),
                    "parallel": np.linalg.norm(np.cross(ua, axis_b))}[c.type]

        q = model.initial_q()
        q[j.q_index] = 0.4
        poses = world_poses(model, q)
        for c in model.constraints:
            assert residual(c, poses) < 1e-12, (ctype, c.name, c.type, residual(c, poses))
        # a motion the joint forbids (a small rotation about another axis) breaks some row
        poses = dict(start)
        T = poses["p"].copy()
        kick = _axis_angle(np.cross(motion[1], [0, 0, 1.0]) if motion[0] == "rot" else [0, 0, 1.0], 0.1)
        T[:3, :3] = kick @ T[:3, :3]
        poses["p"] = T
        assert max(residual(c, poses) for c in model.constraints) > 1e-3, ctype


def test_older_single_file_layout_and_strings(tmp_path):
    path = write(tmp_path, """
        chrono-version: 9.0
        simulation:
          time_step: "2e-3"
          contact_method: nsc
          end_time: -1
          enforce_realtime: "true"
          gravity: [0, 0, "-1.62"]
          integrator: {type: hht}
        model:
          angle_degrees: true
          bodies:
            - {name: ground, location: [0, 0, 0], fixed: true}
            - {name: p, location: [1, 0, 0], mass: 1, inertia: {moments: [1, 1, 1]}}
          joints:
            - {name: hinge, type: Revolute, body1: ground, body2: p, location: [0, 0, 0], axis: [0, 0, 1]}
          rsdas:
            - {name: rs, body1: ground, body2: p, location: [0, 0, 0], axis: [0, 0, 1], spring_coefficient: "10",
               damping_coefficient: 1, free_angle: 90, preload: 2}
          tsdas:
            - name: curve
              body1: ground
              body2: p
              point1: [3, 0, 0]
              point2: [1, 0, 0]
              free_length: 1.5
              spring_curve_data: [[-1, -100], [0, 0], [1, 300]]
              damping_curve_data: [[-1, -5], [1, 5]]
              minimum_length: 0.5
              maximum_length: 2.5
            - name: map
              body1: ground
              body2: p
              point1: [3, 0, 0]
              point2: [1, 0, 0]
              free_length: 7
              deformation: [0, 1, 2]
              map_data: [[-1, 1, 2, 3], [1, 4, 5, 6]]
          body_loads:
            - name: push
              type: torque
              body: p
              load: [0, 0, 1]
              modulation_function: {type: POLYNOMIAL, coefficients: [1, 0, 2]}
    """)
    model = load(path)
    s = model.settings
    assert (s["time_step"], s["end_time"], s["enforce_realtime"], s["contact_method"], s["integrator"]) == \
        (2e-3, None, True, "lcp", "HHT")
    np.testing.assert_allclose(model.gravity, [0, 0, -1.62])
    curve, mp, rs = model.forces
    assert (rs.stiffness, rs.damping, rs.preload) == (10, 1, 2)
    assert rs.free_angle == pytest.approx(math.pi / 2)
    np.testing.assert_allclose(world_poses(model)["p"] @ rs.frame2, world_poses(model)["ground"] @ rs.frame1, atol=1e-15)
    # curves: linear between the points, held constant outside (Chrono's ChFunctionInterp)
    assert curve.stiffness_curve(0.5) == pytest.approx(150) and curve.stiffness_curve(-3) == pytest.approx(-100)
    assert curve.stiffness_curve(9) == pytest.approx(300) and curve.damping_curve(0.5) == pytest.approx(2.5)
    assert (curve.free_length, curve.min_length, curve.max_length) == (1.5, 0.5, 2.5)
    # the map: rows per velocity, columns per deformation, deformation the full length
    assert mp.free_length == 0.0
    np.testing.assert_allclose(mp.map_forces, [[1, 2, 3], [4, 5, 6]])
    np.testing.assert_allclose(mp.map_velocities, [-1, 1])
    (push,) = model.loads
    assert push.kind == "torque" and push.modulation(2.0) == pytest.approx(9.0)


def test_functions(tmp_path):
    text = """
        chrono-version: 10.0
        model:
          angle_degrees: true
          bodies:
            - {name: ground, location: [0, 0, 0], fixed: true}
            - {name: p, location: [1, 0, 0], mass: 1, inertia: {moments: [1, 1, 1]}}
          motors:
            - {name: sine, type: rotation, body1: p, body2: ground, location: [0, 0, 0], axis: [0, 0, 1],
               actuation_type: position, actuation_function: {type: SINE, amplitude: 2, frequency: 0.5, phase: 90, shift: 0.25}}
            - {name: ramp, type: rotation, spindle: free, body1: p, body2: ground, location: [0, 0, 0], axis: [0, 0, 1],
               actuation_type: speed, actuation_function: {type: RAMP, slope: 3, intercept: 1}}
            - {name: const, type: LINEAR, guide: free, body1: p, body2: ground, location: [0, 0, 0], axis: [1, 0, 0],
               actuation_type: Force, actuation_function: {type: constant, value: 7, repeat: {start: 0, width: 1, shift: 0}}}
            - {name: rep, type: LINEAR, guide: free, body1: p, body2: ground, location: [0, 0, 0], axis: [1, 0, 0],
               actuation_type: position, actuation_function: {type: data, data: [[0, 0], [1, 2]], repeat: {start: 0, width: 1, shift: 0.5}}}
    """
    model = load(write(tmp_path, text))
    f = {m.name: m.function for m in model.motors}
    assert f["sine"](0.3) == pytest.approx(2 * math.sin(2 * math.pi * 0.5 * 0.3 + math.pi / 2) + 0.25)
    assert f["ramp"](2.0) == pytest.approx(7.0)
    assert f["const"](12.3) == pytest.approx(7.0)
    # repeat: f(start + mod(t + shift, width))
    assert f["rep"](0.25) == pytest.approx(1.5) and f["rep"](0.75) == pytest.approx(0.5) and f["rep"](3.75) == pytest.approx(0.5)
    assert isinstance(f["rep"], Function)
    # position motors whose function is not 0 at t = 0 are said (Chrono snaps the bodies onto it)
    assert sum("position motor 'sine' starts at f(0) = 2.25" in w for w in model.warnings) == 1
    assert not any("'ramp'" in w or "'const'" in w for w in model.warnings)


def test_own_model_files_load():
    """The small models under test/models/chrono_yaml (used by the dynamics tests) load."""
    for path in sorted(OWN.glob("*.yaml")):
        model = load(path)
        poses = world_poses(model)
        for name, T in file_bodies(path).items():
            np.testing.assert_allclose(poses[name], T, atol=POSE_TOL, err_msg=f"{path.name}: {name}")


def test_load_chrono_yaml_is_the_registered_loader(tmp_path):
    path = write(tmp_path, """
        chrono-version: 10.0
        model:
          bodies: [{name: b, location: [0, 0, 0], mass: 1, inertia: {moments: [1, 1, 1]}}]
    """, name="m.yml")
    assert [j.type for j in load(path).joints] == ["free"]
    assert [j.type for j in load_chrono_yaml(path).joints] == ["free"]
