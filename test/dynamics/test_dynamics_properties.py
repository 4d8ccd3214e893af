"""The reference engines' own validation checks (formats-and-solvers.md section 5) on our core:
algorithm identities, finite differences on the manifold, free fall, energy, analytic
pendulum, implicit damping, rotor inertia."""
import numpy as np
import pytest

import mbsim_ros as mb
from mbsim_ros.model import Joint, Link, Model
from pin_reference import random_state, random_tree


def pendulum(length=0.5, mass=1.0, Icom=(0.01, 0.01, 0.001), damping=0.0, rotor=0.0, gear=1.0,
             stiffness=0.0):
    m = Model("pendulum")
    m.add_link(Link("bob", mass, [0, 0, -length], np.diag(Icom)))
    m.add_joint(Joint("hinge", "revolute", None, "bob", axis=[1, 0, 0], damping=[damping],
                      rotor_inertia=[rotor], gear_ratio=[gear], stiffness=[stiffness]))
    return m.finalize()


def energy(model, q, v):
    """Kinetic + potential energy (potential of gravity from the link centers of mass)."""
    T = mb.link_transforms(model, q)
    kinetic = 0.5 * v @ mb.mass_matrix(model, q) @ v
    potential = -sum(l.mass * model.gravity @ (T[l.name][:3, :3] @ l.com + T[l.name][:3, 3])
                     for l in model.links)
    return kinetic + potential


@pytest.fixture(scope="module")
def tree():
    return random_tree(np.random.default_rng(3), n_links=12)


def test_crba_inverts_aba_columns(tree):
    """M (CRBA) times the ABA response to unit forces is the identity (DART test_Dynamics, 1e-9)."""
    rng = np.random.default_rng(0)
    for _ in range(20):
        q, v, _ = random_state(rng, tree)
        base = mb.forward_dynamics(tree, q, v, np.zeros(tree.nv))
        cols = np.array([mb.forward_dynamics(tree, q, v, e) - base for e in np.eye(tree.nv)]).T
        assert np.allclose(mb.mass_matrix(tree, q) @ cols, np.eye(tree.nv), atol=1e-9)


def test_rnea_inverts_aba(tree):
    """RNEA(q, v, ABA(q, v, tau)) = tau (Pinocchio unittest/aba.cpp; relative 1e-10)."""
    rng = np.random.default_rng(1)
    for _ in range(50):
        q, v, tau = random_state(rng, tree)
        qdd = mb.forward_dynamics(tree, q, v, tau)
        assert np.allclose(mb.inverse_dynamics(tree, q, v, qdd), tau, rtol=1e-10, atol=1e-10)


def test_jacobians_match_finite_differences_on_the_manifold(tree):
    """J v equals the point's displacement under q (+) eps v, over eps (Pinocchio, step 1e-7:
    central differences leave O(eps^2) truncation and 1e-16/eps rounding, so 1e-6)."""
    rng = np.random.default_rng(2)
    eps = 1e-7
    point = np.array([0.1, -0.2, 0.05])
    for _ in range(10):
        q, v, _ = random_state(rng, tree)
        for link in tree.links[::3]:
            J = mb.frame_jacobian(tree, q, link.name, point)

            def world_point(qq):
                T = mb.link_transforms(tree, qq)[link.name]
                return T[:3, :3] @ point + T[:3, 3]
            fd = (world_point(mb.integrate(tree, q, v, eps)) - world_point(mb.integrate(tree, q, v, -eps))) / (2 * eps)
            assert np.allclose(J[:3] @ v, fd, atol=1e-6 * max(1, np.abs(fd).max()))


@pytest.mark.parametrize("axis", range(3))
def test_free_fall_center_of_mass_accelerates_at_g(axis):
    """A floating chain without contact: the center of mass falls at g whatever the joints do
    (DART), for gravity along each axis. RK4 over 0.2 s, compared with com0 + vcom0 t + g t^2/2;
    RK4 error at dt = 1 ms is ~1e-10 here, so 1e-8 m."""
    rng = np.random.default_rng(10 + axis)
    model = random_tree(rng, n_links=8, types=("revolute", "ball", "universal", "prismatic"))
    g = np.zeros(3)
    g[axis] = -9.81
    model.gravity = g
    q, v, _ = random_state(rng, model)
    v *= 0.3
    sim = mb.Simulation(model, dt=1e-3, integrator="rk4")
    sim.q, sim.v = q, v
    com0 = mb.center_of_mass(model, q)
    J_com = sum(l.mass * mb.frame_jacobian(model, q, l.name, l.com)[:3] for l in model.links) / model.total_mass
    vcom0 = J_com @ v
    sim.step(200)
    expected = com0 + vcom0 * sim.t + 0.5 * g * sim.t ** 2
    assert np.allclose(mb.center_of_mass(model, sim.q), expected, atol=1e-8)


def test_energy_drift_rk4_smaller_than_semi_implicit_euler():
    """MuJoCo's ordering on a conservative pendulum over 500 steps: |dE RK4| < |dE Euler|."""
    model = random_tree(np.random.default_rng(5), n_links=3, types=("revolute",), floating=False)
    drift = {}
    for integrator in ("rk4", "semi-implicit-euler"):
        sim = mb.Simulation(model, dt=2e-3, integrator=integrator)
        sim.q = [1.0, -0.5, 0.7]
        e0 = energy(model, sim.q, sim.v)
        sim.step(500)
        drift[integrator] = abs(energy(model, sim.q, sim.v) - e0)
    assert drift["rk4"] < drift["semi-implicit-euler"]
    assert drift["rk4"] < 1e-6 * abs(e0) + 1e-9


