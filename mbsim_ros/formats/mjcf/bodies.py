"""MJCF <worldbody> -> links, joints, shapes and frames of a Model.

A body is a link named as the body (`body<id>` when unnamed, id as MuJoCo numbers bodies). Its
joints, in order, become a chain: the k-th of n joints ends at a massless link
`<body>_<joint>` (the last at the body's link), each turning about its own `pos` in the body
frame as MuJoCo composes them: T = T_parent X_body [T(p_k) J_k(q) T(-p_k)]... A hinge's or
slide's `ref` (MuJoCo's qpos0) is folded into the joint origin, so q is MuJoCo's qpos. A body
without joints is welded to its parent (`<body>_fixed`). Geoms and sites of the world body go
on a link `worldbody` welded to the world. Free joints only at top-level bodies, as MuJoCo.
"""
from __future__ import annotations

import numpy as np

from ...model import Frame, Joint, Link
from ...model.transforms import axis_angle_to_matrix, matrix_to_quat
from .geoms import read_geom
from .parse import EYE3, EYE4, compose

WORLD_LINK = "worldbody"
_JOINT_TYPES = {"hinge": "revolute", "slide": "prismatic", "ball": "ball", "free": "free"}   # MJCF -> Model
_BODY_CHILDREN = ("body", "joint", "freejoint", "geom", "site", "inertial", "frame", "camera",
                  "light", "composite", "flexcomp", "plugin", "attach", "replicate")


class Tree:
    """What the walk produced, besides the links and joints added to the model."""

    def __init__(self):
        self.body_link = {}      # body name -> link name (the chain's last link)
        self.body_nodes = []     # (body node, link name) in MuJoCo's body order
        self.geoms = []          # (link name, Geom)
        self.joint_names = []    # MJCF joint names in MuJoCo's order
        self.cameras = []        # (node, class, link, pose)
        self.sites = {}          # site name -> (link, pose)
        self.chain_parent = {}   # link of a body with several joints -> the link its chain hangs from


def read_worldbody(r, root, model, meshes):
    tree = Tree()
    counters = {"body": 1, "joint": 0}
    world_link = Link(WORLD_LINK)
    world_used = False
    for wb in root.each("worldbody"):
        for node in wb.children:
            world_used |= _container_child(r, model, tree, meshes, node, None, EYE4, "main", world_link)
        _bodies(r, model, tree, meshes, wb, None, EYE4, "main", counters)
    if world_used:
        model.add_link(world_link)
        model.add_joint(Joint(WORLD_LINK + "_fixed", "fixed", None, WORLD_LINK))
    tree.body_link["world"] = WORLD_LINK if world_used else None
    _exclude_chain_parents(model, tree)
    return tree


def _exclude_chain_parents(model, tree):
    """MuJoCo keeps a body apart from its parent body (and all welded to it) unless that is
    welded to the world; a body of several joints hangs from its parent through massless links,
    so the parent filter does not see the pair: it is excluded here."""
    welded = {}                           # link -> links welded to it by fixed joints (None: the world)
    for j in model.joints:
        if j.type == "fixed":
            welded.setdefault(j.parent, []).append(j.child)
            welded.setdefault(j.child, []).append(j.parent)

    def weld_group(link):
        group, todo = {link}, [link]
        while todo:
            for other in welded.get(todo.pop(), []):
                if other not in group:
                    group.add(other)
                    todo.append(other)
        return group
    for body_link, parent in tree.chain_parent.items():
        above = weld_group(parent)
        if None not in above:
            model.collision_excludes.extend((a, b) for a in sorted(weld_group(body_link)) for b in sorted(above))


def _container_child(r, model, tree, meshes, node, link_name, T, cls, link):
    """One child of a body or frame other than a body (T: the container's pose in the link's
    frame). Returns whether something landed on the link itself (a geom, site, camera)."""
    tag = node.tag
    if tag == "body":
        return False
    if tag == "frame":
        T2 = compose(T, r.pose(node, node.attrib))
        cls2 = node.get("childclass", cls)
        if cls2 not in r.classes:
            raise r.error(node, f"childclass=\"{cls2}\" is not a <default> class")
        used = False
        for c in node.children:
            used |= _container_child(r, model, tree, meshes, c, link_name, T2, cls2, link)
        return used
    if tag == "geom":
        g = read_geom(r, node, cls, T, meshes)
        if g is None:
            return False
        tree.geoms.append((link.name, g))
        link_geoms(r, link, g)
        return True
    if tag == "site":
        a = r.attrs(node, "site", cls)
        pose = compose(T, r.pose(node, a))
        if "fromto" in a:
            ft = r.floats(node, a, "fromto", 6)
            pose = T.copy()
            pose[:3, 3] = T[:3, :3] @ (0.5 * (ft[:3] + ft[3:])) + T[:3, 3]
        name = a.get("name")
        if name:
            model.frames.append(Frame(name, link.name, pose))
            tree.sites[name] = (link.name, pose)
        return bool(name)
    if tag == "camera":
        a = r.attrs(node, "camera", cls)
        tree.cameras.append((node, a, link.name, compose(T, r.pose(node, a))))
        return True
    if tag in ("joint", "freejoint", "inertial"):
        if link_name is None:
            raise r.error(node, f"<{tag}> in the world body: expected it inside a <body>")
        return False          # read by _body
    if tag == "light":
        return False
    if tag in ("composite", "flexcomp", "plugin", "attach", "replicate"):
        r.note(node, f"<{tag}> is not supported: left out")
        return False
    r.note(node, f"unknown element <{tag}> in a body: ignored")
    return False


