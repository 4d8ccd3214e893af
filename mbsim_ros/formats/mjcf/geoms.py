"""MJCF geoms and mesh assets -> Shapes and the mass properties MuJoCo gives a body from them.

Sizes follow MuJoCo: sphere (radius), capsule and cylinder (radius, half-length along z),
ellipsoid (three radii), box (three half-sizes), plane (half-sizes, 0 = infinite), mesh (an
asset); fromto on a capsule, cylinder, box or ellipsoid sets its pos, its z axis and its
half-length. Mass: `mass` when given, else `density` (1000) times the volume; meshes by their
enclosed volume (divergence theorem).
"""
from __future__ import annotations

import os
from math import sqrt

import numpy as np

from ...model import Shape
from ..meshes import MeshError, load_mesh
from .parse import z_to

GEOM_TYPES = ("plane", "hfield", "sphere", "capsule", "ellipsoid", "cylinder", "box", "mesh", "sdf")
_SIZES_NEEDED = {"sphere": 1, "capsule": 2, "cylinder": 2, "ellipsoid": 3, "box": 3}   # positive sizes per type


class Mesh:
    """A mesh asset: vertices (scaled, in the mesh's own frame) and triangles."""
    __slots__ = ("name", "path", "vertices", "faces", "scale", "inertia", "mass_properties")

    def __init__(self, name, path, vertices, faces, scale, inertia):
        self.name, self.path, self.vertices, self.faces, self.scale = name, path, vertices, faces, scale
        self.inertia = inertia
        self.mass_properties = None     # (volume, centroid, inertia) at density 1, once computed


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
                    vertices, faces = load_mesh(path, points=True)
                except MeshError as exc:
                    raise r.error(node, f"file=\"{file}\": {exc}") from None
                # MuJoCo keeps a file's vertices in single precision, then scales them
                vertices = vertices.astype(np.float32).astype(float) * scale
                if not len(faces):              # a point cloud: MuJoCo's mesh is its convex hull
                    faces = hull_faces(r, node, vertices)
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
                    faces = hull_faces(r, node, vertices)
                path = None
            elif node.each("plugin") or "builtin" in a:
                how = f"builtin=\"{a['builtin']}\"" if "builtin" in a else "a plugin"
                r.note(node, f"a mesh made by {how} is not built here: the geoms on it are left out")
                r.unbuilt_meshes.add(name)
                continue
            else:
                raise r.error(node, "a mesh needs file=\"...\", vertex=\"...\", builtin=\"...\" or a <plugin>")
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


def hull_faces(r, node, vertices):
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
    """One geom as read; its pose (`T` @ pos and quat or rows), Shape and mass properties are
    computed for all geoms of the model at once (masses.py, geom_shapes)."""
    __slots__ = ("node", "kind", "size", "pos", "quat", "rows", "T", "mesh", "name", "group", "contype",
                 "conaffinity", "friction", "rgba", "inertial", "mass", "density", "link", "body", "shape")


