"""render(): a z-buffer rasterizer in numba (color + depth), analytic planes per pixel.

Camera: the OpenHRP/VRML camera frame looks along its -Z with +Y up and +X right. Pixel (u, v)
is column u, row v (row 0 at the top); its ray in the camera frame is ((u - cx) / f,
-(v - cy) / f, -1) with intrinsics() below, and pixels are sampled at those exact points.

Depth is the distance along the optical axis (camera -Z), REP 118: +inf where nothing lies
within [near, far]. Every triangle and plane carries the exact plane equation of its surface,
so its inverse depth is linear in (u, v): 1/d = (n . r(u, v)) / (n . P0) with n its normal and
P0 a point of it, both in the camera frame. That is the perspective-correct interpolation of
1/z, evaluated per pixel from the plane itself, so a planar face's depth is exact to rounding.
Triangles are clipped against the near plane (Sutherland-Hodgman, one plane) before they are
projected, so geometry behind the camera never wraps around; pixels beyond `far` are dropped.

Shading: flat Lambert per face with one directional light from the camera's upper-left-behind
(LIGHT, camera frame, toward the light) plus AMBIENT:
    value = round(255 * rgb * (AMBIENT + (1 - AMBIENT) * max(0, n . LIGHT)))
with n the face's unit normal turned toward the camera. Mono images hold the luminance
0.299 R + 0.587 G + 0.114 B of the same shaded color. Empty pixels show BACKGROUND.
"""
import numpy as np

from .._kernel_cache import kernel

AMBIENT = 0.3
LIGHT = np.array([-1.0, 1.0, 1.0]) / np.sqrt(3.0)      # camera frame: up-left-behind
BACKGROUND = np.array([178, 196, 214], np.uint8)       # a neutral grey-blue sky
LUMA = np.array([0.299, 0.587, 0.114])


def intrinsics(width, height, fov):
    """(fx, fy, cx, cy) of a camera whose field of view `fov` (radians) spans the shorter side."""
    f = 0.5 * min(width, height) / np.tan(0.5 * fov)
    return f, f, 0.5 * (width - 1), 0.5 * (height - 1)


def shade(rgb, normal, mono=False):
    """The uint8 value(s) render() gives a face of color `rgb` (0..1) whose unit normal, in the
    camera frame and turned toward the camera, is `normal`."""
    intensity = AMBIENT + (1.0 - AMBIENT) * max(0.0, float(np.dot(normal, LIGHT)))
    c = np.clip(np.asarray(rgb, float)[:3], 0.0, 1.0) * intensity
    if mono:
        return np.uint8(int(255.0 * float(LUMA @ c) + 0.5))
    return np.array([int(255.0 * x + 0.5) for x in c], np.uint8)


def render(scene, T_cam, width, height, fov, near, far, color=None, depth=None, mono=False):
    """Draw `scene` (at its current link poses) from the camera at world pose T_cam (4x4).

    Writes color (height, width, 3) uint8 RGB, or (height, width) uint8 luminance if mono, and
    depth (height, width) float32 metres along the optical axis, +inf where nothing is hit in
    [near, far]; allocates the buffers not given. Returns (color, depth). Not thread-safe per
    Scene: the scene holds the workspaces (two cameras in two threads need two Scenes).
    """
    width, height = int(width), int(height)
    if width <= 0 or height <= 0:
        raise ValueError(f"render: image size {width}x{height} must be positive")
    if not 0.0 < fov < np.pi:
        raise ValueError(f"render: field of view {fov} must be in (0, pi) radians")
    if not 0.0 < near < far:
        raise ValueError(f"render: need 0 < near < far, got near {near}, far {far}")
    shape = (height, width) if mono else (height, width, 3)
    if color is None:
        color = np.empty(shape, np.uint8)
    if depth is None:
        depth = np.empty((height, width), np.float32)
    if color.shape != shape or color.dtype != np.uint8 or not color.flags.c_contiguous:
        raise ValueError(f"render: color must be a C-contiguous uint8 array of shape {shape}")
    if depth.shape != (height, width) or depth.dtype != np.float32:
        raise ValueError(f"render: depth must be a float32 array of shape {(height, width)}")
    T_cam = np.asarray(T_cam, float)
    f, _, cx, cy = intrinsics(width, height, fov)
    bg = np.array([int(LUMA @ BACKGROUND + 0.5)], np.uint8) if mono else BACKGROUND
    render_kernel(scene.vertices, scene.vertex_link, scene.triangles, scene.triangle_color,
                  scene.triangle_two_sided, scene.planes, scene.prim_link, scene.prim_R,
                  scene.prim_p, scene.prim_color, scene.link_R, scene.link_p,
                  np.ascontiguousarray(T_cam[:3, :3]), np.ascontiguousarray(T_cam[:3, 3]),
                  f, cx, cy, float(near), float(far), LIGHT, AMBIENT, bg, mono,
                  scene.vertices_cam, scene.clip_polygon, scene.inverse_depth_buffer(height, width),
                  color.reshape(height, width, 1) if mono else color, depth)
    return color, depth


