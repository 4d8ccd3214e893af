"""One interface for every way the node's messages leave (and commands enter) the process.

    t = transport_for("auto")       # (transport_choice) rclpy where it has every message, else DDS
    imu = t.advertise("/sr1/imu", messages.IMU, qos.SENSOR)
    t.publish(imu, messages.imu(...), stamp_ns)    # serialized CDR bytes, once, for any transport
    t.subscribe("/sr1/joint_commands", messages.JOINT_STATE, callback)   # callback(bytes)
    ...
    t.stats()                                      # messages and bytes per topic
    t.close()

Topic names are absolute ROS names ("/sr1/imu"); each transport maps them to its own spelling.
Subscription callbacks get the serialized CDR bytes (4-byte header included), as rclpy's raw
subscriptions do; decode them with `messages.decode*`. They run on the transport's receive thread
(DDS, rclpy with an own node) and must be short; an exception in a callback is logged, not raised.

Transports: `NullTransport` ("none": counts and discards), `BagTransport` (rosbag2 MCAP file, in
`bag`), `DdsTransport` (cyclonedds, in `dds`), `RclpyTransport` (in `rclpy_transport`), and
`FanoutTransport` (the same messages to several transports, e.g. live DDS plus a bag).
`transport_choice.transport_for` picks and makes one; this module imports none of them.
"""
from __future__ import annotations

import logging
import re
import time

from .qos import DEFAULT, QoS

__all__ = ["Publisher", "Subscription", "Transport", "NullTransport", "FanoutTransport",
           "check_topic", "message_size"]

log = logging.getLogger("mbsim_ros.ros")

_TOPIC = re.compile(r"^(/[A-Za-z_][A-Za-z0-9_]*)+$")


def check_topic(topic: str) -> str:
    """An absolute ROS topic name ("/ns/name"); raises ValueError otherwise."""
    if not isinstance(topic, str) or not _TOPIC.match(topic):
        raise ValueError(f"not an absolute ROS topic name: {topic!r} (expected e.g. '/robot/imu': "
                         "tokens of letters, digits and '_', not starting with a digit)")
    return topic


def message_size(data) -> int:
    """The bytes of a message given whole or as a tuple of parts (Transport.publish)."""
    return len(data) if data.__class__ is not tuple else sum(map(len, data))


class Publisher:
    """Handle returned by `advertise`; counts what went out (and what the middleware refused
    to take in time: `dropped`)."""

    __slots__ = ("topic", "typename", "qos", "messages", "bytes", "dropped", "impl")

    def __init__(self, topic: str, typename: str, qos: QoS):
        self.topic, self.typename, self.qos = topic, typename, qos
        self.messages = 0
        self.bytes = 0
        self.dropped = 0
        self.impl = None

    def __repr__(self):
        return f"Publisher({self.topic!r}, {self.typename!r}, {self.qos})"


class Subscription:
    """Handle returned by `subscribe`; counts what came in and calls the callback."""

    __slots__ = ("topic", "typename", "qos", "callback", "messages", "bytes", "impl")

    def __init__(self, topic: str, typename: str, qos: QoS, callback):
        self.topic, self.typename, self.qos, self.callback = topic, typename, qos, callback
        self.messages = 0
        self.bytes = 0
        self.impl = None

    def deliver(self, data: bytes) -> None:
        self.messages += 1
        self.bytes += len(data)
        try:
            self.callback(data)
        except Exception:  # a bad input message must not stop the receive thread or the simulation
            log.exception("callback for %s raised", self.topic)

    def __repr__(self):
        return f"Subscription({self.topic!r}, {self.typename!r}, {self.qos})"


