"""Scenario batches: sweeps, Monte Carlo and regression suites run headless as Dask tasks.

    from mbsim_ros.batch import load_spec, prepare, run_batch
    spec = prepare(load_spec("sweep.yaml"))          # or load_spec({...}) with the same keys
    table = run_batch(spec, "results")                # pyarrow Table, one row per scenario

Harness (harness.py) runs one world headless, driven as a ROS node is; Signals (signals.py) are
what it recorded; metrics.py has the built-in metrics. Scenarios of one model that differ only in
their initial state run together as the worlds of a BatchSimulation instead, with the same rows
(plan.py decides which, batched.py runs them). Uses Simulation, sensors and the bag
transport, never rclpy. Dask and pyarrow are needed only by run_batch (`pip install mbsim_ros[batch]`).
Names load on first use, so `mbsim` commands and the pytest plugin stay light.
"""
import importlib

_WHERE = {"Harness": "harness", "Signals": "signals", "METRICS": "metrics", "BatchSpec": "spec",
          "SpecError": "spec", "load_spec": "spec", "prepare": "spec", "run_batch": "runner"}


def __getattr__(name):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(f".{_WHERE[name]}", __name__)
    return getattr(module, "BUILTIN" if name == "METRICS" else name)


__all__ = sorted(_WHERE)
