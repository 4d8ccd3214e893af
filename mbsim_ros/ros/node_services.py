"""The sim_node's services: simulation_interfaces (ros/sim_services.py) served under the node's
name with their action, the pause/step/reset aliases under the topic namespace, and
<sensor>/set_source for sensors with a real device (create_services)."""
from __future__ import annotations

def set_source_service(bridge, sensor: str):
    """The std_srvs/SetBool callback of NS/<sensor>/set_source: request.data true = the real
    device, false = the simulation; success False (and why) for a sensor without a device."""
    def callback(request, response):
        try:
            response.message = bridge.set_source(sensor, "real" if request.data else "sim")
            response.success = True
        except ValueError as e:
            response.success, response.message = False, str(e)
        return response
    return callback


def guarded(node, name, callback):
    """callback, answering an error it raises (a request no check foresaw, a race with a delete)
    with OPERATION_FAILED (std_srvs: success false) and its message, logged: a service call never
    takes the node down."""
    def call(request, response):
        try:
            return callback(request, response)
        except Exception as e:
            node.get_logger().error(f"{name}: the request failed: {type(e).__name__}: {e}")
            response = type(response)()
            if hasattr(response, "result") and hasattr(response.result, "error_message"):
                _result(response.result, 4, f"{type(e).__name__}: {e}")       # RESULT_OPERATION_FAILED
            elif hasattr(response, "success"):
                response.success, response.message = False, f"{type(e).__name__}: {e}"
            return response
    return call


def _result(result, code, message=""):
    result.result, result.error_message = int(code), str(message)


def _fill_state(out, st):
    """A simulation_interfaces/EntityState from sim_services' plain state."""
    from .messages import to_sec_nanosec
    out.header.stamp.sec, out.header.stamp.nanosec = to_sec_nanosec(st["stamp"])
    out.header.frame_id = st["frame"]
    p, o = out.pose.position, out.pose.orientation
    p.x, p.y, p.z = (float(x) for x in st["position"])
    o.x, o.y, o.z, o.w = (float(x) for x in st["orientation"])
    for vec, key in ((out.twist.linear, "linear"), (out.twist.angular, "angular"),
                     (out.acceleration.linear, "linear_acceleration"), (out.acceleration.angular, "angular_acceleration")):
        vec.x, vec.y, vec.z = (float(x) for x in st[key])


def _filters(f):
    return dict(pattern=f.filter, categories=[c.category for c in f.categories], tags=list(f.tags.tags),
                tags_mode=f.tags.filter_mode, bounds_type=f.bounds.type,
                bounds_points=[(p.x, p.y, p.z) for p in f.bounds.points])


