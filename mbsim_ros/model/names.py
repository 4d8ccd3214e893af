"""Names in a world of several models (entities): the one place that says what a link, joint,
sensor or actuator is called once models share a world.

Every thing has a qualified name "<entity>/<name>" (entity: the model's name in the world,
unique). Its world name, the one every output uses (joint_states, TF frame ids, sensor topics,
Simulation.link_transforms(), readings(), contacts()), is the bare name unless an entity that
joined the world earlier already holds that name for a thing of the same kind; then it is the
qualified name. So the first model keeps its bare names, and a second robot or OpenHRP's floor
(whose root link is WAIST too) gets "floor/WAIST". World names are given when an entity joins and
kept until it leaves, so spawning or deleting a model never renames another's topics or frames.

Input (WorldNames.resolve): a qualified name always; a bare name when exactly one entity has a
thing of that kind by that name; a bare name several entities have is an error listing the
qualified candidates. Kinds: "link" (links, the TF frames), "joint" (joint and DOF names, as in
joint_states), "sensor", "actuator".
"""
from __future__ import annotations

KINDS = ("link", "joint", "sensor", "actuator")
SEP = "/"


def model_names(model) -> dict:
    """{kind: [bare names]} of one model."""
    joints = [j.name for j in model.joints]
    return {"link": [l.name for l in model.links],
            "joint": joints + [n for n in model.dof_names if n not in set(joints)],
            "sensor": [s.name for s in model.sensors],
            "actuator": [getattr(a, "name", "") for a in model.actuators]}


class WorldNames:
    """The world names of every entity's things, in the order the entities joined."""

    def __init__(self, entities=()):
        self._world = {}        # entity -> {kind: {bare: world name}}
        for name, model in entities:
            self.add(name, model)

    @property
    def entities(self) -> list:
        return list(self._world)

    def add(self, entity: str, model):
        """Give the model's things their world names (ValueError for a taken or bad entity name)."""
        check_entity_name(entity)
        if entity in self._world:
            raise ValueError(f"an entity named {entity!r} is already in the world "
                             f"({', '.join(self._world)}); give the new one another name")
        taken = {k: {w for names in self._world.values() for w in names[k].values()} for k in KINDS}
        mine = {}
        for kind, bare in model_names(model).items():
            mine[kind] = {n: (n if n not in taken[kind] else entity + SEP + n) for n in bare}
        self._world[entity] = mine

    def copy(self) -> "WorldNames":
        out = WorldNames()
        out._world = {e: {k: dict(t) for k, t in names.items()} for e, names in self._world.items()}
        return out

    def remove(self, entity: str):
        self.check_entity(entity)
        del self._world[entity]

    def check_entity(self, entity: str):
        if entity not in self._world:
            raise KeyError(f"no entity named {entity!r} in the world; the entities are "
                           f"{', '.join(self._world) or 'none'}")

    def world(self, entity: str, kind: str, bare: str) -> str:
        """The world name of `bare` (a thing of `kind` of `entity`)."""
        return self._world[entity][kind][bare]

    def table(self, entity: str, kind: str) -> dict:
        """{bare: world name} of one entity's things of one kind."""
        return self._world[entity][kind]

    def qualified(self, entity: str, bare: str) -> str:
        return entity + SEP + bare

    def resolve(self, kind: str, text: str):
        """(entity, bare name) of a qualified name, or of a bare name exactly one entity has.
        KeyError naming the candidates (ambiguous) or what exists (unknown)."""
        text = str(text)
        if SEP in text:
            entity, bare = text.split(SEP, 1)
            if entity in self._world and bare in self._world[entity][kind]:
                return entity, bare
        owners = [e for e, names in self._world.items() if text in names[kind]]
        if len(owners) == 1:
            return owners[0], text
        if len(owners) > 1:
            raise KeyError(f"{kind} name {text!r} is in {len(owners)} models; say which: "
                           + ", ".join(e + SEP + text for e in owners))
        known = [self.qualified(e, n) for e, names in self._world.items() for n in names[kind]]
        shown = ", ".join(known[:20]) + (f", ... ({len(known)} in all)" if len(known) > 20 else "")
        raise KeyError(f"no {kind} named {text!r} in the world; the {kind}s are {shown or 'none'}")


def check_entity_name(name: str):
    """An entity name is a non-empty name without '/' (it prefixes qualified names)."""
    if not isinstance(name, str) or not name or SEP in name or name != name.strip():
        raise ValueError(f"entity name {name!r}: expected a non-empty name without '/' or surrounding spaces")


def unique_entity_names(names) -> list:
    """Entity names for models loaded together: their names, with _2, _3, ... on repeats and
    '/' replaced by '_' (a model file's name is not ours to refuse)."""
    out = []
    for n in names:
        base = str(n).replace(SEP, "_").strip() or "model"
        name, k = base, 2
        while name in out:
            name, k = f"{base}_{k}", k + 1
        out.append(name)
    return out


def renamed(model, names: WorldNames, entity: str):
    """The model itself when all its world names are its own; else a copy whose links, joints,
    DOFs, frames and sensors carry their world names (what its robot_description publishes, so
    that it matches TF and joint_states)."""
    import copy
    link, joint = names.table(entity, "link"), names.table(entity, "joint")
    sensor = names.table(entity, "sensor")
    if all(k == v for table in (link, joint, sensor) for k, v in table.items()):
        return model
    out = copy.deepcopy(model)
    for l in out.links:
        l.name = link[l.name]
    for j in out.joints:
        j.name, j.child = joint[j.name], link[j.child]
        j.parent = None if j.parent is None else link[j.parent]
        if j.dof_names is not None:
            j.dof_names = [joint.get(n, n) for n in j.dof_names]
    for f in out.frames:              # a frame on a renamed link is qualified with it
        if link[f.link] != f.link:
            f.name = entity + SEP + f.name
        f.link = link[f.link]
    for s in out.sensors:
        s.name, s.link = sensor[s.name], link[s.link]
    out.collision_excludes = [(link[a], link[b]) for a, b in out.collision_excludes]
    for c in out.constraints:
        c.link1 = None if c.link1 is None else link[c.link1]
        c.link2 = None if c.link2 is None else link[c.link2]
    out.finalize()
    return out
