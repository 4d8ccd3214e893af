"""Spatial algebra on 3x3 blocks held in registers: 9-tuples (row-major) and scalar triples.

The tree's transforms are the child body's pose (E, r) in its parent, not 6x6 matrices: a motion
moves into the child as X m = (E^T (v - r x w), E^T w), a force into the parent as X^T (f, n) =
(E f, r x E f + E n), an inertia [[A, B], [B^T, C]] (linear first) as X^T I X = [[A', B' - A' r^],
[., C' + r^B' + (r^B')^T - r^ A' r^]] with A' = E A E^T (B', C' alike). On SR1 this halves ABA
against the same products on 6x6 arrays: every operand of the kernels lives in one buffer, so
the compiler cannot tell a store from a later load and reloads each entry from memory, while
tuples stay in registers. The 3x3 helpers are inlined by numba; the three transforms are kernels
of their own, which LLVM inlines into their callers just as well: inlined by numba at each of
their call sites, they cost the bundled world's cold compile ~20 CPU s more (bench/startup.py).
"""
from numba import njit

from .._kernel_cache import kernel as kernel_decorator

inline = njit(cache=True, nogil=True, error_model="numpy", inline="always")
internal = kernel_decorator(error_model="numpy", python=False)


@inline
def block(M, r, c):
    """The 3x3 block of M at row r, column c."""
    return (M[r, c], M[r, c + 1], M[r, c + 2], M[r + 1, c], M[r + 1, c + 1], M[r + 1, c + 2],
            M[r + 2, c], M[r + 2, c + 1], M[r + 2, c + 2])


@inline
def mul(a, b):
    """a b"""
    return (a[0] * b[0] + a[1] * b[3] + a[2] * b[6], a[0] * b[1] + a[1] * b[4] + a[2] * b[7],
            a[0] * b[2] + a[1] * b[5] + a[2] * b[8],
            a[3] * b[0] + a[4] * b[3] + a[5] * b[6], a[3] * b[1] + a[4] * b[4] + a[5] * b[7],
            a[3] * b[2] + a[4] * b[5] + a[5] * b[8],
            a[6] * b[0] + a[7] * b[3] + a[8] * b[6], a[6] * b[1] + a[7] * b[4] + a[8] * b[7],
            a[6] * b[2] + a[7] * b[5] + a[8] * b[8])


@inline
def mul_bt(a, b):
    """a b^T"""
    return (a[0] * b[0] + a[1] * b[1] + a[2] * b[2], a[0] * b[3] + a[1] * b[4] + a[2] * b[5],
            a[0] * b[6] + a[1] * b[7] + a[2] * b[8],
            a[3] * b[0] + a[4] * b[1] + a[5] * b[2], a[3] * b[3] + a[4] * b[4] + a[5] * b[5],
            a[3] * b[6] + a[4] * b[7] + a[5] * b[8],
            a[6] * b[0] + a[7] * b[1] + a[8] * b[2], a[6] * b[3] + a[7] * b[4] + a[8] * b[5],
            a[6] * b[6] + a[7] * b[7] + a[8] * b[8])


@inline
def times_skew(a, r0, r1, r2):
    """a r^ (r^ the cross-product matrix of r)"""
    return (a[1] * r2 - a[2] * r1, a[2] * r0 - a[0] * r2, a[0] * r1 - a[1] * r0,
            a[4] * r2 - a[5] * r1, a[5] * r0 - a[3] * r2, a[3] * r1 - a[4] * r0,
            a[7] * r2 - a[8] * r1, a[8] * r0 - a[6] * r2, a[6] * r1 - a[7] * r0)


@inline
def skew_times(r0, r1, r2, b):
    """r^ b"""
    return (r1 * b[6] - r2 * b[3], r1 * b[7] - r2 * b[4], r1 * b[8] - r2 * b[5],
            r2 * b[0] - r0 * b[6], r2 * b[1] - r0 * b[7], r2 * b[2] - r0 * b[8],
            r0 * b[3] - r1 * b[0], r0 * b[4] - r1 * b[1], r0 * b[5] - r1 * b[2])


@inline
def mv(a, x0, x1, x2):
    """a x"""
    return (a[0] * x0 + a[1] * x1 + a[2] * x2, a[3] * x0 + a[4] * x1 + a[5] * x2,
            a[6] * x0 + a[7] * x1 + a[8] * x2)


@inline
def mtv(a, x0, x1, x2):
    """a^T x"""
    return (a[0] * x0 + a[3] * x1 + a[6] * x2, a[1] * x0 + a[4] * x1 + a[7] * x2,
            a[2] * x0 + a[5] * x1 + a[8] * x2)


@inline
def outer_sub(a, x0, x1, x2, y0, y1, y2, s):
    """a - s x y^T"""
    return (a[0] - s * x0 * y0, a[1] - s * x0 * y1, a[2] - s * x0 * y2,
            a[3] - s * x1 * y0, a[4] - s * x1 * y1, a[5] - s * x1 * y2,
            a[6] - s * x2 * y0, a[7] - s * x2 * y1, a[8] - s * x2 * y2)


@internal
def inertia_to_parent_add(E, r, A, B, C, out):
    """out += X^T [[A, B], [B^T, C]] X, an articulated inertia (A, C symmetric) of the child at
    pose (E, r) in its parent, added in parent coordinates."""
    e = block(E, 0, 0)
    r0, r1, r2 = r[0], r[1], r[2]
    A = mul_bt(mul(e, A), e)
    B = mul_bt(mul(e, B), e)
    C = mul_bt(mul(e, C), e)
    K = times_skew(A, r0, r1, r2)
    RB = skew_times(r0, r1, r2, B)
    RK = skew_times(r0, r1, r2, K)
    for a in range(3):
        for b in range(3):
            nb = B[3 * a + b] - K[3 * a + b]
            out[a, b] += A[3 * a + b]
            out[a, 3 + b] += nb
            out[3 + b, a] += nb
            out[3 + a, 3 + b] += C[3 * a + b] + RB[3 * a + b] + RB[3 * b + a] - RK[3 * a + b]


@internal
def force_to_parent_add(E, r, f0, f1, f2, n0, n1, n2, out):
    """out += X^T (f, n) = (E f, r x E f + E n): a force in the child's coordinates, added in the
    parent's."""
    e = block(E, 0, 0)
    g0, g1, g2 = mv(e, f0, f1, f2)
    m0, m1, m2 = mv(e, n0, n1, n2)
    out[0] += g0
    out[1] += g1
    out[2] += g2
    out[3] += r[1] * g2 - r[2] * g1 + m0
    out[4] += r[2] * g0 - r[0] * g2 + m1
    out[5] += r[0] * g1 - r[1] * g0 + m2


@internal
def motion_in_child(E, r, m):
    """X m = (E^T (v - r x w), E^T w) as a 6-tuple: a motion in the parent's coordinates, in the
    child's."""
    e = block(E, 0, 0)
    v0, v1, v2, w0, w1, w2 = m[0], m[1], m[2], m[3], m[4], m[5]
    a0, a1, a2 = mtv(e, v0 - (r[1] * w2 - r[2] * w1), v1 - (r[2] * w0 - r[0] * w2), v2 - (r[0] * w1 - r[1] * w0))
    b0, b1, b2 = mtv(e, w0, w1, w2)
    return a0, a1, a2, b0, b1, b2

