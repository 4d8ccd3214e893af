"""The `devices:`, `emulate:` and `commands:` sections of the run configuration (config/hil.yaml
documents every key). check_section() validates the structure when the configuration is loaded
and fills in the defaults; what needs the world (sensor and joint names, the protocol's own
options against the sensor) and the ports themselves (check_port) are checked when the run is
built, before the first step. Either way a bad entry is one ConfigError naming its key path.
"""
from __future__ import annotations

import math
import os

from ..model import ConfigError

SOURCES = ("serial", "ros", "sim")
ON_FAULT = ("hold", "sim", "drop")
RESAMPLE = ("newest", "each")
TIMING = ("arrival", "device")
COMMAND_MODES = ("position", "velocity", "effort")

# Runtime keys of a devices: entry (any other key is the protocol's, checked by its parser).
DEVICE_DEFAULTS = {
    "source": None,            # serial | ros | sim; default: serial with a port, ros with a topic
    "port": None,              # pyserial URL: a device path, socket://host:port, rfc2217://, loop://
    "baudrate": 115200,
    "protocol": None,          # serial devices: csv | scip2 | xsens (hil/protocols)
    "topic": None,             # ros: the real driver's topic, same message type as the sensor's
    "rotation": [0.0, 0.0, 0.0],   # rpy (rad) of the device frame in the sensor frame
    "on_fault": "hold",        # what the topic carries while the device is down or stale
    "max_age": 0.1,            # s of simulation time: an older sample is not used (the device is stale)
    "resample": "newest",      # newest: the newest sample at each instant; each: every sample once, in
                               #   order, at most one sensor period later (none lost to arrival jitter)
    "timing": "arrival",       # arrival: stamp on arrival; device: the device's own time (where the protocol
                               #   carries one) mapped onto arrival times by the least delay seen
    "residual_window": 1.0,    # s: real - simulated mean and RMS over this window
}
EMULATE_DEFAULTS = {"port": None, "baudrate": 115200, "protocol": None, "rotation": [0.0, 0.0, 0.0]}
COMMAND_DEFAULTS = {"port": None, "baudrate": 115200, "protocol": "csv", "joints": None, "mode": "position",
                    "separator": ",", "scale": 1.0}


def check_section(key: str, value, where: str):
    """The checked `devices`, `emulate` or `commands` section with defaults filled in."""
    if value is None:
        value = {} if key != "commands" else []
    if key == "commands":
        entries = value if isinstance(value, list) else [value] if value else []
        out = []
        for k, entry in enumerate(entries):
            at = f"{where}: commands" + (f"[{k}]" if isinstance(value, list) else "")
            out.append(_command(entry, at))
        return out if isinstance(value, list) else (out[0] if out else {})
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: {key} must be a mapping of sensor names to entries, got {value!r}")
    check = _device if key == "devices" else _emulated
    return {str(name): check(entry, f"{where}: {key}.{name}") for name, entry in value.items()}


def _entry(entry, defaults, at):
    if not isinstance(entry, dict):
        raise ConfigError(f"{at}: expected a mapping of settings, got {entry!r}")
    out = dict(defaults)
    out.update(entry)
    if out["port"] is not None:
        out["port"] = _port_text(out["port"], f"{at}.port")
    out["baudrate"] = _number(out["baudrate"], f"{at}.baudrate", positive=True, integer=True)
    return out


def _device(entry, at):
    out = _entry(entry, DEVICE_DEFAULTS, at)
    port, topic = out["port"], out["topic"]
    if port is not None and topic is not None:
        raise ConfigError(f"{at}: give either port (a serial device) or topic (a ROS driver), not both")
    if port is None and topic is None:
        raise ConfigError(f"{at}: the real device is missing: give port (a serial device) or topic (a ROS driver's topic)")
    if out["source"] is None:
        out["source"] = "serial" if port is not None else "ros"
    if out["source"] not in SOURCES:
        raise ConfigError(f"{at}.source: expected one of {', '.join(SOURCES)}, got {out['source']!r}")
    if out["source"] == "serial" and port is None:
        raise ConfigError(f"{at}: source serial needs a port")
    if out["source"] == "ros" and topic is None:
        raise ConfigError(f"{at}: source ros needs a topic")
    if topic is not None:
        if not isinstance(topic, str) or not topic.startswith("/"):
            raise ConfigError(f"{at}.topic: expected an absolute ROS topic name such as /ft_driver/wrench, got {topic!r}")
        if out["protocol"] is not None:
            raise ConfigError(f"{at}.protocol: a ROS topic carries messages, not a serial protocol; remove protocol")
    elif out["protocol"] is None:
        raise ConfigError(f"{at}.protocol: a serial device needs its protocol (csv, scip2, xsens)")
    if out["on_fault"] not in ON_FAULT:
        raise ConfigError(f"{at}.on_fault: expected one of {', '.join(ON_FAULT)}, got {out['on_fault']!r}")
    if out["timing"] not in TIMING:
        raise ConfigError(f"{at}.timing: expected one of {', '.join(TIMING)}, got {out['timing']!r}")
    if out["resample"] not in RESAMPLE:
        raise ConfigError(f"{at}.resample: expected one of {', '.join(RESAMPLE)}, got {out['resample']!r}")
    out["rotation"] = _rotation(out["rotation"], f"{at}.rotation")
    out["max_age"] = _number(out["max_age"], f"{at}.max_age", positive=True)
    out["residual_window"] = _number(out["residual_window"], f"{at}.residual_window", positive=True)
    return out


