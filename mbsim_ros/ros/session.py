"""One run: configuration -> models -> Simulation with sensors -> Bridge on a transport ->
Runner. Shared by `mbsim run` and the rclpy sim_node, so both behave the same."""
from __future__ import annotations

from ..model import ConfigError, ModelError
from .bridge import Bridge
from .runner import AsyncPublisher, Runner


def simulation(models, config):
    """The Simulation a configuration asks for (dt and contact as world.load_world filled them
    in; left open, 0.001 s and the models' contact method)."""
    from ..sensors import Simulation
    from .world import DEFAULT_DT
    try:
        sim = Simulation(models, dt=config["dt"] or DEFAULT_DT, integrator=config["integrator"],
                         contact=config["contact"] or None, seed=config["seed"], sensors=config["sensors"])
    except (ConfigError, ModelError):
        raise
    except ValueError as e:        # options this world cannot take (rk4 with LCP contact, ...)
        raise ConfigError(f"configuration: {e}") from None
    sim.actuators_enabled = config["actuators_enabled"]
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
