"""MJCF sections around the body tree: keyframes, actuators, sensors, cameras, equality
constraints, tendons and contact pairs, onto the Model.

Actuators on a hinge or slide joint (MuJoCo's force gear * (gain * ctrl + b0 + b1 L + b2 dL/dt),
L = gear * q): the control part is an Actuator (kind "coordinate", gain = gear * gainprm[0],
control clamped to ctrlrange), the bias part (a position or velocity servo's -kp L - kv dL/dt)
joins the joint's spring and damper (stiffness += -b1 gear^2, damping += -b2 gear^2, the rest
position shifted by b0). So sim.set_control(name, ctrl) gives MuJoCo's force, and a <key>'s ctrl
is the initial control. Fixed tendons: tendons.py. Not mapped (each a note): actuators on a
tendon, site or body, activation dynamics, affine gains, forcerange on a servo.
"""
from __future__ import annotations

import numpy as np

from ...model import Actuator, CoordinateCoupler, Function, LoopConstraint, Sensor
from ...model.transforms import axis_angle_to_matrix, inverse_transform, quat_to_matrix
from .parse import ACTUATOR_TAGS
from .tendons import read_fixed_tendons, tendon_coupler

_SITE_SENSORS = {"accelerometer": "accelerometer", "gyro": "gyro", "force": "force", "torque": "force",
                 "rangefinder": "range"}
_FLIP_Z = np.diag([1.0, -1.0, -1.0, 1.0])     # MuJoCo's rangefinder looks along +z, ours along -z


def read_elements(r, root, model, tree, keyframe):
    joints = {j.name: j for j in model.joints}
    poses = _poses_at_qpos0(model) if any(n.children for n in root.each("equality")) else {}
    _contact(r, root, model, tree)
    tendons = read_fixed_tendons(r, root, joints)
    for tag in ("deformable", "extension", "custom"):
        for node in root.each(tag):
            r.note(node, f"<{tag}> is not used")
    _equality(r, root, model, tree, joints, poses, tendons)
    _actuators(r, root, model, joints)
    _sensors(r, root, model, tree)
    _cameras(r, model, tree)
    _keyframes(r, root, model, tree, joints, keyframe)


# -- contact exclusions and explicit pairs ----------------------------------------------
_PAIR_OWN = ("geom1", "geom2", "name", "class")


def _contact(r, root, model, tree):
    geoms = {}
    for g in tree.geoms:
        if g.name:
            geoms[g.name] = (g.link, g)
    for node in root.each("contact"):
        for c in node.children:
            if c.tag == "exclude":
                links = [_excluded_link(r, c, tree, key) for key in ("body1", "body2")]
                if None not in links:
                    model.collision_excludes.append(tuple(links))
            elif c.tag == "pair":
                found = [_pair_geom(r, c, geoms, key) for key in ("geom1", "geom2")]
                ignored = [k for k in c.attrib if k not in _PAIR_OWN]
                if ignored:
                    r.note(c, f"<pair> {', '.join(ignored)} not applied: the geoms' own friction and contact "
                              "settings are used")
                if None in found:
                    continue
                for link_name, g in found:      # a pair may name geoms that collide with nothing else
                    link = model.link(link_name)
                    if not any(s is g.shape for s in link.collisions):
                        link.collisions.append(g.shape)
                model.collision_pairs.append((found[0][1].shape, found[1][1].shape))
            else:
                r.note(c, f"unknown element <contact><{c.tag}>: ignored")


def _excluded_link(r, node, tree, key):
    """The link of the body an <exclude> names (None: the world body when it has no geoms)."""
    name = node.get(key)
    if name is None:
        raise r.error(node, f"<exclude> needs {key}=\"BODY\"")
    if name not in tree.body_link:
        raise r.error(node, f"{key}=\"{name}\": expected the name of a <body>")
    return tree.body_link[name]


def _pair_geom(r, node, geoms, key):
    """(link name, Geom) a <pair> names; None (with a note) for a geom that is not simulated."""
    name = node.get(key)
    if name is None:
        raise r.error(node, f"<pair> needs {key}=\"GEOM\"")
    if name not in geoms:
        if name in r.skipped_geoms:
            r.note(node, f"<pair> with geom \"{name}\", which is not simulated: left out")
            return None
        raise r.error(node, f"{key}=\"{name}\": expected the name of a <geom>")
    return geoms[name]


