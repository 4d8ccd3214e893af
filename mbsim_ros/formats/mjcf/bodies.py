"""MJCF <worldbody> -> links, joints, shapes and frames of a Model.

A body is a link named as the body (`body<id>` when unnamed, id as MuJoCo numbers bodies). Its
joints, in order, become a chain: the k-th of n joints ends at a massless link
`<body>_<joint>` (the last at the body's link), each turning about its own `pos` in the body
frame as MuJoCo composes them: T = T_parent X_body [T(p_k) J_k(q) T(-p_k)]... (joints.py). A body
without joints is welded to its parent (`<body>_fixed`). Geoms and sites of the world body go
on a link `worldbody` welded to the world. Free joints only at top-level bodies, as MuJoCo.
The walk gathers links, joints and geoms; their numbers become arrays for the whole model at
the end (geom poses and masses in masses.py, Links and Joints from columns).
"""
from __future__ import annotations

import numpy as np

from ...model import Frame
from ...model.columns import links_from_columns
from ...model.transforms import matrix_to_quat
from .geoms import geom_shapes, read_geom
from .joints import JointColumns, read_joint
from .masses import body_masses, geom_masses, geom_poses
from .parse import EYE4, compose

WORLD_LINK = "worldbody"
_BODY_CHILDREN = ("body", "joint", "freejoint", "geom", "site", "inertial", "frame", "camera",
                  "light", "composite", "flexcomp", "plugin", "attach", "replicate")


class Tree:
    """What the walk produced, besides the frames added to the model."""

    def __init__(self):
        self.body_link = {}      # body name -> link name (the chain's last link)
        self.body_nodes = []     # (body node, link name) in MuJoCo's body order
        self.bodies = []         # [body node, its first <inertial> or None], index = Geom.body
        self.links = []          # (link name, body index or -1 for a massless link) in the order they join the model
        self.joints = JointColumns()
        self.geoms = []          # Geom (with .link and .body) in document order
        self.joint_names = []    # MJCF joint names in MuJoCo's order
        self.cameras = []        # (node, class, link, pose)
        self.sites = {}          # site name -> (link, pose)
        self.chain_parent = {}   # link of a body with several joints -> the link its chain hangs from


def read_worldbody(r, root, model, meshes):
    tree = Tree()
    counters = {"body": 1, "joint": 0}
    world_used = False
    for wb in root.each("worldbody"):
        for node in wb.children:
            world_used |= _container_child(r, model, tree, meshes, node, None, EYE4, "main", WORLD_LINK, -1)
        _bodies(r, model, tree, meshes, wb, None, EYE4, "main", counters)
    if world_used:
        tree.links.append((WORLD_LINK, -1))
        tree.joints.weld(WORLD_LINK + "_fixed", None, WORLD_LINK, EYE4)
    tree.body_link["world"] = WORLD_LINK if world_used else None
    _build(r, model, tree)
    _exclude_chain_parents(model, tree)
    return tree


def _build(r, model, tree):
    """The model's links (with their shapes and mass properties) and joints, from what the walk
    gathered."""
    geoms = tree.geoms
    poses = geom_poses(geoms) if geoms else np.zeros((0, 4, 4))
    geom_shapes(geoms, poses)
    shapes = {name: ([], []) for name, _ in tree.links}
    for g in geoms:
        visuals, collisions = shapes[g.link]
        if g.group <= 2:                         # MuJoCo shows groups 0-2
            visuals.append(g.shape)
        if g.contype or g.conaffinity:
            collisions.append(g.shape)
    M, C, J = body_masses(r, tree.bodies, geoms, *geom_masses(r, geoms, poses))
    n = len(tree.links)
    mass, com, inertia = np.zeros(n), np.zeros((n, 3)), np.zeros((n, 3, 3))
    names, own = [], []
    for i, (name, body) in enumerate(tree.links):
        names.append(name)
        if body >= 0:
            own.append((i, body))
    if own:
        at, body = np.array(own).T
        mass[at], com[at], inertia[at] = M[body], C[body], J[body]
    for link in links_from_columns(names, mass, com, inertia, [shapes[k][0] for k in names],
                                   [shapes[k][1] for k in names]):
        model.add_link(link)
    for joint in tree.joints.build():
        model.add_joint(joint)


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


