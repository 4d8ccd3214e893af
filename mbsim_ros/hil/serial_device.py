"""A real device on a serial port feeding DeviceSources: the port (SerialLink: reconnects with
backoff) reads bytes, each sensor's protocol parser turns them into samples, its source takes
them. Several sensors may share one port (an IMU streaming acceleration and rate of turn in
one message, e.g. an Xsens MTi for an accelerometer and a gyro entry): every parser sees every
byte and keeps what is its sensor's. The parsers' startup bytes are written after every
(re)open (identical ones once; a parser may restart its session there, dropping a frame the
vanished device left half sent), their pending output after every chunk. Samples already
handed to the sources stay there: the last one is held (on_fault hold) while the port is away."""
from __future__ import annotations

from ..model import ConfigError
from .entries import protocol_options
from .link import SerialLink
from .protocols import make_parser


class SerialDevice:
    """members: [(DeviceSource, model Sensor)] reading the port their options name (port,
    baudrate, protocol and the protocol's options, each entry its own)."""

    def __init__(self, members, log=None):
        first = members[0][0].options
        port, baudrate = first["port"], first["baudrate"]
        self.members = []
        for source, sensor in members:
            where = f"devices.{sensor.name}"
            if source.options["baudrate"] != baudrate:
                raise ConfigError(f"{where}.baudrate: {source.options['baudrate']}, but {members[0][1].name} "
                                  f"reads the same port {port} at {baudrate}")
            parser = make_parser(protocol_options(source.options), sensor, where)
            source.parser = parser
            self.members.append([source, parser, None])
        names = ", ".join(sensor.name for _, sensor in members)
        self.link = SerialLink(port, baudrate, self._on_data, name=names, on_open=self._startup,
                               on_state=self._on_state, on_fault=self._on_fault, log=log)
        for source, _, _ in self.members:
            source.link = self.link

    def start(self):
        self.link.start()
        return self

    def close(self):
        self.link.close()

    def _startup(self) -> bytes:
        out = []
        for _, parser, _ in self.members:
            data = parser.startup()
            if data and data not in out:
                out.append(data)
        return b"".join(out)

    def _on_state(self, connected, reason):
        for source, _, _ in self.members:
            source.set_connected(connected, reason)

    def _on_fault(self, kind, text):
        for source, _, _ in self.members:
            source.fault(kind, text, count=False)

    def _on_data(self, data: bytes) -> bytes:
        out = b""
        for member in self.members:
            source, parser, last = member
            for sample in parser.feed(data):
                source.push(sample.values, sample.stamp)
            if parser.last_fault is not last:
                member[2] = parser.last_fault
                source.fault("parser", parser.last_fault, count=False)
            out += parser.pending_output()
        return out
