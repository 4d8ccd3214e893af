"""Scene: every shape of a world, once, as flat arrays the render and ray-cast kernels read.

Two forms of the same geometry:
  triangles  box, sphere, cylinder, capsule and cone tessellated (`segments` around the axis),
             and mesh faces, with vertices in their link's frame (the shape pose applied). The
             rasterizer draws these. Tessellated primitives are wound counter-clockwise seen from
             outside and are one-sided (back faces culled); mesh faces are two-sided.
  primitives box, sphere, cylinder, capsule, cone and plane as exact analytic shapes (pose in
             the link frame, half sizes, a bounding sphere), and meshes as a range of the
             triangles above. The ray caster reads these; the renderer draws the planes from
             them, per pixel (an infinite plane has no triangles).
Every analytic primitive is a solid seen from outside: a camera or a range sensor whose origin
is inside one (SR1's cameras sit inside their lens cylinders) sees through it, as with OpenGL's
back-face culling. A plane is the half-space below its shape frame's xy plane, seen from +z.

A link draws its visuals; a link with no visuals draws its collision shapes.
"""
from __future__ import annotations

import numpy as np

# primitive kinds, as the kernels know them (compiled into the numba kernels as constants: this
# file is part of the kernel cache's source digest because it says numba)
BOX, SPHERE, CYLINDER, CAPSULE, CONE, PLANE, MESH = range(7)
KIND = {"box": BOX, "sphere": SPHERE, "cylinder": CYLINDER, "capsule": CAPSULE, "cone": CONE,
        "plane": PLANE, "mesh": MESH}


