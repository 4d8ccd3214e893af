"""Numba kernels over a compiled Tree (compiled.py) and its Data workspace.

Featherstone's algorithms in body coordinates with linear-first spatial vectors: motion
(v, w) is the velocity of the body-frame origin and the angular velocity, force (f, n) the
force and the moment about the body-frame origin. Body i's pose in its parent (Rr[i], pr[i])
moves motions, forces and inertias between their coordinates (spatial3.py). Gravity enters as
the world's acceleration a0 = (-g, 0). Nothing here allocates: every array lives in Data.
Kernels in other files call these; mbsim_ros/_kernel_cache.py drops every cached kernel when
any numba source changes, so a cached caller never runs with a stale layout.
"""
import math
from collections import namedtuple

from numba import njit

from .._kernel_cache import kernel as kernel_decorator

from .functions import FI_COLUMNS, eval_function
from .spatial3 import block, force_to_parent_add, inertia_to_parent_add, motion_in_child, mtv, mv, outer_sub
from .views import array_view

# Elementary body types (compiled.py maps every Model joint type onto them). CUSTOM is a
# function-based body (OpenSim's CustomJoint, Simbody's FunctionBased mobilizer): nvb
# coordinates with v = dq/dt driving six transform axes through functions, so its motion
# subspace depends on q and lives in Data.S, rewritten by every kinematics pass.
REVOLUTE, PRISMATIC, HELICAL, SPHERICAL, FREE, CUSTOM = 1, 2, 3, 4, 5, 6

# What the kernels read; every array is contiguous and typed.
Tree = namedtuple("Tree", [
    "parent",      # int64[nb]   parent body, -1 = world
    "jtype",       # int64[nb]   REVOLUTE ... CUSTOM
    "iq", "iv",    # int64[nb]   first coordinate / velocity index
    "nvb",         # int64[nb]   DOFs of the body
    "axis",        # f8[nb,6,3]  joint axis (row 0, body frame); a CUSTOM body's six transform axes
                   #             (rotations 0-2, translations 3-5)
    "hpitch",      # f8[nb]      helical: translation per radian
    "R0", "p0",    # f8[nb,3,3], f8[nb,3]: joint placement in the parent body frame
    "S0",          # f8[nb,6,6]  constant motion subspace (first nvb columns; zero for CUSTOM):
                   #             Compiled.new_data copies it into Data.S, which the kernels read
    "ta_index",    # int64[nb,6,2] CUSTOM: per transform axis, the body coordinate (0..nvb-1) driving
                   #             it (-1 = constant) and its function in ff/fi
    "ff", "fi",    # f8[nff], int64[nfn,FI_COLUMNS]: packed functions (functions.py)
    "mass", "h", "Io",  # f8[nb], f8[nb,3], f8[nb,3,3]: mass, first moment m*c, inertia about the body origin
    "armature", "damping", "stiffness", "rest", "friction",  # f8[nv]
    "link_body",   # int64[nl]   body carrying each Model link, -1 = world (welded)
    "link_R", "link_p",  # f8[nl,3,3], f8[nl,3]: link frame in its body frame
    "gravity",     # f8[3]
    "radii",       # f8[nb,3]    CUSTOM: ellipsoid radii (Simbody's Ellipsoid mobilizer: the origin
                   #             moves by diag(radii) R z); zero for none
])

# Workspace the kernels write into: allocated once per Physics (the mjData of this project).
Data = namedtuple("Data", [
    "Rr", "pr",    # body pose in its parent body frame
    "Rw", "pw",    # body pose in the world
    "S",           # motion subspace of each body at q (body frame; first nvb columns)
    "ta_state",    # CUSTOM: per transform axis, (axis in the body frame, f', f'' of its function) at q
    "vel", "cb", "acc",  # body velocity, velocity-product acceleration, acceleration (body frame)
    "IA", "pA",    # articulated inertia and bias force
    "U", "Dinv", "u",  # per body: IA S, (S^T IA S + diag)^-1, tau - S^T pA
    "f",           # body forces (RNEA)
    "fext",        # external force on each body (body frame, about its origin)
    "M", "qdd", "tau_total", "diag",
    "t6a", "t6b", "T66", "T66b", "UDi",  # scratch
    "link_R", "link_p",  # world link poses
    "q_prev", "v_prev",  # state at the start of the last step
    "a_step",      # (v after the step's impulses - v_prev) / dt: the last step's acceleration
    "k_v", "k_a", "q_stage", "v_stage", "v_sum", "a_sum",  # RK4 stages
    "Sw",          # CRBA: motion subspaces in the world frame, about the world origin
    "crb",         # CRBA: composite rigid-body inertias in the world frame, about the world
                   #       origin: (mass, first moment (3), inertia (3x3 row-major)) per body
])


TREE_HEADER = 6    # ti[:6] = nb, nv, nl, nq, nff, nfn


# Each buffer's layout, written once: {field: length} in the order its carve function cuts the
# fields, for the float buffer and the int buffer (a header of counts is a field of its own).
# The size functions add them up; the Python side checks every carve against its layout
# (Compiled and the other owners when they build their buffers, test/dynamics/test_layouts.py
# field by field).
def tree_layout(nb, nv, nl, nff, nfn):
    """carve_tree's fields: (float {field: length}, int {field: length})."""
    floats = dict(axis=18 * nb, hpitch=nb, R0=9 * nb, p0=3 * nb, S0=36 * nb, mass=nb, h=3 * nb, Io=9 * nb,
                  armature=nv, damping=nv, stiffness=nv, rest=nv, friction=nv, link_R=9 * nl, link_p=3 * nl,
                  gravity=3, radii=3 * nb, ff=nff)
    ints = dict(header=TREE_HEADER, parent=nb, jtype=nb, iq=nb, iv=nb, nvb=nb, link_body=nl, ta_index=12 * nb,
                fi=FI_COLUMNS * nfn)
    return floats, ints


def tree_sizes(nb, nv, nl, nff, nfn):
    """(float, int) buffer lengths that carve_tree lays out."""
    floats, ints = tree_layout(nb, nv, nl, nff, nfn)
    return sum(floats.values()), sum(ints.values())


def data_layout(nb, nv, nq, nl):
    """carve_data's fields: (float {field: length}, {}): Data has no int buffer."""
    floats = dict(Rr=9 * nb, pr=3 * nb, Rw=9 * nb, pw=3 * nb, S=36 * nb, ta_state=30 * nb,
                  vel=6 * nb, cb=6 * nb, acc=6 * nb, IA=36 * nb, pA=6 * nb, U=36 * nb, Dinv=36 * nb, u=6 * nb,
                  f=6 * nb, fext=6 * nb, M=nv * nv, qdd=nv, tau_total=nv, diag=nv, t6a=6, t6b=6, T66=36, T66b=36,
                  UDi=36, link_R=9 * nl, link_p=3 * nl, q_prev=nq, v_prev=nv, a_step=nv, k_v=4 * nv, k_a=4 * nv,
                  q_stage=nq, v_stage=nv, v_sum=nv, a_sum=nv, Sw=36 * nb, crb=13 * nb)
    return floats, {}


def data_size(nb, nv, nq, nl):
    """Float buffer length that carve_data lays out."""
    return sum(data_layout(nb, nv, nq, nl)[0].values())


kernel = kernel_decorator(error_model="numpy")                  # entry points, called from Python
internal = kernel_decorator(error_model="numpy", python=False)  # called from kernels only
batch_kernel = kernel_decorator(error_model="numpy", parallel=True)  # entry points spreading worlds over threads (prange)
# small helpers are inlined into their callers (numba-level: compiled as part of the caller's
# code; chosen when kernels still counted references, which a call paid per array view)
inline = njit(cache=True, nogil=True, error_model="numpy", inline="always")


