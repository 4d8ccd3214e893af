"""OpenSim models (.osim) in: `load_opensim(path, visuals="meshes", collide=False,
activate_actuators=False, z_up=False)` -> a finalized Model.

Formats: 3.x (Version < 30500: ground is a Body named "ground", each joint sits in its child
Body with parent_body, location/orientation_in_parent and location/orientation), the 30501
transitional layout (a JointSet with <connectors> and location_in_child), and 4.x (Ground,
BodySet, JointSet with socket_parent_frame/socket_child_frame naming PhysicalOffsetFrames or
StationDefinedFrames by absolute or relative path; older files may name frames and bodies).
Bodies may come in any order. Objects in <defaults> are templates: their properties fill in
what an object of the same type omits, as OpenSim does; they are never objects of the model.
From 3.x and 30501 files the joint and bushing locations and orientations and the six inertia
scalars are rounded to 6 significant digits: OpenSim 4 converts them so, and simulates that.

The world is OpenSim's ground frame (y up, gravity from the file), so poses are OpenSim's; with
z_up=True the model is turned so that its +y is the world's +z (gravity too), to stand in a
z-up world beside other models.

Names: links are the bodies; the ground is the world (joints on it have parent None), plus a
massless link "ground" welded to the world that carries the ground's geometry, contact
half-spaces and the ground end of loop constraints. Model.dof_names are the OpenSim coordinate
names; a name used by two joints becomes "<joint>/<coordinate>" for both. As in OpenSim, a
second joint of the same name is renamed <name>_0, <name>_1, ... and a coordinate the file
leaves out is called _coord_<k>; a joint or coordinate without a name (or with name="") is
named after its class in lower case (pinjoint, weldjoint, coordinate), as OpenSim 4.6 does. Markers become Model.frames.

Joints (OpenSim -> Model; each keeps OpenSim's coordinate values as its q):
    WeldJoint      -> fixed
    PinJoint       -> revolute about z of the joint frames
    SliderJoint    -> prismatic along x
    UniversalJoint -> universal: x, then the new y
    GimbalJoint    -> euler "xyz" (body-fixed X-Y-Z; OpenSim's speeds are the angle rates too)
    BallJoint      -> euler "xyz": OpenSim's coordinates are these body-fixed angles (it uses
                      Euler angles by default); its speeds u are the angular velocity in the
                      parent frame, ours the angle rates (v0 converted, qdd = OpenSim's q-double-dot)
    FreeJoint      -> custom: rotations x, y, z body-fixed, then translations along the parent
                      frame's x, y, z (OpenSim's coordinates; rotation speeds as for BallJoint)
    PlanarJoint    -> planar, normal z: q = (tx, ty, rz), OpenSim's rz, tx, ty reordered
    CustomJoint    -> custom: the SpatialTransform exactly, coordinates in the order they first
                      appear in it (OpenSim reorders them so too); functions below; an axis
                      without a function is the constant 0, as OpenSim 4 simulates it
    EllipsoidJoint -> custom: x-y-z body-fixed rotations with Joint.ellipsoid_radii (Simbody's
                      Ellipsoid mobilizer: the child frame's origin at diag(radii) R z)
    ScapulothoracicJoint -> as Simbody builds it: the custom ellipsoid joint "<name>" (abduction,
                      elevation, upward rotation; parent frame turned +90 deg about z, radii
                      (ry, rx, rz)) to a massless link "<name>_ellipsoid", then the revolute
                      "<name>_winging" about the winging axis to the child
A joint whose child frame is nearer the ground than its parent frame (and a 3.x joint with
<reverse>true</reverse>, whose frames OpenSim 4 swaps) is traversed backwards, as Simbody
reverses the mobilizer: J'(q) = inv(X_FM(q)), the coordinates keeping their sense (rotation-only
and translation-only joints; others are refused by name). A 4.x <reverse> is ignored, as OpenSim
4.6 ignores it.
Joint.origin is the parent frame in the parent body (X_PF), Joint.child_pose the child frame in
the child body (X_BM). A body without a joint gets OpenSim's FreeJoint "free_<body>" to ground.

Functions -> elements.Function ppoly, evaluating as OpenSim does (value and derivatives):
Constant, LinearFunction (slope, intercept), PolynomialFunction (coefficients of decreasing
powers), SimmSpline and NaturalCubicSpline (both OpenSim's SimmSpline algorithm: end third
derivatives from divided differences, linear extrapolation, 2 points linear),
PiecewiseLinearFunction (linear extrapolation), GCVSpline (OpenSim fits the natural spline of
degree 2 half_order - 1 through the points; outside it is the polynomial of degree
half_order - 1 that continues it), MultiplierFunction (scale folded in), Sine, StepFunction.
Any other type is a ModelError naming the element and line.

Coordinates: default_value -> q0, default_speed_value -> v0, locked -> Joint.locked per DOF.
`range` and `clamped` are kept in Joint.params ("range", "clamped") only: OpenSim never enforces
a range in dynamics (clamped limits assembly and setValue), so neither do we; a clamped
default value outside its range is a ModelError, as in OpenSim. prescribed: reported, not
simulated.

Forces (disabled ones, appliesForce false or isDisabled true, are skipped):
    CoordinateLimitForce   -> elements.CoordinateLimitForce (degrees converted to SI)
    SpringGeneralizedForce -> the DOF's Joint stiffness, rest_position and damping
    BushingForce           -> elements.Bushing
    PointToPointSpring     -> elements.SpringDamper
    PointActuator, TorqueActuator, CoordinateActuator -> elements.Actuator (gain = optimal_force;
                              control 0, or 1 with activate_actuators=True as Chrono's switch);
                              a CoordinateActuator on a Ball/Free rotation is the torque about
                              the parent-frame axis it drives in OpenSim
    HuntCrossleyForce, SmoothSphereHalfSpaceForce -> collision shapes of their ContactSphere /
                              ContactHalfSpace geometry (sphere; plane) and
                              model.contact_method = "penalty" (the solver's own stiffness)
    muscles and anything else -> model.report: not simulated
Constraints: CoordinateCouplerConstraint (one independent coordinate) -> elements.CoordinateCoupler
(the dependent default value set from the independent one); PointOnLineConstraint ->
LoopConstraint point_line; PointConstraint -> ball; WeldConstraint -> weld;
ConstantDistanceConstraint -> distance; others: reported, not simulated.

Geometry: visuals="meshes" (default): the file's Mesh (.vtp, .obj, .stl) files, resolved beside
the model and in a Geometry/ folder beside it (each missing file a warning; the shape keeps
mesh_path), with scale factors, and its Sphere, Brick, Cylinder, Ellipsoid and Cone; "primitives":
a sphere at each body origin and cylinders from it to the body's joint frames (Chrono's
picture); "none". collide=True adds those cylinders as collision shapes with collision families
alternating by tree depth (1, 2, 1, ...; a link ignores the other family), as Chrono does.

Every element read lands in model.report as (section, name, what) for `mbsim info`.
"""
from __future__ import annotations

import math
import os
import re
import warnings

import numpy as np
from lxml import etree

from ..model import (Actuator, Bushing, CoordinateCoupler, CoordinateLimitForce, Frame, Function,
                     Joint, Link, LoopConstraint, Model, ModelError, Shape, SpringDamper,
                     TransformAxis, numbers_text)
