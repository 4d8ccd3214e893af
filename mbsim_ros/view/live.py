"""LiveView: a running Session in the browser, a Session listener (CONTRACT: start, on_step,
on_reset, on_world_changed, close).

    view = LiveView(host="127.0.0.1", port=8080)        # binds now: ViewError before anything runs
    session = Session(sim, config, listeners=[view, ...])

The physics thread only copies: on_step takes a Snapshot (t, q, v, tau, link poses, contacts,
the sensors' newest readings) at most `rate` times per wall second into a one-slot mailbox, a
few microseconds on the steps it does and one clock read on the others. A thread of the view's
own takes the newest snapshot and sends what changed to every browser. A snapshot replaced
before the thread took it is a dropped frame (counted); viser keeps one pending message per
node property for each connection, so a browser that stops reading holds one frame, never a
growing queue, and a closed browser is just gone.

The controls call the Session's control methods (CONTRACT): pause, resume, step, reset,
set_real_time_factor, apply_wrench, set_joint_positions, spawn.
"""
from __future__ import annotations

import collections
import threading
import time

import numpy as np

from .panel import FOV, Panel, initial_camera
from .scene import WorldScene, model_links
from .server import DEFAULT_HOST, DEFAULT_PORT, start_server, stop_server, url

RATE = 30.0                 # Hz, frames pushed to the browsers at most
PLOT_SECONDS = 10.0         # s of simulation time in the joint plots


def light(scene):
    """z up; a dim environment and one sun from the front-right, above: viser's default
    environment alone washes the models' colours out to near white."""
    scene.set_up_direction("+z")
    scene.configure_environment_map("warehouse", environment_intensity=0.4)
    scene.configure_default_lights(enabled=True, cast_shadow=False)
    scene.add_light_directional("/sun", color=(255, 255, 255), intensity=1.5, wxyz=(0.9, 0.3, -0.3, 0.0))


class Snapshot:
    """What one frame shows, copied from the simulation in the physics thread."""
    __slots__ = ("t", "wall", "q", "v", "tau", "link_R", "link_p", "contact_points", "contact_forces",
                 "readings", "world", "whole")

    def __init__(self, sim, world, contacts=True, readings=True, whole=False):
        self.whole = whole              # the panel's text, plots and images too, whatever their rate
        self.t = float(sim.t)
        self.wall = time.monotonic()
        self.world = world              # the world version this snapshot belongs to
        self.q = sim.q.copy()
        self.v = sim.v.copy()
        self.tau = sim.tau.copy()
        R, p = sim.link_poses()
        self.link_R, self.link_p = R.copy(), p.copy()
        if contacts:
            cs = sim.contacts()
            self.contact_points = np.array([c.point for c in cs]).reshape(-1, 3)
            self.contact_forces = np.array([c.force for c in cs]).reshape(-1, 3)
        else:
            self.contact_points = self.contact_forces = np.zeros((0, 3))
        # Readings are immutable records the devices replace: keeping references is a copy
        self.readings = sim.readings() if readings and getattr(sim, "devices", None) else {}


class World:
    """The parts of a simulation's world the view draws, read between steps."""

    def __init__(self, sim, version):
        self.version = version
        self.models = list(sim.models)
        entities = list(getattr(sim, "entities", [m.name for m in self.models]))
        names = getattr(sim, "names", None)
        world = (lambda i, kind, bare: names.world(entities[i], kind, bare)) if names else (lambda i, kind, bare: bare)
        self.links = model_links(self.models, lambda i, bare: world(i, "link", bare))
        index = {name: k for k, (name, _) in enumerate(self.links)}
        self.sensors = []
        for i, model in enumerate(self.models):
            for s in model.sensors:
                self.sensors.append((world(i, "sensor", s.name), s, index[world(i, "link", s.link)]))
        self.joints = []            # (world name, q index, v index) of the one-DOF joints
        offset_q = offset_v = 0
        for i, model in enumerate(self.models):
            for j in model.joints:
                if j.nq == 1 and j.nv == 1 and j.type != "fixed":
                    lo, hi = _limits(j)
                    self.joints.append((world(i, "joint", j.name), offset_q + j.q_index, offset_v + j.v_index, lo, hi))
            offset_q += model.nq
            offset_v += model.nv
        self.roots = [world(i, "link", m.root_links[0]) for i, m in enumerate(self.models)]


def _limits(joint):
    """A joint slider's range: its limits, else +-pi rad (revolute) or +-1 m (prismatic)."""
    span = 1.0 if joint.type == "prismatic" else np.pi
    lo = -np.inf if joint.lower is None else float(np.atleast_1d(joint.lower)[0])
    hi = np.inf if joint.upper is None else float(np.atleast_1d(joint.upper)[0])
    lo, hi = (lo if np.isfinite(lo) else -span), (hi if np.isfinite(hi) else span)
    return (lo, hi) if hi > lo else (-span, span)


