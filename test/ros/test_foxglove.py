"""The Foxglove WebSocket transport, checked by a client written here from the protocol's spec
(foxglove/ws-protocol docs/spec.md), under both subprotocol names, with rosbags' own typestore
and mcap_ros2's decoder (which reads the advertised schema text as Foxglove does) as the
independent readers of what arrives."""
import json
import re
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import PipeText, subprocess_env

pytest.importorskip("websockets")
from websockets.sync.client import connect  # noqa: E402

from mbsim_ros import cli  # noqa: E402
from mbsim_ros.ros import messages as m  # noqa: E402
from mbsim_ros.ros import qos  # noqa: E402
from mbsim_ros.ros.foxglove import SUBPROTOCOLS, FoxgloveTransport  # noqa: E402
from mbsim_ros.run.network import is_loopback  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
STARTUP = 900.0      # s: a cold numba cache compiles the kernels for minutes on a shared machine


def _reader_typestore():
    from rosbags.typesys import Stores, get_typestore
    return get_typestore(Stores.ROS2_JAZZY)      # rosbags' own, not the project's TYPESTORE


def _foxglove_decoder(channel):
    """mcap_ros2's decoder for a channel, made from its advertised schema text alone."""
    from mcap.records import Schema
    from mcap_ros2.decoder import DecoderFactory
    schema = Schema(id=1, name=channel["schemaName"], encoding=channel["schemaEncoding"],
                    data=channel["schema"].encode())
    return DecoderFactory().decoder_for(channel["encoding"], schema)


class Client:
    """A Foxglove protocol client: the server's JSON messages by op, its binary frames decoded."""

    def __init__(self, url, subprotocol):
        self.ws = connect(url, subprotocols=[subprotocol], max_size=None)
        assert self.ws.subprotocol == subprotocol
        self.info = json.loads(self.ws.recv(timeout=10))
        self.channels = {}
        self.statuses = []
        self._read_json(json.loads(self.ws.recv(timeout=10)))

    def _read_json(self, msg):
        if msg["op"] == "advertise":
            for c in msg["channels"]:
                self.channels[c["topic"]] = c
        elif msg["op"] == "status":
            self.statuses.append(msg)

    def subscribe(self, pairs):
        """pairs: {subscription id: topic}."""
        self.ws.send(json.dumps({"op": "subscribe", "subscriptions": [
            {"id": sid, "channelId": self.channels[topic]["id"]} for sid, topic in pairs.items()]}))

    def frames(self, seconds):
        """(message data [(subscription id, time ns, payload)], times [ns]) received within seconds."""
        data, times = [], []
        self.ahead_of_clock = []        # stamps of messages that came before a Time at least theirs
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                f = self.ws.recv(timeout=max(0.01, deadline - time.monotonic()))
            except TimeoutError:
                break
            if isinstance(f, str):
                self._read_json(json.loads(f))
            elif f[0] == 1:
                sid, stamp = struct.unpack_from("<IQ", f, 1)
                data.append((sid, stamp, f[13:]))
                if stamp > max(times, default=0):
                    self.ahead_of_clock.append(stamp)
            elif f[0] == 2:
                times.append(struct.unpack_from("<Q", f, 1)[0])
            else:
                pytest.fail(f"unknown binary opcode {f[0]}")
        return data, times

    def close(self):
        self.ws.close()


@pytest.fixture
def server():
    t = FoxgloveTransport(port=0)
    yield t
    t.close()


