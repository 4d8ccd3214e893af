"""simulation_interfaces' translation layer (ros/sim_services.py) against a Session directly:
simulation states, stepping, reset, entities and their states (checked against analytic
motion), teleporting, result codes for bad requests. Through real rclpy: test_sim_node_interfaces.py."""
import time

import numpy as np
import pytest
from capture_transport import Capture, ros_session

from mbsim_ros.model import Joint, Link, Model
from mbsim_ros.model.transforms import quat_to_matrix
from mbsim_ros.ros import sim_services as si
from mbsim_ros.run.config import load_config
from mbsim_ros.run import build_simulation

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
    sim = build_simulation([ball(), arm()], config)
    capture = Capture()
    session, bridge = ros_session(sim, capture, config)
    quits = []
    s = si.SimulationInterfaces(session, bridge, quit=lambda: quits.append(True))
    s.capture = capture
    session.runner.pause()
    session.runner.start()
    s.quits = quits
    yield s
    session.runner.stop()
    session.runner.join(timeout=10)
    session.close()


def test_features_list_what_this_simulation_does(services):
    codes, formats, _ = services.features()
    assert codes == [0, 1, 6, 7, 8, 9, 10, 11, 12, 14, 20, 21, 22, 23, 24, 25, 26, 31, 32, 33]
    assert 4 not in codes and 5 not in codes   # no ENTITY_TAGS (no entity has tags), no GetEntityBounds
    assert formats == ["chrono_yaml", "mjcf", "osim", "sdf", "urdf", "vrml"]


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
    code, _, (category, description, tags) = services.entity_info("arm")
    assert code == si.OK and category == si.CATEGORY_ROBOT and "1 moving joints" in description
    code, message, _ = services.entity_info("nope")
    assert code == si.NOT_FOUND and "ball, arm" in message


def test_an_entity_deleted_while_a_reader_looks_it_up_is_not_found(services, monkeypatch):
    """Spawn and delete run in other service threads: a name listed a moment ago may be gone
    when its model is looked up. The reader leaves it out or answers NOT_FOUND, not a KeyError."""
    sim = services.sim
    listed = sim.model_names
    monkeypatch.setattr(type(sim), "model_names", property(lambda self: listed + ["gone"]))
    assert services.entities("", [si.CATEGORY_ROBOT, si.CATEGORY_OBJECT])[:3] == (si.OK, "", ["ball", "arm"])
    assert services.entities()[2] == ["ball", "arm"]
    assert services.entity_info("gone")[0] == si.NOT_FOUND
    assert services.entity_state("gone")[0] == si.NOT_FOUND
    assert services.set_entity_state("gone", "world", [0, 0, 0], [0, 0, 0, 1], [0, 0, 0], [0, 0, 0])[0] == si.NOT_FOUND


def test_tags_filters_as_the_standard_reads_them(services):
    """No entity has tags: a filter without tags passes all (either mode), one with tags passes
    none (ANY needs one of the tags, ALL every one); the other filters still apply."""
    for mode in (si.TAGS_ANY, si.TAGS_ALL):
        assert services.entities(tags=[], tags_mode=mode) == (si.OK, "", ["ball", "arm"])
        assert services.entities("^a", tags=[], tags_mode=mode)[2] == ["arm"]
        assert services.entities(tags=["robot"], tags_mode=mode) == (si.OK, "", [])
    assert services.entities(tags=["x"], tags_mode=2)[0] == si.OPERATION_FAILED
    assert services.entities_states(tags=["robot"])[:3] == (si.OK, "", [])


