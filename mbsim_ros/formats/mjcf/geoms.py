"""MJCF geoms and mesh assets -> Shapes and the mass properties MuJoCo gives a body from them.

Sizes follow MuJoCo: sphere (radius), capsule and cylinder (radius, half-length along z),
ellipsoid (three radii), box (three half-sizes), plane (half-sizes, 0 = infinite), mesh (an
asset); fromto on a capsule, cylinder, box or ellipsoid sets its pos, its z axis and its
half-length. Mass: `mass` when given, else `density` (1000) times the volume; meshes by their
enclosed volume (divergence theorem).
"""
from __future__ import annotations

import os

import numpy as np

from ...model import Shape
from ..meshes import MeshError, load_mesh
from .parse import EYE3, EYE4, compose, z_to

GEOM_TYPES = ("plane", "hfield", "sphere", "capsule", "ellipsoid", "cylinder", "box", "mesh", "sdf")
_SIZES_NEEDED = {"sphere": 1, "capsule": 2, "cylinder": 2, "ellipsoid": 3, "box": 3}   # positive sizes per type


class Mesh:
    """A mesh asset: vertices (scaled, in the mesh's own frame) and triangles."""
    __slots__ = ("name", "path", "vertices", "faces", "scale", "inertia")

    def __init__(self, name, path, vertices, faces, scale, inertia):
        self.name, self.path, self.vertices, self.faces, self.scale = name, path, vertices, faces, scale
        self.inertia = inertia


def read_meshes(r, root):
    """{name: Mesh} of every <asset><mesh>."""
    meshes = {}
    for asset in root.each("asset"):
        for node in asset.each("mesh"):
            a = r.attrs(node, "mesh", "main")
            scale = r.floats(node, a, "scale", 3, [1.0, 1.0, 1.0])
            file = a.get("file")
            name = a.get("name") or (os.path.splitext(os.path.basename(file))[0] if file else None)
            if name is None:
                raise r.error(node, "a mesh needs name=\"...\" or file=\"...\"")
            if name in meshes:
                raise r.error(node, f"mesh \"{name}\" is defined twice")
            if file:
                path = os.path.join(r.folder, r.compiler.meshdir, file)
                try:
                    vertices, faces = load_mesh(path)
                except MeshError as exc:
                    raise r.error(node, f"file=\"{file}\": {exc}") from None
                # MuJoCo keeps a file's vertices in single precision, then scales them
                vertices = vertices.astype(np.float32).astype(float) * scale
            elif "vertex" in a:
                vertices = r.floats(node, a, "vertex", 10 ** 9, nmin=12)
                if vertices.size % 3:
                    raise r.error(node, f"vertex: {vertices.size} numbers; expected x y z of each vertex")
                vertices = vertices.astype(np.float32).astype(float).reshape(-1, 3) * scale
                if "face" in a:
                    faces = r.floats(node, a, "face", 10 ** 9, nmin=3).astype(int)
                    if faces.size % 3 or faces.min() < 0 or faces.max() >= len(vertices):
                        raise r.error(node, f"face: expected vertex indices (0 to {len(vertices) - 1}), three per face")
                    faces = faces.reshape(-1, 3)
                else:
                    faces = _hull_faces(r, node, vertices)
                path = None
            else:
                raise r.error(node, "a mesh needs file=\"...\" or vertex=\"...\"")
            if "refpos" in a or "refquat" in a:
                raise r.error(node, "refpos/refquat (deprecated in MuJoCo) are not supported; move the "
                                    "vertices instead")
            inertia = r.choice(node, a, "inertia", ("legacy", "exact", "convex", "shell"), "legacy")
            if inertia == "shell":
                r.note(node, "inertia=\"shell\": the mesh's inertia is taken as a solid's (legacy)")
                inertia = "legacy"
            if np.prod(scale) < 0:
                faces = faces[:, [0, 2, 1]]       # a mirroring scale turns the faces inside out
            meshes[name] = Mesh(name, path, vertices, faces, scale, inertia)
    return meshes


def _hull_faces(r, node, vertices):
    try:
        from scipy.spatial import ConvexHull
    except ImportError:
        raise r.error(node, "a mesh of vertices without faces needs scipy for its convex hull") from None
    from scipy.spatial import QhullError
    if not np.all(np.isfinite(vertices)):
        raise r.error(node, "vertex: a coordinate is not finite (after scale); expected finite x y z")
    try:
        hull = ConvexHull(vertices)
    except QhullError as e:          # all vertices on a plane or a line, or too few
        raise r.error(node, f"vertex: no convex hull of these {len(vertices)} vertices "
                            f"({str(e).splitlines()[0]}); expected vertices that span a volume") from None
    faces = hull.simplices.copy()
    centre = vertices.mean(axis=0)
    for f in faces:                       # outward normals, as MuJoCo's hull
        a, b, c = vertices[f]
        if np.cross(b - a, c - a).dot(a - centre) < 0:
            f[1], f[2] = f[2], f[1]
    return faces


