"""cast_rays(): exact ray distances for range sensors, in numba.

Each ray is tested against every primitive whose bounding sphere it passes through (nearer
than the best hit so far), in that primitive's own frame: box (slabs), sphere, cylinder,
capsule and cone (closed forms: quadrics and caps), plane (the half-space z <= 0 of its frame)
and meshes (Moller-Trumbore on their triangles, both faces count). The analytic primitives are
solids seen from outside: a ray starting inside one does not see it (as the renderer, which
culls back faces); the first hit is where the ray enters a solid or crosses a mesh triangle.
"""
import numpy as np

from .._kernel_cache import kernel
from .scene import BOX, CAPSULE, CONE, CYLINDER, MESH, PLANE, SPHERE

INF = np.inf


def cast_rays(scene, origins, directions, max_distance, out=None, hit=None):
    """Distance along each ray (origins (n, 3), unit directions (n, 3), world frame) to the
    first surface of `scene` at its current link poses, or +inf when there is none within
    max_distance. Writes into out (n,) float64 (allocated if None) and returns it. hit (n,)
    int64, when given, receives the index of the primitive each ray hit (scene.prim_*), -1 for none."""
    origins = np.asarray(origins, float)
    directions = np.asarray(directions, float)
    n = len(origins)
    if origins.shape != (n, 3) or directions.shape != (n, 3):
        raise ValueError(f"cast_rays: origins and directions must both be (n, 3), got "
                         f"{origins.shape} and {directions.shape}")
    if out is None:
        out = np.empty(n)
    if out.shape != (n,) or out.dtype != np.float64:
        raise ValueError(f"cast_rays: out must be a float64 array of shape ({n},)")
    if hit is None:
        hit = np.empty(0, np.int64)
    elif hit.shape != (n,) or hit.dtype != np.int64:
        raise ValueError(f"cast_rays: hit must be an int64 array of shape ({n},)")
    cast_kernel(scene.prim_kind, scene.prim_link, scene.prim_R, scene.prim_p, scene.prim_size,
                scene.prim_center, scene.prim_bound, scene.prim_tris, scene.vertices, scene.triangles,
                scene.link_R, scene.link_p, scene.prim_Rw, scene.prim_pw, scene.prim_cw,
                origins, directions, float(max_distance), out, hit)
    return out


@kernel(python=False)
def _roots(a, b, c):
    """Real roots (t1 <= t2) of a t^2 + 2 b t + c = 0, or (inf, inf); a linear equation's one
    root twice. Stable form: no cancellation when a ray is nearly parallel to an axis."""
    if a == 0.0:
        if b == 0.0:
            return INF, INF
        t = -c / (2.0 * b)
        return t, t
    disc = b * b - a * c
    if disc < 0.0:
        return INF, INF
    q = -(b + np.sqrt(disc)) if b >= 0.0 else -(b - np.sqrt(disc))
    if q == 0.0:
        return 0.0, 0.0
    t1, t2 = q / a, c / q
    return (t1, t2) if t1 <= t2 else (t2, t1)


@kernel(python=False)
def _box(ox, oy, oz, dx, dy, dz, hx, hy, hz):
    tmin, tmax = -INF, INF
    for k in range(3):
        o = ox if k == 0 else (oy if k == 1 else oz)
        d = dx if k == 0 else (dy if k == 1 else dz)
        h = hx if k == 0 else (hy if k == 1 else hz)
        if d == 0.0:
            if o < -h or o > h:
                return INF
        else:
            t1 = (-h - o) / d
            t2 = (h - o) / d
            if t1 > t2:
                t1, t2 = t2, t1
            tmin = max(tmin, t1)
            tmax = min(tmax, t2)
    if tmin > tmax or tmin < 0.0:        # missed, behind, or starting inside
        return INF
    return tmin


@kernel(python=False)
def _sphere(ox, oy, oz, dx, dy, dz, r):
    c = ox * ox + oy * oy + oz * oz - r * r
    if c <= 0.0:
        return INF
    t1, t2 = _roots(dx * dx + dy * dy + dz * dz, ox * dx + oy * dy + oz * dz, c)
    return t1 if t1 >= 0.0 else INF


