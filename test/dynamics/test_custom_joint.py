"""Custom joints (OpenSim's CustomJoint, Simbody's FunctionBased mobilizer) through every kernel.

A custom joint's coordinates q (v = dq/dt) drive six transform axes through functions:
R = R(a0, f0) R(a1, f1) R(a2, f2) body-fixed, p = f3 a3 + f4 a4 + f5 a5 in the parent-side
frame. Checked by finite differences (the motion subspace and its velocity-product term),
by equivalence with the built-in joints it can mimic (euler, translational, revolute), by a
Lagrangian computed from numerically differentiated link poses only, by energy conservation,
and against OpenSim itself on a model built with its own Python API."""
import numpy as np
import pytest
from scipy.interpolate import CubicSpline

import mbsim_ros as mb
from mbsim_ros.dynamics import kernels
from mbsim_ros.dynamics.api import compiled_for
from mbsim_ros.model import Joint, Link, Model, ModelError
from mbsim_ros.model.elements import Function, TransformAxis
from mbsim_ros.model.transforms import make_transform
from pin_reference import random_inertia, random_transform, random_unit

EYE = np.eye(3)


def axis(direction, coordinate=-1, function=None):
    if function is None:
        function = Function.linear(1.0) if coordinate >= 0 else Function.constant(0.0)
    return TransformAxis(np.asarray(direction, float), coordinate, function)


def natural_spline(x, y):
    """A scipy natural cubic spline as a Model Function (linear beyond its ends, as OpenSim's)."""
    cs = CubicSpline(x, y, bc_type="natural")
    return Function(breaks=np.asarray(x, float), coefs=cs.c[::-1].T, extrapolate="linear")


def knee_axes():
    """OpenSim's knee pattern: one coordinate turning about z and sliding in x and y along
    cubic splines of the angle (the femoral condyles rolling on the tibia)."""
    angles = np.linspace(-2.1, 0.2, 7)
    return [axis([1, 0, 0]), axis([0, 1, 0]), axis([0, 0, 1], 0),
            axis([1, 0, 0], 0, natural_spline(angles, 0.01 * np.sin(2 * angles) - 0.004 * angles ** 2)),
            axis([0, 1, 0], 0, natural_spline(angles, -0.4 + 0.02 * np.cos(angles))),
            axis([0, 0, 1])]


def hip_axes():
    """Three coordinates on non-orthogonal rotation axes, one translation coupled to two of
    them by polynomials and a constant offset."""
    return [axis(random_unit(np.random.default_rng(1)), 0),
            axis([0.2, 1.0, 0.1], 1, Function.polynomial([0.1, 0.9, 0.3])),
            axis([0.0, 0.3, 1.0], 2, Function.sine(0.8, 0.2, 0.1, 0.05)),
            axis([1, 0, 0], 1, Function.polynomial([0.02, 0.05, -0.03, 0.01])),
            axis([0, 1, 0], -1, Function.constant(-0.05)),
            axis([0, 0.6, 0.8], 0, Function.linear(0.04, 0.01))]


def leg(rng, child_poses=True, gravity=(0.0, -9.80665, 0.0)):
    """pelvis (revolute, base) -> thigh (custom hip, 3 coordinates) -> shank (custom knee) ->
    foot (revolute): custom joints inside a tree of built-in ones, each with a child_pose."""
    m = Model("leg", gravity=gravity)
    for name, mass in (("pelvis", 6.0), ("thigh", 4.0), ("shank", 2.5), ("foot", 1.0)):
        m.add_link(Link(name, mass, rng.normal(size=3) * 0.08, random_inertia(rng) * mass))

    def cp():
        return random_transform(rng, 0.1) if child_poses else np.eye(4)
    m.add_joint(Joint("base", "revolute", None, "pelvis", axis=[0, 0, 1], origin=random_transform(rng), child_pose=cp()))
    m.add_joint(Joint("hip", "custom", "pelvis", "thigh", origin=random_transform(rng), child_pose=cp(),
                      dof_names=["hip_flexion", "hip_adduction", "hip_rotation"], transform_axes=hip_axes()))
    m.add_joint(Joint("knee", "custom", "thigh", "shank", origin=random_transform(rng), child_pose=cp(),
                      dof_names=["knee_angle"], transform_axes=knee_axes()))
    m.add_joint(Joint("ankle", "revolute", "shank", "foot", axis=random_unit(rng), origin=random_transform(rng),
                      child_pose=cp()))
    return m.finalize()


