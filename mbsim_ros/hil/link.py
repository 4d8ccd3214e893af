"""A serial port in its own thread, surviving the device: pyserial's serial_for_url opens any
device path or URL (socket://host:port, rfc2217://, loop://); while the port cannot be opened
it is retried with exponential backoff, and after a read error (the device vanished) it is
reopened the same way. Nothing here knows a protocol: what is read goes to on_data, and what
on_open / on_data return is written back.

    link = SerialLink("/dev/ttyUSB0", 115200, on_data=lambda data: b"", name="imu")
    link.start(); ...; link.write(b"..."); ...; link.close()

State changes (opened, lost, cannot open) are logged once each, not per retry.
"""
from __future__ import annotations

import select
import threading
import time
from collections import Counter


class SerialLink:
    """A serial port read by a daemon thread.

    on_data(data: bytes) -> bytes | None: called in the reader thread for each chunk read;
        what it returns is written to the port.
    on_open() -> bytes | None: called after each (re)open; what it returns is written.
    on_state(connected: bool, reason: str): called on each change of the connection (without
        it the change is logged here).
    on_fault(kind: str, text: str): called on each fault (after it is counted here).
    log(text): one line per state change.
    Counters: faults (open_failed, disconnected, write_failed), opens, bytes_in, bytes_out;
    last_fault is the latest fault's text."""

    def __init__(self, url: str, baudrate: int, on_data, name: str = "", on_open=None, on_state=None,
                 on_fault=None, log=None, read_timeout: float = 0.05, backoff=(0.05, 2.0), write_timeout: float = 1.0):
        self.url = url
        self.baudrate = int(baudrate)
        self.name = name or url
        self.on_data = on_data
        self.on_open = on_open
        self.on_state = on_state
        self.on_fault = on_fault
        self.log = log or (lambda text: None)
        self.read_timeout = float(read_timeout)
        self.backoff = (float(backoff[0]), float(backoff[1]))
        self.write_timeout = float(write_timeout)
        self.faults = Counter()
        self.last_fault = None
        self.opens = 0
        self.bytes_in = 0
        self.bytes_out = 0
        self.connected = False
        self._port = None
        self._write_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = None
        self._open_failing = False       # log a failing open once, not per retry

    # -- any thread ---------------------------------------------------------------------------
    def start(self):
        self._thread = threading.Thread(target=self._run, name=f"mbsim-serial-{self.name}", daemon=True)
        self._thread.start()
        return self

    def close(self, timeout: float = 2.0):
        """Stop the thread and close the port (idempotent)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def write(self, data: bytes) -> bool:
        """Write all of `data` (serialized with the reader thread's writes); False when the port
        is not open or the write failed (counted as write_failed)."""
        if not data:
            return True
        with self._write_lock:
            port = self._port
            if port is None:
                return False
            try:
                port.write(data)
            except Exception as e:     # SerialException, SerialTimeoutException, OSError: a fault, never fatal
                self._fault("write_failed", f"{self.name}: write failed: {e}")
                return False
            self.bytes_out += len(data)
            return True

    def wait_connected(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not self.connected:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.005)
        return True

    # -- the reader thread -----------------------------------------------------------------
    def _fault(self, kind, text):
        self.faults[kind] += 1
        self.last_fault = text
        if self.on_fault is not None:
            self.on_fault(kind, text)

    def _set_connected(self, connected, reason):
        if connected == self.connected:
            return
        self.connected = connected
        if self.on_state is not None:
            self.on_state(connected, reason)      # the owner logs its own state change
        else:
            self.log(reason)

    def _open(self):
        import serial
        port = serial.serial_for_url(self.url, baudrate=self.baudrate, timeout=0,
                                     write_timeout=self.write_timeout)
        try:
            fd = port.fileno()
        except Exception:           # loop://, rfc2217://: no descriptor to wait on
            fd = None
        if fd is None:
            port.timeout = self.read_timeout
        return port, fd

    def _run(self):
        delay = self.backoff[0]
        while not self._stop.is_set():
            try:
                port, fd = self._open()
            except Exception as e:     # absent device, refused connection, permission: retried
                self._fault("open_failed", f"{self.name}: cannot open {self.url}: {e}")
                if not self._open_failing:
                    self._open_failing = True
                    self.log(f"{self.name}: cannot open {self.url} ({e}); retrying with backoff up to "
                             f"{self.backoff[1]:g} s")
                self._stop.wait(delay)
                delay = min(2 * delay, self.backoff[1])
                continue
            self._open_failing = False
            delay = self.backoff[0]
            self.opens += 1
            with self._write_lock:
                self._port = port
            reason = None
            try:
                self._set_connected(True, f"{self.name}: {self.url} open")
                if self.on_open is not None:
                    self.write(self.on_open() or b"")
                self._read_loop(port, fd)
            except Exception as e:     # the device vanished or broke mid-read: reopen
                reason = str(e)
            finally:
                with self._write_lock:
                    self._port = None
                try:
                    port.close()
                except Exception:
                    pass
            if reason is not None:
                self._fault("disconnected", f"{self.name}: {self.url} lost: {reason}")
                self._set_connected(False, f"{self.name}: {self.url} lost ({reason}); reconnecting")
                self._stop.wait(delay)
            else:
                self.connected = False        # closed on purpose (the run ends): not a state change to report

    def _read_loop(self, port, fd):
        stop = self._stop
        timeout = self.read_timeout
        on_data = self.on_data
        while not stop.is_set():
            if fd is not None:
                ready, _, _ = select.select([fd], [], [], timeout)
                if not ready:
                    continue
                data = port.read(65536)       # timeout 0: what is there (b"" + error if the device vanished)
            else:
                data = port.read(max(1, port.in_waiting))
                if data and port.in_waiting:
                    data += port.read(port.in_waiting)
            if not data:
                continue
            self.bytes_in += len(data)
            try:
                out = on_data(data)
            except Exception as e:     # a handler bug must not look like a lost device
                self._fault("handler_error", f"{self.name}: handling {len(data)} bytes failed: {e!r}")
                if self.faults["handler_error"] == 1:
                    self.log(self.last_fault)
                continue
            if out:
                self.write(out)
