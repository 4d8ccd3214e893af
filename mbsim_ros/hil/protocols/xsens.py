"""Xsens Xbus, MTData2 messages: the binary protocol of Xsens MTi inertial sensors.

Reference: Xsens (Movella), "MT Low Level Communication Protocol Documentation" (document
MT0101P), checked against the open-source einride/xsens-go client (message.go,
datatype.go, precision.go, fixedpoint.go) and its recorded device data. What this module uses:
  - A message: preamble 0xFA, bus identifier BID (0xFF: the device itself), message identifier
    MID, length LEN (0xFF: a 2-byte big-endian extended length follows, up to 2048), the data,
    and a checksum byte chosen so that every byte after the preamble sums to 0 modulo 256.
  - MTData2 (MID 0x36) data: packets of a 2-byte big-endian data identifier (XDI), a 1-byte
    size and the payload, big-endian. The XDI's low 2 bits select the number format: 0
    float32, 1 fixed point 12.20 (int32 / 2^20), 2 fixed point 16.32 (48 bits sent as the
    32-bit fraction then the 16-bit integer part), 3 float64; bits 2-3 the coordinate system,
    which applies to orientations and velocities only: accelerations and rates of turn are
    in the sensor's own frame.
  - Identifiers used: Acceleration 0x4020 (m/s^2, calibrated, gravity included: what an
    accelerometer reads), AccelerationHR 0x4040, RateOfTurn 0x8020 (rad/s), RateOfTurnHR
    0x8040, PacketCounter 0x1020 (uint16, +1 per message), SampleTimeFine 0x1060 (uint32,
    ticks of 100 us).
  - Commands (host to device) are messages too; the device acknowledges with MID + 1:
    GoToConfig 0x30, GoToMeasurement 0x10, ReqDID 0x00 -> DeviceID 0x01, ReqProductCode
    0x1C -> 0x1D, ReqFWRev 0x12 -> 0x13, Set/ReqOutputConfiguration 0xC0 -> 0xC1 (pairs of
    XDI and output frequency, 2 bytes each), Reset 0x40, WakeUpAck 0x3F; Error 0x42.

Parser: an accelerometer takes Acceleration (AccelerationHR where the message has no
Acceleration), a gyro RateOfTurn (or RateOfTurnHR); messages without it are skipped silently
(an MTi interleaves GNSS-only messages). stamp = SampleTimeFine in s, unwrapped over the
32-bit wrap; None if the device does not send it. A jump in PacketCounter counts a "gap"
fault (messages lost on the line). startup() sends GoToMeasurement, so a device left in
config mode streams again.
Encoder: an emulated MTi streaming MTData2 with PacketCounter, SampleTimeFine and the
sensor's quantity; encode() takes the sensor's 3 values, or 6 = (ax, ay, az, wx, wy, wz) to
send Acceleration and RateOfTurn in one message as a real MTi does (a runtime pairing an
accelerometer and a gyro on one link). Option `precision`: float32 (default), fp1220, fp1632
or float64; SetOutputConfiguration from the host selects the items and formats it lists
(its frequencies are ignored: the simulated sensor's rate rules), GoToConfig pauses the
stream, GoToMeasurement resumes it. Commands it does not emulate get an Error message.
"""
import struct

import numpy as np

from . import Encoder, Parser, ProtocolError, Sample, check_type

OPTIONS = {"precision"}

PREAMBLE, BID = 0xFA, 0xFF
MTDATA2, ERROR = 0x36, 0x42
GOTO_CONFIG, GOTO_MEASUREMENT, REQ_DID, REQ_PRODUCT_CODE, REQ_FW_REV = 0x30, 0x10, 0x00, 0x1C, 0x12
OUTPUT_CONFIGURATION, RESET, WAKEUP_ACK = 0xC0, 0x40, 0x3F
MAX_EXTENDED = 2048

