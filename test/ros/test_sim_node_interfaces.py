"""simulation_interfaces on sim_node through a real ROS 2: the node runs in another process
(test_node.start_node) on a one-arm world, and a real rclpy client here calls every service and
the SimulateSteps action with the types built from our definitions (test/ros_interfaces), and
checks their effect: spawn a second robot at a pose, read its state, teleport it, delete it,
reset, step; result codes for bad requests; the std_srvs aliases; ros2_control's command
layout on the joint_commands topic.

Simulated time is read from the entity states' stamps (the node's clock); steps are exact."""
import time

import numpy as np
import pytest
from conftest import ROS_MISSING

if ROS_MISSING:
    pytest.skip(ROS_MISSING, allow_module_level=True)
from rclpy_probe import Output, Probe, stop_node  # noqa: E402
from test_node import STARTUP, start_node  # noqa: E402

si = pytest.importorskip("simulation_interfaces", reason="simulation_interfaces not built (test/ros_interfaces)")
from rclpy.action import ActionClient  # noqa: E402
from simulation_interfaces import msg as M  # noqa: E402
from simulation_interfaces import srv as S  # noqa: E402
from simulation_interfaces.action import SimulateSteps  # noqa: E402

NS = "/SR1"                   # start_node's namespace
SRV = NS + "/mbsim/"          # the node's own name under it: where simulation_interfaces live
DT = 0.002
ARM = """<robot name="arm">
  <link name="base"><inertial><mass value="1"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="upper"><inertial><origin xyz="0.25 0 0"/><mass value="1"/>
    <inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="shoulder" type="revolute"><parent link="base"/><child link="upper"/><axis xyz="0 0 1"/>
    <limit lower="-3" upper="3" effort="100" velocity="10"/></joint>
  <link name="lower"><inertial><origin xyz="0.2 0 0"/><mass value="0.5"/>
    <inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="elbow" type="revolute"><parent link="upper"/><child link="lower"/><origin xyz="0.5 0 0"/>
    <axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="100" velocity="10"/></joint>
</robot>"""
BOX = """<robot name="box"><link name="body"><inertial><mass value="2"/>
  <inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial></link></robot>"""


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    """(process, output, probe) with sim_node on the arm (hold 0, no gravity torque on the
    vertical hinges; joint_commands with command_interfaces: shoulder position, elbow velocity)."""
    tmp = tmp_path_factory.mktemp("sim_node_si")
    (tmp / "arm.urdf").write_text(ARM)
    config = (f"model: {tmp / 'arm.urdf'}\ndt: {DT}\nhold: 0.0\ncontact: none\nfloating_base: false\n"
              "pd_gains: {default: [20.0, 4.0]}\n"
              "joint_commands_topic: /robot_joint_commands\njoint_states_topic: /robot_joint_states\n"
              "command_interfaces: {shoulder: [position], elbow: [velocity]}\n")
    proc = start_node(config=config, tmp=tmp)
    out = Output(proc)
    probe = Probe("mbsim_si_probe")
    probe.watched = (proc, out)
    try:
        probe.wait("the simulation_interfaces services (a cold start compiles the kernels)",
                   lambda: (SRV + "get_simulator_features") in dict(probe.node.get_service_names_and_types()),
                   STARTUP, proc)
        yield proc, out, probe
    finally:
        probe.close()
        stop_node(proc, out)


def call(probe, srv, service, **fields):
    return probe.call(srv, SRV + service, srv.Request(**fields))


def sim_time(probe):
    st = call(probe, S.GetEntityState, "get_entity_state", entity="arm").state
    return st.header.stamp.sec + st.header.stamp.nanosec * 1e-9


def pose(probe, entity):
    r = call(probe, S.GetEntityState, "get_entity_state", entity=entity)
    assert r.result.result == M.Result.RESULT_OK, r.result.error_message
    p, o = r.state.pose.position, r.state.pose.orientation
    return np.array([p.x, p.y, p.z]), np.array([o.x, o.y, o.z, o.w]), r.state


