"""Which of a world's devices sample, and the readings the Bridge (ros/bridge.py) collects from
them each step as work items for its MessageWriter (ros/message_writers.py)."""
from __future__ import annotations

import math

from ..sensors import Reading
from ..sensors.devices import Arrivals
from .message_writers import BOUND_KINDS


class ReadingCollector:
    """The readings of `sim`'s devices, each once, in order, as work items; writer: the
    MessageWriter whose bound writers (writer.templates) the most frequent ones go to."""

    def __init__(self, sim, writer):
        self.sim = sim
        self.writer = writer
        self.last = {}                      # device name -> its newest reading collected
        self.collected = None               # the devices whose readings collect collects (None: all)
        self.arrivals = Arrivals()          # set when one of them gets a reading (all of them share it)
        self.quiet_until = -math.inf        # before then, nothing pending of theirs comes due
        self.collect_from(None)

    def collect_from(self, devices):
        """collect takes the readings of `devices` from now on (None: every device's). They
        share the Arrivals that tells it when to look; the others get their own."""
        self.collected = devices
        mine = self.sim.devices.values() if devices is None else devices
        for dev in self.sim.devices.values():
            dev.arrivals = Arrivals()
        for dev in mine:
            dev.arrivals = self.arrivals
        self.arrivals.new = True

    def update_devices(self, devices, subscribers, laned, lane, hil):
        """Each of `devices` idle or sampling, and collected or not, as subscribers.wanted says.
        laned: the names of the devices a lane records (they always sample; collected only while
        a topic of theirs is wanted); lane: whether there is one; hil: the hardware in the loop,
        whose sources and emulated sensors always sample, or None."""
        wanted, keys_of = subscribers.wanted, subscribers.keys_of
        step = int(round(self.sim.t / self.sim.dt))
        always = set(hil.sources) | set(hil.emulators) if hil is not None else set()
        for dev in devices:
            keys = keys_of.get(dev.name, ())
            if dev.name not in always:
                dev.set_idle(bool(keys) and not any(wanted[k] for k in keys) and dev.name not in laned, step)
        if not lane:
            self.collect_from(None)
            return
        collected = []
        for dev in self.sim.devices.values():
            if dev.name not in laned or any(wanted[k] for k in keys_of.get(dev.name, ())):
                collected.append(dev)
                if self.collected is not None and dev not in self.collected and dev.latest is not None:
                    self.last[dev.name] = dev.latest     # from now on, not the readings the lane recorded
        self.collect_from(collected)

    def forget_gone(self):
        """Forget the devices the world no longer has (after a world change)."""
        for name in list(self.last):
            if name not in self.sim.devices:
                del self.last[name]

    def collect(self, sim, t, work, merged, hil):
        """Every reading made visible since the last look, each once, in order, as work items
        (frames from a render thread may arrive several at a time). merged: the WorldLayout's;
        hil: the hardware in the loop or None."""
        arrivals = self.arrivals
        if not arrivals.new and t < self.quiet_until:
            return         # nothing arrived since the last look, nothing it saw pending is due
        arrivals.new = False         # before looking: what arrives while we look sets it again
        templates = self.writer.templates
        devices = sim.devices.values() if self.collected is None else self.collected
        due = math.inf
        for dev in devices:          # every device's first (a merged Imu looks at its gyro's)
            if dev.pending:
                dev.visible(t)
                if dev.pending:
                    due = min(due, dev.pending[0].stamp + dev.delay)
        self.quiet_until = due - 1e-9       # (as Device.visible compares)
        seen = self.last
        for dev in devices:
            newest = dev.latest
            name = dev.name
            last = seen.get(name)
            if last is newest or newest is None:
                continue
            seen[name] = newest
            for r in dev.shown_after(last) or (newest,):
                if name in merged:
                    topic, acc, gyro = merged[name]
                    if name == acc.name:         # both sample together: one Imu per instant
                        g = next((x for x in reversed(gyro.shown) if abs(x.stamp - r.stamp) < 1e-9), None)
                        work.append(("imu", topic, acc, gyro, r, g))
                elif hil is not None and name in hil.sources:
                    work.append(("reading", dev, r, "/sim"))
                    real = hil.real_value(name, r, t)
                    if real is not None:
                        work.append(("reading", dev, Reading(r.stamp, r.frame, real), ""))
                elif dev.kind in BOUND_KINDS:    # the most frequent: its writer, bound once
                    entry = templates.get(name)      # (writer.template inlined: no closure per reading)
                    if entry is None or entry[0] is not dev:
                        entry = templates[name] = (dev, self.writer.bound_writer(dev, name))
                    work.append((entry[1], r))
                else:
                    work.append(("reading", dev, r, ""))
                if hil is not None and name in hil.emulators:
                    hil.emulators[name].submit(r.values, r.stamp, name)
