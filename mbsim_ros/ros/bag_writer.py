"""The bag's writer thread: full chunks (compressed with zstd when asked) into the MCAP file,
their message index records and their chunk index for the summary."""
from __future__ import annotations

import collections
import io
import struct
import tempfile
import threading
import time

import numpy as np

from ..sensors.optical import huge_page_memory
from .transport import log
from .direct_file import BIG_PART, DirectFile, WRITE_BATCH, block_aligned
from .bag_kernels import BLOCK, chunk_layout


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


class SpilledRecords:
    """The chunk indexes of the summary kept in an unlinked temporary file beside the bag until
    close, in place of rosbags' list of them (McapWriter.chunks): a ChunkIndex record (~300 bytes
    with its BytesIO) per chunk in memory grew the RSS ~40 MB an hour of recording. What rosbags
    asks of that list: append (a BytesIO), len, and iteration, in order, of records it writes
    with write_record (tell() = its length, getbuffer())."""
    _LENGTH = struct.Struct("<I")

    def __init__(self, directory):
        self._file = tempfile.TemporaryFile(dir=directory, prefix=".chunk-indexes-")
        self._count = 0

    def append(self, record):
        data = record.getbuffer()[:record.tell()] if isinstance(record, io.BytesIO) else memoryview(record)
        self._file.write(self._LENGTH.pack(len(data)))
        self._file.write(data)
        self._count += 1

    def __len__(self):
        return self._count

    def __iter__(self):
        f = self._file
        f.flush()
        f.seek(0)
        try:
            for _ in range(self._count):
                data = f.read(self._LENGTH.unpack(f.read(self._LENGTH.size))[0])
                record = io.BytesIO()
                record.write(data)
                yield record
        finally:
            f.seek(0, io.SEEK_END)

    def clear(self):
        self._file.seek(0)
        self._file.truncate()
        self._count = 0

    def close(self):
        self._file.close()


