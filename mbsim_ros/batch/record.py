"""The harness's per-step recording in one numba call (numpy on a handful of values costs
microseconds per call; this is a sizeable share of a 100 us step otherwise), for one world and
for the worlds of a BatchSimulation (batched.py)."""
import contextlib
import math
import threading

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


@njit(cache=True, nogil=True)
def record_worlds_kernel(k, t, alive, q, v, stats, ncon_stat, max_contacts, cforce, T, Q, V, C):
    """Row k of every world still alive (q, v, cforce, Q, V, C with a leading world axis), by
    record_kernel itself: what a Harness records, bit for bit. The contacts counted: the solver's
    stats[w, ncon_stat], at most max_contacts (-1: no cap), as _Recorder.record_step counts them."""
    for w in range(q.shape[0]):
        if alive[w]:
            ncon = stats[w, ncon_stat]
            if max_contacts >= 0 and ncon > max_contacts:
                ncon = max_contacts
            record_kernel(k, t, q[w], v[w], cforce[w], ncon, T, Q[w], V[w], C[w])


@contextlib.contextmanager
def one_thread():
    """While active, the calling thread's parallel kernels (BatchSimulation.step's) run on it
    alone (numba's thread count is the calling thread's own setting)."""
    import numba
    before = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        yield
    finally:
        numba.set_num_threads(before)


_ONE_LAUNCH = threading.Lock()


def launch_guard():
    """What to hold around every parallel launch (a BatchSimulation's step, and its warm-up at
    construction) when chunks run on threads of one process: a process-wide lock under numba's
    workqueue layer (used where neither OpenMP nor TBB is installed; it aborts the process when
    two threads launch parallel kernels at once), else nothing. Call it once numba's threads
    are launched (the layer is chosen then: one_thread() launches them)."""
    import numba
    return _ONE_LAUNCH if numba.threading_layer() == "workqueue" else contextlib.nullcontext()
