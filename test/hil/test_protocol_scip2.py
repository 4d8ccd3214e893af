"""Hokuyo SCIP 2.0: the spec's encoding examples, hand-written replies, the host/device dialog,
and every fault (garbage, cut replies at every byte, checksum errors, bursts)."""
import math

import numpy as np
import pytest

from mbsim_ros.hil.protocols import ProtocolError, make_encoder, make_parser
from mbsim_ros.hil.protocols.scip2 import checksum, decode, encode
from mbsim_ros.model import Sensor

URG_STEP = 2 * math.pi / 1024                # URG-04LX: 1024 steps per turn
URG = Sensor("urg", "range", "l", params={"scanAngle": 4.18879, "scanStep": URG_STEP, "scanRate": 10,
                                          "maxDistance": 10})          # the bundled SR1's ChestRange: 683 rays
COARSE = Sensor("coarse", "range", "l", params={"scanAngle": math.pi, "scanStep": 0.1, "scanRate": 40,
                                                "minDistance": 0.1, "maxDistance": 4.0})
MM = 0.5e-3                                  # the protocol's resolution: whole millimetres, rounded


# -- an independent SCIP writer for the tests (not the module's encoder) ------------------------
def csum(text: bytes) -> bytes:
    return bytes([(sum(text) & 0x3F) + 0x30])


def chars(value, width):
    return bytes(((value >> (6 * (width - 1 - k))) & 0x3F) + 0x30 for k in range(width))


def reply(echo, status, *lines):
    """echo LF, status+sum LF, each line+sum LF, LF."""
    out = echo + b"\n" + status + csum(status) + b"\n"
    for line in lines:
        out += line + csum(line) + b"\n"
    return out + b"\n"


def data_lines(values, width=3):
    text = b"".join(chars(v, width) for v in values)
    return [text[k:k + 64] for k in range(0, len(text), 64)]


def pp_reply(dmin=20, dmax=5600, ares=1024, amin=44, amax=725, afrt=384):
    out = b"PP\n00P\n"
    for key, value in [(b"MODL", b"URG-04LX(Hokuyo Automatic Co.,Ltd.)"), (b"DMIN", dmin), (b"DMAX", dmax),
                       (b"ARES", ares), (b"AMIN", amin), (b"AMAX", amax), (b"AFRT", afrt), (b"SCAN", 600)]:
        text = key + b":" + (value if isinstance(value, bytes) else b"%d" % value)
        out += text + b";" + csum(text) + b"\n"
    return out + b"\n"


def started(sensor=URG, **pp):
    """A parser after startup and a hand-written PP reply; returns (parser, its MD command)."""
    p = make_parser({"protocol": "scip2"}, sensor)
    assert p.startup() == b"SCIP2.0\nQT\nPP\n"
    assert p.feed(b"SCIP2.0\n0Ee\n\nQT\n00P\n\n" + pp_reply(**pp)) == []
    return p, p.pending_output()


def md_scan(first, last, values, ts, remaining=0, width=3):
    cmd = b"MD" if width == 3 else b"MS"
    echo = cmd + b"%04d%04d01%d%02d" % (first, last, 0, remaining)
    return reply(echo, b"99", chars(ts, 4), *data_lines(values, width))


# -- the spec's examples ------------------------------------------------------------------------
def test_spec_encoding_examples():
    assert decode(b"CB") == 1234 and encode(1234, 2) == b"CB"            # 2-character example
    assert decode(b"1Dh") == 5432 and encode(5432, 3) == b"1Dh"          # 3-character example
    assert decode(b"m2@0") == 16000000 and encode(16000000, 4) == b"m2@0"  # 4-character (timestamp)
    assert bytes([checksum(b"00")]) == b"P" and bytes([checksum(b"99")]) == b"b"
    assert bytes([checksum(b"DMIN:20")]) == b"4" and bytes([checksum(b"SCAN:600")]) == b"e"


def test_hand_written_gd_reply():
    p, _ = started()
    # GD over steps 384..386: 1234 mm ("0CB"), 5432 mm ("1Dh"), error code 1 ("001"); time "m2@0"
    frame = b"GD0384038600\n00P\nm2@0?\n0CB1Dh001S\n\n"
    (s,) = p.feed(frame)
    assert s.stamp == 16000.0
    front = len(s.values) // 2                    # ray n//2 looks along the front step AFRT = 384
    assert s.values[front] == 1.234 and s.values[front + 1] == 5.432 and s.values[front + 2] == np.inf
    assert np.isnan(s.values[:front]).all() and np.isnan(s.values[front + 3:]).all()
    assert not p.faults