@kernel(python=False)
def _edge(px, py, qx, qy):
    """E(x, y) = (q - p) x ((x, y) - p) as (a, b, c) with E = a x + b y + c, computed from the
    lexicographically smaller end point so that the edge q -> p gives exactly -E: a pixel on
    an edge shared by two triangles is inside one of them (no cracks)."""
    swap = px > qx or (px == qx and py > qy)
    if swap:
        px, py, qx, qy = qx, qy, px, py
    a = py - qy
    b = qx - px
    c = -(a * px + b * py)
    if swap:
        return -a, -b, -c
    return a, b, c


@kernel(python=False)
def _fill(x0, y0, x1, y1, x2, y2, A, B, C, inv_lo, inv_hi, c0, c1, c2, invz, img):
    """Rasterize one screen triangle: each pixel centre inside (edges included) whose inverse
    depth A u + B v + C is in [inv_lo, inv_hi] and nearer than the z-buffer is written."""
    H, W = invz.shape
    nc = img.shape[2]
    a0, b0, e0 = _edge(x1, y1, x2, y2)
    a1, b1, e1 = _edge(x2, y2, x0, y0)
    a2, b2, e2 = _edge(x0, y0, x1, y1)
    area = a2 * x2 + b2 * y2 + e2
    if not area != 0.0 or not np.isfinite(area):
        return
    if area < 0.0:
        a0, b0, e0, a1, b1, e1, a2, b2, e2 = -a0, -b0, -e0, -a1, -b1, -e1, -a2, -b2, -e2
    fx0 = max(0.0, np.ceil(min(x0, min(x1, x2))))
    fx1 = min(W - 1.0, np.floor(max(x0, max(x1, x2))))
    fy0 = max(0.0, np.ceil(min(y0, min(y1, y2))))
    fy1 = min(H - 1.0, np.floor(max(y0, max(y1, y2))))
    if fx0 > fx1 or fy0 > fy1:
        return
    xmin, xmax, ymin, ymax = int(fx0), int(fx1), int(fy0), int(fy1)
    for y in range(ymin, ymax + 1):
        r0 = b0 * y + e0
        r1 = b1 * y + e1
        r2 = b2 * y + e2
        lo = fx0
        hi = fx1
        empty = False
        # the row's span from each edge, widened by a pixel: the exact test below decides
        if a0 > 0.0:
            lo = max(lo, -r0 / a0)
        elif a0 < 0.0:
            hi = min(hi, -r0 / a0)
        elif r0 < 0.0:
            empty = True
        if a1 > 0.0:
            lo = max(lo, -r1 / a1)
        elif a1 < 0.0:
            hi = min(hi, -r1 / a1)
        elif r1 < 0.0:
            empty = True
        if a2 > 0.0:
            lo = max(lo, -r2 / a2)
        elif a2 < 0.0:
            hi = min(hi, -r2 / a2)
        elif r2 < 0.0:
            empty = True
        if empty or lo > hi + 1.0:
            continue
        xs = max(xmin, int(np.ceil(lo)) - 1)
        xe = min(xmax, int(np.floor(hi)) + 1)
        zrow = B * y + C
        for x in range(xs, xe + 1):
            if a0 * x + r0 >= 0.0 and a1 * x + r1 >= 0.0 and a2 * x + r2 >= 0.0:
                iz = A * x + zrow
                if iz > invz[y, x] and iz >= inv_lo and iz <= inv_hi:
                    invz[y, x] = iz
                    img[y, x, 0] = c0
                    if nc == 3:
                        img[y, x, 1] = c1
                        img[y, x, 2] = c2


