"""The harness's per-step recording in one numba call (numpy on a handful of values costs
microseconds per call; this is a sizeable share of a 100 us step otherwise)."""
import math

from numba import njit


@njit(cache=True, nogil=True)
def record_kernel(k, t, q, v, cforce, ncon, T, Q, V, C):
    """Row k: time, state, and the largest contact force magnitude among the step's ncon."""
    T[k] = t
    Q[k, :] = q
    V[k, :] = v
    best = 0.0
    for i in range(ncon):
        s = cforce[i, 0] * cforce[i, 0] + cforce[i, 1] * cforce[i, 1] + cforce[i, 2] * cforce[i, 2]
        if s > best:
            best = s
    C[k] = math.sqrt(best)
