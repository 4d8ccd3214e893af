"""`ros2 run mbsim_ros sim_node`: the rclpy Node. A thin layer: parameters -> the run
configuration, topics through RclpyTransport (and a bag when asked), the physics in a Runner
thread, services under the topic namespace. Everything below it (Session, Bridge, Runner) is what
`mbsim run` uses.

Parameters: PARAMETERS below (name, default, range, whether it changes at run time, description;
`ros2 param describe` shows them). Those marked runtime are applied when set (through the
Session: real-time factor, catch-up, the four rates, hold, paused); the others are read at start
and declared read-only, so setting them is refused with the reason. A start-up parameter left at
its default does not override the config file's value (dt left at 0.001: the config's, else the
model's time_step, else 0.001); the runtime ones are set to the values in force once the
configuration is read. A duration (the config's, else the model's end_time) pauses the
simulation there; the pause service (false) or `paused` false goes on past it.
Models: `model` (config/sim.yaml), or "topic:/robot_description" (wait for the URDF on that
topic), or "param:robot_description"; with `model` empty and the robot_description parameter
set, that robot (with a ground plane under a floating one).
Topic namespace: the node's namespace, or the first model's name when the node has none.
Services (`create_services`): simulation_interfaces (the ROS 2 simulator standard,
ros/sim_services.py) under the node's name, /mbsim/... (<node namespace>/mbsim/...), as Gazebo
offers them under /gzserver: get_simulator_features, get_simulation_state, set_simulation_state,
step_simulation, reset_simulation, get_entities, get_entity_info, get_entity_state,
get_entities_states, set_entity_state, spawn_entity, delete_entity, get_spawnables, and the
action simulate_steps. Under the topic namespace NS, thin aliases of them: NS/pause
(std_srvs/SetBool), NS/step and NS/reset (std_srvs/Trigger); for each sensor with a real device (the config's
devices: section) NS/<sensor>/set_source (std_srvs/SetBool: true puts the real device on the
sensor's topic, false the simulation; the response's message says which).
SIGINT and SIGTERM (what `ros2 launch` sends) stop the runner, flush what is queued, close the
bag, and end the process with status 0; bad parameters or models end it with status 2.
"""
from __future__ import annotations

import math
import os
import sys
import threading

from .._kernel_cache import CompileReport, compile_report
from ..model import ConfigError, ModelError
from .config import CHOICES, DEFAULTS, load_config

# name: (default, (min, max) or None, runtime, description)
PARAMETERS = {
    "model": ("", None, False, "model file(s), comma-separated; '' = the bundled SR1 world"),
    "config": ("", None, False, "the YAML run configuration (config/sim.yaml documents its keys); '' = none"),
    "bag": ("", None, False, "also record every topic to this rosbag2 (MCAP) directory, closed on exit; "
                             "'' = none; it must not exist yet"),
    "dt": (0.001, (1e-6, 0.1), False, "physics step in s; left at 0.001: the config's, else the model's "
                                      "time_step, else 0.001"),
    "seed": (0, (0, 2**31 - 1), False, "world noise seed"),
    "frame_prefix": ("", None, False, "prepended to every link and sensor frame id"),
    "real_time_factor": (1.0, (0.0, 1000.0), True, "simulated seconds per wall second; 0 = as fast as possible"),
    "catch_up": ("compensatory", None, True, "when behind the wall clock: compensatory (catch up) or "
                                             "conservative (drop the lost time)"),
    "joint_state_rate": (100.0, (0.001, 1e6), True, "joint_states rate in Hz of simulated time (at most the physics rate)"),
    "tf_rate": (100.0, (0.001, 1e6), True, "/tf rate in Hz of simulated time (at most the physics rate)"),
    "clock_rate": (1000.0, (0.001, 1e6), True, "/clock rate in Hz of simulated time (at most the physics rate)"),
    "diagnostics_rate": (1.0, (0.001, 1e6), True, "/diagnostics rate in Hz of simulated time"),
    "massless_armature": (0.0, (0.0, 1e6), False, "kg m^2 (kg for sliders) given to joints that move only "
                                                   "massless links (MuJoCo's armature); 0: such a model is refused"),
    "hold": (2000.0, (0.0, 1e9), True, "stiffness of the springs holding the joints at their initial pose "
                                       "(0: off; changeable at run time where the world started with hold > 0)"),
    "z_up": (False, None, False, "true: OpenSim models (y up) turned to stand in the z-up world"),
    "on_ground": (False, None, False, "lower every floating model onto what is below it at the start"),
    "ground": (True, None, False, "a ground plane under a floating first model with nothing to stand on"),
    "robot_description": ("", None, False, "URDF text: with model '' the robot simulated (as gazebo spawns "
                                           "robot_description); model 'param:NAME' reads the parameter NAME"),
    "paused": (False, None, True, "true pauses the simulation, false runs it (as the pause service)"),
}
# the configuration keys among the parameters (the others are the node's own: bag, paused)
CONFIG_KEYS = tuple(k for k in PARAMETERS if k in DEFAULTS)
PARAMETER_DEFAULTS = {k: v[0] for k, v in PARAMETERS.items()}


