"""Boxed linear complementarity problems with friction indices (as ODE's dSolveLCP, used by DART).

Given a symmetric positive (semi-)definite A (n x n), b, bounds lo <= 0 <= hi (lo may be
-inf, hi +inf) and findex, find x and w with

    A x = b + w,   lo_i <= x_i <= hi_i,
    x_i = lo_i => w_i >= 0,   x_i = hi_i => w_i <= 0,   lo_i < x_i < hi_i => w_i = 0.

findex[i] = k >= 0 makes row i a friction row of the normal row k: its bounds are then
hi_i' = |hi_i x_k|, lo_i' = -hi_i' (hi_i holds the friction coefficient mu). A normal row has
[0, inf), a bilateral row (-inf, inf). This is the constraint-impulse problem of a rigid-body
time step: contacts with friction, joint limits, loop closures.

Method. Dantzig-type principal pivoting as in Baraff, "Fast contact force computation for
nonpenetrating rigid bodies" (SIGGRAPH 1994) and ODE's dLCP (ode/src/lcp.cpp): rows join one
at a time; the clamped set C (lo < x < hi, w = 0) keeps a Cholesky factor of A_CC, extended
when a row joins C and updated when one leaves. Each driving step moves the new row along
dx_C = -A_CC^-1 A_Ci, dw = A dx, by the largest step that keeps every row feasible, and moves
the blocking row between C and its bound. As in ODE, friction rows come after all other
rows, and their bounds are fixed from the normal impulses when the first of them is reached.
The normals may still move after that. When they did, the pass's active set is finished with
each friction row at a bound tied to its normal (x_t = +-mu x_k: a non-symmetric solve of the
clamped rows, followed by primal-dual active-set corrections), which is exact when the pass
found the right set; failing that, the pivoting is re-run with the friction bounds of its
result (a few passes). The result must pass lcp_residual (findex bounds evaluated at the
final x) within the tolerance, else projected Gauss-Seidel (from the caller's warm start in
x; the pivoting itself starts from x = 0) takes over.

Before pivoting, the active set the caller's warm start implies (the last step's solution) is
tried with one solve (solve_from_warm_start): a robot that stands, holds an object or rests on
a limit keeps its set from step to step, and the result is accepted by the same residual test.

Sparsity. Contact rows couple only through shared bodies, so in the caller's row order (a
contact's rows together, contacts by body pair) A is banded: each row's products run over its
band (nonzero_columns), and the factor keeps each row's profile (cholesky_add), which makes the
warm start's solve O(n band^2), not O(n^3): a stack of ten boxes, 120 rows, costs ~60 us, not ~250.

solve_boxed_lcp returns
    SOLVED (0)     the pivoting method solved it;
    PGS (1)        pivoting failed (pivot limit, a tiny or negative pivot, or a result that
                   fails the residual check) and projected Gauss-Seidel converged;
    PGS_FAILED (2) PGS did not converge either: x is its best effort, for the caller to report.
One tolerance serves both: the pivoting result must have lcp_residual <= pgs_tolerance, and
PGS has converged when the largest change of x in a sweep is <= pgs_tolerance * max|x|.

Nothing here allocates: the caller allocates the workspace once (lcp_workspace_size).
"""
import math

from .._kernel_cache import kernel as kernel_decorator

SOLVED, PGS, PGS_FAILED = 0, 1, 2

TINY_PIVOT = 1e-12      # a pivot below this fraction of its diagonal entry counts as singular
FRICTION_PASSES = 3     # pivoting runs with friction bounds from the previous run
TIED_STEPS = 8          # active-set steps of solve_friction_tied per pass
ROUNDING = 1e-10        # lcp_residual below this is exact; above it solve_friction_tied moves rows

# Row states during the pivoting
UNPROCESSED, CLAMPED, AT_LO, AT_HI = 0, 1, 2, 3

kernel = kernel_decorator(error_model="numpy")                  # entry points, called from Python
internal = kernel_decorator(error_model="numpy", python=False)  # called from kernels only


@kernel
def lcp_workspace_size(nmax):
    """(float, int) workspace lengths for problems of up to nmax rows."""
    return 2 * nmax * nmax + 7 * nmax, 7 * nmax


