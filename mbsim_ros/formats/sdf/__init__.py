"""SDFormat in (.sdf, .world; versions 1.4-1.11): file -> one Model.

    load_sdf(path, package_paths=None, text=None) -> Model

A world file gives one Model holding all its models (each model's links and joints; a static
model's links welded to the world), its gravity, and its physics' max_step_size and
real_time_factor as model.settings["time_step"] and ["real_time_factor"]: the run's defaults
where the user gives none (run/world.py apply_model_settings). A real_time_factor <= 0 is 0,
as fast as possible, as gz-sim runs it.
A model file gives that model. Names: a model's own links, joints, frames and sensors keep
their names; a nested or included model's are scoped as SDFormat scopes them ("arm::link");
in a world, a name an earlier model already holds is qualified with its model ("box::link").
Links no joint moves float (a free joint `root_joint`, later ones `<link>_root_joint`).

Poses follow the 1.7+ frame semantics (scopes.py); joints, axes, limits, dynamics and mimic
(bodies.py); geometry (geometry.py); sensors (sensors.py). Plugins, lights, GUI, scene,
actors and other elements that do not change the dynamics are reported in one note; unknown
elements in another; nothing of them is a failure. Bad input is a ModelError naming the file,
the line and the element.
"""
from __future__ import annotations

import os

import numpy as np

from ...model import Frame, Model
from .bodies import Body, coupler, free_joint, read_joint, read_link, weld
from .document import Reader, child, children, local, version_tuple
from .scopes import SEP, build_model, build_world
from .sensors import read_joint_sensor, read_sensor

DEFAULT_GRAVITY = (0.0, 0.0, -9.8)    # SDFormat's <gravity> default


def load_sdf(path, floating_base: bool = False, package_paths=None, text=None) -> Model:
    """Read an SDFormat file into a finalized Model (see the package docstring). floating_base
    is not used: SDFormat says itself which links float."""
    reader = Reader(path, package_paths)
    root = reader.parse(reader.path, text)
    version = version_tuple(root.get("version"))
    folder = os.path.dirname(reader.path)
    worlds, models = children(root, "world"), children(root, "model")
    for el in root:
        if local(el) in ("light", "actor"):
            reader.ignore(el)
        elif local(el) not in ("world", "model") and isinstance(el.tag, str):
            reader.unknown_element(el, "<sdf>")
    if worlds:
        if len(worlds) > 1:
            reader.note(worlds[1], f"{len(worlds)} worlds in the file; the first, {worlds[0].get('name')!r}, is loaded")
        world = build_world(reader, worlds[0], version, folder)
        tops = list(world.models.values())
        model = Model(worlds[0].get("name") or "world", gravity=_gravity(reader, worlds[0]))
        _physics(reader, worlds[0], model)
    elif models:
        if len(models) > 1:
            raise reader.error(models[1], "a second <model> at the top of the file; expected one (or a <world>)")
        tops = [build_model(reader, models[0], version, folder)]
        model = Model(tops[0].name, gravity=DEFAULT_GRAVITY)
        model.gravity_stated = False      # a model file says nothing of its world's gravity
        world = None
    else:
        raise reader.error(root, "no <world> or <model>; expected one of them")
    model.source = reader.name
    _assemble(reader, model, tops, world)
    reader.flush_notes(model)
    return model.finalize()


def _gravity(reader, world_el):
    g = child(world_el, "gravity")
    if g is None:
        physics = child(world_el, "physics")
        g = child(physics, "gravity") if physics is not None else None      # SDFormat 1.4
    return DEFAULT_GRAVITY if g is None else reader.vector(g, 3)


def _physics(reader, world_el, model):
    """max_step_size and real_time_factor of the default <physics> (else the first) as settings."""
    blocks = children(world_el, "physics")
    if not blocks:
        return
    chosen = next((b for b in blocks if (b.get("default") or "").strip().lower() in ("true", "1")), blocks[0])
    step = reader.number(chosen, "max_step_size", 0.001, positive=True)
    rtf = reader.number(chosen, "real_time_factor", 1.0)
    if rtf < 0:          # gz-sim paces no step (period 0) below 1e-9: as fast as possible, our 0
        reader.note(child(chosen, "real_time_factor"), f"real_time_factor {rtf:g}: 0, as fast as possible")
        rtf = 0.0
    model.settings = {"time_step": step, "real_time_factor": rtf}
    engine = (chosen.get("type") or "ode").strip()
    model.report.append(("physics", chosen.get("name") or "default",
                         f"{engine}: max_step_size {step:g} s, real_time_factor {rtf:g} (the run's defaults)"))
    for el in chosen:
        if local(el) not in ("max_step_size", "real_time_factor", "real_time_update_rate", "gravity",
                             "max_contacts", "ode", "bullet", "dart", "simbody", "magnetic_field"):
            if isinstance(el.tag, str):
                reader.unknown_element(el, "<physics>")


