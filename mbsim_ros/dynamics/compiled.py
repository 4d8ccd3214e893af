"""compile(models) -> flat typed arrays the numba kernels work on (the mjModel of this project).

The kernels know six elementary body types. Every Model joint maps onto them:
  revolute, prismatic, screw      -> one REVOLUTE / PRISMATIC / HELICAL body
  ball, free                      -> one SPHERICAL / FREE body (quaternion coordinates)
  universal, euler, planar,
  translational                   -> a chain of one-DOF bodies through massless intermediates
                                     (exactly DART's v = dq/dt for these joints)
  custom                          -> one CUSTOM body with the joint's coordinates, its
                                     transform axes' functions packed into the Tree (ff, fi)
  fixed                           -> no body: the child link is merged into its parent body
Because bodies are created in the Model's depth-first joint order and each takes its
coordinates in order, body coordinate offsets equal the Model's q_index/v_index.

A body's frame is its joint's child-side frame (origin @ J(q) in the parent link's frame); a
link sits in its body at inv(child_pose) (times the fixed joints merged on the way), so every
consumer of link poses, velocities and Jacobians goes through Tree.link_R / link_p.

Spatial vectors are linear-first: motion (v, w), force (f, n), in body coordinates. The
buffer layouts (Tree, Data) live in kernels.py, next to the kernels that carve them.
"""
from __future__ import annotations

import numpy as np

from ..model import Model, ModelError
from ..model.names import WorldNames, unique_entity_names
from ..model.transforms import inverse_transform
from .functions import pack_functions
from .kernels import (CUSTOM, FREE, HELICAL, PRISMATIC, REVOLUTE, SPHERICAL, TREE_HEADER, carve_data,
                      carve_tree, data_size, tree_sizes)

BODY_NQ = {REVOLUTE: 1, PRISMATIC: 1, HELICAL: 1, SPHERICAL: 4, FREE: 7}
BODY_NV = {REVOLUTE: 1, PRISMATIC: 1, HELICAL: 1, SPHERICAL: 3, FREE: 6}


class Compiled:
    """The compiled tree (buffers `tf`, `ti`, the kernels' bundle of them `buffers`, their views
    `tree`) plus the Python-side bookkeeping: which Model joint and link each slot belongs to."""

    def __init__(self, tf, ti, models, nq, nv, joint_of_v, link_names, entities, names, offsets, placements):
        self.tf, self.ti = tf, ti
        self.buffers = (tf, ti)           # the kernels' `tree` argument (step.py)
        self.tree, used_f, used_i = carve_tree.py_func(tf, ti)
        assert (used_f, used_i) == (len(tf), len(ti)), "tree_sizes disagrees with carve_tree"
        self.models = models
        self.nq = nq
        self.nv = nv
        self.joint_of_v = joint_of_v      # velocity index -> joint world name
        self.link_names = link_names      # link world names (model/names.py) in tree order, models concatenated
        self.entities = entities          # each model's entity name in the world
        self.names = names                # the WorldNames of the world
        self.offsets = offsets            # per model: (first link, q offset, v offset)
        self.placements = placements      # per model: its world frame's pose (4x4)

    def link_index(self, model_index: int, link: str) -> int:
        """The compiled index of link `link` (its bare name) of the model at `model_index`."""
        return self.offsets[model_index][0] + self.models[model_index].link_index(link)

    def new_data(self):
        """A zeroed workspace with the constant motion subspaces in place: (its float buffer,
        the Data views into it)."""
        nb, nv, nl, nq = (int(x) for x in self.ti[:4])
        df = np.zeros(data_size(nb, nv, nq, nl))
        data, used = carve_data.py_func(df, self.ti)
        assert used == len(df), "data_size disagrees with carve_data"
        data.S[:] = self.tree.S0
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
    elif t == "custom":
        return [(CUSTOM, np.zeros(3), 0.0, R0, p0)]
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
    elif bt == FREE:
        S[:, :] = np.eye(6)
    return S         # CUSTOM: zero here, computed from q by the kinematics pass


def _custom_axes(joint, functions):
    """(axes (6, 3), (coordinate, function index) (6, 2)) of a custom joint, its functions
    appended to `functions`; a coordinate that drives no axis has no motion: refused."""
    axes, index = np.zeros((6, 3)), np.zeros((6, 2), dtype=np.int64)
    for k, ta in enumerate(joint.transform_axes):
        if ta.function.kind == "input":
            raise ModelError(f"joint {joint.name!r}: transform axis {k} uses the run-time input "
                             f"{ta.function.name!r}; a custom joint's axes are functions of its coordinates")
        axes[k], index[k] = ta.axis, (ta.coordinate, len(functions))
        functions.append(ta.function)
    for c, name in enumerate(joint.dof_names):
        if c not in index[:, 0]:
            raise ModelError(f"joint {joint.name!r}: coordinate {name!r} drives none of its transform "
                             "axes, so it has no motion (an undefined acceleration)")
    return axes, index


