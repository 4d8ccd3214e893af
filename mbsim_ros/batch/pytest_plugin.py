"""pytest plugin (entry point pytest11 "mbsim_ros"): the `mbsim_world` fixture.

    def squat(world, depth=0.1):                  # a scenario: the same function drives a test
        world.joint_commands(["KNEE"], position=[depth])    # and a batch (controller: mod:squat)
        world.run(1.0)

    def test_squat_keeps_balance(mbsim_world):
        world = mbsim_world("robot.wrl,floor.wrl", config={"hold": 2000})
        squat(world, depth=0.2)
        assert world.signals().metric("max_tilt") < 0.1

mbsim_world(models=None, config=None, bag=None) -> Harness (harness.py): the models (paths,
comma-separated paths, Model objects, or None for config's `model`, else the bundled SR1 world)
with the run configuration (the keys of `mbsim run --config`; joints held per `hold` for model
files; cameras and range sensors off unless the configuration enables them, as in a batch),
headless at real-time factor 0, driven through the inputs a ROS node gets and recording
every step. Closed after the test. Nothing heavy is imported until the fixture is used.
"""
import pytest


def make_world(models=None, config=None, bag=None):
    from ..model import Model
    from ..run.config import load_config
    from ..run.world import load_world
    from .harness import Harness
    from .scenario import optical_off
    config = dict(config or {})
    if models is None or isinstance(models, str) or (isinstance(models, (list, tuple)) and models
                                                     and all(isinstance(m, str) for m in models)):
        if models is not None:
            config["model"] = models if isinstance(models, str) else ",".join(models)
        full = load_config(None, config)
        loaded, _ = load_world(full)
        optical_off(full, loaded)
        return Harness(loaded, full, bag=bag)
    loaded = [models] if isinstance(models, Model) else list(models)
    full = load_config(None, config)
    optical_off(full, loaded)
    return Harness(loaded, full, bag=bag)


@pytest.fixture
def mbsim_world():
    """A factory of headless worlds (see the module docstring); each is closed after the test."""
    made = []

    def make(models=None, config=None, bag=None):
        world = make_world(models, config, bag)
        made.append(world)
        return world
    yield make
    for world in made:
        world.close()
