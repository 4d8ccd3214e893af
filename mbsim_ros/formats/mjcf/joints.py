"""MJCF <joint> and <freejoint> -> the model's joints, gathered as columns while the body tree is
walked and built into Joints at once (model/columns.py), welds of joint-less bodies included.

A hinge's or slide's `ref` (MuJoCo's qpos0) is folded into the joint origin, so q is MuJoCo's
qpos; a joint's `pos` is its anchor in the body frame (the joint turns about it: origin moved
there, child_pose back). One number per joint (damping, armature...) holds for each of its DOFs.
"""
from __future__ import annotations

from math import inf

import numpy as np

from ...model.columns import joints_from_columns
from ...model.transforms import axis_angle_to_matrix
from .parse import EYE4

JOINT_TYPES = {"hinge": "revolute", "slide": "prismatic", "ball": "ball", "free": "free"}   # MJCF -> Model
_NV = {"hinge": 1, "slide": 1, "ball": 3, "free": 6}
_Z = (0.0, 0.0, 1.0)
# the per-DOF columns, in the order read_joint returns their numbers
_PER_DOF = ("lower", "upper", "effort_limit", "damping", "stiffness", "rest_position", "friction", "rotor_inertia")


class JointColumns:
    """The joints read so far, in the order they join the model: a row of fields per joint and a
    row of numbers per DOF, turned into columns by build."""

    def __init__(self):
        self.rows = []        # (name, type, parent, child, origin, child_pose, axis, params)
        self.q0 = []
        self.dofs = []        # the _PER_DOF numbers of each DOF

    def weld(self, name, parent, child, origin):
        self.rows.append((name, "fixed", parent, child, origin, EYE4, _Z, {}))

    def add(self, joint, parent, child):
        """A joint read_joint read; its q0, for a free joint, is where its body starts."""
        name, kind, origin, child_pose, axis, q0, numbers, params = joint
        self.rows.append((name, JOINT_TYPES[kind], parent, child, origin, child_pose, axis, params))
        self.q0.extend(q0)
        if kind in ("hinge", "slide"):
            self.dofs.append(numbers)
        else:
            self.dofs.extend([numbers] * _NV[kind])

    def build(self):
        """The Joints, in the order they were read."""
        if not self.rows:
            return []
        names, types, parents, children, origins, child_poses, axes, params = zip(*self.rows)
        per_dof = np.array(self.dofs, dtype=float).reshape(-1, len(_PER_DOF)).T
        return joints_from_columns(names, types, parents, children, np.array(origins), axes, self.q0,
                                   dict(zip(_PER_DOF, per_dof)), params, child_poses=np.array(child_poses))


def read_joint(r, node, cls, jid, X):
    """(name, MJCF type, origin, child_pose, axis, q0, per-DOF numbers, params) of a <joint> or
    <freejoint> whose body sits at X in the chain's parent frame; a free joint's q0 is left to
    its body (JointColumns.add's caller). params: the MJCF type, and the actuatorfrcrange (lower,
    upper) MuJoCo clamps the joint's actuator force to (the effort limit is the larger bound)."""
    free = node.tag == "freejoint"
    a = node.attrib if free else r.attrs(node, "joint", cls)
    kind = "free" if free else a.get("type", "hinge")
    if kind not in _NV:
        r.choice(node, a, "type", tuple(_NV), "hinge")         # (raises: names the types)
    name = a.get("name") or f"joint{jid}"
    one_axis = kind in ("hinge", "slide")
    axis = r.unit_numbers(node, a, "axis") if one_axis and "axis" in a else _Z
    # a slide's anchor does not move anything; a free joint's is its body's origin
    angular = kind in ("hinge", "ball")
    pos = r.numbers(node, a, "pos", 3) if angular and "pos" in a else None
    # (an absent attribute is its default: most are, and so skip their readers)
    ref = r.number(node, a, "ref") if "ref" in a else 0.0
    if kind == "hinge" and ref:
        ref = r.angle(ref)
    origin, child_pose = X, EYE4
    if pos is not None and (pos[0] or pos[1] or pos[2]):       # (most joints sit at their body's origin)
        origin = X.copy()
        origin[:3, 3] += X[:3, :3] @ np.array(pos)
        child_pose = EYE4.copy()
        child_pose[:3, 3] = pos
    if kind == "hinge" and ref:
        origin = origin.copy()
        origin[:3, :3] = origin[:3, :3] @ axis_angle_to_matrix(axis, -ref)
    elif kind == "slide" and ref:
        origin = origin.copy()
        origin[:3, 3] -= origin[:3, :3] @ np.array(axis) * ref
    stiffness = r.number(node, a, "stiffness") if "stiffness" in a else 0.0
    springref = r.number(node, a, "springref") if "springref" in a else 0.0
    if kind == "hinge" and springref:
        springref = r.angle(springref)
    if stiffness and not one_axis:
        r.note(node, f"stiffness on a {kind} joint is not simulated")
    if "springdamper" in a:
        r.note(node, "springdamper (time constant, damping ratio) is not used; give stiffness and damping")
    lower, upper = -inf, inf
    if kind != "free":
        limited = a.get("limited", "auto")
        if limited not in ("auto", "true", "false"):
            r.choice(node, a, "limited", ("auto", "true", "false"), "auto")      # (raises)
        if limited == "true" or (limited == "auto" and r.compiler.autolimits and "range" in a):
            rng = r.numbers(node, a, "range", 2, (0.0, 0.0))
            if angular:
                rng = [r.angle(x) for x in rng]
            if kind == "ball":
                r.note(node, f"ball joint cone limit {rng[1]:g} rad is not enforced")
            elif not rng[0] < rng[1]:
                raise r.error(node, f"range=\"{a.get('range', '')}\": expected lower < upper for a limited joint")
            else:
                lower, upper = rng
    effort = inf
    params = {"mjcf_type": kind}
    if "actuatorfrcrange" in a and a.get("actuatorfrclimited", "auto") != "false" and one_axis:
        fr = r.numbers(node, a, "actuatorfrcrange", 2)
        effort = max(abs(fr[0]), abs(fr[1]))
        params["actuatorfrcrange"] = tuple(fr)
    number = r.number
    numbers = (lower, upper, effort, number(node, a, "damping") if "damping" in a else 0.0,
               stiffness if one_axis else 0.0, springref if one_axis else 0.0,
               number(node, a, "frictionloss") if "frictionloss" in a else 0.0,
               number(node, a, "armature") if "armature" in a else 0.0)
    q0 = (ref,) if one_axis else (0.0, 0.0, 0.0, 1.0) if kind == "ball" else None
    return name, kind, origin, child_pose, axis, q0, numbers, params
