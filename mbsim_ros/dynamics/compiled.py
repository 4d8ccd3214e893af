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
from numba import njit

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


def tree_sizes(nb, nv, nl):
    """(float, int) buffer lengths that carve_tree lays out (checked against it at compile)."""
    return nb * 65 + 5 * nv + 12 * nl + 3, 4 + 5 * nb + nv + nl


def data_size(nb, nv, nq, nl):
    """Float buffer length that carve_data lays out."""
    return nb * 210 + nv * nv + 15 * nv + 2 * nq + 12 * nl + 120


@njit(cache=True)
def carve_tree(tf, ti):
    """The Tree as views into one float and one int buffer (header ti[:4] = nb, nv, nl, nq).

    Kernels take the buffers, not the namedtuple: numba types a tuple of ~25 arrays on its
    slow path (microseconds per call), three buffers on its fast one."""
    nb, nv, nl = ti[0], ti[1], ti[2]
    o = 0
    axis = tf[o:o + 3 * nb].reshape((nb, 3)); o += 3 * nb
    hpitch = tf[o:o + nb]; o += nb
    R0 = tf[o:o + 9 * nb].reshape((nb, 3, 3)); o += 9 * nb
    p0 = tf[o:o + 3 * nb].reshape((nb, 3)); o += 3 * nb
    S = tf[o:o + 36 * nb].reshape((nb, 6, 6)); o += 36 * nb
    mass = tf[o:o + nb]; o += nb
    h = tf[o:o + 3 * nb].reshape((nb, 3)); o += 3 * nb
    Io = tf[o:o + 9 * nb].reshape((nb, 3, 3)); o += 9 * nb
    armature = tf[o:o + nv]; o += nv
    damping = tf[o:o + nv]; o += nv
    stiffness = tf[o:o + nv]; o += nv
    rest = tf[o:o + nv]; o += nv
    friction = tf[o:o + nv]; o += nv
    link_R = tf[o:o + 9 * nl].reshape((nl, 3, 3)); o += 9 * nl
    link_p = tf[o:o + 3 * nl].reshape((nl, 3)); o += 3 * nl
    gravity = tf[o:o + 3]; o += 3
    k = 4
    parent = ti[k:k + nb]; k += nb
    jtype = ti[k:k + nb]; k += nb
    iq = ti[k:k + nb]; k += nb
    iv = ti[k:k + nb]; k += nb
    nvb = ti[k:k + nb]; k += nb
    dof_body = ti[k:k + nv]; k += nv
    link_body = ti[k:k + nl]; k += nl
    tree = Tree(parent, jtype, iq, iv, nvb, axis, hpitch, R0, p0, S, mass, h, Io, armature,
                damping, stiffness, rest, friction, dof_body, link_body, link_R, link_p, gravity)
    return tree, o, k


