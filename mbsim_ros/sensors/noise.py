"""Gazebo's sensor noise model, per channel, reproducible from one world seed.

Per channel (gz-sensors GaussianNoiseModel):
  output = input + bias + white,  white ~ N(mean, stddev)
  bias   = turn-on bias ~ N(bias_mean, bias_stddev) with a random sign, drawn once, plus a
           Gauss-Markov drift with stddev dynamic_bias_stddev and correlation time tau:
           drift <- exp(-dt/tau) drift + N(0, sqrt(-sigma^2 tau/2 expm1(-2 dt/tau)))
           (so sigma is a density: the drift's stationary stddev is sigma sqrt(tau/2), as in Gazebo)
  output is rounded to a multiple of `precision` when precision > 0 (quantization).
Every device draws from its own generator seeded with (world seed, CRC-32 of its name), so the
same seed gives the same readings bit for bit, whatever other devices exist or sample.
"""
import math
import zlib
from dataclasses import dataclass, fields

import numpy as np

from ..model import ModelError


@dataclass(frozen=True)
class Noise:
    mean: float = 0.0
    stddev: float = 0.0
    bias_mean: float = 0.0
    bias_stddev: float = 0.0
    dynamic_bias_stddev: float = 0.0
    dynamic_bias_correlation_time: float = 0.0
    precision: float = 0.0

    @classmethod
    def from_config(cls, value, where):
        """A Noise from a config mapping (unknown keys are an error naming `where`)."""
        if value is None:
            return cls()
        if isinstance(value, Noise):
            return value
        if not isinstance(value, dict):
            raise ModelError(f"{where}: a noise block is a mapping of {', '.join(cls.names())}, got {value!r}")
        unknown = sorted(set(value) - set(cls.names()))
        if unknown:
            raise ModelError(f"{where}: unknown noise field(s) {', '.join(unknown)}; expected {', '.join(cls.names())}")
        out = {}
        for key, x in value.items():
            try:
                x = float(x)
            except (TypeError, ValueError):
                raise ModelError(f"{where}.{key}: expected a number, got {x!r}") from None
            if not math.isfinite(x) or (key != "mean" and key != "bias_mean" and x < 0):
                raise ModelError(f"{where}.{key}: expected a finite number{'' if 'mean' in key else ' >= 0'}, got {x}")
            out[key] = x
        return cls(**out)

    @staticmethod
    def names():
        return [f.name for f in fields(Noise)]

    @property
    def active(self):
        return any(getattr(self, f) != 0.0 for f in self.names())


def device_rng(seed: int, name: str) -> np.random.Generator:
    """The generator of one device: the world seed plus a stable hash of its name."""
    return np.random.Generator(np.random.PCG64([int(seed) & 0xFFFFFFFF, zlib.crc32(name.encode())]))


class NoiseProcess:
    """The noise state of one device's channels (per-channel Noise blocks, one generator)."""

    def __init__(self, noises, rng: np.random.Generator):
        self.noises = list(noises)
        self.rng = rng
        self.active = any(n.active for n in self.noises)
        col = lambda key: np.array([getattr(n, key) for n in self.noises], dtype=float)  # noqa: E731
        self.mean, self.stddev = col("mean"), col("stddev")
        self.sigma_b, self.tau = col("dynamic_bias_stddev"), col("dynamic_bias_correlation_time")
        self.precision = col("precision")
        self.drifting = (self.sigma_b > 0) & (self.tau > 0)
        bias = rng.normal(col("bias_mean"), col("bias_stddev")) if self.active else np.zeros(len(self.noises))
        if self.active:
            bias = np.where(rng.uniform(size=len(self.noises)) < 0.5, -bias, bias)
        self.turn_on_bias = bias
        self.drift = np.zeros(len(self.noises))

    @property
    def variance(self) -> np.ndarray:
        """The white noise variance per channel (what a message's covariance diagonal reports)."""
        return self.stddev ** 2

    def apply(self, values: np.ndarray, dt: float) -> np.ndarray:
        """values + noise, channel by channel along the last axis; dt = time since the last sample."""
        if not self.active:
            return values
        if self.drifting.any() and dt > 0:
            tau = np.where(self.drifting, self.tau, 1.0)
            phi = np.exp(-dt / tau)
            sigma_d = np.sqrt(-self.sigma_b ** 2 * tau / 2 * np.expm1(-2 * dt / tau))
            self.drift = np.where(self.drifting, phi * self.drift + self.rng.normal(0.0, 1.0, self.drift.shape) * sigma_d, 0.0)
        out = values + self.turn_on_bias + self.drift + self.rng.normal(self.mean, self.stddev, values.shape)
        quantized = self.precision > 0
        if quantized.any():
            p = np.where(quantized, self.precision, 1.0)
            out = np.where(quantized, np.round(out / p) * p, out)
        return out
