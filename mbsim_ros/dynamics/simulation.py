"""Simulation: compiled models plus a mutable state, stepped by one numba call per step()."""
import warnings
from dataclasses import dataclass

import numpy as np

from .._kernel_cache import warm_up
from ..model import Model, SimulationError
from . import kernels
from .api import transforms_dict
from .collision import compile_geoms
from .compiled import compile_models
from .constraints import (CONTACT_LCP, OPTIONS_DEFAULTS, STAT_DROPPED, STAT_FAILURES, STAT_FALLBACKS,
                          STAT_NCON, STAT_ROWS, STAT_STATUS, ConstraintSet, options_array)
from .forces import H_ENABLED, ForceSet
from .step import applied_forces_kernel, step_rk4, step_semi_implicit_euler

INTEGRATORS = {"semi-implicit-euler": step_semi_implicit_euler, "rk4": step_rk4}


@dataclass
class Contact:
    """One contact of the last step, world frame: `force` acts on `link_a` at `point` (link_b
    gets its opposite); `normal` points from link_b into link_a; `depth` is the penetration."""
    link_a: str
    link_b: str
    point: np.ndarray
    normal: np.ndarray
    force: np.ndarray
    depth: float


class Simulation:
    """Fixed-step simulation of one Model or several (a robot plus environment models).

    With several models, q, v and tau concatenate theirs in the order given. State starts at
    the models' initial q and v; gravity comes from the first model's `gravity` (all models
    must agree). The semi-implicit Euler integrator (DART's step) integrates joint springs and
    dampers implicitly and enforces contacts, joint limits, velocity and effort limits, locked
    joints and loop closures with a boxed LCP (constraints.py). RK4 integrates smooth forces
    only: it takes penalty contact and refuses worlds with constraints.

    The models' force elements, actuators, body loads, motors and coordinate couplers act in
    every step (forces.py): actuators by their controls (set_control, controls,
    actuators_enabled), `input` functions by set_input, time functions by the simulation time.

    contact: "lcp" (DART's velocity-level contact), "penalty" (Chrono SMC-style spring-damper),
    "none", or None for what the models ask (Model.contact_method), else "lcp".
    max_contacts: contacts the LCP takes per step (the deepest; the rest are counted in stats()).
    Solver options, with DART's defaults: erp 0.01, max_erv 1e-3 m/s and cfm 1e-5 for contacts;
    joint_erp 0.2 for limits, locks and loops; bounce_velocity 0.1 m/s (restitution applies
    above it); contact_margin 0 m; contact_stiffness 1e5 N/m and contact_damping 1e3 N s/m
    (penalty contact per point); friction_velocity 1e-3 (regularized Coulomb friction, joints
    and penalty contact); pgs_iterations 30, pgs_tolerance 1e-6 (the LCP's fallback).
    """

    def __init__(self, models, dt: float = 0.001, integrator: str = "semi-implicit-euler",
                 contact=None, max_contacts: int = 64, **solver_options):
        self.models = [models] if isinstance(models, Model) else list(models)
        if not self.models:
            raise ValueError("Simulation needs at least one model")
        if not (np.isfinite(dt) and dt > 0):
            raise ValueError(f"dt must be a positive number of seconds, got {dt}")
        if integrator not in INTEGRATORS:
            raise ValueError(f"integrator {integrator!r}: expected one of {', '.join(INTEGRATORS)}")
        if contact is None:
            contact = next((m.contact_method for m in self.models if m.contact_method), "lcp")
        self.dt = float(dt)
        self.integrator = integrator
        self.contact = contact
        self._options = options_array(contact_method=contact, **solver_options)
        self.options = dict(OPTIONS_DEFAULTS, contact_method=contact, **solver_options)
        self._step_kernel = INTEGRATORS[integrator]
        self.compiled = compile_models(self.models)
        self._df, self._data = self.compiled.new_data()
        self.geoms = compile_geoms(self.models, self.compiled)
        self._cf, self._ci, self._contacts = self.geoms.new_workspace()
        self.forces = ForceSet(self.compiled)
        # the kernels' ef: None compiles them without force elements when the world has none
        self._ef = self.forces.ef if self.forces.n else None
        self.constraints = ConstraintSet(self.compiled, self.geoms, int(max_contacts), self.forces)
        self._loops = True if self.constraints.nloop else None    # None: compiled without loop rows
        if integrator == "rk4":
            self._check_smooth()
        self._q = np.zeros(self.compiled.nq)
        self._v = np.zeros(self.compiled.nv)
        self._tau = np.zeros(self.compiled.nv)
        self._failures_reported = 0
        self._af_df, _ = self.compiled.new_data()
        self.reset()
        self._warm = False
        if type(self) is Simulation:    # a subclass warms up once its own parts exist
            self.warm_up()

    def warm_up(self):
        """Compile every kernel this world steps with (or load them from the numba cache), once:
        the constructor calls it, so that no compilation happens later inside a loop that keeps
        time. Says so (_kernel_cache.CompileReport) when anything compiles."""
        if not self._warm:
            warm_up(self._warm_up_jobs())
            self._warm = True

    def _warm_up_jobs(self):
        """[(name, first call)] of this world's kernels (subclasses add theirs)."""
        return [(f"{self.integrator} step", lambda: self.step(0)),
                ("link poses", self.link_transforms)]

    def _check_smooth(self):
        """RK4 has no constraint solver: say what in the world needs one."""
        k = self.constraints
        rules = k.rules
        needs = []
        if np.isfinite(rules.lower).any() or np.isfinite(rules.upper).any():
            needs.append("joint limits")
        if np.isfinite(rules.velocity_limit).any():
            needs.append("velocity limits")
        if rules.locked.any():
            needs.append("locked joints")
        guides = len(self.forces.guide_loops)
        if k.nloop > guides:
            needs.append("loop closures")
        needs += [f"{what} {name!r}" for what, name, _, _ in self.forces.constrained]
        if self._options[0] == CONTACT_LCP and k.max_contacts:
            needs.append("LCP contact (use contact='penalty' or 'none')")
        if needs:
            raise ValueError("integrator 'rk4' integrates smooth forces only; this world has "
                             + ", ".join(needs) + ": use integrator='semi-implicit-euler'")

    # -- state ------------------------------------------------------------------------
    @property
    def q(self) -> np.ndarray:
        """Generalized positions (a view: write into it to set the state)."""
        return self._q

    @q.setter
    def q(self, value):
        self._q[:] = value

    @property
    def v(self) -> np.ndarray:
        return self._v

    @v.setter
    def v(self, value):
        self._v[:] = value

    @property
    def tau(self) -> np.ndarray:
        """Applied generalized forces, held until changed (clamped to the effort limits)."""
        return self._tau

    @tau.setter
    def tau(self, value):
        self._tau[:] = value

    @property
    def t(self) -> float:
        return self._steps * self.dt

    @property
    def friction_velocity(self) -> float:
        """Below this speed Coulomb friction (joints, penalty contact) acts as a damper."""
        return float(self.options["friction_velocity"])

    @property
    def nq(self) -> int:
        return self.compiled.nq

    @property
    def nv(self) -> int:
        return self.compiled.nv

    def reset(self):
        """Back to t = 0, the models' initial q and v, zero applied forces, no contacts, the
        actuators' initial controls (actuators on), inputs 0, force element states cleared."""
        self._q[:] = np.concatenate([m.initial_q() for m in self.models])
        self._v[:] = np.concatenate([m.initial_v() for m in self.models])
        self._tau[:] = 0.0
        self._steps = 0
        self.constraints.sf[:] = 0.0
        self.constraints.si[:] = 0
        self.forces.reset()

    # -- actuators and inputs -----------------------------------------------------------
    @property
    def actuator_names(self) -> list:
        """The models' actuators in order (the order of `controls`)."""
        return list(self.forces.actuator_names)

    def set_control(self, name: str, value: float):
        """Set one actuator's control (its force is gain * control), clamped to its range.
        KeyError naming the actuators if there is none by that name."""
        self.forces.set_control(name, value)

    @property
    def controls(self) -> np.ndarray:
        """Every actuator's control, in actuator_names order (a copy; assign to set them all)."""
        return self.forces.controls

    @controls.setter
    def controls(self, values):
        self.forces.set_controls(values)

    @property
    def actuators_enabled(self) -> bool:
        """One switch for every actuator (Chrono's ActivateActuators): when off, they apply nothing."""
        return bool(self.forces.forces.flags[H_ENABLED])

    @actuators_enabled.setter
    def actuators_enabled(self, on: bool):
        self.forces.forces.flags[H_ENABLED] = int(bool(on))

    @property
    def input_names(self) -> list:
        """The run-time inputs the models' `input` functions read (Chrono CONTROLLER functions)."""
        return list(self.forces.input_names)

    def set_input(self, name: str, value: float):
        """Set a run-time input (0 until set). KeyError naming the inputs if there is none by that name."""
        self.forces.set_input(name, value)

    def applied_forces(self) -> np.ndarray:
        """The generalized force (nv) of every force element, actuator, body load and force
        motor at the current state and time (constraint rows and joint springs not included)."""
        c = self.compiled
        out = np.zeros(c.nv)
        applied_forces_kernel(c.tf, c.ti, self._af_df, self.forces.ef, self.forces.ei, self._q, self._v,
                              self.t, np.zeros(c.nv), out)
        return out

    # -- stepping ---------------------------------------------------------------------
    def step(self, n: int = 1):
        """Advance n steps of dt. Raises SimulationError (state left at the last finite step)
        if a coordinate becomes NaN or infinite."""
        self.compiled.tree.gravity[:] = self.models[0].gravity
        c, k = self.compiled, self.constraints
        f = self.forces
        done, bad = self._step_kernel(c.tf, c.ti, self._df, self.geoms.gf, self.geoms.gi, self._cf,
                                      self._ci, k.rf, k.ri, k.sf, k.si, k.lf, k.li, self._ef, f.ei, k.sizes,
                                      self._options, self._q, self._v, self._tau, self._steps * self.dt,
                                      self.dt, int(n), self._loops)
        self._steps += done
        if bad >= 0:
            joint = self.compiled.joint_of_v[bad]
            raise SimulationError(
                f"the simulation blew up at t = {self.t + self.dt:.6g} s: joint {joint!r} went "
                f"non-finite first (state kept at t = {self.t:.6g} s; check its inertia, limits, "
                f"stiffness and the time step dt = {self.dt})")
        if self._failures_reported == 0 and k.solver.stats[STAT_FAILURES] > 0:
            self._failures_reported = 1
            warnings.warn(f"{self.models[0].name}: the constraint solver did not converge at some step "
                          f"up to t = {self.t:.6g} s; contacts or loop closures may be violated there "
                          "(Simulation.stats() counts them)", RuntimeWarning, stacklevel=2)

    # -- views ------------------------------------------------------------------------
    def link_transforms(self):
        """{link name: 4x4 world transform} at the current state (all models)."""
        c = self.compiled
        kernels.kinematics_kernel(c.tf, c.ti, self._df, self._q, self._v)
        return transforms_dict(c, self._data)

    def contacts(self):
        """The contacts of the last step (detected at its start), with the force each applied."""
        s, cw = self.constraints.solver, self._contacts
        ncon = int(s.stats[STAT_NCON])
        if self.options["contact_method"] == "lcp":
            ncon = min(ncon, self.constraints.max_contacts)
        names = self.compiled.link_names
        out = []
        for k in range(ncon):
            i = int(s.csel[k])
            out.append(Contact(names[cw.link[i, 0]], names[cw.link[i, 1]], cw.point[i].copy(),
                               cw.normal[i].copy(), s.cforce[k].copy(), float(cw.depth[i])))
        return out

    def stats(self):
        """Solver counters of the last step and totals: contacts, rows, LCP status (0 Dantzig,
        1 PGS fallback, 2 not converged), fallbacks and failures so far, contacts dropped."""
        s = self.constraints.solver.stats
        return dict(contacts=int(s[STAT_NCON]), rows=int(s[STAT_ROWS]), lcp_status=int(s[STAT_STATUS]),
                    pgs_fallbacks=int(s[STAT_FALLBACKS]), pgs_failures=int(s[STAT_FAILURES]),
                    contacts_dropped=int(s[STAT_DROPPED]))
