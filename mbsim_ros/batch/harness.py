"""A world run headless as fast as possible, driven through the inputs a ROS node gets.

    world = Harness(models, config)                   # config: the run configuration (ros/config.py)
    world.joint_commands(["RARM_ELBOW"], position=[-0.5])   # NS/joint_commands, as a controller sends it
    world.run(1.0)                                    # simulated seconds, at real-time factor 0
    sig = world.signals()                             # what happened: Signals (signals.py)

Inputs are serialized as the ROS messages (sensor_msgs/JointState, std_msgs/Float64MultiArray)
and handed to the Bridge's own subscriptions, so they take exactly the path they take in
`mbsim run` and the sim_node: decoding, the Bridge's PD gains and effort handling for
joint_commands / joint_efforts, actuator names for actuator_controls, input names for inputs;
errors are reported once each (Harness.errors), as on the node. As on the node, the Bridge
turns commands into tau after each step, so a command sent now acts from the second step on.

Recording: every step, the state (t, q, v), the tau that step applied and the largest contact
force; every new accelerometer/gyro/force reading. With a bag, every topic is also written to a
rosbag2 MCAP directory exactly as `mbsim run --bag` writes it. No rclpy, no network.
"""
from __future__ import annotations

import numpy as np

from ..dynamics.constraints import STAT_NCON
from ..ros import messages as msg
from ..ros.bridge import Bridge
from ..ros.transport import FanoutTransport, NullTransport
from ..sensors.devices import KINEMATIC
from .._kernel_cache import kernel_cache
from .signals import Signals

with kernel_cache("batch"):
    from .record import record_kernel


class Inbox(NullTransport):
    """Discards what is published; lets the harness deliver input messages to subscriptions."""

    kind = "inbox"
    receives = True

    def __init__(self):
        super().__init__()
        self.subs = {}

    def _subscribe(self, sub):
        self.subs[sub.topic] = sub

    def deliver(self, topic, data):
        sub = self.subs.get(topic)
        if sub is None:
            raise KeyError(f"{topic}: the world has no such input (inputs: {', '.join(sorted(self.subs))})")
        sub.deliver(data)


class Harness:
    """models: Model or list (already held by load_world when wanted); config: run configuration
    (keys of ros/config.py DEFAULTS; missing keys take their defaults); bag: a new directory to
    record every topic into, or None."""

    def __init__(self, models, config=None, bag=None):
        from ..ros.config import load_config
        from ..ros.session import simulation
        from ..ros.world import apply_model_settings
        self.config = load_config(None, {k: v for k, v in (config or {}).items()})
        self.config["real_time_factor"] = 0.0
        models = models if isinstance(models, (list, tuple)) else [models]   # a World keeps its names, poses
        self.notes = apply_model_settings(self.config, models)
        self.sim = sim = simulation(models, self.config)
        self.inbox = Inbox()
        self.bag = None
        transport = self.inbox
        if bag is not None:
            from ..ros.bag import BagTransport
            self.bag = BagTransport(bag)
            transport = FanoutTransport([self.inbox, self.bag])
        self.transport = transport
        self.bridge = Bridge(sim, transport, self.config)
        self.bridge.start()
        self.errors = self.bridge.errors          # input errors, reported once each as on the node
        self._ticks = []                          # [period steps, next step, fn]
        self._recorder = _Recorder(sim)
        self._recorder.record(0)
        self._closed = False

    # -- inputs, as a ROS node receives them -------------------------------------------------
    def _send(self, topic, data):
        self.inbox.deliver(self.bridge.topic(topic), data)

    def joint_commands(self, name, position=None, velocity=None, effort=None):
        """NS/joint_commands (sensor_msgs/JointState): efforts, or position/velocity targets
        tracked with the configuration's pd_gains."""
        names = [name] if isinstance(name, str) else list(name)
        self._send("joint_commands", msg.joint_state(self.sim.t, names, position, velocity, effort))

    def joint_efforts(self, values):
        """NS/joint_efforts (std_msgs/Float64MultiArray): every DOF's effort in model order."""
        self._send("joint_efforts", msg.float64_array(values))

    def actuator_controls(self, name, effort):
        """NS/actuator_controls (JointState name/effort): actuator controls."""
        names = [name] if isinstance(name, str) else list(name)
        self._send("actuator_controls", msg.joint_state(self.sim.t, names, effort=np.atleast_1d(effort)))

    def inputs(self, name, position):
        """NS/inputs (JointState name/position): run-time inputs of Chrono CONTROLLER functions."""
        names = [name] if isinstance(name, str) else list(name)
        self._send("inputs", msg.joint_state(self.sim.t, names, position=np.atleast_1d(position)))

    # -- what a node would read ----------------------------------------------------------------
    @property
    def t(self):
        return self.sim.t

    def position(self, dof):
        """A one-coordinate joint's position (a DOF name of /joint_states)."""
        return float(self.sim.q[self._dof(dof)[0]])

    def velocity(self, dof):
        return float(self.sim.v[self._dof(dof)[1]])

    def _dof(self, name):
        for n, iq, iv, _ in self.bridge.dofs:
            if n == name:
                return iq, iv
        raise KeyError(f"no joint DOF named {name!r} (joint_states has {', '.join(self.bridge.dof_names)})")

    def readings(self):
        """{sensor name: Reading}: what the sensor topics carry now."""
        return self.sim.readings()

    # -- running -------------------------------------------------------------------------------
    def every(self, period, fn):
        """Call fn(harness) before the step at each multiple of `period` seconds (at least every
        step), starting now: a controller's loop."""
        steps = max(1, int(round(period / self.sim.dt)))
        self._ticks.append([steps, self._step_count(), fn])

    def _step_count(self):
        return int(round(self.sim.t / self.sim.dt))

    def run(self, duration):
        """Advance `duration` simulated seconds (to the nearest step). SimulationError if the
        state blows up (what was recorded up to then stays in signals())."""
        self.run_until(self.sim.t + duration)

    def run_until(self, t_end):
        sim, rec, ticks = self.sim, self._recorder, self._ticks
        after = self.bridge.on_step if self.bag is not None else self.bridge.controller.apply
        k, k_end = self._step_count(), int(round(t_end / sim.dt))
        while k < k_end:
            for tick in ticks:
                if k >= tick[1]:
                    tick[1] += tick[0]
                    tick[2](self)
            rec.tau_row()
            sim.step()
            after(sim)
            rec.record_step()
            k += 1

    def signals(self) -> Signals:
        """The recorded signals so far (copies)."""
        return self._recorder.signals(self.sim, self.bridge.dofs)

    def close(self):
        if not self._closed:
            self._closed = True
            self.bridge.close()
            self.transport.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


