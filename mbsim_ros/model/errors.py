"""Errors raised for bad input and for simulations that fail."""


class ModelError(ValueError):
    """A model file or model description is malformed. The message names the file and the
    element or line, and what was expected."""


class SimulationError(RuntimeError):
    """The simulation state became non-finite; the message names the joint that went first."""


class ConfigError(ValueError):
    """A run or sensor configuration is malformed; the message names the file or key."""


def numbers_text(n) -> str:
    """'a number', '3 numbers': how a message says how many numbers were expected."""
    return "a number" if n == 1 else f"{n} numbers"
