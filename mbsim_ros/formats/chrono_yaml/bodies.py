"""Bodies: links with their frames, inertias, initial velocities and shapes."""
from __future__ import annotations

import os

import numpy as np

from ...model import Link, Shape
from ..meshes import MeshError, load_mesh
from .reader import REQUIRED
from .parts import Body, DEFAULT_FRICTION, DEFAULT_RESTITUTION, KNOWN_BODY_KEYS, VELOCITY_ALIASES, frame, frame_z


class BodyReading:
    """Builder's part that reads bodies (self.r, self.model, self.bodies, self.data_root)."""

    # -- bodies --------------------------------------------------------------------------
    def _read_body(self, b, w):
        r = self.r
        b = r.mapping(b, w)
        name = r.text(b, "name", w)
        if name in self.bodies:
            raise r.error(f"{w}.name", f"a second body named {name!r}")
        for alias, key in VELOCITY_ALIASES.items():
            if alias in b and key not in b:
                r.warn(f"{w}.{alias}", f"read as {key} (Chrono's parser reads only {key} and would ignore it)")
        r.unknown_keys(b, KNOWN_BODY_KEYS | set(VELOCITY_ALIASES), w)
        fixed = r.flag(b, "fixed", w, False)
        p = r.vector(b, "location", w)
        R = r.rotation(b, "orientation", w)
        T = frame(R, p)
        mass = r.number(b, "mass", w, None)
        inertia = b.get("inertia")
        if not fixed:
            if mass is None:
                raise r.error(f"{w}.mass", f"missing: body {name!r} is not fixed, so it needs a mass")
            if not mass > 0:
                raise r.error(f"{w}.mass", f"body {name!r} is not fixed, so its mass must be > 0, got {mass}")
            if inertia is None:
                raise r.error(f"{w}.inertia", f"missing: body {name!r} is not fixed, so it needs inertia moments")
        elif mass is not None and mass < 0:
            raise r.error(f"{w}.mass", f"expected a mass >= 0, got {mass}")
        com = np.zeros(3)
        Rcom = np.eye(3)
        if b.get("com") is not None:
            c = r.mapping(b["com"], f"{w}.com")
            com = r.vector(c, "location", f"{w}.com", [0, 0, 0])
            Rcom = r.rotation(c, "orientation", f"{w}.com")
        I = np.zeros((3, 3))
        if inertia is not None:
            inertia = r.mapping(inertia, f"{w}.inertia")
            moments = r.vector(inertia, "moments", f"{w}.inertia", None if fixed else REQUIRED)
            products = r.vector(inertia, "products", f"{w}.inertia", [0, 0, 0])
            if moments is not None:
                if np.any(moments < 0):
                    raise r.error(f"{w}.inertia.moments", f"expected moments >= 0, got {moments.tolist()}")
                # Chrono's SetInertiaXX / SetInertiaXY: the tensor's diagonal and off-diagonal entries
                Ic = np.array([[moments[0], products[0], products[1]],
                               [products[0], moments[1], products[2]],
                               [products[1], products[2], moments[2]]])
                I = Rcom @ Ic @ Rcom.T
        link = Link(name, mass=mass or 0.0, com=com, inertia=I)
        lin = r.vector(b, "initial_linear_velocity", w, None) if "initial_linear_velocity" in b else \
            r.vector(b, "lin_vel", w, [0, 0, 0])
        ang = r.vector(b, "initial_angular_velocity", w, None) if "initial_angular_velocity" in b else \
            r.vector(b, "ang_vel", w, [0, 0, 0])
        if fixed and (np.any(lin) or np.any(ang)):
            r.warn(w, f"fixed body {name!r} has initial velocities; ignored")
            lin, ang = np.zeros(3), np.zeros(3)
        # Chrono: the linear velocity is the COM's (world), the angular one in the COM frame
        w_world = R @ Rcom @ ang
        v_ref = lin + np.cross(w_world, p - (p + R @ com))
        self._read_geometry(b, w, link)
        self.model.add_link(link)
        self.bodies[name] = Body(name, w, T, fixed, link, v_ref, w_world)

    def _read_geometry(self, b, w, link):
        r = self.r
        contact = b.get("contact")
        if contact is not None:
            contact = r.mapping(contact, f"{w}.contact")
            materials = {}
            for k, mat in enumerate(r.sequence(contact, "materials", f"{w}.contact")):
                mw = f"{w}.contact.materials[{k}]"
                mat = r.mapping(mat, mw)
                materials[r.text(mat, "name", mw)] = (
                    r.number(mat, "coefficient_of_friction", mw, DEFAULT_FRICTION),
                    r.number(mat, "coefficient_of_restitution", mw, DEFAULT_RESTITUTION))
            for k, sh in enumerate(r.sequence(contact, "shapes", f"{w}.contact")):
                sw = f"{w}.contact.shapes[{k}]"
                sh = r.mapping(sh, sw)
                mat = r.text(sh, "material", sw)
                if mat not in materials:
                    raise r.error(f"{sw}.material", f"{mat!r} is not one of this body's contact materials "
                                                    f"({', '.join(materials) or 'none'})")
                shape = self._shape(sh, sw, collision=True)
                if shape is not None:
                    shape.friction, shape.restitution = materials[mat]
                    link.collisions.append(shape)
            if contact.get("collision_family") is not None:
                fam = r.number(contact, "collision_family", f"{w}.contact")
                if fam != int(fam) or not 0 <= fam <= 15:
                    raise r.error(f"{w}.contact.collision_family", f"expected an integer 0..15, got {fam}")
                link.collision_family = int(fam)
        vis = b.get("visualization")
        if vis is not None:
            vis = r.mapping(vis, f"{w}.visualization")
            if vis.get("model_file") is not None:
                shape = Shape("mesh", name=f"{link.name}_model_file")
                self._mesh(shape, r.text(vis, "model_file", f"{w}.visualization"), f"{w}.visualization.model_file")
                link.visuals.append(shape)
            for k, sh in enumerate(r.sequence(vis, "shapes", f"{w}.visualization")):
                sw = f"{w}.visualization.shapes[{k}]"
                shape = self._shape(r.mapping(sh, sw), sw, collision=False)
                if shape is not None:
                    link.visuals.append(shape)

    def _shape(self, sh, w, collision):
        r = self.r
        kinds = ("SPHERE", "BOX", "CYLINDER", "MESH", "HULL")
        kind = r.enum(sh, "type", w, kinds)
        p = r.vector(sh, "location", w, [0, 0, 0])
        R = r.rotation(sh, "orientation", w)
        shape = None
        if kind == "SPHERE":
            shape = Shape("sphere", pose=frame(np.eye(3), p), radius=self._size(sh, "radius", w))
        elif kind == "BOX":
            dims = r.vector(sh, "dimensions", w)
            if np.any(dims <= 0):
                raise r.error(f"{w}.dimensions", f"expected positive lengths, got {dims.tolist()}")
            shape = Shape("box", pose=frame(R, p), size=dims)
        elif kind == "CYLINDER":
            axis = r.unit(sh, "axis", w)
            shape = Shape("cylinder", pose=frame(frame_z(axis), p), radius=self._size(sh, "radius", w),
                          length=self._size(sh, "length", w))
        else:
            if kind == "HULL":
                r.warn(w, "HULL read as the triangle mesh of its file (Chrono takes each object's convex hull)")
            scale = r.number(sh, "scale", w, 1.0)
            shape = Shape("mesh", pose=frame(R, p), scale=np.full(3, scale))
            self._mesh(shape, r.text(sh, "filename", w), f"{w}.filename")
        if not collision and sh.get("color") is not None:
            rgb = r.vector(sh, "color", w)
            shape.color = np.array([*np.clip(rgb, 0, 1), 1.0])
        return shape

    def _size(self, sh, key, w):
        x = self.r.number(sh, key, w)
        if not x > 0:
            raise self.r.error(f"{w}.{key}", f"expected a positive size, got {x}")
        return x

    def _mesh(self, shape, filename, w):
        path = filename if self.data_root is None else os.path.join(self.data_root, filename)
        if not os.path.isabs(path):
            path = os.path.join(self.r.folder, path)
        shape.mesh_path = os.path.normpath(path)
        if not os.path.isfile(path):
            self.r.warn(w, f"mesh {filename!r} not found (looked for {shape.mesh_path}); kept without geometry")
            return
        try:
            shape.vertices, shape.faces = load_mesh(path, shape.scale)
        except MeshError as exc:
            self.r.warn(w, f"mesh {filename!r} unreadable, kept without geometry: {exc}")