@internal
def carve_tree(tf, ti):
    """The Tree as views into one float and one int buffer (header ti[:6] = nb, nv, nl, nq,
    nff, nfn).

    Kernels take the buffers, not the namedtuple: numba's dispatcher types a namedtuple
    argument on its slow path (microseconds per call), arrays and plain tuples of a few (the
    bundles of step.py's kernels) on its fast one. Python code runs the
    same lines through carve_tree.py_func (numpy views too): compiling a Python entry that
    returns ~25 arrays would cost a CPU second for nothing (likewise every carve_*)."""
    nb, nv, nl, nff, nfn = ti[0], ti[1], ti[2], ti[4], ti[5]
    o = 0
    axis = array_view(tf, o, (nb, 6, 3)); o += 18 * nb
    hpitch = array_view(tf, o, nb); o += nb
    R0 = array_view(tf, o, (nb, 3, 3)); o += 9 * nb
    p0 = array_view(tf, o, (nb, 3)); o += 3 * nb
    S0 = array_view(tf, o, (nb, 6, 6)); o += 36 * nb
    mass = array_view(tf, o, nb); o += nb
    h = array_view(tf, o, (nb, 3)); o += 3 * nb
    Io = array_view(tf, o, (nb, 3, 3)); o += 9 * nb
    armature = array_view(tf, o, nv); o += nv
    damping = array_view(tf, o, nv); o += nv
    stiffness = array_view(tf, o, nv); o += nv
    rest = array_view(tf, o, nv); o += nv
    friction = array_view(tf, o, nv); o += nv
    link_R = array_view(tf, o, (nl, 3, 3)); o += 9 * nl
    link_p = array_view(tf, o, (nl, 3)); o += 3 * nl
    gravity = array_view(tf, o, 3); o += 3
    radii = array_view(tf, o, (nb, 3)); o += 3 * nb
    ff = array_view(tf, o, nff); o += nff
    k = TREE_HEADER
    parent = array_view(ti, k, nb); k += nb
    jtype = array_view(ti, k, nb); k += nb
    iq = array_view(ti, k, nb); k += nb
    iv = array_view(ti, k, nb); k += nb
    nvb = array_view(ti, k, nb); k += nb
    link_body = array_view(ti, k, nl); k += nl
    ta_index = array_view(ti, k, (nb, 6, 2)); k += 12 * nb
    fi = array_view(ti, k, (nfn, FI_COLUMNS)); k += FI_COLUMNS * nfn
    tree = Tree(parent, jtype, iq, iv, nvb, axis, hpitch, R0, p0, S0, ta_index, ff, fi, mass, h, Io, armature, damping, stiffness, rest, friction, link_body,
                link_R, link_p, gravity, radii)
    return tree, o, k


@internal
def carve_data(df, ti):
    """The Data workspace as views into one float buffer (sizes from the Tree header ti)."""
    nb, nv, nl, nq = ti[0], ti[1], ti[2], ti[3]
    o = 0
    Rr = array_view(df, o, (nb, 3, 3)); o += 9 * nb
    pr = array_view(df, o, (nb, 3)); o += 3 * nb
    Rw = array_view(df, o, (nb, 3, 3)); o += 9 * nb
    pw = array_view(df, o, (nb, 3)); o += 3 * nb
    S = array_view(df, o, (nb, 6, 6)); o += 36 * nb
    ta_state = array_view(df, o, (nb, 6, 5)); o += 30 * nb
    vel = array_view(df, o, (nb, 6)); o += 6 * nb
    cb = array_view(df, o, (nb, 6)); o += 6 * nb
    acc = array_view(df, o, (nb, 6)); o += 6 * nb
    IA = array_view(df, o, (nb, 6, 6)); o += 36 * nb
    pA = array_view(df, o, (nb, 6)); o += 6 * nb
    U = array_view(df, o, (nb, 6, 6)); o += 36 * nb
    Dinv = array_view(df, o, (nb, 6, 6)); o += 36 * nb
    u = array_view(df, o, (nb, 6)); o += 6 * nb
    f = array_view(df, o, (nb, 6)); o += 6 * nb
    fext = array_view(df, o, (nb, 6)); o += 6 * nb
    M = array_view(df, o, (nv, nv)); o += nv * nv
    qdd = array_view(df, o, nv); o += nv
    tau_total = array_view(df, o, nv); o += nv
    diag = array_view(df, o, nv); o += nv
    t6a = array_view(df, o, 6); o += 6
    t6b = array_view(df, o, 6); o += 6
    T66 = array_view(df, o, (6, 6)); o += 36
    T66b = array_view(df, o, (6, 6)); o += 36
    UDi = array_view(df, o, (6, 6)); o += 36
    link_R = array_view(df, o, (nl, 3, 3)); o += 9 * nl
    link_p = array_view(df, o, (nl, 3)); o += 3 * nl
    q_prev = array_view(df, o, nq); o += nq
    v_prev = array_view(df, o, nv); o += nv
    a_step = array_view(df, o, nv); o += nv
    k_v = array_view(df, o, (4, nv)); o += 4 * nv
    k_a = array_view(df, o, (4, nv)); o += 4 * nv
    q_stage = array_view(df, o, nq); o += nq
    v_stage = array_view(df, o, nv); o += nv
    v_sum = array_view(df, o, nv); o += nv
    a_sum = array_view(df, o, nv); o += nv
    Sw = array_view(df, o, (nb, 6, 6)); o += 36 * nb
    crb = array_view(df, o, (nb, 13)); o += 13 * nb
    data = Data(Rr, pr, Rw, pw, S, ta_state, vel, cb, acc, IA, pA, U, Dinv, u, f,
                fext, M, qdd, tau_total, diag, t6a, t6b, T66, T66b, UDi, link_R, link_p,
                q_prev, v_prev, a_step, k_v, k_a, q_stage, v_stage, v_sum, a_sum, Sw, crb)
    return data, o





# ---------------------------------------------------------------- small spatial algebra ---
@inline
def copy_into(dst, src):
    """dst[:] = src for 1-D arrays of one length, as a loop: numba's slice assignment checks for
    overlap and may copy through a temporary, which needs its reference-counted allocator (the
    kernels compile without it, _kernel_cache.kernel)."""
    for j in range(dst.shape[0]):
        dst[j] = src[j]


@inline
def quat_to_R(x, y, z, w, R):
    n = math.sqrt(x * x + y * y + z * z + w * w)
    x /= n
    y /= n
    z /= n
    w /= n
    R[0, 0] = 1 - 2 * (y * y + z * z)
    R[0, 1] = 2 * (x * y - z * w)
    R[0, 2] = 2 * (x * z + y * w)
    R[1, 0] = 2 * (x * y + z * w)
    R[1, 1] = 1 - 2 * (x * x + z * z)
    R[1, 2] = 2 * (y * z - x * w)
    R[2, 0] = 2 * (x * z - y * w)
    R[2, 1] = 2 * (y * z + x * w)
    R[2, 2] = 1 - 2 * (x * x + y * y)


@inline
def _axis_angle_to_R(ax, angle, R):
    x, y, z = ax[0], ax[1], ax[2]
    c, s = math.cos(angle), math.sin(angle)
    C = 1.0 - c
    R[0, 0] = c + x * x * C
    R[0, 1] = x * y * C - z * s
    R[0, 2] = x * z * C + y * s
    R[1, 0] = y * x * C + z * s
    R[1, 1] = c + y * y * C
    R[1, 2] = y * z * C - x * s
    R[2, 0] = z * x * C - y * s
    R[2, 1] = z * y * C + x * s
    R[2, 2] = c + z * z * C


