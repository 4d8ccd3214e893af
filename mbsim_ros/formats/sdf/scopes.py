"""The frame graph of an SDFormat world or model: models (nested and included) as scopes, and
the pose of every frame they name.

SDFormat 1.7+ semantics (sdformat.org "pose frame semantics"), applied to every version:
- a model's frame is placed by its <pose> relative to its parent scope's frame (the world, or
  the parent model), or to `relative_to`; with `placement_frame` the pose places that frame;
- a link's pose is relative to the model frame, a joint's to its child link, a <frame>'s to
  its `attached_to` (default the model frame), a collision's, visual's, sensor's and
  inertial's to their link, unless `relative_to` names another frame of the scope;
- names may be scoped ("arm::link"); "__model__" is the model frame; "world" the world.
Before 1.7, `<pose frame="...">` is read as relative_to (as sdformat's 1.6 -> 1.7 converter
does). An included model (<include>) is a nested scope read from its own file, with the
include's name, pose, static and placement_frame overriding the file's.
"""
from __future__ import annotations

import os

import numpy as np

from ...model.transforms import inverse_transform
from .document import child, children, local, version_tuple

WORLD = "world"
MODEL_FRAME = "__model__"
SEP = "::"

# what a <model> may hold that this loader reads or reports
MODEL_CHILDREN = {"link", "joint", "frame", "model", "include", "pose", "static", "self_collide",
                  "allow_auto_disable", "enable_wind", "plugin", "gripper"}
IGNORED_IN_MODEL = {"plugin", "gripper", "allow_auto_disable", "enable_wind"}


