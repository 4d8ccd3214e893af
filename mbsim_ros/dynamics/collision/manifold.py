"""Contact candidates and the manifold kept of them: at most MAX_MANIFOLD points per pair,
the deepest and then those spanning the largest area."""
from __future__ import annotations

from ..kernels import inline, internal
from .layout import DUPLICATE_DIST
from .vectors import cross, dot, norm, put, row, sub


# ------------------------------------------------------------- contact candidates ---
@inline
def add_candidate(cand, k, point, normal, depth, margin):
    """Keep a candidate (point, normal from b into a, depth) if it is within the margin and
    there is room; returns the count."""
    if depth <= -margin or k >= cand.shape[0]:
        return k
    put(cand, k, point)
    put(cand, k, normal, 3)
    cand[k, 6] = depth
    return k + 1


@internal
def choose_manifold(cand, k):
    """Indices (-1: none) of at most MAX_MANIFOLD = 4 of the k candidates: the deepest, the
    farthest from it, the one spanning the largest triangle with those two, and the one adding
    the most area outside that triangle. Repeated points and points on the line add nothing."""
    if k == 0:
        return -1, -1, -1, -1
    i0 = 0
    for i in range(1, k):
        if cand[i, 6] > cand[i0, 6]:
            i0 = i
    p0 = row(cand, i0)
    i1, best = -1, DUPLICATE_DIST
    for i in range(k):
        dist = norm(sub(row(cand, i), p0))
        if dist > best:
            i1, best = i, dist
    if i1 < 0:
        return i0, -1, -1, -1
    p1 = row(cand, i1)
    e01 = sub(p1, p0)
    i2, best = -1, DUPLICATE_DIST * norm(e01)
    for i in range(k):
        area2 = norm(cross(e01, sub(row(cand, i), p0)))
        if area2 > best:
            i2, best = i, area2
    if i2 < 0:
        return i0, i1, -1, -1
    p2 = row(cand, i2)
    t = cross(e01, sub(p2, p0))       # the triangle p0 p1 p2 turns counterclockwise about t
    tn = norm(t)
    i3, best = -1, 0.0
    for i in range(k):
        q = row(cand, i)
        outside = 0.0                   # twice the area q adds beyond the edge it is outside of
        for e in range(3):
            a = p0 if e == 0 else (p1 if e == 1 else p2)
            b = p1 if e == 0 else (p2 if e == 1 else p0)
            ab = sub(b, a)
            area2 = -dot(cross(ab, sub(q, a)), t) / tn
            if area2 > outside and area2 > DUPLICATE_DIST * norm(ab):
                outside = area2
        if outside > best:
            i3, best = i, outside
    return i0, i1, i2, i3
