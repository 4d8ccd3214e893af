"""The node's services under misuse, on a real ROS 2: sim_node runs in another process on a
one-arm world (test_sim_node_interfaces' arm), and clients on a real rclpy node here call the
simulation_interfaces and std_srvs services from several threads at once, in a loop, with
garbage fields (NaN poses, empty, unknown and huge names, invalid enums, hostile filters) while
other threads spawn and delete copies of the arm. Every call is answered (within 30 s) with a
result code its service defines for that garbage, the node stays up, and afterwards the world is
whole: get_entities lists what the spawns and deletes left, and once the extra copies are
deleted /robot_joint_states and /tf carry exactly the arm's joints and links again.

Seeded (the calls each thread makes are the same every run; their interleaving is not)."""
import random
import threading
import time

import pytest
from conftest import ROS_MISSING

if ROS_MISSING:
    pytest.skip(ROS_MISSING, allow_module_level=True)
from rclpy_probe import Output, Probe, stop_node  # noqa: E402
from test_node import STARTUP, start_node  # noqa: E402
from test_sim_node_interfaces import ARM, DT, SRV  # noqa: E402

pytest.importorskip("simulation_interfaces", reason="simulation_interfaces not built (test/ros_interfaces)")
from simulation_interfaces import msg as M  # noqa: E402
from simulation_interfaces import srv as S  # noqa: E402

NAN = float("nan")
HUGE = "x" * 200_000                # a 200 kB name: no entity, no topic, no frame
SECONDS = 8.0                       # of hammering
ANSWER = 30.0                       # s a call may take to be answered on a loaded 2-core machine

R = M.Result
OK, NOT_FOUND, FAILED, UNSUPPORTED = R.RESULT_OK, R.RESULT_NOT_FOUND, R.RESULT_OPERATION_FAILED, R.RESULT_FEATURE_UNSUPPORTED
SP = S.SpawnEntity.Response


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sim_node_misuse")
    (tmp / "arm.urdf").write_text(ARM)
    config = (f"model: {tmp / 'arm.urdf'}\ndt: {DT}\nhold: 0.0\ncontact: none\nfloating_base: false\n"
              "joint_states_topic: /robot_joint_states\n")
    proc = start_node(config=config, tmp=tmp)
    out = Output(proc)
    probe = Probe("mbsim_misuse_probe")
    probe.watched = (proc, out)
    try:
        probe.wait("the simulation_interfaces services (a cold start compiles the kernels)",
                   lambda: (SRV + "get_simulator_features") in dict(probe.node.get_service_names_and_types()),
                   STARTUP, proc)
        yield proc, out, probe, tmp
    finally:
        probe.close()
        stop_node(proc, out)


def pose(x=0.0, y=0.0, z=0.0, qx=0.0, qy=0.0, qz=0.0, qw=1.0):
    from geometry_msgs.msg import Point, Pose, PoseStamped, Quaternion
    return PoseStamped(pose=Pose(position=Point(x=x, y=y, z=z), orientation=Quaternion(x=qx, y=qy, z=qz, w=qw)))


def state(**kw):
    s = M.EntityState()
    s.pose = pose(**kw).pose
    return s


def filters(pattern="", categories=(), tags=(), mode=0, bounds_type=0, points=()):
    from geometry_msgs.msg import Vector3
    return M.EntityFilters(filter=pattern, categories=[M.EntityCategory(category=c) for c in categories],
                           tags=M.TagsFilter(tags=list(tags), filter_mode=mode),
                           bounds=M.Bounds(type=bounds_type, points=[Vector3(x=x, y=y, z=z) for x, y, z in points]))


