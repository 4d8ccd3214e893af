"""The Bridge's messages (ros/bridge.py) built from its work items and handed to the transport:
the clock, joint states, /tf, the sensors' readings (Imu, WrenchStamped, LaserScan, images,
camera infos, point clouds) and /diagnostics.

Every message is built once and serialized once, in the publishing thread. The periodic
messages (clock, joint states, TF, Imu, wrench, scans, camera info, image headers) are
preallocated CDR templates (ros/templates.py) written in place, never message objects; the
kinematic sensors' and the cameras' are written by a writer bound once per device (they are
the most frequent)."""
from __future__ import annotations

from . import messages as msg
from . import templates as tpl

KINEMATIC_KINDS = frozenset(("accelerometer", "gyro", "force"))
BOUND_KINDS = KINEMATIC_KINDS | {"camera"}      # the kinds whose messages a writer bound once per device writes


def kinematic_template(dev, frame):
    """The template of an accelerometer's or gyro's Imu, or a force sensor's WrenchStamped."""
    if dev.kind == "force":
        return tpl.WrenchTemplate(frame)
    accel = dev.kind == "accelerometer"
    return tpl.ImuTemplate(frame, accel=accel, gyro=not accel,
                           accel_variance=dev.variance if accel else (0.0,) * 3,
                           gyro_variance=(0.0,) * 3 if accel else dev.variance)


def _kinematic_fill(dev, frame):
    """fill(ns, values) -> bytes of a kinematic sensor's message: its template bound once
    (these publish at up to every step)."""
    fill = kinematic_template(dev, frame).fill
    if dev.kind == "force":
        return fill
    if dev.kind == "accelerometer":
        return lambda ns, values: fill(ns, values, None)
    return lambda ns, values: fill(ns, None, values)


