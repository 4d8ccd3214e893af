"""SDFormat links and joints -> Model links and joints.

A link's frame is its SDF frame. A joint frame J (its pose, relative to the child link by
default) gives the Model joint origin = inv(X_W_parent) X_W_J and child_pose = inv(X_W_child)
X_W_J, so that at q = 0 every link is where the file puts it. Axes are turned into the joint
frame from the frame they are expressed in (1.7+ expressed_in; 1.5/1.6 use_parent_model_frame;
1.4: the model frame, as sdformat's 1.4 -> 1.5 converter says). A link no joint moves floats
(a free joint to the world, its q the link's pose) unless its model is static (welded).
"""
from __future__ import annotations

import math

import numpy as np

from ...model import CoordinateCoupler, Function, Joint, Link
from ...model.transforms import inverse_transform, make_transform, matrix_to_quat
from .document import UNBOUNDED, child, children, local
from .geometry import read_shape
from .scopes import MODEL_FRAME, WORLD

JOINT_TYPES = {"revolute": "revolute", "continuous": "revolute", "prismatic": "prismatic", "fixed": "fixed",
               "ball": "ball", "universal": "universal", "revolute2": "universal", "screw": "screw"}
LINK_CHILDREN = {"pose", "inertial", "collision", "visual", "sensor", "gravity", "self_collide", "kinematic",
                 "must_be_base_link", "velocity_decay", "enable_wind", "light", "projector", "audio_sink",
                 "audio_source", "battery", "particle_emitter", "frame", "visualize"}
JOINT_CHILDREN = {"pose", "parent", "child", "axis", "axis2", "physics", "sensor", "thread_pitch",
                  "screw_thread_pitch", "gearbox_ratio", "gearbox_reference_body"}
DEFAULT_DENSITY = 1000.0      # kg/m^3, SDFormat's <collision><density> default (auto inertia)


class Body:
    """A link as read: its scope, element, world name and world pose at q = 0."""

    def __init__(self, scope, el, local_name, name, X):
        self.scope, self.el, self.local, self.name, self.X = scope, el, local_name, name, X


def read_link(reader, body, sensors_reader=None):
    """A Model Link from a Body (inertial, collisions, visuals)."""
    scope, el = body.scope, body.el
    for c in el:
        tag = local(c)
        if tag in ("light", "projector", "audio_sink", "audio_source", "battery", "particle_emitter"):
            reader.ignore(c)
        elif tag == "kinematic" and reader.boolean(el, "kinematic"):
            reader.note(c, "kinematic links are simulated as dynamic ones")
        elif tag == "gravity" and not reader.boolean(el, "gravity", True):
            reader.note(c, "<gravity>false</gravity>: gravity still acts on this link")
        elif tag not in LINK_CHILDREN and isinstance(c.tag, str):
            reader.unknown_element(c, "<link>")
    visuals = [s for s in (read_shape(reader, scope, v, body.local, True) for v in children(el, "visual")) if s]
    collision_els = children(el, "collision")
    collisions = [read_shape(reader, scope, c, body.local, False) for c in collision_els]
    mass, com, inertia = _inertial(reader, scope, body, collision_els, collisions)
    return Link(body.name, mass=mass, com=com, inertia=inertia, visuals=visuals,
                collisions=[s for s in collisions if s is not None])


def _inertial(reader, scope, body, collision_els, collisions):
    """(mass, com, inertia about the com in the link frame). SDFormat's defaults: mass 1 and a
    unit inertia without <inertial>; auto="true" (1.11) computes it from the collisions."""
    inertial = child(body.el, "inertial")
    if inertial is None:
        return 1.0, np.zeros(3), np.eye(3)
    if (inertial.get("auto") or "").strip().lower() in ("true", "1"):
        return _auto_inertial(reader, inertial, collision_els, collisions)
    mass = reader.number(inertial, "mass", 1.0, nonnegative=True)
    X = scope.element_pose(inertial, body.local)
    I = child(inertial, "inertia")
    get = lambda k, d: reader.number(I, k, d) if I is not None else d
    Ic = np.array([[get("ixx", 1.0), get("ixy", 0.0), get("ixz", 0.0)],
                   [get("ixy", 0.0), get("iyy", 1.0), get("iyz", 0.0)],
                   [get("ixz", 0.0), get("iyz", 0.0), get("izz", 1.0)]])
    R = X[:3, :3]
    return mass, X[:3, 3].copy(), R @ Ic @ R.T


