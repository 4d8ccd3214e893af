"""The batch file: a base world and run configuration, a duration, scenario axes and metrics.

    world:                       # run configuration: anything `mbsim run --config` takes except
      model: robot.wrl,floor.wrl #   devices/emulate/commands (paths relative to this file)
      hold: 2000
    config: sim.yaml             # optional run configuration file; world: keys override it
    duration: 2.0                # simulated seconds per scenario
    seeds: 4                     # noise seeds 0..3, or a list [0, 7, 9]; crossed with the samples
    sample: grid                 # grid | random | lhs (Latin hypercube)
    n: 20                        # random / lhs: number of samples
    sample_seed: 0               # random / lhs: the sampler's seed
    parameters:                  # the swept overrides, by name (PARAMETERS says which exist)
      link.WAIST.mass: {range: [20, 40], steps: 3}     # steps: grid only
      link.FLOOR.friction: {values: [0.3, 0.6, 1.0]}
      controller: {values: ["mypkg.ctrl:stand", "mypkg.ctrl:squat"]}
    controller: mypkg.ctrl:stand # fixed driver (import path) unless swept; controller_options: {...}
    control_rate: 100            # Hz at which a controller's tick runs (default: every step)
    schedules: {squat: [{t: 0.5, joint_commands: {name: [...], position: [...]}}]}
    schedule: squat              # fixed schedule unless swept
    metrics:                     # name: options (metrics.py lists the built-ins)
      fell: {threshold: 0.3}
      max_tilt: {tolerance: 1e-3}          # --compare flags changes beyond the tolerance (default 0)
      stride: {function: mypkg.metrics:stride}

load_spec() checks the file's shape; prepare() loads the models, checks every parameter name
against them and expands the scenarios. Every error is a SpecError naming the file and key.
"""
from __future__ import annotations

import copy
import hashlib
import itertools
import json
import math
import os
import pickle
from dataclasses import dataclass, field

import numpy as np

from ..model import ConfigError
from ..run.config import read_yaml_mapping
from .scenario import POSE_FIELDS


class SpecError(ConfigError):
    """A batch file that cannot run: names the file and the key, and what was expected."""


KEYS = ("world", "config", "duration", "seeds", "sample", "n", "sample_seed", "parameters", "controller",
        "controller_options", "control_rate", "schedules", "schedule", "metrics")
SAMPLES = ("grid", "random", "lhs")
EXCLUDED_CONFIG = ("devices", "emulate", "commands")     # real hardware has no place in a batch
# parameter address -> (what it sets, lowest allowed value, strictly above it)
FIELDS = {
    ("link", "mass"): ("the link's mass in kg (its inertia scales with it)", 0.0, True),
    ("link", "friction"): ("the friction coefficient of the link's collision shapes", 0.0, False),
    ("link", "restitution"): ("the restitution of the link's collision shapes", 0.0, False),
    ("joint", "damping"): ("the joint's viscous damping", 0.0, False),
    ("joint", "stiffness"): ("the joint's spring stiffness", 0.0, False),
    ("joint", "friction"): ("the joint's Coulomb friction", 0.0, False),
    ("joint", "q0"): ("the joint's initial position", None, False),
    ("sensor", "noise"): ("the sensor's white noise stddev", 0.0, False),
    ("sensor", "bias"): ("the sensor's turn-on bias stddev", 0.0, False),
}
PARAMETERS = ("link.<link>.mass|friction|restitution, joint.<joint>.damping|stiffness|friction|q0, "
              "sensor.<sensor>.noise|bias, model.<model>.x|y|z|roll|pitch|yaw, controller, "
              "controller.<option>, schedule")
RESERVED = ("scenario", "key", "seed", "status", "error", "warnings", "wall_time", "cpu_time", "sim_time", "worker")


@dataclass
class Axis:
    name: str
    values: list | None = None        # explicit values
    low: float | None = None          # or a range
    high: float | None = None
    steps: int | None = None          # grid points over the range
    categorical: bool = False

    def grid(self):
        if self.values is not None:
            return list(self.values)
        return [float(x) for x in np.linspace(self.low, self.high, self.steps)]

    def at(self, u):
        """The value at u in [0, 1): uniform over the range, or one of the values."""
        if self.values is not None:
            return self.values[min(int(u * len(self.values)), len(self.values) - 1)]
        return float(self.low + u * (self.high - self.low))


