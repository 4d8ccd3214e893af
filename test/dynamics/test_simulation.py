"""Simulation: initial state, several models, held forces, reset, and failing loudly."""
import numpy as np
import pytest

import mbsim_ros as mb
from mbsim_ros.model import Joint, Link, Model, ModelError


def body(name, joint_type="free", q0=None, v0=None, gravity=(0, 0, -9.80665)):
    m = Model(name, gravity=gravity)
    m.add_link(Link(f"{name}_link", 1.0, [0, 0, 0], np.diag([0.1, 0.1, 0.1])))
    m.add_joint(Joint(f"{name}_joint", joint_type, None, f"{name}_link", q0=q0, v0=v0))
    return m.finalize()


def test_starts_at_the_models_initial_state_and_resets_to_it():
    m = body("a", "prismatic", q0=[0.3], v0=[1.5])
    sim = mb.Simulation(m, dt=0.01)
    assert sim.t == 0.0 and sim.q.tolist() == [0.3] and sim.v.tolist() == [1.5]
    sim.tau = [2.0]
    sim.step(10)
    assert sim.t == pytest.approx(0.1)
    assert sim.tau.tolist() == [2.0]          # held until changed
    sim.reset()
    assert (sim.t, sim.q.tolist(), sim.v.tolist(), sim.tau.tolist()) == (0.0, [0.3], [1.5], [0.0])


def test_several_models_concatenate_in_order_and_fall_independently():
    a = body("a", q0=[0, 0, 1, 0, 0, 0, 1])
    b = body("b", "prismatic", q0=[0.5])
    sim = mb.Simulation([a, b], dt=1e-3)
    assert (sim.nq, sim.nv) == (8, 7)
    assert sim.q.tolist() == [0, 0, 1, 0, 0, 0, 1, 0.5]
    sim.step(100)
    # both fall by g dt^2 n(n+1)/2 (semi-implicit Euler); the slider's axis is z, the default
    drop = 9.80665 * 1e-6 * 100 * 101 / 2
    assert sim.q[2] == pytest.approx(1 - drop, rel=1e-12)
    assert sim.q[7] == pytest.approx(0.5 - drop, rel=1e-12)
    assert set(sim.link_transforms()) == {"a_link", "b_link"}


def test_models_with_different_gravity_are_refused():
    with pytest.raises(ModelError, match="gravity"):
        mb.Simulation([body("a"), body("b", gravity=(0, 0, -1.6))])


def test_link_names_repeated_across_models_are_scoped_by_model():
    """Two models named alike: the second becomes entity a_2 and its clashing names a_2/<name>
    (model/names.py); both fall alike."""
    sim = mb.Simulation([body("a"), body("a")])
    assert sim.model_names == ["a", "a_2"]
    assert set(sim.link_transforms()) == {"a_link", "a_2/a_link"}
    sim.step(10)
    assert sim.q[2] == sim.q[9]


def test_gravity_set_before_construction_is_used():
    m = body("a")
    m.gravity = np.array([0.0, 0.0, -1.62])
    sim = mb.Simulation(m, dt=1e-3)
    sim.step(1)
    assert sim.v[2] == pytest.approx(-1.62e-3)


def test_gravity_changed_between_steps_in_place_or_replaced_holds_from_the_next_step():
    m = body("a")
    sim = mb.Simulation(m, dt=1e-3)
    sim.step(1)
    assert sim.v[2] == pytest.approx(-9.80665e-3)
    m.gravity[2] = -1.62                      # in place
    sim.step(1)
    assert sim.v[2] == pytest.approx(-9.80665e-3 - 1.62e-3)
    m.gravity = [1.0, 0.0, 0.0]               # replaced, by a list
    sim.step(1)
    assert sim.v[0] == pytest.approx(1e-3) and sim.v[2] == pytest.approx(-9.80665e-3 - 1.62e-3)
    m.gravity = np.zeros((3, 2))[:, 0]        # a strided view: copied, read correctly
    sim.step(1)
    assert sim.v[0] == pytest.approx(1e-3)


def test_a_model_keeps_one_gravity_array_that_setting_writes_into_and_copies_what_it_is_given():
    """The step reads the first model's gravity array (by reference, kept by the simulation):
    setting gravity writes into that array, and the array given is copied, not adopted."""
    given = np.array([0.0, 0.0, -1.62])
    m = Model("m", gravity=given)
    given[2] = 5.0
    own = m.gravity
    assert own[2] == -1.62
    m.gravity = given
    assert m.gravity is own and own.tolist() == [0.0, 0.0, 5.0]
    given[2] = 7.0
    assert own[2] == 5.0


