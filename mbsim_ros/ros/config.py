"""The run configuration: one YAML file (config/sim.yaml documents every key) shared by
`mbsim run --config` and the sim_node's `config` parameter; command-line options and ROS
parameters override it. Imports nothing of ROS."""
from __future__ import annotations

import copy
import math
import re

import yaml

from ..model import ConfigError

DEFAULTS = {
    "model": "",                    # model file(s), comma-separated (file name:=value ... for xacro), or a list
                                    # of files and {file, name, pose: [x, y, z, roll, pitch, yaw], args}; "" = the bundled SR1 world
    "on_ground": False,             # lower every floating model until its lowest collision point touches what is below
    "ground": True,                 # a ground plane under a floating first model with nothing to stand on
    "floating_base": False,         # URDF: give the root link a free joint
    "z_up": False,                  # OpenSim (y up): turn the model so that its +y is the world's +z
    "dt": None,                     # physics step (s); None = the model's time_step, else 0.001
    "duration": None,               # simulated seconds; None = the model's end_time, else 5 (run) / no end (node)
    "integrator": "semi-implicit-euler",
    "contact": "",                  # lcp | penalty | none; "" = the model's contact method, else lcp
    "massless_armature": 0.0,       # kg m^2 (kg): armature for joints moving only massless links; 0 = refuse them
    "hold": 2000.0,                 # joint springs holding the initial pose (0: off)
    "real_time_factor": 1.0,        # 0 = as fast as possible
    "catch_up": "compensatory",     # compensatory | conservative
    "realtime_priority": 0,         # physics thread under SCHED_FIFO at this priority (1-99; 0 = off)
    "cpu": None,                    # physics thread pinned to this core (None = anywhere)
    "namespace": "",                # "" = the first model's name
    "frame_prefix": "",             # prepended to every link and sensor frame id
    "seed": 0,                      # world noise seed
    "joint_state_rate": 100.0,      # Hz
    "tf_rate": 100.0,               # Hz
    "clock_rate": 1000.0,           # Hz (at most the physics rate)
    "diagnostics_rate": 1.0,        # Hz
    "merge_imu": False,             # one Imu per link from its accelerometer + gyro
    "pd_gains": {"default": [100.0, 10.0]},   # joint_commands position/velocity tracking: [kp, kd]
    "joint_commands_topic": "joint_commands",  # JointState commands in; relative to the namespace unless /...
    "joint_states_topic": "joint_states",      # JointState position, velocity, effort of every DOF out
    "command_interfaces": {},       # per joint: [position, velocity, effort], the interfaces a shorter-than-name
                                    # command array maps to (joint_state_topic_hardware_interface's layout)
    "sensors": {},                  # per sensor: rate, delay, saturate, noise, enabled, points
    "devices": {},                  # per sensor: its real device (hardware in the loop, config/hil.yaml)
    "emulate": {},                  # per sensor: a serial port to write it to in a device protocol
    "commands": {},                 # joint commands read from a serial port (csv lines)
    "actuators_enabled": True,      # the models' actuators on (sim.actuators_enabled)
}
CHOICES = {"integrator": ("semi-implicit-euler", "rk4"), "contact": ("lcp", "penalty", "none"),
           "catch_up": ("compensatory", "conservative")}
COMMAND_INTERFACES = ("position", "velocity", "effort")
# left open (None / ""), these come from the models' settings (world.apply_model_settings)
FROM_MODEL = ("dt", "duration", "contact")


def load_config(path=None, overrides=None) -> dict:
    """DEFAULTS, then the YAML file at `path` (if any), then `overrides` (None values skipped)."""
    config = copy.deepcopy(DEFAULTS)
    where = "configuration"
    if path:
        where = str(path)
        try:
            with open(path, encoding="utf-8") as f:
                data = yaml.safe_load(f)
        except FileNotFoundError:
            raise ConfigError(f"{path}: no such configuration file") from None
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            line = f" line {mark.line + 1}" if mark is not None else ""
            raise ConfigError(f"{path}:{line}: not valid YAML ({getattr(e, 'problem', None) or e})") from None
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: expected a mapping of settings at the top level, got {type(data).__name__}")
        _merge(config, data, where)
    _merge(config, {k: v for k, v in (overrides or {}).items() if v is not None}, "command line")
    return config


def valid_namespace(text: str) -> bool:
    """Whether `text` is a valid ROS 2 namespace (rmw's rules): tokens of letters, digits and _
    not starting with a digit, separated by single slashes, an optional leading slash, no
    trailing one."""
    return re.fullmatch(r"/?[A-Za-z_][A-Za-z0-9_]*(/[A-Za-z_][A-Za-z0-9_]*)*", text) is not None


