"""Model Functions (model/elements.py) packed into flat arrays, and the numba kernel that
evaluates one with its first two derivatives: custom joints call it with a coordinate, motors,
loads and spring curves with time, a length or a speed.

Layout: fi[k] = (kind, offset into ff, pieces, order, extrapolation, has repeat, input slot);
at ff[offset:]: breaks (pieces + 1), coefficients (pieces * order, ascending powers), then
amplitude, frequency, phase, offset (sine) and start, width, shift (repeat).
"""
import math

import numpy as np

from .._kernel_cache import kernel as kernel_decorator
from ..model import ModelError

# kernels.py's decorator, defined here too: kernels.py calls eval_function (custom joints), so
# this module cannot import from it
kernel = kernel_decorator(error_model="numpy")                  # entry points, called from Python
internal = kernel_decorator(error_model="numpy", python=False)  # called from kernels only

PPOLY, SINE, INPUT = 0, 1, 2
_KINDS = {"ppoly": PPOLY, "sine": SINE, "input": INPUT}
_EXTRAPOLATIONS = {"linear": 0, "constant": 1, "extend": 2}
FI_COLUMNS = 7


def pack_functions(functions, input_names=()):
    """(ff, fi, input_names): every Function of the list packed; `input` functions get the slot
    of their name in input_names (extended with names not yet there)."""
    input_names = list(input_names)
    ff, fi = [], np.zeros((max(len(functions), 1), FI_COLUMNS), dtype=np.int64)
    for k, f in enumerate(functions):
        slot = -1
        if f.kind == "input":
            if f.name not in input_names:
                input_names.append(f.name)
            slot = input_names.index(f.name)
        pieces, order = (f.coefs.shape if f.kind == "ppoly" else (0, 0))
        fi[k] = (_KINDS[f.kind], len(ff), pieces, order, _EXTRAPOLATIONS[f.extrapolate],
                 f.repeat is not None, slot)
        if f.kind == "ppoly":
            ff.extend(f.breaks.tolist())
            ff.extend(f.coefs.reshape(-1).tolist())
        ff.extend([f.amplitude, f.frequency, f.phase, f.offset])
        ff.extend(f.repeat if f.repeat is not None else (0.0, 1.0, 0.0))
    if not all(np.isfinite(x) or x == np.inf for x in ff):
        raise ModelError("a function has a non-finite parameter")
    return np.array(ff + [0.0]), fi, input_names


@internal
def _poly(ff, c0, order, dx):
    """Value, first and second derivative of sum c_p dx^p (Horner)."""
    y = dy = ddy = 0.0
    for p in range(order - 1, -1, -1):
        ddy = ddy * dx + 2.0 * dy
        dy = dy * dx + y
        y = y * dx + ff[c0 + p]
    return y, dy, ddy


@kernel
def eval_function(ff, fi, k, x, inputs):
    """(f(x), f'(x), f''(x)) of packed function k; `inputs` holds the run-time input values."""
    kind, o, n, order, extrap, rep = fi[k, 0], fi[k, 1], fi[k, 2], fi[k, 3], fi[k, 4], fi[k, 5]
    tail = o + (n + 1 + n * order if kind == PPOLY else 0)
    if rep:
        start, width, shift = ff[tail + 4], ff[tail + 5], ff[tail + 6]
        x = start + ((x + shift) % width)
    if kind == INPUT:
        return inputs[fi[k, 6]], 0.0, 0.0
    if kind == SINE:
        a, w = ff[tail], 2.0 * math.pi * ff[tail + 1]
        arg = w * x + ff[tail + 2]
        return a * math.sin(arg) + ff[tail + 3], a * w * math.cos(arg), -a * w * w * math.sin(arg)
    lo, hi = ff[o], ff[o + n]
    if x < lo and extrap != 2:
        y, dy, _ = _poly(ff, o + n + 1, order, 0.0)
        if extrap == 1:
            return y, 0.0, 0.0
        return y + dy * (x - lo), dy, 0.0
    if x > hi and extrap != 2:
        b = ff[o + n - 1]
        y, dy, _ = _poly(ff, o + n + 1 + (n - 1) * order, order, hi - b)
        if extrap == 1:
            return y, 0.0, 0.0
        return y + dy * (x - hi), dy, 0.0
    # binary search for the piece: breaks[i] <= x < breaks[i + 1]
    i, j = 0, n - 1
    while i < j:
        mid = (i + j + 1) // 2
        if ff[o + mid] <= x:
            i = mid
        else:
            j = mid - 1
    return _poly(ff, o + n + 1 + i * order, order, x - ff[o + i])
