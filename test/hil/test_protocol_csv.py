"""csv protocol: hand-written lines in, SI samples out; faults counted, never raised."""
import numpy as np
import pytest

from mbsim_ros.hil.protocols import ProtocolError, Sample, make_encoder, make_parser
from mbsim_ros.hil.protocols.csv import MAX_LINE
from mbsim_ros.model import ConfigError, Sensor

ACC = Sensor("acc", "accelerometer", "l")
GYRO = Sensor("gyro", "gyro", "l")
FORCE = Sensor("ft", "force", "l")


def test_fields_scale_time_and_ignored_columns():
    p = make_parser({"protocol": "csv", "fields": ["t", "_", "az", "ax", "ay", "label"],
                     "scale": {"ax": 0.01, "az": 2}, "time_scale": 0.001,
                     "port": "/dev/null", "on_fault": "hold"}, ACC)          # runtime keys ignored
    (s,) = p.feed(b"1500,xx,4.5,100,-2,hello\n")
    assert isinstance(s, Sample)
    np.testing.assert_array_equal(s.values, [1.0, -2.0, 9.0])      # ax 100 * 0.01, ay * 1, az 4.5 * 2
    assert s.stamp == 1.5
    assert not p.faults and p.last_fault is None


def test_default_fields_blank_separator_no_stamp():
    p = make_parser({"protocol": "csv", "separator": " ", "scale": 0.5}, FORCE)
    (s,) = p.feed(b"  1 2\t3  4 5 6 \r\n")
    np.testing.assert_array_equal(s.values, [0.5, 1, 1.5, 2, 2.5, 3])
    assert s.stamp is None


def test_line_endings_and_chunking_at_every_byte():
    p0 = make_parser({"protocol": "csv", "fields": ["gx", "gy", "gz"], "separator": ";"}, GYRO)
    stream = b"1;2;3\r\n4;5;6\r7;8;9\n\n10;11;12\n"
    expected = [[1, 2, 3], [4, 5, 6], [7, 8, 9], [10, 11, 12]]
    assert [list(s.values) for s in p0.feed(stream)] == expected
    for cut in range(len(stream) + 1):
        p = make_parser({"protocol": "csv", "fields": ["gx", "gy", "gz"], "separator": ";"}, GYRO)
        got = p.feed(stream[:cut]) + p.feed(stream[cut:])
        assert [list(s.values) for s in got] == expected, cut
        assert not p.faults, (cut, p.faults)
    p = make_parser({"protocol": "csv", "fields": ["gx", "gy", "gz"], "separator": ";"}, GYRO)
    got = [s for b in stream for s in p.feed(bytes([b]))]              # one byte per feed
    assert [list(s.values) for s in got] == expected


def test_bad_lines_are_counted_and_skipped():
    p = make_parser({"protocol": "csv"}, ACC)
    got = p.feed(b"3,4\n"                     # too few columns
                 b"1,2,3,4\n"                 # too many
                 b"1,x,3\n"                   # not a number
                 b"1,nan,3\n"                 # not finite
                 b"\xff\xfe,1,2\n"            # garbage bytes
                 b"ax,ay,az\n"                # a header line
                 b"7,8,9\n")
    assert [list(s.values) for s in got] == [[7, 8, 9]]
    assert p.faults == {"bad_value": 5, "garbage": 1}
    assert "not a number" in p.last_fault or "columns" in p.last_fault


def test_garbage_before_first_line_and_overlong_line():
    p = make_parser({"protocol": "csv"}, ACC)
    got = p.feed(b"\x00\x13 1,2,3\n1,2,3\n")      # a port opened mid-line: the first line is bad
    assert len(got) == 1 and p.faults["garbage"] + p.faults["bad_value"] == 1
    p = make_parser({"protocol": "csv"}, ACC)
    junk = b"9" * (MAX_LINE + 10)
    assert p.feed(junk) == [] and p.faults["overflow"] == 1
    assert p.feed(junk) == []                     # still the same line: not counted again
    got = p.feed(b"5,5\n1,1,1\n")                 # its end, then a good line
    assert [list(s.values) for s in got] == [[1, 1, 1]]
    assert p.faults == {"overflow": 1}


def test_burst_many_lines_in_one_feed():
    p = make_parser({"protocol": "csv", "fields": ["t", "ax", "ay", "az"]}, ACC)
    data = b"".join(b"%d,%d,0,-9.81\n" % (k, k) for k in range(1000))
    got = p.feed(data)
    assert len(got) == 1000
    assert [s.stamp for s in got] == list(range(1000))
    assert got[-1].values[0] == 999


def test_encoder_round_trip():
    opts = {"protocol": "csv", "fields": ["t", "fx", "fy", "fz", "_", "tx", "ty", "tz"],
            "scale": {"fz": 0.001}, "time_scale": 1e-6, "separator": "\t"}
    enc, p = make_encoder(opts, FORCE), make_parser(opts, FORCE)
    rng = np.random.default_rng(1)
    values = rng.normal(size=(5, 6))
    data = b"".join(enc.encode(v, 0.25 * k) for k, v in enumerate(values))
    line = data.split(b"\n")[1].split(b"\t")
    assert len(line) == 8 and line[4] == b"0" and float(line[0]) == pytest.approx(0.25e6)
    assert float(line[3]) == pytest.approx(values[1, 2] * 1000)          # raw = SI / scale
    got = p.feed(data)
    # relative 1e-12: repr() is exact, only the scale division and multiplication round
    np.testing.assert_allclose([s.values for s in got], values, rtol=1e-12)
    np.testing.assert_allclose([s.stamp for s in got], 0.25 * np.arange(5), rtol=1e-12)
    assert enc.respond(b"anything\n") == b""


@pytest.mark.parametrize("opts, sensor, words", [
    ({"protocol": "nmea"}, ACC, ["protocol", "csv"]),
    ({}, ACC, ["protocol"]),
    ({"protocol": "csv", "fields": ["ax", "ay"]}, ACC, ["fields", "az"]),
    ({"protocol": "csv", "fields": ["ax", "ay", "az", "ax"]}, ACC, ["fields", "'ax'", "2 times"]),
    ({"protocol": "csv", "fields": "ax,ay,az"}, ACC, ["fields", "list"]),
    ({"protocol": "csv", "fields": ["gx", "gy", "gz"]}, ACC, ["fields", "ax ay az"]),
    ({"protocol": "csv", "separator": ""}, ACC, ["separator"]),
    ({"protocol": "csv", "scale": "big"}, ACC, ["scale", "number"]),
    ({"protocol": "csv", "scale": {"qx": 1}}, ACC, ["scale", "qx"]),
    ({"protocol": "csv", "scale": 0}, ACC, ["scale", "non-zero"]),
    ({"protocol": "csv", "time_scale": -1}, ACC, ["time_scale", "> 0"]),
    ({"protocol": "csv"}, Sensor("r", "range", "l"), ["protocol", "range"]),
    ("csv", ACC, ["mapping"]),
    ({"protocol": "csv", "feilds": ["ax", "ay", "az"]}, ACC, ["feilds", "fields, scale, separator, time_scale"]),
])
def test_bad_options_one_clear_line(opts, sensor, words):
    for make in (make_parser, make_encoder):
        with pytest.raises(ProtocolError) as e:
            make(opts, sensor)
        msg = str(e.value)
        assert "\n" not in msg and sensor.name in msg
        for w in words:
            assert w in msg, (w, msg)
    assert issubclass(ProtocolError, ConfigError)
