"""One scenario, where it runs (a Dask worker or this process): the world from its bytes, the
scenario's parameter overrides, the drivers (a schedule of timed inputs, a controller), the run,
the metrics -> one result row (and the bag's files when kept).

A scenario never raises: whatever goes wrong (a SimulationError, a controller's or metric's
exception, a bad override) makes a row with status "failed" and the error.
"""
from __future__ import annotations

import math
import os
import pickle
import shutil
import socket
import tempfile
import time
import warnings

import numpy as np

from .metrics import evaluate, load_callable

POSE_FIELDS = ("x", "y", "z", "roll", "pitch", "yaw")   # model.<M>.<f>: added to the initial pose

OPTICAL = ("range", "camera")


def optical_off(config, models):
    """Cameras and range sensors stay off in a batch unless the run configuration enables them
    (rendering would cost more than the physics; no metric reads them). Returns a note."""
    off = []
    sensors = config.sensors
    for model in models:
        for s in model.sensors:
            if s.type in OPTICAL and not (sensors.get(s.name) or {}).get("enabled", False):
                sensors[s.name] = dict(sensors.get(s.name) or {}, enabled=False)
                off.append(s.name)
    return [f"cameras and range sensors off in the batch (enable one with world: sensors: NAME: {{enabled: true}}): "
            f"{', '.join(off)}"] if off else []


def _find(items, name, what):
    for item in items:
        if item.name == name:
            return item
    names = [i.name for i in items]
    more = ", ..." if len(names) > 30 else ""
    raise KeyError(f"no {what} named {name!r} in the models ({what}s: {', '.join(names[:30])}{more})")


def apply_overrides(models, config, params):
    """Set each parameter (spec.PARAMETERS names) on models and config in place; KeyError saying
    what is missing. controller and schedule parameters are the drivers' (see drive())."""
    for name, value in params.items():
        parts = name.split(".")
        kind = parts[0]
        if kind in ("controller", "schedule"):
            continue
        if kind == "link":
            link = _find([l for m in models for l in m.links], parts[1], "link")
            if parts[2] == "mass":
                if link.mass > 0:
                    link.inertia = link.inertia * (value / link.mass)
                link.mass = float(value)
            else:
                if not link.collisions:
                    raise KeyError(f"link {link.name!r} has no collision shapes to set the {parts[2]} of")
                for shape in link.collisions:
                    setattr(shape, parts[2], float(value))
        elif kind == "joint":
            joint = _find([j for m in models for j in m.joints], parts[1], "joint")
            if joint.type in ("fixed",) or (parts[2] == "q0" and joint.type in ("free", "ball")):
                raise KeyError(f"joint {joint.name!r} ({joint.type}) has no single coordinate for {parts[2]}")
            getattr(joint, parts[2])[:] = value
        elif kind == "sensor":
            sensor = _find([s for m in models for s in m.sensors], parts[1], "sensor")
            if sensor.type in OPTICAL:
                raise KeyError(f"sensor {sensor.name!r} is a {sensor.type}; noise and bias sweep accelerometers, "
                               "gyros and force sensors")
            key = "stddev" if parts[2] == "noise" else "bias_stddev"
            cfg = dict(config.sensors.get(sensor.name) or {})
            noise = cfg.get("noise") or {}
            cfg["noise"] = [dict(b, **{key: value}) for b in noise] if isinstance(noise, list) else dict(noise, **{key: value})
            config.sensors[sensor.name] = cfg
        elif kind == "model":           # by entity name (a World's names) or the model's own
            entities = [n or m.name for n, m in zip(getattr(models, "names", None) or [None] * len(models), models)]
            if parts[1] not in entities:
                raise KeyError(f"no model named {parts[1]!r} in the world (models: {', '.join(entities)})")
            model = models[entities.index(parts[1])]
            root = next((j for j in model.joints if j.parent is None), None)
            if root is None or root.type != "free":
                raise KeyError(f"model {model.name!r} has no floating base (free root joint) to place")
            axis = POSE_FIELDS.index(parts[2])
            if axis < 3:
                root.q0[axis] += value
            else:
                from scipy.spatial.transform import Rotation
                delta = Rotation.from_rotvec(np.eye(3)[axis - 3] * value)
                root.q0[3:7] = (delta * Rotation.from_quat(root.q0[3:7])).as_quat()
    for model in models:
        model.finalize()


