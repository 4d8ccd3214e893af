"""Velocity-level constraints: contacts with friction, joint limits, locked joints, loop closures
(numba kernels that the step kernel calls).

DART's scheme (`../shared/docs/formats-and-solvers.md` section 4), once per step after the
unconstrained velocity update v* = v + dt qdd:
  rows J (m x nv) with bounds and targets, A = J M^-1 J^T (M factored along the tree, never
  inverted), the boxed LCP  A x = b + w  with b = target - J v*, then v+ = v* + M^-1 J^T x.
Every row is the rate of change of a scalar e(q): a linear row d . (velocity of body a at
point pa - velocity of body b at point pb), an angular row d . (w_a - w_b). Rows of a direction
fixed on one body are evaluated at the other body's point, which makes them the exact rate of
the constraint function (the direction's own rotation cancels).

  contact   normal row [0, inf) with restitution and penetration correction (ERP, max ERV),
            two friction rows bounded by mu times the normal impulse (first along the sliding)
  limit     one-sided, speculative: active when the step would cross the limit, target the
            limit itself, so a joint stops at its limit instead of overshooting by v dt
  velocity  one-sided: |v+| <= velocity limit; effort limits clamp the applied tau
  lock      bilateral, back to the initial position with joint_erp
  loop      bilateral with Baumgarte stabilization (joint_erp): ball/xyz, weld, hinge,
            xy/piston/point_line, z/point_plane, distance, revolute_spherical,
            revolute_translational (Chrono's definition), parallel (the axes stay parallel:
            a hinge's two angular rows), orientation (a weld's three angular rows); a loop's
            link may be None, the world (its points and axis then in world coordinates)
  force     spring length stops (one-sided, before the loops), motor and coupler rows (after
            them): dynamics/forces.py builds them; motor guides are loops

Penalty contact (Chrono SMC) is the alternative for contacts: a spring-damper normal force and
regularized Coulomb friction applied as external body forces before ABA.
"""
from __future__ import annotations

import math
from collections import namedtuple

import numpy as np

from ..model import ModelError
from . import kernels
from .kernels import aba_solve, copy_into, crba, inline, internal, kernel, rnea, world_poses
from .gauss_seidel import gauss_seidel, row_range, tree_ranges
from .lcp import lcp_workspace_size, solve_boxed_lcp
from .views import array_view

# loop closure kinds -> rows
(LOOP_BALL, LOOP_WELD, LOOP_HINGE, LOOP_LINE, LOOP_PLANE, LOOP_DISTANCE, LOOP_REV_SPH, LOOP_REV_TRANS,
 LOOP_PARALLEL, LOOP_ORIENTATION) = range(1, 11)
LOOP_KINDS = {
    "ball": (LOOP_BALL, 3), "xyz": (LOOP_BALL, 3), "weld": (LOOP_WELD, 6), "hinge": (LOOP_HINGE, 5),
    "xy": (LOOP_LINE, 2), "piston": (LOOP_LINE, 2), "point_line": (LOOP_LINE, 2),
    "z": (LOOP_PLANE, 1), "point_plane": (LOOP_PLANE, 1), "distance": (LOOP_DISTANCE, 1),
    "revolute_spherical": (LOOP_REV_SPH, 2), "revolute_translational": (LOOP_REV_TRANS, 4),
    "parallel": (LOOP_PARALLEL, 2), "orientation": (LOOP_ORIENTATION, 3),
}
# what a row is, for reporting
ROW_CONTACT, ROW_FRICTION, ROW_LIMIT, ROW_VELOCITY, ROW_LOCK, ROW_LOOP, ROW_MOTOR, ROW_COUPLER, ROW_STOP = range(1, 10)
# contact methods
CONTACT_NONE, CONTACT_LCP, CONTACT_PENALTY = 0, 1, 2
CONTACT_METHODS = {"none": CONTACT_NONE, "lcp": CONTACT_LCP, "penalty": CONTACT_PENALTY}

# solver options (one float array, so that the step kernel takes one argument for all)
# r.dof_parent[0] == DENSE_ROOT: the mass matrix is singular (massless bodies that only the
# constraints determine): dof_parent chains every DOF to the one before it, so _factor_tree
# factors a dense matrix, and the step solves the free motion with the constraint rows
# (apply_impulses) instead of ABA
DENSE_ROOT = -2
ABA_SOLVE_ROWS = 4      # apply_impulses: up to this many rows without contact, H^-1 J^T by aba_solve

# problems of at least ITERATIVE_ROWS rows, none of them bilateral (loops, locks, motors: chains
# of them converge slowly and must hold tight), with inertia in every direction, are solved by
# Gauss-Seidel first (gauss_seidel.py), by the pivoting solver when ITERATIVE_SWEEPS sweeps did
# not reach ITERATIVE_TOLERANCE (a warm-started steady contact converges in a few sweeps; more
# rarely pays: what does not converge in 10 mostly does not in 1000). 30 rows: a robot's feet on
# the ground (SR1: 8 contacts, 28 rows, light feet under a heavy trunk) seldom converge in 10
# sweeps, and the pivoting solver is fast at that size; a ten-contact grasp does, and a stack of
# ten boxes does in all but about one step in a thousand once the pivoting solver has settled it.
ITERATIVE_ROWS = 30
ITERATIVE_SWEEPS = 10
ITERATIVE_TOLERANCE = 1e-4
# After Gauss-Seidel failed, the pivoting solver takes the next ITERATIVE_HOLDOFF steps alone. A
# problem it fails on once it mostly fails on again: a stack of boxes, whose weight Gauss-Seidel
# spreads down slowly, converges only from an exact warm start, and its own results are not
# exact (from them it needs 100-350 sweeps), so trying it every step doubles the stack's cost.
ITERATIVE_HOLDOFF = 100

Options = namedtuple("Options", [
    "contact_method", "erp", "max_erv", "cfm", "joint_erp", "bounce_velocity", "contact_margin",
    "contact_stiffness", "contact_damping", "friction_velocity", "pgs_iterations", "pgs_tolerance",
    "iterative_rows", "iterative_sweeps", "iterative_tolerance",
])
OPTIONS_DEFAULTS = dict(contact_method="lcp", erp=0.01, max_erv=1e-3, cfm=1e-5, joint_erp=0.2,
                        bounce_velocity=0.1, contact_margin=0.0, contact_stiffness=1e5,
                        contact_damping=1e3, friction_velocity=1e-3, pgs_iterations=30,
                        pgs_tolerance=1e-6, iterative_rows=ITERATIVE_ROWS, iterative_sweeps=ITERATIVE_SWEEPS,
                        iterative_tolerance=ITERATIVE_TOLERANCE)

# static rules (what to constrain), carved from (rf, ri)
Rules = namedtuple("Rules", [
    "dof_parent",  # int64[nv] parent DOF in the tree, -1 at a root: the sparsity of M
    "dof_q",       # int64[nv] q index of a one-coordinate DOF (custom joints' too), -1 inside ball and free joints
    "locked",      # int64[nv] 1 = held at lock_q
    "lower", "upper", "velocity_limit", "effort_limit", "lock_q",   # f8[nv]
    "loop_kind", "loop_la", "loop_lb", "loop_row0",                  # int64[nloop]
    "loop_pa", "loop_pb", "loop_ua", "loop_u1", "loop_u2",           # f8[nloop,3] (link frames)
    "loop_rrel",   # f8[nloop,3,3] weld: link b's orientation in link a's
    "loop_dist",   # f8[nloop]
    "world_R",     # f8[3,3] identity: the orientation of the world as a loop's link (None)
])

