"""Support points and contact features (the face, edge or vertex facing the other shape) and
feature clipping: the multi-point manifold of two touching shapes."""
from __future__ import annotations

import math

import numpy as np

from ..kernels import inline, internal
from .layout import (BOX, CAPSULE, CONE, CONVEX, CYLINDER, FEATURE_COS, FEATURE_SIN, FEAT_A, FEAT_B, MAX_FEATURE,
                     MAX_POLY, POLY_IN, POLY_OUT, RIM_SAMPLES, SPHERE)
from .vectors import add, axpy, cross, dir_local, dot, mul, norm, perpendicular, put, row, sub, to_world
from .manifold import add_candidate


# ----------------------------------------------------------------- support points ---
@internal
def support(s, verts, d):
    """The world point of geom s's core furthest along the world direction d (any length).
    The core of a sphere is its centre, of a capsule its segment (GJK and EPA add the radius
    afterwards: exact, and polytope-fast); any other shape is its own core."""
    kind, h = s[0], s[1]
    dl = dir_local(s, d)
    if kind == BOX:
        x = (h[0] if dl[0] >= 0 else -h[0], h[1] if dl[1] >= 0 else -h[1],
             h[2] if dl[2] >= 0 else -h[2])
    elif kind == SPHERE or kind == CAPSULE:
        x = (0.0, 0.0, 0.0 if kind == SPHERE else (h[1] if dl[2] >= 0 else -h[1]))
    elif kind == CYLINDER or kind == CONE:
        rxy = math.sqrt(dl[0] * dl[0] + dl[1] * dl[1])
        scale = h[0] / rxy if rxy > 0.0 else 0.0
        if kind == CYLINDER:
            x = (scale * dl[0], scale * dl[1], h[1] if dl[2] >= 0 else -h[1])
        else:   # the apex (0, 0, h) or a base rim point at z = -h
            x = (scale * dl[0], scale * dl[1], -h[1])
            if h[1] * dl[2] > dot(x, dl):
                x = (0.0, 0.0, h[1])
    else:   # CONVEX: the best hull vertex (hill climbing would need the hull's adjacency)
        best, best_dot = s[6], -np.inf
        for i in range(s[6], s[6] + s[7]):
            along = verts[i, 0] * dl[0] + verts[i, 1] * dl[1] + verts[i, 2] * dl[2]
            if along > best_dot:
                best, best_dot = i, along
        x = row(verts, best)
    return to_world(s, x)


@internal
def core_radius(s):
    """The radius GJK adds to a sphere's centre or a capsule's segment."""
    return s[1][0] if (s[0] == SPHERE or s[0] == CAPSULE) else 0.0


# --------------------------------------------------------------- contact features ---
@inline
def _ring(s, radius, z, out, first):
    """RIM_SAMPLES points in order around the circle (radius, height z) of the geom's xy plane."""
    for i in range(RIM_SAMPLES):
        angle = 2.0 * math.pi * i / RIM_SAMPLES
        put(out, first + i, to_world(s, (radius * math.cos(angle), radius * math.sin(angle), z)))
    return RIM_SAMPLES


@inline
def _box_feature(s, dl, out, first):
    """The face, edge or corner of a box facing the local direction dl: an axis nearly
    perpendicular to dl is free (both signs), the others take dl's sign."""
    h = s[1]
    free0 = abs(dl[0]) <= FEATURE_SIN
    free1 = abs(dl[1]) <= FEATURE_SIN
    free2 = abs(dl[2]) <= FEATURE_SIN
    nfree = int(free0) + int(free1) + int(free2)
    corner = (h[0] if dl[0] >= 0 else -h[0], h[1] if dl[1] >= 0 else -h[1],
              h[2] if dl[2] >= 0 else -h[2])
    if nfree == 0:
        put(out, first, to_world(s, corner))
        return 1
    if nfree == 1:
        k = 0 if free0 else (1 if free1 else 2)
        for i in range(2):
            sign = 2.0 * i - 1.0
            x = (sign * h[0] if k == 0 else corner[0], sign * h[1] if k == 1 else corner[1],
                 sign * h[2] if k == 2 else corner[2])
            put(out, first + i, to_world(s, x))
        return 2
    # a face: the fixed axis keeps its sign, the two free ones go around the rectangle
    k = 0 if not free0 else (1 if not free1 else 2)
    u = (k + 1) % 3
    for i in range(4):
        su = 1.0 if (i == 0 or i == 3) else -1.0
        sv = 1.0 if (i == 0 or i == 1) else -1.0
        x = (corner[0] if k == 0 else (su if u == 0 else sv) * h[0],
             corner[1] if k == 1 else (su if u == 1 else sv) * h[1],
             corner[2] if k == 2 else (su if u == 2 else sv) * h[2])
        put(out, first + i, to_world(s, x))
    return 4


