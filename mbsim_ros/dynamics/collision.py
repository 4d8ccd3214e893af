"""Contact points between the collision shapes of links: the collision detection of the contact solver.

compile_geoms(models, compiled) turns every collision Shape into a geom (flat buffers gf/gi,
views `Geoms`) and filters the candidate pairs once. collide(g, c, link_R, link_p, margin),
called from numba code once per step, writes the contacts into a `Contacts` workspace:

  pair a, b    geoms pairs[p, 0] < pairs[p, 1]: a and b in the order of the pairs array
  normal       world unit vector from b into a: moving a along +normal separates the pair
  depth        penetration along the normal (> 0); with margin > 0 gaps down to -margin too
  point        world point midway between the two surfaces
  mu           min(friction_a, friction_b);  restitution  e_a * e_b  (DART's rules)

Narrow phase (every routine writes the normal from its b into its a):
  plane vs anything    the other shape's candidate surface points under the plane (box
                       corners, capsule end spheres, cylinder/cone rims sampled, mesh vertices)
  sphere, capsule      closest points of their core point/segment (two points for parallel
                       capsules); sphere-box in closed form inside and outside the box
  box-box              separating axis test over the 15 axes, then feature clipping
  everything else      GJK distance between the cores (a sphere is its centre and a capsule
                       its segment, inflated by the radius afterwards), EPA when the cores
                       overlap, then feature clipping.
Feature clipping (the multi-point manifold): each shape's "feature" facing the other (the face,
edge or vertex of a box or mesh, a cylinder's cap rim sampled or its side line, a capsule's
segment) within FEATURE_SIN of the normal; the smaller feature is clipped to the larger one's
prism along the normal and every clipped point gets its own depth against the larger one's
plane, as ODE's dBoxBox does for faces. At most MAX_MANIFOLD points are kept per pair: the
deepest and then those spanning the largest area.
"""
from __future__ import annotations

import math
from collections import namedtuple

import numpy as np
from numba import njit

from .._kernel_cache import kernel as kernel_decorator

from ..model import Model

# Geom kinds. The narrow phase orders a pair so that the larger code is its `a`.
PLANE, SPHERE, BOX, CAPSULE, CYLINDER, CONE, CONVEX = 0, 1, 2, 3, 4, 5, 6
KIND_OF_SHAPE = {"plane": PLANE, "sphere": SPHERE, "box": BOX, "capsule": CAPSULE,
                 "cylinder": CYLINDER, "cone": CONE, "mesh": CONVEX}

MAX_MANIFOLD = 4        # points kept per pair: a box needs its 4 corners to stand
RIM_SAMPLES = 8         # points sampled around a cylinder or cone rim
MAX_FEATURE = 16        # mesh vertices kept in one contact feature
FEATURE_SIN = 0.05      # a face or edge within ~3 degrees of facing the other shape is a feature
FEATURE_COS = math.sqrt(1.0 - FEATURE_SIN ** 2)
MAX_POLY = 2 * MAX_FEATURE + 4   # a clipped polygon: its own vertices plus one per clipping edge
DUPLICATE_DIST = 1e-6   # m: manifold points closer than this (or on a line within it) add nothing
EDGE_AXIS_BIAS = 0.05   # box-box: an edge axis must beat the best face axis by 5% (ODE's fudge)
GJK_MAX_ITER = 64
GJK_REL_TOL = 1e-12     # GJK stops when |v|^2 - v.w <= tol |v|^2 (distance converged)
TOUCH_REL = 1e-10       # core distances below this times the shapes' size go to EPA
EPA_MAX_VERTS = 128
EPA_MAX_FACES = 256     # a closed triangulation of V vertices has 2V - 4 faces
EPA_MAX_EDGES = 384
EPA_REL_TOL = 1e-10     # EPA stops when the support gains less than this times the size

Geoms = namedtuple("Geoms", [
    "kind",        # int64[ng]     PLANE ... CONVEX
    "link",        # int64[ng]     compiled link index
    "vert_start", "vert_count",   # int64[ng]  CONVEX: range into verts
    "R", "p",      # f8[ng,3,3], f8[ng,3]: geom frame in the link frame
    "size",        # f8[ng,3]      box half extents; sphere (r); capsule/cylinder/cone (r, half length)
    "friction", "restitution",    # f8[ng]
    "rbound",      # f8[ng]        bounding sphere radius about the geom origin (inf: plane)
    "verts",       # f8[nverts,3]  convex hull vertices, geom frame
    "pairs",       # int64[npair,2] candidate pairs after the static filters, i < j
])

Contacts = namedtuple("Contacts", [
    "link", "geom",          # int64[cap,2]  of a and b
    "point", "normal",       # f8[cap,3]     world
    "depth", "mu", "restitution",   # f8[cap]
    # scratch
    "geom_R", "geom_p",      # f8[ng,3,3], f8[ng,3]: geom poses in the world
    "geom_half",             # f8[ng,3]   half extents of the world box about geom_p
    "feat",                  # f8[2*MAX_FEATURE,3]: a's contact feature, then b's from row MAX_FEATURE
    "poly",                  # f8[2*MAX_POLY,3]: two clipping buffers, the second from row MAX_POLY
    "cand",                  # f8[ncand,7]: candidate point (0:3), normal (3:6), depth (6)
    "simplex",               # f8[4,10]   GJK: point of A - B (0:3), of a (3:6), of b (6:9), weight (9)
    "epa_vert",              # f8[EPA_MAX_VERTS,9]: EPA vertex of A - B (0:3), of a (3:6), of b (6:9)
    "epa_face",              # f8[EPA_MAX_FACES,4]: unit normal (0:3), distance from the origin (3)
    "epa_index",             # int64[EPA_MAX_FACES,4]: vertex indices (0:3), 1 while the face exists (3)
    "epa_edge",              # int64[EPA_MAX_EDGES,2]: the horizon
])


def geom_sizes(ng, nverts, npair):
    """(float, int) buffer lengths that carve_geoms lays out."""
    return 18 * ng + 3 * nverts, 4 + 4 * ng + 2 * npair


def contacts_sizes(capacity, ng, ncand):
    """(float, int) buffer lengths that carve_contacts lays out."""
    nf = (9 * capacity + 15 * ng + 6 * MAX_FEATURE + 6 * MAX_POLY + 7 * ncand + 40
          + 9 * EPA_MAX_VERTS + 4 * EPA_MAX_FACES)
    ni = 3 + 4 * capacity + 4 * EPA_MAX_FACES + 2 * EPA_MAX_EDGES
    return nf, ni


kernel = kernel_decorator(error_model="numpy")                  # entry points, called from Python
internal = kernel_decorator(error_model="numpy", python=False)  # called from kernels only
inline = njit(cache=True, nogil=True, error_model="numpy", inline="always")


@internal
def carve_geoms(gf, gi):
    """The Geoms as views into gf and gi (header gi[:4] = ngeom, nverts, npair, capacity)."""
    ng, nverts, npair = gi[0], gi[1], gi[2]
    o = 0
    R = gf[o:o + 9 * ng].reshape((ng, 3, 3)); o += 9 * ng
    p = gf[o:o + 3 * ng].reshape((ng, 3)); o += 3 * ng
    size = gf[o:o + 3 * ng].reshape((ng, 3)); o += 3 * ng
    friction = gf[o:o + ng]; o += ng
    restitution = gf[o:o + ng]; o += ng
    rbound = gf[o:o + ng]; o += ng
    verts = gf[o:o + 3 * nverts].reshape((nverts, 3)); o += 3 * nverts
    k = 4
    kind = gi[k:k + ng]; k += ng
    link = gi[k:k + ng]; k += ng
    vert_start = gi[k:k + ng]; k += ng
    vert_count = gi[k:k + ng]; k += ng
    pairs = gi[k:k + 2 * npair].reshape((npair, 2)); k += 2 * npair
    g = Geoms(kind, link, vert_start, vert_count, R, p, size, friction, restitution, rbound,
              verts, pairs)
    return g, o, k