def config_from_parameters(values: dict, namespace: str) -> dict:
    """The run configuration from the node's parameter values and namespace ("/" = none)."""
    overrides = {k: v for k, v in values.items()
                 if k in CONFIG_KEYS and k != "config" and v != PARAMETER_DEFAULTS.get(k)}
    ns = namespace.strip("/")
    if ns:
        overrides["namespace"] = ns.replace("/", "_")
    return load_config(values.get("config") or None, overrides)


def parameter_error(name: str, value) -> str | None:
    """Why `value` is not acceptable for the runtime parameter `name` (None: it is)."""
    default, bounds, _, _ = PARAMETERS[name]
    if isinstance(default, bool):
        return None if isinstance(value, bool) else f"{name} must be true or false, got {value!r}"
    if isinstance(default, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return f"{name} must be a number, got {value!r}"
        lo, hi = bounds
        if not lo <= value <= hi:
            return f"{name} must be within [{lo:g}, {hi:g}], got {value!r}"
        return None
    if name in CHOICES and value not in CHOICES[name]:
        return f"{name} must be one of {', '.join(CHOICES[name])}, got {value!r}"
    return None


def apply_parameter(session, name: str, value) -> None:
    """Apply a runtime parameter through the Session (ValueError where the Session refuses)."""
    if name == "real_time_factor":
        session.set_real_time_factor(float(value))
    elif name == "catch_up":
        session.set_catch_up(value)
    elif name.endswith("_rate"):
        session.set_rate(name, float(value))
    elif name == "hold":
        session.set_hold(float(value))
    elif name == "paused":
        (session.runner.pause if value else session.runner.resume)()
    else:
        raise ValueError(f"{name} is read at start only")


def descriptor(name: str):
    """The rcl_interfaces ParameterDescriptor of `name`: description, range, read-only."""
    from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
    default, bounds, runtime, text = PARAMETERS[name]
    d = ParameterDescriptor(description=text, read_only=not runtime)
    if name in CHOICES:
        d.additional_constraints = "one of: " + ", ".join(CHOICES[name])
    if isinstance(default, float):
        d.floating_point_range = [FloatingPointRange(from_value=float(bounds[0]), to_value=float(bounds[1]), step=0.0)]
        d.dynamic_typing = True              # `ros2 param set ... joint_state_rate 10` sends an integer
    elif isinstance(default, int) and not isinstance(default, bool):
        d.integer_range = [IntegerRange(from_value=bounds[0], to_value=bounds[1], step=1)]
    return d


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


def create_services(node, session, quit=None) -> list:
    """Every service of the node: simulation_interfaces under ~/ (and its action), then under the
    topic namespace (session.bridge.topic) pause, step, reset as aliases of them, and
    <sensor>/set_source for sensors with a real device. New services go here. quit(): what
    STATE_QUITTING does. Blocking services are in a reentrant group, so a MultiThreadedExecutor
    keeps answering the others while one steps."""
    from rclpy.callback_groups import ReentrantCallbackGroup
    from std_srvs.srv import SetBool, Trigger

    from .sim_services import ALREADY_IN_TARGET_STATE, OK, PAUSED, PLAYING, SCOPE_STATE, SCOPE_TIME, SimulationInterfaces
    sim, topic = session.sim, session.bridge.topic
    si = SimulationInterfaces(session, quit=quit)
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
    services += [node.create_service(SetBool, topic("pause"), pause, callback_group=group),
                 node.create_service(Trigger, topic("step"), step, callback_group=group),
                 node.create_service(Trigger, topic("reset"), reset, callback_group=group)]
    for name in (session.bridge.hil.sources if session.bridge.hil is not None else ()):
        services.append(node.create_service(SetBool, topic(name, "set_source"), set_source_service(session, name)))
    return services


class CompileLog(CompileReport):
    """The first start's compilation in the node's log: at once, then as each kernel is ready."""

    def __init__(self, log):
        super().__init__()
        self.log = log
        self._told = 0

    def started(self):
        self.log.info("compiling the numba kernels (first start of this installation only: later starts "
                      "load them from the cache; `mbsim warmup` compiles them ahead of time)")

    def progress(self):
        if self.ready > self._told:
            self._told = self.ready
            self.log.info(f"compiled {self.ready}/{self.kernels} kernels ({self.cpu:.0f} CPU s)")

    def finished(self):
        self.log.info(f"compiled {self.functions} functions in {self.cpu:.0f} CPU s")


def description_reader(node, timeout: float = 30.0):
    """read(source) -> URDF text for the models "param:NAME" (this node's parameter NAME, e.g.
    robot_description as ros2_control launch files pass it) and "topic:/NAME" (the latest
    message on a transient-local std_msgs/String topic, as ros_gz_sim create -topic reads it;
    waits up to `timeout` s). ConfigError naming the source when there is nothing."""
    import time

    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from std_msgs.msg import String

    def read(source):
        kind, _, name = source.partition(":")
        if kind == "param":
            if not node.has_parameter(name):
                node.declare_parameter(name, "")
            text = node.get_parameter(name).value
            if not isinstance(text, str) or not text.strip():
                raise ConfigError(f"model {source!r}: the node's parameter {name!r} is not set (expected URDF text)")
            return text
        got = []
        qos = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE)
        sub = node.create_subscription(String, name, lambda m: got.append(m.data), qos)
        executor = SingleThreadedExecutor(context=node.context)
        executor.add_node(node)
        try:
            deadline = time.monotonic() + timeout
            while not got and time.monotonic() < deadline:
                executor.spin_once(timeout_sec=0.1)
        finally:
            executor.remove_node(node)
            executor.shutdown()
            node.destroy_subscription(sub)
        if not got:
            raise ConfigError(f"model {source!r}: no robot description on {name} within {timeout:g} s "
                              "(is robot_state_publisher running?)")
        return got[-1]
    return read