@dataclass
class BatchSpec:
    where: str                               # the file (or "batch spec") for messages
    base_dir: str
    config: dict                             # the run configuration, checked
    duration: float
    seeds: list
    sample: str
    n: int | None
    sample_seed: int
    axes: list
    controller: str | None
    controller_options: dict
    control_rate: float | None
    schedules: dict
    schedule: str | None
    metrics: dict                            # name -> {"metric" or "function", "tolerance", "options"}
    models: list = field(default_factory=list)      # filled by prepare()
    notes: list = field(default_factory=list)
    scenarios: list = field(default_factory=list)

    @property
    def parameter_names(self):
        return [a.name for a in self.axes]

    def tolerance(self, metric):
        return self.metrics[metric]["tolerance"]

    def world_bytes(self) -> bytes:
        """What a worker needs, by content: the models (already loaded here, meshes and all), the
        run configuration, the duration, drivers and metrics. No client path is read there."""
        return pickle.dumps(dict(models=self.models, config=self.config, duration=self.duration,
                                 controller=self.controller, controller_options=self.controller_options,
                                 control_rate=self.control_rate, schedules=self.schedules,
                                 schedule=self.schedule, metrics=self.metrics), protocol=4)

    def fingerprint(self, world=None) -> str:
        """The world (world_bytes(), or given) and the scenarios' keys: --resume finishes this
        same batch only."""
        keys = ",".join(s["key"] for s in self.scenarios).encode()
        return hashlib.sha1((world or self.world_bytes()) + keys).hexdigest()[:16]


def _fail(where, key, what):
    raise SpecError(f"{where}: {key}: {what}")


def _number(where, key, value, low=None, strict=False, integer=False):
    if isinstance(value, str):          # PyYAML reads 1e-3 (no dot) as a string
        try:
            value = float(value)
        except ValueError:
            pass
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if ok and integer:
        ok = float(value).is_integer()
    if ok and low is not None:
        ok = value > low if strict else value >= low
    if not ok:
        bound = "" if low is None else f" {'>' if strict else '>='} {low:g}"
        _fail(where, key, f"expected a{'n integer' if integer else ' finite number'}{bound}, got {value!r}")
    return int(value) if integer else float(value)


def load_spec(source, base_dir=None) -> BatchSpec:
    """A BatchSpec from a YAML file path or a mapping (the same keys; paths relative to base_dir,
    default the file's directory or the working directory)."""
    if isinstance(source, dict):
        data, where = copy.deepcopy(source), "batch spec"
        base_dir = base_dir or os.getcwd()
    else:
        where = str(source)
        data = read_yaml_mapping(source, "batch file", "batch settings", error=SpecError)
        base_dir = base_dir or os.path.dirname(os.path.abspath(where))
    unknown = [k for k in data if k not in KEYS]
    if unknown:
        _fail(where, unknown[0], f"unknown key; expected one of {', '.join(KEYS)}")
    config = _config(where, data, base_dir)
    if "duration" not in data:
        _fail(where, "duration", "missing: the simulated seconds per scenario")
    duration = _number(where, "duration", data["duration"], 0.0, strict=True)
    seeds = data.get("seeds", [config.seed])
    if isinstance(seeds, int) and not isinstance(seeds, bool):
        seeds = list(range(_number(where, "seeds", seeds, 1, integer=True)))
    if not isinstance(seeds, list) or not seeds:
        _fail(where, "seeds", f"expected a count or a non-empty list of integers, got {seeds!r}")
    seeds = [_number(where, "seeds", s, 0, integer=True) for s in seeds]
    if len(set(seeds)) != len(seeds):
        _fail(where, "seeds", "a seed appears twice")
    sample = data.get("sample", "grid")
    if sample not in SAMPLES:
        _fail(where, "sample", f"expected one of {', '.join(SAMPLES)}, got {sample!r}")
    n = data.get("n")
    if sample == "grid":
        if n is not None:
            _fail(where, "n", "only random and lhs samples take n (a grid has one scenario per combination)")
    else:
        if n is None:
            _fail(where, "n", f"missing: the number of {sample} samples")
        n = _number(where, "n", n, 1, integer=True)
    sample_seed = _number(where, "sample_seed", data.get("sample_seed", 0), 0, integer=True)
    schedules = data.get("schedules") or {}
    if not isinstance(schedules, dict):
        _fail(where, "schedules", "expected a mapping of schedule name -> list of timed inputs")
    schedules = {str(k): _schedule(where, f"schedules.{k}", v) for k, v in schedules.items()}
    schedule = data.get("schedule")
    if schedule is not None and schedule not in schedules:
        _fail(where, "schedule", f"no schedule named {schedule!r}; schedules: {', '.join(schedules) or 'none'}")
    controller = data.get("controller")
    if controller is not None:
        _import_path(where, "controller", controller)
    options = data.get("controller_options") or {}
    if not isinstance(options, dict):
        _fail(where, "controller_options", f"expected a mapping of keyword arguments, got {options!r}")
    rate = data.get("control_rate")
    if rate is not None:
        rate = _number(where, "control_rate", rate, 0.0, strict=True)
    axes = _axes(where, data.get("parameters") or {}, sample, schedules)
    if sample != "grid" and not axes:
        _fail(where, "parameters", f"a {sample} sample draws parameters: give at least one, or use sample: grid")
    metrics = _metrics(where, data.get("metrics"), axes)
    return BatchSpec(where, base_dir, config, duration, seeds, sample, n, sample_seed, axes, controller,
                     options, rate, schedules, schedule, metrics)


