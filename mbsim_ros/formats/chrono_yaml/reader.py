"""Typed access to one Chrono YAML document: every error names the file and the key path."""
from __future__ import annotations

import os
import warnings

import numpy as np
import yaml

from ...model import ModelError, numbers_text
from ...model.transforms import quat_to_matrix, rpy_to_matrix
from ..text import decode_text


REQUIRED = object()     # a default meaning: the key must be given


# =========================================================================================
# Reading typed values with key paths
# =========================================================================================
class Reader:
    """Typed access to one YAML document; errors name the file and the key path."""

    def __init__(self, path, sink):
        self.path = os.path.abspath(path)
        self.name = os.fspath(path)
        self.folder = os.path.dirname(self.path)
        self.sink = sink              # the list warnings go to
        self.degrees = True

    def error(self, where, expected):
        return ModelError(f"{self.name}: {where}: {expected}")

    def warn(self, where, message):
        text = f"{self.name}: {where}: {message}"
        self.sink.append(text)
        warnings.warn(text, stacklevel=3)

    def load(self):
        try:
            with open(self.path, "rb") as f:
                doc = yaml.safe_load(decode_text(f.read(), self.name, what="YAML"))
        except OSError as exc:
            raise ModelError(f"{self.name}: cannot read the file: {exc}") from None
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = f", line {mark.line + 1}" if mark is not None else ""
            problem = getattr(exc, "problem", None) or str(exc)
            raise ModelError(f"{self.name}{line}: not valid YAML: {problem}") from None
        if not isinstance(doc, dict):
            raise ModelError(f"{self.name}: expected a YAML mapping at the top (Chrono YAML keys such as "
                             f"chrono-version and model), got {type(doc).__name__}")
        return doc

    # -- values ------------------------------------------------------------------------
    def mapping(self, value, where):
        if not isinstance(value, dict):
            raise self.error(where, f"expected a mapping of keys, got {show(value)}")
        return value

    def sequence(self, d, key, where):
        """A list under `key` (empty when absent or null)."""
        value = d.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.error(f"{where}.{key}", f"expected a list, got {show(value)}")
        return value

    def scalar_number(self, value, where):
        if isinstance(value, bool) or value is None:
            raise self.error(where, f"expected a number, got {show(value)}")
        try:
            x = float(value)
        except (TypeError, ValueError):
            raise self.error(where, f"expected a number, got {show(value)}") from None
        if not np.isfinite(x):
            raise self.error(where, f"expected a finite number, got {show(value)}")
        return x

    def number(self, d, key, where, default=REQUIRED):
        if d.get(key) is None:
            if default is REQUIRED:
                raise self.error(f"{where}.{key}", "missing (expected a number)")
            return default
        return self.scalar_number(d[key], f"{where}.{key}")

    def numbers(self, value, where, n=None):
        if not isinstance(value, list):
            raise self.error(where, f"expected a list of {n or 'some'} numbers, got {show(value)}")
        if n is not None and len(value) != n:
            raise self.error(where, f"expected {numbers_text(n)}, got {len(value)}")
        return np.array([self.scalar_number(x, f"{where}[{k}]") for k, x in enumerate(value)])

    def vector(self, d, key, where, default=REQUIRED, n=3):
        if d.get(key) is None:
            if default is REQUIRED:
                raise self.error(f"{where}.{key}", f"missing (expected {numbers_text(n)})")
            return None if default is None else np.array(default, dtype=float)
        return self.numbers(d[key], f"{where}.{key}", n)

    def unit(self, d, key, where, default=REQUIRED):
        v = self.vector(d, key, where, default)
        if v is None:
            return None
        n = np.linalg.norm(v)
        if n < 1e-12:
            raise self.error(f"{where}.{key}", f"a zero direction {v.tolist()}")
        return v / n

    def flag(self, d, key, where, default):
        value = d.get(key)
        if value is None:
            return default
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false", "yes", "no", "on", "off"):
            return value.strip().lower() in ("true", "yes", "on")
        raise self.error(f"{where}.{key}", f"expected true or false, got {show(value)}")

    def text(self, d, key, where, default=REQUIRED):
        value = d.get(key)
        if value is None:
            if default is REQUIRED:
                raise self.error(f"{where}.{key}", "missing (expected a name)")
            return default
        if isinstance(value, (dict, list)):
            raise self.error(f"{where}.{key}", f"expected a name, got {show(value)}")
        return str(value)

    def enum(self, d, key, where, choices, default=REQUIRED):
        value = d.get(key)
        if value is None:
            if default is REQUIRED:
                raise self.error(f"{where}.{key}", f"missing (expected one of {', '.join(choices)})")
            return default
        word = str(value).strip().upper()
        if word not in choices:
            raise self.error(f"{where}.{key}", f"{show(value)}: expected one of {', '.join(choices)}")
        return word

    def rotation(self, d, key, where):
        """3x3 rotation of an orientation (identity when absent): 3 numbers [yaw, pitch, roll]
        (R = Rz(yaw) Ry(pitch) Rx(roll), degrees per angle_degrees) or a unit quaternion
        [e0, e1, e2, e3] (scalar first)."""
        value = d.get(key)
        if value is None:
            return np.eye(3)
        full = f"{where}.{key}"
        if not isinstance(value, list) or len(value) not in (3, 4):
            raise self.error(full, f"expected [yaw, pitch, roll] or a quaternion [e0, e1, e2, e3], got {show(value)}")
        a = self.numbers(value, full)
        if a.size == 3:
            if self.degrees:
                a = np.radians(a)
            return rpy_to_matrix([a[2], a[1], a[0]])
        n = np.linalg.norm(a)
        if abs(n - 1.0) > 1e-3:
            raise self.error(full, f"quaternion {a.tolist()} is not a unit quaternion (norm {n:.6g}; "
                                   "expected [e0, e1, e2, e3] with e0^2 + e1^2 + e2^2 + e3^2 = 1)")
        return quat_to_matrix([a[1], a[2], a[3], a[0]])

    def unknown_keys(self, d, known, where):
        for key in d:
            if key not in known:
                self.warn(f"{where}.{key}", "not a key Chrono reads here; ignored")


def show(value):
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
