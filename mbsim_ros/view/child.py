"""The view's own process (started by view/process.py's ViewProcess, never by a user):

    python -m mbsim_ros.view.child FRAMES_FD CONTROL_FD HOST PORT RATE

It serves the LiveView on (HOST, PORT), shows the worlds and snapshots the run writes on
FRAMES_FD, and hands the page's controls back over CONTROL_FD as calls on the run's Session
(RemoteSession). It runs at nice 19 (process.yield_to_the_run). It ends when the run closes
FRAMES_FD.
"""
from __future__ import annotations

import sys
import threading
from multiprocessing.connection import Connection

from .live import LiveView
from .process import recv_parts, yield_to_the_run
from .server import ViewError



CALL_TIMEOUT = 60.0         # s for the run to answer a control (it waits at most CONTROL_WAIT)


class RemoteSession:
    """The run's Session as the view's controls use it, each call answered by the run."""

    def __init__(self, conn):
        self._conn = conn
        self._lock = threading.Lock()       # one call at a time: an answer follows its call
        self._broken = False
        self.sim = _RemoteSim(self)

    def call(self, name, *args):
        with self._lock:
            if self._broken:
                raise ConnectionError("the run did not answer an earlier call from the view")
            try:
                self._conn.send((name, args))
                if not self._conn.poll(CALL_TIMEOUT):
                    self._broken = True     # a late answer would answer the next call
                    raise TimeoutError(f"the run did not answer {name} within {CALL_TIMEOUT:g} s")
                kind, value = self._conn.recv()
            except (EOFError, OSError) as e:
                self._broken = True
                raise ConnectionError("the run has ended") from e
        if kind == "error":
            raise value
        return value

    def log(self, text):
        with self._lock:
            try:
                self._conn.send(("log", text))
            except OSError:
                pass                        # the run has ended: no one to tell

    @property
    def paused(self):
        return self.call("paused")

    @property
    def real_time_factor(self):
        return self.call("real_time_factor")

    def pause(self, wait=False, timeout=None):
        return self.call("pause", wait, timeout)

    def resume(self):
        return self.call("resume")

    def step(self, n=1, wait=False, timeout=None):
        return self.call("step", n, wait, timeout)

    def reset(self):
        return self.call("reset")

    def set_real_time_factor(self, rtf):
        return self.call("set_real_time_factor", rtf)

    def apply_wrench(self, link, force, torque=(0.0, 0.0, 0.0), duration=None):
        return self.call("apply_wrench", link, force, torque, duration)

    def set_joint_positions(self, positions):
        return self.call("set_joint_positions", positions)

    def spawn(self, model):
        return self.call("spawn", model)

    def stats(self, last=None):
        return self.call("stats", last)


class _RemoteSim:
    def __init__(self, session):
        self._session = session

    @property
    def t(self):
        return self._session.call("t")


class ChildView(LiveView):
    """LiveView fed from the run's process: a refresh is asked of the run, which snapshots
    between its steps."""

    def refresh(self):
        self.session.call("refresh")


class LatestReadings:
    """The newest reading of each sensor: the run sends a sensor's reading only when it is new,
    and each frame shown carries them all."""

    def __init__(self):
        self.by_name = {}

    def fill(self, snap):
        self.by_name.update(snap.readings)
        snap.readings = dict(self.by_name)

    def keep_sensors_of(self, world):
        """A spawn or delete may remove sensors: their last readings go with them."""
        kept = {name for name, _, _ in world.sensors}
        self.by_name = {name: r for name, r in self.by_name.items() if name in kept}


def main(argv):
    frames_fd, control_fd, host, port, rate = int(argv[0]), int(argv[1]), argv[2], int(argv[3]), float(argv[4])
    yield_to_the_run()
    frames, control = Connection(frames_fd), Connection(control_fd)
    session = RemoteSession(control)
    try:
        view = ChildView(host, port, rate, log=session.log)
    except ViewError as e:
        control.send(("error", str(e)))
        return 2
    control.send(("ready", None))
    readings = LatestReadings()
    try:
        while True:
            message = recv_parts(frames)
            kind = message[0]
            if kind == "frame":
                snap = message[1]
                readings.fill(snap)
                view._put(snap)
            elif kind == "world":
                world = message[1]
                readings.keep_sensors_of(world)
                view.world_arrived(world)
            elif kind == "start":
                _, world, first = message
                readings.by_name.update(first.readings)
                view.attach(session, world, first)
    except (EOFError, OSError, TimeoutError):
        pass            # the run ended (or was killed) or stopped answering: so does the view
    finally:
        view.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
