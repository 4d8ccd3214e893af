"""rosbag2 (MCAP storage) files written with rosbags' Writer: `ros2 bag info/play` read them.

Version 8 metadata (Humble's rosbag2 cannot read version 9), the offered QoS recorded per topic
(without it `ros2 bag play` replays /tf_static and /robot_description as volatile and late
subscribers such as RViz never get them), message definitions embedded in the MCAP schemas,
optional zstd compression of the MCAP chunks ("storage" compression; rosbag2's MCAP plugin
refuses per-message compression). Summary, statistics and metadata.yaml are written on close().

Writing without per-message writes: publish() adds one packed record header and the message
bytes as they are (no copy) to the pending MCAP chunk's list of parts, and its channel, log time
and offset to the chunk's index array (~1.5 us a message; rosbags' Writer.write costs ~10 us in
small writes and copies). A Lane (below) writes the messages of every step or every few (clock,
joint states, /tf, kinematic sensors) as records into a buffer of the chunk by one compiled
call, with their index entries: no Python per message. A chunk past 1 MiB goes to a writer
thread (ChunkWriter, which looks for chunks every _POLL rather than being woken) that
writes its record, the parts (or their zstd compression) and its message index records (a
compiled kernel) into the file, and hands its chunk index to rosbags' writer for the summary;
the counts and time ranges rosbags keeps per message are added per chunk. It writes with
O_DIRECT, 4 MiB at a time, from a page-aligned staging buffer where the file system allows it
(about half the CPU time per MiB of buffered writes, which matters at tens of MB/s of camera
images), buffered elsewhere. The file's bytes are those rosbags' Writer.write writes message by
message (tested), but for one thing: with O_DIRECT, images whose pixels are page-aligned arrays
(as the cameras render them) go to the disk from that memory, in chunks of their own that a
padding record (_PADDING) places so that the pixels start at a block offset (ChunkWriter._write;
the same messages, tested through rosbags' and mcap's readers). Schema and channel records
(rosbags writes them into its own chunk buffer when a topic is advertised) move into the
pending chunk at the point they were written. This uses
the MCAP storage writer's attributes (rosbags 0.9 - 0.11); where they are missing, each message
goes through Writer.write as before (same bag).

The modules, by job: this one is the transport (BagTransport: publish, the pending chunk, close);
bag_lane.py the Lane of fixed-layout messages recorded by one compiled call a step;
bag_writer.py the writer thread (ChunkWriter); direct_file.py the O_DIRECT
file; bag_kernels.py the compiled parts (record layout, lane records, chunk layout, copies).
"""
from __future__ import annotations

import collections
import os
import struct
import threading
from pathlib import Path

import numpy as np
from rosbags.rosbag2 import Writer
from rosbags.rosbag2.enums import CompressionFormat, CompressionMode, StoragePlugin

from .messages import TYPESTORE
from .qos import to_bag_qos
from .transport import Publisher, Subscription, Transport, log
from .bag_lane import Lane, flat
from .bag_writer import ChunkWriter
from .direct_file import BIG_PART
from .bag_kernels import (CHUNK_LIMIT, NO_TIME, STATE_COUNT, STATE_FIRST, STATE_LANE_END, STATE_LAST, STATE_SEGMENT,
                          STATE_SIZE)


__all__ = ["BagTransport"]

_MESSAGE_RECORD = struct.Struct("<BQHIQQ")   # MCAP Message: opcode 5, length, channel, sequence, log/publish time
LANE_BUFFERS_KEPT = 4                         # lane buffers kept for the next chunks


def _fast_storage(writer):
    """rosbags' MCAP storage writer when it has the attributes the batch path keeps up to date."""
    st = writer.storage
    ok = (all(hasattr(st, a) for a in ("bio", "chunk", "chunks", "channel_stats", "compression", "compressor",
                                        "message_start_time", "message_end_time"))
          and all(hasattr(st.chunk, a) for a in ("bio", "msgs"))
          and all(hasattr(writer, a) for a in ("counts", "min_timestamp", "max_timestamp")))
    return st if ok else None