def test_features_and_types_in_the_graph(node):
    proc, out, probe = node
    f = call(probe, S.GetSimulatorFeatures, "get_simulator_features").features
    F = M.SimulatorFeatures
    assert list(f.features) == sorted([F.SPAWNING, F.DELETING, F.ENTITY_BOUNDS_BOX, F.ENTITY_BOUNDS_CONVEX,
                                       F.ENTITY_CATEGORIES, F.SPAWNING_RESOURCE_STRING,
                                       F.ENTITY_STATE_GETTING, F.ENTITY_STATE_SETTING, F.ENTITY_INFO_GETTING,
                                       F.SPAWNABLES, F.SIMULATION_RESET, F.SIMULATION_RESET_TIME,
                                       F.SIMULATION_RESET_STATE, F.SIMULATION_RESET_SPAWNED,
                                       F.SIMULATION_STATE_GETTING, F.SIMULATION_STATE_SETTING,
                                       F.SIMULATION_STATE_PAUSE, F.STEP_SIMULATION_SINGLE,
                                       F.STEP_SIMULATION_MULTIPLE, F.STEP_SIMULATION_ACTION])
    assert "urdf" in f.spawn_formats
    services = dict(probe.node.get_service_names_and_types())
    assert services[SRV + "spawn_entity"] == ["simulation_interfaces/srv/SpawnEntity"]
    assert services[SRV + "simulate_steps/_action/send_goal"] == ["simulation_interfaces/action/SimulateSteps_SendGoal"]


def test_pause_step_and_the_action(node):
    proc, out, probe = node
    SS = M.SimulationState
    r = call(probe, S.SetSimulationState, "set_simulation_state", state=SS(state=SS.STATE_PAUSED))
    assert r.result.result == M.Result.RESULT_OK
    assert call(probe, S.GetSimulationState, "get_simulation_state").state.state == SS.STATE_PAUSED
    t0 = sim_time(probe)
    assert call(probe, S.StepSimulation, "step_simulation", steps=100).result.result == M.Result.RESULT_OK
    assert sim_time(probe) == pytest.approx(t0 + 100 * DT, abs=1e-9)
    # the action: feedback after each step, then the result. The client lives on its own node,
    # spun by this thread only (a client used from another thread than its executor's can miss
    # the goal response: rclpy registers the request after sending it)
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    context = rclpy.Context()
    rclpy.init(context=context)
    client_node = rclpy.create_node("mbsim_si_action_client", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(client_node)

    def until(future, what, timeout=60.0):
        deadline = time.monotonic() + timeout
        while not future.done():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            executor.spin_once(timeout_sec=0.05)
        return future.result()
    try:
        client = ActionClient(client_node, SimulateSteps, SRV + "simulate_steps")
        assert client.wait_for_server(timeout_sec=30)
        feedback = []
        handle = until(client.send_goal_async(SimulateSteps.Goal(steps=50), feedback_callback=lambda f: feedback.append(
            (f.feedback.completed_steps, f.feedback.remaining_steps))), "the goal accepted")
        assert handle.accepted
        result = until(handle.get_result_async(), "the action's result")
        assert result.result.result.result == M.Result.RESULT_OK
        assert result.status == 4                                         # GoalStatus.STATUS_SUCCEEDED
        assert sim_time(probe) == pytest.approx(t0 + 150 * DT, abs=1e-9)
        # feedback after each step; a client may miss some (the feedback topic keeps the last 10)
        # and the result can overtake the last ones
        assert feedback and all(c + r == 50 and 1 <= c <= 50 for c, r in feedback)
        assert [c for c, _ in feedback] == sorted({c for c, _ in feedback})
        # cancel a long goal
        handle = until(client.send_goal_async(SimulateSteps.Goal(steps=10_000_000)), "the goal accepted")
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.05)
        until(handle.cancel_goal_async(), "the cancel answer")
        result = until(handle.get_result_async(), "the cancelled goal's result")
        assert result.status == 5                                         # GoalStatus.STATUS_CANCELED
        assert "cancelled after" in result.result.result.error_message
        assert sim_time(probe) < t0 + 150 * DT + 10_000_000 * DT
        client.destroy()
    finally:
        executor.shutdown()
        client_node.destroy_node()
        rclpy.shutdown(context=context)
    # stepping while playing is refused
    call(probe, S.SetSimulationState, "set_simulation_state", state=SS(state=SS.STATE_PLAYING))
    assert call(probe, S.StepSimulation, "step_simulation", steps=1).result.result == M.Result.RESULT_OPERATION_FAILED
    call(probe, S.SetSimulationState, "set_simulation_state", state=SS(state=SS.STATE_PAUSED))