class Geom:
    """One geom read: its shape in the body frame, group, collision bits, mass properties."""
    __slots__ = ("shape", "group", "contype", "conaffinity", "mass", "com", "inertia", "name")


def read_geom(r, node, cls, T_in_body, meshes):
    a = r.attrs(node, "geom", cls)
    kind = r.choice(node, a, "type", GEOM_TYPES, "sphere")
    if kind in ("hfield", "sdf"):
        r.note(node, f"type=\"{kind}\" geoms are not supported: left out")
        r.skipped_geoms.add(a.get("name"))
        return None
    sizes = r.numbers(node, a, "size", 3, (0.0, 0.0, 0.0), nmin=1)
    sizes += [0.0] * (3 - len(sizes))
    size = np.array(sizes)
    pose = r.pose(node, a)
    if "fromto" in a:
        if kind not in ("capsule", "cylinder", "box", "ellipsoid"):
            raise r.error(node, f"fromto on a {kind}: expected a capsule, cylinder, box or ellipsoid")
        ft = r.floats(node, a, "fromto", 6)
        d = ft[3:] - ft[:3]
        length = np.linalg.norm(d)
        if length < 1e-12:
            raise r.error(node, f"fromto=\"{a['fromto']}\": both ends are the same point")
        pose = EYE4.copy()
        pose[:3, :3] = z_to(d / length)
        pose[:3, 3] = 0.5 * (ft[:3] + ft[3:])
        size[2 if kind in ("box", "ellipsoid") else 1] = 0.5 * length
    pose = compose(T_in_body, pose)
    need = _SIZES_NEEDED.get(kind, 0)
    if need and not min(size.tolist()[:need]) > 0:       # (finite: numbers refuses others)
        raise r.error(node, f"size=\"{a.get('size', '')}\": a {kind} needs {need} positive size numbers")
    mesh = None
    if kind == "mesh":
        mname = a.get("mesh")
        if mname is None or mname not in meshes:
            raise r.error(node, f"mesh=\"{mname}\": expected the name of an <asset><mesh>")
        mesh = meshes[mname]
    g = Geom()
    g.name = a.get("name", "")
    g.group = r.ints(node, a, "group", 0)
    g.contype = r.ints(node, a, "contype", 1)
    g.conaffinity = r.ints(node, a, "conaffinity", 1)
    g.shape = _shape(kind, pose, size, mesh, g.name)
    g.shape.friction = r.numbers(node, a, "friction", 3, nmin=1)[0] if "friction" in a else 1.0
    rgba = a.get("rgba")
    if rgba is not None:
        g.shape.color = r.floats(node, a, "rgba", 4)
    g.mass = None
    lo, hi = r.compiler.inertiagrouprange
    if kind != "plane" and lo <= g.group <= hi:
        if r.flag(node, a, "shellinertia", False):
            r.note(node, "shellinertia=\"true\": the geom's inertia is taken as a solid's")
        volume, com, inertia_unit = _unit_density(r, node, kind, size, mesh)
        if "mass" in a:
            m = r.number(node, a, "mass")
        else:
            m = r.number(node, a, "density", 1000.0) * volume
        if m < 0:
            raise r.error(node, f"mass {m:g}: expected >= 0")
        R = pose[:3, :3]
        g.mass = m
        g.com = pose[:3, :3] @ com + pose[:3, 3]
        g.inertia = R @ (inertia_unit * (m / volume if volume > 0 else 0.0)) @ R.T
    return g


def _shape(kind, pose, size, mesh, name):
    if kind == "sphere":
        return Shape("sphere", pose=pose, radius=size[0], name=name)
    if kind in ("capsule", "cylinder"):
        return Shape(kind, pose=pose, radius=size[0], length=2 * size[1], name=name)
    if kind == "box":
        return Shape("box", pose=pose, size=2 * size[:3], name=name)
    if kind == "plane":
        return Shape("plane", pose=pose, size=2 * size[:3], name=name)
    if kind == "ellipsoid":
        v, f = _unit_sphere_mesh()
        return Shape("mesh", pose=pose, vertices=v * size[:3], faces=f, name=name)
    return Shape("mesh", pose=pose, vertices=mesh.vertices, faces=mesh.faces, mesh_path=mesh.path,
                 scale=mesh.scale, name=name)


