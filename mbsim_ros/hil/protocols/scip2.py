"""Hokuyo SCIP 2.0: the ASCII protocol of Hokuyo URG/UTM/UST laser range finders.

Reference: Hokuyo Automatic Co., "Communication Protocol Specification for SCIP2.0 Standard"
(document AMOT-0024x), and its reading in Hokuyo's urg_library (urg_sensor.c), the driver
under ROS's urg_node. What this module relies on:
  - Every command is one line ended by LF (or CR): two letters and fixed-width decimal
    parameters, optionally ";string" echoed back. Every reply is the echo line, a status line
    (two characters + checksum), zero or more data lines, then an empty line: it ends in LF LF.
  - A line's checksum is one character: (sum of the line's bytes & 0x3F) + 0x30. Parameter
    lines "KEY:value;c" sum "KEY:value" (urg_library accepts the ';' included too, so do we).
  - Numbers in data are 2, 3 or 4 characters of 6 bits each, most significant first, every
    character value + 0x30 ("CB" = 1234, "1Dh" = 5432, "m2@0" = 16000000: the spec's examples).
  - PP reports MODL, DMIN, DMAX (mm), ARES (steps per 360 deg), AMIN, AMAX (first and last
    step), AFRT (the front step), SCAN (rpm). Step s looks at angle (s - AFRT) 2 pi / ARES,
    counter-clockwise seen from above (ROS's laser frame: x forward, z up).
  - MDsssseeeeccknn (MS: 2-character values): steps ssss..eeee in clusters of cc steps, every
    (k+1)-th scan, nn scans (00: until QT). Replies: the echo with status 00 at once, then per
    scan the echo with nn counting the remaining scans down, status 99, a 4-character
    timestamp (ms, 24 bits, wraps), the 3-character distances (mm) in data lines of 64
    characters + checksum, LF. GDsssseeeecc (GS) takes one scan: echo, status 00, timestamp,
    data, LF; it needs the laser on (BM), MD switches it on itself; QT stops and switches off.
  - Distances below 20 mm are error codes (no valid echo: low intensity, too far, ...).

Mapping onto the simulated range sensor (sensors/devices.py: n = 2 floor(scanAngle / 2 /
scanStep) + 1 rays at angles th_i = (i - n // 2) scanStep, counter-clockwise, the same sense as
Hokuyo steps): ray i reads the device step nearest to its angle, AFRT + round(th_i ARES / 2 pi)
(nearest step, never interpolated: interpolation across an edge invents points in mid-air).
  Parser: the steps the rays need (within AMIN..AMAX) are requested by MD with cluster 1. A ray
  outside the device's field of view is NaN; where the device is finer than the model the
  steps between rays are not used, where it is coarser neighbouring rays repeat a step.
  Values: error codes (< 20 mm) -> +inf (no return); 20 mm <= d < DMIN -> -inf (closer than the
  device's minimum); d > DMAX -> +inf; then the model's limits as in the simulation: below
  minDistance -> -inf, above maxDistance -> +inf. stamp = the device timestamp in s, unwrapped.
  Encoder: an emulated device with ARES = round(2 pi / scanStep) (option `ares` overrides),
  AMIN = 0, AFRT and AMAX covering the rays; each step sends the ray nearest to its angle.
  DMIN = max(21 mm, minDistance), DMAX = maxDistance (at most 262143 mm, the 3-character
  limit); +inf (no return) is sent as error code 1, -inf (too close) as 20 mm, so our parser
  gives back exactly the simulated scan to the millimetre. SCAN = 60 scanRate rpm.
"""
import math
import re

import numpy as np

from . import Encoder, Parser, ProtocolError, Sample, check_type

OPTIONS = {"ares"}
ERROR_CODE_LIMIT = 20        # mm: smaller values are error codes on every Hokuyo model
NO_RETURN_CODE = 1           # what the encoder sends for +inf
TOO_CLOSE_MM = 20            # what the encoder sends for -inf (below its DMIN)
MAX_REPLY = 1 << 18          # bytes without LF LF before the buffer is dropped (a scan is ~3 kB)
MAX_COMMAND = 256            # bytes of one host command line

