"""The collision pass: geom poses in the world, the broad phase (bounding spheres and world
boxes), the narrow-phase routine of each pair's shapes and the contacts written to the
`Contacts` workspace. collide() is called from the step kernel; collide_kernel from Python."""
from __future__ import annotations

import math

from ..kernels import internal, kernel
from .layout import BOX, CAPSULE, CONE, CYLINDER, PLANE, SPHERE, carve_contacts, carve_geoms
from .vectors import dot, geom_record, put, row, sub
from .manifold import choose_manifold
from .primitives import box_box, box_sphere, capsule_capsule, capsule_sphere, plane_candidates, sphere_sphere
from .gjk_epa import convex_pair


# ----------------------------------------------------------------------- the pass ---
@internal
def _pair_candidates(sa, sb, verts, feat, poly, cand, S, V, F, FI, E, margin):
    """The contact candidates of geoms sa, sb (the kind of a >= the kind of b) in cand."""
    ka, kb = sa[0], sb[0]
    if kb == PLANE:
        return 0 if ka == PLANE else plane_candidates(sa, sb, verts, cand, margin)
    if ka == SPHERE:
        return sphere_sphere(sa[5], sa[1][0], sb[5], sb[1][0], cand, 0, margin)
    if ka == BOX and kb == SPHERE:
        return box_sphere(sa, sb, cand, margin)
    if ka == BOX and kb == BOX:
        return box_box(sa, sb, verts, feat, poly, cand, margin)
    if ka == CAPSULE and kb == SPHERE:
        return capsule_sphere(sa, sb, cand, margin)
    if ka == CAPSULE and kb == CAPSULE:
        return capsule_capsule(sa, sb, cand, margin)
    return convex_pair(sa, sb, verts, feat, poly, cand, S, V, F, FI, E, margin)


@internal
def _world_half_extents(s):
    """Half extents of the world box about the geom origin that holds geom s."""
    kind, h, ex, ey, ez = s[0], s[1], s[2], s[3], s[4]
    if kind == BOX:
        return (abs(ex[0]) * h[0] + abs(ey[0]) * h[1] + abs(ez[0]) * h[2],
                abs(ex[1]) * h[0] + abs(ey[1]) * h[1] + abs(ez[1]) * h[2],
                abs(ex[2]) * h[0] + abs(ey[2]) * h[1] + abs(ez[2]) * h[2])
    if kind == CAPSULE:
        return (abs(ez[0]) * h[1] + h[0], abs(ez[1]) * h[1] + h[0], abs(ez[2]) * h[1] + h[0])
    if kind == CYLINDER or kind == CONE:   # a circle of radius r spans r sin(angle to the axis)
        return (abs(ez[0]) * h[1] + h[0] * math.sqrt(max(0.0, 1.0 - ez[0] ** 2)),
                abs(ez[1]) * h[1] + h[0] * math.sqrt(max(0.0, 1.0 - ez[1] ** 2)),
                abs(ez[2]) * h[1] + h[0] * math.sqrt(max(0.0, 1.0 - ez[2] ** 2)))
    return (s[8], s[8], s[8])            # sphere, convex; plane: inf


@internal
def _bounds_apart(sa, sb, half_a, half_b, margin):
    """Broad phase: the bounding spheres (a plane: the other's sphere against the plane), then
    the world boxes, further apart than margin. a is not a plane (the larger kind)."""
    if sb[0] == PLANE:
        return dot(sub(sa[5], sb[5]), sb[4]) - sa[8] > margin
    d = sub(sa[5], sb[5])
    reach = sa[8] + sb[8] + margin
    return (dot(d, d) > reach * reach or abs(d[0]) > half_a[0] + half_b[0] + margin
            or abs(d[1]) > half_a[1] + half_b[1] + margin or abs(d[2]) > half_a[2] + half_b[2] + margin)


@internal
def collide(g, c, link_R, link_p, margin):
    """All contacts of the candidate pairs at the link poses (link_R, link_p), written to rows
    0..ncon-1 of c; returns ncon (the capacity if it ran out of rows: the rest are lost)."""
    cap = c.depth.shape[0]
    gR, gp, lR = c.geom_R, c.geom_p, g.R
    for gi in range(g.kind.shape[0]):   # geom poses in the world (indexing, no views: faster)
        k = g.link[gi]
        for a in range(3):
            gp[gi, a] = (link_p[k, a] + link_R[k, a, 0] * g.p[gi, 0] + link_R[k, a, 1] * g.p[gi, 1]
                         + link_R[k, a, 2] * g.p[gi, 2])
            for b in range(3):
                gR[gi, a, b] = (link_R[k, a, 0] * lR[gi, 0, b] + link_R[k, a, 1] * lR[gi, 1, b]
                                + link_R[k, a, 2] * lR[gi, 2, b])
        put(c.geom_half, gi, _world_half_extents(geom_record(g, c, gi)))
    n = 0
    kind, pairs, half, cand = g.kind, g.pairs, c.geom_half, c.cand
    for p in range(pairs.shape[0]):
        i, j = pairs[p, 0], pairs[p, 1]
        flip = kind[i] < kind[j]        # the routines take the larger kind as a
        a, b = (j, i) if flip else (i, j)
        sa, sb = geom_record(g, c, a), geom_record(g, c, b)
        if sa[0] == PLANE or _bounds_apart(sa, sb, row(half, a), row(half, b), margin):
            continue
        k = _pair_candidates(sa, sb, g.verts, c.feat, c.poly, cand, c.simplex, c.epa_vert,
                             c.epa_face, c.epa_index, c.epa_edge, margin)
        sign = -1.0 if flip else 1.0    # rows name i as a: normals from j into i
        for r in choose_manifold(cand, k):
            if r < 0:
                continue
            if n >= cap:
                return cap
            c.link[n, 0] = g.link[i]
            c.link[n, 1] = g.link[j]
            c.geom[n, 0] = i
            c.geom[n, 1] = j
            for m in range(3):
                c.point[n, m] = cand[r, m]
                c.normal[n, m] = sign * cand[r, 3 + m]
            c.depth[n] = cand[r, 6]
            c.mu[n] = min(g.friction[i], g.friction[j])
            c.restitution[n] = g.restitution[i] * g.restitution[j]
            n += 1
    return n


@kernel
def collide_kernel(gf, gi, cf, ci, link_R, link_p, margin):
    """collide() for Python callers: carves the buffers, returns the contact count."""
    g, _, _ = carve_geoms(gf, gi)
    c, _, _ = carve_contacts(cf, ci)
    return collide(g, c, link_R, link_p, margin)
