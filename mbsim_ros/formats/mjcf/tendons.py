"""MJCF fixed tendons and the equality constraints on them, as coordinate couplers.

A fixed tendon's length is L = sum(coef_i q_i) over one-coordinate joints. MuJoCo's tendon
equality holds L1 - L1_0 = poly(L2 - L2_0) (L_0: the length at qpos0; without tendon2 the right
side is polycoef[0]). Where that solves for one joint as a function of one other, it is a
CoordinateCoupler: tendon1 of two joints alone (a linear coupling, as grippers couple their
fingers), or tendon1 and tendon2 of one joint each (MuJoCo's polynomial); tendon1 of one joint
alone locks it. Other cases, spatial tendons and a tendon's own stiffness, damping, friction and
range are notes.
"""
from __future__ import annotations

import numpy as np

from ...model import CoordinateCoupler, Function

_TENDON_OWN = ("stiffness", "damping", "frictionloss", "range", "limited", "springlength", "armature")
_ONE_COORDINATE = ("revolute", "prismatic")


def read_fixed_tendons(r, root, joints):
    """{tendon name: [(Joint, coef)]} of every <fixed> tendon; notes for what is not simulated."""
    tendons = {}
    for section in root.each("tendon"):
        for node in section.children:
            if node.tag != "fixed":
                r.note(node, f"<tendon><{node.tag}> is not simulated")
                continue
            a = r.attrs(node, "tendon", node.get("class", "main"))
            name = a.get("name") or f"tendon{len(tendons)}"
            terms = []
            for c in node.children:
                if c.tag != "joint":
                    raise r.error(c, "expected <joint joint=\"...\" coef=\"...\"> in a fixed tendon")
                joint = joints.get(c.get("joint"))
                if joint is None:
                    raise r.error(c, f"joint=\"{c.get('joint')}\": expected the name of a <joint>")
                if joint.type not in _ONE_COORDINATE:
                    raise r.error(c, f"joint \"{joint.name}\" is a {joint.type} joint: a fixed tendon takes "
                                     "hinge and slide joints")
                if "coef" not in c.attrib:
                    raise r.error(c, "expected coef=\"...\" (the joint's coefficient in the tendon's length)")
                terms.append((joint, r.number(c, c.attrib, "coef")))
            if not terms:
                raise r.error(node, "a fixed tendon needs at least one <joint>")
            own = [k for k in _TENDON_OWN if k in a]
            if own:
                r.note(node, f"the tendon's {', '.join(own)} not simulated (only equalities on it are)")
            tendons[name] = terms
    return tendons


def tendon_coupler(r, node, a, name, model, tendons):
    """<equality><tendon>: a CoordinateCoupler (or a locked joint) where it is one; else a note."""
    t1, t2 = a.get("tendon1"), a.get("tendon2")
    for key, t in (("tendon1", t1), ("tendon2", t2)):
        if (t is not None or key == "tendon1") and t not in tendons:
            raise r.error(node, f"{key}=\"{t}\": expected the name of a fixed <tendon>")
    poly = r.floats(node, a, "polycoef", 5, [0, 1, 0, 0, 0], nmin=1)
    first = tendons[t1]
    if t2 is None and len(first) == 1:
        (joint, coef), = first
        if poly[0] != 0:
            r.note(node, "a joint held at an offset from its reference is held at its initial position")
        joint.locked = True
        return
    if t2 is None and len(first) == 2 and (first[0][1] != 0 or first[1][1] != 0):
        # solved for a joint whose coefficient is not 0 (the first one, where it can be)
        (dep, c_dep), (ind, c_ind) = first if first[0][1] != 0 else first[::-1]
        # c_dep (q_dep - q_dep0) + c_ind (q_ind - q_ind0) = polycoef[0]
        coefs = np.array([float(dep.q0[0]) + poly[0] / c_dep, -c_ind / c_dep])
    elif t2 is not None and len(first) == 1 and len(tendons[t2]) == 1 and first[0][1] != 0:
        (dep, c_dep), = first
        (ind, c_ind), = tendons[t2]
        # c_dep (q_dep - q_dep0) = poly(c_ind (q_ind - q_ind0))
        coefs = poly * c_ind ** np.arange(5) / c_dep
        coefs[0] += float(dep.q0[0])
    else:
        r.note(node, "a tendon equality that does not tie one joint to one other is not simulated")
        return
    model.couplers.append(CoordinateCoupler(name, dep.name, ind.name, Function(
        breaks=[float(ind.q0[0]), np.inf], coefs=[coefs], extrapolate="extend")))