PACKET_COUNTER, SAMPLE_TIME_FINE = 0x1020, 0x1060
ACCELERATION, ACCELERATION_HR, RATE_OF_TURN, RATE_OF_TURN_HR = 0x4020, 0x4040, 0x8020, 0x8040
QUANTITY = {"accelerometer": (ACCELERATION, ACCELERATION_HR), "gyro": (RATE_OF_TURN, RATE_OF_TURN_HR)}
PRECISIONS = {"float32": 0, "fp1220": 1, "fp1632": 2, "float64": 3}
VALUE_SIZE = (4, 4, 6, 8)                       # bytes per number, by the XDI's low 2 bits
TICKS = 1e-4                                    # s per SampleTimeFine tick (10 kHz)
FP1220_LIMIT = 2048.0 - 2.0 ** -20              # the 12.20 range


def message(mid: int, data: bytes = b"") -> bytes:
    """One Xbus message from the device (BID 0xFF), with its length field and checksum."""
    n = len(data)
    head = bytes([BID, mid, n]) if n < 255 else bytes([BID, mid, 0xFF, n >> 8, n & 0xFF])
    body = head + data
    return bytes([PREAMBLE]) + body + bytes([-sum(body) & 0xFF])


def decode_vector(payload: bytes, fmt: int) -> np.ndarray:
    """The numbers of one MTData2 packet payload in number format fmt (XDI & 3)."""
    if fmt == 0:
        return np.frombuffer(payload, ">f4").astype(float)
    if fmt == 3:
        return np.frombuffer(payload, ">f8").astype(float)
    if fmt == 1:
        return np.frombuffer(payload, ">i4") / 2.0 ** 20
    raw = np.frombuffer(payload, np.uint8).reshape(-1, 6).astype(np.int64)
    frac = (raw[:, 0] << 24) | (raw[:, 1] << 16) | (raw[:, 2] << 8) | raw[:, 3]
    integer = ((raw[:, 4] << 8) | raw[:, 5]) - ((raw[:, 4] >= 0x80) << 16)     # signed 16 bits
    return ((integer << 32) + frac) / 2.0 ** 32


def encode_vector(values, fmt: int) -> bytes:
    v = np.asarray(values, float)
    if fmt == 0:
        return v.astype(">f4").tobytes()
    if fmt == 3:
        return v.astype(">f8").tobytes()
    if fmt == 1:
        return np.rint(np.clip(v, -2048.0, FP1220_LIMIT) * 2.0 ** 20).astype(">i4").tobytes()
    fixed = np.rint(np.clip(v, -32768.0, 32768.0 - 2.0 ** -32) * 2.0 ** 32).astype(np.int64)
    out = b""
    for x in fixed.tolist():
        b = (x & 0xFFFFFFFFFFFF).to_bytes(6, "big")
        out += b[2:] + b[:2]                       # fraction first, then the integer part
    return out


