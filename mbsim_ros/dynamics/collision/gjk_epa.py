"""Narrow phase for any pair of convex shapes: GJK distance between the cores, EPA when they
overlap, then feature clipping."""
from __future__ import annotations

import math

import numpy as np

from ..kernels import inline, internal
from .layout import EPA_MAX_VERTS, EPA_REL_TOL, GJK_MAX_ITER, GJK_REL_TOL, TOUCH_REL
from .vectors import add, axpy, cross, dot, mul, norm, perpendicular, put, row, sub
from .manifold import add_candidate
from .features import core_radius, feature_candidates, support


# ------------------------------------------------------------------------ GJK / EPA ---
# The GJK simplex rows hold (point of A - B, point of a, point of b, weight); a point of A - B
# is a support point of a minus one of b, so the weights give the nearest points of a and b.
@internal
def _closest_on_simplex_segment(S, i, j):
    """(count, i0, i1, l0, l1): the point of segment S[i]-S[j] nearest the origin."""
    a, b = row(S, i), row(S, j)
    ab = sub(b, a)
    t = -dot(a, ab)
    if t <= 0.0:
        return 1, i, j, 1.0, 0.0
    ll = dot(ab, ab)
    if t >= ll:
        return 1, j, i, 1.0, 0.0
    t /= ll
    return 2, i, j, 1.0 - t, t


@internal
def _closest_on_simplex_triangle(S, i, j, m):
    """(count, (i0, i1, i2), (l0, l1, l2)): the point of triangle S[i] S[j] S[m] nearest the
    origin, by its Voronoi regions (Ericson, RTCD 5.1.5)."""
    a, b, cc = row(S, i), row(S, j), row(S, m)
    ab = sub(b, a)
    ac = sub(cc, a)
    d1 = -dot(ab, a)
    d2 = -dot(ac, a)
    if d1 <= 0.0 and d2 <= 0.0:
        return 1, (i, j, m), (1.0, 0.0, 0.0)
    d3 = -dot(ab, b)
    d4 = -dot(ac, b)
    if d3 >= 0.0 and d4 <= d3:
        return 1, (j, i, m), (1.0, 0.0, 0.0)
    vc = d1 * d4 - d3 * d2
    if vc <= 0.0 and d1 >= 0.0 and d3 <= 0.0:
        v = d1 / (d1 - d3)
        return 2, (i, j, m), (1.0 - v, v, 0.0)
    d5 = -dot(ab, cc)
    d6 = -dot(ac, cc)
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
        a = row(S, i)
        fn = cross(sub(row(S, j), a), sub(row(S, m), a))
        to_opposite = sub(row(S, 6 - i - j - m), a)
        side_origin = -dot(fn, a)
        side_opposite = dot(fn, to_opposite)
        flat = abs(side_opposite) <= 1e-14 * norm(fn) * norm(to_opposite)
        if side_origin * side_opposite < 0.0 or flat:
            count, idx, weights = _closest_on_simplex_triangle(S, i, j, m)
            x = (0.0, 0.0, 0.0)
            for r in range(count):
                x = axpy(x, weights[r], row(S, idx[r]))
            dd = dot(x, x)
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
        x = axpy(x, S[r, 9], row(S, r, col))
    return x


GJK_FAR, GJK_SEPARATED, GJK_OVERLAP = 0, 1, 2


@internal
def _gjk(sa, sb, verts, S, far):
    """The distance between the cores of a and b by GJK on the Minkowski difference A - B.
    Returns (status, distance, nearest point of a, of b, simplex size): GJK_FAR once the
    distance is known to exceed `far`; GJK_OVERLAP (the simplex S left for EPA) when the
    cores overlap or touch."""
    scale = sa[8] + sb[8]
    v = sub(sa[5], sb[5])
    if dot(v, v) <= 0.0:
        v = (1.0, 0.0, 0.0)
    pa = support(sa, verts, mul(v, -1.0))
    pb = support(sb, verts, v)
    put(S, 0, sub(pa, pb))
    put(S, 0, pa, 3)
    put(S, 0, pb, 6)
    S[0, 9] = 1.0
    n = 1
    v = row(S, 0)
    vv = dot(v, v)
    for _ in range(GJK_MAX_ITER):
        if vv <= (TOUCH_REL * scale) ** 2:
            return GJK_OVERLAP, 0.0, pa, pb, n
        pa = support(sa, verts, mul(v, -1.0))
        pb = support(sb, verts, v)
        w = sub(pa, pb)
        vw = dot(v, w)
        if vw > 0.0 and vw * vw > far * far * vv:     # v.w / |v| bounds the distance from below
            return GJK_FAR, 0.0, pa, pb, n
        if vv - vw <= GJK_REL_TOL * vv:                # w adds nothing: v is the nearest point
            break
        put(S, n, w)
        put(S, n, pa, 3)
        put(S, n, pb, 6)
        n = _reduce_simplex(S, n + 1)
        if n == 4:
            return GJK_OVERLAP, 0.0, pa, pb, n
        v = _simplex_point(S, n, 0)
        vv_new = dot(v, v)
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
    pa = support(sa, verts, d)
    pb = support(sb, verts, mul(d, -1.0))
    put(V, nv, sub(pa, pb))
    put(V, nv, pa, 3)
    put(V, nv, pb, 6)
    return nv + 1