@inline
def _joint_placement(jt, iq, ax, hpitch, R0, p0, q, Rj, Rr, pr):
    """A body's pose in its parent body frame: (R0 Rj(q), p0 + R0 pj(q)); Rj is scratch."""
    px = py = pz = 0.0
    if jt == REVOLUTE or jt == HELICAL:
        _axis_angle_to_R(ax, q[iq], Rj)
        if jt == HELICAL:
            s = hpitch * q[iq]
            px, py, pz = s * ax[0], s * ax[1], s * ax[2]
    elif jt == PRISMATIC:
        for a in range(3):
            for b in range(3):
                Rj[a, b] = 1.0 if a == b else 0.0
        px, py, pz = q[iq] * ax[0], q[iq] * ax[1], q[iq] * ax[2]
    elif jt == SPHERICAL:
        quat_to_R(q[iq], q[iq + 1], q[iq + 2], q[iq + 3], Rj)
    else:  # FREE
        quat_to_R(q[iq + 3], q[iq + 4], q[iq + 5], q[iq + 6], Rj)
        px, py, pz = q[iq], q[iq + 1], q[iq + 2]
    for a in range(3):
        for b in range(3):
            Rr[a, b] = R0[a, 0] * Rj[0, b] + R0[a, 1] * Rj[1, b] + R0[a, 2] * Rj[2, b]
        pr[a] = p0[a] + R0[a, 0] * px + R0[a, 1] * py + R0[a, 2] * pz


@inline
def _body_inertia(m, h, Io, I):
    for a in range(3):
        for b in range(3):
            I[a, b] = m if a == b else 0.0
            I[a + 3, b + 3] = Io[a, b]
    # [[m E, -h^], [h^, Io]]
    I[0, 3], I[0, 4], I[0, 5] = 0.0, h[2], -h[1]
    I[1, 3], I[1, 4], I[1, 5] = -h[2], 0.0, h[0]
    I[2, 3], I[2, 4], I[2, 5] = h[1], -h[0], 0.0
    for a in range(3):
        for b in range(3):
            I[a + 3, b] = I[b, a + 3]


@inline
def _inertia_times_motion(mass, h, Io, m, out):
    """out = I m for a rigid body inertia (mass, first moment h, inertia Io about the origin)."""
    v0, v1, v2, w0, w1, w2 = m[0], m[1], m[2], m[3], m[4], m[5]
    out[0] = mass * v0 - (h[1] * w2 - h[2] * w1)
    out[1] = mass * v1 - (h[2] * w0 - h[0] * w2)
    out[2] = mass * v2 - (h[0] * w1 - h[1] * w0)
    out[3] = h[1] * v2 - h[2] * v1 + Io[0, 0] * w0 + Io[0, 1] * w1 + Io[0, 2] * w2
    out[4] = h[2] * v0 - h[0] * v2 + Io[1, 0] * w0 + Io[1, 1] * w1 + Io[1, 2] * w2
    out[5] = h[0] * v1 - h[1] * v0 + Io[2, 0] * w0 + Io[2, 1] * w1 + Io[2, 2] * w2


@inline
def _cross_force_add(vel, f, out):
    """out += vel x* f = (w x f_lin, w x n + v x f_lin)."""
    v0, v1, v2, w0, w1, w2 = vel[0], vel[1], vel[2], vel[3], vel[4], vel[5]
    f0, f1, f2, n0, n1, n2 = f[0], f[1], f[2], f[3], f[4], f[5]
    out[0] += w1 * f2 - w2 * f1
    out[1] += w2 * f0 - w0 * f2
    out[2] += w0 * f1 - w1 * f0
    out[3] += w1 * n2 - w2 * n1 + v1 * f2 - v2 * f1
    out[4] += w2 * n0 - w0 * n2 + v2 * f0 - v0 * f2
    out[5] += w0 * n1 - w1 * n0 + v0 * f1 - v1 * f0


@inline
def _invert_spd(A, n, Ainv):
    """Ainv[:n, :n] = A[:n, :n]^-1 for a small (n <= 6) symmetric positive-definite block, by
    Cholesky, in place in Ainv; a non-positive pivot yields NaN, caught by the step's check."""
    if n == 1:
        Ainv[0, 0] = 1.0 / A[0, 0]
        return
    # Cholesky L L^T = A, stored in Ainv's lower triangle temporarily.
    L = Ainv
    for a in range(n):
        for b in range(a + 1):
            s = A[a, b]
            for k in range(b):
                s -= L[a, k] * L[b, k]
            if a == b:
                L[a, a] = math.sqrt(s) if s > 0.0 else math.nan
            else:
                L[a, b] = s / L[b, b]
    # invert L in place (lower triangular)
    for a in range(n):
        L[a, a] = 1.0 / L[a, a]
        for b in range(a):
            s = 0.0
            for k in range(b, a):
                s -= L[a, k] * L[k, b]
            L[a, b] = s * L[a, a]
    # A^-1 = L^-T L^-1, symmetric: compute the upper triangle from the lower one, then mirror
    for a in range(n):
        for b in range(a, n):
            s = 0.0
            for k in range(b, n):
                s += L[k, a] * L[k, b]
            Ainv[a, b] = s   # upper triangle; the diagonal it overwrites is not read again
    for a in range(n):
        for b in range(a + 1, n):
            Ainv[b, a] = Ainv[a, b]


# ---------------------------------------------------------------------------- kinematics ---
@internal
def _custom_joint(t, d, i, q):
    """A CUSTOM body: its pose in the parent body frame (R0 R(q), p0 + R0 p(q)) into d.Rr[i],
    d.pr[i]; its motion subspace into d.S[i]; and, for the velocity pass, each transform axis
    in the body frame with (f', f'') of its function (d.ta_state).

    R = R(a0, f0) R(a1, f1) R(a2, f2), p = f3 a3 + f4 a4 + f5 a5 (joint frame). The body's
    angular velocity is sum f_k' qdot e_k with e_k = (R_k+1 ... R_2)^T a_k (rotation k's axis
    in the body frame); its origin's velocity sum f_k' qdot R^T a_k (translations)."""
    iq = t.iq[i]
    n = t.nvb[i]
    S = d.S[i]
    for a in range(6):
        for c in range(n):
            S[a, c] = 0.0
    A = d.Rr[i]          # R_k ... R_2 so far, then R; turned into R0 R at the end
    Rk = d.Rw[i]         # scratch until forward_kinematics sets it
    for a in range(3):
        for b in range(3):
            A[a, b] = 1.0 if a == b else 0.0
    px = py = pz = 0.0
    for step in range(6):
        k = 2 - step if step < 3 else step      # rotations innermost first, then translations
        c = t.ta_index[i, k, 0]
        x = q[iq + c] if c >= 0 else 0.0
        # `inputs` is never read: compile() refuses input functions on transform axes
        f, df, ddf = eval_function(t.ff, t.fi, t.ta_index[i, k, 1], x, t.ff)
        if c < 0:
            df = ddf = 0.0
        ax = t.axis[i, k]
        e = d.ta_state[i, k]
        for b in range(3):       # the axis in the body frame: A^T a (A = R once the rotations are done)
            e[b] = A[0, b] * ax[0] + A[1, b] * ax[1] + A[2, b] * ax[2]
        e[3] = df
        e[4] = ddf
        row = 3 if k < 3 else 0
        if c >= 0:
            for b in range(3):
                S[row + b, c] += df * e[b]
        if k < 3:
            _axis_angle_to_R(ax, f, Rk)
            _rotate_columns(Rk, A)
        else:
            px += f * ax[0]
            py += f * ax[1]
            pz += f * ax[2]
    rad = t.radii[i]
    if rad[0] != 0.0 or rad[1] != 0.0 or rad[2] != 0.0:
        # Simbody's Ellipsoid mobilizer: p += D R z (A = R here); the origin's velocity in the
        # body frame is M (w x z) with M = R^T D R, so each column adds M (S_w x z)
        px += rad[0] * A[0, 2]
        py += rad[1] * A[1, 2]
        pz += rad[2] * A[2, 2]
        for c in range(n):
            u0, u1 = S[4, c], -S[3, c]          # S_w x z = (w1, -w0, 0)
            for a in range(3):
                S[a, c] += _ellipsoid_m(A, rad, a, 0) * u0 + _ellipsoid_m(A, rad, a, 1) * u1
    R0, p0, pr = t.R0[i], t.p0[i], d.pr[i]
    _rotate_columns(R0, A)
    for a in range(3):
        pr[a] = p0[a] + R0[a, 0] * px + R0[a, 1] * py + R0[a, 2] * pz


