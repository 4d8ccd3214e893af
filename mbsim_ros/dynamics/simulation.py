"""Simulation: compiled models plus a mutable state, stepped by one numba call per step()."""
import numpy as np

from ..model import Model, SimulationError
from . import kernels
from .api import transforms_dict
from .compiled import compile_models

INTEGRATORS = {
    "semi-implicit-euler": kernels.step_semi_implicit_euler,
    "rk4": kernels.step_rk4,
}


class Simulation:
    """Fixed-step simulation of one Model or several (a robot plus environment models).

    With several models, q, v and tau concatenate theirs in the order given. State starts at
    the models' initial q and v; gravity comes from the first model's `gravity` (all models
    must agree). Joint springs and dampers are integrated implicitly (DART) by the
    semi-implicit Euler integrator and explicitly by RK4; Coulomb joint friction is a
    damper regularized below `friction_velocity` (exact stiction needs the constraint solver).
    """

    def __init__(self, models, dt: float = 0.001, integrator: str = "semi-implicit-euler",
                 friction_velocity: float = 1e-3):
        self.models = [models] if isinstance(models, Model) else list(models)
        if not self.models:
            raise ValueError("Simulation needs at least one model")
        if not (np.isfinite(dt) and dt > 0):
            raise ValueError(f"dt must be a positive number of seconds, got {dt}")
        if integrator not in INTEGRATORS:
            raise ValueError(f"integrator {integrator!r}: expected one of {', '.join(INTEGRATORS)}")
        self.dt = float(dt)
        self.integrator = integrator
        self.friction_velocity = float(friction_velocity)
        self._step_kernel = INTEGRATORS[integrator]
        self.compiled = compile_models(self.models)
        self._df, self._data = self.compiled.new_data()
        self._q = np.zeros(self.compiled.nq)
        self._v = np.zeros(self.compiled.nv)
        self._tau = np.zeros(self.compiled.nv)
        self.reset()
        self.step(0)   # compiles (or loads from the numba cache) now, not at the first real step

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
        """Applied generalized forces, held until changed."""
        return self._tau

    @tau.setter
    def tau(self, value):
        self._tau[:] = value

    @property
    def t(self) -> float:
        return self._steps * self.dt

    @property
    def nq(self) -> int:
        return self.compiled.nq

    @property
    def nv(self) -> int:
        return self.compiled.nv

    def reset(self):
        """Back to t = 0, the models' initial q and v, and zero applied forces."""
        self._q[:] = np.concatenate([m.initial_q() for m in self.models])
        self._v[:] = np.concatenate([m.initial_v() for m in self.models])
        self._tau[:] = 0.0
        self._steps = 0

    # -- stepping ---------------------------------------------------------------------
    def step(self, n: int = 1):
        """Advance n steps of dt. Raises SimulationError (state left at the last finite step)
        if a coordinate becomes NaN or infinite."""
        self.compiled.tree.gravity[:] = self.models[0].gravity
        done, bad = self._step_kernel(self.compiled.tf, self.compiled.ti, self._df, self._q, self._v, self._tau, self.dt,
                                      int(n), self.friction_velocity)
        self._steps += done
        if bad >= 0:
            joint = self.compiled.joint_of_v[bad]
            raise SimulationError(
                f"the simulation blew up at t = {self.t + self.dt:.6g} s: joint {joint!r} went "
                f"non-finite first (state kept at t = {self.t:.6g} s; check its inertia, limits, "
                f"stiffness and the time step dt = {self.dt})")

    # -- views ------------------------------------------------------------------------
    def link_transforms(self):
        """{link name: 4x4 world transform} at the current state (all models)."""
        c = self.compiled
        kernels.kinematics_kernel(c.tf, c.ti, self._df, self._q, self._v)
        return transforms_dict(c, self._data)