# -- keyframes --------------------------------------------------------------------------
def _keyframes(r, root, model, tree, joints, keyframe):
    keys = [k for node in root.each("keyframe") for k in node.each("key")]
    names = [k.get("name") or str(i) for i, k in enumerate(keys)]
    model.settings["keyframes"] = names
    if keyframe is None:
        return
    want = str(keyframe)
    if want not in names:
        raise r.error(root, f"no keyframe {want!r}; the keyframes are {', '.join(names) or 'none'}")
    node = keys[names.index(want)]
    order = [joints[n] for n in tree.joint_names]
    nq = sum(j.nq for j in order)
    nv = sum(j.nv for j in order)
    default = np.concatenate([_mj_qpos(j) for j in order]) if order else np.zeros(0)
    qpos = r.floats(node, node.attrib, "qpos", nq, default) if "qpos" in node.attrib else default
    qvel = r.floats(node, node.attrib, "qvel", nv, np.zeros(nv))
    iq = iv = 0
    for j in order:
        q, v = qpos[iq:iq + j.nq].copy(), qvel[iv:iv + j.nv].copy()
        if j.type in ("ball", "free"):
            w = q[-4:]
            if np.linalg.norm(w) < 1e-12:
                raise r.error(node, f"qpos of joint {j.name!r}: a zero quaternion")
            q[-4:] = np.array([w[1], w[2], w[3], w[0]]) / np.linalg.norm(w)
        if j.type == "free":       # MuJoCo's linear velocity is in the world frame, ours in the body's
            v[:3] = quat_to_matrix(q[3:]).T @ v[:3]
        j.q0, j.v0 = q, v
        iq, iv = iq + j.nq, iv + j.nv
    if "ctrl" in node.attrib:
        ctrl = r.floats(node, node.attrib, "ctrl", len(model.actuators) + r.unmapped_actuators)
        for a, i in zip(model.actuators, r.mapped_actuators):
            a.control = float(np.clip(ctrl[i], a.min_control, a.max_control))
    for attr in ("act", "mpos", "mquat"):
        if attr in node.attrib:
            r.note(node, f"{attr} is not used")


def _mj_qpos(j):
    q = j.q0.copy()
    if j.type in ("ball", "free"):
        q[-4:] = [q[-1], q[-4], q[-3], q[-2]]
    return q


# -- actuators --------------------------------------------------------------------------
_TRANSMISSIONS = ("joint", "jointinparent", "tendon", "site", "body", "cranksite")
_NOT_JOINT = frozenset(_TRANSMISSIONS[1:])
def _shortcut(p, tag, attrs):
    """MuJoCo's actuator shortcuts as general attributes, over `p` (the class's so far)."""
    p.update({k: v for k, v in attrs.items() if k not in ("kp", "kv", "dampratio", "timeconst")})
    if tag == "motor":
        p.update(gaintype="fixed", gainprm="1", biastype="none", biasprm="0")
    elif tag == "position":
        kp = attrs.get("kp", p.get("_kp", "1"))
        kv = attrs.get("kv", p.get("_kv", "0"))
        p.update(_kp=kp, _kv=kv, gaintype="fixed", gainprm=kp, biastype="affine", biasprm=f"0 -{kp} -{kv}")
        if "dampratio" in attrs:
            p["_dampratio"] = attrs["dampratio"]
        if "timeconst" in attrs:
            p["_timeconst"] = attrs["timeconst"]
    elif tag == "velocity":
        kv = attrs.get("kv", p.get("_kv", "1"))
        p.update(_kv=kv, gaintype="fixed", gainprm=kv, biastype="affine", biasprm=f"0 0 -{kv}")
    elif tag != "general":
        p["_unsupported"] = tag