def world_gravity(models):
    """The world's gravity: the first model's that states one (Model.gravity_stated: an SDFormat
    world, MJCF's <option gravity>, a Model given one), else the first model's. Models that state
    none take it (their gravity set: the physics reads models[0].gravity); ModelError for a
    stated one that differs."""
    stated = [m for m in models if getattr(m, "gravity_stated", True)]
    source = stated[0] if stated else models[0]
    gravity = np.array(source.gravity, float)
    for m in models:
        if not getattr(m, "gravity_stated", True):
            m.gravity, m.gravity_stated = gravity.copy(), False
        elif not np.allclose(m.gravity, gravity):
            raise ModelError(f"models {source.name!r} and {m.name!r} have different gravity "
                             f"({gravity.tolist()} vs {np.asarray(m.gravity).tolist()}); set one gravity for the world")
    return gravity


def compile_models(models, entities=None, names=None, placements=None) -> Compiled:
    """Compile one Model or a list of them (their coordinates concatenated in the order given).

    entities: each model's name in the world (default: the models' names, made unique); names:
    the world's WorldNames (default: given in the models' order); placements: each model's world
    frame as a 4x4 pose in the world (default identity): a model's root joints hang from it."""
    if isinstance(models, Model):
        models = [models]
    models = list(models)
    for m in models:
        if not m._finalized:
            m.finalize()
    if entities is None:
        entities = unique_entity_names([m.name for m in models])
    if names is None:
        names = WorldNames(zip(entities, models))
    if placements is None:
        placements = [np.eye(4) for _ in models]
    offsets = []
    gravity = world_gravity(models)
    bodies = []          # dicts, in creation order
    links = []           # (body, R, p)
    functions = []       # custom joints' transform-axis functions (Tree.ta_index[..., 1] indexes them)
    link_names = []
    dof = dict(armature=[], damping=[], stiffness=[], rest=[], friction=[])
    joint_of_v = []
    q_off = v_off = 0
    for model, entity, place in zip(models, entities, placements):
        offsets.append((len(link_names), q_off, v_off))
        world = names.table(entity, "link")
        joint_world = names.table(entity, "joint")
        place = np.asarray(place, float)
        link_slot = {}   # link name -> (body index, R, p) of the link frame in that body
        for joint in model.joints:
            if joint.parent is None:
                parent_body, Rp, pp = -1, place[:3, :3].copy(), place[:3, 3].copy()
            else:
                parent_body, Rp, pp = link_slot[joint.parent]
            child_inv = inverse_transform(joint.child_pose)   # the link frame in the joint's child-side frame
            if joint.type == "fixed":
                T = joint.origin @ child_inv
                link_slot[joint.child] = (parent_body, Rp @ T[:3, :3], pp + Rp @ T[:3, 3])
            else:
                elems = _elementary_bodies(joint)
                bq, bv = q_off + joint.q_index, v_off + joint.v_index
                for k, (bt, ax, hp, R0, p0) in enumerate(elems):
                    if k == 0:   # placement relative to the parent body, through merged fixed links
                        R0, p0 = Rp @ R0, pp + Rp @ p0
                    axes, ta_index = np.zeros((6, 3)), np.zeros((6, 2), dtype=np.int64)
                    axes[0] = ax
                    if bt == CUSTOM:
                        axes, ta_index = _custom_axes(joint, functions)
                    radii = np.zeros(3)
                    if bt == CUSTOM and joint.ellipsoid_radii is not None:
                        radii = joint.ellipsoid_radii
                    body = dict(parent=parent_body, jtype=bt, iq=bq, iv=bv, nvb=BODY_NV.get(bt, joint.nv),
                                axis=axes, hpitch=hp, R0=R0, p0=p0, S0=_subspace(bt, ax, hp),
                                mass=0.0, h=np.zeros(3), Io=np.zeros((3, 3)), ta_index=ta_index, radii=radii)
                    bodies.append(body)
                    parent_body = len(bodies) - 1
                    bq += BODY_NQ.get(bt, joint.nq)
                    bv += body["nvb"]
                link_slot[joint.child] = (parent_body, child_inv[:3, :3].copy(), child_inv[:3, 3].copy())
                nv = joint.nv
                dof["armature"].extend(joint.armature)
                dof["damping"].extend(joint.damping)
                # stiffness acts on one-coordinate-per-DOF joints only; a quaternion has no rest angle
                dof["stiffness"].extend(joint.stiffness if joint.type not in ("ball", "free") else np.zeros(nv))
                dof["rest"].extend(joint.rest_position)
                dof["friction"].extend(joint.friction)
                joint_of_v.extend([joint_world[joint.name]] * nv)
            # the link's inertia goes into the body carrying it, expressed in the body frame
            link = model.link(joint.child)
            b, R, p = link_slot[joint.child]
            links.append((b, R, p))
            link_names.append(world[link.name])
            if b >= 0:
                body = bodies[b]
                c = R @ link.com + p
                Ic = R @ link.inertia @ R.T
                body["mass"] += link.mass
                body["h"] += link.mass * c
                body["Io"] += Ic + link.mass * (c.dot(c) * np.eye(3) - np.outer(c, c))
        q_off += model.nq
        v_off += model.nv
    massless_v = _massless_dofs(bodies)
    nb, nl = len(bodies), len(links)
    ff, fi, _ = pack_functions(functions)
    sizes = tree_sizes(nb, v_off, nl, len(ff), len(fi))
    tf = np.zeros(sizes[0])
    ti = np.zeros(sizes[1], dtype=np.int64)
    ti[:TREE_HEADER] = nb, v_off, nl, q_off, len(ff), len(fi)
    tree, _, _ = carve_tree.py_func(tf, ti)
    for k, b in enumerate(bodies):
        for key in ("parent", "jtype", "iq", "iv", "nvb", "axis", "hpitch", "R0", "p0", "S0",
                    "mass", "h", "Io", "ta_index", "radii"):
            getattr(tree, key)[k] = b[key]
    tree.ff[:], tree.fi[:] = ff, fi
    for key in ("armature", "damping", "stiffness", "rest", "friction"):
        getattr(tree, key)[:] = dof[key]
    for k, (b, R, p) in enumerate(links):
        tree.link_body[k], tree.link_R[k], tree.link_p[k] = b, R, p
    tree.gravity[:] = gravity
    compiled = Compiled(tf, ti, models, q_off, v_off, joint_of_v, link_names, list(entities), names, offsets,
                        [np.asarray(p, float) for p in placements])
    compiled.massless_v = massless_v[tree.armature[massless_v] <= 0.0]   # a rotor inertia moves its DOF
    compiled.determined_v = np.zeros(0, dtype=np.int64)   # see constrained_massless
    return compiled


