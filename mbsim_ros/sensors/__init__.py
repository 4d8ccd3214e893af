"""Simulated sensors: the models' accelerometers, gyros, force sensors, range sensors and cameras
turned into Readings at their own rates, with OpenHRP semantics, noise, delay and saturation.
Imports dynamics/ (the state) and render/ (cameras and range sensors, on first use)."""
from .._kernel_cache import kernel_cache

with kernel_cache("dynamics", "sensors"):   # sense_kernel compiles dynamics kernels into itself
    from .kinematic import sense_kernel
    from .simulation import Simulation

from .devices import Device, Images, Reading, SensorConfigError
from .noise import Noise

__all__ = ["Device", "Images", "Noise", "Reading", "SensorConfigError", "Simulation", "sense_kernel"]