@pytest.mark.parametrize("subprotocol", SUBPROTOCOLS)
def test_channels_schemas_and_lazy_delivery_in_process(server, subprotocol):
    js = server.advertise("/robot/joint_states", m.JOINT_STATE)
    imu = server.advertise("/robot/imu", m.IMU, qos.SENSOR)
    desc = server.advertise("/robot/robot_description", m.STRING, qos.LATCHED)
    server.publish(desc, m.string("<robot name='r'/>"), 0)     # before any client: kept for late ones
    c = Client(server.url, subprotocol)
    try:
        assert c.info["op"] == "serverInfo" and "time" in c.info["capabilities"]
        assert set(c.channels) == {"/robot/joint_states", "/robot/imu", "/robot/robot_description"}
        ch = c.channels["/robot/joint_states"]
        assert (ch["encoding"], ch["schemaName"], ch["schemaEncoding"]) == ("cdr", m.JOINT_STATE, "ros2msg")
        # the schema is the message definition with its dependencies, as rosbag2 writes it
        assert ch["schema"].startswith("std_msgs/Header header\nstring[] name\nfloat64[] position\n")
        assert "\nMSG: std_msgs/Header\n" in ch["schema"] and "\nMSG: builtin_interfaces/Time\n" in ch["schema"]
        # nothing subscribed: nothing sent, and the bridge is told nobody reads
        assert server.subscriber_count(js) == 0
        server.publish(js, m.joint_state(0.5, ["a"], [1.0]), 500_000_000)
        got, _ = c.frames(0.3)
        assert got == []
        c.subscribe({7: "/robot/joint_states", 8: "/robot/robot_description"})
        deadline = time.monotonic() + 5
        while server.subscriber_count(js) == 0:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert server.subscriber_count(imu) == 0
        server.publish(js, m.joint_state(1.25, ["a", "b"], [0.5, -2.0], [1.0, 2.0], [3.0, 4.0]), 1_250_000_000)
        server.publish(imu, m.imu(1.25, "imu", (0, 0, 9.8), (0, 0, 0)), 1_250_000_000)
        got, times = c.frames(1.0)
        by_sid = {sid: (stamp, payload) for sid, stamp, payload in got}
        assert set(by_sid) == {7, 8}, "a message on a channel without a subscription"
        assert max(times) == 1_250_000_000                     # the server's clock: message times
        stamp, payload = by_sid[7]
        assert stamp == 1_250_000_000
        decoded = _reader_typestore().deserialize_cdr(payload, m.JOINT_STATE)
        assert decoded.name == ["a", "b"] and decoded.position.tolist() == [0.5, -2.0]
        assert decoded.header.stamp.sec == 1 and decoded.header.stamp.nanosec == 250_000_000
        # what Foxglove does: a decoder generated from the advertised schema text
        dyn = _foxglove_decoder(ch)(payload)
        assert list(dyn.name) == ["a", "b"] and list(dyn.effort) == [3.0, 4.0]
        desc_msg = _foxglove_decoder(c.channels["/robot/robot_description"])(by_sid[8][1])
        assert desc_msg.data == "<robot name='r'/>"
        assert server.stats()["/robot/imu"]["messages"] == 1 and server.stats()["/robot/imu"]["dropped"] == 0
    finally:
        c.close()
    deadline = time.monotonic() + 5
    while server.subscriber_count(js):           # a client that leaves unsubscribes everything
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_a_channel_advertised_later_reaches_connected_clients_and_unadvertise_too(server):
    c = Client(server.url, SUBPROTOCOLS[0])
    try:
        h = server.advertise("/spawned/imu", m.IMU, qos.SENSOR)
        c.frames(0.3)
        assert "/spawned/imu" in c.channels
        cid = c.channels["/spawned/imu"]["id"]
        server.unadvertise(h)
        f = json.loads(c.ws.recv(timeout=5))
        assert f == {"op": "unadvertise", "channelIds": [cid]}
    finally:
        c.close()


def test_a_client_that_does_not_read_is_dropped_not_waited_for(server):
    """Publishing to a client that stopped reading never blocks; its queue stays bounded and the
    drops are counted, per topic and per client."""
    server.queue_bytes = 4 << 20
    big = server.advertise("/big", m.STRING)
    c = Client(server.url, SUBPROTOCOLS[1])
    try:
        c.subscribe({1: "/big"})
        deadline = time.monotonic() + 5
        while server.subscriber_count(big) == 0:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        payload = m.string("x" * (1 << 20))
        for k in range(300):                       # 300 MB to a client that reads nothing
            server.publish(big, payload, k)
        time.sleep(0.5)
        dropped = server.stats()["/big"]["dropped"]
        assert dropped > 0 and server.client_drops() == [dropped]
        client = server._clients[0]
        assert client.queued_bytes <= server.queue_bytes + len(payload) + 13
        # what was not dropped is either queued or went into the socket's and the kernel's buffers
        assert server.stats()["/big"]["messages"] == 300
    finally:
        c.close()