class BagTransport(Transport):
    """Record every advertised topic into the rosbag2 directory `path` (created; must not exist).

    compression: None or "zstd". ros_distro: written into metadata.yaml (rosbags writes its own
    name there; `ros2 bag info` shows it as the bag's "ROS Distro").

    A write that fails (a full disk) ends the recording: no byte is written after it. on_error
    "stop" raises it (one OSError naming the bag and the cause) to the recording thread at the
    next chunk; "continue" lets publishing go on (the messages are dropped) with the failure in
    statuses() for /diagnostics. Either way close() cuts the file after its last complete chunk
    and writes the summary and metadata.yaml (ros/bag_repair.py): the bag is readable up to there.
    The message definitions
    and type hashes are Jazzy's (the typestore's), wire-identical to Humble's for these types.
    Subscriptions are accepted and never fire (a bag written here has no inputs).
    """

    kind = "bag"
    takes_parts = True         # an image's pixels go into the chunk as they are

    def __init__(self, path, compression: str | None = None, ros_distro: str = "jazzy", on_error: str = "stop"):
        super().__init__()
        if on_error not in ("stop", "continue"):
            raise ValueError(f"on_error must be 'stop' or 'continue', got {on_error!r}")
        self.path = Path(path)
        if self.path.exists():
            raise FileExistsError(
                f"{self.path} exists: a bag is written into a new directory "
                "(ros2 bag record refuses an existing one too); choose another path or delete it")
        if compression not in (None, "none", "zstd"):
            raise ValueError(f"compression must be None or 'zstd', got {compression!r}")
        self.compression = None if compression == "none" else compression
        self.ros_distro = ros_distro
        self.on_error = on_error
        self._writer = Writer(self.path, version=8, storage_plugin=StoragePlugin.MCAP)
        if self.compression == "zstd":
            self._writer.set_compression(CompressionMode.STORAGE, CompressionFormat.ZSTD)
        self._writer.open()
        self._write = self._writer.write
        self._storage = _fast_storage(self._writer)
        self._lock = threading.Lock()
        self._lanes = []
        self._lane_capacity = 0          # bytes a lane buffer holds (a chunk's lane records and one more step's)
        # lane buffers the chunk writer is done with, a few: the rest (a burst of chunks queued while
        # the disk was behind) go back to the system instead of staying with the process
        self._free = collections.deque(maxlen=LANE_BUFFERS_KEPT)
        # started now, so that a run under a real-time priority can give it one (worker_threads)
        self._chunk_writer = None if self._storage is None else ChunkWriter(self._storage, self._writer, self.path,
                                                                              self._free, on_error == "stop")
        self._new_chunk()

    def _new_chunk(self):
        self._parts = []        # the chunk's records: message headers and message bytes as given
        self._state = np.array([0, *NO_TIME, 0, 0, -1], np.int64)    # STATE_SIZE .. STATE_SEGMENT
        self._index = np.empty((4096, 3), np.int64)   # per message in order: channel, log time, offset
        self._lane_buffer = self._free.popleft() if self._free else None   # a Lane's records (lanes only)

    def _close_segment(self):
        """Put the lane records written since the last other part into the chunk's parts: as a
        memoryview, not an array, because the lane buffer is reused once its chunk is written;
        the chunk writer writes only arrays from their own memory (images' pixels), so these
        records are copied."""
        state = self._state
        start = state[STATE_SEGMENT]
        if start >= 0:
            self._parts.append(memoryview(self._lane_buffer)[start:state[STATE_LANE_END]])
            state[STATE_SEGMENT] = -1

    def _advertise(self, pub: Publisher):
        if self._storage is None:
            return self._add_connection(pub)
        with self._lock:                   # the publisher thread may be writing into the chunk
            st = self._storage
            conn = self._add_connection(pub)
            records = st.chunk.bio.getvalue()  # rosbags wrote them into its own chunk buffer,
            st.chunk.bio.seek(0)               # in the chunk after what came before
            st.chunk.bio.truncate()
            self._close_segment()
            self._parts.append(records)
            self._state[STATE_SIZE] += len(records)
        return conn

    def _add_connection(self, pub):
        return self._writer.add_connection(pub.topic, pub.typename, typestore=TYPESTORE,
                                           offered_qos_profiles=[to_bag_qos(pub.qos)])

    def publish(self, handle: Publisher, data: bytes, stamp_ns: int = 0) -> None:
        """Into the pending chunk (as rosbags' Writer.write, without its per-message writes);
        a chunk past 1 MiB goes to the chunk writer thread."""
        self.publish_many(((handle, data, stamp_ns),))

    def publish_many(self, messages) -> None:
        if self._storage is None:
            for handle, data, stamp_ns in messages:
                if data.__class__ is tuple:
                    data = b"".join(data)
                handle.messages += 1
                handle.bytes += len(data)
                self._write(handle.impl, int(stamp_ns), data)
            return
        pack = _MESSAGE_RECORD.pack
        with self._lock:           # another thread may publish (a description) and close a chunk
            self._close_segment()
            # the state and the index through memoryviews: a NumPy element or row costs 2-3x more
            parts, state, index = self._parts, memoryview(self._state), flat(self._index)
            size, first, last, count = state[STATE_SIZE], state[STATE_FIRST], state[STATE_LAST], state[STATE_COUNT]
            for handle, data, stamp_ns in messages:
                whole = data.__class__ is not tuple
                n = len(data) if whole else sum(map(len, data))       # (transport.message_size, inlined)
                handle.messages += 1
                handle.bytes += n
                ts = int(stamp_ns)
                cid = handle.impl.id
                at = 3 * count
                if at == len(index):
                    self._index = np.concatenate([self._index, np.empty_like(self._index)])
                    index = flat(self._index)
                index[at] = cid
                index[at + 1] = ts
                index[at + 2] = size
                count += 1
                # the record's head joined to the message's (first) bytes when they are small: one
                # part fewer for the writer to go through, for a copy of a few hundred bytes
                head, lead = pack(5, 22 + n, cid, 0, ts, ts), data if whole else data[0]
                if len(lead) < BIG_PART:
                    parts.append(head + lead)
                else:
                    parts.append(head)
                    parts.append(lead)
                if not whole:
                    parts += data[1:]
                size += 31 + n
                if ts < first:
                    first = ts
                if ts > last:
                    last = ts
                if size > CHUNK_LIMIT:
                    state[STATE_SIZE], state[STATE_FIRST], state[STATE_LAST], state[STATE_COUNT] = size, first, last, count
                    self._write_chunk()
                    parts, state, index = self._parts, memoryview(self._state), flat(self._index)
                    size, first, last, count = 0, *NO_TIME, 0
            state[STATE_SIZE], state[STATE_FIRST], state[STATE_LAST], state[STATE_COUNT] = size, first, last, count

    def _write_chunk(self) -> None:
        """Hand the pending chunk to the chunk writer thread and start a new one; the time ranges
        rosbags' writer keeps per message are added here per chunk (the counts per channel by
        the chunk writer)."""
        self._close_segment()
        st, w, state = self._storage, self._writer, self._state
        index = self._index[:state[STATE_COUNT]]
        for lane in self._lanes:
            lane.count()
        first, last = int(state[STATE_FIRST]), int(state[STATE_LAST])
        if first <= last:                  # else a chunk of schema and channel records only
            st.message_start_time = min(st.message_start_time, first)
            st.message_end_time = max(st.message_end_time, last)
            w.min_timestamp = min(w.min_timestamp, first)
            w.max_timestamp = max(w.max_timestamp, last)
        self._chunk_writer.put((self._parts, index, self._lane_buffer))
        self._new_chunk()

    def lane(self, members, sources, sample_count, sample_stamp, rates=None, prepare=None):
        """A Lane recording `members` into this bag, or None where the bag writes through
        rosbags' Writer.write (old rosbags)."""
        if self._storage is None:
            return None
        with self._lock:
            lane = Lane(self, members, sources, sample_count, sample_stamp, rates, prepare)
            self._lanes.append(lane)
            self._lane_capacity = max(self._lane_capacity, CHUNK_LIMIT + lane.largest)
        return lane

    def drop_lane(self, lane):
        """Stop recording `lane` (a world change lays the world out anew); its counts stay."""
        with self._lock:
            if lane in self._lanes:
                lane.count()
                self._lanes.remove(lane)

    def worker_threads(self) -> list:
        return [self._chunk_writer.native_id] if self._chunk_writer is not None else []

    def stats(self) -> dict:
        with self._lock:
            for lane in self._lanes:
                lane.count()
        return super().stats()

    def _subscribe(self, sub: Subscription):
        log.info("bag transport: %s is not an input here (nothing is received from a bag)", sub.topic)
        return None

    @property
    def failure(self):
        """The write error that ended the recording (OSError), or None."""
        return self._chunk_writer.failure if self._chunk_writer is not None else None

    def statuses(self) -> list:
        """[(name, level, message, values)] for /diagnostics: "mbsim: bag" at ERROR once a write
        failed (nothing while recording goes well: the run's diagnostics stay as they were)."""
        if self.failure is None:
            return []
        return [("mbsim: bag", 2, f"recording stopped: {self.failure}", {"bag": str(self.path)})]

    def _close(self) -> None:
        writer = self._chunk_writer
        # whether the recording thread was told of a failure already (else close() tells it)
        told = writer is not None and (writer.reported or not writer.raising)
        try:
            if self._storage is not None:
                with self._lock:
                    if self._parts or self._state[STATE_SEGMENT] >= 0:
                        self._write_chunk()
                    for lane in self._lanes:
                        lane.count()
                if self._chunk_writer is not None:
                    self._chunk_writer.close()     # every chunk in the file before the summary
            if self.failure is None:
                self._writer.close()
        except OSError as e:       # a full disk: keep what is complete
            self._close_spill()
            self._salvage(self.failure or e, told)
            return
        self._close_spill()
        if self.failure is not None:
            self._salvage(self.failure, told)
            return
        self._set_distro()

    def _close_spill(self):
        chunks = getattr(self._storage, "chunks", None)
        if hasattr(chunks, "close"):
            chunks.close()          # the chunk indexes' temporary file (in the summary now)

    def _salvage(self, cause, told):
        """After a failed write: the file cut after its last complete chunk, its summary and
        metadata.yaml written (bag_repair); the failure raised (one line naming the bag) unless
        the recording thread had it already or the bag goes on without recording (continue)."""
        from .bag_repair import repair_bag
        try:
            self._writer.abort()
        except OSError:
            pass                  # (its buffered bytes: what the file keeps is decided by the repair)
        try:
            done = repair_bag(self.path, self.ros_distro)
            kept, repaired = f"the bag keeps the {done.messages} messages of its complete chunks", True
        except Exception as e:
            kept, repaired = f"its summary could not be written either ({e}): free space, then mbsim bag repair", False
        if told:
            if not repaired:          # (else what was said holds: the complete chunks are kept)
                log.error("bag %s: %s", self.path, kept)
            return
        raise OSError(f"writing the bag {self.path}: {cause}; {kept}") from None

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
