"""Live ROS 2 topics over DDS with cyclonedds-python, for machines without rclpy.

A ROS 2 topic "/ns/name" of type "pkg/msg/Name" is the DDS topic "rt/ns/name" with the DDS type
"pkg::msg::dds_::Name_" (final, key-less), data representation XCDR1, and the user data
"typehash=RIHS01_...;" that Jazzy's rmw_cyclonedds sets. Matching is by topic and type name and
QoS, so ROS 2 nodes on any RMW see these endpoints (`ros2 topic list/echo` work; `ros2 node list`
does not show us: there is no ros_discovery_info participant entry).

Writing: the CDR bytes built once by `messages` go to the DDS writer as they are
(`_clayer.ddspy_write`, the call `DataWriter.write` ends in after serializing; cyclonedds' own
Python serializer is ~1000x slower for images). That call is internal cyclonedds API: where it is
missing, samples go through the generated struct class instead (slow, same bytes on the wire).
Reading: a waitset thread takes the raw serialized samples (`_clayer.ddspy_take`) and hands the
CDR bytes to the callbacks (same fallback).

cyclonedds-python does not read the ROS environment; `discovery_config` does what Jazzy's
rmw_cyclonedds does with it: ROS_DOMAIN_ID (default 0), ROS_AUTOMATIC_DISCOVERY_RANGE
(SUBNET default, LOCALHOST, OFF, SYSTEM_DEFAULT), ROS_STATIC_PEERS, the deprecated
ROS_LOCALHOST_ONLY=1 (= LOCALHOST), followed by the user's CYCLONEDDS_URI.
"""
from __future__ import annotations

import os
import threading

from cyclonedds.core import (DDSException, GuardCondition, InstanceState, Policy, Qos,
                             ReadCondition, SampleState, ViewState, WaitSet)
from cyclonedds.domain import Domain, DomainParticipant
from cyclonedds.idl import make_idl_struct
from cyclonedds.idl import types as T
from cyclonedds.pub import DataWriter
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic
from cyclonedds.util import duration

from .messages import TYPESTORE
from .qos import to_dds_qos
from .transport import Publisher, Subscription, Transport, log

try:  # internal API (cyclonedds 0.10 - 11): raw serialized write and take
    from cyclonedds._clayer import ddspy_take as _raw_take
    from cyclonedds._clayer import ddspy_write as _raw_write
except ImportError:  # pragma: no cover - exercised by forcing RAW = False in tests
    _raw_take = _raw_write = None

__all__ = ["DdsTransport", "discovery_config", "dds_type_name", "idl_class", "RAW"]

RAW = _raw_write is not None and _raw_take is not None
MAX_DOMAIN_ID = 232  # the highest domain id the RTPS port mapping allows
_RANGES = ("SUBNET", "LOCALHOST", "OFF", "SYSTEM_DEFAULT")
_ANY = SampleState.Any | ViewState.Any | InstanceState.Any


# ---------------------------------------------------------------------------------------------
# configuration from the ROS environment

def discovery_config(env=None, domain_id: int | None = None) -> tuple[int, str, str]:
    """(domain id, cyclonedds configuration string, discovery range) for a ROS environment.

    The configuration is what Jazzy's rmw_cyclonedds (check_create_domain) builds: for LOCALHOST
    no multicast and localhost plus ROS_STATIC_PEERS as unicast peers; for OFF no multicast, no
    peers and a per-process domain tag; for SUBNET the static peers, if any; then the contents of
    CYCLONEDDS_URI, which therefore refine or override these settings. An invalid range is taken
    as LOCALHOST, as rcl does.
    """
    env = os.environ if env is None else env
    if domain_id is None:
        text = (env.get("ROS_DOMAIN_ID") or "").strip()
        try:
            domain_id = int(text) if text else 0
        except ValueError:
            raise ValueError(f"ROS_DOMAIN_ID={text!r} is not an integer") from None
    domain_id = int(domain_id)
    if not 0 <= domain_id <= MAX_DOMAIN_ID:
        raise ValueError(f"ROS domain id {domain_id} is outside 0..{MAX_DOMAIN_ID}")

    rng = (env.get("ROS_AUTOMATIC_DISCOVERY_RANGE") or "").strip().upper() or "SUBNET"
    if rng not in _RANGES:
        log.warning("invalid ROS_AUTOMATIC_DISCOVERY_RANGE=%r, assuming LOCALHOST", rng)
        rng = "LOCALHOST"
    if (env.get("ROS_LOCALHOST_ONLY") or "").strip() == "1":
        rng = "LOCALHOST"
    peers = [p.strip() for p in (env.get("ROS_STATIC_PEERS") or "").split(";") if p.strip()]

    localhost_peer = rng == "LOCALHOST"
    static_peers = rng in ("LOCALHOST", "SUBNET")
    no_multicast = rng in ("LOCALHOST", "OFF")
    parts = []
    if localhost_peer or (static_peers and peers) or no_multicast:
        xml = '<CycloneDDS><Domain Id="any">'
        if no_multicast:
            xml += "<General><AllowMulticast>false</AllowMulticast></General>"
        if rng == "OFF":
            xml += ("<Discovery><ParticipantIndex>none</ParticipantIndex>"
                    f"<Tag>ros_discovery_off_{os.getpid()}</Tag>")
        else:
            xml += ("<Discovery><ParticipantIndex>auto</ParticipantIndex>"
                    "<MaxAutoParticipantIndex>32</MaxAutoParticipantIndex>")
        listed = (["localhost"] if localhost_peer else []) + (peers if static_peers else [])
        if listed:
            xml += "<Peers>" + "".join(f'<Peer address="{p}"/>' for p in listed) + "</Peers>"
        xml += "</Discovery></Domain></CycloneDDS>"
        parts.append(xml)
    uri = (env.get("CYCLONEDDS_URI") or "").strip()
    if uri:
        parts.append(uri)
    return domain_id, ",".join(parts), rng


