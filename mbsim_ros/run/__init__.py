"""The run core, no ROS: configuration (config), the world's models (world), real-time pacing
(pacing), joint control (control), stop signals (stop_signals) and the Session (session) that owns
a running simulation and hands each step to its listeners (the ROS bridge, a recorder, the view).

    from mbsim_ros.run import Session, load_config, load_world, build_simulation
    config = load_config("sim.yaml", {"real_time_factor": 0})
    models, notes = load_world(config)
    session = Session(build_simulation(models, config), config, listeners=[...])
    session.run(config.duration or 5.0)
    session.close()
"""
from .config import load_config
from .control import JointController
from .pacing import AsyncPublisher, Runner
from .session import Session
from .world import build_simulation, load_world

__all__ = ["AsyncPublisher", "JointController", "Runner", "Session", "load_config", "load_world", "build_simulation"]
