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
thread (_ChunkWriter, which looks for chunks every _POLL rather than being woken) that
writes its record, the parts (or their zstd compression) and its message index records (a
compiled kernel) into the file, and hands its chunk index to rosbags' writer for the summary;
the counts and time ranges rosbags keeps per message are added per chunk. It writes with
O_DIRECT, 4 MiB at a time, from a page-aligned staging buffer where the file system allows it
(about half the CPU time per MiB of buffered writes, which matters at tens of MB/s of camera
images), buffered elsewhere. The file's bytes are those rosbags' Writer.write writes message by
message (tested), but for one thing: with O_DIRECT, images whose pixels are page-aligned arrays
(as the cameras render them) go to the disk from that memory, in chunks of their own that a
padding record (_PADDING) places so that the pixels start at a block offset (_ChunkWriter._write;
the same messages, tested through rosbags' and mcap's readers). Schema and channel records
(rosbags writes them into its own chunk buffer when a topic is advertised) move into the
pending chunk at the point they were written. This uses
the MCAP storage writer's attributes (rosbags 0.9 - 0.11); where they are missing, each message
goes through Writer.write as before (same bag).
"""
from __future__ import annotations

import collections
import ctypes
import errno
import io
import os
import struct
import threading
import time
from pathlib import Path

import numpy as np
from rosbags.rosbag2 import Writer
from rosbags.rosbag2.enums import CompressionFormat, CompressionMode, StoragePlugin

from .._kernel_cache import kernel_cache
from ..sensors.optical import huge_page_memory
from .messages import TYPESTORE
from .qos import to_bag_qos
from .templates import due_rates
from .transport import Publisher, Subscription, Transport, log

__all__ = ["BagTransport"]

_MESSAGE_RECORD = struct.Struct("<BQHIQQ")   # MCAP Message: opcode 5, length, channel, sequence, log/publish time
_PADDING = 0xB0     # our record between chunks, of zeros (MCAP leaves opcodes 0x80-0xFF to applications;
                    # readers skip records they do not know)
_CHUNK_LIMIT = 1 << 20                        # rosbags closes a chunk past 1 MiB
_QUEUED = 64                                  # chunks waiting for the writer thread at most
# How often the chunk writer looks for chunks (s). It polls rather than being woken: waking a thread
# that sleeps on an idle core cost the recording thread 15-55 us of CPU per chunk on a 2-core VM
# (a queue's notify), a sleep that ends on the writer's own core costs it little (each look still
# cost this VM ~6 us: 1.2 us per 1 ms step at 5 ms). At 100 ms it finds ~3 chunks of the bundled
# world in real time (~25 as fast as it runs), well inside the _QUEUED chunks' slack, and writes
# them in a row: its thread 4.4-5.0 us a step at 20 ms, 3.8-4.4 at 100 (alternating 10 s runs).
# close() wakes it at once.
_POLL = 0.1
_HELD_BACK = 0.004   # s between looks at a full queue (the disk behind) before the next put
_DONE, _OVER_LIMIT, _INDEX_FULL, _PREPARE = range(4)    # why _record_lane returned
_NO_TIME = (2 ** 63 - 1, 0)                   # an empty chunk's (start, end), as rosbags writes it
_SIZE, _FIRST, _LAST, _COUNT, _LANE_END, _SEGMENT = range(6)   # the pending chunk's state array:
# its size, first and last log time, messages, the end of its lane records in the lane buffer and
# the start of the lane records not yet in its parts (-1: none)


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
    name there; `ros2 bag info` shows it as the bag's "ROS Distro"). The message definitions
    and type hashes are Jazzy's (the typestore's), wire-identical to Humble's for these types.
    Subscriptions are accepted and never fire (a bag written here has no inputs).
    """

    kind = "bag"
    takes_parts = True         # an image's pixels go into the chunk as they are

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
        self._lock = threading.Lock()
        self._lanes = []
        self._lane_capacity = 0          # bytes a lane buffer holds (a chunk's lane records and one more step's)
        self._free = collections.deque()    # lane buffers the chunk writer is done with
        # started now, so that a run under a real-time priority can give it one (worker_threads)
        self._chunk_writer = None if self._storage is None else _ChunkWriter(self._storage, self._writer, self.path,
                                                                              self._free)
        self._new_chunk()

    def _new_chunk(self):
        self._parts = []        # the chunk's records: message headers and message bytes as given
        self._state = np.array([0, *_NO_TIME, 0, 0, -1], np.int64)    # _SIZE .. _SEGMENT
        self._index = np.empty((4096, 3), np.int64)   # per message in order: channel, log time, offset
        self._lane_buffer = self._free.popleft() if self._free else None   # a Lane's records (lanes only)

    def _close_segment(self):
        """Put the lane records written since the last other part into the chunk's parts: as a
        memoryview, not an array, because the lane buffer is reused once its chunk is written;
        the chunk writer writes only arrays from their own memory (images' pixels), so these
        records are copied."""
        state = self._state
        start = state[_SEGMENT]
        if start >= 0:
            self._parts.append(memoryview(self._lane_buffer)[start:state[_LANE_END]])
            state[_SEGMENT] = -1

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
            self._state[_SIZE] += len(records)
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
            parts, state, index = self._parts, memoryview(self._state), _flat(self._index)
            size, first, last, count = state[_SIZE], state[_FIRST], state[_LAST], state[_COUNT]
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
                    index = _flat(self._index)
                index[at] = cid
                index[at + 1] = ts
                index[at + 2] = size
                count += 1
                # the record's head joined to the message's (first) bytes when they are small: one
                # part fewer for the writer to go through, for a copy of a few hundred bytes
                head, lead = pack(5, 22 + n, cid, 0, ts, ts), data if whole else data[0]
                if len(lead) < _BIG_PART:
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
                if size > _CHUNK_LIMIT:
                    state[_SIZE], state[_FIRST], state[_LAST], state[_COUNT] = size, first, last, count
                    self._write_chunk()
                    parts, state, index = self._parts, memoryview(self._state), _flat(self._index)
                    size, first, last, count = 0, *_NO_TIME, 0
            state[_SIZE], state[_FIRST], state[_LAST], state[_COUNT] = size, first, last, count

    def _write_chunk(self) -> None:
        """Hand the pending chunk to the chunk writer thread and start a new one; the time ranges
        rosbags' writer keeps per message are added here per chunk (the counts per channel by
        the chunk writer)."""
        self._close_segment()
        st, w, state = self._storage, self._writer, self._state
        index = self._index[:state[_COUNT]]
        for lane in self._lanes:
            lane.count()
        first, last = int(state[_FIRST]), int(state[_LAST])
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
            self._lane_capacity = max(self._lane_capacity, _CHUNK_LIMIT + lane.largest)
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

    def _close(self) -> None:
        if self._storage is not None:
            with self._lock:
                if self._parts or self._state[_SEGMENT] >= 0:
                    self._write_chunk()
                for lane in self._lanes:
                    lane.count()
            if self._chunk_writer is not None:
                self._chunk_writer.close()     # every chunk in the file before the summary
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