# One cyclonedds Domain per domain id per process, shared by the transports on it.
_domains: dict[int, list] = {}  # id -> [Domain or None, config, users]
_domains_lock = threading.Lock()


def _acquire_domain(domain_id: int, config: str) -> None:
    with _domains_lock:
        entry = _domains.get(domain_id)
        if entry is not None:
            if entry[1] != config:
                log.warning("DDS domain %d is already configured in this process with %r; "
                            "keeping that configuration, not %r", domain_id, entry[1], config)
            entry[2] += 1
            return
        try:
            dom = Domain(domain_id, config)
        except DDSException as e:  # created elsewhere in this process (implicitly): join it
            log.warning("DDS domain %d exists already (%s); its configuration stays", domain_id, e)
            dom = None
        _domains[domain_id] = [dom, config, 1]


def _release_domain(domain_id: int) -> None:
    with _domains_lock:
        entry = _domains.get(domain_id)
        if entry is not None:
            entry[2] -= 1
            if entry[2] <= 0:
                del _domains[domain_id]  # drops the Domain entity


# ---------------------------------------------------------------------------------------------
# types

_BASE = {"bool": bool, "byte": T.uint8, "char": T.uint8, "octet": T.uint8,
         "int8": T.int8, "uint8": T.uint8, "int16": T.int16, "uint16": T.uint16,
         "int32": T.int32, "uint32": T.uint32, "int64": T.int64, "uint64": T.uint64,
         "float32": T.float32, "float64": T.float64, "string": str, "wstring": str}
_classes: dict[str, type] = {}
_classes_lock = threading.RLock()


def dds_type_name(typename: str) -> str:
    """"sensor_msgs/msg/Imu" -> "sensor_msgs::msg::dds_::Imu_"."""
    pkg, sub, name = typename.split("/")
    return f"{pkg}::{sub}::dds_::{name}_"


def idl_class(typename: str) -> type:
    """The cyclonedds struct class of a ROS type, generated from the typestore's definition."""
    with _classes_lock:
        cls = _classes.get(typename)
        if cls is None:
            def field(node):
                kind, arg = int(node[0]), node[1]  # 1 base, 2 named, 3 array, 4 sequence
                if kind == 1:
                    return _BASE[arg[0]]
                if kind == 2:
                    return idl_class(arg)
                if kind == 3:
                    return T.array[field(arg[0]), arg[1]]
                return T.sequence[field(arg[0])]
            fields = {n: field(node) for n, node in TYPESTORE.fielddefs[typename][1]}
            name = typename.split("/")[-1]
            cls = make_idl_struct(name + "_", dds_type_name(typename), fields)
            _classes[typename] = cls
        return cls


# ---------------------------------------------------------------------------------------------

