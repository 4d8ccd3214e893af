"""A real device's samples, handed from the thread that receives them to the physics thread.

Timing. A sample is stamped on arrival with the simulation time of the last completed step
(`SimClock.t`, written by the physics thread after each step): at real-time factor 1 the runner
keeps simulation and wall clocks locked, so this is the arrival time on the simulation clock,
late by less than one step. (At other factors it is still "the simulation time when the sample
arrived"; ages then count simulation seconds.) At each instant the simulated sensor samples
(its rate), the newest sample received is used if it is at most `max_age` old; samples that
arrived since the previous instant and were overtaken by a newer one are counted as
superseded (resampling to the sensor's rate holds the latest sample).

State, decided at each sample instant (and when the connection changes):
  ok     a sample not older than max_age
  stale  connected, but no sample yet or the newest is older than max_age (the device stopped talking)
  down   the port is not open (absent, vanished: being reopened)
While the state is not ok the topic carries what `on_fault` says: hold (the last real value,
nothing before the first), sim (the simulated value) or drop (nothing). One log line per change.

Residual: at each instant with a fresh real sample, real - simulated (per channel; a range
sensor's scan gives one number, the mean over rays finite in both), kept over the last
`residual_window` seconds of instants for the mean and RMS /diagnostics shows.
"""
from __future__ import annotations

import math
import threading
from collections import Counter

import numpy as np

from .config import rotation_matrix

STATES = ("ok", "stale", "down")


class SimClock:
    """The simulation time of the last completed step; the physics thread sets `t`."""

    def __init__(self, t: float = 0.0):
        self.t = float(t)


