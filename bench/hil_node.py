"""Hardware in the loop under load: the bundled SR1 world with every sensor at its rate (cameras
30 Hz, ChestRange at 40 Hz), paced at real time and recorded into a bag, while two real devices
on pseudo-terminals, run by another process as real devices would be, stream into it:
a csv IMU at 1 kHz (WaistAccelSensor) and a Hokuyo SCIP 2.0 laser at 40 Hz (ChestRange; the
node starts it with SCIP2.0/QT/PP/MD as it would a real one).

    python bench/hil_node.py [--seconds S] [--resample newest|each] [--timing arrival|device] [--delay S]

Reports the physics (achieved real-time factor, overruns, lateness, messages the publisher
dropped) and per device what the device sent, what the node received and parsed (faults), how
many sample instants the topic served and how many samples resampling superseded (samples that
arrived between two instants of the simulated sensor and were overtaken by a newer one: arrival
jitter, not loss in parsing). Target: rtf 1.0 sustained, every frame sent parsed without a
fault, every sample instant served, nothing dropped by the publisher.
"""
import argparse
import multiprocessing
import os
import sys
import tempfile
import time
import warnings

RATE = 1000.0          # Hz, the csv IMU
SCAN_PERIOD = 0.025    # s, the laser (40 Hz)


def devices(folder, conn):
    """The device process: two ptys linked at folder/imu and folder/urg; streams on "go" until
    "stop", then sends back what it wrote."""
    import select
    import tty

    import numpy as np

    from mbsim_ros.hil.protocols import make_encoder
    from mbsim_ros.run.world import DEFAULT_WORLD, load_models
    models, _ = load_models(DEFAULT_WORLD)
    sensor = next(s for m in models for s in m.sensors if s.name == "ChestRange")
    encoder = make_encoder({"protocol": "scip2"}, sensor)
    ptys = {}
    for name in ("imu", "urg"):
        master, slave = os.openpty()
        tty.setraw(slave)
        os.symlink(os.ttyname(slave), os.path.join(folder, name))
        ptys[name] = (master, slave)
    imu, urg = ptys["imu"][0], ptys["urg"][0]
    conn.send("ready")
    scan = np.linspace(0.5, 5.0, encoder.n)
    sent = {"imu lines": 0, "imu bytes": 0, "scans": 0, "scan bytes": 0, "refused": 0}

    def write(fd, data):
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(fd, view):]
            except BlockingIOError:      # the node does not read: a real device would lose it
                sent["refused"] += 1
                return False
        return True

    started = False
    k = 0
    t0 = next_scan = 0.0
    while True:
        if conn.poll():
            what = conn.recv()
            if what == "go":
                started, t0 = True, time.perf_counter()
                next_scan = t0
            elif what == "stop":
                break
        ready, _, _ = select.select([urg], [], [], 0.0005)
        if ready:
            reply = encoder.respond(os.read(urg, 4096))
            if reply:
                write(urg, reply)
        if not started:
            continue
        now = time.perf_counter()
        due = int((now - t0) * RATE)
        if due > k:
            data = b"".join(b"%.3f,%d,%d,9.81\n" % (1e3 * i / RATE, i, -i) for i in range(k, due))
            if write(imu, data):
                sent["imu lines"] += due - k
                sent["imu bytes"] += len(data)
            k = due
        if now >= next_scan:
            next_scan += SCAN_PERIOD
            frame = encoder.encode(scan, now - t0)
            if frame and write(urg, frame):
                sent["scans"] += 1
                sent["scan bytes"] += len(frame)
    conn.send(sent)
    time.sleep(0.5)                      # let the node read the tail before the ptys close


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="simulated seconds at rtf 1 (default 5)")
    parser.add_argument("--resample", choices=["newest", "each"], default="newest",
                        help="the devices' resample setting (default newest)")
    parser.add_argument("--timing", choices=["arrival", "device"], default="arrival",
                        help="the devices' timing setting (default arrival)")
    parser.add_argument("--delay", type=float, default=0.0,
                        help="the two simulated sensors' delay in s: a jitter buffer (default 0)")
    args = parser.parse_args()
    from mbsim_ros.ros.bag import BagTransport
    from mbsim_ros.ros.bridge import WARM_UP_JOBS, Bridge
    from mbsim_ros.run import Session, load_config, load_world, build_simulation
    with tempfile.TemporaryDirectory() as tmp:
        ctx = multiprocessing.get_context("spawn")
        here, there = ctx.Pipe()
        child = ctx.Process(target=devices, args=(tmp, there), daemon=True)
        child.start()
        assert here.recv() == "ready"
        config = load_config(None, {
            "real_time_factor": 1.0, "sensors": {"ChestRange": {"rate": 40.0, "delay": args.delay},
                                                 "WaistAccelSensor": {"delay": args.delay}},
            "devices": {"WaistAccelSensor": {"port": os.path.join(tmp, "imu"), "protocol": "csv",
                                             "fields": ["t", "ax", "ay", "az"], "time_scale": 0.001,
                                             "resample": args.resample, "timing": args.timing},
                        "ChestRange": {"port": os.path.join(tmp, "urg"), "protocol": "scip2",
                                       "resample": args.resample, "timing": args.timing}}})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            models, _ = load_world(config)
        sim = build_simulation(models, config, warm_up_jobs=WARM_UP_JOBS)
        sim.step(50)                                         # first renders and ray casts out of the way
        log = []
        bridge = Bridge(sim, BagTransport(os.path.join(tmp, "bag")), config, log=log.append)
        session = Session(sim, config, listeners=[bridge], log=log.append, queue=4096)
        sources = bridge.hil.sources
        deadline = time.monotonic() + 10
        while not all(s.connected for s in sources.values()) or not sources["ChestRange"].parser.params:
            if time.monotonic() > deadline:
                print("bench/hil_node.py: the devices did not come up:", "; ".join(log))
                return 0
            time.sleep(0.01)
        received0 = {name: s.received for name, s in sources.items()}
        here.send("go")
        while not all(s.received > received0[name] for name, s in sources.items()):   # both streaming
            time.sleep(0.001)
        before = {name: (s.received, s.superseded, s.used, s.published) for name, s in sources.items()}
        stats = session.run(args.seconds)
        after = {name: (s.received, s.superseded, s.used, s.published, dict(s.all_faults()))
                 for name, s in sources.items()}
        here.send("stop")
        sent = here.recv()
        time.sleep(0.3)                                      # the tail in flight
        received = {name: s.received - received0[name] for name, s in sources.items()}
        session.close()
        child.join(5)
    print(f"bench/hil_node.py: bundled SR1 world, every sensor, ChestRange at 40 Hz, a bag; "
          f"{args.seconds:g} simulated seconds at rtf 1 with a 1 kHz csv IMU and a 40 Hz SCIP 2.0 laser on ptys, "
          f"resample {args.resample}, timing {args.timing}, sensor delay {args.delay:g} s")
    print(f"physics: achieved rtf {stats['rtf']:.3f}, overruns {stats['overruns']}, lateness mean/p99/max "
          f"{stats['lateness_mean_ms']:.3f}/{stats['lateness_p99_ms']:.3f}/{stats['lateness_max_ms']:.3f} ms, "
          f"{session.dropped()} steps of messages dropped by the publisher")
    ok = stats["rtf"] > 0.98 and session.dropped() == 0
    for name, what in (("WaistAccelSensor", "imu lines"), ("ChestRange", "scans")):
        got, superseded, published = (after[name][k] - before[name][k] for k in (0, 1, 3))
        faults = after[name][4]
        instants = int(round(args.seconds * sim.devices[name].rate))
        print(f"{name}: device sent {sent[what]} {what} ({sent[what.split()[0] + ' bytes' if what == 'imu lines' else 'scan bytes']} "
              f"bytes); node parsed {received[name]} ({got} during the run), faults {faults or 'none'}; "
              f"{published} of {instants} sample instants served by the device, {superseded} samples superseded")
        # the first instants of the run may precede the first sample by the sensor's delay
        ok = ok and received[name] >= sent[what] and not faults and published >= instants - 2 - args.delay * sim.devices[name].rate
    if sent["refused"]:
        print(f"the ptys refused {sent['refused']} writes (the node did not read fast enough)")
    print(f"target (rtf 1 sustained, every frame parsed without a fault, every instant served, nothing dropped): "
          f"{'met' if ok and not sent['refused'] else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
