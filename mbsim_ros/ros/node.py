"""`ros2 run mbsim_ros sim_node`: the rclpy Node. A thin layer: parameters -> the run
configuration, topics through RclpyTransport, the physics in a Runner thread, services for
reset / pause / step. Everything below it (Session, Bridge, Runner) is what `mbsim run` uses.

Parameters (declared, with these defaults): model "", config "", dt 0.001, real_time_factor 1.0,
catch_up "compensatory", seed 0, frame_prefix "", joint_state_rate 100.0, tf_rate 100.0,
hold 2000.0. A parameter left at its default does not override the config file's value (dt
left at 0.001: the config's, else the model's time_step, else 0.001).
A duration (the config's, else the model's end_time) pauses the simulation there; the pause
service (false) goes on past it.
Topic namespace: the node's namespace, or the first model's name when the node has none.
Services: simulation_interfaces (the ROS 2 simulator standard, ros/sim_services.py) under the
node's name, /mbsim/... (ROS_NAMESPACE/mbsim/... with a namespace), as Gazebo offers them under
/gzserver: get_simulator_features, get_simulation_state, set_simulation_state, step_simulation,
reset_simulation, get_entities, get_entity_info, get_entity_state, get_entities_states,
set_entity_state, spawn_entity, delete_entity, get_spawnables, and the action simulate_steps.
Thin aliases of them: pause (std_srvs/SetBool), step and reset (std_srvs/Trigger); for each sensor with a
real device (the config's devices: section) NS/<sensor>/set_source (std_srvs/SetBool: true puts
the real device on the sensor's topic, false the simulation; the response's message says which).
"""
from __future__ import annotations

import sys
import threading

from ..model import ConfigError, ModelError
from .config import DEFAULTS, load_config

PARAMETERS = ("model", "config", "dt", "real_time_factor", "catch_up", "seed", "frame_prefix",
              "joint_state_rate", "tf_rate", "hold")
PARAMETER_DEFAULTS = dict({k: DEFAULTS[k] for k in PARAMETERS if k in DEFAULTS}, config="", dt=0.001)


def config_from_parameters(values: dict, namespace: str) -> dict:
    """The run configuration from the node's parameter values and namespace ("/" = none)."""
    overrides = {k: v for k, v in values.items() if k != "config" and v != PARAMETER_DEFAULTS.get(k)}
    ns = namespace.strip("/")
    if ns:
        overrides["namespace"] = ns.replace("/", "_")
    return load_config(values.get("config") or None, overrides)


def set_source_service(session, sensor: str):
    """The std_srvs/SetBool callback of NS/<sensor>/set_source: request.data true = the real
    device, false = the simulation; success False (and why) for a sensor without a device."""
    def callback(request, response):
        try:
            response.message = session.set_source(sensor, "real" if request.data else "sim")
            response.success = True
        except ValueError as e:
            response.success, response.message = False, str(e)
        return response
    return callback


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
                bounds_type=f.bounds.type)


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
        node.create_service(type_, "~/" + name, callback, callback_group=group)

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


def main(args=None):
    import rclpy
    from rclpy.node import Node
    from std_srvs.srv import SetBool, Trigger

    from rclpy.callback_groups import ReentrantCallbackGroup
    from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor

    from .rclpy_transport import RclpyTransport
    from .session import Session, simulation
    from .sim_services import (ALREADY_IN_TARGET_STATE, OK, PAUSED, PLAYING, SCOPE_STATE, SCOPE_TIME,
                               SimulationInterfaces)
    from .world import load_world

    rclpy.init(args=args)
    node = Node("mbsim")
    log = node.get_logger()
    for name in PARAMETERS:
        node.declare_parameter(name, PARAMETER_DEFAULTS[name])
    try:
        values = {name: node.get_parameter(name).value for name in PARAMETERS}
        config = config_from_parameters(values, node.get_namespace())
        models, notes = load_world(config)
        for note in notes:
            log.warning(note)
        sim = simulation(models, config)
    except (ConfigError, ModelError, OSError) as e:
        log.error(str(e))
        node.destroy_node()
        rclpy.try_shutdown()
        sys.exit(2)
    try:
        session = Session(sim, RclpyTransport(node), config, log=log.warning)
    except ConfigError as e:          # devices:/emulate:/commands: checked against the world
        log.error(str(e))
        node.destroy_node()
        rclpy.try_shutdown()
        sys.exit(2)
    runner = session.runner
    # quitting: shut down after the response has had 0.5 s to leave
    si = SimulationInterfaces(session, quit=lambda: threading.Timer(0.5, rclpy.try_shutdown).start())
    try:
        action_server = serve_simulation_interfaces(node, si)
    except ImportError as e:          # the interface package is missing: say so, serve the rest
        action_server = None
        log.warning(f"simulation_interfaces is not importable ({e}): its services are not offered "
                    "(install ros-$ROS_DISTRO-simulation-interfaces)")

    def pause(request, response):           # aliases of set_simulation_state, step_simulation, reset
        code, message = si.set_state(PAUSED if request.data else PLAYING)
        response.success = code in (OK, ALREADY_IN_TARGET_STATE)
        response.message = "paused" if request.data else "running"
        if not response.success:
            response.message = message
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
    node.create_service(SetBool, "pause", pause, callback_group=group)
    node.create_service(Trigger, "step", step, callback_group=group)
    node.create_service(Trigger, "reset", reset, callback_group=group)
    for name in (session.bridge.hil.sources if session.bridge.hil is not None else ()):
        node.create_service(SetBool, session.bridge.topic(name, "set_source"), set_source_service(session, name))
    if config["duration"] is not None:
        session.pause_at(config["duration"])
    log.info(f"simulating {', '.join(m.name for m in models)} at real-time factor "
             f"{config['real_time_factor']:g}, dt {sim.dt:g} s"
             f"{'' if config['duration'] is None else ', pausing at t = %g s' % config['duration']}; "
             f"topics under {session.bridge.ns}")
    runner.start()
    executor = MultiThreadedExecutor(num_threads=4)
    executor.add_node(node)
    try:
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        executor.shutdown()
        if action_server is not None:
            action_server.destroy()
        runner.stop()
        runner.join(timeout=5.0)
        session.close()
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
