"""BatchSimulation: n worlds stepped in one call compute bit for bit what n separate
Simulations compute (the oracle is the one-world dynamics Physics, whose step mb.Simulation
runs; equality is exact, np.array_equal, because each world goes through the same step kernel
with its own workspaces)."""
import pathlib

import numpy as np
import pytest

import mbsim_ros as mb
from mbsim_ros.dynamics import Physics

BUNDLED = pathlib.Path(mb.__file__).parent / "data" / "models"
KP, KD = 2000.0, 20.0


@pytest.fixture(scope="module")
def sr1_world():
    return [mb.load_model(BUNDLED / "SR1.wrl"), mb.load_model(BUNDLED / "floor.wrl")]


def pd(q, v, q_ref):
    """PD torques on the joints (not the free base), rows = worlds or one world."""
    tau = np.zeros(v.shape)
    tau[..., 6:] = KP * (q_ref[..., 7:] - q[..., 7:]) - KD * v[..., 6:]
    return tau


@pytest.mark.parametrize("contact", ["lcp", "none"])
def test_worlds_with_different_states_and_controls_equal_separate_simulations_bit_for_bit(sr1_world, contact):
    """SR1 on the floor, 3 worlds: different joint offsets, base velocities and PD targets,
    torques recomputed every step; 300 steps (with contact: the feet land and the contact
    sets differ between worlds)."""
    n, steps = 3, 300
    batch = mb.BatchSimulation(sr1_world, n, dt=1e-3, contact=contact)
    rng = np.random.default_rng(7)
    q0 = batch.q.copy()
    q0[:, 7:batch.prototype.models[0].nq] += 0.05 * rng.standard_normal((n, sr1_world[0].nq - 7))
    q0[:, 2] += np.array([0.0, 0.01, 0.03])            # world 0 touching, the others dropped
    v0 = np.zeros_like(batch.v)
    v0[:, :6] = 0.2 * rng.standard_normal((n, 6))
    q_ref = q0 + 0.02 * rng.standard_normal(q0.shape)
    batch.q, batch.v = q0, v0
    contacts = np.zeros((steps, n), dtype=np.int64)
    for k in range(steps):
        batch.tau = pd(batch.q, batch.v, q_ref)
        batch.step()
        contacts[k] = batch.contact_counts()
    for w in range(n):
        sim = Physics(sr1_world, dt=1e-3, contact=contact)
        sim.q, sim.v = q0[w], v0[w]
        for k in range(steps):
            sim.tau = pd(sim.q, sim.v, q_ref[w])
            sim.step()
            assert sim.stats()["contacts"] == contacts[k, w]
        assert np.array_equal(sim.q, batch.q[w]) and np.array_equal(sim.v, batch.v[w])
        assert np.array_equal(sim._data.a_step, batch.acceleration[w])
        assert sim.t == batch.t[w]
    if contact == "lcp":
        assert contacts[-1].min() > 0 and len(set(contacts[-50:].ravel())) > 1
    else:
        assert contacts.max() == 0
    assert not np.array_equal(batch.q[0], batch.q[1])


def test_one_step_call_of_many_steps_equals_single_steps(sr1_world):
    batch = mb.BatchSimulation(sr1_world, 2, dt=1e-3)
    batch.tau[1, 6:] = 5.0
    other = mb.BatchSimulation(sr1_world, 2, dt=1e-3)
    other.tau[:] = batch.tau
    batch.step(50)
    for _ in range(50):
        other.step()
    assert np.array_equal(batch.q, other.q) and np.array_equal(batch.v, other.v)
    assert np.array_equal(batch.t, [50 * 1e-3] * 2)


def test_a_world_that_blows_up_is_named_and_kept_while_the_others_go_on(sr1_world):
    batch = mb.BatchSimulation(sr1_world, 3, dt=1e-3)
    batch.step(2)
    before = batch.q[1].copy()
    batch.tau[1, 10] = np.nan
    with pytest.raises(mb.SimulationError, match=r"1 of 3 worlds blew up: world 1 \(joint"):
        batch.step(5)
    assert np.array_equal(batch.q[1], before)
    assert batch.t[1] == pytest.approx(0.002) and batch.t[0] == pytest.approx(0.007)
    assert list(batch.blown_up) == [1] and batch.blown_up[1] in batch.prototype.compiled.joint_of_v
    batch.reset([1])
    assert batch.t[1] == 0.0 and np.array_equal(batch.q[1], batch.prototype.q)