def _emulated(entry, at):
    out = _entry(entry, EMULATE_DEFAULTS, at)
    if out["port"] is None:
        raise ConfigError(f"{at}.port: the serial port to write the emulated device to is missing")
    if out["protocol"] is None:
        raise ConfigError(f"{at}.protocol: the protocol to speak is missing (csv, scip2, xsens)")
    out["rotation"] = _rotation(out["rotation"], f"{at}.rotation")
    return out


def _command(entry, at):
    out = _entry(entry, COMMAND_DEFAULTS, at)
    unknown = sorted(set(out) - set(COMMAND_DEFAULTS))
    if unknown:
        raise ConfigError(f"{at}: unknown key(s) {', '.join(unknown)}; expected {', '.join(COMMAND_DEFAULTS)}")
    if out["port"] is None:
        raise ConfigError(f"{at}.port: the serial port the controller writes commands to is missing")
    if out["protocol"] != "csv":
        raise ConfigError(f"{at}.protocol: joint commands are read as csv lines, got {out['protocol']!r}")
    joints = out["joints"]
    if not (isinstance(joints, list) and joints and all(isinstance(j, str) and j for j in joints)):
        raise ConfigError(f"{at}.joints: expected the list of joint (DOF) names in column order, got {joints!r}")
    if len(set(joints)) != len(joints):
        raise ConfigError(f"{at}.joints: a joint appears twice in {joints}")
    if out["mode"] not in COMMAND_MODES:
        raise ConfigError(f"{at}.mode: expected one of {', '.join(COMMAND_MODES)}, got {out['mode']!r}")
    sep = out["separator"]
    if not isinstance(sep, str) or not sep or "\n" in sep or "\r" in sep:
        raise ConfigError(f"{at}.separator: expected a non-empty string without line breaks, got {sep!r}")
    scale = out["scale"]
    if isinstance(scale, list):
        if len(scale) != len(joints):
            raise ConfigError(f"{at}.scale: {len(scale)} numbers for {len(joints)} joints")
        out["scale"] = [_number(s, f"{at}.scale[{k}]") for k, s in enumerate(scale)]
    else:
        out["scale"] = _number(scale, f"{at}.scale")
    return out


def protocol_options(entry: dict) -> dict:
    """A devices:/emulate: entry without the runtime's keys: the protocol name and its options."""
    runtime = set(DEVICE_DEFAULTS) | set(EMULATE_DEFAULTS)
    return {k: v for k, v in entry.items() if k == "protocol" or k not in runtime}


def _number(value, at, positive=False, integer=False):
    try:
        x = float(value)
    except (TypeError, ValueError):
        x = math.nan
    if isinstance(value, bool) or not math.isfinite(x) or (positive and x <= 0) or (integer and x != int(x)):
        what = "a whole number" if integer else "a finite number"
        raise ConfigError(f"{at}: expected {what}{' > 0' if positive else ''}, got {value!r}")
    return int(x) if integer else x


def _rotation(value, at):
    if not (isinstance(value, (list, tuple)) and len(value) == 3):
        raise ConfigError(f"{at}: expected [roll, pitch, yaw] in radians, got {value!r}")
    return [_number(v, f"{at}[{k}]") for k, v in enumerate(value)]


def _port_text(port, at):
    if not isinstance(port, str) or not port.strip():
        raise ConfigError(f"{at}: expected a device path or a pyserial URL, got {port!r}")
    return port.strip()


def check_port(port: str, at: str) -> None:
    """A device path must exist; a URL (scheme://...) must name a pyserial URL handler. Whether
    the device answers is the run's business (it retries and reports)."""
    if "://" in port:
        scheme = port.split("://", 1)[0]
        import importlib
        try:
            importlib.import_module(f"serial.urlhandler.protocol_{scheme}")
        except ImportError:
            raise ConfigError(f"{at}: {port!r}: pyserial has no URL handler {scheme}:// "
                              "(socket://, rfc2217://, loop://, spy://, alt://, hwgrep://)") from None
        return
    if not os.path.exists(port):
        raise ConfigError(f"{at}: {port} does not exist (is the device plugged in? serial devices are e.g. "
                          "/dev/ttyUSB0, /dev/ttyACM0, /dev/serial/by-id/...)")


def rotation_matrix(rpy):
    """R = Rz(yaw) Ry(pitch) Rx(roll) (URDF/ROS fixed-axis roll, pitch, yaw), or None for the identity."""
    import numpy as np
    r, p, y = (float(a) for a in rpy)
    if r == p == y == 0.0:
        return None
    cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
    return np.array([[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                     [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                     [-sp, cp * sr, cp * cr]])
