"""BatchSimulation: n worlds of one model, their state in arrays with a leading world axis,
stepped by one kernel call across the cores (step.py's batch kernels: a parallel range over
the worlds, each world through the one-world step kernel with workspaces of its own, so a batch
computes bit for bit what n separate Simulations compute).
(No kernels here: this file stays out of the kernel cache's source digest, _kernel_cache.py.)"""
import numpy as np

from .._kernel_cache import warm_up
from ..model import SimulationError
from . import kernels
from .constraints import CONTACT_PENALTY, STAT_NCON, STAT_ROWS
from .physics import POSES_ONLY, Physics, StateArray
from .step import step_batch_rk4, step_batch_semi_implicit_euler, world_addresses

BATCH_INTEGRATORS = {"semi-implicit-euler": step_batch_semi_implicit_euler, "rk4": step_batch_rk4}


def _rows(buffer, n):
    """n C-contiguous copies of a one-world buffer, one per row (always a new, writable array:
    ascontiguousarray would hand back the read-only broadcast view itself for n = 1)."""
    return np.repeat(buffer[np.newaxis], n, axis=0)


def _slice_in(buffer, view):
    """The slice of the 1-d `buffer` that the contiguous `view` (carved from it) occupies."""
    start = (view.ctypes.data - buffer.ctypes.data) // buffer.itemsize
    assert 0 <= start and start + view.size <= buffer.size, "view not carved from buffer"
    return slice(start, start + view.size)


def _shared(p):
    """The bundles every world of a batch shares (the step only reads them), flattened, with the
    lock positions of the DOFs that are not locked zeroed (the rules keep every joint's q0 there;
    the step reads it only for locked DOFs)."""
    c, k = p.compiled, p.constraints
    p.compiled.tree.gravity[:] = p.models[0].gravity       # as step() leaves it
    rf, ri, sizes = k.rule_buffers
    rf = rf.copy()
    rf[_slice_in(k.rule_buffers[0], k.rules.lock_q)][k.rules.locked == 0] = 0.0
    return [*c.buffers, *p.geoms.buffers, rf, ri, sizes, p._options]


def _per_world_buffers(p):
    """A one-world Physics' state and workspaces, in BatchSimulation._per_world's order."""
    return [p._q, p._v, p._tau, p._df, *p._contact_buffers, *p.constraints.solver_buffers, *p.forces.buffers]


def _same_bits(a, b):
    """Equal dtype, shape and bytes (NaN equals NaN, -0.0 differs from 0.0)."""
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


