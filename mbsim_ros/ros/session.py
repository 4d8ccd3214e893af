"""One run: configuration -> models -> Simulation with sensors -> Bridge on a transport ->
Runner. Shared by `mbsim run` and the rclpy sim_node, so both behave the same."""
from __future__ import annotations

import math
import sys
import threading
import time
import warnings

from .._kernel_cache import warm_up
from ..model import ConfigError, ModelError
from . import bag, templates
from .bridge import Bridge
from .runner import AsyncPublisher, Runner, apply_os_scheduling

SWITCH_INTERVAL = 2e-4     # s, Python's thread switch interval during paced runs
# /diagnostics summarizes the lateness of this many latest steps (Runner.stats: one sort of them);
# summarizing every step so far with np.percentile cost the publisher thread 1.5 ms after 60000
# steps and 7 ms after 300000, competing with the physics thread for the GIL each second
LIVE_LATENESS_STEPS = 4096


def simulation(models, config, log=None):
    """The Simulation a configuration asks for (dt and contact as world.load_world filled them
    in; left open, 0.001 s and the models' contact method), the models at the entity names and
    poses a World carries, floating ones lowered onto the ground with on_ground; log(note) gets
    one line for each pair of links of different models that start more than 1 mm inside each
    other."""
    from ..dynamics.placement import overlap_notes, put_on_ground
    from ..sensors import Simulation
    from .world import DEFAULT_DT
    try:
        with warnings.catch_warnings(record=True) as caught:     # its notes go to log, once
            warnings.simplefilter("always")
            sim = Simulation(models, dt=config["dt"] or DEFAULT_DT, integrator=config["integrator"],
                             contact=config["contact"] or None, seed=config["seed"], sensors=config["sensors"],
                             massless_armature=config["massless_armature"],
                             names=getattr(models, "names", None), poses=getattr(models, "poses", None))
        for w in caught:
            if str(w.message) not in sim.notes:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    except (ConfigError, ModelError):
        raise
    except ValueError as e:        # options this world cannot take (rk4 with LCP contact, ...)
        raise ConfigError(f"configuration: {e}") from None
    sim.actuators_enabled = config["actuators_enabled"]
    if config.get("on_ground"):
        for entity in sim.model_names:
            put_on_ground(sim, entity)
    for note in sim.notes + overlap_notes(sim):      # initial assembly, massless joints, overlaps
        (log or (lambda text: None))(note)
    warm_up([("TF poses", templates.warm_up), ("bag recording", bag.warm_up)])   # in the compile report, not at the first message
    return sim


