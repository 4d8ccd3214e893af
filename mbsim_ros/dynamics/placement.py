"""Where models start: overlaps between models at the current state, the lowest collision point
of a model, and lowering a model onto what is below it (`--on-ground`)."""
from __future__ import annotations

import numpy as np

from . import kernels
from .collision.collide import collide_kernel
from .collision.geoms import contacts_list
from .collision.layout import BOX, CAPSULE, CONE, CYLINDER, PLANE, SPHERE


def overlaps(sim, min_depth: float = 1e-3):
    """[(link a, link b, deepest penetration in m, contacts)] of the link pairs of different
    models that interpenetrate by more than min_depth at the current state, deepest first."""
    c, g = sim.compiled, sim.geoms
    df, d = c.new_data()
    kernels.kinematics_kernel(c.tf, c.ti, df, sim.q, sim.v)
    model_of = np.zeros(len(c.link_names), dtype=np.int64)
    for k, (first, _, _) in enumerate(c.offsets):
        model_of[first:] = k
    if not _may_overlap(g, d.link_R, d.link_p, model_of, min_depth):
        return []       # most worlds: the collision kernel is not even compiled for this check
    cf, ci, contacts = g.new_workspace()
    n = collide_kernel(g.gf, g.gi, cf, ci, d.link_R, d.link_p, 0.0)
    index = {name: k for k, name in enumerate(c.link_names)}
    pairs = {}
    for con in contacts_list(g, contacts, n):
        a, b = con["link_a"], con["link_b"]
        if model_of[index[a]] == model_of[index[b]] or con["depth"] <= min_depth:
            continue
        key = (a, b)
        depth, count = pairs.get(key, (0.0, 0))
        pairs[key] = (max(depth, con["depth"]), count + 1)
    return sorted(((a, b, depth, count) for (a, b), (depth, count) in pairs.items()), key=lambda x: -x[2])


def _may_overlap(geomset, link_R, link_p, model_of, min_depth):
    """False when no candidate pair of geoms of different models can interpenetrate by more than
    min_depth. Two convex shapes penetrate no deeper than their projections on any axis overlap
    (moving one by that much along the axis parts them): a plane's normal, the line through the
    shapes' origins (by their bounding spheres), then each shape's own axes. Half of min_depth is
    the allowance for the narrow phase reporting more than the true depth (box-box keeps a face
    axis up to 5 % deeper than an edge axis)."""
    g = geomset.geoms
    links = g.link
    R = link_R[links] @ g.R                                   # every geom's world pose at once
    p = (link_R[links] @ g.p[:, :, None])[:, :, 0] + link_p[links]
    for i, j in g.pairs:
        if model_of[links[i]] == model_of[links[j]]:
            continue
        d = p[j] - p[i]
        if g.kind[i] == PLANE:                                # a half-space: only its normal parts it
            depth = _reach(g, j, R[j], -R[i][:, 2]) - R[i][:, 2].dot(d)
        elif g.kind[j] == PLANE:
            depth = _reach(g, i, R[i], -R[j][:, 2]) + R[j][:, 2].dot(d)
        else:
            depth = g.rbound[i] + g.rbound[j] - np.linalg.norm(d)
            if depth > 0.5 * min_depth:
                for u in (*R[i].T, *R[j].T):
                    along = u.dot(d)
                    depth = min(depth, _reach(g, i, R[i], u) + _reach(g, j, R[j], -u) - along,
                                _reach(g, i, R[i], -u) + _reach(g, j, R[j], u) + along)
        if depth > 0.5 * min_depth:
            return True
    return False


def _reach(g, m, R, u):
    """How far geom m (world rotation R) extends from its origin along the unit vector u."""
    kind, size = g.kind[m], g.size[m]
    a = R.T @ u                           # u in the geom's frame
    if kind == SPHERE:
        return size[0]
    if kind == BOX:
        return float(np.abs(a) @ size)
    if kind == CAPSULE:
        return size[1] * abs(a[2]) + size[0]
    if kind in (CYLINDER, CONE):          # a cone lies inside its cylinder
        return size[1] * abs(a[2]) + size[0] * np.sqrt(max(0.0, 1.0 - a[2] * a[2]))
    start, count = g.vert_start[m], g.vert_count[m]
    return float((g.verts[start:start + count] @ a).max())


def overlap_notes(sim, entities=None, min_depth: float = 1e-3):
    """One line per pair of models that start inside each other by more than min_depth (only
    pairs involving `entities`, default all), naming the links, deepest first."""
    c = sim.compiled
    entity_of = {}
    for k, (first, _, _) in enumerate(c.offsets):
        for name in c.link_names[first:first + len(sim.models[k].links)]:
            entity_of[name] = sim.entities[k]
    groups = {}
    for a, b, depth, count in overlaps(sim, min_depth):
        ea, eb = entity_of[a], entity_of[b]
        if entities is not None and ea not in entities and eb not in entities:
            continue
        groups.setdefault((ea, eb), []).append(f"{a} and {b} {depth * 1e3:.1f} mm")
    return [f"{ea} and {eb} start inside each other: links {'; '.join(pairs)}; they will be pushed apart "
            "violently (place the model with a pose, or --on-ground)"
            for (ea, eb), pairs in groups.items()]


