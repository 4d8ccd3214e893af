"""The view without a browser: binding errors, the scene built from a model, poses sent only
for links that moved, the snapshot mailbox (bounded, drops counted), a client that never reads."""
import os
import sys
import threading
import time

import numpy as np
import pytest
from conftest import free_port

sys.path.insert(0, os.path.dirname(__file__))

import mbsim_ros as mb  # noqa: E402
from mbsim_ros.model.transforms import matrix_to_quat, rpy_to_matrix  # noqa: E402
from mbsim_ros.view import ViewError, start_server, stop_server  # noqa: E402
from mbsim_ros.view.scene import WorldScene, model_links, shape_mesh, wxyz_array  # noqa: E402



@pytest.fixture
def server():
    s = start_server("127.0.0.1", free_port())
    yield s
    stop_server(s)


def sr1_world():
    from mbsim_ros.run.world import DEFAULT_WORLD, load_models
    return load_models(DEFAULT_WORLD)[0]


def test_a_port_in_use_is_an_error_not_another_port(server):
    port = server.get_port()
    with pytest.raises(ViewError, match=f"--view-port {port}: already in use"):
        start_server("127.0.0.1", port)


@pytest.mark.parametrize("host, expected", [("192.0.2.1", "--view-host 192.0.2.1: cannot listen there"),
                                            ("no-such-host.invalid", "--view-host no-such-host.invalid: not a host")])
def test_a_host_that_cannot_be_bound_is_an_error(host, expected):
    with pytest.raises(ViewError, match=expected):
        start_server(host, free_port())


def test_a_non_loopback_host_says_so():
    lines = []
    s = start_server("0.0.0.0", free_port(), log=lines.append)
    stop_server(s)
    assert len(lines) == 1 and "reachable from other machines" in lines[0]
    s = start_server("127.0.0.1", free_port(), log=lines.append)
    stop_server(s)
    assert len(lines) == 1


def test_quaternions_match_the_model_layer():
    rng = np.random.default_rng(1)
    R = np.array([rpy_to_matrix(rng.uniform(-3, 3, 3)) for _ in range(200)] + [np.diag([1.0, -1, -1]), np.diag([-1.0, 1, -1])])
    q = wxyz_array(R)
    ref = np.array([np.r_[x[3], x[:3]] for x in map(matrix_to_quat, R)])
    same = np.minimum(np.abs(q - ref).max(1), np.abs(q + ref).max(1))    # q and -q: one rotation
    assert same.max() < 1e-7


def test_scene_has_every_shape_of_the_world(server):
    models = sr1_world()
    links = model_links(models)
    scene = WorldScene(server.scene, links)
    drawn = sum(1 for _, link in links for s in (link.visuals or link.collisions) if shape_mesh(s) is not None)
    collisions = sum(1 for _, link in links for s in link.collisions if shape_mesh(s) is not None)
    visuals = [n for n in scene.shape_nodes() if "/visual/" in n.name]
    assert len(visuals) == drawn > 40
    assert len(scene.shape_nodes()) - len(visuals) == collisions
    assert all(not n.visible for n in scene.shape_nodes() if "/collision/" in n.name)
    scene.show(collision=True, visual=False)
    assert all(n.visible == ("/collision/" in n.name) for n in scene.shape_nodes())


def test_primitives_are_the_renderers_tessellation():
    from mbsim_ros.model import Shape
    from mbsim_ros.render import tessellate
    V, F = shape_mesh(Shape("cylinder", radius=0.1, length=0.4))
    Vr, Fr = tessellate("cylinder", np.array([0.1, 0.2, 0.0]), 32)
    assert np.array_equal(V, Vr) and np.array_equal(F, Fr)
    V, _ = shape_mesh(Shape("box", size=[0.2, 0.4, 0.6]))
    assert np.allclose(V.max(0), [0.1, 0.2, 0.3])
    assert shape_mesh(Shape("mesh", mesh_path="missing.stl")) is None


def test_only_links_that_moved_are_sent(server):
    models = sr1_world()
    sim = mb.Simulation(models, dt=0.001)
    scene = WorldScene(server.scene, model_links(models, lambda i, bare: sim.names.world(sim.entities[i], "link", bare)))
    R, p = sim.link_poses()
    n = len(scene.link_names)
    assert scene.set_link_poses(R, p) == n            # the first frame: all
    assert scene.set_link_poses(R, p) == 0            # nothing moved
    p2 = p.copy()
    p2[3, 2] += 0.01
    assert scene.set_link_poses(R, p2) == 1
    k = scene.link_names.index(sim.compiled.link_names[3])
    assert np.allclose(server.scene._handle_from_node_name[f"/world/links/{k}"].position, p2[3]) \
        if hasattr(server.scene, "_handle_from_node_name") else True


class Session:
    """Enough of a Session for LiveView.start: the sim and the control names."""

    def __init__(self, sim):
        self.sim = sim
        self.paused = True
        self.running = False
        from mbsim_ros.run.config import RunConfig
        self.config = RunConfig()

    def between_steps(self, fn):
        return fn()

    def stats(self, last=None):
        return {}


