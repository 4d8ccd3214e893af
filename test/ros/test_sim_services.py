"""simulation_interfaces' translation layer (ros/sim_services.py) against a Session directly:
simulation states, stepping, reset, entities and their states (checked against analytic
motion), teleporting, result codes for bad requests. Through real rclpy: test_sim_node_interfaces.py."""
import time

import numpy as np
import pytest
from capture_transport import Capture

from mbsim_ros.model import Joint, Link, Model
from mbsim_ros.model.transforms import quat_to_matrix
from mbsim_ros.ros import sim_services as si
from mbsim_ros.ros.config import load_config
from mbsim_ros.ros.session import Session, simulation

DT = 0.001
G = 9.80665


def ball(name="ball", gravity=(0, 0, -G)):
    """A free sphere-like body (isotropic inertia: its angular velocity stays constant)."""
    m = Model(name, gravity=gravity)
    m.add_link(Link("body", 2.0, [0, 0, 0], np.eye(3) * 0.1))
    m.add_joint(Joint("root", "free", None, "body"))
    return m.finalize()


def arm(name="arm"):
    """A hinge about z fixed to the world at (0, 0, 1), a 0.5 m link (gravity along the axis)."""
    m = Model(name, gravity=(0, 0, -G))
    m.add_link(Link("base", 1.0, [0, 0, 0], np.eye(3) * 0.01))
    m.add_joint(Joint("mount", "fixed", None, "base", origin=np.array(
        [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 1.0], [0, 0, 0, 1]], dtype=float)))
    m.add_link(Link("link", 1.0, [0.25, 0, 0], np.eye(3) * 0.01))
    m.add_joint(Joint("hinge", "revolute", "base", "link", axis=(0, 0, 1)))
    return m.finalize()


@pytest.fixture
def services():
    config = load_config(None, dict(contact="none", hold=0, real_time_factor=0, dt=DT))
    sim = simulation([ball(), arm()], config)
    session = Session(sim, Capture(), config)
    quits = []
    s = si.SimulationInterfaces(session, quit=lambda: quits.append(True))
    session.runner.pause()
    session.runner.start()
    s.quits = quits
    yield s
    session.runner.stop()
    session.runner.join(timeout=10)
    session.close()


def test_features_list_what_this_simulation_does(services):
    codes, formats, _ = services.features()
    assert codes == [0, 1, 8, 9, 10, 11, 12, 14, 20, 21, 22, 23, 24, 25, 26, 31, 32, 33]
    assert formats == ["chrono_yaml", "osim", "urdf", "vrml"]


def test_states_and_transitions(services):
    assert services.state() == si.PAUSED
    assert services.set_state(si.PAUSED)[0] == si.ALREADY_IN_TARGET_STATE
    assert services.set_state(si.PLAYING)[0] == si.OK
    assert services.state() == si.PLAYING
    assert services.step(1)[0] == si.OPERATION_FAILED          # stepping needs a paused simulation
    deadline = time.monotonic() + 30
    while services.sim.t == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert services.set_state(si.PAUSED)[0] == si.OK
    assert services.sim.t > 0
    assert services.set_state(si.STOPPED)[0] == si.OK
    assert services.state() == si.STOPPED and services.sim.t == 0.0
    assert services.set_state(si.PAUSED)[0] == si.INCORRECT_TRANSITION
    assert services.step(3)[0] == si.OK                        # stepping leaves STOPPED for PAUSED
    assert services.state() == si.PAUSED
    assert services.set_state(si.QUITTING)[0] == si.OK and services.quits == [True]
    assert services.set_state(7)[0] == si.FEATURE_UNSUPPORTED


