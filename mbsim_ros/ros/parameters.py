"""The sim_node's ROS parameters: PARAMETERS (name, default, range, whether it changes at run
time, description; `ros2 param describe` shows them), the run configuration they give
(config_from_parameters), and the runtime ones applied through the Session and the Bridge
(apply_parameter). A start-up parameter left at its default does not override the config
file's value; the others are read at start and declared read-only."""
from __future__ import annotations

import math

from ..run.config import CHOICES, DEFAULTS, load_config

# name: (default, (min, max) or None, runtime, description)
PARAMETERS = {
    "model": ("", None, False, "model file(s), comma-separated; '' = the bundled SR1 world"),
    "config": ("", None, False, "the YAML run configuration (config/sim.yaml documents its keys); '' = none"),
    "bag": ("", None, False, "also record every topic to this rosbag2 (MCAP) directory, closed on exit; "
                             "'' = none; it must not exist yet"),
    "bag_error": ("stop", None, False, "when writing the bag fails (a full disk): stop ends the node (status 2); "
                                       "continue keeps simulating and publishing live, /diagnostics reporting "
                                       "the recording error at ERROR; either way the bag keeps its complete chunks"),
    "dt": (0.001, (1e-6, 0.1), False, "physics step in s; left at 0.001: the config's, else the model's "
                                      "time_step, else 0.001"),
    "keyframe": ("", None, False, "MJCF: start from this <key> (name); '' = the model's reference pose"),
    "seed": (0, (0, 2**31 - 1), False, "world noise seed"),
    "frame_prefix": ("", None, False, "prepended to every link and sensor frame id"),
    "real_time_factor": (1.0, (0.0, 1000.0), True, "simulated seconds per wall second; 0 = as fast as possible; "
                                                     "left at 1.0 at start: the config's, else the model's (an "
                                                     "SDFormat world's), else 1"),
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
    "on_ground": (False, None, False, "lower every model onto what is below it at the start (a fixed base: its weld)"),
    "bound_massless": (True, None, False, "massless leaves get 1 % of the mass and inertia of the body they hang "
                                          "from (false: such a model is refused)"),
    "ground": (True, None, False, "a ground plane under a floating first model with nothing to stand on"),
    "robot_description": ("", None, False, "URDF text: with model '' the robot simulated (as gazebo spawns "
                                           "robot_description); model 'param:NAME' reads the parameter NAME"),
    "paused": (False, None, True, "true pauses the simulation, false runs it (as the pause service)"),
    "view": (False, None, False, "serve the live 3D view of the simulation at http://view_host:view_port "
                                 "(the sim_node entry point: mbsim_ros.cli.sim_node)"),
    "view_port": (8080, (1, 65535), False, "the live view's TCP port"),
    "view_host": ("127.0.0.1", None, False, "the live view's address (127.0.0.1: this machine only)"),
    "foxglove": (False, None, False, "also serve every topic over the Foxglove WebSocket protocol at "
                                     "ws://foxglove_host:foxglove_port (Foxglove, Lichtblick: no ROS needed there)"),
    "foxglove_port": (8765, (0, 65535), False, "the Foxglove server's TCP port (0: any free port, said in the log)"),
    "foxglove_host": ("127.0.0.1", None, False, "the Foxglove server's address (127.0.0.1: this machine only)"),
}
# the node's own parameters with a fixed set of values
NODE_CHOICES = {"bag_error": ("stop", "continue")}
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


def apply_parameter(session, bridge, name: str, value) -> None:
    """Apply a runtime parameter through the Session, the rates through the Bridge between
    steps (ValueError where they refuse)."""
    if name == "real_time_factor":
        session.set_real_time_factor(float(value))
    elif name == "catch_up":
        session.set_catch_up(value)
    elif name.endswith("_rate"):
        from .bridge import check_rate
        check_rate(name, float(value))
        session.submit(lambda: bridge.set_rate(name, float(value)))
    elif name == "hold":
        session.set_hold(float(value))
    elif name == "paused":
        (session.pause if value else session.resume)()
    else:
        raise ValueError(f"{name} is read at start only")


def descriptor(name: str):
    """The rcl_interfaces ParameterDescriptor of `name`: description, range, read-only."""
    from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
    default, bounds, runtime, text = PARAMETERS[name]
    d = ParameterDescriptor(description=text, read_only=not runtime)
    if name in NODE_CHOICES:
        d.additional_constraints = "one of: " + ", ".join(NODE_CHOICES[name])
    elif name in CHOICES:
        d.additional_constraints = "one of: " + ", ".join(CHOICES[name])
    if isinstance(default, float):
        d.floating_point_range = [FloatingPointRange(from_value=float(bounds[0]), to_value=float(bounds[1]), step=0.0)]
        d.dynamic_typing = True              # `ros2 param set ... joint_state_rate 10` sends an integer
    elif isinstance(default, int) and not isinstance(default, bool):
        d.integer_range = [IntegerRange(from_value=bounds[0], to_value=bounds[1], step=1)]
    return d