def test_bounds_filters_test_the_root_origin(services):
    """ball's root origin put at (2, 0, 0.5); arm's root link sits at (0, 0, 1). Points exactly
    on a boundary are inside (the boundary is inclusive, to 1e-9 m)."""
    unit = [0, 0, 0, 1]
    assert services.set_entity_state("ball", "", [2.0, 0, 0.5], unit, [0] * 3, [0] * 3)[0] == si.OK
    E = services.entities
    assert E(bounds_type=si.BOUNDS_EMPTY)[2] == ["ball", "arm"]
    # box: corners in any order
    assert E(bounds_type=si.BOUNDS_BOX, bounds_points=[(1, -1, 0), (3, 1, 1)])[2] == ["ball"]
    assert E(bounds_type=si.BOUNDS_BOX, bounds_points=[(3, 1, 1), (-1, -1, 0)])[2] == ["ball", "arm"]
    assert E(bounds_type=si.BOUNDS_BOX, bounds_points=[(-1, -1, 0), (1, 1, 0.999)])[2] == []
    assert E(bounds_type=si.BOUNDS_BOX, bounds_points=[(-1, -1, 0), (2, 1, 0.5)])[2] == ["ball"]   # on the corner
    # sphere: center, radius in the second point's x
    assert E(bounds_type=si.BOUNDS_SPHERE, bounds_points=[(0, 0, 1), (0.5, 9, 9)])[2] == ["arm"]
    r = np.hypot(2.0, 0.5)                     # from (0, 0, 1) to the ball's origin
    assert E(bounds_type=si.BOUNDS_SPHERE, bounds_points=[(0, 0, 1), (r, 0, 0)])[2] == ["ball", "arm"]
    assert E(bounds_type=si.BOUNDS_SPHERE, bounds_points=[(0, 0, 1), (r - 1e-6, 0, 0)])[2] == ["arm"]
    # convex hull: a tetrahedron with a face through the ball's origin ...
    tet = [(0, 0, 0), (4, 0, 0), (0, 4, 0), (0, 0, 1)]
    assert E(bounds_type=si.BOUNDS_CONVEX_HULL, bounds_points=tet)[2] == ["ball", "arm"]   # both on faces
    # ... a cube given by its 8 corners plus an inner point (not a vertex of the hull)
    cube = [(x, y, z) for x in (1.5, 2.5) for y in (-0.5, 0.5) for z in (0, 1)] + [(2, 0, 0.5)]
    assert E(bounds_type=si.BOUNDS_CONVEX_HULL, bounds_points=cube)[2] == ["ball"]
    # an octahedron around the arm's root, the ball outside
    octa = [(0.5, 0, 1), (-0.5, 0, 1), (0, 0.5, 1), (0, -0.5, 1), (0, 0, 2), (0, 0, 0)]
    assert E(bounds_type=si.BOUNDS_CONVEX_HULL, bounds_points=octa)[2] == ["arm"]
    # a flat hull (a triangle in the plane z = 0.5 around the ball's origin): a polygon
    tri = [(1, -1, 0.5), (3, -1, 0.5), (2, 2, 0.5)]
    assert E(bounds_type=si.BOUNDS_CONVEX_HULL, bounds_points=tri)[2] == ["ball"]
    tri_above = [(x, y, 0.5 + 1e-6) for x, y, _ in tri]
    assert E(bounds_type=si.BOUNDS_CONVEX_HULL, bounds_points=tri_above)[2] == []
    tri_beside = [(x + 1.5, y, z) for x, y, z in tri]       # the ball's x = 2 is left of x = 2.5
    assert E(bounds_type=si.BOUNDS_CONVEX_HULL, bounds_points=tri_beside)[2] == []
    # filters combine; GetEntitiesStates gives the states of the ones that pass
    assert E("^b", bounds_type=si.BOUNDS_SPHERE, bounds_points=[(0, 0, 1), (0.5, 0, 0)])[2] == []
    code, _, names, states = services.entities_states(bounds_type=si.BOUNDS_BOX, bounds_points=[(1, -1, 0), (3, 1, 1)])
    assert (code, names) == (si.OK, ["ball"])
    np.testing.assert_allclose(states[0]["position"], [2, 0, 0.5], atol=1e-12)
    # bounds that define no region
    for kind, pts in ((si.BOUNDS_BOX, [(0, 0, 0)]), (si.BOUNDS_SPHERE, [(0, 0, 0), (-1, 0, 0)]),
                      (si.BOUNDS_CONVEX_HULL, [(0, 0, 0), (1, 0, 0), (2, 0, 0), (3, 0, 0)]),   # a line
                      (si.BOUNDS_CONVEX_HULL, [(0, 0, 0), (1, 1, 1)]),
                      (si.BOUNDS_EMPTY, [(0, 0, 0)]), (9, []), (si.BOUNDS_BOX, [(0, 0, 0), (np.nan, 1, 1)])):
        code, message, names = E(bounds_type=kind, bounds_points=pts)
        assert code == si.OPERATION_FAILED and names == [] and "bounds" in message


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