def test_step_takes_exactly_n_steps_with_feedback(services):
    seen = []
    code, _ = services.step(250, feedback=lambda done, left: seen.append((done, left)))
    assert code == si.OK
    assert services.sim.t == pytest.approx(250 * DT, abs=1e-12)
    assert seen == [(k, 250 - k) for k in range(1, 251)]        # after each step
    assert services.step(0)[0] == si.OPERATION_FAILED
    calls = []
    code, message = services.step(100, cancelled=lambda: len(calls) >= 2 or calls.append(1), chunk=10)
    assert code == si.OPERATION_FAILED and "cancelled after 20 of 100" in message
    assert services.sim.t == pytest.approx(270 * DT, abs=1e-12)


def test_reset_scopes(services):
    services.step(50)
    assert services.reset(si.SCOPE_TIME)[0] == si.FEATURE_UNSUPPORTED
    assert services.reset(si.SCOPE_STATE)[0] == si.FEATURE_UNSUPPORTED
    assert services.sim.t > 0
    assert services.reset(si.SCOPE_TIME | si.SCOPE_STATE)[0] == si.OK
    assert services.sim.t == 0.0 and np.all(services.sim.v == 0.0)
    services.step(10)
    assert services.reset(si.SCOPE_DEFAULT)[0] == si.OK and services.sim.t == 0.0


def test_entities_with_filters_and_info(services):
    assert services.entities() == (si.OK, "", ["ball", "arm"])
    assert services.entities("^a")[2] == ["arm"]
    assert services.entities("", [si.CATEGORY_ROBOT])[2] == ["arm"]
    assert services.entities("", [si.CATEGORY_OBJECT])[2] == ["ball"]
    assert services.entities("(")[0] == si.OPERATION_FAILED
    assert services.entities(tags=["x"])[0] == si.FEATURE_UNSUPPORTED
    assert services.entities(bounds_type=3)[0] == si.FEATURE_UNSUPPORTED
    code, _, (category, description, tags) = services.entity_info("arm")
    assert code == si.OK and category == si.CATEGORY_ROBOT and "1 moving joints" in description
    code, message, _ = services.entity_info("nope")
    assert code == si.NOT_FOUND and "ball, arm" in message


def test_free_fall_state_matches_the_analytic_motion(services):
    """After SetEntityState (pose, twist), n steps of free fall: semi-implicit Euler gives
    v_n = v0 + n dt g and p_n = p0 + n dt v0 + dt^2 g n (n + 1) / 2 exactly (up to rounding);
    the orientation turns at the constant angular velocity (isotropic inertia)."""
    q0 = np.array([0.0, 0.0, np.sin(0.25), np.cos(0.25)])      # 0.5 rad about z
    v0, w0 = np.array([1.0, -0.5, 2.0]), np.array([0.0, 0.0, 0.8])
    code, _ = services.set_entity_state("ball", "world", [1.0, 2.0, 3.0], q0, v0, w0)
    assert code == si.OK
    code, _, st = services.entity_state("ball")
    assert code == si.OK and st["frame"] == "world"
    np.testing.assert_allclose(st["position"], [1, 2, 3], atol=1e-12)
    np.testing.assert_allclose(st["orientation"], q0, atol=1e-12)
    np.testing.assert_allclose(st["linear"], v0, atol=1e-12)
    np.testing.assert_allclose(st["angular"], w0, atol=1e-12)
    np.testing.assert_array_equal(st["linear_acceleration"], 0.0)   # no step since the state was set
    n = 200
    services.step(n)
    g = np.array([0, 0, -G])
    code, _, st = services.entity_state("ball")
    t = n * DT
    assert st["stamp"] == pytest.approx(t, abs=1e-12)
    np.testing.assert_allclose(st["linear"], v0 + t * g, atol=1e-9)            # rounding of 200 sums
    np.testing.assert_allclose(st["position"], [1, 2, 3] + t * v0 + DT ** 2 * g * n * (n + 1) / 2, atol=1e-9)
    np.testing.assert_allclose(st["angular"], w0, atol=1e-12)
    # the last step's (v_n - v_n-1) / dt of the body-frame velocity, turned to the world: exact
    # but for the turn within the step, |w|^2 |v_xy| dt / 2 = 3.6e-4 m/s^2 here
    np.testing.assert_allclose(st["linear_acceleration"], g, atol=5e-4)
    np.testing.assert_allclose(st["angular_acceleration"], 0.0, atol=1e-9)
    yaw = 0.5 + 0.8 * t
    np.testing.assert_allclose(quat_to_matrix(st["orientation"]),
                               [[np.cos(yaw), -np.sin(yaw), 0], [np.sin(yaw), np.cos(yaw), 0], [0, 0, 1]], atol=1e-9)


