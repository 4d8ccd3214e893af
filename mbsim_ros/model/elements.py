"""Model elements beyond links and joints: functions, force elements, actuators, loads, motors
and coordinate couplers. Plain data, SI units, in the frames named on each field.

`link` fields name a Model link; None means the world (OpenSim's ground, Chrono's ground).
Frames given as 4x4 arrays are poses in their link's frame. Loaders convert every unit and
convention of their format into these; the solver reads nothing else.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from .errors import ModelError

FUNCTION_KINDS = ("ppoly", "sine", "input")
EXTRAPOLATIONS = ("linear", "constant", "extend")
_X_AXIS, _Z_AXIS = np.array([1.0, 0.0, 0.0]), np.array([0.0, 0.0, 1.0])
_X_AXIS.flags.writeable = _Z_AXIS.flags.writeable = False


@dataclass
class Function:
    """A scalar function y = f(x) of one variable (a coordinate, or time), in a form the numba
    kernels evaluate with its first and second derivatives.

    kind "ppoly": a piecewise polynomial. `breaks` x_0 < ... < x_n (n >= 1 pieces); `coefs`
      (n, order) holds each piece's coefficients in ascending powers of (x - x_k) on
      [x_k, x_k+1]. Outside [x_0, x_n] `extrapolate` decides: "linear" (value and slope at the
      end: OpenSim's splines), "constant" (the end value), "extend" (the end piece's own
      polynomial). A plain polynomial is one piece with breaks (0, inf), extended below 0.
    kind "sine": amplitude * sin(2 pi frequency x + phase) + offset.
    kind "input": the current value of the named run-time input `name` (Chrono's CONTROLLER
      function; the simulation sets it, the ROS node takes it from a topic); 0 until set.
    repeat (start, width, shift), when set: f(start + mod(x + shift, width)) with mod >= 0
      (Chrono's `repeat`), applied before the kinds above.
    """
    kind: str = "ppoly"
    breaks: np.ndarray = field(default_factory=lambda: np.array([0.0, np.inf]))
    coefs: np.ndarray = field(default_factory=lambda: np.zeros((1, 1)))
    extrapolate: str = "linear"
    amplitude: float = 0.0
    frequency: float = 0.0
    phase: float = 0.0
    offset: float = 0.0
    name: str = ""
    repeat: Optional[tuple] = None

    def __post_init__(self):
        if self.kind not in FUNCTION_KINDS:
            raise ModelError(f"function kind {self.kind!r}: expected one of {', '.join(FUNCTION_KINDS)}")
        if self.extrapolate not in EXTRAPOLATIONS:
            raise ModelError(f"function extrapolation {self.extrapolate!r}: expected one of {', '.join(EXTRAPOLATIONS)}")
        self.breaks = np.asarray(self.breaks, dtype=float).reshape(-1)
        self.coefs = np.atleast_2d(np.asarray(self.coefs, dtype=float))
        if self.kind == "ppoly":
            n = self.breaks.size - 1
            if n < 1 or self.coefs.shape[0] != n:
                raise ModelError(f"piecewise polynomial: {self.breaks.size} breaks need {max(n, 1)} rows of "
                                 f"coefficients, got {self.coefs.shape[0]}")
            if not np.all(np.diff(self.breaks) > 0):
                raise ModelError(f"piecewise polynomial: breaks must increase strictly, got {self.breaks.tolist()}")
            if not np.all(np.isfinite(self.coefs)):
                raise ModelError("piecewise polynomial: coefficients must be finite numbers")
        if self.repeat is not None:
            start, width, shift = (float(x) for x in self.repeat)
            if not width > 0:
                raise ModelError(f"function repeat width must be > 0, got {width}")
            self.repeat = (start, width, shift)

    # -- constructors -------------------------------------------------------------------
    @classmethod
    def constant(cls, value):
        return cls(coefs=[[float(value)]], extrapolate="extend")

    @classmethod
    def linear(cls, slope, intercept=0.0):
        return cls(coefs=[[float(intercept), float(slope)]], extrapolate="extend")

    @classmethod
    def polynomial(cls, coefficients):
        """Ascending coefficients c0 + c1 x + c2 x^2 + ..."""
        c = np.asarray(coefficients, dtype=float).reshape(1, -1)
        return cls(coefs=c if c.size else np.zeros((1, 1)), extrapolate="extend")

    @classmethod
    def piecewise_linear(cls, x, y, extrapolate="linear"):
        x, y = np.asarray(x, float), np.asarray(y, float)
        if x.size < 2 or x.shape != y.shape:
            raise ModelError(f"piecewise linear function: need two or more (x, y) pairs of equal length, got {x.size} and {y.size}")
        slope = np.diff(y) / np.diff(x)
        return cls(breaks=x, coefs=np.stack([y[:-1], slope], axis=1), extrapolate=extrapolate)

    @classmethod
    def sine(cls, amplitude, frequency, phase=0.0, offset=0.0):
        return cls(kind="sine", amplitude=float(amplitude), frequency=float(frequency),
                   phase=float(phase), offset=float(offset))

    @classmethod
    def input(cls, name):
        return cls(kind="input", name=str(name))

    # -- evaluation (numpy; the kernels have their own) -------------------------------
    def __call__(self, x, derivative=0, inputs=None):
        """f(x) or its first or second derivative; x a number or an array."""
        x = np.asarray(x, dtype=float)
        if self.repeat is not None:
            start, width, shift = self.repeat
            x = start + np.mod(x + shift, width)
        if self.kind == "input":
            value = float((inputs or {}).get(self.name, 0.0))
            return np.full(x.shape, value if derivative == 0 else 0.0)[()]
        if self.kind == "sine":
            w = 2 * np.pi * self.frequency
            arg = w * x + self.phase
            return [self.amplitude * np.sin(arg) + self.offset, self.amplitude * w * np.cos(arg),
                    -self.amplitude * w * w * np.sin(arg)][derivative]
        b, c = self.breaks, self.coefs
        n = c.shape[0]
        k = np.clip(np.searchsorted(b, x, side="right") - 1, 0, n - 1)
        lo, hi = x < b[0], x > b[-1]
        if self.extrapolate != "extend":
            xe = np.where(lo, b[0], np.where(hi, b[-1], x))
        else:
            xe = x
        k = np.where(hi & (self.extrapolate != "extend"), n - 1, k)
        dx = xe - b[k]
        y = np.zeros(x.shape)
        order = c.shape[1]
        for p in range(derivative, order):
            fac = np.prod(np.arange(p - derivative + 1, p + 1)) if derivative else 1.0
            y = y + fac * c[k, p] * dx ** (p - derivative)
        if self.extrapolate == "linear" and (np.any(lo) or np.any(hi)):
            slope = self(xe, 1) if derivative == 0 else 0.0
            out = lo | hi
            if derivative == 0:
                y = np.where(out, y + slope * (x - xe), y)
            elif derivative == 2:
                y = np.where(out, 0.0, y)
        elif self.extrapolate == "constant" and derivative > 0:
            y = np.where(lo | hi, 0.0, y)
        return y[()]


@dataclass
class TransformAxis:
    """One of a custom joint's six spatial transform axes (OpenSim's SpatialTransform).

    The value is `function` of the joint's coordinate number `coordinate` (an index into
    Joint.dof_names), or of nothing when coordinate is -1 (then the function is evaluated at 0).
    Rotation axes (the first three) rotate about `axis` body-fixed, in order; translation axes
    (the last three) translate along `axis` expressed in the joint's parent-side frame."""
    axis: np.ndarray
    coordinate: int = -1
    function: Function = field(default_factory=lambda: Function.constant(0.0))

    def __post_init__(self):
        self.axis = np.asarray(self.axis, dtype=float).reshape(3)
        n = np.linalg.norm(self.axis)
        if not np.isfinite(n) or n < 1e-12:
            raise ModelError(f"transform axis {self.axis.tolist()} is zero or invalid")
        self.axis = self.axis / n