@internal
def row_bounds(lo, hi, findex, x, i):
    """(lo_i, hi_i) of row i, a friction row's from the current normal impulse in x."""
    k = findex[i]
    if k < 0:
        return lo[i], hi[i]
    h = abs(hi[i] * x[k])
    return -h, h


@kernel
def nonzero_columns(A, n, nz):
    """nz[0, i], nz[1, i]: the columns of row i of A from its first nonzero to its last (0, 0
    for a zero row). A contact row meets only the rows of contacts on its own bodies, so the
    products with A below run over a row's band, not all n (a stack of ten boxes: 36 of 120)."""
    for i in range(n):
        start = n
        for j in range(n):
            if A[i, j] != 0.0:
                start = j
                break
        end = start
        for j in range(n - 1, start - 1, -1):
            if A[i, j] != 0.0:
                end = j + 1
                break
        nz[0, i] = start if end > start else 0
        nz[1, i] = end if end > start else 0


@internal
def columns(nz, i, n):
    """The columns of row i that can be nonzero: nonzero_columns' band, all n when nz is None."""
    if nz is None:
        return 0, n
    return nz[0, i], nz[1, i]


@internal
def set_w(A, b, n, x, w, nz):
    """w = A x - b."""
    for i in range(n):
        s = -b[i]
        start, end = columns(nz, i, n)
        for j in range(start, end):
            s += A[i, j] * x[j]
        w[i] = s


@internal
def lcp_scales(A, b, n, x, nz):
    """(x_scale, w_scale): max|x_i|, and the largest |b_i| or sum_j |A_ij x_j| (the size of
    the terms of w = A x - b); floored to stay positive."""
    x_scale = 1e-300
    w_scale = 1e-300
    for i in range(n):
        x_scale = max(x_scale, abs(x[i]))
        row_size = 0.0
        start, end = columns(nz, i, n)
        for j in range(start, end):
            row_size += abs(A[i, j] * x[j])
        w_scale = max(w_scale, abs(b[i]), row_size)
    return x_scale, w_scale


@internal
def row_violation(lo_i, hi_i, x_i, w_i, x_scale, w_scale):
    """How far one row is from its bounds and complementarity, scaled. A wrongly signed w_i
    counts as the smaller of |w_i| and the distance of x_i from the bound where that sign is
    allowed (so w_i must vanish strictly inside the bounds)."""
    r = max(0.0, (x_i - hi_i) / x_scale, (lo_i - x_i) / x_scale)
    if w_i > 0.0:       # allowed only at lo
        r = max(r, min(w_i / w_scale, (x_i - lo_i) / x_scale))
    elif w_i < 0.0:     # allowed only at hi
        r = max(r, min(-w_i / w_scale, (hi_i - x_i) / x_scale))
    return r


@kernel
def lcp_residual(A, b, lo, hi, findex, n, x, w, nz=None):
    """The largest violation of the LCP conditions by (x, w), findex bounds taken at x:
    violations in x relative to max|x|, in w (including |A x - b - w|) relative to the
    largest |b_i| or sum_j |A_ij x_j|. inf when anything is NaN. nz: A's nonzero_columns
    (None: all columns)."""
    x_scale, w_scale = lcp_scales(A, b, n, x, nz)
    worst = 0.0
    for i in range(n):
        lo_i, hi_i = row_bounds(lo, hi, findex, x, i)
        equation = -b[i] - w[i]
        start, end = columns(nz, i, n)
        for j in range(start, end):
            equation += A[i, j] * x[j]
        r = max(abs(equation) / w_scale, row_violation(lo_i, hi_i, x[i], w[i], x_scale, w_scale))
        if not r == r:
            return math.inf
        worst = max(worst, r)
    return worst


# ---- Cholesky factor L of A_CC; row/column p of L is row clamped[p] of A ----
# Row p of L is zero before column first[p] (its profile), and those entries are never read:
# a row of A_CC that is zero up to some column gives a factor row zero up to there, so a
# contact row, which meets only the rows of its own bodies' contacts, costs the square of its
# band, not of the whole set (a stack of ten boxes: 35 of 120 rows).