# per-step workspace, carved from (sf, si)
Solver = namedtuple("Solver", [
    "J", "Y",          # f8[mmax,nv] rows and M^-1 J^T (one row each)
    "A",               # f8[mmax,mmax]
    "b", "lo", "hi", "x", "w",   # f8[mmax]
    "tau_applied",     # f8[nv] tau clamped to the effort limits
    "scratch",         # f8[8,3]
    "cdir",            # f8[maxc,3,3] contact frame rows: normal, tangent 1, tangent 2 (world)
    "cforce",          # f8[maxc,3] force on body a (world)
    "cprev_point", "cprev_x",    # f8[maxc,3] last step's contacts for warm starts: point, impulse (world)
    "diag",            # f8[mmax] A_ii (1 + cfm), 0 for a row no motion changes
    "u", "u_before",   # f8[nv] Gauss-Seidel's velocity change sum_i Y_i x_i, and before a sweep
    "loop_x",          # f8[nlooprows] last step's loop impulses
    "joint_x",         # f8[2,nv] last step's limit and velocity-limit impulse on each DOF
    "findex", "row_kind", "row_src",   # int64[mmax]
    "csel",            # int64[maxc] which detected contacts became rows
    "row_lo", "row_hi",          # int64[mmax] the DOF range of a row's J and Y (gauss_seidel.py)
    "tree_start", "tree_end",    # int64[nv] the DOF range of each DOF's tree
    "cprev_geom",      # int64[maxc,2]
    "stats",           # int64[10]: ncon used, m, last LCP status, PGS fallbacks, PGS failures, contacts dropped,
                       # nprev, Gauss-Seidel solves left to the pivoting solver, the last one's sweeps,
                       # steps before Gauss-Seidel is tried again
])
(STAT_NCON, STAT_ROWS, STAT_STATUS, STAT_FALLBACKS, STAT_FAILURES, STAT_DROPPED, STAT_NPREV, STAT_GS_UNCONVERGED,
 STAT_GS_SWEEPS, STAT_GS_HOLDOFF) = range(10)
GAUSS_SEIDEL = 3     # STAT_STATUS after Gauss-Seidel converged (solve_boxed_lcp's are 0, 1, 2)


# Layouts: {field: length} in carve order, float and int buffer (as kernels.tree_layout).
def rules_layout(nv, nloop):
    """carve_rules' fields: (float {field: length}, int {field: length})."""
    floats = dict(lower=nv, upper=nv, velocity_limit=nv, effort_limit=nv, lock_q=nv, loop_pa=3 * nloop,
                  loop_pb=3 * nloop, loop_ua=3 * nloop, loop_u1=3 * nloop, loop_u2=3 * nloop, loop_rrel=9 * nloop,
                  loop_dist=nloop, world_R=9)
    ints = dict(dof_parent=nv, dof_q=nv, locked=nv, loop_kind=nloop, loop_la=nloop, loop_lb=nloop, loop_row0=nloop)
    return floats, ints


def rules_sizes(nv, nloop):
    """(float, int) buffer lengths that carve_rules lays out."""
    floats, ints = rules_layout(nv, nloop)
    return sum(floats.values()), sum(ints.values())


def solver_layout(mmax, nv, maxc, nlooprows):
    """carve_solver's fields: (float {field: length}, int {field: length})."""
    floats = dict(J=mmax * nv, Y=mmax * nv, A=mmax * mmax, b=mmax, lo=mmax, hi=mmax, x=mmax, w=mmax, tau_applied=nv,
                  scratch=24, cdir=9 * maxc, cforce=3 * maxc, cprev_point=3 * maxc, cprev_x=3 * maxc,
                  loop_x=nlooprows, joint_x=2 * nv, diag=mmax, u=nv, u_before=nv)
    ints = dict(findex=mmax, row_kind=mmax, row_src=mmax, csel=maxc, row_lo=mmax, row_hi=mmax, tree_start=nv,
                tree_end=nv, cprev_geom=2 * maxc, stats=10)
    return floats, ints


def solver_sizes(mmax, nv, maxc, nlooprows):
    """(float, int) buffer lengths that carve_solver lays out."""
    floats, ints = solver_layout(mmax, nv, maxc, nlooprows)
    return sum(floats.values()), sum(ints.values())


@internal
def carve_rules(rf, ri, nv, nloop):
    o = 0
    lower = array_view(rf, o, nv); o += nv
    upper = array_view(rf, o, nv); o += nv
    velocity_limit = array_view(rf, o, nv); o += nv
    effort_limit = array_view(rf, o, nv); o += nv
    lock_q = array_view(rf, o, nv); o += nv
    loop_pa = array_view(rf, o, (nloop, 3)); o += 3 * nloop
    loop_pb = array_view(rf, o, (nloop, 3)); o += 3 * nloop
    loop_ua = array_view(rf, o, (nloop, 3)); o += 3 * nloop
    loop_u1 = array_view(rf, o, (nloop, 3)); o += 3 * nloop
    loop_u2 = array_view(rf, o, (nloop, 3)); o += 3 * nloop
    loop_rrel = array_view(rf, o, (nloop, 3, 3)); o += 9 * nloop
    loop_dist = array_view(rf, o, nloop); o += nloop
    world_R = array_view(rf, o, (3, 3)); o += 9
    k = 0
    dof_parent = array_view(ri, k, nv); k += nv
    dof_q = array_view(ri, k, nv); k += nv
    locked = array_view(ri, k, nv); k += nv
    loop_kind = array_view(ri, k, nloop); k += nloop
    loop_la = array_view(ri, k, nloop); k += nloop
    loop_lb = array_view(ri, k, nloop); k += nloop
    loop_row0 = array_view(ri, k, nloop); k += nloop
    rules = Rules(dof_parent, dof_q, locked, lower, upper, velocity_limit, effort_limit, lock_q,
                  loop_kind, loop_la, loop_lb, loop_row0, loop_pa, loop_pb, loop_ua, loop_u1,
                  loop_u2, loop_rrel, loop_dist, world_R)
    return rules, o, k


@internal
def carve_solver(sf, si, mmax, nv, maxc, nlooprows):
    o = 0
    J = array_view(sf, o, (mmax, nv)); o += mmax * nv
    Y = array_view(sf, o, (mmax, nv)); o += mmax * nv
    A = array_view(sf, o, (mmax, mmax)); o += mmax * mmax
    b = array_view(sf, o, mmax); o += mmax
    lo = array_view(sf, o, mmax); o += mmax
    hi = array_view(sf, o, mmax); o += mmax
    x = array_view(sf, o, mmax); o += mmax
    w = array_view(sf, o, mmax); o += mmax
    tau_applied = array_view(sf, o, nv); o += nv
    scratch = array_view(sf, o, (8, 3)); o += 24
    cdir = array_view(sf, o, (maxc, 3, 3)); o += 9 * maxc
    cforce = array_view(sf, o, (maxc, 3)); o += 3 * maxc
    cprev_point = array_view(sf, o, (maxc, 3)); o += 3 * maxc
    cprev_x = array_view(sf, o, (maxc, 3)); o += 3 * maxc
    loop_x = array_view(sf, o, nlooprows); o += nlooprows
    joint_x = array_view(sf, o, (2, nv)); o += 2 * nv
    diag = array_view(sf, o, mmax); o += mmax
    u = array_view(sf, o, nv); o += nv
    u_before = array_view(sf, o, nv); o += nv
    k = 0
    findex = array_view(si, k, mmax); k += mmax
    row_kind = array_view(si, k, mmax); k += mmax
    row_src = array_view(si, k, mmax); k += mmax
    csel = array_view(si, k, maxc); k += maxc
    row_lo = array_view(si, k, mmax); k += mmax
    row_hi = array_view(si, k, mmax); k += mmax
    tree_start = array_view(si, k, nv); k += nv
    tree_end = array_view(si, k, nv); k += nv
    cprev_geom = array_view(si, k, (maxc, 2)); k += 2 * maxc
    stats = array_view(si, k, 10); k += 10
    solver = Solver(J, Y, A, b, lo, hi, x, w, tau_applied, scratch, cdir, cforce, cprev_point,
                    cprev_x, diag, u, u_before, loop_x, joint_x, findex, row_kind, row_src, csel, row_lo, row_hi, tree_start,
                    tree_end, cprev_geom, stats)
    return solver, o, k