class Scene:
    """The geometry of `models` with link k of `link_names` at the pose set by set_link_poses.

    `link_names` is the order of the pose arrays given to set_link_poses: that of
    compile_models(models).link_names (models in order, each model's links in tree order).
    """

    def __init__(self, models, link_names, segments: int = 24):
        from ..model import Model
        if isinstance(models, Model):
            models = [models]
        self.models = list(models)
        self.link_names = list(link_names)
        self.segments = int(max(3, segments))
        if len(set(self.link_names)) != len(self.link_names):
            raise ValueError("link_names has a name twice")
        verts, vlink, tris, tcolor, two_sided = [], [], [], [], []
        prims = []        # (kind, link, R, p, size(3), center(3), bound, tri0, tri1, color, laser_retro)
        nvert = ntri = 0
        seen = []
        for model in self.models:           # compile_models' order: models, then tree order
            if not model._finalized:
                model.finalize()
            for joint in model.joints:
                link = model.link(joint.child)
                k = len(seen)           # link k of the world, in compile_models order
                seen.append(link.name)
                for shape in (link.visuals or link.collisions):
                    kind = KIND[shape.kind]
                    R, p = shape.pose[:3, :3], shape.pose[:3, 3]
                    rgb = np.clip(np.asarray(shape.color, float).reshape(-1)[:3], 0.0, 1.0)
                    retro = float(getattr(shape, "laser_retro", 0.0))
                    size, bound = _primitive_size(shape)
                    if kind == MESH:
                        if shape.vertices is None or shape.faces is None or len(shape.faces) == 0:
                            continue
                        V = np.asarray(shape.vertices, float).reshape(-1, 3)
                        F = np.asarray(shape.faces, np.int64).reshape(-1, 3)
                        if F.min() < 0 or F.max() >= len(V) or not np.all(np.isfinite(V)):
                            raise ValueError(f"link {link.name!r}: a mesh with a face index out of "
                                             f"range or a non-finite vertex")    # the kernels do not check
                    elif kind == PLANE:
                        prims.append((kind, k, R, p, size, np.zeros(3), np.inf, 0, 0, rgb, retro))
                        continue
                    else:
                        if not bound > 0.0 or not np.all(np.isfinite(size)):   # nothing to see or hit
                            continue
                        V, F = tessellate(shape.kind, size, self.segments)
                    Vl = V @ R.T + p                          # into the link frame
                    t0 = ntri
                    verts.append(Vl)
                    vlink.append(np.full(len(Vl), k, np.int64))
                    tris.append(F + nvert)
                    tcolor.append(np.tile(rgb, (len(F), 1)))
                    two_sided.append(np.full(len(F), kind == MESH, np.bool_))
                    nvert += len(Vl)
                    ntri += len(F)
                    if kind == MESH:    # triangles already in the link frame: identity pose
                        lo, hi = Vl.min(axis=0), Vl.max(axis=0)
                        c = 0.5 * (lo + hi)
                        r = float(np.sqrt(((Vl - c) ** 2).sum(axis=1)).max())
                        prims.append((kind, k, np.eye(3), np.zeros(3), np.zeros(3), c, r, t0, ntri, rgb, retro))
                    else:
                        prims.append((kind, k, R, p, size, np.zeros(3), bound, t0, ntri, rgb, retro))
        # world names (model/names.py): the link's own, or "<entity>/<link>"
        if len(seen) != len(self.link_names) or any(n != b and not n.endswith("/" + b)
                                                    for n, b in zip(self.link_names, seen)):
            raise ValueError("link_names does not list the models' links in compile_models order")
        self.vertices = _cat(verts, (0, 3), float)           # (nv, 3) in the link frame
        self.vertex_link = _cat(vlink, (0,), np.int64)       # (nv,)
        self.triangles = _cat(tris, (0, 3), np.int64)        # (nt, 3) vertex indices
        self.triangle_color = _cat(tcolor, (0, 3), float)    # (nt, 3) RGB 0..1
        self.triangle_two_sided = _cat(two_sided, (0,), np.bool_)
        n = len(prims)
        self.prim_kind = np.array([x[0] for x in prims], np.int64).reshape(n)
        self.prim_link = np.array([x[1] for x in prims], np.int64).reshape(n)
        self.prim_R = np.array([x[2] for x in prims], float).reshape(n, 3, 3)
        self.prim_p = np.array([x[3] for x in prims], float).reshape(n, 3)
        self.prim_size = np.array([x[4] for x in prims], float).reshape(n, 3)
        self.prim_center = np.array([x[5] for x in prims], float).reshape(n, 3)
        self.prim_bound = np.array([x[6] for x in prims], float).reshape(n)
        self.prim_tris = np.array([[x[7], x[8]] for x in prims], np.int64).reshape(n, 2)
        self.prim_color = np.array([x[9] for x in prims], float).reshape(n, 3)
        self.prim_retro = np.array([x[10] for x in prims], float).reshape(n)   # what a ray hitting it reads
        self.planes = np.flatnonzero(self.prim_kind == PLANE).astype(np.int64)
        nl = len(self.link_names)
        self.link_R = np.tile(np.eye(3), (nl, 1, 1))
        self.link_p = np.zeros((nl, 3))
        # per-call workspaces, allocated once
        self.vertices_cam = np.zeros((len(self.vertices), 3))
        self.clip_polygon = np.zeros((4, 2))
        self.prim_Rw = np.zeros((n, 3, 3))
        self.prim_pw = np.zeros((n, 3))
        self.prim_cw = np.zeros((n, 3))
        self._inverse_depth = {}

    def set_link_poses(self, link_R, link_p):
        """World rotations (nl, 3, 3) and positions (nl, 3) of the links, in link_names order."""
        self.link_R[:] = link_R
        self.link_p[:] = link_p

    def link_transform(self, name) -> np.ndarray:
        """The current 4x4 world pose of a link."""
        k = self.link_names.index(name)
        T = np.eye(4)
        T[:3, :3], T[:3, 3] = self.link_R[k], self.link_p[k]
        return T

    def bounds(self, links=None):
        """(lo, hi) world corners of the box around the current triangles (planes excluded),
        of the links named in `links` if given; None when there is nothing."""
        if len(self.vertices) == 0:
            return None
        k = self.vertex_link
        W = np.einsum("nij,nj->ni", self.link_R[k], self.vertices) + self.link_p[k]
        if links is not None:
            keep = np.isin(k, [self.link_names.index(n) for n in links])
            if not keep.any():
                return None
            W = W[keep]
        return W.min(axis=0), W.max(axis=0)

    def inverse_depth_buffer(self, height, width):
        """A cached (height, width) float64 z-buffer for render()."""
        buf = self._inverse_depth.get((height, width))
        if buf is None:
            buf = self._inverse_depth[(height, width)] = np.zeros((height, width))
        return buf

    @property
    def triangle_count(self) -> int:
        return len(self.triangles)

    def __repr__(self):
        return (f"Scene({len(self.link_names)} links, {len(self.triangles)} triangles, "
                f"{len(self.prim_kind)} primitives, {len(self.planes)} planes)")


def _cat(parts, empty_shape, dtype):
    return np.ascontiguousarray(np.concatenate(parts), dtype=dtype) if parts else np.zeros(empty_shape, dtype)


