"""The joint tree from the ground (joints traversed backwards, one parent joint per body,
OpenSim's FreeJoint for a loose body), the Model's coordinate names, and the Model joints of
OpenSim's joint types (reversed motions, the ScapulothoracicJoint's three) (a mixin of the Builder)."""
from __future__ import annotations

import math

import numpy as np
from lxml import etree

from ...model import Function, Joint, Link, ModelError, TransformAxis
from ...model.transforms import axis_angle_to_matrix, make_transform
from .functions import UNIT_AXES, axis_rotation_to_z, scaled, xyz_rates
from .reader import unique_name


def _ellipsoid_axes():
    """Transform axes of Simbody's Ellipsoid mobilizer with OpenSim's coordinates: body-fixed
    x-y-z rotations by the three coordinates, no translation axes (the ellipsoid gives it)."""
    lin = Function.linear(1.0, 0.0)
    return ([TransformAxis(UNIT_AXES[k], k, lin) for k in range(3)]
            + [TransformAxis(UNIT_AXES[k], -1, Function.constant(0.0)) for k in range(3)])


class TreeBuilding:
    """Builder's part that makes the joint tree, the coordinate names and the Model joints."""

    # -- joints: the tree ----------------------------------------------------------------------
    def check_tree(self, joints):
        """One parent joint per body, no cycles; bodies without a joint get OpenSim's FreeJoint."""
        r = self.r
        self.orient_joints(joints)
        names, parent_of = {}, {}
        for j in joints:
            if j.name in names:      # OpenSim renames the later ones <name>_0, <name>_1, ...
                k = 0
                while f"{j.name}_{k}" in names:
                    k += 1
                r.warn(j.el, f"a second joint named {j.name!r}; renamed {j.name}_{k} as OpenSim does")
                j.name = f"{j.name}_{k}"
            names[j.name] = j
            if j.child == j.parent:
                raise r.error(j.el, f"parent and child are the same body {j.child!r} (a cycle)")
            if j.child in parent_of:
                other = parent_of[j.child]
                raise r.error(j.el, f"body {j.child!r} is already the child of joint {other.name!r} (line "
                                    f"{other.el.sourceline}); a closed loop needs a constraint, not a second joint")
            parent_of[j.child] = j
        for j in joints:
            seen, body = [j.child], j.parent
            while body is not None:
                if body in seen:
                    cycle = " -> ".join(seen[seen.index(body):] + [body])
                    raise r.error(j.el, f"the joints form a cycle of bodies ({cycle}, each followed by its parent); "
                                        "expected a tree from the ground")
                seen.append(body)
                up = parent_of.get(body)
                body = up.parent if up is not None else None
        for name, el in self.bodies.items():
            if name not in parent_of:
                joint_name = unique_name(f"free_{name}", set(names))
                self.r.warn(el, f"body {name!r} is not connected by a joint; a FreeJoint {joint_name!r} connects "
                                "it to the ground, as OpenSim does")
                fake = etree.Element("FreeJoint", name=joint_name)
                info = self.joint_info(fake, None, np.eye(4), name, np.eye(4))
                joints.append(info)
                names[joint_name] = info
        return joints

    def orient_joints(self, joints):
        """Run the tree out from the ground: a joint reached from its child's side first (its
        child frame nearer the ground, or a 3.x reversed joint) is traversed backwards, as
        Simbody's graph maker reverses a mobilizer; its coordinates keep their sense."""
        reached, pending = {None}, list(joints)
        while pending:
            left = []
            for j in pending:
                if j.parent in reached:
                    reached.add(j.child)
                elif j.child in reached:
                    j.reverse()
                    reached.add(j.child)
                    self.r.report("joint", j.name, f"traversed from {j.parent or 'ground'} to {j.child or 'ground'} "
                                                   "(its child frame is nearer the ground), as OpenSim does")
                else:
                    left.append(j)
            if len(left) == len(pending):
                break           # not connected to the ground: check_tree says what is wrong
            pending = left

    def scapulothoracic(self, info):
        """OpenSim's ScapulothoracicJoint (Seth et al. 2016) as Simbody builds it: an Ellipsoid
        mobilizer (abduction, elevation, upward rotation) from the parent frame turned by +90 deg
        about z, radii (ry, rx, rz), to a massless body in the same turned frame; then a pin
        (winging) about the axis (-sin d, cos d, 0) through (ox, oy, 0) of that body; then the
        child. Adds the ellipsoid joint "<name>" and the massless link "<name>_ellipsoid";
        returns (type, extra, frames, what) of the winging joint "<name>_winging" to the child."""
        r, model = self.r, self.r.model
        radii = r.numbers(info.el, "thoracic_ellipsoid_radii_x_y_z", 3)
        if not np.all(radii > 0):
            raise r.error(info.el, f"thoracic_ellipsoid_radii_x_y_z {radii.tolist()}; expected three radii > 0")
        origin = r.numbers(info.el, "scapula_winging_axis_origin", 2, [0.0, 0.0])
        direction = r.number(info.el, "scapula_winging_axis_direction", 0.0)
        turn = make_transform(axis_angle_to_matrix([0, 0, 1], math.pi / 2), np.zeros(3))
        body = unique_name(f"{info.name}_ellipsoid", set(self.bodies) | {l.name for l in model.links})
        model.add_link(Link(body))
        c3 = info.coords[:3]
        ellipsoid = Joint(info.name, "custom", info.parent, body, origin=info.X_PF @ turn, child_pose=turn,
                          transform_axes=_ellipsoid_axes(), ellipsoid_radii=radii[[1, 0, 2]],
                          dof_names=[c.dof for c in c3], q0=[c.default for c in c3],
                          v0=xyz_rates([c.default for c in c3], [c.speed for c in c3]),
                          locked=[c.locked for c in c3],
                          params={"range": np.array([c.range for c in c3]), "clamped": [c.clamped for c in c3],
                                  "opensim_type": info.type})
        model.add_joint(ellipsoid)
        for c in c3:
            self.joint_of_dof[c.dof] = ellipsoid
        axis = np.array([-math.sin(direction), math.cos(direction), 0.0])
        W = make_transform(axis_rotation_to_z(axis), [origin[0], origin[1], 0.0])
        r.report("joint", info.name, f"ScapulothoracicJoint -> custom (Ellipsoid, radii {radii[[1, 0, 2]].tolist()} "
                                     f"in the turned frame): {', '.join(c.dof for c in c3)}; massless link {body!r}")
        return ("revolute", dict(axis=[0, 0, 1]), dict(origin=W, child_pose=info.X_BM @ W),
                f"ScapulothoracicJoint winging -> revolute about {np.round(axis, 6).tolist()} through "
                f"({origin[0]:g}, {origin[1]:g}, 0) of {body!r}")

    def reversed_motion(self, info):
        """(type, Joint kwargs, what) of a joint traversed backwards: J'(q) = inv(X_FM(q)). With
        X_FM = [R(q), p(q)], inv = [R^T, -R^T p]: a custom joint (rotations in reverse order with
        negated functions) when p is constant (folded into child_pose) or R is (translations
        along -R^T t_k); a joint moving both (FreeJoint, PlanarJoint, such a CustomJoint) is refused."""
        r, t = self.r, info.type
        lin = Function.linear(1.0, 0.0)
        if t == "PinJoint":
            return "revolute", dict(axis=[0, 0, -1]), "PinJoint, reversed -> revolute about -z"
        if t == "SliderJoint":
            return "prismatic", dict(axis=[-1, 0, 0]), "SliderJoint, reversed -> prismatic along -x"
        if t in ("UniversalJoint", "GimbalJoint", "BallJoint"):
            n = 2 if t == "UniversalJoint" else 3
            rot = [(UNIT_AXES[k], k, lin) for k in range(n)]
            trans = []
        elif t == "CustomJoint":
            rot, trans = info.axes[:3], info.axes[3:]
        else:
            raise r.error(info.el, f"a {t} traversed backwards (its child frame is nearer the ground, or "
                                   "<reverse>true</reverse>): its inverse moves rotation and translation together, "
                                   "which no joint here expresses; expected the parent frame nearer the ground")
        moving_rot = any(k >= 0 for _, k, _ in rot)
        moving_trans = any(k >= 0 for _, k, _ in trans)
        if moving_rot and moving_trans:
            raise r.error(info.el, "a CustomJoint traversed backwards (its child frame is nearer the ground, or "
                                   "<reverse>true</reverse>) that both rotates and translates: its inverse is not a "
                                   "CustomJoint; expected the parent frame nearer the ground")
        R_c = np.eye(3)
        for axis, k, f in rot:
            R_c = R_c @ axis_angle_to_matrix(axis, float(f(0.0)))
        axes = [TransformAxis(axis, k, scaled(f, -1.0)) for axis, k, f in reversed(rot)]
        axes += [TransformAxis(UNIT_AXES[k], -1, Function.constant(0.0)) for k in range(len(rot), 3)]
        child_pose = info.X_BM
        if moving_rot:
            p_c = sum((float(f(0.0)) * axis for axis, _, f in trans), np.zeros(3))
            child_pose = info.X_BM @ make_transform(np.eye(3), p_c)
            axes += [TransformAxis(UNIT_AXES[k], -1, Function.constant(0.0)) for k in range(3)]
        else:
            axes += [TransformAxis(-R_c.T @ axis, k, f) for axis, k, f in trans]
        return "custom", dict(transform_axes=axes, child_pose=child_pose), f"{t}, reversed -> custom (inverse motion)"

    def name_coordinates(self, joints):
        """Model dof names: the coordinate names, "<joint>/<coordinate>" for a name used twice."""
        count = {}
        for j in joints:
            for c in j.coords:
                count[c.name] = count.get(c.name, 0) + 1
        self.coord_of = {}      # OpenSim coordinate name -> the first _Coord of that name
        self.coord_by_dof = {}
        for j in joints:
            for c in j.coords:
                c.dof = c.name if count[c.name] == 1 else f"{j.name}/{c.name}"
                self.coord_of.setdefault(c.name, c)
                self.coord_by_dof[c.dof] = c
        for n, k in count.items():
            if k > 1:
                self.r.report("coordinate", n, f"used by {k} joints: their DOFs are named <joint>/{n}")

    def coordinate(self, where, name):
        c = self.coord_of.get((name or "").strip().split("/")[-1])
        if c is None:
            raise self.r.error(where, f"coordinate {name!r} does not exist")
        return c

    # -- joints: the Model joint ------------------------------------------------------------
    def make_joint(self, info):
        r = self.r
        coords = info.coords
        t = info.type
        kw = dict(origin=info.X_PF, child_pose=info.X_BM)
        q0 = np.array([c.default for c in coords])
        u0 = np.array([c.speed for c in coords])
        order = list(range(len(coords)))
        what = ""
        name, parent = info.name, info.parent
        if info.reversed and t != "WeldJoint":
            joint_type, extra, what = self.reversed_motion(info)
            kw.update(child_pose=extra.pop("child_pose", info.X_BM))
            if t == "BallJoint":
                u0 = xyz_rates(q0, u0)
        elif t == "WeldJoint":
            joint = Joint(info.name, "fixed", info.parent, info.child, **kw)
            what = "WeldJoint -> fixed"
        elif t == "PinJoint":
            joint_type, extra = "revolute", dict(axis=[0, 0, 1])
            what = "PinJoint -> revolute about z"
        elif t == "SliderJoint":
            joint_type, extra = "prismatic", dict(axis=[1, 0, 0])
            what = "SliderJoint -> prismatic along x"
        elif t == "UniversalJoint":
            joint_type, extra = "universal", dict(axis=[1, 0, 0], axis2=[0, 1, 0])
            what = "UniversalJoint -> universal (x, then y)"
        elif t == "GimbalJoint":
            joint_type, extra = "euler", dict(euler_order="xyz")
            what = "GimbalJoint -> euler xyz"
        elif t == "BallJoint":
            joint_type, extra = "euler", dict(euler_order="xyz")
            u0 = xyz_rates(q0, u0)
            what = (f"{t} -> euler xyz (OpenSim's body-fixed X-Y-Z coordinates; speeds are the angle rates, "
                    "OpenSim's the angular velocity in the parent frame)")
        elif t == "EllipsoidJoint":
            radii = r.numbers(info.el, "radii_x_y_z", 3, [1, 1, 1])
            joint_type, extra = "custom", dict(transform_axes=_ellipsoid_axes(), ellipsoid_radii=radii)
            u0 = xyz_rates(q0, u0)
            what = ("EllipsoidJoint -> custom: x-y-z body-fixed rotations, the child frame's origin at "
                    "diag(radii) R z (Simbody's Ellipsoid mobilizer; speeds are the angle rates)")
        elif t == "ScapulothoracicJoint":
            joint_type, extra, kw, what = self.scapulothoracic(info)
            coords, q0, u0, order = coords[3:], q0[3:], u0[3:], [0]
            name, parent = f"{info.name}_winging", self.r.model.joints[-1].child
        elif t == "PlanarJoint":
            joint_type, extra = "planar", dict(axis=[0, 0, 1])
            order = [1, 2, 0]
            what = "PlanarJoint -> planar in xy (q = tx, ty, rz)"
        elif t == "FreeJoint":
            u0 = np.concatenate([xyz_rates(q0[:3], u0[:3]), u0[3:]])
            axes = [TransformAxis(UNIT_AXES[k % 3], k, Function.linear(1.0, 0.0)) for k in range(6)]
            joint_type, extra = "custom", dict(transform_axes=axes)
            what = ("FreeJoint -> custom (x-y-z body-fixed rotations, then translations in the parent frame; "
                    "rotation speeds are the angle rates)")
        else:   # CustomJoint
            axes = [TransformAxis(axis, k, f) for axis, k, f in info.axes]
            joint_type, extra = "custom", dict(transform_axes=axes)
            what = f"CustomJoint -> custom ({len(coords)} coordinate{'s' if len(coords) != 1 else ''})"
        if t != "WeldJoint":
            cs = [coords[k] for k in order]
            params = {"range": np.array([c.range for c in cs]), "clamped": [c.clamped for c in cs],
                      "opensim_type": t, "opensim_joint": info.name}
            try:
                joint = Joint(name, joint_type, parent, info.child, dof_names=[c.dof for c in cs],
                              q0=q0[order], v0=u0[order], locked=[c.locked for c in cs], params=params,
                              **extra, **kw)
            except ModelError as exc:
                raise r.error(info.el, str(exc)) from None
        self.model_joints[info.name] = joint
        for dof in joint.dof_names or ():
            self.joint_of_dof[dof] = joint
        r.report("joint", info.name, what + (": " + ", ".join(c.dof for c in coords) if coords else ""))
        for c in coords:
            notes = []
            if c.locked:
                notes.append(f"locked at {c.default:g}")
            if c.clamped:
                notes.append(f"clamped to [{c.range[0]:g}, {c.range[1]:g}] in OpenSim's assembly only: no joint limit")
            if c.prescribed:
                notes.append("prescribed motion: not simulated (the coordinate moves freely)")
            if notes:
                r.report("coordinate", c.dof, "; ".join(notes))
        return joint
