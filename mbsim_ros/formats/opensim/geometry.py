"""Geometry: visual shapes (4.x attached geometry, 3.x VisibleObjects, meshes found beside the
model), Chrono's primitive picture and collision cylinders, the contact spheres and half-spaces
of contact forces, and markers as Model frames (a mixin of the Builder)."""
from __future__ import annotations

import math
import os

import numpy as np

from ...model import Frame, Shape
from ...model.transforms import make_transform
from ..meshes import MeshError, load_mesh
from .functions import axis_rotation_to_z, xyz_pose, xyz_rotation
from .reader import FRAME_TYPES, first_child, subelements, unique_name

PRIMITIVE_SPHERE = 0.05                # m: radius of the sphere drawn at each body origin
PRIMITIVE_CYLINDER = 0.02              # m: radius of the cylinders to the joint frames (Chrono's)
COLLISION_FAMILIES = (1, 2)            # Chrono's default families, alternating by tree depth
_ROT_Y_TO_Z = make_transform(xyz_rotation((-math.pi / 2, 0, 0)))   # OpenSim's y-axis shapes -> our z
_ROT_HALFSPACE = make_transform(xyz_rotation((0, -math.pi / 2, 0)))   # half-space x < 0 outside -> plane normal +z


class GeometryReading:
    """Builder's part that reads geometry, contact geometry and markers."""

    # -- geometry --------------------------------------------------------------------------------
    def add_geometry(self, joints):
        """Visual shapes (the option `visuals`), contact geometry used by contact forces, and with
        collide=True the primitive cylinders as collision shapes with families by depth."""
        r = self.r
        if r.visuals == "meshes":
            if self.layout == "4.x":
                self.attached_geometry()
            else:
                for body, el in [(None, r.ground_el)] + list(self.bodies.items()):
                    self.visible_object(body, el)
        depth = self.depths(joints)
        if r.visuals == "primitives" or r.collide:
            self.primitives(joints, depth)
        self.contact_geometry()

    def shapes_of(self, body):
        link = self.ground if body is None else self.link_of[body]
        return {"visuals": link.visuals, "collisions": link.collisions}

    def depths(self, joints):
        parent = {j.child: j.parent for j in joints}
        depth = {}

        def d(b):
            if b is None:
                return 0
            if b not in depth:
                depth[b] = d(parent[b]) + 1
            return depth[b]
        for b in self.bodies:
            d(b)
        return depth

    def primitives(self, joints, depth):
        """Chrono's picture: a sphere at each body origin, cylinders to its joint frames; with
        collide=True the cylinders collide, families alternating by depth in the tree."""
        r = self.r
        ends = {b: [] for b in self.bodies}
        for j in joints:
            ends[j.child].append(j.X_BM[:3, 3])
            if j.parent is not None:
                ends[j.parent].append(j.X_PF[:3, 3])
        deepest = max(depth.values(), default=1)
        for b, points in ends.items():
            link = self.link_of[b]
            shade = depth[b] / deepest
            color = np.array([shade, 1.0 - shade, 0.0, 1.0])
            cylinders = []
            for p in points:
                length = float(np.linalg.norm(p))
                if length > 1e-5:
                    pose = make_transform(axis_rotation_to_z(p), p / 2)
                    cylinders.append(Shape("cylinder", pose=pose, radius=PRIMITIVE_CYLINDER, length=length,
                                           color=color, name=f"{b}_to_joint"))
            if r.visuals == "primitives":
                link.visuals.append(Shape("sphere", radius=PRIMITIVE_SPHERE, color=color, name=f"{b}_origin"))
                link.visuals.extend(cylinders)
            if r.collide:
                link.collisions.extend(Shape(c.kind, pose=c.pose, radius=c.radius, length=c.length, name=c.name)
                                       for c in cylinders)
                family, other = COLLISION_FAMILIES if depth[b] % 2 else COLLISION_FAMILIES[::-1]
                link.collision_family = family
                link.collision_mask = 0xFFFF & ~(1 << other)
        if r.collide:
            r.model.self_collision = True
            r.report("model", r.model.name, f"primitive collision cylinders, families {COLLISION_FAMILIES} "
                                            "alternating by tree depth (neighbours do not collide)")

    def appearance(self, el):
        """(rgba, visible) of a 4.x geometry's <Appearance>."""
        r = self.r
        app = first_child(el, "Appearance")
        color = r.numbers(app, "color", 3, [1, 1, 1]) if app is not None else np.ones(3)
        opacity = r.number(app, "opacity", 1.0) if app is not None else 1.0
        visible = r.flag(app, "visible", True) if app is not None else True
        return np.concatenate([color, [opacity]]), visible

    def attached_geometry(self):
        """4.x: the geometry attached to the ground, bodies and offset frames anywhere."""
        r = self.r
        for holder in self.el.iter("attached_geometry"):
            frame_el = holder.getparent()
            if frame_el is None or frame_el.tag not in FRAME_TYPES or self.inside_defaults(frame_el):
                continue
            for g in subelements(holder):
                rgba, visible = self.appearance(g)
                if not visible:
                    continue
                sock = r.prop(g, "socket_frame")
                target = frame_el
                if sock is not None and (sock.text or "").strip() not in ("", ".."):
                    target = r.resolve(g, sock.text, sock)
                body, X = r.frame(target)
                shape = self.geometry_shape(g, X, rgba)
                if shape is not None:
                    self.shapes_of(body)["visuals"].append(shape)

    def inside_defaults(self, el):
        return any(a.tag == "defaults" for a in el.iterancestors())

    def geometry_shape(self, g, X, rgba):
        """A 4.x Geometry element -> Shape at pose X (the frame's pose in its body)."""
        r = self.r
        tag = g.tag
        scale = r.numbers(g, "scale_factors", 3, [1, 1, 1])
        name = g.get("name") or tag
        if tag == "Mesh":
            return self.mesh_shape(g, r.text(g, "mesh_file"), X, scale, rgba, name)
        if tag == "Sphere":
            return Shape("sphere", pose=X, radius=r.number(g, "radius", 1.0) * float(np.max(scale)), color=rgba, name=name)
        if tag == "Brick":
            return Shape("box", pose=X, size=2 * r.numbers(g, "half_lengths", 3, [0.1, 0.1, 0.1]) * scale,
                         color=rgba, name=name)
        if tag == "Cylinder":
            return Shape("cylinder", pose=X @ _ROT_Y_TO_Z, radius=r.number(g, "radius", 0.5) * scale[0],
                         length=2 * r.number(g, "half_height", 0.5) * scale[1], color=rgba, name=name)
        if tag == "Cone":
            height = r.number(g, "height", 1.0) * scale[1]
            # OpenSim's cone: base at the frame origin, apex `height` along y; ours is centred
            pose = X @ make_transform(p=[0, height / 2, 0]) @ _ROT_Y_TO_Z
            return Shape("cone", pose=pose, radius=r.number(g, "base_radius", 0.5) * scale[0], length=height,
                         color=rgba, name=name)
        if tag == "Ellipsoid":
            v, f = _sphere_mesh()
            return Shape("mesh", pose=X, vertices=v * r.numbers(g, "radii", 3, [0.5, 0.5, 0.5]) * scale, faces=f,
                         color=rgba, name=name)
        return None      # FrameGeometry, Arrow, Line, Torus...: not drawn

    def visible_object(self, body, el):
        """3.x and 30501: a body's VisibleObject (DisplayGeometry list or geometry_files)."""
        r = self.r
        vo = first_child(el, "VisibleObject")
        if vo is None:
            return
        T_vo = self.display_transform(vo)
        s_vo = r.numbers(vo, "scale_factors", 3, [1, 1, 1])
        objects = first_child(first_child(vo, "GeometrySet"), "objects")
        items = []
        for dg in subelements(objects) if objects is not None else []:
            if r.text(dg, "display_preference", "4") == "0":
                continue
            color = np.concatenate([r.numbers(dg, "color", 3, [1, 1, 1]), [r.number(dg, "opacity", 1.0)]])
            items.append((r.text(dg, "geometry_file"), T_vo @ self.display_transform(dg),
                          s_vo * r.numbers(dg, "scale_factors", 3, [1, 1, 1]), color, dg))
        for f in (r.text(vo, "geometry_files") or "").split():
            items.append((f, T_vo, s_vo, np.array([1.0, 1, 1, 1]), vo))
        for file, T, scale, color, where in items:
            shape = self.mesh_shape(where, file, T, scale, color, os.path.splitext(file or "")[0])
            if shape is not None:
                self.shapes_of(body)["visuals"].append(shape)

    def display_transform(self, el):
        t = self.r.numbers(el, "transform", 6, [0, 0, 0, 0, 0, 0])
        return xyz_pose(t[3:], t[:3])

    def mesh_shape(self, where, file, X, scale, rgba, name):
        """A mesh Shape: its vertices when the file resolves (beside the model or in its
        Geometry/ folder) and reads, else mesh_path only and a warning."""
        r = self.r
        if not file or file == "Unassigned":        # OpenSim's placeholder for an unset file name
            return None
        candidates = [file] if os.path.isabs(file) else [os.path.join(r.folder, file),
                                                           os.path.join(r.folder, "Geometry", file)]
        path = next((c for c in candidates if os.path.isfile(c)), None)
        if path is None:
            if file not in r.missing_meshes:
                r.missing_meshes.append(file)
                r.warn(where, f"mesh file {file!r} not found beside the model or in its Geometry/ folder",
                       emit=False)
            return Shape("mesh", pose=X, mesh_path=file, scale=scale, color=rgba, name=name)
        if path not in r.mesh_cache:
            try:
                r.mesh_cache[path] = load_mesh(path)
            except MeshError as exc:
                r.mesh_cache[path] = None
                r.warn(where, f"mesh {file!r}: {exc}")
        mesh = r.mesh_cache[path]
        if mesh is None:
            return Shape("mesh", pose=X, mesh_path=path, scale=scale, color=rgba, name=name)
        return Shape("mesh", pose=X, vertices=mesh[0] * scale, faces=mesh[1], mesh_path=path, scale=scale,
                     color=rgba, name=name)

    def contact_geometry(self):
        """ContactSphere and ContactHalfSpace used by a contact force -> collision shapes."""
        r = self.r
        used = {}
        for force, names, friction in self.contact_forces:
            for n in names:
                used.setdefault(n, (force, friction))
        for el in self.set_objects("ContactGeometrySet"):
            name = el.get("name") or el.tag
            if name not in used:
                r.report("contact", name, f"{el.tag}: used by no contact force")
                continue
            if el.tag not in ("ContactSphere", "ContactHalfSpace"):
                r.report("contact", name, f"{el.tag}: not simulated (contact with spheres and half-spaces only)")
                continue
            if r.prop(el, "body_name") is not None:
                body, X = r.frame(self.body_element(el, r.text(el, "body_name")))
            else:
                body, X = self.socket_frame(el, "frame")
            X = X @ xyz_pose(r.numbers(el, "location", 3, [0, 0, 0]), r.numbers(el, "orientation", 3, [0, 0, 0]))
            friction = used[name][1]
            if el.tag == "ContactSphere":
                shape = Shape("sphere", pose=X, radius=r.number(el, "radius"), friction=friction, name=name)
            else:
                shape = Shape("plane", pose=X @ _ROT_HALFSPACE, friction=friction, name=name)
            self.shapes_of(body)["collisions"].append(shape)
            r.report("contact", name, f"{el.tag} -> {shape.kind} on {self.link_name(body)} ({used[name][0]})")
        for name in used:
            if not any((e.get("name") or e.tag) == name for e in self.set_objects("ContactGeometrySet")):
                raise r.error(first_child(self.el, "ForceSet"), f"contact force {used[name][0]!r} names contact "
                                                                 f"geometry {name!r}, which does not exist")

    # -- markers ---------------------------------------------------------------------------------
    def read_markers(self):
        """Markers -> Model frames (named after the marker; "<name>_marker" if a link has its name)."""
        r = self.r
        taken = {l.name for l in r.model.links}
        for el in self.set_objects("MarkerSet"):
            if el.tag != "Marker":
                continue
            if r.prop(el, "body") is not None:
                body, X = r.frame(self.body_element(el, r.text(el, "body")))
            else:
                body, X = self.socket_frame(el, "parent_frame")
            p = X[:3, :3] @ r.numbers(el, "location", 3, [0, 0, 0]) + X[:3, 3]
            name = el.get("name") or "marker"
            name = unique_name(name if name not in taken else f"{name}_marker", taken)
            taken.add(name)
            r.model.frames.append(Frame(name, self.link_name(body), make_transform(p=p)))
            r.report("marker", name, f"Marker -> frame on {self.link_name(body)}")


def _sphere_mesh(n=12):
    """A unit UV sphere (vertices, triangles), for ellipsoids."""
    theta = np.linspace(0, np.pi, n + 1)[1:-1]
    phi = np.linspace(0, 2 * np.pi, 2 * n, endpoint=False)
    ring = np.stack([np.outer(np.sin(theta), np.cos(phi)), np.outer(np.sin(theta), np.sin(phi)),
                     np.outer(np.cos(theta), np.ones_like(phi))], axis=-1).reshape(-1, 3)
    vertices = np.vstack([[0, 0, 1], ring, [0, 0, -1]])
    m, rings = 2 * n, n - 1
    faces = [(0, 1 + k, 1 + (k + 1) % m) for k in range(m)]
    for i in range(rings - 1):
        a, b = 1 + i * m, 1 + (i + 1) * m
        for k in range(m):
            k1 = (k + 1) % m
            faces += [(a + k, b + k, b + k1), (a + k, b + k1, a + k1)]
    last, bottom = 1 + (rings - 1) * m, len(vertices) - 1
    faces += [(last + k, bottom, last + (k + 1) % m) for k in range(m)]
    return vertices, np.array(faces)