def leg_state(rng, model):
    q = rng.uniform(-1.0, 1.0, model.nq)
    q[model.joint("knee").q_index] = rng.uniform(-1.9, 0.0)     # inside the knee splines' range
    return q, rng.normal(size=model.nv), rng.normal(size=model.nv)


def fd(f, x, direction, h):
    """Fourth-order central difference of f along `direction` at x."""
    return (-f(x + 2 * h * direction) + 8 * f(x + h * direction) - 8 * f(x - h * direction)
            + f(x - 2 * h * direction)) / (12 * h)


def vee(A):
    return np.array([A[2, 1] - A[1, 2], A[0, 2] - A[2, 0], A[1, 0] - A[0, 1]]) / 2


# ------------------------------------------------------------------ finite differences ---
# Fourth-order differences with h = 1e-3: truncation ~h^4 |f^(5)| ~ 1e-12, rounding
# ~1e-16 / h = 1e-13; 1e-9 leaves margin and still catches a wrong column or term outright.
FD_TOL = 1e-9


def test_jacobian_columns_are_the_derivatives_of_the_link_poses():
    rng = np.random.default_rng(2)
    model = leg(rng)
    for _ in range(5):
        q, _, _ = leg_state(rng, model)
        T = mb.link_transforms(model, q)
        for link in model.links:
            J = mb.frame_jacobian(model, q, link.name)
            for k in range(model.nv):
                dT = fd(lambda x: mb.link_transforms(model, x)[link.name], q, np.eye(model.nq)[k], 1e-3)
                np.testing.assert_allclose(J[:3, k], dT[:3, 3], atol=FD_TOL)
                np.testing.assert_allclose(J[3:, k], vee(dT[:3, :3] @ T[link.name][:3, :3].T), atol=FD_TOL)


def test_a_simulations_link_poses_equal_the_full_kinematics_bit_for_bit():
    """Simulation.link_poses() and link_transforms() compute poses only (kinematics_kernel with
    an empty v: no velocities, no motion transforms); they give exactly the poses of the full
    kinematics that the dynamics use (mb.link_transforms, checked above by its derivatives and
    against Pinocchio elsewhere): same operations, same order, so equal to the last bit."""
    rng = np.random.default_rng(5)
    model = leg(rng, child_poses=True)
    sim = mb.Simulation(model, dt=1e-3)
    for _ in range(3):
        q, v, _ = leg_state(rng, model)
        sim.q, sim.v = q, v
        want = mb.link_transforms(model, q)
        R, p = sim.link_poses()
        assert sim.compiled.link_names == [link.name for link in model.links]
        for k, (name, T) in enumerate(sim.link_transforms().items()):
            assert np.array_equal(T, want[name])
            assert np.array_equal(R[k], want[name][:3, :3]) and np.array_equal(p[k], want[name][:3, 3])


def test_custom_body_subspace_and_bias_are_derivatives_along_a_path():
    """Body level: S(q) columns are the body twist per unit qdot (from the body pose), and
    cb - vel x (S qdot) is d/dt (S(q(t)) qdot) in body coordinates along q(t) = q + t qdot."""
    rng = np.random.default_rng(3)
    model = leg(rng)
    c, df, d = compiled_for(model)
    hip_body = int(np.flatnonzero(c.tree.jtype == kernels.CUSTOM)[0])
    iv, n = c.tree.iv[hip_body], c.tree.nvb[hip_body]
    assert n == 3

    def body_state(q, v):
        kernels.kinematics_kernel(c.tf, c.ti, df, q, v)
        return d.Rr[hip_body].copy(), d.pr[hip_body].copy(), d.S[hip_body, :, :n].copy(), d.vel[hip_body].copy(), d.cb[hip_body].copy()

    for _ in range(5):
        q, v, _ = leg_state(rng, model)
        R, p, S, vel, cb = body_state(q, v)
        for k in range(n):
            e = np.zeros(model.nq)
            e[iv + k] = 1.0
            dR = fd(lambda x: body_state(x, v)[0], q, e, 1e-3)
            dp = fd(lambda x: body_state(x, v)[1], q, e, 1e-3)
            # the twist of the body relative to its parent, in body coordinates
            np.testing.assert_allclose(S[:3, k], R.T @ dp, atol=FD_TOL)
            np.testing.assert_allclose(S[3:, k], vee(R.T @ dR), atol=FD_TOL)
        qd = v[iv:iv + n]
        vJ = S @ qd
        w, u = vel[3:], vel[:3]
        cross = np.concatenate([np.cross(w, vJ[:3]) + np.cross(u, vJ[3:]), np.cross(w, vJ[3:])])
        dS = fd(lambda x: body_state(x, v)[2], q, v, 1e-3)
        np.testing.assert_allclose(cb - cross, dS @ qd, atol=FD_TOL * 10)


