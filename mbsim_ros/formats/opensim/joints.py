"""Reading the joints and their coordinates: 3.x joints inside bodies, 4.x and 30501 JointSets
with their frames, each OpenSim joint type's coordinates, a CustomJoint's SpatialTransform and
the Function elements of its axes (a mixin of the Builder)."""
from __future__ import annotations

import math

import numpy as np
from lxml import etree

from ...model import Function, ModelError
from .functions import UNIT_AXES, natural_spline, scaled, simm_spline, step_function, xyz_pose
from .reader import JOINT_TYPES, as_converted, first_child, subelements

SQRT_EPS = 1.4901161193847656e-08      # SimTK::SqrtEps: OpenSim's slack on a clamped default value
COLLINEAR_TOL = 1e-5                   # CustomJoint axes with |a x b| below this are collinear (OpenSim)
_FUNCTION_TYPES = ("Constant", "LinearFunction", "PolynomialFunction", "SimmSpline", "NaturalCubicSpline",
                   "PiecewiseLinearFunction", "GCVSpline", "MultiplierFunction", "Sine", "StepFunction")


class _Coord:
    """One OpenSim coordinate of a joint, read."""
    __slots__ = ("name", "el", "joint", "index", "motion", "default", "speed", "range", "clamped",
                 "locked", "prescribed", "dof")

    def __init__(self, reader, joint, index, name, el):
        self.name, self.el, self.joint, self.index = name, el, joint, index
        self.motion = "rotational"
        self.dof = name
        src = el if el is not None else etree.Element("Coordinate")
        self.default = reader.number(src, "default_value", 0.0)
        self.speed = reader.number(src, "default_speed_value", 0.0)
        self.range = reader.numbers(src, "range", 2, [-10.0, 10.0], finite=False)
        self.clamped = reader.flag(src, "clamped", False)
        self.locked = reader.flag(src, "locked", False)
        function = reader.prop(src, "prescribed_function")
        self.prescribed = reader.flag(src, "prescribed", False) and function is not None and bool(subelements(function))
        if self.clamped and not (self.range[0] - SQRT_EPS <= self.default <= self.range[1] + SQRT_EPS):
            raise reader.error(el, f"default_value {self.default:g} is outside the range "
                                   f"[{self.range[0]:g}, {self.range[1]:g}] of this clamped coordinate")


class _JointInfo:
    """A joint as read: OpenSim type, ends, frames, coordinates, and a CustomJoint's axes."""
    __slots__ = ("el", "name", "type", "parent", "X_PF", "child", "X_BM", "coords", "axes", "reversed")

    def __init__(self, el, name, type_, parent, X_PF, child, X_BM):
        self.el, self.name, self.type = el, name, type_
        self.parent, self.X_PF, self.child, self.X_BM = parent, X_PF, child, X_BM
        self.coords, self.axes = [], None
        self.reversed = False     # the tree runs from its child to its parent (see orient_joints)

    def reverse(self):
        """Swap its ends: parent and child (with their frames) become the tree's."""
        self.parent, self.child = self.child, self.parent
        self.X_PF, self.X_BM = self.X_BM, self.X_PF
        self.reversed = not self.reversed


_COORDINATE_MOTIONS = {
    "WeldJoint": (), "PinJoint": ("rotational",), "SliderJoint": ("translational",),
    "UniversalJoint": ("rotational",) * 2, "GimbalJoint": ("rotational",) * 3,
    "BallJoint": ("rotational",) * 3, "EllipsoidJoint": ("rotational",) * 3,
    "ScapulothoracicJoint": ("rotational",) * 4,
    "FreeJoint": ("rotational",) * 3 + ("translational",) * 3,
    "PlanarJoint": ("rotational", "translational", "translational"),
}


