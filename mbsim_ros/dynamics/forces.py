"""Force elements, actuators, body loads, motors and coordinate couplers (model/elements.py)
compiled into flat arrays, and the numba kernels that make the step honour them.

Applied forces (every evaluation: each step, each RK4 stage, each sensor sample) go into the
body external forces d.fext (body frame, about the body origin) or the generalized forces tau:
  SpringDamper          F = preload - k (l - l0) - c l' (or its curves, or its bilinear map)
                        along the line between the points, positive pushing them apart
  RotarySpringDamper    T = preload - k (angle - angle0) - c angle' about frame1's z, the angle
                        from frame1's x to frame2's x counted through turns (a per-element state)
  Bushing               OpenSim's BushingForce (TwoFrameLinker): body-fixed XYZ angles and the
                        translation of frame2 in frame1, forces mapped back through the Euler
                        angle rate matrix N as OpenSim does
  CoordinateLimitForce  OpenSim's formula: stiffness and damping faded in by Simbody's quintic
                        step over `transition` beyond each limit (a generalized force)
  Actuator              gain * control (coordinate: generalized force; torque; point force),
                        all switched off together by the actuators-enabled flag
  BodyLoad              force or torque times modulation(t)
  Motor (force)         function(t) as a torque / force on link2 along frame1's z, opposite on link1
Constraint rows (semi-implicit Euler only; built after the joint and loop rows):
  Motor (position/speed) one bilateral row on the motor coordinate: target = the function's
                        change over the step plus Baumgarte's -joint_erp error / dt (speed motors
                        hold the integral of their speed, as Chrono's avoid-drift option does);
                        guide/spindle rows are loop closures (ConstraintSet adds `guide_loops`)
  CoordinateCoupler     q_dep - f(q_ind) = 0: row [1, -f'(q_ind)], Baumgarte plus the curvature
                        term f'' dt v_ind^2 / 2 so that the coupling holds to second order
  SpringDamper stops    one-sided speculative rows on the length, as joint limits

Layout: one int table el_i (n, NI) and one float table el_f (n, NF), a row per element with a
kind column, a per-element state es (n, NS), then the spring maps, the packed functions
(functions.py), controls, inputs and scratch, all carved from two buffers (ef, ei).
"""
from __future__ import annotations

import math
from collections import namedtuple

import numpy as np
from numba import types
from numba.extending import overload

from ..model import (Actuator, BodyLoad, Bushing, CoordinateCoupler, CoordinateLimitForce, Function,
                     LoopConstraint, ModelError, Motor, RotarySpringDamper, SpringDamper)
from .constraints import ROW_COUPLER, ROW_MOTOR, ROW_STOP, accumulate_angular, accumulate_linear, set_row
from .functions import FI_COLUMNS, eval_function, pack_functions
from .kernels import inline, internal
from .views import array_view

# element kinds
SPRING, RSDA, BUSHING, LIMIT, ACT_COORD, ACT_TORQUE, ACT_POINT, LOAD_FORCE, LOAD_TORQUE, MOTOR, COUPLER = range(1, 12)
MOTOR_ROTATION, MOTOR_LINEAR = 0, 1
DRIVE_POSITION, DRIVE_SPEED, DRIVE_FORCE = 0, 1, 2

NI, NF, NS = 8, 36, 4
# int columns: kind, link1, link2 (-1 = world), function, second function, then per kind
I_KIND, I_LA, I_LB, I_FN, I_FN2, I_A, I_B, I_C = range(NI)
# float columns: frame1 rotation (row-major) and origin in link1, frame2 in link2, parameters
F_FRAME1, F_FRAME2, F_PAR = 0, 12, 24
# state columns: continuous angle and whether it is set, speed motor reference and whether it is set
S_ANGLE, S_INIT, S_REF, S_REF_INIT = 0, 1, 2, 3
# header of ei
H_N, H_NMAP, H_NFF, H_NFUN, H_NACT, H_NINP, H_ENABLED, H_NSTOP, H_NDRIVE = range(9)
HEADER = 10
NSCRATCH = 16

Forces = namedtuple("Forces", [
    "flags",       # int64[HEADER]: counts (elements, stop and drive rows, ...), flags[H_ENABLED] = actuators on
    "el_i",        # int64[n, NI]
    "el_f",        # f8[n, NF]
    "es",          # f8[n, NS]   per-element state (turn counting, speed motor reference)
    "maps",        # f8[nmap]    spring maps: deformations, velocities, forces (velocity-major)
    "ff", "fi",    # packed functions (functions.py)
    "controls",    # f8[nact]
    "inputs",      # f8[ninp]
    "v3",          # f8[NSCRATCH, 3] scratch vectors
    "m3",          # f8[4, 3, 3] scratch matrices
])


def forces_layout(n, nmap, nff, nfun, nact, ninp):
    """carve_forces' fields in its order: (float {field: length}, int {field: length}), as
    kernels.tree_layout; controls, inputs and fi keep at least one row."""
    floats = dict(el_f=n * NF, es=n * NS, maps=nmap, ff=nff, controls=max(nact, 1), inputs=max(ninp, 1),
                  v3=3 * NSCRATCH, m3=36)
    ints = dict(flags=HEADER, el_i=n * NI, fi=max(nfun, 1) * FI_COLUMNS)
    return floats, ints


def forces_sizes(n, nmap, nff, nfun, nact, ninp):
    """(float, int) buffer lengths that carve_forces lays out."""
    floats, ints = forces_layout(n, nmap, nff, nfun, nact, ninp)
    return sum(floats.values()), sum(ints.values())


@internal
def carve_forces(ef, ei):
    n, nmap, nff, nfun, nact, ninp = ei[H_N], ei[H_NMAP], ei[H_NFF], ei[H_NFUN], ei[H_NACT], ei[H_NINP]
    o = 0
    el_f = array_view(ef, o, (n, NF)); o += n * NF
    es = array_view(ef, o, (n, NS)); o += n * NS
    maps = array_view(ef, o, nmap); o += nmap
    ff = array_view(ef, o, nff); o += nff
    controls = array_view(ef, o, max(nact, 1)); o += max(nact, 1)
    inputs = array_view(ef, o, max(ninp, 1)); o += max(ninp, 1)
    v3 = array_view(ef, o, (NSCRATCH, 3)); o += 3 * NSCRATCH
    m3 = array_view(ef, o, (4, 3, 3)); o += 36
    k = 0
    flags = array_view(ei, k, HEADER); k += HEADER
    el_i = array_view(ei, k, (n, NI)); k += n * NI
    fi = array_view(ei, k, (max(nfun, 1), FI_COLUMNS)); k += max(nfun, 1) * FI_COLUMNS
    return Forces(flags, el_i, el_f, es, maps, ff, fi, controls, inputs, v3, m3), o, k


