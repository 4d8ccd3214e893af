"""SDFormat <collision> and <visual> geometry -> Shapes: box, sphere, cylinder, capsule,
ellipsoid (a triangle mesh: the Model has no ellipsoid primitive), mesh (with scale), plane;
surface friction and restitution; the visual's material colour. heightmap, polyline and image
geometries are noted and skipped."""
from __future__ import annotations

import numpy as np

from ...model import Shape
from ...model.transforms import make_transform
from ..meshes import MeshError, load_mesh
from .document import child, local

DEFAULT_COLOR = (0.7, 0.7, 0.7, 1.0)
SKIPPED = ("heightmap", "polyline", "image", "empty")


def read_shape(reader, scope, el, link_name, visual):
    """The Shape of a <collision> or <visual> element, or None (a skipped geometry)."""
    geometry = child(el, "geometry")
    if geometry is None:
        reader.note(el, "no <geometry>: skipped")
        return None
    kinds = [g for g in geometry if isinstance(g.tag, str)]
    if len(kinds) > 1 and all(local(g) == "polyline" for g in kinds):
        kinds = kinds[:1]           # several polylines make one extruded shape
    if len(kinds) != 1:
        raise reader.error(geometry, f"expected one shape (box, sphere, cylinder, capsule, cone, ellipsoid, "
                                     f"mesh, plane), found {len(kinds)}")
    g = kinds[0]
    kind = local(g)
    pose = scope.element_pose(el, link_name)
    name = el.get("name") or ""
    if kind == "box":
        size = reader.numbers(g, "size", 3, [1, 1, 1])
        _positive(reader, g, size, "size")
        shape = Shape("box", pose=pose, size=size, name=name)
    elif kind == "sphere":
        shape = Shape("sphere", pose=pose, radius=reader.number(g, "radius", 1.0, positive=True), name=name)
    elif kind in ("cylinder", "capsule", "cone"):
        shape = Shape(kind, pose=pose, radius=reader.number(g, "radius", 0.5 if kind == "capsule" else 1.0,
                                                            positive=True),
                      length=reader.number(g, "length", 1.0, nonnegative=True), name=name)
    elif kind == "ellipsoid":
        radii = reader.numbers(g, "radii", 3, [1, 1, 1])
        _positive(reader, g, radii, "radii")
        vertices, faces = ellipsoid_mesh(radii)
        shape = Shape("mesh", pose=pose, vertices=vertices, faces=faces, name=name)
    elif kind == "plane":
        normal = reader.numbers(g, "normal", 3, [0, 0, 1])
        if np.linalg.norm(normal) < 1e-12:
            raise reader.error(child(g, "normal"), "a zero normal; expected a direction")
        shape = Shape("plane", pose=pose @ make_transform(_z_to(normal / np.linalg.norm(normal))), name=name)
    elif kind == "mesh":
        shape = _mesh(reader, scope, g, pose, name)
    elif kind in SKIPPED:
        reader.note(g, f"{kind} geometry is not simulated; this {local(el)} is skipped")
        return None
    else:
        raise reader.error(g, f"unknown geometry <{kind}>; expected box, sphere, cylinder, capsule, cone, "
                              "ellipsoid, mesh, plane (or heightmap, polyline, image: skipped)")
    shape.laser_retro = reader.number(el, "laser_retro", 0.0)
    if visual:
        shape.color = _color(reader, child(el, "material"))
    else:
        shape.friction, shape.restitution = _surface(reader, child(el, "surface"))
    return shape


def _positive(reader, el, values, what):
    if not np.all(values > 0):
        raise reader.error(el, f"{what} {values.tolist()}: expected numbers > 0")


def _z_to(n):
    """A rotation taking +z to the unit vector n."""
    z = np.array([0.0, 0.0, 1.0])
    v, c = np.cross(z, n), float(z @ n)
    if np.linalg.norm(v) < 1e-12:
        return np.eye(3) if c > 0 else np.diag([1.0, -1.0, -1.0])
    K = np.array([[0, -v[2], v[1]], [v[2], 0, -v[0]], [-v[1], v[0], 0]])
    return np.eye(3) + K + K @ K / (1.0 + c)


def _mesh(reader, scope, g, pose, name):
    uri = reader.text(g, "uri")
    if uri is None:
        raise reader.error(g, "missing <uri> (the mesh file)")
    scale = reader.numbers(g, "scale", 3, [1, 1, 1])
    if child(g, "submesh") is not None:
        reader.note(g, "<submesh>: the whole mesh is used")
    shape = Shape("mesh", pose=pose, scale=scale, name=name)
    path, looked = reader.resolve(uri, scope.folder)
    shape.mesh_path = path or uri
    if path is None:
        reader.note(g, f"mesh {uri!r} not found (looked in: {'; '.join(looked)}); kept without geometry")
        return shape
    try:
        shape.vertices, shape.faces = load_mesh(path, scale)
    except MeshError as exc:
        reader.note(g, f"mesh {uri!r} unreadable, kept without geometry: {exc}")
    return shape


def _color(reader, material):
    if material is None:
        return np.array(DEFAULT_COLOR)
    for tag in ("diffuse", "ambient"):
        c = child(material, tag)
        if c is not None and (c.text or "").strip():
            n = len(c.text.split())
            values = reader.vector(c, n if n in (3, 4) else 4, "3 or 4 numbers r g b [a]")
            return np.clip(np.append(values, 1.0) if n == 3 else values, 0.0, 1.0)
    return np.array(DEFAULT_COLOR)


def _surface(reader, surface):
    """(friction, restitution): ODE's mu (else bullet's friction), bounce restitution; SDF's
    defaults 1 and 0."""
    friction = child(surface, "friction") if surface is not None else None
    mu = 1.0
    if friction is not None:
        ode, bullet = child(friction, "ode"), child(friction, "bullet")
        if ode is not None and child(ode, "mu") is not None:
            mu = reader.number(ode, "mu", nonnegative=True)
        elif bullet is not None and child(bullet, "friction") is not None:
            mu = reader.number(bullet, "friction", nonnegative=True)
    bounce = child(surface, "bounce") if surface is not None else None
    e = reader.number(bounce, "restitution_coefficient", 0.0, nonnegative=True) if bounce is not None else 0.0
    return min(mu, 1e6), e


def ellipsoid_mesh(radii, rings=12, segments=24):
    """A closed triangle mesh of the ellipsoid with semi-axes radii (x, y, z)."""
    theta = np.linspace(0, np.pi, rings + 1)[1:-1]
    phi = np.linspace(0, 2 * np.pi, segments, endpoint=False)
    ring = np.stack([np.outer(np.sin(theta), np.cos(phi)), np.outer(np.sin(theta), np.sin(phi)),
                     np.outer(np.cos(theta), np.ones_like(phi))], axis=-1).reshape(-1, 3)
    vertices = np.vstack([[0, 0, 1], ring, [0, 0, -1]]) * np.asarray(radii, float)
    faces = []
    top, bottom = 0, len(vertices) - 1
    for s in range(segments):
        t = (s + 1) % segments
        faces.append([top, 1 + s, 1 + t])
        for r in range(rings - 2):
            a, b = 1 + r * segments + s, 1 + r * segments + t
            c, d = a + segments, b + segments
            faces += [[a, c, d], [a, d, b]]
        last = 1 + (rings - 2) * segments
        faces.append([bottom, last + t, last + s])
    return vertices, np.array(faces, dtype=np.int64)