def test_spawn_read_teleport_delete_reset(node):
    from geometry_msgs.msg import Point, Pose, PoseStamped, Quaternion, Vector3
    proc, out, probe = node
    SS = M.SimulationState
    call(probe, S.SetSimulationState, "set_simulation_state", state=SS(state=SS.STATE_PAUSED))
    yaw = Quaternion(x=0.0, y=0.0, z=float(np.sin(0.3)), w=float(np.cos(0.3)))
    at = PoseStamped(pose=Pose(position=Point(x=1.0, y=2.0, z=3.0), orientation=yaw))
    r = call(probe, S.SpawnEntity, "spawn_entity", name="box", resource_string=BOX, initial_pose=at)
    assert r.result.result == M.Result.RESULT_OK and r.entity_name == "box", r.result.error_message
    assert list(call(probe, S.GetEntities, "get_entities").entities) == ["arm", "box"]
    robots = M.EntityFilters(categories=[M.EntityCategory(category=M.EntityCategory.CATEGORY_ROBOT)])
    assert list(call(probe, S.GetEntities, "get_entities", filters=robots).entities) == ["arm"]
    # a sphere of radius 0.1 around the box's origin; a tags filter with tags (no entity has any)
    near = M.EntityFilters(bounds=M.Bounds(type=M.Bounds.TYPE_SPHERE, points=[
        Vector3(x=1.0, y=2.0, z=3.0), Vector3(x=0.1, y=0.0, z=0.0)]))
    assert list(call(probe, S.GetEntities, "get_entities", filters=near).entities) == ["box"]
    tagged = M.EntityFilters(tags=M.TagsFilter(tags=["robot"], filter_mode=M.TagsFilter.FILTER_MODE_ALL))
    r = call(probe, S.GetEntities, "get_entities", filters=tagged)
    assert r.result.result == M.Result.RESULT_OK and list(r.entities) == []
    p, q, _ = pose(probe, "box")
    np.testing.assert_allclose(p, [1, 2, 3], atol=1e-12)
    np.testing.assert_allclose(q, [0, 0, np.sin(0.3), np.cos(0.3)], atol=1e-12)
    # the spawned robot publishes its description like one loaded at start
    assert NS + "/box/robot_description" in dict(probe.node.get_topic_names_and_types())
    # teleport: pose and twist, read back
    state = M.EntityState()
    state.pose.position = Point(x=0.0, y=0.0, z=5.0)
    state.pose.orientation.w = 1.0
    state.twist.linear.x = 0.5
    assert call(probe, S.SetEntityState, "set_entity_state", entity="box", state=state).result.result == M.Result.RESULT_OK
    p, q, st = pose(probe, "box")
    np.testing.assert_allclose(p, [0, 0, 5], atol=1e-12)
    assert st.twist.linear.x == pytest.approx(0.5, abs=1e-12)
    # 100 steps of free fall with the twist: x moves 0.5 m/s * 0.2 s exactly
    call(probe, S.StepSimulation, "step_simulation", steps=100)
    p, _, st = pose(probe, "box")
    assert p[0] == pytest.approx(0.1, abs=1e-9) and st.twist.linear.z == pytest.approx(-9.80665 * 0.2, abs=1e-9)
    # bad requests
    assert call(probe, S.GetEntityState, "get_entity_state", entity="nope").result.result == M.Result.RESULT_NOT_FOUND
    assert call(probe, S.SpawnEntity, "spawn_entity", name="box", resource_string=BOX).result.result == \
        S.SpawnEntity.Response.NAME_NOT_UNIQUE
    r = call(probe, S.SpawnEntity, "spawn_entity", name="box", allow_renaming=True, resource_string=BOX)
    assert r.result.result == M.Result.RESULT_OK and r.entity_name not in ("box", "")
    assert call(probe, S.SpawnEntity, "spawn_entity", uri="file:///no/such/robot.urdf").result.result == \
        S.SpawnEntity.Response.RESOURCE_PARSE_ERROR
    # entity_namespace: the spawned model's description under it
    r = call(probe, S.SpawnEntity, "spawn_entity", name="box_ns", resource_string=BOX, entity_namespace="fleet/b1")
    assert r.result.result == M.Result.RESULT_OK, r.result.error_message
    probe.wait("/fleet/b1/robot_description", lambda: "/fleet/b1/robot_description" in
               dict(probe.node.get_topic_names_and_types()), 30)
    assert call(probe, S.SpawnEntity, "spawn_entity", name="x", resource_string=BOX,
                entity_namespace="9bad").result.result == S.SpawnEntity.Response.NAMESPACE_INVALID
    assert call(probe, S.DeleteEntity, "delete_entity", entity="nope").result.result == M.Result.RESULT_NOT_FOUND
    # delete one, reset removes the other and the time
    assert call(probe, S.DeleteEntity, "delete_entity", entity="box").result.result == M.Result.RESULT_OK
    assert "box" not in call(probe, S.GetEntities, "get_entities").entities
    assert call(probe, S.ResetSimulation, "reset_simulation").result.result == M.Result.RESULT_OK
    assert list(call(probe, S.GetEntities, "get_entities").entities) == ["arm"]
    assert sim_time(probe) == 0.0