from ..model.transforms import axis_angle_to_matrix, make_transform
from .meshes import MeshError, load_mesh

DEG = math.pi / 180.0
SQRT_EPS = 1.4901161193847656e-08      # SimTK::SqrtEps: OpenSim's slack on a clamped default value
COLLINEAR_TOL = 1e-5                   # CustomJoint axes with |a x b| below this are collinear (OpenSim)
PRIMITIVE_SPHERE = 0.05                # m: radius of the sphere drawn at each body origin
PRIMITIVE_CYLINDER = 0.02              # m: radius of the cylinders to the joint frames (Chrono's)
COLLISION_FAMILIES = (1, 2)            # Chrono's default families, alternating by tree depth
VISUALS = ("meshes", "primitives", "none")

# a Set element without a name attribute has OpenSim's default name
_SET_NAMES = {"BodySet": "bodyset", "JointSet": "jointset", "ForceSet": "forceset",
              "ConstraintSet": "constraintset", "ContactGeometrySet": "contactgeometryset",
              "MarkerSet": "markerset", "ControllerSet": "controllerset", "ProbeSet": "probeset",
              "ComponentSet": "componentset", "FrameSet": "frameset"}
_FRAME_TYPES = ("Ground", "Body", "PhysicalOffsetFrame", "OffsetFrame", "StationDefinedFrame")
_JOINT_TYPES = ("WeldJoint", "PinJoint", "SliderJoint", "UniversalJoint", "GimbalJoint", "BallJoint",
                "FreeJoint", "PlanarJoint", "CustomJoint", "EllipsoidJoint", "ScapulothoracicJoint")
_FUNCTION_TYPES = ("Constant", "LinearFunction", "PolynomialFunction", "SimmSpline", "NaturalCubicSpline",
                   "PiecewiseLinearFunction", "GCVSpline", "MultiplierFunction", "Sine", "StepFunction")
_MUSCLE_WORDS = ("Muscle", "Ligament", "PathSpring", "PathActuator")


# =========================================================================================
# Functions
# =========================================================================================
def simm_spline(x, y):
    """OpenSim's SimmSpline (and NaturalCubicSpline) as a Function: the cubic spline whose end
    third derivatives match divided differences (Forsythe, Malcolm and Moler), extrapolated
    linearly; two points give the line through them. Port of SimmSpline::calcCoefficients."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    n = x.size
    if n < 2 or y.size != n:
        raise ModelError(f"a spline needs two or more (x, y) pairs of equal length, got {n} x and {y.size} y")
    if not np.all(np.diff(x) > 0):
        raise ModelError(f"spline x values must increase strictly, got {x.tolist()}")
    if n == 2:
        return Function.piecewise_linear(x, y, extrapolate="linear")
    b, c, d = np.zeros(n), np.zeros(n), np.zeros(n)
    nm1, nm2 = n - 1, n - 2
    d[0] = x[1] - x[0]
    c[1] = (y[1] - y[0]) / d[0]
    for i in range(1, nm1):
        d[i] = x[i + 1] - x[i]
        b[i] = 2.0 * (d[i - 1] + d[i])
        c[i + 1] = (y[i + 1] - y[i]) / d[i]
        c[i] = c[i + 1] - c[i]
    b[0], b[nm1] = -d[0], -d[nm2]
    c[0] = c[nm1] = 0.0
    if n > 3:
        d31, d20 = x[3] - x[1], x[2] - x[0]
        d1, d2 = x[nm1] - x[n - 3], x[nm2] - x[n - 4]
        d30, d3 = x[3] - x[0], x[nm1] - x[n - 4]
        c[0] = c[2] / d31 - c[1] / d20
        c[nm1] = c[nm2] / d1 - c[n - 3] / d2
        c[0] = c[0] * d[0] * d[0] / d30
        c[nm1] = -c[nm1] * d[nm2] * d[nm2] / d3
    for i in range(1, n):
        t = d[i - 1] / b[i - 1]
        b[i] -= t * d[i - 1]
        c[i] -= t * c[i - 1]
    c[nm1] /= b[nm1]
    for i in range(nm2, -1, -1):
        c[i] = (c[i] - d[i] * c[i + 1]) / b[i]
    for i in range(nm1):
        b[i] = (y[i + 1] - y[i]) / d[i] - d[i] * (c[i + 1] + 2.0 * c[i])
        d[i] = (c[i + 1] - c[i]) / d[i]
        c[i] *= 3.0
    coefs = np.stack([y[:-1], b[:-1], c[:-1], d[:-1]], axis=1)
    return Function(breaks=x, coefs=coefs, extrapolate="linear")


def natural_spline(x, y, half_order):
    """OpenSim's GCVSpline with error_variance 0: the natural spline of degree 2m - 1 (m the
    half order) through the points; outside them, the polynomial of degree m - 1 that
    continues it (constant for m = 1, linear for m = 2, one extra piece each side beyond)."""
    from scipy.interpolate import PPoly, make_interp_spline
    x, y = np.asarray(x, float), np.asarray(y, float)
    m = int(half_order)
    if not 1 <= m <= 4:
        raise ModelError(f"GCVSpline half_order {m}: expected 1 to 4 (degree 1, 3, 5 or 7)")
    if x.size < 2 * m or y.size != x.size:
        raise ModelError(f"GCVSpline of degree {2 * m - 1} needs {2 * m} or more (x, y) pairs of "
                         f"equal length, got {x.size} x and {y.size} y")
    if not np.all(np.diff(x) > 0):
        raise ModelError(f"spline x values must increase strictly, got {x.tolist()}")
    k = 2 * m - 1
    ends = [(j, 0.0) for j in range(m, 2 * m - 1)] or None
    spline = make_interp_spline(x, y, k=k, bc_type=(ends, ends) if ends else None)
    pp = PPoly.from_spline(spline)
    keep = (pp.x[:-1] >= x[0]) & (pp.x[1:] <= x[-1]) & (np.diff(pp.x) > 0)
    coefs = pp.c[::-1, keep].T.copy()       # ascending powers of (x - x_k)
    breaks = x
    if m <= 2:
        return Function(breaks=breaks, coefs=coefs, extrapolate="constant" if m == 1 else "linear")
    # degree m - 1 continuation: the Taylor polynomial at each end, one piece of width 1 outside
    # that "extend" continues
    spline_end = Function(breaks=breaks, coefs=coefs, extrapolate="extend")
    left = _taylor(spline_end, x[0], m, x[0] - 1.0)
    right = _taylor(spline_end, x[-1], m, x[-1])
    order = coefs.shape[1]
    pad = lambda c: np.concatenate([c, np.zeros(order - c.size)])   # noqa: E731
    coefs = np.vstack([pad(left), coefs, pad(right)])
    return Function(breaks=np.concatenate([[x[0] - 1.0], breaks, [x[-1] + 1.0]]), coefs=coefs,
                    extrapolate="extend")


def _taylor(f, at, m, about):
    """Ascending coefficients in (x - about) of f's Taylor polynomial of degree m - 1 at `at`."""
    derivs = [float(_derivative(f, at, j)) for j in range(m)]
    # p(x) = sum_j d_j/j! (x - at)^j with x - at = (x - about) + (about - at)
    h = about - at
    out = np.zeros(m)
    for j, dj in enumerate(derivs):
        a = dj / math.factorial(j)
        for i in range(j + 1):
            out[i] += a * math.comb(j, i) * h ** (j - i)
    return out