def test_link_accelerations_at_zero_qdd_are_the_derivative_of_link_velocities():
    rng = np.random.default_rng(4)
    model = leg(rng)
    for _ in range(3):
        q, v, _ = leg_state(rng, model)
        acc = mb.link_accelerations(model, q, v, np.zeros(model.nv))
        for link in model.links:
            dv = fd(lambda x: mb.link_velocities(model, x, v)[link.name], q, v, 1e-3)
            np.testing.assert_allclose(acc[link.name], dv, atol=FD_TOL * 10 * max(1.0, np.abs(dv).max()))


# -------------------------------------------------------------------------- equivalence ---
# Same algorithm on the same geometry, differing in how a joint's motion is assembled
# (one multi-DOF body vs a chain of massless one-DOF bodies): rounding only, ~1e-14.
EQ_TOL = 1e-12


def chain_around(joint_under_test, rng):
    m = Model("eq", gravity=(0.3, -1.2, -9.8))
    for name in ("a", "b", "c"):
        m.add_link(Link(name, rng.uniform(1, 3), rng.normal(size=3) * 0.1, random_inertia(rng)))
    m.add_joint(Joint("ja", "revolute", None, "a", axis=random_unit(rng), origin=random_transform(rng)))
    m.add_joint(joint_under_test)
    m.add_joint(Joint("jc", "prismatic", "b", "c", axis=random_unit(rng), origin=random_transform(rng)))
    return m.finalize()


def assert_same_dynamics(m1, m2, rng, n=8):
    for _ in range(n):
        q = rng.uniform(-1.0, 1.0, m1.nq)
        v, tau = rng.normal(size=m1.nv), rng.normal(size=m1.nv)
        for f, args in ((mb.mass_matrix, (q,)), (mb.forward_dynamics, (q, v, tau)), (mb.inverse_dynamics, (q, v, tau))):
            a, b = f(m1, *args), f(m2, *args)
            assert np.abs(a - b).max() <= EQ_TOL * max(1.0, np.abs(b).max()), f.__name__
        TA, TB = mb.link_transforms(m1, q), mb.link_transforms(m2, q)
        for name in TA:
            np.testing.assert_allclose(TA[name], TB[name], atol=EQ_TOL)
        np.testing.assert_allclose(mb.integrate(m1, q, v, 0.01), mb.integrate(m2, q, v, 0.01), atol=EQ_TOL)


def test_three_linear_rotations_equal_an_euler_joint():
    rng = np.random.default_rng(10)
    origin, child_pose = random_transform(rng), random_transform(rng)
    offset = rng.normal(size=3) * 0.2
    axes = [axis(EYE[k], k) for k in range(3)] + [axis(EYE[k], -1, Function.constant(offset[k])) for k in range(3)]
    custom = Joint("jb", "custom", "a", "b", origin=origin, child_pose=child_pose,
                   dof_names=["rx", "ry", "rz"], transform_axes=axes)
    euler = Joint("jb", "euler", "a", "b", origin=origin @ make_transform(p=offset), child_pose=child_pose,
                  euler_order="xyz")
    assert_same_dynamics(chain_around(custom, np.random.default_rng(11)), chain_around(euler, np.random.default_rng(11)), rng)


