"""The geom and contact buffers: shape kinds, the limits of the narrow phase, and the
`Geoms` and `Contacts` views that carve_geoms and carve_contacts cut from flat arrays."""
from __future__ import annotations

import math
from collections import namedtuple

from ..kernels import internal
from ..views import array_view


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


# Layouts: {field: length} in carve order, float and int buffer (as kernels.tree_layout).
def geom_layout(ng, nverts, npair):
    """carve_geoms' fields: (float {field: length}, int {field: length})."""
    floats = dict(R=9 * ng, p=3 * ng, size=3 * ng, friction=ng, restitution=ng, rbound=ng, verts=3 * nverts)
    ints = dict(header=4, kind=ng, link=ng, vert_start=ng, vert_count=ng, pairs=2 * npair)
    return floats, ints


def geom_sizes(ng, nverts, npair):
    """(float, int) buffer lengths that carve_geoms lays out."""
    floats, ints = geom_layout(ng, nverts, npair)
    return sum(floats.values()), sum(ints.values())


def contacts_layout(capacity, ng, ncand):
    """carve_contacts' fields: (float {field: length}, int {field: length})."""
    cap = capacity
    floats = dict(point=3 * cap, normal=3 * cap, depth=cap, mu=cap, restitution=cap, geom_R=9 * ng, geom_p=3 * ng,
                  geom_half=3 * ng, feat=6 * MAX_FEATURE, poly=6 * MAX_POLY, cand=7 * ncand, simplex=40,
                  epa_vert=9 * EPA_MAX_VERTS, epa_face=4 * EPA_MAX_FACES)
    ints = dict(header=3, link=2 * cap, geom=2 * cap, epa_index=4 * EPA_MAX_FACES, epa_edge=2 * EPA_MAX_EDGES)
    return floats, ints


def contacts_sizes(capacity, ng, ncand):
    """(float, int) buffer lengths that carve_contacts lays out."""
    floats, ints = contacts_layout(capacity, ng, ncand)
    return sum(floats.values()), sum(ints.values())


@internal
def carve_geoms(gf, gi):
    """The Geoms as views into gf and gi (header gi[:4] = ngeom, nverts, npair, capacity)."""
    ng, nverts, npair = gi[0], gi[1], gi[2]
    o = 0
    R = array_view(gf, o, (ng, 3, 3)); o += 9 * ng
    p = array_view(gf, o, (ng, 3)); o += 3 * ng
    size = array_view(gf, o, (ng, 3)); o += 3 * ng
    friction = array_view(gf, o, ng); o += ng
    restitution = array_view(gf, o, ng); o += ng
    rbound = array_view(gf, o, ng); o += ng
    verts = array_view(gf, o, (nverts, 3)); o += 3 * nverts
    k = 4
    kind = array_view(gi, k, ng); k += ng
    link = array_view(gi, k, ng); k += ng
    vert_start = array_view(gi, k, ng); k += ng
    vert_count = array_view(gi, k, ng); k += ng
    pairs = array_view(gi, k, (npair, 2)); k += 2 * npair
    g = Geoms(kind, link, vert_start, vert_count, R, p, size, friction, restitution, rbound,
              verts, pairs)
    return g, o, k


@internal
def carve_contacts(cf, ci):
    """The Contacts workspace as views into cf and ci (header ci[:3] = capacity, ngeom, ncand)."""
    cap, ng, ncand = ci[0], ci[1], ci[2]
    o = 0
    point = array_view(cf, o, (cap, 3)); o += 3 * cap
    normal = array_view(cf, o, (cap, 3)); o += 3 * cap
    depth = array_view(cf, o, cap); o += cap
    mu = array_view(cf, o, cap); o += cap
    restitution = array_view(cf, o, cap); o += cap
    geom_R = array_view(cf, o, (ng, 3, 3)); o += 9 * ng
    geom_p = array_view(cf, o, (ng, 3)); o += 3 * ng
    geom_half = array_view(cf, o, (ng, 3)); o += 3 * ng
    feat = array_view(cf, o, (2 * MAX_FEATURE, 3)); o += 6 * MAX_FEATURE
    poly = array_view(cf, o, (2 * MAX_POLY, 3)); o += 6 * MAX_POLY
    cand = array_view(cf, o, (ncand, 7)); o += 7 * ncand
    simplex = array_view(cf, o, (4, 10)); o += 40
    epa_vert = array_view(cf, o, (EPA_MAX_VERTS, 9)); o += 9 * EPA_MAX_VERTS
    epa_face = array_view(cf, o, (EPA_MAX_FACES, 4)); o += 4 * EPA_MAX_FACES
    k = 3
    link = array_view(ci, k, (cap, 2)); k += 2 * cap
    geom = array_view(ci, k, (cap, 2)); k += 2 * cap
    epa_index = array_view(ci, k, (EPA_MAX_FACES, 4)); k += 4 * EPA_MAX_FACES
    epa_edge = array_view(ci, k, (EPA_MAX_EDGES, 2)); k += 2 * EPA_MAX_EDGES
    c = Contacts(link, geom, point, normal, depth, mu, restitution, geom_R, geom_p, geom_half,
                 feat, poly, cand, simplex, epa_vert, epa_face, epa_index, epa_edge)
    return c, o, k



# How the narrow phase is called: routines take geom records (tuples, by value) and the few
# scratch arrays they use, never the Geoms/Contacts tuples (small arguments keep each routine's
# code short to compile). Each routine writes candidate contacts into `cand` and returns their
# count; collide() keeps at most MAX_MANIFOLD of them.
FEAT_A, FEAT_B = 0, MAX_FEATURE     # first rows of a's and b's features in `feat`
POLY_IN, POLY_OUT = 0, MAX_POLY     # first rows of the two clipping buffers in `poly`
