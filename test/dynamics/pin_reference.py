"""Ground truth: the same multibody system built directly in Pinocchio, and random test trees.

Pinocchio's own joint models are used wherever they have our joint's coordinates (revolute,
prismatic, helical, universal, spherical, translation, free flyer). Euler and planar joints
(DART's v = dq/dt) have no Pinocchio counterpart with the same coordinates, so they become
chains of Pinocchio's one-DOF joints through massless bodies: the same motion, same q and v.
"""
import numpy as np
import pinocchio as pin

from mbsim_ros.model import Joint, Link, Model
from mbsim_ros.model.transforms import axis_angle_to_matrix

EYE = np.eye(3)


def _pin_joints(joint):
    """[(pinocchio joint model, placement-from-previous)] for one of our joints."""
    t, ax = joint.type, joint.axis
    if t == "revolute":
        return [pin.JointModelRevoluteUnaligned(ax)]
    if t == "prismatic":
        return [pin.JointModelPrismaticUnaligned(ax)]
    if t == "screw":
        return [pin.JointModelHelicalUnaligned(ax, joint.pitch / (2 * np.pi))]
    if t == "universal":
        return [pin.JointModelUniversal(ax, joint.axis2)]
    if t == "ball":
        return [pin.JointModelSpherical()]
    if t == "translational":
        return [pin.JointModelTranslation()]
    if t == "free":
        return [pin.JointModelFreeFlyer()]
    if t == "euler":
        return [pin.JointModelRevoluteUnaligned(EYE["xyz".index(c)]) for c in joint.euler_order]
    if t == "planar":
        x_p, y_p = joint.plane_axes()
        return [pin.JointModelPrismaticUnaligned(x_p), pin.JointModelPrismaticUnaligned(y_p),
                pin.JointModelRevoluteUnaligned(ax)]
    raise ValueError(t)


def to_pinocchio(model: Model) -> pin.Model:
    """A Pinocchio model of the same system, with an OP_FRAME named after each of our links."""
    model.finalize()
    pm = pin.Model()
    pm.gravity = pin.Motion(np.asarray(model.gravity, float), np.zeros(3))
    slot = {}   # link -> (pinocchio joint id, placement of the link in that joint's frame)
    for j in model.joints:
        parent_id, parent_M = (0, pin.SE3.Identity()) if j.parent is None else slot[j.parent]
        origin = parent_M * pin.SE3(j.origin[:3, :3].copy(), j.origin[:3, 3].copy())
        # the link frame in the joint's child-side frame: inv(child_pose)
        child = pin.SE3(j.child_pose[:3, :3].copy(), j.child_pose[:3, 3].copy()).inverse()
        if j.type == "fixed":
            slot[j.child] = (parent_id, origin * child)
        else:
            jid = parent_id
            for k, jm in enumerate(_pin_joints(j)):
                jid = pm.addJoint(jid, jm, origin if k == 0 else pin.SE3.Identity(), f"{j.name}_{k}")
            slot[j.child] = (jid, child)
            pm.armature[j.v_index:j.v_index + j.nv] = j.armature
        link = model.link(j.child)
        jid, M = slot[j.child]
        if jid > 0 and link.mass > 0:
            pm.appendBodyToJoint(jid, pin.Inertia(link.mass, link.com, link.inertia), M)
        pm.addFrame(pin.Frame(link.name, jid, M, pin.FrameType.OP_FRAME))
    return pm


def random_inertia(rng):
    """A physically valid inertia (principal moments obeying the triangle inequality), rotated."""
    a = rng.uniform(0.2, 1.0, 3)
    moments = np.array([a[1] + a[2], a[0] + a[2], a[0] + a[1]]) * rng.uniform(0.01, 0.1)
    R = random_rotation(rng)
    return R @ np.diag(moments) @ R.T


def random_rotation(rng):
    axis = rng.normal(size=3)
    return axis_angle_to_matrix(axis / np.linalg.norm(axis), rng.uniform(-np.pi, np.pi))


def random_transform(rng, scale=0.3):
    T = np.eye(4)
    T[:3, :3] = random_rotation(rng)
    T[:3, 3] = rng.uniform(-scale, scale, 3)
    return T


def random_unit(rng):
    a = rng.normal(size=3)
    return a / np.linalg.norm(a)


SHARED_TYPES = ("revolute", "prismatic", "screw", "universal", "ball", "euler", "planar",
                "translational", "free", "fixed")


def random_tree(rng, n_links=12, types=SHARED_TYPES, floating=True, armature=True):
    """A random tree: every joint type in `types` appears, parents chosen at random."""
    m = Model("random", gravity=rng.normal(size=3) * 5)
    kinds = list(types) + list(rng.choice(types, size=max(0, n_links - len(types))))
    rng.shuffle(kinds)
    names = []
    for k, kind in enumerate(kinds):
        name = f"l{k}"
        m.add_link(Link(name, rng.uniform(0.5, 3.0), rng.uniform(-0.2, 0.2, 3), random_inertia(rng)))
        if k == 0:
            parent, kind = None, ("free" if floating else kind)
        else:
            parent = names[rng.integers(len(names))]
        kw = dict(axis=random_unit(rng), origin=random_transform(rng))
        if kind == "universal":
            a2 = random_unit(rng)
            kw["axis2"] = a2 - a2.dot(kw["axis"]) * kw["axis"]
        if kind == "screw":
            kw["pitch"] = rng.uniform(-0.5, 0.5)
        if kind == "euler":
            first, second = rng.choice(list("xyz"), 2, replace=False)
            kw["euler_order"] = first + second + rng.choice([c for c in "xyz" if c != second])
        if armature and kind in ("revolute", "prismatic", "screw"):
            kw["rotor_inertia"] = [rng.uniform(0, 0.01)]
            kw["gear_ratio"] = [rng.uniform(1, 50)]
        m.add_joint(Joint(f"j{k}", kind, parent, name, **kw))
        names.append(name)
    return m.finalize()


def random_state(rng, model):
    q = []
    for j in model.joints:
        if j.type in ("ball", "free"):
            quat = rng.normal(size=4)
            qj = np.concatenate([rng.uniform(-1, 1, j.nq - 4), quat / np.linalg.norm(quat)])
        else:
            qj = rng.uniform(-np.pi, np.pi, j.nq)
            if j.type == "euler":
                # keep clear of gimbal lock, where M is singular and any two correct
                # implementations differ by rounding times cond(M) (1e8 and more)
                proper = j.euler_order[0] == j.euler_order[2]
                qj[1] = rng.uniform(0.4, 2.7) if proper else rng.uniform(-1.2, 1.2)
        q.append(qj)
    q = np.concatenate(q) if q else np.zeros(0)
    return q, rng.normal(size=model.nv), rng.normal(size=model.nv)