def link_geoms(r, link, g):
    lo = g.group
    if lo <= 2:                          # MuJoCo shows groups 0-2
        link.visuals.append(g.shape)
    g.shape.contype, g.shape.conaffinity = g.contype, g.conaffinity
    if g.contype or g.conaffinity:
        link.collisions.append(g.shape)


def _body(r, model, tree, meshes, node, parent_link, T_parent, cls, counters):
    """A body: its joint chain, link and children. parent_link None: the world."""
    bid = counters["body"]
    counters["body"] += 1
    name = node.get("name") or f"body{bid}"
    if name in tree.body_link:
        raise r.error(node, f"a body named \"{name}\" already exists")
    # MuJoCo applies a body's class, like its childclass, to everything inside it
    cls_here = node.get("childclass", node.get("class", cls))
    if cls_here not in r.classes:
        raise r.error(node, f"childclass=\"{cls_here}\" is not a <default> class")
    X = compose(T_parent, r.pose(node, node.attrib))
    joint_nodes = [c for c in node.children if c.tag in ("joint", "freejoint")]
    link = Link(name)
    _chain(r, model, tree, node, joint_nodes, name, parent_link, X, cls_here, counters)
    tree.body_link[name] = name
    tree.body_nodes.append((node, name))
    if node.get("mocap") == "true":
        r.note(node, "mocap body: welded where it is (nothing moves it)")
    if node.get("gravcomp") not in (None, "0"):
        r.note(node, "gravcomp: gravity compensation is not simulated")
    first = len(tree.geoms)
    for c in node.children:
        _container_child(r, model, tree, meshes, c, name, EYE4, cls_here, link)
    mass_from_geoms(r, node, link, [g for _, g in tree.geoms[first:]])
    model.add_link(link)
    _bodies(r, model, tree, meshes, node, name, EYE4, cls_here, counters)


def _bodies(r, model, tree, meshes, node, link_name, T, cls, counters):
    """The bodies under a body, the world body or a frame, in MuJoCo's order."""
    for c in node.children:
        if c.tag == "body":
            _body(r, model, tree, meshes, c, link_name, T, cls, counters)
        elif c.tag == "frame":
            _bodies(r, model, tree, meshes, c, link_name, compose(T, r.pose(c, c.attrib)), c.get("childclass", cls), counters)


def _chain(r, model, tree, node, joint_nodes, name, parent_link, X, cls, counters):
    if not joint_nodes:
        model.add_joint(Joint(f"{name}_fixed", "fixed", parent_link, name, origin=X))
        return
    parent = parent_link
    if len(joint_nodes) > 1 and parent_link is not None:
        tree.chain_parent[name] = parent_link
    for k, jn in enumerate(joint_nodes):
        jid = counters["joint"]
        counters["joint"] += 1
        joint = read_joint(r, jn, cls, jid, parent, X if k == 0 else EYE4)
        if joint.type == "free":
            if parent_link is not None or len(joint_nodes) > 1:
                raise r.error(jn, "a free joint must be the only joint of a body in the world body")
            joint.q0 = np.concatenate([X[:3, 3], matrix_to_quat(X[:3, :3])])
            joint.origin = EYE4.copy()
        last = k == len(joint_nodes) - 1
        child = name if last else f"{name}_{joint.name}"
        if not last:
            model.add_link(Link(child))
        joint.child = child
        tree.joint_names.append(joint.name)
        model.add_joint(joint)
        parent = child


