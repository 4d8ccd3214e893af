"""ViewProcess: the live view served from a process of its own, a Session listener (CONTRACT:
start, on_step, on_reset, on_world_changed, close), what `mbsim run --view` and the node use.

    view = ViewProcess(host="127.0.0.1", port=8080)     # the view's process bound: ViewError if not
    session = Session(sim, config, listeners=[view, ...])

Why a process: building scene messages and serving them (viser) takes the interpreter's lock
for ~50 ms of every second, and a physics thread waking for its next step waits whenever
another thread of its process holds it: in-process, the view showed in the run's step lateness.
Here the run's side is what LiveView's is in the physics thread (a Snapshot copied at most
`rate` times a second into a one-slot mailbox) and one sender thread, which writes each
snapshot's arrays to a socket without holding the lock (pickle protocol 5, out-of-band buffers;
a sensor's reading only when it is new, a camera's at most at the panel's image rate). The
view's process (view/child.py, at nice 19) runs the same LiveView, whose controls come
back over a second socket as calls on this process's Session, answered by a thread here.

A view process that ends (killed, crashed) ends nothing else: the run goes on, one line says so.
"""
from __future__ import annotations

import collections
import os
import pickle
import socket
import subprocess
import sys
import threading
import time
from multiprocessing.connection import Connection

from .live import RATE, LiveView, Snapshot, World
from .panel import PANEL_RATE
from .server import DEFAULT_HOST, DEFAULT_PORT, ViewError, check_bind, url

START_TIMEOUT = 120.0       # s for the view's process to import viser and bind (a loaded machine)
CLOSE_TIMEOUT = 5.0
# the calls the view's controls make on the run's Session (view/panel.py), by name
CALLS = ("pause", "resume", "step", "reset", "set_real_time_factor", "apply_wrench",
         "set_joint_positions", "spawn", "stats")


def yield_to_the_run():
    """The view's process (its calling thread and the threads it starts) at nice 19: an
    ordinary thread of the run that wakes preempts it, and it still gets a share of a busy
    machine. Not SCHED_IDLE: on two cores kept busy (load 3) a view under it had not started
    its server after 120 s, and its page's controls would stop answering whenever the run and
    its neighbours fill the cores. (A run that must not be disturbed at all: realtime_priority.)"""
    try:
        os.nice(19 - os.nice(0))
    except (AttributeError, OSError):
        pass


def cores_besides(cpu):
    """The cores other than `cpu`, where the physics thread is pinned (the run's `cpu`), for
    the view's process and threads: off the physics thread's core, nothing of the view delays
    its wake-ups. None when it is not pinned, or is on the only core allowed."""
    if cpu is None or not hasattr(os, "sched_getaffinity"):
        return None
    return (set(os.sched_getaffinity(0)) - {cpu}) or None


def keep_on(pid, cores):
    """Every thread of process `pid` onto `cores` (the threads it starts later inherit it)."""
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            os.sched_setaffinity(int(tid), cores)
    except OSError:
        pass            # gone meanwhile: its end is reported where it is read


def send_parts(conn, obj):
    """obj over conn: its pickle, then each of its arrays' bytes as they lie in memory (written
    by the kernel from the array: no copy under the interpreter's lock)."""
    buffers = []
    head = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    conn.send_bytes(len(buffers).to_bytes(4, "little") + head)
    for buffer in buffers:
        conn.send_bytes(buffer.raw())


def recv_parts(conn):
    """What send_parts sent (EOFError when the other end closed)."""
    data = conn.recv_bytes()
    n = int.from_bytes(data[:4], "little")
    return pickle.loads(data[4:], buffers=[conn.recv_bytes() for _ in range(n)])


def _shut(conn):
    """Both directions of conn's socket ended: the other end reads EOF, a blocked write here
    returns with an error."""
    try:
        socket.socket(fileno=os.dup(conn.fileno())).shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