class _ChunkWriter:
    """A thread that writes full chunks into the MCAP file (compressing them first with zstd):
    the writes (tens of MB/s of images) and the compression release the GIL, so they cost the
    thread that records only an append to a queue per chunk (the writer looks for chunks every
    _POLL instead of being woken). It is the only writer of the file between the header rosbags
    writes at open and the summary it writes at close. The queue holds up to
    _QUEUED chunks (1 MiB each; ~2 s of the bundled world's recording): a disk that stalls for
    less does not hold the recording back (with a bag the physics thread records every step's
    messages itself, bag.Lane), and a disk slower than the recording for longer holds it back
    instead of filling the memory. A write that fails (a full disk) is raised by the next put
    and by close().

    The chunks go to the file with O_DIRECT where the file system allows it: each chunk's bytes
    are copied once into a page-aligned staging buffer (but block-aligned images' pixels, written
    from their own memory: _DirectFile), whose whole 4 KiB blocks are written with pwritev on a
    second, O_DIRECT descriptor of the file once _WRITE_BATCH bytes (4 MiB: four chunks) are
    pending or _FLUSH_AGE after the last write (the remainder waits for the next).
    Measured on a 2-core VM: buffered writes of 1 MiB cost 320-580 us CPU per MiB (the page
    cache copy and its bookkeeping), O_DIRECT writes 31-71 us per MiB plus 60-70 us per MiB for
    the copy; on the benchmark world's chunks (~450 parts a MiB, the sources cold in the cache)
    this thread's CPU went from 1350-1810 to 650-870 us per MiB (45-61 to 22-29 us per 1 ms step
    at 34 MB/s). Writing the images' pixels from where they were rendered instead of copying
    them took this thread from 8.1-9.1 to 6.1-7.3 us per step (5 s runs at rtf 0, alternating,
    2-core EPYC VM). Other parts of 64 KiB and more are copied by _stream_copy, which releases
    the GIL; the smaller ones by a slice assignment (~0.3 us). The staging buffer starts at the
    block holding the end of what rosbags wrote (read back); close() writes the last partial
    block through rosbags' file object and seeks it to the end, where rosbags writes the
    summary. Where O_DIRECT is refused (EINVAL: tmpfs, some FUSE or overlay file systems) the
    chunks go through rosbags' buffered file object: the same bytes.
    """

    def __init__(self, storage, storage_writer, path, free):
        self.storage = storage
        self.storage_writer = storage_writer     # rosbags' Writer (its per-channel counts)
        self.path = path
        self.free = free             # where a chunk's lane buffer goes once the chunk is written
        self.error = None
        self._direct = None          # _DirectFile after the first chunk, False for buffered writes
        self._spaces = {}            # _space's arrays
        # _DirectFile's staging buffer, faulted in now: its first writes come from Python, holding
        # the interpreter, and a huge page's first write stalled the physics thread ~4 ms
        self._staging = huge_page_memory(2 * _WRITE_BATCH, touch=True)
        self._queue = collections.deque()    # appended and popped under the GIL: no lock, no wake-up
        self._closing = threading.Event()    # set by close(): the last look comes at once
        self._thread = threading.Thread(target=self._work, name="mbsim-bag-writer", daemon=True)
        self._thread.start()

    @property
    def native_id(self):
        return self._thread.native_id

    def put(self, chunk):
        self._raise()
        while len(self._queue) >= _QUEUED:     # the disk is behind: hold the recording back
            time.sleep(_HELD_BACK)
            self._raise()
        self._queue.append(chunk)

    def close(self):
        self._queue.append(None)
        self._closing.set()
        self._thread.join()
        self._raise()

    def _raise(self):
        if self.error is not None:
            error, self.error = self.error, None
            raise OSError(f"writing the bag {self.path}: {error}") from error

    def _work(self):
        while True:
            if not self._queue:
                direct = self._direct
                if direct and self.error is None and direct.due():    # staged chunks go out after
                    try:                                               # _FLUSH_AGE without a new one
                        if not direct.flush():
                            self._direct = False
                    except Exception as e:
                        self.error = e
                self._closing.wait(_POLL)
                continue
            chunk = self._queue.popleft()
            if chunk is None:
                break
            parts, index, lane_buffer = chunk
            if self.error is None:
                try:
                    self._write(parts, index)
                except Exception as e:      # reported to the recording thread
                    self.error = e
            del parts, chunk                 # the views of the lane buffer
            if lane_buffer is not None:
                self.free.append(lane_buffer)
        if self._direct:
            try:
                self._direct.finish()
            except Exception as e:
                if self.error is None:
                    self.error = e

    def _space(self, name, shape, dtype):
        """A workspace array of `shape` for _chunk_layout, kept from chunk to chunk: a new one
        each chunk cost ~50 us of page faults a chunk in situ. (What _DirectFile.write is
        given of `out` it copies: nothing refers to it after.)"""
        rows = shape if isinstance(shape, int) else shape[0]
        a = self._spaces.get(name)
        if a is None or len(a) < rows:
            a = self._spaces[name] = np.empty((2 * rows,) + (() if isinstance(shape, int) else shape[1:]), dtype)
        return a[:rows]

    def _write(self, parts, index):
        """The chunk's records into the file as one Chunk record or, with O_DIRECT and no
        compression, as several, each padded (a _PADDING record before it) so that the pixels of
        its block-aligned image (a big part that is an array starting at a block boundary) start
        at a block offset of the file: the disk then reads them from where they were rendered
        (_DirectFile.write) instead of from a copy. Each Chunk record is followed by a
        MessageIndex record per channel and has a ChunkIndex that rosbags writes into the
        summary (McapWriter.close_chunk's bytes); see _chunk_layout. index: (channel, log time,
        offset) per message, in order."""
        st = self.storage
        if self._direct is None:
            self._direct = _DirectFile.open(st.bio, self._staging)
            self._staging = None
        direct = self._direct
        compression = st.compression.encode()
        split = bool(direct) and not compression
        m, n = len(parts), len(index)
        lengths = np.fromiter(map(len, parts), np.int64, m)
        aligned = np.zeros(m, np.uint8)
        in_place = set()          # id() of those parts (the writer asks once: ~1 us an address)
        if split:
            for j in np.flatnonzero(lengths >= _BIG_PART).tolist():
                if _block_aligned(parts[j]):
                    aligned[j] = 1
                    in_place.add(id(parts[j]))
        body = [st.compressor(b"".join(parts))] if compression else None
        out = self._space("out", (m + 1) * (_BLOCK + 256 + 2 * len(compression)) + 64 * n, np.uint8)
        layout, counts = self._space("layout", (m + 1, 6), np.int64), self._space("counts", (n, 2), np.int64)
        start = direct.position if direct else st.bio.tell()
        records_n, found, end = _chunk_layout(
            lengths, aligned, index, start, split, np.frombuffer(compression, np.uint8), len(body[0]) if body else -1,
            out, layout, counts, self._space("work", (m + 1, 3), np.int64), self._space("channels", (n, 2), np.int64))
        view = memoryview(out)
        pieces = []
        for a, b, head, records, chunk_index, done in layout[:records_n].tolist():
            pieces.append(view[head:records])      # (a _PADDING record and) the Chunk record's head
            pieces += body or parts[a:b]
            pieces.append(view[records:chunk_index])
            rec = io.BytesIO()
            rec.write(view[chunk_index:done])
            st.chunks.append(rec)
        writer = self.storage_writer
        for cid, count in counts[:found].tolist():
            st.channel_stats[cid] += count      # the counts rosbags' writer keeps per message
            writer.counts[cid] += count
        if direct:
            if not direct.write(pieces, end - start, in_place):
                self._direct = False       # O_DIRECT refused at the first write: written buffered
        else:
            st.bio.writelines(pieces)


