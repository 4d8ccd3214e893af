"""Cameras and range sensors: one sample from a posed scene, inline or on a worker thread.

Inline (the default), Simulation renders at the step a camera or range sensor samples, so the
reading is there right after that step. With a worker (Simulation.render_in_thread), the
physics thread only copies the link poses (a snapshot of the sample instant) and queues the
job; the worker renders into its own Scene (a Scene holds workspaces: one per thread) with the
numba kernels, which release the GIL, so a 30 Hz frame costs the 1 kHz loop a few microseconds
instead of milliseconds. The reading keeps its acquisition stamp and appears when the frame is
done (as a real camera's frames arrive after their exposure). A device has at most MAX_IN_FLIGHT
samples queued or rendering (a short stall of the render thread on a busy machine is caught up
afterwards); a sample due beyond that is skipped and counted (`OpticalWorker.skipped`), so a
renderer that cannot keep up lowers the frame rate instead of the step rate; with `lossless`
set (runs as fast as possible: every frame counts, no wall clock to keep) the physics thread
waits for the device's oldest sample instead.
"""
from __future__ import annotations

import collections
import mmap
import sys
import threading

import numpy as np

MAX_IN_FLIGHT = 3
_PAGE = 4096
_HUGE_PAGE = 2 << 20         # a transparent huge page (x86-64; arm64 with 4 KiB pages)