@internal
def carve_contacts(cf, ci):
    """The Contacts workspace as views into cf and ci (header ci[:3] = capacity, ngeom, ncand)."""
    cap, ng, ncand = ci[0], ci[1], ci[2]
    o = 0
    point = cf[o:o + 3 * cap].reshape((cap, 3)); o += 3 * cap
    normal = cf[o:o + 3 * cap].reshape((cap, 3)); o += 3 * cap
    depth = cf[o:o + cap]; o += cap
    mu = cf[o:o + cap]; o += cap
    restitution = cf[o:o + cap]; o += cap
    geom_R = cf[o:o + 9 * ng].reshape((ng, 3, 3)); o += 9 * ng
    geom_p = cf[o:o + 3 * ng].reshape((ng, 3)); o += 3 * ng
    geom_half = cf[o:o + 3 * ng].reshape((ng, 3)); o += 3 * ng
    feat = cf[o:o + 6 * MAX_FEATURE].reshape((2 * MAX_FEATURE, 3)); o += 6 * MAX_FEATURE
    poly = cf[o:o + 6 * MAX_POLY].reshape((2 * MAX_POLY, 3)); o += 6 * MAX_POLY
    cand = cf[o:o + 7 * ncand].reshape((ncand, 7)); o += 7 * ncand
    simplex = cf[o:o + 40].reshape((4, 10)); o += 40
    epa_vert = cf[o:o + 9 * EPA_MAX_VERTS].reshape((EPA_MAX_VERTS, 9)); o += 9 * EPA_MAX_VERTS
    epa_face = cf[o:o + 4 * EPA_MAX_FACES].reshape((EPA_MAX_FACES, 4)); o += 4 * EPA_MAX_FACES
    k = 3
    link = ci[k:k + 2 * cap].reshape((cap, 2)); k += 2 * cap
    geom = ci[k:k + 2 * cap].reshape((cap, 2)); k += 2 * cap
    epa_index = ci[k:k + 4 * EPA_MAX_FACES].reshape((EPA_MAX_FACES, 4)); k += 4 * EPA_MAX_FACES
    epa_edge = ci[k:k + 2 * EPA_MAX_EDGES].reshape((EPA_MAX_EDGES, 2)); k += 2 * EPA_MAX_EDGES
    c = Contacts(link, geom, point, normal, depth, mu, restitution, geom_R, geom_p, geom_half,
                 feat, poly, cand, simplex, epa_vert, epa_face, epa_index, epa_edge)
    return c, o, k



# How the narrow phase is called: routines take geom records (tuples, by value) and the few
# scratch arrays they use, never the Geoms/Contacts tuples (a call handed Contacts cost ~0.4 us
# when kernels still counted references to every array of a tuple; small arguments also keep
# each routine's code short to compile). Each routine writes candidate
# contacts into `cand` and returns their count; collide() keeps at most MAX_MANIFOLD of them.
FEAT_A, FEAT_B = 0, MAX_FEATURE     # first rows of a's and b's features in `feat`
POLY_IN, POLY_OUT = 0, MAX_POLY     # first rows of the two clipping buffers in `poly`


# ------------------------------------------------------------ 3-vectors as tuples ---
# The helpers on tuples (no arrays) are kernels of their own, not inlined by numba: numba would
# re-process a helper's code at each of its hundreds of call sites, while LLVM inlines the
# compiled helper for the same machine code.
@inline
def _row(A, i, col=0):
    """A[i, col:col + 3] as a tuple."""
    return (A[i, col], A[i, col + 1], A[i, col + 2])


@inline
def _put(A, i, x, col=0):
    """A[i, col:col + 3] = x."""
    A[i, col] = x[0]
    A[i, col + 1] = x[1]
    A[i, col + 2] = x[2]


@internal
def _add(a, b):
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


@internal
def _sub(a, b):
    return (a[0] - b[0], a[1] - b[1], a[2] - b[2])


@internal
def _mul(a, s):
    return (a[0] * s, a[1] * s, a[2] * s)


@internal
def _axpy(a, s, b):
    """a + s b"""
    return (a[0] + s * b[0], a[1] + s * b[1], a[2] + s * b[2])