@kernel(python=False)
def _side(ox, oy, oz, dx, dy, dz, r, h, best):
    """Nearest t >= 0 on the side x^2 + y^2 = r^2, |z| <= h, below best."""
    t1, t2 = _roots(dx * dx + dy * dy, ox * dx + oy * dy, ox * ox + oy * oy - r * r)
    for t in (t1, t2):
        if 0.0 <= t < best and abs(oz + t * dz) <= h:
            best = t
    return best


@kernel(python=False)
def _disk(ox, oy, oz, dx, dy, dz, z0, r, best):
    """Nearest t >= 0 on the disk z = z0, x^2 + y^2 <= r^2, below best."""
    if dz != 0.0:
        t = (z0 - oz) / dz
        if 0.0 <= t < best:
            x, y = ox + t * dx, oy + t * dy
            if x * x + y * y <= r * r:
                return t
    return best


@kernel(python=False)
def _cylinder(ox, oy, oz, dx, dy, dz, r, h):
    if abs(oz) <= h and ox * ox + oy * oy <= r * r:
        return INF
    best = _side(ox, oy, oz, dx, dy, dz, r, h, INF)
    best = _disk(ox, oy, oz, dx, dy, dz, h, r, best)
    return _disk(ox, oy, oz, dx, dy, dz, -h, r, best)


@kernel(python=False)
def _capsule(ox, oy, oz, dx, dy, dz, r, h):
    zc = min(h, max(-h, oz))
    if ox * ox + oy * oy + (oz - zc) * (oz - zc) <= r * r:
        return INF
    # outside the union of the cylinder and the two end spheres: the first entry into any
    best = _side(ox, oy, oz, dx, dy, dz, r, h, INF)
    best = min(best, _sphere(ox, oy, oz - h, dx, dy, dz, r))
    return min(best, _sphere(ox, oy, oz + h, dx, dy, dz, r))


@kernel(python=False)
def _cone(ox, oy, oz, dx, dy, dz, r, h):
    """Apex at z = +h, base disk of radius r at z = -h."""
    k2 = (r / (2.0 * h)) ** 2
    w = h - oz
    if abs(oz) <= h and ox * ox + oy * oy <= k2 * w * w:
        return INF
    best = INF
    t1, t2 = _roots(dx * dx + dy * dy - k2 * dz * dz, ox * dx + oy * dy + k2 * w * dz,
                    ox * ox + oy * oy - k2 * w * w)
    for t in (t1, t2):
        if 0.0 <= t < best and abs(oz + t * dz) <= h:
            best = t
    return _disk(ox, oy, oz, dx, dy, dz, -h, r, best)


@kernel(python=False)
def _mesh(ox, oy, oz, dx, dy, dz, V, T, t0, t1, best):
    """Nearest crossing of triangles t0..t1-1 (either face), below best (Moller-Trumbore)."""
    for t in range(t0, t1):
        a, b, c = T[t, 0], T[t, 1], T[t, 2]
        e1x, e1y, e1z = V[b, 0] - V[a, 0], V[b, 1] - V[a, 1], V[b, 2] - V[a, 2]
        e2x, e2y, e2z = V[c, 0] - V[a, 0], V[c, 1] - V[a, 1], V[c, 2] - V[a, 2]
        px, py, pz = dy * e2z - dz * e2y, dz * e2x - dx * e2z, dx * e2y - dy * e2x
        det = e1x * px + e1y * py + e1z * pz
        if det == 0.0:
            continue
        inv = 1.0 / det
        sx, sy, sz = ox - V[a, 0], oy - V[a, 1], oz - V[a, 2]
        u = (sx * px + sy * py + sz * pz) * inv
        if u < 0.0 or u > 1.0:
            continue
        qx, qy, qz = sy * e1z - sz * e1y, sz * e1x - sx * e1z, sx * e1y - sy * e1x
        v = (dx * qx + dy * qy + dz * qz) * inv
        if v < 0.0 or u + v > 1.0:
            continue
        d = (e2x * qx + e2y * qy + e2z * qz) * inv
        if 0.0 <= d < best:
            best = d
    return best


