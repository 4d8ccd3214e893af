"""rosbag2 (MCAP storage) files written with rosbags' Writer: `ros2 bag info/play` read them.

Version 8 metadata (Humble's rosbag2 cannot read version 9), the offered QoS recorded per topic
(without it `ros2 bag play` replays /tf_static and /robot_description as volatile and late
subscribers such as RViz never get them), message definitions embedded in the MCAP schemas,
optional zstd compression of the MCAP chunks ("storage" compression; rosbag2's MCAP plugin
refuses per-message compression). Summary, statistics and metadata.yaml are written on close().

Writing without per-message writes: publish() adds one packed record header and the message
bytes as they are (no copy) to the pending MCAP chunk's list of parts, and its log time and
offset to the chunk's message index lists (~1.5 us a message; rosbags' Writer.write costs ~10 us
in small writes and copies). A chunk past 1 MiB goes to a writer thread (_ChunkWriter) that
writes its record, the parts (or their zstd compression) and its message index records (built
with numpy) into the file, and hands its chunk index to rosbags' writer for the summary; the
counts and time ranges rosbags keeps per message are added per chunk. It writes with O_DIRECT
from a page-aligned staging buffer where the file system allows it (about half the CPU time
per MiB of buffered writes, which matters at tens of MB/s of camera images), buffered
elsewhere. The file's bytes are those rosbags' Writer.write writes message by message
(tested). Schema and channel records (rosbags writes them into its own chunk buffer when a
topic is advertised) move into the pending chunk at the point they were written. This uses
the MCAP storage writer's attributes (rosbags 0.9 - 0.11); where they are missing, each message
goes through Writer.write as before (same bag).
"""
from __future__ import annotations

import errno
import io
import mmap
import os
import queue
import struct
import threading
from pathlib import Path

import numpy as np
from rosbags.rosbag2 import Writer
from rosbags.rosbag2.enums import CompressionFormat, CompressionMode, StoragePlugin

from .messages import TYPESTORE
from .qos import to_bag_qos
from .transport import Publisher, Subscription, Transport, log, message_size

__all__ = ["BagTransport"]