def _actuators(r, root, model, joints):
    r.mapped_actuators, r.unmapped_actuators = [], 0
    r.clamped_joints = set()      # joints whose actuatorfrcrange an actuator's control clamp carries
    index = 0
    class_defaults = {}       # class -> its actuator defaults as general attributes (one class serves many)
    laws = {}                 # (class, tag, attributes but name and joint) -> _Law (robots repeat a few)
    for section in root.each("actuator"):
        for node in section.children:
            if node.tag not in ACTUATOR_TAGS:
                r.note(node, f"unknown actuator <{node.tag}>: ignored")
                continue
            attrib = node.attrib
            cls = attrib.get("class", "main")
            if cls not in class_defaults:
                if cls not in r.classes:
                    raise r.error(node, f"class=\"{cls}\" is not a <default> class")
                class_defaults[cls] = {}
                for tag, attrs, _ in r.classes[cls]["actuator"]:
                    _shortcut(class_defaults[cls], tag, attrs)
            key = (cls, node.tag, *(kv for kv in attrib.items() if kv[0] not in _OWN))
            law = laws.get(key)
            if law is None:
                p = dict(class_defaults[cls])
                _shortcut(p, node.tag, attrib)
                law = laws[key] = _Law(r, node, p)
            defaults = class_defaults[cls]
            name = attrib.get("name") or defaults.get("name") or f"actuator{index}"
            actuator = _actuator(r, node, law, attrib.get("joint", defaults.get("joint")), name, joints)
            if actuator is None:
                r.unmapped_actuators += 1
            else:
                model.actuators.append(actuator)
                r.mapped_actuators.append(index)
            index += 1


_OWN = ("name", "joint")       # an actuator's attributes that are its own, not its force law's


class _Law:
    """What an actuator's attributes (over its class's) say of its force, apart from its joint:
    gear, gain, bias (b0, b1, b2), control range, or why it is not simulated; the notes and the
    error of its element, given again for each element of the same attributes."""

    def __init__(self, r, node, p):
        self.skip = self.error = None        # (when, note): "transmission" or "gain"; an error's text
        self.notes = []
        if "_unsupported" in p:
            self.skip = ("transmission", f"<{p['_unsupported']}> actuators are not simulated")
            return
        if "joint" not in p or not _NOT_JOINT.isdisjoint(p):
            targets = [k for k in _TRANSMISSIONS if k in p]
            self.skip = ("transmission", f"actuator on a {targets[0] if targets else 'nothing'}: only joint "
                                         "transmissions are simulated")
            return
        if p.get("gaintype", "fixed") != "fixed" or p.get("biastype", "none") not in ("none", "affine"):
            self.skip = ("gain", f"gaintype {p.get('gaintype')} / biastype {p.get('biastype')}: not simulated")
            return
        if p.get("dyntype", "none") != "none" or p.get("_timeconst"):
            self.notes.append("activation dynamics (dyntype, timeconst) are not simulated: the control acts at once")
        self.gear = r.numbers(node, p, "gear", 6, (1.0,), nmin=1)[0]
        self.gain = gain = r.numbers(node, p, "gainprm", 10, (1.0,), nmin=1)[0]
        self.bias = bias = [0.0, 0.0, 0.0]
        if p.get("biastype", "none") == "affine":
            b = r.numbers(node, p, "biasprm", 10, (0.0,), nmin=1)[:3]
            bias[:len(b)] = b
        if p.get("_dampratio"):
            self.notes.append("dampratio is not used (kv 0)")
        lo, hi = -np.inf, np.inf
        limited = p.get("ctrllimited", "auto")
        if limited == "true" or (limited == "auto" and r.compiler.autolimits and "ctrlrange" in p):
            lo, hi = r.numbers(node, p, "ctrlrange", 2)
            if not lo < hi:
                self.error = f"ctrlrange=\"{p.get('ctrlrange')}\": expected lower < upper"
        flimited = p.get("forcelimited", "auto")
        if flimited == "true" or (flimited == "auto" and r.compiler.autolimits and "forcerange" in p):
            flo, fhi = r.numbers(node, p, "forcerange", 2)
            if any(bias):
                self.notes.append("forcerange on a servo is not applied")
            elif gain > 0:      # a motor's force clamp is a control clamp
                lo, hi = max(lo, flo / gain), min(hi, fhi / gain)
        self.lo, self.hi = lo, hi