@kernel
def cholesky_add(L, A, clamped, first, nc, j, nz=None):
    """Extend the factor of the nc clamped rows by row j (O(band^2)). False, leaving the factor
    as it was, when the new pivot is not above TINY_PIVOT * A_jj. nz: A's nonzero_columns
    (None: all columns)."""
    start = nc                     # L l = A_Cj, into row nc of L: l is zero before A_Cj's first nonzero
    band_start, band_end = columns(nz, j, A.shape[1])
    for p in range(nc):
        c = clamped[p]             # A_cj = A_jc, read along row j, where the band says it may be nonzero
        if band_start <= c < band_end and A[j, c] != 0.0:
            start = p
            break
    for p in range(start, nc):
        s = A[clamped[p], j]
        for q in range(max(start, first[p]), p):
            s -= L[p, q] * L[nc, q]
        L[nc, p] = s / L[p, p]
    pivot = A[j, j]
    for q in range(start, nc):
        pivot -= L[nc, q] * L[nc, q]
    if not (A[j, j] > 0.0 and pivot > TINY_PIVOT * A[j, j]):   # also false for NaN
        return False
    L[nc, nc] = math.sqrt(pivot)
    clamped[nc] = j
    first[nc] = start
    return True


@kernel
def cholesky_remove(L, clamped, first, nc, p, v):
    """Drop position p from the factor of nc clamped rows. The rows after p move up one and
    lose column p; that column v re-enters as a rank-one update of the trailing block,
    L33' L33'^T = L33 L33^T + v v^T (O(nc^2)). v is scratch of length nc. A row's profile
    is kept: its v is zero until its first column, and the rotations leave zeros zero."""
    m = nc - 1
    for r in range(p, m):          # new row r = old row r + 1
        old = first[r + 1]
        v[r] = L[r + 1, p] if old <= p else 0.0
        new = old if old <= p else old - 1
        for q in range(new, p):
            L[r, q] = L[r + 1, q]
        for q in range(max(p, new), r + 1):
            L[r, q] = L[r + 1, q + 1]
        first[r] = new
        clamped[r] = clamped[r + 1]
    for k in range(p, m):          # rotation-based rank-one update keeps the diagonal positive
        diagonal = math.hypot(L[k, k], v[k])
        c = diagonal / L[k, k]
        s = v[k] / L[k, k]
        L[k, k] = diagonal
        for r in range(k + 1, m):
            if k >= first[r]:
                L[r, k] = (L[r, k] + s * v[r]) / c
                v[r] = c * v[r] - s * L[r, k]


@kernel
def cholesky_solve(L, first, nc, v):
    """v <- A_CC^-1 v for the nc clamped rows (positions, not row numbers)."""
    for p in range(nc):
        s = v[p]
        for q in range(first[p], p):
            s -= L[p, q] * v[q]
        v[p] = s / L[p, p]
    for p in range(nc - 1, -1, -1):      # L^T by columns of L: row p's profile alone
        v[p] /= L[p, p]
        vp = v[p]
        for q in range(first[p], p):
            v[q] -= L[p, q] * vp


# ---- the last step's active set ----

@internal
def solve_from_warm_start(A, b, lo, hi, findex, n, x, w, L, clamped, first, v, tolerance, nz):
    """Solve on the active set the warm start in x implies (a row strictly inside its bounds
    clamped, w = 0; every other row at the bound it is at or beyond): one Cholesky solve of the
    clamped rows, where pivoting adds them one by one. A robot standing or holding still keeps its
    active set from step to step. True when the result passes lcp_residual within `tolerance`
    (the test the pivoting result must pass too); False, x and w then scratch, when the set
    needs a friction row at its bound (tied to a normal that moves), its matrix is singular, or
    the result does not pass."""
    nc = 0
    for i in range(n):
        lo_i, hi_i = row_bounds(lo, hi, findex, x, i)
        if lo_i < x[i] < hi_i:
            if not cholesky_add(L, A, clamped, first, nc, i, nz):
                return False
            nc += 1
        elif findex[i] >= 0 and hi_i > 0.0:
            return False
        else:
            x[i] = lo_i if x[i] <= lo_i else hi_i
    for p in range(nc):           # (after the bounds above: a friction row's needs its normal)
        x[clamped[p]] = 0.0
    for p in range(nc):           # A_CC x_C = b_C - A_CN x_N
        i = clamped[p]
        r = b[i]
        start, end = columns(nz, i, n)
        for j in range(start, end):
            r -= A[i, j] * x[j]
        v[p] = r
    cholesky_solve(L, first, nc, v)
    for p in range(nc):
        x[clamped[p]] = v[p]
    set_w(A, b, n, x, w, nz)
    return lcp_residual(A, b, lo, hi, findex, n, x, w, nz) <= tolerance