@internal
def _dot(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


@internal
def _cross(a, b):
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


@internal
def _norm(a):
    return math.sqrt(a[0] * a[0] + a[1] * a[1] + a[2] * a[2])


@internal
def _perpendicular(n):
    """A unit vector perpendicular to the unit vector n."""
    if abs(n[0]) < 0.577:
        a = _cross(n, (1.0, 0.0, 0.0))
    else:
        a = _cross(n, (0.0, 1.0, 0.0))
    return _mul(a, 1.0 / _norm(a))


# ------------------------------------------------------------------ geom records ---
@inline
def _record(g, c, gi):
    """Geom gi by value: (kind, size, world axes ex, ey, ez, world origin, first vertex,
    vertex count, bounding radius)."""
    R = c.geom_R
    return (g.kind[gi], (g.size[gi, 0], g.size[gi, 1], g.size[gi, 2]),
            (R[gi, 0, 0], R[gi, 1, 0], R[gi, 2, 0]), (R[gi, 0, 1], R[gi, 1, 1], R[gi, 2, 1]),
            (R[gi, 0, 2], R[gi, 1, 2], R[gi, 2, 2]), (c.geom_p[gi, 0], c.geom_p[gi, 1], c.geom_p[gi, 2]),
            g.vert_start[gi], g.vert_count[gi], g.rbound[gi])


@internal
def _axis(s, k):
    """The geom's k-th axis in the world."""
    return s[2] if k == 0 else (s[3] if k == 1 else s[4])


@internal
def _dir_world(s, x):
    """A direction given in the geom frame, in the world."""
    return _axpy(_axpy(_mul(s[2], x[0]), x[1], s[3]), x[2], s[4])


@internal
def _to_world(s, x):
    """A point given in the geom frame, in the world."""
    return _add(s[5], _dir_world(s, x))


@internal
def _dir_local(s, d):
    """A world direction in the geom frame."""
    return (_dot(s[2], d), _dot(s[3], d), _dot(s[4], d))


# ------------------------------------------------------------- contact candidates ---
@inline
def _add_candidate(cand, k, point, normal, depth, margin):
    """Keep a candidate (point, normal from b into a, depth) if it is within the margin and
    there is room; returns the count."""
    if depth <= -margin or k >= cand.shape[0]:
        return k
    _put(cand, k, point)
    _put(cand, k, normal, 3)
    cand[k, 6] = depth
    return k + 1


@internal
def _choose_manifold(cand, k):
    """Indices (-1: none) of at most MAX_MANIFOLD = 4 of the k candidates: the deepest, the
    farthest from it, the one spanning the largest triangle with those two, and the one adding
    the most area outside that triangle. Repeated points and points on the line add nothing."""
    if k == 0:
        return -1, -1, -1, -1
    i0 = 0
    for i in range(1, k):
        if cand[i, 6] > cand[i0, 6]:
            i0 = i
    p0 = _row(cand, i0)
    i1, best = -1, DUPLICATE_DIST
    for i in range(k):
        dist = _norm(_sub(_row(cand, i), p0))
        if dist > best:
            i1, best = i, dist
    if i1 < 0:
        return i0, -1, -1, -1
    p1 = _row(cand, i1)
    e01 = _sub(p1, p0)
    i2, best = -1, DUPLICATE_DIST * _norm(e01)
    for i in range(k):
        area2 = _norm(_cross(e01, _sub(_row(cand, i), p0)))
        if area2 > best:
            i2, best = i, area2
    if i2 < 0:
        return i0, i1, -1, -1
    p2 = _row(cand, i2)
    t = _cross(e01, _sub(p2, p0))       # the triangle p0 p1 p2 turns counterclockwise about t
    tn = _norm(t)
    i3, best = -1, 0.0
    for i in range(k):
        q = _row(cand, i)
        outside = 0.0                   # twice the area q adds beyond the edge it is outside of
        for e in range(3):
            a = p0 if e == 0 else (p1 if e == 1 else p2)
            b = p1 if e == 0 else (p2 if e == 1 else p0)
            ab = _sub(b, a)
            area2 = -_dot(_cross(ab, _sub(q, a)), t) / tn
            if area2 > outside and area2 > DUPLICATE_DIST * _norm(ab):
                outside = area2
        if outside > best:
            i3, best = i, outside
    return i0, i1, i2, i3


# ----------------------------------------------------------------- support points ---
@internal
def _support(s, verts, d):
    """The world point of geom s's core furthest along the world direction d (any length).
    The core of a sphere is its centre, of a capsule its segment (GJK and EPA add the radius
    afterwards: exact, and polytope-fast); any other shape is its own core."""
    kind, h = s[0], s[1]
    dl = _dir_local(s, d)
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
            if h[1] * dl[2] > _dot(x, dl):
                x = (0.0, 0.0, h[1])
    else:   # CONVEX: the best hull vertex (hill climbing would need the hull's adjacency)
        best, best_dot = s[6], -np.inf
        for i in range(s[6], s[6] + s[7]):
            dot = verts[i, 0] * dl[0] + verts[i, 1] * dl[1] + verts[i, 2] * dl[2]
            if dot > best_dot:
                best, best_dot = i, dot
        x = _row(verts, best)
    return _to_world(s, x)


@internal
def _core_radius(s):
    """The radius GJK adds to a sphere's centre or a capsule's segment."""
    return s[1][0] if (s[0] == SPHERE or s[0] == CAPSULE) else 0.0


# --------------------------------------------------------------- contact features ---
@inline
def _ring(s, radius, z, out, first):
    """RIM_SAMPLES points in order around the circle (radius, height z) of the geom's xy plane."""
    for i in range(RIM_SAMPLES):
        angle = 2.0 * math.pi * i / RIM_SAMPLES
        _put(out, first + i, _to_world(s, (radius * math.cos(angle), radius * math.sin(angle), z)))
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
        _put(out, first, _to_world(s, corner))
        return 1
    if nfree == 1:
        k = 0 if free0 else (1 if free1 else 2)
        for i in range(2):
            sign = 2.0 * i - 1.0
            x = (sign * h[0] if k == 0 else corner[0], sign * h[1] if k == 1 else corner[1],
                 sign * h[2] if k == 2 else corner[2])
            _put(out, first + i, _to_world(s, x))
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
        _put(out, first + i, _to_world(s, x))
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
        if _norm(_sub(_row(P, i), _row(P, first))) > _norm(_sub(_row(P, far1), _row(P, first))):
            far1 = i
    far2 = first
    for i in range(first, first + n):
        if _norm(_sub(_row(P, i), _row(P, far1))) > _norm(_sub(_row(P, far2), _row(P, far1))):
            far2 = i
    line = _sub(_row(P, far2), _row(P, far1))
    off_line = 0.0
    for i in range(first, first + n):
        off_line = max(off_line, abs(_dot(_cross(line, _sub(_row(P, i), _row(P, far1))), d)))
    if off_line <= 1e-9 * _dot(line, line):
        a, b = _row(P, far1), _row(P, far2)
        _put(P, first, a)
        _put(P, first + 1, b)
        return 2
    u = _perpendicular(d)
    v = _cross(d, u)
    centre = (0.0, 0.0, 0.0)
    for i in range(first, first + n):
        centre = _axpy(centre, 1.0 / n, _row(P, i))
    for i in range(first + 1, first + n):   # insertion sort by the angle about the centroid
        j = i
        while j > first:
            a = _sub(_row(P, j - 1), centre)
            b = _sub(_row(P, j), centre)
            if math.atan2(_dot(a, v), _dot(a, u)) <= math.atan2(_dot(b, v), _dot(b, u)):
                break
            for m in range(3):
                P[j - 1, m], P[j, m] = P[j, m], P[j - 1, m]
            j -= 1
    removed = True
    while removed and n >= 3:  # drop points where the boundary does not turn left
        removed = False
        for i in range(n):
            ab = _sub(_row(P, first + i), _row(P, first + (i + n - 1) % n))
            be = _sub(_row(P, first + (i + 1) % n), _row(P, first + i))
            if _dot(_cross(ab, be), d) <= 1e-12 * _norm(ab) * _norm(be):
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
        if _dot(_row(verts, i), dl) > _dot(_row(verts, top), dl):
            top = i
    apex = _row(verts, top)
    k = 0
    for i in range(s[6], s[6] + s[7]):
        e = _sub(_row(verts, i), apex)
        drop = _dot(e, dl)
        if drop < -FEATURE_SIN * _norm(e):
            continue
        if k < MAX_FEATURE:
            slot = k
            k += 1
        else:                  # full: replace the lowest kept vertex if this one is higher
            slot, lowest = 0, np.inf
            for j in range(k):
                dj = _dot(_sub(_row(out, first + j), apex), dl)
                if dj < lowest:
                    slot, lowest = j, dj
            if drop <= lowest:
                continue
        _put(out, first + slot, _row(verts, i))
    for i in range(first, first + k):
        _put(out, i, _to_world(s, _row(out, i)))
    return _order_polygon(out, first, k, d)


@internal
def _feature(s, verts, d, out, first):
    """The surface points of geom s facing the unit world direction d, as a convex polygon
    ordered about d, in out from row `first`: 1 point (a corner or a smooth spot), 2 (an edge,
    a line of a curved side), more (a face, or a cap's rim sampled). Returns the count."""
    kind, h = s[0], s[1]
    dl = _dir_local(s, d)
    if kind == BOX:
        return _box_feature(s, dl, out, first)
    if kind == CONVEX:
        return _convex_feature(s, verts, dl, d, out, first)
    if kind == SPHERE:
        _put(out, first, _axpy(s[5], h[0], d))
        return 1
    r, hl = h[0], h[1]
    if kind == CAPSULE:        # points of the end spheres: the segment's ends pushed out along d
        if abs(dl[2]) <= FEATURE_SIN:
            _put(out, first, _axpy(_to_world(s, (0.0, 0.0, -hl)), r, d))
            _put(out, first + 1, _axpy(_to_world(s, (0.0, 0.0, hl)), r, d))
            return 2
        _put(out, first, _axpy(_to_world(s, (0.0, 0.0, hl if dl[2] > 0 else -hl)), r, d))
        return 1
    rxy = math.sqrt(dl[0] * dl[0] + dl[1] * dl[1])
    ux, uy = (dl[0] / rxy, dl[1] / rxy) if rxy > 1e-12 else (1.0, 0.0)
    if kind == CYLINDER:
        if abs(dl[2]) >= FEATURE_COS:
            return _ring(s, r, hl if dl[2] > 0 else -hl, out, first)
        if abs(dl[2]) <= FEATURE_SIN:
            _put(out, first, _to_world(s, (r * ux, r * uy, -hl)))
            _put(out, first + 1, _to_world(s, (r * ux, r * uy, hl)))
            return 2
        _put(out, first, _to_world(s, (r * ux, r * uy, hl if dl[2] > 0 else -hl)))
        return 1
    # CONE: apex (0, 0, hl), base circle of radius r at z = -hl
    if dl[2] <= -FEATURE_COS:
        return _ring(s, r, -hl, out, first)
    rim = (r * ux, r * uy, -hl)
    side_cos = (2.0 * hl * rxy + r * dl[2]) / math.sqrt(4.0 * hl * hl + r * r)
    if side_cos >= FEATURE_COS:  # d is nearly the outward normal of the side line
        _put(out, first, _to_world(s, rim))
        _put(out, first + 1, _to_world(s, (0.0, 0.0, hl)))
        return 2
    _put(out, first, _to_world(s, (0.0, 0.0, hl) if hl * dl[2] > _dot(rim, dl) else rim))
    return 1


# ---------------------------------------------------------------- feature clipping ---
@internal
def _clip_to_halfspace(poly, src, n, dst, q, side):
    """The part of the point, segment or convex polygon poly[src:src + n] where
    (x - q).side <= 0, written from row dst; returns its count."""
    m = 0
    if n == 1:
        if _dot(_sub(_row(poly, src), q), side) <= 0.0:
            _put(poly, dst, _row(poly, src))
            m = 1
        return m
    edges = 1 if n == 2 else n      # a segment has one edge, a polygon closes
    for i in range(n):
        x = _row(poly, src + i)
        dx = _dot(_sub(x, q), side)
        if dx <= 0.0 and m < MAX_POLY:
            _put(poly, dst + m, x)
            m += 1
        if i < edges:
            y = _row(poly, src + (i + 1) % n)
            dy = _dot(_sub(y, q), side)
            if (dx <= 0.0) != (dy <= 0.0) and m < MAX_POLY:
                _put(poly, dst + m, _axpy(x, dx / (dx - dy), _sub(y, x)))
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
            _put(poly, POLY_IN + i, _row(feat, inc + i))
        centre = (0.0, 0.0, 0.0)
        plane_n = (0.0, 0.0, 0.0)      # Newell's normal of the reference polygon
        for i in range(nref):
            centre = _axpy(centre, 1.0 / nref, _row(feat, ref + i))
            plane_n = _add(plane_n, _cross(_row(feat, ref + i), _row(feat, ref + (i + 1) % nref)))
        ln = _norm(plane_n)
        plane_n = _mul(plane_n, 1.0 / ln) if ln > 1e-300 else normal
        if _dot(plane_n, normal) < 0.0:
            plane_n = _mul(plane_n, -1.0)
        cos_n = _dot(plane_n, normal)
        if cos_n < FEATURE_SIN:
            return 0
        src, dst = POLY_IN, POLY_OUT
        for i in range(nref):
            r0 = _row(feat, ref + i)
            side = _cross(_sub(_row(feat, ref + (i + 1) % nref), r0), normal)
            if _dot(side, _sub(centre, r0)) > 0.0:
                side = _mul(side, -1.0)
            m = _clip_to_halfspace(poly, src, m, dst, r0, side)
            src, dst = dst, src
            if m == 0:
                return 0
        for i in range(m):
            x = _row(poly, src + i)
            t = _dot(_sub(centre, x), plane_n) / cos_n   # x + t normal is on the reference plane
            k = _add_candidate(cand, k, _axpy(x, 0.5 * t, normal), normal, -t if ref_is_a else t, margin)
        return k
    if na == 2 and nb == 2:
        a0, b0 = _row(feat, FEAT_A), _row(feat, FEAT_B)
        ea = _sub(_row(feat, FEAT_A + 1), a0)
        eb = _sub(_row(feat, FEAT_B + 1), b0)
        ea_p = _axpy(ea, -_dot(ea, normal), normal)      # the edges seen along the normal
        eb_p = _axpy(eb, -_dot(eb, normal), normal)
        la, lb = _norm(ea_p), _norm(eb_p)
        if la < 1e-12 or lb < 1e-12:
            return 0
        cr = _dot(_cross(ea_p, eb_p), normal)
        if abs(cr) > FEATURE_SIN * la * lb:   # crossing edges: the one point over the other
            w = _sub(b0, a0)
            w_p = _axpy(w, -_dot(w, normal), normal)
            ta = _dot(_cross(w_p, eb_p), normal) / cr
            tb = _dot(_cross(w_p, ea_p), normal) / cr
            if 0.0 <= ta <= 1.0 and 0.0 <= tb <= 1.0:
                xa = _axpy(a0, ta, ea)
                xb = _axpy(b0, tb, eb)
                k = _add_candidate(cand, k, _mul(_add(xa, xb), 0.5), normal, _dot(_sub(xb, xa), normal), margin)
            return k
        # parallel edges: the stretch of a's edge alongside b's
        e = _mul(eb_p, 1.0 / lb)
        _put(poly, POLY_IN, a0)
        _put(poly, POLY_IN + 1, _row(feat, FEAT_A + 1))
        m = _clip_to_halfspace(poly, POLY_IN, 2, POLY_OUT, b0, _mul(e, -1.0))
        m = _clip_to_halfspace(poly, POLY_OUT, m, POLY_IN, _row(feat, FEAT_B + 1), e)
        for i in range(m):
            xa = _row(poly, POLY_IN + i)
            xb = _axpy(b0, _dot(_sub(xa, b0), e) / lb, eb)
            k = _add_candidate(cand, k, _mul(_add(xa, xb), 0.5), normal, _dot(_sub(xb, xa), normal), margin)
    return k


@internal
def _feature_candidates(sa, sb, verts, feat, poly, cand, normal, margin):
    """The features of a (facing -normal) and b (facing +normal), clipped: (candidates, na, nb)."""
    na = _feature(sa, verts, _mul(normal, -1.0), feat, FEAT_A)
    nb = _feature(sb, verts, normal, feat, FEAT_B)
    return _clip_features(feat, na, nb, poly, cand, normal, margin), na, nb


# ------------------------------------------------------------------ plane vs any ---
@inline
def _plane_candidate(cand, k, x, normal, origin, margin):
    """a's surface point x against the plane through origin: its depth under the plane."""
    depth = _dot(_sub(origin, x), normal)
    return _add_candidate(cand, k, _axpy(x, 0.5 * depth, normal), normal, depth, margin)


@internal
def _rim_candidates(s, cand, k, radius, z, normal, origin, margin):
    """A circle of the geom (radius, height z) under the plane: its lowest point exactly, and
    RIM_SAMPLES points around it (they carry a circle standing flat)."""
    axis = s[4]
    down = _axpy(normal, -_dot(normal, axis), axis)   # the normal's part in the circle's plane
    ld = _norm(down)
    if ld > 1e-9:
        lowest = _axpy(_axpy(s[5], z, axis), -radius / ld, down)
        k = _plane_candidate(cand, k, lowest, normal, origin, margin)
    for i in range(RIM_SAMPLES):
        angle = 2.0 * math.pi * i / RIM_SAMPLES
        x = _to_world(s, (radius * math.cos(angle), radius * math.sin(angle), z))
        k = _plane_candidate(cand, k, x, normal, origin, margin)
    return k


@internal
def _plane_candidates(s, plane, verts, cand, margin):
    """Geom s against the plane geom (the half-space under its xy plane): the points of s that
    can be lowest, each with its own depth under the plane."""
    normal = plane[4]
    origin = plane[5]
    kind, h, p = s[0], s[1], s[5]
    k = 0
    if kind == SPHERE:
        k = _plane_candidate(cand, k, _axpy(p, -h[0], normal), normal, origin, margin)
    elif kind == BOX:
        for i in range(8):
            corner = (h[0] if i & 1 else -h[0], h[1] if i & 2 else -h[1], h[2] if i & 4 else -h[2])
            k = _plane_candidate(cand, k, _to_world(s, corner), normal, origin, margin)
    elif kind == CAPSULE:
        for end in (-h[1], h[1]):
            x = _axpy(_axpy(p, end, s[4]), -h[0], normal)
            k = _plane_candidate(cand, k, x, normal, origin, margin)
    elif kind == CYLINDER:
        k = _rim_candidates(s, cand, k, h[0], -h[1], normal, origin, margin)
        k = _rim_candidates(s, cand, k, h[0], h[1], normal, origin, margin)
    elif kind == CONE:
        k = _plane_candidate(cand, k, _axpy(p, h[1], s[4]), normal, origin, margin)
        k = _rim_candidates(s, cand, k, h[0], -h[1], normal, origin, margin)
    elif kind == CONVEX:
        for i in range(s[6], s[6] + s[7]):
            k = _plane_candidate(cand, k, _to_world(s, _row(verts, i)), normal, origin, margin)
    return k


# ------------------------------------------------------------ spheres and capsules ---
@internal
def _closest_on_segment(p0, p1, x):
    """The point of segment p0-p1 nearest x."""
    e = _sub(p1, p0)
    ee = _dot(e, e)
    t = _dot(_sub(x, p0), e) / ee if ee > 0.0 else 0.0
    return _axpy(p0, min(1.0, max(0.0, t)), e)


@internal
def _closest_segment_segment(p0, p1, q0, q1):
    """The nearest points (x on p0-p1, y on q0-q1) of two segments (Ericson, RTCD 5.1.9)."""
    d1 = _sub(p1, p0)
    d2 = _sub(q1, q0)
    r = _sub(p0, q0)
    a = _dot(d1, d1)
    e = _dot(d2, d2)
    f = _dot(d2, r)
    if a <= 0.0 and e <= 0.0:
        return p0, q0
    if a <= 0.0:
        return p0, _axpy(q0, min(1.0, max(0.0, f / e)), d2)
    cc = _dot(d1, r)
    if e <= 0.0:
        return _axpy(p0, min(1.0, max(0.0, -cc / a)), d1), q0
    b = _dot(d1, d2)
    denom = a * e - b * b
    s = min(1.0, max(0.0, (b * f - cc * e) / denom)) if denom > 1e-14 * a * e else 0.0
    t = (b * s + f) / e
    if t < 0.0:
        t = 0.0
        s = min(1.0, max(0.0, -cc / a))
    elif t > 1.0:
        t = 1.0
        s = min(1.0, max(0.0, (b - cc) / a))
    return _axpy(p0, s, d1), _axpy(q0, t, d2)


@inline
def _sphere_sphere(ca, ra, cb, rb, cand, k, margin):
    """Sphere (ca, ra) of a against sphere (cb, rb) of b: one contact on the line of centres."""
    d = _sub(ca, cb)
    dist = _norm(d)
    depth = ra + rb - dist
    normal = _mul(d, 1.0 / dist) if dist > 1e-12 * (ra + rb) else (0.0, 0.0, 1.0)
    point = _mul(_add(_axpy(ca, -ra, normal), _axpy(cb, rb, normal)), 0.5)
    return _add_candidate(cand, k, point, normal, depth, margin)


@internal
def _segment_ends(s):
    """The ends of a capsule's segment."""
    return _axpy(s[5], -s[1][1], s[4]), _axpy(s[5], s[1][1], s[4])


@internal
def _capsule_sphere(sa, sb, cand, margin):
    a0, a1 = _segment_ends(sa)
    return _sphere_sphere(_closest_on_segment(a0, a1, sb[5]), sa[1][0], sb[5], sb[1][0], cand, 0, margin)


@internal
def _capsule_capsule(sa, sb, cand, margin):
    """The nearest points of the two segments; parallel segments touch along their common
    stretch, so both its ends are contacts."""
    ra, rb = sa[1][0], sb[1][0]
    a0, a1 = _segment_ends(sa)
    b0, b1 = _segment_ends(sb)
    ea = _sub(a1, a0)
    eb = _sub(b1, b0)
    la2 = _dot(ea, ea)
    if la2 > 0.0 and _norm(_cross(ea, eb)) <= FEATURE_SIN * math.sqrt(la2) * _norm(eb):
        t0 = _dot(_sub(b0, a0), ea) / la2
        t1 = _dot(_sub(b1, a0), ea) / la2
        lo = max(0.0, min(t0, t1))
        hi = min(1.0, max(t0, t1))
        if (hi - lo) * math.sqrt(la2) > DUPLICATE_DIST:
            k = 0
            for t in (lo, hi):
                x = _axpy(a0, t, ea)
                k = _sphere_sphere(x, ra, _closest_on_segment(b0, b1, x), rb, cand, k, margin)
            return k
    x, y = _closest_segment_segment(a0, a1, b0, b1)
    return _sphere_sphere(x, ra, y, rb, cand, 0, margin)


@internal
def _box_sphere(sa, sb, cand, margin):
    """Box a, sphere b: the nearest box point outside the box; inside, the nearest face."""
    h = sa[1]
    cb, rb = sb[5], sb[1][0]
    x = _dir_local(sa, _sub(cb, sa[5]))       # the sphere's centre in the box frame
    q = (min(h[0], max(-h[0], x[0])), min(h[1], max(-h[1], x[1])), min(h[2], max(-h[2], x[2])))
    d = _sub(q, x)
    dist = _norm(d)
    if dist > 0.0:
        depth = rb - dist
        normal = _dir_world(sa, _mul(d, 1.0 / dist))   # from the sphere towards the box
        surface_a = _to_world(sa, q)
    else:
        k = 0
        for i in range(1, 3):
            if h[i] - abs(x[i]) < h[k] - abs(x[k]):
                k = i
        sign = 1.0 if x[k] >= 0.0 else -1.0
        depth = rb + h[k] - abs(x[k])
        normal = _mul(_axis(sa, k), -sign)       # push the box away from the centre's side
        face = (sign * h[0] if k == 0 else x[0], sign * h[1] if k == 1 else x[1],
                sign * h[2] if k == 2 else x[2])
        surface_a = _to_world(sa, face)
    point = _mul(_add(surface_a, _axpy(cb, rb, normal)), 0.5)
    return _add_candidate(cand, 0, point, normal, depth, margin)


# ------------------------------------------------------------------------ box-box ---
@internal
def _box_box(sa, sb, verts, feat, poly, cand, margin):
    """Separating axis test over the 3 + 3 face normals and the 9 edge cross products; the
    axis of least overlap (faces preferred by EDGE_AXIS_BIAS, as ODE) is the normal, then the
    features facing along it are clipped."""
    ha, hb = sa[1], sb[1]
    d = _sub(sa[5], sb[5])
    best_face, face_axis = np.inf, (0.0, 0.0, 1.0)
    best_edge, edge_axis = np.inf, (0.0, 0.0, 1.0)
    for m in range(15):
        if m < 3:
            axis = _axis(sa, m)
        elif m < 6:
            axis = _axis(sb, m - 3)
        else:
            axis = _cross(_axis(sa, (m - 6) // 3), _axis(sb, (m - 6) % 3))
            la = _norm(axis)
            if la < 1e-6:          # parallel edges: the face axes cover this direction
                continue
            axis = _mul(axis, 1.0 / la)
        reach = (ha[0] * abs(_dot(axis, sa[2])) + ha[1] * abs(_dot(axis, sa[3]))
                 + ha[2] * abs(_dot(axis, sa[4])) + hb[0] * abs(_dot(axis, sb[2]))
                 + hb[1] * abs(_dot(axis, sb[3])) + hb[2] * abs(_dot(axis, sb[4])))
        along = _dot(d, axis)
        overlap = reach - abs(along)
        if overlap <= -margin:
            return 0
        if along < 0.0:
            axis = _mul(axis, -1.0)
        if m < 6:
            if overlap < best_face:
                best_face, face_axis = overlap, axis
        elif overlap < best_edge:
            best_edge, edge_axis = overlap, axis
    if best_edge < best_face - EDGE_AXIS_BIAS * abs(best_face):
        depth, normal = best_edge, edge_axis
    else:
        depth, normal = best_face, face_axis
    k, na, nb = _feature_candidates(sa, sb, verts, feat, poly, cand, normal, margin)
    if k == 0 and depth > 0.0:     # a corner on an edge and the like: one point between them
        x = _row(feat, FEAT_A) if na == 1 else _axpy(_row(feat, FEAT_B), -depth, normal)
        k = _add_candidate(cand, k, _axpy(x, 0.5 * depth, normal), normal, depth, margin)
    return k


# ------------------------------------------------------------------------ GJK / EPA ---
# The GJK simplex rows hold (point of A - B, point of a, point of b, weight); a point of A - B
# is a support point of a minus one of b, so the weights give the nearest points of a and b.
@internal
def _closest_on_simplex_segment(S, i, j):
    """(count, i0, i1, l0, l1): the point of segment S[i]-S[j] nearest the origin."""
    a, b = _row(S, i), _row(S, j)
    ab = _sub(b, a)
    t = -_dot(a, ab)
    if t <= 0.0:
        return 1, i, j, 1.0, 0.0
    ll = _dot(ab, ab)
    if t >= ll:
        return 1, j, i, 1.0, 0.0
    t /= ll
    return 2, i, j, 1.0 - t, t


@internal
def _closest_on_simplex_triangle(S, i, j, m):
    """(count, (i0, i1, i2), (l0, l1, l2)): the point of triangle S[i] S[j] S[m] nearest the
    origin, by its Voronoi regions (Ericson, RTCD 5.1.5)."""
    a, b, cc = _row(S, i), _row(S, j), _row(S, m)
    ab = _sub(b, a)
    ac = _sub(cc, a)
    d1 = -_dot(ab, a)
    d2 = -_dot(ac, a)
    if d1 <= 0.0 and d2 <= 0.0:
        return 1, (i, j, m), (1.0, 0.0, 0.0)
    d3 = -_dot(ab, b)
    d4 = -_dot(ac, b)
    if d3 >= 0.0 and d4 <= d3:
        return 1, (j, i, m), (1.0, 0.0, 0.0)
    vc = d1 * d4 - d3 * d2
    if vc <= 0.0 and d1 >= 0.0 and d3 <= 0.0:
        v = d1 / (d1 - d3)
        return 2, (i, j, m), (1.0 - v, v, 0.0)
    d5 = -_dot(ab, cc)
    d6 = -_dot(ac, cc)
    if d6 >= 0.0 and d5 <= d6:
        return 1, (m, i, j), (1.0, 0.0, 0.0)
    vb = d5 * d2 - d1 * d6
    if vb <= 0.0 and d2 >= 0.0 and d6 <= 0.0:
        w = d2 / (d2 - d6)
        return 2, (i, m, j), (1.0 - w, w, 0.0)
    va = d3 * d6 - d5 * d4
    if va <= 0.0 and (d4 - d3) >= 0.0 and (d5 - d6) >= 0.0:
        w = (d4 - d3) / ((d4 - d3) + (d5 - d6))
        return 2, (j, m, i), (1.0 - w, w, 0.0)
    denom = 1.0 / (va + vb + vc)
    v = vb * denom
    w = vc * denom
    return 3, (i, j, m), (1.0 - v - w, v, w)


@inline
def _keep_simplex(S, count, idx, weights):
    """Compact the simplex to its rows idx[:count] with these weights; returns count."""
    i0, i1, i2 = idx
    l0, l1, l2 = weights
    # sort the kept rows so that moving them to the front never overwrites one still needed
    if count >= 2 and i1 < i0:
        i0, i1, l0, l1 = i1, i0, l1, l0
    if count == 3:
        if i2 < i1:
            i1, i2, l1, l2 = i2, i1, l2, l1
        if i1 < i0:
            i0, i1, l0, l1 = i1, i0, l1, l0
    for r, src in enumerate((i0, i1, i2)):
        if r < count:
            for m in range(9):
                S[r, m] = S[src, m]
    S[0, 9] = l0
    S[1, 9] = l1
    S[2, 9] = l2
    return count


@internal
def _reduce_simplex(S, n):
    """Replace the simplex S[:n] by its smallest sub-simplex that holds its point nearest the
    origin, with that point's weights; returns the new size (4: the origin is inside)."""
    if n == 1:
        S[0, 9] = 1.0
        return 1
    if n == 2:
        count, i0, i1, l0, l1 = _closest_on_simplex_segment(S, 0, 1)
        return _keep_simplex(S, count, (i0, i1, 0), (l0, l1, 0.0))
    if n == 3:
        count, idx, weights = _closest_on_simplex_triangle(S, 0, 1, 2)
        return _keep_simplex(S, count, idx, weights)
    # a tetrahedron: the nearest point of the faces the origin lies outside of
    best = np.inf
    best_count, best_idx, best_weights = 4, (0, 1, 2), (1.0, 0.0, 0.0)
    for f in range(4):
        i, j, m = (0, 1, 2) if f == 0 else ((0, 3, 1) if f == 1 else ((0, 2, 3) if f == 2 else (1, 3, 2)))
        a = _row(S, i)
        fn = _cross(_sub(_row(S, j), a), _sub(_row(S, m), a))
        to_opposite = _sub(_row(S, 6 - i - j - m), a)
        side_origin = -_dot(fn, a)
        side_opposite = _dot(fn, to_opposite)
        flat = abs(side_opposite) <= 1e-14 * _norm(fn) * _norm(to_opposite)
        if side_origin * side_opposite < 0.0 or flat:
            count, idx, weights = _closest_on_simplex_triangle(S, i, j, m)
            x = (0.0, 0.0, 0.0)
            for r in range(count):
                x = _axpy(x, weights[r], _row(S, idx[r]))
            dd = _dot(x, x)
            if dd < best:
                best, best_count, best_idx, best_weights = dd, count, idx, weights
    if best == np.inf:
        return 4
    return _keep_simplex(S, best_count, best_idx, best_weights)


@inline
def _simplex_point(S, n, col):
    """The weighted point of the simplex: of A - B (col 0), of a (3) or of b (6)."""
    x = (0.0, 0.0, 0.0)
    for r in range(n):
        x = _axpy(x, S[r, 9], _row(S, r, col))
    return x


GJK_FAR, GJK_SEPARATED, GJK_OVERLAP = 0, 1, 2


@internal
def _gjk(sa, sb, verts, S, far):
    """The distance between the cores of a and b by GJK on the Minkowski difference A - B.
    Returns (status, distance, nearest point of a, of b, simplex size): GJK_FAR once the
    distance is known to exceed `far`; GJK_OVERLAP (the simplex S left for EPA) when the
    cores overlap or touch."""
    scale = sa[8] + sb[8]
    v = _sub(sa[5], sb[5])
    if _dot(v, v) <= 0.0:
        v = (1.0, 0.0, 0.0)
    pa = _support(sa, verts, _mul(v, -1.0))
    pb = _support(sb, verts, v)
    _put(S, 0, _sub(pa, pb))
    _put(S, 0, pa, 3)
    _put(S, 0, pb, 6)
    S[0, 9] = 1.0
    n = 1
    v = _row(S, 0)
    vv = _dot(v, v)
    for _ in range(GJK_MAX_ITER):
        if vv <= (TOUCH_REL * scale) ** 2:
            return GJK_OVERLAP, 0.0, pa, pb, n
        pa = _support(sa, verts, _mul(v, -1.0))
        pb = _support(sb, verts, v)
        w = _sub(pa, pb)
        vw = _dot(v, w)
        if vw > 0.0 and vw * vw > far * far * vv:     # v.w / |v| bounds the distance from below
            return GJK_FAR, 0.0, pa, pb, n
        if vv - vw <= GJK_REL_TOL * vv:                # w adds nothing: v is the nearest point
            break
        _put(S, n, w)
        _put(S, n, pa, 3)
        _put(S, n, pb, 6)
        n = _reduce_simplex(S, n + 1)
        if n == 4:
            return GJK_OVERLAP, 0.0, pa, pb, n
        v = _simplex_point(S, n, 0)
        vv_new = _dot(v, v)
        if vv_new >= vv:                                # rounding: no more progress
            vv = vv_new
            break
        vv = vv_new
    return GJK_SEPARATED, math.sqrt(vv), _simplex_point(S, n, 3), _simplex_point(S, n, 6), n


# The EPA polytope: vertex rows of epa_vert (point of A - B, of a, of b), triangles in
# epa_index (vertex indices, alive flag) with their outward unit normal and distance from the
# origin in epa_face. Removed faces' rows are reused.
@inline
def _epa_vertex(sa, sb, verts, V, nv, d):
    """Add the support point of A - B along d to the polytope; returns the vertex count."""
    pa = _support(sa, verts, d)
    pb = _support(sb, verts, _mul(d, -1.0))
    _put(V, nv, _sub(pa, pb))
    _put(V, nv, pa, 3)
    _put(V, nv, pb, 6)
    return nv + 1


@inline
def _epa_set_face(V, F, FI, f, i, j, m):
    """Face f = (i, j, m) with its unit normal (right hand) and distance from the origin."""
    FI[f, 0] = i
    FI[f, 1] = j
    FI[f, 2] = m
    FI[f, 3] = 1
    a = _row(V, i)
    fn = _cross(_sub(_row(V, j), a), _sub(_row(V, m), a))
    ln = _norm(fn)
    if ln > 0.0:
        fn = _mul(fn, 1.0 / ln)
        _put(F, f, fn)
        F[f, 3] = _dot(fn, a)
    else:                      # a degenerate sliver: never the nearest face
        _put(F, f, (0.0, 0.0, 0.0))
        F[f, 3] = np.inf


@internal
def _epa_seed(sa, sb, verts, S, n, V, F, FI, scale):
    """The EPA start polytope from GJK's simplex S[:n], which holds the origin: grown to a
    tetrahedron by support points (a tetrahedron is always convex; the origin may lie on its
    boundary, EPA then pushes that face out first). Returns (vertices, faces), 0 faces if flat."""
    for r in range(n):
        for m in range(9):
            V[r, m] = S[r, m]
    tiny = 1e-9 * scale
    nv = n
    if nv == 1:                # grow a segment: the axis direction reaching farthest
        best, best_d = -1.0, (1.0, 0.0, 0.0)
        for k in range(6):
            sign = 1.0 if k % 2 == 0 else -1.0
            d = (sign if k // 2 == 0 else 0.0, sign if k // 2 == 1 else 0.0,
                 sign if k // 2 == 2 else 0.0)
            w = _sub(_support(sa, verts, d), _support(sb, verts, _mul(d, -1.0)))
            reach = _norm(_sub(w, _row(V, 0)))
            if reach > best:
                best, best_d = reach, d
        nv = _epa_vertex(sa, sb, verts, V, nv, best_d)
    if nv == 2:                # grow a triangle: the perpendicular reaching farthest off the line
        e = _sub(_row(V, 1), _row(V, 0))
        le = _norm(e)
        if le <= tiny:
            return nv, 0
        e = _mul(e, 1.0 / le)
        u = _perpendicular(e)
        v = _cross(e, u)
        best, best_d = -1.0, u
        for k in range(4):
            d = u if k == 0 else (v if k == 1 else (_mul(u, -1.0) if k == 2 else _mul(v, -1.0)))
            w = _sub(_support(sa, verts, d), _support(sb, verts, _mul(d, -1.0)))
            x = _sub(w, _row(V, 0))
            off = _norm(_axpy(x, -_dot(x, e), e))
            if off > best:
                best, best_d = off, d
        nv = _epa_vertex(sa, sb, verts, V, nv, best_d)
    if nv == 3:                # a tetrahedron: the apex reaching farther from the triangle's plane
        t = _cross(_sub(_row(V, 1), _row(V, 0)), _sub(_row(V, 2), _row(V, 0)))
        lt = _norm(t)
        if lt <= tiny * tiny:
            return nv, 0
        t = _mul(t, 1.0 / lt)
        nv = _epa_vertex(sa, sb, verts, V, nv, t)
        nv = _epa_vertex(sa, sb, verts, V, nv, _mul(t, -1.0))
        up = _dot(_sub(_row(V, 3), _row(V, 0)), t)
        down = -_dot(_sub(_row(V, 4), _row(V, 0)), t)
        if max(up, down) < tiny:
            return nv, 0       # flat: the shapes have no volume here
        if down > up:
            for m in range(9):
                V[3, m] = V[4, m]
        nv = 4
    centre = (0.0, 0.0, 0.0)
    for r in range(nv):
        centre = _axpy(centre, 1.0 / nv, _row(V, r))
    faces = ((0, 1, 2), (0, 3, 1), (0, 2, 3), (1, 3, 2))
    for f in range(4):         # every face turned outwards, seen from the centroid
        i, j, m = faces[f]
        _epa_set_face(V, F, FI, f, i, j, m)
        if F[f, 3] == np.inf:
            return nv, 0
        if _dot(_row(F, f), _sub(_row(V, i), centre)) < 0.0:
            _epa_set_face(V, F, FI, f, i, m, j)
    return nv, 4


@inline
def _epa_touches_rim(E, ne, FI, f):
    """Whether face f shares an edge with the removed region (it runs the other way there)."""
    for e in range(ne):
        for k in range(3):
            if FI[f, k] == E[e, 1] and FI[f, (k + 1) % 3] == E[e, 0]:
                return True
    return False


@inline
def _epa_add_edge(E, ne, i, j):
    """Horizon bookkeeping: an edge shared by two removed faces cancels, the others stay."""
    for e in range(ne):
        if E[e, 0] == j and E[e, 1] == i:
            E[e, 0] = E[ne - 1, 0]
            E[e, 1] = E[ne - 1, 1]
            return ne - 1
    if ne < E.shape[0]:
        E[ne, 0] = i
        E[ne, 1] = j
        ne += 1
    return ne


@inline
def _epa_answer(V, F, FI, f):
    """(True, depth, normal from b into a, point of a, point of b) from face f: the origin's
    projection onto it, in barycentric coordinates of its vertices."""
    fn = _row(F, f)
    depth = F[f, 3]
    i, j, m = FI[f, 0], FI[f, 1], FI[f, 2]
    x = _mul(fn, depth)
    w0, w1, w2 = _row(V, i), _row(V, j), _row(V, m)
    area = _dot(_cross(_sub(w1, w0), _sub(w2, w0)), fn)
    l1 = _dot(_cross(_sub(x, w0), _sub(w2, w0)), fn) / area
    l2 = _dot(_cross(_sub(w1, w0), _sub(x, w0)), fn) / area
    l0 = 1.0 - l1 - l2
    pa = _axpy(_axpy(_mul(_row(V, i, 3), l0), l1, _row(V, j, 3)), l2, _row(V, m, 3))
    pb = _axpy(_axpy(_mul(_row(V, i, 6), l0), l1, _row(V, j, 6)), l2, _row(V, m, 6))
    # A - B ends at distance depth along fn: moving a by depth along -fn separates the pair
    return True, depth, _mul(fn, -1.0), pa, pb


@internal
def _epa(sa, sb, verts, S, n, V, F, FI, E):
    """The penetration of the overlapping cores by the expanding polytope algorithm, from
    GJK's simplex. Returns (ok, depth, normal from b into a, point of a, point of b).

    Each round answers from the nearest face, then pushes that face out to the support point.
    Rounding can break the polytope when it hugs a curved surface closely; a round that leaves
    it other than a closed convex triangulation (2V - 4 faces, the nearest face no nearer) ends
    the search with the last good answer."""
    scale = sa[8] + sb[8]
    zero = (0.0, 0.0, 0.0)
    answer = (False, 0.0, zero, zero, zero)
    nv, nf = _epa_seed(sa, sb, verts, S, n, V, F, FI, scale)
    nalive = nf
    last = -np.inf
    for _ in range(EPA_MAX_VERTS):
        best = -1
        for f in range(nf):
            if FI[f, 3] and (best < 0 or F[f, 3] < F[best, 3]):
                best = f
        if best < 0 or F[best, 3] < last - 1e-12 * scale:
            break
        last = F[best, 3]
        answer = _epa_answer(V, F, FI, best)
        if nv >= EPA_MAX_VERTS:
            break
        fn = _row(F, best)
        new = nv
        nv = _epa_vertex(sa, sb, verts, V, nv, fn)
        w = _row(V, new)
        if _dot(w, fn) - F[best, 3] <= EPA_REL_TOL * scale:
            break              # the nearest face is on the boundary of A - B
        # remove the faces the new vertex sees, grown from the nearest face across shared
        # edges so that the removed region stays one piece; E keeps its rim (the horizon)
        ne = 0
        FI[best, 3] = 0
        nalive -= 1
        for e in range(3):
            ne = _epa_add_edge(E, ne, FI[best, e], FI[best, (e + 1) % 3])
        grown = True
        while grown:
            grown = False
            for f in range(nf):
                if FI[f, 3] and _epa_touches_rim(E, ne, FI, f) and \
                        _dot(_row(F, f), _sub(w, _row(V, FI[f, 0]))) > 1e-14 * scale:
                    FI[f, 3] = 0
                    nalive -= 1
                    for e in range(3):
                        ne = _epa_add_edge(E, ne, FI[f, e], FI[f, (e + 1) % 3])
                    grown = True
        f = 0
        for e in range(ne):    # cone the rim to the new vertex, reusing removed face rows
            while f < nf and FI[f, 3]:
                f += 1
            if f >= F.shape[0]:
                return answer
            _epa_set_face(V, F, FI, f, E[e, 0], E[e, 1], new)
            nalive += 1
            if f == nf:
                nf += 1
        if nalive != 2 * nv - 4:
            break
    return answer


@internal
def _convex_pair(sa, sb, verts, feat, poly, cand, S, V, F, FI, E, margin):
    """Any pair of convex geoms: GJK between their cores (a sphere's centre, a capsule's
    segment, the shape itself otherwise), EPA if the cores overlap, then feature clipping.
    The witness point is a contact too when clipping found nothing or it lies deeper."""
    ra, rb = _core_radius(sa), _core_radius(sb)
    far = margin + ra + rb
    status, dist, pa, pb, ns = _gjk(sa, sb, verts, S, far)
    if status == GJK_FAR:
        return 0
    if status == GJK_SEPARATED:
        if dist >= far:
            return 0
        normal = _mul(_sub(pa, pb), 1.0 / dist)
        depth = ra + rb - dist
    else:
        ok, depth, normal, pa, pb = _epa(sa, sb, verts, S, ns, V, F, FI, E)
        if not ok:
            return 0
        depth += ra + rb
    if depth <= -margin:
        return 0
    point = _mul(_add(_axpy(pa, -ra, normal), _axpy(pb, rb, normal)), 0.5)
    k, _, _ = _feature_candidates(sa, sb, verts, feat, poly, cand, normal, margin)
    deepest = -np.inf
    for i in range(k):
        deepest = max(deepest, cand[i, 6])
    if depth > deepest + 1e-9:
        k = _add_candidate(cand, k, point, normal, depth, margin)
    return k


# ----------------------------------------------------------------------- the pass ---
@internal
def _pair_candidates(sa, sb, verts, feat, poly, cand, S, V, F, FI, E, margin):
    """The contact candidates of geoms sa, sb (the kind of a >= the kind of b) in cand."""
    ka, kb = sa[0], sb[0]
    if kb == PLANE:
        return 0 if ka == PLANE else _plane_candidates(sa, sb, verts, cand, margin)
    if ka == SPHERE:
        return _sphere_sphere(sa[5], sa[1][0], sb[5], sb[1][0], cand, 0, margin)
    if ka == BOX and kb == SPHERE:
        return _box_sphere(sa, sb, cand, margin)
    if ka == BOX and kb == BOX:
        return _box_box(sa, sb, verts, feat, poly, cand, margin)
    if ka == CAPSULE and kb == SPHERE:
        return _capsule_sphere(sa, sb, cand, margin)
    if ka == CAPSULE and kb == CAPSULE:
        return _capsule_capsule(sa, sb, cand, margin)
    return _convex_pair(sa, sb, verts, feat, poly, cand, S, V, F, FI, E, margin)


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
        return _dot(_sub(sa[5], sb[5]), sb[4]) - sa[8] > margin
    d = _sub(sa[5], sb[5])
    reach = sa[8] + sb[8] + margin
    return (_dot(d, d) > reach * reach or abs(d[0]) > half_a[0] + half_b[0] + margin
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
        _put(c.geom_half, gi, _world_half_extents(_record(g, c, gi)))
    n = 0
    kind, pairs, half, cand = g.kind, g.pairs, c.geom_half, c.cand
    for p in range(pairs.shape[0]):
        i, j = pairs[p, 0], pairs[p, 1]
        flip = kind[i] < kind[j]        # the routines take the larger kind as a
        a, b = (j, i) if flip else (i, j)
        sa, sb = _record(g, c, a), _record(g, c, b)
        if sa[0] == PLANE or _bounds_apart(sa, sb, _row(half, a), _row(half, b), margin):
            continue
        k = _pair_candidates(sa, sb, g.verts, c.feat, c.poly, cand, c.simplex, c.epa_vert,
                             c.epa_face, c.epa_index, c.epa_edge, margin)
        sign = -1.0 if flip else 1.0    # rows name i as a: normals from j into i
        for r in _choose_manifold(cand, k):
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


# --------------------------------------------------------------------- Python side ---
class GeomSet:
    """The compiled geoms (buffers gf, gi and their views `geoms`), their names for messages
    and the contact capacity a workspace holds."""

    def __init__(self, gf, gi, names, link_names, ncand):
        self.gf, self.gi = gf, gi
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
    a link welded onto link2 has link2's parent for parent too."""
    body = compiled.tree.link_body
    group, parent_group = {}, {}
    for mi, model in enumerate(models):
        for joint in model.joints:      # depth-first: a parent is seen before its child
            k = compiled.link_index(mi, joint.child)
            parent = None if joint.parent is None else compiled.link_index(mi, joint.parent)
            if joint.type == "fixed" and parent is not None:
                group[k], parent_group[k] = group[parent], parent_group[parent]  # welded on
            else:
                group[k] = int(body[k]) if body[k] >= 0 else -1 - k
                parent_group[k] = None if parent is None else group[parent]
    return group, parent_group


def _pair_allowed(ka, kb, ma, mb, links, group, parent_group, body, models):
    """The static filters for geoms on compiled links ka, kb of models ma, mb."""
    if body[ka] < 0 and body[kb] < 0:
        return False                      # both welded to the world
    if group[ka] == group[kb]:
        return False                      # one rigid body (fixed joints)
    if parent_group[ka] == group[kb] or parent_group[kb] == group[ka]:
        return False                      # a link and its parent touch at their joint
    if ma == mb and body[ka] >= 0 and body[kb] >= 0 and not models[ma].self_collision:
        return False
    la, lb = links[ka], links[kb]
    return bool((la.collision_mask >> lb.collision_family) & 1 and (lb.collision_mask >> la.collision_family) & 1)


def compile_geoms(models, compiled, capacity=None) -> GeomSet:
    """One geom per collision Shape of every link of `models` (as compiled into `compiled`), and
    the candidate pairs that pass the static filters. capacity: contact rows of a workspace
    (default: MAX_MANIFOLD per pair, at most 16 per geom)."""
    if isinstance(models, Model):
        models = [models]
    models = list(models)
    body = compiled.tree.link_body
    group, parent_group = _rigid_groups(models, compiled)
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
    pairs = []
    for i in range(ng):
        for j in range(i + 1, ng):
            ki, kj = geoms[i][0], geoms[j][0]
            if geoms[i][3] == PLANE and geoms[j][3] == PLANE:
                continue
            if _pair_allowed(ki, kj, model_of[ki], model_of[kj], links, group, parent_group, body, models):
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