def _actuator(r, node, law, joint_name, name, joints):
    if law.skip and law.skip[0] == "transmission":
        r.note(node, law.skip[1])
        return None
    joint = joints.get(joint_name)
    if joint is None:
        raise r.error(node, f"joint=\"{joint_name}\": no joint of that name")
    if joint.type not in ("revolute", "prismatic"):
        r.note(node, f"actuator on a {joint.params.get('mjcf_type')} joint: not simulated")
        return None
    if law.skip:
        r.note(node, law.skip[1])
        return None
    for message in law.notes:
        r.note(node, message)
    if law.error:
        raise r.error(node, law.error)
    gear, gain, bias, lo, hi = law.gear, law.gain, law.bias, law.lo, law.hi
    frc = joint.params.get("actuatorfrcrange")
    if frc is not None:     # MuJoCo clamps the joint's actuator force (gear * force): for a motor alone
        k = gear * gain     # on its joint, a control clamp
        if any(bias) or not k or joint.name in r.clamped_joints:
            r.note(node, f"the actuatorfrcrange of joint {joint.name!r} is not applied to this actuator "
                         "(a servo's bias or a second actuator on the joint)")
        else:
            flo, fhi = frc[0] / k, frc[1] / k
            lo, hi = max(lo, min(flo, fhi)), min(hi, max(flo, fhi))
            r.clamped_joints.add(joint.name)
    # the bias: -b1 gear^2 stiffness, -b2 gear^2 damping, b0 gear a constant force
    k_servo, d_servo = -bias[1] * gear * gear, -bias[2] * gear * gear
    if k_servo or bias[0]:
        k = joint.stiffness[0] + k_servo
        if k:
            joint.rest_position[0] = (joint.stiffness[0] * joint.rest_position[0] + gear * bias[0]) / k
        elif bias[0]:
            r.note(node, "a constant bias force (biasprm[0]) without a stiffness is not simulated")
        joint.stiffness[0] = k
    if d_servo:
        joint.damping[0] += d_servo
    return Actuator(name, "coordinate", gain=gear * gain, min_control=lo, max_control=hi, dof=joint.name)


# -- sensors and cameras ---------------------------------------------------------------------
def _sensors(r, root, model, tree):
    wrench = {}              # site -> Sensor (a force and a torque on one site are one wrench sensor)
    for section in root.each("sensor"):
        for i, node in enumerate(section.children):
            kind = _SITE_SENSORS.get(node.tag)
            if kind is None:
                r.note(node, f"<{node.tag}> sensor is not published")
                continue
            site = node.get("site")
            if site not in tree.sites:
                raise r.error(node, f"site=\"{site}\": expected the name of a <site>")
            link, pose = tree.sites[site]
            name = node.get("name") or f"{node.tag}_{site}"
            if kind == "force":
                if site in wrench:
                    wrench[site].params[node.tag] = name
                    continue
                sensor = Sensor(name, "force", link, pose, params={node.tag: name})
                wrench[site] = sensor
            elif kind == "range":
                cutoff = r.number(node, node.attrib, "cutoff", 0.0)
                sensor = Sensor(name, "range", link, pose @ _FLIP_Z,
                                params={"scanAngle": 0.0, "scanStep": 0.01,
                                        "maxDistance": cutoff if cutoff > 0 else 10.0})
            else:
                sensor = Sensor(name, kind, link, pose)
            model.sensors.append(sensor)


def _cameras(r, model, tree):
    for k, (node, a, link, pose) in enumerate(tree.cameras):
        name = a.get("name") or f"camera{k}"
        res = r.floats(node, a, "resolution", 2, [320, 240])
        fovy = r.number(node, a, "fovy", 45.0) * np.pi / 180      # always degrees in MuJoCo
        if a.get("mode", "fixed") != "fixed":
            r.note(node, f"camera mode {a['mode']!r}: the camera stays fixed to its body")
        # MuJoCo's camera looks along -z with y up, as an OpenHRP VisionSensor
        model.sensors.append(Sensor(name, "camera", link, pose,
                                    params={"width": int(res[0]), "height": int(res[1]), "fieldOfView": fovy}))


# -- equality constraints -------------------------------------------------------------------
def _equality(r, root, model, tree, joints, poses, tendons):
    for section in root.each("equality"):
        for node in section.children:
            a = r.attrs(node, "equality", node.get("class", "main"))
            if a.get("active", "true") == "false":
                r.note(node, "inactive (active=\"false\"): left out")
                continue
            name = a.get("name") or f"equality{len(model.constraints) + len(model.couplers)}"
            if node.tag in ("connect", "weld"):
                try:
                    _loop(r, node, a, name, model, tree, poses)
                except _MadeByLeftOut as e:
                    r.note(node, str(e))
            elif node.tag == "joint":
                _joint_coupler(r, node, a, name, model, joints)
            elif node.tag == "tendon":
                tendon_coupler(r, node, a, name, model, tendons)
            else:
                r.note(node, f"<equality><{node.tag}> is not simulated")


class _MadeByLeftOut(Exception):
    """A name no body has, in a model whose generators (<flexcomp>, <replicate>...) were left
    out: most likely one of theirs, so what names it is left out too, with a note."""