# ---- the pivoting method ----

@internal
def order_rows(lo, hi, findex, n, order):
    """Bilateral rows first (they join C at once), then the other rows without friction, then
    the friction rows. Returns the position of the first friction row (n if none)."""
    k = 0
    for i in range(n):
        if findex[i] < 0 and lo[i] == -math.inf and hi[i] == math.inf:
            order[k] = i
            k += 1
    for i in range(n):
        if findex[i] < 0 and not (lo[i] == -math.inf and hi[i] == math.inf):
            order[k] = i
            k += 1
    first_friction = k
    for i in range(n):
        if findex[i] >= 0:
            order[k] = i
            k += 1
    return first_friction


@internal
def set_friction_bounds(lo, hi, findex, n, x, lo_now, hi_now):
    """The friction rows' bounds from the normal impulses in x; returns the largest change."""
    change = 0.0
    for i in range(n):
        if findex[i] >= 0:
            lo_i, hi_i = row_bounds(lo, hi, findex, x, i)
            change = max(change, abs(hi_i - hi_now[i]))
            lo_now[i] = lo_i
            hi_now[i] = hi_i
    return change


@internal
def dantzig_pass(A, b, lo, hi, findex, n, x, w, lo_now, hi_now, set_friction_at, max_pivots,
                 order, state, clamped, first, L, dx, dw, v, nz):
    """One run of the pivoting method over the rows in `order`, with the bounds lo_now, hi_now
    (the friction rows' are set from x on reaching position set_friction_at of order; n: never).
    x, w: the result. False on the pivot limit or a tiny pivot."""
    for i in range(n):
        x[i] = 0.0
        w[i] = 0.0
        state[i] = UNPROCESSED
    nc = 0
    pivots = 0
    for k in range(n):
        if k == set_friction_at:
            set_friction_bounds(lo, hi, findex, n, x, lo_now, hi_now)
        i = order[k]
        lo_i = lo_now[i]
        hi_i = hi_now[i]
        w_i = -b[i]                 # rows not yet processed have x = 0
        start, end = columns(nz, i, n)
        for j in range(start, end):
            w_i += A[i, j] * x[j]
        w[i] = w_i
        if lo_i == hi_i or (lo_i == 0.0 and w_i >= 0.0):
            x[i] = lo_i
            state[i] = AT_LO
            continue
        if hi_i == 0.0 and w_i <= 0.0:
            state[i] = AT_HI
            continue
        if w_i == 0.0:
            if not cholesky_add(L, A, clamped, first, nc, i, nz):
                return False
            nc += 1
            state[i] = CLAMPED
            continue

        # Drive x_i from 0 (inside its bounds) in the direction that brings w_i to 0, keeping
        # the processed rows complementary, until w_i = 0 or x_i reaches a bound.
        direction = 1.0 if w_i < 0.0 else -1.0
        while True:
            if pivots >= max_pivots:
                return False
            pivots += 1
            for p in range(nc):
                v[p] = -direction * A[clamped[p], i]
            cholesky_solve(L, first, nc, v)
            for p in range(nc):
                dx[clamped[p]] = v[p]
            for q in range(k + 1):      # dw of the rows at a bound and of row i (0 on C)
                j = order[q]
                if state[j] != CLAMPED:
                    s = direction * A[j, i]
                    for p in range(nc):
                        s += A[j, clamped[p]] * v[p]
                    dw[j] = s
            # direction * dw_i is the Schur complement of A_ii in A_(C+i): row i's pivot
            if not (A[i, i] > 0.0 and direction * dw[i] > TINY_PIVOT * A[i, i]):
                return False

            # The largest step: row i reaching w_i = 0 or its bound, a clamped row reaching a
            # bound, or a row at a bound whose w reaches 0 (ties go to the earlier candidate).
            step = -w[i] / dw[i]
            blocker = i
            blocker_pos = -1
            new_state = CLAMPED
            bound_step = direction * ((hi_i if direction > 0.0 else lo_i) - x[i])
            if bound_step <= step:
                step = bound_step
                new_state = AT_HI if direction > 0.0 else AT_LO
            for p in range(nc):
                j = clamped[p]
                if dx[j] < 0.0 and lo_now[j] > -math.inf:
                    s = (lo_now[j] - x[j]) / dx[j]
                    if s < step:
                        step, blocker, blocker_pos, new_state = s, j, p, AT_LO
                elif dx[j] > 0.0 and hi_now[j] < math.inf:
                    s = (hi_now[j] - x[j]) / dx[j]
                    if s < step:
                        step, blocker, blocker_pos, new_state = s, j, p, AT_HI
            for q in range(k):
                j = order[q]
                if lo_now[j] == hi_now[j]:      # pinned: any w is complementary
                    continue
                if (state[j] == AT_LO and dw[j] < 0.0) or (state[j] == AT_HI and dw[j] > 0.0):
                    s = -w[j] / dw[j]
                    if s < step:
                        step, blocker, blocker_pos, new_state = s, j, -1, CLAMPED
            step = max(step, 0.0)       # rounding may leave a row a hair past its threshold

            for p in range(nc):
                j = clamped[p]
                x[j] += step * dx[j]
            x[i] += step * direction
            for q in range(k + 1):
                j = order[q]
                if state[j] != CLAMPED:
                    w[j] += step * dw[j]

            if blocker == i:
                if new_state == CLAMPED:
                    w[i] = 0.0
                    if not cholesky_add(L, A, clamped, first, nc, i, nz):
                        return False
                    nc += 1
                else:
                    x[i] = hi_i if new_state == AT_HI else lo_i
                state[i] = new_state
                break
            if state[blocker] == CLAMPED:   # leaves C at the bound it reached
                x[blocker] = hi_now[blocker] if new_state == AT_HI else lo_now[blocker]
                cholesky_remove(L, clamped, first, nc, blocker_pos, v)
                nc -= 1
            else:                           # its w reached 0: joins C
                w[blocker] = 0.0
                if not cholesky_add(L, A, clamped, first, nc, blocker, nz):
                    return False
                nc += 1
            state[blocker] = new_state

    # Solve the clamped rows afresh for the final set (removes the drift of the steps), then w.
    for p in range(nc):
        j = clamped[p]
        s = b[j]
        start, end = columns(nz, j, n)
        for m in range(start, end):
            if state[m] != CLAMPED:
                s -= A[j, m] * x[m]
        v[p] = s
    cholesky_solve(L, first, nc, v)
    for p in range(nc):
        x[clamped[p]] = v[p]
    set_w(A, b, n, x, w, nz)
    return True


