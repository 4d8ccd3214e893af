"""rosbag2 (MCAP storage) files written with rosbags' Writer: `ros2 bag info/play` read them.

Version 8 metadata (Humble's rosbag2 cannot read version 9), the offered QoS recorded per topic
(without it `ros2 bag play` replays /tf_static and /robot_description as volatile and late
subscribers such as RViz never get them), message definitions embedded in the MCAP schemas,
optional zstd compression of the MCAP chunks ("storage" compression; rosbag2's MCAP plugin
refuses per-message compression). Summary, statistics and metadata.yaml are written on close().

Writing in large batches: publish() only appends to a list; every BATCH_MESSAGES messages or
BATCH_BYTES bytes (and on close) the batch goes into the MCAP chunk at once, one packed record
header per message, with the bookkeeping rosbags' writer keeps (chunk message index, channel
statistics, metadata counts and time range). rosbags' Writer.write costs ~10 us a message (a
linear search of the connection list and six small writes); the batch costs ~1 us. This uses
the MCAP storage writer's attributes (rosbags 0.9 - 0.11); where they are missing, each message
goes through Writer.write as before (same bag).
"""
from __future__ import annotations

import os
import struct
from pathlib import Path

from rosbags.rosbag2 import Writer
from rosbags.rosbag2.enums import CompressionFormat, CompressionMode, StoragePlugin

from .messages import TYPESTORE
from .qos import to_bag_qos
from .transport import Publisher, Subscription, Transport, log

__all__ = ["BagTransport"]

BATCH_MESSAGES = 1024
BATCH_BYTES = 4 << 20
_MESSAGE_RECORD = struct.Struct("<BQHIQQ")   # MCAP Message: opcode 5, length, channel, sequence, log/publish time
_CHUNK_LIMIT = 1 << 20                        # rosbags closes a chunk past 1 MiB


def _fast_storage(writer):
    """rosbags' MCAP storage writer when it has the attributes the batch path keeps up to date."""
    st = writer.storage
    ok = (all(hasattr(st, a) for a in ("chunk", "channel_stats", "close_chunk", "message_start_time",
                                        "message_end_time"))
          and all(hasattr(st.chunk, a) for a in ("bio", "msgs", "message_start_time", "message_end_time"))
          and all(hasattr(writer, a) for a in ("counts", "min_timestamp", "max_timestamp")))
    return st if ok else None


class BagTransport(Transport):
    """Record every advertised topic into the rosbag2 directory `path` (created; must not exist).

    compression: None or "zstd". ros_distro: written into metadata.yaml (rosbags writes its own
    name there; `ros2 bag info` shows it as the bag's "ROS Distro"). The message definitions
    and type hashes are Jazzy's (the typestore's), wire-identical to Humble's for these types.
    Subscriptions are accepted and never fire (a bag written here has no inputs).
    """

    kind = "bag"

    def __init__(self, path, compression: str | None = None, ros_distro: str = "jazzy"):
        super().__init__()
        self.path = Path(path)
        if self.path.exists():
            raise FileExistsError(
                f"{self.path} exists: a bag is written into a new directory "
                "(ros2 bag record refuses an existing one too); choose another path or delete it")
        if compression not in (None, "none", "zstd"):
            raise ValueError(f"compression must be None or 'zstd', got {compression!r}")
        self.compression = None if compression == "none" else compression
        self.ros_distro = ros_distro
        self._writer = Writer(self.path, version=8, storage_plugin=StoragePlugin.MCAP)
        if self.compression == "zstd":
            self._writer.set_compression(CompressionMode.STORAGE, CompressionFormat.ZSTD)
        self._writer.open()
        self._write = self._writer.write
        self._storage = _fast_storage(self._writer)
        self._batch = []
        self._batch_bytes = 0

    def _advertise(self, pub: Publisher):
        if self._storage is not None:
            self.flush()                   # schema and channel records go after what came before
        return self._writer.add_connection(pub.topic, pub.typename, typestore=TYPESTORE,
                                           offered_qos_profiles=[to_bag_qos(pub.qos)])

    def publish(self, handle: Publisher, data: bytes, stamp_ns: int = 0) -> None:
        n = len(data)
        if self._storage is None:
            self._write(handle.impl, int(stamp_ns), data)
        else:
            self._batch.append((handle.impl.id, int(stamp_ns), data))
            self._batch_bytes += n
            if len(self._batch) >= BATCH_MESSAGES or self._batch_bytes >= BATCH_BYTES:
                self.flush()
        handle.messages += 1
        handle.bytes += n

    def flush(self) -> None:
        """Write the pending batch into the MCAP chunks (as rosbags' Writer.write would, message
        by message)."""
        batch, self._batch, self._batch_bytes = self._batch, [], 0
        if not batch:
            return
        st, w = self._storage, self._writer
        counts, stats = w.counts, st.channel_stats
        pack = _MESSAGE_RECORD.pack
        chunk = st.chunk
        bio, index = chunk.bio, chunk.msgs
        lo, hi = chunk.message_start_time, chunk.message_end_time
        first = last = batch[0][1]
        for cid, ts, data in batch:
            index[cid].append((ts, bio.tell()))
            bio.write(pack(5, 22 + len(data), cid, 0, ts, ts))
            bio.write(data)
            stats[cid] += 1
            counts[cid] += 1
            if ts < lo:
                lo = ts
            if ts > hi:
                hi = ts
            if ts < first:
                first = ts
            if ts > last:
                last = ts
            if bio.tell() > _CHUNK_LIMIT:
                chunk.message_start_time, chunk.message_end_time = lo, hi
                st.close_chunk()
                chunk = st.chunk
                bio, index = chunk.bio, chunk.msgs
                lo, hi = chunk.message_start_time, chunk.message_end_time
        chunk.message_start_time, chunk.message_end_time = lo, hi
        st.message_start_time = min(st.message_start_time, first)
        st.message_end_time = max(st.message_end_time, last)
        w.min_timestamp = min(w.min_timestamp, first)
        w.max_timestamp = max(w.max_timestamp, last)

    def _subscribe(self, sub: Subscription):
        log.info("bag transport: %s is not an input here (nothing is received from a bag)", sub.topic)
        return None

    def _close(self) -> None:
        if self._storage is not None:
            self.flush()
        self._writer.close()
        self._set_distro()

    def _set_distro(self) -> None:
        """Replace rosbags' placeholder distro name in metadata.yaml (best effort: the bag is
        complete and valid either way)."""
        meta = self.path / "metadata.yaml"
        try:
            text = meta.read_text("utf8")
            new = text.replace("ros_distro: rosbags\n", f"ros_distro: {self.ros_distro}\n", 1)
            if new != text:
                tmp = meta.with_suffix(".yaml.tmp")
                tmp.write_text(new, "utf8")
                os.replace(tmp, meta)
        except OSError as e:
            log.warning("could not write ros_distro into %s: %s", meta, e)
