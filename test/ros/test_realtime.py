"""A paced Session: /diagnostics reports the step lateness (p50/p99/max, histogram) and the
overruns while it runs; cameras render on their own thread and their frames reach the bag with
their acquisition stamps; Python's switch interval is restored afterwards. No timing is asserted
(tests never time): only that the figures are there and consistent."""
import sys
import warnings

import numpy as np

from capture_transport import RawCapture
from mbsim_ros.ros import messages as m


def test_a_paced_session_reports_lateness_live_and_renders_on_a_thread():
    from mbsim_ros.ros.config import load_config
    from mbsim_ros.ros.session import Session, simulation
    from mbsim_ros.ros.world import load_world
    config = load_config(None, {"real_time_factor": 2.0, "diagnostics_rate": 10.0})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        models, _ = load_world(config)
    sim = simulation(models, config)
    before = sys.getswitchinterval()
    capture = RawCapture()
    session = Session(sim, capture, config)
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
    assert 0 < sum(map(int, hist.values())) <= int(values["steps"])

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
