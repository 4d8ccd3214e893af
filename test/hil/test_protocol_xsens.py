"""Xsens Xbus MTData2: messages recorded from a real device, frames packed by hand from the
protocol document, every number format, and every fault (garbage, cut messages at every byte,
checksum errors, lost messages, bursts)."""
import struct

import numpy as np
import pytest

from mbsim_ros.hil.protocols import ProtocolError, make_encoder, make_parser
from mbsim_ros.model import Sensor

ACC = Sensor("imu_acc", "accelerometer", "l")
GYRO = Sensor("imu_gyro", "gyro", "l")

# Two consecutive MTData2 messages recorded from an Xsens MTi (einride/xsens-go,
# testdata/1/messages.golden) and the values that project's decoder gives for them
# (testdata/1/output.golden): PacketCounter, SampleTimeFine, Acceleration, RateOfTurn.
RECORDED = [
    ("faff3662102002a9861060040314ed5310100c07440be007e301140d2f1837e020040180000740200cbc8e5466c0e82f10bf9ad29e"
     "40100cb935269fbd949930bc46234680200cbb425c343b1068df3ae1c7e58030103f800001b778c7f03738d82737107feef7",
     43398, 51703123, (-0.017374228686094284, -7.255744934082031, -1.209552526473999),
     (-0.002965700812637806, 0.0022035164292901754, 0.0017225710907950997)),
    ("faff3671102002a9871060040314edb710100c07dca26007e301140d2f1837e020040000000520300cc2c6ec743e083f53c33330c"
     "b40200c3ce7e9cbc11a8e2fbfd04d0c40100c39931323bdc5d49bbc8552c480200c3ab21f42bb513ab9bb51e94c8030103f80000136e3"
     "ff0cb785e822b78657df19",
     43399, 51703223, (0.028309723362326622, -9.659712791442871, -1.6273512840270996),
     (0.0013589637819677591, -0.0031925870571285486, -0.0032029924914240837)),
]


# -- an independent Xbus writer for the tests, straight from the document -----------------------
def xbus(mid, data):
    body = bytes([0xFF, mid]) + (bytes([len(data)]) if len(data) < 255 else b"\xff" + struct.pack(">H", len(data)))
    body += data
    return b"\xfa" + body + bytes([(256 - sum(body) % 256) % 256])


def packet(xdi, payload):
    return struct.pack(">HB", xdi, len(payload)) + payload


def mtdata2(counter, ticks, acc=None, gyro=None, extra=b""):
    data = packet(0x1020, struct.pack(">H", counter)) + packet(0x1060, struct.pack(">I", ticks)) + extra
    if acc is not None:
        data += packet(0x4020, struct.pack(">3f", *acc))
    if gyro is not None:
        data += packet(0x8020, struct.pack(">3f", *gyro))
    return xbus(0x36, data)


def f32(v):
    return np.asarray(v, np.float32).astype(float)


def test_recorded_device_messages():
    stream = b"".join(bytes.fromhex(m[0]) for m in RECORDED)
    for sensor, column in ((ACC, 3), (GYRO, 4)):
        p = make_parser({"protocol": "xsens"}, sensor)
        got = p.feed(stream)
        assert [s.values.tolist() for s in got] == [list(m[column]) for m in RECORDED]
        assert [s.stamp for s in got] == pytest.approx([m[2] * 1e-4 for m in RECORDED], abs=1e-9)
        assert not p.faults and p.counter == RECORDED[-1][1]


def test_startup_and_acks_match_recorded_bytes():
    # GoToMeasurement "FA FF 10 00 F1", GoToConfig "FA FF 30 00 D1" and its ack "FA FF 31 00 D0", and
    # an OutputConfiguration ack recorded from an MTi-300 ("XSens Golden Packets" configuration log)
    assert make_parser({"protocol": "xsens"}, ACC).startup() == bytes.fromhex("faff1000f1")
    enc = make_encoder({"protocol": "xsens"}, ACC)
    assert enc.respond(bytes.fromhex("faff3000d1")) == bytes.fromhex("faff3100d0")
    assert enc.encode([0, 0, 9.8], 0.0) == b""                      # config mode: no stream
    config = bytes.fromhex("10 20 FF FF 10 60 FF FF")
    assert enc.respond(xbus(0xC0, config)) == bytes.fromhex("fa ff c1 08 10 20 ff ff 10 60 ff ff 9c")
    assert enc.respond(bytes.fromhex("faff1000f1")) == bytes.fromhex("faff1100f0")
    frame = enc.encode([0, 0, 9.8], 0.5)                            # only the configured items
    assert frame == xbus(0x36, packet(0x1020, b"\x00\x00") + packet(0x1060, struct.pack(">I", 5000)))