class JointReading:
    """Builder's part that reads the joints and coordinates of the file."""

    # -- joints: reading -------------------------------------------------------------------
    def read_joints_3x(self):
        r = self.r
        out = []
        for body_name, body_el in self.bodies.items():
            holder = first_child(body_el, "Joint")
            inner = subelements(holder) if holder is not None else []
            if not inner:
                continue
            if len(inner) > 1:
                raise r.error(holder, f"{len(inner)} joints inside one <Joint>; expected one")
            el = inner[0]
            parent_name = r.text(el, "parent_body")
            if parent_name is None:
                raise r.error(el, "missing <parent_body>")
            parent_el = self.body_element(el, parent_name)
            parent, X_P = self.r.frame(parent_el)
            X_PF = X_P @ xyz_pose(as_converted(r.numbers(el, "location_in_parent", 3, [0, 0, 0])),
                                  as_converted(r.numbers(el, "orientation_in_parent", 3, [0, 0, 0])))
            X_BM = xyz_pose(as_converted(r.numbers(el, "location", 3, [0, 0, 0])),
                            as_converted(r.numbers(el, "orientation", 3, [0, 0, 0])))
            if r.flag(el, "reverse", False):
                # OpenSim 4 converts a 3.x reversed joint so: its parent frame is the one in the
                # body that holds it (location, orientation), its child frame the other one; the
                # tree then runs through it backwards (orient_joints)
                info = self.joint_info(el, body_name, X_BM, parent, X_PF)
                r.report("joint", info.name, "<reverse>true</reverse>: its frames on "
                                             f"{info.parent or 'ground'} (parent) and {info.child or 'ground'} (child), "
                                             "as OpenSim 4 converts it")
            else:
                info = self.joint_info(el, parent, X_PF, body_name, X_BM)
            out.append(info)
        return out

    def read_joints_4x(self):
        r = self.r
        joint_set = first_child(self.el, "JointSet")
        objects = first_child(joint_set, "objects")
        out = []
        for el in subelements(objects) if objects is not None else []:
            parent, X_PF = self.joint_end(el, "parent")
            child, X_BM = self.joint_end(el, "child")
            if r.flag(el, "reverse", False):
                r.warn(el, "<reverse>true</reverse> is not a property of a 4.x joint: ignored, as OpenSim 4.6 "
                           "ignores it (its frames say which body is the parent)")
            out.append(self.joint_info(el, parent, X_PF, child, X_BM))
        return out

    def joint_end(self, el, end):
        """(body or None, pose of the joint's parent or child frame in that body)."""
        r = self.r
        sock = None
        for tag in (f"socket_{end}_frame", f"socket_{end}_frame_connectee_name",
                    f"connector_{end}_frame_connectee_name"):
            sock = r.prop(el, tag)
            if sock is not None and (sock.text or "").strip():
                break
            sock = None
        if sock is None:
            connectors = first_child(el, "connectors")
            for c in subelements(connectors) if connectors is not None else []:
                if c.get("name") in (f"{end}_frame", f"{end}_body"):
                    sock = first_child(c, "connectee_name")
        if sock is None or not (sock.text or "").strip():
            raise r.error(el, f"missing <socket_{end}_frame> (the path of the joint's {end} frame)")
        body, X = r.frame(r.resolve(el, sock.text, sock))
        loc = "location_in_parent" if end == "parent" else "location_in_child"
        ori = "orientation_in_parent" if end == "parent" else "orientation_in_child"
        if r.prop(el, loc) is not None or r.prop(el, ori) is not None:     # the 30501 layout
            X = X @ xyz_pose(as_converted(r.numbers(el, loc, 3, [0, 0, 0])), as_converted(r.numbers(el, ori, 3, [0, 0, 0])))
        return body, X

    def joint_info(self, el, parent, X_PF, child, X_BM):
        r = self.r
        name = el.get("name")
        if not name:
            raise r.error(el, "a joint without a name=\"...\"")
        if el.tag not in JOINT_TYPES:
            raise r.error(el, f"unsupported joint type {el.tag!r}; expected one of {', '.join(JOINT_TYPES)}")
        if el in r.auto_named:
            r.warn(el, f"a {el.tag} without a name=\"...\": named {name!r} as OpenSim 4.6 does")
        info = _JointInfo(el, name, el.tag, parent, X_PF, child, X_BM)
        listed = self.coordinate_elements(el)
        if el.tag == "CustomJoint":
            self.read_spatial_transform(info, listed)
        else:
            motions = _COORDINATE_MOTIONS[el.tag]
            if len(listed) > len(motions):
                raise r.error(el, f"{len(listed)} coordinates; a {el.tag} has {len(motions)}")
            for k, motion in enumerate(motions):
                c_el = listed[k] if k < len(listed) else None
                # OpenSim's names for coordinates the file leaves out: "_coord_k" (it names them
                # before it reads the joint's name), "<joint>_coord_k" for a joint it adds itself
                # and "coordinate" (its class in lower case) for a <Coordinate name="">
                prefix = name if el.sourceline is None else ""
                c_name = f"{prefix}_coord_{k}" if c_el is None else c_el.get("name") or "coordinate"
                if c_el is not None and not c_el.get("name"):
                    r.warn(c_el, f"a Coordinate without a name: named {c_name!r} as OpenSim 4.6 does")
                c = _Coord(r, info, k, c_name, c_el)
                c.motion = motion
                info.coords.append(c)
        return info

    def coordinate_elements(self, el):
        holder = first_child(el, "coordinates")
        if holder is None:
            holder = first_child(first_child(el, "CoordinateSet"), "objects")
        return [c for c in subelements(holder) if c.tag == "Coordinate"] if holder is not None else []

    def read_spatial_transform(self, info, listed):
        """A CustomJoint's six TransformAxis (axis, coordinate name or None, Function) and its
        coordinates, in the order they first appear in the transform (as OpenSim orders them)."""
        r = self.r
        st = first_child(info.el, "SpatialTransform")
        if st is None:
            raise r.error(info.el, "a CustomJoint without a <SpatialTransform>")
        by_name = {}
        for ta in subelements(st):
            if ta.tag == "TransformAxis":
                by_name[ta.get("name")] = ta
        slots = ("rotation1", "rotation2", "rotation3", "translation1", "translation2", "translation3")
        axes, order = [], []
        for k, slot in enumerate(slots):
            ta = by_name.get(slot)
            default_axis = UNIT_AXES[k % 3]
            if ta is None:
                axes.append((default_axis, None, Function.constant(0.0), None))
                continue
            axis = r.numbers(ta, "axis", 3, default_axis)
            if np.linalg.norm(axis) < 1e-12:
                raise r.error(ta, "a zero <axis>")
            names = (r.text(ta, "coordinates") or "").split()
            if len(names) > 1:
                raise r.error(ta, f"depends on {len(names)} coordinates ({', '.join(names)}); only "
                                  "functions of one coordinate are supported")
            coord = names[0] if names else None
            fel = self.function_element(ta)
            if fel is None:
                # OpenSim 4 gives a TransformAxis without a function the constant 0, even with
                # a coordinate (its source suggests a LinearFunction; what it simulates is 0)
                f = Function.constant(0.0)
                if coord:
                    r.warn(ta, f"no function: the axis does not move with {coord!r} (OpenSim 4 uses the "
                               "constant 0); give a <LinearFunction> to move it")
            else:
                f = self.function(fel)
            axes.append((axis / np.linalg.norm(axis), coord, f, fel))
            if coord and coord not in order:
                order.append(coord)
        for start in (0, 3):
            a = [axes[start + i][0] for i in range(3)]
            for i, j in ((0, 1), (0, 2), (1, 2)):
                if np.linalg.norm(np.cross(a[i], a[j])) < COLLINEAR_TOL:
                    raise r.error(st, f"{slots[start + i]} and {slots[start + j]} have collinear axes "
                                      f"{a[i].tolist()} and {a[j].tolist()}; expected three independent "
                                      f"{'rotation' if start == 0 else 'translation'} axes")
        listed_by_name = {c.get("name"): c for c in listed}
        for c in listed:
            if c.get("name") not in order:
                raise r.error(c, f"coordinate {c.get('name')!r} of CustomJoint {info.name!r} drives none of "
                                 "its transform axes")
        if not order:
            raise r.error(info.el, "a CustomJoint whose transform axes use no coordinate (expected 1 to 6)")
        for k, c_name in enumerate(order):
            c = _Coord(r, info, k, c_name, listed_by_name.get(c_name))
            # OpenSim's rule (CustomJoint::constructCoordinates): a coordinate on an axis with a
            # LinearFunction of slope +-1 is rotational or translational by that axis (the
            # last such axis wins), otherwise coupled
            motion = None
            for j, (_, coord, f, fel) in enumerate(axes):
                if coord != c_name:
                    continue
                if fel is not None and fel.tag == "LinearFunction" and f.coefs[0, 1] in (1.0, -1.0):
                    motion = "rotational" if j < 3 else "translational"
                elif motion is None:
                    motion = "coupled"
            c.motion = motion or "coupled"
            info.coords.append(c)
        info.axes = [(axis, -1 if coord is None else order.index(coord), f) for axis, coord, f, _ in axes]

    def function_element(self, holder):
        """The function element of a TransformAxis or MultiplierFunction: a child named by its
        type (4.x), or the one element inside a <function> wrapper (3.x)."""
        for c in subelements(holder):
            if c.tag == "function":
                inner = subelements(c)
                return inner[0] if inner else None
        for c in subelements(holder):
            if c.tag not in ("coordinates", "axis", "scale", "coefficients") and (
                    c.get("name") == "function" or c.tag in _FUNCTION_TYPES):
                return c
        return None

    def function(self, el):
        """An OpenSim function element -> Function (see the module docstring)."""
        r = self.r
        tag = el.tag
        try:
            if tag == "Constant":
                return Function.constant(r.number(el, "value", 0.0))
            if tag == "LinearFunction":
                slope, intercept = r.numbers(el, "coefficients", 2, [1.0, 0.0])
                return Function.linear(slope, intercept)
            if tag == "PolynomialFunction":
                c = r.numbers(el, "coefficients", None, [0.0])
                return Function.polynomial(c[::-1])        # OpenSim lists decreasing powers
            if tag in ("SimmSpline", "NaturalCubicSpline"):
                return simm_spline(r.numbers(el, "x"), r.numbers(el, "y"))
            if tag == "PiecewiseLinearFunction":
                return Function.piecewise_linear(r.numbers(el, "x"), r.numbers(el, "y"), extrapolate="linear")
            if tag == "GCVSpline":
                if r.prop(el, "half_order") is not None:
                    m = int(r.number(el, "half_order"))
                else:
                    m = (int(r.number(el, "degree", 5.0)) + 1) // 2
                variance = r.number(el, "error_variance", 0.0)
                if variance != 0.0:
                    self.r.warn(el, f"error_variance {variance:g}: a smoothing GCVSpline is read as the "
                                    "interpolating spline through its points")
                return natural_spline(r.numbers(el, "x"), r.numbers(el, "y"), m)
            if tag == "MultiplierFunction":
                inner = self.function_element(el)
                if inner is None:
                    raise r.error(el, "a MultiplierFunction without a <function>")
                return scaled(self.function(inner), r.number(el, "scale", 1.0))
            if tag == "Sine":
                return Function.sine(r.number(el, "amplitude", 1.0), r.number(el, "omega", 1.0) / (2 * math.pi),
                                     r.number(el, "phase", 0.0), r.number(el, "offset", 0.0))
            if tag == "StepFunction":
                return step_function(r.number(el, "transition_start_time", 0.99), r.number(el, "transition_end_time", 1.01),
                                     r.number(el, "start_value", 0.0), r.number(el, "end_value", 1.0))
        except ModelError as exc:
            if str(exc).startswith(r.name):
                raise
            raise r.error(el, str(exc)) from None
        raise r.error(el, f"unknown function type {tag!r}; expected one of {', '.join(_FUNCTION_TYPES)}")
