"""compile(models) -> flat typed arrays the numba kernels work on (the mjModel of this project).

The kernels know six elementary body types. Every Model joint maps onto them:
  revolute, prismatic, screw      -> one REVOLUTE / PRISMATIC / HELICAL body
  ball, free                      -> one SPHERICAL / FREE body (quaternion coordinates)
  universal, euler, planar,
  translational                   -> a chain of one-DOF bodies through massless intermediates
                                     (exactly DART's v = dq/dt for these joints)
  fixed                           -> no body: the child link is merged into its parent body
Because bodies are created in the Model's depth-first joint order and each takes its
coordinates in order, body coordinate offsets equal the Model's q_index/v_index.

Spatial vectors are linear-first: motion (v, w), force (f, n), in body coordinates.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from ..model import Model, ModelError
from ..model.transforms import axis_angle_to_matrix

REVOLUTE, PRISMATIC, HELICAL, SPHERICAL, FREE = 1, 2, 3, 4, 5
BODY_NQ = {REVOLUTE: 1, PRISMATIC: 1, HELICAL: 1, SPHERICAL: 4, FREE: 7}
BODY_NV = {REVOLUTE: 1, PRISMATIC: 1, HELICAL: 1, SPHERICAL: 3, FREE: 6}

# What the kernels read; every array is contiguous and typed.
Tree = namedtuple("Tree", [
    "parent",      # int64[nb]   parent body, -1 = world
    "jtype",       # int64[nb]   REVOLUTE ... FREE
    "iq", "iv",    # int64[nb]   first coordinate / velocity index
    "nvb",         # int64[nb]   DOFs of the body
    "axis",        # f8[nb,3]    joint axis (body frame)
    "hpitch",      # f8[nb]      helical: translation per radian
    "R0", "p0",    # f8[nb,3,3], f8[nb,3]: joint placement in the parent body frame
    "S",           # f8[nb,6,6]  motion subspace columns (first nvb used), body frame
    "mass", "h", "Io",  # f8[nb], f8[nb,3], f8[nb,3,3]: mass, first moment m*c, inertia about the body origin
    "armature", "damping", "stiffness", "rest", "friction",  # f8[nv]
    "dof_body",    # int64[nv]
    "link_body",   # int64[nl]   body carrying each Model link, -1 = world (welded)
    "link_R", "link_p",  # f8[nl,3,3], f8[nl,3]: link frame in its body frame
    "gravity",     # f8[3]
])

# Workspace the kernels write into: allocated once per Simulation (the mjData of this project).
Data = namedtuple("Data", [
    "Rr", "pr",    # body pose in its parent body frame
    "Rw", "pw",    # body pose in the world
    "X",           # motion transform parent -> body
    "vel", "cb", "acc",  # body velocity, velocity-product acceleration, acceleration (body frame)
    "IA", "pA",    # articulated inertia and bias force
    "U", "Dinv", "u",  # per body: IA S, (S^T IA S + diag)^-1, tau - S^T pA
    "f",           # body forces (RNEA) / composite inertias use IA
    "fext",        # external force on each body (body frame, about its origin)
    "M", "qdd", "tau_total", "diag",
    "t6a", "t6b", "T66", "T66b", "UDi",  # scratch
    "link_R", "link_p",  # world link poses
    "q_prev", "v_prev",
    "k_v", "k_a", "q_stage", "v_stage", "v_sum", "a_sum",  # RK4 stages
])


class Compiled:
    """A Tree plus the Python-side bookkeeping: which Model joint and link each slot belongs to."""

    def __init__(self, tree, models, nq, nv, joint_of_v, link_names):
        self.tree = tree
        self.models = models
        self.nq = nq
        self.nv = nv
        self.joint_of_v = joint_of_v      # velocity index -> joint name
        self.link_names = link_names      # Model link names in tree order (models concatenated)

    def new_data(self) -> Data:
        t = self.tree
        nb, nl, nq, nv = len(t.parent), len(t.link_body), self.nq, self.nv
        z = np.zeros
        return Data(
            Rr=z((nb, 3, 3)), pr=z((nb, 3)), Rw=z((nb, 3, 3)), pw=z((nb, 3)), X=z((nb, 6, 6)),
            vel=z((nb, 6)), cb=z((nb, 6)), acc=z((nb, 6)),
            IA=z((nb, 6, 6)), pA=z((nb, 6)),
            U=z((nb, 6, 6)), Dinv=z((nb, 6, 6)), u=z((nb, 6)),
            f=z((nb, 6)), fext=z((nb, 6)), M=z((nv, nv)), qdd=z(nv), tau_total=z(nv), diag=z(nv),
            t6a=z(6), t6b=z(6), T66=z((6, 6)), T66b=z((6, 6)), UDi=z((6, 6)),
            link_R=z((nl, 3, 3)), link_p=z((nl, 3)),
            q_prev=z(nq), v_prev=z(nv),
            k_v=z((4, nv)), k_a=z((4, nv)), q_stage=z(nq), v_stage=z(nv), v_sum=z(nv), a_sum=z(nv),
        )


def _elementary_bodies(joint):
    """[(type, axis, hpitch, R0, p0)] for one Model joint; the first carries the joint origin."""
    R0, p0 = joint.origin[:3, :3].copy(), joint.origin[:3, 3].copy()
    eye = np.eye(3)
    t = joint.type
    if t == "revolute":
        axes = [(REVOLUTE, joint.axis)]
    elif t == "prismatic":
        axes = [(PRISMATIC, joint.axis)]
    elif t == "screw":
        return [(HELICAL, joint.axis, joint.pitch / (2 * np.pi), R0, p0)]
    elif t == "ball":
        axes = [(SPHERICAL, np.zeros(3))]
    elif t == "free":
        axes = [(FREE, np.zeros(3))]
    elif t == "universal":
        axes = [(REVOLUTE, joint.axis), (REVOLUTE, joint.axis2)]
    elif t == "euler":
        axes = [(REVOLUTE, eye["xyz".index(c)]) for c in joint.euler_order]
    elif t == "planar":
        x_p, y_p = joint.plane_axes()
        axes = [(PRISMATIC, x_p), (PRISMATIC, y_p), (REVOLUTE, joint.axis)]
    elif t == "translational":
        axes = [(PRISMATIC, eye[0]), (PRISMATIC, eye[1]), (PRISMATIC, eye[2])]
    else:
        raise ModelError(f"joint {joint.name!r}: no elementary form for type {t!r}")
    out = []
    for k, (bt, ax) in enumerate(axes):
        out.append((bt, np.asarray(ax, float), 0.0, R0 if k == 0 else eye.copy(),
                    p0 if k == 0 else np.zeros(3)))
    return out


def _subspace(bt, axis, hpitch):
    S = np.zeros((6, 6))
    if bt == REVOLUTE:
        S[3:, 0] = axis
    elif bt == PRISMATIC:
        S[:3, 0] = axis
    elif bt == HELICAL:
        S[:3, 0] = hpitch * axis
        S[3:, 0] = axis
    elif bt == SPHERICAL:
        S[3:, :3] = np.eye(3)
    else:
        S[:, :] = np.eye(6)
    return S


def compile_models(models) -> Compiled:
    """Compile one Model or a list of them (their coordinates concatenated in the order given)."""
    if isinstance(models, Model):
        models = [models]
    models = list(models)
    gravity = np.asarray(models[0].gravity, float)
    for m in models[1:]:
        if not np.allclose(m.gravity, gravity):
            raise ModelError(f"models {models[0].name!r} and {m.name!r} have different gravity "
                             f"({gravity.tolist()} vs {np.asarray(m.gravity).tolist()}); set one gravity for the world")
    bodies = []          # dicts, in creation order
    links = []           # (body, R, p)
    link_names = []
    dof = dict(armature=[], damping=[], stiffness=[], rest=[], friction=[], dof_body=[])
    joint_of_v = []
    q_off = v_off = 0
    for model in models:
        if not model._finalized:
            model.finalize()
        link_slot = {}   # link name -> (body index, R, p) of the link frame in that body
        for joint in model.joints:
            if joint.parent is None:
                parent_body, Rp, pp = -1, np.eye(3), np.zeros(3)
            else:
                parent_body, Rp, pp = link_slot[joint.parent]
            if joint.type == "fixed":
                R = Rp @ joint.origin[:3, :3]
                p = pp + Rp @ joint.origin[:3, 3]
                link_slot[joint.child] = (parent_body, R, p)
            else:
                elems = _elementary_bodies(joint)
                bq, bv = q_off + joint.q_index, v_off + joint.v_index
                for k, (bt, ax, hp, R0, p0) in enumerate(elems):
                    if k == 0:   # placement relative to the parent body, through merged fixed links
                        R0, p0 = Rp @ R0, pp + Rp @ p0
                    bodies.append(dict(parent=parent_body, jtype=bt, iq=bq, iv=bv, nvb=BODY_NV[bt],
                                       axis=ax, hpitch=hp, R0=R0, p0=p0, S=_subspace(bt, ax, hp),
                                       mass=0.0, h=np.zeros(3), Io=np.zeros((3, 3))))
                    parent_body = len(bodies) - 1
                    bq += BODY_NQ[bt]
                    bv += BODY_NV[bt]
                link_slot[joint.child] = (parent_body, np.eye(3), np.zeros(3))
                nv = joint.nv
                dof["armature"].extend(joint.armature)
                dof["damping"].extend(joint.damping)
                # stiffness acts on one-coordinate-per-DOF joints only; a quaternion has no rest angle
                dof["stiffness"].extend(joint.stiffness if joint.type not in ("ball", "free") else np.zeros(nv))
                dof["rest"].extend(joint.rest_position)
                dof["friction"].extend(joint.friction)
                joint_of_v.extend([joint.name] * nv)
            # the link's inertia goes into the body carrying it, expressed in the body frame
            link = model.link(joint.child)
            b, R, p = link_slot[joint.child]
            links.append((b, R, p))
            link_names.append(link.name)
            if b >= 0 and link.mass > 0:
                body = bodies[b]
                c = R @ link.com + p
                Ic = R @ link.inertia @ R.T
                body["mass"] += link.mass
                body["h"] += link.mass * c
                body["Io"] += Ic + link.mass * (c.dot(c) * np.eye(3) - np.outer(c, c))
        q_off += model.nq
        v_off += model.nv
    for k, b in enumerate(bodies):
        dof_range = range(b["iv"], b["iv"] + b["nvb"])
        dof["dof_body"].extend([k] * len(dof_range))
    _check_massless(bodies, joint_of_v)
    nb = len(bodies)

    def stack(key, shape, dtype=float):
        return np.ascontiguousarray(np.array([b[key] for b in bodies], dtype=dtype).reshape((nb,) + shape))

    tree = Tree(
        parent=stack("parent", (), np.int64), jtype=stack("jtype", (), np.int64),
        iq=stack("iq", (), np.int64), iv=stack("iv", (), np.int64), nvb=stack("nvb", (), np.int64),
        axis=stack("axis", (3,)), hpitch=stack("hpitch", ()),
        R0=stack("R0", (3, 3)), p0=stack("p0", (3,)), S=stack("S", (6, 6)),
        mass=stack("mass", ()), h=stack("h", (3,)), Io=stack("Io", (3, 3)),
        armature=np.array(dof["armature"], float), damping=np.array(dof["damping"], float),
        stiffness=np.array(dof["stiffness"], float), rest=np.array(dof["rest"], float),
        friction=np.array(dof["friction"], float),
        dof_body=np.array(dof["dof_body"], np.int64),
        link_body=np.array([l[0] for l in links], np.int64),
        link_R=np.ascontiguousarray(np.array([l[1] for l in links], float).reshape(-1, 3, 3)),
        link_p=np.ascontiguousarray(np.array([l[2] for l in links], float).reshape(-1, 3)),
        gravity=gravity.copy(),
    )
    return Compiled(tree, models, q_off, v_off, joint_of_v, link_names)


def _check_massless(bodies, joint_of_v):
    """A DOF whose whole subtree has no mass has no defined acceleration: say so now, by name."""
    nb = len(bodies)
    sub_mass = np.array([b["mass"] + np.trace(b["Io"]) for b in bodies])
    for k in range(nb - 1, -1, -1):
        if bodies[k]["parent"] >= 0:
            sub_mass[bodies[k]["parent"]] += sub_mass[k]
    for k, b in enumerate(bodies):
        if sub_mass[k] <= 0.0:
            raise ModelError(f"joint {joint_of_v[b['iv']]!r} moves links with no mass or inertia: "
                             "its acceleration is undefined (give the child link an inertia, or make the joint fixed)")
