"""What a Dask worker holds for a batch: the world, installed once per worker (and again on every
worker that joins or restarts) by a worker plugin the scheduler keeps, so that no task depends
on data one worker might lose; tasks carry only the world's name and their scenario (or their
chunk of scenarios stepped together, batched.py)."""
from distributed.diagnostics.plugin import WorkerPlugin

from .scenario import run_scenario

WORLDS = {}      # name -> world_bytes(), in this worker process


class WorldPlugin(WorkerPlugin):
    def __init__(self, name, world):
        self.name = name
        self.world = world

    def setup(self, worker):
        WORLDS[self.name] = self.world

    def teardown(self, worker):
        WORLDS.pop(self.name, None)


def run(name, scenario, bags):
    """run_scenario on the world installed under `name`."""
    return run_scenario(WORLDS[name], scenario, bags)


def run_chunk_of(name, scenarios):
    """batched.run_chunk on the world installed under `name`: [(row, None)]."""
    from .batched import run_chunk
    return run_chunk(WORLDS[name], scenarios)
