"""Line-based text protocol: one sample per line, columns separated by `separator`.

Options (the sensor's devices:/emulate: entry):
  fields      column names in line order. Channels per sensor type: ax ay az (accelerometer),
              gx gy gz (gyro), fx fy fz tx ty tz (force); every channel of the sensor exactly
              once. `t` = the device's time; `_` or any other name = a column that is ignored
              (it may hold anything). Default: the sensor's channels in order, no time.
  separator   column separator (default ","); a blank separator (" ", "\\t") splits on any run
              of spaces and tabs.
  scale       raw * scale = SI: one number for every channel, or a mapping channel -> number
              (channels not named keep 1). Default 1.
  time_scale  device time units -> s (e.g. 0.001 for milliseconds). Default 1.
Lines end in LF, CR or CR LF; blank lines are skipped. A line with the wrong column count, a
used column that is not a finite number, or bytes that are not ASCII is dropped and counted as
a fault ("bad_value"; "garbage" for non-ASCII); a line longer than MAX_LINE bytes is dropped up
to its end ("overflow"). The encoder writes the same columns (ignored ones as 0) ended by LF.
"""
import numpy as np

from . import CHANNELS, Encoder, Parser, ProtocolError, Sample, check_type, number

OPTIONS = {"fields", "separator", "scale", "time_scale"}
MAX_LINE = 4096          # bytes; far above any sensor line, so only a stream without newlines trips it


class _Layout:
    """The column layout shared by parser and encoder."""

    def __init__(self, options, sensor, where):
        check_type(sensor, tuple(CHANNELS), "csv", where)
        channels = CHANNELS[sensor.type]
        fields = options.get("fields", list(channels))
        if (not isinstance(fields, (list, tuple)) or not fields
                or not all(isinstance(f, str) and f for f in fields)):
            raise ProtocolError(f"{where}.fields: expected a list of column names, got {fields!r}")
        fields = list(fields)
        for name in (*channels, "t"):
            if fields.count(name) > 1:
                raise ProtocolError(f"{where}.fields: column {name!r} appears {fields.count(name)} times")
        missing = [c for c in channels if c not in fields]
        if missing:
            raise ProtocolError(f"{where}.fields: a {sensor.type} needs columns {' '.join(channels)} "
                                f"(missing {' '.join(missing)}); got {fields}")
        separator = options.get("separator", ",")
        if not isinstance(separator, str) or not separator or "\n" in separator or "\r" in separator:
            raise ProtocolError(f"{where}.separator: expected a non-empty string without line breaks, "
                                f"got {separator!r}")
        scale = options.get("scale", 1.0)
        if isinstance(scale, dict):
            unknown = sorted(set(scale) - set(channels))
            if unknown:
                raise ProtocolError(f"{where}.scale: unknown channel(s) {', '.join(map(str, unknown))}; "
                                    f"expected some of {' '.join(channels)}")
            scale = [number(scale.get(c, 1.0), f"{where}.scale.{c}") for c in channels]
        else:
            scale = [number(scale, f"{where}.scale")] * len(channels)
        if not all(scale):
            raise ProtocolError(f"{where}.scale: expected non-zero numbers, got {options.get('scale')!r}")
        self.fields = fields
        self.columns = [fields.index(c) for c in channels]           # column of each channel, in channel order
        self.time_column = fields.index("t") if "t" in fields else None
        self.scale = np.array(scale)
        self.time_scale = number(options.get("time_scale", 1.0), f"{where}.time_scale", positive=True)
        self.separator = separator
        self.blank_separator = not separator.strip()


class CsvParser(Parser):
    def __init__(self, options, sensor, where):
        super().__init__()
        self.layout = _Layout(options, sensor, where)
        self.buffer = b""
        self.skipping = False        # inside an overlong line: drop bytes up to its end

    def feed(self, data):
        data = bytes(data).replace(b"\r", b"\n")
        end = data.rfind(b"\n")
        if end < 0:
            self._keep(data)
            return []
        lines = (self.buffer + data[:end]).split(b"\n")
        if self.skipping:
            lines = lines[1:]        # the rest of the overlong line
            self.skipping = False
        self.buffer = b""
        self._keep(data[end + 1:])
        samples = []
        for line in lines:
            sample = self._line(line)
            if sample is not None:
                samples.append(sample)
        return samples

    def _keep(self, tail):
        if self.skipping:
            return
        self.buffer += tail
        if len(self.buffer) > MAX_LINE:
            self.fault("overflow", f"csv: no line end within {MAX_LINE} bytes; dropped them")
            self.buffer = b""
            self.skipping = True

    def _line(self, line):
        line = line.strip()
        if not line:
            return None
        try:
            text = line.decode("ascii")
        except UnicodeDecodeError:
            self.fault("garbage", f"csv: non-ASCII bytes in line {line[:80]!r}")
            return None
        lay = self.layout
        cols = text.split() if lay.blank_separator else text.split(lay.separator)
        if len(cols) != len(lay.fields):
            self.fault("bad_value", f"csv: {len(cols)} columns, expected {len(lay.fields)} "
                                    f"({' '.join(lay.fields)}): {text[:80]!r}")
            return None
        try:
            raw = [float(cols[i]) for i in lay.columns]
            stamp = None if lay.time_column is None else float(cols[lay.time_column]) * lay.time_scale
        except ValueError:
            self.fault("bad_value", f"csv: a column is not a number: {text[:80]!r}")
            return None
        values = np.array(raw) * lay.scale
        if not np.isfinite(values).all() or (stamp is not None and not np.isfinite(stamp)):
            self.fault("bad_value", f"csv: a column is not finite: {text[:80]!r}")
            return None
        return Sample(values, stamp)


class CsvEncoder(Encoder):
    def __init__(self, options, sensor, where):
        self.layout = _Layout(options, sensor, where)

    def encode(self, values, stamp):
        lay = self.layout
        cols = ["0"] * len(lay.fields)
        for col, x in zip(lay.columns, np.asarray(values, float) / lay.scale):
            cols[col] = repr(float(x))
        if lay.time_column is not None:
            cols[lay.time_column] = repr(float(stamp) / lay.time_scale)
        return (lay.separator.join(cols) + "\n").encode("ascii")
