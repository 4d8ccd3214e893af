"""Physics: compiled models plus a mutable state, stepped by one kernel call per step().
(No kernels here: this file stays out of the kernel cache's source digest, _kernel_cache.py.)"""
import warnings
from dataclasses import dataclass

import numpy as np

from .._kernel_cache import warm_up
from ..model import Model, SimulationError
from ..model.names import WorldNames, check_entity_name, unique_entity_names
from ..model.transforms import inverse_transform
from . import kernels
from .api import transforms_dict
from .collision.geoms import compile_geoms
from .assembly import ASSEMBLY_TOL, assemble
from .compiled import (MASSLESS_BOUND, bound_massless_leaves, check_movable, compile_models, constrained_massless,
                       massless_joints)
from .direct import DirectCall
from .constraints import (CONTACT_LCP, CONTACT_PENALTY, OPTIONS_DEFAULTS, STAT_DROPPED, STAT_FAILURES,
                          STAT_FALLBACKS, STAT_GS_SWEEPS, STAT_GS_UNCONVERGED, STAT_NCON, STAT_ROWS, STAT_STATUS, ConstraintSet,
                          options_array)
from .forces import H_ENABLED, ForceSet
from .step import applied_forces_kernel, step_rk4, step_semi_implicit_euler, world_addresses

ASSEMBLY_NOTE = 1e-6      # a coordinate the initial assembly moves further than this is named in a note
INTEGRATORS = {"semi-implicit-euler": step_semi_implicit_euler, "rk4": step_rk4}
POSES_ONLY = np.zeros(0)  # kinematics_kernel's v for the link poses alone (no velocities: /tf, rendering)


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


class StateArray:
    """A state array read as a view and assigned in place (sim.q = x writes into the kernels'
    own buffer, which the compiled step keeps reading)."""

    def __init__(self, attr: str, doc: str):
        self.attr, self.__doc__ = attr, doc

    def __get__(self, obj, owner=None):
        return self if obj is None else getattr(obj, self.attr)

    def __set__(self, obj, value):
        getattr(obj, self.attr)[:] = value