def test_a_client_publishes_to_a_topic_the_simulation_subscribes(server):
    got = []
    server.subscribe("/robot/joint_commands", m.JOINT_STATE, got.append)
    c = Client(server.url, SUBPROTOCOLS[0])
    try:
        assert "clientPublish" in c.info["capabilities"] and c.info["supportedEncodings"] == ["cdr"]
        c.ws.send(json.dumps({"op": "advertise", "channels": [
            {"id": 3, "topic": "/robot/joint_commands", "encoding": "cdr", "schemaName": m.JOINT_STATE},
            {"id": 4, "topic": "/robot/joint_commands", "encoding": "cdr", "schemaName": m.IMU}]}))
        cmd = m.joint_state(0.0, ["a"], [0.3])
        c.ws.send(struct.pack("<BI", 1, 3) + cmd)
        c.ws.send(struct.pack("<BI", 1, 4) + cmd)            # the wrong type: refused, said why
        c.frames(0.5)
        assert got == [cmd]
        assert [s["level"] for s in c.statuses] == [2] and m.IMU in c.statuses[0]["message"]
    finally:
        c.close()


def test_a_client_offering_neither_subprotocol_is_refused(server):
    from websockets.exceptions import InvalidStatus
    with pytest.raises(InvalidStatus) as e:
        connect(server.url, subprotocols=["something.else"])
    assert e.value.response.status_code == 400


def test_loopback_hosts():
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.5") and not is_loopback("example.org")


def test_the_run_line_says_when_the_server_is_not_for_this_machine_only(capsys):
    class Served:
        kind, host, port, url = "foxglove", "0.0.0.0", 8765, "ws://0.0.0.0:8765"
    assert cli._live_topics(Served()) == "topics for Foxglove / Lichtblick on ws://0.0.0.0:8765"
    err = capsys.readouterr().err
    assert "listens on 0.0.0.0, not this machine only" in err and len(err.strip().splitlines()) == 1


def _one_line_exit_2(argv, capsys):
    status = cli.main(argv)
    err = capsys.readouterr().err
    assert status == 2
    lines = err.strip().splitlines()
    assert len(lines) >= 1 and "Traceback" not in err
    return lines[-1]


