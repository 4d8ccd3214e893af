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

from ...model import Bushing, Model, SpringDamper
from ...model.transforms import make_transform
from .builder import Builder
from .functions import natural_spline, xyz_rotation
from .reader import Reader, parse

__all__ = ["load_opensim", "natural_spline", "xyz_rotation", "Y_TO_Z"]


def load_opensim(path, floating_base: bool = False, visuals: str = "meshes", collide: bool = False,
                 activate_actuators: bool = False, z_up: bool = False) -> Model:
    """Read an OpenSim .osim file into a finalized Model (see the module docstring).
    floating_base is accepted for the loader registry and ignored: OpenSim files say it.
    z_up=True turns the model so that OpenSim's up (+y) is the world's +z, for z-up worlds."""
    reader = Reader(path, visuals, collide, activate_actuators)
    root = parse(reader)
    model = Builder(reader, root).build()
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
