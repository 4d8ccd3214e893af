"""The time step: dynamics (kernels.py), collision (collision/), force elements (forces.py)
and constraints (constraints.py) in one numba call per Physics.step(), so nothing crosses
into Python between steps.

Semi-implicit Euler (DART's World step): ABA with implicit joint springs and dampers and the
force elements explicit, v* = v + dt qdd, constraint impulses (contacts, limits, locks, spring
stops, loops, motors, couplers), v+ = v* + M^-1 J^T x, then positions with v+. RK4 integrates
smooth forces only: penalty contact, force elements, no constraint rows. The step kernels take
the simulation time t0 of their first step: time functions (loads, motors) read it.

The entry points take the world's buffers and its state arrays q, v, tau as one int64 array,
`world` (world_addresses: each array's address and length), and rebuild from it the bundles
below, plain tuples of arrays. A call from Python unpacks each array argument it is given (~45 ns
an array: 0.8 us of a 12 us step of a 35-DOF humanoid as separate arrays); the addresses are
valid while the arrays live, and whoever builds `world` keeps them (Physics, BatchSimulation).
The bundles:
  tree      (tf, ti)             Compiled.buffers: the compiled tree (kernels.carve_tree)
  data      df                   the Data workspace (kernels.carve_data)
  geoms     (gf, gi)             GeomSet.buffers (collision/layout.carve_geoms)
  contacts  (cf, ci)             the Contacts workspace (collision/layout.carve_contacts)
  rules     (rf, ri, sizes)      ConstraintSet.rule_buffers: the rules and the constraint sizes
  solver    (sf, si, lf, li)     ConstraintSet.solver_buffers: the solver and LCP workspaces
  forces    (ef, ei) or None     ForceSet.buffers; None: a world without force elements
  options   optf                 the solver options (constraints.Options)
"""
import numpy as np
from numba import prange

from .collision.collide import collide
from .collision.layout import carve_contacts, carve_geoms
from .constraints import (ABA_SOLVE_ROWS, CONTACT_LCP, CONTACT_NONE, CONTACT_PENALTY, DENSE_ROOT, STAT_FAILURES,
                          STAT_NCON, STAT_NPREV, STAT_ROWS,
                          Options,
                          apply_impulses, contact_rows, free_force, free_motion_by_factor, joint_rows, loop_rows, penalty_forces,
                          remember_rows, select_contacts, warm_start_rows, carve_rules, carve_solver)
from .forces import H_N, H_NDRIVE, H_NSTOP, apply_forces, carve_forces, drive_rows, forces_or_none, stop_rows
from .kernels import (FREE, passive_implicit, quat_to_R, restore_if_nonfinite, aba, batch_kernel, body_frame_kinematics,
                      carve_data, carve_tree, copy_into, inline, integrate, internal, kernel, link_poses, rnea,
                      velocity_kinematics)
from .views import addresses_of, array_at


@internal
def _free_joints_translate_straight(t, d, q, v, dt):
    """After q = q (+) v dt: a free joint's origin moves in a straight line at its classical
    velocity u = v_lin + dt w x v_lin (start-of-step w, v), as MuJoCo's world-frame free joint,
    and v_lin becomes u in the new body frame. The twist exponential alone moves the origin
    along a screw, which turns the momentum of a spinning body by O(dt^2 w v) per step; this
    way momentum changes by exactly the applied impulses."""
    Rk, Rn = d.T66[:3, :3], d.T66b[:3, :3]
    for i in range(t.parent.shape[0]):
        if t.jtype[i] != FREE:
            continue
        iq, iv = t.iq[i], t.iv[i]
        v0, w0 = d.v_prev[iv:iv + 3], d.v_prev[iv + 3:iv + 6]
        u0 = v[iv] + dt * (w0[1] * v0[2] - w0[2] * v0[1])
        u1 = v[iv + 1] + dt * (w0[2] * v0[0] - w0[0] * v0[2])
        u2 = v[iv + 2] + dt * (w0[0] * v0[1] - w0[1] * v0[0])
        qp = d.q_prev
        quat_to_R(qp[iq + 3], qp[iq + 4], qp[iq + 5], qp[iq + 6], Rk)
        quat_to_R(q[iq + 3], q[iq + 4], q[iq + 5], q[iq + 6], Rn)
        for a in range(3):
            q[iq + a] = qp[iq + a] + dt * (Rk[a, 0] * u0 + Rk[a, 1] * u1 + Rk[a, 2] * u2)
        # u in the new body frame: Rn^T Rk u
        x0 = Rk[0, 0] * u0 + Rk[0, 1] * u1 + Rk[0, 2] * u2
        x1 = Rk[1, 0] * u0 + Rk[1, 1] * u1 + Rk[1, 2] * u2
        x2 = Rk[2, 0] * u0 + Rk[2, 1] * u1 + Rk[2, 2] * u2
        for a in range(3):
            v[iv + a] = Rn[0, a] * x0 + Rn[1, a] * x1 + Rn[2, a] * x2


