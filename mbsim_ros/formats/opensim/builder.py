"""The Model from the parsed <Model> element: the top level (layout, bodies as links, then joints,
constraints, forces, geometry and markers from the mixins) and the lookups the parts share."""
from __future__ import annotations

import os
import warnings

import numpy as np
from lxml import etree

from ...model import Joint, Link, Model, ModelError
from .forces import ForceReading
from .geometry import GeometryReading
from .joint_tree import TreeBuilding
from .joints import JointReading
from .reader import as_converted, first_child, subelements, unique_name


class Builder(JointReading, TreeBuilding, ForceReading, GeometryReading):
    """Builds the Model from the parsed <Model> element; the joints, constraints, forces and
    geometry come from the mixins."""

    def __init__(self, reader, model_el):
        self.r = reader
        self.el = model_el

    # -- top level -----------------------------------------------------------------------
    def build(self):
        r = self.r
        name = self.el.get("name") or os.path.splitext(os.path.basename(r.name))[0]
        model = Model(name)
        model.source = r.name
        r.model = model
        defaults = first_child(self.el, "defaults")
        for d in subelements(defaults) if defaults is not None else ():
            r.defaults.setdefault(d.tag, d)
        if r.version == 0:      # no version: the layout tells
            self.layout = "3.x" if first_child(self.el, "JointSet") is None else "4.x"
        else:
            self.layout = "3.x" if r.version < 30500 else ("30501" if r.version < 30505 else "4.x")
        r.index(self.el)
        self.bodies = self.read_bodies()
        model.gravity = r.numbers(self.el, "gravity", 3, [0.0, -9.80665, 0.0])
        model.gravity_stated = True       # along OpenSim's -y: not the z-up world's of other files
        r.report("model", name, f"OpenSim document version {r.version} ({self.layout} layout), "
                                f"gravity {model.gravity.tolist()} m/s^2")
        if self.layout != "4.x":
            r.report("model", name, "joint and bushing frames and inertias rounded to 6 significant digits, "
                                    "as OpenSim 4 converts this layout")
        joints = self.read_joints_3x() if self.layout == "3.x" else self.read_joints_4x()
        joints = self.check_tree(joints)
        self.name_coordinates(joints)
        self.joints = {j.name: j for j in joints}
        self.link_of = {}           # body name -> Link
        self.model_joints = {}      # joint name -> Joint
        self.joint_of_dof = {}      # dof name -> the Model joint that has it
        for body_el in self.bodies.values():
            self.add_link(body_el)
        ground = self.ground = Link(unique_name("ground", set(self.bodies)))
        self.ground_link = ground.name
        for info in joints:
            model.add_joint(self.make_joint(info))
        self.read_constraints()
        self.read_forces()
        self.add_geometry(joints)
        model.add_link(ground)
        model.add_joint(Joint(unique_name("ground", set(self.joints)), "fixed", None, ground.name))
        r.report("body", ground.name, "the ground's geometry (a massless link welded to the world)")
        self.read_markers()
        if r.missing_meshes:
            shown = ", ".join(r.missing_meshes[:5]) + (", ..." if len(r.missing_meshes) > 5 else "")
            warnings.warn(f"{r.name}: {len(r.missing_meshes)} mesh file(s) not found beside the model or "
                          f"in its Geometry/ folder ({shown}); model.warnings lists each", stacklevel=3)
        return model.finalize()

    # -- bodies --------------------------------------------------------------------------
    def read_bodies(self):
        """name -> <Body> of every body except the ground; sets reader.ground_el."""
        r = self.r
        body_set = first_child(self.el, "BodySet")
        objects = first_child(body_set, "objects") if body_set is not None else None
        els = [b for b in subelements(objects) if b.tag == "Body"] if objects is not None else []
        ground = first_child(self.el, "Ground")
        if self.layout == "3.x":
            named = [b for b in els if b.get("name") == "ground"]
            if named:
                ground = named[0]
            else:
                jointless = [b for b in els
                             if not subelements(first_child(b, "Joint") if first_child(b, "Joint") is not None else [])]
                if not jointless:
                    raise r.error(body_set if body_set is not None else self.el,
                                  "no ground body (expected a <Body name=\"ground\">)")
                ground = jointless[0]
        if ground is None:      # 30501 files and minimal 4.x files have no <Ground> element
            ground = etree.Element("Ground", name="ground")
            r.by_path.setdefault("/ground", ground)
            r.path_of[ground] = "/ground"
            r.by_name.setdefault("ground", []).append(ground)
        r.ground_el = ground
        bodies = {}
        for b in els:
            if b is ground:
                continue
            name = b.get("name")
            if not name:
                raise r.error(b, "a <Body> without a name=\"...\"")
            if name in bodies:
                raise r.error(b, f"a second body named {name!r} (the first is on line {bodies[name].sourceline})")
            if name == "ground":
                raise r.error(b, "a body named \"ground\" besides the Ground")
            bodies[name] = b
        return bodies

    def add_link(self, el):
        r = self.r
        name = el.get("name")
        mass = r.number(el, "mass", float("nan"), finite=False)
        if not np.isfinite(mass) or mass < 0:
            raise r.error(el, f"mass {mass}: expected a finite number >= 0 (OpenSim needs <mass>)")
        com = r.numbers(el, "mass_center", 3, [0, 0, 0])
        scalars = ("inertia_xx", "inertia_yy", "inertia_zz", "inertia_xy", "inertia_xz", "inertia_yz")
        if r.prop(el, "inertia") is None and (self.layout == "3.x" or any(r.prop(el, s) is not None for s in scalars)):
            # 3.x: six scalars, missing moments 1 and products 0 (OpenSim's defaults)
            I6 = as_converted([r.number(el, s, 1.0 if k < 3 else 0.0) for k, s in enumerate(scalars)])
        else:
            I6 = r.numbers(el, "inertia", 6, [0, 0, 0, 0, 0, 0])
        xx, yy, zz, xy, xz, yz = I6
        inertia = np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])
        try:
            link = Link(name, mass=mass, com=com, inertia=inertia)
        except ModelError as exc:
            raise r.error(el, str(exc)) from None
        self.r.model.add_link(link)
        self.link_of[name] = link
        r.report("body", name, f"Body: {mass:.6g} kg")
        return link

    # -- shared lookups ----------------------------------------------------------------------
    def body_element(self, where, name):
        name = name.strip()
        if name == "ground" or self.r.ground_el.get("name") == name:
            return self.r.ground_el
        if name not in self.bodies:
            raise self.r.error(where, f"body {name!r} does not exist (expected a body of the BodySet or ground)")
        return self.bodies[name]

    def set_objects(self, set_tag):
        """The object elements of a model-level Set (ForceSet, ConstraintSet, ...)."""
        objects = first_child(first_child(self.el, set_tag), "objects")
        return subelements(objects) if objects is not None else []

    def link_name(self, body):
        """The Model link of a body (None, the ground, -> the ground link)."""
        return self.ground_link if body is None else body

    def socket_frame(self, el, name):
        """(body or None, 4x4) of the frame a component names by socket `name` (4.x paths) or
        by a 3.x body-name property `name`."""
        r = self.r
        for tag in (f"socket_{name}", f"socket_{name}_connectee_name", f"connector_{name}_connectee_name", name):
            sock = r.prop(el, tag)
            if sock is not None and (sock.text or "").strip():
                text = sock.text.strip()
                if tag == name and not text.startswith("/"):      # a 3.x body name
                    return r.frame(self.body_element(sock, text))
                return r.frame(r.resolve(el, text, sock))
        raise r.error(el, f"missing <socket_{name}> (the path of a frame)")

    def joint_of_coordinate(self, c):
        return self.joint_of_dof[c.dof]
