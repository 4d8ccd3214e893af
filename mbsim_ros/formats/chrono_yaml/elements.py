"""Constraints, spring-dampers (TSDA, RSDA), body loads and load controllers, and the functions
they are driven by."""
from __future__ import annotations

import dataclasses

import numpy as np

from ...model import BodyLoad, Function, LoopConstraint, RotarySpringDamper, SpringDamper
from ...model.transforms import inverse_transform
from .reader import show
from .parts import frame, frame_z, local_point


class ElementReading:
    """Builder's part that reads constraints, spring-dampers, loads and functions."""

    # -- constraints, springs, loads --------------------------------------------------------
    def _read_constraint(self, c, w):
        r = self.r
        c = r.mapping(c, w)
        name = r.text(c, "name", w)
        ctype = r.enum(c, "type", w, ("DISTANCE", "REVOLUTE-SPHERICAL", "REVOLUTE-TRANSLATIONAL"))
        b1, b2 = self._named(c, "body1", w), self._named(c, "body2", w)
        T1, T2 = self.bodies[b1].T, self.bodies[b2].T
        p1, p2 = r.vector(c, "point1", w), r.vector(c, "point2", w)
        if self.bodies[b1].fixed and self.bodies[b2].fixed:
            r.warn(w, f"constraint {name!r} joins two fixed bodies ({b1!r}, {b2!r}): it constrains nothing; dropped")
            return
        params = {"chrono": ctype}
        axis = np.array([0.0, 0.0, 1.0])
        if ctype == "DISTANCE":
            kind = "distance"
            params["distance"] = float(np.linalg.norm(p2 - p1))
        else:
            axis = T1[:3, :3].T @ r.unit(c, "axis", w)       # the revolute's axis, on body1
            if ctype == "REVOLUTE-SPHERICAL":
                kind = "revolute_spherical"
                params["distance"] = float(np.linalg.norm(p2 - p1))
            else:
                kind = "revolute_translational"
                x2 = r.unit(c, "axis2", w, None)
                if x2 is not None:
                    params["x2"] = T2[:3, :3].T @ x2
        self.model.constraints.append(LoopConstraint(name, kind, b1, b2, pos1=local_point(T1, p1),
                                                     pos2=local_point(T2, p2), axis=axis, params=params))
        self.model.report.append(("constraint", name, f"{ctype} -> loop constraint {kind}"))

    def _curve(self, t, key, w):
        data = t.get(key)
        if data is None:
            return None
        pts = self._table(data, f"{w}.{key}", 2)
        if len(pts) == 1:
            return Function.constant(pts[0, 1])
        return Function.piecewise_linear(pts[:, 0], pts[:, 1], extrapolate="constant")

    def _table(self, data, w, ncols):
        r = self.r
        if not isinstance(data, list) or not data:
            raise r.error(w, f"expected a list of [x, y] rows, got {show(data)}")
        rows = np.array([r.numbers(row, f"{w}[{k}]", ncols) for k, row in enumerate(data)])
        order = np.argsort(rows[:, 0], kind="stable")
        rows = rows[order]
        if np.any(np.diff(rows[:, 0]) <= 0):
            raise r.error(w, f"the first column repeats a value ({rows[:, 0].tolist()}); expected distinct x")
        return rows

    def _read_tsda(self, t, w):
        r = self.r
        t = r.mapping(t, w)
        name = r.text(t, "name", w)
        b1, b2 = self._named(t, "body1", w), self._named(t, "body2", w)
        T1, T2 = self.bodies[b1].T, self.bodies[b2].T
        p1, p2 = r.vector(t, "point1", w), r.vector(t, "point2", w)
        sd = SpringDamper(name, b1, local_point(T1, p1), b2, local_point(T2, p2),
                          preload=r.number(t, "preload", w, 0.0))
        what = None
        if t.get("map_data") is not None:
            defs = r.numbers(t.get("deformation"), f"{w}.deformation") if t.get("deformation") is not None else None
            if defs is None:
                raise r.error(f"{w}.deformation", "missing: a map_data TSDA needs the deformation list")
            rows = self._table(t["map_data"], f"{w}.map_data", defs.size + 1)
            if defs.size < 2 or rows.shape[0] < 2 or np.any(np.diff(defs) <= 0):
                raise r.error(f"{w}.map_data", "a map needs two or more increasing deformations and two or more "
                                               "velocity rows")
            sd.map_deformations, sd.map_velocities, sd.map_forces = defs, rows[:, 0], rows[:, 1:]
            sd.free_length = 0.0   # Chrono's parser leaves it 0 for a map: deformation = length
            what = "map"
        else:
            if t.get("spring_curve_data") is not None or t.get("damping_curve_data") is not None:
                sd.stiffness_curve = self._curve(t, "spring_curve_data", w)
                sd.damping_curve = self._curve(t, "damping_curve_data", w)
                what = "curves"
            if sd.stiffness_curve is None and t.get("spring_coefficient") is not None:
                sd.stiffness = r.number(t, "spring_coefficient", w)
                what = what or "linear"
            if sd.damping_curve is None and t.get("damping_coefficient") is not None:
                sd.damping = r.number(t, "damping_coefficient", w)
                what = what or "linear"
            if what is None:
                raise r.error(w, f"TSDA {name!r}: no spring_coefficient, damping_coefficient, curve or map data")
            if sd.stiffness_curve is not None or t.get("spring_coefficient") is not None:
                sd.free_length = r.number(t, "free_length", w)
            if t.get("degressivity_compression") is not None:
                r.warn(w, "degressive damping is not modelled: read as the linear damping coefficient")
            if t.get("minimum_length") is not None and t.get("maximum_length") is not None:
                sd.min_length = r.number(t, "minimum_length", w)
                sd.max_length = r.number(t, "maximum_length", w)
        self.model.forces.append(sd)
        self.model.report.append(("tsda", name, f"{what} spring-damper between {b1!r} and {b2!r}"))

    def _read_rsda(self, t, w):
        r = self.r
        t = r.mapping(t, w)
        name = r.text(t, "name", w)
        b1, b2 = self._named(t, "body1", w), self._named(t, "body2", w)
        T1, T2 = self.bodies[b1].T, self.bodies[b2].T
        F = frame(frame_z(r.unit(t, "axis", w)), r.vector(t, "location", w, [0, 0, 0]))
        rs = RotarySpringDamper(name, b1, inverse_transform(T1) @ F, b2, inverse_transform(T2) @ F,
                                preload=r.number(t, "preload", w, 0.0))
        rs.stiffness_curve = self._curve(t, "spring_curve_data", w)
        rs.damping_curve = self._curve(t, "damping_curve_data", w)
        if rs.stiffness_curve is None and t.get("spring_coefficient") is not None:
            rs.stiffness = r.number(t, "spring_coefficient", w)
        if rs.damping_curve is None and t.get("damping_coefficient") is not None:
            rs.damping = r.number(t, "damping_coefficient", w)
        if rs.stiffness_curve is None and t.get("spring_coefficient") is None and rs.damping_curve is None \
                and t.get("damping_coefficient") is None:
            raise r.error(w, f"RSDA {name!r}: no spring_coefficient, damping_coefficient or curve data")
        if rs.stiffness_curve is not None or t.get("spring_coefficient") is not None:
            angle = r.number(t, "free_angle", w)
            rs.free_angle = np.radians(angle) if r.degrees else angle
        self.model.forces.append(rs)
        self.model.report.append(("rsda", name, f"rotational spring-damper between {b1!r} and {b2!r}"))

    def _read_load(self, ld, w, controller):
        r = self.r
        ld = r.mapping(ld, w)
        name = r.text(ld, "name", w)
        kind = r.enum(ld, "type", w, ("FORCE", "TORQUE")).lower()
        body = self._named(ld, "body", w)
        local = r.flag(ld, "local_load", w, True)
        point = r.vector(ld, "point", w, [0, 0, 0]) if kind == "force" else np.zeros(3)
        point_local = r.flag(ld, "local_point", w, True) if kind == "force" else True
        if controller:
            for k, axis in enumerate("xyz"):
                lname = f"{name}_{axis}"
                self.model.loads.append(BodyLoad(lname, body, kind, np.eye(3)[k], local, point, point_local,
                                                 modulation=Function.input(lname)))
            self.model.report.append(("load", name, f"{kind} from a controller on {body!r}: inputs "
                                                    f"{name}_x, {name}_y, {name}_z"))
            return
        vector = r.vector(ld, "load", w)
        modulation = None
        if ld.get("modulation_function") is not None:
            modulation = self._function(ld["modulation_function"], f"{w}.modulation_function", name)
        self.model.loads.append(BodyLoad(name, body, kind, vector, local, point, point_local, modulation))
        self.model.report.append(("load", name, f"{kind} {vector.tolist()} on {body!r}"))

    # -- functions ---------------------------------------------------------------------------
    def _function(self, f, w, owner):
        r = self.r
        f = r.mapping(f, w)
        kind = r.enum(f, "type", w, ("CONSTANT", "POLYNOMIAL", "SINE", "RAMP", "DATA", "CONTROLLER"))
        if kind == "CONSTANT":
            fn = Function.constant(r.number(f, "value", w))
        elif kind == "POLYNOMIAL":
            if not isinstance(f.get("coefficients"), list) or not f["coefficients"]:
                raise r.error(f"{w}.coefficients", "expected a list of coefficients (ascending powers)")
            fn = Function.polynomial(r.numbers(f["coefficients"], f"{w}.coefficients"))
        elif kind == "SINE":
            phase = r.number(f, "phase", w, 0.0)
            fn = Function.sine(r.number(f, "amplitude", w), r.number(f, "frequency", w),
                               np.radians(phase) if r.degrees else phase, r.number(f, "shift", w, 0.0))
        elif kind == "RAMP":
            fn = Function.linear(r.number(f, "slope", w), r.number(f, "intercept", w, 0.0))
        elif kind == "DATA":
            pts = self._table(f.get("data"), f"{w}.data", 2)
            fn = Function.constant(pts[0, 1]) if len(pts) == 1 else \
                Function.piecewise_linear(pts[:, 0], pts[:, 1], extrapolate="constant")
        else:
            fn = Function.input(owner)
        if f.get("repeat") is not None:
            rep = r.mapping(f["repeat"], f"{w}.repeat")
            start, width = r.number(rep, "start", f"{w}.repeat"), r.number(rep, "width", f"{w}.repeat")
            if not width > 0:
                raise r.error(f"{w}.repeat.width", f"expected a positive width, got {width}")
            fn = dataclasses.replace(fn, repeat=(start, width, r.number(rep, "shift", f"{w}.repeat", 0.0)))
        return fn
