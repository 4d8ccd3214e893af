"""`ros2 run mbsim_ros sim_node`: the rclpy Node. A thin layer: parameters -> the run
configuration, topics through RclpyTransport, the physics in a Runner thread, services for
reset / pause / step. Everything below it (Session, Bridge, Runner) is what `mbsim run` uses.

Parameters (declared, with these defaults): model "", config "", dt 0.001, real_time_factor 1.0,
catch_up "compensatory", seed 0, frame_prefix "", joint_state_rate 100.0, tf_rate 100.0,
hold 2000.0, z_up false (true: OpenSim models, y up, turned to stand in the z-up world),
on_ground false, ground true. A parameter left at its default does not override the config
file's value (dt left at 0.001: the config's, else the model's time_step, else 0.001).
A duration (the config's, else the model's end_time) pauses the simulation there; the pause
service (false) goes on past it.
Models: `model` (config/sim.yaml), or "topic:/robot_description" (wait for the URDF on that
topic), or "param:robot_description"; with `model` empty and the robot_description parameter
set, that robot (with a ground plane under a floating one).
Topic namespace: the node's namespace, or the first model's name when the node has none.
Services: pause (std_srvs/SetBool), step and reset (std_srvs/Trigger); for each sensor with a
real device (the config's devices: section) NS/<sensor>/set_source (std_srvs/SetBool: true puts
the real device on the sensor's topic, false the simulation; the response's message says which).
"""
from __future__ import annotations

import sys

from ..model import ConfigError, ModelError
from .config import DEFAULTS, load_config

PARAMETERS = ("model", "config", "dt", "real_time_factor", "catch_up", "seed", "frame_prefix",
              "joint_state_rate", "tf_rate", "hold", "z_up", "on_ground", "ground")
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


def main(args=None):
    import rclpy
    from rclpy.node import Node
    from std_srvs.srv import SetBool, Trigger

    from .rclpy_transport import RclpyTransport
    from .session import Session, simulation
    from .world import load_world

    rclpy.init(args=args)
    node = Node("mbsim")
    log = node.get_logger()
    for name in PARAMETERS:
        node.declare_parameter(name, PARAMETER_DEFAULTS[name])
    try:
        values = {name: node.get_parameter(name).value for name in PARAMETERS}
        config = config_from_parameters(values, node.get_namespace())
        if not node.has_parameter("robot_description"):
            node.declare_parameter("robot_description", "")
        if not config["model"] and node.get_parameter("robot_description").value:
            config["model"] = "param:robot_description"      # as gazebo spawns robot_description
        models, notes = load_world(config, description_reader(node))
        for note in notes:
            log.warning(note)
        sim = simulation(models, config, log=log.warning)
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

    def pause(request, response):
        if request.data:
            runner.pause()
        else:
            runner.resume()
        response.success, response.message = True, "paused" if request.data else "running"
        return response

    def step(request, response):
        response.success = runner.step_once(1, wait=True, timeout=5.0)
        response.message = f"t = {sim.t:.6f} s"
        return response

    def reset(request, response):
        session.reset()
        response.success, response.message = True, "reset to t = 0"
        return response

    node.create_service(SetBool, "pause", pause)
    node.create_service(Trigger, "step", step)
    node.create_service(Trigger, "reset", reset)
    for name in (session.bridge.hil.sources if session.bridge.hil is not None else ()):
        node.create_service(SetBool, session.bridge.topic(name, "set_source"), set_source_service(session, name))
    if config["duration"] is not None:
        session.pause_at(config["duration"])
    log.info(f"simulating {', '.join(m.name for m in models)} at real-time factor "
             f"{config['real_time_factor']:g}, dt {sim.dt:g} s"
             f"{'' if config['duration'] is None else ', pausing at t = %g s' % config['duration']}; "
             f"topics under {session.bridge.ns}")
    runner.start()
    try:
        rclpy.spin(node)
    except KeyboardInterrupt:
        pass
    finally:
        runner.stop()
        runner.join(timeout=5.0)
        session.close()
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