@internal
def _see_free_joint_translation(t, d, s, row0, m, dt):
    """Targets of rows row0..m-1 (loops, motors, couplers) less what the free joints' straight
    translation adds beyond v+ (dt w x v_lin at the step's start, _free_joints_translate_straight),
    so that their constraints hold for the positions the step really reaches; otherwise a loop
    on a spinning free body would lag by dt^2 |w x v| / joint_erp."""
    for i in range(t.parent.shape[0]):
        if t.jtype[i] != FREE:
            continue
        iv = t.iv[i]
        v0, w0 = d.v_prev[iv:iv + 3], d.v_prev[iv + 3:iv + 6]
        x0 = dt * (w0[1] * v0[2] - w0[2] * v0[1])
        x1 = dt * (w0[2] * v0[0] - w0[0] * v0[2])
        x2 = dt * (w0[0] * v0[1] - w0[1] * v0[0])
        for k in range(row0, m):
            s.b[k] -= s.J[k, iv] * x0 + s.J[k, iv + 1] * x1 + s.J[k, iv + 2] * x2


@inline
def _contacts_and_applied(t, d, g, c, s, r, opt, fe, forces, penalty, loops, q, v, tau, time):
    """Kinematics at (q, v), contacts, penalty forces into fext, tau clamped to the effort
    limits into s.tau_applied, then the force elements at `time` (body forces into fext,
    generalized forces added to s.tau_applied). Returns (the number of contacts detected,
    whether the world poses of bodies and links were computed: only when collision, force
    elements or loop closures read them; ABA needs the body-frame kinematics alone).
    forces None: no force elements (fe is None too); penalty None: the contact method is not
    penalty; loops None: no loop closures. They are arguments of the calling kernel, the only
    thing numba prunes branches on (this is inlined, so that the step's kernel levels are one
    fewer)."""
    method = int(opt.contact_method)
    collides = method != CONTACT_NONE and g.pairs.shape[0] > 0
    poses = collides or forces is not None or loops is not None
    if poses:
        velocity_kinematics(t, d, q, v)
        link_poses(t, d)
    else:
        body_frame_kinematics(t, d, q, v)
    d.fext[:, :] = 0.0
    ncon = 0
    if collides:
        ncon = collide(g, c, d.link_R, d.link_p, opt.contact_margin)
        if penalty is not None:
            if method == CONTACT_PENALTY:
                    penalty_forces(t, d, s, c, ncon, opt.contact_stiffness, opt.contact_damping,
                                opt.friction_velocity, s.scratch)
    s.stats[STAT_NCON] = ncon
    for j in range(v.shape[0]):
        lim = r.effort_limit[j]
        s.tau_applied[j] = min(max(tau[j], -lim), lim)
    if forces is not None:     # None: compiled without force elements (forces_or_none)
        if fe.flags[H_N] > 0:
            apply_forces(t, d, fe, q, v, time, s.tau_applied, True)
    return ncon, poses


@internal
def _explicit_accel(t, d, g, c, s, r, opt, fe, penalty, q, v, tau, time, qdd):
    """qdd with passive and penalty contact forces explicit (the implicit form at dt = 0)."""
    _contacts_and_applied(t, d, g, c, s, r, opt, fe, fe, penalty, None, q, v, tau, time)
    passive_implicit(t, d, q, v, s.tau_applied, 0.0, opt.friction_velocity)
    aba(t, d, d.tau_total, d.diag, qdd)


