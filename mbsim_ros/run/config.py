"""The run configuration: one YAML file (config/sim.yaml documents every key) shared by
`mbsim run --config` and the sim_node's `config` parameter; command-line options and ROS
parameters override it. Imports nothing of ROS.

    config = load_config("sim.yaml", {"real_time_factor": 0})     # RunConfig, checked
    config.dt, config.real_time_factor, config.paced

Every setting is a field of RunConfig with its default and meaning in one place; `check` turns
a value from a file, a command line or a ROS parameter into the field's type or raises a
ConfigError naming the setting and where it came from."""
from __future__ import annotations

import copy
import dataclasses
import math
import re
from dataclasses import dataclass, field

import yaml

from ..model import ConfigError

CHOICES = {"integrator": ("semi-implicit-euler", "rk4"), "contact": ("lcp", "penalty", "none"),
           "catch_up": ("compensatory", "conservative")}
COMMAND_INTERFACES = ("position", "velocity", "effort")
# left open (None / ""), these come from the models' settings (world.apply_model_settings)
FROM_MODEL = ("dt", "duration", "contact", "real_time_factor")
DEFAULT_REAL_TIME_FACTOR = 1.0     # when neither the user nor the models say
RATES = ("joint_state_rate", "tf_rate", "clock_rate", "diagnostics_rate")     # Hz


def _setting(default, text, factory=False):
    if factory:
        return field(default_factory=lambda: copy.deepcopy(default), metadata={"text": text})
    return field(default=default, metadata={"text": text})


@dataclass
class RunConfig:
    """One run's settings (the keys of the YAML file); each field's metadata["text"] says what
    it means. load_config builds it checked; assign only values `check` accepts."""
    model: str | list = _setting("", "model file(s), comma-separated (file name:=value ... for xacro), or a list of "
                                     "files and {file, name, pose: [x, y, z, roll, pitch, yaw], args}; '' = the "
                                     "bundled SR1 world")
    on_ground: bool = _setting(False, "lower every model until its lowest collision point touches what is below "
                                      "(a fixed base: its weld)")
    ground: bool = _setting(True, "a ground plane under a floating first model with nothing to stand on")
    floating_base: bool | None = _setting(None, "URDF: None = the root floats unless welded to a link named world; "
                                                "true/false forces")
    bound_massless: bool = _setting(True, "massless leaves get 1 % of the mass and inertia of the body they hang from")
    keyframe: str = _setting("", "MJCF: start from this <key> (name, or index for unnamed keys)")
    z_up: bool = _setting(False, "OpenSim (y up): turn the model so that its +y is the world's +z")
    dt: float | None = _setting(None, "physics step (s); None = the model's time_step, else 0.001")
    duration: float | None = _setting(None, "simulated seconds; None = the model's end_time, else 5 (run) / no end (node)")
    integrator: str = _setting("semi-implicit-euler", "semi-implicit-euler | rk4")
    contact: str = _setting("", "lcp | penalty | none; '' = the model's contact method, else lcp")
    massless_armature: float = _setting(0.0, "kg m^2 (kg): armature for joints moving only massless links; 0 = refuse them")
    hold: float = _setting(2000.0, "joint springs holding the initial pose (0: off)")
    real_time_factor: float | None = _setting(None, "0 = as fast as possible; None = the model's (an SDFormat "
                                                    "world's <physics>), else 1")
    catch_up: str = _setting("compensatory", "compensatory | conservative")
    realtime_priority: int = _setting(0, "physics thread under SCHED_FIFO at this priority (1-99; 0 = off)")
    cpu: int | None = _setting(None, "physics thread pinned to this core (None = anywhere)")
    namespace: str = _setting("", "'' = the first model's name")
    frame_prefix: str = _setting("", "prepended to every link and sensor frame id")
    seed: int = _setting(0, "world noise seed")
    joint_state_rate: float = _setting(100.0, "Hz")
    tf_rate: float = _setting(100.0, "Hz")
    clock_rate: float = _setting(1000.0, "Hz (at most the physics rate)")
    diagnostics_rate: float = _setting(1.0, "Hz")
    merge_imu: bool = _setting(False, "one Imu per link from its accelerometer + gyro")
    pd_gains: dict = _setting({"default": [100.0, 10.0]}, "joint_commands position/velocity tracking: [kp, kd]",
                              factory=True)
    joint_commands_topic: str = _setting("joint_commands", "JointState commands in; relative to the namespace unless /...")
    joint_states_topic: str = _setting("joint_states", "JointState position, velocity, effort of every DOF out")
    command_interfaces: dict = _setting({}, "per joint: [position, velocity, effort], the interfaces a shorter-than-name "
                                            "command array maps to (joint_state_topic_hardware_interface's layout)",
                                        factory=True)
    sensors: dict = _setting({}, "per sensor: rate, delay, saturate, noise, enabled, points", factory=True)
    devices: dict = _setting({}, "per sensor: its real device (hardware in the loop, config/hil.yaml)", factory=True)
    emulate: dict = _setting({}, "per sensor: a serial port to write it to in a device protocol", factory=True)
    commands: dict | list = _setting({}, "joint commands read from a serial port (csv lines)", factory=True)
    actuators_enabled: bool = _setting(True, "the models' actuators on (sim.actuators_enabled)")

    @property
    def target_rtf(self) -> float:
        """The real-time factor asked for: real_time_factor, or DEFAULT_REAL_TIME_FACTOR while it
        is None (not yet filled in from the models)."""
        return float(DEFAULT_REAL_TIME_FACTOR if self.real_time_factor is None else self.real_time_factor)

    @property
    def paced(self) -> bool:
        """Whether the run keeps to the wall clock: real_time_factor 0 means as fast as possible,
        and this is the one place that reads it so."""
        return self.target_rtf > 0

    def replace(self, **changes) -> "RunConfig":
        """A copy with `changes` checked and applied (ConfigError naming a bad one)."""
        out = copy.deepcopy(self)
        _merge(out, changes, "replace")
        return out

    def as_dict(self) -> dict:
        """{key: value} of every setting (a deep copy): what a YAML file would hold."""
        return copy.deepcopy({f.name: getattr(self, f.name) for f in dataclasses.fields(self)})