def _auto_inertial(reader, inertial, collision_els, collisions):
    """Mass properties of the collision shapes at their density (a given <mass> rescales them),
    as gz-sim's auto inertia does for primitives."""
    parts = []
    for el, shape in zip(collision_els, collisions):
        if shape is None:
            continue
        density = reader.number(el, "density", DEFAULT_DENSITY, positive=True)
        props = _solid(shape)
        if props is None:
            raise reader.error(el, f"auto inertia from a {shape.kind} collision is not supported; give the "
                                   "<inertial> its <mass> and <inertia>")
        volume, unit_I = props[:2]
        m = density * volume
        R, p = shape.pose[:3, :3], shape.pose[:3, 3] + shape.pose[:3, :3] @ (props[2] if len(props) > 2 else np.zeros(3))
        parts.append((m, p, R @ (m * unit_I) @ R.T))
    if not parts:
        raise reader.error(inertial, "auto=\"true\" with no collision to compute the inertia from")
    m = sum(x[0] for x in parts)
    c = sum(x[0] * x[1] for x in parts) / m
    I = sum(Ip + mp * ((pp - c) @ (pp - c) * np.eye(3) - np.outer(pp - c, pp - c)) for mp, pp, Ip in parts)
    given = child(inertial, "mass")
    if given is not None:
        scale = reader.number(inertial, "mass", positive=True) / m
        m, I = m * scale, I * scale
    return m, c, I


def _solid(shape):
    """(volume, inertia per unit mass about the centre in the shape frame) of a primitive."""
    if shape.kind == "box":
        a, b, c = shape.size
        return a * b * c, np.diag([b * b + c * c, a * a + c * c, a * a + b * b]) / 12.0
    if shape.kind == "sphere":
        r = shape.radius
        return 4.0 / 3.0 * math.pi * r ** 3, np.eye(3) * 0.4 * r * r
    if shape.kind == "cylinder":
        r, h = shape.radius, shape.length
        return math.pi * r * r * h, np.diag([(3 * r * r + h * h) / 12.0] * 2 + [r * r / 2.0])
    if shape.kind == "capsule":
        r, h = shape.radius, shape.length
        vc, vs = math.pi * r * r * h, 4.0 / 3.0 * math.pi * r ** 3
        mc, ms = vc / (vc + vs), vs / (vc + vs)
        ixx = mc * (3 * r * r + h * h) / 12.0 + ms * (0.4 * r * r + h * h / 4.0 + 3.0 * h * r / 8.0)
        izz = mc * r * r / 2.0 + ms * 0.4 * r * r
        return vc + vs, np.diag([ixx, ixx, izz])
    if shape.kind == "mesh" and shape.vertices is not None and shape.faces is not None and len(shape.faces):
        # a closed mesh by the divergence theorem: tetrahedra from the origin to each face
        V = np.asarray(shape.vertices, float)
        a, b, c = (V[shape.faces[:, k]] for k in range(3))
        v = np.einsum("ij,ij->i", a, np.cross(b, c)) / 6.0
        volume = float(v.sum())
        if abs(volume) < 1e-15:
            return None
        if volume < 0:            # faces wound inwards
            v, volume = -v, -volume
        centroid = ((a + b + c) * v[:, None]).sum(axis=0) / 4.0 / volume
        s_ = a + b + c
        C = (np.einsum("i,ij,ik->jk", v, a, a) + np.einsum("i,ij,ik->jk", v, b, b)
             + np.einsum("i,ij,ik->jk", v, c, c) + np.einsum("i,ij,ik->jk", v, s_, s_)) / 20.0
        I_origin = (np.trace(C) * np.eye(3) - C) / volume
        I_c = I_origin - (centroid @ centroid * np.eye(3) - np.outer(centroid, centroid))
        return volume, I_c, centroid
    if shape.kind == "cone":      # about its centroid, h/4 above the base (the Shape's frame is mid-height)
        r, h = shape.radius, shape.length
        ixx = 3.0 / 20.0 * r * r + 3.0 / 80.0 * h * h
        return math.pi * r * r * h / 3.0, np.diag([ixx, ixx, 0.3 * r * r]), np.array([0.0, 0.0, -h / 4.0])
    return None