@inline
def _ellipsoid_m(R, rad, a, b):
    """(R^T D R)[a, b] with D = diag(rad)."""
    return rad[0] * R[0, a] * R[0, b] + rad[1] * R[1, a] * R[1, b] + rad[2] * R[2, a] * R[2, b]


@inline
def _rotate_columns(Rk, A):
    """A = Rk A in place, column by column."""
    for b in range(3):
        a0 = Rk[0, 0] * A[0, b] + Rk[0, 1] * A[1, b] + Rk[0, 2] * A[2, b]
        a1 = Rk[1, 0] * A[0, b] + Rk[1, 1] * A[1, b] + Rk[1, 2] * A[2, b]
        a2 = Rk[2, 0] * A[0, b] + Rk[2, 1] * A[1, b] + Rk[2, 2] * A[2, b]
        A[0, b], A[1, b], A[2, b] = a0, a1, a2


@internal
def _custom_bias_add(t, d, i, v, out):
    """out += Sdot qdot of CUSTOM body i (the apparent derivative of S(q) qdot in the body
    frame): second derivatives of the functions along the axes, plus the turning of the body
    axes, de_k/dt = e_k x sum_{m>k} fdot_m e_m for rotations, dl/dt = l x w_J for translations."""
    iv = t.iv[i]
    w0 = w1 = w2 = 0.0       # sum of fdot_m e_m over the rotations after k: ends as the joint's w
    al0 = al1 = al2 = 0.0    # the rotations' part of Sdot qdot: the apparent rate of the joint's w
    for k in range(2, -1, -1):
        c = t.ta_index[i, k, 0]
        if c < 0:
            continue
        e = d.ta_state[i, k]
        qd = v[iv + c]
        fd = e[3] * qd
        fdd = e[4] * qd * qd
        al0 += fdd * e[0] + fd * (e[1] * w2 - e[2] * w1)
        al1 += fdd * e[1] + fd * (e[2] * w0 - e[0] * w2)
        al2 += fdd * e[2] + fd * (e[0] * w1 - e[1] * w0)
        w0 += fd * e[0]
        w1 += fd * e[1]
        w2 += fd * e[2]
    out[3] += al0
    out[4] += al1
    out[5] += al2
    rad = t.radii[i]
    if rad[0] != 0.0 or rad[1] != 0.0 or rad[2] != 0.0:
        # v = M (w x z), M = R^T D R: its apparent rate is M (w x (w x z) + alpha x z) - w x v
        R = d.T66b       # scratch 3x3 corner: R = R0^T Rr
        R0, Rr = t.R0[i], d.Rr[i]
        for a in range(3):
            for b in range(3):
                R[a, b] = R0[0, a] * Rr[0, b] + R0[1, a] * Rr[1, b] + R0[2, a] * Rr[2, b]
        x0, x1 = w1, -w0                         # w x z
        y0, y1, y2 = w1 * 0.0 - w2 * x1, w2 * x0, w0 * x1 - w1 * x0    # w x (w x z)
        y0 += al1                                # + alpha x z = (al1, -al0, 0)
        y1 -= al0
        v0 = _ellipsoid_m(R, rad, 0, 0) * x0 + _ellipsoid_m(R, rad, 0, 1) * x1
        v1 = _ellipsoid_m(R, rad, 1, 0) * x0 + _ellipsoid_m(R, rad, 1, 1) * x1
        v2 = _ellipsoid_m(R, rad, 2, 0) * x0 + _ellipsoid_m(R, rad, 2, 1) * x1
        for a in range(3):
            out[a] += (_ellipsoid_m(R, rad, a, 0) * y0 + _ellipsoid_m(R, rad, a, 1) * y1
                       + _ellipsoid_m(R, rad, a, 2) * y2)
        out[0] -= w1 * v2 - w2 * v1
        out[1] -= w2 * v0 - w0 * v2
        out[2] -= w0 * v1 - w1 * v0
    for k in range(3, 6):
        c = t.ta_index[i, k, 0]
        if c < 0:
            continue
        e = d.ta_state[i, k]
        qd = v[iv + c]
        fd = e[3] * qd
        fdd = e[4] * qd * qd
        out[0] += fdd * e[0] + fd * (e[1] * w2 - e[2] * w1)
        out[1] += fdd * e[1] + fd * (e[2] * w0 - e[0] * w2)
        out[2] += fdd * e[2] + fd * (e[0] * w1 - e[1] * w0)


@internal
def forward_kinematics(t, d, q):
    """Body poses relative to the parent (Rr, pr) and in the world (Rw, pw); the motion
    subspaces of CUSTOM bodies (d.S)."""
    body_poses(t, d, q, True)


@internal
def body_poses(t, d, q, world):
    """Body poses relative to the parent (Rr, pr) and, where `world`, in the world (Rw, pw;
    else Rw is scratch); the motion subspaces of CUSTOM bodies (d.S). ABA and RNEA need the
    poses in the parent alone, CRBA and link poses the world poses."""
    nb = t.parent.shape[0]
    for i in range(nb):
        if t.jtype[i] == CUSTOM:
            _custom_joint(t, d, i, q)
        else:
            _joint_placement(t.jtype[i], t.iq[i], t.axis[i, 0], t.hpitch[i], t.R0[i], t.p0[i], q,
                             d.Rw[i], d.Rr[i], d.pr[i])   # Rw[i] is scratch until set below
        if world:
            _world_pose(t, d, i)


@inline
def _world_pose(t, d, i):
    """Body i's world pose (Rw, pw) from its pose in its parent (Rr, pr) and the parent's."""
    p = t.parent[i]
    if p < 0:
        for a in range(3):
            d.pw[i, a] = d.pr[i, a]
            for b in range(3):
                d.Rw[i, a, b] = d.Rr[i, a, b]
    else:
        Rp = d.Rw[p]
        for a in range(3):
            d.pw[i, a] = d.pw[p, a] + Rp[a, 0] * d.pr[i, 0] + Rp[a, 1] * d.pr[i, 1] + Rp[a, 2] * d.pr[i, 2]
            for b in range(3):
                d.Rw[i, a, b] = Rp[a, 0] * d.Rr[i, 0, b] + Rp[a, 1] * d.Rr[i, 1, b] + Rp[a, 2] * d.Rr[i, 2, b]


@internal
def world_poses(t, d):
    """Every body's world pose after body_poses(..., world=False): what it would have written."""
    for i in range(t.parent.shape[0]):
        _world_pose(t, d, i)


@internal
def link_poses(t, d):
    """World pose of every Model link (after forward_kinematics)."""
    for k in range(t.link_body.shape[0]):
        b = t.link_body[k]
        Rl = t.link_R[k]
        pl = t.link_p[k]
        for a in range(3):
            if b < 0:
                d.link_p[k, a] = pl[a]
                for c in range(3):
                    d.link_R[k, a, c] = Rl[a, c]
            else:
                R = d.Rw[b]
                d.link_p[k, a] = d.pw[b, a] + R[a, 0] * pl[0] + R[a, 1] * pl[1] + R[a, 2] * pl[2]
                for c in range(3):
                    d.link_R[k, a, c] = R[a, 0] * Rl[0, c] + R[a, 1] * Rl[1, c] + R[a, 2] * Rl[2, c]