def _container_child(r, model, tree, meshes, node, link_name, T, cls, link, body):
    """One child of a body or frame other than a body (T: the container's pose in the link's
    frame; link: the link's name, body: the body's index or -1). Returns whether something
    landed on the link itself (a geom, site, camera)."""
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
            used |= _container_child(r, model, tree, meshes, c, link_name, T2, cls2, link, body)
        return used
    if tag == "geom":
        g = read_geom(r, node, cls, T, meshes)
        if g is None:
            return False
        g.link, g.body = link, body
        tree.geoms.append(g)
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
            model.frames.append(Frame(name, link, pose))
            tree.sites[name] = (link, pose)
        return bool(name)
    if tag == "camera":
        a = r.attrs(node, "camera", cls)
        tree.cameras.append((node, a, link, compose(T, r.pose(node, a))))
        return True
    if tag in ("joint", "freejoint", "inertial"):
        if link_name is None:
            raise r.error(node, f"<{tag}> in the world body: expected it inside a <body>")
        if tag == "inertial" and tree.bodies[body][1] is None:
            tree.bodies[body][1] = node
        return False          # joints: read by _body
    if tag == "light":
        return False
    if tag in ("composite", "flexcomp", "plugin", "attach", "replicate"):
        r.note(node, f"<{tag}> is not supported: left out")
        r.left_out.add(tag)
        return False
    r.note(node, f"unknown element <{tag}> in a body: ignored")
    return False


def _body(r, model, tree, meshes, node, parent_link, T_parent, cls, counters):
    """A body: its joint chain, link and children. parent_link None: the world."""
    bid = counters["body"]
    counters["body"] += 1
    at = node.attrib
    name = at.get("name") or f"body{bid}"
    if name in tree.body_link:
        raise r.error(node, f"a body named \"{name}\" already exists")
    # MuJoCo applies a body's class, like its childclass, to everything inside it
    cls_here = at.get("childclass", at.get("class", cls))
    if cls_here not in r.classes:
        raise r.error(node, f"childclass=\"{cls_here}\" is not a <default> class")
    X = compose(T_parent, r.pose(node, at))
    joint_nodes = [c for c in node.children if c.tag in ("joint", "freejoint")]
    _chain(r, tree, joint_nodes, name, parent_link, X, cls_here, counters)
    tree.body_link[name] = name
    tree.body_nodes.append((node, name))
    if at.get("mocap") == "true":
        r.note(node, "mocap body: welded where it is (nothing moves it)")
    if at.get("gravcomp") not in (None, "0"):
        r.note(node, "gravcomp: gravity compensation is not simulated")
    body = len(tree.bodies)
    tree.bodies.append([node, None])
    for c in node.children:
        if c.tag != "joint" and c.tag != "body":        # (read by _chain and _bodies)
            _container_child(r, model, tree, meshes, c, name, EYE4, cls_here, name, body)
    tree.links.append((name, body))
    _bodies(r, model, tree, meshes, node, name, EYE4, cls_here, counters)


def _bodies(r, model, tree, meshes, node, link_name, T, cls, counters):
    """The bodies under a body, the world body or a frame, in MuJoCo's order."""
    for c in node.children:
        if c.tag == "body":
            _body(r, model, tree, meshes, c, link_name, T, cls, counters)
        elif c.tag == "frame":
            _bodies(r, model, tree, meshes, c, link_name, compose(T, r.pose(c, c.attrib)), c.get("childclass", cls), counters)


def _chain(r, tree, joint_nodes, name, parent_link, X, cls, counters):
    if not joint_nodes:
        tree.joints.weld(f"{name}_fixed", parent_link, name, X)
        return
    parent = parent_link
    if len(joint_nodes) > 1 and parent_link is not None:
        tree.chain_parent[name] = parent_link
    for k, jn in enumerate(joint_nodes):
        jid = counters["joint"]
        counters["joint"] += 1
        joint = read_joint(r, jn, cls, jid, X if k == 0 else EYE4)
        jname, kind = joint[0], joint[1]
        if kind == "free":
            if parent_link is not None or len(joint_nodes) > 1:
                raise r.error(jn, "a free joint must be the only joint of a body in the world body")
            q0 = (*X[:3, 3].tolist(), *matrix_to_quat(X[:3, :3]).tolist())
            joint = (jname, kind, EYE4, EYE4, joint[4], q0, joint[6], joint[7])
        last = k == len(joint_nodes) - 1
        child = name if last else f"{name}_{jname}"
        if not last:
            tree.links.append((child, -1))
        tree.joints.add(joint, parent, child)
        tree.joint_names.append(jname)
        parent = child