def _config(where, data, base_dir):
    from ..run.config import load_config
    world = data.get("world") or {}
    if not isinstance(world, dict):
        _fail(where, "world", f"expected a mapping of run settings, got {world!r}")
    for key in EXCLUDED_CONFIG:
        if key in world:
            _fail(where, f"world.{key}", "real devices, serial ports and commands have no place in a "
                                         "headless batch; drive scenarios with controller: or schedules:")
    path = data.get("config")
    if path is not None:
        path = os.path.join(base_dir, str(path))
    world = dict(world)
    models = world.get("model")
    if isinstance(models, str) and models:           # comma-separated files, relative to the spec
        world["model"] = ",".join(os.path.join(base_dir, p.strip()) for p in models.split(","))
    elif isinstance(models, list):                   # files and {file, name, pose, args}
        world["model"] = [os.path.join(base_dir, m) if isinstance(m, str) else
                          dict(m, file=os.path.join(base_dir, str(m["file"]))) if isinstance(m, dict) and "file" in m
                          else m for m in models]
    try:
        config = load_config(path)
        for key in EXCLUDED_CONFIG:
            if getattr(config, key):
                _fail(where, f"config {path}: {key}", "real devices, serial ports and commands have no "
                                                       "place in a headless batch")
        config = load_config(path, world)
    except SpecError:
        raise
    except ConfigError as e:
        raise SpecError(f"{where}: world: {e}") from None
    config.real_time_factor = 0.0
    return config


def _import_path(where, key, text):
    if not isinstance(text, str) or not text.strip() or " " in text.strip():
        _fail(where, key, f"expected an import path like package.module:function, got {text!r}")
    return text


INPUT_KINDS = ("joint_commands", "joint_efforts", "actuator_controls", "inputs")