def test_snapshots_wait_in_a_one_slot_mailbox_and_drops_are_counted():
    from mbsim_ros.view.live import LiveView
    models = sr1_world()
    sim = mb.Simulation(models, dt=0.001)
    view = LiveView(port=free_port(), rate=1e9)      # a snapshot at every step
    view.start(Session(sim))
    try:
        view._stop.set()          # the view's thread stops: nobody takes the snapshots
        view._wake.set()
        view._thread.join()
        taken, dropped, waiting = view.frames_taken, view.frames_dropped, view._latest is not None
        for _ in range(50):
            sim.step()
            view.on_step(sim)
        assert view.frames_taken == taken + 50
        assert view.frames_dropped == dropped + 50 - (0 if waiting else 1)   # all but the newest, untaken
        assert view._latest.t == pytest.approx(sim.t)
    finally:
        stop_server(view.server)


def test_a_client_that_never_reads_holds_a_bounded_backlog():
    """A raw WebSocket client that connects and then reads nothing while 600 frames go out:
    the messages the server holds (the shared buffer and the client's own) do not grow from
    frame 300 to frame 600 (viser keeps the newest update per node property; the first frames
    add nodes as contacts and sensor readings first appear)."""
    import asyncio
    import websockets
    from mbsim_ros.view.live import LiveView, Snapshot
    models = sr1_world()
    sim = mb.Simulation(models, dt=0.001)
    port = free_port()
    view = LiveView(port=port)
    session = Session(sim)
    session.paused = False       # (paused, the joint sliders follow q: one more held value per slider)
    view.start(session)
    connected = threading.Event()
    stop = threading.Event()

    def client():
        async def go():
            async with websockets.connect(f"ws://127.0.0.1:{port}", subprotocols=["viser-v" + __import__("viser").__version__],
                                          max_size=None, max_queue=1) as ws:
                connected.set()
                while not stop.is_set():
                    await asyncio.sleep(0.05)        # never reads
        try:
            asyncio.run(go())
        except Exception:
            connected.set()
    thread = threading.Thread(target=client, daemon=True)
    thread.start()
    try:
        connected.wait(30)
        ws = view.server._websock_server

        def held():
            buffers = [ws._broadcast_buffer] + [c.message_buffer for c in ws._client_state_from_id.values()]
            return sum(len(b.message_from_id) for b in buffers)
        for frame in range(600):
            sim.step(5)
            view._push(Snapshot(sim, 0))
            if frame == 300:
                time.sleep(0.5)
                early = held()
        time.sleep(0.5)
        assert ws._client_state_from_id, "the client never connected"
        assert held() <= early + 5, f"held messages grew from {early} to {held()} for a client that reads nothing"
    finally:
        stop.set()
        view.close()


@pytest.fixture
def paused_session():
    """A run.Session of the bundled world with a LiveView, paused and not running (controls run
    here and now), the view's thread stopped so the test pushes the frames itself."""
    from bundled import session_with_view
    session, view, _ = session_with_view(view_thread=False)
    yield session, view
    session.close()


def _frame(view):
    view.on_reset(view.session.sim)
    snap, view._latest = view._latest, None
    view._push(snap)


def test_joint_slider_moves_the_joint_while_paused(paused_session):
    session, view = paused_session
    name = view.world.joints[3][0]
    view.panel._joint_moved(name, 0.3)
    iq = view.world.joints[3][1]
    assert session.sim.q[iq] == pytest.approx(0.3)
    _frame(view)
    assert view.history[-1][2][iq] == pytest.approx(0.3)


def test_clicking_a_link_names_it_and_its_pose(paused_session):
    session, view = paused_session
    _frame(view)
    node = next(n for n in view.scene.shape_nodes() if view.scene.node_link[n.name] == "WAIST")
    view.panel._clicked(type("Event", (), {"target": node})())
    p = session.sim.link_pose("WAIST")[:3, 3]
    assert "**WAIST**" in view.panel.picked.content
    assert f"{p[2]:+.3f}" in view.panel.picked.content
    assert view.panel.push_link.value == "WAIST"


def test_spawn_adds_the_model_to_the_scene(paused_session, tmp_path):
    session, view = paused_session
    before = len(view.scene.link_names)
    path = tmp_path / "box.urdf"
    path.write_text('<robot name="crate"><link name="crate_body"><inertial><mass value="1"/>'
                    '<inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial>'
                    '<visual><geometry><box size="0.2 0.2 0.2"/></geometry></visual></link></robot>')
    view.panel.spawn_path.value = str(path)
    view.panel._spawn()
    assert view.panel.spawn_status.content == "Spawned **crate**."
    _frame(view)
    assert len(view.scene.link_names) == before + 1 and "crate_body" in view.scene.link_names
    view.panel.spawn_path.value = str(tmp_path / "missing.urdf")
    view.panel._spawn()
    assert view.panel.spawn_status.content.startswith("Not spawned: ")
