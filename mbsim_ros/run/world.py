"""The world a run simulates: the configured model files (or the bundled SR1 world), loaded,
with joints held at their initial pose when asked. Light: no ROS libraries."""
from __future__ import annotations

import os
import re
import warnings

from ..model import ConfigError
from .config import DEFAULT_REAL_TIME_FACTOR


DATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "models")
DEFAULT_WORLD = [os.path.join(DATA, "SR1_range.wrl"), os.path.join(DATA, "floor.wrl")]


class World(list):
    """The models of a run (a list), with what the configuration says about each: `names`
    (entity names, None = the model's) and `poses` (4x4 or None) in the same order."""

    def __init__(self, models, names=None, poses=None):
        super().__init__(models)
        self.names = list(names) if names is not None else [None] * len(models)
        self.poses = list(poses) if poses is not None else [None] * len(models)


_ARGS = re.compile(r"^(.*?)((?:\s+[^\s:=]+:=\S*)*)\s*$", re.S)


def model_specs(config):
    """[{file, name, pose, args}] of the models a configuration names, or of the bundled world.
    `model` is a comma-separated string, each entry a file followed by xacro arguments
    name:=value, or a list of such strings and of mappings {file, name, pose: [x, y, z, roll,
    pitch, yaw], args: {name: value}}. A file "topic:/robot_description" or
    "param:robot_description" is a robot description read from that topic or node parameter."""
    value = config.model or ""
    items = [p.strip() for p in value.split(",") if p.strip()] if isinstance(value, str) else list(value)
    specs = []
    for item in items:
        if isinstance(item, dict):
            spec = dict(file=str(item["file"]), name=item.get("name"), pose=item.get("pose"),
                        args={str(k): str(v) for k, v in (item.get("args") or {}).items()})
        else:
            head, tail = _ARGS.match(str(item)).groups()
            args = dict(word.split(":=", 1) for word in tail.split())
            spec = dict(file=head.strip(), name=None, pose=None, args=args)
        specs.append(spec)
    return specs or [dict(file=p, name=None, pose=None, args={}) for p in DEFAULT_WORLD]


def model_paths(config):
    """The model files a configuration names, or the bundled world."""
    return [s["file"] for s in model_specs(config)]


Y_UP_FORMATS = (".osim",)      # model files whose world is y up (z_up turns them)


def load_models(paths, floating_base=None, z_up=False, xacro_args=None, keyframe=None):
    """(models, notes): the model files loaded, first a note per URDF saying whether its root
    floats or is welded and why (base_notes), then their loaders' warnings (each once).
    z_up=True turns y-up models (OpenSim) so that their +y is the world's +z; a note when
    none of the files is one. xacro_args: one {name: value} (or None) per path, for .xacro files.
    keyframe: the <key> the MJCF files start from (a ModelError where an MJCF file has none of
    that name, or when no file is MJCF)."""
    from ..formats import is_mjcf_file, load_model
    turned = [os.fspath(p).lower().endswith(Y_UP_FORMATS) for p in paths] if z_up else [False] * len(paths)
    xacro_args = xacro_args or [None] * len(paths)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mjcf = [bool(keyframe) and is_mjcf_file(p) for p in paths]
        if keyframe and not any(mjcf):
            from ..model import ModelError
            raise ModelError(f"keyframe {keyframe!r}: none of the models is an MJCF file (keyframes are MJCF's <key>)")
        models = [load_model(p, floating_base=floating_base, **({"z_up": True} if t else {}),
                             **({"xacro_args": a} if a else {}), **({"keyframe": keyframe} if k else {}))
                  for p, t, a, k in zip(paths, turned, xacro_args, mjcf)]
    notes = base_notes(models) + list(dict.fromkeys(str(w.message) for w in caught))
    if z_up and not any(turned):
        notes.append(f"z_up: no y-up model ({', '.join(Y_UP_FORMATS)}) to turn; the models are z up already")
    return models, notes


def base_notes(models):
    """One line per URDF model: its root link floats or is welded to the world, and why (the
    loader's "base" report entry), with the option that changes it; none where floating_base
    forced it."""
    notes = []
    for m in models:
        for section, link, text in m.report:
            if section == "base" and "(as asked)" not in text:     # forced by the user: no news
                flag = "--fixed-base (floating_base: false) welds it" if text.startswith("floats") else \
                    "--floating-base (floating_base: true) frees it"
                notes.append(f"{m.name}: root link {link} {text}; {flag}")
    return notes


