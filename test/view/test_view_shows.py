"""What the live view shows of a running Session, read from the viser scene and GUI handles
and from the bytes a connected client receives, no browser: contact points and force arrows,
the sensor overlays, each camera's colour and depth image, the plots, the followed camera.

The world is the bundled one (SR1 standing on the floor with its IMU, two ankle F/T sensors,
a chest range sensor and two cameras), stepped here and now (the session is paused and not
running) and shown one frame at a time by the test (the view's own thread is stopped)."""
import asyncio
import io
import threading

import numpy as np
import pytest

from mbsim_ros.view.scene import FORCE_SCALE

STANDING_STEPS = 300        # 0.3 s: SR1 settled on its soles, every sensor has a reading



@pytest.fixture(scope="module")
def standing():
    """A run.Session of the bundled world with a LiveView, paused and not running, after
    STANDING_STEPS steps; the view's thread stopped (show() pushes a frame)."""
    from bundled import session_with_view
    session, view, _ = session_with_view(view_thread=False)
    session.step(STANDING_STEPS)
    session.drain()             # the cameras' and range sensor's frames of these steps rendered
    show(view)
    yield session, view
    session.close()


def show(view):
    """One frame of the session's state pushed as the view's thread does, the panel's text,
    plots and images included (not held back by its rate)."""
    view.on_reset(view.session.sim)
    snap, view._latest = view._latest, None
    view.panel._next = 0.0
    view._push(snap)


def local(handle):
    """A scene node's pose in its parent's frame (4x4)."""
    from mbsim_ros.model.transforms import quat_to_matrix
    w, x, y, z = np.asarray(handle.wxyz, float)
    T = np.eye(4)
    T[:3, :3] = quat_to_matrix([x, y, z, w])
    T[:3, 3] = handle.position
    return T


def link_node(view, link):
    k = view.scene.link_names.index(link)
    return view.scene._frames[k]


def sensor_entry(view, name):
    return next(s for s in view.scene._sensors if s["name"] == name)


def model_sensor(view, name):
    return next(s for n, s, _ in view.world.sensors if n == name)


# -- contacts ------------------------------------------------------------------------------

def test_contact_points_and_force_arrows_are_the_simulations_contacts(standing):
    """A dot at each contact point the simulation reports (on the floor, z ~ 0) and an arrow
    from it to point + force * FORCE_SCALE; the arrows' forces hold the robot up (their sum is
    its weight within 3 %: 0.3 s after the start SR1 still sways a little); the panel states
    the scale the arrows are drawn with; unticked, both are hidden, ticked, drawn again."""
    session, view = standing
    sim = session.sim
    contacts = sim.contacts()
    assert len(contacts) == 8                       # four corners of each sole
    points = np.array([c.point for c in contacts])
    forces = np.array([c.force for c in contacts])
    dots, arrows = view.scene._contacts, view.scene._contact_arrows
    assert dots.visible and arrows.visible
    assert np.allclose(dots.points, points, atol=1e-6)
    assert np.allclose(np.abs(points[:, 2]), 0.0, atol=1e-3)
    assert np.allclose(arrows.points[:, 0], points, atol=1e-6)
    drawn = (arrows.points[:, 1] - arrows.points[:, 0]).astype(float)
    assert np.allclose(drawn, FORCE_SCALE * forces, atol=1e-5)
    sr1 = session.sim.models[0]
    weight = sum(link.mass for link in sr1.links) * 9.80665
    support = drawn.sum(0) / FORCE_SCALE
    assert abs(support[2] - weight) < 0.03 * weight, (support, weight)
    # the scale the panel states is the arrows' own: newtons per metre of arrow
    text = view.panel.force_scale.content
    newtons_per_metre = float(text.split("1 m = ")[1].split(" N")[0])
    assert newtons_per_metre == pytest.approx(np.linalg.norm(forces, axis=1).sum()
                                              / np.linalg.norm(drawn, axis=1).sum(), rel=1e-4)
    view.panel.show_contacts.value = False          # as the page's checkbox does
    show(view)
    assert not dots.visible and not arrows.visible
    view.panel.show_contacts.value = True
    show(view)
    assert dots.visible and arrows.visible and np.allclose(dots.points, points, atol=1e-6)



# -- sensor overlays -------------------------------------------------------------------------

def world_pose(view, entry):
    """A sensor node's world pose: its link's frame node (as the browser has it) @ its own."""
    k = entry["link"]
    return local(view.scene._frames[k]) @ local(entry["node"])