def _body_link(r, node, tree, name):
    if name is None or name == "world":
        return None
    if name not in tree.body_link:
        if r.left_out:
            raise _MadeByLeftOut(f"body \"{name}\" is not in the model (the <{'>, <'.join(sorted(r.left_out))}> "
                                 "left out would make it?): left out")
        raise r.error(node, f"\"{name}\": expected the name of a <body>")
    return tree.body_link[name]


def _loop(r, node, a, name, model, tree, poses):
    if "site1" in a:
        s1, s2 = a.get("site1"), a.get("site2")
        for s in (s1, s2):
            if s not in tree.sites:
                raise r.error(node, f"site \"{s}\": expected the name of a <site>")
        (l1, P1), (l2, P2) = tree.sites[s1], tree.sites[s2]
        p1, p2 = P1[:3, 3], P2[:3, 3]
    else:
        if "body1" not in a:
            raise r.error(node, "expected body1=\"...\" (or site1 and site2)")
        l1, l2 = _body_link(r, node, tree, a["body1"]), _body_link(r, node, tree, a.get("body2"))
        T1, T2 = poses.get(l1, np.eye(4)), poses.get(l2, np.eye(4))
        if node.tag == "connect":
            p1 = r.floats(node, a, "anchor", 3)
        else:
            p1 = r.floats(node, a, "anchor", 3, [0.0, 0.0, 0.0])
            rel = r.floats(node, a, "relpose", 7, [0, 1, 0, 0, 0, 0, 0])
            if np.any(rel[3:]):
                r.note(node, "relpose is not used: the weld holds the bodies' relative pose at qpos0")
        world = T1[:3, :3] @ p1 + T1[:3, 3]
        p2 = inverse_transform(T2)[:3, :3] @ world + inverse_transform(T2)[:3, 3]
    if l1 is None and l2 is None:
        raise r.error(node, "both sides are the world")
    if l1 is None:                  # the solver wants a link first
        l1, l2, p1, p2 = l2, l1, p2, p1
    model.constraints.append(LoopConstraint(name, "ball" if node.tag == "connect" else "weld", l1, l2,
                                            pos1=p1, pos2=p2))


def _joint_coupler(r, node, a, name, model, joints):
    j1 = joints.get(a.get("joint1"))
    if j1 is None:
        raise r.error(node, f"joint1=\"{a.get('joint1')}\": expected the name of a <joint>")
    c = r.floats(node, a, "polycoef", 5, [0, 1, 0, 0, 0], nmin=1)
    if "joint2" not in a:
        if c[0] != 0:
            r.note(node, "a joint held at an offset from its reference is held at its initial position")
        j1.locked = True
        return
    j2 = joints.get(a["joint2"])
    if j2 is None:
        raise r.error(node, f"joint2=\"{a['joint2']}\": expected the name of a <joint>")
    if j1.type not in ("revolute", "prismatic") or j2.type not in ("revolute", "prismatic"):
        r.note(node, "a joint equality between multi-DOF joints is not simulated")
        return
    # MuJoCo: q1 - ref1 = poly(q2 - ref2), the refs being qpos0
    ref1, ref2 = float(j1.q0[0]), float(j2.q0[0])
    coefs = c.copy()
    coefs[0] += ref1
    model.couplers.append(CoordinateCoupler(name, j1.name, j2.name,
                                            Function(breaks=[ref2, np.inf], coefs=[coefs], extrapolate="extend")))


def _poses_at_qpos0(model):
    """{link: world pose} at the joints' q0 (MuJoCo's qpos0), from the joints' definitions."""
    children = {}
    for j in model.joints:
        children.setdefault(j.parent, []).append(j)
    out, stack = {}, [(None, np.eye(4))]
    while stack:
        parent, T = stack.pop()
        for j in children.get(parent, []):
            J = np.eye(4)
            q = j.q0
            if j.type == "revolute":
                J[:3, :3] = axis_angle_to_matrix(j.axis, q[0])
            elif j.type == "prismatic":
                J[:3, 3] = j.axis * q[0]
            elif j.type == "ball":
                J[:3, :3] = quat_to_matrix(q)
            elif j.type == "free":
                J[:3, :3], J[:3, 3] = quat_to_matrix(q[3:]), q[:3]
            X = T @ j.origin @ J @ inverse_transform(j.child_pose)
            out[j.child] = X
            stack.append((j.child, X))
    return out