def _massless_dofs(bodies):
    """The velocity indices of DOFs whose whole subtree has no mass or inertia: kinematics,
    Jacobians, CRBA and RNEA are defined there, an acceleration from forces is not."""
    nb = len(bodies)
    sub_mass = np.array([b["mass"] + np.trace(b["Io"]) for b in bodies])
    for k in range(nb - 1, -1, -1):
        if bodies[k]["parent"] >= 0:
            sub_mass[bodies[k]["parent"]] += sub_mass[k]
    return np.array([b["iv"] + i for k, b in enumerate(bodies) if sub_mass[k] <= 0.0 for i in range(b["nvb"])],
                    dtype=np.int64)


def massless_joints(compiled):
    """Names of the joints with DOFs that move only massless links, in tree order."""
    return list(dict.fromkeys(compiled.joint_of_v[i] for i in compiled.massless_v))


def check_movable(compiled, what):
    """ModelError naming the joints forward dynamics cannot move (massless subtrees)."""
    names = massless_joints(compiled)
    if names:
        raise ModelError(f"{what}: joint{'s' if len(names) > 1 else ''} {', '.join(map(repr, names))} "
                         f"move{'' if len(names) > 1 else 's'} only links with no mass or inertia, so "
                         "forces give no defined acceleration there (kinematics, Jacobians, mass_matrix and "
                         "inverse_dynamics are defined); give the links an inertia, make the joints fixed, "
                         "or opt in to an armature as MuJoCo's: massless_armature=<kg m^2> (Simulation argument, "
                         "run configuration key, sim_node parameter) or mbsim run --massless-armature <kg m^2>")


MASSLESS_BOUND = 0.01     # a massless leaf's mass and inertia: this fraction of the body it hangs from


