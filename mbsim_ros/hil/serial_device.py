"""A real device on a serial port feeding a DeviceSource: the port (SerialLink: reconnects with
backoff) reads bytes, the protocol's parser turns them into samples, the source takes them.
The parser's startup bytes are written after every (re)open, its pending output after every
chunk it is fed. A parser keeps a half frame across a reconnect (it resynchronizes and counts
the fault), so nothing received before the port vanished is dropped here."""
from __future__ import annotations

from .link import SerialLink
from .protocols import make_parser
from .sources import DeviceSource


class SerialDevice:
    """`source` fed from the serial device its options name (port, baudrate, protocol and the
    protocol's options); sensor: the model's Sensor (the parser needs its type and geometry)."""

    def __init__(self, source: DeviceSource, sensor, log=None, where: str | None = None):
        options = source.options
        self.source = source
        self.parser = make_parser(options, sensor, where or f"devices.{sensor.name}")
        self.samples = 0
        source.parser = self.parser
        self._last_parser_fault = None
        self.link = SerialLink(options["port"], options["baudrate"], self._on_data, name=sensor.name,
                               on_open=self.parser.startup, on_state=source.set_connected,
                               on_fault=lambda kind, text: source.fault(kind, text, count=False), log=log)
        source.link = self.link

    def start(self):
        self.link.start()
        return self

    def close(self):
        self.link.close()

    def _on_data(self, data: bytes) -> bytes:
        parser, source = self.parser, self.source
        for sample in parser.feed(data):
            source.push(sample.values, sample.stamp)
        if parser.last_fault is not self._last_parser_fault:
            self._last_parser_fault = parser.last_fault
            source.fault("parser", parser.last_fault, count=False)
        return parser.pending_output()