class MessageWriter:
    """Fills the messages of a step's work items (Bridge.on_step's) into one batch handed to
    the transport at once (publishing thread only).

    pubs: publication key -> the transport's handle (the Bridge's, kept up to date by it; a key
    missing: its model was deleted after the step was collected); subscribers: whose `wanted`
    says which publications someone subscribes to (lazy publishing); frame: a name -> its frame
    id; actuator_names: actuator_controls/state's names; statuses(stats): /diagnostics' statuses."""

    def __init__(self, transport, pubs, subscribers, frame, actuator_names, statuses):
        self.transport = transport
        self.pubs = pubs
        self.subscribers = subscribers
        self.frame = frame
        self.actuator_names = actuator_names
        self.statuses = statuses
        self.templates = {}                 # publication key -> (its source, its CDR template or writer)
        self.batch = []                     # the messages write fills, for the transport at once
        self._stamp = (None, 0)             # (seconds, nanoseconds) of the last stamp converted

    def write(self, work):
        self.batch = batch = []
        try:
            self.fill(work)
        finally:
            if batch:
                self.transport.publish_many(batch)

    def send(self, key, data, stamp):
        self.send_ns(key, data, msg.to_nanoseconds(stamp))

    def send_ns(self, key, data, ns):
        """Into the batch that write hands to the transport at once."""
        handle = self.pubs.get(key)
        if handle is not None:       # None: its model was deleted after this step was collected
            self.batch.append((handle, data, ns))

    def ns(self, t):
        """msg.to_nanoseconds(t), converted once per instant (a step's messages share stamps)."""
        last_t, ns = self._stamp
        if t != last_t:
            ns = msg.to_nanoseconds(t)
            self._stamp = (t, ns)
        return ns

    def template(self, key, make, source=None):
        """The CDR template of publication `key` (a kinematic sensor's: its writer, see
        _kinematic_writer), made by make() on first use and again when
        `source` (what its layout comes from: the names, the TF layout, the device) is another
        object than last time: a world change lays the world out anew while the publisher may
        still be writing steps collected before it."""
        entry = self.templates.get(key)
        if entry is None or entry[0] is not source:
            entry = self.templates[key] = (source, make())
        return entry[1]

    def fill(self, work):
        """Each work item's messages, filled, into self.batch."""
        for item in work:
            kind = item[0]
            if kind.__class__ is not str:          # the most frequent: a kinematic sensor's writer
                kind(item[1])
            elif kind == "reading":
                self.write_reading(item[1], item[2], item[3])
            elif kind == "clock":
                ns = self.ns(item[1])
                self.send_ns("clock", self.template("clock", tpl.ClockTemplate).fill(ns), ns)
            elif kind == "joint_states":
                _, key, t, q, v, tau, names = item
                ns = self.ns(t)
                tmpl = self.template(key, lambda: tpl.JointStateTemplate(names), names)
                self.send_ns(key, tmpl.fill(ns, q, v, tau), ns)
            elif kind == "actuator_controls":
                _, t, controls = item
                ns = self.ns(t)
                tmpl = self.template("actuator_controls/state", lambda: tpl.JointStateTemplate(
                    self.actuator_names, position=False, velocity=False), self.actuator_names)
                self.send_ns("actuator_controls/state", tmpl.fill(ns, effort=controls), ns)
            elif kind == "tf":
                _, t, R, p, layout = item
                ns = self.ns(t)
                tmpl = self.template("tf", lambda: tpl.TfTemplate(layout[0]), layout)
                self.send_ns("tf", tmpl.fill(ns, R, p, *layout[1:]), ns)
            elif kind == "imu":
                _, topic, acc, gyro, ra, rg = item
                g = rg.values if rg is not None and abs(rg.stamp - ra.stamp) < 1e-9 else None
                tmpl = self.template((topic, g is not None), lambda: tpl.ImuTemplate(
                    self.frame(acc.frame), accel=True, gyro=g is not None, accel_variance=acc.variance,
                    gyro_variance=gyro.variance), acc)
                ns = self.ns(ra.stamp)
                self.send_ns(topic, tmpl.fill(ns, accel=ra.values, gyro=g), ns)
            elif kind == "diagnostics":
                self.send("diagnostics", msg.diagnostics(item[1], self.statuses(item[2]())), item[1])

    def _kinematic_writer(self, dev, key):
        """write(reading): a kinematic sensor's message on publication `key` (its topic, or its
        "/sim" topic beside a real device) into the batch, if someone wants it."""
        fill = _kinematic_fill(dev, self.frame(dev.frame))
        subscribers, pubs = self.subscribers, self.pubs

        def write(r):
            if subscribers.wanted.get(key, False):
                handle = pubs.get(key)
                if handle is not None:       # None: its model was deleted after this step was collected
                    ns = self.ns(r.stamp)
                    self.batch.append((handle, fill(ns, r.values), ns))
        return write

    def write_reading(self, dev, r, suffix=""):
        """suffix: "" for the sensor's topic, "/sim" for the simulated value beside a real device."""
        key = dev.name + suffix
        if dev.kind in BOUND_KINDS:
            self.template(key, lambda: self.bound_writer(dev, key), dev)(r)
            return
        frame, stamp = self.frame(r.frame), r.stamp
        wanted, template, send = self.subscribers.wanted, self.template, self.send_ns
        ns = self.ns(stamp)
        if dev.kind == "range":
            if wanted.get(key, False):      # a 3D lidar's scan: its ring nearest the horizon
                tmpl = template(key, lambda: tpl.LaserScanTemplate(
                    frame, dev.columns, dev.angle_min, dev.angle_increment, dev.angle_max, dev.range_min,
                    dev.range_max, dev.scan_time), dev)
                ring = dev.scan_ring * dev.columns
                send(key, tmpl.fill(ns, r.values[ring:ring + dev.columns]), ns)
            points = dev.name + "/points"
            if not suffix and wanted.get(points, False) and points in self.pubs:
                send(points, msg.lidar_cloud(stamp, frame, r.values, dev.laser_directions, r.intensities), ns)

    def bound_writer(self, dev, key):
        """The writer bound once of a device whose kind is in BOUND_KINDS, for publication `key`."""
        return self._kinematic_writer(dev, key) if dev.kind in KINEMATIC_KINDS else self._camera_writer(dev)

    def _camera_writer(self, dev):
        """write(reading): a camera's images, camera infos and point cloud (those someone wants)
        into the batch; its templates made at its first frame, then bound (each frame is four
        messages, whose lookups by key cost the publishing thread as much as their bytes)."""
        name = dev.name
        streams = ((name + "/image_raw", name + "/camera_info"), (name + "/depth/image_raw", name + "/depth/camera_info"))
        points = name + "/points"
        made = {}            # publication key -> its template

        def template(key, make):
            tmpl = made.get(key)
            if tmpl is None:
                tmpl = made[key] = make()
            return tmpl

        def write(r):
            wanted, pubs, batch = self.subscribers.wanted, self.pubs, self.batch
            frame, stamp = self.frame(r.frame), r.stamp
            ns = self.ns(stamp)
            whole = not self.transport.takes_parts
            for pixels, (image_key, info_key) in zip((r.values.color, r.values.depth), streams):
                if pixels is None:
                    continue
                if wanted.get(image_key, False) and image_key in pubs:
                    tmpl = template(image_key, lambda: tpl.ImageTemplate(frame, *pixels.shape[:2],
                                                                         *msg.image_encoding(pixels)))
                    batch.append((pubs[image_key], tmpl.fill(ns, pixels) if whole else tmpl.parts(ns, pixels), ns))
                if wanted.get(info_key, False) and info_key in pubs:
                    tmpl = template(info_key, lambda: tpl.CameraInfoTemplate(frame, dev.width, dev.height, dev.fx,
                                                                             dev.fy, dev.cx, dev.cy))
                    batch.append((pubs[info_key], tmpl.fill(ns), ns))
            depth = r.values.depth
            if depth is not None and dev.points and wanted.get(points, False):
                self.send(points, msg.point_cloud(stamp, frame, depth, dev.fx, dev.fy, dev.cx, dev.cy), stamp)
        return write
