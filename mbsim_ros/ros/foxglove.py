"""Live topics over the Foxglove WebSocket protocol, for the Foxglove app and Lichtblick without
a ROS installation.

    t = FoxgloveTransport(host="127.0.0.1", port=8765)     # listening when this returns
    h = t.advertise("/joint_states", messages.JOINT_STATE)
    t.publish(h, cdr_bytes, stamp_ns)                      # to the clients subscribed to it

Each advertised topic is a channel with encoding "cdr", its ROS type as schemaName and the
type's ros2msg definition (dependencies appended, as rosbag2 writes them into MCAP) as schema.
The message payload is the CDR bytes `messages` built once, header included, which is what
Foxglove's ROS 2 decoder reads. Message times are the simulation times the bridge stamps
messages with, and the server announces the `time` capability and sends Time messages from the
same clock, as foxglove_bridge does under use_sim_time.

The protocol is written here over `websockets` (one asyncio thread): the handshake accepts the
subprotocol `foxglove.websocket.v1` (Lichtblick, older Foxglove clients) and `foxglove.sdk.v1`
(current Foxglove; the foxglove-sdk server accepts only this one), whose messages are the same.

Lazy: a channel without a subscribed client sends nothing, and `subscriber_count` is the number
of clients subscribed to it, so the bridge does not even build those messages. A transient-local
topic (robot_description, /tf_static) keeps its last `depth` messages and sends them to a client
when it subscribes, as a late ROS subscriber gets them. Each client has a bounded queue: when
it is full the oldest queued messages are dropped (counted per topic as `dropped` and per
client); publishing never waits for a client.

Clients may publish (the `clientPublish` capability, encoding cdr) to the topics the node
subscribes to (/joint_commands, ...), when the client's channel names the same ROS type; the
callbacks run on the server's thread.

Meshes (the `assets` capability): a client's 3D panel fetches the mesh files a URDF names
through the connection, so the browser version of Foxglove draws them too. Only the files the
published robot_description texts name (file:// URIs, and package:// ones found through ROS's
package index) are served; any other request gets an error.
"""
from __future__ import annotations

import asyncio
import collections
import json
import re
import socket
import struct
import threading
import time
import urllib.parse

from .messages import STRING, TYPESTORE
from .transport import Publisher, Transport, log

__all__ = ["FoxgloveTransport", "SUBPROTOCOLS", "DEFAULT_HOST", "DEFAULT_PORT", "schema_text"]

SUBPROTOCOLS = ("foxglove.websocket.v1", "foxglove.sdk.v1")
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
QUEUE_BYTES = 64 << 20        # per client: two seconds of a 640x480 RGB camera at 30 Hz
QUEUE_MESSAGES = 8192         # per client: what small messages may pile up before dropping
TIME_PERIOD = 0.02            # s of wall time between Time messages to a client, at most

_MESSAGE_DATA = struct.Struct("<BIQ")     # opcode 1, subscription id, log time (ns)
_TIME = struct.Struct("<BQ")              # opcode 2, time (ns)
_CLIENT_DATA = struct.Struct("<BI")       # opcode 1, client channel id
_ASSET = struct.Struct("<BIBI")           # opcode 4, request id, status (0 ok, 1 error), error length
_MESH_URI = re.compile(r'<mesh\b[^>]*\bfilename\s*=\s*"([^"]+)"')


def schema_text(typename: str) -> str:
    """The ros2msg schema of a ROS type: its definition followed by those of the types it uses,
    each after a '=' line and 'MSG: pkg/msg/Name' (the text rosbag2 stores in MCAP)."""
    return TYPESTORE.generate_msgdef(typename, ros_version=2)[0]


class _Channel:
    """A published topic as the clients see it. `subs` (client -> subscription id) is replaced,
    never changed, so that publish() reads it from another thread without a lock."""

    __slots__ = ("id", "handle", "schema", "subs", "latched")

    def __init__(self, cid, handle):
        self.id, self.handle = cid, handle
        self.schema = schema_text(handle.typename)
        self.subs = {}
        self.latched = collections.deque(maxlen=handle.qos.depth) if handle.qos.transient_local else None

    def advertisement(self):
        return {"id": self.id, "topic": self.handle.topic, "encoding": "cdr",
                "schemaName": self.handle.typename, "schemaEncoding": "ros2msg", "schema": self.schema}