def world_addresses(tree, data, geoms, contacts, rules, solver, options, q, v, tau):
    """The step kernels' `world` argument: the bundles' buffers and the state arrays by address
    (views.addresses_of), in _world_at's order. The caller keeps them alive while it uses it."""
    return addresses_of((*tree, data, *geoms, *contacts, *rules, *solver, options, q, v, tau))


@inline
def _world_at(world):
    """The bundles (tree, data, geoms, contacts, rules, solver, options) and q, v, tau of
    world_addresses."""
    f, i = np.float64, np.int64
    tree = (array_at(world, 0, f), array_at(world, 1, i))
    data = array_at(world, 2, f)
    geoms = (array_at(world, 3, f), array_at(world, 4, i))
    contacts = (array_at(world, 5, f), array_at(world, 6, i))
    rules = (array_at(world, 7, f), array_at(world, 8, i), array_at(world, 9, i))
    solver = (array_at(world, 10, f), array_at(world, 11, i), array_at(world, 12, f), array_at(world, 13, i))
    options = array_at(world, 14, f)
    return tree, data, geoms, contacts, rules, solver, options, array_at(world, 15, f), array_at(world, 16, f), \
        array_at(world, 17, f)


@inline
def _carve_world(tree, data, geoms, contacts, rules, solver, forces, options):
    """The named views of the bundles (the module docstring lists them)."""
    tf, ti = tree
    gf, gi = geoms
    cf, ci = contacts
    rf, ri, sizes = rules
    sf, si, _, _ = solver
    t, _, _ = carve_tree(tf, ti)
    d, _ = carve_data(data, ti)
    g, _, _ = carve_geoms(gf, gi)
    c, _, _ = carve_contacts(cf, ci)
    nv, nloop, mmax, ccap, nlooprows = sizes[0], sizes[1], sizes[2], sizes[3], sizes[4]
    r, _, _ = carve_rules(rf, ri, nv, nloop)
    s, _, _ = carve_solver(sf, si, mmax, nv, ccap, nlooprows)
    o = options
    opt = Options(o[0], o[1], o[2], o[3], o[4], o[5], o[6], o[7], o[8], o[9], o[10], o[11], o[12], o[13], o[14])
    fe = forces_or_none(forces)
    return t, d, g, c, r, s, opt, fe