class Transport:
    """Base class: bookkeeping, statistics and argument checks; subclasses implement
    `_advertise`, `publish`, `_subscribe`, `_close` and may override `subscriber_count`."""

    kind = "base"
    receives = False           # whether subscriptions can fire (live transports)
    takes_parts = False        # whether publish takes a message as a tuple of bytes-like parts

    def __init__(self):
        self._publishers: dict[str, Publisher] = {}
        self._subscriptions: dict[str, Subscription] = {}
        self._closed = False

    # -- interface ---------------------------------------------------------------------------
    def advertise(self, topic: str, typename: str, qos: QoS = DEFAULT) -> Publisher:
        """A publisher handle for `topic`; advertising the same topic again with the same type and
        QoS returns the same handle."""
        self._check_open()
        check_topic(topic)
        old = self._publishers.get(topic)
        if old is not None:
            if (old.typename, old.qos) != (typename, qos):
                raise ValueError(f"{topic} is already advertised as {old.typename} {old.qos}, "
                                 f"not {typename} {qos}")
            return old
        pub = Publisher(topic, typename, qos)
        pub.impl = self._advertise(pub)
        self._publishers[topic] = pub
        return pub

    def unadvertise(self, handle: Publisher) -> None:
        """Stop offering `handle`'s topic (a deleted model's sensors); publishing on it afterwards
        is an error of the caller. A bag keeps what was recorded."""
        if self._publishers.get(handle.topic) is handle:
            del self._publishers[handle.topic]
            self._unadvertise(handle)

    def publish(self, handle: Publisher, data: bytes, stamp_ns: int = 0) -> None:
        """Send serialized CDR bytes (where `takes_parts`: or a tuple of parts, bytes or 1-D uint8
        arrays, the message being their concatenation: an image's header and its pixels, not copied);
        stamp_ns is the log time where the transport records one (bags), else unused."""
        raise NotImplementedError

    def publish_many(self, messages) -> None:
        """publish(handle, data, stamp_ns) for each (handle, data, stamp_ns) in order: a step's
        messages at once (a bag records them under one lock)."""
        publish = self.publish
        for handle, data, stamp_ns in messages:
            publish(handle, data, stamp_ns)

    def subscribe(self, topic: str, typename: str, callback, qos: QoS = DEFAULT) -> Subscription:
        """Call `callback(bytes)` for each message received on `topic` (one subscription per topic)."""
        self._check_open()
        check_topic(topic)
        if topic in self._subscriptions:
            raise ValueError(f"{topic} is already subscribed")
        sub = Subscription(topic, typename, qos, callback)
        sub.impl = self._subscribe(sub)
        self._subscriptions[topic] = sub
        return sub

    def subscriber_count(self, handle: Publisher) -> int:
        """How many readers currently match this publisher (a bag and "none" count as one)."""
        return 1

    def wait_for_subscribers(self, handle: Publisher, count: int = 1, timeout: float = 5.0) -> bool:
        """Wait until at least `count` readers match `handle`; False on timeout."""
        deadline = time.monotonic() + timeout
        while self.subscriber_count(handle) < count:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
        return True

    def worker_threads(self) -> list:
        """The native (OS) ids of the threads this transport runs that take the GIL (a run under
        a real-time priority runs them one level below the physics thread, run/session.py)."""
        return []

    def statuses(self) -> list:
        """[(name, level, message, {key: text})] this transport adds to /diagnostics (a bag: its
        recording's state)."""
        return []

    def stats(self) -> dict:
        """{topic: {"type", "direction" ("out"/"in"), "messages", "bytes"}}; outputs also have
        "dropped" (messages the middleware did not accept in time, not counted in "messages")."""
        out = {}
        for topic, h in self._publishers.items():
            out[topic] = {"type": h.typename, "direction": "out", "messages": h.messages,
                          "bytes": h.bytes, "dropped": h.dropped}
        for topic, h in self._subscriptions.items():
            out[topic] = {"type": h.typename, "direction": "in", "messages": h.messages,
                          "bytes": h.bytes}
        return out

    def close(self) -> None:
        """Release everything; idempotent."""
        if not self._closed:
            self._closed = True
            self._close()

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    # -- for subclasses ----------------------------------------------------------------------
    def _check_open(self):
        if self._closed:
            raise RuntimeError(f"{type(self).__name__} is closed")

    def _advertise(self, pub: Publisher):
        return None

    def _unadvertise(self, pub: Publisher) -> None:
        pass

    def _subscribe(self, sub: Subscription):
        return None

    def _close(self) -> None:
        pass


class NullTransport(Transport):
    """"none": counts messages and bytes per topic and discards them; subscriptions never fire."""

    kind = "none"

    def publish(self, handle: Publisher, data: bytes, stamp_ns: int = 0) -> None:
        handle.messages += 1
        handle.bytes += len(data)