@internal
def _velocities(t, d, v):
    """Body velocities and velocity-product accelerations cb = vel x (S qdot) (+ Sdot qdot for
    CUSTOM bodies, whose S turns with q)."""
    nb = t.parent.shape[0]
    for i in range(nb):
        p = t.parent[i]
        if p < 0:
            x0 = x1 = x2 = x3 = x4 = x5 = 0.0
        else:
            x0, x1, x2, x3, x4, x5 = motion_in_child(d.Rr[i], d.pr[i], d.vel[p])
        S = d.S[i]
        iv = t.iv[i]
        j0 = j1 = j2 = j3 = j4 = j5 = 0.0     # S qdot, in registers
        for k in range(t.nvb[i]):
            qk = v[iv + k]
            j0, j1, j2 = j0 + S[0, k] * qk, j1 + S[1, k] * qk, j2 + S[2, k] * qk
            j3, j4, j5 = j3 + S[3, k] * qk, j4 + S[4, k] * qk, j5 + S[5, k] * qk
        x0, x1, x2, x3, x4, x5 = x0 + j0, x1 + j1, x2 + j2, x3 + j3, x4 + j4, x5 + j5
        vel, cb = d.vel[i], d.cb[i]
        vel[0], vel[1], vel[2], vel[3], vel[4], vel[5] = x0, x1, x2, x3, x4, x5
        # cb = vel x (S qdot) = (w x j_lin + v x j_ang, w x j_ang)
        cb[0] = x4 * j2 - x5 * j1 + x1 * j5 - x2 * j4
        cb[1] = x5 * j0 - x3 * j2 + x2 * j3 - x0 * j5
        cb[2] = x3 * j1 - x4 * j0 + x0 * j4 - x1 * j3
        cb[3] = x4 * j5 - x5 * j4
        cb[4] = x5 * j3 - x3 * j5
        cb[5] = x3 * j4 - x4 * j3
        if t.jtype[i] == CUSTOM:
            _custom_bias_add(t, d, i, v, d.cb[i])


@internal
def velocity_kinematics(t, d, q, v):
    forward_kinematics(t, d, q)
    _velocities(t, d, v)


@internal
def body_frame_kinematics(t, d, q, v):
    """What ABA and RNEA read: velocity_kinematics without the world poses."""
    body_poses(t, d, q, False)
    _velocities(t, d, v)


@inline
def _free_armature_bias(t, d, i, k):
    """The bias of the armature on DOF k of a root free joint, as MJCF means it: MuJoCo adds
    armature to the mass matrix in its own coordinates, where a free joint's linear velocity is
    in the world frame (R v). In ours (body frame) its force a d/dt(R v) = a R (dv/dt + w x v)
    leaves a (w x v) on the linear DOFs; zero elsewhere (and where the armature is)."""
    if t.jtype[i] != FREE or t.parent[i] >= 0 or k >= 3:
        return 0.0
    a = t.armature[t.iv[i] + k]
    if a == 0.0:
        return 0.0
    v0, v1, v2, w0, w1, w2 = d.vel[i, 0], d.vel[i, 1], d.vel[i, 2], d.vel[i, 3], d.vel[i, 4], d.vel[i, 5]
    if k == 0:
        return a * (w1 * v2 - w2 * v1)
    if k == 1:
        return a * (w2 * v0 - w0 * v2)
    return a * (w0 * v1 - w1 * v0)


@inline
def _aba_one_dof(t, d, i, p, tau, diag):
    """ABA's pass up at a one-DOF body i (most joints), in registers: U = IA S, D = S^T U + diag,
    u = tau - S^T pA (kept for the pass down and aba_solve), then the parent p gets
    X^T (IA - U U^T / D) X and X^T (pA + Ia c + U u / D)."""
    iv = t.iv[i]
    S = d.S[i]
    IA = d.IA[i]
    pA = d.pA[i]
    A, B, C = block(IA, 0, 0), block(IA, 0, 3), block(IA, 3, 3)
    s0, s1, s2, s3, s4, s5 = S[0, 0], S[1, 0], S[2, 0], S[3, 0], S[4, 0], S[5, 0]
    a0, a1, a2 = mv(A, s0, s1, s2)
    b0, b1, b2 = mv(B, s3, s4, s5)
    c0, c1, c2 = mtv(B, s0, s1, s2)
    e0, e1, e2 = mv(C, s3, s4, s5)
    U0, U1, U2, U3, U4, U5 = a0 + b0, a1 + b1, a2 + b2, c0 + e0, c1 + e1, c2 + e2
    U = d.U[i]
    U[0, 0], U[1, 0], U[2, 0], U[3, 0], U[4, 0], U[5, 0] = U0, U1, U2, U3, U4, U5
    Dv = diag[iv] + s0 * U0 + s1 * U1 + s2 * U2 + s3 * U3 + s4 * U4 + s5 * U5
    uv = tau[iv] - (s0 * pA[0] + s1 * pA[1] + s2 * pA[2] + s3 * pA[3] + s4 * pA[4] + s5 * pA[5])
    d.u[i, 0] = uv
    Di = 1.0 / Dv
    d.Dinv[i, 0, 0] = Di
    if p < 0:
        return
    A = outer_sub(A, U0, U1, U2, U0, U1, U2, Di)
    B = outer_sub(B, U0, U1, U2, U3, U4, U5, Di)
    C = outer_sub(C, U3, U4, U5, U3, U4, U5, Di)
    cb = d.cb[i]
    x0, x1, x2, y0, y1, y2 = cb[0], cb[1], cb[2], cb[3], cb[4], cb[5]
    k = uv * Di
    fa, fb = mv(A, x0, x1, x2), mv(B, y0, y1, y2)
    na, nc = mtv(B, x0, x1, x2), mv(C, y0, y1, y2)
    force_to_parent_add(d.Rr[i], d.pr[i], pA[0] + fa[0] + fb[0] + U0 * k, pA[1] + fa[1] + fb[1] + U1 * k,
                        pA[2] + fa[2] + fb[2] + U2 * k, pA[3] + na[0] + nc[0] + U3 * k,
                        pA[4] + na[1] + nc[1] + U4 * k, pA[5] + na[2] + nc[2] + U5 * k, d.pA[p])
    inertia_to_parent_add(d.Rr[i], d.pr[i], A, B, C, d.IA[p])


# -------------------------------------------------------------------------------- ABA ---
@internal
def aba(t, d, tau, diag, qdd):
    """Articulated-body forward dynamics after velocity_kinematics: qdd for generalized force
    tau, with `diag` added to each DOF's articulated inertia (armature, implicit terms)."""
    nb = t.parent.shape[0]
    g = t.gravity
    tmp = d.t6a
    for i in range(nb):
        _body_inertia(t.mass[i], t.h[i], t.Io[i], d.IA[i])
        _inertia_times_motion(t.mass[i], t.h[i], t.Io[i], d.vel[i], tmp)
        for a in range(6):
            d.pA[i, a] = -d.fext[i, a]
        _cross_force_add(d.vel[i], tmp, d.pA[i])
    for i in range(nb - 1, -1, -1):
        p = t.parent[i]
        if t.nvb[i] == 1:
            _aba_one_dof(t, d, i, p, tau, diag)
            continue
        nd = t.nvb[i]
        iv = t.iv[i]
        S = d.S[i]
        IA = d.IA[i]
        U = d.U[i]
        UDi = d.UDi
        Dm = d.T66
        for a in range(6):                   # U = IA S
            for k in range(nd):
                s = 0.0
                for c in range(6):
                    s += IA[a, c] * S[c, k]
                U[a, k] = s
        for k in range(nd):                  # D = S^T U + diag; u = tau - S^T pA
            for r in range(nd):
                s = 0.0
                for c in range(6):
                    s += S[c, k] * U[c, r]
                Dm[k, r] = s
            Dm[k, k] += diag[iv + k]
            s = tau[iv + k] - _free_armature_bias(t, d, i, k)
            for c in range(6):
                s -= S[c, k] * d.pA[i, c]
            d.u[i, k] = s
        _invert_spd(Dm, nd, d.Dinv[i])
        Dinv = d.Dinv[i]
        for a in range(6):                   # UDi = U Dinv
            for k in range(nd):
                s = 0.0
                for r in range(nd):
                    s += U[a, r] * Dinv[r, k]
                UDi[a, k] = s
        if p >= 0:
            Ia = d.T66
            for a in range(6):               # Ia = IA - U Dinv U^T (symmetric)
                for b in range(a, 6):
                    s = IA[a, b]
                    for k in range(nd):
                        s -= UDi[a, k] * U[b, k]
                    Ia[a, b] = s
                    Ia[b, a] = s
            pa = d.t6b
            for a in range(6):               # pa = pA + Ia c + U Dinv u
                s = d.pA[i, a]
                for b in range(6):
                    s += Ia[a, b] * d.cb[i, b]
                for k in range(nd):
                    s += UDi[a, k] * d.u[i, k]
                pa[a] = s
            inertia_to_parent_add(d.Rr[i], d.pr[i], block(Ia, 0, 0), block(Ia, 0, 3), block(Ia, 3, 3), d.IA[p])
            force_to_parent_add(d.Rr[i], d.pr[i], pa[0], pa[1], pa[2], pa[3], pa[4], pa[5], d.pA[p])
    a0 = d.t6b
    a0[0], a0[1], a0[2], a0[3], a0[4], a0[5] = -g[0], -g[1], -g[2], 0.0, 0.0, 0.0
    _aba_accelerations(t, d, a0, True, qdd)