_SCAN_ECHO = re.compile(rb"(M[DS])(\d{4})(\d{4})(\d{2})(\d)(\d{2})(;[^\n]*)?\n|(G[DS])(\d{4})(\d{4})(\d{2})(;[^\n]*)?\n")
_PP_ECHO = re.compile(rb"(?:^|\n)(PP(?:;[^\n]*)?\n)")
_REPLY_ECHO = re.compile(rb"[A-Z%][A-Z0-9%.]{1,15}(?:;[^\n]*)?")     # any other command's echo line


def checksum(data: bytes) -> int:
    """The SCIP line checksum character of `data`."""
    return (sum(data) & 0x3F) + 0x30


def decode(chars: bytes) -> int:
    """A 2/3/4-character SCIP number."""
    value = 0
    for c in chars:
        value = (value << 6) | (c - 0x30)
    return value


def encode(value: int, width: int) -> bytes:
    return bytes(((value >> (6 * k)) & 0x3F) + 0x30 for k in range(width - 1, -1, -1))


def _line(payload: bytes) -> bytes:
    return payload + bytes([checksum(payload)]) + b"\n"


def _data_lines(values: np.ndarray, width: int) -> bytes:
    """values (non-negative ints) as SCIP characters in lines of 64 + checksum + LF."""
    shifts = 6 * np.arange(width - 1, -1, -1)
    chars = (((values.astype(np.int64)[:, None] >> shifts) & 0x3F) + 0x30).astype(np.uint8).ravel()
    full = len(chars) // 64
    body = chars[:full * 64].reshape(full, 64)
    sums = ((body.sum(axis=1) & 0x3F) + 0x30).astype(np.uint8)
    out = np.hstack([body, sums[:, None], np.full((full, 1), 10, np.uint8)]).tobytes()
    rest = chars[full * 64:].tobytes()
    return out + (_line(rest) if rest else b"")