class XsensParser(Parser):
    def __init__(self, options, sensor, where):
        super().__init__()
        check_type(sensor, tuple(QUANTITY), "xsens", where)
        if "precision" in options:
            raise ProtocolError(f"{where}.precision: sets the emulated device's number format "
                                f"(emulate:); a real device's messages say their own")
        self.wanted = QUANTITY[sensor.type]
        self.reset()

    def reset(self):
        self.buffer = b""
        self.counter = None
        self.last_ticks = None
        self.wraps = 0
        self.resyncing = False        # skipping bytes after a bad message: not counted again

    def startup(self):
        self.reset()
        return message(GOTO_MEASUREMENT)

    def feed(self, data):
        buf = self.buffer + bytes(data)
        n = len(buf)
        samples = []
        i = 0
        while True:
            j = buf.find(b"\xfa\xff", i)
            if j < 0:
                keep = n - 1 if n - 1 >= i and buf[n - 1] == PREAMBLE else n    # maybe a preamble's first byte
                self._skipped(buf, i, keep)
                self.buffer = buf[keep:]
                return samples
            self._skipped(buf, i, j)
            if n - j < 4:
                break
            mid, length, head = buf[j + 2], buf[j + 3], 4
            if length == 0xFF:
                if n - j < 6:
                    break
                length, head = (buf[j + 4] << 8) | buf[j + 5], 6
                if length > MAX_EXTENDED:
                    self._bad("garbage", f"xsens: a header with extended length {length} > {MAX_EXTENDED}")
                    i = j + 1
                    continue
            end = j + head + length + 1
            if end > n:
                if self._whole_message_after(buf, j + 1):
                    # a cut message (or a false preamble) whose length swallows the next ones:
                    # drop it now rather than wait for its bytes and the checksum to fail
                    self._bad("half_frame", f"xsens: message MID 0x{mid:02X} of {length} bytes cut short by the next one")
                    i = j + 1
                    continue
                break
            if sum(buf[j + 1:end]) & 0xFF:
                cut = buf.find(b"\xfa\xff", j + 1, end) >= 0
                self._bad("half_frame" if cut else "checksum",
                          f"xsens: message MID 0x{mid:02X} of {length} bytes "
                          + ("cut short by the next one" if cut else "with a bad checksum"))
                i = j + 1
                continue
            self.resyncing = False
            if mid == MTDATA2:
                sample = self._mtdata2(buf[j + head:end - 1])
                if sample is not None:
                    samples.append(sample)
            i = end
        self.buffer = buf[j:]
        return samples

    @staticmethod
    def _whole_message_after(buf, start):
        """Whether a complete message with a valid checksum starts at a preamble at or after start."""
        k = buf.find(b"\xfa\xff", start)
        while 0 <= k <= len(buf) - 5:
            length, head = buf[k + 3], 4
            if length == 0xFF and len(buf) - k >= 6:
                length, head = (buf[k + 4] << 8) | buf[k + 5], 6
            end = k + head + length + 1
            if length != 0xFF and end <= len(buf) and not sum(buf[k + 1:end]) & 0xFF:
                return True
            k = buf.find(b"\xfa\xff", k + 1)
        return False

    def _skipped(self, buf, start, stop):
        if stop > start and not self.resyncing:
            self.fault("garbage", f"xsens: {stop - start} bytes outside any message: "
                                  f"{buf[start:min(stop, start + 16)].hex(' ')}")

    def _bad(self, kind, text):
        if not self.resyncing:
            self.fault(kind, text)
        self.resyncing = True

    def _mtdata2(self, data):
        found, ticks, counter = {}, None, None
        k, n = 0, len(data)
        while k + 3 <= n:
            xdi, size = (data[k] << 8) | data[k + 1], data[k + 2]
            payload = data[k + 3:k + 3 + size]
            if len(payload) != size:
                self.fault("bad_value", f"xsens: MTData2 packet 0x{xdi:04X} runs past its message")
                return None
            kind, fmt = xdi & 0xFFF0, xdi & 0x3
            if xdi == PACKET_COUNTER and size == 2:
                counter = (data[k + 3] << 8) | data[k + 4]
            elif xdi == SAMPLE_TIME_FINE and size == 4:
                ticks = struct.unpack_from(">I", data, k + 3)[0]
            elif kind in self.wanted:
                if size != 3 * VALUE_SIZE[fmt]:
                    self.fault("bad_value", f"xsens: packet 0x{xdi:04X} of {size} bytes; expected {3 * VALUE_SIZE[fmt]}")
                    return None
                found[kind] = decode_vector(payload, fmt)
            k += 3 + size
        if k != n:
            self.fault("bad_value", "xsens: MTData2 data ends inside a packet header")
            return None
        if counter is not None:
            if self.counter is not None and counter != (self.counter + 1) & 0xFFFF:
                lost = (counter - self.counter - 1) & 0xFFFF
                self.fault("gap", f"xsens: PacketCounter jumped from {self.counter} to {counter} ({lost} messages lost)")
            self.counter = counter
        values = next((found[q] for q in self.wanted if q in found), None)
        if values is None:
            return None
        if not np.isfinite(values).all():
            self.fault("bad_value", f"xsens: non-finite values {values}")
            return None
        return Sample(values, None if ticks is None else self._stamp(ticks))

    def _stamp(self, ticks):
        if self.last_ticks is not None and ticks < self.last_ticks - (1 << 31):
            self.wraps += 1                              # the 32-bit tick counter wrapped
        self.last_ticks = ticks
        return (ticks + self.wraps * (1 << 32)) * TICKS