@internal
def _aba_accelerations(t, d, a0, bias, out):
    """ABA's pass down the tree from the articulated inertias and d.u its pass up left: out the
    joint accelerations, d.acc the bodies'; a0 the world's acceleration, bias whether the
    velocity-product accelerations d.cb enter (aba) or not (aba_solve). Uses d.t6a as scratch."""
    tmp = d.t6a
    for i in range(t.parent.shape[0]):
        p = t.parent[i]
        x0, x1, x2, x3, x4, x5 = motion_in_child(d.Rr[i], d.pr[i], a0 if p < 0 else d.acc[p])
        if bias:
            cb = d.cb[i]
            x0, x1, x2, x3, x4, x5 = x0 + cb[0], x1 + cb[1], x2 + cb[2], x3 + cb[3], x4 + cb[4], x5 + cb[5]
        nd = t.nvb[i]
        iv = t.iv[i]
        S = d.S[i]
        U = d.U[i]
        acc = d.acc[i]
        if nd == 1:          # most joints: in registers
            qa = d.Dinv[i, 0, 0] * (d.u[i, 0] - (U[0, 0] * x0 + U[1, 0] * x1 + U[2, 0] * x2 + U[3, 0] * x3
                                                 + U[4, 0] * x4 + U[5, 0] * x5))
            out[iv] = qa
            acc[0], acc[1], acc[2] = x0 + S[0, 0] * qa, x1 + S[1, 0] * qa, x2 + S[2, 0] * qa
            acc[3], acc[4], acc[5] = x3 + S[3, 0] * qa, x4 + S[4, 0] * qa, x5 + S[5, 0] * qa
            continue
        acc[0], acc[1], acc[2], acc[3], acc[4], acc[5] = x0, x1, x2, x3, x4, x5
        for k in range(nd):
            s = d.u[i, k]
            for c in range(6):
                s -= U[c, k] * acc[c]
            tmp[k] = s
        for k in range(nd):
            s = 0.0
            for r in range(nd):
                s += d.Dinv[i, k, r] * tmp[r]
            out[iv + k] = s
        for a in range(6):
            s = 0.0
            for k in range(nd):
                s += S[a, k] * out[iv + k]
            acc[a] += s


@internal
def aba_solve(t, d, f, out):
    """out = H^-1 f, H the system matrix of the last aba() (mass matrix plus its diag), from the
    articulated inertias it left (U, Dinv): ABA with zero velocity, gravity and external
    forces, one pass up and ABA's own pass down (_aba_accelerations) over 6-vectors (a test
    impulse, Featherstone RBDA 7.3). Uses d.pA, d.u, d.acc and d.t6a, d.t6b as scratch."""
    nb = t.parent.shape[0]
    for i in range(nb):
        for a in range(6):
            d.pA[i, a] = 0.0
    tmp, pa = d.t6a, d.t6b
    for i in range(nb - 1, -1, -1):
        nd = t.nvb[i]
        iv = t.iv[i]
        S = d.S[i]
        U = d.U[i]
        Dinv = d.Dinv[i]
        carries = False
        for k in range(nd):                  # u = f - S^T pA
            s = f[iv + k]
            for c in range(6):
                s -= S[c, k] * d.pA[i, c]
            d.u[i, k] = s
            carries = carries or s != 0.0
        for c in range(6):
            carries = carries or d.pA[i, c] != 0.0
        p = t.parent[i]
        if p >= 0 and carries:               # (a row's f moves its DOFs' ancestors alone)
            for k in range(nd):              # Dinv u
                s = 0.0
                for r in range(nd):
                    s += Dinv[k, r] * d.u[i, r]
                tmp[k] = s
            for a in range(6):               # pa = pA + U Dinv u
                s = d.pA[i, a]
                for k in range(nd):
                    s += U[a, k] * tmp[k]
                pa[a] = s
            force_to_parent_add(d.Rr[i], d.pr[i], pa[0], pa[1], pa[2], pa[3], pa[4], pa[5], d.pA[p])
    for a in range(6):
        pa[a] = 0.0
    _aba_accelerations(t, d, pa, False, out)


# ------------------------------------------------------------------------------- RNEA ---
@internal
def body_accelerations(t, d, qdd, a0):
    """d.acc: body spatial accelerations for qdd, after velocity_kinematics; a0 is the world's
    acceleration ((-g, 0) folds gravity in, as RNEA and ABA do; zero gives true accelerations)."""
    for i in range(t.parent.shape[0]):
        p = t.parent[i]
        x0, x1, x2, x3, x4, x5 = motion_in_child(d.Rr[i], d.pr[i], a0 if p < 0 else d.acc[p])
        cb = d.cb[i]
        x0, x1, x2, x3, x4, x5 = x0 + cb[0], x1 + cb[1], x2 + cb[2], x3 + cb[3], x4 + cb[4], x5 + cb[5]
        S = d.S[i]
        iv = t.iv[i]
        for k in range(t.nvb[i]):
            a = qdd[iv + k]
            x0, x1, x2 = x0 + S[0, k] * a, x1 + S[1, k] * a, x2 + S[2, k] * a
            x3, x4, x5 = x3 + S[3, k] * a, x4 + S[4, k] * a, x5 + S[5, k] * a
        acc = d.acc[i]
        acc[0], acc[1], acc[2], acc[3], acc[4], acc[5] = x0, x1, x2, x3, x4, x5


@internal
def rnea(t, d, qdd, tau):
    """Inverse dynamics after velocity_kinematics: tau = M qdd + h(q, v) (armature included)."""
    nb = t.parent.shape[0]
    g = t.gravity
    a0 = d.t6b
    a0[0], a0[1], a0[2], a0[3], a0[4], a0[5] = -g[0], -g[1], -g[2], 0.0, 0.0, 0.0
    body_accelerations(t, d, qdd, a0)
    tmp = d.t6a
    for i in range(nb):
        _inertia_times_motion(t.mass[i], t.h[i], t.Io[i], d.acc[i], d.f[i])
        _inertia_times_motion(t.mass[i], t.h[i], t.Io[i], d.vel[i], tmp)
        _cross_force_add(d.vel[i], tmp, d.f[i])
        for a in range(6):
            d.f[i, a] -= d.fext[i, a]
    for i in range(nb - 1, -1, -1):
        S = d.S[i]
        iv = t.iv[i]
        for k in range(t.nvb[i]):
            s = t.armature[iv + k] * qdd[iv + k] + _free_armature_bias(t, d, i, k)
            for a in range(6):
                s += S[a, k] * d.f[i, a]
            tau[iv + k] = s
        p = t.parent[i]
        if p >= 0:
            f = d.f[i]
            force_to_parent_add(d.Rr[i], d.pr[i], f[0], f[1], f[2], f[3], f[4], f[5], d.f[p])