def test_get_state_in_another_entitys_frame(services):
    """The ball at rest in the world at distance d from the arm's hinge axis, seen from arm/link
    (yawed th = 0.3 rad, spinning at w = 2 rad/s about z, origin on the axis, not accelerating):
    at R_z(-th) (d cos phi, d sin phi, 0), turned by -th, circling at -w: velocity
    -w z x r_rel, angular velocity (0, 0, -w), centripetal acceleration -w^2 r_rel, no angular
    acceleration. Before any step every acceleration reads 0 (Simulation.link_acceleration),
    which is the analytic one of both here."""
    sim = services.sim
    th, w, d, phi = 0.3, 2.0, 1.5, 0.7
    i, j = sim.models[0].nv, sim.models[0].nq
    services._physics(lambda: (sim.q.__setitem__(j, th), sim.v.__setitem__(i, w)))
    unit = [0, 0, 0, 1]
    assert services.set_entity_state("ball", "", [d * np.cos(phi), d * np.sin(phi), 1.0], unit, [0] * 3, [0] * 3)[0] == si.OK
    for frame in ("arm/link",):
        code, _, st = services.entity_state("ball", frame)
        assert code == si.OK and st["frame"] == frame
        a = phi - th
        r_rel = d * np.array([np.cos(a), np.sin(a), 0.0])
        np.testing.assert_allclose(st["position"], r_rel, atol=1e-12)
        np.testing.assert_allclose(st["orientation"], [0, 0, -np.sin(th / 2), np.cos(th / 2)], atol=1e-12)
        np.testing.assert_allclose(st["linear"], w * d * np.array([np.sin(a), -np.cos(a), 0]), atol=1e-12)
        np.testing.assert_allclose(st["angular"], [0, 0, -w], atol=1e-12)
        np.testing.assert_allclose(st["linear_acceleration"], -w ** 2 * r_rel, atol=1e-12)
        np.testing.assert_allclose(st["angular_acceleration"], 0.0, atol=1e-12)
    # the arm's model frame ("arm": its root link base at (0, 0, 1), fixed): a plain translation
    code, _, st = services.entity_state("ball", "arm")
    np.testing.assert_allclose(st["position"], [d * np.cos(phi), d * np.sin(phi), 0.0], atol=1e-12)
    np.testing.assert_allclose(st["linear"], 0.0, atol=1e-12)
    # "" and "world" are the world; an unknown frame is NOT_FOUND
    assert services.entity_state("ball", "")[2]["frame"] == "world"
    assert services.entity_state("ball", "nowhere")[0] == si.NOT_FOUND