class FanoutTransport(Transport):
    """The same messages to several transports (e.g. live DDS and a bag); subscriptions go to the
    transports that deliver input (not bags, not "none"). Closing closes them all.

    Each transport gets only what someone there reads, as a single live transport does (lazy
    publishing, ros/bridge.py):
    - lane(): the first transport that records a bag_lane.Lane records one for the fan-out's
      handles; publish() then leaves that transport out for the handles its lane records, and
      subscriber_count() does not count it for them. So the messages of every step (the clock,
      joint states, kinematic sensors) are built for a live transport beside a bag only while
      it has subscribers to them.
    - subscriber_count() notes which live transports have no reader of a volatile topic;
      publish() leaves them out until the next look (a reader that comes in between misses
      what it would have missed with one live transport too). Topics with transient local
      durability (/tf_static, descriptions) always go to every transport: late readers get them.
    - It takes an image as parts and joins them once for the transports that want whole messages
      and are not left out (a camera nobody watches live is never joined)."""

    kind = "fanout"
    takes_parts = True

    @property
    def receives(self):
        return any(t.receives for t in self.transports)

    def __init__(self, transports):
        super().__init__()
        self.transports = list(transports)
        if not self.transports:
            raise ValueError("FanoutTransport needs at least one transport")
        # the transports' handles publish() leaves out; frozensets replaced, never changed, as
        # publish() reads them on another thread
        self._laned = frozenset()      # recorded by a lane
        self._unread = frozenset()     # of a live transport with no reader at the last look
        self._left_out = frozenset()   # both

    def _advertise(self, pub):
        return [(t, t.advertise(pub.topic, pub.typename, pub.qos)) for t in self.transports]

    def publish(self, handle: Publisher, data: bytes, stamp_ns: int = 0) -> None:
        self.publish_many(((handle, data, stamp_ns),))

    def publish_many(self, messages) -> None:
        """Each transport's share of the messages in one publish_many (a bag: under one lock)."""
        left_out = self._left_out
        shares = {t: [] for t in self.transports}
        for handle, data, stamp_ns in messages:
            whole = data if data.__class__ is not tuple else None
            for t, h in handle.impl:
                if h in left_out:
                    continue
                if whole is None and not t.takes_parts:
                    whole = b"".join(data)
                shares[t].append((h, data if t.takes_parts else whole, stamp_ns))
            handle.messages += 1
            handle.bytes += message_size(data)
        for t, share in shares.items():
            if share:
                t.publish_many(share)

    def lane(self, members, sources, sample_count, sample_stamp, rates=None, prepare=None):
        """A lane of the first transport that records lanes, recording `members` (their handles
        this fan-out's); None where none does."""
        for t in self.transports:
            make = getattr(t, "lane", None)
            if make is None:
                continue
            mine = [(dict(m[0].impl)[t], *m[1:]) for m in members]
            lane = make(mine, sources, sample_count, sample_stamp, rates, prepare)
            if lane is not None:
                self._laned = self._laned | {m[0] for m in mine}
                self._left_out = self._laned | self._unread
            return lane
        return None

    def drop_lane(self, lane):
        lane.bag.drop_lane(lane)
        self._laned = self._laned - set(lane.handles)
        self._left_out = self._laned | self._unread

    def stats(self) -> dict:
        """Per topic, the messages and bytes of the transport that got the most of them (a bag
        records everything, a live transport what had readers), the dropped ones summed."""
        out = super().stats()
        for t in self.transports:
            for topic, v in t.stats().items():
                mine = out.get(topic)
                if mine is None or v["direction"] != "out" or mine["direction"] != "out":
                    continue
                if v["messages"] > mine["messages"]:
                    mine["messages"], mine["bytes"] = v["messages"], v["bytes"]
                mine["dropped"] += v.get("dropped", 0)
        return out

    def _unadvertise(self, pub):
        for t, h in pub.impl:
            t.unadvertise(h)

    def _subscribe(self, sub):
        live = [t for t in self.transports if t.receives]
        return [t.subscribe(sub.topic, sub.typename, sub.deliver, sub.qos) for t in live]

    def subscriber_count(self, handle: Publisher) -> int:
        laned, unread, count = self._laned, self._unread, 0
        for t, h in handle.impl:
            if h in laned:
                continue
            n = t.subscriber_count(h)
            count += n
            idle = n == 0 and t.receives and not handle.qos.transient_local
            if idle != (h in unread):
                unread = unread | {h} if idle else unread - {h}
        if unread is not self._unread:
            self._unread = unread
            self._left_out = self._laned | unread
        return count

    def worker_threads(self) -> list:
        return [tid for t in self.transports for tid in t.worker_threads()]

    def statuses(self) -> list:
        return [x for t in self.transports for x in t.statuses()]

    def _close(self):
        errors = []
        for t in self.transports:
            try:
                t.close()
            except Exception as e:  # close the others anyway
                errors.append(e)
        if errors:
            raise errors[0]