# ------------------------------------------------------------------------------- CRBA ---
@internal
def crba(t, d, M):
    """Joint-space mass matrix after forward_kinematics (armature on the diagonal), in the
    world frame as Pinocchio's: every body's inertia and motion subspace moved once to the world
    origin, composite inertias summed without transforms, M[i, j] = Sw_j . (Ic_i Sw_i) for j an
    ancestor DOF of i (a 6-term dot product, where the body-frame form moved the force up the
    chain one transform per ancestor)."""
    nb = t.parent.shape[0]
    crb, Sw = d.crb, d.Sw
    for i in range(nb):
        R, p, h, Io, m = d.Rw[i], d.pw[i], t.h[i], t.Io[i], t.mass[i]
        r0 = R[0, 0] * h[0] + R[0, 1] * h[1] + R[0, 2] * h[2]      # first moment about the body
        r1 = R[1, 0] * h[0] + R[1, 1] * h[1] + R[1, 2] * h[2]      # origin, world axes
        r2 = R[2, 0] * h[0] + R[2, 1] * h[1] + R[2, 2] * h[2]
        p0, p1, p2 = p[0], p[1], p[2]
        c = crb[i]
        c[0] = m
        c[1], c[2], c[3] = m * p0 + r0, m * p1 + r1, m * p2 + r2
        # about the world origin: R Io R^T + m (|p|^2 E - p p^T) + 2 (p.r) E - p r^T - r p^T
        diag = m * (p0 * p0 + p1 * p1 + p2 * p2) + 2.0 * (p0 * r0 + p1 * r1 + p2 * r2)
        for a in range(3):
            pa = p[a]
            ra = r0 if a == 0 else (r1 if a == 1 else r2)
            for b in range(a, 3):
                s = 0.0
                for k in range(3):
                    s += R[a, k] * (Io[k, 0] * R[b, 0] + Io[k, 1] * R[b, 1] + Io[k, 2] * R[b, 2])
                pb = p[b]
                rb = r0 if b == 0 else (r1 if b == 1 else r2)
                s -= m * pa * pb + pa * rb + ra * pb
                if a == b:
                    s += diag
                c[4 + 3 * a + b] = s
                c[4 + 3 * b + a] = s
        S = d.S[i]
        for k in range(t.nvb[i]):       # (v, w) at the world origin: (R v + p x R w, R w)
            w0 = R[0, 0] * S[3, k] + R[0, 1] * S[4, k] + R[0, 2] * S[5, k]
            w1 = R[1, 0] * S[3, k] + R[1, 1] * S[4, k] + R[1, 2] * S[5, k]
            w2 = R[2, 0] * S[3, k] + R[2, 1] * S[4, k] + R[2, 2] * S[5, k]
            Sw[i, 0, k] = R[0, 0] * S[0, k] + R[0, 1] * S[1, k] + R[0, 2] * S[2, k] + p1 * w2 - p2 * w1
            Sw[i, 1, k] = R[1, 0] * S[0, k] + R[1, 1] * S[1, k] + R[1, 2] * S[2, k] + p2 * w0 - p0 * w2
            Sw[i, 2, k] = R[2, 0] * S[0, k] + R[2, 1] * S[1, k] + R[2, 2] * S[2, k] + p0 * w1 - p1 * w0
            Sw[i, 3, k], Sw[i, 4, k], Sw[i, 5, k] = w0, w1, w2
    for i in range(nb - 1, -1, -1):
        p = t.parent[i]
        if p >= 0:
            for a in range(13):
                crb[p, a] += crb[i, a]
    F = d.t6a
    for i in range(nb):
        c = crb[i]
        m, h0, h1, h2 = c[0], c[1], c[2], c[3]
        ivi = t.iv[i]
        for k in range(t.nvb[i]):
            col = ivi + k
            v0, v1, v2, w0, w1, w2 = Sw[i, 0, k], Sw[i, 1, k], Sw[i, 2, k], Sw[i, 3, k], Sw[i, 4, k], Sw[i, 5, k]
            F[0] = m * v0 - (h1 * w2 - h2 * w1)
            F[1] = m * v1 - (h2 * w0 - h0 * w2)
            F[2] = m * v2 - (h0 * w1 - h1 * w0)
            F[3] = h1 * v2 - h2 * v1 + c[4] * w0 + c[5] * w1 + c[6] * w2
            F[4] = h2 * v0 - h0 * v2 + c[7] * w0 + c[8] * w1 + c[9] * w2
            F[5] = h0 * v1 - h1 * v0 + c[10] * w0 + c[11] * w1 + c[12] * w2
            j = i
            while j >= 0:
                ivj = t.iv[j]
                for r in range(t.nvb[j]):
                    s = (Sw[j, 0, r] * F[0] + Sw[j, 1, r] * F[1] + Sw[j, 2, r] * F[2]
                         + Sw[j, 3, r] * F[3] + Sw[j, 4, r] * F[4] + Sw[j, 5, r] * F[5])
                    M[ivj + r, col] = s
                    M[col, ivj + r] = s
                j = t.parent[j]
    for k in range(M.shape[0]):
        M[k, k] += t.armature[k]


# --------------------------------------------------------------------------- Jacobians ---
@internal
def point_jacobian(t, d, link, point, J):
    """J (6 x nv): world-frame linear velocity of `point` (link coordinates) and angular
    velocity of the link, per DOF (after forward_kinematics and link_poses)."""
    for a in range(6):
        for c in range(J.shape[1]):
            J[a, c] = 0.0
    R = d.link_R[link]
    pt0 = d.link_p[link, 0] + R[0, 0] * point[0] + R[0, 1] * point[1] + R[0, 2] * point[2]
    pt1 = d.link_p[link, 1] + R[1, 0] * point[0] + R[1, 1] * point[1] + R[1, 2] * point[2]
    pt2 = d.link_p[link, 2] + R[2, 0] * point[0] + R[2, 1] * point[1] + R[2, 2] * point[2]
    b = t.link_body[link]
    while b >= 0:
        Rb = d.Rw[b]
        S = d.S[b]
        r0, r1, r2 = pt0 - d.pw[b, 0], pt1 - d.pw[b, 1], pt2 - d.pw[b, 2]
        for k in range(t.nvb[b]):
            col = t.iv[b] + k
            v0 = Rb[0, 0] * S[0, k] + Rb[0, 1] * S[1, k] + Rb[0, 2] * S[2, k]
            v1 = Rb[1, 0] * S[0, k] + Rb[1, 1] * S[1, k] + Rb[1, 2] * S[2, k]
            v2 = Rb[2, 0] * S[0, k] + Rb[2, 1] * S[1, k] + Rb[2, 2] * S[2, k]
            w0 = Rb[0, 0] * S[3, k] + Rb[0, 1] * S[4, k] + Rb[0, 2] * S[5, k]
            w1 = Rb[1, 0] * S[3, k] + Rb[1, 1] * S[4, k] + Rb[1, 2] * S[5, k]
            w2 = Rb[2, 0] * S[3, k] + Rb[2, 1] * S[4, k] + Rb[2, 2] * S[5, k]
            J[0, col] = v0 + w1 * r2 - w2 * r1
            J[1, col] = v1 + w2 * r0 - w0 * r2
            J[2, col] = v2 + w0 * r1 - w1 * r0
            J[3, col] = w0
            J[4, col] = w1
            J[5, col] = w2
        b = t.parent[b]