@dataclass
class SpringDamper:
    """A point-to-point spring-damper (Chrono TSDA, OpenSim PointToPointSpring).

    Length l between point1 (link1 frame) and point2 (link2 frame); the force along the line,
    positive pushing the points apart, is F = preload - k (l - free_length) - c dl/dt, or with
    curves F = preload - stiffness_curve(l - free_length) - damping_curve(dl/dt), or with a map
    F = preload - bilinear(map over deformation l - free_length and dl/dt), linear
    extrapolation. min_length / max_length (None: none) are hard stops on l."""
    name: str
    link1: Optional[str]
    point1: np.ndarray
    link2: Optional[str]
    point2: np.ndarray
    free_length: float = 0.0
    stiffness: float = 0.0
    damping: float = 0.0
    preload: float = 0.0
    stiffness_curve: Optional[Function] = None
    damping_curve: Optional[Function] = None
    map_deformations: Optional[np.ndarray] = None   # (n,) ascending
    map_velocities: Optional[np.ndarray] = None     # (m,) ascending
    map_forces: Optional[np.ndarray] = None         # (m, n): force at (velocity i, deformation j)
    min_length: Optional[float] = None
    max_length: Optional[float] = None


@dataclass
class RotarySpringDamper:
    """A rotational spring-damper about frame1's z (Chrono RSDA). The angle is from frame1's
    x to frame2's x about frame1's z (frame2's z is assumed along it); the torque on link2
    about that axis (its opposite on link1) is T = preload - k (angle - free_angle) - c
    dangle/dt, or the curves' values as for SpringDamper."""
    name: str
    link1: Optional[str]
    frame1: np.ndarray
    link2: Optional[str]
    frame2: np.ndarray
    free_angle: float = 0.0
    stiffness: float = 0.0
    damping: float = 0.0
    preload: float = 0.0
    stiffness_curve: Optional[Function] = None
    damping_curve: Optional[Function] = None


