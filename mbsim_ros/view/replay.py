"""ReplayView: a recorded bag in the browser, on the live view's page (the same scene, light,
ground grid and camera), with a time slider to scrub and play at any speed.

    view = ReplayView(recording, host="127.0.0.1", port=8080)   # binds now: ViewError
    view.seek(1.5)            # seconds from the bag's start: the scene shows the poses then
    view.serve_forever()      # until Ctrl-C; view.close()

`recording` is what ros/recording.read_recording returns (the command line reads the bag: the
view does not import ros/): the robot models come from its robot_description texts, the link
poses from /tf and /tf_static at the chosen time, the camera images and joint plots from its
topics. A bag without robot_description shows its TF frames as axes and says what is missing.
"""
from __future__ import annotations

import threading
import time

import numpy as np

from ..formats.urdf import load_urdf
from ..model import ModelError
from .live import light
from .panel import FOV, initial_camera
from .scene import WorldScene, model_links, set_pose, wxyz_array
from .server import DEFAULT_HOST, DEFAULT_PORT, start_server, stop_server, url

RATE = 30.0                 # Hz, frames while playing
PANEL_RATE = 4.0            # Hz, images and plots at most
PLOT_SECONDS = 10.0         # s of the bag before the current time in the plots
SPEED_MAX = 100.0
NONE = "(none)"


def display_pixels(pixels):
    """uint8 (h, w, 3) of an image's pixels ((h, w) grey or (h, w, 3) colour)."""
    p = np.asarray(pixels, np.uint8)
    return np.ascontiguousarray(np.repeat(p[:, :, None], 3, axis=2) if p.ndim == 2 else p[:, :, :3])


