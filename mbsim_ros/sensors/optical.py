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
import sys
import threading

import numpy as np

MAX_IN_FLIGHT = 3
_PAGE = 4096


def page_aligned_empty(shape, dtype):
    """np.empty(shape, dtype) starting at a page boundary: a bag writing with O_DIRECT hands
    such a frame's pixels to the disk as they are, without copying them (ros/bag.py)."""
    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    raw = np.empty(nbytes + _PAGE, np.uint8)
    skip = -raw.ctypes.data % _PAGE
    return raw[skip:skip + nbytes].view(dtype).reshape(shape)


class FramePool:
    """Page-aligned frames of one shape and dtype (page_aligned_empty), each reused once nothing
    refers to it any more. A frame handed to a bag lives until the bag has written it (up to
    a few MiB later); frames allocated afresh then came from memory the allocator had given back
    to the system, and the page faults of rendering into it cost the render thread 6-20 us a
    step of the bundled world. It keeps up to 64 frames or 64 MiB of them, at least 16 (a
    device alone holds its 8 newest readings); beyond, take() allocates frames it does not
    keep. One thread takes from a pool (a camera renders in one thread at a time)."""

    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        self.nbytes = int(np.prod(self.shape)) * self.dtype.itemsize
        self.limit = min(64, max(16, (64 << 20) // max(self.nbytes, 1)))
        self._owners = []        # the arrays that own the frames' memory (every view refers to its owner)
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
                owner = owners[k]
                skip = -owner.ctypes.data % _PAGE
                return owner[skip:skip + self.nbytes].view(self.dtype).reshape(self.shape)
        frame = page_aligned_empty(self.shape, self.dtype)
        if len(owners) < self.limit:
            owners.append(frame.base)
        return frame


def sense_optical(scene, dev, stamp, dt=None):
    """A range sensor's or camera's Reading at `stamp` from `scene` at its current poses; dt:
    the time since the device's previous sample (None: take it from the device's schedule now)."""
    from ..render import cast_rays, render
    T = scene.link_transform(dev.link) @ np.asarray(dev.sensor.pose, float)
    if dev.kind == "range":
        n = len(dev.angles)
        origins = np.broadcast_to(T[:3, 3], (n, 3)).copy()
        dirs = dev.directions @ T[:3, :3].T
        out = np.empty(n)
        cast_rays(scene, origins, dirs, dev.range_max, out)
        return dev.finish_range(stamp, out, dt)
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
