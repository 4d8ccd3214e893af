"""A real device's samples, handed from the thread that receives them to the physics thread.

Timing. A sample is stamped on arrival with SimClock.now(): the simulation time the runner's
pacing schedule assigns to that wall-clock instant (Runner.sim_time: at real-time factor 1 the
two clocks are locked, so this is the arrival time on the simulation clock, exact to the
schedule even while the physics is catching up after a stall, when it is ahead of the
simulation). Without a paced runner (rtf 0, paused, a test stepping by hand) it is the
simulation time of the last completed step; ages then count simulation seconds. At each
instant the simulated sensor samples (its Reading's stamp, the acquisition time), the samples
stamped at or before it are candidates, and one is used if it is at most `max_age` old at that
instant, chosen by `resample`:
  newest  the newest candidate (the default: the least latency); candidates it overtook since
          the previous instant are counted as superseded
  each    the oldest candidate not used yet, unless the one after it is more than two sensor
          periods old (then the older ones are superseded): at equal rates every sample is
          published once, in order, for arrival jitter up to about +-1.5 periods, at most one
          period later than with newest; a faster device is decimated, a slower one held
Without a new candidate the last sample is held (while it is not older than max_age). A
simulation reset (time going back) makes every earlier sample stale. The choice is made when
the simulated reading is published, `delay` (sensors.<name>.delay) after its instant: a delay
of a few periods is a jitter buffer, so that samples arriving late still meet their instant.

timing: device (for protocols whose samples carry the device's own time: csv with a t column,
SCIP 2.0, Xsens SampleTimeFine) stamps a sample with its device time plus an offset, the least
(arrival stamp - device time) seen, allowed to creep up by OFFSET_CREEP per second (device clock
drift) and restarted when a sample arrives more than max_age later than the offset predicts (a
device restart): samples that reach the node in bursts (USB frames, a busy machine) keep their
true spacing, each no later than its arrival.

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

import collections
import math
import threading
from collections import Counter

import numpy as np

from .entries import rotation_matrix

STATES = ("ok", "stale", "down")
MAX_QUEUE = 4096        # samples waiting for the physics thread (a paused simulation keeps only these)
OFFSET_CREEP = 1e-3     # s per s: how fast the device-time offset may rise (1000 ppm of clock drift)


class SimClock:
    """Arrival stamps on the simulation clock. The physics thread calls tick(t) after each step;
    `schedule` (e.g. Runner.sim_time), when set, maps the wall clock to simulation time."""

    def __init__(self, t: float = 0.0, schedule=None):
        self.t = float(t)
        self.epoch = 0                  # + 1 at each reset (time going back)
        self.schedule = schedule

    def tick(self, t: float):
        if t < self.t - 1e-12:
            self.epoch += 1
        self.t = float(t)

    def now(self) -> float:
        schedule = self.schedule
        return self.t if schedule is None else schedule()


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
        self.resample_each = options.get("resample", "newest") == "each"
        self.device_timing = options.get("timing", "arrival") == "device"
        self._offset = None             # device timing: (offset, arrival of the sample that set it)
        self._last_push = (-math.inf, -1)   # device timing: (stamp, clock epoch) of the last sample
        self.period = 1.0 / float(rate)
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
        self._queue = collections.deque(maxlen=MAX_QUEUE)   # (values, arrival t, sequence number, device stamp)
        self._latest = None             # the sample the topic holds (last taken from the queue)
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
        clock = self.clock
        stamp, epoch = clock.now(), clock.epoch
        if self.device_timing and device_stamp is not None:
            stamp = self._device_time(stamp, device_stamp)
            if epoch == self._last_push[1]:
                stamp = max(stamp, self._last_push[0])      # a lower offset found: keep the queue in order
            self._last_push = (stamp, epoch)
        self._queue.append((v, stamp, self.received, device_stamp, epoch))
        return True

    def _device_time(self, arrival, device_stamp):
        delay = arrival - device_stamp
        offset = self._offset
        if offset is not None:
            predicted = offset[0] + OFFSET_CREEP * (arrival - offset[1])
            if delay <= predicted:
                offset = None                 # a quicker path: the new least delay
            elif delay - predicted > self.max_age or arrival < offset[1]:
                offset = None                 # the device (or the simulation) restarted
            else:
                return device_stamp + predicted
        self._offset = (delay, arrival)
        return arrival

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
        """At a sample instant of the simulated sensor (stamp: its Reading's stamp; t: the current
        simulation time, >= stamp; sim_values: the simulated Reading.values): what the sensor's topic
        carries (an array: the real sample, the held one or sim_values), or None for nothing.
        Updates state, counters and residual."""
        q = self._queue
        epoch = self.clock.epoch
        while q and q[0][4] != epoch:          # from before a reset
            q.popleft()
        if self._latest is not None and self._latest[4] != epoch:
            self._latest = None
            self._set_state("stale", "the samples are from before the simulation was reset")
        arrived = stamp + 1e-9
        if q and q[0][1] <= arrived:
            if self.resample_each:
                # one period of slack beyond the period a sample waits for its instant at equal
                # rates absorbs arrival jitter of about +-1.5 periods without a loss, and bounds
                # the lag of a faster device
                limit = stamp - 2 * self.period - 1e-9
                while len(q) >= 2 and q[1][1] < limit:
                    q.popleft()
                taken = q.popleft()
            else:
                taken = q.popleft()            # the newest stamped by the instant (the producer may append meanwhile)
                while q and q[0][1] <= arrived:
                    taken = q.popleft()
            # superseded: every sequence number skipped since the last one taken (the queue's
            # overflow, if the physics stood still for MAX_QUEUE samples, and samples from
            # before a reset included)
            self.superseded += max(taken[2] - self._used_seq - 1, 0)
            self._used_seq = taken[2]
            self._latest = taken
        latest = self._latest
        fresh = False
        if latest is not None:
            self.age = stamp - latest[1]
            self.device_stamp = latest[3]
            fresh = self.age <= self.max_age + 1e-9
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
            if self.state != "stale":
                self._set_state("stale", "no sample yet")
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

    def carries(self, state=None) -> str:
        """What the topic carries in `state` (default: the current one), in words."""
        if not self.use_real:
            return "the simulation (source sim)"
        if (state or self.state) == "ok":
            return "the real device"
        return {"hold": "the last real value", "sim": "the simulation", "drop": "nothing"}[self.on_fault]

    def _set_state(self, state, reason):
        with self._lock:
            if state == self.state:
                if state != "ok":
                    self.state_reason = reason
                return
            old, self.state, self.state_reason = self.state, state, reason
            self.state_changes += 1
        self.log(f"{self.name}: device {self.device} {old} -> {state} ({reason}); the topic carries {self.carries(state)}")

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