def _derivative(f, x, j):
    """j-th derivative of a ppoly Function at x (any j; Function.__call__ stops at 2)."""
    k = int(np.clip(np.searchsorted(f.breaks, x, side="right") - 1, 0, f.coefs.shape[0] - 1))
    dx = x - f.breaks[k]
    c = f.coefs[k]
    return sum(math.perm(p, j) * c[p] * dx ** (p - j) for p in range(j, c.size))


def step_function(x0, x1, y0, y1):
    """SimTK's Function::Step: y0 below x0, y1 above x1, the quintic smooth step between."""
    if not x1 > x0:
        raise ModelError(f"StepFunction: transition_end_time {x1} must be after transition_start_time {x0}")
    h, dy = x1 - x0, y1 - y0
    # y0 + dy (10 s^3 - 15 s^4 + 6 s^5), s = (x - x0) / h
    coefs = [[y0, 0.0, 0.0, 10.0 * dy / h ** 3, -15.0 * dy / h ** 4, 6.0 * dy / h ** 5]]
    return Function(breaks=[x0, x1], coefs=coefs, extrapolate="constant")


def scaled(f, scale):
    """f times a constant (MultiplierFunction)."""
    if f.kind == "sine":
        return Function.sine(f.amplitude * scale, f.frequency, f.phase, f.offset * scale)
    return Function(breaks=f.breaks, coefs=f.coefs * scale, extrapolate=f.extrapolate)


# =========================================================================================
# small helpers
# =========================================================================================
def xyz_rotation(angles):
    """OpenSim's orientation: body-fixed X-Y-Z rotations, R = Rx(a) Ry(b) Rz(c)."""
    a, b, c = (float(v) for v in angles)
    ca, sa, cb, sb, cc, sc = math.cos(a), math.sin(a), math.cos(b), math.sin(b), math.cos(c), math.sin(c)
    Rx = np.array([[1, 0, 0], [0, ca, -sa], [0, sa, ca]])
    Ry = np.array([[cb, 0, sb], [0, 1, 0], [-sb, 0, cb]])
    Rz = np.array([[cc, -sc, 0], [sc, cc, 0], [0, 0, 1]])
    return Rx @ Ry @ Rz


def xyz_rates(angles, omega):
    """Body-fixed X-Y-Z angle rates from the angular velocity expressed in the parent frame:
    omega = qd0 x + qd1 Rx(q0) y + qd2 Rx(q0) Ry(q1) z."""
    a, b = float(angles[0]), float(angles[1])
    Rx = xyz_rotation((a, 0, 0))
    E = np.column_stack([[1.0, 0, 0], Rx[:, 1], Rx @ xyz_rotation((0, b, 0))[:, 2]])
    return np.linalg.lstsq(E, np.asarray(omega, float), rcond=None)[0]


def _pose(translation, orientation):
    return make_transform(xyz_rotation(orientation), translation)


def as_converted(values):
    """Numbers as OpenSim 4 reads them from a 3.x (or 30501) file: its conversion writes joint
    and bushing locations and orientations and the six inertia scalars back as text with 6
    significant digits, so OpenSim simulates the rounded values; so do we."""
    return np.array([float(f"{v:.6g}") for v in np.asarray(values, float).reshape(-1)])


def _ellipsoid_axes():
    """Transform axes of Simbody's Ellipsoid mobilizer with OpenSim's coordinates: body-fixed
    x-y-z rotations by the three coordinates, no translation axes (the ellipsoid gives it)."""
    lin = Function.linear(1.0, 0.0)
    return ([TransformAxis(_UNIT[k], k, lin) for k in range(3)]
            + [TransformAxis(_UNIT[k], -1, Function.constant(0.0)) for k in range(3)])


def _axis_rotation_to_z(direction):
    """A rotation whose z axis is the unit vector `direction`."""
    z = direction / np.linalg.norm(direction)
    e = np.array([1.0, 0, 0]) if abs(z[0]) < 0.9 else np.array([0, 1.0, 0])
    x = np.cross(e, z)
    x /= np.linalg.norm(x)
    return np.column_stack([x, np.cross(z, x), z])


_ROT_Y_TO_Z = make_transform(xyz_rotation((-math.pi / 2, 0, 0)))   # OpenSim's y-axis shapes -> our z
_ROT_HALFSPACE = make_transform(xyz_rotation((0, -math.pi / 2, 0)))   # half-space x < 0 outside -> plane normal +z


def _elements(el):
    return [c for c in el if isinstance(c.tag, str)]


def _child(el, tag):
    if el is None:
        return None
    for c in el:
        if c.tag == tag:
            return c
    return None


def _describe(el):
    name = el.get("name")
    return f"<{el.tag.replace('__', '::')} name=\"{name}\">" if name is not None else f"<{el.tag.replace('__', '::')}>"


def _unique_name(name, taken):
    out, k = name, 1
    while out in taken:
        k += 1
        out = f"{name}_{k}"
    return out


