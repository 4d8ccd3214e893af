"""Device emulators of the tests' own on pseudo-terminals.

PtyDevice: a pseudo-terminal whose slave the node opens through a symlink (as udev's
/dev/serial/by-id/... links), so the device can vanish (the pty is closed, the link removed)
and come back at the same path on a new pty. The test speaks at the master.
EmulatedDevice: a PtyDevice answering the node's commands with a protocol encoder (SCIP 2.0's
PP/MD...) in a thread, and writing frames of generated data on request.
"""
import errno
import os
import select
import threading
import time
import tty


class PtyDevice:
    def __init__(self, path):
        self.path = str(path)
        self.master = self.slave = None
        self.open()

    def open(self):
        master, slave = os.openpty()
        tty.setraw(slave)                 # no echo, no line editing: bytes pass unchanged
        os.set_blocking(master, False)
        self.master, self.slave = master, slave
        os.symlink(os.ttyname(slave), self.path)

    def vanish(self):
        """The device is unplugged: the node's reads fail and the path is gone."""
        os.unlink(self.path)
        os.close(self.master)
        os.close(self.slave)
        self.master = self.slave = None

    def close(self):
        if self.master is not None:
            self.vanish()

    def write(self, data, timeout=5.0):
        data = memoryview(bytes(data))
        deadline = time.monotonic() + timeout
        while data:
            try:
                n = os.write(self.master, data)
                data = data[n:]
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError("the node does not read the pty") from None
                time.sleep(0.001)

    def read(self, timeout=0.0):
        """What the node wrote (b"" if nothing within timeout)."""
        if self.master is None:
            return b""
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return b""
        try:
            return os.read(self.master, 65536)
        except OSError as e:
            if e.errno in (errno.EIO, errno.EAGAIN):   # EIO: nobody has the slave open
                return b""
            raise


class EmulatedDevice(PtyDevice):
    """A PtyDevice with a thread answering the host through `encoder.respond` (the protocols'
    device side) and collecting what the host wrote in `received`."""

    def __init__(self, path, encoder):
        self.encoder = encoder
        self.lock = threading.Lock()
        self.received = b""
        self._stop = threading.Event()
        super().__init__(path)
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        while not self._stop.is_set():
            with self.lock:
                master = self.master
                data = self.read(0.0) if master is not None else b""
                if data:
                    self.received += data
                    reply = self.encoder.respond(data)
                    if reply:
                        self.write(reply)
            if not data:
                time.sleep(0.002)

    def send(self, values, stamp):
        """One frame of `values` (SI, device frame); False if the protocol sends nothing now
        (SCIP 2.0 before the host's MD)."""
        with self.lock:
            frame = self.encoder.encode(values, stamp)
            if frame and self.master is not None:
                self.write(frame)
        return bool(frame)

    def vanish(self):
        with self.lock:
            super().vanish()

    def come_back(self):
        with self.lock:
            self.open()

    def close(self):
        self._stop.set()
        self._thread.join(2.0)
        super().close()


def wait_for(predicate, timeout=5.0, what="condition"):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.002)
