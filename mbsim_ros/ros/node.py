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
Services: pause (std_srvs/SetBool), step and reset (std_srvs/Trigger); for each sensor with a
real device (the config's devices: section) NS/<sensor>/set_source (std_srvs/SetBool: true puts
the real device on the sensor's topic, false the simulation; the response's message says which).
"""
from __future__ import annotations

import sys

from .._kernel_cache import CompileReport, compile_report
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
        models, notes = load_world(config)
        for note in notes:
            log.warning(note)
        with compile_report(CompileLog(log)):
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