def test_set_then_get_in_a_moving_frame_round_trips(services):
    """SetEntityState in arm/link's frame (spinning) with a relative twist, then GetEntityState in
    the same frame, gives back what was set (both directions of the same transport theorem)."""
    sim = services.sim
    i, j = sim.models[0].nv, sim.models[0].nq
    services._physics(lambda: (sim.q.__setitem__(j, -1.1), sim.v.__setitem__(i, 3.0)))
    q = np.array([0.1, -0.2, 0.3, 0.9])
    q /= np.linalg.norm(q)
    p, v, w = [0.4, -0.3, 0.2], [0.5, 1.5, -0.25], [0.3, -0.2, 1.0]
    assert services.set_entity_state("ball", "arm/link", p, q, v, w)[0] == si.OK
    _, _, st = services.entity_state("ball", "arm/link")
    np.testing.assert_allclose(st["position"], p, atol=1e-12)
    np.testing.assert_allclose(st["orientation"], q, atol=1e-12)
    np.testing.assert_allclose(st["linear"], v, atol=1e-12)
    np.testing.assert_allclose(st["angular"], w, atol=1e-12)


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
    (tmp_path / "box.sdf").write_text("<sdf/>")          # SDFormat is read: an empty one is a parse error
    assert services.spawn("x", False, str(tmp_path / "box.sdf"), "", "", "", [0] * 3, unit)[0] == si.RESOURCE_PARSE_ERROR
    (tmp_path / "box.stl").write_text("solid box")       # a mesh is no model format
    assert services.spawn("x", False, str(tmp_path / "box.stl"), "", "", "", [0] * 3, unit)[0] == si.UNSUPPORTED_FORMAT
    assert services.spawn("x", False, "", "<robot name='x'><link name=", "", "", [0] * 3, unit)[0] == si.RESOURCE_PARSE_ERROR
    assert services.spawn("x", False, "", "", "", "", [0] * 3, unit)[0] == si.NO_RESOURCE
    assert services.spawn("x", False, "", BOX_URDF, "1ns", "", [0] * 3, unit)[0] == si.NAMESPACE_INVALID
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


# MuJoCo's 9.81 stated in the file: the running world's gravity (G) applies to a spawned model
ARM_MJCF = """<mujoco model="marm"><option gravity="0 0 -9.81"/><worldbody>
  <body name="upper"><freejoint name="float"/><geom type="sphere" size="0.05" mass="1"/>
    <body name="fore" pos="0.3 0 0"><joint name="elbow" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" mass="0.5"/></body></body>
</worldbody></mujoco>"""


def test_spawn_an_mjcf_model_as_a_urdf_one(services, tmp_path):
    """MJCF spawns from a resource string and from a file URI (a .xml, listed by spawnables) as
    URDF does: its bodies are links of the new entity, its joints join the joint_states, and it
    falls in the world's gravity, not the 9.81 its file states (a note says so): semi-implicit
    Euler's p_n = p0 + dt^2 g n (n + 1) / 2 for its free root (uniform gravity moves no joint)."""
    unit = [0, 0, 0, 1]
    notes = []
    services.session.log = notes.append
    assert "mjcf" in services.features()[1]
    code, message, name = services.spawn("marm", False, "", ARM_MJCF, "", "", [0.0, 1.0, 2.0], unit)
    assert (code, name) == (si.OK, "marm"), message
    assert any("gravity [0.0, 0.0, -9.81] of its file not used" in n for n in notes), notes
    assert services.entity_state("marm/fore")[0] == si.OK
    n = 100
    assert services.step(n)[0] == si.OK
    code, _, st = services.entity_state("marm")
    np.testing.assert_allclose(st["position"], [0, 1, 2 - DT ** 2 * G * n * (n + 1) / 2], atol=1e-9)
    np.testing.assert_allclose(services.entity_state("marm/fore")[2]["position"],
                               [0.3, 1, 2 - DT ** 2 * G * n * (n + 1) / 2], atol=1e-9)
    assert "elbow" in services.capture.got[services.bridge.ns + "/joint_states"][-1].name
    path = tmp_path / "marm.xml"
    path.write_text(ARM_MJCF)
    services.spawnable_dirs = [str(tmp_path)]
    assert ("file://" + str(path), "mjcf model") in services.spawnables()[2]
    code, message, name = services.spawn("", True, "file://" + str(path), "", "", "", [2.0, 0, 1.0], unit)
    assert code == si.OK and name not in ("marm", "") and name in services.entity_names(), message
    np.testing.assert_allclose(services.entity_state(name)[2]["position"], [2, 0, 1], atol=1e-12)