@internal
def _order_polygon(P, first, n, d):
    """Order the points P[first:first + n] counterclockwise about d and drop those that are not
    corners of their convex hull seen along d (interior, collinear or repeated points)."""
    if n < 3:
        return n
    # points on one line (seen along d): keep its two ends
    far1 = first
    for i in range(first, first + n):
        if norm(sub(row(P, i), row(P, first))) > norm(sub(row(P, far1), row(P, first))):
            far1 = i
    far2 = first
    for i in range(first, first + n):
        if norm(sub(row(P, i), row(P, far1))) > norm(sub(row(P, far2), row(P, far1))):
            far2 = i
    line = sub(row(P, far2), row(P, far1))
    off_line = 0.0
    for i in range(first, first + n):
        off_line = max(off_line, abs(dot(cross(line, sub(row(P, i), row(P, far1))), d)))
    if off_line <= 1e-9 * dot(line, line):
        a, b = row(P, far1), row(P, far2)
        put(P, first, a)
        put(P, first + 1, b)
        return 2
    u = perpendicular(d)
    v = cross(d, u)
    centre = (0.0, 0.0, 0.0)
    for i in range(first, first + n):
        centre = axpy(centre, 1.0 / n, row(P, i))
    for i in range(first + 1, first + n):   # insertion sort by the angle about the centroid
        j = i
        while j > first:
            a = sub(row(P, j - 1), centre)
            b = sub(row(P, j), centre)
            if math.atan2(dot(a, v), dot(a, u)) <= math.atan2(dot(b, v), dot(b, u)):
                break
            for m in range(3):
                P[j - 1, m], P[j, m] = P[j, m], P[j - 1, m]
            j -= 1
    removed = True
    while removed and n >= 3:  # drop points where the boundary does not turn left
        removed = False
        for i in range(n):
            ab = sub(row(P, first + i), row(P, first + (i + n - 1) % n))
            be = sub(row(P, first + (i + 1) % n), row(P, first + i))
            if dot(cross(ab, be), d) <= 1e-12 * norm(ab) * norm(be):
                for j in range(first + i, first + n - 1):
                    for m in range(3):
                        P[j, m] = P[j + 1, m]
                n -= 1
                removed = True
                break
    return n


@inline
def _convex_feature(s, verts, dl, d, out, first):
    """The hull vertices whose edge from the supporting vertex dips below the supporting plane
    by less than FEATURE_SIN (the face or edge facing d), ordered as a polygon."""
    top = s[6]
    for i in range(s[6], s[6] + s[7]):
        if dot(row(verts, i), dl) > dot(row(verts, top), dl):
            top = i
    apex = row(verts, top)
    k = 0
    for i in range(s[6], s[6] + s[7]):
        e = sub(row(verts, i), apex)
        drop = dot(e, dl)
        if drop < -FEATURE_SIN * norm(e):
            continue
        if k < MAX_FEATURE:
            slot = k
            k += 1
        else:                  # full: replace the lowest kept vertex if this one is higher
            slot, lowest = 0, np.inf
            for j in range(k):
                dj = dot(sub(row(out, first + j), apex), dl)
                if dj < lowest:
                    slot, lowest = j, dj
            if drop <= lowest:
                continue
        put(out, first + slot, row(verts, i))
    for i in range(first, first + k):
        put(out, i, to_world(s, row(out, i)))
    return _order_polygon(out, first, k, d)