class XsensEncoder(Encoder):
    def __init__(self, options, sensor, where):
        check_type(sensor, tuple(QUANTITY), "xsens", where)
        name = options.get("precision", "float32")
        if name not in PRECISIONS:
            raise ProtocolError(f"{where}.precision: expected one of {', '.join(PRECISIONS)}, got {name!r}")
        fmt = PRECISIONS[name]
        self.type = sensor.type
        # output configuration: [(XDI, frequency)] in message order; the quantities carry the format
        self.config = [(PACKET_COUNTER, 0xFFFF), (SAMPLE_TIME_FINE, 0xFFFF),
                       (ACCELERATION | fmt, 1000), (RATE_OF_TURN | fmt, 1000)]
        self.measuring = True
        self.counter = 0
        self.buffer = b""
        self.device_id = 0x0370_0000 | (sum(sensor.name.encode()) & 0xFFFF)

    def encode(self, values, stamp):
        if not self.measuring:
            return b""
        v = np.asarray(values, float)
        if len(v) == 6:
            quantities = {ACCELERATION: v[:3], RATE_OF_TURN: v[3:]}
        else:
            quantities = {ACCELERATION if self.type == "accelerometer" else RATE_OF_TURN: v[:3]}
        data = b""
        for xdi, _ in self.config:
            kind = xdi & 0xFFF0
            if xdi == PACKET_COUNTER:
                data += struct.pack(">HBH", xdi, 2, self.counter)
            elif xdi == SAMPLE_TIME_FINE:
                data += struct.pack(">HBI", xdi, 4, int(round(stamp / TICKS)) & 0xFFFFFFFF)
            elif kind in quantities:
                payload = encode_vector(quantities[kind], xdi & 0x3)
                data += struct.pack(">HB", xdi, len(payload)) + payload
        self.counter = (self.counter + 1) & 0xFFFF
        return message(MTDATA2, data)

    def respond(self, data):
        buf = self.buffer + bytes(data)
        out = b""
        i = 0
        while True:
            j = buf.find(b"\xfa\xff", i)
            if j < 0 or len(buf) - j < 5 or (buf[j + 3] == 0xFF and len(buf) - j < 7):
                break
            length, head = buf[j + 3], 4
            if length == 0xFF:
                length, head = (buf[j + 4] << 8) | buf[j + 5], 6
            end = j + head + length + 1
            if length > MAX_EXTENDED:
                i = j + 1
                continue
            if end > len(buf):
                break
            if sum(buf[j + 1:end]) & 0xFF:
                i = j + 1                                # a corrupt command: a real MTi ignores it
                continue
            out += self._command(buf[j + 2], buf[j + head:end - 1])
            i = end
        keep = j if j >= 0 else (len(buf) - 1 if len(buf) > i and buf[-1] == PREAMBLE else len(buf))
        self.buffer = buf[keep:][-(MAX_EXTENDED + 7):]
        return out

    def _command(self, mid, data):
        if mid == GOTO_CONFIG:
            self.measuring = False
        elif mid == GOTO_MEASUREMENT:
            self.measuring = True
        elif mid == WAKEUP_ACK:
            self.measuring = False                       # the host caught the wake-up: stay in config
            return b""
        elif mid == RESET:
            self.measuring, self.counter = True, 0
        elif mid == REQ_DID:
            return message(REQ_DID + 1, struct.pack(">I", self.device_id))
        elif mid == REQ_PRODUCT_CODE:
            return message(REQ_PRODUCT_CODE + 1, b"MTi-mbsim_ros")
        elif mid == REQ_FW_REV:
            return message(REQ_FW_REV + 1, bytes([1, 0, 0]) + bytes(8))
        elif mid == OUTPUT_CONFIGURATION:
            if data:
                if len(data) % 4:
                    return message(ERROR, bytes([0x04]))
                self.config = [struct.unpack_from(">HH", data, k) for k in range(0, len(data), 4)]
            return message(OUTPUT_CONFIGURATION + 1, b"".join(struct.pack(">HH", *c) for c in self.config))
        else:
            return message(ERROR, bytes([0x04]))         # not emulated
        return message(mid + 1)
