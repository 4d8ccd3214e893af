"""The boxed LCP solver (mbsim_ros/dynamics/lcp.py): random problems, uniqueness against brute
force, friction (stick, slip, many contacts), the PGS fallback, and that inputs and padding
are left alone. Solutions are checked by an independent numpy check of the LCP conditions."""
import itertools

import numpy as np
import pytest

from mbsim_ros.dynamics.lcp import (PGS, PGS_FAILED, SOLVED, cholesky_add, cholesky_remove, cholesky_solve,
                                    lcp_residual, lcp_workspace_size, nonzero_columns, solve_boxed_lcp)

INF = np.inf


def solve(A, b, lo, hi, findex=None, x0=None, iterations=30, tolerance=1e-6, max_pivots=-1):
    """(status, x, w) from exact-size arrays and a fresh workspace."""
    n = len(b)
    findex = -np.ones(n, np.int64) if findex is None else np.asarray(findex, np.int64)
    x = np.zeros(n) if x0 is None else np.array(x0, float)
    w = np.zeros(n)
    nf, ni = lcp_workspace_size(n)
    status = solve_boxed_lcp(A, b, lo, hi, findex, n, x, w, np.zeros(nf), np.zeros(ni, np.int64),
                             iterations, tolerance, max_pivots)
    return status, x, w


def assert_lcp_solution(A, b, lo, hi, findex, x, w, tol):
    """The LCP conditions, written out independently of lcp_residual: A x = b + w, bounds
    (friction rows' from x), w >= 0 at lo, w <= 0 at hi, w = 0 strictly inside; violations in
    x relative to max|x|, in w relative to the size of the terms of A x - b."""
    findex = np.asarray(findex, np.int64)
    friction = findex >= 0
    hi_x = np.where(friction, np.abs(np.where(friction, hi, 0.0) * x[np.maximum(findex, 0)]), hi)
    lo_x = np.where(friction, -hi_x, lo)
    x_tol = tol * max(np.abs(x).max(), 1e-300)
    w_tol = tol * max(np.abs(b).max(), (np.abs(A) @ np.abs(x)).max(), 1e-300)
    assert np.abs(A @ x - b - w).max() <= w_tol, "A x != b + w"
    assert np.all(x >= lo_x - x_tol) and np.all(x <= hi_x + x_tol), "x outside its bounds"
    at_lo = x <= lo_x + x_tol
    at_hi = x >= hi_x - x_tol
    assert np.all(at_lo | (w <= w_tol)), "w > 0 away from lo"
    assert np.all(at_hi | (w >= -w_tol)), "w < 0 away from hi"


