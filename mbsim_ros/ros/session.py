"""One run: configuration -> models -> Simulation with sensors -> Bridge on a transport ->
Runner. Shared by `mbsim run` and the rclpy sim_node, so both behave the same."""
from __future__ import annotations

import threading
import time

from ..model import ConfigError, ModelError
from .bridge import Bridge
from .runner import AsyncPublisher, Runner


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
        sim = Simulation(models, dt=config["dt"] or DEFAULT_DT, integrator=config["integrator"],
                         contact=config["contact"] or None, seed=config["seed"], sensors=config["sensors"],
                         names=getattr(models, "names", None), poses=getattr(models, "poses", None))
    except (ConfigError, ModelError):
        raise
    except ValueError as e:        # options this world cannot take (rk4 with LCP contact, ...)
        raise ConfigError(f"configuration: {e}") from None
    sim.actuators_enabled = config["actuators_enabled"]
    if config.get("on_ground"):
        for entity in sim.model_names:
            put_on_ground(sim, entity)
    for note in overlap_notes(sim):
        (log or (lambda text: None))(note)
    return sim


class Session:
    """A simulation published on `transport`, paced by a Runner.

    Publishing: paced runs hand messages to an AsyncPublisher thread (the physics never waits on
    a transport; a full queue drops the oldest step's messages and counts them); runs at rtf 0
    publish inline, so a bag recorded as fast as possible loses nothing."""

    def __init__(self, sim, transport, config, log=None, progress=None, queue=256):
        self.sim = sim
        self.transport = transport
        self.config = config
        rtf = config["real_time_factor"]
        self.publisher = AsyncPublisher(max_queue=queue) if rtf > 0 else None
        self.runner = Runner(sim, rtf=rtf, policy=config["catch_up"], progress=progress)
        self.bridge = Bridge(sim, transport, config, publish=self.publisher.submit if self.publisher else None,
                             submit=self.runner.submit, log=log)
        self.bridge.runner_stats = self.runner.stats
        if self.bridge.hil is not None:     # devices' arrival stamps: the runner's wall -> simulation clock
            self.bridge.hil.clock.schedule = self.runner.sim_time
        self.runner.on_step = self.bridge.on_step
        self.bridge.start()

    # -- the world's models, between steps ----------------------------------------------------
    def spawn(self, model, name=None, pose=None) -> str:
        """Add `model` to the running world as entity `name` (default model.name) at `pose`
        ((xyz, quaternion xyzw), a 4x4 matrix or None) between steps, and treat it like a model
        loaded at start: joints held with the configuration's `hold` (the model is edited so),
        lowered with `on_ground`, a warning for overlaps; published with its joint_states
        entries, sensor topics, NS/<name>/robot_description and TF.
        Returns the entity name. ValueError for a taken name or a model that does not compile
        (the world is unchanged). Waits for the physics thread (any thread but that one may call
        it); not running, it happens here and now."""
        return self.between_steps(lambda: self._spawn(model, name, pose))

    def _spawn(self, model, name, pose):
        from ..dynamics.placement import overlap_notes, put_on_ground
        from .world import hold_initial_pose
        if self.config.get("hold", 0) > 0 and not (model.actuators or model.motors):
            hold_initial_pose([model], self.config["hold"])      # as the models loaded at start
        name = self.sim.add_model(model, name, pose)
        if self.config.get("on_ground"):
            put_on_ground(self.sim, name)
        self.bridge.world_changed()
        for note in overlap_notes(self.sim, [name]):
            self.bridge.log(note)
        return name

    def delete(self, name: str):
        """Remove entity `name` between steps; its topics are unadvertised, the others' state,
        topics and frames stay. KeyError for an unknown name, ValueError for the last model."""
        def remove():
            self.sim.remove_model(name)
            self.bridge.world_changed()
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
        return self.runner.run(duration)

    def reset(self):
        """Back to t = 0 between steps (Runner.reset), with the configuration's actuator switch
        again (sim.reset turns the actuators on)."""
        self.runner.reset()
        self.runner.submit(lambda: setattr(self.sim, "actuators_enabled", self.config["actuators_enabled"]))

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
        self.bridge.close()
        if self.publisher is not None:
            self.publisher.close()
        self.transport.close()

    def set_source(self, sensor: str, source: str) -> str:
        """Put sensor's real device ("real") or the simulation ("sim") on its topic (a sensor
        with a devices: entry); returns what the topic now carries. ValueError for a sensor
        without a real device or an unknown source."""
        if self.bridge.hil is None:
            raise ValueError("set_source: the configuration has no devices: section")
        return self.bridge.hil.set_source(sensor, source)

    def dropped(self):
        return self.publisher.dropped if self.publisher is not None else 0
