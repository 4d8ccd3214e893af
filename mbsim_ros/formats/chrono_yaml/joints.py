"""Joints and motors as the edges of a graph over the bodies, the spanning tree that makes them
Model joints, and the loop constraints of the other edges."""
from __future__ import annotations

from collections import deque

import numpy as np

from ...model import Bushing, Joint, LoopConstraint, Motor
from ...model.transforms import inverse_transform, matrix_to_quat
from .parts import BUSHING_FREE, Edge, JOINT_KINDS, LOOP_ARM, frame, frame_z, local_point


class JointReading:
    """Builder's part that reads joints and motors and builds the tree and the loops."""

    # -- joints and motors: the graph's edges -------------------------------------------------
    def _read_joint(self, j, w):
        r = self.r
        j = r.mapping(j, w)
        name = r.text(j, "name", w)
        ctype = r.enum(j, "type", w, ("LOCK", "REVOLUTE", "SPHERICAL", "PRISMATIC", "UNIVERSAL",
                                      "POINT_LINE", "POINT_PLANE"))
        b1, b2 = self._named(j, "body1", w), self._named(j, "body2", w)
        if b1 == b2:
            raise r.error(f"{w}.body2", f"joint {name!r} connects body {b1!r} to itself")
        p = r.vector(j, "location", w)
        axis_given = False
        if ctype in ("REVOLUTE", "PRISMATIC"):
            R = frame_z(r.unit(j, "axis", w))
        elif ctype == "UNIVERSAL":
            x = r.unit(j, "axis1", w)
            y = r.unit(j, "axis2", w)
            z = np.cross(x, y)
            if np.linalg.norm(z) < 1e-9:
                raise r.error(f"{w}.axis2", f"universal joint {name!r}: axis2 {y.tolist()} is parallel to axis1")
            z /= np.linalg.norm(z)
            R = np.column_stack([x, np.cross(z, x), z])
        elif ctype in ("POINT_LINE", "POINT_PLANE") and j.get("axis") is not None:
            # the line's direction (Chrono's x) or the plane's normal (Chrono's z)
            a = r.unit(j, "axis", w)
            Rz = frame_z(a)
            R = np.column_stack([a, Rz[:, 0], np.cross(a, Rz[:, 0])]) if ctype == "POINT_LINE" else Rz
            axis_given = True
        else:
            R = np.eye(3)
        F = frame(R, p)
        if j.get("bushing_data") is not None:
            self._bushing(j, w, name, ctype, b1, b2, F)
            return
        self.edges.append(Edge(name, w, ctype, b1, b2, F, "joint", axis_given, len(self.edges)))

    def _bushing(self, j, w, name, ctype, b1, b2, F):
        r = self.r
        if ctype not in BUSHING_FREE:
            raise r.error(f"{w}.bushing_data", f"a bushing of type {ctype} is not supported "
                                               f"(Chrono refuses it too; use {', '.join(BUSHING_FREE)})")
        bd = r.mapping(j["bushing_data"], f"{w}.bushing_data")
        bw = f"{w}.bushing_data"
        kl, dl = r.number(bd, "stiffness_linear", bw), r.number(bd, "damping_linear", bw)
        kr, dr = r.number(bd, "stiffness_rotational", bw), r.number(bd, "damping_rotational", bw)
        dof = r.mapping(bd.get("DOF") or {}, f"{bw}.DOF")
        kr_dof, dr_dof = r.number(dof, "stiffness_rotational", f"{bw}.DOF", 0.0), r.number(dof, "damping_rotational", f"{bw}.DOF", 0.0)
        K = np.array([kr, kr, kr, kl, kl, kl])
        D = np.array([dr, dr, dr, dl, dl, dl])
        for i in BUSHING_FREE[ctype]:
            K[i], D[i] = kr_dof, dr_dof
        T1, T2 = self.bodies[b1].T, self.bodies[b2].T
        self.model.forces.append(Bushing(name, b1, inverse_transform(T1) @ F, b2, inverse_transform(T2) @ F,
                                         stiffness=K, damping=D))
        self.model.report.append(("joint", name, f"{ctype} with bushing_data -> Bushing element "
                                                 f"(K rot/lin {K[:3].tolist()}/{K[3:].tolist()}); no kinematic joint"))

    def _read_motor(self, mo, w):
        r = self.r
        mo = r.mapping(mo, w)
        name = r.text(mo, "name", w)
        kind = r.enum(mo, "type", w, ("LINEAR", "ROTATION"))
        b1, b2 = self._named(mo, "body1", w), self._named(mo, "body2", w)
        if b1 == b2:
            raise r.error(f"{w}.body2", f"motor {name!r} connects body {b1!r} to itself")
        actuation = r.enum(mo, "actuation_type", w, ("POSITION", "SPEED", "FORCE"))
        if mo.get("actuation_function") is None:
            raise r.error(f"{w}.actuation_function", "missing (expected a function of time)")
        function = self._function(mo["actuation_function"], f"{w}.actuation_function", name)
        F = frame(frame_z(r.unit(mo, "axis", w)), r.vector(mo, "location", w))
        if kind == "LINEAR":
            guide = r.enum(mo, "guide", w, ("FREE", "PRISMATIC", "SPHERICAL"), "PRISMATIC")
            ctype = {"FREE": None, "PRISMATIC": "PRISMATIC", "SPHERICAL": "GUIDE_SPHERICAL"}[guide]
        else:
            guide = r.enum(mo, "spindle", w, ("FREE", "REVOLUTE", "CYLINDRICAL"), "REVOLUTE")
            ctype = {"FREE": None, "REVOLUTE": "REVOLUTE", "CYLINDRICAL": "CYLINDRICAL"}[guide]
        if ctype is not None:
            self.edges.append(Edge(name, w, ctype, b1, b2, F, "motor", order=len(self.edges)))
        T1, T2 = self.bodies[b1].T, self.bodies[b2].T
        if actuation == "POSITION" and function.kind != "input" and abs(function(0.0)) > 1e-12:
            r.warn(f"{w}.actuation_function", f"position motor {name!r} starts at f(0) = {function(0.0):.6g}, not 0: "
                                              "the bodies start away from its target and are pulled onto it")
        self.model.report.append(("motor", name, f"{kind} {actuation} {guide} between {b1!r} (driven) and {b2!r}"))
        # Chrono drives body1 relative to body2; the Model drives link2 relative to link1
        return Motor(name, kind.lower(), b2, inverse_transform(T2) @ F, b1, inverse_transform(T1) @ F,
                     actuation.lower(), function, guide="free")

    # -- the spanning tree ---------------------------------------------------------------
    def _build_tree(self):
        model, bodies = self.model, self.bodies
        names = list(bodies)
        uf = {n: n for n in names + [None]}     # None: the world

        def find(x):
            while uf[x] != x:
                uf[x] = uf[uf[x]]
                x = uf[x]
            return x

        for n in names:
            if bodies[n].fixed:
                uf[find(n)] = find(None)
        tree, loops = [], []
        for e in sorted(self.edges, key=lambda e: (-JOINT_KINDS[e.ctype][1], e.order)):
            if bodies[e.body1].fixed and bodies[e.body2].fixed:
                self.r.warn(e.where, f"{e.source} {e.name!r} joins two fixed bodies ({e.body1!r}, "
                                     f"{e.body2!r}): it constrains nothing; dropped")
                continue
            a, b = find(e.body1), find(e.body2)
            if JOINT_KINDS[e.ctype][0] is not None and a != b:
                uf[a] = b
                tree.append(e)
            else:
                loops.append(e)
        adjacency = {n: [] for n in names}
        for e in tree:
            adjacency[e.body1].append(e)
            adjacency[e.body2].append(e)
        used_names = set()
        seen = set()

        def unique(name):
            out, k = name, 2
            while out in used_names:
                out, k = f"{name}_{k}", k + 1
            used_names.add(out)
            return out

        def grow(root):
            queue = deque([root])
            seen.add(root)
            while queue:
                parent = queue.popleft()
                for e in adjacency[parent]:
                    child = e.body2 if e.body1 == parent else e.body1
                    if child in seen:
                        continue
                    seen.add(child)
                    self._tree_joint(e, parent, child, unique)
                    queue.append(child)

        for n in names:
            if bodies[n].fixed:
                body = bodies[n]
                model.add_joint(Joint(unique(f"{n}_fixed"), "fixed", None, n, origin=body.T,
                                      params={"chrono": "fixed body"}))
                model.report.append(("body", n, "fixed: welded to the world"))
        for n in names:
            if bodies[n].fixed:
                grow(n)
        for n in names:
            if n not in seen:
                body = bodies[n]
                R = body.T[:3, :3]
                q0 = np.concatenate([body.T[:3, 3], matrix_to_quat(R)])
                v0 = np.concatenate([R.T @ body.v_ref, R.T @ body.w])
                model.add_joint(Joint(unique(f"{n}_free"), "free", None, n, q0=q0, v0=v0,
                                      params={"chrono": "free body"}))
                model.report.append(("body", n, "free joint to the world (no joint path to a fixed body)"))
                grow(n)
        for e in sorted(loops, key=lambda e: e.order):     # in the file's order
            self._loop(e)

    def _tree_joint(self, e, parent, child, unique):
        """Model joint for tree edge e with the given orientation; q = 0 at the file's pose."""
        bodies = self.bodies
        jtype = JOINT_KINDS[e.ctype][0]
        TP, TC = bodies[parent].T, bodies[child].T
        F = e.frame.copy()
        axis, axis2 = np.array([0.0, 0.0, 1.0]), np.array([0.0, 1.0, 0.0])
        if jtype in ("ball", "fixed"):
            F[:3, :3] = TC[:3, :3]          # any frame serves; the child's keeps v in its frame
        elif jtype == "universal":
            axis, axis2 = (np.array([1.0, 0, 0]), np.array([0, 1.0, 0])) if parent == e.body1 else \
                (np.array([0, 1.0, 0]), np.array([1.0, 0, 0]))
        name = unique(e.name)
        if name != e.name:
            self.r.warn(e.where, f"name {e.name!r} is taken by another joint; this one is {name!r}")
        joint = Joint(name, jtype, parent, child, origin=inverse_transform(TP) @ F, axis=axis, axis2=axis2,
                      child_pose=inverse_transform(TC) @ F,
                      params={"chrono": e.ctype, "body1": e.body1, "body2": e.body2, "source": e.source})
        joint.v0 = self._joint_velocity(joint, e, bodies[parent], bodies[child], F)
        self.model.add_joint(joint)
        self.model.report.append((e.source, e.name, f"{e.ctype} -> {jtype} joint {name!r} "
                                                    f"(parent {parent!r}, child {child!r})"))

    def _joint_velocity(self, joint, e, P, C, F):
        """The joint rates closest to the file's initial velocities of the two bodies."""
        if not (np.any(P.v_ref) or np.any(P.w) or np.any(C.v_ref) or np.any(C.w)) or joint.nv == 0:
            return np.zeros(joint.nv)
        o = F[:3, 3]
        w_rel = C.w - P.w
        v_rel = (C.v_ref + np.cross(C.w, o - C.T[:3, 3])) - (P.v_ref + np.cross(P.w, o - P.T[:3, 3]))
        RF = F[:3, :3]
        if joint.type == "ball":
            S = np.vstack([np.zeros((3, 3)), C.T[:3, :3]])
        elif joint.type == "revolute":
            S = np.concatenate([np.zeros(3), RF @ joint.axis])[:, None]
        elif joint.type == "prismatic":
            S = np.concatenate([RF @ joint.axis, np.zeros(3)])[:, None]
        else:   # universal at q = 0
            S = np.vstack([np.zeros((3, 2)), np.column_stack([RF @ joint.axis, RF @ joint.axis2])])
        target = np.concatenate([v_rel, w_rel])
        qd = np.linalg.lstsq(S, target, rcond=None)[0]
        residual = np.linalg.norm(S @ qd - target)
        if residual > 1e-9 * max(1.0, np.linalg.norm(target)):
            self.r.warn(e.where, f"the initial velocities of {P.name!r} and {C.name!r} do not fit joint "
                                 f"{joint.name!r} (off by {residual:.3g}); its rate is the nearest fit")
        return qd

    def _loop(self, e):
        """LoopConstraints for a non-tree edge (module docstring)."""
        model, bodies = self.model, self.bodies
        T1, T2 = bodies[e.body1].T, bodies[e.body2].T
        p, R = e.frame[:3, 3], e.frame[:3, :3]
        x, y, z = R[:, 0], R[:, 1], R[:, 2]
        info = {"chrono": e.ctype, "source": e.source}

        def on(T, point):
            return local_point(T, point)

        def direction(T, d):
            return T[:3, :3].T @ d

        def loop(kind, l1, T_1, a1, l2, T_2, a2, axis=z, **params):
            k = sum(1 for c in model.constraints if c.params.get("joint") == e.name)
            name = e.name if k == 0 else f"{e.name}_{k + 1}"
            model.constraints.append(LoopConstraint(name, kind, l1, l2, pos1=on(T_1, a1), pos2=on(T_2, a2),
                                                    axis=direction(T_1, axis),
                                                    params={**info, "joint": e.name, **params}))
            return kind

        b1, b2 = e.body1, e.body2
        L = LOOP_ARM
        if e.ctype == "LOCK":
            kinds = [loop("weld", b1, T1, p, b2, T2, p)]
        elif e.ctype == "SPHERICAL":
            kinds = [loop("ball", b1, T1, p, b2, T2, p)]
        elif e.ctype == "REVOLUTE":
            kinds = [loop("hinge", b1, T1, p, b2, T2, p)]
        elif e.ctype == "UNIVERSAL":
            kinds = [loop("ball", b1, T1, p, b2, T2, p),
                     loop("point_plane", b1, T1, p, b2, T2, p + L * y, axis=x)]
        elif e.ctype == "PRISMATIC":
            kinds = [loop("point_line", b1, T1, p, b2, T2, p), loop("orientation", b1, T1, p, b2, T2, p)]
        elif e.ctype == "CYLINDRICAL":
            kinds = [loop("point_line", b1, T1, p, b2, T2, p), loop("parallel", b1, T1, p, b2, T2, p)]
        elif e.ctype == "GUIDE_SPHERICAL":
            kinds = [loop("point_line", b1, T1, p, b2, T2, p)]
        elif e.ctype == "POINT_LINE":     # body1's point on body2's line (Chrono's x axis)
            kinds = [loop("point_line", b2, T2, p, b1, T1, p, axis=x)]
        else:                             # POINT_PLANE: body1's point in body2's plane (normal z)
            kinds = [loop("point_plane", b2, T2, p, b1, T1, p, axis=z)]
        how = " (axis from the file)" if e.axis_given else (
            " (Chrono's identity frame: line along global x)" if e.ctype == "POINT_LINE" else
            " (Chrono's identity frame: plane normal global z)" if e.ctype == "POINT_PLANE" else "")
        model.report.append((e.source, e.name, f"{e.ctype} -> loop constraint {' + '.join(kinds)}{how}"))