def load_world(config, description=None):
    """(models, notes): the configured models (a World: with their entity names and poses), with
    joints held by springs when hold > 0 (not those with actuators or motors: springs would
    fight them), a ground plane under a floating robot that has nothing else to stand on
    (config ground); config's dt, duration and contact filled in from the models' settings
    (apply_model_settings). description(source) -> URDF text reads "topic:..." and "param:..."
    models (the node gives it; elsewhere they are a ConfigError)."""
    from ..formats import load_description
    specs = model_specs(config)
    files = [s for s in specs if not s["file"].startswith(("topic:", "param:"))]
    paths, xacro_args = [s["file"] for s in files], [s["args"] for s in files]
    z_up = config.z_up
    keyframe = config.keyframe or None
    loaded, notes = (load_models(paths, config.floating_base, z_up, xacro_args, keyframe=keyframe)
                     if any(xacro_args) or keyframe else load_models(paths, config.floating_base, z_up))
    files_loaded = iter(loaded)
    models, names, poses = [], [], []
    for s in specs:
        if not s["file"].startswith(("topic:", "param:")):
            model = next(files_loaded, None)
            if model is None:
                continue
        elif description is None:
            raise ConfigError(f"model {s['file']!r}: a robot description from a topic or parameter is read by "
                              "the ROS node (ros2 run mbsim_ros sim_node), not here")
        else:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                model = load_description(description(s["file"]), s["file"], config.floating_base)
            notes += base_notes([model]) + [str(w.message) for w in caught]
        models.append(model)
        names.append(s["name"])
        poses.append(pose_matrix(s["pose"], f"pose of {s['file']}"))
    world = World(models, names, poses)
    if config.hold > 0:
        driven = [m for m in models if m.actuators or m.motors]
        hold_initial_pose([m for m in models if m not in driven], config.hold)
        notes += [f"{m.name}: joints not held (it has actuators or motors of its own)" for m in driven]
    if config.ground and needs_ground(models):
        world.append(ground_plane())
        world.names.append(None)
        world.poses.append(None)
        notes.append("added a ground plane at z = 0 under the floating robot (no other model to stand on; "
                     "--no-ground or ground: false for none)")
    return world, notes + apply_model_settings(config, models)


