"""The sim_node's `view` and `foxglove` parameters (ros2 run mbsim_ros sim_node, whose entry
point is mbsim_ros.cli:sim_node; launch: view:=true foxglove:=true): one node serves the live
view's page at view_host:view_port and every topic over the Foxglove protocol at
foxglove_host:foxglove_port, and says both URLs in its log. The page's Pause stops /clock as a
real rclpy subscriber in this process sees it, Play starts it again; a Foxglove client gets the
node's joint_states (decoded by rosbags' own typestore). A port in use ends the node with one
error line and status 2."""
import os
import socket
import subprocess
import sys
import time

import pytest
from conftest import fetch_page, free_port, ROS_MISSING

if ROS_MISSING:
    pytest.skip(ROS_MISSING, allow_module_level=True)
from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from rclpy_probe import REPO, Output, Probe, child_env, stop_node  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "view"))
from browser import missing as browser_missing  # noqa: E402

ENTRY = "import sys; from mbsim_ros.cli import sim_node; sys.exit(sim_node())"
NS = "viewtest"



def start(*params):
    args = [sys.executable, "-c", ENTRY, "--ros-args", "-r", f"__ns:=/{NS}"]
    for p in params:
        args += ["-p", p]
    return subprocess.Popen(args, cwd=REPO, env=child_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


@pytest.fixture(scope="module")
def node():
    view_port, foxglove_port = free_port(), free_port()
    proc = start("view:=true", f"view_port:={view_port}", "foxglove:=true", f"foxglove_port:={foxglove_port}")
    out = Output(proc)
    try:
        try:
            page = fetch_page(f"http://127.0.0.1:{view_port}", proc, 600)
        except AssertionError as e:
            raise AssertionError(f"{e}\n{out.text[-3000:]}") from None
        # both servers listen before the world loads: the run is on once /clock comes
        probe = Probe("view_clock_probe")
        try:
            # best effort, as rclcpp::ClockQoS: a RELIABLE reader never matches the /clock writer
            probe.subscribe("/clock", "rosgraph_msgs/msg/Clock",
                            QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT))
            probe.wait("the node's first /clock", lambda: probe.sim_time() is not None, 600.0, proc=proc)
            yield dict(proc=proc, out=out, page=page, view_port=view_port, foxglove_port=foxglove_port,
                       probe=probe)
        finally:
            probe.close()
    finally:
        stop_node(proc, out, timeout=120)


def test_the_node_serves_the_view_and_foxglove_when_asked(node):
    assert "viser" in node["page"].lower()
    text = lambda: node["out"].text          # noqa: E731
    deadline = time.monotonic() + 60
    while not (f"view: http://127.0.0.1:{node['view_port']}" in text()
               and f"foxglove: ws://127.0.0.1:{node['foxglove_port']}" in text()):
        assert time.monotonic() < deadline, text()[-3000:]
        time.sleep(0.2)


def test_a_foxglove_client_gets_the_nodes_joint_states(node):
    from rosbags.typesys import Stores, get_typestore
    from test_foxglove import Client
    from mbsim_ros.ros import messages as m
    c = Client(f"ws://127.0.0.1:{node['foxglove_port']}", "foxglove.websocket.v1")
    try:
        topic = f"/{NS}/joint_states"
        deadline = time.monotonic() + 30
        while topic not in c.channels:       # (advertised as the node makes its publishers)
            assert time.monotonic() < deadline, sorted(c.channels)
            c.frames(0.5)
        assert c.channels[topic]["schemaName"] == m.JOINT_STATE
        c.subscribe({1: topic})
        got, _ = c.frames(2.0)
    finally:
        c.close()
    store = get_typestore(Stores.ROS2_JAZZY)
    states = [store.deserialize_cdr(p, m.JOINT_STATE) for sid, _, p in got if sid == 1]
    assert len(states) > 5 and "RARM_SHOULDER_P" in states[0].name
    assert len(states[0].position) == len(states[0].name)


@pytest.mark.skipif(browser_missing() is not None, reason=str(browser_missing()))
def test_the_pages_pause_stops_clock_and_play_starts_it(node):
    """The page's Pause button: /clock (rclpy, this process) stops advancing (a whole second
    with no newer stamp); Play: it advances again."""
    from browser import browser, button, dismiss_notifications, press, wait_for
    probe = node["probe"]
    driver = browser()
    try:
        probe.wait_sim(0.2)
        driver.get(f"http://127.0.0.1:{node['view_port']}")
        wait_for(lambda: button(driver, "Pause"), "the panel's Pause button")
        dismiss_notifications(driver)
        press(driver, "Pause")
        wait_for(lambda: button(driver, "Play"), "the button to read Play")
        t_paused = None
        for _ in range(30):               # the last messages of the run may still be on their way
            t = probe.sim_time()
            time.sleep(1.0)
            if probe.sim_time() == t:
                t_paused = t
                break
        assert t_paused is not None, f"/clock still advancing 30 s after Pause: {probe.sim_time()}"
        press(driver, "Play")
        probe.wait("/clock to advance after Play", lambda: probe.sim_time() > t_paused + 0.1, 60.0,
                   proc=node["proc"])
    finally:
        driver.quit()


@pytest.mark.parametrize("which", ["view", "foxglove"])
def test_a_port_in_use_ends_the_node_with_status_2(which):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    try:
        proc = start(f"{which}:=true", f"{which}_port:={port}")
        text, _ = proc.communicate(timeout=300)
    finally:
        taken.close()
    assert proc.returncode == 2, text
    errors = [line for line in text.splitlines() if "ERROR" in line]
    expected = f"--view-port {port}: already in use" if which == "view" else f"cannot listen on ws://127.0.0.1:{port}"
    assert len(errors) == 1 and expected in errors[0], text