class Scope:
    """A model (or the world): its elements by name, nested scopes, and pose bookkeeping."""

    def __init__(self, reader, el, name, parent=None, version=(1, 11), folder="", pose_el=None,
                 static=None, placement=None, kind="model"):
        self.reader, self.el, self.name, self.parent = reader, el, name, parent
        self.kind, self.version, self.folder = kind, version, folder
        self.pose_el = pose_el if pose_el is not None else (child(el, "pose") if kind == "model" else None)
        self.placement = placement if placement is not None else (el.get("placement_frame") or "").strip()
        own_static = reader.boolean(el, "static", False) if kind == "model" else False
        self.static = bool(static if static is not None else own_static) or bool(parent is not None and parent.static)
        self.links, self.joints, self.frames, self.models = {}, {}, {}, {}
        self._poses, self._busy = {}, set()
        self.prefix = "" if parent is None or parent.kind == "world" else parent.prefix + name + SEP

    def add(self, table, el, what):
        name = el.get("name")
        if name is None or not name.strip():
            raise self.reader.error(el, f"missing attribute name=\"...\" ({what})")
        name = name.strip()
        if SEP in name or name in (WORLD, MODEL_FRAME) or name.startswith("__"):
            raise self.reader.error(el, f"name {name!r}: a {what} name may not contain '::', be 'world' or "
                                        "start with '__' (reserved by SDFormat)")
        for t in (self.links, self.joints, self.frames, self.models):
            if name in t:
                raise self.reader.error(el, f"name {name!r} is already used in this "
                                            f"{'world' if self.kind == 'world' else 'model'}; expected unique "
                                            "names among its links, joints, frames and models")
        table[name] = el
        return name

    @property
    def canonical(self):
        """(scope, link name) of the model's canonical link (attribute, else the first link,
        else the first nested model's), or None for a model without links."""
        name = (self.el.get("canonical_link") or "").strip() if self.kind == "model" else ""
        if name:
            return self.link_of(name, self.el)
        if self.links:
            return self, next(iter(self.links))
        for m in self.models.values():
            c = m.canonical
            if c is not None:
                return c
        return None

    def split(self, name, el):
        """(scope, local name) of a possibly scoped name."""
        scope = self
        while SEP in name:
            head, name = name.split(SEP, 1)
            if head not in scope.models:
                raise self.reader.error(el, f"frame {head + SEP + name!r}: no model {head!r} in "
                                            f"{'the world' if scope.kind == 'world' else 'model ' + repr(scope.name)}")
            scope = scope.models[head]
        return scope, name

    def link_of(self, name, el):
        """(scope, link) a frame is attached to; None for the world."""
        seen = set()
        scope, name = self.split(name, el)
        while True:
            if (id(scope), name) in seen:
                raise self.reader.error(el, f"frame {name!r}: its attached_to chain is a cycle")
            seen.add((id(scope), name))
            if name == WORLD:
                return None
            if name in scope.links:
                return scope, name
            if name in scope.joints:
                c = scope.reader.text(scope.joints[name], "child")
                if c is None:
                    raise scope.reader.error(scope.joints[name], "missing <child>")
                scope, name = scope.split(c, scope.joints[name])
                continue
            if name in scope.frames:
                f = scope.frames[name]
                default = WORLD if scope.kind == "world" else MODEL_FRAME
                a = (f.get("attached_to") or "").strip() or default
                scope, name = scope.split(a, f)
                continue
            if name in scope.models:
                scope, name = scope.models[name], MODEL_FRAME
                continue
            if name == MODEL_FRAME and scope.kind == "model":
                c = scope.canonical
                if c is None:
                    raise scope.reader.error(scope.el, "a model without links: nothing to attach its frame to")
                return c
            raise self.reader.error(el, f"frame {name!r} does not exist in "
                                        f"{'the world' if scope.kind == 'world' else 'model ' + repr(scope.name)}")

    # -- poses -----------------------------------------------------------------------------
    def pose_of(self, name, el):
        """4x4 pose of frame `name` (possibly scoped) in this scope's frame."""
        if SEP in name:
            head, rest = name.split(SEP, 1)
            if head not in self.models:
                raise self.reader.error(el, f"frame {name!r}: no model {head!r} in "
                                            f"{'the world' if self.kind == 'world' else 'model ' + repr(self.name)}")
            return self.pose_of(head, el) @ self.models[head].pose_of(rest, el)
        if name == MODEL_FRAME and self.kind == "model" or name == WORLD and self.kind == "world":
            return np.eye(4)
        if name == WORLD:       # the world seen from inside a model
            return inverse_transform(self.world_pose())
        if name in self._poses:
            return self._poses[name]
        if name in self._busy:
            raise self.reader.error(el, f"pose of frame {name!r}: its relative_to chain is a cycle")
        self._busy.add(name)
        try:
            X = self._compute(name, el)
        finally:
            self._busy.discard(name)
        self._poses[name] = X
        return X

    def _frame_default(self):
        return WORLD if self.kind == "world" else MODEL_FRAME

    def _relative(self, pose_el, default, el):
        rel = self.reader.relative_to(pose_el) or default
        if version_tuple_lt(self.version, (1, 7)) and rel not in (default,) and not self._known(rel):
            rel = default       # 1.5/1.6 `frame` attributes naming nothing were ignored by Gazebo
        return self.pose_of(rel, el) @ self.reader.pose(pose_el)

    def _known(self, name):
        try:
            scope, local_name = self.split(name, self.el)
        except Exception:
            return False
        return local_name in (WORLD, MODEL_FRAME) or any(local_name in t for t in
                                                         (scope.links, scope.joints, scope.frames, scope.models))

    def _compute(self, name, el):
        r = self.reader
        if name in self.links:
            link = self.links[name]
            return self._relative(child(link, "pose"), self._frame_default(), link)
        if name in self.joints:
            joint = self.joints[name]
            c = r.text(joint, "child")
            if c is None:
                raise r.error(joint, "missing <child> (a link name)")
            if c == WORLD:
                raise r.error(joint, "<child>world</child>: the world cannot be a joint's child")
            return self._relative(child(joint, "pose"), c, joint)
        if name in self.frames:
            f = self.frames[name]
            attached = (f.get("attached_to") or "").strip() or self._frame_default()
            return self._relative(child(f, "pose"), attached, f)
        if name in self.models:
            m = self.models[name]
            X = self._relative(m.pose_el, self._frame_default(), m.el)
            if m.placement:
                X = X @ inverse_transform(m.pose_of(m.placement, m.el))
            return X
        raise r.error(el, f"frame {name!r} does not exist in "
                          f"{'the world' if self.kind == 'world' else 'model ' + repr(self.name)}")

    def world_pose(self):
        """This scope's frame in the world."""
        if self.parent is None:
            if self.kind == "world":
                return np.eye(4)
            X = self.reader.pose(self.pose_el)      # a model file alone: its pose in the world
            if self.placement:
                X = X @ inverse_transform(self.pose_of(self.placement, self.el))
            return X
        return self.parent.world_pose() @ self.parent.pose_of(self.name, self.el)

    def element_pose(self, el, link_name):
        """Pose of a link's collision, visual, sensor or inertial in the link frame."""
        pose_el = child(el, "pose")
        rel = self.reader.relative_to(pose_el)
        X = self.reader.pose(pose_el)
        if not rel or rel == link_name or version_tuple_lt(self.version, (1, 7)) and not self._known(rel):
            return X
        return inverse_transform(self.pose_of(link_name, el)) @ self.pose_of(rel, el) @ X

    def walk(self):
        """This scope and every nested one, parents first."""
        yield self
        for m in self.models.values():
            yield from m.walk()


def version_tuple_lt(a, b):
    return tuple(a) < tuple(b)