# ------------------------------------------------------------ entry points from Python ---
@kernel
def step_semi_implicit_euler(world, forces, t0, dt, nsteps, loops, penalty, gravity):
    """Returns (steps done, first non-finite DOF or -1, the solver's failures so far: the
    stats' STAT_FAILURES, which Python then need not read); on a blow-up the state before the
    failing step is restored. loops None: the world has no loop closures, and the kernel
    compiles without their rows (numba prunes the branch); forces None likewise compiles it
    without force elements, penalty None without penalty contact. gravity (3,): copied into the
    tree first (the model's, which its user may change between calls; copying it here costs a
    fraction of comparing it in Python); None: the tree's as it is. The loop lives here, not in a
    kernel of its own that this one calls: numba optimizes and generates the machine code of
    everything a kernel calls once more for each kernel level above it, and the step calls
    nearly all of the code."""
    tree, data, geoms, contacts, rules, solver, options, q, v, tau = _world_at(world)
    t, d, g, c, r, s, opt, fe = _carve_world(tree, data, geoms, contacts, rules, solver, forces, options)
    if gravity is not None:
        for a in range(3):
            t.gravity[a] = gravity[a]
    _, _, sizes = rules
    _, _, lf, li = solver
    nloop, maxc = sizes[1], sizes[5]
    nv = v.shape[0]
    for step in range(nsteps):
        time = t0 + step * dt
        copy_into(d.q_prev, q)
        copy_into(d.v_prev, v)
        ncon, poses = _contacts_and_applied(t, d, g, c, s, r, opt, fe, forces, penalty, loops, q, v, tau, time)
        passive_implicit(t, d, q, v, s.tau_applied, dt, opt.friction_velocity)
        dense = nv > 0 and r.dof_parent[0] == DENSE_ROOT
        factored = False
        if dense:
            # a singular mass matrix (massless bodies the constraints determine): no ABA; the
            # force f = tau - C(q, v) waits in qdd for apply_impulses, which solves the free
            # motion with the constraint rows (the rows see v at the step's start)
            free_force(t, d)
        else:
            # the LCP will need H's factor when there are contacts or more limit rows than
            # aba_solve takes (the last step's count): then the free motion comes from it too
            factored = ((int(opt.contact_method) == CONTACT_LCP and ncon > 0)
                        or s.stats[STAT_ROWS] > ABA_SOLVE_ROWS)
            if factored:
                free_motion_by_factor(t, d, r, v, dt, poses)
            else:
                aba(t, d, d.tau_total, d.diag, d.qdd)
                for j in range(nv):
                    v[j] += dt * d.qdd[j]
        ncontact = 0
        m = 0
        if int(opt.contact_method) == CONTACT_LCP and ncon > 0:
            ncontact = select_contacts(c, ncon, s, maxc)
            m = contact_rows(t, d, s, c, ncontact, d.v_prev, m, opt.erp, opt.max_erv,
                              opt.bounce_velocity, dt, s.scratch)
        m = joint_rows(t, r, s, q, v, m, opt.joint_erp, dt)
        if forces is not None:       # not fe: numba prunes on the arguments only
            if fe.flags[H_NSTOP] > 0:
                m = stop_rows(t, d, s, fe, v, m, opt.joint_erp, dt)
        loop0 = m        # loop and drive rows: always present, warm-started from the last step
        if loops is not None:
            for k in range(nloop):
                m = loop_rows(t, d, r, s, k, m, s.scratch, opt.joint_erp, dt)
        if forces is not None:
            if fe.flags[H_NDRIVE] > 0:
                m = drive_rows(t, d, s, fe, q, v, m, time, opt.joint_erp, dt)
        if m > loop0:
            _see_free_joint_translation(t, d, s, loop0, m, dt)
        s.stats[STAT_ROWS] = m
        if m > 0 or dense:
            warm_start_rows(s, c, ncontact, m)
            for i in range(loop0, m):
                s.x[i] = s.loop_x[i - loop0]
            apply_impulses(t, d, r, s, v, m, ncontact, opt.cfm, dt, int(opt.pgs_iterations),
                           opt.pgs_tolerance, int(opt.iterative_rows), int(opt.iterative_sweeps),
                           opt.iterative_tolerance, lf, li, poses, factored)
            remember_rows(s, c, ncontact, m)
            for i in range(loop0, m):
                s.loop_x[i - loop0] = s.x[i]
        else:
            s.stats[STAT_NPREV] = 0   # no contacts or limit rows to warm-start from next step
            s.joint_x[:, :] = 0.0
        for j in range(nv):
            d.a_step[j] = (v[j] - d.v_prev[j]) / dt
        integrate(t, q, v, dt, q)
        _free_joints_translate_straight(t, d, q, v, dt)
        bad = restore_if_nonfinite(t, d, q, v)
        if bad >= 0:
            return step, bad, s.stats[STAT_FAILURES]
    return nsteps, -1, s.stats[STAT_FAILURES]