def test_sensor_overlays_sit_on_the_sensors_and_show_their_readings(standing):
    """IMU: a frame at the accelerometer's and the gyro's pose on the WAIST. Cameras: a
    frustum at each camera's optical frame (+z along the view, the aspect and field of view of
    the sensor). F/T: an arrow from the sensor's origin of FORCE_SCALE times the force the foot
    exerts on the leg, which, standing, is the sole's contact forces plus the foot's weight
    (within 5 %: SR1 still sways a little). Range: the scan's points where the rays hit, at the
    measured range from the sensor, those ahead of the robot on the floor (z ~ 0). Sensors unticked: all hidden."""
    from mbsim_ros.model.model import OPTICAL_FRAME
    session, view = standing
    sim = session.sim
    readings = sim.readings()

    def expected(name):
        s = model_sensor(view, name)
        return sim.link_pose(s.link) @ np.asarray(s.pose, float)

    for name in ("WaistAccelSensor", "WaistGyro"):
        e = sensor_entry(view, name)
        assert e["node"].visible
        assert np.allclose(world_pose(view, e), expected(name), atol=1e-5)
    for name in ("LeftCamera", "RightCamera"):
        e, s = sensor_entry(view, name), model_sensor(view, name)
        assert e["node"].visible
        assert np.allclose(world_pose(view, e), expected(name) @ OPTICAL_FRAME, atol=1e-5)
        assert e["node"].aspect == pytest.approx(s.params["width"] / s.params["height"])
        assert e["node"].fov == pytest.approx(s.params["fieldOfView"])     # wider than high: fov is vertical
    for name, foot in (("LeftAnkleForceSensor", "LLEG_ANKLE_R"), ("RightAnkleForceSensor", "RLEG_ANKLE_R")):
        e = sensor_entry(view, name)
        assert e["node"] is not None and e["node"].visible
        seg = e["node"].points[0].astype(float)
        T_link = local(view.scene._frames[e["link"]])
        origin, tip = (T_link @ np.r_[seg[0], 1.0])[:3], (T_link @ np.r_[seg[1], 1.0])[:3]
        assert np.allclose(origin, expected(name)[:3, 3], atol=1e-5)
        contact = sum(c.force for c in sim.contacts() if c.link_a == foot)
        below = sum(link.mass for link in sim.models[0].links
                    if link.name == foot or _descends(sim.models[0], link.name, foot))
        exerted = contact + below * np.array([0.0, 0.0, -9.80665])
        arrow = (tip - origin) / FORCE_SCALE
        assert np.linalg.norm(arrow - exerted) < 0.05 * np.linalg.norm(exerted), (name, arrow, exerted)
        assert np.allclose(arrow, expected(name)[:3, :3] @ readings[name].values[:3], atol=1e-2)
    e = sensor_entry(view, "ChestRange")
    ranges = np.asarray(readings["ChestRange"].values, float)
    hit = np.isfinite(ranges) & (ranges > 0)
    assert hit.sum() > 50, f"{hit.sum()} of {len(ranges)} rays hit anything"
    pts = e["node"].points.astype(float)
    T_link = local(view.scene._frames[e["link"]])
    world = pts @ T_link[:3, :3].T + T_link[:3, 3]
    origin = expected("ChestRange")[:3, 3]
    assert len(world) == hit.sum()
    assert np.allclose(np.linalg.norm(world - origin, axis=1), ranges[hit], atol=1e-4)
    # the scan is in the robot's x-z plane and also sees the robot's head and legs: the points
    # ahead of its feet (x > 0.3 m; its soles end at 0.18 m) are on the floor
    far = world[:, 0] > 0.3
    assert far.sum() > 100 and np.abs(world[far, 2]).max() < 0.01, "scan points not on the floor"
    view.panel.show_sensors.value = False
    show(view)
    assert not any(s["node"].visible for s in view.scene._sensors if s["node"] is not None)
    view.panel.show_sensors.value = True
    show(view)
    assert all(s["node"].visible for s in view.scene._sensors if s["node"] is not None)


def _descends(model, link, ancestor):
    """Whether `link` is below `ancestor` in the model's tree."""
    parent = {j.child: j.parent for j in model.joints}
    while link in parent:
        link = parent[link]
        if link == ancestor:
            return True
    return False


# -- the panel: camera images, plots -----------------------------------------------------------

def decoded(handle):
    """The picture an image handle sends to the browsers (its encoded bytes, decoded)."""
    from PIL import Image
    return np.asarray(Image.open(io.BytesIO(bytes(handle._data))))