@internal
def _feature(s, verts, d, out, first):
    """The surface points of geom s facing the unit world direction d, as a convex polygon
    ordered about d, in out from row `first`: 1 point (a corner or a smooth spot), 2 (an edge,
    a line of a curved side), more (a face, or a cap's rim sampled). Returns the count."""
    kind, h = s[0], s[1]
    dl = dir_local(s, d)
    if kind == BOX:
        return _box_feature(s, dl, out, first)
    if kind == CONVEX:
        return _convex_feature(s, verts, dl, d, out, first)
    if kind == SPHERE:
        put(out, first, axpy(s[5], h[0], d))
        return 1
    r, hl = h[0], h[1]
    if kind == CAPSULE:        # points of the end spheres: the segment's ends pushed out along d
        if abs(dl[2]) <= FEATURE_SIN:
            put(out, first, axpy(to_world(s, (0.0, 0.0, -hl)), r, d))
            put(out, first + 1, axpy(to_world(s, (0.0, 0.0, hl)), r, d))
            return 2
        put(out, first, axpy(to_world(s, (0.0, 0.0, hl if dl[2] > 0 else -hl)), r, d))
        return 1
    rxy = math.sqrt(dl[0] * dl[0] + dl[1] * dl[1])
    ux, uy = (dl[0] / rxy, dl[1] / rxy) if rxy > 1e-12 else (1.0, 0.0)
    if kind == CYLINDER:
        if abs(dl[2]) >= FEATURE_COS:
            return _ring(s, r, hl if dl[2] > 0 else -hl, out, first)
        if abs(dl[2]) <= FEATURE_SIN:
            put(out, first, to_world(s, (r * ux, r * uy, -hl)))
            put(out, first + 1, to_world(s, (r * ux, r * uy, hl)))
            return 2
        put(out, first, to_world(s, (r * ux, r * uy, hl if dl[2] > 0 else -hl)))
        return 1
    # CONE: apex (0, 0, hl), base circle of radius r at z = -hl
    if dl[2] <= -FEATURE_COS:
        return _ring(s, r, -hl, out, first)
    rim = (r * ux, r * uy, -hl)
    side_cos = (2.0 * hl * rxy + r * dl[2]) / math.sqrt(4.0 * hl * hl + r * r)
    if side_cos >= FEATURE_COS:  # d is nearly the outward normal of the side line
        put(out, first, to_world(s, rim))
        put(out, first + 1, to_world(s, (0.0, 0.0, hl)))
        return 2
    put(out, first, to_world(s, (0.0, 0.0, hl) if hl * dl[2] > dot(rim, dl) else rim))
    return 1


# ---------------------------------------------------------------- feature clipping ---
@internal
def _clip_to_halfspace(poly, src, n, dst, q, side):
    """The part of the point, segment or convex polygon poly[src:src + n] where
    (x - q).side <= 0, written from row dst; returns its count."""
    m = 0
    if n == 1:
        if dot(sub(row(poly, src), q), side) <= 0.0:
            put(poly, dst, row(poly, src))
            m = 1
        return m
    edges = 1 if n == 2 else n      # a segment has one edge, a polygon closes
    for i in range(n):
        x = row(poly, src + i)
        dx = dot(sub(x, q), side)
        if dx <= 0.0 and m < MAX_POLY:
            put(poly, dst + m, x)
            m += 1
        if i < edges:
            y = row(poly, src + (i + 1) % n)
            dy = dot(sub(y, q), side)
            if (dx <= 0.0) != (dy <= 0.0) and m < MAX_POLY:
                put(poly, dst + m, axpy(x, dx / (dx - dy), sub(y, x)))
                m += 1
    return m


