"""Device protocols: parsers that turn a real device's byte stream into Samples, and encoders
that speak the device's side of the protocol for the simulation (emulation and tests).

    parser = make_parser({"protocol": "csv", "fields": ["t", "ax", "ay", "az"]}, sensor)
    port.write(parser.startup())
    for sample in parser.feed(port.read(n)):       # any chunking; never raises on bad bytes
        ...                                        # sample.values in SI, the device frame
    port.write(parser.pending_output())            # request/reply protocols (SCIP 2.0)

    encoder = make_encoder({"protocol": "scip2"}, sensor)
    port.write(encoder.respond(port.read(n)))       # answers the host's commands
    port.write(encoder.encode(reading.values, reading.stamp))   # one frame of the stream

A Sample's values have the layout of the simulated sensor's Reading.values
(sensors/devices.py): accelerometer (ax, ay, az) m/s^2, gyro (wx, wy, wz) rad/s, force
(fx, fy, fz, tx, ty, tz) N and N m, range: distances in metres in the simulated ray order
(+inf: no return, -inf: closer than the range minimum). `stamp` is the device's own time in
seconds where the protocol carries one, else None.

Protocols (one module each): csv (line-based text), scip2 (Hokuyo SCIP 2.0 laser range
finders), xsens (Xsens Xbus MTData2 inertial data). Options are the sensor's `devices:` or
`emulate:` entry; the runtime's keys (RUNTIME_KEYS: source, port, baudrate, rotation, on_fault,
max_age, topic, residual_window) are skipped here, any other key is an error.
"""
import math
from collections import Counter
from dataclasses import dataclass

import numpy as np

from ...model.errors import ConfigError

# Reading.values layout per sensor type, named as the csv protocol names its columns.
CHANNELS = {"accelerometer": ("ax", "ay", "az"), "gyro": ("gx", "gy", "gz"),
            "force": ("fx", "fy", "fz", "tx", "ty", "tz")}


class ProtocolError(ConfigError):
    """A protocol option is missing, unknown or holds a bad value; the message names the
    option and what was expected."""


@dataclass
class Sample:
    """One reading from a device: `values` in SI units in the device frame (the layout of the
    simulated sensor's Reading.values), `stamp` the device's own time in s (None: no device time)."""
    values: np.ndarray
    stamp: float | None = None


class Parser:
    """Host side of a protocol. Subclasses implement feed(); the fault bookkeeping is here."""

    def __init__(self):
        self.faults = Counter()         # cumulative: garbage, checksum, half_frame, bad_value, overflow, ...
        self.last_fault = None          # human-readable description of the latest fault

    def startup(self) -> bytes:
        """Bytes to write once after opening the port."""
        return b""

    def pending_output(self) -> bytes:
        """Bytes the protocol wants written now (replies driven by feed()); b"" if none."""
        return b""

    def feed(self, data: bytes) -> list:
        """The Samples completed by `data` (any chunking: partial frames wait for the next
        call). Never raises on bad bytes: faults are counted and the parser resynchronises."""
        raise NotImplementedError

    def fault(self, kind, message):
        self.faults[kind] += 1
        self.last_fault = message


class Encoder:
    """Device side of a protocol."""

    def encode(self, values, stamp) -> bytes:
        """One frame of the device's output for a reading (SI values, stamp in s); b"" when
        the host has nothing requested (SCIP 2.0 without MD/GD, Xsens in config mode)."""
        raise NotImplementedError

    def respond(self, data: bytes) -> bytes:
        """Answer host commands in `data` (partial commands kept); stream-only protocols: b""."""
        return b""


# -- option helpers shared by the protocol modules ------------------------------------------------
def number(value, where, positive=False):
    """A finite float (> 0 with positive), else ProtocolError naming `where`."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        x = math.nan
    if isinstance(value, bool) or not math.isfinite(x) or (positive and x <= 0):
        raise ProtocolError(f"{where}: expected a finite number{' > 0' if positive else ''}, got {value!r}")
    return x


def check_type(sensor, types, protocol, where):
    if sensor.type not in types:
        raise ProtocolError(f"{where}.protocol: {protocol} carries {' or '.join(types)} data, "
                            f"but sensor {sensor.name} is a {sensor.type} sensor")


from . import csv, scip2, xsens  # noqa: E402  (the modules import the names above)

PROTOCOLS = {"csv": (csv.CsvParser, csv.CsvEncoder),
             "scip2": (scip2.Scip2Parser, scip2.Scip2Encoder),
             "xsens": (xsens.XsensParser, xsens.XsensEncoder)}
# Every protocol's own option keys. The keys of a devices:/emulate: entry that belong to the runtime
# (mbsim_ros/hil/entries.py) are skipped here; any other key is an error.
OPTIONS = {"csv": csv.OPTIONS, "scip2": scip2.OPTIONS, "xsens": xsens.OPTIONS}
RUNTIME_KEYS = {"protocol", "source", "port", "baudrate", "rotation", "on_fault", "max_age", "topic",
                "residual_window"}


def _options(options, sensor, where):
    """(protocol name, this protocol's options) after checking the keys."""
    where = where or f"devices.{sensor.name}"
    if options is not None and not isinstance(options, dict):
        raise ProtocolError(f"{where}: expected a mapping of options (protocol: ..., ...), got {options!r}")
    options = dict(options or {})
    name = options.get("protocol")
    if name not in PROTOCOLS:
        raise ProtocolError(f"{where}.protocol: expected one of {', '.join(PROTOCOLS)}, got {name!r}")
    foreign = sorted(str(k) for k in options if k not in OPTIONS[name] and k not in RUNTIME_KEYS)
    if foreign:
        raise ProtocolError(f"{where}: option(s) {', '.join(foreign)} do not apply to protocol {name}; "
                            f"its options are {', '.join(sorted(OPTIONS[name])) or 'none'}")
    return name, {k: v for k, v in options.items() if k in OPTIONS[name]}, where


def make_parser(options: dict, sensor, where: str | None = None) -> Parser:
    """The host-side parser for `sensor` (a mbsim_ros.model.Sensor) configured by `options` (its
    devices: entry). `where` names the entry in error messages (default devices.<sensor name>)."""
    name, opts, where = _options(options, sensor, where)
    return PROTOCOLS[name][0](opts, sensor, where)


def make_encoder(options: dict, sensor, where: str | None = None) -> Encoder:
    """The device-side encoder for `sensor` configured by `options` (its emulate: entry)."""
    name, opts, where = _options(options, sensor, where or f"emulate.{sensor.name}")
    return PROTOCOLS[name][1](opts, sensor, where)


__all__ = ["CHANNELS", "Encoder", "PROTOCOLS", "Parser", "ProtocolError", "RUNTIME_KEYS", "Sample", "make_encoder",
           "make_parser"]