# =========================================================================================
# Reading
# =========================================================================================
class _Reader:
    """Parsing state: the file (for messages), the component index and the model being built."""

    def __init__(self, path, visuals, collide, activate_actuators):
        if visuals not in VISUALS:
            raise ValueError(f"visuals={visuals!r}: expected one of {', '.join(VISUALS)}")
        self.path = os.path.abspath(path)
        self.name = os.fspath(path)
        self.folder = os.path.dirname(self.path)
        self.visuals = visuals
        self.collide = bool(collide)
        self.activate = bool(activate_actuators)
        self.model = None
        self.version = 0
        self.defaults = {}          # type -> template element from <defaults>
        self.path_of = {}           # element -> component path
        self.by_path = {}           # component path -> element
        self.by_name = {}           # name -> [elements] of frames, stations and bodies
        self.frame_cache = {}       # path -> (body or None, 4x4)
        self.mesh_cache = {}
        self.missing_meshes = []
        self.auto_named = set()     # joints the file leaves unnamed, named by index() as OpenSim does

    # -- messages ------------------------------------------------------------------------
    def where(self, el):
        return f"{self.name}, line {el.sourceline}, {_describe(el)}"

    def error(self, el, expected):
        return ModelError(f"{self.where(el)}: {expected}")

    def warn(self, el, message, emit=True):
        text = f"{self.where(el)}: {message}" if el is not None else f"{self.name}: {message}"
        self.model.warnings.append(text)
        if emit:
            warnings.warn(text, stacklevel=4)

    def report(self, section, name, what):
        self.model.report.append((section, name, what))

    # -- properties ----------------------------------------------------------------------
    def prop(self, el, tag):
        """The property element `tag` of `el`, else of the <defaults> template of el's type."""
        c = _child(el, tag)
        if c is None and el is not None and el.tag in self.defaults:
            c = _child(self.defaults[el.tag], tag)
        return c

    def text(self, el, tag, default=None):
        c = self.prop(el, tag)
        if c is None or c.text is None or not c.text.strip():
            return default
        return c.text.strip()

    def numbers(self, el, tag, n=None, default=None, finite=True):
        """The numbers of property `tag` (n of them when n is given); default when absent."""
        c = self.prop(el, tag)
        if c is None or c.text is None or not c.text.strip():
            if default is None:
                raise self.error(el, f"missing <{tag}> ({'numbers' if n is None else numbers_text(n)})")
            return np.array(default, dtype=float)
        where = f"{self.where(c)} of {_describe(el)}" if c.getparent() is el else self.where(c)
        try:
            values = np.array([float(w) for w in c.text.replace(",", " ").split()])
        except ValueError:
            raise ModelError(f"{where}: <{tag}>{c.text.strip()}</{tag}>: expected numbers") from None
        if n is not None and values.size != n:
            raise ModelError(f"{where}: <{tag}>{c.text.strip()}</{tag}>: expected {numbers_text(n)}, got {values.size}")
        if finite and not np.all(np.isfinite(values)):
            raise ModelError(f"{where}: <{tag}>{c.text.strip()}</{tag}>: expected finite numbers")
        return values

    def number(self, el, tag, default=None, finite=True):
        return float(self.numbers(el, tag, 1, None if default is None else [default], finite)[0])

    def flag(self, el, tag, default=False):
        t = self.text(el, tag)
        if t is None:
            return default
        if t.lower() in ("true", "1"):
            return True
        if t.lower() in ("false", "0"):
            return False
        raise ModelError(f"{self.where(self.prop(el, tag))} of {_describe(el)}: <{tag}>{t}</{tag}>: expected true or false")

    def enabled(self, el):
        """False for a force or constraint switched off (appliesForce, isEnforced, isDisabled)."""
        if self.text(el, "appliesForce") is not None:
            return self.flag(el, "appliesForce", True)
        if self.text(el, "isEnforced") is not None:
            return self.flag(el, "isEnforced", True)
        return not self.flag(el, "isDisabled", False)

    # -- component paths (4.x) ------------------------------------------------------------
    def index(self, model_el):
        """Component paths of every named element below <Model> (outside <defaults>)."""
        by_path, path_of, by_name = self.by_path, self.path_of, self.by_name

        def walk(el, path):
            for c in el:
                tag = c.tag
                if not isinstance(tag, str) or tag == "defaults":
                    continue
                name = c.get("name")
                if name is None:
                    name = _SET_NAMES.get(tag)
                if not name and tag in _JOINT_TYPES:
                    # OpenSim 4.6 names a joint without a name (or with name="") after its class
                    # in lower case, a second one _0, _1, ...
                    name, k = tag.lower(), 0
                    while f"{path}/{name}" in by_path:
                        name, k = f"{tag.lower()}_{k}", k + 1
                    c.set("name", name)
                    self.auto_named.add(c)
                if name is not None:
                    p = f"{path}/{name}"
                    path_of[c] = p
                    by_path.setdefault(p, c)
                    if tag in _FRAME_TYPES or tag == "Station":
                        by_name.setdefault(name, []).append(c)
                    walk(c, p)
                else:
                    walk(c, path)
        walk(model_el, "")

    def resolve(self, owner, text, socket_el=None, kinds=_FRAME_TYPES):
        """The element a socket of `owner` names: an absolute path, a path relative to the
        owner, or (older files) a plain name. "ground" is the ground even without an element."""
        where = socket_el if socket_el is not None else owner
        text = (text or "").strip()
        if not text:
            raise self.error(where, "empty socket: expected the path of a frame")
        if text.startswith("/"):
            path = text
        else:
            parts = self.path_of.get(owner, "").split("/")
            for seg in text.split("/"):
                if seg == "..":
                    parts = parts[:-1]
                elif seg not in ("", "."):
                    parts.append(seg)
            path = "/".join(parts)
        el = self.by_path.get(path.rstrip("/") or "/")
        if el is not None and (kinds is None or el.tag in kinds):
            return el
        last = text.rstrip("/").split("/")[-1]
        if last == "ground" and text in ("/ground", "ground", "../ground") and (kinds is None or "Ground" in kinds):
            return self.ground_el
        of = f" of {_describe(owner)}" if where is not owner else ""
        if self.version >= 30505:       # OpenSim 4 resolves paths only
            raise ModelError(f"{self.where(where)}{of}: socket {text!r}: no "
                             f"{' or '.join(kinds) if kinds else 'component'} at {path!r}"
                             + (" (relative paths start at the component that names them)" if not text.startswith("/") else ""))
        found = [e for e in self.by_name.get(last, []) if kinds is None or e.tag in kinds]
        bodies = [e for e in found if e.tag in ("Body", "Ground")]
        if len(found) == 1 or len(bodies) == 1:      # older files name frames and bodies by name
            return found[0] if len(found) == 1 else bodies[0]
        raise ModelError(f"{self.where(where)}{of}: socket {text!r}: no {' or '.join(kinds) if kinds else 'component'} "
                         f"at that path" + (f" ({len(found)} candidates named {last!r})" if found else ""))

    def frame(self, el, _stack=()):
        """(body name or None for ground, 4x4 pose of the frame `el` in that body)."""
        key = self.path_of.get(el, id(el))
        if key in self.frame_cache:
            return self.frame_cache[key]
        if el in _stack:
            raise self.error(el, "frames refer to each other in a cycle")
        tag = el.tag
        if tag == "Ground" or el is self.ground_el:
            out = (None, np.eye(4))
        elif tag == "Body":
            out = (el.get("name"), np.eye(4))
        elif tag in ("PhysicalOffsetFrame", "OffsetFrame"):
            parent = self.resolve(el, self.text(el, "socket_parent"), self.prop(el, "socket_parent"))
            body, X = self.frame(parent, _stack + (el,))
            out = (body, X @ _pose(self.numbers(el, "translation", 3, [0, 0, 0]),
                                   self.numbers(el, "orientation", 3, [0, 0, 0])))
        elif tag == "StationDefinedFrame":
            out = self.station_frame(el, _stack + (el,))
        else:
            raise self.error(el, f"a <{tag}> is not a frame (expected Ground, Body, PhysicalOffsetFrame "
                                 "or StationDefinedFrame)")
        self.frame_cache[key] = out
        return out

    def station(self, el, _stack=()):
        """(body, point in the body frame) of a <Station>."""
        frame = self.resolve(el, self.text(el, "socket_parent_frame"), self.prop(el, "socket_parent_frame"))
        body, X = self.frame(frame, _stack)
        return body, X[:3, :3] @ self.numbers(el, "location", 3, [0, 0, 0]) + X[:3, 3]

    def station_frame(self, el, stack):
        """OpenSim's StationDefinedFrame: ab along ab_axis, (ab x ac) along ab_x_ac_axis, their
        cross product on the third axis, origin at origin_point."""
        points = {}
        for s in ("point_a", "point_b", "point_c", "origin_point"):
            st = self.resolve(el, self.text(el, "socket_" + s), self.prop(el, "socket_" + s), kinds=("Station",))
            points[s] = self.station(st, stack)
        bodies = {b for b, _ in points.values()}
        if len(bodies) != 1:
            raise self.error(el, "its stations are on different bodies; expected one base frame")
        a, b, c, o = (points[s][1] for s in ("point_a", "point_b", "point_c", "origin_point"))
        ab, ac = b - a, c - a
        if np.linalg.norm(ab) < 1e-12 or np.linalg.norm(ac) < 1e-12 or np.linalg.norm(np.cross(ab, ac)) < 1e-12:
            raise self.error(el, "points a, b and c must form a triangle")
        ab /= np.linalg.norm(ab)
        n = np.cross(ab, ac / np.linalg.norm(ac))
        n /= np.linalg.norm(n)
        d0 = self.direction(el, "ab_axis")
        d1 = self.direction(el, "ab_x_ac_axis", next_to=d0)
        if d1[0] == d0[0]:
            self.warn(el, "ab_axis and ab_x_ac_axis are the same axis; ab_x_ac_axis falls back to the next axis")
            d1 = ((d0[0] + 1) % 3, 1.0)
        R = np.zeros((3, 3))
        R[:, d0[0]] = d0[1] * ab
        R[:, d1[0]] = d1[1] * n
        cyclic = (d1[0] - d0[0]) % 3 == 1        # right-handed: e_k = e_i x e_j for cyclic i, j, k
        R[:, 3 - d0[0] - d1[0]] = np.cross(R[:, d0[0]], R[:, d1[0]]) * (1.0 if cyclic else -1.0)
        return next(iter(bodies)), make_transform(R, o)

    def direction(self, el, tag, next_to=None):
        """(axis index, sign) of a StationDefinedFrame axis property ("x", "-y", "+z"); an absent
        property is OpenSim's default (+x, +y); an unreadable one warns and falls back as OpenSim
        does (+x for ab_axis, the axis after ab_axis for ab_x_ac_axis)."""
        t = self.text(el, tag)
        if t is None:
            return (0, 1.0) if next_to is None else (1, 1.0)
        sign = -1.0 if t.startswith("-") else 1.0
        axis = t.lstrip("+-").lower()
        if axis in ("x", "y", "z"):
            return "xyz".index(axis), sign
        fallback = (0, 1.0) if next_to is None else ((next_to[0] + 1) % 3, 1.0)
        self.warn(el, f"<{tag}>{t}</{tag}> is not an axis (x, y or z with an optional sign); using "
                      f"{'+' + 'xyz'[fallback[0]]}")
        return fallback


