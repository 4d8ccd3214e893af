"""The format-independent Model: what every loader produces and every solver consumes.

The Model is plain data (dataclasses over numpy arrays). It holds no algorithm beyond
bookkeeping: tree order, coordinate indices, name lookup and the initial state.

Frames: each joint has a fixed `origin` (4x4) from its parent link's frame to the joint
frame; the joint's motion J(q) follows, then the inverse of `child_pose` (the joint's
child-side frame in the child link's frame, identity unless the format has one, as OpenSim):
    T_child = T_parent @ origin @ J(q) @ inv(child_pose)
Link inertias, shapes, frames and sensor mounts are all expressed in their link's frame.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from math import copysign, isfinite, sqrt
from typing import Optional

import numpy as np

from .errors import ModelError, numbers_text

# name -> (nq, nv). Multi-DOF joints other than ball and free use one coordinate per DOF
# with v = dq/dt, as DART does.
JOINT_TYPES = {
    "fixed": (0, 0),          # weld
    "revolute": (1, 1),       # rotation about `axis`
    "prismatic": (1, 1),      # translation along `axis`
    "screw": (1, 1),          # rotation q about `axis` with translation q * pitch / (2 pi) along it
    "universal": (2, 2),      # R(axis, q0) R(axis2, q1)
    "ball": (4, 3),           # quaternion (x, y, z, w); v = angular velocity in the child frame
    "euler": (3, 3),          # R(a0, q0) R(a1, q1) R(a2, q2), axes from `euler_order` ("xyz", "zyx", ...)
    "planar": (3, 3),         # translation q0, q1 along Joint.plane_axes(), then rotation q2 about `axis` (the normal)
    "translational": (3, 3),  # translation (q0, q1, q2) along the joint frame's x, y, z
    "free": (7, 6),           # position + quaternion (x, y, z, w); v = (linear, angular) in the child frame
    "custom": (None, None),   # OpenSim's CustomJoint: Joint.transform_axes, one q per entry of Joint.dof_names
}

SHAPE_KINDS = ("box", "sphere", "cylinder", "capsule", "cone", "plane", "mesh")
_GREY, _ONES3 = np.array([0.7, 0.7, 0.7, 1.0]), np.array([1.0, 1.0, 1.0])
_GREY.flags.writeable = _ONES3.flags.writeable = False


# CAD exports round each entry of an inertia tensor on its own, so a tensor written out as nine
# numbers (OpenHRP's momentsOfInertia) can be asymmetric by a few digits of its largest entry.
# Up to this relative asymmetry it is averaged with its transpose; beyond it, it is refused.
INERTIA_SYMMETRY_TOL = 1e-5
_INERTIA_ROUNDING = 1e-12      # relative asymmetry of floating-point rounding alone: no note


def symmetric_inertia(inertia, what):
    """(I, note): a finite 3x3 inertia tensor made exactly symmetric, and a note (or None) when
    it was asymmetric by more than rounding. A non-finite tensor, or one asymmetric by more than
    INERTIA_SYMMETRY_TOL of its largest entry, is a ModelError starting with `what` (the file
    and element). The one check every loader and Link use."""
    I = np.asarray(inertia, dtype=float)
    if I.size != 9:
        raise ModelError(f"{what}: inertia has {I.size} numbers; expected a 3x3 matrix")
    I = I.reshape(3, 3)
    # on the nine numbers as Python floats: numpy's reductions cost more than the arithmetic here
    xx, xy, xz, yx, yy, yz, zx, zy, zz = values = I.ravel().tolist()
    if not all(map(isfinite, values)):
        raise ModelError(f"{what}: inertia {values} is not finite; expected a symmetric 3x3 "
                         "inertia tensor")
    scale = max(map(abs, values))
    asym = max(abs(xy - yx), abs(xz - zx), abs(yz - zy))
    if asym > INERTIA_SYMMETRY_TOL * scale:
        raise ModelError(f"{what}: inertia is not symmetric (entries differ from their transposes by "
                         f"{asym:.3g}, {asym / scale:.2g} of its largest entry; at most "
                         f"{INERTIA_SYMMETRY_TOL:g} is taken as rounding); expected a symmetric 3x3 inertia tensor")
    note = None
    if asym > _INERTIA_ROUNDING * scale:
        note = (f"{what}: inertia asymmetric by {asym:.3g} ({asym / scale:.2g} of its largest entry, "
                f"within the {INERTIA_SYMMETRY_TOL:g} taken as rounding): averaged with its transpose")
    if (asym == 0 and scale < 1e307 and copysign(1, xy) == copysign(1, yx) and copysign(1, xz) == copysign(1, zx)
            and copysign(1, yz) == copysign(1, zy)):
        return I.copy(), None             # what 0.5 * (I + I.T) gives, bit for bit, without its arithmetic
    return 0.5 * (I + I.T), note


def _vec(x, n, kind, name, field):
    """x as n floats; errors name f"{kind} {name!r} {field}" (formatted only then)."""
    if type(x) is np.ndarray and x.dtype == np.float64 and x.shape == (n,):
        return x                          # (loaders pass arrays they built)
    a = np.asarray(x, dtype=float).reshape(-1)
    if a.shape != (n,):
        raise ModelError(f"{kind} {name!r} {field}: expected {numbers_text(n)}, got {a.size}")
    return a


@dataclass
class Shape:
    """A visual or collision shape in its link's frame.

    Sizes: box `size` (x, y, z full lengths); sphere `radius`; cylinder, capsule and cone
    `radius` and `length` along the shape frame's z axis (cone apex at +length/2);
    plane: the shape frame's xy plane, normal +z; mesh: `vertices` (n, 3) and `faces` (m, 3)
    already scaled, or `mesh_path` with `scale` when the file could not be read.
    Contact material (collision shapes): Coulomb `friction` (a pair uses the smaller of its
    two) and `restitution` (a pair uses the product), DART's defaults. `laser_retro`: the
    intensity a range sensor's ray reads where it hits this shape (SDFormat's <laser_retro>).
    `contype`, `conaffinity`: MuJoCo's collision bits; two shapes may meet only when one's contype
    shares a bit with the other's conaffinity (the defaults, 1 and 1, let every pair through).
    """
    kind: str
    pose: np.ndarray = field(default_factory=lambda: np.eye(4))
    size: np.ndarray = field(default_factory=lambda: np.zeros(3))
    radius: float = 0.0
    length: float = 0.0
    color: np.ndarray = field(default_factory=_GREY.copy)      # (a template's copy: loaders make many)
    vertices: Optional[np.ndarray] = None
    faces: Optional[np.ndarray] = None
    mesh_path: Optional[str] = None
    scale: np.ndarray = field(default_factory=_ONES3.copy)
    name: str = ""
    friction: float = 1.0
    restitution: float = 0.0
    laser_retro: float = 0.0
    contype: int = 1
    conaffinity: int = 1

    def __post_init__(self):
        if self.kind not in SHAPE_KINDS:
            raise ModelError(f"shape kind {self.kind!r}: expected one of {', '.join(SHAPE_KINDS)}")
        self.pose = np.asarray(self.pose, dtype=float)
        self.size = np.asarray(self.size, dtype=float)
        self.color = np.asarray(self.color, dtype=float)
        self.scale = np.asarray(self.scale, dtype=float)


@dataclass
class Link:
    """A rigid body: mass, center of mass and inertia about the center of mass, in the link frame.

    Collision filtering (Chrono's families): the link belongs to `collision_family` (0-15) and
    collides with the families whose bits are set in `collision_mask`; a pair of links
    collides only when each one's mask has the other's family."""
    name: str
    mass: float = 0.0
    com: np.ndarray = field(default_factory=lambda: np.zeros(3))
    inertia: np.ndarray = field(default_factory=lambda: np.zeros((3, 3)))
    visuals: list = field(default_factory=list)
    collisions: list = field(default_factory=list)
    collision_family: int = 0
    collision_mask: int = 0xFFFF

    def __post_init__(self):
        self.com = _vec(self.com, 3, "link", self.name, "com")
        self.inertia, _ = symmetric_inertia(self.inertia, f"link {self.name!r}")
        self.mass = float(self.mass)
        if not isfinite(self.mass) or self.mass < 0:
            raise ModelError(f"link {self.name!r}: mass must be a finite number >= 0, got {self.mass}")


@dataclass
class Joint:
    """A joint connecting `parent` (a link name, or None for the world) to `child`.

    `dof_names` (optional, one per DOF) names the DOFs in Model.dof_names; a custom joint
    needs it (its coordinates) and gets nq = nv = len(dof_names), q = v integrated; its motion
    is `transform_axes` (6 TransformAxis: rotations body-fixed in order, then translations in
    the parent-side frame): J(q) = [R(a1, f1) R(a2, f2) R(a3, f3), f4 t1 + f5 t2 + f6 t3], plus
    diag(ellipsoid_radii) R z when given (Simbody's Ellipsoid mobilizer: the child frame's origin
    on the ellipsoid where R z points).
    `locked` is one bool for the joint or one per DOF.

    Per-DOF arrays (lower, upper, velocity_limit, effort_limit, damping, stiffness,
    rest_position, friction, rotor_inertia, gear_ratio) have length nv; missing limits are
    +-inf. `q0`/`v0` are the initial position and velocity (length nq and nv).
    """
    name: str
    type: str
    parent: Optional[str]
    child: str
    origin: np.ndarray = field(default_factory=lambda: np.eye(4))
    axis: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.0, 1.0]))
    axis2: np.ndarray = field(default_factory=lambda: np.array([0.0, 1.0, 0.0]))
    pitch: float = 0.0            # screw: metres per revolution (DART's ScrewJoint pitch)
    euler_order: str = "xyz"      # euler: the three rotation axes, applied left to right
    lower: Optional[np.ndarray] = None
    upper: Optional[np.ndarray] = None
    velocity_limit: Optional[np.ndarray] = None
    effort_limit: Optional[np.ndarray] = None
    damping: Optional[np.ndarray] = None
    stiffness: Optional[np.ndarray] = None
    rest_position: Optional[np.ndarray] = None
    friction: Optional[np.ndarray] = None       # Coulomb friction torque/force magnitude
    rotor_inertia: Optional[np.ndarray] = None
    gear_ratio: Optional[np.ndarray] = None
    q0: Optional[np.ndarray] = None
    v0: Optional[np.ndarray] = None
    params: dict = field(default_factory=dict)   # the source format's raw fields, by their names
    locked: object = False        # held at its initial position by the constraint solver (bool, or one per DOF)
    child_pose: np.ndarray = field(default_factory=lambda: np.eye(4))
    dof_names: Optional[list] = None
    transform_axes: Optional[list] = None     # custom joints: 6 TransformAxis
    ellipsoid_radii: Optional[np.ndarray] = None   # custom joints: Simbody's Ellipsoid, p += diag(radii) R z
    # filled by Model.finalize()
    q_index: int = -1
    v_index: int = -1

    def __post_init__(self):
        if self.type not in JOINT_TYPES:
            raise ModelError(f"joint {self.name!r}: type {self.type!r} is not one of {', '.join(JOINT_TYPES)}")
        self.origin = _matrix4(self.origin)
        self.child_pose = _matrix4(self.child_pose)
        if self.type == "custom":
            if not self.dof_names or self.transform_axes is None or len(self.transform_axes) != 6:
                raise ModelError(f"joint {self.name!r}: a custom joint needs dof_names (its coordinates) "
                                 "and six transform_axes (three rotations, three translations)")
            if self.ellipsoid_radii is not None:
                self.ellipsoid_radii = np.asarray(self.ellipsoid_radii, dtype=float).reshape(-1)
                if self.ellipsoid_radii.shape != (3,) or not np.all(np.isfinite(self.ellipsoid_radii)):
                    raise ModelError(f"joint {self.name!r}: ellipsoid_radii must be three finite numbers")
            for ta in self.transform_axes:
                if not -1 <= ta.coordinate < len(self.dof_names):
                    raise ModelError(f"joint {self.name!r}: transform axis coordinate {ta.coordinate} is not "
                                     f"one of its {len(self.dof_names)} coordinates")
        self.axis = _unit(self.axis, self.name, "axis")
        self.axis2 = (_unit(self.axis2, self.name, "axis2") if self.type == "universal"
                      else np.asarray(self.axis2, dtype=float))
        self.type = str(self.type)
        order = self.euler_order
        if self.type == "euler" and (len(order) != 3 or set(order) - set("xyz") or order[0] == order[1] or order[1] == order[2]):
            raise ModelError(f"joint {self.name!r}: euler_order {order!r}: expected three of x, y, z "
                             "with no axis twice in a row (e.g. 'xyz', 'zyx', 'zxz')")
        nq, nv = self.nq, self.nv
        self.lower = _per_dof(self, self.lower, -np.inf, nv)
        self.upper = _per_dof(self, self.upper, np.inf, nv)
        self.velocity_limit = _per_dof(self, self.velocity_limit, np.inf, nv)
        self.effort_limit = _per_dof(self, self.effort_limit, np.inf, nv)
        self.damping = _per_dof(self, self.damping, 0.0, nv)
        self.stiffness = _per_dof(self, self.stiffness, 0.0, nv)
        self.rest_position = _per_dof(self, self.rest_position, 0.0, nv)
        self.friction = _per_dof(self, self.friction, 0.0, nv)
        self.rotor_inertia = _per_dof(self, self.rotor_inertia, 0.0, nv)
        self.gear_ratio = _per_dof(self, self.gear_ratio, 1.0, nv)
        self.q0 = neutral_q(self) if self.q0 is None else _vec(self.q0, nq, "joint", self.name, "q0")
        if self.type in ("ball", "free"):
            quat = self.q0[-4:]
            norm = np.linalg.norm(quat)
            if not np.isfinite(norm) or norm < 1e-9:
                raise ModelError(f"joint {self.name!r}: initial quaternion {quat} is not a rotation")
            self.q0[-4:] = quat / norm
        self.v0 = np.zeros(nv) if self.v0 is None else _vec(self.v0, nv, "joint", self.name, "v0")
        if self.dof_names is not None:
            self.dof_names = [str(n) for n in self.dof_names]
            if len(self.dof_names) != nv:
                raise ModelError(f"joint {self.name!r}: {len(self.dof_names)} dof_names for {nv} DOFs")
        if type(self.locked) is not bool:     # one bool is always right: no array to build
            locked = np.asarray(self.locked, dtype=bool).reshape(-1)
            if locked.size not in (1, nv):
                raise ModelError(f"joint {self.name!r}: locked must be one bool or {nv}, got {locked.size}")

    @property
    def locked_dofs(self) -> np.ndarray:
        """Which DOFs are locked (bool per DOF)."""
        return np.broadcast_to(np.asarray(self.locked, dtype=bool).reshape(-1), (self.nv,)).copy()

    @property
    def nq(self) -> int:
        return len(self.dof_names) if self.type == "custom" else JOINT_TYPES[self.type][0]

    @property
    def nv(self) -> int:
        return len(self.dof_names) if self.type == "custom" else JOINT_TYPES[self.type][1]

    def plane_axes(self):
        """A planar joint's in-plane translation axes (x_p, y_p), with x_p cross y_p = axis.

        x_p is the joint frame's x projected into the plane (y when the normal is near x), so the
        default normal z gives the xy plane, normal x the yz plane."""
        e = np.array([1.0, 0.0, 0.0]) if abs(self.axis[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
        x_p = e - e.dot(self.axis) * self.axis
        x_p /= np.linalg.norm(x_p)
        return x_p, np.cross(self.axis, x_p)

    @property
    def armature(self) -> np.ndarray:
        """Reflected rotor inertia per DOF: gear_ratio^2 * rotor_inertia."""
        return self.gear_ratio ** 2 * self.rotor_inertia


def _matrix4(x):
    """x as a 4x4 float array (x itself when it is one: loaders pass arrays they built)."""
    if type(x) is np.ndarray and x.dtype == np.float64 and x.shape == (4, 4):
        return x
    return np.asarray(x, dtype=float).reshape(4, 4)


_ONE = {d: np.array([d]) for d in (-np.inf, np.inf, 0.0, 1.0)}      # _per_dof's defaults of one DOF, to copy


def _per_dof(joint, value, default, nv):
    """One float per DOF from None (the default), one number (repeated) or nv numbers."""
    if value is None:
        return _ONE[default].copy() if nv == 1 else np.array([default] * nv, dtype=float)
    if type(value) is float and nv == 1:      # the usual cases, without asarray's overhead
        return np.array([value])
    if type(value) is np.ndarray and value.dtype == np.float64 and value.shape == (nv,):
        return value
    a = np.asarray(value, dtype=float).reshape(-1)
    if a.size == 1 and nv > 1:
        a = np.full(nv, float(a[0]))
    if a.size != nv:
        raise ModelError(f"joint {joint.name!r}: expected {nv} values per DOF, got {a.size}")
    return a


def _unit(x, joint_name, field):
    a = _vec(x, 3, "joint", joint_name, field)
    n = sqrt(a.dot(a))                    # np.linalg.norm's own sum for a vector, without its overhead
    if not isfinite(n) or n < 1e-12:
        raise ModelError(f"joint {joint_name!r} {field}: a zero or invalid axis {a.tolist()}")
    return a / n


def neutral_q(joint_type: str) -> np.ndarray:
    """Zero configuration: identity quaternions for ball and free joints, zeros elsewhere."""
    if isinstance(joint_type, Joint):
        return neutral_q(joint_type.type) if joint_type.type != "custom" else np.zeros(joint_type.nq)
    nq = JOINT_TYPES[joint_type][0]
    q = np.zeros(nq)
    if joint_type in ("ball", "free"):
        q[-1] = 1.0
    return q


@dataclass
class Frame:
    """A named frame fixed to a link (a sensor mount, a tool point, a merged fixed link)."""
    name: str
    link: str
    pose: np.ndarray = field(default_factory=lambda: np.eye(4))


@dataclass
class Sensor:
    """A sensor mounted on `link` at `pose` (link frame). `params` holds the format's fields."""
    name: str
    type: str                 # accelerometer | gyro | force | range | camera
    link: str
    pose: np.ndarray = field(default_factory=lambda: np.eye(4))
    sensor_id: int = -1
    params: dict = field(default_factory=dict)


def _rotation(columns):
    T = np.eye(4)
    T[:3, :3] = np.array(columns, dtype=float).T
    return T


# Frames fixed to a sensor's own (OpenHRP) frame that ROS tools expect (sensors-and-ros.md):
# a camera's optical frame (z forward, x right, y down: rpy (pi, 0, 0)) and a range sensor's
# laser frame (x forward = -Z, y left = -X, z up = +Y). Columns: the new axes in the sensor frame.
OPTICAL_FRAME = _rotation([(1, 0, 0), (0, -1, 0), (0, 0, -1)])
LASER_FRAME = _rotation([(0, 0, -1), (-1, 0, 0), (0, 1, 0)])


def sensor_ros_frames(sensor) -> list:
    """[(frame name, 4x4 pose in the sensor's frame)] of the ROS frames a sensor's data is in."""
    if sensor.type == "camera":
        return [(sensor.name + "_optical_frame", OPTICAL_FRAME.copy())]
    if sensor.type == "range":
        return [(sensor.name + "_laser_frame", LASER_FRAME.copy())]
    return []


@dataclass
class LoopConstraint:
    """A closure between two links: points pos1 (in link1) and pos2 (in link2), axis in link1.

    type: ball | weld | hinge | piston | xy | z | xyz | distance | point_line | point_plane |
    revolute_spherical | revolute_translational. Solved by the constraint solver.
    """
    name: str
    type: str
    link1: str
    link2: str
    pos1: np.ndarray = field(default_factory=lambda: np.zeros(3))
    pos2: np.ndarray = field(default_factory=lambda: np.zeros(3))
    axis: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.0, 1.0]))
    params: dict = field(default_factory=dict)