def test_a_world_set_from_a_simulation_continues_it_bit_for_bit(sr1_world):
    """A Physics dropped onto the floor and stepped with PD torques (contacts, warm starts, solver
    state under way) is handed to world 1 of 2 mid-run; both then take the same steps. One world
    alone (n_worlds 1) as well."""
    rng = np.random.default_rng(3)
    sim = Physics(sr1_world, dt=1e-3)
    q_ref = sim.q.copy()
    sim.q[7:sr1_world[0].nq] += 0.05 * rng.standard_normal(sr1_world[0].nq - 7)
    sim.q[2] += 0.01
    for _ in range(60):
        sim.tau = pd(sim.q, sim.v, q_ref)
        sim.step()
    assert sim.stats()["contacts"] > 0
    batch, alone = mb.BatchSimulation(sr1_world, 2, dt=1e-3), mb.BatchSimulation(sr1_world, 1, dt=1e-3)
    batch.set_world(1, sim)
    alone.set_world(0, sim)
    fresh = Physics(sr1_world, dt=1e-3)
    assert batch.t[1] == sim.t and batch.t[0] == 0.0
    stats, cforce = batch.solver_arrays()
    for _ in range(100):
        sim.tau = pd(sim.q, sim.v, q_ref)
        fresh.tau = pd(fresh.q, fresh.v, q_ref)
        batch.tau = pd(batch.q, batch.v, q_ref)
        alone.tau = pd(alone.q, alone.v, q_ref)
        sim.step(), fresh.step(), batch.step(), alone.step()
        assert np.array_equal(stats[1], sim.constraints.solver.stats)
        assert np.array_equal(cforce[1], sim.constraints.solver.cforce)
    assert np.array_equal(batch.q[1], sim.q) and np.array_equal(batch.v[1], sim.v) and batch.t[1] == sim.t
    assert np.array_equal(alone.q[0], sim.q) and np.array_equal(alone.v[0], sim.v)
    assert np.array_equal(batch.q[0], fresh.q) and np.array_equal(batch.v[0], fresh.v)   # untouched


def test_set_world_takes_another_initial_pose_but_refuses_another_model(sr1_world):
    import copy
    batch = mb.BatchSimulation(sr1_world, 2, dt=1e-3)
    bent = copy.deepcopy(sr1_world)
    knee = bent[0].joint("RLEG_KNEE")
    knee.q0[:] = 0.4                  # the initial state only: the same world
    bent[0].finalize()
    batch.set_world(1, Physics(bent, dt=1e-3))
    assert batch.q[1, knee.q_index] == 0.4 and batch.q[0, knee.q_index] != 0.4
    knee.damping[:] = 3.0             # a parameter the step reads: another world
    bent[0].finalize()
    with pytest.raises(ValueError, match="set_world: not the same world as the batch's"):
        batch.set_world(1, Physics(bent, dt=1e-3))
    with pytest.raises(ValueError, match="set_world: not the same world"):
        batch.set_world(1, Physics(sr1_world, dt=2e-3))


def test_bad_arguments_are_refused_with_one_clear_line(sr1_world):
    with pytest.raises(ValueError, match="n_worlds must be a whole number >= 1, got 0"):
        mb.BatchSimulation(sr1_world, 0)
    batch = mb.BatchSimulation(sr1_world, 2)
    with pytest.raises(ValueError, match=r"controls: expected shape \(2, 0\)"):
        batch.controls = np.zeros((2, 3))
    with pytest.raises(KeyError, match="no input named 'x'"):
        batch.set_input("x", 1.0)
    with pytest.raises(KeyError, match="no actuator named 'x'; the actuators are none"):
        batch.set_control("x", 1.0)


def test_link_poses_per_world_match_the_one_world_kinematics(sr1_world):
    batch = mb.BatchSimulation(sr1_world, 2)
    batch.q[1, 2] += 0.5
    R, p = batch.link_poses()
    sim = Physics(sr1_world)
    for w in range(2):
        sim.q = batch.q[w]
        Rs, ps = sim.link_poses()
        assert np.array_equal(R[w], Rs) and np.array_equal(p[w], ps)
    assert p[1, 0, 2] - p[0, 0, 2] == pytest.approx(0.5)