def test_three_linear_translations_equal_a_translational_joint():
    rng = np.random.default_rng(12)
    origin, child_pose = random_transform(rng), random_transform(rng)
    axes = [axis(EYE[k]) for k in range(3)] + [axis(EYE[k], k) for k in range(3)]
    custom = Joint("jb", "custom", "a", "b", origin=origin, child_pose=child_pose,
                   dof_names=["tx", "ty", "tz"], transform_axes=axes)
    ref = Joint("jb", "translational", "a", "b", origin=origin, child_pose=child_pose)
    assert_same_dynamics(chain_around(custom, np.random.default_rng(13)), chain_around(ref, np.random.default_rng(13)), rng)


def test_a_pin_like_custom_joint_equals_a_revolute_joint():
    rng = np.random.default_rng(14)
    origin, child_pose = random_transform(rng), random_transform(rng)
    a = random_unit(rng)
    # the rotation is the last of the three (OpenSim's PinJoint as a CustomJoint: rotation3 about z)
    axes = [axis(random_unit(rng)), axis(random_unit(rng)), axis(a, 0)] + [axis(EYE[k]) for k in range(3)]
    custom = Joint("jb", "custom", "a", "b", origin=origin, child_pose=child_pose, dof_names=["pin"], transform_axes=axes)
    ref = Joint("jb", "revolute", "a", "b", origin=origin, child_pose=child_pose, axis=a)
    assert_same_dynamics(chain_around(custom, np.random.default_rng(15)), chain_around(ref, np.random.default_rng(15)), rng)


def test_simulation_with_springs_dampers_and_limits_equals_the_euler_joint():
    """The step kernels: implicit springs and dampers, friction and a speculative limit per
    coordinate of a custom joint, as for the same coordinates of an euler joint."""
    rng = np.random.default_rng(16)
    origin = random_transform(rng)
    per_dof = dict(stiffness=[3.0, 0.0, 5.0], damping=[0.2, 0.5, 0.0], rest_position=[0.1, 0, -0.2],
                   friction=[0.0, 0.05, 0.0], lower=[-np.inf, -0.3, -np.inf], upper=[np.inf, 0.3, np.inf],
                   q0=[0.2, 0.1, -0.4], v0=[1.0, -2.0, 0.5])
    custom = Joint("jb", "custom", "a", "b", origin=origin, dof_names=["rx", "ry", "rz"],
                   transform_axes=[axis(EYE[k], k) for k in range(3)] + [axis(EYE[k]) for k in range(3)], **per_dof)
    euler = Joint("jb", "euler", "a", "b", origin=origin, euler_order="xyz", **per_dof)
    runs = []
    for j in (custom, euler):
        sim = mb.Simulation(chain_around(j, np.random.default_rng(17)), dt=1e-3, contact="none")
        qs = []
        for _ in range(400):
            sim.step()
            qs.append(sim.q.copy())
        runs.append(np.array(qs))
    ry = runs[0][:, 2]
    assert ry.min() < -0.299 or ry.max() > 0.299, "the limited coordinate never reached its limit"
    # the limit row is softened by cfm (1e-5 of its diagonal): it holds to ~cfm * v dt, 1e-8 here
    assert ry.min() > -0.3 - 1e-6 and ry.max() < 0.3 + 1e-6
    # the same arithmetic up to the order of a few sums, over 400 steps
    np.testing.assert_allclose(runs[0], runs[1], atol=1e-9)


def test_a_locked_custom_coordinate_holds_while_the_others_move():
    rng = np.random.default_rng(18)
    model = leg(rng)
    hip = model.joint("hip")
    hip.locked = [False, True, False]
    hip.q0 = np.array([0.2, 0.3, -0.1])
    model.finalize()
    sim = mb.Simulation(model, dt=1e-3, contact="none")
    sim.step(500)
    k = hip.q_index + 1
    # a bilateral row with joint_erp: exact at the velocity level, so q stays put to rounding
    assert abs(sim.q[k] - 0.3) < 1e-9
    assert np.abs(sim.q - model.initial_q()).max() > 0.05       # the rest of the leg fell