def test_hand_packed_messages_both_quantities_and_extended_length():
    a, g = (0.5, -9.80665, 1.25), (0.01, -0.02, 3.0)
    filler = packet(0x0810, bytes(250))                              # an item we do not use, pushes LEN > 254
    msgs = mtdata2(7, 123456, a, g) + mtdata2(8, 123556, a, g, extra=filler)
    assert msgs[len(mtdata2(7, 123456, a, g)) + 3] == 0xFF          # the second one has the extended length
    for sensor, want in ((ACC, a), (GYRO, g)):
        p = make_parser({"protocol": "xsens"}, sensor)
        got = p.feed(msgs)
        assert len(got) == 2 and not p.faults
        np.testing.assert_array_equal(got[0].values, f32(want))
        assert got[0].stamp == pytest.approx(12.3456) and got[1].stamp == pytest.approx(12.3556)
    p = make_parser({"protocol": "xsens"}, ACC)
    assert p.feed(mtdata2(9, 1, gyro=g)) == [] and not p.faults    # no acceleration in it: skipped
    hr = xbus(0x36, packet(0x4040, struct.pack(">3f", *a)))        # AccelerationHR, no Acceleration
    (s,) = p.feed(hr)
    np.testing.assert_array_equal(s.values, f32(a))
    assert s.stamp is None                                           # no SampleTimeFine in it


def fp1632(x):
    i = int(round(x * 2 ** 32)) & 0xFFFFFFFFFFFF
    b = i.to_bytes(6, "big")                       # b5 b4 b3 b2 b1 b0
    return b[2:] + b[:2]                           # sent as b3 b2 b1 b0 b5 b4


@pytest.mark.parametrize("precision, low_bits, pack, resolution", [
    ("float32", 0, lambda v: struct.pack(">3f", *v), 1e-6),
    ("fp1220", 1, lambda v: b"".join(struct.pack(">i", round(x * 2 ** 20)) for x in v), 2.0 ** -20),
    ("fp1632", 2, lambda v: b"".join(fp1632(x) for x in v), 2.0 ** -32),
    ("float64", 3, lambda v: struct.pack(">3d", *v), 0.0),
])
def test_number_formats(precision, low_bits, pack, resolution):
    v = (-9.80665, 0.123456789, -1500.000001)
    msg = xbus(0x36, packet(0x8020 | low_bits, pack(v)))
    (s,) = make_parser({"protocol": "xsens"}, GYRO).feed(msg)
    # each format's own resolution (float32: relative 1e-6 of 1500 ~ 1e-4 absolute)
    np.testing.assert_allclose(s.values, v, rtol=resolution, atol=resolution)
    enc = make_encoder({"protocol": "xsens", "precision": precision}, GYRO)
    frame = enc.encode(v, 0.25)
    assert packet(0x8020 | low_bits, pack(v)) in frame              # our encoder writes the same bytes
    (s2,) = make_parser({"protocol": "xsens"}, GYRO).feed(frame)
    np.testing.assert_array_equal(s2.values, s.values)


def test_encoder_round_trip_six_values_counter_and_commands():
    enc = make_encoder({"protocol": "xsens"}, ACC)
    pa, pg = make_parser({"protocol": "xsens"}, ACC), make_parser({"protocol": "xsens"}, GYRO)
    rng = np.random.default_rng(5)
    values = rng.normal(size=(20, 6)) * [5, 5, 5, 1, 1, 1]
    stream = b"".join(enc.encode(v, 0.001 * k) for k, v in enumerate(values))
    acc, gyro = pa.feed(stream), pg.feed(stream)
    np.testing.assert_array_equal([s.values for s in acc], f32(values[:, :3]))
    np.testing.assert_array_equal([s.values for s in gyro], f32(values[:, 3:]))
    np.testing.assert_allclose([s.stamp for s in acc], 0.001 * np.arange(20), atol=1e-12)
    assert not pa.faults and not pg.faults
    assert enc.respond(xbus(0x00, b"")).startswith(b"\xfa\xff\x01\x04")         # DeviceID
    assert enc.respond(xbus(0x1C, b""))[2] == 0x1D                               # ProductCode
    assert enc.respond(xbus(0x77, b"")) == xbus(0x42, b"\x04")                   # not emulated: Error
    cmd = xbus(0x30, b"")
    assert enc.respond(cmd[:3]) == b"" and enc.respond(cmd[3:]) == xbus(0x31, b"")   # split command
    bad = bytearray(xbus(0x10, b""))
    bad[-1] ^= 1
    assert enc.respond(bytes(bad)) == b""                                         # corrupt: ignored
    with pytest.raises(ProtocolError):
        make_encoder({"protocol": "xsens", "precision": "int8"}, ACC)