def garbage(arm_uri):
    """(service, type, request fields, the result codes allowed) of the hostile calls."""
    many = [(random.Random(k).uniform(-1, 1), random.Random(k + 1).uniform(-1, 1), random.Random(k + 2).uniform(-1, 1))
            for k in range(400)]
    GE = S.GetEntities
    return [
        ("get_entity_state", S.GetEntityState, dict(entity=""), {NOT_FOUND}),
        ("get_entity_state", S.GetEntityState, dict(entity=HUGE), {NOT_FOUND}),
        ("get_entity_state", S.GetEntityState, dict(entity="arm/no_such_link"), {NOT_FOUND}),
        ("get_entity_info", S.GetEntityInfo, dict(entity=HUGE), {NOT_FOUND}),
        ("set_entity_state", S.SetEntityState, dict(entity="arm", state=state(x=NAN)), {S.SetEntityState.Response.INVALID_POSE}),
        ("set_entity_state", S.SetEntityState, dict(entity="arm", state=state(qw=0.0)), {S.SetEntityState.Response.INVALID_POSE}),
        ("set_entity_state", S.SetEntityState, dict(entity=HUGE, state=state()), {NOT_FOUND}),
        ("delete_entity", S.DeleteEntity, dict(entity=""), {NOT_FOUND}),
        ("delete_entity", S.DeleteEntity, dict(entity=HUGE), {NOT_FOUND}),
        ("delete_entity", S.DeleteEntity, dict(entity="arm/base"), {NOT_FOUND}),
        ("spawn_entity", S.SpawnEntity, dict(name="nan", uri=arm_uri, initial_pose=pose(z=NAN)), {SP.INVALID_POSE}),
        ("spawn_entity", S.SpawnEntity, dict(name="inf", uri=arm_uri, initial_pose=pose(qw=float("inf"))), {SP.INVALID_POSE}),
        ("spawn_entity", S.SpawnEntity, dict(name="empty"), {SP.NO_RESOURCE}),
        ("spawn_entity", S.SpawnEntity, dict(name="big", resource_string=HUGE), {SP.RESOURCE_PARSE_ERROR, SP.UNSUPPORTED_FORMAT}),
        ("spawn_entity", S.SpawnEntity, dict(name="junk", resource_string="<robot name='r'><link"),
         {SP.RESOURCE_PARSE_ERROR}),
        ("spawn_entity", S.SpawnEntity, dict(name="nofile", uri=HUGE), {SP.RESOURCE_PARSE_ERROR}),
        ("spawn_entity", S.SpawnEntity, dict(name="ftp", uri="ftp://host/robot.urdf"), {SP.UNSUPPORTED_FORMAT}),
        # names that would make no topic (NS/<name>/robot_description) or frame
        ("spawn_entity", S.SpawnEntity, dict(name="a b", uri=arm_uri), {SP.NAME_INVALID}),
        ("spawn_entity", S.SpawnEntity, dict(name="9lives", uri=arm_uri), {SP.NAME_INVALID}),
        ("spawn_entity", S.SpawnEntity, dict(name="a/b", uri=arm_uri), {SP.NAME_INVALID}),
        ("spawn_entity", S.SpawnEntity, dict(name="arm-2", uri=arm_uri), {SP.NAME_INVALID}),
        ("spawn_entity", S.SpawnEntity, dict(name=HUGE, uri=arm_uri), {SP.NAME_INVALID}),
        ("spawn_entity", S.SpawnEntity, dict(name="nsbig", uri=arm_uri, entity_namespace=HUGE), {SP.NAMESPACE_INVALID}),
        ("spawn_entity", S.SpawnEntity, dict(name="ns9", uri=arm_uri, entity_namespace="9/x"), {SP.NAMESPACE_INVALID}),
        ("set_simulation_state", S.SetSimulationState, dict(state=M.SimulationState(state=77)), {UNSUPPORTED}),
        ("reset_simulation", S.ResetSimulation, dict(scope=8), {UNSUPPORTED}),
        ("reset_simulation", S.ResetSimulation, dict(scope=1), {UNSUPPORTED}),
        ("step_simulation", S.StepSimulation, dict(steps=0), {FAILED}),
        ("get_entities", GE, dict(filters=filters(pattern="(")), {FAILED}),
        ("get_entities", GE, dict(filters=filters(pattern=HUGE)), {OK}),
        ("get_entities", GE, dict(filters=filters(categories=[200])), {OK}),
        ("get_entities", GE, dict(filters=filters(mode=9)), {FAILED}),
        ("get_entities", GE, dict(filters=filters(bounds_type=9, points=[(0, 0, 0)])), {FAILED}),
        ("get_entities", GE, dict(filters=filters(bounds_type=1, points=[(NAN, 0, 0), (1, 1, 1)])), {FAILED}),
        ("get_entities", GE, dict(filters=filters(bounds_type=3, points=[(0, 0, 0), (-1, 0, 0)])), {FAILED}),
        ("get_entities", GE, dict(filters=filters(bounds_type=2, points=[(0, 0, 0), (1, 1, 1), (2, 2, 2)])), {FAILED}),
        # a hull of 400 points: answered (not an hour of brute force), the arm's origin inside
        ("get_entities", GE, dict(filters=filters(bounds_type=2, points=many)), {OK}),
        ("get_entities_states", S.GetEntitiesStates, dict(filters=filters(bounds_type=2, points=many)), {OK}),
        ("get_entities_states", S.GetEntitiesStates, dict(filters=filters(pattern="[")), {FAILED}),
    ]


