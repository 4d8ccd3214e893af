"""OpenSim's Function family as ppoly Functions (SimmSpline, GCVSpline, StepFunction,
MultiplierFunction scaling) and the rotation helpers every part of the reader shares: OpenSim's
body-fixed X-Y-Z orientations, their angle rates, poses from translation and orientation."""
from __future__ import annotations

import math

import numpy as np

from ...model import Function, ModelError
from ...model.transforms import make_transform

UNIT_AXES = np.eye(3)      # the x, y and z unit vectors


# =========================================================================================
# Functions
# =========================================================================================
def simm_spline(x, y):
    """OpenSim's SimmSpline (and NaturalCubicSpline) as a Function: the cubic spline whose end
    third derivatives match divided differences (Forsythe, Malcolm and Moler), extrapolated
    linearly; two points give the line through them. Port of SimmSpline::calcCoefficients."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    n = x.size
    if n < 2 or y.size != n:
        raise ModelError(f"a spline needs two or more (x, y) pairs of equal length, got {n} x and {y.size} y")
    if not np.all(np.diff(x) > 0):
        raise ModelError(f"spline x values must increase strictly, got {x.tolist()}")
    if n == 2:
        return Function.piecewise_linear(x, y, extrapolate="linear")
    b, c, d = np.zeros(n), np.zeros(n), np.zeros(n)
    nm1, nm2 = n - 1, n - 2
    d[0] = x[1] - x[0]
    c[1] = (y[1] - y[0]) / d[0]
    for i in range(1, nm1):
        d[i] = x[i + 1] - x[i]
        b[i] = 2.0 * (d[i - 1] + d[i])
        c[i + 1] = (y[i + 1] - y[i]) / d[i]
        c[i] = c[i + 1] - c[i]
    b[0], b[nm1] = -d[0], -d[nm2]
    c[0] = c[nm1] = 0.0
    if n > 3:
        d31, d20 = x[3] - x[1], x[2] - x[0]
        d1, d2 = x[nm1] - x[n - 3], x[nm2] - x[n - 4]
        d30, d3 = x[3] - x[0], x[nm1] - x[n - 4]
        c[0] = c[2] / d31 - c[1] / d20
        c[nm1] = c[nm2] / d1 - c[n - 3] / d2
        c[0] = c[0] * d[0] * d[0] / d30
        c[nm1] = -c[nm1] * d[nm2] * d[nm2] / d3
    for i in range(1, n):
        t = d[i - 1] / b[i - 1]
        b[i] -= t * d[i - 1]
        c[i] -= t * c[i - 1]
    c[nm1] /= b[nm1]
    for i in range(nm2, -1, -1):
        c[i] = (c[i] - d[i] * c[i + 1]) / b[i]
    for i in range(nm1):
        b[i] = (y[i + 1] - y[i]) / d[i] - d[i] * (c[i + 1] + 2.0 * c[i])
        d[i] = (c[i + 1] - c[i]) / d[i]
        c[i] *= 3.0
    coefs = np.stack([y[:-1], b[:-1], c[:-1], d[:-1]], axis=1)
    return Function(breaks=x, coefs=coefs, extrapolate="linear")


def natural_spline(x, y, half_order):
    """OpenSim's GCVSpline with error_variance 0: the natural spline of degree 2m - 1 (m the
    half order) through the points; outside them, the polynomial of degree m - 1 that
    continues it (constant for m = 1, linear for m = 2, one extra piece each side beyond)."""
    from scipy.interpolate import PPoly, make_interp_spline
    x, y = np.asarray(x, float), np.asarray(y, float)
    m = int(half_order)
    if not 1 <= m <= 4:
        raise ModelError(f"GCVSpline half_order {m}: expected 1 to 4 (degree 1, 3, 5 or 7)")
    if x.size < 2 * m or y.size != x.size:
        raise ModelError(f"GCVSpline of degree {2 * m - 1} needs {2 * m} or more (x, y) pairs of "
                         f"equal length, got {x.size} x and {y.size} y")
    if not np.all(np.diff(x) > 0):
        raise ModelError(f"spline x values must increase strictly, got {x.tolist()}")
    k = 2 * m - 1
    ends = [(j, 0.0) for j in range(m, 2 * m - 1)] or None
    spline = make_interp_spline(x, y, k=k, bc_type=(ends, ends) if ends else None)
    pp = PPoly.from_spline(spline)
    keep = (pp.x[:-1] >= x[0]) & (pp.x[1:] <= x[-1]) & (np.diff(pp.x) > 0)
    coefs = pp.c[::-1, keep].T.copy()       # ascending powers of (x - x_k)
    breaks = x
    if m <= 2:
        return Function(breaks=breaks, coefs=coefs, extrapolate="constant" if m == 1 else "linear")
    # degree m - 1 continuation: the Taylor polynomial at each end, one piece of width 1 outside
    # that "extend" continues
    spline_end = Function(breaks=breaks, coefs=coefs, extrapolate="extend")
    left = _taylor(spline_end, x[0], m, x[0] - 1.0)
    right = _taylor(spline_end, x[-1], m, x[-1])
    order = coefs.shape[1]
    pad = lambda c: np.concatenate([c, np.zeros(order - c.size)])   # noqa: E731
    coefs = np.vstack([pad(left), coefs, pad(right)])
    return Function(breaks=np.concatenate([[x[0] - 1.0], breaks, [x[-1] + 1.0]]), coefs=coefs,
                    extrapolate="extend")


def _taylor(f, at, m, about):
    """Ascending coefficients in (x - about) of f's Taylor polynomial of degree m - 1 at `at`."""
    derivs = [float(_derivative(f, at, j)) for j in range(m)]
    # p(x) = sum_j d_j/j! (x - at)^j with x - at = (x - about) + (about - at)
    h = about - at
    out = np.zeros(m)
    for j, dj in enumerate(derivs):
        a = dj / math.factorial(j)
        for i in range(j + 1):
            out[i] += a * math.comb(j, i) * h ** (j - i)
    return out


