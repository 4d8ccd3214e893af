"""Compiling geoms (Python side): every collision Shape of the models becomes a geom in flat
buffers, the candidate pairs pass the static filters once; `GeomSet` holds them and makes
contact workspaces; contacts_list reads contacts back as dicts."""
from __future__ import annotations

import numpy as np

from ...model import Model
from .layout import (BOX, CAPSULE, CONE, CYLINDER, KIND_OF_SHAPE, MAX_MANIFOLD, MAX_POLY, PLANE, RIM_SAMPLES, SPHERE,
                     carve_contacts, carve_geoms, contacts_sizes, geom_sizes)


# --------------------------------------------------------------------- Python side ---
class GeomSet:
    """The compiled geoms (buffers gf, gi, the kernels' bundle of them `buffers`, their views
    `geoms`), their names for messages and the contact capacity a workspace holds."""

    def __init__(self, gf, gi, names, link_names, ncand):
        self.gf, self.gi = gf, gi
        self.buffers = (gf, gi)       # the step kernels' `geoms` argument
        self.geoms, used_f, used_i = carve_geoms.py_func(gf, gi)
        assert (used_f, used_i) == (len(gf), len(gi)), "geom_sizes disagrees with carve_geoms"
        self.names = names            # "link/shape index" per geom
        self.link_names = link_names  # compiled link index -> name
        self.capacity = int(gi[3])
        self.ncand = ncand

    @property
    def pairs(self):
        return self.geoms.pairs

    def new_workspace(self):
        """A zeroed Contacts workspace: (cf, ci, contacts views)."""
        ng = len(self.names)
        nf, ni = contacts_sizes(self.capacity, ng, self.ncand)
        cf = np.zeros(nf)
        ci = np.zeros(ni, dtype=np.int64)
        ci[:3] = self.capacity, ng, self.ncand
        contacts, used_f, used_i = carve_contacts.py_func(cf, ci)
        assert (used_f, used_i) == (nf, ni), "contacts_sizes disagrees with carve_contacts"
        return cf, ci, contacts


def _shape_geom(shape):
    """(kind, size, rbound, hull vertices or None) of a collision Shape; None to skip it."""
    kind = KIND_OF_SHAPE[shape.kind]
    r, half = float(shape.radius), 0.5 * float(shape.length)
    verts = None
    if kind == PLANE:
        size, rbound = np.zeros(3), np.inf
    elif kind == SPHERE:
        size, rbound = np.array([r, 0.0, 0.0]), r
    elif kind == BOX:
        size = 0.5 * np.asarray(shape.size, float)
        rbound = float(np.linalg.norm(size))
    elif kind == CAPSULE:
        size, rbound = np.array([r, half, 0.0]), half + r
    elif kind in (CYLINDER, CONE):
        size, rbound = np.array([r, half, 0.0]), float(np.hypot(r, half))
    else:
        if shape.vertices is None or len(shape.vertices) == 0:
            return None
        verts = _hull_vertices(np.asarray(shape.vertices, float))
        size = np.zeros(3)
        rbound = float(np.linalg.norm(verts, axis=1).max())
    return kind, size, rbound, verts


def _hull_vertices(v):
    """The vertices of the convex hull (all distinct vertices when the mesh is flat)."""
    from scipy.spatial import ConvexHull, QhullError
    v = np.unique(v, axis=0)
    if len(v) < 4:
        return v
    try:
        return v[ConvexHull(v).vertices]
    except QhullError:
        return v


def _rigid_groups(models, compiled):
    """Per compiled link: an id shared by the links moving as one rigid body (the body index;
    for links welded to the world, -1 - the index of the welded chain's root link), and the id
    of the group of the parent link of that body's joint (None when it hangs from the world):
    a link welded onto link2 has link2's parent for parent too; and the group of the
    world-welded links the link's chain hangs from (its fixed base; None for a floating tree)."""
    body = compiled.tree.link_body
    group, parent_group, base = {}, {}, {}
    for mi, model in enumerate(models):
        for joint in model.joints:      # depth-first: a parent is seen before its child
            k = compiled.link_index(mi, joint.child)
            parent = None if joint.parent is None else compiled.link_index(mi, joint.parent)
            if joint.type == "fixed" and parent is not None:
                group[k], parent_group[k] = group[parent], parent_group[parent]  # welded on
            else:
                group[k] = int(body[k]) if body[k] >= 0 else -1 - k
                parent_group[k] = None if parent is None else group[parent]
            base[k] = group[k] if body[k] < 0 else (None if parent is None else base[parent])
    return group, parent_group, base