class Physics:
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
    poses: each model's world frame in the world (a list with one pose or None per model, or
    {entity name: pose}; a pose is (xyz, quaternion xyzw) or a 4x4); names: each model's entity
    name (a list, None entries = the model's name). Entity names are unique: repeats get _2, _3.
    Names of links, joints, sensors and actuators are scoped per model (model/names.py).
    max_contacts: contacts the LCP takes per step (the deepest; the rest are counted in stats()).
    Solver options, with DART's defaults: erp 0.01, max_erv 1e-3 m/s and cfm 1e-5 for contacts;
    joint_erp 0.2 for limits, locks and loops; bounce_velocity 0.1 m/s (restitution applies
    above it); contact_margin 0 m; contact_stiffness 1e5 N/m and contact_damping 1e3 N s/m
    (penalty contact per point); friction_velocity 1e-3 (regularized Coulomb friction, joints
    and penalty contact); pgs_iterations 30, pgs_tolerance 1e-6 (the pivoting LCP's fallback);
    iterative_rows 30, iterative_sweeps 10, iterative_tolerance 1e-4: problems of at least
    iterative_rows rows, none bilateral, go to warm-started Gauss-Seidel first (gauss_seidel.py), to the
    pivoting LCP when it did not converge in iterative_sweeps sweeps.

    A joint that moves only links with no mass or inertia (and has no rotor inertia) has no
    acceleration under forces. Where those links are a leaf no constraint touches (a gripper
    finger without <inertial>), they get 1 % of the mass and inertia of the body they hang from
    (compiled.bound_massless_leaves, a note in `notes`) unless bound_massless=False; a world
    with such joints left is a ModelError naming them, unless massless_armature > 0 (kg m^2 or
    kg, as MuJoCo's armature) opts in to give exactly those DOFs that armature (a note).

    The initial q is assembled: moved least onto the loop closures (loops, OpenSim constraints,
    Chrono loop joints) to assembly.ASSEMBLY_TOL, locked DOFs held, as OpenSim's initSystem and
    Chrono do; a note names each coordinate moved by more than 1e-6.

    `notes`: what the construction changed, each also a UserWarning.
    """

    def __init__(self, models, dt: float = 0.001, integrator: str = "semi-implicit-euler",
                 contact=None, max_contacts: int = 64, poses=None, names=None, massless_armature: float = 0.0,
                 bound_massless: bool = True, **solver_options):
        models = [models] if isinstance(models, Model) else list(models)
        if not models:
            raise ValueError("a simulation needs at least one model")
        if not (np.isfinite(dt) and dt > 0):
            raise ValueError(f"dt must be a positive number of seconds, got {dt}")
        if integrator not in INTEGRATORS:
            raise ValueError(f"integrator {integrator!r}: expected one of {', '.join(INTEGRATORS)}")
        if contact is None:
            contact = next((m.contact_method for m in models if m.contact_method), "lcp")
        self.dt = float(dt)
        self.integrator = integrator
        self.contact = contact
        self._options = options_array(contact_method=contact, **solver_options)
        self.options = dict(OPTIONS_DEFAULTS, contact_method=contact, **solver_options)
        self._step_kernel = INTEGRATORS[integrator]
        self._max_contacts = int(max_contacts)
        self._massless_armature = float(massless_armature)
        self._bound_massless = bool(bound_massless)
        if not (np.isfinite(self._massless_armature) and self._massless_armature >= 0):
            raise ValueError(f"massless_armature must be a finite number >= 0, got {massless_armature}")
        self.notes = []
        entities = unique_entity_names([n or m.name for n, m in zip(names or [None] * len(models), models)])
        if poses is None:
            poses = [None] * len(models)
        elif isinstance(poses, dict):
            unknown = sorted(set(poses) - set(entities))
            if unknown:
                raise ValueError(f"poses: no model named {', '.join(unknown)}; the models are {', '.join(entities)}")
            poses = [poses.get(e) for e in entities]
        elif len(poses) != len(models):
            raise ValueError(f"poses: expected one pose (or None) per model, {len(models)}, got {len(poses)}")
        placements = [_placement(p, m) for p, m in zip(poses, models)]
        self._install(models, entities, WorldNames(zip(entities, models)), placements)
        self._adopt_state(np.zeros(self.compiled.nq), np.zeros(self.compiled.nv), np.zeros(self.compiled.nv))
        self._failures_reported = 0
        self.reset()
        self._warm = False
        if type(self) is Physics:    # a subclass warms up once its own parts exist
            self.warm_up()

    def warm_up(self):
        """Compile every kernel this world steps with (or load them from the kernel cache), once:
        the constructor calls it, so that no compilation happens later inside a loop that keeps
        time. Says so (_kernel_cache.CompileReport) when anything compiles."""
        if not self._warm:
            warm_up(self._warm_up_jobs())
            self._warm = True

    def _warm_up_jobs(self):
        """[(name, first call)] of this world's kernels (subclasses add theirs)."""
        return [(f"{self.integrator} step", lambda: self.step(0)),
                ("link poses", self.link_transforms)]

    def _install(self, models, entities, names, placements):
        """Compile the world of `models` and make it this simulation's (all or nothing: on an
        error nothing changes)."""
        compiled = compile_models(models, entities, names, placements)
        self._give_massless_armature(compiled, entities)
        geoms = compile_geoms(models, compiled)
        forces = ForceSet(compiled)
        constraints = ConstraintSet(compiled, geoms, self._max_contacts, forces)
        old = {k: getattr(self, k, None) for k in ("models", "entities", "names", "placements", "compiled",
                                                   "geoms", "forces", "constraints")}
        self.models, self.entities, self.names, self.placements = models, entities, names, placements
        self.compiled, self.geoms, self.forces, self.constraints = compiled, geoms, forces, constraints
        if self.integrator == "rk4":
            try:
                self._check_smooth()
            except ValueError:
                for k, value in old.items():
                    setattr(self, k, value)
                raise
        self._df, self._data = compiled.new_data()
        cf, ci, self._contacts = geoms.new_workspace()
        self._contact_buffers = (cf, ci)      # the step kernel's `contacts` bundle
        self._af_df, _ = compiled.new_data()
        self._view_df, self._view_data = compiled.new_data()
        # the step kernel's arguments that stay with this world: its buffers (by address with the
        # state arrays, once they exist: _adopt_state), the force elements and the flags; and its
        # call past the dispatcher: their types are this world's
        self._step_call = DirectCall(self._step_kernel)
        self._step_buffers = (compiled.buffers, self._df, geoms.buffers, self._contact_buffers,
                              constraints.rule_buffers, constraints.solver_buffers, self._options)
        self._world = None
        self._step_forces = self._kernel_forces()
        self._step_loops = True if constraints.nloop else None
        self._step_penalty = True if self._options[0] == CONTACT_PENALTY else None
        self._gravity = models[0].gravity       # the model's own array for good (Model.gravity)
        self._assemble()

    def _adopt_state(self, q, v, tau):
        """Make q, v, tau the state arrays, and the step kernel's `world` the addresses of the
        buffers and of these arrays (kept alive here, in _step_buffers and _q, _v, _tau)."""
        self._q, self._v, self._tau = q, v, tau
        self._world = world_addresses(*self._step_buffers, q, v, tau)

    def _assemble(self):
        """The initial q moved least onto the loop closures (assembly.py), as OpenSim and Chrono
        assemble before they run; a note names the coordinates moved by more than 1e-6."""
        q0 = np.concatenate([m.initial_q() for m in self.models])
        self._initial_q, moved, residual = assemble(self.compiled, self.constraints, q0)
        if residual > ASSEMBLY_TOL:
            self._note(f"initial assembly: the loop closures could not all be met (largest residual "
                       f"{residual:.3g} m or rad); the simulation starts there and pulls them closed")
        names = [n for m in self.models for n in m.dof_names]
        big = [f"{names[i]} by {moved[i]:+.3g}" for i in np.nonzero(np.abs(moved) > ASSEMBLY_NOTE)[0]]
        if big:
            self._note(f"initial assembly onto the loop closures (to {ASSEMBLY_TOL:g}) moved " + ", ".join(big))

    def _note(self, text):
        self.notes.append(text)
        warnings.warn(text, UserWarning, stacklevel=5)

    def _give_massless_armature(self, compiled, entities):
        if not len(compiled.massless_v):
            return
        if self._massless_armature == 0.0 and self._bound_massless:
            grouped = {}            # one note per body the leaves hang from
            for joints, anchor, mass, inertia in bound_massless_leaves(compiled):
                grouped.setdefault((anchor, mass, inertia), []).extend(joints)
            for (anchor, mass, inertia), joints in grouped.items():
                self._note(f"joint{'s' if len(joints) > 1 else ''} {', '.join(joints)} move{'' if len(joints) > 1 else 's'} "
                           f"only links without mass: they get {MASSLESS_BOUND:.0%} of {anchor}'s mass and "
                           f"inertia ({mass:.3g} kg, {inertia:.3g} kg m^2), as MuJoCo bounds light bodies "
                           "(bound_massless off to refuse them, massless_armature for an armature instead)")
        if self._massless_armature == 0.0:
            determined = constrained_massless(compiled)
            check_movable(compiled, f"Simulation of {', '.join(entities)}")
            if determined:
                if self.integrator != "semi-implicit-euler":
                    raise ValueError(f"joints {', '.join(determined)} move only massless links that constraints "
                                     f"determine: the {self.integrator} integrator takes no constraint rows "
                                     "(use semi-implicit-euler)")
                self._note(f"joint{'s' if len(determined) > 1 else ''} {', '.join(determined)} move"
                           f"{'' if len(determined) > 1 else 's'} only massless links that constraints determine: "
                           "solved with the constraints (as Simbody does), no mass added")
        if not len(compiled.massless_v):
            return
        compiled.tree.armature[compiled.massless_v] = self._massless_armature
        names = massless_joints(compiled)
        self._note(f"joint{'s' if len(names) > 1 else ''} {', '.join(names)} move only massless links: "
                   f"armature {self._massless_armature:g} on {'their' if len(names) > 1 else 'its'} DOFs "
                   "(massless_armature)")

    def _kernel_forces(self):
        """The force elements' bundle for the kernels, None when the world has none: the step and
        sensor kernels then compile without forces.py's code. (Likewise the step kernel's
        `loops` argument is None without loop closures.)"""
        return self.forces.buffers if self.forces.n else None

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
        needs += [f"{what} {name!r}" for what, name, _, _, _ in self.forces.constrained]
        if self._options[0] == CONTACT_LCP and k.max_contacts:
            needs.append("LCP contact (use contact='penalty' or 'none')")
        if needs:
            raise ValueError("integrator 'rk4' integrates smooth forces only; this world has "
                             + ", ".join(needs) + ": use integrator='semi-implicit-euler'")

    # -- state ------------------------------------------------------------------------
    q = StateArray("_q", "Generalized positions (a view: write into it to set the state).")
    v = StateArray("_v", "Generalized velocities (a view).")
    tau = StateArray("_tau", "Applied generalized forces, held until changed (clamped to the effort limits).")

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
        """Back to t = 0, the models' initial q (assembled onto the loop closures) and v, zero
        applied forces, no contacts, the actuators' initial controls (actuators on), inputs 0,
        force element states cleared."""
        self._q[:] = self._initial_q
        self._v[:] = np.concatenate([m.initial_v() for m in self.models])
        self._tau[:] = 0.0
        self._steps = 0
        self.constraints.sf[:] = 0.0
        self.constraints.si[:] = 0
        self.forces.reset()

    # -- the world's models (entities) --------------------------------------------------
    @property
    def model_names(self) -> list:
        """The entity names of the world's models, in order (the first model's name first).
        A name qualifies its model's things: "<entity>/<link>" (model/names.py)."""
        return list(self.entities)

    def model(self, name: str) -> Model:
        """The Model of entity `name` (KeyError naming the entities if there is none)."""
        self.names.check_entity(name)
        return self.models[self.entities.index(name)]

    def model_slices(self, name: str):
        """(q slice, v slice) of entity `name`'s coordinates in sim.q and sim.v / sim.tau."""
        self.names.check_entity(name)
        k = self.entities.index(name)
        _, iq, iv = self.compiled.offsets[k]
        return slice(iq, iq + self.models[k].nq), slice(iv, iv + self.models[k].nv)

    def model_pose(self, name: str) -> np.ndarray:
        """The 4x4 world pose of entity `name`'s world frame: the pose it was placed at (add_model,
        `poses`, set_model_pose). Its root links hang from this frame."""
        self.names.check_entity(name)
        return self.placements[self.entities.index(name)].copy()

    def add_model(self, model: Model, name=None, pose=None) -> str:
        """Add `model` to the world, between steps, as entity `name` (default: model.name) with its
        world frame at `pose` ((xyz, quaternion xyzw), a 4x4 matrix, or None for the origin).
        Returns the entity name. ValueError if the name is taken or not a valid name, or the model
        does not compile (nothing changes then).

        The models already in the world keep their state bit for bit (q, v, tau, force element
        states, actuator controls, inputs, sensors' schedules and queues) and their names; time
        goes on. The new model starts at its initial q and v (free joints relative to its world
        frame). Its names that clash with names already taken become "<name>/<thing>"
        (model/names.py). It takes the world's gravity unless it states one (Model.gravity_stated;
        ValueError for another). sim.q, sim.v and sim.tau are new arrays afterwards (re-read them)."""
        if not isinstance(model, Model):
            raise TypeError(f"add_model: expected a Model, got {type(model).__name__}")
        name = model.name if name is None else name
        check_entity_name(name)
        if name in self.entities:
            raise ValueError(f"an entity named {name!r} is already in the world "
                             f"({', '.join(self.entities)}); give the new one another name")
        if not model._finalized:
            model.finalize()
        gravity = self.models[0].gravity          # the world's, fixed when it was built
        if not getattr(model, "gravity_stated", True):
            model.gravity, model.gravity_stated = np.array(gravity, float), False
        elif not np.allclose(model.gravity, gravity):
            raise ValueError(f"{name!r} states gravity {np.asarray(model.gravity).tolist()}; the world's is "
                             f"{np.asarray(gravity).tolist()}")
        placement = _placement(pose, model)
        names = self.names.copy()
        names.add(name, model)
        self._rebuild(self.models + [model], self.entities + [name], names, self.placements + [placement])
        return name

    def remove_model(self, name: str):
        """Remove entity `name` from the world, between steps; the others keep their state and
        names as in add_model. KeyError for an unknown name; ValueError for the last model."""
        self.names.check_entity(name)
        if len(self.entities) == 1:
            raise ValueError(f"cannot remove {name!r}: it is the world's only model")
        k = self.entities.index(name)
        names = self.names.copy()
        names.remove(name)
        keep = [i for i in range(len(self.entities)) if i != k]
        self._rebuild([self.models[i] for i in keep], [self.entities[i] for i in keep], names,
                      [self.placements[i] for i in keep])

    def set_model_pose(self, name: str, pose):
        """Move entity `name`'s world frame to `pose` (as in add_model); its coordinates stay, so
        the whole model moves rigidly. Works for fixed-base models too (the world is recompiled
        with the new placement; the state of every model is kept)."""
        self.names.check_entity(name)
        k = self.entities.index(name)
        placements = list(self.placements)
        placements[k] = _placement(pose, self.models[k])
        self._rebuild(list(self.models), list(self.entities), self.names, placements)

    def _rebuild(self, models, entities, names, placements):
        """Recompile for a new set of models and carry every kept entity's state over."""
        old_entities, old_forces = self.entities, self.forces
        old = {e: (self._q[qs].copy(), self._v[vs].copy(), self._tau[vs].copy())
               for e, (qs, vs) in ((e, self.model_slices(e)) for e in self.entities)}
        self._install(models, entities, names, placements)
        q = self._initial_q.copy()
        v = np.concatenate([m.initial_v() for m in models])
        tau = np.zeros(self.compiled.nv)
        for e in entities:
            if e in old:
                qs, vs = self.model_slices(e)
                q[qs], v[vs], tau[vs] = old[e]
        self._adopt_state(q, v, tau)
        self._rebuilt_at = self._steps
        self.forces.adopt(old_forces, [(k, old_entities.index(e)) for k, e in enumerate(entities)
                                       if e in old_entities])
        self._world_changed(old_entities)
        self._warm = False          # the new world may need other kernels (force elements, sensor kinds)
        self.warm_up()

    def _world_changed(self, old_entities):
        """Called after the world's set of models changed (the sensors' Simulation rebuilds devices)."""

    # -- names and per-link state -----------------------------------------------------
    def resolve(self, kind: str, name: str):
        """(entity, bare name) of a link, joint, sensor or actuator name: qualified
        "<entity>/<name>" always, a bare name when one model alone has it (KeyError listing the
        candidates when several do)."""
        return self.names.resolve(kind, name)

    def world_name(self, kind: str, name: str) -> str:
        """The world name (what every output uses) of a qualified or unambiguous bare name."""
        entity, bare = self.names.resolve(kind, name)
        return self.names.world(entity, kind, bare)

    def _link(self, name):
        entity, bare = self.names.resolve("link", name)
        return self.compiled.link_index(self.entities.index(entity), bare)

    def root_link(self, name: str) -> str:
        """The world name of entity `name`'s first root link (its free or fixed base)."""
        model = self.model(name)
        return self.names.world(name, "link", model.root_links[0])

    def _views(self):
        c, d = self.compiled, self._view_data
        kernels.kinematics_kernel(c.tf, c.ti, self._view_df, self._q, self._v)
        return c, d

    def link_pose(self, link: str) -> np.ndarray:
        """The 4x4 world pose of a link (qualified or unambiguous bare name) at the current state."""
        k = self._link(link)
        c, d = self._views()
        T = np.eye(4)
        T[:3, :3], T[:3, 3] = d.link_R[k], d.link_p[k]
        return T

    def link_twist(self, link: str) -> np.ndarray:
        """(vx, vy, vz, wx, wy, wz): the world-frame linear velocity of the link's origin and its
        angular velocity in the world frame, at the current state."""
        k = self._link(link)
        c, d = self._views()
        b = c.tree.link_body[k]
        if b < 0:
            return np.zeros(6)
        R = d.Rw[b]
        w = R @ d.vel[b, 3:]
        return np.concatenate([R @ d.vel[b, :3] + np.cross(w, d.link_p[k] - d.pw[b]), w])

    def link_acceleration(self, link: str) -> np.ndarray:
        """(ax, ay, az, alpha_x, alpha_y, alpha_z): the world-frame classical acceleration of the
        link's origin and its angular acceleration, over the last step (at its start state, with
        the acceleration the step applied; gravity not included). Zeros before the first step
        (and before the first step after the world changed)."""
        k = self._link(link)
        c, d = self.compiled, self._data
        if self._steps == 0 or self._steps == getattr(self, "_rebuilt_at", -1):
            return np.zeros(6)          # no step since the start or since the world changed
        vd = self._view_data
        kernels.accelerations_kernel(c.tf, c.ti, self._view_df, d.q_prev, d.v_prev, d.a_step)
        b = c.tree.link_body[k]
        if b < 0:
            return np.zeros(6)
        R = vd.Rw[b]
        v_lin, w = vd.vel[b, :3], vd.vel[b, 3:]
        a_lin, alpha = vd.acc[b, :3], vd.acc[b, 3:]
        r = c.tree.link_p[k]
        a_point = a_lin + np.cross(w, v_lin) + np.cross(alpha, r) + np.cross(w, np.cross(w, r))
        return np.concatenate([R @ a_point, R @ alpha])

    def _free_root(self, name):
        model = self.model(name)
        roots = [j for j in model.joints if j.parent is None]
        if len(roots) != 1 or roots[0].type != "free":
            raise ValueError(f"model {name!r} has no single free root joint (its roots: "
                             f"{', '.join(f'{j.name} ({j.type})' for j in roots)}); move it with set_model_pose")
        qs, vs = self.model_slices(name)
        j = roots[0]
        return j, qs.start + j.q_index, vs.start + j.v_index

    def set_root_pose(self, name: str, pose):
        """Teleport entity `name`'s free root link to the world pose `pose` ((xyz, quaternion
        xyzw) or 4x4): sets its free joint's q. ValueError for a model without a free root."""
        j, iq, _ = self._free_root(name)
        T = _as_transform(pose, f"pose of {name!r}")
        k = self.entities.index(name)
        # world = placement @ origin @ J(q) @ inv(child_pose)  =>  J(q) = inv(placement @ origin) @ T @ child_pose
        J = inverse_transform(self.placements[k] @ j.origin) @ T @ j.child_pose
        self._q[iq:iq + 3] = J[:3, 3]
        self._q[iq + 3:iq + 7] = _quat_xyzw(J[:3, :3])

    def set_root_twist(self, name: str, twist):
        """Set entity `name`'s free root link's velocity: twist = (vx, vy, vz, wx, wy, wz), the
        world-frame velocity of its link origin and its world angular velocity."""
        j, iq, iv = self._free_root(name)
        twist = np.asarray(twist, float).reshape(-1)
        if twist.shape != (6,) or not np.all(np.isfinite(twist)):
            raise ValueError(f"twist of {name!r}: expected 6 finite numbers (vx vy vz wx wy wz), got {twist.tolist()}")
        k = self.entities.index(name)
        # the free joint's v is the child-side frame's twist in that frame; the link origin sits
        # at inv(child_pose) in it
        Tw = self.placements[k] @ j.origin          # the joint's parent-side frame in the world
        qj = self._q[iq:iq + 7]
        from ..model.transforms import quat_to_matrix
        Rj = Tw[:3, :3] @ quat_to_matrix(qj[3:])    # the child-side frame's world rotation
        r = Rj @ inverse_transform(j.child_pose)[:3, 3]      # link origin from the frame origin, world
        w = twist[3:]
        v_frame = twist[:3] - np.cross(w, r)
        self._v[iv:iv + 3] = Rj.T @ v_frame
        self._v[iv + 3:iv + 6] = Rj.T @ w

    @property
    def dof_names(self) -> list:
        """World names of every DOF in v order (a ball or free joint's DOFs are <joint>_0 .. _5)."""
        out = []
        for e, m in zip(self.entities, self.models):
            table = self.names.table(e, "joint")
            out += [table[n] for n in m.dof_names]
        return out

    def dof_index(self, name: str):
        """(q index or -1 inside a ball or free joint, v index) of a DOF (qualified or
        unambiguous bare name)."""
        entity, bare = self.names.resolve("joint", name)
        k = self.entities.index(entity)
        model = self.models[k]
        _, q_off, v_off = self.compiled.offsets[k]
        names = model.dof_names
        if bare not in names:
            raise KeyError(f"{entity}/{bare} is a joint with {model.joint(bare).nv} DOFs "
                           f"({', '.join(n for n in names if n.startswith(bare))}); name one DOF")
        iv = names.index(bare)
        j = next(j for j in model.joints if j.v_index <= iv < j.v_index + j.nv)
        iq = -1 if j.type in ("ball", "free") else q_off + j.q_index + (iv - j.v_index)
        return iq, v_off + iv

    def set_joint_positions(self, values: dict):
        """Set DOF positions by name ({name: value}; one-coordinate DOFs only). Names are checked
        before anything is set."""
        idx = [(self.dof_index(n), float(x)) for n, x in dict(values).items()]
        for (iq, _), x in idx:
            if iq < 0:
                raise ValueError("set_joint_positions: a ball or free joint has no single coordinate; "
                                 "use set_root_pose or sim.q")
        for (iq, _), x in idx:
            self._q[iq] = x

    def set_joint_velocities(self, values: dict):
        """Set DOF velocities by name ({name: value})."""
        idx = [(self.dof_index(n)[1], float(x)) for n, x in dict(values).items()]
        for iv, x in idx:
            self._v[iv] = x

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
        applied_forces_kernel(c.buffers, self._af_df, self.forces.buffers, self._q, self._v, self.t,
                              np.zeros(c.nv), out)
        return out

    # -- stepping ---------------------------------------------------------------------
    def step(self, n: int = 1):
        """Advance n steps of dt. Raises SimulationError (state left at the last finite step)
        if a coordinate becomes NaN or infinite."""
        done, bad, failures = self._step_call.call(self._world, self._step_forces, self._steps * self.dt, self.dt,
                                                   int(n), self._step_loops, self._step_penalty, self._gravity)
        self._steps += done
        if bad >= 0:
            raise SimulationError(blow_up_message(self.compiled.joint_of_v[bad], self.t, self.dt))
        if failures and not self._failures_reported:
            self._failures_reported = 1
            warnings.warn(solver_failure_message(self.models[0].name, self.t), RuntimeWarning, stacklevel=2)

    # -- views ------------------------------------------------------------------------
    def link_transforms(self):
        """{link name: 4x4 world transform} at the current state (all models)."""
        c = self.compiled
        kernels.kinematics_kernel(c.tf, c.ti, self._df, self._q, POSES_ONLY)
        return transforms_dict(c, self._data)

    def link_poses(self):
        """(R (nl, 3, 3), p (nl, 3)): every link's world rotation and position at the current
        state, in compiled.link_names order, as arrays (no dict); views into a workspace that the
        next call overwrites: copy what you keep."""
        c = self.compiled
        kernels.kinematics_kernel(c.tf, c.ti, self._df, self._q, POSES_ONLY)
        return self._data.link_R, self._data.link_p

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
        1 PGS fallback, 2 not converged, 3 Gauss-Seidel on a large problem), fallbacks and
        failures so far, contacts dropped, large problems Gauss-Seidel left to Dantzig so far, the
        last Gauss-Seidel's sweeps (-1: not converged)."""
        s = self.constraints.solver.stats
        return dict(contacts=int(s[STAT_NCON]), rows=int(s[STAT_ROWS]), lcp_status=int(s[STAT_STATUS]),
                    pgs_fallbacks=int(s[STAT_FALLBACKS]), pgs_failures=int(s[STAT_FAILURES]),
                    contacts_dropped=int(s[STAT_DROPPED]), iterative_unconverged=int(s[STAT_GS_UNCONVERGED]),
                    iterative_sweeps=int(s[STAT_GS_SWEEPS]))


def blow_up_message(joint, t, dt):
    """What step() says when `joint` went non-finite in the step from t (the state kept at t);
    also BatchSimulation's callers, per world."""
    return (f"the simulation blew up at t = {t + dt:.6g} s: joint {joint!r} went non-finite first (state "
            f"kept at t = {t:.6g} s; check its inertia, limits, stiffness and the time step dt = {dt})")


def solver_failure_message(model_name, t):
    """What step() warns (once) after the constraint solver first failed to converge, by time t."""
    return (f"{model_name}: the constraint solver did not converge at some step up to t = {t:.6g} s; contacts "
            "or loop closures may be violated there (Simulation.stats() counts them)")


def _as_transform(pose, what):
    """A 4x4 from (xyz, quaternion xyzw) or a 4x4 matrix."""
    from ..model.transforms import quat_to_matrix
    try:
        if isinstance(pose, np.ndarray) and pose.shape == (4, 4):
            T = np.asarray(pose, float).copy()
        else:
            xyz, quat = pose
            xyz = np.asarray(xyz, float).reshape(3)
            quat = np.asarray(quat, float).reshape(4)
            n = np.linalg.norm(quat)
            if not np.isfinite(n) or n < 1e-9:
                raise ValueError
            T = np.eye(4)
            T[:3, :3], T[:3, 3] = quat_to_matrix(quat / n), xyz
    except (TypeError, ValueError):
        raise ValueError(f"{what}: expected (xyz, quaternion xyzw) or a 4x4 matrix, got {pose!r}") from None
    if not np.all(np.isfinite(T)) or not np.allclose(T[:3, :3] @ T[:3, :3].T, np.eye(3), atol=1e-6) \
            or not np.allclose(T[3], [0, 0, 0, 1]):
        raise ValueError(f"{what}: not a rigid transform")
    return T


def _placement(pose, model):
    """A model's placement in the world; a model with loops or force elements anchored to the world
    (link None) is refused a pose other than the origin (they are written in world coordinates)."""
    if pose is None:
        return np.eye(4)
    T = _as_transform(pose, f"pose of model {model.name!r}")
    if not np.allclose(T, np.eye(4)):
        anchored = [c.name for c in model.constraints if c.link1 is None or c.link2 is None]
        anchored += [getattr(e, "name", "?") for e in list(model.forces) + list(model.motors)
                     if getattr(e, "link1", "") is None or getattr(e, "link2", "") is None]
        if anchored:
            raise ValueError(f"model {model.name!r}: cannot be placed at a pose: "
                             f"{', '.join(anchored)} are anchored to the world frame")
    return T


def _quat_xyzw(R):
    from ..model.transforms import matrix_to_quat
    return matrix_to_quat(R)