def forces_or_none(forces):
    """In kernels: the Forces views of the bundle forces = (ef, ei), or None when forces is None.
    A world without force elements passes None, and the kernels taking `fe` test `fe is not
    None`: numba then prunes that branch at compile time, so the step of such a world compiles
    none of this file's kernels (about 30 CPU s less on the first run)."""
    raise TypeError("forces_or_none is for numba kernels")


@overload(forces_or_none, jit_options=dict(cache=True, nogil=True))
def _forces_or_none(forces):
    if isinstance(forces, types.NoneType):
        return lambda forces: None
    return lambda forces: carve_forces(forces[0], forces[1])[0]


# ------------------------------------------------------------------------- compiling ---
def _frame(T, what):
    T = np.asarray(T, dtype=float)
    if T.shape != (4, 4) or not np.all(np.isfinite(T)):
        raise ModelError(f"{what}: expected a finite 4x4 pose, got shape {T.shape}")
    R = T[:3, :3]
    if not np.allclose(R.T @ R, np.eye(3), atol=1e-6) or np.linalg.det(R) < 0:
        raise ModelError(f"{what}: the pose's rotation is not a rotation matrix")
    return T


def _vector(x, what, unit=False):
    a = np.asarray(x, dtype=float).reshape(-1)
    if a.shape != (3,) or not np.all(np.isfinite(a)):
        raise ModelError(f"{what}: expected 3 finite numbers, got {np.asarray(x).tolist()}")
    if unit:
        n = np.linalg.norm(a)
        if n < 1e-12:
            raise ModelError(f"{what}: a zero vector has no direction")
        a = a / n
    return a


def _number(x, what, low=-np.inf):
    try:
        v = float(x)
    except (TypeError, ValueError):
        raise ModelError(f"{what}: expected a number, got {x!r}") from None
    if not np.isfinite(v) or v < low:
        raise ModelError(f"{what}: expected a finite number{'' if low == -np.inf else f' >= {low}'}, got {x!r}")
    return v


