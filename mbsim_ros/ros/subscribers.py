"""Lazy publishing (the Bridge's, ros/bridge.py): which publications someone subscribes to.

On a live transport a topic nobody subscribes to is not serialized, and a sensor none of whose
topics has a subscriber is not sampled (not rendered, ray-cast or evaluated) until one comes;
each topic's subscribers are looked at every 0.1 s of simulation time, a few topics a step
(Subscribers.look; refresh looks at all at once). A bag (and "none") counts as a subscriber to
everything; sensors with a real device or a serial emulation always sample."""
from __future__ import annotations

from .topic_layout import CLOCK_BIT, DIAGNOSTICS_BIT, JOINT_STATES_BIT, SUBSCRIBERS_BIT, TF_BIT


def device_keys(dev, merged, pubs):
    """The publication keys (pubs) that carry a device's readings; merged: the WorldLayout's."""
    if dev.name in merged:
        return [merged[dev.name][0]]
    keys = [k for k in (dev.name, dev.name + "/sim", dev.name + "/image_raw", dev.name + "/camera_info",
                        dev.name + "/depth/image_raw", dev.name + "/depth/camera_info", dev.name + "/points")
            if k in pubs]
    return keys


class Subscribers:
    """Which publications of `pubs` (key -> the transport's handle, the Bridge's) someone
    subscribes to: `wanted`, made anew by refresh and changed in place by look. actuator_names:
    whether actuator_controls/state is published."""

    def __init__(self, transport, pubs, actuator_names):
        self.transport = transport
        self.pubs = pubs
        self.actuator_names = actuator_names
        self.live = getattr(transport, "receives", False)    # subscribers come and go (lazy publishing)
        self.wanted = {}                    # publication key -> someone subscribes
        self.python_due = -1                # the rates' bits whose messages on_step builds (-1: not known yet)
        self.keys_of = {}                   # device name -> its publication keys (device_keys)
        self.devices_of = {}                # publication key -> the devices it carries readings of
        self.looking = []                   # (key, handle) still to look at for subscribers, last first
        self.look_size = 1                  # how many of them a step
        self.layout = None                  # the WorldLayout refresh was given

    def refresh(self, devices, layout, recorded):
        """Which topics have a subscriber now, every topic at once (the start, a world change).
        On a transport that is not live (bag, "none") everything counts as subscribed but what a
        lane records (`recorded`, publication keys), which is wanted only by the live transports'
        subscribers beside it (a fan-out does not count the bag for them). devices: the world's;
        layout: its WorldLayout."""
        t = self.transport
        self.wanted = {key: t.subscriber_count(h) > 0 if self.live else key not in recorded
                       for key, h in self.pubs.items()}
        self.keys_of = {dev.name: device_keys(dev, layout.merged, self.pubs) for dev in devices}
        self.devices_of = {}
        for dev in devices:
            for key in self.keys_of[dev.name]:
                self.devices_of.setdefault(key, []).append(dev)
        self.looking = []
        self.layout = layout
        self.python_due = self.due_in_python()

    def due_in_python(self):
        """The bits of the rates' due mask at which on_step has messages of its own to build
        (a superset: those a lane records are not wanted here), so that at the other steps a
        lane's call is all it does."""
        wanted, layout = self.wanted, self.layout
        bits = SUBSCRIBERS_BIT if self.live else 0
        if wanted.get("clock"):
            bits |= CLOCK_BIT
        if (wanted.get("joint_states") or any(wanted.get(f"joint_states/{e}") for e in layout.namespaced_dofs)
                or (self.actuator_names and wanted.get("actuator_controls/state"))):
            bits |= JOINT_STATES_BIT
        if layout.moving and wanted.get("tf"):
            bits |= TF_BIT
        if wanted.get("diagnostics"):
            bits |= DIAGNOSTICS_BIT
        return bits

    def begin_look(self, steps):
        """A look at every topic, spread over the next `steps` steps."""
        self.looking = list(reversed(self.pubs.items()))
        self.look_size = -(-len(self.looking) // max(1, steps))

    def look(self):
        """Part of the look at the subscribers that on_step starts every 0.1 s of simulation time:
        as many topics a step as spread it over that time (one a step for the bundled world's
        20); returns the devices of the topics whose subscribers came or went. A live transport's
        count is a call into the middleware that holds the interpreter: all of them at once
        took the physics thread ~0.15 ms, and with a bag's threads beside it, waiting for the
        interpreter back, 0.5 to over 1 ms (most of such a run's late steps)."""
        looking, t, wanted = self.looking, self.transport, self.wanted
        changed = []
        for key, handle in looking[-self.look_size:]:
            has = t.subscriber_count(handle) > 0
            if has != wanted.get(key, has):
                wanted[key] = has
                changed += self.devices_of.get(key, ())
                self.python_due = self.due_in_python()
        del looking[-self.look_size:]
        return changed