def test_each_cameras_colour_and_depth_image_is_its_newest_frame(standing):
    """The Cameras folder's two pictures per camera, as the browser receives them (JPEG), are
    that camera's newest frame: the colour image within 4 of 255 on average (JPEG), the depth
    as grey 255 * nearest / depth (nothing hit: black) within 4. The waist then bent backward
    0.3 rad and 40 steps on (the horizon moves in the cameras' next frames): the pictures are the new
    frames, where they differ from the old ones the new ones' pixels."""
    session, view = standing
    assert set(view.panel._images) == {"LeftCamera", "RightCamera"}
    old = {name: _shown_is_frame(session, view, name) for name in view.panel._images}
    session.set_joint_positions({"WAIST_P": -0.3})
    session.step(40)
    session.drain()
    show(view)
    for name in view.panel._images:
        color, want = _shown_is_frame(session, view, name)
        before = old[name][1]
        differ = np.abs(want - before).sum(axis=2) > 60
        assert differ.sum() > 0.1 * differ.size, f"{name}: the bent waist changed {differ.sum()} pixels"
        assert 3 * np.abs(color - want)[differ].mean() < np.abs(color - before)[differ].mean()


def _shown_is_frame(session, view, name):
    """(shown colour, frame's colour) as int arrays, after checking both pictures of `name`."""
    frame = session.sim.readings()[name]
    assert frame.stamp == pytest.approx(session.sim.t, abs=1 / 30)      # a 30 Hz camera's newest
    color_handle, depth_handle = view.panel._images[name]
    color = decoded(color_handle).astype(int)
    want = np.asarray(frame.values.color)[..., :3].astype(int)
    assert color.shape == want.shape and want.std() > 10
    error = np.abs(color - want).mean()
    assert error < 4, f"{name}: colour differs by {error:.1f} of 255 on average"
    d = np.asarray(frame.values.depth, float)
    finite = np.isfinite(d) & (d > 0)
    grey = np.zeros(d.shape)
    grey[finite] = 255.0 * d[finite].min() / d[finite]
    depth = decoded(depth_handle).astype(float)
    depth = depth if depth.ndim == 2 else depth[..., 0]
    assert depth.shape == d.shape and grey.std() > 10
    error = np.abs(depth - grey).mean()
    assert error < 4, f"{name}: depth image differs by {error:.1f} of 255 on average"
    return color, want


def test_plots_are_the_chosen_joints_history_and_the_runs_pace(standing):
    """Frames shown every 20 steps: the position, velocity and effort plots of the joint picked
    in the panel are that joint's q, v and tau at those frames' times, as the simulation
    produced them; picking another joint while paused redraws them at once with its history;
    the real-time factor plot's newest value is the simulated over the wall time between the
    last two panel updates, the lateness plot's the run's step lateness p99; after a reset the
    joint plots start again from t = 0."""
    session, view = standing
    sim = session.sim
    knee, hip = "LLEG_KNEE", "RLEG_HIP_P"
    view.panel.plot_joint.value = knee
    produced = []
    for _ in range(10):
        session.step(20)
        show(view)
        produced.append((sim.t, sim.q.copy(), sim.v.copy(), sim.tau.copy()))
    t = np.array([p[0] for p in produced])
    for joint in (knee, hip):
        if joint == hip:
            view.panel.plot_joint.value = hip           # paused: no frame comes after the pick
        iq, iv = sim.dof_index(joint)
        for plot, series in ((view.panel.plot_q, [p[1][iq] for p in produced]),
                             (view.panel.plot_v, [p[2][iv] for p in produced]),
                             (view.panel.plot_tau, [p[3][iv] for p in produced])):
            x, y = plot.data
            assert np.array_equal(x[-10:], t) and np.array_equal(y[-10:], series), (joint, plot.title)
        assert np.ptp(view.panel.plot_q.data[1][-10:]) > 0          # the joint moved: not a constant
    assert not np.array_equal(view.panel.plot_q.data[1], [p[1][sim.dof_index(knee)[0]] for p in produced])
    rtf = view.panel.plot_rtf.data[1][-1]
    assert rtf == pytest.approx(view.panel.rtf_measured) and rtf > 0
    assert view.panel.plot_late.data[1][-1] == pytest.approx(session.stats(last=1000)["lateness_p99_ms"])
    session.reset()
    show(view)
    assert list(view.panel.plot_q.data[0]) == [0.0], "after a reset the plots start again at t = 0"