_BLOCK = 4096        # O_DIRECT offsets, lengths and buffer addresses: a multiple of the logical block size
# The staged bytes are written once this many are pending (or _FLUSH_AGE after the last write): an
# O_DIRECT pwrite cost this VM ~35 us of CPU a call plus ~11 us a MiB (64 us for 1 MiB, 100 us for
# 4 MiB), so one write per 1 MiB chunk cost 3.3 us per step of the bundled world
_WRITE_BATCH = 4 << 20
_FLUSH_AGE = 1.0     # s: complete chunks wait at most about this long in the staging buffer
# Parts from this size on (the images' pixels) are written from their own memory where it and their
# place in the file are block-aligned (_ChunkWriter pads chunks for that), else copied by _stream_copy
# (the GIL released meanwhile): in the bundled world, with non-temporal stores (the staging buffer
# is read next by the disk's DMA, not by the CPU, so caching its lines only costs: reading each
# destination line before writing it and evicting what the other threads use) 126-160 us a MiB
# of frames another thread just rendered, against 175-200 for numpy's copy (memcpy), on a
# 2-core EPYC VM
_BIG_PART = 1 << 16
_SEGMENTS = 256      # pieces of memory one write takes at most (Linux: IOV_MAX 1024)
_pwritev = getattr(os, "pwritev", None)  # (tests make it fail)


def _flat(index):
    """The (n, 3) int64 message index as a flat memoryview (row k at 3k)."""
    return memoryview(index).cast("B").cast("q")


def _open_direct(name):
    return os.open(name, os.O_WRONLY | os.O_DIRECT | os.O_CLOEXEC)