@kernel(python=False)
def _shade(r, g, b, nx, ny, nz, light, ambient, mono):
    """Flat Lambert shading of a face with unit normal n toward the camera: uint8 values."""
    cosl = nx * light[0] + ny * light[1] + nz * light[2]
    s = ambient + (1.0 - ambient) * max(0.0, cosl)
    if mono:
        lum = 255.0 * s * (0.299 * r + 0.587 * g + 0.114 * b)
        v = np.uint8(int(min(255.0, lum + 0.5)))
        return v, v, v
    return (np.uint8(int(min(255.0, 255.0 * r * s + 0.5))), np.uint8(int(min(255.0, 255.0 * g * s + 0.5))),
            np.uint8(int(min(255.0, 255.0 * b * s + 0.5))))


@kernel()
def render_kernel(V, vlink, T, tcol, two_sided, planes, plink, pR, pp, pcol, link_R, link_p,
                  Rc, pc, f, cx, cy, near, far, light, ambient, bg, mono, Vc, poly, invz, img, depth):
    """See render(). V: vertices in their link frames; Vc, poly, invz: workspaces; img
    (H, W, 3) or (H, W, 1); bg: the background value(s)."""
    H, W = invz.shape
    nc = img.shape[2]
    inv_near = 1.0 / near
    inv_hi = inv_near * (1.0 + 1e-12)         # clipped vertices lie on the near plane
    inv_lo = 1.0 / far if far < np.inf else 0.0
    # 1. vertices into the camera frame: Rc^T (R_l v + p_l - pc)
    for i in range(V.shape[0]):
        l = vlink[i]
        wx = link_R[l, 0, 0] * V[i, 0] + link_R[l, 0, 1] * V[i, 1] + link_R[l, 0, 2] * V[i, 2] + link_p[l, 0] - pc[0]
        wy = link_R[l, 1, 0] * V[i, 0] + link_R[l, 1, 1] * V[i, 1] + link_R[l, 1, 2] * V[i, 2] + link_p[l, 1] - pc[1]
        wz = link_R[l, 2, 0] * V[i, 0] + link_R[l, 2, 1] * V[i, 1] + link_R[l, 2, 2] * V[i, 2] + link_p[l, 2] - pc[2]
        Vc[i, 0] = Rc[0, 0] * wx + Rc[1, 0] * wy + Rc[2, 0] * wz
        Vc[i, 1] = Rc[0, 1] * wx + Rc[1, 1] * wy + Rc[2, 1] * wz
        Vc[i, 2] = Rc[0, 2] * wx + Rc[1, 2] * wy + Rc[2, 2] * wz
    # 2. clear
    for y in range(H):
        for x in range(W):
            invz[y, x] = 0.0
            for k in range(nc):
                img[y, x, k] = bg[k]
    # 3. planes, per pixel: the half-space z <= 0 of the plane's frame, seen from +z
    for jj in range(planes.shape[0]):
        j = planes[jj]
        l = plink[j]
        nwx = link_R[l, 0, 0] * pR[j, 0, 2] + link_R[l, 0, 1] * pR[j, 1, 2] + link_R[l, 0, 2] * pR[j, 2, 2]
        nwy = link_R[l, 1, 0] * pR[j, 0, 2] + link_R[l, 1, 1] * pR[j, 1, 2] + link_R[l, 1, 2] * pR[j, 2, 2]
        nwz = link_R[l, 2, 0] * pR[j, 0, 2] + link_R[l, 2, 1] * pR[j, 1, 2] + link_R[l, 2, 2] * pR[j, 2, 2]
        qx = link_R[l, 0, 0] * pp[j, 0] + link_R[l, 0, 1] * pp[j, 1] + link_R[l, 0, 2] * pp[j, 2] + link_p[l, 0] - pc[0]
        qy = link_R[l, 1, 0] * pp[j, 0] + link_R[l, 1, 1] * pp[j, 1] + link_R[l, 1, 2] * pp[j, 2] + link_p[l, 1] - pc[1]
        qz = link_R[l, 2, 0] * pp[j, 0] + link_R[l, 2, 1] * pp[j, 1] + link_R[l, 2, 2] * pp[j, 2] + link_p[l, 2] - pc[2]
        nx = Rc[0, 0] * nwx + Rc[1, 0] * nwy + Rc[2, 0] * nwz
        ny = Rc[0, 1] * nwx + Rc[1, 1] * nwy + Rc[2, 1] * nwz
        nz = Rc[0, 2] * nwx + Rc[1, 2] * nwy + Rc[2, 2] * nwz
        px = Rc[0, 0] * qx + Rc[1, 0] * qy + Rc[2, 0] * qz
        py = Rc[0, 1] * qx + Rc[1, 1] * qy + Rc[2, 1] * qz
        pz = Rc[0, 2] * qx + Rc[1, 2] * qy + Rc[2, 2] * qz
        kk = nx * px + ny * py + nz * pz
        if not kk < 0.0:            # the camera is on or under the plane
            continue
        nn = np.sqrt(nx * nx + ny * ny + nz * nz)
        c0, c1, c2 = _shade(pcol[j, 0], pcol[j, 1], pcol[j, 2], nx / nn, ny / nn, nz / nn, light, ambient, mono)
        A = nx / (f * kk)
        B = -ny / (f * kk)
        C = (-nz - nx * cx / f + ny * cy / f) / kk
        for y in range(H):
            zrow = B * y + C
            for x in range(W):
                iz = A * x + zrow
                if iz > invz[y, x] and iz >= inv_lo and iz <= inv_hi:
                    invz[y, x] = iz
                    img[y, x, 0] = c0
                    if nc == 3:
                        img[y, x, 1] = c1
                        img[y, x, 2] = c2
    # 4. triangles
    for t in range(T.shape[0]):
        i0, i1, i2 = T[t, 0], T[t, 1], T[t, 2]
        d0, d1, d2 = -Vc[i0, 2], -Vc[i1, 2], -Vc[i2, 2]
        if (d0 < near and d1 < near and d2 < near) or (d0 > far and d1 > far and d2 > far):
            continue
        ux, uy, uz = Vc[i1, 0] - Vc[i0, 0], Vc[i1, 1] - Vc[i0, 1], Vc[i1, 2] - Vc[i0, 2]
        wx, wy, wz = Vc[i2, 0] - Vc[i0, 0], Vc[i2, 1] - Vc[i0, 1], Vc[i2, 2] - Vc[i0, 2]
        nx, ny, nz = uy * wz - uz * wy, uz * wx - ux * wz, ux * wy - uy * wx
        kk = nx * Vc[i0, 0] + ny * Vc[i0, 1] + nz * Vc[i0, 2]     # n . P0; < 0: front face
        if kk >= 0.0:
            if kk == 0.0 or not two_sided[t]:
                continue              # edge-on, or the back of a one-sided face
            nx, ny, nz, kk = -nx, -ny, -nz, -kk
        nn = np.sqrt(nx * nx + ny * ny + nz * nz)
        c0, c1, c2 = _shade(tcol[t, 0], tcol[t, 1], tcol[t, 2], nx / nn, ny / nn, nz / nn, light, ambient, mono)
        A = nx / (f * kk)
        B = -ny / (f * kk)
        C = (-nz - nx * cx / f + ny * cy / f) / kk
        # clip against depth >= near, project; at most 4 vertices
        m = 0
        for e in range(3):
            ia = T[t, e]
            ib = T[t, (e + 1) % 3]
            da, db = -Vc[ia, 2], -Vc[ib, 2]
            if da >= near:
                poly[m, 0] = cx + f * Vc[ia, 0] / da
                poly[m, 1] = cy - f * Vc[ia, 1] / da
                m += 1
            if (da >= near) != (db >= near):
                if da >= near:             # from the vertex in front, as the neighbour does
                    ii, io, di, do = ia, ib, da, db
                else:
                    ii, io, di, do = ib, ia, db, da
                s = (di - near) / (di - do)
                X = Vc[ii, 0] + s * (Vc[io, 0] - Vc[ii, 0])
                Y = Vc[ii, 1] + s * (Vc[io, 1] - Vc[ii, 1])
                poly[m, 0] = cx + f * X / near
                poly[m, 1] = cy - f * Y / near
                m += 1
        for j in range(1, m - 1):
            _fill(poly[0, 0], poly[0, 1], poly[j, 0], poly[j, 1], poly[j + 1, 0], poly[j + 1, 1],
                  A, B, C, inv_lo, inv_hi, c0, c1, c2, invz, img)
    # 5. depth along the optical axis
    for y in range(H):
        for x in range(W):
            iz = invz[y, x]
            depth[y, x] = 1.0 / iz if iz > 0.0 else np.inf