class LiveView:
    """The browser view of a running Session; binds (host, port) at construction (ViewError)."""

    def __init__(self, host=DEFAULT_HOST, port=DEFAULT_PORT, rate=RATE, log=None):
        self.server = start_server(host, port, log=log)
        self.url = url(host, port)
        self.period = 1.0 / float(rate)
        self.log = log or (lambda text: None)
        self.session = None
        self.scene = None
        self.panel = None
        self.world = None
        self.frames_taken = 0       # snapshots taken in the physics thread
        self.frames_pushed = 0      # snapshots sent to the browsers
        self.frames_dropped = 0     # snapshots replaced before the view thread took them
        self.cpu_seconds = 0.0      # the view thread's own CPU time
        self.show_contacts = True
        self.show_sensors = True
        self._latest = None         # the mailbox: the newest Snapshot not yet pushed
        self._due = 0.0
        self._world_version = 0
        self._pending_world = None
        self._mailbox = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = None
        self.history = collections.deque(maxlen=int(PLOT_SECONDS * rate * 4))   # (t, wall, q, v, tau)

    # -- the listener ----------------------------------------------------------------------
    def start(self, session):
        self.attach(session, World(session.sim, 0), Snapshot(session.sim, 0, self.show_contacts, self.show_sensors))

    def attach(self, session, world, first):
        """Show `world` from its first Snapshot on, with `session`'s controls (start, or the
        view's own process with a proxy of the run's Session)."""
        self.session = session
        self.world = world
        self.scene = WorldScene(self.server.scene, world.links, world.sensors)
        light(self.server.scene)
        eye, target = initial_camera(world.models, [n for n, _ in world.links], first.link_R, first.link_p)
        camera = self.server.initial_camera
        camera.fov, camera.look_at, camera.position = FOV, tuple(target), tuple(eye)
        self.server.scene.add_grid("/ground_grid", width=20.0, height=20.0, cell_size=0.5,
                                   section_size=1.0, position=(0.0, 0.0, 0.001))
        self.panel = Panel(self.server, self)
        self.panel.build(world, session)
        self._put(first)
        self._thread = threading.Thread(target=self._loop, name="mbsim view", daemon=True)
        self._thread.start()

    def on_step(self, sim):
        now = time.monotonic()
        if now < self._due:
            return
        self._due = now + self.period
        self._put(Snapshot(sim, self._world_version, self.show_contacts, self.show_sensors))

    def on_reset(self, sim):
        self._put(Snapshot(sim, self._world_version, self.show_contacts, self.show_sensors))

    def on_world_changed(self, sim):
        self.world_arrived(World(sim, self._world_version + 1))
        self._put(Snapshot(sim, self._world_version, self.show_contacts, self.show_sensors))

    def world_arrived(self, world):
        """The world from here on (its version the next): the view thread rebuilds the scene
        when a snapshot of it comes."""
        self._world_version = world.version
        self._pending_world = world

    def refresh(self):
        """One snapshot now, between steps, shown whole (after a control changed the state or
        stepped while paused: no later frame would show it)."""
        self.session.between_steps(lambda: self._put(
            Snapshot(self.session.sim, self._world_version, self.show_contacts, self.show_sensors, whole=True)))

    def close(self):
        """Stop the view's thread and the server (the browsers see the run end); once."""
        if self._stop.is_set() and self.server is None:
            return
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        if self.server is not None:
            stop_server(self.server)
            self.server = None

    def _put(self, snap):
        with self._mailbox:
            if self._latest is not None:
                self.frames_dropped += 1
            self._latest = snap
            self.frames_taken += 1
        self._wake.set()

    # -- the view's thread -----------------------------------------------------------------
    def _loop(self):
        while not self._stop.is_set():
            self._wake.wait(0.25)
            self._wake.clear()
            with self._mailbox:
                snap, self._latest = self._latest, None
            if snap is None:
                if self.panel is not None:
                    try:
                        self.panel.idle()
                    except ConnectionError:
                        return              # the run has ended (a view's process): nothing more to show
                continue
            t0 = time.thread_time()
            try:
                self._push(snap)
            except Exception as e:          # a frame that cannot be drawn never stops the run
                self.log(f"view: frame at t = {snap.t:.3f} s not drawn: {e!r}")
            self.cpu_seconds += time.thread_time() - t0
            self.frames_pushed += 1

    def _push(self, snap):
        pending = self._pending_world
        if pending is not None and pending.version <= snap.world:
            self._pending_world = None
            self._rebuild(pending)
        if snap.world != self.world.version:
            return                          # taken before the world changed: its arrays do not fit
        if self.history and snap.t < self.history[-1][0]:
            self.history.clear()            # a reset: the plots start again from t = 0
        self.history.append((snap.t, snap.wall, snap.q, snap.v, snap.tau))
        with self.server.atomic():      # one wake-up of viser's server thread, one message window
            self.scene.set_link_poses(snap.link_R, snap.link_p)
            self.scene.set_contacts(snap.contact_points, snap.contact_forces, self.show_contacts)
            self.scene.set_readings(snap.readings, self.show_sensors)
            self.panel.update(snap, whole=snap.whole)

    def _rebuild(self, world):
        self.scene.remove()
        self.world = world
        self.scene = WorldScene(self.server.scene, world.links, world.sensors)
        self.panel.world_changed(world)
        self.history.clear()

    def stats(self):
        return dict(frames_taken=self.frames_taken, frames_pushed=self.frames_pushed,
                    frames_dropped=self.frames_dropped, view_cpu_s=self.cpu_seconds,
                    clients=len(self.server.get_clients()) if self.server is not None else 0)