@inline
def _epa_set_face(V, F, FI, f, i, j, m):
    """Face f = (i, j, m) with its unit normal (right hand) and distance from the origin."""
    FI[f, 0] = i
    FI[f, 1] = j
    FI[f, 2] = m
    FI[f, 3] = 1
    a = row(V, i)
    fn = cross(sub(row(V, j), a), sub(row(V, m), a))
    ln = norm(fn)
    if ln > 0.0:
        fn = mul(fn, 1.0 / ln)
        put(F, f, fn)
        F[f, 3] = dot(fn, a)
    else:                      # a degenerate sliver: never the nearest face
        put(F, f, (0.0, 0.0, 0.0))
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
            w = sub(support(sa, verts, d), support(sb, verts, mul(d, -1.0)))
            reach = norm(sub(w, row(V, 0)))
            if reach > best:
                best, best_d = reach, d
        nv = _epa_vertex(sa, sb, verts, V, nv, best_d)
    if nv == 2:                # grow a triangle: the perpendicular reaching farthest off the line
        e = sub(row(V, 1), row(V, 0))
        le = norm(e)
        if le <= tiny:
            return nv, 0
        e = mul(e, 1.0 / le)
        u = perpendicular(e)
        v = cross(e, u)
        best, best_d = -1.0, u
        for k in range(4):
            d = u if k == 0 else (v if k == 1 else (mul(u, -1.0) if k == 2 else mul(v, -1.0)))
            w = sub(support(sa, verts, d), support(sb, verts, mul(d, -1.0)))
            x = sub(w, row(V, 0))
            off = norm(axpy(x, -dot(x, e), e))
            if off > best:
                best, best_d = off, d
        nv = _epa_vertex(sa, sb, verts, V, nv, best_d)
    if nv == 3:                # a tetrahedron: the apex reaching farther from the triangle's plane
        t = cross(sub(row(V, 1), row(V, 0)), sub(row(V, 2), row(V, 0)))
        lt = norm(t)
        if lt <= tiny * tiny:
            return nv, 0
        t = mul(t, 1.0 / lt)
        nv = _epa_vertex(sa, sb, verts, V, nv, t)
        nv = _epa_vertex(sa, sb, verts, V, nv, mul(t, -1.0))
        up = dot(sub(row(V, 3), row(V, 0)), t)
        down = -dot(sub(row(V, 4), row(V, 0)), t)
        if max(up, down) < tiny:
            return nv, 0       # flat: the shapes have no volume here
        if down > up:
            for m in range(9):
                V[3, m] = V[4, m]
        nv = 4
    centre = (0.0, 0.0, 0.0)
    for r in range(nv):
        centre = axpy(centre, 1.0 / nv, row(V, r))
    faces = ((0, 1, 2), (0, 3, 1), (0, 2, 3), (1, 3, 2))
    for f in range(4):         # every face turned outwards, seen from the centroid
        i, j, m = faces[f]
        _epa_set_face(V, F, FI, f, i, j, m)
        if F[f, 3] == np.inf:
            return nv, 0
        if dot(row(F, f), sub(row(V, i), centre)) < 0.0:
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
    fn = row(F, f)
    depth = F[f, 3]
    i, j, m = FI[f, 0], FI[f, 1], FI[f, 2]
    x = mul(fn, depth)
    w0, w1, w2 = row(V, i), row(V, j), row(V, m)
    area = dot(cross(sub(w1, w0), sub(w2, w0)), fn)
    l1 = dot(cross(sub(x, w0), sub(w2, w0)), fn) / area
    l2 = dot(cross(sub(w1, w0), sub(x, w0)), fn) / area
    l0 = 1.0 - l1 - l2
    pa = axpy(axpy(mul(row(V, i, 3), l0), l1, row(V, j, 3)), l2, row(V, m, 3))
    pb = axpy(axpy(mul(row(V, i, 6), l0), l1, row(V, j, 6)), l2, row(V, m, 6))
    # A - B ends at distance depth along fn: moving a by depth along -fn separates the pair
    return True, depth, mul(fn, -1.0), pa, pb


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
        fn = row(F, best)
        new = nv
        nv = _epa_vertex(sa, sb, verts, V, nv, fn)
        w = row(V, new)
        if dot(w, fn) - F[best, 3] <= EPA_REL_TOL * scale:
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
                        dot(row(F, f), sub(w, row(V, FI[f, 0]))) > 1e-14 * scale:
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
def convex_pair(sa, sb, verts, feat, poly, cand, S, V, F, FI, E, margin):
    """Any pair of convex geoms: GJK between their cores (a sphere's centre, a capsule's
    segment, the shape itself otherwise), EPA if the cores overlap, then feature clipping.
    The witness point is a contact too when clipping found nothing or it lies deeper."""
    ra, rb = core_radius(sa), core_radius(sb)
    far = margin + ra + rb
    status, dist, pa, pb, ns = _gjk(sa, sb, verts, S, far)
    if status == GJK_FAR:
        return 0
    if status == GJK_SEPARATED:
        if dist >= far:
            return 0
        normal = mul(sub(pa, pb), 1.0 / dist)
        depth = ra + rb - dist
    else:
        ok, depth, normal, pa, pb = _epa(sa, sb, verts, S, ns, V, F, FI, E)
        if not ok:
            return 0
        depth += ra + rb
    if depth <= -margin:
        return 0
    point = mul(add(axpy(pa, -ra, normal), axpy(pb, rb, normal)), 0.5)
    k, _, _ = feature_candidates(sa, sb, verts, feat, poly, cand, normal, margin)
    deepest = -np.inf
    for i in range(k):
        deepest = max(deepest, cand[i, 6])
    if depth > deepest + 1e-9:
        k = add_candidate(cand, k, point, normal, depth, margin)
    return k