class DeviceSource:
    """One real device in place of the simulated sensor `name` (kind: accelerometer, gyro,
    force or range; channels: values per sample). options: its checked devices: entry.

    Producer side (any one thread): push(values, device_stamp), set_connected(bool, reason),
    fault(kind, text). Physics thread: take(stamp, t, sim_values). Any thread: stats()."""

    def __init__(self, name: str, kind: str, channels: int, rate: float, options: dict, clock: SimClock,
                 log=None, connected: bool = True):
        self.name = name
        self.kind = kind
        self.channels = int(channels)
        self.options = options
        self.clock = clock
        self.log = log or (lambda text: None)
        self.use_real = options["source"] != "sim"
        self.device = options["topic"] if options.get("topic") else options["port"]
        self.on_fault = options["on_fault"]
        self.max_age = float(options["max_age"])
        R = rotation_matrix(options["rotation"])
        if R is not None and kind == "range":
            R = None                    # a scan is distances along the simulated rays: nothing to rotate
        self.rotation = R
        self.parser = None              # the protocol parser, for its fault counts (serial devices)
        self.link = None                # the SerialLink (serial devices), for its port fault counts
        self.connected = bool(connected)
        self.received = 0               # samples pushed
        self.used = 0                   # instants served by a fresh real sample
        self.published = 0              # real values given to the topic (fresh or held)
        self.superseded = 0             # samples overtaken by a newer one before any instant used them
        self.faults = Counter()         # this runtime's own faults (layout, ...)
        self.last_fault = None
        self.state = "down" if not self.connected else "stale"
        self.state_reason = "no sample yet"
        self.state_changes = 0
        self.age = math.inf
        self.device_stamp = None
        self._latest = None             # (values, arrival t, sequence number, device stamp): swapped whole
        self._used_seq = 0
        self._lock = threading.Lock()   # state transitions and the residual window
        n = max(1, int(math.ceil(float(options["residual_window"]) * rate - 1e-9)))
        width = 2 if kind == "range" else self.channels
        self._residual = np.zeros((n, width))
        self._nres = 0

    # -- producer side -----------------------------------------------------------------------
    def push(self, values, device_stamp=None) -> bool:
        """A sample from the device (SI, device frame): rotated into the sensor frame and stamped
        with the simulation time of arrival. False (and a 'layout' fault) if it has the wrong size."""
        v = np.asarray(values, dtype=np.float64).reshape(-1)
        if v.shape[0] != self.channels:
            self.fault("layout", f"{self.name}: a sample with {v.shape[0]} values, the sensor has {self.channels}")
            return False
        if self.rotation is not None:
            v = (self.rotation @ v.reshape(-1, 3).T).T.reshape(-1)
        self.received += 1
        self._latest = (v, self.clock.t, self.received, device_stamp)
        return True

    def fault(self, kind: str, text: str, count: bool = True):
        """A fault of this runtime (count=True) or the latest text of one the parser or the port
        counted themselves (count=False): last_fault is the latest of all."""
        if count:
            self.faults[kind] += 1
        self.last_fault = text

    def set_connected(self, connected: bool, reason: str = ""):
        self.connected = bool(connected)
        if not connected:
            self._set_state("down", reason or "port closed")
        elif self.state == "down":
            self._set_state("stale", "port open, waiting for a sample")

    # -- physics thread ----------------------------------------------------------------------
    def take(self, stamp: float, t: float, sim_values):
        """At a sample instant of the simulated sensor (its Reading's stamp; t = the current
        simulation time; sim_values = the simulated Reading.values): what the sensor's topic
        carries (an array: the real sample, the held one or sim_values), or None for nothing.
        Updates state, counters and residual."""
        latest = self._latest
        fresh = False
        if latest is not None:
            seq = latest[2]
            if seq != self._used_seq:
                self.superseded += max(seq - self._used_seq - 1, 0)
                self._used_seq = seq
            self.age = t - latest[1]
            self.device_stamp = latest[3]
            fresh = -1e-9 <= self.age <= self.max_age + 1e-9     # negative: from before a reset
        if fresh:
            self._set_state("ok", "receiving")
            self.used += 1
            self._add_residual(latest[0], sim_values)
            if self.use_real:
                self.published += 1
                return latest[0]
            return sim_values
        if not self.connected:
            self._set_state("down", self.state_reason if self.state == "down" else "port closed")
        elif latest is None:
            self._set_state("stale", "no sample yet")
        elif self.age < 0:
            self._set_state("stale", "the newest sample is from before the simulation was reset")
        else:
            self._set_state("stale", f"no sample for {self.age:.3g} s (max_age {self.max_age:g} s)")
        if not self.use_real or self.on_fault == "sim":
            return sim_values
        if self.on_fault == "hold" and latest is not None:
            self.published += 1
            return latest[0]
        return None

    def set_source(self, source: str) -> str:
        """'real' (or the device's kind) puts the device on the topic, 'sim' the simulation;
        returns a sentence saying what the topic now carries."""
        self.use_real = source != "sim"
        return f"{self.name}: the topic carries {'the real device ' + self.device if self.use_real else 'the simulation'}"

    def _set_state(self, state, reason):
        with self._lock:
            if state == self.state:
                if state != "ok":
                    self.state_reason = reason
                return
            old, self.state, self.state_reason = self.state, state, reason
            self.state_changes += 1
        carries = "the real device" if state == "ok" else {"hold": "the last real value", "sim": "the simulation",
                                                            "drop": "nothing"}[self.on_fault]
        if not self.use_real:
            carries = "the simulation (source sim)"
        self.log(f"{self.name}: device {self.device} {old} -> {state} ({reason}); the topic carries {carries}")

    def _add_residual(self, real, sim):
        if self.kind == "range":
            with np.errstate(invalid="ignore"):     # inf - inf: a ray without a return in both
                d = np.subtract(real, sim)
            valid = np.isfinite(d)
            if not valid.any():
                return
            dv = d[valid]
            row = (dv.mean(), (dv * dv).mean())
        else:
            row = np.subtract(real, sim)
        with self._lock:
            self._residual[self._nres % len(self._residual)] = row
            self._nres += 1

    # -- any thread --------------------------------------------------------------------------
    def residual(self):
        """(mean, rms, count) over the window: per channel, or one number each for a range sensor;
        (None, None, 0) before the first fresh sample."""
        with self._lock:
            n = min(self._nres, len(self._residual))
            rows = self._residual[:n].copy()
        if n == 0:
            return None, None, 0
        if self.kind == "range":
            return float(rows[:, 0].mean()), float(math.sqrt(rows[:, 1].mean())), n
        return rows.mean(axis=0), np.sqrt((rows * rows).mean(axis=0)), n

    def all_faults(self) -> Counter:
        """Fault counts of the parser, the port and this runtime together."""
        out = Counter(self.faults)
        if self.parser is not None:
            out.update(self.parser.faults)
        if self.link is not None:
            out.update(self.link.faults)
        return out

    def stats(self) -> dict:
        mean, rms, n = self.residual()
        return {"state": self.state, "reason": self.state_reason, "source": "real" if self.use_real else "sim",
                "device": self.device, "received": self.received, "used": self.used, "published": self.published,
                "superseded": self.superseded, "age": self.age, "device_stamp": self.device_stamp,
                "faults": dict(self.all_faults()), "last_fault": self.last_fault,
                "residual_mean": mean, "residual_rms": rms, "residual_samples": n}