ARM_URDF = """<robot name="bot">
  <link name="base"><inertial><mass value="1"/><origin xyz="0 0 0"/>
    <inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="tip"><inertial><mass value="1"/><origin xyz="0.2 0 0"/>
    <inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="j1" type="revolute"><parent link="base"/><child link="tip"/><axis xyz="0 0 1"/>
    <limit lower="-3" upper="3" effort="10" velocity="10"/></joint>
</robot>"""


def imu_bot():
    """A free body with a hinge and an accelerometer and a gyro (separate topics) on its tip."""
    from mbsim_ros.model import Sensor
    m = Model("imu_bot", gravity=(0, 0, -G))
    m.add_link(Link("base", 1.0, [0, 0, 0], np.eye(3) * 0.01))
    m.add_joint(Joint("root", "free", None, "base"))
    m.add_link(Link("tip", 1.0, [0.2, 0, 0], np.eye(3) * 0.01))
    m.add_joint(Joint("j2", "revolute", "base", "tip", axis=(0, 0, 1)))
    m.sensors += [Sensor("acc", "accelerometer", "tip"), Sensor("gyro", "gyro", "tip")]
    return m.finalize()


def test_spawn_with_a_namespace_puts_its_topics_under_it(services):
    """entity_namespace: the spawned model's joint_states (its joints only), robot_description
    and sensor topics go under the namespace (the capture transport records every topic);
    its joints stay in the simulator's joint_states too. Invalid or taken namespaces are
    NAMESPACE_INVALID; after a delete the namespace's topics are gone."""
    unit = [0, 0, 0, 1]
    got = services.capture.got
    ns = services.bridge.ns
    for bad in ("2bots", "a//b", "a b", "bot/", ns, ns.strip("/")):
        code, message, _ = services.spawn("x", False, "", ARM_URDF, bad, "", [0] * 3, unit)
        assert code == si.NAMESPACE_INVALID and repr(bad) in message, (bad, message)
    code, message, name = services.spawn("bot", False, "", ARM_URDF, "robot2", "", [0, 0, 3], unit)
    assert (code, name) == (si.OK, "bot"), message
    code, message, _ = services.spawn("bot_b", False, "", ARM_URDF, "/robot2", "", [0, 0, 3], unit)
    assert code == si.NAMESPACE_INVALID and "in use" in message
    services.session.spawn(imu_bot(), name="imu_bot", pose=np.eye(4), namespace="/fleet/imu1")
    assert services.step(20)[0] == si.OK
    assert got["/robot2/robot_description"] and "<robot" in got["/robot2/robot_description"][-1].data
    assert list(got["/robot2/joint_states"][-1].name) == ["j1"]
    assert list(got["/fleet/imu1/joint_states"][-1].name) == ["j2"]
    assert {"j1", "j2", "hinge"} <= set(got[ns + "/joint_states"][-1].name)
    assert got["/fleet/imu1/acc"] and got["/fleet/imu1/gyro"]
    assert got["/fleet/imu1/robot_description"]
    assert not any(t.startswith(ns + "/bot") or t.startswith(ns + "/imu_bot") or t in (ns + "/acc", ns + "/gyro")
                   for t in got)
    assert services.delete("bot") == (si.OK, "")
    topics = {h.topic for h in services.bridge.pubs.values()}
    assert "/robot2/joint_states" not in topics and "/fleet/imu1/joint_states" in topics
    # the namespace is free again
    code, message, _ = services.spawn("bot", False, "", ARM_URDF, "robot2", "", [0, 0, 3], unit)
    assert code == si.OK, message


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
