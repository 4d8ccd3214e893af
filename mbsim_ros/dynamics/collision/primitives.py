"""Narrow phase in closed form: plane against any shape, spheres and capsules, sphere-box, and
box-box by separating axes with feature clipping."""
from __future__ import annotations

import math

import numpy as np

from ..kernels import inline, internal
from .layout import (BOX, CAPSULE, CONE, CONVEX, CYLINDER, DUPLICATE_DIST, EDGE_AXIS_BIAS, FEATURE_SIN, FEAT_A,
                     FEAT_B, RIM_SAMPLES, SPHERE)
from .vectors import add, axpy, cross, dir_local, dir_world, dot, geom_axis, mul, norm, row, sub, to_world
from .manifold import add_candidate
from .features import feature_candidates


# ------------------------------------------------------------------ plane vs any ---
@inline
def _plane_candidate(cand, k, x, normal, origin, margin):
    """a's surface point x against the plane through origin: its depth under the plane."""
    depth = dot(sub(origin, x), normal)
    return add_candidate(cand, k, axpy(x, 0.5 * depth, normal), normal, depth, margin)


@internal
def _rim_candidates(s, cand, k, radius, z, normal, origin, margin):
    """A circle of the geom (radius, height z) under the plane: its lowest point exactly, and
    RIM_SAMPLES points around it (they carry a circle standing flat)."""
    axis = s[4]
    down = axpy(normal, -dot(normal, axis), axis)   # the normal's part in the circle's plane
    ld = norm(down)
    if ld > 1e-9:
        lowest = axpy(axpy(s[5], z, axis), -radius / ld, down)
        k = _plane_candidate(cand, k, lowest, normal, origin, margin)
    for i in range(RIM_SAMPLES):
        angle = 2.0 * math.pi * i / RIM_SAMPLES
        x = to_world(s, (radius * math.cos(angle), radius * math.sin(angle), z))
        k = _plane_candidate(cand, k, x, normal, origin, margin)
    return k


@internal
def plane_candidates(s, plane, verts, cand, margin):
    """Geom s against the plane geom (the half-space under its xy plane): the points of s that
    can be lowest, each with its own depth under the plane."""
    normal = plane[4]
    origin = plane[5]
    kind, h, p = s[0], s[1], s[5]
    k = 0
    if kind == SPHERE:
        k = _plane_candidate(cand, k, axpy(p, -h[0], normal), normal, origin, margin)
    elif kind == BOX:
        for i in range(8):
            corner = (h[0] if i & 1 else -h[0], h[1] if i & 2 else -h[1], h[2] if i & 4 else -h[2])
            k = _plane_candidate(cand, k, to_world(s, corner), normal, origin, margin)
    elif kind == CAPSULE:
        for end in (-h[1], h[1]):
            x = axpy(axpy(p, end, s[4]), -h[0], normal)
            k = _plane_candidate(cand, k, x, normal, origin, margin)
    elif kind == CYLINDER:
        k = _rim_candidates(s, cand, k, h[0], -h[1], normal, origin, margin)
        k = _rim_candidates(s, cand, k, h[0], h[1], normal, origin, margin)
    elif kind == CONE:
        k = _plane_candidate(cand, k, axpy(p, h[1], s[4]), normal, origin, margin)
        k = _rim_candidates(s, cand, k, h[0], -h[1], normal, origin, margin)
    elif kind == CONVEX:
        for i in range(s[6], s[6] + s[7]):
            k = _plane_candidate(cand, k, to_world(s, row(verts, i)), normal, origin, margin)
    return k


# ------------------------------------------------------------ spheres and capsules ---
@internal
def _closest_on_segment(p0, p1, x):
    """The point of segment p0-p1 nearest x."""
    e = sub(p1, p0)
    ee = dot(e, e)
    t = dot(sub(x, p0), e) / ee if ee > 0.0 else 0.0
    return axpy(p0, min(1.0, max(0.0, t)), e)


@internal
def _closest_segment_segment(p0, p1, q0, q1):
    """The nearest points (x on p0-p1, y on q0-q1) of two segments (Ericson, RTCD 5.1.9)."""
    d1 = sub(p1, p0)
    d2 = sub(q1, q0)
    r = sub(p0, q0)
    a = dot(d1, d1)
    e = dot(d2, d2)
    f = dot(d2, r)
    if a <= 0.0 and e <= 0.0:
        return p0, q0
    if a <= 0.0:
        return p0, axpy(q0, min(1.0, max(0.0, f / e)), d2)
    cc = dot(d1, r)
    if e <= 0.0:
        return axpy(p0, min(1.0, max(0.0, -cc / a)), d1), q0
    b = dot(d1, d2)
    denom = a * e - b * b
    s = min(1.0, max(0.0, (b * f - cc * e) / denom)) if denom > 1e-14 * a * e else 0.0
    t = (b * s + f) / e
    if t < 0.0:
        t = 0.0
        s = min(1.0, max(0.0, -cc / a))
    elif t > 1.0:
        t = 1.0
        s = min(1.0, max(0.0, (b - cc) / a))
    return axpy(p0, s, d1), axpy(q0, t, d2)


@inline
def sphere_sphere(ca, ra, cb, rb, cand, k, margin):
    """Sphere (ca, ra) of a against sphere (cb, rb) of b: one contact on the line of centres."""
    d = sub(ca, cb)
    dist = norm(d)
    depth = ra + rb - dist
    normal = mul(d, 1.0 / dist) if dist > 1e-12 * (ra + rb) else (0.0, 0.0, 1.0)
    point = mul(add(axpy(ca, -ra, normal), axpy(cb, rb, normal)), 0.5)
    return add_candidate(cand, k, point, normal, depth, margin)


