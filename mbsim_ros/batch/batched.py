"""A chunk of scenarios of one model (plan.py) run as the worlds of one mb.BatchSimulation, where
it runs (a Dask task, or a thread of this process), recorded and measured as a Harness records
and measures each: one row per scenario, the same metrics bit for bit.

Per world, as run_scenario: a fresh copy of the world with the scenario's seed and overrides,
the Simulation a Harness builds (build_headless: its construction warnings and errors are the
row's) and the Session's joint controller (JointController: position interfaces, schedules'
commands, PD). The world then continues in the batch (BatchSimulation.set_world checks it is the
chunk's model bit for bit; one that is not runs through run_scenario instead). Each step, as
Harness.run_until: the schedule's inputs due, the tau the step applies recorded, one step of
every world (one kernel call, on this thread: a chunk is one worker thread's task), the state and
the largest contact force recorded (record.py), then the joint controller's tau for the next
step, so a command acts from the second step on. A world that blows up stops there with the
error a Simulation gives (its row failed), the others go on. Then each world's Signals and
metrics. Sensors are not simulated in a batch: Signals.readings is empty (plan.py batches only
when no metric reads it).

Rows: as run_scenario's, except wall_time and cpu_time: the chunk's, from its start until its
last world's metrics, divided evenly among its scenarios (a world's share; the CPU time is this
thread's, which runs the kernels), and worker: "host:pid batch of N", N the worlds stepped
together.
"""
from __future__ import annotations

import os
import pickle
import socket
import threading
import time
import types
import warnings

import numpy as np

from ..dynamics.constraints import STAT_FAILURES, STAT_NCON
from ..dynamics.physics import blow_up_message, solver_failure_message
from ..model import SimulationError
from ..run.control import JointController, joint_dofs
from ..run.session import named_values
from .._kernel_cache import kernel_cache
from .harness import build_headless
from .metrics import evaluate
from .plan import BATCH_MARK
from .scenario import Schedule, configure, failure, new_row, run_scenario, warnings_text
from .signals import Signals

with kernel_cache("batch"):
    from .record import launch_guard, one_thread, record_worlds_kernel

# warnings.catch_warnings changes process-wide state: chunks running in threads of one process
# take turns in the parts that catch warnings (building worlds, metrics); stepping catches none
_CATCHING = threading.Lock()


class _World:
    """One scenario's world in the batch: its row, what it reported, its controller."""

    def __init__(self, scenario, row):
        self.scenario, self.row = scenario, row
        self.errors, self.caught = [], []
        self.sim = self.config = self.controller = self.dofs = None

    def report(self, error):
        if error not in self.errors:
            self.errors.append(error)


def _build(world_bytes, scenario, base):
    """A _World with its Simulation built as a Harness builds it (or its row failed)."""
    w = _World(scenario, new_row(base, scenario))
    with _CATCHING, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            models, config = configure(pickle.loads(world_bytes), scenario)
            config, _, sim = build_headless(models, config)
            w.controller = JointController(sim, joint_dofs(sim), config.pd_gains, config.command_interfaces)
            w.controller.apply(sim)                  # as the Session does before its first step
            w.sim, w.config, w.dofs = sim, config, joint_dofs(sim)
        except Exception as e:
            w.row.update(status="failed", error=failure(e))
    w.caught = list(caught)
    return w


def _batch_of(worlds):
    """(batch, kept, apart): the BatchSimulation of the first world's model, built as its
    Simulation was, with every world of that model after all (kept) set from its own Simulation;
    the others apart."""
    from ..dynamics import BatchSimulation
    ref, config = worlds[0].sim, worlds[0].config

    def new(n):
        # the batch's warm-up launches its parallel kernel: under the launch guard too, or it meets
        # another chunk's guarded step (numba's workqueue layer aborts the process then)
        with _CATCHING, launch_guard(), warnings.catch_warnings():
            warnings.simplefilter("ignore")                 # the worlds' notes were the worlds' own
            return BatchSimulation(list(ref.models), n, dt=ref.dt, integrator=ref.integrator, contact=ref.contact,
                                   poses=ref.placements, names=ref.entities, massless_armature=config.massless_armature,
                                   bound_massless=config.bound_massless)
    batch = new(len(worlds))
    kept, apart = [], []
    for w in worlds:
        try:
            batch.set_world(len(kept), w.sim)
            kept.append(w)
        except ValueError:
            apart.append(w)
    if apart and kept:            # fewer worlds: a batch of their number
        batch = new(len(kept))
        for i, w in enumerate(kept):
            batch.set_world(i, w.sim)
    for w in kept:                # the batch has their state: keep what Signals.of reads, not the Simulation
        w.sim = types.SimpleNamespace(models=w.sim.models, nv=w.sim.nv, dt=w.sim.dt)
    return batch, kept, apart


