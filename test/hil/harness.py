"""The bundled SR1 world with a Bridge on a capturing transport under a Session at rtf 0, stepped
by the test (the runner not running: the test decides when the device has spoken and when the
simulation samples)."""

import numpy as np
from capture_transport import Capture  # noqa: F401  (tests import it from here too)

from mbsim_ros.ros.bridge import Bridge
from mbsim_ros.run import Session
from mbsim_ros.run.config import load_config
from mbsim_ros.run import build_simulation
from mbsim_ros.ros.transport import FanoutTransport
from mbsim_ros.run.world import load_world

# cameras off: nothing here looks at images, and rendering is most of a step's cost
NO_CAMERAS = {"LeftCamera": {"enabled": False}, "RightCamera": {"enabled": False}}




def world(devices=None, emulate=None, commands=None, sensors=None, log=None, transport=None, **settings):
    """(sim, bridge, capture): the SR1 world with the given hardware-in-the-loop sections,
    started under a Session at rtf 0 (bridge.session; ports open in their threads), publishing
    to a Capture (and to `transport` too, when given). Range sensors render in the stepping
    thread, as the test steps."""
    config = load_config(None, dict(devices=devices, emulate=emulate, commands=commands,
                                    sensors=dict(NO_CAMERAS, **(sensors or {})), **settings))
    models, _ = load_world(config)
    sim = build_simulation(models, config)
    capture = Capture()
    bridge = Bridge(sim, capture if transport is None else FanoutTransport([transport, capture]), config, log=log)
    Session(sim, config.replace(real_time_factor=0.0), listeners=[bridge], log=log)
    sim.render_in_thread(False)
    return sim, bridge, capture


_SENSORS = {}


def model_sensor(name):
    """The bundled world's Sensor `name` (what the protocols' encoders take), before any run."""
    if not _SENSORS:
        from mbsim_ros.run.world import DEFAULT_WORLD, load_models
        models, _ = load_models(DEFAULT_WORLD)
        _SENSORS.update({s.name: s for m in models for s in m.sensors})
    return _SENSORS[name]


def step_until_reading(sim, bridge, name, limit=1000):
    """Step until sensor `name` has a new reading; returns it."""
    old = sim.readings().get(name)
    for _ in range(limit):
        bridge.session.step()
        r = sim.readings().get(name)
        if r is not None and r is not old:
            return r
    raise AssertionError(f"{name} did not sample within {limit} steps")


def vector(m):
    """The 3 or 6 numbers of an Imu (acceleration or angular velocity, whichever it carries) or
    WrenchStamped message."""
    if hasattr(m, "wrench"):
        f, t = m.wrench.force, m.wrench.torque
        return np.array([f.x, f.y, f.z, t.x, t.y, t.z])
    if m.linear_acceleration_covariance[0] != -1:
        a = m.linear_acceleration
    else:
        a = m.angular_velocity
    return np.array([a.x, a.y, a.z])


def status(bridge, name):
    """The /diagnostics status `name` as (level, message, {key: value})."""
    for n, level, message, values in bridge._statuses({}):
        if n == name:
            return level, message, values
    raise AssertionError(f"no diagnostics status {name!r}")


def floats(text):
    return np.array([float(x) for x in text.split()])