# ------------------------------------------------------------------------- integration ---
@internal
def integrate(t, q, v, dt, q_out):
    """q_out = q (+) v dt on the manifold (q_out may be q): quaternions by the exponential map,
    free joints by the SE(3) exponential of the child-frame twist (as Pinocchio's integrate)."""
    nb = t.parent.shape[0]
    for i in range(nb):
        jt = t.jtype[i]
        iq = t.iq[i]
        iv = t.iv[i]
        if jt == REVOLUTE or jt == PRISMATIC or jt == HELICAL:
            q_out[iq] = q[iq] + v[iv] * dt
            continue
        if jt == CUSTOM:
            for k in range(t.nvb[i]):
                q_out[iq + k] = q[iq + k] + v[iv + k] * dt
            continue
        qo = iq if jt == SPHERICAL else iq + 3
        wo = iv if jt == SPHERICAL else iv + 3
        f0, f1, f2 = v[wo] * dt, v[wo + 1] * dt, v[wo + 2] * dt
        th2 = f0 * f0 + f1 * f1 + f2 * f2
        th = math.sqrt(th2)
        if th < 1e-6:
            sh = 0.5 - th2 / 48.0           # sin(th/2)/th
            ch = 1.0 - th2 / 8.0
            c1 = 0.5 - th2 / 24.0           # (1 - cos th)/th^2
            c2 = 1.0 / 6.0 - th2 / 120.0    # (th - sin th)/th^3
        else:
            sh = math.sin(0.5 * th) / th
            ch = math.cos(0.5 * th)
            c1 = (1.0 - math.cos(th)) / th2
            c2 = (th - math.sin(th)) / (th2 * th)
        bx, by, bz, bw = f0 * sh, f1 * sh, f2 * sh, ch
        ax, ay, az, aw = q[qo], q[qo + 1], q[qo + 2], q[qo + 3]
        if jt == FREE:
            # p += R(q) V(phi) (v dt), V = I + c1 phi^ + c2 phi^2
            n0, n1, n2 = v[iv] * dt, v[iv + 1] * dt, v[iv + 2] * dt
            x0 = f1 * n2 - f2 * n1
            x1 = f2 * n0 - f0 * n2
            x2 = f0 * n1 - f1 * n0
            y0 = f1 * x2 - f2 * x1
            y1 = f2 * x0 - f0 * x2
            y2 = f0 * x1 - f1 * x0
            d0 = n0 + c1 * x0 + c2 * y0
            d1 = n1 + c1 * x1 + c2 * y1
            d2 = n2 + c1 * x2 + c2 * y2
            nn = math.sqrt(ax * ax + ay * ay + az * az + aw * aw)
            ux, uy, uz, uw = ax / nn, ay / nn, az / nn, aw / nn
            # rotate (d0, d1, d2) by the unit quaternion u
            tx = 2.0 * (uy * d2 - uz * d1)
            ty = 2.0 * (uz * d0 - ux * d2)
            tz = 2.0 * (ux * d1 - uy * d0)
            q_out[iq] = q[iq] + d0 + uw * tx + (uy * tz - uz * ty)
            q_out[iq + 1] = q[iq + 1] + d1 + uw * ty + (uz * tx - ux * tz)
            q_out[iq + 2] = q[iq + 2] + d2 + uw * tz + (ux * ty - uy * tx)
        rx = aw * bx + ax * bw + ay * bz - az * by
        ry = aw * by - ax * bz + ay * bw + az * bx
        rz = aw * bz + ax * by - ay * bx + az * bw
        rw = aw * bw - ax * bx - ay * by - az * bz
        n = math.sqrt(rx * rx + ry * ry + rz * rz + rw * rw)
        q_out[qo] = rx / n
        q_out[qo + 1] = ry / n
        q_out[qo + 2] = rz / n
        q_out[qo + 3] = rw / n


# ----------------------------------------------------------------------------- stepping ---
@internal
def _first_nonfinite(t, q, v):
    """Velocity index of the first DOF whose q or v is not finite, or -1."""
    for i in range(t.parent.shape[0]):
        for k in range(t.nvb[i]):
            if not math.isfinite(v[t.iv[i] + k]):
                return t.iv[i] + k
        jt = t.jtype[i]
        nq = 4 if jt == SPHERICAL else (7 if jt == FREE else t.nvb[i])
        for k in range(nq):
            if not math.isfinite(q[t.iq[i] + k]):
                return t.iv[i]
    return -1


@internal
def restore_if_nonfinite(t, d, q, v):
    """After a step: the first non-finite DOF (state restored to before the step), or -1."""
    bad = _first_nonfinite(t, q, v)
    if bad >= 0:
        copy_into(q, d.q_prev)
        copy_into(v, d.v_prev)
    return bad


@internal
def passive_implicit(t, d, q, v, tau, dt, friction_velocity):
    """DART's implicit joint springs and dampers: tau_total = tau - K(q - q_rest + dt v) - D v,
    articulated diagonal += dt D + dt^2 K (dt = 0: explicit). Coulomb friction is regularized
    as a damper of coefficient friction / max(|v|, friction_velocity), also implicit."""
    for i in range(t.parent.shape[0]):
        iv = t.iv[i]
        jt = t.jtype[i]
        one_q_per_dof = jt != SPHERICAL and jt != FREE
        for k in range(t.nvb[i]):
            j = iv + k
            damp = t.damping[j]
            if t.friction[j] > 0.0:
                damp += t.friction[j] / max(abs(v[j]), friction_velocity)
            tt = tau[j] - damp * v[j]
            dg = t.armature[j] + dt * damp
            if one_q_per_dof:
                K = t.stiffness[j]
                tt -= K * (q[t.iq[i] + k] - t.rest[j] + dt * v[j])
                dg += dt * dt * K
            d.tau_total[j] = tt
            d.diag[j] = dg


# ------------------------------------------------------------ entry points from Python ---
# Each takes the compiled buffers (tf, ti) and the workspace buffer df: one fast dispatch.
@kernel
def forward_dynamics_kernel(tf, ti, df, q, v, tau, qdd):
    t, _, _ = carve_tree(tf, ti)
    d, _ = carve_data(df, ti)
    body_frame_kinematics(t, d, q, v)
    aba(t, d, tau, t.armature, qdd)


@kernel
def inverse_dynamics_kernel(tf, ti, df, q, v, qdd, tau):
    t, _, _ = carve_tree(tf, ti)
    d, _ = carve_data(df, ti)
    body_frame_kinematics(t, d, q, v)
    rnea(t, d, qdd, tau)


@kernel
def mass_matrix_kernel(tf, ti, df, q, M):
    t, _, _ = carve_tree(tf, ti)
    d, _ = carve_data(df, ti)
    body_poses(t, d, q, True)     # CRBA works in the world frame
    crba(t, d, M)


@kernel
def kinematics_kernel(tf, ti, df, q, v):
    """World link poses (Data.link_R, link_p) and body velocities (Data.vel) at (q, v); the
    poses only when v is empty (no velocities, no motion transforms: for /tf and rendering,
    a third less; one kernel for both, since each kernel costs its own compilation). A world
    without DOFs has an empty v too: its bodies do not move, and Data.vel keeps the zeros a
    workspace starts with (nothing writes them otherwise)."""
    t, _, _ = carve_tree(tf, ti)
    d, _ = carve_data(df, ti)
    if v.shape[0] == 0:
        body_poses(t, d, q, True)
    else:
        velocity_kinematics(t, d, q, v)
    link_poses(t, d)


@kernel
def accelerations_kernel(tf, ti, df, q, v, qdd):
    """Link poses, body velocities and true body accelerations (no gravity offset)."""
    t, _, _ = carve_tree(tf, ti)
    d, _ = carve_data(df, ti)
    velocity_kinematics(t, d, q, v)
    link_poses(t, d)
    for a in range(6):
        d.t6b[a] = 0.0
    body_accelerations(t, d, qdd, d.t6b)


@kernel
def jacobian_kernel(tf, ti, df, q, link, point, J):
    t, _, _ = carve_tree(tf, ti)
    d, _ = carve_data(df, ti)
    forward_kinematics(t, d, q)
    link_poses(t, d)
    point_jacobian(t, d, link, point, J)


@kernel
def integrate_kernel(tf, ti, q, v, dt, q_out):
    t, _, _ = carve_tree(tf, ti)
    integrate(t, q, v, dt, q_out)