# ------------------------------------------------------------------------- compiling ---
class ConstraintSet:
    """The rules of one compiled world (buffers rf, ri) and the solver workspace (sf, si, lf, li);
    the kernels take them as two bundles, rule_buffers (rf, ri, sizes) and solver_buffers.
    `sizes` = (nv, loops, max rows, contact capacity, loop and drive rows, max contacts in the LCP).
    forces (a forces.ForceSet, optional) adds its motor guides as loops and room for its rows:
    stops before the loop rows, drive rows (motors, couplers) after them, warm-started with them."""

    def __init__(self, compiled, geomset, max_contacts, forces=None):
        models = compiled.models
        tree = compiled.tree
        nv = compiled.nv
        self.nv = nv
        dof_parent = np.full(nv, -1, dtype=np.int64)
        dof_q = np.full(nv, -1, dtype=np.int64)
        for i in range(len(tree.parent)):
            iv, n, p = tree.iv[i], tree.nvb[i], tree.parent[i]
            dof_parent[iv] = -1 if p < 0 else tree.iv[p] + tree.nvb[p] - 1
            for k in range(1, n):
                dof_parent[iv + k] = iv + k - 1
            if tree.jtype[i] not in (kernels.SPHERICAL, kernels.FREE):   # one coordinate per DOF
                for k in range(n):
                    dof_q[iv + k] = tree.iq[i] + k
        lower, upper, vlim, elim, lock_q = (np.full(nv, -np.inf), np.full(nv, np.inf),
                                            np.full(nv, np.inf), np.full(nv, np.inf), np.zeros(nv))
        locked = np.zeros(nv, dtype=np.int64)
        v_off = 0
        for model in models:
            for joint in model.joints:
                sl = slice(v_off + joint.v_index, v_off + joint.v_index + joint.nv)
                if joint.type not in ("ball", "free"):   # a quaternion has no position limits
                    lower[sl], upper[sl] = joint.lower, joint.upper
                    lock_q[sl] = joint.q0
                    bad = np.nonzero(joint.lower > joint.upper)[0]
                    if bad.size:
                        raise ModelError(f"joint {joint.name!r}: lower limit {joint.lower[bad[0]]} is above "
                                         f"the upper limit {joint.upper[bad[0]]}")
                vlim[sl], elim[sl] = joint.velocity_limit, joint.effort_limit
                locked[sl] = joint.locked_dofs
            v_off += model.nv
        self.loops = [lc for model in models for lc in model.constraints]
        self.loop_models = [mi for mi, model in enumerate(models) for _ in model.constraints]
        if forces is not None:
            self.loops += forces.guide_loops
            self.loop_models += forces.guide_models
        stop_rows, drive_rows = (0, 0) if forces is None else (forces.stop_rows, forces.drive_rows)
        nloop = len(self.loops)
        rf = np.zeros(rules_sizes(nv, nloop)[0])
        ri = np.zeros(rules_sizes(nv, nloop)[1], dtype=np.int64)
        rules, used_f, used_i = carve_rules.py_func(rf, ri, nv, nloop)
        assert (used_f, used_i) == (len(rf), len(ri)), "rules_sizes disagrees with carve_rules"
        if len(getattr(compiled, "determined_v", ())):      # compiled.constrained_massless
            dof_parent = np.arange(-1, nv - 1, dtype=np.int64)
            dof_parent[0] = DENSE_ROOT
        rules.dof_parent[:], rules.dof_q[:], rules.locked[:] = dof_parent, dof_q, locked
        rules.lower[:], rules.upper[:], rules.velocity_limit[:] = lower, upper, vlim
        rules.effort_limit[:], rules.lock_q[:] = elim, lock_q
        rules.world_R[:] = np.eye(3)
        nlooprows = self._compile_loops(compiled, rules)
        self.rf, self.ri, self.rules, self.nloop, self.nlooprows = rf, ri, rules, nloop, nlooprows
        # contact arrays hold every detected contact (penalty forces act on all of them); the
        # LCP takes the max_contacts deepest; rows: 3 per contact, a position and a velocity
        # limit per limited DOF, locks, loops
        has_pairs = geomset is not None and len(geomset.geoms.pairs) > 0
        self.capacity = geomset.capacity if has_pairs else 1
        self.max_contacts = min(max_contacts, self.capacity) if has_pairs else 0
        limited = np.isfinite(lower) | np.isfinite(upper)
        self.mmax = max(1, 3 * self.max_contacts + int(limited.sum()) + int(np.isfinite(vlim).sum())
                        + int(locked.sum()) + nlooprows + stop_rows + drive_rows)
        ccap, lrows = self.capacity, max(nlooprows + drive_rows, 1)
        sizes = solver_sizes(self.mmax, nv, ccap, lrows)
        self.sf = np.zeros(sizes[0])
        self.si = np.zeros(sizes[1], dtype=np.int64)
        self.solver, used_f, used_i = carve_solver.py_func(self.sf, self.si, self.mmax, nv, ccap, lrows)
        assert (used_f, used_i) == (len(self.sf), len(self.si)), "solver_sizes disagrees with carve_solver"
        lf, li = lcp_workspace_size(self.mmax)
        self.lf = np.zeros(lf)
        self.li = np.zeros(li, dtype=np.int64)
        self.sizes = np.array([nv, nloop, self.mmax, ccap, lrows, self.max_contacts], dtype=np.int64)
        self.rule_buffers = (rf, ri, self.sizes)                    # the kernels' `rules` argument
        self.solver_buffers = (self.sf, self.si, self.lf, self.li)  # their `solver` argument

    def _compile_loops(self, compiled, rules):
        """Loop closure geometry in the link frames, completed from the initial configuration
        (the hinge's axis on link b, the weld's relative orientation, default distances)."""
        if not self.loops:
            return 0
        df, data = compiled.new_data()
        q0 = np.concatenate([m.initial_q() for m in compiled.models])
        kernels.kinematics_kernel(compiled.tf, compiled.ti, df, q0, np.zeros(compiled.nv))
        row = 0
        for k, lc in enumerate(self.loops):
            mi = self.loop_models[k]
            model = compiled.models[mi]
            if lc.type not in LOOP_KINDS:
                raise ModelError(f"loop constraint {lc.name!r}: type {lc.type!r}; expected one of "
                                 f"{', '.join(LOOP_KINDS)}")
            for which in (lc.link1, lc.link2):
                if which is not None and which not in {l.name for l in model.links}:
                    raise ModelError(f"loop constraint {lc.name!r}: no link named {which!r} in model {model.name!r}")
            if lc.link1 is None and lc.link2 is None:
                raise ModelError(f"loop constraint {lc.name!r}: both sides are the world")
            kind, nrows = LOOP_KINDS[lc.type]
            # link None is the world: index -1, identity pose
            la, lb = (-1 if ln is None else compiled.link_index(mi, ln) for ln in (lc.link1, lc.link2))
            Ra, pa0 = (np.eye(3), np.zeros(3)) if la < 0 else (data.link_R[la].copy(), data.link_p[la].copy())
            Rb, pb0 = (np.eye(3), np.zeros(3)) if lb < 0 else (data.link_R[lb].copy(), data.link_p[lb].copy())
            pa = pa0 + Ra @ lc.pos1
            pb = pb0 + Rb @ lc.pos2
            axis = np.asarray(lc.axis, float) / np.linalg.norm(lc.axis)
            ua_w = Ra @ axis
            # two directions perpendicular to the axis: on link a (line rows), on link b (hinge rows)
            e = np.array([1.0, 0, 0]) if abs(axis[0]) < 0.9 else np.array([0, 1.0, 0])
            n1 = np.cross(axis, e); n1 /= np.linalg.norm(n1)
            n2 = np.cross(axis, n1)
            u1, u2 = n1, n2
            if kind == LOOP_HINGE or kind == LOOP_PARALLEL:
                u1, u2 = Rb.T @ (Ra @ n1), Rb.T @ (Ra @ n2)
            dist = float(lc.params.get("distance", np.nan))
            if kind in (LOOP_DISTANCE, LOOP_REV_SPH) and not np.isfinite(dist):
                dist = float(np.linalg.norm(pa - pb))
            if kind == LOOP_REV_TRANS:
                # Chrono: z1 = axis on a; x2, y2 on b (x2 from a's point to b's point by default)
                x2 = lc.params.get("x2")
                if x2 is None:
                    d12 = pb - pa - ua_w * ua_w.dot(pb - pa)
                    if np.linalg.norm(d12) < 1e-9:
                        raise ModelError(f"loop constraint {lc.name!r}: revolute_translational needs the two "
                                         "points apart across the axis, or params x2 (link2 frame)")
                    x2 = Rb.T @ (d12 / np.linalg.norm(d12))
                x2 = np.asarray(x2, float) / np.linalg.norm(x2)
                y2 = lc.params.get("y2")
                y2 = Rb.T @ np.cross(ua_w, Rb @ x2) if y2 is None else np.asarray(y2, float)
                u1, u2 = x2, y2 / np.linalg.norm(y2)
                if not np.isfinite(dist):
                    dist = float((pb - pa).dot(Rb @ u1))
            rules.loop_kind[k], rules.loop_la[k], rules.loop_lb[k], rules.loop_row0[k] = kind, la, lb, row
            rules.loop_pa[k], rules.loop_pb[k], rules.loop_ua[k] = lc.pos1, lc.pos2, axis
            rules.loop_u1[k], rules.loop_u2[k] = u1, u2
            rules.loop_rrel[k] = Ra.T @ Rb
            rules.loop_dist[k] = 0.0 if not np.isfinite(dist) else dist
            row += nrows
        return row


