"""Massless bodies that constraints determine (OpenSim's massless auxiliary bodies moved by a
CoordinateCouplerConstraint): the Simulation solves the constrained system with the singular
mass matrix, as Simbody does, instead of refusing it or adding mass.

Ground truth, analytic: a massive wheel (inertia I about z, gravity along -y so it has no
gravity torque) and a massless arm on its own z axis whose angle is k times the wheel's
(a coupler). A torque tau_b on the arm's DOF reaches the wheel through the coupler: the
wheel's acceleration is (tau_a + k tau_b) / I exactly, and semi-implicit Euler from rest gives
q_n = a dt^2 n (n + 1) / 2 exactly."""
import math

import numpy as np
import pytest

import mbsim_ros as mb
from mbsim_ros.model import CoordinateCoupler, Function, Joint, Link, Model, ModelError
from mbsim_ros.model.transforms import make_transform

I_WHEEL, K = 0.3, 2.5
TAU_A, TAU_B = 0.4, -0.1


def geared(massless_free=False):
    m = Model("geared", gravity=(0.0, -9.81, 0.0))
    m.add_link(Link("wheel", 2.0, [0, 0, 0], np.diag([0.1, 0.1, I_WHEEL])))
    m.add_link(Link("arm", 0.0, [0, 0, 0], np.zeros((3, 3))))
    m.add_joint(Joint("a", "revolute", None, "wheel"))
    m.add_joint(Joint("b", "revolute", None, "arm", origin=make_transform(p=[1.0, 0, 0])))
    if massless_free:             # a second massless DOF nothing determines
        m.add_link(Link("tip", 0.0, [0, 0, 0], np.zeros((3, 3))))
        m.add_joint(Joint("c", "revolute", "arm", "tip", origin=make_transform(p=[0.5, 0, 0])))
    m.couplers.append(CoordinateCoupler("gear", "b", "a", Function.linear(K)))
    return m.finalize()


def test_a_massless_body_a_coupler_determines_moves_as_the_constrained_system_says():
    sim = mb.Simulation(geared(), dt=1e-3, contact="none", cfm=0.0, bound_massless=True)
    assert any("solved with the constraints" in n for n in sim.notes), sim.notes
    n = 500
    sim.tau[:] = [TAU_A, TAU_B]
    sim.step(n)
    a = (TAU_A + K * TAU_B) / I_WHEEL
    q_exact = a * sim.dt ** 2 * n * (n + 1) / 2
    # cfm 0: the coupler row holds exactly; what is left is rounding in a dense 2x2 solve over
    # 500 steps (1e-9 relative, far below the 1e-2 a missing coupler torque would give)
    assert sim.q[0] == pytest.approx(q_exact, rel=1e-9)
    assert sim.v[0] == pytest.approx(a * sim.dt * n, rel=1e-9)
    assert sim.q[1] == pytest.approx(K * sim.q[0], rel=1e-9)


def test_default_cfm_keeps_the_constrained_answer_within_its_regularization():
    sim = mb.Simulation(geared(), dt=1e-3, contact="none")
    sim.tau[:] = [TAU_A, TAU_B]
    sim.step(500)
    a = (TAU_A + K * TAU_B) / I_WHEEL
    # cfm 1e-5 softens the coupler row by that fraction: 1e-3 relative is 100 x that
    assert sim.v[0] == pytest.approx(a * sim.dt * 500, rel=1e-3)
    assert sim.q[1] == pytest.approx(K * sim.q[0], rel=1e-3)


def test_a_massless_dof_no_constraint_determines_is_still_refused_by_name():
    with pytest.raises(ModelError, match="joint 'c' moves only links with no mass"):
        mb.Simulation(geared(massless_free=True), dt=1e-3, contact="none", bound_massless=False)


def test_two_massless_dofs_coupled_only_to_each_other_are_refused_by_name():
    m = geared()
    m.couplers[0] = CoordinateCoupler("gear", "b", "c", Function.linear(K))
    m.add_link(Link("tip", 0.0, [0, 0, 0], np.zeros((3, 3))))
    m.add_joint(Joint("c", "revolute", "arm", "tip", origin=make_transform(p=[0.5, 0, 0])))
    m.finalize()
    with pytest.raises(ModelError, match="joints 'b', 'c' move only links with no mass"):
        mb.Simulation(m, dt=1e-3, contact="none")