DEFAULT_GRAVITY = (0.0, 0.0, -9.80665)     # m/s^2, standard gravity along -z


def _as_gravity(value):
    """value as a new float64 (3,) C-contiguous array, the kind a model's gravity is."""
    g = np.array(value, dtype=float)
    if g.shape != (3,):
        raise ValueError(f"gravity must be 3 numbers (x, y, z in m/s^2), got {np.asarray(value).tolist()!r}")
    return g


class Model:
    """A multibody model: links connected by joints into a tree, plus frames, sensors and loops.

    Build it with add_link/add_joint (any order), then call finalize(): it checks the tree,
    orders joints depth-first from the world and assigns q_index/v_index. After editing a
    finalized model's numbers in place, call finalize() again so cached compiled forms rebuild.
    """

    def __init__(self, name: str = "model", gravity=None):
        self.name = name
        self._gravity = _as_gravity(DEFAULT_GRAVITY if gravity is None else gravity)
        # whether the gravity is the model's say (given here or set, or by a file that states the
        # world's: an SDFormat world, MJCF's <option gravity>); one that is not takes the world's
        # (dynamics/compiled.py world_gravity), as Gazebo puts a URDF robot in its world's gravity
        self.gravity_stated = gravity is not None
        self.links: list[Link] = []
        self.joints: list[Joint] = []
        self.frames: list[Frame] = []
        self.sensors: list[Sensor] = []
        self.constraints: list[LoopConstraint] = []
        # elements.py: passive force elements (SpringDamper, RotarySpringDamper, Bushing,
        # CoordinateLimitForce), actuators, body loads, motors, coordinate couplers
        self.forces: list = []
        self.actuators: list = []
        self.loads: list = []
        self.motors: list = []
        self.couplers: list = []
        # what the loader read, for `mbsim info`: (section, name, what), e.g.
        # ("joint", "knee_r", "CustomJoint -> custom"), ("force", "soleus_r", "Millard2012EquilibriumMuscle: not simulated")
        self.report: list = []
        self.self_collision = False           # whether this model's moving links collide with each other
        # whether a moving link meets the world-welded link its joint hangs from: MuJoCo's
        # filterparent keeps parent and child apart except when the parent is welded to the world
        self.parent_at_world_collides = False
        self.collision_excludes: list = []    # (link name, link name): never in contact (MJCF <exclude>)
        self.collision_pairs: list = []       # (Shape, Shape) of its links: always tested (MJCF <pair>)
        self.contact_method: Optional[str] = None   # "lcp" or "penalty" when the file asks for one
        self.source: Optional[str] = None     # the file it was loaded from
        self.warnings: list[str] = []
        self._finalized = False
        self.revision = 0                     # bumped by every structural change and finalize()

    @property
    def gravity(self) -> np.ndarray:
        """m/s^2 in the model's world frame; setting it states it (gravity_stated). The model
        keeps one array for good: setting copies the values into it (a simulation reads that
        array at every step), and a change in place of it counts too."""
        return self._gravity

    @gravity.setter
    def gravity(self, value):
        self._gravity[:] = _as_gravity(value)
        self.gravity_stated = True

    # -- building -------------------------------------------------------------------
    def add_link(self, link: Link) -> Link:
        self.links.append(link)
        self._finalized = False
        self.revision += 1
        return link

    def add_joint(self, joint: Joint) -> Joint:
        self.joints.append(joint)
        self._finalized = False
        self.revision += 1
        return joint

    def finalize(self) -> "Model":
        where = f" in {self.source}" if self.source else ""
        names = [l.name for l in self.links]
        link_set = set(names)
        if len(link_set) < len(names):
            dup = {n for n, k in Counter(names).items() if k > 1}
            raise ModelError(f"duplicate link names{where}: {sorted(dup)}")
        jnames = [j.name for j in self.joints]
        if len(set(jnames)) < len(jnames):
            dup = {n for n, k in Counter(jnames).items() if k > 1}
            raise ModelError(f"duplicate joint names{where}: {sorted(dup)}")
        child_of = {}
        for j in self.joints:
            if j.child not in link_set:
                raise ModelError(f"joint {j.name!r}{where}: child link {j.child!r} does not exist")
            if j.parent is not None and j.parent not in link_set:
                raise ModelError(f"joint {j.name!r}{where}: parent link {j.parent!r} does not exist")
            if j.child in child_of:
                raise ModelError(f"link {j.child!r}{where} is the child of two joints: "
                                 f"{child_of[j.child].name!r} and {j.name!r}")
            child_of[j.child] = j
        roots = [l.name for l in self.links if l.name not in child_of]
        if roots:
            raise ModelError(f"links with no joint to a parent{where}: {roots} "
                             "(every link needs a joint; use a 'fixed' joint to the world)")
        children = {}
        for j in self.joints:
            children.setdefault(j.parent, []).append(j)
        order, stack = [], list(reversed(children.get(None, [])))
        while stack:
            j = stack.pop()
            order.append(j)
            stack.extend(reversed(children.get(j.child, [])))
        if len(order) != len(self.joints):
            cyc = sorted(set(jnames) - {j.name for j in order})
            raise ModelError(f"joints not connected to the world (a cycle){where}: {cyc}")
        iq = iv = 0
        for j in order:
            j.q_index, j.v_index = iq, iv
            iq += j.nq
            iv += j.nv
        self.joints = order
        link_by = {l.name: l for l in self.links}
        self.links = [link_by[j.child] for j in order]
        self._link_index = {l.name: i for i, l in enumerate(self.links)}
        self._joint_index = {j.name: i for i, j in enumerate(self.joints)}
        for f in self.frames:
            if f.link not in link_set:
                raise ModelError(f"frame {f.name!r}{where}: link {f.link!r} does not exist")
        for s in self.sensors:
            if s.link not in link_set:
                raise ModelError(f"sensor {s.name!r}{where}: link {s.link!r} does not exist")
        for c in self.constraints:
            for ln in (c.link1, c.link2):
                if ln is not None and ln not in link_set:
                    raise ModelError(f"constraint {c.name!r}{where}: link {ln!r} does not exist")
        self._finalized = True
        self.revision += 1
        return self

    def _check(self):
        if not self._finalized:
            self.finalize()

    # -- lookup ---------------------------------------------------------------------
    @property
    def nq(self) -> int:
        self._check()
        return sum(j.nq for j in self.joints)

    @property
    def nv(self) -> int:
        self._check()
        return sum(j.nv for j in self.joints)

    @property
    def dof_names(self) -> list[str]:
        """One name per velocity DOF: the joint's dof_names when given, else the joint's name for
    one-DOF joints and name_k for the others."""
        self._check()
        names = []
        for j in self.joints:
            if j.dof_names is not None:
                names.extend(j.dof_names)
            elif j.nv == 1:
                names.append(j.name)
            else:
                names.extend(f"{j.name}_{k}" for k in range(j.nv))
        return names

    def link(self, name: str) -> Link:
        self._check()
        try:
            return self.links[self._link_index[name]]
        except KeyError:
            raise KeyError(f"model {self.name!r} has no link {name!r}") from None

    def joint(self, name: str) -> Joint:
        self._check()
        try:
            return self.joints[self._joint_index[name]]
        except KeyError:
            raise KeyError(f"model {self.name!r} has no joint {name!r}") from None

    def link_index(self, name: str) -> int:
        self._check()
        return self._link_index[name]

    def parent_joint(self, link_name: str) -> Joint:
        """The joint whose child is `link_name` (the link and its joint share an index)."""
        return self.joints[self.link_index(link_name)]

    @property
    def root_links(self) -> list[str]:
        self._check()
        return [j.child for j in self.joints if j.parent is None]

    @property
    def total_mass(self) -> float:
        return float(sum(l.mass for l in self.links))

    def initial_q(self) -> np.ndarray:
        self._check()
        return np.concatenate([j.q0 for j in self.joints]) if self.joints else np.zeros(0)

    def initial_v(self) -> np.ndarray:
        self._check()
        return np.concatenate([j.v0 for j in self.joints]) if self.joints else np.zeros(0)

    def neutral_q(self) -> np.ndarray:
        self._check()
        return np.concatenate([neutral_q(j) for j in self.joints]) if self.joints else np.zeros(0)

    def __repr__(self):
        return (f"Model({self.name!r}: {len(self.links)} links, {len(self.joints)} joints, "
                f"nq={self.nq}, nv={self.nv}, {len(self.sensors)} sensors, "
                f"{len(self.constraints)} loop constraints)")