class _Client:
    """One connection: its bounded queue of frames (filled by any thread, sent by the server's)."""

    def __init__(self, ws, loop):
        self.ws, self.loop = ws, loop
        self.queue = collections.deque()       # (frame, handle or None)
        self.queued_bytes = 0
        self.lock = threading.Lock()
        self.wake = asyncio.Event()
        self.waking = False                    # a wake-up is on its way to the loop
        self.subscriptions = {}                # subscription id -> _Channel
        self.channels = {}                     # client channel id -> its advertisement
        self.dropped = 0
        self.time_sent = -1

    def put(self, frame, handle, max_bytes, max_messages):
        with self.lock:
            self.queue.append((frame, handle))
            self.queued_bytes += len(frame)
            while len(self.queue) > 1 and (self.queued_bytes > max_bytes or len(self.queue) > max_messages):
                old, old_handle = self.queue.popleft()
                self.queued_bytes -= len(old)
                self.dropped += 1
                if old_handle is not None:
                    old_handle.dropped += 1
            if self.waking:
                return
            self.waking = True
        try:
            self.loop.call_soon_threadsafe(self.wake.set)
        except RuntimeError:      # the loop closed: the server is stopping
            pass

    def take(self):
        with self.lock:
            self.waking = False
            frames = [f for f, _ in self.queue]
            self.queue.clear()
            self.queued_bytes = 0
        return frames