def test_the_step_button_shows_the_state_after_its_last_step(standing):
    """Step (100 steps) pressed while paused, the panel's text, plots and images having just
    been updated (their rate would hold the next back): the frame the view shows, its plots
    included, is the state after the 100th step, not one the frame rate let through earlier."""
    import time
    session, view = standing
    sim = session.sim
    show(view)
    t0 = sim.t
    view.panel.steps.value = 100
    view.panel._next = time.monotonic() + 60.0
    view.panel.step_button.value = True             # as the page's button does
    assert sim.t == pytest.approx(t0 + 100 * sim.dt)
    snap, view._latest = view._latest, None
    view._push(snap)
    assert view.history[-1][0] == sim.t
    assert view.panel.plot_q.data[0][-1] == sim.t
    assert f"t = {sim.t:.3f} s" in view.panel.status.content


# -- the followed camera, as a connected client receives it -----------------------------------

class Client:
    """A viser client without a browser: a WebSocket that reports its camera once (so the server
    counts it as connected) and keeps every camera message the server sends it."""

    def __init__(self, port, position, look_at):
        import viser
        from viser import _messages
        self.received = []              # (message type name, its fields)
        self._done = threading.Event()
        self._ready = threading.Event()
        hello = _messages.ViewerCameraMessage(
            wxyz=(1.0, 0.0, 0.0, 0.0), position=tuple(position), fov=0.785, near=0.01, far=100.0,
            image_height=420, image_width=460, look_at=tuple(look_at), up_direction=(0.0, 0.0, 1.0))
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run(port, viser.__version__, hello)),
                                        daemon=True)
        self._thread.start()
        assert self._ready.wait(30), "the client did not connect"

    async def _run(self, port, version, hello):
        import msgspec
        import websockets
        import zstandard
        async with websockets.connect(f"ws://127.0.0.1:{port}", subprotocols=[f"viser-v{version}"],
                                      max_size=None) as ws:
            await ws.send(msgspec.msgpack.encode(hello.as_serializable_dict()))
            self._ready.set()
            while not self._done.is_set():
                try:
                    raw = await asyncio.wait_for(ws.recv(), 0.1)
                except asyncio.TimeoutError:
                    continue
                size, packed = int.from_bytes(raw[:8], "little"), int.from_bytes(raw[8:16], "little")
                inner = zstandard.ZstdDecompressor().decompress(raw[16:16 + packed], max_output_size=size)
                for m in msgspec.msgpack.decode(inner)["messages"]:
                    if m["type"] in ("SetCameraLookAtMessage", "SetCameraPositionMessage"):
                        self.received.append(m)

    def last(self, kind):
        found = [m for m in self.received if m["type"] == kind and not m.get("initial")]
        return np.array(found[-1]["look_at" if "LookAt" in kind else "position"]) if found else None

    def close(self):
        self._done.set()
        self._thread.join(10)


def test_the_followed_link_stays_at_the_clients_camera_target(standing):
    """A client connected with its camera at `eye` looking at `target`: choosing a link to
    follow (paused: no frame comes) sends it a camera looking at the link's origin, moved by
    the same offset (its direction and distance kept); the link moved (the hip bent) and a
    frame shown, its camera target is the link's new origin; following nothing, the camera
    stays where it is."""
    import time
    from mbsim_ros.view.panel import NONE
    session, view = standing
    sim = session.sim
    eye, target = np.array([2.0, -2.0, 1.5]), np.array([0.0, 0.0, 0.7])
    client = Client(view.server.get_port(), eye, target)
    try:
        deadline = time.monotonic() + 30
        while len(view.server.get_clients()) != 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(view.server.get_clients()) == 1

        def sent(ankle, what):
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                look_at, position = client.last("SetCameraLookAtMessage"), client.last("SetCameraPositionMessage")
                if look_at is not None and np.allclose(look_at, ankle, atol=1e-6):
                    return look_at, position
                time.sleep(0.02)
            raise AssertionError(f"{what}: the client's camera target is {look_at}, the ankle at {ankle}")
        ankle = sim.link_pose("LLEG_ANKLE_R")[:3, 3].copy()
        view.panel.follow_link.value = "LLEG_ANKLE_R"
        _, position = sent(ankle, "picked while paused")
        assert np.allclose(position, ankle + (eye - target), atol=1e-6)
        session.set_joint_positions({"LLEG_HIP_P": -0.5})
        show(view)
        moved = sim.link_pose("LLEG_ANKLE_R")[:3, 3].copy()
        assert np.linalg.norm(moved - ankle) > 0.1
        _, position = sent(moved, "after the link moved")
        assert np.allclose(position, moved + (eye - target), atol=1e-6)
        view.panel.follow_link.value = NONE
        count = len(client.received)
        session.set_joint_positions({"LLEG_HIP_P": 0.0})
        show(view)
        time.sleep(0.3)
        assert len(client.received) == count, "the camera moved while following nothing"
    finally:
        client.close()