def test_parser_requests_the_model_rays_and_maps_steps():
    p, md = started()
    # 683 rays at steps 43..725; the URG-04LX measures 44..725: the classic URG-04LX command
    assert md == b"MD0044072501000\n"
    values = [1000 + k for k in range(725 - 44 + 1)]
    values[0], values[1], values[2] = 5, 20, 5601      # error code, below DMIN.. (DMIN 20: valid), beyond DMAX
    assert p.feed(reply(b"MD0044072501000", b"00")) == []     # the MD acknowledgement
    (s,) = p.feed(md_scan(44, 725, values, ts=1234))
    assert s.stamp == 1.234 and len(s.values) == 683
    assert np.isnan(s.values[0])                        # ray 0 looks at step 43, outside AMIN
    assert s.values[1] == np.inf and s.values[2] == 0.020 and s.values[3] == np.inf
    np.testing.assert_array_equal(s.values[4:], np.arange(1003, 1000 + 682) * 1e-3)
    assert not p.faults
    # a device with DMIN 23 (UTM-30LX): 20..22 mm are closer than it can measure -> -inf
    p, _ = started(dmin=23)
    (s,) = p.feed(md_scan(44, 725, [22] + [3000] * 681, ts=0))
    assert s.values[1] == -np.inf and s.values[2] == 3.0


def test_model_limits_and_coarser_model():
    # model rays every 0.1 rad, device 1024 steps per turn: ray i reads step 384 + round(0.1 i 1024 / 2 pi)
    p, md = started(COARSE)
    first, last = int(md[2:6]), int(md[6:10])
    steps = 384 + np.rint((np.arange(31) - 15) * 0.1 * 1024 / (2 * math.pi)).astype(int)
    assert (first, last) == (steps[0], steps[-1])
    values = np.full(last - first + 1, 2500)
    values[steps - first] = 50 + 200 * np.arange(31)        # only the steps the rays use
    (s,) = p.feed(md_scan(first, last, values, ts=7))
    expected = (50 + 200 * np.arange(31)) * 1e-3
    expected[expected < 0.1] = -np.inf                       # model minDistance 0.1
    expected[expected > 4.0] = np.inf                        # model maxDistance 4
    np.testing.assert_array_equal(s.values, expected)


# -- the dialog with our own device emulation -------------------------------------------------
def dialog(sensor, encoder_options=None):
    enc = make_encoder({"protocol": "scip2", **(encoder_options or {})}, sensor)
    p = make_parser({"protocol": "scip2"}, sensor)
    assert p.feed(enc.respond(p.startup())) == []
    assert p.feed(enc.respond(p.pending_output())) == []      # MD accepted
    assert not p.faults, p.last_fault
    return enc, p


def random_scan(n, rng, lo, hi):
    d = rng.uniform(lo, hi, n)
    d[rng.random(n) < 0.1] = np.inf
    d[rng.random(n) < 0.05] = -np.inf
    return d


@pytest.mark.parametrize("sensor", [URG, COARSE])
def test_round_trip_exact_to_the_millimetre(sensor):
    enc, p = dialog(sensor)
    rng = np.random.default_rng(3)
    n = len(p.angles)
    for k in range(5):
        d = random_scan(n, rng, 0.1, float(sensor.params["maxDistance"]))
        (s,) = p.feed(enc.encode(d, 0.025 * k))
        assert s.stamp == pytest.approx(0.025 * k, abs=0.5e-3)      # ms timestamps
        assert np.array_equal(np.isposinf(s.values), np.isposinf(d))
        assert np.array_equal(np.isneginf(s.values), np.isneginf(d))
        fin = np.isfinite(d)
        assert np.abs(s.values[fin] - d[fin]).max() <= MM + 1e-12
    assert not p.faults


def test_clusters_map_rays_to_their_group():
    """A host asking for clusters of 3 steps: each ray reads its cluster's nearest distance."""
    enc, p = dialog(URG)
    enc.respond(b"MD0000068203000\n")                        # ARES 1024 = the model's step: step k is ray k
    d = np.random.default_rng(4).uniform(0.5, 9.0, 683)
    (s,) = p.feed(enc.encode(d, 1.0))
    groups = np.minimum.reduceat(d, np.arange(0, 683, 3))      # the minimum of each cluster
    assert np.abs(s.values - np.repeat(groups, 3)[:683]).max() <= MM + 1e-12