class ChunkWriter:
    """A thread that writes full chunks into the MCAP file (compressing them first with zstd):
    the writes (tens of MB/s of images) and the compression release the GIL, so they cost the
    thread that records only an append to a queue per chunk (the writer looks for chunks every
    _POLL instead of being woken). It is the only writer of the file between the header rosbags
    writes at open and the summary it writes at close. The queue holds up to
    _QUEUED chunks (1 MiB each; ~2 s of the bundled world's recording): a disk that stalls for
    less does not hold the recording back (with a bag the physics thread records every step's
    messages itself, bag_lane.Lane), and a disk slower than the recording for longer holds it back
    instead of filling the memory. A write that fails (a full disk) ends the writing (nothing
    is written after it) and is raised once, by the next put or by close(); with raising False
    it is only kept (failure).

    The chunks go to the file with O_DIRECT where the file system allows it: each chunk's bytes
    are copied once into a page-aligned staging buffer (but block-aligned images' pixels, written
    from their own memory: DirectFile), whose whole 4 KiB blocks are written with pwritev on a
    second, O_DIRECT descriptor of the file once WRITE_BATCH bytes (4 MiB: four chunks) are
    pending or _FLUSH_AGE after the last write (the remainder waits for the next).
    Measured on a 2-core VM: buffered writes of 1 MiB cost 320-580 us CPU per MiB (the page
    cache copy and its bookkeeping), O_DIRECT writes 31-71 us per MiB plus 60-70 us per MiB for
    the copy; on the benchmark world's chunks (~450 parts a MiB, the sources cold in the cache)
    this thread's CPU went from 1350-1810 to 650-870 us per MiB (45-61 to 22-29 us per 1 ms step
    at 34 MB/s). Writing the images' pixels from where they were rendered instead of copying
    them took this thread from 8.1-9.1 to 6.1-7.3 us per step (5 s runs at rtf 0, alternating,
    2-core EPYC VM). Other parts of 64 KiB and more are copied by stream_copy, which releases
    the GIL; the smaller ones by a slice assignment (~0.3 us). The staging buffer starts at the
    block holding the end of what rosbags wrote (read back); close() writes the last partial
    block through rosbags' file object and seeks it to the end, where rosbags writes the
    summary. Where O_DIRECT is refused (EINVAL: tmpfs, some FUSE or overlay file systems) the
    chunks go through rosbags' buffered file object: the same bytes.
    """

    def __init__(self, storage, storage_writer, path, free, raising=True):
        self.storage = storage
        storage.chunks = SpilledRecords(path)    # (empty until the first chunk: rosbags' list is)
        self.storage_writer = storage_writer     # rosbags' Writer (its per-channel counts)
        self.path = path
        self.free = free             # where a chunk's lane buffer goes once the chunk is written
        self.raising = raising       # False: a failure is kept (failure) and never raised
        self.error = None            # a failure not yet raised
        self.failure = None          # the first failure: nothing is written after it
        self.reported = False        # whether it was raised
        self._direct = None          # DirectFile after the first chunk, False for buffered writes
        self._spaces = {}            # _space's arrays
        # DirectFile's staging buffer, faulted in now: its first writes come from Python, holding
        # the interpreter, and a huge page's first write stalled the physics thread ~4 ms
        self._staging = huge_page_memory(2 * WRITE_BATCH, touch=True)
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
        if self.error is not None and self.raising:
            error, self.error = self.error, None
            self.reported = True
            raise OSError(f"writing the bag {self.path}: {error} (the bag keeps what it recorded before: "
                          "its complete chunks)") from error

    def _fail(self, error):
        if self.failure is None:
            self.failure = self.error = error
            if not self.raising:     # (else the recording thread raises it: one line)
                log.error("writing the bag %s: %s: nothing more is recorded", self.path, error)

    def _work(self):
        while True:
            if not self._queue:
                direct = self._direct
                if direct and self.failure is None and direct.due():   # staged chunks go out after
                    try:                                                # _FLUSH_AGE without a new one
                        if not direct.flush():
                            self._direct = False
                    except Exception as e:
                        self._fail(e)
                self._closing.wait(_POLL)
                continue
            chunk = self._queue.popleft()
            if chunk is None:
                break
            parts, index, lane_buffer = chunk
            if self.failure is None:
                try:
                    self._write(parts, index)
                except Exception as e:      # reported to the recording thread
                    self._fail(e)
            del parts, chunk                 # the views of the lane buffer
            if lane_buffer is not None:
                self.free.append(lane_buffer)
        if self._direct:
            if self.failure is not None:
                self._direct.close()
                return
            try:
                self._direct.finish()
            except Exception as e:
                self._fail(e)

    def _space(self, name, shape, dtype):
        """A workspace array of `shape` for chunk_layout, kept from chunk to chunk: a new one
        each chunk cost ~50 us of page faults a chunk in situ. (What DirectFile.write is
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
        (DirectFile.write) instead of from a copy. Each Chunk record is followed by a
        MessageIndex record per channel and has a ChunkIndex that rosbags writes into the
        summary (McapWriter.close_chunk's bytes); see chunk_layout. index: (channel, log time,
        offset) per message, in order."""
        st = self.storage
        if self._direct is None:
            self._direct = DirectFile.open(st.bio, self._staging)
            self._staging = None
        direct = self._direct
        compression = st.compression.encode()
        split = bool(direct) and not compression
        m, n = len(parts), len(index)
        lengths = np.fromiter(map(len, parts), np.int64, m)
        aligned = np.zeros(m, np.uint8)
        in_place = set()          # id() of those parts (the writer asks once: ~1 us an address)
        if split:
            for j in np.flatnonzero(lengths >= BIG_PART).tolist():
                if block_aligned(parts[j]):
                    aligned[j] = 1
                    in_place.add(id(parts[j]))
        body = [st.compressor(b"".join(parts))] if compression else None
        out = self._space("out", (m + 1) * (BLOCK + 256 + 2 * len(compression)) + 64 * n, np.uint8)
        layout, counts = self._space("layout", (m + 1, 6), np.int64), self._space("counts", (n, 2), np.int64)
        start = direct.position if direct else st.bio.tell()
        records_n, found, end = chunk_layout(
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