@internal
def _segment_ends(s):
    """The ends of a capsule's segment."""
    return axpy(s[5], -s[1][1], s[4]), axpy(s[5], s[1][1], s[4])


@internal
def capsule_sphere(sa, sb, cand, margin):
    a0, a1 = _segment_ends(sa)
    return sphere_sphere(_closest_on_segment(a0, a1, sb[5]), sa[1][0], sb[5], sb[1][0], cand, 0, margin)


@internal
def capsule_capsule(sa, sb, cand, margin):
    """The nearest points of the two segments; parallel segments touch along their common
    stretch, so both its ends are contacts."""
    ra, rb = sa[1][0], sb[1][0]
    a0, a1 = _segment_ends(sa)
    b0, b1 = _segment_ends(sb)
    ea = sub(a1, a0)
    eb = sub(b1, b0)
    la2 = dot(ea, ea)
    if la2 > 0.0 and norm(cross(ea, eb)) <= FEATURE_SIN * math.sqrt(la2) * norm(eb):
        t0 = dot(sub(b0, a0), ea) / la2
        t1 = dot(sub(b1, a0), ea) / la2
        lo = max(0.0, min(t0, t1))
        hi = min(1.0, max(t0, t1))
        if (hi - lo) * math.sqrt(la2) > DUPLICATE_DIST:
            k = 0
            for t in (lo, hi):
                x = axpy(a0, t, ea)
                k = sphere_sphere(x, ra, _closest_on_segment(b0, b1, x), rb, cand, k, margin)
            return k
    x, y = _closest_segment_segment(a0, a1, b0, b1)
    return sphere_sphere(x, ra, y, rb, cand, 0, margin)


@internal
def box_sphere(sa, sb, cand, margin):
    """Box a, sphere b: the nearest box point outside the box; inside, the nearest face."""
    h = sa[1]
    cb, rb = sb[5], sb[1][0]
    x = dir_local(sa, sub(cb, sa[5]))       # the sphere's centre in the box frame
    q = (min(h[0], max(-h[0], x[0])), min(h[1], max(-h[1], x[1])), min(h[2], max(-h[2], x[2])))
    d = sub(q, x)
    dist = norm(d)
    if dist > 0.0:
        depth = rb - dist
        normal = dir_world(sa, mul(d, 1.0 / dist))   # from the sphere towards the box
        surface_a = to_world(sa, q)
    else:
        k = 0
        for i in range(1, 3):
            if h[i] - abs(x[i]) < h[k] - abs(x[k]):
                k = i
        sign = 1.0 if x[k] >= 0.0 else -1.0
        depth = rb + h[k] - abs(x[k])
        normal = mul(geom_axis(sa, k), -sign)       # push the box away from the centre's side
        face = (sign * h[0] if k == 0 else x[0], sign * h[1] if k == 1 else x[1],
                sign * h[2] if k == 2 else x[2])
        surface_a = to_world(sa, face)
    point = mul(add(surface_a, axpy(cb, rb, normal)), 0.5)
    return add_candidate(cand, 0, point, normal, depth, margin)


# ------------------------------------------------------------------------ box-box ---
@internal
def box_box(sa, sb, verts, feat, poly, cand, margin):
    """Separating axis test over the 3 + 3 face normals and the 9 edge cross products; the
    axis of least overlap (faces preferred by EDGE_AXIS_BIAS, as ODE) is the normal, then the
    features facing along it are clipped."""
    ha, hb = sa[1], sb[1]
    d = sub(sa[5], sb[5])
    best_face, face_axis = np.inf, (0.0, 0.0, 1.0)
    best_edge, edge_axis = np.inf, (0.0, 0.0, 1.0)
    for m in range(15):
        if m < 3:
            axis = geom_axis(sa, m)
        elif m < 6:
            axis = geom_axis(sb, m - 3)
        else:
            axis = cross(geom_axis(sa, (m - 6) // 3), geom_axis(sb, (m - 6) % 3))
            la = norm(axis)
            if la < 1e-6:          # parallel edges: the face axes cover this direction
                continue
            axis = mul(axis, 1.0 / la)
        reach = (ha[0] * abs(dot(axis, sa[2])) + ha[1] * abs(dot(axis, sa[3]))
                 + ha[2] * abs(dot(axis, sa[4])) + hb[0] * abs(dot(axis, sb[2]))
                 + hb[1] * abs(dot(axis, sb[3])) + hb[2] * abs(dot(axis, sb[4])))
        along = dot(d, axis)
        overlap = reach - abs(along)
        if overlap <= -margin:
            return 0
        if along < 0.0:
            axis = mul(axis, -1.0)
        if m < 6:
            if overlap < best_face:
                best_face, face_axis = overlap, axis
        elif overlap < best_edge:
            best_edge, edge_axis = overlap, axis
    if best_edge < best_face - EDGE_AXIS_BIAS * abs(best_face):
        depth, normal = best_edge, edge_axis
    else:
        depth, normal = best_face, face_axis
    k, na, nb = feature_candidates(sa, sb, verts, feat, poly, cand, normal, margin)
    if k == 0 and depth > 0.0:     # a corner on an edge and the like: one point between them
        x = row(feat, FEAT_A) if na == 1 else axpy(row(feat, FEAT_B), -depth, normal)
        k = add_candidate(cand, k, axpy(x, 0.5 * depth, normal), normal, depth, margin)
    return k