def _schedule(where, key, events):
    if not isinstance(events, list) or not events:
        _fail(where, key, "expected a list of {t: seconds, joint_commands|joint_efforts|actuator_controls|inputs: ...}")
    out = []
    for k, e in enumerate(events):
        here = f"{key}[{k}]"
        if not isinstance(e, dict) or "t" not in e:
            _fail(where, here, "expected a mapping with t and one input")
        t = _number(where, f"{here}.t", e["t"], 0.0)
        kinds = [x for x in e if x != "t"]
        if len(kinds) != 1 or kinds[0] not in INPUT_KINDS:
            _fail(where, here, f"expected exactly one of {', '.join(INPUT_KINDS)} beside t, got {', '.join(kinds) or 'none'}")
        kind, body = kinds[0], e[kinds[0]]
        if kind == "joint_efforts":
            if not isinstance(body, list):
                _fail(where, f"{here}.joint_efforts", "expected a list of efforts, every DOF in model order")
            body = [_number(where, f"{here}.joint_efforts", x) for x in body]
        else:
            fields = {"joint_commands": ("position", "velocity", "effort"), "actuator_controls": ("effort",),
                      "inputs": ("position",)}[kind]
            if not isinstance(body, dict) or not isinstance(body.get("name"), list):
                _fail(where, f"{here}.{kind}", f"expected a mapping with name: [...] and {'/'.join(fields)}: [...]")
            bad = [x for x in body if x != "name" and x not in fields]
            if bad:
                _fail(where, f"{here}.{kind}.{bad[0]}", f"unknown field; expected {', '.join(fields)}")
            for f_ in fields:
                if f_ in body:
                    if not isinstance(body[f_], list) or len(body[f_]) != len(body["name"]):
                        _fail(where, f"{here}.{kind}.{f_}", "expected one number per name")
                    body[f_] = [_number(where, f"{here}.{kind}.{f_}", x) for x in body[f_]]
        out.append((t, kind, body))
    return sorted(out, key=lambda e: e[0])


def _axes(where, parameters, sample, schedules):
    if not isinstance(parameters, dict):
        _fail(where, "parameters", "expected a mapping of parameter name -> {values: [...]} or {range: [lo, hi]}")
    axes = []
    for name, body in parameters.items():
        key = f"parameters.{name}"
        name = str(name)
        categorical = name in ("controller", "schedule")
        if not categorical:
            _domain(where, key, name)
        if not isinstance(body, dict) or not (("values" in body) ^ ("range" in body)):
            _fail(where, key, "expected {values: [...]} or {range: [low, high]} (one of them)")
        unknown = [k for k in body if k not in ("values", "range", "steps")]
        if unknown:
            _fail(where, f"{key}.{unknown[0]}", "unknown key; expected values, or range with steps (grid)")
        if "values" in body:
            values = body["values"]
            if not isinstance(values, list) or not values:
                _fail(where, f"{key}.values", f"expected a non-empty list, got {values!r}")
            if categorical:
                for v in values:
                    if name == "schedule" and v not in schedules:
                        _fail(where, f"{key}.values", f"no schedule named {v!r}; schedules: {', '.join(schedules) or 'none'}")
                    if name == "controller":
                        _import_path(where, f"{key}.values", v)
                values = [str(v) for v in values]
            else:
                values = [_value(where, f"{key}.values", name, v) for v in values]
            if "steps" in body:
                _fail(where, f"{key}.steps", "steps go with a range, not with values")
            axes.append(Axis(name, values=values, categorical=categorical))
            continue
        if categorical:
            _fail(where, key, "a controller or schedule axis takes values: [...], not a range")
        rng = body["range"]
        if not (isinstance(rng, list) and len(rng) == 2):
            _fail(where, f"{key}.range", f"expected [low, high], got {rng!r}")
        low, high = (_value(where, f"{key}.range", name, v) for v in rng)
        if not low < high:
            _fail(where, f"{key}.range", f"expected low < high, got [{low:g}, {high:g}]")
        steps = body.get("steps")
        if sample == "grid":
            if steps is None:
                _fail(where, f"{key}.steps", "a grid needs steps: N (points over the range) or values: [...]")
            steps = _number(where, f"{key}.steps", steps, 2, integer=True)
        elif steps is not None:
            _fail(where, f"{key}.steps", f"steps are for a grid; a {sample} sample draws from the range")
        axes.append(Axis(name, low=low, high=high, steps=steps))
    return axes


def _domain(where, key, name):
    parts = name.split(".")
    if parts[0] == "controller" and len(parts) == 2 and parts[1]:
        return None, False
    if parts[0] == "model" and len(parts) == 3 and parts[2] in POSE_FIELDS:
        return None, False
    if len(parts) == 3 and (parts[0], parts[2]) in FIELDS:
        _, low, strict = FIELDS[(parts[0], parts[2])]
        return low, strict
    _fail(where, key, f"unknown parameter; expected one of {PARAMETERS}")


def _value(where, key, name, v):
    low, strict = _domain(where, key, name)
    return _number(where, key, v, low, strict)


