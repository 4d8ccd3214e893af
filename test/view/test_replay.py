"""`mbsim view BAG`: a recorded bag replayed on the view's page. The bag is the project's own
(`mbsim run --bag`) of SR1 falling freely (no ground), so every link moves metres in a second
and the pose at a time is known from outside the replay code: the bag's /tf decoded by rosbags'
own typestore here, and free fall (z0 - g t^2 / 2) for the waist."""
import os
import sys
import time

import numpy as np
import pytest
from conftest import free_port

sys.path.insert(0, os.path.dirname(__file__))

from mbsim_ros import cli  # noqa: E402

G = 9.80665
DURATION = 0.4      # s of falling: 0.8 m, inside the initial camera's framing



@pytest.fixture(scope="module")
def bag(tmp_path_factory):
    path = tmp_path_factory.mktemp("replay") / "falling"
    assert cli.main(["run", str(_sr1()), "--no-ground", "--duration", str(DURATION),
                     "--rtf", "0", "--transport", "none", "--quiet", "--bag", str(path)]) == 0
    return path


def _sr1():
    from mbsim_ros.run.world import DEFAULT_WORLD
    return [p for p in DEFAULT_WORLD if p.endswith("SR1_range.wrl")][0]


@pytest.fixture(scope="module")
def replay(bag):
    from mbsim_ros.ros.recording import read_recording
    from mbsim_ros.view.replay import ReplayView
    rec = read_recording(bag)
    view = ReplayView(rec, port=free_port())
    yield view
    view.close()
    rec.close()


def _tf_from_rosbags(bag, t_ns):
    """{frame: 4x4 in 'world'} and the /tf message's time, from rosbags' own reader and typestore."""
    from rosbags.rosbag2 import Reader
    from rosbags.typesys import Stores, get_typestore
    from scipy.spatial.transform import Rotation
    store = get_typestore(Stores.ROS2_JAZZY)
    edges, stamp = {}, None
    with Reader(bag) as r:
        for conn, t, raw in r.messages(connections=[c for c in r.connections if c.topic in ("/tf", "/tf_static")]):
            if conn.topic == "/tf" and t > t_ns:
                continue
            m = store.deserialize_cdr(raw, conn.msgtype)
            if conn.topic == "/tf":
                stamp = max(stamp or 0, t)
            for tr in m.transforms:
                T = np.eye(4)
                q = tr.transform.rotation
                T[:3, :3] = Rotation.from_quat([q.x, q.y, q.z, q.w]).as_matrix()
                T[:3, 3] = [tr.transform.translation.x, tr.transform.translation.y, tr.transform.translation.z]
                edges[tr.child_frame_id] = (tr.header.frame_id, T)

    def world(frame):
        if frame not in edges:
            return np.eye(4)
        parent, T = edges[frame]
        return world(parent) @ T
    return {f: world(f) for f in edges}, stamp


def test_scrubbing_shows_the_pose_recorded_at_that_time(bag, replay):
    assert replay.notes == [] and replay.unposed == []
    z0 = None
    for t in (0.0, 0.15, 0.3, DURATION):
        replay.seek(t)
        truth, stamp = _tf_from_rosbags(bag, replay.rec.start_ns + int(round(t * 1e9)))
        for link in ("WAIST", "CHEST", "RARM_WRIST_R", "LLEG_ANKLE_R"):
            assert np.allclose(replay.link_pose(link), truth[link], atol=1e-9), (t, link)
        z = replay.link_pose("WAIST")[2, 3]
        z0 = z if z0 is None else z0
        # free fall of the whole (held) body from rest; semi-implicit Euler at dt = 1 ms is ahead
        # of the exact parabola by g t dt at most (4 mm at 0.4 s)
        ts = (stamp - replay.rec.start_ns) * 1e-9
        assert abs(z - (z0 - 0.5 * G * ts * ts)) < G * max(ts, 0.001) * 0.001 + 1e-6, (t, z, ts)
    assert z0 - replay.link_pose("WAIST")[2, 3] > 0.7      # it fell: the scrub moved the robot


def test_images_and_plots_follow_the_time(bag, replay):
    from rosbags.rosbag2 import Reader
    from rosbags.typesys import Stores, get_typestore
    store = get_typestore(Stores.ROS2_JAZZY)
    replay.seek(0.2)
    t_ns = replay.rec.start_ns + int(0.2e9)
    topic = "/SR1/LeftCamera/image_raw"
    with Reader(bag) as r:
        newest = None
        for conn, t, raw in r.messages(connections=[c for c in r.connections if c.topic == topic]):
            if t <= t_ns:
                newest = store.deserialize_cdr(raw, conn.msgtype)
    expected = np.asarray(newest.data, np.uint8).reshape(newest.height, newest.width, 3)
    shown = np.asarray(replay._images[topic].image)
    assert shown.shape == expected.shape and np.array_equal(shown, expected)
    replay.plot_joint.value = "RARM_SHOULDER_P"
    replay._update_panel(force=True)
    x, y = replay._plots["position"].data
    assert x[-1] <= 0.2 + 1e-9 and x[-1] > 0.15 and len(x) == len(y) > 10