# valid calls whose answer depends on the moment (playing or paused, what exists): any code the
# service defines for them, but an answer
LEGAL = [
    ("get_simulation_state", S.GetSimulationState, {}, {OK}),
    ("set_simulation_state", S.SetSimulationState, dict(state=M.SimulationState(state=M.SimulationState.STATE_PAUSED)),
     {OK, S.SetSimulationState.Response.ALREADY_IN_TARGET_STATE, S.SetSimulationState.Response.INCORRECT_TRANSITION}),
    ("set_simulation_state", S.SetSimulationState, dict(state=M.SimulationState(state=M.SimulationState.STATE_PLAYING)),
     {OK, S.SetSimulationState.Response.ALREADY_IN_TARGET_STATE}),
    ("set_simulation_state", S.SetSimulationState, dict(state=M.SimulationState(state=M.SimulationState.STATE_STOPPED)),
     {OK, S.SetSimulationState.Response.ALREADY_IN_TARGET_STATE}),
    ("step_simulation", S.StepSimulation, dict(steps=5), {OK, FAILED}),
    ("reset_simulation", S.ResetSimulation, dict(scope=3), {OK}),
    ("get_entities", S.GetEntities, {}, {OK}),
    ("get_entities_states", S.GetEntitiesStates, {}, {OK}),
    ("get_entity_state", S.GetEntityState, dict(entity="arm"), {OK}),
]


def answer(probe, client, request):
    """The response, or None when none came within ANSWER s."""
    assert client.wait_for_service(timeout_sec=ANSWER)
    future = client.call_async(request)
    deadline = time.monotonic() + ANSWER
    while not future.done() and time.monotonic() < deadline:
        time.sleep(0.005)
    return future.result() if future.done() else None


def code_of(response):
    if hasattr(response, "result") and hasattr(response.result, "result"):
        return response.result.result
    return "success" if response.success else "refused"


