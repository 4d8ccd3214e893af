"""Rigid-body dynamics in generalized coordinates: compiled models, numba kernels, Physics
(the step; sensors.Simulation adds the models' sensors: the Simulation a user meets).
Imports only model/."""
from .._kernel_cache import kernel_cache

with kernel_cache("dynamics"):   # every kernel module is imported here, under this source version's cache
    from .api import (center_of_mass, forward_dynamics, frame_jacobian, integrate, inverse_dynamics,
                      link_accelerations, link_transforms, link_velocities, mass_matrix)
    from .compiled import compile_models
    from . import functions  # noqa: F401  (imported under the cache, for the kernels that call it)
    from .physics import Physics
    from .batch_simulation import BatchSimulation

__all__ = ["BatchSimulation", "Physics", "center_of_mass", "compile_models", "forward_dynamics", "frame_jacobian",
           "integrate", "inverse_dynamics", "link_accelerations", "link_transforms", "link_velocities", "mass_matrix"]