def read_geom(r, node, cls, T_in_body, meshes):
    """The Geom of a <geom> in a frame at T_in_body in its body (None for a type not simulated)."""
    a = r.attrs(node, "geom", cls)
    kind = a.get("type", "sphere")
    if kind not in GEOM_TYPES:
        r.choice(node, a, "type", GEOM_TYPES, "sphere")         # (raises: names the types)
    if kind in ("hfield", "sdf") or (kind == "mesh" and a.get("mesh") in r.unbuilt_meshes):
        why = f"mesh \"{a['mesh']}\" is not built here" if kind == "mesh" else f"type=\"{kind}\" geoms are not supported"
        r.note(node, f"{why}: left out")
        r.skipped_geoms.add(a.get("name"))
        return None
    g = Geom()
    g.node, g.kind, g.T = node, kind, T_in_body
    size = r.numbers(node, a, "size", 3, (0.0, 0.0, 0.0), nmin=1)
    size += [0.0] * (3 - len(size))
    if "fromto" in a:
        if kind not in ("capsule", "cylinder", "box", "ellipsoid"):
            raise r.error(node, f"fromto on a {kind}: expected a capsule, cylinder, box or ellipsoid")
        ft = r.numbers(node, a, "fromto", 6)
        d = np.array(ft[3:]) - ft[:3]
        length = sqrt(d.dot(d))
        if length < 1e-12:
            raise r.error(node, f"fromto=\"{a['fromto']}\": both ends are the same point")
        g.quat, g.rows = None, z_to(d / length).tolist()
        g.pos = [0.5 * (ft[0] + ft[3]), 0.5 * (ft[1] + ft[4]), 0.5 * (ft[2] + ft[5])]
        size[2 if kind in ("box", "ellipsoid") else 1] = 0.5 * length
    else:
        g.quat, g.rows = r.orientation(node, a)
        g.pos = r.numbers(node, a, "pos", 3) if "pos" in a else None
    need = _SIZES_NEEDED.get(kind, 0)
    if need and not min(size[:need]) > 0:       # (finite: numbers refuses others)
        raise r.error(node, f"size=\"{a.get('size', '')}\": a {kind} needs {need} positive size numbers")
    g.size = size
    g.mesh = None
    if kind == "mesh":
        mname = a.get("mesh")
        if mname is None or mname not in meshes:
            raise r.error(node, f"mesh=\"{mname}\": expected the name of an <asset><mesh>")
        g.mesh = meshes[mname]
    g.name = a.get("name", "")
    # (an absent attribute is its default: most are, and so skip their readers)
    g.group = r.ints(node, a, "group", 0) if "group" in a else 0
    g.contype = r.ints(node, a, "contype", 1) if "contype" in a else 1
    g.conaffinity = r.ints(node, a, "conaffinity", 1) if "conaffinity" in a else 1
    g.friction = r.numbers(node, a, "friction", 3, nmin=1)[0] if "friction" in a else 1.0
    g.rgba = r.floats(node, a, "rgba", 4) if "rgba" in a else None
    lo, hi = r.compiler.inertiagrouprange
    g.inertial = kind != "plane" and lo <= g.group <= hi
    g.mass = g.density = None
    if g.inertial:
        if "shellinertia" in a and r.flag(node, a, "shellinertia", False):
            r.note(node, "shellinertia=\"true\": the geom's inertia is taken as a solid's")
        if "mass" in a:
            g.mass = r.number(node, a, "mass")
            if g.mass < 0:
                raise r.error(node, f"mass {g.mass:g}: expected >= 0")
        else:
            g.density = r.number(node, a, "density") if "density" in a else 1000.0
    return g


def geom_shapes(geoms, poses):
    """Each geom's Shape (Geom.shape) at its pose (poses: (n, 4, 4) in the bodies' frames)."""
    for g, pose in zip(geoms, poses):
        shape = _shape(g.kind, pose, g.size, g.mesh, g.name)
        shape.friction = g.friction
        if g.rgba is not None:
            shape.color = g.rgba
        shape.contype, shape.conaffinity = g.contype, g.conaffinity
        g.shape = shape


def _shape(kind, pose, size, mesh, name):
    if kind == "sphere":
        return Shape("sphere", pose=pose, radius=size[0], name=name)
    if kind in ("capsule", "cylinder"):
        return Shape(kind, pose=pose, radius=size[0], length=2 * size[1], name=name)
    if kind in ("box", "plane"):
        return Shape(kind, pose=pose, size=np.array([2 * size[0], 2 * size[1], 2 * size[2]]), name=name)
    if kind == "ellipsoid":
        v, f = _unit_sphere_mesh()
        return Shape("mesh", pose=pose, vertices=v * size, faces=f, name=name)
    return Shape("mesh", pose=pose, vertices=mesh.vertices, faces=mesh.faces, mesh_path=mesh.path,
                 scale=mesh.scale, name=name)


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