@internal
def gauss_solve(M, m, v, scale):
    """v <- M^-1 v for the leading m x m block of M (destroyed), by Gaussian elimination with
    partial pivoting. False when a pivot is not above TINY_PIVOT * scale."""
    for p in range(m):
        best = p
        for r in range(p + 1, m):
            if abs(M[r, p]) > abs(M[best, p]):
                best = r
        if not abs(M[best, p]) > TINY_PIVOT * scale:
            return False
        if best != p:
            for q in range(p, m):
                M[p, q], M[best, q] = M[best, q], M[p, q]
            v[p], v[best] = v[best], v[p]
        for r in range(p + 1, m):
            factor = M[r, p] / M[p, p]
            if factor != 0.0:
                for q in range(p + 1, m):
                    M[r, q] -= factor * M[p, q]
                v[r] -= factor * v[p]
    for p in range(m - 1, -1, -1):
        s = v[p]
        for q in range(p + 1, m):
            s -= M[p, q] * v[q]
        v[p] = s / M[p, p]
    return True


@internal
def solve_friction_tied(A, b, lo, hi, findex, n, x, w, state, clamped, position, M, slope, v,
                        tolerance, nz):
    """Finish a pass whose friction bounds were stale. Friction rows at a bound are tied to
    their normal, x_t = +-|mu x_k| (a clamped normal makes that a linear term), and the
    clamped rows are solved with the ties (a non-symmetric system). Then every row that
    violates its bounds or the sign of its w by more than ROUNDING moves between C and its
    bound, and again: primal-dual active-set steps, starting from the pass's active set.
    Usually the pass's set is right and one solve is exact.
    x, w, state: in, the pass's result; out, the new one. True when lcp_residual <= tolerance."""
    for j in range(n):      # pinned friction rows go to the side their w asks for
        if state[j] != CLAMPED and findex[j] >= 0:
            state[j] = AT_HI if w[j] < 0.0 else AT_LO
    for _ in range(TIED_STEPS):
        nc = 0
        for j in range(n):
            if state[j] == CLAMPED:
                clamped[nc] = j
                position[j] = nc
                nc += 1
        for j in range(n):      # rows at a bound: the others' values first, friction rows need them
            slope[j] = 0.0
            if state[j] != CLAMPED and findex[j] < 0:
                x[j] = hi[j] if state[j] == AT_HI else lo[j]
        for j in range(n):      # slope[j] != 0: x_j follows the unknown of its normal
            k = findex[j]
            if state[j] != CLAMPED and k >= 0:
                side = 1.0 if state[j] == AT_HI else -1.0
                x[j] = side * abs(hi[j] * x[k])
                if state[k] == CLAMPED:
                    slope[j] = side * abs(hi[j]) * (1.0 if x[k] >= 0.0 else -1.0)
        scale = 0.0
        for p in range(nc):
            row = clamped[p]
            scale = max(scale, A[row, row])
            s = b[row]
            for m in range(n):
                if state[m] != CLAMPED and slope[m] == 0.0:
                    s -= A[row, m] * x[m]
            v[p] = s
            for q in range(nc):
                M[p, q] = A[row, clamped[q]]
            for t in range(n):
                if slope[t] != 0.0:
                    M[p, position[findex[t]]] += A[row, t] * slope[t]
        if not gauss_solve(M, nc, v, scale):
            return False
        for p in range(nc):
            x[clamped[p]] = v[p]
        for t in range(n):
            if slope[t] != 0.0:
                x[t] = slope[t] * x[findex[t]]
        set_w(A, b, n, x, w, nz)
        if lcp_residual(A, b, lo, hi, findex, n, x, w, nz) <= ROUNDING:
            return True

        x_scale, w_scale = lcp_scales(A, b, n, x, nz)
        moved = 0
        for j in range(n):
            lo_j, hi_j = row_bounds(lo, hi, findex, x, j)
            if not row_violation(lo_j, hi_j, x[j], w[j], x_scale, w_scale) > ROUNDING:
                continue
            if state[j] == CLAMPED:
                if x[j] > hi_j:
                    state[j] = AT_HI
                    moved += 1
                elif x[j] < lo_j:
                    state[j] = AT_LO
                    moved += 1
            elif lo_j < hi_j and ((state[j] == AT_LO and w[j] < 0.0) or (state[j] == AT_HI and w[j] > 0.0)):
                state[j] = CLAMPED
                moved += 1
        if moved == 0:
            break
    return lcp_residual(A, b, lo, hi, findex, n, x, w, nz) <= tolerance