def test_encoder_answers_like_urg_library_expects():
    """The replies urg_library (urg_node's driver) checks on open: QT, PP with 8 parameter lines
    whose checksums cover 'KEY:value', VV with 5, II with 7; echo first; every line's checksum."""
    enc = make_encoder({"protocol": "scip2"}, URG)
    assert enc.respond(b"\n") == b""                          # urg_library clears the line with an LF
    for cmd, lines in [(b"QT", 0), (b"PP", 8), (b"VV", 5), (b"II", 7)]:
        out = enc.respond(cmd + b"\n")
        assert out.endswith(b"\n\n")
        got = out[:-2].split(b"\n")
        assert got[0] == cmd and got[1] == b"00P" and len(got) == 2 + lines
        for line in got[2:]:
            assert line[-1:] == csum(line[:-2])
    pp = dict(line[:-2].split(b":") for line in enc.respond(b"PP\n")[:-2].split(b"\n")[2:])
    assert pp[b"ARES"] == b"1024" and pp[b"AMIN"] == b"0" and pp[b"AFRT"] == b"341" and pp[b"AMAX"] == b"682"
    assert pp[b"DMAX"] == b"10000" and pp[b"SCAN"] == b"600"
    assert enc.respond(b"ME0000068201000\n") == b"ME0000068201000\n0Ee\n\n"   # no intensities


def test_md_scan_count_skip_and_qt():
    enc = make_encoder({"protocol": "scip2"}, URG)
    d = np.full(683, 1.5)
    assert enc.encode(d, 0.0) == b""                          # nothing requested
    assert enc.respond(b"MD0000068201103;hi\n") == b"MD0000068201103;hi\n00P\n\n"
    frames = [enc.encode(d, 0.1 * k) for k in range(8)]
    sent = [f for f in frames if f]
    assert [f.split(b"\n")[0] for f in sent] == [b"MD0000068201102;hi", b"MD0000068201101;hi",
                                                 b"MD0000068201100;hi"]
    assert frames[1] == b"" and frames[3] == b""              # scan interval 1: every second scan
    enc.respond(b"MD0000068201000\n")
    assert enc.encode(d, 1.0).startswith(b"MD0000068201000\n99b\n")
    assert enc.respond(b"QT\n") == b"QT\n00P\n\n"
    assert enc.encode(d, 1.1) == b""


def test_gd_ms_cluster_and_command_errors():
    enc = make_encoder({"protocol": "scip2"}, URG)
    assert enc.respond(b"GD0000068200\n") == b"GD0000068200\n10" + csum(b"10") + b"\n\n"  # laser off
    assert enc.respond(b"BM\n") == b"BM\n00P\n\n" and enc.respond(b"BM\n") == b"BM\n02R\n\n"
    assert enc.respond(b"GD0340034302\n") == b""              # answered with the next scan
    d = np.full(683, 2.0)
    d[340], d[341], d[342], d[343] = 1.0, 0.5, np.inf, np.inf
    out = enc.encode(d, 2.5)
    assert out == reply(b"GD0340034302", b"00", chars(2500, 4), chars(500, 3) + chars(1, 3))
    assert enc.encode(d, 2.6) == b""                          # single scan only
    enc.respond(b"MS0340034101000\n")
    frame = enc.encode(np.full(683, 5.0), 3.0)                # 5000 mm does not fit 2 characters
    assert frame.split(b"\n")[3] == chars(1, 2) * 2 + csum(chars(1, 2) * 2)
    for cmd, status in [(b"MD0000999901000", b"04"), (b"MD0100005001000", b"05"), (b"MD00x0068201000", b"01"),
                        (b"MD000006820100", b"0H"), (b"XX", b"0E"), (b"SCIP2.0", b"0E")]:
        assert enc.respond(cmd + b"\r\n") == cmd + b"\n" + status + csum(status) + b"\n\n", cmd
    assert enc.respond(b"TM1\n") == b"TM1\n04" + csum(b"04") + b"\n\n"
    enc.respond(b"TM0\n")
    assert enc.respond(b"TM1\n") == reply(b"TM1", b"00", chars(3000, 4))


def test_timestamp_wraps():
    enc, p = dialog(URG)
    d = np.full(683, 1.0)
    stamps = [4660.0, 16777.0, 16777.3, 16800.0]           # the 24-bit ms counter wraps at 16777.216 s
    got = [p.feed(enc.encode(d, t))[0].stamp for t in stamps]
    np.testing.assert_allclose(got, stamps, atol=0.5e-3)