class _Names:
    """World names: a model's own names first; a name an earlier model holds gets its model's."""

    def __init__(self):
        self.taken = {}

    def name(self, kind, top, scoped):
        taken = self.taken.setdefault(kind, set())
        name = scoped if scoped not in taken else top.name + SEP + scoped
        k = 2
        while name in taken:
            name, k = f"{top.name}{SEP}{scoped}_{k}", k + 1
        taken.add(name)
        return name


def _assemble(reader, model, tops, world):
    names = _Names()
    bodies, by_key = [], {}
    scopes = []           # (top, scope, X_W_scope)
    for top in tops:
        for scope in top.walk():
            X_S = scope.world_pose()
            scopes.append((top, scope, X_S))
            for local_name, el in scope.links.items():
                b = Body(scope, el, local_name, names.name("link", top, scope.prefix + local_name),
                         X_S @ scope.pose_of(local_name, el))
                bodies.append(b)
                by_key[(id(scope), local_name)] = b
    link_name = lambda scope, name: by_key[(id(scope), name)].name
    for b in bodies:
        model.add_link(read_link(reader, b))
        top = _top_of(b.scope)
        for el in children(b.el, "sensor"):
            name_of = lambda n, scope=b.scope, top=top: names.name("sensor", top, scope.prefix + n)
            model.sensors += read_sensor(reader, b.scope, el, b.name, b.scope.element_pose(el, b.local), name_of)
    moved, joints, mimics = set(), {}, []
    for top, scope, X_S in scopes:
        for local_name, el in scope.joints.items():
            jname = names.name("joint", top, scope.prefix + local_name)
            if scope.static:
                continue
            joint, couplers = read_joint(reader, scope, el, jname, by_key, X_S, link_name)
            if joint is None:
                continue
            if joint.child in moved:
                raise reader.error(el, f"link {joint.child!r} is already the child of another joint: a closed "
                                       "kinematic loop, which this loader does not support")
            moved.add(joint.child)
            model.add_joint(joint)
            for sensor_el in children(el, "sensor"):
                name_of = lambda n, scope=scope, top=top: names.name("sensor", top, scope.prefix + n)
                model.sensors += read_joint_sensor(reader, sensor_el, joint, name_of)
            joints[(id(scope), local_name)] = joint
            mimics += [(scope, joint, k, m) for k, m in couplers]
        for local_name, el in scope.frames.items():
            attached = scope.link_of(local_name, el)
            if attached is None:
                continue
            b = by_key[(id(attached[0]), attached[1])]
            X = X_S @ scope.pose_of(local_name, el)
            model.frames.append(Frame(names.name("frame", top, scope.prefix + local_name), b.name,
                                      np.linalg.inv(b.X) @ X))
    if any(s.static and s.joints for _, s, _ in scopes):
        for _, s, _ in scopes:
            if s.static and s.joints:
                reader.note(s.el, f"static model {s.name!r}: its {len(s.joints)} joint(s) are not simulated "
                                  "(every link is welded to the world)")
    root_names = iter(["root_joint"])
    taken = {j.name for j in model.joints}
    for b in bodies:
        if b.name in moved:
            continue
        if b.scope.static:
            model.add_joint(weld(names.name("joint", _top_of(b.scope), b.name + "_weld"), b))
        else:
            jn = next(root_names, None)
            if jn is None or jn in taken:
                jn = b.name + "_root_joint"
            taken.add(jn)
            model.add_joint(free_joint(jn, b))
    by_scope_name = {}
    for (sid, local_name), j in joints.items():
        by_scope_name.setdefault(sid, {})[local_name] = (j, None)
    for scope, joint, k, mimic in mimics:
        table = {n: v for n, v in by_scope_name.get(id(scope), {}).items()}
        model.couplers.append(coupler(reader, joint, k, mimic, table))
        model.report.append(("joint", joint.name, f"mimics {mimic['leader']}: q = {mimic['multiplier']:g} q_leader "
                                                  f"+ {mimic['offset']:g}"))


def _top_of(scope):
    while scope.parent is not None and scope.parent.kind != "world":
        scope = scope.parent
    return scope