class ForceSet:
    """The force elements, actuators, loads, motors and couplers of a compiled world as the
    buffers (ef, ei) the step kernel carves, plus what the constraint set and the Physics
    need: `guide_loops` (motor guides as loop closures), `drive_rows` (bilateral rows of
    position/speed motors and couplers), `stop_rows` (springs with length stops),
    `actuator_names`, `input_names`, and `constrained` ([(what, name, link1, link2, model index)] of the
    elements that add constraint rows, for the integrator and force sensor checks)."""

    def __init__(self, compiled):
        self.compiled = compiled
        rows_i, rows_f = [], []
        functions = []
        maps = []
        self.actuator_names, self._actuators = [], []
        self.guide_loops = []
        self.guide_models = []       # the model index of each guide loop
        self.constrained = []
        self.drive_rows = self.stop_rows = 0
        v_off = q_off = 0
        self.model_rows = []         # per model: (first element row, first actuator slot)
        for mi, model in enumerate(compiled.models):
            self.model_rows.append((len(rows_i), len(self.actuator_names)))
            where = f" (model {model.name!r}{', ' + model.source if model.source else ''})"
            dofs = self._dof_table(model, v_off, q_off)
            actuator_world = compiled.names.table(compiled.entities[mi], "actuator")

            def link(name, what):
                if name is None:
                    return -1
                if name not in {l.name for l in model.links}:
                    raise ModelError(f"{what}: link {name!r} does not exist{where}")
                return compiled.link_index(mi, name)

            def dof(name, what, coordinate=True):
                if name not in dofs:
                    raise ModelError(f"{what}: DOF {name!r} is not one of the model's DOFs{where} "
                                     f"({', '.join(dofs) or 'none'})")
                iv, iq = dofs[name]
                if coordinate and iq < 0:
                    raise ModelError(f"{what}: DOF {name!r} belongs to a ball or free joint, which has "
                                     f"no single coordinate{where}")
                return iv, iq

            def function(f, what):
                if f is None:
                    return -1
                if not isinstance(f, Function):
                    raise ModelError(f"{what}: expected a Function, got {type(f).__name__}")
                functions.append(f)
                return len(functions) - 1

            def add(kind, name, la=-1, lb=-1, fn=-1, fn2=-1, a=0, b=0, c=0):
                ri = np.zeros(NI, dtype=np.int64)
                ri[:] = kind, la, lb, fn, fn2, a, b, c
                rf = np.zeros(NF)
                rows_i.append(ri)
                rows_f.append(rf)
                return rf

            for e in model.forces:
                what = f"{type(e).__name__} {getattr(e, 'name', '?')!r}"
                if isinstance(e, SpringDamper):
                    la, lb = link(e.link1, what), link(e.link2, what)
                    fk = function(e.stiffness_curve, f"{what} stiffness_curve")
                    fc = function(e.damping_curve, f"{what} damping_curve")
                    moff = nd = nvel = 0
                    if e.map_forces is not None:
                        defs = np.asarray(e.map_deformations, float).reshape(-1)
                        vels = np.asarray(e.map_velocities, float).reshape(-1)
                        F = np.asarray(e.map_forces, float)
                        if F.shape != (vels.size, defs.size) or defs.size < 1 or vels.size < 1:
                            raise ModelError(f"{what}: map_forces must be (velocities, deformations) = "
                                             f"({vels.size}, {defs.size}), got {F.shape}")
                        for arr, nm in ((defs, "map_deformations"), (vels, "map_velocities")):
                            if not np.all(np.diff(arr) > 0) or not np.all(np.isfinite(arr)):
                                raise ModelError(f"{what}: {nm} must be finite and increase strictly")
                        if not np.all(np.isfinite(F)):
                            raise ModelError(f"{what}: map_forces must be finite")
                        moff, nd, nvel = len(maps), defs.size, vels.size
                        maps.extend(defs.tolist() + vels.tolist() + F.reshape(-1).tolist())
                    rf = add(SPRING, e.name, la, lb, fk, fc, moff, nd, nvel)
                    rf[F_FRAME1 + 9:F_FRAME1 + 12] = _vector(e.point1, f"{what} point1")
                    rf[F_FRAME2 + 9:F_FRAME2 + 12] = _vector(e.point2, f"{what} point2")
                    lo = -np.inf if e.min_length is None else _number(e.min_length, f"{what} min_length", 0.0)
                    hi = np.inf if e.max_length is None else _number(e.max_length, f"{what} max_length", 0.0)
                    if lo >= hi:
                        raise ModelError(f"{what}: min_length {lo} must be below max_length {hi}")
                    rf[F_PAR:F_PAR + 6] = (_number(e.free_length, f"{what} free_length"),
                                           _number(e.stiffness, f"{what} stiffness"),
                                           _number(e.damping, f"{what} damping"),
                                           _number(e.preload, f"{what} preload"), lo, hi)
                    if np.isfinite(lo) or np.isfinite(hi):
                        self.stop_rows += 1
                        self.constrained.append(("spring length stops", e.name, e.link1, e.link2, mi))
                elif isinstance(e, RotarySpringDamper):
                    la, lb = link(e.link1, what), link(e.link2, what)
                    rf = add(RSDA, e.name, la, lb, function(e.stiffness_curve, f"{what} stiffness_curve"),
                             function(e.damping_curve, f"{what} damping_curve"))
                    self._frames(rf, e.frame1, e.frame2, what)
                    rf[F_PAR:F_PAR + 4] = (_number(e.free_angle, f"{what} free_angle"),
                                           _number(e.stiffness, f"{what} stiffness"),
                                           _number(e.damping, f"{what} damping"),
                                           _number(e.preload, f"{what} preload"))
                elif isinstance(e, Bushing):
                    la, lb = link(e.link1, what), link(e.link2, what)
                    rf = add(BUSHING, e.name, la, lb)
                    self._frames(rf, e.frame1, e.frame2, what)
                    for off, arr, nm in ((0, e.stiffness, "stiffness"), (6, e.damping, "damping")):
                        a = np.asarray(arr, float).reshape(-1)
                        if a.shape != (6,) or not np.all(np.isfinite(a)):
                            raise ModelError(f"{what}: {nm} must be 6 finite numbers (rx, ry, rz, tx, ty, tz), got {a.size}")
                        rf[F_PAR + off:F_PAR + off + 6] = a
                elif isinstance(e, CoordinateLimitForce):
                    iv, iq = dof(e.dof, what)
                    rf = add(LIMIT, e.name, a=iv, b=iq)
                    rf[F_PAR:F_PAR + 6] = (_number(e.upper_stiffness, f"{what} upper_stiffness", 0.0),
                                           _number(e.upper_limit, f"{what} upper_limit"),
                                           _number(e.lower_stiffness, f"{what} lower_stiffness", 0.0),
                                           _number(e.lower_limit, f"{what} lower_limit"),
                                           _number(e.damping, f"{what} damping", 0.0),
                                           _number(e.transition, f"{what} transition", 0.0))
                else:
                    raise ModelError(f"model {model.name!r}: force element {what} is not one of SpringDamper, "
                                     "RotarySpringDamper, Bushing, CoordinateLimitForce")
            for e in model.actuators:
                what = f"actuator {getattr(e, 'name', '?')!r}"
                if not isinstance(e, Actuator):
                    raise ModelError(f"model {model.name!r}: {what} is a {type(e).__name__}, not an Actuator")
                if actuator_world[e.name] in self.actuator_names:
                    raise ModelError(f"{what}: two actuators have this name{where}")
                slot = len(self.actuator_names)
                lo, hi = float(e.min_control), float(e.max_control)
                if not lo <= hi:
                    raise ModelError(f"{what}: min_control {lo} is above max_control {hi}")
                if e.kind == "coordinate":
                    iv, _ = dof(e.dof, what, coordinate=False)
                    rf = add(ACT_COORD, e.name, a=slot, b=iv)
                elif e.kind == "torque":
                    if e.link1 is None and e.link2 is None:
                        raise ModelError(f"{what}: a torque actuator needs link1 (and optionally link2)")
                    rf = add(ACT_TORQUE, e.name, link(e.link1, what), link(e.link2, what), a=slot,
                             b=int(bool(e.axis_in_world)))
                    rf[F_FRAME1 + 9:F_FRAME1 + 12] = _vector(e.axis, f"{what} axis", unit=True)
                else:
                    if e.link1 is None:
                        raise ModelError(f"{what}: a point actuator needs link1")
                    rf = add(ACT_POINT, e.name, link(e.link1, what), a=slot, b=int(bool(e.point_in_world)),
                             c=int(bool(e.direction_in_world)))
                    rf[F_FRAME1 + 9:F_FRAME1 + 12] = _vector(e.point, f"{what} point")
                    rf[F_FRAME2 + 9:F_FRAME2 + 12] = _vector(e.direction, f"{what} direction", unit=True)
                rf[F_PAR] = _number(e.gain, f"{what} gain")
                self.actuator_names.append(actuator_world[e.name])
                self._actuators.append((lo, hi, min(max(float(e.control), lo), hi)))
            for e in model.loads:
                what = f"body load {getattr(e, 'name', '?')!r}"
                if not isinstance(e, BodyLoad):
                    raise ModelError(f"model {model.name!r}: {what} is a {type(e).__name__}, not a BodyLoad")
                if e.kind not in ("force", "torque"):
                    raise ModelError(f"{what}: kind {e.kind!r} is not one of force, torque")
                if e.link is None:
                    raise ModelError(f"{what}: a load needs a link")
                rf = add(LOAD_FORCE if e.kind == "force" else LOAD_TORQUE, e.name, link(e.link, what),
                         fn=function(e.modulation, f"{what} modulation"), a=int(bool(e.local)),
                         b=int(bool(e.point_local)))
                rf[F_FRAME1 + 9:F_FRAME1 + 12] = _vector(e.point, f"{what} point")
                rf[F_FRAME2 + 9:F_FRAME2 + 12] = _vector(e.vector, f"{what} vector")
            for e in model.motors:
                what = f"motor {getattr(e, 'name', '?')!r}"
                if not isinstance(e, Motor):
                    raise ModelError(f"model {model.name!r}: {what} is a {type(e).__name__}, not a Motor")
                la, lb = link(e.link1, what), link(e.link2, what)
                if la == lb:
                    raise ModelError(f"{what}: link1 and link2 are the same ({e.link1!r})")
                drive = {"position": DRIVE_POSITION, "speed": DRIVE_SPEED, "force": DRIVE_FORCE}[e.actuation]
                kind = MOTOR_ROTATION if e.kind == "rotation" else MOTOR_LINEAR
                rf = add(MOTOR, e.name, la, lb, function(e.function, f"{what} function"), a=kind, b=drive)
                self._frames(rf, e.frame1, e.frame2, what)
                guides = ({"free": (), "revolute": ("hinge",), "cylindrical": ("point_line", "parallel")}
                          if kind == MOTOR_ROTATION else
                          {"free": (), "prismatic": ("point_line", "orientation"), "spherical": ("point_line",)})
                if e.guide not in guides:
                    raise ModelError(f"{what}: guide {e.guide!r} of a {e.kind} motor is not one of {', '.join(guides)}")
                T1, T2 = np.asarray(e.frame1, float), np.asarray(e.frame2, float)
                for g in guides[e.guide]:
                    self.guide_loops.append(LoopConstraint(f"{e.name} ({e.guide} guide)", g, e.link1, e.link2,
                                                           T1[:3, 3].copy(), T2[:3, 3].copy(), T1[:3, 2].copy()))
                    self.guide_models.append(mi)
                if guides[e.guide]:
                    self.constrained.append((f"{e.guide} motor guide", e.name, e.link1, e.link2, mi))
                if drive != DRIVE_FORCE:
                    self.drive_rows += 1
                    self.constrained.append((f"{e.actuation} motor", e.name, e.link1, e.link2, mi))
            for e in model.couplers:
                what = f"coordinate coupler {getattr(e, 'name', '?')!r}"
                if not isinstance(e, CoordinateCoupler):
                    raise ModelError(f"model {model.name!r}: {what} is a {type(e).__name__}, not a CoordinateCoupler")
                dv, dq = dof(e.dependent, f"{what} dependent")
                iv, iq = dof(e.independent, f"{what} independent")
                if dv == iv:
                    raise ModelError(f"{what}: the dependent and independent DOF are the same ({e.dependent!r})")
                # fn2 holds the independent coordinate's q index
                add(COUPLER, e.name, fn=function(e.function, f"{what} function"), fn2=iq, a=dv, b=dq, c=iv)
                self.drive_rows += 1
                self.constrained.append(("coordinate coupler", e.name, None, None, mi))
            v_off += model.nv
            q_off += model.nq
        ff, fi, self.input_names = pack_functions(functions, [])
        n = len(rows_i)
        nact, ninp = len(self.actuator_names), len(self.input_names)
        sizes = forces_sizes(n, len(maps), len(ff), fi.shape[0], nact, ninp)
        self.ef = np.zeros(sizes[0])
        self.ei = np.zeros(sizes[1], dtype=np.int64)
        self.ei[:HEADER] = 0
        self.ei[[H_N, H_NMAP, H_NFF, H_NFUN, H_NACT, H_NINP, H_NSTOP, H_NDRIVE]] = (
            n, len(maps), len(ff), fi.shape[0], nact, ninp, self.stop_rows, self.drive_rows)
        self.forces, used_f, used_i = carve_forces.py_func(self.ef, self.ei)
        assert (used_f, used_i) == (len(self.ef), len(self.ei)), "forces_sizes disagrees with carve_forces"
        self.buffers = (self.ef, self.ei)     # the kernels' `forces` argument (None without elements)
        f = self.forces
        if n:
            f.el_i[:] = np.array(rows_i)
            f.el_f[:] = np.array(rows_f)
        f.maps[:] = maps
        f.ff[:] = ff
        f.fi[:] = fi
        self.n = n
        self._bounds = np.array([(lo, hi) for lo, hi, _ in self._actuators]).reshape(-1, 2)
        self._initial_controls = np.array([c for _, _, c in self._actuators])
        self.reset()

    @staticmethod
    def _dof_table(model, v_off, q_off):
        """{DOF name: (global v index, global q index or -1 inside ball and free joints)}."""
        out = {}
        names = model.dof_names
        for j in model.joints:
            for k in range(j.nv):
                iq = -1 if j.type in ("ball", "free") else q_off + j.q_index + k
                out[names[j.v_index + k]] = (v_off + j.v_index + k, iq)
        return out

    @staticmethod
    def _frames(rf, frame1, frame2, what):
        T1 = _frame(frame1, f"{what} frame1")
        T2 = _frame(frame2, f"{what} frame2")
        rf[F_FRAME1:F_FRAME1 + 9] = T1[:3, :3].reshape(-1)
        rf[F_FRAME1 + 9:F_FRAME1 + 12] = T1[:3, 3]
        rf[F_FRAME2:F_FRAME2 + 9] = T2[:3, :3].reshape(-1)
        rf[F_FRAME2 + 9:F_FRAME2 + 12] = T2[:3, 3]

    # -- run-time values ------------------------------------------------------------------
    def adopt(self, old, pairs):
        """Take the run-time values of the models kept from `old` (another ForceSet): pairs of
        (model index here, model index in old); element states and controls by position within
        the model, inputs by name, the actuators-enabled switch."""
        ends = self.model_rows[1:] + [(self.n, len(self.actuator_names))]
        old_ends = old.model_rows[1:] + [(old.n, len(old.actuator_names))]
        f, g = self.forces, old.forces
        for k, j in pairs:
            (r0, a0), (r1, a1) = self.model_rows[k], ends[k]
            (s0, b0), (s1, b1) = old.model_rows[j], old_ends[j]
            assert r1 - r0 == s1 - s0 and a1 - a0 == b1 - b0, "a kept model compiled differently"
            f.es[r0:r1] = g.es[s0:s1]
            f.controls[a0:a1] = g.controls[b0:b1]
        for i, name in enumerate(self.input_names):
            if name in old.input_names:
                f.inputs[i] = g.inputs[old.input_names.index(name)]
        f.flags[H_ENABLED] = g.flags[H_ENABLED]

    def reset(self):
        """Initial controls, inputs 0, actuators on, element states cleared."""
        f = self.forces
        f.es[:] = 0.0
        f.controls[:len(self.actuator_names)] = self._initial_controls
        f.inputs[:] = 0.0
        f.flags[H_ENABLED] = 1

    def actuator_slot(self, name):
        try:
            return self.actuator_names.index(name)
        except ValueError:
            raise KeyError(f"no actuator named {name!r}; the actuators are "
                           f"{', '.join(self.actuator_names) or 'none'}") from None

    def set_control(self, name, value):
        k = self.actuator_slot(name)
        lo, hi = self._bounds[k]
        self.forces.controls[k] = min(max(float(value), lo), hi)

    def set_controls(self, values):
        values = np.asarray(values, dtype=float).reshape(-1)
        if values.shape != (len(self.actuator_names),):
            raise ValueError(f"controls: expected {len(self.actuator_names)} values (one per actuator: "
                             f"{', '.join(self.actuator_names) or 'none'}), got {values.size}")
        self.forces.controls[:values.size] = np.clip(values, self._bounds[:, 0], self._bounds[:, 1])

    @property
    def controls(self):
        return self.forces.controls[:len(self.actuator_names)].copy()

    def clip_controls(self, values):
        """values (..., actuators) clipped to each actuator's control range."""
        return np.clip(values, self._bounds[:, 0], self._bounds[:, 1])

    def set_input(self, name, value):
        try:
            k = self.input_names.index(name)
        except ValueError:
            raise KeyError(f"no input named {name!r}; the inputs are {', '.join(self.input_names) or 'none'}") from None
        value = float(value)
        if not math.isfinite(value):
            raise ValueError(f"input {name!r}: expected a finite number, got {value}")
        self.forces.inputs[k] = value