# -- faults ---------------------------------------------------------------------------------------
def scans(count, seed=0):
    enc, p = dialog(URG)
    rng = np.random.default_rng(seed)
    data = [random_scan(683, rng, 0.05, 9.0) for _ in range(count)]
    return p, [enc.encode(d, 0.025 * k) for k, d in enumerate(data)], data


def same(sample, d):
    fin = np.isfinite(d)
    return np.array_equal(np.isinf(sample.values), ~fin) and np.abs(sample.values[fin] - d[fin]).max() <= MM + 1e-12


def test_split_at_every_byte_and_one_byte_feeds():
    p0, (frame,), (d,) = scans(1)
    for cut in range(len(frame) + 1):
        p, _, _ = scans(0)
        got = p.feed(frame[:cut]) + p.feed(frame[cut:])
        assert len(got) == 1 and same(got[0], d), cut
        assert not p.faults, (cut, p.faults)
    p, _, _ = scans(0)
    got = [s for b in frame for s in p.feed(bytes([b]))]
    assert len(got) == 1 and same(got[0], d) and not p.faults


def test_burst_garbage_and_checksum_errors():
    p, frames, data = scans(40)
    got = p.feed(b"".join(frames))
    assert len(got) == 40 and all(same(s, d) for s, d in zip(got, data)) and not p.faults
    p, frames, data = scans(3, seed=1)
    got = p.feed(b"\x00\xffnoise\n" + frames[0] + b"zz\x13" + frames[1] + frames[2])
    assert len(got) == 3 and all(same(s, d) for s, d in zip(got, data))
    assert p.faults == {"garbage": 2}                           # before frame 0 and before frame 1
    p, frames, data = scans(2, seed=2)
    bad = bytearray(frames[0])
    bad[200] = ord("0") if bad[200] != ord("0") else ord("1")   # one data character changed
    got = p.feed(bytes(bad) + frames[1])
    assert len(got) == 1 and same(got[0], data[1])
    assert p.faults == {"checksum": 1} and "checksum" in p.last_fault


def test_garbage_blocks_counted():
    p, frames, data = scans(1)
    assert p.feed(b"\x00\xff\x13\n\n" + frames[0])[0] is not None
    assert p.faults["garbage"] == 1


def test_cut_reply_followed_by_a_whole_one_at_every_cut():
    p0, (first, second), (_, d2) = scans(2)
    for cut in range(1, len(first) - 1):
        p, _, _ = scans(0)
        got = p.feed(first[:cut] + second)
        assert 1 <= len(got) <= 2 and same(got[-1], d2), cut
        if len(got) == 1:           # the cut reply is dropped and counted
            assert sum(p.faults.values()) == 1 and set(p.faults) <= {"half_frame", "garbage"}, (cut, p.faults)


def test_device_status_errors_and_bad_pp():
    p, _ = started()
    assert p.feed(reply(b"MD0044072501000", b"0M")) == []    # unstable
    assert p.faults["status"] == 1 and "0M" in p.last_fault
    p = make_parser({"protocol": "scip2"}, URG)
    p.startup()
    bad = pp_reply().replace(b"ARES:1024;\\", b"ARES:1024;x")
    assert p.feed(bad) == [] and p.faults["checksum"] == 1
    assert p.pending_output() == b"PP\n"                      # asks again
    p.feed(pp_reply())
    assert p.pending_output() == b"MD0044072501000\n"
    p = make_parser({"protocol": "scip2"}, URG)
    p.startup()
    p.feed(pp_reply(amin=900, amax=1000))                     # behind the model's rays
    assert p.pending_output() == b"" and p.faults["bad_value"] == 1
    p = make_parser({"protocol": "scip2"}, URG)
    p.startup()
    junk = b"1" * 300_000
    assert p.feed(junk) == [] and p.faults["overflow"] == 1


@pytest.mark.parametrize("make, opts, sensor, words", [
    (make_parser, {"protocol": "scip2", "ares": 1024}, URG, ["ares", "emulate"]),
    (make_encoder, {"protocol": "scip2", "ares": 10.5}, URG, ["ares", "integer"]),
    (make_encoder, {"protocol": "scip2", "ares": 100000}, URG, ["ares", "4 digits"]),
    (make_parser, {"protocol": "scip2"}, Sensor("acc", "accelerometer", "l"), ["scip2", "range", "accelerometer"]),
    (make_parser, {"protocol": "scip2", "fields": ["ax"]}, URG, ["fields", "scip2"]),
])
def test_bad_options(make, opts, sensor, words):
    with pytest.raises(ProtocolError) as e:
        make(opts, sensor)
    for w in words:
        assert w in str(e.value), (w, str(e.value))