def test_a_port_in_use_is_one_line_and_exit_2(capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        line = _one_line_exit_2(["run", "--duration", "0.01", "--quiet", "--rtf", "0", "--transport", "foxglove",
                                 "--foxglove-port", str(port)], capsys)
    assert line.startswith(f"mbsim: foxglove: cannot listen on ws://127.0.0.1:{port}: ") and "in use" in line


@pytest.mark.parametrize("host", ["192.0.2.1", "no-such-host.invalid"])
def test_a_host_that_cannot_be_bound_is_one_line_and_exit_2(capsys, host):
    line = _one_line_exit_2(["run", "--duration", "0.01", "--quiet", "--rtf", "0", "--transport", "foxglove",
                             "--foxglove-host", host, "--foxglove-port", "0"], capsys)
    assert line.startswith(f"mbsim: foxglove: cannot listen on ws://{host}:0: ")


def test_foxglove_options_without_the_transport_are_refused(capsys):
    line = _one_line_exit_2(["run", "--transport", "none", "--foxglove-port", "9000"], capsys)
    assert "--foxglove-port and --foxglove-host are options of --transport foxglove" in line
    line = _one_line_exit_2(["run", "--transport", "foxglove", "--foxglove-port", "70000"], capsys)
    assert "--foxglove-port 70000 is not a TCP port" in line


# -- end to end: `mbsim run --transport foxglove --bag` in a second process ---------------------

@pytest.mark.parametrize("subprotocol", SUBPROTOCOLS)
def test_mbsim_run_serves_joint_states_and_camera_images_to_a_foxglove_client(tmp_path, subprotocol):
    from rosbags.rosbag2 import Reader
    bag = tmp_path / "bag"
    proc = subprocess.Popen([sys.executable, "-m", "mbsim_ros.cli", "run", "--rtf", "1", "--duration", "60",
                             "--quiet", "--transport", "foxglove", "--foxglove-port", "0", "--bag", str(bag)],
                            cwd=REPO, env=subprocess_env(PYTHONPATH=REPO, PYTHONUNBUFFERED=1),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = PipeText(proc.stdout), PipeText(proc.stderr)
    c = None
    try:
        deadline = time.monotonic() + STARTUP
        while not (found := re.search(r"topics for Foxglove / Lichtblick on (ws://127\.0\.0\.1:\d+)", out.text)):
            assert proc.poll() is None, f"mbsim run ended ({proc.returncode}): {err.text[-3000:]}"
            assert time.monotonic() < deadline, f"no run line within {STARTUP:g} s: {err.text[-3000:]}"
            time.sleep(0.05)
        c = Client(found.group(1), subprotocol)
        for topic, typename in [("/SR1/joint_states", m.JOINT_STATE), ("/SR1/LeftCamera/image_raw", m.IMAGE),
                                ("/SR1/robot_description", m.STRING), ("/tf", m.TF_MESSAGE),
                                ("/tf_static", m.TF_MESSAGE), ("/clock", m.CLOCK)]:
            assert c.channels[topic]["schemaName"] == typename and c.channels[topic]["encoding"] == "cdr"
        c.subscribe({1: "/SR1/joint_states", 2: "/SR1/LeftCamera/image_raw", 3: "/SR1/robot_description"})
        got, times = c.frames(4.0)
        c_ahead = c.ahead_of_clock
        c.close()
        c = None
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=120) == 0, err.text[-3000:]
    finally:
        if c is not None:
            c.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out.thread.join(5)
    store = _reader_typestore()
    states = [store.deserialize_cdr(p, m.JOINT_STATE) for sid, _, p in got if sid == 1]
    images = [store.deserialize_cdr(p, m.IMAGE) for sid, _, p in got if sid == 2]
    descriptions = [store.deserialize_cdr(p, m.STRING).data for sid, _, p in got if sid == 3]
    assert {sid for sid, _, _ in got} == {1, 2, 3}
    # joint states: the model's joints, at increasing simulation times that the message times carry
    assert len(states) > 10 and "RARM_SHOULDER_P" in states[0].name and len(states[0].position) == len(states[0].name)
    stamps = [s.header.stamp.sec * 10**9 + s.header.stamp.nanosec for s in states]
    assert stamps == sorted(stamps) and stamps[-1] > stamps[0]
    assert [stamp for sid, stamp, _ in got if sid == 1] == stamps
    assert times and max(times) >= stamps[-1] and not c_ahead, c_ahead     # the clock goes first
    # a camera image as rosbags decodes it: its size and encoding, the pixels all there, not blank
    img = images[-1]
    assert img.encoding == "rgb8" and img.step == 3 * img.width and len(img.data) == img.height * img.step
    assert np.asarray(img.data).std() > 0
    assert len(descriptions) == 1 and descriptions[0].startswith("<robot name=\"SR1\">")
    # the bag beside it recorded every topic, whatever the client subscribed to
    with Reader(bag) as r:
        recorded = {conn.topic: conn.msgcount for conn in r.connections}
    assert recorded["/SR1/RightCamera/image_raw"] > 0 and recorded["/SR1/joint_states"] >= len(states)


def test_meshes_of_a_published_robot_description_and_nothing_else_are_served(server, tmp_path):
    mesh = tmp_path / "part one.stl"
    mesh.write_bytes(b"solid part\nendsolid part\n")
    uri = "file://" + str(mesh).replace(" ", "%20")
    desc = server.advertise("/r/robot_description", m.STRING, qos.LATCHED)
    server.publish(desc, m.string(f'<robot name="r"><link name="a"><visual><geometry><mesh filename="{uri}" '
                                  'scale="1 1 1"/></geometry></visual></link></robot>'), 0)
    c = Client(server.url, SUBPROTOCOLS[0])
    try:
        assert "assets" in c.info["capabilities"]
        answers = {}
        for request, asked in ((5, uri), (6, "file:///etc/passwd")):
            c.ws.send(json.dumps({"op": "fetchAsset", "uri": asked, "requestId": request}))
            f = c.ws.recv(timeout=10)
            while isinstance(f, str):
                f = c.ws.recv(timeout=10)
            opcode, rid, status, n = struct.unpack_from("<BIBI", f)
            assert opcode == 4
            answers[rid] = (status, f[10:10 + n].decode(), f[10 + n:])
        assert answers[5] == (0, "", mesh.read_bytes())
        assert answers[6][0] == 1 and "not a mesh of a published robot_description" in answers[6][1] and answers[6][2] == b""
    finally:
        c.close()