@kernel
def step_rk4(world, forces, t0, dt, nsteps, loops, penalty, gravity):
    """Classical RK4 with stage positions q (+) c dt v_k on the manifold (as MuJoCo's RK4);
    passive and penalty contact forces explicit. Returns what step_semi_implicit_euler returns.
    loops, penalty: as step_semi_implicit_euler's (RK4 takes no loop closures)."""
    tree, data, geoms, contacts, rules, solver, options, q, v, tau = _world_at(world)
    t, d, g, c, r, s, opt, fe = _carve_world(tree, data, geoms, contacts, rules, solver, forces, options)
    if gravity is not None:
        for a in range(3):
            t.gravity[a] = gravity[a]
    nv = v.shape[0]
    cs = (0.0, 0.5, 0.5, 1.0)
    ws = (1.0 / 6.0, 1.0 / 3.0, 1.0 / 3.0, 1.0 / 6.0)
    for step in range(nsteps):
        copy_into(d.q_prev, q)
        copy_into(d.v_prev, v)
        for k in range(4):
            if k == 0:
                copy_into(d.q_stage, q)
                copy_into(d.v_stage, v)
            else:
                for j in range(nv):
                    d.v_stage[j] = v[j] + cs[k] * dt * d.k_a[k - 1, j]
                integrate(t, q, d.k_v[k - 1], cs[k] * dt, d.q_stage)
            copy_into(d.k_v[k], d.v_stage)
            _explicit_accel(t, d, g, c, s, r, opt, fe, penalty, d.q_stage, d.v_stage, tau,
                            t0 + (step + cs[k]) * dt, d.k_a[k])
        for j in range(nv):
            d.v_sum[j] = 0.0
            d.a_sum[j] = 0.0
            for k in range(4):
                d.v_sum[j] += ws[k] * d.k_v[k, j]
                d.a_sum[j] += ws[k] * d.k_a[k, j]
        integrate(t, q, d.v_sum, dt, q)
        for j in range(nv):
            v[j] += dt * d.a_sum[j]
            d.a_step[j] = d.a_sum[j]
        bad = restore_if_nonfinite(t, d, q, v)
        if bad >= 0:
            return step, bad, s.stats[STAT_FAILURES]
    return nsteps, -1, s.stats[STAT_FAILURES]


@kernel
def applied_forces_kernel(tree, data, forces, q, v, time, zero, tau):
    """tau = the generalized force of every force element, actuator, load and force motor at
    (q, v, time): RNEA without them minus RNEA with them (both at zero acceleration), plus
    their generalized forces. No element state changes (turn counting continues from the
    last step)."""
    tf, ti = tree
    ef, ei = forces
    t, _, _ = carve_tree(tf, ti)
    d, _ = carve_data(data, ti)
    fe, _, _ = carve_forces(ef, ei)
    velocity_kinematics(t, d, q, v)
    link_poses(t, d)
    d.fext[:, :] = 0.0
    tau[:] = 0.0
    apply_forces(t, d, fe, q, v, time, tau, False)
    rnea(t, d, zero, d.tau_total)
    d.fext[:, :] = 0.0
    rnea(t, d, zero, d.qdd)
    for j in range(tau.shape[0]):
        tau[j] += d.qdd[j] - d.tau_total[j]


# ---------------------------------------------- many worlds of one model in one call ---
# worlds[w] is world w's `world` (world_addresses): the model's buffers (tree, geoms, rules,
# options), shared, since the step only reads them, and world w's rows of the per-world ones
# (data, contacts, solver, q, v, tau), which, like forces, have a leading world axis. World w
# goes through the one-world step kernel, so that a batch computes exactly what separate
# Simulations compute, bit for bit; prange spreads the worlds over numba's threads. t0[w] is
# world w's time.
@batch_kernel
def step_batch_semi_implicit_euler(worlds, forces, t0, dt, nsteps, loops, penalty, done, bad):
    """step_semi_implicit_euler for every world w; world w's (steps done, first non-finite DOF
    or -1) into done[w], bad[w]."""
    for w in prange(worlds.shape[0]):
        if forces is None:
            r = step_semi_implicit_euler(worlds[w], None, t0[w], dt, nsteps, loops, penalty, None)
        else:
            ef, ei = forces
            r = step_semi_implicit_euler(worlds[w], (ef[w], ei[w]), t0[w], dt, nsteps, loops, penalty, None)
        done[w] = r[0]
        bad[w] = r[1]


@batch_kernel
def step_batch_rk4(worlds, forces, t0, dt, nsteps, loops, penalty, done, bad):
    """step_rk4 for every world, as step_batch_semi_implicit_euler."""
    for w in prange(worlds.shape[0]):
        if forces is None:
            r = step_rk4(worlds[w], None, t0[w], dt, nsteps, loops, penalty, None)
        else:
            ef, ei = forces
            r = step_rk4(worlds[w], (ef[w], ei[w]), t0[w], dt, nsteps, loops, penalty, None)
        done[w] = r[0]
        bad[w] = r[1]
