"""What the builder reads into: Chrono's defaults and kinds, the Body and Edge records, frame helpers."""
from __future__ import annotations

import dataclasses

import numpy as np

from ...model import Link
from ...model.transforms import make_transform


CHRONO_GRAVITY = (0.0, 0.0, -9.8)     # ChParserMbsYAML's default
DEFAULT_FRICTION, DEFAULT_RESTITUTION = 0.8, 0.01   # Chrono's contact material defaults
LOOP_ARM = 1.0        # m: the distance of the extra points composite loop constraints use

# edge types -> (Model tree joint type or None for loop-only, DOFs removed)
JOINT_KINDS = {
    "LOCK": ("fixed", 6), "REVOLUTE": ("revolute", 5), "PRISMATIC": ("prismatic", 5),
    "UNIVERSAL": ("universal", 4), "SPHERICAL": ("ball", 3),
    "POINT_LINE": (None, 2), "POINT_PLANE": (None, 1),
    "CYLINDRICAL": (None, 4),        # a rotation motor's CYLINDRICAL spindle
    "GUIDE_SPHERICAL": (None, 2),    # a linear motor's SPHERICAL guide: a point on the z line
}
# bushing: which of Chrono's joint DOFs are free (Model bushing order rx ry rz tx ty tz)
BUSHING_FREE = {"LOCK": (), "SPHERICAL": (0, 1, 2), "REVOLUTE": (2,), "UNIVERSAL": (0, 1)}
KNOWN_MODEL_KEYS = {"name", "angle_degrees", "data_path", "bodies", "joints", "constraints", "tsdas",
                    "rsdas", "body_loads", "load_controllers", "motors"}
KNOWN_BODY_KEYS = {"name", "location", "orientation", "fixed", "mass", "com", "inertia", "contact",
                   "visualization", "initial_linear_velocity", "initial_angular_velocity"}
VELOCITY_ALIASES = {"lin_vel": "initial_linear_velocity", "ang_vel": "initial_angular_velocity"}


def frame_z(z):
    """A rotation whose z column is the unit vector z; x is the world axis least along z made
    normal to it, so z = (0, 0, 1) gives the identity."""
    e = np.eye(3)[int(np.argmin(np.abs(z)))]
    x = e - z * e.dot(z)
    x /= np.linalg.norm(x)
    return np.column_stack([x, np.cross(z, x), z])


def frame(R, p):
    return make_transform(R, p)


def local_point(T, p):
    """World point p in the frame T."""
    return T[:3, :3].T @ (p - T[:3, 3])


# =========================================================================================
# The model
# =========================================================================================
@dataclasses.dataclass
class Body:
    name: str
    where: str
    T: np.ndarray                    # reference frame in the world
    fixed: bool
    link: Link
    v_ref: np.ndarray                # world velocity of the reference frame's origin
    w: np.ndarray                    # world angular velocity


@dataclasses.dataclass
class Edge:
    """A kinematic connection between two bodies: a joint or a motor's guide."""
    name: str
    where: str
    ctype: str                       # key of JOINT_KINDS
    body1: str
    body2: str
    frame: np.ndarray                # Chrono's joint frame in the world
    source: str                      # "joint" or "motor"
    axis_given: bool = False         # POINT_LINE / POINT_PLANE with an axis from the file
    order: int = 0