def _start(node, log, values):
    """(session, config, models) from the parameter values; ConfigError/ModelError/OSError/
    ImportError on bad input (the caller says it in one line and exits 2)."""
    from .bag import BagTransport
    from .rclpy_transport import RclpyTransport
    from .session import Session, simulation
    from .transport import FanoutTransport
    from .transport_choice import rclpy_missing
    from .world import load_world

    missing = rclpy_missing()
    if missing:
        raise ImportError(missing)
    config = config_from_parameters(values, node.get_namespace())
    if values["bag"] and os.path.exists(values["bag"]):
        raise OSError(f"bag {values['bag']}: already exists (rosbag2 refuses to overwrite a bag too)")
    if not config["model"] and values["robot_description"]:
        config["model"] = "param:robot_description"      # as gazebo spawns robot_description
    # said before the heavy part: the first start compiles the numba kernels for minutes
    log.info(f"loading {config['model'] or 'the bundled SR1 world'} and compiling the simulation "
             "kernels (minutes on a first start; cached afterwards)")
    models, notes = load_world(config, description_reader(node))
    for note in notes:
        log.warning(note)
    with compile_report(CompileLog(log)):      # a first start says at once that it compiles
        sim = simulation(models, config, log=log.warning)
    transport = RclpyTransport(node)
    if values["bag"]:
        transport = FanoutTransport([transport, BagTransport(values["bag"])])
    try:
        session = Session(sim, transport, config, log=log.warning)
    except BaseException:          # a bad devices:/emulate:/commands: entry: leave no bag behind
        transport.close()
        if values["bag"]:
            import shutil
            shutil.rmtree(values["bag"], ignore_errors=True)
        raise
    return session, config, models