def huge_page_memory(nbytes, touch=False):
    """A writable memoryview of `nbytes` of fresh anonymous memory that starts at a 2 MiB
    boundary and asks Linux for transparent huge pages (taken where THP is "always" or
    "madvise", the usual settings; elsewhere plain pages). An O_DIRECT write pins the pages it
    reads: per 2 MiB instead of per 4 KiB here, 40 instead of 175 us of CPU for 4 MiB on a
    2-core EPYC VM. (Private memory: shared anonymous memory is shmem, whose huge pages are
    off by default.) The first write to a huge page faults all of it in, up to milliseconds on
    a VM: touch=True does that now, for memory a thread holding the interpreter will write."""
    flags = getattr(mmap, "MAP_PRIVATE", 0) | getattr(mmap, "MAP_ANONYMOUS", 0)
    size = max(1, -(-int(nbytes) // _HUGE_PAGE)) * _HUGE_PAGE     # whole huge pages: a part is none
    region = mmap.mmap(-1, size + _HUGE_PAGE, **({"flags": flags} if flags else {}))
    start = -np.frombuffer(region, np.uint8, 1).ctypes.data % _HUGE_PAGE
    advice = getattr(mmap, "MADV_HUGEPAGE", None)
    if advice is not None:
        try:
            region.madvise(advice, start, size)
        except OSError:          # a kernel without THP: plain pages
            pass
    memory = memoryview(region)[start:start + int(nbytes)]
    if touch:
        np.frombuffer(memory, np.uint8)[::_PAGE] = 0
    return memory


def page_aligned_empty(shape, dtype):
    """np.empty(shape, dtype) starting at a page boundary: a bag writing with O_DIRECT hands
    such a frame's pixels to the disk as they are, without copying them (ros/direct_file.py)."""
    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    raw = np.empty(nbytes + _PAGE, np.uint8)
    skip = -raw.ctypes.data % _PAGE
    return raw[skip:skip + nbytes].view(dtype).reshape(shape)


class FramePool:
    """Page-aligned frames of one shape and dtype, each reused once nothing refers to it any
    more. A frame handed to a bag lives until the bag has written it (up to a few MiB later);
    frames allocated afresh then came from memory the allocator had given back to the system,
    and the page faults of rendering into it cost the render thread 6-20 us a step of the
    bundled world. The frames it keeps lie side by side in huge_page_memory (a bag writes them
    to the disk from there: huge pages pin cheaply), as many as 2 MiB holds at a time; it keeps
    up to 64 frames or 16 MiB of them, at least 16 (a device alone holds its 8 newest
    readings); beyond, take() allocates frames it does not keep (page_aligned_empty), given
    back once written: a pool as large as a run's worst burst (the bag behind) would keep that
    memory for the rest of the run. One thread takes from a pool (a camera renders in one
    thread at a time)."""

    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        self.nbytes = int(np.prod(self.shape)) * self.dtype.itemsize
        self.stride = max(_PAGE, -(-self.nbytes // _PAGE) * _PAGE)    # each frame starts on a page
        self.limit = min(64, max(16, (16 << 20) // max(self.nbytes, 1)))
        self._owners = []        # per frame kept, the uint8 array over its memory (its views refer to it)
        self._owners.append(np.empty(0))                 # what _refs counts for an array nobody holds,
        self._free_refs = self._refs(0)                  # on this Python (a probe)
        self._owners.clear()

    def _refs(self, k):
        return sys.getrefcount(self._owners[k])

    def take(self):
        """A frame nothing else refers to (its contents undefined)."""
        owners = self._owners
        for k in range(len(owners)):
            if self._refs(k) == self._free_refs:
                return self._frame(owners[k])
        kept = len(owners)
        if kept == self.limit:
            return page_aligned_empty(self.shape, self.dtype)
        n = max(1, min(self.limit - kept, _HUGE_PAGE // self.stride))
        memory, stride = huge_page_memory(n * self.stride), self.stride
        owners += [np.frombuffer(memory[i * stride:(i + 1) * stride], np.uint8) for i in range(n)]
        return self._frame(owners[kept])

    def _frame(self, owner):
        return owner[:self.nbytes].view(self.dtype).reshape(self.shape)


def sense_optical(scene, dev, stamp, dt=None):
    """A range sensor's or camera's Reading at `stamp` from `scene` at its current poses; dt:
    the time since the device's previous sample (None: take it from the device's schedule now)."""
    from ..render import cast_rays, render
    T = scene.link_transform(dev.link) @ np.asarray(dev.sensor.pose, float)
    if dev.kind == "range":
        n = len(dev.directions)
        origins = np.broadcast_to(T[:3, 3], (n, 3)).copy()
        dirs = dev.directions @ T[:3, :3].T
        out = np.empty(n)
        hit = np.empty(n, np.int64)
        cast_rays(scene, origins, dirs, dev.range_max, out, hit)
        intensity = np.where(hit >= 0, scene.prim_retro[np.maximum(hit, 0)], 0.0)
        return dev.finish_range(stamp, out, dt, intensity)
    color = depth = None
    if dev.color:
        color = dev.color_frames.take()
    if dev.depth:
        depth = dev.depth_frames.take()
    render(scene, T, dev.width, dev.height, dev.fov, dev.near, dev.far, color=color, depth=depth, mono=dev.mono)
    return dev.finish_camera(stamp, color, depth, dt)


class OpticalWorker:
    """A thread that renders queued samples (module docstring) into its own `scene`."""

    def __init__(self, scene):
        self.scene = scene
        self._cv = threading.Condition(threading.Lock())
        self._jobs = collections.deque()
        self._in_flight = collections.Counter()    # device name -> samples queued or rendering
        self._closing = False
        self.lossless = False
        self.error = None                # the first exception a job raised (re-raised by submit)
        self.rendered = 0
        self.skipped = collections.Counter()
        self._thread = threading.Thread(target=self._work, name="mbsim-render", daemon=True)
        self._thread.start()

    def submit(self, dev, stamp, link_R, link_p) -> bool:
        """Queue a sample of dev at stamp with the link poses given (copied here). False (and
        counted in skipped) when dev's previous sample is not done yet."""
        if self.error is not None:
            error, self.error = self.error, None
            raise RuntimeError(f"rendering on the worker thread failed: {error!r}") from error
        with self._cv:
            if self.lossless:
                self._cv.wait_for(lambda: self._in_flight[dev.name] < MAX_IN_FLIGHT or self.error is not None)
            if self._in_flight[dev.name] >= MAX_IN_FLIGHT:
                self.skipped[dev.name] += 1
                return False
            self._in_flight[dev.name] += 1
        dt = dev.taken(stamp)            # the schedule moves on in the physics thread, now
        with self._cv:
            self._jobs.append((dev, stamp, dt, link_R.copy(), link_p.copy()))
            self._cv.notify_all()
        return True

    @property
    def native_id(self):
        """The worker thread's native (OS) id."""
        return self._thread.native_id

    def in_flight(self, name) -> int:
        """How many samples of device `name` are queued or rendering."""
        return self._in_flight[name]

    def flush(self, timeout=None) -> bool:
        """Wait until every queued sample is rendered and pushed; False on timeout."""
        with self._cv:
            return self._cv.wait_for(lambda: not +self._in_flight, timeout)

    def close(self, timeout=10.0) -> bool:
        """Render what is queued, then end the thread."""
        with self._cv:
            self._closing = True
            self._cv.notify_all()
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _work(self):
        while True:
            with self._cv:
                while not self._jobs and not self._closing:
                    self._cv.wait()
                if not self._jobs:
                    return
                dev, stamp, dt, link_R, link_p = self._jobs.popleft()
            try:
                self.scene.set_link_poses(link_R, link_p)
                dev.push(sense_optical(self.scene, dev, stamp, dt))
                self.rendered += 1
            except Exception as e:     # reported to the physics thread at its next submit
                if self.error is None:
                    self.error = e
            with self._cv:
                self._in_flight[dev.name] -= 1
                self._cv.notify_all()