# ------------------------------------------------------------------------------ kernels ---
# The helpers take the few arrays they use, never the Tree/Data/Forces namedtuples: handing a
# namedtuple to a function (inlined or not) increfs every array in it, some 60 atomic calls
# (~0.3 us), where an array costs one. The arrays are taken out of the tuples once per call of
# apply_forces.

@inline
def _world_point(link_R, link_p, link, f, o):
    """World position of the point f[o:o+3] of `link` (-1: already in the world)."""
    x, y, z = f[o], f[o + 1], f[o + 2]
    if link < 0:
        return x, y, z
    R = link_R[link]
    return (link_p[link, 0] + R[0, 0] * x + R[0, 1] * y + R[0, 2] * z,
            link_p[link, 1] + R[1, 0] * x + R[1, 1] * y + R[1, 2] * z,
            link_p[link, 2] + R[2, 0] * x + R[2, 1] * y + R[2, 2] * z)


@inline
def _world_vector(link_R, link, f, o):
    """The vector f[o:o+3] of `link`'s frame in the world (-1: already in the world)."""
    x, y, z = f[o], f[o + 1], f[o + 2]
    if link < 0:
        return x, y, z
    R = link_R[link]
    return (R[0, 0] * x + R[0, 1] * y + R[0, 2] * z,
            R[1, 0] * x + R[1, 1] * y + R[1, 2] * z,
            R[2, 0] * x + R[2, 1] * y + R[2, 2] * z)


