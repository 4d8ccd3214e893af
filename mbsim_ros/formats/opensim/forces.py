"""Constraints (couplers, point, weld, distance and point-on-line loops) and forces (limit
forces, springs, bushings, actuators, contact forces) of the file, as Model elements (a mixin
of the Builder)."""
from __future__ import annotations

import math

import numpy as np

from ...model import Actuator, Bushing, CoordinateCoupler, CoordinateLimitForce, LoopConstraint, SpringDamper
from .functions import UNIT_AXES, scaled, xyz_pose
from .reader import as_converted, first_child, subelements

DEG = math.pi / 180.0
_MUSCLE_WORDS = ("Muscle", "Ligament", "PathSpring", "PathActuator")


class ForceReading:
    """Builder's part that reads the ConstraintSet and the ForceSet."""

    # -- constraints ---------------------------------------------------------------------------
    def read_constraints(self):
        r, model = self.r, self.r.model
        for el in self.set_objects("ConstraintSet"):
            tag, name = el.tag, el.get("name") or el.tag
            if not r.enabled(el):
                r.report("constraint", name, f"{tag}: disabled in the file")
                continue
            if tag == "CoordinateCouplerConstraint":
                self.coupler(el, name)
            elif tag == "PointOnLineConstraint":
                line, X1 = self.socket_frame(el, "line_body")
                follower, X2 = self.socket_frame(el, "follower_body")
                direction = r.numbers(el, "line_direction_vec", 3, [1, 0, 0])
                if np.linalg.norm(direction) < 1e-12:
                    raise r.error(el, "a zero <line_direction_vec>")
                model.constraints.append(LoopConstraint(
                    name, "point_line", self.link_name(line), self.link_name(follower),
                    pos1=X1[:3, :3] @ r.numbers(el, "point_on_line", 3, [0, 0, 0]) + X1[:3, 3],
                    pos2=X2[:3, :3] @ r.numbers(el, "point_on_follower", 3, [0, 0, 0]) + X2[:3, 3],
                    axis=X1[:3, :3] @ (direction / np.linalg.norm(direction))))
                r.report("constraint", name, "PointOnLineConstraint -> loop constraint point_line")
            elif tag in ("PointConstraint", "ConstantDistanceConstraint"):
                b1, X1 = self.socket_frame(el, "body_1")
                b2, X2 = self.socket_frame(el, "body_2")
                p1 = X1[:3, :3] @ r.numbers(el, "location_body_1", 3, [0, 0, 0]) + X1[:3, 3]
                p2 = X2[:3, :3] @ r.numbers(el, "location_body_2", 3, [0, 0, 0]) + X2[:3, 3]
                if tag == "PointConstraint":
                    model.constraints.append(LoopConstraint(name, "ball", self.link_name(b1), self.link_name(b2), p1, p2))
                    r.report("constraint", name, "PointConstraint -> loop constraint ball")
                else:
                    distance = r.number(el, "constant_distance", 0.0)
                    model.constraints.append(LoopConstraint(name, "distance", self.link_name(b1), self.link_name(b2),
                                                            p1, p2, params={"distance": distance}))
                    r.report("constraint", name, f"ConstantDistanceConstraint -> loop constraint distance {distance:g} m")
            elif tag == "WeldConstraint":
                b1, X1 = self.socket_frame(el, "frame1") if r.prop(el, "body_1") is None else self.weld_3x(el, 1)
                b2, X2 = self.socket_frame(el, "frame2") if r.prop(el, "body_2") is None else self.weld_3x(el, 2)
                model.constraints.append(LoopConstraint(name, "weld", self.link_name(b1), self.link_name(b2),
                                                        X1[:3, 3], X2[:3, 3], params={"frame1": X1, "frame2": X2}))
                r.report("constraint", name, "WeldConstraint -> loop constraint weld (holds the frames' initial "
                                             "relative orientation)")
            else:
                r.report("constraint", name, f"{tag}: not simulated")

    def weld_3x(self, el, k):
        r = self.r
        body, X = r.frame(self.body_element(el, r.text(el, f"body_{k}")))
        return body, X @ xyz_pose(as_converted(r.numbers(el, f"location_body_{k}", 3, [0, 0, 0])),
                                  as_converted(r.numbers(el, f"orientation_body_{k}", 3, [0, 0, 0])))

    def coupler(self, el, name):
        r, model = self.r, self.r.model
        independent = (r.text(el, "independent_coordinate_names") or "").split()
        dependent = r.text(el, "dependent_coordinate_name")
        fel = first_child(el, "coupled_coordinates_function")
        if len(independent) != 1 or dependent is None or fel is None or not subelements(fel):
            r.report("constraint", name, f"CoordinateCouplerConstraint with {len(independent)} independent "
                                         "coordinates: not simulated (one is supported)")
            return
        f = scaled(self.function(subelements(fel)[0]), r.number(el, "scale_factor", 1.0))
        ci, cd = self.coordinate(el, independent[0]), self.coordinate(el, dependent)
        model.couplers.append(CoordinateCoupler(name, cd.dof, ci.dof, f))
        # start on the constraint: the dependent coordinate's initial value from the independent one
        ji, jd = self.joint_of_coordinate(ci), self.joint_of_coordinate(cd)
        kd = jd.dof_names.index(cd.dof)
        value = float(f(ji.q0[ji.dof_names.index(ci.dof)]))
        if abs(jd.q0[kd] - value) > 1e-12:
            r.report("coordinate", cd.dof, f"initial value {value:g} from coupler {name} (default {jd.q0[kd]:g})")
            jd.q0[kd] = value
        r.report("constraint", name, f"CoordinateCouplerConstraint -> coupler {cd.dof} = f({ci.dof})")

    # -- forces --------------------------------------------------------------------------------
    def read_forces(self):
        r = self.r
        self.contact_forces = []
        for el in self.set_objects("ForceSet"):
            tag, name = el.tag, el.get("name") or el.tag
            if not r.enabled(el):
                r.report("force", name, f"{tag}: disabled in the file")
                continue
            reader = {"CoordinateLimitForce": self.limit_force, "SpringGeneralizedForce": self.generalized_spring,
                      "BushingForce": self.bushing, "PointToPointSpring": self.point_spring,
                      "CoordinateActuator": self.actuator, "PointActuator": self.actuator,
                      "TorqueActuator": self.actuator, "HuntCrossleyForce": self.contact_force,
                      "SmoothSphereHalfSpaceForce": self.contact_force}.get(tag)
            if reader is None:
                kind = "muscle" if any(w in tag for w in _MUSCLE_WORDS) else "force"
                r.report("force", name, f"{tag}: not simulated ({kind})")
            else:
                reader(el, name)
        for el in self.set_objects("ControllerSet"):
            r.report("controller", el.get("name") or el.tag, f"{el.tag}: not simulated (actuator controls are "
                                                             f"{'1' if r.activate else '0'} unless set)")

    def rotational_unit(self, c):
        """OpenSim's CoordinateLimitForce unit: degrees for a rotational coordinate, else SI."""
        return DEG if c.motion == "rotational" else 1.0

    def euler_speed_note(self, c, what):
        if c.joint.type in ("BallJoint", "FreeJoint", "EllipsoidJoint") and c.motion == "rotational":
            self.r.report("force", what, f"acts on the Euler-angle rate of {c.dof}, OpenSim's on the angular "
                                         "velocity component: equal only near the zero rotation")

    def limit_force(self, el, name):
        r = self.r
        c = self.coordinate(el, r.text(el, "coordinate"))
        w = self.rotational_unit(c)
        r.model.forces.append(CoordinateLimitForce(
            name, c.dof, upper_stiffness=r.number(el, "upper_stiffness", 1.0) / w,
            upper_limit=r.number(el, "upper_limit", 0.0) * w, lower_stiffness=r.number(el, "lower_stiffness", 1.0) / w,
            lower_limit=r.number(el, "lower_limit", 0.0) * w, damping=r.number(el, "damping", 0.001) / w,
            transition=r.number(el, "transition", 0.1) * w))
        r.report("force", name, f"CoordinateLimitForce -> CoordinateLimitForce on {c.dof}"
                                + (" (degrees converted to radians)" if w != 1.0 else ""))
        self.euler_speed_note(c, name)

    def generalized_spring(self, el, name):
        r = self.r
        c = self.coordinate(el, r.text(el, "coordinate"))
        joint = self.joint_of_coordinate(c)
        k = joint.dof_names.index(c.dof)
        K, rest, D = r.number(el, "stiffness", 0.0), r.number(el, "rest_length", 0.0), r.number(el, "viscosity", 0.0)
        K0 = joint.stiffness[k]
        if K0 == 0.0:
            joint.rest_position[k] = rest
        elif K0 + K != 0.0:    # two springs on one DOF: one spring at the stiffness-weighted rest position
            joint.rest_position[k] = (K0 * joint.rest_position[k] + K * rest) / (K0 + K)
        joint.stiffness[k] += K
        joint.damping[k] += D
        r.report("force", name, f"SpringGeneralizedForce -> stiffness {K:g}, rest position {rest:g} and damping "
                                f"{D:g} of joint {joint.name} DOF {c.dof}")
        self.euler_speed_note(c, name)

    def bushing(self, el, name):
        r = self.r
        if r.prop(el, "body_1") is not None:        # 3.x
            b1, X1 = self.weld_3x(el, 1)
            b2, X2 = self.weld_3x(el, 2)
        else:
            b1, X1 = self.socket_frame(el, "frame1")
            b2, X2 = self.socket_frame(el, "frame2")
        zeros = [0, 0, 0]
        stiffness = np.concatenate([r.numbers(el, "rotational_stiffness", 3, zeros),
                                    r.numbers(el, "translational_stiffness", 3, zeros)])
        damping = np.concatenate([r.numbers(el, "rotational_damping", 3, zeros),
                                  r.numbers(el, "translational_damping", 3, zeros)])
        r.model.forces.append(Bushing(name, b1, X1, b2, X2, stiffness, damping))
        r.report("force", name, f"BushingForce -> Bushing {b1 or 'ground'} - {b2 or 'ground'}")

    def point_spring(self, el, name):
        r = self.r
        b1, X1 = self.socket_frame(el, "body1")
        b2, X2 = self.socket_frame(el, "body2")
        p1 = X1[:3, :3] @ r.numbers(el, "point1", 3, [0, 0, 0]) + X1[:3, 3]
        p2 = X2[:3, :3] @ r.numbers(el, "point2", 3, [0, 0, 0]) + X2[:3, 3]
        r.model.forces.append(SpringDamper(name, b1, p1, b2, p2, free_length=r.number(el, "rest_length", 1.0),
                                           stiffness=r.number(el, "stiffness", 1.0)))
        r.report("force", name, f"PointToPointSpring -> SpringDamper {b1 or 'ground'} - {b2 or 'ground'}")

    def actuator(self, el, name):
        r = self.r
        tag = el.tag
        common = dict(gain=r.number(el, "optimal_force", 1.0), control=1.0 if r.activate else 0.0,
                      min_control=r.number(el, "min_control", -np.inf, finite=False),
                      max_control=r.number(el, "max_control", np.inf, finite=False))
        if tag == "CoordinateActuator":
            c = self.coordinate(el, r.text(el, "coordinate"))
            if c.joint.type in ("BallJoint", "FreeJoint", "EllipsoidJoint") and c.motion == "rotational":
                # OpenSim's mobility force on this u (the angular velocity along the parent frame's
                # axis) is that torque on the child and its opposite on the parent
                info = c.joint
                axis = info.X_PF[:3, :3] @ UNIT_AXES[c.index]
                act = Actuator(name, "torque", link1=info.parent, link2=info.child, axis=-axis,
                               axis_in_world=info.parent is None, **common)
                what = (f"CoordinateActuator -> torque actuator about {c.dof}'s parent-frame axis (OpenSim's "
                        "mobility force on it)")
            else:
                act = Actuator(name, "coordinate", dof=c.dof, **common)
                what = f"CoordinateActuator -> coordinate actuator on {c.dof}"
        elif tag == "PointActuator":
            body_text = r.text(el, "body") or r.text(el, "socket_body")
            if body_text is None:
                raise r.error(el, "missing <body> (the body the force acts on)")
            body, X = r.frame(self.body_element(el, body_text.split("/")[-1]))
            direction = self.unit(el, "direction", [1, 0, 0])
            act = Actuator(name, "point", link1=body, point=r.numbers(el, "point", 3, [0, 0, 0]),
                           point_in_world=r.flag(el, "point_is_global", False), direction=direction,
                           direction_in_world=r.flag(el, "force_is_global", False), **common)
            what = f"PointActuator -> point actuator on {body or 'ground'}"
        else:
            a, _ = self.socket_frame(el, "bodyA")
            b, _ = self.socket_frame(el, "bodyB")
            act = Actuator(name, "torque", link1=a, link2=b, axis=self.unit(el, "axis", [0, 0, 1]),
                           axis_in_world=r.flag(el, "torque_is_global", True), **common)
            what = f"TorqueActuator -> torque actuator on {a or 'ground'} (and its opposite on {b or 'ground'})"
        r.model.actuators.append(act)
        r.report("actuator", name, f"{what}, gain {common['gain']:g}")

    def unit(self, el, tag, default):
        v = self.r.numbers(el, tag, 3, default)
        n = np.linalg.norm(v)
        if n < 1e-12:
            raise self.r.error(el, f"a zero <{tag}>")
        return v / n       # OpenSim normalizes actuator directions and axes

    def contact_force(self, el, name):
        """Remember the contact geometry this force uses, with its friction."""
        r = self.r
        pairs = []
        if el.tag == "SmoothSphereHalfSpaceForce":
            names = []
            for sock in ("sphere", "half_space"):
                text = r.text(el, f"socket_{sock}") or r.text(el, f"{sock}_name") or ""
                names.append(text.strip().split("/")[-1])
            pairs.append((names, el))
        else:
            holder = next((c for c in subelements(el) if c.tag.endswith("ContactParametersSet")), None)
            for params in (subelements(first_child(holder, "objects"))
                           if holder is not None and first_child(holder, "objects") is not None else []):
                pairs.append(((r.text(params, "geometry") or "").split(), params))
        used = []
        for names, params in pairs:
            self.contact_forces.append((name, names, r.number(params, "dynamic_friction", 0.0)))
            used.extend(names)
        r.model.contact_method = "penalty"
        r.report("force", name, f"{el.tag} -> penalty contact of {', '.join(used) or 'no geometry'} (the "
                                "solver's contact stiffness and damping, the file's dynamic friction)")