def random_problem(rng, n, kinds="ubf"):
    """A = B B^T + eps I (B n x m, rank-deficient when m < n), b, and per row a unilateral
    [0, inf), bilateral (-inf, inf) or finite box [lo, hi] (lo < 0 < hi)."""
    m = int(rng.integers(max(1, n // 2), 2 * n + 1))
    B = rng.normal(size=(n, m))
    A = B @ B.T + 1e-3 * np.eye(n)
    b = rng.normal(size=n) * rng.uniform(0.1, 10.0)
    kind = rng.choice(list(kinds), size=n)
    lo = np.where(kind == "u", 0.0, np.where(kind == "b", -INF, -rng.uniform(0.05, 2.0, n)))
    hi = np.where(kind == "u", INF, np.where(kind == "b", INF, rng.uniform(0.05, 2.0, n)))
    return A, b, lo, hi


@pytest.mark.parametrize("n", range(1, 41))
def test_random_positive_definite_problems(n):
    rng = np.random.default_rng(1000 + n)
    for kinds in ("ubf", "u", "f", "ub"):
        A, b, lo, hi = random_problem(rng, n, kinds)
        findex = -np.ones(n, np.int64)
        status, x, w = solve(A, b, lo, hi, findex)
        assert status == SOLVED
        assert lcp_residual(A, b, lo, hi, findex, n, x, w) < 1e-9
        assert_lcp_solution(A, b, lo, hi, findex, x, w, 1e-9)


def banded_problem(rng, contacts, band):
    """Contact-like rows in the order of a stack's: per contact a normal [0, inf) and two friction
    rows (mu in hi, findex to the normal), coupled only to the contacts within `band` of it, so
    that A is zero outside a band around its diagonal (B banded, A = B B^T + eps I)."""
    n = 3 * contacts
    B = rng.normal(size=(n, n))
    i, j = np.indices((n, n))
    B[np.abs(i // 3 - j // 3) > band] = 0.0
    A = B @ B.T + 1e-3 * np.eye(n)
    b = rng.normal(size=n) + np.where(i[:, 0] % 3 == 0, 2.0, 0.0)
    normal = np.arange(n) % 3 == 0
    lo = np.where(normal, 0.0, -INF)
    hi = np.where(normal, INF, rng.uniform(0.2, 1.0, n))
    findex = np.where(normal, -1, np.arange(n) - np.arange(n) % 3)
    return A, b, lo, hi, findex


def test_nonzero_columns_are_each_rows_first_and_last_nonzero():
    rng = np.random.default_rng(3)
    A, *_ = banded_problem(rng, 8, 1)
    A[5, :] = 0.0
    nz = np.full((2, 24), -1, np.int64)
    nonzero_columns(A, 24, nz)
    for row in range(24):
        cols = np.flatnonzero(A[row])
        assert (nz[0, row], nz[1, row]) == ((cols[0], cols[-1] + 1) if len(cols) else (0, 0))
    assert nz[1, 0] < 24 and nz[0, 23] > 0          # banded: the rows do not span all columns


@pytest.mark.parametrize("seed", range(12))
def test_banded_friction_problems_solve_cold_and_from_a_warm_start(seed):
    # the band (nonzero_columns) and the factor's profile (cholesky_add) skip the zeros; the
    # result must meet the LCP conditions as a dense solve does, cold, warm, and by PGS
    rng = np.random.default_rng(50 + seed)
    A, b, lo, hi, findex = banded_problem(rng, 12, 1 + seed % 3)
    status, x, w = solve(A, b, lo, hi, findex)
    assert status == SOLVED
    assert_lcp_solution(A, b, lo, hi, findex, x, w, 1e-9)
    nz = np.zeros((2, len(b)), np.int64)
    nonzero_columns(A, len(b), nz)
    assert lcp_residual(A, b, lo, hi, findex, len(b), x, w, nz) == lcp_residual(A, b, lo, hi, findex, len(b), x, w)
    warm_status, warm_x, warm_w = solve(A, b * (1 + 1e-9), lo, hi, findex, x0=x)   # the next step's
    assert warm_status == SOLVED
    assert_lcp_solution(A, b * (1 + 1e-9), lo, hi, findex, warm_x, warm_w, 1e-9)
    pgs_status, pgs_x, pgs_w = solve(A, b, lo, hi, findex, iterations=20000, tolerance=1e-10, max_pivots=0)
    assert pgs_status == PGS
    assert_lcp_solution(A, b, lo, hi, findex, pgs_x, pgs_w, 1e-5)


def brute_force_solutions(A, b, lo, hi, tol=1e-9):
    """Every x that satisfies the LCP conditions, from trying each row at lo, at hi or free
    (free rows solved from A_FF x_F = b_F - A_FN x_N)."""
    n = len(b)
    solutions = []
    for assignment in itertools.product("lhf", repeat=n):
        choice = np.array(assignment)
        if np.any((choice == "l") & ~np.isfinite(lo)) or np.any((choice == "h") & ~np.isfinite(hi)):
            continue
        x = np.where(choice == "l", lo, np.where(choice == "h", hi, 0.0))
        free = choice == "f"
        if free.any():
            rhs = b[free] - A[np.ix_(free, ~free)] @ x[~free]
            x[free] = np.linalg.solve(A[np.ix_(free, free)], rhs)
        w = A @ x - b
        scale = tol * max(1.0, np.abs(x).max(), np.abs(b).max())
        ok = (np.all(x[free] >= lo[free] - scale) and np.all(x[free] <= hi[free] + scale)
              and np.all(w[choice == "l"] >= -scale) and np.all(w[choice == "h"] <= scale))
        if ok:
            solutions.append(x)
    return solutions


@pytest.mark.parametrize("seed", range(12))
def test_unique_solution_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = 1 + seed % 6
    A, b, lo, hi = random_problem(rng, n)
    status, x, w = solve(A, b, lo, hi)
    assert status == SOLVED
    solutions = brute_force_solutions(A, b, lo, hi)
    assert solutions, "brute force found no solution"
    scale = max(1.0, np.abs(x).max())
    for other in solutions:     # positive definite: all the same point
        np.testing.assert_allclose(other, solutions[0], rtol=0, atol=1e-9 * scale)
    np.testing.assert_allclose(x, solutions[0], rtol=0, atol=1e-9 * scale)


# ---- friction ----

def block_on_ground(push, mu=0.5, mass=2.0):
    """A point-like block (contact below its center of mass) on the ground, falling at 1 m/s
    and moving at `push` m/s along x. Rows: normal z, tangents x and y. b = -J v, so that
    w = J v_after: the contact velocity after the impulses x."""
    A = np.eye(3) / mass
    b = np.array([1.0, -push, 0.0])
    lo = np.array([0.0, -mu, -mu])
    hi = np.array([INF, mu, mu])
    findex = np.array([-1, 0, 0])
    return A, b, lo, hi, findex


def test_block_sticks_under_a_small_push():
    mass, mu, push = 2.0, 0.5, 0.2
    A, b, lo, hi, findex = block_on_ground(push, mu, mass)
    status, x, w = solve(A, b, lo, hi, findex)
    assert status == SOLVED
    np.testing.assert_allclose(x, [mass * 1.0, -mass * push, 0.0], atol=1e-12)   # stops it
    assert abs(x[1]) < mu * x[0]
    np.testing.assert_allclose(w, 0.0, atol=1e-12)
    assert_lcp_solution(A, b, lo, hi, findex, x, w, 1e-12)


def test_block_slides_under_a_large_push():
    mass, mu, push = 2.0, 0.5, 3.0
    A, b, lo, hi, findex = block_on_ground(push, mu, mass)
    status, x, w = solve(A, b, lo, hi, findex)
    assert status == SOLVED
    assert x[0] == pytest.approx(mass * 1.0, rel=1e-12)
    assert x[1] == pytest.approx(-mu * x[0], rel=1e-12)       # friction at the cone, against the motion
    assert w[1] == pytest.approx(push - mu * x[0] / mass, rel=1e-12)
    assert w[1] > 0                                           # still sliding along +x
    assert x[2] == 0.0 and w[0] == pytest.approx(0.0, abs=1e-12)


def boxes_on_ground(velocities, mu, half=(0.1, 0.05, 0.02), mass=2.0, cfm=1e-5, corners=4):
    """Boxes (one per velocity: linear, angular about the center) touching the ground with
    their lowest `corners` corners. Rows per contact: normal z, tangents x and y (the
    friction rows point at the normal). A = J M^-1 J^T (rank <= 6 per box) plus cfm on the
    diagonal; b = -J v."""
    hx, hy, hz = half
    inertia = mass / 3.0 * np.diag([hy * hy + hz * hz, hx * hx + hz * hz, hx * hx + hy * hy])
    points = [np.array([sx * hx, sy * hy, -hz]) for sx in (-1, 1) for sy in (-1, 1)][:corners]
    directions = np.eye(3)[[2, 0, 1]]
    nb = len(velocities)
    J = np.zeros((3 * corners * nb, 6 * nb))
    Minv = np.zeros((6 * nb, 6 * nb))
    lo, hi, findex = [], [], []
    for k in range(nb):
        Minv[6 * k:6 * k + 3, 6 * k:6 * k + 3] = np.eye(3) / mass
        Minv[6 * k + 3:6 * k + 6, 6 * k + 3:6 * k + 6] = np.linalg.inv(inertia)
        for c, r in enumerate(points):
            normal_row = 3 * (corners * k + c)
            for a, d in enumerate(directions):
                J[normal_row + a, 6 * k:6 * k + 3] = d
                J[normal_row + a, 6 * k + 3:6 * k + 6] = np.cross(r, d)
                lo.append(0.0 if a == 0 else -mu)
                hi.append(INF if a == 0 else mu)
                findex.append(-1 if a == 0 else normal_row)
    A = J @ Minv @ J.T + cfm * np.eye(len(J))
    b = -J @ np.concatenate(velocities)
    return A, b, np.array(lo), np.array(hi), np.array(findex, np.int64)


def assert_friction_cone(x, hi, findex, tol=1e-9):
    friction = findex >= 0
    normal = x[findex[friction]]
    assert np.all(normal >= -tol * np.abs(x).max())
    assert np.all(np.abs(x[friction]) <= hi[friction] * normal + tol * np.abs(x).max())


def test_box_corner_slides_with_coupled_rows():
    """One corner of a tall box sliding along x: the friction impulse also tips the box, so
    the normal impulse depends on the friction (the bounds fixed from the frictionless normal
    are stale) and friction is not free along y either."""
    mu = 0.3
    v = [np.array([2.0, 0.5, -1.0, 0.0, 0.0, 0.0])]
    A, b, lo, hi, findex = boxes_on_ground(v, mu, half=(0.05, 0.05, 0.3), corners=1, cfm=0.0)
    status, x, w = solve(A, b, lo, hi, findex)
    assert status == SOLVED
    assert_lcp_solution(A, b, lo, hi, findex, x, w, 1e-9)
    assert abs(x[0] - b[0] / A[0, 0]) > 0.1 * x[0]      # the friction changed the normal impulse
    assert w[0] == pytest.approx(0.0, abs=1e-9)         # the corner stops falling
    assert w[1] > 0.1                                   # still slides along +x, so friction
    assert x[1] == pytest.approx(-mu * x[0], rel=1e-9)  # is at its bound, against the sliding
    assert w[2] == pytest.approx(0.0, abs=1e-9) and abs(x[2]) < mu * x[0]   # sticks along y


@pytest.mark.parametrize("case", [
    "resting", "pushed", "sliding", "sliding and tilting"])
def test_two_box_feet(case):
    """8 contacts (4 corners of each of two boxes), 24 rows, A rank 12 + CFM 1e-5."""
    v = {"resting": [[0, 0, -0.1, 0, 0, 0], [0, 0, -0.1, 0, 0, 0]],
         "pushed": [[0.05, 0.02, -1.0, 0.1, -0.1, 0.0], [-0.05, 0.0, -0.5, 0.0, 0.2, 0.05]],
         "sliding": [[1.5, 0.5, -1.0, 0.0, 0.0, 0.3], [-1.0, 0.2, -0.5, 0.0, 0.0, -0.5]],
         "sliding and tilting": [[1.5, 0.5, -1.0, 2.0, -1.0, 0.3], [-1.0, 0.2, -0.5, -1.0, 3.0, -0.5]]}[case]
    mu = 0.6
    A, b, lo, hi, findex = boxes_on_ground([np.array(u, float) for u in v], mu)
    assert np.linalg.matrix_rank(A - 1e-5 * np.eye(24)) == 12
    status, x, w = solve(A, b, lo, hi, findex)
    assert status == SOLVED
    assert lcp_residual(A, b, lo, hi, findex, 24, x, w) < 1e-9
    assert_lcp_solution(A, b, lo, hi, findex, x, w, 1e-9)
    assert_friction_cone(x, hi, findex)
    normals = x[findex < 0]
    assert normals.sum() > 0
    if case.startswith("sliding"):     # some friction row at its bound, opposing the sliding
        friction = np.flatnonzero(findex >= 0)
        at_bound = friction[np.isclose(np.abs(x[friction]), mu * x[findex[friction]], rtol=1e-9)
                            & (x[findex[friction]] > 0)]
        assert len(at_bound) > 0
        assert np.all(x[at_bound] * w[at_bound] <= 0)


def test_random_box_feet_are_solved_by_pivoting():
    """Flat boxes with random velocities and friction: the pivoting method (with its
    friction-bound refinement) must solve every one."""
    rng = np.random.default_rng(7)
    for _ in range(100):
        half = (rng.uniform(0.05, 0.15), rng.uniform(0.03, 0.1), rng.uniform(0.01, 0.05))
        v = [rng.normal(size=6) * [1, 1, 0.3, 1, 1, 1] + [0, 0, -1, 0, 0, 0] for _ in range(2)]
        mu = rng.uniform(0.2, 1.0)
        A, b, lo, hi, findex = boxes_on_ground(v, mu, half=half)
        status, x, w = solve(A, b, lo, hi, findex)
        assert status == SOLVED
        assert_lcp_solution(A, b, lo, hi, findex, x, w, 1e-9)
        assert_friction_cone(x, hi, findex)



@pytest.mark.parametrize("case", ["block sticks", "box feet resting"])
def test_the_warm_starts_active_set_is_solved_without_pivoting(case):
    """A warm start with the solution's active set (the last step's, for a robot that holds
    still) is solved by one solve: with no pivots allowed (max_pivots=0, which else hands the
    problem to PGS) the result is still SOLVED, and the pivoting's solution; a warm start with
    another active set (zeros) is not."""
    if case == "block sticks":
        A, b, lo, hi, findex = block_on_ground(0.2)
    else:
        A, b, lo, hi, findex = boxes_on_ground([np.array([0.0, 0.0, -0.1, 0.0, 0.0, 0.0])] * 2, 0.6)
    status, exact, _ = solve(A, b, lo, hi, findex)
    assert status == SOLVED
    friction = findex >= 0
    assert np.all(np.abs(exact[friction]) < hi[friction] * exact[findex[friction]])   # all stick
    status, x, w = solve(A, b, lo, hi, findex, x0=1.5 * exact, iterations=1, max_pivots=0)
    assert status == SOLVED
    # the box feet's A has condition ~1e5 (rank 12 plus CFM 1e-5): rounding of ~1e-11 of max|x|
    np.testing.assert_allclose(x, exact, rtol=1e-9, atol=1e-9 * np.abs(exact).max())
    assert_lcp_solution(A, b, lo, hi, findex, x, w, 1e-9)
    assert solve(A, b, lo, hi, findex, iterations=1, max_pivots=0)[0] != SOLVED


def test_a_warm_start_at_the_friction_cone_goes_to_pivoting():
    """A sliding contact's friction row sits at a bound tied to its normal, which the one solve
    does not handle: that warm start is left to the pivoting (none allowed here: PGS)."""
    A, b, lo, hi, findex = block_on_ground(3.0)
    status, exact, _ = solve(A, b, lo, hi, findex)
    assert status == SOLVED and exact[1] == pytest.approx(-0.5 * exact[0], rel=1e-12)
    assert solve(A, b, lo, hi, findex, x0=exact, iterations=1, max_pivots=0)[0] != SOLVED


# ---- the PGS fallback ----

def diagonally_dominant_problem(n=8, seed=3):
    rng = np.random.default_rng(seed)
    B = rng.normal(size=(n, n)) * 0.1
    A = B @ B.T + np.eye(n)
    b = rng.normal(size=n)
    lo = np.where(np.arange(n) % 2 == 0, 0.0, -INF)
    hi = np.full(n, INF)
    return A, b, lo, hi


def test_pgs_takes_over_at_the_pivot_limit():
    A, b, lo, hi = diagonally_dominant_problem()
    status0, x0, _ = solve(A, b, lo, hi)
    assert status0 == SOLVED
    tolerance = 1e-8
    status, x, w = solve(A, b, lo, hi, iterations=200, tolerance=tolerance, max_pivots=0)
    assert status == PGS
    assert lcp_residual(A, b, lo, hi, -np.ones(len(b), np.int64), len(b), x, w) <= tolerance
    assert_lcp_solution(A, b, lo, hi, -np.ones(len(b)), x, w, tolerance)
    np.testing.assert_allclose(x, x0, atol=1e-6)


def test_pgs_starts_from_the_warm_start():
    """The solution, but row 0 (at its bound 0) nudged inside: the active set it implies is not
    the solution's (so the one solve from it fails), and PGS converges from it in one sweep."""
    A, b, lo, hi = diagonally_dominant_problem()
    _, exact, _ = solve(A, b, lo, hi)
    assert exact[0] == 0.0 and lo[0] == 0.0
    nudged = exact.copy()
    nudged[0] = 1e-9
    assert solve(A, b, lo, hi, x0=nudged, iterations=1, max_pivots=0)[0] == PGS
    assert solve(A, b, lo, hi, iterations=1, max_pivots=0)[0] == PGS_FAILED


def test_pgs_fails_on_a_slowly_converging_problem():
    """(Row 0 unilateral: the zero warm start puts it at its bound, not in the solution's
    active set, so the one solve from the warm start does not solve it either.)"""
    A = np.array([[1.0, 0.999], [0.999, 1.0]])
    b = np.array([1.0, -1.0])
    lo, hi = np.array([0.0, -INF]), np.full(2, INF)
    assert solve(A, b, lo, hi)[0] == SOLVED
    assert solve(A, b, lo, hi, max_pivots=0)[0] == PGS_FAILED


def test_redundant_rows_without_cfm_go_to_pgs():
    """Two identical contact rows (no CFM): the second row's pivot is zero, and PGS finds one
    of the many solutions."""
    A = np.ones((2, 2))
    b = np.array([1.0, 2.0])
    lo, hi = np.zeros(2), np.full(2, INF)
    status, x, w = solve(A, b, lo, hi)
    assert status == PGS
    assert_lcp_solution(A, b, lo, hi, -np.ones(2), x, w, 1e-6)


def test_indefinite_matrix_fails():
    A = np.array([[1.0, 2.0], [2.0, 1.0]])
    b = np.array([1.0, 1.0])
    status, x, w = solve(A, b, np.full(2, -INF), np.full(2, INF))
    assert status == PGS_FAILED


# ---- interface ----

def test_inputs_unchanged_and_padding_ignored():
    """Arrays of nmax rows with NaN / garbage beyond the n used, a garbage workspace: same
    result as exact-size arrays, and A, b, lo, hi, findex untouched."""
    rng = np.random.default_rng(11)
    v = [np.array([1.5, 0.5, -1.0, 2.0, -1.0, 0.3]), np.array([-1.0, 0.2, -0.5, -1.0, 3.0, -0.5])]
    A, b, lo, hi, findex = boxes_on_ground(v, 0.6)
    n, nmax = len(b), len(b) + 7
    status_ref, x_ref, w_ref = solve(A, b, lo, hi, findex)

    def padded(a, fill):
        out = np.full((nmax,) * a.ndim, fill, dtype=a.dtype)
        out[tuple(slice(0, n) for _ in range(a.ndim))] = a
        return out

    Ap, bp, lop, hip = (padded(a, np.nan) for a in (A, b, lo, hi))
    findexp = padded(findex, 10 ** 9)
    xp, wp = padded(np.zeros(n), np.nan), padded(np.zeros(n), np.nan)
    nf, ni = lcp_workspace_size(nmax)
    wf = np.full(nf, np.nan)
    wi = rng.integers(-10 ** 9, 10 ** 9, ni)
    inputs = [a.copy() for a in (Ap, bp, lop, hip, findexp)]
    status = solve_boxed_lcp(Ap, bp, lop, hip, findexp, n, xp, wp, wf, wi, 30, 1e-6)
    assert status == status_ref == SOLVED
    np.testing.assert_array_equal(xp[:n], x_ref)
    np.testing.assert_array_equal(wp[:n], w_ref)
    assert np.all(np.isnan(xp[n:])) and np.all(np.isnan(wp[n:]))
    for before, after in zip(inputs, (Ap, bp, lop, hip, findexp)):
        np.testing.assert_array_equal(before, after)


def test_inputs_unchanged_when_pgs_runs():
    A = np.ones((2, 2))
    b = np.array([1.0, 2.0])
    lo, hi, findex = np.zeros(2), np.full(2, INF), -np.ones(2, np.int64)
    inputs = [a.copy() for a in (A, b, lo, hi, findex)]
    assert solve(A, b, lo, hi, findex)[0] == PGS
    for before, after in zip(inputs, (A, b, lo, hi, findex)):
        np.testing.assert_array_equal(before, after)


def test_empty_problem_and_short_workspace():
    A, b, lo, hi = diagonally_dominant_problem(4)
    x, w = np.zeros(4), np.zeros(4)
    nf, ni = lcp_workspace_size(4)
    findex = -np.ones(4, np.int64)
    assert solve_boxed_lcp(A, b, lo, hi, findex, 0, x, w, np.zeros(0), np.zeros(0, np.int64), 30, 1e-6) == SOLVED
    with pytest.raises(ValueError):
        solve_boxed_lcp(A, b, lo, hi, findex, 4, x, w, np.zeros(nf - 1), np.zeros(ni, np.int64), 30, 1e-6)
    with pytest.raises(ValueError):
        solve_boxed_lcp(A, b, lo, hi, findex, 5, x, w, np.zeros(nf * 2), np.zeros(ni * 2, np.int64), 30, 1e-6)


def test_residual_sees_each_violation():
    A = np.array([[2.0, 0.5], [0.5, 1.0]])
    b = np.array([1.0, -1.0])
    lo, hi, findex = np.zeros(2), np.full(2, INF), -np.ones(2, np.int64)
    x = np.array([0.5, 0.0])                 # row 0 inside, w_0 = 0; row 1 at lo, w_1 = 1.25
    w = A @ x - b
    assert lcp_residual(A, b, lo, hi, findex, 2, x, w) < 1e-15
    bad_x = np.array([0.5, -0.1])            # below lo (w made consistent)
    assert lcp_residual(A, b, lo, hi, findex, 2, bad_x, A @ bad_x - b) > 0.05
    inside = np.array([0.5, 0.2])            # strictly inside with w != 0
    assert lcp_residual(A, b, lo, hi, findex, 2, inside, A @ inside - b) > 0.05
    assert lcp_residual(A, b, lo, hi, findex, 2, x, w + [0.0, 0.1]) > 0.05   # A x != b + w
    wrong_sign = np.array([0.0, 2.0])        # at lo of row 0 with w_0 < 0
    assert lcp_residual(A, b, lo, hi, findex, 2, wrong_sign, A @ wrong_sign - b) > 0.05
    friction = np.array([-1, 0])             # row 1 bounded by 0.1 |x_0| = 0.05
    hi_f = np.array([INF, 0.1])
    assert lcp_residual(A, b, lo, hi_f, friction, 2, np.array([0.5, 0.2]), np.zeros(2)) > 0.05
    assert lcp_residual(A, b, lo, hi, findex, 2, np.array([np.nan, 0.0]), w) == np.inf


def _banded_spd(rng, n, band):
    """A symmetric positive definite matrix zero outside |i - j| <= band (band n: dense)."""
    B = rng.normal(size=(n, n))
    A = B @ B.T + 0.1 * np.eye(n)
    i, j = np.indices((n, n))
    A[np.abs(i - j) > band] = 0.0
    return A + n * np.eye(n)      # still definite after the cut


@pytest.mark.parametrize("band", [9, 2])
def test_cholesky_updates_match_a_fresh_factor(band):
    # band 2: rows whose A_CC row starts late, so the factor's profile (first) is what skips
    # work; a removal in the middle shifts the profiles of the rows after it
    rng = np.random.default_rng(5)
    n = 9
    A = _banded_spd(rng, n, band)
    L = np.full((n, n), np.nan)           # entries outside the profile must never be read
    clamped = np.zeros(n, np.int64)
    first = np.zeros(n, np.int64)
    rows = [0, 2, 4, 5, 7, 8] if band == 2 else [4, 0, 7, 2, 8, 5]
    for nc, j in enumerate(rows):
        assert cholesky_add(L, A, clamped, first, nc, j)
    v = np.zeros(n)
    for position in (2, 0, 3):               # middle, first, last
        nc = len(rows)
        cholesky_remove(L, clamped, first, nc, position, v)
        del rows[position]
        nc -= 1
        assert list(clamped[:nc]) == rows
        Acc = A[np.ix_(rows, rows)]
        profile = (np.arange(nc)[None, :] >= first[:nc, None]) & (np.tri(nc) > 0)
        expected = np.linalg.cholesky(Acc)
        np.testing.assert_allclose(np.where(profile, L[:nc, :nc], 0.0), expected, atol=1e-12)
        assert np.all(expected[~profile] == 0.0)        # the profile holds every nonzero
        rhs = rng.normal(size=nc)
        v[:nc] = rhs
        cholesky_solve(L, first, nc, v)
        np.testing.assert_allclose(v[:nc], np.linalg.solve(Acc, rhs), atol=1e-10)
    if band == 2:
        assert first[1] > 0                   # the skip was exercised
    singular = np.ones((2, 2))
    L2, c2, f2 = np.zeros((2, 2)), np.zeros(2, np.int64), np.zeros(2, np.int64)
    assert cholesky_add(L2, singular, c2, f2, 0, 0)
    assert not cholesky_add(L2, singular, c2, f2, 1, 1)     # the second of two equal rows
    nearly = np.array([[1.0, 1.0], [1.0, 1.0 + 1e-14]])
    assert not cholesky_add(L2, nearly, c2, f2, 1, 1)       # a pivot of 1e-14 A_jj counts as singular