class DdsTransport(Transport):
    """ROS 2 topics over DDS (cyclonedds), configured from the ROS environment.

    domain_id: overrides ROS_DOMAIN_ID. env: the environment to read (default os.environ).
    publish() ignores stamp_ns (DDS stamps samples with the wall clock, as ROS 2 does).
    """

    kind = "dds"
    receives = True

    def __init__(self, domain_id: int | None = None, env=None, raw: bool | None = None):
        super().__init__()
        self.domain_id, self.config, self.discovery_range = discovery_config(env, domain_id)
        self.raw = RAW if raw is None else (bool(raw) and RAW)
        _acquire_domain(self.domain_id, self.config)
        try:
            # enclave=/; is the participant user data ROS 2 participants carry
            self._dp = DomainParticipant(self.domain_id, qos=Qos(Policy.Userdata(b"enclave=/;")))
        except Exception:
            _release_domain(self.domain_id)
            raise
        self._topics: dict[str, Topic] = {}
        self._lock = threading.Lock()
        self._thread = None
        self._stop = False
        self._waitset = None
        self._guard = None
        self._readers: list[tuple[Subscription, DataReader, ReadCondition]] = []

    # -- publishing --------------------------------------------------------------------------
    def _topic(self, topic: str, typename: str) -> Topic:
        t = self._topics.get(topic)
        if t is None:
            t = Topic(self._dp, "rt" + topic, idl_class(typename))
            self._topics[topic] = t
        elif t.data_type is not idl_class(typename):
            raise ValueError(f"{topic} is used with {t.data_type.__name__}, not {typename}")
        return t

    def _advertise(self, pub: Publisher):
        writer = DataWriter(self._dp, self._topic(pub.topic, pub.typename),
                            qos=to_dds_qos(pub.qos, TYPESTORE.hash_rihs01(pub.typename)))
        return writer

    def publish(self, handle: Publisher, data: bytes, stamp_ns: int = 0) -> None:
        n = len(data)
        padded = data if not n & 3 else data + b"\0" * (4 - (n & 3))
        try:
            if self.raw:
                ret = _raw_write(handle.impl._ref, padded)
                if ret < 0:
                    raise DDSException(ret, f"writing {handle.topic}")
            else:
                handle.impl.write(handle.impl.data_type.deserialize(padded))
        except DDSException as e:
            if e.code != DDSException.DDS_RETCODE_TIMEOUT:
                raise
            # a reliable reader held the writer's history full for max_blocking_time (not seen
            # with KEEP_LAST writers, which drop their oldest unacknowledged sample instead):
            # a slow reader must not stop the simulation
            if not handle.dropped:
                log.warning("DDS write on %s timed out: a reliable reader is not keeping up; "
                            "counting dropped messages", handle.topic)
            handle.dropped += 1
            return
        handle.messages += 1
        handle.bytes += n

    def subscriber_count(self, handle: Publisher) -> int:
        return handle.impl.get_publication_matched_status().current_count

    def worker_threads(self) -> list:
        return [self._thread.native_id] if self._thread is not None else []

    # -- subscribing -------------------------------------------------------------------------
    def _subscribe(self, sub: Subscription):
        reader = DataReader(self._dp, self._topic(sub.topic, sub.typename),
                            qos=to_dds_qos(sub.qos, TYPESTORE.hash_rihs01(sub.typename), writer=False))
        cond = ReadCondition(reader, _ANY)
        with self._lock:
            if self._thread is None:
                self._waitset = WaitSet(self._dp)
                self._guard = GuardCondition(self._dp)
                self._waitset.attach(self._guard)
                self._thread = threading.Thread(target=self._receive, name="mbsim-dds-receive",
                                                daemon=True)
                self._thread.start()
            self._readers.append((sub, reader, cond))
            self._waitset.attach(cond)
        return reader

    def _take(self, reader: DataReader) -> list:
        if self.raw:
            out = []
            while True:
                got = _raw_take(reader._ref, _ANY, 64)
                if isinstance(got, int):
                    raise DDSException(got, "taking samples")
                out += [data for data, info in got if info.valid_data]
                if len(got) < 64:
                    return out
        out = []
        for s in reader.take(N=64):
            if s.sample_info.valid_data:
                out.append(s.serialize(use_version_2=False))
        return out

    def _receive(self) -> None:
        while not self._stop:
            try:
                self._waitset.wait(duration(milliseconds=500))
                if self._stop:
                    break
                with self._lock:
                    readers = list(self._readers)
                for sub, reader, _ in readers:
                    for data in self._take(reader):
                        sub.deliver(data)
            except Exception:  # keep receiving; report
                if self._stop:
                    break
                log.exception("DDS receive thread")

    def _unadvertise(self, pub: Publisher) -> None:
        pub.impl = None        # dropping the Python object deletes the DDS writer (as _close does)

    # -- closing -----------------------------------------------------------------------------
    def _close(self) -> None:
        self._stop = True
        if self._thread is not None:
            self._guard.set(True)
            self._thread.join(timeout=5.0)
        # Dropping the Python objects deletes the DDS entities, children first.
        self._readers.clear()
        self._waitset = self._guard = self._thread = None
        for pub in self._publishers.values():
            pub.impl = None
        for sub in self._subscriptions.values():
            sub.impl = None
        self._topics.clear()
        self._dp = None
        _release_domain(self.domain_id)
