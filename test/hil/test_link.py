"""SerialLink on pyserial URLs other than device paths: socket:// (a TCP device server that goes
away and comes back: the link reconnects) and loop:// (no descriptor to wait on)."""
import socket
import threading

from ptys import wait_for

from mbsim_ros.hil.link import SerialLink


class Server:
    """A TCP 'device server' (as ser2net or a WiFi serial bridge) on localhost."""

    def __init__(self, port=0):
        self.sock = socket.create_server(("127.0.0.1", port))
        self.port = self.sock.getsockname()[1]
        self.conn = None
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        self.conn, _ = self.sock.accept()

    def close(self):
        if self.conn is not None:
            self.conn.close()
        self.sock.close()


def test_socket_url_reconnects_when_the_server_goes_away_and_returns():
    server = Server()
    got, states, logs = [], [], []
    link = SerialLink(f"socket://127.0.0.1:{server.port}", 115200, lambda data: got.append(data) or b"ack",
                      on_open=lambda: b"hello", on_state=lambda c, why: states.append(c), log=logs.append,
                      backoff=(0.02, 0.1)).start()
    try:
        wait_for(lambda: server.conn is not None and link.connected, what="the connection")
        server.conn.sendall(b"1,2,3\n")
        wait_for(lambda: b"".join(got) == b"1,2,3\n", what="the data")
        assert server.conn.recv(100).startswith(b"hello")       # on_open's bytes, then on_data's reply
        port = server.port
        server.close()                                          # the device server goes away
        wait_for(lambda: not link.connected, what="the lost connection")
        wait_for(lambda: link.faults["open_failed"] >= 2, what="reconnect attempts")
        server = Server(port)                                   # and comes back on the same port
        wait_for(lambda: server.conn is not None and link.connected, what="the reconnection")
        server.conn.sendall(b"4,5,6\n")
        wait_for(lambda: b"".join(got).endswith(b"4,5,6\n"), what="data after the return")
        assert states == [True, False, True] and link.faults["disconnected"] == 1 and link.opens == 2
        assert sum("cannot open" in line for line in logs) == 1        # logged once, not per retry
    finally:
        link.close()
        server.close()


def test_loop_url_without_a_descriptor_reads_what_was_written():
    got = []
    link = SerialLink("loop://", 115200, lambda data: got.append(data)).start()
    try:
        wait_for(lambda: link.connected, what="loop:// open")
        assert link.write(b"7,8,9\n")
        wait_for(lambda: b"".join(got) == b"7,8,9\n", what="the looped bytes")
        assert link.bytes_in == link.bytes_out == 6
    finally:
        link.close()
    assert not link.connected