def _pair_allowed(ka, kb, ma, mb, links, group, parent_group, base, body, models):
    """The static filters for geoms on compiled links ka, kb of models ma, mb. Without
    self-collision a model's moving links meet neither each other nor the fixed base they hang
    from (Gazebo's self_collide off); a link welded to the world on its own (a table in the
    robot's file) still meets them."""
    if body[ka] < 0 and body[kb] < 0:
        return False                      # both welded to the world
    if group[ka] == group[kb]:
        return False                      # one rigid body (fixed joints)
    for child, parent, m in ((ka, kb, ma), (kb, ka, mb)):
        if parent_group[child] == group[parent] and not (group[parent] < 0 and models[m].parent_at_world_collides):
            return False                  # a link and its parent touch at their joint
    if ma == mb and not models[ma].self_collision:
        if body[ka] >= 0 and body[kb] >= 0:
            return False                  # two moving links of one model
        if base[ka] is not None and base[ka] == base[kb]:
            return False                  # a moving link and the fixed base it hangs from
    la, lb = links[ka], links[kb]
    return bool((la.collision_mask >> lb.collision_family) & 1 and (lb.collision_mask >> la.collision_family) & 1)


def _shapes_allowed(a, b):
    """MuJoCo's bit test: one shape's contype shares a bit with the other's conaffinity."""
    return bool(a.contype & b.conaffinity or b.contype & a.conaffinity)


def _excluded_and_explicit(models, compiled):
    """({frozenset of two compiled links} never in contact, {frozenset of two Shape ids} always
    tested): every model's collision_excludes and collision_pairs."""
    excluded, explicit = set(), set()
    for mi, model in enumerate(models):
        for a, b in model.collision_excludes:
            excluded.add(frozenset((compiled.link_index(mi, a), compiled.link_index(mi, b))))
        for a, b in model.collision_pairs:
            explicit.add(frozenset((id(a), id(b))))
    return excluded, explicit


def compile_geoms(models, compiled, capacity=None) -> GeomSet:
    """One geom per collision Shape of every link of `models` (as compiled into `compiled`), and
    the candidate pairs that pass the static filters. capacity: contact rows of a workspace
    (default: MAX_MANIFOLD per pair, at most 16 per geom)."""
    if isinstance(models, Model):
        models = [models]
    models = list(models)
    body = compiled.tree.link_body
    group, parent_group, base = _rigid_groups(models, compiled)
    geoms, links, model_of = [], {}, {}
    for mi, model in enumerate(models):
        for link in model.links:
            k = compiled.link_index(mi, link.name)
            links[k] = link
            model_of[k] = mi
            for si, shape in enumerate(link.collisions):
                made = _shape_geom(shape)
                if made is not None:
                    geoms.append((k, shape, f"{compiled.link_names[k]}/{si}") + made)
    verts = [gm[6] for gm in geoms if gm[6] is not None]
    nverts = sum(len(v) for v in verts)
    ng = len(geoms)
    excluded, explicit = _excluded_and_explicit(models, compiled)
    pairs = []
    for i in range(ng):
        for j in range(i + 1, ng):
            ki, kj = geoms[i][0], geoms[j][0]
            si, sj = geoms[i][1], geoms[j][1]
            if geoms[i][3] == PLANE and geoms[j][3] == PLANE:
                continue
            if explicit and frozenset((id(si), id(sj))) in explicit:
                pairs.append((i, j))
            elif (_shapes_allowed(si, sj) and frozenset((ki, kj)) not in excluded
                  and _pair_allowed(ki, kj, model_of[ki], model_of[kj], links, group, parent_group, base, body, models)):
                pairs.append((i, j))
    npair = len(pairs)
    if capacity is None:
        capacity = min(MAX_MANIFOLD * npair, 16 * ng)
    gf = np.zeros(geom_sizes(ng, nverts, npair)[0])
    gi = np.zeros(geom_sizes(ng, nverts, npair)[1], dtype=np.int64)
    gi[:4] = ng, nverts, npair, capacity
    g, _, _ = carve_geoms.py_func(gf, gi)
    start = 0
    for m, (k, shape, name, kind, size, rbound, hull) in enumerate(geoms):
        g.kind[m], g.link[m] = kind, k
        g.R[m], g.p[m] = shape.pose[:3, :3], shape.pose[:3, 3]
        g.size[m], g.rbound[m] = size, rbound
        g.friction[m], g.restitution[m] = shape.friction, shape.restitution
        if hull is not None:
            g.vert_start[m], g.vert_count[m] = start, len(hull)
            g.verts[start:start + len(hull)] = hull
            start += len(hull)
    if npair:
        g.pairs[:] = pairs
    ncand = max(MAX_POLY + 1, 2 * RIM_SAMPLES + 3, max((len(v) for v in verts), default=0))
    return GeomSet(gf, gi, [gm[2] for gm in geoms], list(compiled.link_names), ncand)


def contacts_list(geomset, contacts, ncon):
    """The first ncon contacts as dicts (link and geom names, point, normal, depth, mu,
    restitution), for tests and debugging."""
    out = []
    for r in range(ncon):
        ga, gb = contacts.geom[r]
        out.append(dict(link_a=geomset.link_names[contacts.link[r, 0]],
                        link_b=geomset.link_names[contacts.link[r, 1]],
                        geom_a=geomset.names[ga], geom_b=geomset.names[gb],
                        point=contacts.point[r].copy(), normal=contacts.normal[r].copy(),
                        depth=float(contacts.depth[r]), mu=float(contacts.mu[r]),
                        restitution=float(contacts.restitution[r])))
    return out
