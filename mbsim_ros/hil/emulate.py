"""A simulated sensor written out of a serial port in a device protocol, for a real controller
board or an unmodified driver (urg_node for SCIP 2.0) to read as if it were the device.

The physics thread hands each new simulated reading to submit() (no waiting: a bounded queue);
a writer thread encodes it with the protocol's encoder (one frame per reading, at the sensor's
rate) and writes it; the port's reader thread answers the host's commands with the encoder's
respond() (SCIP 2.0: PP, MD, GD, ...). The encoder is used by both threads under one lock.
An accelerometer and a gyro given the same port with protocol xsens are one emulated MTi: each
message carries both quantities of one sample instant (they must sample together: same rate).
"""
from __future__ import annotations

import collections
import threading

import numpy as np

from .entries import protocol_options, rotation_matrix
from .link import SerialLink
from .protocols import make_encoder


class Emulator:
    """Writes sensor `sensor`'s readings to the port its options (a checked emulate: entry) name;
    `gyro`: (Sensor, options) of a gyro sent in the same messages (protocol xsens)."""

    def __init__(self, sensor, options: dict, log=None, max_queue: int = 64, gyro=None):
        self.name = sensor.name if gyro is None else f"{sensor.name}+{gyro[0].name}"
        self.options = options
        self.encoder = make_encoder(protocol_options(options), sensor, f"emulate.{sensor.name}")
        R = rotation_matrix(options["rotation"])
        self.rotation = None if R is None or sensor.type == "range" else R.T    # sensor -> device frame
        self.pair = None
        if gyro is not None:            # (accelerometer name, gyro name, gyro's sensor -> device rotation)
            Rg = rotation_matrix(gyro[1]["rotation"])
            self.pair = (sensor.name, gyro[0].name, np.eye(3) if Rg is None else Rg.T)
            self.rotation = np.eye(3) if self.rotation is None else self.rotation
            self._half = {}             # stamp -> (name, values) waiting for the other sensor
        self.frames = 0            # frames written
        self.dropped = 0           # readings not written: port closed, queue full, write failed
        self.replies = 0           # answers to host commands written
        self._queue = collections.deque()
        self._max_queue = int(max_queue)
        self._cv = threading.Condition(threading.Lock())
        self._encoder_lock = threading.Lock()
        self._closing = False
        self.link = SerialLink(options["port"], options["baudrate"], self._respond, name=f"emulate {sensor.name}",
                               log=log)
        self._thread = threading.Thread(target=self._write_loop, name=f"mbsim-emulate-{sensor.name}", daemon=True)

    def start(self):
        self.link.start()
        self._thread.start()
        return self

    def close(self):
        with self._cv:
            self._closing = True
            self._cv.notify()
        if self._thread.ident is not None:       # started
            self._thread.join(2.0)
        self.link.close()

    def submit(self, values, stamp: float, name: str | None = None):
        """A new simulated reading of sensor `name` (physics thread; never blocks)."""
        if not self.link.connected:
            self.dropped += 1
            return
        if self.pair is not None:
            other = self._half.pop(stamp, None)
            if other is None:
                self._half = {stamp: (name, values)}     # an unmatched older half is dropped with it
                return
            acc, gyro = (values, other[1]) if name == self.pair[0] else (other[1], values)
            values = np.concatenate([self.rotation @ acc, self.pair[2] @ gyro])
        with self._cv:
            if len(self._queue) >= self._max_queue:
                self._queue.popleft()
                self.dropped += 1
            self._queue.append((values, stamp))
            self._cv.notify()

    def stats(self) -> dict:
        return {"port": self.options["port"], "protocol": self.options["protocol"],
                "connected": self.link.connected, "frames": self.frames, "dropped": self.dropped,
                "replies": self.replies, "faults": dict(self.link.faults), "last_fault": self.link.last_fault}

    def _respond(self, data: bytes) -> bytes:
        with self._encoder_lock:
            out = self.encoder.respond(data)
        if out:
            self.replies += 1
        return out

    def _write_loop(self):
        while True:
            with self._cv:
                while not self._queue and not self._closing:
                    self._cv.wait()
                if self._closing:
                    return
                values, stamp = self._queue.popleft()
            if self.rotation is not None and self.pair is None:
                values = (self.rotation @ np.asarray(values, float).reshape(-1, 3).T).T.reshape(-1)
            with self._encoder_lock:
                frame = self.encoder.encode(values, stamp)
            if not frame:
                continue               # the protocol sends nothing now (SCIP 2.0 before the host's MD)
            if self.link.write(frame):
                self.frames += 1
            else:
                self.dropped += 1