def pose_matrix(pose, where="pose"):
    """A 4x4 from [x, y, z, roll, pitch, yaw] (None stays None); ConfigError otherwise."""
    if pose is None:
        return None
    import numpy as np
    from ..model.transforms import make_transform, rpy_to_matrix
    try:
        x = np.asarray(pose, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        x = np.zeros(0)
    if x.shape != (6,) or not np.all(np.isfinite(x)):
        raise ConfigError(f"{where}: pose must be 6 numbers x y z roll pitch yaw (m, rad), got {pose!r}")
    return make_transform(rpy_to_matrix(x[3:]), x[:3])


def needs_ground(models):
    """A world whose first model floats (a free root joint) and where no model has a collision
    shape welded to the world: a robot that would fall forever."""
    def floats(m):
        return any(j.parent is None and j.type == "free" for j in m.joints)

    def has_ground(m):
        welded = set()
        for j in m.joints:        # depth-first: a parent before its children
            if j.type == "fixed" and (j.parent is None or j.parent in welded):
                welded.add(j.child)
        return any(m.link(name).collisions for name in welded)
    return bool(models) and floats(models[0]) and not any(has_ground(m) for m in models)


def ground_plane():
    """Gazebo's empty world: a plane at z = 0 (link `ground_plane`, model `ground`)."""
    from ..model import Joint, Link, Model, Shape
    m = Model("ground")
    plane = Shape("plane", color=[0.6, 0.6, 0.6, 1.0], name="ground_plane")
    m.add_link(Link("ground_plane", collisions=[plane], visuals=[plane]))
    m.add_joint(Joint("ground_plane_joint", "fixed", None, "ground_plane"))
    return m.finalize()


DEFAULT_DT = 0.001
MAX_STEPS = 1e15         # a duration longer than this many steps is refused (its step count overflows)


def apply_model_settings(config, models):
    """Fill config's dt, duration, contact and real_time_factor where the configuration leaves
    them open (None, "") from the first model that says (Model.settings time_step, end_time and
    real_time_factor, as Chrono YAML and SDFormat world files carry them; Model.contact_method);
    dt falls back to DEFAULT_DT, contact to lcp, real_time_factor to DEFAULT_REAL_TIME_FACTOR,
    duration stays None (the caller's default). A value the user gave wins. Returns notes saying
    which value is used wherever a model has one."""
    def setting(name):
        return lambda m: (getattr(m, "settings", None) or {}).get(name)
    notes = []
    for key, what, get in (("dt", "time_step", setting("time_step")), ("duration", "end_time", setting("end_time")),
                           ("contact", "contact method", lambda m: getattr(m, "contact_method", None)),
                           ("real_time_factor", "real_time_factor", setting("real_time_factor"))):
        said = (lambda v: v is not None) if key == "real_time_factor" else bool    # a world's rtf 0 is said
        found = next(((m.name, get(m)) for m in models if said(get(m))), None)
        if found is None:
            continue
        name, value = found
        unit = " s" if key in ("dt", "duration") else ""
        if getattr(config, key) in (None, ""):
            setattr(config, key, value if key == "contact" else float(value))
            notes.append(f"{key} {getattr(config, key)}{unit}: model {name}'s {what}")
        else:
            notes.append(f"{key} {getattr(config, key)}{unit} as given (model {name}'s {what} {value}{unit} not used)")
    if config.dt is None:
        config.dt = DEFAULT_DT
    if config.duration is not None and not config.duration / config.dt <= MAX_STEPS:
        raise ConfigError(f"duration {config.duration:g} s at dt = {config.dt:g} s is more than {MAX_STEPS:.0e} "
                          "steps (about 30000 years at 1 kHz): expected a shorter duration")
    if not config.contact:
        config.contact = "lcp"
    if config.real_time_factor is None:
        config.real_time_factor = DEFAULT_REAL_TIME_FACTOR
    return notes


def hold_initial_pose(models, stiffness):
    """Hold every one-coordinate joint at its initial angle with a stiff implicit spring and a
    damper (critically damped for a unit inertia): a stand-in for a controller, stable at any dt."""
    import numpy as np
    for model in models:
        model.held_joints = {}        # joint name -> its own damping (set_hold changes the springs later)
        for joint in model.joints:
            if joint.type not in ("fixed", "ball", "free"):
                model.held_joints[joint.name] = (np.zeros(joint.nv) if joint.damping is None
                                                 else np.array(joint.damping, dtype=float))
                joint.stiffness = np.full(joint.nv, stiffness)
                joint.damping = np.maximum(joint.damping, 2.0 * np.sqrt(stiffness))
                joint.rest_position = np.array(joint.q0, dtype=float)
        model.finalize()


def set_hold(sim, stiffness, check_only=False):
    """Change the springs hold_initial_pose put on sim's models (stiffness, and the critical
    damping with it; 0 lets the joints go) in the compiled arrays the step reads; call it between
    steps. ValueError for a stiffness < 0 or a world loaded without them (hold 0, or only models
    with actuators or motors). check_only: only those checks."""
    import math
    stiffness = float(stiffness)
    if not (math.isfinite(stiffness) and stiffness >= 0):
        raise ValueError(f"hold must be a stiffness >= 0 (0: off), got {stiffness}")
    if not any(getattr(m, "held_joints", None) for m in sim.models):
        raise ValueError("hold: this world was loaded without holding springs (hold 0 at the start, "
                         "or its models have actuators or motors of their own); restart with hold > 0")
    if check_only:
        return
    tree = sim.compiled.tree
    v_off = 0
    for model in sim.models:
        held = getattr(model, "held_joints", None) or {}
        for joint in model.joints:
            if joint.name in held:
                for k in range(joint.nv):
                    j = v_off + joint.v_index + k
                    tree.stiffness[j] = stiffness
                    tree.damping[j] = max(held[joint.name][k], 2.0 * math.sqrt(stiffness))
        v_off += model.nv


def build_simulation(models, config, log=None, warm_up_jobs=()):
    """The Simulation a configuration asks for (dt and contact as world.load_world filled them
    in; left open, 0.001 s and the models' contact method), the models at the entity names and
    poses a World carries, lowered onto the ground with on_ground (a fixed base by its weld); log(note) gets
    one line for each pair of links of different models that start more than 1 mm inside each
    other. warm_up_jobs: [(name, call)] compiled or loaded with the world's kernels (the ROS
    messages' kernels, when they are published), in the same compile report."""
    from .._kernel_cache import warm_up
    from ..dynamics.placement import overlap_notes, put_on_ground
    from ..model import ModelError
    from ..sensors import Simulation
    try:
        with warnings.catch_warnings(record=True) as caught:     # its notes go to log, once
            warnings.simplefilter("always")
            sim = Simulation(models, dt=config.dt or DEFAULT_DT, integrator=config.integrator,
                             contact=config.contact or None, seed=config.seed, sensors=config.sensors,
                             massless_armature=config.massless_armature, bound_massless=config.bound_massless,
                             names=getattr(models, "names", None), poses=getattr(models, "poses", None))
        for w in caught:
            if str(w.message) not in sim.notes:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    except (ConfigError, ModelError):
        raise
    except ValueError as e:        # options this world cannot take (rk4 with LCP contact, ...)
        raise ConfigError(f"configuration: {e}") from None
    sim.actuators_enabled = config.actuators_enabled
    if config.on_ground:
        for entity in sim.model_names:
            put_on_ground(sim, entity)
    for note in sim.notes + overlap_notes(sim):      # initial assembly, massless joints, overlaps
        (log or (lambda text: None))(note)
    if warm_up_jobs:
        warm_up(list(warm_up_jobs))      # in the compile report, not at the first message
    return sim

