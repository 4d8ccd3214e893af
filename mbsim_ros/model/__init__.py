"""The format-independent model (imports nothing else of the project)."""
from .errors import ModelError, SimulationError
from .model import (JOINT_TYPES, SHAPE_KINDS, Frame, Joint, Link, LoopConstraint, Model, Sensor,
                    Shape, neutral_q, sensor_ros_frames)
from . import transforms

__all__ = ["ModelError", "SimulationError", "JOINT_TYPES", "SHAPE_KINDS", "Frame", "Joint", "Link",
           "LoopConstraint", "Model", "Sensor", "Shape", "neutral_q", "sensor_ros_frames", "transforms"]
