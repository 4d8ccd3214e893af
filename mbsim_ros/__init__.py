"""mbsim_ros: load a robot or biomechanics model, simulate it in real time, publish it to ROS 2.

    import mbsim_ros as mb
    model = mb.load_model("robot.urdf")
    sim = mb.Simulation(model, dt=0.001)
    sim.step(1000)
"""
from .model import (Frame, Joint, Link, LoopConstraint, Model, ModelError, Sensor, Shape,
                    SimulationError)
from .formats import load_model, to_urdf

# The dynamics layer imports numba (about half a second); loaders and the CLI's help do not
# need it, so its names are imported on first use.
_DYNAMICS = ("BatchSimulation", "center_of_mass", "forward_dynamics", "frame_jacobian", "integrate",
             "inverse_dynamics", "link_accelerations", "link_transforms", "link_velocities",
             "mass_matrix")


def __getattr__(name):
    if name == "Simulation":          # the dynamics' Physics plus the models' sensors
        from .sensors import Simulation as value
    elif name in ("Reading", "Images", "Noise", "SensorConfigError"):
        from . import sensors
        value = getattr(sensors, name)
    elif name in _DYNAMICS:
        from . import dynamics
        value = getattr(dynamics, name)
    else:
        raise AttributeError(f"module 'mbsim_ros' has no attribute {name!r}")
    globals()[name] = value       # found directly from now on (loops calling mb.forward_dynamics)
    return value


__version__ = "0.1.0"

__all__ = [
    "Frame", "Images", "Joint", "Link", "LoopConstraint", "Model", "ModelError", "Noise", "Reading",
    "Sensor", "SensorConfigError", "Shape",
    "SimulationError", "load_model", "to_urdf", "BatchSimulation", "Simulation", "center_of_mass",
    "forward_dynamics", "frame_jacobian", "integrate", "inverse_dynamics", "link_accelerations", "link_transforms",
    "link_velocities", "mass_matrix",
]