def _merge(config, data, where):
    for key, value in data.items():
        if key not in DEFAULTS:
            raise ConfigError(f"{where}: unknown setting {key!r}; expected one of {', '.join(DEFAULTS)}")
        config[key] = _check(key, value, where)


def _check_models(value, where):
    """model: a string, or a list of strings and {file, name, pose, args} mappings."""
    if value is None or isinstance(value, str):
        return "" if value is None else value
    if not isinstance(value, list):
        raise ConfigError(f"{where}: model must be a file name, comma-separated names, or a list, got {value!r}")
    for k, item in enumerate(value):
        if isinstance(item, str):
            continue
        if not isinstance(item, dict) or not isinstance(item.get("file"), str):
            raise ConfigError(f"{where}: model[{k}] must be a file name or a mapping with file: (and name:, "
                              f"pose:, args:), got {item!r}")
        unknown = sorted(set(item) - {"file", "name", "pose", "args"})
        if unknown:
            raise ConfigError(f"{where}: model[{k}]: unknown key(s) {', '.join(unknown)}; expected file, name, pose, args")
        if item.get("name") is not None and (not isinstance(item["name"], str) or "/" in item["name"] or not item["name"]):
            raise ConfigError(f"{where}: model[{k}].name must be a name without '/', got {item['name']!r}")
        pose = item.get("pose")
        if pose is not None and not (isinstance(pose, list) and len(pose) == 6
                                     and all(isinstance(x, (int, float)) and math.isfinite(x) for x in pose)):
            raise ConfigError(f"{where}: model[{k}].pose must be [x, y, z, roll, pitch, yaw] (m, rad), got {pose!r}")
        if item.get("args") is not None and not isinstance(item["args"], dict):
            raise ConfigError(f"{where}: model[{k}].args must be a mapping of xacro arguments, got {item['args']!r}")
    return value


def _check(key, value, where):
    default = DEFAULTS[key]
    if key == "model":
        return _check_models(value, where)
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: {key} must be true or false, got {value!r}")
        return value
    if key in FROM_MODEL and value is None:
        return default
    if key == "cpu" and value is None:
        return None
    if isinstance(default, (int, float)) or default is None:
        try:
            x = float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{where}: {key} must be a number, got {value!r}") from None
        positive = key.endswith("_rate") or key in FROM_MODEL
        if not math.isfinite(x) or x < 0 or (x == 0 and positive):
            raise ConfigError(f"{where}: {key} must be a finite number {'> 0' if positive else '>= 0'}, got {value!r}")
        if key in ("realtime_priority", "cpu"):
            if x != int(x) or (key == "realtime_priority" and x > 99):
                raise ConfigError(f"{where}: {key} must be a whole number{' 0..99' if key == 'realtime_priority' else ' >= 0'}, "
                                  f"got {value!r}")
            return int(x)
        return int(x) if key == "seed" else x
    if isinstance(default, str):
        value = "" if value is None else str(value)
        if key == "namespace" and value and not valid_namespace(value):
            raise ConfigError(f"{where}: namespace {value!r} is not a ROS name: letters, digits and _ in "
                              "tokens that do not start with a digit, separated by single / (e.g. robot1 or /lab/robot1)")
        if key in CHOICES and value not in CHOICES[key] and not (value == "" and key in FROM_MODEL):
            open_ = ' (or "" for the model\'s)' if key in FROM_MODEL else ""
            raise ConfigError(f"{where}: {key} must be one of {', '.join(CHOICES[key])}{open_}, got {value!r}")
        return value
    if key in ("devices", "emulate", "commands"):
        from ..hil.config import check_section
        return check_section(key, value, where)
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: {key} must be a mapping, got {value!r}")
    if key == "command_interfaces":
        out = {}
        for joint, kinds in value.items():
            kinds = [kinds] if isinstance(kinds, str) else kinds
            if not (isinstance(kinds, list) and kinds and all(k in COMMAND_INTERFACES for k in kinds)):
                raise ConfigError(f"{where}: command_interfaces.{joint} must be a list of "
                                  f"{', '.join(COMMAND_INTERFACES)}, got {value[joint]!r}")
            out[str(joint)] = list(kinds)
        return out
    if key == "pd_gains":
        gains = dict(default)
        for joint, kpkd in value.items():
            if not (isinstance(kpkd, (list, tuple)) and len(kpkd) == 2
                    and all(isinstance(g, (int, float)) and g >= 0 for g in kpkd)):
                raise ConfigError(f"{where}: pd_gains.{joint} must be [kp, kd] with numbers >= 0, got {kpkd!r}")
            gains[str(joint)] = [float(kpkd[0]), float(kpkd[1])]
        return gains
    return value