@inline
def _world_rotation(link_R, link, f, o, R):
    """R = world orientation of the frame whose rotation is f[o:o+9] (row-major) on `link`."""
    for a in range(3):
        for c in range(3):
            if link < 0:
                R[a, c] = f[o + 3 * a + c]
            else:
                L = link_R[link]
                R[a, c] = L[a, 0] * f[o + c] + L[a, 1] * f[o + 3 + c] + L[a, 2] * f[o + 6 + c]


@inline
def _velocity(link_body, Rw, pw, vel, link, p0, p1, p2):
    """World velocity of the material point of `link` at the world point p."""
    b = -1 if link < 0 else link_body[link]
    if b < 0:
        return 0.0, 0.0, 0.0
    R = Rw[b]
    v0, v1, v2, w0, w1, w2 = vel[b, 0], vel[b, 1], vel[b, 2], vel[b, 3], vel[b, 4], vel[b, 5]
    W0 = R[0, 0] * w0 + R[0, 1] * w1 + R[0, 2] * w2
    W1 = R[1, 0] * w0 + R[1, 1] * w1 + R[1, 2] * w2
    W2 = R[2, 0] * w0 + R[2, 1] * w1 + R[2, 2] * w2
    r0, r1, r2 = p0 - pw[b, 0], p1 - pw[b, 1], p2 - pw[b, 2]
    return (R[0, 0] * v0 + R[0, 1] * v1 + R[0, 2] * v2 + W1 * r2 - W2 * r1,
            R[1, 0] * v0 + R[1, 1] * v1 + R[1, 2] * v2 + W2 * r0 - W0 * r2,
            R[2, 0] * v0 + R[2, 1] * v1 + R[2, 2] * v2 + W0 * r1 - W1 * r0)


@inline
def _omega(link_body, Rw, vel, link):
    """World angular velocity of `link`."""
    b = -1 if link < 0 else link_body[link]
    if b < 0:
        return 0.0, 0.0, 0.0
    R = Rw[b]
    w0, w1, w2 = vel[b, 3], vel[b, 4], vel[b, 5]
    return (R[0, 0] * w0 + R[0, 1] * w1 + R[0, 2] * w2,
            R[1, 0] * w0 + R[1, 1] * w1 + R[1, 2] * w2,
            R[2, 0] * w0 + R[2, 1] * w1 + R[2, 2] * w2)


@inline
def _push(link_body, Rw, pw, fext, link, p0, p1, p2, F0, F1, F2):
    """World force F at world point p on `link` (nothing on the world), into fext."""
    b = -1 if link < 0 else link_body[link]
    if b < 0:
        return
    R = Rw[b]
    r0, r1, r2 = p0 - pw[b, 0], p1 - pw[b, 1], p2 - pw[b, 2]
    n0 = r1 * F2 - r2 * F1
    n1 = r2 * F0 - r0 * F2
    n2 = r0 * F1 - r1 * F0
    for a in range(3):
        fext[b, a] += R[0, a] * F0 + R[1, a] * F1 + R[2, a] * F2
        fext[b, 3 + a] += R[0, a] * n0 + R[1, a] * n1 + R[2, a] * n2


@inline
def _twist(link_body, Rw, fext, link, T0, T1, T2):
    """World torque T on `link`, into fext."""
    b = -1 if link < 0 else link_body[link]
    if b < 0:
        return
    R = Rw[b]
    for a in range(3):
        fext[b, 3 + a] += R[0, a] * T0 + R[1, a] * T1 + R[2, a] * T2


@inline
def _wrap(x):
    """x wrapped into [-pi, pi)."""
    return x - 2.0 * math.pi * math.floor((x + math.pi) / (2.0 * math.pi))


@inline
def _rotation_angle(state, R1, R2, commit):
    """Angle about frame1's z from frame1's x to frame2's x, continued through turns from the
    element's last angle (its state row, updated when commit)."""
    x0, x1, x2 = R2[0, 0], R2[1, 0], R2[2, 0]
    # frame2's x along frame1's x and y
    cx = R1[0, 0] * x0 + R1[1, 0] * x1 + R1[2, 0] * x2
    cy = R1[0, 1] * x0 + R1[1, 1] * x1 + R1[2, 1] * x2
    raw = math.atan2(cy, cx)
    angle = raw if state[S_INIT] == 0.0 else state[S_ANGLE] + _wrap(raw - state[S_ANGLE])
    if commit:
        state[S_ANGLE] = angle
        state[S_INIT] = 1.0
    return angle


@inline
def _map_index(maps, o, n, x):
    """(i, fraction) of x on the grid maps[o:o+n]: the cell [i, i+1] holding x (the end cells
    outside the grid, so the fraction extrapolates linearly); (0, 0) for a one-point grid."""
    if n == 1:
        return 0, 0.0
    i = 0
    while i < n - 2 and maps[o + i + 1] <= x:
        i += 1
    return i, (x - maps[o + i]) / (maps[o + i + 1] - maps[o + i])