def options_array(**options):
    """The Options as one float array (unknown names are a TypeError)."""
    values = dict(OPTIONS_DEFAULTS)
    for key, value in options.items():
        if key not in values:
            raise TypeError(f"unknown solver option {key!r}; expected one of {', '.join(OPTIONS_DEFAULTS)}")
        values[key] = value
    method = values["contact_method"]
    if method not in CONTACT_METHODS:
        raise ValueError(f"contact method {method!r}: expected one of {', '.join(CONTACT_METHODS)}")
    values["contact_method"] = CONTACT_METHODS[method]
    out = np.array([float(values[k]) for k in Options._fields])
    for key, value in zip(Options._fields, out):
        if not np.isfinite(value) or value < 0:
            raise ValueError(f"solver option {key} = {value}: expected a finite number >= 0")
    return out


# ------------------------------------------------------------------------ row building ---
@inline
def _add_linear_terms(R, S, iv, nvb, r0, r1, r2, dv, sign, J):
    """J[iv:iv + nvb] += sign * d . (velocity of the material point at world offset r from the
    origin of a body with world rotation R and motion subspace S), per DOF of that body."""
    # d . (v + w x r) = d . v + w . (r x d)
    c0 = r1 * dv[2] - r2 * dv[1]
    c1 = r2 * dv[0] - r0 * dv[2]
    c2 = r0 * dv[1] - r1 * dv[0]
    # world-frame d and c into the body frame, so each DOF costs two 3-dot products
    db0 = R[0, 0] * dv[0] + R[1, 0] * dv[1] + R[2, 0] * dv[2]
    db1 = R[0, 1] * dv[0] + R[1, 1] * dv[1] + R[2, 1] * dv[2]
    db2 = R[0, 2] * dv[0] + R[1, 2] * dv[1] + R[2, 2] * dv[2]
    cb0 = R[0, 0] * c0 + R[1, 0] * c1 + R[2, 0] * c2
    cb1 = R[0, 1] * c0 + R[1, 1] * c1 + R[2, 1] * c2
    cb2 = R[0, 2] * c0 + R[1, 2] * c1 + R[2, 2] * c2
    for k in range(nvb):
        J[iv + k] += sign * (db0 * S[0, k] + db1 * S[1, k] + db2 * S[2, k]
                             + cb0 * S[3, k] + cb1 * S[4, k] + cb2 * S[5, k])


@inline
def accumulate_linear(t, d, body, p, dv, sign, J):
    """J += sign * d . (velocity of the material point of `body` at world point p) per DOF."""
    b = body
    while b >= 0:
        _add_linear_terms(d.Rw[b], d.S[b], t.iv[b], t.nvb[b], p[0] - d.pw[b, 0], p[1] - d.pw[b, 1],
                          p[2] - d.pw[b, 2], dv, sign, J)
        b = t.parent[b]


@inline
def accumulate_angular(t, d, body, dv, sign, J):
    """J += sign * d . (angular velocity of `body`) per DOF."""
    b = body
    while b >= 0:
        R = d.Rw[b]
        db0 = R[0, 0] * dv[0] + R[1, 0] * dv[1] + R[2, 0] * dv[2]
        db1 = R[0, 1] * dv[0] + R[1, 1] * dv[1] + R[2, 1] * dv[2]
        db2 = R[0, 2] * dv[0] + R[1, 2] * dv[1] + R[2, 2] * dv[2]
        S = d.S[b]
        iv = t.iv[b]
        for k in range(t.nvb[b]):
            J[iv + k] += sign * (db0 * S[3, k] + db1 * S[4, k] + db2 * S[5, k])
        b = t.parent[b]


@inline
def set_row(s, m, kind, src, target, lo, hi, findex):
    s.b[m] = target
    s.lo[m] = lo
    s.hi[m] = hi
    s.findex[m] = findex
    s.row_kind[m] = kind
    s.row_src[m] = src


@inline
def _accumulate_contact(t, d, body, p, n, t1, t2, sign, Jn, J1, J2):
    """accumulate_linear of a contact's three directions (n, t1, t2 into rows Jn, J1, J2) at
    world point p, in one walk up the tree."""
    b = body
    while b >= 0:
        R = d.Rw[b]
        S = d.S[b]
        r0, r1, r2 = p[0] - d.pw[b, 0], p[1] - d.pw[b, 1], p[2] - d.pw[b, 2]
        iv, nvb = t.iv[b], t.nvb[b]
        for which in range(3):       # a loop, not three calls: one inlined copy to compile
            dv = n if which == 0 else (t1 if which == 1 else t2)
            J = Jn if which == 0 else (J1 if which == 1 else J2)
            _add_linear_terms(R, S, iv, nvb, r0, r1, r2, dv, sign, J)
        b = t.parent[b]


@inline
def _angular_row(t, d, s, m, la, lb, dv):
    J = s.J[m]
    J[:] = 0.0
    accumulate_angular(t, d, t.link_body[la], dv, 1.0, J)
    accumulate_angular(t, d, t.link_body[lb], dv, -1.0, J)


@inline
def _body(t, link):
    """The body carrying `link`; -1 for the world (link -1) and links welded to it."""
    return -1 if link < 0 else t.link_body[link]


@inline
def _loop_linear_row(t, d, s, m, la, lb, pa, pb, dv):
    """A row of accumulate_linear's for links la and lb, either of which may be the world (-1)."""
    J = s.J[m]
    J[:] = 0.0
    accumulate_linear(t, d, _body(t, la), pa, dv, 1.0, J)
    accumulate_linear(t, d, _body(t, lb), pb, dv, -1.0, J)


@inline
def _loop_angular_row(t, d, s, m, la, lb, dv):
    J = s.J[m]
    J[:] = 0.0
    accumulate_angular(t, d, _body(t, la), dv, 1.0, J)
    accumulate_angular(t, d, _body(t, lb), dv, -1.0, J)


@inline
def _rot(R, v, out):
    for a in range(3):
        out[a] = R[a, 0] * v[0] + R[a, 1] * v[1] + R[a, 2] * v[2]


@inline
def _point(d, link, local, out):
    if link < 0:     # the world: the point is given in world coordinates
        for a in range(3):
            out[a] = local[a]
        return
    R = d.link_R[link]
    for a in range(3):
        out[a] = d.link_p[link, a] + R[a, 0] * local[0] + R[a, 1] * local[1] + R[a, 2] * local[2]


@inline
def _cross(a, b, out):
    out[0] = a[1] * b[2] - a[2] * b[1]
    out[1] = a[2] * b[0] - a[0] * b[2]
    out[2] = a[0] * b[1] - a[1] * b[0]