@dataclass
class Bushing:
    """A 6-DOF linear bushing between frame1 (on link1) and frame2 (on link2), as OpenSim's
    BushingForce: the deflection is (rx, ry, rz) body-fixed X-Y-Z angles of frame2 in frame1
    and (tx, ty, tz) frame2's origin in frame1; stiffness and damping are per deflection
    component in that order (rotations first, N m/rad and N/m)."""
    name: str
    link1: Optional[str]
    frame1: np.ndarray
    link2: Optional[str]
    frame2: np.ndarray
    stiffness: np.ndarray = field(default_factory=lambda: np.zeros(6))
    damping: np.ndarray = field(default_factory=lambda: np.zeros(6))


@dataclass
class CoordinateLimitForce:
    """OpenSim's CoordinateLimitForce on one DOF (`dof`, a Model.dof_names entry), in SI units
    (radians for rotational coordinates; the loader converts OpenSim's degrees)."""
    name: str
    dof: str
    upper_stiffness: float
    upper_limit: float
    lower_stiffness: float
    lower_limit: float
    damping: float
    transition: float


ACTUATOR_KINDS = ("coordinate", "torque", "point")


@dataclass
class Actuator:
    """An actuator whose force is gain * control (OpenSim's optimal_force * excitation).

    coordinate: a generalized force on `dof` (a Model.dof_names entry).
    torque: a torque gain*control*axis on link1 and its opposite on link2 (OpenSim's bodyA and
      bodyB); axis in link1's frame, or in the world when axis_in_world.
    point: a force gain*control*direction on `link1` at `point` (link1 frame, or world when
      point_in_world); direction in link1's frame, or world when direction_in_world.
    control starts at `control` (0 by default) and is clamped to [min_control, max_control]."""
    name: str
    kind: str
    gain: float = 1.0
    control: float = 0.0
    min_control: float = -np.inf
    max_control: float = np.inf
    dof: Optional[str] = None
    link1: Optional[str] = None
    link2: Optional[str] = None
    axis: np.ndarray = field(default_factory=_Z_AXIS.copy)       # (a template's copy: loaders make many)
    axis_in_world: bool = False
    point: np.ndarray = field(default_factory=lambda: np.zeros(3))
    point_in_world: bool = False
    direction: np.ndarray = field(default_factory=_X_AXIS.copy)
    direction_in_world: bool = False

    def __post_init__(self):
        if self.kind not in ACTUATOR_KINDS:
            raise ModelError(f"actuator {self.name!r}: kind {self.kind!r} is not one of {', '.join(ACTUATOR_KINDS)}")


@dataclass
class BodyLoad:
    """A force or torque on a link (Chrono body_loads): `vector` in the link frame when `local`
    else in the world, times modulation(t) when given; a force acts at `point` (link frame when
    point_local, else world)."""
    name: str
    link: str
    kind: str                     # "force" | "torque"
    vector: np.ndarray
    local: bool = True
    point: np.ndarray = field(default_factory=lambda: np.zeros(3))
    point_local: bool = True
    modulation: Optional[Function] = None


MOTOR_KINDS = ("rotation", "linear")
MOTOR_ACTUATIONS = ("position", "speed", "force")


@dataclass
class Motor:
    """A motor between link1 and link2 along/about frame1's z (Chrono ChLinkMotor*).

    The motor coordinate is the rotation of frame2 about frame1's z from frame1's x (rotation,
    counting turns) or frame2's origin along frame1's z (linear), both 0 where the frames
    coincide. actuation position: the coordinate follows function(t); speed: its rate follows
    function(t); force: a torque/force function(t) on link2 (opposite on link1).
    guide (linear: free | prismatic | spherical) and spindle (rotation: free | revolute |
    cylindrical) are the extra constraints the motor also enforces, as Chrono's."""
    name: str
    kind: str
    link1: Optional[str]
    frame1: np.ndarray
    link2: Optional[str]
    frame2: np.ndarray
    actuation: str
    function: Function
    guide: str = "free"

    def __post_init__(self):
        if self.kind not in MOTOR_KINDS:
            raise ModelError(f"motor {self.name!r}: kind {self.kind!r} is not one of {', '.join(MOTOR_KINDS)}")
        if self.actuation not in MOTOR_ACTUATIONS:
            raise ModelError(f"motor {self.name!r}: actuation {self.actuation!r} is not one of {', '.join(MOTOR_ACTUATIONS)}")


@dataclass
class CoordinateCoupler:
    """q[dependent] = function(q[independent]) (OpenSim's CoordinateCouplerConstraint with one
    independent coordinate); both are Model.dof_names entries of one-coordinate DOFs."""
    name: str
    dependent: str
    independent: str
    function: Function
