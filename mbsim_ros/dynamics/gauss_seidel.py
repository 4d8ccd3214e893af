"""Projected Gauss-Seidel on the constraint rows themselves, without forming A = J M^-1 J^T:
the iterative solver of large constraint problems (many contacts), warm-started from the last
step's impulses (numba kernels that constraints.apply_impulses calls).

The rows' DOFs are local: a contact between two free bodies touches their 12 DOFs, and M^-1
couples only DOFs of one tree, so row i's J_i and Y_i = M^-1 J_i^T are zero outside one range
of DOFs [row_lo_i, row_hi_i): the trees its DOFs belong to (DOFs of a tree are contiguous in
depth-first order; tree_ranges checks that and otherwise makes the whole range one tree).
Gauss-Seidel keeps u = sum_i Y_i x_i, the velocity change of the impulses so far, so that a
row's w_i = J_i u + cfm_i x_i - b_i and its update u += Y_i dx_i cost the length of its range:
a sweep over the 120 rows of a stack of ten boxes reads 120 x 12 x 2 numbers, where forming A
alone multiplies 120 x 120 x 60.

Convergence: when a sweep changed no row's velocity by more than tolerance times the velocity
scale of the problem, max_i |J_i (u - u_before_the_sweep)| <= tolerance * max_i(|b_i|, A_ii |x_i|).
The velocities, not the impulses: four corners of a box on a face (the contacts of a stack) carry
its weight in many ways that move nothing differently; between them only cfm picks one, and
Gauss-Seidel walks there at a rate of about cfm per sweep, so a test on the impulses (or on each
row's w as it is updated, which that walk keeps alive) would wait for it in vain. A fixed point
of the sweep solves the LCP. The caller falls back to the exact pivoting solver when `sweeps`
sweeps did not converge.
"""
from .kernels import internal


@internal
def tree_ranges(dof_parent, tree_start, tree_end):
    """tree_start[j], tree_end[j]: the DOF range of the tree of DOF j (a root DOF has a negative
    parent). When some tree is not contiguous, one range for all DOFs."""
    nv = dof_parent.shape[0]
    start = 0
    for j in range(nv):
        if dof_parent[j] < 0:
            start = j
        tree_start[j] = start
    end = nv
    for j in range(nv - 1, -1, -1):
        tree_end[j] = end
        if dof_parent[j] < 0:
            end = j
    for j in range(nv):
        p = dof_parent[j]
        if p >= 0 and not (tree_start[j] <= p < tree_end[j]):
            for k in range(nv):
                tree_start[k] = 0
                tree_end[k] = nv
            return


@internal
def row_range(J_row, tree_start, tree_end):
    """(lo, hi): the DOFs of the trees from J_row's first to its last nonzero ((0, 0) if none)."""
    nv = J_row.shape[0]
    first = -1
    for j in range(nv):
        if J_row[j] != 0.0:
            first = j
            break
    if first < 0:
        return 0, 0
    last = first
    for j in range(nv - 1, first, -1):
        if J_row[j] != 0.0:
            last = j
            break
    return tree_start[first], tree_end[last]


@internal
def gauss_seidel(J, Y, row_lo, row_hi, diag, b, lo, hi, findex, m, cfm, x, u, u_before, sweeps, tolerance):
    """Projected Gauss-Seidel over rows 0..m-1 from the warm start in x, forward and backward in
    turn (symmetric Gauss-Seidel: a stack's weight travels down and its support up in one pair of
    sweeps); friction rows' bounds mu x_normal follow the current normal.
    diag[i] = A_ii (1 + cfm), 0 for a row no motion changes (its x stays 0). u (length nv) gets
    sum_i Y_i x_i; u_before (length nv) is scratch. Returns the sweeps done when converged
    (module docstring), -1 when not."""
    nv = u.shape[0]
    for j in range(nv):
        u[j] = 0.0
    w_scale = 1e-300
    for i in range(m):
        if not diag[i] > 0.0:
            x[i] = 0.0
        xi = x[i]
        w_scale = max(w_scale, abs(b[i]), diag[i] * abs(xi))
        if xi != 0.0:
            Yi = Y[i]
            for j in range(row_lo[i], row_hi[i]):
                u[j] += xi * Yi[j]
    extra = cfm / (1.0 + cfm)      # A_ii cfm = diag[i] * extra: the cfm part of row i's w
    for sweep in range(sweeps):
        for j in range(nv):
            u_before[j] = u[j]
        for k in range(m):
            i = k if sweep % 2 == 0 else m - 1 - k
            d = diag[i]
            if not d > 0.0:
                continue
            Ji = J[i]
            a, e = row_lo[i], row_hi[i]
            w = d * extra * x[i] - b[i]
            for j in range(a, e):
                w += Ji[j] * u[j]
            normal = findex[i]
            if normal < 0:
                lo_i, hi_i = lo[i], hi[i]
            else:
                hi_i = abs(hi[i] * x[normal])
                lo_i = -hi_i
            new = min(max(x[i] - w / d, lo_i), hi_i)
            if not new == new:      # NaN: leave it to the pivoting solver
                return -1
            dx = new - x[i]
            if dx != 0.0:
                x[i] = new
                Yi = Y[i]
                for j in range(a, e):
                    u[j] += dx * Yi[j]
                w_scale = max(w_scale, d * abs(new))
        largest = 0.0
        for i in range(m):
            Ji = J[i]
            change = 0.0
            for j in range(row_lo[i], row_hi[i]):
                change += Ji[j] * (u[j] - u_before[j])
            largest = max(largest, abs(change))
        if largest <= tolerance * w_scale:
            return sweep + 1
    return -1