@inline
def _dot3(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


@internal
def loop_rows(t, d, r, s, k, m, scratch, joint_erp, dt):
    """The rows of loop closure k from row m on; returns the next free row. Each row's target
    is Baumgarte's -joint_erp e / dt for its constraint function e."""
    la, lb = r.loop_la[k], r.loop_lb[k]
    kind = r.loop_kind[k]
    pa, pb, ua, u1, u2, dv, tmp = scratch[0], scratch[1], scratch[2], scratch[3], scratch[4], scratch[5], scratch[6]
    _point(d, la, r.loop_pa[k], pa)
    _point(d, lb, r.loop_pb[k], pb)
    Ra = r.world_R if la < 0 else d.link_R[la]
    Rb = r.world_R if lb < 0 else d.link_R[lb]
    _rot(Ra, r.loop_ua[k], ua)
    gain = -joint_erp / dt
    inf = math.inf
    src = k
    if kind == LOOP_BALL or kind == LOOP_WELD or kind == LOOP_HINGE:
        for a in range(3):
            dv[:] = 0.0
            dv[a] = 1.0
            _loop_linear_row(t, d, s, m, la, lb, pa, pb, dv)
            set_row(s, m, ROW_LOOP, src, gain * (pa[a] - pb[a]), -inf, inf, -1)
            m += 1
    if kind == LOOP_WELD or kind == LOOP_ORIENTATION:
        # orientation error: rotation vector of Ra Rrel Rb^T (identity when closed), small-angle
        E = d.T66   # scratch 3x3 corner
        Rrel = r.loop_rrel[k]
        for a in range(3):
            for c in range(3):
                sacc = 0.0
                for e in range(3):
                    for f in range(3):
                        sacc += Ra[a, e] * Rrel[e, f] * Rb[c, f]
                E[a, c] = sacc
        err0 = 0.5 * (E[2, 1] - E[1, 2])
        err1 = 0.5 * (E[0, 2] - E[2, 0])
        err2 = 0.5 * (E[1, 0] - E[0, 1])
        for a in range(3):
            dv[:] = 0.0
            dv[a] = 1.0
            _loop_angular_row(t, d, s, m, la, lb, dv)
            err = err0 if a == 0 else (err1 if a == 1 else err2)
            set_row(s, m, ROW_LOOP, src, gain * err, -inf, inf, -1)
            m += 1
    if kind == LOOP_HINGE or kind == LOOP_REV_TRANS or kind == LOOP_PARALLEL:
        # the axis on a stays perpendicular to two directions on b: e = ua . ub, rate (ua x ub) . (wa - wb)
        for which in range(2):
            _rot(Rb, r.loop_u1[k] if which == 0 else r.loop_u2[k], tmp)
            _cross(ua, tmp, dv)
            _loop_angular_row(t, d, s, m, la, lb, dv)
            set_row(s, m, ROW_LOOP, src, gain * _dot3(ua, tmp), -inf, inf, -1)
            m += 1
    if kind == LOOP_LINE:
        # b's point on the line through a's point along a's axis: two directions fixed on a
        for which in range(2):
            _rot(Ra, r.loop_u1[k] if which == 0 else r.loop_u2[k], dv)
            _loop_linear_row(t, d, s, m, la, lb, pb, pb, dv)
            for a in range(3):
                tmp[a] = pa[a] - pb[a]
            set_row(s, m, ROW_LOOP, src, gain * _dot3(dv, tmp), -inf, inf, -1)
            m += 1
    if kind == LOOP_PLANE or kind == LOOP_REV_SPH or kind == LOOP_REV_TRANS:
        # b's point in the plane through a's point normal to a's axis
        _loop_linear_row(t, d, s, m, la, lb, pb, pb, ua)
        for a in range(3):
            tmp[a] = pa[a] - pb[a]
        set_row(s, m, ROW_LOOP, src, gain * _dot3(ua, tmp), -inf, inf, -1)
        m += 1
    if kind == LOOP_DISTANCE or kind == LOOP_REV_SPH:
        for a in range(3):
            tmp[a] = pa[a] - pb[a]
        n = math.sqrt(_dot3(tmp, tmp))
        if n > 1e-12:
            for a in range(3):
                dv[a] = tmp[a] / n
        else:   # coincident points: any direction keeps the row defined
            dv[0], dv[1], dv[2] = 0.0, 0.0, 1.0
        _loop_linear_row(t, d, s, m, la, lb, pa, pb, dv)
        set_row(s, m, ROW_LOOP, src, gain * (n - r.loop_dist[k]), -inf, inf, -1)
        m += 1
    if kind == LOOP_REV_TRANS:
        # the distance from a's point to b's point along b's x2 stays loop_dist (rate at a's point)
        _rot(Rb, r.loop_u1[k], dv)
        _loop_linear_row(t, d, s, m, la, lb, pa, pa, dv)
        for a in range(3):
            tmp[a] = pa[a] - pb[a]
        set_row(s, m, ROW_LOOP, src, gain * (_dot3(dv, tmp) + r.loop_dist[k]), -inf, inf, -1)
        m += 1
    return m


@internal
def joint_rows(t, r, s, q, v, m, joint_erp, dt):
    """Limit, velocity-limit and lock rows (unit rows on one DOF); returns the next free row."""
    inf = math.inf
    nv = v.shape[0]
    for j in range(nv):
        iq = r.dof_q[j]
        if r.locked[j]:
            target = 0.0 if iq < 0 else -joint_erp * (q[iq] - r.lock_q[j]) / dt
            s.J[m, :] = 0.0
            s.J[m, j] = 1.0
            set_row(s, m, ROW_LOCK, j, target, -inf, inf, -1)
            m += 1
            continue
        if iq >= 0:
            # speculative: active when this step's velocity would cross the limit; the target
            # lands exactly on it (or pulls back with joint_erp when already past it)
            gap = r.upper[j] - q[iq]
            if gap - dt * v[j] < 0.0:
                s.J[m, :] = 0.0
                s.J[m, j] = -1.0
                target = -gap / dt if gap >= 0.0 else -joint_erp * gap / dt
                set_row(s, m, ROW_LIMIT, j, target, 0.0, inf, -1)
                m += 1
            else:
                gap = q[iq] - r.lower[j]
                if gap + dt * v[j] < 0.0:
                    s.J[m, :] = 0.0
                    s.J[m, j] = 1.0
                    target = -gap / dt if gap >= 0.0 else -joint_erp * gap / dt
                    set_row(s, m, ROW_LIMIT, j, target, 0.0, inf, -1)
                    m += 1
        vmax = r.velocity_limit[j]
        if v[j] > vmax or v[j] < -vmax:
            s.J[m, :] = 0.0
            s.J[m, j] = -1.0 if v[j] > 0 else 1.0
            set_row(s, m, ROW_VELOCITY, j, -vmax, 0.0, inf, -1)
            m += 1
    return m


@internal
def contact_rows(t, d, s, c, ncon, v_start, m, erp, max_erv, bounce_velocity, dt, scratch):
    """Three rows per contact: normal [0, inf) and two friction rows (findex to the normal),
    the first along the sliding direction when the contact slides. Returns the next free row."""
    inf = math.inf
    n, t1, t2 = scratch[0], scratch[1], scratch[2]
    for k in range(ncon):
        ci = s.csel[k]
        la, lb = c.link[ci, 0], c.link[ci, 1]
        p = c.point[ci]
        for a in range(3):
            n[a] = c.normal[ci, a]
        # a tangent basis (t1, t2, n right-handed) from the axis least aligned with n
        ax = abs(n[0])
        ay = abs(n[1])
        az = abs(n[2])
        if ax <= ay and ax <= az:
            t1[0], t1[1], t1[2] = 0.0, -n[2], n[1]
        elif ay <= az:
            t1[0], t1[1], t1[2] = n[2], 0.0, -n[0]
        else:
            t1[0], t1[1], t1[2] = -n[1], n[0], 0.0
        tn = math.sqrt(_dot3(t1, t1))
        for a in range(3):
            t1[a] /= tn
        _cross(n, t1, t2)
        mn, m1, m2 = m, m + 1, m + 2
        Jn, J1, J2 = s.J[mn], s.J[m1], s.J[m2]
        Jn[:] = 0.0
        J1[:] = 0.0
        J2[:] = 0.0
        _accumulate_contact(t, d, t.link_body[la], p, n, t1, t2, 1.0, Jn, J1, J2)
        _accumulate_contact(t, d, t.link_body[lb], p, n, t1, t2, -1.0, Jn, J1, J2)
        vn = 0.0
        vt1 = 0.0
        vt2 = 0.0
        for j in range(v_start.shape[0]):
            vn += s.J[mn, j] * v_start[j]
            vt1 += s.J[m1, j] * v_start[j]
            vt2 += s.J[m2, j] * v_start[j]
        vt = math.sqrt(vt1 * vt1 + vt2 * vt2)
        if vt > 1e-9:
            # turn the basis so that t1 follows the sliding: the friction pyramid's face then
            # meets the sliding direction and sliding friction is mu N exactly
            c1, c2 = vt1 / vt, vt2 / vt
            for j in range(v_start.shape[0]):
                a1, a2 = s.J[m1, j], s.J[m2, j]
                s.J[m1, j] = c1 * a1 + c2 * a2
                s.J[m2, j] = c1 * a2 - c2 * a1
            for a in range(3):
                b1, b2 = t1[a], t2[a]
                t1[a] = c1 * b1 + c2 * b2
                t2[a] = c1 * b2 - c2 * b1
        depth = c.depth[ci]
        if depth > 0.0:
            target = min(erp * depth / dt, max_erv)
        else:
            target = depth / dt      # a gap inside the margin may close, no further
        e = c.restitution[ci]
        if e > 1e-3 and vn < -bounce_velocity:
            target = max(target, -e * vn)
        mu = c.mu[ci]
        set_row(s, mn, ROW_CONTACT, ci, target, 0.0, inf, -1)
        set_row(s, m1, ROW_FRICTION, ci, 0.0, -mu, mu, mn)
        set_row(s, m2, ROW_FRICTION, ci, 0.0, -mu, mu, mn)
        for a in range(3):
            s.cdir[k, 0, a] = n[a]
            s.cdir[k, 1, a] = t1[a]
            s.cdir[k, 2, a] = t2[a]
        m += 3
    return m


@internal
def select_contacts(c, ncon, s, maxc):
    """The contacts that become rows (indices into s.csel): all of them, or the maxc deepest,
    counting the dropped ones in the stats."""
    for k in range(min(ncon, maxc)):
        s.csel[k] = k
    if ncon <= maxc:
        return ncon
    for k in range(maxc, ncon):      # replace the shallowest kept contact by a deeper one
        shallowest = 0
        for i in range(1, maxc):
            if c.depth[s.csel[i]] < c.depth[s.csel[shallowest]]:
                shallowest = i
        if c.depth[k] > c.depth[s.csel[shallowest]]:
            s.csel[shallowest] = k
    s.stats[STAT_DROPPED] += ncon - maxc
    return maxc


# ------------------------------------------------------------------ mass matrix solves ---
@internal
def _factor_tree(r, H):
    """H = L^T D L in place along the tree (Featherstone's LTDL, RBDA table 6.3): D on the
    diagonal, L below it; only ancestors couple, so the cost is sum of depth^2, not nv^3."""
    nv = H.shape[0]
    for k in range(nv - 1, -1, -1):
        i = r.dof_parent[k]
        while i >= 0:
            a = H[k, i] / H[k, k]
            j = i
            while j >= 0:
                H[i, j] -= a * H[k, j]
                j = r.dof_parent[j]
            H[k, i] = a
            i = r.dof_parent[i]


@internal
def _solve_tree(r, H, x):
    """x <- H^-1 x with H factored by _factor_tree."""
    _solve_trees(r, H, x, 0, H.shape[0])


@internal
def _solve_trees(r, H, x, lo, hi):
    """_solve_tree for an x that is zero outside DOFs lo..hi-1, whole trees (gauss_seidel.row_range):
    H^-1 x is zero there too, so only those DOFs are computed."""
    _up_the_tree(r, H, x, lo, hi)
    for i in range(lo, hi):
        x[i] /= H[i, i]
    for i in range(lo, hi):
        j = r.dof_parent[i]
        while j >= 0:
            x[i] -= H[i, j] * x[j]
            j = r.dof_parent[j]


# ------------------------------------------------------------------------------ solve ---
@internal
def warm_start_rows(s, c, ncontact, m):
    """x from last step for the contact rows: matched by geom pair and nearest point (within
    1 cm), its impulse (world) in this step's contact frame; for a limit or velocity-limit row,
    the last step's on its DOF; every other row starts at zero (the step restores the loop rows
    itself)."""
    for i in range(m):
        kind = s.row_kind[i]
        if kind == ROW_LIMIT:
            s.x[i] = s.joint_x[0, s.row_src[i]]
        elif kind == ROW_VELOCITY:
            s.x[i] = s.joint_x[1, s.row_src[i]]
        else:
            s.x[i] = 0.0
    nprev = s.stats[STAT_NPREV]
    for k in range(ncontact):
        ci = s.csel[k]
        best = -1
        best_d2 = 1e-4
        for j in range(nprev):
            if s.cprev_geom[j, 0] == c.geom[ci, 0] and s.cprev_geom[j, 1] == c.geom[ci, 1]:
                d2 = 0.0
                for a in range(3):
                    e = s.cprev_point[j, a] - c.point[ci, a]
                    d2 += e * e
                if d2 < best_d2:
                    best_d2 = d2
                    best = j
        if best >= 0:
            for row in range(3):
                s.x[3 * k + row] = _dot3(s.cprev_x[best], s.cdir[k, row])


@internal
def remember_rows(s, c, ncontact, m):
    """What warm_start_rows starts the next step from (the contacts', the limit rows')."""
    s.joint_x[:, :] = 0.0
    for i in range(m):
        kind = s.row_kind[i]
        if kind == ROW_LIMIT:
            s.joint_x[0, s.row_src[i]] = s.x[i]
        elif kind == ROW_VELOCITY:
            s.joint_x[1, s.row_src[i]] = s.x[i]
    for k in range(ncontact):
        ci = s.csel[k]
        s.cprev_geom[k, 0] = c.geom[ci, 0]
        s.cprev_geom[k, 1] = c.geom[ci, 1]
        for a in range(3):
            s.cprev_point[k, a] = c.point[ci, a]
            s.cprev_x[k, a] = (s.x[3 * k] * s.cdir[k, 0, a] + s.x[3 * k + 1] * s.cdir[k, 1, a]
                               + s.x[3 * k + 2] * s.cdir[k, 2, a])
    s.stats[STAT_NPREV] = ncontact


@internal
def free_motion_by_factor(t, d, r, v, dt, poses):
    """v += dt qdd with qdd = H^-1 (tau - C(q, v)) from the factor of H (CRBA, then _factor_tree,
    in d.M, as apply_impulses needs it; its implicit spring/damper terms as ABA's) and C by RNEA
    at qdd = 0: for a step whose LCP will need that factor (contacts, or more limit rows than
    aba_solve takes), where ABA would do the work of the factor a second time. The caller then
    tells apply_impulses that H is factored. poses: as apply_impulses'."""
    H = d.M
    mass_matrix_as_aba(t, d, H, poses)
    _factor_tree(r, H)
    free_force(t, d)
    _solve_tree(r, H, d.qdd)
    for j in range(v.shape[0]):
        v[j] += dt * d.qdd[j]


@internal
def mass_matrix_as_aba(t, d, H, poses):
    """H by CRBA with the implicit spring/damper terms the step's ABA uses (crba has the
    armature); poses: as apply_impulses'."""
    if not poses:
        world_poses(t, d)
    crba(t, d, H)
    for j in range(H.shape[0]):
        H[j, j] += d.diag[j] - t.armature[j]


@internal
def free_force(t, d):
    """d.qdd <- tau - C(q, v): the applied forces less RNEA's at zero acceleration."""
    nv = d.qdd.shape[0]
    for j in range(nv):
        d.qdd[j] = 0.0
    rnea(t, d, d.qdd, d.a_step)
    for j in range(nv):
        d.qdd[j] = d.tau_total[j] - d.a_step[j]


@internal
def apply_impulses(t, d, r, s, v, m, ncontact, cfm, dt, pgs_iterations, pgs_tolerance, iterative_rows,
                   iterative_sweeps, iterative_tolerance, lf, li, poses, factored):
    """Solve the LCP of rows 0..m-1 and add the impulse response to v (v* -> v+). poses: the
    world body poses (Data.Rw, pw) are up to date (else computed here when CRBA needs them).
    factored: d.M already holds H's factor (free_motion_by_factor made v*).

    Up to ABA_SOLVE_ROWS rows and no contact (joint limits, locks, a drive: a step of a robot
    that nears a limit), H^-1 J^T comes row by row from the articulated inertias the step's ABA
    left (aba_solve, O(n) each); otherwise from H by CRBA and its factor along the tree.

    From iterative_rows rows on, none bilateral, Gauss-Seidel on the rows (gauss_seidel.py, from
    the warm start in s.x) solves it when it converges to iterative_tolerance within iterative_sweeps sweeps;
    else, and for fewer rows, the pivoting solver (lcp.py) on A = J M^-1 J^T.

    With a singular mass matrix (r.dof_parent[0] == DENSE_ROOT) v comes in as v_prev and d.qdd
    as the force tau - C(q, v) (the step skipped ABA): H~ = H + rho sum J_e^T J_e over the
    bilateral rows e (unbounded: loops, couplers, motors, locks) makes it positive definite, and
    v* = v + dt H~^-1 f, v+ = v* + H~^-1 J^T x is exactly the constrained solution: the added
    term is J_e^T rho (J_e v+ - J_e v), a multiplier of rows the LCP makes hold, absorbed into
    their x. A pivot that is not positive (the constraints leave a massless direction free)
    makes that DOF's velocity NaN: the step restores the state and reports that DOF."""
    nv = v.shape[0]
    H = d.M
    dense = nv > 0 and r.dof_parent[0] == DENSE_ROOT
    by_aba = not dense and not factored and ncontact == 0 and m <= ABA_SOLVE_ROWS
    if not by_aba and not factored:
        if dense:
            H[:, :] = 0.0     # crba writes the tree's entries only; the dense factor filled the rest
        mass_matrix_as_aba(t, d, H, poses)
        if dense:
            rho = 0.0
            for j in range(nv):
                rho = max(rho, H[j, j])
            rho = rho if rho > 0.0 else 1.0
            for i in range(m):
                if s.lo[i] == -math.inf and s.hi[i] == math.inf:
                    Ji = s.J[i]
                    for a in range(nv):
                        if Ji[a] != 0.0:
                            for c in range(nv):
                                H[a, c] += rho * Ji[a] * Ji[c]
        _factor_tree(r, H)
        if dense:
            for j in range(nv):
                if not H[j, j] > 1e-12 * rho:
                    v[j] = math.nan
                    return
            _solve_tree(r, H, d.qdd)
            for j in range(nv):
                v[j] += dt * d.qdd[j]
            if m == 0:
                return
    bilateral = False
    for i in range(m):
        bilateral = bilateral or (s.lo[i] == -math.inf and s.hi[i] == math.inf)
    iterative = m >= iterative_rows and not dense and not bilateral
    if s.stats[STAT_GS_HOLDOFF] > 0:
        s.stats[STAT_GS_HOLDOFF] -= 1
        iterative = False
    # the pivoting solver needs A = J H^-1 J^T and H^-1 J^T x alone: with H = L^T D L, A = B^T B
    # for B = D^-1/2 L^-T J^T, whose row i is nonzero on its DOFs' ancestors alone (a half solve
    # up the tree per row, not a whole solve over the tree), and H^-1 J^T x is one solve
    half = not by_aba and not dense and not iterative
    if half:
        for j in range(nv):
            s.u_before[j] = 1.0 / math.sqrt(H[j, j])
    tree_ranges(r.dof_parent, s.tree_start, s.tree_end)
    for i in range(m):
        Ji = s.J[i]
        lo_i, hi_i = row_range(Ji, s.tree_start, s.tree_end)
        s.row_lo[i] = lo_i
        s.row_hi[i] = hi_i
        Y = s.Y[i]
        if by_aba:
            aba_solve(t, d, Ji, Y)
        else:
            copy_into(Y, Ji)
            if half:
                _half_solve(r, H, Y, lo_i, hi_i, s.u_before)
            else:
                _solve_trees(r, H, Y, lo_i, hi_i)
        a_ii = 0.0      # A_ii: B_i B_i (half) or J_i Y_i
        jv = 0.0
        for j in range(lo_i, hi_i):
            a_ii += (Y[j] if half else Ji[j]) * Y[j]
            jv += Ji[j] * v[j]
        s.diag[i] = a_ii * (1.0 + cfm)
        if s.diag[i] <= 1e-14:
            # a row no motion can change (e.g. the out-of-plane row of a ball closure in a
            # planar linkage): it constrains nothing, so it gets no impulse
            s.diag[i] = 0.0
            s.b[i] = 0.0
        else:
            s.b[i] -= jv          # b = target - J v*
    if iterative:
        copy_into(s.w[:m], s.x[:m])     # the warm start, for the pivoting if Gauss-Seidel fails
        sweeps = gauss_seidel(s.J, s.Y, s.row_lo, s.row_hi, s.diag, s.b, s.lo, s.hi, s.findex, m, cfm, s.x,
                              s.u, s.u_before, iterative_sweeps, iterative_tolerance)
        s.stats[STAT_GS_SWEEPS] = sweeps
        if sweeps > 0:
            s.stats[STAT_STATUS] = GAUSS_SEIDEL
            for j in range(nv):
                v[j] += s.u[j]
            _contact_forces(s, ncontact, dt)
            return
        s.stats[STAT_GS_UNCONVERGED] += 1
        s.stats[STAT_GS_HOLDOFF] = ITERATIVE_HOLDOFF
        # the pivoting tries the warm start's active set first: the last step's exact solution
        # has the right one, where an unconverged Gauss-Seidel's x mostly has not (a stack's:
        # then every row pivots in, ten times the cost)
        copy_into(s.x[:m], s.w[:m])
    if half:
        _solve_pivoting(s, v, m, pgs_iterations, pgs_tolerance, lf, li, True, True)
        u = s.u         # v += H^-1 J^T x
        for j in range(nv):
            u[j] = 0.0
        for i in range(m):
            xi = s.x[i]
            if xi != 0.0:
                Ji = s.J[i]
                for j in range(s.row_lo[i], s.row_hi[i]):
                    u[j] += xi * Ji[j]
        _solve_tree(r, H, u)
        for j in range(nv):
            v[j] += u[j]
    else:
        # (after an unconverged Gauss-Seidel: its Y are whole solves)
        _solve_pivoting(s, v, m, pgs_iterations, pgs_tolerance, lf, li, False, not dense)
    _contact_forces(s, ncontact, dt)


@internal
def _half_solve(r, H, x, lo, hi, inv_sqrt_d):
    """x <- D^-1/2 L^-T x with H = L^T D L factored by _factor_tree, for an x that is zero
    outside DOFs lo..hi-1 (whole trees): the result is zero wherever x and all the DOFs below
    are (a row's: nonzero on its DOFs' ancestors alone)."""
    _up_the_tree(r, H, x, lo, hi)
    for i in range(lo, hi):
        if x[i] != 0.0:
            x[i] *= inv_sqrt_d[i]


@inline
def _up_the_tree(r, H, x, lo, hi):
    """x <- L^-T x (H = L^T D L by _factor_tree) for an x zero outside DOFs lo..hi-1: each DOF
    passes its value up to its ancestors, so x stays zero wherever it and every DOF below are."""
    for i in range(hi - 1, lo - 1, -1):
        xi = x[i]
        if xi == 0.0:       # a contact row's x is nonzero on its body's ancestors alone
            continue
        j = r.dof_parent[i]
        while j >= 0:
            x[j] -= H[i, j] * xi
            j = r.dof_parent[j]


@inline
def _block_end(s, i, m):
    """The end of the block of rows from i on that share row i's DOF range."""
    k = i + 1
    while k < m and s.row_lo[k] == s.row_lo[i] and s.row_hi[k] == s.row_hi[i]:
        k += 1
    return k


@internal
def _solve_pivoting(s, v, m, pgs_iterations, pgs_tolerance, lf, li, half, warm):
    """The rows' LCP by lcp.solve_boxed_lcp on A = J Y^T (J_i Y_k over the rows' common DOFs),
    then v += Y^T x; or, half, on A = B B^T for the rows B_i = D^-1/2 L^-T J_i^T held in Y (the
    caller then adds H^-1 J^T x). warm: try the warm start's active set first (lcp.py).
    Rows of one DOF range (a contact's three, the contacts of one pair of bodies) form a block,
    and only blocks whose ranges overlap couple: A is zeroed once and those filled, so that a
    stack's 120 rows cost its ~30 coupled blocks, not 7,000 row pairs."""
    for i in range(m):
        for k in range(m):
            s.A[i, k] = 0.0
    i = 0
    while i < m:
        i_end = _block_end(s, i, m)
        k = i
        while k < m:
            k_end = _block_end(s, k, m)
            lo_ik, hi_ik = max(s.row_lo[i], s.row_lo[k]), min(s.row_hi[i], s.row_hi[k])
            if lo_ik < hi_ik:
                for ii in range(i, i_end):
                    if not s.diag[ii] > 0.0:
                        continue
                    Ji = s.Y[ii] if half else s.J[ii]
                    # the DOFs where J_i (B_i) is nonzero (a contact's: its body's ancestors)
                    a, b = lo_ik, hi_ik
                    while a < b and Ji[a] == 0.0:
                        a += 1
                    while b > a and Ji[b - 1] == 0.0:
                        b -= 1
                    for kk in range(max(k, ii), k_end):
                        if s.diag[kk] > 0.0:
                            Yk = s.Y[kk]
                            acc = 0.0
                            for j in range(a, b):
                                acc += Ji[j] * Yk[j]
                            s.A[ii, kk] = acc
                            s.A[kk, ii] = acc
            k = k_end
        i = i_end
    for i in range(m):
        s.A[i, i] = s.diag[i] if s.diag[i] > 0.0 else 1.0
    status = solve_boxed_lcp(s.A, s.b, s.lo, s.hi, s.findex, m, s.x, s.w, lf, li,
                             pgs_iterations, pgs_tolerance, -1, warm)
    s.stats[STAT_STATUS] = status
    if status == 1:
        s.stats[STAT_FALLBACKS] += 1
    elif status == 2:
        s.stats[STAT_FAILURES] += 1
    if half:
        return
    for i in range(m):
        xi = s.x[i]
        if xi != 0.0:
            Y = s.Y[i]
            for j in range(s.row_lo[i], s.row_hi[i]):     # Y_i is zero outside its range
                v[j] += xi * Y[j]


@internal
def _contact_forces(s, ncontact, dt):
    """s.cforce: each contact's force on body a (world) from its impulses."""
    for k in range(ncontact):
        for a in range(3):
            s.cforce[k, a] = (s.x[3 * k] * s.cdir[k, 0, a] + s.x[3 * k + 1] * s.cdir[k, 1, a]
                              + s.x[3 * k + 2] * s.cdir[k, 2, a]) / dt


# ------------------------------------------------------------------- penalty contact ---
@inline
def _point_velocity(t, d, link, p, out):
    """World velocity of the material point of `link`'s body at world point p."""
    b = t.link_body[link]
    if b < 0:
        out[0], out[1], out[2] = 0.0, 0.0, 0.0
        return
    R = d.Rw[b]
    vb, wb = d.vel[b, :3], d.vel[b, 3:]
    r0, r1, r2 = p[0] - d.pw[b, 0], p[1] - d.pw[b, 1], p[2] - d.pw[b, 2]
    for a in range(3):
        out[a] = R[a, 0] * vb[0] + R[a, 1] * vb[1] + R[a, 2] * vb[2]
    w0 = R[0, 0] * wb[0] + R[0, 1] * wb[1] + R[0, 2] * wb[2]
    w1 = R[1, 0] * wb[0] + R[1, 1] * wb[1] + R[1, 2] * wb[2]
    w2 = R[2, 0] * wb[0] + R[2, 1] * wb[1] + R[2, 2] * wb[2]
    out[0] += w1 * r2 - w2 * r1
    out[1] += w2 * r0 - w0 * r2
    out[2] += w0 * r1 - w1 * r0


@inline
def add_body_force(link_body, Rw, pw, fext, link, p, F, sign):
    """fext of `link`'s body += sign * (world force F at world point p), in body coordinates.
    Takes the arrays, not the Tree and Data tuples: an inlined helper handed the tuples costs
    ~0.7 us a call (measured in a loop over contacts, while kernels still counted references),
    one handed its arrays ~25 ns."""
    b = link_body[link]
    if b < 0:
        return
    R = Rw[b]
    r0, r1, r2 = p[0] - pw[b, 0], p[1] - pw[b, 1], p[2] - pw[b, 2]
    n0 = r1 * F[2] - r2 * F[1]
    n1 = r2 * F[0] - r0 * F[2]
    n2 = r0 * F[1] - r1 * F[0]
    for a in range(3):
        fext[b, a] += sign * (R[0, a] * F[0] + R[1, a] * F[1] + R[2, a] * F[2])
        fext[b, 3 + a] += sign * (R[0, a] * n0 + R[1, a] * n1 + R[2, a] * n2)


@internal
def penalty_forces(t, d, s, c, ncon, stiffness, damping, friction_velocity, scratch):
    """Chrono SMC-style contact: normal force k depth - c vn (never pulling), friction
    -mu fn vt / max(|vt|, friction_velocity), added to fext; forces kept for contacts()."""
    va, vb, F = scratch[0], scratch[1], scratch[2]
    for k in range(ncon):
        s.csel[k] = k
        la, lb = c.link[k, 0], c.link[k, 1]
        p = c.point[k]
        n = c.normal[k]
        _point_velocity(t, d, la, p, va)
        _point_velocity(t, d, lb, p, vb)
        for a in range(3):
            va[a] -= vb[a]
        vn = _dot3(va, n)
        fn = stiffness * c.depth[k] - damping * vn
        if c.depth[k] <= 0.0 or fn <= 0.0:
            fn = 0.0
        for a in range(3):
            va[a] -= vn * n[a]          # tangential slip velocity
        vt = math.sqrt(_dot3(va, va))
        scale = c.mu[k] * fn / max(vt, friction_velocity)
        for a in range(3):
            F[a] = fn * n[a] - scale * va[a]
            s.cforce[k, a] = F[a]
        add_body_force(t.link_body, d.Rw, d.pw, d.fext, la, p, F, 1.0)
        add_body_force(t.link_body, d.Rw, d.pw, d.fext, lb, p, F, -1.0)
    return ncon


# ------------------------------------------------------------ entry point for checks ---
@kernel
def loop_rows_kernel(tree, data, rules, solver, q, joint_erp, dt):
    """The loop closure rows at q (J in the solver's J, targets in b): for tests and tools.
    tree, data, rules, solver: the bundles step.py's kernels take."""
    tf, ti = tree
    rf, ri, sizes = rules
    sf, si, _, _ = solver
    t, _, _ = kernels.carve_tree(tf, ti)
    d, _ = kernels.carve_data(data, ti)
    r, _, _ = carve_rules(rf, ri, sizes[0], sizes[1])
    s, _, _ = carve_solver(sf, si, sizes[2], sizes[0], sizes[3], sizes[4])
    kernels.forward_kinematics(t, d, q)
    kernels.link_poses(t, d)
    m = 0
    for k in range(sizes[1]):
        m = loop_rows(t, d, r, s, k, m, s.scratch, joint_erp, dt)
    return m
