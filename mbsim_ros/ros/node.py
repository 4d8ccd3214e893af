"""`ros2 run mbsim_ros sim_node`: the rclpy Node. A thin layer: parameters -> the run
configuration, topics through RclpyTransport (and a bag when asked), the physics in a Runner
thread, services under the topic namespace. Everything below it (Session, Bridge, Runner) is what
`mbsim run` uses.

Parameters: ros/parameters.py's PARAMETERS (name, default, range, whether it changes at run time, description;
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
Services (ros/node_services.py's `create_services`): simulation_interfaces (the ROS 2 simulator standard,
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

import os
import sys
import threading

from .._kernel_cache import CompileReport, compile_report
from ..model import ConfigError, ModelError
from .node_services import create_services
from .parameters import (CONFIG_KEYS, NODE_CHOICES, PARAMETER_DEFAULTS, PARAMETERS, apply_parameter,
                         config_from_parameters, descriptor, parameter_error)


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


def _start(node, log, values, listeners=None):
    """(session, bridge, config, models) from the parameter values; ConfigError/ModelError/OSError/
    ImportError on bad input (the caller says it in one line and exits 2). listeners(values, log):
    more Session listeners (the live view, which this layer does not know), made first."""
    extra = list(listeners(values, log)) if listeners is not None else []
    try:
        return _start_session(node, log, values, extra)
    except BaseException:
        for x in extra:
            x.close()
        raise


def _start_session(node, log, values, extra):
    from .transport_choice import rclpy_missing

    missing = rclpy_missing()
    if missing:
        raise ImportError(missing)
    config = config_from_parameters(values, node.get_namespace())
    if values["bag_error"] not in NODE_CHOICES["bag_error"]:
        raise ConfigError(f"parameter bag_error must be one of {', '.join(NODE_CHOICES['bag_error'])}, "
                          f"got {values['bag_error']!r}")
    if values["bag"] and os.path.exists(values["bag"]):
        raise OSError(f"bag {values['bag']}: already exists (rosbag2 refuses to overwrite a bag too)")
    if not config.model and values["robot_description"]:
        config.model = "param:robot_description"      # as gazebo spawns robot_description
    # bound first, as the view: a port in use ends the node before minutes of compiling
    foxglove = foxglove_server(values, log) if values["foxglove"] else None
    try:
        return _start_simulation(node, log, values, extra, config, foxglove)
    except BaseException:
        if foxglove is not None:
            foxglove.close()
        raise


def _start_simulation(node, log, values, extra, config, foxglove):
    from .bag import BagTransport
    from .rclpy_transport import RclpyTransport
    from ..run import Session, build_simulation
    from .bridge import WARM_UP_JOBS, Bridge
    from .transport import FanoutTransport
    from ..run.world import load_world

    # said before the heavy part: the first start compiles the numba kernels for minutes
    log.info(f"loading {config.model or 'the bundled SR1 world'} and compiling the simulation "
             "kernels (minutes on a first start; cached afterwards)")
    models, notes = load_world(config, description_reader(node))
    for note in notes:
        log.warning(note)
    with compile_report(CompileLog(log)):      # a first start says at once that it compiles
        sim = build_simulation(models, config, log=log.warning, warm_up_jobs=WARM_UP_JOBS)
    transports = [RclpyTransport(node)] + ([foxglove] if foxglove is not None else [])
    if values["bag"]:
        transports.append(BagTransport(values["bag"], on_error=values["bag_error"]))
    transport = transports[0] if len(transports) == 1 else FanoutTransport(transports)
    try:
        bridge = Bridge(sim, transport, config, log=log.warning)
        session = Session(sim, config, listeners=[bridge] + extra, log=log.warning, pause_at=config.duration)
    except BaseException:          # a bad devices:/emulate:/commands: entry: leave no bag behind
        transport.close()
        if values["bag"]:
            import shutil
            shutil.rmtree(values["bag"], ignore_errors=True)
        raise
    return session, bridge, config, models


def foxglove_server(values, log):
    """The Foxglove WebSocket server the `foxglove` parameter asks for, listening; its URL in
    the log, and a warning where it listens beyond this machine."""
    from ..run.network import is_loopback
    from .foxglove import FoxgloveTransport
    server = FoxgloveTransport(values["foxglove_host"], values["foxglove_port"])
    log.info(f"foxglove: {server.url} (open it in Foxglove or Lichtblick)")
    if not is_loopback(server.host):
        log.warning(f"the Foxglove server listens on {server.host}, not this machine only: whoever reaches "
                    f"port {server.port} there sees every topic and can publish joint commands")
    return server


def main(args=None, listeners=None):
    # our own SIGINT/SIGTERM handlers, first: rclpy's would invalidate the context under the
    # running publisher (and raise ExternalShutdownException out of spin); ours let the loop below
    # end, and a signal while the world loads ends the node once it has loaded
    from ..run.stop_signals import catch_stop_signals, signal_name
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
        session, bridge, config, models = _start(node, log, values, listeners)
    except (ConfigError, ModelError, OSError, ImportError) as e:
        log.error(str(e))
        node.destroy_node()
        rclpy.try_shutdown()
        return 2
    runner = session.runner
    # the runtime parameters show the values in force (the config file's where it set them)
    node.set_parameters([Parameter(k, value=getattr(config, k)) for k in CONFIG_KEYS
                         if PARAMETERS[k][2] and getattr(config, k) != values[k]])
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
                    apply_parameter(session, bridge, p.name, p.value)
        except ValueError as e:
            return SetParametersResult(successful=False, reason=str(e))
        return SetParametersResult(successful=True)
    node.add_on_set_parameters_callback(on_set)

    # STATE_QUITTING: the loop below ends once the response has had 0.5 s to leave
    create_services(node, session, bridge, quit=lambda: threading.Timer(0.5, stop.append, ("quit",)).start())
    log.info(f"simulating {', '.join(m.name for m in models)} at real-time factor "
             f"{config.target_rtf:g}, dt {session.sim.dt:g} s"
             f"{'' if config.duration is None else ', pausing at t = %g s' % config.duration}; "
             f"topics and services under {bridge.ns}")
    if config.realtime_priority:
        # this thread and the executor's (created by it, inheriting its scheduling) take the GIL
        # too: descheduled while holding it they would hold the physics back (priority inversion)
        from ..run.pacing import apply_os_scheduling
        apply_os_scheduling(max(1, config.realtime_priority - 1))
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
        except OSError as e:            # a file it writes failed (a full disk under the bag): one line
            log.error(f"the simulation stopped: {e}")
            status = 2
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
