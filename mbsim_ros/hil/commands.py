"""Joint commands from a real controller board over a serial port: one csv line per command,
one column per joint of the entry's `joints` list (in that order), in the entry's `mode`
(position rad|m, velocity rad/s|m/s, effort N m|N; value * scale), e.g. for
joints [RLEG_HIP_R, RLEG_KNEE] in position mode the line "0.10,-0.25" sets both targets.

A line with the wrong number of columns, a column that is not a finite number or bytes that are
not ASCII is dropped and counted as a fault; so is a line of more than MAX_LINE bytes. The
commands go to `deliver(names, mode, values)`, the ROS layer's joint command path (PD tracking
for position and velocity, as for NS/joint_commands)."""
from __future__ import annotations

import math
from collections import Counter

import numpy as np

from ..model import ConfigError
from .link import SerialLink

MAX_LINE = 4096


class CommandReader:
    """Reads the port of one checked commands: entry; joint_names: the DOF names commands may
    name (a name outside them is a ConfigError here, before the run)."""

    def __init__(self, options: dict, joint_names, deliver, log=None, where: str = "commands"):
        unknown = [j for j in options["joints"] if j not in set(joint_names)]
        if unknown:
            raise ConfigError(f"{where}.joints: unknown joint(s) {', '.join(unknown)}; the models' joints with "
                              f"one coordinate are {', '.join(joint_names)}")
        self.options = options
        self.names = list(options["joints"])
        self.mode = options["mode"]
        self.scale = np.broadcast_to(np.asarray(options["scale"], float), (len(self.names),)).copy()
        self.separator = options["separator"]
        self.deliver = deliver
        self.lines = 0
        self.commands = 0
        self.faults = Counter()
        self.last_fault = None
        self.last_values = None
        self._buffer = b""
        self._skipping = False
        self.link = SerialLink(options["port"], options["baudrate"], self._on_data, name=f"commands {options['port']}",
                               log=log)

    def start(self):
        self.link.start()
        return self

    def close(self):
        self.link.close()

    def _fault(self, kind, text):
        self.faults[kind] += 1
        self.last_fault = text

    def _on_data(self, data: bytes):
        data = self._buffer + data.replace(b"\r", b"\n")
        lines = data.split(b"\n")
        self._buffer = lines.pop()
        if self._skipping and lines:
            lines = lines[1:]
            self._skipping = False
        if len(self._buffer) > MAX_LINE:
            self._fault("overflow", f"commands: no line end within {MAX_LINE} bytes; dropped them")
            self._buffer = b""
            self._skipping = True
        for line in lines:
            self._line(line)
        return None

    def _line(self, line: bytes):
        line = line.strip()
        if not line:
            return
        self.lines += 1
        try:
            text = line.decode("ascii")
        except UnicodeDecodeError:
            self._fault("garbage", f"commands: non-ASCII bytes in line {line[:80]!r}")
            return
        cols = text.split() if not self.separator.strip() else text.split(self.separator)
        if len(cols) != len(self.names):
            self._fault("bad_value", f"commands: {len(cols)} columns, expected {len(self.names)} "
                                     f"({' '.join(self.names)}): {text[:80]!r}")
            return
        try:
            values = np.array([float(c) for c in cols]) * self.scale
        except ValueError:
            self._fault("bad_value", f"commands: a column is not a number: {text[:80]!r}")
            return
        if not all(math.isfinite(v) for v in values):
            self._fault("bad_value", f"commands: a column is not finite: {text[:80]!r}")
            return
        self.commands += 1
        self.last_values = values
        self.deliver(self.names, self.mode, values)

    def stats(self) -> dict:
        faults = Counter(self.faults)
        faults.update(self.link.faults)
        return {"port": self.options["port"], "connected": self.link.connected, "mode": self.mode,
                "lines": self.lines, "commands": self.commands, "faults": dict(faults),
                "last_fault": self.last_fault or self.link.last_fault}