def _geometry(sensor, where):
    """(ray angles, range_min, range_max, scan rate) of the simulated range sensor."""
    from ...render import range_directions
    p = sensor.params
    step, angle = float(p.get("scanStep", 0.1)), float(p.get("scanAngle", math.pi))
    if not (step > 0 and angle >= 0):
        raise ProtocolError(f"{where}: sensor {sensor.name} has scanStep {step}, scanAngle {angle}; "
                            f"expected scanStep > 0 and scanAngle >= 0")
    n = len(range_directions(angle, step))
    return ((np.arange(n) - n // 2) * step, step, float(p.get("minDistance", 0.0)),
            float(p.get("maxDistance", 10.0)), float(p.get("scanRate", 10.0)))


class _Bad(Exception):
    """A reply that cannot be used: kind (a fault key) and a description."""

    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind


class Scip2Parser(Parser):
    """Host side: starts the sensor (SCIP2.0, QT, PP, then MD for the steps the model's rays
    need) and yields one Sample per scan (ranges in the model's ray order, m)."""

    def __init__(self, options, sensor, where):
        super().__init__()
        check_type(sensor, ("range",), "scip2", where)
        if "ares" in options:
            raise ProtocolError(f"{where}.ares: sets the emulated device's resolution (emulate:); "
                                f"a real device reports its own in PP")
        self.angles, _, self.range_min, self.range_max, _ = _geometry(sensor, where)
        self.reset()

    def reset(self):
        self.buffer = b""
        self.output = b""
        self.params = None           # PP's DMIN DMAX ARES AMIN AMAX AFRT as ints
        self.ray_steps = None        # device step of each ray
        self.maps = {}               # (first, last, cluster) -> data index per ray (-1: outside)
        self.last_ts = None
        self.wraps = 0

    def startup(self):
        """A new session: SCIP 2.0 mode (SCIP 1.1 devices switch), stop any running scan, ask PP."""
        self.reset()
        return b"SCIP2.0\nQT\nPP\n"

    def pending_output(self):
        out, self.output = self.output, b""
        return out

    def feed(self, data):
        searched = max(0, len(self.buffer) - 1)
        self.buffer += bytes(data)
        samples = []
        start = 0
        while True:
            end = self.buffer.find(b"\n\n", max(start, searched))
            if end < 0:
                break
            self._block(self.buffer[start:end + 1], samples)     # with its last line's LF
            start = end + 2
        self.buffer = self.buffer[start:]
        if len(self.buffer) > MAX_REPLY:
            self.fault("overflow", f"scip2: no reply end (LF LF) within {MAX_REPLY} bytes; dropped them")
            self.buffer = b""
        return samples

    # -- one block up to LF LF: normally one reply; garbage or a cut reply may precede it ----------
    @staticmethod
    def _echoes(block):
        """[(position, match or None for PP)] of the echo lines in a block, in order. The two-letter
        codes are found with bytes.find (fast); the regular expression checks only there."""
        starts = []
        for code in (b"MD", b"MS", b"GD", b"GS", b"PP"):
            i = block.find(code)
            while i >= 0:
                if code == b"PP":
                    m = _PP_ECHO.match(block, i - 1 if i else 0)
                    if m:
                        starts.append((i, None))
                else:
                    m = _SCAN_ECHO.match(block, i)
                    if m:
                        starts.append((i, m))
                i = block.find(code, i + 1)
        return sorted(starts, key=lambda s: s[0])

    def _block(self, block, samples):
        starts = self._echoes(block)
        if not starts:
            first, _, rest = block.partition(b"\n")
            if not (_REPLY_ECHO.fullmatch(first) and rest):
                self.fault("garbage", f"scip2: unrecognised bytes {block[:40]!r}")
            return                                               # a reply we do not use (QT, SCIP2.0, BM, ...)
        if starts[0][0] > 0:
            self.fault("garbage", f"scip2: unrecognised bytes {block[:min(starts[0][0], 40)]!r}")
        for k, (pos, match) in enumerate(starts):
            last = k == len(starts) - 1
            segment = block[pos:] if last else block[pos:starts[k + 1][0]]
            try:
                if match is None:
                    self._parameters(segment, last)
                else:
                    sample = self._scan(segment, match)
                    if sample is not None:
                        samples.append(sample)
            except _Bad as e:
                if last:
                    self.fault(e.kind, f"scip2: {e}")
                else:
                    self.fault("half_frame", f"scip2: reply cut short by the next one: {segment[:40]!r}")

    @staticmethod
    def _status(line, what):
        if len(line) != 3 or line[2] != checksum(line[:2]):
            raise _Bad("checksum", f"bad status line {line!r} after {what}")
        return line[:2].decode("ascii", "replace")

    def _parameters(self, segment, last):
        lines = [line for line in segment.split(b"\n") if line]
        if len(lines) < 2:
            raise _Bad("half_frame", f"PP reply without a status: {segment!r}")
        status = self._status(lines[1], "PP")
        if not last:
            raise _Bad("half_frame", "PP reply cut short")
        if status != "00":
            self.fault("status", f"scip2: PP answered status {status}")
            return
        params = {}
        for line in lines[2:]:
            text, _, c = line.rpartition(b";")
            if len(c) != 1 or c[0] not in (checksum(text), checksum(text + b";")):
                self.output += b"PP\n"                          # ask again
                raise _Bad("checksum", f"bad PP line {line!r}")
            key, _, value = text.partition(b":")
            params[key.decode("ascii", "replace")] = value.decode("ascii", "replace")
        try:
            p = {k: int(params[k]) for k in ("DMIN", "DMAX", "ARES", "AMIN", "AMAX", "AFRT")}
            if p["ARES"] <= 0 or not 0 <= p["AMIN"] <= p["AMAX"] <= 9999:
                raise ValueError
        except (KeyError, ValueError):
            self.output += b"PP\n"
            raise _Bad("bad_value", f"PP without valid DMIN DMAX ARES AMIN AMAX AFRT: {params}") from None
        self.params = p
        self.maps = {}
        self.ray_steps = p["AFRT"] + np.rint(self.angles * p["ARES"] / (2 * math.pi)).astype(np.int64)
        first, last_step = max(p["AMIN"], int(self.ray_steps.min())), min(p["AMAX"], int(self.ray_steps.max()))
        if first > last_step:
            raise _Bad("bad_value", f"the device's steps {p['AMIN']}..{p['AMAX']} (front {p['AFRT']}, "
                                    f"{p['ARES']} per turn) do not overlap the model's rays")
        self.output += b"MD%04d%04d01000\n" % (first, last_step)

    def _scan(self, segment, match):
        # echo (matched with its LF), status, timestamp, then the data lines as one region
        head = match.end() - match.start()
        lines = segment[head:].split(b"\n", 2)
        continuous = match.group(1) is not None
        command = (match.group(1) or match.group(8)).decode()
        if len(lines) < 2:
            raise _Bad("half_frame", f"{command} reply without a status: {segment[:40]!r}")
        status = self._status(lines[0], command)
        if continuous and status == "00" and lines[1] == b"":
            return None                                          # MD accepted; scans follow
        if status != ("99" if continuous else "00"):
            self.fault("status", f"scip2: {command} answered status {status}")
            return None
        if len(lines) < 3:
            raise _Bad("half_frame", f"{command} reply without data")
        ts = lines[1]
        if len(ts) != 5 or ts[4] != checksum(ts[:4]):
            raise _Bad("checksum", f"bad timestamp line {ts!r}")
        first, last, cluster = (int(match.group(i)) for i in ((2, 3, 4) if continuous else (9, 10, 11)))
        cluster = max(cluster, 1)
        values = self._values(lines[2], 2 if command.endswith("S") else 3, command)
        expected = (last - first) // cluster + 1 if last >= first else 0
        if len(values) != expected:
            raise _Bad("half_frame" if len(values) < expected else "bad_value",
                       f"{len(values)} values for steps {first}..{last} in clusters of {cluster}")
        if self.params is None:
            self.fault("unexpected", "scip2: a scan before the sensor's parameters (PP); dropped")
            return None
        return Sample(self._ranges(values, first, last, cluster), self._stamp(decode(ts[:4])))

    @staticmethod
    def _values(region, width, command):
        """The numbers in the data lines (64 characters + checksum + LF each, the last one
        shorter), checksums and line ends checked at once (vectorized)."""
        if region.endswith(b"\n"):
            region = region[:-1]
        full, rest = divmod(len(region), 66)
        arr = np.frombuffer(region, np.uint8)
        if rest < 2 or (arr[65:66 * full:66] != 10).any():
            raise _Bad("bad_value", f"{command} data lines are not 64 characters + checksum "
                                    f"({len(region)} bytes of data)")
        body = arr[:66 * full].reshape(full, 66)
        tail = arr[66 * full:]
        sums = (np.append(body[:, :64].sum(axis=1), tail[:-1].sum()) & 0x3F) + 0x30
        if not np.array_equal(sums, np.append(body[:, 64], tail[-1])):
            raise _Bad("checksum", f"{command} data line checksum mismatch")
        chars = np.concatenate([body[:, :64].ravel(), tail[:-1]]).astype(np.int64) - 0x30
        if len(chars) % width or chars.min() < 0 or chars.max() > 0x3F:
            raise _Bad("bad_value", f"{len(chars)} data characters are not {width}-character numbers")
        chars = chars.reshape(-1, width)
        value = chars[:, 0]
        for k in range(1, width):
            value = (value << 6) | chars[:, k]
        return value

    def _ranges(self, values, first, last, cluster):
        """The scan in the model's ray order and the simulated sensor's conventions (m, +-inf, NaN)."""
        index = self.maps.get((first, last, cluster))
        if index is None:
            inside = (self.ray_steps >= first) & (self.ray_steps <= last)
            index = self.maps[(first, last, cluster)] = np.where(inside, (self.ray_steps - first) // cluster, -1)
        p = self.params
        mm = values[np.maximum(index, 0)]
        d = mm * 1e-3
        d[(d < self.range_min) | (mm < p["DMIN"])] = -np.inf
        d[(d > self.range_max) | (mm > p["DMAX"]) | (mm < ERROR_CODE_LIMIT)] = np.inf
        d[index < 0] = np.nan
        return d

    def _stamp(self, ts):
        if self.last_ts is not None and ts < self.last_ts - (1 << 23):
            self.wraps += 1                                      # the 24-bit ms counter wrapped
        self.last_ts = ts
        return (ts + self.wraps * (1 << 24)) * 1e-3


class Scip2Encoder(Encoder):
    """Device side: answers a host's SCIP 2.0 commands as a Hokuyo would and sends MD/GD scans
    of the simulated range sensor (encode(): one scan per call)."""

    def __init__(self, options, sensor, where):
        check_type(sensor, ("range",), "scip2", where)
        angles, step, range_min, range_max, rate = _geometry(sensor, where)
        ares = options.get("ares", round(2 * math.pi / step))
        if isinstance(ares, bool) or not isinstance(ares, (int, float)) or ares != int(ares) or ares < 4:
            raise ProtocolError(f"{where}.ares: expected an integer >= 4 (steps per turn), got {ares!r}")
        ares = int(ares)
        rel = np.rint(angles * ares / (2 * math.pi)).astype(np.int64)
        afrt, amax = int(-rel.min()), int(rel.max() - rel.min())
        if amax > 9999:
            raise ProtocolError(f"{where}.ares: {ares} steps per turn give {amax + 1} steps; SCIP 2.0 "
                                f"numbers steps with 4 digits (at most 10000)")
        self.n = len(angles)
        step_angles = (np.arange(amax + 1) - afrt) * 2 * math.pi / ares
        self.ray_of_step = np.clip(np.rint(step_angles / step).astype(np.int64) + self.n // 2, 0, self.n - 1)
        self.dmin = max(ERROR_CODE_LIMIT + 1, int(round(range_min * 1000)))
        self.dmax = min((1 << 18) - 1, int(round(range_max * 1000)))
        self.params = [("MODL", f"mbsim_ros {sensor.name}"), ("DMIN", self.dmin), ("DMAX", self.dmax),
                       ("ARES", ares), ("AMIN", 0), ("AMAX", amax), ("AFRT", afrt),
                       ("SCAN", int(round(60 * rate)))]
        self.amax = amax
        self.name = sensor.name
        self.buffer = b""
        self.laser = False
        self.stream = None           # active MD/MS: dict(echo, first, last, cluster, width, skip, remaining)
        self.single = []             # pending GD/GS requests
        self.time_ms = 0
        self.time_mode = False
        self.scan_count = 0

    # -- scans --------------------------------------------------------------------------------
    def encode(self, values, stamp):
        self.time_ms = int(round(stamp * 1000)) & 0xFFFFFF
        if self.stream is None and not self.single:
            return b""
        d = np.asarray(values, float)
        finite = np.isfinite(d)
        mm = np.rint(np.where(finite, d, 0.0) * 1000).astype(np.int64)
        too_close = np.isneginf(d) | (finite & (mm < self.dmin))
        mm[~finite | (mm > self.dmax)] = NO_RETURN_CODE        # +inf, NaN, beyond DMAX: no return
        mm[too_close] = TOO_CLOSE_MM
        steps = mm[self.ray_of_step]
        out = b""
        for req in self.single:
            out += req["echo"] + b"\n" + _line(b"00") + self._body(steps, req)
        self.single = []
        s = self.stream
        if s is not None:
            self.scan_count += 1
            if (self.scan_count - 1) % (s["skip"] + 1) == 0:
                if s["remaining"] > 0:
                    s["remaining"] -= 1
                echo = s["echo"][:13] + b"%02d" % s["remaining"] + s["echo"][15:]
                out += echo + b"\n" + _line(b"99") + self._body(steps, s)
                if s["remaining"] == 0 and s["count"] > 0:
                    self.stream = None
        return out

    def _body(self, steps, req):
        v = steps[req["first"]:req["last"] + 1]
        c = req["cluster"]
        if c > 1:
            pad = (-len(v)) % c
            groups = np.append(v, np.full(pad, NO_RETURN_CODE)).reshape(-1, c)
            valid = np.where(groups >= ERROR_CODE_LIMIT, groups, np.iinfo(np.int64).max)
            v = np.where(valid.min(axis=1) == np.iinfo(np.int64).max, NO_RETURN_CODE, valid.min(axis=1))
        if req["width"] == 2:
            v = np.where(v > 4095, NO_RETURN_CODE, v)
        return _line(encode(self.time_ms, 4)) + _data_lines(v, req["width"]) + b"\n"

    # -- commands -----------------------------------------------------------------------------
    def respond(self, data):
        self.buffer += bytes(data).replace(b"\r", b"\n")
        *lines, self.buffer = self.buffer.split(b"\n")
        if len(self.buffer) > MAX_COMMAND:
            self.buffer = b""            # not a command: a real device would answer garbage with an error
        return b"".join(self._command(line) for line in lines if line)

    def _reply(self, echo, status, body=b""):
        return echo + b"\n" + _line(status) + body + b"\n"

    @staticmethod
    def _info(items):
        """Parameter lines "KEY:value;c" (the checksum sums KEY:value)."""
        lines = (f"{k}:{v}".encode("ascii") for k, v in items)
        return b"".join(t + b";" + bytes([checksum(t)]) + b"\n" for t in lines)

    def _command(self, echo):
        body = echo.partition(b";")[0]
        cmd, args = body[:2], body[2:]
        if body == b"SCIP2.0":
            return self._reply(echo, b"0E")               # already in SCIP 2.0 (as UTM/UST sensors answer)
        if cmd in (b"MD", b"MS", b"GD", b"GS"):
            return self._measure(echo, cmd, args)
        if args and cmd not in (b"TM", b"SS"):
            return self._reply(echo, b"0E")
        if cmd == b"PP":
            return self._reply(echo, b"00", self._info(self.params))
        if cmd == b"VV":
            return self._reply(echo, b"00", self._info([
                ("VEND", "mbsim_ros"), ("PROD", f"simulated range sensor {self.name}"), ("FIRM", "1.0"),
                ("PROT", "SCIP 2.0"), ("SERI", self.name)]))
        if cmd == b"II":
            return self._reply(echo, b"00", self._info([
                ("MODL", self.params[0][1]), ("LASR", "ON" if self.laser else "OFF"),
                ("SCSP", self.params[-1][1]), ("MESM", "Measuring" if self.stream else "Idle"),
                ("SBPS", "115200"), ("TIME", f"{self.time_ms:06X}"), ("STAT", "Stable")]))
        if cmd == b"BM":
            was, self.laser = self.laser, True
            return self._reply(echo, b"02" if was else b"00")
        if cmd in (b"QT", b"RS", b"RT"):
            self.laser, self.stream, self.single = False, None, []
            return self._reply(echo, b"00")
        if cmd == b"TM":
            if args == b"0":
                self.time_mode = True
                return self._reply(echo, b"00")
            if args == b"1":
                if not self.time_mode:
                    return self._reply(echo, b"04")
                return self._reply(echo, b"00", _line(encode(self.time_ms, 4)))
            if args == b"2":
                was, self.time_mode = self.time_mode, False
                return self._reply(echo, b"00" if was else b"03")
            return self._reply(echo, b"01")
        if cmd == b"SS":
            # the serial line's speed belongs to the port, not to this emulation: accept
            return self._reply(echo, b"00" if len(args) == 6 and args.isdigit() else b"01")
        return self._reply(echo, b"0E")

    def _measure(self, echo, cmd, args):
        continuous = cmd[:1] == b"M"
        need = 13 if continuous else 10
        if len(args) != need:
            return self._reply(echo, b"0H" if len(args) < need else b"0D")
        fields = (args[0:4], args[4:8], args[8:10]) + ((args[10:11], args[11:13]) if continuous else ())
        for k, f in enumerate(fields):
            if not f.isdigit():
                return self._reply(echo, b"%02d" % (k + 1 if k < 3 else k + 3))
        first, last, cluster = int(fields[0]), int(fields[1]), int(fields[2])
        if first > self.amax or last > self.amax:
            return self._reply(echo, b"04")
        if last < first:
            return self._reply(echo, b"05")
        req = {"echo": echo, "first": first, "last": last, "cluster": max(cluster, 1),
               "width": 2 if cmd[1:] == b"S" else 3}
        if continuous:
            count = int(fields[4])
            req.update(skip=int(fields[3]), count=count, remaining=count)
            self.stream, self.laser, self.scan_count = req, True, 0
            return self._reply(echo, b"00")
        if not self.laser:
            return self._reply(echo, b"10")                  # GD needs the laser on (BM)
        self.single.append(req)
        return b""