def test_link_state_of_a_spinning_arm(services):
    """arm/link at hinge angle th, rate w: origin at (0, 0, 1) (the hinge), rotated by th about z;
    the com at 0.25 m moves, the origin (on the axis) does not; angular velocity (0, 0, w)."""
    sim = services.sim
    i = services.sim.models[0].nv           # the arm's hinge follows the ball's 6 DOF
    j = services.sim.models[0].nq
    services._physics(lambda: (sim.q.__setitem__(j, 0.3), sim.v.__setitem__(i, 2.0)))
    code, _, st = services.entity_state("arm/link")
    assert code == si.OK
    np.testing.assert_allclose(st["position"], [0, 0, 1], atol=1e-12)
    np.testing.assert_allclose(st["orientation"], [0, 0, np.sin(0.15), np.cos(0.15)], atol=1e-12)
    np.testing.assert_allclose(st["angular"], [0, 0, 2.0], atol=1e-12)
    np.testing.assert_allclose(st["linear"], 0.0, atol=1e-12)
    code, _, st = services.entity_state("arm")                  # the model: its root link
    np.testing.assert_allclose(st["position"], [0, 0, 1], atol=1e-12)
    np.testing.assert_allclose(st["angular"], 0.0, atol=1e-12)
    assert services.entity_state("arm/nolink")[0] == si.NOT_FOUND


def test_set_state_in_another_entitys_frame(services):
    """A pose given in arm/link's frame (at (0, 0, 1), yawed 0.3 rad, spinning at 2 rad/s): the
    world pose composes, the world velocity adds the frame's w x r."""
    sim = services.sim
    i, j = sim.models[0].nv, sim.models[0].nq
    services._physics(lambda: (sim.q.__setitem__(j, 0.3), sim.v.__setitem__(i, 2.0)))
    code, _ = services.set_entity_state("ball", "arm/link", [1.0, 0, 0], [0, 0, 0, 1], [0, 0, 0], [0, 0, 0])
    assert code == si.OK
    _, _, st = services.entity_state("ball")
    np.testing.assert_allclose(st["position"], [np.cos(0.3), np.sin(0.3), 1.0], atol=1e-12)
    np.testing.assert_allclose(st["linear"], 2.0 * np.array([-np.sin(0.3), np.cos(0.3), 0]), atol=1e-12)
    np.testing.assert_allclose(st["angular"], [0, 0, 2.0], atol=1e-12)


def test_set_entity_state_refusals(services):
    unit = [0, 0, 0, 1]
    assert services.set_entity_state("nope", "", [0, 0, 0], unit, [0] * 3, [0] * 3)[0] == si.NOT_FOUND
    code, message = services.set_entity_state("ball", "", [0, 0, 0], [0, 0, 0, 0], [0] * 3, [0] * 3)
    assert code == si.SET_INVALID_POSE and "unit quaternion" in message
    assert services.set_entity_state("ball", "", [np.nan, 0, 0], unit, [0] * 3, [0] * 3)[0] == si.SET_INVALID_POSE
    assert services.set_entity_state("ball", "nowhere", [0, 0, 0], unit, [0] * 3, [0] * 3)[0] == si.NOT_FOUND
    assert services.set_entity_state("ball", "", [0, 0, 0], unit, [np.inf, 0, 0], [0] * 3)[0] == si.OPERATION_FAILED
    assert services.set_entity_state("ball/body", "", [0, 0, 0], unit, [0] * 3, [0] * 3)[0] == si.OPERATION_FAILED