def _block_aligned(part):
    """Whether `part` is a 1-D uint8 NumPy array whose memory starts at a block boundary: an
    image's pixels, which stay as they are while referred to (Transport.takes_parts), so they
    can be written from where they are. (Memory that is reused, the lane's records, comes as
    memoryviews.)"""
    if part.__class__ is not np.ndarray or part.dtype != np.uint8 or part.ndim != 1 or not part.flags.c_contiguous:
        return False
    try:            # its address through ctypes: a third of what .ctypes.data costs (~1 us)
        address = ctypes.addressof(ctypes.c_char.from_buffer(part))
    except TypeError:        # read-only memory
        address = part.ctypes.data
    return address % _BLOCK == 0


class _DirectFile:
    """The MCAP file from the end of what rosbags wrote at open, written with O_DIRECT in whole
    blocks at block offsets. The bytes not written yet are `segments` (whole blocks, in file
    order: closed regions of the staging buffer and big parts' own memory, written as they are)
    and the open region of the page-aligned staging buffer, [region, fill), after them. The
    buffer starts with the block that holds rosbags' last bytes (read back)."""

    @classmethod
    def open(cls, bio, staging=None):
        """A direct writer continuing at bio's position (bio flushed), or False where the file
        system refuses O_DIRECT. staging: its staging buffer (huge_page_memory, touched), or
        None for a new one."""
        bio.flush()
        name = bio.name
        try:
            if not isinstance(name, (str, bytes, os.PathLike)) or not hasattr(os, "O_DIRECT") or _pwritev is None:
                raise OSError(errno.EINVAL, "no O_DIRECT for this file object")
            fd = _open_direct(name)
        except OSError as e:
            log.debug("bag: O_DIRECT refused for %s (%s): the chunks are written buffered", name, e)
            return False
        try:
            return cls(fd, bio, staging)
        except BaseException:
            os.close(fd)
            raise

    def __init__(self, fd, bio, staging=None):
        self.fd = fd
        self.bio = bio
        self.position = bio.tell()                    # the logical end of the file
        self.start = self.position                    # where bio stands until the first direct write
        self.base = self.position // _BLOCK * _BLOCK  # the file offset of the first pending byte
        self.segments = []                            # pending whole blocks before the open region
        self.queued = 0                               # their bytes
        self.region = 0                               # the open region: the staging buffer's [region, fill)
        self.fill = self.position - self.base
        self.written = False                          # whether a direct write went through yet
        self.flushed = time.monotonic()               # when the pending bytes were last written
        if staging is None:
            self._map(2 * _WRITE_BATCH)
        else:
            self.buf = self.view = staging
            self.array = np.frombuffer(staging, np.uint8)
        if self.fill:
            rd = os.open(bio.name, os.O_RDONLY | os.O_CLOEXEC)
            try:
                head = os.pread(rd, self.fill, self.base)
            finally:
                os.close(rd)
            if len(head) != self.fill:
                raise OSError(errno.EIO, f"read back {len(head)} of {self.fill} bytes")
            self.view[:self.fill] = head

    def _map(self, size, keep=0):
        """A new staging buffer of `size` bytes (a multiple of the page size; in huge pages where
        Linux gives them, which pin cheaply for each write) that starts with the old one's first
        `keep` bytes (the old one is unmapped when its last view goes: the segments may still
        hold some)."""
        buf = huge_page_memory(size, touch=True)
        array = np.frombuffer(buf, np.uint8)
        if keep:
            array[:keep] = self.array[:keep]
        self.buf, self.view, self.array = buf, buf, array

    def pending(self):
        """Bytes not written yet."""
        return self.queued + self.fill - self.region

    def write(self, pieces, total, in_place=frozenset()):
        """Add the pieces (`total` bytes) after the pending bytes, and write the whole blocks
        once _WRITE_BATCH bytes are pending or _FLUSH_AGE after the last write (flush). A big
        piece (_BIG_PART) whose id() is in `in_place` (a block-aligned array: _block_aligned)
        and that lands at a block offset of the file is queued as it is (its whole blocks: the
        rest is copied); the others are copied into the staging buffer. False if O_DIRECT is
        refused at the first write (see flush)."""
        need = self.fill + total
        if need > len(self.buf):
            self._map(max(2 * len(self.buf), -(-need // _BLOCK) * _BLOCK), self.fill)
        view, array, n = self.view, self.array, self.fill
        for p in pieces:
            k = len(p)
            if k >= _BIG_PART:
                whole = k - k % _BLOCK
                if id(p) in in_place and (n - self.region) % _BLOCK == 0:     # (region and file offset aligned)
                    if n > self.region:
                        self.segments.append(view[self.region:n])
                    self.segments.append(p[:whole])
                    self.queued += n - self.region + whole
                    self.region = n
                    view[n:n + k - whole] = p[whole:]
                    n += k - whole
                    continue
                _stream_copy(array, n, np.frombuffer(p, np.uint8))
            else:
                view[n:n + k] = p
            n += k
        self.fill = n
        self.position += total
        if (self.pending() >= _WRITE_BATCH or len(self.segments) >= _SEGMENTS
                or time.monotonic() - self.flushed >= _FLUSH_AGE):
            return self.flush()
        return True

    def due(self):
        """Whether whole blocks are pending and the last write is _FLUSH_AGE old."""
        return self.pending() >= _BLOCK and time.monotonic() - self.flushed >= _FLUSH_AGE

    def flush(self):
        """Write the pending whole blocks. False if O_DIRECT is refused at the first write:
        then the bytes from where bio stands are written through bio and this writer is closed."""
        region, n = self.region, self.fill
        whole = (n - region) // _BLOCK * _BLOCK
        buffers = self.segments + ([self.view[region:region + whole]] if whole else [])
        total = self.queued + whole
        done = 0
        self.flushed = time.monotonic()
        try:
            while done < total:
                got = _pwritev(self.fd, buffers, self.base + done)
                if got <= 0 or got % _BLOCK:
                    raise OSError(errno.EIO, f"O_DIRECT pwritev wrote {got} of {total - done} bytes")
                done += got
                self.written = True
                while buffers and got >= len(buffers[0]):     # (a short write: the rest again)
                    got -= len(buffers.pop(0))
                if got:
                    buffers[0] = buffers[0][got:]
        except OSError as e:
            if self.written or e.errno != errno.EINVAL:
                self._drop(done)
                raise
            log.debug("bag: O_DIRECT write refused for %s (%s): the chunks are written buffered",
                      self.bio.name, e)
            pending = b"".join([*self.segments, self.view[region:n]])
            self.bio.write(pending[self.start - self.base:])
            self.close()
            return False
        self._drop(done)
        return True

    def _drop(self, done):
        """Forget the first `done` bytes pending (written): segments first, then the open
        region, whose rest moves to the buffer's start once no segment refers to the buffer."""
        self.base += done
        while self.segments and done >= len(self.segments[0]):
            k = len(self.segments.pop(0))
            done -= k
            self.queued -= k
        if self.segments:
            self.segments[0] = self.segments[0][done:]
            self.queued -= done
            return
        start = self.region + done
        rest = self.fill - start
        self.array[:rest] = self.array[start:self.fill]
        self.region, self.fill = 0, rest

    def finish(self):
        """Write the pending whole blocks (flush), then the last partial one through bio at its
        offset, leaving bio at the logical end (a seek also resynchronizes the buffered writer's
        position with the file's)."""
        try:
            if not self.flush():
                return           # O_DIRECT refused at this first write: all went through bio
            bio = self.bio
            bio.seek(self.base)
            if self.fill > self.region:
                bio.write(self.view[self.region:self.fill])
            if bio.tell() != self.position:
                raise OSError(errno.EIO, f"the bag ends at {bio.tell()}, expected {self.position}")
        finally:
            self.close()

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        self.segments = []
        self.buf = self.view = self.array = None


# The sources a lane's values are gathered from (Lane: sources)
LANE_SOURCES = ("q", "v", "tau", "kinematic", "tf")


class Lane:
    """Messages of fixed layout that one compiled call per step fills and records into the bag's
    pending chunk, with no Python per message: the clock, joint states, /tf and the kinematic
    sensors' Imu and WrenchStamped, which come every step or every few.

    members: (handle, template (ros/templates.py), slot, due_bit, gathers, stamps) per message
    kind, in the order they are recorded at an instant. slot >= 0: a kinematic sensor's; its
    message is recorded when sample_count[slot] changed since the last record, stamped
    sample_stamp[slot]; slot -1: recorded at the steps where bit due_bit of the rates' mask
    (record) is set, stamped with the step's time. gathers: (buffer offset in the message,
    source, index) per float64 value written: sources[source][index], the sources being the
    arrays named in LANE_SOURCES (flattened). stamps: the buffer offsets of the message's
    builtin_interfaces/Time fields, each given the stamp (a TFMessage has one per transform).
    The records are the bytes BagTransport.publish would record for the template's bytes
    (tested), in the same chunks.

    rates: (period, k), the arrays of templates.due_rates: record() computes the step's due
    mask itself, in the same compiled call (one call a step instead of two: the call from Python
    is most of the cost of either), and returns it. prepare: (bits, fn): fn() is called once
    before a member whose due bit is in bits is recorded, to compute the values it gathers
    (/tf's, at the steps it is due)."""

    def __init__(self, bag, members, sources, sample_count, sample_stamp, rates=None, prepare=None):
        self.bag = bag
        self.handles = [m[0] for m in members]
        consts, table, gathers, stamps = [], [], [], []
        at = 0
        for handle, tmpl, slot, due_bit, values, stamp_at in members:
            data = bytes(tmpl.buf)
            table.append((handle.impl.id, at, len(data), slot, due_bit, len(gathers), len(gathers) + len(values),
                          len(stamps), len(stamps) + len(stamp_at)))
            gathers += values
            stamps += stamp_at
            consts.append(data)
            at += len(data)
        self.consts = np.frombuffer(b"".join(consts) or b"\0", np.uint8).copy()
        # per member: channel, its template's bytes in consts (offset, length), slot, due bit,
        # its gathers (first, end) and its stamps (first, end)
        self.table = np.array(table, np.int64).reshape(-1, 9)
        self.gathers = np.array(gathers, np.int64).reshape(-1, 3)
        self.stamps = np.array(stamps, np.int64)
        self.progress = np.zeros((len(members), 2), np.int64)    # per member: the sample count recorded, messages
        for k, (_, _, slot, _, _, _) in enumerate(members):
            if slot >= 0:
                self.progress[k, 0] = sample_count[slot]        # the samples before are not this lane's
        self.largest = 31 + max((len(c) for c in consts), default=0)
        if any(a.dtype != np.float64 or not a.flags.c_contiguous for a in sources):
            raise ValueError("a lane reads its sources in place: C-contiguous float64 arrays expected")
        self.sources = tuple(a.reshape(-1) for a in sources)
        self.sample_count, self.sample_stamp = sample_count, sample_stamp
        period, k = rates if rates is not None else (np.zeros(0), np.zeros(0, np.int64))
        self.hold, self.prepare = prepare if prepare is not None else (0, None)
        self._args = (self.consts, self.table, self.gathers, self.stamps, self.progress, *self.sources, sample_count,
                      sample_stamp, period, k)

    def record(self, t):
        """Record the messages due after the step that reached time t: those of the members with
        slot -1 whose bit is set in the due mask (templates.due_rates of the rates), and those
        whose sensor sampled. Returns the due mask."""
        bag = self.bag
        args = self._args
        mask, hold, m = -1, self.hold, 0
        with bag._lock:
            while True:
                buf = bag._lane_buffer
                if buf is None or len(buf) < bag._lane_capacity:
                    bag._close_segment()
                    buf = bag._lane_buffer = np.empty(bag._lane_capacity, np.uint8)
                    bag._state[_LANE_END] = 0
                m, mask, stop = _record_lane(buf, bag._state, bag._index, *args, t, mask, hold, m, _CHUNK_LIMIT)
                if stop == _DONE:
                    return mask
                if stop == _OVER_LIMIT:
                    bag._write_chunk()
                elif stop == _INDEX_FULL:         # twice as long, then go on
                    index = bag._index
                    bag._index = np.concatenate([index, np.empty_like(index)])
                else:                             # _PREPARE
                    self.prepare()
                    hold = 0

    def count(self):
        """Add the messages recorded since the last count to the handles' counts (bag lock held)."""
        for handle, k, n in zip(self.handles, self.progress[:, 1].tolist(), self.table[:, 2].tolist()):
            handle.messages += k
            handle.bytes += k * n
        self.progress[:, 1] = 0


def warm_up():
    """Compile the lane and index kernels (or load them from the cache) for the argument types
    they get: in the warm-up, before the first message and the clock."""
    f, i = np.zeros(1), np.zeros(1, np.int64)
    _record_lane(np.zeros(64, np.uint8), np.array([0, *_NO_TIME, 0, 0, -1], np.int64), np.zeros((1, 3), np.int64),
                 np.zeros(1, np.uint8), np.zeros((0, 9), np.int64), np.zeros((0, 3), np.int64), i,
                 np.zeros((0, 2), np.int64), f, f, f, f, f, i, f, np.ones(1), i, 0.0, -1, 0, 0, _CHUNK_LIMIT)
    _chunk_layout(np.ones(1, np.int64), np.ones(1, np.uint8), np.zeros((1, 3), np.int64), 0, True,
                  np.frombuffer(b"", np.uint8), -1, np.zeros(8192, np.uint8), np.zeros((2, 6), np.int64),
                  np.zeros((1, 2), np.int64), np.zeros((2, 3), np.int64), np.zeros((1, 2), np.int64))
    for source in (np.zeros(64, np.uint8), np.frombuffer(bytes(64), np.uint8)):   # pixels, and bytes (read-only)
        _stream_copy(np.zeros(64, np.uint8), 0, source)


with kernel_cache("ros"):
    from llvmlite import ir
    from numba.core import cgutils, types
    from numba.extending import intrinsic

    from .._kernel_cache import kernel

    @intrinsic
    def _copy_bytes(typingctx, dst, dst_at, src, src_at, n):
        """dst[dst_at:dst_at + n] = src[src_at:src_at + n] (1-D uint8 arrays that do not
        overlap) as one memcpy: numba copies a slice element by element, ~1 ns a byte."""
        def codegen(context, builder, signature, args):
            d, d_at, s, s_at, count = args
            d_data = context.make_array(signature.args[0])(context, builder, d).data
            s_data = context.make_array(signature.args[2])(context, builder, s).data
            cgutils.raw_memcpy(builder, builder.gep(d_data, [d_at]), builder.gep(s_data, [s_at]), count, 1)
        return types.void(dst, types.intp, src, types.intp, types.intp), codegen

    @intrinsic
    def _stream_bytes(typingctx, dst, dst_at, src, n):
        """dst[dst_at:dst_at + n] = src[:n] (1-D uint8 arrays that do not overlap), the 32-byte
        aligned middle of the destination by non-temporal stores (written to memory around the
        caches), its unaligned ends by memcpy; a fence after, so the bytes are in memory before
        a write() hands the buffer to the disk."""
        def codegen(context, builder, signature, args):
            d, d_at, s, count = args
            i64 = ir.IntType(64)
            dst_ptr = builder.gep(context.make_array(signature.args[0])(context, builder, d).data, [d_at])
            src_ptr = context.make_array(signature.args[2])(context, builder, s).data
            head = builder.and_(builder.sub(ir.Constant(i64, 0), builder.ptrtoint(dst_ptr, i64)), ir.Constant(i64, 31))
            head = builder.select(builder.icmp_unsigned(">", head, count), count, head)
            cgutils.raw_memcpy(builder, dst_ptr, src_ptr, head, 1)
            vector = ir.VectorType(i64, 4)
            nontemporal = builder.module.add_metadata([ir.Constant(ir.IntType(32), 1)])
            vectors = builder.udiv(builder.sub(count, head), ir.Constant(i64, 32))
            with cgutils.for_range(builder, vectors) as loop:
                at = builder.add(head, builder.mul(loop.index, ir.Constant(i64, 32)))
                value = builder.load(builder.bitcast(builder.gep(src_ptr, [at]), vector.as_pointer()), align=1)
                store = builder.store(value, builder.bitcast(builder.gep(dst_ptr, [at]), vector.as_pointer()), align=32)
                store.set_metadata("nontemporal", nontemporal)
            done = builder.add(head, builder.mul(vectors, ir.Constant(i64, 32)))
            cgutils.raw_memcpy(builder, builder.gep(dst_ptr, [done]), builder.gep(src_ptr, [done]),
                               builder.sub(count, done), 1)
            builder.fence("seq_cst")
        return types.void(dst, types.intp, src, types.intp), codegen

    @kernel()
    def _stream_copy(dst, at, src):
        """dst[at:at + len(src)] = src (1-D uint8 arrays), by _stream_bytes."""
        if at < 0 or at + len(src) > len(dst):
            raise IndexError("_stream_copy: the source does not fit at that offset")
        _stream_bytes(dst, at, src, len(src))

    @intrinsic
    def _store(typingctx, buf, at, value, kind):
        """Store `value` as the little-endian type `kind` (a NumPy scalar type: np.uint16,
        np.uint32, np.int32, np.uint64, np.float64) at buf[at:] (1-D uint8), at any alignment:
        one store (the CPUs ROS runs on, x86-64 and aarch64, are little endian and take unaligned
        stores)."""
        target = kind.instance_type if isinstance(kind, types.NumberClass) else kind.dtype

        def codegen(context, builder, signature, args):
            data, offset, x, _ = args
            ptr = builder.gep(context.make_array(signature.args[0])(context, builder, data).data, [offset])
            lltype = context.get_value_type(target)
            ptr = builder.bitcast(ptr, lltype.as_pointer())
            builder.store(context.cast(builder, x, signature.args[2], target), ptr, align=1)
        return types.void(buf, types.intp, value, kind), codegen

    @kernel()
    def _chunk_layout(lengths, aligned, index, position, split, compression, stored, out, layout, counts, work,
                      channels):
        """The bytes around a pending chunk's parts (lengths[j]: the j-th part's) in the file from
        `position` on, into out: per Chunk record, where `layout` (a row each) says,
        - out[head:records]: with `split`, a _PADDING record where the piece has a block-aligned
          image (aligned[j]: its pixels are part j), so that those pixels start at a block offset
          of the file; then the Chunk record up to its records (parts[a:b], or the compressed
          body of `stored` bytes when stored >= 0: one piece);
        - out[records:chunk_index]: its MessageIndex records, one per channel in order of the
          channel's first message, as rosbags writes them;
        - out[chunk_index:done]: its ChunkIndex record's content, for the summary.
        Without `split` one Chunk record holds all parts. With it, a piece ends before the
        record of each block-aligned image after the piece's first (whose record starts at a
        part of its own; else the image is copied). index: (channel, log time, offset) per
        message, in order. counts[k]: (channel, messages) over the chunk. work ((parts + 1, 3))
        and channels ((messages, 2)): workspaces. Returns the pieces, the channels in counts and
        the file offset after the last piece."""
        m, n = len(lengths), len(index)
        starts, cuts, pixels = work[:, 0], work[:, 1], work[:, 2]   # part offsets; per piece: its first
        starts[0] = 0                                                # part, its aligned pixels' offset
        for j in range(m):
            starts[j + 1] = starts[j] + lengths[j]
        cuts[0] = 0
        pixels[0] = -1
        pieces = 1
        row = 0
        for j in range(m):
            if not (split and aligned[j]):
                continue
            if pixels[pieces - 1] < 0:
                pixels[pieces - 1] = starts[j] - starts[cuts[pieces - 1]]
                continue
            while row + 1 < n and index[row + 1, 2] <= starts[j]:
                row += 1
            record = index[row, 2]              # the record that holds part j
            first = j
            while first > cuts[pieces - 1] and starts[first] > record:
                first -= 1
            if first > cuts[pieces - 1] and starts[first] == record:
                cuts[pieces] = first
                pixels[pieces] = starts[j] - record
                pieces += 1
                pixels[pieces] = -1
        cuts[pieces] = m
        found = 0
        for i in range(n):
            k = 0
            while k < found and counts[k, 0] != index[i, 0]:
                k += 1
            if k == found:
                counts[k, 0], counts[k, 1] = index[i, 0], 0
                found += 1
            counts[k, 1] += 1
        head_size = 49 + len(compression)      # Chunk: opcode 6, length, start and end time, records' size,
        o, pos, r0 = 0, position, 0            # CRC (0: none), compression, stored size
        for p in range(pieces):
            a, b = cuts[p], cuts[p + 1]
            offset = starts[a]
            size = starts[b] - offset
            body = size if stored < 0 else stored
            r1 = r0
            while r1 < n and index[r1, 2] < starts[b]:
                r1 += 1
            t0, t1 = np.int64(2 ** 63 - 1), np.int64(0)       # an empty chunk's, as rosbags writes them
            for i in range(r0, r1):
                t0 = min(t0, index[i, 1])
                t1 = max(t1, index[i, 1])
            layout[p, 0], layout[p, 1], layout[p, 2] = a, b, o
            pad = 0
            if split and pixels[p] >= 0:
                pad = -(pos + head_size + pixels[p]) % _BLOCK
                if 0 < pad < 9:                      # (a record is at least its opcode and length)
                    pad += _BLOCK
            if pad:
                out[o] = _PADDING
                _store(out, o + 1, pad - 9, np.uint64)
                out[o + 9:o + pad] = 0
                o += pad
            chunk_start = pos + pad
            out[o] = 6
            _store(out, o + 1, head_size - 9 + body, np.uint64)
            _store(out, o + 9, t0, np.uint64)
            _store(out, o + 17, t1, np.uint64)
            _store(out, o + 25, size, np.uint64)
            _store(out, o + 33, 0, np.uint32)       # no CRC
            _store(out, o + 37, len(compression), np.uint32)
            for i in range(len(compression)):
                out[o + 41 + i] = compression[i]
            _store(out, o + 41 + len(compression), body, np.uint64)
            o += head_size
            layout[p, 3] = o
            chunk_end = chunk_start + head_size + body
            records = o
            used = 0
            for i in range(r0, r1):
                cid = index[i, 0]
                seen = False
                for k in range(used):
                    if channels[k, 0] == cid:
                        seen = True
                        break
                if seen:
                    continue
                count = 0
                for j in range(i, r1):
                    if index[j, 0] == cid:
                        count += 1
                channels[used, 0], channels[used, 1] = cid, o - records    # (its MessageIndex record's offset)
                used += 1
                out[o] = 7                       # MessageIndex: opcode, length, channel, (time, offset)s
                _store(out, o + 1, 2 + 4 + 16 * count, np.uint64)
                _store(out, o + 9, cid, np.uint16)
                _store(out, o + 11, 16 * count, np.uint32)
                o += 15
                for j in range(i, r1):
                    if index[j, 0] == cid:
                        _store(out, o, index[j, 1], np.uint64)
                        _store(out, o + 8, index[j, 2] - offset, np.uint64)
                        o += 16
            index_size = o - records
            layout[p, 4] = o
            _store(out, o, t0, np.uint64)
            _store(out, o + 8, t1, np.uint64)
            _store(out, o + 16, chunk_start, np.uint64)
            _store(out, o + 24, chunk_end - chunk_start, np.uint64)
            _store(out, o + 32, 10 * used, np.uint32)
            o += 36
            for k in range(used):
                _store(out, o, channels[k, 0], np.uint16)
                _store(out, o + 2, chunk_end + channels[k, 1], np.uint64)
                o += 10
            _store(out, o, index_size, np.uint64)
            _store(out, o + 8, len(compression), np.uint32)
            for i in range(len(compression)):
                out[o + 12 + i] = compression[i]
            o += 12 + len(compression)
            _store(out, o, body, np.uint64)
            _store(out, o + 8, size, np.uint64)
            o += 16
            layout[p, 5] = o
            pos = chunk_end + index_size
            r0 = r1
        return pieces, found, pos

    @kernel()
    def _record_lane(buf, state, index, consts, table, gathers, stamps, progress, q, v, tau, kin, tf,
                     sample_count, sample_stamp, period, k, t, mask, hold, m, limit):
        """Lane.record's compiled part, from member m on: each due member's template bytes with
        its stamps and values written in, as an MCAP Message record (_MESSAGE_RECORD) after the
        chunk's lane records in buf, and its index entry. mask < 0: the step's due mask is
        computed first (templates.due_rates(period, k, t), which moves k on: once a step).
        Returns (the next member, the mask, why it stopped): _DONE after the last member;
        _OVER_LIMIT after a record that took the chunk past `limit` bytes (the caller writes the
        chunk, then calls again from the member returned); _INDEX_FULL at a member whose entry
        does not fit the index; _PREPARE at a due member whose bit is in `hold` (the caller
        computes the values it gathers, then calls again with hold 0)."""
        if mask < 0:
            mask = due_rates(period, k, t)
        for m in range(m, len(table)):
            slot = table[m, 3]
            if slot < 0:
                if (mask >> table[m, 4]) & 1 == 0:
                    continue
                if (hold >> table[m, 4]) & 1:
                    return m, mask, _PREPARE
                stamp = t
            else:
                if sample_count[slot] == progress[m, 0]:
                    continue
                stamp = sample_stamp[slot]
            count = state[3]
            if count == len(index):
                return m, mask, _INDEX_FULL
            # seconds and nanoseconds as messages.to_sec_nanosec rounds them (half to even)
            sec = np.floor(stamp)
            nanosec = np.rint((stamp - sec) * 1e9)
            if nanosec >= 1e9:
                sec += 1.0
                nanosec = 0.0
            isec, insec = np.int64(sec), np.int64(nanosec)
            ns = isec * 1_000_000_000 + insec
            n = table[m, 2]
            at = state[4]
            size = state[0]
            buf[at] = 5
            _store(buf, at + 1, 22 + n, np.uint64)
            _store(buf, at + 9, table[m, 0], np.uint16)
            _store(buf, at + 11, 0, np.uint32)
            _store(buf, at + 15, ns, np.uint64)
            _store(buf, at + 23, ns, np.uint64)
            body = at + 31
            c = table[m, 1]
            _copy_bytes(buf, body, consts, c, n)
            for s in range(table[m, 7], table[m, 8]):
                _store(buf, body + stamps[s], isec, np.int32)
                _store(buf, body + stamps[s] + 4, insec, np.uint32)
            for g in range(table[m, 5], table[m, 6]):
                src, i = gathers[g, 1], gathers[g, 2]
                if src == 0:
                    x = q[i]
                elif src == 1:
                    x = v[i]
                elif src == 2:
                    x = tau[i]
                elif src == 3:
                    x = kin[i]
                else:
                    x = tf[i]
                _store(buf, body + gathers[g, 0], x, np.float64)
            index[count, 0] = table[m, 0]
            index[count, 1] = ns
            index[count, 2] = size
            state[3] = count + 1
            if state[5] < 0:
                state[5] = at
            state[4] = body + n
            state[0] = size + 31 + n
            if ns < state[1]:
                state[1] = ns
            if ns > state[2]:
                state[2] = ns
            if slot >= 0:
                progress[m, 0] = sample_count[slot]
            progress[m, 1] += 1
            if state[0] > limit:
                return m + 1, mask, _OVER_LIMIT
        return len(table), mask, _DONE