@inline
def _bilinear(maps, o, nd, nv, deformation, velocity):
    """The map's force at (deformation, velocity): bilinear inside, linear outside."""
    j, tx = _map_index(maps, o, nd, deformation)
    i, ty = _map_index(maps, o + nd, nv, velocity)
    j1 = j if nd == 1 else j + 1
    i1 = i if nv == 1 else i + 1
    base = o + nd + nv
    f00 = maps[base + i * nd + j]
    f01 = maps[base + i * nd + j1]
    f10 = maps[base + i1 * nd + j]
    f11 = maps[base + i1 * nd + j1]
    return (1.0 - ty) * ((1.0 - tx) * f00 + tx * f01) + ty * ((1.0 - tx) * f10 + tx * f11)


@inline
def _quintic_step(x, x0, x1):
    """Simbody's Function::Step from 0 at x0 to 1 at x1 (a hard step when x1 == x0)."""
    if x <= x0:
        return 0.0
    if x >= x1:
        return 1.0
    u = (x - x0) / (x1 - x0)
    return u * u * u * (10.0 + u * (6.0 * u - 15.0))


@inline
def _bushing(link_R, link_p, link_body, Rw, pw, vel, fext, f, la, lb, RF, RM):
    """OpenSim's BushingForce: f = -K dq - D dqdot in the deflection basis (body-fixed XYZ
    angles of frame2 (M) in frame1 (F), then M's origin in F), converted to spatial forces
    (TwoFrameLinker::convertInternalForceToForcesOnFrames). RF, RM: 3x3 scratch."""
    _world_rotation(link_R, la, f, F_FRAME1, RF)
    _world_rotation(link_R, lb, f, F_FRAME2, RM)
    pF0, pF1, pF2 = _world_point(link_R, link_p, la, f, F_FRAME1 + 9)
    pM0, pM1, pM2 = _world_point(link_R, link_p, lb, f, F_FRAME2 + 9)
    d0, d1, d2 = pM0 - pF0, pM1 - pF1, pM2 - pF2           # p_FM in the world
    # R_FM = RF^T RM: the three entries the XYZ angles need
    r00 = RF[0, 0] * RM[0, 0] + RF[1, 0] * RM[1, 0] + RF[2, 0] * RM[2, 0]
    r01 = RF[0, 0] * RM[0, 1] + RF[1, 0] * RM[1, 1] + RF[2, 0] * RM[2, 1]
    r02 = RF[0, 0] * RM[0, 2] + RF[1, 0] * RM[1, 2] + RF[2, 0] * RM[2, 2]
    r12 = RF[0, 1] * RM[0, 2] + RF[1, 1] * RM[1, 2] + RF[2, 1] * RM[2, 2]
    r22 = RF[0, 2] * RM[0, 2] + RF[1, 2] * RM[1, 2] + RF[2, 2] * RM[2, 2]
    # body-fixed XYZ angles of R_FM = Rx(q0) Ry(q1) Rz(q2)
    q1 = math.atan2(r02, math.sqrt(r00 * r00 + r01 * r01))
    q0 = math.atan2(-r12, r22)
    q2 = math.atan2(-r01, r00)
    # velocities: M relative to F, the derivative taken in F
    vF0, vF1, vF2 = _velocity(link_body, Rw, pw, vel, la, pF0, pF1, pF2)
    vM0, vM1, vM2 = _velocity(link_body, Rw, pw, vel, lb, pM0, pM1, pM2)
    w10, w11, w12 = _omega(link_body, Rw, vel, la)
    w20, w21, w22 = _omega(link_body, Rw, vel, lb)
    t0 = vM0 - vF0 - (w11 * d2 - w12 * d1)
    t1 = vM1 - vF1 - (w12 * d0 - w10 * d2)
    t2 = vM2 - vF2 - (w10 * d1 - w11 * d0)
    dw0, dw1, dw2 = w20 - w10, w21 - w11, w22 - w12
    # w_FM in M = RM^T (w2 - w1)
    wm0 = RM[0, 0] * dw0 + RM[1, 0] * dw1 + RM[2, 0] * dw2
    wm1 = RM[0, 1] * dw0 + RM[1, 1] * dw1 + RM[2, 1] * dw2
    wm2 = RM[0, 2] * dw0 + RM[1, 2] * dw1 + RM[2, 2] * dw2
    s1, c1 = math.sin(q1), math.cos(q1)
    s2, c2 = math.sin(q2), math.cos(q2)
    # N (Simbody's calcNForBodyXYZInBodyFrame): qdot = N w_M
    n00, n01 = c2 / c1, -s2 / c1
    n10, n11 = s2, c2
    n20, n21 = -s1 * c2 / c1, s1 * s2 / c1
    qd0 = n00 * wm0 + n01 * wm1
    qd1 = n10 * wm0 + n11 * wm1
    qd2 = n20 * wm0 + n21 * wm1 + wm2
    K, D = F_PAR, F_PAR + 6
    fr0 = -f[K] * q0 - f[D] * qd0
    fr1 = -f[K + 1] * q1 - f[D + 1] * qd1
    fr2 = -f[K + 2] * q2 - f[D + 2] * qd2
    # translation: p_FM and its rate in F, the force in F, then in the world
    ft0 = -f[K + 3] * (RF[0, 0] * d0 + RF[1, 0] * d1 + RF[2, 0] * d2) - f[D + 3] * (RF[0, 0] * t0 + RF[1, 0] * t1 + RF[2, 0] * t2)
    ft1 = -f[K + 4] * (RF[0, 1] * d0 + RF[1, 1] * d1 + RF[2, 1] * d2) - f[D + 4] * (RF[0, 1] * t0 + RF[1, 1] * t1 + RF[2, 1] * t2)
    ft2 = -f[K + 5] * (RF[0, 2] * d0 + RF[1, 2] * d1 + RF[2, 2] * d2) - f[D + 5] * (RF[0, 2] * t0 + RF[1, 2] * t1 + RF[2, 2] * t2)
    F0 = RF[0, 0] * ft0 + RF[0, 1] * ft1 + RF[0, 2] * ft2
    F1 = RF[1, 0] * ft0 + RF[1, 1] * ft1 + RF[1, 2] * ft2
    F2 = RF[2, 0] * ft0 + RF[2, 1] * ft1 + RF[2, 2] * ft2
    # moment on body 2 in M: N^T f_rot; then in the world
    mm0 = n00 * fr0 + n10 * fr1 + n20 * fr2
    mm1 = n01 * fr0 + n11 * fr1 + n21 * fr2
    mm2 = fr2
    m0 = RM[0, 0] * mm0 + RM[0, 1] * mm1 + RM[0, 2] * mm2
    m1 = RM[1, 0] * mm0 + RM[1, 1] * mm1 + RM[1, 2] * mm2
    m2 = RM[2, 0] * mm0 + RM[2, 1] * mm1 + RM[2, 2] * mm2
    _push(link_body, Rw, pw, fext, lb, pM0, pM1, pM2, F0, F1, F2)
    _twist(link_body, Rw, fext, lb, m0, m1, m2)
    # frame1: -F at its origin and -(m2 + p_FM x F)
    _push(link_body, Rw, pw, fext, la, pF0, pF1, pF2, -F0, -F1, -F2)
    _twist(link_body, Rw, fext, la, -(m0 + d1 * F2 - d2 * F1), -(m1 + d2 * F0 - d0 * F2), -(m2 + d0 * F1 - d1 * F0))