def _parse(reader):
    """The <Model> element (and the document version); XML errors become ModelError with the
    file and line."""
    try:
        with open(reader.path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise ModelError(f"{reader.name}: cannot read the file: {exc}") from None
    if b"::" in data:
        # OpenSim writes element names such as HuntCrossleyForce::ContactParametersSet, which
        # a namespace-aware XML parser rejects: read them as HuntCrossleyForce__ContactParametersSet
        data = re.sub(rb"</?[A-Za-z_][\w.:\-]*", lambda m: m.group(0).replace(b"::", b"__"), data)
    parser = etree.XMLParser(remove_comments=True, remove_pis=True, resolve_entities=False,
                             no_network=True, huge_tree=True)
    try:
        root = etree.fromstring(data, parser)
    except etree.XMLSyntaxError as exc:
        line = f", line {exc.lineno}" if exc.lineno else ""
        raise ModelError(f"{reader.name}{line}: not well-formed XML (expected an OpenSim "
                         f"<OpenSimDocument> with a <Model>): {exc.msg}") from None
    if root.tag == "OpenSimDocument":
        text = root.get("Version", "0")
        try:
            reader.version = int(float(text))
        except (ValueError, OverflowError):          # (OverflowError: Version="1e999")
            raise reader.error(root, f"Version=\"{text}\": expected a number such as 30000 or 40000") from None
        model_el = _child(root, "Model")
        if model_el is None:
            raise reader.error(root, "no <Model> element inside")
    elif root.tag == "Model":
        model_el = root
    else:
        raise reader.error(root, "the root element must be <OpenSimDocument> (or <Model>)")
    return model_el


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
        self.prescribed = reader.flag(src, "prescribed", False) and function is not None and bool(_elements(function))
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
_UNIT = np.eye(3)


class _Builder:
    """Builds the Model from the parsed <Model> element."""

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
        defaults = _child(self.el, "defaults")
        for d in _elements(defaults) if defaults is not None else ():
            r.defaults.setdefault(d.tag, d)
        if r.version == 0:      # no version: the layout tells
            self.layout = "3.x" if _child(self.el, "JointSet") is None else "4.x"
        else:
            self.layout = "3.x" if r.version < 30500 else ("30501" if r.version < 30505 else "4.x")
        r.index(self.el)
        self.bodies = self.read_bodies()
        model.gravity = r.numbers(self.el, "gravity", 3, [0.0, -9.80665, 0.0])
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
        ground = self.ground = Link(_unique_name("ground", set(self.bodies)))
        self.ground_link = ground.name
        for info in joints:
            model.add_joint(self.make_joint(info))
        self.read_constraints()
        self.read_forces()
        self.add_geometry(joints)
        model.add_link(ground)
        model.add_joint(Joint(_unique_name("ground", set(self.joints)), "fixed", None, ground.name))
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
        body_set = _child(self.el, "BodySet")
        objects = _child(body_set, "objects") if body_set is not None else None
        els = [b for b in _elements(objects) if b.tag == "Body"] if objects is not None else []
        ground = _child(self.el, "Ground")
        if self.layout == "3.x":
            named = [b for b in els if b.get("name") == "ground"]
            if named:
                ground = named[0]
            else:
                jointless = [b for b in els if not _elements(_child(b, "Joint") if _child(b, "Joint") is not None else [])]
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

    # -- joints: reading -------------------------------------------------------------------
    def read_joints_3x(self):
        r = self.r
        out = []
        for body_name, body_el in self.bodies.items():
            holder = _child(body_el, "Joint")
            inner = _elements(holder) if holder is not None else []
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
            X_PF = X_P @ _pose(as_converted(r.numbers(el, "location_in_parent", 3, [0, 0, 0])),
                               as_converted(r.numbers(el, "orientation_in_parent", 3, [0, 0, 0])))
            X_BM = _pose(as_converted(r.numbers(el, "location", 3, [0, 0, 0])),
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

    def body_element(self, where, name):
        name = name.strip()
        if name == "ground" or self.r.ground_el.get("name") == name:
            return self.r.ground_el
        if name not in self.bodies:
            raise self.r.error(where, f"body {name!r} does not exist (expected a body of the BodySet or ground)")
        return self.bodies[name]

    def read_joints_4x(self):
        r = self.r
        joint_set = _child(self.el, "JointSet")
        objects = _child(joint_set, "objects")
        out = []
        for el in _elements(objects) if objects is not None else []:
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
            connectors = _child(el, "connectors")
            for c in _elements(connectors) if connectors is not None else []:
                if c.get("name") in (f"{end}_frame", f"{end}_body"):
                    sock = _child(c, "connectee_name")
        if sock is None or not (sock.text or "").strip():
            raise r.error(el, f"missing <socket_{end}_frame> (the path of the joint's {end} frame)")
        body, X = r.frame(r.resolve(el, sock.text, sock))
        loc = "location_in_parent" if end == "parent" else "location_in_child"
        ori = "orientation_in_parent" if end == "parent" else "orientation_in_child"
        if r.prop(el, loc) is not None or r.prop(el, ori) is not None:     # the 30501 layout
            X = X @ _pose(as_converted(r.numbers(el, loc, 3, [0, 0, 0])), as_converted(r.numbers(el, ori, 3, [0, 0, 0])))
        return body, X

    def joint_info(self, el, parent, X_PF, child, X_BM):
        r = self.r
        name = el.get("name")
        if not name:
            raise r.error(el, "a joint without a name=\"...\"")
        if el.tag not in _JOINT_TYPES:
            raise r.error(el, f"unsupported joint type {el.tag!r}; expected one of {', '.join(_JOINT_TYPES)}")
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
        holder = _child(el, "coordinates")
        if holder is None:
            holder = _child(_child(el, "CoordinateSet"), "objects")
        return [c for c in _elements(holder) if c.tag == "Coordinate"] if holder is not None else []

    def read_spatial_transform(self, info, listed):
        """A CustomJoint's six TransformAxis (axis, coordinate name or None, Function) and its
        coordinates, in the order they first appear in the transform (as OpenSim orders them)."""
        r = self.r
        st = _child(info.el, "SpatialTransform")
        if st is None:
            raise r.error(info.el, "a CustomJoint without a <SpatialTransform>")
        by_name = {}
        for ta in _elements(st):
            if ta.tag == "TransformAxis":
                by_name[ta.get("name")] = ta
        slots = ("rotation1", "rotation2", "rotation3", "translation1", "translation2", "translation3")
        axes, order = [], []
        for k, slot in enumerate(slots):
            ta = by_name.get(slot)
            default_axis = _UNIT[k % 3]
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
        for c in _elements(holder):
            if c.tag == "function":
                inner = _elements(c)
                return inner[0] if inner else None
        for c in _elements(holder):
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
                joint_name = _unique_name(f"free_{name}", set(names))
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
        body = _unique_name(f"{info.name}_ellipsoid", set(self.bodies) | {l.name for l in model.links})
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
        W = make_transform(_axis_rotation_to_z(axis), [origin[0], origin[1], 0.0])
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
            rot = [(_UNIT[k], k, lin) for k in range(n)]
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
            raise r.error(info.el, f"a CustomJoint traversed backwards (its child frame is nearer the ground, or "
                                   "<reverse>true</reverse>) that both rotates and translates: its inverse is not a "
                                   "CustomJoint; expected the parent frame nearer the ground")
        R_c = np.eye(3)
        for axis, k, f in rot:
            R_c = R_c @ axis_angle_to_matrix(axis, float(f(0.0)))
        axes = [TransformAxis(axis, k, scaled(f, -1.0)) for axis, k, f in reversed(rot)]
        axes += [TransformAxis(_UNIT[k], -1, Function.constant(0.0)) for k in range(len(rot), 3)]
        child_pose = info.X_BM
        if moving_rot:
            p_c = sum((float(f(0.0)) * axis for axis, _, f in trans), np.zeros(3))
            child_pose = info.X_BM @ make_transform(np.eye(3), p_c)
            axes += [TransformAxis(_UNIT[k], -1, Function.constant(0.0)) for k in range(3)]
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
            axes = [TransformAxis(_UNIT[k % 3], k, Function.linear(1.0, 0.0)) for k in range(6)]
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

    # -- shared lookups ----------------------------------------------------------------------
    def set_objects(self, set_tag):
        """The object elements of a model-level Set (ForceSet, ConstraintSet, ...)."""
        objects = _child(_child(self.el, set_tag), "objects")
        return _elements(objects) if objects is not None else []

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

    # -- constraints ---------------------------------------------------------------------------
    def read_constraints(self):
        r, model = self.r, self.r.model
        for el in self.set_objects("ConstraintSet"):
            tag, name = el.tag, el.get("name") or el.tag
            if not r.enabled(el):
                r.report("constraint", name, f"{tag}: disabled in the file")
                continue
            if tag == "CoordinateCouplerConstraint":
                self.coupler(el, name)
            elif tag == "PointOnLineConstraint":
                line, X1 = self.socket_frame(el, "line_body")
                follower, X2 = self.socket_frame(el, "follower_body")
                direction = r.numbers(el, "line_direction_vec", 3, [1, 0, 0])
                if np.linalg.norm(direction) < 1e-12:
                    raise r.error(el, "a zero <line_direction_vec>")
                model.constraints.append(LoopConstraint(
                    name, "point_line", self.link_name(line), self.link_name(follower),
                    pos1=X1[:3, :3] @ r.numbers(el, "point_on_line", 3, [0, 0, 0]) + X1[:3, 3],
                    pos2=X2[:3, :3] @ r.numbers(el, "point_on_follower", 3, [0, 0, 0]) + X2[:3, 3],
                    axis=X1[:3, :3] @ (direction / np.linalg.norm(direction))))
                r.report("constraint", name, "PointOnLineConstraint -> loop constraint point_line")
            elif tag in ("PointConstraint", "ConstantDistanceConstraint"):
                b1, X1 = self.socket_frame(el, "body_1")
                b2, X2 = self.socket_frame(el, "body_2")
                p1 = X1[:3, :3] @ r.numbers(el, "location_body_1", 3, [0, 0, 0]) + X1[:3, 3]
                p2 = X2[:3, :3] @ r.numbers(el, "location_body_2", 3, [0, 0, 0]) + X2[:3, 3]
                if tag == "PointConstraint":
                    model.constraints.append(LoopConstraint(name, "ball", self.link_name(b1), self.link_name(b2), p1, p2))
                    r.report("constraint", name, "PointConstraint -> loop constraint ball")
                else:
                    distance = r.number(el, "constant_distance", 0.0)
                    model.constraints.append(LoopConstraint(name, "distance", self.link_name(b1), self.link_name(b2),
                                                            p1, p2, params={"distance": distance}))
                    r.report("constraint", name, f"ConstantDistanceConstraint -> loop constraint distance {distance:g} m")
            elif tag == "WeldConstraint":
                b1, X1 = self.socket_frame(el, "frame1") if r.prop(el, "body_1") is None else self.weld_3x(el, 1)
                b2, X2 = self.socket_frame(el, "frame2") if r.prop(el, "body_2") is None else self.weld_3x(el, 2)
                model.constraints.append(LoopConstraint(name, "weld", self.link_name(b1), self.link_name(b2),
                                                        X1[:3, 3], X2[:3, 3], params={"frame1": X1, "frame2": X2}))
                r.report("constraint", name, "WeldConstraint -> loop constraint weld (holds the frames' initial "
                                             "relative orientation)")
            else:
                r.report("constraint", name, f"{tag}: not simulated")

    def weld_3x(self, el, k):
        r = self.r
        body, X = r.frame(self.body_element(el, r.text(el, f"body_{k}")))
        return body, X @ _pose(as_converted(r.numbers(el, f"location_body_{k}", 3, [0, 0, 0])),
                               as_converted(r.numbers(el, f"orientation_body_{k}", 3, [0, 0, 0])))

    def coupler(self, el, name):
        r, model = self.r, self.r.model
        independent = (r.text(el, "independent_coordinate_names") or "").split()
        dependent = r.text(el, "dependent_coordinate_name")
        fel = _child(el, "coupled_coordinates_function")
        if len(independent) != 1 or dependent is None or fel is None or not _elements(fel):
            r.report("constraint", name, f"CoordinateCouplerConstraint with {len(independent)} independent "
                                         "coordinates: not simulated (one is supported)")
            return
        f = scaled(self.function(_elements(fel)[0]), r.number(el, "scale_factor", 1.0))
        ci, cd = self.coordinate(el, independent[0]), self.coordinate(el, dependent)
        model.couplers.append(CoordinateCoupler(name, cd.dof, ci.dof, f))
        # start on the constraint: the dependent coordinate's initial value from the independent one
        ji, jd = self.joint_of_coordinate(ci), self.joint_of_coordinate(cd)
        kd = jd.dof_names.index(cd.dof)
        value = float(f(ji.q0[ji.dof_names.index(ci.dof)]))
        if abs(jd.q0[kd] - value) > 1e-12:
            r.report("coordinate", cd.dof, f"initial value {value:g} from coupler {name} (default {jd.q0[kd]:g})")
            jd.q0[kd] = value
        r.report("constraint", name, f"CoordinateCouplerConstraint -> coupler {cd.dof} = f({ci.dof})")

    # -- forces --------------------------------------------------------------------------------
    def read_forces(self):
        r = self.r
        self.contact_forces = []
        for el in self.set_objects("ForceSet"):
            tag, name = el.tag, el.get("name") or el.tag
            if not r.enabled(el):
                r.report("force", name, f"{tag}: disabled in the file")
                continue
            reader = {"CoordinateLimitForce": self.limit_force, "SpringGeneralizedForce": self.generalized_spring,
                      "BushingForce": self.bushing, "PointToPointSpring": self.point_spring,
                      "CoordinateActuator": self.actuator, "PointActuator": self.actuator,
                      "TorqueActuator": self.actuator, "HuntCrossleyForce": self.contact_force,
                      "SmoothSphereHalfSpaceForce": self.contact_force}.get(tag)
            if reader is None:
                kind = "muscle" if any(w in tag for w in _MUSCLE_WORDS) else "force"
                r.report("force", name, f"{tag}: not simulated ({kind})")
            else:
                reader(el, name)
        for el in self.set_objects("ControllerSet"):
            r.report("controller", el.get("name") or el.tag, f"{el.tag}: not simulated (actuator controls are "
                                                             f"{'1' if r.activate else '0'} unless set)")

    def rotational_unit(self, c):
        """OpenSim's CoordinateLimitForce unit: degrees for a rotational coordinate, else SI."""
        return DEG if c.motion == "rotational" else 1.0

    def euler_speed_note(self, c, what):
        if c.joint.type in ("BallJoint", "FreeJoint", "EllipsoidJoint") and c.motion == "rotational":
            self.r.report("force", what, f"acts on the Euler-angle rate of {c.dof}, OpenSim's on the angular "
                                         "velocity component: equal only near the zero rotation")

    def limit_force(self, el, name):
        r = self.r
        c = self.coordinate(el, r.text(el, "coordinate"))
        w = self.rotational_unit(c)
        r.model.forces.append(CoordinateLimitForce(
            name, c.dof, upper_stiffness=r.number(el, "upper_stiffness", 1.0) / w,
            upper_limit=r.number(el, "upper_limit", 0.0) * w, lower_stiffness=r.number(el, "lower_stiffness", 1.0) / w,
            lower_limit=r.number(el, "lower_limit", 0.0) * w, damping=r.number(el, "damping", 0.001) / w,
            transition=r.number(el, "transition", 0.1) * w))
        r.report("force", name, f"CoordinateLimitForce -> CoordinateLimitForce on {c.dof}"
                                + (" (degrees converted to radians)" if w != 1.0 else ""))
        self.euler_speed_note(c, name)

    def generalized_spring(self, el, name):
        r = self.r
        c = self.coordinate(el, r.text(el, "coordinate"))
        joint = self.joint_of_coordinate(c)
        k = joint.dof_names.index(c.dof)
        K, rest, D = r.number(el, "stiffness", 0.0), r.number(el, "rest_length", 0.0), r.number(el, "viscosity", 0.0)
        K0 = joint.stiffness[k]
        if K0 == 0.0:
            joint.rest_position[k] = rest
        elif K0 + K != 0.0:    # two springs on one DOF: one spring at the stiffness-weighted rest position
            joint.rest_position[k] = (K0 * joint.rest_position[k] + K * rest) / (K0 + K)
        joint.stiffness[k] += K
        joint.damping[k] += D
        r.report("force", name, f"SpringGeneralizedForce -> stiffness {K:g}, rest position {rest:g} and damping "
                                f"{D:g} of joint {joint.name} DOF {c.dof}")
        self.euler_speed_note(c, name)

    def bushing(self, el, name):
        r = self.r
        if r.prop(el, "body_1") is not None:        # 3.x
            b1, X1 = self.weld_3x(el, 1)
            b2, X2 = self.weld_3x(el, 2)
        else:
            b1, X1 = self.socket_frame(el, "frame1")
            b2, X2 = self.socket_frame(el, "frame2")
        zeros = [0, 0, 0]
        stiffness = np.concatenate([r.numbers(el, "rotational_stiffness", 3, zeros),
                                    r.numbers(el, "translational_stiffness", 3, zeros)])
        damping = np.concatenate([r.numbers(el, "rotational_damping", 3, zeros),
                                  r.numbers(el, "translational_damping", 3, zeros)])
        r.model.forces.append(Bushing(name, b1, X1, b2, X2, stiffness, damping))
        r.report("force", name, f"BushingForce -> Bushing {b1 or 'ground'} - {b2 or 'ground'}")

    def point_spring(self, el, name):
        r = self.r
        b1, X1 = self.socket_frame(el, "body1")
        b2, X2 = self.socket_frame(el, "body2")
        p1 = X1[:3, :3] @ r.numbers(el, "point1", 3, [0, 0, 0]) + X1[:3, 3]
        p2 = X2[:3, :3] @ r.numbers(el, "point2", 3, [0, 0, 0]) + X2[:3, 3]
        r.model.forces.append(SpringDamper(name, b1, p1, b2, p2, free_length=r.number(el, "rest_length", 1.0),
                                           stiffness=r.number(el, "stiffness", 1.0)))
        r.report("force", name, f"PointToPointSpring -> SpringDamper {b1 or 'ground'} - {b2 or 'ground'}")

    def actuator(self, el, name):
        r = self.r
        tag = el.tag
        common = dict(gain=r.number(el, "optimal_force", 1.0), control=1.0 if r.activate else 0.0,
                      min_control=r.number(el, "min_control", -np.inf, finite=False),
                      max_control=r.number(el, "max_control", np.inf, finite=False))
        if tag == "CoordinateActuator":
            c = self.coordinate(el, r.text(el, "coordinate"))
            if c.joint.type in ("BallJoint", "FreeJoint", "EllipsoidJoint") and c.motion == "rotational":
                # OpenSim's mobility force on this u (the angular velocity along the parent frame's
                # axis) is that torque on the child and its opposite on the parent
                info = c.joint
                axis = info.X_PF[:3, :3] @ _UNIT[c.index]
                act = Actuator(name, "torque", link1=info.parent, link2=info.child, axis=-axis,
                               axis_in_world=info.parent is None, **common)
                what = (f"CoordinateActuator -> torque actuator about {c.dof}'s parent-frame axis (OpenSim's "
                        "mobility force on it)")
            else:
                act = Actuator(name, "coordinate", dof=c.dof, **common)
                what = f"CoordinateActuator -> coordinate actuator on {c.dof}"
        elif tag == "PointActuator":
            body_text = r.text(el, "body") or r.text(el, "socket_body")
            if body_text is None:
                raise r.error(el, "missing <body> (the body the force acts on)")
            body, X = r.frame(self.body_element(el, body_text.split("/")[-1]))
            direction = self.unit(el, "direction", [1, 0, 0])
            act = Actuator(name, "point", link1=body, point=r.numbers(el, "point", 3, [0, 0, 0]),
                           point_in_world=r.flag(el, "point_is_global", False), direction=direction,
                           direction_in_world=r.flag(el, "force_is_global", False), **common)
            what = f"PointActuator -> point actuator on {body or 'ground'}"
        else:
            a, _ = self.socket_frame(el, "bodyA")
            b, _ = self.socket_frame(el, "bodyB")
            act = Actuator(name, "torque", link1=a, link2=b, axis=self.unit(el, "axis", [0, 0, 1]),
                           axis_in_world=r.flag(el, "torque_is_global", True), **common)
            what = f"TorqueActuator -> torque actuator on {a or 'ground'} (and its opposite on {b or 'ground'})"
        r.model.actuators.append(act)
        r.report("actuator", name, f"{what}, gain {common['gain']:g}")

    def unit(self, el, tag, default):
        v = self.r.numbers(el, tag, 3, default)
        n = np.linalg.norm(v)
        if n < 1e-12:
            raise self.r.error(el, f"a zero <{tag}>")
        return v / n       # OpenSim normalizes actuator directions and axes

    def contact_force(self, el, name):
        """Remember the contact geometry this force uses, with its friction."""
        r = self.r
        pairs = []
        if el.tag == "SmoothSphereHalfSpaceForce":
            names = []
            for sock in ("sphere", "half_space"):
                text = r.text(el, f"socket_{sock}") or r.text(el, f"{sock}_name") or ""
                names.append(text.strip().split("/")[-1])
            pairs.append((names, el))
        else:
            holder = next((c for c in _elements(el) if c.tag.endswith("ContactParametersSet")), None)
            for params in _elements(_child(holder, "objects")) if holder is not None and _child(holder, "objects") is not None else []:
                pairs.append(((r.text(params, "geometry") or "").split(), params))
        used = []
        for names, params in pairs:
            self.contact_forces.append((name, names, r.number(params, "dynamic_friction", 0.0)))
            used.extend(names)
        r.model.contact_method = "penalty"
        r.report("force", name, f"{el.tag} -> penalty contact of {', '.join(used) or 'no geometry'} (the "
                                "solver's contact stiffness and damping, the file's dynamic friction)")

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
                    pose = make_transform(_axis_rotation_to_z(p), p / 2)
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
        app = _child(el, "Appearance")
        color = r.numbers(app, "color", 3, [1, 1, 1]) if app is not None else np.ones(3)
        opacity = r.number(app, "opacity", 1.0) if app is not None else 1.0
        visible = r.flag(app, "visible", True) if app is not None else True
        return np.concatenate([color, [opacity]]), visible

    def attached_geometry(self):
        """4.x: the geometry attached to the ground, bodies and offset frames anywhere."""
        r = self.r
        for holder in self.el.iter("attached_geometry"):
            frame_el = holder.getparent()
            if frame_el is None or frame_el.tag not in _FRAME_TYPES or self.inside_defaults(frame_el):
                continue
            for g in _elements(holder):
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
        vo = _child(el, "VisibleObject")
        if vo is None:
            return
        T_vo = self.display_transform(vo)
        s_vo = r.numbers(vo, "scale_factors", 3, [1, 1, 1])
        objects = _child(_child(vo, "GeometrySet"), "objects")
        items = []
        for dg in _elements(objects) if objects is not None else []:
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
        return _pose(t[3:], t[:3])

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
            X = X @ _pose(r.numbers(el, "location", 3, [0, 0, 0]), r.numbers(el, "orientation", 3, [0, 0, 0]))
            friction = used[name][1]
            if el.tag == "ContactSphere":
                shape = Shape("sphere", pose=X, radius=r.number(el, "radius"), friction=friction, name=name)
            else:
                shape = Shape("plane", pose=X @ _ROT_HALFSPACE, friction=friction, name=name)
            self.shapes_of(body)["collisions"].append(shape)
            r.report("contact", name, f"{el.tag} -> {shape.kind} on {self.link_name(body)} ({used[name][0]})")
        for name in used:
            if not any((e.get("name") or e.tag) == name for e in self.set_objects("ContactGeometrySet")):
                raise r.error(_child(self.el, "ForceSet"), f"contact force {used[name][0]!r} names contact "
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
            name = _unique_name(name if name not in taken else f"{name}_marker", taken)
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


def load_opensim(path, floating_base: bool = False, visuals: str = "meshes", collide: bool = False,
                 activate_actuators: bool = False, z_up: bool = False) -> Model:
    """Read an OpenSim .osim file into a finalized Model (see the module docstring).
    floating_base is accepted for the loader registry and ignored: OpenSim files say it.
    z_up=True turns the model so that OpenSim's up (+y) is the world's +z, for z-up worlds."""
    reader = _Reader(path, visuals, collide, activate_actuators)
    root = _parse(reader)
    model = _Builder(reader, root).build()
    if z_up:
        _turn_world(model, Y_TO_Z)
        model.report.append(("model", model.name, "turned so that OpenSim's +y is the world's +z (z_up=True)"))
        model.finalize()
    return model


Y_TO_Z = xyz_rotation((math.pi / 2, 0, 0))     # a rotation about x taking +y to +z


def _turn_world(model, R):
    """Express everything given in the world (OpenSim's ground) in a world turned by R: the
    root joints' parent frames, gravity, and world-frame points, directions and frames of
    force elements and actuators. Things on links, the ground link included, do not change."""
    T = make_transform(R)
    model.gravity = R @ model.gravity
    for j in model.joints:
        if j.parent is None:
            j.origin = T @ j.origin
    for f in model.forces:
        if isinstance(f, SpringDamper):
            if f.link1 is None:
                f.point1 = R @ f.point1
            if f.link2 is None:
                f.point2 = R @ f.point2
        elif isinstance(f, Bushing):
            if f.link1 is None:
                f.frame1 = T @ f.frame1
            if f.link2 is None:
                f.frame2 = T @ f.frame2
    for a in model.actuators:
        if a.kind == "torque" and (a.axis_in_world or a.link1 is None):
            a.axis = R @ a.axis
        if a.kind == "point":
            if a.point_in_world or a.link1 is None:
                a.point = R @ a.point
            if a.direction_in_world or a.link1 is None:
                a.direction = R @ a.direction