def frames(count, seed=0):
    rng = np.random.default_rng(seed)
    acc = rng.normal(size=(count, 3)) * 5
    return [mtdata2(k, 1000 + 10 * k, acc[k], (0, 0, 0)) for k in range(count)], f32(acc)


def test_split_at_every_byte_and_one_byte_feeds():
    (frame,), (want,) = frames(1)
    for cut in range(len(frame) + 1):
        p = make_parser({"protocol": "xsens"}, ACC)
        got = p.feed(frame[:cut]) + p.feed(frame[cut:])
        assert len(got) == 1 and np.array_equal(got[0].values, want) and not p.faults, cut
    p = make_parser({"protocol": "xsens"}, ACC)
    got = [s for b in frame for s in p.feed(bytes([b]))]
    assert len(got) == 1 and np.array_equal(got[0].values, want) and not p.faults


def test_burst_garbage_checksum_and_gaps():
    msgs, want = frames(1000)
    p = make_parser({"protocol": "xsens"}, ACC)
    got = p.feed(b"".join(msgs))
    assert len(got) == 1000 and np.array_equal([s.values for s in got], want) and not p.faults
    msgs, want = frames(4, seed=1)
    p = make_parser({"protocol": "xsens"}, ACC)
    bad = bytearray(msgs[1])
    bad[12] ^= 0x40                                                    # a payload bit flipped
    got = p.feed(b"\x00\x13\xfa\x01" + msgs[0] + b"\xfa\xff\x36" + bytes(bad) + msgs[2] + b"junk" + msgs[3])
    assert np.array_equal([s.values for s in got], want[[0, 2, 3]])
    assert p.faults["garbage"] == 2                                    # before message 0 and "junk"
    assert p.faults["checksum"] + p.faults["half_frame"] == 1          # the false start swallows the bad one
    assert p.faults["gap"] == 1                                        # message 1 never arrived
    p = make_parser({"protocol": "xsens"}, ACC)
    p.feed(msgs[0] + msgs[3])
    assert p.faults == {"gap": 1} and "2 messages lost" in p.last_fault
    p = make_parser({"protocol": "xsens"}, ACC)
    p.feed(mtdata2(65535, 4294967000, (1, 2, 3)) + mtdata2(0, 200, (1, 2, 3)))   # both counters wrap
    assert not p.faults


def test_message_ending_in_a_preamble_byte():
    """A checksum of 0xFA at the end of a feed is part of its message, not a next preamble."""
    counter = next(c for c in range(1000) if mtdata2(c, 0, (1, 2, 3))[-1] == 0xFA)
    p = make_parser({"protocol": "xsens"}, ACC)
    got = p.feed(mtdata2(counter, 0, (1, 2, 3))) + p.feed(mtdata2(counter + 1, 10, (1, 2, 3)))
    assert len(got) == 2 and not p.faults
    enc = make_encoder({"protocol": "xsens"}, ACC)
    cmd = next(xbus(0xC0, bytes([0x10, 0x20, 0xFF, k])) for k in range(256)
               if xbus(0xC0, bytes([0x10, 0x20, 0xFF, k]))[-1] == 0xFA)
    assert enc.respond(cmd)[2] == 0xC1 and enc.respond(xbus(0x30, b"")) == xbus(0x31, b"")


def test_time_unwraps():
    p = make_parser({"protocol": "xsens"}, ACC)
    got = p.feed(mtdata2(1, 2 ** 32 - 10, (0, 0, 1)) + mtdata2(2, 5, (0, 0, 1)))
    assert got[1].stamp - got[0].stamp == pytest.approx(15e-4)


def test_cut_message_followed_by_a_whole_one_at_every_cut():
    (first, second), want = frames(2)
    for cut in range(1, len(first)):
        p = make_parser({"protocol": "xsens"}, ACC)
        got = p.feed(first[:cut] + second)
        assert len(got) == 1 and np.array_equal(got[0].values, want[1]), cut
        assert 1 <= sum(p.faults.values()) <= 2 and set(p.faults) <= {"half_frame", "checksum", "garbage"}, (cut, p.faults)


@pytest.mark.parametrize("make, opts, sensor, words", [
    (make_parser, {"protocol": "xsens", "precision": "float64"}, ACC, ["precision", "emulate"]),
    (make_encoder, {"protocol": "xsens", "precision": 3}, ACC, ["precision", "float32"]),
    (make_parser, {"protocol": "xsens"}, Sensor("f", "force", "l"), ["xsens", "accelerometer or gyro", "force"]),
    (make_parser, {"protocol": "xsens", "separator": ";"}, ACC, ["separator", "xsens"]),
])
def test_bad_options(make, opts, sensor, words):
    with pytest.raises(ProtocolError) as e:
        make(opts, sensor)
    for w in words:
        assert w in str(e.value), (w, str(e.value))