# ---------------------------------------------------------------- Lagrangian and energy ---
def lagrangian_mass_matrix(model, q, h=1e-3):
    """M = sum over links of m J_c^T J_c + J_w^T I_world J_w, with the Jacobians of each
    link's center of mass and orientation from fourth-order differences of link_transforms."""
    M = np.zeros((model.nv, model.nv))
    T = mb.link_transforms(model, q)
    for link in model.links:
        Jc, Jw = np.zeros((3, model.nv)), np.zeros((3, model.nv))
        R = T[link.name][:3, :3]
        for k in range(model.nv):
            dT = fd(lambda x: mb.link_transforms(model, x)[link.name], q, np.eye(model.nq)[k], h)
            Jc[:, k] = dT[:3, :3] @ link.com + dT[:3, 3]
            Jw[:, k] = vee(dT[:3, :3] @ R.T)
        Iw = R @ link.inertia @ R.T
        M += link.mass * Jc.T @ Jc + Jw.T @ Iw @ Jw
    return M


def potential(model, q):
    T = mb.link_transforms(model, q)
    return -sum(l.mass * model.gravity @ (T[l.name][:3, :3] @ l.com + T[l.name][:3, 3]) for l in model.links)


def test_mass_matrix_and_forward_dynamics_equal_a_lagrangian_from_link_poses():
    rng = np.random.default_rng(20)
    model = leg(rng)
    for _ in range(3):
        q, v, tau = leg_state(rng, model)
        M = mb.mass_matrix(model, q)
        M_lag = lagrangian_mass_matrix(model, q)
        # fourth-order differences: ~1e-12 truncation and rounding; 1e-7 as asked, with margin
        np.testing.assert_allclose(M, M_lag, atol=1e-7 * np.abs(M).max())
        # Lagrange's equations: M qdd + Mdot v - 1/2 d(v^T M v)/dq + dV/dq = tau, the
        # derivatives of M_lag again by differences (errors ~1e-9 relative)
        n = model.nv
        dM = [fd(lambda x: lagrangian_mass_matrix(model, x), q, np.eye(n)[k], 1e-3) for k in range(n)]
        Mdot = sum(dM[k] * v[k] for k in range(n))
        dKE = np.array([0.5 * v @ dM[k] @ v for k in range(n)])
        dV = np.array([fd(lambda x: np.array([potential(model, x)]), q, np.eye(n)[k], 1e-3)[0] for k in range(n)])
        qdd_lag = np.linalg.solve(M_lag, tau - Mdot @ v + dKE - dV)
        qdd = mb.forward_dynamics(model, q, v, tau)
        # nested differences (M_lag's own error divided by h again): 1e-6 relative
        np.testing.assert_allclose(qdd, qdd_lag, atol=1e-6 * max(1.0, np.abs(qdd).max()))


def test_energy_is_conserved_with_rk4():
    """Frictionless, contact-free, gravity only: E = 1/2 v^T M v + V(q) stays constant. RK4 at
    dt = 1e-3 s errs by O(dt^4) per unit time; measured over 1 s: 8e-8 J against a peak
    kinetic energy of 163 J (5e-10 relative), asked to stay below 1e-6."""
    rng = np.random.default_rng(22)
    model = leg(rng)
    hip, knee = model.joint("hip"), model.joint("knee")
    # a monotonic function in place of the sine, whose zero slope at hip_rotation ~1.17 is a
    # singular configuration (the coordinate stops moving the body) the swing would reach
    hip.transform_axes[2].function = Function.polynomial([0.05, 1.0, 0.0, 0.1])
    hip.q0 = np.array([0.3, -0.2, 0.4])
    knee.q0 = np.array([-0.8])
    hip.v0 = np.array([1.0, 0.5, -1.5])
    model.finalize()
    sim = mb.Simulation(model, dt=1e-3, integrator="rk4", contact="none")

    def energy():
        return 0.5 * sim.v @ mb.mass_matrix(model, sim.q) @ sim.v + potential(model, sim.q), \
            0.5 * sim.v @ mb.mass_matrix(model, sim.q) @ sim.v
    E0, _ = energy()
    drift, ke_max = 0.0, 0.0
    for _ in range(100):
        sim.step(10)
        E, ke = energy()
        drift, ke_max = max(drift, abs(E - E0)), max(ke_max, ke)
    assert ke_max > 1.0, "the leg barely moved: the test would not see a wrong bias term"
    assert drift / ke_max < 1e-6, f"relative energy drift {drift / ke_max:.2e}"