class _Inputs:
    """The Harness's input calls (what a ROS node's topics do), made on every world of the batch
    at once: what scenario.Schedule calls. Joint commands go to each world's JointController (their
    effect on tau comes after the next step, as on a Session); controls and inputs act at once."""

    def __init__(self, batch, worlds, alive):
        self.sim, self.worlds, self.alive = batch, worlds, alive
        self.t = 0.0
        self.changed = False

    def _living(self):
        """The worlds still running (one that blew up has ended its run: it hears no more)."""
        return [w for w, on in zip(self.worlds, self.alive) if on]

    def _each(self, command):
        for w in self._living():
            error = command(w.controller)
            if error:
                w.report(error)
        self.changed = True

    def joint_efforts(self, values):
        values = np.asarray(values, dtype=float)
        self._each(lambda c: c.efforts(values))

    def joint_commands(self, name, position=None, velocity=None, effort=None):
        names = [name] if isinstance(name, str) else list(name)
        as_array = (lambda x: None if x is None else np.asarray(x, dtype=float))
        position, velocity, effort = as_array(position), as_array(velocity), as_array(effort)
        self._each(lambda c: c.command(names, position, velocity, effort))

    def _by_name(self, call, what, name, values, known, set_value):
        names = [name] if isinstance(name, str) else list(name)
        pairs = list(zip(names, np.atleast_1d(values).astype(float)))
        reported = []
        for key, value in named_values(call, what, pairs, known, reported.append):
            set_value(key, value)
        for error in reported:
            for w in self._living():
                w.report(error)

    def actuator_controls(self, name, effort):
        self._by_name("actuator_controls", "actuator", name, effort, self.sim.actuator_names, self.sim.set_control)

    def inputs(self, name, position):
        self._by_name("inputs", "input", name, position, self.sim.input_names, self.sim.set_input)


class _Control:
    """Every world's JointController.apply at once: the same arithmetic per element, so each
    world's tau is bit for bit what its controller gives."""

    def __init__(self, worlds):
        self.worlds = worlds
        c = worlds[0].controller
        self.kp, self.kd = c.kp, c.kd                    # the configuration's gains: every world's
        self.q_of_v = np.maximum(c.q_of_v, 0)           # (no q: never read, its target is NaN)
        self.pull()

    def pull(self):
        """The controllers' efforts, targets and switches (after commands changed them)."""
        cs = [w.controller for w in self.worlds]
        self.effort = np.array([c.effort for c in cs])
        self.q_target = np.array([c.q_target for c in cs])
        self.v_target = np.array([c.v_target for c in cs])
        self.active = np.array([c.active for c in cs])

    def apply(self, batch, alive):
        rows = self.active & alive
        if not rows.any():
            return
        tau = self.effort.copy()
        has_q = ~np.isnan(self.q_target)
        tau = np.where(has_q, tau + self.kp * (self.q_target - batch.q[:, self.q_of_v]), tau)
        v_target = np.where(has_q & np.isnan(self.v_target), 0.0, self.v_target)
        has_v = ~np.isnan(v_target)
        tau = np.where(has_v, tau + self.kd * (v_target - batch.v), tau)
        batch.tau[rows] = tau[rows]


