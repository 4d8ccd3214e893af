"""A paced Session: /diagnostics reports the step lateness (p50/p99/max, histogram, over the
latest steps) and the overruns while it runs; cameras render on their own thread and their frames reach the bag with
their acquisition stamps; Python's switch interval is restored afterwards. No timing is asserted
(tests never time): only that the figures are there and consistent."""
import sys
import threading
import warnings

import numpy as np

from capture_transport import RawCapture, ros_session
from mbsim_ros.ros import messages as m


def test_a_paced_session_reports_lateness_live_and_renders_on_a_thread(monkeypatch):
    from mbsim_ros.run import session as session_module
    from mbsim_ros.run.config import load_config
    from mbsim_ros.run import build_simulation
    monkeypatch.setattr(session_module, "LIVE_LATENESS_STEPS", 16)    # the latest 16 steps, live
    from mbsim_ros.run.world import load_world
    config = load_config(None, {"real_time_factor": 2.0, "diagnostics_rate": 10.0})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        models, _ = load_world(config)
    sim = build_simulation(models, config)
    before = sys.getswitchinterval()
    capture = RawCapture()
    session, _ = ros_session(sim, capture, config)
    worker = sim.optical_worker
    assert worker is not None and sys.getswitchinterval() <= 2e-4
    try:
        session.run(0.5)
    finally:
        session.close()
    assert sim.optical_worker is None and sys.getswitchinterval() == before

    diags = [m.decode(d, m.DIAGNOSTIC_ARRAY) for t, d, _ in capture.sent if t == "/diagnostics"]
    assert len(diags) >= 5                                   # 10 Hz over 0.5 s
    values = {kv.key: kv.value for kv in diags[-1].status[0].values}
    for key in ("lateness_p50_ms", "lateness_p99_ms", "lateness_max_ms", "overruns", "lateness_histogram"):
        assert key in values, key
    assert float(values["lateness_p50_ms"]) <= float(values["lateness_p99_ms"]) <= float(values["lateness_max_ms"])
    hist = dict(item.split(":") for item in values["lateness_histogram"].split())
    assert sum(map(int, hist.values())) == 16 < int(values["steps"])

    # frames rendered on the worker: 30 Hz stamps, each on the step that reached its instant,
    # logged at their acquisition time, in order; skipped ones are counted, not lost silently
    images = [(m.decode(d, m.IMAGE), ns) for t, d, ns in capture.sent if t == "/SR1/LeftCamera/image_raw"]
    stamps = [m.stamp_seconds(img.header.stamp) for img, _ in images]
    assert all(ns == m.to_nanoseconds(s) for (_, ns), s in zip(images, stamps))
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
    expected = [round(np.ceil(k / 30 / sim.dt - 1e-6)) * sim.dt for k in range(16)]   # instants 0 .. 15/30
    expected[0] = sim.dt                                      # the first frame comes after the first step
    assert set(np.round(stamps, 9)) <= set(np.round(expected, 9))
    assert len(stamps) + worker.skipped["LeftCamera"] >= 14    # 0.5 s: 15 or 16 instants, the last may be in flight
    assert worker.rendered >= 2 * len(stamps) - 2


def test_under_a_realtime_priority_every_thread_that_takes_the_gil_runs_one_level_below(tmp_path):
    """With realtime_priority N the publisher, render and bag writer threads run SCHED_FIFO at
    N - 1 (each holds the GIL at times: at normal priority a busy machine could deschedule it
    while the physics thread waits for the GIL), where this process may use SCHED_FIFO; where
    it may not, the runner says why and the threads stay as they were."""
    import os

    from mbsim_ros.ros.bag import BagTransport
    from mbsim_ros.run.config import load_config
    from mbsim_ros.run import build_simulation
    from mbsim_ros.run.world import load_world
    config = load_config(None, {"real_time_factor": 1.0, "realtime_priority": 10})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        models, _ = load_world(config)
    sim = build_simulation(models, config)
    bag = BagTransport(tmp_path / "bag")
    session, _ = ros_session(sim, bag, config)
    try:
        threads = {"publisher": session.publisher.native_id, "render": sim.optical_worker.native_id}
        [threads["bag writer"]] = bag.worker_threads()
        assert len(set(threads.values()) | {threading.get_native_id()}) == 4
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))      # may this process?
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
            permitted = True
        except PermissionError:
            permitted = False
        for name, tid in threads.items():
            if permitted:
                assert os.sched_getscheduler(tid) == os.SCHED_FIFO, name
                assert os.sched_getparam(tid).sched_priority == 9, name
            else:
                assert os.sched_getscheduler(tid) != os.SCHED_FIFO, name
        session.run(0.05)
        assert permitted == session.runner.os_status.startswith("SCHED_FIFO")
    finally:
        session.close()