def test_a_bag_without_robot_description_shows_tf_frames_and_says_so(tmp_path, bag):
    """A bag made by rosbags' writer with /tf only (no robot_description)."""
    from rosbags.rosbag2 import Reader, Writer
    from rosbags.typesys import Stores, get_typestore
    from mbsim_ros.ros.recording import read_recording
    from mbsim_ros.view.replay import ReplayView
    store = get_typestore(Stores.ROS2_JAZZY)
    out = tmp_path / "tf_only"
    with Reader(bag) as r, Writer(out, version=8) as w:
        conns = {}
        for c in r.connections:
            if c.topic in ("/tf", "/tf_static"):
                conns[c.topic] = w.add_connection(c.topic, c.msgtype, typestore=store)
        for c, t, raw in r.messages(connections=[c for c in r.connections if c.topic in conns]):
            w.write(conns[c.topic], t, raw)
    rec = read_recording(out)
    view = ReplayView(rec, port=free_port())
    try:
        assert any("no robot_description" in n for n in view.notes)
        view.seek(0.3)
        truth, _ = _tf_from_rosbags(bag, rec.start_ns + int(0.3e9))
        node = view._tf_nodes["WAIST"]
        assert np.allclose(node.position, truth["WAIST"][:3, 3], atol=1e-6)
    finally:
        view.close()
        rec.close()


@pytest.mark.parametrize("what", ["folder", "file"])
def test_a_bag_that_is_not_a_bag_is_one_line_and_exit_2(tmp_path, capsys, what):
    target = tmp_path / "x.mcap"
    if what == "file":
        target.write_bytes(b"not an mcap file")
    else:
        target = tmp_path
    assert cli.main(["view", str(target)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"mbsim: view: {target}") and "bag" in err[0]


def test_the_browser_draws_the_robot_where_it_was_at_the_chosen_time(bag, replay):
    """Headless Chromium: at two times of the fall, the robot's pixels on the page (with minus
    without its visual nodes) overlap the project's own renderer's silhouette of the URDF at
    the link poses decoded from the bag at that time, from the page's camera (IoU > 0.8, as the
    live view's test: anti-aliasing and tessellation are the differences); and the two times'
    silhouettes differ, so the match is the time's own."""
    from browser import browser, canvas_size, dismiss_notifications, missing, screenshot, wait_for
    if missing():
        pytest.skip(missing())
    from mbsim_ros.render import look_at, render
    from mbsim_ros.render.scene import Scene
    from mbsim_ros.view.panel import FOV
    driver = browser()
    try:
        driver.get(replay.url)
        wait_for(lambda: len(replay.server.get_clients()) >= 1, "the page to connect")
        time.sleep(2.0)
        dismiss_notifications(driver)
        left, top, width, height = canvas_size(driver)
        eye, target = replay.server.initial_camera.position, replay.server.initial_camera.look_at
        names = [n for n, _ in replay.links]
        masks = []
        for t in (0.0, DURATION):
            replay.seek(t)
            truth, _ = _tf_from_rosbags(bag, replay.rec.start_ns + int(round(t * 1e9)))
            scene = Scene(replay.models, names)
            scene.set_link_poses(np.array([truth[n][:3, :3] for n in names]), np.array([truth[n][:3, 3] for n in names]))
            _, depth = render(scene, look_at(eye, target), width, height, FOV, 0.01, np.inf)
            silhouette = np.isfinite(depth)
            for _ in range(5):      # the page may draw the seek's poses a few frames late under load
                mask = _robot_mask(replay, driver)[top:top + height, left:left + width]
                iou = (mask & silhouette).sum() / (mask | silhouette).sum()
                if iou > 0.8:
                    break
            assert iou > 0.8, (f"t = {t}: robot pixels vs the renderer's silhouette at that time: IoU {iou:.3f} "
                               f"(the replay is at t = {replay.t:.3f} s)")
            masks.append(silhouette)
            if t == DURATION and os.environ.get("MBSIM_REPLAY_SCREENSHOT"):
                from PIL import Image
                Image.fromarray(screenshot(driver)).save(os.environ["MBSIM_REPLAY_SCREENSHOT"])
        overlap = (masks[0] & masks[1]).sum() / (masks[0] | masks[1]).sum()
        assert overlap < 0.6, f"the robot hardly moved on the page between the two times ({overlap:.2f})"
    finally:
        driver.quit()


def _robot_mask(replay, driver):
    from browser import screenshot
    nodes = [n for n in replay.world.shape_nodes() if "/visual/" in n.name]
    for _ in range(6):
        time.sleep(1.5)
        shown = screenshot(driver)
        replay.world.show(visual=False)
        time.sleep(1.5)
        hidden = screenshot(driver)
        replay.world.show(visual=True)
        mask = np.abs(shown.astype(int) - hidden.astype(int)).sum(axis=2) > 40
        if mask.sum() > 2000 and nodes:
            return mask
    raise AssertionError(f"the robot's pixels never showed: {mask.sum()} pixels differ with it hidden")
