"""A world run headless as fast as possible, driven through the calls a ROS node makes.

    world = Harness(models, config)                   # config: the run configuration (run/config.py)
    world.joint_commands(["RARM_ELBOW"], position=[-0.5])   # what NS/joint_commands does on the node
    world.run(1.0)                                    # simulated seconds, at real-time factor 0
    sig = world.signals()                             # what happened: Signals (signals.py)

The inputs are the run.Session's calls that the node's topics translate into (command_joints,
set_joint_efforts, set_actuator_controls, set_inputs): the same PD gains and effort handling,
actuator and input names; errors are reported once each (Harness.errors), as on the node. As
on the node, joint control turns commands into tau after each step, so a command sent now acts
from the second step on.

Recording: every step, the state (t, q, v), the tau that step applied and the largest contact
force; every new accelerometer/gyro/force reading. With a bag, every topic is also written to a
rosbag2 MCAP directory exactly as `mbsim run --bag` writes it (the ROS bridge is then the
session's listener). No rclpy, no network.
"""
from __future__ import annotations

import numpy as np

from ..dynamics.constraints import STAT_NCON
from ..run.control import joint_dofs
from ..sensors.devices import KINEMATIC
from .._kernel_cache import kernel_cache
from .signals import Signals

with kernel_cache("batch"):
    from .record import record_kernel


def build_headless(models, config, warm_up_jobs=()):
    """(config, notes, sim): the run configuration (a RunConfig or a mapping of its keys) at
    real-time factor 0 with the models' settings filled in, their notes, and the Simulation it
    asks for, as a Harness runs it (the batched path builds each world so too)."""
    from ..run import load_config, build_simulation
    from ..run.config import RunConfig
    from ..run.world import apply_model_settings
    if isinstance(config, RunConfig):
        config = config.replace(real_time_factor=0.0)
    else:
        config = load_config(None, dict(config or {}, real_time_factor=0.0))
    models = models if isinstance(models, (list, tuple)) else [models]   # a World keeps its names, poses
    notes = apply_model_settings(config, models)
    return config, notes, build_simulation(models, config, warm_up_jobs=warm_up_jobs)


class Harness:
    """models: Model or list (already held by load_world when wanted); config: a RunConfig
    (run/config.py), or a mapping of its keys (the others take their defaults); always run at
    real-time factor 0. bag: a new directory to record every topic into, or None."""

    def __init__(self, models, config=None, bag=None):
        from ..run import Session
        listeners = []
        self.bag = None
        if bag is not None:            # recorded as `mbsim run --bag` records: the ROS bridge on a bag
            from ..ros.bag import BagTransport
            from ..ros.bridge import WARM_UP_JOBS, Bridge
            self.config, self.notes, self.sim = build_headless(models, config, warm_up_jobs=WARM_UP_JOBS)
            self.bag = BagTransport(bag)
            listeners.append(Bridge(self.sim, self.bag, self.config))
        else:
            self.config, self.notes, self.sim = build_headless(models, config)
        sim = self.sim
        self.session = Session(sim, self.config, listeners=listeners)
        self.dofs = joint_dofs(sim)
        self.errors = []                          # input errors, reported once each as on the node
        self._ticks = []                          # [period steps, next step, fn]
        self._recorder = _Recorder(sim)
        self._recorder.record(0)
        self._closed = False

    # -- inputs, the calls a ROS node's topics make ----------------------------------------------
    def _report(self, error):
        if error not in self.errors:
            self.errors.append(error)

    def joint_commands(self, name, position=None, velocity=None, effort=None):
        """As NS/joint_commands: efforts, or position/velocity targets tracked with the
        configuration's pd_gains (Session.command_joints)."""
        names = [name] if isinstance(name, str) else list(name)
        as_array = (lambda x: None if x is None else np.asarray(x, dtype=float))
        self.session.command_joints(names, as_array(position), as_array(velocity), as_array(effort),
                                    report=self._report)

    def joint_efforts(self, values):
        """As NS/joint_efforts: every DOF's effort in model order."""
        self.session.set_joint_efforts(values, report=self._report)

    def actuator_controls(self, name, effort):
        """As NS/actuator_controls: actuator controls by name."""
        names = [name] if isinstance(name, str) else list(name)
        self.session.set_actuator_controls(list(zip(names, np.atleast_1d(effort).astype(float))), report=self._report)

    def inputs(self, name, position):
        """As NS/inputs: run-time inputs of Chrono CONTROLLER functions by name."""
        names = [name] if isinstance(name, str) else list(name)
        self.session.set_inputs(list(zip(names, np.atleast_1d(position).astype(float))), report=self._report)

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
        for n, iq, iv, _ in self.dofs:
            if n == name:
                return iq, iv
        raise KeyError(f"no joint DOF named {name!r} (joint_states has {', '.join(d[0] for d in self.dofs)})")

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
        step = self.session.step
        k, k_end = self._step_count(), int(round(t_end / sim.dt))
        while k < k_end:
            for tick in ticks:
                if k >= tick[1]:
                    tick[1] += tick[0]
                    tick[2](self)
            rec.tau_row()
            step()
            rec.record_step()
            k += 1

    def signals(self) -> Signals:
        """The recorded signals so far (copies)."""
        return self._recorder.signals(self.sim, self.dofs)

    def close(self):
        if not self._closed:
            self._closed = True
            self.session.close()

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