def _metrics(where, metrics, axes):
    from .metrics import BUILTIN
    if metrics is None:
        metrics = {}
    if not isinstance(metrics, dict):
        _fail(where, "metrics", "expected a mapping of metric name -> options")
    out = {}
    for name, body in metrics.items():
        key = f"metrics.{name}"
        name = str(name)
        if name in RESERVED or name in [a.name for a in axes]:
            _fail(where, key, f"the name is taken by a column ({', '.join(RESERVED)} or a parameter)")
        body = dict(body or {})
        function = body.pop("function", None)
        metric = body.pop("metric", None if function else name)
        if function is not None:
            _import_path(where, f"{key}.function", function)
        elif metric not in BUILTIN:
            _fail(where, key, f"unknown metric {metric!r}; built-ins: {', '.join(BUILTIN)}, or give function: module:callable")
        tolerance = _number(where, f"{key}.tolerance", body.pop("tolerance", 0.0), 0.0)
        out[name] = dict(metric=metric, function=function, tolerance=tolerance, options=body)
    return out


# -- the world and its scenarios -------------------------------------------------------------

def prepare(spec: BatchSpec) -> BatchSpec:
    """Load the models (client side), check every parameter address and the metrics' options
    against them, and expand the scenarios. Returns spec (filled in)."""
    from ..run.world import load_world
    try:
        models, notes = load_world(spec.config)
    except ConfigError as e:
        raise SpecError(f"{spec.where}: world: {e}") from None
    spec.models, spec.notes = models, notes
    from .scenario import apply_overrides, optical_off
    spec.notes += optical_off(spec.config, models)
    for axis in spec.axes:
        probe = axis.grid()[0] if axis.values is not None or axis.steps else axis.low
        try:
            apply_overrides(copy.deepcopy(models), copy.deepcopy(spec.config), {axis.name: probe})
        except KeyError as e:
            raise SpecError(f"{spec.where}: parameters.{axis.name}: {e.args[0]}") from None
    from .harness import Harness
    try:        # checks the run settings against the models, and compiles (or loads) every kernel a
        # scenario uses once here: local workers then find them all in the kernel cache
        with Harness(copy.deepcopy(models), copy.deepcopy(spec.config)) as world:
            world.run(2 * world.sim.dt)
    except (ConfigError, ValueError) as e:
        raise SpecError(f"{spec.where}: world: {e}") from None
    from .metrics import load_callable
    paths = [(f"metrics.{n}.function", m["function"]) for n, m in spec.metrics.items() if m["function"]]
    paths += [("controller", spec.controller)] if spec.controller else []
    paths += [("parameters.controller", v) for a in spec.axes if a.name == "controller" for v in a.values]
    for key, path in paths:
        try:
            load_callable(path)
        except ImportError as e:
            raise SpecError(f"{spec.where}: {key}: {e}") from None
    spec.scenarios = scenarios(spec)
    return spec


def scenario_key(seed, params) -> str:
    """The scenario's identity for --resume and --compare: its seed and parameter values."""
    text = json.dumps({"seed": seed, "params": params}, sort_keys=True)
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def scenarios(spec: BatchSpec) -> list:
    """[{"scenario": "s0000", "key", "seed", "params": {name: value}}]: the samples crossed with the seeds."""
    axes = spec.axes
    if spec.sample == "grid":
        points = [dict(zip([a.name for a in axes], combo)) for combo in itertools.product(*(a.grid() for a in axes))]
    else:
        d = max(len(axes), 1)
        if spec.sample == "random":
            u = np.random.default_rng(spec.sample_seed).random((spec.n, d))
        else:
            from scipy.stats import qmc
            u = qmc.LatinHypercube(d=d, seed=spec.sample_seed).random(spec.n)
        points = [{a.name: a.at(u[i, k]) for k, a in enumerate(axes)} for i in range(spec.n)]
    out, seen = [], {}
    for params in points:
        for seed in spec.seeds:
            key = scenario_key(seed, params)
            if key in seen:
                raise SpecError(f"{spec.where}: parameters: scenarios {seen[key]} and s{len(out):05d} are the same "
                                f"(seed {seed}, {params}); a value appears twice")
            seen[key] = f"s{len(out):05d}"
            out.append(dict(scenario=f"s{len(out):05d}", key=key, seed=seed, params=params))
    return out