def _unit_density(r, node, kind, s, mesh):
    """(volume, com in the geom frame, inertia about the com for density 1) as MuJoCo computes."""
    pi = np.pi
    if kind == "sphere":
        v = 4 / 3 * pi * s[0] ** 3
        return v, np.zeros(3), EYE3.copy() * 0.4 * v * s[0] ** 2
    if kind == "capsule":
        rad, h = s[0], 2 * s[1]
        v = pi * rad * rad * h + 4 / 3 * pi * rad ** 3
        ms = 4 / 3 * pi * rad ** 3          # the two hemispheres
        mc = v - ms
        ixx = mc * (3 * rad * rad + h * h) / 12 + 0.4 * ms * rad * rad + ms * h * (3 * rad + 2 * h) / 8
        izz = mc * rad * rad / 2 + 0.4 * ms * rad * rad
        return v, np.zeros(3), _diag(ixx, ixx, izz)
    if kind == "cylinder":
        rad, h = s[0], 2 * s[1]
        v = pi * rad * rad * h
        ixx = v * (3 * rad * rad + h * h) / 12
        return v, np.zeros(3), _diag(ixx, ixx, v * rad * rad / 2)
    if kind == "ellipsoid":
        a, b, c = s
        v = 4 / 3 * pi * a * b * c
        return v, np.zeros(3), np.diag([v * (b * b + c * c), v * (a * a + c * c), v * (a * a + b * b)]) / 5
    if kind == "box":
        a, b, c = s
        v = 8 * a * b * c
        return v, np.zeros(3), np.diag([v * (b * b + c * c), v * (a * a + c * c), v * (a * a + b * b)]) / 3
    return mesh_mass_properties(r, node, mesh)


def _diag(x, y, z):
    """np.diag([x, y, z]) in one array construction."""
    return np.array([[x, 0.0, 0.0], [0.0, y, 0.0], [0.0, 0.0, z]])


def mesh_mass_properties(r, node, mesh):
    """Volume, centroid and inertia about it (density 1) of a mesh as MuJoCo computes them
    (user_mesh.cc): pyramids from the area-weighted face centroid give the volume and centroid,
    tetrahedra from the centroid the inertia. inertia="legacy" (MuJoCo's default) takes every
    pyramid's volume as positive, "exact" keeps its sign, "convex" uses the convex hull."""
    vertices, faces = mesh.vertices, mesh.faces
    if mesh.inertia == "convex":
        faces = _hull_faces(r, node, vertices)
    a, b, c = (vertices[faces[:, k]] for k in range(3))
    n = np.cross(b - a, c - a)
    length = np.linalg.norm(n, axis=1)
    area = np.where(length < 1e-15, 0.0, length / 2)
    unit = n / np.where(length < 1e-15, 1.0, length)[:, None]
    centre = (a + b + c) / 3
    if area.sum() < 1e-15:
        raise r.error(node, f"mesh \"{mesh.name}\" has no surface area")
    facecen = (area[:, None] * centre).sum(axis=0) / area.sum()
    vol = np.einsum("ij,ij->i", centre - facecen, unit) * area / 3
    if mesh.inertia == "legacy":
        vol = np.abs(vol)
    volume = vol.sum()
    if volume < 1e-15:
        raise r.error(node, f"mesh \"{mesh.name}\" encloses no volume ({volume:.3g} m^3; MuJoCo refuses it too)")
    com = (vol[:, None] * (0.75 * centre + 0.25 * facecen)).sum(axis=0) / volume
    D, E, F = a - com, b - com, c - com
    vol = np.einsum("ij,ij->i", (D + E + F) / 3, unit) * area / 3
    if mesh.inertia == "legacy":
        vol = np.abs(vol)
    P = np.zeros((3, 3))
    for i in range(3):
        for j in range(i, 3):
            P[i, j] = P[j, i] = (vol / 20 * (2 * (D[:, i] * D[:, j] + E[:, i] * E[:, j] + F[:, i] * F[:, j])
                                             + D[:, i] * E[:, j] + D[:, j] * E[:, i] + D[:, i] * F[:, j]
                                             + D[:, j] * F[:, i] + E[:, i] * F[:, j] + E[:, j] * F[:, i])).sum()
    inertia = np.trace(P) * EYE3.copy() - P
    return vol.sum(), com, inertia


_SPHERE = None


def _unit_sphere_mesh(n_lat=10, n_lon=16):
    global _SPHERE
    if _SPHERE is None:
        lat = np.linspace(0, np.pi, n_lat + 1)[1:-1]
        lon = np.linspace(0, 2 * np.pi, n_lon, endpoint=False)
        ring = np.stack([np.outer(np.sin(lat), np.cos(lon)), np.outer(np.sin(lat), np.sin(lon)),
                         np.outer(np.cos(lat), np.ones(n_lon))], axis=-1).reshape(-1, 3)
        v = np.vstack([[0, 0, 1], ring, [0, 0, -1]])
        faces = []
        for j in range(n_lon):
            k = (j + 1) % n_lon
            faces.append((0, 1 + j, 1 + k))
            base = 1 + (n_lat - 2) * n_lon
            faces.append((len(v) - 1, base + k, base + j))
        for i in range(n_lat - 2):
            for j in range(n_lon):
                k = (j + 1) % n_lon
                p, q = 1 + i * n_lon, 1 + (i + 1) * n_lon
                faces.append((p + j, q + j, q + k))
                faces.append((p + j, q + k, p + k))
        _SPHERE = (v, np.array(faces))
    return _SPHERE
