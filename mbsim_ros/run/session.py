"""One run, no ROS: a Simulation paced by a Runner, its joints under a JointController, the
hardware-in-the-loop clock, and the listeners that publish, record or show it.

    session = Session(sim, config, listeners=[bridge, viewer], log=print)
    session.run(5.0)            # or session.start() and control it from any thread
    session.close()

A listener is any object with any subset of these methods (missing ones are skipped):
    start(session)          once, before the first step, in the constructing thread
    on_step(sim)            in the physics thread after every step (and after set_joint_positions):
                            cheap, never blocking
    on_reset(sim)           between steps, after a reset to t = 0
    on_world_changed(sim)   between steps, after spawn/delete/set_model_pose
    flush(sim)              hand on what appeared since the last step without stepping (frames a
                            render thread finished after it), before a run at rtf 0 returns
    worker_threads()        native ids of threads that must run at the physics' priority - 1
    close()                 once, when the session closes

Publishing (`publish(job)`, for listeners): paced runs hand jobs to an AsyncPublisher thread (the
physics never waits on a transport; a full queue drops the oldest step's jobs and counts them);
runs at rtf 0 run them inline, so a bag recorded as fast as possible loses nothing. Cameras and
range sensors render on their own thread at every real-time factor (Simulation.render_in_thread;
the numba kernels release the GIL). Paced, a frame never delays a step: a renderer behind skips
frames (counted). At rtf 0 nothing is skipped (`lossless`: the physics thread waits for the
renderer instead) and run() returns once the frames of its steps are handed on.
Python's thread switch interval is SWITCH_INTERVAL meanwhile, so that the physics thread gets
the interpreter back within that time when another thread holds it (the default 5 ms is five
steps at 1 kHz).
"""
from __future__ import annotations

import math
import sys
import threading
import time

import numpy as np

from ..hil.sources import SimClock
from .config import check, valid_namespace
from .memory import map_large_blocks
from .control import JointController, joint_dofs
from .pacing import AsyncPublisher, Runner, apply_os_scheduling

SWITCH_INTERVAL = 2e-4     # s, Python's thread switch interval during paced runs
# /diagnostics summarizes the lateness of this many latest steps (Runner.stats: one sort of them);
# summarizing every step so far with np.percentile cost the publisher thread 1.5 ms after 60000
# steps and 7 ms after 300000, competing with the physics thread for the GIL each second
LIVE_LATENESS_STEPS = 4096


def _hooks(listeners, name):
    return [getattr(x, name) for x in listeners if callable(getattr(x, name, None))]


def named_values(call, what, pairs, known, report):
    """[(name, float value)] of `pairs` ([(name, value)] or {name: value}) naming one of `known`
    with a finite value; each other one goes to report(text) and is skipped. call, what: the
    message's words (actuator_controls, actuator)."""
    pairs = list(pairs.items()) if isinstance(pairs, dict) else [(str(n), v) for n, v in pairs]
    out = []
    for name, value in pairs:
        if name not in known:
            report(f"{call}: no {what} named {name!r} (ignored); expected one of {', '.join(known)}")
        elif not math.isfinite(value):
            report(f"{call}: {name} = {value} is not a finite number (ignored)")
        else:
            out.append((name, float(value)))
    return out


