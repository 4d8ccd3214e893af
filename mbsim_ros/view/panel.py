"""The live view's side panel: the run's controls, toggles, a clicked link's pose, the push,
joint sliders, spawning, camera images and plots. Every control calls a Session control method
(CONTRACT.md); nothing here touches the simulation's arrays."""
from __future__ import annotations

import io
import os
import time

import numpy as np

from ..model.transforms import matrix_to_rpy
from .scene import FORCE_SCALE, update_props

FOV = 0.785                 # rad, the browsers' initial vertical field of view (mbsim render's)
PANEL_RATE = 4.0            # Hz, text, plots and images at most
RTF_MAX = 4.0               # the slider's top; 0 is "as fast as possible"
NONE = "(none)"
CONTROL_WAIT = 10.0         # s, at most, for the run to park after Pause or to do Step's steps


def initial_camera(models, link_names, link_R, link_p, fov=FOV):
    """(eye, target) framing the moving bodies from the front-right, above: the view
    `mbsim render` takes (render.framing_view over the project's own scene of the models)."""
    from ..render.scene import Scene, framing_view
    scene = Scene(models, link_names)
    scene.set_link_poses(link_R, link_p)
    return framing_view(models, scene, fov)


class Panel:
    def __init__(self, server, view):
        self.server = server
        self.view = view
        self.gui = server.gui
        self._next = 0.0
        self._last = None           # (t, wall) of the previous panel update (the measured rtf)
        self.rtf_measured = float("nan")
        self.lateness_ms = float("nan")
        self.follow = None          # link name the cameras follow
        self.selected = None        # link name clicked last
        self._syncing = False       # set while the panel moves its own sliders
        self.rtf_history = []       # (wall, rtf, p99 lateness) for the plot
        self._images = {}

    # -- building ------------------------------------------------------------------------
    def build(self, world, session):
        gui, view = self.gui, self.view
        paused = bool(getattr(session, "paused", False))
        with gui.add_folder("Simulation"):
            self.status = gui.add_markdown("starting")
            self.play = gui.add_button("Play" if paused else "Pause", icon=None)
            self.play.on_click(lambda _: self._toggle_pause())
            self.steps = gui.add_number("Steps", initial_value=1, min=1, max=100000, step=1)
            self.step_button = gui.add_button("Step")
            self.step_button.on_click(lambda _: self._step())
            self.reset_button = gui.add_button("Reset")
            self.reset_button.on_click(lambda _: session.reset())
            rtf = float(getattr(session, "real_time_factor", None) or _config_rtf(session))
            self.rtf = gui.add_slider("Real-time factor", min=0.0, max=RTF_MAX, step=0.05,
                                      initial_value=min(rtf, RTF_MAX),
                                      hint="0: as fast as possible")
            self.rtf.on_update(lambda _: None if self._syncing else session.set_real_time_factor(float(self.rtf.value)))
        with gui.add_folder("Show"):
            self.show_visual = gui.add_checkbox("Visual geometry", True)
            self.show_collision = gui.add_checkbox("Collision geometry", False)
            self.show_frames = gui.add_checkbox("Link frames (x red, y green, z blue)", False)
            self.show_com = gui.add_checkbox("Centres of mass", False)
            self.show_contacts = gui.add_checkbox("Contacts", True)
            self.show_sensors = gui.add_checkbox("Sensors", True)
            self.force_scale = gui.add_markdown(f"Force arrows: 1 m = {1 / FORCE_SCALE:g} N")
            for box in (self.show_visual, self.show_collision, self.show_frames, self.show_com):
                box.on_update(lambda _: self._apply_show())
            self.show_contacts.on_update(lambda _: setattr(view, "show_contacts", bool(self.show_contacts.value)))
            self.show_sensors.on_update(lambda _: setattr(view, "show_sensors", bool(self.show_sensors.value)))
        with gui.add_folder("Camera and links"):
            self.follow_link = gui.add_dropdown("Follow link", [NONE] + [n for n, _ in world.links])
            self.follow_link.on_update(lambda _: self._set_follow())
            self.picked = gui.add_markdown("Click a link to see its name and pose.")
        with gui.add_folder("Push"):
            self.push_link = gui.add_dropdown("Link", [n for n, _ in world.links], initial_value=world.roots[0])
            self.push_force = gui.add_vector3("Force (N, world)", initial_value=(0.0, 100.0, 0.0), step=1.0)
            self.push_torque = gui.add_vector3("Torque (N m, world)", initial_value=(0.0, 0.0, 0.0), step=0.1)
            self.push_duration = gui.add_number("Duration (s)", initial_value=0.2, min=0.001, max=10.0, step=0.01)
            self.push_button = gui.add_button("Push")
            self.push_button.on_click(lambda _: session.apply_wrench(
                self.push_link.value, tuple(self.push_force.value), tuple(self.push_torque.value),
                float(self.push_duration.value)))
        self.joint_folder = gui.add_folder("Joints (while paused)", expand_by_default=False)
        with gui.add_folder("Spawn", expand_by_default=False):
            self.spawn_path = gui.add_text("Model file", initial_value="")
            self.spawn_button = gui.add_button("Spawn")
            self.spawn_button.on_click(lambda _: self._spawn())
            self.spawn_status = gui.add_markdown("")
        self.camera_folder = gui.add_folder("Cameras", expand_by_default=True)
        with gui.add_folder("Plots", expand_by_default=False):
            self.plot_joint = gui.add_dropdown("Joint", [n for n, *_ in world.joints] or [NONE])
            # redrawn at once: paused, no frame would come to show the picked joint
            self.plot_joint.on_update(lambda _: self._update_plots(time.monotonic()))
            self.plot_q = self._plot("position", "q")
            self.plot_v = self._plot("velocity", "v")
            self.plot_tau = self._plot("effort", "tau")
            self.plot_rtf = self._plot("real-time factor", "rtf")
            self.plot_late = self._plot("step lateness p99 (ms)", "ms")
        self.world_changed(world)

    def _plot(self, title, label):
        from viser import uplot
        return self.gui.add_uplot(data=(np.zeros(2), np.zeros(2)),
                                  series=(uplot.Series(label="t"), uplot.Series(label=label, stroke="#1f77b4", width=1.5)),
                                  title=title, aspect=2.0,
                                  scales={"x": uplot.Scale(time=False, auto=True), "y": uplot.Scale(auto=True)})

    def world_changed(self, world):
        """Rebuild what depends on the world's links, joints and cameras."""
        session = self.view.session
        self.follow_link.options = [NONE] + [n for n, _ in world.links]
        self.push_link.options = [n for n, _ in world.links]
        self.plot_joint.options = [n for n, *_ in world.joints] or [NONE]
        for handle in getattr(self, "_joint_sliders", {}).values():
            handle.remove()
        self._joint_sliders = {}
        paused = bool(getattr(session, "paused", False))
        with self.joint_folder:
            for name, iq, _, lo, hi in world.joints:
                slider = self.gui.add_slider(name, min=lo, max=hi, step=(hi - lo) / 1000.0,
                                             initial_value=float(np.clip(0.0, lo, hi)), disabled=not paused)
                slider.on_update(lambda event, name=name: self._joint_moved(name, event.target.value))
                self._joint_sliders[name] = slider
        for handles in self._images.values():
            for h in handles:
                h.remove()
        self._images = {}
        with self.camera_folder:
            for name, sensor, _ in world.sensors:
                if sensor.type == "camera":
                    blank = np.zeros((int(sensor.params.get("height", 240)), int(sensor.params.get("width", 320)), 3), np.uint8)
                    self._images[name] = (self.gui.add_image(blank, label=f"{name} (colour)", format="jpeg"),
                                          self.gui.add_image(blank, label=f"{name} (depth)", format="jpeg"))
        for node in self.view.scene.shape_nodes():
            node.on_click(self._clicked)
        self._apply_show()

    # -- controls ------------------------------------------------------------------------
    def _toggle_pause(self):
        s = self.view.session
        if s.paused:
            s.resume()
        elif s.pause(wait=True, timeout=CONTROL_WAIT):
            self.view.refresh()         # the state it stopped at (the frame rate may have skipped it)
        self._sync_paused()

    def _step(self):
        s = self.view.session
        if s.step(int(self.steps.value), wait=True, timeout=CONTROL_WAIT):
            self.view.refresh()         # the state after the last step (skipped by the frame rate)

    def _sync_paused(self):
        """The Play/Pause label and the joint sliders as the run is now. Called on a click and
        again at PANEL_RATE, running or not: a click's update can race the view thread's and
        lose, and the next one puts it right."""
        paused = bool(self.view.session.paused)
        label = "Play" if paused else "Pause"
        if self.play.label != label:
            self.play.label = label
        for slider in self._joint_sliders.values():
            if slider.disabled != (not paused):
                slider.disabled = not paused

    def _apply_show(self):
        self.view.scene.show(visual=self.show_visual.value, collision=self.show_collision.value,
                             frames=self.show_frames.value, com=self.show_com.value)

    def _set_follow(self):
        value = self.follow_link.value
        self.follow = None if value == NONE else value
        self._follow_camera()           # at once: paused, no frame would come to move it

    def _follow_camera(self):
        """Every browser's camera moved as the followed link moved: the link's origin at the
        centre, the camera's direction and distance kept."""
        if self.follow is None or self.follow not in self.view.scene.link_names:
            return
        target = self.view.scene.link_pose(self.follow)[:3, 3]
        for client in self.server.get_clients().values():
            cam = client.camera
            offset = np.asarray(cam.position) - np.asarray(cam.look_at)
            for attempt in range(2):
                try:
                    with client.atomic():       # viser's position setter carries look_at along: first
                        cam.position = target + offset
                        cam.look_at = target
                    break
                except RuntimeError:
                    # viser sets its asyncio Event from this thread as well as from its loop
                    # (infra/_async_message_buffer.py push), and the loop may change the
                    # Event's waiters meanwhile ("deque mutated during iteration", seen once
                    # in CI): the messages were queued; setting them again replaces them
                    if attempt:
                        raise

    def _clicked(self, event):
        name = self.view.scene.node_link.get(event.target.name)
        if name is None:
            return
        self.selected = name
        self.push_link.value = name
        self._show_selected()

    def _show_selected(self):
        if self.selected is None or self.selected not in self.view.scene.link_names:
            return
        T = self.view.scene.link_pose(self.selected)
        rpy = matrix_to_rpy(T[:3, :3])
        self.picked.content = (f"**{self.selected}**  \nposition (m): {_fmt(T[:3, 3])}  \n"
                               f"rpy (rad): {_fmt(rpy)}")

    def _joint_moved(self, name, value):
        s = self.view.session
        if self._syncing or not s.paused:
            return
        s.set_joint_positions({name: float(value)})
        self.view.refresh()

    def _spawn(self):
        path = self.spawn_path.value.strip()
        if not path:
            self.spawn_status.content = "Give a model file's path (on the machine running the simulation)."
            return
        try:
            from ..formats import load_model
            model = load_model(os.path.expanduser(path))
            name = self.view.session.spawn(model)
        except Exception as e:          # a bad file is a message in the panel, never the run's end
            self.spawn_status.content = f"Not spawned: {e}"
            return
        self.spawn_status.content = f"Spawned **{name}**."

    # -- each frame ----------------------------------------------------------------------
    def update(self, snap, whole=False):
        """Per frame: the followed camera; at PANEL_RATE (whole: now): text, plots, images."""
        self._follow_camera()
        now = time.monotonic()
        if now < self._next and not whole:
            return
        self._next = now + 1.0 / PANEL_RATE
        if self._last is not None and snap.wall > self._last[1]:
            self.rtf_measured = (snap.t - self._last[0]) / (snap.wall - self._last[1])
        self._last = (snap.t, snap.wall)
        self._refresh_text(snap.t)
        self._sync_paused()
        self._show_selected()
        self._update_plots(now)
        self._update_images(snap.readings)

    def idle(self):
        """No new frame (paused, or between steps): keep the text current."""
        now = time.monotonic()
        if now >= self._next:
            self._next = now + 1.0 / PANEL_RATE
            self.rtf_measured = 0.0 if self.view.session.paused else self.rtf_measured
            self._refresh_text(None)
            self._sync_paused()

    def _refresh_text(self, t):
        v, s = self.view, self.view.session
        if t is None:       # paused: the time it stopped at (its last frame may have been skipped)
            t = float(s.sim.t) if s.paused else (v.history[-1][0] if v.history else 0.0)
        try:
            stats = s.stats(last=1000)
            self.lateness_ms = float(stats.get("lateness_p99_ms", float("nan")))
        except Exception:
            stats = {}
        self.rtf_history.append((time.monotonic(), self.rtf_measured, self.lateness_ms))
        del self.rtf_history[:-int(60 * PANEL_RATE)]
        state = "paused" if s.paused else "running"
        self.status.content = (f"**t = {t:.3f} s** ({state})  \nreal-time factor {self.rtf_measured:.2f}, "
                               f"lateness p99 {self.lateness_ms:.3f} ms  \n"
                               f"frames {v.frames_pushed} shown, {v.frames_dropped} dropped; "
                               f"{len(self.server.get_clients())} browser(s)")
        if not self._syncing and s.paused and self._joint_sliders and v.history:
            self._sync_joint_sliders(v.history[-1][2])

    def _sync_joint_sliders(self, q):
        self._syncing = True
        try:
            for name, iq, _, lo, hi in self.view.world.joints:
                slider = self._joint_sliders.get(name)
                if slider is not None and iq < len(q) and abs(slider.value - q[iq]) > 1e-6:
                    slider.value = float(np.clip(q[iq], lo, hi))
        finally:
            self._syncing = False

    def _update_plots(self, now):
        history = list(self.view.history)
        joint = next((j for j in self.view.world.joints if j[0] == self.plot_joint.value), None)
        if history and joint is not None:
            t = np.array([h[0] for h in history])
            keep = t >= t[-1] - 10.0
            t = t[keep]
            _, iq, iv, _, _ = joint
            rows = [h for h, k in zip(history, keep) if k]
            update_props(self.plot_q, data=(t, np.array([h[2][iq] for h in rows])))
            update_props(self.plot_v, data=(t, np.array([h[3][iv] for h in rows])))
            update_props(self.plot_tau, data=(t, np.array([h[4][iv] for h in rows])))
        if len(self.rtf_history) >= 2:
            w = np.array([h[0] for h in self.rtf_history]) - now
            update_props(self.plot_rtf, data=(w, np.nan_to_num(np.array([h[1] for h in self.rtf_history]))))
            update_props(self.plot_late, data=(w, np.nan_to_num(np.array([h[2] for h in self.rtf_history]))))

    def _update_images(self, readings):
        from ..render import depth_to_image
        for name, (color, depth) in self._images.items():
            r = readings.get(name)
            if r is None or r.stamp == getattr(color, "_mbsim_stamp", None):
                continue
            color._mbsim_stamp = r.stamp
            images = r.values
            if images.color is not None:
                set_jpeg(color, images.color)
            if images.depth is not None:
                set_jpeg(depth, depth_to_image(images.depth))


def set_jpeg(handle, image, quality=75):
    """Show `image` ((H, W) grey or (H, W, 3) RGB uint8) in an image element made with
    format="jpeg", encoded here by Pillow. viser's own setter tries to import OpenCV for every
    image (a search of every sys.path entry when it is not installed) and then encodes through
    imageio's plugins: three times the cost of the encoding itself."""
    if "_data" not in getattr(handle, "_prop_hints", ()):       # another viser: its own setter
        handle.image = image
        return
    from PIL import Image
    out = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(image, np.uint8)).save(out, format="JPEG", quality=quality)
    update_props(handle, _data=out.getvalue())


def _config_rtf(session):
    config = getattr(session, "config", None)
    return config.target_rtf if config is not None else 1.0


def _fmt(x):
    return "(" + ", ".join(f"{float(v):+.3f}" for v in x) + ")"