def serve_simulation_interfaces(node, si):
    """Services and the SimulateSteps action of simulation_interfaces on `node`, over the
    SimulationInterfaces `si`. Blocking ones (stepping, states) in a reentrant group, so a
    MultiThreadedExecutor keeps the others answering."""
    from rclpy.action import ActionServer, CancelResponse, GoalResponse
    from rclpy.callback_groups import ReentrantCallbackGroup
    from simulation_interfaces import action as A
    from simulation_interfaces import srv as S

    group = ReentrantCallbackGroup()

    def features(req, res):
        codes, formats, info = si.features()
        res.features.features, res.features.spawn_formats, res.features.custom_info = codes, formats, info
        return res

    def get_state(req, res):
        res.state.state = si.state()
        _result(res.result, 1)
        return res

    def set_state(req, res):
        _result(res.result, *si.set_state(req.state.state))
        return res

    def step(req, res):
        _result(res.result, *si.step(req.steps))
        return res

    def reset(req, res):
        _result(res.result, *si.reset(req.scope))
        return res

    def entities(req, res):
        code, message, names = si.entities(**_filters(req.filters))
        _result(res.result, code, message)
        res.entities = names
        return res

    def entities_states(req, res):
        from simulation_interfaces.msg import EntityState
        code, message, names, states = si.entities_states(**_filters(req.filters))
        _result(res.result, code, message)
        res.entities = names
        res.states = []
        for st in states:
            out = EntityState()
            _fill_state(out, st)
            res.states.append(out)
        return res

    def entity_info(req, res):
        code, message, info = si.entity_info(req.entity)
        _result(res.result, code, message)
        if info is not None:
            res.info.category.category, res.info.description, res.info.tags = info
        return res

    def entity_state(req, res):
        code, message, st = si.entity_state(req.entity)
        _result(res.result, code, message)
        if st is not None:
            _fill_state(res.state, st)
        return res

    def set_entity_state(req, res):
        s = req.state
        p, o, v, w = s.pose.position, s.pose.orientation, s.twist.linear, s.twist.angular
        _result(res.result, *si.set_entity_state(req.entity, s.header.frame_id, (p.x, p.y, p.z),
                                                 (o.x, o.y, o.z, o.w), (v.x, v.y, v.z), (w.x, w.y, w.z)))
        return res

    def spawn(req, res):
        pose = req.initial_pose
        p, o = pose.pose.position, pose.pose.orientation
        code, message, name = si.spawn(req.name, req.allow_renaming, req.uri, req.resource_string,
                                       req.entity_namespace, pose.header.frame_id, (p.x, p.y, p.z),
                                       (o.x, o.y, o.z, o.w))
        _result(res.result, code, message)
        res.entity_name = name
        return res

    def delete(req, res):
        _result(res.result, *si.delete(req.entity))
        return res

    def spawnables(req, res):
        from simulation_interfaces.msg import Spawnable
        code, message, items = si.spawnables()
        _result(res.result, code, message)
        res.spawnables = [Spawnable(uri=uri, description=text) for uri, text in items]
        return res

    for type_, name, callback in (
            (S.GetSimulatorFeatures, "get_simulator_features", features),
            (S.GetSimulationState, "get_simulation_state", get_state),
            (S.SetSimulationState, "set_simulation_state", set_state),
            (S.StepSimulation, "step_simulation", step),
            (S.ResetSimulation, "reset_simulation", reset),
            (S.GetEntities, "get_entities", entities),
            (S.GetEntitiesStates, "get_entities_states", entities_states),
            (S.GetEntityInfo, "get_entity_info", entity_info),
            (S.GetEntityState, "get_entity_state", entity_state),
            (S.SetEntityState, "set_entity_state", set_entity_state),
            (S.SpawnEntity, "spawn_entity", spawn),
            (S.DeleteEntity, "delete_entity", delete),
            (S.GetSpawnables, "get_spawnables", spawnables)):
        node.create_service(type_, "~/" + name, guarded(node, name, callback), callback_group=group)

    def execute(goal):
        feedback = A.SimulateSteps.Feedback()

        def publish(done, left):
            feedback.completed_steps, feedback.remaining_steps = done, left
            goal.publish_feedback(feedback)
        code, message = si.step(goal.request.steps, feedback=publish, cancelled=lambda: goal.is_cancel_requested)
        result = A.SimulateSteps.Result()
        _result(result.result, code, message)
        if goal.is_cancel_requested:
            goal.canceled()
        elif code == 1:
            goal.succeed()
        else:
            goal.abort()
        return result

    return ActionServer(node, A.SimulateSteps, "~/simulate_steps", execute, callback_group=group,
                        goal_callback=lambda goal: GoalResponse.ACCEPT,
                        cancel_callback=lambda goal: CancelResponse.ACCEPT)


def create_services(node, session, bridge, quit=None) -> list:
    """Every service of the node: simulation_interfaces under ~/ (and its action), then under the
    topic namespace (bridge.topic) pause, step, reset as aliases of them, and
    <sensor>/set_source for sensors with a real device. New services go here. quit(): what
    STATE_QUITTING does. Blocking services are in a reentrant group, so a MultiThreadedExecutor
    keeps answering the others while one steps."""
    from rclpy.callback_groups import ReentrantCallbackGroup
    from std_srvs.srv import SetBool, Trigger

    from .sim_services import ALREADY_IN_TARGET_STATE, OK, PAUSED, PLAYING, SCOPE_STATE, SCOPE_TIME, SimulationInterfaces
    sim, topic = session.sim, bridge.topic
    si = SimulationInterfaces(session, bridge, quit=quit)
    try:
        services = [serve_simulation_interfaces(node, si)]
    except ImportError as e:          # the package is an exec_depend; without it, say so, serve the rest
        services = []
        node.get_logger().warning(f"simulation_interfaces is not importable ({e}): its services are not "
                                  "offered (install ros-$ROS_DISTRO-simulation-interfaces)")

    def pause(request, response):
        code, message = si.set_state(PAUSED if request.data else PLAYING)
        response.success = code in (OK, ALREADY_IN_TARGET_STATE)
        response.message = ("paused" if request.data else "running") if response.success else message
        return response

    def step(request, response):
        if si.state() == PLAYING:
            si.set_state(PAUSED)
        code, message = si.step(1)
        response.success = code == OK
        response.message = f"t = {sim.t:.6f} s" if response.success else message
        return response

    def reset(request, response):
        code, message = si.reset(SCOPE_TIME | SCOPE_STATE)
        response.success, response.message = code == OK, "reset to t = 0" if code == OK else message
        return response

    group = ReentrantCallbackGroup()
    services += [node.create_service(SetBool, topic("pause"), guarded(node, "pause", pause), callback_group=group),
                 node.create_service(Trigger, topic("step"), guarded(node, "step", step), callback_group=group),
                 node.create_service(Trigger, topic("reset"), guarded(node, "reset", reset), callback_group=group)]
    for name in (bridge.hil.sources if bridge.hil is not None else ()):
        services.append(node.create_service(SetBool, topic(name, "set_source"),
                                            guarded(node, name + "/set_source", set_source_service(bridge, name))))
    return services