@internal
def _clip_features(feat, na, nb, poly, cand, normal, margin):
    """Candidates (returns their count) where a's feature feat[FEAT_A:][:na], facing -normal,
    and b's feat[FEAT_B:][:nb], facing +normal, overlap seen along the normal.

    The feature with more points (a polygon) is the reference: the other is clipped to its
    prism along the normal, and each clipped point's depth is its distance along the normal
    to the reference's plane. Two segments meet in one point, or in two when parallel. A lone
    point gives nothing: the caller's witness point is then the contact."""
    k = 0
    if na >= 3 or nb >= 3:
        ref_is_a = na > nb
        ref, nref = (FEAT_A, na) if ref_is_a else (FEAT_B, nb)
        inc, m = (FEAT_B, nb) if ref_is_a else (FEAT_A, na)
        for i in range(m):
            put(poly, POLY_IN + i, row(feat, inc + i))
        centre = (0.0, 0.0, 0.0)
        plane_n = (0.0, 0.0, 0.0)      # Newell's normal of the reference polygon
        for i in range(nref):
            centre = axpy(centre, 1.0 / nref, row(feat, ref + i))
            plane_n = add(plane_n, cross(row(feat, ref + i), row(feat, ref + (i + 1) % nref)))
        ln = norm(plane_n)
        plane_n = mul(plane_n, 1.0 / ln) if ln > 1e-300 else normal
        if dot(plane_n, normal) < 0.0:
            plane_n = mul(plane_n, -1.0)
        cos_n = dot(plane_n, normal)
        if cos_n < FEATURE_SIN:
            return 0
        src, dst = POLY_IN, POLY_OUT
        for i in range(nref):
            r0 = row(feat, ref + i)
            side = cross(sub(row(feat, ref + (i + 1) % nref), r0), normal)
            if dot(side, sub(centre, r0)) > 0.0:
                side = mul(side, -1.0)
            m = _clip_to_halfspace(poly, src, m, dst, r0, side)
            src, dst = dst, src
            if m == 0:
                return 0
        for i in range(m):
            x = row(poly, src + i)
            t = dot(sub(centre, x), plane_n) / cos_n   # x + t normal is on the reference plane
            k = add_candidate(cand, k, axpy(x, 0.5 * t, normal), normal, -t if ref_is_a else t, margin)
        return k
    if na == 2 and nb == 2:
        a0, b0 = row(feat, FEAT_A), row(feat, FEAT_B)
        ea = sub(row(feat, FEAT_A + 1), a0)
        eb = sub(row(feat, FEAT_B + 1), b0)
        ea_p = axpy(ea, -dot(ea, normal), normal)      # the edges seen along the normal
        eb_p = axpy(eb, -dot(eb, normal), normal)
        la, lb = norm(ea_p), norm(eb_p)
        if la < 1e-12 or lb < 1e-12:
            return 0
        cr = dot(cross(ea_p, eb_p), normal)
        if abs(cr) > FEATURE_SIN * la * lb:   # crossing edges: the one point over the other
            w = sub(b0, a0)
            w_p = axpy(w, -dot(w, normal), normal)
            ta = dot(cross(w_p, eb_p), normal) / cr
            tb = dot(cross(w_p, ea_p), normal) / cr
            if 0.0 <= ta <= 1.0 and 0.0 <= tb <= 1.0:
                xa = axpy(a0, ta, ea)
                xb = axpy(b0, tb, eb)
                k = add_candidate(cand, k, mul(add(xa, xb), 0.5), normal, dot(sub(xb, xa), normal), margin)
            return k
        # parallel edges: the stretch of a's edge alongside b's
        e = mul(eb_p, 1.0 / lb)
        put(poly, POLY_IN, a0)
        put(poly, POLY_IN + 1, row(feat, FEAT_A + 1))
        m = _clip_to_halfspace(poly, POLY_IN, 2, POLY_OUT, b0, mul(e, -1.0))
        m = _clip_to_halfspace(poly, POLY_OUT, m, POLY_IN, row(feat, FEAT_B + 1), e)
        for i in range(m):
            xa = row(poly, POLY_IN + i)
            xb = axpy(b0, dot(sub(xa, b0), e) / lb, eb)
            k = add_candidate(cand, k, mul(add(xa, xb), 0.5), normal, dot(sub(xb, xa), normal), margin)
    return k


@internal
def feature_candidates(sa, sb, verts, feat, poly, cand, normal, margin):
    """The features of a (facing -normal) and b (facing +normal), clipped: (candidates, na, nb)."""
    na = _feature(sa, verts, mul(normal, -1.0), feat, FEAT_A)
    nb = _feature(sb, verts, normal, feat, FEAT_B)
    return _clip_features(feat, na, nb, poly, cand, normal, margin), na, nb