@njit(cache=True)
def carve_data(df, ti):
    """The Data workspace as views into one float buffer (sizes from the Tree header ti)."""
    nb, nv, nl, nq = ti[0], ti[1], ti[2], ti[3]
    o = 0
    Rr = df[o:o + 9 * nb].reshape((nb, 3, 3)); o += 9 * nb
    pr = df[o:o + 3 * nb].reshape((nb, 3)); o += 3 * nb
    Rw = df[o:o + 9 * nb].reshape((nb, 3, 3)); o += 9 * nb
    pw = df[o:o + 3 * nb].reshape((nb, 3)); o += 3 * nb
    X = df[o:o + 36 * nb].reshape((nb, 6, 6)); o += 36 * nb
    vel = df[o:o + 6 * nb].reshape((nb, 6)); o += 6 * nb
    cb = df[o:o + 6 * nb].reshape((nb, 6)); o += 6 * nb
    acc = df[o:o + 6 * nb].reshape((nb, 6)); o += 6 * nb
    IA = df[o:o + 36 * nb].reshape((nb, 6, 6)); o += 36 * nb
    pA = df[o:o + 6 * nb].reshape((nb, 6)); o += 6 * nb
    U = df[o:o + 36 * nb].reshape((nb, 6, 6)); o += 36 * nb
    Dinv = df[o:o + 36 * nb].reshape((nb, 6, 6)); o += 36 * nb
    u = df[o:o + 6 * nb].reshape((nb, 6)); o += 6 * nb
    f = df[o:o + 6 * nb].reshape((nb, 6)); o += 6 * nb
    fext = df[o:o + 6 * nb].reshape((nb, 6)); o += 6 * nb
    M = df[o:o + nv * nv].reshape((nv, nv)); o += nv * nv
    qdd = df[o:o + nv]; o += nv
    tau_total = df[o:o + nv]; o += nv
    diag = df[o:o + nv]; o += nv
    t6a = df[o:o + 6]; o += 6
    t6b = df[o:o + 6]; o += 6
    T66 = df[o:o + 36].reshape((6, 6)); o += 36
    T66b = df[o:o + 36].reshape((6, 6)); o += 36
    UDi = df[o:o + 36].reshape((6, 6)); o += 36
    link_R = df[o:o + 9 * nl].reshape((nl, 3, 3)); o += 9 * nl
    link_p = df[o:o + 3 * nl].reshape((nl, 3)); o += 3 * nl
    q_prev = df[o:o + nq]; o += nq
    v_prev = df[o:o + nv]; o += nv
    k_v = df[o:o + 4 * nv].reshape((4, nv)); o += 4 * nv
    k_a = df[o:o + 4 * nv].reshape((4, nv)); o += 4 * nv
    q_stage = df[o:o + nq]; o += nq
    v_stage = df[o:o + nv]; o += nv
    v_sum = df[o:o + nv]; o += nv
    a_sum = df[o:o + nv]; o += nv
    data = Data(Rr, pr, Rw, pw, X, vel, cb, acc, IA, pA, U, Dinv, u, f, fext, M, qdd, tau_total,
                diag, t6a, t6b, T66, T66b, UDi, link_R, link_p, q_prev, v_prev, k_v, k_a,
                q_stage, v_stage, v_sum, a_sum)
    return data, o


class Compiled:
    """The compiled tree (buffers `tf`, `ti` and their views `tree`) plus the Python-side
    bookkeeping: which Model joint and link each slot belongs to."""

    def __init__(self, tf, ti, models, nq, nv, joint_of_v, link_names):
        self.tf, self.ti = tf, ti
        self.tree, used_f, used_i = carve_tree(tf, ti)
        assert (used_f, used_i) == (len(tf), len(ti)), "tree_sizes disagrees with carve_tree"
        self.models = models
        self.nq = nq
        self.nv = nv
        self.joint_of_v = joint_of_v      # velocity index -> joint name
        self.link_names = link_names      # Model link names in tree order (models concatenated)

    def new_data(self):
        """A zeroed workspace: (its float buffer, the Data views into it)."""
        nb, nv, nl, nq = (int(x) for x in self.ti[:4])
        df = np.zeros(data_size(nb, nv, nq, nl))
        data, used = carve_data(df, self.ti)
        assert used == len(df), "data_size disagrees with carve_data"
        return df, data


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
    nb, nl = len(bodies), len(links)
    tf = np.zeros(tree_sizes(nb, v_off, nl)[0])
    ti = np.zeros(tree_sizes(nb, v_off, nl)[1], dtype=np.int64)
    ti[:4] = nb, v_off, nl, q_off
    tree, _, _ = carve_tree(tf, ti)
    for k, b in enumerate(bodies):
        for key in ("parent", "jtype", "iq", "iv", "nvb", "axis", "hpitch", "R0", "p0", "S",
                    "mass", "h", "Io"):
            getattr(tree, key)[k] = b[key]
    for key in ("armature", "damping", "stiffness", "rest", "friction", "dof_body"):
        getattr(tree, key)[:] = dof[key]
    for k, (b, R, p) in enumerate(links):
        tree.link_body[k], tree.link_R[k], tree.link_p[k] = b, R, p
    tree.gravity[:] = gravity
    return Compiled(tf, ti, models, q_off, v_off, joint_of_v, link_names)


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