def _step_all(base, batch, worlds, stop):
    """Harness.run_until(duration) for every world at once; returns the recorded arrays."""
    n, dt = len(worlds), batch.dt
    assert batch.n_worlds == n, "one world of the batch per scenario"
    steps = int(round(base["duration"] / dt))
    T = np.zeros(steps + 1)
    Q, V = np.zeros((n, steps + 1, batch.nq)), np.zeros((n, steps + 1, batch.nv))
    TAU, C = np.zeros((n, steps + 1, batch.nv)), np.zeros((n, steps + 1))
    alive = np.ones(n, dtype=bool)
    recorded = np.full(n, steps + 1)
    stats, cforce = batch.solver_arrays()
    method = batch.prototype.options["contact_method"]
    cap = batch.prototype.constraints.max_contacts if method == "lcp" else 0 if method == "none" else -1
    warned = np.zeros(n, dtype=bool)
    inputs = _Inputs(batch, worlds, alive)
    name = worlds[0].scenario["params"].get("schedule", base["schedule"])     # a chunk's: one model key
    schedule = Schedule(base["schedules"][name]) if name else None
    control = _Control(worlds)
    record_worlds_kernel(0, 0.0, alive, batch.q, batch.v, stats, STAT_NCON, 0, cforce, T, Q, V, C)
    guard = launch_guard()
    for k in range(steps):
        if stop is not None and stop.is_set():
            return None
        if schedule is not None:
            inputs.t = k * dt                      # a Simulation's t: its step count times dt
            schedule(inputs)
            if inputs.changed:
                control.pull()
                inputs.changed = False
        TAU[:, k + 1] = batch.tau                 # the tau of the step that gives row k + 1 (_Recorder.tau_row)
        try:
            with guard:
                batch.step()
        except SimulationError:
            for i, joint in batch.blown_up.items():
                if alive[i]:
                    alive[i] = False
                    recorded[i] = k + 1
                    error = SimulationError(blow_up_message(joint, k * dt, dt))    # what Simulation.step raises
                    worlds[i].row.update(status="failed", error=failure(error), sim_time=k * dt)
            batch.reset(list(batch.blown_up))    # out of the way (no longer recorded)
        record_worlds_kernel(k + 1, (k + 1) * dt, alive, batch.q, batch.v, stats, STAT_NCON, cap, cforce, T, Q, V, C)
        failing = np.flatnonzero((stats[:, STAT_FAILURES] > 0) & alive & ~warned)
        for i in failing:                          # as Simulation.step warns, once per world
            warned[i] = True
            worlds[i].caught.append(solver_failure_message(batch.prototype.models[0].name, (k + 1) * dt))
        control.apply(batch, alive)
        if not alive.any():
            break
    for i, w in enumerate(worlds):
        if alive[i]:
            w.row["sim_time"] = steps * dt
    return T, Q, V, TAU, C, recorded


def _metrics(base, w, i, T, Q, V, TAU, C, m):
    sig = Signals.of(w.sim, w.dofs, T[:m].copy(), Q[i, :m].copy(), V[i, :m].copy(), TAU[i, :m].copy(),
                     C[i, :m].copy(), {})
    with _CATCHING, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            w.row.update(evaluate(base["metrics"], sig))
        except Exception as e:
            w.row.update(status="failed", error=failure(e))
    w.caught += list(caught)


def run_chunk(world_bytes, scenarios, stop=None):
    """[(row, None)] for the scenarios (of one model: plan.py), in their order. stop: a
    threading.Event that ends the chunk early (returns [] then)."""
    with one_thread():
        return _run_chunk(world_bytes, scenarios, stop)


def _run_chunk(world_bytes, scenarios, stop):
    start, start_cpu = time.perf_counter(), time.thread_time()
    base = pickle.loads(world_bytes)
    built = [_build(world_bytes, s, base) for s in scenarios]
    worlds = [w for w in built if w.sim is not None]
    apart = []
    if worlds:
        try:
            batch, worlds, apart = _batch_of(worlds)
        except Exception:                   # no batch of this world: each runs one by one
            batch, worlds, apart = None, [], worlds
    rows = {}
    if worlds:
        try:
            recorded = _step_all(base, batch, worlds, stop)
        except Exception:              # not a world's failure but the batched path's: one by one instead
            recorded, apart = False, apart + worlds
        if recorded is None:
            return []
        if recorded:
            T, Q, V, TAU, C, count = recorded
            for i, w in enumerate(worlds):
                if w.row["status"] == "ok":
                    _metrics(base, w, i, T, Q, V, TAU, C, count[i])
                w.row["worker"] = f"{socket.gethostname()}:{os.getpid()}{BATCH_MARK}{len(worlds)}"
    done = [w for w in built if w not in apart]
    wall, cpu = time.perf_counter() - start, time.thread_time() - start_cpu
    for w in done:
        w.row.update(warnings=warnings_text(w.errors, _as_warnings(w.caught)), wall_time=wall / len(done),
                     cpu_time=cpu / len(done))
        rows[w.scenario["key"]] = w.row
    for w in apart:
        if stop is not None and stop.is_set():
            return []
        rows[w.scenario["key"]] = run_scenario(world_bytes, w.scenario)[0]
    return [(rows[s["key"]], None) for s in scenarios]


def _as_warnings(caught):
    """Caught warnings and warning texts as warnings_text takes them."""
    return [w if hasattr(w, "message") else types.SimpleNamespace(message=w) for w in caught]


def warm(world_bytes, scenario):
    """Compile (or load) the kernels a chunk of this world runs, here: two steps of one world.
    Local workers then find them in the kernel cache instead of compiling each its own."""
    base = pickle.loads(world_bytes)
    short = pickle.dumps(dict(base, duration=2 * (base["config"].dt or 0.001)), protocol=4)
    run_chunk(short, [scenario])