def test_a_model_spawned_and_removed_is_stepped_on_the_new_state_arrays():
    """add_model and remove_model replace q, v and tau (the step reads them by address): a body
    spawned beside another falls as a lone copy of it does (the two never meet), and after its
    removal the first body goes on as a lone copy of that one."""
    a, b = body("a", q0=[0, 0, 0, 0, 0, 0, 1]), body("b", v0=[0.5, 0, 0, 0, 0, 0.3])
    sim = mb.Simulation(a, dt=1e-3, contact="none")
    alone_a = mb.Simulation(a, dt=1e-3, contact="none")
    sim.step(10)
    alone_a.step(10)
    sim.add_model(b, "b", pose=((5.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0)))
    alone_b = mb.Simulation(b, dt=1e-3, contact="none", poses=[((5.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0))])
    sim.step(50)
    alone_a.step(50)
    alone_b.step(50)
    qa, va = sim.model_slices("a")
    qb, vb = sim.model_slices("b")
    np.testing.assert_allclose(sim.q[qb], alone_b.q, atol=1e-12)
    np.testing.assert_allclose(sim.v[vb], alone_b.v, atol=1e-12)
    np.testing.assert_allclose(sim.q[qa], alone_a.q, atol=1e-12)
    assert alone_b.v[2] == pytest.approx(-9.80665 * 0.05)
    sim.remove_model("b")
    sim.step(20)
    alone_a.step(20)
    np.testing.assert_allclose(sim.q, alone_a.q, atol=1e-12)
    np.testing.assert_allclose(sim.v, alone_a.v, atol=1e-12)


@pytest.mark.parametrize("bad", [9.81, (0.0, -9.81), np.zeros((1, 3))])
def test_gravity_that_is_not_three_numbers_is_refused(bad):
    m = body("a")
    with pytest.raises(ValueError, match="gravity must be 3 numbers"):
        m.gravity = bad
    with pytest.raises(ValueError, match="gravity must be 3 numbers"):
        Model("b", gravity=bad)


def test_blow_up_raises_simulation_error_naming_the_joint_and_keeps_the_last_finite_state():
    m = Model("stiff", gravity=(0, 0, 0))
    m.add_link(Link("base", 1.0, [0, 0, 0], np.eye(3) * 0.1))
    m.add_link(Link("tip", 1e-6, [0, 0, 0], np.eye(3) * 1e-9))
    m.add_joint(Joint("root", "fixed", None, "base"))
    m.add_joint(Joint("flimsy", "prismatic", "base", "tip", stiffness=[1e9]))
    sim = mb.Simulation(m.finalize(), dt=0.01, integrator="rk4")   # explicit: unstable spring
    sim.q = [0.01]
    with pytest.raises(mb.SimulationError, match="'flimsy'"):
        sim.step(10000)
    assert np.all(np.isfinite(sim.q)) and np.all(np.isfinite(sim.v))


@pytest.mark.parametrize("kwargs, message", [
    (dict(dt=0.0), "dt"), (dict(dt=float("nan")), "dt"), (dict(integrator="euler"), "integrator"),
])
def test_bad_arguments_say_what_was_expected(kwargs, message):
    with pytest.raises(ValueError, match=message):
        mb.Simulation(body("a"), **kwargs)


def test_wrong_state_length_is_a_clear_error():
    with pytest.raises(ValueError, match="q: expected a vector of length 7"):
        mb.forward_dynamics(body("a"), np.zeros(3), np.zeros(6), np.zeros(6))


def test_massless_moving_subtree_is_a_model_error_naming_the_joint():
    m = Model("m")
    m.add_link(Link("ghost"))
    m.add_joint(Joint("spin", "revolute", None, "ghost"))
    with pytest.raises(ModelError, match="'spin'.*no mass"):
        mb.Simulation(m.finalize())


def test_compiled_cache_follows_model_edits_after_finalize():
    m = body("a", "prismatic")
    m.gravity = np.array([0.0, 0.0, -1.0])
    a1 = mb.forward_dynamics(m, [0.0], [0.0], [0.0])[0]
    m.links[0].mass = 2.0
    m.finalize()
    a2 = mb.forward_dynamics(m, [0.0], [0.0], [1.0])[0]
    assert (a1, a2) == pytest.approx((-1.0, (1.0 - 2.0) / 2.0))
