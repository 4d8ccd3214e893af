"""Errors raised for bad input and for simulations that fail."""


class ModelError(ValueError):
    """A model file or model description is malformed. The message names the file and the
    element or line, and what was expected."""


class SimulationError(RuntimeError):
    """The simulation state became non-finite; the message names the joint that went first."""


class ConfigError(ValueError):
    """A run or sensor configuration is malformed; the message names the file or key."""