class Session:
    """A Simulation run under `config` (run/config.py), its steps handed to `listeners`.

    config.target_rtf (0: as fast as possible; 1 while real_time_factor is left open) decides here,
    once, whether publishing is asynchronous and rendering lossless. pause_at: pause each time
    the simulation reaches that time (again after a reset). log(text): notes (overlaps after a
    spawn, rejected commands). progress(counters): Runner's progress callback."""

    def __init__(self, sim, config, listeners=(), log=None, progress=None, queue=256,
                 jitter_window=4096, pause_at=None):
        self.sim = sim
        self.config = config
        self.listeners = list(listeners)
        self.log = log or (lambda text: None)
        self.publisher = AsyncPublisher(max_queue=queue) if config.paced else None
        self.publish = self.publisher.submit if self.publisher is not None else (lambda job: job())
        self._switch_interval = None
        self.namespaces = {}             # entity -> the namespace it was spawned with
        self.controller = JointController(sim, joint_dofs(sim), config.pd_gains,
                                          config.command_interfaces)
        self._wrenches = []              # [link index in sim.compiled, world link name, (F, T), steps left]
        self._wrench_tau = None          # the generalized force they added to sim.tau last
        self._k_pause = None if pause_at is None else int(round(pause_at / sim.dt))
        self.runner = Runner(sim, rtf=config.target_rtf, policy=config.catch_up, progress=progress,
                             realtime_priority=config.realtime_priority, cpu=config.cpu,
                             jitter_window=jitter_window, on_step=self._after_step)
        # arrival stamps of real devices: the runner's wall clock -> simulation time
        self.hil_clock = SimClock(sim.t, schedule=self.runner.sim_time)
        self._on_step = _hooks(self.listeners, "on_step")
        try:
            if hasattr(sim, "render_in_thread"):
                sim.render_in_thread(True)
            self._set_lossless(not config.paced)
            map_large_blocks()          # a run of hours: freed frames go back to the system
            self._switch_interval = sys.getswitchinterval()
            sys.setswitchinterval(min(SWITCH_INTERVAL, self._switch_interval))
            priority = config.realtime_priority
            if priority:
                # the physics thread waits for the GIL whenever these hold it: under ordinary
                # scheduling on a busy machine they would keep it while descheduled (priority
                # inversion), so they run real-time too, one level below the physics
                workers = [w.native_id for w in (self.publisher, getattr(sim, "optical_worker", None))
                           if w is not None]
                for threads in _hooks(self.listeners, "worker_threads"):
                    workers += list(threads())
                for tid in workers:
                    apply_os_scheduling(max(1, priority - 1), thread=tid)
            for start in _hooks(self.listeners, "start"):
                start(self)
        except BaseException:       # a listener refused the configuration: nothing left running
            self._release()
            raise
        self.controller.apply(sim)
        if self.publisher is not None:      # the first messages (templates built, kernels loaded)
            self.publisher.flush()          # before the clock starts, not during the run

    # -- the physics thread, after every step --------------------------------------------------
    def _after_step(self, sim):
        self.hil_clock.tick(sim.t)
        for on_step in self._on_step:
            on_step(sim)
        self.controller.apply(sim)
        if self._wrenches or self._wrench_tau is not None:
            self._push(sim)
        if self._k_pause is not None and int(round(sim.t / sim.dt)) == self._k_pause:
            self.runner.pause()

    def _set_lossless(self, on):
        worker = getattr(self.sim, "optical_worker", None)
        if worker is not None:
            worker.lossless = on

    # -- run ----------------------------------------------------------------------------------
    def run(self, duration=None):
        """Step (paced) until `duration` seconds of simulated time have passed (None: until
        stop()); returns stats(). At rtf 0 it returns once the frames of its steps are handed on."""
        stats = self.runner.run(duration)
        if not self.config.paced:
            self.drain()
        return stats

    def start(self, duration=None):
        """run(duration) in a background physics thread; join() waits for it."""
        return self.runner.start(duration)

    def join(self, timeout=None):
        return self.runner.join(timeout)

    def stop(self):
        """End the run at the next step boundary (also while paused); safe from a signal handler."""
        self.runner.stop()

    def drain(self):
        """Wait until every frame sampled so far is rendered and handed on, and every job
        published so far has run. Not from another thread while the runner runs."""
        worker = getattr(self.sim, "optical_worker", None)
        if worker is not None:
            worker.flush()
            for flush in _hooks(self.listeners, "flush"):
                flush(self.sim)
        if self.publisher is not None:
            self.publisher.flush()

    # -- control, from any thread ---------------------------------------------------------------
    @property
    def paused(self) -> bool:
        return self.runner.paused

    @property
    def running(self) -> bool:
        return self.runner.running

    def pause(self, wait=False, timeout=None) -> bool:
        """Pause at the next step boundary (wait=True: until the loop has parked)."""
        return self.runner.pause(wait=wait, timeout=timeout)

    def resume(self):
        """Resume paced stepping; paused time is not caught up."""
        self._set_lossless(not self.config.paced)
        self.runner.resume()

    def step(self, n=1, wait=False, timeout=None) -> bool:
        """Pause (if not paused) and do exactly n more steps, unpaced; not running: here and now.
        Unpaced steps have no deadline, so every camera frame due in them is rendered (a renderer
        behind would otherwise skip the last ones, and a paused view would show an older frame)."""
        self._set_lossless(True)
        return self.runner.step_once(n, wait=wait, timeout=timeout)

    def submit(self, fn):
        """fn() in the physics thread between steps, in order, without waiting for it (not
        running: here and now). An exception from fn ends the run."""
        self.runner.submit(fn)

    def between_steps(self, fn, timeout=None):
        """fn() run in the physics thread between steps; returns its result or raises its error.
        When the runner is not running (or this is the physics thread) fn runs here."""
        runner = self.runner
        if threading.get_ident() == runner.physics_thread:
            return fn()
        done, box = threading.Event(), {}

        def job():
            try:
                box["value"] = fn()
            except BaseException as e:      # handed to the caller, not to the physics loop
                box["error"] = e
            finally:
                done.set()
        runner.submit(job)           # runs at once when the runner is not running
        deadline = None if timeout is None else time.monotonic() + timeout
        while not done.wait(0.05):
            if not runner.running and runner.cancel(job):   # the loop ended before it took the job
                job()
            if deadline is not None and time.monotonic() > deadline:
                if runner.cancel(job):
                    raise TimeoutError("the physics thread did not take the request in time")
        if "error" in box:
            raise box["error"]
        return box.get("value")

    def reset(self):
        """Back to t = 0 between steps (Runner.reset), with the configuration's actuator switch
        again (sim.reset turns the actuators on); listeners' on_reset(sim) then."""
        self.runner.reset()

        def after():
            self.sim.actuators_enabled = self.config.actuators_enabled
            self._wrenches.clear()
            self._wrench_tau = None
            for on_reset in _hooks(self.listeners, "on_reset"):
                on_reset(self.sim)
        self.runner.submit(after)

    def set_real_time_factor(self, rtf):
        """The real-time factor (0: as fast as possible) from the next step on."""
        self.runner.set_pacing(rtf=rtf)
        self.config.real_time_factor = check("real_time_factor", rtf, "set_real_time_factor")
        self._set_lossless(not self.config.paced or self.paused)

    def set_catch_up(self, policy):
        """The catch-up policy (compensatory | conservative) from the next step on."""
        self.runner.set_pacing(policy=policy)
        self.config.catch_up = check("catch_up", policy, "set_catch_up")

    def set_hold(self, stiffness):
        """The stiffness of the springs holding the initial pose (world.set_hold) from the next
        step on; ValueError where the world was loaded without them."""
        from .world import set_hold
        set_hold(self.sim, stiffness, check_only=True)
        self.runner.submit(lambda: set_hold(self.sim, stiffness))
        self.config.hold = float(stiffness)

    # -- joints and links -----------------------------------------------------------------------
    def command_joints(self, names, position=None, velocity=None, effort=None, report=None):
        """Joint commands by DOF name (JointController.command says how empty, NaN and short
        arrays read), applied between steps; a refused command goes to report(text) (default
        log) and changes nothing."""
        report = report or self.log

        def apply():
            error = self.controller.command(names, position, velocity, effort)
            if error:
                report(error)
        self.runner.submit(apply)

    def set_joint_efforts(self, values, report=None):
        """Every DOF's effort in model order, between steps; a wrong length goes to report."""
        report = report or self.log
        values = np.asarray(values, dtype=float)

        def apply():
            error = self.controller.efforts(values)
            if error:
                report(error)
        self.runner.submit(apply)

    def set_actuator_controls(self, controls, report=None):
        """Actuator controls ([(name, value)] or {name: value}; an actuator's force is gain *
        control) between steps; an unknown name or a value that is not finite goes to report
        (default log) and is skipped, the others apply. They hold until set again."""
        self._set_by_name("actuator_controls", "actuator", controls, self.sim.actuator_names,
                          lambda name, value: self.sim.set_control(name, value), report)

    def set_inputs(self, inputs, report=None):
        """Run-time inputs ([(name, value)] or {name: value}) that the models' `input` functions
        read (Chrono CONTROLLER functions), between steps; bad ones reported as for controls."""
        self._set_by_name("inputs", "input", inputs, self.sim.input_names,
                          lambda name, value: self.sim.set_input(name, value), report)

    def _set_by_name(self, call, what, pairs, known, set_value, report):
        report = report or self.log

        def apply():
            for name, value in named_values(call, what, pairs, known, report):
                set_value(name, value)
        self.runner.submit(apply)

    def set_joint_positions(self, positions: dict):
        """Put DOFs ({world name: q}) at these positions at rest (their velocities 0) between
        steps, meant while paused (the view's sliders); a position target a joint command set
        moves with them, so PD control holds them there. Listeners get on_step(sim) with the
        new state. KeyError/ValueError (nothing changed) for an unknown DOF or one inside a
        ball or free joint."""
        positions = {str(k): float(v) for k, v in dict(positions).items()}

        def put():
            sim = self.sim
            sim.set_joint_positions(positions)
            sim.set_joint_velocities({name: 0.0 for name in positions})
            c = self.controller
            for name, q in positions.items():
                iv = sim.dof_index(name)[1]
                if not np.isnan(c.q_target[iv]):
                    c.q_target[iv] = q
            for on_step in self._on_step:
                on_step(sim)
            c.apply(sim)
        self.between_steps(put)

    def apply_wrench(self, link, force, torque=(0.0, 0.0, 0.0), duration=None):
        """Push `link` (world name) with a world-frame force (N) at its origin and a torque
        (N m) for `duration` seconds of simulated time (None or 0: one step), from the next step
        on; pushes add up. Applied as the generalized force J^T (F, T) through sim.tau, J the
        link origin's world Jacobian at each step's state. KeyError for an unknown link."""
        F = np.asarray(force, dtype=float).reshape(-1)
        T = np.asarray(torque, dtype=float).reshape(-1)
        if F.shape != (3,) or T.shape != (3,) or not (np.all(np.isfinite(F)) and np.all(np.isfinite(T))):
            raise ValueError(f"apply_wrench: force and torque must be 3 finite numbers each, got {force}, {torque}")
        dt = float(self.sim.dt)
        steps = max(1, int(round(float(duration or 0.0) / dt)))
        if duration is not None and not (np.isfinite(duration) and duration >= 0):
            raise ValueError(f"apply_wrench: duration must be >= 0 s, got {duration}")
        entity, bare = self.sim.names.resolve("link", link)       # KeyError for an unknown link

        def add():
            self._wrenches.append([entity, bare, np.concatenate([F, T]), steps])
            self._push(self.sim, fresh=False)
        self.between_steps(add)

    def _push(self, sim, fresh=True):
        """sim.tau for the next step: the active wrenches' J^T w in place of last step's. fresh:
        called after a step (one step of each wrench's duration has passed)."""
        from ..dynamics import frame_jacobian
        if fresh:
            for w in self._wrenches:
                w[3] -= 1
            self._wrenches = [w for w in self._wrenches if w[3] > 0]
        tau = np.zeros(sim.nv)
        for entity, bare, wrench, _ in self._wrenches:
            k = sim.entities.index(entity)
            qs, vs = sim.model_slices(entity)
            R = sim.placements[k][:3, :3]
            J = frame_jacobian(sim.models[k], sim.q[qs], bare)
            J = np.vstack([R @ J[:3], R @ J[3:]])      # the model's frame -> the world's
            tau[vs] += J.T @ wrench
        old = self._wrench_tau
        # the controller wrote sim.tau afresh this step when active; otherwise take last push out
        if old is not None and not (fresh and self.controller.active):
            sim.tau = sim.tau - old
        sim.tau = sim.tau + tau
        self._wrench_tau = tau if self._wrenches else None

    def _unpush(self):
        """Take the wrenches' generalized force out of sim.tau (before the world changes)."""
        if self._wrench_tau is not None:
            self.sim.tau = self.sim.tau - self._wrench_tau
            self._wrench_tau = None

    # -- the world's models, between steps ------------------------------------------------------
    def spawn(self, model, name=None, pose=None, namespace=None, rename=False) -> str:
        """Add `model` to the running world as entity `name` (default model.name) at `pose`
        ((xyz, quaternion xyzw), a 4x4 matrix or None) between steps, and treat it like a model
        loaded at start: joints held with the configuration's `hold` (the model is edited so),
        lowered with `on_ground`, a note for overlaps. `namespace` (a ROS-style namespace, made
        absolute) is kept in session.namespaces for the listeners (the ROS bridge puts the
        model's own topics there). rename: a taken name becomes "<name>_<k>" (the first free k),
        chosen in the physics thread, so concurrent spawns cannot pick the same. The model takes
        the world's gravity (a note where its file states another). Returns the entity name.
        ValueError for a taken name, a bad namespace or a model that does not compile (the world
        is unchanged). Waits for the physics thread (any thread but that one may call it); not
        running, here and now."""
        if namespace and not valid_namespace(namespace.strip("/") or "?"):
            raise ValueError(f"namespace {namespace!r}: letters, digits and _ in tokens that do not start "
                             "with a digit, separated by single /")
        return self.between_steps(lambda: self._spawn(model, name, pose, namespace, rename))

    def _spawn(self, model, name, pose, namespace=None, rename=False):
        from ..dynamics.placement import overlap_notes, put_on_ground
        from .world import hold_initial_pose
        name = model.name if name is None else name
        if rename and name in self.sim.entities:
            k = 1
            while f"{name}_{k}" in self.sim.entities:
                k += 1
            name = f"{name}_{k}"
        if self.config.hold > 0 and not (model.actuators or model.motors):
            hold_initial_pose([model], self.config.hold)      # as the models loaded at start
        gravity = self.sim.models[0].gravity
        if not np.allclose(model.gravity, gravity) and getattr(model, "gravity_stated", True):
            # a file's world settings (its gravity, as its time step) are not the running world's
            self.log(f"{name}: gravity {np.asarray(model.gravity).tolist()} of its file not used: the world's "
                     f"{np.asarray(gravity).tolist()} applies")
            model.gravity, model.gravity_stated = np.array(gravity, float), False
        self._unpush()
        name = self.sim.add_model(model, name, pose)
        if namespace:
            self.namespaces[name] = "/" + namespace.strip("/")
        if self.config.on_ground:
            put_on_ground(self.sim, name)
        self._world_changed()
        for note in overlap_notes(self.sim, [name]):
            self.log(note)
        return name

    def delete(self, name: str):
        """Remove entity `name` between steps; the others' state stays. KeyError for an unknown
        name, ValueError for the last model."""
        def remove():
            self._unpush()
            self.sim.remove_model(name)
            self.namespaces.pop(name, None)
            self._world_changed()
        self.between_steps(remove)

    def set_model_pose(self, name: str, pose):
        """Move entity `name`'s world frame (Simulation.set_model_pose) between steps."""
        def move():
            self._unpush()
            self.sim.set_model_pose(name, pose)
            self._world_changed(garbage=False)
        self.between_steps(move)

    def _world_changed(self, garbage=True):
        """Joint control for the new world (the commands of the DOFs that stay kept), the
        listeners told, the garbage of the old world's arrays collected."""
        old = self.controller
        self.controller = JointController(self.sim, joint_dofs(self.sim), self.config.pd_gains,
                                          self.config.command_interfaces)
        self.controller.adopt(old)
        self._wrenches = [w for w in self._wrenches if w[0] in self.sim.entities]
        if self._wrenches:
            self._push(self.sim, fresh=False)
        for changed in _hooks(self.listeners, "on_world_changed"):
            changed(self.sim)
        if garbage:
            self.runner.collect_garbage()

    # -- the end --------------------------------------------------------------------------------
    def close(self):
        """Hand on what is still rendering, let the queued jobs run, then close the listeners
        (a bag writes its summary there)."""
        if not self.runner.running:
            self.drain()           # the frames still rendering when the run ended
        if self.publisher is not None:
            self.publisher.close()
        for close in _hooks(self.listeners, "close"):
            close()
        self._release()

    def _release(self):
        """The publisher's and renderer's threads ended, the switch interval restored."""
        if self.publisher is not None:
            self.publisher.close()
        if hasattr(self.sim, "render_in_thread"):
            self.sim.render_in_thread(False)
        if self._switch_interval is not None:
            sys.setswitchinterval(self._switch_interval)
            self._switch_interval = None

    def stats(self, last: int | None = None):
        """The runner's statistics (its lateness over the last `last` steps of its window, or
        the whole window; real_time_factor = rtf) and the steps of published jobs dropped
        (messages_dropped: the publisher fell behind)."""
        stats = self.runner.stats(last)
        return dict(stats, real_time_factor=stats["rtf"], messages_dropped=self.dropped())

    def live_stats(self):
        """stats() over the last LIVE_LATENESS_STEPS steps: what a once-a-second status reads."""
        return self.stats(last=LIVE_LATENESS_STEPS)

    def dropped(self):
        return self.publisher.dropped if self.publisher is not None else 0