@kernel()
def cast_kernel(kind, plink, pR, pp, size, center, bound, ptris, V, T, link_R, link_p,
                Rw, pw, cw, origins, dirs, max_distance, out, hit):
    """See cast_rays(). Rw, pw, cw: workspaces for the primitives' world poses and centres;
    hit: the primitive hit per ray (-1: none), or an empty array when not wanted."""
    npr = kind.shape[0]
    for j in range(npr):
        l = plink[j]
        for a in range(3):
            for b in range(3):
                Rw[j, a, b] = link_R[l, a, 0] * pR[j, 0, b] + link_R[l, a, 1] * pR[j, 1, b] + link_R[l, a, 2] * pR[j, 2, b]
            pw[j, a] = link_R[l, a, 0] * pp[j, 0] + link_R[l, a, 1] * pp[j, 1] + link_R[l, a, 2] * pp[j, 2] + link_p[l, a]
        for a in range(3):
            cw[j, a] = Rw[j, a, 0] * center[j, 0] + Rw[j, a, 1] * center[j, 1] + Rw[j, a, 2] * center[j, 2] + pw[j, a]
    for i in range(origins.shape[0]):
        ox, oy, oz = origins[i, 0], origins[i, 1], origins[i, 2]
        dx, dy, dz = dirs[i, 0], dirs[i, 1], dirs[i, 2]
        best = INF
        best_j = -1
        for j in range(npr):
            kd = kind[j]
            if kd != PLANE:             # bounding-sphere cull
                ex, ey, ez = cw[j, 0] - ox, cw[j, 1] - oy, cw[j, 2] - oz
                tc = ex * dx + ey * dy + ez * dz
                r = bound[j]
                if tc + r < 0.0 or tc - r > min(best, max_distance):
                    continue
                if ex * ex + ey * ey + ez * ez - tc * tc > r * r:
                    continue
            # the ray in the primitive's frame
            qx, qy, qz = ox - pw[j, 0], oy - pw[j, 1], oz - pw[j, 2]
            lx = Rw[j, 0, 0] * qx + Rw[j, 1, 0] * qy + Rw[j, 2, 0] * qz
            ly = Rw[j, 0, 1] * qx + Rw[j, 1, 1] * qy + Rw[j, 2, 1] * qz
            lz = Rw[j, 0, 2] * qx + Rw[j, 1, 2] * qy + Rw[j, 2, 2] * qz
            ux = Rw[j, 0, 0] * dx + Rw[j, 1, 0] * dy + Rw[j, 2, 0] * dz
            uy = Rw[j, 0, 1] * dx + Rw[j, 1, 1] * dy + Rw[j, 2, 1] * dz
            uz = Rw[j, 0, 2] * dx + Rw[j, 1, 2] * dy + Rw[j, 2, 2] * dz
            if kd == BOX:
                t = _box(lx, ly, lz, ux, uy, uz, size[j, 0], size[j, 1], size[j, 2])
            elif kd == SPHERE:
                t = _sphere(lx, ly, lz, ux, uy, uz, size[j, 0])
            elif kd == CYLINDER:
                t = _cylinder(lx, ly, lz, ux, uy, uz, size[j, 0], size[j, 1])
            elif kd == CAPSULE:
                t = _capsule(lx, ly, lz, ux, uy, uz, size[j, 0], size[j, 1])
            elif kd == CONE:
                t = _cone(lx, ly, lz, ux, uy, uz, size[j, 0], size[j, 1])
            elif kd == PLANE:
                t = -lz / uz if lz > 0.0 and uz < 0.0 else INF
            elif kd == MESH:
                t = _mesh(lx, ly, lz, ux, uy, uz, V, T, ptris[j, 0], ptris[j, 1], best)
            else:
                t = INF
            if t < best:
                best = t
                best_j = j
        out[i] = best if best <= max_distance else INF
        if hit.shape[0] > 0:
            hit[i] = best_j if best <= max_distance else -1