def main(args=None):
    # our own SIGINT/SIGTERM handlers, first: rclpy's would invalidate the context under the
    # running publisher (and raise ExternalShutdownException out of spin); ours let the loop below
    # end, and a signal while the world loads ends the node once it has loaded
    from .stop_signals import catch_stop_signals, signal_name
    stop = []
    catch_stop_signals(stop.append)

    import rclpy
    from rcl_interfaces.msg import SetParametersResult
    from rclpy.exceptions import InvalidHandle
    from rclpy.executors import MultiThreadedExecutor
    from rclpy.parameter import Parameter
    from rclpy.signals import SignalHandlerOptions

    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    node = rclpy.create_node("mbsim")
    log = node.get_logger()
    for name in PARAMETERS:
        node.declare_parameter(name, PARAMETER_DEFAULTS[name], descriptor(name))
    try:
        values = {name: node.get_parameter(name).value for name in PARAMETERS}
        session, config, models = _start(node, log, values)
    except (ConfigError, ModelError, OSError, ImportError) as e:
        log.error(str(e))
        node.destroy_node()
        rclpy.try_shutdown()
        return 2
    runner = session.runner
    # the runtime parameters show the values in force (the config file's where it set them)
    node.set_parameters([Parameter(k, value=config[k]) for k in CONFIG_KEYS
                         if PARAMETERS[k][2] and config[k] != values[k]])
    syncing = []                # set while the loop mirrors the runner's pause into `paused`

    def on_set(parameters):
        if syncing:
            return SetParametersResult(successful=True)
        for p in parameters:
            why = parameter_error(p.name, p.value) if p.name in PARAMETERS else None
            if why:
                return SetParametersResult(successful=False, reason=why)
        try:
            for p in parameters:
                if p.name in PARAMETERS:
                    apply_parameter(session, p.name, p.value)
        except ValueError as e:
            return SetParametersResult(successful=False, reason=str(e))
        return SetParametersResult(successful=True)
    node.add_on_set_parameters_callback(on_set)

    # STATE_QUITTING: the loop below ends once the response has had 0.5 s to leave
    create_services(node, session, quit=lambda: threading.Timer(0.5, stop.append, ("quit",)).start())
    if config["duration"] is not None:
        session.pause_at(config["duration"])
    log.info(f"simulating {', '.join(m.name for m in models)} at real-time factor "
             f"{config['real_time_factor']:g}, dt {session.sim.dt:g} s"
             f"{'' if config['duration'] is None else ', pausing at t = %g s' % config['duration']}; "
             f"topics and services under {session.bridge.ns}")
    executor = MultiThreadedExecutor(num_threads=4)   # a stepping service blocks one thread
    executor.add_node(node)
    runner.start()
    status = 0
    try:
        while not stop and runner.running:
            try:
                executor.spin_once(timeout_sec=0.1)
            except InvalidHandle:
                # the physics thread destroyed a publisher (a deleted model's topics) while the
                # executor gathered its wait set: gather it again
                continue
            if runner.paused != node.get_parameter("paused").value:
                syncing.append(True)
                try:
                    node.set_parameters([Parameter("paused", value=runner.paused)])
                finally:
                    syncing.clear()
    finally:
        runner.stop()
        try:
            runner.join(timeout=10.0)
        except Exception as e:          # the physics thread ended with an error (logged there)
            log.error(f"the simulation stopped: {e!r}")
            status = 1
        session.close()                 # flush the queued messages, close the bag
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()
    if stop:
        why = "set_simulation_state (quitting)" if stop[0] == "quit" else signal_name(stop[0])
        print(f"mbsim sim_node: stopped by {why}", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