# -- joints ------------------------------------------------------------------------------
def read_joint(reader, scope, el, name, bodies_by_key, X_scope, link_name):
    """(Joint or None for a gearbox, [CoordinateCoupler]) of a <joint> element."""
    sdf_type = (el.get("type") or "").strip()
    if not sdf_type:
        raise reader.error(el, "missing attribute type=\"...\"")
    if sdf_type == "gearbox":      # gz-physics' DART engine skips it as well
        reader.note(el, "a gearbox joint is not simulated: the two joints it couples move independently")
        return None, []
    if sdf_type not in JOINT_TYPES:
        raise reader.error(el, f"type \"{sdf_type}\": expected one of {', '.join(JOINT_TYPES)}")
    for c in el:
        if isinstance(c.tag, str) and local(c) not in JOINT_CHILDREN:
            reader.unknown_element(c, "<joint>")
        elif local(c) == "sensor":
            pass
    jtype = JOINT_TYPES[sdf_type]
    parent_text, child_text = reader.text(el, "parent"), reader.text(el, "child")
    if parent_text is None:
        raise reader.error(el, "missing <parent> (a link name or world)")
    if child_text is None:
        raise reader.error(el, "missing <child> (a link name)")
    parent = scope.link_of(parent_text, el)
    child_ = scope.link_of(child_text, el)
    if child_ is None:
        raise reader.error(el, "<child>world</child>: the world cannot be a joint's child")
    if parent is not None and parent == child_:
        raise reader.error(el, f"parent and child are the same link {link_name(*child_)!r}")
    parent_body = None if parent is None else bodies_by_key[(id(parent[0]), parent[1])]
    child_body = bodies_by_key[(id(child_[0]), child_[1])]
    X_W_J = X_scope @ scope.pose_of(el.get("name").strip(), el)
    X_W_P = np.eye(4) if parent_body is None else parent_body.X
    origin = inverse_transform(X_W_P) @ X_W_J
    child_pose = inverse_transform(child_body.X) @ X_W_J
    kw = {}
    couplers = []
    if jtype in ("revolute", "prismatic", "screw", "universal"):
        axes = [child(el, "axis")] + ([child(el, "axis2")] if jtype == "universal" else [])
        lims = [_axis(reader, scope, el, a, X_W_J, X_scope, sdf_type, k) for k, a in enumerate(axes)]
        kw["axis"] = lims[0]["axis"]
        if jtype == "universal":
            kw["axis2"] = lims[1]["axis"]
            if abs(float(kw["axis"] @ kw["axis2"])) > 1 - 1e-9:
                raise reader.error(el, "axis and axis2 are parallel; expected two different directions")
        for key in ("lower", "upper", "effort_limit", "velocity_limit", "damping", "friction", "stiffness",
                    "rest_position", "q0"):
            kw[key] = np.array([l[key] for l in lims])
        if sdf_type == "continuous":
            kw["lower"], kw["upper"] = np.full(1, -np.inf), np.full(1, np.inf)
        for k, l in enumerate(lims):
            if l["mimic"] is not None:
                couplers.append((k, l["mimic"]))
    if jtype == "screw":
        kw["pitch"] = _screw_pitch(reader, el)
    joint = Joint(name, jtype, None if parent_body is None else parent_body.name, child_body.name,
                  origin=origin, child_pose=child_pose, **kw)
    joint.params["sdf_type"] = sdf_type
    return joint, couplers