KEYS = tuple(f.name for f in dataclasses.fields(RunConfig))
DEFAULTS = RunConfig().as_dict()          # every setting's default, from RunConfig


def load_config(path=None, overrides=None) -> RunConfig:
    """RunConfig's defaults, then the YAML file at `path` (if any), then `overrides` (a mapping;
    None values skipped): each value checked, a ConfigError naming the file (or "command line")
    and the key otherwise."""
    config = RunConfig()
    if path:
        _merge(config, read_yaml_mapping(path, "configuration file", "settings"), str(path))
    _merge(config, {k: v for k, v in (overrides or {}).items() if v is not None}, "command line")
    return config


def read_yaml_mapping(path, what="configuration file", items="settings", error=ConfigError) -> dict:
    """The mapping at the top level of the YAML file `path` ({} for an empty file); `error` (a
    ConfigError class) naming the file, and the line where the YAML breaks, otherwise."""
    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f)
    except FileNotFoundError:
        raise error(f"{path}: no such {what}") from None
    except UnicodeDecodeError as e:
        raise error(f"{path}: byte {e.start} is not UTF-8: expected a UTF-8 YAML {what}") from None
    except IsADirectoryError:
        raise error(f"{path}: a directory, expected a YAML {what}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        raise error(f"{path}:{line}: not valid YAML ({getattr(e, 'problem', None) or e})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise error(f"{path}: expected a mapping of {items} at the top level, got {type(data).__name__}")
    return data


def valid_namespace(text: str) -> bool:
    """Whether `text` is a valid ROS 2 namespace (rmw's rules): tokens of letters, digits and _
    not starting with a digit, separated by single slashes, an optional leading slash, no
    trailing one."""
    return re.fullmatch(r"/?[A-Za-z_][A-Za-z0-9_]*(/[A-Za-z_][A-Za-z0-9_]*)*", text) is not None


def _merge(config, data, where):
    for key, value in data.items():
        if key not in DEFAULTS:
            raise ConfigError(f"{where}: unknown setting {key!r}; expected one of {', '.join(KEYS)}")
        setattr(config, key, check(key, value, where))


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


def check(key, value, where):
    """`value` for setting `key` in the setting's type; ConfigError "<where>: <key> ..." otherwise."""
    default = DEFAULTS[key]
    if key == "model":
        return _check_models(value, where)
    if key == "floating_base":
        if value is not None and not isinstance(value, bool):
            raise ConfigError(f"{where}: {key} must be true, false or null (as the file says), got {value!r}")
        return value
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
        positive = key.endswith("_rate") or key in ("dt", "duration")
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
        from ..hil.entries import check_section
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