class Session:
    """A simulation published on `transport`, paced by a Runner.

    Publishing: paced runs hand messages to an AsyncPublisher thread (the physics never waits on
    a transport; a full queue drops the oldest step's messages and counts them); runs at rtf 0
    publish inline, so a bag recorded as fast as possible loses nothing.
    Cameras and range sensors render on their own thread at every real-time factor
    (Simulation.render_in_thread; the numba kernels release the GIL, so on a machine with a
    second core a frame costs the physics thread only its submission). Paced, a frame never
    delays a step: a renderer behind skips frames (counted). At rtf 0 nothing is skipped
    (`lossless`: the physics thread waits for the renderer instead) and run() returns once the
    frames of its steps are rendered and published.
    Python's thread switch interval is SWITCH_INTERVAL meanwhile, so that the physics thread gets
    the interpreter back within that time when the publisher or render thread holds it (the
    default 5 ms is five steps at 1 kHz).
    """

    def __init__(self, sim, transport, config, log=None, progress=None, queue=256, jitter_window=4096):
        self.sim = sim
        self.transport = transport
        self.config = config
        rtf = config["real_time_factor"]
        self.publisher = AsyncPublisher(max_queue=queue) if rtf > 0 else None
        self._switch_interval = None
        self.runner = Runner(sim, rtf=rtf, policy=config["catch_up"], progress=progress,
                             realtime_priority=config.get("realtime_priority", 0), cpu=config.get("cpu"),
                             jitter_window=jitter_window)
        self.bridge = Bridge(sim, transport, config, publish=self.publisher.submit if self.publisher else None,
                             submit=self.runner.submit, log=log)
        self.bridge.runner_stats = lambda: self.stats(last=LIVE_LATENESS_STEPS)
        if self.bridge.hil is not None:     # devices' arrival stamps: the runner's wall -> simulation clock
            self.bridge.hil.clock.schedule = self.runner.sim_time
        self.runner.on_step = self.bridge.on_step
        # after the Bridge, which may refuse the configuration (then nothing is left running)
        if hasattr(sim, "render_in_thread"):
            sim.render_in_thread(True)
        self._set_lossless(rtf == 0)
        self._switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(min(SWITCH_INTERVAL, self._switch_interval))
        priority = config.get("realtime_priority", 0)
        if priority:
            # the physics thread waits for the GIL whenever these hold it: under ordinary
            # scheduling on a busy machine they would keep it while descheduled (priority
            # inversion), so they run real-time too, one level below the physics
            workers = (self.publisher, getattr(sim, "optical_worker", None))
            for tid in [w.native_id for w in workers if w is not None] + transport.worker_threads():
                apply_os_scheduling(max(1, priority - 1), thread=tid)
        self.bridge.start()
        if self.publisher is not None:      # the first messages (templates built, the TF kernel
            self.publisher.flush()          # loaded) before the clock starts, not during the run

    def _set_lossless(self, on):
        worker = getattr(self.sim, "optical_worker", None)
        if worker is not None:
            worker.lossless = on

    def drain(self):
        """Wait until every frame sampled so far is rendered and published, and every message
        collected so far is written. Not from another thread while the runner runs."""
        worker = getattr(self.sim, "optical_worker", None)
        if worker is not None:
            worker.flush()
            self.bridge.publish_readings(self.sim)
        if self.publisher is not None:
            self.publisher.flush()

    # -- the world's models, between steps ----------------------------------------------------
    def spawn(self, model, name=None, pose=None, namespace=None) -> str:
        """Add `model` to the running world as entity `name` (default model.name) at `pose`
        ((xyz, quaternion xyzw), a 4x4 matrix or None) between steps, and treat it like a model
        loaded at start: joints held with the configuration's `hold` (the model is edited so),
        lowered with `on_ground`, a warning for overlaps; published with its joint_states
        entries, sensor topics, NS/<name>/robot_description and TF. With `namespace` (a valid ROS
        namespace, made absolute) its sensor topics, robot_description and a joint_states of its
        own joints go under it instead (Bridge.namespaces); its joints stay in NS/joint_states.
        Returns the entity name. ValueError for a taken name or a model that does not compile
        (the world is unchanged). Waits for the physics thread (any thread but that one may call
        it); not running, it happens here and now."""
        return self.between_steps(lambda: self._spawn(model, name, pose, namespace))

    def _spawn(self, model, name, pose, namespace=None):
        from ..dynamics.placement import overlap_notes, put_on_ground
        from .world import hold_initial_pose
        if self.config.get("hold", 0) > 0 and not (model.actuators or model.motors):
            hold_initial_pose([model], self.config["hold"])      # as the models loaded at start
        name = self.sim.add_model(model, name, pose)
        if namespace:
            self.bridge.namespaces[name] = "/" + namespace.strip("/")
        if self.config.get("on_ground"):
            put_on_ground(self.sim, name)
        self.bridge.world_changed()
        self.runner.collect_garbage()
        for note in overlap_notes(self.sim, [name]):
            self.bridge.log(note)
        return name

    def delete(self, name: str):
        """Remove entity `name` between steps; its topics are unadvertised, the others' state,
        topics and frames stay. KeyError for an unknown name, ValueError for the last model."""
        def remove():
            self.sim.remove_model(name)
            self.bridge.namespaces.pop(name, None)
            self.bridge.world_changed()
            self.runner.collect_garbage()
        self.between_steps(remove)

    def set_model_pose(self, name: str, pose):
        """Move entity `name`'s world frame (Simulation.set_model_pose) between steps; TF follows."""
        def move():
            self.sim.set_model_pose(name, pose)
            self.bridge.world_changed()
        self.between_steps(move)

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

    def run(self, duration=None):
        """Runner.run; at rtf 0 it returns once the frames of its steps are published."""
        stats = self.runner.run(duration)
        if self.runner.rtf == 0:
            self.drain()
        return stats

    def reset(self):
        """Back to t = 0 between steps (Runner.reset), with the configuration's actuator switch
        again (sim.reset turns the actuators on) and the bridge's rates counting from 0 (every
        topic flows again from the first step)."""
        self.runner.reset()

        def after():
            self.sim.actuators_enabled = self.config["actuators_enabled"]
            self.bridge.reset()
        self.runner.submit(after)

    def set_rate(self, key, hz):
        """One of the bridge's RATES (joint_state_rate, tf_rate, clock_rate, diagnostics_rate)
        from the next step on; ValueError for a bad key or value."""
        from .bridge import RATES
        if key not in RATES or not (math.isfinite(float(hz)) and float(hz) > 0):
            raise ValueError(f"{key} = {hz}: expected one of {', '.join(RATES)} with a rate in Hz > 0")
        self.runner.submit(lambda: self.bridge.set_rate(key, hz))

    def set_real_time_factor(self, rtf):
        """The runner's real-time factor (0: as fast as possible) from the next step on."""
        self.runner.set_pacing(rtf=rtf)
        self._set_lossless(float(rtf) == 0)
        self.config["real_time_factor"] = float(rtf)

    def set_catch_up(self, policy):
        """The runner's catch-up policy (compensatory | conservative) from the next step on."""
        self.runner.set_pacing(policy=policy)
        self.config["catch_up"] = policy

    def set_hold(self, stiffness):
        """The stiffness of the springs holding the initial pose (world.set_hold) from the next
        step on; ValueError where the world was loaded without them."""
        from .world import set_hold
        set_hold(self.sim, stiffness, check_only=True)
        self.runner.submit(lambda: set_hold(self.sim, stiffness))
        self.config["hold"] = float(stiffness)

    def pause_at(self, t_end):
        """Pause the runner when the simulation reaches t_end (the step nearest it), each time it
        gets there (again after a reset); resume() goes on past it."""
        step, dt = self.runner.on_step, self.sim.dt
        k_end = int(round(t_end / dt))

        def on_step(sim):
            step(sim)
            if int(round(sim.t / dt)) == k_end:
                self.runner.pause()
        self.runner.on_step = on_step

    def close(self):
        """Close the serial ports (hardware in the loop), flush what is queued, then close the
        transport (a bag writes its summary here)."""
        if not self.runner.running:
            self.drain()           # the frames still rendering when the run ended
        self.bridge.close()
        if self.publisher is not None:
            self.publisher.close()
        self.transport.close()
        if hasattr(self.sim, "render_in_thread"):
            self.sim.render_in_thread(False)
        if self._switch_interval is not None:
            sys.setswitchinterval(self._switch_interval)
            self._switch_interval = None

    def set_source(self, sensor: str, source: str) -> str:
        """Put sensor's real device ("real") or the simulation ("sim") on its topic (a sensor
        with a devices: entry); returns what the topic now carries. ValueError for a sensor
        without a real device or an unknown source."""
        if self.bridge.hil is None:
            raise ValueError("set_source: the configuration has no devices: section")
        return self.bridge.hil.set_source(sensor, source)

    def stats(self, last: int | None = None):
        """The runner's statistics (its lateness over the last `last` steps of its window, or
        the whole window) and the steps of messages the publisher dropped (behind)."""
        return dict(self.runner.stats(last), messages_dropped=self.dropped())

    def dropped(self):
        return self.publisher.dropped if self.publisher is not None else 0
