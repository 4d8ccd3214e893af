"""3-vectors as tuples, and a geom as a record by value (kind, size, world axes and origin):
the small helpers every narrow-phase routine calls."""
from __future__ import annotations

import math

from ..kernels import inline, internal


# ------------------------------------------------------------ 3-vectors as tuples ---
# The helpers are kernels of their own, not inlined by numba: numba would re-process a helper's
# code at each of its hundreds of call sites (row and put: ~200 in the step, ~3 CPU s of a cold
# compile), while LLVM inlines the compiled helper for the same machine code.
@internal
def row(A, i, col=0):
    """A[i, col:col + 3] as a tuple."""
    return (A[i, col], A[i, col + 1], A[i, col + 2])


@internal
def put(A, i, x, col=0):
    """A[i, col:col + 3] = x."""
    A[i, col] = x[0]
    A[i, col + 1] = x[1]
    A[i, col + 2] = x[2]


@internal
def add(a, b):
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


@internal
def sub(a, b):
    return (a[0] - b[0], a[1] - b[1], a[2] - b[2])


@internal
def mul(a, s):
    return (a[0] * s, a[1] * s, a[2] * s)


@internal
def axpy(a, s, b):
    """a + s b"""
    return (a[0] + s * b[0], a[1] + s * b[1], a[2] + s * b[2])


@internal
def dot(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


@internal
def cross(a, b):
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


@internal
def norm(a):
    return math.sqrt(a[0] * a[0] + a[1] * a[1] + a[2] * a[2])


@internal
def perpendicular(n):
    """A unit vector perpendicular to the unit vector n."""
    if abs(n[0]) < 0.577:
        a = cross(n, (1.0, 0.0, 0.0))
    else:
        a = cross(n, (0.0, 1.0, 0.0))
    return mul(a, 1.0 / norm(a))


# ------------------------------------------------------------------ geom records ---
@inline
def geom_record(g, c, gi):
    """Geom gi by value: (kind, size, world axes ex, ey, ez, world origin, first vertex,
    vertex count, bounding radius)."""
    R = c.geom_R
    return (g.kind[gi], (g.size[gi, 0], g.size[gi, 1], g.size[gi, 2]),
            (R[gi, 0, 0], R[gi, 1, 0], R[gi, 2, 0]), (R[gi, 0, 1], R[gi, 1, 1], R[gi, 2, 1]),
            (R[gi, 0, 2], R[gi, 1, 2], R[gi, 2, 2]), (c.geom_p[gi, 0], c.geom_p[gi, 1], c.geom_p[gi, 2]),
            g.vert_start[gi], g.vert_count[gi], g.rbound[gi])


@internal
def geom_axis(s, k):
    """The geom's k-th axis in the world."""
    return s[2] if k == 0 else (s[3] if k == 1 else s[4])


@internal
def dir_world(s, x):
    """A direction given in the geom frame, in the world."""
    return axpy(axpy(mul(s[2], x[0]), x[1], s[3]), x[2], s[4])


@internal
def to_world(s, x):
    """A point given in the geom frame, in the world."""
    return add(s[5], dir_world(s, x))


@internal
def dir_local(s, d):
    """A world direction in the geom frame."""
    return (dot(s[2], d), dot(s[3], d), dot(s[4], d))