def test_a_second_robot_from_a_file_uri_gets_its_joint_states(node, tmp_path):
    """The arm's own URDF spawned again as "arm2" at (0, 3, 0): its root link is there, and
    /robot_joint_states (the configured state topic) carries its two joints besides the first
    arm's (names the world qualifies where they clash)."""
    from geometry_msgs.msg import Point, Pose, PoseStamped
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import JointState
    proc, out, probe = node
    SS = M.SimulationState
    call(probe, S.SetSimulationState, "set_simulation_state", state=SS(state=SS.STATE_PAUSED))
    (tmp_path / "arm.urdf").write_text(ARM)
    at = PoseStamped(pose=Pose(position=Point(x=0.0, y=3.0, z=0.0)))
    at.pose.orientation.w = 1.0
    r = call(probe, S.SpawnEntity, "spawn_entity", name="arm2", uri="file://" + str(tmp_path / "arm.urdf"),
             initial_pose=at)
    assert r.result.result == M.Result.RESULT_OK and r.entity_name == "arm2", r.result.error_message
    p, _, _ = pose(probe, "arm2")
    np.testing.assert_allclose(p, [0, 3, 0], atol=1e-12)
    got = []
    sub = probe.node.create_subscription(JointState, "/robot_joint_states", got.append, qos_profile_sensor_data)
    try:
        # matched before stepping: the messages of a paused world's few steps are not sent again
        probe.wait("the joint state publisher", lambda: sub.get_publisher_count() > 0, 30)
        call(probe, S.StepSimulation, "step_simulation", steps=20)
        probe.wait("joint states with arm2", lambda: got and len(got[-1].name) == 4, 30)
        names = list(got[-1].name)
        assert len(set(names)) == 4 and sum("shoulder" in n for n in names) == 2 and sum("elbow" in n for n in names) == 2
    finally:        # the node is shared by this module's tests: leave it with one arm
        probe.node.destroy_subscription(sub)
        assert call(probe, S.DeleteEntity, "delete_entity", entity="arm2").result.result == M.Result.RESULT_OK


def test_std_srvs_aliases(node):
    from std_srvs.srv import Trigger
    proc, out, probe = node
    t0 = sim_time(probe)
    r = probe.call(Trigger, NS + "/step", Trigger.Request())
    assert r.success and sim_time(probe) == pytest.approx(t0 + DT, abs=1e-9)


def test_ros2_control_command_layout_over_rclpy(node):
    """joint_state_topic_hardware_interface's message on the configured command topic: every
    joint named, one position (shoulder) and one velocity (elbow); the state topic carries both."""
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import JointState
    proc, out, probe = node
    SS = M.SimulationState
    call(probe, S.SetSimulationState, "set_simulation_state", state=SS(state=SS.STATE_PAUSED))
    got = []
    sub = probe.node.create_subscription(JointState, "/robot_joint_states", got.append, qos_profile_sensor_data)
    pub = probe.node.create_publisher(JointState, "/robot_joint_commands", 1)
    probe.wait("the node's command subscription", lambda: pub.get_subscription_count() > 0, 30)
    probe.wait("the joint state publisher", lambda: sub.get_publisher_count() > 0, 30)
    pub.publish(JointState(name=["shoulder", "elbow"], position=[0.3], velocity=[0.5]))
    time.sleep(1.0)                         # delivered while paused: applied between the steps below
    call(probe, S.StepSimulation, "step_simulation", steps=2000)      # 4 s
    t_end = sim_time(probe)
    probe.wait("a joint state after the steps", lambda: got and abs(
        got[-1].header.stamp.sec + got[-1].header.stamp.nanosec * 1e-9 - t_end) < 0.05, 30)
    last = got[-1]
    assert list(last.name) == ["shoulder", "elbow"]
    assert last.position[0] == pytest.approx(0.3, abs=2e-3)          # the PD has settled (4 s, ~8 time constants)
    assert last.velocity[1] == pytest.approx(0.5, abs=2e-2)
    probe.node.destroy_publisher(pub)


def test_quitting_ends_the_node_with_status_0(node):
    """The last test of the module: STATE_QUITTING answers OK, then the node stops cleanly."""
    proc, out, probe = node
    SS = M.SimulationState
    r = call(probe, S.SetSimulationState, "set_simulation_state", state=SS(state=SS.STATE_QUITTING))
    assert r.result.result == M.Result.RESULT_OK
    assert proc.wait(timeout=60) == 0, out.text[-3000:]
    assert "stopped by set_simulation_state (quitting)" in out.text