class ReplayView:
    def __init__(self, recording, host=DEFAULT_HOST, port=DEFAULT_PORT, log=None):
        self.rec = recording
        self.log = log or (lambda text: None)
        self.models, self.notes = self._models()
        self.server = start_server(host, port, log=log)
        self.url = url(host, port)
        self.duration = max(0.0, (recording.end_ns - recording.start_ns) * 1e-9)
        self.t = 0.0                # s from the bag's start, shown now
        self.playing = False
        self.speed = 1.0
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._panel_due = 0.0
        self._syncing = False
        scene = self.server.scene
        light(scene)
        scene.add_grid("/ground_grid", width=20.0, height=20.0, cell_size=0.5, section_size=1.0,
                       position=(0.0, 0.0, 0.001))
        self.links = model_links(self.models)
        self.world = WorldScene(scene, self.links) if self.links else None
        self.unposed = []           # links /tf never places (drawn at the origin)
        self._tf_nodes = {}
        if self.world is None:
            for frame in recording.frames:
                self._tf_nodes[frame] = scene.add_frame(f"/tf/{frame}", axes_length=0.1, axes_radius=0.005)
                scene.add_label(f"/tf/{frame}/label", frame)
        self._build_panel()
        self.seek(0.0)
        self._frame_camera()
        self._thread = threading.Thread(target=self._loop, name="mbsim replay", daemon=True)
        self._thread.start()

    # -- building ------------------------------------------------------------------------------
    def _models(self):
        models, notes = [], []
        for topic, text in sorted(self.rec.descriptions.items()):
            try:
                models.append(load_urdf(f"{self.rec.path}{topic}", text=text))
            except ModelError as e:
                notes.append(f"{topic}: not drawn ({e})")
        if not self.rec.descriptions:
            notes.append(f"{self.rec.path} has no robot_description topic: showing its TF frames only "
                         "(record with `mbsim run --bag` to have the robot)")
        if not self.rec.frames:
            notes.append(f"{self.rec.path} has no /tf or /tf_static: nothing moves")
        return models, notes

    def _frame_camera(self):
        if not self.models:
            return
        eye, target = initial_camera(self.models, [n for n, _ in self.links], self.world.link_R, self.world.link_p)
        camera = self.server.initial_camera
        camera.fov, camera.look_at, camera.position = FOV, tuple(target), tuple(eye)

    def _build_panel(self):
        gui = self.server.gui
        with gui.add_folder("Replay"):
            self.status = gui.add_markdown("")
            self.slider = gui.add_slider("Time (s)", min=0.0, max=max(self.duration, 1e-3), step=0.001,
                                         initial_value=0.0)
            self.slider.on_update(lambda _: None if self._syncing else self.seek(float(self.slider.value)))
            self.play = gui.add_button("Play")
            self.play.on_click(lambda _: self.set_playing(not self.playing))
            self.speed_box = gui.add_number("Speed (x real time)", initial_value=1.0, min=0.01, max=SPEED_MAX, step=0.01)
            self.speed_box.on_update(lambda _: setattr(self, "speed", float(self.speed_box.value)))
            if self.notes:
                gui.add_markdown("\n\n".join(f"**{n}**" for n in self.notes))
        with gui.add_folder("Show"):
            boxes = [("Visual geometry", True, "visual"), ("Collision geometry", False, "collision"),
                     ("Link frames (x red, y green, z blue)", False, "frames"), ("Centres of mass", False, "com")]
            for label, on, key in boxes:
                box = gui.add_checkbox(label, on)
                box.on_update(lambda e, key=key: self.world is not None and self.world.show(**{key: bool(e.target.value)}))
        self._images = {}
        if self.rec.images:
            with gui.add_folder("Cameras"):
                for topic in sorted(self.rec.images):
                    self._images[topic] = gui.add_image(np.zeros((2, 2, 3), np.uint8), label=topic)
        self._series = {}
        for topic, js in self.rec.joint_states.items():
            for j, name in enumerate(js.names):
                self._series[name] = (js, j)
        if self._series:
            from viser import uplot
            with gui.add_folder("Plots", expand_by_default=False):
                self.plot_joint = gui.add_dropdown("Joint", list(self._series))
                self.plot_joint.on_update(lambda _: self._update_panel(force=True))
                self._plots = {f: gui.add_uplot(
                    data=(np.zeros(2), np.zeros(2)), title=f"{f} ({unit})", aspect=2.0,
                    series=(uplot.Series(label="t"), uplot.Series(label=f, stroke="#1f77b4", width=1.5)),
                    scales={"x": uplot.Scale(time=False, auto=True), "y": uplot.Scale(auto=True)})
                    for f, unit in (("position", "rad or m"), ("velocity", "rad/s or m/s"), ("effort", "N m or N"))}

    # -- time --------------------------------------------------------------------------------
    def seek(self, t):
        """Show the bag at `t` seconds from its start (clipped to the bag)."""
        with self._lock:
            self.t = float(np.clip(t, 0.0, self.duration))
            poses = self.rec.frame_poses(self.rec.start_ns + int(round(self.t * 1e9)))
            with self.server.atomic():
                if self.world is not None:
                    self._set_links(poses)
                for frame, node in self._tf_nodes.items():
                    T = poses.get(frame)
                    node.visible = T is not None
                    if T is not None:
                        set_pose(node, T[:3, 3], wxyz_array(T[None, :3, :3])[0])
            self._syncing = True
            try:
                self.slider.value = round(self.t, 3)
            finally:
                self._syncing = False
            self._update_panel(force=True)

    def _set_links(self, poses):
        R, p = self.world.link_R.copy(), self.world.link_p.copy()
        unposed = []
        for k, (name, _) in enumerate(self.links):
            T = poses.get(name)
            if T is None:
                unposed.append(name)
                continue
            R[k], p[k] = T[:3, :3], T[:3, 3]
        self.world.set_link_poses(R, p)
        self.unposed = unposed

    def set_playing(self, on):
        with self._lock:
            if on and self.t >= self.duration:
                self.seek(0.0)
            self.playing = bool(on)
            self.play.name = "Pause" if self.playing else "Play"

    def link_pose(self, name):
        """The 4x4 pose the scene shows for link `name` now."""
        return self.world.link_pose(name)

    def _loop(self):
        last = time.monotonic()
        while not self._stop.wait(1.0 / RATE):
            now = time.monotonic()
            dt, last = now - last, now
            try:
                if self.playing:
                    t = self.t + dt * self.speed
                    self.seek(t)
                    if t >= self.duration:
                        self.set_playing(False)
            except Exception as e:      # a frame that cannot be drawn never ends the replay
                self.log(f"replay: t = {self.t:.3f} s not drawn: {e!r}")

    def _update_panel(self, force=False):
        now = time.monotonic()
        if not force and now < self._panel_due:
            return
        self._panel_due = now + 1.0 / PANEL_RATE
        t_ns = self.rec.start_ns + int(round(self.t * 1e9))
        missing = f"; {len(self.unposed)} links have no TF" if self.unposed else ""
        self.status.content = f"t = {self.t:.3f} s of {self.duration:.3f} s{missing}"
        for topic, handle in self._images.items():
            try:
                _, pixels = self.rec.image_at(topic, t_ns)
                handle.image = display_pixels(pixels)
            except ValueError as e:
                handle.label = f"{topic}: {e}"
        if self._series:
            js, j = self._series.get(self.plot_joint.value, (None, 0))
            if js is None:
                return
            k1 = int(np.searchsorted(js.times, t_ns, side="right"))
            k0 = int(np.searchsorted(js.times, t_ns - int(PLOT_SECONDS * 1e9)))
            x = (js.times[k0:k1] - self.rec.start_ns) * 1e-9
            for f, plot in self._plots.items():
                y = getattr(js, f)[k0:k1, j]
                plot.data = (x, y) if len(x) > 1 else (np.zeros(2), np.zeros(2))

    # -- running -----------------------------------------------------------------------------
    def serve_forever(self):
        try:
            while not self._stop.wait(0.5):
                pass
        except KeyboardInterrupt:
            pass

    def close(self):
        self._stop.set()
        self._thread.join(timeout=5.0)
        stop_server(self.server)