_MESSAGE_RECORD = struct.Struct("<BQHIQQ")   # MCAP Message: opcode 5, length, channel, sequence, log/publish time
_CHUNK_HEAD = struct.Struct("<BQQQQI")       # MCAP Chunk: opcode 6, length, start/end time, uncompressed size, crc
_INDEX_HEAD = struct.Struct("<BQHI")         # MCAP MessageIndex: opcode 7, length, channel, byte length
_CHUNK_LIMIT = 1 << 20                        # rosbags closes a chunk past 1 MiB
_NO_TIME = (2 ** 63 - 1, 0)                   # an empty chunk's (start, end), as rosbags writes it


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
        self._chunk_writer = None
        self._new_chunk()

    def _new_chunk(self):
        self._parts = []        # the chunk's records: message headers and message bytes as given
        self._size = 0
        self._index = {}        # channel -> ([log time], [offset in the chunk]), in order of appearance
        self._time = list(_NO_TIME)

    def _advertise(self, pub: Publisher):
        if self._storage is None:
            return self._add_connection(pub)
        with self._lock:                   # the publisher thread may be writing into the chunk
            st = self._storage
            conn = self._add_connection(pub)
            records = st.chunk.bio.getvalue()  # rosbags wrote them into its own chunk buffer,
            st.chunk.bio.seek(0)               # in the chunk after what came before
            st.chunk.bio.truncate()
            self._parts.append(records)
            self._size += len(records)
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
            parts, span, index = self._parts, self._time, self._index
            for handle, data, stamp_ns in messages:
                whole = data.__class__ is not tuple
                n = message_size(data)
                handle.messages += 1
                handle.bytes += n
                ts = int(stamp_ns)
                cid = handle.impl.id
                entry = index.get(cid)
                if entry is None:
                    entry = index[cid] = ([], [])
                entry[0].append(ts)
                entry[1].append(self._size)
                parts.append(pack(5, 22 + n, cid, 0, ts, ts))
                if whole:
                    parts.append(data)
                else:
                    parts += data
                self._size += 31 + n
                if ts < span[0]:
                    span[0] = ts
                if ts > span[1]:
                    span[1] = ts
                if self._size > _CHUNK_LIMIT:
                    self._write_chunk()
                    parts, span, index = self._parts, self._time, self._index

    def _write_chunk(self) -> None:
        """Hand the pending chunk to the chunk writer thread and start a new one; the counts and
        time ranges rosbags' writer keeps per message are added here per chunk."""
        st, w = self._storage, self._writer
        for cid, (times, _) in self._index.items():
            st.channel_stats[cid] += len(times)
            w.counts[cid] += len(times)
        first, last = self._time
        if first <= last:                  # else a chunk of schema and channel records only
            st.message_start_time = min(st.message_start_time, first)
            st.message_end_time = max(st.message_end_time, last)
            w.min_timestamp = min(w.min_timestamp, first)
            w.max_timestamp = max(w.max_timestamp, last)
        if self._chunk_writer is None:
            self._chunk_writer = _ChunkWriter(self._storage, self.path)
        self._chunk_writer.put((self._parts, self._size, self._index, self._time))
        self._new_chunk()

    def _subscribe(self, sub: Subscription):
        log.info("bag transport: %s is not an input here (nothing is received from a bag)", sub.topic)
        return None

    def _close(self) -> None:
        if self._storage is not None:
            if self._parts:
                self._write_chunk()
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
    thread that records only a queue put per chunk. It is the only writer of the file between
    the header rosbags writes at open and the summary it writes at close. The queue is short: a
    disk slower than the recording holds the recording back instead of filling the memory. A
    write that fails (a full disk) is raised by the next put and by close().

    The chunks go to the file with O_DIRECT where the file system allows it: each chunk's bytes
    are copied once into a page-aligned staging buffer and its whole 4 KiB blocks written with
    pwrite on a second, O_DIRECT descriptor of the file (the remainder waits for the next chunk).
    Measured on a 2-core VM: buffered writes of 1 MiB cost 320-580 us CPU per MiB (the page
    cache copy and its bookkeeping), O_DIRECT writes 31-71 us per MiB plus 60-70 us per MiB for
    the copy; on the benchmark world's chunks (~450 parts a MiB, the sources cold in the cache)
    this thread's CPU went from 1350-1810 to 650-870 us per MiB (45-61 to 22-29 us per 1 ms step
    at 34 MB/s). Parts of 64 KiB and more are copied with numpy, which releases the GIL; the
    per-part Python work is a slice assignment (~0.3 us). The staging buffer starts at the
    block holding the end of what rosbags wrote (read back); close() writes the last partial
    block through rosbags' file object and seeks it to the end, where rosbags writes the
    summary. Where O_DIRECT is refused (EINVAL: tmpfs, some FUSE or overlay file systems) the
    chunks go through rosbags' buffered file object: the same bytes.
    """

    def __init__(self, storage, path):
        self.storage = storage
        self.path = path
        self.error = None
        self._direct = None          # _DirectFile after the first chunk, False for buffered writes
        self._queue = queue.Queue(maxsize=4)
        self._thread = threading.Thread(target=self._work, name="mbsim-bag-writer", daemon=True)
        self._thread.start()

    def put(self, chunk):
        self._raise()
        self._queue.put(chunk)

    def close(self):
        self._queue.put(None)
        self._thread.join()
        self._raise()

    def _raise(self):
        if self.error is not None:
            error, self.error = self.error, None
            raise OSError(f"writing the bag {self.path}: {error}") from error

    def _work(self):
        while True:
            chunk = self._queue.get()
            if chunk is None:
                break
            if self.error is None:
                try:
                    self._write(*chunk)
                except Exception as e:      # reported to the recording thread
                    self.error = e
        if self._direct:
            try:
                self._direct.finish()
            except Exception as e:
                if self.error is None:
                    self.error = e

    def _write(self, parts, size, index, span):
        """The Chunk record, a MessageIndex record per channel, and the ChunkIndex that rosbags
        writes into the summary (McapWriter.close_chunk's bytes)."""
        st = self.storage
        if self._direct is None:
            self._direct = _DirectFile.open(st.bio)
        direct = self._direct
        start, end = span
        compression = st.compression.encode()
        if compression:
            body = [st.compressor(b"".join(parts))]
            stored = len(body[0])
        else:
            body, stored = parts, size
        length = 8 + 8 + 8 + 4 + 4 + len(compression) + 8 + stored
        chunk_start = direct.position if direct else st.bio.tell()
        head = (_CHUNK_HEAD.pack(6, length, start, end, size, 0)
                + struct.pack("<I", len(compression)) + compression + struct.pack("<Q", stored))
        chunk_end = chunk_start + len(head) + stored
        pieces = [head]
        pieces += body
        offsets = []
        at = chunk_end
        for cid, (times, places) in index.items():
            pairs = np.empty((len(times), 2), "<u8")
            pairs[:, 0] = times
            pairs[:, 1] = places
            offsets.append((cid, at))
            pieces.append(_INDEX_HEAD.pack(7, 2 + 4 + pairs.nbytes, cid, pairs.nbytes))
            pieces.append(pairs.reshape(-1).view(np.uint8))
            at += _INDEX_HEAD.size + pairs.nbytes
        if direct:
            if not direct.write(pieces, at - chunk_start):
                self._direct = False       # O_DIRECT refused at the first write: written buffered
        else:
            st.bio.writelines(pieces)
        rec = io.BytesIO()
        rec.write(struct.pack("<QQQQI", start, end, chunk_start, chunk_end - chunk_start, 10 * len(offsets)))
        for cid, offset in offsets:
            rec.write(struct.pack("<HQ", cid, offset))
        rec.write(struct.pack("<QI", at - chunk_end, len(compression)) + compression
                  + struct.pack("<QQ", stored, size))
        st.chunks.append(rec)


_BLOCK = 4096        # O_DIRECT offsets, lengths and buffer addresses: a multiple of the logical block size
_BIG_PART = 1 << 16  # parts from this size on are copied with numpy, which releases the GIL meanwhile
_pwrite = os.pwrite  # (tests make it fail)


def _open_direct(name):
    return os.open(name, os.O_WRONLY | os.O_DIRECT | os.O_CLOEXEC)


class _DirectFile:
    """The MCAP file from the end of what rosbags wrote at open, written with O_DIRECT in whole
    blocks from a page-aligned staging buffer that holds the bytes not written yet (less than a
    block between chunks). The buffer starts with the block that holds rosbags' last bytes (read
    back), so every write is whole blocks at block offsets."""

    @classmethod
    def open(cls, bio):
        """A direct writer continuing at bio's position (bio flushed), or False where the file
        system refuses O_DIRECT."""
        bio.flush()
        name = bio.name
        try:
            if not isinstance(name, (str, bytes, os.PathLike)) or not hasattr(os, "O_DIRECT"):
                raise OSError(errno.EINVAL, "no O_DIRECT for this file object")
            fd = _open_direct(name)
        except OSError as e:
            log.debug("bag: O_DIRECT refused for %s (%s): the chunks are written buffered", name, e)
            return False
        try:
            return cls(fd, bio)
        except BaseException:
            os.close(fd)
            raise

    def __init__(self, fd, bio):
        self.fd = fd
        self.bio = bio
        self.position = bio.tell()                    # the logical end of the file
        self.start = self.position                    # where bio stands until the first direct write
        self.base = self.position // _BLOCK * _BLOCK  # the file offset of the buffer's first byte
        self.fill = self.position - self.base         # bytes pending in the buffer
        self.written = False                          # whether a direct write went through yet
        self._map(4 << 20)
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
        """A new staging buffer of `size` bytes (a multiple of the page size) that starts with
        the old one's first `keep` bytes (the old one is unmapped when its last view goes)."""
        buf = mmap.mmap(-1, size)
        array = np.frombuffer(buf, np.uint8)
        if keep:
            array[:keep] = self.array[:keep]
        self.buf, self.view, self.array = buf, memoryview(buf), array

    def write(self, pieces, total):
        """Copy the pieces (`total` bytes) after the pending bytes and write the whole blocks.
        False if O_DIRECT is refused at the first write: then the bytes from where bio stands
        are written through bio and this writer is closed."""
        need = self.fill + total
        if need > len(self.buf):
            self._map(max(2 * len(self.buf), -(-need // _BLOCK) * _BLOCK), self.fill)
        view, array, n = self.view, self.array, self.fill
        for p in pieces:
            k = len(p)
            if k >= _BIG_PART:
                array[n:n + k] = np.frombuffer(p, np.uint8)
            else:
                view[n:n + k] = p
            n += k
        self.fill = n
        self.position += total
        whole = n - n % _BLOCK
        done = 0
        try:
            while done < whole:
                got = _pwrite(self.fd, view[done:whole], self.base + done)
                if got <= 0 or got % _BLOCK:
                    raise OSError(errno.EIO, f"O_DIRECT pwrite wrote {got} of {whole - done} bytes")
                done += got
                self.written = True
        except OSError as e:
            if self.written or e.errno != errno.EINVAL:
                self._drop(done)
                raise
            log.debug("bag: O_DIRECT write refused for %s (%s): the chunks are written buffered",
                      self.bio.name, e)
            self.bio.write(view[self.start - self.base:n])
            self.close()
            return False
        self._drop(done)
        return True

    def _drop(self, done):
        """Forget the first `done` bytes (written) and move the rest to the buffer's start."""
        if done:
            rest = self.fill - done
            self.array[:rest] = self.array[done:self.fill]
            self.base += done
            self.fill = rest

    def finish(self):
        """Write the pending bytes through bio at their offset, leaving bio at the logical end
        (a seek also resynchronizes the buffered writer's position with the file's)."""
        try:
            bio = self.bio
            bio.seek(self.base)
            if self.fill:
                bio.write(self.view[:self.fill])
            if bio.tell() != self.position:
                raise OSError(errno.EIO, f"the bag ends at {bio.tell()}, expected {self.position}")
        finally:
            self.close()

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        self.buf = self.view = self.array = None