class BatchSimulation:
    """n_worlds copies of one world (one Model or several, as Physics takes them), each with
    its own state, controls and inputs, stepped together: `step()` is one kernel call that
    spreads the worlds over the kernels' threads (one per core unless NUMBA_NUM_THREADS says
    otherwise; set_num_threads of the JIT package changes it at run time).

    Every argument after n_worlds is Physics' (dt, integrator, contact, solver options,
    poses, names, massless_armature) and means the same. All worlds start at the assembled
    initial state; then set each world's row:

        batch = mb.BatchSimulation(model, 64, dt=0.001)
        batch.q[:, 7:] += 0.1 * rng.standard_normal((64, model.nq - 7))
        batch.tau[:] = torques            # (64, nv), held until changed
        batch.step(1000)
        batch.q, batch.v, batch.acceleration   # (64, nq), (64, nv), (64, nv)

    World w computes exactly (bit for bit) what a Physics of the same models given world w's
    state, tau, controls and inputs computes. `prototype` is a one-world Physics of the
    models: names, models, compiled arrays, link lookups (its own state is not the batch's).
    Sensors (cameras, IMUs, noise, rates) are not simulated per world; the batch gives the
    dynamics' outputs (state, the last step's acceleration, link poses, contact counts)."""

    def __init__(self, models, n_worlds: int, dt: float = 0.001, integrator: str = "semi-implicit-euler",
                 contact=None, max_contacts: int = 64, poses=None, names=None, massless_armature: float = 0.0,
                 **solver_options):
        if isinstance(n_worlds, bool) or not isinstance(n_worlds, (int, np.integer)) or n_worlds < 1:
            raise ValueError(f"n_worlds must be a whole number >= 1, got {n_worlds!r}")
        self.prototype = p = Physics(models, dt, integrator, contact, max_contacts, poses, names,
                                        massless_armature, **solver_options)
        n = self.n_worlds = int(n_worlds)
        self.dt, self.integrator, self.contact = p.dt, p.integrator, p.contact
        self._kernel = BATCH_INTEGRATORS[integrator]
        c, k, f = p.compiled, p.constraints, p.forces
        self._q, self._v, self._tau = np.zeros((n, c.nq)), np.zeros((n, c.nv)), np.zeros((n, c.nv))
        # the per-world bundles of step.py's batch kernels: the one-world ones with a world axis
        self._df = _rows(p._df, n)
        self._contact_buffers = tuple(_rows(x, n) for x in p._contact_buffers)
        self._solver_buffers = tuple(_rows(x, n) for x in k.solver_buffers)
        self._force_buffers = tuple(_rows(x, n) for x in f.buffers)
        self._sf, self._si = self._solver_buffers[:2]
        self._ef, self._ei = self._force_buffers
        self._a_step = _slice_in(p._df, p._data.a_step)
        self._controls = _slice_in(f.ef, f.forces.controls[:len(f.actuator_names)])
        self._inputs = _slice_in(f.ef, f.forces.inputs[:len(f.input_names)])
        self._ncon = _slice_in(k.si, k.solver.stats[STAT_NCON:STAT_NCON + 1]).start
        self._nrows = _slice_in(k.si, k.solver.stats[STAT_ROWS:STAT_ROWS + 1]).start
        # each world's buffers by address (step.world_addresses): the model's shared ones, its own rows
        self._worlds = np.stack([world_addresses(c.buffers, self._df[w], p.geoms.buffers,
                                                 tuple(x[w] for x in self._contact_buffers), k.rule_buffers,
                                                 tuple(x[w] for x in self._solver_buffers), p._options,
                                                 self._q[w], self._v[w], self._tau[w])
                                 for w in range(n)])
        self._steps = np.zeros(n, dtype=np.int64)
        self._done, self._bad = np.zeros(n, dtype=np.int64), np.full(n, -1, dtype=np.int64)
        self._stats = self._si[:, _slice_in(k.si, k.solver.stats)]
        self._cforce = self._sf[:, _slice_in(k.sf, k.solver.cforce)].reshape((n,) + k.solver.cforce.shape)
        assert np.shares_memory(self._cforce, self._sf), "the contact forces must be a view"
        self._t0 = np.zeros(n)
        self._pose_df, self._pose_data = c.new_data()
        self.reset()
        warm_up([(f"{integrator} step, {n} worlds", lambda: self.step(0))])

    # -- state ------------------------------------------------------------------------------
    q = StateArray("_q", "(n_worlds, nq) generalized positions (a view: write into it to set the state).")
    v = StateArray("_v", "(n_worlds, nv) generalized velocities (a view).")
    tau = StateArray("_tau", "(n_worlds, nv) applied generalized forces, held until changed (a view; "
                             "clamped to the effort limits when applied).")

    @property
    def t(self) -> np.ndarray:
        """(n_worlds,) each world's time (equal unless a world blew up, SimulationError)."""
        return self._steps * self.dt

    @property
    def nq(self) -> int:
        return self.prototype.nq

    @property
    def nv(self) -> int:
        return self.prototype.nv

    @property
    def acceleration(self) -> np.ndarray:
        """(n_worlds, nv): the acceleration the last step applied, (v+ - v) / dt (a copy)."""
        return self._df[:, self._a_step].copy()

    # -- actuators and inputs ---------------------------------------------------------------
    @property
    def actuator_names(self) -> list:
        return self.prototype.actuator_names

    @property
    def controls(self) -> np.ndarray:
        """(n_worlds, actuators): every world's actuator controls (a copy; assign an array of
        that shape, or one row for every world, to set them: clamped to each actuator's range)."""
        return self._ef[:, self._controls].copy()

    @controls.setter
    def controls(self, values):
        values = np.asarray(values, dtype=float)
        shape = (self.n_worlds, len(self.actuator_names))
        if values.shape not in (shape, shape[1:]):
            raise ValueError(f"controls: expected shape {shape} or {shape[1:]} (worlds x actuators: "
                             f"{', '.join(self.actuator_names) or 'none'}), got {values.shape}")
        self._ef[:, self._controls] = self.prototype.forces.clip_controls(values)

    def set_control(self, name: str, values):
        """Set one actuator's control in every world: one value, or one per world (clamped to
        its range, as Simulation.set_control)."""
        if name not in self.actuator_names:
            raise KeyError(f"no actuator named {name!r}; the actuators are {', '.join(self.actuator_names) or 'none'}")
        k = self.actuator_names.index(name)
        controls = self.controls
        controls[:, k] = values               # only this actuator's column changes
        self._ef[:, self._controls.start + k] = self.prototype.forces.clip_controls(controls)[:, k]

    @property
    def input_names(self) -> list:
        return self.prototype.input_names

    def set_input(self, name: str, values):
        """Set a run-time input in every world: one value, or one per world."""
        if name not in self.input_names:
            raise KeyError(f"no input named {name!r}; the inputs are {', '.join(self.input_names) or 'none'}")
        values = np.broadcast_to(np.asarray(values, dtype=float), (self.n_worlds,))
        if not np.all(np.isfinite(values)):
            raise ValueError(f"input {name!r}: expected finite numbers, got {values.tolist()}")
        self._ef[:, self._inputs.start + self.input_names.index(name)] = values

    # -- stepping ---------------------------------------------------------------------------
    def reset(self, worlds=None):
        """Worlds (all, or the given indices) back to Physics.reset()'s state: t = 0, the
        assembled initial q and v, zero tau, the initial controls, inputs 0, no contacts."""
        p = self.prototype
        p.reset()
        rows = slice(None) if worlds is None else np.asarray(worlds, dtype=np.int64)
        self._q[rows], self._v[rows], self._tau[rows] = p.q, p.v, p.tau
        self._sf[rows], self._si[rows] = p.constraints.sf, p.constraints.si
        self._ef[rows], self._ei[rows] = p.forces.ef, p.forces.ei
        self._steps[rows] = 0

    def step(self, n: int = 1):
        """Advance every world n steps of dt in one kernel call. A world that becomes NaN or
        infinite stops at its last finite state (its `t` stays there) while the others go on;
        then SimulationError names the worlds and joints."""
        p = self.prototype
        p.compiled.tree.gravity[:] = p.models[0].gravity
        c, k = p.compiled, p.constraints
        np.multiply(self._steps, self.dt, out=self._t0)
        self._kernel(self._worlds, self._force_buffers if p.forces.n else None, self._t0, self.dt, int(n),
                     True if k.nloop else None, True if p._options[0] == CONTACT_PENALTY else None, self._done,
                     self._bad)
        self._steps += self._done
        failed = np.nonzero(self._bad >= 0)[0]
        if failed.size:
            which = ", ".join(f"world {w} (joint {c.joint_of_v[self._bad[w]]!r}, kept at t = {self.t[w]:.6g} s)"
                              for w in failed[:5])
            raise SimulationError(f"{failed.size} of {self.n_worlds} worlds blew up: {which}"
                                  f"{' ...' if failed.size > 5 else ''}; check the states and controls "
                                  f"given to them and the time step dt = {self.dt}")

    def set_world(self, w: int, physics):
        """World w continues from where `physics` (a one-world Physics or Simulation of the same
        world) is: its time, state, applied forces, controls, inputs, actuator switch, contact
        warm starts, solver and force element states. From then on world w computes bit for
        bit what `physics` would (given the same tau, controls and inputs). ValueError when it is
        another world: its compiled model, geometry, constraint rules (a locked joint's position
        included), solver options, dt or integrator differ from the prototype's."""
        p = self.prototype
        theirs, ours = _shared(physics), _shared(p)
        if (physics.dt, physics.integrator, physics.forces.n) != (self.dt, self.integrator, p.forces.n) or \
                len(theirs) != len(ours) or not all(_same_bits(a, b) for a, b in zip(theirs, ours)):
            raise ValueError("set_world: not the same world as the batch's (compiled model, geometry, constraint "
                             "rules, solver options, dt or integrator differ)")
        mine = self._per_world(w)
        given = _per_world_buffers(physics)
        if [a.shape for a in mine] != [a.shape for a in given]:
            raise ValueError("set_world: not the same world as the batch's (workspace sizes differ)")
        for a, b in zip(mine, given):
            a[...] = b
        self._steps[w] = physics._steps

    def _per_world(self, w):
        rows = [self._q, self._v, self._tau, self._df, *self._contact_buffers, *self._solver_buffers,
                *self._force_buffers]
        return [a[w] for a in rows]

    @property
    def blown_up(self) -> dict:
        """{world: joint name} of the worlds that went non-finite in the last step() call (the
        joint that went first), empty after a clean step."""
        joint_of_v = self.prototype.compiled.joint_of_v
        return {int(w): joint_of_v[self._bad[w]] for w in np.nonzero(self._bad >= 0)[0]}

    def solver_arrays(self):
        """(stats, cforce): views (not copies) of every world's constraint solver statistics,
        (n_worlds, constraints.STAT_* count), and contact forces, (n_worlds, max_contacts, 3),
        as a Simulation's constraints.solver.stats and .cforce; read them between steps."""
        return self._stats, self._cforce

    # -- outputs ----------------------------------------------------------------------------
    def contact_counts(self) -> np.ndarray:
        """(n_worlds,) contacts each world detected at its last step's start."""
        return self._si[:, self._ncon].copy()

    def constraint_rows(self) -> np.ndarray:
        """(n_worlds,) constraint rows each world solved in its last step."""
        return self._si[:, self._nrows].copy()

    def link_poses(self):
        """(R (n_worlds, nl, 3, 3), p (n_worlds, nl, 3)): every world's link poses at its current
        state, in prototype.compiled.link_names order (new arrays)."""
        c, d = self.prototype.compiled, self._pose_data
        nl = len(c.link_names)
        R, pos = np.empty((self.n_worlds, nl, 3, 3)), np.empty((self.n_worlds, nl, 3))
        for w in range(self.n_worlds):
            kernels.kinematics_kernel(c.tf, c.ti, self._pose_df, self._q[w], POSES_ONLY)
            R[w], pos[w] = d.link_R, d.link_p
        return R, pos