def drive(harness, world, params):
    """Start the scenario's drivers: its schedule (timed inputs) and its controller, called as
    controller(harness, **options); a callable it returns runs every control period."""
    name = params.get("schedule", world["schedule"])
    if name:
        harness.every(harness.sim.dt, Schedule(world["schedules"][name]))
    path = params.get("controller", world["controller"])
    if path:
        options = dict(world["controller_options"])
        options.update({k.split(".", 1)[1]: v for k, v in params.items() if k.startswith("controller.")})
        tick = load_callable(path)(harness, **options)
        if callable(tick):
            rate = world["control_rate"]
            harness.every(1.0 / rate if rate else harness.sim.dt, tick)


class Schedule:
    """Sends each timed input once its time is reached (before that step)."""

    def __init__(self, events):
        self.events = list(events)
        self.k = 0

    def __call__(self, world):
        half = 0.5 * world.sim.dt
        while self.k < len(self.events) and self.events[self.k][0] <= world.t + half:
            _, kind, body = self.events[self.k]
            self.k += 1
            if kind == "joint_efforts":
                world.joint_efforts(body)
            elif kind == "joint_commands":
                world.joint_commands(body["name"], body.get("position"), body.get("velocity"), body.get("effort"))
            elif kind == "actuator_controls":
                world.actuator_controls(body["name"], body["effort"])
            else:
                world.inputs(body["name"], body["position"])


def new_row(world, scenario):
    """A scenario's row before it runs: its identity and parameters, NaN metrics, status ok."""
    params = scenario["params"]
    row = dict(scenario=scenario["scenario"], key=scenario["key"], seed=scenario["seed"], **params)
    row.update({name: math.nan for name in world["metrics"]})
    row.update(status="ok", error="", warnings="", sim_time=0.0, worker=f"{socket.gethostname()}:{os.getpid()}")
    return row


def configure(world, scenario):
    """(models, config) of a scenario: the world's (a fresh copy, unpickled: changed in place)
    with the scenario's seed and parameter overrides."""
    models, config = world["models"], world["config"]
    config.sensors = {k: dict(v) for k, v in config.sensors.items()}
    config.seed = scenario["seed"]
    apply_overrides(models, config, scenario["params"])
    return models, config


def failure(e):
    """A row's error text for exception e."""
    return f"{type(e).__name__}: {e}"


def warnings_text(errors, caught):
    """A row's warnings: the input errors, then the warnings caught (each once)."""
    seen = list(errors)
    for w in caught:
        text = str(w.message)
        if text not in seen:
            seen.append(text)
    return "; ".join(seen)[:2000]


def run_scenario(world, scenario, bags="none"):
    """(row, bag files) for one scenario. world: the spec's world_bytes() (or its unpickled
    dict); scenario: {"scenario", "key", "seed", "params"}; bags: none | failed | all.
    row: scenario, key, seed, the parameters, the metrics (NaN when failed), status, error,
    warnings, wall_time, cpu_time (this thread's: the scenario's own), sim_time, worker.
    bag files: {relative path: bytes} or None."""
    from .harness import Harness
    start, start_cpu = time.perf_counter(), time.thread_time()
    world = pickle.loads(world if isinstance(world, (bytes, bytearray)) else pickle.dumps(world))   # a fresh copy
    params = scenario["params"]
    row = new_row(world, scenario)
    tmp = tempfile.mkdtemp(prefix="mbsim-batch-") if bags != "none" else None
    harness = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            models, config = configure(world, scenario)
            harness = Harness(models, config, bag=os.path.join(tmp, "bag") if tmp else None)
            drive(harness, world, params)
            harness.run_until(world["duration"])
            row.update(evaluate(world["metrics"], harness.signals()))
        except Exception as e:
            row.update(status="failed", error=failure(e))
        finally:
            if harness is not None:
                row["sim_time"] = harness.t
                try:
                    harness.close()
                except Exception as e:
                    if row["status"] == "ok":
                        row.update(status="failed", error=f"closing the run: {failure(e)}")
    row["warnings"] = warnings_text(harness.errors if harness is not None else [], caught)
    files = None
    if tmp is not None:
        if bags == "all" or row["status"] == "failed":
            files = {}
            for root, _, names in os.walk(tmp):
                for n in names:
                    path = os.path.join(root, n)
                    with open(path, "rb") as f:
                        files[os.path.relpath(path, os.path.join(tmp, "bag"))] = f.read()
        shutil.rmtree(tmp, ignore_errors=True)
    row["wall_time"] = time.perf_counter() - start
    row["cpu_time"] = time.thread_time() - start_cpu
    return row, files