class _Recorder:
    """Preallocated, growing per-step arrays and per-device reading lists."""

    def __init__(self, sim, capacity=1024):
        self.sim = sim
        self.n = 0
        self.t = np.zeros(capacity)
        self.q = np.zeros((capacity, sim.nq))
        self.v = np.zeros((capacity, sim.nv))
        self.tau = np.zeros((capacity, sim.nv))
        self.contact = np.zeros(capacity)
        self.devices = [d for d in sim.devices.values() if d.enabled and d.kind in KINEMATIC]
        self.last = [None] * len(self.devices)
        self.readings = {d.name: ([], []) for d in self.devices}
        solver = sim.constraints.solver
        self._stats, self._cforce = solver.stats, solver.cforce
        method = sim.options["contact_method"]
        self._max_contacts = sim.constraints.max_contacts if method == "lcp" else (0 if method == "none" else None)

    def _grow(self):
        for name in ("t", "q", "v", "tau", "contact"):
            a = getattr(self, name)
            b = np.zeros((2 * len(a),) + a.shape[1:])
            b[:len(a)] = a
            setattr(self, name, b)

    def tau_row(self):
        """The tau the coming step applies, into the row it will fill."""
        if self.n == len(self.t):
            self._grow()
        self.tau[self.n] = self.sim.tau

    def record(self, ncon):
        if self.n == len(self.t):
            self._grow()
        sim, k = self.sim, self.n
        t = sim.t
        record_kernel(k, t, sim.q, sim.v, self._cforce, ncon, self.t, self.q, self.v, self.contact)
        for i, d in enumerate(self.devices):
            r = d.visible(t)
            if r is not None and r is not self.last[i]:
                self.last[i] = r
                stamps, values = self.readings[d.name]
                stamps.append(r.stamp)
                values.append(r.values)
        self.n += 1

    def record_step(self):
        ncon = int(self._stats[STAT_NCON])
        if self._max_contacts is not None:
            ncon = min(ncon, self._max_contacts)
        self.record(ncon)

    def signals(self, sim, dofs):
        n = self.n
        readings = {name: (np.array(s, dtype=float), np.array(v, dtype=float).reshape(len(v), -1))
                    for name, (s, v) in self.readings.items()}
        return Signals.of(sim, dofs, self.t[:n].copy(), self.q[:n].copy(), self.v[:n].copy(), self.tau[:n].copy(),
                          self.contact[:n].copy(), readings)
