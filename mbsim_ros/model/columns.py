"""Links and joints of a whole model built at once from columns (one array per field over all of
them), each column checked once: for loaders that read a model's numbers in one pass, where a
constructor call per element (and its checks on a dozen one-number arrays) would cost more than
the reading. The results are ordinary Link and Joint objects whose arrays are views into the
columns. A bad entry is reported by the element's own constructor, with its usual message.
"""
from __future__ import annotations

from math import inf

import numpy as np

from .errors import ModelError
from .model import INERTIA_SYMMETRY_TOL, JOINT_TYPES, Joint, Link

# Joint's per-DOF fields and their defaults (Joint.__post_init__'s)
PER_DOF = {"lower": -inf, "upper": inf, "velocity_limit": inf, "effort_limit": inf, "damping": 0.0,
           "stiffness": 0.0, "rest_position": 0.0, "friction": 0.0, "rotor_inertia": 0.0, "gear_ratio": 1.0}
# the types whose Joint needs nothing beyond an axis (universal has axis2, custom its functions)
COLUMN_JOINT_TYPES = tuple(t for t in JOINT_TYPES if t not in ("universal", "custom"))


def links_from_columns(names, masses, coms, inertias, visuals, collisions):
    """Links from n names, n masses, (n, 3) centres of mass, (n, 3, 3) inertias and n lists of
    visual and of collision shapes; inertias are made symmetric as Link makes them."""
    n = len(names)
    m = np.asarray(masses, dtype=float).reshape(n)
    c = np.asarray(coms, dtype=float).reshape(n, 3)
    I = np.asarray(inertias, dtype=float).reshape(n, 3, 3)
    scale = np.abs(I).reshape(n, 9).max(axis=1, initial=0.0)
    asym = np.abs(I - I.transpose(0, 2, 1)).reshape(n, 9).max(axis=1, initial=0.0)
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(m) & (m >= 0) & np.isfinite(scale) & (asym <= INERTIA_SYMMETRY_TOL * scale)
    if not ok.all():
        i = int(np.argmin(ok))
        Link(names[i], mass=m[i], com=c[i], inertia=I[i])       # raises the link's own message
        raise ModelError(f"link {names[i]!r}: mass {m[i]}, inertia {I[i].tolist()} refused")
    I = 0.5 * (I + I.transpose(0, 2, 1))
    out = []
    for name, mass, com, inertia, visual, collision in zip(names, m.tolist(), c, I, visuals, collisions):
        link = Link.__new__(Link)
        link.__dict__ = {"name": name, "mass": mass, "com": com, "inertia": inertia, "visuals": visual,
                         "collisions": collision, "collision_family": 0, "collision_mask": 0xFFFF}
        out.append(link)
    return out


def joints_from_columns(names, types, parents, children, origins, axes, q0, per_dof, params, child_poses=None):
    """Joints of COLUMN_JOINT_TYPES from n names, types, parents and children, (n, 4, 4) origins,
    (n, 3) axes (made unit), q0 of all joints in order (sum of nq numbers; ball and free
    quaternions are normalized), per_dof {field: sum of nv numbers} (fields left out take
    Joint's defaults), n params dicts and (n, 4, 4) child poses (None: identity)."""
    n = len(names)
    for name, kind in zip(names, types):
        if kind not in COLUMN_JOINT_TYPES:
            raise ModelError(f"joint {name!r}: type {kind!r} is not one of {', '.join(COLUMN_JOINT_TYPES)}")
    nqs = [JOINT_TYPES[t][0] for t in types]
    nvs = [JOINT_TYPES[t][1] for t in types]
    nq, nv = sum(nqs), sum(nvs)
    origins = np.asarray(origins, dtype=float).reshape(n, 4, 4)
    if child_poses is None:
        child_poses = np.broadcast_to(np.eye(4), (n, 4, 4)).copy()
    child_poses = np.asarray(child_poses, dtype=float).reshape(n, 4, 4)
    axes = np.asarray(axes, dtype=float).reshape(n, 3)
    norms = np.sqrt((axes * axes).sum(axis=1))
    with np.errstate(invalid="ignore"):
        good = np.isfinite(norms) & (norms >= 1e-12)
    if not good.all():
        i = int(np.argmin(good))
        Joint(names[i], types[i], parents[i], children[i], axis=axes[i])    # raises the joint's own message
        raise ModelError(f"joint {names[i]!r} axis: {axes[i].tolist()} refused")
    axes = axes / norms[:, None]
    axes2 = np.broadcast_to([0.0, 1.0, 0.0], (n, 3)).copy()
    q0 = np.array(q0, dtype=float).reshape(-1)
    if q0.size != nq:
        raise ModelError(f"joints {names[0]!r}...: {q0.size} initial positions for {nq} coordinates")
    table = np.empty((len(PER_DOF), nv))
    for k, (field, default) in enumerate(PER_DOF.items()):
        value = per_dof.get(field)
        if value is None:
            table[k] = default
            continue
        value = np.asarray(value, dtype=float).reshape(-1)
        if value.size != nv:
            raise ModelError(f"joints {names[0]!r}...: {value.size} values of {field} for {nv} DOFs")
        table[k] = value
    qs = np.cumsum([0] + nqs).tolist()
    vs = np.cumsum([0] + nvs).tolist()
    q_slices, v_slices = list(map(slice, qs[:-1], qs[1:])), list(map(slice, vs[:-1], vs[1:]))
    for i in range(n):
        if types[i] in ("ball", "free"):
            quat = q0[q_slices[i]][-4:]
            norm = np.linalg.norm(quat)
            if not np.isfinite(norm) or norm < 1e-9:
                raise ModelError(f"joint {names[i]!r}: initial quaternion {quat} is not a rotation")
            quat /= norm
    # each joint's arrays are views into the columns, made by map in C (a Python loop of
    # indexing costs as much as the arrays)
    per_joint = [list(map(row.__getitem__, v_slices)) for row in table]
    out = []
    for (name, kind, parent, child, origin, axis, axis2, child_pose, q, v0, param, lower, upper, vlim, elim,
         damping, stiffness, rest, friction, rotor, gear) in zip(
            names, types, parents, children, origins, axes, axes2, child_poses, map(q0.__getitem__, q_slices),
            map(np.zeros(nv).__getitem__, v_slices), params, *per_joint):
        joint = Joint.__new__(Joint)
        joint.__dict__ = {
            "name": name, "type": kind, "parent": parent, "child": child, "origin": origin, "axis": axis,
            "axis2": axis2, "pitch": 0.0, "euler_order": "xyz", "lower": lower, "upper": upper,
            "velocity_limit": vlim, "effort_limit": elim, "damping": damping, "stiffness": stiffness,
            "rest_position": rest, "friction": friction, "rotor_inertia": rotor, "gear_ratio": gear, "q0": q,
            "v0": v0, "params": param, "locked": False, "child_pose": child_pose, "dof_names": None,
            "transform_axes": None, "ellipsoid_radii": None, "q_index": -1, "v_index": -1}
        out.append(joint)
    return out