def test_concurrent_garbage_during_spawn_and_delete(node):
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import JointState
    from std_srvs.srv import SetBool, Trigger
    from tf2_msgs.msg import TFMessage
    proc, out, probe, tmp = node
    arm_uri = "file://" + str(tmp / "arm.urdf")
    bad = []                         # (what, why) of every wrong answer
    calls = {"n": 0}
    lock = threading.Lock()
    stop = time.monotonic() + SECONDS

    def check(what, response, allowed):
        with lock:
            calls["n"] += 1
            if response is None:
                bad.append((what, f"no answer within {ANSWER:g} s"))
            elif code_of(response) not in allowed:
                said = getattr(getattr(response, "result", None), "error_message", None)
                bad.append((what, f"{code_of(response)} not in {sorted(map(str, allowed))}: "
                                  f"{(getattr(response, 'message', '') if said is None else said)[:200]}"))

    def hammer(seed, menu):
        rng = random.Random(seed)
        clients = {}
        while time.monotonic() < stop:
            name, type_, fields, allowed = rng.choice(menu)
            if name not in clients:
                clients[name] = probe.node.create_client(type_, (SRV + name) if not name.startswith("/") else name)
            check(f"{name}({', '.join(f'{k}={str(v)[:40]}' for k, v in fields.items())})",
                  answer(probe, clients[name], type_.Request(**fields)), allowed)

    def spawn_delete(seed):
        """Spawn arm copies (renamed) and delete them, also the other thread's."""
        rng = random.Random(seed)
        spawn = probe.node.create_client(S.SpawnEntity, SRV + "spawn_entity")
        delete = probe.node.create_client(S.DeleteEntity, SRV + "delete_entity")
        entities = probe.node.create_client(S.GetEntities, SRV + "get_entities")
        while time.monotonic() < stop:
            r = answer(probe, spawn, S.SpawnEntity.Request(name="copy", allow_renaming=True, uri=arm_uri,
                                                           initial_pose=pose(y=rng.uniform(1, 5))))
            check("spawn_entity(copy)", r, {OK})
            r = answer(probe, entities, S.GetEntities.Request())
            check("get_entities", r, {OK})
            names = [n for n in (r.entities if r is not None else []) if n != "arm"]
            if names:
                r = answer(probe, delete, S.DeleteEntity.Request(entity=rng.choice(names)))
                check("delete_entity(a copy)", r, {OK, NOT_FOUND})     # the other thread may have taken it

    # pause is refused while another thread has set STOPPED (simulation_interfaces: stopped ->
    # paused is an incorrect transition; play or step first)
    std = [("/SR1/pause", SetBool, dict(data=True), {"success", "refused"}),
           ("/SR1/pause", SetBool, dict(data=False), {"success"}),
           ("/SR1/step", Trigger, {}, {"success", "refused"}),
           ("/SR1/reset", Trigger, {}, {"success"})]
    menu = garbage(arm_uri)
    threads = [threading.Thread(target=hammer, args=(k, menu + LEGAL + std)) for k in range(4)]
    threads += [threading.Thread(target=spawn_delete, args=(10 + k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(SECONDS + 4 * ANSWER)
    assert proc.poll() is None, f"sim_node died: {out.text[-3000:]}"
    assert not bad, f"{len(bad)} of {calls['n']} calls answered wrongly: {sorted(set(bad))}"
    assert calls["n"] > 50
    assert "Traceback" not in out.text, out.text[-3000:]

    # the world is whole: what get_entities lists has a state; delete the copies, then only the
    # arm's joints and links are published
    call = probe.call
    names = list(call(S.GetEntities, SRV + "get_entities", S.GetEntities.Request()).entities)
    assert "arm" in names
    for n in names:
        r = call(S.GetEntityState, SRV + "get_entity_state", S.GetEntityState.Request(entity=n))
        assert r.result.result == OK, (n, r.result.error_message)
        if n != "arm":
            assert call(S.DeleteEntity, SRV + "delete_entity", S.DeleteEntity.Request(entity=n)).result.result == OK
    assert list(call(S.GetEntities, SRV + "get_entities", S.GetEntities.Request()).entities) == ["arm"]
    joints, tf = [], []
    probe.node.create_subscription(JointState, "/robot_joint_states", joints.append, qos_profile_sensor_data)
    probe.node.create_subscription(TFMessage, "/tf", tf.append, 100)
    SS = M.SimulationState
    call(S.SetSimulationState, SRV + "set_simulation_state", S.SetSimulationState.Request(state=SS(state=SS.STATE_PLAYING)))
    probe.wait("joint states and /tf of the world left", lambda: len(joints) > 5 and len(tf) > 5, 60)
    time.sleep(0.5)
    assert all(list(m.name) == ["shoulder", "elbow"] for m in joints[-3:]), [list(m.name) for m in joints[-3:]]
    frames = {t.child_frame_id for m in tf[-3:] for t in m.transforms}
    assert frames and all(not f.startswith("copy") for f in frames), frames
    assert proc.poll() is None