def _axis(reader, scope, joint_el, axis_el, X_W_J, X_scope, sdf_type, k):
    """Axis (unit, in the joint frame), limits, dynamics and mimic of <axis> or <axis2>."""
    out = dict(axis=np.array([0.0, 0.0, 1.0]), lower=-np.inf, upper=np.inf, effort_limit=np.inf,
               velocity_limit=np.inf, damping=0.0, friction=0.0, stiffness=0.0, rest_position=0.0, q0=0.0,
               mimic=None)
    if axis_el is None:
        if sdf_type in ("revolute", "prismatic", "continuous", "screw", "universal", "revolute2"):
            raise reader.error(joint_el, f"missing <{'axis' if k == 0 else 'axis2'}> (a {sdf_type} joint needs "
                                         "its axis)")
        return out
    xyz_el = child(axis_el, "xyz")
    xyz = reader.vector(xyz_el, 3) if xyz_el is not None and (xyz_el.text or "").strip() else np.array([0, 0, 1.0])
    if np.linalg.norm(xyz) < 1e-12:
        raise reader.error(xyz_el, "a zero axis; expected a direction")
    xyz = xyz / np.linalg.norm(xyz)
    expressed = (xyz_el.get("expressed_in") or "").strip() if xyz_el is not None else ""
    if scope.version < (1, 5):
        expressed = MODEL_FRAME
    elif scope.version < (1, 7) and reader.boolean(axis_el, "use_parent_model_frame", False):
        expressed = MODEL_FRAME
    if expressed:
        R_W_F = (np.eye(3) if expressed == WORLD else (X_scope @ scope.pose_of(expressed, xyz_el))[:3, :3])
        xyz = X_W_J[:3, :3].T @ R_W_F @ xyz
    out["axis"] = xyz
    lim = child(axis_el, "limit")
    if lim is not None and sdf_type != "continuous":
        lo, hi = reader.number(lim, "lower", -UNBOUNDED), reader.number(lim, "upper", UNBOUNDED)
        out["lower"] = -np.inf if lo <= -UNBOUNDED else lo
        out["upper"] = np.inf if hi >= UNBOUNDED else hi
        if out["lower"] > out["upper"]:
            raise reader.error(lim, f"lower {lo:g} > upper {hi:g}; expected lower <= upper")
    if lim is not None:
        effort, velocity = reader.number(lim, "effort", -1.0), reader.number(lim, "velocity", -1.0)
        out["effort_limit"] = np.inf if effort < 0 else effort      # -1: no limit
        out["velocity_limit"] = np.inf if velocity < 0 else velocity
    dyn = child(axis_el, "dynamics")
    if dyn is not None:
        out["damping"] = reader.number(dyn, "damping", 0.0, nonnegative=True)
        out["friction"] = reader.number(dyn, "friction", 0.0, nonnegative=True)
        out["stiffness"] = reader.number(dyn, "spring_stiffness", 0.0, nonnegative=True)
        out["rest_position"] = reader.number(dyn, "spring_reference", 0.0)
    out["q0"] = reader.number(axis_el, "initial_position", 0.0)
    mimic = child(axis_el, "mimic")
    if mimic is not None:
        leader = (mimic.get("joint") or "").strip()
        if not leader:
            raise reader.error(mimic, "missing attribute joint=\"...\" (the leader joint)")
        m = reader.number(mimic, "multiplier", 1.0)
        out["mimic"] = dict(el=mimic, leader=leader, axis=(mimic.get("axis") or "axis").strip(), multiplier=m,
                            offset=reader.number(mimic, "offset", 0.0) - m * reader.number(mimic, "reference", 0.0))
    return out


def _screw_pitch(reader, el):
    """Metres per revolution, right-handed (the Model's and DART's pitch): screw_thread_pitch
    as it is (1.10+); the older thread_pitch in radians per metre, positive for a left-handed
    thread (how gazebo-classic read it: sdformat's joint.sdf) -> -2 pi / thread_pitch."""
    if child(el, "screw_thread_pitch") is not None:
        return reader.number(el, "screw_thread_pitch")
    tp = reader.number(el, "thread_pitch", 1.0)
    if tp == 0:
        raise reader.error(child(el, "thread_pitch"), "0: expected a non-zero thread pitch")
    return -2.0 * math.pi / tp


def coupler(reader, joint, k, mimic, joint_names):
    """The CoordinateCoupler of a <mimic> on DOF k of `joint`: q = multiplier q_leader + offset."""
    leader = joint_names.get(mimic["leader"])
    if leader is None:
        raise reader.error(mimic["el"], f"leader joint {mimic['leader']!r} does not exist in this model")
    lj, index = leader
    if mimic["axis"] not in ("axis", "axis2"):
        raise reader.error(mimic["el"], f"axis=\"{mimic['axis']}\": expected axis or axis2")
    dof = 0 if mimic["axis"] == "axis" else 1
    if lj.nv <= dof or lj.type in ("ball", "free"):
        raise reader.error(mimic["el"], f"leader joint {mimic['leader']!r} has no {mimic['axis']}")
    name = lambda j, d: j.name if j.nv == 1 else f"{j.name}_{d}"
    return CoordinateCoupler(f"{joint.name}_mimic", name(joint, k), name(lj, dof),
                             Function.linear(mimic["multiplier"], mimic["offset"]))


def free_joint(name, body):
    """The free joint of a floating link: origin identity, q0 the link's pose in the world."""
    q0 = np.concatenate([body.X[:3, 3], matrix_to_quat(body.X[:3, :3])])
    return Joint(name, "free", None, body.name, q0=q0)


def weld(name, body):
    return Joint(name, "fixed", None, body.name, origin=body.X.copy())


__all__ = ["Body", "read_link", "read_joint", "coupler", "free_joint", "weld", "make_transform"]