@internal
def apply_forces(t, d, fe, q, v, time, tau, commit):
    """Every force element, actuator, load and force motor at (q, v, time): body forces added
    into d.fext, generalized forces into tau. Needs velocity_kinematics and link_poses at
    (q, v). commit: update the elements' states (turn counting): True in the step only."""
    link_R, link_p, link_body, Rw, pw, vel, fext = d.link_R, d.link_p, t.link_body, d.Rw, d.pw, d.vel, d.fext
    el_i, el_f, es, maps, ff, fi, inputs, controls = fe.el_i, fe.el_f, fe.es, fe.maps, fe.ff, fe.fi, fe.inputs, fe.controls
    R1, R2 = fe.m3[0], fe.m3[1]
    enabled = fe.flags[H_ENABLED] != 0
    for k in range(el_i.shape[0]):
        ei = el_i[k]
        f = el_f[k]
        kind, la, lb = ei[I_KIND], ei[I_LA], ei[I_LB]
        if kind == SPRING:
            a0, a1, a2 = _world_point(link_R, link_p, la, f, F_FRAME1 + 9)
            b0, b1, b2 = _world_point(link_R, link_p, lb, f, F_FRAME2 + 9)
            u0, u1, u2 = b0 - a0, b1 - a1, b2 - a2
            length = math.sqrt(u0 * u0 + u1 * u1 + u2 * u2)
            if length < 1e-12:
                continue      # coincident points: the line of action is undefined
            u0, u1, u2 = u0 / length, u1 / length, u2 / length
            va0, va1, va2 = _velocity(link_body, Rw, pw, vel, la, a0, a1, a2)
            vb0, vb1, vb2 = _velocity(link_body, Rw, pw, vel, lb, b0, b1, b2)
            rate = u0 * (vb0 - va0) + u1 * (vb1 - va1) + u2 * (vb2 - va2)
            deformation = length - f[F_PAR]
            force = f[F_PAR + 3]
            if ei[I_B] > 0:
                force -= _bilinear(maps, ei[I_A], ei[I_B], ei[I_C], deformation, rate)
            else:
                if ei[I_FN] >= 0:
                    force -= eval_function(ff, fi, ei[I_FN], deformation, inputs)[0]
                else:
                    force -= f[F_PAR + 1] * deformation
                if ei[I_FN2] >= 0:
                    force -= eval_function(ff, fi, ei[I_FN2], rate, inputs)[0]
                else:
                    force -= f[F_PAR + 2] * rate
            # positive pushes the points apart
            _push(link_body, Rw, pw, fext, lb, b0, b1, b2, force * u0, force * u1, force * u2)
            _push(link_body, Rw, pw, fext, la, a0, a1, a2, -force * u0, -force * u1, -force * u2)
        elif kind == RSDA:
            _world_rotation(link_R, la, f, F_FRAME1, R1)
            _world_rotation(link_R, lb, f, F_FRAME2, R2)
            angle = _rotation_angle(es[k], R1, R2, commit)
            w10, w11, w12 = _omega(link_body, Rw, vel, la)
            w20, w21, w22 = _omega(link_body, Rw, vel, lb)
            z0, z1, z2 = R1[0, 2], R1[1, 2], R1[2, 2]
            rate = z0 * (w20 - w10) + z1 * (w21 - w11) + z2 * (w22 - w12)
            torque = f[F_PAR + 3]
            if ei[I_FN] >= 0:
                torque -= eval_function(ff, fi, ei[I_FN], angle - f[F_PAR], inputs)[0]
            else:
                torque -= f[F_PAR + 1] * (angle - f[F_PAR])
            if ei[I_FN2] >= 0:
                torque -= eval_function(ff, fi, ei[I_FN2], rate, inputs)[0]
            else:
                torque -= f[F_PAR + 2] * rate
            _twist(link_body, Rw, fext, lb, torque * z0, torque * z1, torque * z2)
            _twist(link_body, Rw, fext, la, -torque * z0, -torque * z1, -torque * z2)
        elif kind == BUSHING:
            _bushing(link_R, link_p, link_body, Rw, pw, vel, fext, f, la, lb, R1, R2)
        elif kind == LIMIT:
            x, xd = q[ei[I_B]], v[ei[I_A]]
            kup, qup, klo, qlo, damp, trans = f[F_PAR], f[F_PAR + 1], f[F_PAR + 2], f[F_PAR + 3], f[F_PAR + 4], f[F_PAR + 5]
            s_up = _quintic_step(x, qup, qup + trans)
            s_lo = 1.0 - _quintic_step(x, qlo - trans, qlo)
            tau[ei[I_A]] += -kup * s_up * (x - qup) + klo * s_lo * (qlo - x) - damp * (s_up + s_lo) * xd
        elif kind == ACT_COORD or kind == ACT_TORQUE or kind == ACT_POINT:
            if not enabled:
                continue
            force = f[F_PAR] * controls[ei[I_A]]
            if kind == ACT_COORD:
                tau[ei[I_B]] += force
            elif kind == ACT_TORQUE:
                x0, x1, x2 = _world_vector(link_R, -1 if ei[I_B] else la, f, F_FRAME1 + 9)
                _twist(link_body, Rw, fext, la, force * x0, force * x1, force * x2)
                _twist(link_body, Rw, fext, lb, -force * x0, -force * x1, -force * x2)
            else:
                p0, p1, p2 = _world_point(link_R, link_p, -1 if ei[I_B] else la, f, F_FRAME1 + 9)
                x0, x1, x2 = _world_vector(link_R, -1 if ei[I_C] else la, f, F_FRAME2 + 9)
                _push(link_body, Rw, pw, fext, la, p0, p1, p2, force * x0, force * x1, force * x2)
        elif kind == LOAD_FORCE or kind == LOAD_TORQUE:
            scale = 1.0 if ei[I_FN] < 0 else eval_function(ff, fi, ei[I_FN], time, inputs)[0]
            x0, x1, x2 = _world_vector(link_R, la if ei[I_A] else -1, f, F_FRAME2 + 9)
            if kind == LOAD_TORQUE:
                _twist(link_body, Rw, fext, la, scale * x0, scale * x1, scale * x2)
            else:
                p0, p1, p2 = _world_point(link_R, link_p, la if ei[I_B] else -1, f, F_FRAME1 + 9)
                _push(link_body, Rw, pw, fext, la, p0, p1, p2, scale * x0, scale * x1, scale * x2)
        elif kind == MOTOR and ei[I_B] == DRIVE_FORCE:
            value = eval_function(ff, fi, ei[I_FN], time, inputs)[0]
            _world_rotation(link_R, la, f, F_FRAME1, R1)
            z0, z1, z2 = value * R1[0, 2], value * R1[1, 2], value * R1[2, 2]
            if ei[I_A] == MOTOR_ROTATION:
                _twist(link_body, Rw, fext, lb, z0, z1, z2)
                _twist(link_body, Rw, fext, la, -z0, -z1, -z2)
            else:
                # action and reaction at frame2's origin: no moment from the pair
                p0, p1, p2 = _world_point(link_R, link_p, lb, f, F_FRAME2 + 9)
                _push(link_body, Rw, pw, fext, lb, p0, p1, p2, z0, z1, z2)
                _push(link_body, Rw, pw, fext, la, p0, p1, p2, -z0, -z1, -z2)