class FoxgloveTransport(Transport):
    """A Foxglove WebSocket server on ws://host:port, listening once the constructor returns;
    OSError (one line) where it cannot (port in use, an address not of this machine, a host name
    that does not resolve). port 0 picks a free port (`port` then tells it)."""

    kind = "foxglove"
    receives = True

    def __init__(self, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, name: str = "mbsim",
                 queue_bytes: int = QUEUE_BYTES, queue_messages: int = QUEUE_MESSAGES):
        super().__init__()
        try:
            import websockets.asyncio.server  # noqa: F401
        except ImportError as e:
            raise ImportError(f"the foxglove transport needs the websockets package ({e}); "
                              "install it with `pip install websockets`") from e
        self.host, self.port, self.name = host, int(port), name
        self.queue_bytes, self.queue_messages = int(queue_bytes), int(queue_messages)
        self._lock = threading.Lock()           # the channels and clients
        self._channels: dict[str, _Channel] = {}
        self._by_id: dict[int, _Channel] = {}
        self._next_id = 1
        self._clients: list[_Client] = []
        self._now_ns = 0                        # the latest message time: the server's clock
        self._assets: set[str] = set()          # the mesh URIs published robot_descriptions name
        self._session = str(time.time_ns())
        self._loop = asyncio.new_event_loop()
        self._server = None
        self._ready = threading.Event()
        self._error = None
        self._thread = threading.Thread(target=self._serve, name="mbsim-foxglove", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            self._thread.join()
            self._loop.close()
            self._closed = True
            raise self._error

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"ws://{host}:{self.port}"

    @property
    def clients(self) -> int:
        return len(self._clients)

    def client_drops(self) -> list[int]:
        """The messages dropped so far for each connected client (its queue was full)."""
        return [c.dropped for c in list(self._clients)]

    # -- the server thread --------------------------------------------------------------------
    def _serve(self):
        from websockets.asyncio.server import serve
        asyncio.set_event_loop(self._loop)

        async def start():
            return await serve(self._connection, self.host, self.port, subprotocols=list(SUBPROTOCOLS),
                               compression=None, max_size=64 << 20, server_header="mbsim")
        try:
            self._server = self._loop.run_until_complete(start())
            self.port = self._server.sockets[0].getsockname()[1]
        except (OSError, socket.gaierror) as e:
            reason = e.strerror or str(e)
            self._error = OSError(f"foxglove: cannot listen on {self.url}: {reason}")
        except Exception as e:      # anything else the server refuses, in one line too
            self._error = OSError(f"foxglove: cannot listen on {self.url}: {e}")
        self._ready.set()
        if self._error is not None:
            return
        try:
            self._loop.run_forever()
        finally:
            self._server.close()
            self._loop.run_until_complete(self._server.wait_closed())
            self._loop.close()

    async def _connection(self, ws):
        client = _Client(ws, self._loop)
        with self._lock:
            channels = list(self._channels.values())
            self._clients = self._clients + [client]
        sender = None
        try:
            await ws.send(json.dumps({
                "op": "serverInfo", "name": self.name, "capabilities": ["clientPublish", "time", "assets"],
                "supportedEncodings": ["cdr"], "metadata": {"ros_distro": "jazzy"},
                "sessionId": self._session}))
            await ws.send(json.dumps({"op": "advertise", "channels": [c.advertisement() for c in channels]}))
            sender = asyncio.ensure_future(self._send_loop(client))
            async for message in ws:
                try:
                    if isinstance(message, str):
                        self._on_json(client, json.loads(message))
                    else:
                        self._on_binary(client, message)
                except (ValueError, KeyError, TypeError, struct.error) as e:
                    self._status(client, 2, f"bad message from the client: {e}")
        except Exception as e:      # the client went away or broke the protocol: only it ends
            if not _closed_connection(e):
                log.warning("foxglove: client %s: %s", ws.remote_address, e)
        finally:
            if sender is not None:
                sender.cancel()
            with self._lock:
                self._clients = [c for c in self._clients if c is not client]
                for ch in client.subscriptions.values():
                    ch.subs = {c: s for c, s in ch.subs.items() if c is not client}

    async def _send_loop(self, client):
        ws = client.ws
        while True:
            await client.wake.wait()
            client.wake.clear()
            # the frames first, then the clock: publish raises the clock before it queues a frame,
            # so the clock read after the take is at or past every frame taken and goes out first
            frames = client.take()
            now = self._now_ns
            if now > client.time_sent:
                client.time_sent = now
                await ws.send(_TIME.pack(2, now))
            for frame in frames:
                await ws.send(frame)
            await asyncio.sleep(TIME_PERIOD if not client.queue else 0)

    def _status(self, client, level, message):
        asyncio.ensure_future(client.ws.send(json.dumps({"op": "status", "level": level, "message": message})))

    def _on_json(self, client, m):
        op = m.get("op")
        if op == "subscribe":
            for s in m["subscriptions"]:
                sid, cid = int(s["id"]), int(s["channelId"])
                ch = self._by_id.get(cid)
                if ch is None:
                    self._status(client, 1, f"subscribe: no channel {cid}")
                    continue
                if sid in client.subscriptions:
                    self._status(client, 1, f"subscribe: subscription id {sid} is in use")
                    continue
                with self._lock:
                    if client in ch.subs:
                        self._status(client, 1, f"subscribe: already subscribed to {ch.handle.topic}")
                        continue
                    client.subscriptions[sid] = ch
                    ch.subs = {**ch.subs, client: sid}
                    for data, stamp in list(ch.latched or ()):   # what a late ROS subscriber gets
                        client.put(_MESSAGE_DATA.pack(1, sid, stamp) + data, None, self.queue_bytes,
                                   self.queue_messages)
        elif op == "unsubscribe":
            for sid in m["subscriptionIds"]:
                ch = client.subscriptions.pop(int(sid), None)
                if ch is not None:
                    with self._lock:
                        ch.subs = {c: s for c, s in ch.subs.items() if c is not client}
        elif op == "fetchAsset":
            asyncio.ensure_future(self._fetch_asset(client, str(m["uri"]), int(m["requestId"])))
        elif op == "advertise":
            for c in m["channels"]:
                client.channels[int(c["id"])] = c
        elif op == "unadvertise":
            for cid in m["channelIds"]:
                client.channels.pop(int(cid), None)
        else:
            self._status(client, 1, f"unsupported operation {op!r}")

    def _on_binary(self, client, data):
        opcode, cid = _CLIENT_DATA.unpack_from(data)
        if opcode != 1:
            self._status(client, 1, f"unsupported binary opcode {opcode}")
            return
        c = client.channels.get(cid)
        if c is None:
            self._status(client, 2, f"message on channel {cid}, which the client did not advertise")
            return
        sub = self._subscriptions.get(c.get("topic"))
        if sub is None:
            self._status(client, 2, f"{c.get('topic')}: the simulation subscribes to no such topic")
        elif c.get("encoding") != "cdr" or c.get("schemaName") != sub.typename:
            self._status(client, 2, f"{sub.topic} takes {sub.typename} in cdr, not "
                                    f"{c.get('schemaName')} in {c.get('encoding')}")
        else:
            sub.deliver(bytes(data[_CLIENT_DATA.size:]))

    async def _fetch_asset(self, client, uri, request):
        error, data = "", b""
        if uri not in self._assets:
            error = f"{uri} is not a mesh of a published robot_description"
        else:
            path = _asset_path(uri)
            try:
                if path is None:
                    raise OSError(f"{uri}: not found")
                data = await asyncio.to_thread(_read_file, path)
            except OSError as e:
                error = f"{uri}: {e.strerror or e}"
        text = error.encode()
        await client.ws.send(_ASSET.pack(4, request, 1 if error else 0, len(text)) + text + data)

    def _broadcast(self, text):
        for client in list(self._clients):
            asyncio.ensure_future(client.ws.send(text))

    # -- the transport ------------------------------------------------------------------------
    def _advertise(self, pub: Publisher):
        with self._lock:
            ch = _Channel(self._next_id, pub)
            self._next_id += 1
            self._channels[pub.topic] = ch
            self._by_id[ch.id] = ch
        self._loop.call_soon_threadsafe(
            self._broadcast, json.dumps({"op": "advertise", "channels": [ch.advertisement()]}))
        return ch

    def _unadvertise(self, pub: Publisher) -> None:
        ch = pub.impl
        with self._lock:
            self._channels.pop(pub.topic, None)
            self._by_id.pop(ch.id, None)
            for client in ch.subs:
                client.subscriptions = {s: c for s, c in client.subscriptions.items() if c is not ch}
            ch.subs = {}
        self._loop.call_soon_threadsafe(self._broadcast, json.dumps({"op": "unadvertise", "channelIds": [ch.id]}))

    def publish(self, handle: Publisher, data: bytes, stamp_ns: int = 0) -> None:
        ch = handle.impl
        if stamp_ns > self._now_ns:
            self._now_ns = stamp_ns
        stamp = stamp_ns or self._now_ns
        if ch.latched is not None:
            ch.latched.append((data, stamp))
            if handle.typename == STRING and handle.topic.endswith("/robot_description"):
                self._assets |= set(_MESH_URI.findall(TYPESTORE.deserialize_cdr(data, STRING).data))
        for client, sid in ch.subs.items():
            client.put(_MESSAGE_DATA.pack(1, sid, stamp) + data, handle, self.queue_bytes, self.queue_messages)
        handle.messages += 1
        handle.bytes += len(data)

    def subscriber_count(self, handle: Publisher) -> int:
        return len(handle.impl.subs)

    def worker_threads(self) -> list:
        return [self._thread.native_id]

    def _close(self) -> None:
        if self._loop.is_running():
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5.0)


def _asset_path(uri):
    """The file a mesh URI names: file:// as it is, package:// through ROS's package index."""
    if uri.startswith("file://"):
        return urllib.parse.unquote(uri[len("file://"):])
    if uri.startswith("package://"):
        from ..formats.urdf import resolve_mesh_uri
        return resolve_mesh_uri(uri, ".")[0]
    return None


def _read_file(path):
    with open(path, "rb") as f:
        return f.read()


def _closed_connection(e) -> bool:
    from websockets.exceptions import ConnectionClosed
    return isinstance(e, (ConnectionClosed, asyncio.CancelledError, ConnectionError))