@internal
def pgs(A, b, lo, hi, findex, n, x, order, iterations, tolerance, nz):
    """Projected Gauss-Seidel from x, rows in `order` (normals before their friction rows),
    friction bounds from the current x. True when the largest change of x in a sweep fell
    to tolerance * max|x| within `iterations` sweeps. Rows with A_ii <= 0 are left as they are."""
    for _ in range(iterations):
        largest_change = 0.0
        largest_x = 0.0
        for k in range(n):
            i = order[k]
            if not A[i, i] > 0.0:
                continue
            r = b[i]
            start, end = columns(nz, i, n)
            for j in range(start, end):
                r -= A[i, j] * x[j]
            lo_i, hi_i = row_bounds(lo, hi, findex, x, i)
            new = min(max(x[i] + r / A[i, i], lo_i), hi_i)
            largest_change = max(largest_change, abs(new - x[i]))
            x[i] = new
        for i in range(n):
            largest_x = max(largest_x, abs(x[i]))
        if largest_change <= tolerance * largest_x:
            return True
    return False


@kernel
def solve_boxed_lcp(A, b, lo, hi, findex, n, x, w, wf, wi, pgs_iterations, pgs_tolerance,
                    max_pivots=-1, warm_active_set=True):
    """Solve the boxed LCP of the leading n rows (module docstring) into x and w.

    A (nmax x nmax), b, lo, hi, findex (length >= n; only the leading n rows are read) are
    not modified. On entry x holds the warm start (the previous solution, or zeros): its active
    set is tried first, and PGS starts from it.
    wf, wi: float and int64 workspace of at least lcp_workspace_size(n), any contents.
    pgs_iterations, pgs_tolerance: PGS's sweeps and convergence bound, also the lcp_residual
    bound the pivoting result must meet. max_pivots caps the pivoting steps of each pass
    (-1: 10 n + 50; 0 forces PGS). warm_active_set False: the warm start's active set is not
    tried. Returns SOLVED, PGS or PGS_FAILED."""
    n_float, n_int = lcp_workspace_size(n)
    if (n < 0 or n > A.shape[0] or n > A.shape[1] or n > b.shape[0] or n > lo.shape[0]
            or n > hi.shape[0] or n > findex.shape[0] or n > x.shape[0] or n > w.shape[0]
            or wf.shape[0] < n_float or wi.shape[0] < n_int):
        raise ValueError("solve_boxed_lcp: an array is shorter than n rows or the workspace")
    if n == 0:
        return SOLVED
    if max_pivots < 0:
        max_pivots = 10 * n + 50
    L = wf[:n * n].reshape((n, n))              # Cholesky factor of A_CC
    M = wf[n * n:2 * n * n].reshape((n, n))     # solve_friction_tied's system
    vectors = wf[2 * n * n:2 * n * n + 7 * n]
    warm_start, dx, dw, v = vectors[:n], vectors[n:2 * n], vectors[2 * n:3 * n], vectors[3 * n:4 * n]
    lo_now, hi_now, slope = vectors[4 * n:5 * n], vectors[5 * n:6 * n], vectors[6 * n:]
    order, state, clamped, position = wi[:n], wi[n:2 * n], wi[2 * n:3 * n], wi[3 * n:4 * n]
    first = wi[4 * n:5 * n]                     # the profile of L (cholesky_add)
    nz = wi[5 * n:7 * n].reshape((2, n))        # the band of each row of A (nonzero_columns)

    for i in range(n):
        warm_start[i] = x[i]
        lo_now[i] = lo[i]
        hi_now[i] = hi[i]
    first_friction = order_rows(lo, hi, findex, n, order)
    nonzero_columns(A, n, nz)
    if warm_active_set and solve_from_warm_start(A, b, lo, hi, findex, n, x, w, L, clamped, first, v, pgs_tolerance, nz):
        return SOLVED

    set_friction_at = first_friction
    for _ in range(FRICTION_PASSES):
        if not dantzig_pass(A, b, lo, hi, findex, n, x, w, lo_now, hi_now, set_friction_at,
                            max_pivots, order, state, clamped, first, L, dx, dw, v, nz):
            break
        # The normals may have moved after the friction bounds were fixed; if not, the pass
        # solved the problem. Else tie the friction bounds to the normals and settle the
        # active set; failing that, run again with the friction bounds of this result.
        if set_friction_bounds(lo, hi, findex, n, x, lo_now, hi_now) == 0.0:
            if lcp_residual(A, b, lo, hi, findex, n, x, w, nz) <= pgs_tolerance:
                return SOLVED
            break
        if solve_friction_tied(A, b, lo, hi, findex, n, x, w, state, clamped, position, M, slope, v,
                               pgs_tolerance, nz):
            return SOLVED
        set_friction_at = n

    for i in range(n):
        x[i] = warm_start[i]
    converged = pgs(A, b, lo, hi, findex, n, x, order, pgs_iterations, pgs_tolerance, nz)
    set_w(A, b, n, x, w, nz)
    return PGS if converged else PGS_FAILED