# ------------------------------------------------------------------------------ errors ---
def test_a_coordinate_driving_nothing_and_an_input_function_are_refused():
    rng = np.random.default_rng(23)
    axes = [axis(EYE[k], 0 if k == 2 else -1) for k in range(3)] + [axis(EYE[k]) for k in range(3)]
    with pytest.raises(ModelError, match="'spare' drives none"):
        mb.mass_matrix(chain_around(Joint("jb", "custom", "a", "b", dof_names=["used", "spare"], transform_axes=axes), rng), np.zeros(4))
    axes[0] = axis(EYE[0], -1, Function.input("u"))
    with pytest.raises(ModelError, match="run-time input 'u'"):
        mb.mass_matrix(chain_around(Joint("jb", "custom", "a", "b", dof_names=["used"], transform_axes=axes), rng), np.zeros(3))


# ----------------------------------------------------------------------------- OpenSim ---
def test_matches_opensim_custom_joints():
    """A two-body leg built with OpenSim's own API (CustomJoints with SimmSpline, LinearFunction,
    PolynomialFunction and Constant functions, parent and child offset frames) and the same
    Model by hand: body poses in ground and accelerations under gravity."""
    osim = pytest.importorskip("opensim", reason="opensim is a test dependency (ground truth for custom joints)")
    rng = np.random.default_rng(30)
    om = osim.Model()
    om.setGravity(osim.Vec3(0, -9.80665, 0))
    bodies = {}
    for name, mass in (("thigh", 7.0), ("shank", 3.0)):
        I = random_inertia(rng) * mass
        com = rng.normal(size=3) * 0.1
        bodies[name] = (mass, com, I)
        om.addBody(osim.Body(name, mass, osim.Vec3(*com), osim.Inertia(I[0, 0], I[1, 1], I[2, 2], I[0, 1], I[0, 2], I[1, 2])))
    spline_x = np.linspace(-2.0, 0.3, 6)
    spline_y = 0.02 * np.sin(3 * spline_x) + 0.01 * spline_x
    # (axis, coordinate name or None, opensim function) for rotation1..3, translation1..3
    hip_def = [(random_unit(rng), "hip_flexion", osim.LinearFunction(1.0, 0.0)),
               (np.array([0.1, 1.0, 0.2]) / np.linalg.norm([0.1, 1.0, 0.2]), "hip_adduction", osim.LinearFunction(0.8, 0.05)),
               (np.array([0.0, 0.0, 1.0]), "hip_rotation", osim.PolynomialFunction(osim.Vector([0.2, -0.3, 1.0, 0.0]))),
               (np.array([1.0, 0.0, 0.0]), None, osim.Constant(0.03)),
               (np.array([0.0, 1.0, 0.0]), "hip_adduction", osim.PolynomialFunction(osim.Vector([0.01, 0.02, -0.01]))),
               (np.array([0.0, 0.0, 1.0]), None, osim.Constant(-0.02))]
    simm = osim.SimmSpline()
    for x, y in zip(spline_x, spline_y):
        simm.addPoint(float(x), float(y))
    simm2 = osim.SimmSpline()
    for x, y in zip(spline_x, -0.4 + 0.01 * np.cos(spline_x)):
        simm2.addPoint(float(x), float(y))
    knee_def = [(np.array([1.0, 0.0, 0.0]), None, osim.Constant(0.0)),
                (np.array([0.0, 1.0, 0.0]), None, osim.Constant(0.0)),
                (np.array([0.0, 0.0, 1.0]), "knee_angle", osim.LinearFunction(1.0, 0.0)),
                (np.array([1.0, 0.0, 0.0]), "knee_angle", simm),
                (np.array([0.0, 1.0, 0.0]), "knee_angle", simm2),
                (np.array([0.0, 0.0, 1.0]), None, osim.Constant(0.0))]

    def spatial_transform(defs):
        st = osim.SpatialTransform()
        for k, (ax, coord, fn) in enumerate(defs):
            ta = st.updTransformAxis(k)
            ta.setAxis(osim.Vec3(*ax))
            if coord:
                names = osim.ArrayStr()
                names.append(coord)
                ta.setCoordinateNames(names)
            ta.set_function(fn)       # a copy: setFunction would hand a Python-owned object to C++
        return st

    def offsets():
        return osim.Vec3(*rng.normal(size=3) * 0.1), osim.Vec3(*rng.uniform(-0.5, 0.5, 3))
    thigh, shank = om.getBodySet().get("thigh"), om.getBodySet().get("shank")
    om.addJoint(osim.CustomJoint("hip", om.getGround(), *offsets(), thigh, *offsets(), spatial_transform(hip_def)))
    om.addJoint(osim.CustomJoint("knee", thigh, *offsets(), shank, *offsets(), spatial_transform(knee_def)))
    state = om.initSystem()

    def transform(T):
        R = T.R()
        return make_transform(np.array([[R.get(a, b) for b in range(3)] for a in range(3)]),
                              np.array([T.p().get(a) for a in range(3)]))

    def our_function(fn):
        """OpenSim's function as a Model Function: constants, lines and polynomials exactly;
        a SimmSpline's cubic pieces recovered from its values at four points of each piece."""
        name = fn.getConcreteClassName()
        if name == "Constant":
            return Function.constant(fn.calcValue(osim.Vector(1, 0.0)))
        if name == "LinearFunction":
            c = osim.LinearFunction.safeDownCast(fn).getCoefficients()
            return Function.linear(c.get(0), c.get(1))
        if name == "PolynomialFunction":
            c = osim.PolynomialFunction.safeDownCast(fn).getCoefficients()
            return Function.polynomial([c.get(k) for k in range(c.size())][::-1])
        assert name == "SimmSpline"
        coefs = []
        for x0, x1 in zip(spline_x[:-1], spline_x[1:]):
            dx = (x1 - x0) * np.array([0.2, 0.4, 0.6, 0.8])
            y = [fn.calcValue(osim.Vector(1, float(x0 + t))) for t in dx]
            coefs.append(np.linalg.solve(np.vander(dx, 4, increasing=True), y))
        return Function(breaks=spline_x, coefs=np.array(coefs), extrapolate="linear")

    m = Model("osim_leg", gravity=(0, -9.80665, 0))
    for name, (mass, com, I) in bodies.items():
        m.add_link(Link(name, mass, com, I))
    for jname, defs, parent, child in (("hip", hip_def, None, "thigh"), ("knee", knee_def, "thigh", "shank")):
        oj = om.getJointSet().get(jname)
        st = osim.CustomJoint.safeDownCast(oj).getSpatialTransform()
        coords = []
        axes = []
        for k, (ax, coord, _) in enumerate(defs):
            if coord and coord not in coords:
                coords.append(coord)
            axes.append(TransformAxis(ax, coords.index(coord) if coord else -1,
                                      our_function(st.getTransformAxis(k).get_function())))
        m.add_joint(Joint(jname, "custom", parent, child, dof_names=coords, transform_axes=axes,
                          origin=transform(oj.getParentFrame().findTransformInBaseFrame()),
                          child_pose=transform(oj.getChildFrame().findTransformInBaseFrame())))
    m.finalize()
    assert m.dof_names == ["hip_flexion", "hip_adduction", "hip_rotation", "knee_angle"]
    cs = om.getCoordinateSet()
    for _ in range(5):
        q = rng.uniform(-0.8, 0.8, 4)
        q[3] = rng.uniform(-1.9, 0.2)           # inside the knee splines
        v = rng.normal(size=4)
        for k, name in enumerate(m.dof_names):
            cs.get(name).setValue(state, float(q[k]), False)
            cs.get(name).setSpeedValue(state, float(v[k]))
        om.realizeAcceleration(state)
        T = mb.link_transforms(m, q)
        for name in ("thigh", "shank"):
            # the same products of rotations and translations: rounding only
            np.testing.assert_allclose(T[name], transform(om.getBodySet().get(name).getTransformInGround(state)), atol=1e-12)
        udot = np.array([cs.get(name).getAccelerationValue(state) for name in m.dof_names])
        qdd = mb.forward_dynamics(m, q, v, np.zeros(4))
        # two O(n) solvers in double precision on the same system: relative 1e-9
        np.testing.assert_allclose(qdd, udot, rtol=0, atol=1e-9 * np.abs(udot).max())
