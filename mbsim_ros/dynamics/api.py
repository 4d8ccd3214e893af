"""The functional dynamics API: mb.forward_dynamics(model, q, v, tau) and friends.

Each call uses the model's compiled form, cached per Model and rebuilt when the model's
revision changes (model.finalize() after editing numbers in place)."""
import weakref

import numpy as np

from ..model import ModelError
from . import kernels
from .compiled import check_movable, compile_models
from .direct import DirectCall

_cache = weakref.WeakKeyDictionary()
_F64 = np.dtype(np.float64)
_ndarray = np.ndarray          # a global, not np's attribute: as_vector's test runs on every call
_last = (lambda: None, None)     # (weak reference to the last model asked for, its _Compiled): one
                                 # tuple, replaced whole, so that threads never see a mixed pair
# The kernels' calls here, past the dispatcher (direct.py): every vector goes through as_vector,
# every other array is a _Compiled's or made here, so the argument types never change.
_forward_dynamics = DirectCall(kernels.forward_dynamics_kernel)
_inverse_dynamics = DirectCall(kernels.inverse_dynamics_kernel)
_mass_matrix = DirectCall(kernels.mass_matrix_kernel)
_kinematics_call = DirectCall(kernels.kinematics_kernel)
_accelerations = DirectCall(kernels.accelerations_kernel)
_jacobian = DirectCall(kernels.jacobian_kernel)
_integrate = DirectCall(kernels.integrate_kernel)


def copy_gravity(gravity, target):
    """target[:] = gravity (a model's float64 gravity into the compiled tree, before a kernel
    call), skipped when both hold the same bytes: comparing them costs a fourth of writing."""
    if gravity.tobytes() != target.tobytes():
        target[:] = gravity


class _Compiled:
    """One model's compiled arrays and workspace for the functions here, with what every call
    needs at hand (sizes, the buffers, whether forward dynamics is defined)."""
    __slots__ = ("revision", "compiled", "tf", "ti", "df", "data", "nq", "nv", "gravity", "unmovable")

    def __init__(self, model):
        c = compile_models(model)
        self.revision, self.compiled = model.revision, c
        self.tf, self.ti, self.nq, self.nv = c.tf, c.ti, c.nq, c.nv
        self.gravity = c.tree.gravity
        self.df, self.data = c.new_data()
        try:
            check_movable(c, f"forward_dynamics of model {model.name!r}")
            self.unmovable = None
        except ModelError as e:
            self.unmovable = str(e)       # raised by every forward_dynamics call


def _compiled(model) -> _Compiled:
    """The model's _Compiled, rebuilt when the model changed (its revision), gravity read anew
    (a user setting). The last model asked for is found without a dictionary look-up: loops
    that call forward_dynamics on one model pay the least."""
    global _last
    ref, e = _last
    # a model un-finalized by add_link or add_joint has a new revision too
    if ref() is not model or e.revision != model.revision:
        if not model._finalized:
            model.finalize()
        e = _cache.get(model)
        if e is None or e.revision != model.revision:
            e = _cache[model] = _Compiled(model)
        _last = (weakref.ref(model), e)
    gravity = model.gravity       # copy_gravity, inlined: every call pays this
    if gravity.tobytes() != e.gravity.tobytes():
        e.gravity[:] = gravity
    return e


def compiled_for(model):
    """(Compiled, Data buffer, Data) for one model, from the cache when the model has not changed."""
    e = _compiled(model)
    return e.compiled, e.df, e.data


def as_vector(x, n, what):
    """x as a contiguous, aligned float64 vector of length n (the type the kernels' direct calls
    take), or a ValueError saying what was wrong."""
    # the common case first, by the cheapest tests: an array that owns its memory is contiguous
    # and aligned
    if type(x) is _ndarray and x.dtype is _F64 and x.ndim == 1 and len(x) == n and (
            x.base is None or ((f := x.flags).c_contiguous and f.aligned)):
        return x
    a = np.ascontiguousarray(x, dtype=np.float64)
    if a.shape != (n,):
        raise ValueError(f"{what}: expected a vector of length {n}, got shape {a.shape}")
    return a if a.flags.aligned else a.copy()


def forward_dynamics(model, q, v, tau):
    """qdd from the articulated-body algorithm; tau is the whole generalized force (no
    joint springs, dampers or friction are added). ModelError naming the joints that move only
    massless links (no acceleration is defined there)."""
    e = _compiled(model)
    if e.unmovable is not None:
        raise ModelError(e.unmovable)
    out = np.empty(e.nv)
    _forward_dynamics.call(e.tf, e.ti, e.df, as_vector(q, e.nq, "q"), as_vector(v, e.nv, "v"),
                           as_vector(tau, e.nv, "tau"), out)
    return out