BOX_URDF = """<robot name="box">
  <link name="base"><inertial><mass value="1"/><origin xyz="0 0 0"/>
    <inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>
</robot>"""


def test_spawn_read_teleport_delete(services, tmp_path):
    """A free box spawned from a resource string at a pose lands there (its root link), a second
    one from a file URI with allow_renaming gets a new name; name clash, bad URI, empty resource,
    bad pose and namespaces are refused with their codes; delete removes; reset removes the rest."""
    unit = [0, 0, 0, 1]
    yaw = [0, 0, np.sin(0.2), np.cos(0.2)]
    services.sim.models[0]                                       # the world before
    code, message, name = services.spawn("box1", False, "", BOX_URDF, "", "", [0.5, -1.0, 2.0], yaw)
    assert (code, name) == (si.OK, "box1"), message
    assert services.entities()[2] == ["ball", "arm", "box1"]
    code, _, st = services.entity_state("box1")
    np.testing.assert_allclose(st["position"], [0.5, -1.0, 2.0], atol=1e-12)
    np.testing.assert_allclose(st["orientation"], yaw, atol=1e-12)
    path = tmp_path / "box.urdf"
    path.write_text(BOX_URDF)
    code, _, name = services.spawn("box1", False, "file://" + str(path), "", "", "", [0, 0, 0], unit)
    assert code == si.NAME_NOT_UNIQUE
    code, message, name = services.spawn("box1", True, str(path), "", "", "", [0, 0, 1], unit)
    assert code == si.OK and name not in ("box1", "") and name in services.entity_names(), message
    code, message, name2 = services.spawn("", False, str(path), "", "", "ball", [0, 0, 1], unit)
    assert code == si.NAME_NOT_UNIQUE or (code == si.OK and name2 == "box")   # the file's own name
    assert services.spawn("x", False, str(tmp_path / "none.urdf"), "", "", "", [0] * 3, unit)[0] == si.RESOURCE_PARSE_ERROR
    assert services.spawn("x", False, "http://host/box.urdf", "", "", "", [0] * 3, unit)[0] == si.UNSUPPORTED_FORMAT
    (tmp_path / "box.sdf").write_text("<sdf/>")
    assert services.spawn("x", False, str(tmp_path / "box.sdf"), "", "", "", [0] * 3, unit)[0] == si.UNSUPPORTED_FORMAT
    assert services.spawn("x", False, "", "<robot name='x'><link name=", "", "", [0] * 3, unit)[0] == si.RESOURCE_PARSE_ERROR
    assert services.spawn("x", False, "", "", "", "", [0] * 3, unit)[0] == si.NO_RESOURCE
    assert services.spawn("x", False, "", BOX_URDF, "ns", "", [0] * 3, unit)[0] == si.NAMESPACE_INVALID
    assert services.spawn("a/b", False, "", BOX_URDF, "", "", [0] * 3, unit)[0] == si.NAME_INVALID
    assert services.spawn("x", False, "", BOX_URDF, "", "", [0] * 3, [0, 0, 0, 0])[0] == si.INVALID_POSE
    assert services.spawn("x", False, "", BOX_URDF, "", "nowhere", [0] * 3, unit)[0] == si.INVALID_POSE
    # teleport the spawned box; the ball keeps its state
    services.set_entity_state("ball", "", [3, 3, 3], unit, [0.1, 0, 0], [0, 0, 0])
    code, _ = services.set_entity_state("box1", "", [1, 1, 1], unit, [0, 0, 0], [0, 0, 0])
    assert code == si.OK
    np.testing.assert_allclose(services.entity_state("box1")[2]["position"], [1, 1, 1], atol=1e-12)
    np.testing.assert_allclose(services.entity_state("ball")[2]["position"], [3, 3, 3], atol=1e-12)
    services.step(10)
    assert services.delete("box1") == (si.OK, "")
    assert "box1" not in services.entity_names()
    assert services.delete("box1")[0] == si.NOT_FOUND
    ball = services.entity_state("ball")[2]
    np.testing.assert_allclose(ball["linear"][:2], [0.1, 0], atol=1e-12)   # kept through the delete
    assert services.reset(si.SCOPE_ALL)[0] == si.OK
    assert services.entity_names() == ["ball", "arm"] and services.sim.t == 0.0


