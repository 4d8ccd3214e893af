"""Metrics of one run: functions of its recorded Signals (signals.py) -> one number.

Built-ins (name: what, options):
  fell               1 if the floating base's height dropped below `threshold` (m; default half
                     its initial height) at any step, else 0
  final_tilt         the base's tilt from vertical at the end (rad)
  max_tilt           the largest tilt over the run (rad)
  max_contact_force  the largest single contact force over every step (N)
  max_joint_torque   the largest |applied tau + joint spring-damper| over every step and
                     one-coordinate DOF (N m or N); `joints`: only these DOF names
  imu_rms            RMS of an accelerometer's or gyro's readings about their mean (the
                     vibration; m/s^2 or rad/s); `sensor`: its name (default the first gyro)
  distance           horizontal distance of the base from its start to its end position (m)
  settle_time        the first time after which every generalized speed stays below
                     `threshold` (default 0.01 m/s, rad/s) to the end; inf if it never does
A metric given as `function: module:callable` is called as callable(signals, **options) and
returns a number.
"""
from __future__ import annotations

import importlib

import numpy as np


def fell(sig, threshold=None):
    z = sig.root_position[:, 2]
    limit = 0.5 * z[0] if threshold is None else float(threshold)
    return float(np.any(z < limit))


def final_tilt(sig):
    return float(sig.tilt[-1])


def max_tilt(sig):
    return float(sig.tilt.max())


def max_contact_force(sig):
    return float(sig.contact_force.max()) if len(sig.contact_force) else 0.0


def max_joint_torque(sig, joints=None):
    tau = sig.joint_torque
    if joints is not None:
        names = list(sig.dofs)
        missing = [j for j in joints if j not in sig.dofs]
        if missing:
            raise KeyError(f"max_joint_torque: no DOF named {', '.join(missing)}")
        tau = tau[:, [names.index(j) for j in joints]]
    return float(np.abs(tau).max()) if tau.size else 0.0


def imu_rms(sig, sensor=None):
    if sensor is None:
        gyros = [n for n, (_, v) in sig.readings.items() if v.shape[1] == 3 and "gyro" in n.lower()]
        if not gyros:
            raise KeyError("imu_rms: name a sensor (sensor: NAME); no gyro found among "
                           f"{', '.join(sig.readings) or 'no sensors'}")
        sensor = gyros[0]
    if sensor not in sig.readings:
        raise KeyError(f"imu_rms: no accelerometer or gyro named {sensor!r}; recorded: {', '.join(sig.readings)}")
    values = sig.readings[sensor][1][:, :3]
    if not len(values):
        return float("nan")
    dev = values - values.mean(axis=0)
    return float(np.sqrt((dev * dev).sum(axis=1).mean()))


def distance(sig):
    p = sig.root_position
    return float(np.hypot(*(p[-1, :2] - p[0, :2])))


def settle_time(sig, threshold=0.01):
    fast = np.abs(sig.v).max(axis=1) >= float(threshold)
    if fast[-1]:
        return float("inf")
    moving = np.flatnonzero(fast)
    return float(sig.t[moving[-1] + 1]) if len(moving) else float(sig.t[0])


BUILTIN = {f.__name__: f for f in (fell, final_tilt, max_tilt, max_contact_force, max_joint_torque, imu_rms,
                                   distance, settle_time)}


def load_callable(path):
    """module:attribute (or module.attribute) -> the object; ImportError naming the path."""
    module, _, attr = path.partition(":") if ":" in path else path.rpartition(".")
    try:
        obj = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError, ValueError) as e:
        raise ImportError(f"{path}: cannot import ({e})") from None
    if not callable(obj):
        raise ImportError(f"{path}: not callable")
    return obj


def evaluate(metrics, sig):
    """{name: float} for the spec's metrics ({name: {metric|function, options, tolerance}})."""
    out = {}
    for name, m in metrics.items():
        f = load_callable(m["function"]) if m.get("function") else BUILTIN[m["metric"]]
        try:
            out[name] = float(f(sig, **m.get("options", {})))
        except Exception as e:
            text = e.args[0] if isinstance(e, KeyError) and e.args else str(e)
            raise MetricError(f"metric {name}: {text}") from e
    return out


class MetricError(Exception):
    """A metric could not be evaluated on a run's signals (the scenario's row says why)."""