def read_joint(r, node, cls, jid, parent, X):
    free = node.tag == "freejoint"
    a = node.attrib if free else r.attrs(node, "joint", cls)
    kind = "free" if free else r.choice(node, a, "type", ("hinge", "slide", "ball", "free"), "hinge")
    name = a.get("name") or f"joint{jid}"
    axis = r.unit(node, r.floats(node, a, "axis", 3, [0.0, 0.0, 1.0]), "axis") if kind in ("hinge", "slide") else np.array([0.0, 0.0, 1.0])
    # a slide's anchor does not move anything; a free joint's is its body's origin
    angular = kind in ("hinge", "ball")
    pos = r.numbers(node, a, "pos", 3, (0.0, 0.0, 0.0)) if angular else [0.0, 0.0, 0.0]
    ref = r.number(node, a, "ref", 0.0)
    if kind == "hinge":
        ref = r.angle(ref)
    origin = X.copy()
    if pos[0] or pos[1] or pos[2]:       # (most joints sit at their body's origin)
        origin[:3, 3] += X[:3, :3] @ np.array(pos)
    child_pose = EYE4.copy()
    if angular:
        child_pose[:3, 3] = pos
    if kind == "hinge" and ref:
        origin[:3, :3] = origin[:3, :3] @ axis_angle_to_matrix(axis, -ref)
    elif kind == "slide" and ref:
        origin[:3, 3] -= origin[:3, :3] @ axis * ref
    damping = r.number(node, a, "damping", 0.0)
    stiffness = r.number(node, a, "stiffness", 0.0)
    springref = r.number(node, a, "springref", 0.0)
    if kind == "hinge":
        springref = r.angle(springref)
    if stiffness and kind in ("ball", "free"):
        r.note(node, f"stiffness on a {kind} joint is not simulated")
    if "springdamper" in a:
        r.note(node, "springdamper (time constant, damping ratio) is not used; give stiffness and damping")
    lower = upper = None
    if kind != "free":
        limited = r.choice(node, a, "limited", ("auto", "true", "false"), "auto")
        has_range = "range" in a
        if limited == "true" or (limited == "auto" and r.compiler.autolimits and has_range):
            rng = r.numbers(node, a, "range", 2, (0.0, 0.0))
            if angular:
                rng = [r.angle(x) for x in rng]
            if kind == "ball":
                r.note(node, f"ball joint cone limit {rng[1]:g} rad is not enforced")
            elif not rng[0] < rng[1]:
                raise r.error(node, f"range=\"{a.get('range', '')}\": expected lower < upper for a limited joint")
            else:
                lower, upper = rng[0], rng[1]
    effort = None
    if "actuatorfrcrange" in a and a.get("actuatorfrclimited", "auto") != "false" and kind in ("hinge", "slide"):
        fr = r.numbers(node, a, "actuatorfrcrange", 2)
        effort = max(abs(fr[0]), abs(fr[1]))
    armature = r.number(node, a, "armature", 0.0)
    # one number per joint: the Joint repeats it for each DOF
    return Joint(name, _JOINT_TYPES[kind], parent, "", origin=origin, axis=axis,
                 child_pose=child_pose,
                 lower=lower, upper=upper, damping=damping, stiffness=stiffness if kind in ("hinge", "slide") else None,
                 rest_position=springref if kind in ("hinge", "slide") else None,
                 friction=r.number(node, a, "frictionloss", 0.0), rotor_inertia=armature,
                 effort_limit=effort, q0=np.array([ref]) if kind in ("hinge", "slide") else None,
                 params={"mjcf_type": kind})


def mass_from_geoms(r, node, link, geoms):
    """The body's mass properties: <inertial>, else (inertiafromgeom) its geoms; then MuJoCo's
    boundmass, boundinertia and balanceinertia."""
    inertial = node.each("inertial")
    mode = r.compiler.inertiafromgeom
    if inertial and mode != "true":
        n = inertial[0]
        a = n.attrib
        m = r.number(n, a, "mass")
        R = r.rotation(n, a)
        if "fullinertia" in a:
            xx, yy, zz, xy, xz, yz = r.floats(n, a, "fullinertia", 6)
            I = R @ np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]]) @ R.T
        else:
            I = R @ np.diag(r.floats(n, a, "diaginertia", 3)) @ R.T
        com = r.floats(n, a, "pos", 3)
        if m < 0:
            raise r.error(n, f"mass {m:g}: expected >= 0")
    elif mode != "false" and any(g.mass for g in geoms):
        parts = [g for g in geoms if g.mass]
        m = sum(g.mass for g in parts)
        com = sum(g.mass * g.com for g in parts) / m
        I = np.zeros((3, 3))
        for g in parts:
            d = g.com - com
            I += g.inertia + g.mass * (d.dot(d) * EYE3 - d[:, None] * d)     # (np.outer's products)
    else:
        m, com, I = 0.0, np.zeros(3), np.zeros((3, 3))
    c = r.compiler
    if c.boundmass > 0 or c.boundinertia > 0 or c.balanceinertia:
        m = max(m, c.boundmass)
        w, U = np.linalg.eigh(0.5 * (I + I.T))
        w = np.maximum(w, c.boundinertia)
        if c.balanceinertia and (w[0] + w[1] < w[2] or w[0] + w[2] < w[1] or w[1] + w[2] < w[0]):
            w[:] = w.mean()
        I = U @ np.diag(w) @ U.T
    link.mass, link.com, link.inertia = m, np.asarray(com, float), 0.5 * (I + I.T)
