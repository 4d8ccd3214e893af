"""Contact with friction against analytic mechanics and conservation laws (DART-style LCP).

Tolerances: the LCP contact is velocity-level with ERP 0.01 and CFM 1e-5 (DART's defaults), so
rest is exact up to the penetration of the landing step (v dt) and friction is exact Coulomb
(the friction basis follows the sliding); what is left is the time discretization, O(dt).
"""
import pathlib

import numpy as np
import pytest

import mbsim_ros as mb
from mbsim_ros.model import Joint, Link, Model, Shape

G = 9.80665
BUNDLED = pathlib.Path(mb.__file__).parent / "data" / "models"


def ground(mu=1.0, e=1.0, gravity=(0, 0, -G), name="ground"):
    m = Model(name, gravity=gravity)
    m.add_link(Link(name, collisions=[Shape("plane", friction=mu, restitution=e)]))
    m.add_joint(Joint(f"{name}_weld", "fixed", None, name))
    return m.finalize()


def block(name="box", size=0.2, mass=1.0, mu=1.0, e=0.0, z=None, v0=None, gravity=(0, 0, -G),
          shape="box"):
    """A free box (or sphere of diameter `size`) resting with its bottom at height z."""
    m = Model(name, gravity=gravity)
    if shape == "box":
        inertia = np.eye(3) * mass * size ** 2 / 6
        col = Shape("box", size=[size, size, size], friction=mu, restitution=e)
    else:
        inertia = np.eye(3) * 0.4 * mass * (size / 2) ** 2
        col = Shape("sphere", radius=size / 2, friction=mu, restitution=e)
    m.add_link(Link(name, mass, [0, 0, 0], inertia, collisions=[col]))
    z = -1e-5 if z is None else z
    m.add_joint(Joint(f"{name}_free", "free", None, name, q0=[0, 0, z + size / 2, 0, 0, 0, 1], v0=v0))
    return m.finalize()


def test_a_dropped_box_comes_to_rest_on_four_corners_carrying_its_weight():
    sim = mb.Simulation([block(z=0.1), ground()], dt=1e-3)
    deepest = 0.0
    for _ in range(1500):
        sim.step()
        deepest = max([deepest] + [c.depth for c in sim.contacts()])
        if sim.t >= 1.0:
            assert np.abs(sim.v[:3]).max() < 1e-3                # no drift above 1 mm/s
            assert np.abs(sim.v[3:]).max() * 0.1 < 1e-3          # nor at the corners
    assert deepest < 2e-3
    contacts = sim.contacts()
    assert len(contacts) == 4
    assert all(c.link_a == "box" and c.link_b == "ground" or c.link_a == "ground" for c in contacts)
    up = sum(c.force[2] if c.link_a == "box" else -c.force[2] for c in contacts)
    assert up == pytest.approx(G, rel=1e-3)                     # resting: exactly its weight
    for c in contacts:
        assert abs(abs(c.normal[2]) - 1) < 1e-12


def test_a_box_pushed_along_the_ground_decelerates_at_mu_g():
    mu = 0.5
    sim = mb.Simulation([block(mu=mu, v0=[2, 0, 0, 0, 0, 0]), ground(mu=mu)], dt=1e-3)
    sim.step(100)
    v1 = sim.v[0]
    sim.step(200)
    v2 = sim.v[0]
    assert (v1 - v2) / 0.2 == pytest.approx(mu * G, rel=0.02)
    sim.step(300)                           # stopped (after 0.41 s) and stays stopped
    assert abs(sim.v[0]) < 1e-4


@pytest.mark.parametrize("degrees", [20.0, 35.0])
def test_on_an_incline_a_box_sticks_below_atan_mu_and_slides_above_it(degrees):
    mu = 0.5
    th = np.radians(degrees)
    gravity = G * np.array([np.sin(th), 0, -np.cos(th)])    # the ground tilted by th about y
    sim = mb.Simulation([block(mu=mu, gravity=gravity), ground(mu=mu, gravity=gravity)], dt=1e-3)
    sim.step(200)
    x1, v1 = sim.q[0], sim.v[0]
    sim.step(500)
    if th < np.arctan(mu):
        assert abs(sim.q[0] - x1) < 1e-5 and abs(sim.v[0]) < 1e-5
    else:
        a = G * (np.sin(th) - mu * np.cos(th))
        assert (sim.v[0] - v1) / 0.5 == pytest.approx(a, rel=0.02)