def bound_massless_leaves(compiled):
    """Give the bodies of massless leaves (subtrees with no mass or inertia whose links and
    DOFs no loop constraint, coordinate coupler or motor touches: a gripper finger without
    <inertial>) MASSLESS_BOUND of the mass and central inertia of the nearest massive body they
    hang from, at their own origin, as MuJoCo's boundmass/boundinertia raise light bodies.
    Returns [(joint names, that body's link name, mass kg, inertia kg m^2)] per leaf, and
    updates compiled.massless_v (what is left is determined by constraints, or hangs from no
    mass)."""
    t = compiled.tree
    nb = len(t.parent)
    own = np.array([t.mass[k] + np.trace(t.Io[k]) for k in range(nb)])
    sub = own.copy()
    for k in range(nb - 1, -1, -1):
        if t.parent[k] >= 0:
            sub[t.parent[k]] += sub[k]
    touched_links, touched_v = set(), set()
    for mi, model in enumerate(compiled.models):
        _, _, v0 = compiled.offsets[mi]
        for c in list(model.constraints) + list(model.motors):
            touched_links |= {compiled.link_index(mi, n) for n in (c.link1, c.link2) if n is not None}
        for c in model.couplers:
            touched_v |= {v0 + model.dof_names.index(n) for n in (c.dependent, c.independent)}
    touched_bodies = {int(t.link_body[k]) for k in touched_links} | \
        {k for k in range(nb) for i in range(t.iv[k], t.iv[k] + t.nvb[k]) if i in touched_v}
    children = [[] for _ in range(nb)]
    for k in range(nb):
        if t.parent[k] >= 0:
            children[t.parent[k]].append(k)
    leaves = []
    for top in range(nb):
        p = t.parent[top]
        if sub[top] > 0 or (p >= 0 and sub[p] <= 0):
            continue                       # not the top of a massless subtree
        subtree, stack = [], [top]
        while stack:
            k = stack.pop()
            subtree.append(k)
            stack.extend(children[k])
        if touched_bodies & set(subtree):
            continue                       # determined by constraints: not a leaf
        if p < 0:
            continue                       # hangs from the world: no mass to take a fraction of
        anchor = p
        while t.mass[anchor] <= 0 and t.parent[anchor] >= 0:
            anchor = t.parent[anchor]
        m = t.mass[anchor]
        if m <= 0:
            continue
        c = t.h[anchor] / m
        central = t.Io[anchor] - m * (c.dot(c) * np.eye(3) - np.outer(c, c))
        mass = MASSLESS_BOUND * m
        inertia = max(MASSLESS_BOUND * np.trace(central) / 3, mass * 1e-4)
        for k in subtree:
            t.mass[k], t.h[k], t.Io[k] = mass, 0.0, inertia * np.eye(3)
        joints = list(dict.fromkeys(compiled.joint_of_v[i] for k in subtree
                                    for i in range(t.iv[k], t.iv[k] + t.nvb[k])))
        anchor_link = next(compiled.link_names[k] for k in range(len(t.link_body)) if t.link_body[k] == anchor)
        leaves.append((joints, anchor_link, mass, inertia))
    bodies = [dict(mass=t.mass[k], Io=t.Io[k], parent=t.parent[k], iv=t.iv[k], nvb=t.nvb[k]) for k in range(nb)]
    massless_v = _massless_dofs(bodies)
    compiled.massless_v = massless_v[t.armature[massless_v] <= 0.0]
    return leaves


def constrained_massless(compiled):
    """Let the constraints determine the massless DOFs they touch (after bound_massless_leaves):
    compiled.determined_v gets them and massless_v keeps only the others (which forward dynamics
    cannot move). The mass matrix is then singular, and the step solves the free motion with
    the bilateral constraint rows (constraints.DENSE_ROOT): M + rho J^T J is positive definite
    when the constraints fix every direction M has no inertia in, as Simbody's constrained
    solve asks. Returns the names of the joints so determined."""
    t = compiled.tree
    nb = len(t.parent)
    # bodies of links a loop or motor holds; DOF -> the DOFs a coupler ties it to, either way: a
    # massless leader (OpenSim's wrist: the massless body of flexion and deviation) is as
    # determined by its massive followers as a massless follower by its leader
    linked, tied = set(), {}
    for mi, model in enumerate(compiled.models):
        _, _, v0 = compiled.offsets[mi]
        for c in list(model.constraints) + list(model.motors):
            linked |= {int(t.link_body[compiled.link_index(mi, n)]) for n in (c.link1, c.link2) if n is not None}
        for c in model.couplers:
            a, b = v0 + model.dof_names.index(c.dependent), v0 + model.dof_names.index(c.independent)
            tied.setdefault(a, []).append(b)
            tied.setdefault(b, []).append(a)
    body_of_v = {i: k for k in range(nb) for i in range(t.iv[k], t.iv[k] + t.nvb[k])}
    massless = set(compiled.massless_v.tolist())

    def holds(k):          # a loop or motor holds body k or a body below it
        return k in linked or any(holds(c) for c in range(nb) if t.parent[c] == k)

    def coupled(i):   # couplers tie DOF i, directly or through other DOFs, to a DOF with mass
        seen, stack = {i}, [i]
        while stack:
            for j in tied.get(stack.pop(), ()):
                if j not in massless:
                    return True
                if j not in seen:
                    seen.add(j)
                    stack.append(j)
        return False

    determined = np.array([i for i in compiled.massless_v if coupled(i) or holds(body_of_v[i])],
                          dtype=np.int64)
    compiled.determined_v = determined
    compiled.massless_v = np.setdiff1d(compiled.massless_v, determined)
    return list(dict.fromkeys(compiled.joint_of_v[i] for i in determined))
