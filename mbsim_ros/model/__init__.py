"""The format-independent model (imports nothing else of the project)."""
from .errors import ConfigError, ModelError, SimulationError, numbers_text
from .model import (JOINT_TYPES, SHAPE_KINDS, Frame, Joint, Link, LoopConstraint, Model, Sensor,
                    Shape, neutral_q, sensor_ros_frames, symmetric_inertia)
from .elements import (Actuator, BodyLoad, Bushing, CoordinateCoupler, CoordinateLimitForce, Function, Motor,
                       RotarySpringDamper, SpringDamper, TransformAxis)
from . import transforms

__all__ = ["ConfigError", "ModelError", "SimulationError", "JOINT_TYPES", "SHAPE_KINDS", "Frame", "Joint", "Link",
           "LoopConstraint", "Model", "Sensor", "Shape", "neutral_q", "sensor_ros_frames", "symmetric_inertia", "transforms",
           "Actuator", "BodyLoad", "Bushing", "CoordinateCoupler", "CoordinateLimitForce", "Function", "Motor",
           "RotarySpringDamper", "SpringDamper", "TransformAxis"]