def inverse_dynamics(model, q, v, qdd):
    """tau = M(q) qdd + C(q, v) v + g(q) by the recursive Newton-Euler algorithm."""
    e = _compiled(model)
    out = np.empty(e.nv)
    _inverse_dynamics.call(e.tf, e.ti, e.df, as_vector(q, e.nq, "q"), as_vector(v, e.nv, "v"),
                           as_vector(qdd, e.nv, "qdd"), out)
    return out


def mass_matrix(model, q):
    """The joint-space mass matrix M(q) by the composite-rigid-body algorithm (armature
    gear_ratio^2 * rotor_inertia on the diagonal)."""
    e = _compiled(model)
    out = np.zeros((e.nv, e.nv))
    _mass_matrix.call(e.tf, e.ti, e.df, as_vector(q, e.nq, "q"), out)
    return out


def _kinematics(model, q, v=None):
    c, df, d = compiled_for(model)
    v = np.zeros(c.nv) if v is None else as_vector(v, c.nv, "v")
    _kinematics_call.call(c.tf, c.ti, df, as_vector(q, c.nq, "q"), v)
    return c, d


def link_transforms(model, q):
    """{link name: 4x4 world transform} at configuration q."""
    c, d = _kinematics(model, q)
    return transforms_dict(c, d)


def transforms_dict(c, d):
    out = {}
    for k, name in enumerate(c.link_names):
        T = np.eye(4)
        T[:3, :3] = d.link_R[k]
        T[:3, 3] = d.link_p[k]
        out[name] = T
    return out


def _per_moving_link(c, d, value):
    """{link name: value(k, b, R)} for links on a moving body b with world rotation R; zeros
    for links welded to the world."""
    out = {}
    for k, name in enumerate(c.link_names):
        b = c.tree.link_body[k]
        out[name] = np.zeros(6) if b < 0 else value(k, b, d.Rw[b])
    return out


def link_velocities(model, q, v):
    """{link name: 6-vector}: the world-frame linear velocity of the link origin, then the
    link's angular velocity in the world frame."""
    c, d = _kinematics(model, q, v)

    def velocity(k, b, R):
        w = R @ d.vel[b, 3:]
        return np.concatenate([R @ d.vel[b, :3] + np.cross(w, d.link_p[k] - d.pw[b]), w])
    return _per_moving_link(c, d, velocity)


def link_accelerations(model, q, v, qdd):
    """{link name: 6-vector}: the classical (not spatial) world-frame linear acceleration of the
    link origin, then the link's angular acceleration in the world frame; gravity not included."""
    c, df, d = compiled_for(model)
    _accelerations.call(c.tf, c.ti, df, as_vector(q, c.nq, "q"), as_vector(v, c.nv, "v"),
                        as_vector(qdd, c.nv, "qdd"))

    def acceleration(k, b, R):
        # body frame: a_origin = a_spatial + w x v; at r: + alpha x r + w x (w x r)
        v_lin, w = d.vel[b, :3], d.vel[b, 3:]
        a_lin, alpha = d.acc[b, :3], d.acc[b, 3:]
        r = c.tree.link_p[k]
        a_point = a_lin + np.cross(w, v_lin) + np.cross(alpha, r) + np.cross(w, np.cross(w, r))
        return np.concatenate([R @ a_point, R @ alpha])
    return _per_moving_link(c, d, acceleration)


def frame_jacobian(model, q, link, point=(0.0, 0.0, 0.0)):
    """6 x nv Jacobian of a point fixed to `link` (coordinates in the link frame): rows 0-2 map
    v to the point's world-frame linear velocity, rows 3-5 to the link's world angular velocity."""
    c, df, _ = compiled_for(model)
    try:
        k = c.link_names.index(link)
    except ValueError:
        raise KeyError(f"model {model.name!r} has no link {link!r}") from None
    J = np.zeros((6, c.nv))
    _jacobian.call(c.tf, c.ti, df, as_vector(q, c.nq, "q"), k, as_vector(point, 3, "point"), J)
    return J


def center_of_mass(model, q):
    """World position of the model's center of mass."""
    T = link_transforms(model, q)
    total = model.total_mass
    if total <= 0:
        raise ValueError(f"model {model.name!r} has no mass")
    acc = np.zeros(3)
    for link in model.links:
        acc += link.mass * (T[link.name][:3, :3] @ link.com + T[link.name][:3, 3])
    return acc / total


def integrate(model, q, v, dt=1.0):
    """q (+) v dt on the configuration manifold: quaternions by the exponential map, free
    joints by the SE(3) exponential of the child-frame twist (Pinocchio's integrate)."""
    c, _, _ = compiled_for(model)
    out = np.empty(c.nq)
    _integrate.call(c.tf, c.ti, as_vector(q, c.nq, "q"), as_vector(v, c.nv, "v"), float(dt), out)
    return out