def _derivative(f, x, j):
    """j-th derivative of a ppoly Function at x (any j; Function.__call__ stops at 2)."""
    k = int(np.clip(np.searchsorted(f.breaks, x, side="right") - 1, 0, f.coefs.shape[0] - 1))
    dx = x - f.breaks[k]
    c = f.coefs[k]
    return sum(math.perm(p, j) * c[p] * dx ** (p - j) for p in range(j, c.size))


def step_function(x0, x1, y0, y1):
    """SimTK's Function::Step: y0 below x0, y1 above x1, the quintic smooth step between."""
    if not x1 > x0:
        raise ModelError(f"StepFunction: transition_end_time {x1} must be after transition_start_time {x0}")
    h, dy = x1 - x0, y1 - y0
    # y0 + dy (10 s^3 - 15 s^4 + 6 s^5), s = (x - x0) / h
    coefs = [[y0, 0.0, 0.0, 10.0 * dy / h ** 3, -15.0 * dy / h ** 4, 6.0 * dy / h ** 5]]
    return Function(breaks=[x0, x1], coefs=coefs, extrapolate="constant")


def scaled(f, scale):
    """f times a constant (MultiplierFunction)."""
    if f.kind == "sine":
        return Function.sine(f.amplitude * scale, f.frequency, f.phase, f.offset * scale)
    return Function(breaks=f.breaks, coefs=f.coefs * scale, extrapolate=f.extrapolate)


# =========================================================================================
# Rotations
# =========================================================================================
def xyz_rotation(angles):
    """OpenSim's orientation: body-fixed X-Y-Z rotations, R = Rx(a) Ry(b) Rz(c)."""
    a, b, c = (float(v) for v in angles)
    ca, sa, cb, sb, cc, sc = math.cos(a), math.sin(a), math.cos(b), math.sin(b), math.cos(c), math.sin(c)
    Rx = np.array([[1, 0, 0], [0, ca, -sa], [0, sa, ca]])
    Ry = np.array([[cb, 0, sb], [0, 1, 0], [-sb, 0, cb]])
    Rz = np.array([[cc, -sc, 0], [sc, cc, 0], [0, 0, 1]])
    return Rx @ Ry @ Rz


def xyz_rates(angles, omega):
    """Body-fixed X-Y-Z angle rates from the angular velocity expressed in the parent frame:
    omega = qd0 x + qd1 Rx(q0) y + qd2 Rx(q0) Ry(q1) z."""
    a, b = float(angles[0]), float(angles[1])
    Rx = xyz_rotation((a, 0, 0))
    E = np.column_stack([[1.0, 0, 0], Rx[:, 1], Rx @ xyz_rotation((0, b, 0))[:, 2]])
    return np.linalg.lstsq(E, np.asarray(omega, float), rcond=None)[0]


def xyz_pose(translation, orientation):
    return make_transform(xyz_rotation(orientation), translation)


def axis_rotation_to_z(direction):
    """A rotation whose z axis is the unit vector `direction`."""
    z = direction / np.linalg.norm(direction)
    e = np.array([1.0, 0, 0]) if abs(z[0]) < 0.9 else np.array([0, 1.0, 0])
    x = np.cross(e, z)
    x /= np.linalg.norm(x)
    return np.column_stack([x, np.cross(z, x), z])
