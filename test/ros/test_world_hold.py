"""`hold` springs keep a robot standing but must not fight a model's own actuators or motors."""
import os

import numpy as np

from mbsim_ros.run.config import load_config
from mbsim_ros.run.world import DEFAULT_WORLD, load_world

MOTORS = os.path.join(os.path.dirname(__file__), "..", "models", "chrono_yaml", "motors.yaml")


def test_hold_springs_only_on_models_without_actuators_or_motors():
    config = load_config(overrides={"model": ",".join(DEFAULT_WORLD + [MOTORS])})
    models, notes = load_world(config)
    robot, mechanism = models[0], models[-1]
    assert mechanism.motors, "the test model must have motors"
    held = [j for j in robot.joints if j.type == "revolute"]
    assert held and all(np.all(j.stiffness == config.hold) for j in held)
    assert all(np.all(j.stiffness == 0.0) for j in mechanism.joints)
    assert any("not held" in n and mechanism.name in n for n in notes)