# =========================================================================================
# building the scope tree (includes expanded)
# =========================================================================================
def build_world(reader, world_el, version, folder):
    world = Scope(reader, world_el, world_el.get("name") or "default", None, version, folder, kind="world")
    for el in world_el:
        tag = local(el)
        if tag == "model":
            _nested(world, el, version, folder)
        elif tag == "include":
            _include(world, el, folder)
        elif tag == "frame":
            world.add(world.frames, el, "frame")
        elif tag in ("gravity", "physics", "magnetic_field", "atmosphere", "wind", "spherical_coordinates",
                     "audio", "scene", "gui", "light", "plugin", "actor", "population", "road", "state",
                     "joint"):
            if tag in ("scene", "gui", "light", "plugin", "actor", "population", "road", "state", "audio",
                       "wind", "atmosphere", "magnetic_field", "spherical_coordinates", "joint"):
                reader.ignore(el)
        else:
            reader.unknown_element(el, "<world>")
    return world


def build_model(reader, model_el, version, folder, parent=None, name=None, pose_el=None, static=None,
                placement=None):
    name = (name or model_el.get("name") or "").strip()
    if not name:
        raise reader.error(model_el, "missing attribute name=\"...\"")
    scope = Scope(reader, model_el, name, parent, version, folder, pose_el, static, placement)
    for el in model_el:
        tag = local(el)
        if tag == "link":
            scope.add(scope.links, el, "link")
        elif tag == "joint":
            scope.add(scope.joints, el, "joint")
        elif tag == "frame":
            scope.add(scope.frames, el, "frame")
        elif tag == "model":
            _nested(scope, el, version, folder)
        elif tag == "include":
            _include(scope, el, folder)
        elif tag in IGNORED_IN_MODEL:
            reader.ignore(el)
        elif tag not in MODEL_CHILDREN:
            reader.unknown_element(el, "<model>")
    if not scope.links and not scope.models:
        raise reader.error(model_el, "a model without links; expected at least one <link>")
    return scope


def _nested(parent, el, version, folder, **overrides):
    name = parent.add(parent.models, el, "model") if not overrides.get("name") else overrides["name"]
    scope = build_model(parent.reader, el, version, folder, parent, name, **{k: v for k, v in overrides.items()
                                                                           if k != "name"})
    parent.models[name] = scope
    return scope


def _include(parent, inc, folder):
    """An <include>: the model of the file its <uri> names, as a nested scope."""
    r = parent.reader
    uri = r.text(inc, "uri")
    if uri is None:
        raise r.error(inc, "missing <uri> (model://name, a path or package://...)")
    path, looked = r.resolve(uri, folder)
    if path is None:
        raise r.error(inc, f"model {uri!r} not found (looked in: {'; '.join(looked)}); set GZ_SIM_RESOURCE_PATH "
                           "to the folder holding it")
    if os.path.isdir(path):
        path = r.model_file(path, inc)
    if path.lower().endswith(".urdf"):
        raise r.error(inc, f"{path}: including a URDF model is not supported; convert it to SDFormat or load the "
                           "URDF as a model of its own")
    if len(r.trees) > 200 or any(p == os.path.abspath(path) for p in _include_chain(parent)):
        raise r.error(inc, f"{path}: includes itself (an include cycle)")
    root = r.parse(path)
    models = children(root, "model")
    if len(models) != 1:
        raise r.error(inc, f"{path}: expected one <model> to include, found {len(models)}")
    model_el = models[0]
    version = version_tuple(root.get("version"))
    name = r.text(inc, "name") or model_el.get("name")
    name_holder = _NameHolder(inc, name)
    parent.add(parent.models, name_holder, "included model")
    del parent.models[name.strip()]
    pose_el = child(inc, "pose")
    static = r.boolean(inc, "static") if child(inc, "static") is not None else None
    placement = r.text(inc, "placement_frame") or None
    if inc.get("merge", "").strip().lower() in ("true", "1"):
        r.note(inc, "merge=\"true\": the model is kept as a nested model named after it (its entities are "
                    "scoped with its name)")
    for el in inc:
        if local(el) == "plugin":
            r.ignore(el)
    scope = build_model(r, model_el, version, os.path.dirname(path), parent, name.strip(),
                        pose_el if pose_el is not None else child(model_el, "pose"), static, placement)
    scope.include_path = os.path.abspath(path)
    parent.models[name.strip()] = scope
    return scope


def _include_chain(scope):
    while scope is not None:
        p = getattr(scope, "include_path", None)
        if p:
            yield p
        scope = scope.parent


class _NameHolder:
    """Lets an include's name go through Scope.add's checks with the include element for messages."""

    def __init__(self, el, name):
        self.el, self.name = el, name

    def get(self, key, default=None):
        return self.name if key == "name" else self.el.get(key, default)

    @property
    def sourceline(self):
        return self.el.sourceline

    @property
    def tag(self):
        return self.el.tag

    def getroottree(self):
        return self.el.getroottree()