@pytest.mark.parametrize("integrator", ["rk4", "semi-implicit-euler"])
def test_small_angle_pendulum_period(integrator):
    """T = 2 pi sqrt(I_pivot / (m g l)) at 0.01 rad (the small-angle error is 6e-6 relative);
    period from zero crossings, interpolated; 1e-4 relative covers the integrators' phase error."""
    model = pendulum()
    I_pivot, mgl = 0.01 + 1.0 * 0.25, 1.0 * 9.80665 * 0.5
    expected = 2 * np.pi * np.sqrt(I_pivot / mgl)
    sim = mb.Simulation(model, dt=1e-4, integrator=integrator)
    sim.q = [0.01]
    crossings, prev = [], sim.q[0]
    while len(crossings) < 5:
        sim.step()
        if prev > 0 >= sim.q[0]:
            crossings.append(sim.t - sim.dt * sim.q[0] / (sim.q[0] - prev))
        prev = sim.q[0]
    period = np.mean(np.diff(crossings))
    assert abs(period - expected) < 1e-4 * expected


def test_implicit_damping_converges_to_explicit_monotonically():
    """A damped rotor in zero gravity: v(t) = v0 exp(-D t / I). The implicitly damped Euler
    step's error at t = 1 s shrinks monotonically as dt halves (MuJoCo), toward the exact."""
    model = pendulum(damping=0.5)
    model.gravity = np.zeros(3)
    inertia = 0.01 + 0.25
    exact = 2.0 * np.exp(-0.5 / inertia)
    errors = []
    for dt in (0.02, 0.01, 0.005, 0.0025, 0.00125):
        sim = mb.Simulation(model, dt=dt)
        sim.v = [2.0]
        sim.step(int(round(1.0 / dt)))
        errors.append(abs(sim.v[0] - exact))
    assert all(b < a for a, b in zip(errors, errors[1:]))
    assert errors[-1] < 1e-3


def test_implicit_spring_is_stable_where_explicit_would_diverge():
    """DART integrates stiff joint springs implicitly: at dt = 10 ms a spring of period 6 ms
    stays bounded and decays toward its rest position (explicit Euler would grow)."""
    m = Model("spring")
    m.add_link(Link("mass", 1.0, [0, 0, 0], np.diag([0.01, 0.01, 0.01])))
    m.add_joint(Joint("slide", "prismatic", None, "mass", axis=[1, 0, 0], stiffness=[1e6],
                      rest_position=[0.1]))
    m.gravity = np.zeros(3)
    sim = mb.Simulation(m.finalize(), dt=0.01)
    sim.step(500)
    assert abs(sim.q[0] - 0.1) < 1e-3


def test_rotor_inertia_acts_as_geared_rotor():
    """rotor_inertia J with gear ratio G adds G^2 J about the axis (MuJoCo armature equivalence;
    VRML rotorInertia * gearRatio^2): same qdd as a link with that much more inertia."""
    J, G = 2e-4, 30.0
    geared = pendulum(rotor=J, gear=G)
    heavier = pendulum(Icom=(0.01 + G * G * J, 0.01, 0.001))
    for q in (0.3, -1.2, 2.0):
        a = mb.forward_dynamics(geared, [q], [0.7], [0.2])
        b = mb.forward_dynamics(heavier, [q], [0.7], [0.2])
        assert np.allclose(a, b, rtol=1e-12)
    assert mb.mass_matrix(geared, [0.0])[0, 0] == pytest.approx(0.01 + 0.25 + G * G * J, rel=1e-12)


def test_coulomb_friction_holds_below_and_slides_above_its_limit():
    """Regularized Coulomb friction F: a torque below F leaves the joint creeping slower than
    friction_velocity; above F it accelerates at (T - F) / I (within 1%)."""
    m = pendulum()
    m.gravity = np.zeros(3)
    m.joints[0].friction = np.array([1.0])
    m.finalize()
    inertia = 0.26
    sim = mb.Simulation(m, dt=1e-3)
    sim.tau = [0.5]
    sim.step(1000)
    assert abs(sim.v[0]) < sim.friction_velocity
    sim.reset()
    sim.tau = [3.0]
    sim.step(200)
    v1 = sim.v[0]
    sim.step(200)
    assert (sim.v[0] - v1) / 0.2 == pytest.approx((3.0 - 1.0) / inertia, rel=0.01)


def test_quaternions_stay_unit_on_the_manifold():
    model = random_tree(np.random.default_rng(8), n_links=5, types=("ball", "free"))
    sim = mb.Simulation(model, dt=1e-3)
    sim.v = np.random.default_rng(0).normal(size=model.nv) * 5
    sim.step(5000)
    for j in model.joints:
        if j.type in ("ball", "free"):
            quat = sim.q[j.q_index + j.nq - 4: j.q_index + j.nq]
            assert abs(np.linalg.norm(quat) - 1.0) < 1e-12


def test_torque_free_rigid_body_conserves_angular_momentum():
    """A free tumbling body in zero gravity: world angular momentum is constant (RK4, 1e-9)."""
    m = Model("body", gravity=(0, 0, 0))
    I = np.diag([0.1, 0.2, 0.35])
    m.add_link(Link("b", 2.0, [0, 0, 0], I))
    m.add_joint(Joint("root", "free", None, "b"))
    sim = mb.Simulation(m.finalize(), dt=1e-3, integrator="rk4")
    sim.v = [0.1, 0.2, 0.3, 1.0, 4.0, 0.5]

    def momentum():
        R = mb.link_transforms(m, sim.q)["b"][:3, :3]
        return R @ I @ sim.v[3:]
    L0 = momentum()
    sim.step(2000)
    assert np.allclose(momentum(), L0, atol=1e-9)
