"""MJCF (MuJoCo's XML) in: `load_mjcf(path)` -> a finalized Model.

A file is MJCF by its <mujoco> root, whatever its extension. MuJoCo's defaults hold where the
file says nothing: gravity (0, 0, -9.81), timestep 0.002 (Model.settings["time_step"], the run's
default step), angles in degrees, autolimits on, inertia from geoms where a body has no
<inertial>. Generalized coordinates are MuJoCo's (qpos) in MuJoCo's order, except that
quaternions are (x, y, z, w) and a free joint's linear velocity is in the body frame
(architecture.md); hinge and slide q equal MuJoCo's qpos including `ref`.

Parts: parse.py (XML, <include>, <compiler>, <default> classes, numbers and orientations),
geoms.py (geoms, meshes, shapes), masses.py (geom and body mass properties, for all at once),
joints.py (joints as columns), bodies.py (the body tree: links, sites, cameras), elements.py
(keyframes, actuators, sensors, equality, tendons, contact exclusion). What is read but not simulated is a note in model.warnings naming the file, line and element.
"""
from __future__ import annotations

import gc
import os

import numpy as np

from ...model import Model, ModelError
from .bodies import read_worldbody
from .geoms import read_meshes
from .parse import Reader, parse_file, read_compiler, read_defaults

DEFAULT_GRAVITY = (0.0, 0.0, -9.81)
DEFAULT_TIMESTEP = 0.002
_TOP = ("compiler", "option", "size", "visual", "statistic", "default", "custom", "asset",
        "worldbody", "contact", "deformable", "equality", "tendon", "actuator", "sensor",
        "keyframe", "extension")


def is_mjcf(head: bytes) -> bool:
    """Whether the first bytes of a file open a <mujoco> document."""
    text = head.decode("utf-8", "replace")
    i = 0
    while True:
        i = text.find("<", i)
        if i < 0:
            return False
        if text.startswith("<!--", i):
            end = text.find("-->", i + 4)
            if end < 0:
                return False
            i = end + 3
            continue
        if text.startswith("<?", i) or text.startswith("<!", i):
            i += 2
            continue
        return text.startswith("<mujoco", i) and (len(text) == i + 7 or not (text[i + 7].isalnum() or text[i + 7] in "_-:."))


def load_mjcf(path, floating_base: bool = False, keyframe=None, text=None) -> Model:
    """Read an MJCF file (see the module docstring). keyframe: the name (or index) of a <key>
    whose qpos and qvel become the initial state. floating_base is ignored (MJCF says itself
    which bodies are free)."""
    r = Reader(path)
    # the load makes thousands of small objects and no reference cycles: the cyclic collector,
    # which would scan them several times over, waits until it is done
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _load(r, text, keyframe)
    except ModelError as exc:       # the Model's own checks name the element, not the file
        if str(exc).startswith(r.path):
            raise
        raise ModelError(f"{r.path}: {exc}") from None
    finally:
        if collecting:
            gc.enable()


def _load(r, text, keyframe):
    skipped = []
    root = parse_file(r.path, text, skipped)
    for node, message in skipped:
        r.note(node, message)
    for node in root.children:
        if node.tag not in _TOP:
            r.note(node, f"unknown element <{node.tag}> in <mujoco>: ignored")
    read_compiler(r, root)
    read_defaults(r, root)
    model = Model(root.get("model") or os.path.splitext(os.path.basename(r.path))[0],
                  gravity=_gravity(r, root))
    model.gravity_stated = any("gravity" in node.attrib or any("gravity" in flag.attrib for flag in node.each("flag"))
                               for node in root.each("option"))
    model.source = r.path
    # MuJoCo's collision filters: bodies of one model meet, except a body and its parent
    # (unless the parent is welded to the world), geoms passing the contype/conaffinity test
    model.self_collision = True
    model.parent_at_world_collides = True
    model.settings = {"time_step": _timestep(r, root)}
    meshes = read_meshes(r, root)
    tree = read_worldbody(r, root, model, meshes)
    from .elements import read_elements
    read_elements(r, root, model, tree, keyframe)
    _settotalmass(r, model)
    model.warnings.extend(r.notes)
    return model.finalize()


def _gravity(r, root):
    g = np.array(DEFAULT_GRAVITY)
    for node in root.each("option"):
        g = r.floats(node, node.attrib, "gravity", 3, g)
        for flag in node.each("flag"):
            for key, value in flag.attrib.items():
                if value not in ("enable", "disable"):
                    raise r.error(flag, f"{key}=\"{value}\": expected enable or disable")
                if key == "gravity" and value == "disable":
                    g = np.zeros(3)
                elif value == "disable" and key in ("contact", "constraint", "limit", "equality",
                                                   "frictionloss", "passive", "spring", "damper"):
                    r.note(flag, f"{key}=\"disable\" is not applied: the simulation keeps its {key} forces")
                elif key == "sleep" and value == "enable":
                    r.note(flag, "sleep=\"enable\" is not applied: no body sleeps, every pair of bodies keeps colliding")
                elif key == "filterparent" and value == "disable":
                    r.note(flag, "filterparent=\"disable\" is not applied: a body and its parent never collide")
    return g


def _timestep(r, root):
    dt = DEFAULT_TIMESTEP
    for node in root.each("option"):
        dt = r.number(node, node.attrib, "timestep", dt)
        if not dt > 0:
            raise r.error(node, f"timestep=\"{node.get('timestep')}\": expected a positive number")
    return dt


def _settotalmass(r, model):
    total = r.compiler.settotalmass
    if total <= 0:
        return
    have = model.total_mass
    if have <= 0:
        raise ModelError(f"{r.path}: settotalmass={total:g} on a model without mass")
    s = total / have
    for link in model.links:
        link.mass *= s
        link.inertia = link.inertia * s