def test_moving_a_fixed_base_model(services):
    """The arm (fixed to the world) moves rigidly with a pose, and refuses a twist."""
    unit = [0, 0, 0, 1]
    assert services.set_entity_state("arm", "", [2.0, 0, 1.0], unit, [0, 0, 0], [0, 0, 0])[0] == si.OK
    np.testing.assert_allclose(services.entity_state("arm")[2]["position"], [2, 0, 1], atol=1e-12)
    np.testing.assert_allclose(services.entity_state("arm/link")[2]["position"], [2, 0, 1], atol=1e-12)
    code, message = services.set_entity_state("arm", "", [0, 0, 1], unit, [1, 0, 0], [0, 0, 0])
    assert code == si.OPERATION_FAILED and "twist" in message


def test_spawnables_list_the_bundled_models(services):
    code, _, items = services.spawnables()
    assert code == si.OK
    uris = [u for u, _ in items]
    assert any(u.endswith("/SR1.wrl") for u in uris) and all(u.startswith("file://") for u in uris)


def test_a_bag_carries_simulation_interfaces_messages(tmp_path):
    """EntityState and SimulatorFeatures recorded by the bag transport are read back by mcap's own
    ROS 2 decoder (an independent reader of the definitions the bag embeds). (Service and action
    types are in the typestore for CDR, but rosbags writes no bag definition for types nested
    from action/: they never travel on the topics we record.)"""
    mcap_reader = pytest.importorskip("mcap_ros2.reader", reason="mcap-ros2-support (test extra) not installed")
    from mbsim_ros.ros import messages as msg
    from mbsim_ros.ros.bag import BagTransport
    from mbsim_ros.ros.qos import DEFAULT
    T = msg.TYPESTORE.types
    vec = T["geometry_msgs/msg/Vector3"]
    state = T["simulation_interfaces/msg/EntityState"](
        header=msg.header(1.5, "world"),
        pose=T["geometry_msgs/msg/Pose"](position=T["geometry_msgs/msg/Point"](x=1.0, y=2.0, z=3.0),
                                         orientation=T["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=1.0)),
        twist=T["geometry_msgs/msg/Twist"](linear=vec(x=0.5, y=0.0, z=0.0), angular=vec(x=0.0, y=0.0, z=0.25)),
        acceleration=T["geometry_msgs/msg/Accel"](linear=vec(x=0.0, y=0.0, z=-G), angular=vec(x=0.0, y=0.0, z=0.0)))
    features = T["simulation_interfaces/msg/SimulatorFeatures"](
        features=np.array([0, 10, 33], dtype=np.uint16), spawn_formats=["urdf"], custom_info="x")
    bag = tmp_path / "bag"
    with BagTransport(bag) as t:
        for topic, typename, value in (("/state", "simulation_interfaces/msg/EntityState", state),
                                       ("/features", "simulation_interfaces/msg/SimulatorFeatures", features)):
            p = t.advertise(topic, typename, DEFAULT)
            t.publish(p, bytes(msg.TYPESTORE.serialize_cdr(value, typename)), 1)
    got = {m.channel.topic: m.ros_msg for m in mcap_reader.read_ros2_messages(str(next(bag.glob("*.mcap"))))}
    s = got["/state"]
    assert (s.header.frame_id, s.pose.position.y, s.twist.angular.z, s.acceleration.linear.z) == ("world", 2.0, 0.25, -G)
    f = got["/features"]
    assert list(f.features) == [0, 10, 33] and list(f.spawn_formats) == ["urdf"] and f.custom_info == "x"