class ViewProcess:
    """The browser view of a running Session, served by a child process bound to (host, port)
    at construction (ViewError when it cannot be)."""

    def __init__(self, host=DEFAULT_HOST, port=DEFAULT_PORT, rate=RATE, log=None):
        check_bind(host, port)
        self.url = url(host, port)
        self.period = 1.0 / float(rate)
        self.log = log or (lambda text: None)
        self.session = None
        self.frames_taken = 0       # snapshots taken in the physics thread
        self.frames_sent = 0        # snapshots written to the view's process
        self.frames_dropped = 0     # snapshots replaced before the sender took them
        self.sender_cpu_seconds = 0.0
        self._due = 0.0
        self._world_version = 0
        self._latest = None
        self._worlds = collections.deque()      # Worlds to send before the next snapshot
        self._mailbox = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._sent = {}                         # reading name -> the reading last sent
        self._images_due = 0.0
        self._sender = self._answerer = None
        self._cores = None                      # where the view's process and threads run (None: anywhere)
        self._closed = False
        frames, frames_child = socket.socketpair()
        control, control_child = socket.socketpair()
        package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [package_root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
        fds = (frames_child.fileno(), control_child.fileno())
        self.process = subprocess.Popen(
            [sys.executable, "-m", "mbsim_ros.view.child", *map(str, fds), host, str(int(port)), repr(float(rate))],
            pass_fds=fds, env=env, stdin=subprocess.DEVNULL)
        frames_child.close()
        control_child.close()
        self._frames = Connection(frames.detach())
        self._control = Connection(control.detach())
        self._await_ready()

    def _await_ready(self):
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if not self._control.poll(max(0.0, deadline - time.monotonic())):
                self._abandon()
                raise ViewError(f"the view's process did not start within {START_TIMEOUT:g} s")
            try:
                kind, value = self._control.recv()
            except EOFError:
                self._abandon()
                raise ViewError(f"the view's process ended at start (exit code {self.process.poll()})") from None
            if kind == "log":
                self.log(value)
            elif kind == "error":
                self._abandon()
                raise ViewError(value)
            elif kind == "ready":
                return

    def _abandon(self):
        self._closed = True
        self._frames.close()
        self._end_process()
        self._control.close()

    @property
    def pid(self):
        return self.process.pid

    # -- the listener ----------------------------------------------------------------------
    def start(self, session):
        self.session = session
        sim = session.sim
        self._cores = cores_besides(getattr(getattr(session, "runner", None), "cpu", None))
        if self._cores:
            keep_on(self.process.pid, self._cores)
        send_parts(self._frames, ("start", World(sim, 0), Snapshot(sim, 0)))
        self._sender = threading.Thread(target=self._send_loop, name="mbsim view sender", daemon=True)
        self._answerer = threading.Thread(target=self._answer_loop, name="mbsim view calls", daemon=True)
        self._sender.start()
        self._answerer.start()

    # the same rate-limited snapshots as LiveView's (contacts and readings always: the view's
    # process decides what it shows)
    show_contacts = show_sensors = True
    on_step = LiveView.on_step
    on_reset = LiveView.on_reset

    def on_world_changed(self, sim):
        self._world_version += 1
        world = World(sim, self._world_version)
        with self._mailbox:
            self._worlds.append(world)
        self._put(Snapshot(sim, self._world_version))

    def refresh(self):
        """One snapshot now, between steps, shown whole (a control changed the state)."""
        self.session.between_steps(lambda: self._put(Snapshot(self.session.sim, self._world_version, whole=True)))

    def close(self):
        """The view's process ended (it reads the end of its socket, its browsers see the run
        end; killed after CLOSE_TIMEOUT), the threads here joined; once, never blocking longer."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        self._wake.set()
        _shut(self._frames)         # (a sender blocked writing returns at once)
        if self._sender is not None:
            self._sender.join(timeout=CLOSE_TIMEOUT)
        self._end_process()
        _shut(self._control)        # the calls' thread reads the end of its socket
        if self._answerer is not None:
            self._answerer.join(timeout=CLOSE_TIMEOUT)
        self._frames.close()
        self._control.close()

    def _end_process(self):
        try:
            self.process.wait(timeout=CLOSE_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    _put = LiveView._put        # the same one-slot mailbox, counting what it replaced

    # -- the sender's and the calls' threads -------------------------------------------------
    def _send_loop(self):
        # (at the run's own priority: a thread below it could be kept off the CPU while it
        # holds the interpreter's lock, and the physics thread would wait for it)
        if self._cores:
            os.sched_setaffinity(0, self._cores)        # this thread
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._stop.is_set():
                return
            t0 = time.thread_time()
            with self._mailbox:
                worlds, snap, self._latest = list(self._worlds), self._latest, None
                self._worlds.clear()
            try:
                for world in worlds:
                    send_parts(self._frames, ("world", world))
                if snap is not None:
                    snap.readings = self._new_readings(snap.readings, snap.whole)
                    send_parts(self._frames, ("frame", snap))
                    self.frames_sent += 1
            except OSError as e:        # the view's process is gone: the run goes on without it
                self._gone(e)
                return
            self.sender_cpu_seconds += time.thread_time() - t0

    def _new_readings(self, readings, whole):
        """The readings not sent yet (devices replace a reading, never change it: the view's
        process keeps the others); a camera's images at most at the panel's image rate (the
        page shows them no faster), every new one in a whole snapshot."""
        now = time.monotonic()
        images_due = whole or now >= self._images_due
        new = {}
        for name, reading in readings.items():
            if self._sent.get(name) is reading:
                continue
            if hasattr(reading.values, "color"):
                if not images_due:
                    continue
                self._images_due = now + 1.0 / PANEL_RATE
            new[name] = reading
        self._sent.update(new)
        return new

    def _answer_loop(self):
        """The view's controls: a call on the Session, answered with its value or its error,
        until the view's process is gone (a view still building its page when the run ends
        waits for no answer that never comes)."""
        if self._cores:
            os.sched_setaffinity(0, self._cores)        # this thread
        while True:
            try:
                kind, value = self._control.recv()
            except Exception as e:          # EOF, a closed socket, a message cut short
                self._gone(e)
                return
            if kind == "log":
                self.log(value)
                continue
            try:
                answer = ("value", self._call(kind, *value))
            except Exception as e:          # the view shows it; the run goes on
                answer = ("error", e)
            try:
                try:
                    self._control.send(answer)
                except (pickle.PicklingError, TypeError, AttributeError):
                    self._control.send(("error", RuntimeError(str(answer[1]))))
            except OSError as e:
                self._gone(e)
                return

    def _call(self, name, *args):
        s = self.session
        if name in CALLS:
            return getattr(s, name)(*args)
        if name == "paused":
            return bool(s.paused)
        if name == "t":
            return float(s.sim.t)
        if name == "real_time_factor":
            return float(s.config.target_rtf)
        if name == "refresh":
            return self.refresh()
        raise ValueError(f"the view asked for {name!r}, which the run does not answer")

    def _gone(self, error):
        if not self._stop.is_set():
            self._stop.set()
            self._wake.set()
            self.log(f"view: its process ended ({error.__class__.__name__}); the run goes on without it")

    def stats(self):
        return dict(frames_taken=self.frames_taken, frames_sent=self.frames_sent,
                    frames_dropped=self.frames_dropped, sender_cpu_s=self.sender_cpu_seconds)
