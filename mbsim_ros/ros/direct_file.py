"""The MCAP file written with O_DIRECT: whole blocks at block offsets from a page-aligned
staging buffer, big block-aligned parts (images' pixels) from their own memory."""
from __future__ import annotations

import ctypes
import errno
import os
import time

import numpy as np

from ..sensors.optical import huge_page_memory
from .transport import log
from .bag_kernels import BLOCK, stream_copy


# The staged bytes are written once this many are pending (or _FLUSH_AGE after the last write): an
# O_DIRECT pwrite cost this VM ~35 us of CPU a call plus ~11 us a MiB (64 us for 1 MiB, 100 us for
# 4 MiB), so one write per 1 MiB chunk cost 3.3 us per step of the bundled world
WRITE_BATCH = 4 << 20
_FLUSH_AGE = 1.0     # s: complete chunks wait at most about this long in the staging buffer
# Parts from this size on (the images' pixels) are written from their own memory where it and their
# place in the file are block-aligned (ChunkWriter pads chunks for that), else copied by stream_copy
# (the GIL released meanwhile): in the bundled world, with non-temporal stores (the staging buffer
# is read next by the disk's DMA, not by the CPU, so caching its lines only costs: reading each
# destination line before writing it and evicting what the other threads use) 126-160 us a MiB
# of frames another thread just rendered, against 175-200 for numpy's copy (memcpy), on a
# 2-core EPYC VM
BIG_PART = 1 << 16
_SEGMENTS = 256      # pieces of memory one write takes at most (Linux: IOV_MAX 1024)
_pwritev = getattr(os, "pwritev", None)  # (tests make it fail)


def _open_direct(name):
    return os.open(name, os.O_WRONLY | os.O_DIRECT | os.O_CLOEXEC)


def block_aligned(part):
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
    return address % BLOCK == 0


class DirectFile:
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
        self.base = self.position // BLOCK * BLOCK  # the file offset of the first pending byte
        self.segments = []                            # pending whole blocks before the open region
        self.queued = 0                               # their bytes
        self.region = 0                               # the open region: the staging buffer's [region, fill)
        self.fill = self.position - self.base
        self.written = False                          # whether a direct write went through yet
        self.flushed = time.monotonic()               # when the pending bytes were last written
        if staging is None:
            self._map(2 * WRITE_BATCH)
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
        once WRITE_BATCH bytes are pending or _FLUSH_AGE after the last write (flush). A big
        piece (BIG_PART) whose id() is in `in_place` (a block-aligned array: block_aligned)
        and that lands at a block offset of the file is queued as it is (its whole blocks: the
        rest is copied); the others are copied into the staging buffer. False if O_DIRECT is
        refused at the first write (see flush)."""
        need = self.fill + total
        if need > len(self.buf):
            self._map(max(2 * len(self.buf), -(-need // BLOCK) * BLOCK), self.fill)
        view, array, n = self.view, self.array, self.fill
        for p in pieces:
            k = len(p)
            if k >= BIG_PART:
                whole = k - k % BLOCK
                if id(p) in in_place and (n - self.region) % BLOCK == 0:     # (region and file offset aligned)
                    if n > self.region:
                        self.segments.append(view[self.region:n])
                    self.segments.append(p[:whole])
                    self.queued += n - self.region + whole
                    self.region = n
                    view[n:n + k - whole] = p[whole:]
                    n += k - whole
                    continue
                stream_copy(array, n, np.frombuffer(p, np.uint8))
            else:
                view[n:n + k] = p
            n += k
        self.fill = n
        self.position += total
        if (self.pending() >= WRITE_BATCH or len(self.segments) >= _SEGMENTS
                or time.monotonic() - self.flushed >= _FLUSH_AGE):
            return self.flush()
        return True

    def due(self):
        """Whether whole blocks are pending and the last write is _FLUSH_AGE old."""
        return self.pending() >= BLOCK and time.monotonic() - self.flushed >= _FLUSH_AGE

    def flush(self):
        """Write the pending whole blocks. False if O_DIRECT is refused at the first write:
        then the bytes from where bio stands are written through bio and this writer is closed."""
        region, n = self.region, self.fill
        whole = (n - region) // BLOCK * BLOCK
        buffers = self.segments + ([self.view[region:region + whole]] if whole else [])
        total = self.queued + whole
        done = 0
        self.flushed = time.monotonic()
        try:
            while done < total:
                got = _pwritev(self.fd, buffers, self.base + done)
                if got <= 0 or got % BLOCK:
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