@inline
def _body_of(t, link):
    return -1 if link < 0 else t.link_body[link]


@internal
def drive_rows(t, d, s, fe, q, v, m, time, joint_erp, dt):
    """The bilateral rows of position and speed motors and of coordinate couplers, from row m
    on, at the step's start pose (after link_poses); returns the next free row."""
    gain = joint_erp / dt
    inf = math.inf
    link_R, link_p = d.link_R, d.link_p
    R1, R2, p2, z = fe.m3[0], fe.m3[1], fe.v3[0], fe.v3[1]
    for k in range(fe.el_i.shape[0]):
        ei = fe.el_i[k]
        kind = ei[I_KIND]
        if kind == MOTOR and ei[I_B] != DRIVE_FORCE:
            f = fe.el_f[k]
            la, lb = ei[I_LA], ei[I_LB]
            _world_rotation(link_R, la, f, F_FRAME1, R1)
            _world_rotation(link_R, lb, f, F_FRAME2, R2)
            a0, a1, a2 = _world_point(link_R, link_p, la, f, F_FRAME1 + 9)
            p2[0], p2[1], p2[2] = _world_point(link_R, link_p, lb, f, F_FRAME2 + 9)
            for a in range(3):
                z[a] = R1[a, 2]
            J = s.J[m]
            J[:] = 0.0
            if ei[I_A] == MOTOR_ROTATION:
                # rate about z1: z1 . (w2 - w1)
                x = _rotation_angle(fe.es[k], R1, R2, True)
                accumulate_angular(t, d, _body_of(t, lb), z, 1.0, J)
                accumulate_angular(t, d, _body_of(t, la), z, -1.0, J)
            else:
                # z1 . (p2 - p1), z1 fixed on link1: its rate is z1 . (v2(p2) - v1(p2))
                x = z[0] * (p2[0] - a0) + z[1] * (p2[1] - a1) + z[2] * (p2[2] - a2)
                accumulate_linear(t, d, _body_of(t, lb), p2, z, 1.0, J)
                accumulate_linear(t, d, _body_of(t, la), p2, z, -1.0, J)
            st = fe.es[k]
            f0 = eval_function(fe.ff, fe.fi, ei[I_FN], time, fe.inputs)[0]
            f1 = eval_function(fe.ff, fe.fi, ei[I_FN], time + dt, fe.inputs)[0]
            if ei[I_B] == DRIVE_POSITION:
                target = (f1 - f0) / dt - gain * (x - f0)
            else:
                if st[S_REF_INIT] == 0.0:     # the speed reference starts where the motor is
                    st[S_REF] = x
                    st[S_REF_INIT] = 1.0
                target = f1 - gain * (x - st[S_REF])
                st[S_REF] += dt * f1
            set_row(s, m, ROW_MOTOR, k, target, -inf, inf, -1)
            m += 1
        elif kind == COUPLER:
            dv, dq, iv, iq = ei[I_A], ei[I_B], ei[I_C], ei[I_FN2]
            y, dy, ddy = eval_function(fe.ff, fe.fi, ei[I_FN], q[iq], fe.inputs)
            J = s.J[m]
            J[:] = 0.0
            J[dv] = 1.0
            J[iv] -= dy
            # q_dep(t + dt) = f(q_ind(t + dt)) to second order: f's curvature over the step
            target = -gain * (q[dq] - y) + 0.5 * ddy * dt * v[iv] * v[iv]
            set_row(s, m, ROW_COUPLER, k, target, -inf, inf, -1)
            m += 1
    return m


@internal
def stop_rows(t, d, s, fe, v, m, joint_erp, dt):
    """One-sided rows of the springs' length stops, active when this step's velocity would
    cross a stop (speculative, as joint limits); returns the next free row."""
    inf = math.inf
    for k in range(fe.el_i.shape[0]):
        ei = fe.el_i[k]
        if ei[I_KIND] != SPRING:
            continue
        f = fe.el_f[k]
        lo, hi = f[F_PAR + 4], f[F_PAR + 5]
        if lo == -inf and hi == inf:
            continue
        la, lb = ei[I_LA], ei[I_LB]
        p1, p2, u = fe.v3[0], fe.v3[1], fe.v3[2]
        p1[0], p1[1], p1[2] = _world_point(d.link_R, d.link_p, la, f, F_FRAME1 + 9)
        p2[0], p2[1], p2[2] = _world_point(d.link_R, d.link_p, lb, f, F_FRAME2 + 9)
        for a in range(3):
            u[a] = p2[a] - p1[a]
        length = math.sqrt(u[0] * u[0] + u[1] * u[1] + u[2] * u[2])
        if length < 1e-12:
            continue
        for a in range(3):
            u[a] /= length
        # the length's rate: u . (v2(p2) - v1(p1))
        J = s.J[m]
        J[:] = 0.0
        accumulate_linear(t, d, _body_of(t, lb), p2, u, 1.0, J)
        accumulate_linear(t, d, _body_of(t, la), p1, u, -1.0, J)
        rate = 0.0
        for j in range(v.shape[0]):
            rate += J[j] * v[j]
        gap = hi - length
        if gap - dt * rate < 0.0:
            for j in range(v.shape[0]):
                J[j] = -J[j]
        else:
            gap = length - lo
            if gap + dt * rate >= 0.0:
                continue
        target = -gap / dt if gap >= 0.0 else -joint_erp * gap / dt
        set_row(s, m, ROW_STOP, k, target, 0.0, inf, -1)
        m += 1
    return m