def _primitive_size(shape):
    """(size for the kernels, bounding-sphere radius about the shape origin).

    box: half sizes; sphere: (r, 0, 0); cylinder, capsule, cone: (r, length/2, 0).
    (A zero radius, a box with no extent, or a cone of zero length: radius 0, nothing drawn.)"""
    kind = shape.kind
    if kind == "box":
        h = 0.5 * np.abs(np.asarray(shape.size, float))
        return h, float(np.linalg.norm(h))             # a flat box (one size 0) is a panel
    r = abs(float(shape.radius))
    h = 0.5 * abs(float(shape.length))
    if kind == "sphere":
        return np.array([r, 0.0, 0.0]), r
    if kind == "capsule":
        return np.array([r, h, 0.0]), r + h if r > 0 else 0.0
    if kind == "cylinder":                             # length 0: a disk
        return np.array([r, h, 0.0]), float(np.hypot(r, h)) if r > 0 else 0.0
    if kind == "cone":
        return np.array([r, h, 0.0]), float(np.hypot(r, h)) if r > 0 and h > 0 else 0.0
    return np.zeros(3), np.inf


def tessellate(kind, size, segments):
    """(vertices (n, 3), faces (m, 3)) of a primitive in its shape frame, outward winding.
    size as _primitive_size gives it."""
    if kind == "box":
        hx, hy, hz = size
        V = np.array([[x, y, z] for x in (-hx, hx) for y in (-hy, hy) for z in (-hz, hz)])
        # corners: index = 4 * (x > 0) + 2 * (y > 0) + (z > 0)
        F = np.array([[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5],     # -x, +x
                      [0, 4, 5], [0, 5, 1], [2, 3, 7], [2, 7, 6],     # -y, +y
                      [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]])    # -z, +z
        return V, F
    r, h = size[0], size[1]
    n = segments
    if kind == "sphere":
        phi = np.linspace(0.0, np.pi, max(2, n // 2) + 1)
        profile = np.c_[r * np.sin(phi), -r * np.cos(phi)]
    elif kind == "cylinder":
        profile = np.array([[0.0, -h], [r, -h], [r, h], [0.0, h]])
    elif kind == "cone":
        profile = np.array([[0.0, -h], [r, -h], [0.0, h]])
    elif kind == "capsule":
        phi = np.linspace(0.0, 0.5 * np.pi, max(1, n // 4) + 1)
        bottom = np.c_[r * np.sin(phi), -h - r * np.cos(phi)]
        top = np.c_[r * np.cos(phi), h + r * np.sin(phi)]
        profile = np.r_[bottom, top]
    else:
        raise ValueError(f"no tessellation for {kind!r}")
    profile[np.abs(profile[:, 0]) < 1e-15, 0] = 0.0
    return lathe(profile, n)


def lathe(profile, n):
    """The surface of revolution about z of a (radius, z) profile listed from bottom to top;
    points of radius 0 are poles (one vertex). Faces wound counter-clockwise from outside."""
    theta = 2.0 * np.pi * np.arange(n) / n
    c, s = np.cos(theta), np.sin(theta)
    V, rings = [], []
    for rad, z in profile:
        start = sum(len(v) for v in V)
        if rad == 0.0:
            V.append(np.array([[0.0, 0.0, z]]))
            rings.append(np.full(n, start))
        else:
            V.append(np.c_[rad * c, rad * s, np.full(n, z)])
            rings.append(start + np.arange(n))
    F = []
    for A, B in zip(rings[:-1], rings[1:]):
        for j in range(n):
            j1 = (j + 1) % n
            for tri in ((A[j], A[j1], B[j1]), (A[j], B[j1], B[j])):
                if len(set(tri)) == 3:
                    F.append(tri)
    return np.concatenate(V), np.array(F, np.int64)


def world_scene(models, q=None, segments: int = 24) -> Scene:
    """A Scene of `models` (a Model or a list) with the links at configuration q (the models'
    coordinates concatenated; default: each model's initial_q())."""
    from ..model import Model
    from ..dynamics import kernels
    from ..dynamics.compiled import compile_models
    if isinstance(models, Model):
        models = [models]
    models = list(models)
    c = compile_models(models)
    df, d = c.new_data()
    q = np.concatenate([m.initial_q() for m in models]) if q is None else np.asarray(q, float)
    v = np.zeros(c.nv)
    kernels.kinematics_kernel(c.tf, c.ti, df, q, v)
    scene = Scene(models, c.link_names, segments)
    scene.set_link_poses(d.link_R, d.link_p)
    return scene


def look_at(eye, target, up=(0.0, 0.0, 1.0)) -> np.ndarray:
    """The 4x4 world pose of a camera at `eye` looking at `target` (camera -Z toward it, +Y
    as close to `up` as it can be, +X to the right)."""
    eye, target, up = (np.asarray(x, float) for x in (eye, target, up))
    back = eye - target
    nb = np.linalg.norm(back)
    if not np.isfinite(nb) or nb == 0.0:
        raise ValueError("look_at: the eye and the target are the same point")
    z = back / nb
    x = np.cross(up, z)
    if np.linalg.norm(x) < 1e-9 * np.linalg.norm(up):        # looking along up: any right
        x = np.cross([0.0, 1.0, 0.0] if abs(z[1]) < 0.9 else [1.0, 0.0, 0.0], z)
    x /= np.linalg.norm(x)
    T = np.eye(4)
    T[:3, 0], T[:3, 1], T[:3, 2], T[:3, 3] = x, np.cross(z, x), z, eye
    return T


def framing_view(models, scene, fov):
    """(eye, target) of a view from the front-right (+x, -y), above, whose field of view `fov`
    fits the bounding sphere of the moving bodies at their current poses, or of every shape when
    nothing moves (framing a 10 m floor would leave the robots a few pixels tall)."""
    moving = []
    k = 0                 # the world's link index, in compile_models order (names may repeat across models)
    for model in models:
        moves = {}
        for joint in model.joints:
            moves[joint.child] = joint.type != "fixed" or moves.get(joint.parent, False)
            if moves[joint.child]:
                moving.append(scene.link_names[k])
            k += 1
    box = (scene.bounds(moving) if moving else None) or scene.bounds()
    if box is None:                               # only planes, or nothing at all
        return np.array([3.0, -3.0, 2.0]), np.zeros(3)
    lo, hi = box
    center, radius = 0.5 * (lo + hi), max(0.5 * float(np.linalg.norm(hi - lo)), 1e-3)
    direction = np.array([1.0, -1.0, 0.8]) / np.linalg.norm([1.0, -1.0, 0.8])
    return center + direction * 1.1 * radius / np.sin(0.5 * fov), center     # a 10 % margin


def sensor_pose(scene, sensor) -> np.ndarray:
    """World pose of a model's sensor: its link's world transform @ sensor.pose."""
    return scene.link_transform(sensor.link) @ np.asarray(sensor.pose, float)


def camera_parameters(sensor):
    """(width, height, fov, near, far) of an OpenHRP camera sensor, with OpenHRP's defaults."""
    p = sensor.params
    return (int(p.get("width", 320)), int(p.get("height", 240)), float(p.get("fieldOfView", 0.785398)),
            float(p.get("frontClipDistance", 0.01)), float(p.get("backClipDistance", 10.0)))


def lidar_directions(yaw, pitch) -> np.ndarray:
    """Unit ray directions (len(pitch) * len(yaw), 3) of a range sensor in its own (OpenHRP)
    frame, ring by ring (pitch outer, yaw inner). In the laser frame (x forward, y left, z up) a
    ray at yaw th and pitch ph is (cos ph cos th, cos ph sin th, sin ph); the sensor frame has
    x = -y_laser, y = z_laser, z = -x_laser (model.LASER_FRAME). Pitch 0 gives range_directions'
    rays."""
    th, ph = np.meshgrid(np.asarray(yaw, float), np.asarray(pitch, float))
    th, ph = th.ravel(), ph.ravel()
    return np.ascontiguousarray(np.c_[-np.cos(ph) * np.sin(th), np.sin(ph), -np.cos(ph) * np.cos(th)])


def range_directions(scan_angle, scan_step) -> np.ndarray:
    """Unit ray directions (n, 3) of an OpenHRP range sensor in its own frame: n =
    2 floor(scanAngle / 2 / scanStep) + 1 rays in the XZ plane, ray i along (-sin th, 0, -cos th)
    with th = (i - floor(n / 2)) scanStep."""
    half = int(np.floor(scan_angle / 2.0 / scan_step + 1e-9))
    th = (np.arange(2 * half + 1) - half) * scan_step
    return np.ascontiguousarray(np.c_[-np.sin(th), np.zeros_like(th), -np.cos(th)])