def _support(shape, T, direction):
    """The point of a collision shape (at world pose T) farthest along `direction`; None for a
    plane or a mesh without vertices."""
    R, p = T[:3, :3], T[:3, 3]
    d = np.asarray(direction, float)
    kind = shape.kind
    if kind == "box":
        half = 0.5 * np.asarray(shape.size, float)
        return p + R @ (np.sign(R.T @ d) * half)
    if kind == "sphere":
        return p + shape.radius * d
    a = R[:, 2]
    half = 0.5 * shape.length
    perp = d - a.dot(d) * a
    n = np.linalg.norm(perp)
    perp = perp / n if n > 1e-12 else np.zeros(3)
    if kind == "capsule":
        return p + np.sign(a.dot(d)) * half * a + shape.radius * d
    if kind == "cylinder":
        return p + np.sign(a.dot(d)) * half * a + shape.radius * perp
    if kind == "cone":         # apex at +length/2
        apex, rim = p + half * a, p - half * a + shape.radius * perp
        return apex if apex.dot(d) >= rim.dot(d) else rim
    if kind == "mesh" and shape.vertices is not None and len(shape.vertices):
        V = np.asarray(shape.vertices, float) @ R.T + p
        return V[np.argmax(V @ d)]
    return None


def lowest_point(sim, entity):
    """The lowest point of entity's collision shapes at the current state (None: it has none)."""
    low = None
    for link in sim.model(entity).links:
        T = sim.link_pose(f"{entity}/{link.name}")
        for shape in link.collisions:
            x = _support(shape, T @ shape.pose, (0.0, 0.0, -1.0))
            if x is not None and (low is None or x[2] < low[2]):
                low = x
    return low


def ground_height(sim, entity, xy):
    """The height of the highest collision surface of the other models' links welded to the
    world at horizontal position xy (planes at that point, other shapes whose horizontal extent
    covers it); None when there is nothing below."""
    c = sim.compiled
    top = None
    for k, (other, model) in enumerate(zip(sim.entities, sim.models)):
        if other == entity:
            continue
        first = c.offsets[k][0]
        for i, link in enumerate(model.links):
            if c.tree.link_body[first + i] >= 0 or not link.collisions:
                continue          # moving links are not ground
            T = sim.link_pose(f"{other}/{link.name}")
            for shape in link.collisions:
                Ts = T @ shape.pose
                if shape.kind == "plane":
                    n, p = Ts[:3, 2], Ts[:3, 3]
                    if n[2] < 1e-6:
                        continue
                    z = p[2] - (n[0] * (xy[0] - p[0]) + n[1] * (xy[1] - p[1])) / n[2]
                else:
                    hi = _support(shape, Ts, (0.0, 0.0, 1.0))
                    ext = [_support(shape, Ts, e) for e in ((1, 0, 0), (-1, 0, 0), (0, 1, 0), (0, -1, 0))]
                    if hi is None or any(e is None for e in ext):
                        continue
                    if not (ext[1][0] <= xy[0] <= ext[0][0] and ext[3][1] <= xy[1] <= ext[2][1]):
                        continue
                    z = hi[2]
                if top is None or z > top:
                    top = z
    return top


def put_on_ground(sim, entity):
    """Lower (or raise) a model so that its lowest collision point touches what is below it
    (height 0 when nothing is): a floating model by its root pose, a model welded to the world
    by its placement (the weld moves, with a note in sim.notes). Returns the height change, or
    None when it is not moved: a model with no moving link (the ground itself, a table) or
    without collision shapes, or one anchored to the world frame (a note says why)."""
    model = sim.model(entity)
    roots = [j for j in model.joints if j.parent is None]
    if all(j.type == "fixed" for j in model.joints):
        return None                       # no moving link: part of the scenery
    low = lowest_point(sim, entity)
    if low is None:
        sim.notes.append(f"on_ground: {entity} not moved: it has no collision shape to stand on")
        return None
    ground = ground_height(sim, entity, low[:2])
    dz = (0.0 if ground is None else ground) - low[2]
    if len(roots) == 1 and roots[0].type == "free":
        root = sim.root_link(entity)
        T = sim.link_pose(root if "/" in root else f"{entity}/{root}")
        T[2, 3] += dz
        sim.set_root_pose(entity, T)
        return dz
    T = sim.model_pose(entity)
    T[2, 3] += dz
    try:
        sim.set_model_pose(entity, T)
    except ValueError as e:               # loops or forces written in world coordinates
        sim.notes.append(f"on_ground: {entity} not moved: {e}")
        return None
    if abs(dz) > 1e-9:
        sim.notes.append(f"on_ground: {entity} is fixed to the world ({', '.join(j.type for j in roots)} root "
                         f"joint): its whole model moved {dz:+.3f} m in z, so its lowest point touches "
                         f"{'the model below' if ground is not None else 'z = 0'}")
    return dz
