"""Cost of the hardware-in-the-loop device protocols (mbsim_ros.hil.protocols) per frame:
parsing what a real device sends, and encoding what an emulated device sends.

    python bench/hil.py [--quick]

Frames:
  - csv: a 1 kHz IMU line "t,ax,ay,az" (fields [t, ax, ay, az], time in ms), one line per feed;
    and the same lines 1000 to a feed (a burst after a stall), cost per line;
  - xsens: an Xsens MTData2 message (PacketCounter, SampleTimeFine, Acceleration and
    RateOfTurn as float32), one message per feed, counters running on;
  - scip2: one MD scan of a UTM-30LX-like sensor (1081 steps: 270 deg at 1440 steps per turn,
    40 Hz, 3-character distances in 51 data lines), as our emulation sends it after the
    SCIP2.0/PP/MD dialog, one scan per feed.
Each time is the best per-call time over several timed batches after warm-up (common.time_per_call),
Python call overhead included. The budget line adds what the issue's case costs per second of
wall time: a 1 kHz csv IMU and a 40 Hz scan at once, as a share of one core.
"""
import argparse
import itertools
import math
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from common import print_table, time_per_call  # noqa: E402

from mbsim_ros.hil.protocols import make_encoder, make_parser  # noqa: E402
from mbsim_ros.model import Sensor  # noqa: E402

IMU_RATE, SCAN_RATE = 1000.0, 40.0
BUDGET = 0.05                    # the protocols' share of one core the issue's case may take (aim)
ACC = Sensor("imu", "accelerometer", "imu_link")
UTM = Sensor("laser", "range", "laser_link",
             params={"scanAngle": math.radians(270), "scanStep": 2 * math.pi / 1440, "scanRate": SCAN_RATE,
                     "minDistance": 0.1, "maxDistance": 30.0})


def csv_case():
    opts = {"protocol": "csv", "fields": ["t", "ax", "ay", "az"], "time_scale": 0.001}
    enc, rng = make_encoder(opts, ACC), np.random.default_rng(0)
    lines = [enc.encode(rng.normal(size=3), k / IMU_RATE) for k in range(1000)]
    return opts, lines, enc, lambda k: (rng.normal(size=3), k / IMU_RATE)


def xsens_case():
    opts = {"protocol": "xsens"}
    enc, rng = make_encoder(opts, ACC), np.random.default_rng(1)
    frames = [enc.encode(rng.normal(size=6), k / IMU_RATE) for k in range(1 << 16)]   # the counter wraps cleanly
    return opts, frames, make_encoder(opts, ACC), lambda k: (rng.normal(size=6), k / IMU_RATE)


def scip2_case():
    opts = {"protocol": "scip2"}
    enc, host = make_encoder(opts, UTM), make_parser(opts, UTM)
    host.feed(enc.respond(host.startup()))
    enc.respond(host.pending_output())                        # MD: the emulation streams now
    n = len(host.angles)
    rng = np.random.default_rng(2)
    scans = [enc.encode(rng.uniform(0.2, 29.0, n), k / SCAN_RATE) for k in range(200)]
    return opts, scans, enc, lambda k: (rng.uniform(0.2, 29.0, n), k / SCAN_RATE)


def parse_time(opts, sensor, frames, timing, per_feed=1):
    """Best time per frame of parser.feed over the frames (in groups of per_feed)."""
    p = make_parser(opts, sensor)
    if opts["protocol"] == "scip2":
        enc = make_encoder(opts, sensor)
        p.feed(enc.respond(p.startup()))
        p.feed(enc.respond(p.pending_output()))
    chunks = [b"".join(frames[k:k + per_feed]) for k in range(0, len(frames), per_feed)]
    feeds = itertools.cycle(chunks)
    count = [0]

    def one():
        count[0] += len(p.feed(next(feeds)))

    t = time_per_call(one, **timing) / per_feed
    assert count[0] > 0 and not set(p.faults) - {"gap"}, p.faults     # every frame parsed, none refused
    return t


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer and shorter batches")
    args = parser.parse_args()
    timing = dict(batches=3, batch_seconds=0.01) if args.quick else dict(batches=9, batch_seconds=0.1)
    print("bench/hil.py: mbsim_ros.hil.protocols, parse and encode cost per frame")
    print(f"timing: best per-call time of {timing['batches']} batches of >= "
          f"{timing['batch_seconds'] * 1e3:g} ms each after warm-up, one thread")
    rows = []
    results = {}
    for name, case, sensor, detail in [
            ("csv", csv_case, ACC, "1 kHz IMU line t,ax,ay,az"),
            ("xsens", xsens_case, ACC, "MTData2: counter, time, Acceleration, RateOfTurn (float32)"),
            ("scip2", scip2_case, UTM, "MD scan, 1081 steps, 3-character encoding")]:
        opts, frames, enc, sample = case()
        size = sum(map(len, frames)) / len(frames)
        t_parse = parse_time(opts, sensor, frames, timing)
        results[name] = t_parse
        rows.append([f"{name} parse", f"{t_parse * 1e6:.1f}", f"{detail}; {size:.0f} bytes"])
        if name == "csv":
            t_burst = parse_time(opts, sensor, frames, timing, per_feed=1000)
            rows.append(["csv parse, 1000 lines per feed", f"{t_burst * 1e6:.1f}", "per line: a burst after a stall"])
        k = itertools.count()
        values = [sample(next(k)) for _ in range(64)]
        cycle = itertools.cycle(values)
        t_enc = time_per_call(lambda: enc.encode(*next(cycle)), **timing)
        rows.append([f"{name} encode (emulation)", f"{t_enc * 1e6:.1f}", "one frame of the emulated device"])
    print()
    print_table(["measure", "time per frame (us)", "detail"], rows)
    load = IMU_RATE * results["csv"] + SCAN_RATE * results["scip2"]
    print()
    print(f"1 kHz csv IMU + 40 Hz SCIP 2.0 scans: {load * 1e3:.1f} ms of parsing per second = "
          f"{load:.1%} of one core (aim below {BUDGET:.0%}: {'met' if load < BUDGET else 'MISSED'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