def test_a_ball_bounces_to_e_squared_of_its_height():
    e, h = 0.8, 0.5
    sim = mb.Simulation([block("ball", size=0.1, e=e, z=h, shape="sphere"), ground(e=1.0)], dt=1e-3)
    bottom = []
    bounced = False
    for _ in range(2000):
        sim.step()
        bounced = bounced or sim.v[2] > 0
        if bounced:
            bottom.append(sim.q[2] - 0.05)
            if sim.v[2] < 0 and len(bottom) > 10:
                break
    assert max(bottom) == pytest.approx(e ** 2 * h, rel=0.05)


def test_two_free_bodies_colliding_in_zero_gravity_conserve_linear_momentum():
    zero = (0, 0, 0)
    a = block("a", shape="sphere", size=0.2, mass=1.0, mu=0.7, e=0.5, gravity=zero, z=0.0,
              v0=[1.0, 0.2, 0, 0.5, 0, 1.0])
    b = block("b", shape="sphere", size=0.3, mass=2.5, mu=0.7, e=0.5, gravity=zero, z=0.0,
              v0=[-0.5, 0, 0.1, 0, 2.0, 0])
    a.joints[0].q0[:3] = [-0.3, 0.0, 0.0]
    b.joints[0].q0[:3] = [0.3, 0.08, 0.05]
    sim = mb.Simulation([a, b], dt=1e-3)

    def momentum():
        # the free joint's v is in the body frame: rotate it into the world
        out = np.zeros(3)
        for k, (mass, name) in enumerate([(1.0, "a"), (2.5, "b")]):
            R = sim.link_transforms()[name][:3, :3]
            out += mass * R @ sim.v[6 * k:6 * k + 3]
        return out

    p0 = momentum()
    touched = False
    for _ in range(600):
        sim.step()
        touched = touched or bool(sim.contacts())
    assert touched
    np.testing.assert_allclose(momentum(), p0, atol=1e-9)


def test_penalty_contact_carries_the_weight_with_a_spring_deflection():
    k = 1e5
    sim = mb.Simulation([block(mass=2.0), ground()], dt=1e-4, contact="penalty",
                        contact_stiffness=k, contact_damping=400.0)
    sim.step(20000)
    contacts = sim.contacts()
    assert len(contacts) == 4
    up = sum(c.force[2] if c.link_a == "box" else -c.force[2] for c in contacts)
    assert up == pytest.approx(2.0 * G, rel=1e-3)
    assert np.mean([c.depth for c in contacts]) == pytest.approx(2.0 * G / (4 * k), rel=0.05)


def test_rk4_refuses_constraints_it_cannot_enforce_and_accepts_penalty_contact():
    with pytest.raises(ValueError, match="LCP contact"):
        mb.Simulation([block(), ground()], integrator="rk4")
    sim = mb.Simulation([block(), ground()], integrator="rk4", contact="penalty", dt=2e-4)
    sim.step(2000)
    assert abs(sim.q[2] - 0.1) < 1e-3


def test_contact_none_lets_bodies_pass_through():
    sim = mb.Simulation([block(z=0.01), ground()], dt=1e-3, contact="none")
    sim.step(200)
    assert sim.q[2] < -0.05 and sim.contacts() == []


def test_bad_solver_options_are_refused_by_name():
    with pytest.raises(ValueError, match="contact method 'soft'"):
        mb.Simulation(block(), contact="soft")
    with pytest.raises(TypeError, match="unknown solver option 'erq'"):
        mb.Simulation(block(), erq=0.1)
    with pytest.raises(ValueError, match="cfm = -1"):
        mb.Simulation(block(), cfm=-1)


def test_sr1_stands_on_the_floor_with_pd_held_joints_carrying_its_weight():
    """The bundled SR1 (130.8 kg) on the bundled floor, every joint held at its initial angle by
    PD torques: after settling, the contact normal forces sum to its weight within 1% and the
    waist stays up for 5 s."""
    robot = mb.load_model(BUNDLED / "SR1.wrl")
    floor = mb.load_model(BUNDLED / "floor.wrl")
    sim = mb.Simulation([robot, floor], dt=1e-3)
    q_ref = sim.q.copy()
    kp, kd = 2000.0, 20.0
    weight = robot.total_mass * G
    waist_low = np.inf
    for k in range(5000):
        sim.tau[6:] = kp * (q_ref[7:] - sim.q[7:]) - kd * sim.v[6:]
        sim.step()
        waist_low = min(waist_low, sim.q[2])
    assert waist_low > q_ref[2] - 0.02
    support = sum(c.normal @ c.force if c.link_a != "FLOOR" else -c.normal @ c.force
                  for c in sim.contacts())
    assert support == pytest.approx(weight, rel=0.01)
    assert {c.link_a for c in sim.contacts()} | {c.link_b for c in sim.contacts()} >= {
        "LLEG_ANKLE_R", "RLEG_ANKLE_R"}
